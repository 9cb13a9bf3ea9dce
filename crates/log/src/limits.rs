//! Limits of the log that its errors name and other layers check requests
//! against before they reach it. A leaf: it imports nothing.

/// Most partitions one topic may have.
pub const PARTITIONS_MAX: i32 = 10_000;

/// Most compressed batches inflated at once, in the whole process, to check
/// their records before an append. Each may take up to its topic's
/// decompression limit (64 MiB by default) and about as much again while
/// its buffer grows, so without this bound the memory a broker needs grows
/// with the number of clients sending compressed batches at once: a few
/// hundred bytes of gzip per request inflate to the whole limit.
pub const DECOMPRESSIONS_AT_ONCE_MAX: usize = 2;
