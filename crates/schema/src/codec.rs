//! Reading and writing records in the registry formats: the entry points
//! the codecs call, and what they keep between records.
//!
//! One registry serves the process: an app's codecs are `Copy` constants
//! in its typed handles, with no room for a connection, so the runtime
//! installs the registry the app was started with ([`install`]) and every
//! codec reads it from there. Everything asked of the registry is kept:
//! the schema of each id met, the id of each declared schema under each
//! subject (registered on first write, as Confluent's serializers do with
//! `auto.register.schemas`), each parsed schema, and for a while the ids
//! the registry does not know (so a run of records naming one does not
//! ask again for each). After the first record of each kind a record
//! asks the registry nothing: a read costs two read locks and hash
//! lookups (the installation, then the reader or the schema), a write
//! three (the installation, the declared schema, its id for the topic).
//!
//! A question to the registry blocks the thread asking, a task thread
//! that may run other tasks too, for up to the client's timeout: the
//! first records of each schema pay it, later ones do not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use prost_reflect::MessageDescriptor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::avro::{self, AvroReader, AvroWriter};
use crate::error::SchemaError;
use crate::format::{SchemaFormat, SchemaType};
use crate::json_schema::JsonSchema;
use crate::protobuf::{self, ProtoFile};
use crate::registry::{Registry, RegistryError, SchemaText};
use crate::subject::{Part, SubjectStrategy};
use crate::wire;

static INSTALLED: RwLock<Option<Arc<Schemas>>> = RwLock::new(None);

/// Makes `registry` the one the codecs use, named by `subjects`, from now
/// on (replacing one installed before, and everything it kept).
pub fn install(registry: Arc<dyn Registry>, subjects: SubjectStrategy) {
    *INSTALLED.write().expect("registry lock") = Some(Arc::new(Schemas::new(registry, subjects)));
}

/// Installs the registry `make` gives unless one is installed already (in
/// one step: tests running side by side in a process all get the first).
pub fn install_unless_installed(make: impl FnOnce() -> Arc<dyn Registry>) {
    let mut installed = INSTALLED.write().expect("registry lock");
    if installed.is_none() {
        *installed = Some(Arc::new(Schemas::new(make(), SubjectStrategy::default())));
    }
}

/// Whether a registry is installed.
pub fn is_installed() -> bool {
    INSTALLED.read().expect("registry lock").is_some()
}

/// Reads a record's key or value, written in `format`'s wire format, into
/// `T`.
pub fn decode<T: DeserializeOwned>(format: &SchemaFormat, bytes: &[u8]) -> Result<T, SchemaError> {
    if bytes.is_empty() {
        // A null key or value (a tombstone): `None`, `()`, or an error
        // for types that cannot be nothing, as Confluent's deserializers
        // give null.
        return serde_json::from_str("null")
            .map_err(|e| SchemaError::Decode(format!("no bytes (a null): {e}")));
    }
    let (id, payload) = wire::split(bytes)?;
    match format {
        // The text is the record: no schema is needed to read it.
        SchemaFormat::JsonSchema { .. } => {
            serde_json::from_slice(payload).map_err(|e| SchemaError::Decode(e.to_string()))
        }
        SchemaFormat::Avro { .. } => with_schemas(format, |schemas| {
            schemas.with_avro_reader(id, Some(format), |reader| {
                reader.read(payload).map_err(SchemaError::Decode)
            })
        }),
        SchemaFormat::Protobuf { .. } => with_schemas(format, |schemas| {
            let written = schemas.written(id)?;
            let Written::Protobuf(file) = &*written else {
                return Err(other_type(id, &written, SchemaType::Protobuf));
            };
            let (indexes, message) = wire::split_message_indexes(payload)?;
            let found = file.message_at(&indexes).map_err(SchemaError::Decode)?;
            let declared = schemas.declared(format)?;
            let wanted = declared.protobuf_message(format)?;
            if found.full_name() != wanted.full_name() {
                return Err(SchemaError::OtherMessage {
                    id,
                    found: found.full_name().into(),
                    declared: wanted.full_name().into(),
                });
            }
            // Read with the app's own descriptor: Protobuf's evolution is
            // by field number, so a field renamed or added since the
            // record was written reads as the app names it.
            protobuf::read(wanted, message).map_err(SchemaError::Decode)
        }),
    }
}

