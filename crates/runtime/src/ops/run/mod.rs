//! `run`: open the log (embedded) or connect (remote), resolve the
//! topology (derived topics created, partition counts known), start the
//! tasks (one per processor and input partition: embedded all of them,
//! remote those the app's group assigns this instance, following each new
//! assignment), and stop them on the stop signal (by default Ctrl-C or
//! SIGTERM) or, with `until_end`, once everything the inputs held at start
//! has flowed through the whole pipeline.
//!
//! `until_end` in a pipeline: a task whose inputs are all external (written
//! by no processor of the app) stops at the end offsets those inputs had at
//! start. A task reading a derived topic learns its end only once every
//! task writing that topic has stopped (and so shipped everything); the
//! derived topic's end offsets at that moment are its target.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::board::TaskBoard;
use crate::clock::Clock;
use crate::error::RuntimeError;
use crate::group::{GroupOptions, GroupProcessor, Member, TaskId};
use crate::layout::{self, lock_running};
use crate::location::Location;
use crate::log_access::{LogAccess, Remote};
use crate::task::threads::TaskThreads;
use crate::task::{StartAt, TaskProgress};
use crate::topology::App;

use super::open::{close, ensure_changelogs, open, resolve};
use super::query::http::QueryEndpoint;
use super::serve::serve;

pub(super) mod endpoints;
mod instance;
mod outage;
mod runner;

use instance::Instance;
pub(crate) use runner::LiveTasks;
use runner::{Runner, set_targets};

/// How `run` runs an app.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop once the external inputs are processed up to the ends they had
    /// at start and everything derived from them inside the app too.
    pub until_end: bool,
    /// Embedded only: also serve the Kafka protocol on this address.
    pub serve: Option<SocketAddr>,
    /// Serve Prometheus metrics on this address (see `board`).
    pub metrics: Option<SocketAddr>,
    /// Answer queries of the stores over HTTP (see `query::http`).
    pub query: Option<QueryEndpoint>,
    /// Serve the web console (see `endpoints`): the page, `/metrics`, and
    /// the stores' queries as `query` answers them.
    pub console: Option<QueryEndpoint>,
    /// How the HTTP endpoints (`metrics`, `query`) are secured: loopback
    /// only unless TLS and a token (see strata-http's `access`).
    pub http: strata_http::HttpSecurity,
    /// Print a progress line this often (to stderr); never when `None`.
    pub progress_every: Option<Duration>,
    /// Where tasks without state start in the external inputs.
    pub start: StartAt,
    /// Remote: how this instance takes part in the app's group.
    pub group: GroupOptions,
    /// Where the tasks read processing time (the system's clock by
    /// default; a [`ManualClock`](crate::ManualClock) in tests).
    pub clock: Clock,
    /// For tests of recovery: end the run as a SIGKILL would once its
    /// tasks have processed this many records between them (checked after
    /// each batch and before each commit): no task commits again or runs
    /// `close`, the embedded log is not closed, the group is not left; the
    /// run answers [`RuntimeError::Crashed`]. Unlike a SIGKILL, a commit
    /// already handed to its writer thread completes (as one whose write
    /// reached the operating system before the kill), and each state's
    /// memtables are flushed as it closes.
    pub crash_after: Option<u64>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Tasks started: one per processor and input partition (remote, those
    /// the group assigned this instance, counted again when one came back).
    pub tasks: usize,
    pub records: u64,
    /// Store entries the commits wrote to the tasks' databases.
    pub store_writes: u64,
    /// Changelog records the tasks' restores put back (remote: a task
    /// whose local state was not the one last committed), and the time
    /// those restores took, summed over tasks.
    pub restored: u64,
    pub restoring: Duration,
    pub elapsed: Duration,
}

/// Runs the app until Ctrl-C or SIGTERM (or, with `until_end`, until the
/// inputs are drained), then commits and ships everything.
pub async fn run(
    app: &App,
    location: &Location,
    options: RunOptions,
) -> Result<RunSummary, RuntimeError> {
    run_until(app, location, options, stop_signal()?).await
}

