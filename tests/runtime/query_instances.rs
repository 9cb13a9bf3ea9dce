//! Queries of an app running as two instances against `strata serve`
//! (the wordcount example, remote): each instance answers from the tasks
//! it runs and asks the other for the rest, so either one answers every
//! key, merged in key order; `<app> query` on an instance's state
//! directory goes through its endpoint; an instance serving no queries
//! leaves its tasks under `elsewhere`, named.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const PARTITIONS: i32 = 4;
const WAIT: Duration = Duration::from_secs(120);

fn wordcount() -> std::path::PathBuf {
    support::example::example("wordcount")
}

/// The words of the input: `w00` … `w39`, word `wN` N + 1 times.
fn lines() -> Vec<String> {
    (0..40)
        .flat_map(|n| std::iter::repeat_n(format!("w{n:02}"), n + 1))
        .collect::<Vec<_>>()
        .chunks(7)
        .map(|words| words.join(" "))
        .collect()
}

fn append_lines(data: &Path) {
    support::with_topic(data, "lines", PARTITIONS, &[], |topic| {
        let now = strata::log::now_ms();
        for (i, line) in lines().iter().enumerate() {
            let partition = &topic.partitions[i % PARTITIONS as usize];
            partition.append(&support::batch(&[line], now)).unwrap();
        }
    });
}

/// An instance of wordcount on `state`, answering queries when `query`.
fn instance(broker: &str, state: &Path, query: bool) -> Instance {
    let mut command = Command::new(wordcount());
    command
        .env("STRATA_SESSION_TIMEOUT_MS", "1500")
        .args(["--bootstrap", broker, "--state-dir"])
        .arg(state)
        .arg("run");
    if query {
        command.args(["--query", "127.0.0.1:0"]);
    }
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Instance)
        .expect("wordcount starts")
}

fn query_address(state: &Path) -> String {
    let file = state.join("query-address");
    support::wait_until("the query address", WAIT, || file.exists());
    std::fs::read_to_string(file).unwrap()
}

fn get(addr: &str, target: &str) -> (u16, Value) {
    support::http::get_json(addr, target)
}

/// Word → count from an answer's entries.
fn counts(answer: &Value) -> BTreeMap<String, u64> {
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_string(),
                e["value"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn expected() -> BTreeMap<String, u64> {
    (0..40u64).map(|n| (format!("w{n:02}"), n + 1)).collect()
}

/// The tasks an answer was read from, by instance.
fn tasks(answer: &Value) -> Vec<String> {
    let tasks = answer["tasks"].as_array().cloned().unwrap_or_default();
    tasks
        .iter()
        .filter_map(|t| t.as_str().map(String::from))
        .collect()
}

/// `strata serve` on `data`, letting groups rebalance at once and take
/// short session timeouts.
fn broker(dir: &Path, data: &Path) -> support::ServerProcess {
    let config = dir.join("strata.toml");
    std::fs::write(
        &config,
        "group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 500\n",
    )
    .unwrap();
    let args = [std::ffi::OsStr::new("--config"), config.as_os_str()];
    let strata = env!("CARGO_BIN_EXE_strata");
    support::ServerProcess::start_with(strata, data, &args, Stdio::null())
}

/// An instance's process, stopped (SIGTERM) when dropped, so a failing
/// test leaves none behind.
struct Instance(Child);

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn stop(instance: Instance) {
    drop(instance);
}

#[test]
fn either_instance_answers_every_key_asking_the_other_for_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("broker");
    append_lines(&data);
    let broker = broker(dir.path(), &data);
    let (state_a, state_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = instance(&broker.addr, &state_a, true);
    let b = instance(&broker.addr, &state_b, true);
    let (addr_a, addr_b) = (query_address(&state_a), query_address(&state_b));

    // Both instances run tasks, and every word is counted.
    let mut answer = Value::Null;
    support::wait_until("every word counted, asked of a", WAIT, || {
        let (status, body) = get(&addr_a, "/stores/counts?limit=100");
        answer = body;
        status == 200 && counts(&answer) == expected()
    });
    assert_eq!(tasks(&answer).len(), PARTITIONS as usize, "{answer}");
    let from_b = get(&addr_b, "/stores/counts?limit=100").1;
    assert_eq!(counts(&from_b), expected(), "{from_b}");
    let keys: Vec<&str> = (answer["entries"].as_array().unwrap().iter())
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 40, "each key once: {keys:?}");
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "merged in key order: {keys:?}"
    );

    // One key, whichever instance holds it; a limit over both instances.
    for n in [0, 17, 39] {
        let word = format!("w{n:02}");
        for addr in [&addr_a, &addr_b] {
            let (status, one) = get(addr, &format!("/stores/counts/keys/{word}"));
            assert_eq!(status, 200, "{word} from {addr}: {one}");
            assert_eq!(counts(&one)[&word], n as u64 + 1);
        }
    }
    let (_, first) = get(&addr_b, "/stores/counts?prefix=w1&limit=3");
    assert_eq!(
        counts(&first).keys().collect::<Vec<_>>(),
        ["w10", "w11", "w12"]
    );
    assert_eq!(first["truncated"], Value::Bool(true));

    // The command line goes through the instance running on its state.
    let output = Command::new(wordcount())
        .args(["--bootstrap", &broker.addr, "--state-dir"])
        .arg(&state_a)
        .args(["query", "counts", "w25"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "w25\t26\n");

    // An instance that serves no queries cannot be asked: its tasks are
    // named, with why, and the rest is answered.
    stop(b);
    let c = instance(&broker.addr, &dir.path().join("c"), false);
    let mut partial = Value::Null;
    support::wait_until("c runs some tasks", WAIT, || {
        partial = get(&addr_a, "/stores/counts?limit=100").1;
        let elsewhere = partial["elsewhere"].as_array().cloned().unwrap_or_default();
        !elsewhere.is_empty()
            && elsewhere.iter().all(|e| {
                e["error"]
                    .as_str()
                    .is_some_and(|why| why.contains("serves no queries"))
            })
    });
    let answered = tasks(&partial).len() + partial["elsewhere"].as_array().unwrap().len();
    assert_eq!(answered, PARTITIONS as usize, "{partial}");
    stop(c);
    stop(a);
}
