//! The Rust client's transactional producer and read_committed fetching
//! against a real broker: committed transactions are seen, aborted ones
//! only by read_uncommitted readers, offsets sent with a transaction are
//! committed only with it, and a newer producer with the same
//! transactional id fences the older one.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strata::broker::BrokerConfig;
use strata::client::{
    Admin, ClientConfig, ClientError, Cluster, FetchOptions, Fetcher, Producer, ProducerConfig,
    ProducerRecord,
};

async fn cluster(broker: &support::InProcessBroker) -> Arc<Cluster> {
    Cluster::connect(ClientConfig::new(&broker.addr.to_string()))
        .await
        .unwrap()
}

fn transactional(id: &str) -> ProducerConfig {
    ProducerConfig {
        transactional_id: Some(id.to_string()),
        linger: Duration::from_millis(1),
        ..ProducerConfig::default()
    }
}

fn record(topic: &str, value: &str) -> ProducerRecord {
    ProducerRecord {
        topic: topic.into(),
        partition: Some(0),
        value: Some(Bytes::from(value.to_string())),
        ..ProducerRecord::default()
    }
}

/// The values of partition 0 of `topic` as a reader of that isolation
/// sees them, from the start.
async fn values(cluster: &Arc<Cluster>, topic: &str, read_committed: bool) -> Vec<String> {
    let fetcher = Fetcher::new(
        Arc::clone(cluster),
        FetchOptions {
            min_bytes: 1,
            max_wait: Duration::from_millis(100),
            read_committed,
        },
    );
    let mut offset = 0;
    let mut out = Vec::new();
    loop {
        let fetched = fetcher.fetch(topic, 0, offset, 1 << 20).await.unwrap();
        if fetched.records.is_empty() {
            return out;
        }
        for batch in fetched.visible_batches() {
            let batch = batch.unwrap();
            for record in batch.records(1 << 20).unwrap().iter() {
                let record = record.unwrap();
                if record.offset >= offset {
                    out.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
                }
            }
        }
        offset = fetched.next_offset();
    }
}

#[tokio::test]
async fn committed_transactions_are_visible_and_aborted_ones_are_not() {
    let broker = support::InProcessBroker::start(BrokerConfig::default()).await;
    let cluster = cluster(&broker).await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("txn", 1, &[])
        .await
        .unwrap();
    let producer = Producer::new(Arc::clone(&cluster), transactional("client-tx"))
        .await
        .unwrap();
    // Sending outside a transaction is refused.
    assert!(matches!(
        producer.send(record("txn", "outside")).await,
        Err(ClientError::Invalid(_))
    ));
    for (values, commit) in [(["a", "b"], true), (["c", "d"], false), (["e", "f"], true)] {
        producer.begin_transaction().await.unwrap();
        for value in values {
            producer.send(record("txn", value)).await.unwrap();
        }
        if commit {
            producer.commit_transaction().await.unwrap();
        } else {
            producer.abort_transaction().await.unwrap();
        }
    }
    assert_eq!(values(&cluster, "txn", true).await, ["a", "b", "e", "f"]);
    assert_eq!(
        values(&cluster, "txn", false).await,
        ["a", "b", "c", "d", "e", "f"]
    );
}

#[tokio::test]
async fn offsets_sent_with_a_transaction_are_committed_only_with_it() {
    let broker = support::InProcessBroker::start(BrokerConfig::default()).await;
    let cluster = cluster(&broker).await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("out", 1, &[]).await.unwrap();
    admin.create_topic("in", 1, &[]).await.unwrap();
    let producer = Producer::new(Arc::clone(&cluster), transactional("client-offsets"))
        .await
        .unwrap();
    let offsets = |n| vec![("in".to_string(), 0, n)];

    producer.begin_transaction().await.unwrap();
    producer.send(record("out", "x")).await.unwrap();
    producer
        .send_offsets_to_transaction("readers", &offsets(7))
        .await
        .unwrap();
    producer.abort_transaction().await.unwrap();
    let committed = admin.committed_offsets("readers").await.unwrap();
    assert!(committed.is_empty(), "{committed:?}");

    producer.begin_transaction().await.unwrap();
    producer.send(record("out", "y")).await.unwrap();
    producer
        .send_offsets_to_transaction("readers", &offsets(9))
        .await
        .unwrap();
    producer.commit_transaction().await.unwrap();
    let committed = admin.committed_offsets("readers").await.unwrap();
    assert_eq!(committed.get(&("in".to_string(), 0)), Some(&9));
}

