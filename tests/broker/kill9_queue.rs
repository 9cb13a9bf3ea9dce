//! `strata serve` SIGKILLed and restarted again and again under idempotent
//! acks=all producers, then checked as a queue (the checks of Jepsen's
//! queue workloads) through the Kafka protocol:
//! - lost: every acknowledged value is read, at the offset it was
//!   acknowledged with;
//! - duplicated: no value is stored twice, although every batch a kill
//!   left unanswered is sent again (the broker's idempotence must drop the
//!   copies that had landed);
//! - unexpected: nothing is read that no producer sent;
//! - order: within a partition, each producer's sequence numbers are read
//!   in order and without a gap;
//! - stable: two full reads return the same value at every offset, every
//!   batch passing its CRC.
//!
//! `make test` runs a few cycles; `STRATA_SOAK_KILL_CYCLES` sets how many
//! (`make soak` runs a hundred).

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, FetchResponse, InitProducerIdResponse, ProduceResponse};
use strata::log::{LogConfig, LogManager};
use strata::record::Compression;
use support::ServerProcess;
use support::wire::{
    call_blocking, fetch_request, init_producer_id_request, produce_answer, produce_request,
};

const TOPIC: &str = "queue";
const PARTITIONS: i32 = 2;
const PRODUCERS: usize = 3;
/// Kill cycles `make test` runs.
const CYCLES_QUICK: usize = 4;
/// Acknowledgements to wait for between two kills.
const ACKS_PER_CYCLE: usize = 40;
/// How long a producer keeps trying to reach a restarted broker.
const RECONNECT_LIMIT: Duration = Duration::from_secs(30);
const FETCH_BYTES: i32 = 1 << 20;

/// Per partition, (offset, value) of every record read, in order.
type Read = BTreeMap<i32, Vec<(i64, String)>>;

/// What the producers were told, and what went wrong on their side.
#[derive(Default)]
struct History {
    /// (partition, offset) → value, for every acknowledgement.
    acked: BTreeMap<(i32, i64), String>,
    /// Answers that an idempotent producer must never get.
    anomalies: Vec<String>,
}

fn value(producer: usize, partition: i32, sequence: i32) -> String {
    format!("p{producer}-{partition}-{sequence}")
}

/// Connects, waiting for a restarted broker; `None` once stopped or out of
/// time.
fn connect(addr: &str, stop: &AtomicBool) -> Option<TcpStream> {
    let deadline = Instant::now() + RECONNECT_LIMIT;
    while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        if let Ok(stream) = TcpStream::connect(addr) {
            stream.set_read_timeout(Some(Duration::from_secs(20))).ok();
            return Some(stream);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// One idempotent producer: a batch of one record at a time, alternating
/// partitions; a batch whose answer a kill swallowed is sent again, with
/// the same sequence number, until it is answered.
fn produce(
    addr: String,
    producer: usize,
    (producer_id, epoch): (i64, i16),
    history: Arc<Mutex<History>>,
    acks: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let mut next_sequence = [0i32; PARTITIONS as usize];
    let mut stream = connect(&addr, &stop);
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let partition = (n % PARTITIONS as usize) as i32;
        let sequence = next_sequence[partition as usize];
        let value = value(producer, partition, sequence);
        let records = support::producer_batch(
            Compression::None,
            (producer_id, epoch),
            sequence,
            &[value.as_str()],
        );
        loop {
            let Some(connected) = stream.as_mut() else {
                history.lock().unwrap().anomalies.push(format!(
                    "producer {producer} never reached the broker again"
                ));
                return;
            };
            let request = produce_request(-1, TOPIC, partition, records.clone());
            match call_blocking::<_, ProduceResponse>(connected, ApiKey::Produce, 9, &request) {
                Ok(response) => {
                    let (error, offset) = produce_answer(&response);
                    let mut history = history.lock().unwrap();
                    if error == 0 {
                        if let Some(earlier) =
                            history.acked.insert((partition, offset), value.clone())
                            && earlier != value
                        {
                            history.anomalies.push(format!(
                                "offset {offset} of partition {partition} acknowledged for {earlier} and {value}"
                            ));
                        }
                        acks.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    history
                        .anomalies
                        .push(format!("{value} refused with error {error}"));
                    return;
                }
                // Killed under the request: ask again, same sequence.
                Err(_) => stream = connect(&addr, &stop),
            }
        }
        next_sequence[partition as usize] += 1;
    }
}

/// Every record of a partition through Fetch: (offset, value), each batch
/// CRC-checked.
fn read_partition(stream: &mut TcpStream, partition: i32) -> Vec<(i64, String)> {
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        let request = fetch_request(TOPIC, &[partition], offset, FETCH_BYTES, 0);
        let response: FetchResponse =
            call_blocking(stream, ApiKey::Fetch, 12, &request).expect("fetch answered");
        let answer = &response.responses[0].partitions[0];
        assert_eq!(
            answer.error_code, 0,
            "fetch of partition {partition} at {offset}"
        );
        let bytes = answer.records.clone().unwrap_or_default();
        for record in support::decode(&bytes) {
            if record.offset >= offset {
                let value = String::from_utf8(record.value.expect("a value")).expect("utf-8");
                records.push((record.offset, value));
                offset = record.offset + 1;
            }
        }
        if offset >= answer.high_watermark || bytes.is_empty() {
            assert!(offset >= answer.high_watermark, "no progress at {offset}");
            return records;
        }
    }
}

fn init_producer(addr: &str) -> (i64, i16) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let response: InitProducerIdResponse = call_blocking(
        &mut stream,
        ApiKey::InitProducerId,
        4,
        &init_producer_id_request(None, None),
    )
    .unwrap();
    assert_eq!(response.error_code, 0);
    (response.producer_id.0, response.producer_epoch)
}

