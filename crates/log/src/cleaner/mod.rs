//! Log compaction: for topics with `cleanup.policy` `compact` (or
//! `compact,delete`), a background pass rewrites closed segments keeping
//! the latest record of each key, so a consumer reading from the start sees
//! every live key's latest value without the log growing with every update.
//!
//! [`clean_partition`] is one clean of one partition (what is kept and why
//! is in `clean`); `offset_map` bounds the memory of one clean; `throttle`
//! bounds its I/O. The crash-safe replacement of a segment by its cleaned
//! copy is `log::segment_swap`. Appends and fetches go on during a clean: segments are read without the
//! partition's lock, and only the swap of the finished files takes it.

mod clean;
mod offset_map;
mod throttle;

pub use clean::{CleanOutcome, CleanerConfig, clean_partition};
pub use throttle::Throttle;
