//! Any bytes through the outbox value decoder (a task's `outbox` column
//! family: topic, partition, one v2 record batch).
//!
//! Beyond "no panic": what decodes encodes back to the same bytes, and its
//! batch passed the CRC check.

use strata::record::RecordBatch;
use strata::runtime::OutboxBatch;

pub fn check(data: &[u8]) {
    if let Ok(batch) = OutboxBatch::decode(0, data) {
        assert_eq!(batch.encode(), data, "decode then encode is the identity");
        assert!(RecordBatch::parse_and_verify(&batch.batch).is_ok());
    }
}
