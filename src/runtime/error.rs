//! The runtime's errors, each with the task, topic, partition or offset it
//! concerns.

use crate::client::ClientError;
use crate::log::LogError;

use super::process_error::ProcessError;
use super::state::StateError;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A processor returned an error; its run was not committed.
    #[error("processor {processor:?} failed on {topic}/{partition} at offset {offset}: {error}")]
    Processor {
        processor: String,
        topic: String,
        partition: i32,
        offset: i64,
        error: ProcessError,
    },
    #[error(
        "task {task}: {topic}/{partition} now starts at offset {start}, but the task's next offset is {position}: records were deleted by retention before they were processed"
    )]
    InputGone {
        task: String,
        topic: String,
        partition: i32,
        start: i64,
        position: i64,
    },
    #[error("task {task}: shipping to {topic}/{partition}: {reason}")]
    Ship {
        task: String,
        topic: String,
        partition: i32,
        reason: String,
    },
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
}
