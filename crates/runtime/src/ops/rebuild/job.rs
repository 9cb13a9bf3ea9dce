//! One task's rebuild: its job (where the live and rebuilt states are,
//! its first target), run to target offsets on a blocking thread like a
//! live task (emits dropped), and caught up with the live task round after
//! round until close enough to hand over.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::board::TaskBoard;
use crate::clock::Clock;
use crate::error::RuntimeError;
use crate::log_access::LogAccess;
use crate::ops::dump_state::open_committed;
use crate::spec::TopicOutput;
use crate::task::threads::TaskThreads;
use crate::task::{self, StartAt, Targets, TaskProgress, TaskSetup};
use crate::topology::{App, ProcessorSpec, TaskConfig};

use super::{CLOSE_ENOUGH, ROUNDS_MAX};

/// One task to rebuild.
pub(super) struct Job {
    pub spec: ProcessorSpec,
    pub partition: i32,
    pub live: PathBuf,
    pub rebuilt: PathBuf,
    pub outputs: Vec<TopicOutput>,
    /// The live task's offsets when the rebuild began: its first target.
    pub first_target: Targets,
    /// Whether those are final (the app is not running and cannot start).
    pub settled: bool,
    /// Where the live task began reading each input: where the rebuild
    /// begins (from 0 where that was not recorded).
    pub starts: Targets,
}

/// What every job shares.
pub(super) struct Shared {
    pub log: LogAccess,
    pub app: App,
    pub progress: Arc<TaskProgress>,
    /// Where the jobs' tasks count what they do (for the metrics).
    pub board: TaskBoard,
    pub stop: Arc<AtomicBool>,
    pub config: TaskConfig,
    /// The threads the jobs' tasks run on.
    pub threads: TaskThreads,
}

/// Runs `step` for every job at once; the first error stops the others.
pub(super) async fn each_job<F, Fut>(
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
        let result = joined.map_err(|e| RuntimeError::TaskPanicked {
            task: "a rebuild".into(),
            reason: e.to_string(),
        })?;
        if let Err(error) = result {
            shared.stop.store(true, Ordering::Relaxed);
            failure.get_or_insert(error);
        }
    }
    failure.map_or(Ok(()), Err)
}

/// One job of a shared list.
pub(super) struct JobRef(Arc<Vec<Job>>, usize);

impl std::ops::Deref for JobRef {
    type Target = Job;

    fn deref(&self) -> &Job {
        &self.0[self.1]
    }
}

/// A task's committed input offsets (empty when it never committed).
pub(super) fn live_offsets(dir: &Path) -> Result<Targets, RuntimeError> {
    match open_committed(dir)? {
        Some(state) => Ok(state.input_offsets()),
        None => Ok(BTreeMap::new()),
    }
}

pub(super) fn behind(rebuilt: &Targets, live: &Targets) -> i64 {
    live.iter()
        .map(|(topic, end)| (end - rebuilt.get(topic).copied().unwrap_or(0)).max(0))
        .sum()
}

/// Rebuilds towards the live offsets until close to them.
pub(super) async fn catch_up(shared: &Shared, job: &Job) -> Result<(), RuntimeError> {
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
pub(super) async fn run_to(
    shared: &Shared,
    job: &Job,
    targets: Targets,
) -> Result<(), RuntimeError> {
    let app = &shared.app;
    let wanted = targets.clone();
    let (_keep, targets) = watch::channel(Some(targets));
    let setup = TaskSetup {
        app: app.name.clone(),
        version: app.version_name().to_string(),
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
        changelogs: vec![None; job.spec.stores.len()],
        txn: None,
        positions: None,
        config: shared.config,
        log: shared.log.clone(),
        stop: Arc::clone(&shared.stop),
        targets,
        // A rebuild runs to the targets it has from the start.
        until_end: true,
        progress: Arc::clone(&shared.progress),
        board: shared.board.clone(),
        clock: Clock::System,
        letters: None,
        crash_after: None,
    };
    let panicked = |reason: String| RuntimeError::TaskPanicked {
        task: format!("{}/{} (rebuild)", job.spec.name, job.partition),
        reason,
    };
    match shared.threads.spawn(move || task::run(setup)).await {
        Ok(Ok(outcome)) => outcome?,
        Ok(Err(panic)) => return Err(panicked(panic)),
        Err(_) => return Err(panicked("its task thread ended".into())),
    }
    let reached = live_offsets(&job.rebuilt)?;
    if reached != wanted {
        return Err(RuntimeError::Rebuild {
            task: format!("{}/{}", job.spec.name, job.partition),
            reason: format!(
                "it stopped at {reached:?} before {wanted:?}; run rebuild again to resume"
            ),
        });
    }
    Ok(())
}
