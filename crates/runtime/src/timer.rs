//! Timers: a processor asks to be called back ([`Processor::on_timer`])
//! once a time is reached, in event time (the task's stream time) or in
//! processing time (the run's clock: the machine's, or a test's), for a key
//! of its own.
//!
//! A timer is identified by (domain, time, key): scheduling the same one
//! again changes nothing, cancelling removes it. Timers are state: they
//! live in the processor's timer store (a column family the builder's
//! `.timers()` declares, named `<processor>.timers`), written in the run
//! and committed in the same write batch as the stores, the outbox and the
//! input offsets; with changelogs on, the timer store has one like any
//! store, so a restored task has its timers back.
//!
//! A key of the timer store (the value is empty):
//!
//! | bytes | field |
//! |---|---|
//! | 0 | domain: `0x00` event time, `0x01` processing time |
//! | 1..9 | time, ms since the Unix epoch: an i64 with its sign bit flipped, big-endian (so byte order is numeric order, negative times first) |
//! | 9.. | the timer's key, as given (at most [`TIMER_KEY_BYTES_MAX`] bytes) |
//!
//! and one more entry, key `0xff`, value the task's stream time (i64,
//! big-endian): the greatest record timestamp the task has processed,
//! written with a commit that moved it. The store's byte order is the
//! order timers fire in: by domain, then time, then key.
//!
//! When they fire (see `task::timers`): an event-time timer once the stream
//! time reaches its time, right after the record that moved it there and
//! before the next one; a processing-time timer once the run's clock passes
//! its time, checked between batches and while the task waits for input.
//! A fired timer is removed in the run that fires it, so it fires again
//! after a crash before that run's commit and never after it.
//!
//! [`Processor::on_timer`]: super::Processor::on_timer

use std::fmt;

use super::process_error::ProcessError;
use super::window_key::{time_bytes, time_of};

/// Which clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeDomain {
    /// The task's stream time: the greatest timestamp of the records it has
    /// processed (kept with its state). Deterministic: a replay fires the
    /// same timers at the same records.
    EventTime,
    /// The run's clock: the machine's running the task (a test's
    /// [`ManualClock`](crate::ManualClock) under the test driver).
    ProcessingTime,
}

impl TimeDomain {
    /// The first byte of the domain's keys in the timer store.
    pub(crate) const fn byte(self) -> u8 {
        match self {
            Self::EventTime => 0x00,
            Self::ProcessingTime => 0x01,
        }
    }

    pub(crate) const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0x00 => Some(Self::EventTime),
            0x01 => Some(Self::ProcessingTime),
            _ => None,
        }
    }

    /// Position in per-domain arrays.
    pub(crate) const fn index(self) -> usize {
        self.byte() as usize
    }
}

impl fmt::Display for TimeDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EventTime => "event time",
            Self::ProcessingTime => "processing time",
        })
    }
}

/// A timer as it fires: its domain, its time and the key it was scheduled
/// with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timer {
    pub domain: TimeDomain,
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    pub key: Vec<u8>,
}

impl Timer {
    /// The key as text (keys scheduled from a `&str` or `String`).
    pub fn key_str(&self) -> Result<&str, ProcessError> {
        std::str::from_utf8(&self.key).map_err(|_| {
            ProcessError::msg(format!(
                "the key of the timer at {} ms is not UTF-8: read Timer::key as bytes",
                self.time_ms
            ))
        })
    }
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} key {}",
            self.domain,
            self.time_ms,
            render_bytes(&self.key)
        )
    }
}

/// Largest key a timer may have.
pub const TIMER_KEY_BYTES_MAX: usize = 4096;
/// Most timers a task fires before it commits (a pass): a backlog of due
/// timers fires over several commits instead of stalling one.
pub const TIMERS_FIRED_PER_PASS_MAX: usize = 10_000;

/// Bytes of a timer store key before the timer's own key.
pub(crate) const TIMER_PREFIX_BYTES: usize = 9;
/// The key of the stream-time entry of the timer store.
pub(crate) const STREAM_TIME_KEY: &[u8] = &[0xff];
const _: () = assert!(TimeDomain::ProcessingTime.byte() < STREAM_TIME_KEY[0]);

/// The name of a processor's timer store (its column family, and the name
/// its changelog topic is made from).
pub(crate) fn timer_store_name(processor: &str) -> String {
    format!("{processor}.timers")
}

/// Writes the timer store key of (domain, time, key) into `out`.
pub(crate) fn encode_key(domain: TimeDomain, time_ms: i64, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(TIMER_PREFIX_BYTES + key.len());
    out.push(domain.byte());
    out.extend_from_slice(&time_bytes(time_ms));
    out.extend_from_slice(key);
}

