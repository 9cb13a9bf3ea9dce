//! Broker settings and their named limits.

use std::net::SocketAddr;

use crate::log::LogConfig;

/// How a broker listens and what it allows.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Host clients are told to connect to (127.0.0.1 by default: librdkafka
    /// resolves `localhost` to ::1 first).
    pub advertised_host: String,
    /// This broker's node id (a single broker is node 0).
    pub node_id: i32,
    /// Largest request frame accepted; a larger size prefix closes the
    /// connection before anything is allocated.
    pub request_bytes_max: usize,
    /// Connections served at once; more wait in the accept queue.
    pub connections_max: usize,
    /// Create unknown topics when a client's Metadata request allows it.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic.
    pub default_partitions: i32,
    /// Per-topic log defaults.
    pub log: LogConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_host: "127.0.0.1".to_string(),
            node_id: 0,
            request_bytes_max: 100 << 20,
            connections_max: 1024,
            auto_create_topics: true,
            default_partitions: 1,
            log: LogConfig::default(),
        }
    }
}
