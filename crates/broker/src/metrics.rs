//! Prometheus metrics: request counts, time and a latency histogram per API
//! (from the moment a request is taken up to its response being ready:
//! handling, and an acks=all answer's wait for its fdatasync), bytes in and
//! out,
//! the state of the broker's limits (requests in flight, request and
//! response bytes held in memory, waits for the request memory budget and
//! for the budget of frames read before authentication),
//! fetch long-polls (waiting now, woken by appends), each partition's
//! offsets and size, and each consumer group's committed offset and lag per
//! partition, served as text on `GET /metrics` when `--metrics ADDR` is
//! given (through [`strata_protocol::metrics_endpoint`]).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::group::GroupCoordinator;
use super::latency::LatencyHistogram;
use strata_log::LogManager;

/// API keys counted individually (Kafka's keys are small integers).
const API_KEYS_MAX: usize = 128;

pub struct Metrics {
    requests: [AtomicU64; API_KEYS_MAX],
    request_micros: [AtomicU64; API_KEYS_MAX],
    request_latency: [LatencyHistogram; API_KEYS_MAX],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    /// Gauge: requests read and not yet answered, all connections.
    pub(crate) requests_in_flight: AtomicU64,
    /// Gauge: request frame bytes held (reserved from the request memory
    /// budget), all connections.
    pub(crate) request_bytes_buffered: AtomicU64,
    /// Counter: times a connection paused reading because the request
    /// memory budget was spent.
    pub(crate) request_memory_waits: AtomicU64,
    /// Gauge: request frame bytes held for connections that have not
    /// authenticated (none of them from the request memory budget).
    pub(crate) pre_auth_request_bytes_buffered: AtomicU64,
    /// Counter: times a connection that has not authenticated paused
    /// reading because the pre-authentication budget was spent.
    pub(crate) pre_auth_memory_waits: AtomicU64,
    /// Gauge: response bytes held in memory, produced and not yet written
    /// (file ranges sent with sendfile are not held, so not counted).
    pub(crate) response_bytes_buffered: AtomicU64,
    /// Gauge: fetches waiting for an append or their deadline.
    pub(crate) fetches_waiting: AtomicU64,
    /// Counter: waiting fetches woken by an append to a partition they read.
    pub(crate) fetch_wakeups: AtomicU64,
    /// Counter: connections closed because their TLS handshake failed or
    /// did not finish in time.
    pub(crate) tls_handshake_failures: AtomicU64,
    /// Counter: SASL authentications that succeeded, and that failed.
    pub(crate) sasl_authentications: AtomicU64,
    pub(crate) sasl_authentication_failures: AtomicU64,
    /// Counter: connections closed because they had not authenticated
    /// within the login timeout.
    pub(crate) sasl_login_timeouts: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests: std::array::from_fn(|_| AtomicU64::new(0)),
            request_micros: std::array::from_fn(|_| AtomicU64::new(0)),
            request_latency: std::array::from_fn(|_| LatencyHistogram::default()),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            requests_in_flight: AtomicU64::new(0),
            request_bytes_buffered: AtomicU64::new(0),
            request_memory_waits: AtomicU64::new(0),
            pre_auth_request_bytes_buffered: AtomicU64::new(0),
            pre_auth_memory_waits: AtomicU64::new(0),
            response_bytes_buffered: AtomicU64::new(0),
            fetches_waiting: AtomicU64::new(0),
            fetch_wakeups: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            sasl_authentications: AtomicU64::new(0),
            sasl_authentication_failures: AtomicU64::new(0),
            sasl_login_timeouts: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Records one handled request.
    pub fn observe(&self, api_key: i16, elapsed: Duration, bytes_in: u64, bytes_out: u64) {
        if let Ok(i) = usize::try_from(api_key)
            && i < API_KEYS_MAX
        {
            self.requests[i].fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            self.request_micros[i].fetch_add(micros, Ordering::Relaxed);
            self.request_latency[i].observe(micros);
        }
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self, log: &LogManager, groups: &GroupCoordinator) -> String {
        let mut out = String::new();
        // Each family's lines together, as the text format requires.
        let served: Vec<(usize, String)> = (0..API_KEYS_MAX)
            .filter(|&i| self.requests[i].load(Ordering::Relaxed) > 0)
            .map(|i| {
                let api = i16::try_from(i)
                    .ok()
                    .and_then(|k| ApiKey::try_from(k).ok())
                    .map_or_else(|| format!("{i}"), |k| format!("{k:?}"));
                (i, api)
            })
            .collect();
        let _ = writeln!(out, "# TYPE strata_requests_total counter");
        for (i, api) in &served {
            let count = self.requests[*i].load(Ordering::Relaxed);
            let _ = writeln!(out, "strata_requests_total{{api=\"{api}\"}} {count}");
        }
        let _ = writeln!(out, "# TYPE strata_request_seconds_total counter");
        for (i, api) in &served {
            let seconds = self.request_micros[*i].load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "strata_request_seconds_total{{api=\"{api}\"}} {seconds}"
            );
        }
        let _ = writeln!(out, "# TYPE strata_request_latency_seconds histogram");
        for (i, api) in &served {
            self.request_latency[*i].render(
                &mut out,
                "strata_request_latency_seconds",
                &format!("api=\"{api}\""),
            );
        }
        let _ = writeln!(out, "# TYPE strata_bytes_in_total counter");
        let _ = writeln!(
            out,
            "strata_bytes_in_total {}",
            self.bytes_in.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# TYPE strata_bytes_out_total counter");
        let _ = writeln!(
            out,
            "strata_bytes_out_total {}",
            self.bytes_out.load(Ordering::Relaxed)
        );
        for (name, kind, value) in [
            (
                "strata_requests_in_flight",
                "gauge",
                &self.requests_in_flight,
            ),
            (
                "strata_request_bytes_buffered",
                "gauge",
                &self.request_bytes_buffered,
            ),
            (
                "strata_request_memory_waits_total",
                "counter",
                &self.request_memory_waits,
            ),
            (
                "strata_pre_auth_request_bytes_buffered",
                "gauge",
                &self.pre_auth_request_bytes_buffered,
            ),
            (
                "strata_pre_auth_memory_waits_total",
                "counter",
                &self.pre_auth_memory_waits,
            ),
            (
                "strata_response_bytes_buffered",
                "gauge",
                &self.response_bytes_buffered,
            ),
            ("strata_fetches_waiting", "gauge", &self.fetches_waiting),
            ("strata_fetch_wakeups_total", "counter", &self.fetch_wakeups),
            (
                "strata_tls_handshake_failures_total",
                "counter",
                &self.tls_handshake_failures,
            ),
            (
                "strata_sasl_authentications_total",
                "counter",
                &self.sasl_authentications,
            ),
            (
                "strata_sasl_authentication_failures_total",
                "counter",
                &self.sasl_authentication_failures,
            ),
            (
                "strata_sasl_login_timeouts_total",
                "counter",
                &self.sasl_login_timeouts,
            ),
        ] {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        let partitions: Vec<(String, std::sync::Arc<strata_log::PartitionLog>)> = log
            .topics()
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .enumerate()
                    .map(move |(p, partition)| {
                        let labels = format!("topic=\"{}\",partition=\"{p}\"", topic.name());
                        (labels, std::sync::Arc::clone(partition))
                    })
            })
            .collect();
        type Gauge = fn(&strata_log::PartitionLog) -> u64;
        let gauges: [(&str, Gauge); 3] = [
            ("strata_log_end_offset", |p| {
                p.log_end_offset().max(0) as u64
            }),
            ("strata_log_start_offset", |p| {
                p.log_start_offset().max(0) as u64
            }),
            ("strata_log_size_bytes", |p| p.size_bytes()),
        ];
        for (name, value) in gauges {
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (labels, partition) in &partitions {
                let _ = writeln!(out, "{name}{{{labels}}} {}", value(partition));
            }
        }
        render_group_lag(&mut out, log, groups);
        out
    }
}

