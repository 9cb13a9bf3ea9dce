//! librdkafka (through kcat) against `strata serve`: produce with every acks
//! setting, keys and codecs, then consume everything back, byte for byte.
//! kcat is installed by `make test` (scripts/install-deps.sh).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

fn kcat(args: &[&str], input: &str) -> String {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (make test installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn kcat_produces_with_every_acks_and_codec_and_consumes_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let b = server.addr.as_str();
    let mut expected = Vec::new();
    for (acks, codec) in [
        ("0", "none"),
        ("1", "gzip"),
        ("-1", "zstd"),
        ("1", "lz4"),
        ("-1", "snappy"),
    ] {
        let lines: Vec<String> = (0..3)
            .map(|i| format!("key-{acks}-{codec}:value {i} via {codec}"))
            .collect();
        let input = lines.join("\n") + "\n";
        kcat(
            &[
                "-P",
                "-b",
                b,
                "-t",
                "compat",
                "-K:",
                "-X",
                &format!("acks={acks}"),
                "-z",
                codec,
            ],
            &input,
        );
        expected.extend(lines);
    }
    let consumed = kcat(
        &[
            "-C",
            "-b",
            b,
            "-t",
            "compat",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %k:%s\n",
        ],
        "",
    );
    let expected: Vec<String> = expected
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{i} {l}"))
        .collect();
    let consumed: Vec<&str> = consumed.lines().collect();
    assert_eq!(consumed, expected);

    // Seek by offset.
    let tail = kcat(
        &[
            "-C", "-b", b, "-t", "compat", "-o", "13", "-e", "-q", "-f", "%o\n",
        ],
        "",
    );
    assert_eq!(tail.lines().collect::<Vec<_>>(), ["13", "14"]);
}
