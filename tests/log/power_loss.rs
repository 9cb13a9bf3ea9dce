//! Power loss: the log on a [`PowerLoss`] storage, which records what each
//! fsync made durable and rebuilds the data directory as a machine would
//! find it after losing power (unsynced writes dropped or torn, unsynced
//! directory changes lost, mapped pages half written back). A SIGKILL
//! cannot show a missing fsync, since the page cache outlives the process;
//! this can.
//!
//! - Seeded runs of random appends, flushes and rolls, each
//!   cut at a random storage call (in the middle of whatever the log was
//!   doing) and recovered, several times per seed: every record a flush
//!   reported durable is still at its offset, every record served is one
//!   that was appended there, nothing is corrupt, and recovery never
//!   panics. A failure prints its seed; `STRATA_POWER_SEED=<seed>` runs that
//!   one alone. `STRATA_SOAK_POWER_SEEDS` sets how many run (`make soak`).
//! - The broker's acks=all path: producers over TCP to a broker on the
//!   storage, the power cut under them; every acknowledged record survives.
//! - Group commit: flushes that overlap share one fdatasync.
//! - A failed fdatasync: nothing it covered is acknowledged, the partition
//!   turns read-only and says why, and never acknowledges again until a
//!   restart, after which it serves what was durable and takes appends.

use crate::support;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ProduceResponse};
use strata::broker::{Broker, BrokerConfig};
use strata::log::storage::{Disk, PowerLoss};
use strata::log::{LogConfig, LogError, LogManager, PartitionLog, now_ms};
use support::rng::Rng;
use support::wire::{call_blocking, produce_answer, produce_request};

const TOPIC: &str = "power";
const PARTITIONS: i32 = 2;
/// Seeds `make test` runs.
const SEEDS_QUICK: u64 = 40;
/// Power cuts per seed, each recovered and checked before the next.
const CUTS_PER_SEED: usize = 4;
/// Log operations per cut at most (the cut usually comes first).
const OPERATIONS_MAX: u64 = 150;
/// The cut comes at a storage call drawn from `0..CUT_CALLS_MAX`.
const CUT_CALLS_MAX: u64 = 400;
/// Kafka's KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;

/// Small segments, so that rolls (new files, directory syncs, sealed
/// indexes) happen often.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

fn power_loss(root: &Path) -> (Arc<PowerLoss>, Disk) {
    let power = Arc::new(PowerLoss::new(root).expect("power-loss storage"));
    let disk = Disk::new(Arc::clone(&power) as _);
    (power, disk)
}

/// What one seed's history promised: per partition, every record appended
/// (offset → value) since the last recovery, and how far a flush reported
/// durable.
#[derive(Default)]
struct Promises {
    appended: BTreeMap<(i32, i64), String>,
    durable: BTreeMap<i32, i64>,
}

/// Every record of a partition from its start, as (offset, value).
fn records(partition: &PartitionLog) -> Vec<(i64, String)> {
    let start = partition.log_start_offset();
    support::read_all(partition, start)
        .into_iter()
        .map(|r| {
            let value = String::from_utf8(r.value.expect("a value")).expect("utf-8");
            (r.offset, value)
        })
        .collect()
}

/// Runs random operations until the power goes off (or the operations run
/// out, then cuts it). Errors after the cut are the cut's.
fn operate(log: &LogManager, power: &PowerLoss, rng: &mut Rng, promises: &mut Promises, tag: &str) {
    let operations = 1 + rng.below(OPERATIONS_MAX);
    for n in 0..operations {
        if power.is_off() {
            return;
        }
        let p = rng.below(PARTITIONS as u64) as i32;
        let partition = log.partition(TOPIC, p).expect("partition");
        match rng.below(100) {
            0..60 => {
                let values: Vec<String> = (0..1 + rng.below(5))
                    .map(|i| format!("{tag}-{n}-{i}"))
                    .collect();
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                if let Ok(info) = partition.append(&support::batch(&refs, now_ms())) {
                    for (i, value) in values.into_iter().enumerate() {
                        promises
                            .appended
                            .insert((p, info.base_offset + i as i64), value);
                    }
                }
            }
            60.. => {
                if let Ok(durable) = partition.flush() {
                    let entry = promises.durable.entry(p).or_default();
                    *entry = (*entry).max(durable);
                }
            }
        }
    }
    power.cut();
}

