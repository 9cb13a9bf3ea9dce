//! Durability of a partition: group-committed fdatasync and the recovery
//! point that records how far it reached; [`flush_together`] for a request
//! that needs several partitions durable at once.

use super::{PartitionLog, recovery_point};
use crate::LogError;
use crate::group_commit::Turn;

impl PartitionLog {
    /// Makes every offset below `target` durable, sharing the fdatasync with
    /// concurrent callers. Returns the durable offset reached.
    pub fn flush_to(&self, target: i64) -> Result<i64, LogError> {
        let target = target.min(self.log_end_offset());
        match self.commit.begin(target, &self.name)? {
            Turn::Done(durable) => Ok(durable),
            Turn::Lead => {
                let (file, path, next_offset) = {
                    let mut inner = self.exclusive();
                    inner.unflushed_records = 0;
                    inner.oldest_unflushed_ms = None;
                    let active = inner.active();
                    (
                        std::sync::Arc::clone(active.log_file()),
                        active.log_path(),
                        inner.next_offset,
                    )
                };
                let result = self
                    .disk
                    .storage()
                    .sync(&file)
                    .map(|()| next_offset)
                    .map_err(|e| format!("fdatasync of {} failed: {e}", path.display()));
                if let Err(reason) = &result {
                    tracing::error!(partition = %self.name, "{reason}; the partition is now read-only");
                }
                self.commit.finish(result.clone());
                match result {
                    Ok(durable) => {
                        self.write_recovery_point(durable);
                        if durable >= target {
                            Ok(durable)
                        } else {
                            self.flush_to(target)
                        }
                    }
                    Err(reason) => Err(self.read_only(reason)),
                }
            }
        }
    }

    /// Makes everything appended so far durable.
    pub fn flush(&self) -> Result<i64, LogError> {
        let end = self.log_end_offset();
        self.flush_to(end)
    }

    /// Flushes if the `flush.ms` policy says unflushed data is too old.
    pub fn flush_if_due(&self, now_ms: i64) -> Result<(), LogError> {
        let due = {
            let inner = self.shared();
            inner.config.flush_ms > 0
                && inner
                    .oldest_unflushed_ms
                    .is_some_and(|t| now_ms.saturating_sub(t) >= inner.config.flush_ms)
        };
        if due {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn write_recovery_point(&self, offset: i64) {
        if let Err(e) = self
            .disk
            .write_at(&self.recovery_point, &recovery_point::encode(offset), 0)
        {
            // Only costs a longer recovery next time.
            tracing::warn!(partition = %self.name, "cannot record recovery point: {e}");
        }
    }
}

/// Threads [`flush_together`] syncs on at most, its caller's included.
const FLUSH_THREADS_MAX: usize = 8;

/// Makes each partition durable up to its target, the partitions' syncs
/// issued together (on up to [`FLUSH_THREADS_MAX`] threads, each taking
/// an equal run of the targets), so a request over several partitions
/// waits for about one fdatasync rather than one per partition. One result
/// per target, in order.
pub fn flush_together(targets: &[(&PartitionLog, i64)]) -> Vec<Result<i64, LogError>> {
    let flush_run = |run: &[(&PartitionLog, i64)]| -> Vec<Result<i64, LogError>> {
        run.iter()
            .map(|(partition, end)| partition.flush_to(*end))
            .collect()
    };
    if targets.len() <= 1 {
        return flush_run(targets);
    }
    let run_length = targets.len().div_ceil(FLUSH_THREADS_MAX);
    let mut runs = targets.chunks(run_length);
    let first = runs.next().unwrap_or_default();
    std::thread::scope(|scope| {
        let others: Vec<_> = runs
            .map(|run| scope.spawn(move || flush_run(run)))
            .collect();
        let mut results = flush_run(first);
        for other in others {
            results.extend(other.join().expect("a flush does not panic"));
        }
        results
    })
}
