//! Throughput of the segment log, measured against the file system under it.
//!
//! - `append`: [`PartitionLog::append`] of pre-built 1,000-record batches, and
//!   as the baseline a plain sequential `write(2)` of the very same bytes to a
//!   file in the same directory. Neither side syncs: an append lands in the
//!   page cache exactly as the plain write does, so the ratio between them is
//!   the cost of the log itself (validation, CRC, offset assignment, indexes).
//! - `append_parts`: the two checks an append runs before writing
//!   (`parse_and_verify`, `validate_records`), alone, for the same batches.
//! - `read`: [`PartitionLog::read`] plus `read_to_vec` of 1 MiB chunks,
//!   front to back, over a log that was just written (so from the page cache,
//!   as for a consumer that keeps up).
//! - `lookup`: a one-batch [`PartitionLog::read`] at random offsets in logs of
//!   10^3, 10^4 and 10^5 batches with every batch indexed; the time should
//!   grow with log n, not n.
//!
//! A summary at the end prints append / plain write per record size from the
//! estimates criterion saved during this run.
//!
//! Files live in a temporary directory under the target directory; none
//! grows past [`FILE_BYTES_MAX`] and all are removed at the end.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use criterion::{BenchmarkId, Criterion, Throughput};
use strata::log::{LogConfig, PartitionLog};
use strata::record::{BatchBuilder, BatchHeader, Compression, NewRecord, RecordBatch};

const RECORDS_PER_BATCH: usize = 1_000;
/// (label, value bytes per record).
const RECORD_SIZES: [(&str, usize); 2] = [("100B", 100), ("1KiB", 1024)];
/// Every file the benchmark writes is discarded and started afresh before it
/// reaches this size, so a run fits on a small CI disk.
const FILE_BYTES_MAX: u64 = 128 << 20;
/// The log the read benchmark walks; held to the same cap as the others.
const READ_LOG_BYTES: u64 = FILE_BYTES_MAX;
const READ_CHUNK_BYTES: u64 = 1 << 20;
const LOOKUP_LOG_BATCHES: [usize; 3] = [1_000, 10_000, 100_000];
/// Batches per append call while filling a lookup log (filling is untimed).
const LOOKUP_FILL_BATCHES_PER_APPEND: usize = 1_000;
const LOOKUP_RECORD_BYTES: usize = 100;
const LOOKUP_OFFSETS: usize = 4_096;
/// The log's append should reach this fraction of a plain write's throughput.
const APPEND_TARGET_RATIO: f64 = 0.8;
const WARM_UP_FILE_BYTES: usize = 128 << 20;
const WARM_UP_ROUNDS: usize = 2;
const TIMESTAMP_MS: i64 = 1_700_000_000_000;

const APPEND_GROUP: &str = "append";
const READ_GROUP: &str = "read";
const LOOKUP_GROUP: &str = "lookup";
const LOG_FUNCTION: &str = "partition_log";
const PLAIN_FUNCTION: &str = "plain_write";
const READ_PARAMETER: &str = "1MiB_chunks";
const PARTS_GROUP: &str = "append_parts";
const CRC_FUNCTION: &str = "parse_and_verify";
const RECORDS_FUNCTION: &str = "validate_records";
/// What the log allows a batch's records to decompress to (irrelevant to
/// the uncompressed batches here, but the same argument the log passes).
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

fn main() {
    let started = SystemTime::now();
    let target_dir = target_dir();
    let output_dir = criterion_output_dir(&target_dir);
    let scratch = tempfile::Builder::new()
        .prefix("strata-bench-")
        .tempdir_in(&target_dir)
        .expect("scratch directory under the target directory");
    let mut criterion = Criterion::default()
        .output_directory(&output_dir)
        .configure_from_args();

    // `cargo test --benches` runs each routine once, as a smoke test; only a
    // real measurement needs the disk warm.
    if std::env::args().any(|arg| arg == "--bench") {
        warm_up_disk(scratch.path());
    }
    let batch_bytes = bench_append(&mut criterion, scratch.path());
    bench_append_parts(&mut criterion);
    let read_chunk_bytes = bench_read(&mut criterion, scratch.path());
    bench_lookup(&mut criterion, scratch.path());
    criterion.final_summary();

    print_summary(&output_dir, started, &batch_bytes, read_chunk_bytes);
}

