//! Where a command starts reading: `earliest`, `latest`, an offset, or a
//! time (RFC 3339 such as `2026-12-01T09:30:00Z`, or `@` and milliseconds
//! since the epoch).

use std::str::FromStr;

use crate::time::parse_rfc3339;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    Latest,
    Offset(i64),
    /// Milliseconds since the epoch.
    Timestamp(i64),
}

impl FromStr for StartAt {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "earliest" | "beginning" => return Ok(Self::Earliest),
            "latest" | "end" => return Ok(Self::Latest),
            _ => {}
        }
        if let Some(ms) = text.strip_prefix('@') {
            return ms
                .parse()
                .map(Self::Timestamp)
                .map_err(|_| format!("'{text}': expected @ and milliseconds since the epoch"));
        }
        if let Ok(offset) = text.parse::<i64>() {
            if offset < 0 {
                return Err(format!("'{text}': offsets are not negative"));
            }
            return Ok(Self::Offset(offset));
        }
        parse_rfc3339(text).map(Self::Timestamp).ok_or_else(|| {
            format!(
                "'{text}' is not earliest, latest, an offset, or a time \
                 (2026-12-01T09:30:00Z or @1764581400000)"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        assert_eq!("earliest".parse(), Ok(StartAt::Earliest));
        assert_eq!("latest".parse(), Ok(StartAt::Latest));
        assert_eq!("42".parse(), Ok(StartAt::Offset(42)));
        assert_eq!(
            "@1700000000000".parse(),
            Ok(StartAt::Timestamp(1_700_000_000_000))
        );
        assert_eq!(
            "2023-11-14T22:13:20Z".parse(),
            Ok(StartAt::Timestamp(1_700_000_000_000))
        );
        assert_eq!(
            "2023-11-14T23:13:20.5+01:00".parse(),
            Ok(StartAt::Timestamp(1_700_000_000_500))
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400_000));
    }

    #[test]
    fn nonsense_is_refused_with_the_accepted_forms() {
        for bad in ["-1", "soon", "2023-13-01T00:00:00Z", "2023-11-14", "@x"] {
            let error = bad.parse::<StartAt>().unwrap_err();
            assert!(error.contains(bad), "{error}");
        }
    }
}
