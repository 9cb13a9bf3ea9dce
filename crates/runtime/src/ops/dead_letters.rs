//! `dlq list` and `dlq show`: the records a version's processors failed on
//! and sent to their dead-letter topics (see `on_error`), each with what a
//! replay did with it (its mark, see `letter`), read from the log (embedded: its segment files, so the app may be running; remote:
//! fetched read_committed, so a letter of an aborted transaction is not
//! shown).

use std::collections::BTreeMap;

use crate::error::RuntimeError;
use crate::letter::{Letter, Replayed, marks, marks_topic};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::on_error::dead_letter_topic;
use crate::topic_read::read_partition_at;
use crate::topology::App;

use super::diff::partition_count;

/// One record a processor failed on, as its dead letter tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub partition: i32,
    /// Its offset in the dead-letter topic.
    pub offset: i64,
    /// Where the record was: topic (as the log names it), partition,
    /// offset.
    pub origin: (String, i32, i64),
    /// When it failed (the letter's timestamp), in ms since the epoch.
    pub failed_at: i64,
    /// The record's own timestamp.
    pub timestamp: i64,
    /// `decode` or `process`.
    pub kind: String,
    pub error: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// What `dlq replay` did with it; None until a replay takes it.
    pub replayed: Option<Replayed>,
}

/// A processor's dead-letter topic and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetters {
    pub processor: String,
    /// As the log names it (with the version's suffix).
    pub topic: String,
    /// Oldest failure first.
    pub letters: Vec<DeadLetter>,
}

impl DeadLetters {
    /// How many letters no replay has taken yet.
    pub fn waiting(&self) -> usize {
        self.letters.iter().filter(|l| l.replayed.is_none()).count()
    }

    /// How many letters of each kind.
    pub fn by_kind(&self) -> BTreeMap<&str, u64> {
        let mut kinds = BTreeMap::new();
        for letter in &self.letters {
            *kinds.entry(letter.kind.as_str()).or_insert(0) += 1;
        }
        kinds
    }
}

/// The dead letters of every processor of `app` (a version's, see
/// [`App::as_version`]) that sends failing records to a topic, or only of
/// `processor`.
pub async fn dead_letters(
    app: &App,
    location: &Location,
    processor: Option<&str>,
) -> Result<Vec<DeadLetters>, RuntimeError> {
    let senders: Vec<_> = (app.processors.iter())
        .filter(|p| processor.is_none_or(|name| p.name == name))
        .filter_map(|p| Some((p, dead_letter_topic(&app.name, &p.name, &p.on_error)?)))
        .collect();
    if let Some(name) = processor
        && senders.is_empty()
    {
        let known = (app.processors.iter()).map(|p| p.name.as_str());
        return Err(RuntimeError::Config(format!(
            "no processor {name:?} sends failing records to a dead-letter topic (processors: {}; give one .on_error(OnError::dead_letter()))",
            known.collect::<Vec<_>>().join(", ")
        )));
    }
    let access = LogAccess::to_read(location).await?;
    let mut all = Vec::new();
    for (spec, topic) in senders {
        let marks_topic = app.log_topic(&marks_topic(&topic));
        let topic = app.log_topic(&topic);
        let mut letters = Vec::new();
        // No marks topic before the first replay.
        let marked_partitions = partition_count(location, access.as_ref(), &marks_topic).await?;
        for partition in 0..partition_count(location, access.as_ref(), &topic).await? {
            let records = read_partition_at(location, access.as_ref(), &topic, partition).await?;
            let mut marked = match partition < marked_partitions {
                true => marks(
                    read_partition_at(location, access.as_ref(), &marks_topic, partition).await?,
                ),
                false => BTreeMap::new(),
            };
            let letters_of = records.into_iter().map(Letter::read);
            // A topic named by `.to_topic` may be shared: each its own.
            let mine = letters_of.filter(|l| l.counts_for(&spec.name));
            letters.extend(mine.map(|l| letter(l, &mut marked)));
        }
        // Oldest failure first, across partitions.
        letters.sort_by_key(|l| (l.failed_at, l.partition, l.offset));
        all.push(DeadLetters {
            processor: spec.name.clone(),
            topic,
            letters,
        });
    }
    Ok(all)
}

/// `letter` as `dlq show` shows it, with its mark taken from `marked`.
fn letter(letter: Letter, marked: &mut BTreeMap<(i64, i64), Replayed>) -> DeadLetter {
    DeadLetter {
        partition: letter.partition,
        offset: letter.offset,
        replayed: marked.remove(&letter.mark_key()),
        origin: letter.origin,
        failed_at: letter.failed_at,
        timestamp: letter.timestamp,
        kind: letter.kind,
        error: letter.error,
        key: letter.key,
        value: letter.value,
    }
}
