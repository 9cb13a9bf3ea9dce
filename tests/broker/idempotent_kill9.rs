//! SIGKILL of `strata serve` while an idempotent producer writes: after the
//! restart, resending the acknowledged batches gets their original offsets,
//! the batch in flight at the kill lands exactly once whether or not it had
//! reached the log, every record is stored once and in order, producer ids
//! are never handed out twice, and a transactional id keeps its producer id
//! at the next epoch.

use crate::support;

use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, InitProducerIdResponse, ProduceResponse};
use strata::log::{BATCHES_PER_PRODUCER, LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use support::wire::{call_blocking, init_producer_id_request, produce_answer, produce_request};
use support::{ServerProcess, producer_batch};

const TOPIC: &str = "exactly-once";
/// Acknowledged batches to wait for before the kill.
const ACKED_BEFORE_KILL: usize = 60;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

/// (error code, producer id, epoch)
fn init(stream: &mut TcpStream, transactional_id: Option<&str>) -> (i16, i64, i16) {
    let request = init_producer_id_request(transactional_id, None);
    let response: InitProducerIdResponse =
        call_blocking(stream, ApiKey::InitProducerId, 4, &request).unwrap();
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

fn value(i: i32) -> String {
    format!("record-{i}")
}

fn batch(producer_id: i64, epoch: i16, sequence: i32) -> Vec<u8> {
    producer_batch(
        Compression::Zstd,
        (producer_id, epoch),
        sequence,
        &[value(sequence)],
    )
}

/// (error code, base offset), or the I/O error of a killed broker.
fn produce(stream: &mut TcpStream, records: Vec<u8>) -> std::io::Result<(i16, i64)> {
    let request = produce_request(-1, TOPIC, 0, records);
    let response: ProduceResponse = call_blocking(stream, ApiKey::Produce, 9, &request)?;
    Ok(produce_answer(&response))
}

#[test]
fn idempotent_producer_state_and_producer_ids_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic(TOPIC, 1, Default::default()).unwrap();
        log.close().unwrap();
    }
    let binary = env!("CARGO_BIN_EXE_strata");
    let mut server = ServerProcess::start(binary, dir.path());
    let mut admin = TcpStream::connect(&server.addr).unwrap();
    let (error, producer_id, epoch) = init(&mut admin, None);
    assert_eq!(error, 0);
    let (error, task_id, task_epoch) = init(&mut admin, Some("task-1"));
    assert_eq!((error, task_epoch), (0, 0));
    let handed_out = [producer_id, task_id];

    // One idempotent producer, acks=all, one record per batch, until the
    // broker dies under it.
    let acked = Arc::new(Mutex::new(Vec::<(i32, i64)>::new()));
    let attempted = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (addr, acked, attempted) = (
            server.addr.clone(),
            Arc::clone(&acked),
            Arc::clone(&attempted),
        );
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            for sequence in 0..1_000_000 {
                attempted.store(sequence as usize + 1, Ordering::SeqCst);
                match produce(&mut stream, batch(producer_id, epoch, sequence)) {
                    Ok((0, offset)) => acked.lock().unwrap().push((sequence, offset)),
                    Ok((code, _)) => panic!("batch {sequence} refused with {code}"),
                    Err(_) => return,
                }
            }
        })
    };
    support::wait_until(
        "acknowledgements before the kill",
        Duration::from_secs(60),
        || acked.lock().unwrap().len() >= ACKED_BEFORE_KILL,
    );
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    producer.join().unwrap();
    drop(server);

    let server = ServerProcess::start(binary, dir.path());
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let acked = acked.lock().unwrap().clone();
    let attempted = attempted.load(Ordering::SeqCst) as i32;
    // Acknowledged batches are dense: sequence i at offset i.
    for (sequence, offset) in &acked {
        assert_eq!(i64::from(*sequence), *offset);
    }
    // The last acknowledged ones, resent: their original offsets.
    for &(sequence, offset) in acked.iter().rev().take(BATCHES_PER_PRODUCER - 1) {
        assert_eq!(
            produce(&mut stream, batch(producer_id, epoch, sequence)).unwrap(),
            (0, offset),
            "resend of {sequence}"
        );
    }
    // The one in flight at the kill (if any had not been answered) lands
    // exactly once, whether or not it had reached the log.
    let in_flight = attempted - 1;
    if in_flight as usize >= acked.len() {
        let (error, offset) = produce(&mut stream, batch(producer_id, epoch, in_flight)).unwrap();
        assert_eq!((error, offset), (0, i64::from(in_flight)));
    }
    let next = attempted;
    assert_eq!(
        produce(&mut stream, batch(producer_id, epoch, 0))
            .unwrap()
            .0,
        DUPLICATE_SEQUENCE_NUMBER,
        "too old to be remembered with its offset"
    );
    assert_eq!(
        produce(&mut stream, batch(producer_id, epoch, next + 1))
            .unwrap()
            .0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut stream, batch(producer_id, epoch, next)).unwrap(),
        (0, i64::from(next))
    );

    // Producer ids: never one handed out before; the transactional id keeps
    // its id at the next epoch, which fences the old one once it writes.
    let (_, fresh, _) = init(&mut stream, None);
    assert!(
        handed_out.iter().all(|&id| fresh > id),
        "{fresh} after {handed_out:?}"
    );
    assert_eq!(init(&mut stream, Some("task-1")), (0, task_id, 1));
    let mut task = BatchBuilder::new(Compression::None).producer(task_id, 1, 0);
    task.push(NewRecord::new(None, b"task", 1)).unwrap();
    assert_eq!(produce(&mut stream, task.build().unwrap()).unwrap().0, 0);
    let mut zombie = BatchBuilder::new(Compression::None).producer(task_id, 0, 0);
    zombie.push(NewRecord::new(None, b"zombie", 1)).unwrap();
    assert_eq!(
        produce(&mut stream, zombie.build().unwrap()).unwrap().0,
        INVALID_PRODUCER_EPOCH
    );
    drop(server);

    let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let stored: Vec<String> = support::read_all(&log.partition(TOPIC, 0).unwrap(), 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let mut expected: Vec<String> = (0..=next).map(value).collect();
    expected.push("task".into());
    assert_eq!(stored, expected, "every record once, in order");
}
