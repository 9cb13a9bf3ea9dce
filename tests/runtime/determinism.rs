//! Determinism of a pipeline with several inputs: the checkout example (a
//! stream–table join, a windowed aggregate and a stream–stream join over
//! three topics, one processor) run as a real process over a backlog
//! must give the same bytes whatever the fetch sizes, commit intervals,
//! SIGKILLs and restarts, and whether it runs live, as a rebuild or as a
//! replay. The inputs interleave in time, some records are out of order
//! within their partition, batches hold 1 to 64 records, some compressed.
//!
//! The reference is one crash-free `run --until-end` with the defaults.
//! Each case runs the pipeline with random `--fetch-bytes` (1 KiB to 4
//! MiB), `--commit-records` and `--commit-ms`, killed at random moments and
//! restarted (each restart with settings of its own, a live `run` or a run
//! to the end), then compares every
//! derived partition record by record (offset, timestamp, key, value) and
//! every store entry (`dump-state`) with the reference. Each output
//! partition has one writer (the outputs keep the input's key), so its
//! records are in one order only.
//!
//! Remote, one case runs through `strata serve` (transactions, changelogs):
//! its records and state must be the reference's too.
//!
//! The seed is printed; `STRATA_SEED=<seed>` replays it.
//! `STRATA_SOAK_DETERMINISM_CASES` sets the number of cases (`make soak`).

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use strata::log::{LogConfig, LogManager, PartitionLog};
use support::{Rng, ServerProcess, Stored};

const PARTITIONS: i32 = 3;
const CUSTOMERS: usize = 100;
const ORDERS: usize = 1_500;
/// Cases of `make test`; `STRATA_SOAK_DETERMINISM_CASES` sets others.
const CASES_QUICK: usize = 5;
/// The orders span this much event time, from yesterday's start (recent
/// enough for the default retention of 7 days).
const SPAN_MS: i64 = 40 * 60 * 1000;
const TIERS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];
const DERIVED: [&str; 3] = ["orders-by-tier", "spend-per-minute", "order-payments"];

/// (key, value, timestamp) in the order appended.
type Records = Vec<(String, String, i64)>;

/// Per derived topic, each partition's records.
type Topics = BTreeMap<String, Vec<Vec<Stored>>>;

/// Every derived partition's records, and `dump-state`'s lines.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    topics: Topics,
    state: String,
}

struct Reference {
    /// The inputs as written, before any run.
    pristine: tempfile::TempDir,
    /// After the reference run.
    ran: tempfile::TempDir,
    outcome: Outcome,
    run_ms: u64,
    seed: u64,
}

fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let seed = support::rng::seed();
        let mut rng = Rng(seed);
        let pristine = tempfile::tempdir().unwrap();
        write_inputs(pristine.path(), &mut rng);
        let ran = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), ran.path());
        // Built first: the kills are spread over the run's time alone.
        support::example::example("checkout");
        let started = Instant::now();
        checked(checkout(ran.path()).args(["run", "--until-end"]));
        let run_ms = started.elapsed().as_millis() as u64;
        let outcome = outcome(ran.path(), "");
        let records: usize = (outcome.topics.values().flatten()).map(Vec::len).sum();
        assert!(records > ORDERS * 2, "the pipeline wrote {records} records");
        eprintln!("reference run: {run_ms} ms, {records} derived records");
        Reference {
            pristine,
            ran,
            outcome,
            run_ms,
            seed,
        }
    })
}

