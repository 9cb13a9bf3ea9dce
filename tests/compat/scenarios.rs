//! The scenarios, each written once and run for every client it applies to
//! (one `#[test]` per client and scenario, in the client modules).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::broker::{Broker, TopicSpec};
use crate::driver::{Client, Consumed, RecordSpec, field};
use crate::records::{self, assert_same, now_ms};
use crate::wire;
use strata::record::BatchHeader;

/// What a produce run sent and when.
pub struct Produced {
    pub specs: Vec<RecordSpec>,
    pub from_ms: i64,
    pub to_ms: i64,
}

pub struct ProduceSettings {
    pub acks: &'static str,
    pub compression: &'static str,
    pub idempotence: bool,
}

pub const PLAIN: ProduceSettings = ProduceSettings {
    acks: "all",
    compression: "none",
    idempotence: false,
};

/// Produces `specs` with `client`; the offsets it reports must be the ones
/// that follow `starts` in each partition, in order.
pub fn produce(
    client: Client,
    broker: &Broker,
    topic: &str,
    specs: Vec<RecordSpec>,
    starts: &[i64],
    settings: &ProduceSettings,
) -> Produced {
    let from_ms = now_ms();
    let result = client.run(
        "produce",
        broker.addr(),
        json!({
            "topic": topic,
            "acks": settings.acks,
            "compression": settings.compression,
            "idempotence": settings.idempotence,
            "records": specs,
        }),
    );
    let to_ms = now_ms();
    let reported: Vec<Option<i64>> = field(&result, "offsets");
    assert_eq!(reported.len(), specs.len(), "one offset per record");
    let mut next = starts.to_vec();
    for (i, (spec, offset)) in specs.iter().zip(&reported).enumerate() {
        let p = spec.partition as usize;
        if settings.acks != "0" && client != Client::Kcat {
            assert_eq!(
                *offset,
                Some(next[p]),
                "{} reported offset of record {i} (partition {p})",
                client.name()
            );
        }
        next[p] += 1;
    }
    // acks=0 returns before the broker appends: wait for every record.
    for (p, &end) in next.iter().enumerate() {
        wait_for_end(broker, topic, p as i32, end);
    }
    Produced {
        specs,
        from_ms,
        to_ms,
    }
}

fn wait_for_end(broker: &Broker, topic: &str, partition: i32, end: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, high) = wire::offsets(broker.addr(), topic, partition);
        assert!(
            high <= end,
            "{topic}-{partition} ends at {high}, past the {end} records produced"
        );
        if high == end {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}-{partition} never reached {end} records (it has {high})"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Consumes every partition of `topic` from the beginning with `client`.
pub fn consume_all(
    client: Client,
    broker: &Broker,
    topic: &str,
    partitions: i32,
    count: usize,
) -> Vec<Consumed> {
    let result = client.run(
        "consume",
        broker.addr(),
        json!({
            "topic": topic,
            "partitions": (0..partitions).collect::<Vec<_>>(),
            "offset": "beginning",
            "count": count,
        }),
    );
    field(&result, "records")
}

/// Produce with `producer`, consume everything back with `consumer`, and
/// compare byte for byte: keys, values, headers, timestamps, offsets.
/// Returns the headers of the batches the log holds.
pub fn round_trip(
    producer: Client,
    consumer: Client,
    settings: &ProduceSettings,
) -> Vec<BatchHeader> {
    const PARTITIONS: i32 = 3;
    const COUNT: usize = 60;
    let topic = "round-trip";
    let mut broker = Broker::start(&[TopicSpec::new(topic, PARTITIONS)]);
    let caps = producer.capabilities().readable_by(consumer);
    let specs = records::generate(caps, COUNT, PARTITIONS, 7, now_ms() - 60_000);
    let produced = produce(
        producer,
        &broker,
        topic,
        specs,
        &[0; PARTITIONS as usize],
        settings,
    );
    let consumed = consume_all(consumer, &broker, topic, PARTITIONS, COUNT);
    let want = records::expected(
        &produced.specs,
        &[0; PARTITIONS as usize],
        &consumed,
        produced.from_ms,
        produced.to_ms,
    );
    assert_same(
        &format!("{} → {}", producer.name(), consumer.name()),
        &consumed,
        &want,
    );
    let batches = broker.stop_and_read_batch_headers(topic, PARTITIONS);
    for batch in &batches {
        if settings.idempotence {
            assert!(
                batch.producer_id >= 0 && batch.base_sequence >= 0,
                "an idempotent batch without a producer id: {batch:?}"
            );
        } else {
            assert_eq!(
                batch.producer_id, -1,
                "a batch from a plain producer: {batch:?}"
            );
        }
    }
    batches
}

