//! Crash points in the transaction protocol, for the hardening tests: a
//! broker started with `STRATA_CRASH_POINT=<name>` in its environment
//! aborts the process (no destructors, no flushes: what a SIGKILL does)
//! the first time it reaches that point. A random kill seldom lands in a
//! window a few microseconds wide; these make the windows of the
//! coordinator's protocol (see `coordinator`) testable one by one.
//!
//! - `txn-prepared`: a transaction's decision is durable, no marker is
//!   written;
//! - `txn-marked`: every marker is durable, the transaction is not yet
//!   complete.

use std::sync::OnceLock;

/// The variable that names the crash point.
const CRASH_POINT_VARIABLE: &str = "STRATA_CRASH_POINT";

/// A transaction's decision is durable, no marker is written.
pub(super) const TXN_PREPARED: &str = "txn-prepared";
/// Every marker is durable, the transaction is not yet complete.
pub(super) const TXN_MARKED: &str = "txn-marked";

/// Aborts the process if `name` is the configured crash point.
pub(super) fn reach(name: &str) {
    static CONFIGURED: OnceLock<Option<String>> = OnceLock::new();
    let configured = CONFIGURED.get_or_init(|| std::env::var(CRASH_POINT_VARIABLE).ok());
    if configured.as_deref() == Some(name) {
        tracing::error!("{CRASH_POINT_VARIABLE}={name}: aborting here");
        std::process::abort();
    }
}
