//! The table: baselines, every case, and each target's ratio.

use std::path::PathBuf;

use super::baselines::FsyncLatency;
use super::case::{CONCURRENT_PRODUCERS, Client, Mode, RECORD_SIZES, Work};
use super::cases::{Outcome, Results};
use super::cleaning::CleanerOutcome;
use super::latency::LatencyOutcome;
use super::{Samples, Settings};

/// MB as in MB/s: 10^6 bytes.
const MB: f64 = 1e6;

pub struct Baselines {
    pub loopback: Samples,
    pub disk: Samples,
    /// One fdatasync after a small append.
    pub fsync: FsyncLatency,
    pub disk_dir: PathBuf,
    pub disk_bytes: u64,
}

/// One target: `measured ≥ factor × reference`.
struct Target {
    what: String,
    factor: f64,
    reference_name: String,
    reference: f64,
    measured: Option<(f64, Client)>,
}

pub fn print(settings: &Settings, baselines: &Baselines, results: &Results) -> anyhow::Result<()> {
    let outcomes = &results.cases[..];
    let cleaner = &results.cleaner;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!();
    println!(
        "strata broker benchmark: one run on this machine ({cores} cores); each figure is the best of {} runs, the median beside it",
        settings.runs
    );
    println!(
        "MB = 10^6 bytes of record values (batch and protocol overhead not counted); CPU = percent of one core over the run"
    );
    println!();
    println!("{:<44} {:>10} {:>10}", "baseline", "MB/s", "median");
    let loopback = baselines.loopback.best();
    let disk = baselines.disk.best();
    println!(
        "{:<44} {:>10.0} {:>10.0}",
        "loopback TCP (iperf3, one stream)",
        loopback / MB,
        baselines.loopback.median() / MB
    );
    println!(
        "{:<44} {:>10.0} {:>10.0}",
        format!(
            "disk write + fdatasync ({} MiB)",
            baselines.disk_bytes >> 20
        ),
        disk / MB,
        baselines.disk.median() / MB
    );
    println!(
        "{:<44} {:>10.2} ms median, {:.2} ms p99",
        "one fdatasync after a 16 KiB append",
        baselines.fsync.median * 1e3,
        baselines.fsync.p99 * 1e3
    );
    println!("  (disk measured in {})", baselines.disk_dir.display());
    println!();
    println!(
        "{:<44} {:<7} {:>11} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10}",
        "case",
        "client",
        "records/s",
        "MB/s",
        "median",
        "broker",
        "client",
        "p99 rtt",
        "broker p99"
    );
    let millis = |samples: &Samples| match samples.median() {
        0.0 => String::new(),
        seconds => format!("{:.2} ms", seconds * 1e3),
    };
    for outcome in outcomes {
        println!(
            "{:<44} {:<7} {:>11.0} {:>9.1} {:>9.1} {:>7.0}% {:>7.0}% {:>10} {:>10}",
            outcome.case.label(),
            outcome.case.client.name(),
            outcome.records_per_second.best(),
            outcome.bytes_per_second.best() / MB,
            outcome.bytes_per_second.median() / MB,
            outcome.broker_cpu.median(),
            outcome.client_cpu.median(),
            millis(&outcome.rtt_p99),
            millis(&outcome.broker_p99),
        );
    }
    print_cleaner(cleaner);
    println!();
    let slower = loopback.min(disk);
    let slower_name = if loopback <= disk {
        "loopback TCP"
    } else {
        "disk write"
    };
    let plain_consume = Work::Consume {
        written: Mode::Plain,
        read_committed: false,
    };
    let mut targets = Vec::new();
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!("consume {} ", size_label(size)),
            factor: 0.5,
            reference_name: "loopback TCP".into(),
            reference: loopback,
            measured: best(outcomes, size, |w| w == plain_consume),
        });
    }
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!("produce {} acks=1", size_label(size)),
            factor: 0.5,
            reference_name: slower_name.into(),
            reference: slower,
            measured: best(outcomes, size, |w| w == produce("1", 1, Mode::Plain)),
        });
    }
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!(
                "produce {} acks=all, {CONCURRENT_PRODUCERS} producers",
                size_label(size)
            ),
            factor: 0.3,
            reference_name: slower_name.into(),
            reference: slower,
            measured: best(outcomes, size, |w| {
                w == produce("-1", CONCURRENT_PRODUCERS, Mode::Plain)
            }),
        });
    }
    // Each against a peer case of the same run (the driver's).
    let peers = [
        (
            produce("-1", CONCURRENT_PRODUCERS, Mode::Plain),
            0.5,
            produce("1", CONCURRENT_PRODUCERS, Mode::Plain),
        ),
        (
            produce("-1", 1, Mode::Transactions),
            0.9,
            produce("-1", 1, Mode::Idempotent),
        ),
        (
            Work::Consume {
                written: Mode::Transactions,
                read_committed: true,
            },
            0.95,
            Work::Consume {
                written: Mode::Transactions,
                read_committed: false,
            },
        ),
    ];
    for (work, factor, peer) in peers {
        for size in RECORD_SIZES {
            let label = |work| {
                super::case::Case {
                    work,
                    record_bytes: size,
                    client: Client::Driver,
                }
                .label()
            };
            let Some((reference, _)) = best(outcomes, size, |w| w == peer) else {
                continue;
            };
            targets.push(Target {
                what: label(work),
                factor,
                reference_name: label(peer),
                reference,
                measured: best(outcomes, size, |w| w == work),
            });
        }
    }
    let cleaned = !cleaner.clean_rate.is_empty();
    targets.extend(cleaned.then(|| Target {
        what: "cleaner, clean alone".into(),
        factor: 0.5,
        reference_name: "disk write".into(),
        reference: disk,
        measured: Some((cleaner.clean_rate.best(), Client::Driver)),
    }));
    targets.extend(cleaned.then(|| Target {
        what: "produce 1 KiB acks=1 beside a clean".into(),
        factor: 0.8,
        reference_name: "the same, no clean".into(),
        reference: cleaner.produce_alone.best(),
        measured: Some((cleaner.produce_during_clean.best(), Client::Driver)),
    }));
    println!(
        "{:<44} {:>54} {:>9} {:>7}  verdict",
        "target (best librdkafka client)", "needs MB/s", "MB/s", "ratio"
    );
    let mut summary = Vec::new();
    for target in targets {
        let Some((measured, client)) = target.measured else {
            continue;
        };
        summary.push(super::summary::Target {
            what: format!("{} ({})", target.what.trim(), client.name()),
            measured: measured / MB,
            reference_name: target.reference_name.clone(),
            reference: target.reference / MB,
            factor: target.factor,
            unit: "MB/s",
            floor: None,
        });
        let ratio = measured / target.reference;
        let needs = format!(
            "{} × {} = {:.0}",
            target.factor,
            target.reference_name,
            target.factor * target.reference / MB
        );
        println!(
            "{:<44} {:>54} {:>9.1} {:>6.2}×  {} ({})",
            target.what,
            needs,
            measured / MB,
            ratio,
            if ratio >= target.factor {
                "MET"
            } else {
                "MISSED"
            },
            client.name()
        );
    }
    print_latency(&baselines.fsync, outcomes, &results.latency);
    summary.extend(print_client_comparison(outcomes));
    super::summary::report("broker", &summary)
}

