//! The broker's CPU per request under small-batch clients, beside a floor
//! over the same framing, in one run (`make bench-requests`).
//!
//! Clients that send one record per produce request, or fetch with
//! `fetch.min.bytes=1` as records arrive, make the broker's cost per
//! request, not per byte, what limits it. Two kinds of request:
//!
//! - `produce`: [`CONNECTIONS`] connections, each to a partition of its
//!   own, keep [`IN_FLIGHT`] requests outstanding, each one 100-byte
//!   record with acks=1.
//! - `fetch`: the same connections each read a partition of one-record
//!   batches from its start, one batch per request
//!   (`min_bytes=1`, the partition's `max_bytes` 1: the first batch only),
//!   [`IN_FLIGHT`] offsets ahead.
//!
//! The floor is an echo server: this benchmark's binary started again as
//! a process of its own (tokio, a task per connection, as the broker). It
//! reads the same frames and answers each with the bytes the broker
//! answered that kind of request with, the correlation id put in: the
//! framing, the system calls and the scheduling, and no Kafka work. The
//! CPU each server used over a phase is read from `/proc/<pid>/stat`
//! (user + system) and divided by the requests it answered. Each kind
//! runs [`ROUNDS`] times on each server, alternating; the least CPU per
//! request of each is kept. The target: the broker within 2× of the
//! floor, stated as requests per CPU-second (≥ 0.5× the echo's).
//!
//! Settings (environment): `STRATA_BENCH_REQUESTS` (requests per phase,
//! 100,000), `STRATA_BENCH_REQUEST_KINDS` (`produce`, `fetch`, or both,
//! comma-separated), `STRATA_BENCH_DIR` (parent of the temporary
//! directory).

mod serve;
mod summary;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Connections per phase, each with a partition of its own.
const CONNECTIONS: usize = 8;
/// Requests each connection keeps outstanding (librdkafka's
/// `max.in.flight` is 5 for an idempotent producer).
const IN_FLIGHT: usize = 4;
const REQUESTS_DEFAULT: usize = 100_000;
const ROUNDS: usize = 3;
const RECORD_BYTES: usize = 100;
const PRODUCED: &str = "produced";
const FETCHED: &str = "fetched";
const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
/// Where the echo server finds its answers; set, the binary is the echo
/// server.
const ECHO_ENV: &str = "STRATA_BENCH_ECHO_ANSWERS";
/// The largest frame the echo server takes.
const ECHO_FRAME_MAX: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Produce,
    Fetch,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Produce => "produce, 1 record of 100 B, acks=1",
            Self::Fetch => "fetch, min_bytes=1, 1 batch of 1 record",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Produce => "produce",
            Self::Fetch => "fetch",
        }
    }

    fn api_key(self) -> ApiKey {
        match self {
            Self::Produce => ApiKey::Produce,
            Self::Fetch => ApiKey::Fetch,
        }
    }
}

/// What one phase measured.
#[derive(Clone, Copy)]
struct Phase {
    requests_per_second: f64,
    cpu_seconds_per_request: f64,
}

