//! A group's membership and its rebalance state machine: who is in it,
//! which protocol they share, when a rebalance may complete, who leads.
//! Driven by the coordinator under its lock, with explicit clock values.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::messages::{GroupState, JoinOutcome, JoinedMember, SyncOutcome};
use crate::ErrorCode;

pub(super) struct Member {
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) last_heartbeat: Instant,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinOutcome>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncOutcome>>,
    /// Order of arrival, for picking a leader deterministically.
    pub(super) joined_seq: u64,
}

impl Member {
    pub(super) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    pub(super) fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }
}

pub(super) struct Group {
    pub(super) state: GroupState,
    pub(super) generation: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, valid until the deadline.
    pub(super) pending_members: HashMap<String, Instant>,
    /// PreparingRebalance: when members that have not rejoined are dropped.
    pub(super) rebalance_deadline: Option<Instant>,
    /// PreparingRebalance of a group that was empty: not complete before.
    pub(super) join_not_before: Option<Instant>,
    /// Offsets have been committed for this group (it is listed even when
    /// it has no members).
    pub(super) has_offsets: bool,
    /// When (ms since the epoch) the group's last member left; None while
    /// it has members, and for a group that never had any in this
    /// broker's life.
    pub(super) empty_since_ms: Option<i64>,
}

impl Group {
    pub(super) fn new() -> Self {
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
            empty_since_ms: None,
        }
    }

    pub(super) fn member_by_instance(&self, instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.as_str())
    }

    /// Checks a request's member id (and static instance id) against the
    /// membership.
    pub(super) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
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
    pub(super) fn select_protocol(&self) -> Option<String> {
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
    pub(super) fn accepts(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
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
    pub(super) fn prepare_rebalance(&mut self, config: &GroupConfig, now: Instant) {
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
    pub(super) fn try_complete_join(&mut self, now: Instant, force: bool) {
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
            self.empty_since_ms = Some(strata_record::time::now_ms());
            return;
        }
        self.empty_since_ms = None;
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
    pub(super) fn current(&self, member_id: &str) -> JoinOutcome {
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
    pub(super) fn remove_member(&mut self, member_id: &str, config: &GroupConfig, now: Instant) {
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

    pub(super) fn is_listed(&self) -> bool {
        !self.members.is_empty() || self.has_offsets || self.state != GroupState::Empty
    }
}
