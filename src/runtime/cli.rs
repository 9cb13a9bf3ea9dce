//! The command line every app binary gets from [`App::run_cli`]:
//!
//! ```text
//! <app> run [--until-end] [--serve ADDR]   process (embedded or remote)
//! <app> status                             per task: offsets, lag, outbox
//! <app> dump-state [--store NAME]          sorted `store<TAB>key<TAB>value`
//! ```
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

use crate::client::{Admin, ClientConfig, Cluster};

use super::error::RuntimeError;
use super::runner::{Location, RunOptions};
use super::state::{StateError, TaskState};
use super::topology::App;

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

#[derive(Debug, Clone, Args)]
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
        /// Embedded only: serve the Kafka protocol on this address too.
        #[arg(long)]
        serve: Option<SocketAddr>,
        /// Commit a task's run after this many records (overrides the app's
        /// setting).
        #[arg(long, value_name = "N")]
        commit_records: Option<u64>,
        /// Commit a task's run at least this often, in milliseconds
        /// (overrides the app's setting).
        #[arg(long, value_name = "MS")]
        commit_ms: Option<u64>,
    },
    /// Per task: input offset, end offset, lag, outbox size.
    Status,
    /// Every store entry as a sorted `store<TAB>key<TAB>value` line.
    DumpState {
        /// Only this store.
        #[arg(long)]
        store: Option<String>,
    },
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
    /// an error and exits with status 1 on failure.
    pub fn run_parsed(
        self,
        location: &LocationArgs,
        command: &Command,
    ) -> Result<(), RuntimeError> {
        if let Err(error) = self.execute(location, command) {
            eprintln!("{}: {error}", self.name);
            std::process::exit(1);
        }
        Ok(())
    }

    /// Runs a subcommand, returning its error.
    pub fn execute(&self, location: &LocationArgs, command: &Command) -> Result<(), RuntimeError> {
        let location = location.location(&self.name)?;
        let runtime = tokio::runtime::Runtime::new().map_err(|error| RuntimeError::Io {
            context: "starting the async runtime".into(),
            error,
        })?;
        runtime.block_on(async {
            match command {
                Command::Run {
                    until_end,
                    serve,
                    commit_records,
                    commit_ms,
                } => {
                    let mut app = self.clone();
                    if let Some(records) = commit_records {
                        app.config.commit.records = (*records).max(1);
                    }
                    if let Some(ms) = commit_ms {
                        app.config.commit.interval = Duration::from_millis(*ms);
                    }
                    let options = RunOptions {
                        until_end: *until_end,
                        serve: *serve,
                        progress_every: Some(Duration::from_secs(5)),
                    };
                    let stop = shutdown_signal()?;
                    let summary = app.run(&location, options, stop).await?;
                    eprintln!(
                        "{}: {} records processed in {:.1} s",
                        self.name,
                        summary.records,
                        summary.elapsed.as_secs_f64()
                    );
                    Ok(())
                }
                Command::Status => self.print_status(&location).await,
                Command::DumpState { store } => self.dump_state(&location, store.as_deref()),
            }
        })
    }

    /// Every store's entries of every task, rendered and sorted.
    pub fn dump_state_lines(
        &self,
        location: &Location,
        only: Option<&str>,
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
            for dir in task_dirs(&location.state_dir().join(&spec.name))? {
                let Some(state) = open_committed(&dir.1)? else {
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

    fn dump_state(&self, location: &Location, only: Option<&str>) -> Result<(), RuntimeError> {
        let lines = self.dump_state_lines(location, only)?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for line in lines {
            writeln!(out, "{line}").map_err(stdout_error)?;
        }
        out.flush().map_err(stdout_error)
    }

    /// One row per task and input topic.
    pub async fn status_rows(&self, location: &Location) -> Result<Vec<StatusRow>, RuntimeError> {
        let admin = match location {
            Location::Remote { bootstrap, .. } => Some(Admin::new(
                Cluster::connect(ClientConfig::new(bootstrap)).await?,
            )),
            Location::Embedded { .. } => None,
        };
        let mut rows = Vec::new();
        for spec in &self.processors {
            for (partition, dir) in task_dirs(&location.state_dir().join(&spec.name))? {
                let state = open_committed(&dir)?;
                let outbox_records = match &state {
                    Some(state) => state.outbox()?.iter().map(|(_, b)| b.record_count()).sum(),
                    None => 0,
                };
                for topic in &spec.inputs {
                    let offset = match &state {
                        Some(state) => state.input_offset(topic)?,
                        None => None,
                    };
                    let end = match (location, &admin) {
                        (Location::Embedded { data_dir, .. }, _) => {
                            crate::log::peek_log_end_offset(data_dir, topic, partition)
                                .ok()
                                .flatten()
                        }
                        (_, Some(admin)) => {
                            admin
                                .list_offset(topic, partition, crate::client::LATEST)
                                .await?
                        }
                        _ => None,
                    };
                    rows.push(StatusRow {
                        task: format!("{}/{partition}", spec.name),
                        topic: topic.clone(),
                        partition,
                        offset,
                        end,
                        outbox_records,
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
        writeln!(
            out,
            "{:<20} {:<20} {:>12} {:>12} {:>10} {:>8}",
            "TASK", "INPUT", "OFFSET", "END", "LAG", "OUTBOX"
        )
        .map_err(stdout_error)?;
        for row in &rows {
            writeln!(
                out,
                "{:<20} {:<20} {:>12} {:>12} {:>10} {:>8}",
                row.task,
                format!("{}/{}", row.topic, row.partition),
                show(row.offset),
                show(row.end),
                show(row.lag()),
                row.outbox_records
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
        out.flush().map_err(stdout_error)
    }
}

/// A task's position in one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusRow {
    pub task: String,
    pub topic: String,
    pub partition: i32,
    /// The next offset to process (None before the first commit).
    pub offset: Option<i64>,
    pub end: Option<i64>,
    /// Records emitted and committed but not yet appended to the log.
    pub outbox_records: usize,
}

impl StatusRow {
    pub fn lag(&self) -> Option<i64> {
        Some(self.end? - self.offset.unwrap_or(0)).map(|l| l.max(0))
    }
}

/// The task directories of one processor, by partition.
fn task_dirs(dir: &std::path::Path) -> Result<Vec<(i32, PathBuf)>, RuntimeError> {
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
fn open_committed(dir: &std::path::Path) -> Result<Option<TaskState>, RuntimeError> {
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
