//! Session windows through the real runtime against a naive model over
//! random inputs: records close enough to join, a record bridging two
//! sessions merging them, out-of-order timestamps, late records, emit on
//! update (exact order, retractions included) and on close (the same
//! sessions, each once), and a stop and restart halfway. Then the update
//! stream kept as a table (retractions deleting) ends as the model's
//! sessions, open and closed, every superseded windowed key retracted.
//!
//! The update stream is written with `to_upserts`: a retraction (`None`)
//! reaches the topic as a tombstone, a record with no value.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use strata_operators::{OnClose, OnUpdate, Pipeline, Sessions, Topic, Windowed};
use support::Rec;

const CLICKS: Topic<String, String> = Topic::new("clicks");
const OUT: Topic<String, String> = Topic::new("sessions");
const LATE: Topic<String, String> = Topic::new("late");

fn shown(w: &Windowed<String>) -> String {
    format!("{}|{}|{}", w.key, w.start, w.end)
}

fn on_update(sessions: Sessions<OnUpdate>) -> Pipeline {
    let pipeline = Pipeline::new("sessions");
    pipeline
        .from(CLICKS)
        .session(sessions)
        .late_to(LATE)
        .count()
        .map(|w: Windowed<String>, n: Option<u64>| (shown(&w), n.map(|n| n.to_string())))
        .to_upserts(OUT);
    pipeline
}

fn on_close(sessions: Sessions<OnClose>) -> Pipeline {
    let pipeline = Pipeline::new("sessions");
    pipeline
        .from(CLICKS)
        .session(sessions)
        .late_to(LATE)
        .count()
        .map(|w: Windowed<String>, n: u64| (shown(&w), n.to_string()))
        .to(OUT);
    pipeline
}

/// A key's sessions by (key, start): (last record's timestamp, count).
type Held = BTreeMap<(String, i64), (i64, u64)>;

/// Session windows the obvious way, record by record.
#[derive(Default)]
struct Model {
    gap: i64,
    grace: i64,
    on_close: bool,
    watermark: i64,
    open: Held,
    closed: Held,
    out: Vec<Rec>,
    late: Vec<Rec>,
}

fn row(key: &str, start: i64, end: i64, value: &str, ts: i64) -> Rec {
    Rec::text(&format!("{key}|{start}|{}", end + 1), value, ts)
}

/// The retraction of a session's windowed key: a tombstone.
fn retraction(key: &str, start: i64, end: i64, ts: i64) -> Rec {
    Rec::tombstone(&format!("{key}|{start}|{}", end + 1), ts)
}

impl Model {
    fn run(records: &[Rec], gap: i64, grace: i64, on_close: bool) -> Self {
        let mut model = Self {
            gap,
            grace,
            on_close,
            watermark: i64::MIN,
            ..Self::default()
        };
        for r in records {
            model.take(r);
            model.close();
        }
        model
    }

    fn is_open(&self, end: i64) -> bool {
        end + self.gap + self.grace > self.watermark
    }

