//! Fetching whole batches from an input and running the processor on each
//! record (and its `init` and `close`), with the store entries of the next
//! records' keys asked for ahead.
//!
//! A fetch may end inside a batch (the next fetch starts there); a batch
//! that fails its checks stops the task: records are never skipped. A
//! target offset is a hard stop: nothing at or past it is processed.
//!
//! A batch's records go to the processor in runs, one call for many, when
//! nothing can be due between them (see `Task::run_room`), and one at a
//! time otherwise; a run ends where the commit interval's records do.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::erased::{Ahead, Halted};
use crate::error::{RuntimeError, Unreadable};
use crate::log_access::{FETCH_WAIT_MAX, Fetched, LogAccess};
use crate::position::Position;
use crate::process_error::ProcessError;
use crate::provenance::Origin;
use crate::record::RawRecord;
use crate::state::TaskState;
use crate::task_metrics::{KeySampler, TaskMetrics};
use crate::timer::TimeDomain;
use strata_record::{Record, RecordBatch};

use super::dead_letters::{Failed, Failure};

/// The most records a batch's buffer is sized for before they are read
/// (a batch of more grows it as usual): a damaged or hostile batch that
/// claims millions of records in 64 MiB of garbage reserves no more.
const RECORDS_SIZED_MAX: usize = 16 << 10;
use super::{DECOMPRESSED_BYTES_MAX, PREFETCH_AHEAD, Task, TaskSetup};

impl Task {
    /// Fetches from input `at`'s position; a remote fetch waits at most
    /// `max_wait` for records at the end. A position the log no longer
    /// holds stops the task (records are never skipped).
    pub(super) async fn fetch_input(
        &self,
        at: usize,
        max_wait: Duration,
    ) -> Result<Fetched, RuntimeError> {
        let (topic, partition) = (&self.inputs[at].log_topic, self.setup.partition);
        let next = self.inputs[at].next;
        let max_bytes = self.setup.config.fetch_bytes;
        let log = &self.setup.log;
        let fetched = match log
            .fetch_within(topic, partition, next, max_bytes, max_wait)
            .await
        {
            Ok(fetched) => fetched,
            Err(RuntimeError::Client(strata_client::ClientError::OffsetOutOfRange { .. }))
            | Err(RuntimeError::Log(strata_log::LogError::OffsetOutOfRange { .. })) => {
                let start = log.start_offset(topic, partition).await?;
                return Err(self.input_gone(topic, start, next));
            }
            Err(error) => return Err(error),
        };
        if fetched.log_start_offset > next {
            return Err(self.input_gone(topic, fetched.log_start_offset, next));
        }
        (self.metrics).fetched(at, fetched.records.len() as u64, fetched.end);
        Ok(fetched)
    }

    /// Fetches from input `at` (a task's only one) and processes what came
    /// in place; false if nothing did.
    pub(super) async fn fetch_and_process(&mut self, at: usize) -> Result<bool, RuntimeError> {
        let fetched = self.fetch_input(at, FETCH_WAIT_MAX).await?;
        let (topic, partition) = (self.inputs[at].log_topic.clone(), self.setup.partition);
        let next = self.inputs[at].next;
        let mut rest: &[u8] = &fetched.records;
        let mut any = false;
        // Remote (read_committed): batches of aborted transactions are
        // passed over like markers.
        let mut aborted = (!fetched.aborted.is_empty())
            .then(|| strata_client::AbortedFilter::new(fetched.aborted.clone()));
        while !rest.is_empty() {
            // A fetch may end inside a batch; the next fetch starts there.
            let batch = match fetched.batch_at(rest) {
                Ok(batch) => batch,
                Err(_) if any => break,
                Err(error) => {
                    return Err(RuntimeError::UnreadableBatch {
                        topic,
                        partition,
                        offset: next,
                        error: Unreadable::batch(error),
                    });
                }
            };
            rest = &rest[batch.size_bytes()..];
            any = true;
            let header = batch.header();
            if let Some(filter) = &mut aborted
                && !filter.visible(&batch)
                && !header.is_control()
            {
                self.pass_over(at, header);
                continue;
            }
            self.process_batch(at, &batch).await?;
            self.after_run().await?;
        }
        Ok(any)
    }

    /// After a batch (or a run of one input's records): the processing-time
    /// timers due, the commit if due, and the shipping of the one before
    /// once it landed.
    pub(super) async fn after_run(&mut self) -> Result<(), RuntimeError> {
        if self.crashed() {
            return Err(RuntimeError::Crashed);
        }
        if self.state.has_timers() {
            self.fire_timers(TimeDomain::ProcessingTime).await?;
        }
        if self.pending.due(&self.setup.config) {
            self.commit().await?;
        }
        if self.state.commit_landed() {
            self.settle().await?;
        }
        Ok(())
    }

