//! [`OpenedWindows`]: the windows a task opened since it started, so that
//! the first record of a new window needs no read of the store to learn
//! that the window is not there.
//!
//! Why: every window's first record finds nothing in the store, and
//! learning that searched RocksDB's memtable for a key it does not hold.
//! In the operators bench's windowed count (2 million records, about
//! 300,000 windows), those reads were a fifth of the task thread's time
//! under `perf`.
//!
//! The invariant: **every window in the store that starts after `since`
//! is noted here.** At the task's start, `since` is the watermark its
//! stores hold: a window is opened only by a record stamped at or after
//! the window's start, that record moved the watermark to its timestamp
//! at least, and the watermark is committed with the window, so every
//! window in the store then starts at or before it. From then on, every
//! window the task opens is noted as it is opened.
//!
//! So a window that starts after `since` and is not noted is absent; any
//! other window is read. Windows are noted by a 32-bit hash of their key
//! (half a 64-bit one's memory, so more of the notes stay in the CPU's
//! cache; a new window shares a hash with one of the `n` noted for its end
//! about once in 4 billion / `n`, and is then read for nothing), grouped by
//! end:
//!
//! - Two windows sharing a hash cost a read, never a wrong answer: a
//!   noted hash means "read it", not "it is there".
//! - Closing forgets a whole end's group at once, once every window of
//!   that end is deleted, so no open window loses its note to a closed
//!   one that shared its hash.
//!
//! Bounded: past [`NOTED_MAX`] notes, every note is forgotten and `since`
//! moves up to the watermark, which keeps the invariant (every window in
//! the store starts at or before the watermark).
//!
//! Crashes and failures: the notes live in the operator, which the task
//! builds anew whenever it starts or goes back to its last commit (a
//! record failed), so notes never describe a store other than the one the
//! task reads. A note of a window whose write was then discarded costs one
//! read.

use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasher;

use foldhash::fast::FixedState;

/// The most windows noted at once (6 to 12 bytes each in their hash
/// sets, about 12 MB at most per operator and task): past it, the
/// notes start again from the watermark.
pub(crate) const NOTED_MAX: usize = 1 << 20;

/// The windows a task opened since it started, by end (see the module).
#[derive(Debug)]
pub(crate) struct OpenedWindows {
    /// Windows starting after this are noted when in the store.
    since: i64,
    by_end: BTreeMap<i64, HashSet<u32, FixedState>>,
    noted: usize,
    hasher: FixedState,
}

impl OpenedWindows {
    /// None noted yet; the store's windows start at or before `watermark`
    /// (the one it holds: `i64::MIN` for none).
    pub fn new(watermark: i64) -> Self {
        Self {
            since: watermark,
            by_end: BTreeMap::new(),
            noted: 0,
            hasher: FixedState::default(),
        }
    }

    /// Notes the window keyed `window`, from `start` to `end`, as opened;
    /// true if it is known to be absent from the store until now (it
    /// starts after `since` and was not noted before), false if it must be
    /// read. `watermark` is the task's: where `since` moves when the
    /// notes are full.
    pub fn open(&mut self, window: &[u8], start: i64, end: i64, watermark: i64) -> bool {
        if self.noted >= NOTED_MAX {
            self.by_end.clear();
            self.noted = 0;
            self.since = self.since.max(watermark);
        }
        let hash = (self.hasher.hash_one(window) >> 32) as u32;
        let group = self.by_end.entry(end).or_default();
        let new = group.insert(hash);
        self.noted += usize::from(new);
        new && start > self.since
    }

    /// Forgets the windows ending at or before `end`: closed, and deleted
    /// from the store.
    pub fn closed_through(&mut self, end: i64) {
        let open = match end.checked_add(1) {
            Some(after) => self.by_end.split_off(&after),
            None => BTreeMap::new(),
        };
        let closed = std::mem::replace(&mut self.by_end, open);
        self.noted -= closed.values().map(HashSet::len).sum::<usize>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_known_absent_only_if_it_starts_after_the_watermark_and_was_not_opened() {
        let mut opened = OpenedWindows::new(1_000);
        // Starts at or before the watermark the store held: it may be there.
        assert!(!opened.open(b"a", 1_000, 2_000, 1_500));
        assert!(!opened.open(b"b", 0, 1_000, 1_500));
        // Starts after it: absent the first time, read afterwards.
        assert!(opened.open(b"a", 2_000, 3_000, 2_100));
        assert!(!opened.open(b"a", 2_000, 3_000, 2_200));
        assert!(opened.open(b"c", 2_000, 3_000, 2_200));
    }

    #[test]
    fn closing_an_end_forgets_its_windows_and_no_others() {
        let mut opened = OpenedWindows::new(i64::MIN);
        assert!(opened.open(b"a", 0, 1_000, 10));
        assert!(opened.open(b"a", 1_000, 2_000, 1_010));
        opened.closed_through(1_000);
        assert_eq!(opened.noted, 1);
        // The window of the end still open is still noted: read, not
        // taken for absent.
        assert!(!opened.open(b"a", 1_000, 2_000, 1_020));
        opened.closed_through(i64::MAX);
        assert_eq!(opened.noted, 0);
    }

    #[test]
    fn full_notes_start_again_from_the_watermark() {
        let mut opened = OpenedWindows::new(i64::MIN);
        opened.noted = NOTED_MAX;
        // Every window in the store starts at or before the watermark
        // (500): one starting there may be in the store; one after it is
        // not.
        assert!(!opened.open(b"a", 500, 1_500, 500));
        assert_eq!(opened.since, 500);
        assert!(opened.open(b"b", 501, 1_501, 501));
    }
}
