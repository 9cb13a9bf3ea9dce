//! [`RuntimeError`]: the runtime's errors, each with the task, topic,
//! partition, offset or path it concerns, and a message that says what to
//! do about it.

use std::path::PathBuf;

use strata_client::ClientError;
use strata_client::error::codes;
use strata_log::LogError;
use strata_record::RecordError;

use super::layout::LayoutError;
use super::process_error::ProcessError;
use super::state::StateError;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A mistake in the app's declaration or in a command's arguments.
    #[error("{0}")]
    Config(String),
    /// Another process holds a lock of the state directory (`why` names
    /// what holds it and what to do instead).
    #[error("{path} is locked: {why}")]
    Locked { path: PathBuf, why: String },
    /// A task (or a rebuild's task) panicked; its run was not committed.
    #[error(
        "task {task} panicked: {reason}; its last run was not committed, and a restart resumes from its last commit"
    )]
    TaskPanicked { task: String, reason: String },
    /// The run ended as a SIGKILL would, as [`RunOptions::crash_after`]
    /// asked: nothing since the tasks' last commits was committed.
    ///
    /// [`RunOptions::crash_after`]: crate::ops::RunOptions::crash_after
    #[error(
        "the run was crashed on purpose (crash_after): what its tasks had not committed is lost, and a restart resumes from their last commits"
    )]
    Crashed,
    /// An input batch failed its checks (CRC, framing, decompression).
    #[error(
        "{topic}/{partition} at offset {offset}: unreadable batch ({error}); the log is damaged there, so the task stops rather than skip records"
    )]
    UnreadableBatch {
        topic: String,
        partition: i32,
        offset: i64,
        #[source]
        error: Unreadable,
    },
    /// An input topic of the app does not exist.
    #[error(
        "input topic {topic:?} does not exist; create it first, e.g. `strata topics create {topic} --partitions 4`"
    )]
    UnknownTopic { topic: String },
    /// A store asked for by name that no processor of the app declares.
    #[error("no store named {store:?}; the app declares: {declared}")]
    UnknownStore { store: String, declared: String },
    /// A query that cannot be answered as asked (a key that does not parse
    /// as the store's key type, a window query on a store of other keys).
    #[error("query of store {store:?}: {reason}")]
    Query { store: String, reason: String },
    /// A version asked for by name that `versions.json` does not list.
    #[error("no version {name:?} (versions: {known}); `replay --version {name}` makes one")]
    UnknownVersion { name: String, known: String },
    /// A start offset below what the log still holds.
    #[error(
        "{topic}/{partition}: offset {offset} is no longer retained (the partition starts at {start}); start at or after {start}"
    )]
    NotRetained {
        topic: String,
        partition: i32,
        offset: i64,
        start: i64,
    },
    /// A start offset past the end of the log (Kafka's consumers get
    /// OFFSET_OUT_OF_RANGE): started there, the records appended below it
    /// later would never be read.
    #[error(
        "{topic}/{partition}: offset {offset} is past the end of the partition ({end}); start at or before {end}"
    )]
    BeyondEnd {
        topic: String,
        partition: i32,
        offset: i64,
        end: i64,
    },
    /// No checkpoint to answer a `--at` or `--from-checkpoint`.
    #[error(
        "task {task} has no checkpoint {wanted}; take one with `checkpoint`, or run with --checkpoint-records / --checkpoint-secs"
    )]
    NoCheckpoint { task: String, wanted: String },
    /// A running app did not answer a request (checkpoint, handover) in time.
    #[error("task {task} did not {what} within {secs} s; is the app running?")]
    NoAnswer {
        task: String,
        what: String,
        secs: u64,
    },
    /// A rebuild could not be completed or swapped in; the live state is
    /// untouched.
    #[error("rebuild of task {task}: {reason}")]
    Rebuild { task: String, reason: String },
    /// Serving the Kafka protocol from the app failed to start (the
    /// broker's error).
    #[error("serving the Kafka protocol on {addr}: {error}; pick a free address for --serve")]
    Serve {
        addr: String,
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `--serve` in an app built without the broker.
    #[error(
        "cannot serve the Kafka protocol on {addr}: this app was built without the broker; depend on the `strata` crate, or turn on strata-runtime's `serve` feature"
    )]
    ServeNotBuilt { addr: String },
    /// A file the runtime keeps in a state directory is not readable.
    #[error("{path} is not readable: {reason}; it is the runtime's own file, restore or remove it")]
    BadFile { path: PathBuf, reason: String },
    /// An HTTP endpoint (`--metrics`, `--query`) cannot be served as
    /// configured: an address beyond loopback without TLS and a token, or
    /// a TLS or token file that does not load.
    #[error(transparent)]
    Http(#[from] strata_http::AccessError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Client(ClientError),
    /// The cluster's ACLs refuse the app's user something the app needs
    /// (`error` is the broker's TOPIC_, GROUP_, CLUSTER_ or
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED); `concerning` names the task
    /// or group when known. Retrying cannot help, so the run stops.
    #[error("{}not authorized: {error}; {}; an administrator adds ACLs with `strata acls add`", prefix(.concerning), acl_needed(.error))]
    NotAuthorized {
        concerning: String,
        error: ClientError,
    },
    /// A remote task's committed positions in its positions log and its
    /// group's committed offsets disagree, though every transaction writes
    /// both: the group's were changed from outside.
    #[error(
        "task {task}: the positions in {log} are {in_log}, but group {group} has {in_group}; the app writes both in one transaction, so the group's offsets were changed from outside, or written by an older version of the app (without positions logs) running beside this one. A reset: delete the group's offsets (`strata groups delete {group}` while the app is stopped) to go on from the positions, or replay into a new version to run from other offsets (`replay --version V --from ...`). An older version: stop it, delete the positions log (the topic of {log}) while the app is stopped, and start again: the group's offsets are taken"
    )]
    PositionsDisagree {
        task: String,
        log: String,
        in_log: String,
        group: String,
        in_group: String,
    },
    /// A processor returned an error; its run was not committed.
    #[error("processor {processor:?} failed on {topic}/{partition} at offset {offset}: {error}")]
    Processor {
        processor: String,
        topic: String,
        partition: i32,
        offset: i64,
        error: ProcessError,
    },
    /// More records failed in a minute than the processor's error policy
    /// diverts: the task stops rather than divert every record.
    #[error(
        "more than {limit} records failed within a minute, the last {at}: {last}; the processor looks broken: fix it and run again, or raise the limit with OnError::at_most_per_minute"
    )]
    TooManyFailures {
        /// Where the last failing record is: topic/partition at offset.
        at: String,
        limit: u32,
        last: String,
    },
    /// A processor's `on_timer` returned an error; its run was not
    /// committed (the timer fires again when the task runs next).
    #[error("processor {processor:?} failed on its timer ({timer}) in task {task}: {error}")]
    Timer {
        processor: String,
        task: String,
        timer: String,
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
    /// Records a command must read whole are held back by a transaction
    /// still open.
    #[error(
        "{topic}/{partition}: offsets {at} to {end} are in a transaction still open (most likely a killed task's; the cluster ends it within its timeout, 60 s for the runtime's): run the command again then"
    )]
    Unsettled {
        topic: String,
        partition: i32,
        at: i64,
        end: i64,
    },
    /// A remote task kept failing for want of the cluster longer than it
    /// may wait.
    #[error(
        "task {task} could not reach the cluster for {secs} s, starting again after each failure: {error}; check the brokers and the topic's leaders"
    )]
    ClusterAway {
        task: String,
        secs: u64,
        error: ClientError,
    },
    #[error("task {task}: shipping to {topic}/{partition}: {error}")]
    Ship {
        task: String,
        topic: String,
        partition: i32,
        #[source]
        error: ShipError,
    },
    /// Another instance took the task over: its transactional id has a
    /// newer epoch, so nothing more this instance writes for it can commit.
    #[error(
        "task {task} was fenced: another instance of the app took it over (its transactional id {transactional_id:?} has a newer producer); this instance gives the task up, and its uncommitted work is redone by the new owner"
    )]
    Fenced {
        task: String,
        transactional_id: String,
    },
    /// The app's group cannot share its tasks (its leader says why, or a
    /// member cannot run what it was given).
    #[error("group {group}: {reason}")]
    Group { group: String, reason: String },
    /// A task's state could not be restored from its changelogs.
    #[error("task {task}: restoring {store} from {topic}/{partition}: {error}")]
    Restore {
        task: String,
        store: String,
        topic: String,
        partition: i32,
        #[source]
        error: RestoreError,
    },
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
}