/// Profiles changing over time, orders and payments interleaved with
/// them, a few records of each topic out of order within its partition.
fn write_inputs(data: &Path, rng: &mut Rng) {
    // Yesterday at midnight (UTC): a seed gives the same records all day.
    const DAY_MS: i64 = 24 * 3_600_000;
    let start_ms = (strata::log::now_ms() / DAY_MS - 1) * DAY_MS;
    let customer = |n: u64| format!("c{n}");
    let mut customers = Records::new();
    for c in 0..CUSTOMERS as u64 {
        for _ in 0..4 {
            let at = start_ms + rng.below(SPAN_MS as u64) as i64;
            let tier = TIERS[rng.below(4) as usize];
            customers.push((customer(c), format!(r#"{{"tier":"{tier}"}}"#), at));
        }
    }
    let (mut orders, mut payments) = (Records::new(), Records::new());
    for id in 0..ORDERS as u64 {
        let at = start_ms + rng.below(SPAN_MS as u64) as i64;
        let (who, cents) = (
            customer(rng.below(CUSTOMERS as u64)),
            100 + rng.below(10_000),
        );
        orders.push((
            who.clone(),
            format!(r#"{{"id":{id},"amount_cents":{cents}}}"#),
            at,
        ));
        if rng.below(10) < 7 {
            let paid_at = at + rng.below(15 * 60 * 1000) as i64;
            payments.push((who, format!(r#"{{"amount_cents":{cents}}}"#), paid_at));
        }
    }
    for (topic, mut records) in [
        ("customers", customers),
        ("orders", orders),
        ("payments", payments),
    ] {
        records.sort_by_key(|r| r.2);
        // Appended late: stamped up to two minutes before their place.
        for record in &mut records {
            if rng.below(20) == 0 {
                record.2 -= rng.below(120_000) as i64;
            }
        }
        support::append_keyed_batches(data, topic, PARTITIONS, &records, 64, rng);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn checkout(data: &Path) -> Command {
    let mut command = Command::new(support::example::example("checkout"));
    command.arg("--data-dir").arg(data);
    command
}

fn checked(command: &mut Command) -> Output {
    let output = command.output().expect("checkout runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The derived topics (named with `suffix`, a version's) and the state.
fn outcome(data: &Path, suffix: &str) -> Outcome {
    let topics = derived(data, suffix, support::read_all);
    let mut dump = checkout(data);
    dump.arg("dump-state");
    if !suffix.is_empty() {
        dump.args(["--version", suffix.trim_start_matches('.')]);
    }
    let state = String::from_utf8(checked(&mut dump).stdout).unwrap();
    Outcome { topics, state }
}

/// Every derived partition's records (the topics named with `suffix`), as
/// `read` reads a partition.
fn derived(data: &Path, suffix: &str, read: fn(&PartitionLog, i64) -> Vec<Stored>) -> Topics {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let mut topics = BTreeMap::new();
    for topic in DERIVED {
        let partitions = (0..PARTITIONS)
            .map(|p| read(&log.partition(&format!("{topic}{suffix}"), p).unwrap(), 0))
            .collect();
        topics.insert(topic.to_string(), partitions);
    }
    log.close().unwrap();
    topics
}

/// The derived topics as a read_committed consumer sees them.
fn committed_topics(data: &Path) -> Topics {
    derived(data, "", support::read_committed)
}

fn log_uniform(rng: &mut Rng, low: u64, high: u64) -> u64 {
    let (low, high) = ((low as f64).ln(), (high as f64).ln());
    let unit = rng.below(1 << 20) as f64 / f64::from(1 << 20);
    (low + unit * (high - low)).exp() as u64
}

fn fetch_bytes(rng: &mut Rng) -> String {
    format!("--fetch-bytes={}", log_uniform(rng, 1 << 10, 4 << 20))
}

/// `command` with random settings: fetch size, commit interval.
fn with_settings(command: &[&str], rng: &mut Rng) -> Vec<String> {
    let mut args: Vec<String> = command.iter().map(|a| a.to_string()).collect();
    args.push(fetch_bytes(rng));
    args.push(format!("--commit-records={}", log_uniform(rng, 1, 20_000)));
    args.push(format!("--commit-ms={}", 1 + rng.below(200)));
    args
}

/// A run to the end with random settings; killed, it may as well be a
/// live run (`run`, which never ends by itself).
fn live_or_to_the_end(rng: &mut Rng, last: bool) -> Vec<String> {
    let live = !last && rng.below(2) == 0;
    let command: &[&str] = if live {
        &["run"]
    } else {
        &["run", "--until-end"]
    };
    with_settings(command, rng)
}

/// Runs the example at `location` with the arguments `attempt(rng, last)`
/// gives, killed `kills` times at random moments and started again each
/// time, then once more to its end; returns how many kills landed before
/// their run ended. The moments fall within the reference's run time at
/// first, and within half as long after a kill that came too late (a
/// restart has less left to do).
fn run_with_kills(
    location: &[&str],
    kills: usize,
    rng: &mut Rng,
    attempt: impl Fn(&mut Rng, bool) -> Vec<String>,
) -> usize {
    let mut window_ms = reference().run_ms.max(50) * 3 / 2;
    let mut landed = 0;
    for _ in 0..kills {
        let mut child = Command::new(support::example::example("checkout"))
            .args(location)
            .args(attempt(rng, false))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(window_ms)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            landed += 1;
        } else {
            window_ms = (window_ms / 2).max(20);
        }
        child.wait().unwrap();
    }
    let mut last = Command::new(support::example::example("checkout"));
    checked(last.args(location).args(attempt(rng, true)));
    landed
}

/// The location flags of an embedded run over `data`.
fn embedded(data: &Path) -> [&str; 2] {
    ["--data-dir", data.to_str().unwrap()]
}

fn cases() -> usize {
    std::env::var("STRATA_SOAK_DETERMINISM_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES_QUICK)
}

/// A record as text, for a failure message.
fn text(record: Option<&Stored>) -> String {
    let Some(record) = record else {
        return "none".into();
    };
    let text = |b: &Option<Vec<u8>>| {
        String::from_utf8_lossy(b.as_deref().unwrap_or_default()).into_owned()
    };
    format!(
        "offset {} at {}: {} → {}",
        record.offset,
        record.timestamp,
        text(&record.key),
        text(&record.value)
    )
}

/// Where two outcomes first differ, for the failure message.
fn first_difference(expected: &Outcome, got: &Outcome) -> String {
    for (topic, partitions) in &expected.topics {
        for (p, records) in partitions.iter().enumerate() {
            let other = &got.topics[topic][p];
            if records != other {
                let at = (records.iter().zip(other))
                    .position(|(a, b)| a != b)
                    .unwrap_or(records.len().min(other.len()));
                return format!(
                    "{topic} partition {p}: {} vs {} records, first difference at index {at}: {} vs {}",
                    records.len(),
                    other.len(),
                    text(records.get(at)),
                    text(other.get(at))
                );
            }
        }
    }
    let lines = (expected.state.lines().zip(got.state.lines())).find(|(a, b)| a != b);
    format!("state: first differing lines {lines:?}")
}

fn assert_same(expected: &Outcome, got: &Outcome, what: &str) {
    assert!(
        expected == got,
        "{what} differs from the reference run (seed {}): {}",
        reference().seed,
        first_difference(expected, got)
    );
}

#[test]
fn any_fetch_size_commit_interval_and_kill_gives_the_reference_bytes() {
    let reference = reference();
    let mut rng = Rng(reference.seed ^ 0x5eed);
    let mut landed = 0;
    for case in 0..cases() {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(reference.pristine.path(), dir.path());
        let kills = 1 + rng.below(3) as usize;
        landed += run_with_kills(&embedded(dir.path()), kills, &mut rng, live_or_to_the_end);
        assert_same(
            &reference.outcome,
            &outcome(dir.path(), ""),
            &format!("case {case} ({kills} kills)"),
        );
    }
    eprintln!("{landed} kills landed mid-run");
    assert!(landed > 0, "no kill landed before its run ended");
}

#[test]
fn a_rebuild_gives_the_state_of_the_live_run() {
    let reference = reference();
    let mut rng = Rng(reference.seed ^ 0xb1d);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(reference.ran.path(), dir.path());
    // A killed rebuild goes on from its last commit at the next.
    let rebuild = |rng: &mut Rng, _| vec!["rebuild".to_string(), fetch_bytes(rng)];
    run_with_kills(&embedded(dir.path()), 1, &mut rng, rebuild);
    // The rebuild writes no topic: the state is what it built.
    assert_same(&reference.outcome, &outcome(dir.path(), ""), "the rebuild");
}

#[test]
fn a_replay_of_the_same_version_gives_the_live_topics_and_diff_finds_nothing() {
    let reference = reference();
    let mut rng = Rng(reference.seed ^ 0x2e91a7);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(reference.ran.path(), dir.path());
    let replay =
        |rng: &mut Rng, _| with_settings(&["replay", "--version", "v2", "--until-end"], rng);
    run_with_kills(&embedded(dir.path()), 1, &mut rng, replay);
    assert_same(
        &reference.outcome,
        &outcome(dir.path(), ".v2"),
        "the replay",
    );
    let diff = checkout(dir.path())
        .args(["diff", "live", "v2"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff.status.success(),
        "diff found differences ({:?}):\n{report}{}",
        diff.status,
        String::from_utf8_lossy(&diff.stderr)
    );
}

#[test]
fn remote_runs_through_a_broker_give_the_reference_records() {
    let reference = reference();
    let mut rng = Rng(reference.seed ^ 0x7e30);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(reference.pristine.path(), &data);
    let state = dir.path().join("state");
    let server = ServerProcess::start(env!("CARGO_BIN_EXE_strata"), &data);
    let location = [
        "--bootstrap",
        server.addr.as_str(),
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let to_the_end = |rng: &mut Rng, _| with_settings(&["run", "--until-end"], rng);
    run_with_kills(&location, 1, &mut rng, to_the_end);
    let dump = Command::new(support::example::example("checkout"))
        .args(location)
        .arg("dump-state")
        .output()
        .unwrap();
    drop(server);
    // Remote, derived topics hold transaction markers between the
    // records: compared without offsets.
    let without_offsets = |topics: &Topics| {
        let mut topics = topics.clone();
        (topics.values_mut().flatten().flatten()).for_each(|r| r.offset = 0);
        topics
    };
    let got = Outcome {
        topics: without_offsets(&committed_topics(&data)),
        state: String::from_utf8(dump.stdout).unwrap(),
    };
    let expected = Outcome {
        topics: without_offsets(&reference.outcome.topics),
        state: reference.outcome.state.clone(),
    };
    assert_same(&expected, &got, "the remote run");
}
