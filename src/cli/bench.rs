//! `strata bench produce|consume`: throughput and latency of the client
//! against a broker, like Kafka's perf-test tools, with a progress bar on
//! a terminal (indicatif; plain lines every few seconds otherwise), and
//! latency percentiles from an HdrHistogram.
//!
//! produce: records of `--record-size` bytes from memory, latency measured
//! per record from `send` to its acknowledgement. consume: the pull loop —
//! multi-partition fetches of whole batches, every record iterated in
//! place — from the earliest offset to the ends at start; latency is per
//! fetch round trip.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Subcommand;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use super::produce::{AcksArg, CompressionArg};
use super::{BrokerArgs, Format, print_json};
use crate::client::{
    Admin, ClientError, EARLIEST, FetchOptions, Fetcher, LATEST, Producer, ProducerConfig,
    ProducerRecord,
};

/// Deliveries awaited at most at once (bounds the producer's queue).
const PENDING_MAX: usize = 200_000;
/// Deliveries handed to the waiting task at a time.
const CHUNK: usize = 1024;
/// Records sent per reading of the clock.
const CLOCK_EVERY: u64 = 32;
/// Most bytes one fetched batch may decompress to.
const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;
/// Significant digits the latency histogram keeps: a percentile is off by
/// at most 0.1%.
const LATENCY_DIGITS: u8 = 3;
/// The longest latency the histogram tells apart (an hour, in µs); longer
/// ones count as this.
const LATENCY_US_MAX: u64 = 3_600_000_000;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Produce records and report records/s, MB/s and latency.
    Produce {
        #[arg(long, default_value = "strata-bench")]
        topic: String,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 100)]
        record_size: usize,
        /// Partitions, when the topic has to be created.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, value_enum, default_value = "1")]
        acks: AcksArg,
        #[arg(long, value_enum, default_value = "none")]
        compression: CompressionArg,
        /// Send records with sequence numbers (acks=all only).
        #[arg(long)]
        idempotent: bool,
        /// A batch is sent at this many bytes…
        #[arg(long, default_value_t = 1 << 20)]
        batch_bytes: usize,
        /// …or after this long.
        #[arg(long, default_value_t = 5)]
        linger_ms: u64,
        /// Requests in flight per broker (and batches per partition).
        #[arg(long, default_value_t = 5)]
        max_in_flight: usize,
        /// Send inside transactions, committing one every this many ms
        /// (a transactional producer: idempotent, acks=all).
        #[arg(long)]
        transaction_ms: Option<u64>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Read a topic from its earliest offset to its end (or `--records`)
    /// and report records/s, MB/s and fetch latency.
    Consume {
        #[arg(long, default_value = "strata-bench")]
        topic: String,
        /// Stop after this many records (default: the ends at start).
        #[arg(long)]
        records: Option<u64>,
        /// Bytes fetched per partition per request.
        #[arg(long, default_value_t = 4 << 20)]
        fetch_bytes: i32,
        /// Read as Kafka's isolation.level=read_committed does.
        #[arg(long)]
        read_committed: bool,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

/// Counters the progress display reads while a run goes on.
struct Progress {
    records: AtomicU64,
    bytes: AtomicU64,
}

/// What a run measured.
struct Outcome {
    records: u64,
    bytes: u64,
    elapsed: Duration,
    /// Per record (produce) or fetch (consume), in microseconds.
    latencies_us: Histogram<u64>,
}

pub async fn run(broker: &BrokerArgs, command: BenchCommand) -> anyhow::Result<()> {
    let cluster = broker.connect().await?;
    match command {
        BenchCommand::Produce {
            topic,
            records,
            record_size,
            partitions,
            acks,
            compression,
            idempotent,
            batch_bytes,
            linger_ms,
            max_in_flight,
            transaction_ms,
            format,
        } => {
            if cluster.topic(&topic).await.is_err() {
                Admin::new(Arc::clone(&cluster))
                    .create_topic(&topic, partitions, &[])
                    .await
                    .map_err(|e| anyhow::anyhow!("creating {topic}: {e}"))?;
            }
            let transactional = transaction_ms.is_some();
            let producer = Producer::new(
                Arc::clone(&cluster),
                ProducerConfig {
                    acks: if transactional {
                        crate::client::Acks::All
                    } else {
                        acks.into()
                    },
                    compression: compression.into(),
                    idempotent: idempotent || transactional,
                    batch_bytes,
                    linger: Duration::from_millis(linger_ms),
                    max_in_flight,
                    transactional_id: transactional
                        .then(|| format!("strata-bench-{}", std::process::id())),
                    ..ProducerConfig::default()
                },
            )
            .await?;
            let progress = Arc::new(Progress {
                records: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            });
            let display = Display::start(Arc::clone(&progress), records, "produce");
            let every = transaction_ms.map(Duration::from_millis);
            let outcome = produce(&producer, &topic, records, record_size, every, &progress).await;
            display.finish();
            producer.close().await;
            report("produce", &outcome?, format);
        }
        BenchCommand::Consume {
            topic,
            records,
            fetch_bytes,
            read_committed,
            format,
        } => {
            let info = cluster.topic(&topic).await?;
            let fetcher = Fetcher::new(
                Arc::clone(&cluster),
                FetchOptions {
                    min_bytes: 1,
                    max_wait: Duration::from_millis(500),
                    read_committed,
                },
            );
            let all: Vec<(String, i32)> = info
                .partitions
                .iter()
                .map(|p| (topic.clone(), p.partition))
                .collect();
            let admin = Admin::new(Arc::clone(&cluster));
            let starts = admin.list_offsets(&all, EARLIEST).await?;
            let ends = admin.list_offsets(&all, LATEST).await?;
            let mut wants = Vec::new();
            let mut total = 0u64;
            for p in &info.partitions {
                let key = (topic.clone(), p.partition);
                let start = starts.get(&key).copied().flatten().unwrap_or(0);
                let end = ends.get(&key).copied().flatten().unwrap_or(0);
                if end > start {
                    total += (end - start) as u64;
                    wants.push((topic.clone(), p.partition, start, end));
                }
            }
            let target = records.unwrap_or(total).min(total);
            if target == 0 {
                anyhow::bail!("{topic} holds no records to read");
            }
            let progress = Arc::new(Progress {
                records: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            });
            let display = Display::start(Arc::clone(&progress), target, "consume");
            let outcome = consume(&fetcher, wants, target, fetch_bytes, &progress).await;
            display.finish();
            report("consume", &outcome?, format);
        }
    }
    Ok(())
}

async fn produce(
    producer: &Producer,
    topic: &str,
    records: u64,
    record_size: usize,
    transaction_every: Option<Duration>,
    progress: &Arc<Progress>,
) -> anyhow::Result<Outcome> {
    // Values cut from incompressible bytes, so codecs do honest work.
    let mut noise = vec![0u8; record_size + 4096];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for byte in &mut noise {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    let noise = Bytes::from(noise);
    // Deliveries go, in chunks, to a task that awaits them in order, so a
    // record's latency is read as soon as it is acknowledged.
    let (pending_tx, mut pending_rx) = tokio::sync::mpsc::channel::<
        Vec<(Instant, crate::client::DeliveryFuture)>,
    >(PENDING_MAX / CHUNK);
    let counters = Arc::clone(progress);
    let size = record_size as u64;
    let mut latencies = latency_histogram()?;
    let waiter = tokio::spawn(async move {
        while let Some(chunk) = pending_rx.recv().await {
            // The clock is read when the chunk arrives and after each real
            // wait; records already answered by then count until then.
            // Records sent and answered at the same clock readings have one
            // latency: each run of them is recorded once, with its count.
            let mut now = Instant::now();
            let mut run = (0u64, 0u64);
            for (sent, mut delivery) in chunk {
                if let Some(outcome) = answered_already(&mut delivery) {
                    outcome?;
                } else {
                    delivery.await?;
                    now = Instant::now();
                }
                let latency = now.saturating_duration_since(sent).as_micros() as u64;
                if latency != run.0 && run.1 > 0 {
                    latencies.saturating_record_n(run.0, run.1);
                    run.1 = 0;
                }
                run = (latency, run.1 + 1);
            }
            if run.1 > 0 {
                latencies.saturating_record_n(run.0, run.1);
            }
            let done = latencies.len();
            counters.records.store(done, Ordering::Relaxed);
            counters.bytes.store(done * size, Ordering::Relaxed);
        }
        Ok::<_, ClientError>(latencies)
    });
    let topic: Arc<str> = topic.into();
    let started = Instant::now();
    let mut transaction_started = started;
    if transaction_every.is_some() {
        producer.begin_transaction().await?;
    }
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut sent = started;
    for n in 0..records {
        let offset = (n as usize * 61) % 4096;
        let record = ProducerRecord {
            topic: Arc::clone(&topic),
            value: Some(noise.slice(offset..offset + record_size)),
            ..ProducerRecord::default()
        };
        // One clock read per few records: they leave within microseconds
        // of each other, and latencies are milliseconds.
        if n % CLOCK_EVERY == 0 {
            sent = Instant::now();
            if let Some(every) = transaction_every
                && sent.duration_since(transaction_started) >= every
            {
                producer.commit_transaction().await?;
                producer.begin_transaction().await?;
                transaction_started = Instant::now();
            }
        }
        chunk.push((sent, producer.send(record).await?));
        if chunk.len() == CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            if pending_tx.send(full).await.is_err() {
                break;
            }
        }
    }
    if !chunk.is_empty() {
        let _ = pending_tx.send(chunk).await;
    }
    drop(pending_tx);
    if transaction_every.is_some() {
        producer.commit_transaction().await?;
    }
    producer.flush().await;
    let latencies_us = waiter.await??;
    let elapsed = started.elapsed();
    Ok(Outcome {
        records,
        bytes: records * record_size as u64,
        elapsed,
        latencies_us,
    })
}

async fn consume(
    fetcher: &Fetcher,
    mut wants: Vec<(String, i32, i64, i64)>,
    target: u64,
    fetch_bytes: i32,
    progress: &Progress,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut latencies_us = latency_histogram()?;
    while records < target && !wants.is_empty() {
        let asked: Vec<(String, i32, i64)> = wants
            .iter()
            .map(|(t, p, at, _)| (t.clone(), *p, *at))
            .collect();
        let sent = Instant::now();
        let answers = fetcher.fetch_many(&asked, fetch_bytes).await;
        latencies_us.saturating_record(sent.elapsed().as_micros() as u64);
        for (_, partition, answer) in answers {
            let fetched = answer?;
            let want = wants
                .iter_mut()
                .find(|w| w.1 == partition)
                .expect("answers name asked partitions");
            // Transaction markers and aborted transactions skipped.
            for batch in fetched.visible_batches() {
                let batch = batch?;
                let decoded = batch.records(DECOMPRESSED_BYTES_MAX)?;
                for record in decoded.iter() {
                    let record = record?;
                    if record.offset < want.2 || record.offset >= want.3 || records >= target {
                        continue;
                    }
                    records += 1;
                    bytes += record.value.map_or(0, <[u8]>::len) as u64;
                }
            }
            want.2 = fetched.next_offset().max(want.2);
        }
        wants.retain(|(_, _, at, end)| at < end);
        progress.records.store(records, Ordering::Relaxed);
        progress.bytes.store(bytes, Ordering::Relaxed);
    }
    let elapsed = started.elapsed();
    Ok(Outcome {
        records,
        bytes,
        elapsed,
        latencies_us,
    })
}

/// The delivery's outcome if it is already known, without waiting.
fn answered_already(
    delivery: &mut crate::client::DeliveryFuture,
) -> Option<Result<crate::client::RecordMetadata, ClientError>> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(delivery).poll(&mut context) {
        std::task::Poll::Ready(outcome) => Some(outcome),
        std::task::Poll::Pending => None,
    }
}