/// Why a task's outbox batch (or positions record) could not be shipped.
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    /// The append failed: on the embedded log, or on the cluster.
    #[error(transparent)]
    Append(Box<RuntimeError>),
    /// The cluster answered the transaction's produce with an error.
    #[error(transparent)]
    Client(Box<ClientError>),
    /// The batch could not be built or stamped with the task's producer.
    #[error(transparent)]
    Batch(Box<RecordError>),
}

impl From<ClientError> for ShipError {
    fn from(error: ClientError) -> Self {
        Self::Client(Box::new(error))
    }
}

impl From<RecordError> for ShipError {
    fn from(error: RecordError) -> Self {
        Self::Batch(Box::new(error))
    }
}

/// What in an input batch does not read.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// The batch: its framing, CRC or compression.
    #[error(transparent)]
    Batch(Box<RecordError>),
    /// One of its records.
    #[error("a record: {0}")]
    Record(Box<RecordError>),
    /// A positions record that does not read as one.
    #[error(transparent)]
    Positions(#[from] PositionsError),
}

/// Why a record of a positions log does not read as positions.
#[derive(Debug, thiserror::Error)]
pub enum PositionsError {
    #[error("not positions ({0}); something other than strata wrote to the positions log")]
    NotPositions(#[source] serde_json::Error),
    #[error(
        "positions of format {found}, which this version does not read (it reads {reads}); run the strata version that wrote them, or a newer one"
    )]
    Format { found: u32, reads: u32 },
    #[error("positions with a lineage of {0:?}, which is not hexadecimal")]
    Lineage(String),
}

