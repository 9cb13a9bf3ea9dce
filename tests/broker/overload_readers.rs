//! Overload by consumers that never read: a real `strata serve` with 100
//! connections that each pipeline large Fetch requests over a backlog far
//! bigger than their socket buffers and then never read a byte, so the
//! broker holds 100 responses it cannot finish writing.
//!
//! - While they stall, producers writing with acks=all are served: every
//!   produce is acknowledged without error, and afterwards a normal
//!   consumer reads back exactly the acknowledged records at their
//!   offsets. The broker's peak resident memory (`VmHWM`) stays under
//!   [`BROKER_MEMORY_BYTES_MAX`], a bound far below what the stalled
//!   responses would take if they were held in memory (responses go out
//!   with sendfile from the page cache; only small headers are held).
//! - The stalled connections are closed once they have taken nothing for
//!   `socket_stall_timeout`, returning their in-flight slots, response
//!   bytes and descriptors.
//!
//! Soak: `STRATA_SOAK_OVERLOAD_PRODUCES` (produces per producer, 100 by
//! default) makes the first test's load last longer.

use crate::support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ProduceResponse};
use strata::client::{ClientConfig, Cluster, Consumer, ConsumerConfig, OffsetReset};
use strata::log::{LogConfig, LogManager};
use strata::record::Compression;
use support::ServerProcess;
use support::wire::{call_blocking, fetch_request, frame, produce_answer, produce_request};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

/// Consumers that never read.
const STALLED_CONSUMERS: usize = 100;
/// Fetches each one pipelines (the broker reads ahead up to its
/// `in_flight_requests_max`, 5 by default).
const FETCHES_PER_CONSUMER: usize = 5;
/// Their receive buffers: small, so a response overflows them at once.
const CONSUMER_RECEIVE_BUFFER_BYTES: u32 = 64 << 10;
/// Bytes a stalled fetch asks for.
const FETCH_BYTES_MAX: i32 = 64 << 20;
/// The backlog they fetch: much more than a socket's buffers take.
const BACKLOG_TOPIC: &str = "backlog";
const BACKLOG_MEBIBYTES: usize = 32;
/// Where the producers write, and how.
const TOPIC: &str = "orders";
const PARTITIONS: i32 = 4;
const PRODUCERS: usize = 4;
const RECORDS_PER_PRODUCE: usize = 16;
const RECORD_BYTES: usize = 1024;
/// Produces per producer unless `STRATA_SOAK_OVERLOAD_PRODUCES` says.
const PRODUCES_DEFAULT: usize = 100;
/// The broker's peak resident memory allowed: its own working set (under
/// 30 MiB here) with room to spare, a fiftieth of the 100 × 32 MiB of
/// responses the stalled consumers asked for.
const BROKER_MEMORY_BYTES_MAX: u64 = 64 << 20;
/// A stall timeout no test run reaches, for the test that needs the
/// consumers stalled throughout, and a short one for the test of it.
const STALL_NEVER_MS: u64 = 600_000;
const STALL_SHORT_MS: u64 = 500;
const WAIT: Duration = Duration::from_secs(60);

fn produces_per_producer() -> usize {
    std::env::var("STRATA_SOAK_OVERLOAD_PRODUCES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PRODUCES_DEFAULT)
}

/// A data directory holding the backlog, and a broker serving it with
/// `socket_stall_timeout_ms = stall_ms` and its metrics on.
fn start(dir: &std::path::Path, stall_ms: u64) -> ServerProcess {
    let data = dir.join("data");
    support::with_topic(&data, BACKLOG_TOPIC, 1, &[], |topic| {
        let value = vec![b'b'; 1000];
        // Recent timestamps: retention would delete old ones.
        let now = strata::log::now_ms();
        for _ in 0..BACKLOG_MEBIBYTES {
            let records = std::iter::repeat_n((None, &value[..], now), 1000);
            let batch = support::batch_with(Compression::None, records);
            topic.partitions[0].append(&batch).unwrap();
        }
    });
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    log.create_topic(TOPIC, PARTITIONS, Default::default())
        .unwrap();
    log.close().unwrap();
    let config = dir.join("strata.toml");
    std::fs::write(
        &config,
        format!("metrics = \"127.0.0.1:0\"\nsocket_stall_timeout_ms = {stall_ms}\n"),
    )
    .unwrap();
    ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &data,
        &[std::ffi::OsStr::new("--config"), config.as_os_str()],
        std::process::Stdio::null(),
    )
}

