//! Broker settings and their named limits.
//!
//! Every limit a client can run into is a field of [`BrokerConfig`], settable
//! in `strata.toml` ([`ConfigFile`]) under the key named in its doc, and
//! listed with its default and what happens at the limit in the README's
//! limits table. [`BrokerConfig::check`] refuses combinations that could
//! never serve (a request memory budget smaller than one largest request).

use std::net::SocketAddr;

use super::auth::{SaslSettings, TlsSettings};
use super::listener::{self, ListenerConfig, SecurityProtocol};
use super::security_config::{ListenerTable, SaslTable, TlsTable};
use strata_log::LogConfig;

/// Pause after a failed accept (e.g. out of file descriptors), on the Kafka
/// listener as on every HTTP listener.
pub(crate) use strata_http::ACCEPT_RETRY_DELAY;

/// Connections the kernel holds for the Kafka listener until the broker
/// accepts them (the `listen` backlog; Linux caps it at
/// `net.core.somaxconn`, 4096 by default). Clients past `connections_max`
/// wait there; a connect finding it full has its handshake dropped and is
/// retried by the client's kernel after a second or more, and a
/// handshake completed on the client's side but dropped on the broker's
/// leaves a connection that only the client believes in. The standard
/// library's (and tokio's) 128 made a burst of a few hundred connections
/// beyond the limit do both.
pub const LISTEN_BACKLOG: u32 = 4096;

