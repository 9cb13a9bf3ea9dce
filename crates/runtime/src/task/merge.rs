//! Order across a task's inputs (docs/design.md, "Order across inputs").
//!
//! A task with several inputs (a join, a merge) processes the records
//! its inputs hold in timestamp order, as Kafka Streams' partition group
//! does: of the first unprocessed record of each input, the one with the
//! lowest timestamp goes next; ties go to the input declared first (within
//! an input, records go in offset order, whatever their timestamps). The
//! rule sees only the records, so a rebuild, a replay and a live run of
//! the same backlog process them in the same order, whatever the fetch
//! sizes, commit intervals or restarts.
//!
//! The rule needs every input's next record. An input with nothing
//! buffered is fetched, and until it has a record the task waits for it,
//! unless it may be passed by ([`Patience`]: at its target, or caught up
//! with its partition for `max_task_idle`).
//!
//! A turn asks every input that has nothing buffered for what it has,
//! without waiting; remote, a task that still cannot go on (nothing
//! buffered, or an input it must wait for still empty) then waits on the
//! broker for all those inputs in one go (one Fetch per leader), so a
//! quiet input never delays a busy one. Then it processes records, a run
//! of one input at a time: from the chosen input, up to the end of its
//! open batch, for as long as its records come before the next input's
//! first record. Embedded, an idle task waits on the log's append signals
//! (`Task::wait_for_input`).
//!
//! A task with one input has no choice to make: it reads each fetch in
//! place (`process`), with nothing of this on its path.

use std::time::{Duration, Instant};

use crate::error::{RuntimeError, Unreadable};
use crate::log_access::{FETCH_WAIT_MAX, LogAccess};
use crate::position::Position;
use strata_record::RecordCursor;

use super::input::{Head, UnreadableAt};
use super::patience::Patience;
use super::{PREFETCH_AHEAD, Task};

/// The lowest (timestamp, input) of the inputs' first records.
type Pick = (i64, usize);

impl Task {
    /// One turn of a task with several inputs: fetches the inputs that
    /// have nothing buffered, then processes records in timestamp order as
    /// far as the inputs allow. True if anything was processed or any
    /// input moved.
    pub(super) async fn merge_turn(&mut self) -> Result<bool, RuntimeError> {
        let patience = self.patience();
        self.fill_inputs(&patience).await?;
        self.merge(&patience).await
    }

    /// Each input's patience, as the targets stand now.
    fn patience(&self) -> Vec<Patience> {
        let targets = self.setup.targets.borrow();
        let ends_pending = self.setup.until_end && targets.is_none();
        (self.inputs.iter())
            .map(|input| Patience {
                target: targets.as_ref().and_then(|t| t.get(&*input.topic).copied()),
                ends_pending,
                max_task_idle: self.setup.config.max_task_idle,
            })
            .collect()
    }

    /// Asks every input with nothing buffered (and short of its target)
    /// for what it has; remote, waits on the broker if the task still
    /// cannot go on.
    async fn fill_inputs(&mut self, patience_of: &[Patience]) -> Result<(), RuntimeError> {
        let now = Instant::now();
        for (at, patience) in patience_of.iter().enumerate() {
            let input = &self.inputs[at];
            if input.is_empty() && !patience.at_target(input) {
                let fetched = self.fetch_input(at, Duration::ZERO).await?;
                self.inputs[at].fill(fetched, now);
            }
        }
        if matches!(self.setup.log, LogAccess::Remote(_))
            && let Some(wait) = self.held_up(patience_of, now)
        {
            self.wait_on_broker(patience_of, wait).await;
        }
        Ok(())
    }

    /// How long a remote task that cannot go on should wait on the broker
    /// for records: while an input it must wait for has nothing (as long
    /// as that input's patience asks), or while nothing is buffered at all.
    fn held_up(&self, patience: &[Patience], now: Instant) -> Option<Duration> {
        let mut wait: Option<Duration> = None;
        for (input, patience) in self.inputs.iter().zip(patience) {
            if input.is_empty() && !patience.may_pass_by(input, now) {
                let longer = patience.fetch_wait(input, now);
                wait = Some(wait.map_or(longer, |w| w.max(longer)));
            }
        }
        if wait.is_none() && self.inputs.iter().all(|i| i.is_empty()) {
            wait = Some(FETCH_WAIT_MAX);
        }
        wait.filter(|w| !w.is_zero())
    }

    /// Waits up to `wait` on the broker for records of every input with
    /// nothing buffered, in one fetch, and keeps what comes. A failure is
    /// left for the next turn's fetch of the input to report.
    async fn wait_on_broker(&mut self, patience: &[Patience], wait: Duration) {
        let waiting: Vec<usize> = (0..self.inputs.len())
            .filter(|&at| {
                let input = &self.inputs[at];
                input.is_empty() && !patience[at].at_target(input)
            })
            .collect();
        let wants: Vec<(String, i32, i64)> = (waiting.iter())
            .map(|&at| {
                let input = &self.inputs[at];
                (input.log_topic.clone(), self.setup.partition, input.next)
            })
            .collect();
        let max_bytes = self.setup.config.fetch_bytes;
        let answers = self
            .setup
            .log
            .fetch_many_within(&wants, max_bytes, wait)
            .await;
        let now = Instant::now();
        for (at, answer) in waiting.into_iter().zip(answers) {
            match answer {
                Ok(fetched) if fetched.log_start_offset <= self.inputs[at].next => {
                    self.inputs[at].fill(fetched, now);
                }
                Ok(_) => {}
                Err(error) => tracing::debug!(task = %self.setup.name(), "waiting fetch: {error}"),
            }
        }
    }

