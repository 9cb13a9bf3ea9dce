//! Reading and writing records in the registry formats: the entry points
//! the codecs call, and what they keep between records.
//!
//! One registry serves the process: an app's codecs are `Copy` constants
//! in its typed handles, with no room for a connection, so the runtime
//! installs the registry the app was started with ([`install`]) and every
//! codec reads it from there. Everything asked of the registry is kept:
//! the schema of each id met, the id of each declared schema under each
//! subject (registered on first write, as Confluent's serializers do with
//! `auto.register.schemas`), and each parsed schema. After the first
//! record of each kind, a record costs a read lock and a hash lookup, no
//! question to the registry.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use prost_reflect::MessageDescriptor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::avro::{self, AvroReader, AvroWriter};
use crate::error::SchemaError;
use crate::format::{SchemaFormat, SchemaType};
use crate::json_schema::JsonSchema;
use crate::protobuf::{self, ProtoFile};
use crate::registry::{Registry, SchemaText};
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
    let (id, payload) = wire::split(bytes)?;
    if let SchemaFormat::JsonSchema { .. } = format {
        // The text is the record: no schema is needed to read it.
        return serde_json::from_slice(payload).map_err(|e| SchemaError::Decode(e.to_string()));
    }
    let installed = INSTALLED.read().expect("registry lock");
    let schemas = installed
        .as_ref()
        .ok_or(SchemaError::NoRegistry(format.name()))?;
    match format {
        SchemaFormat::Avro { .. } => schemas.with_avro_reader(id, Some(format), |reader| {
            reader.read(payload).map_err(SchemaError::Decode)
        }),
        SchemaFormat::Protobuf { .. } => {
            let written = schemas.written(id)?;
            let Written::Protobuf(file) = &*written else {
                return Err(other_type(id, &written, SchemaType::Protobuf));
            };
            let (indexes, message) = wire::split_message_indexes(payload)?;
            let found = file.message_at(&indexes).map_err(SchemaError::Decode)?;
            let declared = schemas.declared(format)?;
            let Declared::Protobuf {
                message: wanted, ..
            } = &*declared
            else {
                unreachable!("a Protobuf format is declared as one")
            };
            if found.full_name() != wanted.full_name() {
                return Err(SchemaError::OtherMessage {
                    id,
                    found: found.full_name().into(),
                    declared: wanted.full_name().into(),
                });
            }
            protobuf::read(&found, message).map_err(SchemaError::Decode)
        }
        SchemaFormat::JsonSchema { .. } => unreachable!("read above"),
    }
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
    let installed = INSTALLED.read().expect("registry lock");
    let schemas = installed
        .as_ref()
        .ok_or(SchemaError::NoRegistry(format.name()))?;
    let declared = schemas.declared(format)?;
    let id = schemas.id_for(format, &declared, topic, part)?;
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
}

/// A writer's schema id, and the declared schema it is read as.
type AvroReaderKey = (u32, Option<DeclaredKey>);

/// A declared format by the address of its texts: they are `'static`
/// constants, so comparing addresses is exact and hashing one costs
/// nothing like hashing the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DeclaredKey(usize, usize, usize);

impl DeclaredKey {
    fn of(format: &SchemaFormat) -> Self {
        let message = match format {
            SchemaFormat::Protobuf { message, .. } => message.as_ptr() as usize,
            _ => 0,
        };
        Self(
            format.schema().as_ptr() as usize,
            format.schema().len(),
            message,
        )
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
        }
    }

    fn written(&self, id: u32) -> Result<Arc<Written>, SchemaError> {
        if let Some(known) = self.written.read().expect("schema cache").get(&id) {
            return Ok(known.clone());
        }
        let text = self.registry.schema_by_id(id)?;
        if !text.references.is_empty() {
            return Err(SchemaError::References(id));
        }
        let bad = |reason| SchemaError::BadSchema {
            whose: format!("registered schema {id}'s"),
            reason,
        };
        let parsed = Arc::new(match text.schema_type {
            SchemaType::Avro => Written::Avro(avro::parse(&text.schema).map_err(bad)?),
            SchemaType::Protobuf => Written::Protobuf(ProtoFile::parse(&text.schema).map_err(bad)?),
            SchemaType::Json => Written::Json,
        });
        let mut written = self.written.write().expect("schema cache");
        Ok(written.entry(id).or_insert(parsed).clone())
    }

    fn declared(&self, format: &SchemaFormat) -> Result<Arc<Declared>, SchemaError> {
        let key = DeclaredKey::of(format);
        if let Some(known) = self.declared.read().expect("schema cache").get(&key) {
            return Ok(known.clone());
        }
        let parsed = Declared::parse(format).map_err(|reason| SchemaError::BadSchema {
            whose: format!("the {} codec's", format.name()),
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
                _ => unreachable!("an Avro format is declared as one"),
            },
        };
        let reader = AvroReader::new(writer_schema, reader_schema).map_err(|reason| {
            SchemaError::BadSchema {
                whose: format!("registered schema {id} read as the codec's"),
                reason,
            }
        })?;
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

        install(registry.clone(), SubjectStrategy::RecordName);
        encode(&POINT_AVRO, "anything", Part::Key, &point, &mut out).unwrap();
        assert_eq!(registry.versions("Point").len(), 1);
    }
}
