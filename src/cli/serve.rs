//! `strata serve`: the broker over a data directory until SIGTERM or
//! Ctrl-C, then a clean close of the log (so the next start skips recovery).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::broker::{Broker, BrokerConfig, ConfigFile};
use crate::log::LogManager;

/// Where the broker keeps its log and how it listens; flags win over the
/// config file, which wins over the defaults.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The log's data directory [default: ./strata-data].
    #[arg(long, env = "STRATA_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:9092].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Host clients are told to connect to [default: 127.0.0.1].
    #[arg(long)]
    pub advertised_host: Option<String>,
    /// A strata.toml with broker settings and topic defaults; flags win.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (off by default).
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
}

/// Serves until a stop signal, then closes the log.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        data_dir,
        listen,
        advertised_host,
        config: config_path,
        metrics,
    } = args;
    let mut config = BrokerConfig::default();
    let mut file_data_dir = None;
    if let Some(path) = &config_path {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file = ConfigFile::parse(&text)
            .and_then(|file| file.apply(&mut config).map(|()| file))
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        file_data_dir = file.data_dir;
    }
    if let Some(listen) = listen {
        config.listen = listen;
    }
    if let Some(host) = advertised_host {
        config.advertised_host = host;
    }
    if metrics.is_some() {
        config.metrics_listen = metrics;
    }
    let data_dir = data_dir
        .or(file_data_dir)
        .unwrap_or_else(|| PathBuf::from("./strata-data"));
    let log = Arc::new(
        LogManager::open(&data_dir, config.log.clone())
            .with_context(|| format!("opening data directory {}", data_dir.display()))?,
    );
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    runtime.block_on(async {
        // Watching for signals starts before the port opens: a SIGTERM sent
        // as soon as the broker accepts connections must stop it cleanly.
        let signalled = shutdown_signal()?;
        let broker = Broker::bind(config, Arc::clone(&log)).await?;
        println!("strata listening on {}", broker.local_addr());
        if let Some(metrics) = broker.metrics_addr() {
            println!("metrics on http://{metrics}/metrics");
        }
        broker.serve(signalled).await?;
        anyhow::Ok(())
    })?;
    drop(runtime);
    let log =
        Arc::try_unwrap(log).map_err(|_| anyhow::anyhow!("the log is still in use at shutdown"))?;
    log.close().context("closing the log")?;
    eprintln!("strata stopped cleanly");
    Ok(())
}

/// A future that completes on SIGTERM or Ctrl-C; both are watched from the
/// moment this returns.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("watching SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("watching SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}
