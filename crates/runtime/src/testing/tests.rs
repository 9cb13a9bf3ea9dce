//! The driver itself: what it runs, when, and that its checks can fail.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::context::EmitOptions;
use crate::handles::{Store, Topic};
use crate::timer::TimeDomain;
use crate::{App, Context, ProcessError, Processor, Record};

use super::{START_MS, TestDriver, TestError};

const IN: Topic<String, String> = Topic::new("in");
const OUT: Topic<String, String> = Topic::new("out");
const SEEN: Store<String, u64> = Store::new("seen");

/// Counts each key's records in a field: per task, lost with it.
#[derive(Default)]
struct InMemory(std::collections::HashMap<String, u64>);

impl Processor<String, String> for InMemory {
    fn process(
        &mut self,
        record: Record<String, String>,
        ctx: &mut Context,
    ) -> Result<(), ProcessError> {
        let n = self.0.entry(record.key.clone()).or_insert(0);
        *n += 1;
        ctx.emit(OUT, &record.key, &n.to_string())
    }
}

/// Emits each record's key with how many records of that key came so far,
/// counted in a store, or (`in_memory`) in the processor's field.
fn counting(in_memory: bool) -> App {
    let app = App::new("counting");
    if in_memory {
        return app
            .processor("count", InMemory::default)
            .input(IN)
            .output(OUT);
    }
    app.processor(
        "count",
        |record: Record<String, String>, ctx: &mut Context| {
            let n = ctx.get(SEEN, &record.key)?.unwrap_or(0) + 1;
            ctx.put(SEEN, &record.key, &n)?;
            ctx.emit(OUT, &record.key, &n.to_string())
        },
    )
    .input(IN)
    .store(SEEN)
    .output(OUT)
}

fn pipe_keys(driver: &mut TestDriver, count: usize) {
    for i in 0..count {
        driver.pipe(IN, &format!("k{}", i % 7), "v").unwrap();
    }
}

#[test]
fn a_crash_loses_what_a_processor_kept_outside_its_stores_and_the_replay_check_sees_it() {
    let mut driver = TestDriver::new(counting(true)).unwrap();
    driver.commit_every(200);
    pipe_keys(&mut driver, 1_000);
    assert!(driver.crash_after(500).unwrap(), "the crash cuts the run");
    driver.restart().unwrap();
    let mismatch = driver.replay_mismatch().unwrap();
    assert!(mismatch.is_some(), "counts kept in memory restart from 0");
}

#[test]
fn state_in_stores_survives_crashes_and_the_replay_check_agrees() {
    let mut driver = TestDriver::new(counting(false)).unwrap();
    driver.partitions(IN, 3).unwrap();
    driver.commit_every(50);
    pipe_keys(&mut driver, 1_000);
    assert!(driver.crash_after(500).unwrap());
    assert!(matches!(driver.process(), Err(TestError::Down)));
    let left = driver.output(OUT).unwrap().len();
    assert!(
        left < 1_000,
        "a read while down shows what the crash left ({left})"
    );
    let committed: u64 = driver.store(SEEN).unwrap().values().sum();
    assert!(
        committed > 0 && committed < 500,
        "commits before the crash point, none after it ({committed})"
    );
    driver.restart().unwrap();
    let seen = driver.store(SEEN).unwrap();
    assert_eq!(seen.values().sum::<u64>(), 1_000);
    assert_eq!(
        driver.output(OUT).unwrap().len(),
        1_000,
        "each record emitted once"
    );
    assert_eq!(driver.replay_mismatch().unwrap(), None);
}

#[test]
fn processing_time_timers_fire_only_when_the_clock_reaches_them() {
    let fired = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&fired);
    let app = App::new("timers")
        .processor(
            "remind",
            |record: Record<String, String>, ctx: &mut Context| {
                let due = ctx.timestamp() + 60_000;
                ctx.schedule(TimeDomain::ProcessingTime, due, record.key.as_bytes())
            },
        )
        .input(IN)
        .output(OUT)
        .on_timer(move |timer, ctx: &mut Context| {
            counter.fetch_add(1, Ordering::Relaxed);
            ctx.emit(OUT, timer.key_str()?, &timer.time_ms.to_string())
        });
    let mut driver = TestDriver::new(app).unwrap();
    assert_eq!(driver.now_ms(), START_MS);
    driver.pipe(IN, "a", "x").unwrap();
    driver.process().unwrap();
    driver.advance_time(Duration::from_secs(59)).unwrap();
    assert_eq!(fired.load(Ordering::Relaxed), 0, "not due yet");
    driver.advance_time(Duration::from_secs(1)).unwrap();
    assert_eq!(fired.load(Ordering::Relaxed), 1);
    let out = driver.output(OUT).unwrap();
    assert_eq!(
        out[0].value.as_deref(),
        Some(&*(START_MS + 60_000).to_string())
    );
}

