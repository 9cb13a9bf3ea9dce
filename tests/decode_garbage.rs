//! The record decoders and the log fed garbage.
//!
//! Inputs are arbitrary bytes, forged headers over random payloads, and valid
//! batches of every codec that are then damaged: bytes flipped, cut short,
//! extended, header fields and record lengths rewritten, some re-sealed with a
//! fresh CRC so the damage reaches the record parser. Whatever the input:
//! - no decoder panics;
//! - no single allocation exceeds what the caller's limit allows (a length
//!   field must never size a buffer by itself). Only the Rust allocator is
//!   watched: the C codecs (lz4, zstd) allocate outside it;
//! - a damaged byte under the CRC is always caught;
//! - a log either refuses a damaged append and stays exactly as it was, or
//!   accepts it and reads it back byte for byte;
//! - the group decoders (a committed offset as stored, a consumer's
//!   subscription and assignment as members exchange them) return their
//!   typed error or a value that survives encoding and decoding again.
//!
//! Every property runs from a fixed seed so a failure reproduces.

mod support;

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use support::{CODECS, as_stored};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use strata::broker::group::offsets::{self, CommittedOffset};
use strata::client::{
    ClientError, decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use strata::log::{LogConfig, LogError, PartitionLog};
use strata::record::{
    BATCH_HEADER_BYTES, BatchBuilder, BatchHeader, Compression, Header, LOG_OVERHEAD_BYTES,
    NewRecord, RecordBatch, RecordError,
};

/// Limit handed to every decoder under test.
const DECOMPRESSED_BYTES_MAX: usize = 64 << 10;
/// Fixed working memory a codec may take whatever the limit: stream buffers
/// and decoder state (zstd's input buffer alone is 128 KiB).
const CODEC_WORKSPACE_BYTES: usize = 256 << 10;
/// A growing output buffer may double past the limit once before the limit
/// check stops it.
const ALLOCATION_BYTES_MAX: usize = 2 * (DECOMPRESSED_BYTES_MAX + 1) + CODEC_WORKSPACE_BYTES;
const CRC_AT: usize = 17;
const CRC_COVERS_FROM: usize = 21;
const SEED: u64 = 0x5eed_0f9a_4ba9;

/// Remembers, per thread, the largest single allocation since the last reset.
/// Allocations go to the broker's allocator, which serves a huge one with
/// address space only: the protocol decoders reserve room for as many
/// elements as a count claims, and a refused reservation aborts the process
/// instead of failing the test.
struct TrackingAllocator;

static INNER: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

thread_local! {
    static LARGEST_ALLOCATION: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation(size: usize) {
    // `try_with`: allocations also happen while a thread is torn down.
    let _ = LARGEST_ALLOCATION.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to the inner allocator; the
// bookkeeping touches only a const-initialized thread-local, which never
// allocates.
unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { INNER.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// Runs `f` and returns the largest single allocation it made on this thread.
fn largest_allocation_of(f: impl FnOnce()) -> usize {
    LARGEST_ALLOCATION.with(|largest| largest.set(0));
    f();
    LARGEST_ALLOCATION.with(Cell::get)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(SEED),
        // The seed is fixed, so a failure needs no file to be replayed.
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    })
}

/// Runs every decoder over `bytes`, ignoring the results: only panics and
/// allocations matter here.
fn decode_everything(bytes: &[u8]) {
    let _ = BatchHeader::peek_size(bytes);
    if let Ok(header) = BatchHeader::parse(bytes) {
        let _ = header.check();
        let _ = header.compression();
    }
    for codec in CODECS {
        let _ = codec.decompress(bytes, DECOMPRESSED_BYTES_MAX);
    }
    let _ = RecordBatch::parse_and_verify(bytes);
    let Ok(batch) = RecordBatch::parse(bytes) else {
        return;
    };
    let _ = batch.verify_crc();
    for codec in CODECS {
        let _ = codec.decompress(batch.payload(), DECOMPRESSED_BYTES_MAX);
    }
    if let Ok(records) = batch.records(DECOMPRESSED_BYTES_MAX) {
        let _ = records.len();
        // A cursor reading keys (and times) alone, as a task's prefetch
        // runs ahead, agrees with the records read whole for as long as
        // those read.
        let mut keys = records.cursor();
        let section = records.section();
        for record in records.iter() {
            let Ok(record) = record else { break };
            assert_eq!(keys.next_key(section), Some(record.key));
            for header in record.headers() {
                let _ = (header.key.len(), header.value.map(<[u8]>::len));
            }
        }
        while keys.next_key(section).is_some() {}
    }
    let _ = batch.validate_records(DECOMPRESSED_BYTES_MAX);
}

fn assert_decodes_within_limits(bytes: &[u8]) -> Result<(), TestCaseError> {
    let largest = largest_allocation_of(|| decode_everything(bytes));
    prop_assert!(
        largest <= ALLOCATION_BYTES_MAX,
        "an allocation of {largest} bytes, above {ALLOCATION_BYTES_MAX}, for an input of {} bytes",
        bytes.len()
    );
    Ok(())
}

/// A record to build a valid batch from.
#[derive(Debug, Clone)]
struct RecordSpec {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp_ms: i64,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Random bytes, or a run of one byte so that the codecs really compress.
fn payload_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..max),
        (any::<u8>(), 0..max * 8).prop_map(|(byte, n)| vec![byte; n]),
    ]
}

