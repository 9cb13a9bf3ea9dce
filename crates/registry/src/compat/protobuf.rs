//! Protobuf: a schema is a `.proto` file, as text or (as Confluent's
//! serializers send it) a base64 `FileDescriptorProto`, compiled in
//! process by protox (no `protoc`) with its imports resolved from the
//! schema's references and Google's well-known types.
//!
//! A reader is compatible with a writer when every message the writer's
//! data can hold still decodes into the reader's types. Fields are matched
//! by number (names are not on the wire). What breaks, checked for every
//! message of the writer's file:
//!
//! - the file's package changed (message full names all move);
//! - a message of the writer is missing from the reader;
//! - a field number's type changed across wire encodings: types stay
//!   compatible only within {int32, uint32, int64, uint64, bool},
//!   {sint32, sint64}, {fixed32, sfixed32}, {fixed64, sfixed64} and
//!   {string, bytes}; a message or enum field must keep its type's full
//!   name;
//! - a field changed between repeated (or map) and singular;
//! - a proto2 required field added, removed, or made required;
//! - several existing fields moved into one oneof (a writer may set all
//!   of them; the reader keeps only the last).
//!
//! Adding or removing an optional field, renaming a field, adding a
//! message or an enum value are compatible.

use std::collections::HashMap;

use base64::Engine;
use prost::Message;
use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::error::RegistryError;

/// The name a schema given as text is compiled under (a descriptor keeps
/// its own).
const MAIN_FILE: &str = "schema.proto";

/// A compiled `.proto` file and everything it imports.
#[derive(Debug, Clone)]
pub struct ProtoSchema {
    pool: DescriptorPool,
    file: String,
}

impl ProtoSchema {
    /// The file as a base64 `FileDescriptorProto` (`format=serialized`, what
    /// Confluent's deserializers ask for).
    pub fn serialized(&self) -> String {
        let file =
            (self.pool.get_file_by_name(&self.file)).expect("the compiled pool holds its own file");
        let bytes = file.file_descriptor_proto().encode_to_vec();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn messages(&self) -> Vec<MessageDescriptor> {
        let Some(file) = self.pool.get_file_by_name(&self.file) else {
            return Vec::new();
        };
        let mut all = Vec::new();
        let mut pending: Vec<MessageDescriptor> = file.messages().collect();
        while let Some(message) = pending.pop() {
            pending.extend(message.child_messages().filter(|m| !m.is_map_entry()));
            all.push(message);
        }
        all
    }

    fn package(&self) -> String {
        (self.pool.get_file_by_name(&self.file))
            .map(|f| f.package_name().to_string())
            .unwrap_or_default()
    }
}

/// Compiles `text` with `references` (import name → schema text) at hand.
pub fn parse(text: &str, references: &[(&str, &str)]) -> Result<ProtoSchema, RegistryError> {
    let invalid = |e: protox::Error| RegistryError::InvalidSchema(e.to_string());
    let mut sources = Sources::default();
    for (name, reference) in references {
        let file = open(name, reference).map_err(invalid)?;
        sources.0.insert((*name).to_string(), file);
    }
    let main = open(MAIN_FILE, text).map_err(invalid)?;
    let file = match main.file_descriptor_proto().name() {
        "" => MAIN_FILE.to_string(),
        named => named.to_string(),
    };
    sources.0.insert(file.clone(), main);
    let mut chain = ChainFileResolver::new();
    chain.add(sources);
    chain.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.include_imports(true);
    compiler.open_file(&file).map_err(invalid)?;
    Ok(ProtoSchema {
        pool: compiler.descriptor_pool(),
        file,
    })
}

/// A file from its text, or from a base64 descriptor when the text is one.
fn open(name: &str, text: &str) -> Result<File, protox::Error> {
    let trimmed = text.trim();
    if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(trimmed)
        && let Ok(file) = File::decode_file_descriptor_proto(bytes.as_slice())
        && !file.file_descriptor_proto().name().is_empty()
    {
        return Ok(file);
    }
    File::from_source(name, text)
}

/// The schema's own files, by import name.
#[derive(Default)]
struct Sources(HashMap<String, File>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| protox::Error::file_not_found(name))
    }
}

/// What stops `reader` from decoding every message written with `writer`
/// (see the module doc); empty when nothing does.
pub fn incompatibilities(reader: &ProtoSchema, writer: &ProtoSchema) -> Vec<String> {
    let mut problems = Vec::new();
    if reader.package() != writer.package() {
        problems.push(format!(
            "the package changed from '{}' to '{}'",
            writer.package(),
            reader.package()
        ));
        return problems;
    }
    for written in writer.messages() {
        match reader.pool.get_message_by_name(written.full_name()) {
            None => problems.push(format!("message {} was removed", written.full_name())),
            Some(read) => compare_message(&read, &written, &mut problems),
        }
    }
    problems
}

