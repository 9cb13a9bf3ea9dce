//! Event-time windows: [`Tumbling`] and [`Hopping`] make a [`Windows`],
//! which says which windows a timestamp falls in, how long a window stays
//! open after its end for late records (the grace period) and when its
//! aggregate is emitted; [`Windowed`] is the key of a window's aggregate.
//!
//! Windows are aligned to the epoch: the windows of size `s` advancing by
//! `a` start at every multiple of `a`, and a window holds the timestamps
//! `start ≤ t < start + s` (so a tumbling window is a hopping one with
//! `a = s`, and a timestamp falls in `s / a` windows).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When a window's aggregate is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// At every record the window takes: a stream of updates.
    OnUpdate,
    /// Once, when the window closes (its end plus grace has passed the
    /// watermark): the final aggregate only (Kafka Streams' suppression).
    OnClose,
}

/// A window definition; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub(crate) size_ms: i64,
    pub(crate) advance_ms: i64,
    pub(crate) grace_ms: i64,
    pub(crate) emit: Emit,
}

/// Windows of one size, back to back.
pub struct Tumbling;

/// Windows of one size starting every `advance`, overlapping.
pub struct Hopping;

impl Tumbling {
    pub fn of(size: Duration) -> Windows {
        Windows::new(millis(size), millis(size))
    }
}

impl Hopping {
    pub fn of(size: Duration, advance: Duration) -> Windows {
        Windows::new(millis(size), millis(advance))
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Windows {
    fn new(size_ms: i64, advance_ms: i64) -> Self {
        Self {
            size_ms,
            advance_ms,
            grace_ms: 0,
            emit: Emit::OnUpdate,
        }
    }

    /// How long after its end a window still takes records (default 0).
    /// A record for windows all closed is late: dropped, counted, and
    /// written to the late topic if one is given.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace_ms = millis(grace);
        self
    }

    /// Emit each window's aggregate once, when it closes.
    pub fn emit_on_close(mut self) -> Self {
        self.emit = Emit::OnClose;
        self
    }

    pub fn size_ms(&self) -> i64 {
        self.size_ms
    }

    pub fn advance_ms(&self) -> i64 {
        self.advance_ms
    }

    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    pub fn emit(&self) -> Emit {
        self.emit
    }

    /// Why these windows cannot be used, if they cannot.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.size_ms <= 0 {
            return Err("a window's size must be at least 1 ms".into());
        }
        if self.advance_ms <= 0 || self.advance_ms > self.size_ms {
            return Err(format!(
                "a hopping window advances by 1 ms to its size ({} ms), not {} ms",
                self.size_ms, self.advance_ms
            ));
        }
        if self.grace_ms < 0 {
            return Err("a window's grace period cannot be negative".into());
        }
        Ok(())
    }

    /// The starts of the windows `timestamp` falls in, earliest first.
    pub fn starts(&self, timestamp: i64) -> impl Iterator<Item = i64> + use<> {
        let (size, advance) = (self.size_ms, self.advance_ms);
        let last = timestamp.div_euclid(advance);
        let first = timestamp.saturating_sub(size).div_euclid(advance) + 1;
        (first..=last).map(move |k| k.saturating_mul(advance))
    }

    /// The first instant the window starting at `start` no longer takes
    /// records: once the watermark reaches it, the window is closed.
    pub fn closes_at(&self, start: i64) -> i64 {
        start
            .saturating_add(self.size_ms)
            .saturating_add(self.grace_ms)
    }

    /// The least window end greater than `after`: ends fall on `k ·
    /// advance + size`, so nothing can close between two of them.
    pub(crate) fn next_end_after(&self, after: i64) -> i64 {
        let k = after
            .saturating_sub(self.size_ms)
            .div_euclid(self.advance_ms)
            + 1;
        k.saturating_mul(self.advance_ms)
            .saturating_add(self.size_ms)
    }
}

/// The key of a window's aggregate: the record key and the window's
/// bounds, `start ≤ t < end` (ms since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Windowed<K> {
    pub key: K,
    pub start: i64,
    pub end: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn windows(size: i64, advance: i64) -> Windows {
        Windows::new(size, advance)
    }

    proptest! {
        #[test]
        fn a_timestamp_falls_in_exactly_the_windows_that_hold_it(
            size in 1i64..500,
            advance_div in 1i64..10,
            ts in -10_000i64..10_000,
        ) {
            let advance = (size / advance_div).max(1);
            let w = windows(size, advance);
            let starts: Vec<i64> = w.starts(ts).collect();
            let naive: Vec<i64> = (-20_000i64..=20_000)
                .filter(|s| s.rem_euclid(advance) == 0 && *s <= ts && ts < s + size)
                .collect();
            prop_assert_eq!(starts, naive);
        }

        #[test]
        fn no_window_ends_between_an_end_and_the_next(
            size in 1i64..500,
            advance_div in 1i64..10,
            after in -10_000i64..10_000,
        ) {
            let advance = (size / advance_div).max(1);
            let w = windows(size, advance);
            let next = w.next_end_after(after);
            prop_assert!(next > after);
            prop_assert_eq!((next - size).rem_euclid(advance), 0);
            // The end before it is not after `after`.
            prop_assert!(next - advance <= after);
        }
    }

    #[test]
    fn tumbling_windows_hold_one_window_per_timestamp() {
        let w = Tumbling::of(Duration::from_secs(60));
        assert_eq!(w.starts(59_999).collect::<Vec<_>>(), [0]);
        assert_eq!(w.starts(60_000).collect::<Vec<_>>(), [60_000]);
        assert_eq!(w.starts(-1).collect::<Vec<_>>(), [-60_000]);
        assert_eq!(w.closes_at(60_000), 120_000);
    }

    #[test]
    fn bad_windows_are_refused_with_a_reason() {
        assert!(Tumbling::of(Duration::ZERO).check().is_err());
        let too_far = Hopping::of(Duration::from_secs(1), Duration::from_secs(2));
        assert!(too_far.check().unwrap_err().contains("advances"));
        assert!(
            Hopping::of(Duration::from_secs(2), Duration::from_secs(1))
                .check()
                .is_ok()
        );
    }
}