/// An empty latency histogram, in microseconds.
fn latency_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_max(LATENCY_US_MAX, LATENCY_DIGITS)
        .context("creating the latency histogram")
}

/// The latency at `quantile` in milliseconds (0 without any).
fn percentile_ms(latencies_us: &Histogram<u64>, quantile: f64) -> f64 {
    if latencies_us.is_empty() {
        return 0.0;
    }
    latencies_us.value_at_quantile(quantile) as f64 / 1000.0
}

/// The run's progress on stderr while it goes on: an indicatif bar on a
/// terminal, redrawn every 200 ms; otherwise a plain line every 5 s.
struct Display {
    task: tokio::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
    progress: Arc<Progress>,
}

/// The bar: done/total, rate and ETA; `{msg}` carries the MB/s.
const BAR_TEMPLATE: &str =
    "[{bar:30}] {percent:>3}% {prefix} {pos}/{len} records  {rate} rec/s  {msg}  ETA {eta}";

impl Display {
    fn start(progress: Arc<Progress>, total: u64, what: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                .with_style(bar_style())
                .with_prefix(what)
        });
        let (shown, counters) = (bar.clone(), Arc::clone(&progress));
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let every = match shown {
                Some(_) => Duration::from_millis(200),
                None => Duration::from_secs(5),
            };
            loop {
                tokio::time::sleep(every).await;
                let done = counters.records.load(Ordering::Relaxed);
                let bytes = counters.bytes.load(Ordering::Relaxed);
                let seconds = started.elapsed().as_secs_f64().max(1e-9);
                let mb_per_s = bytes as f64 / seconds / 1e6;
                match &shown {
                    Some(bar) => {
                        bar.set_message(format!("{mb_per_s:.1} MB/s"));
                        bar.set_position(done);
                    }
                    None => {
                        let fraction = (done as f64 / total.max(1) as f64).min(1.0);
                        let rate = done as f64 / seconds;
                        let eta = match rate > 0.0 {
                            true => format!("{:.0}s", total.saturating_sub(done) as f64 / rate),
                            false => "-".into(),
                        };
                        eprintln!(
                            "{:.0}% {what} {done}/{total} records  {rate:.0} rec/s  \
                             {mb_per_s:.1} MB/s  ETA {eta}",
                            fraction * 100.0
                        );
                    }
                }
            }
        });
        Self {
            task,
            bar,
            progress,
        }
    }

    /// Stops the display; the bar stays on the terminal with the final
    /// count (short of the total if the run failed).
    fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.set_position(self.progress.records.load(Ordering::Relaxed));
            bar.abandon();
        }
    }
}

