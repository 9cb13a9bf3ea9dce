//! strata-operators' pipelines next to the plain fetch-and-decode loop,
//! the in-memory HashMap count and the same apps written by hand, over
//! the same records in one run (`make bench-operators`).
//!
//! The input (as `make bench-runtime`'s): 2 million 100-byte records, a
//! 10-byte key out of 100,000 distinct keys, timestamps 1 ms apart per
//! 1,000 records (2 s of event time); a topic `profiles` of one row per
//! key for the join; and `lines`, 250,000 lines of 8 words out of 100,000
//! for the word counts (2 million words).
//!
//! - `plain loop`, `HashMap count`: the references, as in the runtime bench.
//! - `count, by hand` / `count, pipeline`: a get and a put per record in
//!   RocksDB, hand-written and as `from(..).count()`.
//! - `count + emit, …`: the same, also emitting each new count.
//! - `windowed count, pipeline`: 1 s tumbling windows per key, emitted on
//!   close (about 300,000 windows).
//! - `join, pipeline`: every record left-joined with its key's row of
//!   `profiles` (read in the same run: 100,000 more records, stamped before
//!   the events, so the task, which reads its inputs in timestamp order,
//!   takes the whole table first) and emitted.
//! - `join, table updates interleaved`: the same over `profile-updates`,
//!   whose 100,000 rows are stamped across the events' time: the task
//!   turns from one input to the other every 20 records or so, the order
//!   across inputs at its busiest.
//! - `wordcount, by hand` / `wordcount, pipeline`: `examples/wordcount.rs`
//!   and `examples/wordcount_dsl.rs`, two processors through `words`;
//!   records/s counts words.
//!
//! - `zipf count, write cache` / `…, no write cache`: the pipeline's
//!   count over `zipf`, 2 million records whose keys follow a Zipf law
//!   (s = 1.1) over 100,000 keys, with the runtime's write cache (one
//!   database write per key per commit) and without it (one per update);
//!   each also reports the store entries written per record.
//!
//! - the targets' floors, plain programs run beside the cases they bound:
//!   `windowed count by hand, durable` counts per key and 1 s window in
//!   a `HashMap`, closes each window once a record stamped past its end
//!   is read, and every 100,000 records (the default commit interval)
//!   puts the windows changed and deletes the windows closed in one
//!   synced RocksDB write batch, on a thread of its own while counting
//!   goes on; `join by hand, in memory` reads `profiles` into a `HashMap`
//!   and looks every record's key up in it, nothing durable and nothing
//!   emitted (what the lookups cost by themselves); `join by hand,
//!   durable`, the join target's floor, also emits every joined record
//!   exactly once as the runtime's design does: into batches committed
//!   with the position in a synced RocksDB write every 100,000 records,
//!   then appended to an output topic and synced, both on a thread of
//!   their own (the runtime ships on the task's; see
//!   `common/join_floor.rs`).
//!
//! `STRATA_BENCH_CASES` (`|`-separated parts of case names) runs only
//! the cases named (and the plain loop and HashMap count, the references).
//!
//! Each case runs `ROUNDS` times after a warm-up; the best round is
//! reported with its ratio to the plain loop's best (and, for the
//! pipelines, to their hand-written twin's).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

mod common;
mod summary;

use common::durable::{self, Counting, Writes};
use common::join_floor;

use strata::client::partitioner::partition_for_key;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{App, CommitInterval, Context, Location, Output, Record, Store};
use strata_operators::{Pipeline, Topic, Tumbling, Windowed};

const RECORDS: u64 = 2_000_000;
const LINES: u64 = 250_000;
const WORDS_PER_LINE: u64 = 8;
const ROUNDS: usize = 3;