fn record_spec() -> impl Strategy<Value = RecordSpec> {
    (
        prop::option::of(payload_bytes(16)),
        prop::option::of(payload_bytes(64)),
        prop_oneof![
            Just(0i64),
            any::<i64>(),
            1_600_000_000_000i64..1_800_000_000_000
        ],
        prop::collection::vec((payload_bytes(8), prop::option::of(payload_bytes(8))), 0..3),
    )
        .prop_map(|(key, value, timestamp_ms, headers)| RecordSpec {
            key,
            value,
            timestamp_ms,
            headers,
        })
}

fn build_batch(codec: Compression, records: &[RecordSpec], transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec).transactional(transactional);
    for spec in records {
        let headers: Vec<Header<'_>> = spec
            .headers
            .iter()
            .map(|(key, value)| Header {
                key,
                value: value.as_deref(),
            })
            .collect();
        builder
            .push(NewRecord {
                key: spec.key.as_deref(),
                value: spec.value.as_deref(),
                timestamp: spec.timestamp_ms,
                headers: &headers,
            })
            .expect("record fits in a batch");
    }
    builder.build().expect("batch builds")
}

/// A valid batch with any codec.
fn valid_batch() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(CODECS.to_vec()),
        prop::collection::vec(record_spec(), 1..8),
        any::<bool>(),
    )
        .prop_map(|(codec, records, transactional)| build_batch(codec, &records, transactional))
}

/// A valid batch a log appends: not transactional (transactions are not
/// supported, so the log refuses transactional batches).
fn appendable_batch() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(CODECS.to_vec()),
        prop::collection::vec(record_spec(), 1..8),
    )
        .prop_map(|(codec, records)| build_batch(codec, &records, false))
}

/// The fields of the batch header, as (position, width in bytes).
const HEADER_FIELDS: [(usize, usize); 13] = [
    (0, 8),  // baseOffset
    (8, 4),  // batchLength
    (12, 4), // partitionLeaderEpoch
    (16, 1), // magic
    (17, 4), // crc
    (21, 2), // attributes
    (23, 4), // lastOffsetDelta
    (27, 8), // baseTimestamp
    (35, 8), // maxTimestamp
    (43, 8), // producerId
    (51, 2), // producerEpoch
    (53, 4), // baseSequence
    (57, 4), // recordCount
];
const BATCH_LENGTH_FIELD: usize = 1;

