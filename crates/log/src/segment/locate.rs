//! Finding the batch that holds an offset: the offset index names a batch
//! at or before it (an entry every `index.interval.bytes`, 4 KiB by
//! default), and the batch headers from there are walked to the offset.
//!
//! The walk reads [`WINDOW_BYTES`] of the file at a time and parses the
//! headers inside it, instead of a read per header: with small batches
//! (a producer sending a record per request) one index interval holds
//! dozens of them, and a read each made a one-batch fetch cost dozens of
//! system calls. A header that crosses the window's end is read in a new
//! window starting at it.
//!
//! One read of a partition walks a segment more than once (to the batch
//! holding the offset, to the end of what fits the budget, and under
//! read_committed to the last stable offset), so it shares one window per
//! segment between the walks: a one-batch fetch reads the segment's
//! headers once, and the batch itself is answered from the window when
//! it lies inside.
//!
//! An index entry that does not point at a batch boundary (a damaged
//! index) flags the index for a rebuild; readers scan from the segment's
//! start meanwhile.

use std::sync::atomic::Ordering;

use strata_record::{BATCH_HEADER_BYTES, BatchHeader};

use super::{LogError, Segment};

/// Bytes read at once while walking headers: the default index interval,
/// so a walk from an entry is usually one read.
const WINDOW_BYTES: usize = 4 << 10;

/// The bytes of one segment last read, from `at`: what one read of a
/// partition shares between its walks of that segment.
pub(crate) struct Window {
    bytes: [u8; WINDOW_BYTES],
    at: u64,
    len: usize,
}

impl Window {
    pub(crate) fn new() -> Self {
        Self {
            bytes: [0; WINDOW_BYTES],
            at: 0,
            len: 0,
        }
    }

    /// The checked header of the batch at `position`, read from the window
    /// (the window read anew from `position` if it does not hold it).
    fn header(&mut self, segment: &Segment, position: u64) -> Result<BatchHeader, LogError> {
        let holds = position >= self.at
            && position + BATCH_HEADER_BYTES as u64 <= self.at + self.len as u64;
        if !holds {
            segment.header_fits(position, BATCH_HEADER_BYTES)?;
            let left = segment.size.saturating_sub(position);
            let len = usize::try_from(left).map_or(WINDOW_BYTES, |left| left.min(WINDOW_BYTES));
            // Emptied first: a read that fails part way leaves the bytes
            // half overwritten, and a walk that goes on past the failure
            // (a suspect index entry) must not answer them as held.
            self.len = 0;
            segment.read_at(&mut self.bytes[..len], position)?;
            (self.at, self.len) = (position, len);
        }
        let from = usize::try_from(position - self.at).expect("within the window");
        segment.checked_header(&self.bytes[from..from + BATCH_HEADER_BYTES], position)
    }

    /// The segment's bytes from `start` to `end`, if the window holds them
    /// all.
    pub(crate) fn holding(&self, start: u64, end: u64) -> Option<&[u8]> {
        if start < self.at || end > self.at + self.len as u64 || start > end {
            return None;
        }
        let from = usize::try_from(start - self.at).ok()?;
        let to = usize::try_from(end - self.at).ok()?;
        Some(&self.bytes[from..to])
    }
}

impl Segment {
    /// Finds the batch holding `offset`, or the first batch after it.
    /// Returns its position and header, or `None` if the segment ends first.
    pub(crate) fn locate(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        self.locate_in(&mut Window::new(), offset)
    }

    /// [`Segment::locate`] through `window`, which holds this segment's
    /// bytes or none.
    pub(crate) fn locate_in(
        &self,
        window: &mut Window,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let start = match self.index.lookup(offset) {
            Some((indexed, position)) if self.index_points_at(window, indexed, position) => {
                position
            }
            Some(_) | None => 0,
        };
        let mut position = start;
        while position < self.size {
            let header = window.header(self, position)?;
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.size_bytes() as u64;
        }
        Ok(None)
    }

    /// End position of the whole batches that start at `start` and fit in
    /// `max_bytes`, never less than one batch; read through `window`, which
    /// holds this segment's bytes or none.
    pub(crate) fn slice_end_in(
        &self,
        window: &mut Window,
        start: u64,
        max_bytes: u64,
    ) -> Result<u64, LogError> {
        let target = start.saturating_add(max_bytes);
        if target >= self.size {
            return Ok(self.size);
        }
        let mut position = match self.index.lookup_position(target) {
            Some((offset, position))
                if position > start && self.index_points_at(window, offset, position) =>
            {
                position
            }
            _ => start,
        };
        loop {
            let header = window.header(self, position)?;
            let end = position + header.size_bytes() as u64;
            if end > target {
                return Ok(if position == start { end } else { position });
            }
            position = end;
        }
    }

    /// Whether the index entry (offset, position) really is a batch boundary;
    /// if not, the index is flagged for a rebuild and readers scan instead.
    fn index_points_at(&self, window: &mut Window, offset: i64, position: u64) -> bool {
        if self.index_suspect.load(Ordering::Relaxed) {
            return false;
        }
        let ok = window
            .header(self, position)
            .is_ok_and(|header| header.base_offset == offset);
        if !ok {
            tracing::warn!(
                segment = %self.log_path().display(),
                offset, position,
                "offset index entry does not point at a batch; scanning the segment and rebuilding the index"
            );
            self.index_suspect.store(true, Ordering::Relaxed);
        }
        ok
    }
}