/// The directory cargo builds into: `CARGO_TARGET_DIR` if set, else the one
/// holding this executable (`<target>/<profile>/deps/log-<hash>`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("path of the benchmark executable");
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "deps"))
        .and_then(|deps| deps.parent()?.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Where criterion saves estimates, chosen as criterion itself chooses it and
/// then handed to criterion, so the summary reads what this run wrote.
fn criterion_output_dir(target_dir: &Path) -> PathBuf {
    std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir.join("criterion"))
}

/// After an idle spell the first large writes on some machines run several
/// times slower than later ones; pay that before anything is measured.
fn warm_up_disk(dir: &Path) {
    let chunk = vec![0x5au8; 1 << 20];
    let path = dir.join("warm-up");
    let started = Instant::now();
    for _ in 0..WARM_UP_ROUNDS {
        let mut file = File::create(&path).expect("warm-up file");
        for _ in 0..WARM_UP_FILE_BYTES / chunk.len() {
            file.write_all(&chunk).expect("warm-up write");
        }
        file.sync_all().expect("warm-up sync");
        drop(file);
        std::fs::remove_file(&path).expect("warm-up file removed");
    }
    eprintln!(
        "warmed up the disk with {WARM_UP_ROUNDS} x {} MiB in {:.1?}",
        WARM_UP_FILE_BYTES >> 20,
        started.elapsed()
    );
}

/// One uncompressed batch of `records` records of `value_bytes` each.
fn build_batch(records: usize, value_bytes: usize) -> Vec<u8> {
    let value: Vec<u8> = (0..value_bytes).map(|i| b'a' + (i % 26) as u8).collect();
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..records {
        builder
            .push(NewRecord::new(None, &value, TIMESTAMP_MS))
            .expect("record fits in a batch");
    }
    builder.build().expect("batch builds")
}

/// A config under which appends never roll a segment: a roll fsyncs, and the
/// plain write it is compared with never does.
fn no_roll_config() -> LogConfig {
    let config = LogConfig::default();
    assert!(config.segment_bytes > FILE_BYTES_MAX);
    assert!(config.flush_messages < 0 && config.flush_ms < 0);
    config
}

/// A partition log that is thrown away and reopened empty before it grows
/// past [`FILE_BYTES_MAX`].
struct ScratchLog {
    parent: PathBuf,
    generation: usize,
    log: Option<PartitionLog>,
}

impl ScratchLog {
    fn new(parent: &Path) -> Self {
        let mut scratch = Self {
            parent: parent.to_path_buf(),
            generation: 0,
            log: None,
        };
        scratch.restart();
        scratch
    }

    fn dir(&self) -> PathBuf {
        self.parent.join(format!("log-{}", self.generation))
    }

    fn restart(&mut self) {
        if let Some(log) = self.log.take() {
            // A second segment would mean a roll, and so an fsync, was timed.
            assert_eq!(log.segment_count(), 1);
            // Dropped rather than closed: closing flushes.
            drop(log);
            std::fs::remove_dir_all(self.dir()).expect("scratch log removed");
        }
        self.generation += 1;
        let log =
            PartitionLog::open(&self.dir(), "bench-0", no_roll_config(), true).expect("log opens");
        self.log = Some(log);
    }

    /// Appends `batch`, returning the time the append alone took.
    fn timed_append(&mut self, batch: &mut [u8]) -> Duration {
        if self.log().size_bytes() + batch.len() as u64 > FILE_BYTES_MAX {
            self.restart();
        }
        let log = self.log();
        let start = Instant::now();
        log.append(batch).expect("append succeeds");
        start.elapsed()
    }

    fn log(&self) -> &PartitionLog {
        self.log.as_ref().expect("a scratch log is always open")
    }
}

impl Drop for ScratchLog {
    fn drop(&mut self) {
        drop(self.log.take());
        let _ = std::fs::remove_dir_all(self.dir());
    }
}

