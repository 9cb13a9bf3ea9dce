//! Model test: under random appends, reads, timestamp lookups, size
//! retention, segment rolls and reopens, a `PartitionLog` must always agree
//! with a plain `Vec` of the records it acknowledged.
//!
//! The model is deliberately naive (a vector indexed by offset, plus the log
//! start offset) so that any disagreement points at the log, not the model.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, ensure};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};
use strata::log::{LogConfig, LogError, PartitionLog, file_name};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use support::{Stored, segment_bases};

const PARTITION: &str = "model-0";
/// Record timestamps start here and drift upwards by `CLOCK_STEP_MS` per
/// record, each jittered, so that they are mostly increasing but often out of
/// order within and across batches, as real producers' clocks are.
const CLOCK_START_MS: i64 = 1_000_000;
const CLOCK_STEP_MS: i64 = 50;
const JITTER_MS: i64 = 1_500;
/// Retention runs with an explicit clock; time retention is off in the model,
/// so its value only has to be fixed.
const NOW_MS: i64 = 1_700_000_000_000;

#[derive(Debug, Clone)]
struct RecordSpec {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    jitter_ms: i64,
}

#[derive(Debug, Clone)]
struct BatchSpec {
    compression: Compression,
    records: Vec<RecordSpec>,
}

#[derive(Debug, Clone)]
enum Op {
    /// One produce request: one or more batches appended in one call.
    Append(Vec<BatchSpec>),
    Read {
        at: Index,
        max_bytes: u64,
    },
    LookUp {
        at: Index,
    },
    RetainBytes(i64),
    SetSegmentBytes(u64),
    Reopen {
        clean: bool,
    },
}

fn compression() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn record_spec() -> impl Strategy<Value = RecordSpec> {
    let key = prop::option::weighted(0.7, prop::collection::vec(any::<u8>(), 0..8));
    // A small alphabet keeps values compressible, as real payloads are.
    let value = prop::option::weighted(0.9, prop::collection::vec(b'a'..=b'f', 0..64));
    (key, value, -JITTER_MS..=JITTER_MS).prop_map(|(key, value, jitter_ms)| RecordSpec {
        key,
        value,
        jitter_ms,
    })
}

