//! The records inside a batch.
//!
//! ```text
//! length          varint   bytes of the rest of the record
//! attributes      int8     unused, 0
//! timestampDelta  varlong  from baseTimestamp
//! offsetDelta     varint   from baseOffset
//! keyLength       varint   -1 for a null key
//! key             bytes
//! valueLength     varint   -1 for a null value
//! value           bytes
//! headerCount     varint
//! headers         headerKeyLength varint, key, headerValueLength varint, value
//! ```
//!
//! Uncompressed records are borrowed straight from the batch; compressed ones
//! from a buffer [`Records`] owns.

use std::borrow::Cow;

use super::header::{BatchHeader, TimestampType};
use super::varint::{read_varint, read_varlong};
use super::{Compression, RecordError, Result};

/// The decoded records section of one batch.
#[derive(Debug)]
pub struct Records<'a> {
    data: Cow<'a, [u8]>,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    count: usize,
}

/// The fewest bytes a record takes: a one-byte length, attributes,
/// timestamp delta, offset delta, key length, value length and header
/// count.
const RECORD_BYTES_MIN: usize = 7;

impl<'a> Records<'a> {
    pub(super) fn new(
        header: &BatchHeader,
        payload: &'a [u8],
        decompressed_bytes_max: usize,
    ) -> Result<Self> {
        let data = match header.compression()? {
            Compression::None => Cow::Borrowed(payload),
            codec => Cow::Owned(codec.decompress(payload, decompressed_bytes_max)?),
        };
        let count = usize::try_from(header.record_count)
            .map_err(|_| RecordError::Invalid(format!("record count {}", header.record_count)))?;
        Ok(Self {
            data,
            base_offset: header.base_offset,
            base_timestamp: header.base_timestamp,
            log_append_time: (header.timestamp_type() == TimestampType::LogAppendTime)
                .then_some(header.max_timestamp),
            count,
        })
    }

    /// Number of records the header declares.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The declared count, but no more than the bytes can hold: what a
    /// buffer for the records may be sized to before they are read (a
    /// header's count alone could ask for any size).
    pub fn len_bound(&self) -> usize {
        self.count.min(self.data.len() / RECORD_BYTES_MIN)
    }

    /// Iterates the records in offset order. Yields an error (then stops) at
    /// the first malformed record, or if bytes remain after the last one.
    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter {
            section: &self.data,
            cursor: self.cursor(),
        }
    }

    /// A cursor at the first record, for a reader that keeps the records
    /// section ([`Records::into_section`]) and reads it a record at a time.
    pub fn cursor(&self) -> RecordCursor {
        RecordCursor {
            at: 0,
            base_offset: self.base_offset,
            base_timestamp: self.base_timestamp,
            log_append_time: self.log_append_time,
            remaining: self.count,
            index: 0,
            failed: false,
        }
    }

    /// The records section, for a [`RecordCursor`] that reads alongside
    /// [`Records::iter`].
    pub fn section(&self) -> &[u8] {
        &self.data
    }

    /// The records section: borrowed from the batch when it is not
    /// compressed, else the decompressed bytes.
    pub fn into_section(self) -> Cow<'a, [u8]> {
        self.data
    }
}

/// One record, borrowing its key, value and headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    headers: &'a [u8],
    header_count: usize,
    /// The whole record as encoded, length prefix included.
    raw: &'a [u8],
}

impl<'a> Record<'a> {
    /// The record's bytes as the batch holds them (length prefix, fields,
    /// headers): a rewrite of the batch copies the records it keeps.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The record's headers, in order. They were validated when the record was
    /// read, so this iterator cannot fail.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let mut rest = self.headers;
        (0..self.header_count).map_while(move |_| {
            let (header, used) = parse_header(rest).ok()?;
            rest = &rest[used..];
            Some(header)
        })
    }

    pub fn header_count(&self) -> usize {
        self.header_count
    }
}

/// A record header: a string key and an optional value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// Headers borrowed from (name, value) pairs, in order, as a producer
    /// or a processor's emit options hold them.
    pub fn from_pairs<V: AsRef<[u8]>>(pairs: &'a [(String, Option<V>)]) -> Vec<Header<'a>> {
        pairs
            .iter()
            .map(|(name, value)| Header {
                key: name.as_bytes(),
                value: value.as_ref().map(AsRef::as_ref),
            })
            .collect()
    }
}

