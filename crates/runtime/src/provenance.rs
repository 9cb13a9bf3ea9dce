//! Provenance: the headers a derived record carries when its output is
//! declared with `.provenance()`, naming what made it, and reading them
//! back (`<app> explain`).
//!
//! | header | value (text) |
//! |---|---|
//! | `strata.from.app`, `strata.from.version`, `strata.from.processor` | who emitted it |
//! | `strata.from.topic`, `strata.from.partition`, `strata.from.offset` | the input record the processor was called for, as the log names it |
//!
//! A record emitted while processing an input record names that record;
//! an aggregate names the latest record it took in (the one it was emitted
//! for). A record emitted from a timer, `init` or `close` names no input
//! record: only the first three headers.

use crate::record::RecordHeader;

pub(crate) const APP: &str = "strata.from.app";
pub(crate) const VERSION: &str = "strata.from.version";
pub(crate) const PROCESSOR: &str = "strata.from.processor";
pub(crate) const TOPIC: &str = "strata.from.topic";
pub(crate) const PARTITION: &str = "strata.from.partition";
pub(crate) const OFFSET: &str = "strata.from.offset";

/// Who emits a task's records: the app, its version, the processor and
/// its inputs as the log names them (for provenance headers).
#[derive(Clone, Copy)]
pub(crate) struct Origin<'c> {
    pub app: &'c str,
    pub version: &'c str,
    pub processor: &'c str,
    /// The inputs as the processor names them, and as the log does.
    pub inputs: &'c [String],
    pub log_topics: &'c [String],
}

/// The provenance headers of a record `origin` emitted while at
/// `position` (input topic as the processor names it, partition, offset:
/// -1 outside any record).
pub(crate) fn headers(
    origin: &Origin<'_>,
    (topic, partition, offset): (&str, i32, i64),
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (APP, origin.app.to_string()),
        (VERSION, origin.version.to_string()),
        (PROCESSOR, origin.processor.to_string()),
    ];
    let input = (origin.inputs.iter()).position(|t| t == topic);
    if let (Some(input), true) = (input, offset >= 0) {
        headers.extend([
            (TOPIC, origin.log_topics[input].clone()),
            (PARTITION, partition.to_string()),
            (OFFSET, offset.to_string()),
        ]);
    }
    headers
}

/// What a record's provenance headers say made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub app: String,
    pub version: String,
    pub processor: String,
    /// The input record: topic (as the log names it), partition, offset;
    /// None for a record a timer, `init` or `close` emitted.
    pub input: Option<(String, i32, i64)>,
}

impl Provenance {
    /// Read from `headers` (the last of each name); None when the record
    /// carries none (an input from outside the app, or an output declared
    /// without provenance).
    pub(crate) fn of(headers: &[RecordHeader]) -> Option<Self> {
        let text = |name: &str| {
            (headers.iter().rev())
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.as_deref())
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        let processor = text(PROCESSOR)?;
        let input = match (text(TOPIC), text(PARTITION), text(OFFSET)) {
            (Some(topic), Some(partition), Some(offset)) => {
                Some((topic, partition.parse().ok()?, offset.parse().ok()?))
            }
            _ => None,
        };
        Some(Self {
            app: text(APP).unwrap_or_default(),
            version: text(VERSION).unwrap_or_default(),
            processor,
            input,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_written_read_back_as_what_made_the_record() {
        let inputs = ["words".to_string()];
        let log_topics = ["words.v2".to_string()];
        let origin = Origin {
            app: "wordcount",
            version: "v2",
            processor: "count",
            inputs: &inputs,
            log_topics: &log_topics,
        };
        let written: Vec<RecordHeader> = (headers(&origin, ("words", 3, 41)).into_iter())
            .map(|(n, v)| (n.to_string(), Some(v.into_bytes())))
            .collect();
        let read = Provenance::of(&written).unwrap();
        assert_eq!(read.processor, "count");
        assert_eq!(
            (read.app.as_str(), read.version.as_str()),
            ("wordcount", "v2")
        );
        assert_eq!(read.input, Some(("words.v2".to_string(), 3, 41)));
        // From a timer: no input record.
        let written: Vec<RecordHeader> = (headers(&origin, ("words", 3, -1)).into_iter())
            .map(|(n, v)| (n.to_string(), Some(v.into_bytes())))
            .collect();
        assert_eq!(Provenance::of(&written).unwrap().input, None);
        assert_eq!(Provenance::of(&[]), None);
    }
}
