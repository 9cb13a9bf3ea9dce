//! ListOffsets: per partition, the offset a client asks for by timestamp.
//!
//! | timestamp | answer | from version |
//! |---|---|---|
//! | ≥ 0 | the first record with timestamp ≥ it, exact to the record (offset and timestamp), or -1 | 1 |
//! | -1 LATEST | the log end offset | 1 |
//! | -2 EARLIEST | the log start offset | 1 |
//! | -3 MAX_TIMESTAMP | the record with the largest timestamp (the lowest offset of those sharing it), exact to the record inside its batch, compressed or not; -1 when no record has a timestamp | 7 |
//! | -4 EARLIEST_LOCAL | the log start offset: all data is local | 8 |
//! | -5 LATEST_TIERED | -1: nothing is tiered | 9 |
//!
//! With `isolation_level` READ_COMMITTED (v2+), LATEST is the last stable
//! offset, and a record found by timestamp at or past it is not answered
//! (its transaction may still abort).
//!
//! As Kafka does, a special timestamp asked in a version older than the
//! one that introduced it, or a negative timestamp that is none of these
//! (such as -6, EARLIEST_PENDING_UPLOAD, which needs v11), gets
//! UNSUPPORTED_VERSION for that partition; the connection stays open.
//!
//! Each topic needs DESCRIBE, else its partitions answer
//! TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use strata_log::{Isolation, PartitionLog};

/// `isolation_level` of a READ_COMMITTED reader.
const READ_COMMITTED: i8 = 1;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// The record with the largest timestamp (KIP-734).
const MAX_TIMESTAMP: i64 = -3;
/// The earliest offset on local disk (KIP-405): all data is local here.
const EARLIEST_LOCAL: i64 = -4;
/// The latest offset in tiered storage (KIP-1005): none here.
const LATEST_TIERED: i64 = -5;

/// The first request version that may carry a special timestamp; `None`
/// for a negative value that is no special timestamp this broker knows.
fn first_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        _ => None,
    }
}

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &ListOffsetsRequest,
    version: i16,
    caller: &Caller,
) -> ListOffsetsResponse {
    let acls = ctx.acls.snapshot();
    let topics = request
        .topics
        .iter()
        .map(|requested| {
            let name = requested.name.0.as_str();
            let describable =
                ctx.acls
                    .allows(&acls, caller, Operation::Describe, Resource::topic(name));
            let topic = ctx.log.topic(name);
            let partitions = requested
                .partitions
                .iter()
                .map(|partition| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(partition.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1);
                    if !describable {
                        return response
                            .with_error_code(ErrorCode::TopicAuthorizationFailed.code());
                    }
                    let log = topic
                        .as_ref()
                        .and_then(|t| t.partition(partition.partition_index));
                    let Some(log) = log else {
                        return response.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                    };
                    let isolation = if request.isolation_level == READ_COMMITTED {
                        Isolation::ReadCommitted
                    } else {
                        Isolation::ReadUncommitted
                    };
                    lookup(&log, partition.timestamp, version, isolation, response)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(requested.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// Fills `response` (offset and timestamp -1) for one partition.
fn lookup(
    log: &PartitionLog,
    timestamp: i64,
    version: i16,
    isolation: Isolation,
    response: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    let visible_end = match isolation {
        Isolation::ReadUncommitted => log.log_end_offset(),
        Isolation::ReadCommitted => log.last_stable_offset(),
    };
    if timestamp < 0 && first_version(timestamp).is_none_or(|first| version < first) {
        return response.with_error_code(ErrorCode::UnsupportedVersion.code());
    }
    let found = match timestamp {
        LATEST => return response.with_offset(visible_end),
        EARLIEST | EARLIEST_LOCAL => return response.with_offset(log.log_start_offset()),
        LATEST_TIERED => return response,
        MAX_TIMESTAMP => log.max_timestamp_record(),
        timestamp => log.offset_for_timestamp(timestamp),
    };
    match found {
        Ok(Some((offset, found))) if offset < visible_end => {
            response.with_offset(offset).with_timestamp(found)
        }
        Ok(Some(_)) => response,
        Ok(None) => response,
        Err(error) => response.with_error_code(ErrorCode::from(&error).code()),
    }
}