/// A plain file written sequentially with `write(2)`, restarted like
/// [`ScratchLog`] so both write into files of the same sizes.
struct ScratchFile {
    parent: PathBuf,
    generation: usize,
    file: Option<File>,
    len: u64,
}

impl ScratchFile {
    fn new(parent: &Path) -> Self {
        let mut scratch = Self {
            parent: parent.to_path_buf(),
            generation: 0,
            file: None,
            len: 0,
        };
        scratch.restart();
        scratch
    }

    fn path(&self) -> PathBuf {
        self.parent.join(format!("plain-{}", self.generation))
    }

    fn restart(&mut self) {
        if self.file.take().is_some() {
            std::fs::remove_file(self.path()).expect("scratch file removed");
        }
        self.generation += 1;
        self.file = Some(File::create(self.path()).expect("scratch file"));
        self.len = 0;
    }

    fn timed_write(&mut self, bytes: &[u8]) -> Duration {
        if self.len + bytes.len() as u64 > FILE_BYTES_MAX {
            self.restart();
        }
        let file = self.file.as_mut().expect("a scratch file is always open");
        let start = Instant::now();
        file.write_all(bytes).expect("write succeeds");
        let elapsed = start.elapsed();
        self.len += bytes.len() as u64;
        elapsed
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(self.path());
        }
    }
}

/// Returns the batch size in bytes for each record size, for the summary.
fn bench_append(c: &mut Criterion, dir: &Path) -> Vec<(&'static str, u64)> {
    let mut group = c.benchmark_group(APPEND_GROUP);
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(3))
        .measurement_time(Duration::from_secs(12));
    let mut sizes = Vec::new();
    for (label, value_bytes) in RECORD_SIZES {
        let batch = build_batch(RECORDS_PER_BATCH, value_bytes);
        let batch_bytes = batch.len() as u64;
        sizes.push((label, batch_bytes));
        group.throughput(Throughput::Bytes(batch_bytes));

        group.bench_function(BenchmarkId::new(PLAIN_FUNCTION, label), |b| {
            let mut file = ScratchFile::new(dir);
            b.iter_custom(|iters| (0..iters).map(|_| file.timed_write(&batch)).sum());
        });

        group.bench_function(BenchmarkId::new(LOG_FUNCTION, label), |b| {
            let mut log = ScratchLog::new(dir);
            // The log rewrites baseOffset in place, which leaves the batch
            // valid, so one buffer serves every append.
            let mut batch = batch.clone();
            b.iter_custom(|iters| (0..iters).map(|_| log.timed_append(&mut batch)).sum());
        });
    }
    group.finish();
    sizes
}

/// The two checks an append makes before writing, alone, to show where the
/// time between a plain write and an append goes.
fn bench_append_parts(c: &mut Criterion) {
    let mut group = c.benchmark_group(PARTS_GROUP);
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for (label, value_bytes) in RECORD_SIZES {
        let batch = build_batch(RECORDS_PER_BATCH, value_bytes);
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_function(BenchmarkId::new(CRC_FUNCTION, label), |b| {
            b.iter(|| RecordBatch::parse_and_verify(black_box(&batch)).is_ok());
        });
        let parsed = RecordBatch::parse_and_verify(&batch).expect("a valid batch");
        group.bench_function(BenchmarkId::new(RECORDS_FUNCTION, label), |b| {
            b.iter(|| {
                black_box(parsed)
                    .validate_records(DECOMPRESSED_BYTES_MAX)
                    .is_ok()
            });
        });
    }
    group.finish();
}

/// Fills a fresh log in `dir` with `count` copies of `batch`, appending
/// `per_append` batches at a time.
fn fill_log(
    dir: &Path,
    config: LogConfig,
    batch: &[u8],
    count: usize,
    per_append: usize,
) -> PartitionLog {
    let log = PartitionLog::open(dir, "bench-0", config, true).expect("log opens");
    let mut remaining = count;
    while remaining > 0 {
        let n = remaining.min(per_append);
        let bytes = batch.repeat(n);
        log.append(&bytes).expect("fill append succeeds");
        remaining -= n;
    }
    log
}

