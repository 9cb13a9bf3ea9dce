//! What the subcommands print: the dumped state, the status table and its
//! warnings, a diff report, the checkpoints taken.

use std::io::Write;

use crate::error::RuntimeError;
use crate::layout::{self, task_dirs};
use crate::location::Location;
use crate::ops::{
    self, DiffReport, Lookup, QueryAnswer, StatusRow, StoreQuery, TaskCheckpoint,
    dump_state::checkpoint_at,
};
use crate::progress::duration;
use crate::topology::App;
use crate::versions::Versions;

/// `query`: the entries as `key<TAB>value` lines (JSON values; strings
/// bare), or the whole answer as JSON; a key not found, or tasks left
/// out, said on stderr. A key not found is an error (exit status 1).
pub(super) fn query(
    query: &StoreQuery,
    answer: &QueryAnswer,
    json: bool,
) -> Result<super::Outcome, RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let text = serde_json::to_string_pretty(answer).map_err(|e| RuntimeError::Query {
            store: answer.store.clone(),
            reason: e.to_string(),
        })?;
        writeln!(out, "{text}").map_err(stdout_error)?;
    } else {
        let bare = |value: &serde_json::Value| match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        for entry in &answer.entries {
            writeln!(out, "{}\t{}", bare(&entry.key), bare(&entry.value)).map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)?;
    if answer.truncated {
        eprintln!(
            "(more entries matched than --limit {} let through)",
            query.limit
        );
    }
    if answer.stopped {
        eprintln!(
            "(no instance runs on this state directory: the state as it was left; its tasks may run on other instances now)"
        );
    }
    for left in &answer.elsewhere {
        let owner = left.owner.as_deref().unwrap_or("another instance");
        let why = left.error.as_deref().unwrap_or("not asked");
        eprintln!(
            "(task {} is run by {owner}: its entries are missing: {why})",
            left.task
        );
    }
    match &query.lookup {
        Lookup::Key(key) if answer.entries.is_empty() => Err(RuntimeError::Query {
            store: answer.store.clone(),
            reason: format!("no key {key:?}"),
        }),
        _ => Ok(super::Outcome::Done),
    }
}

/// `dump-state`: the lines on stdout; with `at`, which checkpoint each task's
/// lines come from on stderr.
pub(super) fn dump_state(
    app: &App,
    location: &Location,
    only: Option<&str>,
    at: Option<i64>,
) -> Result<(), RuntimeError> {
    let lines = ops::dump_state_at(app, location, only, at)?;
    if let Some(at) = at {
        for spec in app.processors.iter().filter(|p| !p.stores.is_empty()) {
            for (partition, _) in
                task_dirs(&layout::processor_dir(location.state_dir(), &spec.name))?
            {
                let (offset, _) = checkpoint_at(location.state_dir(), &spec.name, partition, at)?;
                eprintln!(
                    "{}/{partition}: the checkpoint at offset {offset}",
                    spec.name
                );
            }
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}").map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// `status`: a table of the rows, then the catch-up warnings.
pub(super) async fn status(app: &App, location: &Location) -> Result<(), RuntimeError> {
    let rows = ops::status(app, location).await?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let show = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let header = format!(
        "{:<20} {:<24} {:>12} {:>12} {:>10} {:>8} {:>10} {:>8} {:>9}  {:<16} {:<16} {}",
        "TASK",
        "INPUT",
        "OFFSET",
        "END",
        "LAG",
        "OUTBOX",
        "RATE/S",
        "ETA",
        "EXPIRES",
        "OWNER",
        "STANDBYS",
        "STATE"
    );
    writeln!(out, "{header}").map_err(stdout_error)?;
    for row in &rows {
        writeln!(
            out,
            "{:<20} {:<24} {:>12} {:>12} {:>10} {:>8} {:>10} {:>8} {:>9}  {:<16} {:<16} {}",
            row.task,
            format!("{}/{}", row.topic, row.partition),
            show(row.offset),
            show(row.end),
            show(row.lag()),
            row.outbox_records,
            row.rate.map_or("-".to_string(), |r| format!("{r:.0}")),
            match (row.lag(), row.eta_secs()) {
                (Some(0), _) => "0s".to_string(),
                (_, Some(eta)) => duration(eta),
                _ => "-".to_string(),
            },
            match row.expires_in_ms {
                Some(ms) if ms <= 0 => "due".to_string(),
                Some(ms) => duration(ms as f64 / 1000.0),
                None => "-".to_string(),
            },
            row.owner.as_deref().unwrap_or("-"),
            match row.standbys.is_empty() {
                true => "-".to_string(),
                false => row.standbys.join(","),
            },
            match (&row.here, &row.owner) {
                // This instance's own word for it.
                (Some(view), _) => view.to_string(),
                // Another instance runs it (restoring, perhaps: its state
                // directory's status says).
                (None, Some(_)) => "assigned".to_string(),
                (None, None) => "-".to_string(),
            },
        )
        .map_err(stdout_error)?;
    }
    if rows.is_empty() {
        writeln!(
            out,
            "(no task has run yet under {})",
            location.state_dir().display()
        )
        .map_err(stdout_error)?;
    }
    for warning in rows.iter().filter_map(StatusRow::warning) {
        writeln!(out, "WARNING: {warning}").map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// `checkpoint`: one line per checkpoint taken.
pub(super) fn checkpoints(taken: &[TaskCheckpoint]) {
    for TaskCheckpoint { task, offset } in taken {
        println!("{task}: checkpoint at offset {offset}");
    }
}

/// `diff`: per store and derived partition, what differs.
pub(super) fn diff(report: &DiffReport) -> Result<(), RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write!(out, "{report}").map_err(stdout_error)?;
    out.flush().map_err(stdout_error)
}

pub(super) fn stdout_error(error: std::io::Error) -> RuntimeError {
    RuntimeError::Io {
        context: "writing to stdout".into(),
        error,
    }
}

/// `run` and `replay`: what they did, on stderr.
pub(super) fn processed(app: &str, summary: &ops::RunSummary) {
    eprintln!(
        "{app}: {} records processed in {:.1} s",
        summary.records,
        summary.elapsed.as_secs_f64()
    );
}

/// `promote`: what is live now, and how to roll back.
pub(super) fn promoted(app: &str, promoted: &ops::Promoted) {
    match promoted {
        ops::Promoted::AlreadyLive(live) => {
            eprintln!("{app}: {} is already live", live.name);
        }
        ops::Promoted::Live {
            live,
            previous,
            derived_topics,
        } => {
            println!(
                "{} is live: `run` uses its state ({}) and derived topics ({})",
                live.name,
                live.state_dir.display(),
                derived_topics.join(", ")
            );
            println!(
                "the previous live version, {}, is kept: `promote {}` rolls back",
                previous.name, previous.name
            );
        }
    }
}

/// `versions`: one name a line, the live one marked.
pub(super) fn versions(versions: &Versions) {
    for name in versions.names() {
        let marker = match name == versions.live_name() {
            true => "  (live)",
            false => "",
        };
        println!("{name}{marker}");
    }
}

/// `rebuild`: what was rebuilt and how it took over, on stderr.
pub(super) fn rebuilt(app: &str, summary: &ops::RebuildSummary) {
    let by = match summary.handed_over > 0 {
        true => "the running app swapped it in",
        false => "swapped in",
    };
    eprintln!(
        "{app}: rebuilt {} task(s) from {} records in {:.1} s; {by}",
        summary.tasks,
        summary.records,
        summary.elapsed.as_secs_f64()
    );
}
