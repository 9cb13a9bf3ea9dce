//! The state machine, driven with explicit clock values (no sleeping).

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::offsets::*;
use super::*;
use crate::ErrorCode;

const SESSION: Duration = Duration::from_secs(10);
const REBALANCE: Duration = Duration::from_secs(20);

fn coordinator(initial_delay: Duration) -> (tempfile::TempDir, GroupCoordinator) {
    let dir = tempfile::tempdir().unwrap();
    let config = GroupConfig {
        initial_rebalance_delay: initial_delay,
        ..GroupConfig::default()
    };
    let coordinator = GroupCoordinator::open(dir.path(), config).unwrap();
    (dir, coordinator)
}

fn request(member_id: &str, protocols: &[(&str, &str)]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        instance_id: None,
        session_timeout: SESSION,
        rebalance_timeout: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(name, meta)| (name.to_string(), Bytes::from(meta.to_string())))
            .collect(),
        client_id: "client".into(),
        client_host: "127.0.0.1".into(),
        require_known_member_id: true,
    }
}

fn now_answer<T: std::fmt::Debug>(pending: Pending<T>) -> T {
    match pending {
        Pending::Now(outcome) => outcome,
        Pending::Later(_) => panic!("expected an immediate answer"),
    }
}

fn later<T>(pending: Pending<T>) -> oneshot::Receiver<T> {
    match pending {
        Pending::Now(_) => panic!("expected the answer to wait"),
        Pending::Later(receiver) => receiver,
    }
}

/// A join through the MEMBER_ID_REQUIRED round trip; returns the id and
/// the waiting join.
fn join_new(
    c: &GroupCoordinator,
    protocols: &[(&str, &str)],
    now: Instant,
) -> (String, oneshot::Receiver<JoinOutcome>) {
    let first = now_answer(c.join(request("", protocols), now));
    assert_eq!(first.error, ErrorCode::MemberIdRequired);
    assert!(first.member_id.starts_with("client-"));
    let waiting = later(c.join(request(&first.member_id, protocols), now));
    (first.member_id, waiting)
}

fn sync(
    c: &GroupCoordinator,
    member: &str,
    generation: i32,
    assignments: &[(&str, &str)],
    now: Instant,
) -> Pending<SyncOutcome> {
    c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation,
            member_id: member.into(),
            instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
                .collect(),
        },
        now,
    )
}

fn state(c: &GroupCoordinator) -> GroupState {
    c.describe("g").map_or(GroupState::Empty, |d| d.state)
}

#[test]
fn two_members_form_a_generation_and_receive_the_leaders_assignment() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::from_secs(3));
    let (a, mut a_join) = join_new(&c, &[("range", "a-meta")], t0);
    // The initial delay holds the first rebalance open for more members.
    c.tick(t0 + Duration::from_secs(1));
    assert!(a_join.try_recv().is_err());
    let (b, mut b_join) = join_new(&c, &[("range", "b-meta")], t0 + Duration::from_secs(1));
    c.tick(t0 + Duration::from_secs(3));

    let a_out = a_join.try_recv().unwrap();
    let b_out = b_join.try_recv().unwrap();
    assert_eq!(
        (a_out.error, b_out.error),
        (ErrorCode::None, ErrorCode::None)
    );
    assert_eq!(a_out.generation, 1);
    assert_eq!(b_out.generation, 1);
    assert_eq!(a_out.leader, a, "the first member to join leads");
    assert_eq!(a_out.protocol_name.as_deref(), Some("range"));
    let mut metas: Vec<(String, Bytes)> = a_out
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.metadata.clone()))
        .collect();
    metas.sort();
    let mut expected = vec![
        (a.clone(), Bytes::from("a-meta")),
        (b.clone(), Bytes::from("b-meta")),
    ];
    expected.sort();
    assert_eq!(metas, expected);
    assert!(b_out.members.is_empty(), "only the leader sees the members");
    assert_eq!(state(&c), GroupState::CompletingRebalance);

    // The follower syncs first and waits for the leader.
    let t1 = t0 + Duration::from_secs(4);
    let mut b_sync = later(sync(&c, &b, 1, &[], t1));
    assert!(b_sync.try_recv().is_err());
    let mut a_sync = later(sync(&c, &a, 1, &[(&a, "p0"), (&b, "p1")], t1));
    assert_eq!(a_sync.try_recv().unwrap().assignment, Bytes::from("p0"));
    assert_eq!(b_sync.try_recv().unwrap().assignment, Bytes::from("p1"));
    assert_eq!(state(&c), GroupState::Stable);
    assert_eq!(c.heartbeat("g", 1, &b, None, t1), ErrorCode::None);
    assert_eq!(
        c.heartbeat("g", 0, &b, None, t1),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        c.heartbeat("g", 1, "stranger", None, t1),
        ErrorCode::UnknownMemberId
    );

    let described = c.describe("g").unwrap();
    assert_eq!(described.protocol_name, "range");
    let mut assigned: Vec<Bytes> = described
        .members
        .iter()
        .map(|m| m.assignment.clone())
        .collect();
    assigned.sort();
    assert_eq!(assigned, vec![Bytes::from("p0"), Bytes::from("p1")]);
}