/// How a broker listens and what it allows.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Address of the one PLAINTEXT listener when `listeners` is empty;
    /// port 0 picks a free one.
    pub listen: SocketAddr,
    /// Listeners by name, each with its security protocol; empty means one
    /// PLAINTEXT listener on `listen`. Key `[[listeners]]`.
    pub listeners: Vec<ListenerConfig>,
    /// The broker's certificate and key, and the CAs of client
    /// certificates, for SSL and SASL_SSL listeners. Key `[tls]`.
    pub tls: Option<TlsSettings>,
    /// Lets a listener that does not authenticate bind beyond loopback.
    /// Off by default: such a listener gives anyone who reaches it every
    /// topic. Key `allow_unauthenticated_remote`.
    pub allow_unauthenticated_remote: bool,
    /// What SASL_PLAINTEXT and SASL_SSL listeners accept. Key `[sasl]`.
    pub sasl: SaslSettings,
    /// Where to serve Prometheus metrics; off when `None`. Beyond loopback
    /// only with `metrics_tls` and `metrics_token_file`, or with
    /// `allow_unauthenticated_remote`.
    pub metrics_listen: Option<SocketAddr>,
    /// Serve the metrics over TLS, with the `[tls]` certificate and key.
    /// Key `metrics_tls`.
    pub metrics_tls: bool,
    /// A file whose first line is the token a scrape must carry
    /// (`Authorization: Bearer TOKEN`). Key `metrics_token_file`.
    pub metrics_token_file: Option<std::path::PathBuf>,
    /// Also admit, on the metrics and console endpoints, a user's name and
    /// password by HTTP Basic, checked against the SCRAM credentials, for a
    /// user allowed DESCRIBE on the cluster. Key `metrics_basic_auth`.
    pub metrics_basic_auth: bool,
    /// Where to serve the web console (with its own `/metrics`); off when
    /// `None`. Secured as the metrics are. Key `console`.
    pub console_listen: Option<SocketAddr>,
    /// Host clients are told to connect to (127.0.0.1 by default: librdkafka
    /// resolves `localhost` to ::1 first).
    pub advertised_host: String,
    /// This broker's node id (a single broker is node 0).
    pub node_id: i32,
    /// Largest request frame accepted; a larger size prefix closes the
    /// connection before anything is allocated. Key `request_bytes_max`.
    pub request_bytes_max: usize,
    /// Bytes of request frames held at once, across all connections: a
    /// frame's size is reserved from this budget before its buffer is
    /// allocated and released once the request is answered. When the budget
    /// is spent, connections stop reading (TCP backpressure) until earlier
    /// requests are answered; nothing fails. At least `request_bytes_max`.
    /// Key `request_memory_bytes_max`.
    pub request_memory_bytes_max: usize,
    /// Requests one connection may have read and not yet answered (Kafka's
    /// client setting of the same idea is `max.in.flight.requests.per.connection`,
    /// default 5). The connection reads ahead up to this many requests while
    /// an earlier one is handled; it still handles them one at a time and
    /// answers in order. At the limit it stops reading the socket. 1 turns
    /// read-ahead off. Key `in_flight_requests_max`.
    pub in_flight_requests_max: usize,
    /// Connections served at once; more wait in the accept queue (up to
    /// [`LISTEN_BACKLOG`]). Key `connections_max`.
    pub connections_max: usize,
    /// Create unknown topics when a client's Metadata request allows it.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic.
    pub default_partitions: i32,
    /// A connection with no request in flight and none arriving is closed
    /// after between one and two times this (one timer per connection, not
    /// per request; Kafka's `connections.max.idle.ms`), so idle clients
    /// cannot hold every slot. Key `connection_idle_timeout_ms`.
    pub connection_idle_timeout: std::time::Duration,
    /// A request frame whose bytes stop arriving, or a response the client
    /// stops reading, for this long closes the connection, releasing the
    /// request memory it holds (progress resets the clock: a slow but
    /// moving transfer is never cut). Key `socket_stall_timeout_ms`.
    pub socket_stall_timeout: std::time::Duration,
    /// How long a shutdown waits for connections to finish their request
    /// before closing them regardless (a client that stops reading must not
    /// keep the broker up). Key `shutdown_grace_ms`.
    pub shutdown_grace: std::time::Duration,
    /// How often segments past retention are deleted.
    pub retention_check_interval: std::time::Duration,
    /// An idempotent producer idle this long is forgotten (Kafka's
    /// `producer.id.expiration.ms`), at the next retention pass; as in
    /// Kafka, never while it has a transaction open in the partition.
    pub producer_id_expiration: std::time::Duration,
    /// How often the `flush.ms` policy is applied.
    pub flush_check_interval: std::time::Duration,
    /// Per-topic log defaults.
    pub log: LogConfig,
    /// Consumer-group timing rules.
    pub groups: crate::group::GroupConfig,
    /// Transaction timeouts.
    pub transactions: crate::txn::TxnConfig,
    /// How often compacted topics are checked for a clean (Kafka's
    /// `log.cleaner.backoff.ms`).
    pub cleaner_check_interval: std::time::Duration,
    /// How often committed offsets are checked for expiry (Kafka's
    /// `offsets.retention.check.interval.ms`); the retention itself is
    /// `groups.offsets_retention`.
    pub offsets_retention_check_interval: std::time::Duration,
    /// The cleaner's memory and I/O budgets.
    pub cleaner: strata_log::CleanerConfig,
    /// Principals allowed everything, whatever the ACLs say (Kafka's
    /// `super.users`). Key `super_users = ["User:admin"]`.
    pub super_users: Vec<crate::auth::Principal>,
    /// Callers on listeners that do not authenticate are allowed whatever
    /// no DENY refuses, even once ACLs exist. Off by default, as Kafka's
    /// `allow.everyone.if.no.acl.found = false`: once any ACL exists,
    /// `User:ANONYMOUS` gets only what ACLs allow.
    pub trust_unauthenticated_listeners: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            listeners: Vec::new(),
            tls: None,
            allow_unauthenticated_remote: false,
            sasl: SaslSettings::default(),
            advertised_host: "127.0.0.1".to_string(),
            metrics_listen: None,
            metrics_tls: false,
            metrics_token_file: None,
            metrics_basic_auth: false,
            console_listen: None,
            node_id: 0,
            request_bytes_max: 100 << 20,
            request_memory_bytes_max: 256 << 20,
            in_flight_requests_max: 5,
            connections_max: 1024,
            auto_create_topics: true,
            default_partitions: 1,
            connection_idle_timeout: std::time::Duration::from_secs(600),
            socket_stall_timeout: std::time::Duration::from_secs(60),
            shutdown_grace: std::time::Duration::from_secs(10),
            retention_check_interval: std::time::Duration::from_secs(300),
            producer_id_expiration: std::time::Duration::from_millis(
                strata_log::PRODUCER_EXPIRATION_MS as u64,
            ),
            flush_check_interval: std::time::Duration::from_secs(1),
            log: LogConfig::default(),
            groups: crate::group::GroupConfig::default(),
            transactions: crate::txn::TxnConfig::default(),
            cleaner_check_interval: std::time::Duration::from_secs(15),
            offsets_retention_check_interval: crate::group::OFFSETS_RETENTION_CHECK_DEFAULT,
            cleaner: strata_log::CleanerConfig::default(),
            super_users: Vec::new(),
            trust_unauthenticated_listeners: false,
        }
    }
}

