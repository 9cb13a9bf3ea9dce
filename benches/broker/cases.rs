//! The broker under load: start `strata serve`, run each case with each
//! client, and account time and CPU.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::{ChildGuard, Samples, Settings, baselines::pseudo_random};

/// Record sizes (value bytes) every case runs with.
pub const RECORD_SIZES: [usize; 2] = [100, 1024];
/// Concurrent producers of the group-commit case.
pub const CONCURRENT_PRODUCERS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `rdkafka_driver.c`: librdkafka fed from memory.
    Driver,
    /// kcat: librdkafka fed from a file it splits into lines.
    Kcat,
    /// `strata bench`: strata's own client, fed from memory.
    Strata,
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::Driver => "driver",
            Client::Kcat => "kcat",
            Client::Strata => "strata",
        }
    }

    /// Whether the client is librdkafka (the broker's targets are judged
    /// on these).
    pub fn is_librdkafka(self) -> bool {
        matches!(self, Client::Driver | Client::Kcat)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Produce {
        acks: &'static str,
        producers: usize,
    },
    Consume,
}

#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub work: Work,
    pub record_bytes: usize,
    pub client: Client,
}

impl Case {
    pub fn label(&self) -> String {
        let size = match self.record_bytes {
            1024 => "1 KiB".to_string(),
            n => format!("{n} B"),
        };
        match self.work {
            Work::Produce { acks, producers } => {
                let acks = if acks == "-1" { "all" } else { acks };
                let who = if producers == 1 {
                    String::new()
                } else {
                    format!(", {producers} producers")
                };
                format!("produce {size} acks={acks}{who}")
            }
            Work::Consume => format!("consume {size}"),
        }
    }
}

/// Every run of one case.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub case: Case,
    pub bytes_per_second: Samples,
    pub records_per_second: Samples,
    /// Percent of one core, per run.
    pub broker_cpu: Samples,
    pub client_cpu: Samples,
}

struct Measured {
    records: u64,
    bytes: u64,
    /// The timed window (the client's own, where it times itself).
    seconds: f64,
    /// The whole process's run, which its CPU time covers.
    wall_seconds: f64,
    broker_cpu_seconds: f64,
    client_cpu_seconds: f64,
}

/// The cases in the order they run: producing first (each into a fresh
/// topic), then consuming a topic written for the purpose.
pub fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for record_bytes in RECORD_SIZES {
        let produce = |acks, producers, client| Case {
            work: Work::Produce { acks, producers },
            record_bytes,
            client,
        };
        cases.push(produce("1", 1, Client::Driver));
        cases.push(produce("1", 1, Client::Kcat));
        cases.push(produce("1", 1, Client::Strata));
        cases.push(produce("-1", 1, Client::Driver));
        cases.push(produce("-1", 1, Client::Strata));
        cases.push(produce("-1", CONCURRENT_PRODUCERS, Client::Driver));
    }
    for record_bytes in RECORD_SIZES {
        for client in [Client::Driver, Client::Kcat, Client::Strata] {
            cases.push(Case {
                work: Work::Consume,
                record_bytes,
                client,
            });
        }
    }
    cases
}

pub fn run_all(root: &Path, settings: &Settings) -> Result<Vec<Outcome>> {
    let driver = compile_driver(root)?;
    let broker = Broker::start(&root.join("data"))?;
    let bench = Bench {
        root,
        driver: &driver,
        broker: &broker,
        settings,
    };
    let mut outcomes = Vec::new();
    // (record size, topic): written once, read by every client.
    let mut consume_topics: Vec<(usize, String)> = Vec::new();
    for case in all_cases() {
        let topic = match case.work {
            Work::Consume => {
                let existing = consume_topics
                    .iter()
                    .find(|(size, _)| *size == case.record_bytes);
                Some(match existing {
                    Some((_, topic)) => topic.clone(),
                    None => {
                        let topic = bench.write_consume_topic(case.record_bytes)?;
                        consume_topics.push((case.record_bytes, topic.clone()));
                        topic
                    }
                })
            }
            Work::Produce { .. } => None,
        };
        eprintln!("{} ({})…", case.label(), case.client.name());
        let mut outcome = Outcome {
            case,
            bytes_per_second: Samples::default(),
            records_per_second: Samples::default(),
            broker_cpu: Samples::default(),
            client_cpu: Samples::default(),
        };
        for run in 0..settings.runs {
            let measured = match &topic {
                Some(topic) => bench.consume(case, topic)?,
                None => bench.produce(case, &format!("{}-{run}", topic_name(&case)))?,
            };
            outcome
                .bytes_per_second
                .push(measured.bytes as f64 / measured.seconds);
            outcome
                .records_per_second
                .push(measured.records as f64 / measured.seconds);
            outcome
                .broker_cpu
                .push(100.0 * measured.broker_cpu_seconds / measured.wall_seconds);
            outcome
                .client_cpu
                .push(100.0 * measured.client_cpu_seconds / measured.wall_seconds);
        }
        outcomes.push(outcome);
    }
    broker.stop()?;
    Ok(outcomes)
}

