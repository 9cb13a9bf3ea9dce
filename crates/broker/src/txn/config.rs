//! Limits and timing rules of the transaction coordinator.

use std::time::Duration;

/// Timing rules for transactions.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// The longest `transaction.timeout.ms` a producer may ask for (Kafka's
    /// `transaction.max.timeout.ms`); InitProducerId refuses a longer one
    /// with INVALID_TRANSACTION_TIMEOUT.
    pub max_timeout_ms: i32,
    /// How often transactions past their timeout are looked for and
    /// aborted (Kafka's
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    pub abort_check_interval: Duration,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout_ms: 900_000,
            abort_check_interval: Duration::from_secs(10),
        }
    }
}
