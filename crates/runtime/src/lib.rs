//! strata-runtime, the processor runtime: users write processors; an [`App`] declares
//! the topology, and [`ops::run`] runs one task per processor and input
//! partition, each a pull loop that commits the processor's state, its
//! emitted records (an outbox) and the next input offsets in one RocksDB
//! write batch, then ships the outbox to derived topics with the task's
//! stable producer id, so that effects are exactly-once across crashes
//! (docs/design.md, §4 "The commit protocol").
//!
//! What a user writes: stores and outputs declared once as typed handles,
//! shared by the builder and the processor, and the processor itself:
//!
//! ```no_run
//! use strata_runtime::{App, Context, ProcessError, Record, Store, Topic};
//!
//! const WORDS: Topic<String, ()> = Topic::new("words");
//! const COUNTS: Store<String, u64> = Store::new("counts");
//! const WORD_COUNTS: Topic<String, String> = Topic::new("word-counts");
//!
//! fn count(word: Record<String, ()>, ctx: &mut Context) -> Result<(), ProcessError> {
//!     let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + 1;
//!     ctx.put(COUNTS, &word.key, &n)?;
//!     ctx.emit(WORD_COUNTS, &word.key, &n.to_string())
//! }
//!
//! let app = App::new("wordcount")
//!     .processor("count", count).input(WORDS).store(COUNTS).output(WORD_COUNTS);
//! ```
//!
//! Which form of processor to write:
//!
//! - a **function or closure** (as above) for a processor without fields
//!   of its own: the common case;
//! - a [`Processor`] (given as a factory, `|| Sessions { .. }`) for one
//!   with fields, or with `init` and `close`;
//! - an [`AsyncProcessor`] only when a record needs I/O that must be
//!   awaited (a lookup in an external service): its `prepare` runs for
//!   several records at a time without the context, its `apply` in order
//!   with it. The others are called directly by the task, with nothing
//!   allocated per record, and are the faster ones;
//! - a [`RawProcessor`] for code that decodes records itself: it gets
//!   each record's key and value bytes where the task fetched them.
//!
//! The modules:
//!
//! - [`handles`]: `Store` and `Topic` (`Output`, its older name), the typed
//!   handles; `spec`: what the builder keeps of them; `input`: a processor's
//!   input as the builder takes it (a name, or a `Topic` checked against the
//!   processor and the topic's writers).
//! - [`processor`]: the `Processor` trait and what `App::processor` takes;
//!   `async_processor`: `AsyncProcessor`; `raw_processor`: `RawProcessor`,
//!   records' bytes as the log holds them; `erased`: a processor as a task
//!   calls it; `record`: `Record` and `RawRecord`; `process_error`:
//!   `ProcessError`.
//! - [`context`]: `Context` (position, store reads and writes, scans, emit,
//!   timers).
//! - [`timer`]: `TimeDomain` and `Timer`; the timer store's layout and when
//!   timers fire (event time: the task's stream time; processing time: the
//!   run's clock, the system's unless a test gives another), exactly once
//!   like everything else the run writes.
//! - [`topology`]: the `App` builder and what it declares.
//! - [`ops`]: run, status, dump-state, checkpoint, rebuild, replay, diff,
//!   promote: each a library call.
//! - [`cli`]: the subcommands every app binary gets; a leaf, dispatching
//!   into `ops`.
//! - [`testing`]: `TestDriver`, an app run inside a test by the real
//!   runtime over a log of its own; a leaf beside `cli`.
//! - `clock`: where a run reads processing time (`Clock`, `ManualClock`).
//! - `task`: one task's loop, its checkpoints, the rebuild handover and swap.
//! - [`state`]: a task's RocksDB (stores, meta, outbox, commits,
//!   checkpoints).
//! - `layout`: every path and lock of a state directory.
//! - `location`: where the log and state are; `log_access`: the embedded
//!   log or a remote cluster, alike to a task.
//! - [`versions`]: the live version and replayed ones; `progress`: the
//!   progress bar.
//!
//! Imports go one way: `testing` → `cli` → `ops` → `task` → `state` →
//! `layout`; nothing below `cli` imports it or `testing`.

mod async_processor;
pub(crate) mod board;
pub mod cli;
mod clock;
pub mod context;
mod erased;
mod error;
mod fetch_pool;
mod group;
pub mod handles;
pub mod index_key;
mod input;
mod layout;
mod letter;
mod location;
mod log_access;
mod metrics;
mod on_error;
pub mod ops;
mod position;
mod process_error;
pub mod processor;
mod processor_spec;
mod progress;
mod provenance;
mod raw_processor;
mod record;
mod spec;
pub mod state;
mod store_layout;
mod store_text;
mod task;
mod task_config;
mod task_metrics;
pub mod testing;
pub mod timer;
mod topic_read;
pub mod topology;
pub mod versions;
pub mod window_key;

pub use async_processor::{AsyncProcessor, CONCURRENCY_DEFAULT};
pub use board::TaskView;
pub use cli::{
    CheckpointArgs, Cli, Command, CommitArgs, DlqCommand, GroupArgs, IntoApp, LocationArgs, NoArgs,
    Outcome, run_cli, run_parsed,
};
pub use clock::{Clock, ManualClock};
pub use context::{Context, EmitOptions, Entries};
pub use error::{PositionsError, RestoreError, RuntimeError, ShipError, Unreadable};
pub use group::{GroupOptions, tasks_of_assignment};
pub use handles::{Output, Store, Topic};
pub use input::InputTopic;
pub use location::Location;
pub use on_error::{FAILURES_PER_MINUTE_MAX, OnError};
pub use ops::{
    DiffReport, PartitionDiff, REBUILD_COMMIT, RebuildOptions, RebuildSummary, RunOptions,
    RunSummary, StatusRow, StoreDiff, TopicDiff,
};
pub use process_error::ProcessError;
pub use processor::{IntoProcessor, Processor};
pub use provenance::Provenance;
pub use raw_processor::RawProcessor;
pub use record::{RawRecord, Record, RecordHeader};
pub use state::{Entry, OutboxBatch, StateError, TaskState};
pub use task::StartAt;
#[doc(hidden)]
pub use task::handover::decode_offsets as decode_handover_offsets;
pub use timer::{TIMER_KEY_BYTES_MAX, TIMERS_FIRED_PER_PASS_MAX, TimeDomain, Timer};
pub use topology::{App, CheckpointPolicy, CommitInterval, TaskConfig};
pub use versions::{Version, Versions};

/// An app binary's `fn main`: parses the standard command line ([`Cli`])
/// and runs what it asks with the app the body makes ([`run_cli`]): an
/// [`App`], or a pipeline's `Result<App, _>`. The body may be statements
/// ending in that value.
///
/// ```no_run
/// use strata_runtime::{App, Context, ProcessError, Record, Topic};
///
/// const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
///
/// fn print(line: Record<Vec<u8>, String>, _: &mut Context) -> Result<(), ProcessError> {
///     println!("{}", line.value);
///     Ok(())
/// }
///
/// strata_runtime::main!(App::new("printer").processor("print", print).input(LINES));
/// ```
#[macro_export]
macro_rules! main {
    ($($app:tt)*) => {
        fn main() -> ::std::process::ExitCode {
            $crate::run_cli({ $($app)* })
        }
    };
}
