//! ListOffsets: the earliest (-2) or latest (-1) offset of a partition, or
//! the first record at or after a timestamp, exact to the record.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::BrokerContext;
use crate::broker::ErrorCode;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// The record with the largest timestamp (v7+): not answered yet.
const MAX_TIMESTAMP: i64 = -3;
/// Earliest local / earliest pending upload (tiered storage): all data is
/// local here, so both are the log start.
const EARLIEST_LOCAL: i64 = -4;
const EARLIEST_PENDING_UPLOAD: i64 = -5;

pub(super) fn handle(ctx: &BrokerContext, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|requested| {
            let topic = ctx.log.topic(requested.name.0.as_str());
            let partitions = requested
                .partitions
                .iter()
                .map(|partition| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(partition.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1);
                    let log = topic
                        .as_ref()
                        .and_then(|t| t.partition(partition.partition_index));
                    let Some(log) = log else {
                        return response.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                    };
                    match partition.timestamp {
                        LATEST => response.with_offset(log.log_end_offset()),
                        EARLIEST | EARLIEST_LOCAL | EARLIEST_PENDING_UPLOAD => {
                            response.with_offset(log.log_start_offset())
                        }
                        MAX_TIMESTAMP => response.with_error_code(ErrorCode::InvalidRequest.code()),
                        timestamp => match log.offset_for_timestamp(timestamp) {
                            Ok(Some((offset, found))) => {
                                response.with_offset(offset).with_timestamp(found)
                            }
                            Ok(None) => response,
                            Err(error) => response.with_error_code(ErrorCode::from(&error).code()),
                        },
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(requested.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
