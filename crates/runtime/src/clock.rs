//! [`Clock`]: where a run reads processing time ("now", in milliseconds
//! since the epoch): when a processing-time timer is due, how long an idle
//! task may sleep before the next one, and the time `init` and `close` see.
//!
//! A run reads the system's clock unless told otherwise. A test gives it a
//! [`ManualClock`] instead (the test driver does, see `testing`), which
//! stands still until the test moves it, so processing-time timers fire
//! where the test says and nowhere else. Event time (stream time, windows,
//! event-time timers) comes from the records and needs no clock.
//!
//! What a clock does not govern: the commit interval, fetch waits and
//! other timeouts, which are the machine's time on any clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Where a run reads processing time.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The system's clock.
    #[default]
    System,
    /// A clock that moves only when told (see [`ManualClock`]).
    Manual(ManualClock),
}

impl Clock {
    /// Milliseconds since the epoch, now.
    pub fn now_ms(&self) -> i64 {
        match self {
            Self::System => strata_record::time::now_ms(),
            Self::Manual(clock) => clock.now_ms(),
        }
    }
}

/// A clock that stands still until moved; clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `ms` since the epoch.
    pub fn starting_at(ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(ms)))
    }

    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }

    /// Moves the clock forward by `by` (saturating: time does not wrap).
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let _ = (self.0).fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            Some(now.saturating_add(by))
        });
    }
}

impl From<ManualClock> for Clock {
    fn from(clock: ManualClock) -> Self {
        Self::Manual(clock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stands_still_until_moved_and_its_clones_move_with_it() {
        let clock = ManualClock::starting_at(1_000);
        let run: Clock = clock.clone().into();
        assert_eq!(run.now_ms(), 1_000);
        clock.advance(Duration::from_millis(250));
        assert_eq!(run.now_ms(), 1_250, "a clone reads the moved time");
        clock.advance(Duration::MAX);
        assert_eq!(run.now_ms(), i64::MAX, "moving past the end stops there");
    }

    #[test]
    fn the_system_clock_is_the_default() {
        let before = strata_record::time::now_ms();
        let now = Clock::default().now_ms();
        assert!(now >= before);
    }
}
