//! What the client knows of the cluster: brokers, topics, each partition's
//! leader, and one connection per broker.
//!
//! Requests for a partition go to its leader. When a broker answers that it
//! is not (or no longer) the leader, that a topic is unknown, or a
//! connection fails, [`Cluster::retry`] refreshes the metadata and tries
//! again after a backoff, up to the configured number of attempts.
//!
//! A leader the metadata names but does not list among its brokers (one
//! that is down, or not yet known to the broker answering) counts as no
//! leader: LEADER_NOT_AVAILABLE, retried like the others.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Mutex;

use super::error::codes;
use super::{ClientError, ClientSecurity, Connection};

/// Newest Metadata version this client reads (topic ids, names in requests).
const METADATA_VERSION_MAX: i16 = 12;

/// How a client reaches and talks to the cluster.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` addresses to start from; any one reachable is enough.
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// How long a request may wait for its response.
    pub request_timeout: Duration,
    /// Attempts for an operation that fails with a retriable error.
    pub retries: u32,
    /// Pause before a retry (doubled each time, up to 1 s).
    pub retry_backoff: Duration,
    /// Ask brokers to create topics on first use (Kafka's default for
    /// producers; the broker may refuse).
    pub allow_auto_create_topics: bool,
    /// How every connection is secured (TLS, SASL); PLAINTEXT by default.
    pub security: ClientSecurity,
    /// Whether readers check each fetched batch's CRC before using its
    /// records (Kafka's `check.crcs`, on by default). The runtime's readers
    /// honour it; turn it off only for a cluster known to write batches
    /// without one (librdkafka's mock cluster writes its transaction
    /// markers with CRC 0).
    pub check_crcs: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            bootstrap: vec!["127.0.0.1:9092".into()],
            client_id: "strata".into(),
            request_timeout: Duration::from_secs(30),
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            allow_auto_create_topics: false,
            security: ClientSecurity::default(),
            check_crcs: true,
        }
    }
}

impl ClientConfig {
    /// A config for `bootstrap` (`host:port[,host:port…]`).
    pub fn new(bootstrap: &str) -> Self {
        Self {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            ..Self::default()
        }
    }
}

/// A partition's place in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    /// Node id of the leader; -1 while none is available.
    pub leader: i32,
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionInfo>,
}

#[derive(Default)]
struct Metadata {
    brokers: HashMap<i32, String>,
    /// Read per record by a producer: hashed with foldhash, not SipHash.
    topics: foldhash::HashMap<String, TopicInfo>,
    /// Topics the last answer reported an error for other than
    /// UNKNOWN_TOPIC_OR_PARTITION (a leader election, say), with it.
    topic_errors: HashMap<String, i16>,
}

pub struct Cluster {
    config: ClientConfig,
    /// Held only briefly and never across an await.
    metadata: std::sync::RwLock<Metadata>,
    /// Moves on each time `metadata` is written, so a caller may keep
    /// what it read of it until it does (see [`Cluster::metadata_version`]).
    metadata_version: AtomicU64,
    /// One connection per broker address.
    connections: Mutex<HashMap<String, Arc<Connection>>>,
}

