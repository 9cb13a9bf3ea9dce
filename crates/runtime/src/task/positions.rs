//! [`Positions`]: a remote task's input offsets and commit mark, as its
//! every transaction writes them into the task's positions log (docs/
//! design.md §5), and where the task finds the committed ones at start
//! and after a failed ship.
//!
//! Kafka forgets a group's committed offsets `offsets.retention.minutes`
//! after they stop changing in a group without members (KIP-211), and the
//! group a task commits its offsets to has none; `groups delete` forgets
//! them at once. So every transaction of a task also holds one record in
//! the task's partition of `<app><suffix>-<processor>-positions` (compacted,
//! one partition per task, like a changelog): the positions live in a log,
//! beside the state, written in the same transaction as the state's
//! changelog records and the derived records. The group's offsets stay
//! committed too, for the tools that read them (lag), as a mirror.
//!
//! ```text
//! key    "positions"
//! value  JSON {"format":1,"lineage":"<16 hex digits>","commit":N,
//!              "offsets":{"<input topic>":next offset, ...}}
//! ```
//!
//! The committed positions are the last record of the partition a
//! `read_committed` reader sees (its last stable offset bounds it): the task
//! is the partition's only writer, and every transaction ends with its
//! record, so the record is among the partition's last offsets (the
//! record, then the transaction's marker); the read looks at a tail of
//! [`TAIL_OFFSETS`] offsets, and a longer one until it finds a record or
//! reaches the partition's start.
//!
//! | the log's | the group's | the task uses |
//! |---|---|---|
//! | none | none | nothing was committed yet |
//! | P | none (expired, deleted) | P |
//! | none | G | G (written before positions logs existed) |
//! | P | G, the same | P |
//! | P | G, another, or offsets without a mark | neither: an error naming both (the group's were changed from outside, or written by an older version of the app: upgrade every instance) |

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{PositionsError, RuntimeError, Unreadable};
use crate::log_access::Remote;
use crate::state::OutboxBatch;
use strata_client::{self as client, AbortedFilter, ClientError};
use strata_record::{BatchBuilder, Compression, NewRecord, RecordBatch};

use super::transaction::CommitMark;
use super::{DECOMPRESSED_BYTES_MAX, TaskSetup};

/// The key of every positions record.
const KEY: &[u8] = b"positions";
/// The format this version writes and reads.
const FORMAT: u32 = 1;
/// How many offsets before the last stable offset the first look takes.
const TAIL_OFFSETS: i64 = 64;
/// Bytes asked for per fetch of the tail (a record is well under 1 KiB
/// per input).
const TAIL_FETCH_BYTES: i32 = 1 << 20;

/// A commit's mark and the input offsets it committed (by the inputs'
/// names as the processor knows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Positions {
    pub mark: CommitMark,
    pub offsets: BTreeMap<String, i64>,
}

/// The value's JSON form.
#[derive(Serialize, Deserialize)]
struct Encoded {
    format: u32,
    lineage: String,
    commit: u64,
    offsets: BTreeMap<String, i64>,
}

impl Positions {
    /// The value written for these positions.
    pub fn encode(&self) -> Vec<u8> {
        let encoded = Encoded {
            format: FORMAT,
            lineage: format!("{:016x}", self.mark.lineage),
            commit: self.mark.commit,
            offsets: self.offsets.clone(),
        };
        serde_json::to_vec(&encoded).expect("positions serialize")
    }

    /// The positions in a record's value; why not, for one this version
    /// cannot read.
    pub fn decode(value: &[u8]) -> Result<Self, PositionsError> {
        let encoded: Encoded =
            serde_json::from_slice(value).map_err(PositionsError::NotPositions)?;
        if encoded.format != FORMAT {
            return Err(PositionsError::Format {
                found: encoded.format,
                reads: FORMAT,
            });
        }
        let lineage = u64::from_str_radix(&encoded.lineage, 16)
            .map_err(|_| PositionsError::Lineage(encoded.lineage.clone()))?;
        Ok(Self {
            mark: CommitMark {
                lineage,
                commit: encoded.commit,
            },
            offsets: encoded.offsets,
        })
    }

    /// The batch that writes these positions to `topic`/`partition` (its
    /// producer fields are stamped when it is shipped, as the outbox's).
    pub fn batch(
        &self,
        task: &str,
        topic: &str,
        partition: i32,
    ) -> Result<OutboxBatch, RuntimeError> {
        let value = self.encode();
        let mut builder = BatchBuilder::new(Compression::None);
        let record = NewRecord::new(Some(KEY), &value, strata_record::time::now_ms());
        let built = builder.push(record).and_then(|()| builder.build());
        let batch = built.map_err(|error| RuntimeError::Ship {
            task: task.to_string(),
            topic: topic.to_string(),
            partition,
            error: error.into(),
        })?;
        Ok(OutboxBatch {
            topic: topic.to_string(),
            partition,
            batch,
        })
    }

