//! Remote, with several instances: the part of a query that other
//! instances hold, asked of them.
//!
//! A query is answered first from the tasks this instance runs; the store's
//! other tasks are `elsewhere`. The app's group says which instance runs
//! each (DescribeGroups: every member's assignment) and where it answers
//! queries (the address each instance puts in its subscription, see
//! `group::codec`). Each such instance is asked the same query once, all
//! of them at once, as a *forwarded* request naming the tasks wanted of
//! it: it answers from those of them it runs (a forwarded request is never
//! forwarded again, so two instances whose views of the group disagree
//! cannot ask each other in a loop), says which it read, and gives each
//! entry's key bytes, so the answers merge in the store's key order
//! exactly, a key answered twice (a task run by two instances for a
//! moment) kept once.
//!
//! An instance that cannot be asked (none runs the task yet, it serves no
//! queries, it did not answer within [`FORWARD_TIMEOUT`]) leaves its tasks
//! in `elsewhere`, with its name and why.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::Admin;
use crate::runtime::group;

use super::url::percent_encode;
use super::{AnswerEntry, Elsewhere, QueryAnswer};

/// How long another instance has to answer a forwarded query.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from another instance.
const FORWARD_ANSWER_BYTES_MAX: usize = 64 << 20;

/// Asks the instances running `answer.elsewhere`'s tasks; `target` is the
/// request target to send them (path and parameters, without `forwarded`),
/// `own` this instance's query address (never asked).
pub(crate) async fn complete(
    admin: &Admin,
    group: &str,
    own: Option<SocketAddr>,
    target: &str,
    answer: &mut QueryAnswer,
    limit: usize,
) {
    if answer.elsewhere.is_empty() {
        return;
    }
    let placements = match group::placements(admin, group).await {
        Ok(placements) => placements,
        Err(error) => {
            let why = format!("the group could not be described: {error}");
            answer
                .elsewhere
                .iter_mut()
                .for_each(|e| e.error = Some(why.clone()));
            return;
        }
    };
    // The tasks left, by the address of the instance running each.
    let mut by_instance: BTreeMap<SocketAddr, Vec<String>> = BTreeMap::new();
    for task in answer.elsewhere.iter_mut() {
        let Some(placement) = placements.get(&task.task) else {
            task.error = Some("no instance runs it now".into());
            continue;
        };
        task.owner = placement.active.clone();
        match placement.query {
            Some(addr) if Some(addr) != own => {
                task.query = Some(addr.to_string());
                by_instance.entry(addr).or_default().push(task.task.clone());
            }
            Some(_) => task.error = Some("moving here".into()),
            None => task.error = Some("its instance serves no queries (run --query)".into()),
        }
    }
    // Each instance asked once, all at once, for the tasks it runs. It
    // answers from those of them it runs when asked (a task that moved in
    // between is not read there, and stays in `elsewhere`).
    let separator = if target.contains('?') { '&' } else { '?' };
    let mut asking = tokio::task::JoinSet::new();
    for (addr, tasks) in by_instance {
        let forwarded = format!(
            "{target}{separator}forwarded=1&tasks={}",
            percent_encode(&tasks.join(","))
        );
        asking.spawn(async move { (addr, tasks, ask(addr, &forwarded).await) });
    }
    let mut entries: BTreeMap<Vec<u8>, AnswerEntry> = std::mem::take(&mut answer.entries)
        .into_iter()
        .map(|e| (e.raw.clone(), e))
        .collect();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    while let Some(asked) = asking.join_next().await {
        let Ok((_, tasks, result)) = asked else {
            continue;
        };
        match result {
            Ok(theirs) => {
                for task in tasks.iter().filter(|t| !theirs.tasks.contains(t)) {
                    errors.insert(
                        task.clone(),
                        "not running at its instance when asked".into(),
                    );
                }
                answer.truncated |= theirs.truncated;
                answer.tasks.extend(theirs.tasks);
                // A key answered twice (a task briefly run by two
                // instances) is kept once.
                for (raw, entry) in theirs.entries {
                    entries.entry(raw).or_insert(entry);
                }
            }
            Err(why) => {
                for task in tasks {
                    errors.insert(task, why.clone());
                }
            }
        }
    }
    answer.tasks.sort();
    answer.tasks.dedup();
    let read: std::collections::BTreeSet<&String> = answer.tasks.iter().collect();
    answer.elsewhere.retain(|e| !read.contains(&e.task));
    for task in &mut answer.elsewhere {
        if let Some(why) = errors.remove(&task.task) {
            task.error = Some(why);
        }
    }
    answer.truncated |= entries.len() > limit;
    answer.entries = entries.into_values().take(limit).collect();
}