/// Runs `f` with the installed registry's schemas, or says `format`'s
/// codec needs a registry.
fn with_schemas<R>(
    format: &SchemaFormat,
    f: impl FnOnce(&Schemas) -> Result<R, SchemaError>,
) -> Result<R, SchemaError> {
    let installed = INSTALLED.read().expect("registry lock");
    f(installed
        .as_ref()
        .ok_or(SchemaError::NoRegistry(format.name()))?)
}

/// Writes `value` as `topic`'s key or value in `format`'s wire format into
/// `out` (replacing what it held), registering the declared schema under
/// the topic's subject the first time.
pub fn encode<T: Serialize + ?Sized>(
    format: &SchemaFormat,
    topic: &str,
    part: Part,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    let (declared, id) = with_schemas(format, |schemas| {
        let declared = schemas.declared(format)?;
        let id = schemas.id_for(format, &declared, topic, part)?;
        Ok((declared, id))
    })?;
    out.clear();
    wire::write_header(id, out);
    let written = match &*declared {
        Declared::Avro { writer, .. } => writer.write(value, out),
        Declared::Protobuf {
            message, indexes, ..
        } => {
            wire::write_message_indexes(indexes, out);
            protobuf::write(message, value, out)
        }
        Declared::Json(schema) => schema.write(value, out),
    };
    written.map_err(SchemaError::Encode)
}

/// Checks that a declared format's schema parses (and names a message
/// the file has), without a registry: an app's declarations are checked
/// before it runs.
pub fn check_declared(format: &SchemaFormat) -> Result<(), SchemaError> {
    Declared::parse(format)
        .map(drop)
        .map_err(|reason| SchemaError::BadDeclared {
            codec: format.name(),
            reason,
        })
}

/// A record read with no type in mind, for tools.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicRecord {
    pub id: u32,
    pub schema_type: SchemaType,
    /// The record as JSON (Avro's and Protobuf's canonical JSON forms).
    pub value: serde_json::Value,
}

/// Reads a record in any registry format, as the schema its id names.
pub fn decode_dynamic(bytes: &[u8]) -> Result<DynamicRecord, SchemaError> {
    let (id, payload) = wire::split(bytes)?;
    let installed = INSTALLED.read().expect("registry lock");
    let schemas = installed
        .as_ref()
        .ok_or(SchemaError::NoRegistry("registry"))?;
    let written = schemas.written(id)?;
    let decode = |e| SchemaError::Decode(e);
    let (schema_type, value) = match &*written {
        Written::Avro(_) => (
            SchemaType::Avro,
            schemas
                .with_avro_reader(id, None, |reader| reader.read_json(payload).map_err(decode))?,
        ),
        Written::Protobuf(file) => {
            let (indexes, message) = wire::split_message_indexes(payload)?;
            let found = file.message_at(&indexes).map_err(decode)?;
            (
                SchemaType::Protobuf,
                protobuf::read_json(&found, message).map_err(decode)?,
            )
        }
        Written::Json => (
            SchemaType::Json,
            serde_json::from_slice(payload).map_err(|e| decode(e.to_string()))?,
        ),
    };
    Ok(DynamicRecord {
        id,
        schema_type,
        value,
    })
}

/// The registry and what has been learnt from it.
struct Schemas {
    registry: Arc<dyn Registry>,
    subjects: SubjectStrategy,
    /// Per schema id, the schema records were written with.
    written: RwLock<HashMap<u32, Arc<Written>>>,
    /// Per declared schema, parsed.
    declared: RwLock<HashMap<DeclaredKey, Arc<Declared>>>,
    /// Per writer id and declared schema (none for tools), a reader.
    avro_readers: RwLock<HashMap<AvroReaderKey, Arc<AvroReader>>>,
    /// Per declared schema and part, per topic, its id.
    ids: RwLock<HashMap<(DeclaredKey, Part), HashMap<String, u32>>>,
    /// Ids lately found unknown or unreadable.
    unreadable: Unreadable,
}

/// How long an id the registry did not know, or gave a schema for that
/// does not parse, is answered from memory: records naming it fail
/// without a question each, and one registered meanwhile is found soon.
const UNREADABLE_KEPT: Duration = Duration::from_secs(10);

/// The most such ids kept; past it the oldest half is forgotten.
const UNREADABLE_MAX: usize = 1024;

/// Ids lately found unknown (40403) or unreadable, with why.
#[derive(Default)]
struct Unreadable(Mutex<HashMap<u32, (Instant, String, bool)>>);

