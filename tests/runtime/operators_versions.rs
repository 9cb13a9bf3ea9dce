//! A pipeline app (`examples/wordcount_dsl.rs`) through every operation a
//! hand-written app has, as real processes on an embedded log: run,
//! `query` of its store, rebuild, replay into a version, diff, promote,
//! and a run of the promoted version (answering queries of either version
//! over HTTP), each leaving the counts a plain count of the words gives.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// One partition: `split`'s words reach `words` in one order, so a
/// replay's derived topics equal the live ones record for record (with
/// two, two tasks interleave their appends to a partition of `words`
/// differently in each run, and `diff` rightly reports the order).
const PARTITIONS: i32 = 1;

fn wordcount(data: &Path, args: &[&str]) -> Output {
    Command::new(support::example::example("wordcount_dsl"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("wordcount_dsl runs")
}

/// Runs `args` and returns stdout, failing the test on a failure.
fn ok(data: &Path, args: &[&str]) -> String {
    let output = wordcount(data, args);
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn append_lines(data: &Path, lines: &[&str]) {
    support::with_topic(data, "lines", PARTITIONS, &[], |topic| {
        for (i, line) in lines.iter().enumerate() {
            let batch = support::batch(&[line], strata::log::now_ms());
            topic.partitions[i % PARTITIONS as usize]
                .append(&batch)
                .unwrap();
        }
    });
}

/// Word → count, as a plain loop over every line counts them.
fn expected(lines: &[&str]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in lines.iter().flat_map(|l| l.split_whitespace()) {
        *counts.entry(word.to_string()).or_insert(0) += 1;
    }
    counts
}

/// Word → count from `dump-state` lines (`counts<TAB>word<TAB>n`).
fn counts(dump: &str) -> BTreeMap<String, u64> {
    dump.lines()
        .filter_map(|line| line.strip_prefix("counts\t"))
        .map(|rest| {
            let (word, n) = rest.split_once('\t').unwrap();
            (word.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_pipeline_app_runs_answers_rebuilds_replays_diffs_and_promotes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = ["the cat sat", "on the mat", "the end"];
    append_lines(&data, &first);
    ok(&data, &["run", "--until-end"]);
    let want = expected(&first);
    assert_eq!(counts(&ok(&data, &["dump-state"])), want);

    // The store answers queries from the command line.
    assert_eq!(ok(&data, &["query", "counts", "the"]), "the\t3\n");
    let missing = wordcount(&data, &["query", "counts", "dog"]);
    assert_eq!(missing.status.code(), Some(1), "a key not found fails");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no key \"dog\""));
    assert_eq!(
        ok(&data, &["query", "counts", "--from", "m", "--to", "sat"]),
        "mat\t1\non\t1\nsat\t1\n"
    );
    let json = ok(&data, &["query", "counts", "--prefix", "t", "--json"]);
    let answer: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        answer["entries"],
        serde_json::json!([{"key": "the", "value": 3}])
    );

    // Rebuilt from the log: the same state.
    ok(&data, &["rebuild"]);
    assert_eq!(counts(&ok(&data, &["dump-state"])), want);

    // Replayed into a version: the same state and output, so no diff.
    ok(&data, &["replay", "--version", "v2", "--until-end"]);
    assert_eq!(counts(&ok(&data, &["dump-state", "--version", "v2"])), want);
    assert_eq!(
        ok(&data, &["query", "counts", "cat", "--version", "v2"]),
        "cat\t1\n"
    );
    let diff = wordcount(&data, &["diff", "base", "v2"]);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "no differences: {}",
        String::from_utf8_lossy(&diff.stdout)
    );

    // Promoted, the version runs on: its state and derived topics grow.
    ok(&data, &["promote", "v2"]);
    let more = ["the cat again"];
    append_lines(&data, &more);
    ok(&data, &["run", "--until-end"]);
    let all: Vec<&str> = first.iter().chain(&more).copied().collect();
    assert_eq!(counts(&ok(&data, &["dump-state"])), expected(&all));
    let v2_counts = support::read_text_sorted(&data, "word-counts.v2");
    let the: Vec<_> = v2_counts.iter().filter(|(w, _)| w == "the").collect();
    assert_eq!(
        the.len(),
        4,
        "1..4 for `the` in the version's topic: {the:?}"
    );

    // The promoted version answers queries over HTTP, and the base one too.
    let mut running = Command::new(support::example::example("wordcount_dsl"))
        .arg("--data-dir")
        .arg(&data)
        .args(["run", "--query", "127.0.0.1:0"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let file = data.join("apps/wordcount/versions/v2/query-address");
    support::wait_until(
        "the query address",
        std::time::Duration::from_secs(60),
        || file.exists(),
    );
    let addr = std::fs::read_to_string(&file).unwrap();
    let count = |target: &str| {
        let answer = http_get(&addr, target);
        answer["entries"][0]["value"].as_u64()
    };
    assert_eq!(
        count("/stores/counts/keys/the"),
        Some(4),
        "the live version, v2"
    );
    assert_eq!(count("/stores/counts/keys/the?version=v2"), Some(4));
    assert_eq!(count("/stores/counts/keys/the?version=base"), Some(3));
    let _ = Command::new("kill").arg(running.id().to_string()).status();
    running.wait().unwrap();
}

/// The JSON body of `GET target` at `addr`.
fn http_get(addr: &str, target: &str) -> serde_json::Value {
    support::http::get_json(addr, target).1
}
