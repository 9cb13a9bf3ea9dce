//! Reading a topic's records as the log holds them, control batches passed
//! over: a batch's records (fetched or read from a file), and a whole
//! partition or topic of an embedded log read from its segment files, for
//! `diff`, `dlq`, `explain` (one record, from the segment holding it) and
//! the test driver (which read while no run holds the log, or beside it:
//! the files are only read), or fetched from a cluster.

use std::path::Path;

use strata_record::RecordBatch;

use crate::error::{RuntimeError, Unreadable};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::record::RecordHeader;

/// Largest decompressed records section of one batch read (for a diff,
/// or by the test driver).
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

/// A record as the log holds it, key and value still encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<RecordHeader>,
}

/// The number of partitions `topic` has in the log at `data_dir` (0 if
/// it was never made).
pub(crate) fn partition_count(data_dir: &Path, topic: &str) -> i32 {
    strata_log::peek_topic_metadata(data_dir, topic).map_or(0, |m| m.partitions)
}

/// Every record of `topic`, partition by partition, each in offset order.
pub(crate) fn read_topic(data_dir: &Path, topic: &str) -> Result<Vec<ReadRecord>, RuntimeError> {
    let mut records = Vec::new();
    for partition in 0..partition_count(data_dir, topic) {
        records.extend(read_partition(data_dir, topic, partition)?);
    }
    Ok(records)
}

/// Every record of one partition of `topic`, in offset order: read from
/// the segment files (embedded) or fetched through `access` (remote,
/// read_committed: an aborted transaction's records left out).
pub(crate) async fn read_partition_at(
    location: &Location,
    access: Option<&LogAccess>,
    topic: &str,
    partition: i32,
) -> Result<Vec<ReadRecord>, RuntimeError> {
    let records = match (location, access) {
        (Location::Embedded { data_dir, .. }, _) => read_partition(data_dir, topic, partition)?,
        (_, Some(access)) => fetch_partition(access, topic, partition).await?,
        (Location::Remote { .. }, None) => Vec::new(),
    };
    Ok(records)
}

/// Every record of one partition of `topic` as `access` fetches it, in
/// offset order: read_committed (an aborted transaction's records left
/// out), up to the end it had when asked, or short of it where a
/// transaction still open holds the rest back (the last stable offset).
pub(crate) async fn fetch_partition(
    access: &LogAccess,
    topic: &str,
    partition: i32,
) -> Result<Vec<ReadRecord>, RuntimeError> {
    let mut records = Vec::new();
    let end = access.end_offset(topic, partition).await?;
    let start = access.start_offset(topic, partition).await?;
    fetch_range(access, (topic, partition), start..end, &mut records).await?;
    Ok(records)
}

