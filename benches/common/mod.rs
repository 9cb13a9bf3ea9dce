//! What the runtime and rebuild benchmarks share: their input (100-byte
//! records, a 10-byte key out of `KEYS`, a 90-byte value, uncompressed
//! batches of 1,000), the plain fetch-and-decode loop they are measured
//! against, the counting processor they run, and the table they print.

#![allow(
    dead_code,
    reason = "each benchmark takes the part of this module it needs"
)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use strata::client::partitioner::partition_for_key;
use strata::codec::Codec;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use strata::runtime::{App, Context, Location, Output, ProcessError, Record, RunOptions, Store};

pub mod durable;
pub mod join_floor;

pub const KEYS: u64 = 100_000;
const FETCH_BYTES: u64 = 4 << 20;

fn key(n: u64) -> String {
    format!("key-{n:06}")
}

/// Writes `records` records to `events` partition 0; returns their size
/// in bytes.
pub fn write_input(data: &Path, records: u64) -> anyhow::Result<u64> {
    write_topic(data, "events", 1, records)
}

/// Writes `records` records to `topic`, created with `partitions`
/// partitions, each record in its key's partition (murmur2, as producers
/// place keyed records); returns their size in bytes.
pub fn write_topic(data: &Path, topic: &str, partitions: i32, records: u64) -> anyhow::Result<u64> {
    let log = LogManager::open(data, LogConfig::default())?;
    let created = log.create_topic(topic, partitions, BTreeMap::new())?;
    let value = [b'v'; 90];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    // Recent timestamps, or retention (7 days) would delete the input.
    let now = strata::log::now_ms();
    let mut builders: Vec<BatchBuilder> = (0..partitions)
        .map(|_| BatchBuilder::new(Compression::None))
        .collect();
    for written in 0..records {
        // xorshift: uniform over the keys.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let key = key(state % KEYS);
        let at = partition_for_key(key.as_bytes(), partitions) as usize;
        let timestamp = now - ((records - written) / 1000) as i64;
        builders[at].push(NewRecord::new(Some(key.as_bytes()), &value, timestamp))?;
        // Batches of 1,000 records.
        if builders[at].len() == 1_000 {
            let full = std::mem::replace(&mut builders[at], BatchBuilder::new(Compression::None));
            created.partitions[at].append(&full.build()?)?;
        }
    }
    let mut size = 0;
    for (builder, partition) in builders.into_iter().zip(&created.partitions) {
        if !builder.is_empty() {
            partition.append(&builder.build()?)?;
        }
        partition.flush()?;
        size += partition.size_bytes();
    }
    drop(created);
    log.close()?;
    Ok(size)
}

/// Records/s of reading the whole partition in 4 MiB fetches (the read loop
/// alone: opening and closing the log are not timed, unlike an app's run),
/// verifying every batch and decoding each key and value into owned values
/// with the codec a processor's input uses (a `String`, a `Vec<u8>`).
pub fn plain_loop(data: &Path, expected: u64) -> anyhow::Result<f64> {
    plain_loop_over(data, "events", expected)
}

/// [`plain_loop`] over every partition of `topic`, one after the other.
pub fn plain_loop_over(data: &Path, topic: &str, expected: u64) -> anyhow::Result<f64> {
    let mut touched = 0usize;
    let rate = read_loop(data, topic, expected, |key, value| {
        touched += key.len() + value.len();
    })?;
    std::hint::black_box(touched);
    Ok(rate)
}

/// The plain loop, also counting each key in a `std::collections::HashMap`
/// in memory (default hasher; no runtime, nothing durable): what a get
/// and a put over 100k keys cost by themselves, for reference.
pub fn hashmap_loop(data: &Path, expected: u64) -> anyhow::Result<f64> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    let rate = read_loop(data, "events", expected, |key, value| {
        std::hint::black_box(&value);
        match counts.get_mut(key.as_str()) {
            Some(count) => *count += 1,
            None => {
                counts.insert(key, 1);
            }
        }
    })?;
    anyhow::ensure!(counts.len() as u64 <= KEYS, "{} keys counted", counts.len());
    Ok(rate)
}

/// Reads every partition of `topic` in turn as [`plain_loop`] describes,
/// handing each decoded key and value to `each`; returns records/s.
pub fn read_loop(
    data: &Path,
    topic: &str,
    expected: u64,
    mut each: impl FnMut(String, Vec<u8>),
) -> anyhow::Result<f64> {
    read_loop_stamped(data, topic, expected, |key, value, _| each(key, value))
}

/// [`read_loop`], also handing each record's timestamp to `each`.
pub fn read_loop_stamped(
    data: &Path,
    topic: &str,
    expected: u64,
    each: impl FnMut(String, Vec<u8>, i64),
) -> anyhow::Result<f64> {
    let log = LogManager::open(data, LogConfig::default())?;
    let partitions = partitions_of(&log, topic)?;
    let (records, elapsed) = read_partitions_stamped(&partitions, each)?;
    drop(partitions);
    log.close()?;
    anyhow::ensure!(records == expected, "read {records} records");
    Ok(rate(records, elapsed))
}

