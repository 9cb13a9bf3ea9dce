//! Error policies (`App::on_error`): a processor with a planted bug (it
//! fails on orders above 1000 cents, after writing its store and emitting)
//! and records whose value is not JSON at all.
//!
//! - Dead letters: every failing record, and only those, is in the
//!   dead-letter topic exactly once, unchanged, with headers saying where
//!   it was and why it failed, through crashes at many points; what the
//!   processor wrote for a failing record before its error is undone; the
//!   others are processed exactly once.
//! - Skip: the failing records are passed over, nothing else changes.
//! - The limit: one failure more than allowed per minute stops the task.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use strata::record::codec::Codec;
use strata::runtime::testing::TestDriver;
use strata::runtime::{
    App, AsyncProcessor, Context, OnError, ProcessError, Record, RecordHeader, Store, Topic,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Order {
    pub(super) cents: u64,
}

pub(super) const ORDERS: Topic<String, Order> =
    Topic::new("orders").codecs(Codec::Utf8, Codec::Json);
/// The same topic, written as text: what a broken producer sends.
pub(super) const ORDERS_TEXT: Topic<String, String> =
    Topic::new("orders").codecs(Codec::Utf8, Codec::Utf8);
pub(super) const TOTALS_OUT: Topic<String, u64> =
    Topic::new("totals").codecs(Codec::Utf8, Codec::Json);
pub(super) const TOTALS: Store<String, u64> = Store::new("totals");
const DEAD_LETTERS: Topic<String, Vec<u8>> =
    Topic::new("shop-total-dlq").codecs(Codec::Utf8, Codec::Raw);

/// Above this, `total` fails (after its writes: they must not stay).
const LIMIT_CENTS: u64 = 1000;

pub(super) fn total(order: Record<String, Order>, ctx: &mut Context) -> Result<(), ProcessError> {
    let sum = ctx.get(TOTALS, &order.key)?.unwrap_or(0) + order.value.cents;
    ctx.put(TOTALS, &order.key, &sum)?;
    ctx.emit(TOTALS_OUT, &order.key, &sum)?;
    if order.value.cents > LIMIT_CENTS {
        return Err(ProcessError::msg(format!(
            "{} cents is above the limit",
            order.value.cents
        )));
    }
    Ok(())
}

fn app(policy: OnError) -> App {
    App::new("shop")
        .processor("total", total)
        .input(ORDERS)
        .store(TOTALS)
        .output(TOTALS_OUT)
        .on_error(policy)
}

/// What is piped: (key, value text, fails how), in order.
fn orders() -> Vec<(String, String, Option<&'static str>)> {
    orders_of(400, 37)
}

/// `count` orders: one in 41 not JSON, one in `over_limit_every` above the
/// limit, the others JSON under it.
pub(super) fn orders_of(
    count: u64,
    over_limit_every: u64,
) -> Vec<(String, String, Option<&'static str>)> {
    (0..count)
        .map(|i| {
            let key = format!("customer-{}", i % 7);
            if i % 41 == 5 {
                (key, format!("not json {i}"), Some("decode"))
            } else if i % over_limit_every == 3 {
                (key, format!("{{\"cents\":{}}}", 5_000 + i), Some("process"))
            } else {
                (key, format!("{{\"cents\":{}}}", i % 50 * 10), None)
            }
        })
        .collect()
}

pub(super) fn pipe_all(driver: &mut TestDriver, orders: &[(String, String, Option<&str>)]) {
    for (key, value, _) in orders {
        driver.pipe(ORDERS_TEXT, key, value).unwrap();
    }
}

/// Per customer, the sum of the orders that do not fail.
fn expected_totals(orders: &[(String, String, Option<&str>)]) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for (key, value, fails) in orders {
        if fails.is_none() {
            let order: Order = serde_json::from_str(value).unwrap();
            *totals.entry(key.clone()).or_insert(0) += order.cents;
        }
    }
    totals
}

fn header<'a>(headers: &'a [RecordHeader], name: &str) -> &'a str {
    let (_, value) = (headers.iter().find(|(n, _)| n == name))
        .unwrap_or_else(|| panic!("no header {name} in {headers:?}"));
    std::str::from_utf8(value.as_deref().unwrap()).unwrap()
}

