//! An app's `/metrics` while it runs (`run --metrics`): each task family
//! has its HELP and TYPE, and moves when it should: records and bytes
//! consumed as input arrives, produced once derived records are appended,
//! commits and their time, processing time, end-to-end latency, lag back
//! to zero in records and in time once the task caught up, records the
//! processor dropped by their reason; and the key a
//! planted skew makes hot, read and written, in the metrics and in what
//! `status --keys` reads.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use strata::runtime::{App, Context, ProcessError, Record, RunOptions, Store, Topic};

const WORDS: Topic<String, String> = Topic::new("words");
const COUNTS: Topic<String, String> = Topic::new("counts");
const TALLY: Store<String, u64> = Store::new("tally");
const WAIT: Duration = Duration::from_secs(60);

/// Words the processor drops, counting them.
const UNWANTED: &str = "drop-me";
const UNWANTED_RECORDS: usize = 10;

fn count(word: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    if word.key == UNWANTED {
        ctx.dropped("unwanted");
        return Ok(());
    }
    let n = ctx.get(TALLY, &word.key)?.unwrap_or(0) + 1;
    ctx.put(TALLY, &word.key, &n)?;
    ctx.emit(COUNTS, &word.key, &n.to_string())
}

fn app() -> App {
    App::new("metered")
        .processor("count", count)
        .input(WORDS)
        .store(TALLY)
        .output(COUNTS)
}

/// One sample's value from a scrape, if the sample is there.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .map(|value| value.parse().unwrap())
}

#[test]
fn a_running_apps_task_metrics_move_as_it_reads_commits_and_ships() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let an_hour_ago = strata::log::now_ms() - 3_600_000;
    // One key of 101 carries half the records.
    let words: Vec<String> = (0..2_000)
        .map(|i| {
            if i % 2 == 0 {
                "hot".to_string()
            } else {
                format!("w{}", i % 100)
            }
        })
        .collect();
    let records: Vec<_> = (words.iter().map(String::as_str))
        .chain(std::iter::repeat_n(UNWANTED, UNWANTED_RECORDS))
        .map(|w| (w, Some(w), an_hour_ago))
        .collect();
    support::append_keyed(&data, "words", 1, &records);
    let metrics = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let location = strata::runtime::Location::embedded(&data, app().name());
    let options = RunOptions {
        metrics: Some(metrics),
        serve: Some("127.0.0.1:0".parse().unwrap()),
        ..RunOptions::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let location = location.clone();
        runtime.spawn(async move {
            let stop = async {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&app(), &location, options, stop).await
        })
    };
    let metrics = metrics.to_string();
    support::wait_until("the metrics endpoint", WAIT, || {
        std::net::TcpStream::connect(&metrics).is_ok()
    });
    let scrape = || {
        let (status, text) = support::http::get(&metrics, "/metrics");
        (status == 200).then_some(text)
    };
    let input = r#"{task="count/0",processor="count",topic="words",partition="0"}"#;
    let task = r#"{task="count/0",processor="count"}"#;
    let output = r#"{task="count/0",processor="count",topic="counts"}"#;
    let consumed = format!("strata_task_records_consumed_total{input}");
    let produced = format!("strata_task_records_produced_total{output}");
    let read = |name: &str| scrape().and_then(|text| sample(&text, name));
    support::wait_until("the task consumes its input", WAIT, || {
        read(&consumed) == Some(2_010.0)
    });
    support::wait_until("the task ships what it derived", WAIT, || {
        read(&produced) == Some(2_000.0)
    });
    let text = scrape().unwrap();
    let at_least = |name: &str, labels: &str, floor: f64| {
        let value = sample(&text, &format!("{name}{labels}"));
        assert!(
            value.is_some_and(|v| v >= floor),
            "{name}{labels} = {value:?}:\n{text}"
        );
    };
    at_least("strata_task_bytes_consumed_total", input, 1.0);
    let dropped =
        r#"strata_task_dropped_records_total{task="count/0",processor="count",reason="unwanted"}"#;
    assert_eq!(
        sample(&text, dropped),
        Some(UNWANTED_RECORDS as f64),
        "{text}"
    );
    at_least("strata_task_bytes_produced_total", output, 1.0);
    at_least("strata_task_commits_total", task, 1.0);
    at_least("strata_task_commit_latency_seconds_count", task, 1.0);
    at_least("strata_task_process_seconds_total", task, f64::MIN_POSITIVE);
    // The input was stamped an hour ago: the derived records' age says so.
    at_least("strata_task_end_to_end_latency_seconds_sum", task, 3_000.0);
    assert_eq!(
        sample(&text, &format!("strata_task_records_lag{input}")),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("strata_task_lag_seconds{input}")),
        Some(0.0),
        "{text}"
    );
    // The planted key is the hottest, about half of what was read.
    let hot = r#"strata_task_hot_key_records{task="count/0",processor="count",key="hot"}"#;
    let hot_records = sample(&text, hot);
    assert!(
        hot_records.is_some_and(|n| (800.0..=1_200.0).contains(&n)),
        "{hot} = {hot_records:?}:\n{text}"
    );
    // The key the processor writes most to its store: the same one.
    let written = r#"strata_task_hot_written_key_records{task="count/0",processor="count",store="tally",key="hot"}"#;
    let written_records = sample(&text, written);
    assert!(
        written_records.is_some_and(|n| (600.0..=1_400.0).contains(&n)),
        "{written} = {written_records:?}:\n{text}"
    );
    // `status --keys` reads what the instance publishes in its state
    // directory.
    let board = location.state_dir().join("tasks.json");
    support::wait_until("the board lists the hot keys", WAIT, || {
        let text = std::fs::read_to_string(&board).unwrap_or_default();
        let board: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        board["hot_keys"]["count/0"][0]["key"] == "hot"
    });
    for line in text
        .lines()
        .filter(|l| l.starts_with("# TYPE strata_task_"))
    {
        let family = line.split(' ').nth(2).unwrap();
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has no HELP"
        );
    }

    // More input, more consumed and produced.
    let kafka: SocketAddr = location.serving_addr().expect("the app serves the log");
    runtime.block_on(crate::query::produce(kafka, "w1"));
    support::wait_until("the new record counted", WAIT, || {
        read(&consumed) == Some(2_011.0) && read(&produced) == Some(2_001.0)
    });
    stop.send(()).unwrap();
    runtime.block_on(running).unwrap().unwrap();
}
