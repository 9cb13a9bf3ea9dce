//! The web console in a real browser (headless Chromium through
//! WebDriver): a word count's console shows its two processors, its lag
//! rising and falling back to 0 as the app catches up, and a store lookup's
//! answer; a replay's console shows its progress bar moving to 100% and its
//! running diff against live (the replay counts one word differently); a
//! rebuild's console shows its progress moving. The page logs no error.
//!
//! The app is slowed (a pause per record) until the browser has seen what
//! moves, then let go: what the page must show happens while it watches.
//! The live page's screenshot is what README shows (run with
//! `STRATA_CONSOLE_SCREENSHOT=docs/console.png` to make it again).

use crate::support;
use crate::support::browser::ConsoleDriver;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata::runtime::ops::query::http::QueryEndpoint;
use strata::runtime::ops::{RebuildOptions, Replay};
use strata::runtime::{App, Context, Location, ProcessError, Record, RunOptions, Store, Topic};

const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
const WORDS: Topic<String, ()> = Topic::new("words");
const WORD_COUNTS: Topic<String, String> = Topic::new("word-counts");
const COUNTS: Store<String, u64> = Store::new("counts");
const WAIT: Duration = Duration::from_secs(60);

/// Lines in the input, two words each, from ten words.
const LINES_IN: u64 = 2_000;
/// The pause per line while the browser has not seen what it waits for:
/// the input then takes 100 s of one task thread (50 s on two), far longer
/// than a browser needs to start, load the page and read the metrics a few
/// times on a loaded machine; once it has seen, the pause ends.
const SLOW: Duration = Duration::from_millis(50);

/// Microseconds `split` pauses per line.
static PAUSE_MICROS: AtomicU64 = AtomicU64::new(0);
/// Microseconds `count` pauses per word (for the rebuild, which runs only
/// the stateful `count`).
static COUNT_PAUSE_MICROS: AtomicU64 = AtomicU64::new(0);
/// What `count` adds per `w3` seen: 1, and 2 in the replay's build (the
/// change its diff against live shows).
static W3_STEP: AtomicU64 = AtomicU64::new(1);

fn pause(micros: &AtomicU64) {
    let pause = micros.load(Ordering::Relaxed);
    if pause > 0 {
        std::thread::sleep(Duration::from_micros(pause));
    }
}

fn split(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    pause(&PAUSE_MICROS);
    (line.value.split_whitespace()).try_for_each(|word| ctx.emit(WORDS, word, &()))
}

fn count(word: Record<String, ()>, ctx: &mut Context) -> Result<(), ProcessError> {
    pause(&COUNT_PAUSE_MICROS);
    let step = match word.key.as_str() {
        "w3" => W3_STEP.load(Ordering::Relaxed),
        _ => 1,
    };
    let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + step;
    ctx.put(COUNTS, &word.key, &n)?;
    ctx.emit(WORD_COUNTS, &word.key, &n.to_string())
}

/// The word count, fetching little at a time so its progress shows in
/// small steps.
fn app() -> App {
    App::new("wordcount")
        .processor("split", split)
        .input(LINES)
        .output(WORDS)
        .processor("count", count)
        .input(WORDS)
        .store(COUNTS)
        .output(WORD_COUNTS)
        .fetch_bytes(1024)
}

/// Line `i`: `w{i % 10} w{(i + 3) % 10}`, so each word is seen
/// `2 * LINES_IN / 10` times.
fn lines() -> Vec<(String, String)> {
    (0..LINES_IN)
        .map(|i| (i.to_string(), format!("w{} w{}", i % 10, (i + 3) % 10)))
        .collect()
}

/// The console's URL once the run serving it wrote its address.
fn console_url(state_dir: &std::path::Path, name: &str) -> String {
    let file = state_dir.join(name);
    support::wait_until("the console's address", WAIT, || file.exists());
    format!("http://{}/", std::fs::read_to_string(&file).unwrap().trim())
}

fn console_on(root: &Location, version: &str) -> Option<QueryEndpoint> {
    Some(QueryEndpoint {
        addr: "127.0.0.1:0".parse().unwrap(),
        root: root.clone(),
        version: version.into(),
    })
}

