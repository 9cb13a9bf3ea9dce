//! A task of `dlq replay`: its processor's dead letters whose records were
//! at the task's partition, each run again through the processor as it is
//! now, at the record's own place (topic, offset, timestamp, headers), and
//! marked replayed in the same commit as what the processor did for it.
//!
//! The protocol, for the task of partition P of a processor whose letters
//! go to partition P mod N of its dead-letter topic:
//!
//! 1. The task starts as a live one does: its state opened (remote,
//!    resumed against the cluster's last commit, its changelogs restored
//!    if need be) and what its outbox still held shipped. Every mark a
//!    commit made is in the log from here on.
//! 2. It reads partition P mod N of the dead-letter topic and of the marks
//!    topic (`letter` has both formats), and those where the job found
//!    letters of P before (written when the topic had other partitions),
//!    each whole: remote, read_committed, an open transaction (a killed
//!    task's) is waited for until the cluster ends it, never read past (a
//!    stop meanwhile ends the task with nothing replayed).
//!    The letters to replay: the processor's, whose record was at
//!    partition P of one of its inputs, that the job's filter admits, with
//!    no mark; in letter order.
//! 3. Each letter's record goes through the processor as `apply` runs a
//!    fetched one (a one-record batch at the record's offset, so an async
//!    processor prepares it too); its mark (`processed`) goes to the marks
//!    topic in the same run.
//! 4. The run commits as a live one does (every `commit.records`, or the
//!    commit interval), with the inputs' positions unchanged: store writes,
//!    emits and marks in one commit.
//! 5. A letter that fails again is diverted as a live task diverts a
//!    record (`dead_letters`: the run discarded and processed again from
//!    its first letter, that letter diverted: a new dead letter, the same
//!    record from the same place), with the mark `failed`. The failure is
//!    kept by letter for the whole job: a commit in between does not make
//!    the processor meet it again.
//!
//! Crash windows: killed before a commit lands, neither its effects nor its
//! marks are there, and the next job replays those letters; embedded, a
//! commit that landed but was not shipped is shipped by the next job's
//! step 1, before it reads the marks; remote, the next job's transaction
//! ends the unfinished one first (committed with all its marks, or aborted
//! with all its effects).
//!
//! Timers are not fired here: the live run fires what the letters set.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use strata_record::{BatchBuilder, Compression, Header, NewRecord, RecordBatch};

use crate::error::{RuntimeError, Unreadable};
use crate::letter::{
    self, FAILED, Letter, LetterFilter, MARK_ERROR, MARK_JOB, PROCESSED, mark_key_text,
};
use crate::position::Position;
use crate::topic_read::fetch_partition_settled;

use super::dead_letters::Failure;
use super::transaction::TRANSACTION_TIMEOUT_MS;
use super::{DECOMPRESSED_BYTES_MAX, Task};

/// How long a read of the letters or marks waits for a transaction still
/// open (a killed task's) to end: past the time the cluster takes to abort
/// one of the runtime's.
const SETTLE_WAIT: Duration = Duration::from_millis(TRANSACTION_TIMEOUT_MS as u64 + 30_000);

/// A `dlq replay`'s part in a task.
#[derive(Debug, Clone)]
pub(crate) struct LetterJob {
    pub filter: LetterFilter,
    /// The marks topic, as the log names it.
    pub marks: String,
    /// The job's name, in each mark it leaves.
    pub job: String,
    /// Per task partition, the dead-letter partitions the job found its
    /// letters in (beside partition P mod N, which each task reads).
    pub found_in: BTreeMap<i32, BTreeSet<i32>>,
}

/// A letter to replay: its record, at input `input`.
struct ToReplay {
    input: usize,
    letter: Letter,
}

impl Task {
    /// Replays the task's letters (steps 2 to 5), until done or told to
    /// stop.
    pub(super) async fn replay_letters(&mut self, job: &LetterJob) -> Result<(), RuntimeError> {
        let letters = self.letters_to_replay(job).await?;
        tracing::info!(task = %self.setup.name(), "{} dead letters to replay", letters.len());
        let progress = &self.setup.progress;
        progress
            .total
            .fetch_add(letters.len() as u64, Ordering::Relaxed);
        self.counted = true;
        // The first letter of the run in progress: where a failure
        // rewinds to. The letters that failed again, by letter.
        let (mut next, mut run_first) = (0, 0);
        let mut failed: HashMap<(i32, i64), Failure> = HashMap::new();
        while next < letters.len() {
            // The other tasks of this thread get their turn.
            tokio::task::yield_now().await;
            if self.crashed() {
                return Err(RuntimeError::Crashed);
            }
            if self.setup.stop.load(Ordering::Relaxed) {
                break;
            }
            let replay = &letters[next];
            let (at, offset) = (replay.input, replay.letter.origin.2);
            let letter_id = (replay.letter.partition, replay.letter.offset);
            let failure = failed.get(&letter_id).cloned();
            if let Some(failure) = &failure {
                self.failures.note_for_turn(at, offset, failure.clone());
            }
            let replayed = self.replay_letter(job, replay, failure.as_ref()).await;
            self.failures.forget(at, offset);
            match replayed {
                Ok(()) => next += 1,
                Err(error) => {
                    let failure = (self.failures.failed.as_ref()).map(|f| f.failure.clone());
                    self.divert_failure(error).await?;
                    self.failures.forget(at, offset);
                    failed.extend(failure.map(|failure| (letter_id, failure)));
                    next = run_first;
                    continue;
                }
            }
            self.count_progress(1);
            if self.commit_full() || self.pending.due(&self.setup.config) {
                if self.crashed() {
                    return Err(RuntimeError::Crashed);
                }
                self.commit().await?;
                run_first = next;
            }
            if self.state.commit_landed() {
                self.settle().await?;
            }
        }
        Ok(())
    }

