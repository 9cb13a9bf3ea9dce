//! Administration: topics, partitions, offsets and consumer groups.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::error::codes;

/// Newest DescribeLogDirs version this client sends.
const DESCRIBE_LOG_DIRS_VERSION_MAX: i16 = 4;
use super::connection::decode_or_error_code;
use super::fetcher::{EARLIEST, LATEST, list_offset, list_offsets};
use super::{ClientError, Cluster, Connection};

const CREATE_TOPICS_VERSION_MAX: i16 = 7;
const DELETE_TOPICS_VERSION_MAX: i16 = 5;
const CREATE_PARTITIONS_VERSION_MAX: i16 = 3;
const DESCRIBE_CONFIGS_VERSION_MAX: i16 = 4;
const FIND_COORDINATOR_VERSION_MAX: i16 = 4;
const LIST_GROUPS_VERSION_MAX: i16 = 4;
const DESCRIBE_GROUPS_VERSION_MAX: i16 = 5;
const DELETE_GROUPS_VERSION_MAX: i16 = 2;
const OFFSET_FETCH_VERSION_MAX: i16 = 7;
/// OffsetFetch has `require_stable` from this version on (KIP-447).
const REQUIRE_STABLE_FROM: i16 = 7;
const OFFSET_COMMIT_VERSION_MAX: i16 = 8;
/// Request timeout given to the broker for admin operations.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A partition's offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub partition: i32,
    pub leader: i32,
    pub earliest: i64,
    pub latest: i64,
}

#[derive(Debug, Clone)]
pub struct TopicDescription {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionOffsets>,
    /// Every config value the broker reports for the topic.
    pub config: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

#[derive(Debug, Clone)]
pub struct GroupMemberDescription {
    pub member_id: String,
    /// A static member's instance id.
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The member's assignment, as its group protocol encodes it.
    pub assignment: bytes::Bytes,
    /// The member's metadata for the group's protocol (a consumer's
    /// subscription), as it joined with it.
    pub metadata: bytes::Bytes,
}

#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol: String,
    pub members: Vec<GroupMemberDescription>,
}

/// A group's position on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPartitionLag {
    pub topic: String,
    pub partition: i32,
    /// -1 when the group has committed nothing here.
    pub committed: i64,
    pub end: i64,
    pub lag: i64,
}

pub struct Admin {
    cluster: Arc<Cluster>,
}

fn check(code: i16, message: Option<&StrBytes>, topic: &str) -> Result<(), ClientError> {
    if code == codes::NONE {
        return Ok(());
    }
    Err(ClientError::kafka(code, Some(topic), None).with_message(message.map(|m| m.as_str())))
}