#[test]
fn the_console_shows_the_topology_lag_falling_a_lookup_a_replays_progress_and_diff_and_a_rebuilds_progress()
 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let now = strata::log::now_ms();
    let records: Vec<_> = (lines().into_iter())
        .map(|(key, line)| (key, line, now))
        .collect();
    let borrowed: Vec<_> = (records.iter())
        .map(|(k, v, at)| (k.as_str(), Some(v.as_str()), *at))
        .collect();
    // One batch per line: a fetch of 1 KiB takes a few.
    support::append_keyed(&data, "lines", 2, &borrowed);
    let location = Location::embedded(&data, app().name());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let screenshot = std::env::var("STRATA_CONSOLE_SCREENSHOT").unwrap_or_else(|_| {
        dir.path()
            .join("console.png")
            .to_string_lossy()
            .into_owned()
    });

    // The live run, slowed until the page has seen it behind.
    PAUSE_MICROS.store(SLOW.as_micros() as u64, Ordering::Relaxed);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = RunOptions {
        console: console_on(&location, "base"),
        ..RunOptions::default()
    };
    let running = {
        let location = location.clone();
        runtime.spawn(async move {
            let stop = async {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&app(), &location, options, stop).await
        })
    };
    let url = console_url(location.state_dir(), "console-address");
    let each = (2 * LINES_IN / 10).to_string();
    let mut page = ConsoleDriver::start(&["live", &url, "counts", "w3", &each, &screenshot]);
    page.passed("topology");
    page.passed("lag-seen");
    PAUSE_MICROS.store(0, Ordering::Relaxed);
    page.passed("caught-up");
    page.passed("lookup");
    page.finish();
    stop.send(()).unwrap();
    let summary = runtime.block_on(running).unwrap().unwrap();
    assert!(summary.records >= LINES_IN, "{summary:?}");
    assert!(std::path::Path::new(&screenshot).exists());

    // A replay into v2 of a build counting w3 twice, slowed until its
    // progress bar has moved.
    PAUSE_MICROS.store(SLOW.as_micros() as u64, Ordering::Relaxed);
    W3_STEP.store(2, Ordering::Relaxed);
    let replay = Replay::prepare(&app(), &location, "v2", "earliest").unwrap();
    let version_dir = replay.location.state_dir().to_path_buf();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = RunOptions {
        console: console_on(&location, "v2"),
        ..RunOptions::default()
    };
    let replaying = runtime.spawn(async move {
        let stop = async {
            let _ = stopped.await;
        };
        replay.run_until(options, stop).await
    });
    let url = console_url(&version_dir, "console-address");
    let mut page = ConsoleDriver::start(&["replay", &url, "counts"]);
    page.passed("topology");
    page.passed("progress-moving");
    PAUSE_MICROS.store(0, Ordering::Relaxed);
    page.passed("progress-done");
    page.passed("diff");
    page.finish();
    stop.send(()).unwrap();
    let summary = runtime.block_on(replaying).unwrap().unwrap();
    assert!(summary.records >= LINES_IN, "{summary:?}");
    assert!(
        !version_dir.join("console-address").exists(),
        "a run that ended leaves no console address behind"
    );

    // A rebuild of the live state (the app not running), slowed until its
    // progress bar has moved.
    W3_STEP.store(1, Ordering::Relaxed);
    COUNT_PAUSE_MICROS.store(SLOW.as_micros() as u64, Ordering::Relaxed);
    let options = RebuildOptions {
        console: Some("127.0.0.1:0".parse().unwrap()),
        ..RebuildOptions::default()
    };
    let rebuilding = {
        let location = location.clone();
        runtime
            .spawn(async move { strata::runtime::ops::rebuild(&app(), &location, options).await })
    };
    let url = console_url(location.state_dir(), "rebuild-console-address");
    let mut page = ConsoleDriver::start(&["rebuild", &url]);
    page.passed("title");
    page.passed("topology");
    page.passed("progress-moving");
    // Let go once the page is done with: a rebuild let go ends at once,
    // and its console with it, which a page still reading would log.
    page.finish();
    COUNT_PAUSE_MICROS.store(0, Ordering::Relaxed);
    let summary = runtime.block_on(rebuilding).unwrap().unwrap();
    assert_eq!(summary.records, 2 * LINES_IN, "{summary:?}");
    assert!(
        !(location.state_dir().join("rebuild-console-address")).exists(),
        "a rebuild that ended leaves no console address behind"
    );
}
