//! The pull loop's primitive: `fetch(topic, partition, offset, max_bytes)`
//! returns whole record batches, as the broker stores them, for the caller
//! to iterate without copying.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::aborted::AbortedFilter;
use super::error::codes;
use super::{ClientError, Cluster, Connection};
use strata_record::RecordBatch;

/// Newest Fetch version this client sends (topics by name).
const FETCH_VERSION_MAX: i16 = 12;
/// Newest ListOffsets version this client sends.
const LIST_OFFSETS_VERSION_MAX: i16 = 8;
/// ListOffsets' special timestamps.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;

/// How long and for how much a fetch waits.
#[derive(Debug, Clone, Copy)]
pub struct FetchOptions {
    /// The broker answers once this many bytes are available…
    pub min_bytes: i32,
    /// …or this much time has passed.
    pub max_wait: Duration,
    /// Kafka's `isolation.level=read_committed`: read only up to the last
    /// stable offset, and never the records of aborted transactions.
    pub read_committed: bool,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            min_bytes: 1,
            max_wait: Duration::from_millis(500),
            read_committed: false,
        }
    }
}

/// One partition's fetched data.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub topic: String,
    pub partition: i32,
    /// The offset asked for; batches may start before it (a batch is
    /// returned whole), so readers skip records below it.
    pub offset: i64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The first offset of the oldest open transaction (or the high
    /// watermark); -1 if the broker did not say.
    pub last_stable_offset: i64,
    /// For a read_committed fetch: (producer id, first offset) of each
    /// aborted transaction the batches may hold.
    pub aborted: Vec<(i64, i64)>,
    /// Whole v2 record batches, back to back.
    pub records: Bytes,
}

impl Fetched {
    /// The batches, parsed in place.
    pub fn batches(&self) -> impl Iterator<Item = Result<RecordBatch<'_>, ClientError>> + '_ {
        let mut rest: &[u8] = &self.records;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            match RecordBatch::parse(rest) {
                Ok(batch) => {
                    rest = &rest[batch.size_bytes()..];
                    Some(Ok(batch))
                }
                Err(error) => {
                    rest = &[];
                    Some(Err(ClientError::Protocol(format!(
                        "fetched batch: {error}"
                    ))))
                }
            }
        })
    }

    /// The batches an application sees: no control batches (transaction
    /// markers), and none of an aborted transaction's (the broker lists
    /// where each begins; its ABORT marker ends it), as Kafka's consumers
    /// filter them.
    pub fn visible_batches(
        &self,
    ) -> impl Iterator<Item = Result<RecordBatch<'_>, ClientError>> + '_ {
        let mut filter = AbortedFilter::new(self.aborted.clone());
        self.batches().filter(move |batch| match batch {
            Ok(batch) => filter.visible(batch),
            Err(_) => true,
        })
    }

    /// The offset after the last fetched record (the next to ask for), or
    /// the asked offset when nothing came back.
    pub fn next_offset(&self) -> i64 {
        self.batches()
            .filter_map(Result::ok)
            .last()
            .map_or(self.offset, |b| b.header().next_offset().max(self.offset))
    }
}

/// Cuts a partial batch off the end (a broker may end a response inside
/// one when `max_bytes` runs out).
fn whole_batches(records: Bytes) -> Bytes {
    let mut end = 0;
    while let Ok((_, size)) = strata_record::BatchHeader::peek_size(&records[end..]) {
        if end + size > records.len() {
            break;
        }
        end += size;
    }
    records.slice(..end)
}

/// (topic, partition, offset).
type PartitionAt = (String, i32, i64);

#[derive(Clone)]
pub struct Fetcher {
    cluster: Arc<Cluster>,
    options: FetchOptions,
}

impl Fetcher {
    pub fn new(cluster: Arc<Cluster>, options: FetchOptions) -> Self {
        Self { cluster, options }
    }

    /// The cluster it fetches from.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The options every fetch takes (a call may wait less).
    pub fn options(&self) -> &FetchOptions {
        &self.options
    }

