//! CreatePartitions: grow a topic to a new partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::broker::ErrorCode;
use crate::log::LogError;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let outcome = match ctx.log.topic(name) {
                None => Err(LogError::UnknownTopic(name.to_string())),
                Some(existing) if topic.count <= existing.metadata.partitions => {
                    Err(LogError::InvalidPartitionCount(topic.count))
                }
                Some(_) if request.validate_only => Ok(()),
                Some(_) => ctx.log.create_partitions(name, topic.count).map(|_| ()),
            };
            let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
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
