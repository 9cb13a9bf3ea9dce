//! Helpers shared by the integration tests: building batches and reading a
//! partition back as plain records.

#![allow(dead_code, reason = "each test file uses a different subset")]

use strata::log::{LogConfig, PartitionLog};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

/// A record as read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// One batch of `values`, all with `timestamp`, uncompressed.
pub fn batch(values: &[&str], timestamp: i64) -> Vec<u8> {
    batch_with(
        Compression::None,
        values.iter().map(|v| (None, v.as_bytes(), timestamp)),
    )
}

/// One batch of (key, value, timestamp) records with the given codec.
pub fn batch_with<'a>(
    compression: Compression,
    records: impl IntoIterator<Item = (Option<&'a [u8]>, &'a [u8], i64)>,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression);
    for (key, value, timestamp) in records {
        builder
            .push(NewRecord::new(key, value, timestamp))
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}

/// A config with tiny segments and a dense index, so few records exercise
/// rolling and index lookups.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Every record from `offset` to the log end, decoded.
pub fn read_all(log: &PartitionLog, offset: i64) -> Vec<Stored> {
    let bytes = log
        .read(offset, u64::MAX)
        .expect("read succeeds")
        .read_to_vec()
        .expect("slices read");
    decode(&bytes)
}

/// Decodes concatenated batches, checking every CRC.
pub fn decode(mut bytes: &[u8]) -> Vec<Stored> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let batch = RecordBatch::parse_and_verify(bytes).expect("valid batch");
        for record in batch.records(64 << 20).expect("records decode").iter() {
            let record = record.expect("record decodes");
            out.push(Stored {
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.map(<[u8]>::to_vec),
                value: record.value.map(<[u8]>::to_vec),
            });
        }
        bytes = &bytes[batch.size_bytes()..];
    }
    out
}
