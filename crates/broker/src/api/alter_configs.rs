//! AlterConfigs and IncrementalAlterConfigs: a topic's config overrides,
//! changed live and persisted with the topic (`LogManager::alter_topic_config`).
//!
//! AlterConfigs replaces the topic's whole set of overrides with the ones
//! given (a null value removes one). IncrementalAlterConfigs changes only
//! the keys named: SET (0) and DELETE (1), and APPEND (2) / SUBTRACT (3) on
//! the one list-typed key, `cleanup.policy`. With `validate_only` nothing
//! changes. Broker resources are not alterable here (their settings come
//! from `strata.toml`): INVALID_REQUEST, with a message saying so.
//!
//! Each resource needs ALTER_CONFIGS (see `config_resource`), else it
//! answers its type's authorization error and nothing changes.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use super::config_resource::{self, RESOURCE_TOPIC};
use crate::ErrorCode;
use crate::acl::Operation;
use crate::auth::Caller;
use strata_log::LogError;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// One resource's outcome: (error, message).
type Outcome = (ErrorCode, Option<String>);

pub(super) fn alter_configs(
    ctx: &BrokerContext,
    request: &AlterConfigsRequest,
    caller: &Caller,
) -> AlterConfigsResponse {
    let responses = request
        .resources
        .iter()
        .map(|resource| {
            let changes: BTreeMap<String, Option<String>> = resource
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.as_str().to_string(),
                        c.value.as_ref().map(|v| v.as_str().to_string()),
                    )
                })
                .collect();
            let (code, message) = apply(
                ctx,
                caller,
                resource.resource_type,
                resource.resource_name.as_str(),
                Ok(changes),
                true,
                request.validate_only,
            );
            AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code.code())
                .with_error_message(message.map(StrBytes::from_string))
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

pub(super) fn incremental_alter_configs(
    ctx: &BrokerContext,
    request: &IncrementalAlterConfigsRequest,
    caller: &Caller,
) -> IncrementalAlterConfigsResponse {
    let responses = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let changes = incremental_changes(ctx, resource.resource_type, name, resource);
            let (code, message) = apply(
                ctx,
                caller,
                resource.resource_type,
                name,
                changes,
                false,
                request.validate_only,
            );
            IncrementalResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code.code())
                .with_error_message(message.map(StrBytes::from_string))
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// The operations of one resource as plain changes (APPEND and SUBTRACT
/// worked out against the topic's current list).
fn incremental_changes(
    ctx: &BrokerContext,
    resource_type: i8,
    name: &str,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> Result<BTreeMap<String, Option<String>>, Outcome> {
    let mut changes = BTreeMap::new();
    for config in &resource.configs {
        let key = config.name.as_str().to_string();
        let value = config.value.as_ref().map(|v| v.as_str().to_string());
        match config.config_operation {
            OP_SET => {
                changes.insert(key, Some(value.unwrap_or_default()));
            }
            OP_DELETE => {
                changes.insert(key, None);
            }
            OP_APPEND | OP_SUBTRACT if resource_type == RESOURCE_TOPIC => {
                let current = ctx
                    .log
                    .topic(name)
                    .and_then(|t| t.config.get(&key))
                    .unwrap_or_default();
                let mut items: Vec<String> = current
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                for item in value.unwrap_or_default().split(',').map(str::trim) {
                    if config.config_operation == OP_APPEND {
                        if !item.is_empty() && !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                changes.insert(key, Some(items.join(",")));
            }
            OP_APPEND | OP_SUBTRACT => {}
            other => {
                return Err((
                    ErrorCode::InvalidRequest,
                    Some(format!("unknown config operation {other} for {key}")),
                ));
            }
        }
    }
    Ok(changes)
}

fn apply(
    ctx: &BrokerContext,
    caller: &Caller,
    resource_type: i8,
    name: &str,
    changes: Result<BTreeMap<String, Option<String>>, Outcome>,
    replace: bool,
    validate_only: bool,
) -> Outcome {
    let operation = Operation::AlterConfigs;
    if let Err(refusal) =
        config_resource::authorize(&ctx.acls, caller, operation, resource_type, name)
    {
        return (
            refusal,
            Some(format!(
                "{} is not allowed ALTER_CONFIGS on {name}",
                caller.principal
            )),
        );
    }
    if resource_type != RESOURCE_TOPIC {
        return (
            ErrorCode::InvalidRequest,
            Some("only topic configs can be altered; broker settings come from strata.toml".into()),
        );
    }
    let changes = match changes {
        Ok(changes) => changes,
        Err(outcome) => return outcome,
    };
    let Some(topic) = ctx.log.topic(name) else {
        return (
            ErrorCode::UnknownTopicOrPartition,
            Some(format!("topic '{name}' does not exist")),
        );
    };
    let result = if validate_only {
        let mut overrides = if replace {
            BTreeMap::new()
        } else {
            topic.metadata.config.clone()
        };
        for (key, value) in &changes {
            match value {
                Some(value) => overrides.insert(key.clone(), value.clone()),
                None => overrides.remove(key),
            };
        }
        ctx.log.defaults().with_overrides(&overrides).map(|_| ())
    } else {
        ctx.log
            .alter_topic_config(name, &changes, replace)
            .map(|_| ())
    };
    match result {
        Ok(()) => (ErrorCode::None, None),
        Err(error @ LogError::InvalidConfig { .. }) => {
            (ErrorCode::InvalidConfig, Some(error.to_string()))
        }
        Err(error) => (ErrorCode::from(&error), Some(error.to_string())),
    }
}
