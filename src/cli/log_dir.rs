//! `strata log …`: works directly on a log data directory, with no broker
//! (the directory must not be in use by another process): create, delete
//! and describe topics, append stdin to a partition, print its records,
//! look an offset up by time, enforce retention, compact and verify every
//! batch.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::{Align, table_lines};
use crate::log::{LogConfig, LogManager, PartitionLog};
use crate::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use crate::time::now_ms;

/// Which data directory, and what to do with it.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// The log's data directory.
    #[arg(
        long,
        env = "STRATA_DATA_DIR",
        default_value = "./strata-data",
        global = true
    )]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: LogCommand,
}

/// The `log` subcommands.
#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Create a topic.
    CreateTopic {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Kafka-named topic config, e.g. retention.ms=60000 (repeatable).
        #[arg(long = "config", value_parser = super::parse_key_value)]
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
    /// Compact every compacted topic's partitions that are due (one pass of
    /// the broker's cleaner).
    Clean {
        /// The cleaner's I/O budget, bytes per second.
        #[arg(long)]
        io_bytes_per_second: Option<u64>,
    },
    /// Read every batch of every partition and check its CRC and offsets;
    /// exits with status 1 if any partition is corrupt.
    Verify,
}

/// Runs a `log` subcommand on the data directory, closing the log cleanly
/// whether or not the command succeeded.
pub fn run(args: LogArgs) -> anyhow::Result<()> {
    let LogArgs { data_dir, command } = args;
    let data_dir = data_dir.as_path();
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
        LogCommand::Describe => describe(manager, &mut out)?,
        LogCommand::Produce {
            topic,
            partition,
            key_separator,
            compression,
            batch_records,
        } => produce(
            manager,
            &mut out,
            topic,
            partition,
            key_separator,
            compression,
            batch_records,
        )?,
        LogCommand::Consume {
            topic,
            partition,
            from,
            verbose,
        } => consume(manager, &mut out, topic, partition, from, verbose)?,
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
        LogCommand::Verify => verify(manager, &mut out)?,
        LogCommand::Retention => retention(manager, &mut out)?,
        LogCommand::Clean {
            io_bytes_per_second,
        } => clean(manager, &mut out, io_bytes_per_second)?,
    }
    out.flush()?;
    Ok(())
}

/// One row per partition: offsets, segments, bytes, and any corruption on
/// a line of its own under its row.
fn describe(manager: &LogManager, out: &mut impl Write) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut corruptions = Vec::new();
    for topic in manager.topics() {
        for (p, partition) in topic.partitions.iter().enumerate() {
            rows.push(vec![
                topic.name().to_string(),
                p.to_string(),
                partition.log_start_offset().to_string(),
                partition.log_end_offset().to_string(),
                partition.segment_count().to_string(),
                partition.size_bytes().to_string(),
            ]);
            corruptions.push(partition.corruption());
        }
    }
    let right = |name| (name, Align::Right);
    let header = [
        ("TOPIC", Align::Left),
        right("PARTITION"),
        right("LOG-START"),
        right("LOG-END"),
        right("SEGMENTS"),
        right("BYTES"),
    ];
    let mut lines = table_lines(&header, &rows).into_iter();
    if let Some(header) = lines.next() {
        writeln!(out, "{header}")?;
    }
    for (line, corruption) in lines.zip(corruptions) {
        writeln!(out, "{line}")?;
        if let Some(corruption) = corruption {
            writeln!(out, "  CORRUPT: {corruption}")?;
        }
    }
    Ok(())
}

/// Appends stdin to a partition, one record per line, in batches.
fn produce(
    manager: &LogManager,
    out: &mut impl Write,
    topic: String,
    partition: i32,
    key_separator: Option<String>,
    compression: String,
    batch_records: usize,
) -> anyhow::Result<()> {
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
    Ok(())
}

/// Prints a partition's records from `from` (default: the log start).
fn consume(
    manager: &LogManager,
    out: &mut impl Write,
    topic: String,
    partition: i32,
    from: Option<i64>,
    verbose: bool,
) -> anyhow::Result<()> {
    let log = manager.partition(&topic, partition)?;
    let mut offset = from.unwrap_or_else(|| log.log_start_offset());
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 1 << 20)?.into_vec()?;
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
    Ok(())
}

/// Reads every batch of every partition; fails if any partition is corrupt.
fn verify(manager: &LogManager, out: &mut impl Write) -> anyhow::Result<()> {
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
    Ok(())
}

/// Deletes segments past their topic's retention and says what went.
fn retention(manager: &LogManager, out: &mut impl Write) -> anyhow::Result<()> {
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
    Ok(())
}

/// One pass of the cleaner, and what it did.
fn clean(
    manager: &LogManager,
    out: &mut impl Write,
    io_bytes_per_second: Option<u64>,
) -> anyhow::Result<()> {
    let mut config = crate::log::CleanerConfig::default();
    if let Some(rate) = io_bytes_per_second {
        config.io_bytes_per_second = rate.max(1);
    }
    let outcomes = manager.clean_compacted(&config);
    if outcomes.is_empty() {
        writeln!(out, "nothing to clean")?;
    }
    for (partition, outcome) in outcomes {
        writeln!(
            out,
            "{partition}: rewrote {} segments, removed {} records ({} bytes read, {} written); clean below {}",
            outcome.segments_rewritten,
            outcome.records_removed,
            outcome.bytes_read,
            outcome.bytes_written,
            outcome.cleaned_to
        )?;
    }
    Ok(())
}

fn append_lines(
    log: &PartitionLog,
    lines: &[String],
    key_separator: Option<&str>,
    codec: Compression,
) -> anyhow::Result<usize> {
    if lines.is_empty() {
        return Ok(0);
    }
    let now = now_ms();
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
