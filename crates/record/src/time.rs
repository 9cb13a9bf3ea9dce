//! Wall-clock time as the log and the wire see it: milliseconds since the
//! Unix epoch (read from the system's clock), RFC 3339 date-times read
//! into them and written from them, and spans of time as people write them
//! (`15m`, `1h 30m`), both by jiff.
//!
//! A leaf: every layer (log, broker, client, cli, runtime) may import it and
//! it imports nothing of the crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 before it).
///
/// Read from the clock directly. Measured reason: a producer stamps each
/// record it is given with this, and through `SystemTime` (its checked
/// subtraction from the epoch and a 128-bit millisecond count) the reading
/// took ~100 instructions beyond the clock's own, 7% of a producing
/// thread's; read directly, ~40 (`strata bench produce`, 100-byte
/// records, `callgrind`).
#[cfg(unix)]
pub fn now_ms() -> i64 {
    let mut now = std::mem::MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `clock_gettime` fills the timespec it is given; it is read
    // only when the call says it succeeded.
    let now = unsafe {
        if libc::clock_gettime(libc::CLOCK_REALTIME, now.as_mut_ptr()) != 0 {
            return now_ms_from_system_time();
        }
        now.assume_init()
    };
    #[allow(
        clippy::useless_conversion,
        reason = "time_t and c_long are 32 bits on some unix"
    )]
    let (secs, nanos) = (i64::from(now.tv_sec), i64::from(now.tv_nsec));
    secs.saturating_mul(1000)
        .saturating_add(nanos / 1_000_000)
        .max(0)
}

/// Milliseconds since the Unix epoch (0 before it).
#[cfg(not(unix))]
pub fn now_ms() -> i64 {
    now_ms_from_system_time()
}

fn now_ms_from_system_time() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Milliseconds since the epoch of an RFC 3339 date-time
/// (`YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`; `t` or a space may stand for `T`,
/// `z` for `Z`, and `±HHMM` for `±HH:MM`), read by jiff: the date must be
/// one the calendar has (no February 31st). Digits past milliseconds are
/// dropped. A date-time without a zone is refused: callers that default
/// to UTC append `Z` themselves.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let at: jiff::Timestamp = text.parse().ok()?;
    Some(at.as_millisecond())
}

/// A span of time as people write it (`90s`, `15m`, `1h 30m`, `2d`, or
/// ISO 8601's `PT1H`), read by jiff (a day is 24 hours); None for anything
/// else, or a negative span.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let span: jiff::Span = text.trim().parse().ok()?;
    let span = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()?;
    std::time::Duration::try_from(span).ok()
}

/// `ms` since the epoch as an RFC 3339 date-time in UTC
/// (`2026-12-05T22:00:00Z`; milliseconds shown when not zero).
pub fn format_rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| format!("{ms}ms"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_read_directly_agrees_with_system_time() {
        for _ in 0..1000 {
            let before = now_ms_from_system_time();
            let now = now_ms();
            let after = now_ms_from_system_time();
            assert!(before <= now && now <= after, "{before} {now} {after}");
        }
    }

    #[test]
    fn spans_read_as_people_write_them() {
        let secs = |text: &str| parse_duration(text).map(|d| d.as_secs());
        assert_eq!(secs("90s"), Some(90));
        assert_eq!(secs("15m"), Some(900));
        assert_eq!(secs("1h 30m"), Some(5_400));
        assert_eq!(secs("2d"), Some(172_800));
        assert_eq!(secs("PT1H"), Some(3_600));
        assert_eq!(secs("-1h"), None);
        assert_eq!(secs("soon"), None);
        assert_eq!(format_rfc3339(1_700_000_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn utc_and_offset_date_times_read_as_epoch_milliseconds() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z"),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20.5+01:00"),
            Some(1_700_000_000_500)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14 22:13:20.123456z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20+0100"),
            Some(1_700_000_000_000)
        );
    }

    #[test]
    fn dates_without_a_zone_or_not_on_the_calendar_are_refused() {
        for bad in [
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-13-01T00:00:00Z",
            "2023-02-31T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:20.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_clock_is_past_2020() {
        assert!(now_ms() > 1_577_836_800_000);
    }
}