/// The offset after the last of the whole batches in `bytes`.
fn next_offset_after(bytes: &[u8]) -> i64 {
    let mut rest = bytes;
    let mut last = None;
    while !rest.is_empty() {
        let (_, size) = BatchHeader::peek_size(rest).expect("whole batches");
        last = Some(&rest[..size]);
        rest = &rest[size..];
    }
    let header = BatchHeader::parse(last.expect("at least one batch")).expect("header");
    header.next_offset()
}

/// Returns the bytes each read returns, for the summary.
fn bench_read(c: &mut Criterion, dir: &Path) -> u64 {
    let batch = build_batch(RECORDS_PER_BATCH, RECORD_SIZES[0].1);
    let batch_bytes = batch.len() as u64;
    let per_chunk = READ_CHUNK_BYTES / batch_bytes;
    assert!(per_chunk > 0);
    // A whole number of chunks, so every read returns the same bytes.
    let chunks = READ_LOG_BYTES / (per_chunk * batch_bytes);
    let chunk_bytes = per_chunk * batch_bytes;
    let log_dir = dir.join("read-log");
    let log = fill_log(
        &log_dir,
        no_roll_config(),
        &batch,
        (chunks * per_chunk) as usize,
        64,
    );
    assert_eq!(log.size_bytes(), chunks * chunk_bytes);

    let mut group = c.benchmark_group(READ_GROUP);
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Bytes(chunk_bytes));
    group.bench_function(BenchmarkId::new(LOG_FUNCTION, READ_PARAMETER), |b| {
        let mut offset = 0i64;
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                if offset == log.log_end_offset() {
                    offset = 0;
                }
                let start = Instant::now();
                let bytes = log
                    .read(offset, READ_CHUNK_BYTES)
                    .and_then(|read| read.read_to_vec())
                    .expect("read succeeds");
                elapsed += start.elapsed();
                assert_eq!(bytes.len() as u64, chunk_bytes);
                offset = next_offset_after(&bytes);
            }
            elapsed
        });
    });
    group.finish();
    drop(log);
    std::fs::remove_dir_all(&log_dir).expect("read log removed");
    chunk_bytes
}

/// SplitMix64: a fixed, dependency-free sequence of offsets, the same on
/// every run.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn bench_lookup(c: &mut Criterion, dir: &Path) {
    let batch = build_batch(1, LOOKUP_RECORD_BYTES);
    // Index every batch, so the lookup is a binary search over all of them
    // rather than a short search followed by a scan of up to one interval.
    let config = LogConfig {
        index_interval_bytes: 1,
        ..no_roll_config()
    };
    let mut group = c.benchmark_group(LOOKUP_GROUP);
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for batches in LOOKUP_LOG_BATCHES {
        let log_dir = dir.join(format!("lookup-{batches}"));
        let log = fill_log(
            &log_dir,
            config.clone(),
            &batch,
            batches,
            LOOKUP_FILL_BATCHES_PER_APPEND,
        );
        assert_eq!(log.segment_count(), 1);
        assert!(log.size_bytes() <= FILE_BYTES_MAX);
        let mut rng = SplitMix64(0x5eed ^ batches as u64);
        let offsets: Vec<i64> = (0..LOOKUP_OFFSETS)
            .map(|_| (rng.next() % batches as u64) as i64)
            .collect();
        group.bench_function(BenchmarkId::new("partition_log_read", batches), |b| {
            let mut next = offsets.iter().cycle();
            b.iter(|| {
                let offset = *next.next().expect("cycle never ends");
                let read = log.read(offset, 1).expect("read succeeds");
                debug_assert_eq!(read.slices.len(), 1);
                read
            });
        });
        drop(log);
        std::fs::remove_dir_all(&log_dir).expect("lookup log removed");
    }
    group.finish();
}

/// Criterion's point estimates for one benchmark, in nanoseconds per
/// iteration, if this run measured it.
struct Estimate {
    mean_ns: f64,
    median_ns: f64,
}

