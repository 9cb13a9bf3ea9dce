//! The processor runtime in embedded mode, in process: a pipeline through
//! a derived topic, resuming from committed offsets, explicit emit options,
//! processor errors (the run is not committed; the error names the record's
//! offset), misdeclared stores and outputs, `status` and `dump-state`, and
//! an async processor's lookups applied in order.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use strata::codec::Codec;
use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, AsyncProcessor, CommitInterval, Context, EmitOptions, Location, Output, ProcessError,
    Record, RunOptions, RuntimeError, Store,
};

/// Appends `values` (keyless) to `topic` partition `partition`, creating the
/// topic with `partitions` partitions if needed.
fn append(data: &Path, topic: &str, partitions: i32, partition: i32, values: &[&str]) {
    support::with_topic(data, topic, partitions, &[], |topic| {
        let batch = support::batch(values, now_ms());
        topic.partitions[partition as usize].append(&batch).unwrap();
    });
}

/// (key, value) of every record of a partition, as text.
fn records(data: &Path, topic: &str, partition: i32) -> Vec<(String, String)> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let partition = log.partition(topic, partition).unwrap();
    let text = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).unwrap();
    let out = support::read_all(&partition, 0)
        .into_iter()
        .map(|r| (text(r.key), text(r.value)))
        .collect();
    drop(partition);
    log.close().unwrap();
    out
}

fn until_end() -> RunOptions {
    RunOptions {
        until_end: true,
        ..RunOptions::default()
    }
}

const UPPER: Output<String, String> = Output::new("upper");
const TALLY: Store<String, u64> = Store::new("tally");

/// Upper-cases each line into `upper`, keyed by its first word.
fn upper(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let upper = line.value.to_uppercase();
    let key = upper.split_whitespace().next().unwrap_or("").to_string();
    ctx.emit(UPPER, &key, &upper)
}

/// Counts lines per key; fails on a line "boom".
fn tally(line: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let seen = ctx.get(TALLY, &line.key)?.unwrap_or(0) + 1;
    ctx.put(TALLY, &line.key, &seen)?;
    if line.value == "BOOM" {
        return Err(ProcessError::msg("refusing BOOM"));
    }
    Ok(())
}