#[test]
fn a_new_member_makes_everyone_rejoin_and_a_silent_member_is_dropped() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let (a, mut a_join) = join_new(&c, &[("range", "")], t0);
    assert_eq!(a_join.try_recv().unwrap().generation, 1);
    let mut a_sync = later(sync(&c, &a, 1, &[(&a, "all")], t0));
    assert_eq!(a_sync.try_recv().unwrap().assignment, Bytes::from("all"));
    // In the stable group a sync is answered at once.
    assert_eq!(
        now_answer(sync(&c, &a, 1, &[], t0)).assignment,
        Bytes::from("all")
    );

    let (b, mut b_join) = join_new(&c, &[("range", "")], t0);
    assert!(b_join.try_recv().is_err(), "waits for the existing member");
    assert_eq!(
        c.heartbeat("g", 1, &a, None, t0),
        ErrorCode::RebalanceInProgress
    );
    let mut a_join = later(c.join(request(&a, &[("range", "")]), t0));
    let (a_out, b_out) = (a_join.try_recv().unwrap(), b_join.try_recv().unwrap());
    assert_eq!((a_out.generation, b_out.generation), (2, 2));
    assert_eq!(a_out.leader, a, "the leader keeps leading");

    // b stops heartbeating: after its session timeout it is removed and a
    // rebalance starts; a rejoins alone.
    let t1 = t0 + Duration::from_secs(5);
    drop(later(sync(&c, &b, 2, &[], t1)));
    let _ = sync(&c, &a, 2, &[(&a, "x"), (&b, "y")], t1);
    assert_eq!(c.heartbeat("g", 2, &a, None, t1 + SESSION), ErrorCode::None);
    c.tick(t1 + SESSION);
    assert_eq!(state(&c), GroupState::PreparingRebalance);
    assert_eq!(
        c.heartbeat("g", 2, &b, None, t1 + SESSION),
        ErrorCode::UnknownMemberId
    );
    let mut a_join = later(c.join(request(&a, &[("range", "")]), t1 + SESSION));
    let out = a_join.try_recv().unwrap();
    assert_eq!(out.generation, 3);
    assert_eq!(out.members.len(), 1);
}

