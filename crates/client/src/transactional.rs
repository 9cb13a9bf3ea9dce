//! A transactional id's requests, as Kafka's clients send them, for a
//! caller that builds its own batches (the runtime's outbox) as well as
//! for the batching [`Producer`](super::Producer):
//!
//! ```text
//! init (InitProducerId: fences older producers of the id, ends their open
//!       transaction) ─▶ add_partitions (AddPartitionsToTxn, before the
//!       first batch to a partition) ─▶ Produce with the transactional id
//!       ─▶ add_offsets (AddOffsetsToTxn) ─▶ commit_offsets
//!       (TxnOffsetCommit) ─▶ end (EndTxn: commit or abort)
//! ```
//!
//! Each call goes to the id's transaction coordinator (or the group's, for
//! TxnOffsetCommit), found again on every attempt, and is retried through
//! the cluster's retry policy on retriable errors (a coordinator that moved
//! or is loading, CONCURRENT_TRANSACTIONS while a previous transaction's
//! markers are written). PRODUCER_FENCED and INVALID_PRODUCER_EPOCH are
//! final: a newer producer holds the id.

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::admin::{KEY_TYPE_TRANSACTION, coordinator, coordinator_of};
use super::error::codes;
use super::producer_id::init_producer_id_for;
use super::{ClientError, Cluster};

/// Newest versions sent (the single-transaction forms).
const ADD_PARTITIONS_VERSION_MAX: i16 = 3;
const ADD_OFFSETS_VERSION_MAX: i16 = 3;
const TXN_OFFSET_COMMIT_VERSION_MAX: i16 = 3;
const END_TXN_VERSION_MAX: i16 = 3;

/// A producer's id and epoch.
pub type ProducerIdentity = (i64, i16);

/// The requests of one transactional id.
#[derive(Clone)]
pub struct Transactional<'c> {
    cluster: &'c Cluster,
    id: &'c str,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// The first failure among a response's per-partition codes, or None.
/// A code about the topic names the partition; one about the group or the
/// producer (every partition carries it alike) does not.
fn first_failure<'a>(codes: impl IntoIterator<Item = (&'a str, i32, i16)>) -> Option<ClientError> {
    // When one partition is refused, the others are answered
    // OPERATION_NOT_ATTEMPTED: the refusal is the one that explains it.
    let failed: Vec<_> = (codes.into_iter())
        .filter(|&(_, _, code)| code != codes::NONE)
        .collect();
    let (topic, partition, code) = *(failed.iter())
        .find(|&&(_, _, code)| code != codes::OPERATION_NOT_ATTEMPTED)
        .or(failed.first())?;
    let about_the_topic = matches!(
        code,
        codes::TOPIC_AUTHORIZATION_FAILED | codes::UNKNOWN_TOPIC_OR_PARTITION
    );
    Some(if about_the_topic {
        ClientError::kafka(code, Some(topic), Some(partition))
    } else {
        ClientError::kafka(code, None, None)
    })
}

impl<'c> Transactional<'c> {
    pub fn new(cluster: &'c Cluster, transactional_id: &'c str) -> Self {
        Self {
            cluster,
            id: transactional_id,
        }
    }

    pub fn id(&self) -> &str {
        self.id
    }

    /// InitProducerId for the id: the producer id and a new epoch. Every
    /// older producer of the id is fenced from here on, and a transaction
    /// it left open is aborted (one it had decided to commit is finished
    /// first). With `current` (KIP-360) the same producer asks for its
    /// next epoch.
    pub async fn init(
        &self,
        transaction_timeout_ms: i32,
        current: Option<ProducerIdentity>,
    ) -> Result<ProducerIdentity, ClientError> {
        init_producer_id_for(self.cluster, Some(self.id), transaction_timeout_ms, current).await
    }

