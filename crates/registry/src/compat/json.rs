//! JSON Schema: a schema is valid when it is JSON, an object or a boolean,
//! and valid against its draft's meta-schema (the `jsonschema` crate,
//! without fetching anything remote).
//!
//! A reader is compatible with a writer when every document the writer
//! accepts, the reader accepts too. Deciding that in general is hard, so
//! the registry checks a reasoned subset, recursively through
//! `properties`, `additionalProperties` and `items`:
//!
//! - `type`: each of the writer's types must be among the reader's
//!   (`integer` is within `number`); a reader without `type` takes any;
//! - `enum` and `const`: the reader's must allow every value the writer's
//!   allows;
//! - limits (`maximum`, `maxLength`, `maxItems`, their minimums, the
//!   exclusive bounds): the reader's may widen, never narrow;
//!   `pattern` and `format` may not appear or change in the reader;
//! - properties, under the content model (`additionalProperties`, open
//!   when absent): a property the writer has that the reader lacks is
//!   refused when the reader is closed (`false`), and checked against the
//!   reader's `additionalProperties` schema when partially open; a
//!   property the reader adds is free when the writer is closed, checked
//!   against the writer's `additionalProperties` schema when partially
//!   open, and refused when the writer is open (its documents may hold
//!   that name with any value), unless the property takes anything;
//! - `required`: a name the reader requires that the writer did not is
//!   refused;
//! - every other keyword (`allOf`, `anyOf`, `oneOf`, `not`, `$ref`,
//!   conditionals, pattern properties, dependencies, `definitions`,
//!   `multipleOf`, `uniqueItems`, and any this list does not name) must be
//!   unchanged: what the checker does not reason about is never assumed
//!   harmless. Annotations (`title`, `description`, `default`, …) may
//!   change freely.
//!
//! References to other registered schemas are stored but not resolved:
//! a `$ref` is compared as text.

use serde_json::{Map, Value};

use crate::error::RegistryError;

/// Keywords compared only for equality.
const OPAQUE_KEYWORDS: [&str; 11] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
];

/// Keywords the checks below reason about; with `OPAQUE_KEYWORDS`, the
/// bounds and the annotations, every other keyword must be equal on both
/// sides (default-deny: a keyword this checker does not understand, such
/// as `definitions`, `multipleOf` or `uniqueItems`, is never assumed
/// harmless).
const COMPARED_KEYWORDS: [&str; 9] = [
    "pattern",
    "format",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
];

/// Keywords that describe and never constrain: free to change.
const ANNOTATIONS: [&str; 10] = [
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Upper bounds: the reader's must be at least the writer's.
const MAXIMUMS: [&str; 5] = [
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
/// Lower bounds: the reader's must be at most the writer's.
const MINIMUMS: [&str; 5] = [
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];

/// Parses and checks `text` against its meta-schema.
pub fn parse(text: &str) -> Result<Value, RegistryError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| RegistryError::InvalidSchema(format!("not JSON: {e}")))?;
    if !(value.is_object() || value.is_boolean()) {
        return Err(RegistryError::InvalidSchema(
            "a JSON Schema is an object or a boolean".into(),
        ));
    }
    jsonschema::meta::validate(&value)
        .map_err(|e| RegistryError::InvalidSchema(format!("{e} at '{}'", e.instance_path())))?;
    Ok(value)
}

/// What stops `reader` from accepting every document `writer` accepts
/// (within the subset the module doc states); empty when nothing does.
pub fn incompatibilities(reader: &Value, writer: &Value) -> Vec<String> {
    let mut out = Vec::new();
    compare("#", reader, writer, &mut out);
    out
}

