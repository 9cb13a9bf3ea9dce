//! The broker's SCRAM credentials: per user and mechanism a salt, an
//! iteration count, StoredKey and ServerKey. Never a password: PLAIN
//! checks a password by deriving the user's SCRAM key from it.
//!
//! ```text
//! <data>/security/scram-credentials.json     the credentials (below)
//! <data>/security/scram-credentials.lock     flock held for each read-modify-write
//! <data>/security/.scram-credentials.json.tmp   a write in progress
//!
//! {"version": 1,
//!  "users": {"alice": {"SCRAM-SHA-512": {"salt": "<base64>", "iterations": 8192,
//!                                        "stored_key": "<base64>", "server_key": "<base64>"}}}}
//! ```
//!
//! Two processes edit the file: the broker (AlterUserScramCredentials) and
//! `strata users --data-dir` (with the broker running or not). Every change
//! is a read-modify-write under an exclusive `flock` on the lock file: the
//! file is read afresh under the lock, changed, and replaced whole and
//! durably (a temporary file, fsync, rename, directory fsync), so neither
//! loses the other's change and a reader never sees half a file. Readers
//! take no lock. A lookup checks the file's identity (inode, size,
//! modification time) against the copy in memory and reads it again when
//! it changed, so a user added offline works without a restart.
//!
//! A file that does not parse, or holds a credential that does not check
//! (wrong key length, iterations out of bounds), fails [`CredentialStore::open`]
//! naming the file; found later by a lookup, it is logged and the copy in
//! memory stays in use. A change never overwrites a file it cannot read.
//!
//! Thread-safety: `CredentialStore` is `Sync`; the copy in memory is behind
//! a mutex and handed out as an `Arc`, so a PBKDF2 runs outside it.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::fcntl::{Flock, FlockArg};

use strata_log::LogError;
use strata_log::storage::{Disk, OpenMode};
use strata_protocol::sasl::{Mechanism, SaslError, ScramCredential, USER_BYTES_MAX};

mod file;
#[cfg(test)]
mod tests;

use file::{decode, encode, read};

/// The directory of security state inside the data directory (no
/// partition directory can have this name: those end in `-<partition>`).
const FILE: &str = "scram-credentials.json";
const LOCK_FILE: &str = "scram-credentials.lock";
const TMP_FILE: &str = ".scram-credentials.json.tmp";
const FORMAT_VERSION: u32 = 1;
/// Most users with credentials.
pub const USERS_MAX: usize = 100_000;
/// Largest credentials file read: [`USERS_MAX`] users with both
/// mechanisms fit.
const FILE_BYTES_MAX: u64 = 256 << 20;

/// Why the credentials could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("{}: {reason}; repair the file or move it away (its users then have no credentials)", .path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    #[error(transparent)]
    Storage(#[from] LogError),
    #[error("invalid credential: {0}")]
    Invalid(#[from] SaslError),
    #[error("{USERS_MAX} users already have credentials, the most this broker keeps")]
    TooManyUsers,
}

/// What a listing shows of one user: mechanisms and iterations, no keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredentials {
    pub user: String,
    /// `(mechanism, iterations)`, SCRAM-SHA-256 first.
    pub mechanisms: Vec<(Mechanism, u32)>,
}

/// Every user's credentials, as the file holds them. Every credential in
/// it has been checked for its mechanism; no user has an empty set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    users: BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>,
}

impl Credentials {
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    pub fn contains_user(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }

    /// Sets `user`'s credential for a SCRAM `mechanism`, checked first.
    pub fn insert(
        &mut self,
        user: &str,
        mechanism: Mechanism,
        credential: ScramCredential,
    ) -> Result<(), CredentialError> {
        check_user(user)?;
        credential.check(mechanism)?;
        if !self.users.contains_key(user) && self.users.len() >= USERS_MAX {
            return Err(CredentialError::TooManyUsers);
        }
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(mechanism, credential);
        Ok(())
    }

    /// Removes `user`'s credential for `mechanism`; false if there was none.
    pub fn remove(&mut self, user: &str, mechanism: Mechanism) -> bool {
        let Some(mechanisms) = self.users.get_mut(user) else {
            return false;
        };
        let removed = mechanisms.remove(&mechanism).is_some();
        if mechanisms.is_empty() {
            self.users.remove(user);
        }
        removed
    }

    /// Removes every credential of `user`; returns their mechanisms.
    pub fn remove_user(&mut self, user: &str) -> Vec<Mechanism> {
        self.users
            .remove(user)
            .map(|mechanisms| mechanisms.into_keys().collect())
            .unwrap_or_default()
    }

    /// `user`'s mechanisms and iterations, if it has any credential.
    pub fn describe(&self, user: &str) -> Option<UserCredentials> {
        self.users.get(user).map(|mechanisms| UserCredentials {
            user: user.to_string(),
            mechanisms: mechanisms
                .iter()
                .map(|(mechanism, credential)| (*mechanism, credential.iterations))
                .collect(),
        })
    }

    /// Every user, by name.
    pub fn list(&self) -> Vec<UserCredentials> {
        self.users
            .keys()
            .filter_map(|user| self.describe(user))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// The credentials file of one data directory.
#[derive(Debug)]
pub struct CredentialStore {
    disk: Disk,
    dir: PathBuf,
    path: PathBuf,
    cached: Mutex<Cached>,
}

#[derive(Debug)]
struct Cached {
    credentials: Arc<Credentials>,
    /// The identity of the file the copy was read from; `None` when there
    /// was no file.
    stamp: Option<Stamp>,
}

/// What changes when the file is replaced: a rename brings a new inode,
/// so even a change within the clock's resolution is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified_ns: i128,
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            device: metadata.dev(),
            inode: metadata.ino(),
            len: metadata.len(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
        }
    }
}

