//! Requests from callers on a listener that authenticates, through the
//! same dispatch a connection uses: refused without an ALLOW (with Kafka's
//! codes, and nothing done), served with one, and always for a super user.
//! (A real listener that authenticates arrives with SASL and TLS; the
//! integration tests cover the unauthenticated one over TCP.)

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DescribeLogDirsRequest, DescribeLogDirsResponse, GroupId, InitProducerIdRequest,
    InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse, ListGroupsRequest,
    ListGroupsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{BrokerContext, Reply, handle};
use crate::acl::{
    AccessControlEntry, AclBinding, AclStore, Authorizer, Operation, PatternType, Permission,
    ResourcePattern, ResourceType,
};
use crate::auth::{Caller, Principal};
use crate::fetch_frame::Part;
use crate::group::GroupCoordinator;
use crate::txn::TxnCoordinator;
use crate::{AppendSignals, BrokerConfig, Metrics};
use strata_log::storage::Disk;
use strata_log::{LogConfig, LogManager};
use strata_record::{BatchBuilder, Compression, NewRecord};

/// Kafka's MEMBER_ID_REQUIRED: a v4+ join's first answer.
const MEMBER_ID_REQUIRED: i16 = 79;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// A broker's handlers over a fresh data directory with topics `orders`
/// and `secret`, `acls` stored and `super_users` configured.
fn context(acls: Vec<AclBinding>, super_users: &[&str]) -> (BrokerContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
    for topic in ["orders", "secret"] {
        log.create_topic(topic, 1, Default::default()).unwrap();
    }
    let config = BrokerConfig::default();
    let appends: Arc<AppendSignals> = Arc::default();
    let groups = GroupCoordinator::open(&dir.path().join("groups"), config.groups.clone()).unwrap();
    let transactions = TxnCoordinator::open(
        &dir.path().join("transactions"),
        config.transactions.clone(),
        Arc::clone(&log),
        Arc::clone(&appends),
    )
    .unwrap();
    let store = AclStore::open(&Disk::os(), dir.path()).unwrap();
    if !acls.is_empty() {
        store.create(acls).unwrap();
    }
    let supers = super_users
        .iter()
        .map(|p| Principal::parse(p).unwrap())
        .collect();
    let ctx = BrokerContext {
        log,
        config,
        appends,
        metrics: Metrics::default(),
        groups,
        transactions,
        acls: Authorizer::new(store, supers),
        credentials: crate::auth::CredentialStore::open(dir.path()).unwrap(),
    };
    (ctx, dir)
}

fn endpoint() -> crate::listener::Endpoint {
    crate::listener::Endpoint {
        name: "SASL_PLAINTEXT".into(),
        protocol: strata_protocol::security::SecurityProtocol::SaslPlaintext,
        host: "127.0.0.1".into(),
        port: 9092,
    }
}

fn secured(principal: &str) -> Caller {
    Caller {
        principal: Principal::parse(principal).unwrap(),
        host: "10.0.0.1".into(),
        secured: true,
    }
}

fn allow(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    operation: Operation,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern::new(resource_type, name, pattern_type),
        entry: AccessControlEntry {
            principal: Principal::user("alice"),
            host: "*".into(),
            operation,
            permission: Permission::Allow,
        },
    }
}

/// One request through the dispatch, its response decoded.
fn call<Req: Encodable, Resp: Decodable>(
    ctx: &BrokerContext,
    caller: &Caller,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(3)
        .with_client_id(Some(StrBytes::from_static_str("test")))
        .encode(&mut frame, key.request_header_version(version))
        .unwrap();
    request.encode(&mut frame, version).unwrap();
    let Ok(Reply::Respond(parts)) = handle(ctx, frame.freeze(), true, caller, &endpoint()) else {
        panic!("{key:?} was not answered at once");
    };
    let [Part::Bytes(bytes)] = &parts[..] else {
        panic!("{key:?} answered with file slices");
    };
    let mut response = Bytes::copy_from_slice(&bytes[4..]);
    let header =
        ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 3);
    let decoded = Resp::decode(&mut response, version).unwrap();
    assert_eq!(response.remaining(), 0);
    decoded
}

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.into()))
}

fn produce(topic: &str) -> ProduceRequest {
    let mut builder = BatchBuilder::new(Compression::None);
    builder
        .push(NewRecord::new(None, b"v", strata_record::time::now_ms()))
        .unwrap();
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(builder.build().unwrap()))),
                ]),
        ])
}

fn produced(ctx: &BrokerContext, caller: &Caller, topic: &str) -> i16 {
    let response: ProduceResponse = call(ctx, caller, ApiKey::Produce, 9, &produce(topic));
    response.responses[0].partition_responses[0].error_code
}