fn main() -> Result<()> {
    if let Some(answers) = std::env::var_os(ECHO_ENV) {
        return echo_server(Path::new(&answers));
    }
    let requests = std::env::var("STRATA_BENCH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(REQUESTS_DEFAULT);
    let per_connection = requests / CONNECTIONS;
    let kinds_named = std::env::var("STRATA_BENCH_REQUEST_KINDS");
    let kinds: Vec<Kind> = [Kind::Produce, Kind::Fetch]
        .into_iter()
        .filter(|kind| (kinds_named.as_deref()).map_or(true, |named| named.contains(kind.short())))
        .collect();
    let parent = std::env::var_os("STRATA_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(parent)?;
    prepare(dir.path(), per_connection)?;
    let broker = serve::start(dir.path(), "")?;

    // One answer of each kind from the broker: what the echo answers with.
    let answers = dir.path().join("answers");
    std::fs::create_dir(&answers)?;
    let mut probe = TcpStream::connect(&broker.address)?;
    for kind in [Kind::Produce, Kind::Fetch] {
        probe.write_all(&request(kind, 0, 0, 0)?)?;
        let answer = serve::read_frame(&mut probe)?;
        std::fs::write(
            answers.join(format!("{:?}", kind.api_key() as i16)),
            &answer,
        )?;
    }
    drop(probe);
    let echo = start_echo(&answers)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Untimed: connections, the page cache, the segments' first growth.
    for &kind in &kinds {
        runtime.block_on(phase(&broker.address, kind, per_connection / 10))?;
    }
    let servers = [
        ("strata serve", broker.child.id(), broker.address.clone()),
        ("echo floor", echo.child.id(), echo.address.clone()),
    ];
    let mut best: BTreeMap<(Kind, &str), Phase> = BTreeMap::new();
    for round in 0..ROUNDS {
        for &kind in &kinds {
            for (server, pid, address) in &servers {
                let before = serve::cpu_seconds(*pid)?;
                let (answered, took) = runtime.block_on(phase(address, kind, per_connection))?;
                let cpu = serve::cpu_seconds(*pid)? - before;
                let measured = Phase {
                    requests_per_second: answered as f64 / took,
                    cpu_seconds_per_request: cpu / answered as f64,
                };
                eprintln!(
                    "round {round}: {server}, {}: {:.0} requests/s, {:.1} µs of CPU each",
                    kind.name(),
                    measured.requests_per_second,
                    measured.cpu_seconds_per_request * 1e6
                );
                let kept = best.entry((kind, *server)).or_insert(measured);
                if measured.cpu_seconds_per_request < kept.cpu_seconds_per_request {
                    *kept = measured;
                }
            }
        }
    }
    println!(
        "\n{CONNECTIONS} connections, {IN_FLIGHT} requests in flight each, {per_connection} requests each per phase; best of {ROUNDS} rounds"
    );
    println!(
        "{:<44} {:<14} {:>12} {:>16}",
        "request", "server", "requests/s", "µs CPU/request"
    );
    for ((kind, server), phase) in &best {
        println!(
            "{:<44} {:<14} {:>12.0} {:>16.1}",
            kind.name(),
            server,
            phase.requests_per_second,
            phase.cpu_seconds_per_request * 1e6
        );
    }
    let targets: Vec<summary::Target> = (kinds.iter())
        .map(|&kind| summary::Target {
            what: format!("broker {}: requests per CPU-second", kind.name()),
            measured: 1.0 / best[&(kind, "strata serve")].cpu_seconds_per_request,
            reference_name: "echo floor".into(),
            reference: 1.0 / best[&(kind, "echo floor")].cpu_seconds_per_request,
            factor: 0.5,
            unit: "/CPU-s",
            floor: None,
        })
        .collect();
    summary::report("requests", &targets)
}

/// The produced topic, and the fetched one holding `per_connection`
/// one-record batches in each partition, written before the broker opens
/// the directory.
fn prepare(dir: &Path, per_connection: usize) -> Result<()> {
    let log = LogManager::open(&dir.join("data"), LogConfig::default())?;
    let partitions = i32::try_from(CONNECTIONS)?;
    log.create_topic(PRODUCED, partitions, Default::default())?;
    let fetched = log.create_topic(FETCHED, partitions, Default::default())?;
    let value = [b'f'; RECORD_BYTES];
    // Recent timestamps: retention would delete old ones.
    let now = strata::log::now_ms();
    for partition in &fetched.partitions {
        for _ in 0..per_connection {
            let mut batch = BatchBuilder::new(Compression::None);
            batch.push(NewRecord::new(None, &value, now))?;
            partition.append(&batch.build()?)?;
        }
        partition.flush()?;
    }
    drop(fetched);
    log.close()?;
    Ok(())
}

/// A request of `kind` for `partition` (a fetch at `offset`), framed.
fn request(kind: Kind, correlation_id: i32, partition: i32, offset: i64) -> Result<Vec<u8>> {
    match kind {
        Kind::Produce => {
            let mut batch = BatchBuilder::new(Compression::None);
            let value = [b'p'; RECORD_BYTES];
            batch.push(NewRecord::new(None, &value, strata::log::now_ms()))?;
            let request = ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(serve::topic_name(PRODUCED))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(partition)
                                .with_records(Some(Bytes::from(batch.build()?))),
                        ]),
                ]);
            serve::frame(ApiKey::Produce, PRODUCE_VERSION, correlation_id, &request)
        }
        Kind::Fetch => {
            let request = FetchRequest::default()
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(1)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(serve::topic_name(FETCHED))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(partition)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(1),
                        ]),
                ]);
            serve::frame(ApiKey::Fetch, FETCH_VERSION, correlation_id, &request)
        }
    }
}

