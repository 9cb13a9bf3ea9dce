//! A zero-copy view over one Kafka v2 record batch: the header (laid out in
//! `header.rs`) followed by the records, checked by CRC32C over bytes 21..end.

use super::compression::Compression;
use super::framing::check_framing;
use super::header::{BATCH_HEADER_BYTES, BatchHeader, CRC_AT, CRC_COVERS_FROM, TimestampType};
use super::records::Records;
use super::{RecordError, Result};

/// A borrowed, header-validated v2 record batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordBatch<'a> {
    header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Parses the batch at the front of `bytes`, checking its header fields and
    /// that the whole batch is present, but not its CRC. Returns the batch and
    /// the bytes it spans; trailing bytes are left for the caller.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let header = BatchHeader::parse(bytes)?;
        header.check()?;
        let size = header.size_bytes();
        if bytes.len() < size {
            return Err(RecordError::Truncated {
                needed: size,
                available: bytes.len(),
            });
        }
        Ok(Self {
            header,
            bytes: &bytes[..size],
        })
    }

    /// Like [`RecordBatch::parse`], then verifies the CRC.
    pub fn parse_and_verify(bytes: &'a [u8]) -> Result<Self> {
        let batch = Self::parse(bytes)?;
        batch.verify_crc()?;
        Ok(batch)
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch's bytes, exactly as stored or sent.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Checks the stored CRC32C against bytes 21.. of the batch.
    pub fn verify_crc(&self) -> Result<()> {
        let computed = crc32c(&self.bytes[CRC_COVERS_FROM..]);
        if computed != self.header.crc {
            return Err(RecordError::CrcMismatch {
                stored: self.header.crc,
                computed,
            });
        }
        Ok(())
    }

    /// The records section: compressed payload or concatenated records.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_BYTES..]
    }

    /// The records of the batch, decompressed into an owned buffer when the
    /// batch is compressed (at most `decompressed_bytes_max` bytes) and
    /// borrowed otherwise.
    pub fn records(&self, decompressed_bytes_max: usize) -> Result<Records<'a>> {
        Records::new(&self.header, self.payload(), decompressed_bytes_max)
    }

    /// Walks every record once, checking that each is well formed, that there
    /// are exactly `recordCount` of them, and that offset deltas run 0, 1, 2…
    /// ending at `lastOffsetDelta`.
    pub fn validate_records(&self, decompressed_bytes_max: usize) -> Result<()> {
        let count = usize::try_from(self.header.record_count).map_err(|_| {
            RecordError::Invalid(format!("record count {}", self.header.record_count))
        })?;
        if count > 0 && i64::from(self.header.last_offset_delta) != count as i64 - 1 {
            return Err(RecordError::Invalid(format!(
                "lastOffsetDelta {} does not match {count} records",
                self.header.last_offset_delta
            )));
        }
        let base_timestamp = self.header.base_timestamp;
        let newest = match self.header.compression()? {
            Compression::None => check_framing(self.payload(), count, base_timestamp)?,
            codec => check_framing(
                &codec.decompress(self.payload(), decompressed_bytes_max)?,
                count,
                base_timestamp,
            )?,
        };
        // Retention and the time index trust maxTimestamp, so it must be the
        // records' real maximum (with LogAppendTime the broker sets it).
        // Producers write -1 ("none") when no record has a timestamp.
        let expected = if newest < 0 { -1 } else { newest };
        if count > 0
            && self.header.timestamp_type() == TimestampType::CreateTime
            && self.header.max_timestamp != expected
            && self.header.max_timestamp != newest
        {
            return Err(RecordError::Invalid(format!(
                "maxTimestamp is {} but the newest record has timestamp {newest}",
                self.header.max_timestamp
            )));
        }
        Ok(())
    }
}

/// Writes the CRC of a fully assembled batch.
pub(super) fn seal_crc(bytes: &mut [u8]) {
    let crc = crc32c(&bytes[CRC_COVERS_FROM..]);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// CRC-32C (Castagnoli, "iSCSI"), as Kafka's v2 batches use. Every batch's
/// bytes pass through this on append, so it uses the SIMD carry-less
/// multiply implementation (several times the speed of the SSE4.2 `crc32`
/// instruction loop), chosen at run time by CPU features.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_castagnoli_check_value() {
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
        // Long inputs take the SIMD path; compare with a bitwise reference.
        let long: Vec<u8> = (0..100_003u32).map(|i| (i * 31 % 251) as u8).collect();
        assert_eq!(crc32c(&long), bitwise_crc32c(&long));
    }

    fn bitwise_crc32c(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
