//! Rewriting a batch with some of its records: what log compaction writes
//! in place of a batch whose older records lost to newer ones.
//!
//! Everything that readers and the producer state rely on stays as it was:
//! the base offset, `lastOffsetDelta` (so the next batch still starts where
//! it did, and offsets keep their values with gaps where records went), the
//! producer id, epoch and base sequence, the attributes (codec,
//! transactional, control) and the timestamps. Each kept record is copied
//! byte for byte (its offset and timestamp deltas are from the same base).
//! Only the record count, the length, the payload (compressed again with
//! the batch's codec) and the CRC change. A batch may keep no record at all:
//! compaction keeps such an empty batch when it is its producer's last, so
//! the producer's sequence survives.

use super::batch::seal_crc;
use super::header::{BATCH_HEADER_BYTES, HeaderFields, LOG_OVERHEAD_BYTES, write_header};
use super::{Compression, Record, RecordBatch, RecordError, Result};

/// The batch with only the records `keep` accepts, or `None` when it
/// accepts every one (the original bytes serve as they are).
pub fn retain_records(
    batch: &RecordBatch<'_>,
    decompressed_bytes_max: usize,
    mut keep: impl FnMut(&Record<'_>) -> bool,
) -> Result<Option<Vec<u8>>> {
    let header = *batch.header();
    let records = batch.records(decompressed_bytes_max)?;
    let mut kept = Vec::new();
    let mut count = 0i32;
    let mut dropped = false;
    for record in records.iter() {
        let record = record?;
        if keep(&record) {
            kept.extend_from_slice(record.raw());
            count += 1;
        } else {
            dropped = true;
        }
    }
    if !dropped {
        return Ok(None);
    }
    let payload = match header.compression()? {
        Compression::None => kept,
        codec => codec.compress(&kept)?,
    };
    let mut out = vec![0u8; BATCH_HEADER_BYTES];
    out.extend_from_slice(&payload);
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES)
        .map_err(|_| RecordError::Build("a rewritten batch larger than 2 GiB".into()))?;
    write_header(
        &mut out,
        &HeaderFields {
            base_offset: header.base_offset,
            batch_length,
            attributes: header.attributes,
            last_offset_delta: header.last_offset_delta,
            base_timestamp: header.base_timestamp,
            max_timestamp: header.max_timestamp,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            record_count: count,
        },
    );
    super::set_partition_leader_epoch(&mut out, header.partition_leader_epoch);
    seal_crc(&mut out);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchBuilder, NewRecord};

    fn batch_of(codec: Compression, keys: &[&str]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(codec).producer(9, 2, 40);
        for (i, key) in keys.iter().enumerate() {
            builder
                .push(NewRecord::new(
                    Some(key.as_bytes()),
                    format!("v{i}").as_bytes(),
                    1_000 + i as i64,
                ))
                .unwrap();
        }
        let mut bytes = builder.build().unwrap();
        crate::set_base_offset(&mut bytes, 100);
        bytes
    }

    #[test]
    fn kept_records_keep_their_offsets_and_the_header_its_fields() {
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let original = batch_of(codec, &["a", "b", "a", "c"]);
            let batch = RecordBatch::parse_and_verify(&original).unwrap();
            let rewritten = retain_records(&batch, 1 << 20, |r| r.key != Some(b"a"))
                .unwrap()
                .expect("two records dropped");
            let again = RecordBatch::parse_and_verify(&rewritten).unwrap();
            let (old, new) = (batch.header(), again.header());
            assert_eq!(new.record_count, 2);
            assert_eq!(new.base_offset, 100);
            assert_eq!(new.last_offset(), old.last_offset());
            assert_eq!(
                (new.producer_id, new.producer_epoch, new.base_sequence),
                (9, 2, 40)
            );
            assert_eq!(new.attributes, old.attributes);
            let kept: Vec<(i64, String, i64)> = again
                .records(1 << 20)
                .unwrap()
                .iter()
                .map(|r| {
                    let r = r.unwrap();
                    (
                        r.offset,
                        String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                        r.timestamp,
                    )
                })
                .collect();
            assert_eq!(kept, [(101, "v1".into(), 1_001), (103, "v3".into(), 1_003)]);
        }
    }

    #[test]
    fn keeping_everything_writes_nothing_and_keeping_nothing_leaves_an_empty_batch() {
        let original = batch_of(Compression::Lz4, &["a", "b"]);
        let batch = RecordBatch::parse_and_verify(&original).unwrap();
        assert!(retain_records(&batch, 1 << 20, |_| true).unwrap().is_none());
        let empty = retain_records(&batch, 1 << 20, |_| false).unwrap().unwrap();
        let empty = RecordBatch::parse_and_verify(&empty).unwrap();
        assert_eq!(empty.header().record_count, 0);
        assert_eq!(empty.header().last_offset(), 101);
    }
}
