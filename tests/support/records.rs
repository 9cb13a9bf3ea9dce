//! Building record batches and reading them back as plain records.

use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

/// Every codec a batch can use.
pub const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// The timestamp of records whose time does not matter.
pub const TIMESTAMP_MS: i64 = 1_700_000_000_000;

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

/// A batch of one record.
pub fn one_record(value: &[u8], timestamp: i64) -> Vec<u8> {
    batch_with(Compression::None, [(None, value, timestamp)])
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

/// One batch of `values` (at [`TIMESTAMP_MS`]) from the idempotent
/// producer `(id, epoch)`, its sequences numbered from `first_sequence`.
pub fn producer_batch(
    compression: Compression,
    (id, epoch): (i64, i16),
    first_sequence: i32,
    values: &[impl AsRef<[u8]>],
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression).producer(id, epoch, first_sequence);
    for value in values {
        builder
            .push(NewRecord::new(None, value.as_ref(), TIMESTAMP_MS))
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}

/// `bytes` (concatenated batches) as the log stores them when it assigns
/// them offsets from `base_offset`: each baseOffset rewritten, nothing else.
pub fn as_stored(bytes: &[u8], base_offset: i64) -> Vec<u8> {
    let mut stored = bytes.to_vec();
    let (mut position, mut next) = (0, base_offset);
    while position < stored.len() {
        let batch = RecordBatch::parse_and_verify(&stored[position..]).expect("valid batch");
        let (size, delta) = (batch.size_bytes(), batch.header().last_offset_delta);
        strata::record::set_base_offset(&mut stored[position..], next);
        next += i64::from(delta) + 1;
        position += size;
    }
    stored
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

/// The records a `read_committed` reader sees in `bytes` (whole batches in
/// log order): no markers, and a transaction's records only once its
/// COMMIT marker is there (then in log order per producer); an aborted or
/// still open transaction's never.
pub fn decode_committed(mut bytes: &[u8]) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut open: std::collections::HashMap<i64, Vec<Stored>> = Default::default();
    while !bytes.is_empty() {
        let batch = RecordBatch::parse_and_verify(bytes).expect("valid batch");
        bytes = &bytes[batch.size_bytes()..];
        let header = *batch.header();
        if header.is_control() {
            let marker = strata::record::ControlRecord::of(&batch).expect("a marker");
            let records = open.remove(&header.producer_id).unwrap_or_default();
            if marker.kind == strata::record::MarkerKind::Commit {
                out.extend(records);
            }
            continue;
        }
        let target = if header.is_transactional() {
            open.entry(header.producer_id).or_default()
        } else {
            &mut out
        };
        target.extend(decode(batch.as_bytes()));
    }
    out
}

/// The values of `records`, as text.
pub fn values(records: &[Stored]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().expect("a value")).expect("UTF-8 value"))
        .collect()
}
