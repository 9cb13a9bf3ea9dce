//! kcat (librdkafka's command-line client) driven with the same requests as
//! the script drivers. kcat reads records as delimited text (here 0x1f
//! between key and value, 0x1e after each record), sends one header list
//! with every record of a run and cannot set timestamps; it writes records
//! in a format of lengths and bytes (`%K`/`%S`), so consuming is byte for
//! byte. It has no admin API for creating topics and no seek to the end of
//! a running consumer.

use std::process::Command;

use serde_json::{Value, json};

use super::{Consumed, RecordSpec, field, hex, run_with_input, unhex};

const KEY_DELIMITER: u8 = 0x1f;
const RECORD_DELIMITER: u8 = 0x1e;
const FORMAT: &str = "%p %o %T %K %S %k%s %h\\n";

pub fn run(op: &str, request: &Value) -> Value {
    let bootstrap = request["bootstrap"].as_str().expect("bootstrap");
    match op {
        "list_topics" => list_topics(bootstrap),
        "produce" => produce(bootstrap, request),
        "consume" => consume(bootstrap, request),
        "offsets_for_times" => offsets_for_times(bootstrap, request),
        "seek" => seek(bootstrap, request),
        "out_of_range" => out_of_range(bootstrap, request),
        _ => panic!("kcat has no {op}"),
    }
}

/// Runs kcat with `args` and `input`; returns (success, stdout, stderr).
fn kcat(args: &[String], input: &[u8]) -> (bool, Vec<u8>, String) {
    let output = run_with_input(Command::new("kcat").args(args), input);
    (
        output.status.success(),
        output.stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn kcat_ok(args: &[String], input: &[u8]) -> Vec<u8> {
    let (ok, stdout, stderr) = kcat(args, input);
    assert!(ok, "kcat {args:?} failed:\n{stderr}");
    stdout
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn list_topics(bootstrap: &str) -> Value {
    let metadata: Value =
        serde_json::from_slice(&kcat_ok(&args(&["-L", "-J", "-b", bootstrap]), b""))
            .expect("kcat -J prints JSON");
    let topics: serde_json::Map<String, Value> = metadata["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|t| {
            let partitions = t["partitions"].as_array().expect("partitions").len();
            (
                t["topic"].as_str().expect("topic").to_string(),
                json!(partitions),
            )
        })
        .collect();
    json!({ "topics": topics })
}

/// One kcat run per partition (kcat takes one `-p`), records in their order.
fn produce(bootstrap: &str, request: &Value) -> Value {
    let topic = request["topic"].as_str().expect("topic");
    let specs: Vec<RecordSpec> = field(request, "records");
    let headers = &specs[0].headers;
    let mut partitions: Vec<i32> = specs.iter().map(|s| s.partition).collect();
    partitions.sort_unstable();
    partitions.dedup();
    for partition in partitions {
        let mut input = Vec::new();
        for spec in specs.iter().filter(|s| s.partition == partition) {
            assert_eq!(&spec.headers, headers, "kcat sends one header list per run");
            assert!(spec.timestamp.is_none(), "kcat cannot set a timestamp");
            input.extend(unhex(spec.key.as_deref().expect("kcat always sends a key")));
            input.push(KEY_DELIMITER);
            input.extend(unhex(
                spec.value.as_deref().expect("kcat always sends a value"),
            ));
            input.push(RECORD_DELIMITER);
        }
        let mut command = args(&[
            "-P", "-b", bootstrap, "-t", topic, "-K", "\\x1f", "-D", "\\x1e",
        ]);
        command.extend(["-p".into(), partition.to_string()]);
        command.extend(["-z".into(), request["compression"].as_str().unwrap().into()]);
        let acks = match request["acks"].as_str().unwrap() {
            "all" => "-1",
            acks => acks,
        };
        command.extend(["-X".into(), format!("acks={acks}")]);
        let idempotence = request["idempotence"].as_bool().unwrap();
        command.extend(["-X".into(), format!("enable.idempotence={idempotence}")]);
        for (name, value) in headers {
            let value = String::from_utf8(unhex(value.as_deref().expect("a header value")))
                .expect("kcat header values are text");
            command.extend(["-H".into(), format!("{name}={value}")]);
        }
        kcat_ok(&command, &input);
    }
    // kcat reports no offsets.
    json!({ "offsets": vec![Value::Null; specs.len()] })
}

/// Reads each partition from `offset` to its end (`-e`).
fn consume(bootstrap: &str, request: &Value) -> Value {
    let topic = request["topic"].as_str().expect("topic");
    let offset = match &request["offset"] {
        Value::String(s) => s.clone(),
        n => n.to_string(),
    };
    let mut records = Vec::new();
    for partition in field::<Vec<i32>>(request, "partitions") {
        records.extend(read(bootstrap, topic, partition, &offset, &[]).0);
    }
    json!({ "records": records })
}

/// Consumes one partition from `offset` to its end; returns the records, and
/// stderr when kcat failed.
fn read(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    offset: &str,
    extra: &[&str],
) -> (Vec<Consumed>, Option<String>) {
    let mut command = args(&["-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", FORMAT]);
    command.extend([
        "-p".into(),
        partition.to_string(),
        "-o".into(),
        offset.into(),
    ]);
    command.extend(args(extra));
    let (ok, stdout, stderr) = kcat(&command, b"");
    (parse(&stdout), (!ok).then_some(stderr))
}

/// Parses `FORMAT`: partition, offset, timestamp, key length, value length,
/// the key and value bytes, then the headers as `name=value,...`.
fn parse(mut out: &[u8]) -> Vec<Consumed> {
    let mut records = Vec::new();
    while !out.is_empty() {
        let mut numbers = [0i64; 5];
        for n in &mut numbers {
            let space = out.iter().position(|&b| b == b' ').expect("a number field");
            *n = std::str::from_utf8(&out[..space])
                .unwrap()
                .parse()
                .expect("a number");
            out = &out[space + 1..];
        }
        let [partition, offset, timestamp, key_len, value_len] = numbers;
        let mut take = |len: i64| {
            let len = len.max(0) as usize;
            let bytes = &out[..len];
            out = &out[len..];
            bytes
        };
        let key = take(key_len);
        let key = (key_len >= 0).then(|| hex(key));
        let value = take(value_len);
        let value = (value_len >= 0).then(|| hex(value));
        assert_eq!(out[0], b' ', "the separator before the headers");
        let end = out
            .iter()
            .position(|&b| b == b'\n')
            .expect("a record ends the line");
        let headers = std::str::from_utf8(&out[1..end])
            .expect("headers are text")
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| {
                let (name, value) = h.split_once('=').expect("name=value");
                (name.to_string(), Some(hex(value.as_bytes())))
            })
            .collect();
        out = &out[end + 1..];
        records.push(Consumed {
            partition: partition as i32,
            offset,
            timestamp,
            key,
            value,
            headers,
        });
    }
    records
}

fn offsets_for_times(bootstrap: &str, request: &Value) -> Value {
    let topic = request["topic"].as_str().expect("topic");
    let partition = request["partition"].as_i64().expect("partition");
    let offsets: Vec<Option<i64>> = field::<Vec<i64>>(request, "timestamps")
        .into_iter()
        .map(|ts| {
            // "<topic> [<partition>] offset <n>"; -1 when no record is that late.
            let out = kcat_ok(
                &args(&[
                    "-Q",
                    "-b",
                    bootstrap,
                    "-t",
                    &format!("{topic}:{partition}:{ts}"),
                ]),
                b"",
            );
            let out = String::from_utf8(out).unwrap();
            let offset: i64 = out
                .trim()
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("kcat -Q printed {out:?}"));
            (offset >= 0).then_some(offset)
        })
        .collect();
    json!({ "offsets": offsets })
}

