//! The consumer: records from assigned or subscribed partitions, read with
//! the pull loop's fetches, positions the consumer owns, and commits to a
//! group.
//!
//! - [`Consumer::assign`] reads the named partitions; with a group id, the
//!   starting positions come from the group's committed offsets.
//! - [`Consumer::subscribe`] joins the group (range or round-robin
//!   assignment, rebalance callbacks) and reads what the group assigns.
//! - Positions start at the committed offset, else per
//!   [`OffsetReset`]; [`Consumer::seek`] moves one (offset, beginning,
//!   end, timestamp).
//! - [`Consumer::commit`] commits the current positions and waits;
//!   [`Consumer::commit_async`] sends the commit and returns at once;
//!   with `auto_commit` set, positions are committed on that interval, on
//!   a rebalance and on close.

mod assignor;
mod claimed_counts;
mod positions;
mod protocol;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub use assignor::{Assignor, TopicPartition};
#[doc(hidden)]
pub use assignor::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
pub use assignor::{
    decode_assignment_with, decode_subscription_with, encode_assignment_with,
    encode_subscription_with,
};
use protocol::ConsumerProtocol;
pub use protocol::{CONSUMER, partition_counts};

use crate::membership::{Membership, MembershipConfig};

use super::admin::{commit_offsets, committed_offsets};
use super::fetcher::{list_offset, list_offsets};
use super::{ClientError, Cluster, EARLIEST, FetchOptions, Fetched, Fetcher, LATEST};
use crate::error::codes;

/// Where a partition without a committed offset (or whose offset is no
/// longer retained) starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Fail with [`ClientError::OffsetOutOfRange`] (or `NoOffset`).
    None,
}

/// Where [`Consumer::seek`] moves a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seek {
    Offset(i64),
    Beginning,
    End,
    /// The first record at or after this time (ms); the end when none is.
    Timestamp(i64),
}

/// What happened to the consumer's assignment, for rebalance callbacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebalance {
    /// These partitions are being taken away (positions already committed
    /// when auto-commit is on).
    Revoked(Vec<TopicPartition>),
    /// These partitions are now this consumer's.
    Assigned(Vec<TopicPartition>),
}

/// A rebalance callback.
pub type RebalanceListener = Box<dyn FnMut(&Rebalance) + Send + Sync>;

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The consumer group; needed by `subscribe` and by commits.
    pub group_id: Option<String>,
    pub offset_reset: OffsetReset,
    /// Commit positions this often (and on rebalance and close); `None`
    /// commits only when asked.
    pub auto_commit: Option<Duration>,
    pub session_timeout: Duration,
    /// How long the coordinator waits for every member to rejoin.
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// Assignors offered to the group, preferred first.
    pub assignors: Vec<Assignor>,
    /// Most bytes fetched per partition per request.
    pub partition_max_bytes: i32,
    /// Kafka's `isolation.level=read_committed`: only committed records,
    /// up to the last stable offset.
    pub read_committed: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            group_id: None,
            offset_reset: OffsetReset::Latest,
            auto_commit: None,
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(1),
            assignors: vec![Assignor::Range, Assignor::RoundRobin],
            partition_max_bytes: 1 << 20,
            read_committed: false,
        }
    }
}

/// One consumed record, owning its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// A partition's position against its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    pub position: i64,
    pub end: i64,
    pub lag: i64,
}

/// Most bytes one fetched batch may decompress to.
const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

enum Mode {
    Idle,
    Assigned,
    Subscribed(Vec<String>),
}

pub struct Consumer {
    cluster: Arc<Cluster>,
    config: ConsumerConfig,
    mode: Mode,
    membership: Option<Membership>,
    /// Assigned partitions → next offset to read (`None`: not yet known).
    positions: BTreeMap<TopicPartition, Option<i64>>,
    /// High watermarks seen in the last fetches.
    ends: BTreeMap<TopicPartition, i64>,
    listener: Option<RebalanceListener>,
    last_commit: Instant,
    /// A failure of the last poll, reported by the next one (the last
    /// returned the records fetched before it).
    deferred: Option<ClientError>,
}

impl Consumer {
    pub fn new(cluster: Arc<Cluster>, config: ConsumerConfig) -> Self {
        Self {
            cluster,
            config,
            mode: Mode::Idle,
            membership: None,
            positions: BTreeMap::new(),
            ends: BTreeMap::new(),
            listener: None,
            last_commit: Instant::now(),
            deferred: None,
        }
    }