impl Unreadable {
    fn recent(&self, id: u32) -> Option<SchemaError> {
        let known = self.0.lock().expect("schema cache");
        let (at, reason, unknown) = known.get(&id)?;
        (at.elapsed() < UNREADABLE_KEPT).then(|| match unknown {
            true => SchemaError::Registry(RegistryError::Refused {
                status: 404,
                code: 40403,
                message: reason.clone(),
            }),
            false => SchemaError::BadRegistered {
                id,
                reason: reason.clone(),
            },
        })
    }

    /// Keeps `error` for `id` when it says the id is unknown or its
    /// schema unreadable (not when the registry could not be asked).
    fn note(&self, id: u32, error: &SchemaError) {
        let (reason, unknown) = match error {
            SchemaError::Registry(RegistryError::Refused { message, .. })
                if error.blames_the_record() =>
            {
                (message.clone(), true)
            }
            SchemaError::BadRegistered { reason, .. } => (reason.clone(), false),
            _ => return,
        };
        let mut known = self.0.lock().expect("schema cache");
        if known.len() >= UNREADABLE_MAX {
            let mut ages: Vec<Instant> = known.values().map(|(at, ..)| *at).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            known.retain(|_, (at, ..)| *at > cut);
        }
        known.insert(id, (Instant::now(), reason, unknown));
    }
}

/// A writer's schema id, and the declared schema it is read as.
type AvroReaderKey = (u32, Option<DeclaredKey>);

/// A declared format by its kind and the addresses and lengths of its
/// texts: they are `'static` constants, so comparing addresses is exact
/// and hashing one costs nothing like hashing the schema. (The same text
/// at two addresses is parsed and registered twice, to the same id.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DeclaredKey {
    schema_type: SchemaType,
    schema: (usize, usize),
    message: (usize, usize),
}

impl DeclaredKey {
    fn of(format: &SchemaFormat) -> Self {
        let text = |text: &str| (text.as_ptr() as usize, text.len());
        let message = match format {
            SchemaFormat::Protobuf { message, .. } => text(message),
            _ => (0, 0),
        };
        Self {
            schema_type: format.schema_type(),
            schema: text(format.schema()),
            message,
        }
    }
}

/// A registered schema, as read from the registry.
enum Written {
    Avro(&'static apache_avro::Schema),
    Protobuf(ProtoFile),
    /// Reading JSON needs no schema.
    Json,
}

/// An app's own schema, parsed.
enum Declared {
    Avro {
        schema: &'static apache_avro::Schema,
        writer: AvroWriter,
    },
    Protobuf {
        message: MessageDescriptor,
        indexes: Vec<usize>,
    },
    Json(JsonSchema),
}

impl Declared {
    /// The message a Protobuf format declared.
    fn protobuf_message(&self, format: &SchemaFormat) -> Result<&MessageDescriptor, SchemaError> {
        match self {
            Self::Protobuf { message, .. } => Ok(message),
            _ => Err(declared_as_other(format)),
        }
    }

    fn parse(format: &SchemaFormat) -> Result<Self, String> {
        Ok(match *format {
            SchemaFormat::Avro { schema } => {
                let schema = avro::parse(schema)?;
                let writer = AvroWriter::new(schema)?;
                Self::Avro { schema, writer }
            }
            SchemaFormat::Protobuf { schema, message } => {
                let message = ProtoFile::parse(schema)?.message(message)?;
                let indexes = protobuf::indexes_of(&message);
                Self::Protobuf { message, indexes }
            }
            SchemaFormat::JsonSchema { schema } => Self::Json(JsonSchema::parse(schema)?),
        })
    }

    /// The name the record-name subject strategies use.
    fn record_name(&self) -> Option<String> {
        match self {
            Self::Avro { schema, .. } => avro::record_name(schema),
            Self::Protobuf { message, .. } => Some(message.full_name().to_string()),
            Self::Json(schema) => schema.title.clone(),
        }
    }
}

/// A declared schema cached as another format than its key says: not
/// expected, since the key holds the format; an error, not a panic.
fn declared_as_other(format: &SchemaFormat) -> SchemaError {
    SchemaError::BadDeclared {
        codec: format.name(),
        reason: "parsed as another format".into(),
    }
}

fn other_type(id: u32, written: &Written, codec: SchemaType) -> SchemaError {
    let found = match written {
        Written::Avro(_) => SchemaType::Avro,
        Written::Protobuf(_) => SchemaType::Protobuf,
        Written::Json => SchemaType::Json,
    };
    SchemaError::OtherType { id, found, codec }
}

impl Schemas {
    fn new(registry: Arc<dyn Registry>, subjects: SubjectStrategy) -> Self {
        Self {
            registry,
            subjects,
            written: RwLock::default(),
            declared: RwLock::default(),
            avro_readers: RwLock::default(),
            ids: RwLock::default(),
            unreadable: Unreadable::default(),
        }
    }

