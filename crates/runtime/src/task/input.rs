//! [`Input`]: one input topic's partition as a task reads it — its
//! position, and, in a task with several inputs, what it holds of the
//! partition between turns.
//!
//! A task with several inputs processes their records in timestamp order,
//! a record at a time (see `merge`), so it may leave a batch half read,
//! process another input's records, and come back. The input keeps the
//! fetched batches it has not taken up yet and the batch being read: its
//! records section (borrowed from the fetch, or decompressed once) with a
//! [`RecordCursor`] into it. No batch is checked or decompressed twice;
//! a record is parsed again only where the task looks at its head again
//! (a few varints).
//!
//! Invariants:
//! - `next` is the offset after the last record processed (or passed
//!   over: a control batch, an aborted transaction's batch); it is what a
//!   commit writes, and it only grows.
//! - Records come out of the buffer in offset order, each at most once,
//!   none below `next`, none at or past the input's target.
//! - A batch is taken up only once the one before is read to its end, so
//!   moving `next` past a batch never skips an unread record.
//!
//! What is buffered is never committed: after a restart the task fetches
//! again from `next`, and the same records come out in the same order.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::log_access::{Fetched, parse_batch};
use strata_client::AbortedFilter;
use strata_record::{BatchHeader, RecordCursor, RecordError};

use super::DECOMPRESSED_BYTES_MAX;

/// An input topic's position in this task, and what it holds of it.
pub(super) struct Input {
    /// As the processor names it.
    pub topic: Arc<str>,
    /// Its name in the log.
    pub log_topic: String,
    pub next: i64,
    /// Fetched batches not taken up yet, back to back (several inputs
    /// only; a task with one reads its fetches in place).
    fetched: Bytes,
    /// Whether `fetched`'s CRCs are checked (see [`Fetched::check_crcs`]).
    check_crcs: bool,
    /// Whether a batch was taken up from `fetched` (a fetch may end inside
    /// a batch: a partial batch after a whole one is cut, not an error).
    took_from_fetch: bool,
    /// Remote (read_committed): the fetch's aborted transactions.
    aborted: Option<AbortedFilter>,
    /// The batch being read.
    open: Option<OpenBatch>,
    /// The partition's end as the last fetch saw it: its log end offset
    /// (remote: its last stable offset). None before the first fetch.
    pub end: Option<i64>,
    /// Since when the input has been caught up with its partition with
    /// nothing buffered (see [`App::max_task_idle`]).
    ///
    /// [`App::max_task_idle`]: crate::App::max_task_idle
    pub idle_since: Option<Instant>,
}

/// A batch being read: its header, its records section and where the
/// reading stands in it.
pub(super) struct OpenBatch {
    pub header: BatchHeader,
    pub section: Bytes,
    pub cursor: RecordCursor,
    /// The cursor asking for store entries a few records ahead of
    /// `cursor` (see `Prefetch`), once the task prefetches.
    pub ahead: Option<RecordCursor>,
    /// Whether an async processor's lookups for it were made.
    prepared: bool,
}

/// The first record an input has to offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Head {
    /// A record at `offset` with `timestamp`, the next to process.
    Record { offset: i64, timestamp: i64 },
    /// Nothing buffered: the input must be fetched.
    Empty,
    /// The input reached its target: nothing more of it is processed.
    AtTarget,
}

/// A batch that fails its checks, at `offset`.
#[derive(Debug)]
pub(super) struct UnreadableAt {
    pub offset: i64,
    pub error: RecordError,
}

impl Input {
    pub fn new(topic: Arc<str>, log_topic: String, next: i64) -> Self {
        Self {
            topic,
            log_topic,
            next,
            fetched: Bytes::new(),
            check_crcs: true,
            took_from_fetch: false,
            aborted: None,
            open: None,
            end: None,
            idle_since: None,
        }
    }

