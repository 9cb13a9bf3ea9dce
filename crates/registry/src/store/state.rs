//! State: the registry in memory, as the `_schemas` topic's records
//! build it; every change, replayed at start or newly written, goes
//! through [`State::apply`], so the two cannot disagree.
//!
//! Invariants: a schema id is held while at least one version (live or
//! soft-deleted) names it and dropped with the last one; `next_id` is above
//! every id ever applied, so an id is never given twice, whatever was
//! deleted.

use std::collections::{BTreeMap, HashMap};

use crate::level::CompatibilityLevel;
use crate::schema::{Identity, Schema};

/// One change to the registry, as one record of the topic carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A subject's version registered, or soft-deleted (`deleted`).
    Version {
        subject: String,
        version: i32,
        id: i32,
        schema: Schema,
        deleted: bool,
    },
    /// A version deleted permanently (the topic's tombstone).
    VersionGone { subject: String, version: i32 },
    /// A compatibility level set, or removed (`None`), for a subject or
    /// globally (`subject: None`).
    Level {
        subject: Option<String>,
        level: Option<CompatibilityLevel>,
    },
    /// The next id to give, kept when the highest id is deleted.
    NextId(i32),
}

/// A version of a subject: the schema id it names, and whether it was
/// soft-deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionEntry {
    pub id: i32,
    pub deleted: bool,
}

#[derive(Debug)]
pub struct State {
    subjects: BTreeMap<String, BTreeMap<i32, VersionEntry>>,
    schemas: BTreeMap<i32, Schema>,
    ids: HashMap<Identity, i32>,
    /// How many versions name each id.
    uses: HashMap<i32, usize>,
    levels: BTreeMap<String, CompatibilityLevel>,
    global: Option<CompatibilityLevel>,
    next_id: i32,
}

impl Default for State {
    fn default() -> Self {
        Self {
            subjects: BTreeMap::new(),
            schemas: BTreeMap::new(),
            ids: HashMap::new(),
            uses: HashMap::new(),
            levels: BTreeMap::new(),
            global: None,
            next_id: 1,
        }
    }
}

impl State {
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Version {
                subject,
                version,
                id,
                schema,
                deleted,
            } => {
                let entry = VersionEntry { id, deleted };
                let versions = self.subjects.entry(subject).or_default();
                if let Some(before) = versions.insert(version, entry) {
                    self.release(before.id);
                }
                *self.uses.entry(id).or_default() += 1;
                self.ids.entry(schema.identity()).or_insert(id);
                self.schemas.entry(id).or_insert(schema);
                self.next_id = self.next_id.max(id.saturating_add(1));
            }
            Change::VersionGone { subject, version } => {
                let Some(versions) = self.subjects.get_mut(&subject) else {
                    return;
                };
                let removed = versions.remove(&version);
                if versions.is_empty() {
                    self.subjects.remove(&subject);
                }
                if let Some(before) = removed {
                    self.release(before.id);
                }
            }
            Change::Level {
                subject: Some(subject),
                level,
            } => match level {
                Some(level) => drop(self.levels.insert(subject, level)),
                None => drop(self.levels.remove(&subject)),
            },
            Change::Level {
                subject: None,
                level,
            } => self.global = level,
            Change::NextId(next) => self.next_id = self.next_id.max(next),
        }
        debug_assert!(self.schemas.keys().all(|id| *id < self.next_id));
    }

    /// One fewer version names `id`; the last one gone drops the schema.
    fn release(&mut self, id: i32) {
        let Some(count) = self.uses.get_mut(&id) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.uses.remove(&id);
            if let Some(schema) = self.schemas.remove(&id) {
                self.ids.remove(&schema.identity());
            }
        }
    }

    /// A subject's versions, soft-deleted ones included.
    pub fn versions(&self, subject: &str) -> Option<&BTreeMap<i32, VersionEntry>> {
        self.subjects.get(subject)
    }

    pub fn subjects(&self) -> impl Iterator<Item = (&String, &BTreeMap<i32, VersionEntry>)> {
        self.subjects.iter()
    }

    pub fn schema(&self, id: i32) -> Option<&Schema> {
        self.schemas.get(&id)
    }

    /// The id already given to this schema, under any subject.
    pub fn id_of(&self, schema: &Schema) -> Option<i32> {
        self.ids.get(&schema.identity()).copied()
    }

    pub fn next_id(&self) -> i32 {
        self.next_id
    }

    pub fn subject_level(&self, subject: &str) -> Option<CompatibilityLevel> {
        self.levels.get(subject).copied()
    }

    pub fn global_level(&self) -> Option<CompatibilityLevel> {
        self.global
    }

    /// The level a subject's registrations are checked at: its own, else
    /// the global one, else BACKWARD.
    pub fn effective_level(&self, subject: &str) -> CompatibilityLevel {
        (self.subject_level(subject))
            .or(self.global)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SchemaType;

    fn json(text: &str) -> Schema {
        Schema {
            schema_type: SchemaType::Json,
            text: text.into(),
            references: vec![],
        }
    }

    fn version(subject: &str, version: i32, id: i32, schema: &Schema) -> Change {
        Change::Version {
            subject: subject.into(),
            version,
            id,
            schema: schema.clone(),
            deleted: false,
        }
    }

    #[test]
    fn a_schema_is_dropped_with_the_last_version_naming_it() {
        let mut state = State::default();
        let s = json(r#"{"type":"string"}"#);
        state.apply(version("a", 1, 1, &s));
        state.apply(version("b", 1, 1, &s));
        state.apply(Change::VersionGone {
            subject: "a".into(),
            version: 1,
        });
        assert_eq!(state.id_of(&s), Some(1));
        state.apply(Change::VersionGone {
            subject: "b".into(),
            version: 1,
        });
        assert_eq!(state.id_of(&s), None);
        assert!(state.schema(1).is_none());
        assert_eq!(state.next_id(), 2);
        assert!(state.versions("a").is_none());
    }

    #[test]
    fn a_soft_delete_rewrites_the_version_without_losing_its_schema() {
        let mut state = State::default();
        let s = json(r#"{"type":"string"}"#);
        state.apply(version("a", 1, 7, &s));
        state.apply(Change::Version {
            subject: "a".into(),
            version: 1,
            id: 7,
            schema: s.clone(),
            deleted: true,
        });
        assert_eq!(
            state.versions("a").unwrap()[&1],
            VersionEntry {
                id: 7,
                deleted: true
            }
        );
        assert_eq!(state.id_of(&s), Some(7));
    }

    #[test]
    fn next_id_only_grows() {
        let mut state = State::default();
        state.apply(Change::NextId(10));
        state.apply(Change::NextId(4));
        assert_eq!(state.next_id(), 10);
    }

    #[test]
    fn levels_fall_back_from_subject_to_global_to_backward() {
        let mut state = State::default();
        assert_eq!(state.effective_level("s"), CompatibilityLevel::Backward);
        state.apply(Change::Level {
            subject: None,
            level: Some(CompatibilityLevel::Full),
        });
        assert_eq!(state.effective_level("s"), CompatibilityLevel::Full);
        let level = Some(CompatibilityLevel::None);
        state.apply(Change::Level {
            subject: Some("s".into()),
            level,
        });
        assert_eq!(state.effective_level("s"), CompatibilityLevel::None);
        state.apply(Change::Level {
            subject: Some("s".into()),
            level: None,
        });
        assert_eq!(state.effective_level("s"), CompatibilityLevel::Full);
    }
}
