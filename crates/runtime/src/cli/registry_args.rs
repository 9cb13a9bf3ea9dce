//! The schema registry an app's registry codecs (Avro, Protobuf, JSON
//! Schema) ask, taken by every subcommand: `--schema-registry URL`, with
//! credentials, a CA and the subject strategy. Installed for the process
//! before the subcommand runs (see `strata_schema::install`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use strata_schema::SubjectStrategy;
use strata_schema::registry::{HttpRegistry, RegistryConfig};

use crate::error::RuntimeError;

#[derive(Debug, Clone, Default, Args)]
pub struct RegistryArgs {
    /// The schema registry of the app's Avro, Protobuf and JSON Schema
    /// topics: http://HOST:PORT or https://HOST:PORT (Confluent's REST
    /// API, such as `strata serve --schema-registry`).
    #[arg(
        long,
        global = true,
        env = "STRATA_SCHEMA_REGISTRY",
        value_name = "URL"
    )]
    pub schema_registry: Option<String>,
    /// USER:PASSWORD for the registry's HTTP Basic authentication (sent
    /// over https only, or to this machine).
    #[arg(
        long,
        global = true,
        env = "STRATA_SCHEMA_REGISTRY_AUTH",
        value_name = "USER:PASSWORD",
        hide_env_values = true
    )]
    pub schema_registry_auth: Option<String>,
    /// CA certificates (PEM) the registry's certificate must chain to.
    #[arg(long, global = true, value_name = "FILE")]
    pub schema_registry_ca: Option<PathBuf>,
    /// The subjects schemas are registered under: topic (`<topic>-value`),
    /// record (the record's full name) or topic-record [default: topic].
    #[arg(long, global = true, value_name = "STRATEGY")]
    pub schema_registry_subjects: Option<SubjectStrategy>,
}

impl RegistryArgs {
    /// Installs the registry, when one is given.
    pub fn install(&self) -> Result<(), RuntimeError> {
        let Some(url) = &self.schema_registry else {
            return Ok(());
        };
        let config = RegistryConfig {
            url: url.clone(),
            basic_auth: self.schema_registry_auth.clone(),
            ca: self.schema_registry_ca.clone(),
        };
        let registry =
            HttpRegistry::new(&config).map_err(|e| RuntimeError::Config(e.to_string()))?;
        let subjects = self.schema_registry_subjects.unwrap_or_default();
        strata_schema::install(Arc::new(registry), subjects);
        Ok(())
    }
}
