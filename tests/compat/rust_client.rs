//! strata's own client beside the real ones: records produced by it and
//! consumed by another client (and the other way round) byte for byte; keys
//! placed on the partitions librdkafka and kafka-python choose; a consumer
//! group shared by two strata consumers and a kafka-python consumer.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use strata::client::partitioner::partition_for_key;
use strata::client::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, Seek, TopicPartition,
};

use crate::broker::{Broker, TopicSpec};
use crate::driver::{Client, Consumed, field, hex, unhex};
use crate::support::member::Member;
use crate::support::wait_for;

/// How long a group may take to settle here.
const WAIT: Duration = Duration::from_secs(60);
use crate::records::{self, assert_same, now_ms};
use crate::scenarios::{PLAIN, consume_all, produce};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn cluster(broker: &Broker) -> Arc<Cluster> {
    Cluster::connect(ClientConfig::new(broker.addr()))
        .await
        .unwrap()
}

/// A spec's hex bytes as the producer takes them.
fn bytes_of(text: &Option<String>) -> Option<Bytes> {
    text.as_deref().map(|t| Bytes::from(unhex(t)))
}

/// strata's producer sends `specs`; `client` must read them back exactly.
pub fn strata_client_to(client: Client) {
    const PARTITIONS: i32 = 3;
    let topic = "from-strata";
    let broker = Broker::start(&[TopicSpec::new(topic, PARTITIONS)]);
    // Every shape the consumer can return (kcat reads text).
    let specs = records::generate(client.capabilities(), 60, PARTITIONS, 41, now_ms());
    let from_ms = now_ms();
    runtime().block_on(async {
        let producer = Producer::new(cluster(&broker).await, ProducerConfig::default())
            .await
            .unwrap();
        let mut deliveries = Vec::new();
        for spec in &specs {
            let record = ProducerRecord {
                topic: topic.into(),
                partition: Some(spec.partition),
                key: bytes_of(&spec.key),
                value: bytes_of(&spec.value),
                headers: spec
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), bytes_of(v)))
                    .collect(),
                timestamp: spec.timestamp,
            };
            deliveries.push(producer.send(record).await.unwrap());
        }
        for delivery in deliveries {
            delivery.await.unwrap();
        }
        producer.close().await;
    });
    let to_ms = now_ms();
    let got = consume_all(client, &broker, topic, PARTITIONS, specs.len());
    let want = records::expected(&specs, &[0; 3], &got, from_ms, to_ms);
    assert_same(&format!("strata → {}", client.name()), &got, &want);
}

/// `client` produces; strata's consumer must read the records back exactly.
pub fn client_to_strata_client(client: Client) {
    const PARTITIONS: i32 = 3;
    let topic = "to-strata";
    let broker = Broker::start(&[TopicSpec::new(topic, PARTITIONS)]);
    let specs = records::generate(client.capabilities(), 60, PARTITIONS, 43, now_ms());
    let produced = produce(client, &broker, topic, specs, &[0; 3], &PLAIN);
    let got: Vec<Consumed> = runtime().block_on(async {
        let mut consumer = Consumer::new(
            cluster(&broker).await,
            ConsumerConfig {
                offset_reset: OffsetReset::Earliest,
                ..ConsumerConfig::default()
            },
        );
        let partitions: Vec<TopicPartition> =
            (0..PARTITIONS).map(|p| (topic.to_string(), p)).collect();
        consumer.assign(&partitions);
        for p in 0..PARTITIONS {
            consumer.seek(topic, p, Seek::Beginning).await.unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < produced.specs.len() {
            assert!(Instant::now() < deadline, "only {} records", got.len());
            for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                got.push(Consumed {
                    partition: r.partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key.as_deref().map(hex),
                    value: r.value.as_deref().map(hex),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_deref().map(hex)))
                        .collect(),
                });
            }
        }
        got
    });
    let mut got = got;
    got.sort_by_key(|c| (c.partition, c.offset));
    let want = records::expected(
        &produced.specs,
        &[0; 3],
        &got,
        produced.from_ms,
        produced.to_ms,
    );
    assert_same(&format!("{} → strata", client.name()), &got, &want);
}

