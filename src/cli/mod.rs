//! The `strata` commands, as library calls that `main.rs` dispatches to:
//! `serve` (the broker), `log` (a data directory, no broker), and the
//! commands that talk to a broker (strata or any Kafka cluster) through the
//! client: `topics`, `produce`, `consume`, `groups`, `users`, `acls` and `bench`
//! (`users` can also edit a data directory directly). Those take
//! `--bootstrap ADDR[,ADDR…]` (default `127.0.0.1:9092`, or
//! `STRATA_BOOTSTRAP`) and the security flags of [`SecurityArgs`]
//! (`--security-protocol`, `--ssl-ca-location`, `--sasl-username`, …,
//! `--client-properties FILE`). Tables for terminals, `--format json` for scripts;
//! errors name what failed (the broker that cannot be reached, the unknown
//! topic, the bad offset).

mod acls;
mod args;
mod bench;
mod consume;
mod groups;
mod log_dir;
mod not_authorized;
mod output;
mod password;
mod position;
mod produce;
mod serve;
mod skew;
mod topics;
mod users;

use clap::Subcommand;

pub use crate::runtime::cli::SecurityArgs;
pub use acls::AclsCommand;
pub use args::{BrokerArgs, Format, parse_key_value};
pub use bench::BenchCommand;
pub use consume::ConsumeArgs;
pub use groups::GroupsCommand;
pub use log_dir::{LogArgs, LogCommand, run as run_log};
pub use not_authorized::{NotAuthorized, Resource};
pub(crate) use output::{Align, bytes_json, print_json, print_table, table_lines};
pub use password::PASSWORD_ENV;
pub use position::StartAt;
pub use produce::ProduceArgs;
pub use serve::{ServeArgs, run as serve};
pub use topics::TopicsCommand;
pub use users::{StoreArgs, UsersCommand};

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
    /// Add, delete and list the users SASL/SCRAM and SASL/PLAIN
    /// authenticate (through the broker, or a data directory directly).
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Add, remove and list the broker's ACLs (kafka-acls' flags).
    Acls {
        #[command(subcommand)]
        command: AclsCommand,
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
        ClientCommand::Users { command } => users::run(broker, command).await,
        ClientCommand::Acls { command } => acls::run(broker, command).await,
        ClientCommand::Bench { command } => bench::run(broker, command).await,
    }
}
