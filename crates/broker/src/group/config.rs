//! Limits and timing rules of the group coordinator.

use std::time::Duration;

/// Longest metadata string stored with a committed offset (Kafka's
/// `offset.metadata.max.bytes` default).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Kafka's default `offsets.retention.minutes`: 7 days.
pub const OFFSETS_RETENTION_DEFAULT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often expired offsets are looked for (Kafka's
/// `offsets.retention.check.interval.ms` default).
pub const OFFSETS_RETENTION_CHECK_DEFAULT: Duration = Duration::from_secs(600);

/// Timing rules for groups.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// How long the first rebalance of an empty group waits for more members
    /// before it completes (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay: Duration,
    /// Session timeouts a member may ask for.
    pub session_timeout_min: Duration,
    pub session_timeout_max: Duration,
    /// How long committed offsets outlive their group's members (Kafka's
    /// `offsets.retention.minutes`, KIP-211): see
    /// `GroupCoordinator::expire_offsets`.
    pub offsets_retention: Duration,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay: Duration::from_secs(3),
            session_timeout_min: Duration::from_secs(6),
            session_timeout_max: Duration::from_secs(30 * 60),
            offsets_retention: OFFSETS_RETENTION_DEFAULT,
        }
    }
}
