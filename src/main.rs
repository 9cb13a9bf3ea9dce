//! The `strata` command line.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

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
    Serve {
        /// The log's data directory [default: ./strata-data].
        #[arg(long, env = "STRATA_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Address to listen on [default: 127.0.0.1:9092].
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Host clients are told to connect to [default: 127.0.0.1].
        #[arg(long)]
        advertised_host: Option<String>,
        /// A strata.toml with broker settings and topic defaults; flags win.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve Prometheus metrics on this address (off by default).
        #[arg(long)]
        metrics: Option<std::net::SocketAddr>,
    },
    #[command(flatten)]
    Client(strata::cli::ClientCommand),
    /// Work directly on a log data directory (no broker; the directory must
    /// not be in use by another process).
    Log {
        /// The log's data directory.
        #[arg(
            long,
            env = "STRATA_DATA_DIR",
            default_value = "./strata-data",
            global = true
        )]
        data_dir: PathBuf,
        #[command(subcommand)]
        command: LogCommand,
    },
}

#[derive(Subcommand)]
enum LogCommand {
    /// Create a topic.
    CreateTopic {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Kafka-named topic config, e.g. retention.ms=60000 (repeatable).
        #[arg(long = "config", value_parser = strata::cli::parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// Delete a topic and its data.
    DeleteTopic { name: String },
    /// List topics with their partitions, offsets and sizes.
    Describe,
    /// Append stdin to a partition, one record per line.
    Produce {
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// Split each line into key and value at the first occurrence.
        #[arg(long)]
        key_separator: Option<String>,
        /// none, gzip, snappy, lz4 or zstd.
        #[arg(long, default_value = "none")]
        compression: String,
        /// Records per batch.
        #[arg(long, default_value_t = 1000)]
        batch_records: usize,
    },
    /// Print records of a partition, one per line.
    Consume {
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// First offset to print (default: the log start).
        #[arg(long)]
        from: Option<i64>,
        /// Print offset, timestamp and key before the value.
        #[arg(long)]
        verbose: bool,
    },
    /// Print the offset of the first record with a timestamp at or after TS (ms).
    OffsetForTime {
        topic: String,
        timestamp_ms: i64,
        #[arg(long, default_value_t = 0)]
        partition: i32,
    },
    /// Delete segments past their topic's retention.
    Retention,
    /// Read every batch of every partition and check its CRC and offsets;
    /// exits with status 1 if any partition is corrupt.
    Verify,
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
        Command::Serve {
            data_dir,
            listen,
            advertised_host,
            config,
            metrics,
        } => serve(data_dir, listen, advertised_host, config, metrics),
        Command::Log { data_dir, command } => run_log_command(&data_dir, command),
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

fn serve(
    data_dir: Option<PathBuf>,
    listen: Option<std::net::SocketAddr>,
    advertised_host: Option<String>,
    config_path: Option<PathBuf>,
    metrics: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let mut config = strata::broker::BrokerConfig::default();
    let mut file_data_dir = None;
    if let Some(path) = &config_path {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file = strata::broker::ConfigFile::parse(&text)
            .and_then(|file| file.apply(&mut config).map(|()| file))
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        file_data_dir = file.data_dir;
    }
    if let Some(listen) = listen {
        config.listen = listen;
    }
    if let Some(host) = advertised_host {
        config.advertised_host = host;
    }
    if metrics.is_some() {
        config.metrics_listen = metrics;
    }
    let data_dir = data_dir
        .or(file_data_dir)
        .unwrap_or_else(|| PathBuf::from("./strata-data"));
    let log = std::sync::Arc::new(
        LogManager::open(&data_dir, config.log.clone())
            .with_context(|| format!("opening data directory {}", data_dir.display()))?,
    );
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    runtime.block_on(async {
        // Watching for signals starts before the port opens: a SIGTERM sent
        // as soon as the broker accepts connections must stop it cleanly.
        let signalled = shutdown_signal()?;
        let broker = strata::broker::Broker::bind(config, std::sync::Arc::clone(&log)).await?;
        println!("strata listening on {}", broker.local_addr());
        if let Some(metrics) = broker.metrics_addr() {
            println!("metrics on http://{metrics}/metrics");
        }
        broker.serve(signalled).await?;
        anyhow::Ok(())
    })?;
    drop(runtime);
    let log = std::sync::Arc::try_unwrap(log)
        .map_err(|_| anyhow::anyhow!("the log is still in use at shutdown"))?;
    log.close().context("closing the log")?;
    eprintln!("strata stopped cleanly");
    Ok(())
}

/// A future that completes on SIGTERM or Ctrl-C; both are watched from the
/// moment this returns.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("watching SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("watching SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}

fn run_log_command(data_dir: &std::path::Path, command: LogCommand) -> anyhow::Result<()> {
    let manager = LogManager::open(data_dir, LogConfig::default())
        .with_context(|| format!("opening data directory {}", data_dir.display()))?;
    let result = run_on(&manager, command);
    manager.close().context("closing the log")?;
    result
}

fn run_on(manager: &LogManager, command: LogCommand) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match command {
        LogCommand::CreateTopic {
            name,
            partitions,
            configs,
        } => {
            let topic = manager.create_topic(
                &name,
                partitions,
                configs.into_iter().collect::<BTreeMap<_, _>>(),
            )?;
            writeln!(
                out,
                "created topic {name} ({partitions} partitions, id {})",
                topic.id()
            )?;
        }
        LogCommand::DeleteTopic { name } => {
            manager.delete_topic(&name)?;
            writeln!(out, "deleted topic {name}")?;
        }
        LogCommand::Describe => {
            writeln!(
                out,
                "{:<30} {:>9} {:>12} {:>12} {:>9} {:>12}",
                "TOPIC", "PARTITION", "LOG-START", "LOG-END", "SEGMENTS", "BYTES"
            )?;
            for topic in manager.topics() {
                for (p, partition) in topic.partitions.iter().enumerate() {
                    writeln!(
                        out,
                        "{:<30} {:>9} {:>12} {:>12} {:>9} {:>12}",
                        topic.name(),
                        p,
                        partition.log_start_offset(),
                        partition.log_end_offset(),
                        partition.segment_count(),
                        partition.size_bytes()
                    )?;
                    if let Some(corruption) = partition.corruption() {
                        writeln!(out, "  CORRUPT: {corruption}")?;
                    }
                }
            }
        }
        LogCommand::Produce {
            topic,
            partition,
            key_separator,
            compression,
            batch_records,
        } => {
            let codec = Compression::from_name(&compression)
                .with_context(|| format!("unknown compression '{compression}'"))?;
            let log = manager.partition(&topic, partition)?;
            let mut lines = Vec::new();
            let mut appended = 0usize;
            for line in std::io::stdin().lock().lines() {
                lines.push(line.context("reading stdin")?);
                if lines.len() >= batch_records.max(1) {
                    appended += append_lines(&log, &lines, key_separator.as_deref(), codec)?;
                    lines.clear();
                }
            }
            appended += append_lines(&log, &lines, key_separator.as_deref(), codec)?;
            log.flush()?;
            writeln!(
                out,
                "appended {appended} records to {topic}-{partition}; log end offset {}",
                log.log_end_offset()
            )?;
        }
        LogCommand::Consume {
            topic,
            partition,
            from,
            verbose,
        } => {
            let log = manager.partition(&topic, partition)?;
            let mut offset = from.unwrap_or_else(|| log.log_start_offset());
            while offset < log.log_end_offset() {
                let bytes = log.read(offset, 1 << 20)?.read_to_vec()?;
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    let batch = RecordBatch::parse_and_verify(rest)?;
                    for record in batch.records(64 << 20)?.iter() {
                        let record = record?;
                        if record.offset < offset {
                            continue;
                        }
                        let value = String::from_utf8_lossy(record.value.unwrap_or_default());
                        if verbose {
                            let key = record.key.map(String::from_utf8_lossy).unwrap_or_default();
                            writeln!(
                                out,
                                "{}\t{}\t{key}\t{value}",
                                record.offset, record.timestamp
                            )?;
                        } else {
                            writeln!(out, "{value}")?;
                        }
                    }
                    offset = batch.header().next_offset();
                    rest = &rest[batch.size_bytes()..];
                }
            }
        }
        LogCommand::OffsetForTime {
            topic,
            timestamp_ms,
            partition,
        } => {
            let log = manager.partition(&topic, partition)?;
            match log.offset_for_timestamp(timestamp_ms)? {
                Some((offset, ts)) => writeln!(out, "{offset}\t{ts}")?,
                None => writeln!(
                    out,
                    "none (no record at or after {timestamp_ms}; log end {})",
                    log.log_end_offset()
                )?,
            }
        }
        LogCommand::Verify => {
            let mut corrupt = 0;
            for topic in manager.topics() {
                for partition in &topic.partitions {
                    let found = partition
                        .corruption()
                        .map_or_else(|| partition.verify(), |c| Ok(Some(c)))?;
                    match found {
                        Some(corruption) => {
                            corrupt += 1;
                            writeln!(out, "{}: CORRUPT: {corruption}", partition.name())?;
                        }
                        None => writeln!(
                            out,
                            "{}: ok (offsets {}..{}, {} bytes)",
                            partition.name(),
                            partition.log_start_offset(),
                            partition.log_end_offset(),
                            partition.size_bytes()
                        )?,
                    }
                }
            }
            out.flush()?;
            if corrupt > 0 {
                bail!("{corrupt} corrupt partition(s)");
            }
        }
        LogCommand::Retention => {
            let outcomes = manager.enforce_retention();
            if outcomes.is_empty() {
                writeln!(out, "nothing past retention")?;
            }
            for (partition, outcome) in outcomes {
                writeln!(
                    out,
                    "{partition}: deleted {} segments ({} bytes); log start now {}",
                    outcome.segments_deleted, outcome.bytes_deleted, outcome.log_start_offset
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn append_lines(
    log: &strata::log::PartitionLog,
    lines: &[String],
    key_separator: Option<&str>,
    codec: Compression,
) -> anyhow::Result<usize> {
    if lines.is_empty() {
        return Ok(0);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let mut builder = BatchBuilder::new(codec);
    for line in lines {
        let (key, value) = match key_separator.and_then(|sep| line.split_once(sep)) {
            Some((key, value)) => (Some(key.as_bytes()), value.as_bytes()),
            None if key_separator.is_some() => bail!("line has no key separator: '{line}'"),
            None => (None, line.as_bytes()),
        };
        builder.push(NewRecord::new(key, value, now))?;
    }
    let batch = builder.into_batch()?;
    log.append(&batch)?;
    Ok(lines.len())
}
