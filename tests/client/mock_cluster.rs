//! strata's client against a cluster of three brokers: librdkafka's mock
//! cluster (tests/support/mock_cluster.rs), where Produce and Fetch are
//! served only by a partition's leader and group and transaction requests
//! only by their coordinator.
//!
//! Leaders move mid-stream, a broker goes down and comes back, retriable
//! errors and dropped connections are injected into every API the client
//! sends, coordinators move; each test then reads everything back and
//! compares it with what was sent, partition by partition: nothing lost,
//! nothing doubled, the order kept. Waits have deadlines; nothing is timed.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, MetadataRequest};
use strata::client::error::codes;
use strata::client::{
    Admin, ClientConfig, Cluster, Connection, Consumer, ConsumerConfig, ConsumerRecord,
    DeliveryFuture, FetchOptions, Fetcher, LATEST, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, TopicPartition,
};
use support::MockCluster;
use support::mock_cluster::{Coordinator, DROP_CONNECTION};
use support::wait::Deadline;

const BROKERS: i32 = 3;
/// How long any one wait in these tests may take; it guards against a
/// hang and measures nothing.
const WAIT: Duration = Duration::from_secs(30);

/// Values sent (or read), by partition, in order.
type Values = BTreeMap<i32, Vec<String>>;

fn client_config(mock: &MockCluster) -> ClientConfig {
    let mut config = ClientConfig::new(mock.bootstrap());
    config.request_timeout = Duration::from_secs(10);
    // Enough to outlast a broker the test takes down and brings back; the
    // backoff stays short so retries are quick.
    config.retries = 40;
    config.retry_backoff = Duration::from_millis(20);
    config
}

async fn connect(mock: &MockCluster) -> Arc<Cluster> {
    Cluster::connect(client_config(mock)).await.unwrap()
}

/// An idempotent producer (acks=all) with small batches, so a stream is
/// many batches with several in flight per partition.
fn producer_config() -> ProducerConfig {
    ProducerConfig {
        batch_bytes: 1 << 10,
        linger: Duration::from_millis(1),
        max_in_flight: 5,
        ..ProducerConfig::default()
    }
}

/// Gives `partition` of `topic` to broker `partition % 3 + 1 + shift`.
fn spread_leaders(mock: &MockCluster, topic: &str, partitions: i32, shift: i32) {
    for partition in 0..partitions {
        mock.set_leader(topic, partition, (partition + shift) % BROKERS + 1);
    }
}

/// Sends `count` records round-robin over the partitions, numbered from
/// what `sent` already holds, and notes them there.
async fn send(
    producer: &Producer,
    topic: &str,
    partitions: i32,
    count: usize,
    sent: &mut Values,
) -> Vec<(i32, DeliveryFuture)> {
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let partition = (i % partitions as usize) as i32;
        let values = sent.entry(partition).or_default();
        let value = format!("{topic}/{partition}/{:05}", values.len());
        values.push(value.clone());
        let record = ProducerRecord {
            topic: topic.into(),
            partition: Some(partition),
            value: Some(Bytes::from(value)),
            ..ProducerRecord::default()
        };
        deliveries.push((partition, producer.send(record).await.unwrap()));
    }
    deliveries
}

async fn delivered(deliveries: Vec<(i32, DeliveryFuture)>) {
    for (partition, delivery) in deliveries {
        if let Err(error) = delivery.await {
            panic!("a record for partition {partition} was not delivered: {error}");
        }
    }
}

fn fetcher(cluster: &Arc<Cluster>) -> Fetcher {
    Fetcher::new(
        Arc::clone(cluster),
        FetchOptions {
            min_bytes: 1,
            max_wait: Duration::from_millis(50),
            read_committed: false,
        },
    )
}

/// Appends the values of the data records in `fetched` from its offset on.
fn collect(fetched: &strata::client::Fetched, out: &mut Vec<String>) {
    for batch in fetched.visible_batches() {
        let batch = batch.unwrap();
        for record in batch.records(1 << 20).unwrap().iter() {
            let record = record.unwrap();
            if record.offset >= fetched.offset {
                out.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
            }
        }
    }
}

/// Every value in `partition` of `topic`, from the start to the end.
async fn read_partition(cluster: &Arc<Cluster>, topic: &str, partition: i32) -> Vec<String> {
    let fetcher = fetcher(cluster);
    let deadline = Deadline::after(format!("reading {topic}/{partition}"), WAIT);
    let mut values = Vec::new();
    let mut offset = 0;
    loop {
        deadline.check("");
        let fetched = fetcher
            .fetch(topic, partition, offset, 1 << 20)
            .await
            .unwrap();
        collect(&fetched, &mut values);
        offset = fetched.next_offset();
        if offset >= fetched.high_watermark {
            return values;
        }
    }
}

