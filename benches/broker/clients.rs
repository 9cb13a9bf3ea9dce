//! The clients outside this binary: the C driver, compiled against the
//! system's librdkafka, kcat's settings beside it, and what each client
//! that times itself printed, parsed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

/// What a client that times itself printed.
pub struct Report {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub rtt_p99_seconds: Option<f64>,
}

/// The driver's one line: "records=N bytes=N seconds=F", and for produce
/// "rtt_p99_us=N" (0 when no statistics window saw a request).
pub fn parse_driver(text: &str) -> Result<Report> {
    let optional = |name: &str| -> Option<f64> {
        text.split_whitespace()
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
    };
    let field = |name: &str| -> Result<f64> {
        optional(name).with_context(|| format!("no {name}= in the driver's output {text:?}"))
    };
    Ok(Report {
        records: field("records")? as u64,
        bytes: field("bytes")? as u64,
        seconds: field("seconds")?,
        rtt_p99_seconds: optional("rtt_p99_us")
            .filter(|&us| us > 0.0)
            .map(|us| us / 1e6),
    })
}

/// `strata bench … --format json`: {"records", "bytes", "seconds", …}.
pub fn parse_strata_bench(text: &str) -> Result<Report> {
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .with_context(|| format!("strata bench printed {text:?}"))?;
    let number = |name: &str| {
        value[name]
            .as_f64()
            .with_context(|| format!("no {name} in {text:?}"))
    };
    Ok(Report {
        records: number("records")? as u64,
        bytes: number("bytes")? as u64,
        seconds: number("seconds")?,
        rtt_p99_seconds: None,
    })
}

/// librdkafka settings kcat's producer shares with the driver's.
pub const KCAT_PRODUCER_SETTINGS: [&str; 6] = [
    "-X",
    "queue.buffering.max.messages=1000000",
    "-X",
    "queue.buffering.max.kbytes=1048576",
    "-X",
    "enable.idempotence=false",
];

/// Compiles the C driver against the system's librdkafka.
pub fn compile_driver(root: &Path) -> Result<PathBuf> {
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
