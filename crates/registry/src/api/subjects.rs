//! Subjects: register a schema, look one up, list and read versions,
//! delete (soft, then `permanent=true`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{Shared, answer, blocking, flag, registered_json, schema_from};
use crate::error::RegistryError;
use crate::registry::VersionSpec;

type Answer = Result<Response, RegistryError>;

/// `GET /subjects` (`deleted=true` adds soft-deleted ones;
/// `subjectPrefix` keeps those it begins).
pub async fn list(
    State(registry): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let deleted = flag(&query, "deleted");
    let prefix = query.get("subjectPrefix").cloned().unwrap_or_default();
    let mut subjects = blocking(&registry, move |r| Ok(r.subjects(deleted))).await?;
    subjects.retain(|subject| subject.starts_with(&prefix));
    Ok(answer(json!(subjects)))
}

/// `POST /subjects/{subject}/versions`: `{"id": N}`.
pub async fn register(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let schema = schema_from(&headers, &body)?;
    let id = blocking(&registry, move |r| r.register(&subject, schema)).await?;
    Ok(answer(json!({ "id": id })))
}

/// `POST /subjects/{subject}`: the version holding the schema sent.
pub async fn lookup(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let schema = schema_from(&headers, &body)?;
    let deleted = flag(&query, "deleted");
    let format = query.get("format").cloned();
    let (found, text) = blocking(&registry, move |r| {
        let found = r.lookup(&subject, &schema, deleted)?;
        let text = r.formatted(&found.schema, format.as_deref())?;
        Ok((found, text))
    })
    .await?;
    Ok(answer(registered_json(&found, text)))
}

/// `GET /subjects/{subject}/versions`.
pub async fn versions(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let deleted = flag(&query, "deleted");
    let versions = blocking(&registry, move |r| r.versions(&subject, deleted)).await?;
    Ok(answer(json!(versions)))
}

/// `GET /subjects/{subject}/versions/{version}`.
pub async fn version(
    State(registry): State<Shared>,
    Path((subject, version)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let spec: VersionSpec = version.parse()?;
    let deleted = flag(&query, "deleted");
    let format = query.get("format").cloned();
    let (found, text) = blocking(&registry, move |r| {
        let found = r.version(&subject, spec, deleted)?;
        let text = r.formatted(&found.schema, format.as_deref())?;
        Ok((found, text))
    })
    .await?;
    Ok(answer(registered_json(&found, text)))
}

/// `GET /subjects/{subject}/versions/{version}/schema`: the schema text
/// alone.
pub async fn raw_version(
    State(registry): State<Shared>,
    Path((subject, version)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let spec: VersionSpec = version.parse()?;
    let deleted = flag(&query, "deleted");
    let found = blocking(&registry, move |r| r.version(&subject, spec, deleted)).await?;
    Ok(raw(found.schema.text))
}

/// `GET /subjects/{subject}/versions/{version}/referencedby`: ids of the
/// schemas referencing it.
pub async fn referenced_by(
    State(registry): State<Shared>,
    Path((subject, version)): Path<(String, String)>,
) -> Answer {
    let spec: VersionSpec = version.parse()?;
    let ids = blocking(&registry, move |r| r.referenced_by(&subject, spec)).await?;
    Ok(answer(json!(ids)))
}

/// `DELETE /subjects/{subject}`: the versions deleted.
pub async fn delete(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let permanent = flag(&query, "permanent");
    let versions = blocking(&registry, move |r| r.delete_subject(&subject, permanent)).await?;
    Ok(answer(json!(versions)))
}

/// `DELETE /subjects/{subject}/versions/{version}`: the version deleted.
pub async fn delete_version(
    State(registry): State<Shared>,
    Path((subject, version)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let spec: VersionSpec = version.parse()?;
    let permanent = flag(&query, "permanent");
    let version = blocking(&registry, move |r| {
        r.delete_version(&subject, spec, permanent)
    })
    .await?;
    Ok(answer(json!(version)))
}

/// A schema's text as the whole body (it is JSON for Avro and JSON
/// Schema; Protobuf text is sent as it is).
pub(super) fn raw(text: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, super::CONTENT_TYPE)],
        text,
    )
        .into_response()
}
