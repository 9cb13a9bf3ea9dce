//! Reading a store's changelog partition into the store: the restore of a
//! task taken over (to the changelog's end, once), and the standby copy
//! kept warm on an instance that may take the task over (on and on).
//!
//! Both read `read_committed` (only committed transactions' records: the
//! committed state), put each record back in log order (a later record of
//! a key replaces an earlier one, a tombstone deletes), and write, with
//! every batch of entries, the offset they reach (`restored/<store>` in
//! the state's meta). A copy that knows its position goes on from it:
//! compaction only drops records a later one of the same key replaces,
//! and that one is past the position, so what the copy reads from there on
//! brings it to the changelog's state. A position the changelog no longer
//! holds (below its start, or past its end: a changelog made anew) is not
//! resumable; the copy starts over. Nor is one that stopped reading longer
//! than the changelog's `delete.retention.ms` ago with records past it:
//! the cleaner may have dropped a tombstone the copy never read, whose
//! key it would keep (see `state::Restored`).

use std::time::{Duration, Instant};

use crate::board::{TaskBoard, TaskView};
use crate::error::{RestoreError, RuntimeError};
use crate::log_access::LogAccess;
use crate::state::{Restoring, TaskState};
use strata_client::AbortedFilter;

use super::{DECOMPRESSED_BYTES_MAX, TaskSetup};

/// How much earlier than its retention says a tombstone is taken to be
/// gone: the changelog's timestamps come from other instances' clocks,
/// and reading up to it takes time.
const CLOCK_MARGIN_MS: i64 = 60_000;
/// How often a long restore says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// One task's way to its changelogs.
pub(crate) struct ChangelogReader<'a> {
    pub log: &'a LogAccess,
    pub task: String,
    pub partition: i32,
    pub fetch_bytes: u32,
    /// Per store (in the order of the spec's stores), its changelog topic.
    pub changelogs: &'a [Option<String>],
    /// Where the task's line goes while it restores.
    pub board: &'a TaskBoard,
}

/// What one fetch of a changelog brought.
pub(crate) struct ChangelogRead {
    /// The offset read up to (exclusive).
    pub reached: i64,
    pub records: u64,
    /// Where the changelog ended for the fetch (its last stable offset).
    pub end: i64,
}

impl<'a> ChangelogReader<'a> {
    pub fn of(setup: &'a TaskSetup) -> Self {
        Self {
            log: &setup.log,
            task: setup.name(),
            partition: setup.partition,
            fetch_bytes: setup.config.fetch_bytes,
            changelogs: &setup.changelogs,
            board: &setup.board,
        }
    }

