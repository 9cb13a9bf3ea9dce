//! The `strata_group_lag` and `strata_group_committed_offset` metrics of a
//! real `strata serve`, scraped over HTTP, against what the test itself
//! produced and committed: for every group and every partition it committed
//! for, the committed offset is the one committed and the lag is the
//! partition's log end (the records produced to it) minus that offset; a
//! partition a group never committed for has no row. The figures follow
//! further produces (lag grows by exactly what was produced) and further
//! commits (forward, backward, to the end: lag zero), for a subscribed
//! group member and for a group that commits without members, side by side.
//!
//! Record counts and committed offsets come from a seeded RNG: the seed is
//! printed, and `STRATA_SEED=<seed>` replays it.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strata::client::{
    Admin, ClientConfig, Cluster, Consumer, ConsumerConfig, Producer, ProducerConfig,
    ProducerRecord,
};
use support::wait::Deadline;
use support::{Rng, ServerProcess};

const TOPIC: &str = "clicks";
const PARTITIONS: i32 = 4;
/// The subscribed group, and the one that commits without members.
const MEMBER_GROUP: &str = "dashboards";
const BARE_GROUP: &str = "audit \"nightly\"";
/// Records produced to each partition per round: `0..PER_ROUND_MAX`.
const PER_ROUND_MAX: u64 = 60;
/// Rounds of produce-then-commit after the first.
const ROUNDS: usize = 4;
const WAIT: Duration = Duration::from_secs(30);

/// Per (group, partition) of [`TOPIC`]: committed offset and lag.
type Rows = BTreeMap<(String, i32), (i64, i64)>;

/// Produces `counts[p]` records to each partition p and waits for every
/// acknowledgement (acks=all).
async fn produce(producer: &Producer, counts: &[u64]) {
    let mut deliveries = Vec::new();
    for (partition, &count) in (0..PARTITIONS).zip(counts) {
        for n in 0..count {
            let mut record =
                ProducerRecord::new(TOPIC, None, format!("p{partition}-{n}").as_bytes());
            record.partition = Some(partition);
            deliveries.push(producer.send(record).await.unwrap());
        }
    }
    for delivery in deliveries {
        delivery.await.unwrap();
    }
}

/// The group rows of [`TOPIC`] in a scrape.
fn group_rows(scrape: &str) -> Rows {
    let mut offsets = BTreeMap::new();
    let mut lags = BTreeMap::new();
    for line in scrape.lines() {
        let (target, name) = if let Some(rest) = line.strip_prefix("strata_group_lag{") {
            (&mut lags, rest)
        } else if let Some(rest) = line.strip_prefix("strata_group_committed_offset{") {
            (&mut offsets, rest)
        } else {
            continue;
        };
        let (labels, value) = name.rsplit_once("} ").expect("labels, then a value");
        let group = label(labels, "group");
        if label(labels, "topic") != TOPIC {
            continue;
        }
        let partition: i32 = label(labels, "partition").parse().unwrap();
        let value: i64 = value.trim().parse().unwrap();
        target.insert((group, partition), value);
    }
    assert_eq!(
        offsets.keys().collect::<Vec<_>>(),
        lags.keys().collect::<Vec<_>>(),
        "every committed offset has its lag:\n{scrape}"
    );
    offsets
        .into_iter()
        .map(|(key, offset)| {
            let lag = lags[&key];
            (key, (offset, lag))
        })
        .collect()
}

/// A label's value, with Prometheus's escapes (`\"`, `\\`) undone.
fn label(labels: &str, name: &str) -> String {
    let start = labels
        .find(&format!("{name}=\""))
        .unwrap_or_else(|| panic!("no label {name} in {labels}"))
        + name.len()
        + 2;
    let mut value = String::new();
    let mut chars = labels[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return value,
            '\\' => value.push(chars.next().expect("an escaped character")),
            c => value.push(c),
        }
    }
    panic!("label {name} is not closed in {labels}");
}

/// What the metrics must say: for each committed (group, partition), the
/// offset committed and the records produced to the partition minus it.
fn expected(committed: &BTreeMap<(String, i32), i64>, ends: &[u64]) -> Rows {
    committed
        .iter()
        .map(|((group, partition), &offset)| {
            let end = ends[*partition as usize] as i64;
            ((group.clone(), *partition), (offset, end - offset))
        })
        .collect()
}

