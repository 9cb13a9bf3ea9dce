//! Replays from an offset and from a timestamp, end to end: the wordcount
//! example runs as a real process (`run`, then `replay --version V --from
//! …`, `dump-state --version V`) over a generated `lines` topic, and each
//! replayed version's state and derived output are set against what
//! processing exactly the chosen records gives, computed here from the
//! input alone:
//!
//! - `--from OFFSET`: in every partition, the records at that offset and
//!   after;
//! - `--from <ms>ms` and `--from <RFC 3339>`: in every partition, the first
//!   record whose timestamp is at or after the time, and every record after
//!   it (timestamps are out of order, within batches and across them, so
//!   "after" is by offset, as Kafka's ListOffsets has it);
//! - `--from earliest`: everything, as the live version has it.
//!
//! State is `dump-state`'s `counts` rows (word → occurrences); the derived
//! `word-counts.<version>` holds each word's counts 1, 2, …, N in order.
//! The live version is the same after every replay.
//!
//! And a bad `--from`: garbage and negative offsets are refused before a
//! version is made; an offset past the end of the input is refused, naming
//! the partition and its end (it was accepted, and the version would have
//! skipped whatever arrived below that offset later); a time after every
//! record is not an error: the replay starts at the end and processes
//! nothing.
//!
//! The input comes from a seeded RNG: the seed is printed, and
//! `STRATA_SEED=<seed>` replays it.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strata::log::{LogConfig, LogManager};
use strata::record::Compression;
use support::Rng;

const PARTITIONS: usize = 3;
/// Lines per partition: `LINES_MIN..LINES_MIN + LINES_SPREAD`.
const LINES_MIN: u64 = 150;
const LINES_SPREAD: u64 = 100;
/// Records per appended batch: `1..=BATCH_RECORDS_MAX`.
const BATCH_RECORDS_MAX: u64 = 8;
const WORDS_PER_LINE_MAX: u64 = 6;
const VOCABULARY: u64 = 40;
/// Timestamps: a record every `TICK_MS`, give or take `JITTER_MS`, from an
/// hour ago (recent: retention deletes week-old records).
const TICK_MS: i64 = 1_000;
const JITTER_MS: u64 = 3_000;
const HISTORY_MS: i64 = 3_600_000;

/// Per partition of `lines`: (line, timestamp) in offset order.
type Input = Vec<Vec<(String, i64)>>;

fn wordcount() -> PathBuf {
    support::example::example("wordcount")
}

fn app(data: &Path, args: &[&str]) -> Output {
    Command::new(wordcount())
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("wordcount runs")
}