fn pipeline() -> App {
    App::new("pipeline")
        .processor("upper", upper)
        .input("lines")
        .output(UPPER)
        .processor("tally", tally)
        .input("upper")
        .store(TALLY)
        // Every line its own run, so a failure leaves earlier runs committed.
        .commit_interval(CommitInterval {
            records: 1,
            ..CommitInterval::default()
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_runs_through_its_derived_topic_and_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "lines", 2, 0, &["a one", "b two", "a three"]);
    append(&data, "lines", 2, 1, &["c four"]);
    let app = pipeline();
    let location = Location::embedded(&data, app.name());
    let summary = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();
    // 4 lines through `upper`, 4 derived records through `tally`.
    assert_eq!(summary.records, 8);
    assert_eq!(summary.tasks, 4, "2 partitions of `lines` and 2 of `upper`");
    let dump = strata::runtime::ops::dump_state(&app, &location, None).unwrap();
    assert_eq!(dump, ["tally\tA\t2", "tally\tB\t1", "tally\tC\t1"]);

    // Only what is new is processed on the next run.
    append(&data, "lines", 2, 1, &["a five"]);
    let summary = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();
    assert_eq!(summary.records, 2);
    let dump = strata::runtime::ops::dump_state(&app, &location, Some("tally")).unwrap();
    assert_eq!(dump, ["tally\tA\t3", "tally\tB\t1", "tally\tC\t1"]);
    let upper: usize = (0..2).map(|p| records(&data, "upper", p).len()).sum();
    assert_eq!(upper, 5, "each line shipped once");

    let rows = strata::runtime::ops::status(&app, &location).await.unwrap();
    let lines: Vec<_> = rows.iter().filter(|r| r.topic == "lines").collect();
    assert_eq!(lines.len(), 2);
    for row in &rows {
        assert_eq!(row.lag(), Some(0), "{row:?}");
        assert_eq!(row.outbox_records, 0, "{row:?}");
    }
    assert_eq!(lines[1].offset, Some(2));
    assert_eq!(lines[1].end, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_error_leaves_its_run_uncommitted_and_names_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "lines", 1, 0, &["x 1", "x 2", "boom", "x 3"]);
    let app = pipeline();
    let location = Location::embedded(&data, app.name());
    let error = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap_err();
    let RuntimeError::Processor {
        processor,
        topic,
        partition,
        offset,
        error,
    } = &error
    else {
        panic!("not a processor error: {error}");
    };
    assert_eq!(
        (processor.as_str(), topic.as_str(), *partition),
        ("tally", "upper", 0)
    );
    assert_eq!(*offset, 2, "the third derived record");
    assert!(error.to_string().contains("refusing BOOM"), "{error}");
    // The two records before it were committed, the failing one was not:
    // BOOM's own tally write is gone with its run.
    let dump = strata::runtime::ops::dump_state(&app, &location, None).unwrap();
    assert_eq!(dump, ["tally\tX\t2"]);
    let rows = strata::runtime::ops::status(&app, &location).await.unwrap();
    let tally = rows.iter().find(|r| r.task == "tally/0").unwrap();
    assert_eq!(tally.offset, Some(2), "the failing record is next again");

    // Running again meets the same record and fails the same way.
    let again = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap_err();
    assert!(
        matches!(again, RuntimeError::Processor { offset: 2, .. }),
        "{again}"
    );
}

const ROUTED: Output<String, String> = Output::new("routed").partitions(3);

/// Emits with explicit partition, headers and timestamp, and without a key.
fn route(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let options = EmitOptions::default()
        .partition(2)
        .header("from", Some(ctx.topic().as_bytes()))
        .timestamp(42);
    ctx.emit_with(ROUTED, "k", &line.value, options)?;
    let keyless = format!("keyless {}", line.value);
    ctx.emit_keyless(ROUTED, &keyless, EmitOptions::default())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_options_place_and_stamp_records() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "in", 2, 1, &["hello"]);
    let app = App::new("route")
        .processor("route", route)
        .input("in")
        .output(ROUTED.codecs(Codec::Raw, Codec::Raw));
    let location = Location::embedded(&data, app.name());
    strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();

    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    assert_eq!(log.topic("routed").unwrap().partitions.len(), 3);
    let p2 = log.partition("routed", 2).unwrap();
    let bytes = p2.read(0, 1 << 20).unwrap().read_to_vec().unwrap();
    let batch = strata::record::RecordBatch::parse_and_verify(&bytes).unwrap();
    let routed = batch.records(1 << 20).unwrap();
    let record = routed.iter().next().unwrap().unwrap();
    assert_eq!(record.key, Some(&b"k"[..]));
    assert_eq!(record.value, Some(&b"hello"[..]));
    assert_eq!(record.timestamp, 42);
    let headers: Vec<_> = record
        .headers()
        .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(headers, [(b"from".to_vec(), Some(b"in".to_vec()))]);
    drop(p2);
    log.close().unwrap();
    // Keyless: the input's partition number (1), modulo 3.
    assert_eq!(
        records(&data, "routed", 1),
        [(String::new(), "keyless hello".to_string())]
    );
    assert!(records(&data, "routed", 0).is_empty());
}

