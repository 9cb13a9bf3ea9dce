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
    /// The tags of the last keys asked for.
    tags: TagRing,
}

/// The tags of the last [`PREFETCH_AHEAD`] keys asked for, in order: the
/// one pushed half that many pushes ago is the key whose entry should
/// have arrived.
#[derive(Debug, Default)]
struct TagRing {
    tags: [u32; PREFETCH_AHEAD],
    /// Where the next tag goes: the oldest one's place.
    next: usize,
}

const _: () = assert!(
    PREFETCH_AHEAD >= 2 && PREFETCH_AHEAD.is_multiple_of(2),
    "the second step is half as far ahead"
);

impl TagRing {
    /// Pushes `tag` (0: none); returns the tag pushed `PREFETCH_AHEAD / 2`
    /// pushes before it (0 if none was).
    fn push(&mut self, tag: u32) -> u32 {
        let halfway = self.tags[(self.next + PREFETCH_AHEAD / 2) % PREFETCH_AHEAD];
        self.tags[self.next] = tag;
        self.next = (self.next + 1) % PREFETCH_AHEAD;
        halfway
    }
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
            tags: TagRing::default(),
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
        state.prefetch_spilled(self.tags.push(tag), &self.active);
    }

    /// Where no record is [`PREFETCH_AHEAD`] ahead (a batch's last ones):
    /// only the second step, for the key half as far ahead.
    pub fn coast(&mut self, state: &TaskState) {
        if self.active.is_empty() {
            return;
        }
        state.prefetch_spilled(self.tags.push(0), &self.active);
    }

    /// Forgets the keys asked for: the records that come next are not
    /// those that followed them (another batch, or another input).
    pub fn restart(&mut self) {
        self.tags = TagRing::default();
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

#[cfg(test)]
mod tests {
    use super::{PREFETCH_AHEAD, TagRing};

    #[test]
    fn the_ring_gives_back_the_tag_pushed_half_the_distance_before() {
        let mut ring = TagRing::default();
        for tag in 1..=(3 * PREFETCH_AHEAD as u32) {
            let expected = tag.saturating_sub(PREFETCH_AHEAD as u32 / 2);
            assert_eq!(ring.push(tag), expected, "pushing {tag}");
        }
    }
}
