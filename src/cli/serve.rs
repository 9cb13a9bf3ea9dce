//! `strata serve`: the broker over a data directory until SIGTERM or
//! Ctrl-C, then a clean close of the log (so the next start skips recovery).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::broker::auth::{ClientAuth, TlsSettings};
use crate::broker::listener::ListenerConfig;
use crate::broker::{Broker, BrokerConfig, ConfigFile};
use crate::log::LogManager;
use crate::registry::Registry;

/// Where the broker keeps its log and how it listens; flags win over the
/// config file, which wins over the defaults.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The log's data directory [default: ./strata-data].
    #[arg(long, env = "STRATA_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of a single PLAINTEXT listener [default: 127.0.0.1:9092].
    #[arg(long, conflicts_with = "listener")]
    pub listen: Option<SocketAddr>,
    /// A listener, `[NAME:]PROTOCOL://HOST:PORT` with PROTOCOL one of
    /// PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; repeat for several
    /// (replaces the config file's [[listeners]]).
    #[arg(long = "listener", value_name = "LISTENER")]
    pub listener: Vec<ListenerConfig>,
    /// The broker's certificate chain (PEM), for SSL and SASL_SSL listeners.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates must chain to.
    #[arg(long)]
    pub tls_client_ca: Option<PathBuf>,
    /// Client certificates: none, requested or required [default: none,
    /// or required when --tls-client-ca is given].
    #[arg(long)]
    pub tls_client_auth: Option<ClientAuth>,
    /// Let a listener that does not authenticate bind beyond loopback.
    #[arg(long)]
    pub allow_unauthenticated_remote: bool,
    /// SASL mechanisms enabled on SASL listeners, comma-separated
    /// [default: SCRAM-SHA-512,SCRAM-SHA-256,PLAIN].
    #[arg(long, value_delimiter = ',')]
    pub sasl_mechanisms: Vec<String>,
    /// Host clients are told to connect to [default: 127.0.0.1].
    #[arg(long)]
    pub advertised_host: Option<String>,
    /// A strata.toml with broker settings and topic defaults; flags win.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (off by default).
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Serve the web console on this address (off by default): topics,
    /// groups with their lag, transactions, with `/metrics` beside it.
    #[arg(long, value_name = "ADDR")]
    pub console: Option<SocketAddr>,
    /// Serve a schema registry speaking Confluent's REST API on this
    /// address (off by default), its schemas kept in the `_schemas` topic;
    /// secured as --metrics and --console are.
    #[arg(long, value_name = "ADDR")]
    pub schema_registry: Option<SocketAddr>,
}

/// Blocks at least this large are mapped and unmapped whole by the C
/// allocator. glibc raises its threshold (up to 32 MiB) each time such a
/// block is freed, after which the 1 to 32 MiB steps of a growing buffer
/// (a compressed batch inflated to be checked) come from its per-thread
/// arenas and stay resident once freed: measured, `strata serve` kept +4
/// to +75 MB after the malformed-request table
/// (`tests/hostile/malformed_requests`), depending on which threads served it. A
/// fixed threshold keeps the larger steps out of the arenas. Requests of
/// usual sizes (a Kafka producer's `max.request.size` is 1 MiB) are below
/// it.
const MMAP_THRESHOLD_BYTES: libc::c_int = 8 << 20;

/// Serves until a stop signal, then closes the log.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a tunable of the C allocator; called before
    // the broker starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
    let ServeArgs {
        data_dir,
        listen,
        advertised_host,
        config: config_path,
        metrics,
        console,
        schema_registry,
        listener,
        tls_cert,
        tls_key,
        tls_client_ca,
        tls_client_auth,
        allow_unauthenticated_remote,
        sasl_mechanisms,
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
        config.listeners.clear();
    }
    if !listener.is_empty() {
        config.listeners = listener;
    }
    // The flags name the certificate and key; what the file says of client
    // certificates stays.
    if let (Some(cert), Some(key)) = (tls_cert, tls_key) {
        match &mut config.tls {
            Some(tls) => (tls.cert, tls.key) = (cert, key),
            None => {
                config.tls = Some(TlsSettings {
                    cert,
                    key,
                    client_ca: None,
                    client_auth: ClientAuth::None,
                });
            }
        }
    }
    if let Some(tls) = &mut config.tls {
        if let Some(ca) = tls_client_ca {
            tls.client_ca = Some(ca);
            tls.client_auth = ClientAuth::Required;
        }
        if let Some(auth) = tls_client_auth {
            tls.client_auth = auth;
        }
    } else if tls_client_ca.is_some() || tls_client_auth.is_some() {
        anyhow::bail!("--tls-client-ca and --tls-client-auth need --tls-cert and --tls-key");
    }
    if allow_unauthenticated_remote {
        config.allow_unauthenticated_remote = true;
    }
    if !sasl_mechanisms.is_empty() {
        config.sasl.mechanisms =
            crate::broker::parse_mechanisms(sasl_mechanisms.iter().map(String::as_str))
                .map_err(|e| anyhow::anyhow!(e))?;
    }
    config.check().map_err(|e| anyhow::anyhow!(e))?;
    if let Some(host) = advertised_host {
        config.advertised_host = host;
    }
    if metrics.is_some() {
        config.metrics_listen = metrics;
    }
    if console.is_some() {
        config.console_listen = console;
    }
    let data_dir = data_dir
        .or(file_data_dir)
        .unwrap_or_else(|| PathBuf::from("./strata-data"));
    let log = Arc::new(
        LogManager::open(&data_dir, config.log.clone())
            .with_context(|| format!("opening data directory {}", data_dir.display()))?,
    );
    let runtime = crate::broker::serving_runtime().context("starting the runtime")?;
    runtime.block_on(async {
        // Watching for signals starts before the port opens: a SIGTERM sent
        // as soon as the broker accepts connections must stop it cleanly.
        let signalled = shutdown_signal()?;
        let broker = Broker::bind(config, Arc::clone(&log)).await?;
        for (name, protocol, addr) in broker.listener_addrs() {
            if name == protocol.name() {
                println!("strata listening on {addr} ({protocol})");
            } else {
                println!("strata listening on {addr} ({name}: {protocol})");
            }
        }
        if let Some(url) = broker.metrics_url() {
            println!("metrics on {url}");
        }
        if let Some(url) = broker.console_url() {
            println!("console on {url}");
        }
        if let Some(addr) = schema_registry {
            serve_schema_registry(&broker, &log, addr).await?;
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

/// Opens the schema registry over the broker's log (reading `_schemas`)
/// and serves it on `addr` until the runtime ends, secured as the broker's
/// other HTTP endpoints.
async fn serve_schema_registry(
    broker: &Broker,
    log: &Arc<LogManager>,
    addr: SocketAddr,
) -> anyhow::Result<()> {
    let (listener, access) = broker.bind_http(addr, "schema registry").await?;
    let (log, appends) = (Arc::clone(log), broker.append_signals());
    let registry = tokio::task::spawn_blocking(move || Registry::open(&log, appends))
        .await
        .context("opening the schema registry")?
        .context("opening the schema registry")?;
    let bound = listener.local_addr().context("reading the bound address")?;
    println!("schema registry on {}://{bound}/", access.scheme());
    tokio::spawn(crate::registry::serve(listener, access, Arc::new(registry)));
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