/// Values that sit on the edges of every integer width.
fn edge_value() -> impl Strategy<Value = i64> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            1,
            -1,
            2,
            i64::from(i8::MAX),
            i64::from(i8::MIN),
            i64::from(i16::MAX),
            i64::from(i16::MIN),
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::from(u32::MAX),
            i64::MAX,
            i64::MAX - 1,
            i64::MIN,
        ]),
        any::<i64>(),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: Index,
        mask: u8,
    },
    Truncate {
        keep: Index,
    },
    Extend {
        tail: Vec<u8>,
    },
    /// Writes `value` big-endian into one header field, cut to its width.
    SetField {
        field: usize,
        value: i64,
    },
    /// Sets batchLength to the true length plus `delta`.
    ShiftBatchLength {
        delta: i32,
    },
    /// Writes `value` as a zig-zag varint over the bytes at `at`, as a record
    /// length or key, value or header length would be written.
    WriteVarint {
        at: Index,
        value: i32,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => any::<Index>().prop_map(|keep| Mutation::Truncate { keep }),
        1 => prop::collection::vec(any::<u8>(), 1..80).prop_map(|tail| Mutation::Extend { tail }),
        2 => (0..HEADER_FIELDS.len(), edge_value()).prop_map(|(field, value)| Mutation::SetField { field, value }),
        1 => (-80i32..80).prop_map(|delta| Mutation::ShiftBatchLength { delta }),
        2 => (any::<Index>(), prop_oneof![
            prop::sample::select(vec![-2, -1, 0, 1, 127, 128, i32::MAX, i32::MIN]),
            any::<i32>()
        ]).prop_map(|(at, value)| Mutation::WriteVarint { at, value }),
    ]
}

fn zigzag_varint(value: i32) -> Vec<u8> {
    let mut raw = ((value << 1) ^ (value >> 31)) as u32;
    let mut out = Vec::new();
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
    out
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    match mutation {
        Mutation::Flip { at, mask } if !bytes.is_empty() => {
            let at = at.index(bytes.len());
            bytes[at] ^= mask;
        }
        Mutation::Truncate { keep } => {
            let keep = keep.index(bytes.len() + 1);
            bytes.truncate(keep);
        }
        Mutation::Extend { tail } => bytes.extend_from_slice(tail),
        Mutation::SetField { field, value } => {
            let (at, width) = HEADER_FIELDS[*field];
            if let Some(slot) = bytes.get_mut(at..at + width) {
                slot.copy_from_slice(&value.to_be_bytes()[8 - width..]);
            }
        }
        Mutation::ShiftBatchLength { delta } => {
            let (at, width) = HEADER_FIELDS[BATCH_LENGTH_FIELD];
            let length =
                (bytes.len() as i64 - LOG_OVERHEAD_BYTES as i64 + i64::from(*delta)) as i32;
            if let Some(slot) = bytes.get_mut(at..at + width) {
                slot.copy_from_slice(&length.to_be_bytes());
            }
        }
        Mutation::WriteVarint { at, value } if !bytes.is_empty() => {
            let at = at.index(bytes.len());
            for (i, byte) in zigzag_varint(*value).into_iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = byte;
                }
            }
        }
        Mutation::Flip { .. } | Mutation::WriteVarint { .. } => {}
    }
}

fn mutated(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        apply(&mut bytes, mutation);
    }
    bytes
}

fn seal_crc(bytes: &mut [u8]) {
    let crc = strata::record::crc32c(&bytes[CRC_COVERS_FROM..]);
    bytes[CRC_AT..CRC_COVERS_FROM].copy_from_slice(&crc.to_be_bytes());
}

/// Damages the records of a valid batch (inside the compression, if any),
/// then re-assembles the batch with a correct batchLength and CRC, so the
/// damage gets past the CRC check into the record parser. Header mutations
/// are applied before sealing.
fn resealed(batch: &[u8], record_mutations: &[Mutation], header_mutations: &[Mutation]) -> Vec<u8> {
    let parsed = RecordBatch::parse_and_verify(batch).expect("a valid batch");
    let codec = parsed.header().compression().expect("a known codec");
    let records = codec
        .decompress(parsed.payload(), usize::MAX)
        .expect("a valid payload");
    let records = mutated(records, record_mutations);
    let payload = codec.compress(&records).expect("compression succeeds");
    let mut out = batch[..BATCH_HEADER_BYTES].to_vec();
    out.extend_from_slice(&payload);
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES).expect("small batch");
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let mut out = mutated(out, header_mutations);
    if out.len() >= BATCH_HEADER_BYTES {
        seal_crc(&mut out);
    }
    out
}

fn header_mutation() -> impl Strategy<Value = Mutation> {
    (0..HEADER_FIELDS.len(), edge_value())
        .prop_map(|(field, value)| Mutation::SetField { field, value })
}

