//! [`TestDriver`]: an app's processors tested in the test's own process,
//! through the runtime's real code path: the same tasks, commits, RocksDB
//! state, outbox and derived topics as `run`, over an embedded log of the
//! driver's own. No broker, no sockets.
//!
//! ```no_run
//! # use strata_runtime::{App, Context, ProcessError, Record, Store, Topic};
//! # use strata_runtime::testing::TestDriver;
//! # const LINES: Topic<String, String> = Topic::new("lines");
//! # const COUNTS_OUT: Topic<String, u64> = Topic::new("counts-out");
//! # fn app() -> App { App::new("demo") }
//! let mut driver = TestDriver::new(app())?;
//! driver.partitions(LINES, 2)?;
//! driver.pipe(LINES, "k", "a line")?;
//! let out = driver.output(COUNTS_OUT)?; // runs the app first
//! driver.pipe(LINES, "k", "another")?;
//! driver.crash_after(1)?;               // killed: uncommitted work lost
//! driver.restart()?;                    // recovers, processes it again
//! driver.assert_replay_matches();       // a replay from the inputs agrees
//! # Ok::<(), strata_runtime::testing::TestError>(())
//! ```
//!
//! How it runs:
//! - Piped records wait in the driver; the next call that needs the app
//!   (`process`, a read of an output or a store, `advance_time`) appends
//!   them to the log and runs the app until everything piped has flowed
//!   through every processor (`run --until-end`), then stops it. Between
//!   calls nothing runs.
//! - The log and the stores are real files in a temporary directory,
//!   removed when the driver is dropped: under `TMPDIR` when it is set,
//!   else on tmpfs (`/dev/shm`) where the machine has one, so nothing
//!   waits on a disk. [`TestDriver::in_dir`] keeps them in a directory of
//!   the test's choosing instead, for `strata` commands to look at.
//! - The driver runs the app on an async runtime of its own: call it from
//!   a plain `#[test]`, not from inside another runtime (`#[tokio::test]`).
//!   Its tasks take turns on one task thread.
//! - Processing time is a [`ManualClock`] starting at [`START_MS`]; it
//!   moves only with [`TestDriver::advance_time`], which then fires the
//!   processing-time timers that became due. Piped records are stamped with
//!   it unless their options give a timestamp; stream time and event-time
//!   timers follow the records, as in production.
//! - Keyed records go to their key's partition (murmur2, as Kafka's
//!   producers and the processors' emits place them), keyless ones round
//!   robin, unless their options name a partition.
//! - Each task commits once it has processed [`COMMIT_RECORDS`] records
//!   since its last commit (or as [`TestDriver::commit_every`] says) and at
//!   the end of each run, not on the app's time interval, so where each
//!   task's commits fall does not depend on the machine's speed. (A run's
//!   bytes past 16 MiB, or a long sweep of timers, commit too, as in
//!   production.) What a crash cuts across tasks may vary a little from
//!   run to run: a downstream task sees derived records once the commit
//!   that holds them has landed and shipped.
//! - [`TestDriver::crash_after`] ends a run as a SIGKILL would once its
//!   tasks have processed that many records between them: what they had
//!   not committed is lost, the log is not closed cleanly, and
//!   [`TestDriver::restart`] recovers both as a restarted process would
//!   (see [`RunOptions::crash_after`] for how close to a SIGKILL it is).
//! - An app with schema-registry codecs (`Codec::avro`, …) gets a registry
//!   held in the process (`strata_schema::registry::MemoryRegistry`), unless
//!   the test installed one with `strata_schema::install`.
//! - [`TestDriver::dead_letters`] reads the dead-letter topics; after
//!   [`TestDriver::deploy`] puts a fixed build in place,
//!   [`TestDriver::replay_dead_letters`] runs `dlq replay` (and
//!   [`TestDriver::crash_replay_after`] crashes it).
//! - [`TestDriver::assert_replay_matches`] replays the app from the start
//!   of its inputs into a version of its own and compares its stores and
//!   derived topics with the live ones (see `replay_check`).

mod dead_letters;
mod error;
mod output;
mod pipe;
mod replay_check;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::cli::IntoApp;
use crate::clock::ManualClock;
use crate::handles::{Store, Topic};
use crate::location::Location;
use crate::ops::{RunOptions, RunSummary, dump_state, run_until};
use crate::topology::{App, CommitInterval};

pub use error::TestError;
pub use output::OutputRecord;

use pipe::Piped;

/// Where the driver's clock starts: 2026-01-01T00:00:00Z, in ms since the
/// epoch.
pub const START_MS: i64 = 1_767_225_600_000;
/// How many records a task processes between commits, unless
/// [`TestDriver::commit_every`] says otherwise.
pub const COMMIT_RECORDS: u64 = 1_000;
/// Piped records of one partition go to the log in batches of at most this
/// many, so a crash can land between them.
const PIPED_BATCH_RECORDS: usize = 100;
/// The topic config that keeps records for ever at -1.
const RETENTION_MS: &str = "retention.ms";
/// Where the driver's files go when the machine has a tmpfs there.
const TMPFS: &str = "/dev/shm";

