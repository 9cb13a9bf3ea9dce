//! Reading one of a running broker's metrics from its `--metrics`
//! endpoint, for the benchmarks that start `strata serve`.

use std::io::{Read, Write};
use std::net::TcpStream;

use anyhow::{Context, Result};

/// The value of the unlabelled metric `name`, served at `addr`
/// (`HOST:PORT` of the broker's metrics endpoint).
pub fn metric(addr: &str, name: &str) -> Result<u64> {
    let mut stream = TcpStream::connect(addr).with_context(|| format!("metrics at {addr}"))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let prefix = format!("{name} ");
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .with_context(|| format!("no metric {name}"))?;
    Ok(value.trim().parse()?)
}