fn compare(path: &str, reader: &Value, writer: &Value, out: &mut Vec<String>) {
    if reader == writer || takes_anything(reader) || writer == &Value::Bool(false) {
        return;
    }
    let empty = Map::new();
    let (r, w) = (as_object(reader, &empty), as_object(writer, &empty));
    let (Some(r), Some(w)) = (r, w) else {
        out.push(format!(
            "{path}: the reader refuses what the writer allowed"
        ));
        return;
    };
    for keyword in OPAQUE_KEYWORDS {
        if r.get(keyword) != w.get(keyword) {
            out.push(format!("{path}: '{keyword}' changed"));
        }
    }
    let understood = |keyword: &str| {
        [
            &OPAQUE_KEYWORDS[..],
            &COMPARED_KEYWORDS,
            &MAXIMUMS,
            &MINIMUMS,
            &ANNOTATIONS,
        ]
        .iter()
        .any(|known| known.contains(&keyword))
    };
    let mut others: Vec<&String> = (r.keys().chain(w.keys()))
        .filter(|keyword| !understood(keyword))
        .collect();
    others.sort_unstable();
    others.dedup();
    for keyword in others {
        if r.get(keyword) != w.get(keyword) {
            out.push(format!("{path}: '{keyword}' changed"));
        }
    }
    compare_types(path, r, w, out);
    compare_values(path, r, w, out);
    compare_limits(path, r, w, out);
    compare_properties(path, r, w, out);
    let items = |s: &Map<String, Value>| s.get("items").cloned().unwrap_or(Value::Bool(true));
    compare(&format!("{path}/items"), &items(r), &items(w), out);
}

/// `true`, or `{}`: every document.
fn takes_anything(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(map) => map.keys().all(|k| is_annotation(k)),
        _ => false,
    }
}

/// Keywords that constrain nothing.
fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "$schema" | "$id" | "id" | "title" | "description" | "default" | "examples" | "$comment"
    )
}

/// The schema's keywords (`true` has none).
fn as_object<'a>(
    schema: &'a Value,
    empty: &'a Map<String, Value>,
) -> Option<&'a Map<String, Value>> {
    match schema {
        Value::Object(map) => Some(map),
        Value::Bool(true) => Some(empty),
        _ => None,
    }
}

fn types(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn compare_types(
    path: &str,
    r: &Map<String, Value>,
    w: &Map<String, Value>,
    out: &mut Vec<String>,
) {
    let Some(read) = types(r) else { return };
    let Some(written) = types(w) else {
        out.push(format!(
            "{path}: the type was narrowed from any to {read:?}"
        ));
        return;
    };
    let covered = |t: &&str| read.contains(t) || (*t == "integer" && read.contains(&"number"));
    if !written.iter().all(covered) {
        out.push(format!(
            "{path}: the type changed from {written:?} to {read:?}"
        ));
    }
}

fn compare_values(
    path: &str,
    r: &Map<String, Value>,
    w: &Map<String, Value>,
    out: &mut Vec<String>,
) {
    if let Some(Value::Array(allowed)) = r.get("enum") {
        let written: Option<Vec<&Value>> = match (w.get("enum"), w.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.iter().collect()),
            (_, Some(value)) => Some(vec![value]),
            _ => None,
        };
        match written {
            Some(values) if values.iter().all(|v| allowed.contains(v)) => {}
            _ => out.push(format!("{path}: the enum lost values the writer allows")),
        }
    }
    if let Some(value) = r.get("const")
        && w.get("const") != Some(value)
    {
        out.push(format!("{path}: the const changed"));
    }
}

fn compare_limits(
    path: &str,
    r: &Map<String, Value>,
    w: &Map<String, Value>,
    out: &mut Vec<String>,
) {
    let number = |s: &Map<String, Value>, k: &str| s.get(k).and_then(Value::as_f64);
    for keyword in MAXIMUMS {
        if let Some(read) = number(r, keyword)
            && number(w, keyword).is_none_or(|written| written > read)
        {
            out.push(format!("{path}: '{keyword}' was narrowed"));
        }
    }
    for keyword in MINIMUMS {
        if let Some(read) = number(r, keyword)
            && number(w, keyword).is_none_or(|written| written < read)
        {
            out.push(format!("{path}: '{keyword}' was narrowed"));
        }
    }
    for keyword in ["pattern", "format"] {
        if let Some(read) = r.get(keyword)
            && w.get(keyword) != Some(read)
        {
            out.push(format!("{path}: '{keyword}' was added or changed"));
        }
    }
}

