//! Schemas by their global id, and the formats the registry knows.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::{Shared, answer, blocking, flag, schema_fields};
use crate::error::RegistryError;
use crate::schema::SchemaType;

type Answer = Result<Response, RegistryError>;

/// `GET /schemas/types`.
pub async fn types() -> Response {
    let names: Vec<&str> = SchemaType::ALL.iter().map(|t| t.name()).collect();
    answer(json!(names))
}

/// An id from the path; one that is not a number names no schema.
fn id(text: &str) -> Result<i32, RegistryError> {
    text.parse()
        .map_err(|_| RegistryError::SchemaNotFound(text.to_string()))
}

/// `GET /schemas/ids/{id}`: `{"schema", "schemaType"}` (`format=serialized`
/// gives a Protobuf schema as a base64 descriptor).
pub async fn by_id(
    State(registry): State<Shared>,
    Path(text): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let id = id(&text)?;
    let format = query.get("format").cloned();
    let (schema, text) = blocking(&registry, move |r| {
        let schema = r.schema(id)?;
        let text = r.formatted(&schema, format.as_deref())?;
        Ok((schema, text))
    })
    .await?;
    let mut map = serde_json::Map::new();
    schema_fields(&schema, text, &mut map);
    Ok(answer(Value::Object(map)))
}

/// `GET /schemas/ids/{id}/schema`: the text alone.
pub async fn raw_by_id(State(registry): State<Shared>, Path(text): Path<String>) -> Answer {
    let id = id(&text)?;
    let schema = blocking(&registry, move |r| r.schema(id)).await?;
    Ok(super::subjects::raw(schema.text))
}

/// `GET /schemas/ids/{id}/subjects`.
pub async fn subjects_of_id(
    State(registry): State<Shared>,
    Path(text): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let id = id(&text)?;
    let deleted = flag(&query, "deleted");
    let mut subjects: Vec<String> = blocking(&registry, move |r| r.versions_of_id(id, deleted))
        .await?
        .into_iter()
        .map(|(subject, _)| subject)
        .collect();
    subjects.dedup();
    Ok(answer(json!(subjects)))
}

/// `GET /schemas/ids/{id}/versions`: `[{"subject", "version"}]`.
pub async fn versions_of_id(
    State(registry): State<Shared>,
    Path(text): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let id = id(&text)?;
    let deleted = flag(&query, "deleted");
    let found = blocking(&registry, move |r| r.versions_of_id(id, deleted)).await?;
    let pairs: Vec<Value> = (found.into_iter())
        .map(|(subject, version)| json!({"subject": subject, "version": version}))
        .collect();
    Ok(answer(json!(pairs)))
}
