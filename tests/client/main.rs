//! strata's Rust client and CLI against a real broker: admin, producer, fetcher, consumer groups, transactions, restarts, and librdkafka's mock cluster of several brokers.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod cli;
mod consumer;
mod membership;
mod mock_cluster;
mod restart;
mod transactions;
