//! Broker errors, and the one place log errors become Kafka error codes.

use strata_log::LogError;

/// Why a connection or the server failed.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    #[error("request frame of {size} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge { size: i64, limit: usize },
    #[error("malformed request: {0}")]
    Malformed(String),
    /// A request for an API this broker does not serve.
    #[error(
        "client {client_id:?} asked for API key {api} ({name}) version {version}, \
         which this broker does not serve"
    )]
    UnknownApi {
        api: i16,
        name: String,
        version: i16,
        client_id: String,
    },
    /// A request for a served API at a version outside the served range.
    #[error(
        "client {client_id:?} asked for {name} (API key {api}) version {version}; \
         this broker serves versions {min} to {max}"
    )]
    UnsupportedVersion {
        api: i16,
        name: String,
        version: i16,
        min: i16,
        max: i16,
        client_id: String,
    },
    #[error("invalid broker configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Acl(#[from] crate::acl::AclError),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl BrokerError {
    /// Whether the client asked for an API or a version the broker does not
    /// serve: the one reason to close a connection that the user of the
    /// client must see to fix (upgrade or configure the client), so it is
    /// logged at warn rather than debug.
    pub fn is_unserved_request(&self) -> bool {
        matches!(
            self,
            Self::UnknownApi { .. } | Self::UnsupportedVersion { .. }
        )
    }
}

/// Kafka's numbered error codes (a stable wire contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i16)]
pub enum ErrorCode {
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    MessageTooLarge = 10,
    OffsetMetadataTooLarge = 12,
    CoordinatorNotAvailable = 15,
    InvalidTopicException = 17,
    InvalidRequiredAcks = 21,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    RecordListTooLarge = 18,
    UnsupportedSaslMechanism = 33,
    IllegalSaslState = 34,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    TopicAuthorizationFailed = 29,
    GroupAuthorizationFailed = 30,
    ClusterAuthorizationFailed = 31,
    InvalidRequest = 42,
    UnsupportedForMessageFormat = 43,
    PolicyViolation = 44,
    OutOfOrderSequenceNumber = 45,
    DuplicateSequenceNumber = 46,
    InvalidProducerEpoch = 47,
    InvalidTxnState = 48,
    InvalidProducerIdMapping = 49,
    InvalidTransactionTimeout = 50,
    ConcurrentTransactions = 51,
    TransactionalIdAuthorizationFailed = 53,
    OperationNotAttempted = 55,
    UnstableOffsetCommit = 88,
    TransactionalIdNotFound = 105,
    KafkaStorageError = 56,
    NonEmptyGroup = 68,
    GroupIdNotFound = 69,
    UnsupportedCompressionType = 76,
    MemberIdRequired = 79,
    FencedInstanceId = 82,
    InvalidRecord = 87,
    SaslAuthenticationFailed = 58,
    UnknownProducerId = 59,
    ProducerFenced = 90,
    UnknownTopicId = 100,
    InvalidConfig = 40,
    ResourceNotFound = 91,
    DuplicateResource = 92,
    UnacceptableCredential = 93,
    UnknownServerError = -1,
}

impl ErrorCode {
    pub fn code(self) -> i16 {
        self as i16
    }

    /// The error for a topic that is not there: by id (requests that name
    /// topics by id, such as Fetch v13+) or by name.
    pub fn unknown_topic(by_id: bool) -> Self {
        if by_id {
            Self::UnknownTopicId
        } else {
            Self::UnknownTopicOrPartition
        }
    }
}

impl From<&LogError> for ErrorCode {
    fn from(error: &LogError) -> Self {
        use strata_record::RecordError;
        match error {
            LogError::OffsetOutOfRange { .. } => Self::OffsetOutOfRange,
            LogError::UnknownTopic(_) | LogError::UnknownPartition { .. } => {
                Self::UnknownTopicOrPartition
            }
            LogError::InvalidBatch(RecordError::UnsupportedMagic { .. }) => {
                Self::UnsupportedForMessageFormat
            }
            LogError::InvalidBatch(RecordError::TooLarge { .. }) => Self::MessageTooLarge,
            LogError::InvalidBatch(RecordError::UnknownCompression { .. }) => {
                Self::UnsupportedCompressionType
            }
            // Well-formed and CRC-valid, but its records are wrong: resending
            // will not help, unlike a CORRUPT_MESSAGE.
            LogError::InvalidBatch(
                RecordError::Invalid(_) | RecordError::MalformedRecord { .. },
            ) => Self::InvalidRecord,
            LogError::InvalidBatch(_) => Self::CorruptMessage,
            LogError::BatchTooLarge { .. } => Self::MessageTooLarge,
            LogError::TopicExists(_) => Self::TopicAlreadyExists,
            LogError::InvalidTopicName { .. } => Self::InvalidTopicException,
            LogError::InvalidPartitionCount(_) => Self::InvalidPartitions,
            LogError::InvalidConfig { .. } => Self::InvalidConfig,
            LogError::ReadOnly { .. } | LogError::Corrupt { .. } | LogError::Io { .. } => {
                Self::KafkaStorageError
            }
            LogError::BadMetadata { .. } | LogError::ProducerIdsExhausted => {
                Self::UnknownServerError
            }
            LogError::InvalidProducerEpoch { .. } => Self::InvalidProducerEpoch,
            // Every InitProducerId version knows INVALID_PRODUCER_EPOCH; the
            // handler answers PRODUCER_FENCED where the version has it.
            LogError::ProducerFenced { .. } => Self::InvalidProducerEpoch,
            LogError::OutOfOrderSequence { .. } => Self::OutOfOrderSequenceNumber,
            LogError::DuplicateSequence { .. } => Self::DuplicateSequenceNumber,
            // The partition is in no transaction, and cannot be: the APIs
            // that add partitions to one are not served. Kafka answers a
            // transactional batch for a partition outside any transaction
            // (KIP-890 verification) with INVALID_TXN_STATE. UNSUPPORTED_VERSION
            // would send the client looking for a protocol mismatch, and
            // TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a missing ACL.
            LogError::UnkeyedRecord { .. } => Self::InvalidRecord,
            LogError::InvalidTransactionalId { .. } => Self::InvalidRequest,
            LogError::TransactionalIdsFull { .. } => Self::PolicyViolation,
        }
    }
}
