//! Avro records: a datum with no header (the wire format's header names
//! its schema), read into serde types through apache-avro.
//!
//! Two ways to read:
//! - straight: serde reads the datum into the type, no intermediate
//!   value. Only when the record was written with the app's own schema,
//!   and only for types whose struct names are the schema's record names
//!   (apache-avro's schema-aware deserializer checks them);
//! - through a value: the datum is read as an Avro value, resolved into
//!   the app's schema when it was written with another version (Avro's
//!   rules: fields added with defaults are filled, removed ones dropped,
//!   promotions applied), and the type is read from that, whatever its
//!   names. A reader whose straight read failed where this one succeeded
//!   reads through a value from then on.
//!
//! Parsed schemas are leaked: apache-avro's readers and writers borrow
//! their schema, a process meets few schemas (one per registered id and
//! per declared codec, each parsed once and cached), and none goes away
//! while the process runs.

use std::sync::atomic::{AtomicBool, Ordering};

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::writer::datum::GenericDatumWriter;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Parses a schema's JSON.
pub(crate) fn parse(text: &str) -> Result<&'static Schema, String> {
    let schema = Schema::parse_str(text).map_err(|e| e.to_string())?;
    Ok(Box::leak(Box::new(schema)))
}

/// The full name of a named schema (a record, enum or fixed), for the
/// record-name subject strategies.
pub(crate) fn record_name(schema: &Schema) -> Option<String> {
    schema.name().map(|name| name.fullname(None))
}

/// Reads records written with one schema into another (or into itself).
pub(crate) struct AvroReader {
    reader: GenericDatumReader<'static>,
    resolves: bool,
    /// Set once a straight read failed where one through a value did not.
    through_value: AtomicBool,
}

impl AvroReader {
    /// A reader of records written with `writer`, read as `reader` when it
    /// is given and differs.
    pub(crate) fn new(
        writer: &'static Schema,
        reader: Option<&'static Schema>,
    ) -> Result<Self, String> {
        let reader = reader.filter(|reader| reader.canonical_form() != writer.canonical_form());
        let built = GenericDatumReader::builder(writer)
            .maybe_reader_schema(reader)
            .human_readable(false)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            reader: built,
            resolves: reader.is_some(),
            through_value: AtomicBool::new(false),
        })
    }

    pub(crate) fn read<T: DeserializeOwned>(&self, payload: &[u8]) -> Result<T, String> {
        if self.resolves || self.through_value.load(Ordering::Relaxed) {
            return self.read_through_value(payload);
        }
        let straight = self.reader.read_deser(&mut &payload[..]);
        straight.or_else(|error| {
            let read = self
                .read_through_value(payload)
                .map_err(|_| error.to_string())?;
            self.through_value.store(true, Ordering::Relaxed);
            Ok(read)
        })
    }

    fn read_through_value<T: DeserializeOwned>(&self, mut payload: &[u8]) -> Result<T, String> {
        let value = self
            .reader
            .read_value(&mut payload)
            .map_err(|e| e.to_string())?;
        apache_avro::from_value(&value).map_err(|e| e.to_string())
    }

    /// The record as JSON, for tools: bytes and fixed as arrays of
    /// numbers, unions as their branch's value.
    pub(crate) fn read_json(&self, mut payload: &[u8]) -> Result<serde_json::Value, String> {
        let value = self
            .reader
            .read_value(&mut payload)
            .map_err(|e| e.to_string())?;
        serde_json::Value::try_from(value).map_err(|e| e.to_string())
    }
}

/// Writes serde values with one schema.
pub(crate) struct AvroWriter {
    writer: GenericDatumWriter<'static>,
}

impl AvroWriter {
    pub(crate) fn new(schema: &'static Schema) -> Result<Self, String> {
        let writer = GenericDatumWriter::builder(schema)
            .human_readable(false)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { writer })
    }

    pub(crate) fn write<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        self.writer
            .write_ser(out, &value)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    const ORDER_V1: &str = r#"{"type":"record","name":"Order","namespace":"shop",
        "fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"}]}"#;
    const ORDER_V2: &str = r#"{"type":"record","name":"Order","namespace":"shop",
        "fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"},
                  {"name":"note","type":["null","string"],"default":null},
                  {"name":"amount","type":"double","default":0.0}]}"#;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct OrderV1 {
        id: i64,
        customer: String,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct OrderV2 {
        id: i64,
        customer: String,
        note: Option<String>,
        amount: f64,
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let schema = parse(ORDER_V2).unwrap();
        let order = OrderV2 {
            id: -7,
            customer: "ada".into(),
            note: Some("gift".into()),
            amount: 12.5,
        };
        let mut bytes = Vec::new();
        AvroWriter::new(schema)
            .unwrap()
            .write(&order, &mut bytes)
            .unwrap();
        let reader = AvroReader::new(schema, Some(schema)).unwrap();
        assert!(!reader.resolves);
        assert_eq!(reader.read::<OrderV2>(&bytes).unwrap(), order);
        // A struct named as the record reads straight.
        #[derive(Debug, PartialEq, Deserialize)]
        struct Order {
            id: i64,
            customer: String,
            note: Option<String>,
            amount: f64,
        }
        let straight = AvroReader::new(schema, None).unwrap();
        assert_eq!(straight.read::<Order>(&bytes).unwrap().customer, "ada");
        assert!(!straight.through_value.load(Ordering::Relaxed));
        let json = reader.read_json(&bytes).unwrap();
        assert_eq!(json["customer"], "ada");
    }

    #[test]
    fn an_older_record_reads_as_the_newer_schema_with_its_defaults() {
        let (v1, v2) = (parse(ORDER_V1).unwrap(), parse(ORDER_V2).unwrap());
        let mut bytes = Vec::new();
        let old = OrderV1 {
            id: 1,
            customer: "bob".into(),
        };
        AvroWriter::new(v1)
            .unwrap()
            .write(&old, &mut bytes)
            .unwrap();
        let reader = AvroReader::new(v1, Some(v2)).unwrap();
        let read: OrderV2 = reader.read(&bytes).unwrap();
        assert_eq!(
            read,
            OrderV2 {
                id: 1,
                customer: "bob".into(),
                note: None,
                amount: 0.0
            }
        );
        assert_eq!(record_name(v2).as_deref(), Some("shop.Order"));
    }

    #[test]
    fn a_value_the_schema_does_not_fit_is_refused() {
        let schema = parse(ORDER_V1).unwrap();
        let mut bytes = Vec::new();
        let wrong = ("not", "an order", 3);
        assert!(
            AvroWriter::new(schema)
                .unwrap()
                .write(&wrong, &mut bytes)
                .is_err()
        );
        assert!(parse("{\"type\":\"nonsense\"}").is_err());
        let reader = AvroReader::new(schema, None).unwrap();
        assert!(reader.read::<OrderV1>(&[0x02]).is_err());
    }
}