    /// Called with every revocation and assignment a rebalance brings.
    pub fn on_rebalance(&mut self, listener: impl FnMut(&Rebalance) + Send + Sync + 'static) {
        self.listener = Some(Box::new(listener));
    }

    /// Reads exactly these partitions, outside group membership.
    pub fn assign(&mut self, partitions: &[TopicPartition]) {
        self.mode = Mode::Assigned;
        self.membership = None;
        self.positions = partitions.iter().map(|tp| (tp.clone(), None)).collect();
    }

    /// Joins the consumer group and reads the partitions of `topics` it is
    /// assigned (at the next poll).
    pub fn subscribe(&mut self, topics: &[&str]) -> Result<(), ClientError> {
        let group =
            self.config.group_id.clone().ok_or_else(|| {
                ClientError::Invalid("subscribing needs a consumer group id".into())
            })?;
        if topics.is_empty() {
            return Err(ClientError::Invalid("subscribing to no topic".into()));
        }
        self.mode = Mode::Subscribed(topics.iter().map(|t| t.to_string()).collect());
        self.positions.clear();
        self.membership = Some(Membership::new(
            Arc::clone(&self.cluster),
            MembershipConfig {
                group,
                instance_id: None,
                session_timeout: self.config.session_timeout,
                rebalance_timeout: self.config.rebalance_timeout,
                heartbeat_interval: self.config.heartbeat_interval,
            },
        ));
        Ok(())
    }

