//! The command line every app binary gets from [`run_cli`]: argument
//! structs and a dispatch into the library calls of `ops`. Nothing else in
//! the runtime imports it.
//!
//!
//! ```text
//! <app> run [--until-end] [--serve ADDR] [--query ADDR] [--commit-records N] [--commit-ms MS]
//!           [--fetch-bytes B] [--max-task-idle-ms MS]
//!           [--checkpoint-records N] [--checkpoint-secs S] [--checkpoints-kept K]
//!                                                 process (embedded or remote)
//! <app> status [--version V]                      per task: offsets, lag, outbox
//! <app> dump-state [--store S] [--at OFFSET]      sorted `store<TAB>key<TAB>value`
//! <app> query STORE [KEY | --prefix P | --from A --to B | --window KEY --from T --to T | --field F]
//!                   [--limit N] [--json] [--version V]
//!                                                 committed entries of a store
//! <app> replay --version V --from earliest|OFFSET|TIME [--until-end]
//!              [--metrics ADDR] [--console ADDR] (and run's commit and checkpoint flags)
//! <app> diff A B                                  exit status 1 when they differ
//! <app> promote V                                 make a version live
//! <app> versions                                  list them
//! <app> rebuild [--store S] [--from-checkpoint] [--version V] [--fetch-bytes B]
//!               [--metrics ADDR] [--console ADDR]
//!                                                 fresh state from the log, swapped in
//! <app> checkpoint [--version V]                  checkpoint every task's state
//! <app> explain TOPIC PARTITION OFFSET            a derived record back to its inputs
//! <app> dlq list [--version V]                    dead letters per processor
//! <app> dlq show [--processor P] [--limit N] [--version V]
//!                                                 the newest dead letters
//! <app> dlq replay PROCESSOR [--kind decode|process] [--from OFFSET|TIME] [--to OFFSET|TIME]
//!                  [--version V] (and run's commit flags)
//!                                                 the letters again, through this build
//! ```
//!
//! The version the app runs is `live` (see `versions`); `run` runs it, and
//! the other commands look at it unless given `--version`.
//!
//! Every subcommand takes the same location flags: `--data-dir DIR`
//! (embedded; state in `DIR/apps/<app>` unless `--state-dir`), or
//! `--bootstrap ADDR --state-dir DIR` (remote, secured by the flags of
//! [`crate::cli::SecurityArgs`]: `--security-protocol`, `--ssl-ca-location`,
//! `--sasl-username`, `--client-properties FILE`, …). An app with flags of its
//! own parses [`Cli<T>`] with its `clap::Args` type and passes the result to
//! [`run_parsed`].
//!
//! Exit status: 0 done; 1 failed, or `diff` found differences; 2 `diff`
//! failed. Neither function exits the process: they return the status.

mod args;
mod print;
mod print_letters;
mod registry_args;
mod security_args;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

pub use args::{
    CheckpointArgs, Cli, Command, CommitArgs, DlqCommand, GroupArgs, HttpArgs, LocationArgs,
    LookupArgs, NoArgs,
};
pub use registry_args::RegistryArgs;
pub use security_args::SecurityArgs;

use super::error::RuntimeError;
use super::location::Location;
use super::ops::query::http::QueryEndpoint;
use super::ops::{self, RebuildOptions, RunOptions, StoreQuery};
use super::task::StartAt;
use super::topology::App;
use super::versions::{BASE, LIVE, Version, Versions};

/// How often `run`, `replay` and `rebuild` print their progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How a subcommand ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `diff` found differences (exit status 1).
    Differs,
}

/// Parses the command line and runs the subcommand; an error is printed
/// and given back as the exit status.
pub fn run_cli(app: impl IntoApp) -> ExitCode {
    let cli = Cli::<NoArgs>::parse();
    match app.into_app() {
        Ok(app) => run_parsed(&app, &cli.location, &cli.command),
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(1)
        }
    }
}

