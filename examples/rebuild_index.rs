//! Rebuilding a derived index from the log while the live one keeps
//! serving: a user → pages index over a clickstream, rebuilt after a bug
//! fix without stopping the app.
//!
//! `clicks` holds page views keyed by user, the value a URL. The index,
//! store `user-pages`, maps `<user>/<path>` to the user's views of that
//! path. An earlier build also indexed every URL with its query string
//! (`/item/7?ref=mail` beside `/item/7`, counted in both); the current
//! build indexes the path only. The demo:
//!
//! 1. the earlier build indexes the first clicks;
//! 2. the current build runs live, serving the Kafka protocol, and more
//!    clicks arrive through that port all along;
//! 3. a user's answer from the live index still shows the earlier build's
//!    entries;
//! 4. `rebuild` (through the app's Kafka port, since the running app holds
//!    the log directory) builds the index afresh from the log beside the
//!    live one; the running app swaps it in once it has caught up;
//! 5. the same user's answer, rebuilt, checked against the clickstream.
//!
//! ```text
//! cargo run --example rebuild_index                      # the demo, in ./strata-rebuild-demo
//! cargo run --example rebuild_index -- --data-dir DIR <command>   # the app's own commands
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser};
use strata::client::partitioner::partition_for_key;
use strata::client::{ClientConfig, Cluster, Producer, ProducerConfig, ProducerRecord};
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, Cli, Context, Location, ProcessError, RebuildOptions, Record, RunOptions, Store,
};

/// `run --serve` answers the Kafka protocol: a request claiming an absurd
/// length must not abort the app (see `strata::broker::HugeReservingAllocator`).
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

const DEMO_DIR: &str = "./strata-rebuild-demo";
const PARTITIONS: i32 = 4;
const USERS: u64 = 2_000;
const FIRST_CLICKS: u64 = 200_000;
const LIVE_CLICKS: u64 = 100_000;
const SHOWN: &str = "user-00007";

#[derive(Debug, Clone, Args)]
struct Build {
    /// Run the earlier build, which also indexes URLs with their query.
    #[arg(long)]
    earlier: bool,
}

const USER_PAGES: Store<String, u64> = Store::new("user-pages");

/// Counts views per user and URL path (the earlier build also per URL with
/// its query).
fn index(
    earlier: bool,
    click: Record<String, String>,
    ctx: &mut Context,
) -> Result<(), ProcessError> {
    let url = click.value.as_str();
    let path = url.split('?').next().unwrap_or(url);
    let mut keys = vec![format!("{}/{path}", click.key)];
    if earlier && path != url {
        keys.push(format!("{}/{url}", click.key));
    }
    for key in keys {
        let views = ctx.get(USER_PAGES, &key)?.unwrap_or(0) + 1;
        ctx.put(USER_PAGES, &key, &views)?;
    }
    Ok(())
}

fn app(earlier: bool) -> App {
    App::new("user-pages")
        .processor(
            "index",
            move |click: Record<String, String>, ctx: &mut Context| index(earlier, click, ctx),
        )
        .input("clicks")
        .store(USER_PAGES)
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    if std::env::args().len() > 1 {
        let cli = Cli::<Build>::parse();
        let app = app(cli.args.earlier);
        return Ok(strata::runtime::run_parsed(
            &app,
            &cli.location,
            &cli.command,
        ));
    }
    tokio::runtime::Runtime::new()?
        .block_on(demo())
        .map(|()| std::process::ExitCode::SUCCESS)
}

/// The clicks: user i's n-th click, the same on every run.
fn click(n: u64) -> (String, String) {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef;
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    let user = format!("user-{:05}", x % USERS);
    let item = (x >> 20) % 50;
    let url = match (x >> 40) % 3 {
        0 => format!("/item/{item}?ref=mail"),
        _ => format!("/item/{item}"),
    };
    (user, url)
}

/// `SHOWN`'s views per path in clicks `0..count`: the right answer.
fn expected(count: u64) -> BTreeMap<String, u64> {
    let mut views = BTreeMap::new();
    for n in 0..count {
        let (user, url) = click(n);
        if user == SHOWN {
            let path = url.split('?').next().unwrap_or(&url).to_string();
            *views.entry(format!("{user}/{path}")).or_default() += 1;
        }
    }
    views
}

/// `SHOWN`'s entries in the index, as `dump-state` has them.
fn answer(app: &App, location: &Location) -> anyhow::Result<BTreeMap<String, u64>> {
    let prefix = format!("user-pages\t{SHOWN}/");
    let mut entries = BTreeMap::new();
    for line in strata::runtime::ops::dump_state(app, location, Some("user-pages"))? {
        if line.starts_with(&prefix) {
            let mut fields = line.splitn(3, '\t').skip(1);
            let (key, views) = (fields.next().unwrap_or(""), fields.next().unwrap_or("0"));
            entries.insert(key.to_string(), views.parse()?);
        }
    }
    Ok(entries)
}

fn show(title: &str, entries: &BTreeMap<String, u64>) {
    let shown: Vec<String> = entries
        .iter()
        .take(8)
        .map(|(key, views)| format!("{}={views}", key.trim_start_matches(&format!("{SHOWN}/"))))
        .collect();
    println!(
        "   {title}: {} entries: {}{}",
        entries.len(),
        shown.join(" "),
        if entries.len() > 8 { " …" } else { "" }
    );
}

