//! The group coordinator: Kafka's classic consumer-group protocol.
//!
//! Members join (JoinGroup), the coordinator waits until every known member
//! has (re)joined or the rebalance timeout passes, starts a new generation
//! and names a leader; the leader computes the assignment and hands it in
//! with SyncGroup; each member receives its part. Heartbeats keep a member
//! alive for its session timeout and tell it when to rejoin. The coordinator
//! never looks inside protocol metadata or assignments: they are passed
//! through, so any client-side assignor works.
//!
//! ```text
//!            join                     all joined / timeout        leader's sync
//! Empty ─────────────▶ PreparingRebalance ─────────────▶ CompletingRebalance ───────▶ Stable
//!   ▲                        ▲   │ no members left                 │                    │
//!   └────────────────────────┼───┘                                 │ join, leave,       │
//!                            └─────────────────────────────────────┴─ session expiry ───┘
//! ```
//!
//! Membership lives in memory: after a restart members find their ids
//! unknown and rejoin, as after a Kafka coordinator failover. Committed
//! offsets are durable ([`offsets`]).
//!
//! Requests that must wait (a JoinGroup until the rebalance completes, a
//! SyncGroup until the leader's assignment arrives) get a channel that the
//! coordinator completes later, from another member's request or from
//! [`GroupCoordinator::tick`].

pub mod offsets;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::broker::ErrorCode;
use offsets::{CommittedOffset, OffsetStore, OffsetStoreError, PartitionOffset};

/// Longest metadata string stored with a committed offset (Kafka's
/// `offset.metadata.max.bytes` default).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Timing rules for groups.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// How long the first rebalance of an empty group waits for more members
    /// before it completes (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay: Duration,
    /// Session timeouts a member may ask for.
    pub session_timeout_min: Duration,
    pub session_timeout_max: Duration,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay: Duration::from_secs(3),
            session_timeout_min: Duration::from_secs(6),
            session_timeout_max: Duration::from_secs(30 * 60),
        }
    }
}

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

    fn error(error: ErrorCode, member_id: &str) -> Self {
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

    fn error(error: ErrorCode) -> Self {
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

struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    last_heartbeat: Instant,
    awaiting_join: Option<oneshot::Sender<JoinOutcome>>,
    awaiting_sync: Option<oneshot::Sender<SyncOutcome>>,
    /// Order of arrival, for picking a leader deterministically.
    joined_seq: u64,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }
}

struct Group {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, valid until the deadline.
    pending_members: HashMap<String, Instant>,
    /// PreparingRebalance: when members that have not rejoined are dropped.
    rebalance_deadline: Option<Instant>,
    /// PreparingRebalance of a group that was empty: not complete before.
    join_not_before: Option<Instant>,
    /// Offsets have been committed for this group (it is listed even when
    /// it has no members).
    has_offsets: bool,
}

impl Group {
    fn new() -> Self {
        Self {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            join_not_before: None,
            has_offsets: false,
        }
    }

