//! A task hands a batch's records to its processor in runs when nothing
//! can be due between them, and one at a time otherwise (a timer store,
//! a record to divert). Both ways must be
//! the same to the processor: each record's position and headers in its
//! context, the runs cut where the commit interval falls, and a failure in
//! the middle of a run diverted as one met alone.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::{BatchBuilder, Compression, Header, NewRecord};
use strata::runtime::{
    App, CommitInterval, Context, EmitOptions, Location, OnError, Output, ProcessError, Record,
    RunOptions, RuntimeError, Store,
};

const SEEN: Output<String, String> = Output::new("seen");

/// Writes `batches` batches of `per_batch` records to `in`: keys "k<n % 7>",
/// values "v<n>" ("bad" for the records `failing` names), timestamps
/// rising by one from `start`, and a header on every third record.
fn write_input(data: &Path, start: i64, (batches, per_batch): (usize, usize), failing: &[usize]) {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let topic = log.create_topic("in", 1, BTreeMap::new()).unwrap();
    for batch in 0..batches {
        let mut builder = BatchBuilder::new(Compression::None);
        for at in 0..per_batch {
            let n = batch * per_batch + at;
            let value = match failing.contains(&n) {
                true => "bad".to_string(),
                false => format!("v{n}"),
            };
            let tag = format!("t{n}");
            let headers = [Header {
                key: b"tag",
                value: Some(tag.as_bytes()),
            }];
            let headers: &[Header] = if n.is_multiple_of(3) { &headers } else { &[] };
            let key = format!("k{}", n % 7);
            builder
                .push(NewRecord {
                    key: Some(key.as_bytes()),
                    value: Some(value.as_bytes()),
                    timestamp: start + n as i64,
                    headers,
                })
                .unwrap();
        }
        topic.partitions[0]
            .append(&builder.build().unwrap())
            .unwrap();
    }
    drop(topic);
    log.close().unwrap();
}

/// Records per key, in a store keyed like the input (whose entries the
/// task asks for ahead of their records, in runs as one at a time).
const SEEN_PER_KEY: Store<Vec<u8>, u64> = Store::new("seen-per-key");

/// Emits what the context shows of each record (its offset, timestamp
/// and headers) beside its value and how many records of its key came
/// before it; fails on "bad".
fn note(record: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    if record.value == "bad" {
        return Err(ProcessError::msg("a bad record"));
    }
    let before = ctx.get(SEEN_PER_KEY, &record.key)?.unwrap_or(0);
    ctx.put(SEEN_PER_KEY, &record.key, &(before + 1))?;
    if record.value != format!("v{}", ctx.offset()) {
        return Err(ProcessError::msg("the context is not at the record"));
    }
    let headers: Vec<String> = (ctx.headers().iter())
        .map(|(name, value)| {
            format!(
                "{name}={}",
                String::from_utf8_lossy(value.as_deref().unwrap_or_default())
            )
        })
        .collect();
    let seen = format!(
        "{} {} {} [{}] {before}",
        ctx.offset(),
        ctx.timestamp(),
        record.value,
        headers.join(",")
    );
    ctx.emit_keyless(SEEN, &seen, EmitOptions::default())
}

/// The app over `in`, committing every `records` records, failures
/// skipped; with `timers`, a timer store (which makes the task hand its
/// processor one record at a time).
fn app(name: &str, records: u64, timers: bool, calls: Arc<AtomicU64>) -> App {
    counted_app(name, records, timers, calls).on_error(OnError::skip())
}

/// [`app`] with the default policy: a failure stops the task.
fn failing_app(name: &str, records: u64, timers: bool) -> App {
    counted_app(name, records, timers, Arc::default())
}

