//! [`StartAt`]: where a task without state starts reading an external
//! input, and the offset that gives in the log.

use crate::error::RuntimeError;

use super::TaskSetup;

/// Where a task with no committed offset starts reading an external input
/// (derived inputs are always read from their start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// The earliest offset still retained.
    #[default]
    Earliest,
    Offset(i64),
    /// The first record with a timestamp at or after this (ms since the
    /// Unix epoch); the end of the partition if there is none.
    Timestamp(i64),
}

/// The offset a task without state starts `log_topic` at: an offset must
/// be retained, or the end (nothing to read yet).
pub(super) async fn first_offset(
    setup: &TaskSetup,
    log_topic: &str,
    start: StartAt,
) -> Result<i64, RuntimeError> {
    let earliest = setup.log.start_offset(log_topic, setup.partition).await?;
    match start {
        StartAt::Earliest => Ok(earliest),
        StartAt::Offset(offset) if offset < earliest => Err(RuntimeError::NotRetained {
            topic: log_topic.to_string(),
            partition: setup.partition,
            offset,
            start: earliest,
        }),
        StartAt::Offset(offset) => {
            let end = setup.log.end_offset(log_topic, setup.partition).await?;
            if offset > end {
                return Err(RuntimeError::BeyondEnd {
                    topic: log_topic.to_string(),
                    partition: setup.partition,
                    offset,
                    end,
                });
            }
            Ok(offset)
        }
        StartAt::Timestamp(ms) => {
            setup
                .log
                .offset_for_timestamp(log_topic, setup.partition, ms)
                .await
        }
    }
}
