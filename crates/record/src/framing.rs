//! Checking the framing of a batch's records without decoding them: the
//! append path's validation, run on every batch a producer sends.
//!
//! It accepts exactly what [`RecordIter`](super::RecordIter) can read (the
//! same varint limits, the same field rules) and additionally requires the
//! offset deltas to run 0, 1, 2… It is a separate, allocation-free loop
//! because it runs once per record on the produce path.

use super::RecordError;
use super::varint::{read_varint, read_varlong};

/// Checks that `data` holds exactly `count` well-formed records whose
/// offset deltas are 0..count, and returns their largest timestamp
/// (`i64::MIN` when there are none).
pub(super) fn check_framing(
    data: &[u8],
    count: usize,
    base_timestamp: i64,
) -> Result<i64, RecordError> {
    let mut start = 0;
    let mut max_timestamp = i64::MIN;
    for index in 0..count {
        let (next, timestamp_delta) =
            check_record(data, start, index).map_err(|reason| RecordError::MalformedRecord {
                index,
                reason: reason.to_string(),
            })?;
        start = next;
        // Deltas may wrap (the reader adds them the same way).
        max_timestamp = max_timestamp.max(base_timestamp.wrapping_add(timestamp_delta));
    }
    if start != data.len() {
        return Err(RecordError::Invalid(format!(
            "{} bytes follow the last of {count} records",
            data.len() - start
        )));
    }
    Ok(max_timestamp)
}

/// Checks the record at `start`; returns where the next one begins and the
/// record's timestamp delta.
///
/// The next start depends only on the length prefix, not on the fields
/// inside, so the processor can check one record's fields while it already
/// reads the next record's length.
#[inline(always)]
fn check_record(data: &[u8], start: usize, index: usize) -> Result<(usize, i64), &'static str> {
    let mut pos = start;
    let length = varint(data, &mut pos).ok_or("bad record length")?;
    let length = usize::try_from(length).map_err(|_| "negative record length")?;
    let end = pos
        .checked_add(length)
        .filter(|&end| end <= data.len())
        .ok_or("record runs past the batch")?;
    let body = &data[..end];
    pos += 1; // attributes
    let timestamp_delta = varlong(body, &mut pos).ok_or("bad timestampDelta")?;
    let offset_delta = varint(body, &mut pos).ok_or("bad offsetDelta")?;
    if usize::try_from(offset_delta).ok() != Some(index) {
        return Err("offset delta out of sequence");
    }
    skip_bytes(body, &mut pos, true).ok_or("bad key")?;
    skip_bytes(body, &mut pos, true).ok_or("bad value")?;
    let headers = varint(body, &mut pos).ok_or("bad header count")?;
    let headers = usize::try_from(headers).map_err(|_| "negative header count")?;
    for _ in 0..headers {
        skip_bytes(body, &mut pos, false).ok_or("bad header key")?;
        skip_bytes(body, &mut pos, true).ok_or("bad header value")?;
    }
    if pos != end {
        return Err("record length does not match its fields");
    }
    Ok((end, timestamp_delta))
}

/// Skips a length-prefixed byte string (-1 for null, where allowed).
#[inline(always)]
fn skip_bytes(body: &[u8], pos: &mut usize, nullable: bool) -> Option<()> {
    let length = varint(body, pos)?;
    if length == -1 && nullable {
        return Some(());
    }
    let length = usize::try_from(length).ok()?;
    let end = pos.checked_add(length)?;
    (end <= body.len()).then(|| *pos = end)
}

/// A varint, with the one- and two-byte encodings (almost every length and
/// delta) decoded inline.
#[inline(always)]
fn varint(bytes: &[u8], pos: &mut usize) -> Option<i32> {
    let b0 = *bytes.get(*pos)?;
    if b0 < 0x80 {
        *pos += 1;
        return Some(zigzag(u32::from(b0)));
    }
    if let Some(&b1) = bytes.get(*pos + 1)
        && b1 < 0x80
    {
        *pos += 2;
        return Some(zigzag(u32::from(b0 & 0x7f) | (u32::from(b1) << 7)));
    }
    varint_slow(bytes, pos)
}

#[cold]
#[inline(never)]
fn varint_slow(bytes: &[u8], pos: &mut usize) -> Option<i32> {
    let (value, used) = read_varint(bytes.get(*pos..)?)?;
    *pos += used;
    Some(value)
}

#[inline(always)]
fn varlong(bytes: &[u8], pos: &mut usize) -> Option<i64> {
    let b0 = *bytes.get(*pos)?;
    if b0 < 0x80 {
        *pos += 1;
        return Some(i64::from(zigzag(u32::from(b0))));
    }
    varlong_slow(bytes, pos)
}

#[cold]
#[inline(never)]
fn varlong_slow(bytes: &[u8], pos: &mut usize) -> Option<i64> {
    let (value, used) = read_varlong(bytes.get(*pos..)?)?;
    *pos += used;
    Some(value)
}

#[inline(always)]
fn zigzag(raw: u32) -> i32 {
    ((raw >> 1) as i32) ^ -((raw & 1) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BATCH_HEADER_BYTES, BatchBuilder, Compression, Header, NewRecord, RecordBatch};

    fn payload() -> (Vec<u8>, usize) {
        let headers = [Header {
            key: b"h",
            value: None,
        }];
        let mut builder = BatchBuilder::new(Compression::None);
        let long = vec![7u8; 300];
        builder
            .push(NewRecord {
                key: Some(b"k"),
                value: Some(&long),
                timestamp: 5,
                headers: &headers,
            })
            .unwrap();
        builder
            .push(NewRecord {
                key: None,
                value: None,
                timestamp: -100_000,
                headers: &[],
            })
            .unwrap();
        builder
            .push(NewRecord::new(Some(&long), b"v", 1 << 40))
            .unwrap();
        let batch = builder.build().unwrap();
        (batch[BATCH_HEADER_BYTES..].to_vec(), 3)
    }

    #[test]
    fn well_formed_records_pass() {
        let (data, count) = payload();
        check_framing(&data, count, 0).unwrap();
    }

    #[test]
    fn every_truncation_and_a_wrong_count_fail() {
        let (data, count) = payload();
        for len in 0..data.len() {
            assert!(
                check_framing(&data[..len], count, 0).is_err(),
                "length {len}"
            );
        }
        assert!(check_framing(&data, count - 1, 0).is_err());
        assert!(check_framing(&data, count + 1, 0).is_err());
    }

    #[test]
    fn framing_agrees_with_the_record_reader_on_every_single_byte_change() {
        let (data, count) = payload();
        let mut batch = BatchBuilder::new(Compression::None);
        batch.push(NewRecord::new(None, b"x", 0)).unwrap();
        let header = *RecordBatch::parse(&batch.build().unwrap())
            .unwrap()
            .header();
        let header = crate::BatchHeader {
            record_count: count as i32,
            ..header
        };
        for at in 0..data.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff, data[at] ^ 0x02] {
                let mut mutated = data.clone();
                mutated[at] = value;
                let framed = check_framing(&mutated, count, 0).is_ok();
                let records = crate::Records::new(&header, &mutated, 1 << 20).unwrap();
                let read: Result<Vec<_>, _> = records.iter().collect();
                let sequential = read.as_ref().is_ok_and(|r| {
                    r.iter()
                        .enumerate()
                        .all(|(i, rec)| rec.offset - header.base_offset == i as i64)
                });
                assert_eq!(framed, read.is_ok() && sequential, "byte {at} = {value:#x}");
            }
        }
    }
}
