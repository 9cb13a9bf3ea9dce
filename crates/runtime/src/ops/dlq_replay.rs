//! `dlq replay`: a processor's dead letters run again through the
//! processor as the app's build has it now (after a fix), exactly once,
//! each marked so that no replay takes it twice (`task::letters` has the
//! protocol and its crash windows, `letter` the marks).
//!
//! The job runs the processor's live tasks, on their live state, but on
//! their letters instead of their inputs: what the processor does for a
//! letter (store writes, emits) lands as it would have the first time,
//! late. So the app must not run meanwhile: embedded, its state lock says
//! so; remote, its group must have no member (a live instance would run
//! the same tasks: the two would fence each other, exactly once still, but
//! one would stop). Only the tasks whose partitions have letters to replay
//! are started (remote, each restores its state first if this machine
//! does not hold its last commit).
//!
//! A letter that fails again goes where the processor's policy sends
//! failures (a new dead letter, or nothing under `skip`), marked `failed`;
//! under `OnError::Fail` the job stops at it, having replayed the letters
//! committed before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::board::TaskBoard;
use crate::clock::Clock;
use crate::error::RuntimeError;
use crate::layout::{self, lock_rebuilds, lock_running};
use crate::letter::{self, Letter, LetterFilter};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::on_error::dead_letter_topic;
use crate::task::letters::LetterJob;
use crate::task::threads::TaskThreads;
use crate::task::{self, TaskProgress};
use crate::topic_read::fetch_partition;
use crate::topology::{App, ProcessorSpec};

use super::open::{close, ensure_changelogs, open, resolve};
use super::run::{LiveTasks, RunOptions};

/// Which letters a replay takes, and how it runs.
#[derive(Debug, Clone, Default)]
pub struct LetterReplay {
    /// The processor whose letters are replayed.
    pub processor: String,
    pub filter: LetterFilter,
    /// Where the tasks read processing time (the marks' timestamps, the
    /// processor's clock).
    pub clock: Clock,
    /// For tests of recovery, as [`RunOptions::crash_after`]: the job ends
    /// as a SIGKILL would once its tasks replayed this many letters.
    pub crash_after: Option<u64>,
}

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterReplaySummary {
    pub processor: String,
    /// The dead-letter topic, as the log names it.
    pub topic: String,
    /// The job's name, in each mark it left.
    pub job: String,
    /// Tasks run: those with letters to replay.
    pub tasks: usize,
    /// Letters this job replayed, by outcome (`processed`, `failed`).
    pub outcomes: BTreeMap<String, u64>,
    /// The processor's letters no replay has taken (left out by the
    /// filter, or not in the runtime's format).
    pub waiting: u64,
    pub elapsed: Duration,
}

/// Replays the dead letters of `replay.processor` that `replay.filter`
/// admits and no replay took before, through `app` (the build as it is
/// now), exactly once; see the module's doc.
pub async fn replay_dead_letters(
    app: &App,
    location: &Location,
    replay: &LetterReplay,
) -> Result<LetterReplaySummary, RuntimeError> {
    app.check().map_err(RuntimeError::Config)?;
    let started = Instant::now();
    let (spec, topic) = letter_sender(app, &replay.processor)?;
    let state_dir = location.state_dir();
    let _running = lock_running(state_dir)?;
    let _rebuilds = lock_rebuilds(state_dir)?;
    let (log, embedded) = open(location).await?;
    let result = replay_on(app, location, &log, (spec, &topic), replay).await;
    drop(log);
    if !matches!(result, Err(RuntimeError::Crashed)) {
        close(embedded)?;
    }
    let (tasks, job, outcomes, waiting) = result?;
    Ok(LetterReplaySummary {
        processor: spec.name.clone(),
        topic: app.log_topic(&topic),
        job,
        tasks,
        outcomes,
        waiting,
        elapsed: started.elapsed(),
    })
}

/// The processor `name` and the dead-letter topic it sends to.
fn letter_sender<'a>(
    app: &'a App,
    name: &str,
) -> Result<(&'a ProcessorSpec, String), RuntimeError> {
    let spec = (app.processors.iter()).find(|p| p.name == name);
    let topic = spec.and_then(|p| dead_letter_topic(&app.name, &p.name, &p.on_error));
    match (spec, topic) {
        (Some(spec), Some(topic)) => Ok((spec, topic)),
        _ => {
            let senders = (app.processors.iter())
                .filter(|p| p.on_error.sends_letters())
                .map(|p| p.name.as_str());
            Err(RuntimeError::Config(format!(
                "processor {name:?} sends no failing records to a dead-letter topic (those that do: {}); give it .on_error(OnError::dead_letter())",
                senders.collect::<Vec<_>>().join(", ")
            )))
        }
    }
}

