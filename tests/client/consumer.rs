//! The Rust client's consumer against a real broker: assigned partitions,
//! seeks of every kind, commits and resuming from them, lag, reset
//! policies, and group membership with rebalances as members come and go.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strata::broker::BrokerConfig;
use strata::client::{
    Admin, Assignor, ClientConfig, ClientError, Cluster, Consumer, ConsumerConfig, ConsumerRecord,
    OffsetReset, Producer, ProducerConfig, ProducerRecord, Rebalance, Seek, TopicPartition,
};
use support::member::Member;
use support::wait::Deadline;
use support::wait_for;

const WAIT: Duration = Duration::from_secs(30);

struct Running {
    broker: support::InProcessBroker,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig {
        auto_create_topics: false,
        ..BrokerConfig::default()
    };
    config.groups.initial_rebalance_delay = Duration::ZERO;
    let broker = support::InProcessBroker::start_in(dir.path(), config).await;
    Running { broker, _dir: dir }
}

impl Running {
    async fn cluster(&self) -> Arc<Cluster> {
        Cluster::connect(ClientConfig::new(&self.broker.addr.to_string()))
            .await
            .unwrap()
    }

    /// A topic of `partitions` holding `per_partition` records in each,
    /// values "p<partition>-<n>" with timestamps 1000 + n.
    async fn topic_with_records(&self, topic: &str, partitions: i32, per_partition: i64) {
        let cluster = self.cluster().await;
        Admin::new(Arc::clone(&cluster))
            .create_topic(topic, partitions, &[])
            .await
            .unwrap();
        let producer = Producer::new(cluster, ProducerConfig::default())
            .await
            .unwrap();
        let mut deliveries = Vec::new();
        for partition in 0..partitions {
            for n in 0..per_partition {
                let mut record = ProducerRecord::new(
                    topic,
                    Some(format!("k{n}").as_bytes()),
                    format!("p{partition}-{n}").as_bytes(),
                );
                record.partition = Some(partition);
                record.timestamp = Some(1000 + n);
                deliveries.push(producer.send(record).await.unwrap());
            }
        }
        for delivery in deliveries {
            delivery.await.unwrap();
        }
        producer.close().await;
    }

    async fn consumer(&self, config: ConsumerConfig) -> Consumer {
        Consumer::new(self.cluster().await, config)
    }
}

fn group_config(group: &str) -> ConsumerConfig {
    ConsumerConfig {
        group_id: Some(group.into()),
        offset_reset: OffsetReset::Earliest,
        heartbeat_interval: Duration::from_millis(200),
        ..ConsumerConfig::default()
    }
}

fn value(record: &ConsumerRecord) -> String {
    String::from_utf8(record.value.as_ref().unwrap().to_vec()).unwrap()
}

