//! The Rust client against a real broker on a real socket: admin, producer
//! (every acks setting and codec, keys, headers, timestamps, linger), the
//! fetcher's whole batches, offsets, group lag, and typed errors.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strata::broker::BrokerConfig;
use strata::client::partitioner::partition_for_key;
use strata::client::{
    Acks, Admin, ClientConfig, ClientError, Cluster, EARLIEST, FetchOptions, Fetcher, LATEST,
    Producer, ProducerConfig, ProducerRecord,
};
use strata::record::Compression;

struct Running {
    broker: support::InProcessBroker,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        auto_create_topics: false,
        ..BrokerConfig::default()
    };
    let broker = support::InProcessBroker::start_in(dir.path(), config).await;
    Running { broker, _dir: dir }
}

impl Running {
    async fn cluster(&self) -> Arc<Cluster> {
        let mut config = ClientConfig::new(&self.broker.addr.to_string());
        config.retries = 3;
        Cluster::connect(config).await.unwrap()
    }

    async fn stop(self) {
        self.broker.stop().await;
    }
}

/// (key, value, headers, timestamp) of every record from `offset` on.
async fn read_back(
    fetcher: &Fetcher,
    topic: &str,
    partition: i32,
    mut offset: i64,
    end: i64,
) -> Vec<(
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
    i64,
)> {
    let mut out = Vec::new();
    while offset < end {
        let fetched = fetcher
            .fetch(topic, partition, offset, 1 << 20)
            .await
            .unwrap();
        assert!(!fetched.records.is_empty(), "data below the high watermark");
        for batch in fetched.batches() {
            let batch = batch.unwrap();
            let records = batch.records(64 << 20).unwrap();
            for record in records.iter() {
                let record = record.unwrap();
                let at = record.offset;
                if at < offset {
                    continue;
                }
                out.push((
                    at,
                    record.key.map(<[u8]>::to_vec),
                    record.value.map(<[u8]>::to_vec),
                    record
                        .headers()
                        .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                        .collect(),
                    record.timestamp,
                ));
            }
        }
        offset = fetched.next_offset();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_with_every_acks_and_codec_then_fetch_back_byte_for_byte() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("events", 3, &[]).await.unwrap();
    assert_eq!(
        admin.list_topics().await.unwrap(),
        vec!["events".to_string()]
    );

    let fetcher = Fetcher::new(Arc::clone(&cluster), FetchOptions::default());
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut expected = Vec::new();
    let mut n = 0i64;
    for acks in [Acks::Leader, Acks::All, Acks::None] {
        for compression in codecs {
            let producer = Producer::new(
                Arc::clone(&cluster),
                ProducerConfig {
                    acks,
                    compression,
                    idempotent: false,
                    linger: Duration::from_millis(2),
                    ..ProducerConfig::default()
                },
            )
            .await
            .unwrap();
            let mut deliveries = Vec::new();
            for _ in 0..20 {
                n += 1;
                let record = ProducerRecord {
                    topic: "events".into(),
                    partition: Some(1),
                    key: Some(Bytes::from(format!("key-{n}"))),
                    value: (n % 7 != 0).then(|| Bytes::from(format!("value-{n}-{compression:?}"))),
                    headers: vec![
                        ("h".into(), Some(Bytes::from(format!("{n}")))),
                        ("null".into(), None),
                    ],
                    timestamp: Some(1_700_000_000_000 + n),
                };
                expected.push((
                    record.key.as_ref().map(|k| k.to_vec()),
                    record.value.as_ref().map(|v| v.to_vec()),
                    vec![
                        (b"h".to_vec(), Some(format!("{n}").into_bytes())),
                        (b"null".to_vec(), None),
                    ],
                    1_700_000_000_000 + n,
                ));
                deliveries.push(producer.send(record).await.unwrap());
            }
            for delivery in deliveries {
                let written = delivery.await.unwrap();
                assert_eq!(written.partition, 1);
                if acks == Acks::None {
                    assert_eq!(written.offset, -1);
                }
            }
            producer.close().await;
        }
    }
    // acks=0 gets no answer: wait until its records are visible.
    let mut end = 0;
    for _ in 0..200 {
        end = fetcher
            .list_offset("events", 1, LATEST)
            .await
            .unwrap()
            .unwrap();
        if end == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(end, n);
    let got = read_back(&fetcher, "events", 1, 0, end).await;
    let offsets: Vec<i64> = got.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..n).collect::<Vec<_>>());
    let got: Vec<_> = got
        .into_iter()
        .map(|(_, k, v, h, t)| (k, v, h, t))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(
        fetcher.list_offset("events", 1, EARLIEST).await.unwrap(),
        Some(0)
    );
    assert_eq!(
        fetcher
            .list_offset("events", 1, 1_700_000_000_000 + 31)
            .await
            .unwrap(),
        Some(30),
        "by timestamp, exact to the record"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_land_where_murmur2_says_and_linger_sends_a_lone_record() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("keyed", 4, &[]).await.unwrap();
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            acks: Acks::Leader,
            idempotent: false,
            linger: Duration::from_millis(20),
            batch_bytes: 1 << 30,
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    // A single record in a huge batch is still sent once linger passes.
    let lone = producer
        .send(ProducerRecord::new("keyed", Some(b"foobar"), b"v"))
        .await
        .unwrap()
        .await
        .unwrap();
    // (murmur2("foobar") & 0x7fffffff) % 4, from the Java client's vector.
    assert_eq!(lone.partition, ((-790_332_482i32) & 0x7fff_ffff) % 4);
    for key in ["21", "abc", "a-little-bit-long-string"] {
        let written = producer
            .send(ProducerRecord::new("keyed", Some(key.as_bytes()), b"v"))
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(
            written.partition,
            strata::client::partitioner::partition_for_key(key.as_bytes(), 4)
        );
    }
    producer.close().await;

    let described = admin.describe_topic("keyed").await.unwrap();
    let total: i64 = described.partitions.iter().map(|p| p.latest).sum();
    assert_eq!(total, 4);
    assert!(described.config.contains_key("retention.ms"));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_spread_over_every_partition_a_batch_at_a_time() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("keyless", 4, &[]).await.unwrap();
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            batch_bytes: 4 << 10,
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    let value = [b'v'; 100];
    let mut deliveries = Vec::new();
    for _ in 0..2_000 {
        let record = ProducerRecord::new("keyless", None, &value[..]);
        deliveries.push(producer.send(record).await.unwrap());
    }
    let mut partitions = Vec::new();
    for delivery in deliveries {
        partitions.push(delivery.await.unwrap().partition);
    }
    producer.close().await;
    // Sticky (KIP-794): a batch's worth of records goes to one partition,
    // then the records move on, so they reach every partition in runs of
    // about a batch (4 KiB holds some 30 of these records), whether the
    // batches fill or linger sends them first.
    let moves = partitions.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        (2_000 / 80..=2_000 / 16).contains(&moves),
        "{moves} moves between partitions for 2000 records, about 30 a batch"
    );
    let described = admin.describe_topic("keyless").await.unwrap();
    let counts: Vec<i64> = described.partitions.iter().map(|p| p.latest).collect();
    assert!(
        counts.iter().all(|&n| n > 0),
        "records per partition: {counts:?}"
    );
    assert_eq!(counts.iter().sum::<i64>(), 2_000);

    // Sent one at a time, each record is a batch of its own: the records
    // still move on after a batch's worth of bytes.
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            batch_bytes: 4 << 10,
            linger: Duration::ZERO,
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    let mut used = std::collections::BTreeSet::new();
    for _ in 0..300 {
        let record = ProducerRecord::new("keyless", None, &value[..]);
        used.insert(
            producer
                .send(record)
                .await
                .unwrap()
                .await
                .unwrap()
                .partition,
        );
    }
    producer.close().await;
    assert!(
        used.len() >= 2,
        "300 records one at a time all went to {used:?}"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed_with_what_they_concern() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("t", 1, &[]).await.unwrap();
    let exists = admin.create_topic("t", 1, &[]).await.unwrap_err();
    assert_eq!(exists.code(), Some(36), "{exists}");
    let bad_config = admin
        .create_topic("u", 1, &[("retention.ms".into(), "soon".into())])
        .await
        .unwrap_err();
    assert_eq!(bad_config.code(), Some(40), "{bad_config}");

    let fetcher = Fetcher::new(
        Arc::clone(&cluster),
        FetchOptions {
            min_bytes: 1,
            max_wait: Duration::from_millis(10),
            read_committed: false,
        },
    );
    match fetcher.fetch("t", 0, 5, 1024).await {
        Err(ClientError::OffsetOutOfRange {
            topic,
            partition,
            offset,
        }) => assert_eq!((topic.as_str(), partition, offset), ("t", 0, 5)),
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    match fetcher.fetch("missing", 0, 0, 1024).await {
        Err(ClientError::UnknownTopic(topic)) => assert_eq!(topic, "missing"),
        other => panic!("expected UnknownTopic, got {other:?}"),
    }
    let unreachable = Cluster::connect(ClientConfig::new("127.0.0.1:1")).await;
    assert!(matches!(unreachable, Err(ClientError::Unreachable { .. })));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_can_be_reset_and_their_lag_read() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("lagged", 2, &[]).await.unwrap();
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            acks: Acks::Leader,
            idempotent: false,
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    for i in 0..10 {
        let mut record = ProducerRecord::new("lagged", None, b"x");
        record.partition = Some(i % 2);
        producer.send(record).await.unwrap();
    }
    producer.close().await;
    admin
        .reset_group_offsets(
            "readers",
            &[("lagged".into(), 0, 2), ("lagged".into(), 1, 5)],
        )
        .await
        .unwrap();
    let lag = admin.group_lag("readers").await.unwrap();
    let summary: Vec<(i32, i64, i64, i64)> = lag
        .iter()
        .map(|l| (l.partition, l.committed, l.end, l.lag))
        .collect();
    assert_eq!(summary, vec![(0, 2, 5, 3), (1, 5, 5, 0)]);
    let groups = admin.list_groups().await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (groups[0].group_id.as_str(), groups[0].state.as_str()),
        ("readers", "Empty")
    );
    let described = admin.describe_group("readers").await.unwrap();
    assert!(described.members.is_empty());
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_producer_is_idempotent_and_numbers_its_records() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("numbered", 2, &[])
        .await
        .unwrap();
    let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default())
        .await
        .unwrap();
    let (producer_id, epoch) = producer.identity();
    assert!(producer_id >= 0 && epoch >= 0, "{producer_id}/{epoch}");
    let mut deliveries = Vec::new();
    for i in 0..50 {
        let mut record = ProducerRecord::new("numbered", None, format!("{i}").as_bytes());
        record.partition = Some(i % 2);
        deliveries.push(producer.send(record).await.unwrap());
    }
    let mut offsets = [Vec::new(), Vec::new()];
    for delivery in deliveries {
        let written = delivery.await.unwrap();
        offsets[written.partition as usize].push(written.offset);
    }
    producer.close().await;
    assert_eq!(offsets[0], (0..25).collect::<Vec<i64>>());
    assert_eq!(offsets[1], (0..25).collect::<Vec<i64>>());

    // The stored batches carry the producer id and dense sequences.
    let fetcher = Fetcher::new(Arc::clone(&cluster), FetchOptions::default());
    let fetched = fetcher.fetch("numbered", 0, 0, 1 << 20).await.unwrap();
    let mut next_sequence = 0;
    for batch in fetched.batches() {
        let header = *batch.unwrap().header();
        assert_eq!(header.producer_id, producer_id);
        assert_eq!(header.base_sequence, next_sequence);
        next_sequence += header.last_offset_delta + 1;
    }
    assert_eq!(next_sequence, 25);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_and_recreated_topic_is_found_again() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic("reborn", 2, &[]).await.unwrap();
    let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default())
        .await
        .unwrap();
    let send = |partition: i32, value: &'static str| {
        let mut record = ProducerRecord::new("reborn", None, value.as_bytes());
        record.partition = Some(partition);
        producer.send(record)
    };
    for value in ["old-0", "old-1", "old-2"] {
        send(0, value).await.unwrap().await.unwrap();
    }
    let fetcher = Fetcher::new(Arc::clone(&cluster), FetchOptions::default());
    let old_id = cluster.topic("reborn").await.unwrap().id;

    // Deleted and created again, with more partitions, by another client.
    let other = Admin::new(broker.cluster().await);
    other.delete_topic("reborn").await.unwrap();
    other.create_topic("reborn", 4, &[]).await.unwrap();

    // The producer learns of partition 3 and of the new partition 0
    // (sequence numbers start again there).
    let written = send(3, "new-3").await.unwrap().await.unwrap();
    assert_eq!((written.partition, written.offset), (3, 0));
    let written = send(0, "new-0").await.unwrap().await.unwrap();
    assert_eq!((written.partition, written.offset), (0, 0));

    // Partitions added later are found the same way.
    other.create_partitions("reborn", 6).await.unwrap();
    let written = send(5, "added-5").await.unwrap().await.unwrap();
    assert_eq!((written.partition, written.offset), (5, 0));
    let described = admin.describe_topic("reborn").await.unwrap();
    assert_eq!(described.partitions.len(), 6);
    assert_eq!(described.partitions[5].latest, 1);
    let sizes = admin.partition_sizes("reborn").await.unwrap();
    assert_eq!(sizes.len(), 6);
    assert!(sizes[&5] > 0 && sizes[&1] == 0, "{sizes:?}");
    producer.close().await;
    assert_ne!(cluster.topic("reborn").await.unwrap().id, old_id);

    // Offsets of the old topic are out of range in the new one.
    assert!(matches!(
        fetcher.fetch("reborn", 0, 2, 1 << 20).await,
        Err(ClientError::OffsetOutOfRange { offset: 2, .. })
    ));
    let values = read_back(&fetcher, "reborn", 0, 0, 1).await;
    assert_eq!(values[0].2.as_deref(), Some(&b"new-0"[..]));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_record_follows_the_partition_count_once_the_metadata_changes() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("grows", 1, &[])
        .await
        .unwrap();
    let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default())
        .await
        .unwrap();
    // A key murmur2 puts past partition 0 once there are three.
    let key = (0..)
        .map(|n| format!("key-{n}"))
        .find(|key| partition_for_key(key.as_bytes(), 3) != 0)
        .unwrap();
    let send = || producer.send(ProducerRecord::new("grows", Some(key.as_bytes()), b"v"));
    // The first send asks for the topic's metadata; the second finds its
    // partition count and keeps it beside the topic's queues.
    for _ in 0..2 {
        let written = send().await.unwrap().await.unwrap();
        assert_eq!(written.partition, 0);
    }

    // Partitions added by another client; once this client's metadata
    // changes, the count the producer kept for the topic is read again.
    Admin::new(broker.cluster().await)
        .create_partitions("grows", 3)
        .await
        .unwrap();
    cluster.invalidate("grows").await;
    let written = send().await.unwrap().await.unwrap();
    assert_eq!(written.partition, partition_for_key(key.as_bytes(), 3));
    producer.close().await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_buffer_makes_send_wait_and_loses_nothing() {
    let broker = start().await;
    let cluster = broker.cluster().await;
    Admin::new(Arc::clone(&cluster))
        .create_topic("narrow", 1, &[])
        .await
        .unwrap();
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            // Room for about four records at a time; one larger than the
            // whole buffer still goes, alone.
            buffer_bytes: 4 << 10,
            batch_bytes: 2 << 10,
            linger: Duration::from_secs(10),
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    let mut deliveries = Vec::new();
    for i in 0..200u32 {
        let value = if i == 100 {
            vec![b'x'; 10_000]
        } else {
            vec![i as u8; 1000]
        };
        let record = ProducerRecord::new("narrow", None, &value);
        // With a 10 s linger, only the buffer limit sends batches early.
        let sent = tokio::time::timeout(Duration::from_secs(5), producer.send(record))
            .await
            .expect("send waits for room, not for linger")
            .unwrap();
        deliveries.push(sent);
    }
    // The first records went out under buffer pressure, long before the
    // 10 s linger.
    let first = deliveries.remove(0);
    let first = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("sent early to make room");
    assert_eq!(first.unwrap().offset, 0);
    producer.flush().await;
    for (i, delivery) in deliveries.into_iter().enumerate() {
        assert_eq!(delivery.await.unwrap().offset, i as i64 + 1);
    }
    producer.close().await;
    broker.stop().await;
}