fn produce(acks: &'static str, producers: usize, mode: Mode) -> Work {
    Work::Produce {
        acks,
        producers,
        mode,
    }
}

fn print_cleaner(cleaner: &CleanerOutcome) {
    if cleaner.clean_rate.is_empty() {
        return;
    }
    println!();
    println!(
        "cleaner (I/O budget {} MiB/s, reads and writes)  {:>10} {:>10}",
        cleaner.io_budget >> 20,
        "MB/s",
        "median"
    );
    let rows = [
        ("topic bytes cleaned per second, alone", &cleaner.clean_rate),
        ("produce 1 KiB acks=1, no clean", &cleaner.produce_alone),
        (
            "produce 1 KiB acks=1 while a clean runs",
            &cleaner.produce_during_clean,
        ),
    ];
    for (what, samples) in rows {
        println!(
            "{what:<50} {:>10.1} {:>10.1}",
            samples.best() / MB,
            samples.median() / MB
        );
    }
    if cleaner.partial_overlaps > 0 {
        println!(
            "  ({} runs' clean ended before the produce beside it did)",
            cleaner.partial_overlaps
        );
    }
}

/// The broker's acks=all latency with many producers against one
/// fdatasync: its 99th percentile (the median of the runs', each the upper
/// bound of its histogram bucket) must be at most 3 fdatasyncs, tail
/// against tail (the baseline's 99th percentile; the ratio to its median
/// beside it).
/// Judged at a steady load (see `latency`); the full-load cases are shown
/// beside it, with acks=1 for the floor: there every produce waits for the
/// kernel's writeback, whatever its acks. The clients' round trips (the
/// table's p99 rtt) add the time requests queue in the client and the
/// socket.
fn print_latency(fsync: &FsyncLatency, outcomes: &[Outcome], steady: &LatencyOutcome) {
    println!();
    println!(
        "{:<64} {:>12} {:>12} {:>9} {:>9}  verdict",
        "latency (broker p99 of produce, driver)",
        "broker p99",
        "3 fsyncs",
        "p99 syncs",
        "÷ median"
    );
    let row = |what: String, p99: f64, judged: bool| {
        if p99 == 0.0 {
            return;
        }
        let fsyncs = p99 / fsync.p99;
        let verdict = match (judged, fsyncs <= 3.0) {
            (false, _) => "",
            (true, true) => "MET",
            (true, false) => "MISSED",
        };
        println!(
            "{what:<64} ≤{:>8.2} ms {:>9.2} ms {:>9.1} {:>9.1}  {verdict}",
            p99 * 1e3,
            3.0 * fsync.p99 * 1e3,
            fsyncs,
            p99 / fsync.median,
        );
    };
    let load = LatencyOutcome::load_label();
    row(
        format!("acks=1, steady: {load}"),
        steady.acks_one.median(),
        false,
    );
    row(
        format!("acks=all, steady: {load}"),
        steady.acks_all.median(),
        true,
    );
    row(
        "floor: plain appends + fdatasync each, same load".into(),
        steady.floor.median(),
        false,
    );
    if steady.floor.median() > 0.0 && steady.acks_all.median() > 0.0 {
        println!(
            "  acks=all p99 ÷ the floor's p99: {:.2}",
            steady.acks_all.median() / steady.floor.median()
        );
    }
    for acks in ["1", "-1"] {
        let work = produce(acks, CONCURRENT_PRODUCERS, Mode::Plain);
        for outcome in outcomes
            .iter()
            .filter(|o| o.case.work == work && o.case.client == Client::Driver)
        {
            let what = format!("{}, full load", outcome.case.label());
            row(what, outcome.broker_p99.median(), false);
        }
    }
}