    /// Makes `partitions` part of the open transaction (before the first
    /// batch is sent to each).
    pub async fn add_partitions(
        &self,
        (producer_id, epoch): ProducerIdentity,
        partitions: &[(String, i32)],
    ) -> Result<(), ClientError> {
        if partitions.is_empty() {
            return Ok(());
        }
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions {
            by_topic.entry(topic).or_default().push(*partition);
        }
        let topics: Vec<AddPartitionsToTxnTopic> = by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(partitions)
            })
            .collect();
        self.cluster
            .retry(&[], || async {
                let connection =
                    coordinator_of(self.cluster, KEY_TYPE_TRANSACTION, self.id).await?;
                let request = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(s(self.id)))
                    .with_v3_and_below_producer_id(ProducerId(producer_id))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics.clone());
                let response = connection
                    .send(&request, ADD_PARTITIONS_VERSION_MAX)
                    .await?;
                let results = response.results_by_topic_v3_and_below.iter();
                match first_failure(results.flat_map(|t| {
                    (t.results_by_partition.iter()).map(move |p| {
                        (t.name.0.as_str(), p.partition_index, p.partition_error_code)
                    })
                })) {
                    None => Ok(()),
                    Some(error) => Err(error),
                }
            })
            .await
    }

    /// AddOffsetsToTxn then TxnOffsetCommit: `offsets` (topic, partition,
    /// next offset to read) become `group`'s committed offsets, each with
    /// `metadata`, only if the transaction commits.
    pub async fn commit_offsets(
        &self,
        (producer_id, epoch): ProducerIdentity,
        group: &str,
        offsets: &[(String, i32, i64)],
        metadata: &str,
    ) -> Result<(), ClientError> {
        self.cluster
            .retry(&[], || async {
                let connection =
                    coordinator_of(self.cluster, KEY_TYPE_TRANSACTION, self.id).await?;
                let request = AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(self.id)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_group_id(GroupId(s(group)));
                let response = connection.send(&request, ADD_OFFSETS_VERSION_MAX).await?;
                match response.error_code {
                    codes::NONE => Ok(()),
                    code => Err(ClientError::kafka(code, None, None)),
                }
            })
            .await?;
        let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for (topic, partition, offset) in offsets {
            by_topic.entry(topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(s(metadata))),
            );
        }
        let topics: Vec<TxnOffsetCommitRequestTopic> = by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(partitions)
            })
            .collect();
        self.cluster
            .retry(&[], || async {
                let connection = coordinator(self.cluster, group).await?;
                let request = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(s(self.id)))
                    .with_group_id(GroupId(s(group)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_generation_id(-1)
                    .with_topics(topics.clone());
                let response = connection
                    .send(&request, TXN_OFFSET_COMMIT_VERSION_MAX)
                    .await?;
                let failure = first_failure(response.topics.iter().flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.as_str(), p.partition_index, p.error_code))
                }));
                match failure {
                    None => Ok(()),
                    Some(error) => Err(error),
                }
            })
            .await
    }

    /// EndTxn: commits (or aborts) the open transaction.
    pub async fn end(
        &self,
        (producer_id, epoch): ProducerIdentity,
        commit: bool,
    ) -> Result<(), ClientError> {
        self.cluster
            .retry(&[], || async {
                let connection =
                    coordinator_of(self.cluster, KEY_TYPE_TRANSACTION, self.id).await?;
                let request = EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(self.id)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_committed(commit);
                let response = connection.send(&request, END_TXN_VERSION_MAX).await?;
                match response.error_code {
                    codes::NONE => Ok(()),
                    code => Err(ClientError::kafka(code, None, None)),
                }
            })
            .await
    }
}

/// Whether `error` says a newer producer holds the transactional id.
pub fn is_fenced(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Kafka { code, .. }
            if *code == codes::PRODUCER_FENCED || *code == codes::INVALID_PRODUCER_EPOCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_topic_names_its_partition_and_a_refused_group_names_none() {
        let topic = first_failure([
            ("lines", 0, codes::NONE),
            ("lines", 1, codes::TOPIC_AUTHORIZATION_FAILED),
        ])
        .expect("a failure");
        assert_eq!(
            topic.to_string(),
            "lines/1: TopicAuthorizationFailed (Kafka error 29)"
        );
        let group =
            first_failure([("lines", 0, codes::GROUP_AUTHORIZATION_FAILED)]).expect("a failure");
        assert_eq!(
            group.to_string(),
            "GroupAuthorizationFailed (Kafka error 30)"
        );
        assert!(first_failure([("lines", 0, codes::NONE)]).is_none());
    }

    #[test]
    fn a_refused_partition_explains_the_answer_not_the_ones_not_attempted() {
        let refused = first_failure([
            ("a-topic", 0, codes::OPERATION_NOT_ATTEMPTED),
            ("b-topic", 0, codes::NONE),
            ("c-topic", 1, codes::TOPIC_AUTHORIZATION_FAILED),
        ])
        .expect("a failure");
        assert!(refused.is_authorization_failure(), "{refused}");
        assert!(refused.to_string().starts_with("c-topic/1: "), "{refused}");
        let not_attempted =
            first_failure([("a-topic", 0, codes::OPERATION_NOT_ATTEMPTED)]).expect("a failure");
        assert_eq!(not_attempted.code(), Some(codes::OPERATION_NOT_ATTEMPTED));
    }
}
