//! Arguments every broker-facing command shares: where the cluster is, and
//! how listings are printed.

use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::SecurityArgs;
use crate::client::{Admin, ClientConfig, ClientSecurity, Cluster};

/// Where the cluster is.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// Broker addresses to bootstrap from (comma-separated).
    #[arg(
        long,
        env = "STRATA_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap: String,
    #[command(flatten)]
    pub security: SecurityArgs,
}

impl BrokerArgs {
    /// Connects to the first reachable bootstrap broker.
    pub async fn connect(&self) -> anyhow::Result<Arc<Cluster>> {
        let mut config = ClientConfig::new(&self.bootstrap);
        config.client_id = "strata-cli".into();
        config.retries = 3;
        config.security = self.security.security()?;
        Cluster::connect(config)
            .await
            .map_err(|error| anyhow::anyhow!("cannot connect to {}: {error}", self.bootstrap))
    }

    /// An admin client of the cluster, and the security settings it
    /// connected with (which name the principal when the ACLs refuse).
    pub async fn admin(&self) -> anyhow::Result<(Admin, ClientSecurity)> {
        let cluster = self.connect().await?;
        let security = cluster.config().security.clone();
        Ok((Admin::new(cluster), security))
    }
}

/// How listings are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Aligned columns for a terminal.
    #[default]
    Text,
    /// One JSON document, for scripts.
    Json,
}

/// Parses `key=value`.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got '{s}'"))
}
