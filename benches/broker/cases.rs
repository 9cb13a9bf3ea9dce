//! The broker under load: start `strata serve`, run each case with each
//! client, and account time and CPU.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

use super::case::{Case, Client, Mode, TRANSACTION_MS, Work, all_cases};
use super::cleaning::{self, CleanerOutcome};
use super::clients::{
    KCAT_PRODUCER_SETTINGS, Report, compile_driver, parse_driver, parse_strata_bench,
};
use super::latency::{self, LatencyOutcome};
use super::prebuilt::Encoding;
use super::server::{Broker, percentile_bound};
use super::{Samples, Settings, baselines::pseudo_random};

/// Every run of one case.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub case: Case,
    pub bytes_per_second: Samples,
    pub records_per_second: Samples,
    /// Percent of one core, per run.
    pub broker_cpu: Samples,
    pub client_cpu: Samples,
    /// The worst 99th percentile of a producer's broker round trips (any
    /// request type) per run, in seconds (the driver's produce cases).
    pub rtt_p99: Samples,
    /// The broker's 99th percentile of produce latency per run (from the
    /// request taken up to its answer ready), seconds, as the upper bound
    /// of its histogram bucket.
    pub broker_p99: Samples,
}

pub struct Measured {
    records: u64,
    pub bytes: u64,
    /// The timed window (the client's own, where it times itself).
    pub seconds: f64,
    /// The whole process's run, which its CPU time covers.
    wall_seconds: f64,
    broker_cpu_seconds: f64,
    client_cpu_seconds: f64,
    rtt_p99_seconds: Option<f64>,
    broker_p99_seconds: Option<f64>,
}

/// What the whole run measured.
pub struct Results {
    pub cases: Vec<Outcome>,
    pub latency: LatencyOutcome,
    pub cleaner: CleanerOutcome,
}

