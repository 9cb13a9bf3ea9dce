//! `strata serve` with one listener of each security protocol, TLS
//! material made for the test, and SCRAM users in its data directory.
//!
//! Listeners: `PLAINTEXT` (loopback, open), `SSL` (client certificates
//! requested: a client with one is `User:<its subject>`), `SASL_PLAINTEXT`
//! and `SASL_SSL`. The client-facing addresses are read off the broker's
//! start-up lines.
//!
//! [`SecuredBroker::start`] allows every authenticated principal every
//! operation (an ACL for `User:*`, made through the PLAINTEXT listener), for
//! tests about authentication; [`SecuredBroker::start_locked`] leaves the
//! secured listeners' default, deny, for tests about ACLs.
//!
//! The PLAINTEXT listener is the administrator's door: the broker trusts
//! its unauthenticated listeners (`trust_unauthenticated_listeners`), so
//! `User:ANONYMOUS` is allowed whatever no DENY refuses even once ACLs
//! exist. Kafka's default, without that trust, is tested in
//! `tests/security/acls.rs`.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use strata::broker::auth::CredentialStore;
use strata::sasl::{Mechanism, ScramCredential};

use super::certs::{Authority, Issued};

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const START_WAIT: Duration = Duration::from_secs(60);
/// The four listeners, and the metrics endpoint.
const ADDRESSES: usize = 5;

pub struct SecuredBroker {
    child: Child,
    pub dir: tempfile::TempDir,
    /// The CA that signed the broker's and the clients' certificates.
    pub ca: Authority,
    /// A CA nobody here trusts, and a server certificate it signed.
    pub stranger: Authority,
    /// Listener name (or `metrics`) → address.
    pub addrs: BTreeMap<String, String>,
    log: PathBuf,
}

impl SecuredBroker {
    /// Starts the broker with every authenticated principal allowed
    /// everything; `extra` goes into its strata.toml (keys before its first
    /// table at the top level).
    pub fn start(extra: &str) -> Self {
        let broker = Self::start_locked(extra);
        broker.allow_everything("User:*");
        broker
    }

    /// Allows `principal` (`User:*`: everyone) every operation on every
    /// resource.
    pub fn allow_everything(&self, principal: &str) {
        let output = Command::new(STRATA)
            .args(["acls", "add", "--bootstrap", self.addr("PLAINTEXT")])
            .args(["--allow-principal", principal, "--operation", "all"])
            .args([
                "--topic",
                "*",
                "--group",
                "*",
                "--transactional-id",
                "*",
                "--cluster",
            ])
            .output()
            .expect("strata acls runs");
        assert!(
            output.status.success(),
            "strata acls add: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the broker with no ACLs: its secured listeners deny whatever
    /// no ACL allows.
    pub fn start_locked(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = Authority::new(dir.path(), "ca");
        let stranger = Authority::new(dir.path(), "stranger-ca");
        let server = ca.server(dir.path(), "server");
        let (top_level, tables) = split_top_level(extra);
        let config = format!(
            "metrics = \"127.0.0.1:0\"\ntrust_unauthenticated_listeners = true\n{top_level}\n[[listeners]]\nprotocol = \"PLAINTEXT\"\nlisten = \"127.0.0.1:0\"\n\n\
             [[listeners]]\nprotocol = \"SSL\"\nlisten = \"127.0.0.1:0\"\n\n\
             [[listeners]]\nprotocol = \"SASL_PLAINTEXT\"\nlisten = \"127.0.0.1:0\"\n\n\
             [[listeners]]\nprotocol = \"SASL_SSL\"\nlisten = \"127.0.0.1:0\"\n\n\
             [tls]\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\nclient_auth = \"requested\"\n\n{tables}\n",
            server.cert, server.key, ca.pem
        );
        let config_path = dir.path().join("strata.toml");
        std::fs::write(&config_path, config).unwrap();
        let log = dir.path().join("broker.log");
        let mut child = Command::new(STRATA)
            .args(["serve", "--config"])
            .arg(&config_path)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("STRATA_LOG", "strata=debug")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("strata serve starts");
        let stdout = child.stdout.take().unwrap();
        let (found, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // `strata listening on ADDR (PROTOCOL)`
                if let Some(rest) = line.strip_prefix("strata listening on ") {
                    let mut parts = rest.split_whitespace();
                    let addr = parts.next().unwrap_or_default().to_string();
                    let name = parts
                        .next()
                        .unwrap_or_default()
                        .trim_matches(['(', ')', ':']);
                    let _ = found.send((name.to_string(), addr));
                }
                if let Some(url) = line.strip_prefix("metrics on http://") {
                    let addr = url.trim().trim_end_matches("/metrics").to_string();
                    let _ = found.send(("metrics".to_string(), addr));
                }
            }
        });
        let mut addrs = BTreeMap::new();
        while addrs.len() < ADDRESSES {
            match lines.recv_timeout(START_WAIT) {
                Ok((name, addr)) => {
                    addrs.insert(name, addr);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "strata serve did not open its listeners:\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
            }
        }
        Self {
            child,
            dir,
            ca,
            stranger,
            addrs,
            log,
        }
    }

    pub fn addr(&self, listener: &str) -> &str {
        &self.addrs[listener]
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Adds (or replaces) a SCRAM user for `mechanism`; the running broker
    /// sees it at the next login.
    pub fn add_user(&self, user: &str, password: &str, mechanism: Mechanism) {
        let store = CredentialStore::open(&self.data_dir()).unwrap();
        let credential = ScramCredential::generate(mechanism, password, 4096).unwrap();
        store.upsert(user, mechanism, credential).unwrap();
    }

    /// A client certificate signed by the broker's CA.
    pub fn client_cert(&self, name: &str, subject: &[(rcgen::DnType, &str)]) -> Issued {
        self.ca.client(self.dir.path(), name, subject)
    }

    /// What the broker logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// One counter or gauge from the metrics endpoint.
    pub fn metric(&self, name: &str) -> u64 {
        let (_, text) = super::http::get(&self.addrs["metrics"], "/metrics");
        text.lines()
            .find_map(|line| {
                line.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// The broker's resident memory, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<pid>/status");
        kib * 1024
    }
}

/// `extra` as its top-level keys (the lines before its first table) and
/// its tables: the keys must come before the file's own tables for TOML to
/// read them as top-level.
fn split_top_level(extra: &str) -> (&str, &str) {
    let mut at = 0;
    for line in extra.split_inclusive('\n') {
        if line.trim_start().starts_with('[') {
            break;
        }
        at += line.len();
    }
    extra.split_at(at)
}

impl Drop for SecuredBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- the broker's log ---\n{}", self.log());
        }
    }
}
