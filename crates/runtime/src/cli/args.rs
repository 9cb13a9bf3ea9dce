//! The command line's arguments: the location flags every subcommand
//! takes, the subcommands, and the commit and checkpoint overrides.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::RuntimeError;
use crate::group::GroupOptions;
use crate::location::Location;
use crate::ops::Lookup;
use crate::topology::TaskConfig;

/// An app's command line: the location flags, the app's own flags `T`,
/// and the subcommand.
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

/// Where the log and the state are, taken by every subcommand.
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
    /// How connections to the broker are secured (remote mode).
    #[command(flatten)]
    pub security: crate::cli::SecurityArgs,
    /// `false`: use fetched batches without checking their CRCs (Kafka's
    /// check.crcs, on by default); only for a cluster known to write
    /// batches without one, such as librdkafka's mock cluster (remote mode).
    #[arg(long, global = true, env = "STRATA_CHECK_CRCS", value_name = "BOOL")]
    pub check_crcs: Option<bool>,
    /// Memory every task's state shares (RocksDB's block cache and
    /// memtables, the stores' caches): bytes, or with KiB, MiB or GiB
    /// [default: 512MiB].
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    pub state_memory: Option<usize>,
    /// The schema registry of the registry codecs.
    #[command(flatten)]
    pub registry: crate::cli::RegistryArgs,
}

/// A size: bytes, or a number with KiB, MiB or GiB.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 268435456, 512MiB, 2GiB)"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unit {other:?}: give bytes, KiB, MiB or GiB")),
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text} is more than this machine can address"))
}

