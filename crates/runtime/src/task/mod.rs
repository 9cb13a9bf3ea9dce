//! One task: one processor on partition i of each of its input topics.
//!
//! The loop (docs/design.md, §4 "The commit protocol"): fetch whole
//! batches from the task's input offsets → call the processor for each
//! record, its writes and emits buffered in the run → when the commit
//! interval is reached, write ONE RocksDB batch {state writes, outbox
//! batches, input offsets}, on the state's writer thread while the next run
//! goes on → once that write has landed (seen between batches, waited for
//! when idle or at the next commit), append the outbox batches to the log
//! with the task's producer id and their fixed sequences → drop the
//! shipped entries.
//! On start the task ships whatever its outbox still holds: batches the log
//! already has are recognised by their sequences and not written twice.
//!
//! The task runs on a blocking thread (RocksDB calls block) and drives its
//! async parts (the processor, remote fetches) with the runtime's handle.
//!
//! - `process`: fetching and processing batches, `init` and `close`;
//!   `prefetch`: asking for store entries ahead of their records.
//! - `merge`, `patience` and `input`: a task with several inputs, which
//!   processes their records in timestamp order across them.
//! - `commit`: commit, settle and ship; `pending`: what a run holds;
//!   `progress`: what the tasks count together.
//! - `dead_letters`: records the processor failed on, diverted under its
//!   error policy (skipped, or sent to a dead-letter topic).
//! - `timers`: due timers fired (event time after the record that moved
//!   the stream time, processing time between batches and while idle).
//! - `checkpoint_request`: checkpoints on policy or when asked.
//! - `handover` and `swap`: a rebuilt state taking over.
//! - `start`: where a task without state starts reading.
//! - `transaction` and `resume`: remote, each commit shipped in one Kafka
//!   transaction, and a start checked against the cluster's last commit
//!   (restoring the state from its changelogs when it is not that one).

mod checkpoint_request;
mod commit;
mod dead_letters;
pub(crate) mod handover;
mod input;
pub(crate) mod letters;
mod merge;
mod patience;
mod pending;
pub(crate) mod positions;
mod prefetch;
mod process;
mod progress;
mod restore;
mod resume;
pub(crate) mod standby;
mod start;
pub(crate) mod swap;
pub(crate) mod threads;
mod timers;
pub(crate) mod transaction;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use strata_log::AppendWatch;

use super::board::{BoardEntry, TaskBoard, TaskView};
use super::clock::Clock;
use super::erased::ErasedProcessor;
use super::error::RuntimeError;
use super::log_access::LogAccess;
use super::spec::TopicOutput;
use super::state::TaskState;
use super::task_metrics::{KeySampler, TaskMetrics};
use super::timer::{TimeDomain, timer_store_name};
use super::topology::{ProcessorSpec, TaskConfig};

use dead_letters::Failures;
use handover::{Handover, SWAPPED};
use input::Input;
use pending::Pending;
use prefetch::Prefetch;
pub(crate) use progress::TaskProgress;
use resume::Resumed;
pub use start::StartAt;
use start::first_offset;
use transaction::{TaskTxn, TxnNames};

/// Largest decompressed records section of one input batch.
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
/// How many records ahead of the one processed the task asks for their
/// keys' store entries (see [`Prefetch`]).
const PREFETCH_AHEAD: usize = 8;
/// Longest wait of an idle embedded task for an append to its inputs:
/// the bound on how late it sees the stop flag (a commit due, a change of
/// targets and an append wake it at once).
const IDLE_WAIT_MAX: Duration = Duration::from_millis(100);

/// End offsets, per input topic, at which a task running `--until-end`
/// stops.
pub(crate) type Targets = BTreeMap<String, i64>;

/// A task's checkpoint directory and the version's request file.
#[derive(Clone)]
pub(crate) struct Checkpoints {
    pub dir: PathBuf,
    pub request: PathBuf,
}

