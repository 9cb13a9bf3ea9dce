//! Transactions under crashes, against `strata serve` as a real process:
//! - the broker dying between a transaction's durable decision and its
//!   markers, and between the markers and the end of the protocol (crash
//!   points, see `broker/txn/crash_point.rs`): after a restart the
//!   transaction is complete in every partition, never in some;
//! - a producer that vanishes mid-transaction, and the broker SIGKILLed
//!   mid-transaction: none of its records is ever visible to a
//!   `read_committed` reader, and the producer's next transaction commits;
//! - transactions over two partitions while the broker is SIGKILLed at
//!   random moments: a `read_committed` reader sees each transaction whole
//!   or not at all, and every transaction whose commit was acknowledged.
//!   `STRATA_SOAK_TXN_KILLS` sets the number of kills (`make soak`).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strata::client::{
    ClientConfig, Cluster, FetchOptions, Fetcher, Producer, ProducerConfig, ProducerRecord,
};
use strata::log::{LogConfig, LogManager};
use support::ServerProcess;
use support::rng::Rng;

const TOPIC: &str = "txn";
const PARTITIONS: i32 = 2;
/// Kills `make test` runs in the random-kill scenario.
const KILLS_QUICK: usize = 5;
/// How long any one client call may take before the test gives up on it.
const CALL_LIMIT: Duration = Duration::from_secs(30);

fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    log.create_topic(TOPIC, PARTITIONS, Default::default())
        .unwrap();
    log.close().unwrap();
    dir
}

async fn cluster(addr: &str) -> Arc<Cluster> {
    Cluster::connect(ClientConfig::new(addr)).await.unwrap()
}

fn transactional(id: &str) -> ProducerConfig {
    ProducerConfig {
        transactional_id: Some(id.to_string()),
        linger: Duration::from_millis(1),
        ..ProducerConfig::default()
    }
}

fn record(partition: i32, value: &str) -> ProducerRecord {
    ProducerRecord {
        topic: TOPIC.into(),
        partition: Some(partition),
        value: Some(Bytes::from(value.to_string())),
        ..ProducerRecord::default()
    }
}

/// Every value of a partition as a `read_committed` reader sees it.
async fn committed(cluster: &Arc<Cluster>, partition: i32) -> Vec<String> {
    let fetcher = Fetcher::new(
        Arc::clone(cluster),
        FetchOptions {
            min_bytes: 1,
            max_wait: Duration::from_millis(50),
            read_committed: true,
        },
    );
    let mut offset = 0;
    let mut out = Vec::new();
    loop {
        let fetched = fetcher
            .fetch(TOPIC, partition, offset, 1 << 20)
            .await
            .unwrap();
        if fetched.records.is_empty() {
            return out;
        }
        for batch in fetched.visible_batches() {
            for record in batch.unwrap().records(1 << 20).unwrap().iter() {
                let record = record.unwrap();
                if record.offset >= offset {
                    out.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
                }
            }
        }
        offset = fetched.next_offset();
    }
}

/// What each partition shows a `read_committed` reader, once the last
/// stable offset has moved past every transaction still open (an open one
/// hides everything after it).
async fn settled(addr: &str) -> BTreeMap<i32, Vec<String>> {
    let cluster = cluster(addr).await;
    let mut read = BTreeMap::new();
    for p in 0..PARTITIONS {
        read.insert(p, committed(&cluster, p).await);
    }
    read
}

