//! Malformed, truncated and oversized requests against a live `strata
//! serve`, as a table of named cases, and random mutations of valid ones.
//!
//! Each case is sent on a connection of its own, which then half-closes.
//! Whatever a case holds:
//! - the broker never panics (its log, captured to a file, never says
//!   "panicked": a handler's panic is caught per request, so a live
//!   process alone would not show one);
//! - it answers with a Kafka error code, or closes that connection; which
//!   one each case gets is part of the table, so a change of behaviour
//!   shows;
//! - the process stays alive, and another client on a separate connection
//!   is served right after: ApiVersions, and a produce read back by a
//!   fetch;
//! - its memory stays bounded over the whole table: resident memory after
//!   the table within `RSS_GROWTH_BYTES_MAX` of before, and the peak within
//!   `PEAK_GROWTH_BYTES_MAX` of the peak before.
//!
//! Absurd counts and lengths are covered by tests/hostile/hostile_requests.rs
//! (billions of array entries, every transaction and admin API seeded
//! garbage); this file covers framing, headers, versions, record batches,
//! compression and the handlers' checks of what decodes.

use crate::support;

mod batches;
mod cases;
mod mutations;
mod requests;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, FetchResponse,
    ProduceResponse, RequestHeader, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use strata::record::{BATCH_HEADER_BYTES, Compression, crc32c};
use support::wire::{call_blocking, fetch_request, frame, produce_request};
use support::{ServerProcess, TIMESTAMP_MS, batch_with, one_record};

use cases::{Expect, cases};
use mutations::{mutation, valid_requests};
use requests::create_topics_request;

/// The topic the malformed produces and fetches aim at.
const TARGET_TOPIC: &str = "target";
/// The topic of the round trip that follows every case.
const ROUND_TRIP_TOPIC: &str = "round-trip";
/// A case that neither answers nor closes within this has hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(30);
/// Resident memory the whole table may leave behind.
const RSS_GROWTH_BYTES_MAX: u64 = 64 << 20;
/// How far the peak may rise. A compressed batch is inflated whole before
/// its records are checked, up to the log's decompression limit (64 MiB by
/// default), into a buffer that grows by doubling: its last two sizes (64
/// and 128 MiB) coexist while it is copied, with the codec's own buffers
/// beside them. Measured at 130 to 210 MiB for one bomb; four times the
/// limit.
const PEAK_GROWTH_BYTES_MAX: u64 = 4 * (64 << 20);
/// How far the peak may rise with many bombs at once: as far as for one,
/// for each that may be inflated at the same time, plus what the allocator
/// keeps of the buffers freed on other threads (its per-thread arenas).
/// Measured at 550 to 750 MB for 12 to 48 bombs; 1.2 GB for 12 and 1.8 GB
/// for 24, growing with their number, when each connection inflated its
/// own at once.
const BOMBS_PEAK_GROWTH_BYTES_MAX: u64 = 1 << 30;
const CLIENT_ID: &str = "malformed";
const CORRELATION_ID: i32 = 0x0bad;

#[test]
fn every_malformed_request_is_refused_and_the_broker_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("broker.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &data,
        &[],
        std::process::Stdio::from(log),
    );
    let addr = server.addr.clone();
    create_topic(&addr, TARGET_TOPIC);
    create_topic(&addr, ROUND_TRIP_TOPIC);
    round_trip(&addr, 0);

    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    eprintln!("{} cases", cases.len());
    let mut names = std::collections::HashSet::new();
    for case in &cases {
        assert!(names.insert(case.name), "{} twice", case.name);
    }

    let before = memory(server.child.id());
    for (i, case) in cases.iter().enumerate() {
        let outcome = send(&addr, &case.bytes);
        let got = judge(&case.bytes, &outcome);
        assert_eq!(got, case.expect, "case {}: {outcome:?}", case.name);
        assert!(
            server.is_running(),
            "case {} took the broker down",
            case.name
        );
        assert_no_panic(&log_path, case.name);
        assert!(api_versions_answers(&addr), "after case {}", case.name);
        round_trip(&addr, i + 1);
    }
    let after = memory(server.child.id());
    eprintln!("memory before {before:?}, after {after:?}");
    assert!(
        after.rss_bytes.saturating_sub(before.rss_bytes) < RSS_GROWTH_BYTES_MAX,
        "resident memory grew from {before:?} to {after:?}"
    );
    assert!(
        after.peak_bytes.saturating_sub(before.peak_bytes) < PEAK_GROWTH_BYTES_MAX,
        "peak memory grew from {before:?} to {after:?}"
    );
}

