//! `run`: open the log (embedded) or connect (remote), resolve the
//! topology (derived topics created, partition counts known), start one
//! task per processor and input partition, and stop them on the stop
//! signal (by default Ctrl-C or SIGTERM) or, with `until_end`, once
//! everything the inputs held at start has flowed through the whole
//! pipeline.
//!
//! `until_end` in a pipeline: a task whose inputs are all external (written
//! by no processor of the app) stops at the end offsets those inputs had at
//! start. A task reading a derived topic learns its end only once every
//! task writing that topic has stopped (and so shipped everything); the
//! derived topic's end offsets at that moment are its target.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::runtime::error::RuntimeError;
use crate::runtime::layout::{self, lock_running};
use crate::runtime::location::Location;
use crate::runtime::log_access::LogAccess;
use crate::runtime::progress::ProgressReport;
use crate::runtime::task::transaction::TxnNames;
use crate::runtime::task::{self, Checkpoints, StartAt, Targets, TaskProgress, TaskSetup};
use crate::runtime::topology::App;

use super::open::{ensure_changelogs, open, outputs, resolve, serve};

/// How `run` runs an app.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop once the external inputs are processed up to the ends they had
    /// at start and everything derived from them inside the app too.
    pub until_end: bool,
    /// Embedded only: also serve the Kafka protocol on this address.
    pub serve: Option<SocketAddr>,
    /// Print a progress line this often (to stderr); never when `None`.
    pub progress_every: Option<Duration>,
    /// Where tasks without state start in the external inputs.
    pub start: StartAt,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Tasks run: one per processor and input partition.
    pub tasks: usize,
    pub records: u64,
    pub elapsed: Duration,
}

/// One task as the runner tracks it.
struct TaskHandle {
    processor: usize,
    partition: i32,
    targets: watch::Sender<Option<Targets>>,
    done: bool,
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
    let result = run_tasks(app, &log, location, &options, stop).await;
    if let Some((shutdown, server)) = served {
        let _ = shutdown.send(true);
        let _ = server.await;
        let _ = std::fs::remove_file(layout::serving_file(location.state_dir()));
    }
    drop(log);
    // Closing flushes every partition and marks the shutdown clean.
    if let Some(manager) = embedded {
        match Arc::try_unwrap(manager) {
            Ok(manager) => manager.close()?,
            Err(_) => tracing::warn!("the log is still in use; not closed cleanly"),
        }
    }
    let (tasks, records) = result?;
    Ok(RunSummary {
        tasks,
        records,
        elapsed: started.elapsed(),
    })
}

