//! Records to produce, generated within what the producing client can send,
//! and the records a consumer must then return, byte for byte.

use crate::driver::{Capabilities, Consumed, RecordSpec, hex};
use crate::support::Rng;

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// `count` records spread round-robin over `partitions`, with keys, values
/// and headers of every shape the client can send (binary, empty, null,
/// large, repeated header names) and, where the client sets them,
/// strictly increasing explicit timestamps 3 ms apart from `timestamp_base`.
pub fn generate(
    caps: Capabilities,
    count: usize,
    partitions: i32,
    seed: u64,
    timestamp_base: i64,
) -> Vec<RecordSpec> {
    let mut rng = Rng(seed);
    // kcat sends one header list with every record of a run.
    let shared_headers = vec![
        ("trace".to_string(), Some(hex(b"t-1"))),
        ("source".to_string(), Some(hex(b"compat suite"))),
    ];
    (0..count)
        .map(|i| {
            let key = if caps.nulls && i % 5 == 1 {
                None
            } else {
                let len = 1 + rng_below(&mut rng, 24);
                Some(hex(&bytes(&mut rng, caps, len)))
            };
            let value = match i % 7 {
                3 if caps.nulls && (key.is_some() || caps.null_key_and_value) => None,
                4 if caps.binary => Some(String::new()),
                5 => Some(hex(&compressible(&mut rng, 20_000))),
                _ => {
                    let len = 1 + rng_below(&mut rng, 300);
                    Some(hex(&bytes(&mut rng, caps, len)))
                }
            };
            let headers = if caps.per_record_headers {
                headers(&mut rng, caps, i)
            } else {
                shared_headers.clone()
            };
            RecordSpec {
                partition: (i as i32) % partitions,
                key,
                value,
                headers,
                timestamp: caps.timestamps.then_some(timestamp_base + 3 * i as i64),
            }
        })
        .collect()
}

fn rng_below(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// Random bytes; for a text-only client, printable ASCII and UTF-8 without
/// the delimiters kcat splits on.
fn bytes(rng: &mut Rng, caps: Capabilities, len: usize) -> Vec<u8> {
    if caps.binary {
        return rng.bytes(len);
    }
    const TEXT: &str =
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 ._-/!?é€🦀";
    let chars: Vec<char> = TEXT.chars().collect();
    let mut out = String::new();
    while out.len() < len {
        out.push(chars[rng_below(rng, chars.len())]);
    }
    out.into_bytes()
}

/// Text that compresses well, so every codec has real work to do.
fn compressible(rng: &mut Rng, len: usize) -> Vec<u8> {
    let words = ["stream ", "partition ", "offset ", "segment ", "batch "];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        out.extend_from_slice(words[rng_below(rng, words.len())].as_bytes());
    }
    out.truncate(len);
    out
}

/// 0 to 3 headers; a repeated name comes right after its first use (a
/// client that keeps headers in a map keeps that order).
fn headers(rng: &mut Rng, caps: Capabilities, i: usize) -> Vec<(String, Option<String>)> {
    let mut headers = Vec::new();
    for h in 0..i % 4 {
        let name = if h == 2 && i % 8 == 3 {
            headers
                .last()
                .map(|(name, _): &(String, Option<String>)| name.clone())
                .unwrap()
        } else {
            format!("h-{h}-{}", i % 3)
        };
        let value = if caps.null_header_values && h == 1 && i % 6 == 1 {
            None
        } else {
            let len = rng_below(rng, 40);
            let text = Capabilities {
                binary: caps.binary_header_values,
                ..caps
            };
            Some(hex(&bytes(rng, text, len)))
        };
        headers.push((name, value));
    }
    headers
}

/// The records a consumer must return for `specs` appended to partitions
/// that held `starts[p]` records before, in the order produced; records
/// without an explicit timestamp take the one the broker stored, which must
/// lie in `[produced_from, produced_to]`.
pub fn expected(
    specs: &[RecordSpec],
    starts: &[i64],
    consumed: &[Consumed],
    produced_from: i64,
    produced_to: i64,
) -> Vec<Consumed> {
    let mut next = starts.to_vec();
    let mut out: Vec<Consumed> = specs
        .iter()
        .map(|spec| {
            let p = spec.partition as usize;
            let offset = next[p];
            next[p] += 1;
            let timestamp = spec.timestamp.unwrap_or_else(|| {
                let stored = consumed
                    .iter()
                    .find(|c| c.partition == spec.partition && c.offset == offset)
                    .map_or(-1, |c| c.timestamp);
                assert!(
                    (produced_from..=produced_to).contains(&stored),
                    "record {}-{offset}: timestamp {stored} is not the producer's clock \
                     ({produced_from}..={produced_to})",
                    spec.partition
                );
                stored
            });
            Consumed {
                partition: spec.partition,
                offset,
                timestamp,
                key: spec.key.clone(),
                value: spec.value.clone(),
                headers: spec.headers.clone(),
            }
        })
        .collect();
    out.sort_by_key(|c| (c.partition, c.offset));
    out
}

/// Asserts two record lists are equal, naming the first difference.
pub fn assert_same(what: &str, got: &[Consumed], want: &[Consumed]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g, w,
            "{what}: record {i} (partition {}, offset {}) differs",
            w.partition, w.offset
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} records returned, {} expected",
        got.len(),
        want.len()
    );
}
