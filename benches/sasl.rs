//! SASL connection set-up rates, and what a storm of SCRAM logins costs a
//! running producer, in one run against one `strata serve` (this build's
//! binary). Every figure stands beside a reference measured in the same
//! run: the machine may be shared, so the ratios are the figures to read.
//!
//! The broker has four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT and
//! SASL_SSL, certificates made here with rcgen) and one user with
//! SCRAM-SHA-256 and SCRAM-SHA-512 credentials at the default iteration
//! count, added with `strata users add`. For each case, [`CONNECTORS`]
//! tasks connect and close as fast as they can through strata's client
//! (`Cluster::connect`: TCP, TLS if any, ApiVersions, SASL if any), for a
//! fixed time or up to [`CASE_CONNECTIONS_MAX`]:
//!
//! - PLAINTEXT, connect + ApiVersions + close: the reference, measured
//!   first and again last (the gap between the two shows how steady the
//!   machine was);
//! - SSL: a full TLS handshake (no resumption) + ApiVersions;
//! - SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512: also
//!   SaslHandshake and SaslAuthenticate (one round for PLAIN, two for
//!   SCRAM);
//! - SASL_SSL with SCRAM-SHA-512.
//!
//! Each row has its rate, its ratio to the reference, and the CPU time
//! the broker and this process (the clients) spent per connection. Below
//! them, the CPU floor: PBKDF2 at the stored iteration count, in a plain
//! loop on as many threads. A SCRAM login costs the client one PBKDF2 and
//! the broker none (it keeps StoredKey and ServerKey, not the salted
//! password); a PLAIN login costs the broker one (the password is checked
//! against the user's SCRAM-SHA-512 credential) and the client none.
//!
//! Then one producer (strata's, acks=1, 1 KiB records, up to 5 requests
//! in flight, over PLAINTEXT) runs alone, beside a SCRAM-SHA-512 storm
//! over SASL_PLAINTEXT, and alone again: MB/s of each phase, the storm's
//! rate during it, and the ratio to the mean of the two phases alone.
//!
//! Every client runs in this process, on the broker's machine: the SCRAM
//! clients' PBKDF2 competes with the broker and the producer for the same
//! cores, which remote clients' would not. The broker's CPU time per
//! connection is the figure that carries over to a broker on a machine of
//! its own. The broker's own counters check the run: every SASL connection
//! counted here is one `strata_sasl_authentications_total` counted there,
//! and none failed.
//!
//! Run it with `make bench-sasl`. Settings (environment):
//! `STRATA_BENCH_SASL_SECONDS` (each connection case, 3),
//! `STRATA_BENCH_SASL_PRODUCE_SECONDS` (each produce phase, 6),
//! `STRATA_BENCH_DIR` (parent of the temporary directory).

mod scrape;
mod serve;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use strata::client::{
    Acks, Admin, ClientConfig, ClientSecurity, Cluster, DeliveryFuture, Password, Producer,
    ProducerConfig, ProducerRecord,
};
use strata::sasl::{ITERATIONS_DEFAULT, Mechanism, SaltedPassword};
use strata::security::SecurityProtocol;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
/// Tasks connecting at once in each case, and PBKDF2 threads in the floor.
const CONNECTORS: usize = 4;
const CASE_SECONDS_DEFAULT: u64 = 3;
const PRODUCE_SECONDS_DEFAULT: u64 = 6;
/// Connections counted in one case at most: each closed one holds a port
/// in TIME_WAIT for a minute.
const CASE_CONNECTIONS_MAX: u64 = 25_000;
/// Connecting before a case's count starts (the first TLS configuration,
/// the first credential read).
const WARM_UP: Duration = Duration::from_millis(300);
/// How long a storm runs before the producer's phase beside it starts.
const STORM_LEAD: Duration = Duration::from_millis(500);
const PBKDF2_TIME: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER: &str = "bench";
const PASSWORD: &str = "bench-password";
const TOPIC: &str = "produce";
const RECORD_BYTES: usize = 1024;
/// Bytes one produce phase sends at most: the disk keeps them all.
const PHASE_BYTES_MAX: u64 = 1 << 30;
/// Records sent and not yet seen answered, at most; older ones are
/// awaited (they are mostly answered by then) so every one is checked.
const DELIVERIES_PENDING_MAX: usize = 8192;
/// The four listeners and the metrics endpoint, as the broker prints them.
const ADDRESSES: usize = 5;

/// Kills the broker when the run ends, however it ends.
struct Broker {
    child: Child,
    /// Listener name (the protocol's) or `metrics` → address.
    addrs: BTreeMap<String, String>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Counts and CPU seconds at one instant.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    count: u64,
    broker_cpu_s: f64,
    own_cpu_s: f64,
}

