//! Stream–stream joins within a window, through the real runtime against
//! a naive model over random inputs: both sides branched off one topic
//! (so the task reads them in one defined order), keys that are byte
//! prefixes of each other, timestamps out of order, windows symmetric and
//! not (`before` and `after` drawn apart), late records past the grace
//! period (each side's written to its own late topic), inner, left and
//! outer joins, and the app stopped and started again halfway. Then
//! asymmetric windows and each side's lateness on chosen records, two
//! real topics joined by key across partitions, a re-keyed side
//! repartitioned, and inputs that are not co-partitioned refused with the
//! topics named.

use crate::support;

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use strata::runtime::{Location, RunOptions, RuntimeError};
use strata_operators::{JoinWindows, Pipeline, Stream, Topic};
use support::Rec;

const EVENTS: Topic<String, String> = Topic::new("events");
const INNER: Topic<String, String> = Topic::new("inner");
const LEFT: Topic<String, String> = Topic::new("left");
const OUTER: Topic<String, String> = Topic::new("outer");
const LATE_LEFT: Topic<String, String> = Topic::new("late-left");
const LATE_RIGHT: Topic<String, String> = Topic::new("late-right");

fn show(k: &str, l: Option<&String>, r: Option<&String>) -> String {
    let side = |v: Option<&String>| v.cloned().unwrap_or_else(|| "-".into());
    format!("{k}|{}|{}", side(l), side(r))
}

/// `events` values are `L:<v>` or `R:<v>`: the two sides, joined three
/// ways; the inner join's late records written to a topic per side.
fn pipeline(windows: JoinWindows) -> Pipeline {
    let pipeline = Pipeline::new("joins");
    let (left, right) = pipeline.from(EVENTS).branch(|_, v| v.starts_with("L:"));
    let strip = |s: &Stream<String, String>| s.map_values(|v| v[2..].to_string());
    let (left, right) = (strip(&left), strip(&right));
    left.join_window(&right, windows, |k, l, r| show(k, Some(l), Some(r)))
        .late_left_to(LATE_LEFT)
        .late_right_to(LATE_RIGHT)
        .to(INNER);
    left.left_join_window(&right, windows, |k, l, r| show(k, Some(l), r))
        .to(LEFT);
    left.outer_join_window(&right, windows, |k, l, r| show(k, l, r))
        .to(OUTER);
    pipeline
}

struct Buffered {
    left: bool,
    key: String,
    t: i64,
    seq: u64,
    value: String,
    joined: bool,
}

/// What the joins must write: the inner join's results in order, the
/// left and outer joins' results as sets (a record that never joined
/// comes when a scan finds it expired, which the model does not place),
/// and each side's late records in order.
struct Expected {
    inner: Vec<Rec>,
    left: Vec<Rec>,
    outer: Vec<Rec>,
    late_left: Vec<Rec>,
    late_right: Vec<Rec>,
}

/// The join the obvious way: a left record at `t` pairs with the right
/// records at `t - before ..= t + after`; a left record lives until the
/// watermark passes `t + after + grace`, a right one `t + before +
/// grace`; both must be live when the second arrives.
fn model(records: &[Rec], before: i64, after: i64, grace: i64) -> Expected {
    let life = |left: bool| if left { after + grace } else { before + grace };
    let mut watermark = i64::MIN;
    let mut buffered: Vec<Buffered> = Vec::new();
    let (mut inner, mut late_left, mut late_right) = (Vec::new(), Vec::new(), Vec::new());
    let mut seq = 0;
    for r in records {
        let (key, t, value) = (r.key_text(), r.timestamp, r.value_text());
        watermark = watermark.max(t);
        let left = value.starts_with("L:");
        let value = value[2..].to_string();
        if t + life(left) < watermark {
            let late = if left {
                &mut late_left
            } else {
                &mut late_right
            };
            late.push(Rec::text(&key, &value, t));
            continue;
        }
        let mut partners: Vec<&mut Buffered> = buffered
            .iter_mut()
            .filter(|b| b.left != left && b.key == key)
            .filter(|b| {
                let (t_left, t_right) = if left { (t, b.t) } else { (b.t, t) };
                let within = -before <= t_right - t_left && t_right - t_left <= after;
                within && b.t + life(b.left) >= watermark
            })
            .collect();
        partners.sort_by_key(|b| (b.t, b.seq));
        let joined = !partners.is_empty();
        for p in partners {
            p.joined = true;
            let (l, r) = if left {
                (&value, &p.value)
            } else {
                (&p.value, &value)
            };
            inner.push(Rec::text(&key, &show(&key, Some(l), Some(r)), t.max(p.t)));
        }
        seq += 1;
        buffered.push(Buffered {
            left,
            key,
            t,
            seq,
            value,
            joined,
        });
    }
    let (mut left, mut outer) = (inner.clone(), inner.clone());
    for b in buffered
        .iter()
        .filter(|b| !b.joined && b.t + life(b.left) < watermark)
    {
        if b.left {
            let row = Rec::text(&b.key, &show(&b.key, Some(&b.value), None), b.t);
            left.push(row.clone());
            outer.push(row);
        } else {
            outer.push(Rec::text(&b.key, &show(&b.key, None, Some(&b.value)), b.t));
        }
    }
    left.sort();
    outer.sort();
    Expected {
        inner,
        left,
        outer,
        late_left,
        late_right,
    }
}

