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
//! `max_in_flight` to 1 to rule that out. A partition's batches in flight
//! all go to one leader, and a retried batch is sent alone (nothing else of
//! its partition in flight, nothing after it until it is answered), so when
//! a leader moves the order holds even at a broker that checks no sequence
//! numbers, unless the partition returns to a leader while batches of its
//! earlier term are still in flight there (Kafka's sequence check refuses
//! a later batch that then arrives first). `max_in_flight` also bounds the
//! requests outstanding per broker.
//!
//! Memory: records queued or in flight may hold up to `buffer_bytes`
//! (32 MiB); past that `send` waits, sending lingering batches at once,
//! until answers free room. Batches are built in place and written to the
//! socket as they are (see `produce_frame`), and a batch's records share
//! one completion rather than a channel each.

mod accumulator;
mod config;
mod delivery;
mod sender;
mod transaction;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use crate::producer_id::init_producer_id_for;
use accumulator::{
    FIRST_BATCH_RESERVE_BYTES, Inner, OpenBatch, Queues, RECORD_OVERHEAD_BYTES, Random, State,
    close_open_batch,
};
use delivery::CompletionHandle;
use sender::run_sender;
use transaction::TxnProgress;

use super::error::codes;
use super::partitioner::partition_for_key;
use super::{ClientError, Cluster};
use strata_record::time::now_ms;
use strata_record::{BatchBuilder, Header, NewRecord};

pub use config::{Acks, ProducerConfig, ProducerRecord, RecordMetadata};
pub use delivery::DeliveryFuture;
pub(crate) use sender::PRODUCE_VERSION_MAX;

/// `record`'s topic's queues in `partitions`, with how many partitions it
/// has: `count` when asked for outside the lock, else the count kept
/// beside its queues. None when that count is not known or does not hold
/// the partition the record names (it must be asked for).
fn counted<'q>(
    partitions: &'q mut Queues,
    record: &ProducerRecord,
    count: Option<i32>,
    cluster: &Cluster,
) -> Option<(&'q mut accumulator::TopicQueues, i32)> {
    match count {
        Some(count) => Some((partitions.topic(&record.topic), count)),
        None => partitions
            .counted_topic(&record.topic, cluster)
            .filter(|&(_, count)| count > 0 && record.partition.is_none_or(|p| p < count)),
    }
}

/// What [`Producer::enqueue`] did with a record.
enum Enqueued {
    Queued(DeliveryFuture),
    /// Not queued: the buffer has no room for it.
    NoRoom,
    /// Not queued: how many partitions its topic has must be asked for.
    CountUnknown,
}

