//! The producer: records are gathered into one open batch per partition,
//! closed when it reaches `batch_bytes` or has waited `linger` (whichever
//! comes first, so low traffic never waits indefinitely), and sent to each
//! partition's leader, several partitions per request.
//!
//! Ordering and idempotence: a partition has up to `max_in_flight` batches
//! in flight, written to its leader's connection in order (the broker
//! answers a connection's requests in order). A batch keeps its bytes, and
//! so its sequence numbers, across retries, and a retried batch goes back
//! ahead of every later batch of its partition. With idempotence (the
//! default) the producer takes a producer id from the cluster and numbers
//! each partition's records from 0; the broker drops a re-sent batch it
//! already holds and answers with its offset, and refuses a batch that
//! arrives ahead of a missing earlier one (OUT_OF_ORDER_SEQUENCE_NUMBER,
//! retried here while the earlier batch is still being retried), so
//! retries neither reorder nor duplicate. Without idempotence, as in
//! Kafka, a retry may land behind a later batch that succeeded: set
//! `max_in_flight` to 1 to rule that out. `max_in_flight` also bounds the
//! requests outstanding per broker.
//!
//! Memory: records queued or in flight may hold up to `buffer_bytes`
//! (32 MiB); past that `send` waits, sending lingering batches at once,
//! until answers free room. Batches are built in place and written to the
//! socket as they are (see `produce_frame`), and a batch's records share
//! one completion rather than a channel each.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest};
use tokio::sync::{Notify, Semaphore};

use super::error::codes;
use super::partitioner::partition_for_key;
use super::produce_frame::{self, PartitionRecords};
use super::{ClientError, Cluster};
use crate::time::now_ms;
use crate::record::{BatchBuilder, Compression, Header, NewRecord};

/// Newest Produce version this client sends (topics by name).
pub(crate) const PRODUCE_VERSION_MAX: i16 = 9;
/// Most bytes reserved up front for a new batch's records (a batch grows
/// past this by doubling, as any Vec).
const BUILDER_RESERVE_BYTES_MAX: usize = 64 << 10;
/// Most bytes a record adds to a batch beyond its key, value and headers
/// (length, attributes, deltas and header count varints).
const RECORD_OVERHEAD_BYTES: usize = 21;
const INIT_PRODUCER_ID_VERSION_MAX: i16 = 4;

/// What the producer waits for before a send counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Nothing: no response is asked for (offsets are unknown).
    None,
    /// The leader appended the records.
    Leader,
    /// The records are durable (on strata: fsynced).
    All,
}

impl Acks {
    fn wire(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Leader => 1,
            Self::All => -1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub acks: Acks,
    pub compression: Compression,
    /// A batch is sent once it holds this many bytes of records…
    pub batch_bytes: usize,
    /// …or once its first record has waited this long.
    pub linger: Duration,
    /// Bytes of records the producer holds (queued or in flight) before
    /// `send` waits for some to be answered: a producer faster than its
    /// brokers slows down instead of growing without bound.
    pub buffer_bytes: usize,
    /// Produce requests outstanding per broker.
    pub max_in_flight: usize,
    /// Take a producer id and number records, so retries never duplicate.
    pub idempotent: bool,
    /// How long a broker may take to replicate/sync before answering.
    pub request_timeout: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            acks: Acks::All,
            compression: Compression::None,
            batch_bytes: 1 << 20,
            linger: Duration::from_millis(5),
            buffer_bytes: 32 << 20,
            max_in_flight: 5,
            idempotent: true,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A record to send.
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// Shared, so a caller sending many records to one topic clones a
    /// pointer per record rather than the name.
    pub topic: Arc<str>,
    /// `None`: chosen by key (murmur2), or sticky for records without one.
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the epoch; `None` for now.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    pub fn new(topic: &str, key: Option<&[u8]>, value: &[u8]) -> Self {
        Self {
            topic: topic.into(),
            key: key.map(Bytes::copy_from_slice),
            value: Some(Bytes::copy_from_slice(value)),
            ..Self::default()
        }
    }
}

/// Where a record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: i32,
    /// -1 with acks=0 (the broker does not say).
    pub offset: i64,
}

