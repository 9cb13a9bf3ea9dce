//! A broker served in the test's own process, on a free loopback port.

use std::path::Path;
use std::sync::Arc;

use strata::broker::{Broker, BrokerConfig};
use strata::log::{LogConfig, LogManager};
use tokio::sync::oneshot;

pub struct InProcess {
    pub addr: std::net::SocketAddr,
    /// Where metrics are served, when the config asks for them.
    pub metrics: Option<std::net::SocketAddr>,
    pub log: Arc<LogManager>,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
}

/// Opens `dir` and serves it with `config` (its listen address replaced
/// by a free port).
pub async fn start_in(dir: &Path, config: BrokerConfig) -> InProcess {
    let log = Arc::new(LogManager::open(dir, LogConfig::default()).unwrap());
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..config
    };
    let broker = Broker::bind(config, Arc::clone(&log)).await.unwrap();
    let (addr, metrics) = (broker.local_addr(), broker.metrics_addr());
    let (stop, stopped) = oneshot::channel();
    let served = tokio::spawn(async move {
        broker
            .serve(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    InProcess {
        addr,
        metrics,
        log,
        stop,
        served,
    }
}

impl InProcess {
    /// Shuts the broker down and waits until it has stopped.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.served.await.unwrap();
    }
}