#[test]
fn members_that_do_not_rejoin_before_the_deadline_are_dropped() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let (a, mut a_join) = join_new(&c, &[("range", "")], t0);
    a_join.try_recv().unwrap();
    let _ = sync(&c, &a, 1, &[], t0);
    let (_b, mut b_join) = join_new(&c, &[("range", "")], t0);
    // a keeps heartbeating but never rejoins.
    for s in 1..20 {
        let t = t0 + Duration::from_secs(s);
        assert_eq!(
            c.heartbeat("g", 1, &a, None, t),
            ErrorCode::RebalanceInProgress
        );
        c.tick(t);
        assert!(b_join.try_recv().is_err());
    }
    c.tick(t0 + REBALANCE);
    let out = b_join.try_recv().unwrap();
    assert_eq!(out.generation, 2);
    assert_eq!(out.members.len(), 1, "a was dropped");
    assert_eq!(
        c.heartbeat("g", 2, &a, None, t0 + REBALANCE),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn leaving_rebalances_the_rest_and_the_last_leaves_an_empty_group() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let (a, mut a_join) = join_new(&c, &[("range", "")], t0);
    a_join.try_recv().unwrap();
    let (b, _b_join) = join_new(&c, &[("range", "")], t0);
    let mut a_join = later(c.join(request(&a, &[("range", "")]), t0));
    a_join.try_recv().unwrap();

    assert_eq!(
        c.leave("g", &[(b.clone(), None)], t0),
        vec![ErrorCode::None]
    );
    assert_eq!(state(&c), GroupState::PreparingRebalance);
    assert_eq!(
        c.leave("g", &[(b.clone(), None), ("nobody".into(), None)], t0),
        vec![ErrorCode::UnknownMemberId, ErrorCode::UnknownMemberId]
    );
    assert_eq!(
        c.leave("g", &[(a.clone(), None)], t0),
        vec![ErrorCode::None]
    );
    assert_eq!(state(&c), GroupState::Empty);
    c.tick(t0);
    assert!(
        c.list().is_empty(),
        "an empty group without offsets is forgotten"
    );
}

#[test]
fn incompatible_protocols_are_refused_and_the_common_one_is_chosen() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let (a, mut a_join) = join_new(&c, &[("roundrobin", ""), ("range", "")], t0);
    a_join.try_recv().unwrap();
    let refused = now_answer(c.join(request("", &[("sticky", "")]), t0));
    assert_eq!(refused.error, ErrorCode::InconsistentGroupProtocol);

    let (_b, mut b_join) = join_new(&c, &[("range", ""), ("roundrobin", "")], t0);
    let mut a_join = later(c.join(request(&a, &[("roundrobin", ""), ("range", "")]), t0));
    let out = a_join.try_recv().unwrap();
    b_join.try_recv().unwrap();
    // One vote each: the tie goes to the first member's preference.
    assert_eq!(out.protocol_name.as_deref(), Some("roundrobin"));

    let mut short = request("", &[("range", "")]);
    short.session_timeout = Duration::from_millis(100);
    assert_eq!(
        now_answer(c.join(short, t0)).error,
        ErrorCode::InvalidSessionTimeout
    );
    let mut unnamed = request("", &[("range", "")]);
    unnamed.group_id = String::new();
    assert_eq!(
        now_answer(c.join(unnamed, t0)).error,
        ErrorCode::InvalidGroupId
    );
}

#[test]
fn a_restarted_static_member_takes_over_and_fences_its_old_id() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let mut static_join = request("", &[("range", "")]);
    static_join.instance_id = Some("host-1".into());
    let mut first = later(c.join(static_join.clone(), t0));
    let old = first.try_recv().unwrap().member_id;

    // Nothing changed: the restarted member gets the current generation
    // under a new id, without a rebalance.
    let new = now_answer(c.join(static_join, t0));
    assert_eq!(new.error, ErrorCode::None);
    assert_eq!(new.generation, 1);
    assert_ne!(new.member_id, old);
    assert_eq!(
        c.heartbeat("g", new.generation, &old, Some("host-1"), t0),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(
        c.heartbeat("g", new.generation, &new.member_id, Some("host-1"), t0),
        ErrorCode::None
    );
}

#[test]
fn commits_are_checked_against_membership() {
    let t0 = Instant::now();
    let (_dir, c) = coordinator(Duration::ZERO);
    let outsider = Committer {
        generation: -1,
        member_id: String::new(),
        instance_id: None,
    };
    assert_eq!(c.check_commit("solo", &outsider, t0), ErrorCode::None);
    let stale = Committer {
        generation: 4,
        ..outsider.clone()
    };
    assert_eq!(
        c.check_commit("solo", &stale, t0),
        ErrorCode::IllegalGeneration
    );

    let (a, mut a_join) = join_new(&c, &[("range", "")], t0);
    a_join.try_recv().unwrap();
    let member = Committer {
        generation: 1,
        member_id: a.clone(),
        instance_id: None,
    };
    assert_eq!(
        c.check_commit("g", &member, t0),
        ErrorCode::RebalanceInProgress
    );
    let _ = sync(&c, &a, 1, &[], t0);
    assert_eq!(c.check_commit("g", &member, t0), ErrorCode::None);
    assert_eq!(
        c.check_commit("g", &outsider, t0),
        ErrorCode::UnknownMemberId
    );
    let old = Committer {
        generation: 0,
        ..member
    };
    assert_eq!(c.check_commit("g", &old, t0), ErrorCode::IllegalGeneration);
}

