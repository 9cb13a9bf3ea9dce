//! [`Position`]: where in its input the record a processor is given sits
//! (topic, partition, offset, timestamp, headers): what its context shows
//! besides the key and value. A task keeps one per batch and moves it from
//! record to record, so a record without headers builds nothing.

use std::sync::Arc;

use super::record::RecordHeader;

/// The record being processed, but for its key and value (offset -1 and no
/// headers in `init` and `close`).
#[derive(Debug, Clone)]
pub(crate) struct Position {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub headers: Vec<RecordHeader>,
}

impl Position {
    /// On `topic`'s `partition`, at no record yet (offset -1): for `init`,
    /// `close` and timers at `timestamp`, or to be set per record.
    pub fn before_records(topic: &Arc<str>, partition: i32, timestamp: i64) -> Self {
        Self {
            topic: Arc::clone(topic),
            partition,
            offset: -1,
            timestamp,
            headers: Vec::new(),
        }
    }

    /// Moves to `record` (of this position's topic and partition).
    #[inline]
    pub fn enter(&mut self, record: &strata_record::Record<'_>) {
        self.offset = record.offset;
        self.timestamp = record.timestamp;
        // Most records have no headers: nothing to clear or build for them.
        if record.header_count() > 0 || !self.headers.is_empty() {
            self.headers.clear();
            self.headers.extend(record.headers().map(|h| {
                (
                    String::from_utf8_lossy(h.key).into_owned(),
                    h.value.map(<[u8]>::to_vec),
                )
            }));
        }
    }
}
