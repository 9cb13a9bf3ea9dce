//! Testing a schema before registering it: `{"is_compatible": bool}`, and
//! with `verbose=true` the reasons (`messages`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::{Shared, answer, blocking, flag, schema_from};
use crate::error::RegistryError;
use crate::registry::VersionSpec;

type Answer = Result<Response, RegistryError>;

/// `POST /compatibility/subjects/{subject}/versions/{version}`: against
/// one version, in the directions the subject's level checks.
pub async fn against_version(
    State(registry): State<Shared>,
    Path((subject, version)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let spec: VersionSpec = version.parse()?;
    test(registry, subject, Some(spec), &query, &headers, &body).await
}

/// `POST /compatibility/subjects/{subject}/versions`: against the
/// versions the subject's level checks (none yet: compatible).
pub async fn against_level(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    test(registry, subject, None, &query, &headers, &body).await
}

async fn test(
    registry: Shared,
    subject: String,
    spec: Option<VersionSpec>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Answer {
    let schema = schema_from(headers, body)?;
    let problems = blocking(&registry, move |r| {
        r.test_compatibility(&subject, spec, &schema)
    })
    .await?;
    let mut body = json!({ "is_compatible": problems.is_empty() });
    if flag(query, "verbose") {
        body["messages"] = json!(problems);
    }
    Ok(answer(body))
}