fn metadata_names(ctx: &BrokerContext, caller: &Caller) -> Vec<String> {
    let every_topic = MetadataRequest::default().with_topics(None);
    let all: MetadataResponse = call(ctx, caller, ApiKey::Metadata, 12, &every_topic);
    all.topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.as_str().to_string())
        .collect()
}

fn join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range")),
        ])
}

fn init_producer_id(transactional_id: Option<&str>) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.into()))),
        )
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1)
}

#[test]
fn a_secured_caller_without_acls_is_refused_everything_and_nothing_happens() {
    let (ctx, _dir) = context(vec![], &[]);
    let bob = secured("User:bob");
    assert_eq!(produced(&ctx, &bob, "orders"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(ctx.log.partition("orders", 0).unwrap().log_end_offset(), 0);
    assert!(metadata_names(&ctx, &bob).is_empty());
    let named = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name("orders"))),
    ]));
    let response: MetadataResponse = call(&ctx, &bob, ApiKey::Metadata, 12, &named);
    assert_eq!(response.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);

    let joined: JoinGroupResponse = call(&ctx, &bob, ApiKey::JoinGroup, 5, &join("billing"));
    assert_eq!(joined.error_code, GROUP_AUTHORIZATION_FAILED);
    let listed: ListGroupsResponse = call(
        &ctx,
        &bob,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    );
    assert!(listed.groups.is_empty());
    assert!(ctx.groups.list().is_empty(), "no group was made");

    let idempotent: InitProducerIdResponse = call(
        &ctx,
        &bob,
        ApiKey::InitProducerId,
        4,
        &init_producer_id(None),
    );
    assert_eq!(idempotent.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let transactional: InitProducerIdResponse = call(
        &ctx,
        &bob,
        ApiKey::InitProducerId,
        4,
        &init_producer_id(Some("tx")),
    );
    assert_eq!(
        transactional.error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert!(ctx.transactions.describe("tx").is_none());

    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name("new"))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let created: CreateTopicsResponse = call(&ctx, &bob, ApiKey::CreateTopics, 7, &create);
    assert_eq!(created.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(ctx.log.topic("new").is_none());

    let dirs: DescribeLogDirsResponse = call(
        &ctx,
        &bob,
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default(),
    );
    assert_eq!(dirs.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(dirs.results.is_empty());
    let acls: CreateAclsResponse = call(
        &ctx,
        &bob,
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![Default::default()]),
    );
    assert_eq!(acls.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
}

#[test]
fn a_secured_caller_is_served_what_its_acls_allow_and_nothing_else() {
    let (ctx, _dir) = context(
        vec![
            allow(
                ResourceType::Topic,
                "ord",
                PatternType::Prefixed,
                Operation::Write,
            ),
            allow(
                ResourceType::Group,
                "billing",
                PatternType::Literal,
                Operation::Read,
            ),
        ],
        &[],
    );
    let alice = secured("User:alice");
    assert_eq!(produced(&ctx, &alice, "orders"), 0);
    assert_eq!(ctx.log.partition("orders", 0).unwrap().log_end_offset(), 1);
    assert_eq!(produced(&ctx, &alice, "secret"), TOPIC_AUTHORIZATION_FAILED);
    // WRITE implies DESCRIBE: orders is listed, secret is not.
    assert_eq!(metadata_names(&ctx, &alice), ["orders"]);
    // WRITE on some topic lets an idempotent producer start (KIP-679).
    let idempotent: InitProducerIdResponse = call(
        &ctx,
        &alice,
        ApiKey::InitProducerId,
        4,
        &init_producer_id(None),
    );
    assert_eq!(idempotent.error_code, 0);
    // v4 asks for a member id first: the join got past authorization.
    let joined: JoinGroupResponse = call(&ctx, &alice, ApiKey::JoinGroup, 5, &join("billing"));
    assert_ne!(joined.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(joined.error_code, MEMBER_ID_REQUIRED);
    let other: JoinGroupResponse = call(&ctx, &alice, ApiKey::JoinGroup, 5, &join("payroll"));
    assert_eq!(other.error_code, GROUP_AUTHORIZATION_FAILED);
    // Someone else gets nothing from alice's ACLs.
    assert_eq!(
        produced(&ctx, &secured("User:bob"), "orders"),
        TOPIC_AUTHORIZATION_FAILED
    );
}

#[test]
fn a_super_user_is_served_on_a_secured_listener_without_any_acl() {
    let (ctx, _dir) = context(vec![], &["User:admin"]);
    let admin = secured("User:admin");
    assert_eq!(produced(&ctx, &admin, "secret"), 0);
    assert_eq!(metadata_names(&ctx, &admin).len(), 2);
    let dirs: DescribeLogDirsResponse = call(
        &ctx,
        &admin,
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default(),
    );
    assert_eq!(dirs.error_code, 0);
}
