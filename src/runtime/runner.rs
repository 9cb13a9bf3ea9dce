//! Running an app: open the log (embedded) or connect (remote), resolve
//! the topology (derived topics created, partition counts known), start one
//! task per processor and input partition, and stop them on a signal or,
//! with `until_end`, once everything the inputs held at start has flowed
//! through the whole pipeline.
//!
//! `until_end` in a pipeline: a task whose inputs are all external (written
//! by no processor of the app) stops at the end offsets those inputs had at
//! start. A task reading a derived topic learns its end only once every
//! task writing that topic has stopped (and so shipped everything); the
//! derived topic's end offsets at that moment are its target.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::log::{LogConfig, LogError, LogManager};

use super::error::RuntimeError;
use super::log_access::LogAccess;
use super::progress::ProgressReport;
use super::spec::TopicOutput;
use super::task::{self, Checkpoints, Targets, TaskProgress, TaskSetup};
use super::topology::{App, ProcessorSpec};

/// Where an app's log and state are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The app opens the log directory itself; state under `state_dir`.
    Embedded {
        data_dir: PathBuf,
        state_dir: PathBuf,
    },
    /// Through the client; state under `state_dir`.
    Remote {
        bootstrap: String,
        state_dir: PathBuf,
    },
}

impl Location {
    /// Embedded, with the state kept inside the data directory
    /// (`<data>/apps/<app>`; the log ignores directories it did not make).
    pub fn embedded(data_dir: &Path, app: &str) -> Self {
        Self::Embedded {
            data_dir: data_dir.to_path_buf(),
            state_dir: data_dir.join("apps").join(app),
        }
    }

    pub fn state_dir(&self) -> &Path {
        match self {
            Self::Embedded { state_dir, .. } | Self::Remote { state_dir, .. } => state_dir,
        }
    }

    /// The address an app run with `serve` is serving the Kafka protocol
    /// on, while it runs (with port 0, the port the system picked): read
    /// from `<state_dir>/serving`.
    pub fn serving_addr(&self) -> Option<SocketAddr> {
        // A file left by a killed run names nothing: the app must hold its
        // run lock.
        if !is_locked(&self.state_dir().join(".running")) {
            return None;
        }
        let text = std::fs::read_to_string(self.state_dir().join(SERVING)).ok()?;
        text.trim().parse().ok()
    }
}

/// The file in a state directory naming the address its running app
/// serves on.
const SERVING: &str = "serving";

/// Where a task with no committed offset starts reading an external input
/// (derived inputs are always read from their start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// The earliest offset still retained.
    #[default]
    Earliest,
    Offset(i64),
    /// The first record with a timestamp at or after this (ms since the
    /// Unix epoch); the end of the partition if there is none.
    Timestamp(i64),
}

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

