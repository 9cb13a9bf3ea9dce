//! The broker's web console (`console` in strata.toml, `strata serve
//! --console ADDR`): the page and its assets are served from the binary
//! (to requests naming a loopback host only),
//! `/api/console` says it is a broker, and the figures the page shows
//! beyond the older metrics move when they should: how far back a
//! partition reaches, a group's lag in time (how old the next record it has
//! to read is), transactions in flight, and checks the ACLs refused. Then the page itself, in headless
//! Chromium, shows the topic and the group behind.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use strata::broker::BrokerConfig;
use strata::broker::acl::{
    AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern,
    ResourceType,
};
use strata::broker::auth::Principal;
use strata::client::{
    Admin, ClientConfig, Cluster, Consumer, ConsumerConfig, Producer, ProducerConfig,
    ProducerRecord,
};
use support::browser::ConsoleDriver;
use support::http::{get, get_json};

const TOPIC: &str = "clicks";
const GROUP: &str = "dashboards";
const RECORDS: i64 = 50;
const AN_HOUR_MS: i64 = 3_600_000;

/// One sample's value from a scrape, if the sample is there.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .map(|value| value.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_console_serves_its_page_and_the_figures_it_shows_move() {
    let config = BrokerConfig {
        console_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..BrokerConfig::default()
    };
    let broker = support::InProcessBroker::start(config).await;
    let console = broker.console.expect("the console is served").to_string();
    let (status, page) = get(&console, "/");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(r#"<script src="/console.js">"#), "{page}");
    for asset in ["/console.js", "/console.css"] {
        assert_eq!(get(&console, asset).0, 200, "{asset}");
    }
    let (status, described) = get_json(&console, "/api/console");
    assert_eq!(status, 200);
    assert_eq!(described["kind"], "broker", "{described}");
    assert_eq!(get(&console, "/nothing-here").0, 404);
    // Asked under another name (a page elsewhere rebinding its name to
    // 127.0.0.1), a loopback console does not answer.
    let rebound = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&console).unwrap();
        let ask = "GET /metrics HTTP/1.1\r\nHost: evil.example:9090\r\nConnection: close\r\n\r\n";
        stream.write_all(ask.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    let scrape = || get(&console, "/metrics").1;

    // Records stamped an hour ago, a group committed at the first: it is
    // an hour behind.
    let cluster = Cluster::connect(ClientConfig::new(&broker.addr.to_string()))
        .await
        .unwrap();
    let admin = Admin::new(Arc::clone(&cluster));
    admin.create_topic(TOPIC, 1, &[]).await.unwrap();
    let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default())
        .await
        .unwrap();
    let an_hour_ago = strata::log::now_ms() - AN_HOUR_MS;
    for n in 0..RECORDS {
        let mut record = ProducerRecord::new(TOPIC, None, format!("click {n}").as_bytes());
        record.timestamp = Some(an_hour_ago);
        producer.send(record).await.unwrap().await.unwrap();
    }
    let mut consumer = Consumer::new(
        Arc::clone(&cluster),
        ConsumerConfig {
            group_id: Some(GROUP.into()),
            ..ConsumerConfig::default()
        },
    );
    consumer.assign(&[(TOPIC.to_string(), 0)]);
    consumer
        .commit_offsets(&[(TOPIC.to_string(), 0, 1)])
        .await
        .unwrap();
    let labels = format!(r#"{{group="{GROUP}",topic="{TOPIC}",partition="0"}}"#);
    let text = scrape();
    assert_eq!(
        sample(&text, &format!("strata_group_lag{labels}")),
        Some((RECORDS - 1) as f64)
    );
    // The topic reaches back an hour.
    let first = sample(
        &text,
        &format!(r#"strata_log_first_timestamp_seconds{{topic="{TOPIC}",partition="0"}}"#),
    );
    let an_hour_ago_seconds = an_hour_ago as f64 / 1e3;
    assert!(
        first.is_some_and(|s| (s - an_hour_ago_seconds).abs() < 1.0),
        "{first:?}\n{text}"
    );
    let behind = sample(&text, &format!("strata_group_lag_seconds{labels}"));
    assert!(
        behind.is_some_and(|s| s >= 3_500.0),
        "an hour behind: {behind:?}\n{text}"
    );

    // The page, in a real browser: the topic and the group behind.
    let url = format!("http://{console}/");
    let mut page = ConsoleDriver::start(&["broker", &url, TOPIC, GROUP]);
    page.passed("topics");
    page.passed("groups");
    page.finish();

    // Caught up: no lag, in records or in time.
    consumer
        .commit_offsets(&[(TOPIC.to_string(), 0, RECORDS)])
        .await
        .unwrap();
    let text = scrape();
    assert_eq!(
        sample(&text, &format!("strata_group_lag{labels}")),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, &format!("strata_group_lag_seconds{labels}")),
        Some(0.0)
    );

    // A transaction in flight, then none.
    assert_eq!(sample(&scrape(), "strata_transactions_ongoing"), Some(0.0));
    let transactional = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            transactional_id: Some("console-tx".into()),
            linger: Duration::from_millis(1),
            ..ProducerConfig::default()
        },
    )
    .await
    .unwrap();
    transactional.begin_transaction().await.unwrap();
    let delivered = transactional
        .send(ProducerRecord::new(TOPIC, None, b"in a transaction"))
        .await
        .unwrap();
    transactional.flush().await;
    delivered.await.unwrap();
    assert_eq!(sample(&scrape(), "strata_transactions_ongoing"), Some(1.0));
    transactional.commit_transaction().await.unwrap();
    assert_eq!(sample(&scrape(), "strata_transactions_ongoing"), Some(0.0));

    // Once an ACL exists, this unauthenticated caller gets only what ACLs
    // allow: its produce is refused, and counted.
    let denied_before = sample(&scrape(), "strata_authorization_denied_total").unwrap();
    let reader = AclBinding {
        pattern: ResourcePattern::new(ResourceType::Topic, "elsewhere", PatternType::Literal),
        entry: AccessControlEntry {
            principal: Principal::parse("User:reader").unwrap(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        },
    };
    admin.create_acls(&[reader]).await.unwrap();
    // An idempotent producer is refused its id, or else its produce.
    let outcome = async {
        let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default()).await?;
        let delivery = producer
            .send(ProducerRecord::new(TOPIC, None, b"refused"))
            .await?;
        delivery.await.map(|_| ())
    }
    .await;
    assert!(outcome.is_err(), "the produce is refused");
    let denied = sample(&scrape(), "strata_authorization_denied_total").unwrap();
    assert!(denied > denied_before, "{denied_before} then {denied}");
}