/// The job on an open log: (tasks run, the job's name, outcomes, letters
/// waiting).
async fn replay_on(
    app: &App,
    location: &Location,
    log: &LogAccess,
    (spec, topic): (&ProcessorSpec, &str),
    replay: &LetterReplay,
) -> Result<(usize, String, BTreeMap<String, u64>, u64), RuntimeError> {
    no_live_member(app, log).await?;
    let partitions = resolve(app, log).await?;
    ensure_changelogs(app, log, &partitions).await?;
    let state_dir = location.state_dir();
    for partition in 0..partitions[&spec.inputs[0]] {
        if layout::rebuild_dir(state_dir, &spec.name, partition).exists() {
            return Err(RuntimeError::Config(format!(
                "a rebuild of {}/{partition} is waiting to take over: run the app until it has (or run rebuild again) before replaying dead letters, which the rebuilt state would not hold",
                spec.name
            )));
        }
    }
    let (letters, marks) = (
        app.log_topic(topic),
        app.log_topic(&letter::marks_topic(topic)),
    );
    let count = partitions[topic];
    let compacted = [("cleanup.policy".to_string(), "compact".to_string())];
    log.ensure_topic_with(&marks, count, &compacted).await?;
    let inputs: Vec<String> = spec.inputs.iter().map(|t| app.log_topic(t)).collect();
    let task_count = partitions[&spec.inputs[0]];
    let wanted = |letter: &Letter| {
        letter.processor == spec.name
            && letter.headers.is_some()
            && inputs.contains(&letter.origin.0)
            && (0..task_count).contains(&letter.origin.1)
            && replay.filter.admits(letter)
    };
    // Which tasks have letters to replay (a letter a crashed job's unshipped
    // commit marked may still look unmarked: its task ships it first).
    let mut tasks = BTreeSet::new();
    for partition in 0..count {
        let (letters, marked) = read_letters(log, (&letters, &marks), partition).await?;
        let waiting = letters.iter().filter(|l| !marked.contains_key(&l.offset));
        tasks.extend(waiting.filter(|l| wanted(l)).map(|l| l.origin.1));
    }
    let job = format!("{}-{}", strata_record::time::now_ms(), std::process::id());
    let options = RunOptions {
        clock: replay.clock.clone(),
        crash_after: replay.crash_after,
        ..RunOptions::default()
    };
    // Embedded, stores write changelogs when asked to (`--changelogs`):
    // where the run wrote them, the job must too, whether asked or not.
    let mut changelogs = matches!(log, LogAccess::Remote(_)) || app.config.changelogs;
    for store in &spec.stores {
        let topic = app.changelog_topic(&store.name);
        changelogs |= log.partition_count(&topic).await?.is_some();
    }
    let progress = Arc::new(TaskProgress::default());
    let board = TaskBoard::default();
    let live = LiveTasks {
        app,
        log,
        location,
        options: &options,
        partitions: &partitions,
        changelogs,
        progress: &progress,
        board: &board,
    };
    let letter_job = Arc::new(LetterJob {
        filter: replay.filter.clone(),
        marks: marks.clone(),
        job: job.clone(),
    });
    let threads = TaskThreads::start(
        &tokio::runtime::Handle::current(),
        app.config.task_thread_count(),
    )
    .map_err(RuntimeError::io("starting the task threads"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (_targets, no_targets) = watch::channel(None);
    let mut running = tokio::task::JoinSet::new();
    for &partition in &tasks {
        let mut setup = live.setup(spec, partition, Arc::clone(&stop), no_targets.clone());
        // Nothing checkpointed or handed over: the job is no live run.
        (setup.checkpoints, setup.rebuild) = (None, None);
        setup.letters = Some(Arc::clone(&letter_job));
        let ended = threads.spawn(move || task::run(setup));
        running.spawn(async move { (partition, ended.await) });
    }
    let mut failure = None;
    while let Some(joined) = running.join_next().await {
        let (partition, ended) = joined.map_err(|e| panicked(spec, -1, e.to_string()))?;
        let outcome = match ended {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(panic)) => Err(panicked(spec, partition, panic)),
            Err(_) => Err(panicked(spec, partition, "its task thread ended".into())),
        };
        if let Err(error) = outcome {
            stop.store(true, Ordering::Relaxed);
            failure.get_or_insert(error);
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    let (mut outcomes, mut waiting) = (BTreeMap::new(), 0);
    for partition in 0..count {
        let (letters, marked) = read_letters(log, (&letters, &marks), partition).await?;
        for (outcome, n) in letter::outcomes(marked.values(), &job) {
            *outcomes.entry(outcome).or_insert(0) += n;
        }
        let mine = letters.iter().filter(|l| l.processor == spec.name);
        waiting += mine.filter(|l| !marked.contains_key(&l.offset)).count() as u64;
    }
    Ok((tasks.len(), job, outcomes, waiting))
}

/// One partition of the dead-letter topic and its marks.
async fn read_letters(
    log: &LogAccess,
    (letters, marks): (&str, &str),
    partition: i32,
) -> Result<(Vec<Letter>, BTreeMap<i64, letter::Replayed>), RuntimeError> {
    let marked = letter::marks(fetch_partition(log, marks, partition).await?);
    let letters = fetch_partition(log, letters, partition).await?;
    Ok((letters.into_iter().map(Letter::read).collect(), marked))
}

/// Remote: refuses a replay while the app's group has members.
async fn no_live_member(app: &App, log: &LogAccess) -> Result<(), RuntimeError> {
    let LogAccess::Remote(remote) = log else {
        return Ok(());
    };
    let group = app.versioned_name();
    let admin = strata_client::Admin::new(Arc::clone(&remote.cluster));
    let described = match admin.describe_group(&group).await {
        Ok(described) => described,
        Err(strata_client::ClientError::Kafka { code, .. })
            if code == strata_client::error::codes::GROUP_ID_NOT_FOUND =>
        {
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    match described.members.len() {
        0 => Ok(()),
        n => Err(RuntimeError::Config(format!(
            "the app's group {group:?} has {n} member(s) running: stop every instance before replaying dead letters (the replay runs the processor's tasks itself)"
        ))),
    }
}

fn panicked(spec: &ProcessorSpec, partition: i32, reason: String) -> RuntimeError {
    RuntimeError::TaskPanicked {
        task: format!("{}/{partition} (dlq replay)", spec.name),
        reason,
    }
}
