//! Prometheus metrics: request counts, time and a latency histogram per API
//! (from the moment a request is taken up to its response being ready:
//! handling, and an acks=all answer's wait for its fdatasync), bytes in and
//! out,
//! the state of the broker's limits (requests in flight, request and
//! response bytes held in memory, waits for the request memory budget and
//! for the budget of frames read before authentication),
//! fetch long-polls (waiting now, woken by appends), each partition's
//! offsets, size and how far back it reaches, and each consumer group's committed offset and lag per
//! partition, served on `GET /metrics` when `--metrics ADDR` is given
//! (through strata-http, which writes each family with its HELP and
//! TYPE).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use strata_http::Families;

use super::acl::Authorizer;
use super::group::GroupCoordinator;
use super::txn::TxnCoordinator;
use strata_http::LatencyHistogram;
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
    /// (file ranges sent with sendfile are not held, so not counted; nor
    /// are those of a small response, read in as it is written).
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

    /// Writes every family: requests and their time per API, bytes, the
    /// limits' state, transactions in flight, ACL refusals, each
    /// partition's offsets and size, each group's committed offset and lag.
    pub fn write(
        &self,
        families: &mut Families<'_>,
        (log, groups): (&LogManager, &GroupCoordinator),
        (transactions, authorizer): (&TxnCoordinator, &Authorizer),
    ) -> fmt::Result {
        // The APIs served so far, by name.
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
        let per_api = |value: &dyn Fn(usize) -> u64| {
            (served.iter())
                .map(|(i, api)| ([("api", api.clone())], value(*i)))
                .collect::<Vec<_>>()
        };
        families.counters(
            "strata_requests_total",
            "Requests answered, by API.",
            per_api(&|i| self.requests[i].load(Ordering::Relaxed)),
        )?;
        families.counters(
            "strata_request_seconds_total",
            "Time from taking a request up to its answer being ready, summed, by API.",
            (served.iter()).map(|(i, api)| {
                let micros = self.request_micros[*i].load(Ordering::Relaxed);
                ([("api", api.clone())], micros as f64 / 1e6)
            }),
        )?;
        families.histograms(
            "strata_request_latency_seconds",
            "Time from taking a request up to its answer being ready, by API.",
            (served.iter())
                .map(|(i, api)| ([("api", api.clone())], self.request_latency[*i].sample())),
        )?;
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        families.counter(
            "strata_bytes_in_total",
            "Request bytes read.",
            load(&self.bytes_in),
        )?;
        families.counter(
            "strata_bytes_out_total",
            "Response bytes written.",
            load(&self.bytes_out),
        )?;
        families.gauge(
            "strata_requests_in_flight",
            "Requests read and not yet answered, all connections.",
            load(&self.requests_in_flight),
        )?;
        families.gauge(
            "strata_request_bytes_buffered",
            "Request frame bytes held (reserved from the request memory budget).",
            load(&self.request_bytes_buffered),
        )?;
        families.counter(
            "strata_request_memory_waits_total",
            "Times a connection paused reading because the request memory budget was spent.",
            load(&self.request_memory_waits),
        )?;
        families.gauge(
            "strata_pre_auth_request_bytes_buffered",
            "Request frame bytes held for connections that have not authenticated.",
            load(&self.pre_auth_request_bytes_buffered),
        )?;
        families.counter(
            "strata_pre_auth_memory_waits_total",
            "Times an unauthenticated connection paused reading because its budget was spent.",
            load(&self.pre_auth_memory_waits),
        )?;
        families.gauge(
            "strata_response_bytes_buffered",
            "Response bytes produced and not yet written (sendfile ranges not counted, nor those of a small response read in to be written in one piece).",
            load(&self.response_bytes_buffered),
        )?;
        families.gauge(
            "strata_fetches_waiting",
            "Fetches waiting for an append or their deadline.",
            load(&self.fetches_waiting),
        )?;
        families.counter(
            "strata_fetch_wakeups_total",
            "Waiting fetches woken by an append to a partition they read.",
            load(&self.fetch_wakeups),
        )?;
        families.counter(
            "strata_tls_handshake_failures_total",
            "Connections closed because their TLS handshake failed or did not finish in time.",
            load(&self.tls_handshake_failures),
        )?;
        families.counter(
            "strata_sasl_authentications_total",
            "SASL authentications that succeeded.",
            load(&self.sasl_authentications),
        )?;
        families.counter(
            "strata_sasl_authentication_failures_total",
            "SASL authentications that failed.",
            load(&self.sasl_authentication_failures),
        )?;
        families.counter(
            "strata_sasl_login_timeouts_total",
            "Connections closed because they had not authenticated within the login timeout.",
            load(&self.sasl_login_timeouts),
        )?;
        let ongoing = (transactions.list().iter())
            .filter(|txn| !txn.state.is_idle())
            .count();
        families.gauge(
            "strata_transactions_ongoing",
            "Transactions begun and not yet complete (ongoing, or preparing to commit or abort).",
            ongoing as u64,
        )?;
        families.counter(
            "strata_authorization_denied_total",
            "Checks the ACLs refused: a request refused, or a resource a listing left out.",
            authorizer.denied(),
        )?;
        write_partitions(families, log)?;
        write_group_lag(families, log, groups)
    }
}