    /// Fetches from `offset`, at most about `max_bytes` (at least one whole
    /// batch if there is one), waiting per the options for data to arrive.
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
    ) -> Result<Fetched, ClientError> {
        self.fetch_within(topic, partition, offset, max_bytes, self.options.max_wait)
            .await
    }

    /// As [`Fetcher::fetch`], waiting at most `max_wait` for data to arrive
    /// (zero: the broker answers at once with what it has).
    pub async fn fetch_within(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> Result<Fetched, ClientError> {
        let options = FetchOptions {
            max_wait,
            ..self.options
        };
        self.cluster
            .retry(&[topic], || {
                self.fetch_once(topic, partition, offset, max_bytes, options)
            })
            .await
    }

    /// Fetches several partitions at once: one request per leader, sent
    /// concurrently, each answered as soon as any of its partitions has
    /// data (or after the wait). Every partition gets its own result;
    /// partitions whose leader moved get a retriable error and their
    /// topic's metadata is refreshed on the next call.
    pub async fn fetch_many(
        &self,
        wants: &[(String, i32, i64)],
        partition_max_bytes: i32,
    ) -> Vec<(String, i32, Result<Fetched, ClientError>)> {
        (self.fetch_many_within(wants, partition_max_bytes, self.options.max_wait)).await
    }

    /// As [`Fetcher::fetch_many`], each request waiting at most `max_wait`.
    pub async fn fetch_many_within(
        &self,
        wants: &[(String, i32, i64)],
        partition_max_bytes: i32,
        max_wait: Duration,
    ) -> Vec<(String, i32, Result<Fetched, ClientError>)> {
        let mut by_leader: HashMap<String, (Arc<Connection>, Vec<PartitionAt>)> = HashMap::new();
        let mut results = Vec::with_capacity(wants.len());
        for (topic, partition, offset) in wants {
            match self.cluster.leader(topic, *partition).await {
                Ok(connection) => {
                    by_leader
                        .entry(connection.addr().to_string())
                        .or_insert_with(|| (connection, Vec::new()))
                        .1
                        .push((topic.clone(), *partition, *offset));
                }
                Err(error) => results.push((topic.clone(), *partition, Err(error))),
            }
        }
        let mut requests = tokio::task::JoinSet::new();
        for (connection, partitions) in by_leader.into_values() {
            let options = FetchOptions {
                max_wait,
                ..self.options
            };
            requests.spawn(async move {
                let answer =
                    fetch_from(&connection, &partitions, partition_max_bytes, options).await;
                (partitions, answer)
            });
        }
        while let Some(joined) = requests.join_next().await {
            let Ok((partitions, answer)) = joined else {
                continue;
            };
            match answer {
                Ok(fetched) => results.extend(fetched),
                Err(error) => {
                    for (topic, partition, _) in partitions {
                        let error = error.for_partition(&topic, partition);
                        results.push((topic, partition, Err(error)));
                    }
                }
            }
        }
        for (topic, _, result) in &results {
            if result.as_ref().is_err_and(ClientError::is_retriable) {
                self.cluster.invalidate(topic).await;
            }
        }
        results
    }

    async fn fetch_once(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        options: FetchOptions,
    ) -> Result<Fetched, ClientError> {
        let connection = self.cluster.leader(topic, partition).await?;
        let wanted = [(topic.to_string(), partition, offset)];
        let mut answers = fetch_from(&connection, &wanted, max_bytes, options)
            .await
            .map_err(|e| e.for_partition(topic, partition))?;
        let (_, _, answer) = answers.pop().expect("one answer per partition asked");
        answer
    }

    /// The offset for `timestamp` in each partition: [`EARLIEST`],
    /// [`LATEST`], or the first record at or after a time in ms (`None` when
    /// no record is that recent).
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<Option<i64>, ClientError> {
        list_offset(&self.cluster, topic, partition, timestamp).await
    }
}

