//! The table: baselines, every case, and each target's ratio.

use std::path::PathBuf;

use super::cases::{CONCURRENT_PRODUCERS, Client, Outcome, RECORD_SIZES, Work};
use super::{Samples, Settings};

/// MB as in MB/s: 10^6 bytes.
const MB: f64 = 1e6;

pub struct Baselines {
    pub loopback: Samples,
    pub disk: Samples,
    pub disk_dir: PathBuf,
    pub disk_bytes: u64,
}

/// One target: `measured ≥ factor × reference`.
struct Target {
    what: String,
    factor: f64,
    reference_name: &'static str,
    reference: f64,
    measured: Option<(f64, Client)>,
}

pub fn print(settings: &Settings, baselines: &Baselines, outcomes: &[Outcome]) {
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
    println!("  (disk measured in {})", baselines.disk_dir.display());
    println!();
    println!(
        "{:<36} {:<7} {:>11} {:>9} {:>9} {:>8} {:>8}",
        "case", "client", "records/s", "MB/s", "median", "broker", "client"
    );
    for outcome in outcomes {
        println!(
            "{:<36} {:<7} {:>11.0} {:>9.1} {:>9.1} {:>7.0}% {:>7.0}%",
            outcome.case.label(),
            outcome.case.client.name(),
            outcome.records_per_second.best(),
            outcome.bytes_per_second.best() / MB,
            outcome.bytes_per_second.median() / MB,
            outcome.broker_cpu.median(),
            outcome.client_cpu.median(),
        );
    }
    println!();
    let slower = loopback.min(disk);
    let slower_name = if loopback <= disk {
        "loopback TCP"
    } else {
        "disk write"
    };
    let mut targets = Vec::new();
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!("consume {} ", size_label(size)),
            factor: 0.5,
            reference_name: "loopback TCP",
            reference: loopback,
            measured: best(outcomes, size, |w| w == Work::Consume),
        });
    }
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!("produce {} acks=1", size_label(size)),
            factor: 0.5,
            reference_name: slower_name,
            reference: slower,
            measured: best(outcomes, size, |w| {
                w == Work::Produce {
                    acks: "1",
                    producers: 1,
                }
            }),
        });
    }
    for size in RECORD_SIZES {
        targets.push(Target {
            what: format!(
                "produce {} acks=all, {CONCURRENT_PRODUCERS} producers",
                size_label(size)
            ),
            factor: 0.3,
            reference_name: slower_name,
            reference: slower,
            measured: best(outcomes, size, |w| {
                w == Work::Produce {
                    acks: "-1",
                    producers: CONCURRENT_PRODUCERS,
                }
            }),
        });
    }
    println!(
        "{:<36} {:>26} {:>9} {:>7}  verdict",
        "target (best librdkafka client)", "needs MB/s", "MB/s", "ratio"
    );
    for target in targets {
        let Some((measured, client)) = target.measured else {
            continue;
        };
        let ratio = measured / target.reference;
        let needs = format!(
            "{:.1} × {} = {:.0}",
            target.factor,
            target.reference_name,
            target.factor * target.reference / MB
        );
        println!(
            "{:<36} {:>26} {:>9.1} {:>6.2}×  {} ({})",
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
    print_client_comparison(outcomes);
}

/// strata's client against librdkafka (the driver) in the same cases:
/// records/s of each and the ratio, which must be at least 1.
fn print_client_comparison(outcomes: &[Outcome]) {
    println!();
    println!(
        "{:<36} {:>14} {:>14} {:>7}  verdict",
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
        println!(
            "{:<36} {:>14.0} {:>14.0} {:>6.2}×  {}",
            case.case.label(),
            ours,
            theirs,
            ratio,
            if ratio >= 1.0 { "MET" } else { "MISSED" }
        );
    }
}

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
