//! The model itself: what a crash keeps and loses.

use super::*;

/// Seeds each property is checked under.
const SEEDS: u64 = 64;

fn storage() -> (tempfile::TempDir, PowerLoss) {
    let dir = tempfile::tempdir().unwrap();
    let storage = PowerLoss::new(dir.path()).unwrap();
    (dir, storage)
}

fn write(storage: &PowerLoss, file: &File, bytes: &[u8], at: u64) {
    storage
        .write_at(file, &mut [IoSlice::new(bytes)], at)
        .unwrap();
}

#[test]
fn synced_bytes_and_names_survive_every_crash() {
    for seed in 0..SEEDS {
        let (dir, storage) = storage();
        let path = dir.path().join("f");
        let file = storage.open(&path, OpenMode::CreateNew).unwrap();
        write(&storage, &file, b"durable", 0);
        storage.sync(&file).unwrap();
        storage.sync_dir(dir.path()).unwrap();
        write(&storage, &file, b"-unsynced", 7);
        storage.cut();
        drop(file);
        storage.restore(seed).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"durable"), "seed {seed}: {bytes:?}");
        assert!(bytes.len() <= b"durable-unsynced".len());
    }
}

#[test]
fn unsynced_bytes_and_names_are_sometimes_lost_never_invented() {
    let (mut names_lost, mut bytes_lost) = (false, false);
    for seed in 0..SEEDS {
        let (dir, storage) = storage();
        let path = dir.path().join("f");
        let file = storage.open(&path, OpenMode::CreateNew).unwrap();
        write(&storage, &file, b"abc", 0);
        storage.cut();
        drop(file);
        storage.restore(seed).unwrap();
        match std::fs::read(&path) {
            Err(_) => names_lost = true,
            Ok(bytes) => {
                // A prefix, or the whole length with zeros after a tear.
                assert!(bytes.len() <= 3, "seed {seed}: {bytes:?}");
                assert!(
                    bytes.iter().zip(b"abc").all(|(a, b)| a == b || *a == 0),
                    "seed {seed}: {bytes:?}"
                );
                bytes_lost |= bytes != b"abc";
            }
        }
    }
    assert!(
        names_lost && bytes_lost,
        "a crash never lost anything unsynced"
    );
}

#[test]
fn a_durable_change_keeps_every_earlier_one() {
    for seed in 0..SEEDS {
        let (dir, storage) = storage();
        let sub = dir.path().join("sub");
        storage.create_dir_all(&sub).unwrap();
        storage
            .open(&dir.path().join("early"), OpenMode::CreateNew)
            .unwrap();
        storage
            .open(&sub.join("late"), OpenMode::CreateNew)
            .unwrap();
        // Only the later change's directory is synced.
        storage.sync_dir(&sub).unwrap();
        storage.cut();
        storage.restore(seed).unwrap();
        assert!(dir.path().join("early").exists(), "seed {seed}");
        assert!(sub.join("late").exists(), "seed {seed}");
    }
}

#[test]
fn a_failed_sync_drops_the_unsynced_bytes_for_good() {
    for seed in 0..SEEDS {
        let (dir, storage) = storage();
        let path = dir.path().join("f");
        let file = storage.open(&path, OpenMode::CreateNew).unwrap();
        storage.sync_dir(dir.path()).unwrap();
        write(&storage, &file, b"lost", 0);
        storage.fail_syncs(1);
        assert!(storage.sync(&file).is_err());
        storage.sync(&file).unwrap();
        storage.cut();
        drop(file);
        storage.restore(seed).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"", "seed {seed}");
    }
}

#[test]
fn a_cut_stops_every_later_call() {
    let (dir, storage) = storage();
    storage.cut_after(1);
    let file = storage
        .open(&dir.path().join("f"), OpenMode::CreateNew)
        .unwrap();
    assert!(storage.sync(&file).is_err());
    assert!(storage.is_off());
    assert!(
        storage
            .open(&dir.path().join("g"), OpenMode::CreateNew)
            .is_err()
    );
}
