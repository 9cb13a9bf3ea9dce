//! Client errors: typed, with the Kafka error code and what they concern.

use std::sync::Arc;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The broker answered with a Kafka error code.
    #[error("{}{} (Kafka error {code}){}", concerning(.topic, *.partition), code_name(*.code), message_suffix(.message))]
    Kafka {
        code: i16,
        topic: Option<String>,
        partition: Option<i32>,
        message: Option<String>,
    },
    /// A fetch asked for an offset outside the partition's retained range.
    #[error("offset {offset} is out of range for {topic}/{partition}")]
    OffsetOutOfRange {
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// No broker could be reached.
    #[error("cannot reach a broker ({addr}): {error}")]
    Unreachable { addr: String, error: std::io::Error },
    /// The connection failed while a request was in flight (`why` is in
    /// the message, so it is not also given as the source: a chain printed
    /// whole would say it twice).
    #[error("connection to {addr} failed: {why}")]
    Disconnected { addr: String, why: Broken },
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout {
        addr: String,
        timeout: std::time::Duration,
    },
    #[error("the broker at {addr} supports no version of {api} this client speaks")]
    UnsupportedApi { addr: String, api: String },
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// A broker the metadata named (as a leader or coordinator) but did not
    /// list: down, or not yet known to the broker that answered.
    #[error("broker {0} is not among the brokers the metadata lists")]
    UnknownBroker(i32),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("the client is closed")]
    Closed,
    /// Security settings that cannot be used (a missing CA, an unreadable
    /// key); never quotes a password.
    #[error("security settings: {0}")]
    Security(String),
    /// The TLS handshake failed (an untrusted certificate, say): `reason`
    /// says what to check, `error` is the handshake's own.
    #[error("TLS with {addr} failed: {reason}")]
    Tls {
        addr: String,
        reason: String,
        #[source]
        error: Arc<std::io::Error>,
    },
    /// The broker refused the SASL login; `message` is the broker's.
    #[error("authentication failed for user {user}: {message}")]
    Authentication { user: String, message: String },
}

/// Why a connection was given up with requests on it; each request
/// waiting on it hears the same (hence the shared I/O errors, shown in
/// the message).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Broken {
    #[error("cannot connect: {0}")]
    Connect(Arc<std::io::Error>),
    #[error("writing a request: {0}")]
    Write(Arc<std::io::Error>),
    #[error("reading a response: {0}")]
    Read(Arc<std::io::Error>),
    /// A response frame of a size no broker sends (negative, or past the
    /// client's limit).
    #[error("a response of {size} bytes (at most {limit} are read)")]
    ResponseSize { size: i64, limit: usize },
    #[error("a response nobody asked for")]
    Unasked,
    /// The connection ended with the request unanswered.
    #[error("the connection closed")]
    Closed,
    /// An earlier request found the connection broken.
    #[error("the connection failed earlier")]
    FailedEarlier,
}

impl ClientError {
    pub fn kafka(code: i16, topic: Option<&str>, partition: Option<i32>) -> Self {
        Self::Kafka {
            code,
            topic: topic.map(str::to_string),
            partition,
            message: None,
        }
    }

    pub(crate) fn with_message(mut self, text: Option<&str>) -> Self {
        if let Self::Kafka { message, .. } = &mut self {
            *message = text.filter(|t| !t.is_empty()).map(str::to_string);
        }
        self
    }