async fn read_all(cluster: &Arc<Cluster>, topic: &str, partitions: i32) -> Values {
    let mut all = Values::new();
    for partition in 0..partitions {
        all.insert(partition, read_partition(cluster, topic, partition).await);
    }
    all
}

/// Reads every partition of `topic` with one fetch per leader at a time,
/// while the test moves things around, until `total` values have come.
async fn follow(cluster: Arc<Cluster>, topic: String, partitions: i32, total: usize) -> Values {
    let fetcher = fetcher(&cluster);
    let deadline = Deadline::after(format!("a reader following {topic}"), WAIT);
    let mut positions: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
    let mut values = Values::new();
    while values.values().map(Vec::len).sum::<usize>() < total {
        let read: usize = values.values().map(Vec::len).sum();
        deadline.check(format_args!(": {read} of {total} read"));
        let wants: Vec<(String, i32, i64)> = positions
            .iter()
            .map(|(p, at)| (topic.clone(), *p, *at))
            .collect();
        for (_, partition, result) in fetcher.fetch_many(&wants, 1 << 16).await {
            match result {
                Ok(fetched) => {
                    collect(&fetched, values.entry(partition).or_default());
                    positions.insert(partition, fetched.next_offset());
                }
                Err(error) if error.is_retriable() => {}
                Err(error) => panic!("following {topic}/{partition}: {error}"),
            }
        }
    }
    values
}