/// Iterator over [`Records`]: a [`RecordCursor`] over borrowed bytes.
pub struct RecordIter<'a> {
    section: &'a [u8],
    cursor: RecordCursor,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.cursor.next(self.section)
    }
}

/// Where a reader stands in a batch's records section, kept apart from
/// the bytes: a reader holding the section in a buffer of its own (a task
/// that takes turns between the batches of its inputs) reads it a record
/// at a time across turns, without reading any record twice.
///
/// Each call must be given the same section the cursor came from
/// ([`Records::cursor`], [`Records::into_section`]). Copying a cursor
/// peeks: the copy reads on, the original stays where it was.
#[derive(Debug, Clone, Copy)]
pub struct RecordCursor {
    /// Bytes of the section read so far.
    at: usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    remaining: usize,
    index: usize,
    failed: bool,
}

impl RecordCursor {
    /// The next record of `section`; an error (then nothing) at the first
    /// malformed record, or if bytes remain after the last one.
    pub fn next<'a>(&mut self, section: &'a [u8]) -> Option<Result<Record<'a>>> {
        if self.failed {
            return None;
        }
        let rest = section.get(self.at..).unwrap_or_default();
        if self.remaining == 0 {
            if rest.is_empty() {
                return None;
            }
            self.failed = true;
            return Some(Err(RecordError::Invalid(format!(
                "{} bytes follow the last of {} records",
                rest.len(),
                self.index
            ))));
        }
        match self.parse_next(rest) {
            Ok(record) => {
                self.at += record.raw.len();
                self.remaining -= 1;
                self.index += 1;
                Some(Ok(record))
            }
            Err(reason) => {
                self.failed = true;
                Some(Err(RecordError::MalformedRecord {
                    index: self.index,
                    reason,
                }))
            }
        }
    }

    /// The next record's key (None inside: a null key), read no further:
    /// for a cursor running ahead of a reader that reads every record
    /// whole (asking for the store entries of keys to come). None at the
    /// end, or where a record's length or key do not read; a record whose
    /// other fields are malformed still gives its key. The reader behind
    /// reports what is malformed.
    ///
    /// Measured under callgrind on the operators bench's join, whose task
    /// reads each record twice: a whole record costs about 340
    /// instructions, its key alone about 160.
    pub fn next_key<'a>(&mut self, section: &'a [u8]) -> Option<Option<&'a [u8]>> {
        self.next_key_and_time(section).map(|(key, _)| key)
    }

    /// As [`RecordCursor::next_key`], with the record's timestamp, which
    /// comes before its key (for the window a record falls in).
    pub fn next_key_and_time<'a>(&mut self, section: &'a [u8]) -> Option<(Option<&'a [u8]>, i64)> {
        if self.failed || self.remaining == 0 {
            return None;
        }
        let skimmed = section.get(self.at..).and_then(|rest| {
            let (length, used) = read_varint(rest)?;
            let end = used.checked_add(usize::try_from(length).ok()?)?;
            let body = rest.get(used..end)?;
            let mut cursor = Cursor { bytes: body, at: 0 };
            cursor.take(1)?; // attributes
            let timestamp_delta = cursor.varlong()?;
            cursor.varint()?;
            Some((cursor.nullable_bytes("key").ok()?, timestamp_delta, end))
        });
        let Some((key, timestamp_delta, end)) = skimmed else {
            self.failed = true;
            return None;
        };
        self.at += end;
        self.remaining -= 1;
        self.index += 1;
        let timestamp = self
            .log_append_time
            .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta));
        Some((key, timestamp))
    }

    /// Records not read yet.
    pub fn remaining(&self) -> usize {
        if self.failed { 0 } else { self.remaining }
    }

    fn parse_next<'a>(&self, rest: &'a [u8]) -> std::result::Result<Record<'a>, String> {
        let (length, used) = read_varint(rest).ok_or("truncated record length")?;
        let length = usize::try_from(length).map_err(|_| format!("negative length {length}"))?;
        let body = rest[used..]
            .get(..length)
            .ok_or_else(|| format!("length {length} but {} bytes remain", rest.len() - used))?;
        let mut cursor = Cursor { bytes: body, at: 0 };
        let _attributes = cursor.take(1).ok_or("missing attributes")?;
        let timestamp_delta = cursor.varlong().ok_or("bad timestampDelta")?;
        let offset_delta = cursor.varint().ok_or("bad offsetDelta")?;
        let key = cursor.nullable_bytes("key")?;
        let value = cursor.nullable_bytes("value")?;
        let header_count = cursor.varint().ok_or("bad header count")?;
        let header_count =
            usize::try_from(header_count).map_err(|_| format!("header count {header_count}"))?;
        let headers_start = cursor.at;
        for _ in 0..header_count {
            let (_, used) = parse_header(&body[cursor.at..])?;
            cursor.at += used;
        }
        if cursor.at != body.len() {
            return Err(format!(
                "record length {length} but its fields end at {}",
                cursor.at
            ));
        }
        let timestamp = self
            .log_append_time
            .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta));
        Ok(Record {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp,
            key,
            value,
            headers: &body[headers_start..],
            header_count,
            raw: &rest[..used + length],
        })
    }
}

