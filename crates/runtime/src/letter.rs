//! A dead letter read back from its topic (see `task::dead_letters` for
//! how one is written), and the mark `dlq replay` leaves beside it once its
//! record has gone through the processor again.
//!
//! A letter is its record unchanged (key, value, the record's own headers)
//! followed by the nine `strata.dlq.*` headers, in the order
//! [`LETTER_HEADERS`] lists. Only a record ending with exactly those is a
//! letter a replay takes: the record's own headers are what comes before
//! them, so a record that carried `strata.dlq.*` headers of its own (it
//! came from another app's dead-letter topic) keeps them.
//!
//! Marks go to `<dead-letter topic>-replayed` (compacted, as many
//! partitions as the dead-letter topic), the mark of letter O of partition
//! P, which failed at time T, to partition P, keyed `O@T`: a mark left
//! for a letter of a topic since deleted and made again is no mark of the
//! new letter at the same offset.
//!
//! | field | value |
//! |---|---|
//! | key | `O@T`: the letter's offset and the time it failed (ms), as text |
//! | value | `processed`, or `failed` (it failed again and went where the processor's policy sends failures) |
//! | `strata.dlq.replayed.job` | the replay that took it (its start, ms since the epoch, and its process id) |
//! | `strata.dlq.replayed.error` | when it failed again: the error's text |
//!
//! A mark is committed with what the processor did for its letter (see
//! `task::letters`), so a letter with a mark was replayed exactly once and
//! one without was not replayed at all: a letter has one mark (were there
//! two, the first read would be taken).

use std::collections::BTreeMap;

use crate::on_error::letter_headers::{
    APP, ERROR, ERROR_KIND, OFFSET, PARTITION, PROCESSOR, TIMESTAMP, TOPIC, VERSION,
};
use crate::record::{RecordHeader, last_header_text};
use crate::topic_read::ReadRecord;

/// The headers a letter ends with, in order.
pub(crate) const LETTER_HEADERS: [&str; 9] = [
    TOPIC, PARTITION, OFFSET, TIMESTAMP, ERROR, ERROR_KIND, APP, VERSION, PROCESSOR,
];

/// A mark's header naming the replay that took its letter.
pub(crate) const MARK_JOB: &str = "strata.dlq.replayed.job";
/// A mark's header with the error its letter failed with again.
pub(crate) const MARK_ERROR: &str = "strata.dlq.replayed.error";
/// A mark's value: the letter's record went through the processor.
pub(crate) const PROCESSED: &str = "processed";
/// A mark's value: it failed again.
pub(crate) const FAILED: &str = "failed";

/// The topic the marks of dead-letter topic `topic` go to.
pub(crate) fn marks_topic(topic: &str) -> String {
    format!("{topic}-replayed")
}

/// A dead letter as its topic holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Letter {
    pub partition: i32,
    /// Its offset in the dead-letter topic.
    pub offset: i64,
    /// When it failed (the letter's timestamp).
    pub failed_at: i64,
    /// Where its record was: topic (as the log names it), partition,
    /// offset.
    pub origin: (String, i32, i64),
    /// The record's own timestamp.
    pub timestamp: i64,
    /// `decode` or `process`.
    pub kind: String,
    pub error: String,
    /// The processor that failed on it.
    pub processor: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// The record's own headers; None when the record does not end with
    /// the letter's headers in order (not a letter the runtime wrote: it
    /// is shown, never replayed).
    pub headers: Option<Vec<RecordHeader>>,
}

