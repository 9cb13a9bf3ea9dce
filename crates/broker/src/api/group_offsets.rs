//! OffsetCommit and OffsetFetch: committed positions of consumer groups,
//! stored durably by the group coordinator.
//!
//! Authorization, as Kafka: OffsetCommit needs READ on the group (else every
//! partition answers GROUP_AUTHORIZATION_FAILED) and READ on each topic
//! (else its partitions answer TOPIC_AUTHORIZATION_FAILED); nothing refused
//! is stored. OffsetFetch needs DESCRIBE on the group; topics the caller may
//! not DESCRIBE are left out of an "every partition" answer and answer
//! TOPIC_AUTHORIZATION_FAILED when named.

use std::time::Instant;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::group::offsets::{CommittedOffset, PartitionOffset};
use crate::group::{Committer, OFFSET_METADATA_BYTES_MAX};

/// OffsetFetch v8 asks for several groups at once.
const FETCH_GROUPS_VERSION: i16 = 8;
/// OffsetFetch v2 added the top-level error code.
const FETCH_TOP_ERROR_VERSION: i16 = 2;

pub(super) fn offset_commit(
    ctx: &BrokerContext,
    request: &OffsetCommitRequest,
    caller: &Caller,
) -> OffsetCommitResponse {
    let group = request.group_id.0.as_str();
    let acls = ctx.acls.snapshot();
    let readable =
        |resource: Resource<'_>| ctx.acls.allows(&acls, caller, Operation::Read, resource);
    let group_readable = readable(Resource::group(group));
    let committer = Committer {
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.as_str().to_string(),
        instance_id: request
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string()),
    };
    let allowed = if group_readable {
        ctx.groups.check_commit(group, &committer, Instant::now())
    } else {
        ErrorCode::GroupAuthorizationFailed
    };
    let now_ms = strata_record::time::now_ms();
    // (topic response, partition response) of each offset to store.
    let mut to_store: Vec<(usize, usize)> = Vec::new();
    let mut offsets: Vec<PartitionOffset> = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for (t, topic) in request.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let log_topic = ctx.log.topic(name);
        let topic_readable = group_readable && readable(Resource::topic(name));
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (p, partition) in topic.partitions.iter().enumerate() {
            let metadata = partition.committed_metadata.as_ref().map(|m| m.as_str());
            let error = if !group_readable {
                ErrorCode::GroupAuthorizationFailed
            } else if !topic_readable {
                ErrorCode::TopicAuthorizationFailed
            } else if allowed != ErrorCode::None {
                allowed
            } else if log_topic
                .as_ref()
                .and_then(|t| t.partition(partition.partition_index))
                .is_none()
            {
                ErrorCode::UnknownTopicOrPartition
            } else if metadata.is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX) {
                ErrorCode::OffsetMetadataTooLarge
            } else {
                to_store.push((t, p));
                offsets.push(PartitionOffset {
                    topic: name.to_string(),
                    partition: partition.partition_index,
                    committed: CommittedOffset {
                        offset: partition.committed_offset,
                        leader_epoch: partition.committed_leader_epoch,
                        metadata: metadata.map(str::to_string),
                        commit_time_ms: now_ms,
                    },
                });
                ErrorCode::None
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(partition.partition_index)
                    .with_error_code(error.code()),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    if !offsets.is_empty()
        && let Err(error) = ctx.groups.commit(group, &offsets)
    {
        tracing::error!(group, "storing committed offsets failed: {error}");
        for (t, p) in to_store {
            topics[t].partitions[p].error_code = ErrorCode::CoordinatorNotAvailable.code();
        }
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// What one group's fetch found, before it is shaped for the version.
struct FetchedTopic {
    name: TopicName,
    /// (index, committed offset, error: UNSTABLE_OFFSET_COMMIT while a
    /// transaction holds an offset for it and the request requires stable
    /// offsets)
    partitions: Vec<(i32, Option<CommittedOffset>, ErrorCode)>,
}

/// Looks up `wanted` (topic, partitions) for `group`, or everything the
/// group committed when `wanted` is `None`.
fn fetch_group(
    ctx: &BrokerContext,
    group: &str,
    wanted: Option<Vec<(TopicName, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<FetchedTopic>, ErrorCode> {
    let stability = |topic: &str, partition: i32| {
        if require_stable && ctx.transactions.has_pending_offset(group, topic, partition) {
            ErrorCode::UnstableOffsetCommit
        } else {
            ErrorCode::None
        }
    };
    let fail = |error: crate::group::offsets::OffsetStoreError| {
        tracing::error!(group, "reading committed offsets failed: {error}");
        ErrorCode::CoordinatorNotAvailable
    };
    let Some(wanted) = wanted else {
        let mut found: Vec<FetchedTopic> = Vec::new();
        for entry in ctx.groups.committed_all(group).map_err(fail)? {
            let stable = stability(&entry.topic, entry.partition);
            let committed = (entry.partition, Some(entry.committed), stable);
            match found.last_mut() {
                Some(last) if last.name.0.as_str() == entry.topic => {
                    last.partitions.push(committed)
                }
                _ => found.push(FetchedTopic {
                    name: TopicName(StrBytes::from_string(entry.topic)),
                    partitions: vec![committed],
                }),
            }
        }
        return Ok(found);
    };
    wanted
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|p| {
                    ctx.groups
                        .committed(group, name.0.as_str(), p)
                        .map(|c| (p, c, stability(name.0.as_str(), p)))
                        .map_err(fail)
                })
                .collect::<Result<_, _>>()?;
            Ok(FetchedTopic { name, partitions })
        })
        .collect()
}

/// [`fetch_group`] for `caller`: GROUP_AUTHORIZATION_FAILED without
/// DESCRIBE on the group; the topics it may not DESCRIBE left out of an
/// "every partition" answer, and answered TOPIC_AUTHORIZATION_FAILED (no
/// offset) when named.
fn fetch_authorized(
    ctx: &BrokerContext,
    caller: &Caller,
    group: &str,
    wanted: Option<Vec<(TopicName, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<FetchedTopic>, ErrorCode> {
    let acls = ctx.acls.snapshot();
    let describable = |resource: Resource<'_>| {
        ctx.acls
            .allows(&acls, caller, Operation::Describe, resource)
    };
    if !describable(Resource::group(group)) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    let Some(wanted) = wanted else {
        let mut found = fetch_group(ctx, group, None, require_stable)?;
        found.retain(|topic| describable(Resource::topic(topic.name.0.as_str())));
        return Ok(found);
    };
    let (allowed, refused): (Vec<_>, Vec<_>) = wanted
        .into_iter()
        .partition(|(name, _)| describable(Resource::topic(name.0.as_str())));
    let mut found = fetch_group(ctx, group, Some(allowed), require_stable)?;
    found.extend(refused.into_iter().map(|(name, partitions)| {
        FetchedTopic {
            name,
            partitions: partitions
                .into_iter()
                .map(|p| (p, None, ErrorCode::TopicAuthorizationFailed))
                .collect(),
        }
    }));
    Ok(found)
}

/// (offset, leader epoch, metadata) as the response carries them; a
/// partition without a commit is offset -1 with empty metadata.
fn shown(committed: Option<CommittedOffset>) -> (i64, i32, StrBytes) {
    match committed {
        Some(c) => (
            c.offset,
            c.leader_epoch,
            StrBytes::from_string(c.metadata.unwrap_or_default()),
        ),
        None => (-1, -1, StrBytes::default()),
    }
}

pub(super) fn offset_fetch(
    ctx: &BrokerContext,
    request: &OffsetFetchRequest,
    version: i16,
    caller: &Caller,
) -> OffsetFetchResponse {
    if version >= FETCH_GROUPS_VERSION {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|topics| {
                    topics
                        .iter()
                        .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                        .collect()
                });
                group_response(ctx, caller, &g.group_id, wanted, request.require_stable)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.clone(), t.partition_indexes.clone()))
            .collect()
    });
    let requested: Vec<(TopicName, Vec<i32>)> = wanted.clone().unwrap_or_default();
    match fetch_authorized(
        ctx,
        caller,
        request.group_id.0.as_str(),
        wanted,
        request.require_stable,
    ) {
        Ok(found) => OffsetFetchResponse::default().with_topics(laid_out(
            found,
            |name, partitions| {
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(partitions)
            },
            |index, offset, epoch, metadata, error| {
                OffsetFetchResponsePartition::default()
                    .with_partition_index(index)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(metadata))
                    .with_error_code(error.code())
            },
        )),
        Err(error) if version >= FETCH_TOP_ERROR_VERSION => {
            OffsetFetchResponse::default().with_error_code(error.code())
        }
        // v1 has only per-partition errors.
        Err(error) => OffsetFetchResponse::default().with_topics(
            requested
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(name)
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|index| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(index)
                                        .with_committed_offset(-1)
                                        .with_error_code(error.code())
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    }
}

