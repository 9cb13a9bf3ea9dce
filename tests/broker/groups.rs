//! Consumer groups over a real socket, in every version of every group
//! API: FindCoordinator, the join/sync/heartbeat/leave protocol with two
//! members, OffsetCommit/OffsetFetch with metadata, ListGroups and
//! DescribeGroups, and committed offsets surviving a broker restart.

use crate::support;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strata::broker::BrokerConfig;
use strata::log::{LogConfig, LogManager};
use support::InProcessBroker;
use support::wire::{call, decode_response, frame, read_response};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;
const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const GROUP_ID_NOT_FOUND: i16 = 69;

async fn start(dir: &std::path::Path) -> InProcessBroker {
    let mut config = BrokerConfig::default();
    config.groups.initial_rebalance_delay = std::time::Duration::ZERO;
    InProcessBroker::start_in(dir, config).await
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// The version of `key` to use for "version step `v`" of the sweep.
fn version(key: ApiKey, v: i16) -> i16 {
    let range = key.valid_versions();
    v.clamp(range.min, range.max)
}

fn join_request(group: &str, member: &str, metadata: &str, v: i16) -> JoinGroupRequest {
    let mut request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(30_000)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from(metadata.to_string())),
        ]);
    if version(ApiKey::JoinGroup, v) >= 1 {
        request = request.with_rebalance_timeout_ms(30_000);
    }
    request
}

/// Sends a JoinGroup without waiting for its answer (it may be held until
/// the rebalance completes).
async fn send_join(stream: &mut TcpStream, request: &JoinGroupRequest, v: i16) {
    let v = version(ApiKey::JoinGroup, v);
    stream
        .write_all(&frame(ApiKey::JoinGroup, v, 77, request))
        .await
        .unwrap();
}

async fn receive_join(stream: &mut TcpStream, v: i16) -> JoinGroupResponse {
    let response = read_response(stream).await.expect("a join response");
    decode_response(
        response,
        ApiKey::JoinGroup,
        version(ApiKey::JoinGroup, v),
        77,
    )
}

/// Joins as a new member: through MEMBER_ID_REQUIRED where the version has
/// it. Returns the member id and leaves the real join in flight.
async fn start_join(stream: &mut TcpStream, group: &str, metadata: &str, v: i16) -> Option<String> {
    if version(ApiKey::JoinGroup, v) < 4 {
        send_join(stream, &join_request(group, "", metadata, v), v).await;
        return None;
    }
    send_join(stream, &join_request(group, "", metadata, v), v).await;
    let first = receive_join(stream, v).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let id = first.member_id.as_str().to_string();
    assert!(id.starts_with("test-"), "member id {id}");
    send_join(stream, &join_request(group, &id, metadata, v), v).await;
    Some(id)
}

async fn heartbeat(
    stream: &mut TcpStream,
    group: &str,
    generation: i32,
    member: &str,
    v: i16,
) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member));
    let response: HeartbeatResponse = call(
        stream,
        ApiKey::Heartbeat,
        version(ApiKey::Heartbeat, v),
        &request,
    )
    .await;
    response.error_code
}

fn sync_request(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &str)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::from(a.to_string()))
                })
                .collect(),
        )
}

fn commit_request(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64, &str)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(
            offsets
                .iter()
                .map(|(topic, partition, offset, metadata)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(*partition)
                                .with_committed_offset(*offset)
                                .with_committed_metadata(Some(s(metadata))),
                        ])
                })
                .collect(),
        )
}

/// (topic, partition, offset, metadata, error) of an OffsetFetch answer, in
/// whichever layout the version uses.
async fn fetch_offsets(
    stream: &mut TcpStream,
    group: &str,
    partitions: Option<&[(&str, i32)]>,
    v: i16,
) -> Vec<(String, i32, i64, String, i16)> {
    let v = version(ApiKey::OffsetFetch, v);
    let mut request = OffsetFetchRequest::default();
    if v >= 8 {
        request = request.with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(partitions.map(|ps| {
                    ps.iter()
                        .map(|(t, p)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(TopicName(s(t)))
                                .with_partition_indexes(vec![*p])
                        })
                        .collect()
                })),
        ]);
    } else {
        request = request
            .with_group_id(GroupId(s(group)))
            .with_topics(partitions.map(|ps| {
                ps.iter()
                    .map(|(t, p)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(s(t)))
                            .with_partition_indexes(vec![*p])
                    })
                    .collect()
            }));
    }
    let response: OffsetFetchResponse = call(stream, ApiKey::OffsetFetch, v, &request).await;
    let mut found = Vec::new();
    if v >= 8 {
        assert_eq!(response.groups.len(), 1);
        let group = &response.groups[0];
        assert_eq!(group.error_code, 0);
        for topic in &group.topics {
            for p in &topic.partitions {
                found.push((
                    topic.name.0.as_str().to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_ref().map_or("", |m| m.as_str()).to_string(),
                    p.error_code,
                ));
            }
        }
    } else {
        assert_eq!(response.error_code, 0);
        for topic in &response.topics {
            for p in &topic.partitions {
                found.push((
                    topic.name.0.as_str().to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_ref().map_or("", |m| m.as_str()).to_string(),
                    p.error_code,
                ));
            }
        }
    }
    found.sort();
    found
}