/// Decompression bombs sent at once on separate connections: each is
/// inflated up to the log's limit before it is refused, at most
/// `DECOMPRESSIONS_AT_ONCE_MAX` at a time, so the broker's peak memory
/// stays within a bound of that many times the peak of one, however many
/// arrive together.
#[test]
fn decompression_bombs_at_once_keep_memory_bounded() {
    const CONNECTIONS: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("broker.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut server = ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &dir.path().join("data"),
        &[],
        std::process::Stdio::from(log),
    );
    let addr = server.addr.clone();
    create_topic(&addr, TARGET_TOPIC);
    let bomb = cases::bomb(strata::record::Compression::Gzip);
    let before = memory(server.child.id());
    std::thread::scope(|scope| {
        for _ in 0..CONNECTIONS {
            scope.spawn(|| {
                let outcome = send(&addr, &bomb);
                assert_eq!(
                    judge(&bomb, &outcome),
                    Expect::Error(cases::MESSAGE_TOO_LARGE)
                );
            });
        }
    });
    let after = memory(server.child.id());
    eprintln!("memory before {before:?}, after {after:?}");
    assert!(server.is_running());
    assert_no_panic(&log_path, "the bombs");
    assert!(
        after.peak_bytes.saturating_sub(before.peak_bytes) < BOMBS_PEAK_GROWTH_BYTES_MAX,
        "{CONNECTIONS} bombs at once took the peak from {before:?} to {after:?}"
    );
}

/// Random mutations of valid requests (bytes flipped, cut, inserted; size
/// prefixes and counts rewritten), one per connection: the broker answers
/// or closes every connection, never panics, and serves on.
#[test]
fn mutated_valid_requests_never_take_the_broker_down() {
    const CASES: u32 = 256;
    const SEED: u64 = 0x6d75_7461_7465;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("broker.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let server = std::cell::RefCell::new(ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &dir.path().join("data"),
        &[],
        std::process::Stdio::from(log),
    ));
    let addr = server.borrow().addr.clone();
    create_topic(&addr, TARGET_TOPIC);
    create_topic(&addr, ROUND_TRIP_TOPIC);
    let seeds = valid_requests();

    let mut runner = TestRunner::new(Config {
        cases: CASES,
        rng_seed: RngSeed::Fixed(SEED),
        failure_persistence: None,
        // Each case is a connection to a live broker: shrinking replays
        // many, and a failure says its input anyway.
        max_shrink_iters: 64,
        ..Config::default()
    });
    let mutation = (0..seeds.len(), proptest::collection::vec(mutation(), 1..6));
    let sent = std::cell::Cell::new(0u32);
    runner
        .run(&mutation, |(seed, mutations)| {
            let mut bytes = seeds[seed].clone();
            for mutation in &mutations {
                mutation.apply(&mut bytes);
            }
            // Answered or closed: `send` fails the case if it hangs.
            let _ = send(&addr, &bytes);
            sent.set(sent.get() + 1);
            prop_assert!(server.borrow_mut().is_running(), "{bytes:02x?}");
            prop_assert!(api_versions_answers(&addr), "{bytes:02x?}");
            Ok(())
        })
        .unwrap();
    assert_no_panic(&log_path, "the mutations");
    round_trip(&addr, 0);
    assert!(sent.get() >= CASES, "{} mutations sent", sent.get());
}

/// What the broker did with one connection.
#[derive(Debug)]
enum Outcome {
    /// Closed it with nothing written.
    Closed,
    /// Wrote these response frames (sizes taken off), then closed it.
    Answered(Vec<Bytes>),
}

/// Sends `bytes` on a connection of its own, half-closes it, and reads
/// until the broker closes it.
fn send(addr: &str, bytes: &[u8]) -> Outcome {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(CASE_TIMEOUT)).unwrap();
    // The broker may close before taking everything: that is an answer.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut received = Vec::new();
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 1 << 16];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "no answer and no close after {:?} ({e}) for {:02x?}",
                started.elapsed(),
                &bytes[..bytes.len().min(64)]
            ),
        }
    }
    let mut rest = Bytes::from(received);
    let mut frames = Vec::new();
    while rest.len() >= 4 {
        let size = usize::try_from(rest.get_i32()).expect("a response size is positive");
        assert!(rest.len() >= size, "a response cut short");
        frames.push(rest.split_to(size));
    }
    assert!(rest.is_empty(), "bytes after the last response: {rest:?}");
    if frames.is_empty() {
        Outcome::Closed
    } else {
        Outcome::Answered(frames)
    }
}

