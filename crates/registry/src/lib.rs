//! strata-registry: a schema registry speaking Confluent's REST API,
//! served by `strata serve --schema-registry ADDR`, its state kept in the
//! broker's own log.
//!
//! - [`api`]: the routes Confluent's clients call, their bodies, answers
//!   and numbered errors.
//! - [`registry`]: what each request does, under Confluent's rules
//!   (identical schemas, global ids, versions, soft and permanent deletes).
//! - [`compat`]: each format's validity and reader/writer compatibility
//!   (Avro, Protobuf, JSON Schema), and the level's choice of checks.
//! - [`level`]: the compatibility levels.
//! - [`schema`]: a schema as registered, and when two are the same.
//! - [`store`]: the state in memory and in the compacted `_schemas`
//!   topic, written through the log in process, durably before each
//!   answer, and read back at start.
//! - [`error`]: the refusals, under Confluent's codes.
//!
//! The registry knows nothing of the broker or the network beyond its
//! router: whoever serves it (the `strata` command) binds the address and
//! secures it as the broker's other HTTP endpoints.

pub mod api;
pub mod compat;
pub mod error;
pub mod level;
pub mod registry;
pub mod schema;
pub mod store;

pub use api::{router, serve};
pub use error::RegistryError;
pub use level::CompatibilityLevel;
pub use registry::{Registered, Registry, VersionSpec};
pub use schema::{Schema, SchemaReference, SchemaType};
pub use store::{SCHEMAS_TOPIC, StoreError};
