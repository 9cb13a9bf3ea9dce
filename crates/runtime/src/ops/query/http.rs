//! The query endpoint a running app serves (`run --query ADDR`): HTTP/1.1
//! GET requests answered with JSON (connections kept alive, within
//! strata-http's limits).
//!
//! ```text
//! GET /stores                                   the stores: processor, types, codecs,
//!                                               whether prefix and window queries apply
//! GET /stores/{store}/keys/{key}                one key (404 when absent)
//! GET /stores/{store}?key=K                     the same
//! GET /stores/{store}?prefix=P                  keys starting with P
//! GET /stores/{store}?from=A&to=B               keys in A..=B (either end may be left out)
//! GET /stores/{store}?window=K&from=T1&to=T2    a window store's windows of K starting in T1..=T2
//! GET /stores/{store}?field=F                   an index store's row keys under field F
//! GET /stores/{store}                           every entry
//!     any of them &limit=N (entries, default 1000, at most 10000) and
//!     &version=V (a replayed version's state instead of the live one)
//! ```
//!
//! Answers are [`QueryAnswer`](super::QueryAnswer)s; errors are
//! `{"error": "…"}` with 400 (a query that cannot be answered as asked),
//! 404 (no such store, key or version), 405 (not a GET), 503 (a key not
//! found where some of the store's tasks could not be asked: the answer is
//! not known) or 500; a request head over 8 KiB is answered 431 unread.
//!
//! Served by axum on strata-http's limits: at most
//! [`QUERY_CONNECTIONS_MAX`] connections open at once (one more is closed
//! as it is accepted), a request head within 10 s; and at most
//! [`QUERIES_IN_FLIGHT_MAX`] queries are answered at once (the rest wait
//! for a slot), since each opens the store's tasks' databases.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::error::RuntimeError;
use crate::location::Location;
use crate::topology::App;
use crate::versions::{LIVE, Versions};
use strata_client::Admin;

use super::url::percent_encode;
use super::{
    Held, Lookup, QUERY_ENTRIES_DEFAULT, QUERY_ENTRIES_MAX, StoreQuery, describe_stores, query,
    route,
};

/// Queries answered at once.
pub const QUERIES_IN_FLIGHT_MAX: usize = 16;
/// Connections open at once.
pub const QUERY_CONNECTIONS_MAX: usize = 256;

/// Where and what to serve queries of.
#[derive(Debug, Clone)]
pub struct QueryEndpoint {
    pub addr: SocketAddr,
    /// The app's base state (holding its versions manifest): `?version=`
    /// is looked up there.
    pub root: Location,
    /// The version the instance runs (`live` answers for it).
    pub version: String,
}

/// Which tasks the serving instance runs now, and every task of the app
/// (remote; see `query`).
pub(crate) type Running = Arc<dyn Fn() -> Held + Send + Sync>;

/// Remote: how the serving instance finds and asks the others.
pub(crate) struct Remote {
    /// The tasks it runs now.
    pub running: Running,
    /// The cluster's admin calls, to describe the app's group.
    pub admin: Admin,
    /// The app's group (the running version's).
    pub group: String,
}

/// What a server needs to answer.
struct Served {
    app: App,
    root: Location,
    /// The version the instance runs, whose tasks `remote` knows.
    version: String,
    remote: Option<Remote>,
    /// The address it answers on (never asked by `route`).
    own: SocketAddr,
    slots: Semaphore,
    /// How the endpoint is secured, and so how the others are asked.
    access: strata_http::Access,
}

