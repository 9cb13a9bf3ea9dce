//! Timers in a real app on the embedded log: event-time timers firing as
//! the stream time moves (right after the record that moved it, in time
//! then key order), processing-time timers firing while the input is idle,
//! a cancelled timer never firing, a restart neither losing nor repeating
//! a fire, a function processor's `.on_timer(f)`, the README's session
//! processor, the timer store's changelog, and the errors that say a timer
//! was not declared or not handled.

use crate::support;

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, CommitInterval, Context, Location, Output, ProcessError, Processor, Record, RunOptions,
    RuntimeError, Store, TimeDomain, Timer,
};

const FIRED: Output<String, String> = Output::new("fired");

/// What the tests' times count from: a minute before the tests started
/// (records from 1970 would be deleted by retention as soon as written).
static BASE_MS: LazyLock<i64> = LazyLock::new(|| now_ms() - 60_000);

/// Appends one batch of `values` (keyless) at `timestamp_ms` after
/// [`BASE_MS`].
fn append(data: &Path, values: &[&str], timestamp_ms: i64) {
    support::with_topic(data, "commands", 1, &[], |topic| {
        let batch = support::batch(values, *BASE_MS + timestamp_ms);
        topic.partitions[0].append(&batch).unwrap();
    });
}

/// The values of `fired`, in order.
fn fired(data: &Path) -> Vec<String> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let Ok(partition) = log.partition("fired", 0) else {
        log.close().unwrap();
        return Vec::new();
    };
    let text = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).unwrap();
    let out = support::read_all(&partition, 0)
        .into_iter()
        .map(|r| text(r.value))
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

/// Runs `app` for `how_long`, then stops it.
async fn run_for(app: &App, data: &Path, how_long: Duration) {
    let location = Location::embedded(data, app.name());
    let stop = tokio::time::sleep(how_long);
    strata::runtime::ops::run_until(app, &location, RunOptions::default(), stop)
        .await
        .unwrap();
}

async fn run_to_end(app: &App, data: &Path) -> Result<(), RuntimeError> {
    let location = Location::embedded(data, app.name());
    strata::runtime::ops::run(app, &location, until_end())
        .await
        .map(|_| ())
}

/// Obeys commands, one per record (its value):
/// `event <ms> <key>`, `cancel <ms> <key>` (event time),
/// `soon <ms from now> <key>` (processing time), `flicker <key>` (a
/// processing-time timer scheduled and cancelled at once) and `tick`
/// (nothing but its timestamp). Emits `seen <command>` for each, and
/// `<domain> <time> <key>` for each timer fired.
struct Commands;

impl Processor<Vec<u8>, String> for Commands {
    fn process(
        &mut self,
        record: Record<Vec<u8>, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let words: Vec<&str> = record.value.split_whitespace().collect();
        match words[..] {
            ["event", at, key] => {
                let at = *BASE_MS + at.parse::<i64>()?;
                ctx.schedule(TimeDomain::EventTime, at, key)?;
            }
            ["cancel", at, key] => {
                let at = *BASE_MS + at.parse::<i64>()?;
                ctx.cancel(TimeDomain::EventTime, at, key)?;
            }
            ["soon", after, key] => {
                let at = now_ms() + after.parse::<i64>()?;
                ctx.schedule(TimeDomain::ProcessingTime, at, key)?;
            }
            ["flicker", key] => {
                let at = now_ms() + 100;
                ctx.schedule(TimeDomain::ProcessingTime, at, key)?;
                ctx.cancel(TimeDomain::ProcessingTime, at, key)?;
            }
            ["tick"] => {}
            _ => return Err(ProcessError::msg(format!("no command {:?}", record.value))),
        }
        let seen = format!("seen {}", record.value);
        ctx.emit(FIRED, "seen", &seen)
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let key = timer.key_str()?.to_string();
        let domain = match timer.domain {
            TimeDomain::EventTime => "event",
            TimeDomain::ProcessingTime => "processing",
        };
        // An event-time timer fires at the stream time it waited for.
        if timer.domain == TimeDomain::EventTime {
            assert!(ctx.stream_time().is_some_and(|t| t >= timer.time_ms));
        }
        let value = match timer.domain {
            TimeDomain::EventTime => format!("{domain} {} {key}", timer.time_ms - *BASE_MS),
            TimeDomain::ProcessingTime => format!("{domain} {key}"),
        };
        ctx.emit(FIRED, &key, &value)
    }
}

