//! Control records: the transaction markers the log writes to end a
//! transaction in a partition. A control batch (attributes bit 5, and bit 4,
//! transactional) carries the producer id and epoch of the transaction it
//! ends, base sequence -1, and exactly one record:
//!
//! ```text
//! key    0  2  version           i16  0
//!        2  2  type              i16  0 = ABORT, 1 = COMMIT
//! value  0  2  version           i16  0
//!        2  4  coordinator epoch i32
//! ```
//!
//! Consumers never hand control records to the application; a
//! `read_committed` consumer uses an ABORT marker to know where the records
//! of an aborted transaction stop. Kafka allows longer keys and values of a
//! higher version (fields added later); the parser reads the fields it knows
//! and ignores the rest, and refuses a key shorter than four bytes.

use super::builder::{BatchBuilder, NewRecord};
use super::{RecordBatch, RecordError, Result};

/// Version written in the key and the value.
const CONTROL_VERSION: i16 = 0;
const ABORT_TYPE: i16 = 0;
const COMMIT_TYPE: i16 = 1;
const KEY_BYTES: usize = 4;
const VALUE_BYTES: usize = 6;
/// A control batch holds one small record; this bounds its decompression.
const CONTROL_BATCH_DECOMPRESSED_MAX: usize = 1 << 16;

/// How a transaction ended in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    Commit,
    Abort,
}

impl MarkerKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Commit => "COMMIT",
            Self::Abort => "ABORT",
        }
    }
}

/// One transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    pub kind: MarkerKind,
    pub coordinator_epoch: i32,
}

impl ControlRecord {
    /// A control batch holding this marker for the transaction of
    /// `producer_id` at `producer_epoch`, base offset 0 (the log assigns the
    /// real one).
    pub fn batch(&self, producer_id: i64, producer_epoch: i16, timestamp: i64) -> Vec<u8> {
        let kind = match self.kind {
            MarkerKind::Commit => COMMIT_TYPE,
            MarkerKind::Abort => ABORT_TYPE,
        };
        let mut key = [0u8; KEY_BYTES];
        key[..2].copy_from_slice(&CONTROL_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&kind.to_be_bytes());
        let mut value = [0u8; VALUE_BYTES];
        value[..2].copy_from_slice(&CONTROL_VERSION.to_be_bytes());
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut builder = BatchBuilder::new(super::Compression::None)
            .producer(producer_id, producer_epoch, super::NO_SEQUENCE)
            .transactional(true)
            .control();
        builder
            .push(NewRecord::new(Some(&key), &value, timestamp))
            .expect("one small record fits a batch");
        builder.into_batch().expect("a batch of one record builds")
    }

    /// The marker in a control batch (already parsed, its CRC checked).
    pub fn of(batch: &RecordBatch<'_>) -> Result<Self> {
        let invalid = |reason: &str| RecordError::Invalid(format!("control batch: {reason}"));
        if !batch.header().is_control() {
            return Err(invalid("not a control batch"));
        }
        let records = batch.records(CONTROL_BATCH_DECOMPRESSED_MAX)?;
        let record = records
            .iter()
            .next()
            .ok_or_else(|| invalid("no record"))??;
        let key = record.key.ok_or_else(|| invalid("the record has no key"))?;
        if key.len() < KEY_BYTES {
            return Err(invalid("the record key is shorter than 4 bytes"));
        }
        let kind = match i16::from_be_bytes([key[2], key[3]]) {
            ABORT_TYPE => MarkerKind::Abort,
            COMMIT_TYPE => MarkerKind::Commit,
            other => return Err(invalid(&format!("unknown control type {other}"))),
        };
        let coordinator_epoch = match record.value {
            Some(value) if value.len() >= VALUE_BYTES => {
                i32::from_be_bytes([value[2], value[3], value[4], value[5]])
            }
            _ => -1,
        };
        Ok(Self {
            kind,
            coordinator_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_round_trips_through_its_batch() {
        for kind in [MarkerKind::Commit, MarkerKind::Abort] {
            let marker = ControlRecord {
                kind,
                coordinator_epoch: 7,
            };
            let bytes = marker.batch(42, 3, 1_000);
            let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
            let header = batch.header();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(
                (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence
                ),
                (42, 3, -1)
            );
            assert_eq!(header.record_count, 1);
            assert_eq!(ControlRecord::of(&batch).unwrap(), marker);
        }
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let mut builder = BatchBuilder::new(super::super::Compression::None);
        builder.push(NewRecord::new(Some(b"k"), b"v", 1)).unwrap();
        let bytes = builder.build().unwrap();
        let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
        assert!(ControlRecord::of(&batch).is_err());
    }
}
