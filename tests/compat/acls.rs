//! ACLs with confluent-kafka (librdkafka) as the oracle: its AdminClient
//! creates, describes and deletes them against `strata serve`, and its
//! producer and consumer are refused with Kafka's authorization errors
//! where the ACLs deny them.
//!
//! Its admin connects through the broker's PLAINTEXT listener, as
//! `User:ANONYMOUS`: made a super user there (Kafka's way to an admin's
//! door), or the listener trusted (`trust_unauthenticated_listeners`) where
//! DENY ACLs on it are what is tested.

use serde_json::{Value, json};

use crate::broker::{Broker, TopicSpec};
use crate::driver::{Client, field};

type Spec = [Value; 7];

fn spec(parts: [&str; 7]) -> Spec {
    parts.map(Value::from)
}

#[test]
fn confluent_kafka_creates_describes_and_deletes_acls() {
    let broker = Broker::start_with_config(&[], "super_users = [\"User:ANONYMOUS\"]\n");
    let alice_reads = spec([
        "TOPIC",
        "orders",
        "LITERAL",
        "User:alice",
        "*",
        "READ",
        "ALLOW",
    ]);
    let bob_writes = spec([
        "TOPIC", "orders-", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW",
    ]);
    let group = spec([
        "GROUP",
        "billing",
        "LITERAL",
        "User:alice",
        "10.0.0.1",
        "READ",
        "DENY",
    ]);
    let cluster = spec([
        "CLUSTER",
        "kafka-cluster",
        "LITERAL",
        "User:ops",
        "*",
        "ALTER",
        "ALLOW",
    ]);
    let result = Client::ConfluentKafka.run(
        "acls",
        broker.addr(),
        json!({
            "create": [alice_reads, bob_writes, group, cluster],
            // Every ACL that applies to topic orders-eu.
            "describe": ["TOPIC", "orders-eu", "MATCH", null, null, "ANY", "ANY"],
            // alice's ACLs.
            "delete": [["ANY", null, "ANY", "User:alice", null, "ANY", "ANY"]],
        }),
    );
    let created: Vec<Option<String>> = field(&result, "created");
    assert_eq!(created, [None, None, None, None], "{result}");
    let described: Vec<Spec> = field(&result, "described");
    assert_eq!(described, std::slice::from_ref(&bob_writes), "{result}");
    let deleted: Vec<Vec<Spec>> = field(&result, "deleted");
    let mut alices = vec![group.clone(), alice_reads.clone()];
    alices.sort_by_key(|s| {
        s.iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    });
    assert_eq!(deleted, [alices], "{result}");
    let after: Vec<Spec> = field(&result, "after");
    let mut left = vec![bob_writes, cluster];
    left.sort_by_key(|s| {
        s.iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    });
    assert_eq!(after, left, "{result}");
}

#[test]
fn confluent_kafka_producer_and_consumer_are_refused_where_acls_deny() {
    let broker = Broker::start_with_config(
        &[TopicSpec::new("guarded", 1), TopicSpec::new("open", 1)],
        "trust_unauthenticated_listeners = true\n",
    );
    let created = Client::ConfluentKafka.run(
        "acls",
        broker.addr(),
        json!({
            "create": [
                ["TOPIC", "guarded", "LITERAL", "User:ANONYMOUS", "*", "WRITE", "DENY"],
                ["GROUP", "guarded-group", "LITERAL", "User:*", "*", "READ", "DENY"],
            ],
            "describe": ["ANY", null, "ANY", null, null, "ANY", "ANY"],
            "delete": [],
        }),
    );
    let described: Vec<Value> = field(&created, "described");
    assert_eq!(described.len(), 2, "{created}");
    let result = Client::ConfluentKafka.run(
        "refused",
        broker.addr(),
        json!({
            "topic": "guarded",
            "group": "guarded-group",
            "consume_topic": "open",
        }),
    );
    assert_eq!(result["produce"], "TOPIC_AUTHORIZATION_FAILED", "{result}");
    assert_eq!(result["consume"], "GROUP_AUTHORIZATION_FAILED", "{result}");
}