impl Cluster {
    /// Connects to the first reachable bootstrap broker.
    pub async fn connect(config: ClientConfig) -> Result<Arc<Self>, ClientError> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::Invalid("no bootstrap address".into()));
        }
        config
            .security
            .validate()
            .map_err(|e| ClientError::Security(e.to_string()))?;
        let cluster = Arc::new(Self {
            config,
            metadata: std::sync::RwLock::default(),
            metadata_version: AtomicU64::new(0),
            connections: Mutex::default(),
        });
        cluster.any_connection().await?;
        Ok(cluster)
    }

    fn read_metadata(&self) -> std::sync::RwLockReadGuard<'_, Metadata> {
        self.metadata.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_metadata(&self) -> std::sync::RwLockWriteGuard<'_, Metadata> {
        let guard = self.metadata.write().unwrap_or_else(|e| e.into_inner());
        // Moved on under the write lock, before any change: a reader that
        // then sees this version reads the metadata after the change.
        self.metadata_version.fetch_add(1, Ordering::AcqRel);
        guard
    }

    /// A number that moves on whenever what is known of the cluster
    /// changes. A value read after this returned this version may be kept
    /// while it still returns it: read the version first, then the value.
    pub(crate) fn metadata_version(&self) -> u64 {
        self.metadata_version.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// A connection to `addr`, reusing a healthy one.
    pub async fn connection_to(&self, addr: &str) -> Result<Arc<Connection>, ClientError> {
        if let Some(existing) = self.healthy_connection(addr).await {
            return Ok(existing);
        }
        // Connected without the lock: one unreachable broker does not hold
        // up requests to the others.
        let connection = Arc::new(
            super::authenticate::connect_secured(
                addr,
                &self.config.client_id,
                self.config.request_timeout,
                &self.config.security,
            )
            .await?,
        );
        let mut connections = self.connections.lock().await;
        if let Some(existing) = connections.get(addr)
            && !existing.is_broken()
        {
            // Another task connected meanwhile: keep one connection.
            return Ok(Arc::clone(existing));
        }
        connections.insert(addr.to_string(), Arc::clone(&connection));
        Ok(connection)
    }

    async fn healthy_connection(&self, addr: &str) -> Option<Arc<Connection>> {
        let connections = self.connections.lock().await;
        connections
            .get(addr)
            .filter(|c| !c.is_broken())
            .map(Arc::clone)
    }

    /// A connection to any broker: known brokers first, then the bootstrap
    /// list.
    pub async fn any_connection(&self) -> Result<Arc<Connection>, ClientError> {
        let mut candidates: Vec<String> = self.read_metadata().brokers.values().cloned().collect();
        candidates.sort();
        candidates.extend(self.config.bootstrap.iter().cloned());
        let mut last = None;
        for addr in candidates {
            match self.connection_to(&addr).await {
                Ok(connection) => return Ok(connection),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or(ClientError::Invalid("no broker address known".into())))
    }

    /// A connection to broker `node`.
    pub async fn connection(&self, node: i32) -> Result<Arc<Connection>, ClientError> {
        let addr = self.read_metadata().brokers.get(&node).cloned();
        match addr {
            Some(addr) => self.connection_to(&addr).await,
            None => {
                self.refresh(&[]).await?;
                let addr = self.read_metadata().brokers.get(&node).cloned();
                let addr = addr.ok_or(ClientError::UnknownBroker(node))?;
                self.connection_to(&addr).await
            }
        }
    }

    /// Refreshes brokers and the given topics (all topics when empty). A
    /// connection that fails meanwhile is replaced and asked once more.
    pub async fn refresh(&self, topics: &[String]) -> Result<(), ClientError> {
        match self.refresh_once(topics).await {
            Err(error) if error.is_connection_failure() => {
                tracing::debug!("metadata refresh failed, asking again: {error}");
                self.refresh_once(topics).await
            }
            answered => answered,
        }
    }

    async fn refresh_once(&self, topics: &[String]) -> Result<(), ClientError> {
        let connection = self.any_connection().await?;
        let version = connection.version::<MetadataRequest>(METADATA_VERSION_MAX)?;
        let mut request = MetadataRequest::default();
        request.topics = if topics.is_empty() {
            // v0 asks for all topics with an empty list, later versions with null.
            if version == 0 { Some(Vec::new()) } else { None }
        } else {
            Some(
                topics
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect(),
            )
        };
        if version >= 4 {
            request.allow_auto_topic_creation = self.config.allow_auto_create_topics;
        }
        let response = connection.send_versioned(&request, version).await?;
        let mut metadata = self.write_metadata();
        metadata.brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        if topics.is_empty() {
            metadata.topics.clear();
            metadata.topic_errors.clear();
        }
        for topic in &response.topics {
            let Some(name) = topic.name.as_ref().map(|n| n.0.as_str().to_string()) else {
                continue;
            };
            if topic.error_code != codes::NONE {
                metadata.topics.remove(&name);
                if topic.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION {
                    metadata.topic_errors.remove(&name);
                } else {
                    metadata.topic_errors.insert(name, topic.error_code);
                }
                continue;
            }
            metadata.topic_errors.remove(&name);
            let mut partitions: Vec<PartitionInfo> = topic
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: usable_leader(p.error_code, p.leader_id.0, &metadata.brokers),
                    leader_epoch: p.leader_epoch,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            metadata.topics.insert(
                name.clone(),
                TopicInfo {
                    name,
                    id: topic.topic_id,
                    partitions,
                },
            );
        }
        Ok(())
    }

    /// The topic's metadata, fetched if not known yet.
    pub async fn topic(&self, name: &str) -> Result<TopicInfo, ClientError> {
        if let Some(topic) = self.read_metadata().topics.get(name) {
            return Ok(topic.clone());
        }
        self.refresh(&[name.to_string()]).await?;
        let metadata = self.read_metadata();
        if let Some(topic) = metadata.topics.get(name) {
            return Ok(topic.clone());
        }
        Err(match metadata.topic_errors.get(name) {
            Some(&code) => ClientError::kafka(code, Some(name), None),
            None => ClientError::UnknownTopic(name.to_string()),
        })
    }

    /// How many partitions `topic` has (fetching its metadata if unknown),
    /// without copying the rest of what is known of it.
    pub async fn partition_count(&self, name: &str) -> Result<usize, ClientError> {
        if let Some(count) = self.known_partition_count(name) {
            return Ok(count);
        }
        Ok(self.topic(name).await?.partitions.len())
    }

    /// How many partitions `topic` has, if its metadata is known now.
    pub fn known_partition_count(&self, name: &str) -> Option<usize> {
        let metadata = self.read_metadata();
        metadata
            .topics
            .get(name)
            .map(|topic| topic.partitions.len())
    }

    /// Forgets what is known of `topic` so the next use asks again.
    pub async fn invalidate(&self, topic: &str) {
        self.forget(topic);
    }

    /// [`Cluster::invalidate`] for callers that cannot await.
    pub(crate) fn forget(&self, topic: &str) {
        self.write_metadata().topics.remove(topic);
    }

    /// The connection to the leader of `topic`/`partition`.
    pub async fn leader(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Connection>, ClientError> {
        let node = self.leader_node(topic, partition).await?;
        self.connection(node).await
    }

    /// The node id of the leader of `topic`/`partition`, read without
    /// copying the topic's metadata (fetched first if unknown).
    pub async fn leader_node(&self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        let find = |metadata: &Metadata| {
            metadata.topics.get(topic).map(|info| {
                info.partitions
                    .iter()
                    .find(|p| p.partition == partition)
                    .map(|p| p.leader)
            })
        };
        let known = find(&self.read_metadata());
        let leader = match known {
            Some(leader) => leader,
            None => {
                self.topic(topic).await?;
                find(&self.read_metadata()).flatten()
            }
        };
        let leader = leader.ok_or_else(|| {
            ClientError::kafka(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                Some(topic),
                Some(partition),
            )
        })?;
        if leader < 0 {
            self.invalidate(topic).await;
            return Err(ClientError::kafka(
                codes::LEADER_NOT_AVAILABLE,
                Some(topic),
                Some(partition),
            ));
        }
        Ok(leader)
    }

    /// Runs `attempt` until it succeeds, fails with a non-retriable error,
    /// or the retries are used up; before each retry the metadata of
    /// `topics` is dropped (so it is fetched again) and the client waits.
    pub async fn retry<T, F, Fut>(&self, topics: &[&str], mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut backoff = self.config.retry_backoff;
        let mut tries = 0;
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_retriable() && tries < self.config.retries => {
                    tries += 1;
                    tracing::debug!("retrying after: {error}");
                    for topic in topics {
                        self.invalidate(topic).await;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// The leader a partition's metadata names, or -1 when there is none to
/// send to: none elected, or one not among the brokers listed (down, or not
/// yet known to the broker that answered). REPLICA_NOT_AVAILABLE says only
/// that a follower is offline; the leader serves.
fn usable_leader(error_code: i16, leader: i32, brokers: &HashMap<i32, String>) -> i32 {
    let serving = matches!(error_code, codes::NONE | codes::REPLICA_NOT_AVAILABLE);
    if serving && brokers.contains_key(&leader) {
        leader
    } else {
        -1
    }
}

impl Cluster {
    /// Names of the topics in the last full refresh (or fetched since).
    pub async fn known_topics(&self) -> Vec<String> {
        self.read_metadata().topics.keys().cloned().collect()
    }

    /// Node ids of the brokers in the last metadata answer.
    pub async fn known_brokers(&self) -> Vec<i32> {
        let mut nodes: Vec<i32> = self.read_metadata().brokers.keys().copied().collect();
        nodes.sort_unstable();
        nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(ids: &[i32]) -> HashMap<i32, String> {
        ids.iter()
            .map(|id| (*id, format!("127.0.0.1:{}", 9092 + id)))
            .collect()
    }

    #[test]
    fn a_leader_missing_from_the_brokers_listed_is_no_leader() {
        assert_eq!(usable_leader(codes::NONE, 2, &brokers(&[1, 2, 3])), 2);
        assert_eq!(usable_leader(codes::NONE, 2, &brokers(&[1, 3])), -1);
        assert_eq!(usable_leader(codes::NONE, -1, &brokers(&[1, 3])), -1);
    }

    #[test]
    fn an_offline_follower_leaves_the_leader_usable() {
        let listed = brokers(&[1, 2]);
        assert_eq!(usable_leader(codes::REPLICA_NOT_AVAILABLE, 1, &listed), 1);
        assert_eq!(usable_leader(codes::LEADER_NOT_AVAILABLE, 1, &listed), -1);
    }
}