/// Serves queries of `app` on `listener` until the returned task is
/// aborted.
pub(crate) fn serve(
    app: &App,
    endpoint: &QueryEndpoint,
    listener: TcpListener,
    remote: Option<Remote>,
    access: &strata_http::Access,
) -> tokio::task::JoinHandle<()> {
    let own = listener.local_addr().unwrap_or(endpoint.addr);
    let routes = (routes(app, endpoint, own, remote, access))
        .fallback(|| async { failure(StatusCode::NOT_FOUND, "no such path; try GET /stores") });
    let limits = strata_http::Limits {
        connections_max: QUERY_CONNECTIONS_MAX,
        ..strata_http::Limits::default()
    };
    tokio::spawn(strata_http::serve(listener, routes, limits, access.clone()))
}

/// The query routes of `app`, answering on `own` (which forwarding never
/// asks): served alone by [`serve`], or merged into the console's. A
/// path they name asked with another method than GET is answered 405; the
/// fallback for the paths they do not name is the server's.
pub(crate) fn routes(
    app: &App,
    endpoint: &QueryEndpoint,
    own: SocketAddr,
    remote: Option<Remote>,
    access: &strata_http::Access,
) -> Router {
    router(Arc::new(Served {
        app: app.clone(),
        root: endpoint.root.clone(),
        version: endpoint.version.clone(),
        remote,
        own,
        slots: Semaphore::new(QUERIES_IN_FLIGHT_MAX),
        access: access.clone(),
    }))
}

/// The routes, answering a path they name asked with another method with
/// a JSON error.
fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/stores", get(stores))
        .route("/stores/{store}", get(store))
        .route("/stores/{store}/keys/{key}", get(key))
        .method_not_allowed_fallback(|| async {
            failure(StatusCode::METHOD_NOT_ALLOWED, "only GET is served")
        })
        .with_state(served)
}

fn failure(status: StatusCode, error: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": error.to_string() }))).into_response()
}

type Params = BTreeMap<String, String>;

async fn stores(State(served): State<Arc<Served>>) -> Response {
    Json(json!(describe_stores(&served.app))).into_response()
}

async fn store(
    State(served): State<Arc<Served>>,
    Path(store): Path<String>,
    Query(params): Query<Params>,
    uri: Uri,
) -> Response {
    respond(&served, &store, &params, &uri).await
}

async fn key(
    State(served): State<Arc<Served>>,
    Path((store, key)): Path<(String, String)>,
    Query(mut params): Query<Params>,
    uri: Uri,
) -> Response {
    params.insert("key".into(), key);
    respond(&served, &store, &params, &uri).await
}

/// Answers one store request, asked as `uri` (which other instances are
/// asked in turn).
async fn respond(served: &Arc<Served>, store: &str, params: &Params, uri: &Uri) -> Response {
    let Ok(_slot) = served.slots.acquire().await else {
        return failure(StatusCode::SERVICE_UNAVAILABLE, "the endpoint is closing");
    };
    let target = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let result = match StoreRequest::from_params(store, params) {
        Ok(request) => answer(served, request, target).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(body) => Json(body).into_response(),
        Err((status, error)) => failure(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            error,
        ),
    }
}

/// A store query with the version it reads.
struct StoreRequest {
    query: StoreQuery,
    version: Option<String>,
    /// Asked by another instance: answered from the tasks run here only.
    forwarded: bool,
    /// The tasks a forwarded request asks about (`tasks=count/1,count/3`).
    tasks: Option<std::collections::BTreeSet<String>>,
}

