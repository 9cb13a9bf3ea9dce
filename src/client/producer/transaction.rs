//! Transactions of a transactional producer (one with `transactional_id`),
//! as Kafka's clients run them:
//!
//! ```text
//! begin_transaction ─▶ send… (each new partition first joins with
//!                      AddPartitionsToTxn) ─▶ send_offsets_to_transaction
//!                      (AddOffsetsToTxn, then TxnOffsetCommit) ─▶
//! commit_transaction (flush, EndTxn commit) or abort_transaction (flush,
//!                      EndTxn abort)
//! ```
//!
//! A batch that fails for good inside a transaction makes commit refuse
//! (the transaction can only be aborted). A producer fenced by a newer one
//! with the same transactional id gets PRODUCER_FENCED or
//! INVALID_PRODUCER_EPOCH from every call: it must be dropped.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::Producer;
use super::sender::init_producer_id_for;
use crate::client::admin::{KEY_TYPE_TRANSACTION, coordinator, coordinator_of};
use crate::client::error::codes;
use crate::client::{ClientError, Connection};

/// Newest versions sent (the single-transaction forms).
const ADD_PARTITIONS_VERSION_MAX: i16 = 3;
const ADD_OFFSETS_VERSION_MAX: i16 = 3;
const TXN_OFFSET_COMMIT_VERSION_MAX: i16 = 3;
const END_TXN_VERSION_MAX: i16 = 3;

/// The transaction in progress, if any.
#[derive(Debug, Default)]
pub(super) struct TxnProgress {
    pub(super) open: bool,
    pub(super) partitions: BTreeSet<(Arc<str>, i32)>,
    /// Offsets were sent with it (the coordinator knows the transaction
    /// even without partitions).
    pub(super) offsets: bool,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

impl Producer {
    fn transactional_id(&self) -> Result<&str, ClientError> {
        self.inner
            .config
            .transactional_id
            .as_deref()
            .ok_or_else(|| ClientError::Invalid("the producer has no transactional_id".into()))
    }

    async fn txn_coordinator(&self) -> Result<Arc<Connection>, ClientError> {
        coordinator_of(
            &self.inner.cluster,
            KEY_TYPE_TRANSACTION,
            self.transactional_id()?,
        )
        .await
    }

    /// Starts a transaction: records sent from now until it ends belong to
    /// it.
    pub async fn begin_transaction(&self) -> Result<(), ClientError> {
        self.transactional_id()?;
        let mut progress = self.txn.lock().await;
        if progress.open {
            return Err(ClientError::Invalid("a transaction is already open".into()));
        }
        self.inner.take_failure();
        progress.open = true;
        progress.partitions.clear();
        progress.offsets = false;
        Ok(())
    }

