//! What the operator tests share: an embedded log in a temporary
//! directory, records appended with chosen keys and timestamps, a
//! pipeline's app run to the end of its inputs, and a topic read back.

#![allow(dead_code, reason = "each test binary uses part of the support")]

use std::collections::BTreeMap;
use std::path::Path;

use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use strata::runtime::{App, Location, RunOptions, RunSummary};

/// A record as written or read: key, value (none: a tombstone),
/// timestamp.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rec {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
    pub timestamp: i64,
}

impl Rec {
    pub fn text(key: &str, value: &str, timestamp: i64) -> Self {
        Self {
            key: key.as_bytes().to_vec(),
            value: Some(value.as_bytes().to_vec()),
            timestamp,
        }
    }

    /// A record with no value.
    pub fn tombstone(key: &str, timestamp: i64) -> Self {
        Self {
            key: key.as_bytes().to_vec(),
            value: None,
            timestamp,
        }
    }

    pub fn key_text(&self) -> String {
        String::from_utf8(self.key.clone()).expect("a text key")
    }

    pub fn value_text(&self) -> String {
        let value = self.value.clone().expect("a value, not a tombstone");
        String::from_utf8(value).expect("a text value")
    }
}

/// A base for timestamps: an hour ago, on a whole hour (retention keeps
/// it; windows line up with it).
pub fn base_ms() -> i64 {
    let hour = 3_600_000;
    (now_ms() / hour - 1) * hour
}

/// Appends `records` to `topic` partition `partition` in one batch per
/// 500 records, creating the topic with `partitions` partitions first.
pub fn append(data: &Path, topic: &str, partitions: i32, partition: i32, records: &[Rec]) {
    let log = LogManager::open(data, LogConfig::default()).expect("log opens");
    if log.topic(topic).is_none() {
        log.create_topic(topic, partitions, BTreeMap::new())
            .expect("topic created");
    }
    let log_partition = log.partition(topic, partition).expect("partition exists");
    for chunk in records.chunks(500) {
        let mut builder = BatchBuilder::new(Compression::None);
        for r in chunk {
            builder
                .push(NewRecord {
                    key: Some(&r.key),
                    value: r.value.as_deref(),
                    timestamp: r.timestamp,
                    headers: &[],
                })
                .expect("record fits");
        }
        log_partition
            .append(&builder.build().expect("batch builds"))
            .expect("append succeeds");
    }
    drop(log_partition);
    log.close().expect("log closes");
}

/// Runs `app` on the log in `data` until the ends its inputs had.
pub fn run(app: &App, data: &Path) -> RunSummary {
    let location = Location::embedded(data, app.name());
    let options = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime
        .block_on(strata::runtime::ops::run(app, &location, options))
        .expect("the app runs")
}

/// Every record of every partition of `topic`, per partition in log order
/// (none when the topic does not exist).
pub fn read(data: &Path, topic: &str) -> Vec<Vec<Rec>> {
    let log = LogManager::open(data, LogConfig::default()).expect("log opens");
    let Some(found) = log.topic(topic) else {
        log.close().expect("log closes");
        return Vec::new();
    };
    let count = found.partitions.len() as i32;
    drop(found);
    let mut out = Vec::new();
    for p in 0..count {
        let partition = log.partition(topic, p).expect("partition");
        let bytes = partition
            .read(0, u64::MAX)
            .expect("read")
            .read_to_vec()
            .expect("slices read");
        let mut records = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let batch = RecordBatch::parse_and_verify(rest).expect("valid batch");
            for record in batch.records(64 << 20).expect("records").iter() {
                let record = record.expect("record decodes");
                records.push(Rec {
                    key: record.key.unwrap_or_default().to_vec(),
                    value: record.value.map(<[u8]>::to_vec),
                    timestamp: record.timestamp,
                });
            }
            rest = &rest[batch.size_bytes()..];
        }
        out.push(records);
    }
    log.close().expect("log closes");
    out
}

/// Every record of `topic`, all partitions, sorted.
pub fn read_sorted(data: &Path, topic: &str) -> Vec<Rec> {
    let mut all: Vec<Rec> = read(data, topic).into_iter().flatten().collect();
    all.sort();
    all
}
