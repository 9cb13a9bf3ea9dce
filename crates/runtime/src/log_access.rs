//! How tasks reach the log: embedded (the app opened the data directory and
//! reads segments directly, appends to partitions itself) or remote (the
//! Kafka-protocol client against strata or any Kafka-compatible cluster).
//! The two behave the same to a task: fetch whole batches from an offset,
//! ask for end offsets, create derived topics, get a producer id, and
//! append stamped batches, where a resend the log already holds counts as
//! appended.
//!
//! Remote fetches are `read_committed`: the runtime's own derived topics
//! are written in transactions there (see `task::transaction`), and a
//! reader must never see an aborted or open one. The fetch lists the
//! aborted transactions its batches may hold; the task skips their
//! batches (see [`strata_client::AbortedFilter`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use tokio::sync::watch;

use strata_client::{self as client, Admin, ClientError, Cluster, FetchOptions, Fetcher};
use strata_log::AppendSignals;
use strata_log::{CleanupPolicy, LogError, LogManager};
use strata_record::{RecordBatch, RecordError};

use super::error::RuntimeError;
use super::fetch_pool::{self, FetchPool};
use super::location::Location;

/// Whole batches read from one partition.
pub(crate) struct Fetched {
    pub records: Bytes,
    pub log_start_offset: i64,
    /// Where the partition ends for this reader (remote, read_committed:
    /// its last stable offset).
    pub end: i64,
    /// (producer id, first offset) of the aborted transactions the batches
    /// may hold (remote; the embedded log's readers see every batch, and
    /// the runtime writes it without transactions).
    pub aborted: Vec<(i64, i64)>,
    /// Whether a batch's CRC is checked before its records are used (the
    /// client's `check.crcs`; always for the embedded log).
    pub check_crcs: bool,
    /// When (ms since the epoch) the read was asked of the log: `end` was
    /// true then. For an answer fetched ahead (remote, a task's
    /// [`FetchPool`]), before the caller asked.
    pub sent_ms: i64,
}

impl Fetched {
    /// Remote, read_committed: the end is the last stable offset (the high
    /// watermark when the broker did not say).
    fn remote(fetched: client::Fetched, check_crcs: bool, sent_ms: i64) -> Self {
        Self {
            records: fetched.records,
            log_start_offset: fetched.log_start_offset,
            end: if fetched.last_stable_offset >= 0 {
                fetched.last_stable_offset
            } else {
                fetched.high_watermark
            },
            aborted: fetched.aborted,
            check_crcs,
            sent_ms,
        }
    }

    /// The batch at the front of `bytes` (a part of `records`), its CRC
    /// checked unless the client was told not to.
    pub fn batch_at<'a>(&self, bytes: &'a [u8]) -> Result<RecordBatch<'a>, RecordError> {
        parse_batch(bytes, self.check_crcs)
    }
}

/// The batch at the front of `bytes`, its CRC checked when `check_crcs`.
pub(crate) fn parse_batch(bytes: &[u8], check_crcs: bool) -> Result<RecordBatch<'_>, RecordError> {
    match check_crcs {
        true => RecordBatch::parse_and_verify(bytes),
        false => RecordBatch::parse(bytes),
    }
}

#[derive(Clone)]
pub(crate) enum LogAccess {
    /// The log, and the signals of appends to it: the in-process broker's
    /// when the app serves the Kafka protocol too (the app's appends wake
    /// the broker's waiting fetches, the broker's produce wakes idle
    /// tasks), else the app's own. Every append to an embedded log goes
    /// through one or the other: only one process opens a log directory.
    Embedded(Arc<LogManager>, Arc<AppendSignals>),
    Remote(Arc<Remote>),
}

