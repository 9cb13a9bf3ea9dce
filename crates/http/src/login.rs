//! What every request passes before a route sees it:
//!
//! 1. **On a loopback listener, a loopback `Host`.** A page elsewhere that
//!    points a name of its own at 127.0.0.1 (DNS rebinding) would
//!    otherwise read the endpoint through its visitor's browser; its
//!    requests carry that name, and are answered 421.
//! 2. **Authentication, where [`Access`] asks for it** (see
//!    [`Access::admits`]): else 401, with the challenges `Basic` (a
//!    browser asks its user) and `Bearer`, and the connection closed.
//!
//! A password ([`PasswordCheck`](crate::access::PasswordCheck): a key derivation of milliseconds) goes
//! through [`Logins`]: at most [`PASSWORD_CHECKS_AT_ONCE`] checks at once
//! on the blocking pool; a refusal answered only after
//! [`FAILED_LOGIN_DELAY`], as a failed SASL login is, so guessing is slow;
//! and a header accepted is remembered for [`LOGIN_REMEMBERED`], so a
//! console reading `/metrics` every second does not derive a key each
//! time (a password changed or an ACL removed then takes that long to
//! shut a browser out).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::access::Access;

/// Password checks run at once; more wait.
pub const PASSWORD_CHECKS_AT_ONCE: usize = 4;
/// How long a refused password waits for its answer (SASL's default
/// `failed_login_delay`).
pub const FAILED_LOGIN_DELAY: Duration = Duration::from_secs(1);
/// How long an accepted password header is taken without a new check.
pub const LOGIN_REMEMBERED: Duration = Duration::from_secs(60);
/// Accepted headers remembered at once.
const LOGINS_REMEMBERED_MAX: usize = 256;

/// The peer's address, put on each request by the server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub IpAddr);

/// The password checks of one endpoint (see the module doc).
pub(crate) struct Logins {
    access: Access,
    checks: Semaphore,
    /// A keyed hash of (header, peer) → when it was accepted.
    accepted: Mutex<HashMap<u64, Instant>>,
    hasher: RandomState,
}

impl Logins {
    pub fn new(access: Access) -> Arc<Self> {
        Arc::new(Self {
            access,
            checks: Semaphore::new(PASSWORD_CHECKS_AT_ONCE),
            accepted: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
        })
    }

    /// Whether `header` from `peer` authenticates.
    async fn admit(&self, header: Option<Vec<u8>>, peer: IpAddr) -> bool {
        if !self.access.checks_password(header.as_deref()) {
            return self.access.admits(header.as_deref(), peer);
        }
        let digest = self.hasher.hash_one((&header, peer));
        if self.remembered(digest) {
            return true;
        }
        let Ok(_slot) = self.checks.acquire().await else {
            return false;
        };
        let access = self.access.clone();
        let check = tokio::task::spawn_blocking(move || access.admits(header.as_deref(), peer));
        if check.await.unwrap_or(false) {
            let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
            if accepted.len() >= LOGINS_REMEMBERED_MAX {
                accepted.retain(|_, at| at.elapsed() < LOGIN_REMEMBERED);
                if accepted.len() >= LOGINS_REMEMBERED_MAX {
                    accepted.clear();
                }
            }
            accepted.insert(digest, Instant::now());
            return true;
        }
        tokio::time::sleep(FAILED_LOGIN_DELAY).await;
        false
    }

    fn remembered(&self, digest: u64) -> bool {
        let accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        accepted
            .get(&digest)
            .is_some_and(|at| at.elapsed() < LOGIN_REMEMBERED)
    }
}

/// Answers 401 to a request that does not authenticate.
pub(crate) async fn require_authentication(
    State(logins): State<Arc<Logins>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request.headers().get(header::AUTHORIZATION);
    let given = given.map(|value| value.as_bytes().to_vec());
    let peer = request.extensions().get::<Peer>();
    let peer = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0);
    if logins.admit(given, peer).await {
        return next.run(request).await;
    }
    // Closed after the answer: a caller without the token holds no place.
    let mut refused = (
        StatusCode::UNAUTHORIZED,
        [(header::CONNECTION, "close")],
        "authentication is needed: send Authorization: Bearer TOKEN (the first line of the endpoint's token file), or HTTP Basic with the token as the password (or, where the broker checks them, a user's name and password)\n",
    )
        .into_response();
    // Basic first: a browser asks its user for a name and password.
    let challenges = refused.headers_mut();
    for challenge in [r#"Basic realm="strata", charset="UTF-8""#, "Bearer"] {
        challenges.append(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    refused
}

/// Answers 421 to a request to a loopback listener whose `Host` is not a
/// loopback name or address.
pub(crate) async fn loopback_host_only(request: Request, next: Next) -> Response {
    // A request without a `Host` (HTTP/1.0) is no browser's.
    let host = request.headers().get(header::HOST).map(|h| h.to_str());
    if host.is_none() || host.is_some_and(|h| h.is_ok_and(is_loopback_host)) {
        return next.run(request).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        "this endpoint serves this machine only: ask it as localhost or 127.0.0.1\n",
    )
        .into_response()
}

/// Whether a `Host` value (name or address, with or without a port) names
/// this machine's loopback.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // [::1]:port
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_told_from_other_names() {
        for host in [
            "localhost",
            "localhost:9090",
            "127.0.0.1:80",
            "[::1]:9090",
            "127.1.2.3",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example",
            "evil.example:9090",
            "10.0.0.5:9090",
            "[2001:db8::1]:80",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