pub(crate) struct TaskSetup {
    /// The app's name and the version it runs as (what a dead letter
    /// says failed on its record).
    pub app: String,
    pub version: String,
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
    /// there for one ready to take over (see `handover`). None in a rebuild.
    pub rebuild: Option<PathBuf>,
    pub outputs: Vec<TopicOutput>,
    /// Per store (in the order of `spec.stores`), its changelog topic in
    /// the log, if it has one (partition: the task's).
    pub changelogs: Vec<Option<String>>,
    /// Remote: the task's positions log (partition: the task's), where
    /// every transaction writes its input offsets and commit mark (see
    /// `positions`).
    pub positions: Option<String>,
    /// Remote: the names the task's transactions go under; None embedded
    /// (and in a rebuild, which ships nothing).
    pub txn: Option<TxnNames>,
    pub config: TaskConfig,
    pub log: LogAccess,
    pub stop: Arc<AtomicBool>,
    /// Set (for `--until-end`) once the ends of every input are known.
    pub targets: watch::Receiver<Option<Targets>>,
    /// Whether the run stops at the inputs' ends (`--until-end`): until
    /// the targets come, a writer of an input may still be running, and a
    /// task with several inputs passes none by (see `merge`).
    pub until_end: bool,
    pub progress: Arc<TaskProgress>,
    /// The instance's board, where the task says what it does.
    pub board: TaskBoard,
    /// Where the task reads processing time.
    pub clock: Clock,
    /// A `dlq replay`: the task replays its processor's dead letters
    /// instead of reading its inputs (see `letters`).
    pub letters: Option<Arc<letters::LetterJob>>,
    /// Ends the task as a SIGKILL would once the run has processed this
    /// many records (see [`RunOptions::crash_after`]).
    ///
    /// [`RunOptions::crash_after`]: crate::ops::RunOptions::crash_after
    pub crash_after: Option<u64>,
}

impl TaskSetup {
    pub fn name(&self) -> String {
        format!("{}/{}", self.spec.name, self.partition)
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
    /// Subscriptions to appends to the inputs, taken once the task found
    /// nothing to read (see [`Task::wait_for_input`]).
    idle_watch: Option<AppendWatch>,
    /// Remote: the task's transactional producer.
    txn: Option<TaskTxn>,
    /// What `/metrics` shows of the task (see `task_metrics`).
    metrics: Arc<TaskMetrics>,
    /// Time spent in commits, in all (what processing time leaves out).
    in_commits: Duration,
    /// Which records read have their keys counted for the hot-key report
    /// (see `task_metrics`).
    key_sampler: KeySampler,
    /// Which store writes have their keys counted, likewise.
    write_sampler: KeySampler,
    /// Each input's position when the run in progress began: where a
    /// failure diverted by the processor's policy rewinds it to.
    run_start: Vec<i64>,
    /// Records the processor failed on (see `dead_letters`).
    failures: Failures,
    /// What the run in progress added to the progress (records, done):
    /// taken back when it is processed again.
    run_progress: (u64, u64),
}

/// Why the loop returned.
enum Pumped {
    /// Told to stop, or reached its targets.
    Stopped,
    /// A rebuilt state is at the task's offsets: swap it in.
    Swap,
}

/// How often a task looks for a rebuild ready to take over.
const HANDOVER_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Runs the task until it is told to stop, it reaches its targets, or it
/// fails. A clean end commits and ships everything first.
pub(crate) async fn run(mut setup: TaskSetup) -> Result<(), RuntimeError> {
    let name = setup.name();
    let entry = setup.board.enter(name.clone(), TaskView::Running);
    setup.log = setup.log.with_thread_fetches().await?;
    let mut task = Task::start(setup, &entry).await?;
    task.ship().await?;
    tracing::debug!(task = %name, "started");
    task.lifecycle("init").await?;
    task.pending.moved = true;
    // A replay of dead letters takes its letters; a live task (or a
    // rebuild's) reads its inputs until stopped.
    match task.setup.letters.clone() {
        Some(job) => task.replay_letters(&job).await?,
        None => loop {
            match task.pump().await {
                Ok(Pumped::Stopped) => break,
                Ok(Pumped::Swap) => {
                    task = task.take_rebuilt()?;
                    // The task goes on as after a restart: a fresh processor
                    // (none of its fields hold what it had from the old
                    // state), `init` first.
                    task.lifecycle("init").await?;
                    task.pending.moved = true;
                }
                // A record the processor failed on, under a policy that
                // diverts it: the run again without it (see `dead_letters`).
                Err(error) => task.divert_failure(error).await?,
            }
        },
    }
    // Told to stop because another task crashed the run: no last commit.
    if task.crashed() {
        return Err(RuntimeError::Crashed);
    }
    task.lifecycle("close").await?;
    task.pending.moved = true;
    task.commit().await?;
    task.settle().await?;
    tracing::debug!(task = %name, "stopped");
    Ok(())
}

impl Task {
    /// Opens the task's state (remote, resumed against the cluster's last
    /// commit), its producer, changelogs, inputs' positions and processor.
    async fn start(setup: TaskSetup, entry: &BoardEntry) -> Result<Self, RuntimeError> {
        std::fs::create_dir_all(&setup.dir).map_err(|error| RuntimeError::Io {
            context: format!("creating {}", setup.dir.display()),
            error,
        })?;
        if let Some(rebuilt) = &setup.rebuild {
            swap::recover(&setup.dir, rebuilt)?;
        }
        let stores = setup.spec.store_names();
        let mut state = TaskState::open(&setup.dir, &stores, setup.config.sync)?;
        let mut txn = None;
        if let (Some(names), LogAccess::Remote(remote)) = (&setup.txn, &setup.log) {
            let started = TaskTxn::start(&remote.cluster, names.clone(), setup.name()).await?;
            let (resumed, found) = resume::resume(&setup, state, &started, remote).await?;
            state = resumed;
            state.ensure_lineage()?;
            let identity = started.identity();
            if state.producer() != Some(identity) {
                state.set_producer(identity.0, identity.1)?;
            }
            txn = Some(started);
            entry.set(TaskView::Running);
            if let (Some(txn), Resumed::Shipped(mark)) = (&mut txn, found) {
                txn.shipped = Some(mark);
            }
        } else if setup.emits
            && (!setup.outputs.is_empty() || setup.changelogs.iter().any(Option::is_some))
            && state.producer().is_none()
        {
            let (id, epoch) = setup.log.new_producer().await?;
            state.set_producer(id, epoch)?;
        }
        if setup.emits {
            let changelogs = (setup.changelogs.iter())
                .map(|c| c.as_ref().map(|topic| (topic.clone(), setup.partition)))
                .collect();
            state.set_changelogs(changelogs);
            if setup.changelogs.iter().any(Option::is_some) {
                // A state whose writes go to changelogs has a lineage (see
                // `state::meta`); a rebuild refuses to replace it.
                state.ensure_lineage()?;
            }
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
            inputs.push(Input::new(Arc::from(topic.as_str()), log_topic, next));
        }
        use_timers(&setup.spec, &mut state)?;
        let processor = (setup.spec.factory)(setup.spec.key_codec, setup.spec.value_codec);
        let rate = state.rate()?;
        let outputs: Vec<String> = (setup.outputs.iter())
            .map(|o| o.log_topic.clone())
            .collect();
        let metrics = TaskMetrics::new(
            (&setup.spec.name, setup.partition),
            (inputs.iter()).map(|i: &Input| (i.log_topic.clone(), i.next)),
            &outputs,
        );
        let metrics = Arc::new(metrics.with_stores(&setup.spec.store_names()));
        if let Some(rate) = rate {
            metrics.set_rate(rate);
        }
        entry.count_with(Arc::clone(&metrics));
        // Set on the state the task runs with (a remote resume may have
        // opened it again).
        state.set_write_cache(setup.config.write_cache);
        let failures = Failures::new(&setup);
        Ok(Task {
            prefetch: Prefetch::new(&setup.spec),
            setup,
            state,
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
            idle_watch: None,
            txn,
            metrics,
            in_commits: Duration::ZERO,
            key_sampler: KeySampler::new(0x9e37_79b9_7f4a_7c15),
            write_sampler: KeySampler::new(0x2545_f491_4f6c_dd1d),
            run_start: inputs.iter().map(|i| i.next).collect(),
            inputs,
            failures,
            run_progress: (0, 0),
        })
    }

