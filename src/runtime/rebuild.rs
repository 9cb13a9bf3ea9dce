//! `rebuild`: builds the state of a version's stateful tasks afresh from the
//! log, beside the state in use, and swaps it in once it has caught up.
//!
//! Each task's rebuild runs the processor from the start of its inputs (or
//! from the live task's newest checkpoint, with `--from-checkpoint`) into
//! `<state>/rebuild/<processor>/<partition>`, with emits dropped (the
//! derived topics already hold them) and commits unsynced and far apart
//! (a killed rebuild resumes from its last commit; the swap syncs). It
//! catches up with the live task's committed offsets, again and again
//! while the live task moves, until it is close; then:
//!
//! - the app not running: the rebuild takes the app's run lock, processes
//!   up to the live offsets and swaps the state in itself;
//! - the app running: the live task holds its input for the rebuild to
//!   reach it exactly, and swaps (the handover in `swap`).
//!
//! The state in use is untouched until the swap, and the swap replaces it
//! whole or not at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::cli::open_committed;
use super::error::RuntimeError;
use super::log_access::LogAccess;
use super::progress::ProgressReport;
use super::runner::{
    Location, StartAt, checkpoint_dir, lock_exclusive, lock_running, rebuild_dir, task_dir,
};
use super::spec::TopicOutput;
use super::state::{TaskState, checkpoints};
use super::swap::{self, Handover, decode_offsets, write_whole};
use super::task::{self, Targets, TaskProgress, TaskSetup};
use super::topology::{App, CommitInterval, ProcessorSpec, TaskConfig};

/// A rebuild hands over once it is within this many records of the live
/// task (the live task holds its input while the rebuild covers them).
const CLOSE_ENOUGH: i64 = 50_000;
/// Catch-up rounds before handing over however far behind.
const ROUNDS_MAX: usize = 20;
/// How long a rebuild waits for the running app to answer.
const HANDOVER_MAX: Duration = Duration::from_secs(120);
/// Holds a rebuild answers before it gives up keeping up with the app.
const HOLDS_MAX: usize = 10;
/// How often a rebuild waiting for a hold catches up with the live task.
const CATCH_UP_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Default)]
pub struct RebuildOptions {
    /// Only the processor keeping this store (all its stores are rebuilt).
    pub store: Option<String>,
    /// Start from each live task's newest checkpoint instead of the log's
    /// beginning (needed once retention has deleted the start).
    pub from_checkpoint: bool,
    /// Show progress on stderr this often (see `progress`).
    pub progress_every: Option<Duration>,
    /// Commit interval and WAL syncing of the rebuild itself; by default
    /// [`REBUILD_COMMIT`], unsynced (the swap syncs).
    pub commit: Option<(CommitInterval, bool)>,
}

