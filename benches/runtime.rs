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
//!   `Vec<u8>`): what any processing pays, the pass-through's reference.
//! - `HashMap count`: for reference, the plain loop also counting each key
//!   in an in-memory `std::collections::HashMap` (no runtime, nothing
//!   durable): what a get and a put over 100k keys cost by themselves.
//! - `HashMap count, durable`: the HashMap count made durable by hand, for
//!   reference: at every commit interval's record count (100,000, or the
//!   whole input at the long interval) the keys counted since written to
//!   a RocksDB with their counts in one synced write batch, not
//!   overlapped with counting; what keeping the counts in RocksDB costs
//!   a plain program. The RocksDB is set as the runtime sets its stores
//!   (values updated in place in the memtable; RocksDB's defaults before
//!   the figures of 2026-12-06 at fb508d0).
//! - `HashMap count, durable, overlapped`: the same at the default
//!   interval, each write batch handed to a thread of its own while
//!   counting goes on (one write in flight, as the runtime pipelines one
//!   commit): a plain program keeping its counts in RocksDB at that
//!   interval, the `count` target's floor.
//! - `plain loop, its position durable, overlapped`: the plain loop
//!   writing only its position (records read) to such a RocksDB at each
//!   commit interval, synced, overlapped the same way: what committing the
//!   input offset costs a plain program, the pass-through's floor.
//! - the overlapped durable count over the two partitions of the
//!   two-partition topic at once, a thread and a RocksDB each (as the
//!   runtime runs a task per partition): its gain over the one-partition
//!   durable count is the floor of the two-partition target (not printed
//!   as a row: it is a ratio).
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
//!   partitions one after the other, and the plain loop again with a
//!   thread per partition shows what the machine's cores give side by
//!   side (the ceiling of two tasks).
//!
//! - the tasks' metrics: `pass-through` and `count` with them on (the
//!   default) and off (`App::task_metrics(false)`), in [`PAIRS`]
//!   alternating pairs, each pair's ratio taken and the median printed:
//!   what counting each batch for `/metrics` (records, processing time,
//!   lag, hot keys sampled one record in 16) costs, measured so because a
//!   difference of a few percent is smaller than this machine's noise
//!   between rounds.
//!
//! Each case runs `ROUNDS` times after a warm-up read; the best round is
//! reported, with its ratio to the plain loop's best (the two-partition
//! rows to the two-partition plain loop's).
//!
//! An app's time is its whole run: opening the log and its state, the
//! last commit (synced) and closing, which the plain loop does not time.
//! What that costs by itself is measured too (the pass-through app over
//! an empty topic of one partition, best of `ROUNDS`), and the `per
//! record` rows take it out: the runtime's cost per record alone. (An
//! app with a store, or with two tasks, opens more than that app does,
//! so its `per record` rows still carry some fixed cost.)

use std::path::Path;
use std::time::Duration;

mod common;
mod summary;

use common::durable::{self, Counting, Writes};

use strata::runtime::{
    App, CommitInterval, Context, Location, Output, ProcessError, Record, Store,
};