const EVENTS: Topic<String, Vec<u8>> = Topic::new("events");
const ZIPF: Topic<String, Vec<u8>> = Topic::new("zipf");
/// The Zipf law's exponent for the write cache's input.
const ZIPF_S: f64 = 1.1;
const PROFILES: Topic<String, String> = Topic::new("profiles");
const PROFILE_UPDATES: Topic<String, String> = Topic::new("profile-updates");

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    common::write_input(&data, RECORDS)?;
    write_profiles(&data)?;
    write_lines(&data)?;
    write_zipf(&data)?;
    println!(
        "input: {RECORDS} records of 100 bytes, {} distinct keys; {} profiles; {LINES} lines of {WORDS_PER_LINE} words",
        common::KEYS,
        common::KEYS
    );
    common::plain_loop(&data, RECORDS)?; // warm-up
    let runtime = tokio::runtime::Runtime::new()?;
    let names = [
        "HashMap count",
        "count, by hand",
        "count, pipeline",
        "count + emit, by hand",
        "count + emit, pipeline",
        "windowed count, pipeline",
        "join, pipeline",
        "join, table updates interleaved",
        "wordcount, by hand",
        "wordcount, pipeline",
        "zipf count, write cache",
        "zipf count, no write cache",
        "windowed count by hand, durable",
        "join by hand, in memory",
        "join by hand, durable",
    ];
    // Store entries written per record, per write-cache case and round.
    let mut writes_per_record: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut rows: Vec<(String, Vec<f64>)> =
        names.iter().map(|n| (n.to_string(), Vec::new())).collect();
    let only: Vec<String> = std::env::var("STRATA_BENCH_CASES")
        .map(|cases| cases.split('|').map(str::to_string).collect())
        .unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|part| name.contains(part));
    let mut plain = Vec::new();
    for round in 0..ROUNDS {
        plain.push(common::plain_loop(&data, RECORDS)?);
        rows[0].1.push(common::hashmap_loop(&data, RECORDS)?);
        let zipf = [
            ("zipf count, write cache", true),
            ("zipf count, no write cache", false),
        ];
        for (at, (app, records)) in apps(round)?.into_iter().enumerate() {
            if !wanted(&rows[1 + at].0) {
                continue;
            }
            let location = Location::embedded(&data, app.name());
            let rate = if records == 0 {
                // The word counts: lines through split, then the words.
                let took = runtime.block_on(run_all(&app, &location))?;
                common::rate(LINES * WORDS_PER_LINE, took)
            } else {
                runtime.block_on(common::run_to_end(&app, &location, records))?
            };
            rows[1 + at].1.push(rate);
        }
        if wanted("windowed count, pipeline") {
            let state = dir.path().join(format!("windowed-floor-{round}"));
            let rate = durable::count_loop(
                &data,
                &state,
                RECORDS,
                CommitInterval::default().records,
                Counting::PerWindow { millis: 1_000 },
                Writes::Overlapped,
            )?;
            let row = rows
                .iter_mut()
                .find(|(n, _)| n == "windowed count by hand, durable");
            row.expect("named").1.push(rate);
        }
        if wanted("join, pipeline") {
            let row = rows
                .iter_mut()
                .find(|(n, _)| n == "join by hand, in memory");
            row.expect("named").1.push(join_in_memory(&data)?);
            let (state, out) = (
                dir.path().join(format!("join-floor-{round}")),
                format!("join-floor-out-{round}"),
            );
            let rate = join_floor::join_durable(
                &data,
                &state,
                (PROFILES.name(), common::KEYS),
                &out,
                RECORDS,
                CommitInterval::default().records,
            )?;
            let row = rows.iter_mut().find(|(n, _)| n == "join by hand, durable");
            row.expect("named").1.push(rate);
        }
        for (name, cache) in zipf.into_iter().filter(|(name, _)| wanted(name)) {
            let app = zipf_count(&format!("zipf-{cache}-{round}"), cache)?;
            let location = Location::embedded(&data, app.name());
            let summary =
                runtime.block_on(strata::runtime::ops::run(&app, &location, until_end()))?;
            anyhow::ensure!(
                summary.records == RECORDS,
                "{name}: {} records",
                summary.records
            );
            let row = rows.iter_mut().find(|(n, _)| n == name).expect("named");
            row.1.push(common::rate(RECORDS, summary.elapsed));
            let per_record = summary.store_writes as f64 / RECORDS as f64;
            writes_per_record.entry(name).or_default().push(per_record);
        }
    }
    let floor = common::best(&plain);
    let twin = |name: &str| -> Option<f64> {
        let hand = name.replace("pipeline", "by hand");
        rows.iter()
            .find(|(n, r)| *n == hand && !r.is_empty())
            .map(|(_, r)| common::best(r))
    };
    let ratios: Vec<String> = rows
        .iter()
        .filter(|(n, r)| n.ends_with("pipeline") && !r.is_empty())
        .filter_map(|(n, r)| {
            twin(n).map(|hand| format!("{n}: {:.2}x its hand-written twin", common::best(r) / hand))
        })
        .collect();
    let best_of = |name: &str| {
        let row = rows.iter().find(|(n, _)| n == name);
        common::best(&row.expect("a case of this bench").1)
    };
    let hashmap = best_of("HashMap count");
    let against_hashmap = |what: &str, factor, floor: &str| summary::Target {
        what: what.into(),
        measured: best_of(what),
        reference_name: "HashMap count".into(),
        reference: hashmap,
        factor,
        unit: "records/s",
        floor: Some(summary::Floor {
            name: floor.into(),
            value: best_of(floor),
        }),
    };
    let targets: Vec<summary::Target> = [
        (
            "windowed count, pipeline",
            0.5,
            "windowed count by hand, durable",
        ),
        ("join, pipeline", 0.6, "join by hand, durable"),
    ]
    .into_iter()
    .filter(|(what, _, _)| wanted(what))
    .map(|(what, factor, floor)| against_hashmap(what, factor, floor))
    .collect();
    common::print_rows(
        std::iter::once(("plain loop".to_string(), plain))
            .chain(rows.into_iter().filter(|(_, rates)| !rates.is_empty()))
            .map(|row| (row, floor)),
    );
    println!();
    for line in ratios {
        println!("{line}");
    }
    for (name, per_record) in &writes_per_record {
        let rounds: Vec<String> = per_record.iter().map(|w| format!("{w:.4}")).collect();
        println!("{name}: store writes per record {}", rounds.join(" "));
    }
    summary::report("operators", &targets)
}

