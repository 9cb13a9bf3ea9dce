//! Avro: a schema is valid when apache-avro parses it (named types the
//! schema references resolved from its references' texts), and a reader
//! is compatible with a writer when Avro's schema resolution can always
//! turn the writer's data into the reader's (the specification's rules, as
//! apache-avro's checker applies them: a reader's field missing from the
//! writer needs a default, types promote only as the spec allows (int to
//! long, float, double; string and bytes both ways), names must match).
//!
//! A named type taken from a reference is written out where it is first
//! used before checking: apache-avro compares a type known only by name by
//! that name alone, which would let a referenced type's own breaking
//! change through.
//!
//! Resolution that works for only some data is refused: an enum reader
//! lacking a writer's symbol, or a reader union lacking one of the
//! writer's branches (apache-avro's "partial" answer), as Confluent refuses
//! them.

use std::collections::{HashMap, HashSet};

use apache_avro::Schema as AvroSchema;
use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};
use serde_json::Value;

use crate::error::RegistryError;

/// How deep named types written out inside one another may go.
const INLINE_DEPTH_MAX: usize = 64;

/// Parses `text`, resolving the named types it uses from `references`
/// (name → text of each schema it references, in any order). The schema
/// returned for checking has them written out (see `inline_references`);
/// should that not parse where the references do (a namespace the
/// writing out got wrong), the referenced types stay names.
pub fn parse(text: &str, references: &[(&str, &str)]) -> Result<AvroSchema, RegistryError> {
    let invalid = |e: apache_avro::Error| RegistryError::InvalidSchema(e.to_string());
    if references.is_empty() {
        return AvroSchema::parse_str(text).map_err(invalid);
    }
    let texts = references.iter().map(|(_, text)| *text);
    let (schema, _named) = AvroSchema::parse_str_with_list(text, texts).map_err(invalid)?;
    let written_out = inline_references(text, references)?;
    Ok(AvroSchema::parse_str(&written_out).unwrap_or(schema))
}

/// `text` made self-contained for the compatibility check: each named
/// type it takes from `references` (name → the referenced schema's
/// text) written out in full where it is first used, as Avro allows, its
/// namespace kept. apache-avro's checker compares a type it only knows by
/// name (a `Ref`) by that name alone, so a referenced type's own changes
/// would pass unseen; written out, they are checked like any field.
pub fn inline_references(text: &str, references: &[(&str, &str)]) -> Result<String, RegistryError> {
    let invalid = |e: serde_json::Error| RegistryError::InvalidSchema(e.to_string());
    let mut schema: Value = serde_json::from_str(text).map_err(invalid)?;
    let mut definitions = HashMap::new();
    for (name, referenced) in references {
        definitions.insert(
            name.to_string(),
            serde_json::from_str::<Value>(referenced).map_err(invalid)?,
        );
    }
    let mut defined = HashSet::new();
    write_out(&mut schema, &definitions, &mut defined, 0)?;
    Ok(schema.to_string())
}

/// Walks a schema in definition order, writing out each referenced name
/// at its first use.
fn write_out(
    schema: &mut Value,
    definitions: &HashMap<String, Value>,
    defined: &mut HashSet<String>,
    depth: usize,
) -> Result<(), RegistryError> {
    if depth > INLINE_DEPTH_MAX {
        return Err(RegistryError::InvalidSchema(format!(
            "named types nest deeper than {INLINE_DEPTH_MAX}"
        )));
    }
    match schema {
        Value::String(name) => {
            if let Some(definition) = definitions.get(name.as_str())
                && defined.insert(name.clone())
            {
                let mut definition = definition.clone();
                keep_namespace(&mut definition, name);
                write_out(&mut definition, definitions, defined, depth + 1)?;
                *schema = definition;
            }
        }
        Value::Array(branches) => {
            for branch in branches {
                write_out(branch, definitions, defined, depth + 1)?;
            }
        }
        Value::Object(object) => {
            if let Some(Value::String(name)) = object.get("name") {
                defined.insert(name.clone());
            }
            for key in ["type", "items", "values"] {
                if let Some(inner) = object.get_mut(key) {
                    write_out(inner, definitions, defined, depth + 1)?;
                }
            }
            if let Some(Value::Array(fields)) = object.get_mut("fields") {
                for field in fields {
                    if let Some(inner) = field.get_mut("type") {
                        write_out(inner, definitions, defined, depth + 1)?;
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A definition written out inside another namespace would take that
/// namespace: its own (from its full name, or none) is written with it.
fn keep_namespace(definition: &mut Value, full_name: &str) {
    let Value::Object(object) = definition else {
        return;
    };
    if object.contains_key("namespace") {
        return;
    }
    let namespace = match object.get("name").and_then(Value::as_str) {
        Some(name) if name.contains('.') => return,
        _ => full_name
            .rsplit_once('.')
            .map_or("", |(namespace, _)| namespace),
    };
    object.insert("namespace".into(), Value::String(namespace.into()));
}

/// What stops `reader` from reading every datum written with `writer`;
/// empty when nothing does.
pub fn incompatibilities(reader: &AvroSchema, writer: &AvroSchema) -> Vec<String> {
    match SchemaCompatibility::can_read(writer, reader) {
        Ok(Compatibility::Full) => Vec::new(),
        Ok(Compatibility::Partial) => vec![
            "the reader resolves only some of the writer's data: an enum symbol or a union branch of the writer is missing from the reader".into(),
        ],
        Err(error) => vec![error_chain(&error)],
    }
}

/// The error and each of its sources, outermost first.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str =
        r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
    const WITH_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[
        {"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
    const WITHOUT_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[
        {"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;

    fn schema(text: &str) -> AvroSchema {
        parse(text, &[]).unwrap()
    }

    #[test]
    fn a_field_added_with_a_default_reads_old_data() {
        assert!(incompatibilities(&schema(WITH_DEFAULT), &schema(V1)).is_empty());
    }

    #[test]
    fn a_field_added_without_a_default_cannot_read_old_data() {
        let problems = incompatibilities(&schema(WITHOUT_DEFAULT), &schema(V1));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("age"), "{problems:?}");
    }

    #[test]
    fn int_promotes_to_long_but_not_back() {
        let int = schema(r#"{"type":"int"}"#);
        let long = schema(r#"{"type":"long"}"#);
        assert!(incompatibilities(&long, &int).is_empty());
        assert!(!incompatibilities(&int, &long).is_empty());
    }

    #[test]
    fn an_enum_reader_missing_a_writer_symbol_is_refused() {
        let ab = schema(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#);
        let a = schema(r#"{"type":"enum","name":"E","symbols":["A"]}"#);
        assert!(!incompatibilities(&a, &ab).is_empty());
        assert!(incompatibilities(&ab, &a).is_empty());
    }

    #[test]
    fn text_that_is_not_avro_is_an_invalid_schema() {
        let error = parse(r#"{"type":"record","name":"X"}"#, &[]).unwrap_err();
        assert_eq!(error.code(), 42201);
        assert_eq!(parse("not json", &[]).unwrap_err().code(), 42201);
    }

    #[test]
    fn a_named_type_resolves_from_a_reference() {
        let address =
            r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#;
        let user = r#"{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}"#;
        assert!(parse(user, &[]).is_err());
        parse(user, &[("Address", address)]).unwrap();
    }
}