/// How a batch ended, shared by the futures of its records (one per
/// batch rather than a channel per record).
#[derive(Default)]
struct Completion {
    state: std::sync::Mutex<CompletionState>,
}

#[derive(Default)]
struct CompletionState {
    /// The batch's base offset (-1 when unknown), or why it failed.
    outcome: Option<Result<i64, ClientError>>,
    wakers: Vec<std::task::Waker>,
}

impl Completion {
    fn finish(&self, outcome: Result<i64, ClientError>) {
        let wakers = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.outcome = Some(outcome);
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Resolves when the record is written (or failed).
pub struct DeliveryFuture {
    completion: Arc<Completion>,
    partition: i32,
    /// The record's place in its batch.
    index: i64,
}

impl std::future::Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ClientError>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let mut state = self
            .completion
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match &state.outcome {
            Some(Ok(base_offset)) => std::task::Poll::Ready(Ok(RecordMetadata {
                partition: self.partition,
                offset: if *base_offset < 0 {
                    -1
                } else {
                    base_offset + self.index
                },
            })),
            Some(Err(error)) => std::task::Poll::Ready(Err(error.duplicate())),
            None => {
                if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.wakers.push(cx.waker().clone());
                }
                std::task::Poll::Pending
            }
        }
    }
}

/// A batch's hold on its completion: a batch dropped unanswered (the
/// producer went away) fails its records rather than leave them waiting.
struct CompletionHandle(Arc<Completion>);

impl CompletionHandle {
    fn new() -> Self {
        Self(Arc::default())
    }

    fn finish(&self, outcome: Result<i64, ClientError>) {
        self.0.finish(outcome);
    }
}

impl Drop for CompletionHandle {
    fn drop(&mut self) {
        let unanswered = self
            .0
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outcome
            .is_none();
        if unanswered {
            self.0.finish(Err(ClientError::Closed));
        }
    }
}

/// Records gathered for one partition, not yet sent.
struct OpenBatch {
    builder: BatchBuilder,
    completion: CompletionHandle,
    records: usize,
    /// What its records count against `buffer_bytes`.
    buffered: usize,
    started: Instant,
}

/// A closed batch: its bytes are fixed (sequence numbers included).
struct ClosedBatch {
    /// Order among the partition's batches.
    id: u64,
    /// Records and header fields, until the sender builds `bytes`.
    unbuilt: Option<BatchBuilder>,
    bytes: Bytes,
    completion: CompletionHandle,
    records: usize,
    buffered: usize,
    /// Failed attempts so far.
    attempts: u32,
}

#[derive(Default)]
struct PartitionQueue {
    open: Option<OpenBatch>,
    /// Batches to send, in `id` order.
    closed: VecDeque<ClosedBatch>,
    /// Ids of the batches in flight.
    in_flight: std::collections::BTreeSet<u64>,
    next_sequence: i32,
    next_batch_id: u64,
    /// After a failed attempt: not before this instant.
    retry_at: Option<Instant>,
}

/// Partition queues by topic, then partition: a send looks its queue up by
/// the record's topic without allocating.
#[derive(Default)]
struct Queues(HashMap<String, HashMap<i32, PartitionQueue>>);

impl Queues {
    fn get_or_insert(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        if !self.0.contains_key(topic) {
            self.0.insert(topic.to_string(), HashMap::new());
        }
        self.0
            .get_mut(topic)
            .expect("inserted above")
            .entry(partition)
            .or_default()
    }