/// `client` places keyed records with its default (murmur2) partitioner;
/// strata's partitioner must name the same partition for every key.
pub fn keys_land_where_strata_puts_them(client: Client) {
    for partitions in [3, 8] {
        let topic = format!("keyed-{partitions}");
        let broker = Broker::start(&[TopicSpec::new(&topic, partitions)]);
        let mut rng = crate::support::Rng(partitions as u64);
        let keys: Vec<Vec<u8>> = (0..200)
            .map(|i| match i % 3 {
                0 => format!("user-{i}").into_bytes(),
                1 => rng.bytes(1 + (i % 40)),
                _ => i.to_string().into_bytes(),
            })
            .collect();
        let result = client.run(
            "produce_keyed",
            broker.addr(),
            json!({ "topic": topic, "keys": keys.iter().map(|k| hex(k)).collect::<Vec<_>>() }),
        );
        let placed: Vec<i32> = field(&result, "partitions");
        for (key, partition) in keys.iter().zip(placed) {
            assert_eq!(
                partition_for_key(key, partitions),
                partition,
                "{} placed key {} on partition {partition} of {partitions}",
                client.name(),
                hex(key)
            );
        }
    }
}

/// Two strata consumers and one kafka-python consumer in one group: the
/// three split six partitions two each; when kafka-python leaves, the two
/// strata members split them three each.
pub fn group_shared_with_kafka_python() {
    const TOPIC: &str = "mixed";
    let broker = Broker::start_with_config(
        &[TopicSpec::new(TOPIC, 6)],
        "group_initial_rebalance_delay_ms = 0\n",
    );
    let rt = runtime();
    rt.block_on(async {
        let config = ConsumerConfig {
            group_id: Some("mixed-group".into()),
            offset_reset: OffsetReset::Earliest,
            heartbeat_interval: Duration::from_millis(300),
            ..ConsumerConfig::default()
        };
        let first = Member::spawn(Consumer::new(cluster(&broker).await, config.clone()), TOPIC);
        let second = Member::spawn(Consumer::new(cluster(&broker).await, config), TOPIC);
        wait_for("the strata members to split the topic", WAIT, || {
            first.partitions().len() == 3 && second.partitions().len() == 3
        })
        .await;

        let addr = broker.addr().to_string();
        let python = tokio::task::spawn_blocking(move || {
            Client::KafkaPython.run(
                "group_member",
                &addr,
                json!({ "topic": TOPIC, "group": "mixed-group", "seconds": 12 }),
            )
        });
        let mut seen_three_way = None;
        wait_for("a three-way split", WAIT, || {
            let (a, b) = (first.partitions(), second.partitions());
            if a.len() == 2 && b.len() == 2 {
                seen_three_way = Some((a, b));
                true
            } else {
                false
            }
        })
        .await;
        let result = python.await.unwrap();
        let assignments: Vec<Vec<i32>> = field(&result, "assignments");
        let (a, b) = seen_three_way.unwrap();
        let held_by_python = assignments
            .iter()
            .find(|held| held.len() == 2)
            .unwrap_or_else(|| panic!("kafka-python never held two partitions: {assignments:?}"));
        let all: BTreeSet<i32> = a.iter().chain(&b).chain(held_by_python).copied().collect();
        assert_eq!(all, (0..6).collect(), "{a:?} {b:?} {held_by_python:?}");

        wait_for(
            "the strata members to take kafka-python's partitions",
            WAIT,
            || first.partitions().len() == 3 && second.partitions().len() == 3,
        )
        .await;
        for member in [first, second] {
            member.stop().await.close().await.unwrap();
        }
    });
}
