//! The recovery point file: how far a partition is known to be durable, so
//! an unclean restart walks only the segments after it.
//!
//! ```text
//! offset  size  field
//!      0     8  offset  i64  every offset below it was fdatasynced
//!      8     4  crc     u32  CRC32C of bytes 0..8
//! ```
//!
//! Big-endian, overwritten in place. A torn or damaged write fails the CRC
//! and reads as 0: recovery then checks every segment, which is slower but
//! never wrong.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes of the file.
pub(super) const RECOVERY_POINT_BYTES: usize = 12;

/// The file's bytes for `offset`.
pub(super) fn encode(offset: i64) -> [u8; RECOVERY_POINT_BYTES] {
    let mut raw = [0u8; RECOVERY_POINT_BYTES];
    raw[..8].copy_from_slice(&offset.to_be_bytes());
    let crc = strata_record::crc32c(&raw[..8]);
    raw[8..].copy_from_slice(&crc.to_be_bytes());
    raw
}

/// The stored offset, or 0 when the file is short or fails its CRC.
pub(super) fn read(file: &File) -> i64 {
    let mut raw = [0u8; RECOVERY_POINT_BYTES];
    if file.read_exact_at(&mut raw, 0).is_err() {
        return 0;
    }
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&raw[..8]);
    let stored = u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]);
    if strata_record::crc32c(&raw[..8]) == stored {
        i64::from_be_bytes(offset).max(0)
    } else {
        0
    }
}