fn batch_spec() -> impl Strategy<Value = BatchSpec> {
    (compression(), prop::collection::vec(record_spec(), 1..20)).prop_map(
        |(compression, records)| BatchSpec {
            compression,
            records,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => prop::collection::vec(batch_spec(), 1..=3).prop_map(Op::Append),
        5 => (any::<Index>(), prop_oneof![0..512u64, 512..8192u64, Just(u64::MAX)])
            .prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        4 => any::<Index>().prop_map(|at| Op::LookUp { at }),
        1 => (1..12_000i64).prop_map(Op::RetainBytes),
        1 => prop_oneof![Just(1024u64), 1024..8192u64].prop_map(Op::SetSegmentBytes),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

fn proptest_config() -> Config {
    Config {
        cases: 64,
        max_shrink_iters: 2_000,
        max_shrink_time: 60_000,
        rng_seed: RngSeed::Fixed(0x5741_7a11),
        // Failures are reported with their minimal case; no regression files
        // are written into the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn partition_log_agrees_with_a_vec_of_records(
        ops in prop::collection::vec(op(), 1..48),
        segment_bytes in prop_oneof![Just(1024u64), 1024..16_384u64],
        // Past 4 KiB, a read's walk from an index entry crosses the
        // windows it reads headers in.
        index_interval_bytes in prop_oneof![Just(1u64), 64..1024u64, 4096..16_384u64],
    ) {
        let config = LogConfig {
            segment_bytes,
            index_interval_bytes,
            retention_ms: -1,
            ..LogConfig::default()
        };
        run(config, &ops).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    }
}

fn run(config: LogConfig, ops: &[Op]) -> anyhow::Result<()> {
    let mut harness = Harness::new(config)?;
    for (step, op) in ops.iter().enumerate() {
        harness
            .apply(op)
            .and_then(|()| harness.check_invariants())
            .with_context(|| format!("step {step}: {op:?}"))?;
    }
    Ok(())
}

/// What the log should hold: every record ever acknowledged (offset =
/// index), and the first one retention has not deleted.
#[derive(Default)]
struct Model {
    records: Vec<Stored>,
    log_start: i64,
    batch_bases: BTreeSet<i64>,
    clock_ms: i64,
}

impl Model {
    fn log_end(&self) -> i64 {
        self.records.len() as i64
    }

    fn retained(&self) -> &[Stored] {
        &self.records[self.log_start as usize..]
    }

    fn first_at_or_after(&self, timestamp: i64) -> Option<(i64, i64)> {
        self.retained()
            .iter()
            .find(|r| r.timestamp >= timestamp)
            .map(|r| (r.offset, r.timestamp))
    }
}

struct Harness {
    dir: tempfile::TempDir,
    config: LogConfig,
    log: Option<PartitionLog>,
    model: Model,
}

impl Harness {
    fn new(config: LogConfig) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = PartitionLog::open(dir.path(), PARTITION, config.clone(), true)?;
        Ok(Self {
            dir,
            config,
            log: Some(log),
            model: Model {
                clock_ms: CLOCK_START_MS,
                ..Model::default()
            },
        })
    }

    fn log(&self) -> &PartitionLog {
        self.log
            .as_ref()
            .expect("the log is open between operations")
    }

    fn apply(&mut self, op: &Op) -> anyhow::Result<()> {
        match op {
            Op::Append(batches) => self.append(batches),
            Op::Read { at, max_bytes } => {
                let span = self.model.log_end() - self.model.log_start + 1;
                let offset = self.model.log_start + at.index(span as usize) as i64;
                self.check_read(offset, *max_bytes)
            }
            Op::LookUp { at } => {
                let low = CLOCK_START_MS - JITTER_MS - 2;
                let high = self.model.clock_ms + JITTER_MS + 2;
                let timestamp = low + at.index((high - low + 1) as usize) as i64;
                self.check_lookup(timestamp)
            }
            Op::RetainBytes(retention_bytes) => self.retain_bytes(*retention_bytes),
            Op::SetSegmentBytes(segment_bytes) => {
                self.config.segment_bytes = *segment_bytes;
                self.log().set_config(self.config.clone());
                Ok(())
            }
            Op::Reopen { clean } => self.reopen(*clean),
        }
    }

    fn append(&mut self, specs: &[BatchSpec]) -> anyhow::Result<()> {
        let base_offset = self.model.log_end();
        let mut request = Vec::new();
        let mut appended = Vec::new();
        for spec in specs {
            self.model
                .batch_bases
                .insert(base_offset + appended.len() as i64);
            let mut builder = BatchBuilder::new(spec.compression);
            for record in &spec.records {
                self.model.clock_ms += CLOCK_STEP_MS;
                let stored = Stored {
                    offset: base_offset + appended.len() as i64,
                    timestamp: self.model.clock_ms + record.jitter_ms,
                    key: record.key.clone(),
                    value: record.value.clone(),
                };
                builder.push(NewRecord {
                    key: stored.key.as_deref(),
                    value: stored.value.as_deref(),
                    timestamp: stored.timestamp,
                    headers: &[],
                })?;
                appended.push(stored);
            }
            request.extend_from_slice(&builder.build()?);
        }
        let info = self.log().append(&request)?;
        let count = appended.len() as i64;
        ensure!(
            info.base_offset == base_offset,
            "append landed at {info:?}, expected base {base_offset}"
        );
        ensure!(
            info.last_offset == base_offset + count - 1,
            "{info:?} for {count} records"
        );
        ensure!(info.record_count == count, "{info:?} for {count} records");
        ensure!(info.log_start_offset == self.model.log_start, "{info:?}");
        self.model.records.extend(appended);
        Ok(())
    }

    fn check_read(&self, offset: i64, max_bytes: u64) -> anyhow::Result<()> {
        let (start, end) = (self.model.log_start, self.model.log_end());
        let read = self.log().read(offset, max_bytes)?;
        ensure!(
            (read.log_start_offset, read.log_end_offset) == (start, end),
            "read reports log start {} and end {}, model has {start} and {end}",
            read.log_start_offset,
            read.log_end_offset
        );
        let bytes = read.read_to_vec()?;
        ensure!(bytes.len() as u64 == read.size_bytes());
        if let Some(held) = &read.held {
            let mut from_file = Vec::new();
            for slice in &read.slices {
                slice.read_onto(&mut from_file)?;
            }
            ensure!(
                *held == from_file,
                "the bytes a read at {offset} held are not its file ranges'"
            );
        }
        let batches = split_batches(&bytes)?;
        let Some(&(first_base, _)) = batches.first() else {
            ensure!(
                offset == end,
                "no batch returned at {offset} though the log ends at {end}"
            );
            return Ok(());
        };
        ensure!(offset < end, "batches returned at the log end {end}");
        let last_offset = batches.last().expect("not empty").1;
        ensure!(
            first_base <= offset && offset <= batches[0].1,
            "first batch {first_base}..={} does not hold offset {offset}",
            batches[0].1
        );
        for pair in batches.windows(2) {
            ensure!(
                pair[1].0 == pair[0].1 + 1,
                "batches {pair:?} are not contiguous"
            );
        }
        for (base, _) in &batches {
            ensure!(
                self.model.batch_bases.contains(base),
                "{base} is not where a batch was appended"
            );
        }
        ensure!(
            batches.len() == 1 || bytes.len() as u64 <= max_bytes,
            "{} batches of {} bytes exceed max_bytes {max_bytes}",
            batches.len(),
            bytes.len()
        );
        let expected = &self.model.records[first_base as usize..=last_offset as usize];
        ensure!(
            support::decode(&bytes) == expected,
            "records read at {offset} differ from the model"
        );
        Ok(())
    }

    fn check_lookup(&self, timestamp: i64) -> anyhow::Result<()> {
        let found = self.log().offset_for_timestamp(timestamp)?;
        let expected = self.model.first_at_or_after(timestamp);
        ensure!(
            found == expected,
            "timestamp {timestamp}: log found {found:?}, model {expected:?}"
        );
        Ok(())
    }

    fn retain_bytes(&mut self, retention_bytes: i64) -> anyhow::Result<()> {
        let log = self.log.as_ref().expect("open");
        let size_before = log.size_bytes();
        log.set_config(LogConfig {
            retention_bytes,
            ..self.config.clone()
        });
        let outcome = log.enforce_retention(NOW_MS)?;
        log.set_config(self.config.clone());
        let start = log.log_start_offset();
        ensure!(
            outcome.log_start_offset == start,
            "{outcome:?} but log start is {start}"
        );
        ensure!(
            start >= self.model.log_start,
            "log start moved back to {start}"
        );
        ensure!(
            start == self.model.log_start || self.model.batch_bases.contains(&start),
            "log start {start} is not a batch boundary"
        );
        ensure!(
            log.size_bytes() == size_before - outcome.bytes_deleted,
            "{outcome:?}"
        );
        let limit = retention_bytes as u64;
        if outcome.segments_deleted > 0 {
            ensure!(
                log.size_bytes() >= limit,
                "deleted down to {} bytes, below {limit}",
                log.size_bytes()
            );
        }
        if log.segment_count() > 1 {
            let first = segment_bytes_on_disk(self.dir.path(), start)?;
            ensure!(
                log.size_bytes() - first < limit,
                "segment {start} could still go: {} bytes without it, limit {limit}",
                log.size_bytes() - first
            );
        }
        self.model.log_start = start;
        if start > 0 {
            self.check_below_log_start(start - 1)?;
        }
        Ok(())
    }

    fn check_below_log_start(&self, offset: i64) -> anyhow::Result<()> {
        match self.log().read(offset, u64::MAX) {
            Err(LogError::OffsetOutOfRange {
                offset: reported,
                log_start_offset,
                log_end_offset,
                ..
            }) => {
                ensure!(
                    (reported, log_start_offset, log_end_offset)
                        == (offset, self.model.log_start, self.model.log_end()),
                    "out-of-range error names {reported}, {log_start_offset}, {log_end_offset}"
                );
                Ok(())
            }
            other => anyhow::bail!("read below log start at {offset} gave {other:?}"),
        }
    }

    fn reopen(&mut self, clean: bool) -> anyhow::Result<()> {
        let log = self.log.take().expect("open");
        if clean {
            log.close()?;
        }
        drop(log);
        let log = PartitionLog::open(self.dir.path(), PARTITION, self.config.clone(), clean)?;
        let report = log.recovery_report();
        ensure!(
            report.truncation.is_none() && report.corruption.is_none(),
            "{report:?}"
        );
        self.log = Some(log);
        Ok(())
    }

    fn check_invariants(&self) -> anyhow::Result<()> {
        let log = self.log();
        let (start, end) = (self.model.log_start, self.model.log_end());
        ensure!(
            log.log_start_offset() == start,
            "log start {} != {start}",
            log.log_start_offset()
        );
        ensure!(
            log.log_end_offset() == end,
            "log end {} != {end}",
            log.log_end_offset()
        );
        ensure!(
            log.durable_offset() <= end,
            "durable offset {} past the end",
            log.durable_offset()
        );
        let bases = segment_bases(self.dir.path())?;
        ensure!(
            bases.len() == log.segment_count(),
            "files {bases:?}, {} segments",
            log.segment_count()
        );
        ensure!(
            bases.first() == Some(&start),
            "first segment file {bases:?}, log start {start}"
        );
        for base in &bases {
            ensure!(
                self.model.batch_bases.contains(base) || *base == end,
                "segment {base} does not start at a batch"
            );
        }
        if start > 0 {
            self.check_below_log_start(start - 1)?;
        }
        ensure!(
            matches!(
                log.read(end + 1, u64::MAX),
                Err(LogError::OffsetOutOfRange { .. })
            ),
            "a read past the log end must be out of range"
        );
        Ok(())
    }
}

/// (base offset, last offset) of each whole, CRC-valid batch in `bytes`.
fn split_batches(mut bytes: &[u8]) -> anyhow::Result<Vec<(i64, i64)>> {
    let mut batches = Vec::new();
    while !bytes.is_empty() {
        let batch = RecordBatch::parse_and_verify(bytes)
            .context("read returned a partial or corrupt batch")?;
        batches.push((batch.header().base_offset, batch.header().last_offset()));
        bytes = &bytes[batch.size_bytes()..];
    }
    Ok(batches)
}

fn segment_bytes_on_disk(dir: &Path, base_offset: i64) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(dir.join(file_name(base_offset, "log")))?.len())
}
