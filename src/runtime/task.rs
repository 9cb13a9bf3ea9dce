//! One task: one processor on partition i of each of its input topics.
//!
//! The loop (DESIGN.md, "The exactly-once commit protocol"): fetch whole
//! batches from the task's input offsets → call the processor for each
//! record, its writes and emits buffered in the run → when the commit
//! interval is reached, write ONE RocksDB batch {state writes, outbox
//! batches, input offsets}, on the state's writer thread while the next run
//! goes on → once that write has landed (seen between batches, or at the
//! next commit, which waits for it), append the outbox batches to the log
//! with the task's producer id and their fixed sequences → drop the
//! shipped entries.
//! On start the task ships whatever its outbox still holds: batches the log
//! already has are recognised by their sequences and not written twice.
//!
//! The task runs on a blocking thread (RocksDB calls block) and drives its
//! async parts (the processor, remote fetches) with the runtime's handle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::record::RecordBatch;

use super::context::{Context, Position};
use super::erased::{ErasedProcessor, RawRecord};
use super::error::RuntimeError;
use super::log_access::LogAccess;
use super::runner::StartAt;
use super::spec::TopicOutput;
use super::state::TaskState;
use super::swap::{self, Handover, encode_offsets, write_whole};
use super::topology::{ProcessorSpec, TaskConfig};

/// Largest decompressed records section of one input batch.
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
/// How many records ahead of the one processed the task asks for their
/// keys' store entries (see [`Prefetch`]).
const PREFETCH_AHEAD: usize = 8;
/// Pause of an embedded task with nothing to read.
const IDLE_WAIT: Duration = Duration::from_millis(10);

/// End offsets, per input topic, at which a task running `--until-end`
/// stops.
pub(crate) type Targets = BTreeMap<String, i64>;

/// Counters a running task shares with the app.
#[derive(Default)]
pub(crate) struct TaskProgress {
    pub records: AtomicU64,
    /// Records the tasks that know their targets have to process, from
    /// where they stood when they learned them.
    pub total: AtomicU64,
}

/// A task's checkpoint directory and the version's request file.
#[derive(Clone)]
pub(crate) struct Checkpoints {
    pub dir: PathBuf,
    pub request: PathBuf,
}

pub(crate) struct TaskSetup {
    pub spec: ProcessorSpec,
    pub partition: i32,
    pub dir: PathBuf,
    /// Where the task's checkpoints go and where it is asked for one; none
    /// in a rebuild.
    pub checkpoints: Option<Checkpoints>,
    /// The inputs' names in the log, in the order of `spec.inputs`.
    pub log_topics: Vec<String>,
    /// Where each input starts when the task has no offset for it.
    pub start: Vec<StartAt>,
    /// Whether emitted records go to the derived topics (not in a rebuild).
    pub emits: bool,
    /// Where a rebuild of this task's state would be built: the task looks
    /// there for one ready to take over (see `swap`). None in a rebuild.
    pub rebuild: Option<PathBuf>,
    pub outputs: Vec<TopicOutput>,
    pub config: TaskConfig,
    pub log: LogAccess,
    pub stop: Arc<AtomicBool>,
    /// Set (for `--until-end`) once the ends of every input are known.
    pub targets: watch::Receiver<Option<Targets>>,
    pub progress: Arc<TaskProgress>,
}

impl TaskSetup {
    pub fn name(&self) -> String {
        format!("{}/{}", self.spec.name, self.partition)
    }
}

/// An input topic's position in this task.
struct Input {
    /// As the processor names it.
    topic: Arc<str>,
    /// Its name in the log.
    log_topic: String,
    next: i64,
}

/// What the current run holds since its last commit.
struct Pending {
    records: u64,
    bytes: u64,
    since: Instant,
    /// Whether anything moved (records, or offsets past skipped batches).
    moved: bool,
}

impl Pending {
    fn new() -> Self {
        Self {
            records: 0,
            bytes: 0,
            since: Instant::now(),
            moved: false,
        }
    }

