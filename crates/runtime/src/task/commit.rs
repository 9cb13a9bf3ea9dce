//! The task's side of the commit protocol: commit the run (its write runs
//! on the state's writer thread), settle it, then ship the outbox to the
//! log with the task's producer id and the batches' fixed sequences.
//!
//! The commit before is always settled and shipped before the next one
//! begins, so the outbox holds one commit's batches at most (remote, the
//! cluster may be Kafka, which recognises a resend among a producer's last
//! 5 batches per partition only).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{RuntimeError, ShipError};
use crate::log_access::LogAccess;
use crate::state::OutboxBatch;

use super::positions::{self, Positions};
use super::transaction::CommitMark;

/// How often a remote task ships one commit, each time in a new
/// transaction, before it stops with the error.
const SHIP_ATTEMPTS_MAX: u32 = 3;
use super::{Pending, Task};

impl Task {
    /// Commits the run with the input offsets. The commit's write runs
    /// while the task goes on; its records are shipped once it is settled:
    /// as soon as it lands, or at the next commit, which waits for it
    /// first (see [`TaskState::begin_commit`]).
    pub(super) async fn commit(&mut self) -> Result<(), RuntimeError> {
        if !self.pending.moved {
            return Ok(());
        }
        let started = Instant::now();
        let committed = self.commit_moved().await;
        let spent = started.elapsed();
        self.in_commits += spent;
        if committed.is_ok() {
            let metrics = &self.metrics;
            metrics.commits.fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
            metrics.commit_latency.observe(micros);
            let stats = self.state.db_stats();
            metrics
                .state_bytes
                .store(stats.sst_bytes, Ordering::Relaxed);
            (metrics.pending_compaction_bytes)
                .store(stats.pending_compaction_bytes, Ordering::Relaxed);
            metrics
                .writes_stopped
                .store(stats.writes_stopped, Ordering::Relaxed);
        }
        committed
    }

    /// [`Task::commit`] of a run that moved.
    async fn commit_moved(&mut self) -> Result<(), RuntimeError> {
        // Past the crash point nothing commits, whatever asked for it.
        if self.crashed() {
            return Err(RuntimeError::Crashed);
        }
        self.settle().await?;
        // The outbox bound: the commit before was settled and shipped, so
        // this one's batches are the only ones in it.
        assert!(
            !self.setup.emits || self.state.outbox_is_empty()?,
            "task {}: a commit began with batches of the one before unshipped",
            self.setup.name()
        );
        let offsets: Vec<(&str, i64)> = self.inputs.iter().map(|i| (&*i.topic, i.next)).collect();
        // The rate while busy, smoothed, for `status`'s catch-up estimate.
        if let Some(since) = self.fetching_since.replace(Instant::now()) {
            self.busy += since.elapsed();
        }
        if self.pending.records > 0 && self.busy >= Duration::from_millis(10) {
            let sample = self.pending.records as f64 / self.busy.as_secs_f64();
            let rate = self.rate.map_or(sample, |r| 0.7 * r + 0.3 * sample);
            self.rate = Some(rate);
            self.state.note_rate(rate);
            self.metrics.set_rate(rate);
        }
        self.busy = Duration::ZERO;
        // The commit before was settled and shipped first: the outbox holds
        // one commit's batches at most (remote, the cluster may be Kafka,
        // which recognises a resend among a producer's last 5 batches per
        // partition only).
        let written = self.state.store_writes();
        self.state.begin_commit(&offsets)?;
        // The next run begins here; the failures of this one are behind.
        self.run_start = self.inputs.iter().map(|i| i.next).collect();
        self.run_progress = (0, 0);
        self.failures.committed(&self.run_start);
        let written = self.state.store_writes() - written;
        (self.setup.progress.store_writes).fetch_add(written, std::sync::atomic::Ordering::Relaxed);
        self.pending = Pending::new();
        if self.checkpoint_if_due()? {
            self.ship().await?;
        }
        Ok(())
    }

    /// Waits for the commit in flight, then ships the outbox.
    pub(super) async fn settle(&mut self) -> Result<(), RuntimeError> {
        self.state.settle()?;
        self.ship().await
    }

    /// Appends every outbox batch, in order, then drops them (not in a
    /// rebuild: a rebuilt state takes the live task's outbox at the swap).
    /// Remote, the batches and the input offsets go in one transaction.
    pub(super) async fn ship(&mut self) -> Result<(), RuntimeError> {
        if !self.setup.emits {
            return Ok(());
        }
        if self.txn.is_some() {
            return self.ship_in_transaction().await;
        }
        let outbox = self.state.outbox()?;
        let Some((last, _)) = outbox.last() else {
            return Ok(());
        };
        let last = *last;
        let mut touched: Vec<(String, i32)> = Vec::new();
        for (_, batch) in &outbox {
            self.setup
                .log
                .append(&batch.topic, batch.partition, &batch.batch)
                .await
                .map_err(|error| RuntimeError::Ship {
                    task: self.setup.name(),
                    topic: batch.topic.clone(),
                    partition: batch.partition,
                    error: ShipError::Append(Box::new(error)),
                })?;
            if !touched
                .iter()
                .any(|(t, p)| *t == batch.topic && *p == batch.partition)
            {
                touched.push((batch.topic.clone(), batch.partition));
            }
        }
        if self.setup.config.sync {
            self.setup.log.flush(&touched)?;
        }
        self.count_shipped(outbox.iter().map(|(_, batch)| batch));
        self.state.remove_shipped(last)?;
        Ok(())
    }

