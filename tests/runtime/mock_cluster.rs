//! A remote app on a cluster of three brokers: the wordcount example, as a
//! real process, against librdkafka's mock cluster
//! (tests/support/mock_cluster.rs), where Produce and Fetch are served only
//! by a partition's leader and group and transaction requests only by their
//! coordinator.
//!
//! While the app works, its transaction and group coordinators move to
//! other brokers, and a transaction coordinator goes down with a commit in
//! flight: its EndTxn decided and the answer lost with the connection. The
//! app must ride both out and end exactly once: every word counted once per
//! occurrence in its state, `word-counts` holding 1, 2, …, N per word in
//! order, nothing lost, nothing twice.
//!
//! What the mock does not model shapes what is checked: it keeps no list of aborted
//! transactions, so a read_committed reader sees an aborted transaction's
//! records; and it writes its transaction markers with CRC 0, so the app
//! runs with `--check-crcs false`. A commit shipped twice, or a transaction
//! aborted and shipped again, shows here as a doubled count. The mock has
//! no CreateTopics or DescribeConfigs: the topics are made through its C
//! API first.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use strata::client::{ClientConfig, Cluster, FetchOptions, Fetcher};
use support::MockCluster;
use support::mock_cluster::Coordinator;
use support::wait::Deadline;

const BROKERS: i32 = 3;
const PARTITIONS: i32 = 2;
/// The app's topics, made before it starts (the mock cannot create them
/// on request).
const TOPICS: [&str; 6] = [
    "lines",
    "words",
    "word-counts",
    "wordcount-split-positions",
    "wordcount-count-positions",
    "wordcount-counts-changelog",
];
/// Lines appended before each step.
const LINES_PER_STEP: usize = 1500;
/// How long any one wait may take; it guards against a hang and measures
/// nothing.
const WAIT: Duration = Duration::from_secs(120);
/// How long the coordinator stays down: less than the client's retries
/// last (about 8 s), so the app rides it out without a restart of its
/// tasks.
const DOWN: Duration = Duration::from_secs(3);

fn wordcount() -> PathBuf {
    support::example::example("wordcount")
}

/// Every transactional id of the app: one per task.
fn transactional_ids() -> Vec<String> {
    (["split", "count"].iter())
        .flat_map(|processor| (0..PARTITIONS).map(move |p| format!("wordcount-{processor}-{p}")))
        .collect()
}

/// Where the transactions of task `n` (in [`transactional_ids`]' order)
/// are coordinated after the move: the broker after their first one.
fn moved(n: usize) -> i32 {
    (n as i32 + 1) % BROKERS + 1
}

