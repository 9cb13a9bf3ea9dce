//! End-to-end latency through an app (`make bench-latency`): from a
//! producer's send of an input record to the derived record being readable
//! by a consumer, beside the floor (the same consumer reading the input
//! topic itself), on one stream, in one run.
//!
//! The app keeps a count per key in RocksDB and emits each input record's
//! value to a derived topic, exactly once (derived records are appended
//! after the commit that made them, so the commit interval, 100 ms by
//! default, bounds what a record waits). Each value carries the phase it
//! belongs to and the microsecond it was sent; both consumers read every
//! record and take now less that instant.
//!
//! Four cases, each on a fresh log and state:
//! - embedded: the app runs on its own embedded log and serves it over the
//!   Kafka protocol (`run --serve`); the producer and consumers use it;
//! - remote: a strata broker in this process, the app a remote instance of
//!   it (transactions; the derived consumer reads `read_committed`);
//! - each with the producer's acks=1 and acks=all (on strata: fsynced);
//! - and each with acks=all and a commit interval of 10 ms: what a shorter
//!   interval buys (and costs in throughput).
//!
//! Per case: first a burst of [`BURST`] records as fast as the producer
//! sends them, timed until the last derived record is read: the maximum
//! rate. Then [`PACED_SECONDS`] seconds at half that rate, sent each
//! millisecond, whose latencies are recorded (an HdrHistogram, µs): p50,
//! p99 and p99.9 of the floor and of the app, and the app's less the
//! floor's (the runtime's share: fetch, process, commit, ship).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use comfy_table::Table;
use hdrhistogram::Histogram;
use strata::client::{
    Acks, Admin, ClientConfig, Cluster, Consumer, ConsumerConfig, OffsetReset, Producer,
    ProducerConfig, ProducerRecord,
};
use strata::runtime::{
    App, CommitInterval, Context, Location, ProcessError, Record, RunOptions, Store, Topic,
};

const INPUT: Topic<Vec<u8>, Vec<u8>> = Topic::new("input");
const OUTPUT: Topic<Vec<u8>, Vec<u8>> = Topic::new("output");
const COUNTS: Store<Vec<u8>, u64> = Store::new("counts");
/// Records of the burst that measures the maximum rate.
const BURST: u64 = 200_000;
/// How long the paced phase sends.
const PACED_SECONDS: u64 = 10;
/// Distinct keys.
const KEYS: u64 = 10_000;
/// Bytes of each value: the phase, the send instant, padding.
const VALUE_BYTES: usize = 100;
/// How long a consumer waits for what it expects before the case fails.
const PATIENCE: Duration = Duration::from_secs(120);

const BURST_PHASE: u8 = 1;
const PACED_PHASE: u8 = 2;

/// Counts each key, and emits the value as it came (with its send
/// instant) to `output`.
fn count_and_forward(
    record: Record<Vec<u8>, Vec<u8>>,
    ctx: &mut Context,
) -> Result<(), ProcessError> {
    let n = ctx.get(COUNTS, &record.key)?.unwrap_or(0) + 1;
    ctx.put(COUNTS, &record.key, &n)?;
    ctx.emit(OUTPUT, &record.key, &record.value)
}

/// The app, committing every `commit` (or 100,000 records, or 16 MiB).
fn app(commit: Duration) -> App {
    App::new("latency")
        .processor("forward", count_and_forward)
        .input(INPUT)
        .store(COUNTS)
        .output(OUTPUT)
        .commit_interval(CommitInterval {
            interval: commit,
            ..CommitInterval::default()
        })
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn value(phase: u8) -> Bytes {
    let mut value = vec![0u8; VALUE_BYTES];
    value[0] = phase;
    value[1..9].copy_from_slice(&now_micros().to_be_bytes());
    Bytes::from(value)
}

/// The phase and send instant a value carries.
fn stamp(value: &[u8]) -> Option<(u8, u64)> {
    let instant = value.get(1..9)?.try_into().ok()?;
    Some((value[0], u64::from_be_bytes(instant)))
}

#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    remote: bool,
    acks: Acks,
    /// The app's commit interval.
    commit: Duration,
}