/// Another instance's forwarded answer: its entries with their key bytes.
#[derive(Debug)]
struct Forwarded {
    entries: Vec<(Vec<u8>, AnswerEntry)>,
    tasks: Vec<String>,
    truncated: bool,
}

/// Asks the query endpoint at `addr` for `target` (a request not
/// forwarded: that instance asks the others in turn), as the command line
/// does when an instance runs on its state directory.
pub(crate) async fn ask_instance(addr: SocketAddr, target: &str) -> Result<QueryAnswer, String> {
    let answer = fetch(addr, target).await?;
    let body: Value = parse_body(&answer)?;
    let field = |name: &str| body[name].clone();
    let entries = (field("entries")
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter())
    .map(|e| AnswerEntry {
        key: e["key"].clone(),
        value: e["value"].clone(),
        raw: Vec::new(),
    })
    .collect();
    let elsewhere = (field("elsewhere")
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter())
    .map(|e| {
        let text = |name: &str| e[name].as_str().map(String::from);
        Elsewhere {
            task: text("task").unwrap_or_default(),
            owner: text("owner"),
            query: text("query"),
            error: text("error"),
        }
    })
    .collect();
    Ok(QueryAnswer {
        store: field("store").as_str().unwrap_or_default().to_string(),
        entries,
        truncated: field("truncated").as_bool().unwrap_or(false),
        tasks: serde_json::from_value(field("tasks")).unwrap_or_default(),
        elsewhere,
        stopped: false,
    })
}

async fn ask(addr: SocketAddr, target: &str) -> Result<Forwarded, String> {
    parse(&fetch(addr, target).await?)
}

/// The whole response to `GET target` at `addr`.
async fn fetch(addr: SocketAddr, target: &str) -> Result<Vec<u8>, String> {
    let asked = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        let mut limited = (&mut stream).take(FORWARD_ANSWER_BYTES_MAX as u64 + 1);
        limited
            .read_to_end(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        if response.len() > FORWARD_ANSWER_BYTES_MAX {
            return Err(format!("an answer over {FORWARD_ANSWER_BYTES_MAX} bytes"));
        }
        Ok::<_, String>(response)
    };
    tokio::time::timeout(FORWARD_TIMEOUT, asked)
        .await
        .map_err(|_| format!("no answer within {} s", FORWARD_TIMEOUT.as_secs()))?
}

/// The JSON body of a 200 answer, or the error another answer gives.
fn parse_body(response: &[u8]) -> Result<Value, String> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("an answer without a head")?;
    let body: Value = serde_json::from_slice(&response[split + 4..])
        .map_err(|e| format!("an answer that is not JSON: {e}"))?;
    let status = String::from_utf8_lossy(&response[..split]);
    if !status.starts_with("HTTP/1.1 200") {
        let error = body["error"].as_str().unwrap_or("no reason given");
        return Err(format!("it answered: {error}"));
    }
    Ok(body)
}

fn parse(response: &[u8]) -> Result<Forwarded, String> {
    let body = parse_body(response)?;
    let entries = body["entries"]
        .as_array()
        .ok_or("an answer without entries")?
        .iter()
        .map(|entry| {
            let raw = entry["raw"]
                .as_str()
                .and_then(unhex)
                .ok_or("an entry without its key bytes")?;
            let entry = AnswerEntry {
                key: entry["key"].clone(),
                value: entry["value"].clone(),
                raw: raw.clone(),
            };
            Ok((raw, entry))
        })
        .collect::<Result<_, &str>>()?;
    let tasks = body["tasks"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Ok(Forwarded {
        entries,
        tasks,
        truncated: body["truncated"].as_bool().unwrap_or(false),
    })
}

/// Hex of key bytes, for a forwarded answer's `raw`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A task left out of an answer, named.
pub(crate) fn left_out(task: String) -> Elsewhere {
    Elsewhere {
        task,
        owner: None,
        query: None,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bytes_survive_hex() {
        let bytes = vec![0, 1, 0x7f, 0xff, b'a'];
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_forwarded_answer_is_read_with_its_key_bytes_and_an_error_is_said() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"entries\":[{\"key\":\"b\",\"value\":2,\"raw\":\"62\"}],\"tasks\":[\"count/1\"],\"truncated\":false}";
        let answer = parse(ok).unwrap();
        assert_eq!(answer.entries[0].0, b"b");
        assert_eq!(answer.tasks, ["count/1"]);
        let failed = b"HTTP/1.1 400 Bad Request\r\n\r\n{\"error\":\"bad key\"}";
        assert!(parse(failed).unwrap_err().contains("bad key"));
        let without = b"HTTP/1.1 200 OK\r\n\r\n{\"entries\":[{\"key\":\"b\",\"value\":2}]}";
        assert!(parse(without).is_err());
        assert!(parse(b"garbage").is_err());
    }
}
