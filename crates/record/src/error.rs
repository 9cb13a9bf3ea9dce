//! Errors raised while reading or building record batches. Each names the
//! field or condition that failed so an operator can tell a torn write from a
//! bad client from a corrupted disk.

/// What is wrong with a record batch.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than the batch header or the declared batch length needs.
    #[error("truncated record batch: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    /// The batchLength field is impossible (negative or below the header size).
    #[error("invalid batch length {length} (must be at least {minimum})")]
    InvalidLength { length: i32, minimum: usize },
    /// The batch is larger than the configured limit.
    #[error("record batch of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// Magic byte other than 2: v0/v1 message sets are not supported.
    #[error("unsupported record batch magic {magic} (only v2 is supported)")]
    UnsupportedMagic { magic: i8 },
    /// The CRC32C stored in the header does not match the bytes.
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// Compression codec id 5..7.
    #[error("unknown compression codec id {id}")]
    UnknownCompression { id: i16 },
    /// The decompressor rejected the payload.
    #[error("cannot decompress {codec} batch payload: {reason}")]
    Decompress { codec: &'static str, reason: String },
    /// A header field is inconsistent with the records or with another field.
    #[error("invalid record batch: {0}")]
    Invalid(String),
    /// A record inside the batch is malformed.
    #[error("malformed record {index} of the batch: {reason}")]
    MalformedRecord { index: usize, reason: String },
    /// Building a batch failed.
    #[error("cannot build record batch: {0}")]
    Build(String),
}