fn compare_message(reader: &MessageDescriptor, writer: &MessageDescriptor, out: &mut Vec<String>) {
    let name = writer.full_name();
    for written in writer.fields() {
        let number = written.number();
        match reader.get_field(number) {
            None if written.cardinality() == Cardinality::Required => {
                out.push(format!(
                    "required field {name}.{} ({number}) was removed",
                    written.name()
                ));
            }
            None => {}
            Some(read) => compare_field(name, &read, &written, out),
        }
    }
    for read in reader.fields() {
        if writer.get_field(read.number()).is_none() && read.cardinality() == Cardinality::Required
        {
            out.push(format!(
                "required field {name}.{} ({}) was added",
                read.name(),
                read.number()
            ));
        }
    }
    // Existing fields gathered into one oneof.
    let mut moved: HashMap<String, usize> = HashMap::new();
    for read in reader.fields() {
        let Some(oneof) = read.containing_oneof().filter(|o| !o.is_synthetic()) else {
            continue;
        };
        let written = writer.get_field(read.number());
        if written.is_some_and(|w| w.containing_oneof().is_none_or(|o| o.is_synthetic())) {
            *moved.entry(oneof.name().to_string()).or_default() += 1;
        }
    }
    for (oneof, count) in moved {
        if count > 1 {
            out.push(format!(
                "{count} existing fields of {name} were moved into oneof {oneof}"
            ));
        }
    }
}

fn compare_field(
    message: &str,
    reader: &FieldDescriptor,
    writer: &FieldDescriptor,
    out: &mut Vec<String>,
) {
    let field = format!("{message}.{} ({})", writer.name(), writer.number());
    if (reader.is_list() || reader.is_map()) != (writer.is_list() || writer.is_map()) {
        out.push(format!(
            "field {field} changed between repeated and singular"
        ));
    }
    if reader.cardinality() == Cardinality::Required
        && writer.cardinality() != Cardinality::Required
    {
        out.push(format!("field {field} was made required"));
    }
    let (read, written) = (reader.kind(), writer.kind());
    if !kinds_compatible(&read, &written) {
        out.push(format!(
            "field {field} changed type from {} to {}",
            kind_name(&written),
            kind_name(&read)
        ));
    }
}

/// Whether data of kind `written` decodes as kind `read`.
fn kinds_compatible(read: &Kind, written: &Kind) -> bool {
    match (read, written) {
        (Kind::Message(r), Kind::Message(w)) => r.full_name() == w.full_name(),
        (Kind::Enum(r), Kind::Enum(w)) => r.full_name() == w.full_name(),
        (Kind::Message(_) | Kind::Enum(_), _) | (_, Kind::Message(_) | Kind::Enum(_)) => false,
        (r, w) => wire_group(r) == wire_group(w),
    }
}

/// Scalar kinds that read each other's encodings share a group.
fn wire_group(kind: &Kind) -> u8 {
    match kind {
        Kind::Int32 | Kind::Uint32 | Kind::Int64 | Kind::Uint64 | Kind::Bool => 0,
        Kind::Sint32 | Kind::Sint64 => 1,
        Kind::Fixed32 | Kind::Sfixed32 => 2,
        Kind::Fixed64 | Kind::Sfixed64 => 3,
        Kind::String | Kind::Bytes => 4,
        Kind::Float => 5,
        Kind::Double => 6,
        Kind::Message(_) | Kind::Enum(_) => 7,
    }
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        scalar => format!("{scalar:?}").to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(body: &str) -> ProtoSchema {
        parse(&format!("syntax = \"proto3\";\npackage shop;\n{body}"), &[]).unwrap()
    }

    #[test]
    fn adding_an_optional_field_is_compatible_both_ways() {
        let v1 = proto("message Order { string id = 1; }");
        let v2 = proto("message Order { string id = 1; int64 total = 2; }");
        assert!(incompatibilities(&v2, &v1).is_empty());
        assert!(incompatibilities(&v1, &v2).is_empty());
    }

    #[test]
    fn a_field_changing_wire_type_is_refused() {
        let v1 = proto("message Order { string id = 1; }");
        let v2 = proto("message Order { int64 id = 1; }");
        let problems = incompatibilities(&v2, &v1);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("shop.Order.id (1)"), "{problems:?}");
    }

    #[test]
    fn int32_widening_to_int64_is_compatible() {
        let v1 = proto("message M { int32 n = 1; }");
        let v2 = proto("message M { int64 n = 1; }");
        assert!(incompatibilities(&v2, &v1).is_empty());
    }

    #[test]
    fn a_removed_message_is_refused() {
        let v1 = proto("message A { string x = 1; }\nmessage B { string y = 1; }");
        let v2 = proto("message A { string x = 1; }");
        assert_eq!(incompatibilities(&v2, &v1), ["message shop.B was removed"]);
    }

    #[test]
    fn a_required_field_added_is_refused() {
        let v1 = parse(
            "syntax = \"proto2\";\nmessage M { optional string a = 1; }",
            &[],
        )
        .unwrap();
        let v2 = parse(
            "syntax = \"proto2\";\nmessage M { optional string a = 1; required int32 b = 2; }",
            &[],
        )
        .unwrap();
        assert!(!incompatibilities(&v2, &v1).is_empty());
    }

    #[test]
    fn a_base64_descriptor_parses_like_its_text() {
        let text = proto("message Order { string id = 1; }");
        let descriptor = parse(&text.serialized(), &[]).unwrap();
        assert!(incompatibilities(&descriptor, &text).is_empty());
        assert!(descriptor.pool.get_message_by_name("shop.Order").is_some());
    }

    #[test]
    fn an_import_resolves_from_a_reference() {
        let common = "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; }";
        let order = "syntax = \"proto3\";\nimport \"common.proto\";\nmessage Order { common.Money total = 1; }";
        assert_eq!(parse(order, &[]).unwrap_err().code(), 42201);
        parse(order, &[("common.proto", common)]).unwrap();
    }

    #[test]
    fn text_that_is_not_protobuf_is_an_invalid_schema() {
        assert_eq!(parse("message {", &[]).unwrap_err().code(), 42201);
    }
}
