//! Any bytes as a segment's offset index and time index files, opened as a
//! sealed segment's are, then looked up.
//!
//! The files are derived data the log checks on open and rebuilds when the
//! check fails, but lookups run on them before and after: whatever the
//! bytes, a lookup must not panic and must return one of the file's
//! entries. On files that pass their check, lookups must be exact: the
//! last entry at or below the key, and nothing when every entry is above.

use strata::log::storage::Disk;
use strata::log::{OffsetIndex, TimeIndex, file_name};

/// Base offsets a segment can have and still address `u32::MAX` offsets
/// past its base without leaving `i64`.
const BASE_OFFSET_MAX: i64 = i64::MAX - u32::MAX as i64;
/// Keys probed beyond the entries' own.
const EXTREMES: [i64; 4] = [i64::MIN, -1, 0, i64::MAX];

pub fn check(data: &[u8]) {
    let Some((base, entries)) = data.split_first_chunk::<8>() else {
        return;
    };
    let base_offset = i64::from_be_bytes(*base).rem_euclid(BASE_OFFSET_MAX + 1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let offsets_path = dir.path().join(file_name(base_offset, "index"));
    let times_path = dir.path().join(file_name(base_offset, "timeindex"));
    std::fs::write(&offsets_path, entries).expect("index written");
    std::fs::write(&times_path, entries).expect("time index written");

    let offsets =
        OffsetIndex::open(&Disk::os(), &offsets_path, base_offset, 0).expect("index opens");
    check_offset_index(&offsets, entries.len());
    let times =
        TimeIndex::open(&Disk::os(), &times_path, base_offset, 0).expect("time index opens");
    check_time_index(&times, entries.len());
}

/// An index of `file_bytes` holds every whole entry, or none when the file
/// is not a whole number of entries (it is then rebuilt).
fn expected_len(file_bytes: usize, entry_bytes: usize) -> usize {
    if file_bytes.is_multiple_of(entry_bytes) {
        file_bytes / entry_bytes
    } else {
        0
    }
}

fn check_offset_index(index: &OffsetIndex, file_bytes: usize) {
    assert_eq!(index.len(), expected_len(file_bytes, 8));
    let entries: Vec<(i64, u64)> = (0..index.len()).map(|i| index.entry(i)).collect();
    let exact = index.check(u64::MAX).is_ok();
    let mut keys: Vec<i64> = EXTREMES.to_vec();
    for &(offset, _) in &entries {
        keys.extend([offset.saturating_sub(1), offset, offset.saturating_add(1)]);
    }
    for key in keys {
        let found = index.lookup(key);
        if let Some(entry) = found {
            assert!(entries.contains(&entry), "lookup({key}) gave {entry:?}");
        }
        if exact {
            assert_eq!(found, entries.iter().rev().find(|e| e.0 <= key).copied());
        }
        let position = u64::try_from(key).unwrap_or(0);
        let by_position = index.lookup_position(position);
        if let Some(entry) = by_position {
            assert!(entries.contains(&entry));
        }
        if exact {
            let expected = entries.iter().rev().find(|e| e.1 <= position).copied();
            assert_eq!(by_position, expected);
        }
    }
}

fn check_time_index(index: &TimeIndex, file_bytes: usize) {
    assert_eq!(index.len(), expected_len(file_bytes, 12));
    let entries: Vec<(i64, i64)> = (0..index.len()).map(|i| index.entry(i)).collect();
    assert_eq!(index.last(), entries.last().copied());
    let exact = index.check(i64::MAX).is_ok();
    let mut keys: Vec<i64> = EXTREMES.to_vec();
    for &(timestamp, _) in &entries {
        keys.extend([
            timestamp.saturating_sub(1),
            timestamp,
            timestamp.saturating_add(1),
        ]);
    }
    for key in keys {
        let found = index.lookup_before(key);
        if let Some(entry) = found {
            assert!(
                entries.contains(&entry),
                "lookup_before({key}) gave {entry:?}"
            );
        }
        if exact {
            assert_eq!(found, entries.iter().rev().find(|e| e.0 < key).copied());
        }
    }
}
