//! DescribeCluster: the cluster id, the controller and the brokers, as
//! admin clients ask for them (the same one-node picture Metadata gives).
//! Endpoint type 1 (brokers) is served; 2 (controllers) is refused with
//! UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker does.
//!
//! As in Kafka, anyone may ask; DESCRIBE on the cluster decides what the
//! authorized operations (when asked for) say: the caller's operations on
//! the cluster, or none.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use super::metadata::CLUSTER_ID;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::listener::Endpoint;

const ENDPOINT_BROKERS: i8 = 1;
/// UNSUPPORTED_ENDPOINT_TYPE.
const UNSUPPORTED_ENDPOINT_TYPE: i16 = 119;
/// "Not provided": the request did not ask for authorized operations.
const OPERATIONS_NOT_PROVIDED: i32 = i32::MIN;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &DescribeClusterRequest,
    endpoint: &Endpoint,
    caller: &Caller,
) -> DescribeClusterResponse {
    let operations = if !request.include_cluster_authorized_operations {
        OPERATIONS_NOT_PROVIDED
    } else if ctx
        .acls
        .authorize(caller, Operation::Describe, Resource::cluster())
    {
        ctx.acls.authorized_operations(caller, Resource::cluster())
    } else {
        0
    };
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_static_str(CLUSTER_ID))
        .with_cluster_authorized_operations(operations);
    if request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_error_code(UNSUPPORTED_ENDPOINT_TYPE)
            .with_error_message(Some(StrBytes::from_static_str(
                "strata has no separate controllers: ask for brokers (endpoint type 1)",
            )))
            .with_controller_id(BrokerId(-1));
    }
    let node = BrokerId(ctx.config.node_id);
    response.with_controller_id(node).with_brokers(vec![
        DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(StrBytes::from_string(endpoint.host.clone()))
            .with_port(endpoint.port),
    ])
}
