//! Per-topic log configuration, named and parsed as Kafka names it
//! (`retention.ms`, `segment.bytes`, …) so that CreateTopics and
//! DescribeConfigs can pass the keys through unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::LogError;

/// The settings one partition log runs with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogConfig {
    /// Roll a new segment once the active one would exceed this size.
    pub segment_bytes: u64,
    /// Roll a new segment once the active one is this old.
    pub segment_ms: i64,
    /// Delete segments whose newest record is older than this; -1 keeps forever.
    pub retention_ms: i64,
    /// Delete the oldest segments while the partition is larger; -1 is unlimited.
    pub retention_bytes: i64,
    /// Bytes of log between two sparse index entries.
    pub index_interval_bytes: u64,
    /// Maximum size of one index file (bounds entries per segment).
    pub segment_index_bytes: u64,
    /// Largest record batch accepted.
    pub max_message_bytes: usize,
    /// Flush after this many appended, unflushed records; -1 leaves it to `flush.ms`.
    pub flush_messages: i64,
    /// Flush data older than this; -1 leaves flushing to acks=all and shutdown.
    pub flush_ms: i64,
    /// `cleanup.policy`: which of retention (`delete`) and compaction
    /// (`compact`) apply; both may.
    #[serde(default)]
    pub cleanup: CleanupPolicy,
    /// Clean once the uncleaned share of the cleanable bytes reaches this
    /// (`min.cleanable.dirty.ratio`, 0 to 1).
    #[serde(default = "default_dirty_ratio")]
    pub min_cleanable_dirty_ratio: f64,
    /// Records younger than this are never compacted away.
    #[serde(default)]
    pub min_compaction_lag_ms: i64,
    /// A record older than this is compacted even below the dirty ratio.
    #[serde(default = "default_max_compaction_lag")]
    pub max_compaction_lag_ms: i64,
    /// How long a tombstone (a null value) stays after its segment was
    /// cleaned, so readers catching up still see the delete.
    #[serde(default = "default_delete_retention")]
    pub delete_retention_ms: i64,
}

/// `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        Self {
            delete: true,
            compact: false,
        }
    }
}

impl CleanupPolicy {
    /// Kafka's list form: `delete`, `compact` or `compact,delete`.
    pub fn parse(value: &str) -> Option<Self> {
        let mut policy = Self {
            delete: false,
            compact: false,
        };
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                _ => return None,
            }
        }
        (policy.delete || policy.compact).then_some(policy)
    }

    pub fn name(self) -> &'static str {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        }
    }
}

fn default_dirty_ratio() -> f64 {
    0.5
}

fn default_max_compaction_lag() -> i64 {
    i64::MAX
}

fn default_delete_retention() -> i64 {
    24 * 3_600_000
}

/// Largest segment size: positions in the offset index are u32, and Kafka
/// caps segments at 2 GiB.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
/// Smallest segment allowed (must hold at least one batch header).
pub const SEGMENT_BYTES_MIN: u64 = 1024;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
            max_message_bytes: 1_048_588,
            flush_messages: -1,
            flush_ms: -1,
            cleanup: CleanupPolicy::default(),
            min_cleanable_dirty_ratio: default_dirty_ratio(),
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: default_max_compaction_lag(),
            delete_retention_ms: default_delete_retention(),
        }
    }
}

/// Every key [`LogConfig::apply`] understands, in DescribeConfigs order.
pub const CONFIG_KEYS: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
];

impl LogConfig {
    /// Returns a copy with Kafka-named overrides applied, validating each.
    pub fn with_overrides(&self, overrides: &BTreeMap<String, String>) -> Result<Self, LogError> {
        let mut config = self.clone();
        for (key, value) in overrides {
            config.apply(key, value)?;
        }
        Ok(config)
    }

