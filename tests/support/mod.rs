//! Helpers shared by the integration tests: building batches, reading a
//! partition back as plain records, listing segment files and generating
//! reproducible pseudo-random data.

#![allow(dead_code, reason = "each test file uses a different subset")]

pub mod broker;
pub mod member;
pub mod wire;

use std::fs;
use std::path::{Path, PathBuf};

pub mod in_process;

use anyhow::Result;
use strata::log::{LogConfig, LogManager, PartitionLog, Topic};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

/// Every codec a batch can use.
pub const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// A record as read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// One batch of `values`, all with `timestamp`, uncompressed.
pub fn batch(values: &[&str], timestamp: i64) -> Vec<u8> {
    batch_with(
        Compression::None,
        values.iter().map(|v| (None, v.as_bytes(), timestamp)),
    )
}

/// One batch of (key, value, timestamp) records with the given codec.
pub fn batch_with<'a>(
    compression: Compression,
    records: impl IntoIterator<Item = (Option<&'a [u8]>, &'a [u8], i64)>,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression);
    for (key, value, timestamp) in records {
        builder
            .push(NewRecord::new(key, value, timestamp))
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}

/// Opens the log in `data`, creates `topic` with `partitions` partitions
/// and the topic `config` when it is missing, hands the topic to `write`,
/// and closes the log.
pub fn with_topic<T>(
    data: &Path,
    topic: &str,
    partitions: i32,
    config: &[(&str, &str)],
    write: impl FnOnce(&Topic) -> T,
) -> T {
    let log = LogManager::open(data, LogConfig::default()).expect("log opens");
    let found = match log.topic(topic) {
        Some(found) => found,
        None => {
            let config = config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            log.create_topic(topic, partitions, config)
                .expect("topic created")
        }
    };
    let written = write(&found);
    drop(found);
    log.close().expect("log closes");
    written
}

/// Polls `done` every 10 ms until it is true; fails the test, naming
/// `what`, after `limit`.
pub fn wait_until(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A config with tiny segments and a dense index, so few records exercise
/// rolling and index lookups.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Every record from `offset` to the log end, decoded.
pub fn read_all(log: &PartitionLog, offset: i64) -> Vec<Stored> {
    let bytes = log
        .read(offset, u64::MAX)
        .expect("read succeeds")
        .read_to_vec()
        .expect("slices read");
    decode(&bytes)
}

/// Appends `bytes` (one or more batches) and returns their records as the
/// log stored them, at the offsets it assigned.
pub fn append_and_decode(log: &PartitionLog, bytes: &[u8]) -> Result<Vec<Stored>> {
    let info = log.append(bytes)?;
    Ok(decode(&as_stored(bytes, info.base_offset)))
}

/// `bytes` (concatenated batches) as the log stores them when it assigns
/// them offsets from `base_offset`: each baseOffset rewritten, nothing else.
pub fn as_stored(bytes: &[u8], base_offset: i64) -> Vec<u8> {
    let mut stored = bytes.to_vec();
    let (mut position, mut next) = (0, base_offset);
    while position < stored.len() {
        let batch = RecordBatch::parse_and_verify(&stored[position..]).expect("valid batch");
        let (size, delta) = (batch.size_bytes(), batch.header().last_offset_delta);
        strata::record::set_base_offset(&mut stored[position..], next);
        next += i64::from(delta) + 1;
        position += size;
    }
    stored
}

/// Decodes concatenated batches, checking every CRC.
pub fn decode(mut bytes: &[u8]) -> Vec<Stored> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let batch = RecordBatch::parse_and_verify(bytes).expect("valid batch");
        for record in batch.records(64 << 20).expect("records decode").iter() {
            let record = record.expect("record decodes");
            out.push(Stored {
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.map(<[u8]>::to_vec),
                value: record.value.map(<[u8]>::to_vec),
            });
        }
        bytes = &bytes[batch.size_bytes()..];
    }
    out
}

/// The `.log` files of a partition directory, oldest segment first.
pub fn segment_logs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut logs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            logs.push(path);
        }
    }
    logs.sort();
    Ok(logs)
}

/// The base offsets of the segments in a partition directory, named by its
/// `.log` files, in ascending order.
pub fn segment_bases(dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(".log") {
            bases.push(stem.parse()?);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// SplitMix64: a fixed seed gives the same sequence on every run, without a
/// dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `len` bytes, one from each value's low byte.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// A `strata serve` process on a free loopback port, killed on drop.
pub struct ServerProcess {
    pub child: std::process::Child,
    pub addr: String,
}

impl ServerProcess {
    /// Starts `strata serve` on `data_dir` and waits until it accepts
    /// connections.
    pub fn start(binary: &str, data_dir: &std::path::Path) -> Self {
        Self::start_with(binary, data_dir, &[], std::process::Stdio::null())
    }

    /// Like `start`, with more `strata serve` arguments and the broker's log
    /// (stderr) sent to `stderr`.
    pub fn start_with(
        binary: &str,
        data_dir: &std::path::Path,
        args: &[&std::ffi::OsStr],
        stderr: std::process::Stdio,
    ) -> Self {
        // Port 0 and the address the broker prints: a port picked here and
        // passed in could be taken by a parallel test in between.
        let mut child = std::process::Command::new(binary)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("strata serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (found, listening) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(addr) = line.strip_prefix("strata listening on ") {
                    let _ = found.send(addr.trim().to_string());
                }
            }
        });
        let addr = match listening.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(addr) => addr,
            Err(_) => {
                let status = child.try_wait();
                let _ = child.kill();
                panic!("strata serve never said where it listens (exit: {status:?})");
            }
        };
        Self { child, addr }
    }

    /// SIGKILLs the broker and starts it again on the same address and data
    /// directory (plain `strata serve`), waiting until it listens.
    pub fn kill_and_restart(&mut self, binary: &str, data_dir: &std::path::Path) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = std::process::Command::new(binary)
            .args(["serve", "--listen", &self.addr, "--data-dir"])
            .arg(data_dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("strata serve starts again");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(&self.addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the broker never listened on {} again",
                self.addr
            );
            assert!(
                self.is_running(),
                "the restarted broker exited (is {} taken?)",
                self.addr
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one request over a blocking socket and decodes its response.
/// Returns the I/O error if the connection fails (a killed broker).
pub fn call<Req, Resp>(
    stream: &mut std::net::TcpStream,
    key: kafka_protocol::messages::ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp>
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    use kafka_protocol::messages::{RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use std::io::{Read, Write};

    let correlation_id = 7000 + i32::from(version);
    let mut buf = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("test")))
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    request.encode(&mut buf, version).expect("request encodes");
    stream.write_all(&(buf.len() as i32).to_be_bytes())?;
    stream.write_all(&buf)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body)?;
    let mut body = bytes::Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .expect("response header decodes");
    assert_eq!(header.correlation_id, correlation_id);
    Ok(Resp::decode(&mut body, version).expect("response decodes"))
}
