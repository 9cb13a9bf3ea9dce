//! What transactional tools and operators ask about transactions:
//! DescribeTransactions (one transactional id's state), ListTransactions
//! (every id, filtered by state, producer id, age or a pattern) and
//! DescribeProducers (the producers a partition remembers, with their open
//! transaction).
//!
//! Authorization, as Kafka: DescribeTransactions needs DESCRIBE on each id
//! (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and lists only the topics
//! the caller may DESCRIBE; ListTransactions lists only the ids the caller
//! may DESCRIBE; DescribeProducers needs READ on each topic (else
//! TOPIC_AUTHORIZATION_FAILED).

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{AclSet, Authorizer, Operation, Resource};
use crate::auth::Caller;
use crate::txn::{TxnMetadata, TxnState};
use strata_record::time::now_ms;

pub(super) fn describe_transactions(
    ctx: &BrokerContext,
    request: &DescribeTransactionsRequest,
    caller: &Caller,
) -> DescribeTransactionsResponse {
    let acls = ctx.acls.snapshot();
    let states = request
        .transactional_ids
        .iter()
        .map(|id| {
            let answer = TransactionState::default().with_transactional_id(id.clone());
            let resource = Resource::transactional_id(id.0.as_str());
            if !ctx
                .acls
                .allows(&acls, caller, Operation::Describe, resource)
            {
                return answer
                    .with_error_code(ErrorCode::TransactionalIdAuthorizationFailed.code())
                    .with_transaction_state(StrBytes::from_static_str(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1);
            }
            match ctx.transactions.describe(id.0.as_str()) {
                None => answer
                    .with_error_code(ErrorCode::TransactionalIdNotFound.code())
                    .with_transaction_state(StrBytes::from_static_str(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
                Some(metadata) => answer
                    .with_transaction_state(StrBytes::from_static_str(metadata.state.name()))
                    .with_transaction_timeout_ms(metadata.timeout_ms)
                    .with_transaction_start_time_ms(metadata.start_ms)
                    .with_producer_id(ProducerId(metadata.producer_id))
                    .with_producer_epoch(metadata.producer_epoch)
                    .with_topics(topics_of(&metadata, &ctx.acls, &acls, caller)),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// The transaction's partitions by topic, of the topics `caller` may
/// DESCRIBE.
fn topics_of(
    metadata: &TxnMetadata,
    authorizer: &Authorizer,
    acls: &AclSet,
    caller: &Caller,
) -> Vec<TopicData> {
    let mut topics: Vec<TopicData> = Vec::new();
    let describable =
        |topic: &str| authorizer.allows(acls, caller, Operation::Describe, Resource::topic(topic));
    for (topic, partition) in metadata.partitions.iter().filter(|(t, _)| describable(t)) {
        match topics.last_mut() {
            Some(last) if last.topic.0.as_str() == topic => last.partitions.push(*partition),
            _ => topics.push(
                TopicData::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    topics
}

pub(super) fn list_transactions(
    ctx: &BrokerContext,
    request: &ListTransactionsRequest,
    caller: &Caller,
) -> ListTransactionsResponse {
    let acls = ctx.acls.snapshot();
    let wanted: Vec<&str> = request.state_filters.iter().map(|s| s.as_str()).collect();
    let unknown: Vec<StrBytes> = request
        .state_filters
        .iter()
        .filter(|s| !TxnState::ALL.iter().any(|state| state.name() == s.as_str()))
        .cloned()
        .collect();
    let now = now_ms();
    let pattern = request
        .transactional_id_pattern
        .as_ref()
        .map(|p| p.as_str());
    let states = ctx
        .transactions
        .list()
        .into_iter()
        .filter(|m| wanted.is_empty() || wanted.contains(&m.state.name()))
        .filter(|m| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .iter()
                    .any(|id| id.0 == m.producer_id)
        })
        // duration_filter: transactions running longer than this (ms).
        .filter(|m| {
            request.duration_filter < 0
                || (m.start_ms >= 0 && now.saturating_sub(m.start_ms) > request.duration_filter)
        })
        .filter(|m| pattern.is_none_or(|p| matches_pattern(p, &m.transactional_id)))
        .filter(|m| {
            let resource = Resource::transactional_id(&m.transactional_id);
            ctx.acls
                .allows(&acls, caller, Operation::Describe, resource)
        })
        .map(|m| {
            ListedState::default()
                .with_transactional_id(kafka_protocol::messages::TransactionalId(
                    StrBytes::from_string(m.transactional_id.clone()),
                ))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(StrBytes::from_static_str(m.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}

/// ListTransactions v2's pattern: a Java regular expression in Kafka. The
/// forms tools use are served: an exact id, `prefix.*`, `.*suffix`,
/// `.*part.*` and `.*`; anything else is matched literally.
fn matches_pattern(pattern: &str, id: &str) -> bool {
    let (starts, rest) = match pattern.strip_prefix(".*") {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (ends, core) = match rest.strip_suffix(".*") {
        Some(core) => (true, core),
        None => (false, rest),
    };
    match (starts, ends) {
        (true, true) => id.contains(core),
        (true, false) => id.ends_with(core),
        (false, true) => id.starts_with(core),
        (false, false) => id == pattern,
    }
}

pub(super) fn describe_producers(
    ctx: &BrokerContext,
    request: &DescribeProducersRequest,
    caller: &Caller,
) -> DescribeProducersResponse {
    let acls = ctx.acls.snapshot();
    let topics = request
        .topics
        .iter()
        .map(|wanted| {
            let name = wanted.name.0.as_str();
            let readable = ctx
                .acls
                .allows(&acls, caller, Operation::Read, Resource::topic(name));
            let topic = ctx.log.topic(name);
            let partitions = wanted
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    if !readable {
                        return answer.with_error_code(ErrorCode::TopicAuthorizationFailed.code());
                    }
                    let Some(log) = topic.as_ref().and_then(|t| t.partition(index)) else {
                        return answer.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                    };
                    answer.with_active_producers(
                        log.active_producers()
                            .into_iter()
                            .map(|p| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(p.producer_id))
                                    .with_producer_epoch(i32::from(p.epoch))
                                    .with_last_sequence(p.last_sequence)
                                    .with_last_timestamp(p.last_timestamp)
                                    .with_coordinator_epoch(0)
                                    .with_current_txn_start_offset(
                                        p.open_transaction_first_offset.unwrap_or(-1),
                                    )
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(wanted.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::matches_pattern;

    #[test]
    fn the_patterns_tools_use_match() {
        assert!(matches_pattern("app-1", "app-1"));
        assert!(!matches_pattern("app-1", "app-10"));
        assert!(matches_pattern("app-.*", "app-10"));
        assert!(matches_pattern(".*-10", "app-10"));
        assert!(matches_pattern(".*p-1.*", "app-10"));
        assert!(matches_pattern(".*", "anything"));
        assert!(!matches_pattern("app-.*", "other"));
    }
}