    fn due(&self, config: &TaskConfig) -> bool {
        self.moved
            && (self.records >= config.commit.records
                || self.bytes >= config.commit.bytes
                || self.since.elapsed() >= config.commit.interval)
    }
}

struct Task {
    setup: TaskSetup,
    state: TaskState,
    inputs: Vec<Input>,
    processor: Box<dyn ErasedProcessor>,
    prefetch: Prefetch,
    pending: Pending,
    /// Since the last checkpoint: when, and records processed after it.
    checkpointed: (Instant, u64),
    /// The checkpoint request last answered or found answered (its file's
    /// modification time).
    request_seen: Option<std::time::SystemTime>,
    /// When the task next looks at the checkpoint request file.
    request_check_at: Instant,
    /// When the task next looks for a rebuild ready to take over.
    handover_check_at: Instant,
    /// Whether the task's records to go are in the progress total.
    counted: bool,
    /// Time spent fetching and processing (not idle) since the last
    /// commit, and the smoothed rate it gave so far.
    busy: Duration,
    rate: Option<f64>,
    /// When the fetch in progress started (or the last commit inside it).
    fetching_since: Option<Instant>,
}

/// Why the loop returned.
enum Pumped {
    /// Told to stop, or reached its targets.
    Stopped,
    /// A rebuilt state is at the task's offsets: swap it in.
    Swap,
}

/// How often a task looks at the checkpoint request file (at commits and
/// while idle).
const REQUEST_CHECK_EVERY: Duration = Duration::from_millis(100);
/// How often a task looks for a rebuild ready to take over.
const HANDOVER_CHECK_EVERY: Duration = Duration::from_millis(100);
/// How long a task waits, its input held, for a rebuild to reach it.
const HOLD_MAX: Duration = Duration::from_secs(60);

/// Runs the task until it is told to stop, it reaches its targets, or it
/// fails. A clean end commits and ships everything first.
pub(crate) async fn run(setup: TaskSetup) -> Result<(), RuntimeError> {
    let name = setup.name();
    std::fs::create_dir_all(&setup.dir).map_err(|error| RuntimeError::Io {
        context: format!("creating {}", setup.dir.display()),
        error,
    })?;
    if let Some(rebuilt) = &setup.rebuild {
        swap::recover(&setup.dir, rebuilt)?;
    }
    let stores: Vec<String> = setup.spec.stores.iter().map(|s| s.name.clone()).collect();
    let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
    let mut state = TaskState::open(&setup.dir, &stores, setup.config.sync)?;
    if setup.emits && !setup.outputs.is_empty() && state.producer().is_none() {
        let (id, epoch) = setup.log.new_producer().await?;
        state.set_producer(id, epoch)?;
    }
    let mut inputs = Vec::new();
    for (at, topic) in setup.spec.inputs.iter().enumerate() {
        let log_topic = setup.log_topics[at].clone();
        let next = match state.input_offset(topic) {
            Some(next) => next,
            None => {
                let first = first_offset(&setup, &log_topic, setup.start[at]).await?;
                state.note_start(topic, first);
                first
            }
        };
        inputs.push(Input {
            topic: Arc::from(topic.as_str()),
            log_topic,
            next,
        });
    }
    let processor = (setup.spec.factory)(setup.spec.key_codec, setup.spec.value_codec);
    let rate = state.rate()?;
    let mut task = Task {
        prefetch: Prefetch::new(&setup.spec),
        setup,
        state,
        inputs,
        processor,
        pending: Pending::new(),
        checkpointed: (Instant::now(), 0),
        request_seen: None,
        request_check_at: Instant::now(),
        handover_check_at: Instant::now(),
        counted: false,
        busy: Duration::ZERO,
        rate,
        fetching_since: None,
    };
    task.ship().await?;
    tracing::debug!(task = %name, "started");
    task.lifecycle("init").await?;
    task.pending.moved = true;
    while let Pumped::Swap = task.pump().await? {
        let rebuilt = task.setup.rebuild.clone().expect("only a live task swaps");
        let sync = task.setup.config.sync;
        let files = Handover::beside(&rebuilt);
        match swap::swap_in(&task.setup.dir, task.state, &rebuilt, &stores, sync) {
            Ok(state) => {
                task.state = state;
                files.report(swap::SWAPPED)?;
                tracing::info!(task = %name, "the rebuilt state took over");
            }
            Err(error) => {
                // Whatever happened, the live state is whole again (the
                // old one, or the rebuilt one if the renames were done).
                tracing::warn!(task = %name, "the rebuilt state was not swapped in: {error}");
                files.report(&format!("refused: {error}"))?;
                swap::recover(&task.setup.dir, &rebuilt)?;
                task.state = TaskState::open(&task.setup.dir, &stores, sync)?;
            }
        }
        files.clear()?;
        // The task goes on as after a restart: a fresh processor (none of
        // its fields hold what it had from the old state), `init` first.
        let spec = &task.setup.spec;
        task.processor = (spec.factory)(spec.key_codec, spec.value_codec);
        task.lifecycle("init").await?;
        task.pending.moved = true;
    }
    task.lifecycle("close").await?;
    task.pending.moved = true;
    task.commit().await?;
    task.settle().await?;
    tracing::debug!(task = %name, "stopped");
    Ok(())
}