/// What [`run_cli`] runs: an [`App`], or what builds one and may fail (a
/// pipeline's `Result<App, PipelineError>`), whose error is printed. The
/// app's declarations are checked by the commands that run it (`run`,
/// `rebuild`, `replay`) before they open anything; `status`, `promote` and
/// the others work on what is there, so a bad change can be rolled back.
pub trait IntoApp {
    fn into_app(self) -> Result<App, String>;
}

impl IntoApp for App {
    fn into_app(self) -> Result<App, String> {
        Ok(self)
    }
}

impl<E: std::fmt::Display> IntoApp for Result<App, E> {
    fn into_app(self) -> Result<App, String> {
        self.map_err(|error| error.to_string())
    }
}

/// What `run` and `replay` share of their options.
fn run_options(
    until_end: bool,
    metrics: Option<SocketAddr>,
    http: &HttpArgs,
    group: &GroupArgs,
) -> RunOptions {
    RunOptions {
        until_end,
        metrics,
        http: http.security(),
        progress_every: Some(PROGRESS_EVERY),
        group: group.options(),
        ..RunOptions::default()
    }
}

/// How a command that runs the app commits and checkpoints.
type Tuning<'a> = (&'a CommitArgs, &'a CheckpointArgs);

/// Where a version's stores are queried from an endpoint on `addr`.
fn endpoint(addr: SocketAddr, location: &Location, version: &str) -> QueryEndpoint {
    QueryEndpoint {
        addr,
        root: location.clone(),
        version: version.to_string(),
    }
}

/// `run`: the live version, with `--query` and `--console` answered from
/// its state.
async fn run_live(
    app: &App,
    location: &Location,
    options: RunOptions,
    (query, console): (Option<SocketAddr>, Option<SocketAddr>),
    (commit, checkpoints): Tuning<'_>,
) -> Result<Outcome, RuntimeError> {
    let live = Versions::load(location.state_dir())?.get(LIVE)?;
    let (mut app, live_location) = app.as_version(location, &live);
    commit.apply(&mut app.config);
    checkpoints.apply(&mut app.config);
    let options = RunOptions {
        query: query.map(|addr| endpoint(addr, location, &live.name)),
        console: console.map(|addr| endpoint(addr, location, &live.name)),
        ..options
    };
    if live.name != BASE {
        eprintln!(
            "{}: running version {} (derived topics end in {:?})",
            app.name(),
            live.name,
            live.topic_suffix
        );
    }
    let summary = ops::run(&app, &live_location, options).await?;
    print::processed(app.name(), &summary);
    Ok(Outcome::Done)
}

/// `replay`: the app into version `version`, from `from`.
async fn replay(
    app: &App,
    location: &Location,
    (version, from): (&str, &str),
    options: RunOptions,
    (commit, checkpoints): Tuning<'_>,
) -> Result<Outcome, RuntimeError> {
    let mut replay = ops::Replay::prepare(app, location, version, from)?;
    commit.apply(&mut replay.app.config);
    checkpoints.apply(&mut replay.app.config);
    eprintln!(
        "{}: replaying into version {version} (state in {}, derived topics {})",
        app.name(),
        replay.version.state_dir.display(),
        replay.app.derived_log_topics().join(", ")
    );
    let summary = replay.run(options).await?;
    print::processed(app.name(), &summary);
    Ok(Outcome::Done)
}

/// `query`: the store's entries `query` asks for, of version `asked`.
async fn query_store(
    app: &App,
    location: &Location,
    asked: &Version,
    query: &StoreQuery,
    json: bool,
    http: &HttpArgs,
) -> Result<Outcome, RuntimeError> {
    let (app, location) = app.as_version(location, asked);
    let access = http.security().load()?;
    let answer = ops::query::query_from_cli(&app, &location, query, &asked.name, &access).await?;
    print::query(query, &answer, json)
}

