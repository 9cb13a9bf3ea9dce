//! Rebuilding a partition's producer state and transaction index when it
//! opens, from the batch headers of every retained segment (after recovery
//! has cut any torn tail, so both describe exactly what remains).
//!
//! The walk reads a window of the file at a time while batches are small
//! (one read covers many headers) and only the next header after a large
//! batch, so its cost is a read of the headers, not of the records. A
//! control batch (a transaction marker) is read whole: its type is in its
//! one small record.
//!
//! A header that does not parse ends the walk of its segment with a
//! warning: the segment's reads fail there too.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;

use strata_record::{BATCH_HEADER_BYTES, BatchHeader, ControlRecord, RecordBatch};

use super::LogError;
use super::error::IoContext;
use super::producer_state::{ProducerBatch, ProducerStateTable};
use super::segment::Segment;
use super::transaction_index::TransactionIndex;

/// Bytes read at a time while walking batch headers.
const WINDOW_BYTES: usize = 64 << 10;
/// After a batch at least this large, the walk reads only the next header
/// instead of a window (which would be mostly record bytes).
const HEADER_ONLY_AFTER_BATCH_BYTES: u64 = 4 << 10;
/// Largest control batch read back (one marker record is ~80 bytes).
const CONTROL_BATCH_BYTES_MAX: usize = 4 << 10;

/// What rebuilding the state on open read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStateLoad {
    pub batches_read: u64,
    pub producers: usize,
    pub markers: u64,
    pub elapsed_ms: u64,
}

/// Producer state and transactions of the batches in `segments`, with
/// broker time `now_ms` as every producer's last use.
pub(crate) fn rebuild(
    segments: &BTreeMap<i64, Segment>,
    partition: &str,
    now_ms: i64,
) -> Result<(ProducerStateTable, TransactionIndex, ProducerStateLoad), LogError> {
    let started = std::time::Instant::now();
    let mut producers = ProducerStateTable::new();
    let mut transactions = TransactionIndex::default();
    let mut stats = ProducerStateLoad::default();
    let mut window = vec![0u8; WINDOW_BYTES];
    for segment in segments.values() {
        walk(segment, &mut window, partition, |header, position| {
            stats.batches_read += 1;
            if header.producer_id < 0 {
                return Ok(());
            }
            if header.is_control() {
                let Some(marker) = read_marker(segment, header, position, partition)? else {
                    return Ok(());
                };
                stats.markers += 1;
                let offset = header.base_offset;
                producers.marker(header.producer_id, header.producer_epoch, offset, now_ms);
                transactions.marker(header.producer_id, marker.kind, offset);
                return Ok(());
            }
            if let Some(batch) = ProducerBatch::of(header)
                && batch.epoch >= 0
                && batch.first_sequence >= 0
            {
                producers.record(&batch, now_ms);
            }
            if header.is_transactional() {
                transactions.data(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_offset,
                    header.last_offset(),
                );
            }
            Ok(())
        })?;
    }
    producers.enforce_limit(|id| transactions.has_open(id));
    stats.producers = producers.len();
    stats.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok((producers, transactions, stats))
}

/// The marker of the control batch at `position`; `None` (with a warning)
/// if it cannot be read as one, which leaves its transaction open.
fn read_marker(
    segment: &Segment,
    header: &BatchHeader,
    position: u64,
    partition: &str,
) -> Result<Option<ControlRecord>, LogError> {
    let size = header.size_bytes();
    if size > CONTROL_BATCH_BYTES_MAX {
        tracing::warn!(
            partition,
            offset = header.base_offset,
            size,
            "oversized control batch skipped"
        );
        return Ok(None);
    }
    let mut bytes = vec![0u8; size];
    segment
        .log_file()
        .read_exact_at(&mut bytes, position)
        .context(|| {
            format!(
                "reading a control batch of {}",
                segment.log_path().display()
            )
        })?;
    match RecordBatch::parse_and_verify(&bytes).and_then(|batch| ControlRecord::of(&batch)) {
        Ok(marker) => Ok(Some(marker)),
        Err(error) => {
            tracing::warn!(
                partition,
                offset = header.base_offset,
                "unreadable control batch: {error}"
            );
            Ok(None)
        }
    }
}

/// Calls `visit` with the header of every batch in `segment` and its file
/// position, in order.
fn walk(
    segment: &Segment,
    window: &mut [u8],
    partition: &str,
    mut visit: impl FnMut(&BatchHeader, u64) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let size = segment.size_bytes();
    let file = segment.log_file();
    let mut position = 0u64;
    let (mut window_start, mut window_len) = (0u64, 0usize);
    let mut last_batch_bytes = 0u64;
    while position < size {
        let header_end = position + BATCH_HEADER_BYTES as u64;
        if position < window_start || header_end > window_start + window_len as u64 {
            let want = if last_batch_bytes >= HEADER_ONLY_AFTER_BATCH_BYTES {
                BATCH_HEADER_BYTES
            } else {
                window.len()
            };
            let len =
                usize::try_from((size - position).min(want as u64)).expect("bounded by the window");
            file.read_exact_at(&mut window[..len], position)
                .context(|| {
                    format!(
                        "reading batch headers of {} at {position}",
                        segment.log_path().display()
                    )
                })?;
            window_start = position;
            window_len = len;
        }
        let at = usize::try_from(position - window_start).expect("inside the window");
        let header = match BatchHeader::parse(&window[at..window_len]).and_then(|h| {
            h.check()?;
            Ok(h)
        }) {
            Ok(header) if header.size_bytes() as u64 <= size - position => header,
            Ok(_) | Err(_) => {
                tracing::warn!(
                    partition,
                    segment = %segment.log_path().display(),
                    position,
                    "unreadable batch header: producer state rebuilt without the rest of this segment"
                );
                return Ok(());
            }
        };
        visit(&header, position)?;
        last_batch_bytes = header.size_bytes() as u64;
        position += last_batch_bytes;
    }
    Ok(())
}
