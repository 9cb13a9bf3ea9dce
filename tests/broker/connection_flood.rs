//! A flood of connections from clients that are idle or stall: a real
//! `strata serve` with small limits (`connections_max`,
//! `connection_idle_timeout_ms`, `socket_stall_timeout_ms` in its
//! strata.toml) and thousands of loopback connections, a third sending
//! nothing, a third half a size prefix, a third a size prefix and half the
//! frame it announces, all then waiting.
//!
//! - The connection limit holds: the broker never has more than
//!   `connections_max` client sockets open (its descriptors, sampled all
//!   along, never exceed the count before the flood plus the limit plus a
//!   few for its own files); the rest wait in the accept queue.
//! - Every flooding connection is closed by the broker, and none before its
//!   timeout: silent ones and half prefixes after the idle timeout, half
//!   frames after the stall timeout (a lower bound measured from before the
//!   client's connect, so it holds whatever the machine's speed).
//! - Clients that behave are served during the flood: one that produces
//!   with acks=all and fetches its records back, round after round on one
//!   connection, and slow ones that send a request in pieces spaced under
//!   the stall timeout (moving, so never cut) and get their answer.
//!
//! - Every flooding connection is one the broker knew: at most
//!   `connections_max` plus its accept backlog are open or connecting at
//!   once (all of them at the default size, with Linux's default somaxconn
//!   of 4096), so no handshake is dropped by a full accept queue. With
//!   tokio's backlog of 128 the broker had, a flood of 2,400 left silent
//!   clients holding connections the broker's kernel had dropped, never
//!   closed (regression: `strata::broker::LISTEN_BACKLOG`).
//!
//! Soak: `STRATA_SOAK_FLOOD_CONNECTIONS` (2,400 by default) sets the size
//! of the flood; the test raises its RLIMIT_NOFILE to fit.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse,
};
use support::ServerProcess;
use support::server_process::open_files_of;
use support::wire::{
    call, decode_response, fetch_request, frame, produce_answer, produce_request, read_response,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// The broker's limits for the test.
const CONNECTIONS_MAX: usize = 500;
const IDLE_TIMEOUT: Duration = Duration::from_millis(1000);
const STALL_TIMEOUT: Duration = Duration::from_millis(1000);
/// Flooding connections unless `STRATA_SOAK_FLOOD_CONNECTIONS` says.
const FLOOD_DEFAULT: usize = 2_400;
/// Size a half frame announces (it sends half of it).
const HALF_FRAME_BYTES: usize = 512;
/// Descriptors the broker may open besides client sockets while flooded
/// (segment and index files, a metrics scrape).
const BROKER_OWN_FILES_SLACK: usize = 16;
/// Descriptors the test needs besides the flood's sockets.
const TEST_OWN_FILES: u64 = 256;
/// Rounds of the behaving client: produce, then fetch back.
const NORMAL_ROUNDS: usize = 10;
const NORMAL_PAUSE: Duration = Duration::from_millis(100);
/// Slow clients, and the pieces they send a request in.
const SLOW_CLIENTS: usize = 20;
const SLOW_PIECES: usize = 4;
const TOPIC: &str = "flooded";
/// Room kept free in the accept queue for the behaving clients.
const QUEUE_ROOM_KEPT: usize = 64;
const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flood {
    Silent,
    HalfPrefix,
    HalfFrame,
}

impl Flood {
    const ALL: [Self; 3] = [Self::Silent, Self::HalfPrefix, Self::HalfFrame];

    /// The least time the broker must keep such a connection open.
    fn timeout(self) -> Duration {
        match self {
            Self::Silent | Self::HalfPrefix => IDLE_TIMEOUT,
            Self::HalfFrame => STALL_TIMEOUT,
        }
    }

    fn bytes(self) -> Vec<u8> {
        match self {
            Self::Silent => Vec::new(),
            Self::HalfPrefix => vec![0, 0],
            Self::HalfFrame => {
                let mut bytes = (HALF_FRAME_BYTES as i32).to_be_bytes().to_vec();
                bytes.extend(std::iter::repeat_n(0u8, HALF_FRAME_BYTES / 2));
                bytes
            }
        }
    }
}

/// How many flooding connections may be open or connecting at once: what
/// the broker serves plus what its kernel queues for it.
fn flood_window() -> usize {
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(128);
    let backlog = strata::broker::LISTEN_BACKLOG.min(somaxconn) as usize;
    CONNECTIONS_MAX + backlog.saturating_sub(QUEUE_ROOM_KEPT)
}

fn flood_size() -> usize {
    std::env::var("STRATA_SOAK_FLOOD_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FLOOD_DEFAULT)
}

/// Raises this process's soft RLIMIT_NOFILE to at least `needed` (up to
/// the hard limit, which must allow it).
fn raise_open_files_limit(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, nothing else.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    if limit.rlim_cur >= needed {
        return;
    }
    assert!(
        limit.rlim_max >= needed,
        "the flood needs {needed} descriptors; the hard limit is {}",
        limit.rlim_max
    );
    limit.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct it is given, nothing else.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

fn start(dir: &std::path::Path) -> ServerProcess {
    let config = dir.join("strata.toml");
    std::fs::write(
        &config,
        format!(
            "connections_max = {CONNECTIONS_MAX}\n\
             connection_idle_timeout_ms = {}\n\
             socket_stall_timeout_ms = {}\n",
            IDLE_TIMEOUT.as_millis(),
            STALL_TIMEOUT.as_millis()
        ),
    )
    .unwrap();
    let data = dir.join("data");
    support::with_topic(&data, TOPIC, 1, &[], |_| ());
    ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &data,
        &[std::ffi::OsStr::new("--config"), config.as_os_str()],
        std::process::Stdio::null(),
    )
}

/// Connects, sends `kind`'s bytes, and waits for the broker to close the
/// connection; how long it lived, counted from before the connect (the
/// connection cannot be older, whenever this task saw it open).
async fn flood_client(addr: SocketAddr, kind: Flood, window: Arc<Semaphore>) -> Duration {
    let _turn = window.acquire_owned().await.unwrap();
    let connected = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&kind.bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => connected.elapsed(),
        Ok(Ok(n)) => panic!("a {kind:?} connection was sent {n} bytes"),
        Err(_) => panic!("the broker never closed a {kind:?} connection"),
    }
}

/// Produces and fetches back on one connection, round after round, pausing
/// between rounds (less than the idle timeout); every answer must come.
async fn behaving_client(addr: SocketAddr) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut values = Vec::new();
    for round in 0..NORMAL_ROUNDS {
        let value = format!("served during the flood, round {round}");
        let request = produce_request(
            -1,
            TOPIC,
            0,
            support::one_record(value.as_bytes(), strata::log::now_ms()),
        );
        let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
        assert_eq!(produce_answer(&response), (0, round as i64));
        values.push(value);
        let fetch = fetch_request(TOPIC, &[0], 0, 1 << 20, 0);
        let response: FetchResponse = call(&mut stream, ApiKey::Fetch, 12, &fetch).await;
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        let fetched = support::decode(partition.records.as_deref().unwrap_or_default());
        assert_eq!(support::values(&fetched), values);
        tokio::time::sleep(NORMAL_PAUSE).await;
    }
}

