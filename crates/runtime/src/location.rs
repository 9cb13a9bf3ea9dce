//! [`Location`]: where an app's log and state are, embedded or remote.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::layout;
use strata_client::{ClientConfig, ClientSecurity};

/// Where an app's log and state are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The app opens the log directory itself; state under `state_dir`.
    Embedded {
        data_dir: PathBuf,
        state_dir: PathBuf,
    },
    /// Through the client; state under `state_dir`.
    Remote {
        bootstrap: String,
        state_dir: PathBuf,
        /// How every connection to the broker is secured.
        security: ClientSecurity,
        /// Whether fetched batches' CRCs are checked (Kafka's
        /// `check.crcs`; see [`ClientConfig::check_crcs`]).
        check_crcs: bool,
    },
}

impl Location {
    /// Embedded, with the state kept inside the data directory
    /// (`<data>/apps/<app>`; the log ignores directories it did not make).
    pub fn embedded(data_dir: &Path, app: &str) -> Self {
        Self::Embedded {
            data_dir: data_dir.to_path_buf(),
            state_dir: layout::embedded_state_dir(data_dir, app),
        }
    }

    /// Remote, through `bootstrap`, with plaintext connections and
    /// fetched batches' CRCs checked; state under `state_dir`.
    pub fn remote(bootstrap: &str, state_dir: &Path) -> Self {
        Self::Remote {
            bootstrap: bootstrap.to_string(),
            state_dir: state_dir.to_path_buf(),
            security: ClientSecurity::default(),
            check_crcs: true,
        }
    }

    /// The client settings of a remote location; None when embedded.
    pub fn client_config(&self) -> Option<ClientConfig> {
        let Self::Remote {
            bootstrap,
            security,
            check_crcs,
            ..
        } = self
        else {
            return None;
        };
        let mut config = ClientConfig::new(bootstrap);
        config.security = security.clone();
        config.check_crcs = *check_crcs;
        Some(config)
    }

    pub fn state_dir(&self) -> &Path {
        match self {
            Self::Embedded { state_dir, .. } | Self::Remote { state_dir, .. } => state_dir,
        }
    }

    /// The address an app run with `serve` is serving the Kafka protocol
    /// on, while it runs (with port 0, the port the system picked): read
    /// from `<state_dir>/serving`.
    pub fn serving_addr(&self) -> Option<SocketAddr> {
        // A file left by a killed run names nothing: the app must hold its
        // run lock.
        if !layout::is_locked(&layout::running_lock(self.state_dir())) {
            return None;
        }
        let text = std::fs::read_to_string(layout::serving_file(self.state_dir())).ok()?;
        text.trim().parse().ok()
    }
}
