//! `strata serve` as a real process, for tests that kill or signal it.

/// A `strata serve` process on a free loopback port, killed on drop.
pub struct ServerProcess {
    pub child: std::process::Child,
    pub addr: String,
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
        Self {
            child,
            addr,
            args: args.iter().map(|a| a.to_os_string()).collect(),
        }
    }

    /// SIGKILLs the broker and starts it again on the same address and data
    /// directory, with the arguments it was first started with, waiting
    /// until it listens.
    pub fn kill_and_restart(&mut self, binary: &str, data_dir: &std::path::Path) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