/// After a recovery: what each partition serves is a gapless run of what
/// was appended there, holding everything a flush reported durable.
/// Afterwards the promises describe the recovered log. Returns the records
/// checked.
fn check_recovered(log: &LogManager, promises: &mut Promises) -> Result<usize, String> {
    let topic = log
        .topic(TOPIC)
        .ok_or("the topic is gone (it was created before any cut)")?;
    let mut survived = BTreeMap::new();
    for p in 0..PARTITIONS {
        let partition = topic.partition(p).ok_or(format!("partition {p} is gone"))?;
        if let Some(corruption) = partition.corruption() {
            return Err(format!("partition {p} is corrupt: {corruption}"));
        }
        if partition.log_start_offset() != 0 {
            return Err(format!(
                "partition {p} starts at {}: its first segment is gone",
                partition.log_start_offset()
            ));
        }
        let records = records(&partition);
        for (expected, (offset, value)) in (partition.log_start_offset()..).zip(&records) {
            if *offset != expected {
                return Err(format!(
                    "partition {p}: offset {offset} where {expected} belongs"
                ));
            }
            match promises.appended.get(&(p, *offset)) {
                Some(appended) if appended == value => {}
                other => {
                    return Err(format!(
                        "partition {p} offset {offset} holds {value:?}, appended there: {other:?}"
                    ));
                }
            }
            survived.insert((p, *offset), value.clone());
        }
        let durable = promises.durable.get(&p).copied().unwrap_or(0);
        if partition.log_end_offset() < durable {
            return Err(format!(
                "partition {p} ends at {} but offsets below {durable} were reported durable",
                partition.log_end_offset()
            ));
        }
        promises.durable.insert(p, partition.log_end_offset());
    }
    let checked = survived.len();
    promises.appended = survived;
    Ok(checked)
}

/// One seed: a topic, then cuts, each recovered and checked. Returns the
/// records checked.
fn run_seed(seed: u64) -> Result<usize, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = dir.path().join("data");
    let (power, disk) = power_loss(&root);
    let mut rng = Rng(seed);
    let mut promises = Promises::default();
    let mut checked = 0;
    let mut log = LogManager::open_on(&disk, &root, config()).map_err(|e| e.to_string())?;
    log.create_topic(TOPIC, PARTITIONS, BTreeMap::new())
        .map_err(|e| e.to_string())?;
    for cut in 0..CUTS_PER_SEED {
        power.cut_after(rng.below(CUT_CALLS_MAX));
        operate(
            &log,
            &power,
            &mut rng,
            &mut promises,
            &format!("{seed}-{cut}"),
        );
        drop(log);
        let restored = power
            .restore(rng.next_u64())
            .map_err(|e| format!("restore: {e}"))?;
        log = LogManager::open_on(&disk, &root, config())
            .map_err(|e| format!("recovery after cut {cut} failed: {e} ({restored:?})"))?;
        checked += check_recovered(&log, &mut promises)
            .map_err(|e| format!("after cut {cut}: {e} ({restored:?})"))?;
    }
    Ok(checked)
}