/// [`fetch_partition`] read whole: up to the end it had when asked, a
/// transaction still open waited for (every `SETTLE_POLL`) for at most
/// `wait`, after which it is an error. What decides from the records which
/// were seen (a replay's marks) must see them all. None when `stop` was
/// set while it waited.
pub(crate) async fn fetch_partition_settled(
    access: &LogAccess,
    (topic, partition): (&str, i32),
    wait: std::time::Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Option<Vec<ReadRecord>>, RuntimeError> {
    let mut records = Vec::new();
    let end = access.end_offset(topic, partition).await?;
    let mut next = access.start_offset(topic, partition).await?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        next = fetch_range(access, (topic, partition), next..end, &mut records).await?;
        if next >= end {
            return Ok(Some(records));
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RuntimeError::Unsettled {
                topic: topic.to_string(),
                partition,
                at: next,
                end,
            });
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// How often [`fetch_partition_settled`] asks again past an open
/// transaction.
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The records of `range` into `records`, as far as read_committed
/// fetches go; where they stopped: at the end, or where a transaction
/// still open holds the rest back. Bytes that are no batch where one must
/// begin are an error.
async fn fetch_range(
    access: &LogAccess,
    (topic, partition): (&str, i32),
    range: std::ops::Range<i64>,
    records: &mut Vec<ReadRecord>,
) -> Result<i64, RuntimeError> {
    let (mut next, end) = (range.start, range.end);
    while next < end {
        let fetched = match access.fetch(topic, partition, next, 4 << 20).await {
            Ok(fetched) => fetched,
            // Retention moved the start past `next` meanwhile: what it
            // deleted is gone for every reader; on from the new start.
            Err(
                error @ (RuntimeError::Client(strata_client::ClientError::OffsetOutOfRange {
                    ..
                })
                | RuntimeError::Log(strata_log::LogError::OffsetOutOfRange { .. })),
            ) => match access.start_offset(topic, partition).await? {
                start if start > next => {
                    next = start;
                    continue;
                }
                _ => return Err(error),
            },
            Err(error) => return Err(error),
        };
        // Remote, derived topics are written in transactions: an
        // aborted one's records are no part of the version's output.
        let mut visible = strata_client::AbortedFilter::new(fetched.aborted);
        let mut rest: &[u8] = &fetched.records;
        let before = next;
        let mut unparsed = None;
        while !rest.is_empty() {
            let batch = match RecordBatch::parse_and_verify(rest) {
                Ok(batch) => batch,
                Err(error) => {
                    unparsed = Some(error);
                    break;
                }
            };
            rest = &rest[batch.size_bytes()..];
            if batch.header().next_offset() > next {
                if visible.visible(&batch) {
                    take(&batch, topic, partition, records)?;
                }
                next = batch.header().next_offset();
            }
        }
        if next > before {
            continue;
        }
        match unparsed {
            // Held back by a transaction still open (or an answer with
            // nothing yet: asked again by a settled read).
            None => break,
            // A fetch may end inside a batch, never at its start.
            Some(error) => {
                return Err(RuntimeError::UnreadableBatch {
                    topic: topic.to_string(),
                    partition,
                    offset: next,
                    error: Unreadable::batch(error),
                });
            }
        }
    }
    records.retain(|r| r.offset < end);
    Ok(next.min(end))
}

/// The record at `offset` of `topic`/`partition`: read from the segment
/// holding it (embedded) or fetched through `access` (remote,
/// read_committed); None when the log holds none there (deleted by
/// retention or compaction, a control record, an aborted transaction's,
/// or not written yet).
pub(crate) async fn read_record_at(
    location: &Location,
    access: Option<&LogAccess>,
    (topic, partition, offset): (&str, i32, i64),
) -> Result<Option<ReadRecord>, RuntimeError> {
    let mut records = Vec::new();
    match (location, access) {
        (Location::Embedded { data_dir, .. }, _) => {
            let mut failure = None;
            strata_log::peek_batch_holding(data_dir, topic, partition, offset, |batch| {
                failure = take(&batch, topic, partition, &mut records).err();
            })?;
            if let Some(error) = failure {
                return Err(error);
            }
        }
        (_, Some(access)) => {
            let fetched = match access.fetch(topic, partition, offset, 1 << 20).await {
                Ok(fetched) => fetched,
                // Deleted, past the end, or no such partition: no record.
                Err(RuntimeError::Client(
                    strata_client::ClientError::OffsetOutOfRange { .. }
                    | strata_client::ClientError::UnknownTopic(_),
                )) => return Ok(None),
                Err(error) => return Err(error),
            };
            let mut visible = strata_client::AbortedFilter::new(fetched.aborted);
            let mut rest: &[u8] = &fetched.records;
            while let Ok(batch) = RecordBatch::parse_and_verify(rest) {
                rest = &rest[batch.size_bytes()..];
                if batch.header().base_offset > offset {
                    break;
                }
                if batch.header().next_offset() > offset && visible.visible(&batch) {
                    take(&batch, topic, partition, &mut records)?;
                }
            }
        }
        (Location::Remote { .. }, None) => {}
    }
    Ok(records.into_iter().find(|r| r.offset == offset))
}

/// Every record of one partition of `topic`, in offset order (none if
/// the partition was never made).
pub(crate) fn read_partition(
    data_dir: &Path,
    topic: &str,
    partition: i32,
) -> Result<Vec<ReadRecord>, RuntimeError> {
    let mut records = Vec::new();
    let mut failure = None;
    strata_log::peek_batches(data_dir, topic, partition, |batch| {
        if failure.is_none()
            && let Err(error) = take(&batch, topic, partition, &mut records)
        {
            failure = Some(error);
        }
        Ok(())
    })?;
    match failure {
        Some(error) => Err(error),
        None => Ok(records),
    }
}

/// Appends the records of `batch` (of `topic`/`partition`) to `into`;
/// none of a control batch.
pub(crate) fn take(
    batch: &RecordBatch<'_>,
    topic: &str,
    partition: i32,
    into: &mut Vec<ReadRecord>,
) -> Result<(), RuntimeError> {
    if batch.header().is_control() {
        return Ok(());
    }
    let unreadable = |error: Unreadable| RuntimeError::UnreadableBatch {
        topic: topic.to_string(),
        partition,
        offset: batch.header().base_offset,
        error,
    };
    let records =
        (batch.records(DECOMPRESSED_BYTES_MAX)).map_err(|e| unreadable(Unreadable::batch(e)))?;
    for record in records.iter() {
        let record = record.map_err(|e| unreadable(Unreadable::record(e)))?;
        let headers = record.headers().map(|h| {
            let name = String::from_utf8_lossy(h.key).into_owned();
            (name, h.value.map(<[u8]>::to_vec))
        });
        into.push(ReadRecord {
            partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key: record.key.map(<[u8]>::to_vec),
            value: record.value.map(<[u8]>::to_vec),
            headers: headers.collect(),
        });
    }
    Ok(())
}
