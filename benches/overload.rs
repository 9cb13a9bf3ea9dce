//! A producer's acks=all latency with and without 100 consumers that never
//! read, in one run against one `strata serve` (this build's binary).
//!
//! The consumers each pipeline five Fetch requests for 64 MiB over a
//! 32 MiB backlog, with 64 KiB receive buffers, and then never read: the
//! broker holds 500 responses it cannot finish writing (its
//! `socket_stall_timeout` is set past the run so none is cut). One
//! producer sends one 1 KiB record per request with acks=all, waiting for
//! each answer, first alone, then under that load; the p50 and p99 of its
//! round trips are printed for each phase with the ratio, against the
//! target of the hardening issue: loaded within 2× of unloaded. The
//! broker's peak resident memory is printed beside it. Missing the target
//! does not fail the run: this is a measurement (the pass/fail half is
//! tests/broker/overload_readers.rs).
//!
//! Run it with `make bench-overload`. Settings (environment):
//! `STRATA_BENCH_OVERLOAD_PRODUCES` (round trips per phase, 2000),
//! `STRATA_BENCH_DIR` (parent of the temporary directory).

mod scrape;
mod serve;
mod summary;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use hdrhistogram::Histogram;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, ProduceRequest, ProduceResponse, ResponseHeader,
};
use kafka_protocol::protocol::Decodable;
use serve::{Broker, frame, read_frame, topic_name};
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};

const STALLED_CONSUMERS: usize = 100;
const FETCHES_PER_CONSUMER: usize = 5;
const CONSUMER_RECEIVE_BUFFER_BYTES: u32 = 64 << 10;
const FETCH_BYTES_MAX: i32 = 64 << 20;
const BACKLOG_TOPIC: &str = "backlog";
const BACKLOG_MEBIBYTES: usize = 32;
const TOPIC: &str = "latency";
const RECORD_BYTES: usize = 1024;
const PRODUCES_DEFAULT: usize = 2000;
/// Round trips before the first phase, not counted (connections, page
/// cache, the first segment's growth).
const WARM_UP: usize = 200;
/// The target: loaded latency within this factor of unloaded.
const TARGET_RATIO: f64 = 2.0;
const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
const STALL_WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else is taken.
    let produces = std::env::var("STRATA_BENCH_OVERLOAD_PRODUCES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PRODUCES_DEFAULT);
    let parent = std::env::var_os("STRATA_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(parent)?;
    prepare(dir.path())?;
    let broker = start(dir.path())?;

    let mut producer = TcpStream::connect(&broker.address)?;
    producer.set_nodelay(true)?;
    round_trips(&mut producer, WARM_UP)?;
    eprintln!("unloaded: {produces} acks=all produces…");
    let unloaded = round_trips(&mut producer, produces)?;

    eprintln!("stalling {STALLED_CONSUMERS} consumers…");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let consumers = runtime.block_on(stall_consumers(&broker))?;
    eprintln!("loaded: {produces} acks=all produces…");
    let loaded = round_trips(&mut producer, produces)?;
    ensure!(
        metric(&broker, "strata_requests_in_flight")?
            >= (STALLED_CONSUMERS * FETCHES_PER_CONSUMER) as u64,
        "the consumers were cut before the loaded phase ended"
    );
    let peak = peak_memory_bytes(broker.child.id())?;
    drop(consumers);

    let quiet = [percentile(&unloaded, 0.50), percentile(&unloaded, 0.99)];
    let busy = [percentile(&loaded, 0.50), percentile(&loaded, 0.99)];
    let ratios = [busy[0] / quiet[0], busy[1] / quiet[1]];
    println!(
        "acks=all produce round trip, one producer, {RECORD_BYTES} B records, {produces} per phase"
    );
    println!("{:<44} {:>10} {:>10}", "", "p50", "p99");
    println!(
        "{:<44} {:>10} {:>10}",
        "unloaded",
        ms(quiet[0]),
        ms(quiet[1])
    );
    println!(
        "{:<44} {:>10} {:>10}",
        format!("{STALLED_CONSUMERS} consumers that never read"),
        ms(busy[0]),
        ms(busy[1])
    );
    println!(
        "{:<44} {:>9.2}× {:>9.2}×",
        "loaded / unloaded", ratios[0], ratios[1]
    );
    println!("broker peak resident memory (VmHWM): {} MiB", peak >> 20);
    // Latencies as round trips per second, so that the target reads as
    // every other: loaded ≥ 1/TARGET_RATIO × unloaded.
    let targets: Vec<summary::Target> = (["p50", "p99"].iter().enumerate())
        .map(|(at, label)| summary::Target {
            what: format!(
                "acks=all round trips/s at {label}, beside {STALLED_CONSUMERS} stalled consumers"
            ),
            measured: 1.0 / busy[at],
            reference_name: "unloaded".into(),
            reference: 1.0 / quiet[at],
            factor: 1.0 / TARGET_RATIO,
            unit: "/s",
            floor: None,
        })
        .collect();
    summary::report("overload", &targets)
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

/// The round trip at quantile `q`, seconds.
fn percentile(round_trips_ns: &Histogram<u64>, q: f64) -> f64 {
    round_trips_ns.value_at_quantile(q) as f64 / 1e9
}

/// The backlog the consumers fetch and the producer's topic, written
/// before the broker opens the directory.
fn prepare(dir: &std::path::Path) -> Result<()> {
    let log = LogManager::open(&dir.join("data"), LogConfig::default())?;
    let backlog = log.create_topic(BACKLOG_TOPIC, 1, Default::default())?;
    let value = vec![b'b'; 1000];
    // Recent timestamps: retention would delete old ones.
    let now = strata::log::now_ms();
    for _ in 0..BACKLOG_MEBIBYTES {
        let mut batch = BatchBuilder::new(Compression::None);
        for _ in 0..1000 {
            batch.push(NewRecord::new(None, &value, now))?;
        }
        backlog.partitions[0].append(&batch.build()?)?;
    }
    drop(backlog);
    log.create_topic(TOPIC, 1, Default::default())?;
    log.close()?;
    Ok(())
}

/// The broker, with its metrics endpoint and no stalled consumer cut
/// during the run.
fn start(dir: &std::path::Path) -> Result<Broker> {
    let config = "metrics = \"127.0.0.1:0\"\nsocket_stall_timeout_ms = 3600000\n";
    let broker = serve::start(dir, config)?;
    ensure!(
        broker.metrics.is_some(),
        "strata serve printed no metrics address"
    );
    Ok(broker)
}

/// `count` produces of one record, each waited for; their round trips in
/// nanoseconds, to three significant digits.
fn round_trips(stream: &mut TcpStream, count: usize) -> Result<Histogram<u64>> {
    let value = vec![b'p'; RECORD_BYTES];
    // Round trips past a minute count as a minute.
    let mut samples =
        Histogram::new_with_max(60_000_000_000, 3).context("creating the latency histogram")?;
    for n in 0..count {
        let mut batch = BatchBuilder::new(Compression::None);
        batch.push(NewRecord::new(None, &value, strata::log::now_ms()))?;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic_name(TOPIC))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(batch.build()?))),
                    ]),
            ]);
        let correlation_id = n as i32;
        let frame = frame(ApiKey::Produce, PRODUCE_VERSION, correlation_id, &request)?;
        let started = Instant::now();
        stream.write_all(&frame)?;
        let mut response = read_frame(stream)?;
        samples.saturating_record(started.elapsed().as_nanos() as u64);
        let header = ResponseHeader::decode(
            &mut response,
            ApiKey::Produce.response_header_version(PRODUCE_VERSION),
        )?;
        ensure!(
            header.correlation_id == correlation_id,
            "answers out of order"
        );
        let answer = ProduceResponse::decode(&mut response, PRODUCE_VERSION)?;
        let code = answer.responses[0].partition_responses[0].error_code;
        if code != 0 {
            bail!("produce {n} failed with error {code}");
        }
    }
    Ok(samples)
}

