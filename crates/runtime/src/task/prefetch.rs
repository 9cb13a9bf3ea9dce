//! [`Prefetch`]: which stores' entries for a record the task asks the CPU
//! for, a few records ahead of the record's turn.

use super::PREFETCH_AHEAD;
use crate::spec::WindowKeys;
use crate::state::TaskState;
use crate::topology::ProcessorSpec;
use crate::window_key::window_key;

/// Which stores' entries for a record the task asks the CPU for a few
/// records ahead of the record's turn.
///
/// The candidates are the stores encoding keys like the input (or both
/// bytes as they are): a processor keeping state per record key, the
/// common case, then finds its entry in the CPU's cache. And the window
/// stores over such keys whose windows start on a grid
/// (`App::windows_start_every`), asked for the latest window the record's
/// timestamp falls in: a windowed aggregation's entry. Of those, only
/// stores the processor actually reads from are prefetched (reviewed every
/// [`PREFETCH_REVIEW_RECORDS`] records); a wrong guess costs a wasted
/// prefetch.
///
/// For stores keyed like the input, in two steps: a key's entries
/// [`PREFETCH_AHEAD`] records ahead, then, half as far ahead, when its
/// entries should have arrived, the slab cells of those whose key and value
/// spilled (a table's rows, typically): each step's line is only known once
/// the line before it is in the cache. A window's entry is asked for in
/// the first step only: a window key and an aggregate mostly fit inline.
pub(super) struct Prefetch {
    candidates: Vec<Candidate>,
    /// Stores keyed like the input, prefetched.
    active: Vec<usize>,
    /// Window stores, prefetched.
    windows: Vec<WindowGrid>,
    /// Records since the last review.
    since_review: usize,
    /// The tags of the last keys asked for.
    tags: TagRing,
    /// The window key asked for last (a buffer kept for the next).
    window_key: Vec<u8>,
}

/// A store whose entry for a record the task can name ahead.
#[derive(Debug, Clone, Copy)]
enum Candidate {
    /// Keyed like the input: the record's key.
    Key(usize),
    /// A window store: the latest window of the record's key and time.
    Window(WindowGrid),
}

/// A window store whose windows start every `advance_ms`.
#[derive(Debug, Clone, Copy)]
struct WindowGrid {
    store: usize,
    advance_ms: i64,
}

