//! How a client secures its connections, named as Kafka's clients name
//! the settings: `security.protocol`, `ssl.ca.location`,
//! `ssl.certificate.location`, `ssl.key.location`,
//! `ssl.endpoint.identification.algorithm`, `sasl.mechanism`,
//! `sasl.username` and `sasl.password`.
//!
//! [`ClientSecurity::from_properties`] reads a client properties file in
//! Kafka's format (`key=value`, `#` and `!` comments). A security-looking
//! key this client does not know (`ssl.*`, `sasl.*`, `security.*`) is an
//! error naming it: a setting silently ignored could leave a connection
//! less secure than its owner believes. Other keys (`client.id`,
//! `acks`, …) are ignored, so one file serves Kafka's tools and strata's.
//!
//! The password is held in a [`Password`], whose `Debug` hides it; no error
//! of this module or of the connection quotes it.

use std::fmt;
use std::path::{Path, PathBuf};

use strata_protocol::sasl::Mechanism;
use strata_protocol::security::SecurityProtocol;

/// The environment variable a password may come from.
pub const PASSWORD_ENV: &str = "STRATA_SASL_PASSWORD";

/// A SASL password: compared and used, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(password: impl Into<String>) -> Self {
        Self(password.into())
    }

    /// The password itself, for the SASL exchange only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The first line of a file (a trailing newline is not part of it).
    pub fn from_file(path: &Path) -> Result<Self, SecurityConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| SecurityConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Self(text.lines().next().unwrap_or_default().to_string()))
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(***)")
    }
}

/// A client's security settings; the default is PLAINTEXT.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecurity {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// `ssl.ca.location`: the CAs the broker's certificate must chain to
    /// (required for SSL and SASL_SSL: there is no system trust store).
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: this client's certificate chain, for a
    /// broker that asks for one.
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: the key of that certificate.
    pub key_location: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default)
    /// checks the certificate names the host connected to; empty does not.
    pub verify_host_name: bool,
    /// `sasl.mechanism` (PLAIN when SASL is used and none is given).
    pub mechanism: Option<Mechanism>,
    /// `sasl.username`.
    pub username: Option<String>,
    /// `sasl.password`.
    pub password: Option<Password>,
}

impl Default for ClientSecurity {
    fn default() -> Self {
        Self {
            protocol: SecurityProtocol::Plaintext,
            ca_location: None,
            certificate_location: None,
            key_location: None,
            verify_host_name: true,
            mechanism: None,
            username: None,
            password: None,
        }
    }
}

/// Written by hand: the password shows as whether it is set.
impl fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("protocol", &self.protocol)
            .field("ca_location", &self.ca_location)
            .field("certificate_location", &self.certificate_location)
            .field("key_location", &self.key_location)
            .field("verify_host_name", &self.verify_host_name)
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Why security settings cannot be used. Never quotes a password.
#[derive(Debug, thiserror::Error)]
pub enum SecurityConfigError {
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    #[error("line {line}: expected key=value")]
    NotKeyValue { line: usize },
    #[error(
        "unknown security setting {key:?}: this client knows security.protocol, ssl.ca.location, ssl.certificate.location, ssl.key.location, ssl.endpoint.identification.algorithm, sasl.mechanism, sasl.username and sasl.password"
    )]
    UnknownKey { key: String },
    #[error("{key}: {reason}")]
    Value { key: String, reason: String },
    #[error("{0}")]
    Incomplete(String),
}

/// The properties-file keys this client reads.
const KEYS: [&str; 8] = [
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
];

impl ClientSecurity {
    /// Reads a client properties file.
    pub fn from_properties_file(path: &Path) -> Result<Self, SecurityConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| SecurityConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::from_properties(&text).map_err(|e| SecurityConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// Reads settings in Kafka's properties format (see the module docs).
    pub fn from_properties(text: &str) -> Result<Self, SecurityConfigError> {
        let mut security = Self::default();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (key, value) = line
                .split_once(['=', ':'])
                .ok_or(SecurityConfigError::NotKeyValue { line: index + 1 })?;
            security.set(key.trim(), value.trim())?;
        }
        Ok(security)
    }