    /// Ships the settled commit in one transaction: its outbox batches and
    /// its input offsets, marked with the state's lineage and commit
    /// number (see `transaction`); then drops the outbox.
    async fn ship_in_transaction(&mut self) -> Result<(), RuntimeError> {
        let (Some(txn), LogAccess::Remote(remote)) = (&mut self.txn, &self.setup.log) else {
            unreachable!("a task ships in transactions only remote");
        };
        let lineage = self
            .state
            .lineage()
            .expect("a remote task's state has its lineage from the start");
        let mark = CommitMark {
            lineage,
            commit: self.state.commit_number(),
        };
        let outbox = self.state.outbox()?;
        if outbox.is_empty() && txn.shipped == Some(mark) {
            return Ok(());
        }
        let partition = self.setup.partition;
        let mut offsets: Vec<(String, i32, i64)> = Vec::new();
        let mut positions = Positions {
            mark,
            offsets: Default::default(),
        };
        for input in &self.inputs {
            if let Some(next) = self.state.input_offset(&input.topic) {
                offsets.push((input.log_topic.clone(), partition, next));
                positions.offsets.insert(input.topic.to_string(), next);
            }
        }
        if outbox.is_empty() && offsets.is_empty() {
            return Ok(());
        }
        // The positions record goes last, after the outbox's batches.
        let mut batches = outbox.clone();
        if let Some(topic) = &self.setup.positions {
            let task = self.setup.name();
            batches.push((u64::MAX, positions.batch(&task, topic, partition)?));
        }
        let mut attempt = 1;
        loop {
            match txn.ship(&remote.cluster, &batches, &offsets, mark).await {
                Ok(()) => {
                    let metrics = &self.metrics;
                    metrics
                        .transactions_committed
                        .fetch_add(1, Ordering::Relaxed);
                    break;
                }
                // Another epoch, or a refusal of the ACLs: shipping
                // again cannot help.
                Err(error @ (RuntimeError::Fenced { .. } | RuntimeError::NotAuthorized { .. })) => {
                    return Err(error);
                }
                // Take the next epoch: the coordinator ends the failed
                // transaction first, committing it if its commit was
                // decided (only the answer was lost), else aborting it.
                // Shipped again only if it did not commit.
                Err(error) if attempt < SHIP_ATTEMPTS_MAX => {
                    attempt += 1;
                    tracing::info!(
                        task = %self.setup.name(),
                        "shipping commit {} failed ({error}): ending its transaction to learn whether it committed",
                        mark.commit
                    );
                    txn.restart(&remote.cluster).await?;
                    let group = &txn.names().group;
                    let now = positions::committed(&self.setup, group, remote).await?;
                    if now.is_some_and(|now| now.mark == mark) {
                        tracing::warn!(
                            task = %self.setup.name(),
                            "shipping commit {} failed ({error}), but its transaction committed: not shipped again",
                            mark.commit
                        );
                        txn.shipped = Some(mark);
                        (self.metrics.transactions_committed).fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    tracing::warn!(
                        task = %self.setup.name(),
                        "shipping commit {} failed ({error}); its transaction was aborted: shipping it again",
                        mark.commit
                    );
                    (self.metrics.transactions_aborted).fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => return Err(error),
            }
        }
        self.count_shipped(outbox.iter().map(|(_, batch)| batch));
        if let Some((last, _)) = outbox.last() {
            self.state.remove_shipped(*last)?;
        }
        Ok(())
    }

    /// Counts `batches` appended to the derived topics: records, bytes and
    /// each batch's age (a changelog's batches are not derived records).
    fn count_shipped<'b>(&self, batches: impl Iterator<Item = &'b OutboxBatch>) {
        let now = strata_record::time::now_ms();
        for batch in batches {
            let Ok(header) = strata_record::BatchHeader::parse(&batch.batch) else {
                continue;
            };
            let outputs = &self.metrics.outputs;
            if outputs.iter().any(|o| o.topic == batch.topic) {
                let (records, bytes) =
                    (header.record_count.max(0) as u64, batch.batch.len() as u64);
                (self.metrics).shipped(&batch.topic, records, bytes, header.max_timestamp, now);
            }
        }
    }

    pub(super) fn input_gone(&self, topic: &str, start: i64, position: i64) -> RuntimeError {
        RuntimeError::InputGone {
            task: self.setup.name(),
            topic: topic.to_string(),
            partition: self.setup.partition,
            start,
            position,
        }
    }
}
