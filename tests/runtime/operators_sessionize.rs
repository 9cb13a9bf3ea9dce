//! The sessionize example (session windows written with
//! `strata-operators`) as a real process on an embedded log: clicks of two
//! users, one user's clicks in two sessions more than 30 minutes apart;
//! each session written once, when the clicks' event time has moved 35
//! minutes (gap and grace) past its last click; a click too late for any
//! open session goes to `late-clicks`. Stopped and started again between
//! the clicks, it ends as one run would.

use crate::support;

use std::path::Path;
use std::process::Command;

use strata::log::now_ms;

const MINUTE: i64 = 60_000;

fn run_until_end(data: &Path) {
    let output = Command::new(support::example::example("sessionize"))
        .args(["--data-dir", data.to_str().unwrap(), "run", "--until-end"])
        .output()
        .expect("sessionize runs");
    assert!(
        output.status.success(),
        "sessionize failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn sessions_are_written_once_each_when_they_close() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A day ago: retention keeps it.
    let t0 = (now_ms() / MINUTE - 24 * 60) * MINUTE;
    let at = |m: i64| t0 + m * MINUTE;
    let first = [
        ("ada", Some("/"), at(0)),
        ("ada", Some("/a"), at(10)),
        ("bob", Some("/"), at(12)),
        ("ada", Some("/b"), at(25)),
    ];
    support::append_keyed(&data, "clicks", 1, &first);
    run_until_end(&data);
    let second = [
        // 31 minutes after ada's last click: a second session.
        ("ada", Some("/c"), at(56)),
        // Moves event time past both first sessions' close (35 minutes
        // after their last clicks, at 60 and 47).
        ("bob", Some("/d"), at(61)),
        // Too late: bob's first session closed at 47; alone, this click
        // would close at 40.
        ("bob", Some("/e"), at(5)),
        ("ada", Some("/f"), at(200)),
    ];
    support::append_keyed(&data, "clicks", 1, &second);
    run_until_end(&data);

    let session = |start: i64, end: i64, clicks: u64| {
        format!(
            r#"{{"start":{},"end":{},"clicks":{clicks}}}"#,
            at(start),
            at(end) + 1
        )
    };
    assert_eq!(
        support::read_text_sorted(&data, "user-sessions"),
        [
            ("ada".to_string(), session(0, 25, 3)),
            ("ada".to_string(), session(56, 56, 1)),
            ("bob".to_string(), session(12, 12, 1)),
            ("bob".to_string(), session(61, 61, 1)),
        ]
    );
    assert_eq!(
        support::read_text_sorted(&data, "late-clicks"),
        [("bob".to_string(), "/e".to_string())]
    );
}