/// `-o beginning` and `-o -1` (one before the end); kcat cannot seek a
/// running consumer to the end, so `after_end` is null.
fn seek(bootstrap: &str, request: &Value) -> Value {
    let topic = request["topic"].as_str().expect("topic");
    let partition = request["partition"].as_i64().expect("partition") as i32;
    let first = |offset: &str| {
        let (records, error) = read(bootstrap, topic, partition, offset, &["-c", "1"]);
        assert!(error.is_none(), "kcat -o {offset}: {error:?}");
        records.first().map(|r| r.offset)
    };
    let (low, high) = crate::wire::offsets(bootstrap, topic, partition);
    json!({
        "low": low,
        "high": high,
        "last": first("-1"),
        "after_beginning": first("beginning"),
        "after_end": Value::Null,
    })
}

/// Reads from an offset below the log start under librdkafka's
/// `auto.offset.reset` (kcat shows no position, so no `latest`).
fn out_of_range(bootstrap: &str, request: &Value) -> Value {
    let topic = request["topic"].as_str().expect("topic");
    let partition = request["partition"].as_i64().expect("partition") as i32;
    let offset = request["offset"].to_string();
    match request["reset"].as_str().unwrap() {
        "earliest" => {
            let (records, error) = read(
                bootstrap,
                topic,
                partition,
                &offset,
                &["-X", "auto.offset.reset=earliest"],
            );
            assert!(error.is_none(), "kcat: {error:?}");
            json!({ "records": records })
        }
        "none" => {
            let (records, error) = read(
                bootstrap,
                topic,
                partition,
                &offset,
                &["-X", "auto.offset.reset=error"],
            );
            assert!(
                records.is_empty(),
                "records instead of an error: {records:?}"
            );
            json!({ "error": error.expect("kcat fails on the out-of-range offset") })
        }
        reset => panic!("kcat has no {reset} check"),
    }
}