impl Task {
    /// The fetch-process-commit loop.
    async fn pump(&mut self) -> Result<Pumped, RuntimeError> {
        let mut turn = 0usize;
        loop {
            if self.setup.stop.load(Ordering::Relaxed) {
                return Ok(Pumped::Stopped);
            }
            let targets = self.setup.targets.borrow().clone();
            if let Some(targets) = &targets {
                if !self.counted {
                    self.counted = true;
                    let to_go: i64 = self
                        .inputs
                        .iter()
                        .map(|i| {
                            targets
                                .get(&*i.topic)
                                .map_or(0, |end| (end - i.next).max(0))
                        })
                        .sum();
                    let progress = &self.setup.progress;
                    progress.total.fetch_add(to_go as u64, Ordering::Relaxed);
                }
                if self.reached(targets) {
                    return Ok(Pumped::Stopped);
                }
            }
            if Instant::now() >= self.handover_check_at {
                self.handover_check_at = Instant::now() + HANDOVER_CHECK_EVERY;
                if self.hold_for_rebuild().await? {
                    return Ok(Pumped::Swap);
                }
            }
            let mut fetched_any = false;
            for step in 0..self.inputs.len() {
                let at = (turn + step) % self.inputs.len();
                let limit = targets
                    .as_ref()
                    .and_then(|t| t.get(&*self.inputs[at].topic).copied());
                if limit.is_some_and(|end| self.inputs[at].next >= end) {
                    continue;
                }
                self.fetching_since = Some(Instant::now());
                let fetched = self.fetch_and_process(at).await?;
                if let Some(since) = self.fetching_since.take()
                    && fetched
                {
                    self.busy += since.elapsed();
                }
                if fetched {
                    fetched_any = true;
                    turn = at + 1;
                    break;
                }
            }
            if self.pending.due(&self.setup.config) {
                self.commit().await?;
            }
            if self.state.commit_landed() {
                self.settle().await?;
            }
            if !fetched_any {
                // Idle: a checkpoint asked for is taken now, not at the
                // next commit, which may be far off.
                if !self.pending.moved && self.checkpoint_if_due()? {
                    self.ship().await?;
                }
                if matches!(self.setup.log, LogAccess::Embedded(..)) {
                    tokio::time::sleep(IDLE_WAIT).await;
                }
            }
        }
    }

    fn reached(&self, targets: &Targets) -> bool {
        self.inputs
            .iter()
            .all(|i| targets.get(&*i.topic).is_some_and(|end| i.next >= *end))
    }