/// Uses a store it did not declare, or one with other types, or emits
/// where it may not.
fn misuse(misuse: &str, ctx: &mut Context) -> Result<(), ProcessError> {
    const NOPE: Store<String, u64> = Store::new("nope");
    const COUNTS_AS_TEXT: Store<String, String> = Store::new("counts");
    const ELSEWHERE: Output<String, String> = Output::new("elsewhere");
    match misuse {
        "undeclared store" => ctx.put(NOPE, "k", &1),
        "wrong types" => ctx.get(COUNTS_AS_TEXT, "k").map(drop),
        _ => ctx.emit(ELSEWHERE, "k", "v"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misdeclared_stores_and_outputs_are_clear_errors() {
    for (misuse, expected) in [
        ("undeclared store", "no store \"nope\""),
        ("wrong types", "store \"counts\" holds"),
        ("undeclared output", "not one of its outputs"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        append(&data, "in", 1, 0, &["x"]);
        const COUNTS: Store<String, u64> = Store::new("counts");
        let app = App::new("misuse")
            .processor(
                "p",
                move |_: Record<Vec<u8>, Vec<u8>>, ctx: &mut Context| self::misuse(misuse, ctx),
            )
            .input("in")
            .store(COUNTS);
        let location = Location::embedded(&data, app.name());
        let error = strata::runtime::ops::run(&app, &location, until_end())
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{misuse}: {error}");
        assert!(error.contains("offset 0"), "{misuse}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_input_or_a_cycle_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let app = App::new("nothing")
        .processor("upper", upper)
        .input("absent")
        .output(UPPER);
    let location = Location::embedded(&data, app.name());
    let error = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("input topic \"absent\" does not exist"),
        "{error}"
    );

    const X: Output<String, String> = Output::new("x");
    const Y: Output<String, String> = Output::new("y");
    let cycle = App::new("cycle")
        .processor("a", upper)
        .input("x")
        .output(Y)
        .processor("b", upper)
        .input("y")
        .output(X);
    let error = strata::runtime::ops::run(&cycle, &Location::embedded(&data, "cycle"), until_end())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("cycle"), "{error}");
}

const ECHO: Output<String, String> = Output::new("echo");

/// Forwards each record's headers, as the context shows them, to `echo`.
fn echo(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    if ctx.headers() != line.headers.as_slice() {
        return Err(ProcessError::msg("the context and the record disagree"));
    }
    let mut options = EmitOptions::default();
    for (name, value) in ctx.headers().to_vec() {
        options = options.header(name, value.as_deref());
    }
    ctx.emit_keyless(ECHO, &line.value, options)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_shows_the_records_headers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let topic = log.create_topic("in", 1, BTreeMap::new()).unwrap();
    let headers = [
        strata::record::Header {
            key: b"trace",
            value: Some(b"t-1"),
        },
        strata::record::Header {
            key: b"empty",
            value: None,
        },
    ];
    let mut builder = BatchBuilder::new(Compression::None);
    builder
        .push(NewRecord {
            key: None,
            value: Some(b"hello"),
            timestamp: now_ms(),
            headers: &headers,
        })
        .unwrap();
    topic.partitions[0]
        .append(&builder.build().unwrap())
        .unwrap();
    drop(topic);
    log.close().unwrap();

    let app = App::new("echo")
        .processor("echo", echo)
        .input("in")
        .output(ECHO);
    let location = Location::embedded(&data, app.name());
    strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();

    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let partition = log.partition("echo", 0).unwrap();
    let bytes = partition.read(0, 1 << 20).unwrap().read_to_vec().unwrap();
    let batch = strata::record::RecordBatch::parse_and_verify(&bytes).unwrap();
    let records = batch.records(1 << 20).unwrap();
    let record = records.iter().next().unwrap().unwrap();
    let forwarded: Vec<_> = record
        .headers()
        .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(
        forwarded,
        [
            (b"trace".to_vec(), Some(b"t-1".to_vec())),
            (b"empty".to_vec(), None)
        ]
    );
    drop(partition);
    log.close().unwrap();
}

const LOOKED_UP: Output<String, String> = Output::new("looked-up").partitions(1);
const LOOKUPS: Store<String, u64> = Store::new("lookups");

/// Looks each line up in a slow service (a sleep, longer for earlier
/// lines, so lookups finish out of order), counts lookups applied, and
/// emits line → answer; fails the lookup of "unknown".
struct Lookup {
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl AsyncProcessor<Vec<u8>, String> for Lookup {
    type Prepared = String;

    fn concurrency(&self) -> usize {
        3
    }

    async fn prepare(&self, line: &Record<Vec<u8>, String>) -> Result<String, ProcessError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay_ms = 20 - (line.offset % 10) as u64 * 2;
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        match line.value.as_str() {
            "unknown" => Err(ProcessError::msg("no answer for unknown")),
            value => Ok(value.to_uppercase()),
        }
    }

    fn apply(
        &mut self,
        line: Record<Vec<u8>, String>,
        answer: String,
        ctx: &mut Context,
    ) -> Result<(), ProcessError> {
        let applied = ctx.get(LOOKUPS, "applied")?.unwrap_or(0) + 1;
        ctx.put(LOOKUPS, "applied", &applied)?;
        ctx.emit(LOOKED_UP, &line.value, &answer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_processor_applies_its_lookups_in_input_order_with_bounded_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let words: Vec<String> = (0..25).map(|n| format!("word-{n:02}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    append(&data, "words", 1, 0, &words);
    let most_in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::clone(&most_in_flight);
    let app = App::new("lookup")
        .processor("lookup", move || Lookup {
            in_flight: Arc::new(AtomicUsize::new(0)),
            most_in_flight: Arc::clone(&most),
        })
        .input("words")
        .store(LOOKUPS)
        .output(LOOKED_UP);
    let location = Location::embedded(&data, app.name());
    let summary = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();
    assert_eq!(summary.records, 25);
    let expected: Vec<(String, String)> = words
        .iter()
        .map(|w| (w.to_string(), w.to_uppercase()))
        .collect();
    assert_eq!(records(&data, "looked-up", 0), expected);
    assert_eq!(most_in_flight.load(Ordering::SeqCst), 3);
    let dump = strata::runtime::ops::dump_state(&app, &location, None).unwrap();
    assert_eq!(dump, ["lookups\tapplied\t25"]);

    // A failed lookup stops the task at its record; the run is not
    // committed, and nothing of it is emitted.
    append(&data, "words", 1, 0, &["late", "unknown"]);
    let error = strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::Processor { offset: 26, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("no answer for unknown"),
        "{error}"
    );
    assert_eq!(records(&data, "looked-up", 0).len(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_app_asked_for_changelogs_writes_each_commit_of_its_stores_there() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "lines", 2, 0, &["a one", "b two", "a three"]);
    append(&data, "lines", 2, 1, &["c four"]);
    let app = pipeline().changelogs(true);
    let location = Location::embedded(&data, app.name());
    strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();
    // The changelog's latest value per key is the committed state, and
    // every commit (one per line here) is in it, in order.
    let mut latest = BTreeMap::new();
    let mut counts: Vec<(String, String)> = Vec::new();
    for partition in 0..2 {
        for (key, value) in records(&data, "pipeline-tally-changelog", partition) {
            counts.push((key.clone(), value.clone()));
            latest.insert(key, value);
        }
    }
    let decoded: Vec<String> = latest
        .iter()
        .map(|(key, value)| {
            let count: u64 = Codec::Postcard.decode(value.as_bytes()).unwrap();
            format!("tally\t{key}\t{count}")
        })
        .collect();
    let dump = strata::runtime::ops::dump_state(&app, &location, None).unwrap();
    assert_eq!(decoded, dump);
    assert_eq!(
        counts.len(),
        4,
        "one record per commit of a key: {counts:?}"
    );
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let changelog = log.topic("pipeline-tally-changelog").unwrap();
    assert_eq!(changelog.partitions.len(), 2, "one partition per task");
    let cleanup = changelog.partitions[0].config().cleanup;
    assert!(cleanup.compact && !cleanup.delete, "compacted: {cleanup:?}");
    drop(changelog);
    log.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changelog_that_retention_would_delete_from_is_refused_saying_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "lines", 2, 0, &["a one"]);
    let app = pipeline().changelogs(true);
    for policy in ["delete", "compact,delete"] {
        // The app's own changelog, made by hand with retention on.
        let config = [("cleanup.policy", policy)];
        support::with_topic(&data, "pipeline-tally-changelog", 2, &config, |_| ());
        let location = Location::embedded(&data, app.name());
        let error = strata::runtime::ops::run(&app, &location, until_end())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("has cleanup.policy={policy}"))
                && error.contains("cleanup.policy=compact"),
            "{error}"
        );
        let log = LogManager::open(&data, LogConfig::default()).unwrap();
        log.delete_topic("pipeline-tally-changelog").unwrap();
        log.close().unwrap();
    }
}
