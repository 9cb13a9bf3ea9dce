//! DescribeConfigs: a topic's effective log config under Kafka's names,
//! each marked as a topic override or a default. Broker resources answer
//! with no entries (their settings are not exposed by name yet).
//!
//! Each resource needs DESCRIBE_CONFIGS (see `config_resource`), else it
//! answers its type's authorization error and no entries.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use super::config_resource::{self, RESOURCE_TOPIC};
use crate::ErrorCode;
use crate::acl::Operation;
use crate::auth::Caller;
use strata_log::CONFIG_KEYS;

const SOURCE_TOPIC_OVERRIDE: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;
/// DescribeConfigs v3 added each entry's type.
const CONFIG_TYPE_VERSION: i16 = 3;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DescribeConfigsRequest,
    version: i16,
    caller: &Caller,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_message(None);
            let name = resource.resource_name.as_str();
            let operation = Operation::DescribeConfigs;
            let allowed = config_resource::authorize(
                &ctx.acls,
                caller,
                operation,
                resource.resource_type,
                name,
            );
            if let Err(refusal) = allowed {
                return result
                    .with_error_code(refusal.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "{} is not allowed DESCRIBE_CONFIGS on {name}",
                        caller.principal
                    ))));
            }
            if resource.resource_type != RESOURCE_TOPIC {
                return result;
            }
            let Some(topic) = ctx.log.topic(resource.resource_name.as_str()) else {
                return result
                    .with_error_code(ErrorCode::UnknownTopicOrPartition.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "topic '{}' does not exist",
                        resource.resource_name.as_str()
                    ))));
            };
            let wanted = |key: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == key))
            };
            let configs = CONFIG_KEYS
                .iter()
                .filter(|key| wanted(key))
                .map(|&key| {
                    let source = if topic.metadata.config.contains_key(key) {
                        SOURCE_TOPIC_OVERRIDE
                    } else {
                        SOURCE_DEFAULT
                    };
                    let mut entry = DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(key.to_string()))
                        .with_value(topic.config.get(key).map(StrBytes::from_string))
                        .with_config_source(source);
                    if version >= CONFIG_TYPE_VERSION {
                        entry = entry.with_config_type(config_type(key));
                    }
                    entry
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn config_type(key: &str) -> i8 {
    match key {
        "cleanup.policy" => TYPE_LIST,
        "min.cleanable.dirty.ratio" => TYPE_DOUBLE,
        "index.interval.bytes" | "max.message.bytes" | "segment.bytes" | "segment.index.bytes" => {
            TYPE_INT
        }
        _ => TYPE_LONG,
    }
}
