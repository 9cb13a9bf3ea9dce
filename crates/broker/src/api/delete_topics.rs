//! DeleteTopics: by name (all versions) or by topic id (v6).
//!
//! Deleting needs DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED. A
//! topic named by id that the caller may not DESCRIBE is answered without
//! its name, as Kafka does.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;

/// DeleteTopics v5 added error messages; v6 topic ids.
const ERROR_MESSAGE_VERSION: i16 = 5;
const TOPIC_ID_VERSION: i16 = 6;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DeleteTopicsRequest,
    version: i16,
    caller: &Caller,
) -> DeleteTopicsResponse {
    let acls = ctx.acls.snapshot();
    let allowed = |operation, name: &str| {
        ctx.acls
            .allows(&acls, caller, operation, Resource::topic(name))
    };
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
            let by_id = name.is_none();
            let name = name.or_else(|| {
                ctx.log
                    .topics()
                    .into_iter()
                    .find(|t| t.id() == id)
                    .map(|t| t.name().to_string())
            });
            let hidden = by_id
                && name
                    .as_deref()
                    .is_some_and(|n| !allowed(Operation::Describe, n));
            let shown = name.clone().filter(|_| !hidden);
            let mut result = DeletableTopicResult::default()
                .with_name(shown.map(|n| TopicName(StrBytes::from_string(n))));
            if version >= TOPIC_ID_VERSION {
                result = result.with_topic_id(id);
            }
            let outcome = match &name {
                Some(name) if hidden || !allowed(Operation::Delete, name) => Err((
                    ErrorCode::TopicAuthorizationFailed,
                    format!("{} is not allowed to delete this topic", caller.principal),
                )),
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
