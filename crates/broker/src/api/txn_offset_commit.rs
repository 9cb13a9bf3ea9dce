//! TxnOffsetCommit: consumer offsets held with a producer's transaction and
//! committed to the group only if the transaction commits (until then an
//! OffsetFetch that requires stable offsets is told to retry). From v3 the
//! request names the consumer's generation and member, checked as
//! OffsetCommit checks them; a request without them (generation -1, no
//! member) is not checked, as in Kafka.
//!
//! Authorization, as Kafka: WRITE on the transactional id (else every
//! partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
//! group (else GROUP_AUTHORIZATION_FAILED), and READ on each topic (else its
//! partitions answer TOPIC_AUTHORIZATION_FAILED while the others' offsets
//! are held).

use std::time::Instant;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::group::{Committer, OFFSET_METADATA_BYTES_MAX};
use crate::txn::{PendingOffset, TxnProducer};

/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_SINCE_VERSION: i16 = 3;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &TxnOffsetCommitRequest,
    version: i16,
    caller: &Caller,
) -> TxnOffsetCommitResponse {
    let group = request.group_id.0.as_str();
    let producer = TxnProducer::of_request(
        request.transactional_id.0.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        version,
        PRODUCER_FENCED_SINCE_VERSION,
    );
    let acls = ctx.acls.snapshot();
    let allowed = |operation: Operation, resource: Resource<'_>| {
        ctx.acls.allows(&acls, caller, operation, resource)
    };
    let transactional_id = Resource::transactional_id(producer.transactional_id);
    let mut code = if !allowed(Operation::Write, transactional_id) {
        ErrorCode::TransactionalIdAuthorizationFailed
    } else if !allowed(Operation::Read, Resource::group(group)) {
        ErrorCode::GroupAuthorizationFailed
    } else if producer.transactional_id.is_empty() {
        ErrorCode::InvalidRequest
    } else {
        check_member(ctx, request)
    };
    // Per topic of the request: whether the caller may READ it.
    let readable: Vec<bool> = request
        .topics
        .iter()
        .map(|topic| allowed(Operation::Read, Resource::topic(topic.name.0.as_str())))
        .collect();
    let mut offsets = Vec::new();
    for (topic, _) in request.topics.iter().zip(&readable).filter(|(_, r)| **r) {
        for partition in &topic.partitions {
            let metadata = partition.committed_metadata.as_ref().map(|m| m.as_str());
            if metadata.is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX) {
                code = ErrorCode::OffsetMetadataTooLarge;
            }
            offsets.push(PendingOffset {
                group: group.to_string(),
                topic: topic.name.0.as_str().to_string(),
                partition: partition.partition_index,
                offset: partition.committed_offset,
                leader_epoch: partition.committed_leader_epoch,
                metadata: metadata.map(str::to_string),
            });
        }
    }
    if code == ErrorCode::None && !offsets.is_empty() {
        code = ctx.transactions.commit_offsets(&producer, group, &offsets);
    }
    let topics = request
        .topics
        .iter()
        .zip(readable)
        .map(|(topic, readable)| {
            let code = match code {
                ErrorCode::TransactionalIdAuthorizationFailed
                | ErrorCode::GroupAuthorizationFailed => code,
                _ if !readable => ErrorCode::TopicAuthorizationFailed,
                _ => code,
            };
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The consumer's membership, when the request names it.
fn check_member(ctx: &BrokerContext, request: &TxnOffsetCommitRequest) -> ErrorCode {
    let member_id = request.member_id.as_str();
    if request.generation_id < 0 && member_id.is_empty() && request.group_instance_id.is_none() {
        return if request.group_id.0.is_empty() {
            ErrorCode::InvalidGroupId
        } else {
            ErrorCode::None
        };
    }
    let committer = Committer {
        generation: request.generation_id,
        member_id: member_id.to_string(),
        instance_id: request
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string()),
    };
    ctx.groups
        .check_commit(request.group_id.0.as_str(), &committer, Instant::now())
}