    pub(super) async fn process_batch(
        &mut self,
        at: usize,
        batch: &RecordBatch<'_>,
    ) -> Result<(), RuntimeError> {
        let header = *batch.header();
        let started = (Instant::now(), self.in_commits);
        let input_next = self.inputs[at].next;
        // A target is a hard stop: nothing at or past it is processed (a
        // rebuild must reach the live task's offsets exactly).
        let limit = self.target_of(at);
        if header.next_offset() <= input_next || input_next >= limit {
            return Ok(());
        }
        self.pending.bytes += batch.size_bytes() as u64;
        self.pending.moved = true;
        if header.is_control() {
            self.inputs[at].next = header.next_offset().min(limit.max(input_next));
            return Ok(());
        }
        let topic = Arc::clone(&self.inputs[at].topic);
        let unreadable = |error: Unreadable| RuntimeError::UnreadableBatch {
            topic: topic.to_string(),
            partition: self.setup.partition,
            offset: header.base_offset,
            error,
        };
        let records = batch
            .records(DECOMPRESSED_BYTES_MAX)
            .map_err(|e| unreadable(Unreadable::batch(e)))?;
        // One position for the batch, updated per record (no per-record
        // reference count or header vector).
        let mut position = Position::before_records(&topic, self.setup.partition, 0);
        // Decoded first, so that a record's store entries can be asked for
        // a few records ahead of its turn.
        // (Sized first: collected through a `Result`, the buffer would grow
        // by doubling, copying the records each time.)
        let mut decoded = Vec::with_capacity(records.len_bound().min(RECORDS_SIZED_MAX));
        for record in records.iter() {
            decoded.push(record.map_err(|e| unreadable(Unreadable::record(e)))?);
        }
        let records = decoded;
        // An async processor's lookups for the records to process, before
        // the first is applied (none for the others).
        let offsets = self.inputs[at].next..limit;
        if let Some(prepare) = self.processor.prepare(&records, &position, offsets) {
            prepare.await;
        }
        self.prefetch.review(&mut self.state, records.len());
        if self.prefetch.is_active() {
            self.prefetch.restart();
            for record in records.iter().take(PREFETCH_AHEAD) {
                let key = record.key.unwrap_or_default();
                self.prefetch.ahead(&self.state, key, record.timestamp);
            }
        }
        let (mut counted, mut processed) = (0u64, 0u64);
        let mut index = 0;
        while let Some(record) = records.get(index) {
            if self.prefetch.is_active() {
                match records.get(index + PREFETCH_AHEAD) {
                    Some(ahead) => {
                        let key = ahead.key.unwrap_or_default();
                        self.prefetch.ahead(&self.state, key, ahead.timestamp);
                    }
                    None => self.prefetch.coast(&self.state),
                }
            }
            if record.offset < self.inputs[at].next {
                index += 1;
                continue;
            }
            if record.offset >= limit {
                break;
            }
            // A run of records in one call when nothing can be due between
            // them; else this one alone.
            let applied = match self.run_room() {
                Some(room) => {
                    // Offsets rising, below the target: a record at or
                    // below the one before it ends the run (and is passed
                    // over next, as it would be one at a time).
                    let rest = &records[index..];
                    let mut last = self.inputs[at].next - 1;
                    let run = rest.iter().take(room).take_while(|r| {
                        let rising = last < r.offset && r.offset < limit;
                        last = r.offset;
                        rising
                    });
                    let run = run.count();
                    self.apply_run(at, (&records, index..index + run), &mut position)?;
                    run
                }
                None => {
                    self.apply(at, record, &mut position)?;
                    1
                }
            };
            index += applied;
            self.inputs[at].next = records[index - 1].offset + 1;
            counted += applied as u64;
            processed += applied as u64;
            // Checked here, without a future per record; most records need
            // nothing after them.
            if self.due_after_record() {
                self.after_record(&mut counted).await?;
            }
        }
        self.count_progress(counted);
        let past_batch = header.next_offset().min(limit);
        self.inputs[at].next = self.inputs[at].next.max(past_batch);
        if self.setup.config.metrics {
            let nanos = self.processing_nanos(started);
            let next = self.inputs[at].next;
            (self.metrics).processed(at, processed, nanos, next, header.max_timestamp);
            let key_at = |at: usize| records[at].key;
            let sampler = &mut self.key_sampler;
            (self.metrics).count_sampled(sampler, records.len(), key_at, header.max_timestamp);
        }
        Ok(())
    }

