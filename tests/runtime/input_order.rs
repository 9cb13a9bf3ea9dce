//! The order in which a task with two inputs processes their records:
//! over a backlog, the timestamp merge of both (ties to the input declared
//! first, out-of-order records at their place in their partition),
//! whatever the fetch size; live, a quiet input passed by at once by
//! default, and waited for up to `max_task_idle` when asked.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata::client::{ClientConfig, Cluster, Producer, ProducerConfig, ProducerRecord};
use strata::log::now_ms;
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{App, Context, Location, ProcessError, Record, RunOptions};

/// What the processor saw, in order: "<topic>:<value>".
type Seen = Arc<Mutex<Vec<String>>>;

fn app(name: &str, seen: &Seen) -> App {
    let seen = Arc::clone(seen);
    let record = move |r: Record<Vec<u8>, String>, ctx: &mut Context| -> Result<(), ProcessError> {
        let entry = format!("{}:{}", ctx.topic(), r.value);
        seen.lock().unwrap().push(entry);
        Ok(())
    };
    App::new(name)
        .processor("order", record)
        .input("left")
        .input("right")
}

/// Appends `values` stamped `base + offset_ms` to `topic` (one partition),
/// `per_batch` records a batch.
fn append(data: &Path, topic: &str, base: i64, records: &[(&str, i64)], per_batch: usize) {
    support::with_topic(data, topic, 1, &[], |topic| {
        for chunk in records.chunks(per_batch) {
            let mut builder = BatchBuilder::new(Compression::Zstd);
            for (value, at) in chunk {
                builder
                    .push(NewRecord::new(None, value.as_bytes(), base + at))
                    .unwrap();
            }
            topic.partitions[0]
                .append(&builder.build().unwrap())
                .unwrap();
        }
    });
}

fn seen(seen: &Seen) -> Vec<String> {
    seen.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_processed_in_timestamp_order_across_the_inputs() {
    let base = now_ms() - 60_000;
    let left = [
        ("l10", 10),
        ("l20a", 20),
        ("l20b", 20),
        ("l40", 40),
        ("l35", 35),
        ("l50", 50),
    ];
    let right = [("r5", 5), ("r20", 20), ("r30", 30), ("r45", 45)];
    // The heads compared in turn: a tie goes to `left` (declared first);
    // `l35`, stamped before `l40`, comes after it, then before `r45`.
    let expected = [
        "right:r5",
        "left:l10",
        "left:l20a",
        "left:l20b",
        "right:r20",
        "right:r30",
        "left:l40",
        "left:l35",
        "right:r45",
        "left:l50",
    ];
    for (per_batch, fetch_bytes) in [(1, 1024), (3, 1024), (6, 4 << 20)] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        append(&data, "left", base, &left, per_batch);
        append(&data, "right", base, &right, per_batch);
        let order = Seen::default();
        let app = app("order", &order).fetch_bytes(fetch_bytes);
        let options = RunOptions {
            until_end: true,
            ..RunOptions::default()
        };
        strata::runtime::ops::run(&app, &Location::embedded(&data, "order"), options)
            .await
            .unwrap();
        assert_eq!(seen(&order), expected, "{per_batch} records a batch");
    }
}

/// A running app serving the Kafka protocol over its log, and a producer.
struct Live {
    runtime: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    running: tokio::task::JoinHandle<()>,
    producer: Producer,
    _dir: tempfile::TempDir,
}

impl Live {
    /// Starts `app` on a log whose `left` and `right` are empty.
    fn start(app: App) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        append(&data, "left", 0, &[], 1);
        append(&data, "right", 0, &[], 1);
        let location = Location::embedded(&data, app.name());
        let serving = location.state_dir().join("serving");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = RunOptions {
            serve: Some("127.0.0.1:0".parse().unwrap()),
            ..RunOptions::default()
        };
        let running = runtime.spawn(async move {
            let stop = async {
                let _ = stopped.await;
            };
            let run = strata::runtime::ops::run_until(&app, &location, options, stop);
            run.await.unwrap();
        });
        support::wait_until("the app serving", Duration::from_secs(60), || {
            serving.exists()
        });
        let addr = std::fs::read_to_string(&serving).unwrap();
        let producer = runtime.block_on(async {
            let cluster = Cluster::connect(ClientConfig::new(addr.trim()))
                .await
                .unwrap();
            Producer::new(cluster, ProducerConfig::default())
                .await
                .unwrap()
        });
        Self {
            runtime,
            stop: Some(stop),
            running,
            producer,
            _dir: dir,
        }
    }

    /// Produces `value` to `topic` stamped `at`, acknowledged.
    fn produce(&self, topic: &str, value: &str, at: i64) {
        self.runtime.block_on(async {
            let mut record = ProducerRecord::new(topic, None, value.as_bytes());
            record.timestamp = Some(at);
            let delivery = self.producer.send(record).await.unwrap();
            delivery.await.unwrap();
        });
    }

    fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.runtime.block_on(&mut self.running).unwrap();
    }
}

#[test]
fn live_a_quiet_input_is_passed_by_at_once_by_default() {
    let order = Seen::default();
    let live = Live::start(app("quiet", &order));
    let now = now_ms();
    live.produce("left", "l1", now);
    live.produce("left", "l2", now + 1);
    support::wait_until("left processed", Duration::from_secs(60), || {
        seen(&order).len() == 2
    });
    // Earlier than both, but it comes after them: processed when it comes.
    live.produce("right", "r0", now - 1_000);
    support::wait_until("right processed", Duration::from_secs(60), || {
        seen(&order).len() == 3
    });
    assert_eq!(seen(&order), ["left:l1", "left:l2", "right:r0"]);
    live.stop();
}

#[test]
fn live_max_task_idle_holds_the_other_input_back_for_a_quiet_one() {
    let order = Seen::default();
    let app = app("idle", &order).max_task_idle(Duration::from_secs(30));
    let live = Live::start(app);
    let now = now_ms();
    live.produce("left", "l1", now);
    // `right` is caught up and quiet: `left` waits (for 30 s at most).
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(seen(&order), Vec::<String>::new(), "left waited for right");
    // `r1` lets `l1` go (it is later); `r1` itself then waits for `left`.
    live.produce("right", "r0", now - 1_000);
    live.produce("right", "r1", now + 1_000);
    support::wait_until("r0 and l1 processed", Duration::from_secs(60), || {
        seen(&order).len() == 2
    });
    assert_eq!(seen(&order), ["right:r0", "left:l1"], "in timestamp order");
    live.stop();
}

#[test]
fn live_an_input_quiet_for_max_task_idle_is_passed_by() {
    let order = Seen::default();
    let app = app("idle-over", &order).max_task_idle(Duration::from_millis(300));
    let live = Live::start(app);
    live.produce("left", "l1", now_ms());
    support::wait_until("left processed", Duration::from_secs(60), || {
        seen(&order).len() == 1
    });
    assert_eq!(seen(&order), ["left:l1"]);
    live.stop();
}
