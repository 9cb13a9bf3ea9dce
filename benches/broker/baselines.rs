//! What the machine itself can do: loopback TCP (iperf3) and sequential
//! disk writes made durable with fdatasync, in the broker's file system.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{ChildGuard, Samples, free_port};

/// Seconds one iperf3 run lasts.
const IPERF_SECONDS: u32 = 3;
/// Bytes each `write(2)` of the disk baseline hands the kernel.
const DISK_CHUNK_BYTES: usize = 1 << 20;
/// The first large write after an idle spell is several times slower than
/// the next on these machines: one untimed write of this size goes first.
const DISK_WARM_UP_BYTES: u64 = 256 << 20;

/// Loopback TCP throughput, one sample per run, in bytes per second.
pub fn loopback_tcp(runs: usize) -> Result<Samples> {
    let port = free_port()?;
    let server = Command::new("iperf3")
        .args(["--server", "--bind", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting `iperf3 --server` (run `make deps-bench`)")?;
    let _server = ChildGuard::new(server);
    let mut samples = Samples::default();
    for _ in 0..runs {
        samples.push(iperf_once(port)?);
    }
    Ok(samples)
}

fn iperf_once(port: u16) -> Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let output = Command::new("iperf3")
            .args(["--client", "127.0.0.1", "--json", "--time"])
            .arg(IPERF_SECONDS.to_string())
            .arg("--port")
            .arg(port.to_string())
            .output()
            .context("running `iperf3 --client`")?;
        let report: serde_json::Value = serde_json::from_slice(&output.stdout)
            .with_context(|| format!("iperf3 printed no JSON (status {})", output.status))?;
        if let Some(bits) = report["end"]["sum_received"]["bits_per_second"].as_f64() {
            return Ok(bits / 8.0);
        }
        // The server may not be listening yet.
        if Instant::now() > deadline {
            bail!("iperf3 failed: {}", report["error"]);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sequential write throughput of `file_bytes` in `dir`, fdatasync included,
/// one sample per run, in bytes per second. Incompressible data, so no layer
/// below can shortcut it (zeros may be).
pub fn disk_write(dir: &Path, file_bytes: u64, runs: usize) -> Result<Samples> {
    let path = dir.join("disk-baseline");
    let chunk = pseudo_random(DISK_CHUNK_BYTES);
    write_synced(&path, &chunk, DISK_WARM_UP_BYTES)?;
    let mut samples = Samples::default();
    for _ in 0..runs {
        std::fs::remove_file(&path).ok();
        let started = Instant::now();
        write_synced(&path, &chunk, file_bytes)?;
        samples.push(file_bytes as f64 / started.elapsed().as_secs_f64());
    }
    std::fs::remove_file(&path).ok();
    Ok(samples)
}

fn write_synced(path: &Path, chunk: &[u8], bytes: u64) -> Result<()> {
    let mut file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut written = 0u64;
    while written < bytes {
        file.write_all(chunk)
            .with_context(|| format!("writing {}", path.display()))?;
        written += chunk.len() as u64;
    }
    file.sync_data()
        .with_context(|| format!("fdatasync of {}", path.display()))
}

/// Appends timed for [`fsync_latency`], after as many untimed.
const FSYNC_SAMPLES: usize = 500;
/// Bytes appended before each timed fdatasync: a produce request's worth.
const FSYNC_APPEND_BYTES: usize = 16 << 10;

/// One fdatasync's duration: the median and the 99th percentile, seconds.
pub struct FsyncLatency {
    pub median: f64,
    pub p99: f64,
}

/// One fdatasync as a producer's acks=all answer pays it: append
/// `FSYNC_APPEND_BYTES` to a file, then fdatasync, back to back.
pub fn fsync_latency(dir: &Path) -> Result<FsyncLatency> {
    let path = dir.join("fsync-baseline");
    let mut file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let chunk = pseudo_random(FSYNC_APPEND_BYTES);
    let mut latencies = Vec::with_capacity(FSYNC_SAMPLES);
    for i in 0..2 * FSYNC_SAMPLES {
        file.write_all(&chunk)
            .with_context(|| format!("writing {}", path.display()))?;
        let started = Instant::now();
        file.sync_data()
            .with_context(|| format!("fdatasync of {}", path.display()))?;
        if i >= FSYNC_SAMPLES {
            latencies.push(started.elapsed().as_secs_f64());
        }
    }
    std::fs::remove_file(&path).ok();
    latencies.sort_by(f64::total_cmp);
    Ok(FsyncLatency {
        median: latencies[latencies.len() / 2],
        p99: latencies[latencies.len() * 99 / 100],
    })
}

/// The floor of the steady-load latency phase (see `latency`): as many
/// threads as its producers, each appending what one of its requests
/// carries (its records per linger interval) to one shared file every
/// linger interval and making it durable with its own fdatasync, for the
/// phase's duration. The 99th percentile of append + fdatasync, seconds:
/// what a plain acks=all write loop pays at that load with no broker.
pub fn steady_sync_floor(
    dir: &Path,
    threads: usize,
    request_bytes: usize,
    every: Duration,
    seconds: u64,
) -> Result<f64> {
    let path = dir.join("steady-sync-floor");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let chunk = pseudo_random(request_bytes);
    let requests = (seconds * 1000 / every.as_millis().max(1) as u64) as usize;
    let mut latencies = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (file, chunk) = (&file, &chunk);
                scope.spawn(move || -> std::io::Result<Vec<f64>> {
                    let mut latencies = Vec::with_capacity(requests);
                    let begun = Instant::now();
                    for i in 0..requests {
                        let due = begun + every * i as u32;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let started = Instant::now();
                        (&*file).write_all(chunk)?;
                        file.sync_data()?;
                        latencies.push(started.elapsed().as_secs_f64());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a floor thread does not panic"))
            .collect::<std::io::Result<Vec<Vec<f64>>>>()
    })
    .with_context(|| format!("writing {}", path.display()))?
    .concat();
    std::fs::remove_file(&path).ok();
    latencies.sort_by(f64::total_cmp);
    Ok(latencies[latencies.len() * 99 / 100])
}

/// xorshift64 bytes: cheap, reproducible, incompressible.
pub fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}