    /// Whether nothing is buffered: no batch being read, none fetched.
    pub fn is_empty(&self) -> bool {
        self.open.is_none() && self.fetched.is_empty()
    }

    /// Keeps what a fetch from `next` brought at `now`, and the
    /// partition's end it saw. Only for an empty input. An input that got
    /// nothing and is caught up is idle from now (if not already).
    pub fn fill(&mut self, fetched: Fetched, now: Instant) {
        debug_assert!(self.is_empty(), "a fetch is kept only by an empty input");
        self.aborted = (!fetched.aborted.is_empty()).then(|| AbortedFilter::new(fetched.aborted));
        self.fetched = fetched.records;
        self.check_crcs = fetched.check_crcs;
        self.took_from_fetch = false;
        self.end = Some(fetched.end);
        if !self.fetched.is_empty() {
            self.idle_since = None;
        } else if self.next >= fetched.end {
            self.idle_since.get_or_insert(now);
        }
    }

    /// Drops what is buffered, as a restart does: the next fetch starts at
    /// `next` again (a processor made anew has none of the lookups made
    /// for the open batch).
    pub fn drop_buffered(&mut self) {
        self.clear();
        self.took_from_fetch = false;
    }

    /// The next record to process, taking up fetched batches as needed:
    /// batches wholly below `next`, control batches and aborted
    /// transactions' batches are passed over (moving `next`; `bytes`
    /// counts what was taken up, for the commit's byte limit). Returns
    /// whether `next` moved too.
    pub fn head(&mut self, limit: i64, bytes: &mut u64) -> Result<(Head, bool), UnreadableAt> {
        let before = self.next;
        loop {
            if self.next >= limit {
                self.clear();
                return Ok((Head::AtTarget, self.next != before));
            }
            let Some(open) = &mut self.open else {
                if !self.take_up(limit, bytes)? {
                    return Ok((Head::Empty, self.next != before));
                }
                continue;
            };
            let mut peek = open.cursor;
            match peek.next(&open.section) {
                Some(Ok(record)) if record.offset < self.next => open.cursor = peek,
                Some(Ok(record)) if record.offset >= limit => self.next = limit,
                Some(Ok(record)) => {
                    let head = Head::Record {
                        offset: record.offset,
                        timestamp: record.timestamp,
                    };
                    return Ok((head, self.next != before));
                }
                Some(Err(error)) => {
                    let offset = open.header.base_offset;
                    return Err(UnreadableAt { offset, error });
                }
                None => self.close_batch(limit),
            }
        }
    }

    /// The batch being read, to read records from with a copy of its
    /// cursor, written back with [`Input::advance`].
    pub fn open_batch(&self) -> Option<&OpenBatch> {
        self.open.as_ref()
    }

    /// The open batch, if an async processor's lookups for it are still
    /// to be made (they are made once: this marks them made).
    pub fn open_batch_to_prepare(&mut self) -> Option<&OpenBatch> {
        let open = self.open.as_mut().filter(|open| !open.prepared)?;
        open.prepared = true;
        Some(open)
    }

    /// Records of the open batch up to `cursor` were processed, the last at
    /// `offset` (None: only records below `next` were passed); `ahead` is
    /// where prefetching stands.
    pub fn advance(
        &mut self,
        cursor: RecordCursor,
        ahead: Option<RecordCursor>,
        offset: Option<i64>,
    ) {
        let open = self
            .open
            .as_mut()
            .expect("records are read from an open batch");
        open.cursor = cursor;
        open.ahead = ahead;
        if let Some(offset) = offset {
            debug_assert!(offset >= self.next, "records are processed in offset order");
            self.next = offset + 1;
        }
    }

    /// The open batch was read to its end: `next` moves past it (as far as
    /// `limit`).
    fn close_batch(&mut self, limit: i64) {
        if let Some(open) = self.open.take() {
            self.next = self.next.max(open.header.next_offset().min(limit));
        }
    }

