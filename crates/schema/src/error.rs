//! Why a record could not be read or written in a registry format.

use crate::format::SchemaType;
use crate::registry::RegistryError;
use crate::wire::WireError;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "the {0} codec needs a schema registry: run the app with --schema-registry URL (or STRATA_SCHEMA_REGISTRY)"
    )]
    NoRegistry(&'static str),
    /// A schema, registered or declared, that does not parse.
    #[error("{whose} schema does not parse: {reason}")]
    BadSchema { whose: String, reason: String },
    #[error("the record was written as {found} (schema id {id}); the codec reads {codec}")]
    OtherType {
        id: u32,
        found: SchemaType,
        codec: SchemaType,
    },
    #[error("the record holds message {found} (schema id {id}); the codec reads {declared}")]
    OtherMessage {
        id: u32,
        found: String,
        declared: String,
    },
    #[error(
        "schema id {0} imports other subjects' schemas, which these codecs do not follow: register it self-contained"
    )]
    References(u32),
    #[error("{0}")]
    Subject(String),
    #[error("the record does not read as its schema: {0}")]
    Decode(String),
    #[error("the value does not fit the schema: {0}")]
    Encode(String),
}

impl SchemaError {
    /// Whether the registry could not be asked (not reached, failing, or
    /// not configured), as opposed to the record or value being wrong:
    /// the same record may read once the registry answers.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::NoRegistry(_) => true,
            Self::Registry(RegistryError::Unreachable { .. } | RegistryError::BadAnswer(_)) => true,
            Self::Registry(RegistryError::Refused { status, code, .. }) => {
                // 5xx, and Confluent's 500xx codes: the registry's own failure.
                *status >= 500 || *code >= 50000
            }
            _ => false,
        }
    }
}
