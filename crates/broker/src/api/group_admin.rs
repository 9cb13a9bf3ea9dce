//! ListGroups, DescribeGroups and DeleteGroups.
//!
//! Authorization, as Kafka: ListGroups lists every group to a caller with
//! DESCRIBE on the cluster, else only the groups it may DESCRIBE;
//! DescribeGroups needs DESCRIBE on each group and DeleteGroups DELETE,
//! else GROUP_AUTHORIZATION_FAILED for that group.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;

/// ListGroups v4 reports (and filters by) group state; v5 group type.
const LIST_STATE_VERSION: i16 = 4;
const LIST_TYPE_VERSION: i16 = 5;
/// DescribeGroups v3 reports authorized operations.
const AUTHORIZED_OPERATIONS_VERSION: i16 = 3;
/// DescribeGroups v6 answers an unknown group with GROUP_ID_NOT_FOUND.
const GROUP_NOT_FOUND_VERSION: i16 = 6;
/// Every group here speaks Kafka's classic group protocol.
const GROUP_TYPE: &str = "classic";
/// State of a group the broker does not know, as Kafka reports it.
const DEAD: &str = "Dead";

/// Deletes each named group that has no members, with its committed offsets.
pub(super) fn delete_groups(
    ctx: &BrokerContext,
    request: &DeleteGroupsRequest,
    caller: &Caller,
) -> DeleteGroupsResponse {
    let results = request
        .groups_names
        .iter()
        .map(|group| {
            let code =
                if !ctx
                    .acls
                    .authorize(caller, Operation::Delete, Resource::group(group.0.as_str()))
                {
                    ErrorCode::GroupAuthorizationFailed
                } else if group.0.is_empty() {
                    ErrorCode::InvalidGroupId
                } else {
                    ctx.groups.delete(group.0.as_str())
                };
            DeletableGroupResult::default()
                .with_group_id(group.clone())
                .with_error_code(code.code())
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

pub(super) fn list_groups(
    ctx: &BrokerContext,
    request: &ListGroupsRequest,
    version: i16,
    caller: &Caller,
) -> ListGroupsResponse {
    let acls = ctx.acls.snapshot();
    let every_group = ctx
        .acls
        .allows(&acls, caller, Operation::Describe, Resource::cluster());
    let describable = |group: &str| {
        every_group
            || ctx
                .acls
                .allows(&acls, caller, Operation::Describe, Resource::group(group))
    };
    let matches_filter = |filter: &[StrBytes], value: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(value))
    };
    let groups = ctx
        .groups
        .list()
        .into_iter()
        .filter(|g| describable(&g.group_id))
        .filter(|g| matches_filter(&request.states_filter, g.state.name()))
        .filter(|_| matches_filter(&request.types_filter, GROUP_TYPE))
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(StrBytes::from_string(g.group_id).into())
                .with_protocol_type(StrBytes::from_string(g.protocol_type));
            if version >= LIST_STATE_VERSION {
                listed = listed.with_group_state(StrBytes::from_static_str(g.state.name()));
            }
            if version >= LIST_TYPE_VERSION {
                listed = listed.with_group_type(StrBytes::from_static_str(GROUP_TYPE));
            }
            listed
        })
        .collect();
    ListGroupsResponse::default()
        .with_error_code(ErrorCode::None.code())
        .with_groups(groups)
}

pub(super) fn describe_groups(
    ctx: &BrokerContext,
    request: &DescribeGroupsRequest,
    version: i16,
    caller: &Caller,
) -> DescribeGroupsResponse {
    let groups = request
        .groups
        .iter()
        .map(|group_id| {
            let described = DescribedGroup::default().with_group_id(group_id.clone());
            let resource = Resource::group(group_id.0.as_str());
            if !ctx.acls.authorize(caller, Operation::Describe, resource) {
                return described
                    .with_error_code(ErrorCode::GroupAuthorizationFailed.code())
                    .with_group_state(StrBytes::default());
            }
            let mut described = described;
            if version >= AUTHORIZED_OPERATIONS_VERSION && request.include_authorized_operations {
                described = described
                    .with_authorized_operations(ctx.acls.authorized_operations(caller, resource));
            }
            if group_id.0.is_empty() {
                return described
                    .with_error_code(ErrorCode::InvalidGroupId.code())
                    .with_group_state(StrBytes::from_static_str(DEAD));
            }
            let Some(group) = ctx.groups.describe(group_id.0.as_str()) else {
                if version >= GROUP_NOT_FOUND_VERSION {
                    return described
                        .with_error_code(ErrorCode::GroupIdNotFound.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "group {} does not exist",
                            group_id.0.as_str()
                        ))))
                        .with_group_state(StrBytes::from_static_str(DEAD));
                }
                return described.with_group_state(StrBytes::from_static_str(DEAD));
            };
            described
                .with_group_state(StrBytes::from_static_str(group.state.name()))
                .with_protocol_type(StrBytes::from_string(group.protocol_type))
                .with_protocol_data(StrBytes::from_string(group.protocol_name))
                .with_members(
                    group
                        .members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(StrBytes::from_string(m.member_id))
                                .with_group_instance_id(m.instance_id.map(StrBytes::from_string))
                                .with_client_id(StrBytes::from_string(m.client_id))
                                .with_client_host(StrBytes::from_string(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
