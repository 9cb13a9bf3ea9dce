//! FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the
//! wire side of [`crate::group`]. JoinGroup and SyncGroup may answer
//! later (when the rebalance completes, when the leader's assignment
//! arrives): they return a channel the connection waits on.
//!
//! Authorization, as Kafka: FindCoordinator needs DESCRIBE on the group
//! (GROUP_AUTHORIZATION_FAILED) or the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) it asks about; JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup need READ on the group, and a
//! refused one never reaches the coordinator (no member joins, no group is
//! made).

use std::time::{Duration, Instant};

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::group::{JoinOutcome, JoinRequest, Pending, SyncOutcome, SyncRequest};
use crate::listener::Endpoint;

/// FindCoordinator v4 batches keys into `coordinators`.
const COORDINATOR_KEYS_VERSION: i16 = 4;
/// FindCoordinator v1 added the error message.
const COORDINATOR_MESSAGE_VERSION: i16 = 1;
/// Key types: consumer group, transactional id.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
/// JoinGroup v4 requires a known member id (MEMBER_ID_REQUIRED first).
const MEMBER_ID_REQUIRED_VERSION: i16 = 4;
/// JoinGroup v7 made the protocol name nullable.
const NULLABLE_PROTOCOL_VERSION: i16 = 7;
/// LeaveGroup v3 names the members leaving in a batch.
const LEAVE_BATCH_VERSION: i16 = 3;

fn text(s: &StrBytes) -> String {
    s.as_str().to_string()
}

fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub(super) fn find_coordinator(
    ctx: &BrokerContext,
    request: &FindCoordinatorRequest,
    version: i16,
    endpoint: &Endpoint,
    caller: &Caller,
) -> FindCoordinatorResponse {
    // This broker coordinates every group (and every transactional id); a
    // key type it does not know is an invalid request.
    let error_for = |key: &str| match request.key_type {
        KEY_TYPE_GROUP
            if !ctx
                .acls
                .authorize(caller, Operation::Describe, Resource::group(key)) =>
        {
            ErrorCode::GroupAuthorizationFailed
        }
        KEY_TYPE_TRANSACTION
            if !ctx.acls.authorize(
                caller,
                Operation::Describe,
                Resource::transactional_id(key),
            ) =>
        {
            ErrorCode::TransactionalIdAuthorizationFailed
        }
        KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION => ErrorCode::None,
        _ => ErrorCode::InvalidRequest,
    };
    // (node, port, host) of the answer: this broker, or none after an error.
    let located = |error: ErrorCode| {
        if error == ErrorCode::None {
            (
                ctx.config.node_id,
                endpoint.port,
                str_bytes(endpoint.host.clone()),
            )
        } else {
            (-1, -1, StrBytes::default())
        }
    };
    if version >= COORDINATOR_KEYS_VERSION {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let error = error_for(key.as_str());
                let (node, port, host) = located(error);
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(node.into())
                    .with_host(host)
                    .with_port(port)
                    .with_error_code(error.code())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let error = error_for(request.key.as_str());
    let (node, port, host) = located(error);
    let mut response = FindCoordinatorResponse::default()
        .with_error_code(error.code())
        .with_node_id(node.into())
        .with_host(host)
        .with_port(port);
    if version >= COORDINATOR_MESSAGE_VERSION && error != ErrorCode::None {
        let message = match error {
            ErrorCode::InvalidRequest => {
                format!("unknown coordinator key type {}", request.key_type)
            }
            _ => format!(
                "{} is not allowed DESCRIBE on {}",
                caller.principal,
                request.key.as_str()
            ),
        };
        response = response.with_error_message(Some(str_bytes(message)));
    }
    response
}

pub(super) fn join_group(
    ctx: &BrokerContext,
    request: &JoinGroupRequest,
    version: i16,
    client_id: &str,
    caller: &Caller,
) -> Pending<JoinOutcome> {
    if !ctx.acls.authorize(
        caller,
        Operation::Read,
        Resource::group(request.group_id.0.as_str()),
    ) {
        return Pending::Now(JoinOutcome::error(ErrorCode::GroupAuthorizationFailed, ""));
    }
    let millis = |ms: i32| Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    // v0 has no rebalance timeout: the session timeout stands in for it.
    let rebalance_timeout = if request.rebalance_timeout_ms > 0 {
        request.rebalance_timeout_ms
    } else {
        request.session_timeout_ms
    };
    let join = JoinRequest {
        group_id: text(&request.group_id.0),
        member_id: text(&request.member_id),
        instance_id: request.group_instance_id.as_ref().map(text),
        session_timeout: millis(request.session_timeout_ms),
        rebalance_timeout: millis(rebalance_timeout),
        protocol_type: text(&request.protocol_type),
        protocols: request
            .protocols
            .iter()
            .map(|p| (text(&p.name), p.metadata.clone()))
            .collect(),
        client_id: client_id.to_string(),
        client_host: caller.host.clone(),
        require_known_member_id: version >= MEMBER_ID_REQUIRED_VERSION,
    };
    ctx.groups.join(join, Instant::now())
}

pub(super) fn join_response(outcome: JoinOutcome, version: i16) -> JoinGroupResponse {
    let protocol_name = match outcome.protocol_name {
        Some(name) => Some(str_bytes(name)),
        None if version < NULLABLE_PROTOCOL_VERSION => Some(StrBytes::default()),
        None => None,
    };
    JoinGroupResponse::default()
        .with_error_code(outcome.error.code())
        .with_generation_id(outcome.generation)
        .with_protocol_type(outcome.protocol_type.map(str_bytes))
        .with_protocol_name(protocol_name)
        .with_leader(str_bytes(outcome.leader))
        .with_member_id(str_bytes(outcome.member_id))
        .with_members(
            outcome
                .members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(m.instance_id.map(str_bytes))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}

pub(super) fn sync_group(
    ctx: &BrokerContext,
    request: &SyncGroupRequest,
    caller: &Caller,
) -> Pending<SyncOutcome> {
    if !ctx.acls.authorize(
        caller,
        Operation::Read,
        Resource::group(request.group_id.0.as_str()),
    ) {
        return Pending::Now(SyncOutcome::error(ErrorCode::GroupAuthorizationFailed));
    }
    let sync = SyncRequest {
        group_id: text(&request.group_id.0),
        generation: request.generation_id,
        member_id: text(&request.member_id),
        instance_id: request.group_instance_id.as_ref().map(text),
        protocol_type: request.protocol_type.as_ref().map(text),
        protocol_name: request.protocol_name.as_ref().map(text),
        assignments: request
            .assignments
            .iter()
            .map(|a| (text(&a.member_id), a.assignment.clone()))
            .collect(),
    };
    ctx.groups.sync(sync, Instant::now())
}

pub(super) fn sync_response(outcome: SyncOutcome, _version: i16) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(outcome.error.code())
        .with_protocol_type(outcome.protocol_type.map(str_bytes))
        .with_protocol_name(outcome.protocol_name.map(str_bytes))
        .with_assignment(outcome.assignment)
}

pub(super) fn heartbeat(
    ctx: &BrokerContext,
    request: &HeartbeatRequest,
    caller: &Caller,
) -> HeartbeatResponse {
    if !ctx.acls.authorize(
        caller,
        Operation::Read,
        Resource::group(request.group_id.0.as_str()),
    ) {
        return HeartbeatResponse::default()
            .with_error_code(ErrorCode::GroupAuthorizationFailed.code());
    }
    let error = ctx.groups.heartbeat(
        request.group_id.0.as_str(),
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
        Instant::now(),
    );
    HeartbeatResponse::default().with_error_code(error.code())
}

pub(super) fn leave_group(
    ctx: &BrokerContext,
    request: &LeaveGroupRequest,
    version: i16,
    caller: &Caller,
) -> LeaveGroupResponse {
    let GroupId(group) = &request.group_id;
    if !ctx
        .acls
        .authorize(caller, Operation::Read, Resource::group(group.as_str()))
    {
        return LeaveGroupResponse::default()
            .with_error_code(ErrorCode::GroupAuthorizationFailed.code());
    }
    let leaving: Vec<(String, Option<String>)> = if version >= LEAVE_BATCH_VERSION {
        request
            .members
            .iter()
            .map(|m| (text(&m.member_id), m.group_instance_id.as_ref().map(text)))
            .collect()
    } else {
        vec![(text(&request.member_id), None)]
    };
    let errors = ctx.groups.leave(group.as_str(), &leaving, Instant::now());
    if version < LEAVE_BATCH_VERSION {
        let error = errors
            .first()
            .copied()
            .unwrap_or(ErrorCode::UnknownMemberId);
        return LeaveGroupResponse::default().with_error_code(error.code());
    }
    let members = leaving
        .into_iter()
        .zip(errors)
        .map(|((member_id, instance_id), error)| {
            MemberResponse::default()
                .with_member_id(str_bytes(member_id))
                .with_group_instance_id(instance_id.map(str_bytes))
                .with_error_code(error.code())
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}