pub fn produce_with_acks(client: Client, acks: &'static str) {
    round_trip(client, client, &ProduceSettings { acks, ..PLAIN });
}

/// Records through one codec: they come back byte for byte, and the log
/// holds batches compressed with it (a client may send a batch that would
/// not shrink uncompressed, never with another codec).
pub fn produce_with_codec(client: Client, codec: &'static str) {
    assert!(
        client.capabilities().codecs.contains(&codec),
        "{} has no {codec} codec",
        client.name()
    );
    let batches = round_trip(
        client,
        client,
        &ProduceSettings {
            compression: codec,
            ..PLAIN
        },
    );
    let codecs: BTreeSet<String> = batches
        .iter()
        .map(|b| format!("{:?}", b.compression().expect("a known codec")).to_ascii_lowercase())
        .collect();
    assert!(
        codecs.contains(codec) && codecs.iter().all(|c| c == codec || c == "none"),
        "{} with {codec} wrote batches compressed with {codecs:?}",
        client.name()
    );
}

/// An idempotent producer: every record once, in order, and every batch in
/// the log carries the producer id and sequence it was given.
pub fn produce_idempotent(client: Client) {
    round_trip(
        client,
        client,
        &ProduceSettings {
            idempotence: true,
            ..PLAIN
        },
    );
}

/// CreateTopics with partitions and a config, then the Metadata listing;
/// creating an existing topic is TOPIC_ALREADY_EXISTS.
pub fn admin_creates_and_lists_topics(client: Client) {
    let broker = Broker::start(&[]);
    let topics = json!([
        { "name": "orders", "partitions": 3, "configs": { "retention.ms": "3600000" } },
        { "name": "audit", "partitions": 1, "configs": {} },
    ]);
    let created = client.run("create_topics", broker.addr(), json!({ "topics": topics }));
    assert_eq!(
        created["errors"],
        json!({ "orders": null, "audit": null }),
        "{} create_topics",
        client.name()
    );
    lists_topics(client, &broker, &[("audit", 1), ("orders", 3)]);
    let again = client.run(
        "create_topics",
        broker.addr(),
        json!({ "topics": [{ "name": "orders", "partitions": 1, "configs": {} }] }),
    );
    assert_eq!(again["errors"], json!({ "orders": "TOPIC_ALREADY_EXISTS" }));
    lists_topics(client, &broker, &[("audit", 1), ("orders", 3)]);
}

/// For a client without a create API: topics made before the broker started.
pub fn lists_topics_made_elsewhere(client: Client) {
    let broker = Broker::start(&[TopicSpec::new("orders", 3), TopicSpec::new("audit", 1)]);
    lists_topics(client, &broker, &[("audit", 1), ("orders", 3)]);
}

fn lists_topics(client: Client, broker: &Broker, want: &[(&str, usize)]) {
    let listed = client.run("list_topics", broker.addr(), json!({}));
    let listed: BTreeMap<String, usize> = field(&listed, "topics");
    let want: BTreeMap<String, usize> = want.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    assert_eq!(listed, want, "{} list_topics", client.name());
}

/// The producer for scenarios that need explicit timestamps.
fn timestamping(client: Client) -> Client {
    if client.capabilities().timestamps {
        client
    } else {
        Client::ConfluentKafka
    }
}

