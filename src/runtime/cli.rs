//! The command line every app binary gets from [`App::run_cli`]:
//!
//! ```text
//! <app> run [--until-end] [--serve ADDR] [--commit-records N] [--commit-ms MS]
//!           [--checkpoint-records N] [--checkpoint-secs S] [--checkpoints-kept K]
//!                                                 process (embedded or remote)
//! <app> status [--version V]                      per task: offsets, lag, outbox
//! <app> dump-state [--store S] [--at OFFSET]      sorted `store<TAB>key<TAB>value`
//! <app> replay --version V --from earliest|OFFSET|TIME [--until-end]
//!              (and run's commit and checkpoint flags)
//! <app> diff A B                                  exit status 1 when they differ
//! <app> promote V                                 make a version live
//! <app> versions                                  list them
//! <app> rebuild [--store S] [--from-checkpoint] [--version V]
//!                                                 fresh state from the log, swapped in
//! <app> checkpoint [--version V]                  checkpoint every task's state
//! ```
//!
//! The version the app runs is `live` (see `versions`); `run` runs it, and
//! the other commands look at it unless given `--version`.
//!
//! Every subcommand takes the same location flags: `--data-dir DIR`
//! (embedded; state in `DIR/apps/<app>` unless `--state-dir`), or
//! `--bootstrap ADDR --state-dir DIR` (remote). An app with flags of its
//! own parses [`Cli<T>`] with its `clap::Args` type and passes the result to
//! [`App::run_parsed`].

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use std::collections::BTreeMap;

use crate::client::Admin;

use super::log_access::LogAccess;

use super::diff::DiffReport;
use super::error::RuntimeError;
use super::rebuild::RebuildOptions;
use super::runner::{
    Location, RunOptions, StartAt, checkpoint_dir, checkpoint_request, lock_running,
};
use super::state::{StateError, TaskState, checkpoints};
use super::topology::App;
use super::versions::{BASE, LIVE, Versions, parse_start};

#[derive(Debug, Parser)]
pub struct Cli<T: Args> {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub args: T,
    #[command(subcommand)]
    pub command: Command,
}

/// No flags of the app's own.
#[derive(Debug, Clone, Args)]
pub struct NoArgs {}

