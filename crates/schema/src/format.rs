//! The formats a topic's keys or values can be written in through a
//! schema registry, as an app declares them: with the schema it reads
//! records as and writes them with.

use std::fmt;

/// A registry format and the app's own schema in it. `Copy` and `const`,
/// like the codecs it sits beside in a typed handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaFormat {
    /// Avro: `schema` is the schema's JSON. Records written with an older
    /// or newer schema are read through Avro's schema resolution into
    /// this one (fields added with defaults filled, removed ones dropped).
    Avro { schema: &'static str },
    /// Protobuf: `schema` is the `.proto` file's text, `message` the
    /// (possibly package-qualified, possibly nested: `Outer.Inner`) name of
    /// the message the records hold.
    Protobuf {
        schema: &'static str,
        message: &'static str,
    },
    /// JSON text checked against a JSON Schema (`schema`, its JSON) when
    /// it is written.
    JsonSchema { schema: &'static str },
}

/// The three schema types of the registry's API (`schemaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaFormat {
    pub const fn schema_type(&self) -> SchemaType {
        match self {
            Self::Avro { .. } => SchemaType::Avro,
            Self::Protobuf { .. } => SchemaType::Protobuf,
            Self::JsonSchema { .. } => SchemaType::Json,
        }
    }

    /// The schema's text as it is registered.
    pub const fn schema(&self) -> &'static str {
        match self {
            Self::Avro { schema } | Self::Protobuf { schema, .. } | Self::JsonSchema { schema } => {
                schema
            }
        }
    }

    /// The codec's name: `avro`, `protobuf`, `json-schema`.
    pub const fn name(&self) -> &'static str {
        self.schema_type().codec_name()
    }
}

impl SchemaType {
    /// As the registry's API spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }

    /// As the registry's API spells it; absent means Avro.
    pub fn parse(name: Option<&str>) -> Option<Self> {
        match name {
            None | Some("AVRO") => Some(Self::Avro),
            Some("PROTOBUF") => Some(Self::Protobuf),
            Some("JSON") => Some(Self::Json),
            Some(_) => None,
        }
    }

    /// The name of the codec reading records of this type.
    pub const fn codec_name(self) -> &'static str {
        match self {
            Self::Avro => "avro",
            Self::Protobuf => "protobuf",
            Self::Json => "json-schema",
        }
    }
}

impl fmt::Display for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
