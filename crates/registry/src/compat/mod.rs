//! Compatibility: each format's idea of a valid schema and of a reader
//! that can read a writer's data, and the level's choice of which checks
//! a new schema takes against which earlier versions.
//!
//! - [`avro`]: Avro's schema resolution, through apache-avro's checker.
//! - [`protobuf`]: `.proto` files compiled by protox, compared field
//!   number by field number.
//! - [`json`]: JSON Schema, a reasoned subset of "the reader accepts what
//!   the writer accepted".
//!
//! A schema is always compatible with itself, at every level (a property
//! the tests check for each format).

pub mod avro;
pub mod json;
pub mod protobuf;

use crate::error::RegistryError;
use crate::level::{CompatibilityLevel, Direction};
use crate::schema::{Schema, SchemaType};

/// A schema parsed by its format.
#[derive(Debug, Clone)]
pub enum Parsed {
    Avro(apache_avro::Schema),
    Protobuf(protobuf::ProtoSchema),
    Json(serde_json::Value),
}

/// Parses `schema` with `references` (its references' names and schemas,
/// those they reference included) at hand; 42201 when it is not valid.
pub fn parse(schema: &Schema, references: &[(String, Schema)]) -> Result<Parsed, RegistryError> {
    match schema.schema_type {
        SchemaType::Avro => {
            let named: Vec<(&str, &str)> = (references.iter())
                .map(|(name, s)| (name.as_str(), s.text.as_str()))
                .collect();
            avro::parse(&schema.text, &named).map(Parsed::Avro)
        }
        SchemaType::Protobuf => {
            let files: Vec<(&str, &str)> = (references.iter())
                .map(|(name, s)| (name.as_str(), s.text.as_str()))
                .collect();
            protobuf::parse(&schema.text, &files).map(Parsed::Protobuf)
        }
        SchemaType::Json => json::parse(&schema.text).map(Parsed::Json),
    }
}

/// What stops `reader` from reading data written with `writer`; empty
/// when nothing does.
pub fn incompatibilities(reader: &Parsed, writer: &Parsed) -> Vec<String> {
    match (reader, writer) {
        (Parsed::Avro(r), Parsed::Avro(w)) => avro::incompatibilities(r, w),
        (Parsed::Protobuf(r), Parsed::Protobuf(w)) => protobuf::incompatibilities(r, w),
        (Parsed::Json(r), Parsed::Json(w)) => json::incompatibilities(r, w),
        (r, w) => vec![format!(
            "the schema type changed from {} to {}",
            w.schema_type(),
            r.schema_type()
        )],
    }
}

/// What keeps `new` from being compatible, under `level`, with `earlier`
/// (version number and schema, oldest first: the versions the level
/// checks are chosen here); each problem names the version it concerns.
pub fn check(level: CompatibilityLevel, new: &Parsed, earlier: &[(i32, Parsed)]) -> Vec<String> {
    let against = if level.is_transitive() {
        earlier
    } else {
        &earlier[earlier.len().saturating_sub(1)..]
    };
    let mut problems = Vec::new();
    for (version, old) in against {
        for direction in level.directions() {
            let (found, how) = match direction {
                Direction::NewReadsOld => (incompatibilities(new, old), "reading"),
                Direction::OldReadsNew => (incompatibilities(old, new), "read by"),
            };
            for problem in found {
                problems.push(format!("{how} version {version}: {problem}"));
            }
        }
    }
    problems
}

impl Parsed {
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
            Parsed::Protobuf(_) => SchemaType::Protobuf,
            Parsed::Json(_) => SchemaType::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn schema(schema_type: SchemaType, text: &str) -> Parsed {
        let schema = Schema {
            schema_type,
            text: text.to_string(),
            references: vec![],
        };
        parse(&schema, &[]).unwrap()
    }

    /// A record of up to six fields of generated names and types, in each
    /// format.
    fn generated(fields: &[(String, u8)]) -> [Parsed; 3] {
        let avro_types = ["int", "long", "string", "boolean", "double"];
        let json_types = ["integer", "integer", "string", "boolean", "number"];
        let proto_types = ["int32", "int64", "string", "bool", "double"];
        let avro_fields: Vec<String> = (fields.iter())
            .map(|(n, t)| format!(r#"{{"name":"f_{n}","type":"{}"}}"#, avro_types[*t as usize]))
            .collect();
        let avro = format!(
            r#"{{"type":"record","name":"R","fields":[{}]}}"#,
            avro_fields.join(",")
        );
        let json_props: Vec<String> = (fields.iter())
            .map(|(n, t)| format!(r#""f_{n}":{{"type":"{}"}}"#, json_types[*t as usize]))
            .collect();
        let json = format!(
            r#"{{"type":"object","properties":{{{}}}}}"#,
            json_props.join(",")
        );
        let proto_fields: Vec<String> = (fields.iter().enumerate())
            .map(|(i, (n, t))| format!("{} f_{n} = {};", proto_types[*t as usize], i + 1))
            .collect();
        let proto = format!(
            "syntax = \"proto3\";\nmessage R {{ {} }}",
            proto_fields.join(" ")
        );
        [
            schema(SchemaType::Avro, &avro),
            schema(SchemaType::Json, &json),
            schema(SchemaType::Protobuf, &proto),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_schema_is_compatible_with_itself_at_every_level(
            fields in proptest::collection::btree_map("[a-z]{1,8}", 0u8..5, 0..6)
        ) {
            let fields: Vec<(String, u8)> = fields.into_iter().collect();
            for parsed in generated(&fields) {
                for level in CompatibilityLevel::ALL {
                    let earlier = [(1, parsed.clone()), (2, parsed.clone())];
                    let problems = check(level, &parsed, &earlier);
                    prop_assert!(problems.is_empty(), "{level}: {problems:?}");
                }
            }
        }
    }

    #[test]
    fn a_plain_level_checks_only_the_latest_version() {
        let v1 = schema(SchemaType::Json, r#"{"type":"string"}"#);
        let v2 = schema(SchemaType::Json, r#"{"type":"integer"}"#);
        let new = schema(SchemaType::Json, r#"{"type":"integer"}"#);
        let earlier = [(1, v1), (2, v2)];
        assert!(check(CompatibilityLevel::Backward, &new, &earlier).is_empty());
        let problems = check(CompatibilityLevel::BackwardTransitive, &new, &earlier);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("reading version 1"), "{problems:?}");
    }

    #[test]
    fn forward_checks_that_the_old_schema_reads_the_new() {
        let old = schema(SchemaType::Avro, r#"{"type":"long"}"#);
        let new = schema(SchemaType::Avro, r#"{"type":"int"}"#);
        let earlier = [(1, old)];
        assert!(!check(CompatibilityLevel::Backward, &new, &earlier).is_empty());
        assert!(check(CompatibilityLevel::Forward, &new, &earlier).is_empty());
        assert!(!check(CompatibilityLevel::Full, &new, &earlier).is_empty());
        assert!(check(CompatibilityLevel::None, &new, &earlier).is_empty());
    }

    #[test]
    fn a_change_of_format_is_incompatible() {
        let avro = schema(SchemaType::Avro, r#"{"type":"string"}"#);
        let json = schema(SchemaType::Json, r#"{"type":"string"}"#);
        assert_eq!(incompatibilities(&avro, &json).len(), 1);
    }
}
