//! The quickstart (`make demo`): a clickstream in an embedded log, a
//! pipeline that keeps a derived index of it in RocksDB, exactly once, and a
//! stream of the index's changes appended back to the log.
//!
//! Every run appends a fresh slice of page views to `clicks` (keyed by user,
//! skewed: a few pages and users get most of the traffic), then runs the app
//! until everything in the log has flowed through it:
//!
//! - `visits` reads `clicks`, keeps `user-pages` (user → distinct pages
//!   seen) and `seen` (user + page → first view), re-keys every view by page
//!   into `page-views`, and appends `{"user", "distinct_pages"}` to
//!   `index-changes` whenever a user reaches a new page;
//! - `pages` reads `page-views`, keeps `views` (page → view count) and
//!   appends `{"page", "views"}` to `index-changes` at every view.
//!
//! A second run resumes where the first stopped: only the new views are
//! processed, and the counts go on from the committed ones.
//!
//! ```text
//! cargo run --example quickstart [-- --data-dir DIR --views N]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;
use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{App, Context, Location, Output, ProcessError, Record, RunOptions, Store};

#[derive(Debug, Parser)]
struct Options {
    /// The log directory (created if missing).
    #[arg(long, default_value = "./strata-data")]
    data_dir: PathBuf,
    /// Page views to append to `clicks` on this run.
    #[arg(long, default_value_t = 200_000)]
    views: u64,
}

const PARTITIONS: i32 = 4;
const USERS: u64 = 20_000;
const PAGES: u64 = 2_000;

/// One page view, as JSON in `clicks`.
#[derive(Debug, Serialize, Deserialize)]
struct PageView {
    user: String,
    page: String,
    ts: i64,
}

/// `index-changes` records: keys as they are, values as JSON.
#[derive(Serialize, Deserialize)]
struct UserChange {
    user: String,
    distinct_pages: u64,
}

#[derive(Serialize, Deserialize)]
struct PageChange {
    page: String,
    views: u64,
}

const SEEN: Store<String, i64> = Store::new("seen");
const USER_PAGES: Store<String, u64> = Store::new("user-pages");
const VIEWS: Store<String, u64> = Store::new("views");
const PAGE_VIEWS: Output<String, String> = Output::new("page-views");
const USER_CHANGES: Output<String, UserChange> =
    Output::new("index-changes").codecs(Codec::Raw, Codec::Json);
const PAGE_CHANGES: Output<String, PageChange> =
    Output::new("index-changes").codecs(Codec::Raw, Codec::Json);

fn visits(click: Record<String, Vec<u8>>, ctx: &mut Context) -> Result<(), ProcessError> {
    let view: PageView = serde_json::from_slice(&click.value)?;
    let first_visit = format!("{}\t{}", view.user, view.page);
    if ctx.get(SEEN, &first_visit)?.is_none() {
        ctx.put(SEEN, &first_visit, &view.ts)?;
        let distinct_pages = ctx.get(USER_PAGES, &view.user)?.unwrap_or(0) + 1;
        ctx.put(USER_PAGES, &view.user, &distinct_pages)?;
        let user = view.user.clone();
        ctx.emit(
            USER_CHANGES,
            &view.user,
            &UserChange {
                user,
                distinct_pages,
            },
        )?;
    }
    ctx.emit(PAGE_VIEWS, &view.page, &view.user)
}

fn pages(view: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let views = ctx.get(VIEWS, &view.key)?.unwrap_or(0) + 1;
    ctx.put(VIEWS, &view.key, &views)?;
    let page = view.key.clone();
    ctx.emit(PAGE_CHANGES, &view.key, &PageChange { page, views })
}

fn app() -> App {
    App::new("quickstart")
        .processor("visits", visits)
        .input("clicks")
        .store(SEEN)
        .store(USER_PAGES)
        .output(PAGE_VIEWS)
        .output(USER_CHANGES)
        .processor("pages", pages)
        .input("page-views")
        .store(VIEWS)
        .output(PAGE_CHANGES)
}