/// An app under test: see the module's documentation.
pub struct TestDriver {
    /// First, so it shuts down (and its threads let go of the files)
    /// before the directory is removed.
    runtime: tokio::runtime::Runtime,
    app: App,
    /// The app's external inputs.
    inputs: Vec<String>,
    dir: Dir,
    location: Location,
    clock: ManualClock,
    /// Records piped since the last run, per topic and partition, in order.
    piped: BTreeMap<(String, i32), Vec<Piped>>,
    /// Partition counts of the external inputs, as the log has or will
    /// have them.
    partitions: BTreeMap<String, i32>,
    /// The partition the next keyless record of a topic goes to.
    next_keyless: BTreeMap<String, i32>,
    /// Whether a crash left the app down.
    down: bool,
    /// Whether the last run took up everything: nothing piped, the clock
    /// not moved and no crash since (a read then has nothing to run).
    up_to_date: bool,
}

/// Where the driver's log and state are.
enum Dir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl Dir {
    fn path(&self) -> &Path {
        match self {
            Self::Temporary(dir) => dir.path(),
            Self::Kept(dir) => dir,
        }
    }
}

impl TestDriver {
    /// A driver for `app` (an [`App`], or a pipeline's `Result`), its log
    /// and state in a temporary directory removed with the driver.
    pub fn new(app: impl IntoApp) -> Result<Self, TestError> {
        let io = |context: &str| {
            let context = context.to_string();
            move |error| TestError::Io { context, error }
        };
        let builder = tempfile::Builder::new().prefix("strata-test-").clone();
        let tmpfs = std::env::var_os("TMPDIR").is_none() && Path::new(TMPFS).is_dir();
        let dir = match tmpfs {
            true => (builder.tempdir_in(TMPFS)).or_else(|_| builder.tempdir()),
            false => builder.tempdir(),
        };
        let dir = dir.map_err(io("making the driver's temporary directory"))?;
        Self::at(app, Dir::Temporary(dir))
    }

    /// A driver for `app` keeping its log and state in `dir` (made if
    /// missing, kept after the driver), where the `strata` commands and
    /// the app's own (`--data-dir DIR`) can look at them. A directory used
    /// before is taken up where it was left.
    pub fn in_dir(app: impl IntoApp, dir: &Path) -> Result<Self, TestError> {
        Self::at(app, Dir::Kept(dir.to_path_buf()))
    }