/// The subcommands (see the module docs).
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
        /// Serve Prometheus metrics on this address (`GET /metrics`): each
        /// task's state, restore progress, standby lag, records processed.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Answer queries of the stores over HTTP on this address (`GET
        /// /stores`, `/stores/STORE/keys/KEY`, `/stores/STORE?prefix=P`; port
        /// 0: a free one, written to `<state dir>/query-address`).
        #[arg(long, value_name = "ADDR")]
        query: Option<SocketAddr>,
        /// Serve the web console on this address (`GET /`): the topology,
        /// tasks, lag, hot keys, a store lookup, with `/metrics` (port 0: a
        /// free one, written to `<state dir>/console-address`).
        #[arg(long, value_name = "ADDR")]
        console: Option<SocketAddr>,
        #[command(flatten)]
        http: HttpArgs,
        #[command(flatten)]
        commit: CommitArgs,
        #[command(flatten)]
        checkpoints: CheckpointArgs,
        #[command(flatten)]
        group: GroupArgs,
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
        /// Serve Prometheus metrics on this address (`GET /metrics`): each
        /// task's state, restore progress, standby lag, records processed.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Serve the web console on this address (`GET /`): the replay's
        /// progress, its topology and tasks, a lookup in its stores (port
        /// 0: a free one, written to the version's `console-address`).
        #[arg(long, value_name = "ADDR")]
        console: Option<SocketAddr>,
        #[command(flatten)]
        http: HttpArgs,
        #[command(flatten)]
        commit: CommitArgs,
        #[command(flatten)]
        checkpoints: CheckpointArgs,
        #[command(flatten)]
        group: GroupArgs,
    },
    /// Per task: input offset, end offset, lag, outbox size.
    Status {
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
        /// The keys each task of the instance running here read most
        /// (records, error bound, since when), instead of the positions.
        #[arg(long)]
        keys: bool,
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
    /// A store's committed entries: one key, a prefix, a range, or a
    /// window store's windows of one key; every entry when given none.
    Query {
        /// The store (as declared; `dump-state` and `GET /stores` list them).
        store: String,
        #[command(flatten)]
        lookup: LookupArgs,
        /// The most entries to print.
        #[arg(long, default_value_t = crate::ops::query::QUERY_ENTRIES_DEFAULT)]
        limit: usize,
        /// The answer as JSON (as the HTTP endpoint gives it), not lines.
        #[arg(long)]
        json: bool,
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
        /// How to reach the running instance's query endpoint, when it
        /// serves TLS or wants a token.
        #[command(flatten)]
        http: HttpArgs,
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
        /// Bytes a task asks for per fetch of one input (at least 1024).
        #[arg(long, value_name = "BYTES")]
        fetch_bytes: Option<u32>,
        /// Serve the rebuild's Prometheus metrics on this address (`GET
        /// /metrics`): its progress and its tasks' counters.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Serve the web console on this address (`GET /`): the rebuild's
        /// progress, its topology and tasks (port 0: a free one, written to
        /// `<state dir>/rebuild-console-address`).
        #[arg(long, value_name = "ADDR")]
        console: Option<SocketAddr>,
        #[command(flatten)]
        http: HttpArgs,
    },
    /// Checkpoint every task's state now (running or not).
    Checkpoint {
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Walk a derived record back to the input records it came from,
    /// through the provenance headers of outputs declared with
    /// `.provenance()`.
    Explain {
        /// The record's topic, as the log names it (`word-counts`, or
        /// `word-counts.v2` for a version's).
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// The records processors failed on and sent to their dead-letter
    /// topics (`.on_error(OnError::dead_letter())`).
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
}

impl Command {
    /// Whether the subcommand reads or writes records through the app's
    /// codecs (so needs the schema registry its registry codecs ask).
    pub fn processes(&self) -> bool {
        matches!(
            self,
            Self::Run { .. }
                | Self::Replay { .. }
                | Self::Rebuild { .. }
                | Self::Dlq {
                    command: DlqCommand::Replay { .. }
                }
        )
    }
}

/// `dlq list`, `dlq show` and `dlq replay`.
#[derive(Debug, Clone, Subcommand)]
pub enum DlqCommand {
    /// Per processor: its dead-letter topic, how many letters, of which
    /// kind, and the newest error.
    List {
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Each letter: where the record was, why it failed, its key and
    /// value.
    Show {
        /// Only this processor's letters.
        #[arg(long)]
        processor: Option<String>,
        /// At most this many letters per processor, the newest.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
    },
    /// Run a processor's letters again through the app as it is now (after
    /// a fix), exactly once: each letter is marked, and no replay takes a
    /// marked one. The app must not be running.
    Replay {
        /// The processor whose letters to replay.
        processor: String,
        /// Only letters of this kind.
        #[arg(long, value_parser = ["decode", "process"])]
        kind: Option<String>,
        /// The first letter: an offset in the dead-letter topic (in each of
        /// its partitions), or a time it failed at (1700000000000ms,
        /// 2026-11-30T12:00:00Z).
        #[arg(long, value_name = "OFFSET|TIME")]
        from: Option<String>,
        /// The last letter (included), as --from.
        #[arg(long, value_name = "OFFSET|TIME")]
        to: Option<String>,
        /// Another version than the live one.
        #[arg(long)]
        version: Option<String>,
        /// As `run` takes them (a replay commits like a run).
        #[command(flatten)]
        commit: CommitArgs,
    },
}

/// How the tasks read and commit, overriding the app's settings.
#[derive(Debug, Clone, Default, Args)]
pub struct CommitArgs {
    /// Commit a task's run after this many records.
    #[arg(long, value_name = "N")]
    pub commit_records: Option<u64>,
    /// Commit a task's run at least this often, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub commit_ms: Option<u64>,
    /// Embedded: also write every store's changes to its changelog topic
    /// (`<app>-<store>-changelog`, compacted) with each commit; remote apps
    /// always do.
    #[arg(long)]
    pub changelogs: bool,
    /// Bytes a task asks for per fetch of one input (at least 1024).
    #[arg(long, value_name = "BYTES")]
    pub fetch_bytes: Option<u32>,
    /// How long a task with several inputs waits for a caught-up input
    /// before processing the others without it, in milliseconds (live
    /// only: a run to the end never passes by an input before its end).
    #[arg(long, value_name = "MS")]
    pub max_task_idle_ms: Option<u64>,
    /// Threads the instance's tasks and standby copies share [default:
    /// one per core].
    #[arg(long, value_name = "N")]
    pub task_threads: Option<usize>,
}

impl CommitArgs {
    pub(super) fn apply(&self, config: &mut TaskConfig) {
        if let Some(records) = self.commit_records {
            config.commit.records = records.max(1);
        }
        if let Some(ms) = self.commit_ms {
            config.commit.interval = Duration::from_millis(ms);
        }
        config.changelogs |= self.changelogs;
        if let Some(bytes) = self.fetch_bytes {
            config.fetch_bytes = bytes.max(1024);
        }
        if let Some(ms) = self.max_task_idle_ms {
            config.max_task_idle = Duration::from_millis(ms);
        }
        if let Some(threads) = self.task_threads {
            config.task_threads = threads.max(1);
        }
    }
}

/// How the app's HTTP endpoints (`--metrics`, `--query`) are secured. On
/// a loopback address they serve anyone on the machine; beyond it, only
/// with TLS and a token, unless `--allow-unauthenticated-remote`.
#[derive(Debug, Clone, Default, Args)]
pub struct HttpArgs {
    /// Certificate chain (PEM) the HTTP endpoints serve TLS with; for an
    /// endpoint other instances ask, it names the address they use.
    #[arg(long, value_name = "PEM", requires = "http_tls_key")]
    pub http_tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "http_tls_cert")]
    pub http_tls_key: Option<PathBuf>,
    /// CA certificates (PEM) the instances' HTTP certificates chain to: how
    /// an instance (or `query`) checks the one it asks.
    #[arg(long, value_name = "PEM")]
    pub http_tls_ca: Option<PathBuf>,
    /// A file whose first line is the token every HTTP request must carry
    /// (`Authorization: Bearer TOKEN`); instances send it to each other.
    #[arg(long, value_name = "FILE")]
    pub http_token_file: Option<PathBuf>,
    /// Serve an HTTP endpoint beyond loopback without TLS and a token.
    #[arg(long)]
    pub allow_unauthenticated_remote: bool,
}

impl HttpArgs {
    pub(super) fn security(&self) -> strata_http::HttpSecurity {
        strata_http::HttpSecurity {
            tls: (self.http_tls_cert.clone()).zip(self.http_tls_key.clone()),
            tls_ca: self.http_tls_ca.clone(),
            token_file: self.http_token_file.clone(),
            allow_unauthenticated_remote: self.allow_unauthenticated_remote,
        }
    }
}

/// Remote: how an instance takes part in the app's group (every instance
/// of an app against one cluster shares its tasks with the others).
#[derive(Debug, Clone, Args)]
pub struct GroupArgs {
    /// Static membership: an instance restarted under the same id within
    /// the session timeout gets its tasks back without a rebalance (and one
    /// stopped keeps them until then). Unique per instance.
    #[arg(long, value_name = "ID")]
    pub instance_id: Option<String>,
    /// How long the group waits for a silent instance before its tasks move
    /// to the others, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 10_000,
        env = "STRATA_SESSION_TIMEOUT_MS"
    )]
    pub session_timeout_ms: u64,
    /// Warm copies of each stateful task to keep on other instances, read
    /// from its changelogs as they grow, so a task that moves there does
    /// not wait for a whole restore (the group's leader's setting counts).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub standbys: usize,
}