/// ListOffsets for one partition (shared by the fetcher, consumer and admin).
pub(crate) async fn list_offset(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<Option<i64>, ClientError> {
    let wanted = [(topic.to_string(), partition)];
    let mut found = list_offsets(cluster, &wanted, timestamp).await?;
    Ok(found.remove(&wanted[0]).flatten())
}

/// ListOffsets for many partitions at one `timestamp` ([`EARLIEST`],
/// [`LATEST`] or ms): one request per leader. `None` for a partition with
/// no record that recent.
pub(crate) async fn list_offsets(
    cluster: &Cluster,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> Result<BTreeMap<(String, i32), Option<i64>>, ClientError> {
    let mut topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
    topics.sort_unstable();
    topics.dedup();
    cluster
        .retry(&topics, || async {
            let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
            for (topic, partition) in partitions {
                let node = cluster.leader_node(topic, *partition).await?;
                by_leader
                    .entry(node)
                    .or_default()
                    .entry(topic)
                    .or_default()
                    .push(*partition);
            }
            let mut found = BTreeMap::new();
            for (node, topics) in by_leader {
                let request = ListOffsetsRequest::default().with_topics(
                    topics
                        .iter()
                        .map(|(topic, indexes)| {
                            ListOffsetsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                                .with_partitions(
                                    indexes
                                        .iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(*p)
                                                .with_timestamp(timestamp)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
                let connection = cluster.connection(node).await?;
                let response = connection.send(&request, LIST_OFFSETS_VERSION_MAX).await?;
                for answer in &response.topics {
                    let topic = answer.name.0.as_str();
                    for p in &answer.partitions {
                        if p.error_code != codes::NONE {
                            return Err(ClientError::kafka(
                                p.error_code,
                                Some(topic),
                                Some(p.partition_index),
                            ));
                        }
                        found.insert(
                            (topic.to_string(), p.partition_index),
                            (p.offset >= 0).then_some(p.offset),
                        );
                    }
                }
            }
            for (topic, partition) in partitions {
                if !found.contains_key(&(topic.clone(), *partition)) {
                    return Err(ClientError::Protocol(format!(
                        "no offset for {topic}/{partition}"
                    )));
                }
            }
            Ok(found)
        })
        .await
}

/// One Fetch request for `partitions` (topic, partition, offset), all led
/// by the broker at the other end of `connection`.
async fn fetch_from(
    connection: &Connection,
    partitions: &[(String, i32, i64)],
    partition_max_bytes: i32,
    options: FetchOptions,
) -> Result<Vec<(String, i32, Result<Fetched, ClientError>)>, ClientError> {
    let version = connection.version::<FetchRequest>(FETCH_VERSION_MAX)?;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (topic, partition, offset) in partitions {
        let mut wanted = FetchPartition::default()
            .with_partition(*partition)
            .with_fetch_offset(*offset)
            .with_partition_max_bytes(partition_max_bytes);
        if version >= 5 {
            wanted.log_start_offset = -1;
        }
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(existing) => existing.partitions.push(wanted),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![wanted]),
            ),
        }
    }
    let total = i64::from(partition_max_bytes) * partitions.len() as i64;
    let request = FetchRequest::default()
        .with_isolation_level(i8::from(options.read_committed))
        .with_max_wait_ms(i32::try_from(options.max_wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(options.min_bytes)
        .with_max_bytes(i32::try_from(total).unwrap_or(i32::MAX))
        .with_topics(topics);
    let response = connection.send_versioned(&request, version).await?;
    if response.error_code != codes::NONE {
        return Err(ClientError::kafka(response.error_code, None, None));
    }
    let mut answered = Vec::with_capacity(partitions.len());
    for (topic, partition, offset) in partitions {
        let data = response
            .responses
            .iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == *partition);
        let result = match data {
            None => Err(ClientError::Protocol(format!(
                "no data for {topic}/{partition}"
            ))),
            Some(data) if data.error_code == codes::OFFSET_OUT_OF_RANGE => {
                Err(ClientError::OffsetOutOfRange {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                })
            }
            Some(data) if data.error_code != codes::NONE => Err(ClientError::kafka(
                data.error_code,
                Some(topic),
                Some(*partition),
            )),
            Some(data) => Ok(Fetched {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                high_watermark: data.high_watermark,
                log_start_offset: data.log_start_offset,
                last_stable_offset: data.last_stable_offset,
                aborted: data
                    .aborted_transactions
                    .iter()
                    .flatten()
                    .map(|a| (a.producer_id.0, a.first_offset))
                    .collect(),
                records: whole_batches(data.records.clone().unwrap_or_default()),
            }),
        };
        answered.push((topic.clone(), *partition, result));
    }
    Ok(answered)
}
