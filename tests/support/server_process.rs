//! `strata serve` as a real process, for tests that kill or signal it.

use std::sync::{Mutex, OnceLock, mpsc};

/// How long a started broker has to say where it listens.
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A `strata serve` process on a free loopback port, killed on drop.
pub struct ServerProcess {
    pub child: std::process::Child,
    pub addr: String,
    /// The metrics addresses the broker prints (when it serves metrics),
    /// and the first one once read.
    metrics_lines: Mutex<mpsc::Receiver<String>>,
    metrics: OnceLock<String>,
    /// Likewise the schema registry's URL (when it serves one).
    registry_lines: Mutex<mpsc::Receiver<String>>,
    registry: OnceLock<String>,
    /// The `strata serve` arguments it was started with, given again at
    /// every restart.
    args: Vec<std::ffi::OsString>,
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
        Self::start_listening(binary, data_dir, "127.0.0.1:0", args, stderr)
    }

    /// Like `start_with`, with `envs` set in the broker's environment (and
    /// not given again at a restart).
    pub fn start_with_env(binary: &str, data_dir: &std::path::Path, envs: &[(&str, &str)]) -> Self {
        Self::spawn(
            binary,
            data_dir,
            "127.0.0.1:0",
            &[],
            envs,
            std::process::Stdio::null(),
        )
    }

    /// Like `start_with_env`, with more `strata serve` arguments (given
    /// again at a restart, unlike `envs`).
    pub fn start_with_args_and_env(
        binary: &str,
        data_dir: &std::path::Path,
        args: &[&std::ffi::OsStr],
        envs: &[(&str, &str)],
    ) -> Self {
        let stderr = std::process::Stdio::null();
        Self::spawn(binary, data_dir, "127.0.0.1:0", args, envs, stderr)
    }

    /// Like `start_with`, listening on `listen` (an address a killed broker
    /// had, to start it again where its clients look for it).
    pub fn start_listening(
        binary: &str,
        data_dir: &std::path::Path,
        listen: &str,
        args: &[&std::ffi::OsStr],
        stderr: std::process::Stdio,
    ) -> Self {
        Self::spawn(binary, data_dir, listen, args, &[], stderr)
    }

    fn spawn(
        binary: &str,
        data_dir: &std::path::Path,
        listen: &str,
        args: &[&std::ffi::OsStr],
        envs: &[(&str, &str)],
        stderr: std::process::Stdio,
    ) -> Self {
        let mut child = std::process::Command::new(binary)
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(data_dir)
            .args(args)
            .envs(envs.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("strata serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (found, listening) = mpsc::channel();
        let (metrics_found, metrics_lines) = mpsc::channel();
        let (registry_found, registry_lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(rest) = line.strip_prefix("strata listening on ") {
                    // `ADDR (PROTOCOL)`: the first listener's address.
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(addr.to_string());
                }
                if let Some(url) = line.strip_prefix("metrics on http://") {
                    let addr = url.trim().trim_end_matches("/metrics");
                    let _ = metrics_found.send(addr.to_string());
                }
                if let Some(url) = line.strip_prefix("schema registry on ") {
                    let _ = registry_found.send(url.trim().trim_end_matches('/').to_string());
                }
            }
        });
        let addr = match listening.recv_timeout(START_WAIT) {
            Ok(addr) => addr,
            Err(_) => {
                let status = child.try_wait();
                let _ = child.kill();
                panic!("strata serve never said where it listens (exit: {status:?})");
            }
        };
        Self {
            child,
            addr,
            metrics_lines: Mutex::new(metrics_lines),
            metrics: OnceLock::new(),
            registry_lines: Mutex::new(registry_lines),
            registry: OnceLock::new(),
            args: args.iter().map(|a| a.to_os_string()).collect(),
        }
    }

    /// The address the broker serves metrics on (started with `--metrics`
    /// or a config's `metrics` key; port 0 allowed).
    pub fn metrics_addr(&self) -> &str {
        self.metrics.get_or_init(|| {
            let lines = self.metrics_lines.lock().unwrap();
            lines
                .recv_timeout(START_WAIT)
                .expect("strata serve never said where it serves metrics")
        })
    }

    /// The URL of the schema registry the broker serves (started with
    /// `--schema-registry`), without a trailing slash.
    pub fn schema_registry_url(&self) -> &str {
        self.registry.get_or_init(|| {
            let lines = self.registry_lines.lock().unwrap();
            lines
                .recv_timeout(START_WAIT)
                .expect("strata serve never said where it serves the schema registry")
        })
    }

    /// The body of `GET /metrics`.
    pub fn scrape_metrics(&self) -> String {
        let (status, body) = super::http::get(self.metrics_addr(), "/metrics");
        assert_eq!(status, 200, "metrics answered {body}");
        body
    }

    /// The broker's `VmRSS` and `VmHWM` (resident and peak resident
    /// memory), in bytes.
    pub fn memory_bytes(&self) -> (u64, u64) {
        memory_bytes_of(self.child.id())
    }

    /// How many file descriptors the broker holds open.
    pub fn open_files(&self) -> usize {
        open_files_of(self.child.id())
    }

    /// SIGKILLs the broker and starts it again on the same address and data
    /// directory, with the arguments it was first started with, waiting
    /// until it listens.
    pub fn kill_and_restart(&mut self, binary: &str, data_dir: &std::path::Path) {
        self.kill();
        self.restart(binary, data_dir);
    }

    /// SIGKILLs the broker and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a killed broker again on the same address and data
    /// directory, with the arguments it was first started with, waiting
    /// until it listens.
    pub fn restart(&mut self, binary: &str, data_dir: &std::path::Path) {
        self.child = std::process::Command::new(binary)
            .args(["serve", "--listen", &self.addr, "--data-dir"])
            .arg(data_dir)
            .args(&self.args)
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

/// Process `pid`'s `VmRSS` and `VmHWM` (resident and peak resident
/// memory), in bytes, from `/proc/<pid>/status`.
pub fn memory_bytes_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in process {pid}'s status"))
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `strata serve` on `dir/broker`, configured by `dir/strata.toml` holding
/// `config`.
pub fn start_configured(dir: &std::path::Path, config: &str) -> ServerProcess {
    let path = dir.join("strata.toml");
    std::fs::write(&path, config).unwrap();
    let args = [std::ffi::OsStr::new("--config"), path.as_os_str()];
    let strata = env!("CARGO_BIN_EXE_strata");
    ServerProcess::start_with(
        strata,
        &dir.join("broker"),
        &args,
        std::process::Stdio::null(),
    )
}

/// How many file descriptors process `pid` holds open (0 once it is gone).
pub fn open_files_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |entries| entries.count())
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
