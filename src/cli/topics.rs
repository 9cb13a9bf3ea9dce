//! `strata topics create|list|describe|delete|skew` (skew in `skew`).

use clap::Subcommand;
use serde_json::json;

use super::not_authorized::Needs;
use super::{BrokerArgs, Format, parse_key_value, print_json, print_table};
use crate::broker::acl::Operation;

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Topic config, Kafka-named, e.g. retention.ms=86400000 (repeatable).
        #[arg(long = "config", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// List topic names.
    List {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Partitions (leader, offsets, sizes), retention and config of topics
    /// (all when none is named).
    Describe {
        names: Vec<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Delete a topic and its data.
    Delete { name: String },
    /// The keys a topic's records carry most (how many, since when) and
    /// how its partitions share the records, over a time range.
    Skew(super::skew::SkewArgs),
}

pub async fn run(broker: &BrokerArgs, command: TopicsCommand) -> anyhow::Result<()> {
    if let TopicsCommand::Skew(args) = command {
        return super::skew::run(broker, args).await;
    }
    let (admin, security) = broker.admin().await?;
    match command {
        TopicsCommand::Create {
            name,
            partitions,
            configs,
        } => {
            if partitions < 1 {
                anyhow::bail!("--partitions must be at least 1");
            }
            (admin.create_topic(&name, partitions, &configs).await).map_err(|e| {
                Needs::new(&security, Operation::Create, &name)
                    .explain_doing(&format!("creating topic {name}"), e)
            })?;
            eprintln!("created topic {name} with {partitions} partition(s)");
        }
        TopicsCommand::List { format } => {
            let topics = admin.list_topics().await?;
            match format {
                Format::Json => print_json(&json!(topics)),
                Format::Text => topics.iter().for_each(|t| println!("{t}")),
            }
        }
        TopicsCommand::Describe { names, format } => {
            let names = if names.is_empty() {
                admin.list_topics().await?
            } else {
                names
            };
            let mut described = Vec::new();
            for name in &names {
                let doing = format!("describing topic {name}");
                let needs = |operation| Needs::new(&security, operation, name);
                let mut topic = (admin.describe_partitions(name).await)
                    .map_err(|e| needs(Operation::Describe).explain_doing(&doing, e))?;
                topic.config = (admin.topic_config(name).await)
                    .map_err(|e| needs(Operation::DescribeConfigs).explain_doing(&doing, e))?;
                let sizes = admin.partition_sizes(name).await.unwrap_or_default();
                described.push((topic, sizes));
            }
            match format {
                Format::Json => {
                    let topics: Vec<serde_json::Value> = described
                        .iter()
                        .map(|(topic, sizes)| {
                            json!({
                                "name": topic.name,
                                "id": topic.id.to_string(),
                                "partitions": topic.partitions.iter().map(|p| json!({
                                    "partition": p.partition,
                                    "leader": p.leader,
                                    "earliest": p.earliest,
                                    "latest": p.latest,
                                    "size_bytes": sizes.get(&p.partition),
                                })).collect::<Vec<_>>(),
                                "config": topic.config,
                            })
                        })
                        .collect();
                    print_json(&json!(topics));
                }
                Format::Text => {
                    for (index, (topic, sizes)) in described.iter().enumerate() {
                        if index > 0 {
                            println!();
                        }
                        let setting = |key: &str| {
                            topic.config.get(key).map_or("-".to_string(), |v| v.clone())
                        };
                        println!(
                            "topic {}  id {}  partitions {}  retention.ms {}  retention.bytes {}",
                            topic.name,
                            topic.id,
                            topic.partitions.len(),
                            setting("retention.ms"),
                            setting("retention.bytes"),
                        );
                        let rows: Vec<Vec<String>> = topic
                            .partitions
                            .iter()
                            .map(|p| {
                                vec![
                                    p.partition.to_string(),
                                    p.leader.to_string(),
                                    p.earliest.to_string(),
                                    p.latest.to_string(),
                                    (p.latest - p.earliest).to_string(),
                                    sizes
                                        .get(&p.partition)
                                        .map_or("-".into(), |s| human_bytes(*s)),
                                ]
                            })
                            .collect();
                        print_table(
                            &[
                                "PARTITION",
                                "LEADER",
                                "EARLIEST",
                                "LATEST",
                                "RECORDS",
                                "SIZE",
                            ],
                            &rows,
                        );
                        let config: Vec<String> = topic
                            .config
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect();
                        println!("config: {}", config.join(" "));
                    }
                }
            }
        }
        TopicsCommand::Delete { name } => {
            (admin.delete_topic(&name).await).map_err(|e| {
                Needs::new(&security, Operation::Delete, &name)
                    .explain_doing(&format!("deleting topic {name}"), e)
            })?;
            eprintln!("deleted topic {name}");
        }
        TopicsCommand::Skew(_) => unreachable!("answered above"),
    }
    Ok(())
}

/// 1234567 → "1.2 MiB".
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