    /// The partitions this consumer reads now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.positions.keys().cloned().collect()
    }

    /// The next offset to be read from a partition, once known.
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.positions
            .get(&(topic.to_string(), partition))
            .copied()
            .flatten()
    }

    /// The group generation and member id, while subscribed and joined.
    pub fn generation(&self) -> Option<(i32, String)> {
        self.membership
            .as_ref()
            .filter(|m| !m.needs_rejoin())
            .map(|m| {
                let (generation, member) = m.generation();
                (generation, member.to_string())
            })
    }

    /// Waits up to `timeout` for records from the assigned partitions
    /// (joining or rejoining the group first when needed) and returns what
    /// arrived, in offset order per partition.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, ClientError> {
        if matches!(self.mode, Mode::Idle) {
            return Err(ClientError::Invalid(
                "poll before assign or subscribe".into(),
            ));
        }
        if let Some(error) = self.deferred.take() {
            return Err(error);
        }
        self.ensure_joined().await?;
        self.resolve_positions().await?;
        self.maybe_auto_commit().await?;
        let wants = self.known_positions();
        if wants.is_empty() {
            tokio::time::sleep(timeout.min(Duration::from_millis(100))).await;
            return Ok(Vec::new());
        }
        // A wait longer than a request may take would break the connection
        // (and hold up what is queued behind it on the broker).
        let max_wait = timeout.min(self.cluster.config().request_timeout / 2);
        let fetcher = Fetcher::new(
            Arc::clone(&self.cluster),
            FetchOptions {
                min_bytes: 1,
                max_wait,
                read_committed: self.config.read_committed,
            },
        );
        let mut records = Vec::new();
        let mut failure = None;
        let mut answered = false;
        for (topic, partition, result) in fetcher
            .fetch_many(&wants, self.config.partition_max_bytes)
            .await
        {
            let key = (topic, partition);
            let outcome = match result {
                Ok(fetched) => {
                    answered = true;
                    self.ends.insert(key.clone(), fetched.high_watermark);
                    // A partition's records count only with its new position.
                    let mut got = Vec::new();
                    collect_records(&fetched, &mut got).map(|next| {
                        records.extend(got);
                        // A rebalance may have taken the partition meanwhile.
                        if let Some(position) = self.positions.get_mut(&key) {
                            *position = Some(next);
                        }
                    })
                }
                Err(ClientError::OffsetOutOfRange { offset, .. }) => {
                    answered = true;
                    tracing::debug!(
                        "{}/{}: offset {offset} is out of range; resetting",
                        key.0,
                        key.1
                    );
                    self.reset_offset(&key.0, key.1, offset).await.map(|reset| {
                        self.positions.insert(key, Some(reset));
                    })
                }
                Err(error) if error.is_retriable() => {
                    tracing::debug!("{}/{}: fetch failed, retrying: {error}", key.0, key.1);
                    Ok(())
                }
                Err(error) => Err(error),
            };
            if let Err(error) = outcome {
                failure.get_or_insert(error);
            }
        }
        match failure {
            Some(error) if records.is_empty() => Err(error),
            // Positions moved past these records: they are returned, and
            // the failure waits for the next poll.
            Some(error) => {
                self.deferred = Some(error);
                Ok(records)
            }
            None => {
                if !answered {
                    // Every fetch failed at once (a broker down): pause
                    // rather than spin.
                    let backoff = self.cluster.config().retry_backoff;
                    tokio::time::sleep(backoff.min(timeout)).await;
                }
                Ok(records)
            }
        }
    }

    /// Moves a partition's position.
    pub async fn seek(&mut self, topic: &str, partition: i32, to: Seek) -> Result<(), ClientError> {
        let key = (topic.to_string(), partition);
        if !self.positions.contains_key(&key) {
            return Err(ClientError::Invalid(format!(
                "{topic}/{partition} is not assigned to this consumer"
            )));
        }
        let offset = match to {
            Seek::Offset(offset) if offset >= 0 => offset,
            Seek::Offset(offset) => {
                return Err(ClientError::Invalid(format!("negative offset {offset}")));
            }
            Seek::Beginning => self.offset_at(topic, partition, EARLIEST).await?,
            Seek::End => self.offset_at(topic, partition, LATEST).await?,
            Seek::Timestamp(ms) => match list_offset(&self.cluster, topic, partition, ms).await? {
                Some(offset) => offset,
                None => self.offset_at(topic, partition, LATEST).await?,
            },
        };
        self.positions.insert(key, Some(offset));
        Ok(())
    }

    /// Commits every known position and waits for the coordinator.
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        let offsets = self.known_positions();
        self.commit_offsets(&offsets).await
    }

    /// Commits these offsets (the next offset to read, per partition).
    pub async fn commit_offsets(
        &mut self,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (group, generation, member) = self.commit_identity()?;
        let result = commit_offsets(&self.cluster, &group, generation, &member, offsets).await;
        if let Err(error) = &result
            && matches!(
                error.code(),
                Some(
                    codes::ILLEGAL_GENERATION
                        | codes::UNKNOWN_MEMBER_ID
                        | codes::REBALANCE_IN_PROGRESS
                )
            )
            && let Some(membership) = &self.membership
        {
            membership.request_rejoin();
        }
        self.last_commit = Instant::now();
        result
    }

    /// Sends a commit of every known position without waiting for it; the
    /// returned handle tells how it went.
    pub fn commit_async(
        &mut self,
    ) -> Result<tokio::task::JoinHandle<Result<(), ClientError>>, ClientError> {
        let offsets = self.known_positions();
        let (group, generation, member) = self.commit_identity()?;
        let cluster = Arc::clone(&self.cluster);
        self.last_commit = Instant::now();
        Ok(tokio::spawn(async move {
            if offsets.is_empty() {
                return Ok(());
            }
            commit_offsets(&cluster, &group, generation, &member, &offsets).await
        }))
    }

    /// The group's committed offsets for the assigned partitions (`None`
    /// where nothing is committed).
    pub async fn committed(&self) -> Result<BTreeMap<TopicPartition, Option<i64>>, ClientError> {
        let group = self.group_id()?;
        let partitions = self.assignment();
        let found = committed_offsets(&self.cluster, &group, Some(&partitions)).await?;
        Ok(partitions
            .into_iter()
            .map(|tp| {
                let offset = found.get(&tp).copied().filter(|o| *o >= 0);
                (tp, offset)
            })
            .collect())
    }

    /// Each assigned partition's position, end offset and lag, the ends
    /// asked of the partition leaders now.
    pub async fn lag(&mut self) -> Result<Vec<PartitionLag>, ClientError> {
        let assigned = self.assignment();
        let ends = list_offsets(&self.cluster, &assigned, LATEST).await?;
        let mut lags = Vec::new();
        for ((topic, partition), position) in self.positions.clone() {
            let key = (topic.clone(), partition);
            let end = ends.get(&key).copied().flatten().unwrap_or(0);
            self.ends.insert(key, end);
            let position = position.unwrap_or(end);
            lags.push(PartitionLag {
                lag: (end - position).max(0),
                topic,
                partition,
                position,
                end,
            });
        }
        Ok(lags)
    }

    /// Commits (with auto-commit on) and leaves the group.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.config.auto_commit.is_some() && self.group_id().is_ok() {
            let _ = self.commit().await;
        }
        if let Some(membership) = &mut self.membership {
            membership.leave().await?;
        }
        Ok(())
    }

    async fn ensure_joined(&mut self) -> Result<(), ClientError> {
        let Mode::Subscribed(topics) = &self.mode else {
            return Ok(());
        };
        let topics = topics.clone();
        let needs = self
            .membership
            .as_ref()
            .is_some_and(Membership::needs_rejoin);
        if !needs {
            return Ok(());
        }
        let revoked = self.assignment();
        if !revoked.is_empty() {
            if self.config.auto_commit.is_some() {
                // The generation may be gone already; then the commit is
                // refused and the new owner starts from the last commit.
                if let Err(error) = self.commit().await {
                    tracing::debug!("commit before rebalance refused: {error}");
                }
            }
            self.notify(&Rebalance::Revoked(revoked));
        }
        self.positions.clear();
        let membership = self
            .membership
            .as_mut()
            .expect("subscribed consumers have one");
        let joined = ConsumerProtocol {
            topics: &topics,
            assignors: &self.config.assignors,
        };
        let assignment = protocol::assigned(&membership.join(&joined).await?)?;
        self.positions = assignment.iter().map(|tp| (tp.clone(), None)).collect();
        self.notify(&Rebalance::Assigned(assignment));
        Ok(())
    }

    fn notify(&mut self, event: &Rebalance) {
        if let Some(listener) = &mut self.listener {
            listener(event);
        }
    }

    async fn maybe_auto_commit(&mut self) -> Result<(), ClientError> {
        let Some(interval) = self.config.auto_commit else {
            return Ok(());
        };
        if self.last_commit.elapsed() < interval || self.config.group_id.is_none() {
            return Ok(());
        }
        if let Err(error) = self.commit().await {
            tracing::debug!("auto-commit failed: {error}");
        }
        Ok(())
    }

    fn known_positions(&self) -> Vec<(String, i32, i64)> {
        self.positions
            .iter()
            .filter_map(|((t, p), at)| at.map(|at| (t.clone(), *p, at)))
            .collect()
    }

    fn group_id(&self) -> Result<String, ClientError> {
        self.config
            .group_id
            .clone()
            .ok_or_else(|| ClientError::Invalid("committing needs a consumer group id".into()))
    }

    /// (group, generation, member id) for an OffsetCommit: the member's
    /// generation when subscribed, -1 and no member otherwise.
    fn commit_identity(&self) -> Result<(String, i32, String), ClientError> {
        let group = self.group_id()?;
        Ok(match &self.membership {
            Some(membership) => {
                let (generation, member) = membership.generation();
                (group, generation, member.to_string())
            }
            None => (group, -1, String::new()),
        })
    }
}

/// Appends the fetched records at or after the asked offset; returns the
/// next offset to ask for.
fn collect_records(fetched: &Fetched, out: &mut Vec<ConsumerRecord>) -> Result<i64, ClientError> {
    // Past every batch fetched, the skipped ones (markers, aborted
    // transactions) included.
    let next = fetched.next_offset();
    for batch in fetched.visible_batches() {
        let batch = batch?;
        let records = batch
            .records(DECOMPRESSED_BYTES_MAX)
            .map_err(|e| ClientError::Protocol(format!("fetched batch: {e}")))?;
        for record in records.iter() {
            let record =
                record.map_err(|e| ClientError::Protocol(format!("fetched record: {e}")))?;
            if record.offset < fetched.offset {
                continue;
            }
            out.push(ConsumerRecord {
                topic: fetched.topic.clone(),
                partition: fetched.partition,
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.map(Bytes::copy_from_slice),
                value: record.value.map(Bytes::copy_from_slice),
                headers: record
                    .headers()
                    .map(|h| {
                        (
                            String::from_utf8_lossy(h.key).into_owned(),
                            h.value.map(Bytes::copy_from_slice),
                        )
                    })
                    .collect(),
            });
        }
    }
    Ok(next)
}
