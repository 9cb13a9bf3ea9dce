//! Per-partition append signals: how a fetch waiting for data learns that a
//! partition it reads got an append, without being woken by appends to
//! partitions it does not read.
//!
//! Each watched partition has a `watch` channel carrying its log end offset.
//! A fetch subscribes to every partition it reads *before* reading it, so an
//! append landing between its read and its wait still marks the
//! subscription changed (no lost wakeup); it then waits until any of its
//! subscriptions changes, its deadline passes, or the broker shuts down.
//! Produce calls [`AppendSignals::appended`] after each successful append.
//!
//! Channels exist only while watched: `appended` sends nothing for a
//! partition no fetch subscribed to and drops a channel whose subscribers
//! are all gone, and `subscribe` sweeps such channels whenever the map has
//! doubled since the last sweep, so the map stays proportional to the
//! partitions being waited on (deleted topics included).
//!
//! Thread-safety: one mutex around the map, held only to look up, insert or
//! send (a send wakes waiting tasks; it does not run them).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;

use tokio::sync::watch;
use uuid::Uuid;

/// A partition, by topic id (stable across renames, new for a recreated
/// topic) and index.
type PartitionKey = (Uuid, i32);

/// Map size below which `subscribe` never sweeps.
const SWEEP_FLOOR: usize = 64;

#[derive(Default)]
pub struct AppendSignals {
    inner: Mutex<Channels>,
}

#[derive(Default)]
struct Channels {
    by_partition: HashMap<PartitionKey, watch::Sender<i64>>,
    /// Sweep unwatched channels once the map reaches this size.
    sweep_at: usize,
}

impl AppendSignals {
    /// Wakes the fetches waiting on this partition; `log_end_offset` is the
    /// offset after the append.
    pub fn appended(&self, topic_id: Uuid, partition: i32, log_end_offset: i64) {
        let mut channels = self.lock();
        let key = (topic_id, partition);
        let Some(sender) = channels.by_partition.get(&key) else {
            return;
        };
        if sender.receiver_count() == 0 {
            channels.by_partition.remove(&key);
        } else {
            sender.send_replace(log_end_offset);
        }
    }

    /// A subscription that changes on the next append to the partition.
    /// Take it before reading the partition.
    pub fn subscribe(&self, topic_id: Uuid, partition: i32) -> watch::Receiver<i64> {
        let mut channels = self.lock();
        if channels.by_partition.len() >= channels.sweep_at {
            channels
                .by_partition
                .retain(|_, sender| sender.receiver_count() > 0);
            channels.sweep_at = (channels.by_partition.len() * 2).max(SWEEP_FLOOR);
        }
        channels
            .by_partition
            .entry((topic_id, partition))
            .or_insert_with(|| watch::channel(-1).0)
            .subscribe()
    }

    /// Partitions with a channel (watched, or not yet swept).
    pub fn channels(&self) -> usize {
        self.lock().by_partition.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channels> {
        // The map stays consistent whatever a panicking holder did: every
        // operation on it is a single insert, remove, retain or send.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The subscriptions of one waiting fetch: one per partition it reads.
#[derive(Default)]
pub struct AppendWatch {
    receivers: Vec<watch::Receiver<i64>>,
}

impl AppendWatch {
    pub fn push(&mut self, receiver: watch::Receiver<i64>) {
        self.receivers.push(receiver);
    }

    /// Completes once any watched partition got an append since its
    /// subscription was taken; never, if nothing is watched.
    pub async fn appended(&mut self) {
        type Changed<'a> =
            Pin<Box<dyn Future<Output = Result<(), watch::error::RecvError>> + Send + 'a>>;
        // A closed channel also completes: the fetch then looks again,
        // which is always safe.
        let mut changes: Vec<Changed<'_>> = self
            .receivers
            .iter_mut()
            .map(|receiver| Box::pin(receiver.changed()) as Changed<'_>)
            .collect();
        std::future::poll_fn(|cx| {
            for change in &mut changes {
                if change.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_append_before_the_wait_still_wakes_it() {
        let signals = AppendSignals::default();
        let topic = Uuid::new_v4();
        let mut watch = AppendWatch::default();
        watch.push(signals.subscribe(topic, 0));
        signals.appended(topic, 0, 1);
        // Completes at once: the append came after the subscription. The
        // limit turns a lost wake-up into a failure instead of a hang.
        tokio::time::timeout(std::time::Duration::from_secs(10), watch.appended())
            .await
            .expect("the append before the wait wakes it");
    }

    #[tokio::test]
    async fn a_wait_without_an_append_stays_pending() {
        let signals = AppendSignals::default();
        let topic = Uuid::new_v4();
        let mut watch = AppendWatch::default();
        watch.push(signals.subscribe(topic, 0));
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), watch.appended()).await;
        assert!(waited.is_err(), "woken without an append");
    }

    #[tokio::test]
    async fn an_append_to_another_partition_does_not_mark_the_watch() {
        let signals = AppendSignals::default();
        let topic = Uuid::new_v4();
        let subscription = signals.subscribe(topic, 0);
        signals.appended(topic, 1, 5);
        signals.appended(Uuid::new_v4(), 0, 5);
        assert!(!subscription.has_changed().unwrap());
        signals.appended(topic, 0, 5);
        assert!(subscription.has_changed().unwrap());
    }

    #[test]
    fn channels_without_subscribers_are_dropped() {
        let signals = AppendSignals::default();
        let topic = Uuid::new_v4();
        drop(signals.subscribe(topic, 0));
        assert_eq!(signals.channels(), 1);
        signals.appended(topic, 0, 1);
        assert_eq!(
            signals.channels(),
            0,
            "an append drops an unwatched channel"
        );

        for partition in 0..1000 {
            drop(signals.subscribe(topic, partition));
        }
        assert!(
            signals.channels() <= 2 * SWEEP_FLOOR,
            "subscribe sweeps unwatched channels: {}",
            signals.channels()
        );
    }
}
