//! A store's restore from its changelog beside the `read_committed`
//! fetch-and-decode loop over the same changelog, in one run (`make
//! bench-restore`).
//!
//! An app counting per key (`make bench-runtime`'s `count`: a get and a
//! put per record) runs remote against `strata serve` (this build's) over
//! [`RECORDS`] 100-byte records of 100,000 keys in one partition, at
//! `run`'s default commit interval; its store's changelog then holds a
//! record per key changed per commit. Each round then times:
//!
//! - `read_committed loop`: `strata bench consume --read-committed` over
//!   the changelog, from its start to its end (fetch, verify and decode
//!   every record, as Kafka's `isolation.level=read_committed`).
//! - `restore`: the app's state directory removed, the app run again to
//!   the end of its input (nothing new in it): its task finds no local
//!   state and restores the store from the changelog, the records put
//!   back in RocksDB; the time the restore took, as the run reports it
//!   (`RunSummary::restoring`).
//!
//! - `least restore`, its floor: the loop's time plus the least a restore
//!   adds to reading, measured apart on the same records (read into memory
//!   once, untimed): each key's latest value kept in a `HashMap`, the keys
//!   sorted, written to one table file and the file ingested into a fresh
//!   RocksDB (default options: Snappy, as the runtime's table files). Its
//!   two parts are timed one after the other, as a restore on this 2-core
//!   machine runs them (the broker and the fetch take the second core).
//!
//! The best round of each is kept; the target: the restore at ≥ 0.5× the
//! loop's records/s.

use std::collections::HashMap;
use std::process::Command;

use anyhow::Context as _;
use bytes::Bytes;

mod common;
mod serve;
mod summary;

use strata::client::{ClientConfig, Cluster, Consumer, ConsumerConfig, OffsetReset};
use strata::runtime::{App, Location, RunOptions, Store};

const RECORDS: u64 = 2_000_000;
const ROUNDS: usize = 3;
const APP: &str = "restore-bench";
const COUNTS: Store<String, u64> = Store::new("counts");

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let parent = std::env::var_os("STRATA_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(parent)?;
    common::write_input(&dir.path().join("data"), RECORDS)?;
    let broker = serve::start(dir.path(), "")?;
    let state = dir.path().join("state");
    let app = App::new(APP)
        .processor("count", common::count(COUNTS, None))
        .input("events")
        .store(COUNTS);
    let location = Location::remote(&broker.address, &state);
    let runtime = tokio::runtime::Runtime::new()?;
    let first = runtime.block_on(run_to_end(&app, &location))?;
    anyhow::ensure!(
        first.records == RECORDS,
        "counted {} records",
        first.records
    );
    let changelog = format!("{APP}-counts-changelog");
    let (mut restores, mut loops, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let mut changelog_records = 0;
    for round in 0..ROUNDS {
        let (records, rate) = read_committed(&broker.address, &changelog)?;
        loops.push(rate);
        changelog_records = records;
        std::fs::remove_dir_all(&state)?;
        let summary = runtime.block_on(run_to_end(&app, &location))?;
        anyhow::ensure!(
            summary.restored == records,
            "round {round}: restored {} of the changelog's {records} records",
            summary.restored
        );
        restores.push(common::rate(summary.restored, summary.restoring));
        eprintln!(
            "round {round}: restored {} records in {:.2} s; the loop read them at {:.2} M records/s",
            summary.restored,
            summary.restoring.as_secs_f64(),
            rate / 1e6
        );
    }
    let held = runtime.block_on(read_whole(&broker.address, &changelog, changelog_records))?;
    for round in 0..ROUNDS {
        writes.push(least_restore_writes(
            &held,
            &dir.path().join(format!("least-{round}")),
        )?);
    }
    println!(
        "input: {RECORDS} records of 100 bytes, {} distinct keys, 1 partition; the changelog: {changelog_records} records",
        common::KEYS
    );
    let floor = common::best(&loops);
    let write_took = writes.iter().min().copied().unwrap_or_default();
    let least: Vec<f64> = (loops.iter())
        .map(|&rate| {
            let read = std::time::Duration::from_secs_f64(changelog_records as f64 / rate);
            common::rate(changelog_records, read + write_took)
        })
        .collect();
    println!(
        "least restore's writes (latest per key, sort, table file, ingest): best {:.0} ms",
        write_took.as_secs_f64() * 1e3
    );
    common::print_rows([
        (("read_committed loop".to_string(), loops), floor),
        (("least restore".to_string(), least.clone()), floor),
        (("restore".to_string(), restores.clone()), floor),
    ]);
    let target = summary::Target {
        what: "changelog restore".into(),
        measured: common::best(&restores),
        reference_name: "read_committed loop over the changelog".into(),
        reference: floor,
        factor: 0.5,
        unit: "records/s",
        floor: Some(summary::Floor {
            name: "the loop, then the latest per key written to a table file and ingested".into(),
            value: common::best(&least),
        }),
    };
    summary::report("restore", &[target])
}

async fn run_to_end(
    app: &App,
    location: &Location,
) -> anyhow::Result<strata::runtime::ops::RunSummary> {
    let options = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    Ok(strata::runtime::ops::run(app, location, options).await?)
}

/// Reads `topic` whole with `strata bench consume --read-committed`;
/// returns its records and records/s.
fn read_committed(bootstrap: &str, topic: &str) -> anyhow::Result<(u64, f64)> {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "consume", "--read-committed", "--format", "json"])
        .args(["--bootstrap", bootstrap, "--topic", topic])
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "strata bench consume: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let field = |name: &str| report[name].as_f64();
    match (field("records"), field("records_per_s")) {
        (Some(records), Some(rate)) => Ok((records as u64, rate)),
        _ => anyhow::bail!("strata bench consume printed {report}"),
    }
}

