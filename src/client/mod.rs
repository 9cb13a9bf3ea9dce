//! A Kafka-protocol client in pure Rust, for strata and for any Kafka
//! cluster: connections with API-version negotiation, metadata and leader
//! routing with retries ([`Cluster`]), a batching, idempotent
//! [`Producer`], the pull-loop [`Fetcher`], and [`Admin`].

mod admin;
mod cluster;
mod connection;
pub mod error;
mod fetcher;
pub mod partitioner;
mod producer;

pub use admin::{
    Admin, GroupDescription, GroupListing, GroupMemberDescription, GroupPartitionLag,
    PartitionOffsets, TopicDescription,
};
pub use cluster::{ClientConfig, Cluster, PartitionInfo, TopicInfo};
pub use connection::Connection;
pub use error::ClientError;
pub use fetcher::{EARLIEST, FetchOptions, Fetched, Fetcher, LATEST};
pub use producer::{
    Acks, DeliveryFuture, Producer, ProducerConfig, ProducerRecord, RecordMetadata,
};