/// Connects the consumers, sends their fetches, and waits until the broker
/// holds every one of them; the streams, never read.
async fn stall_consumers(broker: &Broker) -> Result<Vec<tokio::net::TcpStream>> {
    use tokio::io::AsyncWriteExt;
    let address: std::net::SocketAddr = broker.address.parse()?;
    let mut fetches = Vec::new();
    for correlation_id in 0..FETCHES_PER_CONSUMER as i32 {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_BYTES_MAX)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic_name(BACKLOG_TOPIC))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(FETCH_BYTES_MAX),
                    ]),
            ]);
        fetches.extend(frame(
            ApiKey::Fetch,
            FETCH_VERSION,
            correlation_id,
            &request,
        )?);
    }
    let mut consumers = Vec::new();
    for _ in 0..STALLED_CONSUMERS {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(CONSUMER_RECEIVE_BUFFER_BYTES)?;
        let mut stream = socket.connect(address).await?;
        stream.write_all(&fetches).await?;
        consumers.push(stream);
    }
    let stalled = (STALLED_CONSUMERS * FETCHES_PER_CONSUMER) as u64;
    let deadline = Instant::now() + STALL_WAIT;
    while metric(broker, "strata_requests_in_flight")? < stalled {
        ensure!(Instant::now() < deadline, "the consumers never stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(consumers)
}

/// An unlabelled metric's value.
fn metric(broker: &Broker, name: &str) -> Result<u64> {
    let address = broker
        .metrics
        .as_deref()
        .context("the broker's metrics address")?;
    scrape::metric(address, name)
}

/// The broker's `VmHWM`, in bytes.
fn peak_memory_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .context("no VmHWM")?
        .trim()
        .parse()?;
    Ok(kib * 1024)
}