    fn get_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        self.0.get_mut(topic)?.get_mut(&partition)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (&String, i32, &mut PartitionQueue)> {
        self.0.iter_mut().flat_map(|(topic, queues)| {
            queues
                .iter_mut()
                .map(move |(partition, queue)| (topic, *partition, queue))
        })
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut PartitionQueue> {
        self.0.values_mut().flat_map(HashMap::values_mut)
    }
}

struct State {
    partitions: Queues,
    /// The current partition of each topic for records without a key.
    sticky: HashMap<String, i32>,
    closing: bool,
    /// Sends not yet answered (records queued or in flight).
    outstanding: usize,
    /// Bytes of the records not yet answered (see `buffer_bytes`).
    buffered: usize,
}

struct Inner {
    cluster: Arc<Cluster>,
    config: ProducerConfig,
    identity: (i64, i16),
    state: std::sync::Mutex<State>,
    /// Wakes the sender: a batch filled, a send finished, a flush began.
    wake: Notify,
    /// Wakes flushers when outstanding reaches zero.
    drained: Notify,
    /// Wakes senders waiting for buffer space.
    space: Notify,
    per_broker: std::sync::Mutex<HashMap<i32, Arc<Semaphore>>>,
}

pub struct Producer {
    inner: Arc<Inner>,
    sender: tokio::task::JoinHandle<()>,
}

impl Producer {
    /// Starts a producer (taking a producer id first when idempotent).
    pub async fn new(cluster: Arc<Cluster>, config: ProducerConfig) -> Result<Self, ClientError> {
        if config.max_in_flight == 0 || config.batch_bytes == 0 {
            return Err(ClientError::Invalid(
                "max_in_flight and batch_bytes must be at least 1".into(),
            ));
        }
        if config.idempotent && config.acks != Acks::All {
            return Err(ClientError::Invalid(
                "an idempotent producer needs acks=all (as in Kafka)".into(),
            ));
        }
        let identity = if config.idempotent {
            init_producer_id(&cluster).await?
        } else {
            (-1, -1)
        };
        let inner = Arc::new(Inner {
            cluster,
            config,
            identity,
            state: std::sync::Mutex::new(State {
                partitions: Queues::default(),
                sticky: HashMap::new(),
                closing: false,
                outstanding: 0,
                buffered: 0,
            }),
            wake: Notify::new(),
            drained: Notify::new(),
            space: Notify::new(),
            per_broker: std::sync::Mutex::default(),
        });
        let sender = tokio::spawn(run_sender(Arc::clone(&inner)));
        Ok(Self { inner, sender })
    }

    /// The producer id and epoch (-1, -1 without idempotence).
    pub fn identity(&self) -> (i64, i16) {
        self.inner.identity
    }