#[test]
fn arbitrary_bytes_never_panic_or_allocate_past_the_limit() {
    let input = prop::collection::vec(any::<u8>(), 0..4096);
    runner(6_000)
        .run(&input, |bytes| assert_decodes_within_limits(&bytes))
        .unwrap();
}

#[test]
fn forged_headers_over_random_payloads_never_panic_or_allocate_past_the_limit() {
    // A header that passes its own checks over a random payload: random bytes
    // alone almost never get past the magic byte and the length.
    let input = (
        prop::collection::vec(any::<u8>(), BATCH_HEADER_BYTES..BATCH_HEADER_BYTES + 1),
        0i16..5,
        0i32..50,
        prop::collection::vec(any::<u8>(), 0..1024),
        any::<bool>(),
    )
        .prop_map(|(mut header, codec, record_count, payload, seal)| {
            header[16] = 2;
            header[21..23].copy_from_slice(&codec.to_be_bytes());
            header[23..27].copy_from_slice(&(record_count - 1).max(0).to_be_bytes());
            header[57..61].copy_from_slice(&record_count.to_be_bytes());
            header.extend_from_slice(&payload);
            let batch_length = (header.len() - LOG_OVERHEAD_BYTES) as i32;
            header[8..12].copy_from_slice(&batch_length.to_be_bytes());
            if seal {
                seal_crc(&mut header);
            }
            header
        });
    runner(6_000)
        .run(&input, |bytes| assert_decodes_within_limits(&bytes))
        .unwrap();
}

#[test]
fn mutated_batches_of_every_codec_never_panic_or_allocate_past_the_limit() {
    let input = (valid_batch(), prop::collection::vec(mutation(), 1..5));
    runner(4_000)
        .run(&input, |(batch, mutations)| {
            assert_decodes_within_limits(&mutated(batch, &mutations))
        })
        .unwrap();
}

#[test]
fn batches_resealed_around_mutated_records_never_panic_or_allocate_past_the_limit() {
    let input = (
        valid_batch(),
        prop::collection::vec(mutation(), 1..5),
        prop::collection::vec(header_mutation(), 0..2),
    );
    runner(4_000)
        .run(&input, |(batch, record_mutations, header_mutations)| {
            let bytes = resealed(&batch, &record_mutations, &header_mutations);
            assert_decodes_within_limits(&bytes)
        })
        .unwrap();
}

#[test]
fn decompression_bombs_of_every_codec_stop_at_the_limit_without_allocating_past_it() {
    let bomb_bytes = 16 << 20;
    let zeros = vec![0u8; bomb_bytes];
    for codec in &CODECS[1..] {
        let compressed = codec.compress(&zeros).unwrap();
        let mut result = None;
        let largest = largest_allocation_of(|| {
            result = Some(codec.decompress(&compressed, DECOMPRESSED_BYTES_MAX));
        });
        assert!(
            matches!(result, Some(Err(RecordError::TooLarge { .. }))),
            "{codec:?}: {result:?}"
        );
        assert!(
            largest <= ALLOCATION_BYTES_MAX,
            "{codec:?} allocated {largest} bytes"
        );
    }
}

/// Where to damage a valid batch so that the CRC must notice: inside the
/// stored CRC itself, or a burst of at most 32 bits inside the bytes it
/// covers (a 32-bit CRC catches every such burst).
#[derive(Debug, Clone)]
enum CrcDamage {
    StoredCrc { at: Index, mask: u8 },
    Burst { at: Index, masks: Vec<u8> },
}

#[test]
fn a_damaged_crc_covered_byte_is_always_detected() {
    let damage = prop_oneof![
        (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| CrcDamage::StoredCrc { at, mask }),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..=4))
            .prop_filter("a burst changes something", |(_, masks)| masks
                .iter()
                .any(|&m| m != 0))
            .prop_map(|(at, masks)| CrcDamage::Burst { at, masks }),
    ];
    runner(6_000)
        .run(&(valid_batch(), damage), |(mut bytes, damage)| {
            match &damage {
                CrcDamage::StoredCrc { at, mask } => bytes[CRC_AT + at.index(4)] ^= mask,
                CrcDamage::Burst { at, masks } => {
                    let room = bytes.len() - CRC_COVERS_FROM - masks.len() + 1;
                    let start = CRC_COVERS_FROM + at.index(room);
                    for (byte, mask) in bytes[start..].iter_mut().zip(masks) {
                        *byte ^= mask;
                    }
                }
            }
            prop_assert!(RecordBatch::parse_and_verify(&bytes).is_err());
            if let Ok(batch) = RecordBatch::parse(&bytes) {
                let verdict = batch.verify_crc();
                prop_assert!(
                    matches!(verdict, Err(RecordError::CrcMismatch { .. })),
                    "{damage:?} passed the CRC check: {verdict:?}"
                );
            }
            Ok(())
        })
        .unwrap();
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn read_from(log: &PartitionLog, offset: i64) -> Vec<u8> {
    log.read(offset, u64::MAX)
        .and_then(|read| read.read_to_vec())
        .expect("the log reads back")
}