/// What the outcome of sending `request` shows: closed, or the first error
/// code of its one response.
fn judge(request: &[u8], outcome: &Outcome) -> Expect {
    let Outcome::Answered(frames) = outcome else {
        return Expect::Closed;
    };
    assert_eq!(frames.len(), 1, "one request, one response");
    let api = i16::from_be_bytes([request[4], request[5]]);
    let asked = i16::from_be_bytes([request[6], request[7]]);
    let key = ApiKey::try_from(api).expect("answered requests have known keys");
    // ApiVersions out of range is answered in v0.
    let served = strata::broker::api::served_versions(key);
    let version = if (served.min..=served.max).contains(&asked) {
        asked
    } else {
        0
    };
    let mut response = frames[0].clone();
    let header = ResponseHeader::decode(&mut response, key.response_header_version(version))
        .expect("response header decodes");
    assert_eq!(
        header.correlation_id,
        i32::from_be_bytes(request[8..12].try_into().unwrap())
    );
    let body = ResponseKind::decode(key, &mut response, version).expect("response decodes");
    match first_error(&body) {
        0 => Expect::Served,
        code => Expect::Error(code),
    }
}

/// The first error code a response carries: its top-level one if set,
/// else its first topic's or partition's.
fn first_error(response: &ResponseKind) -> i16 {
    match response {
        ResponseKind::ApiVersions(r) => r.error_code,
        ResponseKind::Produce(r) => r.responses[0].partition_responses[0].error_code,
        ResponseKind::Fetch(r) => match r.error_code {
            0 => r.responses[0].partitions[0].error_code,
            code => code,
        },
        ResponseKind::CreateTopics(r) => r.topics[0].error_code,
        ResponseKind::JoinGroup(r) => r.error_code,
        ResponseKind::SaslHandshake(r) => r.error_code,
        ResponseKind::SaslAuthenticate(r) => r.error_code,
        ResponseKind::DescribeAcls(r) => r.error_code,
        ResponseKind::CreateAcls(r) => r.results.first().map_or(0, |r| r.error_code),
        ResponseKind::DeleteAcls(r) => r.filter_results.first().map_or(0, |r| r.error_code),
        ResponseKind::DescribeUserScramCredentials(r) => r.error_code,
        ResponseKind::AlterUserScramCredentials(r) => r.results.first().map_or(0, |r| r.error_code),
        other => panic!("no error code read from {other:?}"),
    }
}

/// ApiVersions on a fresh connection.
fn api_versions_answers(addr: &str) -> bool {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(CASE_TIMEOUT)).unwrap();
    let answer: std::io::Result<ApiVersionsResponse> = call_blocking(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    answer.is_ok_and(|response| response.error_code == 0 && !response.api_keys.is_empty())
}

/// Produces a record on a fresh connection and fetches it back.
fn round_trip(addr: &str, n: usize) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(CASE_TIMEOUT)).unwrap();
    let value = format!("round trip {n}");
    let produced: ProduceResponse = call_blocking(
        &mut stream,
        ApiKey::Produce,
        9,
        &produce_request(
            1,
            ROUND_TRIP_TOPIC,
            0,
            one_record(value.as_bytes(), TIMESTAMP_MS),
        ),
    )
    .expect("a produce answer");
    let (error, offset) = support::wire::produce_answer(&produced);
    assert_eq!(error, 0, "round trip {n}");
    let fetched: FetchResponse = call_blocking(
        &mut stream,
        ApiKey::Fetch,
        12,
        &fetch_request(ROUND_TRIP_TOPIC, &[0], offset, 1 << 20, 0),
    )
    .expect("a fetch answer");
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    let records = support::decode(partition.records.as_deref().unwrap_or_default());
    let first = records.first().expect("the produced record fetched");
    assert_eq!(
        (first.offset, first.value.as_deref()),
        (offset, Some(value.as_bytes()))
    );
}

fn create_topic(addr: &str, name: &str) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let response: kafka_protocol::messages::CreateTopicsResponse = call_blocking(
        &mut stream,
        ApiKey::CreateTopics,
        7,
        &create_topics_request(name, 1),
    )
    .unwrap();
    assert_eq!(response.topics[0].error_code, 0, "creating {name}");
}

fn assert_no_panic(log_path: &std::path::Path, after: &str) {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    assert!(!log.contains("panicked"), "after {after}:\n{log}");
}

/// Resident and peak resident memory of a process, from /proc.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss_bytes: u64,
    peak_bytes: u64,
}

fn memory(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"));
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap();
        kib << 10
    };
    Memory {
        rss_bytes: field("VmRSS:"),
        peak_bytes: field("VmHWM:"),
    }
}
