//! AddPartitionsToTxn: partitions join a producer's transaction before it
//! writes to them. Versions 0–3 carry one transaction (what producers
//! send); 4 and 5 carry a batch of them, each possibly `verify_only`
//! (the form brokers send a coordinator to check a partition is in a
//! transaction), answered per transaction.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::BrokerContext;
use crate::broker::ErrorCode;
use crate::broker::txn::TxnProducer;

/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_SINCE_VERSION: i16 = 2;
/// The first version with the batched form.
const BATCHED_SINCE_VERSION: i16 = 4;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version < BATCHED_SINCE_VERSION {
        let producer = TxnProducer::of_request(
            request.v3_and_below_transactional_id.0.as_str(),
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
            version,
            PRODUCER_FENCED_SINCE_VERSION,
        );
        let results = add(ctx, &producer, &request.v3_and_below_topics, false);
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
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
