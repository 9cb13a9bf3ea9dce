//! The web console in a real browser: headless Chromium (Debian's
//! `chromium`, installed by `make deps`) driven through WebDriver
//! (`chromedriver`) by Selenium in the compatibility venv, running
//! `console_driver.py`. The driver prints one line per step it passed;
//! the test reads them as they come and changes what the app does in
//! between, so the page is watched while its figures move.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

/// How long the driver may take to pass a step (its own limit per step
/// is 120 s; this adds the browser's start).
const STEP_LIMIT: Duration = Duration::from_secs(180);

/// A running `console_driver.py`.
pub struct ConsoleDriver {
    child: Child,
    steps: Receiver<String>,
    passed: Vec<String>,
}

impl ConsoleDriver {
    /// Starts the driver: `args` are its mode, the console's URL and what
    /// the mode takes (see console_driver.py).
    pub fn start(args: &[&str]) -> Self {
        for program in ["chromium", "chromedriver"] {
            assert!(
                which(program),
                "{program} is not installed: run `make deps` (Debian's chromium and chromium-driver)"
            );
        }
        let python = super::mock_cluster::venv_dir().join("bin/python3");
        assert!(
            python.exists(),
            "no Python venv at {} (set STRATA_COMPAT_VENV): run `make deps`",
            python.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/console_driver.py");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the console driver starts");
        let stdout = child.stdout.take().expect("piped");
        let (send, steps) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            steps,
            passed: Vec::new(),
        }
    }

    /// Waits for the step `name`; its line's words after the name.
    pub fn passed(&mut self, name: &str) -> Vec<String> {
        loop {
            match self.steps.recv_timeout(STEP_LIMIT) {
                Ok(line) => {
                    eprintln!("console driver: {line}");
                    self.passed.push(line.clone());
                    let mut words = line.split(' ').map(str::to_string);
                    if words.next().as_deref() == Some(name) {
                        return words.collect();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "the console driver did not pass {name} in time; passed {:?}",
                        self.passed
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().expect("the driver ends");
                    panic!(
                        "the console driver ended ({status}) before {name}; passed {:?} (its stderr says why)",
                        self.passed
                    )
                }
            }
        }
    }

    /// Waits for the driver's last step and its exit.
    pub fn finish(mut self) {
        self.passed("ok");
        let status = self.child.wait().expect("the driver ends");
        assert!(status.success(), "the console driver failed: {status}");
    }
}

impl Drop for ConsoleDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
