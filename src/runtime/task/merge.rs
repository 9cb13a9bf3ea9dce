//! Order across a task's inputs (docs/design.md, "Order across inputs").
//!
//! A task with several inputs (a join, a merge) processes the records
//! its inputs hold in timestamp order, as Kafka Streams' partition group
//! does: of the first unprocessed record of each input, the one with the
//! lowest timestamp goes next; ties go to the input declared first (within
//! an input, records go in offset order, whatever their timestamps). The
//! rule sees only the records, so a rebuild, a replay and a live run of
//! the same inputs process them in the same order, whatever the fetch
//! sizes, commit intervals or restarts.
//!
//! The rule needs every input's next record. An input with nothing
//! buffered is fetched, and until it has a record the task waits for it —
//! unless it may be passed by:
//!
//! | the input with nothing buffered | passed by? |
//! |---|---|
//! | at its target (`--until-end`, rebuild) | yes: it is done |
//! | has records before its target | no |
//! | `--until-end`, targets not known yet | no: a writer still runs |
//! | its partition holds records not fetched yet | no |
//! | caught up with its partition | after `max_task_idle` (0: at once) |
//!
//! So over a backlog (everything written before the run) the order is the
//! timestamp order of the whole backlog; live, a record arriving on a
//! quiet input after the others moved past its time is processed when it
//! comes (with the stream time already later), unless `max_task_idle`
//! held the others back long enough.
//!
//! A turn fetches every input that has nothing buffered (remote: only one
//! fetch of a turn waits on the broker, and only when nothing is buffered
//! or the input must be waited for; the others just ask), then processes
//! records, a run of one input at a time: from the chosen input, up to the
//! end of its open batch, for as long as its records come before the
//! next input's first record.
//!
//! A task with one input has no choice to make: it reads each fetch in
//! place (`process`), with nothing of this on its path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::record::RecordCursor;
use crate::runtime::context::Position;
use crate::runtime::error::RuntimeError;
use crate::runtime::log_access::FETCH_WAIT_MAX;
use crate::runtime::timer::TimeDomain;

use super::input::{Head, Input, Unreadable};
use super::{PREFETCH_AHEAD, Task};

/// How patient the choice is with an input that has nothing buffered.
#[derive(Debug, Clone, Copy)]
pub(super) struct Patience {
    /// The input's target, if the task has targets.
    pub target: Option<i64>,
    /// `--until-end` and the targets are not known yet: a writer of an
    /// input may still be running.
    pub ends_pending: bool,
    pub max_task_idle: Duration,
}

impl Patience {
    /// Whether the task may go on without `input`, which has nothing
    /// buffered (the table in the module doc).
    pub fn may_pass_by(&self, input: &Input, now: Instant) -> bool {
        if let Some(target) = self.target {
            return input.next >= target;
        }
        if self.ends_pending {
            return false;
        }
        match input.end {
            Some(end) if input.next >= end => self.idle_over(input, now),
            _ => false,
        }
    }

    /// Whether a caught-up input has been idle for `max_task_idle`.
    fn idle_over(&self, input: &Input, now: Instant) -> bool {
        match input.idle_since {
            Some(since) => now.saturating_duration_since(since) >= self.max_task_idle,
            None => self.max_task_idle.is_zero(),
        }
    }

    /// How long a remote fetch of `input`, caught up, should wait on the
    /// broker for its records: while the task waits for it, up to
    /// [`FETCH_WAIT_MAX`] (or the rest of its idle time); zero when the
    /// task can go on without it.
    fn fetch_wait(&self, input: &Input, now: Instant) -> Duration {
        if self.target.is_some() || self.ends_pending {
            return FETCH_WAIT_MAX;
        }
        let idle_for = input
            .idle_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        self.max_task_idle
            .saturating_sub(idle_for)
            .min(FETCH_WAIT_MAX)
    }
}

/// The lowest (timestamp, input) of the inputs' first records.
type Pick = (i64, usize);

impl Task {
    /// One turn of a task with several inputs: fetches the inputs that
    /// have nothing buffered, then processes records in timestamp order as
    /// far as the inputs allow. True if anything was processed or any
    /// input moved.
    pub(super) async fn merge_turn(&mut self) -> Result<bool, RuntimeError> {
        self.fill_inputs().await?;
        self.merge().await
    }

    fn patience(&self, at: usize) -> Patience {
        let targets = self.setup.targets.borrow();
        let target = targets
            .as_ref()
            .and_then(|t| t.get(&*self.inputs[at].topic).copied());
        Patience {
            target,
            ends_pending: self.setup.until_end && targets.is_none(),
            max_task_idle: self.setup.config.max_task_idle,
        }
    }