/// The apps of one round with the records each processes (0: the word
/// counts, which count words), in the order of the rows after the
/// HashMap count.
fn apps(round: usize) -> anyhow::Result<Vec<(App, u64)>> {
    Ok(vec![
        (by_hand_count(&format!("hand-{round}"), None), RECORDS),
        (pipeline_count(&format!("dsl-{round}"), None)?, RECORDS),
        (
            by_hand_count(&format!("hand-emit-{round}"), Some(round)),
            RECORDS,
        ),
        (
            pipeline_count(&format!("dsl-emit-{round}"), Some(round))?,
            RECORDS,
        ),
        (windowed(&format!("window-{round}"), round)?, RECORDS),
        (
            join(&format!("join-{round}"), PROFILES, round)?,
            RECORDS + common::KEYS,
        ),
        (
            join(&format!("join-updates-{round}"), PROFILE_UPDATES, round)?,
            RECORDS + common::KEYS,
        ),
        (wordcount_by_hand(&format!("wc-hand-{round}"), round), 0),
        (wordcount_pipeline(&format!("wc-dsl-{round}"), round)?, 0),
    ])
}

fn until_end() -> strata::runtime::RunOptions {
    strata::runtime::RunOptions {
        until_end: true,
        ..Default::default()
    }
}

/// The pipeline's count over `zipf`, with or without the write cache.
fn zipf_count(name: &str, cache: bool) -> anyhow::Result<App> {
    let pipeline = Pipeline::new(name);
    pipeline
        .from(ZIPF)
        .named("count")
        .stored_as("counts")
        .count();
    Ok(pipeline.app()?.write_cache(cache))
}

/// `RECORDS` records of 90-byte values whose keys (out of `common::KEYS`)
/// follow a Zipf law with exponent `ZIPF_S`: key k drawn with weight
/// 1 / k^s, by a binary search of the cumulative weights.
fn write_zipf(data: &Path) -> anyhow::Result<()> {
    let mut cumulative = Vec::with_capacity(common::KEYS as usize);
    let mut total = 0.0;
    for k in 1..=common::KEYS {
        total += 1.0 / (k as f64).powf(ZIPF_S);
        cumulative.push(total);
    }
    let mut state = 0x51_7cc1_b727_220a_u64;
    let log = LogManager::open(data, LogConfig::default())?;
    let created = log.create_topic("zipf", 1, BTreeMap::new())?;
    let now = strata::log::now_ms();
    let value = [b'v'; 90];
    for chunk in 0..RECORDS / 1_000 {
        let mut builder = BatchBuilder::new(Compression::None);
        for _ in 0..1_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let uniform = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
            let k = cumulative.partition_point(|&c| c < uniform);
            let key = format!("key-{k:06}");
            let timestamp = now - (RECORDS / 1_000 - chunk) as i64;
            builder.push(NewRecord::new(Some(key.as_bytes()), &value, timestamp))?;
        }
        created.partitions[0].append(&builder.build()?)?;
    }
    created.partitions[0].flush()?;
    drop(created);
    log.close()?;
    Ok(())
}

