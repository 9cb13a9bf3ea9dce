//! [`Writer`]: where a task's commits are written, off the task's thread,
//! so the write and its fsync run while the task goes on with its next run.
//!
//! Jobs of one task are written one at a time and answered in order; the
//! task never sends a job before the answer to the one before (at most one
//! commit in flight, see `commit`). The writes run on a pool of
//! [`WRITER_THREADS`] threads every task of the process shares: a thread per
//! task would grow with the tasks (600 tasks held 600 idle threads), while
//! the disk serves only so many fsyncs at once. A job holds its database
//! until written and lets go of it before it answers; a state settles its
//! commit in flight before it closes, so its database closes with it. A
//! job dropped unanswered (its pool thread gone) answers as a stopped
//! writer, never as a wait without end.

use std::sync::{Arc, Mutex, OnceLock, mpsc};

use rocksdb::{DB, WriteBatch};

use super::StateError;
use super::dirty_entries::DirtyEntries;

/// Threads writing commits, for the whole process: enough that commits of
/// tasks on different disks, or fsyncs the file system batches, run side by
/// side.
const WRITER_THREADS: usize = 16;

/// A commit for the writer: the write batch of the bookkeeping, and the
/// run's store writes to add to it.
pub(super) struct CommitJob {
    pub batch: WriteBatch,
    pub writes: Vec<(String, Vec<u8>)>,
}

/// A commit queued for the pool, with where its answer goes.
struct Queued {
    db: Arc<DB>,
    job: CommitJob,
    sync: bool,
    stores: Arc<str>,
    answer: mpsc::Sender<Result<(), StateError>>,
}

/// One task's way to the writer pool.
pub(super) struct Writer {
    db: Arc<DB>,
    sync: bool,
    stores: Arc<str>,
    /// The answer of the job in flight.
    pending: Option<mpsc::Receiver<Result<(), StateError>>>,
}

impl Writer {
    /// A task's writer (the pool starts with the first).
    pub fn start(db: Arc<DB>, sync: bool, stores: String) -> std::io::Result<Self> {
        pool()?;
        Ok(Self {
            db,
            sync,
            stores: stores.into(),
            pending: None,
        })
    }

    /// Queues a commit (the one before it answered); an error when the
    /// pool is gone.
    pub fn send(&mut self, job: CommitJob) -> Result<(), ()> {
        let (answer, pending) = mpsc::channel();
        let queued = Queued {
            db: Arc::clone(&self.db),
            job,
            sync: self.sync,
            stores: Arc::clone(&self.stores),
            answer,
        };
        let pool = pool().map_err(|_| ())?;
        pool.send(queued).map_err(|_| ())?;
        self.pending = Some(pending);
        Ok(())
    }

    /// The answer of the commit in flight, if it came.
    pub fn try_answer(&mut self) -> Option<Result<(), StateError>> {
        let answer = match self.pending.as_ref()?.try_recv() {
            Ok(answer) => answer,
            Err(mpsc::TryRecvError::Empty) => return None,
            Err(mpsc::TryRecvError::Disconnected) => Err(self.stopped()),
        };
        self.pending = None;
        Some(answer)
    }

    /// Waits for the answer of the commit in flight.
    pub fn answer(&mut self) -> Result<(), StateError> {
        let Some(pending) = self.pending.take() else {
            return Err(self.stopped());
        };
        pending.recv().unwrap_or_else(|_| Err(self.stopped()))
    }

    fn stopped(&self) -> StateError {
        StateError::WriterStopped {
            stores: self.stores.to_string(),
        }
    }
}

/// The process's writer pool: its queue, started on first use.
fn pool() -> std::io::Result<&'static mpsc::Sender<Queued>> {
    static POOL: OnceLock<Result<mpsc::Sender<Queued>, String>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let (jobs, incoming) = mpsc::channel::<Queued>();
        let incoming = Arc::new(Mutex::new(incoming));
        for at in 0..WRITER_THREADS {
            let incoming = Arc::clone(&incoming);
            std::thread::Builder::new()
                .name(format!("strata-commit-{at}"))
                .spawn(move || write_queued(&incoming))
                .map_err(|error| error.to_string())?;
        }
        Ok(jobs)
    });
    pool.as_ref()
        .map_err(|error| std::io::Error::other(error.clone()))
}

/// A pool thread: takes the next commit, writes it, answers.
fn write_queued(incoming: &Mutex<mpsc::Receiver<Queued>>) {
    loop {
        let next = incoming.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(queued) = next else {
            return;
        };
        let Queued {
            db,
            job,
            sync,
            stores,
            answer,
        } = queued;
        // A write that panics fails its commit alone (the task's state is
        // poisoned by it), not the pool.
        let write = || write_commit(&db, job.batch, &job.writes, sync, &stores);
        let written =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(write)).unwrap_or_else(|_| {
                Err(StateError::WriterStopped {
                    stores: stores.to_string(),
                })
            });
        // The database is let go of first: a task that closes its state on
        // the answer and opens it again finds it closed.
        drop(db);
        // A task gone meanwhile no longer asks.
        let _ = answer.send(written);
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