impl StoreRequest {
    fn from_params(store: &str, params: &BTreeMap<String, String>) -> Result<Self, (u16, String)> {
        let bad = |reason: String| (400, reason);
        let time = |name: &str| {
            params
                .get(name)
                .map(|t| t.parse::<i64>())
                .transpose()
                .map_err(|_| bad(format!("{name} is a time in ms since the Unix epoch")))
        };
        let named = ["key", "prefix", "window", "field"]
            .iter()
            .filter(|n| params.contains_key(**n))
            .count();
        if named > 1 {
            return Err(bad(
                "give one of key, prefix, window, field (or from/to)".into()
            ));
        }
        let bounded = params.contains_key("from") || params.contains_key("to");
        if bounded && named == 1 && !params.contains_key("window") {
            return Err(bad("from/to go alone (a range) or with window".into()));
        }
        if let Some(field) = params.get("field") {
            return Self::with(store, Lookup::Field(field.clone()), params);
        }
        let lookup = match (
            params.get("key"),
            params.get("prefix"),
            params.get("window"),
        ) {
            (Some(key), None, None) => Lookup::Key(key.clone()),
            (None, Some(prefix), None) => Lookup::Prefix(prefix.clone()),
            (None, None, Some(key)) => Lookup::Window {
                key: key.clone(),
                from: time("from")?,
                to: time("to")?,
            },
            (None, None, None) if params.contains_key("from") || params.contains_key("to") => {
                Lookup::Range {
                    from: params.get("from").cloned(),
                    to: params.get("to").cloned(),
                }
            }
            (None, None, None) => Lookup::All,
            _ => {
                return Err(bad(
                    "give one of key, prefix, window, field (or from/to)".into()
                ));
            }
        };
        Self::with(store, lookup, params)
    }