    /// Step 2: the letters of this task to replay, in letter order.
    async fn letters_to_replay(&self, job: &LetterJob) -> Result<Vec<ToReplay>, RuntimeError> {
        let output = self.failures.dead_letter_output().ok_or_else(|| {
            RuntimeError::Config(format!(
                "processor {:?} sends no failing records to a dead-letter topic: nothing to replay",
                self.setup.spec.name
            ))
        })?;
        let dead_letters = &self.setup.outputs[output];
        let found_in = job.found_in.get(&self.setup.partition);
        let mut partitions = found_in.cloned().unwrap_or_default();
        partitions.insert(self.setup.partition.rem_euclid(dead_letters.partitions));
        let log = &self.setup.log;
        let mut letters = Vec::new();
        let stop = &self.setup.stop;
        for partition in partitions {
            let read = |topic| fetch_partition_settled(log, (topic, partition), SETTLE_WAIT, stop);
            // Told to stop while waiting out a transaction: nothing to do.
            let Some(marks) = read(&job.marks).await? else {
                return Ok(Vec::new());
            };
            let marks = letter::marks(marks);
            let Some(records) = read(&dead_letters.log_topic).await? else {
                return Ok(Vec::new());
            };
            for record in records {
                let letter = Letter::read(record);
                let input = (self.inputs.iter()).position(|i| i.log_topic == letter.origin.0);
                let Some(input) = input else { continue };
                if letter.origin.1 != self.setup.partition
                    || letter.processor != self.setup.spec.name
                    || letter.headers.is_none()
                    || marks.contains_key(&letter.mark_key())
                    || !job.filter.admits(&letter)
                {
                    continue;
                }
                letters.push(ToReplay { input, letter });
            }
        }
        Ok(letters)
    }

    /// Step 3 for one letter: its record through the processor (or
    /// diverted, when it failed before: `failed`, noted for its turn) and
    /// its mark.
    async fn replay_letter(
        &mut self,
        job: &LetterJob,
        replay: &ToReplay,
        failed: Option<&Failure>,
    ) -> Result<(), RuntimeError> {
        let (at, letter) = (replay.input, &replay.letter);
        let batch = one_record_batch(letter)?;
        let unreadable = |error: Unreadable| RuntimeError::UnreadableBatch {
            topic: letter.origin.0.clone(),
            partition: letter.origin.1,
            offset: letter.origin.2,
            error,
        };
        let batch =
            RecordBatch::parse_and_verify(&batch).map_err(|e| unreadable(Unreadable::batch(e)))?;
        let records = (batch.records(DECOMPRESSED_BYTES_MAX))
            .map_err(|e| unreadable(Unreadable::batch(e)))?;
        let records = (records.iter())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unreadable(Unreadable::record(e)))?;
        let topic = Arc::clone(&self.inputs[at].topic);
        let mut position = Position::before_records(&topic, self.setup.partition, 0);
        let offsets = letter.origin.2..letter.origin.2 + 1;
        if failed.is_none()
            && let Some(prepare) = self.processor.prepare(&records, &position, offsets)
        {
            prepare.await;
        }
        self.apply(at, &records[0], &mut position)?;
        let (outcome, error) = match failed {
            None => (PROCESSED, None),
            Some(failure) => (FAILED, Some(failure.error.as_str())),
        };
        self.mark(job, letter, outcome, error)
    }

    /// The mark of `letter`, in the run.
    fn mark(
        &mut self,
        job: &LetterJob,
        letter: &Letter,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), RuntimeError> {
        let key = mark_key_text(letter.mark_key());
        let mut headers = vec![Header {
            key: MARK_JOB.as_bytes(),
            value: Some(job.job.as_bytes()),
        }];
        if let Some(error) = error {
            headers.push(Header {
                key: MARK_ERROR.as_bytes(),
                value: Some(error.as_bytes()),
            });
        }
        let mark = NewRecord {
            key: Some(key.as_bytes()),
            value: Some(outcome.as_bytes()),
            timestamp: self.setup.clock.now_ms(),
            headers: &headers,
        };
        self.state.emit(&job.marks, letter.partition, mark)?;
        self.pending.moved = true;
        Ok(())
    }
}

/// `letter`'s record as a batch of one at its offset: key, value,
/// timestamp and its own headers as they were.
fn one_record_batch(letter: &Letter) -> Result<Vec<u8>, RuntimeError> {
    let own = letter.headers.as_deref().unwrap_or_default();
    let headers = Header::from_pairs(own);
    let record = NewRecord {
        key: letter.key.as_deref(),
        value: letter.value.as_deref(),
        timestamp: letter.timestamp,
        headers: &headers,
    };
    let mut builder = BatchBuilder::new(Compression::None);
    let built = builder.push(record).and_then(|()| builder.build());
    let mut batch = built.map_err(|error| RuntimeError::UnreadableBatch {
        topic: letter.origin.0.clone(),
        partition: letter.origin.1,
        offset: letter.origin.2,
        error: Unreadable::batch(error),
    })?;
    strata_record::set_base_offset(&mut batch, letter.origin.2);
    Ok(batch)
}
