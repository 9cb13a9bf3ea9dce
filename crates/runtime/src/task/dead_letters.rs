//! Records a task's processor failed on, under a policy that diverts them
//! (see `on_error`): which ones in the run in progress, how many in the
//! last minute, and the dead letter written for one.
//!
//! The protocol, for a record R at offset O of input I:
//!
//! 1. The processor fails on R: `Task::failed` discards the run in progress
//!    (store writes, emits, timers: everything since the last commit) and
//!    notes the failure.
//! 2. The task counts it against the policy's limit: one more than the
//!    limit in a minute stops the task ([`RuntimeError::TooManyFailures`]).
//! 3. The task rewinds as a restart would: each input back to where the
//!    run began, what it buffered dropped, a fresh processor (`init` run
//!    again).
//! 4. Processing the run again, at (I, O) the task diverts R instead of
//!    calling the processor: a dead letter, or nothing (skipped), and R
//!    counts as processed.
//! 5. The task commits right after R (so a later failure rewinds no
//!    further back than R): the inputs' positions past R, with the dead
//!    letter and everything else; the notes are cleared.
//!
//! Crash windows: killed anywhere before 5, nothing of the run was
//! committed, so after the restart R fails again and goes through 1–5
//! again; a run's emits are shipped only once committed, so its dead letter
//! is written exactly once. A record that fails, then succeeds when the run
//! is processed again (a processor that is not deterministic), is still
//! diverted: the decision stands for the run.
//!
//! A dead letter is R unchanged (key, value, headers), stamped with the
//! time of the failure, with these headers after R's own, each value text:
//!
//! | header | value |
//! |---|---|
//! | `strata.dlq.topic`, `strata.dlq.partition`, `strata.dlq.offset` | where R is in the log |
//! | `strata.dlq.timestamp` | R's timestamp, ms since the epoch |
//! | `strata.dlq.error` | the error's text |
//! | `strata.dlq.error.kind` | `decode` (its key or value could not be decoded) or `process` |
//! | `strata.dlq.app`, `strata.dlq.version`, `strata.dlq.processor` | who failed on it |
//!
//! It goes to the dead-letter topic's partition of the task's (modulo its
//! partition count).

use std::any::TypeId;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use strata_record::{Header, NewRecord, Record};

use crate::error::RuntimeError;
use crate::on_error::letter_headers::{
    APP, ERROR, ERROR_KIND, OFFSET, PARTITION, PROCESSOR, TIMESTAMP, TOPIC, VERSION,
};
use crate::on_error::{DeadLetterRecord, OnError};
use crate::position::Position;
use crate::process_error::{ProcessError, UndecodableInput};
use crate::state::StateError;
use strata_record::codec::CodecError;

use super::{Pending, Task, TaskSetup};

/// The window the policy's limit counts failures in.
const LIMIT_WINDOW: Duration = Duration::from_secs(60);

/// Why the processor failed on a record.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub error: String,
    /// `decode` or `process`.
    pub kind: &'static str,
}

impl Failure {
    /// The failure `error` is, or None when it is the task's own (its
    /// state could not be read or written, the schema registry could not
    /// be asked or refused the app): no record is to blame, and the task
    /// stops.
    pub fn of(error: &ProcessError) -> Option<Self> {
        if error.downcast_ref::<StateError>().is_some() {
            return None;
        }
        let undecodable = error.downcast_ref::<UndecodableInput>();
        let codec = (undecodable.map(|u| &u.error)).or_else(|| error.downcast_ref::<CodecError>());
        if codec.is_some_and(|codec| codec.blameless) {
            return None;
        }
        let kind = match undecodable {
            Some(_) => "decode",
            None => "process",
        };
        Some(Self {
            error: error.to_string(),
            kind,
        })
    }
}

/// A failure `Task::failed` noted, for the task's loop to take up.
pub(super) struct Failed {
    pub input: usize,
    pub offset: i64,
    pub failure: Failure,
}