#[test]
fn groups_with_committed_offsets_are_listed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let c = GroupCoordinator::open(dir.path(), GroupConfig::default()).unwrap();
        let offsets = [PartitionOffset {
            topic: "t".into(),
            partition: 0,
            committed: CommittedOffset {
                offset: 42,
                leader_epoch: -1,
                metadata: Some("m".into()),
                commit_time_ms: 0,
            },
        }];
        c.commit("kept", &offsets).unwrap();
    }
    let c = GroupCoordinator::open(dir.path(), GroupConfig::default()).unwrap();
    let listed = c.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].group_id, "kept");
    assert_eq!(listed[0].state, GroupState::Empty);
    assert_eq!(c.committed("kept", "t", 0).unwrap().unwrap().offset, 42);
}

fn offset_committed_at(commit_time_ms: i64) -> [PartitionOffset; 1] {
    [PartitionOffset {
        topic: "t".into(),
        partition: 0,
        committed: CommittedOffset {
            offset: 7,
            leader_epoch: -1,
            metadata: None,
            commit_time_ms,
        },
    }]
}

const RETENTION_MS: i64 = 60_000;

fn retaining_a_minute() -> (tempfile::TempDir, GroupCoordinator) {
    let dir = tempfile::tempdir().unwrap();
    let config = GroupConfig {
        initial_rebalance_delay: Duration::ZERO,
        offsets_retention: Duration::from_millis(RETENTION_MS as u64),
        ..GroupConfig::default()
    };
    let coordinator = GroupCoordinator::open(dir.path(), config).unwrap();
    (dir, coordinator)
}

#[test]
fn offsets_of_a_group_without_members_expire_the_retention_after_their_commit() {
    let (_dir, c) = retaining_a_minute();
    let committed_at = 1_000_000;
    c.commit("standalone", &offset_committed_at(committed_at))
        .unwrap();
    let just_before = committed_at + RETENTION_MS - 1;
    assert_eq!(c.expire_offsets(just_before).unwrap(), []);
    assert!(c.committed("standalone", "t", 0).unwrap().is_some());
    let expired = c.expire_offsets(committed_at + RETENTION_MS).unwrap();
    assert_eq!(expired, [("standalone".to_string(), 1)]);
    assert_eq!(c.committed("standalone", "t", 0).unwrap(), None);
    assert!(c.list().is_empty(), "a group with nothing left is gone");
}

#[test]
fn a_group_with_members_keeps_its_offsets_and_loses_them_the_retention_after_it_empties() {
    let (_dir, c) = retaining_a_minute();
    let t0 = Instant::now();
    let (a, mut joined) = join_new(&c, &[("range", "")], t0);
    joined.try_recv().unwrap();
    let long_ago = strata_record::time::now_ms() - 10 * RETENTION_MS;
    c.commit("g", &offset_committed_at(long_ago)).unwrap();
    let later_on = strata_record::time::now_ms() + 10 * RETENTION_MS;
    assert_eq!(c.expire_offsets(later_on).unwrap(), [], "a member is there");

    assert_eq!(c.leave("g", &[(a, None)], t0), vec![ErrorCode::None]);
    let emptied = strata_record::time::now_ms();
    assert_eq!(
        c.expire_offsets(emptied + RETENTION_MS / 2).unwrap(),
        [],
        "the retention counts from when the group emptied, not from the commit"
    );
    let expired = c.expire_offsets(emptied + RETENTION_MS + 1_000).unwrap();
    assert_eq!(expired, [("g".to_string(), 1)]);
    assert_eq!(c.committed("g", "t", 0).unwrap(), None);
}