    /// The request for `lookup` with the parameters every lookup takes.
    fn with(
        store: &str,
        lookup: Lookup,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, (u16, String)> {
        let bad = |reason: String| (400, reason);
        let limit = match params.get("limit") {
            Some(n) => n
                .parse()
                .map_err(|_| bad("limit is a number of entries".into()))?,
            None => QUERY_ENTRIES_DEFAULT,
        };
        Ok(Self {
            query: StoreQuery {
                store: store.to_string(),
                lookup,
                limit,
            },
            version: params.get("version").cloned(),
            forwarded: params.contains_key("forwarded"),
            tasks: (params.get("tasks")).map(|tasks| tasks.split(',').map(String::from).collect()),
        })
    }
}

/// The answer to one store request: from the tasks run here and, remote,
/// from the instances running the others (unless it was forwarded here).
async fn answer(
    served: &Arc<Served>,
    request: StoreRequest,
    target: &str,
) -> Result<Value, (u16, String)> {
    let failed = |error: RuntimeError| {
        let status = match &error {
            RuntimeError::UnknownStore { .. } | RuntimeError::UnknownVersion { .. } => 404,
            RuntimeError::Query { .. } | RuntimeError::Config(_) => 400,
            _ => 500,
        };
        (status, error.to_string())
    };
    let (served_here, request) = (Arc::clone(served), Arc::new(request));
    let asked = Arc::clone(&request);
    let local = tokio::task::spawn_blocking(move || {
        let served = served_here;
        let versions = Versions::load(served.root.state_dir()).map_err(failed)?;
        let wanted = asked.version.as_deref().unwrap_or(LIVE);
        let version = versions.get(wanted).map_err(failed)?;
        let (app, location) = served.app.as_version(&served.root, &version);
        let running = match &served.remote {
            Some(remote) if version.name == served.version => {
                let mut held = (remote.running)();
                // A forwarded request is answered for the tasks it names.
                if let Some(asked) = &asked.tasks {
                    held.running.retain(|t| asked.contains(t));
                    held.all = asked.clone();
                }
                Some(held)
            }
            _ => None,
        };
        let found = query(&app, &location, &asked.query, running.as_ref()).map_err(failed)?;
        Ok::<_, (u16, String)>((found, version.name == served.version))
    })
    .await
    .map_err(|_| (500, "the query panicked".to_string()))?;
    let (mut found, running_version) = local?;
    if request.forwarded {
        return serde_json::to_value(route::Forwarded::of(found)).map_err(|e| (500, e.to_string()));
    }
    if let Some(remote) = served.remote.as_ref().filter(|_| running_version) {
        let limit = request.query.limit.clamp(1, QUERY_ENTRIES_MAX);
        let own = Some(served.own);
        let asking = route::Asking {
            admin: &remote.admin,
            group: &remote.group,
            own,
            access: &served.access,
        };
        route::complete(&asking, target, &mut found, limit).await;
    }
    if matches!(request.query.lookup, Lookup::Key(_)) && found.entries.is_empty() {
        if found.elsewhere.is_empty() {
            return Err((404, format!("no such key in store {:?}", found.store)));
        }
        // The key may be in a task that could not be asked.
        let tasks: Vec<&str> = found.elsewhere.iter().map(|e| e.task.as_str()).collect();
        return Err((
            503,
            format!(
                "not in the tasks asked; tasks {} could not be asked, so whether store {:?} holds it is not known",
                tasks.join(", "),
                found.store
            ),
        ));
    }
    serde_json::to_value(&found).map_err(|e| (500, e.to_string()))
}

/// The request target asking `query` of `version` (None: the live one).
pub(crate) fn target_of(query: &StoreQuery, version: Option<&str>) -> String {
    let mut params: Vec<(&str, String)> = Vec::new();
    match &query.lookup {
        Lookup::All => {}
        Lookup::Key(key) => params.push(("key", key.clone())),
        Lookup::Prefix(prefix) => params.push(("prefix", prefix.clone())),
        Lookup::Field(field) => params.push(("field", field.clone())),
        Lookup::Range { from, to } => {
            params.extend(from.clone().map(|f| ("from", f)));
            params.extend(to.clone().map(|t| ("to", t)));
        }
        Lookup::Window { key, from, to } => {
            params.push(("window", key.clone()));
            params.extend(from.map(|f| ("from", f.to_string())));
            params.extend(to.map(|t| ("to", t.to_string())));
        }
    }
    params.push(("limit", query.limit.to_string()));
    params.extend(version.map(|v| ("version", v.to_string())));
    let params: Vec<String> = (params.iter())
        .map(|(name, value)| format!("{name}={}", percent_encode(value)))
        .collect();
    format!(
        "/stores/{}?{}",
        percent_encode(&query.store),
        params.join("&")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_made_for_a_query_asks_the_same_query() {
        let query = StoreQuery {
            store: "per minute".into(),
            lookup: Lookup::Window {
                key: "a&b=c/ü".into(),
                from: Some(-5),
                to: None,
            },
            limit: 7,
        };
        let target: Uri = target_of(&query, Some("v2")).parse().unwrap();
        assert_eq!(target.path(), "/stores/per%20minute");
        let Query(params) = Query::<Params>::try_from_uri(&target).unwrap();
        let request = StoreRequest::from_params("per minute", &params).unwrap();
        assert_eq!(request.query, query);
        assert_eq!(request.version.as_deref(), Some("v2"));
    }

    #[test]
    fn parameters_make_the_lookup_they_name() {
        let params = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let lookup = |pairs: &[(&str, &str)]| {
            StoreRequest::from_params("s", &params(pairs)).map(|r| r.query.lookup)
        };
        assert_eq!(lookup(&[]).unwrap(), Lookup::All);
        assert_eq!(lookup(&[("key", "a")]).unwrap(), Lookup::Key("a".into()));
        assert_eq!(
            lookup(&[("from", "a")]).unwrap(),
            Lookup::Range {
                from: Some("a".into()),
                to: None
            }
        );
        assert_eq!(
            lookup(&[("window", "a"), ("from", "5"), ("to", "9")]).unwrap(),
            Lookup::Window {
                key: "a".into(),
                from: Some(5),
                to: Some(9)
            }
        );
        assert_eq!(lookup(&[("key", "a"), ("prefix", "b")]).unwrap_err().0, 400);
        assert_eq!(
            lookup(&[("prefix", "a"), ("from", "b")]).unwrap_err().0,
            400
        );
        assert_eq!(lookup(&[("field", "a"), ("to", "b")]).unwrap_err().0, 400);
        assert_eq!(
            lookup(&[("window", "a"), ("from", "x")]).unwrap_err().0,
            400
        );
    }
}
