//! Exactly-once across SIGKILLs: the wordcount example runs as a real
//! process over a generated input and is killed at random moments many
//! times (and, in remote mode, `strata serve` too), restarted each time,
//! then run with `--until-end`. Its state (`dump-state`) and its derived
//! topics must be what one crash-free run produces: every word counted
//! once per occurrence, `word-counts` holding 1, 2, …, N per word in order,
//! nothing lost, nothing twice.
//!
//! Derived partitions are written by several tasks (every `split` task
//! writes every `words` partition), so the interleaving of their records
//! differs from run to run; what is compared is each partition's records
//! as a sorted list, plus the per-word order in `word-counts`.
//!
//! The kill moments come from a seeded RNG: the seed is printed, and
//! `STRATA_CRASH_SEED=<seed>` replays its choices, not their timing. So a
//! failure may not come back: with `STRATA_TEST_KEEP=<dir>` each test
//! leaves its files in `<dir>`, with the logs of the app instances it
//! started through `spawn_logged` (not the broker's, nor those of the
//! seeded kill tests' runs, whose output is dropped).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use strata::log::{LogConfig, LogManager};
use strata::record::Compression;
use support::process::Log;
use support::{Rng, ServerProcess};

/// Input lines and kills of `make test`; `STRATA_SOAK_CRASH_LINES` and
/// `STRATA_SOAK_CRASH_KILLS` set others (`make soak`).
const LINES_QUICK: usize = 40_000;
const KILLS_QUICK: usize = 14;
const PARTITIONS: i32 = 6;
/// Small runs, so that kills land between fetch and commit, between commit
/// and ship, and in the middle of shipping, not only between runs.
const COMMIT_ARGS: [&str; 4] = ["--commit-records", "150", "--commit-ms", "20"];

/// Per topic, per partition: the (key, value) records, sorted.
type Topics = BTreeMap<String, Vec<Vec<(String, String)>>>;

struct Outcome {
    state: String,
    topics: Topics,
}

struct Reference {
    outcome: Outcome,
    /// How long the crash-free run took: kills are spread over it.
    run_ms: u64,
}

fn soak_count(variable: &str, quick: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(quick)
}

fn lines() -> usize {
    soak_count("STRATA_SOAK_CRASH_LINES", LINES_QUICK)
}

fn kills() -> usize {
    soak_count("STRATA_SOAK_CRASH_KILLS", KILLS_QUICK).max(1)
}

fn seed() -> u64 {
    let seed = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash seed: {seed} (STRATA_CRASH_SEED={seed} replays it)");
    seed
}

/// The directory of a crash test: removed at its end, or, when
/// `STRATA_TEST_KEEP` names a directory, made in it (named after the test)
/// and kept, its path printed. The seed replays the kills' choices, not
/// their timing, so a failure may not come back: the test's files (the
/// log's, the states') are what is left to read.
struct TestDir {
    path: PathBuf,
    _removed_at_end: Option<tempfile::TempDir>,
}

