//! Registry: what each request of Confluent's API does to the store, with
//! Confluent's rules: a schema identical to a live version of the subject
//! is that version; the same schema under another subject keeps its
//! global id; a new version is checked at the subject's level against the
//! subject's live versions; a permanent delete only follows a soft one.
//!
//! Every operation runs under the store's lock, so its checks and its
//! write see one state; operations block on the disk (callers on an async
//! runtime run them on its blocking pool).

use std::str::FromStr;
use std::sync::Arc;

use strata_log::{AppendSignals, LogManager};

use crate::compat::{self, Parsed};
use crate::error::RegistryError;
use crate::level::CompatibilityLevel;
use crate::schema::{Schema, SchemaType};
use crate::store::{Change, State, Store, StoreError, VersionEntry};

/// How deep references may nest (a schema referencing one that references
/// another…): deeper is refused as an invalid schema.
pub const REFERENCE_DEPTH_MAX: usize = 32;

/// A version as a request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    Latest,
    Number(i32),
}

impl FromStr for VersionSpec {
    type Err = RegistryError;

    /// `latest` (or `-1`, as Confluent allows), or a version from 1.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.eq_ignore_ascii_case("latest") || text == "-1" {
            return Ok(Self::Latest);
        }
        match text.parse::<i32>() {
            Ok(n) if n > 0 => Ok(Self::Number(n)),
            _ => Err(RegistryError::InvalidVersion(text.to_string())),
        }
    }
}

/// A subject's version and its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: Schema,
}

pub struct Registry {
    store: Store,
}

impl Registry {
    /// Opens the registry over the broker's log: the `_schemas` topic read
    /// (created if missing), its writes announced through `appends`.
    pub fn open(log: &LogManager, appends: Arc<AppendSignals>) -> Result<Self, StoreError> {
        Ok(Self {
            store: Store::open(log, appends)?,
        })
    }

    /// Registers `schema` under `subject` and returns its id.
    pub fn register(&self, subject: &str, schema: Schema) -> Result<i32, RegistryError> {
        let mut state = self.store.lock();
        let parsed = parse(&state, &schema)?;
        let known = state.id_of(&schema);
        let versions = state.versions(subject).cloned().unwrap_or_default();
        if let Some(id) = known
            && versions.values().any(|v| v.id == id && !v.deleted)
        {
            return Ok(id);
        }
        let earlier = live_parsed(&state, subject)?;
        let problems = compat::check(state.effective_level(subject), &parsed, &earlier);
        if !problems.is_empty() {
            return Err(RegistryError::Incompatible {
                subject: subject.to_string(),
                details: problems,
            });
        }
        let id = match known {
            Some(id) => id,
            // An id at i32::MAX (a record written into _schemas by hand)
            // leaves none above it: never give one twice.
            None if state.next_id() == i32::MAX || state.schema(state.next_id()).is_some() => {
                return Err(RegistryError::Store(StoreError::Missing(
                    "a free schema id (the ids in _schemas reach i32::MAX)".into(),
                )));
            }
            None => state.next_id(),
        };
        let version = versions.keys().next_back().map_or(1, |v| v + 1);
        let change = Change::Version {
            subject: subject.to_string(),
            version,
            id,
            schema,
            deleted: false,
        };
        self.store.commit(&mut state, vec![change])?;
        Ok(id)
    }

    /// The version of `subject` holding `schema` (soft-deleted ones too
    /// with `deleted`).
    pub fn lookup(
        &self,
        subject: &str,
        schema: &Schema,
        deleted: bool,
    ) -> Result<Registered, RegistryError> {
        let state = self.store.lock();
        let versions = visible(&state, subject, deleted)?;
        let id = state.id_of(schema).ok_or_else(not_found_schema)?;
        let (version, _) = (versions.iter().rev())
            .find(|(_, entry)| entry.id == id)
            .ok_or_else(not_found_schema)?;
        registered(&state, subject, *version, id)
    }

    /// The schema with global id `id`.
    pub fn schema(&self, id: i32) -> Result<Schema, RegistryError> {
        let state = self.store.lock();
        state
            .schema(id)
            .cloned()
            .ok_or_else(|| RegistryError::SchemaNotFound(id.to_string()))
    }

    /// A schema's text as asked: Protobuf as a base64 descriptor for
    /// `format=serialized`, otherwise as registered.
    pub fn formatted(
        &self,
        schema: &Schema,
        format: Option<&str>,
    ) -> Result<String, RegistryError> {
        if schema.schema_type != SchemaType::Protobuf || format != Some("serialized") {
            return Ok(schema.text.clone());
        }
        let state = self.store.lock();
        match parse(&state, schema)? {
            Parsed::Protobuf(proto) => Ok(proto.serialized()),
            _ => unreachable!("a Protobuf schema parses as Protobuf"),
        }
    }