    /// Fetches from input `at` and processes what came; false if nothing did.
    async fn fetch_and_process(&mut self, at: usize) -> Result<bool, RuntimeError> {
        let (topic, partition) = (self.inputs[at].log_topic.clone(), self.setup.partition);
        let next = self.inputs[at].next;
        let fetched = match self
            .setup
            .log
            .fetch(&topic, partition, next, self.setup.config.fetch_bytes)
            .await
        {
            Ok(fetched) => fetched,
            Err(RuntimeError::Client(crate::client::ClientError::OffsetOutOfRange { .. }))
            | Err(RuntimeError::Log(crate::log::LogError::OffsetOutOfRange { .. })) => {
                let start = self.setup.log.start_offset(&topic, partition).await?;
                return Err(self.input_gone(&topic, start, next));
            }
            Err(error) => return Err(error),
        };
        if fetched.log_start_offset > next {
            return Err(self.input_gone(&topic, fetched.log_start_offset, next));
        }
        let mut rest: &[u8] = &fetched.records;
        let mut any = false;
        while !rest.is_empty() {
            // A fetch may end inside a batch; the next fetch starts there.
            let batch = match RecordBatch::parse_and_verify(rest) {
                Ok(batch) => batch,
                Err(_) if any => break,
                Err(error) => {
                    return Err(RuntimeError::Config(format!(
                        "{topic}/{partition} at offset {next}: unreadable batch: {error}"
                    )));
                }
            };
            rest = &rest[batch.size_bytes()..];
            any = true;
            self.process_batch(at, &batch).await?;
            if self.pending.due(&self.setup.config) {
                self.commit().await?;
            }
            if self.state.commit_landed() {
                self.settle().await?;
            }
        }
        Ok(any)
    }

    async fn process_batch(
        &mut self,
        at: usize,
        batch: &RecordBatch<'_>,
    ) -> Result<(), RuntimeError> {
        let header = *batch.header();
        let input_next = self.inputs[at].next;
        // A target is a hard stop: nothing at or past it is processed (a
        // rebuild must reach the live task's offsets exactly).
        let limit = self
            .setup
            .targets
            .borrow()
            .as_ref()
            .and_then(|t| t.get(&*self.inputs[at].topic).copied())
            .unwrap_or(i64::MAX);
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
        let records = batch.records(DECOMPRESSED_BYTES_MAX).map_err(|e| {
            RuntimeError::Config(format!(
                "{topic}/{} at offset {}: {e}",
                self.setup.partition, header.base_offset
            ))
        })?;
        // One position for the batch, updated per record (no per-record
        // reference count or header vector).
        let mut position = Position {
            topic: Arc::clone(&topic),
            partition: self.setup.partition,
            offset: -1,
            timestamp: 0,
            headers: Vec::new(),
        };
        // Decoded first, so that a record's store entries can be asked for
        // a few records ahead of its turn.
        let records = records.iter().collect::<Result<Vec<_>, _>>().map_err(|e| {
            RuntimeError::Config(format!(
                "{topic}/{} in the batch at offset {}: {e}",
                self.setup.partition, header.base_offset
            ))
        })?;
        // An async processor's lookups for the records to process, before
        // the first is applied (none for the others).
        let offsets = self.inputs[at].next..limit;
        if let Some(prepare) = self.processor.prepare(&records, &position, offsets) {
            prepare.await;
        }
        self.prefetch.review(&mut self.state, records.len());
        let prefetched = &self.prefetch.active;
        if !prefetched.is_empty() {
            for record in records.iter().take(PREFETCH_AHEAD) {
                let key = record.key.unwrap_or_default();
                self.state.prefetch(key, prefetched);
            }
        }
        let mut counted = 0u64;
        for (index, record) in records.iter().enumerate() {
            let prefetched = &self.prefetch.active;
            if !prefetched.is_empty()
                && let Some(ahead) = records.get(index + PREFETCH_AHEAD)
            {
                let key = ahead.key.unwrap_or_default();
                self.state.prefetch(key, prefetched);
            }
            if record.offset < self.inputs[at].next {
                continue;
            }
            if record.offset >= limit {
                break;
            }
            position.offset = record.offset;
            position.timestamp = record.timestamp;
            position.headers.clear();
            position.headers.extend(record.headers().map(|h| {
                (
                    String::from_utf8_lossy(h.key).into_owned(),
                    h.value.map(<[u8]>::to_vec),
                )
            }));
            let raw = RawRecord {
                key: record.key,
                value: record.value,
            };
            let mut ctx = context(&mut self.state, &self.setup, &position);
            if let Err(error) = self.processor.process(raw, &mut ctx) {
                self.state.discard();
                return Err(RuntimeError::Processor {
                    processor: self.setup.spec.name.clone(),
                    topic: topic.to_string(),
                    partition: self.setup.partition,
                    offset: record.offset,
                    error,
                });
            }
            self.inputs[at].next = record.offset + 1;
            self.pending.records += 1;
            self.checkpointed.1 += 1;
            self.pending.moved = true;
            counted += 1;
            // Remote only: the cluster may be Kafka, which recognises a
            // resend among a producer's last 5 batches per partition; the
            // embedded log recognises any earlier batch.
            let remote = matches!(self.setup.log, LogAccess::Remote(_));
            if self.pending.records >= self.setup.config.commit.records
                || (remote && self.state.outbox_full())
            {
                let progress = &self.setup.progress.records;
                progress.fetch_add(std::mem::take(&mut counted), Ordering::Relaxed);
                self.commit().await?;
            }
        }
        let progress = &self.setup.progress.records;
        progress.fetch_add(counted, Ordering::Relaxed);
        let past_batch = header.next_offset().min(limit);
        self.inputs[at].next = self.inputs[at].next.max(past_batch);
        Ok(())
    }