impl TestDir {
    fn new() -> Self {
        let Some(keep) = support::process::kept_in() else {
            let temp = tempfile::tempdir().unwrap();
            return Self {
                path: temp.path().to_path_buf(),
                _removed_at_end: Some(temp),
            };
        };
        let prefix = format!("{}-", support::process::test_name());
        let temp = tempfile::Builder::new().prefix(&prefix).tempdir_in(keep);
        let path = temp.expect("a directory in STRATA_TEST_KEEP").keep();
        eprintln!("the test's files stay in {}", path.display());
        Self {
            path,
            _removed_at_end: None,
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// The wordcount example, in this test's own profile.
fn wordcount() -> PathBuf {
    support::example::example("wordcount")
}

/// One slice of the input: per partition of `lines`, its next lines.
type Chunk = Vec<Vec<String>>;

/// The generated input, in `kills()` chunks: the crash tests append chunk i
/// before the i-th run, so every run finds work (however fast the machine);
/// the crash-free run gets all of them at once. A fixed RNG: the seed only
/// drives the kills.
fn input() -> &'static [Chunk] {
    static INPUT: OnceLock<Vec<Chunk>> = OnceLock::new();
    INPUT.get_or_init(|| {
        let mut rng = Rng(7);
        let vocabulary: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
        let per_partition = lines() / kills() / PARTITIONS as usize;
        (0..kills())
            .map(|_| {
                (0..PARTITIONS)
                    .map(|_| {
                        (0..per_partition)
                            .map(|_| {
                                let words = 1 + rng.below(12) as usize;
                                let text: Vec<&str> = (0..words)
                                    .map(|_| {
                                        // Skewed: small indexes are much more frequent.
                                        let a = rng.below(vocabulary.len() as u64);
                                        vocabulary[rng.below(a + 1) as usize].as_str()
                                    })
                                    .collect();
                                text.join(" ")
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    })
}

/// Appends chunks to `lines` in the log at `data_dir` (no process has it
/// open), creating the topic first if needed.
fn append_embedded(data_dir: &Path, chunks: &[Chunk]) {
    support::with_topic(data_dir, "lines", PARTITIONS, &[], |topic| {
        // Recent timestamps: older ones would be deleted by retention.
        let now = strata::log::now_ms();
        for chunk in chunks {
            for (partition, lines) in topic.partitions.iter().zip(chunk) {
                for batch in lines.chunks(40) {
                    let records = batch.iter().map(|line| (None, line.as_bytes(), now));
                    let batch = support::batch_with(Compression::Lz4, records);
                    partition.append(&batch).unwrap();
                }
            }
        }
        for partition in &topic.partitions {
            partition.flush().unwrap();
        }
    });
}

/// Appends a chunk to `lines` through a running broker, with `strata
/// produce` (each partition's lines in order).
fn append_remote(addr: &str, chunk: &Chunk) {
    for (partition, lines) in chunk.iter().enumerate() {
        let mut produce = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args([
                "produce",
                "lines",
                "--acks",
                "all",
                "--bootstrap",
                addr,
                "--partition",
            ])
            .arg(partition.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strata produce starts");
        {
            use std::io::Write;
            let mut stdin = produce.stdin.take().unwrap();
            for line in lines {
                writeln!(stdin, "{line}").unwrap();
            }
        }
        let output = produce.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "strata produce failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Runs a wordcount subcommand to completion; returns its stdout.
/// The session timeout remote instances ask their group for: a killed
/// instance's tasks move this long after it died.
const SESSION_TIMEOUT_MS: &str = "1500";

fn wordcount_cmd(location: &[&str], args: &[&str]) -> String {
    app_cmd(&wordcount(), location, args)
}

/// Runs a subcommand of the app binary `app` (either wordcount) to
/// completion; returns its stdout.
fn app_cmd(app: &Path, location: &[&str], args: &[&str]) -> String {
    let output = Command::new(app)
        .env("STRATA_SESSION_TIMEOUT_MS", SESSION_TIMEOUT_MS)
        .args(location)
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .expect("wordcount runs");
    assert!(
        output.status.success(),
        "wordcount {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn spawn_run(app: &Path, location: &[&str]) -> Child {
    Command::new(app)
        .env("STRATA_SESSION_TIMEOUT_MS", SESSION_TIMEOUT_MS)
        .args(location)
        .arg("run")
        .args(COMMIT_ARGS)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wordcount starts")
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// When to kill each run. One kill in four comes at a random moment from
/// the start, while the app opens its state, ships leftovers and fetches.
/// The others wait until the run has written derived records to the log
/// (`shipped_bytes` grew) and then come at a random moment within a window,
/// so how long the app takes to start on a loaded machine does not decide
/// where they land. The window starts at about twice what one chunk of
/// input took in the crash-free run and adapts: it shrinks after a kill
/// that found the work done and grows after one that interrupted it, so
/// that kills keep landing mid-processing on fast and slow machines alike.
struct KillClock {
    window_ms: u64,
    start_ms: u64,
}

/// The longest a run may take to write its first derived records before
/// it is killed anyway (the kill then lands wherever it lands).
const FIRST_WRITE_WAIT: Duration = Duration::from_secs(60);

/// The window of the kills that come while the app is starting.
const STARTING_WINDOW_MS: u64 = 300;

impl KillClock {
    fn new() -> Self {
        let start_ms = 2 * reference().run_ms / kills() as u64 + 20;
        Self {
            window_ms: start_ms,
            start_ms,
        }
    }

    /// Waits until the moment to kill the run just started on `data_dir`,
    /// whose derived topics held `shipped` bytes before it.
    fn wait(&self, rng: &mut Rng, data_dir: &Path, shipped: u64) {
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(STARTING_WINDOW_MS)));
            return;
        }
        let deadline = Instant::now() + FIRST_WRITE_WAIT;
        while shipped_bytes(data_dir) <= shipped && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(rng.below(self.window_ms)));
    }

    fn killed(&mut self, landed: Landed) {
        self.window_ms = match landed {
            Landed::MidProcessing => (self.window_ms * 3 / 2).min(4 * self.start_ms),
            Landed::BeforeAnyCommit => self.window_ms,
            Landed::AfterTheWork => (self.window_ms / 2).max(5),
        };
    }
}

/// Bytes in the segments of the derived topic `words` under `data_dir`:
/// they grow once a run writes what it derived.
fn shipped_bytes(data_dir: &Path) -> u64 {
    let Ok(dirs) = std::fs::read_dir(data_dir) else {
        return 0;
    };
    let partitions = dirs
        .flatten()
        .filter(|dir| dir.file_name().to_string_lossy().starts_with("words-"));
    let segments = partitions
        .filter_map(|dir| std::fs::read_dir(dir.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|file| file.path().extension().is_some_and(|e| e == "log"));
    segments
        .filter_map(|file| file.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

/// Where a kill landed, as `status` shows it before the run and after the
/// kill.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Landed {
    /// Nothing committed in the run: the app was killed while starting,
    /// or before its first commit.
    BeforeAnyCommit,
    /// Some of the chunk committed (or committed records waiting to be
    /// shipped), some left.
    MidProcessing,
    /// Nothing left to do.
    AfterTheWork,
}

/// Runs on one chunk killed before any commit are tried again, up to this
/// many runs per chunk.
const RUNS_PER_CHUNK: usize = 4;

/// Tallies where the kills of one test landed.
#[derive(Default)]
struct Kills {
    mid_processing: usize,
    before_any_commit: usize,
}

impl Kills {
    /// Runs `killed_run` (start the app on the chunk just appended, kill it
    /// when `clock` says, say where the kill landed) until a kill lands
    /// after the run's first commit, at most `RUNS_PER_CHUNK` times. A kill
    /// while the app is still starting leaves the chunk as it was and tests
    /// little on its own.
    fn kill_until_it_commits(
        &mut self,
        clock: &mut KillClock,
        mut killed_run: impl FnMut(&KillClock) -> Landed,
    ) {
        for _ in 0..RUNS_PER_CHUNK {
            let landed = killed_run(clock);
            clock.killed(landed);
            match landed {
                Landed::MidProcessing => self.mid_processing += 1,
                Landed::BeforeAnyCommit => self.before_any_commit += 1,
                Landed::AfterTheWork => {}
            }
            if landed != Landed::BeforeAnyCommit {
                return;
            }
        }
    }

    fn assert_enough_mid_processing(&self, seed: u64) {
        let (mid, chunks) = (self.mid_processing, kills());
        let early = self.before_any_commit;
        eprintln!(
            "kills interrupted processing in {mid} of {chunks} chunks ({early} kills came before any commit)"
        );
        assert!(
            mid * 3 >= chunks,
            "seed {seed}: kills interrupted processing in only {mid} of {chunks} chunks ({early} came before any commit); the input is too small for this machine"
        );
    }
}

/// `status`'s task rows: not the header, warnings or "(no task has run
/// yet …)".
fn status_rows(location: &[&str]) -> Vec<String> {
    let status = wordcount_cmd(location, &["status"]);
    (status.lines().skip(1))
        .filter(|l| !l.starts_with("WARNING") && !l.starts_with('('))
        .map(str::to_string)
        .collect()
}

/// How many tasks have state under `location`.
fn task_rows(location: &[&str]) -> usize {
    status_rows(location).len()
}

/// `status`'s rows as (task, input, offset, lag, outbox) columns.
fn status_columns(location: &[&str]) -> Vec<[String; 5]> {
    (status_rows(location).iter())
        .filter_map(|row| {
            let columns: Vec<&str> = row.split_whitespace().collect();
            (columns.len() >= 6).then(|| [0, 1, 2, 4, 5].map(|i| columns[i].to_string()))
        })
        .collect()
}

/// Whether some task has work left: lag on some input, or committed
/// records not yet shipped.
fn work_left(location: &[&str]) -> bool {
    (status_columns(location).iter()).any(|[_, _, _, lag, outbox]| lag != "0" || outbox != "0")
}

/// Per task and input, its committed offset as `status` shows it.
type Positions = BTreeMap<(String, String), String>;

fn positions(location: &[&str]) -> Positions {
    (status_columns(location).into_iter())
        .map(|[task, input, offset, ..]| ((task, input), offset))
        .collect()
}

/// Where the kill of a run that started at `before` landed.
fn landed(location: &[&str], before: &Positions) -> Landed {
    let (mut progressed, mut left) = (false, false);
    for [task, input, offset, lag, outbox] in status_columns(location) {
        let was = before.get(&(task, input)).map_or("-", String::as_str);
        progressed |= offset != was || outbox != "0";
        left |= lag != "0" || outbox != "0";
    }
    match (progressed, left) {
        (false, true) => Landed::BeforeAnyCommit,
        (true, true) => Landed::MidProcessing,
        (_, false) => Landed::AfterTheWork,
    }
}

/// The derived topics as a log directory holds them.
fn read_topics(data_dir: &Path) -> Topics {
    let log = LogManager::open(data_dir, LogConfig::default()).unwrap();
    let mut topics = Topics::new();
    for name in ["words", "word-counts"] {
        let topic = log.topic(name).unwrap_or_else(|| panic!("no topic {name}"));
        let partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                // What read_committed consumers see: remote, the app writes
                // in transactions (markers, and aborted ones after kills).
                let mut records: Vec<(String, String)> = support::read_committed(partition, 0)
                    .into_iter()
                    .map(|r| {
                        let text =
                            |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).unwrap();
                        (text(r.key), text(r.value))
                    })
                    .collect();
                if name == "word-counts" {
                    support::wordcount::counts_in_order(&records);
                }
                records.sort();
                records
            })
            .collect();
        topics.insert(name.to_string(), partitions);
    }
    log.close().unwrap();
    topics
}

/// One crash-free embedded run over the input: what every test compares
/// against.
fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        append_embedded(&data, input());
        let location = ["--data-dir", data.to_str().unwrap()];
        let started = std::time::Instant::now();
        let mut run = vec!["run", "--until-end"];
        run.extend(COMMIT_ARGS);
        wordcount_cmd(&location, &run);
        let run_ms = started.elapsed().as_millis() as u64;
        let state = wordcount_cmd(&location, &["dump-state"]);
        let topics = read_topics(&data);
        let words: usize = topics["words"].iter().map(Vec::len).sum();
        assert!(words > lines() * 3, "the input has {words} words");
        let distinct: std::collections::BTreeSet<&String> = topics["word-counts"]
            .iter()
            .flatten()
            .map(|(word, _)| word)
            .collect();
        assert_eq!(
            state.lines().count(),
            distinct.len(),
            "one `counts` entry per word"
        );
        assert!(state.lines().all(|line| line.starts_with("counts\t")));
        Reference {
            outcome: Outcome { state, topics },
            run_ms,
        }
    })
}

fn assert_same(outcome: &Outcome, seed: u64) {
    let reference = &reference().outcome;
    if outcome.state != reference.state {
        let differing: Vec<_> = outcome
            .state
            .lines()
            .zip(reference.state.lines())
            .filter(|(a, b)| a != b)
            .take(5)
            .collect();
        panic!(
            "seed {seed}: dump-state differs from the crash-free run ({} vs {} lines; first differences, got vs expected: {differing:?})",
            outcome.state.lines().count(),
            reference.state.lines().count()
        );
    }
    for (topic, partitions) in &reference.topics {
        for (partition, expected) in partitions.iter().enumerate() {
            let got = &outcome.topics[topic][partition];
            assert!(
                got == expected,
                "seed {seed}: {topic}/{partition} holds {} records, the crash-free run {}",
                got.len(),
                expected.len()
            );
        }
    }
}

#[test]
fn embedded_app_killed_at_random_moments_ends_as_a_crash_free_run() {
    embedded_killed_at_random_moments(&wordcount());
}

/// The same word count written with the pipeline of `strata-operators`,
/// killed the same way, ends as the hand-written one's crash-free run:
/// the same state and the same derived topics.
#[test]
fn pipeline_app_killed_at_random_moments_ends_as_the_hand_written_crash_free_run() {
    embedded_killed_at_random_moments(&support::example::example("wordcount_dsl"));
}

fn embedded_killed_at_random_moments(app: &Path) {
    let seed = seed();
    let mut rng = Rng(seed);
    reference();
    let dir = TestDir::new();
    let data = dir.path().join("data");
    let location = ["--data-dir", data.to_str().unwrap()];
    let (mut tally, mut clock) = (Kills::default(), KillClock::new());
    for chunk in input() {
        append_embedded(&data, std::slice::from_ref(chunk));
        tally.kill_until_it_commits(&mut clock, |clock| {
            let (before, shipped) = (positions(&location), shipped_bytes(&data));
            let mut child = spawn_run(app, &location);
            clock.wait(&mut rng, &data, shipped);
            kill(&mut child);
            landed(&location, &before)
        });
    }
    tally.assert_enough_mid_processing(seed);
    app_cmd(app, &location, &["run", "--until-end"]);
    let outcome = Outcome {
        state: app_cmd(app, &location, &["dump-state"]),
        topics: read_topics(&data),
    };
    assert_same(&outcome, seed);
}

#[test]
fn remote_app_and_broker_killed_at_random_moments_end_as_a_crash_free_run() {
    let seed = seed();
    let mut rng = Rng(seed ^ 0x5eed);
    reference();
    let dir = TestDir::new();
    let (data, state) = (dir.path().join("broker"), dir.path().join("app"));
    append_embedded(&data, &[]);
    let strata = env!("CARGO_BIN_EXE_strata");
    // The broker forgets idle idempotent producers within a second (Kafka
    // after `producer.id.expiration.ms`) between transactions: a resend
    // of an earlier commit is not recognised by its producer id, so only
    // the transactions keep the derived topics exactly once.
    let mut broker = expiring_broker(dir.path());
    let addr = broker.addr.clone();
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let (mut tally, mut clock) = (Kills::default(), KillClock::new());
    for chunk in input() {
        append_remote(&addr, chunk);
        tally.kill_until_it_commits(&mut clock, |clock| {
            let (before, shipped) = (positions(&location), shipped_bytes(&data));
            let mut app = spawn_run(&wordcount(), &location);
            clock.wait(&mut rng, &data, shipped);
            match rng.below(3) {
                // The app alone.
                0 => kill(&mut app),
                // The broker under the running app, then the app.
                1 => {
                    broker.kill_and_restart(strata, &data);
                    std::thread::sleep(Duration::from_millis(rng.below(400)));
                    kill(&mut app);
                }
                // Both at once.
                _ => {
                    kill(&mut app);
                    broker.kill_and_restart(strata, &data);
                }
            }
            landed(&location, &before)
        });
    }
    tally.assert_enough_mid_processing(seed);
    wordcount_cmd(&location, &["run", "--until-end"]);
    assert_same(&remote_outcome(&location, broker, &data), seed);
}

/// A remote run's outcome: its state, and its derived topics as the
/// broker's log holds them once the broker is stopped.
fn remote_outcome(location: &[&str], broker: ServerProcess, data: &Path) -> Outcome {
    let state = wordcount_cmd(location, &["dump-state"]);
    drop(broker);
    Outcome {
        state,
        topics: read_topics(data),
    }
}

/// `strata serve` with a producer-state expiry of half a second between
/// transactions (see the remote crash test), in `dir`.
fn expiring_broker(dir: &Path) -> ServerProcess {
    broker_configured(dir, "")
}

/// `expiring_broker`, with more lines of `strata.toml`.
fn broker_configured(dir: &Path, more: &str) -> ServerProcess {
    broker_configured_with_env(dir, more, &[])
}

/// `broker_configured`, with `envs` in the broker's environment (for its
/// first start only).
fn broker_configured_with_env(dir: &Path, more: &str, envs: &[(&str, &str)]) -> ServerProcess {
    let config = dir.join("strata.toml");
    std::fs::write(
        &config,
        format!(
            "producer_id_expiration_ms = 500\nretention_check_interval_ms = 100\n\
             group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 500\n{more}"
        ),
    )
    .unwrap();
    let args = [std::ffi::OsStr::new("--config"), config.as_os_str()];
    let strata = env!("CARGO_BIN_EXE_strata");
    ServerProcess::start_with_args_and_env(strata, &dir.join("broker"), &args, envs)
}

/// Twice what strata's client rides out alone before a task fails.
const OUTAGE: Duration = Duration::from_secs(15);

/// A remote app outlives its broker being down far longer than its
/// client's retries last (a restart, an upgrade), killed while the app has
/// work: its tasks wait for the cluster and start again from their last
/// commit, and the instance goes on. Stopped while the cluster is away, it
/// stops cleanly. It ends as the crash-free run.
#[test]
fn a_remote_app_waits_out_its_broker_being_down_and_ends_as_a_crash_free_run() {
    reference();
    let strata = env!("CARGO_BIN_EXE_strata");
    let dir = TestDir::new();
    let (data, state) = (dir.path().join("broker"), dir.path().join("app"));
    append_embedded(&data, &[]);
    let mut broker = expiring_broker(dir.path());
    let addr = broker.addr.clone();
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let (head, rest) = input().split_at(kills() / 3);
    let (middle, tail) = rest.split_at(kills() / 3);
    for chunk in head {
        append_remote(&addr, chunk);
    }
    let (mut app, log) = spawn_logged(&location);
    support::wait_until("the app catches up", Duration::from_secs(300), || {
        !work_left(&location)
    });
    // Down while the app is idle, then while it has work (some of its
    // tasks committing or shipping).
    let alive = |app: &mut Child, log: &Log| {
        assert!(
            matches!(app.try_wait(), Ok(None)),
            "the app stopped while its broker was down:\n{}",
            log.lock().unwrap()
        );
    };
    for (outage, chunks) in [("idle", &[][..]), ("busy", middle)] {
        for chunk in chunks {
            append_remote(&addr, chunk);
        }
        broker.kill();
        std::thread::sleep(OUTAGE);
        alive(&mut app, &log);
        broker.restart(strata, &data);
        support::wait_until(
            &format!("the app catches up after the {outage} outage"),
            Duration::from_secs(300),
            || {
                alive(&mut app, &log);
                !work_left(&location)
            },
        );
    }
    // Stopped while the cluster is away.
    broker.kill();
    signal(&app, "-TERM");
    support::wait_until("the app stops", Duration::from_secs(120), || {
        !matches!(app.try_wait(), Ok(None))
    });
    let status = app.wait().unwrap();
    assert!(
        status.success(),
        "stopped while its broker was down: {status}\n{}",
        log.lock().unwrap()
    );
    broker.restart(strata, &data);
    for chunk in tail {
        append_remote(&addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    assert_same(&remote_outcome(&location, broker, &data), 0);
}

#[test]
fn remote_state_deleted_while_the_app_is_down_is_restored_from_the_changelogs() {
    reference();
    let dir = TestDir::new();
    let (data, state) = (dir.path().join("broker"), dir.path().join("app"));
    append_embedded(&data, &[]);
    let broker = expiring_broker(dir.path());
    let addr = broker.addr.clone();
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let (first, rest) = input().split_at(kills() / 2);
    for chunk in first {
        append_remote(&broker.addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    // The machine's disk is lost: nothing of the state is left.
    std::fs::remove_dir_all(&state).unwrap();
    for chunk in rest {
        append_remote(&broker.addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    assert_same(&remote_outcome(&location, broker, &data), 0);
}

/// Longer than strata's client retries a request to a broker that is
/// gone (10 retries, backoff doubling from 100 ms to at most 1 s: about
/// 7.5 s), shorter than twice that: a task's ship fails, and the
/// InitProducerId that follows finds the broker back.
const PAST_RETRIES: Duration = Duration::from_secs(11);

/// The broker dies the moment a transaction's commit is decided, before
/// any marker is written (`STRATA_CRASH_POINT=txn-prepared`), under a
/// running remote app, and stays down past the client's retries: the
/// task's ship fails though its transaction committed, as when only
/// EndTxn's answer is lost. The broker completes the commit when it starts
/// again (its recovery passes the crash point too, so it starts without
/// it). The task must learn that its transaction committed before
/// shipping anything again: the app ends as the crash-free run.
#[test]
fn a_commit_decided_while_its_answer_was_lost_is_not_shipped_again() {
    reference();
    let strata = env!("CARGO_BIN_EXE_strata");
    let dir = TestDir::new();
    let (data, state) = (dir.path().join("broker"), dir.path().join("app"));
    append_embedded(&data, &[]);
    let crash = [("STRATA_CRASH_POINT", "txn-prepared")];
    let mut broker = broker_configured_with_env(dir.path(), "", &crash);
    let addr = broker.addr.clone();
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let (head, tail) = input().split_at(kills() / 2);
    for chunk in head {
        append_remote(&addr, chunk);
    }
    let (mut app, log) = spawn_logged(&location);
    support::wait_until(
        "the broker dies at a decided commit",
        Duration::from_secs(120),
        || !broker.is_running(),
    );
    std::thread::sleep(PAST_RETRIES);
    assert!(
        matches!(app.try_wait(), Ok(None)),
        "the app stopped while its broker was down:\n{}",
        log.lock().unwrap()
    );
    broker.restart(strata, &data);
    support::wait_until("the app catches up", Duration::from_secs(300), || {
        !work_left(&location)
    });
    stop((app, log));
    for chunk in tail {
        append_remote(&addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    assert_same(&remote_outcome(&location, broker, &data), 0);
}

/// Kafka forgets the offsets of a group without members
/// `offsets.retention.minutes` after their last commit (KIP-211), and a
/// task's offsets group never has members: a task whose input went quiet
/// loses them. Its positions live in its positions log too, beside its
/// state: with its group's offsets expired and its state directory lost,
/// the app restores the state and goes on from the positions, exactly
/// once.
#[test]
fn a_remote_app_whose_offsets_expired_and_whose_state_is_lost_goes_on_exactly_once() {
    reference();
    let dir = TestDir::new();
    let (data, state) = (dir.path().join("broker"), dir.path().join("app"));
    append_embedded(&data, &[]);
    let broker = broker_configured(
        dir.path(),
        "offsets_retention_ms = 300\noffsets_retention_check_interval_ms = 100\n",
    );
    let addr = broker.addr.clone();
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let (first, rest) = input().split_at(kills() / 2);
    for chunk in first {
        append_remote(&addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    support::wait_until("the app's groups expire", Duration::from_secs(60), || {
        groups(&addr).is_empty()
    });
    std::fs::remove_dir_all(&state).unwrap();
    for chunk in rest {
        append_remote(&addr, chunk);
    }
    wordcount_cmd(&location, &["run", "--until-end"]);
    assert_same(&remote_outcome(&location, broker, &data), 0);
}

/// The groups the broker at `addr` knows (`strata groups list`).
fn groups(addr: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["groups", "list", "--format", "json", "--bootstrap", addr])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    (listed.iter())
        .map(|g| g["group"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_paused_instance_is_fenced_once_its_tasks_moved_and_its_writes_never_show() {
    reference();
    let dir = TestDir::new();
    let (data, broker, addr, [state_a, state_b]) = two_instances(dir.path(), &[]);
    let first = ["--bootstrap", &addr, "--state-dir", &state_a];
    let second = ["--bootstrap", &addr, "--state-dir", &state_b];
    let (head, tail) = input().split_at(kills() / 2);
    for chunk in head {
        append_remote(&addr, chunk);
    }
    let (mut a, log) = spawn_logged(&first);
    // Remote, `status` lists every task of the app as soon as its input
    // exists: a has committed once one shows an offset past 0.
    support::wait_until("instance a commits", Duration::from_secs(300), || {
        (status_columns(&first).iter())
            .any(|[_, _, offset, _, _]| offset.parse::<i64>().is_ok_and(|o| o > 0))
    });
    // a stops answering; once its session is over, b (started meanwhile)
    // is given every task and restores their state from the changelogs.
    signal(&a, "-STOP");
    let (mut b, b_log) = spawn_logged(&second);
    for chunk in tail {
        append_remote(&addr, chunk);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while task_rows(&second) != 2 * PARTITIONS as usize || work_left(&second) {
        assert!(
            std::time::Instant::now() < deadline,
            "b did not catch up alone:\n{}\n{}",
            wordcount_cmd(&second, &["status"]),
            b_log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // a wakes as a zombie: it finds it lost its place in the group and
    // gives its tasks up, saying so; whatever it still writes for them is
    // refused (fenced).
    signal(&a, "-CONT");
    // Given up on, the failure shows what a said meanwhile.
    let deadline = support::wait::Deadline::after("a gives its tasks up", Duration::from_secs(300));
    loop {
        let said = log.lock().unwrap().clone();
        if said.contains("lost its place in the group") || said.contains("was fenced") {
            break;
        }
        // Its progress lines aside, which say nothing of the group.
        let lines: Vec<&str> = (said.lines())
            .filter(|line| !line.contains("records processed"))
            .collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        deadline.check(format_args!("; a's log ends:\n{tail}"));
        std::thread::sleep(Duration::from_millis(200));
    }
    kill(&mut a);
    kill(&mut b);
    wordcount_cmd(&second, &["run", "--until-end"]);
    assert_same(&remote_outcome(&second, broker, &data), 0);
}

/// How many instances run while chunk `k` of the input arrives: one, then
/// three, then two, then one again.
fn instances_wanted(k: usize) -> usize {
    match k * 4 / kills() {
        0 => 1,
        1 => 3,
        2 => 2,
        _ => 1,
    }
}

#[test]
fn instances_scaled_up_and_down_and_killed_share_the_tasks_and_end_as_a_crash_free_run() {
    let seed = seed();
    let mut rng = Rng(seed ^ 0x5ca1e);
    reference();
    let dir = TestDir::new();
    let data = dir.path().join("broker");
    append_embedded(&data, &[]);
    let strata = env!("CARGO_BIN_EXE_strata");
    let mut broker = expiring_broker(dir.path());
    let addr = broker.addr.clone();
    let states: Vec<String> = (0..3)
        .map(|i| {
            dir.path()
                .join(format!("i{i}"))
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let locations: Vec<[&str; 4]> = (states.iter())
        .map(|state| ["--bootstrap", addr.as_str(), "--state-dir", state.as_str()])
        .collect();
    let mut running: Vec<Option<(Child, Log)>> = (0..3).map(|_| None).collect();
    let (mut kills, mut broker_kills) = (0, 0);
    for (k, chunk) in input().iter().enumerate() {
        append_remote(&addr, chunk);
        // Scale: start the missing instances, stop the extra ones as an
        // operator would (SIGTERM: they commit, leave, and their tasks move).
        let wanted = instances_wanted(k);
        for (i, slot) in running.iter_mut().enumerate() {
            match (i < wanted, slot.is_some()) {
                (true, false) => *slot = Some(spawn_logged(&locations[i])),
                (false, true) => stop(slot.take().unwrap()),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200)));
        match rng.below(4) {
            // A running instance killed, and started again.
            0 | 1 => {
                let i = rng.below(wanted as u64) as usize;
                kill(&mut running[i].as_mut().unwrap().0);
                kills += 1;
                std::thread::sleep(Duration::from_millis(rng.below(800)));
                running[i] = Some(spawn_logged(&locations[i]));
            }
            // The broker under them.
            2 => {
                broker.kill_and_restart(strata, &data);
                broker_kills += 1;
            }
            _ => {}
        }
    }
    eprintln!("{kills} instance kills, {broker_kills} broker kills");
    for child in running.iter_mut().filter_map(Option::take) {
        stop(child);
    }
    // One instance alone drains the pipeline: it is given every task, and
    // restores from the changelogs the ones whose state it does not hold.
    wordcount_cmd(&locations[0], &["run", "--until-end"]);
    assert_same(&remote_outcome(&locations[0], broker, &data), seed);
}

/// Stops an instance as an operator does (SIGTERM) and waits for it.
fn stop((mut child, log): (Child, Log)) {
    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    // One stopped before it watches for SIGTERM (just started) dies of it,
    // which loses nothing either.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.success() || status.signal() == Some(15),
        "an instance stopped with SIGTERM: {status}; it said:\n{}",
        log.lock().unwrap()
    );
}

#[test]
fn a_standby_copy_takes_a_killed_instances_tasks_over_without_a_full_restore() {
    reference();
    let dir = TestDir::new();
    let (data, broker, addr, [state_a, state_b]) = two_instances(dir.path(), &[]);
    let first = ["--bootstrap", &addr, "--state-dir", &state_a];
    let second = ["--bootstrap", &addr, "--state-dir", &state_b];
    let (head, tail) = input().split_at(kills() / 2);
    for chunk in head {
        append_remote(&addr, chunk);
    }
    let standbys = ["--standbys", "1"];
    let metrics = free_address();
    let (mut a, a_log) = spawn_logged_with(&first, &standbys);
    let (mut b, b_log) =
        spawn_logged_with(&second, &[&standbys[..], &["--metrics", &metrics]].concat());
    // Both run tasks, and each keeps copies of the other's counts.
    support::wait_until("both keep standby copies", Duration::from_secs(300), || {
        let kept =
            |log: &std::sync::Mutex<String>| log.lock().unwrap().contains("keeping a standby copy");
        kept(&a_log) && kept(&b_log) && !work_left(&first)
    });
    // b says what it does with each task, in `status` and in its metrics:
    // runs some, keeps copies of others, caught up once a is idle.
    support::wait_until(
        "b's status shows its copies caught up",
        Duration::from_secs(60),
        || {
            let shown = wordcount_cmd(&second, &["status"]);
            let states: Vec<&str> = shown
                .lines()
                .skip(1)
                .filter_map(|l| l.split("  ").last())
                .collect();
            states.iter().any(|s| s.trim() == "running")
                && states.iter().any(|s| s.trim() == "standby, 0 behind")
        },
    );
    let scraped = scrape_metrics(&metrics);
    assert!(
        scraped.contains("state=\"standby\"} 1") && scraped.contains("state=\"running\"} 1"),
        "b's metrics name its tasks' states:\n{scraped}"
    );
    assert!(
        scraped.contains("strata_standby_lag_offsets{task=\"count/"),
        "{scraped}"
    );
    std::thread::sleep(Duration::from_millis(500));
    kill(&mut a);
    let seen = b_log.lock().unwrap().len();
    for chunk in tail {
        append_remote(&addr, chunk);
    }
    support::wait_until("b takes a's tasks over", Duration::from_secs(300), || {
        !work_left(&second) && b_log.lock().unwrap()[seen..].contains("restored counts")
    });
    // Every count task b took over went on from its copy's position.
    let after = b_log.lock().unwrap()[seen..].to_string();
    for line in after.lines().filter(|l| l.contains("restored counts")) {
        let from: i64 = line
            .split("offsets ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a restore line without offsets: {line}"));
        assert!(from > 0, "a full restore despite the standby copy: {line}");
    }
    kill(&mut b);
    wordcount_cmd(&second, &["run", "--until-end"]);
    assert_same(&remote_outcome(&second, broker, &data), 0);
}

#[test]
fn a_static_instance_restarted_within_its_session_gets_its_tasks_back() {
    let dir = TestDir::new();
    let (_data, _broker, addr, [state_a, state_b]) = two_instances(dir.path(), &input()[..2]);
    let first = ["--bootstrap", &addr, "--state-dir", &state_a];
    let second = ["--bootstrap", &addr, "--state-dir", &state_b];
    // A session long enough to restart in.
    let static_a = ["--instance-id", "host-a", "--session-timeout-ms", "8000"];
    let static_b = ["--instance-id", "host-b", "--session-timeout-ms", "8000"];
    let a = spawn_logged_with(&first, &static_a);
    let (mut b, _) = spawn_logged_with(&second, &static_b);
    let tasks_of = |instance: &str| -> Vec<String> {
        let described = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["groups", "describe", "wordcount", "--format", "json"])
            .args(["--bootstrap", &addr])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&described.stdout).unwrap_or_default();
        let members = json["members"].as_array().cloned().unwrap_or_default();
        let member = members.iter().find(|m| m["instance_id"] == instance);
        let tasks = member
            .and_then(|m| m["tasks"].as_array().cloned())
            .unwrap_or_default();
        tasks
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect()
    };
    let (mut before, mut b_before) = (Vec::new(), Vec::new());
    support::wait_until("both run tasks", Duration::from_secs(60), || {
        (before, b_before) = (tasks_of("host-a"), tasks_of("host-b"));
        !before.is_empty() && before.len() + b_before.len() == 2 * PARTITIONS as usize
    });
    // Stopped, a static member does not leave: its tasks wait for it
    // rather than move to b (a dynamic one's would move at once).
    stop(a);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(tasks_of("host-b"), b_before, "b took nothing over");
    assert_eq!(tasks_of("host-a"), before, "a keeps its place while down");
    let (mut again, log) = spawn_logged_with(&first, &static_a);
    support::wait_until("a is back", Duration::from_secs(60), || {
        log.lock().unwrap().contains("assigned")
    });
    assert_eq!(tasks_of("host-a"), before, "the restarted instance's tasks");
    assert_eq!(tasks_of("host-b"), b_before);
    kill(&mut again);
    kill(&mut b);
}

/// A broker (forgetting producers fast) whose `lines` holds `chunks`, and
/// the state directories of two instances: (its data directory, the
/// broker, its address, the states).
fn two_instances(dir: &Path, chunks: &[Chunk]) -> (PathBuf, ServerProcess, String, [String; 2]) {
    let data = dir.join("broker");
    append_embedded(&data, chunks);
    let broker = expiring_broker(dir);
    let addr = broker.addr.clone();
    let at = |name: &str| dir.join(name).to_str().unwrap().to_string();
    (data, broker, addr, [at("a"), at("b")])
}

/// `run` in the background with its log (stderr) collected.
fn spawn_logged(location: &[&str]) -> (Child, Log) {
    spawn_logged_with(location, &[])
}

/// A loopback address no one listens on now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET /metrics` from an app's `--metrics` address.
fn scrape_metrics(addr: &str) -> String {
    support::http::get(addr, "/metrics").1
}

fn spawn_logged_with(location: &[&str], args: &[&str]) -> (Child, Log) {
    support::process::spawn_logged(
        Command::new(wordcount())
            .env("STRATA_SESSION_TIMEOUT_MS", SESSION_TIMEOUT_MS)
            .args(location)
            .arg("run")
            .args(COMMIT_ARGS)
            .args(args),
    )
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

/// Adds a count no input ever made (`zzz-tampered` → 999) to the committed
/// state of task count/0: what a bug would leave behind, and what a
/// rebuild from the log removes.
fn tamper(data: &Path) {
    let dir = data.join("apps/wordcount/count/0");
    let mut state = strata::runtime::TaskState::open(&dir, &["counts"], true).unwrap();
    let offsets = state.input_offsets();
    let value = strata::codec::Codec::Postcard.encode(&999u64).unwrap();
    state.put("counts", b"zzz-tampered", &value).unwrap();
    let offsets: Vec<(&str, i64)> = offsets.iter().map(|(t, o)| (t.as_str(), *o)).collect();
    state.commit(&offsets).unwrap();
}

/// A rebuild killed at random moments (building, catching up, swapping)
/// and restarted: the live state is at every moment either the old one or
/// the rebuilt one, never anything else, and the last rebuild leaves the
/// state of a crash-free run.
#[test]
fn rebuild_killed_at_random_moments_ends_as_a_crash_free_run() {
    let seed = seed();
    let mut rng = Rng(seed ^ 0xb11d);
    let reference_state = reference().outcome.state.clone();
    let dir = TestDir::new();
    let data = dir.path().join("data");
    append_embedded(&data, input());
    let location = ["--data-dir", data.to_str().unwrap()];
    wordcount_cmd(&location, &["run", "--until-end"]);
    tamper(&data);
    let tampered = wordcount_cmd(&location, &["dump-state"]);
    assert!(tampered.contains("zzz-tampered\t999"));
    let started = std::time::Instant::now();
    wordcount_cmd(&location, &["rebuild"]);
    let rebuild_ms = started.elapsed().as_millis() as u64;
    assert_eq!(wordcount_cmd(&location, &["dump-state"]), reference_state);

    let rebuilt_dir = data.join("apps/wordcount/rebuild/count");
    let mut interrupted = 0;
    for _ in 0..8 {
        tamper(&data);
        assert_eq!(wordcount_cmd(&location, &["dump-state"]), tampered);
        let mut rebuild = Command::new(wordcount())
            .args(location)
            .arg("rebuild")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("wordcount starts");
        std::thread::sleep(Duration::from_millis(rng.below(rebuild_ms + 20)));
        kill(&mut rebuild);
        let state = wordcount_cmd(&location, &["dump-state"]);
        assert!(
            state == reference_state || state == tampered,
            "seed {seed}: after a kill the state is neither the old nor the rebuilt one"
        );
        let partial = std::fs::read_dir(&rebuilt_dir)
            .map(|entries| entries.count() > 0)
            .unwrap_or(false);
        interrupted += usize::from(partial);
        // Restarted until it completes.
        wordcount_cmd(&location, &["rebuild"]);
        assert_eq!(
            wordcount_cmd(&location, &["dump-state"]),
            reference_state,
            "seed {seed}"
        );
    }
    eprintln!("{interrupted} of 8 kills interrupted a rebuild");
    assert!(
        interrupted >= 1,
        "seed {seed}: no kill interrupted a rebuild"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&rebuilt_dir)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    // Rebuilds emit nothing: the derived topics are still the crash-free
    // run's, not one record more.
    let outcome = Outcome {
        state: wordcount_cmd(&location, &["dump-state"]),
        topics: read_topics(&data),
    };
    assert_same(&outcome, seed);
    let old = std::fs::read_dir(data.join("apps/wordcount/count"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".old"))
        .count();
    assert_eq!(old, 0, "an old state left behind");
}