    /// Fetches every input that has nothing buffered and has not reached
    /// its target.
    async fn fill_inputs(&mut self) -> Result<(), RuntimeError> {
        let now = Instant::now();
        // An idle task's first fetch waits on the broker for records; the
        // others only ask.
        let mut idle = self.inputs.iter().all(Input::is_empty);
        for at in 0..self.inputs.len() {
            let patience = self.patience(at);
            let input = &self.inputs[at];
            if !input.is_empty() || patience.target.is_some_and(|t| input.next >= t) {
                continue;
            }
            let mut wait = patience.fetch_wait(input, now);
            if idle {
                wait = FETCH_WAIT_MAX;
                idle = false;
            }
            let fetched = self.fetch_input(at, wait).await?;
            let input = &mut self.inputs[at];
            let got = !fetched.records.is_empty();
            input.fill(fetched);
            if got {
                input.idle_since = None;
            } else if input.end.is_some_and(|end| input.next >= end) {
                input.idle_since.get_or_insert(now);
            }
        }
        Ok(())
    }

    /// Processes records in timestamp order until an input that must be
    /// waited for has nothing buffered, or none has anything.
    async fn merge(&mut self) -> Result<bool, RuntimeError> {
        // The targets come once; a turn reads them once.
        let patience: Vec<Patience> = (0..self.inputs.len()).map(|at| self.patience(at)).collect();
        let mut moved = false;
        loop {
            let mut first: Option<Pick> = None;
            let mut second: Option<Pick> = None;
            for (at, patience) in patience.iter().enumerate() {
                let limit = patience.target.unwrap_or(i64::MAX);
                let (head, passed) = self.inputs[at]
                    .head(limit, &mut self.pending.bytes)
                    .map_err(|unreadable| self.unreadable(at, unreadable))?;
                if passed {
                    moved = true;
                    self.pending.moved = true;
                }
                match head {
                    Head::Record { timestamp, .. } => {
                        let pick = (timestamp, at);
                        if first.is_none_or(|f| pick < f) {
                            second = first;
                            first = Some(pick);
                        } else if second.is_none_or(|s| pick < s) {
                            second = Some(pick);
                        }
                    }
                    Head::AtTarget => {}
                    Head::Empty if patience.may_pass_by(&self.inputs[at], Instant::now()) => {}
                    Head::Empty => return Ok(moved),
                }
            }
            let Some((_, at)) = first else {
                return Ok(moved);
            };
            let limit = patience[at].target.unwrap_or(i64::MAX);
            self.run_input(at, limit, second).await?;
            moved = true;
        }
    }

    /// Processes records of input `at` from its open batch while they come
    /// before `bound` (the next input's first record), up to the batch's
    /// end or `limit`.
    async fn run_input(
        &mut self,
        at: usize,
        limit: i64,
        bound: Option<Pick>,
    ) -> Result<(), RuntimeError> {
        if self.processor.prepares() {
            self.prepare_open_batch(at, limit).await?;
        }
        let open = self.inputs[at]
            .open_batch()
            .expect("an input with a first record has an open batch");
        let section = open.section.clone();
        let mut cursor = open.cursor;
        let mut position = Position {
            topic: Arc::clone(&self.inputs[at].topic),
            partition: self.setup.partition,
            offset: -1,
            timestamp: 0,
            headers: Vec::new(),
        };
        let mut counted = 0u64;
        // Store entries of the keys a few records ahead, asked for as in
        // `process` (see `Prefetch`): a cursor that runs ahead.
        let prefetching = !self.prefetch.active.is_empty();
        let mut ahead = cursor;
        if prefetching {
            for _ in 0..PREFETCH_AHEAD {
                self.prefetch_next(&mut ahead, &section);
            }
        }
        loop {
            let mut after = cursor;
            // A malformed record ends the run; the next look at the input
            // reports it.
            let Some(Ok(record)) = after.next(&section) else {
                break;
            };
            if prefetching {
                self.prefetch_next(&mut ahead, &section);
            }
            if record.offset < self.inputs[at].next {
                cursor = after;
                continue;
            }
            if record.offset >= limit || bound.is_some_and(|b| (record.timestamp, at) > b) {
                break;
            }
            self.apply(at, &record, &mut position)?;
            cursor = after;
            self.inputs[at].advance(cursor, Some(record.offset));
            counted += 1;
            if let Some(now) = self.state.stream_time()
                && self.state.timer_due(TimeDomain::EventTime, now)
            {
                self.fire_timers(TimeDomain::EventTime).await?;
            }
            if self.commit_full() {
                let progress = &self.setup.progress;
                progress.add(std::mem::take(&mut counted), self.counted);
                self.commit().await?;
            }
        }
        self.inputs[at].advance(cursor, None);
        self.setup.progress.add(counted, self.counted);
        self.prefetch.review(&mut self.state, counted as usize);
        self.after_run().await
    }

