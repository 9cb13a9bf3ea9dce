//! Versions of an app's derived state. The version the app runs is `live`;
//! `replay --version NAME` runs the processors (a new build, after a bug
//! fix) into a version of their own: state under `versions/NAME` of the
//! app's state directory, derived topics named `<topic>.NAME` in the log.
//! External inputs are shared. `promote NAME` makes a version live; the one
//! it replaces stays as it was, so promoting it back rolls back.
//!
//! The app's first version is `base`: state directly in the app's state
//! directory, derived topics under their own names. Which version is live
//! is kept in `versions.json` there (absent: `base`), replaced atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::RuntimeError;
use super::layout;
use super::location::Location;
use super::task::StartAt;
use super::topology::App;

/// What the commands call the version the app runs.
pub const LIVE: &str = "live";
/// The app's first version.
pub const BASE: &str = "base";

/// One version: where its state is and how its derived topics are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub name: String,
    pub state_dir: PathBuf,
    /// Appended to each derived topic's name (empty for `base`).
    pub topic_suffix: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    live: String,
    /// Every version but `base`, with the `--from` of its replay.
    versions: BTreeMap<String, String>,
}

impl Default for Manifest {
    fn default() -> Self {
        Self {
            live: BASE.to_string(),
            versions: BTreeMap::new(),
        }
    }
}

/// The versions of one app, as recorded in its state directory.
pub struct Versions {
    root: PathBuf,
    manifest: Manifest,
}

impl Versions {
    /// Reads the record of versions under `root` (the app's state directory).
    pub fn load(root: &Path) -> Result<Self, RuntimeError> {
        let path = layout::versions_manifest(root);
        let manifest = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| RuntimeError::BadFile {
                path: path.clone(),
                reason: e.to_string(),
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
            Err(error) => {
                return Err(RuntimeError::Io {
                    context: format!("reading {}", path.display()),
                    error,
                });
            }
        };
        Ok(Self {
            root: root.to_path_buf(),
            manifest,
        })
    }

    /// The name of the live version.
    pub fn live_name(&self) -> &str {
        &self.manifest.live
    }

    /// Every version's name, `base` first.
    pub fn names(&self) -> Vec<String> {
        std::iter::once(BASE.to_string())
            .chain(self.manifest.versions.keys().cloned())
            .collect()
    }

    /// A version by name (`live` for the live one).
    pub fn get(&self, name: &str) -> Result<Version, RuntimeError> {
        let name = if name == LIVE {
            self.manifest.live.as_str()
        } else {
            name
        };
        if name != BASE && !self.manifest.versions.contains_key(name) {
            return Err(RuntimeError::UnknownVersion {
                name: name.to_string(),
                known: self.names().join(", "),
            });
        }
        Ok(self.version(name))
    }

    fn version(&self, name: &str) -> Version {
        if name == BASE {
            Version {
                name: BASE.to_string(),
                state_dir: self.root.clone(),
                topic_suffix: String::new(),
            }
        } else {
            Version {
                name: name.to_string(),
                state_dir: layout::version_dir(&self.root, name),
                topic_suffix: format!(".{name}"),
            }
        }
    }

    /// The version a replay runs into: made on its first replay (named
    /// with letters, digits, '-' and '_'; not the live one), resumed after.
    /// `from` must be what its first replay was given.
    pub fn for_replay(&mut self, name: &str, from: &str) -> Result<Version, RuntimeError> {
        if name == LIVE || name == self.manifest.live {
            return Err(RuntimeError::Config(format!(
                "{name:?} is the live version; replay into a version of its own (e.g. --version fix-1) and promote it when it is right"
            )));
        }
        if name == BASE {
            return Err(RuntimeError::Config(
                "\"base\" is the app's first version; replay into a new name".into(),
            ));
        }
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(RuntimeError::Config(format!(
                "version name {name:?}: use up to 64 letters, digits, '-' and '_'"
            )));
        }
        match self.manifest.versions.get(name) {
            Some(first) if first != from => Err(RuntimeError::Config(format!(
                "version {name:?} was replayed --from {first}; it resumes from where it stopped (give --from {first}, or replay into a new name)"
            ))),
            Some(_) => Ok(self.version(name)),
            None => {
                self.manifest
                    .versions
                    .insert(name.to_string(), from.to_string());
                self.save()?;
                Ok(self.version(name))
            }
        }
    }

    /// Makes `name` live; returns the version it replaced.
    pub fn promote(&mut self, name: &str) -> Result<Version, RuntimeError> {
        let next = self.get(name)?;
        let previous = self.get(LIVE)?;
        self.manifest.live = next.name.clone();
        self.save()?;
        Ok(previous)
    }

    /// Replaces the record: written aside, synced, renamed over.
    fn save(&self) -> Result<(), RuntimeError> {
        let io = |context: String| move |error| RuntimeError::Io { context, error };
        std::fs::create_dir_all(&self.root)
            .map_err(io(format!("creating {}", self.root.display())))?;
        let path = layout::versions_manifest(&self.root);
        let partial = layout::beside(&path, ".partial");
        let bytes = serde_json::to_vec_pretty(&self.manifest).expect("plain data");
        Ok(strata_log::storage::Disk::os().replace_durably(&path, &partial, &bytes)?)
    }
}