    /// Runs the processor on `record` of input `at`, at `position` (whose
    /// topic is the input's): its writes and emits go to the run, and the
    /// stream time moves up to its timestamp. The caller moves the input's
    /// position past it.
    #[inline]
    pub(super) fn apply(
        &mut self,
        at: usize,
        record: &Record<'_>,
        position: &mut Position,
    ) -> Result<(), RuntimeError> {
        debug_assert!(
            record.offset >= self.inputs[at].next || self.setup.letters.is_some(),
            "records are processed in offset order, each once (a dead letter's, again)"
        );
        position.enter(record);
        // A record the processor failed on earlier in this run, diverted
        // under its policy (see `dead_letters`).
        if let Some(failure) = self.failures.noted(at, record.offset) {
            let failure = failure.clone();
            return self.divert(at, record, position, &failure);
        }
        let mut ctx = context(
            (&mut self.state, &self.metrics, &mut self.write_sampler),
            &self.setup,
            position,
        );
        if let Err(error) = self.processor.process(RawRecord::of(record), &mut ctx) {
            return Err(self.failed(at, record.offset, error));
        }
        self.pending.records += 1;
        self.checkpointed.1 += 1;
        self.pending.moved = true;
        self.state.advance_stream_time(record.timestamp);
        Ok(())
    }