#[test]
fn every_flushed_record_survives_seeded_power_losses() {
    let seeds: Vec<u64> = match std::env::var("STRATA_POWER_SEED") {
        Ok(seed) => vec![seed.parse().expect("STRATA_POWER_SEED is a number")],
        Err(_) => {
            let count = std::env::var("STRATA_SOAK_POWER_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(SEEDS_QUICK);
            let first = support::rng::seed();
            (first..first + count).collect()
        }
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for &seed in &seeds {
        let outcome = std::panic::catch_unwind(|| run_seed(seed));
        match outcome {
            Ok(Ok(records)) => checked += records,
            Ok(Err(reason)) => failures.push(format!("seed {seed}: {reason}")),
            Err(_) => failures.push(format!("seed {seed}: panicked")),
        }
    }
    eprintln!(
        "{} seeds × {CUTS_PER_SEED} power cuts, {checked} records checked after recoveries, {} failed",
        seeds.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "replay one with STRATA_POWER_SEED=<seed>:\n{}",
        failures.join("\n")
    );
}

/// Producers appending unique values with acks=all until a request fails;
/// every acknowledged (partition, offset, value) is recorded.
fn produce_until_refused(
    addr: String,
    id: usize,
    acked: Arc<Mutex<Vec<(i32, i64, String)>>>,
    count: Arc<AtomicUsize>,
) {
    let Ok(mut stream) = TcpStream::connect(&addr) else {
        return;
    };
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    for i in 0..100_000 {
        let value = format!("producer-{id}-{i}");
        let partition = (i % PARTITIONS as usize) as i32;
        let request = produce_request(-1, TOPIC, partition, support::batch(&[&value], now_ms()));
        let Ok(response) =
            call_blocking::<_, ProduceResponse>(&mut stream, ApiKey::Produce, 9, &request)
        else {
            return;
        };
        let (error, offset) = produce_answer(&response);
        if error != 0 {
            return;
        }
        acked.lock().unwrap().push((partition, offset, value));
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Serves `log` on a loopback port in a runtime of its own until `stop`.
fn serve(log: Arc<LogManager>, stop: Arc<AtomicBool>) -> (String, std::thread::JoinHandle<()>) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let config = BrokerConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..BrokerConfig::default()
            };
            let broker = Broker::bind(config, log).await.unwrap();
            addr_tx.send(broker.local_addr().to_string()).unwrap();
            broker
                .serve(async move {
                    while !stop.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
                .await
                .ok();
        });
    });
    (addr_rx.recv().unwrap(), server)
}

#[test]
fn acks_all_answers_survive_a_power_loss_under_the_broker() {
    const PRODUCERS: usize = 4;
    const CUTS: usize = 3;
    let seed = support::rng::seed();
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let (power, disk) = power_loss(&root);
    let mut acked_total = 0;
    for cut in 0..CUTS {
        let log = Arc::new(LogManager::open_on(&disk, &root, config()).unwrap());
        if log.topic(TOPIC).is_none() {
            log.create_topic(TOPIC, PARTITIONS, BTreeMap::new())
                .unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, server) = serve(Arc::clone(&log), Arc::clone(&stop));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|id| {
                let (addr, acked, count) = (addr.clone(), Arc::clone(&acked), Arc::clone(&count));
                std::thread::spawn(move || {
                    produce_until_refused(addr, id + cut * PRODUCERS, acked, count)
                })
            })
            .collect();
        let cut_at = 20 + rng.below(200) as usize;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while count.load(Ordering::SeqCst) < cut_at && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        power.cut();
        for producer in producers {
            producer.join().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        server.join().unwrap();
        drop(log);
        power.restore(rng.next_u64()).unwrap();

        let log = LogManager::open_on(&disk, &root, config()).unwrap();
        let acked = acked.lock().unwrap();
        assert!(!acked.is_empty(), "seed {seed}: nothing was acknowledged");
        for (p, offset, value) in acked.iter() {
            let partition = log.partition(TOPIC, *p).unwrap();
            let found = records(&partition)
                .into_iter()
                .find(|(o, _)| o == offset)
                .map(|(_, v)| v);
            assert_eq!(
                found.as_deref(),
                Some(value.as_str()),
                "seed {seed}, cut {cut}: acknowledged offset {offset} of partition {p} lost"
            );
        }
        acked_total += acked.len();
        drop(log);
    }
    eprintln!("{acked_total} acknowledged records checked over {CUTS} power cuts");
}