/// How far apart a rebuild commits by default: a commit writes every key
/// changed since the last, so fewer commits write fewer keys per record,
/// and a killed rebuild only redoes what followed its last commit.
pub const REBUILD_COMMIT: CommitInterval = CommitInterval {
    records: 5_000_000,
    bytes: 1 << 30,
    interval: Duration::from_secs(30),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildSummary {
    pub tasks: usize,
    /// Records processed by the rebuild.
    pub records: u64,
    pub elapsed: Duration,
    /// Tasks whose state the running app swapped in (the others' the
    /// rebuild swapped itself, the app not running).
    pub handed_over: usize,
}

/// One task to rebuild.
struct Job {
    spec: ProcessorSpec,
    partition: i32,
    live: PathBuf,
    rebuilt: PathBuf,
    outputs: Vec<TopicOutput>,
    /// The live task's offsets when the rebuild began: its first target.
    first_target: Targets,
    /// Whether those are final (the app is not running and cannot start).
    settled: bool,
    /// Where the live task began reading each input: where the rebuild
    /// begins (from 0 where that was not recorded).
    starts: Targets,
}

/// What every job shares.
struct Shared {
    log: LogAccess,
    app: App,
    progress: Arc<TaskProgress>,
    stop: Arc<AtomicBool>,
    config: TaskConfig,
}

impl App {
    /// Rebuilds the state of the app's stateful tasks at `location` (a
    /// version's, see [`App::as_version`]); see the module docs.
    pub async fn rebuild(
        &self,
        location: &Location,
        options: RebuildOptions,
    ) -> Result<RebuildSummary, RuntimeError> {
        self.check().map_err(RuntimeError::Config)?;
        let started = Instant::now();
        let root = location.state_dir().to_path_buf();
        let selected = self.rebuilt_processors(options.store.as_deref())?;
        // Embedded, the app and the rebuild cannot both open the log.
        let mut lock = match location {
            Location::Embedded { data_dir, .. } => Some(lock_running(&root).map_err(|_| {
                RuntimeError::Config(format!(
                    "the app is running on {} (embedded), and only one process can open a log directory; rebuild through its Kafka port: run the app with `run --serve ADDR`, then `rebuild --bootstrap ADDR --state-dir {}/apps/{}` (its state directory)",
                    data_dir.display(),
                    data_dir.display(),
                    self.name
                ))
            })?),
            Location::Remote { .. } => None,
        };
        // One rebuild at a time: they share the rebuild directories.
        let _rebuilding = lock_rebuilds(&root)?;
        let (log, embedded) = super::runner::open(location).await?;
        let partitions = self.resolve(&log).await?;
        let mut jobs = Vec::new();
        // Opened now for the swap when the app cannot run meanwhile (the
        // rebuild holds its run lock).
        let mut live_states: Vec<Option<TaskState>> = Vec::new();
        for spec in selected {
            let outputs = self.outputs(spec, &partitions);
            for partition in 0..partitions[&spec.inputs[0]] {
                let live = task_dir(&root, &spec.name, partition);
                let rebuilt = rebuild_dir(&root, &spec.name, partition);
                if lock.is_some() {
                    swap::recover(&live, &rebuilt)?;
                }
                // Handover files of an earlier rebuild, stopped or killed.
                Handover::beside(&rebuilt).clear_all()?;
                let Some(read_only) = open_committed(&live)? else {
                    continue; // never committed: nothing to rebuild
                };
                let (first_target, starts) =
                    (read_only.input_offsets(), read_only.start_offsets()?);
                drop(read_only);
                if first_target.is_empty() {
                    continue;
                }
                if let Some(missing) = spec.inputs.iter().find(|t| !first_target.contains_key(*t)) {
                    return Err(RuntimeError::Config(format!(
                        "task {}/{partition} has no offset for its input {missing:?} yet (a new input?): run the app until it has read from it, then rebuild",
                        spec.name
                    )));
                }
                let live_state = match &lock {
                    Some(_) => {
                        let stores = store_names(spec);
                        let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
                        Some(TaskState::open(&live, &stores, true)?)
                    }
                    None => None,
                };
                if options.from_checkpoint && open_committed(&rebuilt)?.is_none() {
                    seed_from_checkpoint(&root, spec, partition, &rebuilt)?;
                }
                let job = Job {
                    spec: spec.clone(),
                    partition,
                    live,
                    rebuilt,
                    outputs: outputs.clone(),
                    settled: live_state.is_some(),
                    first_target,
                    starts,
                };
                self.check_retained(&log, &root, &job, options.from_checkpoint)
                    .await?;
                jobs.push(job);
                live_states.push(live_state);
            }
        }
        if jobs.is_empty() {
            return Err(RuntimeError::Config(format!(
                "nothing to rebuild: no stateful task has committed state under {}",
                root.display()
            )));
        }
        let shared = Arc::new(Shared {
            log,
            app: self.clone(),
            progress: Arc::new(TaskProgress::default()),
            stop: Arc::new(AtomicBool::new(false)),
            config: TaskConfig {
                // Far-apart, unsynced commits: a killed rebuild resumes
                // from its last commit; the swap syncs everything.
                commit: options.commit.map_or(REBUILD_COMMIT, |c| c.0),
                sync: options.commit.is_some_and(|c| c.1),
                checkpoints: Default::default(),
                ..self.config
            },
        });
        let (finished, mut finishing) = watch::channel(false);
        let reporting = options.progress_every.map(|every| {
            let progress = Arc::clone(&shared.progress);
            let mut report = ProgressReport::new(&format!("{} rebuild", self.name), every);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(report.tick());
                loop {
                    let done = tokio::select! {
                        _ = ticker.tick() => false,
                        _ = finishing.changed() => true,
                    };
                    let records = progress.records.load(Ordering::Relaxed);
                    let total = progress.total.load(Ordering::Relaxed);
                    if done {
                        report.finish(records, total);
                        return;
                    }
                    report.update(records, total);
                }
            })
        });
        let jobs = Arc::new(jobs);
        let result: Result<usize, RuntimeError> = async {
            // Catch up, every task at once.
            each_job(&jobs, &shared, |shared, job| async move {
                catch_up(&shared, &job).await
            })
            .await?;
            if lock.is_none() {
                lock = lock_running(&root).ok();
            }
            if lock.is_some() {
                // Not running: swap each in, up to date.
                for (job, live_state) in jobs.iter().zip(&mut live_states) {
                    let stores = store_names(&job.spec);
                    let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
                    let live_state = match live_state.take() {
                        Some(state) => state,
                        None => TaskState::open(&job.live, &stores, true)?,
                    };
                    let target = live_state.input_offsets();
                    if target != job.first_target {
                        run_to(&shared, job, target).await?;
                    }
                    swap::swap_in(&job.live, live_state, &job.rebuilt, &stores, true)?;
                    Handover::beside(&job.rebuilt).clear()?;
                }
                Ok(0)
            } else {
                each_job(&jobs, &shared, |shared, job| async move {
                    hand_over(&shared, &job).await
                })
                .await?;
                Ok(jobs.len())
            }
        }
        .await;
        let records = shared.progress.records.load(Ordering::Relaxed);
        drop(shared);
        let _ = finished.send(true);
        if let Some(reporting) = reporting {
            let _ = reporting.await;
        }
        if let Some(manager) = embedded
            && let Ok(manager) = Arc::try_unwrap(manager)
        {
            manager.close()?;
        }
        drop(lock);
        Ok(RebuildSummary {
            tasks: jobs.len(),
            records,
            elapsed: started.elapsed(),
            handed_over: result?,
        })
    }

    fn rebuilt_processors(&self, store: Option<&str>) -> Result<Vec<&ProcessorSpec>, RuntimeError> {
        let selected: Vec<&ProcessorSpec> = self
            .processors
            .iter()
            .filter(|p| !p.stores.is_empty())
            .filter(|p| store.is_none_or(|s| p.stores.iter().any(|t| t.name == s)))
            .collect();
        match (store, selected.is_empty()) {
            (Some(store), true) => Err(RuntimeError::Config(format!("no store named {store:?}"))),
            (None, true) => Err(RuntimeError::Config(format!(
                "app {:?} keeps no state: nothing to rebuild",
                self.name
            ))),
            _ => Ok(selected),
        }
    }

    /// Refuses a rebuild whose inputs no longer reach back to where it
    /// would start.
    async fn check_retained(
        &self,
        log: &LogAccess,
        root: &Path,
        job: &Job,
        from_checkpoint: bool,
    ) -> Result<(), RuntimeError> {
        let position = live_offsets(&job.rebuilt)?;
        for topic in &job.spec.inputs {
            let log_topic = self.log_topic(topic);
            let start = log.start_offset(&log_topic, job.partition).await?;
            let from = job.starts.get(topic).copied().unwrap_or(0);
            let at = position.get(topic).copied().unwrap_or(from);
            if start <= at {
                continue;
            }
            let task = format!("{}/{}", job.spec.name, job.partition);
            let newest = checkpoints(&checkpoint_dir(root, &job.spec.name, job.partition))
                .unwrap_or_default()
                .last()
                .map(|(offset, _)| *offset);
            let hint = match (from_checkpoint, newest) {
                (false, Some(offset)) if offset >= start => format!(
                    "; --from-checkpoint starts from the task's checkpoint at offset {offset}, which covers the gap"
                ),
                (false, _) => "; no checkpoint of the task reaches past the gap".to_string(),
                (true, _) => " and the task's newest checkpoint does not reach past it".to_string(),
            };
            return Err(RuntimeError::Config(format!(
                "cannot rebuild task {task}: {log_topic}/{} now starts at offset {start} (retention deleted the records before it), but the rebuild would start at offset {at}{hint}",
                job.partition
            )));
        }
        Ok(())
    }
}