/// ListOffsets by timestamp finds exactly the first record at or after it,
/// inside a batch and across batches.
pub fn offsets_for_times_exact_to_the_record(client: Client) {
    let topic = "times";
    let broker = Broker::start(&[TopicSpec::new(topic, 1)]);
    let base = now_ms() - 3_600_000;
    let caps = timestamping(client).capabilities();
    let specs = records::generate(caps, 40, 1, 11, base);
    // Four produce runs: at least four batches.
    for (run, chunk) in specs.chunks(10).enumerate() {
        produce(
            timestamping(client),
            &broker,
            topic,
            chunk.to_vec(),
            &[run as i64 * 10],
            &PLAIN,
        );
    }
    let mut timestamps = vec![base - 1_000];
    let mut want = vec![Some(0)];
    for (i, spec) in specs.iter().enumerate().step_by(3) {
        let ts = spec.timestamp.unwrap();
        timestamps.extend([ts - 1, ts]);
        want.extend([Some(i as i64), Some(i as i64)]);
    }
    let last = specs.last().unwrap().timestamp.unwrap();
    timestamps.extend([last, last + 1]);
    want.extend([Some(39), None]);
    let result = client.run(
        "offsets_for_times",
        broker.addr(),
        json!({ "topic": topic, "partition": 0, "timestamps": timestamps }),
    );
    let got: Vec<Option<i64>> = field(&result, "offsets");
    for ((ts, g), w) in timestamps.iter().zip(&got).zip(&want) {
        assert_eq!(g, w, "{} offset for timestamp {ts}", client.name());
    }
    assert_eq!(got.len(), want.len());
}

/// Seek to an offset, to the beginning, and to the end (where the next
/// record produced is the next one read).
pub fn seek_to_beginning_and_end(client: Client) {
    let topic = "seek";
    let broker = Broker::start(&[TopicSpec::new(topic, 1)]);
    let caps = client.capabilities();
    let specs = records::generate(caps, 10, 1, 13, now_ms());
    produce(client, &broker, topic, specs, &[0], &PLAIN);
    let append = records::generate(caps, 1, 1, 14, now_ms()).remove(0);
    let result = client.run(
        "seek",
        broker.addr(),
        json!({ "topic": topic, "partition": 0, "append": append }),
    );
    let offsets = |name: &str| result[name].as_i64();
    assert_eq!(offsets("low"), Some(0), "{result}");
    assert_eq!(offsets("high"), Some(10), "{result}");
    assert_eq!(offsets("last"), Some(9), "{result}");
    assert_eq!(offsets("after_beginning"), Some(0), "{result}");
    if client == Client::Kcat {
        assert_eq!(result["after_end"], Value::Null);
    } else {
        assert_eq!(offsets("after_end"), Some(10), "{result}");
    }
}

/// Records older than retention are deleted; a fetch below the new log start
/// gets OFFSET_OUT_OF_RANGE, and the client's reset policy applies:
/// `earliest` reads from the log start, `latest` moves to the end, `none`
/// surfaces the error.
pub fn expired_offset_is_out_of_range(client: Client, resets: &[&str]) {
    let topic = "expiring";
    let broker = Broker::start_with_config(
        &[TopicSpec {
            name: topic,
            partitions: 1,
            configs: &[("retention.ms", "3600000")],
        }],
        "retention_check_interval_ms = 50\n",
    );
    let producer = timestamping(client);
    let caps = producer.capabilities().readable_by(client);
    let two_days_ago = now_ms() - 2 * 86_400_000;
    produce(
        producer,
        &broker,
        topic,
        records::generate(caps, 10, 1, 17, two_days_ago),
        &[0],
        &PLAIN,
    );
    // Every segment expired: retention rolls and deletes them all.
    wire::wait_for_log_start(broker.addr(), topic, 0, 10);
    let fresh = produce(
        producer,
        &broker,
        topic,
        records::generate(caps, 5, 1, 18, now_ms()),
        &[10],
        &PLAIN,
    );
    assert_eq!(wire::offsets(broker.addr(), topic, 0), (10, 15));
    for reset in resets {
        let result = client.run(
            "out_of_range",
            broker.addr(),
            json!({ "topic": topic, "partition": 0, "offset": 0, "reset": reset, "count": 5 }),
        );
        match *reset {
            "earliest" => {
                let got: Vec<Consumed> = field(&result, "records");
                let want = records::expected(&fresh.specs, &[10], &got, fresh.from_ms, fresh.to_ms);
                assert_same(
                    &format!("{} after reset to earliest", client.name()),
                    &got,
                    &want,
                );
            }
            "latest" => assert_eq!(result["position"], json!(15), "{}: {result}", client.name()),
            "none" => {
                let error = result["error"].as_str().expect("an error").to_string();
                let plain: String = error
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .collect::<String>()
                    .to_ascii_lowercase();
                assert!(
                    plain.contains("offsetoutofrange"),
                    "{} reported {error:?}, not an out-of-range offset",
                    client.name()
                );
            }
            other => panic!("no reset policy {other}"),
        }
    }
}