/// A transaction writing `name`'s record into each partition, committed.
async fn transaction(producer: &Producer, name: &str) -> Result<(), String> {
    let steps = async {
        producer.begin_transaction().await?;
        for p in 0..PARTITIONS {
            producer.send(record(p, &format!("{name}-{p}"))).await?;
        }
        producer.commit_transaction().await
    };
    match tokio::time::timeout(CALL_LIMIT, steps).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_dying_inside_the_commit_protocol_completes_the_transaction_after_restart() {
    let binary = env!("CARGO_BIN_EXE_strata");
    for point in ["txn-prepared", "txn-marked"] {
        let dir = data_dir();
        let mut server =
            ServerProcess::start_with_env(binary, dir.path(), &[("STRATA_CRASH_POINT", point)]);
        let producer = Producer::new(cluster(&server.addr).await, transactional("dies"))
            .await
            .unwrap();
        // The client would retry until its timeout: it is not waited for.
        let commit = tokio::spawn(async move { transaction(&producer, "t1").await });
        support::wait_until("the broker to abort", Duration::from_secs(20), || {
            !server.is_running()
        });
        if commit.is_finished() {
            let answer = commit.await.unwrap();
            assert!(answer.is_err(), "{point}: the broker answered the commit");
        } else {
            commit.abort();
        }
        server.kill_and_restart(binary, dir.path());
        // The decision was durable: the restarted broker finishes it.
        let mut read = BTreeMap::new();
        for _ in 0..600 {
            read = settled(&server.addr).await;
            if read.values().all(|values| !values.is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let expected: BTreeMap<i32, Vec<String>> = (0..PARTITIONS)
            .map(|p| (p, vec![format!("t1-{p}")]))
            .collect();
        assert_eq!(read, expected, "{point}: the committed transaction, whole");
        // And the producer goes on.
        let producer = Producer::new(cluster(&server.addr).await, transactional("dies"))
            .await
            .unwrap();
        transaction(&producer, "t2").await.unwrap();
        let read = settled(&server.addr).await;
        assert!(
            read.values().all(|values| values.len() == 2),
            "{point}: {read:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_cut_short_by_its_producer_or_the_broker_is_never_visible() {
    let binary = env!("CARGO_BIN_EXE_strata");
    let dir = data_dir();
    let mut server = ServerProcess::start(binary, dir.path());

    // The producer vanishes after sending, before committing.
    let producer = Producer::new(cluster(&server.addr).await, transactional("cut"))
        .await
        .unwrap();
    producer.begin_transaction().await.unwrap();
    for p in 0..PARTITIONS {
        producer.send(record(p, "vanished")).await.unwrap();
    }
    producer.flush().await;
    drop(producer);

    // Its successor fences it (aborting the open transaction), then the
    // broker is killed in the middle of the successor's first transaction.
    let producer = Producer::new(cluster(&server.addr).await, transactional("cut"))
        .await
        .unwrap();
    producer.begin_transaction().await.unwrap();
    for p in 0..PARTITIONS {
        producer.send(record(p, "killed")).await.unwrap();
    }
    producer.flush().await;
    server.kill_and_restart(binary, dir.path());
    drop(producer);

    let producer = Producer::new(cluster(&server.addr).await, transactional("cut"))
        .await
        .unwrap();
    transaction(&producer, "kept").await.unwrap();
    let read = settled(&server.addr).await;
    let expected: BTreeMap<i32, Vec<String>> = (0..PARTITIONS)
        .map(|p| (p, vec![format!("kept-{p}")]))
        .collect();
    assert_eq!(read, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_under_random_kills_are_seen_whole_or_not_at_all() {
    let kills: usize = std::env::var("STRATA_SOAK_TXN_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(KILLS_QUICK);
    let seed = support::rng::seed();
    let mut rng = Rng(seed);
    let binary = env!("CARGO_BIN_EXE_strata");
    let dir = data_dir();
    let mut server = ServerProcess::start(binary, dir.path());
    let acknowledged = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (addr, acknowledged, stop) = (
            server.addr.clone(),
            Arc::clone(&acknowledged),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                // A new producer after every failure: it fences the last
                // one and aborts whatever it left open.
                let Ok(Ok(cluster)) =
                    tokio::time::timeout(CALL_LIMIT, Cluster::connect(ClientConfig::new(&addr)))
                        .await
                else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let Ok(Ok(producer)) =
                    tokio::time::timeout(CALL_LIMIT, Producer::new(cluster, transactional("w")))
                        .await
                else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                loop {
                    n += 1;
                    let name = format!("tx{n}");
                    if transaction(&producer, &name).await.is_err() {
                        break;
                    }
                    acknowledged.lock().unwrap().insert(name);
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        return n;
                    }
                }
            }
            n
        })
    };
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_millis(100 + rng.below(400))).await;
        server.kill_and_restart(binary, dir.path());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let attempted = tokio::time::timeout(Duration::from_secs(60), worker)
        .await
        .expect("the producer stops")
        .unwrap();

    // A last producer of the same id aborts anything left open, so the
    // last stable offset covers every partition's end.
    let producer = Producer::new(cluster(&server.addr).await, transactional("w"))
        .await
        .unwrap();
    drop(producer);
    let read = settled(&server.addr).await;
    let mut seen: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for (p, values) in &read {
        for value in values {
            let (name, partition) = value.rsplit_once('-').expect("name-partition");
            assert_eq!(
                partition,
                p.to_string(),
                "seed {seed}: {value} in partition {p}"
            );
            assert!(
                seen.entry(name.to_string()).or_default().insert(*p),
                "seed {seed}: {value} seen twice"
            );
        }
    }
    let whole: BTreeSet<i32> = (0..PARTITIONS).collect();
    for (name, partitions) in &seen {
        assert_eq!(partitions, &whole, "seed {seed}: {name} is partly visible");
    }
    let acknowledged = acknowledged.lock().unwrap();
    assert!(
        !acknowledged.is_empty(),
        "seed {seed}: no commit was acknowledged"
    );
    for name in acknowledged.iter() {
        assert!(
            seen.contains_key(name),
            "seed {seed}: committed {name} is not visible"
        );
    }
    eprintln!(
        "{kills} kills, {attempted} transactions tried, {} acknowledged, {} visible",
        acknowledged.len(),
        seen.len()
    );
}