/// Appends damaged bytes to a log that already holds `before`, and checks
/// that the append is all or nothing and that an accepted append survives an
/// unclean reopen.
fn check_append(before: &[u8], damaged: Vec<u8>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = PartitionLog::open(dir.path(), "garbage-0", log_config(), true).expect("log opens");
    log.append(before).expect("the valid batch appends");
    let end_before = log.log_end_offset();
    let size_before = log.size_bytes();
    let stored_before = read_from(&log, 0);

    let expected = match log.append(&damaged) {
        Err(error) => {
            prop_assert!(
                matches!(
                    error,
                    LogError::InvalidBatch(_) | LogError::BatchTooLarge { .. }
                ),
                "refused for an unexpected reason: {error}"
            );
            prop_assert_eq!(log.log_end_offset(), end_before);
            prop_assert_eq!(log.size_bytes(), size_before);
            prop_assert_eq!(read_from(&log, 0), stored_before.clone());
            stored_before
        }
        Ok(info) => {
            prop_assert_eq!(info.base_offset, end_before);
            prop_assert_eq!(log.log_end_offset(), info.last_offset + 1);
            // Stored exactly, but at the offsets the log assigned.
            let stored = as_stored(&damaged, info.base_offset);
            prop_assert_eq!(read_from(&log, end_before), stored.clone());
            let mut all = stored_before;
            all.extend_from_slice(&stored);
            prop_assert_eq!(read_from(&log, 0), all.clone());
            all
        }
    };
    let end = log.log_end_offset();
    drop(log);
    let reopened =
        PartitionLog::open(dir.path(), "garbage-0", log_config(), false).expect("log reopens");
    prop_assert_eq!(reopened.log_end_offset(), end);
    prop_assert_eq!(read_from(&reopened, 0), expected);
    Ok(())
}

#[test]
fn a_log_refuses_a_mutated_append_unchanged_or_stores_it_exactly() {
    let input = (
        appendable_batch(),
        valid_batch(),
        valid_batch(),
        prop::collection::vec(mutation(), 0..4),
    );
    runner(600)
        .run(&input, |(before, first, second, mutations)| {
            // Two batches in one append: damage to the second must not let
            // the first in alone.
            let mut bytes = first;
            bytes.extend_from_slice(&second);
            check_append(&before, mutated(bytes, &mutations))
        })
        .unwrap();
}

#[test]
fn a_log_refuses_a_resealed_append_unchanged_or_stores_it_exactly() {
    let input = (
        appendable_batch(),
        valid_batch(),
        prop::collection::vec(mutation(), 0..4),
        prop::collection::vec(header_mutation(), 0..2),
    );
    runner(600)
        .run(
            &input,
            |(before, batch, record_mutations, header_mutations)| {
                check_append(
                    &before,
                    resealed(&batch, &record_mutations, &header_mutations),
                )
            },
        )
        .unwrap();
}

/// A 100-byte-per-record batch of `records` records with baseOffset `base`
/// (outside the CRC, so the batch stays valid whatever `base` is).
fn batch_at(base: i64, records: usize) -> Vec<u8> {
    let specs: Vec<RecordSpec> = (0..records)
        .map(|i| RecordSpec {
            key: None,
            value: Some(vec![b'v'; 100]),
            timestamp_ms: 1_700_000_000_000 + i as i64,
            headers: Vec::new(),
        })
        .collect();
    let mut bytes = build_batch(Compression::None, &specs, false);
    strata::record::set_base_offset(&mut bytes, base);
    RecordBatch::parse_and_verify(&bytes).expect("a valid batch");
    bytes
}

