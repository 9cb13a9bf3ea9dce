//! A fetch waiting for data is woken by appends to the partitions it reads
//! and by nothing else: produces to other partitions leave it waiting (the
//! broker counts every wakeup), and an append to one of its partitions
//! answers it with the record at once rather than at its deadline.

use crate::support;

use kafka_protocol::messages::{ApiKey, FetchResponse};
use strata::broker::BrokerConfig;
use support::wire::{decode_response, fetch_request, frame, produce, read_response};
use support::{InProcessBroker, one_record};
use tokio::io::AsyncWriteExt;

/// The values of the records in a fetched partition's record bytes.
fn values(records: Option<&bytes::Bytes>) -> Vec<Vec<u8>> {
    support::decode(records.map_or(&[][..], |r| &r[..]))
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect()
}

#[tokio::test]
async fn a_waiting_fetch_is_woken_by_appends_to_its_partitions_only() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("watched", 3, Default::default())
        .unwrap();
    broker
        .log
        .create_topic("elsewhere", 1, Default::default())
        .unwrap();
    let mut producer = broker.connect().await;
    let mut consumer = broker.connect().await;

    // Waits on partitions 1 and 2, for up to 30 s (the broker's cap): long
    // enough that only a wakeup can answer it while the test runs.
    let waiting = fetch_request("watched", &[1, 2], 0, 1 << 20, 30_000);
    consumer
        .write_all(&frame(ApiKey::Fetch, 12, 1, &waiting))
        .await
        .unwrap();
    broker
        .wait_for_metric("strata_fetches_waiting", |n| n == 1)
        .await;

    // Appends elsewhere: another partition of the topic, another topic.
    for i in 0..5 {
        let answer = produce(
            &mut producer,
            "watched",
            0,
            one_record(format!("p0-{i}").as_bytes(), 1),
        )
        .await;
        assert_eq!(answer.0, 0);
        let answer = produce(&mut producer, "elsewhere", 0, one_record(b"x", 1)).await;
        assert_eq!(answer.0, 0);
    }
    assert_eq!(broker.metric("strata_fetch_wakeups_total").await, 0);
    assert_eq!(broker.metric("strata_fetches_waiting").await, 1);

    // An append to partition 2 answers the fetch with that record.
    let answer = produce(
        &mut producer,
        "watched",
        2,
        one_record(b"for-the-waiting-fetch", 1),
    )
    .await;
    assert_eq!(answer.0, 0);
    let response = read_response(&mut consumer).await.expect("a response");
    let fetched: FetchResponse = decode_response(response, ApiKey::Fetch, 12, 1);
    let partitions = &fetched.responses[0].partitions;
    assert_eq!(partitions[0].partition_index, 1);
    assert!(values(partitions[0].records.as_ref()).is_empty());
    assert_eq!(partitions[1].partition_index, 2);
    assert_eq!(
        values(partitions[1].records.as_ref()),
        [b"for-the-waiting-fetch".to_vec()]
    );
    // Woken by the append, not by its deadline.
    assert_eq!(broker.metric("strata_fetch_wakeups_total").await, 1);
    assert_eq!(broker.metric("strata_fetches_waiting").await, 0);
    broker.stop().await;
}

#[tokio::test]
async fn many_fetches_wait_on_one_partition_and_all_are_woken_by_one_append() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("shared", 1, Default::default())
        .unwrap();
    const CONSUMERS: u64 = 8;
    let mut consumers = Vec::new();
    for i in 0..CONSUMERS {
        let mut consumer = broker.connect().await;
        let request = fetch_request("shared", &[0], 0, 1 << 20, 30_000);
        consumer
            .write_all(&frame(ApiKey::Fetch, 12, i as i32, &request))
            .await
            .unwrap();
        consumers.push(consumer);
    }
    broker
        .wait_for_metric("strata_fetches_waiting", |n| n == CONSUMERS)
        .await;
    let mut producer = broker.connect().await;
    let answer = produce(&mut producer, "shared", 0, one_record(b"for-everyone", 1)).await;
    assert_eq!(answer.0, 0);
    for (i, consumer) in consumers.iter_mut().enumerate() {
        let response = read_response(consumer).await.expect("a response");
        let fetched: FetchResponse = decode_response(response, ApiKey::Fetch, 12, i as i32);
        assert_eq!(
            values(fetched.responses[0].partitions[0].records.as_ref()),
            [b"for-everyone".to_vec()]
        );
    }
    assert_eq!(broker.metric("strata_fetch_wakeups_total").await, CONSUMERS);
    broker.stop().await;
}