fn group_response(
    ctx: &BrokerContext,
    caller: &Caller,
    group_id: &GroupId,
    wanted: Option<Vec<(TopicName, Vec<i32>)>>,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let response = OffsetFetchResponseGroup::default().with_group_id(group_id.clone());
    match fetch_authorized(ctx, caller, group_id.0.as_str(), wanted, require_stable) {
        Ok(found) => response.with_topics(laid_out(
            found,
            |name, partitions| {
                OffsetFetchResponseTopics::default()
                    .with_name(name)
                    .with_partitions(partitions)
            },
            |index, offset, epoch, metadata, error| {
                OffsetFetchResponsePartitions::default()
                    .with_partition_index(index)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(metadata))
                    .with_error_code(error.code())
            },
        )),
        Err(error) => response.with_error_code(error.code()),
    }
}

/// Found offsets in one of the response layouts (the v1–v7 topics or the
/// v8+ groups' topics, which the protocol crate types apart): `topic` and
/// `partition` build its entries from (name, partitions) and (index,
/// offset, leader epoch, metadata, error).
fn laid_out<T, P>(
    found: Vec<FetchedTopic>,
    topic: impl Fn(TopicName, Vec<P>) -> T,
    partition: impl Fn(i32, i64, i32, StrBytes, ErrorCode) -> P,
) -> Vec<T> {
    found
        .into_iter()
        .map(|fetched| {
            let partitions = fetched
                .partitions
                .into_iter()
                .map(|(index, committed, error)| {
                    let (offset, epoch, metadata) = shown(committed);
                    partition(index, offset, epoch, metadata, error)
                })
                .collect();
            topic(fetched.name, partitions)
        })
        .collect()
}
