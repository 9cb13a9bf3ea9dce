//! One instance of a remote app given hundreds of tasks: every one starts
//! (none waits for a thread of its own), the instance's memory stays
//! within its state memory budget plus the overhead README documents, and
//! its connections do not grow with its tasks (they fetch through one pool
//! per task thread).

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::ServerProcess;
use support::process::strata;

const PARTITIONS: u32 = 600;
/// `--state-memory` for the instance.
const STATE_MEMORY: u64 = 64 << 20;
/// What the instance holds beyond the budget (README, "Limits"): a base,
/// and per task its database's own structures, its fetch connection and
/// buffers.
const OVERHEAD_BASE: u64 = 64 << 20;
const OVERHEAD_PER_TASK: u64 = 1 << 19;

/// `latest status`: the rows of the instance's tasks.
fn status(location: &[&str]) -> String {
    let output = Command::new(support::example::example("latest"))
        .args(location)
        .arg("status")
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The most sockets the instance may hold, whatever its task count: per
/// task thread a fetch connection to each broker (one here), and the
/// shared cluster's connections (metadata, produce, group, transactions).
const SOCKETS_MAX: usize = 16;

/// How many sockets process `pid` holds.
fn sockets(pid: u32) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the process runs");
    (fds.filter_map(Result::ok))
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |t| t.count())
}

fn broker(dir: &Path) -> ServerProcess {
    support::server_process::start_configured(
        dir,
        "group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 500\n",
    )
}

#[test]
fn one_instance_runs_six_hundred_tasks_within_its_state_memory() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let addr = broker.addr.clone();
    let partitions = PARTITIONS.to_string();
    strata(&[
        "topics",
        "create",
        "changes",
        "--partitions",
        &partitions,
        "--bootstrap",
        &addr,
    ]);
    let lines: Vec<String> = (0..PARTITIONS * 20).map(|k| format!("k{k}=v{k}")).collect();
    support::process::produce_keyed(&addr, "changes", &lines);

    let state = dir.path().join("state");
    let location = ["--bootstrap", &addr, "--state-dir", state.to_str().unwrap()];
    let budget = STATE_MEMORY.to_string();
    let mut app = Command::new(support::example::example("latest"))
        .args(location)
        .args(["run", "--state-memory", &budget, "--task-threads", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = app.id();
    let caught_up = |status: &str| {
        let rows: Vec<Vec<&str>> = (status.lines())
            .filter(|l| l.starts_with("latest/"))
            .filter(|l| l.ends_with("running"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        rows.len() == PARTITIONS as usize
            && rows
                .iter()
                .all(|c| c.len() >= 6 && c[4] == "0" && c[5] == "0")
    };
    support::wait_until(
        "every task runs, caught up",
        Duration::from_secs(600),
        || caught_up(&status(&location)),
    );
    let (resident, peak) = support::server_process::memory_bytes_of(pid);
    let threads = threads(pid);
    let sockets = sockets(pid);
    let _ = app.kill();
    let _ = app.wait();
    let bound = STATE_MEMORY + OVERHEAD_BASE + OVERHEAD_PER_TASK * u64::from(PARTITIONS);
    eprintln!(
        "{PARTITIONS} tasks running: resident {} MiB (peak {} MiB), {threads} threads, {sockets} sockets; bound {} MiB",
        resident >> 20,
        peak >> 20,
        bound >> 20
    );
    assert!(peak <= bound, "peak resident {peak} past {bound}");
    assert!(
        sockets <= SOCKETS_MAX,
        "{sockets} sockets for {PARTITIONS} tasks on 2 task threads"
    );
}
