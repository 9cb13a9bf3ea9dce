//! Progress of long runs (rebuild, replay, `run --until-end`) on stderr: an
//! indicatif bar redrawn in place on a terminal (records done / total,
//! rate, ETA), plain lines at an interval otherwise (logs, CI).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// The bar while the total is known: what, the bar, done/total, rate, ETA.
const BAR_TEMPLATE: &str =
    "{prefix}: [{bar:30}] {percent:>3}% {pos}/{len} records, {rate}, ETA {eta}";
/// The bar while the total is not known yet: what, done, rate.
const COUNT_TEMPLATE: &str = "{prefix}: {pos} records, {rate}";

/// One long run's progress: the bar on a terminal, else plain lines.
pub(crate) struct ProgressReport {
    /// What runs, at the head of each plain line (the bar's prefix).
    what: String,
    /// On a terminal, the bar: hidden until the first update (a report
    /// never updated draws nothing), its clock started with the report's.
    bar: Option<ProgressBar>,
    /// Whether the bar shows a total (else only the count).
    counted: bool,
    started: Instant,
    last_line: Instant,
    every: Duration,
}

impl ProgressReport {
    /// `every`: how often a plain line is written when stderr is not a
    /// terminal.
    pub fn new(what: &str, every: Duration) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())
                .with_prefix(what.to_string())
                .with_style(style(COUNT_TEMPLATE))
        });
        Self {
            what: what.to_string(),
            bar,
            counted: false,
            started: Instant::now(),
            last_line: Instant::now(),
            every,
        }
    }

    /// Whether the report is a bar redrawn on a terminal.
    pub fn on_terminal(&self) -> bool {
        self.bar.is_some()
    }

    /// How often [`ProgressReport::update`] is worth calling.
    pub fn tick(&self) -> Duration {
        match self.bar {
            Some(_) => Duration::from_millis(200),
            None => self.every,
        }
    }

    /// Shows `done` of `total` (total 0: not known yet).
    pub fn update(&mut self, done: u64, total: u64) {
        match &self.bar {
            Some(bar) => draw(bar, &mut self.counted, done, total),
            None if self.last_line.elapsed() >= self.every => {
                self.last_line = Instant::now();
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{}", self.line(done, total));
                let _ = err.flush();
            }
            None => {}
        }
    }

    /// Ends the bar's line on a terminal (nothing if it was never drawn).
    pub fn finish(&mut self, done: u64, total: u64) {
        if let Some(bar) = &self.bar
            && !bar.is_hidden()
        {
            draw(bar, &mut self.counted, done, total.max(done));
            bar.finish();
        }
    }

    /// A plain line: `what: [###---]  42% done/total records, rate/s, ETA …`,
    /// or `what: done records, rate/s` while the total is not known.
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

/// Shows `done` of `total` on the bar, drawn from the first call on; its
/// style follows whether the total is known (`counted`).
fn draw(bar: &ProgressBar, counted: &mut bool, done: u64, total: u64) {
    if bar.is_hidden() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    if (total > 0) != *counted {
        *counted = total > 0;
        bar.set_style(style(match *counted {
            true => BAR_TEMPLATE,
            false => COUNT_TEMPLATE,
        }));
    }
    if *counted {
        bar.set_length(total);
    }
    bar.set_position(done);
}

/// The bar's style from one of the templates above, `{rate}` written as
/// the plain lines write it.
fn style(template: &str) -> ProgressStyle {
    // The templates are constants (a test parses both); the default bar
    // stands in rather than failing a run over its display.
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", state.per_sec());
            },
        )
        .progress_chars("#>-")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_bar_templates_parse() {
        for template in [BAR_TEMPLATE, COUNT_TEMPLATE] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn plain_lines_show_the_count_and_then_the_bar_once_the_total_is_known() {
        let report = ProgressReport::new("app", Duration::from_secs(1));
        assert!(report.line(5, 0).starts_with("app: 5 records, "));
        let line = report.line(10, 40);
        assert!(
            line.starts_with("app: [#######-----------------------]  25% 10/40 records, "),
            "{line}"
        );
        assert!(line.contains(", ETA "), "{line}");
    }

    #[test]
    fn durations_have_no_spaces_and_two_units_at_most() {
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(7800.0), "2h10m");
        assert_eq!(duration(273_600.0), "3d04h");
    }
}