/// Runs `app` until the end of its inputs, however many records that is.
async fn run_all(app: &App, location: &Location) -> anyhow::Result<Duration> {
    let options = strata::runtime::RunOptions {
        until_end: true,
        ..Default::default()
    };
    Ok(strata::runtime::ops::run(app, location, options)
        .await?
        .elapsed)
}

const COUNTS: Store<String, u64> = Store::new("counts");

fn by_hand_count(name: &str, emit: Option<usize>) -> App {
    let output = emit.map(|round| Output::<String, String>::named(&format!("{name}-out-{round}")));
    let app = App::new(name)
        .processor("count", common::count(COUNTS, output))
        .input("events")
        .store(COUNTS);
    match output {
        Some(output) => app.output(output),
        None => app,
    }
    .commit_interval(CommitInterval::default())
}

fn pipeline_count(name: &str, emit: Option<usize>) -> anyhow::Result<App> {
    let pipeline = Pipeline::new(name);
    let counts = pipeline
        .from(EVENTS)
        .named("count")
        .stored_as("counts")
        .count();
    // Without emit, the counts go nowhere: the count's step has no
    // children.
    if let Some(round) = emit {
        counts
            .map_values(|n| n.to_string())
            .to(Topic::<String, String>::named(&format!(
                "{name}-out-{round}"
            )));
    }
    Ok(pipeline.app()?)
}

fn windowed(name: &str, round: usize) -> anyhow::Result<App> {
    let pipeline = Pipeline::new(name);
    pipeline
        .from(EVENTS)
        .window(Tumbling::of(Duration::from_secs(1)).emit_on_close())
        .count()
        .map(|w: Windowed<String>, n| (w.key, n.to_string()))
        .to(Topic::<String, String>::named(&format!(
            "{name}-out-{round}"
        )));
    Ok(pipeline.app()?)
}

fn join(name: &str, table: Topic<String, String>, round: usize) -> anyhow::Result<App> {
    let pipeline = Pipeline::new(name);
    let profiles = pipeline.table(table);
    pipeline
        .from(EVENTS)
        .left_join(&profiles, |_, _, profile: Option<String>| {
            profile.unwrap_or_default()
        })
        .to(Topic::<String, String>::named(&format!(
            "{name}-out-{round}"
        )));
    Ok(pipeline.app()?)
}

fn wordcount_by_hand(name: &str, round: usize) -> App {
    let words = Output::<String, ()>::named(&format!("{name}-words-{round}"));
    let out = Output::<String, String>::named(&format!("{name}-counts-{round}"));
    let split = move |line: Record<Vec<u8>, String>, ctx: &mut Context| {
        for word in line.value.split_whitespace() {
            ctx.emit(words, word, &())?;
        }
        Ok(())
    };
    let count = move |word: Record<String, ()>, ctx: &mut Context| {
        let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + 1;
        ctx.put(COUNTS, &word.key, &n)?;
        ctx.emit(out, &word.key, &n.to_string())
    };
    App::new(name)
        .processor("split", split)
        .input("lines")
        .output(words)
        .processor("count", count)
        .input(words.topic())
        .store(COUNTS)
        .output(out)
}

fn wordcount_pipeline(name: &str, round: usize) -> anyhow::Result<App> {
    let pipeline = Pipeline::new(name);
    pipeline
        .from(Topic::<Vec<u8>, String>::new("lines"))
        .named("split")
        .flat_map(|_, line: String| {
            let words: Vec<(String, ())> = line
                .split_whitespace()
                .map(|w| (w.to_string(), ()))
                .collect();
            words
        })
        .through(Topic::named(&format!("{name}-words-{round}")))
        .named("count")
        .stored_as("counts")
        .count()
        .map_values(|n| n.to_string())
        .to(Topic::<String, String>::named(&format!(
            "{name}-counts-{round}"
        )));
    Ok(pipeline.app()?)
}

