//! A full disk: appends fail with a clear error, lose nothing, leave no
//! partial batch behind, and work again once space is freed.
//!
//! Runs on a small tmpfs, which needs root (as in CI); elsewhere it says so
//! and checks nothing.

mod support;

use std::path::Path;
use std::process::Command;

use strata::log::{LogConfig, LogError, PartitionLog};

struct Mount(tempfile::TempDir);

impl Mount {
    fn tmpfs(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        status.success().then_some(Self(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn appends_on_a_full_disk_fail_cleanly_and_resume_after_space_is_freed() {
    let Some(mount) = Mount::tmpfs("1m") else {
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    };
    // Room that can be given back later.
    let ballast = mount.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 128 * 1024]).unwrap();

    let config = LogConfig {
        segment_index_bytes: 64 * 1024,
        ..LogConfig::default()
    };
    let dir = mount.path().join("t-0");
    let log = PartitionLog::open(&dir, "t-0", config.clone(), true).unwrap();
    let value = "x".repeat(8 * 1024);
    let mut appended = Vec::new();
    let error = loop {
        let batch = support::batch(&[value.as_str()], appended.len() as i64);
        match log.append(&batch) {
            Ok(info) => appended.push(info.base_offset),
            Err(error) => break error,
        }
        assert!(appended.len() < 1000, "a 1 MiB file system never filled up");
    };
    assert!(matches!(error, LogError::Io { .. }), "{error}");
    assert!(error.to_string().contains("No space left"), "{error}");

    // Nothing half-written: the log ends at the last acknowledged batch and
    // everything reads back.
    let end = appended.len() as i64;
    assert_eq!(log.log_end_offset(), end);
    let records = support::read_all(&log, 0);
    assert_eq!(records.len(), appended.len());
    assert!(
        records
            .iter()
            .all(|r| r.value.as_deref() == Some(value.as_bytes()))
    );
    assert!(log.read_only_reason().is_none());

    std::fs::remove_file(&ballast).unwrap();
    let info = log.append(&support::batch(&["after"], 0)).unwrap();
    assert_eq!(info.base_offset, end);
    log.flush().unwrap();
    drop(log);

    let reopened = PartitionLog::open(&dir, "t-0", config, false).unwrap();
    assert_eq!(reopened.log_end_offset(), end + 1);
    assert!(reopened.recovery_report().truncation.is_none());
}
