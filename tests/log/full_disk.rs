//! A full disk: appends fail with a clear error, lose nothing, leave no
//! partial batch behind, and work again once space is freed; through the
//! broker, producers get KAFKA_STORAGE_ERROR saying so, what is stored
//! stays readable, and a broker restarted after space returns starts
//! clean.
//!
//! Runs on a small tmpfs. Mounting one needs root (as in CI) or, failing
//! that, a user and mount namespace of its own: the test then runs itself
//! again under `unshare --user --map-root-user --mount`. Where neither
//! works it fails and says why; it never passes without checking.

use crate::support;

use std::path::Path;
use std::process::Command;

use strata::log::{LogConfig, LogError, PartitionLog};

/// Set in the copy of the test that runs inside its own namespaces.
const IN_NAMESPACE: &str = "STRATA_FULL_DISK_IN_NAMESPACE";
/// Kafka's KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;

struct Mount(tempfile::TempDir);

impl Mount {
    /// Mounts a tmpfs of `size` on a fresh directory, or says why not.
    fn tmpfs(size: &str) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Self(dir))
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

/// Runs this test again in a user and mount namespace of its own, where
/// mounting a tmpfs needs no privilege, and fails unless it passed there.
fn run_in_namespace(test: &str, why_not_here: &str) {
    let exe = std::env::current_exe().expect("test binary path");
    let output = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount"])
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(IN_NAMESPACE, "1")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot mount a tmpfs ({why_not_here}) and cannot run unshare to mount one \
                 in a namespace of its own ({e}): run as root or install util-linux"
            )
        });
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success() && stdout.contains(&format!("test {test} ... ok")),
        "cannot mount a tmpfs ({why_not_here}); in a namespace of its own the test \
         did not pass ({}), are user namespaces disabled?\n{stdout}\n{stderr}",
        output.status
    );
}

#[test]
fn appends_on_a_full_disk_fail_cleanly_and_resume_after_space_is_freed() {
    let mount = match Mount::tmpfs("1m") {
        Ok(mount) => mount,
        Err(why) if std::env::var_os(IN_NAMESPACE).is_none() => {
            return run_in_namespace(
                "appends_on_a_full_disk_fail_cleanly_and_resume_after_space_is_freed",
                &why,
            );
        }
        Err(why) => panic!("cannot mount a tmpfs even in a namespace of its own: {why}"),
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

#[test]
fn the_broker_on_a_full_disk_refuses_with_a_storage_error_and_restarts_clean() {
    use kafka_protocol::messages::{ApiKey, FetchResponse, ProduceResponse};
    use support::wire::{call_blocking, fetch_request, produce_request};

    let mount = match Mount::tmpfs("2m") {
        Ok(mount) => mount,
        Err(why) if std::env::var_os(IN_NAMESPACE).is_none() => {
            return run_in_namespace(
                "the_broker_on_a_full_disk_refuses_with_a_storage_error_and_restarts_clean",
                &why,
            );
        }
        Err(why) => panic!("cannot mount a tmpfs even in a namespace of its own: {why}"),
    };
    let ballast = mount.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 * 1024]).unwrap();
    let data = mount.path().join("data");
    {
        let config = LogConfig {
            segment_index_bytes: 64 * 1024,
            ..LogConfig::default()
        };
        let log = strata::log::LogManager::open(&data, config).unwrap();
        log.create_topic("full", 1, Default::default()).unwrap();
        log.close().unwrap();
    }
    let binary = env!("CARGO_BIN_EXE_strata");
    let mut server = support::ServerProcess::start(binary, &data);
    let mut stream = std::net::TcpStream::connect(&server.addr).unwrap();
    let value = "x".repeat(8 * 1024);
    let produce = |stream: &mut std::net::TcpStream, value: &str| {
        let request = produce_request(
            -1,
            "full",
            0,
            support::batch(&[value], strata::log::now_ms()),
        );
        let response: ProduceResponse =
            call_blocking(stream, ApiKey::Produce, 9, &request).expect("answered");
        let answer = response.responses[0].partition_responses[0].clone();
        (answer.error_code, answer.base_offset, answer.error_message)
    };
    let mut acked = 0i64;
    let (code, message) = loop {
        let (code, offset, message) = produce(&mut stream, &value);
        if code != 0 {
            break (code, message);
        }
        assert_eq!(offset, acked);
        acked += 1;
        assert!(acked < 1000, "a 2 MiB file system never filled up");
    };
    assert_eq!(code, KAFKA_STORAGE_ERROR);
    let message = message.map(|m| m.to_string()).unwrap_or_default();
    assert!(
        message.contains("No space left"),
        "the producer is told why: {message:?}"
    );

    // Everything acknowledged reads back while the disk is full.
    let read = |stream: &mut std::net::TcpStream| {
        let request = fetch_request("full", &[0], 0, 64 << 20, 0);
        let response: FetchResponse =
            call_blocking(stream, ApiKey::Fetch, 12, &request).expect("fetch answered");
        let records = response.responses[0].partitions[0]
            .records
            .clone()
            .unwrap_or_default();
        support::decode(&records)
    };
    let stored = read(&mut stream);
    assert_eq!(stored.len() as i64, acked);

    // Space returns: appends resume where they stopped, and after a
    // restart (a SIGKILL, the harder case) everything is served and
    // appends go on from the end.
    std::fs::remove_file(&ballast).unwrap();
    assert_eq!(produce(&mut stream, "after").0, 0);
    server.kill_and_restart(binary, &data);
    let mut stream = std::net::TcpStream::connect(&server.addr).unwrap();
    let stored = read(&mut stream);
    assert_eq!(stored.len() as i64, acked + 1);
    assert_eq!(stored.last().unwrap().value.as_deref(), Some(&b"after"[..]));
    assert_eq!(produce(&mut stream, "restarted").1, acked + 1);
}