    /// Asks for the store entries of the record at `ahead`'s key, and moves
    /// it on.
    fn prefetch_next(&mut self, ahead: &mut RecordCursor, section: &[u8]) {
        if let Some(Ok(record)) = ahead.next(section) {
            let key = record.key.unwrap_or_default();
            self.state.prefetch(key, &self.prefetch.active);
        }
    }

    /// An async processor's lookups for the open batch of input `at`, once
    /// per batch, before its first record is applied.
    async fn prepare_open_batch(&mut self, at: usize, limit: i64) -> Result<(), RuntimeError> {
        let input = &mut self.inputs[at];
        let Some(open) = input.open_batch_to_prepare() else {
            return Ok(());
        };
        let (section, mut cursor) = (open.section.clone(), open.cursor);
        let mut records = Vec::new();
        while let Some(Ok(record)) = cursor.next(&section) {
            records.push(record);
        }
        let position = Position {
            topic: Arc::clone(&input.topic),
            partition: self.setup.partition,
            offset: -1,
            timestamp: 0,
            headers: Vec::new(),
        };
        let offsets = input.next..limit;
        if let Some(prepare) = self.processor.prepare(&records, &position, offsets) {
            prepare.await;
        }
        Ok(())
    }

    /// A batch of input `at` that fails its checks stops the task: records
    /// are never skipped.
    fn unreadable(&self, at: usize, unreadable: Unreadable) -> RuntimeError {
        RuntimeError::UnreadableBatch {
            topic: self.inputs[at].log_topic.clone(),
            partition: self.setup.partition,
            offset: unreadable.offset,
            reason: unreadable.error.to_string(),
        }
    }

    /// When the embedded idle wait must end for an input the task waits
    /// for within its `max_task_idle`.
    pub(super) fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.setup.config.max_task_idle;
        if self.inputs.len() < 2 || idle.is_zero() {
            return None;
        }
        (self.inputs.iter())
            .filter(|i| i.is_empty())
            .filter_map(|i| i.idle_since)
            .map(|since| since + idle)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(next: i64, end: Option<i64>, idle_since: Option<Instant>) -> Input {
        let mut input = Input::new(Arc::from("in"), "in".into(), next);
        input.end = end;
        input.idle_since = idle_since;
        input
    }

    fn live(max_task_idle: Duration) -> Patience {
        Patience {
            target: None,
            ends_pending: false,
            max_task_idle,
        }
    }

    #[test]
    fn an_input_with_records_not_fetched_yet_is_never_passed_by() {
        let now = Instant::now();
        let long_idle = Some(now - Duration::from_secs(60));
        let behind = input(5, Some(9), long_idle);
        assert!(!live(Duration::ZERO).may_pass_by(&behind, now));
        assert!(!live(Duration::from_millis(10)).may_pass_by(&behind, now));
    }

    #[test]
    fn an_input_never_fetched_is_waited_for() {
        let now = Instant::now();
        assert!(!live(Duration::ZERO).may_pass_by(&input(0, None, None), now));
    }

    #[test]
    fn a_caught_up_input_is_passed_by_once_idle_for_max_task_idle() {
        let now = Instant::now();
        let idle = Duration::from_millis(100);
        let just_now = input(9, Some(9), Some(now));
        assert!(live(Duration::ZERO).may_pass_by(&just_now, now));
        assert!(!live(idle).may_pass_by(&just_now, now));
        let long_ago = input(9, Some(9), Some(now - Duration::from_millis(150)));
        assert!(live(idle).may_pass_by(&long_ago, now));
    }

    #[test]
    fn with_targets_only_an_input_at_its_target_is_passed_by() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_secs(60)));
        let to_go = Patience {
            target: Some(12),
            ends_pending: false,
            max_task_idle: Duration::ZERO,
        };
        assert!(!to_go.may_pass_by(&caught_up, now));
        let done = Patience {
            target: Some(9),
            ..to_go
        };
        assert!(done.may_pass_by(&caught_up, now));
    }

    #[test]
    fn until_the_ends_are_known_no_input_is_passed_by() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_secs(60)));
        let pending = Patience {
            target: None,
            ends_pending: true,
            max_task_idle: Duration::ZERO,
        };
        assert!(!pending.may_pass_by(&caught_up, now));
        assert_eq!(pending.fetch_wait(&caught_up, now), FETCH_WAIT_MAX);
    }

    #[test]
    fn a_fetch_waits_only_as_long_as_the_task_would_wait_for_the_input() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_millis(30)));
        assert_eq!(
            live(Duration::ZERO).fetch_wait(&caught_up, now),
            Duration::ZERO
        );
        let idle = live(Duration::from_millis(50)).fetch_wait(&caught_up, now);
        assert_eq!(idle, Duration::from_millis(20));
        let long = live(Duration::from_secs(5)).fetch_wait(&caught_up, now);
        assert_eq!(long, FETCH_WAIT_MAX);
    }
}
