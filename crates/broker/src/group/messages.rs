//! What the coordinator is asked and what it answers: JoinGroup and
//! SyncGroup as it needs them, the group states, descriptions and listings.
//! Plain data, independent of the wire format (the API handlers translate).

use bytes::Bytes;
use std::time::Duration;
use tokio::sync::oneshot;

use crate::ErrorCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// The name Kafka's admin APIs use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

/// A JoinGroup request, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: a member without an id is given one and must rejoin
    /// with it (MEMBER_ID_REQUIRED), so a lost response leaves no ghost.
    pub require_known_member_id: bool,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinOutcome {
    pub error: ErrorCode,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only: every member with its metadata for the
    /// chosen protocol.
    pub members: Vec<JoinedMember>,
}

#[derive(Debug, Clone)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

impl JoinOutcome {
    /// The coordinator went away before answering (the broker is stopping).
    pub fn unavailable() -> Self {
        Self::error(ErrorCode::CoordinatorNotAvailable, "")
    }

    pub fn error(error: ErrorCode, member_id: &str) -> Self {
        Self {
            error,
            generation: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone)]
pub struct SyncOutcome {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    /// The coordinator went away before answering (the broker is stopping).
    pub fn unavailable() -> Self {
        Self::error(ErrorCode::CoordinatorNotAvailable)
    }

    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// Either an answer now, or a channel the coordinator completes later.
pub enum Pending<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// From the leader: (member id, assignment).
    pub assignments: Vec<(String, Bytes)>,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

/// A commit's requester, checked against the group's membership.
#[derive(Debug, Clone)]
pub struct Committer {
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
}