/// Every case, then the steady-load latency phase (see `latency`) and the
/// cleaner's (see `cleaning`).
pub fn run_all(root: &Path, settings: &Settings) -> Result<Results> {
    let driver = compile_driver(root)?;
    let data_dir = root.join("data");
    let broker = Broker::start(&data_dir)?;
    let bench = Bench {
        root,
        driver: &driver,
        broker: &broker,
        settings,
    };
    let mut outcomes = Vec::new();
    // Written once, read by every client.
    let mut consume_topics: Vec<ConsumeTopic> = Vec::new();
    for case in all_cases()
        .into_iter()
        .filter(|case| settings.selects(&case.label()))
    {
        let topic = match case.work {
            Work::Consume { written, .. } => {
                let existing = consume_topics
                    .iter()
                    .find(|t| t.record_bytes == case.record_bytes && t.written == written);
                Some(match existing {
                    Some(topic) => topic.clone(),
                    None => {
                        let topic = bench.write_consume_topic(case.record_bytes, written)?;
                        consume_topics.push(topic.clone());
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
            rtt_p99: Samples::default(),
            broker_p99: Samples::default(),
        };
        for run in 0..settings.runs {
            let measured = match &topic {
                Some(topic) => bench.consume(case, topic)?,
                None => {
                    let topic = format!("{}-{run}", topic_name(&case));
                    let measured = bench.produce(case, &topic)?;
                    bench.delete_topic(&topic)?;
                    measured
                }
            };
            if let Some(rtt) = measured.rtt_p99_seconds {
                outcome.rtt_p99.push(rtt);
            }
            if let Some(p99) = measured.broker_p99_seconds {
                outcome.broker_p99.push(p99);
            }
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
    let latency = if settings.selects("latency") {
        latency::run(&bench, root)?
    } else {
        LatencyOutcome::default()
    };
    let cleaner = if settings.selects("cleaner") {
        cleaning::run(&bench, &data_dir)?
    } else {
        CleanerOutcome::default()
    };
    broker.stop()?;
    Ok(Results {
        cases: outcomes,
        latency,
        cleaner,
    })
}

/// A topic the consume cases read.
#[derive(Debug, Clone)]
struct ConsumeTopic {
    name: String,
    record_bytes: usize,
    written: Mode,
    /// Data records (a transaction's markers take offsets too).
    records: u64,
}

/// A fresh topic per produce run.
fn topic_name(case: &Case) -> String {
    let (acks, producers, mode) = match case.work {
        Work::Produce {
            acks,
            producers,
            mode,
        } => (acks, producers, mode),
        Work::Consume { .. } => ("none", 0, Mode::Plain),
    };
    format!(
        "produce-{}b-acks{}-p{producers}-{mode:?}-{}",
        case.record_bytes,
        if acks == "-1" { "all" } else { acks },
        case.client.name()
    )
    .to_lowercase()
}

/// The running broker and what drives it.
pub struct Bench<'a> {
    root: &'a Path,
    pub driver: &'a Path,
    broker: &'a Broker,
    pub settings: &'a Settings,
}

/// The driver's extra arguments for a producer of `mode`.
fn mode_args(mode: Mode) -> Vec<String> {
    match mode {
        Mode::Plain => Vec::new(),
        Mode::Idempotent => vec!["idempotent".into()],
        Mode::Transactions => vec![format!("txn_ms={TRANSACTION_MS}")],
    }
}

impl Bench<'_> {
    pub fn address(&self) -> &str {
        &self.broker.address
    }

    /// The broker's produce latency histogram (see `Broker`).
    pub fn produce_latency(&self) -> Result<Vec<(f64, u64)>> {
        self.broker.produce_latency()
    }

    /// Runs a produce case, with the broker's produce latency over it.
    fn produce(&self, case: Case, topic: &str) -> Result<Measured> {
        let before = self.broker.produce_latency()?;
        let mut measured = self.produce_only(case, topic)?;
        let after = self.broker.produce_latency()?;
        measured.broker_p99_seconds = percentile_bound(&before, &after, 0.99);
        Ok(measured)
    }

    fn produce_only(&self, case: Case, topic: &str) -> Result<Measured> {
        let Work::Produce {
            acks,
            producers,
            mode,
        } = case.work
        else {
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
                command.args(mode_args(mode));
                let measured = self.timed_driver(command)?;
                // One untimed warm-up record per producer comes first.
                let records = measured.records + producers as u64;
                if mode == Mode::Transactions {
                    // Each transaction's marker takes an offset too.
                    let end = self.end_offset(topic)?;
                    ensure!(
                        end > records,
                        "{topic} holds {end} offsets for {records} records"
                    );
                } else {
                    self.expect_end_offset(topic, records)?;
                }
                Ok(measured)
            }
            Client::Kcat => {
                ensure!(
                    producers == 1 && mode == Mode::Plain,
                    "kcat runs one plain producer"
                );
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
            Client::Prebuilt | Client::Plain => {
                ensure!(
                    producers == 1 && mode == Mode::Plain,
                    "the plain producers are one plain producer"
                );
                let encoding = match case.client {
                    Client::Prebuilt => Encoding::Once,
                    _ => Encoding::PerRequest,
                };
                let mut command = Command::new(std::env::current_exe()?);
                command.args([super::prebuilt::ARG, encoding.arg()]);
                command.args([address, topic, &records.to_string()]);
                command.args([&case.record_bytes.to_string(), acks]);
                let measured = self.timed_driver(command)?;
                self.expect_end_offset(topic, measured.records)?;
                Ok(measured)
            }
            Client::Strata => {
                ensure!(
                    producers == 1 && mode == Mode::Plain,
                    "this harness runs strata bench as one plain producer"
                );
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

    /// Deletes a produce case's topic once it is measured: the cases
    /// together write tens of GiB, more than a small disk has free (a full
    /// disk showed as librdkafka's "Message timed out" in a later case).
    fn delete_topic(&self, topic: &str) -> Result<()> {
        let status = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args([
                "topics",
                "delete",
                topic,
                "--bootstrap",
                &self.broker.address,
            ])
            .stderr(Stdio::null())
            .status()
            .context("running strata topics delete")?;
        ensure!(status.success(), "deleting topic {topic} failed: {status}");
        Ok(())
    }

    fn consume(&self, case: Case, topic: &ConsumeTopic) -> Result<Measured> {
        let address = self.broker.address.as_str();
        let read_committed = matches!(
            case.work,
            Work::Consume {
                read_committed: true,
                ..
            }
        );
        let end = topic.records;
        let topic = topic.name.as_str();
        match case.client {
            Client::Driver => {
                let mut command = Command::new(self.driver);
                command.args(["consume", address, topic]);
                if read_committed {
                    command.arg("read_committed");
                }
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
            Client::Prebuilt | Client::Plain => bail!("the plain producers only produce"),
        }
    }

    /// Fills a topic for the consume cases (untimed).
    fn write_consume_topic(&self, record_bytes: usize, written: Mode) -> Result<ConsumeTopic> {
        let name = format!("consume-{record_bytes}b-{written:?}").to_lowercase();
        eprintln!("writing {name} for the consume cases…");
        let records = self.settings.consume_bytes / record_bytes as u64;
        let acks = if written == Mode::Plain { "1" } else { "-1" };
        self.fill(&name, records, record_bytes, acks, &mode_args(written))?;
        // Written back now, not during the first consume run.
        sync_all();
        Ok(ConsumeTopic {
            name,
            record_bytes,
            written,
            // With the driver's warm-up record.
            records: records + 1,
        })
    }

    /// Writes `records` records into `topic` with one driver producer
    /// (untimed).
    pub fn fill(
        &self,
        topic: &str,
        records: u64,
        record_bytes: usize,
        acks: &str,
        extra: &[String],
    ) -> Result<()> {
        let status = Command::new(self.driver)
            .args(["produce", &self.broker.address, topic])
            .arg(records.to_string())
            .arg(record_bytes.to_string())
            .args([acks, "1"])
            .args(extra)
            .stdout(Stdio::null())
            .status()
            .context("running rdkafka_driver")?;
        ensure!(status.success(), "writing {topic} failed: {status}");
        Ok(())
    }

    /// Runs a driver command; its own timing (from the moment every
    /// producer is connected) replaces the wall clock.
    pub fn timed_driver(&self, command: Command) -> Result<Measured> {
        self.timed_by_client(command, parse_driver)
    }

    /// Runs a client that times itself and prints what it did in a form
    /// `parse` reads.
    fn timed_by_client(
        &self,
        mut command: Command,
        parse: fn(&str) -> Result<Report>,
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
        let report = parse(&String::from_utf8_lossy(&output.stdout))?;
        Ok(Measured {
            records: report.records,
            bytes: report.bytes,
            seconds: report.seconds,
            wall_seconds,
            broker_cpu_seconds,
            client_cpu_seconds,
            rtt_p99_seconds: report.rtt_p99_seconds,
            broker_p99_seconds: None,
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
            rtt_p99_seconds: None,
            broker_p99_seconds: None,
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

pub fn sync_all() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}
