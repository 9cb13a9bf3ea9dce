//! The runner: the tasks and standby copies of one instance, started,
//! followed through the group's assignments, and given up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::board::TaskBoard;
use crate::error::RuntimeError;
use crate::group::{Assigned, TaskId};
use crate::layout;
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::task::standby::{self, StandbySetup};
use crate::task::threads::{Ended, TaskThreads};
use crate::task::transaction::TxnNames;
use crate::task::{self, Checkpoints, StartAt, Targets, TaskProgress, TaskSetup};
use crate::topology::{App, ProcessorSpec};

use super::super::open::outputs;
use super::RunOptions;

/// What task `id` run on the task threads ended with; a panic there goes
/// on as a panic of the runner's own task for it (the run fails, naming
/// it).
fn joined<T>(id: &TaskId, ended: Result<Ended<T>, tokio::sync::oneshot::error::RecvError>) -> T {
    match ended {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => panic!("task {id} panicked: {panic}"),
        Err(_) => panic!("task {id}: its task thread ended"),
    }
}

/// One task as the runner tracks it.
pub(super) struct TaskHandle {
    pub(super) processor: usize,
    pub(super) partition: i32,
    pub(super) targets: watch::Sender<Option<Targets>>,
    /// Tells this task (alone) to commit and stop.
    pub(super) stop: Arc<AtomicBool>,
    pub(super) phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Running,
    /// Told to stop because the group gave the task to another instance.
    GivingUp,
    /// Reached its targets (`until_end`) or stopped.
    Done,
    /// Not running here: given up, fenced, or never started.
    Away,
}

/// What every task of the run shares, and how one is set up.
pub(super) struct Runner<'a> {
    pub(super) app: &'a App,
    pub(super) log: &'a LogAccess,
    pub(super) location: &'a Location,
    pub(super) options: &'a RunOptions,
    pub(super) partitions: BTreeMap<String, i32>,
    pub(super) changelogs: bool,
    pub(super) progress: Arc<TaskProgress>,
    pub(super) board: TaskBoard,
    /// The threads the tasks and standby copies run on.
    pub(super) threads: TaskThreads,
    pub(super) tasks: BTreeMap<TaskId, TaskHandle>,
    pub(super) running: JoinSet<(TaskId, Result<(), RuntimeError>)>,
    /// Tasks started so far (a task started twice counts twice).
    pub(super) started: usize,
    /// Standby copies kept here, each with its stop flag.
    pub(super) standbys: BTreeMap<TaskId, Arc<AtomicBool>>,
    pub(super) standby_running: JoinSet<(TaskId, Result<(), RuntimeError>)>,
    /// Tasks assigned here whose standby copy is still letting go of their
    /// state directory: they start once it has.
    pub(super) waiting: BTreeSet<TaskId>,
    /// The group's latest assignment (remote).
    pub(super) current: Option<Assigned>,
}

/// What the live run's tasks share, and how one is set up (also for a
/// replay of dead letters, which runs live tasks on their letters).
pub(crate) struct LiveTasks<'a> {
    pub app: &'a App,
    pub log: &'a LogAccess,
    pub location: &'a Location,
    pub options: &'a RunOptions,
    pub partitions: &'a BTreeMap<String, i32>,
    /// Whether stores write changelogs.
    pub changelogs: bool,
    pub progress: &'a Arc<TaskProgress>,
    pub board: &'a TaskBoard,
}

impl LiveTasks<'_> {
    /// The setup of the live task of `spec` on `partition`.
    pub fn setup(
        &self,
        spec: &ProcessorSpec,
        partition: i32,
        stop: Arc<AtomicBool>,
        targets: watch::Receiver<Option<Targets>>,
    ) -> TaskSetup {
        let app = self.app;
        let state_dir = self.location.state_dir();
        let remote = matches!(self.log, LogAccess::Remote(_));
        let start = (spec.inputs.iter())
            .map(|t| match app.is_derived(t) {
                true => StartAt::Earliest,
                false => self.options.start,
            })
            .collect();
        TaskSetup {
            app: app.name.clone(),
            version: app.version_name().to_string(),
            spec: spec.clone(),
            partition,
            dir: layout::task_dir(state_dir, &spec.name, partition),
            checkpoints: Some(Checkpoints {
                dir: layout::checkpoint_dir(state_dir, &spec.name, partition),
                request: layout::checkpoint_request(state_dir),
            }),
            log_topics: spec.inputs.iter().map(|t| app.log_topic(t)).collect(),
            start,
            emits: true,
            rebuild: Some(layout::rebuild_dir(state_dir, &spec.name, partition)),
            outputs: outputs(app, spec, self.partitions),
            changelogs: (spec.stores.iter())
                .map(|s| self.changelogs.then(|| app.changelog_topic(&s.name)))
                .collect(),
            txn: remote.then(|| TxnNames::of(&app.versioned_name(), &spec.name, partition)),
            positions: remote.then(|| app.positions_topic(&spec.name)),
            config: app.config,
            log: self.log.clone(),
            stop,
            targets,
            until_end: self.options.until_end,
            progress: Arc::clone(self.progress),
            board: self.board.clone(),
            clock: self.options.clock.clone(),
            letters: None,
            crash_after: self.options.crash_after,
        }
    }
}

