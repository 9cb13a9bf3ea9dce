//! ACLs on a real broker over TCP: created, listed and deleted through
//! strata's client and the `strata acls` command, kept across a restart,
//! and enforced in every API with Kafka's error codes, a refused request
//! changing nothing.
//!
//! The listener here does not authenticate: every request comes from
//! `User:ANONYMOUS`. Most tests trust it (`trust_unauthenticated_listeners`:
//! allowed unless an ACL denies), so denials are exercised through DENY
//! ACLs on `User:ANONYMOUS` and `User:*`; the default (once any ACL exists,
//! only what ACLs allow, as Kafka's `allow.everyone.if.no.acl.found =
//! false`) has tests of its own. The rules for authenticated callers (deny
//! by default, ALLOW ACLs, super users) are tested on the authorizer
//! itself.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse,
    ListGroupsRequest, ListGroupsResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, ProduceResponse, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use strata::broker::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, CLUSTER_NAME, Operation, PatternType,
    Permission, ResourcePattern, ResourceType,
};
use strata::broker::auth::Principal;
use strata::broker::{Broker, BrokerConfig, ConfigFile};
use strata::client::{Admin, ClientConfig, ClientError, Cluster};
use strata::log::{LogConfig, LogManager};
use support::InProcessBroker;
use support::wire::{call, fetch_request, init_producer_id_request, produce_request, topic_name};
use tokio::net::TcpStream;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern::new(resource_type, name, pattern_type),
        entry: AccessControlEntry {
            principal: Principal::parse(principal).unwrap(),
            host: "*".into(),
            operation,
            permission,
        },
    }
}

/// A DENY of `operation` on the literal `name` of `resource_type` for
/// every principal.
fn deny(resource_type: ResourceType, name: &str, operation: Operation) -> AclBinding {
    acl(
        resource_type,
        name,
        PatternType::Literal,
        "User:*",
        operation,
        Permission::Deny,
    )
}

/// A broker on a directory of its own (kept for restarts) and an admin
/// client of it.
struct Running {
    broker: InProcessBroker,
    admin: Admin,
    dir: tempfile::TempDir,
}

async fn start(config: BrokerConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let broker = InProcessBroker::start_in(dir.path(), config).await;
    let admin = admin_of(&broker).await;
    Running { broker, admin, dir }
}

async fn admin_of(broker: &InProcessBroker) -> Admin {
    let mut config = ClientConfig::new(&broker.addr.to_string());
    config.retries = 3;
    Admin::new(Cluster::connect(config).await.unwrap())
}

/// A broker trusting its unauthenticated listener.
fn config() -> BrokerConfig {
    BrokerConfig {
        trust_unauthenticated_listeners: true,
        ..kafkas_default()
    }
}

/// A broker with Kafka's default: once any ACL exists, an unauthenticated
/// caller gets only what ACLs allow.
fn kafkas_default() -> BrokerConfig {
    BrokerConfig {
        auto_create_topics: true,
        groups: strata::broker::group::GroupConfig {
            initial_rebalance_delay: Duration::ZERO,
            ..Default::default()
        },
        ..BrokerConfig::default()
    }
}

impl Running {
    async fn connect(&self) -> TcpStream {
        self.broker.connect().await
    }

    fn create_topic(&self, name: &str) {
        self.broker
            .log
            .create_topic(name, 1, Default::default())
            .unwrap();
    }

    fn log_end(&self, topic: &str) -> i64 {
        self.broker
            .log
            .partition(topic, 0)
            .unwrap()
            .log_end_offset()
    }

    async fn deny(&self, bindings: &[AclBinding]) {
        self.admin.create_acls(bindings).await.unwrap();
    }
}

