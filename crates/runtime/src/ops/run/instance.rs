//! The instance loop as a state machine: one [`Instance`] holds what the
//! run keeps between events, [`Instance::next_event`] waits for the next
//! [`Event`], and [`Instance::handle`] acts on it.
//!
//! Modes: `Running` (tasks started, the group followed) until the stop
//! signal, a failure, or (`until_end`) every task assigned here done; then
//! `Stopping`: every task told to commit and stop, no new assignment
//! followed, the loop ending once no task or standby copy runs.
//!
//! | event | running | stopping |
//! |---|---|---|
//! | `Stop` | stop every task | (not waited for) |
//! | `Group(Assigned)` | follow it, targets again | (not waited for) |
//! | `Group(Lost)` | give every task up | (not waited for) |
//! | `Group(Failed)` | fail, stop | (not waited for) |
//! | `TaskEnded` | see [`Instance::task_ended`] | noted |
//! | `StandbyEnded` | its copy gone, targets again | noted |
//! | `Progress`, `Maintenance` | printed, published | the same |

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::RuntimeError;
use crate::group::{self, Member, TaskId, UNAVAILABLE_BACKOFF};
use crate::log_access::LogAccess;
use crate::progress::ProgressReport;

use super::outage::{self, Outages};
use super::runner::{Phase, Runner, set_targets};

/// What wakes the instance loop.
pub(super) enum Event {
    /// The stop signal (Ctrl-C, SIGTERM, or the caller's future).
    Stop,
    /// Remote: what the app's group said.
    Group(group::Event),
    /// Time to print a progress line.
    Progress,
    /// Once a second: the embedded log's upkeep, the task board
    /// published, restore progress shown.
    Maintenance,
    /// A standby copy's loop ended.
    StandbyEnded(TaskId, Result<(), RuntimeError>),
    /// A task's loop ended.
    TaskEnded(TaskId, Result<(), RuntimeError>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Running,
    Stopping,
}

/// What the run keeps between events.
pub(super) struct Instance<'a> {
    pub(super) runner: Runner<'a>,
    /// Remote: this instance's membership of the app's group.
    pub(super) member: Option<Member>,
    /// The tasks assigned here: all of them embedded, none until the
    /// group has answered remote.
    assigned: Option<BTreeSet<TaskId>>,
    mode: Mode,
    /// The first failure; the run ends with it.
    failure: Option<RuntimeError>,
    outages: Outages,
    report: ProgressReport,
    ticker: tokio::time::Interval,
    /// When the last progress line was printed, and the records then.
    last: (Instant, u64),
    maintenance: tokio::time::Interval,
    restores: ProgressReport,
    /// The restore progress last shown on a terminal: (done, total).
    restored: Option<(u64, u64)>,
}

/// How often a running instance does its upkeep.
const MAINTENANCE_EVERY: Duration = Duration::from_secs(1);

impl<'a> Instance<'a> {
    pub(super) async fn new(
        runner: Runner<'a>,
        member: Option<Member>,
        assigned: Option<BTreeSet<TaskId>>,
    ) -> Self {
        let options = runner.options;
        let every = options.progress_every.unwrap_or(Duration::from_secs(3600));
        let report = ProgressReport::new(&runner.app.name, every);
        let mut ticker = tokio::time::interval(match options.until_end {
            true => report.tick().min(every),
            false => every,
        });
        ticker.tick().await;
        Self {
            runner,
            member,
            assigned,
            mode: Mode::Running,
            failure: None,
            outages: Outages::default(),
            report,
            ticker,
            last: (Instant::now(), 0),
            maintenance: tokio::time::interval(MAINTENANCE_EVERY),
            restores: ProgressReport::new("restoring state", Duration::from_secs(3600)),
            restored: None,
        }
    }

    /// Runs the loop until every task and standby copy stopped; the first
    /// failure, if any.
    pub(super) async fn run(
        &mut self,
        mut stop: Pin<&mut impl Future<Output = ()>>,
    ) -> Result<(), RuntimeError> {
        loop {
            let until_end = self.runner.options.until_end;
            let all_done = (self.assigned.as_ref()).is_some_and(|a| self.runner.all_done(a));
            if until_end && self.mode == Mode::Running && all_done {
                self.stop();
            }
            if self.mode == Mode::Stopping && !self.runner.busy() {
                return match self.failure.take() {
                    Some(error) => Err(error),
                    None => Ok(()),
                };
            }
            // A failure stops the run: every task is told to stop and
            // waited for, never left running behind it.
            let handled = match self.next_event(stop.as_mut()).await {
                Ok(event) => self.handle(event).await,
                Err(error) => Err(error),
            };
            if let Err(error) = handled {
                self.fail(error);
            }
        }
    }

