//! [`Writer`]: the thread a task's commits are written on, so the write and
//! its fsync run while the task goes on with its next run.
//!
//! Jobs are written one at a time and answered in order; the task never
//! sends a job before the answer to the one before (at most one commit in
//! flight, see `commit`).

use std::sync::{Arc, mpsc};

use rocksdb::{DB, WriteBatch};

use super::StateError;
use super::slot_table::DirtyEntries;

/// A commit for the writer: the write batch of the bookkeeping, and the
/// run's store writes to add to it.
pub(super) struct CommitJob {
    pub batch: WriteBatch,
    pub writes: Vec<(String, Vec<u8>)>,
}

/// The thread a task's commits are written on (started with the first),
/// one at a time, each answered in order.
pub(super) struct Writer {
    pub jobs: mpsc::Sender<CommitJob>,
    pub done: mpsc::Receiver<Result<(), StateError>>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    pub fn start(db: Arc<DB>, sync: bool, stores: String) -> std::io::Result<Self> {
        let (jobs, incoming) = mpsc::channel::<CommitJob>();
        let (finished, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("strata-commit".into())
            .spawn(move || {
                for job in incoming {
                    let written = write_commit(&db, job.batch, &job.writes, sync, &stores);
                    if finished.send(written).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Self { jobs, done, thread })
    }

    /// Stops the thread once its last job is done (the database closes
    /// with the state, not after it).
    pub fn stop(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }
}

/// A commit's write: the run's store writes (per store, as
/// `SlotTable::take_dirty` left them) added to `batch` in key order, then
/// the one atomic write. In key order, the memtable's skip list inserts a
/// run of ascending keys next to each other, several times faster than
/// scattered ones.
fn write_commit(
    db: &DB,
    mut batch: WriteBatch,
    writes: &[(String, Vec<u8>)],
    sync: bool,
    stores: &str,
) -> Result<(), StateError> {
    for (store, entries) in writes {
        let family = db
            .cf_handle(store)
            .ok_or_else(|| StateError::UnknownStore(store.clone(), stores.to_string()))?;
        let mut entries: Vec<_> = DirtyEntries::new(entries).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        debug_assert!(
            entries.windows(2).all(|w| w[0].0 < w[1].0),
            "a key of {store} taken twice from its table"
        );
        for (key, value) in entries {
            match value {
                Some(value) => batch.put_cf(family, key, value),
                None => batch.delete_cf(family, key),
            }
        }
    }
    let mut options = rocksdb::WriteOptions::default();
    options.set_sync(sync);
    db.write_opt(batch, &options)?;
    Ok(())
}