/// One phase: every connection sends `per_connection` requests of `kind`,
/// [`IN_FLIGHT`] outstanding; the answers counted and the seconds taken.
async fn phase(address: &str, kind: Kind, per_connection: usize) -> Result<(usize, f64)> {
    let started = Instant::now();
    let connections: Vec<_> = (0..CONNECTIONS)
        .map(|partition| {
            let address = address.to_string();
            tokio::spawn(async move { connection(&address, kind, partition, per_connection).await })
        })
        .collect();
    let mut answered = 0;
    for connection in connections {
        answered += connection.await??;
    }
    Ok((answered, started.elapsed().as_secs_f64()))
}

/// One connection's requests, `IN_FLIGHT` ahead of its answers; the
/// answers read.
async fn connection(address: &str, kind: Kind, partition: usize, count: usize) -> Result<usize> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let partition = i32::try_from(partition)?;
    let mut answer = Vec::new();
    let (mut sent, mut answered) = (0, 0);
    while answered < count {
        while sent < count && sent - answered < IN_FLIGHT {
            let correlation_id = i32::try_from(sent)?;
            let frame = request(kind, correlation_id, partition, sent as i64)?;
            stream.write_all(&frame).await?;
            sent += 1;
        }
        let size = usize::try_from(stream.read_i32().await?)?;
        answer.resize(size, 0);
        stream.read_exact(&mut answer).await?;
        let correlation_id = i32::from_be_bytes(answer[..4].try_into()?);
        ensure!(
            correlation_id == i32::try_from(answered)?,
            "answers out of order"
        );
        answered += 1;
    }
    Ok(answered)
}

/// The echo server, running as a process of its own.
struct Echo {
    child: Child,
    address: String,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_echo(answers: &Path) -> Result<Echo> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(ECHO_ENV, answers)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the echo server")?;
    let stdout = child.stdout.take().context("the echo server's stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let address = (line.trim().strip_prefix("echo listening on "))
        .with_context(|| format!("the echo server printed {line:?}"))?
        .to_string();
    Ok(Echo { child, address })
}

/// Answers every frame with the broker's answer to its kind of request
/// (by API key), its correlation id put in.
fn echo_server(answers: &Path) -> Result<()> {
    let mut by_key: BTreeMap<i16, Vec<u8>> = BTreeMap::new();
    for entry in std::fs::read_dir(answers)? {
        let entry = entry?;
        let key: i16 = entry.file_name().to_string_lossy().parse()?;
        by_key.insert(key, std::fs::read(entry.path())?);
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("echo listening on {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let by_key = std::sync::Arc::new(by_key);
        loop {
            let (stream, _) = listener.accept().await?;
            let by_key = std::sync::Arc::clone(&by_key);
            tokio::spawn(async move {
                if let Err(error) = echo_connection(stream, &by_key).await {
                    eprintln!("echo connection: {error:#}");
                }
            });
        }
    })
}

async fn echo_connection(
    mut stream: tokio::net::TcpStream,
    by_key: &BTreeMap<i16, Vec<u8>>,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut request = Vec::new();
    let mut answer = Vec::new();
    loop {
        let size = match stream.read_i32().await {
            Ok(size) => usize::try_from(size)?,
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        ensure!(
            (8..=ECHO_FRAME_MAX).contains(&size),
            "a frame of {size} bytes"
        );
        request.resize(size, 0);
        stream.read_exact(&mut request).await?;
        let key = i16::from_be_bytes([request[0], request[1]]);
        let body = by_key
            .get(&key)
            .with_context(|| format!("no answer for API {key}"))?;
        answer.clear();
        answer.extend_from_slice(&i32::try_from(body.len())?.to_be_bytes());
        answer.extend_from_slice(&request[4..8]);
        answer.extend_from_slice(&body[4..]);
        stream.write_all(&answer).await?;
    }
}
