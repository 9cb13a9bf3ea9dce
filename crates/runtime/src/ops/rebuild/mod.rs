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
//!   reach it exactly, and swaps (`task::handover`).
//!
//! The state in use is untouched until the swap, and the swap replaces it
//! whole or not at all.
//!
//! - `job`: one task's rebuild, run to target offsets, caught up.
//! - `meet`: the rebuild's side of the handover with a running app.
//! - `seed`: a rebuild started from a checkpoint.
//! - `endpoints`: its metrics and console while it runs.

mod endpoints;
mod job;
mod meet;
mod seed;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::board::TaskBoard;
use crate::error::RuntimeError;
use crate::layout::{self, Lock, checkpoints, lock_rebuilds, lock_running};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::progress::ProgressReport;
use crate::state::TaskState;
use crate::task::handover::Handover;
use crate::task::threads::TaskThreads;
use crate::task::{TaskProgress, swap};
use crate::topology::{App, CommitInterval, ProcessorSpec, TaskConfig};

use super::dump_state::open_committed;
use super::open::{open, outputs, resolve};
use job::{Job, Shared, catch_up, each_job, live_offsets, run_to};
use meet::hand_over;
use seed::seed_from_checkpoint;

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
    /// Serve the rebuild's metrics on this address (`GET /metrics`).
    pub metrics: Option<SocketAddr>,
    /// Serve the web console on this address: the rebuild's progress and
    /// tasks (see `endpoints`).
    pub console: Option<SocketAddr>,
    /// How those endpoints are secured: loopback only unless TLS and a
    /// token (see strata-http's `access`).
    pub http: strata_http::HttpSecurity,
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

/// Rebuilds the state of the app's stateful tasks at `location` (a
/// version's, see [`App::as_version`]); see the module docs.
pub async fn rebuild(
    app: &App,
    location: &Location,
    options: RebuildOptions,
) -> Result<RebuildSummary, RuntimeError> {
    app.check().map_err(RuntimeError::Config)?;
    let access = endpoints::check(&options)?;
    let started = Instant::now();
    let root = location.state_dir().to_path_buf();
    let selected = rebuilt_processors(app, options.store.as_deref())?;
    let mut lock = lock_out_the_app(app, location)?;
    // One rebuild at a time: they share the rebuild directories.
    let _rebuilding = lock_rebuilds(&root)?;
    let (log, embedded) = open(location).await?;
    let partitions = resolve(app, &log).await?;
    let mut planned = Vec::new();
    for spec in selected {
        for partition in 0..partitions[&spec.inputs[0]] {
            let locked = lock.is_some();
            let task = (spec, partition);
            let Some(plan) = plan(app, &root, task, &partitions, locked, &options)? else {
                continue;
            };
            check_retained(app, &log, &root, &plan.0, options.from_checkpoint).await?;
            planned.push(plan);
        }
    }
    if planned.is_empty() {
        return Err(RuntimeError::Rebuild {
            task: format!("{} (every task)", app.name()),
            reason: format!(
                "nothing to rebuild: no stateful task has committed state under {}; run the app first",
                root.display()
            ),
        });
    }
    let (jobs, mut live_states): (Vec<Job>, Vec<Option<TaskState>>) = planned.into_iter().unzip();
    let threads = TaskThreads::start(
        &tokio::runtime::Handle::current(),
        app.config.task_thread_count(),
    )
    .map_err(RuntimeError::io("starting the task threads"))?;
    let shared = Arc::new(Shared {
        threads,
        log,
        app: app.clone(),
        progress: Arc::new(TaskProgress::default()),
        board: TaskBoard::default(),
        stop: Arc::new(AtomicBool::new(false)),
        config: TaskConfig {
            // Far-apart, unsynced commits: a killed rebuild resumes
            // from its last commit; the swap syncs everything.
            commit: options.commit.map_or(REBUILD_COMMIT, |c| c.0),
            sync: options.commit.is_some_and(|c| c.1),
            checkpoints: Default::default(),
            ..app.config
        },
    });
    let (finished, finishing) = watch::channel(false);
    let reporting =
        (options.progress_every).map(|every| report_progress(&app.name, every, &shared, finishing));
    let jobs = Arc::new(jobs);
    let mut served = Vec::new();
    let result: Result<usize, RuntimeError> = async {
        served = endpoints::serve(&shared, location, &options, &access).await?;
        // Catch up, every task at once.
        each_job(&jobs, &shared, |shared, job| async move {
            catch_up(&shared, &job).await
        })
        .await?;
        if lock.is_none() {
            lock = lock_running(&root).ok();
        }
        if lock.is_some() {
            swap_all_in(&shared, &jobs, &mut live_states).await?;
            return Ok(0);
        }
        each_job(&jobs, &shared, |shared, job| async move {
            hand_over(&shared, &job).await
        })
        .await?;
        Ok(jobs.len())
    }
    .await;
    let records = shared.progress.records.load(Ordering::Relaxed);
    drop((served, shared));
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

/// Embedded, the app's run lock: the app and the rebuild cannot both open
/// the log (an error says how to rebuild through the app's Kafka port).
/// Remote, none: the running app hands over instead.
fn lock_out_the_app(app: &App, location: &Location) -> Result<Option<Lock>, RuntimeError> {
    let Location::Embedded { data_dir, .. } = location else {
        return Ok(None);
    };
    let root = location.state_dir();
    let locked = lock_running(root).map_err(|_| RuntimeError::Locked {
        path: layout::running_lock(root),
        why: format!(
            "the app is running on {} (embedded), and only one process can open a log directory; rebuild through its Kafka port: run the app with `run --serve ADDR`, then `rebuild --bootstrap ADDR --state-dir {}/apps/{}` (its state directory)",
            data_dir.display(),
            data_dir.display(),
            app.name
        ),
    })?;
    Ok(Some(locked))
}

/// The rebuild of one task, with its live state opened for the swap when
/// the app cannot run meanwhile (`locked`: the rebuild holds its run
/// lock); None for a task that never committed.
fn plan(
    app: &App,
    root: &Path,
    (spec, partition): (&ProcessorSpec, i32),
    partitions: &BTreeMap<String, i32>,
    locked: bool,
    options: &RebuildOptions,
) -> Result<Option<(Job, Option<TaskState>)>, RuntimeError> {
    let live = layout::task_dir(root, &spec.name, partition);
    let rebuilt = layout::rebuild_dir(root, &spec.name, partition);
    if locked {
        swap::recover(&live, &rebuilt)?;
    }
    // Handover files of an earlier rebuild, stopped or killed.
    Handover::beside(&rebuilt).clear_all()?;
    let Some(read_only) = open_committed(&live)? else {
        return Ok(None); // never committed: nothing to rebuild
    };
    let (first_target, starts) = (read_only.input_offsets(), read_only.start_offsets()?);
    drop(read_only);
    if first_target.is_empty() {
        return Ok(None);
    }
    if let Some(missing) = spec.inputs.iter().find(|t| !first_target.contains_key(*t)) {
        return Err(RuntimeError::Rebuild {
            task: format!("{}/{partition}", spec.name),
            reason: format!(
                "no offset for its input {missing:?} yet (a new input?): run the app until it has read from it, then rebuild"
            ),
        });
    }
    let live_state = match locked {
        true => {
            let stores = spec.store_names();
            Some(TaskState::open(&live, &stores, true)?)
        }
        false => None,
    };
    if options.from_checkpoint && open_committed(&rebuilt)?.is_none() {
        seed_from_checkpoint(root, spec, partition, &rebuilt)?;
    }
    let job = Job {
        spec: spec.clone(),
        partition,
        live,
        rebuilt,
        outputs: outputs(app, spec, partitions),
        settled: live_state.is_some(),
        first_target,
        starts,
    };
    Ok(Some((job, live_state)))
}

/// The app not running: each rebuilt state brought to the live one's
/// offsets and swapped in.
async fn swap_all_in(
    shared: &Shared,
    jobs: &[Job],
    live_states: &mut [Option<TaskState>],
) -> Result<(), RuntimeError> {
    for (job, live_state) in jobs.iter().zip(live_states) {
        let stores = job.spec.store_names();
        let live_state = match live_state.take() {
            Some(state) => state,
            None => TaskState::open(&job.live, &stores, true)?,
        };
        if live_state.lineage().is_some() {
            return Err(RuntimeError::Rebuild {
                task: format!("{}/{}", job.spec.name, job.partition),
                reason: "the live task writes its stores to changelogs, which a rebuilt state would not match; delete the task's state directory instead (it is restored from the changelogs)".into(),
            });
        }
        let target = live_state.input_offsets();
        if target != job.first_target {
            run_to(shared, job, target).await?;
        }
        swap::swap_in(&job.live, live_state, &job.rebuilt, &stores, true)?;
        Handover::beside(&job.rebuilt).clear()?;
    }
    Ok(())
}

/// Prints the rebuild's progress every `every` until `finishing` changes.
fn report_progress(
    app: &str,
    every: Duration,
    shared: &Shared,
    mut finishing: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let progress = Arc::clone(&shared.progress);
    let mut report = ProgressReport::new(&format!("{app} rebuild"), every);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(report.tick());
        loop {
            let done = tokio::select! {
                _ = ticker.tick() => false,
                _ = finishing.changed() => true,
            };
            let records = progress.done.load(Ordering::Relaxed);
            let total = progress.total.load(Ordering::Relaxed);
            if done {
                report.finish(records, total);
                return;
            }
            report.update(records, total);
        }
    })
}

