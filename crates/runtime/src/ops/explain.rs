//! `explain TOPIC PARTITION OFFSET`: a derived record walked back to the
//! input records it came from, through the provenance headers of outputs
//! declared with `.provenance()` (see `provenance`) and the log: the
//! record, the input record its processor was called for, that one's
//! input record, and so on until a record that names none (an input from
//! outside the app, or an output without provenance).

use crate::error::RuntimeError;
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::provenance::Provenance;
use crate::topic_read::read_record_at;

use super::diff::partition_count;

/// Records walked back at most (provenance naming a record later than
/// itself would go round).
pub const STEPS_MAX: usize = 64;

/// One record on the way back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainStep {
    /// As the log names it.
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record; None when the log no longer holds it (retention or
    /// compaction deleted it).
    pub record: Option<Explained>,
}

/// A record as `explain` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// What made it, if its headers say.
    pub made_by: Option<Provenance>,
}

/// Walks the record at `offset` of `topic`/`partition` (as the log names
/// it) back through its provenance; the first step is that record. At
/// most [`STEPS_MAX`] steps: a walk cut there ends on a record whose
/// provenance names another.
pub async fn explain(
    location: &Location,
    (topic, partition, offset): (&str, i32, i64),
) -> Result<Vec<ExplainStep>, RuntimeError> {
    let access = LogAccess::to_read(location).await?;
    let mut steps: Vec<ExplainStep> = Vec::new();
    let mut next = Some((topic.to_string(), partition, offset));
    while let Some((topic, partition, offset)) = next.take() {
        if steps.len() == STEPS_MAX {
            break;
        }
        let at = (topic.as_str(), partition, offset);
        let record = read_record_at(location, access.as_ref(), at).await?;
        if record.is_none() && steps.is_empty() {
            if partition_count(location, access.as_ref(), &topic).await? <= partition {
                return Err(RuntimeError::Config(format!(
                    "the log has no partition {partition} of {topic:?}: name the topic as the log does (a version's derived topics end in .VERSION)"
                )));
            }
            return Err(RuntimeError::Config(format!(
                "{topic}/{partition} holds no record at offset {offset} (deleted, never written, a transaction marker or an aborted transaction's): give the offset of a record the log still holds"
            )));
        }
        let record = record.map(|r| {
            let made_by = Provenance::of(&r.headers);
            next = made_by.as_ref().and_then(|p| p.input.clone());
            Explained {
                timestamp: r.timestamp,
                key: r.key,
                value: r.value,
                made_by,
            }
        });
        steps.push(ExplainStep {
            topic,
            partition,
            offset,
            record,
        });
    }
    Ok(steps)
}