/// The queue checks over two full reads; returns the anomalies.
fn check(reads: [&Read; 2], acked: &BTreeMap<(i32, i64), String>) -> Vec<String> {
    let mut anomalies = Vec::new();
    if reads[0] != reads[1] {
        anomalies.push("two full reads differ".to_string());
    }
    let stored: HashMap<(i32, i64), &String> = reads[0]
        .iter()
        .flat_map(|(p, records)| records.iter().map(move |(o, v)| ((*p, *o), v)))
        .collect();
    for ((partition, offset), value) in acked {
        match stored.get(&(*partition, *offset)) {
            Some(found) if *found == value => {}
            found => anomalies.push(format!(
                "lost: {value} acknowledged at offset {offset} of partition {partition}, read {found:?}"
            )),
        }
    }
    let mut seen: HashMap<&String, (i32, i64)> = HashMap::new();
    for (partition, records) in reads[0] {
        let mut next_sequence: HashMap<usize, i32> = HashMap::new();
        for (offset, value) in records {
            if let Some(first) = seen.insert(value, (*partition, *offset)) {
                anomalies.push(format!(
                    "duplicated: {value} at {first:?} and ({partition}, {offset})"
                ));
            }
            let parsed = value
                .strip_prefix('p')
                .and_then(|rest| {
                    let mut parts = rest.split('-');
                    let producer = parts.next()?.parse::<usize>().ok()?;
                    let in_partition = parts.next()?.parse::<i32>().ok()?;
                    let sequence = parts.next()?.parse::<i32>().ok()?;
                    Some((producer, in_partition, sequence))
                })
                .filter(|(_, in_partition, _)| in_partition == partition);
            let Some((producer, _, sequence)) = parsed else {
                anomalies.push(format!("unexpected: {value} in partition {partition}"));
                continue;
            };
            let expected = next_sequence.entry(producer).or_insert(0);
            if sequence != *expected {
                anomalies.push(format!(
                    "order: producer {producer} sequence {sequence} at offset {offset} of partition {partition}, expected {expected}"
                ));
            }
            *expected = sequence + 1;
        }
    }
    anomalies
}