/// `strata.toml`: every key optional; topic defaults under Kafka's names.
///
/// ```toml
/// listen = "127.0.0.1:9092"
/// advertised_host = "127.0.0.1"
/// data_dir = "./strata-data"
/// auto_create_topics = true
/// default_partitions = 3
/// request_bytes_max = 104857600         # largest request frame
/// request_memory_bytes_max = 268435456  # request bytes held, all connections
/// in_flight_requests_max = 5            # read-ahead per connection
/// connections_max = 1024
/// connection_idle_timeout_ms = 600000
/// socket_stall_timeout_ms = 60000
/// shutdown_grace_ms = 10000
/// retention_check_interval_ms = 300000
/// producer_id_expiration_ms = 86400000  # idle idempotent producers forgotten
/// offsets_retention_ms = 604800000      # committed offsets outlive their group's members
/// super_users = ["User:admin"]          # allowed everything, whatever the ACLs
/// trust_unauthenticated_listeners = false  # true: PLAINTEXT callers allowed unless denied
/// metrics = "127.0.0.1:9100"            # beyond loopback: metrics_tls and a token file
/// metrics_tls = false                   # serve /metrics with the [tls] certificate
/// metrics_token_file = "/etc/strata/metrics-token"
/// metrics_basic_auth = false           # true: HTTP Basic with a SCRAM user's password too
/// console = "127.0.0.1:9101"            # the web console, secured as the metrics
///
/// [topic_defaults]
/// "retention.ms" = 604800000
/// "segment.bytes" = 1073741824
/// ```
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub listen: Option<SocketAddr>,
    #[serde(default)]
    pub listeners: Vec<ListenerTable>,
    pub tls: Option<TlsTable>,
    pub sasl: Option<SaslTable>,
    pub allow_unauthenticated_remote: Option<bool>,
    pub metrics: Option<SocketAddr>,
    pub metrics_tls: Option<bool>,
    pub metrics_token_file: Option<std::path::PathBuf>,
    pub metrics_basic_auth: Option<bool>,
    pub console: Option<SocketAddr>,
    pub advertised_host: Option<String>,
    pub data_dir: Option<std::path::PathBuf>,
    pub auto_create_topics: Option<bool>,
    pub default_partitions: Option<i32>,
    pub request_bytes_max: Option<usize>,
    pub request_memory_bytes_max: Option<usize>,
    pub in_flight_requests_max: Option<usize>,
    pub connections_max: Option<usize>,
    pub connection_idle_timeout_ms: Option<u64>,
    pub socket_stall_timeout_ms: Option<u64>,
    pub shutdown_grace_ms: Option<u64>,
    pub retention_check_interval_ms: Option<u64>,
    pub producer_id_expiration_ms: Option<u64>,
    /// How long a new group's first rebalance waits for more members
    /// (Kafka's `group.initial.rebalance.delay.ms`; default 3000).
    pub group_initial_rebalance_delay_ms: Option<u64>,
    /// Smallest and largest session timeout a group member may ask for
    /// (defaults 6000 and 1800000, as Kafka's).
    pub group_min_session_timeout_ms: Option<u64>,
    pub group_max_session_timeout_ms: Option<u64>,
    /// How long committed offsets outlive their group's members (Kafka's
    /// `offsets.retention.minutes`, here in ms; default 7 days).
    pub offsets_retention_ms: Option<u64>,
    /// Kafka's `offsets.retention.check.interval.ms` (default 600000).
    pub offsets_retention_check_interval_ms: Option<u64>,
    /// Kafka's `log.cleaner.backoff.ms`.
    pub cleaner_check_interval_ms: Option<u64>,
    /// Kafka's `log.cleaner.io.max.bytes.per.second`.
    pub cleaner_io_bytes_per_second: Option<u64>,
    /// Kafka's `log.cleaner.dedupe.buffer.size`.
    pub cleaner_map_bytes: Option<usize>,
    /// Kafka's `transaction.max.timeout.ms`.
    pub transaction_max_timeout_ms: Option<i32>,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_check_interval_ms: Option<u64>,
    /// Principals allowed everything (Kafka's `super.users`), as
    /// `Kind:name`.
    pub super_users: Option<Vec<String>>,
    /// Callers on listeners that do not authenticate are allowed whatever
    /// no DENY refuses, even once ACLs exist (default false).
    pub trust_unauthenticated_listeners: Option<bool>,
    #[serde(default)]
    pub topic_defaults: std::collections::BTreeMap<String, toml::Value>,
}

