//! strata-http: the HTTP side the broker and apps serve, on kept crates
//! (axum for routing, hyper for the connections, prometheus-client for the
//! Prometheus text).
//!
//! - [`access`]: who may reach an endpoint: loopback by default, beyond it
//!   TLS and a token, as the broker's listeners.
//! - [`serve`]: one router served on a listener under limits (a time to
//!   send a request's head, a cap on open connections, a life per
//!   connection) and its access.
//! - [`client`]: one GET to another process's endpoint, secured the same
//!   way.
//! - [`exposition`]: Prometheus text with `# HELP` and `# TYPE` for every
//!   family, written through prometheus-client's encoder.
//! - [`histogram`]: a latency histogram of fixed buckets, recorded from
//!   any thread without a lock.
//! - [`login`]: what a request passes first: a loopback `Host` on a
//!   loopback listener, and the token or a password (checked at a bounded
//!   pace).
//! - [`metrics_endpoint`]: `GET /metrics` answered with one exposition.
//! - [`console`]: the web console's page, built into the binary, beside
//!   `/metrics`.

pub mod access;
pub mod client;
pub mod console;
pub mod exposition;
pub mod histogram;
pub mod login;
pub mod metrics_endpoint;
pub mod serve;

pub use access::{Access, AccessError, HttpSecurity};
/// The router type endpoints are built of (axum's), for crates that serve one.
pub use axum::Router;
pub use exposition::{Exposition, Families};
pub use histogram::LatencyHistogram;
pub use serve::{ACCEPT_RETRY_DELAY, Limits, serve};
