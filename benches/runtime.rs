//! Embedded stateful processing next to a plain fetch-and-decode loop over
//! the same records, in one run (`make bench-runtime`).
//!
//! The input: 2 million 100-byte records (a 10-byte key out of 100,000
//! distinct keys, a 90-byte value), in uncompressed batches of 1,000, in a
//! topic of one partition and again in a topic of two.
//!
//! - `plain loop`: read the partition from the log in 4 MiB fetches, verify
//!   and decode every batch, decode each record's key and value into owned
//!   values with the codec a processor's input uses (a `String`, a
//!   `Vec<u8>`): the floor any processing pays.
//! - `HashMap count`: for reference, the plain loop also counting each key
//!   in an in-memory `std::collections::HashMap` (no runtime, nothing
//!   durable): what a get and a put over 100k keys cost by themselves.
//! - `pass-through`: an app whose processor does nothing with its records
//!   (no store; the input offset committed): the runtime's own cost per
//!   record.
//! - `count`: an app whose processor keeps `counts`: key → u64 in RocksDB
//!   (a get and a put per record), committed exactly-once with the input
//!   offset.
//! - `count + emit`: the same, also emitting the new count to a derived
//!   topic (wordcount-style): outbox in the commit, shipped to the log.
//!
//! - the same `count`, on the same number of records in a topic of two
//!   partitions (records placed by key): two tasks, one per partition, run
//!   side by side on the machine's cores; its plain loop reads the two
//!   partitions one after the other.
//!
//! Each case runs `ROUNDS` times after a warm-up read; the best round is
//! reported, with its ratio to the plain loop's best (the two-partition
//! rows to the two-partition plain loop's).

use std::path::Path;
use std::time::Duration;

mod common;

use strata::runtime::{
    App, CommitInterval, Context, Location, Output, ProcessError, Record, Store,
};

const RECORDS: u64 = 2_000_000;
const ROUNDS: usize = 3;

const COUNTS: Store<String, u64> = Store::new("counts");

fn pass_through(record: Record<String, Vec<u8>>, _ctx: &mut Context) -> Result<(), ProcessError> {
    std::hint::black_box(&record);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let bytes = common::write_input(&data, RECORDS)?;
    println!(
        "input: {RECORDS} records of 100 bytes ({:.0} MiB of batches), {} distinct keys, 1 partition",
        bytes as f64 / (1 << 20) as f64,
        common::KEYS
    );
    common::write_topic(&data, "events2", 2, RECORDS)?;
    common::plain_loop(&data, RECORDS)?; // warm-up: the segments in the page cache
    common::plain_loop_over(&data, "events2", RECORDS)?;

    // The default commit interval, and a longer one: fewer commits write
    // fewer distinct keys per record processed.
    let long = CommitInterval {
        records: 2_000_000,
        bytes: 256 << 20,
        interval: Duration::from_secs(1),
    };
    let intervals = [("", CommitInterval::default()), (" (1 s)", long)];
    for (label, commit) in &intervals {
        println!(
            "commit interval{label}: {} records / {} MiB / {} ms, whichever first; state WAL fsynced per commit",
            commit.records,
            commit.bytes >> 20,
            commit.interval.as_millis()
        );
    }
    let mut plain = Vec::new();
    let mut cases: Vec<(String, Vec<f64>)> = vec![
        ("HashMap count".to_string(), Vec::new()),
        ("pass-through".to_string(), Vec::new()),
    ];
    for (label, _) in &intervals {
        cases.push((format!("count{label}"), Vec::new()));
        cases.push((format!("count + emit{label}"), Vec::new()));
    }
    let mut plain2 = Vec::new();
    let mut cases2: Vec<(String, Vec<f64>)> = intervals
        .iter()
        .map(|(label, _)| (format!("count{label}, 2 partitions"), Vec::new()))
        .collect();
    let runtime = tokio::runtime::Runtime::new()?;
    for round in 0..ROUNDS {
        plain.push(common::plain_loop(&data, RECORDS)?);
        cases[0].1.push(common::hashmap_loop(&data, RECORDS)?);
        let name = format!("pass-{round}");
        let rate = runtime.block_on(pass_through_app(&data, &name))?;
        cases[1].1.push(rate);
        for (at, (_, commit)) in intervals.iter().enumerate() {
            let name = format!("count-{at}-{round}");
            let rate = runtime.block_on(stateful(&data, "events", &name, *commit, None))?;
            cases[2 + 2 * at].1.push(rate);
            let (name, topic) = (format!("emit-{at}-{round}"), format!("counts-{at}-{round}"));
            let rate = runtime.block_on(stateful(&data, "events", &name, *commit, Some(topic)))?;
            cases[3 + 2 * at].1.push(rate);
        }
        plain2.push(common::plain_loop_over(&data, "events2", RECORDS)?);
        for (at, (_, commit)) in intervals.iter().enumerate() {
            let name = format!("count2-{at}-{round}");
            let rate = runtime.block_on(stateful(&data, "events2", &name, *commit, None))?;
            cases2[at].1.push(rate);
        }
    }
    let (floor, floor2) = (common::best(&plain), common::best(&plain2));
    let rows = std::iter::once(("plain loop".to_string(), plain))
        .chain(cases)
        .map(|row| (row, floor))
        .chain(
            std::iter::once(("plain loop, 2 partitions".to_string(), plain2))
                .chain(cases2)
                .map(|row| (row, floor2)),
        );
    common::print_rows(rows);
    Ok(())
}

/// Records/s of the pass-through app over the whole input.
async fn pass_through_app(data: &Path, name: &str) -> anyhow::Result<f64> {
    let app = App::new(name)
        .processor("pass", pass_through)
        .input("events");
    common::run_to_end(&app, &Location::embedded(data, name), RECORDS).await
}

/// Records/s of one app run over the whole input, from a fresh state.
async fn stateful(
    data: &Path,
    input: &str,
    name: &str,
    commit: CommitInterval,
    emit_to: Option<String>,
) -> anyhow::Result<f64> {
    let emit_to = emit_to.map(|topic| Output::<String, String>::named(&topic));
    let mut app = App::new(name)
        .processor("count", common::count(COUNTS, emit_to))
        .input(input)
        .store(COUNTS)
        .commit_interval(commit);
    if let Some(output) = emit_to {
        app = app.output(output);
    }
    let location = Location::embedded(data, name);
    let rate = common::run_to_end(&app, &location, RECORDS).await?;
    let distinct = strata::runtime::ops::dump_state(&app, &location, Some("counts"))?.len() as u64;
    anyhow::ensure!(
        distinct <= common::KEYS && distinct > common::KEYS * 9 / 10,
        "{distinct} keys counted"
    );
    Ok(rate)
}
