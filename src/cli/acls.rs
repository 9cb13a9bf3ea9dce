//! `strata acls add|remove|list`: a broker's ACLs, with the flags of
//! Kafka's `kafka-acls` (`--allow-principal User:alice --operation read
//! --topic orders`), against strata or any Kafka cluster.
//!
//! `add` makes every combination of the resources, principals, hosts and
//! operations given. `remove` removes those ACLs, or with no principal or
//! operation given every ACL on the resources. `list` shows the ACLs
//! matching its filters (all of them without any).

use clap::{Args, Subcommand};
use serde_json::json;

use super::not_authorized::Needs;
use super::{BrokerArgs, Format, print_json, print_table};
use crate::broker::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, CLUSTER_NAME, EntryFilter, Operation,
    PatternFilter, PatternType, Permission, ResourcePattern, ResourceType, WILDCARD_HOST,
};
use crate::broker::auth::Principal;

#[derive(Debug, Subcommand)]
pub enum AclsCommand {
    /// Add ACLs: each principal allowed (or denied) each operation on each
    /// resource.
    Add(ChangeArgs),
    /// Remove ACLs: those the flags name, or every ACL on the resources
    /// when no principal or operation is given.
    Remove(ChangeArgs),
    /// List ACLs: all, or those matching the flags.
    List(ListArgs),
}

/// The resources of a command.
#[derive(Debug, Args)]
pub struct ResourceArgs {
    /// A topic (repeatable; `*` for every topic).
    #[arg(long)]
    topic: Vec<String>,
    /// A consumer group (repeatable; `*` for every group).
    #[arg(long)]
    group: Vec<String>,
    /// A transactional id (repeatable; `*` for every id).
    #[arg(long = "transactional-id")]
    transactional_id: Vec<String>,
    /// The cluster (creating topics, managing ACLs, idempotent writes).
    #[arg(long)]
    cluster: bool,
    /// literal or prefixed (add, remove: literal by default); list also
    /// takes any (the default: names compared exactly) and match (every
    /// ACL that applies to the named resource).
    #[arg(long = "resource-pattern-type", value_parser = PatternType::parse)]
    pattern_type: Option<PatternType>,
}

impl ResourceArgs {
    /// Each resource named, as (type, name).
    fn named(&self) -> Vec<(ResourceType, String)> {
        let mut named: Vec<(ResourceType, String)> = [
            (ResourceType::Topic, &self.topic),
            (ResourceType::Group, &self.group),
            (ResourceType::TransactionalId, &self.transactional_id),
        ]
        .into_iter()
        .flat_map(|(t, names)| names.iter().map(move |n| (t, n.clone())))
        .collect();
        if self.cluster {
            named.push((ResourceType::Cluster, CLUSTER_NAME.to_string()));
        }
        named
    }
}

