//! `strata bench produce|consume`: throughput and latency of the client
//! against a broker, like Kafka's perf-test tools, with a progress bar on
//! a terminal (plain lines every few seconds otherwise).
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

use bytes::Bytes;
use clap::Subcommand;
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
    /// Sorted, in microseconds.
    latencies_us: Vec<u64>,
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
            let display = show_progress(Arc::clone(&progress), records, "produce");
            let every = transaction_ms.map(Duration::from_millis);
            let outcome = produce(&producer, &topic, records, record_size, every, &progress).await;
            display.abort();
            finish_progress_line();
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
            let display = show_progress(Arc::clone(&progress), target, "consume");
            let outcome = consume(&fetcher, wants, target, fetch_bytes, &progress).await;
            display.abort();
            finish_progress_line();
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
    // Deliveries are awaited in order on their own task, so a record's
    // latency is read as soon as it is acknowledged.
    // Deliveries go, in chunks, to a task that awaits them in order, so a
    // record's latency is read as soon as it is acknowledged.
    let (pending_tx, mut pending_rx) = tokio::sync::mpsc::channel::<
        Vec<(Instant, crate::client::DeliveryFuture)>,
    >(PENDING_MAX / CHUNK);
    let counters = Arc::clone(progress);
    let size = record_size as u64;
    let waiter = tokio::spawn(async move {
        let mut latencies = Vec::new();
        while let Some(chunk) = pending_rx.recv().await {
            // The clock is read when the chunk arrives and after each real
            // wait; records already answered by then count until then.
            let mut now = Instant::now();
            for (sent, mut delivery) in chunk {
                if let Some(outcome) = answered_already(&mut delivery) {
                    outcome?;
                } else {
                    delivery.await?;
                    now = Instant::now();
                }
                latencies.push(now.saturating_duration_since(sent).as_micros() as u64);
            }
            let done = latencies.len() as u64;
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
    let mut latencies_us = waiter.await??;
    let elapsed = started.elapsed();
    latencies_us.sort_unstable();
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
    let mut latencies_us = Vec::new();
    while records < target && !wants.is_empty() {
        let asked: Vec<(String, i32, i64)> = wants
            .iter()
            .map(|(t, p, at, _)| (t.clone(), *p, *at))
            .collect();
        let sent = Instant::now();
        let answers = fetcher.fetch_many(&asked, fetch_bytes).await;
        latencies_us.push(sent.elapsed().as_micros() as u64);
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
    latencies_us.sort_unstable();
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

/// Redraws a progress bar (terminal) or prints a line every 5 s.
fn show_progress(
    progress: Arc<Progress>,
    total: u64,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let terminal = std::io::stderr().is_terminal();
        let started = Instant::now();
        let every = if terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        loop {
            tokio::time::sleep(every).await;
            let done = progress.records.load(Ordering::Relaxed);
            let bytes = progress.bytes.load(Ordering::Relaxed);
            let seconds = started.elapsed().as_secs_f64().max(1e-9);
            let fraction = (done as f64 / total.max(1) as f64).min(1.0);
            let rate = done as f64 / seconds;
            let eta = if rate > 0.0 {
                (total.saturating_sub(done)) as f64 / rate
            } else {
                f64::INFINITY
            };
            let stats = format!(
                "{what} {done}/{total} records  {:.0} rec/s  {:.1} MB/s  ETA {}",
                rate,
                bytes as f64 / seconds / 1e6,
                if eta.is_finite() {
                    format!("{eta:.0}s")
                } else {
                    "-".into()
                },
            );
            if terminal {
                const WIDTH: usize = 30;
                let filled = (fraction * WIDTH as f64) as usize;
                eprint!(
                    "\r[{}{}] {:>3.0}% {stats}   ",
                    "#".repeat(filled),
                    ".".repeat(WIDTH - filled),
                    fraction * 100.0
                );
            } else {
                eprintln!("{:.0}% {stats}", fraction * 100.0);
            }
        }
    })
}

fn finish_progress_line() {
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

fn percentile_ms(sorted_us: &[u64], quantile: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let index = ((sorted_us.len() as f64 * quantile).ceil() as usize).clamp(1, sorted_us.len()) - 1;
    sorted_us[index] as f64 / 1000.0
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
    use super::percentile_ms;

    #[test]
    fn percentiles_pick_the_rank_that_covers_the_quantile() {
        let sorted: Vec<u64> = (1..=1000).map(|n| n * 1000).collect();
        assert_eq!(percentile_ms(&sorted, 0.5), 500.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 990.0);
        assert_eq!(percentile_ms(&sorted, 0.999), 999.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
        assert_eq!(percentile_ms(&[7000], 0.999), 7.0);
    }
}
