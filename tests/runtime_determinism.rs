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
//! restarted (each restart with settings of its own), then compares every
//! derived partition record by record (offset, timestamp, key, value) and
//! every store entry (`dump-state`) with the reference. Each output
//! partition has one writer (the outputs keep the input's key), so its
//! records are in one order only.
//!
//! The seed is printed; `STRATA_SEED=<seed>` replays it.
//! `STRATA_SOAK_DETERMINISM_CASES` sets the number of cases (`make soak`).

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use strata::client::partitioner::partition_for_key;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use support::{Rng, Stored};

const PARTITIONS: i32 = 3;
const CUSTOMERS: usize = 100;
const ORDERS: usize = 1_500;
/// Cases of `make test`; `STRATA_SOAK_DETERMINISM_CASES` sets others.
const CASES_QUICK: usize = 3;
/// The orders span this much event time, from yesterday's start (recent
/// enough for the default retention of 7 days).
const SPAN_MS: i64 = 40 * 60 * 1000;
const TIERS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];
const DERIVED: [&str; 3] = ["orders-by-tier", "spend-per-minute", "order-payments"];

/// (key, value, timestamp) in the order appended.
type Records = Vec<(String, String, i64)>;

/// Every derived partition's records, and `dump-state`'s lines.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    topics: BTreeMap<String, Vec<Vec<Stored>>>,
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
        append_batches(data, topic, &records, rng);
    }
}

/// Appends `records` to their keys' partitions of `topic` in batches of 1
/// to 64 records, each uncompressed, lz4 or zstd.
fn append_batches(data: &Path, topic: &str, records: &Records, rng: &mut Rng) {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let created = log
        .create_topic(topic, PARTITIONS, Default::default())
        .unwrap();
    let mut per_partition: Vec<Vec<&(String, String, i64)>> = vec![Vec::new(); PARTITIONS as usize];
    for record in records {
        let partition = partition_for_key(record.0.as_bytes(), PARTITIONS);
        per_partition[partition as usize].push(record);
    }
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    for (partition, records) in per_partition.iter().enumerate() {
        for chunk in records.chunks(1 + rng.below(64) as usize) {
            let mut builder = BatchBuilder::new(codecs[rng.below(3) as usize]);
            for (key, value, at) in chunk {
                let record = NewRecord::new(Some(key.as_bytes()), value.as_bytes(), *at);
                builder.push(record).unwrap();
            }
            let batch = builder.build().unwrap();
            created.partitions[partition].append(&batch).unwrap();
        }
    }
    log.close().unwrap();
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
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let mut topics = BTreeMap::new();
    for topic in DERIVED {
        let partitions = (0..PARTITIONS)
            .map(|p| {
                let partition = log.partition(&format!("{topic}{suffix}"), p).unwrap();
                support::read_all(&partition, 0)
            })
            .collect();
        topics.insert(topic.to_string(), partitions);
    }
    log.close().unwrap();
    let mut dump = checkout(data);
    dump.arg("dump-state");
    if !suffix.is_empty() {
        dump.args(["--version", suffix.trim_start_matches('.')]);
    }
    let state = String::from_utf8(checked(&mut dump).stdout).unwrap();
    Outcome { topics, state }
}

/// Random settings for one run: fetch size, commit interval.
fn settings(rng: &mut Rng) -> Vec<String> {
    let log_uniform = |rng: &mut Rng, low: u64, high: u64| {
        let (low, high) = ((low as f64).ln(), (high as f64).ln());
        let unit = rng.below(1 << 20) as f64 / f64::from(1 << 20);
        (low + unit * (high - low)).exp() as u64
    };
    let fetch_bytes = log_uniform(rng, 1 << 10, 4 << 20);
    let commit_records = log_uniform(rng, 1, 20_000);
    let commit_ms = 1 + rng.below(200);
    [
        format!("--fetch-bytes={fetch_bytes}"),
        format!("--commit-records={commit_records}"),
        format!("--commit-ms={commit_ms}"),
    ]
    .into()
}

/// Runs `command` (to its end) with random settings, killed `kills` times
/// at random moments and started again each time; returns how many kills
/// landed before the run ended. The moments fall within the reference's
/// run time at first, and within half as long after a kill that came too
/// late (a restart has less left to do).
fn run_with_kills(data: &Path, command: &[&str], kills: usize, rng: &mut Rng) -> usize {
    let mut window_ms = reference().run_ms.max(50) * 3 / 2;
    let mut landed = 0;
    for _ in 0..kills {
        let mut child = checkout(data)
            .args(command)
            .args(settings(rng))
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
    checked(checkout(data).args(command).args(settings(rng)));
    landed
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
        landed += run_with_kills(dir.path(), &["run", "--until-end"], kills, &mut rng);
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
    let fetch_bytes = settings(&mut rng).swap_remove(0);
    checked(checkout(dir.path()).args(["rebuild", &fetch_bytes]));
    assert_same(&reference.outcome, &outcome(dir.path(), ""), "the rebuild");
}

#[test]
fn a_replay_of_the_same_version_gives_the_live_topics_and_diff_finds_nothing() {
    let reference = reference();
    let mut rng = Rng(reference.seed ^ 0x2e91a7);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(reference.ran.path(), dir.path());
    let replay = ["replay", "--version", "v2", "--until-end"];
    run_with_kills(dir.path(), &replay, 1, &mut rng);
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