impl Runner<'_> {
    /// Every task of the app.
    pub(super) fn all_tasks(&self) -> Vec<TaskId> {
        let app = self.app;
        (app.processors.iter())
            .flat_map(|spec| {
                let count = self.partitions[&spec.inputs[0]];
                (0..count).map(|n| TaskId::new(&spec.name, n))
            })
            .collect()
    }

    /// Starts `id` on a blocking thread.
    pub(super) fn start(&mut self, id: &TaskId) {
        let app = self.app;
        let (index, spec) = (app.processors.iter().enumerate())
            .find(|(_, s)| s.name == id.processor)
            .expect("tasks are the app's");
        let partition = id.partition;
        // Run here, the state is no copy: the task runs where it is.
        self.board.forget_copy(&id.to_string());
        let (targets, targets_rx) = watch::channel(None);
        let stop = Arc::new(AtomicBool::new(false));
        let live = LiveTasks {
            app,
            log: self.log,
            location: self.location,
            options: self.options,
            partitions: &self.partitions,
            changelogs: self.changelogs,
            progress: &self.progress,
            board: &self.board,
        };
        let setup = live.setup(spec, partition, Arc::clone(&stop), targets_rx);
        let ended = self.threads.spawn(move || task::run(setup));
        let task = id.clone();
        self.running.spawn(async move {
            let outcome = joined(&task, ended.await);
            (task, outcome)
        });
        self.started += 1;
        self.tasks.insert(
            id.clone(),
            TaskHandle {
                processor: index,
                partition,
                targets,
                stop,
                phase: Phase::Running,
            },
        );
    }

    /// The tasks running here (those stopping included).
    pub(super) fn owned(&self) -> BTreeSet<TaskId> {
        (self.tasks.iter())
            .filter(|(_, t)| matches!(t.phase, Phase::Running | Phase::GivingUp))
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub(super) fn stop_all(&self) {
        for task in self.tasks.values() {
            task.stop.store(true, Ordering::Relaxed);
        }
        for stop in self.standbys.values() {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// Whether anything still runs here.
    pub(super) fn busy(&self) -> bool {
        !self.running.is_empty() || !self.standby_running.is_empty()
    }

    /// Whether `id` runs here as a task (stopping included).
    pub(super) fn runs(&self, id: &TaskId) -> bool {
        (self.tasks.get(id)).is_some_and(|t| matches!(t.phase, Phase::Running | Phase::GivingUp))
    }

    /// Follows a new assignment: tasks given elsewhere are told to stop,
    /// tasks given here start (again, if they ran here before; once their
    /// standby copy let go, if they had one), and standby copies follow.
    pub(super) fn follow(&mut self, assigned: Assigned) {
        for (id, task) in &mut self.tasks {
            if task.phase == Phase::Running && !assigned.active.contains(id) {
                tracing::info!(task = %id, "giving the task up: the group moved it");
                task.stop.store(true, Ordering::Relaxed);
                task.phase = Phase::GivingUp;
            }
        }
        for (id, stop) in &self.standbys {
            if !assigned.standby.contains(id) || assigned.active.contains(id) {
                stop.store(true, Ordering::Relaxed);
            }
        }
        self.waiting.retain(|id| assigned.active.contains(id));
        for id in &assigned.active {
            let phase = self.tasks.get(id).map(|t| t.phase);
            if matches!(phase, None | Some(Phase::Away)) {
                if self.standbys.contains_key(id) {
                    self.waiting.insert(id.clone());
                } else {
                    self.start(id);
                }
            }
        }
        self.current = Some(assigned);
        self.start_standbys();
    }

    /// Starts the standby copies assigned here that can start now: not
    /// kept yet, and their directory not in use by the task itself.
    pub(super) fn start_standbys(&mut self) {
        let Some(assigned) = &self.current else {
            return;
        };
        let ready: Vec<TaskId> = (assigned.standby.iter())
            .filter(|id| !assigned.active.contains(id) && !self.standbys.contains_key(id))
            .filter(|id| !self.runs(id))
            .cloned()
            .collect();
        for id in ready {
            self.start_standby(&id);
        }
    }

    pub(super) fn start_standby(&mut self, id: &TaskId) {
        let app = self.app;
        let spec = (app.processors.iter())
            .find(|s| s.name == id.processor)
            .expect("tasks are the app's");
        let stop = Arc::new(AtomicBool::new(false));
        let setup = StandbySetup {
            spec: spec.clone(),
            partition: id.partition,
            dir: layout::task_dir(self.location.state_dir(), &spec.name, id.partition),
            changelogs: (spec.stores.iter())
                .map(|s| Some(app.changelog_topic(&s.name)))
                .collect(),
            fetch_bytes: app.config.fetch_bytes,
            log: self.log.clone(),
            stop: Arc::clone(&stop),
            board: self.board.clone(),
        };
        let ended = self.threads.spawn(move || standby::run(setup));
        let task = id.clone();
        self.standby_running.spawn(async move {
            let outcome = joined(&task, ended.await);
            (task, outcome)
        });
        self.standbys.insert(id.clone(), stop);
    }

    /// A standby copy stopped: the task it kept may start here now.
    pub(super) fn standby_stopped(&mut self, id: &TaskId) {
        self.standbys.remove(id);
        if self.waiting.remove(id) {
            self.start(id);
        }
    }

    /// Tells every running task (and standby copy) to stop: the group took
    /// them away; none waits to start either.
    pub(super) fn give_all_up(&mut self) {
        self.waiting.clear();
        for stop in self.standbys.values() {
            stop.store(true, Ordering::Relaxed);
        }
        for (id, task) in &mut self.tasks {
            if task.phase == Phase::Running {
                tracing::info!(task = %id, "giving the task up: this instance lost its place in the group");
                task.stop.store(true, Ordering::Relaxed);
                task.phase = Phase::GivingUp;
            }
        }
    }

    /// Whether every task assigned here has reached its targets, and none
    /// is on its way here or away (a move's two rounds are not over until
    /// the second; a first answer of nothing may be the first of them).
    pub(super) fn all_done(&self, assigned: &BTreeSet<TaskId>) -> bool {
        let moving = !self.waiting.is_empty()
            || self.tasks.values().any(|t| t.phase == Phase::GivingUp)
            || (assigned.is_empty() && self.current.as_ref().is_some_and(|a| a.generation < 2));
        !moving
            && assigned
                .iter()
                .all(|id| self.tasks.get(id).is_some_and(|t| t.phase == Phase::Done))
    }
}
/// Gives every task whose inputs' ends are now known its targets: the
/// current end offsets of external inputs (once, at start) and of
/// derived topics none of whose writing tasks still runs here. (With
/// several instances, a writer running elsewhere is not waited for: run
/// `--until-end` on one instance alone to drain a whole pipeline.)
pub(super) async fn set_targets(runner: &mut Runner<'_>) -> Result<(), RuntimeError> {
    let app = runner.app;
    let external = app.external_inputs();
    let tasks = &runner.tasks;
    let settled = |topic: &String| {
        external.contains(topic)
            || tasks.values().all(|t| {
                !matches!(t.phase, Phase::Running | Phase::GivingUp)
                    || !app.processors[t.processor]
                        .outputs
                        .iter()
                        .any(|o| &o.topic == topic)
            })
    };
    let mut ready = Vec::new();
    for (id, task) in tasks {
        let inputs = &app.processors[task.processor].inputs;
        let waiting = task.phase == Phase::Running && task.targets.borrow().is_none();
        if waiting && inputs.iter().all(settled) {
            ready.push(id.clone());
        }
    }
    for id in ready {
        let task = &runner.tasks[&id];
        let mut targets = Targets::new();
        for topic in &app.processors[task.processor].inputs {
            debug_assert!(runner.partitions.contains_key(topic));
            let log_topic = app.log_topic(topic);
            let end = runner.log.end_offset(&log_topic, task.partition).await?;
            targets.insert(topic.clone(), end);
        }
        let _ = task.targets.send(Some(targets));
    }
    Ok(())
}
