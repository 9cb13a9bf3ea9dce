//! A registry over HTTP, speaking the Confluent Schema Registry REST API:
//! `GET /schemas/ids/{id}` and `POST /subjects/{subject}/versions`. Over
//! TLS when the URL is `https://` (the registry's certificate checked
//! against a CA file, or the usual web roots), with HTTP Basic
//! credentials when given (Confluent's `basic.auth.user.info`).
//!
//! Blocking, on ureq: a codec asks only when it meets a schema id or a
//! subject for the first time (answers are cached by the caller), from a
//! task's own thread, so an async client would buy nothing here.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::json;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

use super::{Reference, Registry, RegistryError, SchemaText};
use crate::format::SchemaType;

/// The longest one question to the registry may take: it holds up the
/// task thread asking (see `codec`).
pub const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes of an answer read: schemas are small, so more is not the
/// registry's API.
pub const ANSWER_MAX: u64 = 16 << 20;

/// Where the registry is and how to reach it.
#[derive(Clone, Default)]
pub struct RegistryConfig {
    /// `http://host:port` or `https://host:port`, with a path prefix if the
    /// registry is served under one.
    pub url: String,
    /// `USER:PASSWORD` for HTTP Basic authentication.
    pub basic_auth: Option<String>,
    /// CA certificates (PEM) the registry's certificate must chain to;
    /// without, the usual web roots.
    pub ca: Option<PathBuf>,
}

/// Why a [`RegistryConfig`] cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("schema registry URL {0:?}: give http://HOST:PORT or https://HOST:PORT")]
    Url(String),
    #[error("schema registry credentials: give USER:PASSWORD")]
    Credentials,
    #[error("the schema registry's CA file {path}: {reason}")]
    Ca { path: PathBuf, reason: String },
    #[error("credentials would go in clear to {0}: use an https:// URL")]
    CredentialsInClear(String),
    #[error(
        "schema registry URL {0:?}: give credentials apart (--schema-registry-auth-file), not in the URL"
    )]
    UserInfo(String),
    #[error("a CA for the schema registry, whose URL {0:?} is not https://")]
    CaWithoutTls(String),
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("url", &self.url)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|_| "<redacted>"),
            )
            .field("ca", &self.ca)
            .finish()
    }
}

/// A registry over HTTP.
pub struct HttpRegistry {
    base: String,
    /// The Basic header: never printed.
    authorization: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for HttpRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRegistry")
            .field("base", &self.base)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl HttpRegistry {
    pub fn new(config: &RegistryConfig) -> Result<Self, ConfigError> {
        let base = config.url.trim_end_matches('/').to_string();
        let uri: ureq::http::Uri =
            (base.parse()).map_err(|_| ConfigError::Url(config.url.clone()))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(ConfigError::Url(config.url.clone())),
        };
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(ConfigError::UserInfo(config.url.clone()));
        }
        if config.ca.is_some() && !tls {
            return Err(ConfigError::CaWithoutTls(config.url.clone()));
        }
        let authorization = match &config.basic_auth {
            None => None,
            Some(pair) if !pair.contains(':') => return Err(ConfigError::Credentials),
            Some(_) if !tls && !is_loopback(&uri) => {
                return Err(ConfigError::CredentialsInClear(base));
            }
            Some(pair) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )),
        };
        let mut agent = ureq::Agent::config_builder()
            .timeout_global(Some(ASK_TIMEOUT))
            .http_status_as_error(false);
        if let Some(path) = &config.ca {
            agent = agent.tls_config(TlsConfig::builder().root_certs(ca_roots(path)?).build());
        }
        Ok(Self {
            base,
            authorization,
            agent: agent.build().into(),
        })
    }

    fn answer<T: for<'de> Deserialize<'de>>(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<T, RegistryError> {
        let unreachable = |reason: String| RegistryError::Unreachable {
            url: self.base.clone(),
            reason,
        };
        let mut response = response.map_err(|e| unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let body = (response.body_mut().with_config().limit(ANSWER_MAX))
            .read_to_string()
            .map_err(|e| unreachable(e.to_string()))?;
        if status >= 300 {
            return Err(refusal(status, &body));
        }
        serde_json::from_str(&body).map_err(|e| RegistryError::BadAnswer(format!("{e}: {body}")))
    }

    fn get(&self, path: &str) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        request.call()
    }

    fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut request = (self.agent.post(format!("{}{path}", self.base)))
            .header("Content-Type", "application/vnd.schemaregistry.v1+json");
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        request.send(body.to_string())
    }
}

impl Registry for HttpRegistry {
    fn schema_by_id(&self, id: u32) -> Result<SchemaText, RegistryError> {
        let answer: SchemaAnswer = self.answer(self.get(&format!("/schemas/ids/{id}")))?;
        answer.into_text()
    }