#[test]
fn failing_records_go_to_the_dead_letter_topic_once_each_through_crashes_and_the_rest_are_processed_once()
 {
    let mut driver = TestDriver::new(app(OnError::dead_letter())).unwrap();
    driver.partitions(ORDERS, 3).unwrap();
    // Commits every few records: crashes land between a failure and the
    // commit that holds its dead letter, and after it.
    driver.commit_every(9);
    let orders = orders();
    for (chunk, cut_at) in orders.chunks(100).zip([30, 55, 80, 45]) {
        pipe_all(&mut driver, chunk);
        assert!(
            driver.crash_after(cut_at).unwrap(),
            "the crash cuts the run"
        );
        driver.restart().unwrap();
    }

    // The others, each counted once.
    assert_eq!(driver.store(TOTALS).unwrap(), expected_totals(&orders));
    let good = orders.iter().filter(|o| o.2.is_none()).count();
    assert_eq!(driver.output(TOTALS_OUT).unwrap().len(), good);

    // Every failing record once, unchanged, with where it was and why.
    let letters = driver.output(DEAD_LETTERS).unwrap();
    let mut found: Vec<(String, String, String)> = (letters.iter())
        .map(|r| {
            let value = String::from_utf8(r.value.clone().unwrap()).unwrap();
            let kind = header(&r.headers, "strata.dlq.error.kind").to_string();
            (r.key.clone().unwrap(), value, kind)
        })
        .collect();
    found.sort();
    let mut wanted: Vec<(String, String, String)> = (orders.iter())
        .filter_map(|(k, v, fails)| fails.map(|kind| (k.clone(), v.clone(), kind.to_string())))
        .collect();
    wanted.sort();
    assert_eq!(found, wanted);
    let inputs = driver.output(ORDERS_TEXT).unwrap();
    for letter in &letters {
        let headers = &letter.headers;
        let (partition, offset) = (
            header(headers, "strata.dlq.partition")
                .parse::<i32>()
                .unwrap(),
            header(headers, "strata.dlq.offset").parse::<i64>().unwrap(),
        );
        let input = (inputs.iter())
            .find(|r| (r.partition, r.offset) == (partition, offset))
            .expect("the offset names an input record");
        assert_eq!(
            input.value.as_deref().map(str::as_bytes),
            letter.value.as_deref()
        );
        assert_eq!(input.timestamp, letter.timestamp);
        assert_eq!(header(headers, "strata.dlq.topic"), "orders");
        assert_eq!(
            letter.partition, partition,
            "a task's dead letters go to its partition"
        );
        assert_eq!(
            header(headers, "strata.dlq.timestamp"),
            input.timestamp.to_string()
        );
        assert_eq!(header(headers, "strata.dlq.app"), "shop");
        assert_eq!(header(headers, "strata.dlq.version"), "base");
        assert_eq!(header(headers, "strata.dlq.processor"), "total");
        let error = header(headers, "strata.dlq.error");
        match header(headers, "strata.dlq.error.kind") {
            "decode" => assert!(error.contains("value could not be decoded"), "{error}"),
            _ => assert!(error.contains("above the limit"), "{error}"),
        }
    }
    driver.assert_replay_matches();
}

#[test]
fn skipped_records_are_passed_over_and_nothing_else_changes() {
    let mut driver = TestDriver::new(app(OnError::skip())).unwrap();
    driver.partitions(ORDERS, 2).unwrap();
    driver.commit_every(13);
    let orders = orders();
    pipe_all(&mut driver, &orders);
    assert!(driver.crash_after(150).unwrap(), "the crash cuts the run");
    driver.restart().unwrap();
    assert_eq!(driver.store(TOTALS).unwrap(), expected_totals(&orders));
    let good = orders.iter().filter(|o| o.2.is_none()).count();
    assert_eq!(driver.output(TOTALS_OUT).unwrap().len(), good);
}

#[test]
fn one_failure_more_than_the_limit_allows_in_a_minute_stops_the_task() {
    let policy = OnError::dead_letter().at_most_per_minute(3);
    let mut driver = TestDriver::new(app(policy)).unwrap();
    driver.partitions(ORDERS, 1).unwrap();
    for i in 0..10 {
        driver
            .pipe(
                ORDERS_TEXT,
                "customer",
                &format!("{{\"cents\":{}}}", 2_000 + i),
            )
            .unwrap();
    }
    let error = driver.process().unwrap_err().to_string();
    assert!(
        error.contains("more than 3 records failed within a minute, the last orders/0 at offset 3"),
        "{error}"
    );
    assert!(error.contains("2003 cents is above the limit"), "{error}");
}

/// `total` as an async processor: `prepare` parses (and fails on what is
/// not JSON), `apply` adds (and fails above the limit, after its writes).
struct AsyncTotal;

impl AsyncProcessor<String, String> for AsyncTotal {
    type Prepared = u64;

    async fn prepare(&self, order: &Record<String, String>) -> Result<u64, ProcessError> {
        let order: Order = serde_json::from_str(&order.value)?;
        Ok(order.cents)
    }

