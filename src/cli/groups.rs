//! `strata groups list|describe|reset-offsets`.

use std::collections::BTreeMap;

use clap::Subcommand;
use serde_json::json;

use super::not_authorized::Needs;
use super::{BrokerArgs, Format, StartAt, print_json, print_table};
use crate::broker::acl::Operation;
use crate::client::{EARLIEST, LATEST};
use crate::runtime::tasks_of_assignment;

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// List consumer groups and their states.
    List {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// A group's state and members, and per partition its committed
    /// offset, the end offset and the lag.
    Describe {
        group: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Delete a group and its committed offsets (it must have no running
    /// members).
    Delete { group: String },
    /// Set a group's committed offsets for a topic (the group must have no
    /// running members).
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        /// earliest, latest, an offset, or a time (2026-12-01T09:30:00Z or
        /// @MILLIS: the first record at or after it).
        #[arg(long)]
        to: StartAt,
        /// Only this partition (default: every partition of the topic).
        #[arg(long)]
        partition: Option<i32>,
    },
}

pub async fn run(broker: &BrokerArgs, command: GroupsCommand) -> anyhow::Result<()> {
    let (admin, security) = broker.admin().await?;
    match command {
        GroupsCommand::List { format } => {
            let groups = admin.list_groups().await?;
            match format {
                Format::Json => print_json(&json!(
                    groups
                        .iter()
                        .map(|g| json!({ "group": g.group_id, "state": g.state, "protocol_type": g.protocol_type }))
                        .collect::<Vec<_>>()
                )),
                Format::Text => print_table(
                    &["GROUP", "STATE", "TYPE"],
                    &groups
                        .iter()
                        .map(|g| vec![g.group_id.clone(), g.state.clone(), g.protocol_type.clone()])
                        .collect::<Vec<_>>(),
                ),
            }
        }
        GroupsCommand::Describe { group, format } => {
            // The topics of its offsets it may not describe are left out.
            let needs = Needs::group(&security, Operation::Describe, &group);
            let doing = format!("describing group {group}");
            let description =
                (admin.describe_group(&group).await).map_err(|e| needs.explain_doing(&doing, e))?;
            let lags =
                (admin.group_lag(&group).await).map_err(|e| needs.explain_doing(&doing, e))?;
            if description.state == "Dead" && lags.is_empty() {
                anyhow::bail!("no group {group}: no members and no committed offsets");
            }
            match format {
                Format::Json => print_json(&json!({
                    "group": group,
                    "state": description.state,
                    "protocol": description.protocol,
                    "members": description.members.iter().map(|m| json!({
                        "member_id": m.member_id, "instance_id": m.instance_id,
                        "client_id": m.client_id, "host": m.client_host,
                        "tasks": tasks_of_assignment(&m.assignment),
                    })).collect::<Vec<_>>(),
                    "partitions": lags.iter().map(|l| json!({
                        "topic": l.topic, "partition": l.partition,
                        "committed": (l.committed >= 0).then_some(l.committed),
                        "end": l.end, "lag": l.lag,
                    })).collect::<Vec<_>>(),
                })),
                Format::Text => {
                    println!(
                        "group {group}  state {}  protocol {}  members {}",
                        description.state,
                        if description.protocol.is_empty() {
                            "-"
                        } else {
                            &description.protocol
                        },
                        description.members.len()
                    );
                    for member in &description.members {
                        println!(
                            "  member {}{} ({} from {})",
                            member.member_id,
                            member
                                .instance_id
                                .as_ref()
                                .map_or(String::new(), |i| format!(" instance {i}")),
                            member.client_id,
                            member.client_host
                        );
                        // An app's group: the tasks each instance runs.
                        if let Some(tasks) = tasks_of_assignment(&member.assignment) {
                            println!("    tasks {}", tasks.join(" "));
                        }
                    }
                    print_table(
                        &["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"],
                        &lags
                            .iter()
                            .map(|l| {
                                vec![
                                    l.topic.clone(),
                                    l.partition.to_string(),
                                    if l.committed >= 0 {
                                        l.committed.to_string()
                                    } else {
                                        "-".into()
                                    },
                                    l.end.to_string(),
                                    l.lag.to_string(),
                                ]
                            })
                            .collect::<Vec<_>>(),
                    );
                }
            }
        }
        GroupsCommand::Delete { group } => {
            admin.delete_group(&group).await.map_err(|e| {
                Needs::group(&security, Operation::Delete, &group).explain_or(e, |e| {
                    anyhow::anyhow!(
                        "deleting group {group}: {e} (a group with running members cannot be deleted)"
                    )
                })
            })?;
            eprintln!("deleted group {group}");
        }
        GroupsCommand::ResetOffsets {
            group,
            topic,
            to,
            partition,
        } => {
            let describing = Needs::new(&security, Operation::Describe, &topic);
            let info = (admin.cluster().topic(&topic).await).map_err(|e| describing.explain(e))?;
            let count = info.partitions.len() as i32;
            let partitions: Vec<i32> = match partition {
                Some(p) if (0..count).contains(&p) => vec![p],
                Some(p) => anyhow::bail!("topic {topic} has partitions 0..{count}, not {p}"),
                None => (0..count).collect(),
            };
            let wanted: Vec<(String, i32)> =
                partitions.iter().map(|p| (topic.clone(), *p)).collect();
            let at = |found: &BTreeMap<(String, i32), Option<i64>>, key: &(String, i32)| {
                found.get(key).copied().flatten()
            };
            let offsets: Vec<(String, i32, i64)> = match to {
                StartAt::Offset(offset) => {
                    wanted.into_iter().map(|(t, p)| (t, p, offset)).collect()
                }
                StartAt::Earliest | StartAt::Latest | StartAt::Timestamp(_) => {
                    let when = match to {
                        StartAt::Earliest => EARLIEST,
                        StartAt::Timestamp(ms) => ms,
                        _ => LATEST,
                    };
                    let found = (admin.list_offsets(&wanted, when).await)
                        .map_err(|e| describing.explain(e))?;
                    // A time past every record's means the end.
                    let ends = match to {
                        StartAt::Timestamp(_) => (admin.list_offsets(&wanted, LATEST).await)
                            .map_err(|e| describing.explain(e))?,
                        _ => BTreeMap::new(),
                    };
                    wanted
                        .into_iter()
                        .map(|key| {
                            let offset = at(&found, &key).or_else(|| at(&ends, &key)).unwrap_or(0);
                            (key.0, key.1, offset)
                        })
                        .collect()
                }
            };
            admin
                .reset_group_offsets(&group, &offsets)
                .await
                .map_err(|e| {
                    // An offset commit: READ on the group and the topic.
                    let needs = Needs::new(&security, Operation::Read, &topic).in_group(Some(&group));
                    needs.explain_or(e, |e| {
                        anyhow::anyhow!(
                            "resetting group {group}: {e} (a group with running members cannot be reset)"
                        )
                    })
                })?;
            for (topic, partition, offset) in &offsets {
                println!("{group} {topic}/{partition} -> {offset}");
            }
        }
    }
    Ok(())
}
