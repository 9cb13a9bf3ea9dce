//! CreateTopics: each topic with its partition count (-1: the broker
//! default) and Kafka-named config overrides. A single broker holds one
//! replica, so a replication factor other than 1 (or -1) is refused.
//!
//! Creating needs CREATE on the cluster or on the topic, else the topic
//! answers TOPIC_AUTHORIZATION_FAILED and is not created.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use strata_log::{LogError, PARTITIONS_MAX, validate_topic_name};

/// CreateTopics v5 added the created topic's settings to the response.
const SETTINGS_VERSION: i16 = 5;
/// CreateTopics v7 added topic ids.
const TOPIC_ID_VERSION: i16 = 7;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &CreateTopicsRequest,
    version: i16,
    caller: &Caller,
) -> CreateTopicsResponse {
    let acls = ctx.acls.snapshot();
    // CREATE on the cluster, else on each topic: the first is a probe.
    let may_create_any = ctx
        .acls
        .permits(&acls, caller, Operation::Create, Resource::cluster());
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let result = CreatableTopicResult::default().with_name(topic.name.clone());
            let partitions = if !topic.assignments.is_empty() {
                i32::try_from(topic.assignments.len()).unwrap_or(i32::MAX)
            } else if topic.num_partitions == -1 {
                ctx.config.default_partitions
            } else {
                topic.num_partitions
            };
            let overrides: BTreeMap<String, String> = topic
                .configs
                .iter()
                .filter_map(|c| {
                    Some((
                        c.name.as_str().to_string(),
                        c.value.as_ref()?.as_str().to_string(),
                    ))
                })
                .collect();
            let may_create = may_create_any
                || ctx
                    .acls
                    .allows(&acls, caller, Operation::Create, Resource::topic(name));
            let outcome = if !may_create {
                Err((
                    ErrorCode::TopicAuthorizationFailed,
                    format!("{} is not allowed to create topic {name}", caller.principal),
                ))
            } else if !matches!(topic.replication_factor, -1 | 1) {
                Err((
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "replication factor {} on a single broker",
                        topic.replication_factor
                    ),
                ))
            } else if request.validate_only {
                validate(ctx, name, partitions, &overrides)
                    .map(|()| None)
                    .map_err(|e| (ErrorCode::from(&e), e.to_string()))
            } else {
                ctx.log
                    .create_topic(name, partitions, overrides)
                    .map(Some)
                    .map_err(|e| (ErrorCode::from(&e), e.to_string()))
            };
            match outcome {
                Ok(created) => {
                    let mut result = result;
                    if version >= SETTINGS_VERSION {
                        result = result
                            .with_num_partitions(partitions)
                            .with_replication_factor(1);
                    }
                    if version >= TOPIC_ID_VERSION
                        && let Some(created) = created
                    {
                        result = result.with_topic_id(created.id());
                    }
                    result.with_error_message(None)
                }
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

fn validate(
    ctx: &BrokerContext,
    name: &str,
    partitions: i32,
    overrides: &BTreeMap<String, String>,
) -> Result<(), LogError> {
    validate_topic_name(name)?;
    if !(1..=PARTITIONS_MAX).contains(&partitions) {
        return Err(LogError::InvalidPartitionCount(partitions));
    }
    ctx.log.defaults().with_overrides(overrides)?;
    if ctx.log.topic(name).is_some() {
        return Err(LogError::TopicExists(name.to_string()));
    }
    Ok(())
}