/// The timer of a timer store key; None for the stream-time entry or a key
/// too short to be a timer's.
pub(crate) fn decode_key(raw: &[u8]) -> Option<Timer> {
    let domain = TimeDomain::from_byte(*raw.first()?)?;
    let time: [u8; 8] = raw.get(1..TIMER_PREFIX_BYTES)?.try_into().ok()?;
    Some(Timer {
        domain,
        time_ms: time_of(time),
        key: raw[TIMER_PREFIX_BYTES..].to_vec(),
    })
}

/// The keys of `domain`'s timers due at `upto`: from `.0` (inclusive) to
/// `.1` (exclusive).
pub(crate) fn due_bounds(domain: TimeDomain, upto: i64) -> (Vec<u8>, Vec<u8>) {
    let from = vec![domain.byte()];
    let to = match upto.checked_add(1) {
        Some(after) => {
            let mut to = vec![domain.byte()];
            to.extend_from_slice(&time_bytes(after));
            to
        }
        None => vec![domain.byte() + 1],
    };
    (from, to)
}

/// A timer store key as `dump-state` shows it.
pub(crate) fn render_key(raw: &[u8]) -> String {
    match decode_key(raw) {
        Some(timer) => timer.to_string(),
        None if raw == STREAM_TIME_KEY => "stream time".to_string(),
        None => render_bytes(raw),
    }
}

/// A timer store value as `dump-state` shows it: empty for a timer, the
/// time for the stream-time entry.
pub(crate) fn render_value(raw: &[u8]) -> String {
    match <[u8; 8]>::try_from(raw) {
        Ok(bytes) => i64::from_be_bytes(bytes).to_string(),
        Err(_) if raw.is_empty() => String::new(),
        Err(_) => render_bytes(raw),
    }
}

/// Text as it is (quoted), anything else as hex.
fn render_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => format!("{text:?}"),
        Err(_) => format!("0x{}", strata_record::hex::hex(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(domain: TimeDomain, time_ms: i64, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(domain, time_ms, key, &mut out);
        out
    }

    #[test]
    fn keys_order_by_domain_then_time_then_key() {
        let ordered = [
            key(TimeDomain::EventTime, i64::MIN, b""),
            key(TimeDomain::EventTime, -1, b"z"),
            key(TimeDomain::EventTime, 0, b""),
            key(TimeDomain::EventTime, 0, b"a"),
            key(TimeDomain::EventTime, 0, b"b"),
            key(TimeDomain::EventTime, 1, b"a"),
            key(TimeDomain::EventTime, i64::MAX, b"a"),
            key(TimeDomain::ProcessingTime, i64::MIN, b""),
            key(TimeDomain::ProcessingTime, 5, b""),
            STREAM_TIME_KEY.to_vec(),
        ];
        for pair in ordered.windows(2) {
            assert!(pair[0] < pair[1], "{:?} < {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn the_stream_time_entry_is_not_a_timer() {
        assert_eq!(decode_key(STREAM_TIME_KEY), None);
        assert_eq!(render_key(STREAM_TIME_KEY), "stream time");
    }

    #[test]
    fn due_bounds_take_every_key_at_the_time_and_none_after() {
        let (from, to) = due_bounds(TimeDomain::EventTime, 10);
        let at = key(TimeDomain::EventTime, 10, &[0xff; 8]);
        let after = key(TimeDomain::EventTime, 11, b"");
        assert!(from <= at && at < to);
        assert!(after >= to);
        let (from, to) = due_bounds(TimeDomain::ProcessingTime, i64::MAX);
        let last = key(TimeDomain::ProcessingTime, i64::MAX, b"zz");
        assert!(from <= last && last < to);
        assert!(STREAM_TIME_KEY.to_vec() >= to);
    }

    proptest! {
        #[test]
        fn keys_decode_to_what_was_encoded(
            time in any::<i64>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..20),
            processing in any::<bool>(),
        ) {
            let domain = if processing { TimeDomain::ProcessingTime } else { TimeDomain::EventTime };
            let timer = decode_key(&key(domain, time, &bytes)).unwrap();
            prop_assert_eq!(timer, Timer { domain, time_ms: time, key: bytes });
        }

        #[test]
        fn byte_order_of_keys_is_the_order_of_timers(
            a in (any::<bool>(), any::<i64>(), proptest::collection::vec(any::<u8>(), 0..6)),
            b in (any::<bool>(), any::<i64>(), proptest::collection::vec(any::<u8>(), 0..6)),
        ) {
            let timer = |(p, t, k): (bool, i64, Vec<u8>)| Timer {
                domain: if p { TimeDomain::ProcessingTime } else { TimeDomain::EventTime },
                time_ms: t,
                key: k,
            };
            let (a, b) = (timer(a), timer(b));
            let (ka, kb) = (key(a.domain, a.time_ms, &a.key), key(b.domain, b.time_ms, &b.key));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }
    }
}