/// Runs `step` for every job at once; the first error stops the others.
async fn each_job<F, Fut>(
    jobs: &Arc<Vec<Job>>,
    shared: &Arc<Shared>,
    step: F,
) -> Result<(), RuntimeError>
where
    F: Fn(Arc<Shared>, JobRef) -> Fut,
    Fut: std::future::Future<Output = Result<(), RuntimeError>> + Send + 'static,
{
    let mut running = tokio::task::JoinSet::new();
    for at in 0..jobs.len() {
        running.spawn(step(Arc::clone(shared), JobRef(Arc::clone(jobs), at)));
    }
    let mut failure = None;
    while let Some(joined) = running.join_next().await {
        let result =
            joined.map_err(|e| RuntimeError::Config(format!("a rebuild task panicked: {e}")))?;
        if let Err(error) = result {
            shared.stop.store(true, Ordering::Relaxed);
            failure.get_or_insert(error);
        }
    }
    failure.map_or(Ok(()), Err)
}

/// One job of a shared list.
struct JobRef(Arc<Vec<Job>>, usize);

impl std::ops::Deref for JobRef {
    type Target = Job;

    fn deref(&self) -> &Job {
        &self.0[self.1]
    }
}

fn store_names(spec: &ProcessorSpec) -> Vec<String> {
    spec.stores.iter().map(|s| s.name.clone()).collect()
}

