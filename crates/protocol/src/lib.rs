//! strata-protocol: what a Kafka-protocol broker and its clients share,
//! below both.
//!
//! - [`sasl`]: the SASL mechanisms (PLAIN, SCRAM-SHA-256/512), both sides
//!   of each exchange (pure, no I/O).
//! - [`security`]: security protocols and the TLS files (certificates,
//!   keys, distinguished names).
//! - [`acl`]: the ACL model (bindings, filters, operations), kept by the
//!   broker, managed by the client.
//! - [`principal`]: principals in Kafka's notation and a request's caller.

pub mod acl;
pub mod principal;
pub mod sasl;
pub mod security;