/// The whole protocol, in "version step" `v` (each API at min(v, its max)).
async fn group_round_trip(addr: std::net::SocketAddr, v: i16) {
    let group = format!("group-v{v}");
    let group = group.as_str();
    let mut a = TcpStream::connect(addr).await.unwrap();
    let mut b = TcpStream::connect(addr).await.unwrap();

    let find_v = version(ApiKey::FindCoordinator, v);
    let mut find = FindCoordinatorRequest::default();
    find = if find_v >= 4 {
        find.with_coordinator_keys(vec![s(group)])
    } else {
        find.with_key(s(group))
    };
    let found: FindCoordinatorResponse = call(&mut a, ApiKey::FindCoordinator, find_v, &find).await;
    let (node, port, error) = if find_v >= 4 {
        let c = &found.coordinators[0];
        assert_eq!(c.key.as_str(), group);
        (c.node_id.0, c.port, c.error_code)
    } else {
        (found.node_id.0, found.port, found.error_code)
    };
    assert_eq!((node, port, error), (0, i32::from(addr.port()), 0));

    // a joins alone and becomes leader of generation 1.
    let a_id = start_join(&mut a, group, "meta-a", v).await;
    let joined = receive_join(&mut a, v).await;
    assert_eq!(joined.error_code, 0);
    let a_id = a_id.unwrap_or_else(|| joined.member_id.as_str().to_string());
    assert_eq!(joined.member_id.as_str(), a_id);
    assert_eq!(joined.leader.as_str(), a_id);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.members.len(), 1);
    let sync_v = version(ApiKey::SyncGroup, v);
    let synced: SyncGroupResponse = call(
        &mut a,
        ApiKey::SyncGroup,
        sync_v,
        &sync_request(group, 1, &a_id, &[(&a_id, "all-of-it")]),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, Bytes::from("all-of-it"));
    assert_eq!(heartbeat(&mut a, group, 1, &a_id, v).await, 0);

    // b joins: a is told to rejoin, and both land in generation 2.
    let b_id = start_join(&mut b, group, "meta-b", v).await;
    // b's join travels on another connection: a learns of the rebalance
    // from a heartbeat once the coordinator has seen it.
    let mut told = 0;
    for _ in 0..500 {
        told = heartbeat(&mut a, group, 1, &a_id, v).await;
        if told != 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(told, REBALANCE_IN_PROGRESS);
    send_join(&mut a, &join_request(group, &a_id, "meta-a", v), v).await;
    let a_joined = receive_join(&mut a, v).await;
    let b_joined = receive_join(&mut b, v).await;
    let b_id = b_id.unwrap_or_else(|| b_joined.member_id.as_str().to_string());
    assert_eq!((a_joined.error_code, b_joined.error_code), (0, 0));
    assert_eq!((a_joined.generation_id, b_joined.generation_id), (2, 2));
    assert_eq!(b_joined.leader.as_str(), a_id);
    assert!(b_joined.members.is_empty());
    let mut metadata: Vec<(String, Bytes)> = a_joined
        .members
        .iter()
        .map(|m| (m.member_id.as_str().to_string(), m.metadata.clone()))
        .collect();
    metadata.sort();
    let mut expected = vec![
        (a_id.clone(), Bytes::from("meta-a")),
        (b_id.clone(), Bytes::from("meta-b")),
    ];
    expected.sort();
    assert_eq!(metadata, expected);

    // b's sync waits for the leader's.
    b.write_all(&frame(
        ApiKey::SyncGroup,
        sync_v,
        78,
        &sync_request(group, 2, &b_id, &[]),
    ))
    .await
    .unwrap();
    let a_synced: SyncGroupResponse = call(
        &mut a,
        ApiKey::SyncGroup,
        sync_v,
        &sync_request(group, 2, &a_id, &[(&a_id, "p0"), (&b_id, "p1")]),
    )
    .await;
    let b_synced: SyncGroupResponse = decode_response(
        read_response(&mut b).await.unwrap(),
        ApiKey::SyncGroup,
        sync_v,
        78,
    );
    assert_eq!(a_synced.assignment, Bytes::from("p0"));
    assert_eq!(b_synced.assignment, Bytes::from("p1"));
    assert_eq!(heartbeat(&mut b, group, 2, &b_id, v).await, 0);
    assert_eq!(
        heartbeat(&mut b, group, 1, &b_id, v).await,
        ILLEGAL_GENERATION
    );

    // Offsets: committed by members of the current generation only.
    let commit_v = version(ApiKey::OffsetCommit, v);
    let committed: OffsetCommitResponse = call(
        &mut a,
        ApiKey::OffsetCommit,
        commit_v,
        &commit_request(
            group,
            2,
            &a_id,
            &[
                ("orders", 0, 42, "a's note"),
                ("orders", 1, 7, ""),
                ("missing", 0, 1, ""),
            ],
        ),
    )
    .await;
    let errors: Vec<(String, i16)> = committed
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.as_str().to_string(), p.error_code))
        })
        .collect();
    assert_eq!(
        errors,
        vec![
            ("orders".to_string(), 0),
            ("orders".to_string(), 0),
            ("missing".to_string(), UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    let stale: OffsetCommitResponse = call(
        &mut b,
        ApiKey::OffsetCommit,
        commit_v,
        &commit_request(group, 1, &b_id, &[("orders", 1, 9, "")]),
    )
    .await;
    assert_eq!(stale.topics[0].partitions[0].error_code, ILLEGAL_GENERATION);

    let fetched = fetch_offsets(
        &mut b,
        group,
        Some(&[("orders", 0), ("orders", 1), ("orders", 2)]),
        v,
    )
    .await;
    assert_eq!(
        fetched,
        vec![
            ("orders".to_string(), 0, 42, "a's note".to_string(), 0),
            ("orders".to_string(), 1, 7, String::new(), 0),
            ("orders".to_string(), 2, -1, String::new(), 0),
        ]
    );

    // Admin views.
    let list_v = version(ApiKey::ListGroups, v);
    let listed: ListGroupsResponse = call(
        &mut a,
        ApiKey::ListGroups,
        list_v,
        &ListGroupsRequest::default(),
    )
    .await;
    let ours = listed
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .expect("the group is listed");
    assert_eq!(ours.protocol_type.as_str(), "consumer");
    if list_v >= 4 {
        assert_eq!(ours.group_state.as_str(), "Stable");
    }
    let describe_v = version(ApiKey::DescribeGroups, v);
    let described: DescribeGroupsResponse = call(
        &mut a,
        ApiKey::DescribeGroups,
        describe_v,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s(group)), GroupId(s("nobody"))]),
    )
    .await;
    let g = &described.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.protocol_data.as_str()
        ),
        (0, "Stable", "range")
    );
    let mut members: Vec<(String, Bytes, Bytes, String)> = g
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str().to_string(),
                m.member_metadata.clone(),
                m.member_assignment.clone(),
                m.client_host.as_str().to_string(),
            )
        })
        .collect();
    members.sort();
    let mut expected = vec![
        (
            a_id.clone(),
            Bytes::from("meta-a"),
            Bytes::from("p0"),
            "127.0.0.1".to_string(),
        ),
        (
            b_id.clone(),
            Bytes::from("meta-b"),
            Bytes::from("p1"),
            "127.0.0.1".to_string(),
        ),
    ];
    expected.sort();
    assert_eq!(members, expected);
    let nobody = &described.groups[1];
    assert_eq!(nobody.group_state.as_str(), "Dead");
    if describe_v >= 6 {
        assert_eq!(nobody.error_code, GROUP_ID_NOT_FOUND);
    }

    // b leaves; a must rejoin alone.
    let leave_v = version(ApiKey::LeaveGroup, v);
    let leave = if leave_v >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_members(vec![MemberIdentity::default().with_member_id(s(&b_id))])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(&b_id))
    };
    let left: LeaveGroupResponse = call(&mut b, ApiKey::LeaveGroup, leave_v, &leave).await;
    assert_eq!(left.error_code, 0);
    if leave_v >= 3 {
        assert_eq!(left.members[0].error_code, 0);
    }
    assert_eq!(
        heartbeat(&mut b, group, 2, &b_id, v).await,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        heartbeat(&mut a, group, 2, &a_id, v).await,
        REBALANCE_IN_PROGRESS
    );
    send_join(&mut a, &join_request(group, &a_id, "meta-a", v), v).await;
    let alone = receive_join(&mut a, v).await;
    assert_eq!((alone.generation_id, alone.members.len()), (3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_of_the_group_protocol_works_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic("orders", 2, Default::default()).unwrap();
        log.close().unwrap();
    }
    let broker = start(dir.path()).await;
    for v in 0..=9 {
        group_round_trip(broker.addr, v).await;
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_survive_a_restart_and_manual_consumers_may_commit() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic("orders", 2, Default::default()).unwrap();
        log.close().unwrap();
    }
    let broker = start(dir.path()).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    // A consumer outside group membership (generation -1, no member id).
    let committed: OffsetCommitResponse = call(
        &mut stream,
        ApiKey::OffsetCommit,
        8,
        &commit_request("manual", -1, "", &[("orders", 1, 1234, "kept")]),
    )
    .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    drop(stream);
    broker.stop().await;

    let broker = start(dir.path()).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    for v in [1, 7, 9] {
        assert_eq!(
            fetch_offsets(&mut stream, "manual", None, v.max(2)).await,
            vec![("orders".to_string(), 1, 1234, "kept".to_string(), 0)],
            "OffsetFetch v{v} for all of the group's partitions"
        );
        assert_eq!(
            fetch_offsets(&mut stream, "manual", Some(&[("orders", 1)]), v).await,
            vec![("orders".to_string(), 1, 1234, "kept".to_string(), 0)],
        );
    }
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    let names: Vec<(&str, &str)> = listed
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.group_state.as_str()))
        .collect();
    assert_eq!(names, vec![("manual", "Empty")]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_without_members_is_deleted_with_its_offsets_in_every_version() {
    use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
    const NON_EMPTY_GROUP: i16 = 68;
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic("orders", 1, Default::default()).unwrap();
        log.close().unwrap();
    }
    let broker = start(dir.path()).await;
    let range = ApiKey::DeleteGroups.valid_versions();
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    for v in range.min..=range.max {
        let idle = format!("idle-{v}");
        let busy = format!("busy-{v}");
        let committed: OffsetCommitResponse = call(
            &mut stream,
            ApiKey::OffsetCommit,
            8,
            &commit_request(&idle, -1, "", &[("orders", 0, 7, "")]),
        )
        .await;
        assert_eq!(committed.topics[0].partitions[0].error_code, 0);
        // A member that stays joined keeps its group from being deleted.
        let mut member = TcpStream::connect(broker.addr).await.unwrap();
        start_join(&mut member, &busy, "m", 4).await;
        assert_eq!(receive_join(&mut member, 4).await.error_code, 0);
        let delete = DeleteGroupsRequest::default().with_groups_names(vec![
            GroupId(s(&idle)),
            GroupId(s(&busy)),
            GroupId(s("never-seen")),
        ]);
        let response: DeleteGroupsResponse =
            call(&mut stream, ApiKey::DeleteGroups, v, &delete).await;
        let codes: Vec<(&str, i16)> = response
            .results
            .iter()
            .map(|r| (r.group_id.0.as_str(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                (idle.as_str(), 0),
                (busy.as_str(), NON_EMPTY_GROUP),
                ("never-seen", GROUP_ID_NOT_FOUND)
            ],
            "DeleteGroups v{v}"
        );
        assert!(
            fetch_offsets(&mut stream, &idle, None, 8).await.is_empty(),
            "the deleted group's offsets are gone"
        );
    }
    drop(stream);
    broker.stop().await;

    // Deleted for good: not back after a restart.
    let broker = start(dir.path()).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert!(
        listed
            .groups
            .iter()
            .all(|g| !g.group_id.0.starts_with("idle")),
        "{:?}",
        listed.groups
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_of_a_group_without_members_expire_after_the_retention_as_in_kafka() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic("orders", 1, Default::default()).unwrap();
        log.close().unwrap();
    }
    let mut config = BrokerConfig::default();
    config.groups.offsets_retention = std::time::Duration::from_secs(1);
    config.offsets_retention_check_interval = std::time::Duration::from_millis(100);
    let broker = InProcessBroker::start_in(dir.path(), config).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    // Committed outside any membership, as the runtime's transactions
    // commit a task's offsets: nothing keeps the group alive.
    let committed: OffsetCommitResponse = call(
        &mut stream,
        ApiKey::OffsetCommit,
        8,
        &commit_request("standalone", -1, "", &[("orders", 0, 99, "")]),
    )
    .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let offsets = fetch_offsets(&mut stream, "standalone", Some(&[("orders", 0)]), 8).await;
    assert_eq!(offsets[0].2, 99);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let offsets = fetch_offsets(&mut stream, "standalone", Some(&[("orders", 0)]), 8).await;
        if offsets[0].2 == -1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never expired: {offsets:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert!(
        listed.groups.is_empty(),
        "the group is gone with its offsets"
    );
    broker.stop().await;
}
