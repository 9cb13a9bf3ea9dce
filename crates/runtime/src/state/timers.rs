//! The timer store of a task whose processor declares timers: timers
//! scheduled, cancelled and fired go through the store's table like any
//! store write (so they are committed, and sent to the store's changelog,
//! with the run), and the stream time is written to it with a commit that
//! moved it. The key layout is drawn in `runtime::timer`.
//!
//! Finding due timers is cheap when none is due: per domain the state keeps
//! a lower bound of its earliest timer (lowered by every schedule, set
//! exactly by every scan), and scans only once the bound is reached. A scan
//! settles the commit in flight first (the store's values are updated in
//! place, which a read must not race), reads the committed timers from the
//! database and merges the run's changes over them, kept ordered beside the
//! table for that.
//!
//! Invariant: `earliest[d]` is at most the time of every timer of domain
//! `d` (None: the domain has none).

use std::collections::BTreeMap;

use rocksdb::{Direction, IteratorMode};

use crate::timer::{STREAM_TIME_KEY, TimeDomain, Timer, decode_key, due_bounds, encode_key};

use super::meta::decode_i64;
use super::{StateError, TaskState};

/// The timers of a task's state: see the module docs.
pub(super) struct TimerState {
    /// The timer store's position among the stores.
    store: usize,
    /// The greatest record timestamp processed, this run included.
    stream_time: Option<i64>,
    /// The stream time the database holds (or the commit in flight writes).
    committed_stream_time: Option<i64>,
    /// Per domain, at most the time of its earliest timer; None: no timer.
    earliest: [Option<i64>; 2],
    /// The run's timer changes, ordered: scheduled (true) or removed.
    run: BTreeMap<Vec<u8>, bool>,
}