/// Fails naming the first partition whose values differ.
fn assert_same(what: &str, got: &Values, sent: &Values) {
    for (partition, expected) in sent {
        let got = got.get(partition).map_or(&[][..], Vec::as_slice);
        if got == expected.as_slice() {
            continue;
        }
        let first = got.iter().zip(expected).position(|(a, b)| a != b);
        panic!(
            "{what}: partition {partition} holds {} values where {} were sent; first \
             difference at {first:?} (read {:?}, sent {:?})",
            got.len(),
            expected.len(),
            first.map(|i| &got[i]),
            first.map(|i| &expected[i]),
        );
    }
    let extra: Vec<_> = got.keys().filter(|p| !sent.contains_key(p)).collect();
    assert!(
        extra.is_empty(),
        "{what}: values in partitions {extra:?} nobody sent to"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produced_and_fetched_records_survive_leaders_moving_mid_stream() {
    const TOPIC: &str = "moving";
    const PARTITIONS: i32 = 6;
    const ROUNDS: i32 = 6;
    const PER_ROUND: usize = 300;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    mock.track_requests();
    let cluster = connect(&mock).await;
    let producer = Producer::new(Arc::clone(&cluster), producer_config())
        .await
        .unwrap();
    let reader = tokio::spawn(follow(
        Arc::clone(&cluster),
        TOPIC.to_string(),
        PARTITIONS,
        ROUNDS as usize * PER_ROUND,
    ));
    let mut sent = Values::new();
    for round in 1..=ROUNDS {
        let deliveries = send(&producer, TOPIC, PARTITIONS, PER_ROUND, &mut sent).await;
        // This round's records are still queued or in flight to the leaders
        // being replaced. They are all answered before the next move: a
        // leader given back its partition while batches from its earlier
        // term are in flight would take later ones ahead of earlier ones
        // it refused, which Kafka's sequence check prevents and the mock
        // (checking none for a producer without a transactional id) does
        // not. The transactional test moves leaders without waiting.
        spread_leaders(&mock, TOPIC, PARTITIONS, round);
        producer.flush().await;
        delivered(deliveries).await;
    }
    let followed = reader.await.unwrap();
    assert_same("the reader following the moves", &followed, &sent);
    assert_same(
        "the partitions read back",
        &read_all(&cluster, TOPIC, PARTITIONS).await,
        &sent,
    );
    let requests = mock.requests();
    for broker in 1..=BROKERS {
        for api in [ApiKey::Produce, ApiKey::Fetch] {
            assert!(
                requests.get(&(broker, api as i16)).is_some_and(|n| *n > 0),
                "broker {broker} led partitions but got no {api:?} request: {requests:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_going_down_and_coming_back_loses_nothing() {
    const TOPIC: &str = "failover";
    const PARTITIONS: i32 = 6;
    const DOWN: i32 = 2;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    let led_by_down = |partition: i32| partition % BROKERS + 1 == DOWN;
    let cluster = connect(&mock).await;
    let producer = Producer::new(Arc::clone(&cluster), producer_config())
        .await
        .unwrap();
    let mut sent = Values::new();
    let before = send(&producer, TOPIC, PARTITIONS, 300, &mut sent).await;
    producer.flush().await;
    delivered(before).await;

    mock.track_requests();
    mock.broker_down(DOWN);
    let waiting: Vec<(i32, tokio::task::JoinHandle<_>)> =
        send(&producer, TOPIC, PARTITIONS, 300, &mut sent)
            .await
            .into_iter()
            .map(|(partition, delivery)| (partition, tokio::spawn(delivery)))
            .collect();
    let others_done = || {
        waiting
            .iter()
            .filter(|(p, _)| !led_by_down(*p))
            .all(|(_, task)| task.is_finished())
    };
    support::wait_for(
        "the partitions of the brokers still up to take their records",
        WAIT,
        others_done,
    )
    .await;
    // The stranded records are retried, each retry asking the metadata for
    // a leader again, while their leader stays down.
    let deadline = Deadline::after("the producer to ask for the leaders again", WAIT);
    let mut asked = 0;
    while asked < 3 {
        deadline.check(format_args!(": {asked} metadata requests"));
        asked += count(&mock.requests(), ApiKey::Metadata);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stranded: Vec<i32> = waiting
        .iter()
        .filter(|(p, task)| led_by_down(*p) && task.is_finished())
        .map(|(p, _)| *p)
        .collect();
    assert!(
        stranded.is_empty(),
        "records for partitions {stranded:?} were answered while their leader was down"
    );
    // Readers of the partitions still led carry on meanwhile.
    for partition in (0..PARTITIONS).filter(|p| !led_by_down(*p)) {
        assert_eq!(
            read_partition(&cluster, TOPIC, partition).await,
            sent[&partition],
            "partition {partition} while broker {DOWN} is down"
        );
    }

    mock.broker_up(DOWN);
    for (partition, task) in waiting {
        if let Err(error) = task.await.unwrap() {
            panic!("partition {partition} lost a record: {error}");
        }
    }
    assert_same(
        "the partitions read back",
        &read_all(&cluster, TOPIC, PARTITIONS).await,
        &sent,
    );
}

/// Requests of `api` the mock counted, by any broker.
/// Waits until `broker` gets a request of `api` (counted from when the
/// mock's requests were last read).
async fn requested(mock: &MockCluster, broker: i32, api: ApiKey, what: &str) {
    let deadline = Deadline::after(what, WAIT);
    while !mock.requests().contains_key(&(broker, api as i16)) {
        deadline.check("");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn count(requests: &BTreeMap<(i32, i16), usize>, api: ApiKey) -> usize {
    requests
        .iter()
        .filter(|((_, key), _)| *key == api as i16)
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_metadata_produce_fetch_and_list_offsets_errors_are_retried() {
    const TOPIC: &str = "injected";
    const PARTITIONS: i32 = 3;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    mock.track_requests();
    let cluster = connect(&mock).await;
    // One batch in flight per partition: the mock checks no sequence
    // numbers of a producer without a transactional id, so a batch beside
    // one refused by an injected error would be written ahead of it.
    // (The transactional test keeps five in flight, sequence-checked.)
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            max_in_flight: 1,
            ..producer_config()
        },
    )
    .await
    .unwrap();
    let mut sent = Values::new();

    // Metadata: the topic's leader is being elected (until the client has
    // asked twice), then two answers are lost with their connections.
    mock.set_topic_error(TOPIC, codes::LEADER_NOT_AVAILABLE);
    let election = async {
        let deadline = Deadline::after("metadata asked again during the election", WAIT);
        let mut asked = 0;
        while asked < 2 {
            deadline.check("");
            asked += count(&mock.requests(), ApiKey::Metadata);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        mock.set_topic_error(TOPIC, codes::NONE);
    };
    let (first, ()) = tokio::join!(send(&producer, TOPIC, PARTITIONS, 1, &mut sent), election);
    delivered(first).await;
    cluster.invalidate(TOPIC).await;
    mock.push_errors(ApiKey::Metadata, &[DROP_CONNECTION, DROP_CONNECTION]);

    let produce_errors = [
        codes::NOT_LEADER_OR_FOLLOWER,
        codes::NOT_ENOUGH_REPLICAS,
        DROP_CONNECTION,
        codes::LEADER_NOT_AVAILABLE,
        codes::REQUEST_TIMED_OUT,
        codes::UNKNOWN_TOPIC_OR_PARTITION,
    ];
    mock.push_errors(ApiKey::Produce, &produce_errors);
    let deliveries = send(&producer, TOPIC, PARTITIONS, 299, &mut sent).await;
    producer.flush().await;
    delivered(deliveries).await;

    let fetch_errors = [
        codes::NOT_LEADER_OR_FOLLOWER,
        codes::UNKNOWN_TOPIC_OR_PARTITION,
        DROP_CONNECTION,
        codes::FENCED_LEADER_EPOCH,
    ];
    mock.push_errors(ApiKey::Fetch, &fetch_errors);
    assert_same(
        "the partitions read back",
        &read_all(&cluster, TOPIC, PARTITIONS).await,
        &sent,
    );

    mock.push_errors(
        ApiKey::ListOffsets,
        &[codes::NOT_LEADER_OR_FOLLOWER, DROP_CONNECTION],
    );
    let fetcher = fetcher(&cluster);
    for partition in 0..PARTITIONS {
        let end = fetcher.list_offset(TOPIC, partition, LATEST).await.unwrap();
        assert_eq!(end, Some(sent[&partition].len() as i64));
    }

    let requests = mock.requests();
    for (api, injected) in [
        (ApiKey::Metadata, 2),
        (ApiKey::Produce, produce_errors.len()),
        (ApiKey::Fetch, fetch_errors.len()),
        (ApiKey::ListOffsets, 2),
    ] {
        assert!(
            count(&requests, api) > injected,
            "{api:?}: {injected} injected errors but only {} requests",
            count(&requests, api)
        );
    }
}

/// broker id → `host:port`, from the metadata.
async fn broker_addrs(cluster: &Arc<Cluster>) -> BTreeMap<i32, String> {
    cluster.refresh(&[]).await.unwrap();
    let mut addrs = BTreeMap::new();
    for node in cluster.known_brokers().await {
        let connection = cluster.connection(node).await.unwrap();
        addrs.insert(node, connection.addr().to_string());
    }
    addrs
}

/// The broker coordinating `group` now, and one that does not.
async fn coordinator_and_another(cluster: &Arc<Cluster>, group: &str) -> (i32, i32) {
    let addr = Admin::new(Arc::clone(cluster))
        .coordinator(group)
        .await
        .unwrap()
        .addr()
        .to_string();
    let addrs = broker_addrs(cluster).await;
    let current = *addrs
        .iter()
        .find(|(_, a)| **a == addr)
        .unwrap_or_else(|| panic!("the coordinator {addr} is not among {addrs:?}"))
        .0;
    (current, current % BROKERS + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_survive_coordinator_errors_and_a_coordinator_move() {
    const TOPIC: &str = "committed";
    const GROUP: &str = "assigned";
    const PARTITIONS: i32 = 3;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    let cluster = connect(&mock).await;
    let producer = Producer::new(Arc::clone(&cluster), producer_config())
        .await
        .unwrap();
    let mut sent = Values::new();
    delivered(send(&producer, TOPIC, PARTITIONS, 90, &mut sent).await).await;

    let mut consumer = Consumer::new(
        Arc::clone(&cluster),
        ConsumerConfig {
            group_id: Some(GROUP.into()),
            offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    );
    let assigned: Vec<TopicPartition> = (0..PARTITIONS).map(|p| (TOPIC.to_string(), p)).collect();
    consumer.assign(&assigned);
    mock.push_errors(
        ApiKey::FindCoordinator,
        &[codes::COORDINATOR_NOT_AVAILABLE, DROP_CONNECTION],
    );
    mock.push_errors(
        ApiKey::OffsetFetch,
        &[codes::COORDINATOR_LOAD_IN_PROGRESS, codes::NOT_COORDINATOR],
    );
    let read = poll_values(&mut consumer, 90).await;
    assert_same("consumed", &read, &sent);

    mock.push_errors(
        ApiKey::OffsetCommit,
        &[
            codes::NOT_COORDINATOR,
            codes::COORDINATOR_LOAD_IN_PROGRESS,
            DROP_CONNECTION,
        ],
    );
    consumer.commit().await.unwrap();
    let (current, next) = coordinator_and_another(&cluster, GROUP).await;
    mock.set_coordinator(Coordinator::Group, GROUP, next);
    let ends: BTreeMap<TopicPartition, Option<i64>> = assigned
        .iter()
        .map(|tp| (tp.clone(), Some(sent[&tp.1].len() as i64)))
        .collect();
    assert_eq!(
        consumer.committed().await.unwrap(),
        ends,
        "the commits made at broker {current}, read from broker {next}"
    );

    delivered(send(&producer, TOPIC, PARTITIONS, 30, &mut sent).await).await;
    poll_values(&mut consumer, 30).await;
    consumer.commit().await.unwrap();
    let (now, _) = coordinator_and_another(&cluster, GROUP).await;
    assert_eq!(now, next, "the group's coordinator after the move");
    assert_eq!(
        committed(&cluster, GROUP, TOPIC, PARTITIONS).await,
        ends_of(&sent)
    );
}

/// The offset `group` committed for each partition of `topic`, asked for
/// by name (the mock cannot list a group's commits: OffsetFetch for every
/// topic comes back with a null list).
async fn committed(
    cluster: &Arc<Cluster>,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Option<i64>> {
    let mut reader = Consumer::new(
        Arc::clone(cluster),
        ConsumerConfig {
            group_id: Some(group.into()),
            ..ConsumerConfig::default()
        },
    );
    let assigned: Vec<TopicPartition> = (0..partitions).map(|p| (topic.to_string(), p)).collect();
    reader.assign(&assigned);
    reader
        .committed()
        .await
        .unwrap()
        .into_iter()
        .map(|((_, partition), offset)| (partition, offset))
        .collect()
}

/// Each partition's end offset after what was sent.
fn ends_of(sent: &Values) -> BTreeMap<i32, Option<i64>> {
    sent.iter()
        .map(|(partition, values)| (*partition, Some(values.len() as i64)))
        .collect()
}

/// Polls until `count` records came; their values by partition.
async fn poll_values(consumer: &mut Consumer, count: usize) -> Values {
    let deadline = Deadline::after(format!("{count} records"), WAIT);
    let mut values = Values::new();
    let mut got = 0;
    while got < count {
        deadline.check(format_args!(": {got} so far"));
        for record in consumer.poll(Duration::from_millis(100)).await.unwrap() {
            values
                .entry(record.partition)
                .or_default()
                .push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
            got += 1;
        }
    }
    values
}

/// A group member polling in a task of its own, committing after every
/// poll that returned records.
struct GroupMember {
    state: Arc<Mutex<MemberState>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Consumer>,
}

#[derive(Default)]
struct MemberState {
    assigned: Vec<TopicPartition>,
    generation: Option<i32>,
    failed_commits: Vec<String>,
}

impl GroupMember {
    /// `consumed` is shared by the members, so it holds each partition's
    /// records in the order they were read, whoever read them.
    fn spawn(
        mut consumer: Consumer,
        topic: &'static str,
        consumed: Arc<Mutex<Vec<ConsumerRecord>>>,
    ) -> Self {
        consumer.subscribe(&[topic]).unwrap();
        let state = Arc::new(Mutex::new(MemberState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (published, stopping) = (Arc::clone(&state), Arc::clone(&stop));
        let task = tokio::spawn(async move {
            while !stopping.load(Ordering::Relaxed) {
                let records = consumer.poll(Duration::from_millis(100)).await.unwrap();
                let read = !records.is_empty();
                consumed.lock().unwrap().extend(records);
                let failed = if read {
                    consumer.commit().await.err()
                } else {
                    None
                };
                let mut state = published.lock().unwrap();
                state.assigned = consumer.assignment();
                state.generation = consumer.generation().map(|(generation, _)| generation);
                state.failed_commits.extend(failed.map(|e| e.to_string()));
            }
            consumer
        });
        Self { state, stop, task }
    }

    fn assigned(&self) -> Vec<TopicPartition> {
        self.state.lock().unwrap().assigned.clone()
    }

    fn generation(&self) -> Option<i32> {
        self.state.lock().unwrap().generation
    }

    fn failed_commits(&self) -> Vec<String> {
        self.state.lock().unwrap().failed_commits.clone()
    }

    async fn stop(self) -> Consumer {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// Waits until the members are in one generation, newer than `after`, and
/// share every partition between them; returns that generation.
async fn stable(members: &[&GroupMember], partitions: i32, after: i32, what: &str) -> i32 {
    let deadline = Deadline::after(what.to_string(), WAIT);
    loop {
        let generations: BTreeSet<Option<i32>> = members.iter().map(|m| m.generation()).collect();
        let assigned: Vec<Vec<TopicPartition>> = members.iter().map(|m| m.assigned()).collect();
        let total: usize = assigned.iter().map(Vec::len).sum();
        let union: BTreeSet<&TopicPartition> = assigned.iter().flatten().collect();
        if let [Some(generation)] = generations.iter().copied().collect::<Vec<_>>()[..]
            && generation > after
            && assigned.iter().all(|a| !a.is_empty())
            && total == partitions as usize
            && union.len() == partitions as usize
        {
            return generation;
        }
        deadline.check(format_args!(
            ": generations {generations:?}, assigned {assigned:?}"
        ));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The values `consumed` holds, by partition, in the order read.
fn values_of(consumed: &Mutex<Vec<ConsumerRecord>>) -> Values {
    let mut values = Values::new();
    for record in consumed.lock().unwrap().iter() {
        values
            .entry(record.partition)
            .or_default()
            .push(String::from_utf8(record.value.clone().unwrap().to_vec()).unwrap());
    }
    values
}

async fn wait_consumed(consumed: &Mutex<Vec<ConsumerRecord>>, total: usize) {
    let deadline = Deadline::after(format!("the group to read {total} records"), WAIT);
    loop {
        let got = consumed.lock().unwrap().len();
        if got >= total {
            return;
        }
        deadline.check(format_args!(": {got} read"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the answers pushed for `broker` and `api` are all used.
async fn pushed_answers_used(mock: &MockCluster, broker: i32, api: ApiKey) {
    let deadline = Deadline::after(format!("the answers pushed for {api:?} to be used"), WAIT);
    loop {
        let left = mock.broker_errors_left(broker, api);
        if left == 0 {
            return;
        }
        deadline.check(format_args!(": {left} left"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The mock ends a rebalance as soon as the leader's SyncGroup arrives,
/// and refuses (INVALID_REQUEST) a follower's that comes after it; Kafka
/// answers that one with its assignment. So when a member joins a running
/// group, the answer to the second JoinGroup at the coordinator, the
/// leader's rejoin, is held back a little: the new member, a follower,
/// syncs first.
fn leader_syncs_last(mock: &MockCluster, coordinator: i32) {
    mock.push_broker_errors(
        coordinator,
        ApiKey::JoinGroup,
        &[
            (codes::NONE, Duration::ZERO),
            (codes::NONE, Duration::from_secs(1)),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_a_group_through_injected_errors_and_a_coordinator_move() {
    const TOPIC: &str = "shared";
    const GROUP: &str = "pair";
    const PARTITIONS: i32 = 6;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    mock.set_initial_rebalance_delay(Duration::from_millis(100));
    mock.offer_group_versions_it_parses();
    let cluster = connect(&mock).await;
    let consumer = || {
        Consumer::new(
            Arc::clone(&cluster),
            ConsumerConfig {
                group_id: Some(GROUP.into()),
                offset_reset: OffsetReset::Earliest,
                // The mock holds a rebalance of a running group for the
                // session timeout less a second.
                session_timeout: Duration::from_secs(3),
                heartbeat_interval: Duration::from_millis(200),
                rebalance_timeout: Duration::from_secs(10),
                ..ConsumerConfig::default()
            },
        )
    };
    let consumed: Arc<Mutex<Vec<ConsumerRecord>>> = Arc::default();

    // The first member joins through a coordinator that is loading, not
    // available, elsewhere, and a dropped connection; then a heartbeat is
    // told the coordinator moved: the member finds it again and goes on in
    // its generation, as Kafka's clients do.
    mock.push_errors(
        ApiKey::FindCoordinator,
        &[codes::COORDINATOR_LOAD_IN_PROGRESS],
    );
    mock.push_errors(
        ApiKey::JoinGroup,
        &[codes::COORDINATOR_NOT_AVAILABLE, codes::NOT_COORDINATOR],
    );
    mock.push_errors(ApiKey::SyncGroup, &[DROP_CONNECTION]);
    let first = GroupMember::spawn(consumer(), TOPIC, Arc::clone(&consumed));
    let joined = stable(
        &[&first],
        PARTITIONS,
        0,
        "the first member to hold every partition",
    )
    .await;
    let (coordinator, elsewhere) = coordinator_and_another(&cluster, GROUP).await;
    mock.push_broker_errors(
        coordinator,
        ApiKey::Heartbeat,
        &[(codes::NOT_COORDINATOR, Duration::ZERO)],
    );
    mock.track_requests();
    pushed_answers_used(&mock, coordinator, ApiKey::Heartbeat).await;
    mock.requests();
    requested(
        &mock,
        coordinator,
        ApiKey::Heartbeat,
        "a heartbeat after the refused one",
    )
    .await;
    assert_eq!(
        first.generation(),
        Some(joined),
        "a heartbeat refused by a coordinator that moved costs no rebalance"
    );
    let alone = joined;

    leader_syncs_last(&mock, coordinator);
    let second = GroupMember::spawn(consumer(), TOPIC, Arc::clone(&consumed));
    let pair = stable(&[&first, &second], PARTITIONS, alone, "the pair to share").await;

    // With the group settled: records, and commits that meet a coordinator
    // elsewhere and one still loading.
    let producer = Producer::new(Arc::clone(&cluster), producer_config())
        .await
        .unwrap();
    let mut sent = Values::new();
    mock.push_errors(
        ApiKey::OffsetCommit,
        &[codes::NOT_COORDINATOR, codes::COORDINATOR_LOAD_IN_PROGRESS],
    );
    delivered(send(&producer, TOPIC, PARTITIONS, 600, &mut sent).await).await;
    wait_consumed(&consumed, 600).await;
    assert_same("read by the pair", &values_of(&consumed), &sent);
    for member in [&first, &second] {
        assert_eq!(
            member.generation(),
            Some(pair),
            "no rebalance while reading"
        );
    }

    // The second member leaves; the coordinator moves. The first finds it
    // again and heartbeats there, still a member of its generation (the
    // group's state moves with its coordinator: no rebalance, as with
    // Kafka's clients), and what the pair committed at the old one is
    // where the group stands at the new one.
    second.stop().await.close().await.unwrap();
    let moved = stable(
        &[&first],
        PARTITIONS,
        pair,
        "the first member to take all back",
    )
    .await;
    mock.track_requests();
    mock.set_coordinator(Coordinator::Group, GROUP, elsewhere);
    requested(
        &mock,
        elsewhere,
        ApiKey::Heartbeat,
        "a heartbeat at the new coordinator",
    )
    .await;
    assert_eq!(
        first.generation(),
        Some(moved),
        "the coordinator's move costs no rebalance"
    );
    assert_eq!(
        committed(&cluster, GROUP, TOPIC, PARTITIONS).await,
        ends_of(&sent),
        "the commits made at broker {coordinator}, read at broker {elsewhere}"
    );

    // A new member joins at the new coordinator; both read on from the
    // commits.
    leader_syncs_last(&mock, elsewhere);
    let third = GroupMember::spawn(consumer(), TOPIC, Arc::clone(&consumed));
    let shared = stable(
        &[&first, &third],
        PARTITIONS,
        moved,
        "the new pair to share",
    )
    .await;
    delivered(send(&producer, TOPIC, PARTITIONS, 600, &mut sent).await).await;
    wait_consumed(&consumed, 1200).await;
    assert_same("read by the group", &values_of(&consumed), &sent);
    for member in [&first, &third] {
        assert_eq!(member.failed_commits(), Vec::<String>::new());
        assert_eq!(
            member.generation(),
            Some(shared),
            "no rebalance while reading"
        );
    }
    // A member commits after the poll that read the records: the last
    // commits may still be on their way when everything was consumed.
    let ends = ends_of(&sent);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = committed(&cluster, GROUP, TOPIC, PARTITIONS).await;
        if now == ends || std::time::Instant::now() > deadline {
            assert_eq!(now, ends, "the group's commits, 30 s after the last read");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for member in [first, third] {
        member.stop().await.close().await.unwrap();
    }
}

/// A member that gives a join up unfinished (its poll dropped: an app
/// stopping mid-rebalance) leaves on a connection of its own: a
/// coordinator answers a connection's requests in order, and may hold a
/// JoinGroup for the whole rebalance, so a LeaveGroup sent behind it would
/// wait as long, and the group would wait out the member's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_gives_up_a_held_join_leaves_without_waiting_for_it() {
    const TOPIC: &str = "held";
    const GROUP: &str = "holding";
    /// Far longer than the test waits for the member to leave.
    const HELD: Duration = Duration::from_secs(120);
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, 2)]);
    mock.offer_group_versions_it_parses();
    mock.set_initial_rebalance_delay(Duration::from_millis(100));
    let cluster = connect(&mock).await;
    let (coordinator, _) = coordinator_and_another(&cluster, GROUP).await;
    let mut consumer = Consumer::new(
        Arc::clone(&cluster),
        ConsumerConfig {
            group_id: Some(GROUP.into()),
            offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    );
    consumer.subscribe(&[TOPIC]).unwrap();
    let deadline = Deadline::after("the member to join", WAIT);
    while consumer.generation().is_none() {
        deadline.check("");
        consumer.poll(Duration::from_millis(100)).await.unwrap();
    }
    // Its next heartbeat is told of a rebalance; the JoinGroup it rejoins
    // with is held.
    mock.push_broker_errors(
        coordinator,
        ApiKey::Heartbeat,
        &[(codes::REBALANCE_IN_PROGRESS, Duration::ZERO)],
    );
    mock.push_broker_errors(coordinator, ApiKey::JoinGroup, &[(codes::NONE, HELD)]);
    tokio::select! {
        () = async {
            loop {
                let _ = consumer.poll(Duration::from_millis(100)).await;
            }
        } => unreachable!("polls forever"),
        () = pushed_answers_used(&mock, coordinator, ApiKey::JoinGroup) => {}
    }
    tokio::time::timeout(WAIT, consumer.close())
        .await
        .expect("the member left while its JoinGroup was held")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_run_through_leader_and_coordinator_moves_and_injected_errors() {
    const TOPIC: &str = "txn-out";
    const INPUT: &str = "txn-in";
    const GROUP: &str = "txn-group";
    const TXN_ID: &str = "mover";
    const PARTITIONS: i32 = 3;
    const TRANSACTIONS: i32 = 4;
    const PER_TXN: usize = 150;
    let mock = MockCluster::start(BROKERS as usize, &[(TOPIC, PARTITIONS), (INPUT, 1)]);
    spread_leaders(&mock, TOPIC, PARTITIONS, 0);
    mock.track_requests();
    let cluster = connect(&mock).await;
    mock.push_errors(
        ApiKey::FindCoordinator,
        &[codes::COORDINATOR_NOT_AVAILABLE, DROP_CONNECTION],
    );
    mock.push_errors(
        ApiKey::InitProducerId,
        &[codes::COORDINATOR_LOAD_IN_PROGRESS, codes::NOT_COORDINATOR],
    );
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            transactional_id: Some(TXN_ID.into()),
            ..producer_config()
        },
    )
    .await
    .unwrap();
    let mut sent = Values::new();
    for txn in 1..=TRANSACTIONS {
        producer.begin_transaction().await.unwrap();
        match txn {
            1 => mock.push_errors(
                ApiKey::AddPartitionsToTxn,
                &[codes::CONCURRENT_TRANSACTIONS, codes::NOT_COORDINATOR],
            ),
            2 => mock.push_errors(
                ApiKey::Produce,
                &[codes::NOT_LEADER_OR_FOLLOWER, DROP_CONNECTION],
            ),
            3 => mock.push_errors(ApiKey::AddPartitionsToTxn, &[DROP_CONNECTION]),
            _ => {}
        }
        let deliveries = send(&producer, TOPIC, PARTITIONS, PER_TXN / 2, &mut sent).await;
        // Mid-transaction the leaders move, then the transaction's
        // coordinator, then the group's.
        spread_leaders(&mock, TOPIC, PARTITIONS, txn);
        mock.set_coordinator(Coordinator::Transaction, TXN_ID, txn % BROKERS + 1);
        let more = send(&producer, TOPIC, PARTITIONS, PER_TXN / 2, &mut sent).await;
        mock.set_coordinator(Coordinator::Group, GROUP, (txn + 1) % BROKERS + 1);
        mock.push_errors(
            ApiKey::AddOffsetsToTxn,
            &[codes::COORDINATOR_LOAD_IN_PROGRESS],
        );
        mock.push_errors(
            ApiKey::TxnOffsetCommit,
            &[codes::NOT_COORDINATOR, DROP_CONNECTION],
        );
        producer
            .send_offsets_to_transaction(GROUP, &[(INPUT.to_string(), 0, i64::from(txn))])
            .await
            .unwrap();
        mock.push_errors(ApiKey::EndTxn, &[codes::NOT_COORDINATOR, DROP_CONNECTION]);
        producer.commit_transaction().await.unwrap();
        delivered(deliveries).await;
        delivered(more).await;
    }
    assert_same(
        "the committed transactions read back",
        &read_all(&cluster, TOPIC, PARTITIONS).await,
        &sent,
    );
    let requests = mock.requests();
    for api in [
        ApiKey::InitProducerId,
        ApiKey::AddPartitionsToTxn,
        ApiKey::AddOffsetsToTxn,
        ApiKey::TxnOffsetCommit,
        ApiKey::EndTxn,
    ] {
        let brokers: BTreeSet<i32> = requests
            .keys()
            .filter(|(_, key)| *key == api as i16)
            .map(|(broker, _)| *broker)
            .collect();
        assert!(!brokers.is_empty(), "no {api:?} request: {requests:?}");
    }
    let ended_at: BTreeSet<i32> = requests
        .keys()
        .filter(|(_, key)| *key == ApiKey::EndTxn as i16)
        .map(|(broker, _)| *broker)
        .collect();
    assert!(
        ended_at.len() > 1,
        "EndTxn reached only brokers {ended_at:?} though the coordinator moved"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_asks_again_in_an_api_versions_version_the_broker_offers() {
    let mock = MockCluster::start(1, &[]);
    let addr = mock.bootstrap().split(',').next().unwrap().to_string();
    // The mock's own newest ApiVersions is v2, below the v3 asked first;
    // then only v0 and v1, then only v0.
    for (max, label) in [(2, "v2"), (1, "v1"), (0, "v0")] {
        mock.set_api_versions(ApiKey::ApiVersions, 0, max);
        let connection = Connection::connect(&addr, "kip-511", Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("connecting where ApiVersions stops at {label}: {e}"));
        let metadata = connection.version::<MetadataRequest>(12).unwrap();
        assert!(
            metadata > 0,
            "{label}: the versions listed were read ({metadata})"
        );
    }
}