    fn apply(
        &mut self,
        order: Record<String, String>,
        cents: u64,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let sum = ctx.get(TOTALS, &order.key)?.unwrap_or(0) + cents;
        ctx.put(TOTALS, &order.key, &sum)?;
        ctx.emit(TOTALS_OUT, &order.key, &sum)?;
        if cents > LIMIT_CENTS {
            return Err(ProcessError::msg(format!(
                "{cents} cents is above the limit"
            )));
        }
        Ok(())
    }
}

/// Records as (key, value) text, sorted.
type KeyValues = Vec<(String, String)>;

/// The failing orders' (key, value), sorted, and the letters' likewise.
fn failing_and_letters(
    driver: &mut TestDriver,
    orders: &[(String, String, Option<&str>)],
) -> (KeyValues, KeyValues) {
    let mut wanted: Vec<_> = (orders.iter())
        .filter(|o| o.2.is_some())
        .map(|(k, v, _)| (k.clone(), v.clone()))
        .collect();
    wanted.sort();
    (wanted, letters(driver))
}

/// The dead letters' (key, value) as text, sorted.
fn letters(driver: &mut TestDriver) -> KeyValues {
    let mut found: Vec<_> = (driver.output(DEAD_LETTERS).unwrap().into_iter())
        .map(|r| (r.key.unwrap(), String::from_utf8(r.value.unwrap()).unwrap()))
        .collect();
    found.sort();
    found
}

#[test]
fn an_async_processors_failures_are_diverted_one_by_one_and_the_records_after_them_are_applied() {
    let app = App::new("shop")
        .processor("total", || AsyncTotal)
        .input(ORDERS_TEXT)
        .store(TOTALS)
        .output(TOTALS_OUT)
        .on_error(OnError::dead_letter());
    let mut driver = TestDriver::new(app).unwrap();
    driver.partitions(ORDERS_TEXT, 2).unwrap();
    driver.commit_every(11);
    let orders = orders();
    pipe_all(&mut driver, &orders);
    assert!(driver.crash_after(170).unwrap(), "the crash cuts the run");
    driver.restart().unwrap();
    assert_eq!(driver.store(TOTALS).unwrap(), expected_totals(&orders));
    let (wanted, found) = failing_and_letters(&mut driver, &orders);
    assert_eq!(found, wanted, "each failing order once, and no other");
}

const RETURNS: Topic<String, String> = Topic::new("returns").codecs(Codec::Utf8, Codec::Utf8);

/// Orders add and returns subtract, both parsed as JSON cents.
fn net(order: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let cents = serde_json::from_str::<Order>(&order.value)?.cents;
    let sum = ctx.get(TOTALS, &order.key)?.unwrap_or(0);
    let sum = match ctx.topic() {
        "returns" => sum.saturating_sub(cents),
        _ => sum + cents,
    };
    ctx.put(TOTALS, &order.key, &sum)?;
    ctx.emit(TOTALS_OUT, &order.key, &sum)
}

#[test]
fn a_task_with_two_inputs_diverts_the_failures_of_each_and_processes_the_rest_once() {
    let app = App::new("shop")
        .processor("total", net)
        .input(ORDERS_TEXT)
        .input(RETURNS)
        .store(TOTALS)
        .output(TOTALS_OUT)
        .on_error(OnError::dead_letter());
    let mut driver = TestDriver::new(app).unwrap();
    driver.partitions(ORDERS_TEXT, 2).unwrap();
    driver.partitions(RETURNS, 2).unwrap();
    driver.commit_every(7);
    // Orders of 100 cents, returns of 10; one in 9 of each is not JSON.
    let mut failing = Vec::new();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..120u64 {
        let key = format!("customer-{}", i % 5);
        for (topic, cents) in [(ORDERS_TEXT, 100u64), (RETURNS, 10)] {
            let value = match i % 9 == 4 {
                true => format!("broken {i}"),
                false => format!("{{\"cents\":{cents}}}"),
            };
            if i % 9 == 4 {
                failing.push((key.clone(), value.clone()));
            } else {
                let total = expected.entry(key.clone()).or_insert(0);
                *total = match topic.name() {
                    "returns" => total.saturating_sub(cents),
                    _ => *total + cents,
                };
            }
            driver.pipe(topic, &key, &value).unwrap();
        }
    }
    assert!(driver.crash_after(130).unwrap(), "the crash cuts the run");
    driver.restart().unwrap();
    assert_eq!(driver.store(TOTALS).unwrap(), expected);
    failing.sort();
    assert_eq!(
        letters(&mut driver),
        failing,
        "each failing record once, and no other"
    );
}