#[tokio::test]
async fn a_newer_producer_fences_the_older_and_aborts_its_open_transaction() {
    let broker = support::InProcessBroker::start(BrokerConfig::default()).await;
    let cluster = cluster(&broker).await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("fenced", 1, &[])
        .await
        .unwrap();
    let old = Producer::new(Arc::clone(&cluster), transactional("client-zombie"))
        .await
        .unwrap();
    old.begin_transaction().await.unwrap();
    old.send(record("fenced", "zombie")).await.unwrap();
    old.flush().await;

    let new = Producer::new(Arc::clone(&cluster), transactional("client-zombie"))
        .await
        .unwrap();
    assert_eq!(new.identity().0, old.identity().0);
    assert!(new.identity().1 > old.identity().1);
    let error = old.commit_transaction().await.unwrap_err();
    // PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH before the version that
    // has it.
    assert!(matches!(error.code(), Some(90 | 47)), "{error}");
    new.begin_transaction().await.unwrap();
    new.send(record("fenced", "successor")).await.unwrap();
    new.commit_transaction().await.unwrap();
    assert_eq!(values(&cluster, "fenced", true).await, ["successor"]);
}

#[tokio::test]
async fn after_a_batch_fails_the_transaction_aborts_and_the_next_one_commits() {
    let broker = support::InProcessBroker::start(BrokerConfig::default()).await;
    let cluster = cluster(&broker).await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("small", 1, &[("max.message.bytes".into(), "1024".into())])
        .await
        .unwrap();
    let producer = Producer::new(Arc::clone(&cluster), transactional("client-failure"))
        .await
        .unwrap();
    let epoch = producer.identity().1;
    producer.begin_transaction().await.unwrap();
    producer.send(record("small", "fits")).await.unwrap();
    let too_large = producer
        .send(record("small", &"x".repeat(4096)))
        .await
        .unwrap();
    assert!(too_large.await.is_err());
    let refused = producer.commit_transaction().await.unwrap_err();
    assert!(refused.to_string().contains("abort"), "{refused}");
    producer.abort_transaction().await.unwrap();
    // A new epoch, and sequences from 0: the next transaction goes through.
    assert!(producer.identity().1 > epoch);
    producer.begin_transaction().await.unwrap();
    producer.send(record("small", "after")).await.unwrap();
    producer.commit_transaction().await.unwrap();
    assert_eq!(values(&cluster, "small", true).await, ["after"]);
}

#[tokio::test]
async fn a_fenced_producer_asking_again_with_its_identity_stays_fenced() {
    let broker = support::InProcessBroker::start(BrokerConfig::default()).await;
    let cluster = cluster(&broker).await;
    let requests = strata::client::Transactional::new(&cluster, "client-restart");
    let old = requests.init(60_000, None).await.unwrap();
    // A producer that restarts itself after an abortable error bumps its
    // own epoch (KIP-360) …
    let bumped = requests.init(60_000, Some(old)).await.unwrap();
    assert_eq!(bumped.0, old.0);
    assert!(bumped.1 > old.1);
    // … but once another instance took the id over, the old identity is
    // refused rather than fencing the new owner back.
    let owner = requests.init(60_000, None).await.unwrap();
    let error = requests.init(60_000, Some(bumped)).await.unwrap_err();
    assert!(matches!(error.code(), Some(90 | 47)), "{error}");
    let again = requests.init(60_000, Some(owner)).await.unwrap();
    assert!(again.1 > owner.1, "the owner itself may still bump");
}
