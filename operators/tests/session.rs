//! Session windows through the real runtime against a naive model over
//! random inputs: records close enough to join, a record bridging two
//! sessions merging them, out-of-order timestamps, late records, emit on
//! update (exact order) and on close (the same sessions, each once), and
//! a stop and restart halfway.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use strata_operators::{Pipeline, Sessions, Topic, Windowed};
use support::Rec;

const CLICKS: Topic<String, String> = Topic::new("clicks");
const OUT: Topic<String, String> = Topic::new("sessions");
const LATE: Topic<String, String> = Topic::new("late");

fn pipeline(sessions: Sessions) -> Pipeline {
    let pipeline = Pipeline::new("sessions");
    pipeline
        .from(CLICKS)
        .session(sessions)
        .late_to(LATE)
        .count()
        .map(|w: Windowed<String>, n| (format!("{}|{}|{}", w.key, w.start, w.end), n.to_string()))
        .to(OUT);
    pipeline
}

fn model(records: &[Rec], gap: i64, grace: i64, on_close: bool) -> (Vec<Rec>, Vec<Rec>) {
    let mut watermark = i64::MIN;
    let mut sessions: BTreeMap<(String, i64), (i64, u64)> = BTreeMap::new();
    let (mut out, mut late) = (Vec::new(), Vec::new());
    let row = |key: &str, start: i64, end: i64, n: u64, ts: i64| {
        Rec::text(&format!("{key}|{start}|{}", end + 1), &n.to_string(), ts)
    };
    for r in records {
        let (key, ts) = (r.key_text(), r.timestamp);
        watermark = watermark.max(ts);
        let open = |end: i64| end + gap + grace > watermark;
        let joined: Vec<(String, i64)> = sessions
            .iter()
            .filter(|((k, start), (end, _))| {
                *k == key && start - gap <= ts && ts <= end + gap && open(*end)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if joined.is_empty() && !open(ts) {
            late.push(r.clone());
        } else {
            let (mut start, mut end, mut n) = (ts, ts, 1);
            for k in joined {
                let (old_end, old_n) = sessions.remove(&k).unwrap();
                start = start.min(k.1);
                end = end.max(old_end);
                n += old_n;
            }
            sessions.insert((key.clone(), start), (end, n));
            if !on_close {
                out.push(row(&key, start, end, n, ts));
            }
        }
        let closed: Vec<(String, i64)> = sessions
            .iter()
            .filter(|(_, (end, _))| !open(*end))
            .map(|(k, _)| k.clone())
            .collect();
        for k in closed {
            let (end, n) = sessions.remove(&k).unwrap();
            if on_close {
                out.push(row(&k.0, k.1, end, n, end));
            }
        }
    }
    (out, late)
}

const KEYS: [&str; 3] = ["a", "ab", "b"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn sessions_match_the_model(
        steps in proptest::collection::vec((0usize..3, -1_500i64..1_200), 1..100),
        gap_ms in prop_oneof![Just(300i64), Just(1_000)],
        grace_ms in prop_oneof![Just(0i64), Just(800)],
        on_close in any::<bool>(),
        split in any::<prop::sample::Index>(),
    ) {
        let mut ts = support::base_ms();
        let records: Vec<Rec> = steps
            .iter()
            .enumerate()
            .map(|(i, &(key, step))| {
                ts += step.max(0);
                Rec::text(KEYS[key], &format!("v{i}"), if step < 0 { ts + step } else { ts })
            })
            .collect();
        let mut sessions = Sessions::with_gap(Duration::from_millis(gap_ms as u64))
            .grace(Duration::from_millis(grace_ms as u64));
        if on_close {
            sessions = sessions.emit_on_close();
        }
        let (mut expected, expected_late) = model(&records, gap_ms, grace_ms, on_close);

        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline(sessions).app().unwrap();
        let at = split.index(records.len() + 1);
        support::append(data, "clicks", 1, 0, &records[..at]);
        support::run(&app, data);
        support::append(data, "clicks", 1, 0, &records[at..]);
        support::run(&app, data);

        let mut got: Vec<Rec> = support::read(data, "sessions").into_iter().flatten().collect();
        if on_close {
            // Emitted once each, when the closing list is next scanned.
            got.sort();
            expected.sort();
        }
        prop_assert_eq!(got, expected);
        let late: Vec<Rec> = support::read(data, "late").into_iter().flatten().collect();
        prop_assert_eq!(late, expected_late);
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
    let sessions = Sessions::with_gap(Duration::from_secs(1))
        .grace(Duration::from_secs(1))
        .emit_on_close();
    support::append(data, "clicks", 1, 0, &records);
    support::run(&pipeline(sessions).app().unwrap(), data);
    let got = support::read_sorted(data, "sessions");
    let end = base + 1_500;
    assert_eq!(got, [Rec::text(&format!("u|{base}|{}", end + 1), "3", end)]);
}