/// A batching, idempotent producer (see the module doc); cheap to share
/// behind an `Arc`, its sender runs as a task of its own.
pub struct Producer {
    inner: Arc<Inner>,
    sender: tokio::task::JoinHandle<()>,
    txn: tokio::sync::Mutex<TxnProgress>,
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
        if config.transactional_id.is_some() && !config.idempotent {
            return Err(ClientError::Invalid(
                "a transactional producer is idempotent: set idempotent".into(),
            ));
        }
        let identity = if config.idempotent {
            let timeout_ms =
                i32::try_from(config.transaction_timeout.as_millis()).unwrap_or(i32::MAX);
            init_producer_id_for(
                &cluster,
                config.transactional_id.as_deref(),
                timeout_ms,
                None,
            )
            .await?
        } else {
            (-1, -1)
        };
        let inner = Arc::new(Inner {
            cluster,
            config,
            identity: std::sync::Mutex::new(identity),
            state: std::sync::Mutex::new(State {
                partitions: Queues::default(),
                random: Random::seeded(),
                closing: false,
                outstanding: 0,
                buffered: 0,
            }),
            wake: Notify::new(),
            drained: Notify::new(),
            space: Notify::new(),
            per_broker: std::sync::Mutex::default(),
            failure: std::sync::Mutex::default(),
        });
        let sender = tokio::spawn(run_sender(Arc::clone(&inner)));
        Ok(Self {
            inner,
            sender,
            txn: tokio::sync::Mutex::default(),
        })
    }

    /// The producer id and epoch (-1, -1 without idempotence).
    pub fn identity(&self) -> (i64, i16) {
        self.inner.identity()
    }

    /// Queues a record; the returned future resolves once it is written.
    /// A transactional producer's record joins the open transaction (its
    /// partition is added to it first).
    pub async fn send(&self, mut record: ProducerRecord) -> Result<DeliveryFuture, ClientError> {
        let record_bytes = RECORD_OVERHEAD_BYTES
            + record.key.as_ref().map_or(0, Bytes::len)
            + record.value.as_ref().map_or(0, Bytes::len)
            + record
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
                .sum::<usize>();
        if self.inner.config.transactional_id.is_some() {
            let partition = self.partition_of(&record, record_bytes).await?;
            self.join_transaction(&record.topic, partition).await?;
            record.partition = Some(partition);
        }
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let headers = Header::from_pairs(&record.headers);
        let new = NewRecord {
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            timestamp,
            headers: &headers,
        };
        // Room in the buffer is checked under the lock that queues the
        // record: one acquisition per record. A record that had to wait
        // for room is queued once room was seen, without checking again:
        // senders woken together may take the buffer past `buffer_bytes`
        // by their records, never by more.
        let mut must_fit = true;
        // The topic's partition count, once asked for outside the lock
        // (nearly every record finds it kept beside its topic's queues).
        let mut count = None;
        loop {
            match self.enqueue(&record, new, count, record_bytes, must_fit)? {
                Enqueued::Queued(delivery) => return Ok(delivery),
                Enqueued::NoRoom => {
                    self.wait_for_buffer_space(record_bytes).await;
                    must_fit = false;
                }
                Enqueued::CountUnknown => {
                    count = Some(self.checked_partition_count(&record).await?);
                    // Room seen before that wait may be gone.
                    must_fit = true;
                }
            }
        }
    }

    /// How many partitions `record`'s topic has, asked for through the
    /// retries (see [`Producer::partition_count`]); asked again once when
    /// the record names a partition past them, since partitions may have
    /// been added (or the topic re-created) since the metadata was read.
    async fn checked_partition_count(&self, record: &ProducerRecord) -> Result<i32, ClientError> {
        let mut partitions = self.partition_count(&record.topic).await?;
        if record
            .partition
            .is_some_and(|p| p >= 0 && p as usize >= partitions)
        {
            self.inner.cluster.invalidate(&record.topic).await;
            partitions = self.partition_count(&record.topic).await?;
        }
        match i32::try_from(partitions).unwrap_or(i32::MAX) {
            0 => Err(ClientError::UnknownTopic(record.topic.to_string())),
            count => Ok(count),
        }
    }

    /// Queues `new` (of `record`, `record_bytes` long) in its partition's
    /// open batch, waking the sender when a batch closes or a new one
    /// opens. Its topic has `count` partitions, or (None) as many as are
    /// kept beside its queues. Queues nothing when that count is not known
    /// or does not hold the partition the record names, or when `must_fit`
    /// and the buffer has no room for it.
    fn enqueue(
        &self,
        record: &ProducerRecord,
        new: NewRecord<'_>,
        count: Option<i32>,
        record_bytes: usize,
        must_fit: bool,
    ) -> Result<Enqueued, ClientError> {
        let mut wake = false;
        let delivery;
        {
            let mut state = self.inner.lock();
            if state.closing {
                return Err(ClientError::Closed);
            }
            let no_room = must_fit && !self.inner.fits(&state, record_bytes);
            let State {
                partitions, random, ..
            } = &mut *state;
            // A topic not known fails before any wait for room.
            let Some((topic, count)) = counted(partitions, record, count, &self.inner.cluster)
            else {
                return Ok(Enqueued::CountUnknown);
            };
            if no_room {
                return Ok(Enqueued::NoRoom);
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
                (None, None) => {
                    let (partition, closed) =
                        (self.inner).sticky_partition(topic, random, count, record_bytes);
                    wake |= closed;
                    partition
                }
            };
            let queue = topic.queues.get_or_insert(partition);
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
            let reserve = (self.inner.config.batch_bytes).min(
                FIRST_BATCH_RESERVE_BYTES.max(queue.last_batch_bytes + queue.last_batch_bytes / 4),
            );
            let open = queue.open.get_or_insert_with(|| OpenBatch {
                builder: BatchBuilder::with_capacity(self.inner.config.compression, reserve),
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
            }
            state.outstanding += 1;
            state.buffered += record_bytes;
        }
        if wake {
            self.inner.wake.notify_one();
        }
        Ok(Enqueued::Queued(delivery))
    }

    /// The partition `record` goes to, chosen now (for a transactional
    /// producer, which adds it to the transaction before queueing).
    async fn partition_of(
        &self,
        record: &ProducerRecord,
        record_bytes: usize,
    ) -> Result<i32, ClientError> {
        let count = self.partition_count(&record.topic).await?;
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        if count == 0 {
            return Err(ClientError::UnknownTopic(record.topic.to_string()));
        }
        Ok(match (record.partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => {
                let mut state = self.inner.lock();
                let State {
                    partitions, random, ..
                } = &mut *state;
                let topic = partitions.topic(&record.topic);
                let (partition, closed) =
                    (self.inner).sticky_partition(topic, random, count, record_bytes);
                drop(state);
                if closed {
                    self.inner.wake.notify_one();
                }
                partition
            }
        })
    }

    /// How many partitions `topic` has, asked again through what passes (a
    /// leader election reported for the topic, a dropped connection, and a
    /// topic the answering broker does not know yet: with several brokers,
    /// one may answer before it has heard of a topic the others serve; as
    /// Kafka's producer waits for an unknown topic's metadata, this asks
    /// again through the retries before saying it does not exist).
    async fn partition_count(&self, topic: &str) -> Result<usize, ClientError> {
        let cluster = &self.inner.cluster;
        // Nearly every record finds its topic known: answered without the
        // retry loop's future (16% of a producing thread's samples, 100-byte
        // records, when every record went through it).
        if let Some(count) = cluster.known_partition_count(topic) {
            return Ok(count);
        }
        let mut unknown = 0;
        loop {
            match cluster.retry(&[], || cluster.partition_count(topic)).await {
                Err(ClientError::UnknownTopic(_)) if unknown < cluster.config().retries => {
                    unknown += 1;
                    cluster.invalidate(topic).await;
                    tokio::time::sleep(cluster.config().retry_backoff).await;
                }
                counted => return counted,
            }
        }
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
