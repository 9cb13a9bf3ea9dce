//! A group's (or a transactional id's) coordinator: finding it
//! (FindCoordinator, asked again while it moves or loads), and the offsets
//! a group commits there (OffsetFetch, OffsetCommit).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::connection::decode_or_error_code;
use super::error::codes;
use super::{ClientError, Cluster, Connection};

const FIND_COORDINATOR_VERSION_MAX: i16 = 4;
const OFFSET_FETCH_VERSION_MAX: i16 = 7;
/// OffsetFetch has `require_stable` from this version on (KIP-447).
const REQUIRE_STABLE_FROM: i16 = 7;
const OFFSET_COMMIT_VERSION_MAX: i16 = 8;

pub(crate) fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// An error code (and message) of an answer about `topic` as an error.
pub(crate) fn check(code: i16, message: Option<&StrBytes>, topic: &str) -> Result<(), ClientError> {
    if code == codes::NONE {
        return Ok(());
    }
    Err(ClientError::kafka(code, Some(topic), None).with_message(message.map(|m| m.as_str())))
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