/// What one case measured.
struct Measured {
    max_rate: f64,
    paced_rate: f64,
    floor: Histogram<u64>,
    app: Histogram<u64>,
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let runtime = tokio::runtime::Runtime::new()?;
    let default = CommitInterval::default().interval;
    let short = Duration::from_millis(10);
    let cases = [
        ("embedded, acks=1", false, Acks::Leader, default),
        ("embedded, acks=all", false, Acks::All, default),
        ("remote, acks=1", true, Acks::Leader, default),
        ("remote, acks=all", true, Acks::All, default),
        ("embedded, acks=all, commit 10 ms", false, Acks::All, short),
        ("remote, acks=all, commit 10 ms", true, Acks::All, short),
    ]
    .map(|(name, remote, acks, commit)| Case {
        name,
        remote,
        acks,
        commit,
    });
    let mut rows = Vec::new();
    // STRATA_BENCH_LATENCY_CASES=remote: only the cases whose name holds it.
    let only = std::env::var("STRATA_BENCH_LATENCY_CASES").unwrap_or_default();
    for case in cases.into_iter().filter(|c| c.name.contains(&only)) {
        eprintln!("{}…", case.name);
        let measured = runtime.block_on(run_case(case))?;
        rows.push((case, measured));
    }
    let mut table = Table::new();
    table.load_style(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header([
        "case",
        "max records/s",
        "paced at",
        "floor p50 / p99 / p99.9 (ms)",
        "app p50 / p99 / p99.9 (ms)",
        "app − floor p50 (ms)",
        "samples",
    ]);
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    let quantiles = |h: &Histogram<u64>| {
        format!(
            "{:.2} / {:.2} / {:.2}",
            ms(h, 0.5),
            ms(h, 0.99),
            ms(h, 0.999)
        )
    };
    for (case, m) in &rows {
        table.add_row([
            case.name.to_string(),
            format!("{:.0}", m.max_rate),
            format!("{:.0}", m.paced_rate),
            quantiles(&m.floor),
            quantiles(&m.app),
            format!("{:.2}", ms(&m.app, 0.5) - ms(&m.floor, 0.5)),
            m.app.len().to_string(),
        ]);
    }
    println!(
        "\nEnd-to-end latency, send to readable: the floor is the input topic read back, the app its derived topic (commit interval 100 ms, the default, unless named)\n\n{table}"
    );
    Ok(())
}

/// One case on a fresh directory: the app and, remote, its broker.
async fn run_case(case: Case) -> Result<Measured> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let broker_stop;
    let (location, options, bootstrap) = if case.remote {
        let log = Arc::new(strata::log::LogManager::open(&data, Default::default())?);
        let config = strata::broker::BrokerConfig {
            listen: "127.0.0.1:0".parse()?,
            ..Default::default()
        };
        let broker = strata::broker::Broker::bind(config, log).await?;
        let addr = broker.local_addr().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(broker.serve(async {
            let _ = stopped.await;
        }));
        broker_stop = Some(stop);
        let cluster = Cluster::connect(ClientConfig::new(&addr)).await?;
        Admin::new(cluster).create_topic("input", 1, &[]).await?;
        let location = Location::remote(&addr, &dir.path().join("state"));
        (location, RunOptions::default(), Some(addr))
    } else {
        broker_stop = None;
        strata::log::LogManager::open(&data, Default::default())?.create_topic(
            "input",
            1,
            Default::default(),
        )?;
        let options = RunOptions {
            serve: Some("127.0.0.1:0".parse()?),
            ..RunOptions::default()
        };
        (Location::embedded(&data, "latency"), options, None)
    };
    let (stop_app, app_stopped) = tokio::sync::oneshot::channel::<()>();
    let commit = case.commit;
    let running = {
        let location = location.clone();
        tokio::spawn(async move {
            let stop = async {
                let _ = app_stopped.await;
            };
            strata::runtime::ops::run_until(&app(commit), &location, options, stop).await
        })
    };
    let bootstrap = match bootstrap {
        Some(addr) => addr,
        None => serving_addr(&location).await?,
    };
    let measured = measure(case, &bootstrap).await;
    let _ = stop_app.send(());
    running.await??;
    if let Some(stop) = broker_stop {
        let _ = stop.send(());
    }
    measured
}