fn parse_header(bytes: &[u8]) -> std::result::Result<(Header<'_>, usize), String> {
    let mut cursor = Cursor { bytes, at: 0 };
    let key = cursor
        .nullable_bytes("header key")?
        .ok_or("null header key")?;
    let value = cursor.nullable_bytes("header value")?;
    Ok((Header { key, value }, cursor.at))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn varint(&mut self) -> Option<i32> {
        let (value, used) = read_varint(&self.bytes[self.at..])?;
        self.at += used;
        Some(value)
    }

    fn varlong(&mut self) -> Option<i64> {
        let (value, used) = read_varlong(&self.bytes[self.at..])?;
        self.at += used;
        Some(value)
    }

    fn nullable_bytes(&mut self, what: &str) -> std::result::Result<Option<&'a [u8]>, String> {
        let length = self.varint().ok_or_else(|| format!("bad {what} length"))?;
        if length == -1 {
            return Ok(None);
        }
        let length = usize::try_from(length).map_err(|_| format!("{what} length {length}"))?;
        self.take(length)
            .map(Some)
            .ok_or_else(|| format!("{what} of {length} bytes runs past the record"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchBuilder, NewRecord, RecordBatch};

    fn batch_of(codec: Compression, count: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(codec);
        for i in 0..count {
            let (key, value) = (format!("k{i}"), format!("v{i}"));
            let record = NewRecord::new(Some(key.as_bytes()), value.as_bytes(), 1_000 - i as i64);
            builder.push(record).unwrap();
        }
        let mut bytes = builder.build().unwrap();
        crate::set_base_offset(&mut bytes, 50);
        bytes
    }

    #[test]
    fn a_cursor_over_the_kept_section_reads_what_the_iterator_reads() {
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let bytes = batch_of(codec, 7);
            let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
            let records = batch.records(1 << 20).unwrap();
            let expected: Vec<(i64, i64, Vec<u8>)> = (records.iter())
                .map(|r| r.unwrap())
                .map(|r| (r.offset, r.timestamp, r.value.unwrap().to_vec()))
                .collect();
            let mut cursor = records.cursor();
            let section = records.into_section().into_owned();
            let mut read = Vec::new();
            while let Some(record) = cursor.next(&section) {
                let r = record.unwrap();
                read.push((r.offset, r.timestamp, r.value.unwrap().to_vec()));
            }
            assert_eq!(read, expected, "{codec:?}");
            assert_eq!(read[6], (56, 994, b"v6".to_vec()));
            assert_eq!(cursor.remaining(), 0);
        }
    }

    #[test]
    fn a_buffer_for_the_records_is_bounded_by_their_bytes_not_the_declared_count() {
        let mut bytes = batch_of(Compression::None, 3);
        let honest = RecordBatch::parse(&bytes).unwrap();
        assert_eq!(honest.records(1 << 20).unwrap().len_bound(), 3);
        let payload = bytes.len() - crate::BATCH_HEADER_BYTES;
        for claimed in [4, 1_000, i32::MAX] {
            // recordCount, the header's last field, and lastOffsetDelta to
            // match it (at byte 23), as a hostile producer would write them.
            let at = crate::BATCH_HEADER_BYTES - 4;
            bytes[at..at + 4].copy_from_slice(&claimed.to_be_bytes());
            bytes[23..27].copy_from_slice(&(claimed - 1).to_be_bytes());
            let batch = RecordBatch::parse(&bytes).unwrap();
            let records = batch.records(1 << 20).unwrap();
            assert_eq!(records.len(), claimed as usize);
            assert!(
                records.len_bound() <= payload / RECORD_BYTES_MIN,
                "{claimed}"
            );
        }
    }

    #[test]
    fn a_copied_cursor_peeks_and_the_original_resumes_where_it_stood() {
        let bytes = batch_of(Compression::None, 3);
        let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
        let records = batch.records(1 << 20).unwrap();
        let mut cursor = records.cursor();
        let section = records.into_section();
        assert_eq!(cursor.next(&section).unwrap().unwrap().offset, 50);
        let mut peek = cursor;
        assert_eq!(peek.next(&section).unwrap().unwrap().offset, 51);
        assert_eq!(peek.remaining(), 1);
        assert_eq!(cursor.remaining(), 2);
        assert_eq!(cursor.next(&section).unwrap().unwrap().offset, 51);
    }

    proptest::proptest! {
        /// Over any bytes, a cursor reading keys (and times) alone agrees
        /// with one reading whole records for as long as those read: the
        /// same keys and timestamps, in order, never a panic.
        #[test]
        fn keys_read_alone_are_the_keys_of_the_records_read_whole(
            records in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..40)),
                 proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..200)),
                 proptest::collection::vec(
                     ("[a-z]{0,8}", proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..16))),
                     0..3,
                 )),
                1..20,
            ),
            damage in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 0..4),
            cut in proptest::option::of(proptest::num::usize::ANY),
        ) {
            let mut builder = BatchBuilder::new(Compression::None);
            for (at, (key, value, headers)) in records.iter().enumerate() {
                let headers = Header::from_pairs(headers);
                // Times out of order too: a delta may be negative.
                let timestamp = 1_000 + (at as i64 % 3 - 1) * 400 + at as i64;
                let record = NewRecord {
                    key: key.as_deref(),
                    value: value.as_deref(),
                    timestamp,
                    headers: &headers,
                };
                builder.push(record).unwrap();
            }
            let bytes = builder.build().unwrap();
            let batch = RecordBatch::parse(&bytes).unwrap();
            let parsed = batch.records(1 << 20).unwrap();
            let (mut whole, mut keys) = (parsed.cursor(), parsed.cursor());
            let mut section = parsed.into_section().into_owned();
            let intact = damage.is_empty() && cut.is_none();
            for (at, byte) in damage {
                let at = at % section.len();
                section[at] = byte;
            }
            if let Some(cut) = cut {
                section.truncate(cut % (section.len() + 1));
            }
            let mut read = 0;
            while let Some(Ok(record)) = whole.next(&section) {
                let expected = if read % 2 == 0 {
                    keys.next_key(&section).map(|key| (key, record.timestamp))
                } else {
                    keys.next_key_and_time(&section)
                };
                proptest::prop_assert_eq!(expected, Some((record.key, record.timestamp)));
                read += 1;
            }
            if intact {
                proptest::prop_assert_eq!(read, records.len());
                proptest::prop_assert_eq!(keys.next_key(&section), None);
            }
            while keys.next_key(&section).is_some() {}
        }
    }

    #[test]
    fn a_cursor_stops_at_the_first_malformed_record() {
        let mut bytes = batch_of(Compression::None, 3);
        let batch = RecordBatch::parse(&bytes).unwrap();
        let records = batch.records(1 << 20).unwrap();
        let mut cursor = records.cursor();
        let cut = records.into_section().len() - 2;
        let payload = crate::BATCH_HEADER_BYTES;
        bytes.truncate(payload + cut);
        let section = &bytes[payload..];
        assert!(cursor.next(section).unwrap().is_ok());
        assert!(cursor.next(section).unwrap().is_ok());
        assert!(
            cursor.next(section).unwrap().is_err(),
            "the last record is cut"
        );
        assert!(cursor.next(section).is_none());
        assert_eq!(cursor.remaining(), 0);
    }
}
