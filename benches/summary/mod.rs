//! The targets a benchmark measures, each against its reference in the
//! same run, printed with MET or MISSED and, under `make bench-all`, added
//! to one Markdown table for every benchmark.
//!
//! A target reads "`measured` ≥ `factor` × `reference`", both rates (higher
//! is better): a cost is stated as its inverse (requests per CPU-second,
//! not µs per request), so every row reads the same way. `make bench-all`
//! names a file in [`SUMMARY_ENV`]; each target appends its row there, and
//! `scripts/bench-all.sh` puts the rows under one header. A benchmark run
//! alone prints its targets and writes nothing.
//!
//! A target may carry a [`Floor`]: a plain program, no runtime, doing the
//! work the target's case cannot avoid (durably where the case is), timed
//! in the same run against the same reference. It shows how much of the
//! gap to the goal is that work itself: a case at or above its floor
//! spends no more than a plain program would.

use std::io::Write;

/// The file `make bench-all` collects the rows in.
pub const SUMMARY_ENV: &str = "STRATA_BENCH_SUMMARY";

/// One target: `measured ≥ factor × reference`, in `unit`.
pub struct Target {
    /// What is measured ("pass-through").
    pub what: String,
    pub measured: f64,
    /// What it is measured against ("plain loop").
    pub reference_name: String,
    pub reference: f64,
    pub factor: f64,
    /// Both figures' unit ("records/s").
    pub unit: &'static str,
    /// The floor measured beside it, if the benchmark has one.
    pub floor: Option<Floor>,
}

/// What a plain program doing the work a target's case cannot avoid
/// reaches, measured in the same run (in the target's unit).
pub struct Floor {
    /// What the program does ("HashMap count, writes overlapped").
    pub name: String,
    pub value: f64,
}

impl Target {
    pub fn ratio(&self) -> f64 {
        self.measured / self.reference
    }

    pub fn met(&self) -> bool {
        self.ratio() >= self.factor
    }

    fn verdict(&self) -> &'static str {
        if self.met() { "MET" } else { "MISSED" }
    }

    /// The floor, its figure and its ratio to the reference, or "—".
    fn floor_text(&self) -> String {
        match &self.floor {
            Some(floor) => format!(
                "{}: {} ({:.2}×)",
                floor.name,
                figure(floor.value, self.unit),
                floor.value / self.reference
            ),
            None => "—".to_string(),
        }
    }
}

/// Prints `targets` under the benchmark's name, and adds them to the
/// summary file when `make bench-all` names one.
pub fn report(bench: &str, targets: &[Target]) -> anyhow::Result<()> {
    println!("\ntargets of {bench}, each against its reference in this run:");
    for target in targets {
        println!(
            "  {:<48} {:>12} vs {:<36} {:>6.2}×  needs {:.2}×  {}",
            target.what,
            figure(target.measured, target.unit),
            format!(
                "{} {}",
                target.reference_name,
                figure(target.reference, target.unit)
            ),
            target.ratio(),
            target.factor,
            target.verdict()
        );
        if target.floor.is_some() {
            println!("  {:<48} floor: {}", "", target.floor_text());
        }
    }
    let Some(path) = std::env::var_os(SUMMARY_ENV) else {
        return Ok(());
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    for target in targets {
        writeln!(
            file,
            "| {bench} | {} | {} | {}: {} | {:.2}× | ≥ {:.2}× | {} | {} |",
            target.what,
            figure(target.measured, target.unit),
            target.reference_name,
            figure(target.reference, target.unit),
            target.ratio(),
            target.factor,
            target.verdict(),
            target.floor_text()
        )?;
    }
    Ok(())
}

/// A rate with its unit, in millions or thousands where that reads better.
fn figure(value: f64, unit: &str) -> String {
    match value {
        v if v >= 1e7 => format!("{:.1} M {unit}", v / 1e6),
        v if v >= 1e6 => format!("{:.2} M {unit}", v / 1e6),
        v if v >= 1e4 => format!("{:.0} k {unit}", v / 1e3),
        v if v >= 10.0 => format!("{v:.1} {unit}"),
        v => format!("{v:.2} {unit}"),
    }
}