impl Admin {
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self { cluster }
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        config: &[(String, String)],
    ) -> Result<(), ClientError> {
        let connection = self.cluster.any_connection().await?;
        let version = connection.version::<CreateTopicsRequest>(CREATE_TOPICS_VERSION_MAX)?;
        // Before v4 the replication factor must be given; from v4, -1 takes
        // the broker's default.
        let replication = if version < 4 { 1 } else { -1 };
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication)
                    .with_configs(
                        config
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(s(k))
                                    .with_value(Some(s(v)))
                            })
                            .collect(),
                    ),
            ]);
        let response = connection.send_versioned(&request, version).await?;
        for topic in &response.topics {
            check(topic.error_code, topic.error_message.as_ref(), name)?;
        }
        self.cluster.invalidate(name).await;
        Ok(())
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), ClientError> {
        let connection = self.cluster.any_connection().await?;
        let request = DeleteTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topic_names(vec![TopicName(s(name))]);
        let response = connection.send(&request, DELETE_TOPICS_VERSION_MAX).await?;
        for topic in &response.responses {
            check(topic.error_code, topic.error_message.as_ref(), name)?;
        }
        self.cluster.invalidate(name).await;
        Ok(())
    }

    /// Grows `name` to `total` partitions.
    pub async fn create_partitions(&self, name: &str, total: i32) -> Result<(), ClientError> {
        let connection = self.cluster.any_connection().await?;
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_count(total),
            ]);
        let response = connection
            .send(&request, CREATE_PARTITIONS_VERSION_MAX)
            .await?;
        for result in &response.results {
            check(result.error_code, result.error_message.as_ref(), name)?;
        }
        self.cluster.invalidate(name).await;
        Ok(())
    }

    /// Names of every topic, sorted.
    pub async fn list_topics(&self) -> Result<Vec<String>, ClientError> {
        self.cluster.refresh(&[]).await?;
        let mut names = self.cluster.known_topics().await;
        names.sort();
        Ok(names)
    }

    pub async fn describe_topic(&self, name: &str) -> Result<TopicDescription, ClientError> {
        self.cluster.refresh(&[name.to_string()]).await?;
        let info = self.cluster.topic(name).await?;
        let wanted: Vec<(String, i32)> = info
            .partitions
            .iter()
            .map(|p| (name.to_string(), p.partition))
            .collect();
        let earliest = list_offsets(&self.cluster, &wanted, EARLIEST).await?;
        let latest = list_offsets(&self.cluster, &wanted, LATEST).await?;
        let at = |offsets: &BTreeMap<(String, i32), Option<i64>>, key| {
            offsets.get(key).copied().flatten().unwrap_or(0)
        };
        let partitions = info
            .partitions
            .iter()
            .zip(&wanted)
            .map(|(p, key)| PartitionOffsets {
                partition: p.partition,
                leader: p.leader,
                earliest: at(&earliest, key),
                latest: at(&latest, key),
            })
            .collect();
        Ok(TopicDescription {
            name: info.name,
            id: info.id,
            partitions,
            config: self.topic_config(name).await?,
        })
    }

    async fn topic_config(&self, name: &str) -> Result<BTreeMap<String, String>, ClientError> {
        let connection = self.cluster.any_connection().await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(s(name)),
        ]);
        let response = connection
            .send(&request, DESCRIBE_CONFIGS_VERSION_MAX)
            .await?;
        let mut config = BTreeMap::new();
        for result in &response.results {
            check(result.error_code, result.error_message.as_ref(), name)?;
            for entry in &result.configs {
                config.insert(
                    entry.name.as_str().to_string(),
                    entry.value.as_ref().map_or("", |v| v.as_str()).to_string(),
                );
            }
        }
        Ok(config)
    }

    /// Bytes on disk of each partition of `topic` (DescribeLogDirs, asked of
    /// every broker; the largest replica counts).
    pub async fn partition_sizes(&self, topic: &str) -> Result<BTreeMap<i32, u64>, ClientError> {
        use kafka_protocol::messages::DescribeLogDirsRequest;
        use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
        let info = self.cluster.topic(topic).await?;
        let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(info.partitions.iter().map(|p| p.partition).collect()),
        ]));
        let mut sizes = BTreeMap::new();
        for node in self.cluster.known_brokers().await {
            let connection = self.cluster.connection(node).await?;
            let response = connection
                .send(&request, DESCRIBE_LOG_DIRS_VERSION_MAX)
                .await?;
            check(response.error_code, None, topic)?;
            for result in &response.results {
                for t in result.topics.iter().filter(|t| t.name.0.as_str() == topic) {
                    for p in &t.partitions {
                        let size = u64::try_from(p.partition_size).unwrap_or(0);
                        let entry = sizes.entry(p.partition_index).or_insert(0);
                        *entry = size.max(*entry);
                    }
                }
            }
        }
        Ok(sizes)
    }

    /// The offsets of many partitions at one `timestamp` ([`EARLIEST`],
    /// [`LATEST`] or ms; `None` where no record is that recent), with one
    /// request per leader.
    pub async fn list_offsets(
        &self,
        partitions: &[(String, i32)],
        timestamp: i64,
    ) -> Result<BTreeMap<(String, i32), Option<i64>>, ClientError> {
        list_offsets(&self.cluster, partitions, timestamp).await
    }

    /// The offset for `timestamp` ([`EARLIEST`], [`LATEST`] or ms).
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<Option<i64>, ClientError> {
        list_offset(&self.cluster, topic, partition, timestamp).await
    }

    /// The connection to `group`'s coordinator.
    pub async fn coordinator(&self, group: &str) -> Result<Arc<Connection>, ClientError> {
        coordinator(&self.cluster, group).await
    }

    pub async fn list_groups(&self) -> Result<Vec<GroupListing>, ClientError> {
        // A single request per broker; every broker lists the groups it coordinates.
        self.cluster.refresh(&[]).await?;
        let mut listed = Vec::new();
        for node in self.cluster.known_brokers().await {
            let connection = self.cluster.connection(node).await?;
            let response = connection
                .send(&ListGroupsRequest::default(), LIST_GROUPS_VERSION_MAX)
                .await?;
            check(response.error_code, None, "")?;
            listed.extend(response.groups.iter().map(|g| GroupListing {
                group_id: g.group_id.0.as_str().to_string(),
                protocol_type: g.protocol_type.as_str().to_string(),
                state: g.group_state.as_str().to_string(),
            }));
        }
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(listed)
    }

    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let connection = self.coordinator(group).await?;
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
        let response = connection
            .send(&request, DESCRIBE_GROUPS_VERSION_MAX)
            .await?;
        let described = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol("DescribeGroups answered no group".into()))?;
        check(
            described.error_code,
            described.error_message.as_ref(),
            group,
        )?;
        Ok(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.as_str().to_string(),
            protocol: described.protocol_data.as_str().to_string(),
            members: described
                .members
                .iter()
                .map(|m| GroupMemberDescription {
                    member_id: m.member_id.as_str().to_string(),
                    instance_id: m.group_instance_id.as_ref().map(|i| i.as_str().to_string()),
                    client_id: m.client_id.as_str().to_string(),
                    client_host: m.client_host.as_str().to_string(),
                    assignment: m.member_assignment.clone(),
                    metadata: m.member_metadata.clone(),
                })
                .collect(),
        })
    }

    /// Every partition the group committed for, with its lag.
    pub async fn group_lag(&self, group: &str) -> Result<Vec<GroupPartitionLag>, ClientError> {
        let committed = committed_offsets(&self.cluster, group, None).await?;
        let wanted: Vec<(String, i32)> = committed.keys().cloned().collect();
        let ends = list_offsets(&self.cluster, &wanted, LATEST).await?;
        let mut lags = Vec::with_capacity(committed.len());
        for ((topic, partition), offset) in committed {
            let end = ends
                .get(&(topic.clone(), partition))
                .copied()
                .flatten()
                .unwrap_or(0);
            lags.push(GroupPartitionLag {
                lag: if offset < 0 {
                    end
                } else {
                    (end - offset).max(0)
                },
                topic,
                partition,
                committed: offset,
                end,
            });
        }
        Ok(lags)
    }

    /// Deletes a group and its committed offsets (it must have no members).
    pub async fn delete_group(&self, group: &str) -> Result<(), ClientError> {
        use kafka_protocol::messages::DeleteGroupsRequest;
        let connection = self.coordinator(group).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
        let response = connection.send(&request, DELETE_GROUPS_VERSION_MAX).await?;
        let result = response
            .results
            .first()
            .ok_or_else(|| ClientError::Protocol("DeleteGroups answered no group".into()))?;
        check(result.error_code, None, group)
    }

    /// Sets the group's committed offsets (the group must have no active
    /// members, as in Kafka).
    /// Every offset `group` has committed, by (topic, partition).
    pub async fn committed_offsets(
        &self,
        group: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
        committed_offsets(&self.cluster, group, None).await
    }

    /// The group's committed offsets on `partitions` with their metadata;
    /// with `require_stable`, none a transaction still holds pending (see
    /// [`committed_with_metadata`]).
    pub async fn committed_with_metadata(
        &self,
        group: &str,
        partitions: &[(String, i32)],
        require_stable: bool,
    ) -> Result<BTreeMap<(String, i32), Committed>, ClientError> {
        committed_with_metadata(&self.cluster, group, partitions, require_stable).await
    }

    pub async fn reset_group_offsets(
        &self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        commit_offsets(&self.cluster, group, -1, "", offsets).await
    }
}

