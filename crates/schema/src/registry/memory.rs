//! A registry held in the process, for an app's tests written with the
//! test driver (as Confluent's serializers take `mock://` URLs): ids are
//! given out in order, the same schema keeps its id across subjects, and
//! nothing is checked for compatibility — that is the real registry's
//! work, tested against it.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Registry, RegistryError, SchemaText};

#[derive(Debug, Default)]
pub struct MemoryRegistry {
    schemas: Mutex<Schemas>,
}

#[derive(Debug, Default)]
struct Schemas {
    /// Index `id - 1`.
    by_id: Vec<SchemaText>,
    /// Per subject, the ids of its versions in order.
    subjects: HashMap<String, Vec<u32>>,
}

impl MemoryRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The ids registered under `subject`, oldest first.
    pub fn versions(&self, subject: &str) -> Vec<u32> {
        let schemas = self.schemas.lock().expect("registry lock");
        schemas.subjects.get(subject).cloned().unwrap_or_default()
    }
}

impl Registry for MemoryRegistry {
    fn schema_by_id(&self, id: u32) -> Result<SchemaText, RegistryError> {
        let schemas = self.schemas.lock().expect("registry lock");
        let index = (id as usize).checked_sub(1);
        index
            .and_then(|index| schemas.by_id.get(index).cloned())
            .ok_or_else(|| RegistryError::Refused {
                status: 404,
                code: 40403,
                message: format!("schema {id} not found"),
            })
    }

    fn register(&self, subject: &str, schema: &SchemaText) -> Result<u32, RegistryError> {
        let mut schemas = self.schemas.lock().expect("registry lock");
        let id = match schemas.by_id.iter().position(|known| known == schema) {
            Some(index) => index as u32 + 1,
            None => {
                schemas.by_id.push(schema.clone());
                schemas.by_id.len() as u32
            }
        };
        let versions = schemas.subjects.entry(subject.to_string()).or_default();
        if !versions.contains(&id) {
            versions.push(id);
        }
        Ok(id)
    }
}
