//! De-duplication through the real runtime against a naive model over
//! random inputs: keys that are byte prefixes of each other, timestamps
//! out of order, records late past the window, and the app stopped and
//! started again halfway (the watermark and the entries are kept with
//! the state, so the second half is decided as one run would), with and
//! without a late topic (late records let through, or sent there). A
//! re-keyed stream is repartitioned before it is de-duplicated.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use strata_operators::{Pipeline, Topic};
use support::Rec;

const EVENTS: Topic<String, String> = Topic::new("events");
const UNIQUE: Topic<String, String> = Topic::new("unique");
const LATE: Topic<String, String> = Topic::new("late");

fn pipeline(window_ms: u64, late: bool) -> Pipeline {
    let pipeline = Pipeline::new("dedup");
    let deduped = pipeline
        .from(EVENTS)
        .dedup(Duration::from_millis(window_ms));
    if late {
        deduped.late_to(LATE).to(UNIQUE);
    } else {
        deduped.to(UNIQUE);
    }
    pipeline
}

/// The records that pass and the late ones, in order: per key, the
/// record let through last at `t0` is live while the watermark is below
/// `t0 + window`, and drops the records within `window` of it; a record
/// that is no duplicate but expired itself (`t + window ≤ watermark`) is
/// late: it passes, or with a late topic goes there.
fn model(records: &[Rec], window: i64, late_topic: bool) -> (Vec<Rec>, Vec<Rec>) {
    let mut watermark = i64::MIN;
    let mut kept: BTreeMap<String, i64> = BTreeMap::new();
    let (mut out, mut late) = (Vec::new(), Vec::new());
    for r in records {
        let (key, t) = (r.key_text(), r.timestamp);
        watermark = watermark.max(t);
        let live = |t0: i64| watermark < t0 + window;
        if let Some(&t0) = kept.get(&key)
            && live(t0)
            && (t - t0).abs() < window
        {
            continue;
        }
        if live(t) {
            kept.insert(key, t);
        } else if late_topic {
            late.push(r.clone());
            continue;
        }
        out.push(r.clone());
    }
    (out, late)
}

const KEYS: [&str; 4] = ["a", "ab", "b", "abc"];

/// Records with timestamps that mostly move forward, sometimes jump back.
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

/// Mostly forward, sometimes back; often exactly on a window's edge.
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => -2_500i64..900,
        1 => Just(0),
        1 => Just(400),
        1 => Just(-400),
        1 => Just(1_500),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn dedup_passes_what_the_model_passes(
        steps in proptest::collection::vec((0usize..4, step()), 1..120),
        window_ms in prop_oneof![Just(1u64), Just(400), Just(1_500), Just(4_000)],
        late_topic in any::<bool>(),
        split in any::<prop::sample::Index>(),
    ) {
        let records = input(&steps);
        let (expected, expected_late) = model(&records, window_ms as i64, late_topic);

        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline(window_ms, late_topic).app().unwrap();
        let at = split.index(records.len() + 1);
        support::append(data, "events", 1, 0, &records[..at]);
        support::run(&app, data);
        support::append(data, "events", 1, 0, &records[at..]);
        support::run(&app, data);

        let got: Vec<Rec> = support::read(data, "unique").into_iter().flatten().collect();
        prop_assert_eq!(got, expected);
        let late: Vec<Rec> = support::read(data, "late").into_iter().flatten().collect();
        prop_assert_eq!(late, expected_late);
    }
}

#[test]
fn a_repeat_within_the_window_is_dropped_and_one_after_it_passes() {
    let base = support::base_ms();
    let records = [
        Rec::text("k", "1", base),
        Rec::text("k", "2", base + 999),
        // Out of order, within the window of the first: a duplicate.
        Rec::text("k", "3", base - 500),
        Rec::text("other", "4", base + 999),
        Rec::text("k", "5", base + 1_000),
        Rec::text("k", "6", base + 1_999),
    ];
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    support::append(data, "events", 1, 0, &records);
    support::run(&pipeline(1_000, false).app().unwrap(), data);
    let got: Vec<String> = support::read(data, "unique")
        .into_iter()
        .flatten()
        .map(|r| r.value_text())
        .collect();
    assert_eq!(got, ["1", "4", "5"]);
}

#[test]
fn a_record_too_old_to_be_told_goes_to_the_late_topic_when_there_is_one() {
    let base = support::base_ms();
    let records = [
        Rec::text("k", "1", base + 4_500),
        Rec::text("other", "2", base + 5_000),
        // Within a second of k's live entry: a duplicate, though its own
        // window is behind the watermark.
        Rec::text("k", "3", base + 3_600),
        // Its window (1 s) is behind the watermark and no live entry is
        // near: late.
        Rec::text("other", "4", base + 3_999),
        // A new key within the window: passes.
        Rec::text("new", "5", base + 4_500),
    ];
    let values = |data: &std::path::Path, topic: &str| -> Vec<String> {
        (support::read(data, topic).into_iter().flatten())
            .map(|r| r.value_text())
            .collect()
    };
    for late in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        support::append(data, "events", 1, 0, &records);
        support::run(&pipeline(1_000, late).app().unwrap(), data);
        if late {
            assert_eq!(values(data, "unique"), ["1", "2", "5"]);
            assert_eq!(values(data, "late"), ["4"]);
        } else {
            assert_eq!(values(data, "unique"), ["1", "2", "4", "5"]);
            assert!(values(data, "late").is_empty());
        }
    }
}

#[test]
fn a_re_keyed_stream_is_repartitioned_then_de_duplicated_across_partitions() {
    const ORDERS: Topic<String, String> = Topic::new("orders");
    const FIRST: Topic<String, String> = Topic::new("first-orders");
    let pipeline = Pipeline::new("rekeyed");
    pipeline
        .from(ORDERS)
        // Orders keyed by shop, valued by order id: re-keyed by order id.
        .map(|shop: String, order: String| (order, shop))
        .dedup(Duration::from_secs(60))
        .to(FIRST);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    // The same orders arrive from three shops' partitions.
    for partition in 0..3 {
        let shop = format!("shop-{partition}");
        let orders: Vec<Rec> = (0..5)
            .map(|n| Rec::text(&shop, &format!("order-{n}"), base + n))
            .collect();
        support::append(data, "orders", 3, partition, &orders);
    }
    support::run(&pipeline.app().unwrap(), data);
    let mut got: Vec<String> = support::read_sorted(data, "first-orders")
        .iter()
        .map(Rec::key_text)
        .collect();
    got.dedup();
    let all = support::read_sorted(data, "first-orders");
    assert_eq!(all.len(), 5, "one record per order: {all:?}");
    assert_eq!(
        got,
        (0..5).map(|n| format!("order-{n}")).collect::<Vec<_>>()
    );
    let internal = support::read(data, "rekeyed-dedup-1-repartition");
    assert_eq!(internal.iter().map(Vec::len).sum::<usize>(), 15);
}

#[test]
fn a_window_of_zero_is_refused_when_the_pipeline_becomes_an_app() {
    let error = pipeline(0, false).app().err().expect("refused");
    assert!(error.to_string().contains("at least 1 ms"), "{error}");
}