/// The cluster, through the client.
///
/// A broker answers the requests of one connection one at a time, in
/// order (as Kafka's do), and holds an idle fetch up to its `max_wait`:
/// a transaction's requests queued behind a task's waiting fetch would
/// wait with it. So a task's fetches go through its thread's
/// [`FetchPool`] ([`LogAccess::with_thread_fetches`]), on connections of
/// the pool's own, and commits, transactions and admin calls through the
/// shared `cluster`.
pub(crate) struct Remote {
    pub cluster: Arc<Cluster>,
    /// Fetches on the shared cluster: for reads that do not wait
    /// (`max_wait` zero: answered at once, they hold its connection no
    /// longer than any request), and accesses that are not a task's.
    fetcher: Fetcher,
    /// A task's: its thread's pool.
    pool: Option<FetchPool>,
    pub admin: Admin,
}

/// How long a remote fetch waits on the broker for records to arrive.
pub(crate) const FETCH_WAIT_MAX: Duration = Duration::from_millis(200);

/// Kafka's default `delete.retention.ms` (a day).
const DELETE_RETENTION_DEFAULT_MS: i64 = 86_400_000;

impl Remote {
    /// A fetcher on the shared cluster, for reads that do not wait on the
    /// broker (a task's waiting fetches go through its pool).
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// Whether fetched batches' CRCs are checked (the client's setting).
    pub fn check_crcs(&self) -> bool {
        self.cluster.config().check_crcs
    }

    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self {
            fetcher: Fetcher::new(Arc::clone(&cluster), FETCH_OPTIONS),
            pool: None,
            admin: Admin::new(Arc::clone(&cluster)),
            cluster,
        }
    }

    /// `remote`'s fetch of `topic`/`partition`, and when it was sent:
    /// through the pool when it has one and the read may wait.
    async fn fetch_within(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> fetch_pool::Answer {
        match &self.pool {
            Some(pool) if !max_wait.is_zero() => {
                (pool.fetch(topic, partition, offset, max_bytes, max_wait)).await
            }
            _ => {
                let sent_ms = strata_record::time::now_ms();
                let fetcher = &self.fetcher;
                let fetched =
                    (fetcher.fetch_within(topic, partition, offset, max_bytes, max_wait)).await?;
                Ok((fetched, sent_ms))
            }
        }
    }
}

/// Every remote fetch's options: answered at the first byte (or after
/// its wait), read_committed.
const FETCH_OPTIONS: FetchOptions = FetchOptions {
    min_bytes: 1,
    max_wait: FETCH_WAIT_MAX,
    read_committed: true,
};

impl LogAccess {
    /// For a command that only reads topics (`diff`, `dlq`, `explain`):
    /// remote, a connection to the cluster; embedded, none (the segment
    /// files are read directly, so the app may be running).
    pub(crate) async fn to_read(location: &Location) -> Result<Option<Self>, RuntimeError> {
        match location.client_config() {
            Some(config) => Ok(Some(Self::connect(config).await?.0)),
            None => Ok(None),
        }
    }

    /// Connects to a cluster with `config`; also returns the cluster, for
    /// an admin client beside.
    pub(crate) async fn connect(
        config: client::ClientConfig,
    ) -> Result<(Self, Arc<Cluster>), RuntimeError> {
        let cluster = Cluster::connect(config).await?;
        let access = Self::Remote(Arc::new(Remote::new(Arc::clone(&cluster))));
        Ok((access, cluster))
    }

    /// The same access with fetches through this task thread's
    /// [`FetchPool`] (remote; see [`Remote`]), for one task. Only on a task
    /// thread.
    pub(crate) async fn with_thread_fetches(&self) -> Result<Self, RuntimeError> {
        match self {
            Self::Embedded(..) => Ok(self.clone()),
            Self::Remote(remote) => {
                let pool = FetchPool::of_this_thread(&remote.cluster, FETCH_OPTIONS).await?;
                Ok(Self::Remote(Arc::new(Remote {
                    cluster: Arc::clone(&remote.cluster),
                    fetcher: remote.fetcher.clone(),
                    pool: Some(pool),
                    admin: Admin::new(Arc::clone(&remote.cluster)),
                })))
            }
        }
    }