/// Reads `partitions` in turn as [`plain_loop`] describes, handing each
/// decoded key, value and timestamp to `each`; returns the records read
/// and the time taken.
pub fn read_partitions_stamped(
    partitions: &[std::sync::Arc<strata::log::PartitionLog>],
    each: impl FnMut(String, Vec<u8>, i64),
) -> anyhow::Result<(u64, Duration)> {
    let (started, mut each) = (Instant::now(), each);
    let mut records = 0u64;
    for partition in partitions {
        records += read_partition(partition, &mut each)?;
    }
    Ok((records, started.elapsed()))
}

/// Records/s of [`plain_loop`] over every partition of `topic` at once, a
/// thread each: what the machine's cores give side by side, the ceiling
/// of tasks that run in parallel.
pub fn plain_loop_side_by_side(data: &Path, topic: &str, expected: u64) -> anyhow::Result<f64> {
    let log = LogManager::open(data, LogConfig::default())?;
    let partitions = partitions_of(&log, topic)?;
    let started = Instant::now();
    let records = std::thread::scope(|scope| {
        let readers: Vec<_> = (partitions.iter())
            .map(|partition| {
                scope.spawn(move || {
                    let mut touched = 0usize;
                    let records = read_partition(partition, &mut |key, value, _| {
                        touched += key.len() + value.len();
                    });
                    std::hint::black_box(touched);
                    records
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|reader| reader.join().expect("a reader panicked"))
            .sum::<anyhow::Result<u64>>()
    })?;
    let elapsed = started.elapsed();
    drop(partitions);
    log.close()?;
    anyhow::ensure!(records == expected, "read {records} records");
    Ok(rate(records, elapsed))
}

pub fn partitions_of(
    log: &LogManager,
    topic: &str,
) -> anyhow::Result<Vec<std::sync::Arc<strata::log::PartitionLog>>> {
    Ok(log
        .topic(topic)
        .ok_or_else(|| anyhow::anyhow!("no topic {topic}"))?
        .partitions
        .clone())
}

/// Reads one partition from its start to its end in 4 MiB fetches,
/// verifying every batch and decoding each record; returns its records.
fn read_partition(
    partition: &strata::log::PartitionLog,
    each: &mut impl FnMut(String, Vec<u8>, i64),
) -> anyhow::Result<u64> {
    let mut records = 0;
    let (mut next, end) = (0, partition.log_end_offset());
    while next < end {
        let fetched = partition.read(next, FETCH_BYTES)?.read_to_vec()?;
        let mut rest = &fetched[..];
        // Whole batches; a fetch may end inside one, which the next starts at.
        while rest.len() >= strata::record::BATCH_HEADER_BYTES
            && rest.len() >= strata::record::BatchHeader::parse(rest)?.size_bytes()
        {
            let batch = RecordBatch::parse_and_verify(rest)?;
            rest = &rest[batch.size_bytes()..];
            for record in batch.records(64 << 20)?.iter() {
                let record = record?;
                let key: String = Codec::Raw.decode(record.key.unwrap_or_default())?;
                let value: Vec<u8> = Codec::Raw.decode(record.value.unwrap_or_default())?;
                each(key, value, record.timestamp);
                records += 1;
            }
            next = batch.header().next_offset();
        }
    }
    Ok(records)
}

pub fn rate(records: u64, elapsed: Duration) -> f64 {
    records as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// The best of a case's rounds.
pub fn best(rates: &[f64]) -> f64 {
    rates.iter().copied().fold(0.0, f64::max)
}

/// Counts records per key in `store` (a get and a put per record); with
/// `emit_to`, also emits each new count there (wordcount-style).
pub fn count(
    store: Store<String, u64>,
    emit_to: Option<Output<String, String>>,
) -> impl FnMut(Record<String, Vec<u8>>, &mut Context) -> Result<(), ProcessError>
+ Clone
+ Send
+ Sync
+ 'static {
    move |record, ctx| {
        let count = ctx.get(store, &record.key)?.unwrap_or(0) + 1;
        ctx.put(store, &record.key, &count)?;
        if let Some(output) = emit_to {
            ctx.emit(output, &record.key, &count.to_string())?;
        }
        Ok(())
    }
}

/// Records/s of `app` run `--until-end` over its whole input of `records`.
pub async fn run_to_end(app: &App, location: &Location, records: u64) -> anyhow::Result<f64> {
    Ok(rate(records, run_time(app, location, records).await?))
}

/// How long `app` takes to run `--until-end` over its whole input of
/// `records`: opening the log and its state, processing, the last commit
/// and closing.
pub async fn run_time(app: &App, location: &Location, records: u64) -> anyhow::Result<Duration> {
    let options = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    let summary = strata::runtime::ops::run(app, location, options).await?;
    anyhow::ensure!(
        summary.records == records,
        "processed {} records",
        summary.records
    );
    Ok(summary.elapsed)
}

/// Prints each case's best round, its ratio to its floor (the best round
/// of the plain loop it is set against) and every round.
pub fn print_rows(rows: impl IntoIterator<Item = ((String, Vec<f64>), f64)>) {
    println!(
        "\n{:<40} {:>14} {:>10}   rounds",
        "case", "records/s", "ratio"
    );
    for ((name, rates), floor) in rows {
        let rounds: Vec<String> = rates.iter().map(|r| format!("{:.2}M", r / 1e6)).collect();
        println!(
            "{name:<40} {:>14.0} {:>9.2}x   {}",
            best(&rates),
            best(&rates) / floor,
            rounds.join(" ")
        );
    }
}