const RECORDS: u64 = 2_000_000;
const ROUNDS: usize = 3;
/// On/off pairs of the metrics' cost.
const PAIRS: usize = 7;

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
    common::write_topic(&data, "empty", 1, 0)?;
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
    let mut durable: Vec<(String, Vec<f64>)> = (intervals.iter())
        .map(|(label, _)| (format!("HashMap count, durable{label}"), Vec::new()))
        .collect();
    durable.push(("HashMap count, durable, overlapped".to_string(), Vec::new()));
    durable.push((
        "plain loop, its position durable, overlapped".to_string(),
        Vec::new(),
    ));
    for (label, _) in &intervals {
        cases.push((format!("count{label}"), Vec::new()));
        cases.push((format!("count + emit{label}"), Vec::new()));
    }
    let mut plain2 = Vec::new();
    let mut cases2: Vec<(String, Vec<f64>)> = vec![(
        "plain loop, 2 partitions side by side".to_string(),
        Vec::new(),
    )];
    cases2.extend(
        (intervals.iter()).map(|(label, _)| (format!("count{label}, 2 partitions"), Vec::new())),
    );
    // The durable count's, overlapped, a thread per partition of events2.
    let mut floor2_rounds = Vec::new();
    let runtime = tokio::runtime::Runtime::new()?;
    let mut fixed = Duration::MAX;
    for round in 0..ROUNDS {
        let name = format!("empty-{round}");
        fixed = fixed.min(runtime.block_on(pass_through_over(&data, "empty", &name, 0))?);
        plain.push(common::plain_loop(&data, RECORDS)?);
        cases[0].1.push(common::hashmap_loop(&data, RECORDS)?);
        for (at, (_, commit)) in intervals.iter().enumerate() {
            let state = dir.path().join(format!("durable-{at}-{round}"));
            let rate = durable::count_loop(
                &data,
                &state,
                RECORDS,
                commit.records,
                Counting::PerKey,
                Writes::Inline,
            )?;
            durable[at].1.push(rate);
        }
        let state = dir.path().join(format!("overlapped-{round}"));
        let commit = CommitInterval::default().records;
        let rate = durable::count_loop(
            &data,
            &state,
            RECORDS,
            commit,
            Counting::PerKey,
            Writes::Overlapped,
        )?;
        durable[intervals.len()].1.push(rate);
        let state = dir.path().join(format!("position-{round}"));
        let rate = durable::count_loop(
            &data,
            &state,
            RECORDS,
            commit,
            Counting::Nothing,
            Writes::Overlapped,
        )?;
        durable[intervals.len() + 1].1.push(rate);
        let state = dir.path().join(format!("overlapped2-{round}"));
        let rate = durable::count_side_by_side(&data, "events2", &state, RECORDS, commit)?;
        floor2_rounds.push(rate);
        let name = format!("pass-{round}");
        let took = runtime.block_on(pass_through_over(&data, "events", &name, RECORDS))?;
        cases[1].1.push(common::rate(RECORDS, took));
        for (at, (_, commit)) in intervals.iter().enumerate() {
            let name = format!("count-{at}-{round}");
            let rate = runtime.block_on(stateful(&data, "events", &name, *commit, None))?;
            cases[2 + 2 * at].1.push(rate);
            let (name, topic) = (format!("emit-{at}-{round}"), format!("counts-{at}-{round}"));
            let rate = runtime.block_on(stateful(&data, "events", &name, *commit, Some(topic)))?;
            cases[3 + 2 * at].1.push(rate);
        }
        plain2.push(common::plain_loop_over(&data, "events2", RECORDS)?);
        cases2[0]
            .1
            .push(common::plain_loop_side_by_side(&data, "events2", RECORDS)?);
        for (at, (_, commit)) in intervals.iter().enumerate() {
            let name = format!("count2-{at}-{round}");
            let rate = runtime.block_on(stateful(&data, "events2", &name, *commit, None))?;
            cases2[1 + at].1.push(rate);
        }
    }
    // The same rows with the fixed cost of a run taken out.
    // (A round no longer than the fixed cost would say nothing: left as it is.)
    let per_record = |rate: f64| {
        let took = RECORDS as f64 / rate;
        match took > fixed.as_secs_f64() {
            true => RECORDS as f64 / (took - fixed.as_secs_f64()),
            false => rate,
        }
    };
    let net = |(name, rates): &(String, Vec<f64>)| {
        (
            format!("{name}, per record"),
            rates.iter().map(|&r| per_record(r)).collect(),
        )
    };
    let net_rows: Vec<(String, Vec<f64>)> = cases[1..].iter().map(net).collect();
    let net_rows2: Vec<(String, Vec<f64>)> = cases2[1..].iter().map(net).collect();
    println!(
        "fixed cost of a run (pass-through, empty input: open, last commit, close): {:.1} ms",
        fixed.as_secs_f64() * 1e3
    );
    metrics_cost(&runtime, &data)?;
    cases.extend(durable);
    cases.extend(net_rows);
    cases2.extend(net_rows2);
    let (floor, floor2) = (common::best(&plain), common::best(&plain2));
    let best_of = |rows: &[(String, Vec<f64>)], name: &str| {
        let row = rows.iter().find(|(n, _)| n == name);
        common::best(&row.expect("a case of this bench").1)
    };
    let targets = [
        summary::Target {
            what: "pass-through, per record".into(),
            measured: best_of(&cases, "pass-through, per record"),
            reference_name: "plain loop".into(),
            reference: floor,
            factor: 0.85,
            unit: "records/s",
            floor: Some(summary::Floor {
                name: "plain loop, its position written to RocksDB at each commit, overlapped"
                    .into(),
                value: best_of(&cases, "plain loop, its position durable, overlapped"),
            }),
        },
        summary::Target {
            what: "count, per record (default commit interval)".into(),
            measured: best_of(&cases, "count, per record"),
            reference_name: "HashMap count".into(),
            reference: best_of(&cases, "HashMap count"),
            factor: 0.8,
            unit: "records/s",
            floor: Some(summary::Floor {
                name: "HashMap count, its writes to RocksDB overlapped".into(),
                value: best_of(&cases, "HashMap count, durable, overlapped"),
            }),
        },
        summary::Target {
            what: "count: 2 partitions' gain over 1".into(),
            measured: best_of(&cases2, "count, 2 partitions") / best_of(&cases, "count"),
            reference_name: "plain loop's gain side by side".into(),
            reference: best_of(&cases2, "plain loop, 2 partitions side by side") / floor2,
            factor: 0.9,
            unit: "×",
            floor: Some(summary::Floor {
                name: "HashMap count, durable, overlapped: a thread each over 2 partitions".into(),
                value: common::best(&floor2_rounds)
                    / best_of(&cases, "HashMap count, durable, overlapped"),
            }),
        },
    ];
    let rows = std::iter::once(("plain loop".to_string(), plain))
        .chain(cases)
        .map(|row| (row, floor))
        .chain(
            std::iter::once(("plain loop, 2 partitions".to_string(), plain2))
                .chain(cases2)
                .map(|row| (row, floor2)),
        );
    common::print_rows(rows);
    summary::report("runtime", &targets)
}

