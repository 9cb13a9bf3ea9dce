//! The stateless operators through the real runtime, against the same
//! functions applied to the input in memory: filter, map, map_values,
//! flat_map, key_by, inspect, branch and merge; and merged inputs that are
//! not co-partitioned refused with the topics named.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use strata::runtime::{Location, RunOptions, RuntimeError};
use strata_operators::{Pipeline, Topic};
use support::Rec;

const LINES: Topic<String, String> = Topic::new("lines");
const OTHER: Topic<String, String> = Topic::new("other-lines");
const NUMBERS: Topic<String, String> = Topic::new("numbers");
const WORDS: Topic<String, String> = Topic::new("words");
const MERGED: Topic<String, String> = Topic::new("merged");

fn is_number(line: &str) -> bool {
    !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
}

/// lines → (not empty) → numbers (doubled, keyed by the line's key) and
/// words (one per word, keyed by the word); both merged with the other
/// topic's lines upper-cased into `merged`.
fn pipeline(seen: Arc<AtomicUsize>) -> Pipeline {
    let pipeline = Pipeline::new("stateless");
    let lines = pipeline
        .from(LINES)
        .inspect(move |_, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .filter(|_, line| !line.trim().is_empty());
    let (numbers, text) = lines.branch(|_, line| is_number(line));
    let numbers = numbers.map_values(|n| (n.parse::<u64>().unwrap() * 2).to_string());
    numbers.to(NUMBERS);
    let words = text
        .flat_map(|_, line| {
            let words: Vec<(String, String)> = line
                .split_whitespace()
                .map(|w| (w.to_string(), line.clone()))
                .collect();
            words
        })
        .map(|word, line| (word.clone(), format!("{word} in {line}")));
    words.to(WORDS);
    let other = pipeline
        .from(OTHER)
        .key_by(|key, _| format!("other:{key}"))
        .map_values(|v| v.to_uppercase());
    numbers.merge(&words).merge(&other).to(MERGED);
    pipeline
}

/// The same, in memory: (topic, key, value) per input record.
fn expected(lines: &[Rec], other: &[Rec]) -> BTreeMap<&'static str, Vec<(String, String)>> {
    let mut out: BTreeMap<&'static str, Vec<(String, String)>> = BTreeMap::new();
    for r in lines {
        let (key, line) = (r.key_text(), r.value_text());
        if line.trim().is_empty() {
            continue;
        }
        if is_number(&line) {
            let doubled = (line.parse::<u64>().unwrap() * 2).to_string();
            out.entry("numbers")
                .or_default()
                .push((key.clone(), doubled.clone()));
            out.entry("merged").or_default().push((key, doubled));
        } else {
            for word in line.split_whitespace() {
                let row = (word.to_string(), format!("{word} in {line}"));
                out.entry("words").or_default().push(row.clone());
                out.entry("merged").or_default().push(row);
            }
        }
    }
    for r in other {
        let row = (
            format!("other:{}", r.key_text()),
            r.value_text().to_uppercase(),
        );
        out.entry("merged").or_default().push(row);
    }
    out.values_mut().for_each(|rows| rows.sort());
    out
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("  ".to_string()),
        "[0-9]{1,6}",
        "[a-c]{1,3}( [a-c]{1,3}){0,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn stateless_operators_match_the_same_functions_in_memory(
        lines in proptest::collection::vec(("[a-z]{1,2}", line()), 0..60),
        other in proptest::collection::vec(("[a-z]{1,2}", "[a-z ]{0,8}"), 0..20),
    ) {
        let base = support::base_ms();
        let to_recs = |rows: &[(String, String)]| -> Vec<Rec> {
            rows.iter().map(|(k, v)| Rec::text(k, v, base)).collect()
        };
        let (lines, other) = (to_recs(&lines), to_recs(&other));
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let (lines_0, lines_1) = lines.split_at(lines.len() / 2);
        let (other_0, other_1) = other.split_at(other.len() / 2);
        support::append(data, "lines", 2, 0, lines_0);
        support::append(data, "lines", 2, 1, lines_1);
        support::append(data, "other-lines", 2, 0, other_0);
        support::append(data, "other-lines", 2, 1, other_1);
        let seen = Arc::new(AtomicUsize::new(0));
        support::run(&pipeline(Arc::clone(&seen)).app().unwrap(), data);

        let written_lines: Vec<Rec> =
            support::read(data, "lines").into_iter().flatten().collect();
        let written_other: Vec<Rec> =
            support::read(data, "other-lines").into_iter().flatten().collect();
        let want = expected(&written_lines, &written_other);
        for topic in ["numbers", "words", "merged"] {
            let got: Vec<(String, String)> = support::read_sorted(data, topic)
                .iter()
                .map(|r| (r.key_text(), r.value_text()))
                .collect();
            let none = Vec::new();
            prop_assert_eq!(&got, want.get(topic).unwrap_or(&none), "topic {}", topic);
        }
        prop_assert_eq!(seen.load(Ordering::Relaxed), written_lines.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_inputs_not_co_partitioned_are_refused_naming_the_topics() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    support::append(data, "lines", 2, 0, &[Rec::text("a", "1", base)]);
    support::append(data, "other-lines", 3, 0, &[Rec::text("a", "x", base)]);
    let app = pipeline(Arc::default()).app().unwrap();
    let location = Location::embedded(data, app.name());
    let options = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    let error = strata::runtime::ops::run(&app, &location, options)
        .await
        .expect_err("refused");
    let RuntimeError::Config(message) = &error else {
        panic!("not a configuration error: {error}");
    };
    assert!(
        message.contains("lines") && message.contains("other-lines"),
        "{message}"
    );
}
