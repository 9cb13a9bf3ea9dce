//! The processor runtime: users write [`Processor`]s; an [`App`] runs one
//! task per processor and input partition, each a pull loop that commits
//! the processor's state, its emitted records (an outbox) and the next input
//! offsets in one RocksDB write batch, then ships the outbox to derived
//! topics with the task's stable producer id, so that effects are
//! exactly-once across crashes (DESIGN.md, "The exactly-once commit
//! protocol").
//!
//! - [`processor`]: the `Processor` trait and `Record`.
//! - [`context`]: `Context` (position, stores, emit) and typed `Store`s.
//! - [`topology`]: the `App` builder and what it declares.
//! - `task`: one task's loop; `runner`: running all of them; [`cli`]: the
//!   subcommands every app binary gets.
//! - [`state`]: a task's RocksDB (stores, meta, outbox).
//! - `log_access`: the embedded log or a remote cluster, alike to a task.

pub mod cli;
pub mod context;
mod error;
mod log_access;
pub mod processor;
mod runner;
pub mod state;
mod task;
pub mod topology;

pub use cli::{Cli, Command, LocationArgs, NoArgs, StatusRow};
pub use context::{Context, EmitOptions, Store};
pub use error::RuntimeError;
pub use processor::{ProcessError, Processor, Record, RecordHeader};
pub use runner::{Location, RunOptions, RunSummary};
pub use state::{Entry, OutboxBatch, StateError, TaskState};
pub use topology::{App, CommitInterval, TaskConfig};

pub use async_trait::async_trait;
