//! The broker's produce latency at a steady load: 8 producers (one
//! connection each) paced to a fixed rate well below what the broker takes,
//! with acks=1 and with acks=all, and the broker's 99th percentile of
//! produce latency over each run (its histogram, scraped before and after).
//!
//! At full load every produce waits behind the kernel's page-cache
//! writeback (acks=1 alike), so that figure says nothing of the sync; at a
//! steady load it shows what acks=all adds: the sync in progress, if any,
//! and its own, shared with every producer that arrived meanwhile. Beside
//! it, in the same run, the floor: plain threads doing the same appends
//! with an fdatasync each (`baselines::steady_sync_floor`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::case::CONCURRENT_PRODUCERS;
use super::cases::Bench;
use super::server::percentile_bound;
use super::{Samples, baselines};

/// Records per second per producer.
const RATE: u64 = 2_000;
const SECONDS: u64 = 5;
const RECORD_BYTES: usize = 1024;
/// librdkafka's default linger.ms: a producer's request carries the records
/// of this long.
const LINGER: Duration = Duration::from_millis(5);

#[derive(Default)]
pub struct LatencyOutcome {
    /// The broker's produce p99 per run, seconds (bucket upper bounds).
    pub acks_one: Samples,
    pub acks_all: Samples,
    /// The plain write + fdatasync loop's p99 per run, seconds.
    pub floor: Samples,
}

impl LatencyOutcome {
    pub fn load_label() -> String {
        format!(
            "{CONCURRENT_PRODUCERS} producers × {RATE} records/s of {RECORD_BYTES} B ({:.0} MB/s)",
            (CONCURRENT_PRODUCERS as u64 * RATE * RECORD_BYTES as u64) as f64 / 1e6
        )
    }
}

pub fn run(bench: &Bench, dir: &Path) -> Result<LatencyOutcome> {
    let mut outcome = LatencyOutcome::default();
    let request_bytes = (RATE as usize * RECORD_BYTES) * LINGER.as_millis() as usize / 1000;
    for run in 0..bench.settings.runs {
        eprintln!("latency: the plain write + fdatasync floor (run {run})…");
        outcome.floor.push(baselines::steady_sync_floor(
            dir,
            CONCURRENT_PRODUCERS,
            request_bytes,
            LINGER,
            SECONDS,
        )?);
        for (acks, samples) in [("1", &mut outcome.acks_one), ("-1", &mut outcome.acks_all)] {
            eprintln!("latency: acks={acks} at a steady load (run {run})…");
            let topic = format!("latency-acks{}-{run}", acks.trim_start_matches('-'));
            let mut command = Command::new(bench.driver);
            command.args(["produce", bench.address(), &topic]);
            command.arg((RATE * SECONDS).to_string());
            command.arg(RECORD_BYTES.to_string());
            command.args([acks, &CONCURRENT_PRODUCERS.to_string()]);
            command.arg(format!("rate={RATE}"));
            let before = bench.produce_latency()?;
            bench.timed_driver(command)?;
            let after = bench.produce_latency()?;
            if let Some(p99) = percentile_bound(&before, &after, 0.99) {
                samples.push(p99);
            }
        }
    }
    Ok(outcome)
}