const KEYS: [&str; 3] = ["a", "ab", "b"];

fn input(steps: &[(bool, usize, i64)]) -> Vec<Rec> {
    let mut ts = support::base_ms();
    let mut records: Vec<Rec> = steps
        .iter()
        .enumerate()
        .map(|(i, &(left, key, step))| {
            ts += step.max(0);
            let stamp = if step < 0 { ts + step } else { ts };
            let side = if left { "L" } else { "R" };
            Rec::text(KEYS[key], &format!("{side}:v{i}"), stamp)
        })
        .collect();
    // Far ahead, of a key of its own: every other record expires, and a
    // scan finds it.
    records.push(Rec::text("zz", "L:flush", ts + 3_600_000));
    records
}

/// Mostly forward, sometimes back; often exactly on a window's edge.
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => -1_500i64..600,
        1 => Just(0),
        1 => Just(300),
        1 => Just(-300),
        1 => Just(1_000),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn window_joins_match_the_model(
        steps in proptest::collection::vec((any::<bool>(), 0usize..3, step()), 1..100),
        before_ms in prop_oneof![Just(0i64), Just(300), Just(1_000)],
        after_ms in prop_oneof![Just(0i64), Just(300), Just(1_000)],
        grace_ms in prop_oneof![Just(0i64), Just(500)],
        split in any::<prop::sample::Index>(),
    ) {
        let records = input(&steps);
        let expected = model(&records, before_ms, after_ms, grace_ms);
        let windows = JoinWindows::before(Duration::from_millis(before_ms as u64))
            .after(Duration::from_millis(after_ms as u64))
            .grace(Duration::from_millis(grace_ms as u64));

        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline(windows).app().unwrap();
        let at = split.index(records.len() + 1);
        support::append(data, "events", 1, 0, &records[..at]);
        support::run(&app, data);
        support::append(data, "events", 1, 0, &records[at..]);
        support::run(&app, data);

        let in_order = |topic: &str| -> Vec<Rec> {
            support::read(data, topic).into_iter().flatten().collect()
        };
        prop_assert_eq!(in_order("inner"), expected.inner);
        prop_assert_eq!(support::read_sorted(data, "left"), expected.left);
        prop_assert_eq!(support::read_sorted(data, "outer"), expected.outer);
        prop_assert_eq!(in_order("late-left"), expected.late_left);
        prop_assert_eq!(in_order("late-right"), expected.late_right);
    }
}

/// Runs `pipeline(windows)` once over `records` (each `(side and value,
/// offset from a base)`), returning the inner join's values and each
/// side's late values.
fn run_once(windows: JoinWindows, records: &[(&str, i64)]) -> [Vec<String>; 3] {
    let base = support::base_ms();
    let records: Vec<Rec> = (records.iter())
        .map(|&(value, at)| Rec::text("k", value, base + at))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    support::append(data, "events", 1, 0, &records);
    support::run(&pipeline(windows).app().unwrap(), data);
    ["inner", "late-left", "late-right"].map(|topic| {
        (support::read(data, topic).into_iter().flatten())
            .map(|r| r.value_text())
            .collect()
    })
}

#[test]
fn a_left_record_joins_the_right_records_from_before_it_to_after_it() {
    // A right record must come 0 to 1 s after its left one.
    let windows = JoinWindows::before(Duration::ZERO)
        .after(Duration::from_secs(1))
        .grace(Duration::from_secs(5));
    let [inner, ..] = run_once(
        windows,
        &[
            ("L:a", 0),
            ("R:early", -1),
            ("R:edge0", 0),
            ("R:mid", 500),
            ("R:edge1", 1_000),
            ("R:beyond", 1_001),
        ],
    );
    assert_eq!(inner, ["k|a|edge0", "k|a|mid", "k|a|edge1"]);
}