impl App {
    /// Runs the app until `stop` completes (or, with `until_end`, until
    /// the inputs are drained), then commits and ships everything.
    pub async fn run(
        &self,
        location: &Location,
        options: RunOptions,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<RunSummary, RuntimeError> {
        self.check().map_err(RuntimeError::Config)?;
        let started = Instant::now();
        let _running = lock_running(location.state_dir())?;
        let (mut log, embedded) = open(location).await?;
        let served = match (&embedded, options.serve) {
            (Some(manager), Some(addr)) => {
                let state_dir = location.state_dir();
                let (served, signals) = serve(Arc::clone(manager), addr, state_dir).await?;
                // The app's appends wake the broker's waiting fetches.
                log = LogAccess::Embedded(Arc::clone(manager), Some(signals));
                Some(served)
            }
            (None, Some(_)) => {
                return Err(RuntimeError::Config(
                    "--serve needs the embedded log (--data-dir)".into(),
                ));
            }
            _ => None,
        };
        let result = self.run_tasks(&log, location, &options, stop).await;
        if let Some((shutdown, server)) = served {
            let _ = shutdown.send(true);
            let _ = server.await;
            let _ = std::fs::remove_file(location.state_dir().join(SERVING));
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
        &self,
        log: &LogAccess,
        location: &Location,
        options: &RunOptions,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(usize, u64), RuntimeError> {
        let partitions = self.resolve(log).await?;
        let stop_flag = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(TaskProgress::default());
        let handle = tokio::runtime::Handle::current();
        let mut tasks = Vec::new();
        let mut running = JoinSet::new();
        for (index, spec) in self.processors.iter().enumerate() {
            let outputs = self.outputs(spec, &partitions);
            for partition in 0..partitions[&spec.inputs[0]] {
                let (targets, targets_rx) = watch::channel(None);
                let start = spec
                    .inputs
                    .iter()
                    .map(|t| {
                        if self.is_derived(t) {
                            StartAt::Earliest
                        } else {
                            options.start
                        }
                    })
                    .collect();
                let setup = TaskSetup {
                    spec: spec.clone(),
                    partition,
                    dir: task_dir(location.state_dir(), &spec.name, partition),
                    checkpoints: Some(Checkpoints {
                        dir: checkpoint_dir(location.state_dir(), &spec.name, partition),
                        request: checkpoint_request(location.state_dir()),
                    }),
                    log_topics: spec.inputs.iter().map(|t| self.log_topic(t)).collect(),
                    start,
                    emits: true,
                    rebuild: Some(rebuild_dir(location.state_dir(), &spec.name, partition)),
                    outputs: outputs.clone(),
                    config: self.config,
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
            self.set_targets(log, &mut tasks, &partitions).await?;
        }
        tokio::pin!(stop);
        let mut stopping = false;
        let mut failure: Option<RuntimeError> = None;
        let every = options.progress_every.unwrap_or(Duration::from_secs(3600));
        let mut report = ProgressReport::new(&self.name, every);
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
                        report.update(records, progress.total.load(Ordering::Relaxed));
                    } else {
                        let rate = (records - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-3);
                        eprintln!("{}: {records} records processed ({rate:.0}/s)", self.name);
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
                    let (id, name, result) = joined.map_err(|e| RuntimeError::Config(format!("a task panicked: {e}")))?;
                    tasks[id].done = true;
                    match result {
                        Ok(()) if options.until_end && failure.is_none() => {
                            self.set_targets(log, &mut tasks, &partitions).await?;
                        }
                        Ok(()) => {}
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
            report.finish(records, progress.total.load(Ordering::Relaxed));
        }
        match failure {
            Some(error) => Err(error),
            None => Ok((tasks.len(), records)),
        }
    }

    /// A processor's outputs as its tasks emit to them.
    pub(crate) fn outputs(
        &self,
        spec: &ProcessorSpec,
        partitions: &BTreeMap<String, i32>,
    ) -> Vec<TopicOutput> {
        let output = |o: &super::spec::OutputSpec| TopicOutput {
            spec: o.clone(),
            log_topic: self.log_topic(&o.topic),
            partitions: partitions[&o.topic],
        };
        spec.outputs.iter().map(output).collect()
    }

    /// Partition counts of every topic of the app, creating derived topics
    /// (with their processor's input partition count unless declared).
    pub(crate) async fn resolve(
        &self,
        log: &LogAccess,
    ) -> Result<BTreeMap<String, i32>, RuntimeError> {
        let mut partitions: BTreeMap<String, i32> = BTreeMap::new();
        for topic in self.external_inputs() {
            let count = log.partition_count(&topic).await?.ok_or_else(|| {
                RuntimeError::Config(format!(
                    "input topic {topic:?} does not exist (create it first, e.g. `strata topics create {topic} --partitions 4`)"
                ))
            })?;
            partitions.insert(topic, count);
        }
        // Processors in an order where each one's inputs are known: a
        // derived topic is created by the processor that writes it.
        let mut left: Vec<usize> = (0..self.processors.len()).collect();
        while !left.is_empty() {
            let ready = left.iter().position(|&i| {
                self.processors[i]
                    .inputs
                    .iter()
                    .all(|t| partitions.contains_key(t))
            });
            let Some(at) = ready else {
                let names: Vec<&str> = left
                    .iter()
                    .map(|&i| self.processors[i].name.as_str())
                    .collect();
                return Err(RuntimeError::Config(format!(
                    "processors {names:?} read each other's outputs in a cycle"
                )));
            };
            let spec = &self.processors[left.remove(at)];
            let counts: Vec<i32> = spec.inputs.iter().map(|t| partitions[t]).collect();
            if counts.iter().any(|&c| c != counts[0]) {
                return Err(RuntimeError::Config(format!(
                    "the inputs of processor {:?} ({:?}) have different partition counts {counts:?}; partition i of each goes to one task, so they must match",
                    spec.name, spec.inputs
                )));
            }
            for output in &spec.outputs {
                let wanted = output.partitions.unwrap_or(counts[0]);
                let count = log
                    .ensure_topic(&self.log_topic(&output.topic), wanted)
                    .await?;
                if let Some(known) = partitions.get(&output.topic)
                    && *known != count
                {
                    return Err(RuntimeError::Config(format!(
                        "topic {:?}: partition counts disagree",
                        output.topic
                    )));
                }
                partitions.insert(output.topic.clone(), count);
            }
        }
        Ok(partitions)
    }

    /// Gives every task whose inputs' ends are now known its targets: the
    /// current end offsets of external inputs (once, at start) and of
    /// derived topics all of whose writing tasks have stopped.
    async fn set_targets(
        &self,
        log: &LogAccess,
        tasks: &mut [TaskHandle],
        partitions: &BTreeMap<String, i32>,
    ) -> Result<(), RuntimeError> {
        let external = self.external_inputs();
        let settled = |topic: &String| {
            external.contains(topic)
                || tasks.iter().all(|t| {
                    t.done
                        || !self.processors[t.processor]
                            .outputs
                            .iter()
                            .any(|o| &o.topic == topic)
                })
        };
        let mut ready = Vec::new();
        for (id, task) in tasks.iter().enumerate() {
            let inputs = &self.processors[task.processor].inputs;
            if task.done || task.targets.borrow().is_some() || !inputs.iter().all(settled) {
                continue;
            }
            ready.push(id);
        }
        for id in ready {
            let task = &tasks[id];
            let mut targets = Targets::new();
            for topic in &self.processors[task.processor].inputs {
                debug_assert!(partitions.contains_key(topic));
                let log_topic = self.log_topic(topic);
                let end = log.end_offset(&log_topic, task.partition).await?;
                targets.insert(topic.clone(), end);
            }
            let _ = task.targets.send(Some(targets));
        }
        Ok(())
    }
}

/// A task's directory under `base`: `<base>/<processor>/<partition>` (its
/// live state under a version's state directory, its rebuild under
/// `rebuild`, its checkpoints under `checkpoints`).
pub(crate) fn task_dir(base: &Path, processor: &str, partition: i32) -> PathBuf {
    base.join(processor).join(partition.to_string())
}

/// Where a rebuild of one task of a version builds its state.
pub(crate) fn rebuild_dir(state_dir: &Path, processor: &str, partition: i32) -> PathBuf {
    task_dir(&state_dir.join("rebuild"), processor, partition)
}

/// The file `checkpoint` writes (a fresh token) to ask a version's running
/// tasks for a checkpoint.
pub(crate) fn checkpoint_request(state_dir: &Path) -> PathBuf {
    state_dir.join("checkpoints").join("REQUEST")
}

/// Where the checkpoints of one task of a version are kept.
pub(crate) fn checkpoint_dir(state_dir: &Path, processor: &str, partition: i32) -> PathBuf {
    task_dir(&state_dir.join("checkpoints"), processor, partition)
}

/// Holds `<state_dir>/.running` locked while the app runs: one process per
/// version's state at a time, and a way for other commands to tell.
pub(crate) fn lock_running(
    state_dir: &Path,
) -> Result<nix::fcntl::Flock<std::fs::File>, RuntimeError> {
    lock_exclusive(&state_dir.join(".running"), || {
        format!(
            "another process is running this app on {} (its state is in use)",
            state_dir.display()
        )
    })
}

/// Locks `path` (created, with its directory, if missing) for this process
/// until the returned lock is dropped; `busy` says why not when another
/// holds it.
pub(crate) fn lock_exclusive(
    path: &Path,
    busy: impl FnOnce() -> String,
) -> Result<nix::fcntl::Flock<std::fs::File>, RuntimeError> {
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let file = std::fs::File::create(path).map_err(io(format!("creating {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| RuntimeError::Config(busy()))
}

/// Whether some process (this one included) holds `path` locked with
/// [`lock_exclusive`].
pub(crate) fn is_locked(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock).is_err()
}

/// Opens the log (embedded) or connects (remote).
pub(crate) async fn open(
    location: &Location,
) -> Result<(LogAccess, Option<Arc<LogManager>>), RuntimeError> {
    match location {
        Location::Embedded { data_dir, .. } => {
            let manager = match LogManager::open(data_dir, LogConfig::default()) {
                Ok(manager) => Arc::new(manager),
                // Another process holds the directory: most likely the app
                // itself, running embedded.
                Err(LogError::Io { error, .. })
                    if error.kind() == std::io::ErrorKind::WouldBlock =>
                {
                    return Err(RuntimeError::Config(format!(
                        "{} is in use by another process (an app running embedded, or strata serve), and only one process can open a log directory; reach the log through that process's Kafka port instead, with `--bootstrap ADDR --state-dir {}/apps/<app>` in place of --data-dir (an embedded app serves the port with `run --serve ADDR`)",
                        data_dir.display(),
                        data_dir.display()
                    )));
                }
                Err(error) => return Err(error.into()),
            };
            Ok((
                LogAccess::Embedded(Arc::clone(&manager), None),
                Some(manager),
            ))
        }
        Location::Remote { bootstrap, .. } => Ok((LogAccess::connect(bootstrap).await?.0, None)),
    }
}

type Served = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

/// Serves the Kafka protocol over the embedded log in this process.
/// The bound address goes to `<state_dir>/serving` (written aside and
/// renamed: a reader sees a whole address or none).
async fn serve(
    log: Arc<LogManager>,
    addr: SocketAddr,
    state_dir: &Path,
) -> Result<(Served, Arc<crate::broker::AppendSignals>), RuntimeError> {
    let config = crate::broker::BrokerConfig {
        listen: addr,
        ..Default::default()
    };
    let broker = crate::broker::Broker::bind(config, log)
        .await
        .map_err(|e| RuntimeError::Config(format!("serving on {addr}: {e}")))?;
    let bound = broker.local_addr();
    eprintln!("serving the Kafka protocol on {bound}");
    super::swap::write_whole(&state_dir.join(SERVING), &format!("{bound}\n"))?;
    let signals = broker.append_signals();
    let (stop, mut stopped) = watch::channel(false);
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        if let Err(error) = broker.serve(shutdown).await {
            tracing::error!("serving: {error}");
        }
    });
    Ok(((stop, server), signals))
}