    fn stop(&mut self) {
        self.mode = Mode::Stopping;
        self.runner.stop_all();
    }

    /// Ends the run with `error` (the first failure is the one kept).
    fn fail(&mut self, error: RuntimeError) {
        self.failure.get_or_insert(error);
        self.stop();
    }

    /// Waits for the next event; a task that panicked ends the run here.
    async fn next_event(
        &mut self,
        stop: Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Event, RuntimeError> {
        let running = self.mode == Mode::Running;
        let progress = self.runner.options.progress_every.is_some();
        let panicked = |error: tokio::task::JoinError, app: &str| RuntimeError::TaskPanicked {
            task: app.to_string(),
            reason: error.to_string(),
        };
        let app = self.runner.app.name();
        let member = &mut self.member;
        Ok(tokio::select! {
            () = stop, if running => Event::Stop,
            event = async { member.as_mut().expect("guarded").next().await },
                if member.is_some() && running => Event::Group(event),
            _ = self.ticker.tick(), if progress => Event::Progress,
            _ = self.maintenance.tick() => Event::Maintenance,
            Some(joined) = self.runner.standby_running.join_next() => {
                let (id, result) = joined.map_err(|e| panicked(e, app))?;
                Event::StandbyEnded(id, result)
            }
            Some(joined) = self.runner.running.join_next() => {
                let (id, result) = joined.map_err(|e| panicked(e, app))?;
                Event::TaskEnded(id, result)
            }
        })
    }

    async fn handle(&mut self, event: Event) -> Result<(), RuntimeError> {
        match event {
            Event::Stop => self.stop(),
            Event::Group(group::Event::Assigned(now)) => {
                self.assigned = Some(now.active.clone());
                let generation = now.generation;
                self.runner.follow(now);
                let member = self.member.as_ref().expect("only a member hears its group");
                member.set_owned(self.runner.owned());
                member.followed(generation);
                if self.runner.options.until_end {
                    set_targets(&mut self.runner).await?;
                }
            }
            Event::Group(group::Event::Lost) => self.runner.give_all_up(),
            Event::Group(group::Event::Failed(error)) => {
                tracing::error!("{error}");
                self.fail(error);
            }
            Event::Progress => self.print_progress(),
            Event::Maintenance => self.maintain(),
            Event::StandbyEnded(id, result) => {
                // A copy that failed costs a longer restore, not the run.
                if let Err(error) = result {
                    tracing::warn!(task = %id, "the standby copy stopped: {error}");
                }
                if self.mode == Mode::Stopping {
                    self.runner.standbys.remove(&id);
                    return Ok(());
                }
                self.runner.standby_stopped(&id);
                if self.runner.options.until_end {
                    set_targets(&mut self.runner).await?;
                }
            }
            Event::TaskEnded(id, result) => self.task_ended(id, result).await?,
        }
        Ok(())
    }

    fn print_progress(&mut self) {
        let progress = &self.runner.progress;
        let records = progress.records.load(Ordering::Relaxed);
        if self.runner.options.until_end {
            let done = progress.done.load(Ordering::Relaxed);
            self.report
                .update(done, progress.total.load(Ordering::Relaxed));
            return;
        }
        let (since, before) = self.last;
        let rate = (records - before) as f64 / since.elapsed().as_secs_f64().max(1e-3);
        eprintln!(
            "{}: {records} records processed ({rate:.0}/s)",
            self.runner.app.name
        );
        self.last = (Instant::now(), records);
    }

    /// The embedded log's flushes and retention, the task board published,
    /// restore progress on a terminal (elsewhere each restore logs lines).
    fn maintain(&mut self) {
        if let LogAccess::Embedded(manager, _) = self.runner.log {
            manager.flush_due();
            manager.enforce_retention();
        }
        if let Err(error) = self.runner.board.publish(self.runner.location.state_dir()) {
            tracing::debug!("publishing the task board: {error}");
        }
        match self.runner.board.restoring() {
            Some((done, total)) if self.restores.on_terminal() => {
                self.restores.update(done, total);
                self.restored = Some((done, total));
            }
            None => {
                if let Some((_, total)) = self.restored.take() {
                    self.restores.finish(total, total);
                }
            }
            _ => {}
        }
    }

    /// A task's loop ended: done, given up, fenced, cut off from its
    /// cluster, crashed on purpose, or failed. Then the standbys placed
    /// again and, remote, the group told what this instance holds.
    async fn task_ended(
        &mut self,
        id: TaskId,
        result: Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let task = (self.runner.tasks.get_mut(&id)).expect("started tasks are tracked");
        let gave_up = task.phase == Phase::GivingUp;
        task.phase = match (&result, gave_up) {
            (Ok(()), false) => Phase::Done,
            _ => Phase::Away,
        };
        let mut rejoin = gave_up;
        let mut unavailable = false;
        match result {
            Ok(()) if self.runner.options.until_end && self.failure.is_none() => {
                set_targets(&mut self.runner).await?;
            }
            Ok(()) => {}
            // Another instance owns the task now: this one gives it up and
            // goes on with the others.
            Err(error @ RuntimeError::Fenced { .. }) => {
                tracing::warn!(task = %id, "{error}");
                rejoin = true;
            }
            // The cluster is away: what the task committed is in its state,
            // and it starts again from there once the group has it again
            // (the instance rejoins after a pause; see `outage`). Stopping,
            // its last commit ships when the task next starts, here or
            // wherever the group puts it.
            Err(error) if self.waits_out(&id, &error) => {
                if self.mode == Mode::Stopping {
                    tracing::warn!(task = %id, "{error}; its last commit ships when the task next starts");
                } else {
                    tracing::warn!(task = %id, "{error}; the task starts again from its last commit once the cluster answers");
                    unavailable = true;
                }
            }
            // Every task ends the same way at its next check.
            Err(RuntimeError::Crashed) => self.fail(RuntimeError::Crashed),
            Err(error) => {
                let error = self.failed_task(&id, error);
                tracing::error!(task = %id, "{error}");
                self.fail(error);
            }
        }
        if self.mode == Mode::Running {
            self.runner.start_standbys();
        }
        self.tell_group(rejoin, unavailable);
        Ok(())
    }

    /// Whether a task that ended with `error` waits for its cluster to
    /// come back rather than fail the run: remote, running live, the
    /// cluster unreachable, and (unless stopping) not away for longer than
    /// a task may wait.
    fn waits_out(&mut self, id: &TaskId, error: &RuntimeError) -> bool {
        self.member.is_some()
            && !self.runner.options.until_end
            && error.is_cluster_unavailable()
            && (self.mode == Mode::Stopping
                || self.outages.failed(id, Instant::now()) < outage::TASK_WAIT_MAX)
    }

    /// A task's failure as the run reports it.
    fn failed_task(&self, id: &TaskId, error: RuntimeError) -> RuntimeError {
        match error {
            RuntimeError::Client(error)
                if error.is_unavailable()
                    && self.member.is_some()
                    && !self.runner.options.until_end =>
            {
                RuntimeError::ClusterAway {
                    task: id.to_string(),
                    secs: outage::TASK_WAIT_MAX.as_secs(),
                    error,
                }
            }
            other => other.concerning(|| format!("task {id}")),
        }
    }

    /// Remote: tells the group what this instance holds now, and joins
    /// again when a task went away (once every task the group moved is
    /// committed and closed: cooperative) or after a pause when the
    /// cluster was away.
    fn tell_group(&self, rejoin: bool, unavailable: bool) {
        let Some(member) = &self.member else {
            return;
        };
        member.set_owned(self.runner.owned());
        let giving_up = (self.runner.tasks.values()).any(|t| t.phase == Phase::GivingUp);
        let running = self.mode == Mode::Running;
        if rejoin && !giving_up && running {
            member.rejoin();
        }
        if unavailable && running {
            member.rejoin_after(UNAVAILABLE_BACKOFF);
        }
    }

    /// The run's end: the group left (not after a crash: a killed process
    /// leaves no group, its session expires), the last progress line
    /// printed.
    pub(super) async fn finish(mut self, crashed: bool) -> Runner<'a> {
        if crashed && let Some(member) = self.member.take() {
            member.abandon();
        }
        if let Some(member) = self.member {
            member.set_owned(BTreeSet::new());
            if let Err(error) = member.leave().await {
                tracing::warn!("leaving the app's group: {error}");
            }
        }
        let (options, progress) = (self.runner.options, &self.runner.progress);
        if options.until_end && options.progress_every.is_some() {
            let done = progress.done.load(Ordering::Relaxed);
            let mut report = self.report;
            report.finish(done, progress.total.load(Ordering::Relaxed));
        }
        self.runner
    }
}