/// A task's committed input offsets (empty when it never committed).
fn live_offsets(dir: &Path) -> Result<Targets, RuntimeError> {
    match open_committed(dir)? {
        Some(state) => Ok(state.input_offsets()),
        None => Ok(BTreeMap::new()),
    }
}

fn behind(rebuilt: &Targets, live: &Targets) -> i64 {
    live.iter()
        .map(|(topic, end)| (end - rebuilt.get(topic).copied().unwrap_or(0)).max(0))
        .sum()
}

/// Rebuilds towards the live offsets until close to them.
async fn catch_up(shared: &Shared, job: &Job) -> Result<(), RuntimeError> {
    let mut target = job.first_target.clone();
    for _ in 0..ROUNDS_MAX {
        run_to(shared, job, target.clone()).await?;
        if job.settled {
            break;
        }
        let live = live_offsets(&job.live)?;
        if behind(&target, &live) <= CLOSE_ENOUGH {
            break;
        }
        target = live;
    }
    Ok(())
}

/// Runs the rebuild of one task up to `targets`, then closes its state.
async fn run_to(shared: &Shared, job: &Job, targets: Targets) -> Result<(), RuntimeError> {
    let app = &shared.app;
    let wanted = targets.clone();
    let (_keep, targets) = watch::channel(Some(targets));
    let setup = TaskSetup {
        spec: job.spec.clone(),
        partition: job.partition,
        dir: job.rebuilt.clone(),
        checkpoints: None,
        log_topics: job.spec.inputs.iter().map(|t| app.log_topic(t)).collect(),
        start: (job.spec.inputs.iter())
            .map(|t| {
                job.starts
                    .get(t)
                    .map_or(StartAt::Earliest, |o| StartAt::Offset(*o))
            })
            .collect(),
        emits: false,
        rebuild: None,
        outputs: job.outputs.clone(),
        config: shared.config,
        log: shared.log.clone(),
        stop: Arc::clone(&shared.stop),
        targets,
        progress: Arc::clone(&shared.progress),
    };
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(task::run(setup)))
        .await
        .map_err(|e| RuntimeError::Config(format!("a rebuild task panicked: {e}")))??;
    let reached = live_offsets(&job.rebuilt)?;
    if reached != wanted {
        return Err(RuntimeError::Config(format!(
            "the rebuild of task {}/{} stopped at {reached:?} before {wanted:?}",
            job.spec.name, job.partition
        )));
    }
    Ok(())
}

/// Meets the running app's task (see `swap`) until it has swapped the
/// rebuilt state in; withdraws (removes `.ready`) on any other way out.
async fn hand_over(shared: &Shared, job: &Job) -> Result<(), RuntimeError> {
    let files = Handover::beside(&job.rebuilt);
    files.clear_all()?;
    files.announce()?;
    let result = meet(shared, job, &files).await;
    if !matches!(result, Ok(true)) {
        let _ = std::fs::remove_file(&files.ready);
    }
    result.map(|_| ())
}

