//! Where schemas are registered and looked up: a registry speaking the
//! Confluent REST API over HTTP ([`HttpRegistry`]), or one held in the
//! process ([`MemoryRegistry`], for tests written with the test driver).

#[cfg(feature = "http")]
mod http;
mod memory;

#[cfg(feature = "http")]
pub use http::{ConfigError, HttpRegistry, RegistryConfig};
pub use memory::MemoryRegistry;

use crate::format::SchemaType;

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaText {
    pub schema_type: SchemaType,
    pub schema: String,
    /// Other subjects' schemas this one imports (Protobuf imports, named
    /// Avro types from elsewhere).
    pub references: Vec<Reference>,
}

/// An import of a registered schema: `name` (a `.proto` file name, an
/// Avro type name) is `subject` at `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// Why the registry gave no schema or id.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    #[error("schema registry at {url} not reached: {reason}")]
    Unreachable { url: String, reason: String },
    /// The registry's own error: its HTTP status, error code (409 for an
    /// incompatible schema, 40403 for an unknown id, 42201 for an invalid
    /// schema, …) and message.
    #[error("schema registry refused ({code}): {message}")]
    Refused {
        status: u16,
        code: i64,
        message: String,
    },
    #[error("schema registry answered what is not its API: {0}")]
    BadAnswer(String),
}

impl RegistryError {
    /// The registry answered, as JSON, that it has no such schema id.
    pub fn is_unknown_schema(&self) -> bool {
        matches!(self, Self::Refused { code: 40403, .. })
    }
}

/// A schema registry: schemas by id, and ids for schemas under subjects.
pub trait Registry: Send + Sync + std::fmt::Debug {
    /// The schema registered with `id`.
    fn schema_by_id(&self, id: u32) -> Result<SchemaText, RegistryError>;

    /// The id of `schema` under `subject`, registering it as the subject's
    /// next version when it is new there (the registry checks it is
    /// compatible with the versions before it).
    fn register(&self, subject: &str, schema: &SchemaText) -> Result<u32, RegistryError>;
}