/// The task's failures under its processor's policy.
pub(super) struct Failures {
    policy: OnError,
    /// In the run in progress: (input, offset) → why.
    noted: HashMap<(usize, i64), Failure>,
    /// When each failure of the last [`LIMIT_WINDOW`] was noted.
    recent: VecDeque<Instant>,
    /// The one `Task::failed` noted last, not taken up yet.
    pub failed: Option<Failed>,
    /// The output the dead letters go to (an index into the setup's).
    dead_letters: Option<usize>,
}

impl Failures {
    pub fn new(setup: &TaskSetup) -> Self {
        let dead_letters = (setup.outputs.iter())
            .position(|o| o.spec.key_type == TypeId::of::<DeadLetterRecord>());
        Self {
            policy: setup.spec.on_error.clone(),
            noted: HashMap::new(),
            recent: VecDeque::new(),
            failed: None,
            dead_letters,
        }
    }

    /// Whether failures are diverted rather than stopping the task.
    #[inline]
    pub fn diverts(&self) -> bool {
        self.policy != OnError::Fail
    }

    /// The output the dead letters go to, if any (an index into the
    /// setup's).
    pub fn dead_letter_output(&self) -> Option<usize> {
        self.dead_letters
    }

    /// Whether any record of this run is to be diverted.
    #[inline]
    pub fn any_noted(&self) -> bool {
        !self.noted.is_empty()
    }

    /// Why record `offset` of input `input` failed in this run, if it did.
    #[inline]
    pub fn noted(&self, input: usize, offset: i64) -> Option<&Failure> {
        match self.noted.is_empty() {
            true => None,
            false => self.noted.get(&(input, offset)),
        }
    }

    /// Notes that record `offset` of input `input` failed with `failure`,
    /// to be diverted when the run reaches it (a replay of dead letters
    /// keeps its failures by letter, and notes each one for its turn).
    pub fn note_for_turn(&mut self, input: usize, offset: i64, failure: Failure) {
        self.noted.insert((input, offset), failure);
    }

    /// Forgets the failure of record `offset` of input `input`, if noted.
    pub fn forget(&mut self, input: usize, offset: i64) {
        self.noted.remove(&(input, offset));
    }

    /// A run was committed, the next one beginning at `run_start`: the
    /// failures behind it are forgotten, those ahead kept (a commit may
    /// come between the rewind and the failed record: the interval's, a
    /// long sweep of timers').
    pub fn committed(&mut self, run_start: &[i64]) {
        if !self.noted.is_empty() {
            self.noted
                .retain(|(input, offset), _| *offset >= run_start[*input]);
        }
    }

    /// Notes `failed` for the run to be processed again; an error when it
    /// is one more than the policy allows in a minute (`limited`: not in a
    /// rebuild, which goes through its inputs' failures of months in
    /// minutes; the live task diverted them already).
    fn note(&mut self, failed: Failed, limited: bool, at: String) -> Result<(), RuntimeError> {
        let now = Instant::now();
        while (self.recent.front()).is_some_and(|t| now.duration_since(*t) > LIMIT_WINDOW) {
            self.recent.pop_front();
        }
        let limit = self.policy.per_minute_max();
        if limited && self.recent.len() >= limit as usize {
            return Err(RuntimeError::TooManyFailures {
                at,
                limit,
                last: failed.failure.error,
            });
        }
        self.recent.push_back(now);
        self.noted
            .insert((failed.input, failed.offset), failed.failure);
        Ok(())
    }
}