    /// Queues a record; the returned future resolves once it is written.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, ClientError> {
        let cluster = &self.inner.cluster;
        let mut partitions = cluster.partition_count(&record.topic).await?;
        if record
            .partition
            .is_some_and(|p| p >= 0 && p as usize >= partitions)
        {
            // Partitions may have been added (or the topic re-created)
            // since the metadata was read: ask again before refusing.
            cluster.invalidate(&record.topic).await;
            partitions = cluster.partition_count(&record.topic).await?;
        }
        let count = i32::try_from(partitions).unwrap_or(i32::MAX);
        if count == 0 {
            return Err(ClientError::UnknownTopic(record.topic.to_string()));
        }
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let headers: Vec<Header<'_>> = record
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k.as_bytes(),
                value: v.as_deref(),
            })
            .collect();
        let new = NewRecord {
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            timestamp,
            headers: &headers,
        };
        let record_bytes = RECORD_OVERHEAD_BYTES
            + record.key.as_ref().map_or(0, Bytes::len)
            + record.value.as_ref().map_or(0, Bytes::len)
            + record
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
                .sum::<usize>();
        if !self.has_room(record_bytes) {
            self.wait_for_buffer_space(record_bytes).await;
        }
        let mut wake = false;
        let delivery;
        {
            let mut state = self.inner.lock();
            if state.closing {
                return Err(ClientError::Closed);
            }
            let partition = match (record.partition, &record.key) {
                (Some(p), _) if (0..count).contains(&p) => p,
                (Some(p), _) => {
                    return Err(ClientError::kafka(
                        codes::UNKNOWN_TOPIC_OR_PARTITION,
                        Some(&record.topic),
                        Some(p),
                    ));
                }
                (None, Some(key)) => partition_for_key(key, count),
                (None, None) => match state.sticky.get(&*record.topic) {
                    Some(p) => *p,
                    None => {
                        let p = random_partition(count);
                        state.sticky.insert(record.topic.to_string(), p);
                        p
                    }
                },
            };
            let queue = state.partitions.get_or_insert(&record.topic, partition);
            // A batch closes before this record would take it past
            // batch_bytes, so batches stay under the broker's limit.
            if let Some(open) = &queue.open
                && open.records > 0
                && open.builder.uncompressed_size_bytes() + record_bytes
                    > self.inner.config.batch_bytes
            {
                close_open_batch(&self.inner, queue);
                wake = true;
            }
            // A new batch has a new due time the sender must learn of.
            wake |= queue.open.is_none();
            let open = queue.open.get_or_insert_with(|| OpenBatch {
                builder: BatchBuilder::with_capacity(
                    self.inner.config.compression,
                    self.inner.config.batch_bytes.min(BUILDER_RESERVE_BYTES_MAX),
                ),
                completion: CompletionHandle::new(),
                records: 0,
                buffered: 0,
                started: Instant::now(),
            });
            open.builder
                .push(new)
                .map_err(|e| ClientError::Invalid(format!("record: {e}")))?;
            delivery = DeliveryFuture {
                completion: Arc::clone(&open.completion.0),
                partition,
                index: open.records as i64,
            };
            open.records += 1;
            open.buffered += record_bytes;
            if open.builder.uncompressed_size_bytes() >= self.inner.config.batch_bytes {
                wake = true;
                // The next keyless record goes elsewhere (sticky partitioning).
                if record.key.is_none() && record.partition.is_none() {
                    state
                        .sticky
                        .insert(record.topic.to_string(), random_partition(count));
                }
            }
            state.outstanding += 1;
            state.buffered += record_bytes;
        }
        if wake {
            self.inner.wake.notify_one();
        }
        Ok(delivery)
    }

    /// Whether `record_bytes` more fit in `buffer_bytes` now.
    fn has_room(&self, record_bytes: usize) -> bool {
        self.inner.fits(&self.inner.lock(), record_bytes)
    }

    /// Waits until `record_bytes` more fit in `buffer_bytes` (a record
    /// larger than the whole buffer waits until the producer holds none).
    async fn wait_for_buffer_space(&self, record_bytes: usize) {
        loop {
            let space = self.inner.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            {
                let mut state = self.inner.lock();
                if self.inner.fits(&state, record_bytes) {
                    return;
                }
                // Records waiting for linger hold the buffer: send them now.
                self.inner.make_due(&mut state);
            }
            self.inner.wake.notify_one();
            space.await;
        }
    }

    /// Sends everything queued now (without waiting for linger) and waits
    /// until every record sent so far is answered.
    pub async fn flush(&self) {
        loop {
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let mut state = self.inner.lock();
                if state.outstanding == 0 {
                    return;
                }
                self.inner.make_due(&mut state);
            }
            self.inner.wake.notify_one();
            drained.await;
        }
    }

    /// Flushes, then stops the sender.
    pub async fn close(self) {
        self.flush().await;
        self.inner.lock().closing = true;
        self.inner.wake.notify_one();
        let _ = self.sender.await;
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fits(&self, state: &State, record_bytes: usize) -> bool {
        state.buffered == 0 || state.buffered + record_bytes <= self.config.buffer_bytes
    }

    /// Makes every open batch due now (their linger is cut short).
    fn make_due(&self, state: &mut State) {
        for queue in state.partitions.values_mut() {
            if let Some(open) = &mut queue.open {
                open.started = Instant::now() - self.config.linger;
            }
        }
    }

    fn broker_slots(&self, node: i32) -> Arc<Semaphore> {
        let mut slots = self.per_broker.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            slots
                .entry(node)
                .or_insert_with(|| Arc::new(Semaphore::new(self.config.max_in_flight))),
        )
    }

    /// `count` records holding `buffered` bytes were answered.
    fn finish(&self, count: usize, buffered: usize) {
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

fn random_partition(count: i32) -> i32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // A cheap spread is enough: only balance matters for keyless records.
    i32::try_from(nanos.wrapping_mul(2_654_435_761) % count.unsigned_abs()).unwrap_or(0)
}