fn estimate(
    output_dir: &Path,
    group: &str,
    function: &str,
    parameter: &str,
    since: SystemTime,
) -> Option<Estimate> {
    let path = output_dir
        .join(group)
        .join(function)
        .join(parameter)
        .join("new")
        .join("estimates.json");
    let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
    // An older file is a previous run's (this one filtered the benchmark out).
    if modified < since {
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let point = |name: &str| json.get(name)?.get("point_estimate")?.as_f64();
    Some(Estimate {
        mean_ns: point("mean")?,
        median_ns: point("median")?,
    })
}

fn mib_per_s(bytes: u64, ns: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / (ns * 1e-9)
}

fn print_summary(
    output_dir: &Path,
    since: SystemTime,
    batch_bytes: &[(&str, u64)],
    read_chunk_bytes: u64,
) {
    println!();
    println!("==================== strata log benchmark summary ====================");
    println!("from {}", output_dir.display());
    println!();
    println!(
        "append vs plain write(2): same batches, same file system, page cache only (no fsync)"
    );
    println!(
        "{:<6} {:>12} {:>18} {:>14} {:>14} {:>14}",
        "record", "batch bytes", "plain write MiB/s", "append MiB/s", "append/plain", "target"
    );
    for &(label, bytes) in batch_bytes {
        let plain = estimate(output_dir, APPEND_GROUP, PLAIN_FUNCTION, label, since);
        let append = estimate(output_dir, APPEND_GROUP, LOG_FUNCTION, label, since);
        let (Some(plain), Some(append)) = (plain, append) else {
            println!("{label:<6} not measured in this run");
            continue;
        };
        let ratio = plain.mean_ns / append.mean_ns;
        let verdict = if ratio >= APPEND_TARGET_RATIO {
            "met"
        } else {
            "NOT met"
        };
        println!(
            "{label:<6} {bytes:>12} {:>18.0} {:>14.0} {:>14.3} {:>14}",
            mib_per_s(bytes, plain.mean_ns),
            mib_per_s(bytes, append.mean_ns),
            ratio,
            format!("≥ {APPEND_TARGET_RATIO}: {verdict}"),
        );
        println!(
            "{:<6} {:>12} {:>18.0} {:>14.0} {:>14.3}   (medians)",
            "",
            "",
            mib_per_s(bytes, plain.median_ns),
            mib_per_s(bytes, append.median_ns),
            plain.median_ns / append.median_ns
        );
    }
    println!();
    println!("where an append's time goes, µs per batch (means)");
    println!(
        "{:<6} {:>12} {:>14} {:>18} {:>18}",
        "record", "plain write", "append", "parse_and_verify", "validate_records"
    );
    for &(label, _) in batch_bytes {
        let micros = |group: &str, function: &str| {
            estimate(output_dir, group, function, label, since)
                .map_or_else(|| "-".to_string(), |e| format!("{:.1}", e.mean_ns / 1e3))
        };
        println!(
            "{label:<6} {:>12} {:>14} {:>18} {:>18}",
            micros(APPEND_GROUP, PLAIN_FUNCTION),
            micros(APPEND_GROUP, LOG_FUNCTION),
            micros(PARTS_GROUP, CRC_FUNCTION),
            micros(PARTS_GROUP, RECORDS_FUNCTION),
        );
    }
    println!();
    match estimate(output_dir, READ_GROUP, LOG_FUNCTION, READ_PARAMETER, since) {
        Some(read) => println!(
            "read + read_to_vec, chunks of {read_chunk_bytes} bytes (page cache): {:.0} MiB/s mean, {:.0} MiB/s median",
            mib_per_s(read_chunk_bytes, read.mean_ns),
            mib_per_s(read_chunk_bytes, read.median_ns)
        ),
        None => println!("read: not measured in this run"),
    }
    println!();
    println!("lookup: one-batch PartitionLog::read at random offsets, every batch indexed");
    for batches in LOOKUP_LOG_BATCHES {
        match estimate(
            output_dir,
            LOOKUP_GROUP,
            "partition_log_read",
            &batches.to_string(),
            since,
        ) {
            Some(lookup) => println!(
                "  {batches:>7} batches (log2 = {:>4.1}): {:>8.0} ns mean, {:>8.0} ns median",
                (batches as f64).log2(),
                lookup.mean_ns,
                lookup.median_ns
            ),
            None => println!("  {batches:>7} batches: not measured in this run"),
        }
    }
    println!("=======================================================================");
}
