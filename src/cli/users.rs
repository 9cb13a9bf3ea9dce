//! `strata users add|delete|list`: the users SASL/SCRAM and SASL/PLAIN
//! authenticate, as SCRAM credentials.
//!
//! Two ways to the credentials: `--data-dir` edits the broker's
//! credentials file directly (the broker may be running: it sees the
//! change at its next login), otherwise the command goes through
//! `--bootstrap` with DescribeUserScramCredentials and
//! AlterUserScramCredentials, which any Kafka cluster serves too. Either
//! way the password is salted here and only the salt, the iterations and
//! derived keys are stored; a listing shows mechanisms and iterations.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;

use super::not_authorized::Needs;
use super::password::read_password;
use super::{BrokerArgs, Format, print_json, print_table};
use crate::broker::acl::Operation;
use crate::broker::auth::CredentialStore;
use crate::client::error::codes;
use crate::client::{ScramAlteration, ScramCredentialInfo, UserScramCredentials};
use crate::sasl::{ITERATIONS_DEFAULT, Mechanism, SaltedPassword, ScramCredential};

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Add a user, or set its password: a SCRAM credential (PLAIN logins
    /// are checked against it too). The password is read from
    /// --password-file, else STRATA_USER_PASSWORD, else stdin.
    Add {
        name: String,
        /// SCRAM-SHA-512 or SCRAM-SHA-256.
        #[arg(long, default_value = "SCRAM-SHA-512", value_parser = parse_scram)]
        mechanism: Mechanism,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, default_value_t = ITERATIONS_DEFAULT)]
        iterations: u32,
        /// A file whose first line is the password.
        #[arg(long)]
        password_file: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete a user's credential for one mechanism, or all of them.
    Delete {
        name: String,
        #[arg(long, value_parser = parse_scram)]
        mechanism: Option<Mechanism>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List users with their mechanisms and iterations (never a secret).
    List {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Where the credentials are changed.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Edit this broker data directory's credentials file directly (the
    /// broker may be running or stopped), instead of going through
    /// --bootstrap.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

fn parse_scram(name: &str) -> Result<Mechanism, String> {
    match name.parse::<Mechanism>() {
        Ok(mechanism) if mechanism.is_scram() => Ok(mechanism),
        _ => Err(format!(
            "{name:?} is not SCRAM-SHA-512 or SCRAM-SHA-256 (PLAIN checks passwords against these)"
        )),
    }
}

pub async fn run(broker: &BrokerArgs, command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Add {
            name,
            mechanism,
            iterations,
            password_file,
            store,
        } => {
            let password =
                read_password(password_file.as_deref(), &format!("password for {name}: "))?;
            let salted = SaltedPassword::generate(mechanism, &password, iterations)?;
            drop(password);
            match &store.data_dir {
                Some(dir) => {
                    let credential = ScramCredential::from_salted_password(
                        mechanism,
                        &salted.salted_password,
                        &salted.salt,
                        salted.iterations,
                    )?;
                    open_store(dir)?.upsert(&name, mechanism, credential)?;
                }
                None => {
                    let upsert = ScramAlteration::Upsert {
                        user: name.clone(),
                        mechanism,
                        salted,
                    };
                    let (admin, security) = broker.admin().await?;
                    (admin.alter_user_scram_credentials(&[upsert]).await).map_err(|e| {
                        Needs::cluster(&security, Operation::Alter)
                            .explain_doing(&format!("setting {name}"), e)
                    })?;
                }
            }
            eprintln!("set the {mechanism} credential of {name} ({iterations} iterations)");
        }
        UsersCommand::Delete {
            name,
            mechanism,
            store,
        } => {
            let deleted = match &store.data_dir {
                Some(dir) => open_store(dir)?.delete(&name, mechanism)?,
                None => delete_through(broker, &name, mechanism).await?,
            };
            if deleted.is_empty() {
                match mechanism {
                    Some(mechanism) => anyhow::bail!("user {name} has no {mechanism} credential"),
                    None => anyhow::bail!("no user {name}"),
                }
            }
            for mechanism in deleted {
                eprintln!("deleted the {mechanism} credential of {name}");
            }
        }
        UsersCommand::List { format, store } => {
            let users: Vec<UserScramCredentials> = match &store.data_dir {
                Some(dir) => open_store(dir)?
                    .list()
                    .into_iter()
                    .map(|user| UserScramCredentials {
                        user: user.user,
                        credentials: user
                            .mechanisms
                            .into_iter()
                            .map(|(mechanism, iterations)| ScramCredentialInfo {
                                mechanism,
                                iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
                            })
                            .collect(),
                    })
                    .collect(),
                None => {
                    let (admin, security) = broker.admin().await?;
                    (admin.describe_user_scram_credentials(&[]).await).map_err(|e| {
                        Needs::cluster(&security, Operation::Describe)
                            .explain_doing("listing users", e)
                    })?
                }
            };
            print_users(&users, format);
        }
    }
    Ok(())
}

/// The credentials of a broker's data directory, which must exist (a typo
/// must not create a new one).
fn open_store(data_dir: &Path) -> anyhow::Result<CredentialStore> {
    if !data_dir.is_dir() {
        anyhow::bail!(
            "no data directory at {}: give the --data-dir the broker serves",
            data_dir.display()
        );
    }
    Ok(CredentialStore::open(data_dir)?)
}

/// Deletes through the broker, one mechanism per request: Kafka refuses a
/// user named twice in one request.
async fn delete_through(
    broker: &BrokerArgs,
    user: &str,
    mechanism: Option<Mechanism>,
) -> anyhow::Result<Vec<Mechanism>> {
    let (admin, security) = broker.admin().await?;
    let refused = |operation, error| {
        Needs::cluster(&security, operation).explain_doing(&format!("deleting {user}"), error)
    };
    let held: Vec<Mechanism> = match admin.describe_user_scram_credentials(&[user]).await {
        Ok(users) => users
            .iter()
            .flat_map(|u| u.credentials.iter().map(|c| c.mechanism))
            .collect(),
        // The user has no credential.
        Err(error) if error.code() == Some(codes::RESOURCE_NOT_FOUND) => Vec::new(),
        Err(error) => return Err(refused(Operation::Describe, error)),
    };
    let doomed: Vec<Mechanism> = held
        .into_iter()
        .filter(|held| mechanism.is_none_or(|wanted| wanted == *held))
        .collect();
    for mechanism in &doomed {
        let delete = ScramAlteration::Delete {
            user: user.to_string(),
            mechanism: *mechanism,
        };
        (admin.alter_user_scram_credentials(&[delete]).await)
            .map_err(|e| refused(Operation::Alter, e))?;
    }
    Ok(doomed)
}

fn print_users(users: &[UserScramCredentials], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            users
                .iter()
                .map(|u| json!({
                    "user": u.user,
                    "credentials": u.credentials.iter().map(|c| json!({
                        "mechanism": c.mechanism.name(),
                        "iterations": c.iterations,
                    })).collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>()
        )),
        Format::Text => print_table(
            &["USER", "MECHANISM", "ITERATIONS"],
            &users
                .iter()
                .flat_map(|u| {
                    u.credentials.iter().map(|c| {
                        vec![
                            u.user.clone(),
                            c.mechanism.name().to_string(),
                            c.iterations.to_string(),
                        ]
                    })
                })
                .collect::<Vec<_>>(),
        ),
    }
}