    /// Sets one Kafka-named key.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<(), LogError> {
        let invalid = |reason: &str| LogError::InvalidConfig {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let int = || {
            value
                .trim()
                .parse::<i64>()
                .map_err(|_| invalid("not an integer"))
        };
        let positive = || {
            let v = int()?;
            u64::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| invalid("must be positive"))
        };
        let non_negative = || {
            let v = int()?;
            if v >= 0 {
                Ok(v)
            } else {
                Err(invalid("must not be negative"))
            }
        };
        let unlimited_or_positive = || {
            let v = int()?;
            if v == -1 || v > 0 {
                Ok(v)
            } else {
                Err(invalid("must be positive, or -1 for unlimited"))
            }
        };
        match key {
            "cleanup.policy" => {
                self.cleanup = CleanupPolicy::parse(value)
                    .ok_or_else(|| invalid("must be delete, compact or compact,delete"))?;
            }
            "delete.retention.ms" => self.delete_retention_ms = non_negative()?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = non_negative()?,
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = i64::try_from(positive()?).unwrap_or(i64::MAX);
            }
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| invalid("must be a number from 0 to 1"))?;
            }
            "flush.messages" => self.flush_messages = unlimited_or_positive()?,
            "flush.ms" => self.flush_ms = unlimited_or_positive()?,
            "index.interval.bytes" => self.index_interval_bytes = positive()?,
            "max.message.bytes" => {
                self.max_message_bytes = usize::try_from(positive()?)
                    .ok()
                    .filter(|&v| v <= SEGMENT_BYTES_MAX as usize)
                    .ok_or_else(|| invalid("must be at most 2 GiB"))?;
            }
            "retention.bytes" => self.retention_bytes = unlimited_or_positive()?,
            "retention.ms" => self.retention_ms = unlimited_or_positive()?,
            "segment.bytes" => {
                let v = positive()?;
                if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&v) {
                    return Err(invalid("must be between 1 KiB and 2 GiB"));
                }
                self.segment_bytes = v;
            }
            "segment.index.bytes" => {
                let v = positive()?;
                if v < 64 {
                    return Err(invalid("must be at least 64"));
                }
                self.segment_index_bytes = v;
            }
            "segment.ms" => self.segment_ms = i64::try_from(positive()?).unwrap_or(i64::MAX),
            _ => return Err(invalid("unknown topic config")),
        }
        Ok(())
    }

    /// The value of a Kafka-named key, for DescribeConfigs.
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match key {
            "cleanup.policy" => self.cleanup.name().to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_by_kafka_name() {
        let overrides = BTreeMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("segment.bytes".to_string(), "4096".to_string()),
        ]);
        let config = LogConfig::default().with_overrides(&overrides).unwrap();
        assert_eq!(config.retention_ms, 1000);
        assert_eq!(config.segment_bytes, 4096);
        assert_eq!(config.get("retention.ms").as_deref(), Some("1000"));
    }

    #[test]
    fn bad_values_and_unknown_keys_are_rejected_with_the_key() {
        let mut config = LogConfig::default();
        let err = config.apply("segment.bytes", "12").unwrap_err().to_string();
        assert!(err.contains("segment.bytes=12"), "{err}");
        assert!(config.apply("retention.ms", "-5").is_err());
        assert!(config.apply("retention.ms", "soon").is_err());
        assert!(config.apply("no.such.key", "1").is_err());
        assert!(config.apply("cleanup.policy", "shred").is_err());
        assert!(config.apply("min.cleanable.dirty.ratio", "1.5").is_err());
        config.apply("cleanup.policy", "delete, compact").unwrap();
        assert_eq!(
            config.get("cleanup.policy").as_deref(),
            Some("compact,delete")
        );
        config.apply("cleanup.policy", "compact").unwrap();
        assert!(config.cleanup.compact && !config.cleanup.delete);
    }

    #[test]
    fn every_listed_key_can_be_read() {
        let config = LogConfig::default();
        for key in CONFIG_KEYS {
            assert!(config.get(key).is_some(), "{key}");
        }
    }
}