/// Sends an ApiVersions request in pieces, each well within the stall
/// timeout of the last, and reads the answer.
async fn slow_client(addr: SocketAddr, id: i32) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = frame(ApiKey::ApiVersions, 3, id, &ApiVersionsRequest::default());
    let piece = request.len().div_ceil(SLOW_PIECES);
    for chunk in request.chunks(piece) {
        stream.write_all(chunk).await.unwrap();
        tokio::time::sleep(STALL_TIMEOUT / 4).await;
    }
    let response = read_response(&mut stream).await.expect("an answer");
    let answer: ApiVersionsResponse = decode_response(response, ApiKey::ApiVersions, 3, id);
    assert_eq!(answer.error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_and_stalled_connections_is_limited_closed_and_others_served() {
    let flood = flood_size();
    raise_open_files_limit(flood as u64 + TEST_OWN_FILES);
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(start(dir.path()));
    let addr: SocketAddr = server.addr.parse().unwrap();
    let idle_files = server.open_files();

    // The broker's descriptors, sampled until the flood is over (by pid:
    // a failing test must still drop, and so kill, the broker).
    let flooding = Arc::new(AtomicBool::new(true));
    let peak_files = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let pid = server.child.id();
        let (flooding, peak) = (Arc::clone(&flooding), Arc::clone(&peak_files));
        std::thread::spawn(move || {
            while flooding.load(Ordering::Relaxed) {
                peak.fetch_max(open_files_of(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let window = Arc::new(Semaphore::new(flood_window()));
    eprintln!(
        "{flood} flooding connections, at most {} at once",
        flood_window()
    );
    let flooders: Vec<_> = (0..flood)
        .map(|i| {
            let kind = Flood::ALL[i % Flood::ALL.len()];
            let window = Arc::clone(&window);
            (kind, tokio::spawn(flood_client(addr, kind, window)))
        })
        .collect();
    // Behaving clients arrive in the middle of it.
    let behaving = tokio::spawn(behaving_client(addr));
    let slow: Vec<_> = (0..SLOW_CLIENTS as i32)
        .map(|id| tokio::spawn(slow_client(addr, id)))
        .collect();
    behaving.await.unwrap();
    for slow in slow {
        slow.await.unwrap();
    }
    for (kind, flooder) in flooders {
        let lived = flooder.await.unwrap();
        assert!(
            lived >= kind.timeout(),
            "a {kind:?} connection was closed after {lived:?}, before its timeout"
        );
    }
    flooding.store(false, Ordering::Relaxed);
    sampler.join().unwrap();

    let peak = peak_files.load(Ordering::Relaxed);
    eprintln!(
        "{flood} flooding connections; broker descriptors: {idle_files} idle, {peak} at the peak"
    );
    assert!(
        peak <= idle_files + CONNECTIONS_MAX + BROKER_OWN_FILES_SLACK,
        "the broker held {peak} descriptors ({idle_files} before the flood, \
         connections_max {CONNECTIONS_MAX})"
    );
    // Over: the broker is back to what it held before.
    let server_ = Arc::clone(&server);
    tokio::task::spawn_blocking(move || {
        support::wait_until("the broker's descriptors back", WAIT, || {
            server_.open_files() <= idle_files
        });
    })
    .await
    .unwrap();
}
