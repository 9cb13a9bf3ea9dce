//! The broker's HTTP endpoints: `/metrics` (`metrics` in strata.toml,
//! `--metrics`) and the web console (`console`, `--console`: the page,
//! what it describes the broker as, and `/metrics`), both through
//! strata-http and secured alike:
//!
//! - loopback by default; beyond it only with TLS (`metrics_tls`, the
//!   `[tls]` certificate) and authentication, or with
//!   `allow_unauthenticated_remote`;
//! - authentication: a token (`metrics_token_file`; `Bearer TOKEN`, or HTTP
//!   Basic with the token as the password), and with `metrics_basic_auth`
//!   a user's name and password by HTTP Basic, checked against the SCRAM
//!   credentials SASL checks (`strata users add`), for a user the ACLs
//!   allow DESCRIBE on the cluster (or a super user): what a browser can
//!   send for the console (at a bounded pace: see strata-http's `login`),
//!   and only over TLS beyond loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::api::BrokerContext;
use super::auth::{Caller, Principal};
use super::config::BrokerConfig;
use super::error::BrokerError;
use super::listener::SecurityProtocol;
use strata_protocol::acl::{Operation, Resource};

/// The broker's metrics, written from its context at each scrape.
pub(crate) fn exposition(ctx: &Arc<BrokerContext>) -> strata_http::Exposition {
    let ctx = Arc::clone(ctx);
    strata_http::Exposition::new(move |families| {
        let sources = (&*ctx.log, &ctx.groups);
        ctx.metrics
            .write(families, sources, (&ctx.transactions, &ctx.acls))
    })
}

/// The console's routes: the page and `/metrics`, and what it describes
/// the broker as (its listeners; every figure is in the metrics).
pub(crate) fn console_router(
    ctx: &Arc<BrokerContext>,
    listeners: &[(String, SecurityProtocol, SocketAddr)],
) -> strata_http::Router {
    let listeners: Vec<serde_json::Value> = (listeners.iter())
        .map(|(name, protocol, addr)| {
            serde_json::json!({
                "name": name,
                "protocol": protocol.name(),
                "address": addr.to_string(),
            })
        })
        .collect();
    let description = serde_json::json!({ "kind": "broker", "listeners": listeners });
    let describe: strata_http::console::Describe = Arc::new(move || description.clone());
    strata_http::console::router(Arc::new(exposition(ctx)), describe)
}

/// Binds an HTTP endpoint (`what`: metrics or console) secured as the
/// module says.
pub(crate) async fn bind_http(
    addr: SocketAddr,
    what: &str,
    ctx: &Arc<BrokerContext>,
) -> Result<(TcpListener, strata_http::Access), BrokerError> {
    let mut access = access(&ctx.config)?;
    if ctx.config.metrics_basic_auth {
        // Users' passwords never travel in clear beyond this machine,
        // whatever else is allowed.
        if !ctx.config.metrics_tls && !addr.ip().is_loopback() {
            return Err(BrokerError::Config(format!(
                "metrics_basic_auth would take users' passwords in clear on {addr}: set metrics_tls = true (with a [tls] certificate and key), or give the {what} a loopback address"
            )));
        }
        access = access.with_passwords(Arc::new(ScramLogins(Arc::clone(ctx))));
    }
    access.check_bind(addr, what).map_err(|_| {
        BrokerError::Config(format!(
            "the {what} on {addr}, beyond this machine, needs TLS and authentication: set metrics_tls = true (with a [tls] certificate and key) and metrics_token_file or metrics_basic_auth = true in strata.toml, or give a loopback address (allow_unauthenticated_remote = true serves it to anyone, and opens the Kafka listeners too)"
        ))
    })?;
    let listener = (TcpListener::bind(addr).await).map_err(|error| BrokerError::Io {
        context: format!("listening for the {what} on {addr}"),
        error,
    })?;
    Ok((listener, access))
}

/// TLS with the broker's certificate when `metrics_tls`, the token of
/// `metrics_token_file`.
fn access(config: &BrokerConfig) -> Result<strata_http::Access, BrokerError> {
    let tls = match (&config.tls, config.metrics_tls) {
        (Some(tls), true) => Some((tls.cert.clone(), tls.key.clone())),
        (None, true) => {
            return Err(BrokerError::Config(
                "metrics_tls needs the broker's certificate and key: add a [tls] table (cert, key)"
                    .into(),
            ));
        }
        (_, false) => None,
    };
    let security = strata_http::HttpSecurity {
        tls,
        tls_ca: None,
        token_file: config.metrics_token_file.clone(),
        allow_unauthenticated_remote: config.allow_unauthenticated_remote,
    };
    security
        .load()
        .map_err(|e| BrokerError::Config(e.to_string()))
}

/// HTTP Basic checked as SASL/PLAIN is (the password against the user's
/// SCRAM credential), then against the ACLs: DESCRIBE on the cluster.
struct ScramLogins(Arc<BrokerContext>);

impl strata_http::access::PasswordCheck for ScramLogins {
    fn check(&self, user: &str, password: &str, peer: std::net::IpAddr) -> bool {
        let ctx = &self.0;
        if !ctx.credentials.verify_plain(user, password) {
            return false;
        }
        let caller = Caller {
            principal: Principal::user(user),
            host: peer.to_string(),
            secured: true,
        };
        (ctx.acls).authorize(&caller, Operation::Describe, Resource::cluster())
    }
}
