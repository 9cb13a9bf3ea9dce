//! The credentials file: JSON holding, per user and mechanism, the salt,
//! the iteration count and the stored and server keys in base64 (never a
//! password), under a format version; read with the identity of what was
//! read, and checked whole.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use super::{CredentialError, Credentials, FILE_BYTES_MAX, FORMAT_VERSION, Stamp};
use strata_protocol::sasl::{Mechanism, ScramCredential};

/// The file as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredFile {
    version: u32,
    users: BTreeMap<String, BTreeMap<String, StoredCredential>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredCredential {
    salt: String,
    iterations: u32,
    stored_key: String,
    server_key: String,
}

/// Reads the file at `path` with the identity of what was read (taken from
/// the open file, so the two agree); no file is no credentials.
pub(super) fn read(path: &Path) -> Result<(Credentials, Option<Stamp>), CredentialError> {
    let io = |error| CredentialError::Io {
        context: format!("reading {}", path.display()),
        error,
    };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Credentials::default(), None));
        }
        Err(error) => return Err(io(error)),
    };
    let metadata = file.metadata().map_err(io)?;
    if metadata.len() > FILE_BYTES_MAX {
        return Err(CredentialError::Corrupt {
            path: path.to_path_buf(),
            reason: format!(
                "{} bytes is more than the limit of {FILE_BYTES_MAX}",
                metadata.len()
            ),
        });
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    Ok((decode(path, &bytes)?, Some(Stamp::of(&metadata))))
}

pub(super) fn decode(path: &Path, bytes: &[u8]) -> Result<Credentials, CredentialError> {
    let corrupt = |reason: String| CredentialError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let stored: StoredFile = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if stored.version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "version {} is not {FORMAT_VERSION}, the one this strata reads",
            stored.version
        )));
    }
    let mut credentials = Credentials::default();
    for (user, mechanisms) in stored.users {
        for (name, stored) in mechanisms {
            let mechanism = name
                .parse::<Mechanism>()
                .ok()
                .filter(|m| m.is_scram())
                .ok_or_else(|| {
                    corrupt(format!("user {user:?}: {name:?} is not a SCRAM mechanism"))
                })?;
            let key = |field: &str, text: &str| {
                BASE64.decode(text).map_err(|_| {
                    corrupt(format!("user {user:?}, {mechanism}: {field} is not base64"))
                })
            };
            let credential = ScramCredential {
                salt: key("salt", &stored.salt)?,
                iterations: stored.iterations,
                stored_key: key("stored_key", &stored.stored_key)?,
                server_key: key("server_key", &stored.server_key)?,
            };
            credentials
                .insert(&user, mechanism, credential)
                .map_err(|e| corrupt(format!("user {user:?}, {mechanism}: {e}")))?;
        }
    }
    Ok(credentials)
}

pub(super) fn encode(credentials: &Credentials) -> Vec<u8> {
    let stored = StoredFile {
        version: FORMAT_VERSION,
        users: credentials
            .users
            .iter()
            .map(|(user, mechanisms)| {
                let mechanisms = mechanisms
                    .iter()
                    .map(|(mechanism, credential)| {
                        (
                            mechanism.name().to_string(),
                            StoredCredential {
                                salt: BASE64.encode(&credential.salt),
                                iterations: credential.iterations,
                                stored_key: BASE64.encode(&credential.stored_key),
                                server_key: BASE64.encode(&credential.server_key),
                            },
                        )
                    })
                    .collect();
                (user.clone(), mechanisms)
            })
            .collect(),
    };
    serde_json::to_vec_pretty(&stored).expect("credentials serialize")
}