/// A fresh idempotent producer id and epoch from the cluster.
pub async fn init_producer_id(cluster: &Cluster) -> Result<(i64, i16), ClientError> {
    cluster
        .retry(&[], || async {
            let connection = cluster.any_connection().await?;
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1);
            let response = connection
                .send(&request, INIT_PRODUCER_ID_VERSION_MAX)
                .await?;
            if response.error_code != codes::NONE {
                return Err(ClientError::kafka(response.error_code, None, None));
            }
            Ok((response.producer_id.0, response.producer_epoch))
        })
        .await
}

/// One partition's batch in a request.
struct Sending {
    topic: String,
    partition: i32,
    batch: ClosedBatch,
}

/// The sender loop: closes due batches and sends them, grouped by leader.
async fn run_sender(inner: Arc<Inner>) {
    loop {
        let woken = inner.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let (ready, next_due, closing) = take_ready(&inner);
        if closing && ready.is_empty() {
            return;
        }
        let mut by_leader: HashMap<i32, Vec<Sending>> = HashMap::new();
        for mut sending in ready {
            if let Some(builder) = sending.batch.unbuilt.take() {
                match builder.into_batch() {
                    Ok(bytes) => sending.batch.bytes = Bytes::from(bytes),
                    Err(error) => {
                        let error = ClientError::Invalid(format!("batch: {error}"));
                        requeue_or_fail(&inner, sending, error);
                        continue;
                    }
                }
            }
            match inner
                .cluster
                .leader_node(&sending.topic, sending.partition)
                .await
            {
                Ok(node) => by_leader.entry(node).or_default().push(sending),
                Err(error) => requeue_or_fail(&inner, sending, error),
            }
        }
        for (node, batches) in by_leader {
            // A request holds at most one batch per partition: a
            // partition's second batch goes in the next request, written
            // after the first on the same connection.
            for round in rounds(batches) {
                let slots = inner.broker_slots(node);
                let permit = slots.acquire_owned().await.expect("never closed");
                submit_request(&inner, node, round, permit).await;
            }
        }
        match next_due {
            Some(due) => {
                tokio::select! {
                    () = &mut woken => {}
                    () = tokio::time::sleep_until(due.into()) => {}
                }
            }
            None => woken.await,
        }
    }
}

/// Closes batches that are full or have lingered long enough and takes the
/// first closed batch of every partition with nothing in flight. Returns
/// them, when the next open batch falls due, and whether the producer is
/// closing.
fn take_ready(inner: &Inner) -> (Vec<Sending>, Option<Instant>, bool) {
    let mut state = inner.lock();
    let now = Instant::now();
    let mut next_due: Option<Instant> = None;
    let mut ready = Vec::new();
    let closing = state.closing;
    for (topic, partition, queue) in state.partitions.iter_mut() {
        if let Some(open) = &queue.open {
            let due = open.started + inner.config.linger;
            let full = open.builder.uncompressed_size_bytes() >= inner.config.batch_bytes;
            if full || due <= now || closing {
                close_open_batch(inner, queue);
            } else {
                next_due = Some(next_due.map_or(due, |d| d.min(due)));
            }
        }
        if queue.closed.is_empty() {
            continue;
        }
        if let Some(at) = queue.retry_at
            && at > now
        {
            next_due = Some(next_due.map_or(at, |d| d.min(at)));
            continue;
        }
        queue.retry_at = None;
        while queue.in_flight.len() < inner.config.max_in_flight.max(1)
            && let Some(batch) = queue.closed.pop_front()
        {
            queue.in_flight.insert(batch.id);
            ready.push(Sending {
                topic: topic.clone(),
                partition,
                batch,
            });
        }
    }
    (ready, next_due, closing)
}