/// FindCoordinator's key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// FindCoordinator's key type of a transactional id.
pub(crate) const KEY_TYPE_TRANSACTION: i8 = 1;

/// FindCoordinator for a consumer group.
pub(crate) async fn coordinator(
    cluster: &Cluster,
    group: &str,
) -> Result<Arc<Connection>, ClientError> {
    coordinator_of(cluster, KEY_TYPE_GROUP, group).await
}

/// FindCoordinator for a key of `key_type` (a group or a transactional id),
/// asked again while the coordinator is moving or loading
/// (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
/// COORDINATOR_LOAD_IN_PROGRESS) or the connection drops.
pub(crate) async fn coordinator_of(
    cluster: &Cluster,
    key_type: i8,
    key: &str,
) -> Result<Arc<Connection>, ClientError> {
    cluster
        .retry(&[], || async {
            let connection = cluster.any_connection().await?;
            let version =
                connection.version::<FindCoordinatorRequest>(FIND_COORDINATOR_VERSION_MAX)?;
            let request = if version >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s(key)])
            } else {
                FindCoordinatorRequest::default().with_key(s(key))
            }
            .with_key_type(key_type);
            let body = connection.send_for_body(&request, version).await?;
            let (code, host, port) = coordinator_answer(body, version)?;
            if code != codes::NONE {
                return Err(ClientError::kafka(code, None, None));
            }
            // Reached where the answer says: a coordinator may be a broker
            // this client's metadata does not list yet.
            cluster.connection_to(&format!("{host}:{port}")).await
        })
        .await
}