impl Task {
    /// Takes up the failure `Task::failed` noted: counted against the limit, then
    /// the run processed again from its start with the record diverted
    /// (steps 2 and 3 of the protocol). `error` is what the task answers
    /// when nothing was noted.
    pub(super) async fn divert_failure(&mut self, error: RuntimeError) -> Result<(), RuntimeError> {
        let Some(failed) = self.failures.failed.take() else {
            return Err(error);
        };
        if !matches!(error, RuntimeError::Processor { .. }) {
            return Err(error);
        }
        // The run before, committed in flight, lands (or its failure
        // stops the task) and ships before the rewind.
        self.settle().await?;
        let at = format!(
            "{}/{} at offset {}",
            self.inputs[failed.input].log_topic, self.setup.partition, failed.offset
        );
        let (kind, error_text) = (failed.failure.kind, failed.failure.error.clone());
        // Not limited in a rebuild (the live task diverted those records
        // already) nor in a replay of dead letters (each failed before).
        let limited = self.setup.emits && self.setup.letters.is_none();
        self.failures.note(failed, limited, at.clone())?;
        let action = self.failures.policy.action();
        self.metrics.failed(kind, action);
        let done = match self.failures.dead_letters {
            Some(output) if self.setup.emits => {
                format!("sent to {}", self.setup.outputs[output].log_topic)
            }
            _ => "skipped".to_string(),
        };
        tracing::warn!(task = %self.setup.name(), "{at} failed ({kind}: {error_text}): {done}");
        self.rewind().await
    }

    /// Back to where the run began, as a restart would (step 3): the
    /// inputs' positions, nothing buffered, a fresh processor.
    async fn rewind(&mut self) -> Result<(), RuntimeError> {
        for (input, start) in self.inputs.iter_mut().zip(&self.run_start) {
            input.next = *start;
            input.drop_buffered();
        }
        // The run's records are counted again as they are processed again.
        let (records, done) = std::mem::take(&mut self.run_progress);
        let progress = &self.setup.progress;
        progress.records.fetch_sub(records, Ordering::Relaxed);
        progress.done.fetch_sub(done, Ordering::Relaxed);
        self.checkpointed.1 = self.checkpointed.1.saturating_sub(self.pending.records);
        self.pending = Pending::new();
        let spec = &self.setup.spec;
        self.processor = (spec.factory)(spec.key_codec, spec.value_codec);
        self.lifecycle("init").await?;
        self.pending.moved = true;
        Ok(())
    }

    /// Diverts `record` of input `at` (step 4): its dead letter, or
    /// nothing; counted as processed either way. The letter is stamped
    /// with the time of the failure, so that retention keeps it as long as
    /// a fresh record (the record's own time is in its headers).
    pub(super) fn divert(
        &mut self,
        at: usize,
        record: &Record<'_>,
        position: &Position,
        failure: &Failure,
    ) -> Result<(), RuntimeError> {
        self.processor.pass_over(&position.topic, record.offset);
        if let Some(output) = self.failures.dead_letters.filter(|_| self.setup.emits) {
            let output = &self.setup.outputs[output];
            let partition = self.setup.partition.rem_euclid(output.partitions);
            let origin = [
                (TOPIC, self.inputs[at].log_topic.clone()),
                (PARTITION, self.setup.partition.to_string()),
                (OFFSET, record.offset.to_string()),
                (TIMESTAMP, record.timestamp.to_string()),
                (ERROR, failure.error.clone()),
                (ERROR_KIND, failure.kind.to_string()),
                (APP, self.setup.app.clone()),
                (VERSION, self.setup.version.clone()),
                (PROCESSOR, self.setup.spec.name.clone()),
            ];
            let mut headers = Header::from_pairs(&position.headers);
            headers.extend(origin.iter().map(|(name, value)| Header {
                key: name.as_bytes(),
                value: Some(value.as_bytes()),
            }));
            let letter = NewRecord {
                key: record.key,
                value: record.value,
                timestamp: self.setup.clock.now_ms(),
                headers: &headers,
            };
            self.state.emit(&output.log_topic, partition, letter)?;
        }
        self.pending.records += 1;
        self.pending.moved = true;
        // Committed right after: a later failure in the same batch or run
        // rewinds no further back than this record.
        self.pending.full = true;
        Ok(())
    }
}
