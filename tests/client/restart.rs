//! A broker SIGKILLed and restarted while strata's idempotent producer
//! and its consumer are running: the producer's retries are de-duplicated by
//! the broker, so every record is in the log exactly once and in order, and
//! the consumer reads each exactly once.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata::client::{
    Admin, ClientConfig, Cluster, Consumer, ConsumerConfig, FetchOptions, Fetcher, OffsetReset,
    Producer, ProducerConfig, ProducerRecord, Seek,
};
use support::ServerProcess;
use support::wait::Deadline;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const RECORDS: u64 = 20_000;
const PARTITIONS: i32 = 2;

fn value(i: u64) -> String {
    format!("record-{i:06}")
}

#[test]
fn a_broker_killed_mid_produce_and_consume_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::start(STRATA, &data);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let addr = server.addr.clone();
    let connect = move || {
        let addr = addr.clone();
        async move { Cluster::connect(ClientConfig::new(&addr)).await.unwrap() }
    };
    runtime.block_on(async {
        Admin::new(connect().await)
            .create_topic("steady", PARTITIONS, &[])
            .await
            .unwrap();
    });

    let acked = Arc::new(AtomicU64::new(0));
    let producing = {
        let (acked, connect) = (Arc::clone(&acked), connect.clone());
        runtime.spawn(async move {
            let producer = Producer::new(connect().await, ProducerConfig::default())
                .await
                .unwrap();
            let (pending_tx, mut pending_rx) = tokio::sync::mpsc::channel(1_000);
            let waiter = tokio::spawn(async move {
                while let Some(delivery) = pending_rx.recv().await {
                    let delivery: strata::client::DeliveryFuture = delivery;
                    delivery.await.expect("every record is delivered");
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            });
            for i in 0..RECORDS {
                let mut record = ProducerRecord::new("steady", None, value(i).as_bytes());
                record.partition = Some((i % PARTITIONS as u64) as i32);
                pending_tx
                    .send(producer.send(record).await.unwrap())
                    .await
                    .unwrap();
                if i % 1000 == 999 {
                    // Spread the run over the restart.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            drop(pending_tx);
            waiter.await.unwrap();
            producer.close().await;
        })
    };
    let consuming = runtime.spawn(async move {
        let mut consumer = Consumer::new(
            connect().await,
            ConsumerConfig {
                offset_reset: OffsetReset::Earliest,
                ..ConsumerConfig::default()
            },
        );
        let partitions: Vec<(String, i32)> =
            (0..PARTITIONS).map(|p| ("steady".to_string(), p)).collect();
        consumer.assign(&partitions);
        for p in 0..PARTITIONS {
            consumer.seek("steady", p, Seek::Beginning).await.unwrap();
        }
        let deadline = Deadline::after(format!("{RECORDS} records"), Duration::from_secs(120));
        let mut read = Vec::new();
        while (read.len() as u64) < RECORDS {
            deadline.check(format_args!(" (read {})", read.len()));
            // Errors while the broker is down are retried by the next poll.
            match consumer.poll(Duration::from_millis(200)).await {
                Ok(records) => read.extend(records),
                Err(error) => {
                    assert!(error.is_retriable(), "{error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        read
    });

    // Kill the broker once a quarter of the records are acknowledged.
    support::wait_until(
        "a quarter of the records acknowledged",
        Duration::from_secs(60),
        || acked.load(Ordering::Relaxed) >= RECORDS / 4,
    );
    server.kill_and_restart(STRATA, &data);
    let killed_at = acked.load(Ordering::Relaxed);
    assert!(killed_at < RECORDS, "the kill came after the run");

    runtime.block_on(producing).unwrap();
    let read = runtime.block_on(consuming).unwrap();

    // The consumer read every record once, in order per partition.
    for p in 0..PARTITIONS {
        let got: Vec<String> = read
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap())
            .collect();
        let want: Vec<String> = (0..RECORDS)
            .filter(|i| (i % PARTITIONS as u64) as i32 == p)
            .map(value)
            .collect();
        assert_eq!(got.len(), want.len(), "partition {p}: records read");
        assert!(
            got == want,
            "partition {p}: the consumer read gaps or duplicates"
        );
    }
    assert_eq!(read.len() as u64, RECORDS, "nothing read twice");

    // The log holds each record once: end offsets equal what was sent.
    runtime.block_on(async {
        let addr = server.addr.clone();
        let fetcher = Fetcher::new(
            Cluster::connect(ClientConfig::new(&addr)).await.unwrap(),
            FetchOptions::default(),
        );
        for p in 0..PARTITIONS {
            let end = fetcher
                .list_offset("steady", p, strata::client::LATEST)
                .await
                .unwrap();
            assert_eq!(
                end,
                Some(RECORDS as i64 / i64::from(PARTITIONS)),
                "partition {p}"
            );
        }
    });
}
