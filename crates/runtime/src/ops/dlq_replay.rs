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
//! A letter that fails again goes to the dead-letter topic again (a new
//! letter: the same record from the same place, the new error), marked
//! `failed`. Only a processor that sends letters can be replayed: a build
//! whose policy no longer does is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
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

use super::open::{check_compacted, close, ensure_changelogs, open, resolve};
use super::run::{LiveTasks, RunOptions, stop_signal};

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
    /// The processor's letters with no mark: those the filter left out,
    /// the new letters of those that failed again, those behind a
    /// transaction still open (remote), and those no replay takes (not in
    /// the runtime's format, or from a topic no longer an input).
    pub waiting: u64,
    pub elapsed: Duration,
}

/// Replays the dead letters of `replay.processor` that `replay.filter`
/// admits and no replay took before, through `app` (the build as it is
/// now), exactly once, until done or Ctrl-C or SIGTERM (each task then
/// commits what it replayed); see the module's doc.
pub async fn replay_dead_letters(
    app: &App,
    location: &Location,
    replay: &LetterReplay,
) -> Result<LetterReplaySummary, RuntimeError> {
    replay_dead_letters_until(app, location, replay, stop_signal()?).await
}

/// [`replay_dead_letters`], stopped early when `stop` completes.
pub async fn replay_dead_letters_until(
    app: &App,
    location: &Location,
    replay: &LetterReplay,
    stop: impl Future<Output = ()>,
) -> Result<LetterReplaySummary, RuntimeError> {
    app.check().map_err(RuntimeError::Config)?;
    let started = Instant::now();
    let (spec, topic) = letter_sender(app, &replay.processor)?;
    let state_dir = location.state_dir();
    let _running = lock_running(state_dir)?;
    let _rebuilds = lock_rebuilds(state_dir)?;
    let (log, embedded) = open(location).await?;
    let result = replay_on(app, location, &log, (spec, &topic), (replay, stop)).await;
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

/// What the job did: tasks run, its name, letters by outcome, letters
/// waiting.
type Done = (usize, String, BTreeMap<String, u64>, u64);

/// The job on an open log, until done or `stop` (then each task commits
/// what it replayed).
async fn replay_on(
    app: &App,
    location: &Location,
    log: &LogAccess,
    (spec, topic): (&ProcessorSpec, &str),
    (replay, stop): (&LetterReplay, impl Future<Output = ()>),
) -> Result<Done, RuntimeError> {
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
    let topics = Topics {
        letters: app.log_topic(topic),
        marks: app.log_topic(&letter::marks_topic(topic)),
        partitions: partitions[topic],
    };
    ensure_marks(log, &topics).await?;
    let job = format!("{}-{}", strata_record::time::now_ms(), std::process::id());
    let letter_job = Arc::new(LetterJob {
        filter: replay.filter.clone(),
        marks: topics.marks.clone(),
        job: job.clone(),
        found_in: to_replay(app, log, spec, &partitions, (&topics, &replay.filter)).await?,
    });
    let options = RunOptions {
        clock: replay.clock.clone(),
        crash_after: replay.crash_after,
        ..RunOptions::default()
    };
    let progress = Arc::new(TaskProgress::default());
    let board = TaskBoard::default();
    let live = LiveTasks {
        app,
        log,
        location,
        options: &options,
        partitions: &partitions,
        changelogs: matches!(log, LogAccess::Remote(_)) || app.config.changelogs,
        progress: &progress,
        board: &board,
    };
    let changelogs = changelogs(app, spec, log, live.changelogs).await?;
    let threads = TaskThreads::start(
        &tokio::runtime::Handle::current(),
        app.config.task_thread_count(),
    )
    .map_err(RuntimeError::io("starting the task threads"))?;
    let stop_flag = Arc::new(AtomicBool::new(false));
    let (_targets, no_targets) = watch::channel(None);
    let mut running = tokio::task::JoinSet::new();
    for &partition in letter_job.found_in.keys() {
        let mut setup = live.setup(spec, partition, Arc::clone(&stop_flag), no_targets.clone());
        // Nothing checkpointed or handed over: the job is no live run.
        (setup.checkpoints, setup.rebuild) = (None, None);
        setup.changelogs = changelogs.clone();
        setup.letters = Some(Arc::clone(&letter_job));
        let ended = threads.spawn(move || task::run(setup));
        running.spawn(async move { (partition, ended.await) });
    }
    let mut failure = None;
    tokio::pin!(stop);
    loop {
        let joined = tokio::select! {
            joined = running.join_next() => joined,
            () = &mut stop, if !stop_flag.load(Ordering::Relaxed) => {
                tracing::info!("stopping: each task commits what it replayed");
                stop_flag.store(true, Ordering::Relaxed);
                continue;
            }
        };
        let Some(joined) = joined else { break };
        let (partition, ended) = match joined {
            Ok(joined) => joined,
            Err(error) => {
                stop_flag.store(true, Ordering::Relaxed);
                failure.get_or_insert(panicked(spec, -1, error.to_string()));
                continue;
            }
        };
        let outcome = match ended {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(panic)) => Err(panicked(spec, partition, panic)),
            Err(_) => Err(panicked(spec, partition, "its task thread ended".into())),
        };
        if let Err(error) = outcome {
            stop_flag.store(true, Ordering::Relaxed);
            failure.get_or_insert(error);
        }
    }
    match failure {
        Some(error @ RuntimeError::Fenced { .. }) => {
            return Err(RuntimeError::Config(format!(
                "{error}: an instance of the app, or another dlq replay, started while this one ran and took the task over; stop it and run the replay again (what was committed stays replayed)"
            )));
        }
        Some(error) => return Err(error),
        None => {}
    }
    let (outcomes, waiting) = summary(log, spec, &topics, &job).await?;
    Ok((letter_job.found_in.len(), job, outcomes, waiting))
}

