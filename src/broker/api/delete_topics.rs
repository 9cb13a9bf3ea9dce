//! DeleteTopics: by name (all versions) or by topic id (v6).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::broker::ErrorCode;

/// DeleteTopics v5 added error messages; v6 topic ids.
const ERROR_MESSAGE_VERSION: i16 = 5;
const TOPIC_ID_VERSION: i16 = 6;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut wanted: Vec<(Option<String>, uuid::Uuid)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.0.as_str().to_string()), uuid::Uuid::nil()))
        .collect();
    wanted.extend(request.topics.iter().map(|t| {
        (
            t.name.as_ref().map(|n| n.0.as_str().to_string()),
            t.topic_id,
        )
    }));
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let name = name.or_else(|| {
                ctx.log
                    .topics()
                    .into_iter()
                    .find(|t| t.id() == id)
                    .map(|t| t.name().to_string())
            });
            let mut result = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))));
            if version >= TOPIC_ID_VERSION {
                result = result.with_topic_id(id);
            }
            let outcome = match &name {
                Some(name) => ctx
                    .log
                    .delete_topic(name)
                    .map_err(|e| (ErrorCode::from(&e), e.to_string()))
                    .inspect(|()| {
                        // Committed offsets of a deleted topic would resume a
                        // re-created topic of the same name mid-stream.
                        if let Err(error) = ctx.groups.forget_topic(name) {
                            tracing::warn!(topic = %name, "dropping committed offsets: {error}");
                        }
                    }),
                None => Err((
                    ErrorCode::UnknownTopicOrPartition,
                    format!("no topic has id {id}"),
                )),
            };
            match outcome {
                Ok(()) => result,
                Err((code, message)) => {
                    result = result.with_error_code(code.code());
                    if version >= ERROR_MESSAGE_VERSION {
                        result = result.with_error_message(Some(StrBytes::from_string(message)));
                    }
                    result
                }
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