/// How long the pass-through app takes over the whole of `input`, which
/// holds `records`.
async fn pass_through_over(
    data: &Path,
    input: &str,
    name: &str,
    records: u64,
) -> anyhow::Result<Duration> {
    let app = App::new(name).processor("pass", pass_through).input(input);
    common::run_time(&app, &Location::embedded(data, name), records).await
}

/// What the tasks' metrics cost: `PAIRS` runs of the pass-through and of
/// the count with them on and off, alternating; the median of the pairs'
/// ratios.
fn metrics_cost(runtime: &tokio::runtime::Runtime, data: &Path) -> anyhow::Result<()> {
    let median = |mut ratios: Vec<f64>| {
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    let (mut pass, mut count) = (Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let on = runtime.block_on(pass_through_over(
            data,
            "events",
            &format!("pon-{pair}"),
            RECORDS,
        ))?;
        let off = runtime.block_on(pass_through_quietly(
            data,
            "events",
            &format!("poff-{pair}"),
            RECORDS,
        ))?;
        pass.push(off.as_secs_f64() / on.as_secs_f64());
        let commit = CommitInterval::default();
        let on = App::new(&format!("con-{pair}"));
        let on = runtime.block_on(stateful_as(on, data, "events", commit, None))?;
        let off = App::new(&format!("coff-{pair}")).task_metrics(false);
        let off = runtime.block_on(stateful_as(off, data, "events", commit, None))?;
        count.push(on / off);
    }
    for (case, ratios) in [("pass-through", pass), ("count", count)] {
        let ratio = median(ratios.clone());
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "task metrics, {case}: on runs at {ratio:.3}x of off, median of {PAIRS} pairs ({}): they cost {:.1}%",
            each.join(" "),
            (1.0 - ratio) * 100.0
        );
    }
    Ok(())
}

/// [`pass_through_over`] with the tasks' metrics off.
async fn pass_through_quietly(
    data: &Path,
    input: &str,
    name: &str,
    records: u64,
) -> anyhow::Result<Duration> {
    let app = (App::new(name).task_metrics(false))
        .processor("pass", pass_through)
        .input(input);
    common::run_time(&app, &Location::embedded(data, name), records).await
}

/// Records/s of one app run over the whole input, from a fresh state.
async fn stateful(
    data: &Path,
    input: &str,
    name: &str,
    commit: CommitInterval,
    emit_to: Option<String>,
) -> anyhow::Result<f64> {
    stateful_as(App::new(name), data, input, commit, emit_to).await
}

/// [`stateful`] with `app` (new, with its settings) as the app.
async fn stateful_as(
    app: App,
    data: &Path,
    input: &str,
    commit: CommitInterval,
    emit_to: Option<String>,
) -> anyhow::Result<f64> {
    let name = app.name().to_string();
    let name = name.as_str();
    let emit_to = emit_to.map(|topic| Output::<String, String>::named(&topic));
    let mut app = app
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
