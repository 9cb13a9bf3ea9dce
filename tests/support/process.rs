//! Running a command as a real process with some input on its stdin, or
//! with its log collected.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a process wrote to stderr so far, a line at a time.
pub type Log = Arc<Mutex<String>>;

/// A directory where tests leave what they would remove, when set: every
/// [`spawn_logged`] process's log (`<test>-<n>-<program>.log`), and the
/// files of the tests that keep theirs (the crash tests): for a failure
/// that does not come back, whose processes' logs would go with the test.
pub const KEEP_VARIABLE: &str = "STRATA_TEST_KEEP";

/// The directory [`KEEP_VARIABLE`] names, made if missing; None if unset.
pub fn kept_in() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(KEEP_VARIABLE)?);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("{KEEP_VARIABLE}={}: {e}", dir.display()));
    Some(dir)
}

/// The running test's name, as a file name (`crash-a_test`).
pub fn test_name() -> String {
    let thread = std::thread::current();
    thread.name().unwrap_or("test").replace("::", "-")
}

/// Starts `command` with its stdout dropped and its stderr collected, line
/// by line, into the returned log (read while it runs, shown when a test
/// fails), and into a file in [`KEEP_VARIABLE`]'s directory if it is set.
pub fn spawn_logged(command: &mut Command) -> (Child, Log) {
    let mut copy = kept_in().map(|dir| {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let program = Path::new(command.get_program()).file_name();
        let program = program.unwrap_or_default().to_string_lossy();
        let path = dir.join(format!("{}-{n:03}-{program}.log", test_name()));
        let file = std::fs::File::create(&path);
        file.unwrap_or_else(|e| panic!("{} cannot be written: {e}", path.display()))
    });
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
            if let Some(file) = &mut copy {
                let _ = writeln!(file, "{line}");
            }
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
