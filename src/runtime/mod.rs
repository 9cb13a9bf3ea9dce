//! The processor runtime: users write [`Processor`]s; an [`App`] declares
//! the topology, and [`ops::run`] runs one task per processor and input
//! partition, each a pull loop that commits the processor's state, its
//! emitted records (an outbox) and the next input offsets in one RocksDB
//! write batch, then ships the outbox to derived topics with the task's
//! stable producer id, so that effects are exactly-once across crashes
//! (docs/design.md, §4 "The commit protocol").
//!
//! - [`processor`]: the `Processor` trait and `Record`.
//! - [`context`]: `Context` (position, stores, emit) and typed `Store`s.
//! - [`topology`]: the `App` builder and what it declares.
//! - [`ops`]: run, status, dump-state, checkpoint, rebuild, replay, diff,
//!   promote: each a library call.
//! - [`cli`]: the subcommands every app binary gets; a leaf, dispatching
//!   into `ops`.
//! - `task`: one task's loop, its checkpoints, the rebuild handover and swap.
//! - [`state`]: a task's RocksDB (stores, meta, outbox, commits,
//!   checkpoints).
//! - `layout`: every path and lock of a state directory.
//! - `location`: where the log and state are; `log_access`: the embedded
//!   log or a remote cluster, alike to a task.
//! - [`versions`]: the live version and replayed ones; `progress`: the
//!   progress bar.
//!
//! Imports go one way: `cli` → `ops` → `task` → `state` → `layout`; nothing
//! below `cli` imports it.

pub mod cli;
pub mod context;
mod error;
mod layout;
mod location;
mod log_access;
pub mod ops;
pub mod processor;
mod progress;
pub mod state;
mod task;
pub mod topology;
pub mod versions;

pub use cli::{
    CheckpointArgs, Cli, Command, CommitArgs, LocationArgs, NoArgs, Outcome, run_cli, run_parsed,
};
pub use context::{Context, EmitOptions, Store};
pub use error::RuntimeError;
pub use location::Location;
pub use ops::{
    DiffReport, PartitionDiff, REBUILD_COMMIT, RebuildOptions, RebuildSummary, RunOptions,
    RunSummary, StatusRow, StoreDiff, TopicDiff,
};
pub use processor::{ProcessError, Processor, Record, RecordHeader};
pub use state::{Entry, OutboxBatch, StateError, TaskState};
pub use task::StartAt;
#[doc(hidden)]
pub use task::handover::decode_offsets as decode_handover_offsets;
pub use topology::{App, CheckpointPolicy, CommitInterval, TaskConfig};
pub use versions::{Version, Versions};

pub use async_trait::async_trait;