/// strata's client against librdkafka (the driver) in the same cases,
/// records/s of each and the ratio: at least equal,
/// and its producer of 100-byte records with acks=1 at least
/// [`PRODUCER_100B_OVER_DRIVER`] times the driver's. Returns the targets.
fn print_client_comparison(outcomes: &[Outcome]) -> Vec<super::summary::Target> {
    let mut targets = Vec::new();
    println!();
    println!(
        "{:<44} {:>14} {:>14} {:>7}  verdict",
        "strata client vs librdkafka", "strata rec/s", "driver rec/s", "ratio"
    );
    for case in outcomes.iter().filter(|o| o.case.client == Client::Strata) {
        let driver = outcomes.iter().find(|o| {
            o.case.client == Client::Driver
                && o.case.work == case.case.work
                && o.case.record_bytes == case.case.record_bytes
        });
        let Some(driver) = driver else { continue };
        let (ours, theirs) = (
            case.records_per_second.best(),
            driver.records_per_second.best(),
        );
        let ratio = ours / theirs;
        let factor =
            match case.case.work == produce("1", 1, Mode::Plain) && case.case.record_bytes == 100 {
                true => PRODUCER_100B_OVER_DRIVER,
                false => 1.0,
            };
        println!(
            "{:<44} {:>14.0} {:>14.0} {:>6.2}×  {}",
            case.case.label(),
            ours,
            theirs,
            ratio,
            if ratio >= factor { "MET" } else { "MISSED" }
        );
        let beside = |client: Client| {
            outcomes.iter().find(|o| {
                o.case.client == client
                    && o.case.work == case.case.work
                    && o.case.record_bytes == case.case.record_bytes
            })
        };
        // The broker's intake with no client work (the broker's own limit),
        // and a producer doing only the wire's work per record: the floor.
        let plain = beside(Client::Plain);
        for (client, name, says) in [
            (
                Client::Prebuilt,
                "  the broker's intake, one pre-built request",
                "the broker's own limit",
            ),
            (
                Client::Plain,
                "  a plain producer",
                "encodes each batch, nothing else",
            ),
        ] {
            if let Some(peer) = beside(client) {
                let rate = peer.records_per_second.best();
                println!(
                    "{name:<44} {rate:>14.0} {:>14} {:>6.2}×  ({says})",
                    "",
                    rate / theirs
                );
            }
        }
        targets.push(super::summary::Target {
            what: format!("strata client, {}", case.case.label()),
            measured: ours,
            reference_name: "librdkafka driver".into(),
            reference: theirs,
            factor,
            unit: "records/s",
            floor: plain.map(|plain| super::summary::Floor {
                name: "a plain producer, each batch encoded and sent, nothing else".into(),
                value: plain.records_per_second.best(),
            }),
        });
    }
    targets
}

/// How many times librdkafka's rate strata's producer must reach with
/// 100-byte records (the driver is the peer a Kafka user would pick).
const PRODUCER_100B_OVER_DRIVER: f64 = 1.5;

fn size_label(record_bytes: usize) -> String {
    match record_bytes {
        1024 => "1 KiB".into(),
        n => format!("{n} B"),
    }
}

/// The best rate a librdkafka client reached in the matching cases.
fn best(outcomes: &[Outcome], size: usize, work: impl Fn(Work) -> bool) -> Option<(f64, Client)> {
    outcomes
        .iter()
        .filter(|o| o.case.client.is_librdkafka())
        .filter(|o| o.case.record_bytes == size && work(o.case.work))
        .map(|o| (o.bytes_per_second.best(), o.case.client))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}