    /// Processes records in timestamp order until an input that must be
    /// waited for has nothing buffered, none has anything, or the targets
    /// came (the loop takes them up first).
    async fn merge(&mut self, patience: &[Patience]) -> Result<bool, RuntimeError> {
        let mut moved = false;
        loop {
            if self.setup.targets.has_changed().unwrap_or(false) {
                return Ok(moved);
            }
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
        let input = &self.inputs[at];
        let open = input
            .open_batch()
            .expect("an input with a first record has an open batch");
        let (section, mut cursor) = (open.section.clone(), open.cursor);
        let mut position = Position::before_records(&input.topic, self.setup.partition, 0);
        let mut ahead = self.prefetch_ahead(open.ahead, cursor, &section);
        let started = (Instant::now(), self.in_commits);
        let (mut counted, mut processed, mut newest) = (0u64, 0u64, -1i64);
        loop {
            let mut after = cursor;
            // A malformed record ends the run; the next look at the input
            // reports it.
            let Some(Ok(record)) = after.next(&section) else {
                break;
            };
            if record.offset < self.inputs[at].next {
                cursor = after;
                continue;
            }
            if record.offset >= limit || bound.is_some_and(|b| (record.timestamp, at) > b) {
                break;
            }
            if let Some(ahead) = &mut ahead {
                self.prefetch_next(ahead, &section);
            }
            self.apply(at, &record, &mut position)?;
            cursor = after;
            self.inputs[at].advance(cursor, ahead, Some(record.offset));
            counted += 1;
            processed += 1;
            newest = newest.max(record.timestamp);
            if self.setup.config.metrics {
                let sampler = &mut self.key_sampler;
                (self.metrics).count_sampled(sampler, 1, |_| record.key, record.timestamp);
            }
            if self.due_after_record() {
                self.after_record(&mut counted).await?;
            }
        }
        self.inputs[at].advance(cursor, ahead, None);
        self.count_progress(counted);
        if self.setup.config.metrics {
            let nanos = self.processing_nanos(started);
            let next = self.inputs[at].next;
            (self.metrics).processed(at, processed, nanos, next, newest);
        }
        self.prefetch.review(&mut self.state, counted as usize);
        self.after_run().await
    }

    /// The cursor that runs [`PREFETCH_AHEAD`] records ahead of `cursor`
    /// asking for their keys' store entries (see `Prefetch`), kept with
    /// the open batch between runs; none when nothing is prefetched.
    fn prefetch_ahead(
        &mut self,
        kept: Option<RecordCursor>,
        cursor: RecordCursor,
        section: &[u8],
    ) -> Option<RecordCursor> {
        if !self.prefetch.is_active() {
            return None;
        }
        // The keys asked for last were another run's (of this input or
        // another): a kept cursor's second steps for the records between
        // this run's first and the cursor are lost, a few per run.
        self.prefetch.restart();
        if kept.is_some() {
            return kept;
        }
        let mut ahead = cursor;
        for _ in 0..PREFETCH_AHEAD {
            self.prefetch_next(&mut ahead, section);
        }
        Some(ahead)
    }

    /// Asks for the store entries of the record at `ahead`'s key, and moves
    /// it on.
    fn prefetch_next(&mut self, ahead: &mut RecordCursor, section: &[u8]) {
        if let Some((key, timestamp)) = ahead.next_key_and_time(section) {
            self.prefetch
                .ahead(&self.state, key.unwrap_or_default(), timestamp);
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
        let position = Position::before_records(&input.topic, self.setup.partition, 0);
        let offsets = input.next..limit;
        if let Some(prepare) = self.processor.prepare(&records, &position, offsets) {
            prepare.await;
        }
        Ok(())
    }

    /// A batch of input `at` that fails its checks stops the task: records
    /// are never skipped.
    fn unreadable(&self, at: usize, unreadable: UnreadableAt) -> RuntimeError {
        RuntimeError::UnreadableBatch {
            topic: self.inputs[at].log_topic.clone(),
            partition: self.setup.partition,
            offset: unreadable.offset,
            error: Unreadable::batch(unreadable.error),
        }
    }

    /// When the embedded idle wait must end: when an input the task waits
    /// for, holding back records of the others, will have been idle for
    /// `max_task_idle` (none when none is still to come).
    pub(super) fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.setup.config.max_task_idle;
        let holding = self.inputs.iter().any(|i| !i.is_empty());
        if self.inputs.len() < 2 || idle.is_zero() || !holding {
            return None;
        }
        let now = Instant::now();
        (self.inputs.iter())
            .filter(|i| i.is_empty())
            .filter_map(|i| i.idle_since)
            .map(|since| since + idle)
            .filter(|deadline| *deadline > now)
            .min()
    }
}