impl TaskState {
    /// Uses the store `store` as the task's timer store: reads the stream
    /// time and the earliest timer of each domain.
    pub(crate) fn use_timers(&mut self, store: &str) -> Result<(), StateError> {
        let index = self.index(store)?;
        let cf = self.cf(store)?;
        let stream_time = match self.db.get_cf(cf, STREAM_TIME_KEY)? {
            None => None,
            Some(raw) => Some(decode_i64(&raw)?),
        };
        let mut earliest = [None, None];
        for domain in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
            let from = [domain.byte()];
            let mut iter = self
                .db
                .iterator_cf(cf, IteratorMode::From(&from, Direction::Forward));
            if let Some(item) = iter.next() {
                let (key, _) = item?;
                if let Some(timer) = decode_key(&key).filter(|t| t.domain == domain) {
                    earliest[domain.index()] = Some(timer.time_ms);
                }
            }
        }
        self.timers = Some(TimerState {
            store: index,
            stream_time,
            committed_stream_time: stream_time,
            earliest,
            run: BTreeMap::new(),
        });
        Ok(())
    }

    /// Whether the task has a timer store.
    pub(crate) fn has_timers(&self) -> bool {
        self.timers.is_some()
    }

    /// The task's stream time (None before its first record, or without a
    /// timer store).
    pub(crate) fn stream_time(&self) -> Option<i64> {
        self.timers.as_ref().and_then(|t| t.stream_time)
    }

    /// Moves the stream time to `timestamp_ms` if that is later.
    #[inline]
    pub(crate) fn advance_stream_time(&mut self, timestamp_ms: i64) {
        if let Some(timers) = &mut self.timers
            && timers.stream_time.is_none_or(|t| t < timestamp_ms)
        {
            timers.stream_time = Some(timestamp_ms);
        }
    }

    /// Schedules (`present`) or cancels the timer (domain, time, key) in
    /// the run. None without a timer store.
    pub(crate) fn set_timer(
        &mut self,
        domain: TimeDomain,
        time_ms: i64,
        key: &[u8],
        present: bool,
    ) -> Option<()> {
        let store = self.timers.as_ref()?.store;
        let mut raw = Vec::new();
        encode_key(domain, time_ms, key, &mut raw);
        if present {
            self.put_at(store, &raw, &[]);
        } else {
            self.delete_at(store, &raw);
        }
        let timers = self.timers.as_mut()?;
        if present {
            let earliest = &mut timers.earliest[domain.index()];
            *earliest = Some(earliest.map_or(time_ms, |e| e.min(time_ms)));
        }
        timers.run.insert(raw, present);
        Some(())
    }

    /// Whether a timer of `domain` may be due at `upto` (a scan tells).
    #[inline]
    pub(crate) fn timer_due(&self, domain: TimeDomain, upto: i64) -> bool {
        self.timers
            .as_ref()
            .and_then(|t| t.earliest[domain.index()])
            .is_some_and(|earliest| earliest <= upto)
    }

    /// At most the time of the earliest timer of `domain`.
    pub(crate) fn earliest_timer(&self, domain: TimeDomain) -> Option<i64> {
        self.timers
            .as_ref()
            .and_then(|t| t.earliest[domain.index()])
    }

    /// The first `max` timers of `domain` due at `upto` (time at most
    /// `upto`), in firing order, as this run has left them.
    pub(crate) fn due_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        max: usize,
    ) -> Result<Vec<Timer>, StateError> {
        let Some(store) = self.timers.as_ref().map(|t| t.store) else {
            return Ok(Vec::new());
        };
        // The database is read with no commit writing it.
        self.settle()?;
        let (from, to) = due_bounds(domain, upto);
        let timers = self.timers.as_ref().expect("looked above");
        let in_domain = |key: &[u8]| key.first() == Some(&domain.byte());
        // The first `max` committed timers the run left, and the first one
        // after them.
        let mut due = Vec::new();
        let mut next: Option<Vec<u8>> = None;
        let cf = self.cf(&self.stores[store])?;
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(&from, Direction::Forward));
        for item in iter {
            let (key, _) = item?;
            if !in_domain(&key) {
                break;
            }
            if timers.run.get(&*key) == Some(&false) {
                continue;
            }
            if *key < *to && due.len() < max {
                due.push(key.to_vec());
            } else {
                next = Some(key.to_vec());
                break;
            }
        }
        // The run's own: the committed ones, if any, are among them already
        // or past the first `max`.
        for (key, present) in timers.run.range(from..) {
            if !in_domain(key) {
                break;
            }
            if !present {
                continue;
            }
            if *key < to {
                due.push(key.clone());
            } else {
                if next.as_ref().is_none_or(|n| key < n) {
                    next = Some(key.clone());
                }
                break;
            }
        }
        due.sort_unstable();
        due.dedup();
        if due.len() > max {
            let first_left = due[max].clone();
            if next.as_ref().is_none_or(|n| first_left < *n) {
                next = Some(first_left);
            }
            due.truncate(max);
        }
        let timers = self.timers.as_mut().expect("looked above");
        timers.earliest[domain.index()] = next.and_then(|n| decode_key(&n)).map(|t| t.time_ms);
        let decoded = due.iter().filter_map(|raw| decode_key(raw)).collect();
        Ok(decoded)
    }

    /// Removes `timer` as it fires; false if the run cancelled it since it
    /// was found due (it does not fire).
    pub(crate) fn take_timer(&mut self, timer: &Timer) -> bool {
        let Some(timers) = &self.timers else {
            return false;
        };
        let mut raw = Vec::new();
        encode_key(timer.domain, timer.time_ms, &timer.key, &mut raw);
        if timers.run.get(&raw) == Some(&false) {
            return false;
        }
        self.set_timer(timer.domain, timer.time_ms, &timer.key, false);
        true
    }

    /// Before a commit takes the stores' writes: the stream time into the
    /// timer store if the run moved it; the run's ordered changes dropped
    /// (the table carries them into the commit).
    pub(super) fn stage_timers(&mut self) {
        let Some(timers) = &mut self.timers else {
            return;
        };
        timers.run.clear();
        let (store, time) = (timers.store, timers.stream_time);
        if time == timers.committed_stream_time {
            return;
        }
        timers.committed_stream_time = time;
        if let Some(time) = time {
            self.put_at(store, STREAM_TIME_KEY, &time.to_be_bytes());
        }
    }

    /// Forgets the run's timer changes and stream time. The bounds are
    /// unknown again (timers the run fired are back): the next look scans.
    pub(super) fn discard_timers(&mut self) {
        if let Some(timers) = &mut self.timers {
            timers.run.clear();
            timers.stream_time = timers.committed_stream_time;
            timers.earliest = [Some(i64::MIN), Some(i64::MIN)];
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    const STORE: &str = "p.timers";

    fn open(dir: &std::path::Path) -> TaskState {
        let mut state = TaskState::open(dir, &["counts", STORE], false).unwrap();
        state.use_timers(STORE).unwrap();
        state
    }

    /// Fires everything of `domain` due at `upto`, as the task does.
    fn fire(state: &mut TaskState, domain: TimeDomain, upto: i64, max: usize) -> Vec<Timer> {
        let mut fired = Vec::new();
        while state.timer_due(domain, upto) {
            for timer in state.due_timers(domain, upto, max).unwrap() {
                if state.take_timer(&timer) {
                    fired.push(timer);
                }
            }
        }
        fired
    }

    fn at(time_ms: i64, key: &str) -> Timer {
        Timer {
            domain: TimeDomain::EventTime,
            time_ms,
            key: key.as_bytes().to_vec(),
        }
    }

    #[test]
    fn due_timers_fire_in_time_then_key_order_across_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        let event = TimeDomain::EventTime;
        state.set_timer(event, 30, b"b", true).unwrap();
        state.set_timer(event, 10, b"z", true).unwrap();
        state.commit(&[("in", 1)]).unwrap();
        state.set_timer(event, 30, b"a", true).unwrap();
        state.set_timer(event, 20, b"x", true).unwrap();
        state.set_timer(event, 20, b"x", true).unwrap();
        state
            .set_timer(TimeDomain::ProcessingTime, 0, b"p", true)
            .unwrap();
        assert!(!state.timer_due(event, 9));
        assert_eq!(fire(&mut state, event, 20, 1), [at(10, "z"), at(20, "x")]);
        assert_eq!(state.earliest_timer(event), Some(30));
        assert_eq!(fire(&mut state, event, 100, 10), [at(30, "a"), at(30, "b")]);
        assert_eq!(state.earliest_timer(event), None);
        assert_eq!(state.earliest_timer(TimeDomain::ProcessingTime), Some(0));
    }

    #[test]
    fn a_cancelled_timer_never_fires_and_a_discarded_fire_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        let event = TimeDomain::EventTime;
        state.set_timer(event, 5, b"gone", true).unwrap();
        state.set_timer(event, 6, b"kept", true).unwrap();
        state.commit(&[("in", 1)]).unwrap();
        state.set_timer(event, 5, b"gone", false).unwrap();
        assert_eq!(fire(&mut state, event, 10, 10), [at(6, "kept")]);
        // The run that fired it fails: the timer is there again.
        state.discard();
        assert_eq!(
            fire(&mut state, event, 10, 10),
            [at(5, "gone"), at(6, "kept")]
        );
    }

    #[test]
    fn timers_and_the_stream_time_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        state.advance_stream_time(1_000);
        state.advance_stream_time(900);
        state
            .set_timer(TimeDomain::EventTime, 2_000, b"k", true)
            .unwrap();
        state.commit(&[("in", 1)]).unwrap();
        state.advance_stream_time(5_000);
        state
            .set_timer(TimeDomain::EventTime, 3_000, b"lost", true)
            .unwrap();
        drop(state);
        let mut state = open(dir.path());
        assert_eq!(state.stream_time(), Some(1_000));
        assert_eq!(state.earliest_timer(TimeDomain::EventTime), Some(2_000));
        let fired = fire(&mut state, TimeDomain::EventTime, 10_000, 10);
        assert_eq!(fired, [at(2_000, "k")]);
    }

    #[test]
    fn a_state_without_a_timer_store_refuses_timers() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = TaskState::open(dir.path(), &["counts"], false).unwrap();
        assert_eq!(state.set_timer(TimeDomain::EventTime, 1, b"k", true), None);
        state.advance_stream_time(10);
        assert_eq!(state.stream_time(), None);
    }

    /// One step of the model test.
    #[derive(Debug, Clone)]
    enum Op {
        Schedule(bool, i64, u8),
        Cancel(bool, i64, u8),
        Commit,
        Fire(bool, i64, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let time = -5i64..40;
        prop_oneof![
            4 => (any::<bool>(), time.clone(), 0u8..4).prop_map(|(p, t, k)| Op::Schedule(p, t, k)),
            1 => (any::<bool>(), time.clone(), 0u8..4).prop_map(|(p, t, k)| Op::Cancel(p, t, k)),
            1 => Just(Op::Commit),
            2 => (any::<bool>(), time, 1usize..4).prop_map(|(p, t, m)| Op::Fire(p, t, m)),
        ]
    }

    fn domain(processing: bool) -> TimeDomain {
        if processing {
            TimeDomain::ProcessingTime
        } else {
            TimeDomain::EventTime
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn the_fire_order_is_the_models_sort(ops in proptest::collection::vec(op(), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let mut state = open(dir.path());
            let mut model: BTreeSet<Timer> = BTreeSet::new();
            let mut offset = 0;
            for op in ops {
                match op {
                    Op::Schedule(p, time, key) => {
                        state.set_timer(domain(p), time, &[key], true).unwrap();
                        model.insert(Timer { domain: domain(p), time_ms: time, key: vec![key] });
                    }
                    Op::Cancel(p, time, key) => {
                        state.set_timer(domain(p), time, &[key], false).unwrap();
                        model.remove(&Timer { domain: domain(p), time_ms: time, key: vec![key] });
                    }
                    Op::Commit => {
                        offset += 1;
                        state.begin_commit(&[("in", offset)]).unwrap();
                    }
                    Op::Fire(p, upto, max) => {
                        let fired = fire(&mut state, domain(p), upto, max);
                        let due: Vec<Timer> = model
                            .iter()
                            .filter(|t| t.domain == domain(p) && t.time_ms <= upto)
                            .cloned()
                            .collect();
                        for timer in &due {
                            model.remove(timer);
                        }
                        prop_assert_eq!(fired, due);
                    }
                }
            }
            state.settle().unwrap();
            let left = fire(&mut state, TimeDomain::EventTime, i64::MAX, 5)
                .into_iter()
                .chain(fire(&mut state, TimeDomain::ProcessingTime, i64::MAX, 5));
            prop_assert_eq!(left.collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
        }
    }
}
