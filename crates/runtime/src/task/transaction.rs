//! A remote task's transactions: every settled commit is shipped in ONE
//! Kafka transaction of the task's own transactional id, holding the
//! commit's outbox batches (derived records and changelog records) and the
//! commit's input offsets, so on any Kafka cluster a commit becomes
//! visible whole or not at all (docs/design.md §5).
//!
//! ```text
//! start:  InitProducerId(id)            fences every older producer of the
//!                                       id, ends the transaction it left open
//! ship:   AddPartitionsToTxn(outbox partitions)
//!         Produce(each batch, restamped with this epoch and the next
//!                 sequence of its partition; one at a time per partition,
//!                 the partitions side by side)
//!         AddOffsetsToTxn(group) + TxnOffsetCommit(input offsets,
//!                 metadata "strata/1 <lineage> <commit>")
//!         EndTxn(commit)
//!         then the outbox entries are dropped from the task's state
//! ```
//!
//! The transactional id is `<app>-<processor>-<partition>` (a version's
//! suffix after the app), so it follows the task to whichever instance
//! runs it: the instance that starts the task fences the one that ran it
//! before, whose next call answers PRODUCER_FENCED (or
//! INVALID_PRODUCER_EPOCH) and which then gives the task up.
//!
//! Sequences count from 0 in every epoch, and the epoch changes with every
//! start, so a batch's producer fields are written at ship time, not at
//! commit: the bytes committed in the outbox are the records; the identity
//! is the transaction's.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::RuntimeError;
use crate::state::OutboxBatch;
use strata_client::transactional::{ProducerIdentity, Transactional, is_fenced};
use strata_client::{ClientError, Cluster};

/// How long a transaction may stay open before the coordinator aborts it:
/// far above one commit's shipping time.
pub(crate) const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

/// The prefix of the offsets' metadata the runtime commits.
const METADATA_PREFIX: &str = "strata/1";

/// The names a task's transactions go under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnNames {
    /// `<app><suffix>-<processor>-<partition>`.
    pub transactional_id: String,
    /// The consumer group the input offsets are committed to:
    /// `<app><suffix>-<processor>` (one per processor, so two processors
    /// reading one topic keep apart).
    pub group: String,
}

impl TxnNames {
    pub fn of(app: &str, processor: &str, partition: i32) -> Self {
        Self {
            transactional_id: format!("{app}-{processor}-{partition}"),
            group: format!("{app}-{processor}"),
        }
    }
}

/// A committed state's name, as the offsets' metadata carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CommitMark {
    pub lineage: u64,
    pub commit: u64,
}

impl CommitMark {
    pub fn metadata(&self) -> String {
        format!("{METADATA_PREFIX} {:016x} {}", self.lineage, self.commit)
    }

    /// The mark in committed offsets' metadata; None for metadata the
    /// runtime did not write (an empty commit, another client's).
    pub fn parse(metadata: &str) -> Option<Self> {
        let mut words = metadata.split(' ');
        if words.next() != Some(METADATA_PREFIX) {
            return None;
        }
        let lineage = u64::from_str_radix(words.next()?, 16).ok()?;
        let commit = words.next()?.parse().ok()?;
        match words.next() {
            None => Some(Self { lineage, commit }),
            Some(_) => None,
        }
    }
}

/// The task's transactional producer: its identity in this epoch and each
/// partition's next sequence in it.
pub(crate) struct TaskTxn {
    names: TxnNames,
    task: String,
    identity: ProducerIdentity,
    sequences: HashMap<(String, i32), i32>,
    /// The mark of the last commit known to be in the cluster: a commit
    /// with nothing new to ship (no outbox, the same mark) sends nothing.
    pub shipped: Option<CommitMark>,
}

impl TaskTxn {
    /// InitProducerId for the task's transactional id: from here on no
    /// older instance of the task can commit anything.
    pub async fn start(
        cluster: &Cluster,
        names: TxnNames,
        task: String,
    ) -> Result<Self, RuntimeError> {
        let requests = Transactional::new(cluster, &names.transactional_id);
        let identity = requests
            .init(TRANSACTION_TIMEOUT_MS, None)
            .await
            .map_err(|error| fenced_or(error, &task, &names))?;
        Ok(Self {
            names,
            task,
            identity,
            sequences: HashMap::new(),
            shipped: None,
        })
    }

    /// Aborts whatever transaction is open and takes the next epoch (an
    /// InitProducerId again): sequences count from 0 again. What a Kafka
    /// producer does after an abortable error inside a transaction, such
    /// as an out-of-order sequence once the broker forgot the producer's
    /// state between two transactions.
    pub async fn restart(&mut self, cluster: &Cluster) -> Result<(), RuntimeError> {
        let requests = Transactional::new(cluster, &self.names.transactional_id);
        // With the current identity (KIP-360): a producer another instance
        // has fenced meanwhile is told so, rather than fencing it back.
        self.identity = requests
            .init(TRANSACTION_TIMEOUT_MS, Some(self.identity))
            .await
            .map_err(|error| fenced_or(error, &self.task, &self.names))?;
        self.sequences.clear();
        Ok(())
    }

    pub fn names(&self) -> &TxnNames {
        &self.names
    }

    pub fn identity(&self) -> ProducerIdentity {
        self.identity
    }

