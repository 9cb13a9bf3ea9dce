//! Subject name strategies: the registry subject a topic's keys or values
//! are registered under (Confluent's `*.subject.name.strategy`).

use std::fmt;
use std::str::FromStr;

/// Whether the bytes are a record's key or its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    Key,
    Value,
}

/// How a subject is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubjectStrategy {
    /// `<topic>-key` / `<topic>-value`: one schema history per topic (the
    /// default, as Confluent's).
    #[default]
    TopicName,
    /// The record's full name (`shop.Order`): one history per record type,
    /// shared by every topic holding it.
    RecordName,
    /// `<topic>-<record full name>`: several record types per topic, each
    /// with its history.
    TopicRecordName,
}

impl SubjectStrategy {
    /// The subject of `topic`'s `part`, holding records named `record`
    /// (`None` when the schema names none: an Avro primitive, a JSON
    /// schema without a title).
    pub fn subject(self, topic: &str, part: Part, record: Option<&str>) -> Result<String, String> {
        let record = || {
            record.ok_or_else(|| {
                format!(
                    "the {self} subject strategy needs a named schema (an Avro record, a Protobuf message, a JSON schema with a title)"
                )
            })
        };
        Ok(match self {
            Self::TopicName => match part {
                Part::Key => format!("{topic}-key"),
                Part::Value => format!("{topic}-value"),
            },
            Self::RecordName => record()?.to_string(),
            Self::TopicRecordName => format!("{topic}-{}", record()?),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::TopicName => "topic",
            Self::RecordName => "record",
            Self::TopicRecordName => "topic-record",
        }
    }
}

impl fmt::Display for SubjectStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SubjectStrategy {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        [Self::TopicName, Self::RecordName, Self::TopicRecordName]
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("subject strategy {name:?}: give topic, record or topic-record"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_strategy_names_subjects_as_confluent_does() {
        let name = |s: SubjectStrategy, part| s.subject("orders", part, Some("shop.Order"));
        assert_eq!(
            name(SubjectStrategy::TopicName, Part::Key).unwrap(),
            "orders-key"
        );
        assert_eq!(
            name(SubjectStrategy::TopicName, Part::Value).unwrap(),
            "orders-value"
        );
        assert_eq!(
            name(SubjectStrategy::RecordName, Part::Value).unwrap(),
            "shop.Order"
        );
        assert_eq!(
            name(SubjectStrategy::TopicRecordName, Part::Key).unwrap(),
            "orders-shop.Order"
        );
        let unnamed = SubjectStrategy::RecordName.subject("orders", Part::Value, None);
        assert!(unnamed.unwrap_err().contains("named schema"));
        assert_eq!("topic-record".parse(), Ok(SubjectStrategy::TopicRecordName));
    }
}