/// Polls until `count` records arrived (or fails after a while).
async fn poll_count(consumer: &mut Consumer, count: usize) -> Vec<ConsumerRecord> {
    let deadline = Deadline::after(format!("{count} records"), WAIT);
    let mut got = Vec::new();
    while got.len() < count {
        deadline.check(format_args!(" (only {} arrived)", got.len()));
        got.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
    }
    got
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    (topic.to_string(), partition)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assigned_consumer_reads_seeks_commits_and_resumes() {
    let running = start().await;
    running.topic_with_records("events", 2, 10).await;

    let mut consumer = running.consumer(group_config("readers")).await;
    consumer.assign(&[tp("events", 0), tp("events", 1)]);
    let records = poll_count(&mut consumer, 20).await;
    for partition in 0..2 {
        let values: Vec<String> = records
            .iter()
            .filter(|r| r.partition == partition)
            .map(value)
            .collect();
        let want: Vec<String> = (0..10).map(|n| format!("p{partition}-{n}")).collect();
        assert_eq!(values, want, "partition {partition} in order");
    }
    let first = records.iter().find(|r| r.partition == 1).unwrap();
    assert_eq!(first.key.as_deref(), Some(&b"k0"[..]));
    assert_eq!(first.timestamp, 1000);
    assert_eq!(consumer.position("events", 0), Some(10));

    // Seeks: offset, timestamp, beginning, end.
    consumer.seek("events", 0, Seek::Offset(7)).await.unwrap();
    consumer.seek("events", 1, Seek::End).await.unwrap();
    let again = poll_count(&mut consumer, 3).await;
    assert_eq!(
        again.iter().map(value).collect::<Vec<_>>(),
        ["p0-7", "p0-8", "p0-9"]
    );
    consumer
        .seek("events", 0, Seek::Timestamp(1004))
        .await
        .unwrap();
    assert_eq!(consumer.position("events", 0), Some(4));
    consumer
        .seek("events", 0, Seek::Timestamp(9999))
        .await
        .unwrap();
    assert_eq!(
        consumer.position("events", 0),
        Some(10),
        "past every record: the end"
    );
    consumer.seek("events", 1, Seek::Beginning).await.unwrap();
    assert_eq!(consumer.position("events", 1), Some(0));
    assert!(matches!(
        consumer.seek("other", 0, Seek::Beginning).await,
        Err(ClientError::Invalid(_))
    ));

    // Commit 10 and 3; the lag is what is left after the positions.
    consumer.seek("events", 1, Seek::Offset(3)).await.unwrap();
    consumer.commit().await.unwrap();
    let committed = consumer.committed().await.unwrap();
    assert_eq!(committed[&tp("events", 0)], Some(10));
    assert_eq!(committed[&tp("events", 1)], Some(3));
    let lag: BTreeMap<i32, i64> = consumer
        .lag()
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.partition, l.lag))
        .collect();
    assert_eq!(lag, BTreeMap::from([(0, 0), (1, 7)]));
    consumer.close().await.unwrap();

    // A new consumer of the group resumes from the commits.
    let mut resumed = running.consumer(group_config("readers")).await;
    resumed.assign(&[tp("events", 0), tp("events", 1)]);
    let rest = poll_count(&mut resumed, 7).await;
    assert!(rest.iter().all(|r| r.partition == 1 && r.offset >= 3));
    assert_eq!(value(&rest[0]), "p1-3");
    resumed.close().await.unwrap();
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_policies_decide_where_an_uncommitted_partition_starts() {
    let running = start().await;
    running.topic_with_records("resets", 1, 5).await;

    let mut latest = running
        .consumer(ConsumerConfig {
            offset_reset: OffsetReset::Latest,
            ..ConsumerConfig::default()
        })
        .await;
    latest.assign(&[tp("resets", 0)]);
    assert!(
        latest
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(latest.position("resets", 0), Some(5));

    let mut none = running
        .consumer(ConsumerConfig {
            offset_reset: OffsetReset::None,
            ..group_config("fresh")
        })
        .await;
    none.assign(&[tp("resets", 0)]);
    let error = none.poll(Duration::from_millis(100)).await.unwrap_err();
    assert!(error.to_string().contains("no committed offset"), "{error}");

    // An offset past the end is out of range: typed with reset none,
    // reset to the start with earliest.
    let mut strict = running
        .consumer(ConsumerConfig {
            offset_reset: OffsetReset::None,
            ..ConsumerConfig::default()
        })
        .await;
    strict.assign(&[tp("resets", 0)]);
    strict.seek("resets", 0, Seek::Offset(50)).await.unwrap();
    let error = strict.poll(Duration::from_millis(100)).await.unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::OffsetOutOfRange {
                offset: 50,
                partition: 0,
                ..
            }
        ),
        "{error:?}"
    );
    let mut lenient = running.consumer(group_config("lenient")).await;
    lenient.assign(&[tp("resets", 0)]);
    lenient.seek("resets", 0, Seek::Offset(50)).await.unwrap();
    let records = poll_count(&mut lenient, 5).await;
    assert_eq!(records[0].offset, 0);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_split_partitions_and_rebalance_as_they_come_and_go() {
    for assignor in [Assignor::Range, Assignor::RoundRobin] {
        let running = start().await;
        running.topic_with_records("shared", 4, 5).await;
        let config = ConsumerConfig {
            assignors: vec![assignor],
            ..group_config("sharing")
        };

        let first = Member::spawn(running.consumer(config.clone()).await, "shared");
        wait_for("the first member to take every partition", WAIT, || {
            first.assigned().len() == 4
        })
        .await;
        let second = Member::spawn(running.consumer(config.clone()).await, "shared");
        wait_for("the members to split the topic", WAIT, || {
            first.assigned().len() == 2 && second.assigned().len() == 2
        })
        .await;
        let mut both: Vec<TopicPartition> = first.assigned();
        both.extend(second.assigned());
        both.sort();
        assert_eq!(both, (0..4).map(|p| tp("shared", p)).collect::<Vec<_>>());
        if assignor == Assignor::RoundRobin {
            // Dealt in turn: one member holds the even partitions.
            let parities: Vec<i32> = first.assigned().iter().map(|(_, p)| p % 2).collect();
            assert_eq!(
                parities[0],
                parities[1],
                "{assignor:?}: {:?}",
                first.assigned()
            );
        }
        let revoked = first
            .events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Rebalance::Revoked(p) if p.len() == 4));
        assert!(
            revoked,
            "the first member was told its partitions were revoked"
        );

        // Every record was read at least once between the two.
        wait_for("every record", WAIT, || {
            let mut seen: Vec<(i32, i64)> = first
                .consumed
                .lock()
                .unwrap()
                .iter()
                .chain(second.consumed.lock().unwrap().iter())
                .map(|r| (r.partition, r.offset))
                .collect();
            seen.sort();
            seen.dedup();
            seen.len() == 20
        })
        .await;

        // The second leaves; the first takes everything back.
        second.stop().await.close().await.unwrap();
        wait_for("the remaining member to take every partition", WAIT, || {
            first.assigned().len() == 4
        })
        .await;
        first.stop().await.close().await.unwrap();
        running.broker.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_needs_a_group_and_polling_needs_partitions() {
    let running = start().await;
    let mut consumer = running.consumer(ConsumerConfig::default()).await;
    assert!(matches!(
        consumer.subscribe(&["t"]),
        Err(ClientError::Invalid(_))
    ));
    assert!(matches!(
        consumer.poll(Duration::from_millis(10)).await,
        Err(ClientError::Invalid(_))
    ));
    running.broker.stop().await;
}
