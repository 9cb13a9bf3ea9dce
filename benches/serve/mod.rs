//! A `strata serve` of this build for a benchmark, and Kafka requests
//! framed by hand (the client side of the wire, without a client library
//! in between): what the benchmarks that talk to the broker directly share.

#![allow(
    dead_code,
    reason = "each benchmark takes the part of this module it needs"
)]

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, ensure};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};

/// A running `strata serve`, killed when dropped, however the run ends.
pub struct Broker {
    pub child: Child,
    pub address: String,
    /// `HOST:PORT` of its metrics endpoint, when its configuration has one.
    pub metrics: Option<String>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `strata serve` on a free loopback port over `dir/data`, with
/// `config` (TOML) as its configuration file; returns once it listens.
pub fn start(dir: &Path, config: &str) -> Result<Broker> {
    let config_file = dir.join("strata.toml");
    std::fs::write(&config_file, config)?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config_file)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting strata serve")?;
    let mut stdout = BufReader::new(child.stdout.take().context("strata's stdout")?);
    let mut broker = Broker {
        child,
        address: String::new(),
        metrics: None,
    };
    // Every listener's line comes first, then the metrics endpoint's when
    // the configuration names one.
    let wants_metrics = config
        .lines()
        .any(|line| line.trim_start().starts_with("metrics"));
    let mut line = String::new();
    while broker.address.is_empty() || (wants_metrics && broker.metrics.is_none()) {
        line.clear();
        ensure!(
            stdout.read_line(&mut line)? > 0,
            "strata serve ended before it listened"
        );
        // "strata listening on ADDRESS (PROTOCOL)"
        if let Some(rest) = line.trim().strip_prefix("strata listening on ") {
            broker.address = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        } else if let Some(url) = line.trim().strip_prefix("metrics on http://") {
            broker.metrics = Some(url.trim_end_matches("/metrics").to_string());
        }
    }
    // Keeps the pipe open: a closed stdout would fail a later print.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok(broker)
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.into()))
}

/// A request framed as the wire carries it: its size, header and body.
pub fn frame<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("strata-bench")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let mut out = i32::try_from(buf.len())?.to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    Ok(out)
}

/// One frame's body (its size read first).
pub fn read_frame(stream: &mut TcpStream) -> Result<Bytes> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(size))?];
    stream.read_exact(&mut body)?;
    Ok(Bytes::from(body))
}

/// User + system CPU seconds process `pid` (or `self`) has used so far.
pub fn cpu_seconds(pid: impl std::fmt::Display) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which ends at the last ')'):
    // utime is the 14th field, stime the 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |at: usize| -> Result<f64> {
        (fields.get(at).and_then(|f| f.parse::<f64>().ok())).context("parsing /proc stat")
    };
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((ticks(11)? + ticks(12)?) / hz)
}
