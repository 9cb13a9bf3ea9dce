//! A broker served in the test's own runtime on loopback ports, with its
//! metrics endpoint on, and the raw-frame helpers to talk to it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use strata::broker::BrokerConfig;
use strata::log::LogManager;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct InProcessBroker {
    pub addr: std::net::SocketAddr,
    pub metrics: std::net::SocketAddr,
    pub log: Arc<LogManager>,
    served: super::broker::InProcess,
    _dir: tempfile::TempDir,
}

impl InProcessBroker {
    /// Serves a fresh data directory with `config` (listen and metrics
    /// addresses replaced by free loopback ports).
    pub async fn start(config: BrokerConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
            ..config
        };
        let served = super::broker::start_in(dir.path(), config).await;
        Self {
            addr: served.addr,
            metrics: served.metrics.expect("metrics asked for"),
            log: Arc::clone(&served.log),
            served,
            _dir: dir,
        }
    }

    /// Creates `topic` with one partition and appends about `mebibytes`
    /// MiB of records to it.
    pub fn fill(&self, topic: &str, mebibytes: usize) {
        self.log.create_topic(topic, 1, Default::default()).unwrap();
        let log = self.log.partition(topic, 0).unwrap();
        let value = vec![b'v'; 1000];
        for _ in 0..mebibytes {
            let mut builder = strata::record::BatchBuilder::default();
            for _ in 0..1000 {
                builder
                    .push(strata::record::NewRecord::new(None, &value, 1))
                    .unwrap();
            }
            log.append(&builder.build().unwrap()).unwrap();
        }
    }

    pub async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).await.unwrap()
    }

    /// The whole HTTP answer to GET /metrics.
    pub async fn scrape(&self) -> String {
        let mut scrape = TcpStream::connect(self.metrics).await.unwrap();
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        scrape.read_to_string(&mut text).await.unwrap();
        text
    }

    /// The value of an unlabelled metric, from a fresh scrape.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.scrape().await;
        let prefix = format!("{name} ");
        let line = text
            .lines()
            .find(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"));
        line[prefix.len()..].trim().parse().unwrap()
    }

    /// Scrapes until `done(value)` holds; fails after a minute (a guard
    /// against hanging, not a measure of speed).
    pub async fn wait_for_metric(&self, name: &str, done: impl Fn(u64) -> bool) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let value = self.metric(name).await;
            if done(value) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{name} stayed at {value} for a minute"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn stop(self) {
        self.served.stop().await;
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.into()))
}

#[allow(unused_imports, reason = "each test file uses a different subset")]
pub use super::wire::{call, decode_response, frame, read_response};

/// A produce of `records` to one partition.
pub fn produce_request(
    acks: i16,
    topic: &str,
    partition: i32,
    records: Vec<u8>,
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    kafka_protocol::messages::ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ])
}

/// A fetch of `partitions` of `topic` from `offset`, by name, min_bytes 1.
pub fn fetch_request(
    topic: &str,
    partitions: &[i32],
    offset: i64,
    max_bytes: i32,
    max_wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    kafka_protocol::messages::FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(max_bytes)
                        })
                        .collect(),
                ),
        ])
}

/// A batch of one record.
pub fn one_record(value: &[u8], timestamp: i64) -> Vec<u8> {
    let mut builder = strata::record::BatchBuilder::default();
    builder
        .push(strata::record::NewRecord::new(None, value, timestamp))
        .unwrap();
    builder.build().unwrap()
}