/// Scrapes off the test's threads (the scrape blocks).
async fn scrape(server: &Arc<ServerProcess>) -> Rows {
    let server = Arc::clone(server);
    let text = tokio::task::spawn_blocking(move || server.scrape_metrics())
        .await
        .unwrap();
    group_rows(&text)
}

#[tokio::test]
async fn group_lag_is_log_end_minus_committed_and_follows_produces_and_commits() {
    let mut rng = Rng(support::rng::seed());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("strata.toml");
    std::fs::write(
        &config,
        "metrics = \"127.0.0.1:0\"\ngroup_initial_rebalance_delay_ms = 0\n",
    )
    .unwrap();
    let server = Arc::new(ServerProcess::start_with(
        env!("CARGO_BIN_EXE_strata"),
        &dir.path().join("data"),
        &[std::ffi::OsStr::new("--config"), config.as_os_str()],
        std::process::Stdio::null(),
    ));
    let cluster = Cluster::connect(ClientConfig::new(&server.addr))
        .await
        .unwrap();
    Admin::new(Arc::clone(&cluster))
        .create_topic(TOPIC, PARTITIONS, &[])
        .await
        .unwrap();
    let producer = Producer::new(Arc::clone(&cluster), ProducerConfig::default())
        .await
        .unwrap();
    let mut ends = vec![0u64; PARTITIONS as usize];
    let produced: Vec<u64> = (0..PARTITIONS).map(|_| rng.below(PER_ROUND_MAX)).collect();
    produce(&producer, &produced).await;
    ends.iter_mut()
        .zip(&produced)
        .for_each(|(end, n)| *end += n);
    assert!(
        scrape(&server).await.is_empty(),
        "no group has committed yet"
    );

    // A member of a subscribed group, holding every partition.
    let mut member = Consumer::new(
        Arc::clone(&cluster),
        ConsumerConfig {
            group_id: Some(MEMBER_GROUP.into()),
            ..ConsumerConfig::default()
        },
    );
    member.subscribe(&[TOPIC]).unwrap();
    let deadline = Deadline::after("the member's assignment", WAIT);
    while member.assignment().len() < PARTITIONS as usize || member.generation().is_none() {
        deadline.check("");
        member.poll(Duration::from_millis(100)).await.unwrap();
    }
    // A group that commits by itself (generation -1, no member).
    let mut bare = Consumer::new(
        Arc::clone(&cluster),
        ConsumerConfig {
            group_id: Some(BARE_GROUP.into()),
            ..ConsumerConfig::default()
        },
    );
    bare.assign(
        &(0..PARTITIONS)
            .map(|p| (TOPIC.to_string(), p))
            .collect::<Vec<_>>(),
    );

    let mut committed: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for round in 0..=ROUNDS {
        if round > 0 {
            let produced: Vec<u64> = (0..PARTITIONS).map(|_| rng.below(PER_ROUND_MAX)).collect();
            produce(&producer, &produced).await;
            ends.iter_mut()
                .zip(&produced)
                .for_each(|(end, n)| *end += n);
            // Produced, nothing committed: the lag grows by exactly that.
            assert_eq!(
                scrape(&server).await,
                expected(&committed, &ends),
                "round {round}, after producing {produced:?}"
            );
        }
        for (group, consumer) in [(MEMBER_GROUP, &mut member), (BARE_GROUP, &mut bare)] {
            // Some partitions each round, anywhere from the start to the
            // end (backwards too); the last round commits every one at
            // its end.
            let mut offsets: Vec<(String, i32, i64)> = Vec::new();
            for partition in 0..PARTITIONS {
                let end = ends[partition as usize];
                let offset = match round {
                    ROUNDS => end,
                    _ if rng.below(3) == 0 => continue,
                    _ => rng.below(end + 1),
                };
                offsets.push((TOPIC.to_string(), partition, offset as i64));
            }
            consumer.commit_offsets(&offsets).await.unwrap();
            for (_, partition, offset) in offsets {
                committed.insert((group.to_string(), partition), offset);
            }
        }
        assert_eq!(
            scrape(&server).await,
            expected(&committed, &ends),
            "round {round}, after committing"
        );
    }
    let rows = scrape(&server).await;
    assert_eq!(rows.len(), 2 * PARTITIONS as usize);
    assert!(rows.values().all(|&(_, lag)| lag == 0), "{rows:?}");
    member.close().await.unwrap();
}