#[test]
fn piped_timestamps_headers_and_partitions_reach_the_processor() {
    let app = App::new("echo")
        .processor(
            "echo",
            |record: Record<String, String>, ctx: &mut Context| {
                let header = record
                    .header("h")
                    .flatten()
                    .map(|h| String::from_utf8_lossy(h).into_owned());
                let seen = format!(
                    "{}@{}:{}",
                    record.partition,
                    record.timestamp,
                    header.unwrap_or_default()
                );
                ctx.emit(OUT, &record.key, &seen)
            },
        )
        .input(IN)
        .output(OUT);
    let mut driver = TestDriver::new(app).unwrap();
    driver.partitions(IN, 4).unwrap();
    let options = EmitOptions::default()
        .partition(3)
        .timestamp(42)
        .header("h", Some(b"hv"));
    driver.pipe_with(IN, "k", "v", options).unwrap();
    driver
        .pipe_keyless(IN, "v", EmitOptions::default())
        .unwrap();
    driver
        .pipe_keyless(IN, "v", EmitOptions::default())
        .unwrap();
    let mut seen: Vec<String> = (driver.output(OUT).unwrap().into_iter())
        .map(|r| r.value.unwrap())
        .collect();
    seen.sort();
    let start = START_MS.to_string();
    assert_eq!(
        seen,
        [
            "0@".to_string() + &start + ":",
            "1@".to_string() + &start + ":",
            "3@42:hv".into()
        ],
        "keyless: round robin from 0"
    );
}

#[test]
fn what_the_app_does_not_declare_is_refused_with_what_it_has() {
    let mut driver = TestDriver::new(counting(false)).unwrap();
    let error = driver.pipe(OUT, "k", "v").unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no input topic \"out\" (it has: in)"),
        "{error}"
    );
    let error = driver
        .store(Store::<String, u64>::new("other"))
        .unwrap_err();
    assert!(error.to_string().contains("no store \"other\""), "{error}");
    driver.pipe(IN, "k", "v").unwrap();
    driver.process().unwrap();
    let error = driver.partitions(IN, 2).unwrap_err();
    assert!(error.to_string().contains("has 1 partitions"), "{error}");
}

#[test]
fn partition_counts_and_partitions_out_of_range_are_refused() {
    let mut driver = TestDriver::new(counting(false)).unwrap();
    let error = driver.partitions(IN, 0).unwrap_err();
    assert!(
        matches!(error, TestError::PartitionCount { asked: 0, .. }),
        "{error}"
    );
    driver.partitions(IN, 2).unwrap();
    driver.partitions(IN, 3).unwrap();
    let options = EmitOptions::default().partition(3);
    let error = driver.pipe_with(IN, "k", "v", options).unwrap_err();
    let said = error.to_string();
    assert!(
        said.contains("partitions 0..3; there is no partition 3"),
        "{said}"
    );
    driver.pipe(IN, "k", "v").unwrap();
    let error = driver.partitions(IN, 4).unwrap_err();
    assert!(
        matches!(
            error,
            TestError::Partitions {
                has: 3,
                asked: 4,
                ..
            }
        ),
        "{error}"
    );
}

const RAW_ONE: Topic<Vec<u8>, Vec<u8>> = Topic::new("raw-one");
const RAW_TWO: Topic<Vec<u8>, Vec<u8>> = Topic::new("raw-two");

/// Describes each record's key and value as it came: `null`, or the bytes.
struct Describe;

impl crate::RawProcessor for Describe {
    fn process(
        &mut self,
        record: crate::RawRecord<'_>,
        ctx: &mut Context,
    ) -> Result<(), ProcessError> {
        let describe =
            |bytes: Option<&[u8]>| bytes.map_or("null".to_string(), |b| format!("{b:?}"));
        let seen = format!(
            "{} {} {} @{}",
            ctx.topic(),
            describe(record.key),
            describe(record.value),
            ctx.timestamp()
        );
        ctx.emit(OUT, "seen", &seen)
    }
}

/// Over one input and over two (a task merging its inputs by timestamp,
/// its prefetch reading keys ahead), null and empty told apart.
#[test]
fn a_raw_processor_gets_keys_and_values_as_the_log_holds_them() {
    let (one, two) = (RAW_ONE, RAW_TWO);
    for inputs in [vec![one], vec![one, two]] {
        let mut app = App::new("describe").processor("describe", || Describe);
        for input in &inputs {
            app = app.input(*input);
        }
        let mut driver = TestDriver::new(app.output(OUT)).unwrap();
        let second = *inputs.last().unwrap();
        let at = |ms| EmitOptions::default().timestamp(ms);
        driver
            .pipe_with(one, &vec![0xff, 0], &vec![1, 2], at(5))
            .unwrap();
        driver.pipe_tombstone(second, &vec![7], at(7)).unwrap();
        driver
            .pipe_with(one, &Vec::new(), &Vec::new(), at(6))
            .unwrap();
        driver.pipe_keyless(second, &vec![8], at(8)).unwrap();
        let seen: Vec<String> = (driver.output(OUT).unwrap().into_iter())
            .map(|r| r.value.unwrap())
            .collect();
        let second = second.name();
        let expected = match inputs.len() {
            // One input: in offset order.
            1 => [
                "raw-one [255, 0] [1, 2] @5".to_string(),
                format!("{second} [7] null @7"),
                "raw-one [] [] @6".to_string(),
                format!("{second} null [8] @8"),
            ],
            // Two: in timestamp order across them.
            _ => [
                "raw-one [255, 0] [1, 2] @5".to_string(),
                "raw-one [] [] @6".to_string(),
                format!("{second} [7] null @7"),
                format!("{second} null [8] @8"),
            ],
        };
        assert_eq!(seen, expected, "{} inputs", inputs.len());
    }
}
