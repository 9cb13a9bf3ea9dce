//! Record batches built valid, then damaged field by field (the layout is
//! drawn in crates/record/src/header.rs), and pre-v2 message sets.

use super::*;

// Record batch fields.
pub(crate) const LENGTH_AT: usize = 8;
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
pub(crate) const CRC_COVERS_FROM: usize = 21;
pub(crate) const ATTRIBUTES_AT: usize = 21;
pub(crate) const PRODUCER_ID_AT: usize = 43;
pub(crate) const BASE_SEQUENCE_AT: usize = 53;
pub(crate) const RECORD_COUNT_AT: usize = 57;
pub(crate) const TRANSACTIONAL_BIT: u8 = 1 << 4;

/// A record to build a batch of: key, value, timestamp.
type NewRecord = (Option<&'static [u8]>, &'static [u8], i64);

pub(crate) fn records() -> Vec<NewRecord> {
    vec![
        (Some(&b"k1"[..]), &b"one"[..], TIMESTAMP_MS),
        (None, &b"two"[..], TIMESTAMP_MS + 1),
        (Some(&b"k3"[..]), &b"three"[..], TIMESTAMP_MS + 2),
    ]
}

/// A valid uncompressed batch of three records.
pub(crate) fn three_records() -> Vec<u8> {
    batch_with(Compression::None, records())
}

/// A batch of `three_records`' header with `payload` as its (compressed)
/// records, marked with `codec`, length and CRC made right.
pub(crate) fn with_payload(codec: Compression, payload: &[u8]) -> Vec<u8> {
    let mut batch = three_records()[..BATCH_HEADER_BYTES].to_vec();
    batch[ATTRIBUTES_AT + 1] = (batch[ATTRIBUTES_AT + 1] & !0x07) | codec_bits(codec);
    batch.extend_from_slice(payload);
    fix_length(&mut batch);
    reseal(batch)
}

pub(crate) fn codec_bits(codec: Compression) -> u8 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// Sets batchLength to the bytes after it.
pub(crate) fn fix_length(batch: &mut [u8]) {
    let length = (batch.len() - LENGTH_AT - 4) as i32;
    batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
}

/// Recomputes the CRC, so the damage reaches the checks after it.
pub(crate) fn reseal(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c(&batch[CRC_COVERS_FROM..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// A legacy message's value: long enough that the message set is as long as
/// a v2 batch header, so it is read as far as its magic.
pub(crate) const LEGACY_VALUE: &[u8] = &[b'v'; 64];

/// A pre-v2 message set of one message (`magic` 0 or 1): offset, size,
/// CRC, magic, attributes, (v1: timestamp), null key, value.
pub(crate) fn legacy_message_set(magic: u8) -> Vec<u8> {
    let mut message = vec![magic, 0];
    if magic == 1 {
        message.extend_from_slice(&TIMESTAMP_MS.to_be_bytes());
    }
    message.extend_from_slice(&(-1i32).to_be_bytes());
    message.extend_from_slice(&(LEGACY_VALUE.len() as i32).to_be_bytes());
    message.extend_from_slice(LEGACY_VALUE);
    let crc = crc32c(&message);
    let mut set = 0i64.to_be_bytes().to_vec();
    set.extend_from_slice(&((message.len() + 4) as i32).to_be_bytes());
    set.extend_from_slice(&crc.to_be_bytes());
    set.extend_from_slice(&message);
    set
}

pub(crate) fn rng_bytes(seed: u64, len: usize) -> Vec<u8> {
    support::rng::Rng(seed).bytes(len)
}