/// Two members of one group split four partitions, read them, commit; after
/// a broker restart the commits are still there and a new pair of members
/// resumes from them, reading only the records produced since.
pub fn group_splits_partitions_and_resumes_after_restart(client: Client) {
    const PARTITIONS: i32 = 4;
    let topic = "grouped";
    let group = "compat-group";
    let mut broker = Broker::start(&[TopicSpec::new(topic, PARTITIONS)]);
    let caps = client.capabilities();

    let first = records::generate(caps, 40, PARTITIONS, 19, now_ms());
    let first = produce(client, &broker, topic, first, &[0; 4], &PLAIN);
    let want = records::expected(&first.specs, &[0; 4], &[], 0, 0);
    run_group(client, &broker, topic, group, &[10; 4], &want);
    assert_committed(client, &broker, topic, group, 10);

    broker.restart();
    assert_committed(client, &broker, topic, group, 10);
    let second = records::generate(caps, 20, PARTITIONS, 23, now_ms());
    let second = produce(client, &broker, topic, second, &[10; 4], &PLAIN);
    let want = records::expected(&second.specs, &[10; 4], &[], 0, 0);
    run_group(client, &broker, topic, group, &[15; 4], &want);
    assert_committed(client, &broker, topic, group, 15);
}

fn run_group(
    client: Client,
    broker: &Broker,
    topic: &str,
    group: &str,
    ends: &[i64],
    want: &[Consumed],
) {
    let result = client.run(
        "group",
        broker.addr(),
        json!({ "topic": topic, "group": group, "ends": ends }),
    );
    let members = result["members"].as_array().expect("members");
    assert_eq!(members.len(), 2);
    let mut assigned = BTreeSet::new();
    let mut seen = BTreeMap::new();
    for member in members {
        let partitions: Vec<i32> = field(member, "assigned");
        assert!(
            !partitions.is_empty(),
            "a member got no partition: {result}"
        );
        for p in partitions {
            assert!(assigned.insert(p), "partition {p} assigned twice: {result}");
        }
        for record in field::<Vec<Consumed>>(member, "records") {
            // A partition can be read twice around a rebalance; the same
            // offset must hold the same record.
            if let Some(earlier) = seen.insert((record.partition, record.offset), record.clone()) {
                assert_eq!(earlier, record, "one offset, two records");
            }
        }
    }
    assert_eq!(
        assigned,
        (0..ends.len() as i32).collect(),
        "the members' assignments cover the topic"
    );
    let got: Vec<Consumed> = seen.into_values().collect();
    assert_same(&format!("{} group members", client.name()), &got, want);
}

fn assert_committed(client: Client, broker: &Broker, topic: &str, group: &str, offset: i64) {
    let result = client.run(
        "committed",
        broker.addr(),
        json!({ "topic": topic, "group": group, "partitions": 4 }),
    );
    let got: BTreeMap<String, i64> = field(&result, "offsets");
    let want: BTreeMap<String, i64> = (0..4).map(|p| (p.to_string(), offset)).collect();
    assert_eq!(got, want, "{} committed offsets of {group}", client.name());
}