fn kafka_code(error: ClientError) -> i16 {
    match error {
        ClientError::Kafka { code, .. } => code,
        other => panic!("not a Kafka error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_are_created_listed_with_filters_deleted_and_kept_across_a_restart() {
    let running = start(config()).await;
    let alice_reads = acl(
        ResourceType::Topic,
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::Read,
        Permission::Allow,
    );
    let prefix = acl(
        ResourceType::Topic,
        "orders-",
        PatternType::Prefixed,
        "User:bob",
        Operation::Write,
        Permission::Allow,
    );
    let group = acl(
        ResourceType::Group,
        "billing",
        PatternType::Literal,
        "User:alice",
        Operation::Read,
        Permission::Allow,
    );
    let wildcard = deny(ResourceType::Topic, "*", Operation::Delete);
    let all = vec![
        alice_reads.clone(),
        prefix.clone(),
        group.clone(),
        wildcard.clone(),
    ];
    running.admin.create_acls(&all).await.unwrap();
    // Creating what exists changes nothing.
    running
        .admin
        .create_acls(std::slice::from_ref(&alice_reads))
        .await
        .unwrap();

    let mut listed = running
        .admin
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap();
    listed.sort();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(listed, expected);

    // MATCH: every ACL that applies to topic orders-eu.
    let mut applies = AclBindingFilter::any();
    applies.pattern.resource_type = ResourceType::Topic;
    applies.pattern.name = Some("orders-eu".into());
    applies.pattern.pattern_type = PatternType::Match;
    let mut matched = running.admin.describe_acls(&applies).await.unwrap();
    matched.sort();
    let mut expected = vec![prefix.clone(), wildcard.clone()];
    expected.sort();
    assert_eq!(matched, expected);

    let mut alices = AclBindingFilter::any();
    alices.entry.principal = Some("User:alice".into());
    let mut found = running.admin.describe_acls(&alices).await.unwrap();
    found.sort();
    let mut expected = vec![alice_reads.clone(), group.clone()];
    expected.sort();
    assert_eq!(found, expected);

    // Delete alice's topic ACLs; the group one stays.
    let mut alices_topics = alices.clone();
    alices_topics.pattern.resource_type = ResourceType::Topic;
    let deleted = running.admin.delete_acls(&[alices_topics]).await.unwrap();
    assert_eq!(deleted, std::slice::from_ref(&alice_reads));

    let Running { broker, admin, dir } = running;
    drop(admin);
    broker.stop().await;
    let broker = InProcessBroker::start_in(dir.path(), config()).await;
    let admin = admin_of(&broker).await;
    let mut after = admin.describe_acls(&AclBindingFilter::any()).await.unwrap();
    after.sort();
    let mut expected = vec![prefix, group, wildcard];
    expected.sort();
    assert_eq!(after, expected, "the ACLs after a restart");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_that_cannot_be_stored_is_invalid_and_the_rest_of_the_request_is_made() {
    let running = start(config()).await;
    let creation =
        |resource_type: i8, name: &str, pattern_type: i8, operation: i8, permission: i8| {
            AclCreation::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_resource_pattern_type(pattern_type)
                .with_principal(s("User:alice"))
                .with_host(s("*"))
                .with_operation(operation)
                .with_permission_type(permission)
        };
    let request = CreateAclsRequest::default().with_creations(vec![
        creation(2, "orders", 3, 3, 3),
        // MATCH and ANY only filter.
        creation(2, "orders", 2, 3, 3),
        creation(1, "orders", 3, 3, 3),
        creation(2, "orders", 3, 1, 3),
        creation(2, "orders", 3, 3, 1),
        // The cluster has one name; codes must be known.
        creation(4, "my-cluster", 3, 3, 3),
        creation(2, "orders", 3, 99, 3),
        creation(2, "", 3, 3, 3),
    ]);
    let mut stream = running.connect().await;
    for version in 1..=3 {
        let response: CreateAclsResponse =
            call(&mut stream, ApiKey::CreateAcls, version, &request).await;
        let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, 42, 42, 42, 42, 42, 42, 42], "v{version}");
        assert!(
            response.results[1]
                .error_message
                .as_ref()
                .unwrap()
                .contains("MATCH")
        );
    }
    let listed = running
        .admin
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");

    // A filter with an unknown code is invalid too.
    let bad_filter = DescribeAclsRequest::default()
        .with_resource_type_filter(42)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let response: DescribeAclsResponse =
        call(&mut stream, ApiKey::DescribeAcls, 3, &bad_filter).await;
    assert_eq!(response.error_code, INVALID_REQUEST);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_produce_appends_nothing_and_a_denied_fetch_reads_nothing() {
    let running = start(config()).await;
    running.create_topic("orders");
    running.create_topic("audit");
    running
        .deny(&[
            deny(ResourceType::Topic, "orders", Operation::Write),
            acl(
                ResourceType::Topic,
                "aud",
                PatternType::Prefixed,
                "User:ANONYMOUS",
                Operation::Read,
                Permission::Deny,
            ),
        ])
        .await;
    let mut stream = running.connect().await;
    let now = strata::log::now_ms();
    for acks in [1, -1] {
        let request = produce_request(acks, "orders", 0, support::batch(&["a", "b"], now));
        let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
        let answer = &response.responses[0].partition_responses[0];
        assert_eq!(answer.error_code, TOPIC_AUTHORIZATION_FAILED, "acks {acks}");
    }
    // acks=0 has no answer; what it carried is not appended either.
    let silent = produce_request(0, "orders", 0, support::batch(&["c"], now));
    let frame = support::wire::frame(ApiKey::Produce, 9, 77, &silent);
    tokio::io::AsyncWriteExt::write_all(&mut stream, &frame)
        .await
        .unwrap();
    // A topic the caller may not write, unknown or not, is refused alike.
    let unknown = produce_request(1, "orders", 5, support::batch(&["d"], now));
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &unknown).await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(running.log_end("orders"), 0, "nothing appended");

    // The other topic takes writes, but may not be read.
    let request = produce_request(1, "audit", 0, support::batch(&["x"], now));
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(running.log_end("audit"), 1);
    let fetch = fetch_request("audit", &[0], 0, 1 << 20, 5_000);
    let response: kafka_protocol::messages::FetchResponse =
        call(&mut stream, ApiKey::Fetch, 12, &fetch).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));
    // Fetch by topic id (v13+) is refused the same.
    let id = running.broker.log.topic("audit").unwrap().id();
    let mut by_id = fetch_request("", &[0], 0, 1 << 20, 0);
    by_id.topics[0].topic_id = id;
    let response: kafka_protocol::messages::FetchResponse =
        call(&mut stream, ApiKey::Fetch, 13, &by_id).await;
    assert_eq!(
        response.responses[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    // ListOffsets needs DESCRIBE, which a DENY of READ leaves alone.
    let offsets = running
        .admin
        .list_offset("audit", 0, strata::client::LATEST)
        .await
        .unwrap();
    assert_eq!(offsets, Some(1));
    running.broker.stop().await;
}

async fn metadata(
    stream: &mut TcpStream,
    topics: Option<&[&str]>,
    create: bool,
) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(create)
        .with_include_topic_authorized_operations(true);
    call(stream, ApiKey::Metadata, 12, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_hides_what_the_caller_may_not_describe_and_creates_only_what_it_may() {
    let running = start(config()).await;
    running.create_topic("public");
    running.create_topic("secret");
    running
        .deny(&[
            deny(ResourceType::Topic, "secret", Operation::Describe),
            acl(
                ResourceType::Topic,
                "never-",
                PatternType::Prefixed,
                "User:*",
                Operation::Create,
                Permission::Deny,
            ),
        ])
        .await;
    let mut stream = running.connect().await;
    let all = metadata(&mut stream, None, false).await;
    let names: Vec<&str> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.as_str())
        .collect();
    assert_eq!(names, ["public"]);
    // Unsecured, without ALLOW ACLs: every topic operation but DESCRIBE's
    // denied ones.
    assert_ne!(all.topics[0].topic_authorized_operations, i32::MIN);

    let named = metadata(&mut stream, Some(&["secret", "public"]), false).await;
    assert_eq!(named.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(named.topics[0].partitions.is_empty());
    assert_eq!(named.topics[0].topic_id, uuid::Uuid::nil());
    assert_eq!(named.topics[1].error_code, 0);

    // Auto-creation needs CREATE on the cluster or the topic: a DENY on the
    // topic (the cluster's CREATE not allowed by an ACL either) refuses it.
    running
        .deny(&[deny(ResourceType::Cluster, CLUSTER_NAME, Operation::Create)])
        .await;
    let refused = metadata(&mut stream, Some(&["never-made"]), true).await;
    assert_eq!(refused.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(running.broker.log.topic("never-made").is_none());
    let made = metadata(&mut stream, Some(&["made"]), true).await;
    assert_eq!(made.topics[0].error_code, 0);
    assert!(running.broker.log.topic("made").is_some());

    // CreateTopics likewise.
    let request = CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(topic_name("never-either"))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let response: CreateTopicsResponse = call(&mut stream, ApiKey::CreateTopics, 7, &request).await;
    assert_eq!(response.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(running.broker.log.topic("never-either").is_none());
    running.broker.stop().await;
}

fn join_request(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::from_static(b"m")),
        ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_group_is_not_joined_committed_to_or_found() {
    let running = start(config()).await;
    running.create_topic("orders");
    running
        .deny(&[
            deny(ResourceType::Group, "billing", Operation::Read),
            deny(ResourceType::Group, "hidden", Operation::Describe),
            deny(ResourceType::Topic, "orders", Operation::Read),
        ])
        .await;
    let mut stream = running.connect().await;
    for version in [0, 5, 9] {
        let response: JoinGroupResponse = call(
            &mut stream,
            ApiKey::JoinGroup,
            version,
            &join_request("billing"),
        )
        .await;
        assert_eq!(
            response.error_code, GROUP_AUTHORIZATION_FAILED,
            "v{version}"
        );
    }
    let commit = |group: &str, topic: &str| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(7),
                    ]),
            ])
    };
    let response: OffsetCommitResponse = call(
        &mut stream,
        ApiKey::OffsetCommit,
        8,
        &commit("billing", "orders"),
    )
    .await;
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    // An allowed group, a denied topic.
    let response: OffsetCommitResponse = call(
        &mut stream,
        ApiKey::OffsetCommit,
        8,
        &commit("other", "orders"),
    )
    .await;
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert!(
        running
            .admin
            .committed_offsets("billing")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        running
            .admin
            .committed_offsets("other")
            .await
            .unwrap()
            .is_empty()
    );
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert!(listed.groups.is_empty(), "no group was made: {listed:?}");

    // A group the caller may not DESCRIBE is not found, nor listed.
    let find = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("hidden"), s("visible")]);
    let found: FindCoordinatorResponse = call(&mut stream, ApiKey::FindCoordinator, 4, &find).await;
    let codes: Vec<i16> = found.coordinators.iter().map(|c| c.error_code).collect();
    assert_eq!(codes, [GROUP_AUTHORIZATION_FAILED, 0]);
    assert_eq!(found.coordinators[0].node_id.0, -1);
    // v3: joined without a member id round trip, at once (no rebalance delay).
    let joined: JoinGroupResponse =
        call(&mut stream, ApiKey::JoinGroup, 3, &join_request("hidden")).await;
    assert_eq!(joined.error_code, 0, "READ is not denied on hidden");
    // DESCRIBE on the cluster lists every group; without it, only those
    // the caller may DESCRIBE.
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert_eq!(listed.groups.len(), 1, "{listed:?}");
    running
        .deny(&[deny(
            ResourceType::Cluster,
            CLUSTER_NAME,
            Operation::Describe,
        )])
        .await;
    let listed: ListGroupsResponse = call(
        &mut stream,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert!(listed.groups.is_empty(), "hidden is not listed: {listed:?}");
    let described = running.admin.describe_group("hidden").await.unwrap_err();
    assert_eq!(kafka_code(described), GROUP_AUTHORIZATION_FAILED);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_transactional_id_gets_no_producer_id_and_idempotence_needs_a_writable_topic() {
    let running = start(config()).await;
    running
        .deny(&[
            deny(
                ResourceType::TransactionalId,
                "payments-tx",
                Operation::Write,
            ),
            deny(
                ResourceType::TransactionalId,
                "hidden-tx",
                Operation::Describe,
            ),
        ])
        .await;
    let mut stream = running.connect().await;
    let init = init_producer_id_request(Some("payments-tx"), None);
    let response: InitProducerIdResponse =
        call(&mut stream, ApiKey::InitProducerId, 4, &init).await;
    assert_eq!(response.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    assert_eq!(response.producer_id.0, -1);
    // Nothing was made for the id.
    let describe = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        TransactionalId(s("payments-tx")),
        TransactionalId(s("hidden-tx")),
    ]);
    let described: DescribeTransactionsResponse =
        call(&mut stream, ApiKey::DescribeTransactions, 0, &describe).await;
    let codes: Vec<i16> = described
        .transaction_states
        .iter()
        .map(|t| t.error_code)
        .collect();
    assert_eq!(
        codes,
        [
            TRANSACTIONAL_ID_NOT_FOUND,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ]
    );
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("hidden-tx")]);
    let found: FindCoordinatorResponse = call(&mut stream, ApiKey::FindCoordinator, 4, &find).await;
    assert_eq!(
        found.coordinators[0].error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );

    // Idempotence: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    let idempotent = init_producer_id_request(None, None);
    let response: InitProducerIdResponse =
        call(&mut stream, ApiKey::InitProducerId, 4, &idempotent).await;
    assert_eq!(response.error_code, 0);
    running
        .deny(&[
            deny(
                ResourceType::Cluster,
                CLUSTER_NAME,
                Operation::IdempotentWrite,
            ),
            deny(ResourceType::Topic, "*", Operation::Write),
        ])
        .await;
    let response: InitProducerIdResponse =
        call(&mut stream, ApiKey::InitProducerId, 4, &idempotent).await;
    assert_eq!(response.error_code, CLUSTER_AUTHORIZATION_FAILED);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managing_acls_needs_alter_on_the_cluster_and_listing_them_describe() {
    let running = start(config()).await;
    running
        .deny(&[deny(ResourceType::Cluster, CLUSTER_NAME, Operation::Alter)])
        .await;
    let another = deny(ResourceType::Topic, "t", Operation::Read);
    let refused = running.admin.create_acls(&[another]).await.unwrap_err();
    assert_eq!(kafka_code(refused), CLUSTER_AUTHORIZATION_FAILED);
    let refused = running
        .admin
        .delete_acls(&[AclBindingFilter::any()])
        .await
        .unwrap_err();
    assert_eq!(kafka_code(refused), CLUSTER_AUTHORIZATION_FAILED);
    let listed = running
        .admin
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "nothing added nor removed: {listed:?}");

    // The wire answers, per creation and per filter.
    let mut stream = running.connect().await;
    let delete = DeleteAclsRequest::default().with_filters(vec![Default::default(); 2]);
    let response: DeleteAclsResponse = call(&mut stream, ApiKey::DeleteAcls, 3, &delete).await;
    let codes: Vec<i16> = response
        .filter_results
        .iter()
        .map(|r| r.error_code)
        .collect();
    assert_eq!(codes, [CLUSTER_AUTHORIZATION_FAILED; 2]);
    running.broker.stop().await;

    let running = start(config()).await;
    running
        .deny(&[deny(
            ResourceType::Cluster,
            CLUSTER_NAME,
            Operation::Describe,
        )])
        .await;
    let refused = running
        .admin
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap_err();
    assert_eq!(kafka_code(refused), CLUSTER_AUTHORIZATION_FAILED);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn super_users_are_served_whatever_the_acls_deny() {
    let file = ConfigFile::parse(r#"super_users = ["User:ANONYMOUS", "User:admin"]"#).unwrap();
    let mut config = config();
    file.apply(&mut config).unwrap();
    assert_eq!(
        config.super_users,
        [Principal::user("ANONYMOUS"), Principal::user("admin")]
    );
    let bad = ConfigFile::parse(r#"super_users = ["admin"]"#).unwrap();
    let error = bad.apply(&mut BrokerConfig::default()).unwrap_err();
    assert!(
        error.contains("super_users") && error.contains("User:alice"),
        "{error}"
    );

    let running = start(config).await;
    running.create_topic("orders");
    running
        .deny(&[
            acl(
                ResourceType::Topic,
                "*",
                PatternType::Literal,
                "User:*",
                Operation::All,
                Permission::Deny,
            ),
            deny(ResourceType::Cluster, CLUSTER_NAME, Operation::Alter),
        ])
        .await;
    let mut stream = running.connect().await;
    let request = produce_request(
        1,
        "orders",
        0,
        support::batch(&["a"], strata::log::now_ms()),
    );
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(running.log_end("orders"), 1);
    let removed = running
        .admin
        .delete_acls(&[AclBindingFilter::any()])
        .await
        .unwrap();
    assert_eq!(removed.len(), 2);
    running.broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_any_acl_exists_an_unauthenticated_caller_gets_only_what_acls_allow_as_in_kafka() {
    let running = start(kafkas_default()).await;
    running.create_topic("orders");
    let produce = |value: &str| {
        produce_request(
            1,
            "orders",
            0,
            support::batch(&[value], strata::log::now_ms()),
        )
    };
    // No ACL yet: a development broker serves its loopback listener.
    let mut stream = running.connect().await;
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &produce("a")).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    running
        .admin
        .create_acls(&[acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:ANONYMOUS",
            Operation::Read,
            Permission::Allow,
        )])
        .await
        .unwrap();
    // One ACL, and the listener's callers get what it allows, nothing else:
    // no write, no managing ACLs.
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &produce("b")).await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        running.log_end("orders"),
        1,
        "the refused write appended nothing"
    );
    let refused = (running.admin)
        .create_acls(&[deny(ResourceType::Topic, "t", Operation::Read)])
        .await
        .unwrap_err();
    assert_eq!(kafka_code(refused), CLUSTER_AUTHORIZATION_FAILED);
    let refused = (running.admin)
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap_err();
    assert_eq!(kafka_code(refused), CLUSTER_AUTHORIZATION_FAILED);
    let Running { broker, admin, dir } = running;
    drop(admin);
    broker.stop().await;

    // As Kafka's operators do, the loopback listener is made an admin's
    // door by naming its principal a super user.
    let mut config = kafkas_default();
    config.super_users = vec![Principal::user("ANONYMOUS")];
    let broker = InProcessBroker::start_in(dir.path(), config).await;
    let admin = admin_of(&broker).await;
    let listed = admin.describe_acls(&AclBindingFilter::any()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_acl_file_stops_the_broker_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let security = dir.path().join("security");
    std::fs::create_dir_all(&security).unwrap();
    std::fs::write(
        security.join("acls.json"),
        b"{\"version\": 1, \"acls\": [{]}",
    )
    .unwrap();
    let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..BrokerConfig::default()
    };
    let error = Broker::bind(config, log)
        .await
        .err()
        .expect("the broker refuses to start");
    let message = error.to_string();
    assert!(message.contains("acls.json"), "{message}");
}

