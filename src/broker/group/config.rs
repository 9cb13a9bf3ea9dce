//! Limits and timing rules of the group coordinator.

use std::time::Duration;

/// Longest metadata string stored with a committed offset (Kafka's
/// `offset.metadata.max.bytes` default).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Timing rules for groups.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// How long the first rebalance of an empty group waits for more members
    /// before it completes (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay: Duration,
    /// Session timeouts a member may ask for.
    pub session_timeout_min: Duration,
    pub session_timeout_max: Duration,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay: Duration::from_secs(3),
            session_timeout_min: Duration::from_secs(6),
            session_timeout_max: Duration::from_secs(30 * 60),
        }
    }
}