/// Runs a parsed subcommand (for apps with flags of their own); prints an
/// error and returns status 1 on failure (2 for an error of `diff`, whose
/// 1 means the versions differ).
pub fn run_parsed(app: &App, location: &LocationArgs, command: &Command) -> ExitCode {
    init_logging();
    match execute(app, location, command) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Differs) => ExitCode::from(1),
        Err(error) => {
            eprintln!("{}: {error}", app.name());
            if matches!(command, Command::Diff { .. }) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Logs to stderr: warnings, and the runtime's own notices (a task fenced,
/// a state restored, a rebuilt state swapped in); `STRATA_LOG` (a tracing
/// filter, e.g. `debug`) says otherwise. An app that installed a
/// subscriber of its own keeps it.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
        .unwrap_or_else(|_| "warn,strata_runtime=info".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs a subcommand, returning its error.
pub fn execute(
    app: &App,
    location: &LocationArgs,
    command: &Command,
) -> Result<Outcome, RuntimeError> {
    let state_memory = location.state_memory;
    location.registry.install()?;
    if let Some(codec) = app.registry_codec()
        && !strata_schema::is_installed()
        && command.processes()
    {
        return Err(RuntimeError::Config(format!(
            "{codec}: give the app a schema registry (--schema-registry URL or STRATA_SCHEMA_REGISTRY)"
        )));
    }
    let location = location.location(app.name())?;
    if let Some(budget) = state_memory
        && !crate::state::memory::configure(budget)
    {
        return Err(RuntimeError::Config(
            "--state-memory comes too late: this process opened task state with another budget already".into(),
        ));
    }
    let runtime =
        tokio::runtime::Runtime::new().map_err(RuntimeError::io("starting the async runtime"))?;
    runtime.block_on(dispatch(app, &location, command))
}

async fn dispatch(
    app: &App,
    location: &Location,
    command: &Command,
) -> Result<Outcome, RuntimeError> {
    let name = app.name();
    let versions = || Versions::load(location.state_dir());
    let version = |name: &Option<String>| versions()?.get(name.as_deref().unwrap_or(LIVE));
    match command {
        Command::Run {
            until_end,
            serve,
            metrics,
            query,
            console,
            http,
            commit,
            checkpoints,
            group,
        } => {
            let options = RunOptions {
                serve: *serve,
                ..run_options(*until_end, *metrics, http, group)
            };
            let endpoints = (*query, *console);
            run_live(app, location, options, endpoints, (commit, checkpoints)).await
        }
        Command::Replay {
            version,
            from,
            until_end,
            metrics,
            console,
            http,
            commit,
            checkpoints,
            group,
        } => {
            let options = RunOptions {
                console: console.map(|addr| endpoint(addr, location, version)),
                ..run_options(*until_end, *metrics, http, group)
            };
            let tuning = (commit, checkpoints);
            replay(app, location, (version, from), options, tuning).await
        }
        Command::Status {
            version: name,
            keys,
        } => {
            let (app, location) = app.as_version(location, &version(name)?);
            if *keys {
                print::hot_keys(&location)?;
            } else {
                print::status(&app, &location).await?;
            }
            Ok(Outcome::Done)
        }
        Command::DumpState {
            store,
            at,
            version: name,
        } => {
            let (app, location) = app.as_version(location, &version(name)?);
            print::dump_state(&app, &location, store.as_deref(), *at)?;
            Ok(Outcome::Done)
        }
        Command::Query {
            store,
            lookup,
            limit,
            json,
            version: name,
            http,
        } => {
            let query = StoreQuery {
                store: store.clone(),
                lookup: lookup.lookup()?,
                limit: *limit,
            };
            query_store(app, location, &version(name)?, &query, *json, http).await
        }
        Command::Diff { a, b, examples } => {
            let versions = versions()?;
            let (a, b) = (versions.get(a)?, versions.get(b)?);
            let report = ops::diff(app, location, &a, &b, *examples).await?;
            print::diff(&report)?;
            Ok(match report.differs() {
                true => Outcome::Differs,
                false => Outcome::Done,
            })
        }
        Command::Promote { version } => {
            print::promoted(name, &ops::promote(app, location, version)?);
            Ok(Outcome::Done)
        }
        Command::Versions => {
            print::versions(&versions()?);
            Ok(Outcome::Done)
        }
        Command::Rebuild {
            store,
            from_checkpoint,
            version: name,
            fetch_bytes,
            metrics,
            console,
            http,
        } => {
            let (mut app, location) = app.as_version(location, &version(name)?);
            if let Some(bytes) = fetch_bytes {
                app = app.fetch_bytes(*bytes);
            }
            let options = RebuildOptions {
                store: store.clone(),
                from_checkpoint: *from_checkpoint,
                progress_every: Some(PROGRESS_EVERY),
                commit: None,
                metrics: *metrics,
                console: *console,
                http: http.security(),
            };
            print::rebuilt(app.name(), &ops::rebuild(&app, &location, options).await?);
            Ok(Outcome::Done)
        }
        Command::Explain {
            topic,
            partition,
            offset,
        } => {
            let at = (topic.as_str(), *partition, *offset);
            print::explained(&ops::explain(location, at).await?)?;
            Ok(Outcome::Done)
        }
        Command::Dlq { command } => {
            let name = match command {
                DlqCommand::List { version }
                | DlqCommand::Show { version, .. }
                | DlqCommand::Replay { version, .. } => version,
            };
            let (app, location) = app.as_version(location, &version(name)?);
            match command {
                DlqCommand::List { .. } => print_letters::dead_letter_counts(
                    &ops::dead_letters(&app, &location, None).await?,
                )?,
                DlqCommand::Show {
                    processor, limit, ..
                } => {
                    let all = ops::dead_letters(&app, &location, processor.as_deref()).await?;
                    print_letters::dead_letters(&all, *limit)?
                }
                DlqCommand::Replay {
                    processor,
                    kind,
                    from,
                    to,
                    commit,
                    ..
                } => {
                    let mut app = app;
                    commit.apply(&mut app.config);
                    let replay = ops::LetterReplay {
                        processor: processor.clone(),
                        filter: ops::LetterFilter {
                            kind: kind.clone(),
                            from: letter_bound(from.as_deref(), "--from")?,
                            to: letter_bound(to.as_deref(), "--to")?,
                        },
                        ..ops::LetterReplay::default()
                    };
                    let summary = ops::replay_dead_letters(&app, &location, &replay).await?;
                    print_letters::letters_replayed(&summary)
                }
            }
            Ok(Outcome::Done)
        }
        Command::Checkpoint { version: name } => {
            let (app, location) = app.as_version(location, &version(name)?);
            print::checkpoints(&ops::checkpoint(&app, &location).await?);
            Ok(Outcome::Done)
        }
    }
}

/// A bound of `dlq replay`: an offset in the dead-letter topic, or the
/// time a letter failed at.
fn letter_bound(text: Option<&str>, flag: &str) -> Result<Option<ops::LetterBound>, RuntimeError> {
    let bad = || {
        RuntimeError::Config(format!(
            "{flag} {:?}: give an offset in the dead-letter topic (12) or the time a letter failed at (1700000000000ms, 2026-11-30T12:00:00Z)",
            text.unwrap_or_default()
        ))
    };
    match text.map(crate::versions::parse_start).transpose() {
        Ok(None) => Ok(None),
        Ok(Some(StartAt::Offset(offset))) => Ok(Some(ops::LetterBound::Offset(offset))),
        Ok(Some(StartAt::Timestamp(ms))) => Ok(Some(ops::LetterBound::FailedAt(ms))),
        Ok(Some(StartAt::Earliest)) | Err(_) => Err(bad()),
    }
}
