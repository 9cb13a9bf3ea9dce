//! `strata consume TOPIC`: print records, from a chosen start or as a
//! member of a consumer group.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::json;
use strata_schema::SchemaType;

use super::not_authorized::Needs;
use super::{BrokerArgs, StartAt, bytes_json};
use crate::broker::acl::Operation;
use crate::client::{
    Admin, Cluster, Consumer, ConsumerConfig, ConsumerRecord, LATEST, OffsetReset, Seek,
};
use crate::runtime::cli::RegistryArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecordFormat {
    /// The value alone.
    Value,
    /// Key, a tab, the value.
    KeyValue,
    /// One JSON object per record: topic, partition, offset, timestamp,
    /// key, value and headers (text as strings, other bytes as hex).
    Json,
    /// As json, the value read as Avro in the schema registry's wire
    /// format (and the key too, when it is in that format).
    Avro,
    /// As avro, for Protobuf.
    Protobuf,
    /// As avro, for JSON Schema.
    JsonSchema,
}

impl RecordFormat {
    /// The registry schema type the format reads, if it is one of those.
    fn schema_type(self) -> Option<SchemaType> {
        match self {
            Self::Avro => Some(SchemaType::Avro),
            Self::Protobuf => Some(SchemaType::Protobuf),
            Self::JsonSchema => Some(SchemaType::Json),
            Self::Value | Self::KeyValue | Self::Json => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    pub topic: String,
    /// earliest, latest, an offset, or a time (2026-12-01T09:30:00Z or
    /// @MILLIS). With --group it applies to partitions the group has no
    /// committed offset for, and must be earliest or latest.
    #[arg(long, default_value = "earliest")]
    pub from: StartAt,
    /// Read as a member of this consumer group, committing as it goes.
    #[arg(long)]
    pub group: Option<String>,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Stop after this many records.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop at the end offsets the partitions had at start (otherwise wait
    /// for new records until interrupted).
    #[arg(long)]
    pub end: bool,
    #[arg(long, value_enum, default_value = "value")]
    pub format: RecordFormat,
    /// The schema registry the avro, protobuf and json-schema formats ask.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub async fn run(broker: &BrokerArgs, args: ConsumeArgs) -> anyhow::Result<()> {
    let cluster = broker.connect().await?;
    let needs = Needs::new(&cluster.config().security, Operation::Read, &args.topic)
        .in_group(args.group.as_deref());
    consume(cluster, args)
        .await
        .map_err(|error| needs.explain(error))
}

async fn consume(cluster: Arc<Cluster>, args: ConsumeArgs) -> anyhow::Result<()> {
    args.registry.install()?;
    if args.format.schema_type().is_some() && !strata_schema::is_installed() {
        anyhow::bail!(
            "--format {}: give the schema registry (--schema-registry URL or STRATA_SCHEMA_REGISTRY)",
            args.format
                .to_possible_value()
                .expect("not skipped")
                .get_name()
        );
    }
    let topic = cluster.topic(&args.topic).await?;
    let partitions: Vec<i32> = match args.partition {
        Some(p) if (0..topic.partitions.len() as i32).contains(&p) => vec![p],
        Some(p) => anyhow::bail!(
            "topic {} has partitions 0..{}, not {p}",
            args.topic,
            topic.partitions.len()
        ),
        None => (0..topic.partitions.len() as i32).collect(),
    };
    let mut ends = BTreeMap::new();
    if args.end {
        let wanted: Vec<(String, i32)> = partitions
            .iter()
            .map(|p| (args.topic.clone(), *p))
            .collect();
        let found = Admin::new(Arc::clone(&cluster))
            .list_offsets(&wanted, LATEST)
            .await?;
        for ((_, partition), end) in found {
            ends.insert(partition, end.unwrap_or(0));
        }
    }
    let mut consumer = match &args.group {
        Some(group) => {
            if args.partition.is_some() {
                anyhow::bail!("--partition and --group: the group assigns the partitions");
            }
            let offset_reset = match args.from {
                StartAt::Earliest => OffsetReset::Earliest,
                StartAt::Latest => OffsetReset::Latest,
                _ => anyhow::bail!(
                    "with --group, --from is earliest or latest (for partitions without a \
                     committed offset); move the group with `strata groups reset-offsets`"
                ),
            };
            let mut consumer = Consumer::new(
                cluster,
                ConsumerConfig {
                    group_id: Some(group.clone()),
                    offset_reset,
                    auto_commit: Some(Duration::from_secs(1)),
                    ..ConsumerConfig::default()
                },
            );
            consumer.subscribe(&[&args.topic])?;
            consumer
        }
        None => {
            let mut consumer = Consumer::new(cluster, ConsumerConfig::default());
            let assigned: Vec<(String, i32)> = partitions
                .iter()
                .map(|p| (args.topic.clone(), *p))
                .collect();
            consumer.assign(&assigned);
            let seek = match args.from {
                StartAt::Earliest => Seek::Beginning,
                StartAt::Latest => Seek::End,
                StartAt::Offset(offset) => Seek::Offset(offset),
                StartAt::Timestamp(ms) => Seek::Timestamp(ms),
            };
            for &partition in &partitions {
                consumer.seek(&args.topic, partition, seek).await?;
            }
            consumer
        }
    };

    let mut printed = 0u64;
    let stdout = std::io::stdout();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let outcome: anyhow::Result<()> = async {
        loop {
            if args.count.is_some_and(|count| printed >= count) {
                return Ok(());
            }
            if args.end && at_end(&consumer, &args.topic, &ends) {
                return Ok(());
            }
            let records = tokio::select! {
                records = consumer.poll(Duration::from_millis(500)) => records?,
                _ = &mut interrupted => return Ok(()),
            };
            let mut out = stdout.lock();
            // The first record per partition not printed (past --count or
            // --end): the position goes back there, so a group commits only
            // what was printed.
            let mut unprinted: BTreeMap<i32, i64> = BTreeMap::new();
            for record in &records {
                let past_end = args.end
                    && ends
                        .get(&record.partition)
                        .is_some_and(|end| record.offset >= *end);
                if past_end || args.count.is_some_and(|count| printed >= count) {
                    unprinted.entry(record.partition).or_insert(record.offset);
                    continue;
                }
                if let Err(error) = write_record(&mut out, record, args.format) {
                    if error.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(());
                    }
                    return Err(error.into());
                }
                printed += 1;
            }
            drop(out);
            for (partition, offset) in unprinted {
                consumer
                    .seek(&args.topic, partition, Seek::Offset(offset))
                    .await?;
            }
            let mut out = stdout.lock();
            match out.flush() {
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                other => other?,
            }
        }
    }
    .await;
    let closed = consumer.close().await;
    outcome?;
    closed?;
    Ok(())
}

fn at_end(consumer: &Consumer, topic: &str, ends: &BTreeMap<i32, i64>) -> bool {
    let assigned = consumer.assignment();
    !assigned.is_empty()
        && assigned.iter().all(|(_, partition)| {
            let end = ends.get(partition).copied().unwrap_or(0);
            consumer
                .position(topic, *partition)
                .is_some_and(|at| at >= end)
        })
}

fn write_record(
    out: &mut impl Write,
    record: &ConsumerRecord,
    format: RecordFormat,
) -> std::io::Result<()> {
    match format {
        RecordFormat::Value => {
            out.write_all(record.value.as_deref().unwrap_or_default())?;
            out.write_all(b"\n")
        }
        RecordFormat::KeyValue => {
            out.write_all(record.key.as_deref().unwrap_or_default())?;
            out.write_all(b"\t")?;
            out.write_all(record.value.as_deref().unwrap_or_default())?;
            out.write_all(b"\n")
        }
        RecordFormat::Json
        | RecordFormat::Avro
        | RecordFormat::Protobuf
        | RecordFormat::JsonSchema => {
            let headers: Vec<serde_json::Value> = record
                .headers
                .iter()
                .map(|(key, value)| json!({ "key": key, "value": bytes_json(value.as_deref()) }))
                .collect();
            let mut line = json!({
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": bytes_json(record.key.as_deref()),
                "value": bytes_json(record.value.as_deref()),
                "headers": headers,
            });
            if let Some(wanted) = format.schema_type() {
                registry_fields(&mut line, record, wanted);
            }
            writeln!(out, "{line}")
        }
    }
}

/// Replaces the key and value of a record's JSON line with what they read
/// as through the registry: the value in `wanted`'s format (or an `error`
/// saying why not, the bytes left as they are), the key when it is in the
/// registry's wire format at all.
fn registry_fields(line: &mut serde_json::Value, record: &ConsumerRecord, wanted: SchemaType) {
    if let Some(key) = record.key.as_deref()
        && let Ok(read) = strata_schema::decode_dynamic(key)
    {
        line["key"] = read.value;
    }
    let Some(value) = record.value.as_deref() else {
        return;
    };
    match strata_schema::decode_dynamic(value) {
        Ok(read) if read.schema_type == wanted => {
            line["value"] = read.value;
            line["schema_id"] = json!(read.id);
        }
        Ok(read) => {
            line["error"] = json!(format!(
                "the value is {} (schema id {}), not {wanted}",
                read.schema_type, read.id
            ));
        }
        Err(error) => line["error"] = json!(error.to_string()),
    }
}