#[derive(Debug, Args)]
pub struct ChangeArgs {
    #[command(flatten)]
    resources: ResourceArgs,
    /// A principal the ACLs allow, e.g. User:alice or User:* (repeatable).
    #[arg(long = "allow-principal", value_parser = Principal::parse)]
    allow: Vec<Principal>,
    /// A principal the ACLs deny (repeatable).
    #[arg(long = "deny-principal", value_parser = Principal::parse)]
    deny: Vec<Principal>,
    /// read, write, create, delete, alter, describe, describe-configs,
    /// alter-configs, idempotent-write, cluster-action or all (repeatable).
    #[arg(long, value_parser = Operation::parse)]
    operation: Vec<Operation>,
    /// The client IP address the ACLs are about (repeatable; every host,
    /// `*`, by default).
    #[arg(long)]
    host: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    resources: ResourceArgs,
    /// Only the ACLs of this principal (exactly: `User:*` lists the ACLs
    /// for everyone).
    #[arg(long)]
    principal: Option<String>,
    /// Only the ACLs of this host.
    #[arg(long)]
    host: Option<String>,
    /// Only the ACLs of this operation.
    #[arg(long, value_parser = Operation::parse)]
    operation: Option<Operation>,
    /// Only allow or deny ACLs.
    #[arg(long, value_parser = Permission::parse)]
    permission: Option<Permission>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub async fn run(broker: &BrokerArgs, command: AclsCommand) -> anyhow::Result<()> {
    let (admin, security) = broker.admin().await?;
    let needs = |operation| Needs::cluster(&security, operation);
    match command {
        AclsCommand::Add(args) => {
            let bindings = bindings_to_add(&args)?;
            admin
                .create_acls(&bindings)
                .await
                .map_err(|e| needs(Operation::Alter).explain_doing("adding ACLs", e))?;
            for binding in &bindings {
                eprintln!("added: {binding}");
            }
        }
        AclsCommand::Remove(args) => {
            let filters = filters_to_remove(&args)?;
            let removed = admin
                .delete_acls(&filters)
                .await
                .map_err(|e| needs(Operation::Alter).explain_doing("removing ACLs", e))?;
            for binding in &removed {
                eprintln!("removed: {binding}");
            }
            eprintln!("removed {} ACL(s)", removed.len());
        }
        AclsCommand::List(args) => {
            let mut listed = Vec::new();
            for filter in list_filters(&args) {
                for binding in admin
                    .describe_acls(&filter)
                    .await
                    .map_err(|e| needs(Operation::Describe).explain_doing("listing ACLs", e))?
                {
                    if !listed.contains(&binding) {
                        listed.push(binding);
                    }
                }
            }
            listed.sort();
            print_bindings(&listed, args.format);
        }
    }
    Ok(())
}

/// Every (resource × principal × host × operation) the flags name.
fn bindings_to_add(args: &ChangeArgs) -> anyhow::Result<Vec<AclBinding>> {
    let resources = args.resources.named();
    if resources.is_empty() {
        anyhow::bail!("name a resource: --topic, --group, --transactional-id or --cluster");
    }
    if args.allow.is_empty() && args.deny.is_empty() {
        anyhow::bail!("name a principal: --allow-principal or --deny-principal (e.g. User:alice)");
    }
    if args.operation.is_empty() {
        anyhow::bail!("name an operation: --operation read, write, describe, … or all");
    }
    if args.operation.contains(&Operation::Any) {
        anyhow::bail!("--operation any only filters; an ACL names an operation or all");
    }
    let pattern_type = args.resources.pattern_type.unwrap_or(PatternType::Literal);
    if !matches!(pattern_type, PatternType::Literal | PatternType::Prefixed) {
        anyhow::bail!(
            "an ACL's --resource-pattern-type is literal or prefixed, not {pattern_type}"
        );
    }
    let hosts = hosts_or_every(&args.host);
    let principals = args
        .allow
        .iter()
        .map(|p| (p, Permission::Allow))
        .chain(args.deny.iter().map(|p| (p, Permission::Deny)));
    let mut bindings = Vec::new();
    for (principal, permission) in principals {
        for (resource_type, name) in &resources {
            for host in &hosts {
                for &operation in &args.operation {
                    bindings.push(AclBinding {
                        pattern: ResourcePattern::new(*resource_type, name.clone(), pattern_type),
                        entry: AccessControlEntry {
                            principal: principal.clone(),
                            host: host.clone(),
                            operation,
                            permission,
                        },
                    });
                }
            }
        }
    }
    Ok(bindings)
}

fn hosts_or_every(hosts: &[String]) -> Vec<String> {
    if hosts.is_empty() {
        vec![WILDCARD_HOST.to_string()]
    } else {
        hosts.to_vec()
    }
}

/// The filters of `remove`: per resource, each principal (with its
/// permission), host and operation given, or any of each not given.
fn filters_to_remove(args: &ChangeArgs) -> anyhow::Result<Vec<AclBindingFilter>> {
    let resources = args.resources.named();
    if resources.is_empty() {
        anyhow::bail!("name a resource: --topic, --group, --transactional-id or --cluster");
    }
    let pattern_type = args.resources.pattern_type.unwrap_or(PatternType::Literal);
    let mut principals: Vec<(Option<String>, Permission)> = args
        .allow
        .iter()
        .map(|p| (Some(p.to_string()), Permission::Allow))
        .chain(
            args.deny
                .iter()
                .map(|p| (Some(p.to_string()), Permission::Deny)),
        )
        .collect();
    if principals.is_empty() {
        principals.push((None, Permission::Any));
    }
    let hosts: Vec<Option<String>> = if args.host.is_empty() {
        vec![None]
    } else {
        args.host.iter().cloned().map(Some).collect()
    };
    let operations = if args.operation.is_empty() {
        vec![Operation::Any]
    } else {
        args.operation.clone()
    };
    let mut filters = Vec::new();
    for (resource_type, name) in &resources {
        for (principal, permission) in &principals {
            for host in &hosts {
                for &operation in &operations {
                    filters.push(AclBindingFilter {
                        pattern: PatternFilter {
                            resource_type: *resource_type,
                            name: Some(name.clone()),
                            pattern_type,
                        },
                        entry: EntryFilter {
                            principal: principal.clone(),
                            host: host.clone(),
                            operation,
                            permission: *permission,
                        },
                    });
                }
            }
        }
    }
    Ok(filters)
}

/// The filters of `list`: one per resource named (every resource when none
/// is), each with the entry filters given.
fn list_filters(args: &ListArgs) -> Vec<AclBindingFilter> {
    let entry = EntryFilter {
        principal: args.principal.clone(),
        host: args.host.clone(),
        operation: args.operation.unwrap_or(Operation::Any),
        permission: args.permission.unwrap_or(Permission::Any),
    };
    let pattern_type = args.resources.pattern_type.unwrap_or(PatternType::Any);
    let named = args.resources.named();
    let patterns: Vec<PatternFilter> = if named.is_empty() {
        vec![PatternFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type,
        }]
    } else {
        named
            .into_iter()
            .map(|(resource_type, name)| PatternFilter {
                resource_type,
                name: Some(name),
                pattern_type,
            })
            .collect()
    };
    patterns
        .into_iter()
        .map(|pattern| AclBindingFilter {
            pattern,
            entry: entry.clone(),
        })
        .collect()
}

fn print_bindings(bindings: &[AclBinding], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            bindings
                .iter()
                .map(|b| json!({
                    "principal": b.entry.principal.to_string(),
                    "permission": b.entry.permission.name(),
                    "operation": b.entry.operation.name(),
                    "host": b.entry.host,
                    "resource_type": b.pattern.resource_type.name(),
                    "resource_name": b.pattern.name,
                    "pattern_type": b.pattern.pattern_type.name(),
                }))
                .collect::<Vec<_>>()
        )),
        Format::Text => print_table(
            &[
                "PRINCIPAL",
                "PERMISSION",
                "OPERATION",
                "HOST",
                "RESOURCE",
                "NAME",
                "PATTERN",
            ],
            &bindings
                .iter()
                .map(|b| {
                    vec![
                        b.entry.principal.to_string(),
                        b.entry.permission.name().to_string(),
                        b.entry.operation.name().to_string(),
                        b.entry.host.clone(),
                        b.pattern.resource_type.name().to_string(),
                        b.pattern.name.clone(),
                        b.pattern.pattern_type.name().to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    }
}
