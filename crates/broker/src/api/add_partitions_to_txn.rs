//! AddPartitionsToTxn: partitions join a producer's transaction before it
//! writes to them. Versions 0–3 carry one transaction (what producers
//! send); 4 and 5 carry a batch of them, each possibly `verify_only`
//! (the form brokers send a coordinator to check a partition is in a
//! transaction), answered per transaction.
//!
//! Authorization, as Kafka: the batched versions come from brokers and need
//! CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED, for
//! the whole request); a producer's needs WRITE on its transactional id
//! (else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and
//! WRITE on each topic: a partition refused (TOPIC_AUTHORIZATION_FAILED) or
//! unknown fails the whole transaction's request, the others answering
//! OPERATION_NOT_ATTEMPTED, and nothing is added.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::txn::TxnProducer;

/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_SINCE_VERSION: i16 = 2;
/// The first version with the batched form.
const BATCHED_SINCE_VERSION: i16 = 4;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &AddPartitionsToTxnRequest,
    version: i16,
    caller: &Caller,
) -> AddPartitionsToTxnResponse {
    if version < BATCHED_SINCE_VERSION {
        let producer = TxnProducer::of_request(
            request.v3_and_below_transactional_id.0.as_str(),
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
            version,
            PRODUCER_FENCED_SINCE_VERSION,
        );
        let topics = &request.v3_and_below_topics;
        let results = match refusals(ctx, caller, &producer, topics) {
            Some(codes) => results_of(topics, codes),
            None => add(ctx, &producer, topics, false),
        };
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !ctx
        .acls
        .authorize(caller, Operation::ClusterAction, Resource::cluster())
    {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    let results = request
        .transactions
        .iter()
        .map(|transaction| {
            let producer = TxnProducer::of_request(
                transaction.transactional_id.0.as_str(),
                transaction.producer_id.0,
                transaction.producer_epoch,
                version,
                PRODUCER_FENCED_SINCE_VERSION,
            );
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id.clone())
                .with_topic_results(add(
                    ctx,
                    &producer,
                    &transaction.topics,
                    transaction.verify_only,
                ))
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// A producer's request refused by the ACLs: the code of each partition,
/// in request order; `None` when it may go on.
fn refusals(
    ctx: &BrokerContext,
    caller: &Caller,
    producer: &TxnProducer<'_>,
    topics: &[AddPartitionsToTxnTopic],
) -> Option<Vec<ErrorCode>> {
    let partitions = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t, p)));
    let acls = ctx.acls.snapshot();
    let transactional_id = Resource::transactional_id(producer.transactional_id);
    if !ctx
        .acls
        .allows(&acls, caller, Operation::Write, transactional_id)
    {
        return Some(
            partitions
                .map(|_| ErrorCode::TransactionalIdAuthorizationFailed)
                .collect(),
        );
    }
    let writable: Vec<bool> = topics
        .iter()
        .map(|t| {
            ctx.acls.allows(
                &acls,
                caller,
                Operation::Write,
                Resource::topic(t.name.0.as_str()),
            )
        })
        .collect();
    if writable.iter().all(|w| *w) {
        return None;
    }
    let codes = topics
        .iter()
        .zip(&writable)
        .flat_map(|(topic, &writable)| {
            let known = ctx.log.topic(topic.name.0.as_str());
            topic.partitions.iter().map(move |&p| {
                if !writable {
                    ErrorCode::TopicAuthorizationFailed
                } else if known.as_ref().and_then(|t| t.partition(p)).is_none() {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    ErrorCode::OperationNotAttempted
                }
            })
        })
        .collect();
    Some(codes)
}

fn add(
    ctx: &BrokerContext,
    producer: &TxnProducer<'_>,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|&p| (topic.name.0.as_str().to_string(), p))
        })
        .collect();
    let codes = if producer.transactional_id.is_empty() {
        vec![ErrorCode::InvalidRequest; partitions.len()]
    } else {
        ctx.transactions
            .add_partitions(producer, &partitions, verify_only)
    };
    results_of(topics, codes)
}

/// The per-partition answer of `topics`, `codes` in request order.
fn results_of(
    topics: &[AddPartitionsToTxnTopic],
    codes: Vec<ErrorCode>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut codes = codes.into_iter();
    topics
        .iter()
        .map(|topic| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(
                    topic
                        .partitions
                        .iter()
                        .map(|&partition| {
                            let code = codes.next().unwrap_or(ErrorCode::UnknownServerError);
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(partition)
                                .with_partition_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect()
}