/// [`failing_app`], counting the processor's calls in `calls`.
fn counted_app(name: &str, records: u64, timers: bool, calls: Arc<AtomicU64>) -> App {
    let commit = CommitInterval {
        records,
        bytes: 64 << 20,
        interval: Duration::from_secs(60),
    };
    let app = App::new(name)
        .processor("note", move |record, ctx: &mut Context| {
            calls.fetch_add(1, Ordering::Relaxed);
            note(record, ctx)
        })
        .input("in")
        .store(SEEN_PER_KEY)
        .output(SEEN)
        .commit_interval(commit);
    match timers {
        true => app.on_timer(|_, _| Ok(())),
        false => app,
    }
}

/// What the app emitted, in order.
fn seen(data: &Path) -> Vec<String> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let partition = log.partition("seen", 0).unwrap();
    let seen = (support::read_all(&partition, 0).into_iter())
        .map(|r| String::from_utf8(r.value.unwrap_or_default()).unwrap())
        .collect();
    drop(partition);
    log.close().unwrap();
    seen
}

async fn run(data: &Path, app: &App) -> u64 {
    let options = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    let location = Location::embedded(data, app.name());
    let summary = strata::runtime::ops::run(app, &location, options)
        .await
        .unwrap();
    summary.records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_in_runs_look_to_the_processor_as_records_one_at_a_time() {
    // Commit intervals that fall inside batches, at their ends, and past
    // the whole input; failures at a batch's start, inside it and last.
    let failing = [0, 41, 42, 99, 250, 299];
    for records in [1, 7, 50, 1_000] {
        let dir = tempfile::tempdir().unwrap();
        let (runs, single) = (dir.path().join("runs"), dir.path().join("single"));
        let start = now_ms();
        write_input(&runs, start, (6, 50), &failing);
        write_input(&single, start, (6, 50), &failing);
        let (calls, calls_single) = (Arc::<AtomicU64>::default(), Arc::<AtomicU64>::default());
        let processed = run(&runs, &app("runs", records, false, Arc::clone(&calls))).await;
        let app_single = app("single", records, true, Arc::clone(&calls_single));
        let processed_single = run(&single, &app_single).await;
        let (in_runs, one_at_a_time) = (seen(&runs), seen(&single));
        assert_eq!(
            in_runs.len(),
            300 - failing.len(),
            "commit every {records}: each record but the failing ones emitted once"
        );
        assert_eq!(
            in_runs, one_at_a_time,
            "commit every {records}: the same in runs as one at a time"
        );
        assert_eq!(
            (processed, processed_single),
            (300, 300),
            "commit every {records}"
        );
        // A failure sends the task back to the last commit and processes
        // the records since again: as many calls either way when runs end
        // where commits fall.
        assert_eq!(
            calls.load(Ordering::Relaxed),
            calls_single.load(Ordering::Relaxed),
            "commit every {records}: as many calls of the processor"
        );
        let mut per_key = [0u64; 7];
        for line in &in_runs {
            let offset: usize = line.split(' ').next().unwrap().parse().unwrap();
            let before: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert_eq!(
                before,
                per_key[offset % 7],
                "{line}: its key's records before it"
            );
            per_key[offset % 7] += 1;
            let tagged = offset.is_multiple_of(3);
            assert_eq!(line.contains(&format!("[tag=t{offset}]")), tagged, "{line}");
            assert!(line.contains(&format!(" v{offset} ")), "{line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ends_where_the_commit_interval_falls_so_a_failure_keeps_the_commits_before_it() {
    for timers in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        write_input(&data, now_ms(), (2, 50), &[41]);
        let app = failing_app("fails", 7, timers);
        let location = Location::embedded(&data, app.name());
        let options = RunOptions {
            until_end: true,
            ..RunOptions::default()
        };
        let error = (strata::runtime::ops::run(&app, &location, options).await).unwrap_err();
        assert!(
            matches!(error, RuntimeError::Processor { offset: 41, .. }),
            "{error}"
        );
        // Committed every 7 records: the last commit before the failure
        // was at offset 35.
        let rows = strata::runtime::ops::status(&app, &location).await.unwrap();
        let task = rows.iter().find(|r| r.task == "note/0").unwrap();
        assert_eq!(task.offset, Some(35), "timers {timers}");
    }
}