#[test]
fn a_broker_killed_again_and_again_loses_duplicates_and_reorders_nothing() {
    let cycles = std::env::var("STRATA_SOAK_KILL_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CYCLES_QUICK);
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic(TOPIC, PARTITIONS, Default::default())
            .unwrap();
        log.close().unwrap();
    }
    let binary = env!("CARGO_BIN_EXE_strata");
    let mut server = ServerProcess::start(binary, dir.path());
    let history = Arc::new(Mutex::new(History::default()));
    let acks = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let ids = init_producer(&server.addr);
            let (addr, history, acks, stop) = (
                server.addr.clone(),
                Arc::clone(&history),
                Arc::clone(&acks),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || produce(addr, producer, ids, history, acks, stop))
        })
        .collect();
    for cycle in 0..cycles {
        let target = (cycle + 1) * ACKS_PER_CYCLE;
        support::wait_until(
            "acknowledgements between kills",
            Duration::from_secs(120),
            || {
                acks.load(Ordering::SeqCst) >= target
                    || !history.lock().unwrap().anomalies.is_empty()
            },
        );
        server.kill_and_restart(binary, dir.path());
    }
    support::wait_until(
        "acknowledgements after the last kill",
        Duration::from_secs(120),
        || {
            acks.load(Ordering::SeqCst) >= (cycles + 1) * ACKS_PER_CYCLE
                || !history.lock().unwrap().anomalies.is_empty()
        },
    );
    stop.store(true, Ordering::SeqCst);
    for producer in producers {
        producer.join().unwrap();
    }

    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let mut read_all = || -> Read {
        (0..PARTITIONS)
            .map(|p| (p, read_partition(&mut stream, p)))
            .collect()
    };
    let (first, second) = (read_all(), read_all());
    let history = history.lock().unwrap();
    let mut anomalies = history.anomalies.clone();
    anomalies.extend(check([&first, &second], &history.acked));
    let read: usize = first.values().map(Vec::len).sum();
    eprintln!(
        "{cycles} kills, {} acknowledged, {read} read, {} anomalies",
        history.acked.len(),
        anomalies.len()
    );
    assert!(anomalies.is_empty(), "{}", anomalies.join("\n"));
}

/// The checker itself: each kind of anomaly is reported.
#[test]
fn the_queue_checks_report_each_kind_of_anomaly() {
    let v = |p, s| value(0, p, s);
    let acked: BTreeMap<(i32, i64), String> =
        [((0, 0), v(0, 0)), ((0, 1), v(0, 1)), ((1, 0), v(1, 0))].into();
    let good: Read = [
        (0, vec![(0, v(0, 0)), (1, v(0, 1))]),
        (1, vec![(0, v(1, 0))]),
    ]
    .into();
    assert!(check([&good, &good], &acked).is_empty());
    let cases: [(&str, Read); 4] = [
        ("lost", [(0, vec![(0, v(0, 0)), (1, v(0, 1))])].into()),
        (
            "duplicated",
            [
                (0, vec![(0, v(0, 0)), (1, v(0, 1)), (2, v(0, 1))]),
                (1, vec![(0, v(1, 0))]),
            ]
            .into(),
        ),
        (
            "order",
            [
                (0, vec![(0, v(0, 0)), (1, v(0, 1)), (2, v(0, 3))]),
                (1, vec![(0, v(1, 0))]),
            ]
            .into(),
        ),
        (
            "unexpected",
            [
                (0, vec![(0, v(0, 0)), (1, v(0, 1)), (2, "stray".into())]),
                (1, vec![(0, v(1, 0))]),
            ]
            .into(),
        ),
    ];
    for (kind, read) in cases {
        let found = check([&read, &read], &acked);
        assert!(
            found.iter().any(|a| a.starts_with(kind)),
            "{kind} not reported: {found:?}"
        );
    }
    assert!(
        check([&good, &cases_second_read()], &acked)
            .iter()
            .any(|a| a.contains("differ"))
    );
}

fn cases_second_read() -> Read {
    [
        (0, vec![(0, value(0, 0, 0))]),
        (1, vec![(0, value(0, 1, 0))]),
    ]
    .into()
}
