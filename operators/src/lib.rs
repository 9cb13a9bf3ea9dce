//! strata's operators: a fluent pipeline of stateless steps, keyed and
//! windowed aggregations, compiled into an ordinary strata
//! [`App`](strata_runtime::App) of processors. Everything here is written
//! on the runtime's public API (processors, the context's stores and
//! emits), so a pipeline's app runs, rebuilds, replays, diffs and promotes
//! exactly as a hand-written one, exactly once across crashes.
//!
//! ```no_run
//! use std::time::Duration;
//! use strata_operators::{Pipeline, Topic, Tumbling, Windowed};
//!
//! const CLICKS: Topic<String, String> = Topic::new("clicks");
//! const PER_MINUTE: Topic<String, String> = Topic::new("clicks-per-minute");
//!
//! let pipeline = Pipeline::new("clicks");
//! pipeline
//!     .from(CLICKS)
//!     .filter(|_user, page| !page.is_empty())
//!     .key_by(|_user, page| page.clone())
//!     .window(Tumbling::of(Duration::from_secs(60)).emit_on_close())
//!     .count()
//!     .map(|w: Windowed<String>, n| (format!("{}@{}", w.key, w.start), n.to_string()))
//!     .to(PER_MINUTE);
//! let app = pipeline.app()?;
//! # Ok::<(), strata_operators::PipelineError>(())
//! ```
//!
//! The modules: `pipeline` (the builder and its compilation), `stream`
//! (a stream's operators), `graph` (nodes, segments, building a segment
//! per task), `operator` (a step as a task runs it), `source`,
//! `stateless`, `aggregate` (keyed aggregations), [`window`] (event-time
//! windows), `table` (tables and stream–table joins), `table_join`,
//! `stream_join` (joins within a window), `dedup` (de-duplication by key
//! within a window), `expiry` (the watermark and expiry list of the
//! operators that forget), `index` (secondary indexes), `topic` and
//! `item` (what flows).

mod aggregate;
mod dedup;
mod expiry;
mod graph;
mod index;
mod item;
mod operator;
mod pipeline;
mod source;
mod stateless;
mod stream;
mod stream_join;
mod table;
mod table_join;
pub mod window;

pub use dedup::Deduped;
pub use index::{Found, Index, IndexQuery};
pub use item::{Data, Item};
pub use pipeline::{Pipeline, PipelineError};
/// A topic with its types and codecs: the runtime's handle, so a pipeline
/// and a hand-written processor share one.
pub use strata_runtime::Topic;
pub use stream::Stream;
pub use stream_join::{JoinWindows, WindowJoined};
pub use table::Table;
pub use window::{
    Emit, Hopping, OnClose, OnUpdate, SessionEmit, SessionStream, Sessions, Tumbling, Windowed,
    WindowedStream, Windows,
};