/// Runs the app until `stop` completes (or, with `until_end`, until
/// the inputs are drained), then commits and ships everything.
pub async fn run_until(
    app: &App,
    location: &Location,
    options: RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<RunSummary, RuntimeError> {
    app.check().map_err(RuntimeError::Config)?;
    // Before anything starts: an endpoint that may not be served as
    // configured stops the run here.
    let access = options.http.load()?;
    if let Some(addr) = options.metrics {
        access.check_bind(addr, "metrics endpoint")?;
    }
    if let Some(endpoint) = &options.query {
        access.check_bind(endpoint.addr, "query endpoint")?;
    }
    if let Some(endpoint) = &options.console {
        access.check_bind(endpoint.addr, "console")?;
    }
    let started = Instant::now();
    let _running = lock_running(location.state_dir())?;
    let (mut log, embedded) = open(location).await?;
    let served = match (&embedded, options.serve) {
        (Some(manager), Some(addr)) => {
            let state_dir = location.state_dir();
            let (served, signals) = serve(Arc::clone(manager), addr, state_dir).await?;
            // The app's appends wake the broker's waiting fetches.
            log = LogAccess::Embedded(Arc::clone(manager), signals);
            Some(served)
        }
        (None, Some(_)) => {
            return Err(RuntimeError::Config(
                "--serve needs the embedded log: give --data-dir, not --bootstrap".into(),
            ));
        }
        _ => None,
    };
    let result = run_tasks(app, &log, location, (&options, &access), stop).await;
    if let Some((shutdown, server)) = served {
        let _ = shutdown.send(true);
        let _ = server.await;
        let _ = std::fs::remove_file(layout::serving_file(location.state_dir()));
    }
    drop(log);
    // A crashed run leaves the log as a killed process would: not closed,
    // so the next open recovers it.
    let crashed = matches!(result, Err(RuntimeError::Crashed));
    if !crashed {
        close(embedded)?;
    }
    let summary = result?;
    Ok(RunSummary {
        elapsed: started.elapsed(),
        ..summary
    })
}

async fn run_tasks(
    app: &App,
    log: &LogAccess,
    location: &Location,
    (options, access): (&RunOptions, &strata_http::Access),
    stop: impl std::future::Future<Output = ()>,
) -> Result<RunSummary, RuntimeError> {
    let partitions = resolve(app, log).await?;
    ensure_changelogs(app, log, &partitions).await?;
    let remote = matches!(log, LogAccess::Remote(_));
    let mut runner = Runner {
        app,
        log,
        location,
        options,
        partitions,
        changelogs: remote || app.config.changelogs,
        progress: Arc::new(TaskProgress::default()),
        board: TaskBoard::default(),
        threads: TaskThreads::start(
            &tokio::runtime::Handle::current(),
            app.config.task_thread_count(),
        )
        .map_err(RuntimeError::io("starting the task threads"))?,
        tasks: BTreeMap::new(),
        running: JoinSet::new(),
        started: 0,
        standbys: BTreeMap::new(),
        standby_running: JoinSet::new(),
        waiting: BTreeSet::new(),
        current: None,
    };
    // Bound before joining: the group learns where this instance answers.
    let query_listener = match &options.query {
        Some(endpoint) => Some(endpoints::bind(endpoint.addr, "query").await?),
        None => None,
    };
    let query_addr = query_listener.as_ref().map(|(_, addr)| *addr);
    // A file left by a killed run names an address nobody answers on.
    let _ = std::fs::remove_file(layout::query_address_file(location.state_dir()));
    let queries = match (&options.query, query_listener) {
        (Some(endpoint), Some(listening)) => Some(endpoints::serve_queries(
            endpoint, listening, &runner, access,
        )?),
        _ => None,
    };
    // Embedded, this process runs every task (the run lock makes it the
    // only one); remote, the app's group shares them out.
    let member = match log {
        LogAccess::Remote(remote) => {
            let member = join_group(app, remote, location, options, &runner, query_addr);
            Some(member)
        }
        LogAccess::Embedded(..) => None,
    };
    // The tasks assigned here: all of them embedded, none until the group
    // has answered remote.
    let mut assigned: Option<BTreeSet<TaskId>> = None;
    if member.is_none() {
        let all = runner.all_tasks();
        for id in &all {
            runner.start(id);
        }
        assigned = Some(all.into_iter().collect());
    }
    if options.until_end {
        set_targets(&mut runner).await?;
    }
    let metrics = match options.metrics {
        Some(addr) => Some(endpoints::serve_metrics(addr, &runner, access).await?),
        None => None,
    };
    let console = match &options.console {
        Some(endpoint) => Some(endpoints::serve_console(endpoint, &runner, access).await?),
        None => None,
    };
    let mut instance = Instance::new(runner, member, assigned).await;
    tokio::pin!(stop);
    let outcome = instance.run(stop).await;
    // A crash leaves what a killed process leaves: the group not left, the
    // task board's file in place.
    let crashed = matches!(outcome, Err(RuntimeError::Crashed));
    let runner = instance.finish(crashed).await;
    drop((metrics, console, queries));
    if !crashed {
        let _ = std::fs::remove_file(layout::task_board_file(location.state_dir()));
    }
    outcome?;
    Ok(RunSummary {
        tasks: runner.started,
        records: runner.progress.records.load(Ordering::Relaxed),
        store_writes: runner.progress.store_writes.load(Ordering::Relaxed),
        restored: runner.board.restored_in_all(),
        restoring: runner.board.restoring_in_all(),
        // The whole run's, set by the caller.
        elapsed: Duration::ZERO,
    })
}

/// Joins the app's group (named after the app and its version).
fn join_group(
    app: &App,
    remote: &Remote,
    location: &Location,
    options: &RunOptions,
    runner: &Runner<'_>,
    query: Option<SocketAddr>,
) -> Member {
    let processors = (app.processors.iter())
        .map(|spec| GroupProcessor {
            name: spec.name.clone(),
            inputs: spec.inputs.iter().map(|t| app.log_topic(t)).collect(),
            stateful: !spec.stores.is_empty(),
        })
        .collect();
    // Task state left on disk is a copy of unknown reach (0) until a
    // standby or the task itself takes it up.
    let state_dir = location.state_dir();
    for id in runner.all_tasks() {
        if layout::has_database(&layout::task_dir(state_dir, &id.processor, id.partition)) {
            runner.board.set_copy(&id.to_string(), 0);
        }
    }
    let saved = (options.group.instance_id.is_some()).then(|| layout::group_member_file(state_dir));
    // A run to the end of its inputs fails when the cluster is away, as it
    // did before it waited for anything: its next run resumes exactly once.
    let group = GroupOptions {
        wait_for_cluster: options.group.wait_for_cluster && !options.until_end,
        ..options.group.clone()
    };
    Member::start(
        Arc::clone(&remote.cluster),
        app.versioned_name(),
        processors,
        runner.board.clone(),
        &group,
        saved,
        query,
    )
}

/// Completes on SIGTERM or Ctrl-C: the default stop signal of [`run`].
pub fn stop_signal() -> Result<impl std::future::Future<Output = ()>, RuntimeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = |kind: SignalKind, name: &str| {
        signal(kind).map_err(RuntimeError::io(format!("watching {name}")))
    };
    let mut term = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = watch(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}
