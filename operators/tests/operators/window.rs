//! Windowed counts through the real runtime (an embedded log, RocksDB),
//! checked against a naive in-memory model over random inputs: keys that
//! are byte prefixes of each other, out-of-order timestamps, late records
//! past the grace period, tumbling and hopping windows, emit on update and
//! on close, and the app stopped and started again halfway (the watermark
//! is kept with the state, so the second half is decided as one run
//! would).

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use strata_operators::{Hopping, Pipeline, Topic, Windowed, Windows};
use support::Rec;

const EVENTS: Topic<String, String> = Topic::new("events");
const COUNTS: Topic<String, String> = Topic::new("window-counts");
const LATE: Topic<String, String> = Topic::new("late");

fn pipeline(windows: Windows) -> Pipeline {
    let pipeline = Pipeline::new("windows");
    pipeline
        .from(EVENTS)
        .window(windows)
        .late_to(LATE)
        .count()
        .map(|w: Windowed<String>, n| (format!("{}|{}|{}", w.key, w.start, w.end), n.to_string()))
        .to(COUNTS);
    pipeline
}

/// What the windowed count must write: its outputs and late records, in
/// order, computed record by record the obvious way.
fn model(records: &[Rec], w: &Windows, on_close: bool) -> (Vec<Rec>, Vec<Rec>) {
    let (size, advance, grace) = (w.size_ms(), w.advance_ms(), w.grace_ms());
    let mut watermark = i64::MIN;
    // (end, key length, key, start) → count: the order windows close in.
    let mut open: BTreeMap<(i64, usize, String, i64), u64> = BTreeMap::new();
    let (mut out, mut late) = (Vec::new(), Vec::new());
    let row = |key: &str, start: i64, n: u64, ts: i64| {
        Rec::text(
            &format!("{key}|{start}|{}", start + size),
            &n.to_string(),
            ts,
        )
    };
    for r in records {
        let key = r.key_text();
        watermark = watermark.max(r.timestamp);
        let mut taken = false;
        let first = (r.timestamp - size).div_euclid(advance) * advance;
        for start in (first..=r.timestamp).filter(|s| s.rem_euclid(advance) == 0) {
            if !(start <= r.timestamp && r.timestamp < start + size) {
                continue;
            }
            if start + size + grace <= watermark {
                continue;
            }
            taken = true;
            let n = open
                .entry((start + size, key.len(), key.clone(), start))
                .or_insert(0);
            *n += 1;
            if !on_close {
                out.push(row(&key, start, *n, r.timestamp));
            }
        }
        if !taken {
            late.push(r.clone());
        }
        let closed: Vec<_> = open
            .keys()
            .filter(|(end, ..)| end + grace <= watermark)
            .cloned()
            .collect();
        for window in closed {
            let n = open.remove(&window).unwrap();
            let (end, _, key, start) = window;
            if on_close {
                out.push(row(&key, start, n, end - 1));
            }
        }
    }
    (out, late)
}

fn windows(size_s: u64, hops: u64, grace_ms: u64, on_close: bool) -> Windows {
    let size = Duration::from_secs(size_s);
    let w = Hopping::of(size, size / hops as u32).grace(Duration::from_millis(grace_ms));
    if on_close { w.emit_on_close() } else { w }
}

/// Records with timestamps that mostly move forward, sometimes jump back.
fn records() -> impl Strategy<Value = Vec<(usize, i64)>> {
    proptest::collection::vec((0usize..4, -2_500i64..1_500), 1..120)
}

const KEYS: [&str; 4] = ["a", "ab", "b", "abc"];

fn input(steps: &[(usize, i64)]) -> Vec<Rec> {
    let mut ts = support::base_ms();
    steps
        .iter()
        .enumerate()
        .map(|(i, &(key, step))| {
            ts += step.max(0);
            let stamp = if step < 0 { ts + step } else { ts };
            Rec::text(KEYS[key], &format!("v{i}"), stamp)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn windowed_counts_match_the_model(
        steps in records(),
        size_s in 1u64..4,
        hops in prop_oneof![Just(1u64), Just(2), Just(4)],
        grace_ms in prop_oneof![Just(0u64), Just(700), Just(2_000)],
        on_close in any::<bool>(),
        split in any::<prop::sample::Index>(),
    ) {
        let records = input(&steps);
        let w = windows(size_s, hops, grace_ms, on_close);
        let (expected, expected_late) = model(&records, &w, on_close);

        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline(w).app().unwrap();
        // Two runs, the input split between them: the second resumes from
        // the first one's commit.
        let at = split.index(records.len() + 1);
        support::append(data, "events", 1, 0, &records[..at]);
        support::run(&app, data);
        support::append(data, "events", 1, 0, &records[at..]);
        support::run(&app, data);

        let got = support::read(data, "window-counts").into_iter().flatten().collect::<Vec<_>>();
        let late = support::read(data, "late").into_iter().flatten().collect::<Vec<_>>();
        prop_assert_eq!(got, expected);
        prop_assert_eq!(late, expected_late);
    }
}

#[test]
fn a_late_record_is_counted_dropped_and_sent_to_the_late_topic() {
    let base = support::base_ms();
    let records = [
        Rec::text("k", "1", base + 500),
        Rec::text("k", "2", base + 5_000),
        // Its window [base, base+1000) closed when the watermark reached
        // base+1000: late.
        Rec::text("k", "3", base + 200),
    ];
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let w = windows(1, 1, 0, true);
    support::append(data, "events", 1, 0, &records);
    support::run(&pipeline(w).app().unwrap(), data);
    let got = support::read_sorted(data, "window-counts");
    assert_eq!(
        got,
        [Rec::text(
            &format!("k|{base}|{}", base + 1000),
            "1",
            base + 999
        )]
    );
    assert_eq!(support::read_sorted(data, "late"), [records[2].clone()]);
}

#[test]
fn windows_that_cannot_be_are_refused_when_the_pipeline_becomes_an_app() {
    let w = Hopping::of(Duration::from_secs(1), Duration::from_secs(3));
    let error = pipeline(w).app().err().expect("refused");
    assert!(error.to_string().contains("advances"), "{error}");
}