/// Closes the partition's open batch: fixes its place (sequence numbers
/// included) and queues it to be built and sent.
fn close_open_batch(inner: &Inner, queue: &mut PartitionQueue) {
    let Some(open) = queue.open.take() else {
        return;
    };
    let (pid, epoch) = inner.identity;
    let count = i32::try_from(open.records).unwrap_or(i32::MAX);
    let builder = if pid >= 0 {
        let sequence = queue.next_sequence;
        queue.next_sequence = sequence.wrapping_add(count) & i32::MAX;
        open.builder.producer(pid, epoch, sequence)
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

/// Puts a batch back at the front of its partition (same bytes, same
/// sequence) for a retry, or fails it for good.
fn requeue_or_fail(inner: &Inner, sending: Sending, error: ClientError) {
    let retriable = error.is_retriable();
    requeue_or_fail_as(inner, sending, error, retriable);
}

/// [`requeue_or_fail`] with the decision whether `error` may be retried
/// made by the caller.
fn requeue_or_fail_as(inner: &Inner, mut sending: Sending, error: ClientError, retriable: bool) {
    let retries = inner.cluster.config().retries;
    if retriable && sending.batch.attempts < retries {
        tracing::debug!(topic = %sending.topic, partition = sending.partition, "will retry: {error}");
        sending.batch.attempts += 1;
        let backoff =
            inner.cluster.config().retry_backoff * 2u32.pow(sending.batch.attempts.min(4));
        let mut state = inner.lock();
        let queue = state
            .partitions
            .get_or_insert(&sending.topic, sending.partition);
        queue.in_flight.remove(&sending.batch.id);
        let retry_at = Instant::now() + backoff.min(Duration::from_secs(1));
        queue.retry_at = Some(queue.retry_at.map_or(retry_at, |at| at.max(retry_at)));
        // Back ahead of every later batch of the partition.
        let at = queue
            .closed
            .iter()
            .position(|b| b.id > sending.batch.id)
            .unwrap_or(queue.closed.len());
        queue.closed.insert(at, sending.batch);
        return;
    }
    settle(inner, sending, Err(error));
}

/// Whether an earlier batch of the partition than `sending` is still
/// unanswered (in flight or waiting for a retry).
fn earlier_outstanding(inner: &Inner, sending: &Sending) -> bool {
    let mut state = inner.lock();
    let Some(queue) = state.partitions.get_mut(&sending.topic, sending.partition) else {
        return false;
    };
    let id = sending.batch.id;
    queue.in_flight.first().is_some_and(|first| *first < id)
        || queue.closed.front().is_some_and(|b| b.id < id)
}

fn complete(inner: &Inner, sending: Sending, base_offset: i64) {
    settle(inner, sending, Ok(base_offset));
}

/// Ends a batch for good: its records learn the outcome and free their
/// place in flight and in the buffer.
fn settle(inner: &Inner, sending: Sending, outcome: Result<i64, ClientError>) {
    let (count, buffered) = (sending.batch.records, sending.batch.buffered);
    sending.batch.completion.finish(outcome);
    {
        let mut state = inner.lock();
        if let Some(queue) = state.partitions.get_mut(&sending.topic, sending.partition) {
            queue.in_flight.remove(&sending.batch.id);
        }
    }
    inner.finish(count, buffered);
}

/// Splits a leader's batches into requests with at most one batch per
/// partition, keeping each partition's batches in order.
fn rounds(batches: Vec<Sending>) -> Vec<Vec<Sending>> {
    let mut rounds: Vec<Vec<Sending>> = Vec::new();
    let mut taken: HashMap<(String, i32), usize> = HashMap::new();
    for sending in batches {
        let round = taken
            .entry((sending.topic.clone(), sending.partition))
            .or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(sending);
        *round += 1;
    }
    rounds
}

/// Writes one Produce request to the leader now (so requests leave in the
/// order they are submitted) and handles its response in a task of its own.
async fn submit_request(
    inner: &Arc<Inner>,
    node: i32,
    batches: Vec<Sending>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut topics: Vec<(String, Vec<PartitionRecords>)> = Vec::new();
    for sending in &batches {
        let records = PartitionRecords {
            partition: sending.partition,
            records: sending.batch.bytes.clone(),
        };
        match topics.iter_mut().find(|(name, _)| *name == sending.topic) {
            Some((_, partitions)) => partitions.push(records),
            None => topics.push((sending.topic.clone(), vec![records])),
        }
    }
    let fail_all = |batches: Vec<Sending>, error: ClientError| {
        for sending in batches {
            requeue_or_fail(inner, sending, error.duplicate());
        }
        inner.wake.notify_one();
    };
    let connection = match inner.cluster.connection(node).await {
        Ok(connection) => connection,
        Err(error) => return fail_all(batches, error),
    };
    let version = match connection.version::<ProduceRequest>(PRODUCE_VERSION_MAX) {
        Ok(version) => version,
        Err(error) => return fail_all(batches, error),
    };
    let answered = inner.config.acks != Acks::None;
    let acks = inner.config.acks.wire();
    let timeout_ms = i32::try_from(inner.config.request_timeout.as_millis()).unwrap_or(i32::MAX);
    let submitted = if produce_frame::VERSIONS.contains(&version) {
        // The batches go to the socket as they are, not copied into a frame.
        connection
            .submit_framed::<ProduceRequest>(version, answered, |correlation_id, client_id| {
                produce_frame::frame(
                    version,
                    correlation_id,
                    client_id,
                    acks,
                    timeout_ms,
                    &topics,
                )
            })
            .await
    } else {
        let request = produce_frame::as_request(acks, timeout_ms, &topics);
        if answered {
            connection.submit(&request, version).await.map(Some)
        } else {
            connection
                .send_no_response(&request, PRODUCE_VERSION_MAX)
                .await
                .map(|()| None)
        }
    };
    let pending = match submitted {
        Err(error) => return fail_all(batches, error),
        Ok(None) => {
            // acks=0: written is all there is.
            for sending in batches {
                complete(inner, sending, -1);
            }
            inner.wake.notify_one();
            return;
        }
        Ok(Some(pending)) => pending,
    };
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        let response = pending.response().await;
        drop(permit);
        handle_response(&inner, batches, response).await;
        inner.wake.notify_one();
    });
}

