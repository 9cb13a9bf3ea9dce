//! What can be done with an app, each a library call in a file of its own:
//! the command line (`cli`) is one caller, tests and examples are others.
//!
//! - [`run()`] / [`run_until`]: run the app (`run.rs`; the log opened and the
//!   topology resolved in `open.rs`).
//! - [`status()`]: per task and input, where it is and the catch-up check.
//! - [`dump_state()`] / [`dump_state_at`]: every store entry, now or as of a
//!   checkpoint.
//! - [`checkpoint()`]: checkpoint every stateful task, running or not.
//! - [`rebuild()`]: fresh state from the log, swapped in.
//! - [`Replay`]: run a new build into a version of its own.
//! - [`diff()`]: two versions' stores and derived topics compared.
//! - [`dead_letters()`]: the records processors failed on and sent to
//!   their dead-letter topics; [`replay_dead_letters()`]: those records
//!   run again through a fixed build, exactly once.
//! - [`explain()`]: a derived record walked back to its input records
//!   through its provenance headers.
//! - [`promote()`]: make a version live.
//! - [`query()`]: a store's committed entries by key, prefix, range or
//!   window, as JSON; `query/http.rs` serves it while the app runs.
//!
//! Each takes the app (its topology, [`App`](crate::App)) and the
//! [`Location`](crate::Location) of its log and state; a version
//! other than the live one is reached with `App::as_version`.

mod checkpoint;
mod dead_letters;
pub(crate) mod diff;
mod dlq_replay;
pub(crate) mod dump_state;
mod explain;
pub(crate) mod open;
mod promote;
pub mod query;
mod rebuild;
mod replay;
mod run;
mod running_diff;
mod serve;
mod status;

pub use crate::letter::{LetterBound, LetterFilter, Replayed};
pub use checkpoint::{TaskCheckpoint, checkpoint};
pub use dead_letters::{DeadLetter, DeadLetters, dead_letters};
pub use diff::{DiffReport, PartitionDiff, StoreDiff, TopicDiff, diff};
pub use dlq_replay::{
    LetterReplay, LetterReplaySummary, replay_dead_letters, replay_dead_letters_until,
};
pub use dump_state::{dump_state, dump_state_at};
pub use explain::{ExplainStep, Explained, STEPS_MAX as EXPLAIN_STEPS_MAX, explain};
pub use promote::{Promoted, promote};
pub use query::{Held, Lookup, QueryAnswer, StoreQuery, query};
pub use rebuild::{REBUILD_COMMIT, RebuildOptions, RebuildSummary, rebuild};
pub use replay::Replay;
pub use run::{RunOptions, RunSummary, run, run_until, stop_signal};
pub use status::{StatusRow, status};
