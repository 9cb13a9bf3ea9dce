//! The HTTP endpoints a running instance serves, each on an address of its
//! own, secured alike (see strata-http's `access`):
//!
//! - `--metrics ADDR`: `GET /metrics` (see `metrics`);
//! - `--query ADDR`: the stores' queries (see `query::http`), its address
//!   written to `<state-dir>/query-address`;
//! - `--console ADDR`: the web console (strata-http's `console`) with
//!   `/metrics`, what the app is (`/api/console`: its processors, topics,
//!   stores, and the job it runs) and the stores' queries, its address
//!   written to `<state-dir>/console-address`.
//!
//! Each is stopped, and its address file removed, when the run ends
//! however it ends.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::error::RuntimeError;
use crate::layout;
use crate::log_access::LogAccess;
use crate::topology::App;

use super::super::query::http::{self as query_http, QueryEndpoint};
use super::super::status::topic_retention_ms;
use super::runner::Runner;

/// An endpoint while it serves: stopped, and its address file removed,
/// when dropped.
pub(super) struct Served {
    task: tokio::task::JoinHandle<()>,
    file: Option<PathBuf>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(file) = &self.file {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Binds `addr` (port 0: a free one) for the endpoint of the flag
/// `--{flag}`.
pub(super) async fn bind(
    addr: SocketAddr,
    flag: &str,
) -> Result<(TcpListener, SocketAddr), RuntimeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| RuntimeError::Io {
            context: format!("listening on {addr} for --{flag} (give another address)"),
            error,
        })?;
    let bound = listener
        .local_addr()
        .map_err(RuntimeError::io(format!("reading the --{flag} address")))?;
    Ok((listener, bound))
}

/// Serves the instance's task board and records processed as Prometheus
/// text on `addr`.
pub(super) async fn serve_metrics(
    addr: SocketAddr,
    runner: &Runner<'_>,
    access: &strata_http::Access,
) -> Result<Served, RuntimeError> {
    let (listener, bound) = bind(addr, "metrics").await?;
    tracing::info!("metrics on {}://{bound}/metrics", access.scheme());
    let exposition = exposition(runner).await;
    let task = tokio::spawn(strata_http::metrics_endpoint::serve_metrics(
        listener,
        exposition,
        access.clone(),
    ));
    Ok(Served { task, file: None })
}

/// Answers queries of the app's stores on `listener`; remote, from the
/// tasks the board shows running here, asking the other instances for the
/// rest. The address is logged and written to `<state-dir>/query-address`.
pub(super) fn serve_queries(
    endpoint: &QueryEndpoint,
    (listener, bound): (TcpListener, SocketAddr),
    runner: &Runner<'_>,
    access: &strata_http::Access,
) -> Result<Served, RuntimeError> {
    tracing::info!("queries on {}://{bound}/stores", access.scheme());
    let task = query_http::serve(runner.app, endpoint, listener, remote(runner), access);
    let file = layout::query_address_file(runner.location.state_dir());
    let served = Served {
        task,
        file: Some(file.clone()),
    };
    layout::write_whole(&file, &bound.to_string())?;
    Ok(served)
}

/// Serves the console on `endpoint.addr`: the page, `/metrics`, what the
/// app is, and its stores' queries (of `endpoint.version`). The address
/// is logged and written to `<state-dir>/console-address`.
pub(super) async fn serve_console(
    endpoint: &QueryEndpoint,
    runner: &Runner<'_>,
    access: &strata_http::Access,
) -> Result<Served, RuntimeError> {
    let file = layout::console_address_file(runner.location.state_dir());
    // A file left by a killed run names an address nobody answers on.
    let _ = std::fs::remove_file(&file);
    let (listener, bound) = bind(endpoint.addr, "console").await?;
    tracing::info!("console on {}://{bound}/", access.scheme());
    let exposition = exposition(runner).await;
    let description = describe(runner.app, &endpoint.version);
    let describe: strata_http::console::Describe = Arc::new(move || description.clone());
    let queries = query_http::routes(runner.app, endpoint, bound, remote(runner), access);
    let router = strata_http::console::router(Arc::new(exposition), describe).merge(queries);
    let task = tokio::spawn(strata_http::serve(
        listener,
        router,
        strata_http::Limits::default(),
        access.clone(),
    ));
    let served = Served {
        task,
        file: Some(file.clone()),
    };
    layout::write_whole(&file, &bound.to_string())?;
    Ok(served)
}

/// The instance's metrics, with each input topic's `retention.ms` as it
/// was when the endpoint started (for the retention warning).
async fn exposition(runner: &Runner<'_>) -> strata_http::Exposition {
    let admin = match runner.log {
        LogAccess::Remote(remote) => Some(strata_client::Admin::new(Arc::clone(&remote.cluster))),
        LogAccess::Embedded(..) => None,
    };
    let mut retention = BTreeMap::new();
    for spec in &runner.app.processors {
        for topic in &spec.inputs {
            let topic = runner.app.log_topic(topic);
            if let std::collections::btree_map::Entry::Vacant(entry) = retention.entry(topic) {
                let ms = topic_retention_ms(runner.location, admin.as_ref(), entry.key()).await;
                entry.insert(ms);
            }
        }
    }
    crate::metrics::exposition(
        runner.board.clone(),
        Arc::clone(&runner.progress),
        Arc::new(retention),
    )
}

/// What the console's page draws the app from: its processors with the
/// topics they read and write (named as in the log, as the metrics label
/// them) and the stores they keep, and the job: the live run, or a replay
/// of a version.
fn describe(app: &App, version: &str) -> Value {
    let processors: Vec<Value> = (app.processors.iter())
        .map(|p| {
            json!({
                "name": p.name,
                "inputs": p.inputs.iter().map(|t| app.log_topic(t)).collect::<Vec<_>>(),
                "outputs": p.outputs.iter().map(|o| app.log_topic(&o.topic)).collect::<Vec<_>>(),
                "stores": p.store_names(),
            })
        })
        .collect();
    let job = if app.topic_suffix.is_empty() {
        "run"
    } else {
        "replay"
    };
    json!({
        "kind": "app",
        "name": app.name(),
        "version": version,
        "job": job,
        "processors": processors,
        "stores": super::super::query::describe_stores(app),
    })
}

/// Remote: how the query routes find and ask the other instances.
fn remote(runner: &Runner<'_>) -> Option<query_http::Remote> {
    let LogAccess::Remote(remote) = runner.log else {
        return None;
    };
    let board = runner.board.clone();
    let all: BTreeSet<String> = (runner.all_tasks().iter())
        .map(|id| id.to_string())
        .collect();
    let running: query_http::Running = Arc::new(move || {
        let tasks = board.snapshot().into_iter();
        let running = tasks
            .filter(|(_, view)| *view == crate::TaskView::Running)
            .map(|(task, _)| task)
            .collect();
        super::super::query::Held {
            running,
            all: all.clone(),
        }
    });
    Some(query_http::Remote {
        running,
        admin: strata_client::Admin::new(Arc::clone(&remote.cluster)),
        group: runner.app.versioned_name(),
    })
}