/// What happened between two marks.
#[derive(Clone, Copy)]
struct Window {
    seconds: f64,
    count: u64,
    broker_cpu_s: f64,
    own_cpu_s: f64,
}

impl Window {
    fn between(start: Mark, end: Mark) -> Self {
        Self {
            seconds: end.at.duration_since(start.at).as_secs_f64(),
            count: end.count - start.count,
            broker_cpu_s: end.broker_cpu_s - start.broker_cpu_s,
            own_cpu_s: end.own_cpu_s - start.own_cpu_s,
        }
    }

    fn rate(&self) -> f64 {
        self.count as f64 / self.seconds
    }

    /// Microseconds of CPU per counted event.
    fn micros_each(cpu_s: f64, count: u64) -> f64 {
        cpu_s * 1e6 / count.max(1) as f64
    }
}

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else is taken.
    let case_time = Duration::from_secs(setting("STRATA_BENCH_SASL_SECONDS", CASE_SECONDS_DEFAULT));
    let phase_time = Duration::from_secs(setting(
        "STRATA_BENCH_SASL_PRODUCE_SECONDS",
        PRODUCE_SECONDS_DEFAULT,
    ));
    let parent = std::env::var_os("STRATA_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(parent)?;
    let ca = make_certificates(dir.path())?;
    std::fs::create_dir_all(dir.path().join("data"))?;
    for mechanism in Mechanism::SCRAM {
        add_user(&dir.path().join("data"), mechanism)?;
    }
    let broker = start(dir.path())?;

    // The clients of the storms: their PBKDF2 runs inline on these threads.
    let storms = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cases = cases(&broker, &ca)?;
    let mut rows = Vec::new();
    for (label, config) in &cases {
        eprintln!("{label}…");
        let window = connection_rate(&storms, &broker, config, case_time)?;
        rows.push((label.clone(), window));
    }
    eprintln!("PBKDF2 loops…");
    let floors: Vec<(Mechanism, Window)> = Mechanism::SCRAM
        .iter()
        .rev()
        .map(|&mechanism| Ok((mechanism, pbkdf2_rate(&broker, mechanism)?)))
        .collect::<Result<_>>()?;
    let reference = (rows[0].1.rate() + rows[rows.len() - 1].1.rate()) / 2.0;
    print_connections(&rows, &floors, reference, case_time);

    let storm = cases
        .iter()
        .find(|(label, _)| label.starts_with("SASL_PLAINTEXT SCRAM-SHA-512"))
        .map(|(_, config)| config.clone())
        .context("no SASL_PLAINTEXT SCRAM-SHA-512 case")?;
    let phases = produce_phases(&storms, &broker, &storm, phase_time)?;
    print_produce(&phases, phase_time);

    ensure!(
        metric(&broker, "strata_sasl_authentication_failures_total")? == 0,
        "the broker counted failed logins"
    );
    Ok(())
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// A CA (its certificate at `dir/ca.pem`, returned) and the broker's
/// certificate for 127.0.0.1 and localhost (`dir/server.pem`, `.key`).
fn make_certificates(dir: &Path) -> Result<PathBuf> {
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sasl-bench-ca");
    let ca_key = KeyPair::generate()?;
    let ca_pem = dir.join("ca.pem");
    std::fs::write(&ca_pem, ca_params.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse()?));
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate()?;
    std::fs::write(
        dir.join("server.pem"),
        params.signed_by(&key, &issuer)?.pem(),
    )?;
    std::fs::write(dir.join("server.key"), key.serialize_pem())?;
    Ok(ca_pem)
}

