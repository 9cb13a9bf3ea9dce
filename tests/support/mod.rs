//! Helpers shared by the integration tests, one concept per file:
//! - `records`: building batches, reading them back as plain records;
//! - `log`: topics, appends and reads on a log on disk, segment files;
//! - `wire`: the Kafka protocol by hand, and the common requests;
//! - `broker`: a broker served in the test's own runtime;
//! - `server_process`: `strata serve` as a real process;
//! - `certs`: a CA and certificates made for one test;
//! - `secured_broker`: `strata serve` with every kind of listener;
//! - `example`: example binaries built in the test's own profile;
//! - `http`: one HTTP request, as curl sends it;
//! - `browser`: the web console in headless Chromium, through WebDriver;
//! - `member`: a consumer-group member polling in a task;
//! - `mock_cluster`: librdkafka's mock Kafka cluster of several brokers;
//! - `process`: a command run as a process, with input on its stdin or its
//!   log collected (and kept, with `STRATA_TEST_KEEP`);
//! - `wait`: waiting for a condition, with a limit;
//! - `rng`: reproducible pseudo-random data.

#![allow(dead_code, reason = "each test file uses a different subset")]
#![allow(unused_imports, reason = "each test file uses a different subset")]

pub mod broker;
pub mod browser;
pub mod certs;
pub mod example;
pub mod http;
pub mod log;
pub mod member;
pub mod mock_cluster;
pub mod process;
pub mod records;
pub mod rng;
pub mod secured_broker;
pub mod server_process;
pub mod wait;
pub mod wire;
pub mod wordcount;

pub use broker::InProcessBroker;
pub use log::{
    append_and_decode, append_keyed, append_keyed_batches, append_values, read_all, read_committed,
    read_text_sorted, segment_bases, segment_logs, small_config, with_topic,
};
pub use mock_cluster::MockCluster;
pub use records::{
    CODECS, Stored, TIMESTAMP_MS, as_stored, batch, batch_with, decode, decode_committed,
    one_record, producer_batch, values,
};
pub use rng::Rng;
pub use server_process::ServerProcess;
pub use wait::{wait_for, wait_until};
