//! CreatePartitions: grow a topic to a new partition count. Needs ALTER on
//! the topic, else TOPIC_AUTHORIZATION_FAILED (whether it exists or not).

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use strata_log::LogError;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &CreatePartitionsRequest,
    caller: &Caller,
) -> CreatePartitionsResponse {
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
            if !ctx
                .acls
                .authorize(caller, Operation::Alter, Resource::topic(name))
            {
                return result
                    .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "{} is not allowed to alter topic {name}",
                        caller.principal
                    ))));
            }
            let outcome = match ctx.log.topic(name) {
                None => Err(LogError::UnknownTopic(name.to_string())),
                Some(existing) if topic.count <= existing.metadata.partitions => {
                    Err(LogError::InvalidPartitionCount(topic.count))
                }
                Some(_) if request.validate_only => Ok(()),
                Some(_) => ctx.log.create_partitions(name, topic.count).map(|_| ()),
            };
            match outcome {
                Ok(()) => result,
                Err(error) => result
                    .with_error_code(ErrorCode::from(&error).code())
                    .with_error_message(Some(StrBytes::from_string(error.to_string()))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