/// Committed offset and lag (log end offset minus committed offset) of
/// every group on every partition it committed for.
fn render_group_lag(out: &mut String, log: &LogManager, groups: &GroupCoordinator) {
    let committed = match groups.committed_everywhere() {
        Ok(committed) => committed,
        Err(error) => {
            tracing::warn!("reading committed offsets for metrics: {error}");
            return;
        }
    };
    let mut rows = Vec::new();
    for (group, entry) in committed {
        let Some(partition) = log
            .topic(&entry.topic)
            .and_then(|t| t.partition(entry.partition))
        else {
            continue;
        };
        let labels = format!(
            "group=\"{}\",topic=\"{}\",partition=\"{}\"",
            escape_label(&group),
            entry.topic,
            entry.partition
        );
        let offset = entry.committed.offset;
        let lag = (partition.log_end_offset() - offset.max(0)).max(0);
        rows.push((labels, offset, lag));
    }
    let _ = writeln!(out, "# TYPE strata_group_committed_offset gauge");
    for (labels, offset, _) in &rows {
        let _ = writeln!(out, "strata_group_committed_offset{{{labels}}} {offset}");
    }
    let _ = writeln!(out, "# TYPE strata_group_lag gauge");
    for (labels, _, lag) in &rows {
        let _ = writeln!(out, "strata_group_lag{{{labels}}} {lag}");
    }
}

/// Group ids are arbitrary strings; Prometheus label values escape `\`,
/// `"` and newlines.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