/// A processor's dead-letter topic and its marks topic, as the log names
/// them, and their partition count.
struct Topics {
    letters: String,
    marks: String,
    partitions: i32,
}

/// Makes the marks topic (compacted, as many partitions as the
/// dead-letter topic), or checks the one there: a mark goes to its
/// letter's partition, and retention would forget what was replayed.
async fn ensure_marks(log: &LogAccess, topics: &Topics) -> Result<(), RuntimeError> {
    let compacted = [("cleanup.policy".to_string(), "compact".to_string())];
    let (marks, wanted) = (&topics.marks, topics.partitions);
    let count = log.ensure_topic_with(marks, wanted, &compacted).await?;
    if count != wanted {
        return Err(RuntimeError::Config(format!(
            "topic {marks:?} has {count} partitions, but the dead-letter topic {:?} has {wanted}: a letter's mark goes to the letter's partition; delete {marks:?} (the letters it marks would be replayed again) or give it {wanted} partitions",
            topics.letters
        )));
    }
    check_compacted(log, marks).await
}

/// Which tasks have letters to replay, and in which partitions of the
/// dead-letter topic (read as far as read_committed goes: a letter behind
/// a transaction still open waits for the next replay; a letter a crashed
/// replay's unshipped commit marked may look unmarked, and its task, which
/// ships that commit first, passes it over).
async fn to_replay(
    app: &App,
    log: &LogAccess,
    spec: &ProcessorSpec,
    partitions: &BTreeMap<String, i32>,
    (topics, filter): (&Topics, &LetterFilter),
) -> Result<BTreeMap<i32, BTreeSet<i32>>, RuntimeError> {
    let inputs: Vec<String> = spec.inputs.iter().map(|t| app.log_topic(t)).collect();
    let tasks = 0..partitions[&spec.inputs[0]];
    let mut found_in: BTreeMap<i32, BTreeSet<i32>> = BTreeMap::new();
    for partition in 0..topics.partitions {
        let (letters, marked) = read_letters(log, topics, partition).await?;
        for letter in letters {
            if letter.processor == spec.name
                && letter.headers.is_some()
                && inputs.contains(&letter.origin.0)
                && tasks.contains(&letter.origin.1)
                && !marked.contains_key(&letter.mark_key())
                && filter.admits(&letter)
            {
                found_in
                    .entry(letter.origin.1)
                    .or_default()
                    .insert(partition);
            }
        }
    }
    Ok(found_in)
}

/// Per store of `spec`, its changelog topic, when its writes go to one:
/// remote or when asked (`all`), else (embedded) where the run wrote one
/// (`run --changelogs`): the job must go on writing it.
async fn changelogs(
    app: &App,
    spec: &ProcessorSpec,
    log: &LogAccess,
    all: bool,
) -> Result<Vec<Option<String>>, RuntimeError> {
    let mut changelogs = Vec::new();
    for store in &spec.stores {
        let topic = app.changelog_topic(&store.name);
        let written = all || log.partition_count(&topic).await?.is_some();
        changelogs.push(written.then_some(topic));
    }
    Ok(changelogs)
}

/// The job's marks by outcome, and the processor's letters with no mark,
/// as far as read_committed goes.
async fn summary(
    log: &LogAccess,
    spec: &ProcessorSpec,
    topics: &Topics,
    job: &str,
) -> Result<(BTreeMap<String, u64>, u64), RuntimeError> {
    let (mut outcomes, mut waiting) = (BTreeMap::new(), 0);
    for partition in 0..topics.partitions {
        let (letters, marked) = read_letters(log, topics, partition).await?;
        for (outcome, n) in letter::outcomes(marked.values(), job) {
            *outcomes.entry(outcome).or_insert(0) += n;
        }
        let mine = letters.iter().filter(|l| l.counts_for(&spec.name));
        waiting += mine.filter(|l| !marked.contains_key(&l.mark_key())).count() as u64;
    }
    Ok((outcomes, waiting))
}

/// One partition of the dead-letter topic and its marks.
async fn read_letters(
    log: &LogAccess,
    topics: &Topics,
    partition: i32,
) -> Result<(Vec<Letter>, BTreeMap<(i64, i64), letter::Replayed>), RuntimeError> {
    let marked = letter::marks(fetch_partition(log, &topics.marks, partition).await?);
    let letters = fetch_partition(log, &topics.letters, partition).await?;
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
