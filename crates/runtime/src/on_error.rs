//! [`OnError`]: what a task does with an input record its processor fails
//! on (an error it returns, or a key or value its input codecs cannot
//! decode).
//!
//! - [`OnError::Fail`] (the default): the task stops, its run in progress
//!   not committed; a fixed processor resumes at the record.
//! - [`OnError::skip`]: the record is passed over, counted in
//!   `strata_task_failed_records_total`.
//! - [`OnError::dead_letter`]: the record goes, unchanged, to the
//!   processor's dead-letter topic (`<app>-<processor>-dlq` by default,
//!   named per version like every derived topic) with headers saying where
//!   it came from and why it failed (see `task::dead_letters`), in the
//!   same commit as everything else: exactly once.
//!
//! Either way, past a limit of failures per minute (per task) the task
//! stops anyway, so a broken deploy does not divert every record (not in
//! a rebuild, which meets months of failures in minutes). An error of the
//! task's own state is no record's fault: it stops the task whatever the
//! policy.
//!
//! What the processor did for a failing record before its error (store
//! writes, emits) is undone: the task processes its run again from its
//! last commit, with the failing records diverted (see `task::run`).

use std::any::TypeId;

use strata_record::codec::Codec;

use super::spec::OutputSpec;

/// Failures per minute a task diverts before it stops, by default.
pub const FAILURES_PER_MINUTE_MAX: u32 = 100;

/// What a task does with a record its processor fails on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnError {
    /// The task stops (the default).
    #[default]
    Fail,
    /// The record is passed over and counted.
    Skip { per_minute_max: u32 },
    /// The record goes to a dead-letter topic (by default
    /// `<app>-<processor>-dlq`).
    DeadLetter {
        topic: Option<String>,
        per_minute_max: u32,
    },
}

impl OnError {
    /// Pass failing records over, counted (at most
    /// [`FAILURES_PER_MINUTE_MAX`] a minute per task).
    pub fn skip() -> Self {
        Self::Skip {
            per_minute_max: FAILURES_PER_MINUTE_MAX,
        }
    }

    /// Send failing records to `<app>-<processor>-dlq` (at most
    /// [`FAILURES_PER_MINUTE_MAX`] a minute per task).
    pub fn dead_letter() -> Self {
        Self::DeadLetter {
            topic: None,
            per_minute_max: FAILURES_PER_MINUTE_MAX,
        }
    }

    /// The dead-letter topic, named (dead letters only).
    pub fn to_topic(self, name: &str) -> Self {
        match self {
            Self::DeadLetter { per_minute_max, .. } => Self::DeadLetter {
                topic: Some(name.to_string()),
                per_minute_max,
            },
            other => other,
        }
    }

    /// At most `n` failures a minute per task; one more stops the task.
    pub fn at_most_per_minute(self, n: u32) -> Self {
        match self {
            Self::Fail => Self::Fail,
            Self::Skip { .. } => Self::Skip { per_minute_max: n },
            Self::DeadLetter { topic, .. } => Self::DeadLetter {
                topic,
                per_minute_max: n,
            },
        }
    }

    /// How many failures a minute a task diverts (0 for `Fail`).
    pub(crate) fn per_minute_max(&self) -> u32 {
        match self {
            Self::Fail => 0,
            Self::Skip { per_minute_max } | Self::DeadLetter { per_minute_max, .. } => {
                *per_minute_max
            }
        }
    }

    /// Whether failing records go to a dead-letter topic.
    pub(crate) fn sends_letters(&self) -> bool {
        matches!(self, Self::DeadLetter { .. })
    }

    /// How `strata_task_failed_records_total` names what is done.
    pub(crate) fn action(&self) -> &'static str {
        match self {
            Self::Fail => "failed",
            Self::Skip { .. } => "skipped",
            Self::DeadLetter { .. } => "dead_letter",
        }
    }
}

/// The headers a dead letter carries after its record's own (see
/// `task::dead_letters`), each value text.
pub(crate) mod letter_headers {
    // In the order a dead letter carries them.
    pub(crate) const TOPIC: &str = "strata.dlq.topic";
    pub(crate) const PARTITION: &str = "strata.dlq.partition";
    pub(crate) const OFFSET: &str = "strata.dlq.offset";
    pub(crate) const TIMESTAMP: &str = "strata.dlq.timestamp";
    pub(crate) const ERROR: &str = "strata.dlq.error";
    pub(crate) const ERROR_KIND: &str = "strata.dlq.error.kind";
    pub(crate) const APP: &str = "strata.dlq.app";
    pub(crate) const VERSION: &str = "strata.dlq.version";
    pub(crate) const PROCESSOR: &str = "strata.dlq.processor";
}

/// The type a dead-letter topic's declaration carries: no processor can
/// name it, so none emits to the topic but the task itself.
pub(crate) struct DeadLetterRecord;

/// The declaration of a dead-letter topic named `topic`: raw bytes, its
/// types no processor can name.
pub(crate) fn dead_letter_output(topic: String) -> OutputSpec {
    OutputSpec {
        topic,
        partitions: None,
        key_codec: Codec::Raw,
        value_codec: Codec::Raw,
        key_type: TypeId::of::<DeadLetterRecord>(),
        value_type: TypeId::of::<DeadLetterRecord>(),
        provenance: false,
    }
}

/// The dead-letter topic of processor `processor` of app `app` as the
/// policy names it (None when it sends none).
pub(crate) fn dead_letter_topic(app: &str, processor: &str, policy: &OnError) -> Option<String> {
    match policy {
        OnError::DeadLetter { topic, .. } => Some(
            topic
                .clone()
                .unwrap_or_else(|| format!("{app}-{processor}-dlq")),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_built_from_its_defaults() {
        assert_eq!(OnError::default(), OnError::Fail);
        assert_eq!(OnError::skip().per_minute_max(), FAILURES_PER_MINUTE_MAX);
        let dlq = OnError::dead_letter().to_topic("bad").at_most_per_minute(5);
        assert_eq!(
            dlq,
            OnError::DeadLetter {
                topic: Some("bad".into()),
                per_minute_max: 5
            }
        );
        assert_eq!(dead_letter_topic("app", "p", &dlq).as_deref(), Some("bad"));
        let default = OnError::dead_letter();
        assert_eq!(
            dead_letter_topic("app", "p", &default).as_deref(),
            Some("app-p-dlq")
        );
        assert_eq!(dead_letter_topic("app", "p", &OnError::skip()), None);
    }
}
