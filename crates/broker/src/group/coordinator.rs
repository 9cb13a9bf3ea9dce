//! The coordinator: every group of the broker behind one lock, the
//! requests that drive their membership, and their committed offsets.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::membership::{Group, Member};
use super::messages::{
    Committer, GroupDescription, GroupListing, GroupState, JoinOutcome, JoinRequest,
    MemberDescription, Pending, SyncOutcome, SyncRequest,
};
use super::offsets::{CommittedOffset, OffsetStore, OffsetStoreError, PartitionOffset};
use crate::ErrorCode;

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

    /// Deletes the committed offsets that outlived their group by
    /// `offsets_retention`, as Kafka does (KIP-211), at wall-clock time
    /// `now_ms`:
    ///
    /// - a group with members (or rebalancing) keeps every offset;
    /// - an empty group that had members keeps an offset for the retention
    ///   after its last member left, or after the offset's commit if that
    ///   was later (or the broker has restarted since);
    /// - a group that never had members (offsets committed by standalone
    ///   consumers, or in transactions) keeps each offset for the retention
    ///   after its commit.
    ///
    /// A group left with neither members nor offsets is gone. Returns each
    /// group that lost offsets and how many. (Kafka also expires, in a
    /// stable consumer group, offsets of topics the members no longer
    /// subscribe to; this coordinator never reads the members'
    /// subscriptions, and keeps those.)
    pub fn expire_offsets(&self, now_ms: i64) -> Result<Vec<(String, usize)>, OffsetStoreError> {
        let retention_ms =
            i64::try_from(self.config.offsets_retention.as_millis()).unwrap_or(i64::MAX);
        let mut groups = self.lock();
        let mut expired_by_group = Vec::new();
        for (id, group) in groups.iter_mut() {
            let empty = group.members.is_empty() && group.state == GroupState::Empty;
            if !group.has_offsets || !empty {
                continue;
            }
            let offsets = self.offsets.group(id)?;
            let expired: Vec<(String, i32)> = (offsets.iter())
                .filter(|o| {
                    let committed = o.committed.commit_time_ms;
                    let base = group
                        .empty_since_ms
                        .map_or(committed, |since| since.max(committed));
                    now_ms.saturating_sub(base) >= retention_ms
                })
                .map(|o| (o.topic.clone(), o.partition))
                .collect();
            if expired.is_empty() {
                continue;
            }
            self.offsets.forget(id, &expired)?;
            group.has_offsets = expired.len() < offsets.len();
            expired_by_group.push((id.clone(), expired.len()));
        }
        groups.retain(|_, group| group.is_listed() || !group.pending_members.is_empty());
        Ok(expired_by_group)
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