#[test]
fn validating_a_batch_based_at_the_top_of_the_offset_range_accepts_its_records() {
    for (base, records) in [(i64::MAX, 2), (i64::MAX - 1, 3), (i64::MIN, 2)] {
        let bytes = batch_at(base, records);
        let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
        // Validation checks the records, not the client's baseOffset: the
        // log overwrites it on append (below), so it cannot overflow there.
        let verdict = batch.validate_records(DECOMPRESSED_BYTES_MAX);
        assert!(verdict.is_ok(), "base {base}: {verdict:?}");
    }
}

#[test]
fn a_log_assigns_its_own_offsets_whatever_base_offset_the_client_sent() {
    for client_base in [i64::MAX, i64::MAX - 1, i64::MIN, -1] {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "garbage-0", log_config(), true).unwrap();
        let batch = batch_at(client_base, 3);
        // As in Kafka, the client's baseOffset is a placeholder the log
        // overwrites, so it cannot be a reason to refuse the batch.
        let info = log.append(&batch).unwrap();
        assert_eq!(
            (info.base_offset, info.last_offset),
            (0, 2),
            "client base {client_base}"
        );
        assert_eq!(read_from(&log, 0), as_stored(&batch, 0));
    }
}

/// Opens a partition whose only segment file holds `first` and then
/// `tail`, as after a crash, and checks that recovery cuts `tail` off: a
/// batch whose offsets a segment based at 0 cannot hold is no more part of
/// the log than garbage is.
fn recover_cutting_the_tail(first: &[u8], tail: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let mut segment = first.to_vec();
    segment.extend_from_slice(tail);
    std::fs::write(dir.path().join(strata::log::file_name(0, "log")), segment).unwrap();
    let config = LogConfig {
        index_interval_bytes: 1,
        ..log_config()
    };
    let log = PartitionLog::open(dir.path(), "garbage-0", config, false)
        .expect("recovery cuts a bad tail instead of refusing the log");
    let first_batch = RecordBatch::parse_and_verify(first).expect("a valid first batch");
    assert_eq!(log.log_end_offset(), first_batch.header().last_offset() + 1);
    assert_eq!(read_from(&log, 0), first, "only the first batch is served");
    let truncation = log.recovery_report().truncation.clone();
    assert!(truncation.is_some(), "the tail is reported as cut");
}

/// Bytes that cannot start a batch, so recovery searches past them for the
/// next valid one.
const GARBAGE: [u8; 10] = [0xee; 10];

#[test]
fn recovering_a_segment_whose_offsets_jump_past_what_the_index_can_hold_cuts_the_jump() {
    for separator in [&[][..], &GARBAGE] {
        let mut tail = separator.to_vec();
        tail.extend_from_slice(&batch_at(1 << 32, 1));
        recover_cutting_the_tail(&batch_at(0, 1), &tail);
    }
}

#[test]
fn recovering_a_segment_that_reaches_the_top_of_the_offset_range_cuts_the_batch_there() {
    for separator in [&[][..], &GARBAGE] {
        for (base, records) in [(i64::MAX, 1), (i64::MAX, 3), (i64::MAX - 1, 3)] {
            let mut tail = separator.to_vec();
            tail.extend_from_slice(&batch_at(base, records));
            recover_cutting_the_tail(&batch_at(0, 1), &tail);
        }
    }
}

#[test]
fn opening_a_segment_named_at_the_top_of_the_offset_range_does_not_panic() {
    // The file name sets the segment's base offset, and recovery insists the
    // first batch starts there, so this is the one way a stored batch can sit
    // at the very top of the range.
    for (base, records) in [(i64::MAX, 1), (i64::MAX - 1, 2)] {
        for clean in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(strata::log::file_name(base, "log"));
            std::fs::write(path, batch_at(base, records)).unwrap();
            let opened = PartitionLog::open(dir.path(), "garbage-0", log_config(), clean);
            let log = opened.unwrap_or_else(|e| panic!("base {base}, clean {clean}: {e}"));
            let (start, end) = (log.log_start_offset(), log.log_end_offset());
            assert_eq!(
                (start, end),
                (base, base),
                "base {base}, clean {clean}: the log runs from {start} to {end}"
            );
        }
    }
}

