//! Limits of the log that its errors name and other layers check requests
//! against before they reach it. A leaf: it imports nothing.

/// Most partitions one topic may have.
pub const PARTITIONS_MAX: i32 = 10_000;
