//! The side-by-side broker benchmark: an optimized `strata serve` driven by
//! real librdkafka clients, next to what the machine itself does — loopback
//! TCP (iperf3) and sequential disk writes with fdatasync in the file system
//! that holds the broker's data.
//!
//! Run it with `make bench-broker` (or `cargo bench --bench broker`). In one
//! run it measures the baselines, starts the broker on a free port with a
//! temporary data directory, and times each case several times:
//!
//! - produce of 100-byte and 1 KiB records with acks=1 and acks=all, one
//!   producer; acks=1 and acks=all also with 8 concurrent producers (one
//!   connection each), where the broker's group commit shares fdatasyncs,
//!   with the 99th percentile of their produce round trips set against one
//!   fdatasync; an idempotent producer beside a transactional one
//!   committing every 100 ms;
//! - consume of a whole partition from the beginning to the end, and of a
//!   transactionally written one with read_uncommitted and read_committed;
//! - the broker's produce latency at a steady load (see `latency`),
//!   acks=1 and acks=all, set against one fdatasync;
//! - the cleaner (see `cleaning`): its rate against the disk's, and a
//!   producer's rate while it cleans against its rate without.
//!
//! Clients: `rdkafka_driver` (a small C program on librdkafka, compiled
//! here, that produces from memory) for every case, and kcat for the cases
//! it can drive (produce with acks=1 from a file, consume to /dev/null), so
//! the table shows when kcat's own line handling is what limits a case.
//! strata's own client runs the single-producer and consume cases through
//! `strata bench`, and a last table sets its records/s against the
//! driver's (it must be at least equal). Beside strata's producer run two
//! plain ones (see `prebuilt`): one request built before the run and sent
//! again and again, the most any client gets through this broker here,
//! and a producer that encodes each batch and does nothing else, the
//! producer-client target's floor. The broker's targets are judged on the
//! librdkafka clients only.
//!
//! Each case reports the best of its runs, with the median beside it, and
//! the CPU the broker and the client used (percent of one core over the
//! run), which shows where the machine's cores went. At the end each target
//! is stated with its ratio and MET or MISSED. Missing a target does not
//! fail the run: this is a measurement.
//!
//! Settings (environment): `STRATA_BENCH_RUNS` (3), `STRATA_BENCH_PRODUCE_MB`
//! (payload MiB per produce run, 256), `STRATA_BENCH_CONSUME_MB` (1024),
//! `STRATA_BENCH_DIR` (parent of the temporary directory; the system's
//! temporary directory by default), `STRATA_BENCH_CASES` (`|`-separated
//! parts of case labels to run, `cleaner` for the cleaner's phase; all by
//! default).

mod baselines;
mod case;
mod cases;
mod cleaning;
mod clients;
mod latency;
mod prebuilt;
mod report;
#[path = "../serve/mod.rs"]
mod serve;
mod server;
#[path = "../summary/mod.rs"]
mod summary;

use std::net::TcpListener;
use std::process::Child;

use anyhow::{Context, Result};

/// Samples of one measurement, in bytes (or records) per second.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn push(&mut self, value: f64) {
        self.0.push(value);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn best(&self) -> f64 {
        self.0.iter().copied().fold(0.0, f64::max)
    }

    pub fn median(&self) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => 0.0,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        }
    }
}

/// Kills (SIGKILL) and reaps the child when dropped, so a failing run
/// leaves no process behind.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Takes the child back, e.g. to stop it gracefully.
    pub fn take(mut self) -> Child {
        self.0.take().expect("the guard holds its child")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Run settings, from the environment.
pub struct Settings {
    pub runs: usize,
    pub produce_bytes: u64,
    pub consume_bytes: u64,
    /// Only the cases whose label holds one of these (`cleaner` for the
    /// cleaner's phase); every case when empty.
    pub only: Vec<String>,
}

impl Settings {
    pub fn selects(&self, label: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|part| label.contains(part.as_str()))
    }
}

fn env_number(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .with_context(|| format!("{name}={text} is not a positive whole number")),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|arg| arg == prebuilt::ARG) {
        return prebuilt::run(&args[2..]);
    }
    // `cargo test --benches` runs bench targets without `--bench`: a
    // benchmark of minutes has no place there.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("broker benchmark skipped: run `make bench-broker`");
        return Ok(());
    }
    let settings = Settings {
        runs: usize::try_from(env_number("STRATA_BENCH_RUNS", 3)?)?,
        produce_bytes: env_number("STRATA_BENCH_PRODUCE_MB", 256)? << 20,
        consume_bytes: env_number("STRATA_BENCH_CONSUME_MB", 1024)? << 20,
        only: std::env::var("STRATA_BENCH_CASES")
            .map(|cases| cases.split('|').map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let parent = std::env::var_os("STRATA_BENCH_DIR")
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    let root = tempfile::Builder::new()
        .prefix("strata-bench-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))?;

    eprintln!("baseline: loopback TCP (iperf3)…");
    let loopback = baselines::loopback_tcp(settings.runs)?;
    eprintln!("baseline: disk write with fdatasync…");
    let disk = baselines::disk_write(root.path(), settings.produce_bytes, settings.runs)?;
    eprintln!("baseline: one fdatasync…");
    let fsync = baselines::fsync_latency(root.path())?;
    let results = cases::run_all(root.path(), &settings)?;
    let baselines = report::Baselines {
        loopback,
        disk,
        fsync,
        disk_dir: root.path().to_path_buf(),
        disk_bytes: settings.produce_bytes,
    };
    report::print(&settings, &baselines, &results)?;
    Ok(())
}
