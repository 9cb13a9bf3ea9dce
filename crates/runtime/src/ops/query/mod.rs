//! Queries over an app's derived state: a key, a prefix, a range of keys,
//! or one key's windows in a time range, asked of one store and answered
//! from every task that keeps it, as JSON. The same call answers
//! `<app> query` and the running app's HTTP endpoint ([`http`]).
//!
//! **Committed state only.** Each task's RocksDB is opened read-only for
//! the query (which works while the task's process writes it): a read-only
//! open sees the database as its last write batch left it, and every write
//! batch of a task is a whole commit (docs/design.md §4), so an answer
//! never shows half a commit nor a run in progress.
//!
//! **Which tasks.** Embedded, every task directory of the store's
//! processor. Remote, the tasks this instance runs now (its task board),
//! since a task that moved to another instance leaves a directory here
//! that no longer grows; the answer names the store's other tasks as
//! `elsewhere`, with the instance that runs each where the group says.
//!
//! **Bounds.** An answer holds at most `limit` entries (at most
//! [`QUERY_ENTRIES_MAX`]), in key order over all tasks; `truncated` says
//! more matched. Each task is read for at most `limit` entries, so a query
//! costs at most tasks × limit entries of memory.

pub mod http;
pub(crate) mod route;
mod url;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::board;
use crate::error::RuntimeError;
use crate::index_key::{escape_field, field_prefix};
use crate::layout::{self, task_dirs};
use crate::location::Location;
use crate::spec::StoreSpec;
use crate::state::{Entry, TaskState, prefix_end};
use crate::topology::App;
use crate::window_key::{key_prefix, window_key};

use super::dump_state::open_committed;

/// The most entries one answer holds.
pub const QUERY_ENTRIES_MAX: usize = 10_000;
/// Entries an answer holds unless the query says otherwise.
pub const QUERY_ENTRIES_DEFAULT: usize = 1_000;

/// What a query asks of its store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Every entry (up to the limit).
    All,
    /// The entry of one key, given as text (see `store_text`).
    Key(String),
    /// The entries whose keys start with this text (stores whose keys are
    /// encoded raw or as UTF-8, where a text prefix is a byte prefix; an
    /// index store's fields starting with it).
    Prefix(String),
    /// An index store's entries of one field value.
    Field(String),
    /// The entries with `from <= key <= to` (either end open).
    Range {
        from: Option<String>,
        to: Option<String>,
    },
    /// A window store's windows of one key starting in `from..=to` (ms).
    Window {
        key: String,
        from: Option<i64>,
        to: Option<i64>,
    },
}

/// A query of one store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreQuery {
    pub store: String,
    pub lookup: Lookup,
    pub limit: usize,
}

/// One entry of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerEntry {
    pub key: Value,
    pub value: Value,
    /// The key's bytes as stored: the order answers merge in.
    #[serde(skip)]
    pub raw: Vec<u8>,
}

/// A task of the store whose entries are not in the answer: another
/// instance runs it (remote) and could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elsewhere {
    pub task: String,
    /// The instance running it, as the group says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Where that instance answers queries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Why it was not asked, or what asking it gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a query found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryAnswer {
    pub store: String,
    pub entries: Vec<AnswerEntry>,
    /// More entries matched than the limit let through.
    pub truncated: bool,
    /// The tasks whose state was read (`processor/partition`).
    pub tasks: Vec<String>,
    /// Remote: the store's tasks this instance does not run; their
    /// entries are not in this answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<Elsewhere>,
    /// Remote, read with no instance running on the state directory: the
    /// state as its last instance left it (its tasks may run elsewhere now).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// Remote: what an instance holds of the app's tasks (`processor/partition`).
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// The tasks it runs now: answered from its state directory.
    pub running: BTreeSet<String>,
    /// Every task of the app it knows of: those not running here are
    /// `elsewhere`.
    pub all: BTreeSet<String>,
}