impl Candidate {
    fn store(&self) -> usize {
        match self {
            Self::Key(store) => *store,
            Self::Window(grid) => grid.store,
        }
    }
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
        let like_input = |codec| codec == input || (verbatim(codec) && verbatim(input));
        let candidates: Vec<Candidate> = (spec.stores.iter().enumerate())
            .filter_map(|(at, store)| match store.window_keys {
                // A window store's keys are never the record's key.
                Some(WindowKeys {
                    key_codec,
                    advance_ms: Some(advance_ms),
                }) if like_input(key_codec) => Some(Candidate::Window(WindowGrid {
                    store: at,
                    advance_ms,
                })),
                Some(_) => None,
                None => like_input(store.key_codec).then_some(Candidate::Key(at)),
            })
            .collect();
        let mut prefetch = Self {
            candidates,
            active: Vec::new(),
            windows: Vec::new(),
            since_review: 0,
            tags: TagRing::default(),
            window_key: Vec::new(),
        };
        prefetch.keep(|_| true);
        prefetch
    }

    /// Whether any store is prefetched.
    pub fn is_active(&self) -> bool {
        !self.active.is_empty() || !self.windows.is_empty()
    }

    /// Asks for the entries of the record [`PREFETCH_AHEAD`] ahead, keyed
    /// `key` and stamped `timestamp`, and for the spilled cells of the key
    /// half as far ahead.
    pub fn ahead(&mut self, state: &TaskState, key: &[u8], timestamp: i64) {
        if !self.active.is_empty() {
            let tag = state.prefetch(key, &self.active);
            state.prefetch_spilled(self.tags.push(tag), &self.active);
        }
        for grid in &self.windows {
            let start = timestamp
                .div_euclid(grid.advance_ms)
                .saturating_mul(grid.advance_ms);
            window_key(key, start, &mut self.window_key);
            state.prefetch(&self.window_key, std::slice::from_ref(&grid.store));
        }
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
        self.keep(|store| state.take_reads(store) * 4 >= window);
    }

    /// Prefetches the candidates whose store `read` says yes to.
    fn keep(&mut self, mut read: impl FnMut(usize) -> bool) {
        self.active.clear();
        self.windows.clear();
        for candidate in &self.candidates {
            if !read(candidate.store()) {
                continue;
            }
            match candidate {
                Candidate::Key(store) => self.active.push(*store),
                Candidate::Window(grid) => self.windows.push(*grid),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use strata_record::codec::Codec;

    use super::{Candidate, PREFETCH_AHEAD, Prefetch, TagRing};
    use crate::{App, Context, ProcessError, Record, Store};

    fn nothing(_: Record<String, String>, _: &mut Context) -> Result<(), ProcessError> {
        Ok(())
    }

    const COUNTS: Store<String, u64> = Store::new("counts");
    const WINDOWS: Store<Vec<u8>, u64> = Store::new("windows");
    const OTHER_WINDOWS: Store<Vec<u8>, u64> = Store::new("other-windows");
    const BY_NUMBER: Store<u64, u64> =
        Store::new("by-number").codecs(Codec::Postcard, Codec::Postcard);

    fn candidates(app: &App) -> Vec<String> {
        let prefetch = Prefetch::new(&app.processors[0]);
        let stores = &app.processors[0].stores;
        (prefetch.candidates.iter())
            .map(|candidate| match candidate {
                Candidate::Key(at) => format!("key {}", stores[*at].name),
                Candidate::Window(grid) => {
                    format!(
                        "window {} every {}",
                        stores[grid.store].name, grid.advance_ms
                    )
                }
            })
            .collect()
    }

    #[test]
    fn a_window_store_on_a_grid_is_asked_for_by_window_and_never_by_the_record_key() {
        let app = App::new("a")
            .processor("p", nothing)
            .input("in")
            .store(COUNTS)
            .store(WINDOWS.codecs(Codec::Raw, Codec::Postcard))
            .window_keys::<String>(Codec::Utf8)
            .windows_start_every(Duration::from_secs(1))
            // No grid declared: its windows cannot be named ahead.
            .store(OTHER_WINDOWS.codecs(Codec::Raw, Codec::Postcard))
            .window_keys::<String>(Codec::Utf8)
            // Keys encoded unlike the input's.
            .store(BY_NUMBER);
        assert_eq!(
            candidates(&app),
            ["key counts", "window windows every 1000"]
        );
        assert!(app.check().is_ok(), "{:?}", app.check());
    }

    #[test]
    fn a_grid_declared_out_of_place_is_refused_saying_what_it_needs() {
        let cases = [
            (
                App::new("a")
                    .processor("p", nothing)
                    .input("in")
                    .store(COUNTS)
                    .windows_start_every(Duration::from_secs(1)),
                "windows_start_every declared before window_keys",
            ),
            (
                App::new("a")
                    .processor("p", nothing)
                    .input("in")
                    .windows_start_every(Duration::from_secs(1)),
                "windows_start_every declared before a store of the processor",
            ),
            (
                App::new("a")
                    .processor("p", nothing)
                    .input("in")
                    .store(WINDOWS)
                    .window_keys::<String>(Codec::Utf8)
                    .windows_start_every(Duration::ZERO),
                "windows_start_every needs an advance of 1 ms or more",
            ),
        ];
        for (app, expected) in cases {
            assert_eq!(app.check().unwrap_err(), expected);
        }
    }

    #[test]
    fn the_ring_gives_back_the_tag_pushed_half_the_distance_before() {
        let mut ring = TagRing::default();
        for tag in 1..=(3 * PREFETCH_AHEAD as u32) {
            let expected = tag.saturating_sub(PREFETCH_AHEAD as u32 / 2);
            assert_eq!(ring.push(tag), expected, "pushing {tag}");
        }
    }
}