    /// Every (subject, version) naming id `id`.
    pub fn versions_of_id(
        &self,
        id: i32,
        deleted: bool,
    ) -> Result<Vec<(String, i32)>, RegistryError> {
        let state = self.store.lock();
        if state.schema(id).is_none() {
            return Err(RegistryError::SchemaNotFound(id.to_string()));
        }
        let mut found = Vec::new();
        for (subject, versions) in state.subjects() {
            for (version, entry) in versions {
                if entry.id == id && (deleted || !entry.deleted) {
                    found.push((subject.clone(), *version));
                }
            }
        }
        Ok(found)
    }

    /// Subjects with a live version (or any version, with `deleted`).
    pub fn subjects(&self, deleted: bool) -> Vec<String> {
        let state = self.store.lock();
        (state.subjects())
            .filter(|(_, versions)| versions.values().any(|v| deleted || !v.deleted))
            .map(|(subject, _)| subject.clone())
            .collect()
    }

    /// A subject's version numbers.
    pub fn versions(&self, subject: &str, deleted: bool) -> Result<Vec<i32>, RegistryError> {
        let state = self.store.lock();
        Ok(visible(&state, subject, deleted)?
            .into_iter()
            .map(|(v, _)| v)
            .collect())
    }

    /// One version of a subject.
    pub fn version(
        &self,
        subject: &str,
        spec: VersionSpec,
        deleted: bool,
    ) -> Result<Registered, RegistryError> {
        let state = self.store.lock();
        let versions = visible(&state, subject, deleted)?;
        let (version, entry) = pick(&versions, subject, spec)?;
        registered(&state, subject, version, entry.id)
    }

    /// Ids of the schemas that reference a version of a subject.
    pub fn referenced_by(
        &self,
        subject: &str,
        spec: VersionSpec,
    ) -> Result<Vec<i32>, RegistryError> {
        let state = self.store.lock();
        let (version, _) = pick(&visible(&state, subject, false)?, subject, spec)?;
        Ok(referrers(&state, subject, version))
    }

    /// What keeps `schema` from being registered under `subject`: against
    /// one version, or (`spec: None`) against those the level checks.
    pub fn test_compatibility(
        &self,
        subject: &str,
        spec: Option<VersionSpec>,
        schema: &Schema,
    ) -> Result<Vec<String>, RegistryError> {
        let state = self.store.lock();
        let parsed = parse(&state, schema)?;
        let level = state.effective_level(subject);
        let earlier = match spec {
            None => live_parsed(&state, subject)?,
            Some(spec) => {
                let versions = match visible(&state, subject, false) {
                    // Nothing to be incompatible with (as Confluent
                    // answers a client testing against "latest" first).
                    Err(RegistryError::SubjectNotFound(_))
                        if matches!(spec, VersionSpec::Latest) =>
                    {
                        return Ok(Vec::new());
                    }
                    versions => versions?,
                };
                let (version, entry) = pick(&versions, subject, spec)?;
                let old = state.schema(entry.id).ok_or_else(not_found_schema)?;
                vec![(version, parse(&state, old)?)]
            }
        };
        Ok(compat::check(level, &parsed, &earlier))
    }

    /// The global level (BACKWARD unless set).
    pub fn global_level(&self) -> CompatibilityLevel {
        self.store.lock().global_level().unwrap_or_default()
    }

    /// A subject's own level; without one, the global level when
    /// `default_to_global`, else 40408.
    pub fn subject_level(
        &self,
        subject: &str,
        default_to_global: bool,
    ) -> Result<CompatibilityLevel, RegistryError> {
        let state = self.store.lock();
        match state.subject_level(subject) {
            Some(level) => Ok(level),
            None if default_to_global => Ok(state.global_level().unwrap_or_default()),
            None => Err(RegistryError::SubjectLevelNotConfigured(
                subject.to_string(),
            )),
        }
    }

    /// Sets (`Some`) or removes the level of a subject, or the global one
    /// (`subject: None`); returns the level before.
    pub fn set_level(
        &self,
        subject: Option<&str>,
        level: Option<CompatibilityLevel>,
    ) -> Result<Option<CompatibilityLevel>, RegistryError> {
        let mut state = self.store.lock();
        let before = match subject {
            Some(subject) => state.subject_level(subject),
            None => state.global_level(),
        };
        let change = Change::Level {
            subject: subject.map(str::to_string),
            level,
        };
        self.store.commit(&mut state, vec![change])?;
        Ok(before)
    }

