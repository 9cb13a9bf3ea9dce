//! Protobuf records: a message, after the wire format's message indexes
//! (which message of the schema's file it is), read into serde types
//! through prost-reflect.
//!
//! A registered schema is a `.proto` file's text, or (as Confluent's
//! Python serializer registers it) a base64 `FileDescriptorProto`; both
//! are compiled with protox, the well-known `google/protobuf/*` imports
//! included. Between the message and the serde type stands the message's
//! canonical JSON form with the fields' proto names and 64-bit integers as
//! numbers, so a Rust struct reads a message whose fields it names.

use base64::Engine;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The name the schema's own file is compiled under.
const FILE_NAME: &str = "schema.proto";

/// A compiled schema file.
pub(crate) struct ProtoFile {
    pool: DescriptorPool,
    name: String,
}

impl ProtoFile {
    /// Compiles a schema as the registry holds it.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let file = match descriptor(text) {
            Some(proto) => File::from_file_descriptor_proto(proto),
            None => File::from_source(FILE_NAME, text).map_err(|e| e.to_string())?,
        };
        let name = file.name().to_string();
        let mut resolver = ChainFileResolver::new();
        resolver.add(OneFile(file));
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.open_file(&name).map_err(|e| e.to_string())?;
        Ok(Self {
            pool: compiler.descriptor_pool(),
            name,
        })
    }

    /// The message named `name`: its full name (`shop.Order`,
    /// `shop.Order.Line`), or without the package when that is one
    /// message of the file.
    pub(crate) fn message(&self, name: &str) -> Result<MessageDescriptor, String> {
        if let Some(message) = self.pool.get_message_by_name(name) {
            return Ok(message);
        }
        let file = self.file()?;
        let qualified = match file.package_name() {
            "" => name.to_string(),
            package => format!("{package}.{name}"),
        };
        let names: Vec<_> = file.messages().map(|m| m.full_name().to_string()).collect();
        self.pool
            .get_message_by_name(&qualified)
            .ok_or_else(|| format!("no message {name} in the schema (it has {names:?})"))
    }

    /// The message at `indexes`, the path the wire format names.
    pub(crate) fn message_at(&self, indexes: &[usize]) -> Result<MessageDescriptor, String> {
        let missing = || format!("the schema has no message at indexes {indexes:?}");
        let (&first, nested) = indexes.split_first().ok_or_else(missing)?;
        let mut message = self.file()?.messages().nth(first).ok_or_else(missing)?;
        for &index in nested {
            let child = message.child_messages().nth(index);
            message = child.ok_or_else(missing)?;
        }
        Ok(message)
    }

    fn file(&self) -> Result<prost_reflect::FileDescriptor, String> {
        (self.pool.get_file_by_name(&self.name)).ok_or_else(|| format!("no file {}", self.name))
    }
}

/// The wire format's indexes of `message`: its position among its file's
/// messages, then among each enclosing message's nested ones.
pub(crate) fn indexes_of(message: &MessageDescriptor) -> Vec<usize> {
    let is_it = |m: MessageDescriptor| m.full_name() == message.full_name();
    let among = "a message is among its parent's";
    match message.parent_message() {
        None => vec![
            message
                .parent_file()
                .messages()
                .position(is_it)
                .expect(among),
        ],
        Some(parent) => {
            let mut path = indexes_of(&parent);
            path.push(parent.child_messages().position(is_it).expect(among));
            path
        }
    }
}

/// How a message becomes JSON on its way to a serde type.
const TO_JSON: SerializeOptions = SerializeOptions::new()
    .stringify_64_bit_integers(false)
    .use_proto_field_name(true)
    .skip_default_fields(false);

/// Reads a message's bytes as `message` into `T`.
pub(crate) fn read<T: DeserializeOwned>(
    message: &MessageDescriptor,
    bytes: &[u8],
) -> Result<T, String> {
    T::deserialize(read_json(message, bytes)?).map_err(|e| e.to_string())
}

/// A message's canonical JSON form.
pub(crate) fn read_json(
    message: &MessageDescriptor,
    bytes: &[u8],
) -> Result<serde_json::Value, String> {
    let decoded = DynamicMessage::decode(message.clone(), bytes).map_err(|e| e.to_string())?;
    (decoded.serialize_with_options(serde_json::value::Serializer, &TO_JSON))
        .map_err(|e| e.to_string())
}

/// Writes `value` as `message`; a field the message does not have is
/// refused, not dropped.
pub(crate) fn write<T: Serialize + ?Sized>(
    message: &MessageDescriptor,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let json = serde_json::to_value(value).map_err(|e| e.to_string())?;
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let dynamic = DynamicMessage::deserialize_with_options(message.clone(), json, &options)
        .map_err(|e| e.to_string())?;
    dynamic.encode(out).map_err(|e| e.to_string())
}

/// A base64 `FileDescriptorProto`, if the text is one.
fn descriptor(text: &str) -> Option<prost_types::FileDescriptorProto> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.contains(char::is_whitespace) {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .ok()?;
    prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok()
}

/// The schema's own file, for the compiler.
struct OneFile(File);

impl FileResolver for OneFile {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match name == self.0.name() {
            true => Ok(self.0.clone()),
            false => Err(protox::Error::file_not_found(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    const SHOP: &str = r#"
        syntax = "proto3";
        package shop;
        message Customer { string name = 1; }
        message Order {
            int64 id = 1;
            string customer = 2;
            repeated Line lines = 3;
            message Line { string sku = 1; uint32 count = 2; }
        }
    "#;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Order {
        id: i64,
        customer: String,
        lines: Vec<Line>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Line {
        sku: String,
        count: u32,
    }

    #[test]
    fn a_message_reads_back_as_written_and_names_its_indexes() {
        let file = ProtoFile::parse(SHOP).unwrap();
        let order_message = file.message("Order").unwrap();
        assert_eq!(order_message.full_name(), "shop.Order");
        assert_eq!(indexes_of(&order_message), [1]);
        let line = file.message("shop.Order.Line").unwrap();
        assert_eq!(indexes_of(&line), [1, 0]);
        assert_eq!(
            file.message_at(&[1, 0]).unwrap().full_name(),
            "shop.Order.Line"
        );
        let order = Order {
            id: 1 << 40,
            customer: "ada".into(),
            lines: vec![Line {
                sku: "x-1".into(),
                count: 3,
            }],
        };
        let mut bytes = Vec::new();
        write(&order_message, &order, &mut bytes).unwrap();
        assert_eq!(read::<Order>(&order_message, &bytes).unwrap(), order);
    }

    #[test]
    fn a_descriptor_in_base64_compiles_like_its_text() {
        let text = ProtoFile::parse(SHOP).unwrap();
        let proto = text.file().unwrap().file_descriptor_proto().clone();
        let encoded = base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec());
        let file = ProtoFile::parse(&encoded).unwrap();
        assert_eq!(file.message("Order").unwrap().full_name(), "shop.Order");
    }

    #[test]
    fn unknown_fields_messages_and_bad_text_are_refused() {
        let file = ProtoFile::parse(SHOP).unwrap();
        let message = file.message("Customer").unwrap();
        let mut out = Vec::new();
        let error = write(&message, &serde_json::json!({"nme": "x"}), &mut out).unwrap_err();
        assert!(error.contains("nme"), "{error}");
        assert!(file.message("Nope").unwrap_err().contains("shop.Order"));
        assert!(file.message_at(&[5]).is_err());
        assert!(ProtoFile::parse("message {").is_err());
    }
}