impl Unreadable {
    pub(crate) fn batch(error: RecordError) -> Self {
        Self::Batch(Box::new(error))
    }

    pub(crate) fn record(error: RecordError) -> Self {
        Self::Record(Box::new(error))
    }
}

/// Why a changelog could not be read into a task's state.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A fetch moved nowhere although the partition goes on.
    #[error("no progress at offset {offset} (the partition ends at {end})")]
    NoProgress { offset: i64, end: i64 },
    /// A batch or record that does not read.
    #[error("offset {offset}: {error}")]
    Unreadable {
        offset: i64,
        #[source]
        error: Box<RecordError>,
    },
    /// A changelog record without a key: not written by strata.
    #[error("offset {offset}: a record without a key; the topic is not this store's changelog")]
    NoKey { offset: i64 },
}

impl From<LayoutError> for RuntimeError {
    fn from(error: LayoutError) -> Self {
        match error {
            LayoutError::Locked { path, why } => Self::Locked { path, why },
            LayoutError::Io { context, error } => Self::Io { context, error },
            LayoutError::Log(error) => Self::Log(error),
        }
    }
}

/// A refusal of the cluster's ACLs is [`RuntimeError::NotAuthorized`].
impl From<ClientError> for RuntimeError {
    fn from(error: ClientError) -> Self {
        if error.is_authorization_failure() {
            Self::NotAuthorized {
                concerning: String::new(),
                error,
            }
        } else {
            Self::Client(error)
        }
    }
}

fn prefix(concerning: &str) -> String {
    if concerning.is_empty() {
        String::new()
    } else {
        format!("{concerning}: ")
    }
}

/// The ACLs an app's user needs, for the kind of resource refused.
fn acl_needed(error: &ClientError) -> &'static str {
    match error.code() {
        Some(codes::TOPIC_AUTHORIZATION_FAILED) => {
            "the app's user needs READ on the topics the app reads, WRITE on those it writes (its outputs, internal and changelog topics) and CREATE for those it creates"
        }
        Some(codes::GROUP_AUTHORIZATION_FAILED) => {
            "the app's user needs READ on the app's consumer groups (`<app>` and `<app>-<processor>`, `<app>` with a replayed version's suffix)"
        }
        Some(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED) => {
            "the app's user needs WRITE on the app's transactional ids (`<app>-<processor>-<partition>`, `<app>` with a replayed version's suffix)"
        }
        _ => "the app's user needs an ACL on the cluster for this",
    }
}

impl RuntimeError {
    /// `self`, naming what it concerns (a task, a group) if it is a
    /// refusal of the ACLs that does not say yet.
    pub(crate) fn concerning(self, what: impl FnOnce() -> String) -> Self {
        match self {
            Self::NotAuthorized { concerning, error } if concerning.is_empty() => {
                Self::NotAuthorized {
                    concerning: what(),
                    error,
                }
            }
            other => other,
        }
    }

    /// Whether the cluster could not be reached, or was not ready, for as
    /// long as the client retried (see [`ClientError::is_unavailable`]):
    /// waiting for it may help, unlike any other failure.
    pub fn is_cluster_unavailable(&self) -> bool {
        matches!(self, Self::Client(error) if error.is_unavailable())
    }

