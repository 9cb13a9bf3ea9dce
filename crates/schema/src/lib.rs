//! Records in the Confluent wire format: Avro, Protobuf and JSON Schema,
//! through a schema registry, to and from serde types.
//!
//! - [`wire`]: the format's bytes (magic byte, schema id, Protobuf's
//!   message indexes).
//! - [`SchemaFormat`]: a format and the app's own schema, as a codec
//!   declares it.
//! - [`registry`]: the registry, over HTTP or in the process.
//! - [`decode`], [`encode`], [`decode_dynamic`]: what the codecs call,
//!   with the registry [`install`]ed for the process.
//! - [`SubjectStrategy`]: which subject a topic's schemas go under.

mod avro;
mod codec;
mod error;
mod format;
mod json_schema;
mod protobuf;
pub mod registry;
mod subject;
pub mod wire;

pub use codec::{
    DynamicRecord, check_declared, decode, decode_dynamic, encode, install,
    install_unless_installed, is_installed,
};
pub use error::SchemaError;
pub use format::{SchemaFormat, SchemaType};
pub use subject::{Part, SubjectStrategy};