    fn member_by_instance(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.as_str())
    }

    /// Checks a request's member id (and static instance id) against the
    /// membership.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id
            && let Some(owner) = self.member_by_instance(instance)
            && owner != member_id
        {
            return Err(ErrorCode::FencedInstanceId);
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ErrorCode::UnknownMemberId)
        }
    }

    /// The protocol every member supports that most members prefer.
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().min_by_key(|m| m.joined_seq)?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let mut votes: Vec<(usize, &str)> = candidates.iter().map(|c| (0, *c)).collect();
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .map(|(name, _)| name.as_str())
                .find(|name| candidates.contains(name));
            if let Some(slot) = votes.iter_mut().find(|(_, c)| Some(*c) == choice) {
                slot.0 += 1;
            }
        }
        // The earliest candidate wins ties (the first member's preference).
        let best = votes.iter().map(|(n, _)| *n).max()?;
        votes
            .into_iter()
            .find(|(n, _)| *n == best)
            .map(|(_, name)| name.to_string())
    }

    /// Whether a joining member's protocols fit the group's.
    fn accepts(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols
            .iter()
            .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
    }

    /// Starts (or restarts) a rebalance: every member must rejoin.
    fn prepare_rebalance(&mut self, config: &GroupConfig, now: Instant) {
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                if let Some(waiting) = member.awaiting_sync.take() {
                    let _ = waiting.send(SyncOutcome::error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        if self.state == GroupState::Empty {
            self.join_not_before = Some(now + config.initial_rebalance_delay);
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        if self.state != GroupState::PreparingRebalance {
            self.rebalance_deadline = Some(now + timeout);
        }
        self.state = GroupState::PreparingRebalance;
    }

    /// Completes the join phase if every member has rejoined (and an empty
    /// group's initial delay has passed), or `force` (the deadline passed:
    /// members that did not rejoin are dropped).
    fn try_complete_join(&mut self, now: Instant, force: bool) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if !force {
            let all_joined = self.members.values().all(|m| m.awaiting_join.is_some());
            let delay_over = self.join_not_before.is_none_or(|t| now >= t);
            if !all_joined || !delay_over {
                return;
            }
        }
        self.members.retain(|_, m| m.awaiting_join.is_some());
        self.generation = self.generation.wrapping_add(1).max(1);
        self.rebalance_deadline = None;
        self.join_not_before = None;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            return;
        }
        self.protocol = self.select_protocol();
        let protocol = self.protocol.clone().unwrap_or_default();
        if self
            .leader
            .as_ref()
            .is_none_or(|l| !self.members.contains_key(l))
        {
            self.leader = self
                .members
                .iter()
                .min_by_key(|(_, m)| m.joined_seq)
                .map(|(id, _)| id.clone());
        }
        let leader = self.leader.clone().unwrap_or_default();
        let everyone: Vec<JoinedMember> = self
            .members
            .iter()
            .map(|(id, m)| JoinedMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata_for(&protocol),
            })
            .collect();
        self.state = GroupState::CompletingRebalance;
        for (id, member) in &mut self.members {
            member.last_heartbeat = now;
            member.assignment = Bytes::new();
            if let Some(waiting) = member.awaiting_join.take() {
                let _ = waiting.send(JoinOutcome {
                    error: ErrorCode::None,
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        everyone.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }

    /// The current generation, as told to a member that joins again with
    /// nothing changed.
    fn current(&self, member_id: &str) -> JoinOutcome {
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let members = if member_id == leader {
            self.members
                .iter()
                .map(|(id, m)| JoinedMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinOutcome {
            error: ErrorCode::None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: Some(protocol),
            leader,
            member_id: member_id.to_string(),
            members,
        }
    }

    /// Removes a member; the others rebalance (or the group empties).
    fn remove_member(&mut self, member_id: &str, config: &GroupConfig, now: Instant) {
        let Some(member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(waiting) = member.awaiting_join {
            let _ = waiting.send(JoinOutcome::error(ErrorCode::UnknownMemberId, member_id));
        }
        if let Some(waiting) = member.awaiting_sync {
            let _ = waiting.send(SyncOutcome::error(ErrorCode::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        match self.state {
            GroupState::Empty => {}
            GroupState::PreparingRebalance => self.try_complete_join(now, false),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.prepare_rebalance(config, now);
                self.try_complete_join(now, false);
            }
        }
        if self.members.is_empty() && self.state == GroupState::PreparingRebalance {
            self.try_complete_join(now, true);
        }
    }

    fn is_listed(&self) -> bool {
        !self.members.is_empty() || self.has_offsets || self.state != GroupState::Empty
    }
}

/// All groups of this broker.
pub struct GroupCoordinator {
    groups: Mutex<HashMap<String, Group>>,
    offsets: OffsetStore,
    config: GroupConfig,
    next_seq: std::sync::atomic::AtomicU64,
}

impl GroupCoordinator {
    /// Opens the offset store in `dir`; groups with committed offsets are
    /// known (empty) from the start.
    pub fn open(dir: &Path, config: GroupConfig) -> Result<Self, OffsetStoreError> {
        let offsets = OffsetStore::open(dir)?;
        let mut groups = HashMap::new();
        for (group, _) in offsets.all()? {
            groups.entry(group).or_insert_with(Group::new).has_offsets = true;
        }
        Ok(Self {
            groups: Mutex::new(groups),
            offsets,
            config,
            next_seq: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Group>> {
        // A panic while holding the lock leaves plain data behind; the
        // state machine stays usable.
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn join(&self, request: JoinRequest, now: Instant) -> Pending<JoinOutcome> {
        let fail = |error| Pending::Now(JoinOutcome::error(error, &request.member_id));
        if request.group_id.is_empty() {
            return fail(ErrorCode::InvalidGroupId);
        }
        if request.session_timeout < self.config.session_timeout_min
            || request.session_timeout > self.config.session_timeout_max
        {
            return fail(ErrorCode::InvalidSessionTimeout);
        }
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return fail(ErrorCode::InconsistentGroupProtocol);
        }
        let mut groups = self.lock();
        let group = groups
            .entry(request.group_id.clone())
            .or_insert_with(Group::new);
        let mut member_id = request.member_id.clone();
        if member_id.is_empty() {
            member_id = new_member_id(&request.client_id);
            if let Some(instance) = request.instance_id.as_deref()
                && let Some(old) = group.member_by_instance(instance).map(str::to_string)
            {
                // A static member restarted: its new id replaces the old
                // one, which is fenced from now on.
                let mut member = group.members.remove(&old).expect("found by instance id");
                if let Some(waiting) = member.awaiting_join.take() {
                    let _ = waiting.send(JoinOutcome::error(ErrorCode::FencedInstanceId, &old));
                }
                if let Some(waiting) = member.awaiting_sync.take() {
                    let _ = waiting.send(SyncOutcome::error(ErrorCode::FencedInstanceId));
                }
                if group.leader.as_deref() == Some(old.as_str()) {
                    group.leader = Some(member_id.clone());
                }
                group.members.insert(member_id.clone(), member);
            } else if request.require_known_member_id && request.instance_id.is_none() {
                if !group.accepts(&request.protocol_type, &request.protocols) {
                    return fail(ErrorCode::InconsistentGroupProtocol);
                }
                group
                    .pending_members
                    .insert(member_id.clone(), now + request.session_timeout);
                return Pending::Now(JoinOutcome::error(ErrorCode::MemberIdRequired, &member_id));
            }
        } else if group.pending_members.remove(&member_id).is_none()
            && let Err(error) = group.check_member(&member_id, request.instance_id.as_deref())
        {
            return fail(error);
        }

        let is_new = !group.members.contains_key(&member_id);
        if is_new && !group.accepts(&request.protocol_type, &request.protocols) {
            return fail(ErrorCode::InconsistentGroupProtocol);
        }
        if !is_new && group.members.len() > 1 {
            // An existing member may change its protocols only within what
            // the others support.
            let others_support = request.protocols.iter().any(|(name, _)| {
                group
                    .members
                    .iter()
                    .filter(|(id, _)| **id != member_id)
                    .all(|(_, m)| m.supports(name))
            });
            if !others_support || group.protocol_type.as_deref() != Some(&request.protocol_type) {
                return fail(ErrorCode::InconsistentGroupProtocol);
            }
        }
        let seq = self
            .next_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let member = group
            .members
            .entry(member_id.clone())
            .or_insert_with(|| Member {
                instance_id: request.instance_id.clone(),
                client_id: request.client_id.clone(),
                client_host: request.client_host.clone(),
                session_timeout: request.session_timeout,
                rebalance_timeout: request.rebalance_timeout,
                protocols: Vec::new(),
                assignment: Bytes::new(),
                last_heartbeat: now,
                awaiting_join: None,
                awaiting_sync: None,
                joined_seq: seq,
            });
        let unchanged = !is_new && member.protocols == request.protocols;
        member.protocols = request.protocols;
        member.session_timeout = request.session_timeout;
        member.rebalance_timeout = request.rebalance_timeout;
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.last_heartbeat = now;
        group.protocol_type = Some(request.protocol_type);

        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        match group.state {
            GroupState::Stable if unchanged && !is_leader => {
                return Pending::Now(group.current(&member_id));
            }
            GroupState::CompletingRebalance if unchanged => {
                return Pending::Now(group.current(&member_id));
            }
            GroupState::PreparingRebalance => {}
            _ => group.prepare_rebalance(&self.config, now),
        }
        let (sender, receiver) = oneshot::channel();
        let member = group.members.get_mut(&member_id).expect("inserted above");
        if let Some(previous) = member.awaiting_join.replace(sender) {
            let _ = previous.send(JoinOutcome::error(
                ErrorCode::RebalanceInProgress,
                &member_id,
            ));
        }
        group.try_complete_join(now, false);
        Pending::Later(receiver)
    }

    pub fn sync(&self, request: SyncRequest, now: Instant) -> Pending<SyncOutcome> {
        let fail = |error| Pending::Now(SyncOutcome::error(error));
        if request.group_id.is_empty() {
            return fail(ErrorCode::InvalidGroupId);
        }
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(&request.group_id) else {
            return fail(ErrorCode::UnknownMemberId);
        };
        if let Err(error) = group.check_member(&request.member_id, request.instance_id.as_deref()) {
            return fail(error);
        }
        if request.generation != group.generation {
            return fail(ErrorCode::IllegalGeneration);
        }
        if request
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t))
            || request
                .protocol_name
                .as_ref()
                .is_some_and(|p| group.protocol.as_ref() != Some(p))
        {
            return fail(ErrorCode::InconsistentGroupProtocol);
        }
        let outcome = |group: &Group, assignment: Bytes| SyncOutcome {
            error: ErrorCode::None,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol.clone(),
            assignment,
        };
        match group.state {
            GroupState::Empty | GroupState::PreparingRebalance => {
                fail(ErrorCode::RebalanceInProgress)
            }
            GroupState::Stable => {
                let member = &group.members[&request.member_id];
                Pending::Now(outcome(group, member.assignment.clone()))
            }
            GroupState::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                let member = group
                    .members
                    .get_mut(&request.member_id)
                    .expect("checked above");
                member.last_heartbeat = now;
                if let Some(previous) = member.awaiting_sync.replace(sender) {
                    let _ = previous.send(SyncOutcome::error(ErrorCode::RebalanceInProgress));
                }
                if group.leader.as_deref() == Some(request.member_id.as_str()) {
                    let mut assignments: HashMap<String, Bytes> =
                        request.assignments.into_iter().collect();
                    group.state = GroupState::Stable;
                    let template = outcome(group, Bytes::new());
                    for (id, member) in &mut group.members {
                        member.assignment = assignments.remove(id).unwrap_or_default();
                        if let Some(waiting) = member.awaiting_sync.take() {
                            let _ = waiting.send(SyncOutcome {
                                assignment: member.assignment.clone(),
                                ..template.clone()
                            });
                        }
                    }
                }
                Pending::Later(receiver)
            }
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> ErrorCode {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if let Err(error) = group.check_member(member_id, instance_id) {
            return error;
        }
        if generation != group.generation {
            return ErrorCode::IllegalGeneration;
        }
        if let Some(member) = group.members.get_mut(member_id) {
            member.last_heartbeat = now;
        }
        match group.state {
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::Empty => ErrorCode::UnknownMemberId,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
        }
    }

    /// Removes members, each named by member id or static instance id (or
    /// both, which must agree). Returns one error per member.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Vec<ErrorCode> {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return vec![ErrorCode::UnknownMemberId; members.len()];
        };
        members
            .iter()
            .map(|(member_id, instance_id)| {
                let id = match (member_id.as_str(), instance_id.as_deref()) {
                    ("", Some(instance)) => match group.member_by_instance(instance) {
                        Some(id) => id.to_string(),
                        None => return ErrorCode::UnknownMemberId,
                    },
                    (id, instance) => match group.check_member(id, instance) {
                        Ok(()) => id.to_string(),
                        Err(error) => return error,
                    },
                };
                group.remove_member(&id, &self.config, now);
                ErrorCode::None
            })
            .collect()
    }

    /// Expires sessions, pending member ids and rebalance deadlines. Call
    /// it periodically (a few times a second).
    pub fn tick(&self, now: Instant) {
        let mut groups = self.lock();
        for group in groups.values_mut() {
            group.pending_members.retain(|_, deadline| *deadline > now);
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| {
                    m.awaiting_join.is_none() && now >= m.last_heartbeat + m.session_timeout
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                tracing::info!(member = %id, "group member's session expired");
                group.remove_member(&id, &self.config, now);
            }
            if group.state == GroupState::PreparingRebalance {
                let overdue = group.rebalance_deadline.is_some_and(|d| now >= d);
                group.try_complete_join(now, overdue);
            }
        }
        groups.retain(|_, group| group.is_listed() || !group.pending_members.is_empty());
    }

    /// Checks whether `committer` may commit offsets for `group_id`.
    pub fn check_commit(&self, group_id: &str, committer: &Committer, now: Instant) -> ErrorCode {
        if group_id.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            // Offsets of a consumer outside any group membership (manual
            // assignment) are welcome; a member of an unknown generation is not.
            return if committer.generation < 0 {
                ErrorCode::None
            } else {
                ErrorCode::IllegalGeneration
            };
        };
        if committer.generation < 0 && group.state == GroupState::Empty {
            return ErrorCode::None;
        }
        if group.state == GroupState::CompletingRebalance {
            return ErrorCode::RebalanceInProgress;
        }
        if let Err(error) =
            group.check_member(&committer.member_id, committer.instance_id.as_deref())
        {
            return error;
        }
        if committer.generation != group.generation {
            return ErrorCode::IllegalGeneration;
        }
        if let Some(member) = group.members.get_mut(&committer.member_id) {
            member.last_heartbeat = now;
        }
        ErrorCode::None
    }

    /// Stores offsets (after [`Self::check_commit`] allowed it).
    pub fn commit(
        &self,
        group_id: &str,
        offsets: &[PartitionOffset],
    ) -> Result<(), OffsetStoreError> {
        self.offsets.commit(group_id, offsets)?;
        self.lock()
            .entry(group_id.to_string())
            .or_insert_with(Group::new)
            .has_offsets = true;
        Ok(())
    }

    pub fn committed(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Option<CommittedOffset>, OffsetStoreError> {
        self.offsets.get(group_id, topic, partition)
    }

    pub fn committed_all(&self, group_id: &str) -> Result<Vec<PartitionOffset>, OffsetStoreError> {
        self.offsets.group(group_id)
    }

    /// Every committed offset of every group (for lag metrics).
    pub fn committed_everywhere(&self) -> Result<Vec<(String, PartitionOffset)>, OffsetStoreError> {
        self.offsets.all()
    }

    /// Deletes a group that has no members, with its committed offsets
    /// (Kafka's DeleteGroups): NON_EMPTY_GROUP while members remain,
    /// GROUP_ID_NOT_FOUND for a group this broker does not know.
    pub fn delete(&self, group_id: &str) -> ErrorCode {
        let mut groups = self.lock();
        match groups.get(group_id) {
            None => return ErrorCode::GroupIdNotFound,
            Some(group) if !group.is_listed() => return ErrorCode::GroupIdNotFound,
            Some(group) if !group.members.is_empty() || group.state != GroupState::Empty => {
                return ErrorCode::NonEmptyGroup;
            }
            Some(_) => {}
        }
        // Removed while the lock is held, so no member joins in between.
        if let Err(error) = self.offsets.forget_group(group_id) {
            tracing::error!(
                group = group_id,
                "deleting committed offsets failed: {error}"
            );
            return ErrorCode::KafkaStorageError;
        }
        groups.remove(group_id);
        ErrorCode::None
    }

    /// Drops committed offsets of a deleted topic.
    pub fn forget_topic(&self, topic: &str) -> Result<(), OffsetStoreError> {
        self.offsets.forget_topic(topic)
    }

    pub fn list(&self) -> Vec<GroupListing> {
        let groups = self.lock();
        let mut listed: Vec<GroupListing> = groups
            .iter()
            .filter(|(_, g)| g.is_listed())
            .map(|(id, g)| GroupListing {
                group_id: id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect();
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// `None` for a group this broker does not know.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.lock();
        let group = groups.get(group_id).filter(|g| g.is_listed())?;
        let protocol = group.protocol.clone().unwrap_or_default();
        let stable = group.state == GroupState::Stable;
        Some(GroupDescription {
            state: group.state,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_name: if group.state == GroupState::PreparingRebalance {
                String::new()
            } else {
                protocol.clone()
            },
            members: group
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        })
    }
}

/// A member id as Kafka forms them: the client id and a random UUID.
fn new_member_id(client_id: &str) -> String {
    format!("{client_id}-{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests;