/// Answers `query` from the committed state of the store's tasks under
/// `location`. Remote, `held` says which tasks this instance runs (None:
/// read its published task board; with no instance running on the state
/// directory, every task's state as it was left, marked `stopped`).
pub fn query(
    app: &App,
    location: &Location,
    query: &StoreQuery,
    held: Option<&Held>,
) -> Result<QueryAnswer, RuntimeError> {
    let (processor, spec) = find_store(app, &query.store)?;
    let limit = query.limit.clamp(1, QUERY_ENTRIES_MAX);
    let bounds = Bounds::of(spec, &query.lookup)?;
    let state_dir = location.state_dir();
    let dirs = task_dirs(&layout::processor_dir(state_dir, processor))?;
    let held = match (location, held) {
        (Location::Embedded { .. }, _) => None,
        (Location::Remote { .. }, Some(held)) => Some(held.clone()),
        // No instance runs on the state directory: nothing moves its
        // tasks' state now, which is read as it was left.
        (Location::Remote { .. }, None) => running_here(state_dir),
    };
    // The store's tasks: those with state here, and remote every other
    // one the instance knows of.
    let mut tasks: BTreeMap<i32, Option<std::path::PathBuf>> =
        dirs.into_iter().map(|(p, dir)| (p, Some(dir))).collect();
    let ours = format!("{processor}/");
    let others = held.iter().flat_map(|h| &h.all);
    for partition in others.filter_map(|t| t.strip_prefix(&ours)) {
        if let Ok(partition) = partition.parse() {
            tasks.entry(partition).or_insert(None);
        }
    }
    let mut found: Vec<Entry> = Vec::new();
    let mut answer = QueryAnswer {
        store: query.store.clone(),
        entries: Vec::new(),
        truncated: false,
        tasks: Vec::new(),
        elsewhere: Vec::new(),
        stopped: matches!(location, Location::Remote { .. }) && held.is_none(),
    };
    for (partition, dir) in tasks {
        let task = format!("{processor}/{partition}");
        if held
            .as_ref()
            .is_some_and(|held| !held.running.contains(&task))
        {
            answer.elsewhere.push(route::left_out(task));
            continue;
        }
        let Some(dir) = dir else { continue };
        if let Some(entries) = read_task(&dir, spec, &bounds, limit + 1)? {
            found.extend(entries);
            answer.tasks.push(task);
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    answer.truncated = found.len() > limit;
    found.truncate(limit);
    answer.entries = found
        .into_iter()
        .map(|(key, value)| AnswerEntry {
            key: (spec.text.key_json)(&key),
            value: (spec.text.value_json)(&value),
            raw: key,
        })
        .collect();
    Ok(answer)
}

/// Answers `query` for the command line: embedded, from the state
/// directly; remote, through the query endpoint of the instance running on
/// the state directory when it has one (it asks the other instances for
/// the tasks they run), else from the tasks that instance runs.
pub async fn query_from_cli(
    app: &App,
    location: &Location,
    query: &StoreQuery,
    version: &str,
    access: &strata_http::Access,
) -> Result<QueryAnswer, RuntimeError> {
    if let Location::Remote { state_dir, .. } = location
        && board::read_published(state_dir).is_some()
        && let Ok(text) = std::fs::read_to_string(layout::query_address_file(state_dir))
        && let Ok(addr) = text.trim().parse()
    {
        let target = http::target_of(query, Some(version));
        match route::ask_instance(addr, &target, access).await {
            Ok(answer) => return Ok(answer),
            // Not reached: it stopped serving; answer from the state here.
            Err(route::AskError::Fetch(strata_http::client::FetchError::Unreachable(why))) => {
                tracing::warn!("the instance's endpoint {addr}: {why}");
            }
            Err(error) => {
                return Err(RuntimeError::Query {
                    store: query.store.clone(),
                    reason: format!("the instance answering on {addr}: {error}"),
                });
            }
        }
    }
    let (app, location, query) = (app.clone(), location.clone(), query.clone());
    tokio::task::spawn_blocking(move || self::query(&app, &location, &query, None))
        .await
        .map_err(|_| RuntimeError::Query {
            store: String::new(),
            reason: "the query panicked".into(),
        })?
}

/// The processor declaring `store`, and the store's spec.
fn find_store<'a>(app: &'a App, store: &str) -> Result<(&'a str, &'a StoreSpec), RuntimeError> {
    app.processors
        .iter()
        .find_map(|p| {
            p.stores
                .iter()
                .find(|s| s.name == store)
                .map(|s| (p.name.as_str(), s))
        })
        .ok_or_else(|| RuntimeError::UnknownStore {
            store: store.to_string(),
            declared: app.declared_stores(),
        })
}

/// The tasks the instance running on `state_dir` runs now; None when no
/// instance runs there.
fn running_here(state_dir: &Path) -> Option<Held> {
    let published = board::read_published(state_dir)?;
    let running = (published.iter())
        .filter(|(_, view)| **view == board::TaskView::Running)
        .map(|(task, _)| task.clone())
        .collect();
    Some(Held {
        running,
        all: published.into_keys().collect(),
    })
}

/// The encoded keys a lookup reads: `from <= key < to`, or one key.
#[derive(Debug, PartialEq, Eq)]
enum Bounds {
    Key(Vec<u8>),
    Span { from: Vec<u8>, to: Option<Vec<u8>> },
}

impl Bounds {
    fn of(spec: &StoreSpec, lookup: &Lookup) -> Result<Self, RuntimeError> {
        let bad = |reason: String| RuntimeError::Query {
            store: spec.name.clone(),
            reason,
        };
        let parse = |text: &str| (spec.text.parse_key)(text).map_err(bad);
        // The successor of a byte string is itself followed by a zero byte.
        let after = |mut key: Vec<u8>| {
            key.push(0);
            key
        };
        Ok(match lookup {
            Lookup::All => Self::Span {
                from: Vec::new(),
                to: None,
            },
            Lookup::Key(key) => Self::Key(parse(key)?),
            Lookup::Prefix(prefix) => {
                if spec.text.window.is_some() {
                    return Err(bad(
                        "it is a window store: ask one key's windows (--window KEY)".into(),
                    ));
                }
                if !spec.text.prefix_is_bytes {
                    return Err(bad(format!(
                        "its keys are encoded with {}, where a text prefix is not a byte prefix; prefix queries need raw or utf8 keys (ask a --from/--to range instead)",
                        spec.key_codec.name()
                    )));
                }
                let mut from = Vec::new();
                match spec.text.index {
                    true => escape_field(prefix.as_bytes(), &mut from),
                    false => from.extend_from_slice(prefix.as_bytes()),
                }
                let to = prefix_end(&from);
                Self::Span { from, to }
            }
            Lookup::Field(field) => {
                if !spec.text.index {
                    return Err(bad(
                        "it is not an index store; ask a key, a prefix or a range".into(),
                    ));
                }
                let from = field_prefix(field.as_bytes());
                let to = prefix_end(&from);
                Self::Span { from, to }
            }
            Lookup::Range { from, to } => Self::Span {
                from: from.as_deref().map(parse).transpose()?.unwrap_or_default(),
                to: to.as_deref().map(parse).transpose()?.map(after),
            },
            Lookup::Window { key, from, to } => {
                let window = spec.text.window.as_ref().ok_or_else(|| {
                    bad("it is not a window store; ask a key, a prefix or a range".into())
                })?;
                let inner = (window.parse_key)(key).map_err(bad)?;
                let mut start = Vec::new();
                window_key(&inner, from.unwrap_or(i64::MIN), &mut start);
                let end = match to {
                    Some(to) => {
                        let mut end = Vec::new();
                        window_key(&inner, *to, &mut end);
                        Some(after(end))
                    }
                    None => {
                        let mut prefix = Vec::new();
                        key_prefix(&inner, &mut prefix);
                        prefix_end(&prefix)
                    }
                };
                Self::Span {
                    from: start,
                    to: end,
                }
            }
        })
    }
}

/// A task's committed entries within `bounds`, at most `limit`; None if
/// the task never committed (or keeps no such store yet).
fn read_task(
    dir: &Path,
    spec: &StoreSpec,
    bounds: &Bounds,
    limit: usize,
) -> Result<Option<Vec<Entry>>, RuntimeError> {
    let Some(state) = open_committed(dir)? else {
        return Ok(None);
    };
    if !state.stores().contains(&spec.name) {
        return Ok(None);
    }
    Ok(Some(read_open(&state, &spec.name, bounds, limit)?))
}

fn read_open(
    state: &TaskState,
    store: &str,
    bounds: &Bounds,
    limit: usize,
) -> Result<Vec<Entry>, RuntimeError> {
    Ok(match bounds {
        Bounds::Key(key) => state
            .committed(store, key)?
            .map(|value| vec![(key.clone(), value)])
            .unwrap_or_default(),
        Bounds::Span { from, to } => state.committed_range(store, from, to.as_deref(), limit)?,
    })
}

/// Stores by name with what a client needs to ask them (`GET /stores`).
pub fn describe_stores(app: &App) -> BTreeMap<String, Value> {
    app.processors
        .iter()
        .flat_map(|p| p.stores.iter().map(move |s| (p, s)))
        .map(|(p, s)| {
            let described = serde_json::json!({
                "processor": p.name,
                "key_type": s.key_type_name,
                "value_type": s.value_type_name,
                "key_codec": s.key_codec.name(),
                "value_codec": s.value_codec.name(),
                "prefix_queries": s.text.prefix_is_bytes,
                "window_store": s.text.window.is_some(),
                "index_store": s.text.index,
            });
            (s.name.clone(), described)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use strata_record::codec::Codec;

    fn spec<K, V>(store: Store<K, V>) -> StoreSpec
    where
        K: serde::Serialize + serde::de::DeserializeOwned + 'static,
        V: serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        StoreSpec::of(store)
    }

    #[test]
    fn a_range_includes_both_of_its_ends() {
        let counts = spec(Store::<String, u64>::named("q-counts"));
        let bounds = Bounds::of(
            &counts,
            &Lookup::Range {
                from: Some("b".into()),
                to: Some("d".into()),
            },
        )
        .unwrap();
        assert_eq!(
            bounds,
            Bounds::Span {
                from: b"b".to_vec(),
                to: Some(b"d\0".to_vec())
            }
        );
    }

    #[test]
    fn a_prefix_of_postcard_keys_is_refused_with_what_to_ask_instead() {
        let store =
            spec(Store::<String, u64>::named("q-pc").codecs(Codec::Postcard, Codec::Postcard));
        let error = Bounds::of(&store, &Lookup::Prefix("a".into())).unwrap_err();
        assert!(error.to_string().contains("--from/--to"), "{error}");
    }

    #[test]
    fn a_field_lookup_spans_exactly_that_fields_entries() {
        let mut index = spec(Store::<Vec<u8>, ()>::named("q-index"));
        index.text = index.text.clone().indexed::<String>(Codec::Raw);
        let Bounds::Span { from, to } = Bounds::of(&index, &Lookup::Field("ab".into())).unwrap()
        else {
            panic!("a span");
        };
        let to = to.unwrap();
        let within = |field: &[u8]| {
            let key = crate::index_key::entry_key(field, b"k");
            from <= key && key < to
        };
        assert!(within(b"ab"));
        assert!(!within(b"abc") && !within(b"a") && !within(b"ab\0"));
        let prefix = Bounds::of(&index, &Lookup::Prefix("a".into())).unwrap();
        let Bounds::Span { from, to } = prefix else {
            panic!("a span");
        };
        let abc = crate::index_key::entry_key(b"abc", b"k");
        assert!(from <= abc && abc < to.unwrap());
        let plain = spec(Store::<String, u64>::named("q-plain-2"));
        assert!(Bounds::of(&plain, &Lookup::Field("a".into())).is_err());
    }

    #[test]
    fn a_window_lookup_on_a_plain_store_says_so() {
        let counts = spec(Store::<String, u64>::named("q-plain"));
        let lookup = Lookup::Window {
            key: "a".into(),
            from: None,
            to: None,
        };
        let error = Bounds::of(&counts, &lookup).unwrap_err();
        assert!(error.to_string().contains("not a window store"), "{error}");
    }

    #[test]
    fn a_window_lookup_spans_the_keys_windows_from_start_to_start() {
        let mut windows = spec(Store::<Vec<u8>, u64>::named("q-windows"));
        windows.text = windows.text.clone().windowed::<String>(Codec::Raw);
        let lookup = Lookup::Window {
            key: "a".into(),
            from: Some(0),
            to: Some(60_000),
        };
        let Bounds::Span { from, to } = Bounds::of(&windows, &lookup).unwrap() else {
            panic!("a span");
        };
        let (mut first, mut last, mut later) = (Vec::new(), Vec::new(), Vec::new());
        window_key(b"a", 0, &mut first);
        window_key(b"a", 60_000, &mut last);
        window_key(b"a", 60_001, &mut later);
        let to = to.unwrap();
        assert!(from <= first && first < to);
        assert!(last < to && later >= to);
    }
}