/// An unlabelled metric's value from a fresh scrape.
fn metric(server: &ServerProcess, name: &str) -> u64 {
    let text = server.scrape_metrics();
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Connects with a small receive buffer and sends the fetches; the stream
/// is returned and never read.
async fn stalled_consumer(addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .set_recv_buffer_size(CONSUMER_RECEIVE_BUFFER_BYTES)
        .unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let mut requests = Vec::new();
    for correlation_id in 0..FETCHES_PER_CONSUMER as i32 {
        let fetch = fetch_request(BACKLOG_TOPIC, &[0], 0, FETCH_BYTES_MAX, 0);
        requests.extend(frame(ApiKey::Fetch, 12, correlation_id, &fetch));
    }
    stream.write_all(&requests).await.unwrap();
    stream
}

async fn stall_consumers(server: &Arc<ServerProcess>) -> Vec<TcpStream> {
    let addr: SocketAddr = server.addr.parse().unwrap();
    let mut consumers = Vec::new();
    for _ in 0..STALLED_CONSUMERS {
        consumers.push(stalled_consumer(addr).await);
    }
    // Every fetch read and answered, each connection's first answer
    // stuck in its socket.
    let stalled = (STALLED_CONSUMERS * FETCHES_PER_CONSUMER) as u64;
    wait_for_metric(server, "strata_requests_in_flight", move |n| n >= stalled).await;
    consumers
}

async fn wait_for_metric(
    server: &Arc<ServerProcess>,
    name: &'static str,
    done: impl Fn(u64) -> bool + Send + 'static,
) {
    let server = Arc::clone(server);
    tokio::task::spawn_blocking(move || {
        support::wait_until(name, WAIT, || done(metric(&server, name)));
    })
    .await
    .unwrap();
}

/// One producer's acks=all produces, round-robin over the partitions;
/// returns (partition, offset, value) of every acknowledged record.
fn produce(addr: &str, producer: usize, produces: usize) -> Vec<(i32, i64, String)> {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut acked = Vec::new();
    for n in 0..produces {
        let partition = ((producer + n) % PARTITIONS as usize) as i32;
        let values: Vec<String> = (0..RECORDS_PER_PRODUCE)
            .map(|i| {
                let mut value = format!("producer-{producer}-produce-{n}-record-{i}-");
                value.extend(std::iter::repeat_n('x', RECORD_BYTES - value.len()));
                value
            })
            .collect();
        let records = support::batch_with(
            Compression::None,
            values
                .iter()
                .map(|v| (None, v.as_bytes(), strata::log::now_ms())),
        );
        let request = produce_request(-1, TOPIC, partition, records);
        let response: ProduceResponse =
            call_blocking(&mut stream, ApiKey::Produce, 9, &request).expect("a produce answer");
        let (error, base_offset) = produce_answer(&response);
        assert_eq!(error, 0, "producer {producer}, produce {n}");
        for (i, value) in values.into_iter().enumerate() {
            acked.push((partition, base_offset + i as i64, value));
        }
    }
    acked
}

/// Every record of [`TOPIC`], read by a normal consumer from the start to
/// `count` records, as (partition, offset, value).
async fn read_back(addr: &str, count: usize) -> Vec<(i32, i64, String)> {
    let cluster = Cluster::connect(ClientConfig::new(addr)).await.unwrap();
    let mut consumer = Consumer::new(
        cluster,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    );
    let partitions: Vec<_> = (0..PARTITIONS).map(|p| (TOPIC.to_string(), p)).collect();
    consumer.assign(&partitions);
    let mut read = Vec::new();
    let deadline = support::wait::Deadline::after("the records read back", WAIT);
    while read.len() < count {
        deadline.check(format_args!(" ({} of {count})", read.len()));
        for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
            let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
            read.push((record.partition, record.offset, value));
        }
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_served_and_memory_stays_bounded_while_100_consumers_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(start(dir.path(), STALL_NEVER_MS));
    let idle_files = server.open_files();
    let consumers = stall_consumers(&server).await;

    let produces = produces_per_producer();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let addr = server.addr.clone();
            tokio::task::spawn_blocking(move || produce(&addr, producer, produces))
        })
        .collect();
    let mut acked = Vec::new();
    for producer in producers {
        acked.extend(producer.await.unwrap());
    }
    assert_eq!(acked.len(), PRODUCERS * produces * RECORDS_PER_PRODUCE);
    // Still stalled: the load lasted the whole phase.
    let stalled = (STALLED_CONSUMERS * FETCHES_PER_CONSUMER) as u64;
    let server_ = Arc::clone(&server);
    let in_flight =
        tokio::task::spawn_blocking(move || metric(&server_, "strata_requests_in_flight"))
            .await
            .unwrap();
    assert!(in_flight >= stalled, "{in_flight} requests in flight");

    // Read back by a normal consumer while the stalled ones still hang on.
    let mut read = read_back(&server.addr, acked.len()).await;
    read.sort();
    acked.sort();
    assert_eq!(
        read, acked,
        "exactly the acknowledged records, at their offsets"
    );
    let (rss, peak) = server.memory_bytes();
    eprintln!(
        "broker memory with {STALLED_CONSUMERS} stalled consumers: VmRSS {} MiB, VmHWM {} MiB",
        rss >> 20,
        peak >> 20
    );
    assert!(
        peak <= BROKER_MEMORY_BYTES_MAX,
        "the broker peaked at {peak} bytes resident (bound {BROKER_MEMORY_BYTES_MAX})"
    );

    // The consumers go away (closing with unread data resets the
    // connections): the broker lets go of everything they held.
    drop(consumers);
    wait_for_metric(&server, "strata_requests_in_flight", |n| n == 0).await;
    wait_for_metric(&server, "strata_response_bytes_buffered", |n| n == 0).await;
    let server_ = Arc::clone(&server);
    tokio::task::spawn_blocking(move || {
        support::wait_until("the broker's descriptors back", WAIT, || {
            server_.open_files() <= idle_files
        });
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_that_never_read_are_closed_after_the_stall_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(start(dir.path(), STALL_SHORT_MS));
    let idle_files = server.open_files();
    let addr: SocketAddr = server.addr.parse().unwrap();
    let mut consumers = Vec::new();
    for _ in 0..STALLED_CONSUMERS {
        consumers.push(stalled_consumer(addr).await);
    }
    // Nothing is read, and yet the broker lets go of every one.
    wait_for_metric(&server, "strata_requests_in_flight", |n| n == 0).await;
    wait_for_metric(&server, "strata_response_bytes_buffered", |n| n == 0).await;
    let server_ = Arc::clone(&server);
    tokio::task::spawn_blocking(move || {
        support::wait_until("the broker's descriptors back", WAIT, || {
            server_.open_files() <= idle_files
        });
    })
    .await
    .unwrap();
    // Each consumer finds part of one response, then the end of the
    // stream.
    let response_bytes: u64 = (BACKLOG_MEBIBYTES as u64) << 20;
    let mut counts = BTreeMap::new();
    for mut stream in consumers {
        let received = drain(&mut stream).await;
        assert!(received < response_bytes, "{received} bytes arrived");
        *counts.entry(received > 0).or_insert(0) += 1;
    }
    assert_eq!(counts.get(&false), None, "every consumer got a part");
}

/// Reads until the end of the stream or an error; the bytes read.
async fn drain(stream: &mut TcpStream) -> u64 {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut received = 0u64;
    loop {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return received,
            Ok(Ok(n)) => received += n as u64,
            Err(_) => panic!("the broker never closed a stalled connection"),
        }
    }
}