/// Waits until each (broker, API) in `wanted` has been asked since
/// tracking began.
fn wait_requests(mock: &MockCluster, app: &mut App, wanted: &[(i32, ApiKey)]) {
    let deadline = Deadline::after(format!("requests {wanted:?}"), WAIT);
    let mut seen = std::collections::BTreeSet::new();
    loop {
        app.assert_running();
        seen.extend(mock.requests().into_keys());
        let missing: Vec<_> = (wanted.iter())
            .filter(|(broker, api)| !seen.contains(&(*broker, *api as i16)))
            .collect();
        if missing.is_empty() {
            return;
        }
        deadline.check(format_args!(": none yet of {missing:?}"));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Line `n`: a few words from a small vocabulary, so every word recurs.
fn line(n: usize) -> String {
    format!("w{} w{} common w{}", n % 7, n % 13, (n * 31) % 17)
}

/// Appends lines `from..to` to `lines`.
fn produce(bootstrap: &str, from: usize, to: usize) {
    let text: Vec<String> = (from..to).map(line).collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
    command.args(["produce", "lines", "--bootstrap", bootstrap]);
    let output = support::process::run_with_input(&mut command, text.join("\n").as_bytes());
    assert!(output.status.success(), "{output:?}");
}

/// Per word, how often lines `0..to` hold it.
fn expected_counts(to: usize) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for n in 0..to {
        for word in line(n).split_whitespace() {
            *counts.entry(word.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// The app, running, with what it writes to stderr collected.
struct App {
    child: Child,
    log: support::process::Log,
}

impl App {
    fn start(location: &[&str]) -> Self {
        let (child, log) =
            support::process::spawn_logged(Command::new(wordcount()).args(location).args([
                "run",
                "--commit-ms",
                "100",
            ]));
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn assert_running(&mut self) {
        assert!(
            matches!(self.child.try_wait(), Ok(None)),
            "the app stopped:\n{}",
            self.log()
        );
    }

    /// Stops it with SIGTERM and waits; its log.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        let log = self.log();
        assert!(status.success(), "the app ended {status}:\n{log}");
        log
    }
}

/// (word, count) records of `word-counts`, per partition, in log order:
/// every data record (the mock serves aborted ones too).
fn word_counts(
    runtime: &tokio::runtime::Runtime,
    cluster: &Arc<Cluster>,
) -> Vec<Vec<(String, String)>> {
    runtime.block_on(async {
        let fetcher = Fetcher::new(
            Arc::clone(cluster),
            FetchOptions {
                min_bytes: 1,
                max_wait: Duration::from_millis(10),
                read_committed: true,
            },
        );
        let mut partitions = Vec::new();
        for partition in 0..PARTITIONS {
            let deadline = Deadline::after(format!("reading word-counts/{partition}"), WAIT);
            let (mut records, mut offset) = (Vec::new(), 0);
            loop {
                deadline.check("");
                let fetched = fetcher
                    .fetch("word-counts", partition, offset, 1 << 20)
                    .await
                    .unwrap();
                for batch in fetched.visible_batches() {
                    for record in batch.unwrap().records(1 << 20).unwrap().iter() {
                        let record = record.unwrap();
                        if record.offset >= fetched.offset {
                            let text = |b: Option<&[u8]>| {
                                String::from_utf8(b.unwrap_or_default().to_vec()).unwrap()
                            };
                            records.push((text(record.key), text(record.value)));
                        }
                    }
                }
                offset = fetched.next_offset();
                if offset >= fetched.high_watermark {
                    break;
                }
            }
            partitions.push(records);
        }
        partitions
    })
}

/// Waits until `word-counts` holds a record per word of lines `0..to`.
fn wait_counted(
    runtime: &tokio::runtime::Runtime,
    cluster: &Arc<Cluster>,
    app: &mut App,
    to: usize,
) {
    let due: u64 = expected_counts(to).values().sum();
    let deadline = Deadline::after(format!("word-counts to hold {due} records"), WAIT);
    loop {
        app.assert_running();
        let held: usize = word_counts(runtime, cluster).iter().map(Vec::len).sum();
        if held as u64 >= due {
            return;
        }
        deadline.check(format_args!(" ({held} so far)"));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks `word-counts` and the app's state against lines `0..to`.
fn assert_exactly_once(partitions: &[Vec<(String, String)>], state: &str, to: usize) {
    let expected = expected_counts(to);
    let mut finals = BTreeMap::new();
    for records in partitions {
        finals.extend(support::wordcount::counts_in_order(records));
    }
    assert_eq!(finals, expected, "word-counts' last count per word");
    let stored: BTreeMap<String, u64> = (state.lines())
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3, "a dump-state line {line:?}");
            assert_eq!(fields[0], "counts");
            (fields[1].to_string(), fields[2].parse().unwrap())
        })
        .collect();
    assert_eq!(stored, expected, "the `counts` store");
}

fn dump_state(location: &[&str]) -> String {
    let output = Command::new(wordcount())
        .args(location)
        .arg("dump-state")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "dump-state: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_remote_wordcount_on_three_brokers_rides_out_moved_coordinators_and_a_coordinator_down_mid_commit()
 {
    let topics: Vec<(&str, i32)> = TOPICS.iter().map(|t| (*t, PARTITIONS)).collect();
    let mock = MockCluster::start(BROKERS as usize, &topics);
    mock.offer_group_versions_it_parses();
    mock.set_initial_rebalance_delay(Duration::from_millis(100));
    // Every broker leads something and coordinates something.
    for (shift, topic) in TOPICS.iter().enumerate() {
        for partition in 0..PARTITIONS {
            mock.set_leader(topic, partition, (partition + shift as i32) % BROKERS + 1);
        }
    }
    let ids = transactional_ids();
    for (n, id) in ids.iter().enumerate() {
        mock.set_coordinator(Coordinator::Transaction, id, n as i32 % BROKERS + 1);
    }
    mock.set_coordinator(Coordinator::Group, "wordcount", 2);
    let bootstrap = mock.bootstrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let location = [
        "--bootstrap",
        &bootstrap,
        "--state-dir",
        state.to_str().unwrap(),
        "--check-crcs",
        "false",
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cluster = runtime
        .block_on(Cluster::connect(ClientConfig::new(&bootstrap)))
        .unwrap();

    produce(&bootstrap, 0, LINES_PER_STEP);
    let mut app = App::start(&location);
    wait_counted(&runtime, &cluster, &mut app, LINES_PER_STEP);

    // Coordinators move while the app works: every transaction's to the
    // next broker, the group's to another. Its commits go on only once
    // they found the new transaction coordinators (the old ones answer
    // NOT_COORDINATOR); a heartbeat at broker 3 shows the group's found.
    mock.track_requests();
    produce(&bootstrap, LINES_PER_STEP, 2 * LINES_PER_STEP);
    for (n, id) in ids.iter().enumerate() {
        mock.set_coordinator(Coordinator::Transaction, id, moved(n));
    }
    mock.set_coordinator(Coordinator::Group, "wordcount", 3);
    wait_requests(&mock, &mut app, &[(3, ApiKey::Heartbeat)]);
    wait_counted(&runtime, &cluster, &mut app, 2 * LINES_PER_STEP);

    // A coordinator goes down with a commit in flight: the next EndTxn it
    // gets is decided and its answer held back, and the broker goes down
    // before sending it, the connection (and the answer) lost.
    let coordinator = moved(0);
    mock.push_broker_errors(coordinator, ApiKey::EndTxn, &[(0, Duration::from_secs(2))]);
    produce(&bootstrap, 2 * LINES_PER_STEP, 3 * LINES_PER_STEP);
    let deadline = Deadline::after("a commit at the coordinator", WAIT);
    while mock.broker_errors_left(coordinator, ApiKey::EndTxn) > 0 {
        app.assert_running();
        deadline.check("");
        std::thread::sleep(Duration::from_millis(10));
    }
    mock.broker_down(coordinator);
    std::thread::sleep(DOWN);
    mock.broker_up(coordinator);
    produce(&bootstrap, 3 * LINES_PER_STEP, 4 * LINES_PER_STEP);
    wait_counted(&runtime, &cluster, &mut app, 4 * LINES_PER_STEP);

    // Stopped cleanly, the app has shipped all it committed.
    let log = app.stop();
    let topics = word_counts(&runtime, &cluster);
    let state = dump_state(&location);
    if std::panic::catch_unwind(|| assert_exactly_once(&topics, &state, 4 * LINES_PER_STEP))
        .is_err()
    {
        panic!("not exactly once; the app's log:\n{log}");
    }
}
