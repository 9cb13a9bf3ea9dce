//! The broker under test: a release-built `strata serve` started on a free
//! port with a temporary data directory, its CPU time, its produce latency
//! histogram (scraped from its metrics), and its clean stop.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::{ChildGuard, cleaning, free_port};

/// A release-built `strata serve` on a free port.
pub struct Broker {
    process: Option<ChildGuard>,
    pid: u32,
    pub address: String,
    metrics: String,
    /// Held open: the broker may print more, and a closed pipe would fail it.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Broker {
    pub fn start(data_dir: &Path) -> Result<Self> {
        // The cleaner looks for work often, so the cleaning phase's clean
        // starts right after the topic becomes cleanable.
        let config = data_dir.with_extension("toml");
        let mut settings = format!(
            "cleaner_check_interval_ms = {}\n",
            cleaning::CHECK_INTERVAL_MS
        );
        // The cleaner's I/O budget, when asked for one other than its
        // default.
        if let Ok(rate) = std::env::var("STRATA_BENCH_CLEANER_IO") {
            settings.push_str(&format!("cleaner_io_bytes_per_second = {rate}\n"));
        }
        std::fs::write(&config, settings)
            .with_context(|| format!("writing {}", config.display()))?;
        let metrics = format!("127.0.0.1:{}", free_port()?);
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("serve")
            .args(["--metrics", &metrics])
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting strata serve")?;
        let stdout = child.stdout.take().context("strata's stdout")?;
        let guard = ChildGuard::new(child);
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .context("reading strata's first line")?;
        // "strata listening on 127.0.0.1:PORT (PLAINTEXT)"
        let address = (line.trim().strip_prefix("strata listening on "))
            .and_then(|rest| rest.split_whitespace().next())
            .with_context(|| format!("strata serve printed {line:?}"))?
            .to_string();
        Ok(Self {
            pid: guard.id(),
            process: Some(guard),
            address,
            metrics,
            _stdout: stdout,
        })
    }

    /// The broker's produce latency histogram: (upper bound in seconds,
    /// cumulative count) per bucket, +Inf last.
    pub fn produce_latency(&self) -> Result<Vec<(f64, u64)>> {
        let mut stream = std::net::TcpStream::connect(&self.metrics)
            .with_context(|| format!("connecting to the metrics at {}", self.metrics))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stream, &mut text)?;
        let prefix = "strata_request_latency_seconds_bucket{api=\"Produce\",le=\"";
        let buckets = text
            .lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .filter_map(|rest| {
                let (le, count) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((le, count.parse().ok()?))
            })
            .collect();
        Ok(buckets)
    }

    /// User + system CPU seconds the broker has used so far.
    pub fn cpu_seconds(&self) -> Result<f64> {
        super::serve::cpu_seconds(self.pid).context("reading the broker's /proc stat")
    }

    /// SIGTERM, then wait for the clean shutdown.
    pub fn stop(mut self) -> Result<()> {
        let Some(guard) = self.process.take() else {
            return Ok(());
        };
        let mut child = guard.take();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                ensure!(status.success(), "strata serve exited with {status}");
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("strata serve did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The upper bound of the bucket holding quantile `q` of the observations
/// made between two scrapes of a cumulative histogram: `None` without any,
/// infinity past the last finite bound. Hand-written, not an HdrHistogram:
/// what the scrapes hold is bucket counts, not the values one would record.
pub fn percentile_bound(before: &[(f64, u64)], after: &[(f64, u64)], q: f64) -> Option<f64> {
    let count_before = |le: f64| {
        before
            .iter()
            .find(|(bound, _)| *bound == le)
            .map_or(0, |(_, count)| *count)
    };
    let total = after.last()?.1 - count_before(f64::INFINITY);
    if total == 0 {
        return None;
    }
    let wanted = (q * total as f64).ceil() as u64;
    after
        .iter()
        .find(|(le, count)| count - count_before(*le) >= wanted)
        .map(|(le, _)| *le)
}
