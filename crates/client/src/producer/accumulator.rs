//! The accumulator: records gathered into one open batch per partition,
//! closed (its sequence numbers fixed) when full or lingered, and queued in
//! order for the sender. [`Inner`] is the state the producer's callers and
//! its sender share, behind one mutex.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{Notify, Semaphore};

use super::config::ProducerConfig;
use super::delivery::CompletionHandle;
use crate::Cluster;
use strata_record::BatchBuilder;

/// Bytes reserved up front for a partition's first batch, and the least
/// any later one reserves (a batch grows past its reserve by doubling, as
/// any Vec). A later batch reserves a quarter more than the partition's
/// last one held, up to `batch_bytes`: growing a 1 MiB batch of 100-byte
/// records by doubling copied nearly a megabyte into freshly faulted
/// pages, a tenth of a producing thread's samples. (Reserving just what
/// the last one held, a batch that lingered a little longer than the last
/// grew: 36 growths in 46 batches.)
pub(super) const FIRST_BATCH_RESERVE_BYTES: usize = 64 << 10;
/// Most bytes a record adds to a batch beyond its key, value and headers
/// (length, attributes, deltas and header count varints).
pub(super) const RECORD_OVERHEAD_BYTES: usize = 21;

/// Records gathered for one partition, not yet sent.
pub(super) struct OpenBatch {
    pub(super) builder: BatchBuilder,
    pub(super) completion: CompletionHandle,
    pub(super) records: usize,
    /// What its records count against `buffer_bytes`.
    pub(super) buffered: usize,
    pub(super) started: Instant,
}

/// A closed batch: its bytes are fixed (sequence numbers included).
pub(super) struct ClosedBatch {
    /// Order among the partition's batches.
    pub(super) id: u64,
    /// Records and header fields, until the sender builds `bytes`.
    pub(super) unbuilt: Option<BatchBuilder>,
    pub(super) bytes: Bytes,
    pub(super) completion: CompletionHandle,
    pub(super) records: usize,
    pub(super) buffered: usize,
    /// Failed attempts so far.
    pub(super) attempts: u32,
}

#[derive(Default)]
pub(super) struct PartitionQueue {
    pub(super) open: Option<OpenBatch>,
    /// Batches to send, in `id` order.
    pub(super) closed: VecDeque<ClosedBatch>,
    /// Ids of the batches in flight.
    pub(super) in_flight: std::collections::BTreeSet<u64>,
    pub(super) next_sequence: i32,
    pub(super) next_batch_id: u64,
    /// After a failed attempt: not before this instant.
    pub(super) retry_at: Option<Instant>,
    /// A retried batch is in flight: nothing else of the partition is sent
    /// until it is answered.
    pub(super) resending: bool,
    /// The broker the batches in flight went to.
    pub(super) leader_in_flight: Option<i32>,
    /// A batch was held back because the leader changed under batches in
    /// flight: nothing else of the partition is sent until they are
    /// answered.
    pub(super) held: bool,
    /// Bytes of records the last batch closed with: what the next one
    /// reserves (with a quarter more).
    pub(super) last_batch_bytes: usize,
}

/// Partition queues by topic, then partition, with each topic's sticky
/// partition beside its queues: a send finds both with one lookup of the
/// record's topic, without allocating.
///
/// Measured reason for the shape (`strata bench produce`, 100-byte keyless
/// records, one topic, `perf`): with a map per concern (queues, sticky
/// partitions) a record looked its topic up four times; those lookups,
/// their comparisons and the code around them were 22% of the producing
/// process's samples, 16% with this shape. The topic looked up last (by
/// a send, or by the sender) is checked first, by a comparison alone;
/// any other is found by its foldhash.
#[derive(Default)]
pub(super) struct Queues {
    topics: Vec<(String, TopicQueues)>,
    /// Each topic's place in `topics` (topics are never removed).
    places: foldhash::HashMap<String, usize>,
    /// The place of the topic looked up last.
    last: usize,
}

/// One topic's partition queues, and where its keyless records go.
#[derive(Default)]
pub(super) struct TopicQueues {
    pub(super) queues: PartitionQueues,
    /// The current partition for records without a key (None until the
    /// topic's first).
    sticky: Option<Sticky>,
    /// How many partitions the topic has, and the cluster's metadata
    /// version it was read at (see [`Queues::counted_topic`]).
    partition_count: Option<(u64, i32)>,
}