/// The bar's style, `{rate}` in whole records per second.
fn bar_style() -> ProgressStyle {
    // The template is a constant (a test parses it); the default bar
    // stands in rather than failing a benchmark over its display.
    ProgressStyle::with_template(BAR_TEMPLATE)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}", state.per_sec());
            },
        )
        .progress_chars("#>.")
}

fn report(what: &str, outcome: &Outcome, format: Format) {
    let seconds = outcome.elapsed.as_secs_f64().max(1e-9);
    let records_per_s = outcome.records as f64 / seconds;
    let mb_per_s = outcome.bytes as f64 / seconds / 1e6;
    let (p50, p99, p999) = (
        percentile_ms(&outcome.latencies_us, 0.50),
        percentile_ms(&outcome.latencies_us, 0.99),
        percentile_ms(&outcome.latencies_us, 0.999),
    );
    match format {
        Format::Json => print_json(&json!({
            "bench": what,
            "records": outcome.records,
            "bytes": outcome.bytes,
            "seconds": seconds,
            "records_per_s": records_per_s,
            "mb_per_s": mb_per_s,
            "latency_ms": { "p50": p50, "p99": p99, "p99_9": p999 },
        })),
        Format::Text => println!(
            "{what}: {} records, {:.1} MB in {seconds:.2} s: {records_per_s:.0} records/s, \
             {mb_per_s:.1} MB/s; latency ms p50 {p50:.2} p99 {p99:.2} p99.9 {p999:.2}",
            outcome.records,
            outcome.bytes as f64 / 1e6,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_value_that_covers_the_quantile_to_three_digits() {
        let within = |got: f64, ms: f64| got >= ms && got <= ms * 1.001;
        let mut latencies = latency_histogram().unwrap();
        for ms in 1..=1000 {
            latencies.saturating_record(ms * 1000);
        }
        for (quantile, ms) in [(0.5, 500.0), (0.99, 990.0), (0.999, 999.0)] {
            let got = percentile_ms(&latencies, quantile);
            assert!(within(got, ms), "p{quantile}: {got} ms, not {ms}");
        }
        let mut one = latency_histogram().unwrap();
        one.saturating_record(7000);
        let got = percentile_ms(&one, 0.999);
        assert!(within(got, 7.0), "{got} ms, not 7");
    }

    #[test]
    fn no_latencies_give_zero_percentiles() {
        assert_eq!(percentile_ms(&latency_histogram().unwrap(), 0.5), 0.0);
    }

    #[test]
    fn the_bar_template_parses() {
        assert!(ProgressStyle::with_template(BAR_TEMPLATE).is_ok());
    }
}
