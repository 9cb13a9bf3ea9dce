//! What a user writes: a [`Processor`], called once per input record with a
//! [`Record`] (typed key and value, decoded with the processor's input
//! codecs) and a [`Context`](super::Context) (the record's position, the processor's
//! stores, and `emit` to derived topics).
//!
//! A processor never sees commits, producer ids or RocksDB: everything it
//! writes through the context is buffered in the task's current run and
//! committed, with the input offset, in one write batch. A processor that
//! returns an error stops its task; the run in progress is not committed.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::codec::CodecError;

use super::state::StateError;

/// Why a processor could not handle a record.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The processor's own reason.
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Other(#[from] Box<dyn std::error::Error + Send + Sync>),
}

impl ProcessError {
    /// An error with the processor's own message.
    pub fn msg(message: impl std::fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<std::io::Error> for ProcessError {
    fn from(error: std::io::Error) -> Self {
        Self::Other(Box::new(error))
    }
}

/// A record header: a string key and an optional value.
pub type RecordHeader = (String, Option<Vec<u8>>);

/// One input record with its key and value decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K, V> {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// Decoded with the input's key codec; a null key decodes from zero
    /// bytes (an empty string or byte vector with the raw and utf8 codecs).
    pub key: K,
    /// Decoded like the key; see [`Record::is_tombstone`] for a null value.
    pub value: V,
    pub headers: Vec<RecordHeader>,
    pub(crate) key_is_null: bool,
    pub(crate) value_is_null: bool,
}

impl<K, V> Record<K, V> {
    /// Whether the record had no key (null, not empty).
    pub fn key_is_null(&self) -> bool {
        self.key_is_null
    }

    /// Whether the record's value was null: a deletion marker by Kafka's
    /// convention.
    pub fn is_tombstone(&self) -> bool {
        self.value_is_null
    }

    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<Option<&[u8]>> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref())
    }
}

/// A stream processor. One instance runs per input partition (the runtime
/// clones the value given to the app builder), so fields are per task.
#[async_trait]
pub trait Processor: Send + 'static {
    type Key: DeserializeOwned + Send + 'static;
    type Value: DeserializeOwned + Send + 'static;

    /// Called once when the task starts, before its first record (and on a
    /// fresh instance when a rebuilt state is swapped in); writes go into
    /// the first run.
    async fn init(&mut self, _ctx: &mut super::Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// Called for every input record, in offset order per partition.
    async fn process(
        &mut self,
        record: Record<Self::Key, Self::Value>,
        ctx: &mut super::Context<'_>,
    ) -> Result<(), ProcessError>;

    /// Called once when the task stops cleanly; writes go into its last
    /// commit.
    async fn close(&mut self, _ctx: &mut super::Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }
}
