//! The security flags every command that reaches a broker takes (the CLI's
//! and an app's in remote mode), each also from the environment, and the
//! client properties file (`--client-properties`, Kafka's
//! `--command-config`). A flag overrides the file; the password comes from
//! the file, `--sasl-password-file`, or `STRATA_SASL_PASSWORD` — never
//! from a flag, which any user of the machine could read in `ps`.

use std::path::PathBuf;

use clap::Args;

use strata_client::security::PASSWORD_ENV;
use strata_client::{ClientSecurity, Password, SecurityConfigError};
use strata_protocol::sasl::Mechanism;
use strata_protocol::security::SecurityProtocol;

#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct SecurityArgs {
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (security.protocol).
    #[arg(
        long,
        env = "STRATA_SECURITY_PROTOCOL",
        global = true,
        value_name = "PROTOCOL"
    )]
    pub security_protocol: Option<SecurityProtocol>,
    /// PEM file of the CA(s) that signed the broker's certificate
    /// (ssl.ca.location).
    #[arg(
        long,
        env = "STRATA_SSL_CA_LOCATION",
        global = true,
        value_name = "FILE"
    )]
    pub ssl_ca_location: Option<PathBuf>,
    /// PEM file of this client's certificate, for a broker that asks
    /// (ssl.certificate.location).
    #[arg(
        long,
        env = "STRATA_SSL_CERTIFICATE_LOCATION",
        global = true,
        value_name = "FILE"
    )]
    pub ssl_certificate_location: Option<PathBuf>,
    /// PEM file of that certificate's private key (ssl.key.location).
    #[arg(
        long,
        env = "STRATA_SSL_KEY_LOCATION",
        global = true,
        value_name = "FILE"
    )]
    pub ssl_key_location: Option<PathBuf>,
    /// `https` (default: check the broker's certificate names its host) or
    /// empty (don't).
    #[arg(
        long,
        env = "STRATA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM",
        global = true,
        value_name = "ALGORITHM"
    )]
    pub ssl_endpoint_identification_algorithm: Option<String>,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (sasl.mechanism).
    #[arg(
        long,
        env = "STRATA_SASL_MECHANISM",
        global = true,
        value_name = "MECHANISM"
    )]
    pub sasl_mechanism: Option<Mechanism>,
    /// The SASL user (sasl.username).
    #[arg(long, env = "STRATA_SASL_USERNAME", global = true, value_name = "USER")]
    pub sasl_username: Option<String>,
    /// A file whose first line is the SASL password (or set
    /// STRATA_SASL_PASSWORD).
    #[arg(
        long,
        env = "STRATA_SASL_PASSWORD_FILE",
        global = true,
        value_name = "FILE"
    )]
    pub sasl_password_file: Option<PathBuf>,
    /// A client properties file in Kafka's format (security.protocol,
    /// ssl.*, sasl.*); flags override it.
    #[arg(
        long,
        alias = "command-config",
        env = "STRATA_CLIENT_PROPERTIES",
        global = true,
        value_name = "FILE"
    )]
    pub client_properties: Option<PathBuf>,
}

impl SecurityArgs {
    /// The settings: the properties file, then the flags over it, then the
    /// password from its file or the environment when none is set.
    pub fn security(&self) -> Result<ClientSecurity, SecurityConfigError> {
        let mut security = match &self.client_properties {
            Some(path) => ClientSecurity::from_properties_file(path)?,
            None => ClientSecurity::default(),
        };
        if let Some(protocol) = self.security_protocol {
            security.protocol = protocol;
        }
        for (flag, setting) in [
            (&self.ssl_ca_location, &mut security.ca_location),
            (
                &self.ssl_certificate_location,
                &mut security.certificate_location,
            ),
            (&self.ssl_key_location, &mut security.key_location),
        ] {
            if let Some(path) = flag {
                *setting = Some(path.clone());
            }
        }
        if let Some(algorithm) = &self.ssl_endpoint_identification_algorithm {
            security.set("ssl.endpoint.identification.algorithm", algorithm)?;
        }
        if let Some(mechanism) = self.sasl_mechanism {
            security.mechanism = Some(mechanism);
        }
        if let Some(user) = &self.sasl_username {
            security.username = Some(user.clone());
        }
        if let Some(path) = &self.sasl_password_file {
            security.password = Some(Password::from_file(path)?);
        } else if security.password.is_none()
            && let Ok(password) = std::env::var(PASSWORD_ENV)
        {
            security.password = Some(Password::new(password));
        }
        Ok(security)
    }
}
