//! SIGTERM stops `strata serve` cleanly: it exits 0 and leaves the
//! clean-shutdown marker, so the next open recovers nothing.

use crate::support;

use std::time::Duration;

use strata::log::{LogConfig, LogManager};

#[test]
fn sigterm_shuts_the_broker_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let topic = log.create_topic("kept", 1, Default::default()).unwrap();
        topic.partitions[0]
            .append(&support::batch(&["a", "b"], 1))
            .unwrap();
        log.close().unwrap();
    }
    let mut server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut status = None;
    support::wait_until(
        "the broker to stop on SIGTERM",
        Duration::from_secs(20),
        || {
            status = server.child.try_wait().unwrap();
            status.is_some()
        },
    );
    let status = status.expect("the broker stopped");
    assert!(status.success(), "{status}");
    assert!(dir.path().join(".clean-shutdown").exists());

    let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let partition = log.partition("kept", 0).unwrap();
    assert_eq!(partition.recovery_report().segments_scanned, 0);
    assert_eq!(partition.log_end_offset(), 2);
}