    fn register(&self, subject: &str, schema: &SchemaText) -> Result<u32, RegistryError> {
        let references: Vec<_> = (schema.references.iter())
            .map(|r| json!({"name": r.name, "subject": r.subject, "version": r.version}))
            .collect();
        let body = json!({
            "schema": schema.schema,
            "schemaType": schema.schema_type.as_str(),
            "references": references,
        });
        let path = format!("/subjects/{}/versions", encode_path(subject));
        let answer: IdAnswer = self.answer(self.post(&path, &body))?;
        Ok(answer.id)
    }
}

#[derive(Deserialize)]
struct IdAnswer {
    id: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<ReferenceAnswer>,
}

#[derive(Deserialize)]
struct ReferenceAnswer {
    name: String,
    subject: String,
    version: i32,
}

impl SchemaAnswer {
    fn into_text(self) -> Result<SchemaText, RegistryError> {
        let schema_type = SchemaType::parse(self.schema_type.as_deref()).ok_or_else(|| {
            RegistryError::BadAnswer(format!("schema type {:?}", self.schema_type))
        })?;
        Ok(SchemaText {
            schema_type,
            schema: self.schema,
            references: (self.references.into_iter())
                .map(|r| Reference {
                    name: r.name,
                    subject: r.subject,
                    version: r.version,
                })
                .collect(),
        })
    }
}

/// The registry's error body, `{"error_code": N, "message": "…"}`, or what
/// it answered instead.
fn refusal(status: u16, body: &str) -> RegistryError {
    #[derive(Deserialize)]
    struct ErrorAnswer {
        error_code: i64,
        message: String,
    }
    match serde_json::from_str::<ErrorAnswer>(body) {
        Ok(error) => RegistryError::Refused {
            status,
            code: error.error_code,
            message: error.message,
        },
        // Authentication refused in front of the API: said as it was.
        Err(_) if matches!(status, 401 | 403) => RegistryError::Refused {
            status,
            code: i64::from(status),
            message: body.chars().take(300).collect(),
        },
        // Not the registry's API answering (a proxy, a wrong path).
        Err(_) => RegistryError::BadAnswer(format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        )),
    }
}

/// What stays as it is in a path segment: RFC 3986's unreserved
/// characters; everything else is percent-encoded.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A subject as one path segment: subjects are free text (`orders-value`,
/// `com.example.Order`, anything with a `/`).
fn encode_path(subject: &str) -> String {
    utf8_percent_encode(subject, NOT_UNRESERVED).to_string()
}

/// Whether the URL's host is this machine.
fn is_loopback(uri: &ureq::http::Uri) -> bool {
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn ca_roots(path: &PathBuf) -> Result<RootCerts, ConfigError> {
    let fail = |reason: String| ConfigError::Ca {
        path: path.clone(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(cert)) => Some(Ok(cert)),
            Ok(_) => None,
            Err(e) => Some(Err(fail(e.to_string()))),
        })
        .collect::<Result<_, _>>()?;
    if certs.is_empty() {
        return Err(fail("no certificate in it".into()));
    }
    Ok(RootCerts::new_with_certs(&certs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_one_path_segment() {
        assert_eq!(encode_path("orders-value"), "orders-value");
        assert_eq!(encode_path("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn credentials_never_go_in_clear_beyond_this_machine() {
        let config = |url: &str| RegistryConfig {
            url: url.into(),
            basic_auth: Some("u:p".into()),
            ca: None,
        };
        assert!(HttpRegistry::new(&config("http://127.0.0.1:8081")).is_ok());
        assert!(HttpRegistry::new(&config("http://[::1]:8081/registry")).is_ok());
        assert!(HttpRegistry::new(&config("https://registry.example:8081")).is_ok());
        assert!(matches!(
            HttpRegistry::new(&config("http://registry.example:8081")),
            Err(ConfigError::CredentialsInClear(_))
        ));
        assert!(matches!(
            HttpRegistry::new(&config("registry.example:8081")),
            Err(ConfigError::Url(_))
        ));
        for disguised in [
            "http://localhost:8081@evil.example/",
            "http://127.0.0.1:1@evil.example:8081",
            "http://[::1]@evil.example",
        ] {
            assert!(
                matches!(
                    HttpRegistry::new(&config(disguised)),
                    Err(ConfigError::UserInfo(_))
                ),
                "{disguised}"
            );
        }
        let registry = HttpRegistry::new(&config("https://registry.example")).unwrap();
        assert!(!format!("{registry:?}").contains("u:p"));
        assert!(!format!("{registry:?}").contains("dTpw"));
    }

    #[test]
    fn a_registry_error_keeps_its_code() {
        let error = refusal(409, r#"{"error_code":409,"message":"incompatible"}"#);
        assert!(matches!(error, RegistryError::Refused { code: 409, .. }));
        let error = refusal(404, "<html>not found</html>");
        assert!(matches!(error, RegistryError::BadAnswer(_)));
        let error = refusal(401, "authentication is needed");
        assert!(matches!(error, RegistryError::Refused { code: 401, .. }));
    }
}