async fn run_tasks(
    app: &App,
    log: &LogAccess,
    location: &Location,
    options: &RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(usize, u64), RuntimeError> {
    let partitions = resolve(app, log).await?;
    ensure_changelogs(app, log, &partitions).await?;
    let remote = matches!(log, LogAccess::Remote(_));
    let changelogs = remote || app.config.changelogs;
    let stop_flag = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(TaskProgress::default());
    let handle = tokio::runtime::Handle::current();
    let mut tasks = Vec::new();
    let mut running = JoinSet::new();
    for (index, spec) in app.processors.iter().enumerate() {
        let outputs = outputs(app, spec, &partitions);
        for partition in 0..partitions[&spec.inputs[0]] {
            let (targets, targets_rx) = watch::channel(None);
            let start = spec
                .inputs
                .iter()
                .map(|t| {
                    if app.is_derived(t) {
                        StartAt::Earliest
                    } else {
                        options.start
                    }
                })
                .collect();
            let setup = TaskSetup {
                spec: spec.clone(),
                partition,
                dir: layout::task_dir(location.state_dir(), &spec.name, partition),
                checkpoints: Some(Checkpoints {
                    dir: layout::checkpoint_dir(location.state_dir(), &spec.name, partition),
                    request: layout::checkpoint_request(location.state_dir()),
                }),
                log_topics: spec.inputs.iter().map(|t| app.log_topic(t)).collect(),
                start,
                emits: true,
                rebuild: Some(layout::rebuild_dir(
                    location.state_dir(),
                    &spec.name,
                    partition,
                )),
                outputs: outputs.clone(),
                changelogs: (spec.stores.iter())
                    .map(|s| changelogs.then(|| app.changelog_topic(&s.name)))
                    .collect(),
                txn: remote.then(|| TxnNames::of(&app.versioned_name(), &spec.name, partition)),
                config: app.config,
                log: log.clone(),
                stop: Arc::clone(&stop_flag),
                targets: targets_rx,
                progress: Arc::clone(&progress),
            };
            let id = tasks.len();
            let handle = handle.clone();
            running.spawn_blocking(move || {
                let name = setup.name();
                (id, name, handle.block_on(task::run(setup)))
            });
            tasks.push(TaskHandle {
                processor: index,
                partition,
                targets,
                done: false,
            });
        }
    }
    if options.until_end {
        set_targets(app, log, &mut tasks, &partitions).await?;
    }
    tokio::pin!(stop);
    let mut stopping = false;
    let mut failure: Option<RuntimeError> = None;
    let every = options.progress_every.unwrap_or(Duration::from_secs(3600));
    let mut report = ProgressReport::new(&app.name, every);
    let mut ticker = tokio::time::interval(if options.until_end {
        report.tick().min(every)
    } else {
        every
    });
    ticker.tick().await;
    let mut last = (Instant::now(), 0u64);
    let mut maintenance = tokio::time::interval(Duration::from_secs(1));
    while !running.is_empty() {
        tokio::select! {
            () = &mut stop, if !stopping => {
                stopping = true;
                stop_flag.store(true, Ordering::Relaxed);
            }
            _ = ticker.tick(), if options.progress_every.is_some() => {
                let records = progress.records.load(Ordering::Relaxed);
                if options.until_end {
                    let done = progress.done.load(Ordering::Relaxed);
                    report.update(done, progress.total.load(Ordering::Relaxed));
                } else {
                    let rate = (records - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-3);
                    eprintln!("{}: {records} records processed ({rate:.0}/s)", app.name);
                    last = (Instant::now(), records);
                }
            }
            _ = maintenance.tick() => {
                if let LogAccess::Embedded(manager, _) = log {
                    manager.flush_due();
                    manager.enforce_retention();
                }
            }
            joined = running.join_next() => {
                let Some(joined) = joined else { break };
                let (id, name, result) = joined.map_err(|e| RuntimeError::TaskPanicked {
                    task: app.name().to_string(),
                    reason: e.to_string(),
                })?;
                tasks[id].done = true;
                match result {
                    Ok(()) if options.until_end && failure.is_none() => {
                        set_targets(app, log, &mut tasks, &partitions).await?;
                    }
                    Ok(()) => {}
                    // Another instance owns the task now: this one gives it
                    // up and goes on with the others.
                    Err(error @ RuntimeError::Fenced { .. }) => {
                        tracing::warn!(task = %name, "{error}");
                    }
                    Err(error) => {
                        tracing::error!(task = %name, "{error}");
                        failure.get_or_insert(error);
                        stop_flag.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    let records = progress.records.load(Ordering::Relaxed);
    if options.until_end && options.progress_every.is_some() {
        let done = progress.done.load(Ordering::Relaxed);
        report.finish(done, progress.total.load(Ordering::Relaxed));
    }
    match failure {
        Some(error) => Err(error),
        None => Ok((tasks.len(), records)),
    }
}

/// Gives every task whose inputs' ends are now known its targets: the
/// current end offsets of external inputs (once, at start) and of
/// derived topics all of whose writing tasks have stopped.
async fn set_targets(
    app: &App,
    log: &LogAccess,
    tasks: &mut [TaskHandle],
    partitions: &BTreeMap<String, i32>,
) -> Result<(), RuntimeError> {
    let external = app.external_inputs();
    let settled = |topic: &String| {
        external.contains(topic)
            || tasks.iter().all(|t| {
                t.done
                    || !app.processors[t.processor]
                        .outputs
                        .iter()
                        .any(|o| &o.topic == topic)
            })
    };
    let mut ready = Vec::new();
    for (id, task) in tasks.iter().enumerate() {
        let inputs = &app.processors[task.processor].inputs;
        if task.done || task.targets.borrow().is_some() || !inputs.iter().all(settled) {
            continue;
        }
        ready.push(id);
    }
    for id in ready {
        let task = &tasks[id];
        let mut targets = Targets::new();
        for topic in &app.processors[task.processor].inputs {
            debug_assert!(partitions.contains_key(topic));
            let log_topic = app.log_topic(topic);
            let end = log.end_offset(&log_topic, task.partition).await?;
            targets.insert(topic.clone(), end);
        }
        let _ = task.targets.send(Some(targets));
    }
    Ok(())
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