/// The changelog's `records` records (key, value or tombstone), read
/// committed from its start.
async fn read_whole(
    bootstrap: &str,
    topic: &str,
    records: u64,
) -> anyhow::Result<Vec<(Bytes, Option<Bytes>)>> {
    let cluster = Cluster::connect(ClientConfig::new(bootstrap)).await?;
    let mut consumer = Consumer::new(
        cluster,
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            read_committed: true,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign(&[(topic.to_string(), 0)]);
    let mut held = Vec::with_capacity(records as usize);
    let started = std::time::Instant::now();
    while (held.len() as u64) < records {
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "read {} of the changelog's {records} records in two minutes",
            held.len()
        );
        for record in consumer.poll(std::time::Duration::from_millis(100)).await? {
            let key = record.key.context("a changelog record without a key")?;
            held.push((key, record.value));
        }
    }
    Ok(held)
}

/// How long the least a restore adds to reading takes over `records`:
/// each key's latest value kept, the keys sorted, one table file written
/// and ingested into a fresh RocksDB in `dir`.
fn least_restore_writes(
    records: &[(Bytes, Option<Bytes>)],
    dir: &std::path::Path,
) -> anyhow::Result<std::time::Duration> {
    std::fs::create_dir_all(dir)?;
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    let db = rocksdb::DB::open(&options, dir.join("db"))?;
    let file = dir.join("restored.sst");
    let started = std::time::Instant::now();
    let mut latest: HashMap<&[u8], Option<&[u8]>> = HashMap::new();
    for (key, value) in records {
        latest.insert(key, value.as_deref());
    }
    let mut live: Vec<(&[u8], &[u8])> = (latest.into_iter())
        .filter_map(|(key, value)| Some((key, value?)))
        .collect();
    live.sort_unstable_by_key(|&(key, _)| key);
    let mut writer = rocksdb::SstFileWriter::create(&options);
    writer.open(&file)?;
    for (key, value) in &live {
        writer.put(key, value)?;
    }
    writer.finish()?;
    db.ingest_external_file(vec![&file])?;
    let took = started.elapsed();
    anyhow::ensure!(
        live.len() as u64 <= common::KEYS,
        "{} keys restored",
        live.len()
    );
    Ok(took)
}
