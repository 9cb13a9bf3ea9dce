//! What a producer is asked to do: its configuration, the records it is
//! given and what it answers for each.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use strata_record::Compression;

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
    pub(super) fn wire(self) -> i16 {
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
    /// Makes the producer transactional (Kafka's `transactional.id`): its
    /// records are sent inside transactions (`begin_transaction`, …) and
    /// a newer producer with the same id fences this one.
    pub transactional_id: Option<String>,
    /// How long a transaction may stay open before the coordinator aborts
    /// it (Kafka's `transaction.timeout.ms`).
    pub transaction_timeout: Duration,
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
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }
}

/// A record to send.
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// Shared, so a caller sending many records to one topic clones a
    /// pointer per record rather than the name.
    pub topic: Arc<str>,
    /// `None`: chosen by key (murmur2); records without one stay on one
    /// partition for a batch's worth of bytes, then move on (KIP-794).
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