impl Default for GroupArgs {
    fn default() -> Self {
        let options = GroupOptions::default();
        Self {
            instance_id: options.instance_id,
            session_timeout_ms: options.session_timeout.as_millis() as u64,
            standbys: options.standbys,
        }
    }
}

impl GroupArgs {
    pub(super) fn options(&self) -> GroupOptions {
        GroupOptions {
            instance_id: self.instance_id.clone(),
            session_timeout: Duration::from_millis(self.session_timeout_ms),
            standbys: self.standbys,
            wait_for_cluster: true,
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
    pub(super) fn apply(&self, config: &mut TaskConfig) {
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

impl LocationArgs {
    /// Where the log and state are, from the flags.
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
                security: self
                    .security
                    .security()
                    .map_err(|e| RuntimeError::Config(format!("security settings: {e}")))?,
                check_crcs: self.check_crcs.unwrap_or(true),
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

/// What `query` looks up: one key, a prefix, a range, a window store's
/// windows of one key, or an index field's rows; every entry when none.
#[derive(Debug, Clone, Default, Args)]
pub struct LookupArgs {
    /// One key: text for raw and utf8 keys, JSON (or a bare string) for
    /// postcard and json keys.
    pub key: Option<String>,
    /// Keys starting with this text (stores with raw or utf8 keys).
    #[arg(long, conflicts_with_all = ["key", "window", "from", "to"])]
    pub prefix: Option<String>,
    /// The lowest key (inclusive); with --window, the earliest window
    /// start: ms since the Unix epoch or a UTC time.
    #[arg(long, conflicts_with = "key")]
    pub from: Option<String>,
    /// The highest key (inclusive); with --window, the latest window start.
    #[arg(long, conflicts_with = "key")]
    pub to: Option<String>,
    /// A window store's windows of this key.
    #[arg(long, value_name = "KEY", conflicts_with = "key")]
    pub window: Option<String>,
    /// An index store's row keys under this field value.
    #[arg(long, value_name = "F", conflicts_with_all = ["key", "prefix", "window", "from", "to"])]
    pub field: Option<String>,
}

impl LookupArgs {
    /// The flags as a lookup (`--field` first: it conflicts with the rest).
    pub(super) fn lookup(&self) -> Result<Lookup, RuntimeError> {
        if let Some(field) = &self.field {
            return Ok(Lookup::Field(field.clone()));
        }
        let time = |text: &Option<String>| -> Result<Option<i64>, RuntimeError> {
            let Some(text) = text else { return Ok(None) };
            let ms = text.strip_suffix("ms").unwrap_or(text);
            ms.parse()
                .ok()
                .or_else(|| strata_record::time::parse_rfc3339(text))
                .map(Some)
                .ok_or_else(|| {
                    RuntimeError::Config(format!(
                        "{text:?} is not a time: give ms since the Unix epoch or a UTC time (2026-11-30T12:00:00Z)"
                    ))
                })
        };
        Ok(match (&self.key, &self.prefix, &self.window) {
            (Some(key), _, _) => Lookup::Key(key.clone()),
            (None, Some(prefix), _) => Lookup::Prefix(prefix.clone()),
            (None, None, Some(window)) => Lookup::Window {
                key: window.clone(),
                from: time(&self.from)?,
                to: time(&self.to)?,
            },
            (None, None, None) if self.from.is_some() || self.to.is_some() => Lookup::Range {
                from: self.from.clone(),
                to: self.to.clone(),
            },
            (None, None, None) => Lookup::All,
        })
    }
}