    /// Sets one setting by its Kafka name; other keys are ignored unless
    /// they look like security settings.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SecurityConfigError> {
        let invalid = |reason: String| SecurityConfigError::Value {
            key: key.to_string(),
            reason,
        };
        let path = || (!value.is_empty()).then(|| PathBuf::from(value));
        match key {
            "security.protocol" => self.protocol = value.parse().map_err(invalid)?,
            "ssl.ca.location" => self.ca_location = path(),
            "ssl.certificate.location" => self.certificate_location = path(),
            "ssl.key.location" => self.key_location = path(),
            "ssl.endpoint.identification.algorithm" => {
                self.verify_host_name = match value.to_ascii_lowercase().as_str() {
                    "https" => true,
                    "" | "none" => false,
                    _ => return Err(invalid("use https (check the host name) or nothing".into())),
                }
            }
            "sasl.mechanism" | "sasl.mechanisms" => {
                self.mechanism = Some(value.parse().map_err(|e| invalid(format!("{e}")))?);
            }
            "sasl.username" => self.username = Some(value.to_string()),
            "sasl.password" => self.password = Some(Password::new(value)),
            _ if looks_like_security(key) => {
                return Err(SecurityConfigError::UnknownKey {
                    key: key.to_string(),
                });
            }
            _ => {}
        }
        debug_assert!(!looks_like_security(key) || KEYS.contains(&key) || key == "sasl.mechanisms");
        Ok(())
    }

    /// Checks the settings hang together: TLS has its CA, a certificate its
    /// key, SASL its user name and password.
    pub fn validate(&self) -> Result<(), SecurityConfigError> {
        let incomplete = |text: &str| Err(SecurityConfigError::Incomplete(text.to_string()));
        if self.protocol.uses_tls() && self.ca_location.is_none() {
            return incomplete(&format!(
                "{} needs ssl.ca.location (--ssl-ca-location): the CA certificate(s) that signed the broker's",
                self.protocol
            ));
        }
        if self.certificate_location.is_some() != self.key_location.is_some() {
            return incomplete(
                "give ssl.certificate.location and ssl.key.location together (a client certificate and its key)",
            );
        }
        if self.protocol.uses_sasl() {
            if self.username.as_deref().is_none_or(str::is_empty) {
                return incomplete(&format!(
                    "{} needs sasl.username (--sasl-username)",
                    self.protocol
                ));
            }
            if self.password.is_none() {
                return incomplete(&format!(
                    "{} needs a password: sasl.password in the properties file, --sasl-password-file, or {PASSWORD_ENV}",
                    self.protocol
                ));
            }
        }
        Ok(())
    }

    /// The mechanism SASL uses (PLAIN unless configured, as Kafka's).
    pub fn sasl_mechanism(&self) -> Mechanism {
        self.mechanism.unwrap_or(Mechanism::Plain)
    }
}

fn looks_like_security(key: &str) -> bool {
    ["ssl.", "sasl.", "security."]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_properties_file_sets_every_setting_and_ignores_other_keys() {
        let text = "# a comment\n! another\nclient.id = app\nsecurity.protocol=SASL_SSL\n\
                    ssl.ca.location=/ca.pem\nssl.endpoint.identification.algorithm=\n\
                    sasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=s3cret\n";
        let security = ClientSecurity::from_properties(text).unwrap();
        assert_eq!(security.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(security.ca_location, Some(PathBuf::from("/ca.pem")));
        assert!(!security.verify_host_name);
        assert_eq!(security.mechanism, Some(Mechanism::ScramSha512));
        assert_eq!(security.username.as_deref(), Some("alice"));
        assert_eq!(security.password, Some(Password::new("s3cret")));
        security.validate().unwrap();
    }

    #[test]
    fn an_unknown_security_key_is_an_error_naming_it() {
        let error =
            ClientSecurity::from_properties("ssl.truststore.location=/x.jks\n").unwrap_err();
        assert!(
            error.to_string().contains("ssl.truststore.location"),
            "{error}"
        );
    }

    #[test]
    fn debug_output_never_shows_the_password() {
        let security = ClientSecurity {
            password: Some(Password::new("hunter2")),
            ..ClientSecurity::default()
        };
        let text = format!("{security:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!format!("{:?}", Password::new("hunter2")).contains("hunter2"));
    }

    #[test]
    fn tls_without_a_ca_is_refused_saying_what_to_give() {
        let security = ClientSecurity {
            protocol: SecurityProtocol::Ssl,
            ..ClientSecurity::default()
        };
        let error = security.validate().unwrap_err().to_string();
        assert!(error.contains("ssl.ca.location"), "{error}");
    }

    #[test]
    fn sasl_without_a_password_says_where_one_may_come_from() {
        let security = ClientSecurity {
            protocol: SecurityProtocol::SaslPlaintext,
            username: Some("alice".into()),
            ..ClientSecurity::default()
        };
        let error = security.validate().unwrap_err().to_string();
        assert!(error.contains(PASSWORD_ENV), "{error}");
    }
}