    /// Runs the processor's `init` or `close`.
    async fn lifecycle(&mut self, which: &str) -> Result<(), RuntimeError> {
        let first = &self.inputs[0];
        let position = Position {
            topic: Arc::clone(&first.topic),
            partition: self.setup.partition,
            offset: -1,
            timestamp: crate::log::now_ms(),
            headers: Vec::new(),
        };
        let mut ctx = context(&mut self.state, &self.setup, &position);
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

    /// Commits the run with the input offsets. The commit's write runs
    /// while the task goes on; its records are shipped once it is settled:
    /// as soon as it lands, or at the next commit, which waits for it
    /// first (see [`TaskState::begin_commit`]).
    async fn commit(&mut self) -> Result<(), RuntimeError> {
        if !self.pending.moved {
            return Ok(());
        }
        self.settle().await?;
        let offsets: Vec<(&str, i64)> = self.inputs.iter().map(|i| (&*i.topic, i.next)).collect();
        // The rate while busy, smoothed, for `status`'s catch-up estimate.
        if let Some(since) = self.fetching_since.replace(Instant::now()) {
            self.busy += since.elapsed();
        }
        if self.pending.records > 0 && self.busy >= Duration::from_millis(10) {
            let sample = self.pending.records as f64 / self.busy.as_secs_f64();
            let rate = self.rate.map_or(sample, |r| 0.7 * r + 0.3 * sample);
            self.rate = Some(rate);
            self.state.note_rate(rate);
        }
        self.busy = Duration::ZERO;
        // The commit before was settled and shipped first: the outbox holds
        // one commit's batches at most (remote, the cluster may be Kafka,
        // which recognises a resend among a producer's last 5 batches per
        // partition only).
        self.state.begin_commit(&offsets)?;
        self.pending = Pending::new();
        if self.checkpoint_if_due()? {
            self.ship().await?;
        }
        Ok(())
    }

    /// Waits for the commit in flight, then ships the outbox.
    async fn settle(&mut self) -> Result<(), RuntimeError> {
        self.state.settle()?;
        self.ship().await
    }

    /// When a rebuild of this task is ready to take over: commits and ships
    /// everything, holds its input at the offsets it tells the rebuild, and
    /// waits for the rebuild to reach them. True when it did; false when no
    /// rebuild is ready, or it did not come within [`HOLD_MAX`] (the task
    /// goes on and asks again later).
    async fn hold_for_rebuild(&mut self) -> Result<bool, RuntimeError> {
        let Some(rebuilt) = self.setup.rebuild.clone() else {
            return Ok(false);
        };
        let files = Handover::beside(&rebuilt);
        match files.rebuild_ready() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(error) => {
                tracing::warn!(task = %self.setup.name(), "looking for a rebuild: {error}");
                return Ok(false);
            }
        }
        self.pending.moved = true;
        self.commit().await?;
        self.settle().await?;
        match self.await_rebuild(&rebuilt, &files).await {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            // The handover's own troubles never stop the task.
            Err(error) => tracing::warn!(task = %self.setup.name(), "handover: {error}"),
        }
        let _ = std::fs::remove_file(&files.hold);
        self.handover_check_at = Instant::now() + HOLD_MAX;
        Ok(false)
    }

