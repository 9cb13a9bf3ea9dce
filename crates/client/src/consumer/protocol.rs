//! The consumer's group protocol: type `consumer`, one protocol per
//! assignor, each with the same subscription; the leader assigns the
//! subscribed topics' partitions with the assignor the group chose.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::assignor::{self, Assignor, TopicPartition};
use crate::membership::{GroupProtocol, JoinedMember};
use crate::{ClientError, Cluster};

/// The protocol type of consumer groups.
pub const CONSUMER: &str = "consumer";

pub(super) struct ConsumerProtocol<'a> {
    pub topics: &'a [String],
    pub assignors: &'a [Assignor],
}

impl GroupProtocol for ConsumerProtocol<'_> {
    fn protocol_type(&self) -> &str {
        CONSUMER
    }

    fn protocols(&self) -> Result<Vec<(String, Bytes)>, ClientError> {
        let metadata = assignor::encode_subscription(self.topics)?;
        Ok(self
            .assignors
            .iter()
            .map(|a| (a.name().to_string(), metadata.clone()))
            .collect())
    }

    async fn assign(
        &self,
        cluster: &Arc<Cluster>,
        protocol: &str,
        members: &[JoinedMember],
    ) -> Result<BTreeMap<String, Bytes>, ClientError> {
        let assignor = Assignor::from_name(protocol).ok_or_else(|| {
            ClientError::Protocol(format!("the group chose an unknown assignor {protocol:?}"))
        })?;
        let mut subscriptions = BTreeMap::new();
        for member in members {
            let topics = assignor::decode_subscription(&member.metadata)?;
            subscriptions.insert(member.member_id.clone(), topics);
        }
        let counts = partition_counts(cluster, subscriptions.values().flatten()).await?;
        assignor
            .assign(&subscriptions, &counts)
            .into_iter()
            .map(|(member, partitions)| Ok((member, assignor::encode_assignment(&partitions)?)))
            .collect()
    }
}

/// The partition counts of `topics` that exist (a subscribed topic that
/// does not exist yet gets nothing), from freshly refreshed metadata.
pub async fn partition_counts<'t>(
    cluster: &Cluster,
    topics: impl Iterator<Item = &'t String>,
) -> Result<BTreeMap<String, i32>, ClientError> {
    let mut wanted: Vec<String> = topics.cloned().collect();
    wanted.sort();
    wanted.dedup();
    cluster.refresh(&wanted).await?;
    let mut counts = BTreeMap::new();
    for topic in &wanted {
        match cluster.topic(topic).await {
            Ok(info) => {
                counts.insert(topic.clone(), info.partitions.len() as i32);
            }
            Err(error) => tracing::debug!("not assigning {topic}: {error}"),
        }
    }
    Ok(counts)
}

/// The partitions of a consumer's assignment.
pub(super) fn assigned(bytes: &[u8]) -> Result<Vec<TopicPartition>, ClientError> {
    assignor::decode_assignment(bytes)
}
