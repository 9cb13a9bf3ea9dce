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
//! | records the processor dropped, by reason (`Context::dropped`) | dropped-records |
//! | transactions committed and aborted (remote) | — |
//! | state size, compaction behind, writes stopped (RocksDB) | rocksdb state metrics |
//! | the keys read most, from a sample of one record in [`HOT_KEY_SAMPLE`] | — |
//! | the keys written most per store, from a sample of one write in [`HOT_KEY_SAMPLE`] | — |
//!
//! Atomics, written per batch, per commit and per shipped batch, never per
//! record, so the per-record path pays nothing for them; a scrape reads
//! them from another thread.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use strata_http::LatencyHistogram;
use strata_record::heavy_hitters::{HeavyHitters, HotKey};

/// One record in this many has its key counted for the hot-key report:
/// the counting costs the per-record path a sixteenth of a table update.
pub(crate) const HOT_KEY_SAMPLE: u64 = 16;
/// Keys the table of a task counts.
const HOT_KEYS_COUNTED: usize = 64;

/// A task's counters.
pub(crate) struct TaskMetrics {
    /// The task's processor and partition, as the labels show them.
    pub processor: String,
    pub partition: i32,
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
    /// The keys read most, counted for one record in [`HOT_KEY_SAMPLE`] on
    /// average (see [`KeySampler`]).
    hot_keys: Mutex<HeavyHitters>,
    /// Per store (in the processor's order), the keys written most, counted
    /// for one `put` in [`HOT_KEY_SAMPLE`] on average.
    written: Vec<(String, Mutex<HeavyHitters>)>,
    /// Records the processor dropped, by the reason it gave (few reasons:
    /// a late record, say), in the order first seen.
    dropped: Mutex<Vec<(&'static str, u64)>>,
    /// Records the processor failed on, by kind and what its error policy
    /// did with them (see `on_error`).
    failed: Mutex<Vec<(&'static str, &'static str, u64)>>,
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
    pub fn new(
        (processor, partition): (&str, i32),
        inputs: impl IntoIterator<Item = (String, i64)>,
        outputs: &[String],
    ) -> Self {
        Self {
            processor: processor.to_string(),
            partition,
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
            dropped: Mutex::new(Vec::new()),
            failed: Mutex::new(Vec::new()),
            transactions_committed: AtomicU64::new(0),
            transactions_aborted: AtomicU64::new(0),
            rate_bits: AtomicU64::new(0),
            state_bytes: AtomicU64::new(0),
            pending_compaction_bytes: AtomicU64::new(0),
            writes_stopped: AtomicBool::new(false),
            hot_keys: Mutex::new(HeavyHitters::new(HOT_KEYS_COUNTED)),
            written: Vec::new(),
        }
    }

    /// The same, counting the keys written to each of `stores` (the
    /// processor's, in its order).
    pub fn with_stores(mut self, stores: &[&str]) -> Self {
        self.written = (stores.iter())
            .map(|store| {
                let table = Mutex::new(HeavyHitters::new(HOT_KEYS_COUNTED));
                (store.to_string(), table)
            })
            .collect();
        self
    }

    /// Counts `key` written to the store at `store` (a sampled `put`).
    pub fn wrote(&self, store: usize, key: &[u8]) {
        if let Some((_, table)) = self.written.get(store) {
            let now = strata_record::time::now_ms();
            let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
            table.offer(key, 1, now);
        }
    }

    /// Per store, the `n` keys written most, their counts scaled up from
    /// the sample to estimate writes.
    pub fn hot_written(&self, n: usize) -> Vec<(&str, Vec<HotKey>)> {
        (self.written.iter())
            .map(|(store, table)| {
                let table = table.lock().unwrap_or_else(|e| e.into_inner());
                let mut top = table.top(n);
                for hot in &mut top {
                    hot.count *= HOT_KEY_SAMPLE;
                    hot.error *= HOT_KEY_SAMPLE;
                }
                (store.as_str(), top)
            })
            .collect()
    }

    /// Counts the keys `sampler` picks among the next `n` records read
    /// (`key_at` gives a record's key by its position), read at `now_ms`.
    /// The table is locked only when one is picked, and nothing is
    /// collected on the way.
    pub fn count_sampled<'k>(
        &self,
        sampler: &mut KeySampler,
        n: usize,
        key_at: impl Fn(usize) -> Option<&'k [u8]>,
        now_ms: i64,
    ) {
        if !sampler.picks_within(n) {
            sampler.take(n, |_| {});
            return;
        }
        let mut table = self.hot_keys.lock().unwrap_or_else(|e| e.into_inner());
        sampler.take(n, |at| {
            if let Some(key) = key_at(at) {
                table.offer(key, 1, now_ms);
            }
        });
    }