    /// The same failure again, for each of several waiters (an I/O error
    /// cannot be cloned: an unreachable broker is reported as a lost
    /// connection, which is retriable just the same).
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            Self::Kafka {
                code,
                topic,
                partition,
                message,
            } => Self::Kafka {
                code: *code,
                topic: topic.clone(),
                partition: *partition,
                message: message.clone(),
            },
            Self::OffsetOutOfRange {
                topic,
                partition,
                offset,
            } => Self::OffsetOutOfRange {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            },
            Self::Unreachable { addr, error } => Self::Disconnected {
                addr: addr.clone(),
                why: Broken::Connect(Arc::new(std::io::Error::new(
                    error.kind(),
                    error.to_string(),
                ))),
            },
            Self::Disconnected { addr, why } => Self::Disconnected {
                addr: addr.clone(),
                why: why.clone(),
            },
            Self::Timeout { addr, timeout } => Self::Timeout {
                addr: addr.clone(),
                timeout: *timeout,
            },
            Self::UnsupportedApi { addr, api } => Self::UnsupportedApi {
                addr: addr.clone(),
                api: api.clone(),
            },
            Self::UnknownTopic(topic) => Self::UnknownTopic(topic.clone()),
            Self::UnknownBroker(node) => Self::UnknownBroker(*node),
            Self::Protocol(text) => Self::Protocol(text.clone()),
            Self::Invalid(text) => Self::Invalid(text.clone()),
            Self::Closed => Self::Closed,
            Self::Security(text) => Self::Security(text.clone()),
            Self::Tls {
                addr,
                reason,
                error,
            } => Self::Tls {
                addr: addr.clone(),
                reason: reason.clone(),
                error: Arc::clone(error),
            },
            Self::Authentication { user, message } => Self::Authentication {
                user: user.clone(),
                message: message.clone(),
            },
        }
    }

    /// The same failure, reported for one partition of a request that
    /// failed as a whole.
    pub(crate) fn for_partition(&self, topic: &str, partition: i32) -> Self {
        match self {
            Self::Kafka { code, message, .. } => {
                Self::kafka(*code, Some(topic), Some(partition)).with_message(message.as_deref())
            }
            other => other.duplicate(),
        }
    }

    /// The Kafka error code, if the broker sent one.
    pub fn code(&self) -> Option<i16> {
        match self {
            Self::Kafka { code, .. } => Some(*code),
            Self::OffsetOutOfRange { .. } => Some(codes::OFFSET_OUT_OF_RANGE),
            _ => None,
        }
    }

    /// Whether metadata may be stale (leadership moved, a topic was
    /// re-created, a broker went away): refresh and retry.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Kafka { code, .. } => codes::is_retriable(*code),
            Self::UnknownBroker(_) => true,
            _ => self.is_connection_failure(),
        }
    }

    /// Whether the cluster was away or not ready for as long as the client
    /// retried: no broker reachable, or no leader or coordinator in
    /// place (a broker restarting, a network cut). Waiting may help; a
    /// topic that is gone, a refusal or a bad request is not this.
    pub fn is_unavailable(&self) -> bool {
        self.is_retriable()
            && !matches!(
                self.code(),
                Some(codes::UNKNOWN_TOPIC_OR_PARTITION | codes::UNKNOWN_TOPIC_ID)
            )
    }

    /// Whether the broker's ACLs refused the call (TOPIC_, GROUP_,
    /// CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED): asking again
    /// cannot help until an administrator adds an ACL.
    pub fn is_authorization_failure(&self) -> bool {
        self.code().is_some_and(codes::is_authorization_failure)
    }

    /// Whether the connection, not the broker's answer, failed: the
    /// request may be sent again on a new connection.
    pub fn is_connection_failure(&self) -> bool {
        matches!(
            self,
            Self::Disconnected { .. } | Self::Timeout { .. } | Self::Unreachable { .. }
        )
    }
}

/// `topic/partition: `, `topic: `, or nothing when the error concerns no
/// topic (a group's or a transaction's).
fn concerning(topic: &Option<String>, partition: Option<i32>) -> String {
    match (topic, partition) {
        (Some(topic), Some(partition)) => format!("{topic}/{partition}: "),
        (Some(topic), None) => format!("{topic}: "),
        (None, _) => String::new(),
    }
}

fn message_suffix(message: &Option<String>) -> String {
    message
        .as_deref()
        .map_or_else(String::new, |m| format!(": {m}"))
}

/// Kafka's error codes the client acts on, and names for messages.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const REPLICA_NOT_AVAILABLE: i16 = 9;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    pub const PRODUCER_FENCED: i16 = 90;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const RESOURCE_NOT_FOUND: i16 = 91;

    /// Errors that go away after a metadata refresh or a pause.
    pub fn is_retriable(code: i16) -> bool {
        matches!(
            code,
            UNKNOWN_TOPIC_OR_PARTITION
                | LEADER_NOT_AVAILABLE
                | NOT_LEADER_OR_FOLLOWER
                | REQUEST_TIMED_OUT
                | COORDINATOR_LOAD_IN_PROGRESS
                | COORDINATOR_NOT_AVAILABLE
                | NOT_COORDINATOR
                | NOT_ENOUGH_REPLICAS
                | NOT_ENOUGH_REPLICAS_AFTER_APPEND
                | FENCED_LEADER_EPOCH
                | UNKNOWN_LEADER_EPOCH
                | UNKNOWN_TOPIC_ID
                | CONCURRENT_TRANSACTIONS
                | UNSTABLE_OFFSET_COMMIT
        )
    }

    /// The refusals of the broker's ACLs, one per kind of resource.
    pub fn is_authorization_failure(code: i16) -> bool {
        matches!(
            code,
            TOPIC_AUTHORIZATION_FAILED
                | GROUP_AUTHORIZATION_FAILED
                | CLUSTER_AUTHORIZATION_FAILED
                | TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    }
}

/// Kafka's name for an error code.
pub fn code_name(code: i16) -> String {
    kafka_protocol::ResponseError::try_from_code(code)
        .map_or_else(|| format!("error {code}"), |e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::ClientError;

    #[test]
    fn an_error_says_the_topic_and_partition_it_concerns_and_nothing_when_none() {
        let error = |topic: Option<&str>, partition| ClientError::Kafka {
            code: 26,
            topic: topic.map(str::to_string),
            partition,
            message: None,
        };
        assert_eq!(
            error(None, None).to_string(),
            "InvalidSessionTimeout (Kafka error 26)"
        );
        assert_eq!(
            error(Some("t"), Some(3)).to_string(),
            "t/3: InvalidSessionTimeout (Kafka error 26)"
        );
        assert_eq!(
            error(Some("t"), None).to_string(),
            "t: InvalidSessionTimeout (Kafka error 26)"
        );
    }
}
