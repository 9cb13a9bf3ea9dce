//! Metadata: the broker list (this one), and each requested topic with its
//! id and partitions, all led by this node. Unknown topics are created when
//! the broker and the request both allow it.

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::broker::ErrorCode;
use crate::broker::listener::Endpoint;
use crate::log::{LogError, Topic};

/// Metadata v4 added allow_auto_topic_creation; before it, requests allowed it.
const AUTO_CREATE_FIELD_VERSION: i16 = 4;
/// Versions that added response fields (a field a version lacks is never written).
const CLUSTER_ID_VERSION: i16 = 2;
/// The id this one-node cluster reports (Metadata, DescribeCluster).
pub(super) const CLUSTER_ID: &str = "strata";
const LEADER_EPOCH_VERSION: i16 = 7;
const TOPIC_ID_VERSION: i16 = 10;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &MetadataRequest,
    version: i16,
    endpoint: &Endpoint,
) -> MetadataResponse {
    let node = BrokerId(ctx.config.node_id);
    let broker = MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(StrBytes::from_string(endpoint.host.clone()))
        .with_port(endpoint.port);
    let allow_create = ctx.config.auto_create_topics
        && (version < AUTO_CREATE_FIELD_VERSION || request.allow_auto_topic_creation);
    let topics = match &request.topics {
        // Null (or, before v1, empty) means every topic.
        None => ctx
            .log
            .topics()
            .iter()
            .map(|t| describe(t, node, version))
            .collect(),
        Some(list) if list.is_empty() && version == 0 => ctx
            .log
            .topics()
            .iter()
            .map(|t| describe(t, node, version))
            .collect(),
        Some(list) => list
            .iter()
            .map(|requested| {
                let name = requested
                    .name
                    .as_ref()
                    .map(|n| n.0.as_str().to_string())
                    .unwrap_or_default();
                lookup(ctx, &name, allow_create, node, version)
            })
            .collect(),
    };
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(
            (version >= CLUSTER_ID_VERSION).then(|| StrBytes::from_static_str(CLUSTER_ID)),
        )
        .with_controller_id(node)
        .with_topics(topics)
}

fn lookup(
    ctx: &BrokerContext,
    name: &str,
    allow_create: bool,
    node: BrokerId,
    version: i16,
) -> MetadataResponseTopic {
    let topic = match ctx.log.topic(name) {
        Some(topic) => Ok(topic),
        None if allow_create => {
            match ctx
                .log
                .create_topic(name, ctx.config.default_partitions, BTreeMap::new())
            {
                // Another request created it first: use that one.
                Err(LogError::TopicExists(_)) => ctx
                    .log
                    .topic(name)
                    .ok_or(ErrorCode::UnknownTopicOrPartition),
                created => created.map_err(|e| ErrorCode::from(&e)),
            }
        }
        None => Err(ErrorCode::UnknownTopicOrPartition),
    };
    match topic {
        Ok(topic) => describe(&topic, node, version),
        Err(code) => MetadataResponseTopic::default()
            .with_error_code(code.code())
            .with_name(Some(TopicName(StrBytes::from_string(name.to_string())))),
    }
}

fn describe(topic: &Topic, node: BrokerId, version: i16) -> MetadataResponseTopic {
    let partitions = (0..topic.metadata.partitions)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(node)
                .with_leader_epoch(if version >= LEADER_EPOCH_VERSION {
                    0
                } else {
                    -1
                })
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(
            topic.name().to_string(),
        ))))
        .with_topic_id(if version >= TOPIC_ID_VERSION {
            topic.id()
        } else {
            uuid::Uuid::nil()
        })
        .with_partitions(partitions)
}