/// A topic's queues by partition number: partitions run from 0, so a
/// queue is found by indexing, not hashing. Measured reason (`strata bench
/// produce`, 100-byte keyless records, `callgrind` on the producing
/// thread): a keyless record looks its partition's queue up twice (the
/// sticky choice, then queueing); this and the quarter more a batch
/// reserves (which spared ~33 instructions of buffer growth) took the
/// thread from 1,133 to 1,050 instructions per record.
#[derive(Default)]
pub(super) struct PartitionQueues(Vec<Option<PartitionQueue>>);

impl PartitionQueues {
    /// `partition`'s queue, added if it has none. Panics on a negative
    /// partition: callers check the partition is one the topic has.
    pub(super) fn get_or_insert(&mut self, partition: i32) -> &mut PartitionQueue {
        let at = usize::try_from(partition).expect("a partition is not negative");
        if at >= self.0.len() {
            self.0.resize_with(at + 1, || None);
        }
        self.0[at].get_or_insert_with(PartitionQueue::default)
    }

    pub(super) fn get_mut(&mut self, partition: i32) -> Option<&mut PartitionQueue> {
        let at = usize::try_from(partition).ok()?;
        self.0.get_mut(at)?.as_mut()
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (i32, &mut PartitionQueue)> {
        (self.0.iter_mut().enumerate()).filter_map(|(at, queue)| Some((at as i32, queue.as_mut()?)))
    }
}

impl Queues {
    /// `topic`'s queues, added if it has none.
    pub(super) fn topic(&mut self, topic: &str) -> &mut TopicQueues {
        let at = match self.place(topic) {
            Some(at) => at,
            None => self.add(topic),
        };
        &mut self.topics[at].1
    }

    /// Adds queues for `topic` (which has none), returning their place.
    fn add(&mut self, topic: &str) -> usize {
        self.topics
            .push((topic.to_string(), TopicQueues::default()));
        let at = self.topics.len() - 1;
        self.places.insert(topic.to_string(), at);
        self.last = at;
        at
    }

    /// Where `topic` is in `topics`, if it is: the last one looked up is
    /// checked before the map.
    fn place(&mut self, topic: &str) -> Option<usize> {
        if self
            .topics
            .get(self.last)
            .is_some_and(|(name, _)| name == topic)
        {
            return Some(self.last);
        }
        let at = *self.places.get(topic)?;
        self.last = at;
        Some(at)
    }

    /// `topic`'s queues, with how many partitions it has as far as
    /// `cluster` knows now; None when it knows nothing of the topic (and
    /// then no queues are added).
    ///
    /// The count is kept beside the topic's queues until the cluster's
    /// metadata changes. Measured reason (`strata bench produce`, 100-byte
    /// keyless records, `callgrind` on the producing thread): reading it
    /// from the cluster's metadata per record, under its read lock, took
    /// 175 of 1,455 instructions per record.
    pub(super) fn counted_topic(
        &mut self,
        topic: &str,
        cluster: &Cluster,
    ) -> Option<(&mut TopicQueues, i32)> {
        let version = cluster.metadata_version();
        let at = self.place(topic);
        if let Some(at) = at
            && let Some((read_at, count)) = self.topics[at].1.partition_count
            && read_at == version
        {
            return Some((&mut self.topics[at].1, count));
        }
        let count = cluster.known_partition_count(topic)?;
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        let at = at.unwrap_or_else(|| self.add(topic));
        let queues = &mut self.topics[at].1;
        queues.partition_count = Some((version, count));
        Some((queues, count))
    }

    pub(super) fn get_or_insert(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        self.topic(topic).queues.get_or_insert(partition)
    }

