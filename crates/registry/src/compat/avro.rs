//! Avro: a schema is valid when apache-avro parses it (named types the
//! schema references resolved from its references' texts), and a reader
//! is compatible with a writer when Avro's schema resolution can always
//! turn the writer's data into the reader's (the specification's rules, as
//! apache-avro's checker applies them: a reader's field missing from the
//! writer needs a default, types promote only as the spec allows (int to
//! long, float, double; string and bytes both ways), names must match).
//!
//! Resolution that works for only some data is refused: an enum reader
//! lacking a writer's symbol, or a reader union lacking one of the
//! writer's branches (apache-avro's "partial" answer), as Confluent refuses
//! them.

use apache_avro::Schema as AvroSchema;
use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};

use crate::error::RegistryError;

/// Parses `text`, resolving the named types it uses from `references`
/// (the texts of the schemas it references, in any order).
pub fn parse(text: &str, references: &[&str]) -> Result<AvroSchema, RegistryError> {
    let invalid = |e: apache_avro::Error| RegistryError::InvalidSchema(e.to_string());
    if references.is_empty() {
        return AvroSchema::parse_str(text).map_err(invalid);
    }
    let (schema, _named) =
        AvroSchema::parse_str_with_list(text, references.iter().copied()).map_err(invalid)?;
    Ok(schema)
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
        parse(user, &[address]).unwrap();
    }
}