#[test]
fn each_sides_late_records_go_to_its_own_late_topic() {
    // A left record lives to t + after (0 ms), a right one to t + before.
    let windows = JoinWindows::before(Duration::from_secs(1));
    let [inner, late_left, late_right] = run_once(
        windows,
        &[
            ("L:now", 5_000),
            // Expired at 4 999 + 0: late on the left.
            ("L:old", 4_999),
            // Live to 4 500 + 1 000: joins the left record at 5 000.
            ("R:recent", 4_500),
            // Expired at 3 999 + 1 000: late on the right.
            ("R:old", 3_999),
        ],
    );
    assert_eq!(inner, ["k|now|recent"]);
    assert_eq!(late_left, ["old"]);
    assert_eq!(late_right, ["old"]);
}

const CLICKS: Topic<String, String> = Topic::new("clicks");
const VIEWS: Topic<String, String> = Topic::new("views");
const JOINED: Topic<String, String> = Topic::new("joined");

/// Appends each record to the partition of its key.
fn append_keyed(data: &Path, topic: &str, partitions: i32, records: &[Rec]) {
    support::append(data, topic, partitions, 0, &[]);
    for r in records {
        let p = strata::client::partitioner::partition_for_key(&r.key, partitions);
        support::append(data, topic, partitions, p, std::slice::from_ref(r));
    }
}

/// Clicks joined with views of the same user within a second.
fn two_topics(pipeline: &Pipeline, clicks: Stream<String, String>) {
    let views = pipeline.from(VIEWS);
    let windows = JoinWindows::of(Duration::from_secs(1));
    clicks
        .join_window(&views, windows, |user, click, view| {
            format!("{user} {click} {view}")
        })
        .to(JOINED);
}

#[test]
fn two_co_partitioned_topics_join_by_key_across_partitions() {
    let pipeline = Pipeline::new("two");
    two_topics(&pipeline, pipeline.from(CLICKS));
    let app = pipeline.app().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    let views = [Rec::text("u1", "/a", base), Rec::text("u2", "/b", base)];
    append_keyed(data, "views", 3, &views);
    append_keyed(data, "clicks", 3, &[]);
    support::run(&app, data);
    let clicks = [
        Rec::text("u1", "c1", base + 500),
        Rec::text("u2", "c2", base - 1_000),
        Rec::text("u3", "c3", base),
        // Too far from u1's view.
        Rec::text("u1", "c4", base + 1_001),
    ];
    append_keyed(data, "clicks", 3, &clicks);
    support::run(&app, data);
    let got: Vec<String> = support::read_sorted(data, "joined")
        .iter()
        .map(Rec::value_text)
        .collect();
    assert_eq!(got, ["u1 c1 /a", "u2 c2 /b"]);
}

#[test]
fn a_re_keyed_side_is_repartitioned_before_the_join() {
    let pipeline = Pipeline::new("rekeyed");
    // Clicks keyed by page, valued by user: re-keyed by user.
    let clicks = pipeline
        .from(CLICKS)
        .map(|page: String, user: String| (user, page));
    two_topics(&pipeline, clicks);
    let app = pipeline.app().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    append_keyed(data, "views", 2, &[Rec::text("u1", "/home", base)]);
    append_keyed(data, "clicks", 2, &[]);
    support::run(&app, data);
    let clicks = [
        Rec::text("/a", "u1", base + 10),
        Rec::text("/b", "u1", base + 20),
    ];
    append_keyed(data, "clicks", 2, &clicks);
    support::run(&app, data);
    let got: Vec<String> = support::read_sorted(data, "joined")
        .iter()
        .map(Rec::value_text)
        .collect();
    assert_eq!(got, ["u1 /a /home", "u1 /b /home"]);
    let internal = support::read(data, "rekeyed-join-window-1-raw-repartition");
    assert_eq!(internal.iter().map(Vec::len).sum::<usize>(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_not_co_partitioned_are_refused_naming_the_topics() {
    let pipeline = Pipeline::new("unequal");
    two_topics(&pipeline, pipeline.from(CLICKS));
    let app = pipeline.app().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    support::append(data, "clicks", 2, 0, &[Rec::text("u1", "c", base)]);
    support::append(data, "views", 3, 0, &[Rec::text("u1", "v", base)]);
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
        message.contains("clicks") && message.contains("views"),
        "{message}"
    );
    assert!(message.contains("partition counts"), "{message}");
}

#[test]
fn streams_of_two_pipelines_are_refused() {
    let one = Pipeline::new("one");
    let two = Pipeline::new("two");
    let windows = JoinWindows::of(Duration::from_secs(1));
    one.from(CLICKS)
        .join_window(&two.from(VIEWS), windows, |_, a, b| format!("{a}{b}"))
        .to(JOINED);
    let error = one.app().err().expect("refused");
    assert!(error.to_string().contains("different pipelines"), "{error}");
}