async fn demo() -> anyhow::Result<()> {
    let dir = Path::new(DEMO_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo in {DEMO_DIR}"))?;
    }
    write_clicks(dir, FIRST_CLICKS)?;
    let location = Location::embedded(dir, "user-pages");
    let until_end = RunOptions {
        until_end: true,
        ..RunOptions::default()
    };
    println!("1. the earlier build indexes the first {FIRST_CLICKS} clicks");
    strata::runtime::ops::run(&app(true), &location, until_end).await?;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let live = {
        let location = location.clone();
        // Port 0: the system picks a free one; the app writes it to
        // `<state>/serving`, where `Location::serving_addr` reads it.
        let options = RunOptions {
            serve: Some("127.0.0.1:0".parse()?),
            ..RunOptions::default()
        };
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&app(false), &location, options, stopped).await
        })
    };
    let addr = loop {
        if let Some(addr) = location.serving_addr() {
            break addr;
        }
        if live.is_finished() {
            live.await??;
            anyhow::bail!("the live app stopped before serving");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!(
        "2. the current build runs live, serving the Kafka protocol on {addr}; {LIVE_CLICKS} more clicks arrive through it"
    );
    let producer = tokio::spawn(produce(addr.to_string()));
    tokio::time::sleep(Duration::from_millis(300)).await;

    println!("3. {SHOWN}'s pages, from the live index (the earlier build's entries too):");
    show("live", &answer(&app(false), &location)?);

    println!(
        "4. rebuild, through the app's port:   rebuild --bootstrap {addr} --state-dir {}",
        location.state_dir().display()
    );
    let remote = Location::remote(&addr.to_string(), location.state_dir());
    let options = RebuildOptions {
        progress_every: Some(Duration::from_secs(1)),
        ..RebuildOptions::default()
    };
    let summary = strata::runtime::ops::rebuild(&app(false), &remote, options).await?;
    println!(
        "   {} tasks rebuilt from {} records in {:.1} s while the app kept running; the running app swapped in {}",
        summary.tasks,
        summary.records,
        summary.elapsed.as_secs_f64(),
        summary.handed_over
    );
    let sent = producer.await??;
    // Let the live app finish the clicks that arrived, then stop it.
    loop {
        let rows = strata::runtime::ops::status(&app(false), &location).await?;
        if rows.iter().all(|r| r.lag() == Some(0)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("5. {SHOWN}'s pages, rebuilt (and kept up to date since):");
    let rebuilt = answer(&app(false), &location)?;
    show("rebuilt", &rebuilt);
    let right = expected(FIRST_CLICKS + sent);
    println!(
        "   {} the clickstream ({} clicks)",
        if rebuilt == right {
            "matches"
        } else {
            "DOES NOT match"
        },
        FIRST_CLICKS + sent
    );
    let _ = stop.send(());
    live.await??;
    anyhow::ensure!(rebuilt == right, "the rebuilt index is wrong");
    let me = "cargo run --example rebuild_index --";
    println!(
        "\nNext:\n  {me} --data-dir {DEMO_DIR} status\n  {me} --data-dir {DEMO_DIR} dump-state | grep {SHOWN}/\n  {me} --data-dir {DEMO_DIR} rebuild          # again, the app stopped: the rebuild swaps itself"
    );
    Ok(())
}

/// Appends clicks `0..count` to `clicks`, each to its user's partition.
fn write_clicks(dir: &Path, count: u64) -> anyhow::Result<()> {
    let log = LogManager::open(dir, LogConfig::default())?;
    let topic = log.create_topic("clicks", PARTITIONS, BTreeMap::new())?;
    // Recent timestamps: retention (7 days) would delete older ones.
    let now = strata::log::now_ms();
    let mut partitions: Vec<Vec<(String, String)>> = vec![Vec::new(); PARTITIONS as usize];
    for n in 0..count {
        let (user, url) = click(n);
        partitions[partition_for_key(user.as_bytes(), PARTITIONS) as usize].push((user, url));
    }
    for (partition, clicks) in topic.partitions.iter().zip(&partitions) {
        for chunk in clicks.chunks(1000) {
            let mut builder = BatchBuilder::new(Compression::Lz4);
            for (user, url) in chunk {
                builder.push(NewRecord::new(Some(user.as_bytes()), url.as_bytes(), now))?;
            }
            partition.append(&builder.build()?)?;
        }
    }
    log.close()?;
    Ok(())
}

/// Sends clicks `FIRST_CLICKS..` through the Kafka port, a slice at a time,
/// until `LIVE_CLICKS` are sent; returns how many were.
async fn produce(bootstrap: String) -> anyhow::Result<u64> {
    let cluster = loop {
        match Cluster::connect(ClientConfig::new(&bootstrap)).await {
            Ok(cluster) => break cluster,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let producer = Producer::new(cluster, ProducerConfig::default()).await?;
    let mut sent = 0;
    while sent < LIVE_CLICKS {
        for _ in 0..5_000 {
            let (user, url) = click(FIRST_CLICKS + sent);
            let record = ProducerRecord::new("clicks", Some(user.as_bytes()), url.as_bytes());
            drop(producer.send(record).await?);
            sent += 1;
        }
        producer.flush().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    producer.close().await;
    Ok(sent)
}