type PartitionLabels = [(&'static str, String); 2];

/// Each partition's end and start offsets and its size on disk.
fn write_partitions(families: &mut Families<'_>, log: &LogManager) -> fmt::Result {
    let partitions: Vec<(PartitionLabels, std::sync::Arc<strata_log::PartitionLog>)> =
        (log.topics().iter())
            .flat_map(|topic| {
                (topic.partitions.iter().enumerate()).map(move |(p, partition)| {
                    let labels = [
                        ("topic", topic.name().to_string()),
                        ("partition", p.to_string()),
                    ];
                    (labels, std::sync::Arc::clone(partition))
                })
            })
            .collect();
    type Gauge = fn(&strata_log::PartitionLog) -> u64;
    let gauges: [(&str, &str, Gauge); 3] = [
        (
            "strata_log_end_offset",
            "The offset the next record appended gets.",
            |p| p.log_end_offset().max(0) as u64,
        ),
        (
            "strata_log_start_offset",
            "The first offset still held (retention moves it).",
            |p| p.log_start_offset().max(0) as u64,
        ),
        (
            "strata_log_size_bytes",
            "Bytes of the partition's segments on disk.",
            |p| p.size_bytes(),
        ),
    ];
    for (name, help, value) in gauges {
        let samples =
            (partitions.iter()).map(|(labels, partition)| (labels.clone(), value(partition)));
        families.gauges(name, help, samples)?;
    }
    // How far back each partition reaches: its first batch's header, one
    // read per partition (none for an empty one).
    families.gauges(
        "strata_log_first_timestamp_seconds",
        "The newest timestamp of a partition's first batch (seconds since the epoch): how far back retention has left it reaching.",
        partitions.iter().filter_map(|(labels, partition)| {
            let start = partition.log_start_offset().max(0);
            let timestamp = partition.batch_timestamp_at(start).ok().flatten()?;
            Some((labels.clone(), timestamp as f64 / 1e3))
        }),
    )
}

/// Committed offset and lag (log end offset minus committed offset) of
/// every group on every partition it committed for.
fn write_group_lag(
    families: &mut Families<'_>,
    log: &LogManager,
    groups: &GroupCoordinator,
) -> fmt::Result {
    let committed = match groups.committed_everywhere() {
        Ok(committed) => committed,
        Err(error) => {
            tracing::warn!("reading committed offsets for metrics: {error}");
            Vec::new()
        }
    };
    let now = strata_log::now_ms();
    let mut rows = Vec::new();
    for (group, entry) in committed {
        let Some(partition) = log
            .topic(&entry.topic)
            .and_then(|t| t.partition(entry.partition))
        else {
            continue;
        };
        let labels = [
            ("group", group),
            ("topic", entry.topic.clone()),
            ("partition", entry.partition.to_string()),
        ];
        let offset = entry.committed.offset;
        let lag = (partition.log_end_offset() - offset.max(0)).max(0);
        // How old the next record the group has to read is (past the
        // log's start when retention deleted what it had not read); not
        // known, when the batch cannot be read.
        let seconds = match lag {
            0 => Some(0.0),
            _ => {
                let next = offset.max(partition.log_start_offset());
                let timestamp = partition.batch_timestamp_at(next).ok().flatten();
                timestamp.map(|t| (now - t).max(0) as f64 / 1e3)
            }
        };
        rows.push((labels, offset, lag, seconds));
    }
    families.gauges(
        "strata_group_committed_offset",
        "The offset a group committed on a partition.",
        rows.iter()
            .map(|(labels, offset, ..)| (labels.clone(), *offset)),
    )?;
    families.gauges(
        "strata_group_lag",
        "Records on a partition past a group's committed offset.",
        rows.iter()
            .map(|(labels, _, lag, _)| (labels.clone(), *lag)),
    )?;
    families.gauges(
        "strata_group_lag_seconds",
        "How old the next record a group has to read on a partition is: now less its batch's newest timestamp (0 when caught up).",
        rows.iter()
            .filter_map(|(labels, _, _, seconds)| Some((labels.clone(), (*seconds)?))),
    )
}