    /// Partitions of `topic`, or `None` if it does not exist.
    pub async fn partition_count(&self, topic: &str) -> Result<Option<i32>, RuntimeError> {
        match self {
            Self::Embedded(log, _) => Ok(log.topic(topic).map(|t| t.partitions.len() as i32)),
            Self::Remote(remote) => match remote.cluster.partition_count(topic).await {
                Ok(count) => Ok(Some(count as i32)),
                Err(ClientError::UnknownTopic(_)) => Ok(None),
                Err(ClientError::Kafka { code, .. })
                    if code == client::error::codes::UNKNOWN_TOPIC_OR_PARTITION =>
                {
                    Ok(None)
                }
                Err(error) => Err(error.into()),
            },
        }
    }

    /// Creates `topic` with `partitions` unless it exists; returns its
    /// partition count either way.
    pub async fn ensure_topic(&self, topic: &str, partitions: i32) -> Result<i32, RuntimeError> {
        self.ensure_topic_with(topic, partitions, &[]).await
    }

    /// [`ensure_topic`](Self::ensure_topic), created with topic `configs`
    /// (Kafka's names) when it does not exist yet.
    pub async fn ensure_topic_with(
        &self,
        topic: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<i32, RuntimeError> {
        if let Some(count) = self.partition_count(topic).await? {
            return Ok(count);
        }
        match self {
            Self::Embedded(log, _) => {
                let configs = configs.iter().cloned().collect();
                match log.create_topic(topic, partitions, configs) {
                    Ok(created) => Ok(created.partitions.len() as i32),
                    Err(LogError::TopicExists(_)) => {
                        Ok(self.partition_count(topic).await?.unwrap_or(partitions))
                    }
                    Err(error) => Err(error.into()),
                }
            }
            Self::Remote(remote) => {
                if let Err(error) = remote.admin.create_topic(topic, partitions, configs).await {
                    // Another task may have created it meanwhile.
                    let code = match &error {
                        ClientError::Kafka { code, .. } => *code,
                        _ => 0,
                    };
                    if code != client::error::codes::TOPIC_ALREADY_EXISTS {
                        return Err(error.into());
                    }
                }
                remote.cluster.invalidate(topic).await;
                for _ in 0..50 {
                    if let Some(count) = self.partition_count(topic).await? {
                        return Ok(count);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(RuntimeError::Config(format!(
                    "topic {topic:?} was created but the cluster does not report it"
                )))
            }
        }
    }

    /// `topic`'s `cleanup.policy`; None when the cluster does not answer
    /// DescribeConfigs (librdkafka's mock cluster), so it cannot be checked.
    pub async fn cleanup_policy(&self, topic: &str) -> Result<Option<CleanupPolicy>, RuntimeError> {
        match self {
            Self::Embedded(log, _) => Ok(Some(log.partition(topic, 0)?.config().cleanup)),
            Self::Remote(remote) => match remote.admin.topic_config(topic).await {
                Ok(config) => Ok(Some(match config.get("cleanup.policy") {
                    Some(value) => CleanupPolicy::parse(value).ok_or_else(|| {
                        RuntimeError::Config(format!(
                            "topic {topic:?} has cleanup.policy={value:?}, which is not Kafka's"
                        ))
                    })?,
                    None => CleanupPolicy::default(),
                })),
                Err(ClientError::UnsupportedApi { .. }) => Ok(None),
                Err(error) => Err(error.into()),
            },
        }
    }

    /// `topic`'s `delete.retention.ms`: how long its cleaner keeps a
    /// tombstone. A cluster that does not describe topic configs is taken
    /// to keep Kafka's default (a day), with a warning.
    pub async fn delete_retention_ms(&self, topic: &str) -> Result<i64, RuntimeError> {
        match self {
            Self::Embedded(log, _) => Ok(log.partition(topic, 0)?.config().delete_retention_ms),
            Self::Remote(remote) => match remote.admin.topic_config(topic).await {
                Ok(config) => match config.get("delete.retention.ms") {
                    None => Ok(DELETE_RETENTION_DEFAULT_MS),
                    Some(value) => value.parse().map_err(|_| {
                        RuntimeError::Config(format!(
                            "topic {topic:?} has delete.retention.ms={value:?}, not a number of milliseconds"
                        ))
                    }),
                },
                Err(ClientError::UnsupportedApi { .. }) => {
                    tracing::warn!(
                        "the cluster does not describe topic configs: taking {topic:?} to keep tombstones for delete.retention.ms={DELETE_RETENTION_DEFAULT_MS} (Kafka's default)"
                    );
                    Ok(DELETE_RETENTION_DEFAULT_MS)
                }
                Err(error) => Err(error.into()),
            },
        }
    }

    /// Whole batches from `offset`, up to about `max_bytes`. Embedded reads
    /// return at once; remote ones wait briefly for data at the end.
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u32,
    ) -> Result<Fetched, RuntimeError> {
        (self.fetch_within(topic, partition, offset, max_bytes, FETCH_WAIT_MAX)).await
    }

    /// As [`LogAccess::fetch`]; a remote fetch waits at most `max_wait`
    /// for data at the end (zero: it only asks what there is).
    pub async fn fetch_within(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u32,
        max_wait: Duration,
    ) -> Result<Fetched, RuntimeError> {
        match self {
            Self::Embedded(log, _) => {
                let log = log.partition(topic, partition)?;
                let read = log.read(offset, u64::from(max_bytes))?;
                let (log_start_offset, end) = (read.log_start_offset, read.log_end_offset);
                Ok(Fetched {
                    records: Bytes::from(read.into_vec()?),
                    log_start_offset,
                    end,
                    aborted: Vec::new(),
                    check_crcs: true,
                    sent_ms: strata_record::time::now_ms(),
                })
            }
            Self::Remote(remote) => {
                let max = i32::try_from(max_bytes).unwrap_or(i32::MAX);
                let (fetched, sent_ms) =
                    (remote.fetch_within(topic, partition, offset, max, max_wait)).await?;
                Ok(Fetched::remote(fetched, remote.check_crcs(), sent_ms))
            }
        }
    }

    /// Whole batches from each of `wants` (topic, partition, offset), in
    /// its order. Remote: one Fetch per leader, answered as soon as any of
    /// its partitions has records or after `max_wait`, and not retried (a
    /// failure is the caller's to look at again); embedded: reads.
    pub async fn fetch_many_within(
        &self,
        wants: &[(String, i32, i64)],
        max_bytes: u32,
        max_wait: Duration,
    ) -> Vec<Result<Fetched, RuntimeError>> {
        let Self::Remote(remote) = self else {
            let mut answers = Vec::with_capacity(wants.len());
            for (topic, partition, offset) in wants {
                let read = self.fetch_within(topic, *partition, *offset, max_bytes, max_wait);
                answers.push(read.await);
            }
            return answers;
        };
        let max = i32::try_from(max_bytes).unwrap_or(i32::MAX);
        let check_crcs = remote.check_crcs();
        if let Some(pool) = &remote.pool
            && !max_wait.is_zero()
        {
            let answers = pool.fetch_many(wants, max, max_wait).await;
            return (answers.into_iter())
                .map(|answer| {
                    (answer.map(|(fetched, sent_ms)| Fetched::remote(fetched, check_crcs, sent_ms)))
                        .map_err(RuntimeError::from)
                })
                .collect();
        }
        let sent_ms = strata_record::time::now_ms();
        let mut answers = (remote.fetcher.fetch_many_within(wants, max, max_wait)).await;
        (wants.iter())
            .map(|(topic, partition, _)| {
                let at = (answers.iter())
                    .position(|(t, p, _)| t == topic && p == partition)
                    .expect("fetch_many answers every partition it is asked for");
                let (_, _, answer) = answers.swap_remove(at);
                (answer.map(|fetched| Fetched::remote(fetched, check_crcs, sent_ms)))
                    .map_err(RuntimeError::from)
            })
            .collect()
    }

    /// The offset after the last record of `topic`/`partition`.
    pub async fn end_offset(&self, topic: &str, partition: i32) -> Result<i64, RuntimeError> {
        match self {
            Self::Embedded(log, _) => Ok(log.partition(topic, partition)?.log_end_offset()),
            Self::Remote(remote) => Ok(remote
                .admin
                .list_offset(topic, partition, client::LATEST)
                .await?
                .unwrap_or(0)),
        }
    }

    /// The first offset still retained.
    pub async fn start_offset(&self, topic: &str, partition: i32) -> Result<i64, RuntimeError> {
        match self {
            Self::Embedded(log, _) => Ok(log.partition(topic, partition)?.log_start_offset()),
            Self::Remote(remote) => Ok(remote
                .admin
                .list_offset(topic, partition, client::EARLIEST)
                .await?
                .unwrap_or(0)),
        }
    }

    /// The first offset whose record has a timestamp at or after `ms`; the
    /// end offset when none has.
    pub async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: i32,
        ms: i64,
    ) -> Result<i64, RuntimeError> {
        let found = match self {
            Self::Embedded(log, _) => log
                .partition(topic, partition)?
                .offset_for_timestamp(ms)?
                .map(|(offset, _)| offset),
            Self::Remote(remote) => remote.admin.list_offset(topic, partition, ms).await?,
        };
        match found {
            Some(offset) => Ok(offset),
            None => self.end_offset(topic, partition).await,
        }
    }

    /// A producer id never handed out before, with its epoch.
    pub async fn new_producer(&self) -> Result<(i64, i16), RuntimeError> {
        match self {
            Self::Embedded(log, _) => {
                let id = log.producer_ids().new_producer()?;
                Ok((id.producer_id, id.epoch))
            }
            Self::Remote(remote) => Ok(client::init_producer_id(&remote.cluster).await?),
        }
    }

    /// Appends a batch stamped with a producer id and sequences; a batch the
    /// log already holds counts as appended.
    pub async fn append(
        &self,
        topic: &str,
        partition: i32,
        batch: &[u8],
    ) -> Result<(), RuntimeError> {
        match self {
            Self::Embedded(log, signals) => match log.partition(topic, partition)?.append(batch) {
                Ok(appended) => {
                    if let Some(topic) = log.topic(topic) {
                        signals.appended(topic.id(), partition, appended.last_offset + 1);
                    }
                    Ok(())
                }
                Err(LogError::DuplicateSequence { .. }) => Ok(()),
                Err(error) => Err(error.into()),
            },
            Self::Remote(remote) => {
                client::append_batch(
                    &remote.cluster,
                    None,
                    topic,
                    partition,
                    Bytes::copy_from_slice(batch),
                )
                .await?;
                Ok(())
            }
        }
    }

    /// A subscription that changes on the next append to the partition
    /// (embedded; None remote, where a fetch waits on the broker itself, or
    /// for a topic the log does not have). Taken before reading, it misses
    /// no append after the read.
    pub fn subscribe(&self, topic: &str, partition: i32) -> Option<watch::Receiver<i64>> {
        match self {
            Self::Embedded(log, signals) => {
                let topic = log.topic(topic)?;
                Some(signals.subscribe(topic.id(), partition))
            }
            Self::Remote(_) => None,
        }
    }

    /// Makes what was appended to the partitions durable (embedded; a
    /// remote append with acks=all already is).
    pub fn flush(&self, partitions: &[(String, i32)]) -> Result<(), RuntimeError> {
        if let Self::Embedded(log, _) = self {
            for (topic, partition) in partitions {
                log.partition(topic, *partition)?.flush()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_log::LogConfig;
    use strata_record::{BatchBuilder, Compression, NewRecord};

    #[tokio::test]
    async fn an_embedded_append_wakes_the_fetches_of_a_broker_serving_the_same_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
        let topic = log.create_topic("derived", 1, Default::default()).unwrap();
        let signals = Arc::new(AppendSignals::default());
        let mut waiting = signals.subscribe(topic.id(), 0);
        let access = LogAccess::Embedded(Arc::clone(&log), Arc::clone(&signals));
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(NewRecord::new(None, b"v", 1)).unwrap();
        builder.push(NewRecord::new(None, b"w", 1)).unwrap();
        access
            .append("derived", 0, &builder.build().unwrap())
            .await
            .unwrap();
        assert!(waiting.has_changed().unwrap(), "the waiting fetch is woken");
        assert_eq!(*waiting.borrow_and_update(), 2, "with the new log end");
    }
}