    /// A rebuilt state at the task's offsets swapped in (or, refused, the
    /// live one whole again); the task then holds what a restart would.
    fn take_rebuilt(mut self) -> Result<Self, RuntimeError> {
        let name = self.setup.name();
        let rebuilt = self.setup.rebuild.clone().expect("only a live task swaps");
        let sync = self.setup.config.sync;
        let stores = self.setup.spec.store_names();
        let files = Handover::beside(&rebuilt);
        match swap::swap_in(&self.setup.dir, self.state, &rebuilt, &stores, sync) {
            Ok(state) => {
                self.state = state;
                files.report(SWAPPED)?;
                tracing::info!(task = %name, "the rebuilt state took over");
            }
            Err(error) => {
                // Whatever happened, the live state is whole again (the
                // old one, or the rebuilt one if the renames were done).
                tracing::warn!(task = %name, "the rebuilt state was not swapped in: {error}");
                files.report(&format!("refused: {error}"))?;
                swap::recover(&self.setup.dir, &rebuilt)?;
                self.state = TaskState::open(&self.setup.dir, &stores, sync)?;
            }
        }
        files.clear()?;
        // What was buffered is fetched again, as after a restart.
        self.inputs.iter_mut().for_each(Input::drop_buffered);
        self.run_start = self.inputs.iter().map(|i| i.next).collect();
        self.state.set_write_cache(self.setup.config.write_cache);
        use_timers(&self.setup.spec, &mut self.state)?;
        let spec = &self.setup.spec;
        self.processor = (spec.factory)(spec.key_codec, spec.value_codec);
        Ok(self)
    }
}

impl Task {
    /// The fetch-process-commit loop.
    async fn pump(&mut self) -> Result<Pumped, RuntimeError> {
        loop {
            // The other tasks of this thread get their turn: embedded, a
            // task with a backlog never waits on anything.
            tokio::task::yield_now().await;
            // A crash comes before a stop: once one task crashed, the
            // others, told to stop, must not commit on the way out.
            if self.crashed() {
                return Err(RuntimeError::Crashed);
            }
            if self.setup.stop.load(Ordering::Relaxed) {
                return Ok(Pumped::Stopped);
            }
            // What a restart or a long sweep left due, and the clock's:
            // fired before a live task at its targets stops, so a run to
            // the end leaves no timer due. (A rebuild's task, which emits
            // nothing, must not fire them where the live one has not.)
            if self.setup.emits {
                self.fire_due_timers().await?;
            }
            let targets = self.setup.targets.borrow_and_update().clone();
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
            if !self.setup.emits {
                self.fire_due_timers().await?;
            }
            self.fetching_since = Some(Instant::now());
            // One input is read a fetch at a time, in place; several are
            // read in timestamp order across them (see `merge`).
            let fetched_any = if self.inputs.len() > 1 {
                self.merge_turn().await?
            } else {
                let at_target = targets
                    .as_ref()
                    .and_then(|t| t.get(&*self.inputs[0].topic))
                    .is_some_and(|end| self.inputs[0].next >= *end);
                !at_target && self.fetch_and_process(0).await?
            };
            if let Some(since) = self.fetching_since.take()
                && fetched_any
            {
                self.busy += since.elapsed();
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
                self.wait_for_input().await?;
            } else {
                self.idle_watch = None;
            }
        }
    }

