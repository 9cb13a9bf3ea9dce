//! The `strata` command line: parses the arguments and hands each command
//! to its library call in [`strata::cli`].

use clap::{Parser, Subcommand};

/// Requests that claim absurd array lengths must not abort the process (see
/// the allocator's docs).
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "A stream-processing runtime on a durable, Kafka-compatible log"
)]
struct Cli {
    #[command(flatten)]
    broker: strata::cli::BrokerArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the log over the Kafka protocol until SIGTERM or Ctrl-C.
    Serve(strata::cli::ServeArgs),
    #[command(flatten)]
    Client(strata::cli::ClientCommand),
    /// Work directly on a log data directory (no broker; the directory must
    /// not be in use by another process).
    Log(strata::cli::LogArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => strata::cli::serve(args),
        Command::Log(args) => strata::cli::run_log(args),
        Command::Client(command) => tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(strata::cli::run(&cli.broker, command))),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