/// Gives [`USER`] a `mechanism` credential, as an operator would.
fn add_user(data_dir: &Path, mechanism: Mechanism) -> Result<()> {
    let output = Command::new(STRATA)
        .args(["users", "add", USER, "--mechanism", mechanism.name()])
        .args(["--iterations", &ITERATIONS_DEFAULT.to_string()])
        .arg("--data-dir")
        .arg(data_dir)
        .env("STRATA_USER_PASSWORD", PASSWORD)
        .stdin(Stdio::null())
        .output()
        .context("running strata users add")?;
    ensure!(
        output.status.success(),
        "strata users add: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

fn start(dir: &Path) -> Result<Broker> {
    let config = dir.join("strata.toml");
    let listener = |protocol: &str| {
        format!("[[listeners]]\nprotocol = \"{protocol}\"\nlisten = \"127.0.0.1:0\"\n\n")
    };
    let text = format!(
        "metrics = \"127.0.0.1:0\"\n\n{}{}{}{}[tls]\ncert = {:?}\nkey = {:?}\n\n\
         [sasl]\nmechanisms = [\"SCRAM-SHA-512\", \"SCRAM-SHA-256\", \"PLAIN\"]\n",
        listener("PLAINTEXT"),
        listener("SSL"),
        listener("SASL_PLAINTEXT"),
        listener("SASL_SSL"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&config, text)?;
    let log = dir.join("broker.log");
    let mut child = Command::new(STRATA)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting strata serve")?;
    let mut stdout = BufReader::new(child.stdout.take().context("strata's stdout")?);
    let mut broker = Broker {
        child,
        addrs: BTreeMap::new(),
    };
    let mut line = String::new();
    while broker.addrs.len() < ADDRESSES {
        line.clear();
        if stdout.read_line(&mut line)? == 0 {
            bail!(
                "strata serve stopped before opening its listeners:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        // `strata listening on ADDR (PROTOCOL)`, `metrics on http://ADDR/metrics`
        if let Some(rest) = line.trim().strip_prefix("strata listening on ") {
            let (addr, name) = rest.split_once(' ').context("a listener line")?;
            let name = name.trim_matches(['(', ')']);
            broker.addrs.insert(name.to_string(), addr.to_string());
        } else if let Some(url) = line.trim().strip_prefix("metrics on http://") {
            let addr = url.trim_end_matches("/metrics");
            broker.addrs.insert("metrics".into(), addr.to_string());
        }
    }
    // Keeps the pipe open: a closed stdout would fail a later print.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok(broker)
}

impl Broker {
    fn addr(&self, listener: &str) -> Result<&str> {
        self.addrs
            .get(listener)
            .map(String::as_str)
            .with_context(|| format!("no {listener} listener"))
    }
}

/// The connection cases, in the order they run: the reference first and
/// last.
fn cases(broker: &Broker, ca: &Path) -> Result<Vec<(String, ClientConfig)>> {
    let secured = |protocol: SecurityProtocol, mechanism: Option<Mechanism>| -> Result<_> {
        let security = ClientSecurity {
            protocol,
            ca_location: protocol.uses_tls().then(|| ca.to_path_buf()),
            mechanism,
            username: mechanism.map(|_| USER.to_string()),
            password: mechanism.map(|_| Password::new(PASSWORD)),
            ..ClientSecurity::default()
        };
        let config = ClientConfig {
            bootstrap: vec![broker.addr(protocol.name())?.to_string()],
            client_id: "sasl-bench".into(),
            request_timeout: CONNECT_TIMEOUT,
            security,
            ..ClientConfig::default()
        };
        let what = match (protocol, mechanism) {
            (SecurityProtocol::Plaintext, _) => "connect + ApiVersions".to_string(),
            (SecurityProtocol::Ssl, _) => "TLS handshake + ApiVersions".to_string(),
            (_, Some(mechanism)) => mechanism.name().to_string(),
            (_, None) => bail!("{protocol} needs a mechanism"),
        };
        Ok((format!("{protocol} {what}"), config))
    };
    let reference = secured(SecurityProtocol::Plaintext, None)?;
    Ok(vec![
        (format!("{} (reference)", reference.0), reference.1.clone()),
        secured(SecurityProtocol::Ssl, None)?,
        secured(SecurityProtocol::SaslPlaintext, Some(Mechanism::Plain))?,
        secured(
            SecurityProtocol::SaslPlaintext,
            Some(Mechanism::ScramSha256),
        )?,
        secured(
            SecurityProtocol::SaslPlaintext,
            Some(Mechanism::ScramSha512),
        )?,
        secured(SecurityProtocol::SaslSsl, Some(Mechanism::ScramSha512))?,
        (format!("{} (again)", reference.0), reference.1),
    ])
}

/// [`CONNECTORS`] tasks connecting and closing until stopped.
struct Storm {
    stop: Arc<AtomicBool>,
    connected: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
}

impl Storm {
    fn start(runtime: &tokio::runtime::Runtime, config: &ClientConfig) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let connected = Arc::new(AtomicU64::new(0));
        let tasks = (0..CONNECTORS)
            .map(|_| {
                let (config, stop, connected) =
                    (config.clone(), Arc::clone(&stop), Arc::clone(&connected));
                runtime.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let cluster = Cluster::connect(config.clone())
                            .await
                            .with_context(|| format!("connecting to {:?}", config.bootstrap))?;
                        // Dropping the last handle closes the connection.
                        drop(cluster);
                        connected.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        Self {
            stop,
            connected,
            tasks,
        }
    }

    fn connected(&self) -> u64 {
        self.connected.load(Ordering::Relaxed)
    }

    /// Stops the connectors and waits for them; every connection made.
    fn stop(self, runtime: &tokio::runtime::Runtime) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            runtime.block_on(task)??;
        }
        Ok(self.connected.load(Ordering::Relaxed))
    }
}

/// One case: its connections per second over `time` (or
/// [`CASE_CONNECTIONS_MAX`] connections), after a warm-up. Checks that
/// the broker counted a login for each SASL connection.
fn connection_rate(
    runtime: &tokio::runtime::Runtime,
    broker: &Broker,
    config: &ClientConfig,
    time: Duration,
) -> Result<Window> {
    let logins_before = metric(broker, "strata_sasl_authentications_total")?;
    let storm = Storm::start(runtime, config);
    std::thread::sleep(WARM_UP);
    let start = mark(broker, storm.connected())?;
    while start.at.elapsed() < time && storm.connected() - start.count < CASE_CONNECTIONS_MAX {
        std::thread::sleep(POLL);
    }
    let end = mark(broker, storm.connected())?;
    let made = storm.stop(runtime)?;
    let logins = metric(broker, "strata_sasl_authentications_total")? - logins_before;
    let expected = if config.security.protocol.uses_sasl() {
        made
    } else {
        0
    };
    ensure!(
        logins == expected,
        "{made} connections made, the broker counted {logins} logins"
    );
    Ok(Window::between(start, end))
}

/// PBKDF2 of `mechanism`'s hash at the default iterations, in a plain
/// loop on [`CONNECTORS`] threads for [`PBKDF2_TIME`].
fn pbkdf2_rate(broker: &Broker, mechanism: Mechanism) -> Result<Window> {
    let done = AtomicU64::new(0);
    let start = mark(broker, 0)?;
    std::thread::scope(|scope| {
        for _ in 0..CONNECTORS {
            scope.spawn(|| {
                let salt = [7u8; 32];
                while start.at.elapsed() < PBKDF2_TIME {
                    let salted =
                        SaltedPassword::derive(mechanism, PASSWORD, &salt, ITERATIONS_DEFAULT);
                    assert!(salted.is_ok(), "PBKDF2 of a valid password failed");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let end = mark(broker, done.load(Ordering::Relaxed))?;
    Ok(Window::between(start, end))
}

fn print_connections(
    rows: &[(String, Window)],
    floors: &[(Mechanism, Window)],
    reference: f64,
    time: Duration,
) {
    println!(
        "connection set-up, {CONNECTORS} connectors, {} s per case; \
         reference = mean of the two PLAINTEXT rows ({reference:.0}/s)",
        time.as_secs()
    );
    println!(
        "{:<46} {:>9} {:>8} {:>14} {:>14}",
        "case", "conn/s", "ratio", "broker µs/conn", "client µs/conn"
    );
    for (label, window) in rows {
        println!(
            "{:<46} {:>9.0} {:>7.3}× {:>14.0} {:>14.0}",
            label,
            window.rate(),
            window.rate() / reference,
            Window::micros_each(window.broker_cpu_s, window.count),
            Window::micros_each(window.own_cpu_s, window.count),
        );
    }
    for (mechanism, window) in floors {
        let label = format!(
            "CPU floor: PBKDF2 {} x{ITERATIONS_DEFAULT}",
            mechanism.name().trim_start_matches("SCRAM-")
        );
        println!(
            "{:<46} {:>9.0} {:>7.3}× {:>14} {:>14.0}",
            label,
            window.rate(),
            window.rate() / reference,
            "-",
            Window::micros_each(window.own_cpu_s, window.count),
        );
    }
}

/// One produce phase: the producer's MB/s and, beside a storm, the storm's
/// connections per second during it.
struct Phase {
    label: &'static str,
    megabytes_per_s: f64,
    storm: Option<Window>,
    broker_cores: f64,
}

/// The producer alone, beside a storm of `storm` connections, and alone
/// again.
fn produce_phases(
    storms: &tokio::runtime::Runtime,
    broker: &Broker,
    storm: &ClientConfig,
    time: Duration,
) -> Result<Vec<Phase>> {
    // The producer's own runtime (its sending loop on this thread, its
    // sender and connection on one worker), so the storm's inline PBKDF2
    // never holds up its tasks: only the cores are shared.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let bootstrap = broker.addr("PLAINTEXT")?;
    let producer = runtime.block_on(async {
        let cluster = Cluster::connect(ClientConfig::new(bootstrap)).await?;
        Admin::new(Arc::clone(&cluster))
            .create_topic(TOPIC, 1, &[])
            .await?;
        let config = ProducerConfig {
            acks: Acks::Leader,
            idempotent: false,
            ..ProducerConfig::default()
        };
        anyhow::Ok(Producer::new(cluster, config).await?)
    })?;
    let value = Bytes::from(vec![b'v'; RECORD_BYTES]);
    // Warms the connection, the segment and the page cache.
    runtime.block_on(produce(broker, &producer, &value, time / 4, None))?;

    let mut phases = Vec::new();
    eprintln!("producer alone…");
    let (alone, _) = runtime.block_on(produce(broker, &producer, &value, time, None))?;
    phases.push(phase("producer alone", alone, None));
    eprintln!("producer beside a SCRAM-SHA-512 storm…");
    let running = Storm::start(storms, storm);
    std::thread::sleep(STORM_LEAD);
    let beside = runtime.block_on(produce(broker, &producer, &value, time, Some(&running)));
    running.stop(storms)?;
    let (produced, during) = beside?;
    phases.push(phase(
        "beside a SCRAM-SHA-512 storm (SASL_PLAINTEXT)",
        produced,
        during,
    ));
    eprintln!("producer alone again…");
    let (again, _) = runtime.block_on(produce(broker, &producer, &value, time, None))?;
    phases.push(phase("producer alone (again)", again, None));
    runtime.block_on(producer.close());
    Ok(phases)
}

fn phase(label: &'static str, produced: Window, storm: Option<Window>) -> Phase {
    Phase {
        label,
        megabytes_per_s: (produced.count * RECORD_BYTES as u64) as f64 / produced.seconds / 1e6,
        storm,
        broker_cores: produced.broker_cpu_s / produced.seconds,
    }
}

/// Sends 1 KiB records for `time` (or [`PHASE_BYTES_MAX`]) and waits for
/// every answer: the records produced over the time to the last answer,
/// and what `storm` did meanwhile.
async fn produce(
    broker: &Broker,
    producer: &Producer,
    value: &Bytes,
    time: Duration,
    storm: Option<&Storm>,
) -> Result<(Window, Option<Window>)> {
    let topic: Arc<str> = TOPIC.into();
    let records_max = PHASE_BYTES_MAX / RECORD_BYTES as u64;
    let connected = || storm.map_or(0, Storm::connected);
    let start = mark(broker, 0)?;
    let storm_start = Mark {
        count: connected(),
        ..start
    };
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::with_capacity(DELIVERIES_PENDING_MAX);
    let mut sent = 0u64;
    while start.at.elapsed() < time && sent < records_max {
        let record = ProducerRecord {
            topic: Arc::clone(&topic),
            partition: Some(0),
            value: Some(value.clone()),
            ..ProducerRecord::default()
        };
        pending.push_back(producer.send(record).await?);
        sent += 1;
        if pending.len() >= DELIVERIES_PENDING_MAX
            && let Some(oldest) = pending.pop_front()
        {
            oldest.await?;
        }
    }
    for delivery in pending {
        delivery.await?;
    }
    let end = mark(broker, sent)?;
    let storm_end = Mark {
        count: connected(),
        ..end
    };
    let during = storm.map(|_| Window::between(storm_start, storm_end));
    Ok((Window::between(start, end), during))
}

fn print_produce(phases: &[Phase], time: Duration) {
    println!();
    println!(
        "one producer, acks=1, {RECORD_BYTES} B records, PLAINTEXT, {} s per phase",
        time.as_secs()
    );
    println!(
        "{:<46} {:>9} {:>12} {:>13}",
        "phase", "MB/s", "storm conn/s", "broker cores"
    );
    for phase in phases {
        let storm = phase
            .storm
            .map_or_else(|| "-".to_string(), |w| format!("{:.0}", w.rate()));
        println!(
            "{:<46} {:>9.1} {:>12} {:>13.2}",
            phase.label, phase.megabytes_per_s, storm, phase.broker_cores
        );
    }
    let alone = (phases[0].megabytes_per_s + phases[2].megabytes_per_s) / 2.0;
    println!(
        "{:<46} {:>8.3}×",
        "beside the storm / alone (mean of both)",
        phases[1].megabytes_per_s / alone
    );
}

fn mark(broker: &Broker, count: u64) -> Result<Mark> {
    Ok(Mark {
        at: Instant::now(),
        count,
        broker_cpu_s: serve::cpu_seconds(broker.child.id())?,
        own_cpu_s: serve::cpu_seconds("self")?,
    })
}

/// An unlabelled metric's value.
fn metric(broker: &Broker, name: &str) -> Result<u64> {
    scrape::metric(broker.addr("metrics")?, name)
}
