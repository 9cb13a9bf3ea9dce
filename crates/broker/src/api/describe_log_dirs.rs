//! DescribeLogDirs: the one log directory this broker has, with the size in
//! bytes of every partition asked for (all when the request names no
//! topics) and the file system's total and usable bytes.
//!
//! Needs DESCRIBE on the cluster; without it the answer lists no directory
//! and, from v3, says CLUSTER_AUTHORIZATION_FAILED.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;

/// DescribeLogDirs v3 added the top-level error code.
const ERROR_CODE_VERSION: i16 = 3;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DescribeLogDirsRequest,
    version: i16,
    caller: &Caller,
) -> DescribeLogDirsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Describe, Resource::cluster())
    {
        let response = DescribeLogDirsResponse::default();
        if version < ERROR_CODE_VERSION {
            return response;
        }
        return response.with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let mut topics = Vec::new();
    for topic in ctx.log.topics() {
        let partitions: Vec<DescribeLogDirsPartition> = topic
            .partitions
            .iter()
            .enumerate()
            .filter(|(index, _)| wanted(topic.name(), *index as i32))
            .map(|(index, log)| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(index as i32)
                    .with_partition_size(i64::try_from(log.size_bytes()).unwrap_or(i64::MAX))
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name().to_string())))
                    .with_partitions(partitions),
            );
        }
    }
    let dir = ctx.log.data_dir();
    let (total, usable) = nix::sys::statvfs::statvfs(dir)
        .map(|s| {
            let block = s.fragment_size() as i64;
            (
                s.blocks() as i64 * block,
                s.blocks_available() as i64 * block,
            )
        })
        .unwrap_or((-1, -1));
    let absolute = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    DescribeLogDirsResponse::default().with_results(vec![
        DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_string(absolute.display().to_string()))
            .with_topics(topics)
            .with_total_bytes(total)
            .with_usable_bytes(usable),
    ])
}