fn commands_app() -> App {
    App::new("timers")
        .processor("commands", || Commands)
        .input("commands")
        .timers()
        .output(FIRED)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_time_timers_fire_in_order_right_after_the_record_that_reaches_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(
        &data,
        &["event 5000 a", "event 3000 b", "event 4000 c"],
        1_000,
    );
    append(
        &data,
        &["cancel 4000 c", "event 2500 d", "event 3000 a"],
        2_000,
    );
    append(&data, &["tick"], 3_500);
    append(&data, &["tick"], 2_000);
    append(&data, &["tick"], 6_000);
    run_to_end(&commands_app(), &data).await.unwrap();
    assert_eq!(
        fired(&data),
        [
            "seen event 5000 a",
            "seen event 3000 b",
            "seen event 4000 c",
            "seen cancel 4000 c",
            "seen event 2500 d",
            "seen event 3000 a",
            "seen tick",
            // Stream time 3500: time order, then key order.
            "event 2500 d",
            "event 3000 a",
            "event 3000 b",
            // An older record moves nothing.
            "seen tick",
            "seen tick",
            // c was cancelled.
            "event 5000 a",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processing_time_timers_fire_while_the_input_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, &["soon 300 x", "flicker y", "soon 600 z"], 0);
    run_for(&commands_app(), &data, Duration::from_millis(2_500)).await;
    assert_eq!(
        fired(&data),
        [
            "seen soon 300 x",
            "seen flicker y",
            "seen soon 600 z",
            "processing x",
            "processing z",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_neither_loses_nor_repeats_a_fire() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let app = commands_app().commit_interval(CommitInterval {
        records: 1,
        ..CommitInterval::default()
    });
    append(
        &data,
        &["event 2000 a", "event 3000 b", "soon 1500 p"],
        1_000,
    );
    append(&data, &["tick"], 2_500);
    run_to_end(&app, &data).await.unwrap();
    let event_timers = |values: Vec<String>| -> Vec<String> {
        values
            .into_iter()
            .filter(|v| v.starts_with("event"))
            .collect()
    };
    assert_eq!(event_timers(fired(&data)), ["event 2000 a"]);

    // The stream time (2500) came back with the state: a timer scheduled
    // by a late record for a time before it fires at once.
    append(&data, &["event 2400 late"], 1_500);
    run_to_end(&app, &data).await.unwrap();
    assert_eq!(
        event_timers(fired(&data)),
        ["event 2000 a", "event 2400 late"]
    );

    // The processing-time timer is due by the end of this run.
    run_for(&app, &data, Duration::from_millis(2_500)).await;
    append(&data, &["tick"], 3_000);
    run_to_end(&app, &data).await.unwrap();
    run_to_end(&app, &data).await.unwrap();
    let mut timers: Vec<String> = fired(&data)
        .into_iter()
        .filter(|v| !v.starts_with("seen"))
        .collect();
    timers.sort();
    assert_eq!(
        timers,
        [
            "event 2000 a",
            "event 2400 late",
            "event 3000 b",
            "processing p"
        ],
        "every timer fired once"
    );
    let seen = fired(&data)
        .iter()
        .filter(|v| v.starts_with("seen"))
        .count();
    assert_eq!(seen, 6, "each record processed once");
}

/// A function processor: remembers nothing, schedules a timer per record
/// 100 ms of event time later.
fn later(record: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    ctx.schedule(TimeDomain::EventTime, record.timestamp + 100, &record.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_processor_handles_its_timers_with_on_timer() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, &["one"], 1_000);
    append(&data, &["two"], 1_100);
    append(&data, &["three"], 1_250);
    let app = App::new("later")
        .processor("later", later)
        .input("commands")
        .on_timer(|timer, ctx| {
            let at = timer.time_ms - *BASE_MS;
            ctx.emit(FIRED, "k", &format!("{} {at}", timer.key_str()?))
        })
        .output(FIRED);
    run_to_end(&app, &data).await.unwrap();
    // "three" waits for a stream time of 1350.
    assert_eq!(fired(&data), ["one 1100", "two 1200"]);
    let location = Location::embedded(&data, app.name());
    let dump = strata::runtime::ops::dump_state(&app, &location, Some("later.timers")).unwrap();
    assert_eq!(
        dump,
        [
            format!(
                "later.timers\tevent time {} key \"three\"\t",
                *BASE_MS + 1350
            ),
            format!("later.timers\tstream time\t{}", *BASE_MS + 1250),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_not_declared_or_not_handled_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, &["event 1000 a"], 2_000);

    // Scheduling without `.timers()`.
    let app = App::new("undeclared")
        .processor("commands", || Commands)
        .input("commands")
        .output(FIRED);
    let error = run_to_end(&app, &data).await.unwrap_err().to_string();
    assert!(error.contains("add .timers()"), "{error}");

    // A function processor declaring timers nothing would handle.
    let app = App::new("unhandled")
        .processor("later", later)
        .input("commands")
        .timers();
    let error = run_to_end(&app, &data).await.unwrap_err().to_string();
    assert!(error.contains(".on_timer(f)"), "{error}");

    // A processor that does not implement on_timer: fails when one is due.
    struct Forgetful;
    impl Processor<Vec<u8>, String> for Forgetful {
        fn process(
            &mut self,
            record: Record<Vec<u8>, String>,
            ctx: &mut Context<'_>,
        ) -> Result<(), ProcessError> {
            ctx.schedule(TimeDomain::EventTime, record.timestamp, "k")
        }
    }
    let app = App::new("forgetful")
        .processor("forgetful", || Forgetful)
        .input("commands")
        .timers();
    let error = run_to_end(&app, &data).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Timer { .. }), "{error}");
    assert!(error.to_string().contains("implement on_timer"), "{error}");
}

const LAST_SEEN: Store<String, i64> = Store::new("last-seen");
const CLOSED: Output<String, String> = Output::new("sessions-closed");
const GAP_MS: i64 = 1_000;

/// The README's example: a session closes after `GAP_MS` of event time
/// without a click of its user.
struct Sessions;

impl Processor<String, String> for Sessions {
    fn process(
        &mut self,
        click: Record<String, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        if let Some(last) = ctx.get(LAST_SEEN, &click.key)? {
            ctx.cancel(TimeDomain::EventTime, last + GAP_MS, &click.key)?;
        }
        ctx.put(LAST_SEEN, &click.key, &click.timestamp)?;
        ctx.schedule(TimeDomain::EventTime, click.timestamp + GAP_MS, &click.key)
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let user = timer.key_str()?.to_string();
        ctx.delete(LAST_SEEN, &user)?;
        let since = timer.time_ms - GAP_MS - *BASE_MS;
        ctx.emit(CLOSED, &user, &format!("idle since {since}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closes_once_its_user_is_idle_for_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let click = |user: &str, at: i64| {
        support::with_topic(&data, "clicks", 1, &[], |topic| {
            let record = NewRecord::new(Some(user.as_bytes()), b"", *BASE_MS + at);
            let mut builder = BatchBuilder::new(Compression::None);
            builder.push(record).unwrap();
            let batch = builder.build().unwrap();
            topic.partitions[0].append(&batch).unwrap();
        });
    };
    click("ann", 0);
    click("bob", 100);
    click("ann", 900);
    click("bob", 1_200);
    click("ann", 2_500);
    click("carl", 5_000);
    let app = App::new("sessions")
        .processor("sessions", || Sessions)
        .input("clicks")
        .store(LAST_SEEN)
        .timers()
        .output(CLOSED);
    run_to_end(&app, &data).await.unwrap();
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let closed: Vec<String> = support::read_all(&log.partition("sessions-closed", 0).unwrap(), 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    log.close().unwrap();
    // Each click came within its user's gap but ann's at 2500: a record is
    // processed before the timers its timestamp makes due, so it goes on
    // her session (as it would arriving a little earlier). Stream time 2500
    // closes bob's (idle since 1200); 5000 closes ann's.
    assert_eq!(closed, ["idle since 1200", "idle since 2500"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_changelogs_the_timer_store_has_one_like_any_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    append(&data, &["event 5000 a", "event 3000 b"], 1_000);
    append(&data, &["tick"], 3_000);
    let app = commands_app().changelogs(true);
    run_to_end(&app, &data).await.unwrap();
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let changelog = log
        .partition("timers-commands.timers-changelog", 0)
        .unwrap();
    let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = support::read_all(&changelog, 0)
        .into_iter()
        .map(|r| (r.key.unwrap(), r.value))
        .collect();
    drop(changelog);
    log.close().unwrap();
    let fired_b = entries
        .iter()
        .any(|(key, value)| key.ends_with(b"b") && value.is_none());
    assert!(fired_b, "b's firing is a tombstone in the changelog");
    let stream_time = (*BASE_MS + 3_000).to_be_bytes().to_vec();
    assert!(
        entries.contains(&(vec![0xff], Some(stream_time))),
        "the stream time is in it too"
    );
}
