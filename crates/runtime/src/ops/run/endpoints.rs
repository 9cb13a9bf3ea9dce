//! The HTTP endpoints a running instance serves, each on an address of its
//! own, secured alike (see strata-http's `access`):
//!
//! - `--metrics ADDR`: `GET /metrics` (see `metrics`);
//! - `--query ADDR`: the stores' queries (see `query::http`), its address
//!   written to `<state-dir>/query-address`;
//! - `--console ADDR`: the web console (strata-http's `console`) with
//!   `/metrics`, what the app is (`/api/console`: its processors, topics,
//!   stores, and the job it runs) and the stores' queries, its address
//!   written to `<state-dir>/console-address`; a replay's console also
//!   shows its running diff against the live version (`running_diff`).
//!
//! `rebuild --console` serves its console through [`serve_console_on`].
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
use super::super::running_diff::RunningDiff;
use super::super::status::topic_retention_ms;
use super::runner::Runner;
use crate::versions::Versions;

/// An endpoint while it serves: stopped with the tasks that help it, and
/// its address file removed, when dropped.
pub(in crate::ops) struct Served {
    task: tokio::task::JoinHandle<()>,
    /// What makes what it shows: kept for its drop, which stops it.
    _helpers: Vec<Helper>,
    file: Option<PathBuf>,
}

/// Something a console keeps running (stopped when dropped).
pub(in crate::ops) type Helper = Box<dyn std::any::Any + Send>;

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
pub(in crate::ops) async fn bind(
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
    let exposition = exposition(runner, |_| Ok(())).await;
    Ok(serve_metrics_on(listener, exposition, access))
}

/// Serves `exposition` as `GET /metrics` on `listener`.
pub(in crate::ops) fn serve_metrics_on(
    listener: TcpListener,
    exposition: strata_http::Exposition,
    access: &strata_http::Access,
) -> Served {
    let task = tokio::spawn(strata_http::metrics_endpoint::serve_metrics(
        listener,
        exposition,
        access.clone(),
    ));
    Served {
        task,
        _helpers: Vec::new(),
        file: None,
    }
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
        _helpers: Vec::new(),
        file: Some(file.clone()),
    };
    layout::write_whole(&file, &bound.to_string())?;
    Ok(served)
}

/// Serves the console on `endpoint.addr`: the page, `/metrics`, what the
/// app is, and its stores' queries (of `endpoint.version`); a replay's also
/// shows its running diff against the live version. The address is logged
/// and written to `<state-dir>/console-address`.
pub(super) async fn serve_console(
    endpoint: &QueryEndpoint,
    runner: &Runner<'_>,
    access: &strata_http::Access,
) -> Result<Served, RuntimeError> {
    let file = layout::console_address_file(runner.location.state_dir());
    // A replay runs another version than the live one (a promoted version
    // runs live with a suffix too).
    let live = Versions::load(endpoint.root.state_dir())?;
    let (job, diff) = match live.live_name() != endpoint.version {
        true => {
            let (diff, diffing) = RunningDiff::start(runner.app, &endpoint.root, &endpoint.version);
            (Job::Replay, Some((diff, diffing)))
        }
        false => (Job::Run, None),
    };
    let shown = diff.as_ref().map(|(diff, _)| Arc::clone(diff));
    let exposition = exposition(runner, move |families| match &shown {
        Some(diff) => diff.write(families),
        None => Ok(()),
    })
    .await;
    let console = Console {
        exposition,
        description: describe(runner.app, &endpoint.version, job),
        helpers: (diff.into_iter())
            .map(|(_, diffing)| Box::new(diffing) as Helper)
            .collect(),
    };
    let queries = |bound| query_http::routes(runner.app, endpoint, bound, remote(runner), access);
    serve_console_on(endpoint.addr, file, console, queries, access).await
}

/// What a console serves beside its page.
pub(in crate::ops) struct Console {
    /// What its `/metrics` shows, and the page with it.
    pub exposition: strata_http::Exposition,
    /// What `/api/console` answers (see [`describe`]).
    pub description: Value,
    /// What makes what it shows, stopped with it.
    pub helpers: Vec<Helper>,
}

/// Serves `console` on `addr` with the routes `routes` makes for the
/// bound address (a file left by a killed run removed first, the address
/// then written to `file`).
pub(in crate::ops) async fn serve_console_on(
    addr: SocketAddr,
    file: PathBuf,
    console: Console,
    routes: impl FnOnce(SocketAddr) -> axum::Router,
    access: &strata_http::Access,
) -> Result<Served, RuntimeError> {
    // A file left by a killed run names an address nobody answers on.
    let _ = std::fs::remove_file(&file);
    let (listener, bound) = bind(addr, "console").await?;
    tracing::info!("console on {}://{bound}/", access.scheme());
    let description = console.description;
    let describe: strata_http::console::Describe = Arc::new(move || description.clone());
    let router =
        strata_http::console::router(Arc::new(console.exposition), describe).merge(routes(bound));
    let task = tokio::spawn(strata_http::serve(
        listener,
        router,
        strata_http::Limits::default(),
        access.clone(),
    ));
    let served = Served {
        task,
        _helpers: console.helpers,
        file: Some(file.clone()),
    };
    layout::write_whole(&file, &bound.to_string())?;
    Ok(served)
}

/// The instance's metrics, with each input topic's `retention.ms` as it
/// was when the endpoint started (for the retention warning), and what
/// `also` writes.
async fn exposition(
    runner: &Runner<'_>,
    also: impl Fn(&mut strata_http::Families<'_>) -> std::fmt::Result + Send + Sync + 'static,
) -> strata_http::Exposition {
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
        also,
    )
}

/// The job a console watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ops) enum Job {
    /// The live run.
    Run,
    /// A replay into a version (with its running diff).
    Replay,
    /// A rebuild of a version's state (no store lookup: its state is not
    /// in use yet).
    Rebuild,
}

/// What the console's page draws the app from: its processors with the
/// topics they read and write (named as in the log, as the metrics label
/// them) and the stores they keep, and the job it watches.
pub(in crate::ops) fn describe(app: &App, version: &str, job: Job) -> Value {
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
    let job = match job {
        Job::Run => "run",
        Job::Replay => "replay",
        Job::Rebuild => "rebuild",
    };
    json!({
        "kind": "app",
        "name": app.name(),
        "version": version,
        "job": job,
        "lookup": job != "rebuild",
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
