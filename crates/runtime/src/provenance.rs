//! Provenance: the headers a derived record carries when its output is
//! declared with `.provenance()`, naming what made it, and reading them
//! back (`<app> explain`).
//!
//! | header | value (text) |
//! |---|---|
//! | `strata.from.app`, `strata.from.version`, `strata.from.processor` | who emitted it |
//! | `strata.from.topic`, `strata.from.partition`, `strata.from.offset` | the input record the processor was called for, as the log names it |
//!
//! A dead letter is read as made by the processor that failed on its
//! record, from its `strata.dlq.*` headers (see `task::dead_letters`).
//!
//! A record emitted while processing an input record names that record;
//! an aggregate names the latest record it took in (the one it was emitted
//! for). A record emitted from a timer, `init` or `close` names no input
//! record: only the first three headers.

use crate::on_error::letter_headers as dead_letters;
use crate::record::{RecordHeader, last_header_text};

/// What every provenance header's name begins with.
pub(crate) const PREFIX: &str = "strata.from.";
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
    /// Read from `headers`; None when the record carries none (an input
    /// from outside the app, or an output declared without provenance).
    ///
    /// The newest provenance wins: the last `strata.from.processor`, with
    /// the input fields after it (fields before it were copied from an
    /// input by a processor that passes headers on). A dead letter is made
    /// by the processor that failed on its record: its `strata.dlq.*`
    /// headers, from the last `strata.dlq.topic` on, when they come after
    /// any provenance, name that record.
    pub(crate) fn of(headers: &[RecordHeader]) -> Option<Self> {
        let last = |name: &str| (headers.iter()).rposition(|(n, _)| n == name);
        // Where each begins: provenance with its processor, a letter with
        // its record's topic (the orders they are written in).
        let (from, letter) = (last(PROCESSOR), last(dead_letters::TOPIC));
        let (names, since) = match (from, letter) {
            (Some(f), Some(l)) if f > l => (FROM, f),
            (_, Some(l)) => (DEAD_LETTER, l),
            (Some(f), None) => (FROM, f),
            (None, None) => return None,
        };
        // The header `name` at or after `since`, as text.
        let text = |name: &str| last_header_text(&headers[since..], name);
        let [app, version, processor, topic, partition, offset] = names;
        let input = match (text(topic), text(partition), text(offset)) {
            (Some(topic), Some(partition), Some(offset)) => (partition.parse().ok())
                .zip(offset.parse().ok())
                .map(|(p, o)| (topic, p, o)),
            _ => None,
        };
        // The app, version and processor headers come first: read them
        // from wherever they are last.
        let named = |name: &str| last_header_text(headers, name).unwrap_or_default();
        Some(Self {
            app: named(app),
            version: named(version),
            processor: named(processor),
            input,
        })
    }
}

/// The header names a provenance is read from: app, version, processor,
/// topic, partition, offset.
type Names = [&'static str; 6];
const FROM: Names = [APP, VERSION, PROCESSOR, TOPIC, PARTITION, OFFSET];
const DEAD_LETTER: Names = [
    dead_letters::APP,
    dead_letters::VERSION,
    dead_letters::PROCESSOR,
    dead_letters::TOPIC,
    dead_letters::PARTITION,
    dead_letters::OFFSET,
];

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

    fn header(name: &str, value: &str) -> RecordHeader {
        (name.to_string(), Some(value.as_bytes().to_vec()))
    }

    #[test]
    fn the_newest_provenance_wins_over_headers_copied_from_an_input() {
        // A timer's record (no input) after headers copied from an input.
        let copied = [
            header(APP, "app"),
            header(PROCESSOR, "split"),
            header(TOPIC, "lines"),
            header(PARTITION, "0"),
            header(OFFSET, "7"),
        ];
        let mut headers = copied.to_vec();
        headers.extend([
            header(APP, "app"),
            header(VERSION, "base"),
            header(PROCESSOR, "tick"),
        ]);
        let read = Provenance::of(&headers).unwrap();
        assert_eq!((read.processor.as_str(), read.input), ("tick", None));
        // A dead letter of a record that carried provenance: made by the
        // processor that failed on it, from that record.
        let mut letter = copied.to_vec();
        letter.extend([
            header(dead_letters::TOPIC, "words"),
            header(dead_letters::PARTITION, "2"),
            header(dead_letters::OFFSET, "40"),
            header(dead_letters::PROCESSOR, "count"),
        ]);
        let read = Provenance::of(&letter).unwrap();
        assert_eq!(read.processor, "count");
        assert_eq!(read.input, Some(("words".to_string(), 2, 40)));
        // A broken offset drops the input only.
        let broken = [
            header(PROCESSOR, "count"),
            header(TOPIC, "words"),
            header(PARTITION, "x"),
            header(OFFSET, "1"),
        ];
        let read = Provenance::of(&broken).unwrap();
        assert_eq!((read.processor.as_str(), read.input), ("count", None));
    }
}