/// Order `i` of the remote test, as `customer=cents` (the dead_letters
/// example's parser fails on a decimal point: one in 97).
fn order_line(i: u64) -> (String, u64, bool) {
    let customer = format!("customer-{}", i % 40);
    match i % 97 == 13 {
        true => (format!("{customer}={}.50", i % 100), 0, true),
        false => (format!("{customer}={}", i % 100 * 10), i % 100 * 10, false),
    }
}

/// Runs the dead_letters example with `args` to completion; its stdout.
fn orders_app(args: &[&str]) -> String {
    let output = std::process::Command::new(crate::support::example::example("dead_letters"))
        .env("STRATA_SESSION_TIMEOUT_MS", "1500")
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "dead_letters {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Remote, through Kafka transactions: the dead_letters example against
/// `strata serve`, SIGKILLed at several moments while it runs, then run to
/// the end. `dlq list` (read_committed) counts each failing order once,
/// and the totals count every other order once.
#[test]
fn remote_dead_letters_are_written_once_through_kills() {
    use crate::support::{self, process::strata};
    let dir = tempfile::tempdir().unwrap();
    // Groups as in crash.rs: a killed instance's tasks move 1.5 s after.
    let broker = support::server_process::start_configured(
        dir.path(),
        "group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 500\n",
    );
    let addr = broker.addr.clone();
    strata(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--bootstrap",
        &addr,
    ]);
    let state = dir.path().join("app");
    let location = [
        "--bootstrap",
        addr.as_str(),
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let orders: Vec<_> = (0..6_000).map(order_line).collect();
    let mut rng = support::Rng(support::rng::seed());
    for chunk in orders.chunks(1_500) {
        let lines: Vec<String> = chunk.iter().map(|o| o.0.clone()).collect();
        support::process::produce_keyed(&addr, "orders", &lines);
        let mut app = std::process::Command::new(support::example::example("dead_letters"))
            .env("STRATA_SESSION_TIMEOUT_MS", "1500")
            .args(location)
            .args(["run", "--commit-records", "50"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300 + rng.below(1_500)));
        app.kill().unwrap();
        app.wait().unwrap();
    }
    orders_app(&[&location[..], &["run", "--until-end"]].concat());

    let failing = orders.iter().filter(|o| o.2).count();
    let list = orders_app(&[&location[..], &["dlq", "list"]].concat());
    let row: Vec<&str> = (list.lines())
        .find(|l| l.starts_with("total"))
        .unwrap_or_else(|| panic!("no row for total in:\n{list}"))
        .split_whitespace()
        .collect();
    // PROCESSOR TOPIC LETTERS DECODE PROCESS WAITING NEWEST ERROR…
    assert_eq!(row[1], "orders-total-dlq", "{list}");
    assert_eq!(
        row[2],
        failing.to_string(),
        "each failing order once:\n{list}"
    );
    assert_eq!(row[4], failing.to_string(), "{list}");
    let show = orders_app(&[&location[..], &["dlq", "show", "--limit", "1"]].concat());
    assert!(show.contains("invalid digit found in string"), "{show}");
    // Remote, explain fetches each record: a total names its order, which
    // the log still holds. (An offset of an aborted transaction, which a
    // kill leaves, holds no record: the first committed one is taken.)
    let explained = (0..200)
        .find_map(|offset| {
            let output = std::process::Command::new(support::example::example("dead_letters"))
                .args(location)
                .args(["explain", "customer-totals", "0", &offset.to_string()])
                .output()
                .unwrap();
            output
                .status
                .success()
                .then(|| String::from_utf8(output.stdout).unwrap())
        })
        .expect("a committed total among the first 200 offsets");
    let lines: Vec<&str> = explained.lines().collect();
    assert_eq!(lines.len(), 4, "{explained}");
    assert!(
        lines[1].contains("made by total (orders, version base) from orders/0@"),
        "{explained}"
    );
    let key = |line: &str| {
        line.split("key: ")
            .nth(1)
            .unwrap()
            .split("  ")
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        key(lines[0]),
        key(lines[2]),
        "the total's order is its customer's: {explained}"
    );
    assert!(lines[2].starts_with("orders/0@"), "{explained}");
    let status = orders_app(&[&location[..], &["status"]].concat());
    let counted = format!("total: {failing} records failed and are in orders-total-dlq");
    assert!(status.contains(&counted), "{status}");

    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (line, cents, fails) in &orders {
        if !fails {
            let customer = line.split_once('=').unwrap().0;
            *expected.entry(customer.to_string()).or_insert(0) += cents;
        }
    }
    let dump = orders_app(&[&location[..], &["dump-state"]].concat());
    let totals: BTreeMap<String, u64> = (dump.lines())
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            (fields[1].to_string(), fields[2].parse().unwrap())
        })
        .collect();
    assert_eq!(totals, expected, "every other order counted once");
    drop(broker);
}
