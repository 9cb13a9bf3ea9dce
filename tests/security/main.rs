//! TLS, SASL and ACLs end to end: strata's client and real clients over every security protocol, users and ACLs managed through the CLI and the broker.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

#[path = "../support/mod.rs"]
mod support;

mod acls;
mod client;
mod clients;
mod metrics;
mod users_cli;
