//! The broker over real sockets: the Kafka APIs, groups, pipelining, memory and connection limits, kill -9 and SIGTERM, idempotent and transactional producers.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod connection_flood;
mod console;
mod fetch_wakeups;
mod group_lag_metric;
mod groups;
mod idempotent_kill9;
mod idempotent_produce;
mod kcat_idempotent;
mod kill9;
mod kill9_queue;
mod list_offsets;
mod overload_readers;
mod pipelining;
mod request_memory;
mod sigterm;
mod transactions_kill9;
mod unserved_requests;