    /// Deletes a subject: soft (its live versions marked deleted, their
    /// numbers returned), or `permanent` once soft-deleted (every version
    /// and the subject's level gone).
    pub fn delete_subject(
        &self,
        subject: &str,
        permanent: bool,
    ) -> Result<Vec<i32>, RegistryError> {
        let mut state = self.store.lock();
        let versions = (state.versions(subject).cloned())
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_string()))?;
        let live: Vec<i32> = (versions.iter())
            .filter(|(_, e)| !e.deleted)
            .map(|(v, _)| *v)
            .collect();
        let mut changes = Vec::new();
        if !permanent {
            if live.is_empty() {
                return Err(RegistryError::SubjectSoftDeleted(subject.to_string()));
            }
            for version in &live {
                refuse_if_referenced(&state, subject, *version)?;
                changes.push(soft_deleted(&state, subject, *version, versions[version])?);
            }
            self.store.commit(&mut state, changes)?;
            return Ok(live);
        }
        if !live.is_empty() {
            return Err(RegistryError::SubjectNotSoftDeleted(subject.to_string()));
        }
        for version in versions.keys() {
            let subject = subject.to_string();
            changes.push(Change::VersionGone {
                subject,
                version: *version,
            });
        }
        if state.subject_level(subject).is_some() {
            let subject = Some(subject.to_string());
            changes.push(Change::Level {
                subject,
                level: None,
            });
        }
        changes.push(Change::NextId(state.next_id()));
        self.store.commit(&mut state, changes)?;
        Ok(versions.keys().copied().collect())
    }

    /// Deletes one version: soft, or `permanent` once soft-deleted.
    pub fn delete_version(
        &self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<i32, RegistryError> {
        let mut state = self.store.lock();
        // A version by number may be soft-deleted already (40406 for a
        // second soft delete); "latest" is the latest live one, or for a
        // permanent delete the latest of all.
        let include_deleted = permanent || matches!(spec, VersionSpec::Number(_));
        let versions = visible(&state, subject, include_deleted)?;
        let (version, entry) = pick(&versions, subject, spec)?;
        let subject_name = subject.to_string();
        let changes = match (permanent, entry.deleted) {
            (false, true) => {
                return Err(RegistryError::VersionSoftDeleted {
                    subject: subject_name,
                    version,
                });
            }
            (true, false) => {
                return Err(RegistryError::VersionNotSoftDeleted {
                    subject: subject_name,
                    version,
                });
            }
            (false, false) => {
                refuse_if_referenced(&state, subject, version)?;
                vec![soft_deleted(&state, subject, version, entry)?]
            }
            (true, true) => vec![
                Change::VersionGone {
                    subject: subject_name,
                    version,
                },
                Change::NextId(state.next_id()),
            ],
        };
        self.store.commit(&mut state, changes)?;
        Ok(version)
    }
}

