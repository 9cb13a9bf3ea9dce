//! The `strata` commands that talk to a broker (strata or any Kafka
//! cluster) through the client: `topics`, `produce`, `consume`, `groups`
//! and `bench`. Each takes `--bootstrap ADDR[,ADDR…]` (default
//! `127.0.0.1:9092`, or `STRATA_BOOTSTRAP`). Tables for terminals, `--format
//! json` for scripts; errors name what failed (the broker that cannot be
//! reached, the unknown topic, the bad offset).

mod bench;
mod consume;
mod groups;
mod position;
mod produce;
mod topics;

use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};

use crate::client::{ClientConfig, Cluster};

pub use bench::BenchCommand;
pub use consume::ConsumeArgs;
pub use groups::GroupsCommand;
pub use position::StartAt;
pub use produce::ProduceArgs;
pub use topics::TopicsCommand;

/// Where the cluster is.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// Broker addresses to bootstrap from (comma-separated).
    #[arg(
        long,
        env = "STRATA_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap: String,
}

impl BrokerArgs {
    /// Connects to the first reachable bootstrap broker.
    pub async fn connect(&self) -> anyhow::Result<Arc<Cluster>> {
        let mut config = ClientConfig::new(&self.bootstrap);
        config.client_id = "strata-cli".into();
        config.retries = 3;
        Cluster::connect(config)
            .await
            .map_err(|error| anyhow::anyhow!("cannot connect to {}: {error}", self.bootstrap))
    }
}

/// How listings are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Aligned columns for a terminal.
    #[default]
    Text,
    /// One JSON document, for scripts.
    Json,
}

/// The broker-facing commands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create, list, describe and delete topics.
    Topics {
        #[command(subcommand)]
        command: TopicsCommand,
    },
    /// Produce stdin to a topic, one record per line.
    Produce(ProduceArgs),
    /// Print a topic's records.
    Consume(ConsumeArgs),
    /// List, describe and delete consumer groups, and reset their offsets.
    Groups {
        #[command(subcommand)]
        command: GroupsCommand,
    },
    /// Measure produce or consume throughput and latency.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

/// Runs a broker-facing command.
pub async fn run(broker: &BrokerArgs, command: ClientCommand) -> anyhow::Result<()> {
    match command {
        ClientCommand::Topics { command } => topics::run(broker, command).await,
        ClientCommand::Produce(args) => produce::run(broker, args).await,
        ClientCommand::Consume(args) => consume::run(broker, args).await,
        ClientCommand::Groups { command } => groups::run(broker, command).await,
        ClientCommand::Bench { command } => bench::run(broker, command).await,
    }
}

/// Prints rows as aligned columns under `header`.
pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let text: Vec<String> = cells
            .into_iter()
            .enumerate()
            .map(|(i, cell)| {
                if i == last {
                    cell
                } else {
                    format!("{cell:<width$}", width = widths[i])
                }
            })
            .collect();
        println!("{}", text.join("  "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// Prints a JSON value on one line.
pub(crate) fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

/// Bytes as JSON: a string when they are UTF-8, else `{"hex": "…"}`.
pub(crate) fn bytes_json(bytes: Option<&[u8]>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::Value::String(text.to_string()),
            Err(_) => {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                serde_json::json!({ "hex": hex })
            }
        },
    }
}

/// Parses `key=value`.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got '{s}'"))
}