    /// Runs the processor on `run`, records of input `at` at or past its
    /// position, in one call (see [`Task::run_room`]), `position` moved
    /// along them, asking for the store entries of the batch's records
    /// ahead of each as it goes. The caller moves the input's position past
    /// them.
    fn apply_run(
        &mut self,
        at: usize,
        (batch, run): (&[Record<'_>], Range<usize>),
        position: &mut Position,
    ) -> Result<(), RuntimeError> {
        let start = run.start;
        let run = &batch[run];
        debug_assert!(!self.state.has_timers(), "no stream time to move in a run");
        debug_assert!(
            run.first()
                .is_some_and(|r| r.offset >= self.inputs[at].next)
                && run.windows(2).all(|w| w[0].offset < w[1].offset),
            "a run's offsets rise from the input's position"
        );
        let mut ctx = context(
            (&mut self.state, &self.metrics, &mut self.write_sampler),
            &self.setup,
            position,
        );
        let prefetching = self.prefetch.is_active();
        let prefetch = &mut self.prefetch;
        // Before the run's record `i`, as the task does before a record
        // it applies alone: the entries of the record PREFETCH_AHEAD on.
        let mut ahead = |i: usize, state: &TaskState| match batch.get(start + i + PREFETCH_AHEAD) {
            Some(record) => {
                prefetch.ahead(state, record.key.unwrap_or_default(), record.timestamp);
            }
            None => prefetch.coast(state),
        };
        let ahead: Option<&mut Ahead<'_>> = prefetching.then_some(&mut ahead);
        let outcome = self.processor.process_run(run, &mut ctx, ahead);
        let done = outcome
            .as_ref()
            .map_or_else(|halted| halted.at, |()| run.len());
        self.pending.records += done as u64;
        self.checkpointed.1 += done as u64;
        self.pending.moved |= done > 0;
        match outcome {
            Ok(()) => Ok(()),
            Err(Halted { at: failed, error }) => {
                debug_assert!(failed < run.len(), "halted on one of the run's records");
                Err(self.failed(at, run[failed].offset, error))
            }
        }
    }

    /// How many records may go to the processor in one run, with nothing
    /// due between them: the records left before the run is full, unless
    /// something may be due after any record (a timer store's stream
    /// time, a record to divert, or a remote outbox that may fill). None:
    /// a record at a time.
    #[inline]
    fn run_room(&self) -> Option<usize> {
        let remote = matches!(self.setup.log, LogAccess::Remote(_));
        let one_at_a_time = self.state.has_timers()
            || self.failures.any_noted()
            || self.pending.full
            || (remote && !self.setup.outputs.is_empty());
        let room = (self.setup.config.commit.records).saturating_sub(self.pending.records);
        match one_at_a_time || room < 2 {
            true => None,
            false => Some(usize::try_from(room).unwrap_or(usize::MAX)),
        }
    }

    /// What the processor's `error` on record `offset` of input `at`
    /// makes of the task: the run discarded, the record noted for its
    /// policy if it diverts it.
    fn failed(&mut self, at: usize, offset: i64, error: ProcessError) -> RuntimeError {
        self.state.discard();
        if self.failures.diverts()
            && let Some(failure) = Failure::of(&error)
        {
            self.failures.failed = Some(Failed {
                input: at,
                offset,
                failure,
            });
        }
        RuntimeError::Processor {
            processor: self.setup.spec.name.clone(),
            topic: self.inputs[at].topic.to_string(),
            partition: self.setup.partition,
            offset,
            error,
        }
    }

    /// Nanoseconds since `started` (an instant and the time in commits
    /// then), the commits made meanwhile left out.
    pub(super) fn processing_nanos(&self, (at, in_commits): (Instant, Duration)) -> u64 {
        let spent = at.elapsed().saturating_sub(self.in_commits - in_commits);
        u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether [`Task::after_record`] has anything to do: an event-time
    /// timer due at the stream time, or a full run.
    #[inline]
    pub(super) fn due_after_record(&self) -> bool {
        let timer_due = (self.state.stream_time())
            .is_some_and(|now| self.state.timer_due(TimeDomain::EventTime, now));
        timer_due || self.commit_full()
    }

    /// After a record (its input's position moved past it, counted in
    /// `counted`): the event-time timers it brought the stream time to,
    /// fired before the next record, and a commit when the run is full
    /// (`counted` then goes to the progress).
    pub(super) async fn after_record(&mut self, counted: &mut u64) -> Result<(), RuntimeError> {
        if let Some(now) = self.state.stream_time()
            && self.state.timer_due(TimeDomain::EventTime, now)
        {
            self.fire_timers(TimeDomain::EventTime).await?;
        }
        if self.commit_full() {
            self.count_progress(std::mem::take(counted));
            if self.crashed() {
                return Err(RuntimeError::Crashed);
            }
            self.commit().await?;
        }
        Ok(())
    }

    /// Whether the run must be committed before the next record: it holds
    /// the records a commit takes at most, or (remote) as many batches as
    /// the outbox may ship at once.
    #[inline]
    pub(super) fn commit_full(&self) -> bool {
        // Remote only: the cluster may be Kafka, which recognises a resend
        // among a producer's last 5 batches per partition; the embedded
        // log recognises any earlier batch.
        let remote = matches!(self.setup.log, LogAccess::Remote(_));
        self.pending.records >= self.setup.config.commit.records
            || self.pending.full
            || (remote && self.state.outbox_full())
    }

    /// Where input `at` must stop: its target offset, if it has one.
    fn target_of(&self, at: usize) -> i64 {
        self.setup
            .targets
            .borrow()
            .as_ref()
            .and_then(|t| t.get(&*self.inputs[at].topic).copied())
            .unwrap_or(i64::MAX)
    }

    /// Moves input `at` past a batch the processor does not see (an aborted
    /// transaction's), as far as the target allows.
    fn pass_over(&mut self, at: usize, header: &strata_record::BatchHeader) {
        let limit = self.target_of(at);
        let next = self.inputs[at].next;
        if header.next_offset() > next && next < limit {
            self.inputs[at].next = header.next_offset().min(limit);
            self.pending.moved = true;
        }
    }

    /// Runs the processor's `init` or `close`.
    pub(super) async fn lifecycle(&mut self, which: &str) -> Result<(), RuntimeError> {
        let first = &self.inputs[0];
        let now = self.setup.clock.now_ms();
        let mut position = Position::before_records(&first.topic, self.setup.partition, now);
        let mut ctx = context(
            (&mut self.state, &self.metrics, &mut self.write_sampler),
            &self.setup,
            &mut position,
        );
        let result = if which == "init" {
            self.processor.init(&mut ctx)
        } else {
            self.processor.close(&mut ctx)
        };
        result.map_err(|error| {
            self.state.discard();
            RuntimeError::Processor {
                processor: self.setup.spec.name.clone(),
                topic: first.topic.to_string(),
                partition: self.setup.partition,
                offset: -1,
                error,
            }
        })
    }
}

/// What the processor sees of the task for one record (or `init`/`close`).
pub(super) fn context<'t>(
    (state, metrics, written): (&'t mut TaskState, &'t TaskMetrics, &'t mut KeySampler),
    setup: &'t TaskSetup,
    position: &'t mut Position,
) -> Context<'t> {
    Context {
        state,
        stores: &setup.spec.stores,
        outputs: &setup.outputs,
        position,
        processor: &setup.spec.name,
        metrics,
        written: setup.config.metrics.then_some(written),
        emits: setup.emits,
        origin: Origin {
            app: &setup.app,
            version: &setup.version,
            processor: &setup.spec.name,
            inputs: &setup.spec.inputs,
            log_topics: &setup.log_topics,
        },
    }
}
