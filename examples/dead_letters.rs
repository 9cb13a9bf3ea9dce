//! Dead letters: a processor with a bug in its parser runs with
//! `.on_error(OnError::dead_letter())`, so the orders it cannot handle go
//! to its dead-letter topic, with where they were and why, while every
//! other order is totalled; `dlq list` and `dlq show` say what failed, and
//! after the fix (`--fixed`) `dlq replay` totals those orders, exactly once.
//!
//! The app totals each customer's orders (`orders`, keyed by customer, the
//! value the amount in cents as text). Its parser takes whole cents only:
//! an amount written with a decimal point (`12.50`) fails it. Values that
//! are not UTF-8 fail the input's codec before the processor sees them.
//! The fixed build (the app's flag `--fixed`) rounds such an amount to the
//! nearest cent.
//!
//! ```text
//! cargo run --example dead_letters                         # the whole story, in ./strata-dlq-demo
//! cargo run --example dead_letters -- --data-dir DIR <command>   # the app's own commands
//! cargo run --example dead_letters -- --data-dir DIR --fixed dlq replay total --kind process
//! ```
//!
//! Its output carries provenance: `explain customer-totals P OFFSET`
//! names the order each total came from.
//!
//! With a command, the binary is the app and takes every subcommand apps
//! get (`run`, `status`, `dlq list`, `dlq show`, `dlq replay`, `explain`,
//! ...), with the fixed parser when given `--fixed`, embedded
//! (`--data-dir`) or remote (`--bootstrap`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use clap::Parser;
use strata::client::partitioner::partition_for_key;
use strata::log::{LogConfig, LogManager};
use strata::record::codec::Codec;
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, CheckpointArgs, Cli, Command, CommitArgs, Context, DlqCommand, GroupArgs, LocationArgs,
    OnError, Output, ProcessError, Record, Store, Topic,
};

const DEMO_DIR: &str = "./strata-dlq-demo";
const PARTITIONS: i32 = 3;
const ORDERS_IN: u64 = 3_000;

const ORDERS: Topic<String, String> = Topic::new("orders").codecs(Codec::Utf8, Codec::Utf8);
const TOTALS: Store<String, u64> = Store::new("totals");
const CUSTOMER_TOTALS: Output<String, String> = Output::new("customer-totals");

/// The app's own flags.
#[derive(Debug, Clone, clap::Args)]
struct Build {
    /// The fixed build: amounts with a decimal point are rounded to the
    /// nearest cent.
    #[arg(long, global = true)]
    fixed: bool,
}

/// Adds the order's cents to its customer's total. The bug: amounts with
/// a decimal point do not parse.
fn total(order: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let cents: u64 = (order.value.trim().parse())
        .map_err(|e| ProcessError::msg(format!("amount {:?}: {e}", order.value)))?;
    add(order.key, cents, ctx)
}

/// `total` after the fix: an amount with a decimal point is rounded to the
/// nearest cent (half up).
fn total_fixed(order: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let amount = order.value.trim();
    let bad = |e: std::num::ParseIntError| ProcessError::msg(format!("amount {amount:?}: {e}"));
    let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
    let mut cents: u64 = whole.parse().map_err(bad)?;
    if !fraction.is_empty() {
        fraction.parse::<u64>().map_err(bad)?;
        cents += u64::from(fraction.as_bytes()[0] >= b'5');
    }
    add(order.key, cents, ctx)
}

fn add(customer: String, cents: u64, ctx: &mut Context) -> Result<(), ProcessError> {
    let sum = ctx.get(TOTALS, &customer)?.unwrap_or(0) + cents;
    ctx.put(TOTALS, &customer, &sum)?;
    ctx.emit(CUSTOMER_TOTALS, &customer, &sum.to_string())
}

fn app(build: &Build) -> App {
    let total = match build.fixed {
        true => total_fixed,
        false => total,
    };
    App::new("orders")
        .processor("total", total)
        .input(ORDERS)
        .store(TOTALS)
        .output(CUSTOMER_TOTALS)
        .provenance()
        .on_error(OnError::dead_letter())
}