/// Smallest request size limit accepted (a Metadata request must fit).
const REQUEST_BYTES_MIN: usize = 1024;
/// Largest request size limit accepted: a frame's size prefix is an i32.
const REQUEST_BYTES_LIMIT: usize = i32::MAX as usize;
/// Largest request memory budget accepted (tokio's semaphore counts up to
/// `usize::MAX >> 3` permits; 1 TiB is far past any real machine).
const REQUEST_MEMORY_BYTES_LIMIT: usize = 1 << 40;
/// Largest per-connection read-ahead accepted.
const IN_FLIGHT_REQUESTS_LIMIT: usize = 1000;

impl BrokerConfig {
    /// The listeners to open: those configured, or one PLAINTEXT listener
    /// on `listen`.
    pub fn effective_listeners(&self) -> Vec<ListenerConfig> {
        if self.listeners.is_empty() {
            vec![ListenerConfig::new(
                SecurityProtocol::Plaintext,
                self.listen,
            )]
        } else {
            self.listeners.clone()
        }
    }

    /// What the configuration allows but should not be left so, one
    /// sentence each (logged when a broker binds).
    pub fn warnings(&self) -> Vec<String> {
        listener::listener_warnings(&self.effective_listeners(), &self.sasl.mechanisms)
    }

    /// Checks the limits against each other; the message names the keys.
    pub fn check(&self) -> Result<(), String> {
        listener::check_listeners(
            &self.effective_listeners(),
            self.tls.as_ref(),
            self.allow_unauthenticated_remote,
        )?;
        if !(REQUEST_BYTES_MIN..=REQUEST_BYTES_LIMIT).contains(&self.request_bytes_max) {
            return Err(format!(
                "request_bytes_max = {} is outside {REQUEST_BYTES_MIN}..={REQUEST_BYTES_LIMIT}",
                self.request_bytes_max
            ));
        }
        if self.request_memory_bytes_max < self.request_bytes_max {
            return Err(format!(
                "request_memory_bytes_max = {} is below request_bytes_max = {}: \
                 a request of the largest allowed size could never be read",
                self.request_memory_bytes_max, self.request_bytes_max
            ));
        }
        if self.request_memory_bytes_max > REQUEST_MEMORY_BYTES_LIMIT {
            return Err(format!(
                "request_memory_bytes_max = {} is above {REQUEST_MEMORY_BYTES_LIMIT}",
                self.request_memory_bytes_max
            ));
        }
        if !(1..=IN_FLIGHT_REQUESTS_LIMIT).contains(&self.in_flight_requests_max) {
            return Err(format!(
                "in_flight_requests_max = {} is outside 1..={IN_FLIGHT_REQUESTS_LIMIT}",
                self.in_flight_requests_max
            ));
        }
        if self.connections_max == 0 {
            return Err("connections_max must be at least 1".into());
        }
        for (key, duration) in [
            ("connection_idle_timeout_ms", self.connection_idle_timeout),
            ("socket_stall_timeout_ms", self.socket_stall_timeout),
            ("retention_check_interval_ms", self.retention_check_interval),
            ("producer_id_expiration_ms", self.producer_id_expiration),
            ("flush_check_interval", self.flush_check_interval),
        ] {
            if duration.is_zero() {
                return Err(format!("{key} must be at least 1 ms"));
            }
        }
        Ok(())
    }
}