/// Ids of the live schemas (under a version not deleted) that reference
/// `subject` at `version`.
fn referrers(state: &State, subject: &str, version: i32) -> Vec<i32> {
    let mut ids: Vec<i32> = (state.subjects())
        .flat_map(|(_, versions)| versions.values().filter(|v| !v.deleted).map(|v| v.id))
        .filter(|id| {
            (state.schema(*id)).is_some_and(|s| {
                (s.references.iter()).any(|r| r.subject == subject && r.version == version)
            })
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// 42206 when live schemas reference `subject` at `version`: deleting it
/// would leave them unreadable (as Confluent refuses, soft or permanent).
/// A version soft-deleted already was checked when it was.
fn refuse_if_referenced(state: &State, subject: &str, version: i32) -> Result<(), RegistryError> {
    let referrers = referrers(state, subject, version);
    if referrers.is_empty() {
        return Ok(());
    }
    Err(RegistryError::ReferenceExists {
        subject: subject.to_string(),
        version,
        referrers,
    })
}

fn not_found_schema() -> RegistryError {
    RegistryError::SchemaNotFound("with these contents".into())
}

/// A subject's versions a request may see, oldest first; 40401 when
/// there are none.
fn visible(
    state: &State,
    subject: &str,
    deleted: bool,
) -> Result<Vec<(i32, VersionEntry)>, RegistryError> {
    let versions: Vec<(i32, VersionEntry)> = (state.versions(subject).into_iter())
        .flat_map(|versions| versions.iter())
        .filter(|(_, entry)| deleted || !entry.deleted)
        .map(|(v, e)| (*v, *e))
        .collect();
    if versions.is_empty() {
        return Err(RegistryError::SubjectNotFound(subject.to_string()));
    }
    Ok(versions)
}

/// The version `spec` names among `versions`; 40402 when it is not there.
fn pick(
    versions: &[(i32, VersionEntry)],
    subject: &str,
    spec: VersionSpec,
) -> Result<(i32, VersionEntry), RegistryError> {
    let found = match spec {
        VersionSpec::Latest => versions.last(),
        VersionSpec::Number(n) => versions.iter().find(|(v, _)| *v == n),
    };
    found
        .copied()
        .ok_or_else(|| RegistryError::VersionNotFound {
            subject: subject.to_string(),
            version: match spec {
                VersionSpec::Latest => "latest".into(),
                VersionSpec::Number(n) => n.to_string(),
            },
        })
}

fn registered(
    state: &State,
    subject: &str,
    version: i32,
    id: i32,
) -> Result<Registered, RegistryError> {
    let schema = state
        .schema(id)
        .cloned()
        .ok_or_else(|| RegistryError::SchemaNotFound(id.to_string()))?;
    Ok(Registered {
        subject: subject.to_string(),
        version,
        id,
        schema,
    })
}

/// The record that marks a version soft-deleted.
fn soft_deleted(
    state: &State,
    subject: &str,
    version: i32,
    entry: VersionEntry,
) -> Result<Change, RegistryError> {
    let schema = state
        .schema(entry.id)
        .cloned()
        .ok_or_else(|| RegistryError::SchemaNotFound(entry.id.to_string()))?;
    Ok(Change::Version {
        subject: subject.to_string(),
        version,
        id: entry.id,
        schema,
        deleted: true,
    })
}

/// A subject's live versions, parsed, oldest first.
fn live_parsed(state: &State, subject: &str) -> Result<Vec<(i32, Parsed)>, RegistryError> {
    let mut parsed = Vec::new();
    for (version, entry) in state.versions(subject).into_iter().flatten() {
        if entry.deleted {
            continue;
        }
        let schema = state
            .schema(entry.id)
            .ok_or_else(|| RegistryError::SchemaNotFound(entry.id.to_string()))?;
        parsed.push((*version, parse(state, schema)?));
    }
    Ok(parsed)
}

/// The largest schema text taken: far above real schemas, and small
/// enough that a subject's versions fit the `_schemas` topic's batches.
pub const SCHEMA_BYTES_MAX: usize = 1 << 20;

/// Parses `schema` with its references resolved from the state.
fn parse(state: &State, schema: &Schema) -> Result<Parsed, RegistryError> {
    if schema.text.len() > SCHEMA_BYTES_MAX {
        return Err(RegistryError::InvalidSchema(format!(
            "{} bytes: more than {SCHEMA_BYTES_MAX}",
            schema.text.len()
        )));
    }
    let mut resolved = Vec::new();
    resolve(state, schema, 0, &mut resolved)?;
    compat::parse(schema, &resolved)
}

/// The most schemas one schema's references may reach, directly or not:
/// resolving them runs under the registry's lock and copies each text, so
/// the work a request can ask for is bounded (real schemas import a few).
const REFERENCES_MAX: usize = 256;

/// Appends what `schema` references to `into`, each after those it
/// references itself, each name once.
fn resolve(
    state: &State,
    schema: &Schema,
    depth: usize,
    into: &mut Vec<(String, Schema)>,
) -> Result<(), RegistryError> {
    if depth > REFERENCE_DEPTH_MAX {
        return Err(RegistryError::InvalidSchema(format!(
            "references nest deeper than {REFERENCE_DEPTH_MAX}: is there a cycle?"
        )));
    }
    if schema.references.len() > REFERENCES_MAX {
        return Err(RegistryError::InvalidSchema(format!(
            "{} references: more than {REFERENCES_MAX}",
            schema.references.len()
        )));
    }
    for reference in &schema.references {
        if into.iter().any(|(name, _)| *name == reference.name) {
            continue;
        }
        if into.len() >= REFERENCES_MAX {
            return Err(RegistryError::InvalidSchema(format!(
                "references reach more than {REFERENCES_MAX} schemas"
            )));
        }
        let entry = (state.versions(&reference.subject))
            .and_then(|versions| versions.get(&reference.version))
            .ok_or_else(|| {
                RegistryError::InvalidSchema(format!(
                    "reference '{}' names version {} of subject '{}', which is not registered",
                    reference.name, reference.version, reference.subject
                ))
            })?;
        let referenced = state
            .schema(entry.id)
            .cloned()
            .ok_or_else(|| RegistryError::SchemaNotFound(entry.id.to_string()))?;
        resolve(state, &referenced, depth + 1, into)?;
        into.push((reference.name.clone(), referenced));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
