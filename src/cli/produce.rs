//! `strata produce TOPIC`: stdin to a topic, one record per line.

use std::io::BufRead;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::BrokerArgs;
use super::not_authorized::Needs;
use crate::broker::acl::Operation;
use crate::client::error::codes;
use crate::client::{Acks, ClientError, Cluster, Producer, ProducerConfig, ProducerRecord};
use crate::record::Compression;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AcksArg {
    #[value(name = "0")]
    None,
    #[value(name = "1")]
    Leader,
    All,
}

impl From<AcksArg> for Acks {
    fn from(acks: AcksArg) -> Self {
        match acks {
            AcksArg::None => Acks::None,
            AcksArg::Leader => Acks::Leader,
            AcksArg::All => Acks::All,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl From<CompressionArg> for Compression {
    fn from(codec: CompressionArg) -> Self {
        match codec {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    pub topic: String,
    /// Split each line into key and value at the first occurrence of this.
    #[arg(long)]
    pub key_separator: Option<String>,
    /// Send every record to this partition (default: by key, murmur2 as
    /// in the Java client; sticky for lines without a key).
    #[arg(long)]
    pub partition: Option<i32>,
    #[arg(long, value_enum, default_value = "all")]
    pub acks: AcksArg,
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArg,
}

pub async fn run(broker: &BrokerArgs, args: ProduceArgs) -> anyhow::Result<()> {
    let cluster = broker.connect().await?;
    let needs = Needs::new(&cluster.config().security, Operation::Write, &args.topic);
    produce(cluster, args)
        .await
        .map_err(|error| needs.explain(error))
}

async fn produce(cluster: Arc<Cluster>, args: ProduceArgs) -> anyhow::Result<()> {
    let topic = cluster.topic(&args.topic).await.map_err(|e| {
        let unknown = matches!(e, ClientError::UnknownTopic(_))
            || e.code() == Some(codes::UNKNOWN_TOPIC_OR_PARTITION);
        if unknown {
            anyhow::anyhow!("{e} (create it with `strata topics create`)")
        } else {
            e.into()
        }
    })?;
    if let Some(partition) = args.partition
        && !(0..topic.partitions.len() as i32).contains(&partition)
    {
        anyhow::bail!(
            "topic {} has partitions 0..{}, not {partition}",
            args.topic,
            topic.partitions.len()
        );
    }
    let acks: Acks = args.acks.into();
    let producer = Producer::new(
        cluster,
        ProducerConfig {
            acks,
            compression: args.compression.into(),
            // Ids and sequence numbers need responses.
            idempotent: acks == Acks::All,
            ..ProducerConfig::default()
        },
    )
    .await?;
    // Lines are read on a blocking thread and handed over in chunks.
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::channel::<std::io::Result<String>>(4096);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if lines_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let mut deliveries = std::collections::VecDeque::new();
    let mut sent = 0u64;
    while let Some(line) = lines_rx.recv().await {
        let line = line?;
        let (key, value) = match &args.key_separator {
            Some(separator) => match line.split_once(separator.as_str()) {
                Some((key, value)) => (Some(key.as_bytes()), value.as_bytes()),
                None => anyhow::bail!("line {} has no key separator: '{line}'", sent + 1),
            },
            None => (None, line.as_bytes()),
        };
        let mut record = ProducerRecord::new(&args.topic, key, value);
        record.partition = args.partition;
        deliveries.push_back(producer.send(record).await?);
        sent += 1;
        // Surface failures as they happen, without waiting on each record.
        while deliveries.len() > 100_000 {
            deliveries.pop_front().expect("not empty").await?;
        }
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close().await;
    eprintln!("produced {sent} record(s) to {}", args.topic);
    Ok(())
}