impl Letter {
    /// `record` of a dead-letter topic as a letter. Its fields are read
    /// from the last header of each name (its record may carry
    /// `strata.dlq.*` headers of its own, ahead of the letter's); a
    /// missing or unreadable number reads as -1.
    pub fn read(record: ReadRecord) -> Self {
        let header = |name: &str| last_header_text(&record.headers, name).unwrap_or_default();
        let number = |name: &str| header(name).parse::<i64>().unwrap_or(-1);
        let own = record.headers.len().checked_sub(LETTER_HEADERS.len());
        let headers = own.filter(|&own| {
            (record.headers[own..].iter())
                .zip(LETTER_HEADERS)
                .all(|((name, value), wanted)| name == wanted && value.is_some())
        });
        Letter {
            partition: record.partition,
            offset: record.offset,
            failed_at: record.timestamp,
            origin: (
                header(TOPIC),
                i32::try_from(number(PARTITION)).unwrap_or(-1),
                number(OFFSET),
            ),
            timestamp: number(TIMESTAMP),
            kind: header(ERROR_KIND),
            error: header(ERROR),
            processor: header(PROCESSOR),
            key: record.key,
            value: record.value,
            headers: headers.map(|own| record.headers[..own].to_vec()),
        }
    }

    /// What its mark is keyed by: (its offset, when it failed).
    pub fn mark_key(&self) -> (i64, i64) {
        (self.offset, self.failed_at)
    }

    /// Whether it is `processor`'s letter, as the dlq commands count them
    /// (one without a processor's name counts for every processor that
    /// sends letters to its topic; it is never replayed).
    pub fn counts_for(&self, processor: &str) -> bool {
        self.processor == processor || self.processor.is_empty()
    }
}

/// The key of the mark of the letter at `offset` that failed at
/// `failed_at`.
pub(crate) fn mark_key_text((offset, failed_at): (i64, i64)) -> String {
    format!("{offset}@{failed_at}")
}

/// What a replay did with one letter, as its mark says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// `processed` or `failed`.
    pub outcome: String,
    /// The replay that took it.
    pub job: String,
    /// When it failed again: why.
    pub error: Option<String>,
    /// When it was replayed (the mark's timestamp), ms since the epoch.
    pub at: i64,
}

/// The marks of one partition of a marks topic, by the key of the letter
/// each marks ([`Letter::mark_key`]; a record that is no mark is passed
/// over).
pub(crate) fn marks(records: Vec<ReadRecord>) -> BTreeMap<(i64, i64), Replayed> {
    let mut marks = BTreeMap::new();
    for record in records {
        let offset = (record.key.as_deref())
            .and_then(|key| std::str::from_utf8(key).ok())
            .and_then(|key| key.split_once('@'))
            .and_then(|(o, t)| Some((o.parse::<i64>().ok()?, t.parse::<i64>().ok()?)));
        let outcome = (record.value.as_deref()).map(|v| String::from_utf8_lossy(v).into_owned());
        let (Some(offset), Some(outcome)) = (offset, outcome) else {
            continue;
        };
        // The first mark stands: a letter is replayed once.
        marks.entry(offset).or_insert_with(|| Replayed {
            outcome,
            job: last_header_text(&record.headers, MARK_JOB).unwrap_or_default(),
            error: last_header_text(&record.headers, MARK_ERROR),
            at: record.timestamp,
        });
    }
    marks
}

/// Where in a dead-letter topic a replay begins or ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LetterBound {
    /// The letter at this offset (in each partition).
    Offset(i64),
    /// The letters that failed at this time (ms since the epoch).
    FailedAt(i64),
}

/// Which letters a replay takes: of a kind, and within bounds (both
/// included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LetterFilter {
    /// `decode` or `process`; every kind when None.
    pub kind: Option<String>,
    pub from: Option<LetterBound>,
    pub to: Option<LetterBound>,
}

impl LetterFilter {
    /// Whether `letter` is one the replay takes (its mark aside).
    pub(crate) fn admits(&self, letter: &Letter) -> bool {
        let within = |bound: &Option<LetterBound>, after: bool| match bound {
            None => true,
            Some(LetterBound::Offset(offset)) => match after {
                true => letter.offset >= *offset,
                false => letter.offset <= *offset,
            },
            Some(LetterBound::FailedAt(ms)) => match after {
                true => letter.failed_at >= *ms,
                false => letter.failed_at <= *ms,
            },
        };
        (self.kind.as_ref()).is_none_or(|kind| *kind == letter.kind)
            && within(&self.from, true)
            && within(&self.to, false)
    }
}