fn main() -> anyhow::Result<()> {
    let options = Options::parse();
    let data_dir = &options.data_dir;
    println!("data directory: {}", data_dir.display());

    let (from, to) = append_clicks(data_dir, options.views)?;
    println!(
        "appended {} page views to `clicks` ({PARTITIONS} partitions, {USERS} users, {PAGES} pages, skewed); offsets now {from} → {to} in total",
        options.views
    );

    let app = app();
    let location = Location::embedded(data_dir, app.name());
    let runtime = tokio::runtime::Runtime::new()?;
    let run = RunOptions {
        until_end: true,
        progress_every: Some(std::time::Duration::from_secs(2)),
        ..RunOptions::default()
    };
    println!("running `visits` → `page-views` → `pages` until the log is drained…");
    let summary = runtime.block_on(strata::runtime::ops::run(&app, &location, run))?;
    let seconds = summary.elapsed.as_secs_f64();
    println!(
        "processed {} records in {seconds:.2} s ({:.0} records/s, {} tasks), state and offsets committed together in RocksDB",
        summary.records,
        summary.records as f64 / seconds.max(1e-9),
        summary.tasks
    );

    print_queries(&app, &location)?;

    let dir = data_dir.display();
    println!("\nnext:");
    println!(
        "  make demo                                    # again: appends more views, resumes from the committed offsets"
    );
    println!(
        "  cargo run -- log consume index-changes --data-dir {dir} | tail   # the derived stream, from the files"
    );
    println!(
        "  cargo run -- serve --data-dir {dir}         # then, from another terminal, over the Kafka protocol:"
    );
    println!("    cargo run -- consume index-changes --from earliest --end | tail");
    println!("    kcat -C -b 127.0.0.1:9092 -t index-changes -o -5 -e");
    println!(
        "  cargo run --example wordcount -- --help      # another app: run, status, dump-state, rebuild, replay, diff, promote"
    );
    Ok(())
}

/// Appends `views` page views; returns the total end offsets before and
/// after.
fn append_clicks(data_dir: &Path, views: u64) -> anyhow::Result<(i64, i64)> {
    let log = LogManager::open(data_dir, LogConfig::default())
        .with_context(|| format!("opening the log in {}", data_dir.display()))?;
    let topic = match log.topic("clicks") {
        Some(topic) => topic,
        None => log.create_topic("clicks", PARTITIONS, BTreeMap::new())?,
    };
    let partitions = &topic.partitions;
    let before: i64 = partitions.iter().map(|p| p.log_end_offset()).sum();
    let mut rng = Rng(before as u64 ^ 0x9e37_79b9_7f4a_7c15);
    let now = strata::log::now_ms();
    let mut builders: Vec<BatchBuilder> = partitions
        .iter()
        .map(|_| BatchBuilder::new(Compression::Lz4))
        .collect();
    for i in 0..views {
        let user = format!("user-{}", rng.skewed(USERS));
        let page = format!("/page/{}", rng.skewed(PAGES));
        let ts = now - (views - i) as i64;
        let value = serde_json::to_vec(&PageView {
            user: user.clone(),
            page,
            ts,
        })?;
        let at = strata::client::partitioner::partition_for_key(
            user.as_bytes(),
            partitions.len() as i32,
        ) as usize;
        builders[at].push(NewRecord::new(Some(user.as_bytes()), &value, ts))?;
        if builders[at].len() >= 2_000 {
            let full = std::mem::replace(&mut builders[at], BatchBuilder::new(Compression::Lz4));
            partitions[at].append(&full.build()?)?;
        }
    }
    for (at, builder) in builders.into_iter().enumerate() {
        if !builder.is_empty() {
            partitions[at].append(&builder.build()?)?;
        }
    }
    for partition in partitions {
        partition.flush()?;
    }
    let after = partitions.iter().map(|p| p.log_end_offset()).sum();
    log.close()?;
    Ok((before, after))
}

/// Top entries of the index, read from the committed state.
fn print_queries(app: &App, location: &Location) -> anyhow::Result<()> {
    let top = |store: &str| -> anyhow::Result<Vec<(u64, String)>> {
        let mut rows: Vec<(u64, String)> =
            strata::runtime::ops::dump_state(app, location, Some(store))?
                .into_iter()
                .filter_map(|line| {
                    let mut fields = line.split('\t').skip(1);
                    let key = fields.next()?.to_string();
                    Some((fields.next()?.parse().ok()?, key))
                })
                .collect();
        rows.sort_by(|a, b| b.cmp(a));
        rows.truncate(5);
        Ok(rows)
    };
    println!("\nmost viewed pages (store `views`):");
    for (views, page) in top("views")? {
        println!("  {page:<12} {views:>8} views");
    }
    println!("users with the most distinct pages (store `user-pages`):");
    for (pages, user) in top("user-pages")? {
        println!("  {user:<12} {pages:>8} pages");
    }
    Ok(())
}

/// splitmix64: enough randomness for a demo, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 0..n, heavily skewed towards small numbers (u³ of a uniform u).
    fn skewed(&mut self, n: u64) -> u64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * u) * n as f64) as u64
    }
}
