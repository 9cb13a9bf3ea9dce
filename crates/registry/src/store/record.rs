//! The `_schemas` topic's records: JSON keys and values in the shape
//! Confluent's registry writes, so one tool reads both.
//!
//! | key | value |
//! |---|---|
//! | `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}` | `{"subject":S,"version":V,"id":N,"schema":TEXT,"schemaType":T,"references":[…],"deleted":B}`, or null (a permanent delete) |
//! | `{"keytype":"CONFIG","subject":S or null,"magic":0}` | `{"compatibilityLevel":L}`, or null (the level removed) |
//! | `{"keytype":"NEXT_ID","magic":0}` | `{"next_id":N}` |
//!
//! `schemaType` is left out for Avro (absent means Avro), `references`
//! when there are none. Keys are written with their fields in this order
//! always: compaction keeps the last record of each key's exact bytes.
//! `NEXT_ID` is the registry's own: written when a permanent delete drops
//! the highest id, so ids stay unique after compaction removes the
//! tombstone. Records of other key types (Confluent's `NOOP`, `MODE`,
//! `DELETE_SUBJECT`) are passed over.

use serde::{Deserialize, Serialize};

use super::state::Change;
use crate::schema::{Schema, SchemaReference, SchemaType};

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "keytype")]
enum Key {
    #[serde(rename = "SCHEMA")]
    Schema {
        subject: String,
        version: i32,
        magic: u8,
    },
    #[serde(rename = "CONFIG")]
    Config { subject: Option<String>, magic: u8 },
    #[serde(rename = "NEXT_ID")]
    NextId { magic: u8 },
}

#[derive(Debug, Serialize, Deserialize)]
struct SchemaValue {
    subject: String,
    version: i32,
    id: i32,
    schema: String,
    #[serde(
        rename = "schemaType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    schema_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    references: Vec<SchemaReference>,
    #[serde(default)]
    deleted: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct ConfigValue {
    #[serde(rename = "compatibilityLevel")]
    compatibility_level: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct NextIdValue {
    next_id: i32,
}

/// A record of the topic: key bytes, and value bytes or a tombstone.
pub type Encoded = (Vec<u8>, Option<Vec<u8>>);

/// The record that carries `change`.
pub fn encode(change: &Change) -> Encoded {
    match change {
        Change::Version {
            subject,
            version,
            id,
            schema,
            deleted,
        } => {
            let key = Key::Schema {
                subject: subject.clone(),
                version: *version,
                magic: 1,
            };
            let value = SchemaValue {
                subject: subject.clone(),
                version: *version,
                id: *id,
                schema: schema.text.clone(),
                schema_type: (schema.schema_type != SchemaType::Avro)
                    .then(|| schema.schema_type.name().to_string()),
                references: schema.references.clone(),
                deleted: *deleted,
            };
            (json(&key), Some(json(&value)))
        }
        Change::VersionGone { subject, version } => {
            let key = Key::Schema {
                subject: subject.clone(),
                version: *version,
                magic: 1,
            };
            (json(&key), None)
        }
        Change::Level { subject, level } => {
            let key = Key::Config {
                subject: subject.clone(),
                magic: 0,
            };
            let value = level.map(|level| ConfigValue {
                compatibility_level: level.name().to_string(),
            });
            (json(&key), value.map(|v| json(&v)))
        }
        Change::NextId(next_id) => {
            let value = NextIdValue { next_id: *next_id };
            (json(&Key::NextId { magic: 0 }), Some(json(&value)))
        }
    }
}

/// The change a record carries: `Ok(None)` for a key type the registry
/// does not keep, `Err` (with why) for a record it cannot read.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Change>, String> {
    let Ok(key) = serde_json::from_slice::<Key>(key) else {
        return Ok(None);
    };
    let unreadable = |e: serde_json::Error| format!("unreadable value: {e}");
    let change = match (key, value) {
        (
            Key::Schema {
                subject, version, ..
            },
            None,
        ) => Change::VersionGone { subject, version },
        (
            Key::Schema {
                subject, version, ..
            },
            Some(value),
        ) => {
            let value: SchemaValue = serde_json::from_slice(value).map_err(unreadable)?;
            let schema_type = match &value.schema_type {
                None => SchemaType::Avro,
                Some(name) => name.parse().map_err(|e| format!("{e}"))?,
            };
            Change::Version {
                subject,
                version,
                id: value.id,
                schema: Schema {
                    schema_type,
                    text: value.schema,
                    references: value.references,
                },
                deleted: value.deleted,
            }
        }
        (Key::Config { subject, .. }, None) => Change::Level {
            subject,
            level: None,
        },
        (Key::Config { subject, .. }, Some(value)) => {
            let value: ConfigValue = serde_json::from_slice(value).map_err(unreadable)?;
            let level = value
                .compatibility_level
                .parse()
                .map_err(|e| format!("{e}"))?;
            Change::Level {
                subject,
                level: Some(level),
            }
        }
        (Key::NextId { .. }, None) => return Ok(None),
        (Key::NextId { .. }, Some(value)) => {
            let value: NextIdValue = serde_json::from_slice(value).map_err(unreadable)?;
            Change::NextId(value.next_id)
        }
    };
    Ok(Some(change))
}

/// A record type as JSON, which cannot fail (strings, numbers and flags
/// only).
fn json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records hold only strings, numbers and flags")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::CompatibilityLevel;

    fn round_trip(change: Change) {
        let (key, value) = encode(&change);
        assert_eq!(decode(&key, value.as_deref()).unwrap(), Some(change));
    }

    #[test]
    fn every_change_reads_back_as_written() {
        let schema = Schema {
            schema_type: SchemaType::Protobuf,
            text: "syntax = \"proto3\";".into(),
            references: vec![SchemaReference {
                name: "a.proto".into(),
                subject: "a".into(),
                version: 2,
            }],
        };
        round_trip(Change::Version {
            subject: "orders-value".into(),
            version: 3,
            id: 9,
            schema,
            deleted: true,
        });
        round_trip(Change::VersionGone {
            subject: "s".into(),
            version: 1,
        });
        let level = Some(CompatibilityLevel::FullTransitive);
        round_trip(Change::Level {
            subject: Some("s".into()),
            level,
        });
        round_trip(Change::Level {
            subject: None,
            level: None,
        });
        round_trip(Change::NextId(12));
    }

    #[test]
    fn keys_are_written_as_confluent_writes_them() {
        let (key, value) = encode(&Change::Version {
            subject: "s".into(),
            version: 1,
            id: 1,
            schema: Schema {
                schema_type: SchemaType::Avro,
                text: "\"string\"".into(),
                references: vec![],
            },
            deleted: false,
        });
        assert_eq!(
            String::from_utf8(key).unwrap(),
            r#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#
        );
        let value = String::from_utf8(value.unwrap()).unwrap();
        assert!(!value.contains("schemaType"), "{value}");
    }

    proptest::proptest! {
        #[test]
        fn no_bytes_make_decoding_panic(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            value in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)),
        ) {
            let _ = decode(&key, value.as_deref());
            let key = br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#;
            let _ = decode(key, value.as_deref());
        }
    }

    #[test]
    fn records_of_other_key_types_are_passed_over() {
        assert_eq!(decode(br#"{"keytype":"NOOP","magic":0}"#, None), Ok(None));
        assert_eq!(decode(b"not json", Some(b"{}")), Ok(None));
    }
}
