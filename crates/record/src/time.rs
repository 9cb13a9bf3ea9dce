//! Wall-clock time as the log and the wire see it: milliseconds since the
//! Unix epoch, and RFC 3339 date-times read into them.
//!
//! A leaf: every layer (log, broker, client, cli, runtime) may import it and
//! it imports nothing of the crate. The parser reads one fixed shape, so it
//! stays a few lines of calendar arithmetic rather than a date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> i64 {
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

#[cfg(test)]
mod tests {
    use super::*;

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
