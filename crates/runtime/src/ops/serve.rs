//! Serving the embedded log over the Kafka protocol from the app
//! (`run --serve ADDR`), so that other clients read its derived topics
//! while it runs. The broker is compiled in only with the crate's `serve`
//! feature (the `strata` crate turns it on); without it `--serve` is a
//! clear error, and an app that never serves builds no broker code.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use strata_log::{AppendSignals, LogManager};
use tokio::sync::watch;

use crate::error::RuntimeError;
#[cfg(feature = "serve")]
use crate::layout;

/// The server while it runs: send `true` to stop it, then await it.
pub(super) type Served = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

/// Serves the Kafka protocol over the embedded log in this process.
/// The bound address goes to `<state_dir>/serving` (written aside and
/// renamed: a reader sees a whole address or none).
#[cfg(feature = "serve")]
pub(super) async fn serve(
    log: Arc<LogManager>,
    addr: SocketAddr,
    state_dir: &Path,
) -> Result<(Served, Arc<AppendSignals>), RuntimeError> {
    let config = strata_broker::BrokerConfig {
        listen: addr,
        ..Default::default()
    };
    let broker = strata_broker::Broker::bind(config, log)
        .await
        .map_err(|error| RuntimeError::Serve {
            addr: addr.to_string(),
            error: Box::new(error),
        })?;
    let bound = broker.local_addr();
    eprintln!("serving the Kafka protocol on {bound}");
    layout::write_whole(&layout::serving_file(state_dir), &format!("{bound}\n"))?;
    let signals = broker.append_signals();
    let (stop, mut stopped) = watch::channel(false);
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        if let Err(error) = broker.serve(shutdown).await {
            tracing::error!("serving: {error}");
        }
    });
    Ok(((stop, server), signals))
}

/// Without the broker compiled in, `--serve` says how to get it.
#[cfg(not(feature = "serve"))]
pub(super) async fn serve(
    _log: Arc<LogManager>,
    addr: SocketAddr,
    _state_dir: &Path,
) -> Result<(Served, Arc<AppendSignals>), RuntimeError> {
    Err(RuntimeError::ServeNotBuilt {
        addr: addr.to_string(),
    })
}