/// (error code, host, port) of a FindCoordinator answer. librdkafka's mock
/// writes a null host beside an error, off the schema: such an answer is
/// read for its error code alone (first, after v1's throttle time).
fn coordinator_answer(body: Bytes, version: i16) -> Result<(i16, String, i32), ClientError> {
    let error_at = if version >= 1 { 4 } else { 0 };
    let decoded = if version >= 4 {
        let mut body = body;
        Ok(FindCoordinatorResponse::decode(&mut body, version)
            .map_err(|e| ClientError::Protocol(format!("response body: {e}")))?)
    } else {
        decode_or_error_code::<FindCoordinatorResponse>(body, version, error_at)?
    };
    Ok(match decoded {
        Ok(response) => match response.coordinators.first() {
            Some(c) if version >= 4 => (c.error_code, c.host.to_string(), c.port),
            _ => (
                response.error_code,
                response.host.to_string(),
                response.port,
            ),
        },
        Err(code) => (code, String::new(), -1),
    })
}

/// The group's committed offsets: for `partitions`, or all when `None`.
/// Partitions without a commit are reported at -1.
pub(crate) async fn committed_offsets(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[(String, i32)]>,
) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
    // A coordinator that moved or is still loading is found again.
    cluster
        .retry(&[], || committed_offsets_once(cluster, group, partitions))
        .await
}

async fn committed_offsets_once(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[(String, i32)]>,
) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
    let found = offset_fetch(cluster, group, partitions, false).await?;
    Ok(found
        .into_iter()
        .map(|(at, committed)| (at, committed.offset))
        .collect())
}

/// A group's committed offset on one partition, with the metadata it was
/// committed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// -1 when nothing is committed.
    pub offset: i64,
    pub metadata: String,
}

/// The group's committed offsets on `partitions`, with their metadata.
/// `require_stable` (OffsetFetch v7 on): offsets a transaction holds
/// pending make the coordinator answer UNSTABLE_OFFSET_COMMIT, retried
/// until the transaction ends.
pub(crate) async fn committed_with_metadata(
    cluster: &Cluster,
    group: &str,
    partitions: &[(String, i32)],
    require_stable: bool,
) -> Result<BTreeMap<(String, i32), Committed>, ClientError> {
    cluster
        .retry(&[], || {
            offset_fetch(cluster, group, Some(partitions), require_stable)
        })
        .await
}