/// Parses a replay's `--from`: `earliest`, an offset, a timestamp in ms
/// with an `ms` suffix (`1700000000000ms`), or an RFC 3339 date and time as
/// `consume --from` takes it (`2026-11-30T12:00:00Z`; with no zone, UTC).
pub fn parse_start(from: &str) -> Result<StartAt, RuntimeError> {
    let bad = || {
        RuntimeError::Config(format!(
            "--from {from:?}: give earliest, an offset (12345), a timestamp in ms (1700000000000ms) or a UTC time (2026-11-30T12:00:00Z)"
        ))
    };
    if from == "earliest" {
        return Ok(StartAt::Earliest);
    }
    if let Ok(offset) = from.parse::<i64>() {
        return if offset >= 0 {
            Ok(StartAt::Offset(offset))
        } else {
            Err(bad())
        };
    }
    if let Some(ms) = from.strip_suffix("ms") {
        return ms.parse::<i64>().map(StartAt::Timestamp).map_err(|_| bad());
    }
    // RFC 3339, UTC when no zone is given.
    let zoned =
        if from.ends_with(['Z', 'z']) || from.get(19..).is_some_and(|z| z.contains(['+', '-'])) {
            from.to_string()
        } else {
            format!("{from}Z")
        };
    strata_record::time::parse_rfc3339(&zoned)
        .map(StartAt::Timestamp)
        .ok_or_else(bad)
}

impl App {
    /// The name of the version the app runs as (see [`App::as_version`]).
    pub(crate) fn version_name(&self) -> &str {
        self.topic_suffix.strip_prefix('.').unwrap_or(BASE)
    }

    /// The app as it runs as `version`: its derived topics renamed and its
    /// state in the version's directory.
    pub fn as_version(&self, location: &Location, version: &Version) -> (App, Location) {
        let mut app = self.clone();
        app.topic_suffix = version.topic_suffix.clone();
        let mut location = location.clone();
        match &mut location {
            Location::Embedded { state_dir, .. } | Location::Remote { state_dir, .. } => {
                *state_dir = version.state_dir.clone();
            }
        }
        (app, location)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_made_promoted_and_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut versions = Versions::load(dir.path()).unwrap();
        assert_eq!(versions.get(LIVE).unwrap().name, BASE);
        assert_eq!(versions.get(LIVE).unwrap().state_dir, dir.path());
        assert!(versions.for_replay("live", "earliest").is_err());
        assert!(versions.for_replay("base", "earliest").is_err());
        assert!(versions.for_replay("v.2", "earliest").is_err());
        let v2 = versions.for_replay("v2", "earliest").unwrap();
        assert_eq!(v2.topic_suffix, ".v2");
        assert_eq!(v2.state_dir, dir.path().join("versions/v2"));
        assert!(versions.for_replay("v2", "100").is_err(), "another --from");
        assert!(versions.get("v3").is_err());

        let replaced = Versions::load(dir.path()).unwrap().promote("v2").unwrap();
        assert_eq!(replaced.name, BASE);
        let mut versions = Versions::load(dir.path()).unwrap();
        assert_eq!(versions.get(LIVE).unwrap(), v2);
        assert!(versions.for_replay("v2", "earliest").is_err(), "v2 is live");
        assert_eq!(versions.promote(BASE).unwrap(), v2);
        assert_eq!(Versions::load(dir.path()).unwrap().live_name(), BASE);
    }

    #[test]
    fn replay_starts_parse() {
        assert_eq!(parse_start("earliest").unwrap(), StartAt::Earliest);
        assert_eq!(parse_start("42").unwrap(), StartAt::Offset(42));
        assert_eq!(
            parse_start("1700000000000ms").unwrap(),
            StartAt::Timestamp(1_700_000_000_000)
        );
        assert_eq!(
            parse_start("2023-11-14T22:13:20Z").unwrap(),
            StartAt::Timestamp(1_700_000_000_000)
        );
        assert_eq!(
            parse_start("1970-01-01T00:00:00").unwrap(),
            StartAt::Timestamp(0)
        );
        for bad in ["-1", "yesterday", "2023-13-01T00:00:00Z", "12ms3"] {
            assert!(parse_start(bad).is_err(), "{bad}");
        }
    }
}