    /// Ships one commit in one transaction: its outbox batches, then its
    /// input offsets (`(log topic, partition, next offset)`) marked with
    /// `mark`, then the commit of the transaction. On an error the
    /// transaction is left to be aborted by the next start (or by the
    /// coordinator's timeout); nothing of it is visible.
    pub async fn ship(
        &mut self,
        cluster: &Arc<Cluster>,
        outbox: &[(u64, OutboxBatch)],
        offsets: &[(String, i32, i64)],
        mark: CommitMark,
    ) -> Result<(), RuntimeError> {
        let id = self.names.transactional_id.clone();
        let requests = Transactional::new(cluster.as_ref(), &id);
        let mut partitions: Vec<(String, i32)> = outbox
            .iter()
            .map(|(_, b)| (b.topic.clone(), b.partition))
            .collect();
        partitions.sort();
        partitions.dedup();
        let (task, names) = (self.task.clone(), self.names.clone());
        let fail = move |error: ClientError| fenced_or(error, &task, &names);
        requests
            .add_partitions(self.identity, &partitions)
            .await
            .map_err(&fail)?;
        let queues = self.restamp(outbox)?;
        self.send_rounds(cluster, queues, &fail).await?;
        if !offsets.is_empty() {
            requests
                .commit_offsets(self.identity, &self.names.group, offsets, &mark.metadata())
                .await
                .map_err(&fail)?;
        }
        requests.end(self.identity, true).await.map_err(&fail)?;
        self.shipped = Some(mark);
        Ok(())
    }

    /// Every batch restamped with the producer's identity and the next
    /// sequences, queued in outbox order per partition.
    fn restamp(&mut self, outbox: &[(u64, OutboxBatch)]) -> Result<Vec<Queue>, RuntimeError> {
        let mut queues: Vec<Queue> = Vec::new();
        for (_, batch) in outbox {
            let slot = (batch.topic.clone(), batch.partition);
            let sequence = self.sequences.get(&slot).copied().unwrap_or(0);
            let mut bytes = batch.batch.clone();
            let (id, epoch) = self.identity;
            let restamped = strata_record::restamp_producer(&mut bytes, id, epoch, sequence, true)
                .and_then(|()| strata_record::BatchHeader::parse(&bytes));
            let header = restamped.map_err(|error| RuntimeError::Ship {
                task: self.task.clone(),
                topic: batch.topic.clone(),
                partition: batch.partition,
                error: error.into(),
            })?;
            let next = strata_record::add_sequence(sequence, header.last_offset_delta + 1);
            self.sequences.insert(slot, next);
            let queued =
                (queues.iter_mut()).find(|(t, p, _)| *t == batch.topic && *p == batch.partition);
            match queued {
                Some((_, _, queue)) => queue.push_back(Bytes::from(bytes)),
                None => queues.push((
                    batch.topic.clone(),
                    batch.partition,
                    VecDeque::from([Bytes::from(bytes)]),
                )),
            }
        }
        Ok(queues)
    }

    /// Sends the queued batches in rounds: one batch of each partition at
    /// a time (Kafka takes one batch per partition and request), the
    /// partitions at once.
    async fn send_rounds(
        &self,
        cluster: &Arc<Cluster>,
        mut queues: Vec<Queue>,
        fail: &impl Fn(ClientError) -> RuntimeError,
    ) -> Result<(), RuntimeError> {
        loop {
            let mut sending = tokio::task::JoinSet::new();
            for (topic, partition, queue) in &mut queues {
                let Some(bytes) = queue.pop_front() else {
                    continue;
                };
                let (cluster, id) = (Arc::clone(cluster), self.names.transactional_id.clone());
                let (topic, partition) = (topic.clone(), *partition);
                sending.spawn(async move {
                    let sent =
                        strata_client::append_batch(&cluster, Some(&id), &topic, partition, bytes)
                            .await;
                    (topic, partition, sent)
                });
            }
            if sending.is_empty() {
                return Ok(());
            }
            while let Some(joined) = sending.join_next().await {
                let (topic, partition, sent) = joined.map_err(|e| RuntimeError::TaskPanicked {
                    task: self.task.clone(),
                    reason: e.to_string(),
                })?;
                let Err(error) = sent else {
                    continue;
                };
                // Fenced, refused, or the cluster away: what the error is
                // decides what the run does about it.
                let decided =
                    is_fenced(&error) || error.is_authorization_failure() || error.is_unavailable();
                return Err(match decided {
                    true => fail(error),
                    false => RuntimeError::Ship {
                        task: self.task.clone(),
                        topic,
                        partition,
                        error: error.into(),
                    },
                });
            }
        }
    }
}

/// One partition's restamped batches, to be sent in order.
type Queue = (String, i32, VecDeque<Bytes>);

/// A client error of a transactional call, as the runtime reports it: a
/// fenced producer means another instance owns the task; a refusal of the
/// ACLs names the task's transactional id and group.
fn fenced_or(error: ClientError, task: &str, names: &TxnNames) -> RuntimeError {
    if is_fenced(&error) {
        RuntimeError::Fenced {
            task: task.to_string(),
            transactional_id: names.transactional_id.clone(),
        }
    } else {
        RuntimeError::from(error).concerning(|| {
            format!(
                "task {task} (transactional id {}, group {})",
                names.transactional_id, names.group
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_mark_reads_back_from_its_metadata() {
        let mark = CommitMark {
            lineage: 0xdead_beef_0012_3456,
            commit: 981,
        };
        assert_eq!(mark.metadata(), "strata/1 deadbeef00123456 981");
        assert_eq!(CommitMark::parse(&mark.metadata()), Some(mark));
    }

    #[test]
    fn metadata_the_runtime_did_not_write_is_no_commit_mark() {
        for other in [
            "",
            "strata/1",
            "strata/1 zz 3",
            "strata/2 00 1",
            "strata/1 00 1 x",
        ] {
            assert_eq!(CommitMark::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn transactional_ids_and_groups_follow_the_app_processor_and_partition() {
        let names = TxnNames::of("wordcount.fix-1", "count", 4);
        assert_eq!(names.transactional_id, "wordcount.fix-1-count-4");
        assert_eq!(names.group, "wordcount.fix-1-count");
    }
}