    /// Makes sure `topic`/`partition` is part of the open transaction
    /// before a record is queued for it.
    pub(super) async fn join_transaction(
        &self,
        topic: &Arc<str>,
        partition: i32,
    ) -> Result<(), ClientError> {
        let mut progress = self.txn.lock().await;
        if !progress.open {
            return Err(ClientError::Invalid(
                "a transactional producer sends inside a transaction: call begin_transaction first"
                    .into(),
            ));
        }
        if progress
            .partitions
            .contains(&(Arc::clone(topic), partition))
        {
            return Ok(());
        }
        let (producer_id, epoch) = self.inner.identity();
        let id = self.transactional_id()?.to_string();
        self.inner
            .cluster
            .retry(&[], || async {
                let connection = self.txn_coordinator().await?;
                let request = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(s(&id)))
                    .with_v3_and_below_producer_id(ProducerId(producer_id))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(vec![
                        AddPartitionsToTxnTopic::default()
                            .with_name(TopicName(s(topic)))
                            .with_partitions(vec![partition]),
                    ]);
                let response = connection
                    .send(&request, ADD_PARTITIONS_VERSION_MAX)
                    .await?;
                let code = response
                    .results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| &t.results_by_partition)
                    .map(|p| p.partition_error_code)
                    .find(|&c| c != codes::NONE)
                    .unwrap_or(codes::NONE);
                if code != codes::NONE {
                    return Err(ClientError::kafka(code, Some(topic), Some(partition)));
                }
                Ok(())
            })
            .await?;
        progress.partitions.insert((Arc::clone(topic), partition));
        Ok(())
    }

    /// Commits `offsets` (topic, partition, next offset to read) for the
    /// consumer `group` with the open transaction: they become the group's
    /// committed offsets only if it commits.
    pub async fn send_offsets_to_transaction(
        &self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        let mut progress = self.txn.lock().await;
        if !progress.open {
            return Err(ClientError::Invalid("no transaction is open".into()));
        }
        progress.offsets = true;
        drop(progress);
        let (producer_id, epoch) = self.inner.identity();
        let id = self.transactional_id()?.to_string();
        let cluster = &self.inner.cluster;
        cluster
            .retry(&[], || async {
                let connection = self.txn_coordinator().await?;
                let request = AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(&id)))
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
        let mut by_topic: std::collections::BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> =
            std::collections::BTreeMap::new();
        for (topic, partition, offset) in offsets {
            by_topic.entry(topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1),
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
        cluster
            .retry(&[], || async {
                let connection = coordinator(cluster, group).await?;
                let request = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(s(&id)))
                    .with_group_id(GroupId(s(group)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_generation_id(-1)
                    .with_topics(topics.clone());
                let response = connection
                    .send(&request, TXN_OFFSET_COMMIT_VERSION_MAX)
                    .await?;
                let code = response
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|&c| c != codes::NONE)
                    .unwrap_or(codes::NONE);
                match code {
                    codes::NONE => Ok(()),
                    code => Err(ClientError::kafka(code, None, None)),
                }
            })
            .await
    }

    /// Sends everything queued, then commits the transaction: its records
    /// and offsets become visible to `read_committed` readers. Refused (the
    /// transaction must be aborted) if one of its batches failed.
    pub async fn commit_transaction(&self) -> Result<(), ClientError> {
        self.flush().await;
        if let Some(failure) = self.inner.failure() {
            return Err(ClientError::Invalid(format!(
                "a batch of the transaction failed ({failure}); abort the transaction"
            )));
        }
        self.end_transaction(true).await
    }

    /// Sends what is queued, then aborts the transaction: `read_committed`
    /// readers never see its records, and its offsets are not committed.
    /// After a batch failed for good, the producer then moves to its next
    /// epoch (KIP-360) and numbers every partition from 0 again: the failed
    /// batch left a gap in its sequences that the broker would refuse.
    pub async fn abort_transaction(&self) -> Result<(), ClientError> {
        self.flush().await;
        let failed = self.inner.take_failure().is_some();
        self.end_transaction(false).await?;
        if failed {
            self.next_epoch().await?;
        }
        Ok(())
    }

    async fn next_epoch(&self) -> Result<(), ClientError> {
        let timeout_ms =
            i32::try_from(self.inner.config.transaction_timeout.as_millis()).unwrap_or(i32::MAX);
        let identity = init_producer_id_for(
            &self.inner.cluster,
            Some(self.transactional_id()?),
            timeout_ms,
            Some(self.inner.identity()),
        )
        .await?;
        let mut state = self.inner.lock();
        *self
            .inner
            .identity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = identity;
        for queue in state.partitions.values_mut() {
            queue.next_sequence = 0;
        }
        Ok(())
    }

    async fn end_transaction(&self, commit: bool) -> Result<(), ClientError> {
        let mut progress = self.txn.lock().await;
        if !progress.open {
            return Err(ClientError::Invalid("no transaction is open".into()));
        }
        // Nothing was added: there is nothing for the coordinator to end.
        if progress.partitions.is_empty() && !progress.offsets {
            progress.open = false;
            return Ok(());
        }
        let (producer_id, epoch) = self.inner.identity();
        let id = self.transactional_id()?.to_string();
        self.inner
            .cluster
            .retry(&[], || async {
                let connection = self.txn_coordinator().await?;
                let request = EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(&id)))
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_committed(commit);
                let response = connection.send(&request, END_TXN_VERSION_MAX).await?;
                match response.error_code {
                    codes::NONE => Ok(()),
                    code => Err(ClientError::kafka(code, None, None)),
                }
            })
            .await?;
        progress.open = false;
        progress.partitions.clear();
        Ok(())
    }
}