    /// An I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |error| Self::Io { context, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(code: i16) -> ClientError {
        ClientError::Kafka {
            code,
            topic: Some("lines".into()),
            partition: Some(0),
            message: None,
        }
    }

    #[test]
    fn a_refusal_of_the_acls_says_so_and_what_the_app_needs() {
        let error = RuntimeError::from(kafka(codes::TOPIC_AUTHORIZATION_FAILED));
        assert!(matches!(error, RuntimeError::NotAuthorized { .. }));
        let text = error.concerning(|| "task split/0".into()).to_string();
        assert!(
            text.starts_with(
                "task split/0: not authorized: lines/0: TopicAuthorizationFailed (Kafka error 29); the app's user needs READ"
            ),
            "{text}"
        );
        assert!(text.ends_with("`strata acls add`"), "{text}");
    }

    #[test]
    fn a_ship_error_keeps_the_client_error_it_came_from() {
        let error = RuntimeError::Ship {
            task: "count/0".into(),
            topic: "word-counts".into(),
            partition: 0,
            error: kafka(codes::UNKNOWN_TOPIC_OR_PARTITION).into(),
        };
        let source = std::error::Error::source(&error).expect("a source");
        let ship = source.downcast_ref::<ShipError>().expect("a ShipError");
        let ShipError::Client(client) = ship else {
            panic!("{ship:?}");
        };
        assert!(
            matches!(**client, ClientError::Kafka { code, .. } if code == codes::UNKNOWN_TOPIC_OR_PARTITION)
        );
        assert!(
            error
                .to_string()
                .starts_with("task count/0: shipping to word-counts/0: "),
            "{error}"
        );
    }

    #[test]
    fn an_unreadable_batch_keeps_the_record_error_and_says_what_did_not_read() {
        let truncated = strata_record::RecordBatch::parse_and_verify(&[0u8; 10]).unwrap_err();
        let error = RuntimeError::UnreadableBatch {
            topic: "lines".into(),
            partition: 0,
            offset: 7,
            error: Unreadable::record(truncated),
        };
        let text = error.to_string();
        assert!(
            text.starts_with("lines/0 at offset 7: unreadable batch (a record: "),
            "{text}"
        );
        let source = std::error::Error::source(&error).expect("a source");
        let unreadable = source.downcast_ref::<Unreadable>().expect("an Unreadable");
        assert!(
            matches!(unreadable, Unreadable::Record(_)),
            "{unreadable:?}"
        );
    }

    #[test]
    fn only_a_cluster_away_or_not_ready_is_waited_for() {
        let unreachable = ClientError::Unreachable {
            addr: "127.0.0.1:9092".into(),
            error: std::io::ErrorKind::ConnectionRefused.into(),
        };
        let waited = |error: ClientError| RuntimeError::from(error).is_cluster_unavailable();
        assert!(waited(unreachable));
        assert!(waited(kafka(codes::NOT_LEADER_OR_FOLLOWER)));
        assert!(waited(kafka(codes::COORDINATOR_NOT_AVAILABLE)));
        assert!(waited(kafka(codes::NOT_ENOUGH_REPLICAS)));
        assert!(waited(kafka(codes::CONCURRENT_TRANSACTIONS)));
        assert!(!waited(kafka(codes::UNKNOWN_TOPIC_OR_PARTITION)));
        assert!(!waited(kafka(codes::TOPIC_AUTHORIZATION_FAILED)));
        assert!(!waited(kafka(codes::INVALID_PRODUCER_EPOCH)));
        assert!(!waited(ClientError::Invalid("a bad setting".into())));
        assert!(!RuntimeError::Config("bad".into()).is_cluster_unavailable());
    }

    #[test]
    fn what_a_refusal_concerns_is_named_once_and_other_errors_keep_theirs() {
        let named = RuntimeError::from(kafka(codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            .concerning(|| "task count/0 (transactional id wordcount-count-0)".into())
            .concerning(|| "task count/0".into());
        assert!(
            named
                .to_string()
                .starts_with("task count/0 (transactional id wordcount-count-0): not authorized"),
            "{named}"
        );
        let other = RuntimeError::from(kafka(codes::NOT_LEADER_OR_FOLLOWER))
            .concerning(|| "task count/0".into());
        assert!(matches!(other, RuntimeError::Client(_)), "{other}");
    }
}
