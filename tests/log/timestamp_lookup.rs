//! Exact timestamp lookup (Kafka's ListOffsets by time): the first record in
//! offset order whose timestamp is at or after the one asked for, found
//! inside compressed batches, across segments, with producers' timestamps
//! out of order, and after clean and unclean reopens; and the record with
//! the largest timestamp (ListOffsets MAX_TIMESTAMP) in the same scenarios.
//! Every answer is checked against a brute-force search over the records
//! appended.

use crate::support;

use strata::log::{LogConfig, PartitionLog};
use strata::record::Compression;
use support::CODECS;

/// Tiny segments and a dense index, and no time-based rolls, so a reopened
/// active segment keeps taking appends on top of the indexes it reloaded.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        segment_ms: i64::MAX,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// The records of one partition as (offset, timestamp), in offset order.
#[derive(Default)]
struct Appended {
    records: Vec<(i64, i64)>,
}

impl Appended {
    fn append(&mut self, log: &PartitionLog, compression: Compression, timestamps: &[i64]) {
        let values: Vec<String> = timestamps
            .iter()
            .enumerate()
            .map(|(i, ts)| format!("value {i} at {ts}, padded to give the batch some weight"))
            .collect();
        let batch = support::batch_with(
            compression,
            values
                .iter()
                .zip(timestamps)
                .map(|(value, &ts)| (None, value.as_bytes(), ts)),
        );
        let info = log.append(&batch).expect("append succeeds");
        assert_eq!(info.base_offset, self.records.len() as i64);
        self.records.extend(
            timestamps
                .iter()
                .enumerate()
                .map(|(i, &ts)| (info.base_offset + i as i64, ts)),
        );
    }

    fn expected(&self, log_start: i64, timestamp: i64) -> Option<(i64, i64)> {
        self.records
            .iter()
            .skip(log_start as usize)
            .find(|&&(_, ts)| ts >= timestamp)
            .copied()
    }

    /// The retained record with the largest timestamp, the lowest offset
    /// of those sharing it.
    fn expected_max(&self, log_start: i64) -> Option<(i64, i64)> {
        self.records
            .iter()
            .skip(log_start as usize)
            .filter(|&&(_, ts)| ts >= 0)
            .fold(None, |best: Option<(i64, i64)>, &(offset, ts)| match best {
                Some((_, best_ts)) if best_ts >= ts => best,
                _ => Some((offset, ts)),
            })
    }

    /// Every timestamp present, its neighbours, and the extremes.
    fn probes(&self) -> Vec<i64> {
        let mut probes = vec![i64::MIN, 0, i64::MAX];
        for &(_, ts) in &self.records {
            probes.extend([ts - 1, ts, ts + 1]);
        }
        probes.sort_unstable();
        probes.dedup();
        probes
    }

    fn check_every_probe(&self, log: &PartitionLog) {
        let log_start = log.log_start_offset();
        for timestamp in self.probes() {
            assert_eq!(
                log.offset_for_timestamp(timestamp)
                    .expect("lookup succeeds"),
                self.expected(log_start, timestamp),
                "lookup of timestamp {timestamp}"
            );
        }
        assert_eq!(
            log.max_timestamp_record().expect("lookup succeeds"),
            self.expected_max(log_start),
            "the record with the largest timestamp"
        );
    }
}

/// A fixed-seed xorshift generator: reproducible timestamps without a
/// dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Appends `batch_count` batches of 1..=12 records with timestamps that drift
/// upwards but jitter by up to ±2 s, rotating through every codec.
fn append_jittered(
    log: &PartitionLog,
    appended: &mut Appended,
    rng: &mut Rng,
    clock_ms: &mut i64,
    batch_count: usize,
) {
    for i in 0..batch_count {
        let count = 1 + rng.below(12) as usize;
        let timestamps: Vec<i64> = (0..count)
            .map(|_| {
                *clock_ms += 100;
                *clock_ms + rng.below(4_001) as i64 - 2_000
            })
            .collect();
        appended.append(log, CODECS[i % CODECS.len()], &timestamps);
    }
}

#[test]
fn a_timestamp_inside_a_compressed_batch_finds_the_exact_record() {
    for compression in CODECS {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
        let mut appended = Appended::default();
        appended.append(&log, compression, &[10, 20]);
        appended.append(&log, compression, &[100, 300, 200, 500, 400, 900, 600]);

        // Offsets 2..=8 hold the second batch. The answer is the first record
        // in offset order, not the closest timestamp: 600 finds the 900 at
        // offset 7 rather than the exact 600 after it.
        assert_eq!(
            log.offset_for_timestamp(450).unwrap(),
            Some((5, 500)),
            "{compression:?}"
        );
        assert_eq!(
            log.offset_for_timestamp(250).unwrap(),
            Some((3, 300)),
            "{compression:?}"
        );
        assert_eq!(
            log.offset_for_timestamp(600).unwrap(),
            Some((7, 900)),
            "{compression:?}"
        );
        assert_eq!(
            log.offset_for_timestamp(21).unwrap(),
            Some((2, 100)),
            "{compression:?}"
        );
        // The largest timestamp is mid-batch; a later batch ties it, and the
        // lower offset wins.
        assert_eq!(log.max_timestamp_record().unwrap(), Some((7, 900)));
        appended.append(&log, compression, &[50, 900, 5]);
        assert_eq!(log.max_timestamp_record().unwrap(), Some((7, 900)));
        appended.append(&log, compression, &[901, 1]);
        assert_eq!(log.max_timestamp_record().unwrap(), Some((12, 901)));
        appended.check_every_probe(&log);
    }
}