/// The address an embedded app serves its log on, once it does.
async fn serving_addr(location: &Location) -> Result<String> {
    let started = Instant::now();
    loop {
        if let Some(addr) = location.serving_addr() {
            return Ok(addr.to_string());
        }
        if started.elapsed() > PATIENCE {
            bail!("the app did not serve its log");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The burst, then the paced phase with both consumers reading.
async fn measure(case: Case, bootstrap: &str) -> Result<Measured> {
    let cluster = Cluster::connect(ClientConfig::new(bootstrap)).await?;
    let producer = Producer::new(
        Arc::clone(&cluster),
        ProducerConfig {
            acks: case.acks,
            // Kafka's rule: idempotence needs acks=all.
            idempotent: matches!(case.acks, Acks::All),
            linger: Duration::from_millis(1),
            ..ProducerConfig::default()
        },
    )
    .await?;
    // The app makes its derived topic as it starts.
    let admin = Admin::new(Arc::clone(&cluster));
    let started = Instant::now();
    while !admin.list_topics().await?.iter().any(|t| t == "output") {
        if started.elapsed() > PATIENCE {
            bail!("the app did not make its derived topic");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Each client on connections of its own, as separate processes would
    // be: a long-polling fetch must not hold a produce up behind it.
    let floor = reader(bootstrap, "input", false).await?;
    let app = reader(bootstrap, "output", case.remote).await?;
    let topic: Arc<str> = Arc::from("input");

    // The burst: as fast as it goes, until the app's last record is read
    // (the floor's reader reads it too, to be at its end after).
    let started = Instant::now();
    let app_reading = tokio::spawn(read(app, BURST_PHASE, BURST));
    let floor_reading = tokio::spawn(read(floor, BURST_PHASE, BURST));
    send(&producer, &topic, BURST, None).await?;
    let (app, _) = app_reading.await??;
    let max_rate = BURST as f64 / started.elapsed().as_secs_f64();
    let (floor, _) = floor_reading.await??;

    // Paced at half that (or STRATA_BENCH_LATENCY_FRACTION of it), both
    // topics read as it goes.
    let fraction = std::env::var("STRATA_BENCH_LATENCY_FRACTION")
        .ok()
        .and_then(|f| f.parse::<f64>().ok())
        .unwrap_or(0.5);
    let paced_rate = max_rate * fraction;
    let records = (paced_rate * PACED_SECONDS as f64) as u64;
    let floor_reading = tokio::spawn(read(floor, PACED_PHASE, records));
    let app_reading = tokio::spawn(read(app, PACED_PHASE, records));
    let sending = Instant::now();
    send(&producer, &topic, records, Some(paced_rate)).await?;
    let sent_in = sending.elapsed().as_secs_f64();
    eprintln!("  paced: {records} records sent in {sent_in:.1} s");
    let (_, floor) = floor_reading.await??;
    let (_, app) = app_reading.await??;
    producer.close().await;
    Ok(Measured {
        max_rate,
        paced_rate,
        floor,
        app,
    })
}

/// A consumer of partition 0 of `topic` from its start.
async fn reader(bootstrap: &str, topic: &str, read_committed: bool) -> Result<Consumer> {
    let cluster = Cluster::connect(ClientConfig::new(bootstrap)).await?;
    let mut consumer = Consumer::new(
        cluster,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            read_committed,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign(&[(topic.to_string(), 0)]);
    Ok(consumer)
}

/// Sends `records` records of the phase the rate says (`None`: the burst,
/// as fast as the producer takes them; else that many per second, a
/// millisecond's share at a time), then waits for every answer.
async fn send(
    producer: &Producer,
    topic: &Arc<str>,
    records: u64,
    rate: Option<f64>,
) -> Result<()> {
    let phase = if rate.is_some() {
        PACED_PHASE
    } else {
        BURST_PHASE
    };
    let mut deliveries = Vec::with_capacity(records as usize);
    let mut ticks = tokio::time::interval(Duration::from_millis(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let started = Instant::now();
    let mut sent = 0;
    while sent < records {
        // Each millisecond, what is due by now (all of it, for the burst).
        let due = match rate {
            Some(rate) => {
                ticks.tick().await;
                ((started.elapsed().as_secs_f64() * rate) as u64).min(records)
            }
            None => records,
        };
        while sent < due {
            let key = format!("key-{}", sent % KEYS);
            let record = ProducerRecord {
                topic: Arc::clone(topic),
                partition: Some(0),
                key: Some(Bytes::from(key)),
                value: Some(value(phase)),
                ..ProducerRecord::new("input", None, b"")
            };
            deliveries.push(producer.send(record).await?);
            sent += 1;
        }
    }
    for delivery in deliveries {
        delivery.await.context("a send was refused")?;
    }
    Ok(())
}

/// Reads until `expected` records of `phase` came, recording each one's
/// latency (µs); the consumer and the histogram.
async fn read(
    mut consumer: Consumer,
    phase: u8,
    expected: u64,
) -> Result<(Consumer, Histogram<u64>)> {
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut seen = 0;
    let started = Instant::now();
    while seen < expected {
        if started.elapsed() > PATIENCE {
            bail!("read {seen} of {expected} records of phase {phase} in time");
        }
        for record in consumer.poll(Duration::from_millis(100)).await? {
            let arrived = now_micros();
            let Some((of, sent)) = record.value.as_deref().and_then(stamp) else {
                continue;
            };
            if of == phase {
                latencies.saturating_record(arrived.saturating_sub(sent).max(1));
                seen += 1;
            }
        }
    }
    Ok((consumer, latencies))
}