    /// "commit N of lineage L (topic=offset, …)", for messages.
    pub fn describe(&self) -> String {
        let offsets: Vec<String> = (self.offsets.iter())
            .map(|(topic, next)| format!("{topic}={next}"))
            .collect();
        format!(
            "commit {} of lineage {:016x} ({})",
            self.mark.commit,
            self.mark.lineage,
            offsets.join(", ")
        )
    }
}

/// The positions the task's last committed transaction wrote: its
/// positions log's, checked against the group's offsets (the table in the
/// module doc). To be asked once the task's InitProducerId has ended
/// every earlier transaction of its id.
pub(crate) async fn committed(
    setup: &TaskSetup,
    group: &str,
    remote: &Remote,
) -> Result<Option<Positions>, RuntimeError> {
    let found = in_group(setup, group, remote).await?;
    let Some(topic) = &setup.positions else {
        return Ok(found.and_then(Marked::positions));
    };
    let in_log = latest(remote, topic, setup.partition).await?;
    // Offsets without a mark were set by a tool (a reset), not by a task.
    if let (
        Some(in_log),
        Some(Marked {
            mark: None,
            offsets,
        }),
    ) = (&in_log, &found)
    {
        return Err(RuntimeError::PositionsDisagree {
            task: setup.name(),
            log: format!("{topic}/{}", setup.partition),
            in_log: in_log.describe(),
            group: group.to_string(),
            in_group: format!("{offsets:?} with no commit mark (set by a tool?)"),
        });
    }
    let in_group = found.and_then(Marked::positions);
    match (in_log, in_group) {
        (None, in_group) => Ok(in_group),
        (Some(in_log), None) => {
            tracing::info!(
                task = %setup.name(),
                "group {group} has no offsets of the task (expired, or deleted): going on from {topic}/{}, {}",
                setup.partition,
                in_log.describe()
            );
            Ok(Some(in_log))
        }
        (Some(in_log), Some(in_group)) if agree(&in_log, &in_group) => Ok(Some(in_log)),
        (Some(in_log), Some(in_group)) => Err(RuntimeError::PositionsDisagree {
            task: setup.name(),
            log: format!("{topic}/{}", setup.partition),
            in_log: in_log.describe(),
            group: group.to_string(),
            in_group: in_group.describe(),
        }),
    }
}

/// Whether the group's offsets mirror the log's positions: the same mark,
/// and the same offset for every input the group has one of.
fn agree(in_log: &Positions, in_group: &Positions) -> bool {
    in_log.mark == in_group.mark
        && (in_group.offsets.iter()).all(|(topic, next)| in_log.offsets.get(topic) == Some(next))
}

/// Offsets found in a group, with the mark their metadata holds (none for
/// offsets a tool set).
struct Marked {
    mark: Option<CommitMark>,
    offsets: BTreeMap<String, i64>,
}

impl Marked {
    fn positions(self) -> Option<Positions> {
        let mark = self.mark?;
        Some(Positions {
            mark,
            offsets: self.offsets,
        })
    }
}

/// The task's offsets in its group; None when the group holds none.
async fn in_group(
    setup: &TaskSetup,
    group: &str,
    remote: &Remote,
) -> Result<Option<Marked>, RuntimeError> {
    let partitions: Vec<(String, i32)> = (setup.log_topics.iter())
        .map(|t| (t.clone(), setup.partition))
        .collect();
    let committed = (remote.admin)
        .committed_with_metadata(group, &partitions, true)
        .await?;
    let mut offsets = BTreeMap::new();
    let mut mark = None;
    for (at, topic) in setup.spec.inputs.iter().enumerate() {
        let Some(found) = committed.get(&partitions[at]) else {
            continue;
        };
        if found.offset >= 0 {
            offsets.insert(topic.clone(), found.offset);
            mark = mark.or(CommitMark::parse(&found.metadata));
        }
    }
    Ok((!offsets.is_empty()).then_some(Marked { mark, offsets }))
}

