//! Compatibility levels: `GET` answers `{"compatibilityLevel": L}`, `PUT`
//! takes and answers `{"compatibility": L}`, `DELETE` answers the level
//! that was removed. A subject without its own level is 40408 unless
//! `defaultToGlobal=true`.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::{Shared, answer, blocking, flag, read_body};
use crate::error::RegistryError;
use crate::level::CompatibilityLevel;

type Answer = Result<Response, RegistryError>;

#[derive(Debug, Deserialize)]
struct LevelBody {
    compatibility: Option<String>,
}

fn level_from(headers: &HeaderMap, body: &Bytes) -> Result<CompatibilityLevel, RegistryError> {
    let body: LevelBody = read_body(headers, body)?;
    body.compatibility.unwrap_or_default().parse()
}

fn level_answer(level: CompatibilityLevel) -> Response {
    answer(json!({ "compatibilityLevel": level.name() }))
}

/// `GET /config`.
pub async fn global(State(registry): State<Shared>) -> Answer {
    let level = blocking(&registry, |r| Ok(r.global_level())).await?;
    Ok(level_answer(level))
}

/// `PUT /config`.
pub async fn set_global(State(registry): State<Shared>, headers: HeaderMap, body: Bytes) -> Answer {
    let level = level_from(&headers, &body)?;
    blocking(&registry, move |r| r.set_level(None, Some(level))).await?;
    Ok(answer(json!({ "compatibility": level.name() })))
}

/// `DELETE /config`: back to BACKWARD; answers the level it replaced.
pub async fn delete_global(State(registry): State<Shared>) -> Answer {
    let before = blocking(&registry, |r| r.set_level(None, None)).await?;
    Ok(level_answer(before.unwrap_or_default()))
}

/// `GET /config/{subject}`.
pub async fn subject(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let default_to_global = flag(&query, "defaultToGlobal");
    let level = blocking(&registry, move |r| {
        r.subject_level(&subject, default_to_global)
    })
    .await?;
    Ok(level_answer(level))
}

/// `PUT /config/{subject}`.
pub async fn set_subject(
    State(registry): State<Shared>,
    Path(subject): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let level = level_from(&headers, &body)?;
    blocking(&registry, move |r| r.set_level(Some(&subject), Some(level))).await?;
    Ok(answer(json!({ "compatibility": level.name() })))
}

/// `DELETE /config/{subject}`: 40408 when the subject had no level.
pub async fn delete_subject(State(registry): State<Shared>, Path(subject): Path<String>) -> Answer {
    let before = blocking(&registry, move |r| {
        r.subject_level(&subject, false)?;
        r.set_level(Some(&subject), None)
    })
    .await?;
    Ok(level_answer(before.unwrap_or_default()))
}
