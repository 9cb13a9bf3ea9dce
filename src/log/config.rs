//! Per-topic log configuration, named and parsed as Kafka names it
//! (`retention.ms`, `segment.bytes`, …) so that CreateTopics and
//! DescribeConfigs can pass the keys through unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::LogError;

/// The settings one partition log runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        }
    }
}

/// Every key [`LogConfig::apply`] understands, in DescribeConfigs order.
pub const CONFIG_KEYS: &[&str] = &[
    "cleanup.policy",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
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
        let unlimited_or_positive = || {
            let v = int()?;
            if v == -1 || v > 0 {
                Ok(v)
            } else {
                Err(invalid("must be positive, or -1 for unlimited"))
            }
        };
        match key {
            "cleanup.policy" if value == "delete" => {}
            "cleanup.policy" => return Err(invalid("only 'delete' is supported")),
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
            "cleanup.policy" => "delete".to_string(),
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
        assert!(config.apply("cleanup.policy", "compact").is_err());
    }

    #[test]
    fn every_listed_key_can_be_read() {
        let config = LogConfig::default();
        for key in CONFIG_KEYS {
            assert!(config.get(key).is_some(), "{key}");
        }
    }
}