    pub(super) fn get_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        let at = self.place(topic)?;
        self.topics[at].1.queues.get_mut(partition)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&String, i32, &mut PartitionQueue)> {
        self.topics.iter_mut().flat_map(|(topic, queues)| {
            let topic: &String = topic;
            (queues.queues.iter_mut()).map(move |(partition, queue)| (topic, partition, queue))
        })
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut PartitionQueue> {
        (self.topics.iter_mut())
            .flat_map(|(_, queues)| queues.queues.iter_mut().map(|(_, queue)| queue))
    }
}

/// Where a topic's keyless records go now, and how many bytes of them
/// went there.
pub(super) struct Sticky {
    partition: i32,
    bytes: usize,
}

pub(super) struct State {
    pub(super) partitions: Queues,
    /// Picks the partitions keyless records move on to.
    pub(super) random: Random,
    pub(super) closing: bool,
    /// Sends not yet answered (records queued or in flight).
    pub(super) outstanding: usize,
    /// Bytes of the records not yet answered (see `buffer_bytes`).
    pub(super) buffered: usize,
}

pub(super) struct Inner {
    pub(super) cluster: Arc<Cluster>,
    pub(super) config: ProducerConfig,
    /// Producer id and epoch; a transactional producer's epoch moves on
    /// after an abort that followed a failed batch (KIP-360).
    pub(super) identity: std::sync::Mutex<(i64, i16)>,
    pub(super) state: std::sync::Mutex<State>,
    /// Wakes the sender: a batch filled, a send finished, a flush began.
    pub(super) wake: Notify,
    /// Wakes flushers when outstanding reaches zero.
    pub(super) drained: Notify,
    /// Wakes senders waiting for buffer space.
    pub(super) space: Notify,
    pub(super) per_broker: std::sync::Mutex<HashMap<i32, Arc<Semaphore>>>,
    /// The first batch that failed for good since the last time the
    /// transaction ended (transactional producers must then abort).
    pub(super) failure: std::sync::Mutex<Option<String>>,
}

impl Inner {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn fits(&self, state: &State, record_bytes: usize) -> bool {
        state.buffered == 0 || state.buffered + record_bytes <= self.config.buffer_bytes
    }

    /// Makes every open batch due now (their linger is cut short).
    pub(super) fn make_due(&self, state: &mut State) {
        for queue in state.partitions.values_mut() {
            if let Some(open) = &mut queue.open {
                open.started = Instant::now() - self.config.linger;
            }
        }
    }

    pub(super) fn broker_slots(&self, node: i32) -> Arc<Semaphore> {
        let mut slots = self.per_broker.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            slots
                .entry(node)
                .or_insert_with(|| Arc::new(Semaphore::new(self.config.max_in_flight))),
        )
    }

    pub(super) fn identity(&self) -> (i64, i16) {
        *self.identity.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn note_failure(&self, what: String) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(what);
    }

    pub(super) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn take_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The partition of a record with neither key nor partition: the
    /// topic's sticky one until a batch's worth of records went to it,
    /// then another (KIP-794), so keyless records spread over every
    /// partition a batch at a time. The move comes when the partition's
    /// open batch has no room for the record (that batch is closed: true
    /// in second place, the sender must be woken), or, when linger sent
    /// its batches before they filled, once `batch_bytes` went there.
    pub(super) fn sticky_partition(
        &self,
        topic: &mut TopicQueues,
        random: &mut Random,
        count: i32,
        record_bytes: usize,
    ) -> (i32, bool) {
        let TopicQueues { queues, sticky, .. } = topic;
        let sticky = sticky.get_or_insert_with(|| Sticky {
            partition: random.below(count),
            bytes: 0,
        });
        let batch_bytes = self.config.batch_bytes;
        let open = (queues.get_mut(sticky.partition))
            .filter(|queue| queue.open.as_ref().is_some_and(|open| open.records > 0));
        let (full, closed) = match open {
            Some(queue) => {
                let open = queue.open.as_ref().expect("filtered above");
                if open.builder.uncompressed_size_bytes() + record_bytes > batch_bytes {
                    close_open_batch(self, queue);
                    (true, true)
                } else {
                    (false, false)
                }
            }
            None => (sticky.bytes >= batch_bytes, false),
        };
        if full || sticky.partition >= count {
            sticky.partition = another_partition(sticky.partition, count, random);
            sticky.bytes = 0;
        }
        sticky.bytes += record_bytes;
        (sticky.partition, closed)
    }

    /// `count` records holding `buffered` bytes were answered.
    pub(super) fn finish(&self, count: usize, buffered: usize) {
        let mut state = self.lock();
        state.outstanding -= count;
        state.buffered -= buffered;
        if state.outstanding == 0 {
            self.drained.notify_waiters();
        }
        drop(state);
        self.space.notify_waiters();
    }
}

/// A partition other than `current` when there is one, picked at random.
fn another_partition(current: i32, count: i32, random: &mut Random) -> i32 {
    match count {
        ..=1 => 0,
        _ => {
            let step = 1 + i64::from(random.below(count - 1));
            ((i64::from(current.rem_euclid(count)) + step) % i64::from(count)) as i32
        }
    }
}

