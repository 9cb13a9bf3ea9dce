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
//! - [`state`]: a task's RocksDB (stores, meta, outbox, checkpoints), its
//!   commits written beside the next run; `slot_table`: each store's values
//!   in memory; `inline_bytes`: short byte strings held inline.
//! - `log_access`: the embedded log or a remote cluster, alike to a task.
//! - [`versions`]: the live version and replayed ones; [`diff`]: comparing
//!   two; `rebuild` and `swap`: fresh state from the log, swapped in;
//!   `progress`: the progress bar.

pub mod cli;
pub mod context;
pub mod diff;
mod error;
mod inline_bytes;
mod log_access;
pub mod processor;
mod progress;
mod rebuild;
mod runner;
mod slot_table;
pub mod state;
mod swap;
mod task;
pub mod topology;
pub mod versions;

pub use cli::{CheckpointArgs, Cli, Command, CommitArgs, LocationArgs, NoArgs, Outcome, StatusRow};
pub use context::{Context, EmitOptions, Store};
pub use diff::{DiffReport, PartitionDiff, StoreDiff, TopicDiff};
pub use error::RuntimeError;
pub use processor::{ProcessError, Processor, Record, RecordHeader};
pub use rebuild::{REBUILD_COMMIT, RebuildOptions, RebuildSummary};
pub use runner::{Location, RunOptions, RunSummary, StartAt};
pub use state::{Entry, OutboxBatch, StateError, TaskState};
pub use topology::{App, CheckpointPolicy, CommitInterval, TaskConfig};
pub use versions::{Version, Versions};

pub use async_trait::async_trait;