    /// Whether `state` can go on reading its changelogs from where it
    /// stopped: no lineage (not a state the task ran on), and, for every
    /// changelog, a position it still holds, and (when the changelog holds
    /// records past it) no tombstone past it the cleaner may have dropped
    /// (`delete.retention.ms`: see `Restored::tombstones_kept_until`);
    /// a copy that lagged longer would keep keys deleted meanwhile.
    pub async fn resumable(
        &self,
        state: &TaskState,
        stores: &[String],
    ) -> Result<bool, RuntimeError> {
        if state.lineage().is_some() {
            return Ok(false);
        }
        let now_ms = strata_record::time::now_ms();
        for (store, changelog) in stores.iter().zip(self.changelogs) {
            let Some(changelog) = changelog else {
                continue;
            };
            // No position: nothing of this store was read yet (a position
            // lands with every entry restored), so it goes on from the start.
            let start = self.log.start_offset(changelog, self.partition).await?;
            let Some(restored) = state.restored(store)? else {
                continue;
            };
            let end = self.log.end_offset(changelog, self.partition).await?;
            if restored.next < start || restored.next > end {
                return Ok(false);
            }
            if restored.next == end {
                continue;
            }
            let retention_ms = self.log.delete_retention_ms(changelog).await?;
            let kept_until = restored.tombstones_kept_until(retention_ms);
            if now_ms.saturating_add(CLOCK_MARGIN_MS) >= kept_until {
                tracing::info!(
                    task = %self.task,
                    "the copy of {store} read {changelog}/{} up to offset {} (of {end}) too long ago: tombstones past it may be cleaned away (delete.retention.ms={retention_ms}); restoring from scratch",
                    self.partition,
                    restored.next
                );
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Reads `store`'s changelog from the state's position (or the start)
    /// to its end, saying how far it is now and then.
    pub async fn restore(
        &self,
        state: &mut TaskState,
        store: &str,
        changelog: &str,
    ) -> Result<(), RuntimeError> {
        let started = Instant::now();
        let start = self.log.start_offset(changelog, self.partition).await?;
        let from = state.restored_position(store)?.unwrap_or(start).max(start);
        let end = self.log.end_offset(changelog, self.partition).await?;
        let (mut next, mut records) = (from, 0u64);
        let mut said = Instant::now();
        let mut restoring = state.restoring(store)?;
        let total = end - from;
        self.board.set(
            &self.task,
            TaskView::Restoring {
                done: 0,
                total,
                records: 0,
            },
        );
        while next < end {
            let read = (self.read_once(&mut restoring, store, changelog, next)).await?;
            let (reached, read) = (read.reached, read.records);
            if reached == next {
                return Err(self.failed(
                    store,
                    changelog,
                    RestoreError::NoProgress { offset: next, end },
                ));
            }
            (next, records) = (reached, records + read);
            let done = (next - from).min(total);
            (self.board).set(
                &self.task,
                TaskView::Restoring {
                    done,
                    total,
                    records,
                },
            );
            if restoring.full() {
                restoring.flush()?;
            }
            if said.elapsed() >= PROGRESS_EVERY {
                said = Instant::now();
                let done = (next - from) as f64 / (end - from).max(1) as f64;
                tracing::info!(
                    task = %self.task,
                    "restoring {store} from {changelog}/{}: {:.0}% ({records} records, offset {next} of {end})",
                    self.partition,
                    done * 100.0
                );
            }
        }
        restoring.flush()?;
        self.board.restored(records, started.elapsed());
        tracing::info!(
            task = %self.task,
            "restored {store} from {changelog}/{}: {records} records, offsets {from} to {end}, in {:.1} s",
            self.partition,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// One fetch of `changelog` from `next`, held in `restoring` with the
    /// position it reaches (written when it flushes).
    pub async fn read_once(
        &self,
        restoring: &mut Restoring<'_>,
        store: &str,
        changelog: &str,
        next: i64,
    ) -> Result<ChangelogRead, RuntimeError> {
        let asked_ms = strata_record::time::now_ms();
        let mut fetched = (self.log)
            .fetch(changelog, self.partition, next, self.fetch_bytes)
            .await?;
        let failed = |error: RestoreError| self.failed(store, changelog, error);
        let unreadable = |offset: i64| {
            move |error| RestoreError::Unreadable {
                offset,
                error: Box::new(error),
            }
        };
        let mut filter = AbortedFilter::new(std::mem::take(&mut fetched.aborted));
        let mut rest: &[u8] = &fetched.records;
        let (before, mut next, mut records) = (next, next, 0u64);
        let mut max_timestamp = i64::MIN;
        while !rest.is_empty() {
            let batch = match fetched.batch_at(rest) {
                Ok(batch) => batch,
                // A fetch may end inside a batch; the next starts there.
                Err(_) if next > before => break,
                Err(error) => return Err(failed(unreadable(next)(error))),
            };
            rest = &rest[batch.size_bytes()..];
            let header = *batch.header();
            max_timestamp = max_timestamp.max(header.max_timestamp);
            if filter.visible(&batch) {
                let batch_records = batch
                    .records(DECOMPRESSED_BYTES_MAX)
                    .map_err(|e| failed(unreadable(header.base_offset)(e)))?;
                for record in batch_records.iter() {
                    let record = record.map_err(|e| failed(unreadable(header.base_offset)(e)))?;
                    if record.offset < next {
                        continue;
                    }
                    let Some(key) = record.key else {
                        return Err(failed(RestoreError::NoKey {
                            offset: record.offset,
                        }));
                    };
                    restoring.put(key, record.value)?;
                    records += 1;
                }
            }
            next = next.max(header.next_offset());
        }
        // What lies past the end this fetch saw was written after it was
        // sent (an answer fetched ahead was sent before it was asked for);
        // what lies past a record read, after that record.
        // A record stamped ahead of this clock (another instance's, run
        // fast) says no more than that it is older than now.
        let unread_after_ms = match next >= fetched.end {
            true => asked_ms.min(fetched.sent_ms),
            false => max_timestamp.min(strata_record::time::now_ms()),
        };
        if next > before || next >= fetched.end {
            restoring.reached(next, unread_after_ms);
        }
        Ok(ChangelogRead {
            reached: next,
            records,
            end: fetched.end,
        })
    }

    fn failed(&self, store: &str, changelog: &str, error: RestoreError) -> RuntimeError {
        RuntimeError::Restore {
            task: self.task.clone(),
            store: store.to_string(),
            topic: changelog.to_string(),
            partition: self.partition,
            error,
        }
    }
}

/// Removes a task's state directory (a stale copy about to be restored).
pub(crate) fn remove_state(dir: &std::path::Path) -> Result<(), RuntimeError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(RuntimeError::Io {
                context: format!("removing the stale state {}", dir.display()),
                error,
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(RuntimeError::io(format!("creating {}", dir.display())))
}
