//! The processor runtime in embedded mode, in process: a pipeline through
//! a derived topic, resuming from committed offsets, explicit emit options,
//! processor errors (the run is not committed; the error names the record's
//! offset), misdeclared stores and outputs, `status` and `dump-state`.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, CommitInterval, Context, EmitOptions, Location, ProcessError, Processor, Record,
    RunOptions, RuntimeError, async_trait,
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

/// Upper-cases each line into `upper`, keyed by its first word.
#[derive(Clone)]
struct Upper;

#[async_trait]
impl Processor for Upper {
    type Key = Vec<u8>;
    type Value = String;

    async fn process(
        &mut self,
        line: Record<Vec<u8>, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let upper = line.value.to_uppercase();
        let key = upper.split_whitespace().next().unwrap_or("").to_string();
        ctx.emit("upper", &key, &upper)
    }
}

/// Counts lines per key; fails on a line "boom".
#[derive(Clone)]
struct Tally;

#[async_trait]
impl Processor for Tally {
    type Key = String;
    type Value = String;

    async fn process(
        &mut self,
        line: Record<String, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let mut tally = ctx.store::<String, u64>("tally");
        let seen = tally.get(&line.key)?.unwrap_or(0) + 1;
        tally.put(&line.key, &seen)?;
        if line.value == "BOOM" {
            return Err(ProcessError::msg("refusing BOOM"));
        }
        Ok(())
    }
}

fn pipeline() -> App {
    App::new("pipeline")
        .processor("upper", Upper)
        .input("lines")
        .output("upper")
        .processor("tally", Tally)
        .input("upper")
        .store::<String, u64>("tally")
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

/// Emits with explicit partition, headers and timestamp, and without a key.
#[derive(Clone)]
struct Route;

#[async_trait]
impl Processor for Route {
    type Key = Vec<u8>;
    type Value = String;

    async fn process(
        &mut self,
        line: Record<Vec<u8>, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let options = EmitOptions::default()
            .partition(2)
            .header("from", Some(ctx.topic().as_bytes()))
            .timestamp(42);
        ctx.emit_with("routed", Some("k"), &line.value, options)?;
        ctx.emit_with::<str, _>(
            "routed",
            None,
            &format!("keyless {}", line.value),
            EmitOptions::default(),
        )?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_options_place_and_stamp_records() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, "in", 2, 1, &["hello"]);
    let app = App::new("route")
        .processor("route", Route)
        .input("in")
        .output_with(
            "routed",
            Some(3),
            strata::codec::Codec::Raw,
            strata::codec::Codec::Raw,
        );
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
#[derive(Clone)]
struct Misuse(&'static str);

#[async_trait]
impl Processor for Misuse {
    type Key = Vec<u8>;
    type Value = Vec<u8>;

    async fn process(
        &mut self,
        _: Record<Vec<u8>, Vec<u8>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        match self.0 {
            "undeclared store" => ctx.store::<String, u64>("nope").put("k", &1).map(drop),
            "wrong types" => ctx.store::<String, String>("counts").get("k").map(drop),
            _ => ctx.emit("elsewhere", "k", "v"),
        }
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
        let app = App::new("misuse")
            .processor("p", Misuse(misuse))
            .input("in")
            .store::<String, u64>("counts");
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
        .processor("upper", Upper)
        .input("absent")
        .output("upper");
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

    let cycle = App::new("cycle")
        .processor("a", Upper)
        .input("x")
        .output("y")
        .processor("b", Upper)
        .input("y")
        .output("x");
    let error = strata::runtime::ops::run(&cycle, &Location::embedded(&data, "cycle"), until_end())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("cycle"), "{error}");
}

/// Forwards each record's headers, as the context shows them, to `echo`.
#[derive(Clone)]
struct Echo;

#[async_trait]
impl Processor for Echo {
    type Key = Vec<u8>;
    type Value = String;

    async fn process(
        &mut self,
        line: Record<Vec<u8>, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        if ctx.headers() != line.headers.as_slice() {
            return Err(ProcessError::msg("the context and the record disagree"));
        }
        let mut options = EmitOptions::default();
        for (name, value) in ctx.headers().to_vec() {
            options = options.header(name, value.as_deref());
        }
        ctx.emit_with::<str, _>("echo", None, &line.value, options)
    }
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
        .processor("echo", Echo)
        .input("in")
        .output("echo");
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
