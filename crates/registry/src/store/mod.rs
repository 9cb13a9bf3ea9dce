//! Store: the registry's state, kept in the `_schemas` topic and in
//! memory.
//!
//! At open the topic is read from its start and every record applied, so
//! the state is what the acknowledged writes made it. A write takes the
//! state's lock, appends its records as one batch, waits for the disk,
//! then applies the same changes in memory: readers never see a change
//! the log does not hold, and writes are ordered as the log orders them.
//! A failed append leaves memory untouched.
//!
//! The registry in this process is the topic's only writer; records that
//! other producers append after the open are not read.

mod record;
mod schemas_topic;
mod state;

use std::sync::{Arc, Mutex, MutexGuard};

use strata_log::{AppendSignals, LogManager};

pub use crate::error::StoreError;
pub use schemas_topic::SCHEMAS_TOPIC;
pub use state::{Change, State, VersionEntry};

use schemas_topic::SchemasTopic;

pub struct Store {
    state: Mutex<State>,
    topic: SchemasTopic,
}

impl Store {
    /// Opens (or creates) the topic and rebuilds the state from it.
    pub fn open(log: &LogManager, appends: Arc<AppendSignals>) -> Result<Self, StoreError> {
        let topic = SchemasTopic::open(log, appends)?;
        let mut state = State::default();
        let mut records = 0usize;
        topic.read_all(|offset, key, value| match record::decode(key, value) {
            Ok(Some(change)) => {
                state.apply(change);
                records += 1;
            }
            Ok(None) => {}
            Err(reason) => tracing::warn!(
                offset,
                "passing over a record of {SCHEMAS_TOPIC} the registry cannot read: {reason}"
            ),
        })?;
        tracing::info!(
            records,
            next_id = state.next_id(),
            "schema registry state read"
        );
        Ok(Self {
            state: Mutex::new(state),
            topic,
        })
    }

    /// The state, locked: reads, or decisions followed by [`Store::commit`].
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // Changes are applied only after their append succeeded, whole: a
        // panic elsewhere under the lock leaves a consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `changes` to the topic, durably, then applies them to
    /// `state` (the guard [`Store::lock`] gave).
    pub fn commit(&self, state: &mut State, changes: Vec<Change>) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let records: Vec<record::Encoded> = changes.iter().map(record::encode).collect();
        self.topic.append(&records)?;
        for change in changes {
            state.apply(change);
        }
        Ok(())
    }
}