/// One row per key in `profiles`, one partition like `events`.
/// One row per key in `profiles`, stamped a minute before the first
/// event; the same rows in `profile-updates`, stamped evenly across the
/// events' time.
fn write_profiles(data: &Path) -> anyhow::Result<()> {
    let rows: Vec<(String, String)> = (0..common::KEYS)
        .map(|n| (format!("key-{n:06}"), format!("profile of {n}")))
        .collect();
    let (first, last) = events_span(data)?;
    write_keyed(data, "profiles", &rows, |_| first - 60_000)?;
    let step = (last - first) as f64 / rows.len() as f64;
    write_keyed(data, "profile-updates", &rows, |n| {
        first + (n as f64 * step) as i64
    })
}

/// The join's lookups alone, for reference (the target's floor is
/// `join_floor::join_durable`): `profiles` read into a `HashMap`, then
/// every record of `events` looked up in it and its row cloned, as the
/// join's output would carry it; records/s of the rows and events read,
/// as the join's case counts them (each read timed as the read loops are,
/// opening the log left out).
fn join_in_memory(data: &Path) -> anyhow::Result<f64> {
    let mut rows: HashMap<String, Vec<u8>> = HashMap::new();
    let table_rate = common::read_loop(data, "profiles", common::KEYS, |key, row| {
        rows.insert(key, row);
    })?;
    let mut found = 0u64;
    let events_rate = common::read_loop(data, "events", RECORDS, |key, value| {
        std::hint::black_box(&value);
        let row = rows.get(key.as_str()).cloned().unwrap_or_default();
        found += u64::from(!row.is_empty());
        std::hint::black_box(row);
    })?;
    anyhow::ensure!(found == RECORDS, "{found} of {RECORDS} records found a row");
    let took = common::KEYS as f64 / table_rate + RECORDS as f64 / events_rate;
    Ok((common::KEYS + RECORDS) as f64 / took)
}

/// The first and last timestamps of `events`.
fn events_span(data: &Path) -> anyhow::Result<(i64, i64)> {
    let log = LogManager::open(data, LogConfig::default())?;
    let events = log.partition("events", 0)?;
    let first = events.read(0, 1)?.read_to_vec()?;
    let last = events.read(events.log_end_offset() - 1, 1)?.read_to_vec()?;
    let header = |bytes: &[u8]| strata::record::BatchHeader::parse(bytes);
    let span = (header(&first)?.base_timestamp, header(&last)?.max_timestamp);
    drop(events);
    log.close()?;
    Ok(span)
}

/// `LINES` lines of `WORDS_PER_LINE` words out of 100,000, keyless.
fn write_lines(data: &Path) -> anyhow::Result<()> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let rows: Vec<(String, String)> = (0..LINES)
        .map(|_| {
            let words: Vec<String> = (0..WORDS_PER_LINE)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    format!("w{}", state % 100_000)
                })
                .collect();
            (String::new(), words.join(" "))
        })
        .collect();
    write_keyed(data, "lines", &rows, |_| strata::log::now_ms())
}

/// Writes `rows` to `topic` (one partition), row n stamped `stamp(n)`.
fn write_keyed(
    data: &Path,
    topic: &str,
    rows: &[(String, String)],
    stamp: impl Fn(usize) -> i64,
) -> anyhow::Result<()> {
    let log = LogManager::open(data, LogConfig::default())?;
    let created = log.create_topic(topic, 1, BTreeMap::new())?;
    for (at, chunk) in rows.chunks(1_000).enumerate() {
        let mut builder = BatchBuilder::new(Compression::None);
        for (n, (key, value)) in chunk.iter().enumerate() {
            let key = (!key.is_empty()).then_some(key.as_bytes());
            debug_assert_eq!(key.map_or(0, |k| partition_for_key(k, 1)), 0);
            let timestamp = stamp(at * 1_000 + n);
            builder.push(NewRecord::new(key, value.as_bytes(), timestamp))?;
        }
        created.partitions[0].append(&builder.build()?)?;
    }
    created.partitions[0].flush()?;
    drop(created);
    log.close()?;
    Ok(())
}
