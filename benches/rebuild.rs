//! Rebuilding a derived index from the log, next to a plain
//! fetch-and-decode loop over the same topic, in one run
//! (`make bench-rebuild`).
//!
//! The input: one partition of 10,000,000 records of 100 bytes (a 10-byte
//! key out of 100,000, a 90-byte value) in uncompressed batches of 1,000.
//! The index: key → records seen (a get and a put per record; the
//! runtime bench's `count`). The app has
//! run over the whole input first, so a rebuild has a live state to catch
//! up with and swap out.
//!
//! - `plain loop`: read the partition in 4 MiB fetches, verify and decode
//!   every batch, decode each key and value into owned values with the
//!   codec the processor's input uses: the floor any processing pays.
//! - `HashMap count`: for reference, the plain loop also counting each key
//!   in an in-memory `std::collections::HashMap` (no runtime, nothing
//!   durable): what a get and a put over 100k keys cost by themselves.
//! - `rebuild`: `App::rebuild` as `rebuild` runs it: a fresh state built
//!   from offset 0 with far-apart, unsynced commits, then swapped in.
//! - `rebuild, live commits`: the same with the live run's default commit
//!   interval and a synced WAL per commit, to show what the choice buys.
//!
//! - `rebuild, 2 partitions`: the same number of records in a topic of two
//!   partitions (placed by key), rebuilt by two tasks side by side, next to
//!   a plain loop reading the two partitions one after the other.
//!
//! - the targets' floors, plain programs doing the work a rebuild cannot
//!   avoid (see `common/durable.rs`): `HashMap count, durable, rebuild's
//!   commits` counts per key in a `HashMap` and, every
//!   `REBUILD_COMMIT.records` records and at the end, writes the counts
//!   changed with its position in one synced RocksDB write batch, on a
//!   thread of its own while counting goes on (so a write or two in the
//!   run, as a rebuild commits as rarely and syncs once, at the swap);
//!   `…, a thread each over 2 partitions`, the same over each partition of
//!   the two-partition topic side by side, a RocksDB each.
//!
//! Each case runs `ROUNDS` times after a warm-up read; the best round is
//! reported with its ratio to the plain loop's best (the two-partition
//! rebuild to the two-partition loop's).

use std::time::Instant;

mod common;
mod summary;

use common::durable::{self, Counting, Writes};

use strata::runtime::{App, CommitInterval, Location, REBUILD_COMMIT, RebuildOptions, Store};

const RECORDS: u64 = 10_000_000;
const ROUNDS: usize = 3;

fn app() -> App {
    app_over("index", "events")
}

