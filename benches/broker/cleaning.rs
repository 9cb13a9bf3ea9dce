//! The cleaner's phase: how fast the broker's cleaner compacts a topic,
//! set against the disk's write rate, and what a clean costs a producer.
//!
//! Each run fills two compacted topics with keyed records (the dirty part
//! is everything but the last segment; most records are overwritten
//! versions of a few thousand keys) while `min.compaction.lag.ms` keeps
//! the cleaner away. Then:
//!
//! 1. **Clean alone**: the first topic's lag drops to 0 (AlterConfigs); the
//!    broker's cleaner, which looks for work every [`CHECK_INTERVAL_MS`],
//!    compacts it. Its rate is the topic's bytes before the clean over the
//!    time from the change to the clean's end (its `cleaner-offset` file
//!    rewritten, after the last segment's swap), so the wait for the
//!    cleaner's next look is counted against it.
//! 2. **Produce beside**: one producer (acks=1) writes a fresh topic with
//!    no clean running, then again right after the second topic's lag
//!    drops to 0, while the cleaner compacts it. A run whose clean ended
//!    before that produce did is left out of the figure and counted.
//!
//! The cleaner runs with its default I/O budget, or
//! `STRATA_BENCH_CLEANER_IO` bytes per second.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::Samples;
use super::cases::{Bench, sync_all};

/// How often the benchmark's broker looks for partitions to clean.
pub const CHECK_INTERVAL_MS: u64 = 200;
/// A compacted topic's records per distinct key: what a clean removes is
/// all but about 1 in this many.
const VERSIONS_PER_KEY: u64 = 64;
const RECORD_BYTES: usize = 1024;
/// Segments of the compacted topics: many, so most of the topic is closed
/// and cleanable.
const SEGMENT_BYTES: u64 = 16 << 20;
/// A `min.compaction.lag.ms` no record reaches: a century.
const NEVER_MS: u64 = 100 * 365 * 24 * 3600 * 1000;
/// How long a clean may take before the run fails.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Default)]
pub struct CleanerOutcome {
    /// Bytes of the topic cleaned per second, clean alone.
    pub clean_rate: Samples,
    pub produce_alone: Samples,
    pub produce_during_clean: Samples,
    /// Runs whose clean ended before the produce beside it did (left out
    /// of `produce_during_clean`).
    pub partial_overlaps: usize,
    /// The cleaner's I/O budget (reads and writes), bytes per second.
    pub io_budget: u64,
}

pub fn run(bench: &Bench, data_dir: &Path) -> Result<CleanerOutcome> {
    let mut outcome = CleanerOutcome {
        clean_rate: Samples::default(),
        produce_alone: Samples::default(),
        produce_during_clean: Samples::default(),
        partial_overlaps: 0,
        io_budget: std::env::var("STRATA_BENCH_CLEANER_IO")
            .ok()
            .and_then(|rate| rate.parse().ok())
            .unwrap_or(strata::log::CleanerConfig::default().io_bytes_per_second),
    };
    let dirty_records = 4 * bench.settings.produce_bytes / RECORD_BYTES as u64;
    let keys = [format!(
        "keys={}",
        (dirty_records / VERSIONS_PER_KEY).max(1)
    )];
    for run in 0..bench.settings.runs {
        eprintln!("cleaner: filling two compacted topics (run {run})…");
        let alone = format!("cleaner-alone-{run}");
        let beside = format!("cleaner-beside-{run}");
        for topic in [&alone, &beside] {
            create_compacted(bench, topic)?;
            bench.fill(topic, dirty_records, RECORD_BYTES, "1", &keys)?;
        }
        sync_all();

        eprintln!("cleaner: clean alone…");
        let dir = data_dir.join(format!("{alone}-0"));
        let before = log_bytes(&dir)?;
        let offset_before = cleaner_offset(&dir);
        let started = Instant::now();
        make_cleanable(bench, &alone)?;
        wait_for_clean(&dir, &offset_before)?;
        outcome
            .clean_rate
            .push(before as f64 / started.elapsed().as_secs_f64());
        sync_all();

        eprintln!("cleaner: produce with and without a clean beside it…");
        let measured = produce(bench, &format!("beside-no-clean-{run}"))?;
        outcome.produce_alone.push(measured);
        sync_all();
        let dir = data_dir.join(format!("{beside}-0"));
        let offset_before = cleaner_offset(&dir);
        make_cleanable(bench, &beside)?;
        // The cleaner's next look starts the clean.
        std::thread::sleep(Duration::from_millis(2 * CHECK_INTERVAL_MS));
        let measured = produce(bench, &format!("beside-clean-{run}"))?;
        if cleaner_offset(&dir) == offset_before {
            outcome.produce_during_clean.push(measured);
        } else {
            outcome.partial_overlaps += 1;
        }
        wait_for_clean(&dir, &offset_before)?;
    }
    Ok(outcome)
}

fn create_compacted(bench: &Bench, topic: &str) -> Result<()> {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["topics", "create", topic, "--partitions", "1"])
        .args(["--bootstrap", bench.address()])
        .args(["--config", "cleanup.policy=compact"])
        .arg("--config")
        .arg(format!("segment.bytes={SEGMENT_BYTES}"))
        .arg("--config")
        .arg(format!("min.compaction.lag.ms={NEVER_MS}"))
        .output()
        .context("running strata topics create")?;
    ensure!(
        output.status.success(),
        "creating {topic}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Drops the topic's compaction lag to 0 (AlterConfigs sets the whole
/// configuration).
fn make_cleanable(bench: &Bench, topic: &str) -> Result<()> {
    let status = Command::new(bench.driver)
        .args(["alter", bench.address(), topic, "cleanup.policy=compact"])
        .arg(format!("segment.bytes={SEGMENT_BYTES}"))
        .arg("min.compaction.lag.ms=0")
        .status()
        .context("running rdkafka_driver alter")?;
    ensure!(status.success(), "altering {topic}: {status}");
    Ok(())
}

/// One producer, acks=1, 1 KiB records: bytes per second.
fn produce(bench: &Bench, topic: &str) -> Result<f64> {
    let records = bench.settings.produce_bytes / RECORD_BYTES as u64;
    let mut command = Command::new(bench.driver);
    command.args(["produce", bench.address(), topic]);
    command.arg(records.to_string());
    command.arg(RECORD_BYTES.to_string());
    command.args(["1", "1"]);
    let measured = bench.timed_driver(command)?;
    Ok(measured.bytes as f64 / measured.seconds)
}

/// Bytes of the partition's segment files (`*.log`).
fn log_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if entry.path().extension().is_some_and(|e| e == "log") {
            // A file swapped away between listing and stat counts nothing.
            total += entry.metadata().map_or(0, |m| m.len());
        }
    }
    Ok(total)
}

/// The partition's `cleaner-offset` file as it stands (empty when absent):
/// rewritten at the end of each clean.
fn cleaner_offset(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("cleaner-offset")).unwrap_or_default()
}

/// Waits until the clean ended: the cleaner offset moved from `before`.
fn wait_for_clean(dir: &Path, before: &[u8]) -> Result<()> {
    let deadline = Instant::now() + CLEAN_TIMEOUT;
    while cleaner_offset(dir) == before {
        if Instant::now() > deadline {
            bail!("{} was not cleaned within {CLEAN_TIMEOUT:?}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