/// Runs a subcommand that must succeed; its stdout.
fn app_ok(data: &Path, args: &[&str]) -> String {
    let output = app(data, args);
    assert!(
        output.status.success(),
        "wordcount {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs a subcommand that must fail; its stderr.
fn app_fails(data: &Path, args: &[&str]) -> String {
    let output = app(data, args);
    assert!(
        !output.status.success(),
        "wordcount {args:?} succeeded: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stderr).unwrap()
}

/// Generates the input and appends it to `lines`, in batches of a few
/// records, as LZ4 batches.
fn write_input(data: &Path, rng: &mut Rng) -> Input {
    let start = strata::log::now_ms() - HISTORY_MS;
    let input: Input = (0..PARTITIONS)
        .map(|_| {
            let count = LINES_MIN + rng.below(LINES_SPREAD);
            (0..count as i64)
                .map(|i| {
                    let words: Vec<String> = (0..1 + rng.below(WORDS_PER_LINE_MAX))
                        .map(|_| format!("w{}", rng.below(VOCABULARY)))
                        .collect();
                    let jitter = rng.below(2 * JITTER_MS) as i64 - JITTER_MS as i64;
                    (words.join(" "), start + i * TICK_MS + jitter)
                })
                .collect()
        })
        .collect();
    support::with_topic(data, "lines", PARTITIONS as i32, &[], |topic| {
        for (partition, lines) in topic.partitions.iter().zip(&input) {
            let mut rest = &lines[..];
            while !rest.is_empty() {
                let take = (1 + rng.below(BATCH_RECORDS_MAX) as usize).min(rest.len());
                let (batch, after) = rest.split_at(take);
                let records = batch.iter().map(|(line, ts)| (None, line.as_bytes(), *ts));
                partition
                    .append(&support::batch_with(Compression::Lz4, records))
                    .unwrap();
                rest = after;
            }
        }
    });
    input
}

/// Word → occurrences over the lines of each partition from its start
/// index on.
fn counts(input: &Input, starts: &[usize]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (lines, &start) in input.iter().zip(starts) {
        for (line, _) in &lines[start.min(lines.len())..] {
            for word in line.split_whitespace() {
                *counts.entry(word.to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// Per partition, the index of the first line stamped at or after `ms`
/// (the partition's length when none is).
fn first_at_or_after(input: &Input, ms: i64) -> Vec<usize> {
    input
        .iter()
        .map(|lines| {
            lines
                .iter()
                .position(|(_, ts)| *ts >= ms)
                .unwrap_or(lines.len())
        })
        .collect()
}

/// A version's `counts` store, from `dump-state`.
fn dumped_counts(data: &Path, version: &str) -> BTreeMap<String, u64> {
    app_ok(data, &["dump-state", "--version", version])
        .lines()
        .filter_map(|line| line.strip_prefix("counts\t"))
        .map(|row| {
            let (word, count) = row.split_once('\t').expect("word, tab, count");
            (word.to_string(), count.parse().expect("a count"))
        })
        .collect()
}

/// Word → the counts `topic` holds for it, in offset order.
fn derived_counts(data: &Path, topic: &str) -> BTreeMap<String, Vec<u64>> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    if let Some(topic) = log.topic(topic) {
        for partition in &topic.partitions {
            for record in support::read_all(partition, 0) {
                let word = String::from_utf8(record.key.expect("a key")).unwrap();
                let count = String::from_utf8(record.value.expect("a value")).unwrap();
                counts.entry(word).or_default().push(count.parse().unwrap());
            }
        }
    }
    log.close().unwrap();
    counts
}

/// Replays into `version` from `from` and checks its state and derived
/// output against `expected`.
fn check_replay(data: &Path, version: &str, from: &str, expected: &BTreeMap<String, u64>) {
    app_ok(
        data,
        &[
            "replay",
            "--version",
            version,
            "--from",
            from,
            "--until-end",
        ],
    );
    assert_eq!(
        &dumped_counts(data, version),
        expected,
        "version {version}, --from {from}: state"
    );
    let expected_output: BTreeMap<String, Vec<u64>> = expected
        .iter()
        .map(|(word, &n)| (word.clone(), (1..=n).collect()))
        .collect();
    assert_eq!(
        derived_counts(data, &format!("word-counts.{version}")),
        expected_output,
        "version {version}, --from {from}: word-counts.{version}"
    );
}

/// `ms` as RFC 3339 UTC, whole seconds and the milliseconds dropped
/// (civil-from-days, proleptic Gregorian).
fn rfc3339_seconds(ms: i64) -> (String, i64) {
    let seconds = ms.div_euclid(1000);
    let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let text = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    );
    (text, seconds * 1000)
}

#[test]
fn replays_from_an_offset_and_a_time_process_exactly_the_records_from_there() {
    let mut rng = Rng(support::rng::seed());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let input = write_input(data, &mut rng);
    app_ok(data, &["run", "--until-end"]);
    let everything = counts(&input, &[0; PARTITIONS]);
    assert_eq!(dumped_counts(data, "live"), everything);
    let live = app_ok(data, &["dump-state"]);

    check_replay(data, "from-earliest", "earliest", &everything);

    // An offset every partition has, the first and the last included.
    let shortest = input.iter().map(Vec::len).min().unwrap();
    for (version, offset) in [
        ("from-offset", 1 + rng.below(shortest as u64 - 1) as usize),
        ("from-offset-0", 0),
        ("from-end", shortest),
    ] {
        let starts = [offset; PARTITIONS];
        check_replay(data, version, &offset.to_string(), &counts(&input, &starts));
    }

    // The time of a record somewhere in the middle, exactly, in ms; and a
    // whole second (RFC 3339), which falls between records.
    let (_, pick) = input[rng.below(PARTITIONS as u64) as usize][shortest / 2];
    let starts = first_at_or_after(&input, pick);
    check_replay(
        data,
        "from-ms",
        &format!("{pick}ms"),
        &counts(&input, &starts),
    );
    let (utc, utc_ms) = rfc3339_seconds(pick - rng.below(60_000) as i64);
    let starts = first_at_or_after(&input, utc_ms);
    check_replay(data, "from-utc", &utc, &counts(&input, &starts));

    // After every record: not an error; nothing to process.
    let future = strata::log::now_ms() + HISTORY_MS;
    check_replay(data, "future", &format!("{future}ms"), &BTreeMap::new());

    assert_eq!(
        app_ok(data, &["dump-state"]),
        live,
        "the live version moved"
    );
}

#[test]
fn a_bad_from_is_refused_and_names_what_is_wrong() {
    let mut rng = Rng(support::rng::seed());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let input = write_input(data, &mut rng);
    app_ok(data, &["run", "--until-end"]);

    for garbage in [
        "garbage",
        "--from=-3",
        "12abc",
        "2026-13-01T00:00:00Z",
        "ms",
    ] {
        let args = match garbage.strip_prefix("--from=") {
            Some(_) => vec!["replay", "--version", "bad", garbage, "--until-end"],
            None => vec![
                "replay",
                "--version",
                "bad",
                "--from",
                garbage,
                "--until-end",
            ],
        };
        let stderr = app_fails(data, &args);
        assert!(stderr.contains("--from"), "{garbage}: {stderr}");
    }
    let versions = app_ok(data, &["versions"]);
    assert!(
        !versions.contains("bad"),
        "a refused --from made a version:\n{versions}"
    );

    // Past the end of every partition.
    let longest = input.iter().map(Vec::len).max().unwrap();
    let past = (longest + 1 + rng.below(1000) as usize).to_string();
    let stderr = app_fails(
        data,
        &[
            "replay",
            "--version",
            "past",
            "--from",
            &past,
            "--until-end",
        ],
    );
    assert!(
        stderr.contains(&format!("offset {past}")) && stderr.contains("lines/"),
        "the error names the offset and the partition: {stderr}"
    );
    assert!(
        derived_counts(data, "word-counts.past").is_empty(),
        "a refused replay processed records"
    );
}
