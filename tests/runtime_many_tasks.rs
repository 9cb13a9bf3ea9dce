//! One instance of a remote app given hundreds of tasks: every one starts
//! (none waits for a thread of its own), and the instance's memory stays
//! within its state memory budget plus the overhead README documents.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::ServerProcess;

const PARTITIONS: u32 = 600;
/// `--state-memory` for the instance.
const STATE_MEMORY: u64 = 64 << 20;
/// What the instance holds beyond the budget (README, "Limits"): a base,
/// and per task its database's own structures, its fetch connection and
/// buffers.
const OVERHEAD_BASE: u64 = 64 << 20;
const OVERHEAD_PER_TASK: u64 = 1 << 19;

fn strata(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "strata {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `latest status`: the rows of the instance's tasks.
fn status(location: &[&str]) -> String {
    let output = Command::new(support::example::example("latest"))
        .args(location)
        .arg("status")
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A process's resident and peak resident memory, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        (status.lines())
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .unwrap()
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |t| t.count())
}

fn broker(dir: &Path) -> ServerProcess {
    let config = dir.join("strata.toml");
    std::fs::write(
        &config,
        "group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 500\n",
    )
    .unwrap();
    let args = [std::ffi::OsStr::new("--config"), config.as_os_str()];
    let strata = env!("CARGO_BIN_EXE_strata");
    ServerProcess::start_with(strata, &dir.join("broker"), &args, Stdio::null())
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
    let mut produce = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "produce",
            "changes",
            "--key-separator",
            "=",
            "--bootstrap",
            &addr,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = produce.stdin.take().unwrap();
        for key in 0..PARTITIONS * 20 {
            writeln!(stdin, "k{key}=v{key}").unwrap();
        }
    }
    assert!(produce.wait().unwrap().success());

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
    let (resident, peak) = memory(pid);
    let threads = threads(pid);
    let _ = app.kill();
    let _ = app.wait();
    let bound = STATE_MEMORY + OVERHEAD_BASE + OVERHEAD_PER_TASK * u64::from(PARTITIONS);
    eprintln!(
        "{PARTITIONS} tasks running: resident {} MiB (peak {} MiB), {threads} threads; bound {} MiB",
        resident >> 20,
        peak >> 20,
        bound >> 20
    );
    assert!(peak <= bound, "peak resident {peak} past {bound}");
}