    fn at(app: impl IntoApp, dir: Dir) -> Result<Self, TestError> {
        let mut app = app.into_app().map_err(TestError::App)?;
        app.check().map_err(TestError::App)?;
        if app.registry_codec().is_some() {
            // A registry held in the process, as Confluent's serializers
            // take `mock://` URLs, unless the test installed one.
            strata_schema::install_unless_installed(|| {
                std::sync::Arc::new(strata_schema::registry::MemoryRegistry::new())
            });
        }
        app.config.commit = commit_every(COMMIT_RECORDS);
        // One thread: the tasks take their turns in the same order every
        // run.
        app.config.task_threads = 1;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|error| TestError::Io {
                context: "starting the async runtime".into(),
                error,
            })?;
        let location = Location::embedded(&dir.path().join("data"), &app.name);
        Ok(Self {
            inputs: app.external_inputs(),
            app,
            dir,
            location,
            clock: ManualClock::starting_at(START_MS),
            runtime,
            piped: BTreeMap::new(),
            partitions: BTreeMap::new(),
            next_keyless: BTreeMap::new(),
            down: false,
            up_to_date: false,
        })
    }

    /// Makes each task commit once it has processed `records` records
    /// since its last commit (right after the record that reached them),
    /// and at the end of each run; [`COMMIT_RECORDS`] unless set.
    pub fn commit_every(&mut self, records: u64) {
        self.app.config.commit = commit_every(records.max(1));
    }

    /// Processing time now, in ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Moves processing time forward by `by`, then runs the app: the
    /// processing-time timers due by then fire. While the app is down
    /// (after a crash), only the clock moves; the timers fire at the
    /// restart.
    pub fn advance_time(&mut self, by: Duration) -> Result<(), TestError> {
        self.clock.advance(by);
        self.up_to_date = false;
        if self.down {
            return Ok(());
        }
        self.process().map(drop)
    }

    /// Appends what was piped and runs the app until all of it has flowed
    /// through every processor; what the run did.
    pub fn process(&mut self) -> Result<RunSummary, TestError> {
        self.run(None)
    }

    /// Appends what was piped and runs the app, ending the run as a
    /// SIGKILL would once its tasks have processed `records` records
    /// between them (at the next commit point or batch end; at the end if
    /// they never do): what the tasks had not committed is lost, derived
    /// records appended stay.
    /// The app is down until [`restart`](Self::restart); records piped
    /// meanwhile wait, and reads show what the crash left. True if the
    /// crash cut the run short; false if the run ended first (the crash
    /// then comes after its last commit).
    pub fn crash_after(&mut self, records: u64) -> Result<bool, TestError> {
        let cut = match self.run(Some(records)) {
            Ok(_) => false,
            Err(TestError::Runtime(crate::RuntimeError::Crashed)) => true,
            Err(error) => return Err(error),
        };
        self.down = true;
        Ok(cut)
    }

    /// Starts the app again after a crash and runs it as
    /// [`process`](Self::process) does: the log recovers from its unclean
    /// end, and each task resumes from its last commit.
    pub fn restart(&mut self) -> Result<RunSummary, TestError> {
        self.down = false;
        self.process()
    }

    fn run(&mut self, crash_after: Option<u64>) -> Result<RunSummary, TestError> {
        if self.down {
            return Err(TestError::Down);
        }
        let app = self.app.clone();
        self.prepare_log(&app)?;
        let options = RunOptions {
            until_end: true,
            clock: self.clock.clone().into(),
            crash_after,
            ..RunOptions::default()
        };
        self.up_to_date = false;
        let run = run_until(&self.app, &self.location, options, std::future::pending());
        let summary = self.runtime.block_on(run)?;
        self.up_to_date = crash_after.is_none();
        Ok(summary)
    }

    /// Brings the app up to date unless it is down (a read after a crash
    /// shows what the crash left) or already is.
    fn settle(&mut self) -> Result<(), TestError> {
        match self.down || self.up_to_date {
            true => Ok(()),
            false => self.process().map(drop),
        }
    }

    /// Every record of `topic` (an output of the app, or an input), after
    /// running the app: partition by partition, each in offset order.
    pub fn output<K, V>(&mut self, topic: Topic<K, V>) -> Result<Vec<OutputRecord<K, V>>, TestError>
    where
        K: DeserializeOwned + 'static,
        V: DeserializeOwned + 'static,
    {
        let name = topic.name();
        if !self.app.derived_topics().iter().any(|t| t == name) {
            self.check_input(name)?;
        }
        self.settle()?;
        let log_topic = self.app.log_topic(name);
        let records = crate::topic_read::read_topic(self.data_dir(), &log_topic)?;
        records
            .into_iter()
            .map(|raw| output::decode(&topic, raw))
            .collect()
    }

    /// The latest value of every key of `topic` (a tombstone removes its
    /// key), after running the app: the table the topic describes.
    pub fn output_table<K, V>(&mut self, topic: Topic<K, V>) -> Result<BTreeMap<K, V>, TestError>
    where
        K: DeserializeOwned + Ord + 'static,
        V: DeserializeOwned + 'static,
    {
        let mut table = BTreeMap::new();
        for record in self.output(topic)? {
            let Some(key) = record.key else { continue };
            match record.value {
                Some(value) => table.insert(key, value),
                None => table.remove(&key),
            };
        }
        Ok(table)
    }

    /// Every committed entry of a key-value store, across its tasks, after
    /// running the app (a key held by two tasks is an error). (A window or session store's keys hold their
    /// windows: read those with [`state_lines`](Self::state_lines).)
    pub fn store<K, V>(&mut self, store: Store<K, V>) -> Result<BTreeMap<K, V>, TestError>
    where
        K: DeserializeOwned + Ord + 'static,
        V: DeserializeOwned + 'static,
    {
        let name = store.name();
        let declared = self.app.processors.iter().flat_map(|p| &p.stores);
        if !declared.clone().any(|s| s.name == name) {
            let names: Vec<&str> = declared.map(|s| s.name.as_str()).collect();
            return Err(TestError::Unknown {
                kind: "store",
                name: name.to_string(),
                declared: names.join(", "),
            });
        }
        self.settle()?;
        let mut entries = BTreeMap::new();
        for (key, value) in output::store_entries(&self.app, &self.location, name)? {
            let what = |part: &str| format!("store {name:?}: an entry's {part}");
            let key = output::decoded(store.key_codec(), &key, || what("key"))?;
            let value = output::decoded(store.value_codec(), &value, || what("value"))?;
            entries.insert(key, value);
        }
        Ok(entries)
    }

    /// Every store entry (of `store` only, if given) as `strata
    /// dump-state` prints them, `store<TAB>key<TAB>value`, after running
    /// the app.
    pub fn state_lines(&mut self, store: Option<&str>) -> Result<Vec<String>, TestError> {
        self.settle()?;
        Ok(dump_state(&self.app, &self.location, store)?)
    }

    /// Where the log and state are: `--data-dir` for the `strata` commands
    /// and the app's own.
    pub fn data_dir(&self) -> &Path {
        match &self.location {
            Location::Embedded { data_dir, .. } => data_dir,
            Location::Remote { .. } => unreachable!("the driver's log is embedded"),
        }
    }

    /// The app under test.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The directory the driver keeps its files in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Commits by record count, not time (the byte limit stays): where they
/// fall does not depend on the machine's speed, so neither does what a
/// crash loses.
fn commit_every(records: u64) -> CommitInterval {
    CommitInterval {
        records,
        interval: Duration::MAX,
        ..CommitInterval::default()
    }
}
