//! The accept loop: a bounded number of connections sharing one request
//! memory budget, and a graceful shutdown that stops accepting, lets each
//! connection answer the request in hand, and waits for all of them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::acl::{AclStore, Authorizer};
use super::api::BrokerContext;
use super::auth::{CredentialStore, TlsReloader};
use super::config::{ACCEPT_RETRY_DELAY, LISTEN_BACKLOG};
use super::connection::Link;
use super::group::GroupCoordinator;
use super::http_endpoints::{bind_http, console_router, exposition};
use super::listener::{Endpoint, SecurityProtocol, authenticates};
use super::txn::TxnCoordinator;
use super::{BrokerConfig, BrokerError, connection};
use strata_log::LogManager;

/// Where the group coordinator keeps committed offsets, inside the data
/// directory (no partition directory can have this name: those end in
/// `-<partition>`).
const GROUPS_DIR: &str = "groups";
/// Where the transaction coordinator keeps its state, likewise.
const TRANSACTIONS_DIR: &str = "transactions";
/// How often group sessions and rebalance deadlines are checked.
const GROUP_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// A bound, not yet serving, broker.
pub struct Broker {
    listeners: Vec<Bound>,
    metrics_listener: Option<(TcpListener, strata_http::Access)>,
    console_listener: Option<(TcpListener, strata_http::Access)>,
    ctx: Arc<BrokerContext>,
}

/// One listener's socket and what its connections need.
struct Bound {
    socket: TcpListener,
    link: Arc<Link>,
}

impl Broker {
    /// Binds the listening socket.
    pub async fn bind(config: BrokerConfig, log: Arc<LogManager>) -> Result<Self, BrokerError> {
        config.check().map_err(BrokerError::Config)?;
        for warning in config.warnings() {
            tracing::warn!("{warning}");
        }
        if !super::huge_alloc::huge_claims_survivable() {
            tracing::warn!(
                "this process serves the Kafka protocol without \
                 strata::broker::HugeReservingAllocator as its global allocator: a request \
                 claiming an absurd array length will abort it; add \
                 `#[global_allocator] static A: strata::broker::HugeReservingAllocator = \
                 strata::broker::HugeReservingAllocator;` to the binary"
            );
        }
        log.set_producer_expiration_ms(
            i64::try_from(config.producer_id_expiration.as_millis()).unwrap_or(i64::MAX),
        );
        // Everything the handlers need is opened before the port is, so a
        // client that can connect is served.
        let groups_dir = log.data_dir().join(GROUPS_DIR);
        let groups = GroupCoordinator::open(&groups_dir, config.groups.clone()).map_err(|e| {
            BrokerError::Io {
                context: format!("opening {}", groups_dir.display()),
                error: std::io::Error::other(e),
            }
        })?;
        let credentials = CredentialStore::open(log.data_dir()).map_err(|e| BrokerError::Io {
            context: "opening the SCRAM credentials".into(),
            error: std::io::Error::other(e),
        })?;
        let appends: Arc<super::AppendSignals> = Arc::default();
        let transactions_dir = log.data_dir().join(TRANSACTIONS_DIR);
        let transactions = TxnCoordinator::open(
            &transactions_dir,
            config.transactions.clone(),
            Arc::clone(&log),
            Arc::clone(&appends),
        )
        .map_err(|e| BrokerError::Io {
            context: format!("opening {}", transactions_dir.display()),
            error: std::io::Error::other(e),
        })?;
        // Before the port opens: no client sees a half-ended transaction.
        transactions.recover(&groups);
        let acls = AclStore::open(log.disk(), log.data_dir())?;
        let acls = Authorizer::new(acls, config.super_users.clone())
            .trusting_unauthenticated_listeners(config.trust_unauthenticated_listeners);
        let tls = match &config.tls {
            Some(settings) => Some(Arc::new(
                TlsReloader::load(settings.clone())
                    .map_err(|e| BrokerError::Config(e.to_string()))?,
            )),
            None => None,
        };
        let mut listeners = Vec::new();
        for listener in config.effective_listeners() {
            let socket = listen(listener.listen).map_err(|error| BrokerError::Io {
                context: format!("listening on {} ({})", listener.listen, listener.name),
                error,
            })?;
            let local = socket.local_addr().map_err(|error| BrokerError::Io {
                context: "reading the bound address".into(),
                error,
            })?;
            let (host, port) = listener
                .advertised
                .clone()
                .unwrap_or_else(|| (config.advertised_host.clone(), local.port()));
            let link = Link {
                endpoint: Arc::new(Endpoint {
                    name: listener.name.clone(),
                    protocol: listener.protocol,
                    host,
                    port: i32::from(port),
                }),
                tls: listener.protocol.uses_tls().then(|| tls.clone()).flatten(),
                secured: authenticates(listener.protocol, config.tls.as_ref()),
                sasl: listener.protocol.uses_sasl().then(|| config.sasl.clone()),
            };
            if !link.secured {
                warn_if_locked_out(&acls, &config, &listener.name);
            }
            listeners.push(Bound {
                socket,
                link: Arc::new(link),
            });
        }
        let ctx = Arc::new(BrokerContext {
            log,
            config,
            appends,
            metrics: super::Metrics::default(),
            groups,
            transactions,
            credentials,
            acls,
        });
        let metrics_listener = match ctx.config.metrics_listen {
            Some(addr) => Some(bind_http(addr, "metrics", &ctx).await?),
            None => None,
        };
        let console_listener = match ctx.config.console_listen {
            Some(addr) => Some(bind_http(addr, "console", &ctx).await?),
            None => None,
        };
        Ok(Self {
            listeners,
            metrics_listener,
            console_listener,
            ctx,
        })
    }