    /// Idle (nothing fetched): the first time, subscribes to appends to
    /// the inputs and returns, so they are read once more with the
    /// subscription taken (an append after that read wakes the wait); the
    /// next time, settles the commit in flight (nothing better to do) and
    /// waits for an append, a change of targets, the commit interval or
    /// [`IDLE_WAIT_MAX`]. Remote, the fetch itself waits on the broker.
    async fn wait_for_input(&mut self) -> Result<(), RuntimeError> {
        if !matches!(self.setup.log, LogAccess::Embedded(..)) {
            return Ok(());
        }
        if self.idle_watch.is_none() {
            let mut watch = AppendWatch::default();
            for input in &self.inputs {
                let partition = self.setup.partition;
                if let Some(receiver) = self.setup.log.subscribe(&input.log_topic, partition) {
                    watch.push(receiver);
                }
            }
            self.idle_watch = Some(watch);
            return Ok(());
        }
        if self.state.commit_in_flight() {
            self.settle().await?;
        }
        let mut bound = IDLE_WAIT_MAX;
        if self.pending.moved {
            let due_in = self.setup.config.commit.interval;
            bound = bound.min(due_in.saturating_sub(self.pending.since.elapsed()));
        }
        if let Some(deadline) = self.idle_deadline() {
            // Woken when an input waited for has been idle long enough to
            // be passed by.
            bound = bound.min(deadline.saturating_duration_since(Instant::now()));
        }
        if let Some(at) = self.state.earliest_timer(TimeDomain::ProcessingTime) {
            // Woken when the earliest processing-time timer is due.
            let due_in = at.saturating_sub(self.setup.clock.now_ms()).max(0) as u64;
            bound = bound.min(Duration::from_millis(due_in));
        }
        let watch = self.idle_watch.as_mut().expect("subscribed above");
        let targets = &mut self.setup.targets;
        tokio::select! {
            () = watch.appended() => {}
            Ok(()) = targets.changed() => {}
            () = tokio::time::sleep(bound) => {}
        }
        self.idle_watch = None;
        Ok(())
    }

    /// Whether the run has crashed: it has processed as many records as it
    /// was to crash after (counted across its tasks), seen here or by
    /// another task first. Checked before every commit and between turns.
    fn crashed(&self) -> bool {
        let Some(after) = self.setup.crash_after else {
            return false;
        };
        let progress = &self.setup.progress;
        if progress.crashed.load(Ordering::Acquire) {
            return true;
        }
        let reached = progress.records.load(Ordering::Acquire) >= after;
        if reached {
            progress.crashed.store(true, Ordering::Release);
        }
        reached
    }

    fn reached(&self, targets: &Targets) -> bool {
        self.inputs
            .iter()
            .all(|i| targets.get(&*i.topic).is_some_and(|end| i.next >= *end))
    }
}

/// Points the state at the processor's timer store, if it declares timers.
fn use_timers(spec: &ProcessorSpec, state: &mut TaskState) -> Result<(), RuntimeError> {
    if spec.timers {
        state.use_timers(&timer_store_name(&spec.name))?;
    }
    Ok(())
}
