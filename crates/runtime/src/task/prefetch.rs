//! [`Prefetch`]: which stores' entries for a record's key the task asks
//! the CPU for, a few records ahead of the record's turn.

use super::PREFETCH_AHEAD;
use crate::state::TaskState;
use crate::topology::ProcessorSpec;

/// Which stores' entries for a record's key the task asks the CPU for a
/// few records ahead of the record's turn.
///
/// The candidates are the stores encoding keys like the input (or both
/// bytes as they are): a processor keeping state per record key, the
/// common case, then finds its entry in the CPU's cache. Of those, only
/// stores the processor actually reads from are prefetched (reviewed every
/// [`PREFETCH_REVIEW_RECORDS`] records); a wrong guess costs a wasted
/// prefetch.
///
/// In two steps: a key's entries [`PREFETCH_AHEAD`] records ahead, then,
/// half as far ahead, when its entries should have arrived, the slab cells
/// of those whose key and value spilled (a table's rows, typically): each
/// step's line is only known once the line before it is in the cache.
pub(super) struct Prefetch {
    candidates: Vec<usize>,
    active: Vec<usize>,
    /// Records since the last review.
    since_review: usize,
    /// The tags of the last keys asked for, oldest first from `next`.
    tags: [u32; PREFETCH_AHEAD],
    next: usize,
}

/// How many records go by between reviews of which stores are read.
const PREFETCH_REVIEW_RECORDS: usize = 16_384;

impl Prefetch {
    pub fn new(spec: &ProcessorSpec) -> Self {
        use strata_record::codec::Codec;
        let verbatim = |codec| matches!(codec, Codec::Raw | Codec::Utf8);
        let input = spec.key_codec;
        let candidates: Vec<usize> = spec
            .stores
            .iter()
            .enumerate()
            .filter(|(_, store)| {
                store.key_codec == input || (verbatim(store.key_codec) && verbatim(input))
            })
            .map(|(at, _)| at)
            .collect();
        Self {
            active: candidates.clone(),
            candidates,
            since_review: 0,
            tags: [0; PREFETCH_AHEAD],
            next: 0,
        }
    }

    /// Whether any store is prefetched.
    pub fn is_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Asks for `key`'s entries (the key of the record [`PREFETCH_AHEAD`]
    /// ahead), and for the spilled cells of the key half as far ahead.
    pub fn ahead(&mut self, state: &TaskState, key: &[u8]) {
        if self.active.is_empty() {
            return;
        }
        let tag = state.prefetch(key, &self.active);
        let halfway = self.tags[(self.next + PREFETCH_AHEAD / 2) % PREFETCH_AHEAD];
        state.prefetch_spilled(halfway, &self.active);
        self.tags[self.next] = tag;
        self.next = (self.next + 1) % PREFETCH_AHEAD;
    }

    /// Before a batch of `records`: once enough records went by, keeps the
    /// candidates read from at least once per four records since.
    pub fn review(&mut self, state: &mut TaskState, records: usize) {
        if self.candidates.is_empty() {
            return;
        }
        self.since_review += records;
        if self.since_review < PREFETCH_REVIEW_RECORDS {
            return;
        }
        let window = std::mem::take(&mut self.since_review) as u64;
        self.active.clear();
        for store in &self.candidates {
            if state.take_reads(*store) * 4 >= window {
                self.active.push(*store);
            }
        }
    }
}