    /// Holds at the committed offsets until the rebuild has reached them.
    async fn await_rebuild(&self, rebuilt: &Path, files: &Handover) -> Result<bool, RuntimeError> {
        let offsets = self.state.input_offsets();
        let token = encode_offsets(&offsets);
        write_whole(&files.hold, &token)?;
        let deadline = Instant::now() + HOLD_MAX;
        loop {
            let answer = std::fs::read_to_string(&files.caught_up).ok();
            if answer.as_deref() == Some(token.as_str()) {
                // Only a rebuilt state exactly at these offsets goes in.
                if swap::rebuilt_offsets(rebuilt)?.as_ref() == Some(&offsets) {
                    return Ok(true);
                }
                files.report("refused: its committed offsets are not the ones held")?;
                files.clear()?;
                return Ok(false);
            }
            let gone = !files.ready.exists() || !files.rebuild_running();
            if gone || Instant::now() > deadline || self.setup.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Takes a checkpoint when the policy says so, or when `checkpoint`
    /// asked (the request file's token is not yet the task's answer, also
    /// a request made while the task was starting); then answers it with
    /// the token in the task's checkpoint directory. True when it took one
    /// (settling the commit in flight first: its records are then due to
    /// be shipped).
    fn checkpoint_if_due(&mut self) -> Result<bool, RuntimeError> {
        let Some(paths) = &self.setup.checkpoints else {
            return Ok(false);
        };
        if self.setup.spec.stores.is_empty() {
            return Ok(false);
        }
        let policy = self.setup.config.checkpoints;
        let (since, records) = self.checkpointed;
        let due = policy.records.is_some_and(|n| records >= n)
            || policy
                .interval
                .is_some_and(|t| since.elapsed() >= t && records > 0);
        // A request is open while its token is not the task's answer
        // (the request file is looked at every REQUEST_CHECK_EVERY, and
        // read only when it changed).
        let request = if Instant::now() >= self.request_check_at {
            self.request_check_at = Instant::now() + REQUEST_CHECK_EVERY;
            requested_at(paths)
        } else {
            self.request_seen
        };
        let mut token = None;
        if request.is_some() && request != self.request_seen {
            let asked = std::fs::read(&paths.request).unwrap_or_default();
            let answered = std::fs::read(paths.dir.join("ANSWERED")).unwrap_or_default();
            if asked == answered {
                self.request_seen = request;
            } else {
                token = Some(asked);
            }
        }
        if !due && token.is_none() {
            return Ok(false);
        }
        let offset = self.inputs[0].next;
        self.state
            .checkpoint(&paths.dir, offset, policy.keep.max(1))?;
        self.checkpointed = (Instant::now(), 0);
        if let Some(token) = token {
            let answer = paths.dir.join("ANSWERED");
            std::fs::write(&answer, token).map_err(|error| RuntimeError::Io {
                context: format!("writing {}", answer.display()),
                error,
            })?;
            self.request_seen = request;
        }
        Ok(true)
    }

    /// Appends every outbox batch, in order, then drops them (not in a
    /// rebuild: a rebuilt state takes the live task's outbox at the swap).
    async fn ship(&mut self) -> Result<(), RuntimeError> {
        if !self.setup.emits {
            return Ok(());
        }
        let outbox = self.state.outbox()?;
        let Some((last, _)) = outbox.last() else {
            return Ok(());
        };
        let last = *last;
        let mut touched: Vec<(String, i32)> = Vec::new();
        for (_, batch) in &outbox {
            self.setup
                .log
                .append(&batch.topic, batch.partition, &batch.batch)
                .await
                .map_err(|error| RuntimeError::Ship {
                    task: self.setup.name(),
                    topic: batch.topic.clone(),
                    partition: batch.partition,
                    reason: error.to_string(),
                })?;
            if !touched
                .iter()
                .any(|(t, p)| *t == batch.topic && *p == batch.partition)
            {
                touched.push((batch.topic.clone(), batch.partition));
            }
        }
        if self.setup.config.sync {
            self.setup.log.flush(&touched)?;
        }
        self.state.remove_shipped(last)?;
        Ok(())
    }

    fn input_gone(&self, topic: &str, start: i64, position: i64) -> RuntimeError {
        RuntimeError::InputGone {
            task: self.setup.name(),
            topic: topic.to_string(),
            partition: self.setup.partition,
            start,
            position,
        }
    }
}

/// When the checkpoint request file was last written, if it exists.
fn requested_at(paths: &Checkpoints) -> Option<std::time::SystemTime> {
    std::fs::metadata(&paths.request)
        .and_then(|m| m.modified())
        .ok()
}

/// The offset a task without state starts `log_topic` at.
async fn first_offset(
    setup: &TaskSetup,
    log_topic: &str,
    start: StartAt,
) -> Result<i64, RuntimeError> {
    let earliest = setup.log.start_offset(log_topic, setup.partition).await?;
    match start {
        StartAt::Earliest => Ok(earliest),
        StartAt::Offset(offset) if offset >= earliest => Ok(offset),
        StartAt::Offset(offset) => Err(RuntimeError::Config(format!(
            "{log_topic}/{}: offset {offset} is no longer retained (the partition starts at {earliest})",
            setup.partition
        ))),
        StartAt::Timestamp(ms) => {
            setup
                .log
                .offset_for_timestamp(log_topic, setup.partition, ms)
                .await
        }
    }
}

/// Which stores' entries for a record's key the task asks the CPU for a
/// few records ahead of the record's turn.
///
/// The candidates are the stores encoding keys like the input (or both
/// bytes as they are): a processor keeping state per record key, the
/// common case, then finds its entry in the CPU's cache. Of those, only
/// stores the processor actually reads from are prefetched (reviewed every
/// [`PREFETCH_REVIEW_RECORDS`] records); a wrong guess costs a wasted
/// prefetch.
struct Prefetch {
    candidates: Vec<usize>,
    active: Vec<usize>,
    /// Records since the last review.
    since_review: usize,
}

/// How many records go by between reviews of which stores are read.
const PREFETCH_REVIEW_RECORDS: usize = 16_384;

impl Prefetch {
    fn new(spec: &ProcessorSpec) -> Self {
        use crate::codec::Codec;
        let verbatim = |codec| matches!(codec, Codec::Raw | Codec::Utf8);
        let input = spec.key_codec;
        let candidates: Vec<usize> = spec
            .stores
            .iter()
            .enumerate()
            .filter(|(_, store)| {
                store.key_codec == input || (verbatim(store.key_codec) && verbatim(input))
            })
            .map(|(at, _)| at)
            .collect();
        Self {
            active: candidates.clone(),
            candidates,
            since_review: 0,
        }
    }

    /// Before a batch of `records`: once enough records went by, keeps the
    /// candidates read from at least once per four records since.
    fn review(&mut self, state: &mut TaskState, records: usize) {
        if self.candidates.is_empty() {
            return;
        }
        self.since_review += records;
        if self.since_review < PREFETCH_REVIEW_RECORDS {
            return;
        }
        let window = std::mem::take(&mut self.since_review) as u64;
        self.active.clear();
        for store in &self.candidates {
            if state.take_reads(*store) * 4 >= window {
                self.active.push(*store);
            }
        }
    }
}

/// What the processor sees of the task for one record (or `init`/`close`).
fn context<'t>(
    state: &'t mut TaskState,
    setup: &'t TaskSetup,
    position: &'t Position,
) -> Context<'t> {
    Context {
        state,
        stores: &setup.spec.stores,
        outputs: &setup.outputs,
        position,
        processor: &setup.spec.name,
        emits: setup.emits,
    }
}
