//! JSON Schema records: JSON text after the wire format's header. Written
//! values are checked against the schema first (as Confluent's
//! serializers do by default), so a topic declared with a schema holds
//! only records that fit it; reading is serde_json's, into the type the
//! app names, which is its own check.

use serde::Serialize;

/// A schema compiled for checking values.
pub(crate) struct JsonSchema {
    validator: jsonschema::Validator,
    /// The schema's `title`, its record name for the record-name subject
    /// strategies.
    pub(crate) title: Option<String>,
}

impl JsonSchema {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let schema: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        let title = schema
            .get("title")
            .and_then(|t| t.as_str())
            .map(str::to_string);
        Ok(Self { validator, title })
    }

    /// Writes `value` as JSON if it fits the schema.
    pub(crate) fn write<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let json = serde_json::to_value(value).map_err(|e| e.to_string())?;
        if let Err(error) = self.validator.validate(&json) {
            return Err(format!(
                "does not fit the schema: {error} (at {})",
                error.instance_path()
            ));
        }
        serde_json::to_writer(out, &json).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"{"title": "Order", "type": "object",
        "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}},
        "required": ["id", "customer"]}"#;

    #[test]
    fn a_value_that_fits_is_written_and_one_that_does_not_is_refused() {
        let schema = JsonSchema::parse(ORDER).unwrap();
        assert_eq!(schema.title.as_deref(), Some("Order"));
        let mut out = Vec::new();
        schema
            .write(&serde_json::json!({"id": 1, "customer": "ada"}), &mut out)
            .unwrap();
        assert_eq!(out, br#"{"customer":"ada","id":1}"#);
        let error = (schema.write(&serde_json::json!({"id": "one"}), &mut out)).unwrap_err();
        assert!(error.contains("does not fit"), "{error}");
        assert!(JsonSchema::parse("{\"type\": 5}").is_err());
        assert!(JsonSchema::parse("not json").is_err());
    }
}