    /// What wakes fetches waiting for data: whoever else appends to the
    /// broker's log in this process signals its appends here.
    pub fn append_signals(&self) -> Arc<super::AppendSignals> {
        Arc::clone(&self.ctx.appends)
    }

    /// The address of the first listener.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners[0]
            .socket
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Each listener's name, protocol and bound address, in the order
    /// configured.
    pub fn listener_addrs(&self) -> Vec<(String, SecurityProtocol, SocketAddr)> {
        self.listeners
            .iter()
            .map(|bound| {
                let endpoint = &bound.link.endpoint;
                let addr = bound
                    .socket
                    .local_addr()
                    .expect("a bound listener has an address");
                (endpoint.name.clone(), endpoint.protocol, addr)
            })
            .collect()
    }

    /// The address metrics are served on, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|(l, _)| l.local_addr().ok())
    }

    /// Where metrics are scraped (`http://ADDR/metrics`, or `https://`
    /// with `metrics_tls`), if enabled.
    pub fn metrics_url(&self) -> Option<String> {
        let (listener, access) = self.metrics_listener.as_ref()?;
        let addr = listener.local_addr().ok()?;
        Some(format!("{}://{addr}/metrics", access.scheme()))
    }

    /// Binds another HTTP endpoint of this broker's process (`what` names
    /// it in errors: the schema registry), secured as `/metrics` and the
    /// console are (see http_endpoints): loopback unless TLS and
    /// authentication are on, or allow_unauthenticated_remote.
    pub async fn bind_http(
        &self,
        addr: SocketAddr,
        what: &str,
    ) -> Result<(TcpListener, strata_http::Access), BrokerError> {
        bind_http(addr, what, &self.ctx).await
    }

    /// The address the web console is served on, if enabled.
    pub fn console_addr(&self) -> Option<SocketAddr> {
        self.console_listener
            .as_ref()
            .and_then(|(l, _)| l.local_addr().ok())
    }

    /// Where the web console is (`http://ADDR/`, or `https://` with
    /// `metrics_tls`), if enabled.
    pub fn console_url(&self) -> Option<String> {
        let (listener, access) = self.console_listener.as_ref()?;
        let addr = listener.local_addr().ok()?;
        Some(format!("{}://{addr}/", access.scheme()))
    }

    /// Serves until `shutdown` completes, then closes every connection after
    /// its current request and returns.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), BrokerError> {
        let maintenance = tokio::spawn(maintain(Arc::clone(&self.ctx)));
        let cleaning = tokio::spawn(clean(Arc::clone(&self.ctx)));
        let listeners = self.listener_addrs();
        let metrics = self.metrics_listener.map(|(listener, access)| {
            let exposition = exposition(&self.ctx);
            tokio::spawn(strata_http::metrics_endpoint::serve_metrics(
                listener, exposition, access,
            ))
        });
        let console = self.console_listener.map(|(listener, access)| {
            let router = console_router(&self.ctx, &listeners);
            let limits = strata_http::Limits::default();
            tokio::spawn(strata_http::serve(listener, router, limits, access))
        });
        let permits = Arc::new(Semaphore::new(self.ctx.config.connections_max));
        // Shared by every connection: request bytes held at once (those
        // read before authentication from a budget of their own).
        let request_memory = Arc::new(connection::RequestMemory::new(
            self.ctx.config.request_memory_bytes_max,
            connection::PRE_AUTH_MEMORY_BYTES_MAX,
        ));
        let (stop, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        // One accept loop per listener, all drawing on the same connection
        // permits; accepted connections come here to be served.
        let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel(1);
        let mut accepting = JoinSet::new();
        for bound in self.listeners {
            accepting.spawn(accept(bound, Arc::clone(&permits), accepted_tx.clone()));
        }
        drop(accepted_tx);
        tokio::pin!(shutdown);
        loop {
            let (stream, link, permit) = tokio::select! {
                next = accepted.recv() => match next {
                    Some(next) => next,
                    None => break,
                },
                () = &mut shutdown => break,
            };
            let ctx = Arc::clone(&self.ctx);
            let stopped = stopped.clone();
            let request_memory = Arc::clone(&request_memory);
            connections.spawn(async move {
                connection::serve(stream, link, ctx, request_memory, stopped).await;
                drop(permit);
            });
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
        }
        accepting.shutdown().await;
        let _ = stop.send(true);
        let drained = tokio::time::timeout(self.ctx.config.shutdown_grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("closing connections still busy after the shutdown grace period");
            connections.shutdown().await;
        }
        maintenance.abort();
        let _ = maintenance.await;
        cleaning.abort();
        let _ = cleaning.await;
        for endpoint in [metrics, console].into_iter().flatten() {
            endpoint.abort();
            let _ = endpoint.await;
        }
        Ok(())
    }
}