    fn written(&self, id: u32) -> Result<Arc<Written>, SchemaError> {
        if let Some(known) = self.written.read().expect("schema cache").get(&id) {
            return Ok(known.clone());
        }
        if let Some(error) = self.unreadable.recent(id) {
            return Err(error);
        }
        let parsed = self.fetch(id);
        if let Err(error) = &parsed {
            self.unreadable.note(id, error);
        }
        let parsed = Arc::new(parsed?);
        let mut written = self.written.write().expect("schema cache");
        Ok(written.entry(id).or_insert(parsed).clone())
    }

    /// Asks the registry for schema `id` and parses it.
    fn fetch(&self, id: u32) -> Result<Written, SchemaError> {
        let text = self.registry.schema_by_id(id)?;
        if !text.references.is_empty() {
            return Err(SchemaError::References(id));
        }
        let bad = |reason| SchemaError::BadRegistered { id, reason };
        Ok(match text.schema_type {
            SchemaType::Avro => Written::Avro(avro::parse(&text.schema).map_err(bad)?),
            SchemaType::Protobuf => Written::Protobuf(ProtoFile::parse(&text.schema).map_err(bad)?),
            SchemaType::Json => Written::Json,
        })
    }

    fn declared(&self, format: &SchemaFormat) -> Result<Arc<Declared>, SchemaError> {
        let key = DeclaredKey::of(format);
        if let Some(known) = self.declared.read().expect("schema cache").get(&key) {
            return Ok(known.clone());
        }
        let parsed = Declared::parse(format).map_err(|reason| SchemaError::BadDeclared {
            codec: format.name(),
            reason,
        })?;
        let mut declared = self.declared.write().expect("schema cache");
        Ok(declared.entry(key).or_insert(Arc::new(parsed)).clone())
    }

    /// Runs `read` with the reader of Avro records written with `id`, read
    /// as `format`'s schema (or as written, for tools).
    fn with_avro_reader<R>(
        &self,
        id: u32,
        format: Option<&SchemaFormat>,
        read: impl FnOnce(&AvroReader) -> Result<R, SchemaError>,
    ) -> Result<R, SchemaError> {
        let key = (id, format.map(DeclaredKey::of));
        if let Some(reader) = self.avro_readers.read().expect("schema cache").get(&key) {
            return read(reader);
        }
        let written = self.written(id)?;
        let Written::Avro(writer_schema) = &*written else {
            return Err(other_type(id, &written, SchemaType::Avro));
        };
        let reader_schema = match format {
            None => None,
            Some(format) => match &*self.declared(format)? {
                Declared::Avro { schema, .. } => Some(*schema),
                _ => return Err(declared_as_other(format)),
            },
        };
        let reader = (AvroReader::new(writer_schema, reader_schema))
            .map_err(|reason| SchemaError::BadRegistered { id, reason })?;
        let reader = Arc::new(reader);
        self.avro_readers
            .write()
            .expect("schema cache")
            .insert(key, reader.clone());
        read(&reader)
    }