#[test]
fn out_of_order_timestamps_across_batches_and_segments_match_a_brute_force_search() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
    let mut appended = Appended::default();
    let mut rng = Rng(0x7157_a3b2_c4d5_e6f7);
    let mut clock_ms = 1_600_000_000_000;
    append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 200);
    assert!(
        log.segment_count() >= 5,
        "only {} segments",
        log.segment_count()
    );
    appended.check_every_probe(&log);
}

#[test]
fn a_timestamp_beyond_the_newest_record_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
    assert_eq!(
        log.offset_for_timestamp(0).unwrap(),
        None,
        "an empty log holds nothing"
    );
    assert_eq!(log.max_timestamp_record().unwrap(), None);
    let mut appended = Appended::default();
    for compression in CODECS {
        // The newest timestamp sits mid-batch, so only the header's max
        // timestamp and a full decode can tell.
        appended.append(&log, compression, &[5_000, 9_000, 7_000]);
    }
    assert_eq!(log.offset_for_timestamp(9_000).unwrap(), Some((1, 9_000)));
    assert_eq!(log.offset_for_timestamp(9_001).unwrap(), None);
    assert_eq!(log.offset_for_timestamp(i64::MAX).unwrap(), None);
}

#[test]
fn a_timestamp_below_every_record_finds_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
    let mut appended = Appended::default();
    let mut rng = Rng(0x0dd_ba11);
    let mut clock_ms = 1_000_000;
    append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 60);
    assert_eq!(
        log.offset_for_timestamp(0).unwrap(),
        Some(appended.records[0])
    );

    log.set_config(LogConfig {
        retention_bytes: 3_000,
        ..config()
    });
    let outcome = log.enforce_retention(clock_ms).unwrap();
    let log_start = log.log_start_offset();
    assert!(outcome.segments_deleted > 0 && log_start > 0, "{outcome:?}");
    let first_retained = appended.records[log_start as usize];
    for below in [i64::MIN, 0, 999_000] {
        assert_eq!(
            log.offset_for_timestamp(below).unwrap(),
            Some(first_retained),
            "timestamp {below}"
        );
    }
    appended.check_every_probe(&log);
}

#[test]
fn lookups_stay_exact_across_a_clean_reopen_and_further_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut appended = Appended::default();
    let mut rng = Rng(0xc1ea_4e09);
    let mut clock_ms = 1_000_000;
    {
        let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
        append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 80);
        log.close().unwrap();
    }
    let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
    assert_eq!(log.recovery_report().segments_scanned, 0);
    appended.check_every_probe(&log);

    // Older timestamps land in the reopened active segment after its
    // reloaded newest one; the lookup must still see both.
    clock_ms -= 10_000;
    append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 40);
    appended.check_every_probe(&log);
}

#[test]
fn lookups_stay_exact_across_an_unclean_reopen_and_further_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut appended = Appended::default();
    let mut rng = Rng(0xd1a7_11e5);
    let mut clock_ms = 1_000_000;
    {
        let log = PartitionLog::open(dir.path(), "ts-0", config(), true).unwrap();
        append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 80);
        // Dropped without close: the active segment's indexes are not sealed.
    }
    let log = PartitionLog::open(dir.path(), "ts-0", config(), false).unwrap();
    assert!(log.recovery_report().segments_scanned > 0);
    appended.check_every_probe(&log);

    clock_ms -= 10_000;
    append_jittered(&log, &mut appended, &mut rng, &mut clock_ms, 40);
    appended.check_every_probe(&log);
    drop(log);

    let log = PartitionLog::open(dir.path(), "ts-0", config(), false).unwrap();
    appended.check_every_probe(&log);
}

#[test]
fn a_segment_rolled_because_its_time_index_filled_still_finds_its_newest_record_after_a_reopen() {
    // The smallest `segment.index.bytes` (64) gives a time index of five
    // entries; indexing every batch fills it after six batches and forces a
    // roll. The sealed segment must still know its newest timestamp.
    let config = LogConfig {
        segment_index_bytes: 64,
        index_interval_bytes: 1,
        ..config()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut appended = Appended::default();
    {
        let log = PartitionLog::open(dir.path(), "ts-0", config.clone(), true).unwrap();
        for i in 0..20 {
            appended.append(&log, CODECS[i % CODECS.len()], &[1_000 * (i as i64 + 1)]);
        }
        assert!(
            log.segment_count() >= 3,
            "only {} segments",
            log.segment_count()
        );
        appended.check_every_probe(&log);
        log.close().unwrap();
    }
    let log = PartitionLog::open(dir.path(), "ts-0", config, true).unwrap();
    appended.check_every_probe(&log);
}