fn rebuilt_processors<'a>(
    app: &'a App,
    store: Option<&str>,
) -> Result<Vec<&'a ProcessorSpec>, RuntimeError> {
    let selected: Vec<&ProcessorSpec> = app
        .processors
        .iter()
        .filter(|p| !p.stores.is_empty())
        .filter(|p| store.is_none_or(|s| p.stores.iter().any(|t| t.name == s)))
        .collect();
    match (store, selected.is_empty()) {
        (Some(store), true) => Err(RuntimeError::UnknownStore {
            store: store.to_string(),
            declared: app.declared_stores(),
        }),
        (None, true) => Err(RuntimeError::Config(format!(
            "app {:?} keeps no state: nothing to rebuild",
            app.name
        ))),
        _ => Ok(selected),
    }
}

/// Refuses a rebuild whose inputs no longer reach back to where it
/// would start.
async fn check_retained(
    app: &App,
    log: &LogAccess,
    root: &Path,
    job: &Job,
    from_checkpoint: bool,
) -> Result<(), RuntimeError> {
    let position = live_offsets(&job.rebuilt)?;
    for topic in &job.spec.inputs {
        let log_topic = app.log_topic(topic);
        let start = log.start_offset(&log_topic, job.partition).await?;
        let from = job.starts.get(topic).copied().unwrap_or(0);
        let at = position.get(topic).copied().unwrap_or(from);
        if start <= at {
            continue;
        }
        let task = format!("{}/{}", job.spec.name, job.partition);
        let newest = checkpoints(&layout::checkpoint_dir(root, &job.spec.name, job.partition))
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
        return Err(RuntimeError::Rebuild {
            task,
            reason: format!(
                "{log_topic}/{} now starts at offset {start} (retention deleted the records before it), but the rebuild would start at offset {at}{hint}",
                job.partition
            ),
        });
    }
    Ok(())
}
