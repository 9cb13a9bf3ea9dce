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

use super::Producer;
use crate::ClientError;
use crate::transactional::Transactional;

/// The transaction in progress, if any.
#[derive(Debug, Default)]
pub(super) struct TxnProgress {
    pub(super) open: bool,
    pub(super) partitions: BTreeSet<(Arc<str>, i32)>,
    /// Offsets were sent with it (the coordinator knows the transaction
    /// even without partitions).
    pub(super) offsets: bool,
}

impl Producer {
    fn transactional_id(&self) -> Result<&str, ClientError> {
        self.inner
            .config
            .transactional_id
            .as_deref()
            .ok_or_else(|| ClientError::Invalid("the producer has no transactional_id".into()))
    }

    fn requests(&self) -> Result<Transactional<'_>, ClientError> {
        Ok(Transactional::new(
            &self.inner.cluster,
            self.transactional_id()?,
        ))
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
        self.requests()?
            .add_partitions(self.inner.identity(), &[(topic.to_string(), partition)])
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
        self.requests()?
            .commit_offsets(self.inner.identity(), group, offsets, "")
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
        let identity = self
            .requests()?
            .init(timeout_ms, Some(self.inner.identity()))
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
        self.requests()?.end(self.inner.identity(), commit).await?;
        progress.open = false;
        progress.partitions.clear();
        Ok(())
    }
}