    /// Takes up the next fetched batch; false when none is left.
    fn take_up(&mut self, limit: i64, bytes: &mut u64) -> Result<bool, UnreadableAt> {
        while !self.fetched.is_empty() {
            let batch = match parse_batch(&self.fetched, self.check_crcs) {
                Ok(batch) => batch,
                // A fetch may end inside a batch; the next fetch starts there.
                Err(_) if self.took_from_fetch => {
                    self.fetched = Bytes::new();
                    return Ok(false);
                }
                Err(error) => {
                    return Err(UnreadableAt {
                        offset: self.next,
                        error,
                    });
                }
            };
            self.took_from_fetch = true;
            let size = batch.size_bytes();
            let header = *batch.header();
            let rest = self.fetched.slice(size..);
            if header.next_offset() <= self.next {
                self.fetched = rest;
                continue;
            }
            *bytes += size as u64;
            let visible = self.aborted.as_mut().is_none_or(|f| f.visible(&batch));
            if header.is_control() || !visible {
                self.next = header.next_offset().min(limit.max(self.next));
                self.fetched = rest;
                continue;
            }
            let records = batch
                .records(DECOMPRESSED_BYTES_MAX)
                .map_err(|error| UnreadableAt {
                    offset: header.base_offset,
                    error,
                })?;
            let cursor = records.cursor();
            let section = match records.into_section() {
                std::borrow::Cow::Borrowed(section) => self.fetched.slice_ref(section),
                std::borrow::Cow::Owned(section) => Bytes::from(section),
            };
            self.open = Some(OpenBatch {
                header,
                section,
                cursor,
                ahead: None,
                prepared: false,
            });
            self.fetched = rest;
            return Ok(true);
        }
        Ok(false)
    }