/// A fresh topic per produce run.
fn topic_name(case: &Case) -> String {
    let (acks, producers) = match case.work {
        Work::Produce { acks, producers } => (acks, producers),
        Work::Consume => ("none", 0),
    };
    format!(
        "produce-{}b-acks{}-p{producers}-{}",
        case.record_bytes,
        if acks == "-1" { "all" } else { acks },
        case.client.name()
    )
}

struct Bench<'a> {
    root: &'a Path,
    driver: &'a Path,
    broker: &'a Broker,
    settings: &'a Settings,
}

impl Bench<'_> {
    fn produce(&self, case: Case, topic: &str) -> Result<Measured> {
        let Work::Produce { acks, producers } = case.work else {
            bail!("not a produce case");
        };
        let records = self.settings.produce_bytes / case.record_bytes as u64;
        let per_producer = records / producers as u64;
        let address = self.broker.address.as_str();
        // kcat's input is written before the sync, not during its run.
        let lines = match case.client {
            Client::Kcat => Some(self.lines_file(case.record_bytes, records)?),
            _ => None,
        };
        // Dirty pages of earlier runs would be written back during this one.
        sync_all();
        match case.client {
            Client::Driver => {
                let mut command = Command::new(self.driver);
                command.args(["produce", address, topic]);
                command.arg(per_producer.to_string());
                command.arg(case.record_bytes.to_string());
                command.args([acks, &producers.to_string()]);
                let measured = self.timed_driver(command)?;
                // One untimed warm-up record per producer comes first.
                self.expect_end_offset(topic, measured.records + producers as u64)?;
                Ok(measured)
            }
            Client::Kcat => {
                ensure!(producers == 1, "kcat runs one producer");
                let file = lines.context("kcat's input file")?;
                let mut command = Command::new("kcat");
                command.args(["-P", "-q", "-b", address, "-t", topic, "-p", "0"]);
                command.args(["-X", &format!("acks={acks}")]);
                command.args(KCAT_PRODUCER_SETTINGS);
                command.arg("-l").arg(&file);
                let measured = self.timed(command, records, records * case.record_bytes as u64)?;
                self.expect_end_offset(topic, records)?;
                Ok(measured)
            }
            Client::Strata => {
                ensure!(producers == 1, "strata bench runs one producer");
                let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
                command.args(["bench", "produce", "--bootstrap", address, "--topic", topic]);
                command.args(["--records", &records.to_string()]);
                command.args(["--record-size", &case.record_bytes.to_string()]);
                command.args(["--acks", if acks == "-1" { "all" } else { acks }]);
                command.args(["--format", "json"]);
                let measured = self.timed_by_client(command, parse_strata_bench)?;
                self.expect_end_offset(topic, records)?;
                Ok(measured)
            }
        }
    }

    fn consume(&self, case: Case, topic: &str) -> Result<Measured> {
        let address = self.broker.address.as_str();
        let end = self.end_offset(topic)?;
        match case.client {
            Client::Driver => {
                let mut command = Command::new(self.driver);
                command.args(["consume", address, topic]);
                let measured = self.timed_driver(command)?;
                ensure!(
                    measured.records == end,
                    "the driver read {} of {end} records",
                    measured.records
                );
                Ok(measured)
            }
            Client::Kcat => {
                let mut command = Command::new("kcat");
                command.args(["-C", "-q", "-e", "-b", address, "-t", topic]);
                command.args(["-p", "0", "-o", "beginning", "-f", "%s\n"]);
                // At the end kcat waits out one long-poll fetch before it
                // sees the partition's end, and another while it exits
                // (500 ms each by default); keep that out of the figure.
                command.args(["-X", "fetch.wait.max.ms=10"]);
                self.timed(command, end, end * case.record_bytes as u64)
            }
            Client::Strata => {
                let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
                command.args(["bench", "consume", "--bootstrap", address, "--topic", topic]);
                command.args(["--format", "json"]);
                let measured = self.timed_by_client(command, parse_strata_bench)?;
                ensure!(
                    measured.records == end,
                    "strata bench read {} of {end} records",
                    measured.records
                );
                Ok(measured)
            }
        }
    }

    /// Fills a topic for the consume cases (untimed).
    fn write_consume_topic(&self, record_bytes: usize) -> Result<String> {
        let topic = format!("consume-{record_bytes}b");
        eprintln!("writing {} for the consume cases…", topic);
        let records = self.settings.consume_bytes / record_bytes as u64;
        let status = Command::new(self.driver)
            .args(["produce", &self.broker.address, &topic])
            .arg(records.to_string())
            .arg(record_bytes.to_string())
            .args(["1", "1"])
            .stdout(Stdio::null())
            .status()
            .context("running rdkafka_driver")?;
        ensure!(status.success(), "writing {topic} failed: {status}");
        // Written back now, not during the first consume run.
        sync_all();
        Ok(topic)
    }

    /// Runs a driver command; its own timing (from the moment every
    /// producer is connected) replaces the wall clock.
    fn timed_driver(&self, command: Command) -> Result<Measured> {
        self.timed_by_client(command, parse_driver)
    }

    /// Runs a client that times itself and prints (records, bytes,
    /// seconds) in a form `parse` reads.
    fn timed_by_client(
        &self,
        mut command: Command,
        parse: fn(&str) -> Result<(u64, u64, f64)>,
    ) -> Result<Measured> {
        let broker_before = self.broker.cpu_seconds()?;
        let client_before = children_cpu_seconds();
        let started = Instant::now();
        let output = command
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {command:?}"))?;
        let wall_seconds = started.elapsed().as_secs_f64();
        let client_cpu_seconds = children_cpu_seconds() - client_before;
        let broker_cpu_seconds = self.broker.cpu_seconds()? - broker_before;
        ensure!(output.status.success(), "{command:?}: {}", output.status);
        let (records, bytes, seconds) = parse(&String::from_utf8_lossy(&output.stdout))?;
        Ok(Measured {
            records,
            bytes,
            seconds,
            wall_seconds,
            broker_cpu_seconds,
            client_cpu_seconds,
        })
    }

    /// Runs a client command to completion, timed by the wall clock.
    fn timed(&self, mut command: Command, records: u64, bytes: u64) -> Result<Measured> {
        let broker_before = self.broker.cpu_seconds()?;
        let client_before = children_cpu_seconds();
        let started = Instant::now();
        let status = command
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running {command:?}"))?;
        let seconds = started.elapsed().as_secs_f64();
        let client_cpu_seconds = children_cpu_seconds() - client_before;
        let broker_cpu_seconds = self.broker.cpu_seconds()? - broker_before;
        ensure!(status.success(), "{command:?}: {status}");
        Ok(Measured {
            records,
            bytes,
            seconds,
            wall_seconds: seconds,
            broker_cpu_seconds,
            client_cpu_seconds,
        })
    }

    /// `records` lines of `record_bytes` printable bytes each, for kcat -l.
    fn lines_file(&self, record_bytes: usize, records: u64) -> Result<PathBuf> {
        let path = self.root.join(format!("lines-{record_bytes}b-{records}"));
        if path.exists() {
            return Ok(path);
        }
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        // Printable, so no byte is the delimiter; varied, so incompressible
        // enough that no layer shortcuts it.
        let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
        let noise = pseudo_random(record_bytes * 64);
        for i in 0..records as usize {
            let start = (i % 64) * record_bytes;
            let line: Vec<u8> = noise[start..start + record_bytes]
                .iter()
                .map(|b| alphabet[usize::from(*b) % alphabet.len()])
                .collect();
            out.write_all(&line)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(path)
    }

    /// The partition's end offset, asked of the broker with kcat -Q.
    fn end_offset(&self, topic: &str) -> Result<u64> {
        let output = Command::new("kcat")
            .args(["-Q", "-b", &self.broker.address, "-t"])
            .arg(format!("{topic}:0:-1"))
            .output()
            .context("running kcat -Q")?;
        let text = String::from_utf8_lossy(&output.stdout);
        // "<topic> [0] offset <n>"
        text.split_whitespace()
            .skip_while(|word| *word != "offset")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("kcat -Q printed {text:?}"))
    }

    fn expect_end_offset(&self, topic: &str, expected: u64) -> Result<()> {
        let end = self.end_offset(topic)?;
        ensure!(
            end == expected,
            "{topic} holds {end} records, not {expected}"
        );
        Ok(())
    }
}

