//! Writing a transaction's markers: one COMMIT or ABORT control batch in
//! every partition the transaction wrote to, each made durable before the
//! coordinator records the transaction complete.
//!
//! The markers are appended one partition after another (each append is a
//! write to the page cache) and then synced together
//! ([`flush_together`]), so a transaction over many partitions waits for about one
//! fdatasync, not one per partition.

use std::sync::Arc;

use crate::AppendSignals;
use strata_log::{LogError, LogManager, PartitionLog, flush_together};
use strata_record::{ControlRecord, MarkerKind};

/// Writes `kind` markers of `producer_id` at `epoch` into `partitions` and
/// waits until they are on disk. A partition that no longer exists is
/// skipped (its topic was deleted, and its transaction with it); so is one
/// whose producer has moved past `epoch` (a newer coordinator decision
/// already ended the transaction there). Every partition is tried, and
/// those that took their marker are synced, whatever failed elsewhere; the
/// first failure is returned, and the caller writes every marker again
/// later (a second marker where the first landed changes nothing).
pub(super) fn write(
    log: &LogManager,
    appends: &AppendSignals,
    partitions: &[(String, i32)],
    producer_id: i64,
    epoch: i16,
    kind: MarkerKind,
) -> Result<(), LogError> {
    let marker = ControlRecord {
        kind,
        coordinator_epoch: 0,
    };
    let mut to_sync: Vec<(Arc<PartitionLog>, i64)> = Vec::with_capacity(partitions.len());
    let mut failure = None;
    for (topic_name, index) in partitions {
        let Some(topic) = log.topic(topic_name) else {
            continue;
        };
        let Some(partition) = topic.partition(*index) else {
            continue;
        };
        match partition.append_marker(producer_id, epoch, marker) {
            Ok(appended) => {
                let end = appended.last_offset + 1;
                appends.appended(topic.id(), *index, end);
                to_sync.push((partition, end));
            }
            Err(LogError::InvalidProducerEpoch { current_epoch, .. }) => {
                tracing::warn!(
                    partition = partition.name(),
                    producer_id,
                    epoch,
                    current_epoch,
                    "transaction marker not written: the producer has a newer epoch here"
                );
            }
            Err(error) => {
                tracing::warn!(
                    partition = partition.name(),
                    "transaction marker not written: {error}"
                );
                failure.get_or_insert(error);
            }
        }
    }
    let targets: Vec<(&PartitionLog, i64)> = to_sync
        .iter()
        .map(|(partition, end)| (&**partition, *end))
        .collect();
    let synced = flush_together(&targets)
        .into_iter()
        .try_for_each(|synced| synced.map(drop));
    match failure {
        Some(error) => Err(error),
        None => synced,
    }
}