fn app_over(name: &str, input: &str) -> App {
    const SEEN: Store<String, u64> = Store::new("seen");
    App::new(name)
        .processor("index", common::count(SEEN, None))
        .input(input)
        .store(SEEN)
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let bytes = common::write_input(&data, RECORDS)?;
    println!(
        "input: {RECORDS} records of 100 bytes ({:.0} MiB of batches), {} distinct keys, 1 partition",
        bytes as f64 / (1 << 20) as f64,
        common::KEYS
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let location = Location::embedded(&data, "index");
    let started = Instant::now();
    runtime.block_on(common::run_to_end(&app(), &location, RECORDS))?;
    println!(
        "live run over the input (untimed setup): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let live = strata::runtime::ops::dump_state(&app(), &location, None)?;
    // The same number of records in a topic of two partitions, indexed by
    // two tasks side by side.
    common::write_topic(&data, "events2", 2, RECORDS)?;
    let (app2, location2) = (
        app_over("index2", "events2"),
        Location::embedded(&data, "index2"),
    );
    runtime.block_on(common::run_to_end(&app2, &location2, RECORDS))?;
    let live2 = strata::runtime::ops::dump_state(&app2, &location2, None)?;
    common::plain_loop(&data, RECORDS)?; // warm-up: the segments in the page cache
    common::plain_loop_over(&data, "events2", RECORDS)?;

    let live_commits = (CommitInterval::default(), true);
    let cases = [
        ("rebuild", (REBUILD_COMMIT, false)),
        ("rebuild, live commits", live_commits),
    ];
    println!(
        "rebuild commits: every {} records / {} MiB / {} s, WAL unsynced (synced once at the swap); live commits: every {} records / {} MiB / {} ms, WAL synced",
        REBUILD_COMMIT.records,
        REBUILD_COMMIT.bytes >> 20,
        REBUILD_COMMIT.interval.as_secs(),
        live_commits.0.records,
        live_commits.0.bytes >> 20,
        live_commits.0.interval.as_millis()
    );
    let (mut plain, mut hashmap) = (Vec::new(), Vec::new());
    let (mut plain2, mut rebuild2) = (Vec::new(), Vec::new());
    let (mut durable1, mut durable2) = (Vec::new(), Vec::new());
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for round in 0..ROUNDS {
        plain.push(common::plain_loop(&data, RECORDS)?);
        hashmap.push(common::hashmap_loop(&data, RECORDS)?);
        durable1.push(durable::count_loop(
            &data,
            &dir.path().join(format!("floor-{round}")),
            RECORDS,
            REBUILD_COMMIT.records,
            Counting::PerKey,
            Writes::Overlapped,
        )?);
        for (at, (_, commit)) in cases.iter().enumerate() {
            let options = RebuildOptions {
                commit: Some(*commit),
                ..RebuildOptions::default()
            };
            let summary =
                runtime.block_on(strata::runtime::ops::rebuild(&app(), &location, options))?;
            anyhow::ensure!(
                summary.records == RECORDS,
                "rebuilt from {} records",
                summary.records
            );
            anyhow::ensure!(
                strata::runtime::ops::dump_state(&app(), &location, None)? == live,
                "the rebuilt index differs from the live one"
            );
            rates[at].push(common::rate(summary.records, summary.elapsed));
        }
        plain2.push(common::plain_loop_over(&data, "events2", RECORDS)?);
        durable2.push(durable::count_side_by_side(
            &data,
            "events2",
            &dir.path().join(format!("floor2-{round}")),
            RECORDS,
            REBUILD_COMMIT.records,
        )?);
        let summary = runtime.block_on(strata::runtime::ops::rebuild(
            &app2,
            &location2,
            RebuildOptions::default(),
        ))?;
        anyhow::ensure!(
            summary.records == RECORDS,
            "rebuilt from {}",
            summary.records
        );
        anyhow::ensure!(
            strata::runtime::ops::dump_state(&app2, &location2, None)? == live2,
            "the rebuilt two-partition index differs from the live one"
        );
        rebuild2.push(common::rate(summary.records, summary.elapsed));
    }
    let (floor, floor2) = (common::best(&plain), common::best(&plain2));
    let targets = [
        summary::Target {
            what: "rebuild".into(),
            measured: common::best(&rates[0]),
            reference_name: "plain loop".into(),
            reference: floor,
            factor: 0.5,
            unit: "records/s",
            floor: Some(summary::Floor {
                name: "HashMap count, durable, rebuild's commits".into(),
                value: common::best(&durable1),
            }),
        },
        summary::Target {
            what: "rebuild, 2 partitions".into(),
            measured: common::best(&rebuild2),
            reference_name: "plain loop over both".into(),
            reference: floor2,
            factor: 0.5,
            unit: "records/s",
            floor: Some(summary::Floor {
                name: "HashMap count, durable, rebuild's commits, a thread each over 2 partitions"
                    .into(),
                value: common::best(&durable2),
            }),
        },
    ];
    let named = |name: &str, rates| (name.to_string(), rates);
    let rows = [named("plain loop", plain), named("HashMap count", hashmap)]
        .into_iter()
        .chain(cases.iter().map(|(name, _)| name.to_string()).zip(rates))
        .chain([named("HashMap count, durable, rebuild's commits", durable1)])
        .map(|row| (row, floor))
        .chain(
            [
                named("plain loop, 2 partitions", plain2),
                named("rebuild, 2 partitions", rebuild2),
                named("HashMap count, durable, a thread each", durable2),
            ]
            .map(|row| (row, floor2)),
        );
    common::print_rows(rows);
    summary::report("rebuild", &targets)
}