/// The driver's one line: "records=N bytes=N seconds=F".
fn parse_driver(text: &str) -> Result<(u64, u64, f64)> {
    let field = |name: &str| -> Result<f64> {
        text.split_whitespace()
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name}= in the driver's output {text:?}"))
    };
    Ok((
        field("records")? as u64,
        field("bytes")? as u64,
        field("seconds")?,
    ))
}

/// `strata bench … --format json`: {"records", "bytes", "seconds", …}.
fn parse_strata_bench(text: &str) -> Result<(u64, u64, f64)> {
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .with_context(|| format!("strata bench printed {text:?}"))?;
    let number = |name: &str| {
        value[name]
            .as_f64()
            .with_context(|| format!("no {name} in {text:?}"))
    };
    Ok((
        number("records")? as u64,
        number("bytes")? as u64,
        number("seconds")?,
    ))
}

/// librdkafka settings kcat's producer shares with the driver's.
const KCAT_PRODUCER_SETTINGS: [&str; 6] = [
    "-X",
    "queue.buffering.max.messages=1000000",
    "-X",
    "queue.buffering.max.kbytes=1048576",
    "-X",
    "enable.idempotence=false",
];

/// Compiles the C driver against the system's librdkafka.
fn compile_driver(root: &Path) -> Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/broker/rdkafka_driver.c");
    let binary = root.join("rdkafka_driver");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = Command::new(&compiler)
        .args(["-O2", "-Wall", "-o"])
        .arg(&binary)
        .arg(&source)
        .args(["-lrdkafka", "-lpthread"])
        .output()
        .with_context(|| format!("running {compiler}"))?;
    ensure!(
        output.status.success(),
        "compiling {} failed (is librdkafka-dev installed? `make deps-bench`):\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(binary)
}