fn compare_properties(
    path: &str,
    r: &Map<String, Value>,
    w: &Map<String, Value>,
    out: &mut Vec<String>,
) {
    let empty = Map::new();
    let properties = |s: &'_ Map<String, Value>| -> Map<String, Value> {
        s.get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone()
    };
    let additional = |s: &Map<String, Value>| {
        s.get("additionalProperties")
            .cloned()
            .unwrap_or(Value::Bool(true))
    };
    let (read, written) = (properties(r), properties(w));
    let (read_more, written_more) = (additional(r), additional(w));
    for (name, schema) in &written {
        let at = format!("{path}/properties/{name}");
        match read.get(name) {
            Some(read_schema) => compare(&at, read_schema, schema, out),
            None if read_more == Value::Bool(false) => out.push(format!(
                "{at}: the property was removed while additionalProperties is false"
            )),
            None => compare(&at, &read_more, schema, out),
        }
    }
    for (name, schema) in &read {
        if written.contains_key(name) || written_more == Value::Bool(false) {
            continue;
        }
        let at = format!("{path}/properties/{name}");
        if written_more == Value::Bool(true) {
            if !takes_anything(schema) {
                out.push(format!(
                    "{at}: the property was added to an open content model (the writer's documents may hold it with any value)"
                ));
            }
        } else {
            compare(&at, schema, &written_more, out);
        }
    }
    compare(
        &format!("{path}/additionalProperties"),
        &read_more,
        &written_more,
        out,
    );
    let required = |s: &Map<String, Value>| -> Vec<String> {
        (s.get("required").and_then(Value::as_array))
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let written_required = required(w);
    for name in required(r) {
        if !written_required.contains(&name) {
            out.push(format!("{path}: the property '{name}' became required"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(reader: Value, writer: Value) -> Vec<String> {
        incompatibilities(&reader, &writer)
    }

    #[test]
    fn a_keyword_the_checker_does_not_reason_about_must_not_change() {
        let v1 = json!({"type":"object","definitions":{"a":{"type":"string"}},"title":"A"});
        let v2 = json!({"type":"object","definitions":{"a":{"type":"integer"}},"title":"A"});
        assert!(
            check(v2.clone(), v1.clone())
                .iter()
                .any(|p| p.contains("'definitions'"))
        );
        let stricter = json!({"type":"number","multipleOf":2});
        assert!(!check(stricter, json!({"type":"number"})).is_empty());
        let retitled = json!({"type":"object","definitions":{"a":{"type":"string"}},"title":"B"});
        assert!(check(retitled, v1).is_empty(), "annotations change freely");
    }

    #[test]
    fn a_property_added_to_a_closed_model_is_compatible() {
        let v1 = json!({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false});
        let v2 = json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false});
        assert!(check(v2, v1).is_empty());
    }

    #[test]
    fn a_property_added_to_an_open_model_is_refused() {
        let v1 = json!({"type":"object","properties":{"a":{"type":"string"}}});
        let v2 =
            json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}});
        let problems = check(v2, v1);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("/properties/b"));
    }

    #[test]
    fn a_property_removed_from_a_closed_reader_is_refused() {
        let v1 = json!({"type":"object","properties":{"a":{},"b":{}},"additionalProperties":false});
        let v2 = json!({"type":"object","properties":{"a":{}},"additionalProperties":false});
        assert!(!check(v2, v1).is_empty());
    }

    #[test]
    fn a_type_change_is_refused_and_integer_widens_to_number() {
        assert!(!check(json!({"type":"string"}), json!({"type":"integer"})).is_empty());
        assert!(check(json!({"type":"number"}), json!({"type":"integer"})).is_empty());
        assert!(!check(json!({"type":"integer"}), json!({"type":"number"})).is_empty());
    }

    #[test]
    fn a_newly_required_property_is_refused() {
        let v1 = json!({"type":"object","properties":{"a":{}},"additionalProperties":false});
        let v2 = json!({"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false});
        assert!(!check(v2.clone(), v1.clone()).is_empty());
        assert!(check(v1, v2).is_empty());
    }

    #[test]
    fn a_narrowed_limit_is_refused_and_a_widened_one_is_not() {
        assert!(
            !check(
                json!({"type":"string","maxLength":5}),
                json!({"type":"string","maxLength":10})
            )
            .is_empty()
        );
        assert!(
            check(
                json!({"type":"string","maxLength":10}),
                json!({"type":"string","maxLength":5})
            )
            .is_empty()
        );
    }

    #[test]
    fn an_enum_may_grow_but_not_shrink() {
        assert!(check(json!({"enum":["a","b"]}), json!({"enum":["a"]})).is_empty());
        assert!(!check(json!({"enum":["a"]}), json!({"enum":["a","b"]})).is_empty());
    }

    #[test]
    fn invalid_schemas_are_refused_with_42201() {
        assert_eq!(parse("[1]").unwrap_err().code(), 42201);
        assert_eq!(parse(r#"{"type": 5}"#).unwrap_err().code(), 42201);
        assert_eq!(parse("{").unwrap_err().code(), 42201);
        parse(r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}"#).unwrap();
    }
}