/// The last positions record a `read_committed` reader sees in
/// `topic`/`partition`; None for a partition (or topic) without one.
pub(crate) async fn latest(
    remote: &Remote,
    topic: &str,
    partition: i32,
) -> Result<Option<Positions>, RuntimeError> {
    let start = match remote
        .admin
        .list_offset(topic, partition, client::EARLIEST)
        .await
    {
        Ok(start) => start.unwrap_or(0),
        // A positions log not made yet (an app from before them).
        Err(ClientError::UnknownTopic(_)) => return Ok(None),
        Err(ClientError::Kafka { code, .. })
            if code == client::error::codes::UNKNOWN_TOPIC_OR_PARTITION =>
        {
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    // A first fetch tells the last stable offset.
    let fetcher = remote.fetcher();
    let first = fetcher.fetch_within(topic, partition, start, 1, Duration::ZERO);
    let end = stable_end(&first.await?);
    let mut tail = TAIL_OFFSETS;
    loop {
        let from = end.saturating_sub(tail).max(start);
        if let Some(found) = last_in(remote, topic, partition, from, end).await? {
            return Ok(Some(found));
        }
        if from == start {
            return Ok(None);
        }
        tail = tail.saturating_mul(4);
    }
}

/// Where a read_committed reader's view of the partition ends.
fn stable_end(fetched: &client::Fetched) -> i64 {
    if fetched.last_stable_offset >= 0 {
        fetched.last_stable_offset
    } else {
        fetched.high_watermark
    }
}

/// The last committed positions record in `from..end`.
async fn last_in(
    remote: &Remote,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
) -> Result<Option<Positions>, RuntimeError> {
    let (mut next, mut found) = (from, None);
    while next < end {
        let fetcher = remote.fetcher();
        let fetched =
            (fetcher.fetch_within(topic, partition, next, TAIL_FETCH_BYTES, Duration::ZERO))
                .await?;
        let before = next;
        let mut filter = AbortedFilter::new(fetched.aborted.clone());
        for batch in fetched.batches() {
            let batch = batch?;
            next = next.max(batch.header().next_offset());
            if !filter.visible(&batch) {
                continue;
            }
            if let Some(positions) = last_of(&batch, before, end, topic, partition)? {
                found = Some(positions);
            }
        }
        if next == before {
            break;
        }
    }
    Ok(found)
}

/// The last positions record of `batch` in `from..end`.
fn last_of(
    batch: &RecordBatch<'_>,
    from: i64,
    end: i64,
    topic: &str,
    partition: i32,
) -> Result<Option<Positions>, RuntimeError> {
    let unreadable = |offset: i64, error: Unreadable| RuntimeError::UnreadableBatch {
        topic: topic.to_string(),
        partition,
        offset,
        error,
    };
    let base = batch.header().base_offset;
    let records = batch
        .records(DECOMPRESSED_BYTES_MAX)
        .map_err(|e| unreadable(base, Unreadable::batch(e)))?;
    let mut found = None;
    for record in records.iter() {
        let record = record.map_err(|e| unreadable(base, Unreadable::record(e)))?;
        if record.offset < from || record.offset >= end || record.key != Some(KEY) {
            continue;
        }
        // A tombstone (the key deleted from outside) leaves no positions.
        found = match record.value {
            None => None,
            Some(value) => {
                let decoded = Positions::decode(value);
                Some(decoded.map_err(|e| unreadable(record.offset, e.into()))?)
            }
        };
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions() -> Positions {
        Positions {
            mark: CommitMark {
                lineage: 0x00ab_cdef_0123_4567,
                commit: 41,
            },
            offsets: [("lines".to_string(), 1_234), ("words".to_string(), 0)].into(),
        }
    }

    #[test]
    fn positions_read_back_from_what_they_write() {
        let written = positions();
        let value = written.encode();
        assert_eq!(
            String::from_utf8_lossy(&value),
            r#"{"format":1,"lineage":"00abcdef01234567","commit":41,"offsets":{"lines":1234,"words":0}}"#
        );
        assert_eq!(Positions::decode(&value).unwrap(), written);
    }

    #[test]
    fn a_value_of_another_format_or_shape_is_refused_not_misread() {
        for value in [
            &br#"{"format":2,"lineage":"00","commit":1,"offsets":{}}"#[..],
            br#"{"format":1,"lineage":"zz","commit":1,"offsets":{}}"#,
            b"strata/1 00 1",
        ] {
            assert!(Positions::decode(value).is_err(), "{value:?}");
        }
    }

    #[test]
    fn the_group_mirrors_the_log_when_its_offsets_are_the_logs() {
        let log = positions();
        let mut group = log.clone();
        group.offsets.remove("words");
        assert!(agree(&log, &group), "a subset of the inputs, the same mark");
        group.offsets.insert("lines".into(), 1_000);
        assert!(!agree(&log, &group), "another offset");
        let mut other = log.clone();
        other.mark.commit += 1;
        assert!(!agree(&log, &other), "another mark");
    }

    #[test]
    fn a_positions_batch_holds_one_keyed_record_of_the_value() {
        let batch = positions()
            .batch("count/3", "app-count-positions", 3)
            .unwrap();
        assert_eq!(
            (batch.topic.as_str(), batch.partition),
            ("app-count-positions", 3)
        );
        let parsed = RecordBatch::parse_and_verify(&batch.batch).unwrap();
        let found = last_of(&parsed, 0, 1, "t", 3).unwrap();
        assert_eq!(found, Some(positions()));
    }
}