/// Order `i`: (customer, value bytes). One in 97 has a decimal point, one
/// in 211 is not UTF-8.
fn order(i: u64) -> (String, Vec<u8>) {
    let customer = format!("customer-{}", i % 40);
    let value = if i % 97 == 13 {
        format!("{}.50", i % 100).into_bytes()
    } else if i % 211 == 7 {
        vec![0xff, 0xfe, b'1']
    } else {
        (i % 100 * 10).to_string().into_bytes()
    };
    (customer, value)
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    if std::env::args().len() > 1 {
        let cli = Cli::<Build>::parse();
        return Ok(strata::runtime::run_parsed(
            &app(&cli.args),
            &cli.location,
            &cli.command,
        ));
    }
    demo().map(|()| std::process::ExitCode::SUCCESS)
}

fn demo() -> anyhow::Result<()> {
    let dir = Path::new(DEMO_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo in {DEMO_DIR}"))?;
    }
    seed(dir)?;
    let location = LocationArgs {
        data_dir: Some(dir.to_path_buf()),
        ..LocationArgs::default()
    };
    let (buggy, fixed) = (app(&Build { fixed: false }), app(&Build { fixed: true }));
    let run = |app: &App, command: Command| strata::runtime::cli::execute(app, &location, &command);
    println!("1. {ORDERS_IN} orders in {DEMO_DIR}; the app totals them:   run --until-end");
    run(
        &buggy,
        Command::Run {
            until_end: true,
            serve: None,
            metrics: None,
            query: None,
            console: None,
            http: Default::default(),
            commit: CommitArgs::default(),
            checkpoints: CheckpointArgs::default(),
            group: GroupArgs::default(),
        },
    )?;
    println!("\n2. what failed, by kind:   dlq list");
    run(
        &buggy,
        Command::Dlq {
            command: DlqCommand::List { version: None },
        },
    )?;
    println!("\n3. the newest letters, each with where it was and why:   dlq show --limit 3");
    run(
        &buggy,
        Command::Dlq {
            command: DlqCommand::Show {
                processor: None,
                limit: 3,
                version: None,
            },
        },
    )?;
    println!(
        "\n4. the parser fixed, the orders it failed on totalled, exactly once:   --fixed dlq replay total --kind process"
    );
    run(
        &fixed,
        Command::Dlq {
            command: DlqCommand::Replay {
                processor: "total".into(),
                kind: Some("process".into()),
                from: None,
                to: None,
                version: None,
                commit: CommitArgs::default(),
            },
        },
    )?;
    println!(
        "\n5. what is left (values that are not UTF-8 fail the codec, fix or not):   dlq list"
    );
    run(
        &fixed,
        Command::Dlq {
            command: DlqCommand::List { version: None },
        },
    )?;
    let me = "cargo run --example dead_letters --";
    println!(
        "\nNext:\n  {me} --data-dir {DEMO_DIR} dlq show --limit 20\n  cargo run -- log --data-dir {DEMO_DIR} consume orders-total-dlq --partition 0"
    );
    Ok(())
}

/// Writes the orders into a fresh embedded log at `dir`, each partition's
/// in batches of 100.
fn seed(dir: &Path) -> anyhow::Result<()> {
    let log = LogManager::open(dir, LogConfig::default())?;
    let topic = log.create_topic("orders", PARTITIONS, BTreeMap::new())?;
    // Recent timestamps: retention (7 days) would delete older ones.
    let now = strata::log::now_ms();
    let mut orders: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); PARTITIONS as usize];
    for i in 0..ORDERS_IN {
        let (customer, value) = order(i);
        let partition = partition_for_key(customer.as_bytes(), PARTITIONS) as usize;
        orders[partition].push((customer, value));
    }
    for (partition, orders) in topic.partitions.iter().zip(&orders) {
        for chunk in orders.chunks(100) {
            let mut builder = BatchBuilder::new(Compression::Lz4);
            for (customer, value) in chunk {
                builder.push(NewRecord::new(Some(customer.as_bytes()), value, now))?;
            }
            partition.append(&builder.build()?)?;
        }
    }
    log.close()?;
    Ok(())
}
