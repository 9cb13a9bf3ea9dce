//! The security tables of `strata.toml`: `[[listeners]]`, `[tls]` and
//! `[sasl]`, read into the broker's settings and checked on the way.

use std::net::SocketAddr;

use super::auth::{ClientAuth, SaslSettings, TlsSettings};
use super::listener::{self, ListenerConfig, SecurityProtocol};
use strata_protocol::sasl::Mechanism;

/// One `[[listeners]]` entry.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTable {
    /// The protocol's name when unset.
    pub name: Option<String>,
    pub protocol: SecurityProtocol,
    pub listen: SocketAddr,
    /// `HOST:PORT` clients are told to connect to.
    pub advertised: Option<String>,
}

/// The `[tls]` table.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsTable {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub client_ca: Option<std::path::PathBuf>,
    /// "none" (the default), "requested" or "required".
    pub client_auth: Option<String>,
}

/// The `[sasl]` table.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaslTable {
    /// Enabled mechanisms, e.g. `["SCRAM-SHA-512", "PLAIN"]`.
    pub mechanisms: Option<Vec<String>>,
    /// Kafka's `connections.max.reauth.ms`; 0 (the default) never expires.
    pub session_lifetime_ms: Option<u64>,
    pub failed_login_delay_ms: Option<u64>,
    /// A connection not authenticated this long after it started is closed.
    pub login_timeout_ms: Option<u64>,
}

impl SaslTable {
    pub(super) fn apply(&self, settings: &mut SaslSettings) -> Result<(), String> {
        if let Some(names) = &self.mechanisms {
            settings.mechanisms = parse_mechanisms(names.iter().map(String::as_str))?;
        }
        if let Some(ms) = self.session_lifetime_ms {
            settings.session_lifetime = (ms > 0).then(|| std::time::Duration::from_millis(ms));
        }
        if let Some(ms) = self.failed_login_delay_ms {
            settings.failed_login_delay = std::time::Duration::from_millis(ms);
        }
        if let Some(ms) = self.login_timeout_ms {
            if ms == 0 {
                return Err("[sasl] login_timeout_ms must be above 0".into());
            }
            settings.login_timeout = std::time::Duration::from_millis(ms);
        }
        Ok(())
    }
}

/// Mechanism names, each once, at least one.
pub fn parse_mechanisms<'a>(
    names: impl Iterator<Item = &'a str>,
) -> Result<Vec<Mechanism>, String> {
    let mut mechanisms = Vec::new();
    for name in names {
        let mechanism: Mechanism = name
            .trim()
            .parse()
            .map_err(|e| format!("[sasl] mechanisms: {e}"))?;
        if !mechanisms.contains(&mechanism) {
            mechanisms.push(mechanism);
        }
    }
    if mechanisms.is_empty() {
        return Err("[sasl] mechanisms: enable at least one".into());
    }
    Ok(mechanisms)
}

impl ListenerTable {
    pub(super) fn to_config(&self) -> Result<ListenerConfig, String> {
        let name = match &self.name {
            Some(name) => {
                listener::check_name(name)?;
                name.clone()
            }
            None => self.protocol.name().to_string(),
        };
        let advertised = self
            .advertised
            .as_deref()
            .map(listener::parse_advertised)
            .transpose()?;
        Ok(ListenerConfig {
            name,
            protocol: self.protocol,
            listen: self.listen,
            advertised,
        })
    }
}

impl TlsTable {
    pub(super) fn to_settings(&self) -> Result<TlsSettings, String> {
        let client_auth = match &self.client_auth {
            Some(text) => text.parse::<ClientAuth>()?,
            None => ClientAuth::None,
        };
        Ok(TlsSettings {
            cert: self.cert.clone(),
            key: self.key.clone(),
            client_ca: self.client_ca.clone(),
            client_auth,
        })
    }
}