    /// Drops everything buffered (the input reached its target).
    fn clear(&mut self) {
        self.open = None;
        self.fetched = Bytes::new();
        self.aborted = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_record::{BatchBuilder, Compression, ControlRecord, MarkerKind, NewRecord};

    /// A batch of `values` at `base_offset`, stamped 1000 + offset.
    fn batch(base_offset: i64, values: &[&str], codec: Compression) -> Vec<u8> {
        let mut builder = BatchBuilder::new(codec);
        for (i, value) in values.iter().enumerate() {
            let at = 1_000 + base_offset + i as i64;
            builder
                .push(NewRecord::new(None, value.as_bytes(), at))
                .unwrap();
        }
        let mut bytes = builder.build().unwrap();
        strata_record::set_base_offset(&mut bytes, base_offset);
        bytes
    }

    fn marker(offset: i64) -> Vec<u8> {
        let commit = ControlRecord {
            kind: MarkerKind::Commit,
            coordinator_epoch: 0,
        };
        let mut bytes = commit.batch(7, 0, 1_000);
        strata_record::set_base_offset(&mut bytes, offset);
        bytes
    }

    fn fetched(batches: &[Vec<u8>], end: i64) -> Fetched {
        Fetched {
            records: Bytes::from(batches.concat()),
            log_start_offset: 0,
            end,
            aborted: Vec::new(),
            check_crcs: true,
            sent_ms: 0,
        }
    }

    fn input_at(next: i64) -> Input {
        Input::new(Arc::from("in"), "in".into(), next)
    }

    /// Reads the input a record at a time as the task does: its head, then
    /// the record at the open batch's cursor; returns the records' offsets
    /// and values, and the head that ended the reading.
    fn drain(input: &mut Input, limit: i64) -> (Vec<(i64, String)>, Head) {
        let mut read = Vec::new();
        let mut bytes = 0;
        loop {
            let (head, _) = input.head(limit, &mut bytes).expect("readable");
            let Head::Record { offset, .. } = head else {
                return (read, head);
            };
            let open = input.open_batch().unwrap();
            let (section, mut cursor) = (open.section.clone(), open.cursor);
            let record = cursor.next(&section).unwrap().unwrap();
            assert_eq!(record.offset, offset, "the head is the record read next");
            read.push((
                offset,
                String::from_utf8_lossy(record.value.unwrap()).into_owned(),
            ));
            input.advance(cursor, None, Some(offset));
        }
    }

    #[test]
    fn records_come_out_in_offset_order_from_the_position_on() {
        let mut input = input_at(1);
        let batches = [
            batch(0, &["a", "b", "c"], Compression::None),
            batch(3, &["d", "e"], Compression::Zstd),
        ];
        input.fill(fetched(&batches, 5), Instant::now());
        let (read, ended) = drain(&mut input, i64::MAX);
        let offsets: Vec<i64> = read.iter().map(|r| r.0).collect();
        assert_eq!(offsets, [1, 2, 3, 4]);
        assert_eq!(read[3].1, "e");
        assert_eq!(ended, Head::Empty);
        assert_eq!(input.next, 5);
        assert!(input.is_empty());
    }

    #[test]
    fn a_control_batch_is_passed_over_and_moves_the_position() {
        let mut input = input_at(0);
        let batches = [
            batch(0, &["a"], Compression::None),
            marker(1),
            batch(2, &["b"], Compression::Lz4),
        ];
        input.fill(fetched(&batches, 3), Instant::now());
        let mut bytes = 0;
        let (head, _) = input.head(i64::MAX, &mut bytes).unwrap();
        assert_eq!(
            head,
            Head::Record {
                offset: 0,
                timestamp: 1_000
            }
        );
        let (read, _) = drain(&mut input, i64::MAX);
        assert_eq!(read, [(0, "a".into()), (2, "b".into())]);
        assert_eq!(input.next, 3);
    }

    #[test]
    fn a_batch_after_a_marker_alone_moves_the_position_without_a_record() {
        let mut input = input_at(1);
        input.fill(fetched(&[marker(1)], 2), Instant::now());
        let mut bytes = 0;
        let (head, moved) = input.head(i64::MAX, &mut bytes).unwrap();
        assert_eq!((head, moved), (Head::Empty, true));
        assert_eq!(input.next, 2);
        assert!(
            bytes > 0,
            "a batch taken up counts towards the commit's bytes"
        );
    }

    #[test]
    fn a_target_inside_a_batch_stops_the_input_exactly_there() {
        let mut input = input_at(0);
        let abcd = batch(0, &["a", "b", "c", "d"], Compression::None);
        input.fill(fetched(&[abcd], 4), Instant::now());
        let (read, ended) = drain(&mut input, 2);
        assert_eq!(read.len(), 2);
        assert_eq!(ended, Head::AtTarget);
        assert_eq!(input.next, 2, "nothing at or past the target");
        assert!(input.is_empty(), "what lies past the target is dropped");
    }

    #[test]
    fn a_partial_batch_after_a_whole_one_is_left_for_the_next_fetch() {
        let mut input = input_at(0);
        let whole = batch(0, &["a"], Compression::None);
        let mut cut = batch(1, &["b", "c"], Compression::None);
        cut.truncate(cut.len() - 3);
        input.fill(fetched(&[whole, cut], 3), Instant::now());
        let (read, ended) = drain(&mut input, i64::MAX);
        assert_eq!(read, [(0, "a".into())]);
        assert_eq!((ended, input.next), (Head::Empty, 1));
    }

    #[test]
    fn a_first_batch_that_fails_its_checks_is_an_error_at_the_position() {
        let mut input = input_at(4);
        let mut bad = batch(4, &["a"], Compression::None);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        input.fill(fetched(&[bad], 5), Instant::now());
        let mut bytes = 0;
        let Err(unreadable) = input.head(i64::MAX, &mut bytes) else {
            panic!("a corrupt batch is not read");
        };
        assert_eq!(unreadable.offset, 4);
        assert_eq!(input.next, 4, "nothing skipped");
    }
}
