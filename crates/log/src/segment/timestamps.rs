//! Finding records by timestamp in a segment: the first at or after a
//! time (ListOffsets, `offset_for_timestamp`), and the first carrying the
//! segment's largest timestamp (ListOffsets MAX_TIMESTAMP). The time index
//! narrows where to start; batch headers say which batches to open.

use strata_record::BatchHeader;

use super::Segment;
use crate::LogError;

impl Segment {
    /// The first record with timestamp ≥ `timestamp`, as (offset, timestamp).
    pub(crate) fn offset_for_timestamp(
        &self,
        timestamp: i64,
        decompressed_bytes_max: usize,
        end: u64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let mut position = match self.time_index.lookup_before(timestamp) {
            Some((_, offset)) => match self.locate(offset + 1)? {
                Some((position, _)) => position,
                None => return Ok(None),
            },
            None => 0,
        };
        let mut buf = Vec::new();
        while position < end {
            let header = self.read_header(position)?;
            if header.max_timestamp >= timestamp {
                let batch = self.read_batch(position, &header, &mut buf)?;
                for record in batch.records(decompressed_bytes_max)?.iter() {
                    let record = record?;
                    if record.timestamp >= timestamp {
                        return Ok(Some((record.offset, record.timestamp)));
                    }
                }
            }
            position += header.size_bytes() as u64;
        }
        Ok(None)
    }

    /// The first record carrying the segment's largest timestamp, as
    /// (offset, timestamp); `None` when no record has a timestamp (≥ 0).
    ///
    /// The segment remembers the last offset of the first batch that
    /// reached its largest timestamp, so this reads one batch; if that
    /// hint does not hold (index files are derived data), it looks the
    /// timestamp up as any other.
    pub(crate) fn max_timestamp_record(
        &self,
        decompressed_bytes_max: usize,
    ) -> Result<Option<(i64, i64)>, LogError> {
        if self.max_timestamp < 0 {
            return Ok(None);
        }
        let mut buf = Vec::new();
        if let Some((position, header)) = self.locate(self.max_timestamp_offset)?
            && header.max_timestamp == self.max_timestamp
            && let Some(found) = self.first_record_at(
                position,
                &header,
                self.max_timestamp,
                decompressed_bytes_max,
                &mut buf,
            )?
        {
            return Ok(Some(found));
        }
        // Nothing is later than the largest timestamp, so the first record
        // at or after it is the first record carrying it.
        self.offset_for_timestamp(self.max_timestamp, decompressed_bytes_max, self.size)
    }

    /// The first record of the batch at `position` whose timestamp is
    /// exactly `timestamp`.
    fn first_record_at(
        &self,
        position: u64,
        header: &BatchHeader,
        timestamp: i64,
        decompressed_bytes_max: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let batch = self.read_batch(position, header, buf)?;
        for record in batch.records(decompressed_bytes_max)?.iter() {
            let record = record?;
            if record.timestamp == timestamp {
                return Ok(Some((record.offset, record.timestamp)));
            }
        }
        Ok(None)
    }
}
