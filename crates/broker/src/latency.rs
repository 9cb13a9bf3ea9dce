//! A request latency histogram: fixed buckets, lock-free counters, rendered
//! in Prometheus's histogram form (cumulative `_bucket{le=…}` lines, then
//! `_sum` and `_count`), so a scraper's `histogram_quantile` reads the
//! broker's percentiles.
//!
//! The buckets are finest from 100 µs to 10 ms, where an fdatasync and an
//! acks=all answer live (1.2–1.5× apart), then coarser up to 10 s (a fetch
//! that waits for data lasts its max wait).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the buckets, in microseconds; one more bucket (+Inf)
/// takes the rest.
const BOUNDS_MICROS: [u64; 29] = [
    100, 150, 200, 300, 400, 500, 600, 750, 1_000, 1_250, 1_500, 2_000, 2_500, 3_000, 4_000, 5_000,
    6_000, 7_500, 10_000, 15_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000,
];

pub(crate) struct LatencyHistogram {
    /// Observations per bucket (not cumulative); the last is +Inf.
    buckets: [AtomicU64; BOUNDS_MICROS.len() + 1],
    sum_micros: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl LatencyHistogram {
    pub fn observe(&self, micros: u64) {
        let bucket = BOUNDS_MICROS.partition_point(|&bound| bound < micros);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Appends the histogram's lines: `{name}_bucket{{labels,le="…"}}`,
    /// `{name}_sum{{labels}}`, `{name}_count{{labels}}`. `labels` is
    /// `key="value"` pairs without braces.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = BOUNDS_MICROS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |&micros| seconds(micros));
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micros.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", seconds(sum));
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
}

/// Microseconds as seconds, exactly (no float rounding in the labels).
fn seconds(micros: u64) -> String {
    let text = format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(histogram: &LatencyHistogram) -> Vec<(String, u64)> {
        let mut out = String::new();
        histogram.render(&mut out, "h", "api=\"Produce\"");
        out.lines()
            .map(|line| {
                let (key, value) = line.rsplit_once(' ').unwrap();
                (key.to_string(), value.parse::<f64>().unwrap() as u64)
            })
            .collect()
    }

    #[test]
    fn buckets_are_cumulative_and_bounds_are_inclusive() {
        let histogram = LatencyHistogram::default();
        for micros in [50, 100, 101, 1_000, 20_000_000] {
            histogram.observe(micros);
        }
        let lines = rendered(&histogram);
        let bucket = |le: &str| {
            lines
                .iter()
                .find(|(k, _)| k == &format!("h_bucket{{api=\"Produce\",le=\"{le}\"}}"))
                .map(|(_, v)| *v)
                .unwrap()
        };
        assert_eq!(bucket("0.0001"), 2, "100 µs falls in le=0.0001");
        assert_eq!(bucket("0.00015"), 3);
        assert_eq!(bucket("0.001"), 4);
        assert_eq!(bucket("10"), 4);
        assert_eq!(bucket("+Inf"), 5);
        let count = lines
            .iter()
            .find(|(k, _)| k.starts_with("h_count"))
            .unwrap();
        assert_eq!(count.1, 5);
        let sum = lines.iter().find(|(k, _)| k.starts_with("h_sum")).unwrap();
        assert_eq!(sum.1, 20, "20.001251 s, whole seconds");
    }

    #[test]
    fn bounds_rise_and_print_as_plain_decimals() {
        assert!(BOUNDS_MICROS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(seconds(100), "0.0001");
        assert_eq!(seconds(1_500), "0.0015");
        assert_eq!(seconds(2_500_000), "2.5");
        assert_eq!(seconds(10_000_000), "10");
    }
}
