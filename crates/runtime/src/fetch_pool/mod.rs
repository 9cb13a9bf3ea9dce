//! [`FetchPool`]: the remote fetches of every task on one task thread, on
//! one connection per broker, so an instance's connections do not grow
//! with its tasks (task threads × brokers, plus the shared cluster's).
//!
//! A broker answers a connection's requests one at a time, in order, and
//! holds an idle Fetch up to its max_wait: a task's fetch queued behind
//! another's idle one would wait with it. So tasks do not take turns on a
//! connection; the pool fetches for them the way Kafka's consumer does for
//! its partitions:
//!
//! - every partition a reader (one task's handle) asked for is *followed*:
//!   the pool fetches it ahead into a buffer of one answer, from where the
//!   last answer ended;
//! - per broker, one Fetch in flight, for every followed partition it
//!   leads with an empty buffer; the broker answers as soon as any of them
//!   has records;
//! - a reader's fetch takes its buffered answer when it starts at the
//!   asked offset (another offset drops it: the reader moved), or waits for
//!   the next answer of its partition;
//! - a Fetch that leaves out a partition whose answer is still to be taken
//!   (its task is busy with the one before) waits at most [`SHORT_WAIT`]
//!   on the broker: that partition must be fetched again soon after its
//!   answer is taken, not after an idle partner's long wait;
//! - retriable errors are retried with the client's backoff, up to its
//!   retries counted from when a reader waits, then given to the reader;
//! - an answer says when its Fetch was sent: one fetched ahead saw the
//!   partition's end then, not when it was taken (restore reasons about
//!   that time);
//! - a reader's handle dropped stops its partitions being followed, as
//!   does a reader not asking for [`FORGET_AFTER`]; buffered answers are
//!   copied out of their response, so a buffer holds only its records.
//!
//! Reads that must not wait (`max_wait` zero) do not come here: the log
//! access sends them on the shared cluster, answered at once.
//!
//! The pool lives on its thread (a local task): each thread's tasks find
//! it through [`FetchPool::of_this_thread`], and it ends when the last of
//! them lets its handle go.

mod driver;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use strata_client::{ClientError, Cluster, FetchOptions, Fetcher};

pub(crate) use driver::Answer;
use driver::{Ask, Driver};

/// A handle on a thread's pool: one per reader (a task's log access).
pub(crate) struct FetchPool {
    asks: mpsc::UnboundedSender<Ask>,
    reader: u64,
}

impl std::fmt::Debug for FetchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchPool")
            .field("reader", &self.reader)
            .finish()
    }
}

impl Drop for FetchPool {
    fn drop(&mut self) {
        let _ = self.asks.send(Ask::Forget(self.reader));
    }
}

thread_local! {
    /// The pools running on this thread, by the shared cluster they fetch
    /// for (its address): senders that do not keep them alive.
    static POOLS: RefCell<Vec<(usize, mpsc::WeakUnboundedSender<Ask>)>> =
        const { RefCell::new(Vec::new()) };
}

/// Readers' ids, unique in the process.
static READERS: AtomicU64 = AtomicU64::new(0);

impl FetchPool {
    /// A new reader's handle on this thread's pool for `shared`'s cluster,
    /// starting the pool (its own connections, `options` for every Fetch)
    /// if none runs. Must be called on a task thread (inside its
    /// `LocalSet`).
    pub async fn of_this_thread(
        shared: &Arc<Cluster>,
        options: FetchOptions,
    ) -> Result<Self, ClientError> {
        let id = Arc::as_ptr(shared) as usize;
        let reader = READERS.fetch_add(1, Ordering::Relaxed);
        if let Some(asks) = running(id) {
            return Ok(Self { asks, reader });
        }
        let cluster = Cluster::connect(shared.config().clone()).await?;
        // Another task of this thread may have started one meanwhile.
        if let Some(asks) = running(id) {
            return Ok(Self { asks, reader });
        }
        let (asks, incoming) = mpsc::unbounded_channel();
        POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            pools.retain(|(_, weak)| weak.strong_count() > 0);
            pools.push((id, asks.downgrade()));
        });
        let driver = Driver::new(Fetcher::new(cluster, options));
        tokio::task::spawn_local(driver.run(incoming));
        Ok(Self { asks, reader })
    }

    /// Records of `topic`/`partition` from `offset` (at most about
    /// `max_bytes`), as [`Fetcher::fetch_within`] gives them: waiting up
    /// to `max_wait` for some to arrive, retriable errors retried.
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> Answer {
        let answer = self.ask(topic, partition, offset, max_bytes, max_wait);
        answer.await.map_err(|_| ClientError::Closed)?
    }

    /// [`FetchPool::fetch`] for each of `wants` (topic, partition, offset),
    /// all asked at once, answered in their order.
    pub async fn fetch_many(
        &self,
        wants: &[(String, i32, i64)],
        max_bytes: i32,
        max_wait: Duration,
    ) -> Vec<Answer> {
        let asked: Vec<_> = (wants.iter())
            .map(|(topic, partition, offset)| {
                self.ask(topic, *partition, *offset, max_bytes, max_wait)
            })
            .collect();
        let mut answers = Vec::with_capacity(asked.len());
        for answer in asked {
            answers.push(
                answer
                    .await
                    .map_err(|_| ClientError::Closed)
                    .and_then(|a| a),
            );
        }
        answers
    }

    /// Hands a fetch to the pool; its answer comes through the receiver
    /// (dropped unanswered if the pool has ended).
    fn ask(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> oneshot::Receiver<Answer> {
        let (reply, answer) = oneshot::channel();
        let ask = Ask::Fetch {
            key: (self.reader, Arc::from(topic), partition),
            offset,
            max_bytes,
            max_wait,
            reply,
        };
        // A pool that ended drops the ask, and so its reply: Closed.
        let _ = self.asks.send(ask);
        answer
    }
}

/// This thread's pool for cluster `id`, if one runs.
fn running(id: usize) -> Option<mpsc::UnboundedSender<Ask>> {
    POOLS.with(|pools| {
        (pools.borrow().iter())
            .filter(|(at, _)| *at == id)
            .find_map(|(_, weak)| weak.upgrade())
    })
}