/// How many letters a job's marks say it replayed, by outcome (for the
/// job's summary).
pub(crate) fn outcomes<'m>(
    marks: impl Iterator<Item = &'m Replayed>,
    job: &str,
) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for mark in marks.filter(|m| m.job == job) {
        *counts.entry(mark.outcome.clone()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(headers: Vec<RecordHeader>) -> ReadRecord {
        ReadRecord {
            partition: 1,
            offset: 7,
            timestamp: 1_000,
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers,
        }
    }

    fn letter_headers(own: &[(&str, &str)]) -> Vec<RecordHeader> {
        let values = [
            "orders", "2", "40", "900", "bad", "process", "a", "live", "p",
        ];
        (own.iter().copied())
            .chain(LETTER_HEADERS.into_iter().zip(values))
            .map(|(n, v)| (n.to_string(), Some(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn a_letter_gives_back_its_records_own_headers_and_where_it_was() {
        let letter = Letter::read(record(letter_headers(&[(TOPIC, "mine"), ("trace", "t")])));
        assert_eq!(letter.origin, ("orders".to_string(), 2, 40));
        assert_eq!((letter.timestamp, letter.failed_at), (900, 1_000));
        assert_eq!(
            (letter.kind.as_str(), letter.processor.as_str()),
            ("process", "p")
        );
        let own: Vec<_> = letter.headers.unwrap().into_iter().map(|h| h.0).collect();
        assert_eq!(
            own,
            [TOPIC, "trace"],
            "its own headers, a strata.dlq one too"
        );
    }

    #[test]
    fn a_record_without_the_letters_headers_in_order_is_never_replayed() {
        let mut headers = letter_headers(&[]);
        headers.swap(0, 1);
        assert_eq!(Letter::read(record(headers)).headers, None);
        assert_eq!(Letter::read(record(Vec::new())).headers, None);
        let mut cut = letter_headers(&[]);
        cut.pop();
        assert_eq!(Letter::read(record(cut)).headers, None);
    }

    #[test]
    fn the_first_mark_of_a_letter_stands_and_other_records_are_passed_over() {
        let mark = |key: &[u8], value: &str, timestamp| ReadRecord {
            timestamp,
            key: Some(key.to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![(MARK_JOB.to_string(), Some(b"j".to_vec()))],
            ..record(Vec::new())
        };
        let found = marks(vec![
            mark(b"3@10", PROCESSED, 1),
            mark(b"3@10", FAILED, 2),
            mark(b"3@11", FAILED, 3),
            mark(b"3", PROCESSED, 4),
            mark(b"x@1", PROCESSED, 5),
            ReadRecord {
                value: None,
                ..mark(b"4@10", PROCESSED, 6)
            },
        ]);
        assert_eq!(found.len(), 2);
        let first = &found[&(3, 10)];
        assert_eq!((first.outcome.as_str(), first.at), (PROCESSED, 1));
        assert_eq!(first.job, "j");
        assert_eq!(found[&(3, 11)].outcome, FAILED, "another letter at 3");
        assert_eq!(mark_key_text((3, 10)), "3@10");
    }

    #[test]
    fn a_filter_takes_a_kind_and_bounds_both_included() {
        let letter = Letter::read(record(letter_headers(&[])));
        let filter = |kind: Option<&str>, from, to| LetterFilter {
            kind: kind.map(str::to_string),
            from,
            to,
        };
        assert!(filter(None, None, None).admits(&letter));
        assert!(filter(Some("process"), None, None).admits(&letter));
        assert!(!filter(Some("decode"), None, None).admits(&letter));
        let (at, after) = (Some(LetterBound::Offset(7)), Some(LetterBound::Offset(8)));
        assert!(filter(None, at, at).admits(&letter));
        assert!(!filter(None, after, None).admits(&letter));
        let failed = |ms| Some(LetterBound::FailedAt(ms));
        assert!(filter(None, failed(1_000), failed(1_000)).admits(&letter));
        assert!(!filter(None, None, failed(999)).admits(&letter));
    }
}