/// Completes, retries or fails each batch of a Produce request by its
/// partition's answer.
async fn handle_response(
    inner: &Inner,
    batches: Vec<Sending>,
    response: Result<kafka_protocol::messages::ProduceResponse, ClientError>,
) {
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            for sending in batches {
                requeue_or_fail(inner, sending, error.duplicate());
            }
            return;
        }
    };
    for sending in batches {
        let answer = response
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == sending.topic)
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.index == sending.partition);
        let Some(answer) = answer else {
            let error = ClientError::Protocol(format!(
                "no answer for {}/{}",
                sending.topic, sending.partition
            ));
            requeue_or_fail(inner, sending, error);
            continue;
        };
        match answer.error_code {
            codes::NONE => complete(inner, sending, answer.base_offset),
            // Already written by an earlier attempt whose answer was lost.
            codes::DUPLICATE_SEQUENCE_NUMBER => complete(inner, sending, -1),
            // Ahead of an earlier batch that is being retried: retry too,
            // behind it.
            codes::OUT_OF_ORDER_SEQUENCE_NUMBER if earlier_outstanding(inner, &sending) => {
                let error = ClientError::kafka(
                    codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
                    Some(&sending.topic),
                    Some(sending.partition),
                );
                requeue_or_fail_as(inner, sending, error, true);
            }
            code => {
                let error = ClientError::kafka(code, Some(&sending.topic), Some(sending.partition))
                    .with_message(answer.error_message.as_ref().map(|m| m.as_str()));
                if error.is_retriable() {
                    inner.cluster.invalidate(&sending.topic).await;
                }
                requeue_or_fail(inner, sending, error);
            }
        }
    }
}