/// Runs `strata ARGS` against `addr`; returns (success, stdout, stderr).
fn strata(addr: std::net::SocketAddr, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(STRATA)
        .args(args)
        .env("STRATA_BOOTSTRAP", addr.to_string())
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acls_command_adds_lists_and_removes_acls_that_the_broker_enforces() {
    let running = start(config()).await;
    running.create_topic("orders");
    let addr = running.broker.addr;
    let run =
        move |args: Vec<&'static str>| tokio::task::spawn_blocking(move || strata(addr, &args));
    let (ok, _, stderr) = run(vec![
        "acls",
        "add",
        "--deny-principal",
        "User:ANONYMOUS",
        "--operation",
        "write",
        "--operation",
        "describe",
        "--topic",
        "orders",
        "--topic",
        "audit",
    ])
    .await
    .unwrap();
    assert!(ok, "{stderr}");
    assert_eq!(stderr.matches("added").count(), 4, "{stderr}");
    let (ok, _, stderr) = run(vec![
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
        "--group",
        "app-",
        "--resource-pattern-type",
        "prefixed",
        "--host",
        "10.0.0.1",
    ])
    .await
    .unwrap();
    assert!(ok, "{stderr}");

    let (ok, stdout, stderr) = run(vec!["acls", "list", "--format", "json"]).await.unwrap();
    assert!(ok, "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 5, "{listed}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|acl| acl["pattern_type"] == "PREFIXED"
                && acl["resource_name"] == "app-"
                && acl["host"] == "10.0.0.1"
                && acl["operation"] == "READ")
    );
    let (ok, stdout, _) = run(vec![
        "acls",
        "list",
        "--group",
        "app-1",
        "--resource-pattern-type",
        "match",
    ])
    .await
    .unwrap();
    assert!(ok);
    assert!(
        stdout.contains("User:alice") && !stdout.contains("ANONYMOUS"),
        "{stdout}"
    );

    // The broker enforces what the command added.
    let mut stream = running.connect().await;
    let request = produce_request(
        1,
        "orders",
        0,
        support::batch(&["a"], strata::log::now_ms()),
    );
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    let (ok, _, stderr) = run(vec!["topics", "describe", "orders"]).await.unwrap();
    assert!(!ok, "describe is denied");
    assert!(stderr.contains("TopicAuthorizationFailed"), "{stderr}");

    // Remove one operation, then everything on the topics.
    let (ok, _, stderr) = run(vec![
        "acls",
        "remove",
        "--deny-principal",
        "User:ANONYMOUS",
        "--operation",
        "describe",
        "--topic",
        "orders",
    ])
    .await
    .unwrap();
    assert!(ok, "{stderr}");
    assert!(stderr.contains("removed 1 ACL"), "{stderr}");
    let (ok, _, stderr) = run(vec![
        "acls", "remove", "--topic", "orders", "--topic", "audit",
    ])
    .await
    .unwrap();
    assert!(ok, "{stderr}");
    assert!(stderr.contains("removed 3 ACL"), "{stderr}");
    let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);

    // Mistakes are named before anything is sent.
    let (ok, _, stderr) = run(vec![
        "acls",
        "add",
        "--topic",
        "orders",
        "--operation",
        "read",
    ])
    .await
    .unwrap();
    assert!(!ok && stderr.contains("--allow-principal"), "{stderr}");
    let (ok, _, stderr) = run(vec![
        "acls",
        "add",
        "--allow-principal",
        "alice",
        "--operation",
        "read",
        "--topic",
        "t",
    ])
    .await
    .unwrap();
    assert!(!ok && stderr.contains("User:alice"), "{stderr}");
    let (ok, _, stderr) = run(vec![
        "acls",
        "add",
        "--allow-principal",
        "User:a",
        "--operation",
        "publish",
        "--topic",
        "t",
    ])
    .await
    .unwrap();
    assert!(!ok && stderr.contains("unknown operation"), "{stderr}");
    running.broker.stop().await;
}
