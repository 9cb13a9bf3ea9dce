//! The resources the config APIs (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs) name, and whose ACL guards each, as Kafka's:
//! a topic its own, a group its own, the broker, its loggers and client
//! metrics the cluster's.

use crate::ErrorCode;
use crate::acl::{Authorizer, Operation, Resource};
use crate::auth::Caller;

pub(super) const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

/// Whether `caller` may perform `operation` (DESCRIBE_CONFIGS or
/// ALTER_CONFIGS) on the config resource of `resource_type` named `name`;
/// the refusal is the resource type's authorization error. A type no ACL
/// guards is left to the handler to refuse.
pub(super) fn authorize(
    acls: &Authorizer,
    caller: &Caller,
    operation: Operation,
    resource_type: i8,
    name: &str,
) -> Result<(), ErrorCode> {
    let (resource, refusal) = match resource_type {
        RESOURCE_TOPIC => (Resource::topic(name), ErrorCode::TopicAuthorizationFailed),
        RESOURCE_GROUP => (Resource::group(name), ErrorCode::GroupAuthorizationFailed),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => {
            (Resource::cluster(), ErrorCode::ClusterAuthorizationFailed)
        }
        _ => return Ok(()),
    };
    if acls.authorize(caller, operation, resource) {
        Ok(())
    } else {
        Err(refusal)
    }
}