#[test]
fn overlapping_flushes_share_one_fdatasync() {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 25;
    let dir = tempfile::tempdir().unwrap();
    let (power, disk) = power_loss(dir.path());
    // One segment throughout: a roll syncs on its own.
    let config = LogConfig::default();
    let partition =
        PartitionLog::open_on(&disk, &dir.path().join("p-0"), "p-0", config.clone(), true).unwrap();
    let before = power.syncs();
    let acked = Mutex::new(Vec::new());
    let appended = std::sync::Barrier::new(WRITERS);
    let flushed = std::sync::Barrier::new(WRITERS);
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let (partition, acked, appended, flushed) = (&partition, &acked, &appended, &flushed);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let value = format!("{writer}-{round}");
                    let info = partition
                        .append(&support::batch(&[&value], now_ms()))
                        .unwrap();
                    // Every writer's records are in before any flush starts.
                    appended.wait();
                    let durable = partition.flush_to(info.last_offset + 1).unwrap();
                    assert!(
                        durable > info.last_offset,
                        "a flush returned before its records"
                    );
                    acked.lock().unwrap().push((info.base_offset, value));
                    flushed.wait();
                }
            });
        }
    });
    let syncs = power.syncs() - before;
    eprintln!("{ROUNDS} rounds of {WRITERS} overlapping flushes took {syncs} fdatasyncs");
    // The first flush of a round syncs everything appended; the rest find
    // their records durable.
    assert_eq!(
        syncs, ROUNDS as u64,
        "each round of {WRITERS} overlapping flushes should take one fdatasync"
    );
    // And each was a real sync: a power loss now keeps every flushed record.
    power.cut();
    drop(partition);
    power.restore(7).unwrap();
    let partition = PartitionLog::open(&dir.path().join("p-0"), "p-0", config, false).unwrap();
    let stored: BTreeMap<i64, String> = records(&partition).into_iter().collect();
    for (offset, value) in acked.into_inner().unwrap() {
        assert_eq!(
            stored.get(&offset),
            Some(&value),
            "flushed offset {offset} lost"
        );
    }
}

#[test]
fn a_failed_fdatasync_is_never_acknowledged_and_makes_the_partition_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p-0");
    let (power, disk) = power_loss(dir.path());
    let partition = PartitionLog::open_on(&disk, &path, "p-0", config(), true).unwrap();
    partition
        .append(&support::batch(&["kept"], now_ms()))
        .unwrap();
    assert_eq!(partition.flush().unwrap(), 1);

    partition
        .append(&support::batch(&["unsynced"], now_ms()))
        .unwrap();
    power.fail_syncs(1);
    let failed = partition.flush().unwrap_err();
    assert!(failed.to_string().contains("fdatasync"), "{failed}");
    let reason = partition
        .read_only_reason()
        .expect("read-only after a failed sync");
    assert!(reason.contains("fdatasync"), "{reason}");
    // Never retried into an acknowledgement, even now that syncs work.
    assert!(matches!(partition.flush(), Err(LogError::ReadOnly { .. })));
    assert!(matches!(
        partition.append(&support::batch(&["refused"], now_ms())),
        Err(LogError::ReadOnly { .. })
    ));
    // What was durable is still served.
    assert_eq!(records(&partition)[0], (0, "kept".to_string()));

    // A restart (after a power loss, the worst case) serves what was
    // durable and takes appends again.
    power.cut();
    drop(partition);
    power.restore(11).unwrap();
    let partition = PartitionLog::open_on(&disk, &path, "p-0", config(), false).unwrap();
    assert_eq!(records(&partition)[0], (0, "kept".to_string()));
    assert!(partition.read_only_reason().is_none());
    let info = partition
        .append(&support::batch(&["after"], now_ms()))
        .unwrap();
    assert_eq!(partition.flush().unwrap(), info.last_offset + 1);
}

#[test]
fn the_broker_answers_a_failed_fdatasync_with_a_storage_error_and_keeps_refusing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let (power, disk) = power_loss(&root);
    let log = Arc::new(LogManager::open_on(&disk, &root, config()).unwrap());
    log.create_topic(TOPIC, 1, BTreeMap::new()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = serve(Arc::clone(&log), Arc::clone(&stop));
    let mut stream = TcpStream::connect(&addr).unwrap();
    let mut produce = |value: &str| {
        let request = produce_request(-1, TOPIC, 0, support::batch(&[value], now_ms()));
        produce_answer(
            &call_blocking::<_, ProduceResponse>(&mut stream, ApiKey::Produce, 9, &request)
                .unwrap(),
        )
    };
    assert_eq!(produce("first"), (0, 0));
    power.fail_syncs(1);
    assert_eq!(produce("second").0, KAFKA_STORAGE_ERROR);
    assert_eq!(produce("third").0, KAFKA_STORAGE_ERROR);
    let reason = log.partition(TOPIC, 0).unwrap().read_only_reason();
    assert!(reason.is_some_and(|r| r.contains("fdatasync")));
    stop.store(true, Ordering::SeqCst);
    server.join().unwrap();
}