/// A xorshift generator: only the spread of keyless records over
/// partitions rests on it.
pub(super) struct Random(u64);

impl Random {
    pub(super) fn seeded() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // Never zero, or xorshift stays at zero.
        Self((nanos ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    /// A number in `0..n` (0 when `n` is not positive).
    fn below(&mut self, n: i32) -> i32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        match u64::try_from(n) {
            Ok(n) if n > 0 => (x % n) as i32,
            _ => 0,
        }
    }
}

/// Closes the partition's open batch: fixes its place (sequence numbers
/// included) and queues it to be built and sent.
pub(super) fn close_open_batch(inner: &Inner, queue: &mut PartitionQueue) {
    let Some(open) = queue.open.take() else {
        return;
    };
    queue.last_batch_bytes = open.builder.uncompressed_size_bytes();
    let (pid, epoch) = inner.identity();
    let count = i32::try_from(open.records).unwrap_or(i32::MAX);
    let builder = if pid >= 0 {
        let sequence = queue.next_sequence;
        queue.next_sequence = strata_record::add_sequence(sequence, count);
        open.builder
            .producer(pid, epoch, sequence)
            .transactional(inner.config.transactional_id.is_some())
    } else {
        open.builder
    };
    let id = queue.next_batch_id;
    queue.next_batch_id += 1;
    queue.closed.push_back(ClosedBatch {
        id,
        // Built (compressed, checksummed) by the sender, off the lock and
        // off the sending caller's thread.
        unbuilt: Some(builder),
        bytes: Bytes::new(),
        completion: open.completion,
        records: open.records,
        buffered: open.buffered,
        attempts: 0,
    });
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{PartitionQueues, Queues, Random, another_partition};

    #[test]
    fn each_topic_keeps_its_own_queues_whichever_was_looked_up_last() {
        let mut queues = Queues::default();
        for (topic, sequence) in [("a", 1), ("b", 2), ("a", 1), ("c", 3), ("b", 2)] {
            let queue = queues.get_or_insert(topic, 0);
            if queue.next_sequence == 0 {
                queue.next_sequence = sequence;
            }
            assert_eq!(queue.next_sequence, sequence, "topic {topic}");
        }
        for (topic, sequence) in [("c", 3), ("a", 1), ("b", 2)] {
            let queue = queues.get_mut(topic, 0).expect("queued before");
            assert_eq!(queue.next_sequence, sequence, "topic {topic}");
        }
        assert_eq!(queues.iter_mut().count(), 3);
    }

    #[test]
    fn partition_queues_are_found_by_number_and_only_those_added_are_listed() {
        let mut queues = PartitionQueues::default();
        queues.get_or_insert(3).next_sequence = 3;
        queues.get_or_insert(1).next_sequence = 1;
        for absent in [-1, 0, 2, 4] {
            assert!(queues.get_mut(absent).is_none(), "partition {absent}");
        }
        assert_eq!(queues.get_or_insert(3).next_sequence, 3);
        let listed: Vec<_> = (queues.iter_mut())
            .map(|(partition, queue)| (partition, queue.next_sequence))
            .collect();
        assert_eq!(listed, [(1, 1), (3, 3)]);
    }

    #[test]
    fn an_unknown_topic_or_partition_has_no_queue_and_adds_none() {
        let mut queues = Queues::default();
        queues.get_or_insert("a", 0);
        assert!(queues.get_mut("b", 0).is_none());
        assert!(queues.get_mut("a", 1).is_none());
        assert_eq!(queues.values_mut().count(), 1);
    }

    proptest! {
        #[test]
        fn keyless_records_move_to_another_partition_in_range(
            current in 0i32..1_000,
            count in 2i32..1_000,
            seed in any::<u64>(),
        ) {
            let mut random = Random(seed | 1);
            let current = current % count;
            let next = another_partition(current, count, &mut random);
            prop_assert!((0..count).contains(&next));
            prop_assert_ne!(next, current);
        }

        #[test]
        fn a_topic_of_one_partition_keeps_its_keyless_records_on_it(
            current in -5i32..5,
            seed in any::<u64>(),
        ) {
            prop_assert_eq!(another_partition(current, 1, &mut Random(seed | 1)), 0);
        }
    }

    #[test]
    fn the_moves_reach_every_partition() {
        let mut random = Random::seeded();
        let mut seen = [false; 4];
        let mut at = 0;
        for _ in 0..64 {
            at = another_partition(at, 4, &mut random);
            seen[at as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
    }
}
