//! Metadata: the broker list (this one), and each requested topic with its
//! id and partitions, all led by this node. Unknown topics are created when
//! the broker and the request both allow it.
//!
//! As Kafka: a list of every topic leaves out those the caller may not
//! DESCRIBE; a topic named explicitly that the caller may not DESCRIBE
//! answers TOPIC_AUTHORIZATION_FAILED (whether it exists is not told), and
//! so does an unknown one it would create without CREATE on the cluster or
//! on the topic. Authorized operations are filled in when asked for.

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::listener::Endpoint;
use strata_log::{LogError, Topic};

/// Metadata v4 added allow_auto_topic_creation; before it, requests allowed it.
const AUTO_CREATE_FIELD_VERSION: i16 = 4;
/// Versions that added response fields (a field a version lacks is never written).
const CLUSTER_ID_VERSION: i16 = 2;
/// The id this one-node cluster reports (Metadata, DescribeCluster).
pub(super) const CLUSTER_ID: &str = "strata";
const LEADER_EPOCH_VERSION: i16 = 7;
const TOPIC_ID_VERSION: i16 = 10;
/// Metadata v8 added authorized operations (the cluster's up to v10).
const AUTHORIZED_OPERATIONS_VERSION: i16 = 8;
const CLUSTER_OPERATIONS_VERSION_MAX: i16 = 10;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &MetadataRequest,
    version: i16,
    endpoint: &Endpoint,
    caller: &Caller,
) -> MetadataResponse {
    let node = BrokerId(ctx.config.node_id);
    let broker = MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(StrBytes::from_string(endpoint.host.clone()))
        .with_port(endpoint.port);
    let allow_create = ctx.config.auto_create_topics
        && (version < AUTO_CREATE_FIELD_VERSION || request.allow_auto_topic_creation);
    let acls = ctx.acls.snapshot();
    let describable = |name: &str| {
        ctx.acls
            .allows(&acls, caller, Operation::Describe, Resource::topic(name))
    };
    let every_topic = match &request.topics {
        // Null (or, before v1, empty) means every topic.
        None => true,
        Some(list) => list.is_empty() && version == 0,
    };
    let mut topics: Vec<MetadataResponseTopic> = if every_topic {
        ctx.log
            .topics()
            .iter()
            .filter(|t| describable(t.name()))
            .map(|t| describe(t, node, version))
            .collect()
    } else {
        let may_create_any = allow_create
            && ctx
                .acls
                .permits(&acls, caller, Operation::Create, Resource::cluster());
        request
            .topics
            .iter()
            .flatten()
            .map(|requested| {
                let name = requested
                    .name
                    .as_ref()
                    .map(|n| n.0.as_str().to_string())
                    .unwrap_or_default();
                if !describable(&name) {
                    return refused(&name);
                }
                let may_create = allow_create
                    && (may_create_any
                        || ctx.acls.permits(
                            &acls,
                            caller,
                            Operation::Create,
                            Resource::topic(&name),
                        ));
                lookup(ctx, &name, allow_create, may_create, node, version)
            })
            .collect()
    };
    let operations_asked = version >= AUTHORIZED_OPERATIONS_VERSION;
    if operations_asked && request.include_topic_authorized_operations {
        for topic in topics
            .iter_mut()
            .filter(|t| t.error_code == ErrorCode::None.code())
        {
            let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
            topic.topic_authorized_operations = ctx
                .acls
                .authorized_operations(caller, Resource::topic(name));
        }
    }
    let mut response = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(
            (version >= CLUSTER_ID_VERSION).then(|| StrBytes::from_static_str(CLUSTER_ID)),
        )
        .with_controller_id(node)
        .with_topics(topics);
    if operations_asked
        && version <= CLUSTER_OPERATIONS_VERSION_MAX
        && request.include_cluster_authorized_operations
    {
        response.cluster_authorized_operations =
            if ctx
                .acls
                .permits(&acls, caller, Operation::Describe, Resource::cluster())
            {
                ctx.acls.authorized_operations(caller, Resource::cluster())
            } else {
                0
            };
    }
    response
}

/// A topic the caller may not see, or may not create: named back with
/// TOPIC_AUTHORIZATION_FAILED and nothing else.
fn refused(name: &str) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
}

/// The topic `name`, created if it is unknown and `allow_create`, which
/// the caller must be allowed (`may_create`).
fn lookup(
    ctx: &BrokerContext,
    name: &str,
    allow_create: bool,
    may_create: bool,
    node: BrokerId,
    version: i16,
) -> MetadataResponseTopic {
    let topic = match ctx.log.topic(name) {
        Some(topic) => Ok(topic),
        None if allow_create && !may_create => return refused(name),
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
