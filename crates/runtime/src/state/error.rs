//! [`StateError`]: what can go wrong in a task's state, with the store,
//! topic or entry concerned.

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state store: {0}")]
    Db(#[from] rocksdb::Error),
    #[error("no state store named {0:?} (declared: {1})")]
    UnknownStore(String, String),
    #[error("{0:?} is the runtime's own column family, not a store name")]
    ReservedName(String),
    #[error("the input offset of {topic} may not move back from {current} to {next}")]
    OffsetBackwards {
        topic: String,
        current: i64,
        next: i64,
    },
    #[error("corrupt state entry: {0}")]
    Corrupt(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("emitting to {0}: {1}")]
    Emit(String, String),
    #[error("the task has no producer identity yet")]
    NoProducer,
    /// The task's first open was cut short: nothing was ever committed.
    #[error("state in {0} was never fully created (nothing committed)")]
    NeverOpened(String),
    /// An earlier commit failed after the state had moved on.
    #[error("the state commits no more until it is reopened (restart the task): {0}")]
    Poisoned(String),
    /// The thread commits are written on has gone (it panicked or could
    /// not start); the state is poisoned with it.
    #[error(
        "the commit writer of stores {stores} stopped; restart the task, which resumes from its last commit"
    )]
    WriterStopped { stores: String },
}