    fn take(&mut self, r: &Rec) {
        let (key, ts) = (r.key_text(), r.timestamp);
        self.watermark = self.watermark.max(ts);
        let joined: Vec<(String, i64)> = (self.open.iter())
            .filter(|((k, start), (end, _))| {
                *k == key && start - self.gap <= ts && ts <= end + self.gap && self.is_open(*end)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if joined.is_empty() && !self.is_open(ts) {
            self.late.push(r.clone());
            return;
        }
        let (mut start, mut end, mut n) = (ts, ts, 1);
        let mut gone = Vec::new();
        for k in joined {
            let (old_end, old_n) = self.open.remove(&k).unwrap();
            gone.push((k.1, old_end));
            start = start.min(k.1);
            end = end.max(old_end);
            n += old_n;
        }
        self.open.insert((key.clone(), start), (end, n));
        if !self.on_close {
            for (old_start, old_end) in gone.into_iter().filter(|&g| g != (start, end)) {
                self.out.push(retraction(&key, old_start, old_end, ts));
            }
            self.out.push(row(&key, start, end, &n.to_string(), ts));
        }
    }

    fn close(&mut self) {
        let closed: Vec<(String, i64)> = (self.open.iter())
            .filter(|(_, (end, _))| !self.is_open(*end))
            .map(|(k, _)| k.clone())
            .collect();
        for k in closed {
            let (end, n) = self.open.remove(&k).unwrap();
            if self.on_close {
                self.out.push(row(&k.0, k.1, end, &n.to_string(), end));
            }
            self.closed.insert(k, (end, n));
        }
    }

    /// Every session made and not merged away, open or closed, as the
    /// update stream's rows: windowed key → count.
    fn table(&self) -> BTreeMap<String, String> {
        (self.open.iter().chain(&self.closed))
            .map(|((key, start), (end, n))| {
                let r = row(key, *start, *end, &n.to_string(), 0);
                (r.key_text(), r.value_text())
            })
            .collect()
    }
}

const KEYS: [&str; 3] = ["a", "ab", "b"];

/// Records whose timestamps mostly move forward, sometimes jump back.
fn input(steps: &[(usize, i64)]) -> Vec<Rec> {
    let mut ts = support::base_ms();
    steps
        .iter()
        .enumerate()
        .map(|(i, &(key, step))| {
            ts += step.max(0);
            Rec::text(
                KEYS[key],
                &format!("v{i}"),
                if step < 0 { ts + step } else { ts },
            )
        })
        .collect()
}

/// Runs `pipeline` over `records`, stopped and started again at `at`.
fn run_split(pipeline: &Pipeline, records: &[Rec], at: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let app = pipeline.app().unwrap();
    support::append(data, "clicks", 1, 0, &records[..at]);
    support::run(&app, data);
    support::append(data, "clicks", 1, 0, &records[at..]);
    support::run(&app, data);
    dir
}

fn sessions(gap_ms: i64, grace_ms: i64) -> Sessions<OnUpdate> {
    Sessions::with_gap(Duration::from_millis(gap_ms as u64))
        .grace(Duration::from_millis(grace_ms as u64))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn sessions_match_the_model(
        steps in proptest::collection::vec((0usize..3, -1_500i64..1_200), 1..100),
        gap_ms in prop_oneof![Just(300i64), Just(1_000)],
        grace_ms in prop_oneof![Just(0i64), Just(800)],
        close in any::<bool>(),
        split in any::<prop::sample::Index>(),
    ) {
        let records = input(&steps);
        let model = Model::run(&records, gap_ms, grace_ms, close);
        let pipeline = if close {
            on_close(sessions(gap_ms, grace_ms).emit_on_close())
        } else {
            on_update(sessions(gap_ms, grace_ms))
        };
        let dir = run_split(&pipeline, &records, split.index(records.len() + 1));
        let data = dir.path();

        let mut got: Vec<Rec> = support::read(data, "sessions").into_iter().flatten().collect();
        let mut expected = model.out;
        if close {
            // Emitted once each, when the closing list is next scanned.
            got.sort();
            expected.sort();
        }
        prop_assert_eq!(got, expected);
        let late: Vec<Rec> = support::read(data, "late").into_iter().flatten().collect();
        prop_assert_eq!(late, model.late);
    }

    #[test]
    fn the_update_stream_as_a_table_holds_the_models_sessions(
        steps in proptest::collection::vec((0usize..3, -2_000i64..900), 1..120),
        gap_ms in prop_oneof![Just(200i64), Just(700)],
        grace_ms in prop_oneof![Just(0i64), Just(500), Just(1_500)],
        split in any::<prop::sample::Index>(),
    ) {
        let records = input(&steps);
        let model = Model::run(&records, gap_ms, grace_ms, false);
        let pipeline = on_update(sessions(gap_ms, grace_ms));
        let dir = run_split(&pipeline, &records, split.index(records.len() + 1));

        let rows = rows(dir.path());
        // Per windowed key, its last record; a retraction (a tombstone)
        // only ever follows an aggregate (a key that exists).
        let mut last: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for (key, value) in &rows {
            if value.is_none() {
                let before = last.get(key.as_str()).copied();
                prop_assert!(before.is_some_and(|v| v.is_some()), "{} retracted unseen", key);
            }
            last.insert(key, value.as_deref());
        }
        let expected = model.table();
        // Every windowed key emitted and superseded ends retracted.
        for (key, value) in &last {
            if !expected.contains_key(*key) {
                prop_assert_eq!(*value, None, "{} superseded, not retracted", key);
            }
        }
        let table: BTreeMap<String, String> = (last.into_iter())
            .filter_map(|(key, value)| Some((key.to_string(), value?.to_string())))
            .collect();
        prop_assert_eq!(table, expected);
    }
}

#[test]
fn a_record_between_two_sessions_merges_them() {
    let base = support::base_ms();
    let records = [
        Rec::text("u", "1", base),
        Rec::text("u", "2", base + 1_500),
        // 800 ms from the first (still open: 1 s of grace) and 700 ms
        // from the second: both sessions of u become one.
        Rec::text("u", "3", base + 800),
        // Closes it (1 s gap).
        Rec::text("v", "4", base + 10_000),
    ];
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let sessions = sessions(1_000, 1_000).emit_on_close();
    support::append(data, "clicks", 1, 0, &records);
    support::run(&on_close(sessions).app().unwrap(), data);
    let got = support::read_sorted(data, "sessions");
    let end = base + 1_500;
    assert_eq!(got, [Rec::text(&format!("u|{base}|{}", end + 1), "3", end)]);
}

#[test]
fn a_session_merged_or_grown_is_retracted_before_its_successor() {
    let base = support::base_ms();
    let records = [
        Rec::text("u", "1", base),
        Rec::text("u", "2", base + 1_500),
        // Joins both: the two are retracted, then their merge emitted.
        Rec::text("u", "3", base + 800),
        // Inside the merged session's bounds: an update, no retraction.
        Rec::text("u", "4", base + 1_000),
        // Extends its end: the key with the old end is retracted.
        Rec::text("u", "5", base + 2_000),
    ];
    let dir = run_split(&on_update(sessions(1_000, 1_000)), &records, records.len());
    let session = |start: i64, end: i64, value: Option<&str>| {
        (
            format!("u|{}|{}", base + start, base + end + 1),
            value.map(str::to_string),
        )
    };
    assert_eq!(
        rows(dir.path()),
        [
            session(0, 0, Some("1")),
            session(1_500, 1_500, Some("1")),
            session(0, 0, None),
            session(1_500, 1_500, None),
            session(0, 1_500, Some("3")),
            session(0, 1_500, Some("4")),
            session(0, 1_500, None),
            session(0, 2_000, Some("5")),
        ]
    );
}

/// The update stream's records in order: windowed key, and the count as
/// text or none for a tombstone.
fn rows(data: &std::path::Path) -> Vec<(String, Option<String>)> {
    let text = |v: Vec<u8>| String::from_utf8(v).expect("a text value");
    (support::read(data, "sessions").into_iter().flatten())
        .map(|r| (r.key_text(), r.value.map(text)))
        .collect()
}
