//! Writing to a log on disk and reading it back: opening topics, appending,
//! reading partitions, listing segment files.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;
use strata::log::{LogConfig, LogManager, PartitionLog, Topic};

use super::records::{Stored, batch, decode, decode_committed};
use super::rng::Rng;

/// The timestamp [`append_values`] gives its records.
const APPENDED_AT_MS: i64 = 1_000;

/// Opens the log in `data`, creates `topic` with `partitions` partitions
/// and the topic `config` when it is missing, hands the topic to `write`,
/// and closes the log.
pub fn with_topic<T>(
    data: &Path,
    topic: &str,
    partitions: i32,
    config: &[(&str, &str)],
    write: impl FnOnce(&Topic) -> T,
) -> T {
    let log = LogManager::open(data, LogConfig::default()).expect("log opens");
    let found = match log.topic(topic) {
        Some(found) => found,
        None => {
            let config = config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            log.create_topic(topic, partitions, config)
                .expect("topic created")
        }
    };
    let written = write(&found);
    drop(found);
    log.close().expect("log closes");
    written
}

/// Appends one uncompressed batch of `values` to a partition of an open
/// log.
pub fn append_values(log: &LogManager, topic: &str, partition: i32, values: &[&str]) {
    let partition = log.partition(topic, partition).expect("partition exists");
    partition
        .append(&batch(values, APPENDED_AT_MS))
        .expect("append succeeds");
}

/// A config with tiny segments and a dense index, so few records exercise
/// rolling and index lookups.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Every record from `offset` to the log end, decoded.
pub fn read_all(log: &PartitionLog, offset: i64) -> Vec<Stored> {
    let bytes = log
        .read(offset, u64::MAX)
        .expect("read succeeds")
        .read_to_vec()
        .expect("slices read");
    decode(&bytes)
}

/// What a `read_committed` reader sees from `offset` to the log end (see
/// [`decode_committed`]).
pub fn read_committed(log: &PartitionLog, offset: i64) -> Vec<Stored> {
    let bytes = log
        .read(offset, u64::MAX)
        .expect("read succeeds")
        .read_to_vec()
        .expect("slices read");
    decode_committed(&bytes)
}

/// Appends `bytes` (one or more batches) and returns their records as the
/// log stored them, at the offsets it assigned.
pub fn append_and_decode(log: &PartitionLog, bytes: &[u8]) -> Result<Vec<Stored>> {
    let info = log.append(bytes)?;
    Ok(decode(&super::records::as_stored(bytes, info.base_offset)))
}

/// The `.log` files of a partition directory, oldest segment first.
pub fn segment_logs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut logs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            logs.push(path);
        }
    }
    logs.sort();
    Ok(logs)
}

/// The base offsets of the segments in a partition directory, named by its
/// `.log` files, in ascending order.
pub fn segment_bases(dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(".log") {
            bases.push(stem.parse()?);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Appends keyed records `(key, value or a tombstone, timestamp)` to
/// `topic` (created with `partitions` partitions if missing), each in its
/// key's partition (murmur2, as a producer places it), one batch each.
pub fn append_keyed(
    data: &Path,
    topic: &str,
    partitions: i32,
    records: &[(&str, Option<&str>, i64)],
) {
    with_topic(data, topic, partitions, &[], |t| {
        for (key, value, timestamp) in records {
            let partition =
                strata::client::partitioner::partition_for_key(key.as_bytes(), partitions);
            let mut builder = strata::record::BatchBuilder::new(strata::record::Compression::None);
            builder
                .push(strata::record::NewRecord {
                    key: Some(key.as_bytes()),
                    value: value.map(str::as_bytes),
                    timestamp: *timestamp,
                    headers: &[],
                })
                .expect("record fits");
            t.partitions[partition as usize]
                .append(&builder.build().expect("batch builds"))
                .expect("append succeeds");
        }
    });
}

/// Appends keyed records `(key, value, timestamp)` to `topic` (created
/// with `partitions` partitions if missing), each in its key's partition
/// (murmur2), in batches of 1 to `batch_max` records, each uncompressed,
/// lz4 or zstd, as `rng` draws them.
pub fn append_keyed_batches(
    data: &Path,
    topic: &str,
    partitions: i32,
    records: &[(String, String, i64)],
    batch_max: u64,
    rng: &mut Rng,
) {
    use strata::record::{BatchBuilder, Compression, NewRecord};
    let mut per_partition = vec![Vec::new(); partitions as usize];
    for record in records {
        let partition =
            strata::client::partitioner::partition_for_key(record.0.as_bytes(), partitions);
        per_partition[partition as usize].push(record);
    }
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    with_topic(data, topic, partitions, &[], |t| {
        for (partition, records) in per_partition.iter().enumerate() {
            for chunk in records.chunks(1 + rng.below(batch_max) as usize) {
                let mut builder = BatchBuilder::new(codecs[rng.below(3) as usize]);
                for (key, value, at) in chunk {
                    let record = NewRecord::new(Some(key.as_bytes()), value.as_bytes(), *at);
                    builder.push(record).expect("record fits");
                }
                let batch = builder.build().expect("batch builds");
                t.partitions[partition]
                    .append(&batch)
                    .expect("append succeeds");
            }
        }
    });
}

/// Every record of every partition of `topic` as (key, value) text,
/// sorted.
pub fn read_text_sorted(data: &Path, topic: &str) -> Vec<(String, String)> {
    let log = LogManager::open(data, LogConfig::default()).expect("log opens");
    let partitions = log.topic(topic).map_or(0, |t| t.partitions.len() as i32);
    let text = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).expect("text");
    let mut all: Vec<(String, String)> = (0..partitions)
        .flat_map(|p| read_all(&log.partition(topic, p).expect("partition"), 0))
        .map(|r| (text(r.key), text(r.value)))
        .collect();
    log.close().expect("log closes");
    all.sort();
    all
}