    /// The id of the declared schema under `topic`'s subject for `part`.
    fn id_for(
        &self,
        format: &SchemaFormat,
        declared: &Declared,
        topic: &str,
        part: Part,
    ) -> Result<u32, SchemaError> {
        let key = (DeclaredKey::of(format), part);
        let known = self.ids.read().expect("schema cache");
        if let Some(&id) = known.get(&key).and_then(|topics| topics.get(topic)) {
            return Ok(id);
        }
        drop(known);
        let record = declared.record_name();
        let subject = (self.subjects.subject(topic, part, record.as_deref()))
            .map_err(SchemaError::Subject)?;
        let text = SchemaText {
            schema_type: format.schema_type(),
            schema: format.schema().to_string(),
            references: Vec::new(),
        };
        let id = self.registry.register(&subject, &text)?;
        let mut ids = self.ids.write().expect("schema cache");
        ids.entry(key).or_default().insert(topic.to_string(), id);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::registry::MemoryRegistry;

    const POINT_AVRO: SchemaFormat = SchemaFormat::Avro {
        schema: r#"{"type":"record","name":"Point","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}"#,
    };
    const POINT_PROTO: SchemaFormat = SchemaFormat::Protobuf {
        schema: "syntax = \"proto3\"; message Other {} message Point { int32 x = 1; int32 y = 2; }",
        message: "Point",
    };
    const POINT_JSON: SchemaFormat = SchemaFormat::JsonSchema {
        schema: r#"{"title":"Point","type":"object","required":["x","y"]}"#,
    };

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Point {
        x: i32,
        y: i32,
    }

    /// One test for everything that installs a registry: the installation
    /// is the process's.
    #[test]
    fn each_format_registers_once_per_subject_and_reads_back_what_it_wrote() {
        let point = Point { x: 3, y: -4 };
        let mut out = Vec::new();
        let error = encode(&POINT_AVRO, "points", Part::Value, &point, &mut out).unwrap_err();
        assert!(matches!(error, SchemaError::NoRegistry("avro")), "{error}");

        let registry = Arc::new(MemoryRegistry::new());
        install(registry.clone(), SubjectStrategy::TopicName);
        for (format, topic) in [
            (POINT_AVRO, "points-avro"),
            (POINT_PROTO, "points-proto"),
            (POINT_JSON, "points-json"),
        ] {
            for _ in 0..3 {
                encode(&format, topic, Part::Value, &point, &mut out).unwrap();
                assert_eq!(decode::<Point>(&format, &out).unwrap(), point, "{format:?}");
            }
            assert_eq!(registry.versions(&format!("{topic}-value")).len(), 1);
            let dynamic = decode_dynamic(&out).unwrap();
            assert_eq!(dynamic.schema_type, format.schema_type());
            assert_eq!(dynamic.value["x"], 3, "{format:?}");
        }
        // The Protobuf record names its message: the second of the file.
        encode(&POINT_PROTO, "points-proto", Part::Value, &point, &mut out).unwrap();
        assert_eq!(out[wire::HEADER_LEN..wire::HEADER_LEN + 2], [2, 2]);
        // A record of another format is refused with what it is.
        let avro_id = registry.versions("points-avro-value")[0];
        let mut avro_record = Vec::new();
        wire::write_header(avro_id, &mut avro_record);
        avro_record.extend_from_slice(&[0, 0]);
        let error = decode::<Point>(&POINT_PROTO, &avro_record).unwrap_err();
        assert!(matches!(error, SchemaError::OtherType { .. }), "{error}");

        // The same text declared in two formats is parsed as each: an Avro
        // record's schema is no JSON Schema ("type": "record").
        const TEXT: &str = r#"{"type":"record","name":"Point","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}"#;
        let as_avro = SchemaFormat::Avro { schema: TEXT };
        let as_json = SchemaFormat::JsonSchema { schema: TEXT };
        encode(&as_avro, "same-text", Part::Value, &point, &mut out).unwrap();
        let error = encode(&as_json, "same-text", Part::Key, &point, &mut out).unwrap_err();
        assert!(
            matches!(
                error,
                SchemaError::BadDeclared {
                    codec: "json-schema",
                    ..
                }
            ),
            "{error}"
        );
        assert!(!error.blames_the_record());
        // A null reads as nothing.
        assert_eq!(decode::<Option<Point>>(&POINT_AVRO, &[]).unwrap(), None);
        assert!(decode::<Point>(&POINT_AVRO, &[]).is_err());
        // A message written before a field was added reads with the app's
        // descriptor: the new field at its default.
        const POINT_PROTO_V2: SchemaFormat = SchemaFormat::Protobuf {
            schema: "syntax = \"proto3\"; message Other {} message Point { int32 x = 1; int32 y = 2; int32 z = 3; }",
            message: "Point",
        };
        #[derive(Debug, PartialEq, Deserialize)]
        struct Point3 {
            x: i32,
            y: i32,
            z: i32,
        }
        encode(&POINT_PROTO, "points-proto", Part::Value, &point, &mut out).unwrap();
        let read: Point3 = decode(&POINT_PROTO_V2, &out).unwrap();
        assert_eq!(read, Point3 { x: 3, y: -4, z: 0 });
        // An id the registry does not know blames the record.
        let mut unknown = Vec::new();
        wire::write_header(9_999, &mut unknown);
        unknown.push(0);
        let error = decode::<Point>(&POINT_AVRO, &unknown).unwrap_err();
        assert!(error.blames_the_record(), "{error}");

        install(registry.clone(), SubjectStrategy::RecordName);
        encode(&POINT_AVRO, "anything", Part::Key, &point, &mut out).unwrap();
        assert_eq!(registry.versions("Point").len(), 1);
    }
}
