//! The processor runtime (in progress): so far a task's durable state, the
//! store, outbox and offset bookkeeping that the exactly-once commit
//! protocol writes in one RocksDB write batch (see DESIGN.md).

pub mod state;

pub use state::{Entry, OutboxEntry, Run, StateError, TaskState};
