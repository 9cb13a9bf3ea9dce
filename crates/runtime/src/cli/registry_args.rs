//! The schema registry an app's registry codecs (Avro, Protobuf, JSON
//! Schema) ask, taken by every subcommand: `--schema-registry URL`, with
//! credentials, a CA and the subject strategy. Installed for the process
//! before the subcommand runs (see `strata_schema::install`).
//!
//! The credentials come from a file or the environment, never a flag's
//! value, which `ps` would show to every user of the machine (as the SASL
//! password, see `security_args`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use strata_schema::SubjectStrategy;
use strata_schema::registry::{HttpRegistry, RegistryConfig};

use crate::error::RuntimeError;

/// The variable holding `USER:PASSWORD` when no file is given.
pub const AUTH_ENV: &str = "STRATA_SCHEMA_REGISTRY_AUTH";

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
    /// A file whose first line is USER:PASSWORD for the registry's HTTP
    /// Basic authentication (or set STRATA_SCHEMA_REGISTRY_AUTH); sent
    /// over https only, or to this machine.
    #[arg(long, global = true, value_name = "FILE")]
    pub schema_registry_auth_file: Option<PathBuf>,
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
            basic_auth: self.credentials()?,
            ca: self.schema_registry_ca.clone(),
        };
        let registry =
            HttpRegistry::new(&config).map_err(|e| RuntimeError::Config(e.to_string()))?;
        let subjects = self.schema_registry_subjects.unwrap_or_default();
        strata_schema::install(Arc::new(registry), subjects);
        Ok(())
    }

    /// USER:PASSWORD, from the file or the environment.
    fn credentials(&self) -> Result<Option<String>, RuntimeError> {
        let Some(path) = &self.schema_registry_auth_file else {
            return Ok(std::env::var(AUTH_ENV).ok().filter(|pair| !pair.is_empty()));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            RuntimeError::Config(format!(
                "the schema registry's credentials file {}: {e}",
                path.display()
            ))
        })?;
        let pair = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_end()
            .to_string();
        Ok(Some(pair))
    }
}
