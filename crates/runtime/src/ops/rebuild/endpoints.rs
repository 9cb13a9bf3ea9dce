//! What a rebuild serves while it runs, secured as a running app's
//! endpoints are (see strata-http's `access`):
//!
//! - `--metrics ADDR`: its tasks' metrics (records read, lag, time
//!   processing, state size) and its progress, `strata_job_records_done`
//!   of `strata_job_records_target`;
//! - `--console ADDR`: the console's page on the same figures, the job a
//!   rebuild, without the store lookup (the rebuilt state is not in use
//!   until it is swapped in), its address written to
//!   `<state-dir>/rebuild-console-address`.
//!
//! Both stop when the rebuild ends, however it ends.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::error::RuntimeError;
use crate::layout;
use crate::location::Location;
use crate::ops::run::endpoints::{self, Console, Job, Served};

use super::RebuildOptions;
use super::job::Shared;

/// The endpoints `options` asks for, checked before the rebuild opens
/// anything.
pub(super) fn check(options: &RebuildOptions) -> Result<strata_http::Access, RuntimeError> {
    let access = options.http.load()?;
    if let Some(addr) = options.metrics {
        access.check_bind(addr, "metrics endpoint")?;
    }
    if let Some(addr) = options.console {
        access.check_bind(addr, "console")?;
    }
    Ok(access)
}

/// Serves the endpoints `options` asks for on the rebuild's figures.
pub(super) async fn serve(
    shared: &Shared,
    location: &Location,
    options: &RebuildOptions,
    access: &strata_http::Access,
) -> Result<Vec<Served>, RuntimeError> {
    let mut served = Vec::new();
    if let Some(addr) = options.metrics {
        let (listener, bound) = endpoints::bind(addr, "metrics").await?;
        tracing::info!("rebuild metrics on {}://{bound}/metrics", access.scheme());
        served.push(endpoints::serve_metrics_on(
            listener,
            exposition(shared),
            access,
        ));
    }
    if let Some(addr) = options.console {
        let app = &shared.app;
        let console = Console {
            exposition: exposition(shared),
            description: endpoints::describe(app, app.version_name(), Job::Rebuild),
            helpers: Vec::new(),
        };
        let file = layout::rebuild_console_address_file(location.state_dir());
        let no_routes = |_: SocketAddr| axum::Router::new();
        served.push(endpoints::serve_console_on(addr, file, console, no_routes, access).await?);
    }
    Ok(served)
}

/// The rebuild's tasks and progress as metrics (no retention warning: a
/// rebuild reads what retention has kept, checked before it starts).
fn exposition(shared: &Shared) -> strata_http::Exposition {
    crate::metrics::exposition(
        shared.board.clone(),
        Arc::clone(&shared.progress),
        Arc::new(BTreeMap::new()),
        |_| Ok(()),
    )
}