#[derive(Debug, Clone, Default, Args)]
pub struct LocationArgs {
    /// The log directory, opened by the app itself (embedded mode).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// A Kafka-protocol broker to run against (remote mode).
    #[arg(long, global = true, env = "STRATA_BOOTSTRAP")]
    pub bootstrap: Option<String>,
    /// Where the tasks' state lives (required with --bootstrap).
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Process the inputs (until Ctrl-C / SIGTERM, or --until-end).
    Run {
        /// Stop once the inputs, as they are now, are processed through the
        /// whole pipeline and every derived record is shipped.
        #[arg(long)]
        until_end: bool,
        /// Embedded only: serve the Kafka protocol on this address too (port
        /// 0: a free one, written to `<state dir>/serving`).
        #[arg(long)]
        serve: Option<SocketAddr>,
        #[command(flatten)]
        commit: CommitArgs,
        #[command(flatten)]
        checkpoints: CheckpointArgs,
    },
    /// Run the processors (a new build) into a version of their own: state
    /// apart, derived topics named `<topic>.VERSION`; the live version is
    /// not touched. Resumes where it stopped, exactly once like `run`.
    Replay {
        /// The version's name (letters, digits, '-', '_').
        #[arg(long)]
        version: String,
        /// Where to start in the external inputs: earliest, an offset, a
        /// timestamp in ms (`1700000000000ms`) or a UTC time
        /// (`2026-11-30T12:00:00Z`).
        #[arg(long, default_value = "earliest")]
        from: String,
        /// Stop once the inputs, as they are now, are processed.
        #[arg(long)]
        until_end: bool,
        #[command(flatten)]
        commit: CommitArgs,
        #[command(flatten)]
        checkpoints: CheckpointArgs,
    },
    /// Per task: input offset, end offset, lag, outbox size.
    Status {
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Every store entry as a sorted `store<TAB>key<TAB>value` line.
    DumpState {
        /// Only this store.
        #[arg(long)]
        store: Option<String>,
        /// The state as of this input offset: each task's newest checkpoint
        /// at or below it.
        #[arg(long, value_name = "OFFSET")]
        at: Option<i64>,
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Compare two versions' stores and derived topics; exit status 1 when
    /// they differ.
    Diff {
        a: String,
        b: String,
        /// Differences shown per store.
        #[arg(long, default_value_t = 5)]
        examples: usize,
    },
    /// Make a version live (its state and derived topics); the version it
    /// replaces is kept, so promoting that one back rolls back.
    Promote { version: String },
    /// The app's versions; the live one marked.
    Versions,
    /// Rebuild the stateful tasks' state from the log into a fresh
    /// directory while the app keeps running, and swap it in once it has
    /// caught up (the old state is kept until the swap).
    Rebuild {
        /// Only the processor keeping this store.
        #[arg(long)]
        store: Option<String>,
        /// Start from each task's newest checkpoint instead of the log's
        /// beginning (when retention has deleted the beginning).
        #[arg(long)]
        from_checkpoint: bool,
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Checkpoint every task's state now (running or not).
    Checkpoint {
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
}

/// When the tasks commit, overriding the app's setting.
#[derive(Debug, Clone, Default, Args)]
pub struct CommitArgs {
    /// Commit a task's run after this many records.
    #[arg(long, value_name = "N")]
    pub commit_records: Option<u64>,
    /// Commit a task's run at least this often, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub commit_ms: Option<u64>,
}

impl CommitArgs {
    fn apply(&self, config: &mut super::topology::TaskConfig) {
        if let Some(records) = self.commit_records {
            config.commit.records = records.max(1);
        }
        if let Some(ms) = self.commit_ms {
            config.commit.interval = Duration::from_millis(ms);
        }
    }
}

/// Checkpoints the tasks take on their own.
#[derive(Debug, Clone, Default, Args)]
pub struct CheckpointArgs {
    /// Checkpoint a task's state after every N records.
    #[arg(long, value_name = "N")]
    pub checkpoint_records: Option<u64>,
    /// Checkpoint a task's state every S seconds (when it processed any).
    #[arg(long, value_name = "S")]
    pub checkpoint_secs: Option<u64>,
    /// Checkpoints kept per task.
    #[arg(long, value_name = "K")]
    pub checkpoints_kept: Option<usize>,
}

impl CheckpointArgs {
    fn apply(&self, config: &mut super::topology::TaskConfig) {
        if let Some(records) = self.checkpoint_records {
            config.checkpoints.records = Some(records.max(1));
        }
        if let Some(secs) = self.checkpoint_secs {
            config.checkpoints.interval = Some(Duration::from_secs(secs));
        }
        if let Some(keep) = self.checkpoints_kept {
            config.checkpoints.keep = keep.max(1);
        }
    }
}

/// How a subcommand ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `diff` found differences (exit status 1).
    Differs,
}

impl LocationArgs {
    pub fn location(&self, app: &str) -> Result<Location, RuntimeError> {
        match (&self.data_dir, &self.bootstrap, &self.state_dir) {
            (Some(_), Some(_), _) => Err(RuntimeError::Config(
                "give either --data-dir (embedded) or --bootstrap (remote), not both".into(),
            )),
            (Some(data_dir), None, state_dir) => {
                let mut location = Location::embedded(data_dir, app);
                if let (Location::Embedded { state_dir: s, .. }, Some(dir)) =
                    (&mut location, state_dir)
                {
                    *s = dir.clone();
                }
                Ok(location)
            }
            (None, Some(bootstrap), Some(state_dir)) => Ok(Location::Remote {
                bootstrap: bootstrap.clone(),
                state_dir: state_dir.clone(),
            }),
            (None, Some(_), None) => Err(RuntimeError::Config(
                "--bootstrap needs --state-dir: where the tasks' state is kept".into(),
            )),
            (None, None, _) => Err(RuntimeError::Config(
                "give --data-dir DIR (embedded log) or --bootstrap ADDR --state-dir DIR (remote)"
                    .into(),
            )),
        }
    }
}

impl App {
    /// Parses the command line and runs the subcommand; prints an error and
    /// exits with status 1 on failure.
    pub fn run_cli(self) -> Result<(), RuntimeError> {
        let cli = Cli::<NoArgs>::parse();
        self.run_parsed(&cli.location, &cli.command)
    }

    /// Runs a parsed subcommand (for apps with flags of their own); prints
    /// an error and exits with status 1 on failure (2 for an error of
    /// `diff`, whose 1 means the versions differ).
    pub fn run_parsed(
        self,
        location: &LocationArgs,
        command: &Command,
    ) -> Result<(), RuntimeError> {
        match self.execute(location, command) {
            Ok(Outcome::Done) => Ok(()),
            Ok(Outcome::Differs) => std::process::exit(1),
            Err(error) => {
                eprintln!("{}: {error}", self.name);
                let code = if matches!(command, Command::Diff { .. }) {
                    2
                } else {
                    1
                };
                std::process::exit(code);
            }
        }
    }

    /// Runs a subcommand, returning its error.
    pub fn execute(
        &self,
        location: &LocationArgs,
        command: &Command,
    ) -> Result<Outcome, RuntimeError> {
        let location = location.location(&self.name)?;
        let runtime = tokio::runtime::Runtime::new().map_err(|error| RuntimeError::Io {
            context: "starting the async runtime".into(),
            error,
        })?;
        let versions = || Versions::load(location.state_dir());
        let version = |name: &Option<String>| versions()?.get(name.as_deref().unwrap_or(LIVE));
        runtime.block_on(async {
            match command {
                Command::Run {
                    until_end,
                    serve,
                    commit,
                    checkpoints,
                } => {
                    let live = version(&None)?;
                    let (mut app, location) = self.as_version(&location, &live);
                    app.tune(commit, checkpoints);
                    let options = RunOptions {
                        until_end: *until_end,
                        serve: *serve,
                        progress_every: Some(Duration::from_secs(5)),
                        start: StartAt::Earliest,
                    };
                    if live.name != BASE {
                        eprintln!(
                            "{}: running version {} (derived topics end in {:?})",
                            self.name, live.name, live.topic_suffix
                        );
                    }
                    app.run_reporting(&location, options).await
                }
                Command::Replay {
                    version: name,
                    from,
                    until_end,
                    commit,
                    checkpoints,
                } => {
                    let start = parse_start(from)?;
                    let replayed = versions()?.for_replay(name, from)?;
                    let (mut app, location) = self.as_version(&location, &replayed);
                    app.tune(commit, checkpoints);
                    eprintln!(
                        "{}: replaying into version {name} (state in {}, derived topics {})",
                        self.name,
                        replayed.state_dir.display(),
                        app.derived_log_topics().join(", ")
                    );
                    let options = RunOptions {
                        until_end: *until_end,
                        serve: None,
                        progress_every: Some(Duration::from_secs(5)),
                        start,
                    };
                    app.run_reporting(&location, options).await
                }
                Command::Status { version: name } => {
                    let (app, location) = self.as_version(&location, &version(name)?);
                    app.print_status(&location).await.map(|()| Outcome::Done)
                }
                Command::DumpState {
                    store,
                    at,
                    version: name,
                } => {
                    let (app, location) = self.as_version(&location, &version(name)?);
                    app.dump_state(&location, store.as_deref(), *at)
                        .map(|()| Outcome::Done)
                }
                Command::Diff { a, b, examples } => {
                    let versions = versions()?;
                    let (a, b) = (versions.get(a)?, versions.get(b)?);
                    let report = self.diff(&location, &a, &b, *examples).await?;
                    print_diff(&report)?;
                    Ok(if report.differs() {
                        Outcome::Differs
                    } else {
                        Outcome::Done
                    })
                }
                Command::Promote { version: name } => {
                    let mut versions = versions()?;
                    let next = versions.get(name)?;
                    let current = versions.get(LIVE)?;
                    if next == current {
                        eprintln!("{}: {} is already live", self.name, next.name);
                        return Ok(Outcome::Done);
                    }
                    // Neither may be running: the live app would go on
                    // writing the version it started with.
                    let _current = lock_running(&current.state_dir).map_err(|_| {
                        RuntimeError::Config(format!(
                            "the live version {} is running; stop it, promote, then start it again",
                            current.name
                        ))
                    })?;
                    let _next = lock_running(&next.state_dir).map_err(|_| {
                        RuntimeError::Config(format!(
                            "version {} is running (a replay?); stop it first",
                            next.name
                        ))
                    })?;
                    let previous = versions.promote(name)?;
                    let (app, _) = self.as_version(&location, &next);
                    println!(
                        "{} is live: `run` uses its state ({}) and derived topics ({})",
                        next.name,
                        next.state_dir.display(),
                        app.derived_log_topics().join(", ")
                    );
                    println!(
                        "the previous live version, {}, is kept: `promote {}` rolls back",
                        previous.name, previous.name
                    );
                    Ok(Outcome::Done)
                }
                Command::Versions => {
                    let versions = versions()?;
                    for name in versions.names() {
                        let marker = if name == versions.live_name() {
                            "  (live)"
                        } else {
                            ""
                        };
                        println!("{name}{marker}");
                    }
                    Ok(Outcome::Done)
                }
                Command::Rebuild {
                    store,
                    from_checkpoint,
                    version: name,
                } => {
                    let (app, location) = self.as_version(&location, &version(name)?);
                    let options = RebuildOptions {
                        store: store.clone(),
                        from_checkpoint: *from_checkpoint,
                        progress_every: Some(Duration::from_secs(5)),
                        commit: None,
                    };
                    let summary = app.rebuild(&location, options).await?;
                    let by = if summary.handed_over > 0 {
                        "the running app swapped it in"
                    } else {
                        "swapped in"
                    };
                    eprintln!(
                        "{}: rebuilt {} task(s) from {} records in {:.1} s; {by}",
                        self.name,
                        summary.tasks,
                        summary.records,
                        summary.elapsed.as_secs_f64()
                    );
                    Ok(Outcome::Done)
                }
                Command::Checkpoint { version: name } => {
                    let (app, location) = self.as_version(&location, &version(name)?);
                    app.checkpoint_now(&location).await.map(|()| Outcome::Done)
                }
            }
        })
    }

    /// Applies the command line's commit and checkpoint settings.
    fn tune(&mut self, commit: &CommitArgs, checkpoints: &CheckpointArgs) {
        commit.apply(&mut self.config);
        checkpoints.apply(&mut self.config);
    }

    async fn run_reporting(
        &self,
        location: &Location,
        options: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        let stop = shutdown_signal()?;
        let summary = self.run(location, options, stop).await?;
        eprintln!(
            "{}: {} records processed in {:.1} s",
            self.name,
            summary.records,
            summary.elapsed.as_secs_f64()
        );
        Ok(Outcome::Done)
    }

    /// Checkpoints every task with stores: directly when the app is not
    /// running, else by asking the running tasks (and waiting for them).
    pub async fn checkpoint_now(&self, location: &Location) -> Result<(), RuntimeError> {
        let tasks: Vec<(String, i32, PathBuf)> = self
            .processors
            .iter()
            .filter(|p| !p.stores.is_empty())
            .flat_map(|p| {
                let dirs = task_dirs(&location.state_dir().join(&p.name)).unwrap_or_default();
                dirs.into_iter()
                    .map(move |(partition, dir)| (p.name.clone(), partition, dir))
            })
            .collect();
        if tasks.is_empty() {
            return Err(RuntimeError::Config(
                "no task with state has run yet: nothing to checkpoint".into(),
            ));
        }
        let root = location.state_dir();
        let lock = match lock_running(root) {
            Ok(lock) => Some(lock),
            // Held: the app runs (or a rebuild holds it for its swap).
            Err(RuntimeError::Config(_)) => None,
            Err(error) => return Err(error),
        };
        if lock.is_some() {
            for (processor, partition, dir) in &tasks {
                let spec = self
                    .processors
                    .iter()
                    .find(|p| &p.name == processor)
                    .expect("listed from the processors");
                let stores: Vec<&str> = spec.stores.iter().map(|s| s.name.as_str()).collect();
                let mut state = TaskState::open(dir, &stores, true)?;
                let Some(offset) = state.input_offset(&spec.inputs[0]) else {
                    continue;
                };
                let target = checkpoint_dir(root, processor, *partition);
                state.checkpoint(&target, offset, self.config.checkpoints.keep.max(1))?;
                println!("{processor}/{partition}: checkpoint at offset {offset}");
            }
            return Ok(());
        }
        // Running: write a fresh token to the request file; each task
        // answers with it once its checkpoint is taken.
        let token = format!("{:?}", std::time::SystemTime::now());
        let request = checkpoint_request(root);
        let io = |context: String| move |error| RuntimeError::Io { context, error };
        std::fs::create_dir_all(root.join("checkpoints"))
            .map_err(io(format!("creating {}", root.display())))?;
        std::fs::write(&request, &token).map_err(io(format!("writing {}", request.display())))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        for (processor, partition, _) in &tasks {
            let dir = checkpoint_dir(root, processor, *partition);
            let answer = dir.join("ANSWERED");
            while std::fs::read_to_string(&answer).ok().as_deref() != Some(token.as_str()) {
                if std::time::Instant::now() > deadline {
                    return Err(RuntimeError::Config(format!(
                        "task {processor}/{partition} did not take its checkpoint within 60 s (is it running?)"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let newest = checkpoints(&dir)
                .map_err(io(format!("listing {}", dir.display())))?
                .last()
                .map(|(offset, _)| *offset);
            if let Some(offset) = newest {
                println!("{processor}/{partition}: checkpoint at offset {offset}");
            }
        }
        Ok(())
    }

    /// Every store's entries of every task, rendered and sorted.
    pub fn dump_state_lines(
        &self,
        location: &Location,
        only: Option<&str>,
    ) -> Result<Vec<String>, RuntimeError> {
        self.dump_state_lines_at(location, only, None)
    }

    /// As [`App::dump_state_lines`], or, with `at`, as of input offset `at`:
    /// each task's newest checkpoint at or below it (an error names a task
    /// that has none).
    pub fn dump_state_lines_at(
        &self,
        location: &Location,
        only: Option<&str>,
        at: Option<i64>,
    ) -> Result<Vec<String>, RuntimeError> {
        let mut lines = Vec::new();
        for spec in &self.processors {
            let stores: Vec<_> = spec
                .stores
                .iter()
                .filter(|s| only.is_none_or(|o| o == s.name))
                .collect();
            if stores.is_empty() {
                continue;
            }
            for (partition, dir) in task_dirs(&location.state_dir().join(&spec.name))? {
                let dir = match at {
                    None => dir,
                    Some(at) => checkpoint_at(location.state_dir(), &spec.name, partition, at)?.1,
                };
                let Some(state) = open_committed(&dir)? else {
                    continue;
                };
                for store in &stores {
                    if !state.stores().contains(&store.name) {
                        continue;
                    }
                    for (key, value) in state.entries(&store.name)? {
                        lines.push(format!(
                            "{}\t{}\t{}",
                            store.name,
                            (store.render_key)(&key),
                            (store.render_value)(&value)
                        ));
                    }
                }
            }
        }
        if let Some(only) = only
            && !self
                .processors
                .iter()
                .flat_map(|p| &p.stores)
                .any(|s| s.name == only)
        {
            return Err(RuntimeError::Config(format!("no store named {only:?}")));
        }
        lines.sort();
        Ok(lines)
    }

    fn dump_state(
        &self,
        location: &Location,
        only: Option<&str>,
        at: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let lines = self.dump_state_lines_at(location, only, at)?;
        if let Some(at) = at {
            for spec in self.processors.iter().filter(|p| !p.stores.is_empty()) {
                for (partition, _) in task_dirs(&location.state_dir().join(&spec.name))? {
                    let (offset, _) =
                        checkpoint_at(location.state_dir(), &spec.name, partition, at)?;
                    eprintln!(
                        "{}/{partition}: the checkpoint at offset {offset}",
                        spec.name
                    );
                }
            }
        }
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for line in lines {
            writeln!(out, "{line}").map_err(stdout_error)?;
        }
        out.flush().map_err(stdout_error)
    }

    /// One row per task and input topic.
    pub async fn status_rows(&self, location: &Location) -> Result<Vec<StatusRow>, RuntimeError> {
        let remote = match location {
            Location::Remote { bootstrap, .. } => {
                let (access, cluster) = LogAccess::connect(bootstrap).await?;
                Some((access, Admin::new(cluster)))
            }
            Location::Embedded { .. } => None,
        };
        let mut retention: BTreeMap<String, i64> = BTreeMap::new();
        let mut rows = Vec::new();
        for spec in &self.processors {
            for (partition, dir) in task_dirs(&location.state_dir().join(&spec.name))? {
                let state = open_committed(&dir)?;
                let outbox_records = match &state {
                    Some(state) => state.outbox()?.iter().map(|(_, b)| b.record_count()).sum(),
                    None => 0,
                };
                let rate = match &state {
                    Some(state) => state.rate()?,
                    None => None,
                };
                for topic in &spec.inputs {
                    let log_topic = self.log_topic(topic);
                    let offset = match &state {
                        Some(state) => state.input_offset(topic),
                        None => None,
                    };
                    let next = offset.unwrap_or(0);
                    let (start, end, oldest_unread) = match (location, &remote) {
                        (Location::Embedded { data_dir, .. }, _) => {
                            use crate::log::{peek_log_end_offset, peek_log_start_offset};
                            let start = peek_log_start_offset(data_dir, &log_topic, partition);
                            let end = peek_log_end_offset(data_dir, &log_topic, partition);
                            let oldest = crate::log::peek_segment_max_timestamp(
                                data_dir, &log_topic, partition, next,
                            );
                            (
                                start.ok().flatten(),
                                end.ok().flatten(),
                                oldest.ok().flatten(),
                            )
                        }
                        (_, Some((access, _))) => {
                            let start = access.start_offset(&log_topic, partition).await?;
                            let end = access.end_offset(&log_topic, partition).await?;
                            let oldest = if next >= start && next < end {
                                first_batch_timestamp(access, &log_topic, partition, next).await?
                            } else {
                                None
                            };
                            (Some(start), Some(end), oldest)
                        }
                        _ => (None, None, None),
                    };
                    if !retention.contains_key(&log_topic) {
                        let ms =
                            topic_retention_ms(location, remote.as_ref().map(|r| &r.1), &log_topic)
                                .await;
                        retention.insert(log_topic.clone(), ms);
                    }
                    let retention_ms = retention[&log_topic];
                    let expires_in_ms = match oldest_unread {
                        Some(newest) if retention_ms >= 0 => {
                            Some(newest.saturating_add(retention_ms) - crate::time::now_ms())
                        }
                        _ => None,
                    };
                    rows.push(StatusRow {
                        task: format!("{}/{partition}", spec.name),
                        topic: log_topic,
                        partition,
                        offset,
                        end,
                        outbox_records,
                        rate,
                        expires_in_ms,
                        start,
                    });
                }
            }
        }
        Ok(rows)
    }

    async fn print_status(&self, location: &Location) -> Result<(), RuntimeError> {
        let rows = self.status_rows(location).await?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let show = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let header = format!(
            "{:<20} {:<24} {:>12} {:>12} {:>10} {:>8} {:>10} {:>8} {:>9}",
            "TASK", "INPUT", "OFFSET", "END", "LAG", "OUTBOX", "RATE/S", "ETA", "EXPIRES"
        );
        writeln!(out, "{header}").map_err(stdout_error)?;
        for row in &rows {
            writeln!(
                out,
                "{:<20} {:<24} {:>12} {:>12} {:>10} {:>8} {:>10} {:>8} {:>9}",
                row.task,
                format!("{}/{}", row.topic, row.partition),
                show(row.offset),
                show(row.end),
                show(row.lag()),
                row.outbox_records,
                row.rate.map_or("-".to_string(), |r| format!("{r:.0}")),
                match (row.lag(), row.eta_secs()) {
                    (Some(0), _) => "0s".to_string(),
                    (_, Some(eta)) => super::progress::duration(eta),
                    _ => "-".to_string(),
                },
                match row.expires_in_ms {
                    Some(ms) if ms <= 0 => "due".to_string(),
                    Some(ms) => super::progress::duration(ms as f64 / 1000.0),
                    None => "-".to_string(),
                },
            )
            .map_err(stdout_error)?;
        }
        if rows.is_empty() {
            writeln!(
                out,
                "(no task has run yet under {})",
                location.state_dir().display()
            )
            .map_err(stdout_error)?;
        }
        for warning in rows.iter().filter_map(StatusRow::warning) {
            writeln!(out, "WARNING: {warning}").map_err(stdout_error)?;
        }
        out.flush().map_err(stdout_error)
    }
}

/// The newest timestamp of the first batch at `offset`: a lower bound of
/// the newest timestamp of the segment holding it.
async fn first_batch_timestamp(
    access: &LogAccess,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<i64>, RuntimeError> {
    let fetched = access.fetch(topic, partition, offset, 64 << 10).await?;
    Ok(crate::record::RecordBatch::parse(&fetched.records)
        .ok()
        .map(|b| b.header().max_timestamp))
}

/// A topic's `retention.ms` (-1: unlimited), the log's default where the
/// topic does not set it or it cannot be read.
async fn topic_retention_ms(location: &Location, admin: Option<&Admin>, topic: &str) -> i64 {
    let config = match (location, admin) {
        (Location::Embedded { data_dir, .. }, _) => {
            crate::log::peek_topic_metadata(data_dir, topic)
                .map(|m| m.config)
                .ok()
        }
        (_, Some(admin)) => admin.describe_topic(topic).await.ok().map(|d| d.config),
        _ => None,
    };
    config
        .and_then(|c| c.get("retention.ms").and_then(|v| v.parse().ok()))
        .unwrap_or(crate::log::LogConfig::default().retention_ms)
}

/// A task's position in one input.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    pub task: String,
    pub topic: String,
    pub partition: i32,
    /// The next offset to process (None before the first commit).
    pub offset: Option<i64>,
    pub end: Option<i64>,
    /// Records emitted and committed but not yet appended to the log.
    pub outbox_records: usize,
    /// Records/s the task processed while busy, as of its last commit.
    pub rate: Option<f64>,
    /// Milliseconds until retention may delete the segment holding the next
    /// record to process (its newest timestamp plus the topic's
    /// `retention.ms`; negative: already due); None when nothing is unread
    /// or retention is unlimited.
    pub expires_in_ms: Option<i64>,
    /// The input's log start offset: records below it are gone.
    pub start: Option<i64>,
}

impl StatusRow {
    pub fn lag(&self) -> Option<i64> {
        Some(self.end? - self.offset.unwrap_or(0)).map(|l| l.max(0))
    }

    /// Seconds to process the lag at the task's rate.
    pub fn eta_secs(&self) -> Option<f64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        Some(self.lag()? as f64 / rate)
    }

    /// The catch-up check: a warning when the task will not reach its
    /// unread records before retention deletes them.
    pub fn warning(&self) -> Option<String> {
        let lag = self.lag().filter(|l| *l > 0)?;
        if let (Some(next), Some(start)) = (self.offset, self.start)
            && start > next
        {
            return Some(format!(
                "task {} reads {}/{} at offset {next}, but retention has deleted everything before offset {start}: {} records are gone unprocessed, and the task stops with an error when it gets there",
                self.task,
                self.topic,
                self.partition,
                start - next
            ));
        }
        let expires_in = self.expires_in_ms? as f64 / 1000.0;
        let input = format!("{}/{}", self.topic, self.partition);
        let expiry = if expires_in <= 0.0 {
            "is already due for deletion by retention".to_string()
        } else {
            format!(
                "expires under retention in {}",
                super::progress::duration(expires_in)
            )
        };
        match self.eta_secs() {
            Some(eta) if eta > expires_in => Some(format!(
                "task {} will not catch up on {input} before its input expires: {lag} records behind at {:.0}/s takes {}, but the oldest unread segment {expiry}; records will be deleted unprocessed (raise the topic's retention.ms, or make the app faster)",
                self.task,
                self.rate.unwrap_or(0.0),
                super::progress::duration(eta)
            )),
            None if expires_in <= 0.0 => Some(format!(
                "task {} is {lag} records behind on {input}, and the oldest unread segment {expiry}",
                self.task
            )),
            _ => None,
        }
    }
}

/// A task's newest checkpoint at or below input offset `at`.
fn checkpoint_at(
    state_dir: &std::path::Path,
    processor: &str,
    partition: i32,
    at: i64,
) -> Result<(i64, PathBuf), RuntimeError> {
    let dir = checkpoint_dir(state_dir, processor, partition);
    let all = checkpoints(&dir).map_err(|error| RuntimeError::Io {
        context: format!("listing {}", dir.display()),
        error,
    })?;
    let offsets: Vec<String> = all.iter().map(|(o, _)| o.to_string()).collect();
    all.into_iter()
        .rev()
        .find(|(offset, _)| *offset <= at)
        .ok_or_else(|| {
            RuntimeError::Config(format!(
                "task {processor}/{partition} has no checkpoint at or below offset {at} (checkpoints at: {})",
                if offsets.is_empty() { "none".to_string() } else { offsets.join(", ") }
            ))
        })
}

fn print_diff(report: &DiffReport) -> Result<(), RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (a, b) = (&report.a, &report.b);
    for store in &report.stores {
        writeln!(
            out,
            "store {}: {} only in {a}, {} only in {b}, {} with different values",
            store.store, store.only_a, store.only_b, store.different
        )
        .map_err(stdout_error)?;
        for example in &store.examples {
            writeln!(out, "  {example}").map_err(stdout_error)?;
        }
    }
    for topic in &report.topics {
        for p in &topic.partitions {
            let first = match p.first_difference {
                Some(offset) => format!("first difference at offset {offset}"),
                None => "identical".to_string(),
            };
            writeln!(
                out,
                "topic {} partition {}: {} vs {}: {} and {} records, {} differ in place ({} only in {a}, {} only in {b}, order aside), {first}",
                topic.topic,
                p.partition,
                topic.log_topic_a,
                topic.log_topic_b,
                p.records_a,
                p.records_b,
                p.differing,
                p.only_a,
                p.only_b
            )
            .map_err(stdout_error)?;
        }
    }
    let verdict = if report.differs() {
        "differ"
    } else {
        "are the same"
    };
    writeln!(out, "{a} and {b} {verdict}").map_err(stdout_error)?;
    out.flush().map_err(stdout_error)
}

/// The task directories of one processor, by partition.
pub(crate) fn task_dirs(dir: &std::path::Path) -> Result<Vec<(i32, PathBuf)>, RuntimeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(RuntimeError::Io {
                context: format!("listing {}", dir.display()),
                error,
            });
        }
    };
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        if let Some(partition) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        {
            dirs.push((partition, entry.path()));
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// A task's state for reading, or None if it never finished its first
/// open (and so never committed anything).
pub(crate) fn open_committed(dir: &std::path::Path) -> Result<Option<TaskState>, RuntimeError> {
    match TaskState::open_read_only(dir) {
        Ok(state) => Ok(Some(state)),
        Err(StateError::NeverOpened(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn stdout_error(error: std::io::Error) -> RuntimeError {
    RuntimeError::Io {
        context: "writing to stdout".into(),
        error,
    }
}

/// Completes on SIGTERM or Ctrl-C.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, RuntimeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|error| RuntimeError::Io {
            context: format!("watching {name}"),
            error,
        })
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
