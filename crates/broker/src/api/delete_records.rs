//! DeleteRecords: moves each named partition's log start offset forward
//! (-1 means its high watermark), durably before answering; the answer's
//! low watermark is the start afterwards. An offset past the log end is
//! OFFSET_OUT_OF_RANGE. Each topic needs DELETE, else its partitions
//! answer TOPIC_AUTHORIZATION_FAILED and keep their records.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DeleteRecordsRequest,
    caller: &Caller,
) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .iter()
        .map(|requested| {
            let name = requested.name.0.as_str();
            let deletable = ctx
                .acls
                .authorize(caller, Operation::Delete, Resource::topic(name));
            let topic = ctx.log.topic(name).filter(|_| deletable);
            let partitions = requested
                .partitions
                .iter()
                .map(|p| {
                    let answer = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !deletable {
                        return answer.with_error_code(ErrorCode::TopicAuthorizationFailed.code());
                    }
                    let Some(log) = topic.as_ref().and_then(|t| t.partition(p.partition_index))
                    else {
                        return answer.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                    };
                    match log.delete_records_before(p.offset) {
                        Ok(start) => answer.with_low_watermark(start),
                        Err(error) => {
                            tracing::debug!(
                                partition = log.name(),
                                "DeleteRecords refused: {error}"
                            );
                            answer.with_error_code(ErrorCode::from(&error).code())
                        }
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(requested.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