async fn offset_fetch(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[(String, i32)]>,
    require_stable: bool,
) -> Result<BTreeMap<(String, i32), Committed>, ClientError> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let connection = coordinator(cluster, group).await?;
    let version = connection.version::<OffsetFetchRequest>(OFFSET_FETCH_VERSION_MAX)?;
    let mut request = OffsetFetchRequest::default().with_group_id(GroupId(s(group)));
    if version >= REQUIRE_STABLE_FROM {
        request.require_stable = require_stable;
    }
    request.topics = partitions.map(|partitions| {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions {
            by_topic.entry(topic).or_default().push(*partition);
        }
        by_topic
            .into_iter()
            .map(|(topic, indexes)| {
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_indexes(indexes)
            })
            .collect()
    });
    let response = connection.send_versioned(&request, version).await?;
    check(response.error_code, None, group)?;
    let mut found = BTreeMap::new();
    for topic in &response.topics {
        for p in &topic.partitions {
            check(p.error_code, None, topic.name.0.as_str())?;
            found.insert(
                (topic.name.0.as_str().to_string(), p.partition_index),
                Committed {
                    offset: p.committed_offset,
                    metadata: p
                        .metadata
                        .as_ref()
                        .map(|m| m.as_str().to_string())
                        .unwrap_or_default(),
                },
            );
        }
    }
    Ok(found)
}

/// OffsetCommit for a group member (or, with generation -1 and no member
/// id, for a consumer outside group membership).
pub(crate) async fn commit_offsets(
    cluster: &Cluster,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(String, i32, i64)],
) -> Result<(), ClientError> {
    cluster
        .retry(&[], || {
            commit_offsets_once(cluster, group, generation, member_id, offsets)
        })
        .await
}

async fn commit_offsets_once(
    cluster: &Cluster,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(String, i32, i64)],
) -> Result<(), ClientError> {
    let connection = coordinator(cluster, group).await?;
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (topic, partition, offset) in offsets {
        by_topic.entry(topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_metadata(Some(StrBytes::default())),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = connection.send(&request, OFFSET_COMMIT_VERSION_MAX).await?;
    for topic in &response.topics {
        for p in &topic.partitions {
            if p.error_code != codes::NONE {
                return Err(ClientError::kafka(
                    p.error_code,
                    Some(topic.name.0.as_str()),
                    Some(p.partition_index),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn a_find_coordinator_answer_gives_the_coordinator_address() {
        let response = FindCoordinatorResponse::default()
            .with_node_id(kafka_protocol::messages::BrokerId(2))
            .with_host(s("127.0.0.1"))
            .with_port(9093);
        let mut body = bytes::BytesMut::new();
        response.encode(&mut body, 3).unwrap();
        assert_eq!(
            coordinator_answer(body.freeze(), 3).unwrap(),
            (codes::NONE, "127.0.0.1".to_string(), 9093)
        );
    }

    #[test]
    fn an_error_answer_with_a_null_host_is_read_for_its_code() {
        // v3 as librdkafka's mock writes it: throttle, error, message,
        // node -1, a null host, port -1, no tags.
        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&codes::NOT_COORDINATOR.to_be_bytes());
        body.extend_from_slice(&[4, b'm', b'o', b'v']);
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.push(0);
        body.extend_from_slice(&(-1i32).to_be_bytes());
        let (code, _, _) = coordinator_answer(Bytes::from(body), 3).unwrap();
        assert_eq!(code, codes::NOT_COORDINATOR);
    }

    #[test]
    fn an_undecodable_answer_without_an_error_code_is_a_protocol_error() {
        let body = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0xff]);
        assert!(matches!(
            coordinator_answer(body, 3),
            Err(ClientError::Protocol(_))
        ));
    }
}
