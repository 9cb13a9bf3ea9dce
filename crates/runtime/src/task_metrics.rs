//! What a task counts as it runs, for `/metrics` (see `metrics`), named
//! after Kafka Streams' task metrics where one exists:
//!
//! | here | Kafka Streams |
//! |---|---|
//! | records and bytes consumed per input partition | records-consumed, bytes-consumed |
//! | records and bytes produced per output topic | records-produced, bytes-produced |
//! | processing time (with the records: the latency per record) | process-latency, process-rate |
//! | commits and their time | commit-rate, commit-latency |
//! | a derived record's age as it is appended | record-e2e-latency |
//! | records behind each input's end, and how old the record last processed is | records-lag |
//! | timers fired | punctuate-rate |
//! | transactions committed and aborted (remote) | — |
//! | state size, compaction behind, writes stalled (RocksDB) | rocksdb state metrics |
//!
//! Atomics, written per batch, per commit and per shipped batch, never per
//! record, so the per-record path pays nothing for them; a scrape reads
//! them from another thread.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use strata_http::LatencyHistogram;

/// A task's counters.
pub(crate) struct TaskMetrics {
    /// Per input, in the order of the task's inputs.
    pub inputs: Vec<InputMetrics>,
    /// Per output topic the task appends to.
    pub outputs: Vec<OutputMetrics>,
    /// Nanoseconds spent processing records (the processor and the
    /// runtime's bookkeeping around it, not fetching or committing).
    pub process_nanos: AtomicU64,
    pub commits: AtomicU64,
    pub commit_latency: LatencyHistogram,
    /// A derived record's age when appended: now less its batch's newest
    /// timestamp.
    pub end_to_end: LatencyHistogram,
    pub timers_fired: AtomicU64,
    pub transactions_committed: AtomicU64,
    pub transactions_aborted: AtomicU64,
    /// Records per second while busy, smoothed, as `f64` bits (0: none
    /// measured yet): what the catch-up estimate divides by.
    rate_bits: AtomicU64,
    /// The state's RocksDB, as of the last commit.
    pub state_bytes: AtomicU64,
    pub pending_compaction_bytes: AtomicU64,
    pub writes_stopped: AtomicBool,
}

/// One input partition's counters and where it stands.
pub(crate) struct InputMetrics {
    /// The topic's name in the log.
    pub topic: String,
    pub records: AtomicU64,
    /// Bytes fetched.
    pub bytes: AtomicU64,
    /// The next offset to process.
    pub next: AtomicI64,
    /// The partition's end as the last fetch saw it (-1: not fetched yet).
    pub end: AtomicI64,
    /// The newest timestamp of what was processed last (-1: nothing yet).
    pub last_timestamp: AtomicI64,
}

/// One output topic's counters.
pub(crate) struct OutputMetrics {
    pub topic: String,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
}

impl TaskMetrics {
    /// Counters for a task reading `inputs` (log topic, next offset) and
    /// appending to `outputs`.
    pub fn new(inputs: impl IntoIterator<Item = (String, i64)>, outputs: &[String]) -> Self {
        Self {
            inputs: (inputs.into_iter())
                .map(|(topic, next)| InputMetrics {
                    topic,
                    records: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    next: AtomicI64::new(next),
                    end: AtomicI64::new(-1),
                    last_timestamp: AtomicI64::new(-1),
                })
                .collect(),
            outputs: (outputs.iter())
                .map(|topic| OutputMetrics {
                    topic: topic.clone(),
                    records: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                })
                .collect(),
            process_nanos: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_latency: LatencyHistogram::default(),
            end_to_end: LatencyHistogram::default(),
            timers_fired: AtomicU64::new(0),
            transactions_committed: AtomicU64::new(0),
            transactions_aborted: AtomicU64::new(0),
            rate_bits: AtomicU64::new(0),
            state_bytes: AtomicU64::new(0),
            pending_compaction_bytes: AtomicU64::new(0),
            writes_stopped: AtomicBool::new(false),
        }
    }

    /// A run of `records` of input `at` processed in `nanos`, up to
    /// `next`, the newest of them stamped `timestamp`.
    pub fn processed(&self, at: usize, records: u64, nanos: u64, next: i64, timestamp: i64) {
        self.process_nanos.fetch_add(nanos, Ordering::Relaxed);
        if let Some(input) = self.inputs.get(at) {
            input.records.fetch_add(records, Ordering::Relaxed);
            input.next.store(next, Ordering::Relaxed);
            input.last_timestamp.fetch_max(timestamp, Ordering::Relaxed);
        }
    }

    /// A fetch of input `at`: `bytes` came, the partition ends at `end`.
    pub fn fetched(&self, at: usize, bytes: u64, end: i64) {
        if let Some(input) = self.inputs.get(at) {
            input.bytes.fetch_add(bytes, Ordering::Relaxed);
            input.end.store(end, Ordering::Relaxed);
        }
    }

    /// A batch of `records` (`bytes` long, newest timestamp `newest`)
    /// appended to `topic` at `now_ms`.
    pub fn shipped(&self, topic: &str, records: u64, bytes: u64, newest: i64, now_ms: i64) {
        if let Some(output) = self.outputs.iter().find(|o| o.topic == topic) {
            output.records.fetch_add(records, Ordering::Relaxed);
            output.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        let age_micros = (now_ms - newest).max(0) as u64 * 1000;
        self.end_to_end.observe(age_micros);
    }

    pub fn set_rate(&self, records_per_second: f64) {
        self.rate_bits
            .store(records_per_second.to_bits(), Ordering::Relaxed);
    }

    /// Records per second while busy, if measured.
    pub fn rate(&self) -> Option<f64> {
        let rate = f64::from_bits(self.rate_bits.load(Ordering::Relaxed));
        (rate > 0.0).then_some(rate)
    }
}

impl InputMetrics {
    /// Records between the next to process and the partition's end.
    pub fn lag(&self) -> i64 {
        let end = self.end.load(Ordering::Relaxed);
        (end - self.next.load(Ordering::Relaxed)).max(0)
    }

    /// How far behind in time: now less the newest timestamp processed
    /// while records are left, 0 once caught up; None while records are
    /// left and none was processed yet (not known).
    pub fn lag_ms(&self, now_ms: i64) -> Option<i64> {
        if self.lag() == 0 {
            return Some(0);
        }
        let last = self.last_timestamp.load(Ordering::Relaxed);
        (last >= 0).then(|| (now_ms - last).max(0))
    }
}