/// True once the live task swapped the rebuilt state in; false when the
/// rebuild is stopping. Between holds it keeps catching up, so that the
/// next hold is short.
async fn meet(shared: &Shared, job: &Job, files: &Handover) -> Result<bool, RuntimeError> {
    let mut answered: Option<String> = None;
    let (mut answers, mut deadline) = (0, Instant::now() + HANDOVER_MAX);
    let mut caught_up_at = Instant::now();
    loop {
        if !files.ready.exists() {
            let outcome = std::fs::read_to_string(&files.outcome).unwrap_or_default();
            let _ = std::fs::remove_file(&files.outcome);
            return match outcome.strip_prefix("refused: ") {
                _ if outcome == swap::SWAPPED => Ok(true),
                Some(why) => Err(RuntimeError::Config(format!(
                    "task {}/{}: the running app refused the rebuilt state: {why}",
                    job.spec.name, job.partition
                ))),
                None => Err(RuntimeError::Config(format!(
                    "task {}/{}: the running app withdrew from the handover (did it stop?); the rebuilt state is kept: run rebuild again to resume",
                    job.spec.name, job.partition
                ))),
            };
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match std::fs::read_to_string(&files.hold).ok() {
            Some(token) if answered.as_ref() != Some(&token) => {
                answers += 1;
                if answers > HOLDS_MAX {
                    return Err(RuntimeError::Config(format!(
                        "task {}/{}: the rebuild did not keep up with the running app ({HOLDS_MAX} holds went by); the rebuilt state is kept: run rebuild again when the app is less busy",
                        job.spec.name, job.partition
                    )));
                }
                let offsets = decode_offsets(&token).ok_or_else(|| {
                    RuntimeError::Config(format!("unreadable {}", files.hold.display()))
                })?;
                run_to(shared, job, offsets).await?;
                write_whole(&files.caught_up, &token)?;
                answered = Some(token);
                deadline = Instant::now() + HANDOVER_MAX;
            }
            // Answered; the answer may have been dropped with a hold the
            // live task gave up on, and the next hold is the same.
            Some(token)
                if std::fs::read_to_string(&files.caught_up).ok().as_ref() != Some(&token) =>
            {
                write_whole(&files.caught_up, &token)?;
            }
            Some(_) => {}
            None if caught_up_at.elapsed() >= CATCH_UP_EVERY => {
                caught_up_at = Instant::now();
                // Closer to the live offsets for the next hold; a live
                // state being swapped or opened is left for the next round.
                if let Ok(live) = live_offsets(&job.live)
                    && behind(&live_offsets(&job.rebuilt)?, &live) > 0
                    && !files.hold.exists()
                {
                    run_to(shared, job, live).await?;
                }
            }
            None => {}
        }
        if Instant::now() > deadline {
            return Err(RuntimeError::Config(format!(
                "task {}/{}: the running app did not take the rebuilt state within {} s (stopped, or a build without rebuild support?); the rebuilt state is kept: run rebuild again to resume",
                job.spec.name,
                job.partition,
                HANDOVER_MAX.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Holds `<state>/rebuild/.lock` while a rebuild runs.
fn lock_rebuilds(root: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, RuntimeError> {
    let path = swap::rebuild_lock(&root.join("rebuild"));
    lock_exclusive(&path, || {
        format!(
            "another rebuild of this app is running (it holds {})",
            path.display()
        )
    })
}

/// Starts a task's rebuild from the live task's newest checkpoint: its
/// table files hard-linked (they never change), the rest copied.
fn seed_from_checkpoint(
    root: &Path,
    spec: &ProcessorSpec,
    partition: i32,
    rebuilt: &Path,
) -> Result<(), RuntimeError> {
    let dir = checkpoint_dir(root, &spec.name, partition);
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    let newest = checkpoints(&dir)
        .map_err(io(format!("listing {}", dir.display())))?
        .pop()
        .ok_or_else(|| {
            RuntimeError::Config(format!(
                "task {}/{partition} has no checkpoint to start from (take one with `checkpoint`, or run with --checkpoint-records / --checkpoint-secs)",
                spec.name
            ))
        })?;
    if rebuilt.exists() {
        std::fs::remove_dir_all(rebuilt).map_err(io(format!("removing {}", rebuilt.display())))?;
    }
    // Copied aside and renamed into place: a cut copy is never taken for a
    // state.
    let seeding = rebuilt.with_extension("seeding");
    if seeding.exists() {
        std::fs::remove_dir_all(&seeding).map_err(io(format!("removing {}", seeding.display())))?;
    }
    std::fs::create_dir_all(&seeding).map_err(io(format!("creating {}", seeding.display())))?;
    let entries =
        std::fs::read_dir(&newest.1).map_err(io(format!("listing {}", newest.1.display())))?;
    for entry in entries {
        let entry = entry.map_err(io(format!("listing {}", newest.1.display())))?;
        let (from, to) = (entry.path(), seeding.join(entry.file_name()));
        let linked =
            from.extension().is_some_and(|e| e == "sst") && std::fs::hard_link(&from, &to).is_ok();
        if !linked {
            std::fs::copy(&from, &to).map_err(io(format!("copying {}", from.display())))?;
        }
        std::fs::File::open(&to)
            .and_then(|file| file.sync_all())
            .map_err(io(format!("syncing {}", to.display())))?;
    }
    std::fs::rename(&seeding, rebuilt).map_err(io(format!("renaming {}", seeding.display())))?;
    Ok(())
}