impl ConfigFile {
    /// Parses the file's text; unknown keys are errors.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Applies the file over `config`, validating every value.
    pub fn apply(&self, config: &mut BrokerConfig) -> Result<(), String> {
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if !self.listeners.is_empty() {
            if self.listen.is_some() {
                return Err(
                    "set either listen (one PLAINTEXT listener) or [[listeners]], not both".into(),
                );
            }
            config.listeners = self
                .listeners
                .iter()
                .map(ListenerTable::to_config)
                .collect::<Result<_, _>>()?;
        }
        if let Some(tls) = &self.tls {
            config.tls = Some(tls.to_settings()?);
        }
        if let Some(sasl) = &self.sasl {
            sasl.apply(&mut config.sasl)?;
        }
        if let Some(allow) = self.allow_unauthenticated_remote {
            config.allow_unauthenticated_remote = allow;
        }
        if let Some(tls) = self.metrics_tls {
            config.metrics_tls = tls;
        }
        if let Some(path) = &self.metrics_token_file {
            config.metrics_token_file = Some(path.clone());
        }
        if let Some(metrics) = self.metrics {
            config.metrics_listen = Some(metrics);
        }
        if let Some(basic) = self.metrics_basic_auth {
            config.metrics_basic_auth = basic;
        }
        if let Some(console) = self.console {
            config.console_listen = Some(console);
        }
        if let Some(host) = &self.advertised_host {
            config.advertised_host = host.clone();
        }
        if let Some(auto) = self.auto_create_topics {
            config.auto_create_topics = auto;
        }
        if let Some(partitions) = self.default_partitions {
            if !(1..=strata_log::PARTITIONS_MAX).contains(&partitions) {
                return Err(format!("default_partitions = {partitions} is out of range"));
            }
            config.default_partitions = partitions;
        }
        if let Some(bytes) = self.request_bytes_max {
            config.request_bytes_max = bytes;
        }
        if let Some(bytes) = self.request_memory_bytes_max {
            config.request_memory_bytes_max = bytes;
        }
        if let Some(requests) = self.in_flight_requests_max {
            config.in_flight_requests_max = requests;
        }
        if let Some(connections) = self.connections_max {
            config.connections_max = connections;
        }
        let millis = std::time::Duration::from_millis;
        if let Some(delay) = self.group_initial_rebalance_delay_ms {
            config.groups.initial_rebalance_delay = millis(delay);
        }
        if let Some(min) = self.group_min_session_timeout_ms {
            config.groups.session_timeout_min = millis(min);
        }
        if let Some(max) = self.group_max_session_timeout_ms {
            config.groups.session_timeout_max = millis(max);
        }
        if let Some(ms) = self.offsets_retention_ms {
            config.groups.offsets_retention = millis(ms);
        }
        if let Some(ms) = self.offsets_retention_check_interval_ms {
            if ms == 0 {
                return Err("offsets_retention_check_interval_ms must be positive".into());
            }
            config.offsets_retention_check_interval = millis(ms);
        }
        if config.groups.session_timeout_min > config.groups.session_timeout_max {
            return Err(format!(
                "group_min_session_timeout_ms ({} ms) exceeds group_max_session_timeout_ms ({} ms)",
                config.groups.session_timeout_min.as_millis(),
                config.groups.session_timeout_max.as_millis()
            ));
        }
        if let Some(ms) = self.cleaner_check_interval_ms {
            if ms == 0 {
                return Err("cleaner_check_interval_ms must be positive".into());
            }
            config.cleaner_check_interval = millis(ms);
        }
        if let Some(rate) = self.cleaner_io_bytes_per_second {
            if rate == 0 {
                return Err("cleaner_io_bytes_per_second must be positive".into());
            }
            config.cleaner.io_bytes_per_second = rate;
        }
        if let Some(bytes) = self.cleaner_map_bytes {
            if bytes < 1 << 20 {
                return Err("cleaner_map_bytes must be at least 1 MiB".into());
            }
            config.cleaner.map_bytes_max = bytes;
        }
        if let Some(ms) = self.transaction_max_timeout_ms {
            if ms < 1 {
                return Err(format!(
                    "transaction_max_timeout_ms = {ms} must be positive"
                ));
            }
            config.transactions.max_timeout_ms = ms;
        }
        if let Some(ms) = self.transaction_abort_check_interval_ms {
            if ms == 0 {
                return Err("transaction_abort_check_interval_ms must be positive".into());
            }
            config.transactions.abort_check_interval = millis(ms);
        }
        if let Some(ms) = self.connection_idle_timeout_ms {
            config.connection_idle_timeout = millis(ms);
        }
        if let Some(ms) = self.socket_stall_timeout_ms {
            config.socket_stall_timeout = millis(ms);
        }
        if let Some(ms) = self.shutdown_grace_ms {
            config.shutdown_grace = millis(ms);
        }
        if let Some(ms) = self.retention_check_interval_ms {
            config.retention_check_interval = millis(ms);
        }
        if let Some(ms) = self.producer_id_expiration_ms {
            config.producer_id_expiration = millis(ms);
        }
        if let Some(principals) = &self.super_users {
            config.super_users = principals
                .iter()
                .map(|p| crate::auth::Principal::parse(p))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("super_users: {e}"))?;
        }
        if let Some(trust) = self.trust_unauthenticated_listeners {
            config.trust_unauthenticated_listeners = trust;
        }
        for (key, value) in &self.topic_defaults {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            config
                .log
                .apply(key, &text)
                .map_err(|e| format!("[topic_defaults] {e}"))?;
        }
        config.check()
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