/// Accepts on one listener while a connection permit is free, passing
/// each connection on with its permit.
async fn accept(
    bound: Bound,
    permits: Arc<Semaphore>,
    accepted: tokio::sync::mpsc::Sender<(tokio::net::TcpStream, Arc<Link>, OwnedSemaphorePermit)>,
) {
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let stream = match bound.socket.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors and the like: keep serving,
                // but do not spin while the condition lasts.
                tracing::warn!("accepting a connection failed: {error}");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if accepted
            .send((stream, Arc::clone(&bound.link), permit))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Binds a Kafka listener with a backlog of [`LISTEN_BACKLOG`] (tokio's
/// `TcpListener::bind` asks for 128), reusing the address as it does.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Log compaction, on its own interval and apart from the other upkeep (a
/// clean may take long), off the executor's threads.
async fn clean(ctx: Arc<BrokerContext>) {
    let interval = ctx.config.cleaner_check_interval;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ctx = Arc::clone(&ctx);
        let _ =
            tokio::task::spawn_blocking(move || ctx.log.clean_compacted(&ctx.config.cleaner)).await;
    }
}

/// Retention, the `flush.ms` policy, transaction timeouts and the expiry
/// of committed offsets, on their intervals, off the executor's threads
/// (all touch the disk); group session expiry.
async fn maintain(ctx: Arc<BrokerContext>) {
    // The first pass waits one interval, as Kafka's does, rather than
    // deleting at the instant of start-up.
    let start = tokio::time::Instant::now();
    let mut retention = tokio::time::interval_at(
        start + ctx.config.retention_check_interval,
        ctx.config.retention_check_interval,
    );
    let mut flush = tokio::time::interval_at(
        start + ctx.config.flush_check_interval,
        ctx.config.flush_check_interval,
    );
    let mut transactions = tokio::time::interval_at(
        start + ctx.config.transactions.abort_check_interval,
        ctx.config.transactions.abort_check_interval,
    );
    transactions.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut offsets = tokio::time::interval_at(
        start + ctx.config.offsets_retention_check_interval,
        ctx.config.offsets_retention_check_interval,
    );
    offsets.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut groups = tokio::time::interval(GROUP_TICK);
    groups.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let log = Arc::clone(&ctx.log);
        tokio::select! {
            _ = retention.tick() => {
                let outcomes = tokio::task::spawn_blocking(move || log.enforce_retention()).await;
                for (partition, outcome) in outcomes.unwrap_or_default() {
                    tracing::info!(partition, segments = outcome.segments_deleted, log_start_offset = outcome.log_start_offset, "retention");
                }
            }
            _ = flush.tick() => {
                let _ = tokio::task::spawn_blocking(move || log.flush_due()).await;
            }
            _ = transactions.tick() => {
                let ctx = Arc::clone(&ctx);
                let _ = tokio::task::spawn_blocking(move || ctx.transactions.tick(&ctx.groups)).await;
            }
            _ = offsets.tick() => {
                let ctx = Arc::clone(&ctx);
                let now_ms = strata_record::time::now_ms();
                match tokio::task::spawn_blocking(move || ctx.groups.expire_offsets(now_ms)).await {
                    Ok(Ok(expired)) => for (group, count) in expired {
                        tracing::info!(group, offsets = count, "committed offsets expired (offsets_retention_ms)");
                    },
                    Ok(Err(error)) => tracing::error!("expiring committed offsets failed: {error}"),
                    Err(_) => {}
                }
            }
            // In memory only, and quick: no need to leave the executor.
            _ = groups.tick() => ctx.groups.tick(std::time::Instant::now()),
        }
    }
}

/// Says so at start when a listener that does not authenticate (its
/// callers are `User:ANONYMOUS`) gets only what ACLs allow: ACLs exist, its
/// callers are not super users and the listener is not trusted. Tools on
/// it that worked before the first ACL are refused from then on.
fn warn_if_locked_out(acls: &Authorizer, config: &BrokerConfig, listener: &str) {
    let anonymous = crate::auth::Principal::user("ANONYMOUS");
    let locked = !acls.snapshot().is_empty()
        && !config.trust_unauthenticated_listeners
        && !config.super_users.contains(&anonymous);
    if locked {
        tracing::warn!(
            "listener {listener} does not authenticate, and ACLs exist: its callers (User:ANONYMOUS) get only what ACLs allow them; to keep it an administrator's door add super_users = [\"User:ANONYMOUS\"] to strata.toml, or trust_unauthenticated_listeners = true for the older rule (docs/acls.md)"
        );
    }
}