    /// The `n` keys read most, their counts scaled up from the sample to
    /// estimate records.
    pub fn hot_keys(&self, n: usize) -> Vec<HotKey> {
        let table = self.hot_keys.lock().unwrap_or_else(|e| e.into_inner());
        let mut top = table.top(n);
        for hot in &mut top {
            hot.count *= HOT_KEY_SAMPLE;
            hot.error *= HOT_KEY_SAMPLE;
        }
        top
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

    /// Counts one record the processor dropped for `reason`.
    pub fn dropped(&self, reason: &'static str) {
        let mut dropped = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        match dropped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => dropped.push((reason, 1)),
        }
    }

    /// Counts one record the processor failed on, of `kind` (`decode`,
    /// `process`), and what its error policy did with it (`action`).
    pub fn failed(&self, kind: &'static str, action: &'static str) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        match failed
            .iter_mut()
            .find(|(k, a, _)| (*k, *a) == (kind, action))
        {
            Some((_, _, n)) => *n += 1,
            None => failed.push((kind, action, 1)),
        }
    }

    /// The records failed on so far, by kind and action.
    pub fn failed_counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The records dropped so far, by reason.
    pub fn dropped_counts(&self) -> Vec<(&'static str, u64)> {
        self.dropped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_rate(&self, records_per_second: f64) {
        self.rate_bits
            .store(records_per_second.to_bits(), Ordering::Relaxed);
    }

    /// Seconds to reach the inputs' ends at the rate while busy (None
    /// before a rate is measured).
    pub fn catch_up_seconds(&self) -> Option<f64> {
        let lag: i64 = self.inputs.iter().map(InputMetrics::lag).sum();
        Some(lag as f64 / self.rate()?)
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

/// Which records read have their keys counted: one in [`HOT_KEY_SAMPLE`]
/// on average, at gaps drawn at random (1 to twice the mean), so a key that
/// recurs at a fixed period is neither always nor never counted.
pub(crate) struct KeySampler {
    /// Records read so far.
    read: u64,
    /// The record whose key is counted next.
    next: u64,
    /// xorshift64's state (never 0).
    state: u64,
}

impl KeySampler {
    /// A sampler whose gaps follow from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sampler = Self {
            read: 0,
            next: 0,
            state: seed | 1,
        };
        sampler.next = sampler.gap() - 1;
        sampler
    }

    /// Whether the next one is picked (for writes, sampled one at a time).
    pub fn pick(&mut self) -> bool {
        let picked = self.next == self.read;
        self.read += 1;
        if picked {
            self.next += self.gap();
        }
        picked
    }

    /// Whether one of the next `n` records read is picked.
    pub fn picks_within(&self, n: usize) -> bool {
        self.next < self.read + n as u64
    }

    /// Calls `each` with the position, among the next `n` records read,
    /// of each one whose key is counted.
    pub fn take(&mut self, n: usize, mut each: impl FnMut(usize)) {
        let end = self.read + n as u64;
        while self.next < end {
            each((self.next - self.read) as usize);
            self.next += self.gap();
        }
        self.read = end;
    }

    fn gap(&mut self) -> u64 {
        // xorshift64: enough to decorrelate the gaps from the keys.
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        1 + x % (2 * HOT_KEY_SAMPLE - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_in_the_sample_mean_is_counted_whatever_the_keys_period() {
        let mut sampler = KeySampler::new(7);
        let (mut counted, mut even) = (0u64, 0u64);
        for batch in 0..10_000u64 {
            let base = batch * 3;
            sampler.take(3, |i| {
                counted += 1;
                even += u64::from((base + i as u64).is_multiple_of(2));
            });
        }
        let expected = 30_000 / HOT_KEY_SAMPLE;
        assert!(
            counted.abs_diff(expected) * 10 < expected,
            "{counted} of 30000"
        );
        // A key at every other record is counted about half the time.
        assert!(
            even.abs_diff(counted / 2) * 10 < counted,
            "{even} of {counted}"
        );
    }
}
