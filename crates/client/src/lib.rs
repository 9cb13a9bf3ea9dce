//! A Kafka-protocol client in pure Rust, for strata and for any Kafka
//! cluster: connections with API-version negotiation, metadata and leader
//! routing with retries ([`Cluster`]), a batching, idempotent
//! [`Producer`], the pull-loop [`Fetcher`], a group-aware [`Consumer`],
//! and [`Admin`].

mod aborted;
mod acls;
mod admin;
mod append;
mod authenticate;
mod cluster;
mod connection;
mod consumer;
mod coordinator;
pub mod error;
mod fetcher;
/// Group membership for any protocol: what the consumer and strata-runtime's
/// task groups are built on; not an API of its own.
#[doc(hidden)]
pub mod membership;
pub mod partitioner;
mod produce_frame;
mod producer;
mod producer_id;
pub mod security;
mod tls;
pub mod transactional;

pub use aborted::AbortedFilter;
pub use admin::{
    Admin, Committed, GroupDescription, GroupListing, GroupMemberDescription, GroupPartitionLag,
    PartitionOffsets, ScramAlteration, ScramCredentialInfo, TopicDescription, UserScramCredentials,
};
pub use append::append_batch;
pub use cluster::{ClientConfig, Cluster, PartitionInfo, TopicInfo};
pub use connection::{Connection, PendingResponse};
pub use consumer::{
    Assignor, Consumer, ConsumerConfig, ConsumerRecord, OffsetReset, PartitionLag, Rebalance,
    RebalanceListener, Seek, TopicPartition,
};
/// The consumer protocol's pieces strata-runtime's group protocol reuses.
#[doc(hidden)]
pub use consumer::{
    CONSUMER, decode_assignment_with, decode_subscription_with, encode_assignment_with,
    encode_subscription_with, partition_counts,
};
#[doc(hidden)]
pub use consumer::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
pub use error::{Broken, ClientError};
pub use fetcher::{EARLIEST, FetchOptions, Fetched, Fetcher, LATEST};
pub use producer::{
    Acks, DeliveryFuture, Producer, ProducerConfig, ProducerRecord, RecordMetadata,
};
pub use producer_id::init_producer_id;
pub use security::{ClientSecurity, Password, SecurityConfigError};
pub use transactional::Transactional;
