//! [`TestError`]: what a test driver call can fail with.

use strata_log::LogError;
use strata_record::codec::CodecError;

use crate::error::RuntimeError;

#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The app's declaration is refused (what `run` would refuse).
    #[error("the app is refused: {0}")]
    App(String),
    /// Running the app, or reading its state, failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Writing the piped records to the log, or reading a topic, failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A key or value did not encode or decode with its topic's or store's
    /// codec.
    #[error("{what}: {error}; the handle's types and codecs must match what is written there")]
    Codec {
        what: String,
        #[source]
        error: CodecError,
    },
    /// A topic or store the app does not declare.
    #[error("the app declares no {kind} {name:?} (it has: {declared})")]
    Unknown {
        kind: &'static str,
        name: String,
        declared: String,
    },
    /// A topic given another partition count than it has.
    #[error(
        "topic {topic:?} has {has} partitions (records were piped to it, or it is in the log), not {asked}: set its count before the first record"
    )]
    Partitions { topic: String, has: i32, asked: i32 },
    /// A partition count no topic can have.
    #[error("topic {topic:?} cannot have {asked} partitions: give it 1 or more")]
    PartitionCount { topic: String, asked: i32 },
    /// A store read as one map holds a key in two tasks.
    #[error(
        "store {store:?} holds a key in two tasks (it is not partitioned by its key): read it with state_lines"
    )]
    KeyInTwoTasks { store: String },
    /// A partition the topic does not have.
    #[error("topic {topic:?} has partitions 0..{has}; there is no partition {partition}")]
    NoSuchPartition {
        topic: String,
        partition: i32,
        has: i32,
    },
    /// The app was crashed and not restarted.
    #[error("the app is down after crash_after: call restart() to run it again")]
    Down,
    /// The temporary directory or the async runtime could not be made.
    #[error("{context}: {error}")]
    Io {
        context: String,
        #[source]
        error: std::io::Error,
    },
}
