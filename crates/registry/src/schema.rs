//! Schema: what a client registers (the text, its format, the schemas it
//! references), and the identity two registrations share.
//!
//! Two registrations are the same schema when their formats and
//! references are equal and their texts are equal after the format's own
//! normalization: Avro and JSON Schema texts compare as JSON values (key
//! order and whitespace do not matter), Protobuf texts with surrounding
//! whitespace trimmed. The same schema gets the same global id under every
//! subject.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::RegistryError;

/// The formats the registry knows (`GET /schemas/types`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum SchemaType {
    #[default]
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    pub const ALL: [SchemaType; 3] = [Self::Json, Self::Protobuf, Self::Avro];

    pub fn name(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }
}

impl FromStr for SchemaType {
    type Err = RegistryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                RegistryError::InvalidSchema(format!(
                    "unknown schemaType '{text}': use AVRO, PROTOBUF or JSON"
                ))
            })
    }
}

impl fmt::Display for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A schema another one imports: `name` is how the referring schema
/// names it (an Avro full name, a `.proto` import path, a JSON `$ref`),
/// the subject and version where it is registered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A schema as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<SchemaReference>,
}

/// What makes two registrations the same schema (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    schema_type: SchemaType,
    normalized: String,
    references: Vec<SchemaReference>,
}

impl Schema {
    pub fn identity(&self) -> Identity {
        let normalized = match self.schema_type {
            SchemaType::Avro | SchemaType::Json => {
                match serde_json::from_str::<Value>(&self.text) {
                    Ok(value) => canonical_json(&value),
                    Err(_) => self.text.trim().to_string(),
                }
            }
            SchemaType::Protobuf => self.text.trim().to_string(),
        };
        Identity {
            schema_type: self.schema_type,
            normalized,
            references: self.references.clone(),
        }
    }
}

/// JSON text with every object's keys sorted and no whitespace: equal
/// values, equal texts.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> Schema {
        Schema {
            schema_type: SchemaType::Avro,
            text: text.into(),
            references: vec![],
        }
    }

    #[test]
    fn key_order_and_whitespace_do_not_change_a_json_schema_identity() {
        let a = avro(r#"{"type":"record","name":"A","fields":[]}"#);
        let b = avro(r#"{ "name": "A", "fields": [], "type": "record" }"#);
        assert_eq!(a.identity(), b.identity());
    }

    #[test]
    fn the_format_is_part_of_the_identity() {
        let a = avro(r#"{"type":"string"}"#);
        let b = Schema {
            schema_type: SchemaType::Json,
            ..a.clone()
        };
        assert_ne!(a.identity(), b.identity());
    }

    #[test]
    fn schema_types_read_back_from_their_names() {
        for t in SchemaType::ALL {
            assert_eq!(t.name().parse::<SchemaType>().unwrap(), t);
        }
        assert_eq!("XML".parse::<SchemaType>().unwrap_err().code(), 42201);
    }
}
