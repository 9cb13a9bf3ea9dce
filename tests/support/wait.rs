//! Waiting for a condition with a limit: the one way the tests wait.
//!
//! The limit guards against hanging; it is not a measure of speed, so it is
//! generous. A test that gives up fails and names what it waited for.

use std::time::{Duration, Instant};

/// How often a condition is looked at again.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The moment a wait gives up.
pub struct Deadline {
    what: String,
    at: Instant,
}

impl Deadline {
    pub fn after(what: impl Into<String>, limit: Duration) -> Self {
        Self {
            what: what.into(),
            at: Instant::now() + limit,
        }
    }

    /// Fails the test, naming what it waited for and `still` (the last
    /// thing seen), once the deadline has passed.
    pub fn check(&self, still: impl std::fmt::Display) {
        assert!(
            Instant::now() < self.at,
            "gave up waiting for {}{still}",
            self.what
        );
    }
}

/// Polls `done` until it holds, blocking the thread; fails the test,
/// naming `what`, after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Deadline::after(what, limit);
    while !done() {
        deadline.check("");
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Like [`wait_until`], sleeping on the test's runtime between polls.
pub async fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Deadline::after(what, limit);
    while !done() {
        deadline.check("");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
