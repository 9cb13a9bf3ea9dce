//! [`Prefetch`]: which stores' entries for a record's key the task asks
//! the CPU for, a few records ahead of the record's turn.

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
pub(super) struct Prefetch {
    candidates: Vec<usize>,
    pub active: Vec<usize>,
    /// Records since the last review.
    since_review: usize,
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
        }
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
