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

use axum::http::StatusCode;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_http::client::FetchError;

use crate::group;
use strata_client::Admin;
use strata_record::hex::{hex, unhex};

use super::url::percent_encode;
use super::{AnswerEntry, Elsewhere, QueryAnswer};

/// How long another instance has to answer a forwarded query.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from another instance.
const FORWARD_ANSWER_BYTES_MAX: usize = 64 << 20;

/// How an instance finds and asks the others.
pub(crate) struct Asking<'a> {
    /// The cluster's admin calls, to describe the app's group.
    pub admin: &'a Admin,
    /// The app's group (the running version's).
    pub group: &'a str,
    /// This instance's query address (never asked).
    pub own: Option<SocketAddr>,
    /// How the endpoints are secured (TLS, the token).
    pub access: &'a strata_http::Access,
}

/// Asks the instances running `answer.elsewhere`'s tasks; `target` is the
/// request target to send them (path and parameters, without `forwarded`).
pub(crate) async fn complete(
    asking: &Asking<'_>,
    target: &str,
    answer: &mut QueryAnswer,
    limit: usize,
) {
    if answer.elsewhere.is_empty() {
        return;
    }
    let own = asking.own;
    let placements = match group::placements(asking.admin, asking.group).await {
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
    let mut asked = tokio::task::JoinSet::new();
    for (addr, tasks) in by_instance {
        let forwarded = format!(
            "{target}{separator}forwarded=1&tasks={}",
            percent_encode(&tasks.join(","))
        );
        let access = asking.access.clone();
        asked.spawn(async move { (addr, tasks, ask(addr, &forwarded, &access).await) });
    }
    let mut entries: BTreeMap<Vec<u8>, AnswerEntry> = std::mem::take(&mut answer.entries)
        .into_iter()
        .map(|e| (e.raw.clone(), e))
        .collect();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    while let Some(answered) = asked.join_next().await {
        let Ok((_, tasks, result)) = answered else {
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
                for entry in theirs.entries {
                    entries.entry(entry.raw.clone()).or_insert(entry);
                }
            }
            Err(why) => {
                for task in tasks {
                    errors.insert(task, why.to_string());
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

/// Why another instance's answer could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    /// Not reached, no whole answer in time, an answer over the bound, or
    /// no CA to check it with: nothing was answered.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// It answered with an error of its own (4xx or 5xx).
    #[error("it answered: {0}")]
    Refused(String),
    /// It answered something that is not an answer.
    #[error("{0}")]
    Malformed(String),
}

/// An entry of a forwarded answer: with its key's bytes, in hex.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RawEntry {
    pub key: Value,
    pub value: Value,
    pub raw: String,
}

/// A forwarded answer: the entries of the asked tasks the instance ran.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Forwarded {
    pub entries: Vec<RawEntry>,
    pub tasks: Vec<String>,
    pub truncated: bool,
}

impl Forwarded {
    /// `found` as a forwarded request's answer.
    pub fn of(found: QueryAnswer) -> Self {
        Self {
            entries: (found.entries.into_iter())
                .map(|e| RawEntry {
                    key: e.key,
                    value: e.value,
                    raw: hex(&e.raw),
                })
                .collect(),
            tasks: found.tasks,
            truncated: found.truncated,
        }
    }
}

/// Asks the query endpoint at `addr` for `target` (a request not
/// forwarded: that instance asks the others in turn), as the command line
/// does when an instance runs on its state directory.
pub(crate) async fn ask_instance(
    addr: SocketAddr,
    target: &str,
    access: &strata_http::Access,
) -> Result<QueryAnswer, AskError> {
    let (status, body) = fetch(addr, target, access).await?;
    let body = parse_body(status, &body)?;
    serde_json::from_value(body).map_err(|e| AskError::Malformed(format!("an answer: {e}")))
}

/// Asks `addr` a forwarded query: the entries of the asked tasks it ran,
/// with their key bytes.
async fn ask(
    addr: SocketAddr,
    target: &str,
    access: &strata_http::Access,
) -> Result<QueryAnswer, AskError> {
    let (status, body) = fetch(addr, target, access).await?;
    parse(status, &body)
}

/// The status and whole body of the answer to `GET target` at `addr`.
async fn fetch(
    addr: SocketAddr,
    target: &str,
    access: &strata_http::Access,
) -> Result<(StatusCode, Bytes), AskError> {
    let fetched = strata_http::client::get(
        addr,
        target,
        access,
        FORWARD_ANSWER_BYTES_MAX,
        FORWARD_TIMEOUT,
    );
    Ok(fetched.await?)
}

/// The longest part of a refusal's body that is not JSON quoted in the
/// error.
const REFUSAL_QUOTED_BYTES_MAX: usize = 300;

/// The JSON body of a 200 answer, or the error another answer gives: its
/// `error` field, or its text when it is not JSON (a 401 for a missing
/// token, a 431, a request the routes could not read).
fn parse_body(status: StatusCode, body: &[u8]) -> Result<Value, AskError> {
    let parsed = serde_json::from_slice::<Value>(body);
    if status != StatusCode::OK {
        let error = match &parsed {
            Ok(body) => body["error"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
            Err(_) => {
                let text =
                    String::from_utf8_lossy(&body[..body.len().min(REFUSAL_QUOTED_BYTES_MAX)]);
                text.trim().to_string()
            }
        };
        return Err(AskError::Refused(format!("{status}: {error}")));
    }
    parsed.map_err(|e| AskError::Malformed(format!("an answer that is not JSON: {e}")))
}

/// A forwarded answer as a query answer whose entries hold their key
/// bytes.
fn parse(status: StatusCode, body: &[u8]) -> Result<QueryAnswer, AskError> {
    let malformed = |what: String| AskError::Malformed(what);
    let forwarded: Forwarded = serde_json::from_value(parse_body(status, body)?)
        .map_err(|e| malformed(format!("a forwarded answer: {e}")))?;
    let entries = (forwarded.entries.into_iter())
        .map(|e| {
            let raw = unhex(&e.raw).ok_or_else(|| malformed("a key's bytes not in hex".into()))?;
            Ok(AnswerEntry {
                key: e.key,
                value: e.value,
                raw,
            })
        })
        .collect::<Result<_, AskError>>()?;
    Ok(QueryAnswer {
        store: String::new(),
        entries,
        truncated: forwarded.truncated,
        tasks: forwarded.tasks,
        elsewhere: Vec::new(),
        stopped: false,
    })
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
    fn a_forwarded_answer_is_read_with_its_key_bytes_and_an_error_is_said() {
        let ok = br#"{"entries":[{"key":"b","value":2,"raw":"62"}],"tasks":["count/1"],"truncated":false}"#;
        let answer = parse(StatusCode::OK, ok).unwrap();
        assert_eq!(answer.entries[0].raw, b"b");
        assert_eq!(answer.tasks, ["count/1"]);
        let failed = parse(StatusCode::BAD_REQUEST, br#"{"error":"bad key"}"#).unwrap_err();
        assert!(matches!(failed, AskError::Refused(_)), "{failed}");
        assert!(failed.to_string().contains("bad key"), "{failed}");
        let without = br#"{"entries":[{"key":"b","value":2}]}"#;
        assert!(parse(StatusCode::OK, without).is_err());
        assert!(parse(StatusCode::OK, b"garbage").is_err());
        let unauthorized = parse(
            StatusCode::UNAUTHORIZED,
            b"a token is needed: send Bearer\n",
        );
        let said = unauthorized.unwrap_err().to_string();
        assert!(
            said.contains("401") && said.contains("a token is needed"),
            "{said}"
        );
    }
}
