//! Progress of long runs (rebuild, replay, `run --until-end`) on stderr: a
//! bar redrawn in place on a terminal (records done / total, rate, ETA),
//! plain lines at an interval otherwise (logs, CI).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub(crate) struct ProgressReport {
    what: String,
    terminal: bool,
    started: Instant,
    last_line: Instant,
    every: Duration,
    drawn: bool,
}

impl ProgressReport {
    /// `every`: how often a plain line is written when stderr is not a
    /// terminal.
    pub fn new(what: &str, every: Duration) -> Self {
        Self {
            what: what.to_string(),
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            last_line: Instant::now(),
            every,
            drawn: false,
        }
    }

    /// Whether the report is a bar redrawn on a terminal.
    pub fn on_terminal(&self) -> bool {
        self.terminal
    }

    /// How often [`ProgressReport::update`] is worth calling.
    pub fn tick(&self) -> Duration {
        if self.terminal {
            Duration::from_millis(200)
        } else {
            self.every
        }
    }

    /// Shows `done` of `total` (total 0: not known yet).
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.terminal && self.last_line.elapsed() < self.every {
            return;
        }
        self.last_line = Instant::now();
        let line = self.line(done, total);
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r{line}\x1b[K");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Ends the bar's line on a terminal.
    pub fn finish(&mut self, done: u64, total: u64) {
        if self.terminal && self.drawn {
            let line = self.line(done, total.max(done));
            eprintln!("\r{line}\x1b[K");
        }
    }

    fn line(&self, done: u64, total: u64) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        if total == 0 {
            return format!("{}: {done} records, {rate:.0}/s", self.what);
        }
        let fraction = (done as f64 / total as f64).min(1.0);
        let width = 30;
        let filled = (fraction * width as f64) as usize;
        let eta = if rate > 0.0 && done < total {
            format!("ETA {}", duration((total - done) as f64 / rate))
        } else {
            "ETA -".to_string()
        };
        format!(
            "{}: [{}{}] {:>3.0}% {done}/{total} records, {rate:.0}/s, {eta}",
            self.what,
            "#".repeat(filled),
            "-".repeat(width - filled),
            fraction * 100.0
        )
    }
}

/// Seconds as `42s`, `3m05s`, `2h10m` or `3d04h` (no spaces: it also fills
/// a table cell).
pub(crate) fn duration(secs: f64) -> String {
    let secs = secs.max(0.0).round() as u64;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}
