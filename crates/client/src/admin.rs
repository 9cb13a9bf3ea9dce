//! Administration: topics, partitions, offsets, consumer groups (a
//! group's coordinator and its committed offsets are `coordinator`'s) and
//! SCRAM users; ACLs are `acls`'.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, GroupId, ListGroupsRequest, TopicName,
};

pub use super::coordinator::Committed;
pub(crate) use super::coordinator::{
    KEY_TYPE_TRANSACTION, commit_offsets, committed_offsets, committed_with_metadata, coordinator,
    coordinator_of,
};
use super::coordinator::{check, s};
use super::fetcher::{EARLIEST, LATEST, list_offset, list_offsets};
use super::{ClientError, Cluster, Connection};
use strata_protocol::sasl::{Mechanism, SaltedPassword};

/// Newest DescribeLogDirs version this client sends.
const DESCRIBE_LOG_DIRS_VERSION_MAX: i16 = 4;
const CREATE_TOPICS_VERSION_MAX: i16 = 7;
const DELETE_TOPICS_VERSION_MAX: i16 = 5;
const CREATE_PARTITIONS_VERSION_MAX: i16 = 3;
const DESCRIBE_CONFIGS_VERSION_MAX: i16 = 4;
const LIST_GROUPS_VERSION_MAX: i16 = 4;
const DESCRIBE_GROUPS_VERSION_MAX: i16 = 5;
const DELETE_GROUPS_VERSION_MAX: i16 = 2;
const DESCRIBE_USER_SCRAM_CREDENTIALS_VERSION_MAX: i16 = 0;
const ALTER_USER_SCRAM_CREDENTIALS_VERSION_MAX: i16 = 0;
/// Request timeout given to the broker for admin operations.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

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

/// A user's SCRAM credential as DescribeUserScramCredentials shows it:
/// the mechanism and the iterations, nothing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredentialInfo {
    pub mechanism: Mechanism,
    pub iterations: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserScramCredentials {
    pub user: String,
    pub credentials: Vec<ScramCredentialInfo>,
}

/// One change of AlterUserScramCredentials. The password is salted by the
/// caller ([`SaltedPassword::generate`]): it never reaches the broker.
#[derive(Debug, Clone)]
pub enum ScramAlteration {
    Upsert {
        user: String,
        mechanism: Mechanism,
        salted: SaltedPassword,
    },
    Delete {
        user: String,
        mechanism: Mechanism,
    },
}

pub struct Admin {
    cluster: Arc<Cluster>,
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

    /// A topic's partitions, their offsets and its config.
    pub async fn describe_topic(&self, name: &str) -> Result<TopicDescription, ClientError> {
        let mut described = self.describe_partitions(name).await?;
        described.config = self.topic_config(name).await?;
        Ok(described)
    }

    /// [`describe_topic`](Self::describe_topic) without the config: only
    /// what DESCRIBE on the topic allows (its config needs
    /// DESCRIBE_CONFIGS too).
    pub async fn describe_partitions(&self, name: &str) -> Result<TopicDescription, ClientError> {
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
            config: BTreeMap::new(),
        })
    }

    /// A topic's config, as DescribeConfigs answers it.
    pub async fn topic_config(&self, name: &str) -> Result<BTreeMap<String, String>, ClientError> {
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

    /// Sets the group's committed offsets (the group must have no active
    /// members, as in Kafka).
    pub async fn reset_group_offsets(
        &self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        commit_offsets(&self.cluster, group, -1, "", offsets).await
    }

    /// The SCRAM credentials of `users`, or of every user when `users` is
    /// empty. A user without credentials is an error (RESOURCE_NOT_FOUND).
    pub async fn describe_user_scram_credentials(
        &self,
        users: &[&str],
    ) -> Result<Vec<UserScramCredentials>, ClientError> {
        use kafka_protocol::messages::DescribeUserScramCredentialsRequest;
        use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
        let connection = self.cluster.any_connection().await?;
        let named = (!users.is_empty()).then(|| {
            users
                .iter()
                .map(|user| UserName::default().with_name(s(user)))
                .collect()
        });
        let request = DescribeUserScramCredentialsRequest::default().with_users(named);
        let response = connection
            .send(&request, DESCRIBE_USER_SCRAM_CREDENTIALS_VERSION_MAX)
            .await?;
        check(response.error_code, response.error_message.as_ref(), "")?;
        response
            .results
            .iter()
            .map(|result| {
                let user = result.user.as_str();
                check(result.error_code, result.error_message.as_ref(), user)?;
                Ok(UserScramCredentials {
                    user: user.to_string(),
                    credentials: result
                        .credential_infos
                        .iter()
                        .filter_map(|info| {
                            Some(ScramCredentialInfo {
                                mechanism: Mechanism::from_scram_type(info.mechanism)?,
                                iterations: info.iterations,
                            })
                        })
                        .collect(),
                })
            })
            .collect()
    }

    /// Applies `alterations` in one request; the first user whose change
    /// failed fails the call (the others' changes stand, as in Kafka).
    pub async fn alter_user_scram_credentials(
        &self,
        alterations: &[ScramAlteration],
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::AlterUserScramCredentialsRequest;
        use kafka_protocol::messages::alter_user_scram_credentials_request::{
            ScramCredentialDeletion, ScramCredentialUpsertion,
        };
        let scram_type = |mechanism: Mechanism| {
            mechanism.scram_type().ok_or_else(|| {
                ClientError::Invalid(format!("{mechanism} is not a SCRAM mechanism"))
            })
        };
        let mut request = AlterUserScramCredentialsRequest::default();
        for alteration in alterations {
            match alteration {
                ScramAlteration::Upsert {
                    user,
                    mechanism,
                    salted,
                } => request.upsertions.push(
                    ScramCredentialUpsertion::default()
                        .with_name(s(user))
                        .with_mechanism(scram_type(*mechanism)?)
                        .with_iterations(i32::try_from(salted.iterations).unwrap_or(i32::MAX))
                        .with_salt(bytes::Bytes::from(salted.salt.clone()))
                        .with_salted_password(bytes::Bytes::from(salted.salted_password.clone())),
                ),
                ScramAlteration::Delete { user, mechanism } => request.deletions.push(
                    ScramCredentialDeletion::default()
                        .with_name(s(user))
                        .with_mechanism(scram_type(*mechanism)?),
                ),
            }
        }
        let connection = self.cluster.any_connection().await?;
        let response = connection
            .send(&request, ALTER_USER_SCRAM_CREDENTIALS_VERSION_MAX)
            .await?;
        for result in &response.results {
            check(
                result.error_code,
                result.error_message.as_ref(),
                result.user.as_str(),
            )?;
        }
        Ok(())
    }
}
