//! A request for an API or a version the broker does not serve closes that
//! connection, and the broker says why at warn level — the client id, the
//! API (name and key) and the version asked for — so the user of a client
//! that fails can see the cause in the broker's log.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use strata::broker::{Broker, BrokerConfig};
use strata::log::{LogConfig, LogManager};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Everything the process logs, from every thread.
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        tracing_subscriber::fmt()
            .with_env_filter("warn")
            .with_ansi(false)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .init();
        logs
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A size-prefixed request: api key, version, correlation id, client id,
/// and an empty body (never read: the broker refuses before the body).
fn request(api: i16, version: i16, client_id: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&api.to_be_bytes());
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id.as_bytes());
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

/// Sends `frame` and returns what came back before the broker closed the
/// connection.
async fn answer_to(addr: std::net::SocketAddr, frame: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(frame).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the broker closes the connection")
        .unwrap();
    answer
}

/// Waits until a logged warning contains every one of `parts`.
async fn wait_for_warning(parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = String::from_utf8_lossy(&captured().lock().unwrap()).into_owned();
        if let Some(line) = logs
            .lines()
            .find(|line| line.contains("WARN") && parts.iter().all(|part| line.contains(part)))
        {
            return line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no warning with {parts:?} in:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unserved_apis_and_versions_are_warned_about_with_the_client_the_api_and_the_version() {
    captured();
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..BrokerConfig::default()
    };
    let broker = Broker::bind(config, Arc::clone(&log)).await.unwrap();
    let addr = broker.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(broker.serve(async {
        let _ = stopped.await;
    }));

    // Metadata exists but not at version 99.
    let answer = answer_to(addr, &request(3, 99, "billing-app")).await;
    assert!(answer.is_empty(), "answered {} bytes", answer.len());
    let line = wait_for_warning(&["billing-app", "Metadata", "API key 3", "version 99"]).await;
    assert!(line.contains("serves versions"), "{line}");

    // DescribeDelegationToken (41) is a Kafka API this broker does not serve.
    let answer = answer_to(addr, &request(41, 3, "token-app")).await;
    assert!(answer.is_empty(), "answered {} bytes", answer.len());
    wait_for_warning(&[
        "token-app",
        "DescribeDelegationToken",
        "API key 41",
        "version 3",
    ])
    .await;

    // A key no Kafka API has.
    answer_to(addr, &request(4242, 0, "odd-app")).await;
    wait_for_warning(&["odd-app", "unknown", "API key 4242", "version 0"]).await;

    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
}
