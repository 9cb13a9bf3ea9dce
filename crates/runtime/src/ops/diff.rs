//! `diff A B`: how two versions of an app differ. Per store, the keys only
//! in A, only in B and with different values (counted, then the first
//! examples); per derived topic and partition, the first offset where the
//! two streams differ (records compared in order by key and value) and how
//! many records differ.
//!
//! Stores are read from the tasks' committed state (read-only, so the
//! versions may be running); topics from the log's segment files (embedded)
//! or through the client (remote).

use std::collections::BTreeMap;

use crate::error::RuntimeError;
use crate::layout::{self, task_dirs};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::spec::StoreSpec;
use crate::topic_read;
use crate::topology::App;
use crate::versions::Version;

use super::dump_state::open_committed;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffReport {
    pub a: String,
    pub b: String,
    pub stores: Vec<StoreDiff>,
    pub topics: Vec<TopicDiff>,
}

impl DiffReport {
    pub fn differs(&self) -> bool {
        self.stores.iter().any(StoreDiff::differs)
            || self
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.differing > 0)
    }
}

/// As `strata diff` prints it: a line per store and per derived topic's
/// partition, then the verdict.
impl std::fmt::Display for DiffReport {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = (&self.a, &self.b);
        for store in &self.stores {
            writeln!(
                out,
                "store {}: {} only in {a}, {} only in {b}, {} with different values",
                store.store, store.only_a, store.only_b, store.different
            )?;
            for example in &store.examples {
                writeln!(out, "  {example}")?;
            }
        }
        for topic in &self.topics {
            for p in &topic.partitions {
                let first = match p.first_difference {
                    Some(offset) => format!("first difference at offset {offset}"),
                    None => "identical".to_string(),
                };
                writeln!(
                    out,
                    "topic {} partition {}: {} vs {}: {} and {} records, {} differ in place ({} only in {a}, {} only in {b}, order aside), {first}",
                    topic.topic,
                    p.partition,
                    topic.log_topic_a,
                    topic.log_topic_b,
                    p.records_a,
                    p.records_b,
                    p.differing,
                    p.only_a,
                    p.only_b
                )?;
            }
        }
        let verdict = match self.differs() {
            true => "differ",
            false => "are the same",
        };
        writeln!(out, "{a} and {b} {verdict}")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDiff {
    pub store: String,
    pub only_a: u64,
    pub only_b: u64,
    pub different: u64,
    /// The first few differences, rendered as `dump-state` renders entries.
    pub examples: Vec<String>,
}

impl StoreDiff {
    pub fn differs(&self) -> bool {
        self.only_a + self.only_b + self.different > 0
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDiff {
    /// As the processors name it.
    pub topic: String,
    pub log_topic_a: String,
    pub log_topic_b: String,
    pub partitions: Vec<PartitionDiff>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDiff {
    pub partition: i32,
    pub records_a: u64,
    pub records_b: u64,
    /// The offset (in A; in B past A's end) of the first record that
    /// differs.
    pub first_difference: Option<i64>,
    /// Records at the same position with another key or value, plus those
    /// only one stream has.
    pub differing: u64,
    /// Records (key and value) A holds more often than B, wherever they
    /// are: what the streams differ by, order aside.
    pub only_a: u64,
    pub only_b: u64,
}

/// A record as a diff compares it: (offset, key, value).
type Compared = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// A store's entries across a processor's tasks: (partition, key) → value.
pub(crate) type StoreEntries = BTreeMap<(i32, Vec<u8>), Vec<u8>>;

/// Compares version `a` with version `b` (`examples`: how many
/// differences to show per store).
pub async fn diff(
    app: &App,
    location: &Location,
    a: &Version,
    b: &Version,
    examples: usize,
) -> Result<DiffReport, RuntimeError> {
    let mut stores = Vec::new();
    for spec in &app.processors {
        for store in &spec.stores {
            stores.push(diff_store(&spec.name, store, (a, b), examples)?);
        }
    }
    let access = LogAccess::to_read(location).await?;
    let (app_a, app_b) = (app.as_version(location, a).0, app.as_version(location, b).0);
    let mut topics = Vec::new();
    for topic in app.derived_topics() {
        let (log_topic_a, log_topic_b) = (app_a.log_topic(&topic), app_b.log_topic(&topic));
        let count_a = partition_count(location, access.as_ref(), &log_topic_a).await?;
        let count_b = partition_count(location, access.as_ref(), &log_topic_b).await?;
        let mut partitions = Vec::new();
        for partition in 0..count_a.max(count_b) {
            let records_a = if partition < count_a {
                read_partition(location, access.as_ref(), &log_topic_a, partition).await?
            } else {
                Vec::new()
            };
            let records_b = if partition < count_b {
                read_partition(location, access.as_ref(), &log_topic_b, partition).await?
            } else {
                Vec::new()
            };
            partitions.push(compare(partition, &records_a, &records_b));
        }
        topics.push(TopicDiff {
            topic,
            log_topic_a,
            log_topic_b,
            partitions,
        });
    }
    Ok(DiffReport {
        a: a.name.clone(),
        b: b.name.clone(),
        stores,
        topics,
    })
}

/// How store `store` of `processor` differs between versions `a` and `b`.
fn diff_store(
    processor: &str,
    store: &StoreSpec,
    (a, b): (&Version, &Version),
    examples: usize,
) -> Result<StoreDiff, RuntimeError> {
    let entries_a = store_entries(&a.state_dir, processor, &store.name)?;
    let entries_b = store_entries(&b.state_dir, processor, &store.name)?;
    let mut diff = StoreDiff {
        store: store.name.clone(),
        only_a: 0,
        only_b: 0,
        different: 0,
        examples: Vec::new(),
    };
    let key = |k: &(i32, Vec<u8>)| (store.render_key)(&k.1);
    let value = |v: &[u8]| (store.render_value)(v);
    let note = |diff: &mut StoreDiff, line: String| {
        if diff.examples.len() < examples {
            diff.examples.push(line);
        }
    };
    for (k, v) in &entries_a {
        match entries_b.get(k) {
            None => {
                diff.only_a += 1;
                note(
                    &mut diff,
                    format!("only in {}: {} = {}", a.name, key(k), value(v)),
                );
            }
            Some(w) if w != v => {
                diff.different += 1;
                let (v, w) = (value(v), value(w));
                let line = format!(
                    "different: {}: {v} in {}, {w} in {}",
                    key(k),
                    a.name,
                    b.name
                );
                note(&mut diff, line);
            }
            Some(_) => {}
        }
    }
    for (k, w) in &entries_b {
        if !entries_a.contains_key(k) {
            diff.only_b += 1;
            note(
                &mut diff,
                format!("only in {}: {} = {}", b.name, key(k), value(w)),
            );
        }
    }
    Ok(diff)
}

/// Every committed entry of one store across the processor's tasks, keyed
/// by (partition, key).
pub(crate) fn store_entries(
    state_dir: &std::path::Path,
    processor: &str,
    store: &str,
) -> Result<StoreEntries, RuntimeError> {
    let mut entries = BTreeMap::new();
    for (partition, dir) in task_dirs(&layout::processor_dir(state_dir, processor))? {
        let Some(state) = open_committed(&dir)? else {
            continue;
        };
        if !state.stores().iter().any(|s| s == store) {
            continue;
        }
        for (key, value) in state.entries(store)? {
            entries.insert((partition, key), value);
        }
    }
    Ok(entries)
}

fn compare(partition: i32, a: &[Compared], b: &[Compared]) -> PartitionDiff {
    let mut first_difference = None;
    let mut differing = 0u64;
    for at in 0..a.len().max(b.len()) {
        let same = match (a.get(at), b.get(at)) {
            (Some(x), Some(y)) => x.1 == y.1 && x.2 == y.2,
            _ => false,
        };
        if !same {
            differing += 1;
            let offset = a.get(at).or(b.get(at)).map(|r| r.0);
            first_difference = first_difference.or(offset);
        }
    }
    // (key, value) → how many more times A holds it than B.
    let mut balance = std::collections::HashMap::new();
    for record in a {
        *balance.entry((&record.1, &record.2)).or_insert(0i64) += 1;
    }
    for record in b {
        *balance.entry((&record.1, &record.2)).or_insert(0i64) -= 1;
    }
    let only_a = balance.values().filter(|n| **n > 0).sum::<i64>() as u64;
    let only_b = balance
        .values()
        .filter(|n| **n < 0)
        .map(|n| -n)
        .sum::<i64>() as u64;
    PartitionDiff {
        partition,
        records_a: a.len() as u64,
        records_b: b.len() as u64,
        first_difference,
        differing,
        only_a,
        only_b,
    }
}

/// How many partitions `topic` has (0 if it was never made).
pub(crate) async fn partition_count(
    location: &Location,
    access: Option<&LogAccess>,
    topic: &str,
) -> Result<i32, RuntimeError> {
    match (location, access) {
        // A topic never created (a version that emitted nothing) has none.
        (Location::Embedded { data_dir, .. }, _) => {
            Ok(strata_log::peek_topic_metadata(data_dir, topic).map_or(0, |m| m.partitions))
        }
        (_, Some(access)) => Ok(access.partition_count(topic).await?.unwrap_or(0)),
        (Location::Remote { .. }, None) => Ok(0),
    }
}

/// Every record of a partition, in order.
async fn read_partition(
    location: &Location,
    access: Option<&LogAccess>,
    topic: &str,
    partition: i32,
) -> Result<Vec<Compared>, RuntimeError> {
    let records = topic_read::read_partition_at(location, access, topic, partition).await?;
    Ok((records.into_iter())
        .map(|r| (r.offset, r.key, r.value))
        .collect())
}
