//! The broker: serves the segment log over Kafka's wire protocol.
//!
//! A tokio server. Each connection reads size-prefixed request frames (the
//! size checked against [`BrokerConfig::request_bytes_max`] and reserved
//! from the broker-wide [`BrokerConfig::request_memory_bytes_max`] budget
//! before anything is allocated), reads ahead up to
//! [`BrokerConfig::in_flight_requests_max`] requests (on a SASL listener,
//! once authenticated: before that, one frame at a time of at most
//! [`auth::SASL_FRAME_BYTES_MAX`], from a budget of its own,
//! [`PRE_AUTH_MEMORY_BYTES_MAX`]), decodes each request
//! header with the `kafka-protocol` crate, dispatches to one handler per API
//! in [`api`] one request at a time, and writes responses in request order.
//! The broker never parses segment files itself: it goes through
//! [`strata_log`].
//!
//! Implemented so far: ApiVersions (with the v0 UNSUPPORTED_VERSION
//! fallback), Metadata, Produce (acks 0, 1 and all; idempotent producers
//! de-duplicated by the log's producer state), InitProducerId,
//! Fetch (long-polling, zero-copy: the response framing is written by hand
//! in `fetch_frame` and the batches go from segment file to socket with
//! `sendfile`), ListOffsets, CreateTopics, DeleteTopics, CreatePartitions
//! and DescribeConfigs (topics), and the consumer-group APIs through the
//! group coordinator in [`group`], the transaction APIs, and DescribeAcls,
//! CreateAcls and DeleteAcls. Every request is authorized against the ACLs
//! in [`acl`] before it has any effect. ApiVersions advertises exactly the
//! APIs handled.

pub mod acl;
pub mod api;
pub mod auth;
mod config;
mod connection;
mod error;
mod fetch_frame;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
mod http_endpoints;
mod huge_alloc;
pub mod listener;
mod metrics;
mod security_config;
mod server;
mod serving_runtime;
mod transport;
pub mod txn;

pub use config::{BrokerConfig, ConfigFile, LISTEN_BACKLOG};
pub use connection::{LOGIN_FRAME_BYTES_MAX, PRE_AUTH_MEMORY_BYTES_MAX};
pub use error::{BrokerError, ErrorCode};
pub use huge_alloc::{HugeReservingAllocator, huge_claims_survivable};
pub use metrics::Metrics;
pub use security_config::{ListenerTable, SaslTable, TlsTable, parse_mechanisms};
pub use server::Broker;
pub use serving_runtime::serving_runtime;
pub use strata_log::{AppendSignals, AppendWatch};
