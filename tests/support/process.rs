//! Running a command as a real process with some input on its stdin.

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

/// What a process wrote to stderr so far, a line at a time.
pub type Log = Arc<Mutex<String>>;

/// Starts `command` with its stdout dropped and its stderr collected, line
/// by line, into the returned log (read while it runs, shown when a test
/// fails).
pub fn spawn_logged(command: &mut Command) -> (Child, Log) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{:?} starts: {e}", command.get_program()));
    let log = Log::default();
    let stderr = child.stderr.take().expect("stderr is piped");
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let mut log = lines.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    (child, log)
}

/// Runs `command` with `input` on its stdin (then closed), capturing stdout
/// and stderr. Panics, naming the program, if it cannot start.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{:?} starts: {e}", command.get_program()));
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    // Written beside the reading of its output: a program that answers
    // before it has read all of its input cannot fill its pipes and stall.
    // One that exits without reading all of it closes the pipe: what it
    // answered is in the output all the same.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("the process is waited for");
    writer.join().expect("the input is written");
    output
}

/// Runs the `strata` CLI to success; its stdout.
pub fn strata(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "strata {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Appends `key=value` lines to `topic` through the broker at `addr`
/// (`strata produce --key-separator =`).
pub fn produce_keyed(addr: &str, topic: &str, lines: &[String]) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
    command.args([
        "produce",
        topic,
        "--key-separator",
        "=",
        "--bootstrap",
        addr,
    ]);
    let output = run_with_input(&mut command, lines.join("\n").as_bytes());
    assert!(output.status.success(), "{output:?}");
}

/// The exit status of `timeout(1)` when it had to stop the command.
pub const TIMED_OUT: i32 = 124;
