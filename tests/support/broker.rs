//! A broker served in the test's own runtime on loopback ports.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata::broker::{Broker, BrokerConfig};
use strata::log::{LogConfig, LogManager};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::records::TIMESTAMP_MS;
use super::wait::Deadline;

/// How long [`InProcessBroker::wait_for_metric`] waits.
const METRIC_WAIT: Duration = Duration::from_secs(60);

pub struct InProcessBroker {
    pub addr: SocketAddr,
    /// Where metrics are served, when the config asks for them.
    pub metrics: Option<SocketAddr>,
    /// Where the web console is served, when the config asks for it.
    pub console: Option<SocketAddr>,
    pub log: Arc<LogManager>,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
    /// The data directory, when the broker made its own.
    _dir: Option<tempfile::TempDir>,
}

impl InProcessBroker {
    /// Serves a fresh data directory with `config`, its metrics endpoint
    /// on (listen and metrics addresses replaced by free loopback ports).
    pub async fn start(config: BrokerConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
            ..config
        };
        let mut broker = Self::start_in(dir.path(), config).await;
        broker._dir = Some(dir);
        broker
    }

    /// Opens `dir` and serves it with `config` (its listen address replaced
    /// by a free port); the directory outlives the broker, to be served
    /// again.
    pub async fn start_in(dir: &Path, config: BrokerConfig) -> Self {
        let log = Arc::new(LogManager::open(dir, LogConfig::default()).unwrap());
        let config = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..config
        };
        let broker = Broker::bind(config, Arc::clone(&log)).await.unwrap();
        let (addr, metrics) = (broker.local_addr(), broker.metrics_addr());
        let console = broker.console_addr();
        let (stop, stopped) = oneshot::channel();
        let served = tokio::spawn(async move {
            broker
                .serve(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            metrics,
            console,
            log,
            stop,
            served,
            _dir: None,
        }
    }

    /// Creates `topic` with one partition and appends about `mebibytes`
    /// MiB of records to it.
    pub fn fill(&self, topic: &str, mebibytes: usize) {
        self.log.create_topic(topic, 1, Default::default()).unwrap();
        let log = self.log.partition(topic, 0).unwrap();
        let value = vec![b'v'; 1000];
        for _ in 0..mebibytes {
            let records = std::iter::repeat_n((None, &value[..], TIMESTAMP_MS), 1000);
            let batch = super::records::batch_with(strata::record::Compression::None, records);
            log.append(&batch).unwrap();
        }
    }

    pub async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).await.unwrap()
    }

    /// The whole HTTP answer to GET /metrics.
    pub async fn scrape(&self) -> String {
        let metrics = self.metrics.expect("the broker serves metrics");
        let mut scrape = TcpStream::connect(metrics).await.unwrap();
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        scrape.read_to_string(&mut text).await.unwrap();
        text
    }

    /// The value of an unlabelled metric, from a fresh scrape.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.scrape().await;
        let prefix = format!("{name} ");
        let line = text
            .lines()
            .find(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"));
        line[prefix.len()..].trim().parse().unwrap()
    }

    /// Scrapes until `done(value)` holds, and returns that value; fails
    /// after a minute.
    pub async fn wait_for_metric(&self, name: &str, done: impl Fn(u64) -> bool) -> u64 {
        let deadline = Deadline::after(name, METRIC_WAIT);
        loop {
            let value = self.metric(name).await;
            if done(value) {
                return value;
            }
            deadline.check(format_args!(" (still {value})"));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Shuts the broker down and waits until it has stopped.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.served.await.unwrap();
    }
}
