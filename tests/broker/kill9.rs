//! SIGKILL of `strata serve` under acks=all load loses no acknowledged
//! record: every offset a producer was told about holds that producer's
//! record after recovery.

use crate::support;

use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ProduceResponse};
use strata::log::{LogConfig, LogManager};
use support::wire::{call_blocking, produce_request};

const PRODUCERS: usize = 4;
const PARTITIONS: i32 = 2;
/// Acknowledged records to wait for before the kill.
const ACKED_BEFORE_KILL: usize = 200;
const TOPIC: &str = "durable";

/// Produces single-record batches with acks=all until the connection
/// breaks; records (partition, offset, value) of every acknowledgement.
fn produce_until_killed(
    addr: String,
    id: usize,
    acked: Arc<Mutex<Vec<(i32, i64, String)>>>,
    count: Arc<AtomicUsize>,
) {
    let Ok(mut stream) = TcpStream::connect(&addr) else {
        return;
    };
    for i in 0..100_000 {
        let value = format!("producer-{id}-record-{i}");
        let partition = (i % PARTITIONS as usize) as i32;
        let records = support::batch(&[value.as_str()], support::TIMESTAMP_MS);
        let request = produce_request(-1, TOPIC, partition, records);
        let Ok(response) =
            call_blocking::<_, ProduceResponse>(&mut stream, ApiKey::Produce, 9, &request)
        else {
            return;
        };
        let answer = &response.responses[0].partition_responses[0];
        assert_eq!(answer.error_code, 0);
        acked
            .lock()
            .unwrap()
            .push((partition, answer.base_offset, value));
        count.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn sigkill_under_acks_all_load_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic(TOPIC, PARTITIONS, Default::default())
            .unwrap();
        log.close().unwrap();
    }
    let mut server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let addr = server.addr.clone();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let (addr, acked, count) = (addr.clone(), Arc::clone(&acked), Arc::clone(&count));
            std::thread::spawn(move || produce_until_killed(addr, id, acked, count))
        })
        .collect();
    support::wait_until(
        "acknowledgements before the kill",
        Duration::from_secs(60),
        || count.load(Ordering::Relaxed) >= ACKED_BEFORE_KILL,
    );
    server.child.kill().unwrap(); // SIGKILL, mid-load
    server.child.wait().unwrap();
    for producer in producers {
        producer.join().unwrap();
    }

    // The real recovery path: open the directory the killed broker left.
    let config = LogConfig::default();
    let log = LogManager::open(dir.path(), config).unwrap();
    let acked = acked.lock().unwrap();
    assert!(acked.len() >= ACKED_BEFORE_KILL);
    for partition in 0..PARTITIONS {
        let stored = support::read_all(&log.partition(TOPIC, partition).unwrap(), 0);
        for (p, offset, value) in acked.iter().filter(|(p, _, _)| *p == partition) {
            let record = stored
                .get(*offset as usize)
                .unwrap_or_else(|| panic!("acknowledged offset {offset} of partition {p} is gone"));
            assert_eq!(record.offset, *offset);
            assert_eq!(
                record.value.as_deref(),
                Some(value.as_bytes()),
                "offset {offset}"
            );
        }
    }
}