/// CPU seconds (user + system) of every child this process has waited for.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn sync_all() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// A release-built `strata serve` on a free port.
struct Broker {
    process: Option<ChildGuard>,
    pid: u32,
    address: String,
    /// Held open: the broker may print more, and a closed pipe would fail it.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Broker {
    fn start(data_dir: &Path) -> Result<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting strata serve")?;
        let stdout = child.stdout.take().context("strata's stdout")?;
        let guard = ChildGuard::new(child);
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .context("reading strata's first line")?;
        // "strata listening on 127.0.0.1:PORT"
        let address = line
            .trim()
            .strip_prefix("strata listening on ")
            .with_context(|| format!("strata serve printed {line:?}"))?
            .to_string();
        Ok(Self {
            pid: guard.id(),
            process: Some(guard),
            address,
            _stdout: stdout,
        })
    }

    /// User + system CPU seconds the broker has used so far.
    fn cpu_seconds(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .context("reading the broker's /proc stat")?;
        // Fields after the command name, which ends with the last ')':
        // state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| -> Result<f64> {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .context("parsing the broker's /proc stat")
        };
        // SAFETY: sysconf only reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok((ticks(11)? + ticks(12)?) / hz)
    }

    /// SIGTERM, then wait for the clean shutdown.
    fn stop(mut self) -> Result<()> {
        let Some(guard) = self.process.take() else {
            return Ok(());
        };
        let mut child = guard.take();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                ensure!(status.success(), "strata serve exited with {status}");
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("strata serve did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