impl CredentialStore {
    /// Opens the credentials of `data_dir`, creating `security/` if needed.
    /// A file that cannot be read is an error naming it.
    pub fn open(data_dir: &Path) -> Result<Self, CredentialError> {
        Self::open_on(&Disk::os(), data_dir)
    }

    /// [`open`](Self::open) on the given storage.
    pub fn open_on(disk: &Disk, data_dir: &Path) -> Result<Self, CredentialError> {
        let dir = super::security_dir(disk, data_dir)?;
        let path = dir.join(FILE);
        let (credentials, stamp) = read(&path)?;
        Ok(Self {
            disk: disk.clone(),
            dir,
            path,
            cached: Mutex::new(Cached {
                credentials: Arc::new(credentials),
                stamp,
            }),
        })
    }

    /// The credentials file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `user`'s credential for `mechanism`, from the file as it is now.
    pub fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.current().get(user, mechanism).cloned()
    }

    /// Whether `password` is `user`'s: checked against the user's
    /// SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one, in constant
    /// time. An unknown user costs the same PBKDF2 as a known one (with
    /// the default iterations) and is refused.
    pub fn verify_plain(&self, user: &str, password: &str) -> bool {
        let credentials = self.current();
        let found = Mechanism::SCRAM
            .into_iter()
            .find_map(|mechanism| Some((mechanism, credentials.get(user, mechanism)?)));
        match found {
            Some((mechanism, credential)) => credential.verify_password(mechanism, password),
            None => {
                let mechanism = Mechanism::ScramSha512;
                let stand_in = ScramCredential::stand_in(mechanism, user);
                let _ = std::hint::black_box(stand_in.verify_password(mechanism, password));
                false
            }
        }
    }

    /// Every user with a credential, by name.
    pub fn list(&self) -> Vec<UserCredentials> {
        self.current().list()
    }

    /// The credentials as the file holds them now.
    pub fn current(&self) -> Arc<Credentials> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::fs::metadata(&self.path).ok().map(|m| Stamp::of(&m));
        if now != cached.stamp {
            match read(&self.path) {
                Ok((credentials, stamp)) => {
                    *cached = Cached {
                        credentials: Arc::new(credentials),
                        stamp,
                    };
                }
                Err(error) => {
                    // Warned once per change of the file.
                    tracing::warn!(%error, "keeping the SCRAM credentials read before");
                    cached.stamp = now;
                }
            }
        }
        Arc::clone(&cached.credentials)
    }

    /// Sets `user`'s credential for a SCRAM `mechanism`.
    pub fn upsert(
        &self,
        user: &str,
        mechanism: Mechanism,
        credential: ScramCredential,
    ) -> Result<(), CredentialError> {
        self.modify(|credentials| credentials.insert(user, mechanism, credential))?
    }

    /// Removes `user`'s credential for `mechanism`, or all of its
    /// credentials; returns the mechanisms removed (none if it had none).
    pub fn delete(
        &self,
        user: &str,
        mechanism: Option<Mechanism>,
    ) -> Result<Vec<Mechanism>, CredentialError> {
        self.modify(|credentials| match mechanism {
            Some(mechanism) => {
                if credentials.remove(user, mechanism) {
                    vec![mechanism]
                } else {
                    Vec::new()
                }
            }
            None => credentials.remove_user(user),
        })
    }

    /// Runs `change` on the credentials as the file holds them, under the
    /// lock file's exclusive flock, and writes the result back durably if
    /// it differs. What `change` returns is returned.
    pub fn modify<R>(
        &self,
        change: impl FnOnce(&mut Credentials) -> R,
    ) -> Result<R, CredentialError> {
        let lock_path = self.dir.join(LOCK_FILE);
        let lock_file = self.disk.open(&lock_path, OpenMode::Create, "creating")?;
        let _lock = Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, errno)| {
            CredentialError::Io {
                context: format!("locking {}", lock_path.display()),
                error: std::io::Error::from(errno),
            }
        })?;
        let (before, stamp) = read(&self.path)?;
        let mut after = before.clone();
        let result = change(&mut after);
        let stamp = if after == before {
            stamp
        } else {
            let bytes = encode(&after);
            // What is written reads back as what was meant.
            assert_eq!(
                decode(&self.path, &bytes).ok().as_ref(),
                Some(&after),
                "the SCRAM credentials must read back as written"
            );
            self.disk
                .replace_durably(&self.path, &self.dir.join(TMP_FILE), &bytes)?;
            std::fs::metadata(&self.path).ok().map(|m| Stamp::of(&m))
        };
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Cached {
            credentials: Arc::new(after),
            stamp,
        };
        Ok(result)
    }
}

fn check_user(user: &str) -> Result<(), SaslError> {
    if user.is_empty() {
        return Err(SaslError::EmptyUser);
    }
    if user.len() > USER_BYTES_MAX {
        return Err(SaslError::TooLarge {
            what: "a user name",
            bytes: user.len(),
            limit: USER_BYTES_MAX,
        });
    }
    Ok(())
}