/// A committed offset encoded as the offset store writes it (the format
/// drawn in `strata::broker::group::offsets`).
fn encode_committed(committed: &CommittedOffset) -> Vec<u8> {
    let mut value = vec![1u8];
    value.extend_from_slice(&committed.offset.to_be_bytes());
    value.extend_from_slice(&committed.leader_epoch.to_be_bytes());
    value.extend_from_slice(&committed.commit_time_ms.to_be_bytes());
    match &committed.metadata {
        Some(text) => {
            value.extend_from_slice(&(text.len() as i32).to_be_bytes());
            value.extend_from_slice(text.as_bytes());
        }
        None => value.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    value
}

fn committed_offset() -> impl Strategy<Value = CommittedOffset> {
    (
        edge_value(),
        any::<i32>(),
        prop::option::of(".{0,20}"),
        edge_value(),
    )
        .prop_map(
            |(offset, leader_epoch, metadata, commit_time_ms)| CommittedOffset {
                offset,
                leader_epoch,
                metadata,
                commit_time_ms,
            },
        )
}

/// Arbitrary bytes, or a valid encoding damaged.
fn garbage_or_damaged(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (valid, prop::collection::vec(mutation(), 1..4))
            .prop_map(|(bytes, mutations)| mutated(bytes, &mutations)),
    ]
}

#[test]
fn a_stored_group_offset_decodes_to_a_value_that_round_trips_or_to_a_malformed_value_error() {
    let input = garbage_or_damaged(committed_offset().prop_map(|c| encode_committed(&c)));
    runner(4_000)
        .run(&input, |bytes| {
            match offsets::decode(&bytes) {
                Ok(committed) => {
                    let again = offsets::decode(&encode_committed(&committed));
                    prop_assert_eq!(again.ok(), Some(committed));
                }
                Err(error) => prop_assert!(
                    error
                        .to_string()
                        .starts_with("group offset store: malformed offset value"),
                    "{error}"
                ),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn every_stored_group_offset_decodes_to_itself() {
    runner(1_000)
        .run(&committed_offset(), |committed| {
            let decoded = offsets::decode(&encode_committed(&committed));
            prop_assert_eq!(decoded.ok(), Some(committed));
            Ok(())
        })
        .unwrap();
}

/// A subscription as a member sends it in JoinGroup, by the client's encoder.
fn encoded_subscription(topics: &[String]) -> Vec<u8> {
    encode_subscription(topics)
        .expect("subscription encodes")
        .to_vec()
}

/// An assignment as the leader sends it in SyncGroup, by the client's encoder.
fn encoded_assignment(partitions: &[(String, i32)]) -> Vec<u8> {
    encode_assignment(partitions)
        .expect("assignment encodes")
        .to_vec()
}

fn topic() -> impl Strategy<Value = String> {
    "[a-z.]{1,12}"
}

#[test]
fn a_consumer_subscription_decodes_to_topics_that_round_trip_or_to_a_protocol_error() {
    let valid = prop::collection::vec(topic(), 0..6).prop_map(|t| encoded_subscription(&t));
    runner(4_000)
        .run(&garbage_or_damaged(valid), |bytes| {
            match decode_subscription(&bytes) {
                Ok(topics) => {
                    let again = decode_subscription(&encoded_subscription(&topics));
                    prop_assert_eq!(again.ok(), Some(topics));
                }
                Err(error) => {
                    prop_assert!(matches!(error, ClientError::Protocol(_)), "{error}");
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_consumer_assignment_decodes_to_partitions_that_round_trip_or_to_a_protocol_error() {
    let valid =
        prop::collection::vec((topic(), 0i32..64), 0..8).prop_map(|p| encoded_assignment(&p));
    runner(4_000)
        .run(&garbage_or_damaged(valid), |bytes| {
            match decode_assignment(&bytes) {
                Ok(partitions) => {
                    let again = decode_assignment(&encoded_assignment(&partitions));
                    prop_assert_eq!(again.ok(), Some(partitions));
                }
                Err(error) => {
                    prop_assert!(matches!(error, ClientError::Protocol(_)), "{error}");
                }
            }
            Ok(())
        })
        .unwrap();
}
