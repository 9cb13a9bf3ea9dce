//! The REST API, as Confluent's clients speak it: routes, request bodies,
//! answers and errors.
//!
//! - [`subjects`]: registering, looking up, listing and deleting a
//!   subject's versions.
//! - [`schemas`]: schemas by global id, and the formats known.
//! - [`compatibility`]: a schema tested against a subject's versions.
//! - [`config`]: the global and per-subject compatibility levels.
//!
//! Answers are JSON as `application/vnd.schemaregistry.v1+json`; errors
//! `{"error_code": N, "message": "..."}` with the status the code names.
//! A request with a body must say it is JSON (`application/json` or
//! Confluent's types): a page in a browser cannot send one without the
//! server's leave, so a site cannot register schemas through a visitor's
//! browser. Bodies are bounded ([`REQUEST_BYTES_MAX`]). Who may reach the
//! API at all (loopback, TLS, a token) is strata-http's to enforce.

mod compatibility;
mod config;
mod schemas;
mod subjects;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::registry::{Registered, Registry};
use crate::schema::{Schema, SchemaReference, SchemaType};

/// The largest request body taken (a schema and its references' names).
pub const REQUEST_BYTES_MAX: usize = 4 << 20;

/// The content type of every answer.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// Content types a body may be sent as.
const BODY_TYPES: [&str; 4] = [
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
];

type Shared = Arc<Registry>;

/// The registry's routes.
pub fn router(registry: Arc<Registry>) -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { answer(json!({})) }))
        .route("/schemas/types", get(schemas::types))
        .route("/schemas/ids/{id}", get(schemas::by_id))
        .route("/schemas/ids/{id}/schema", get(schemas::raw_by_id))
        .route("/schemas/ids/{id}/subjects", get(schemas::subjects_of_id))
        .route("/schemas/ids/{id}/versions", get(schemas::versions_of_id))
        .route("/subjects", get(subjects::list))
        .route(
            "/subjects/{subject}",
            post(subjects::lookup).delete(subjects::delete),
        )
        .route(
            "/subjects/{subject}/versions",
            get(subjects::versions).post(subjects::register),
        )
        .route(
            "/subjects/{subject}/versions/{version}",
            get(subjects::version).delete(subjects::delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(subjects::raw_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(subjects::referenced_by),
        )
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(compatibility::against_level),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(compatibility::against_version),
        )
        .route(
            "/config",
            get(config::global)
                .put(config::set_global)
                .delete(config::delete_global),
        )
        .route(
            "/config/{subject}",
            get(config::subject)
                .put(config::set_subject)
                .delete(config::delete_subject),
        )
        .fallback(|| async {
            let body = json!({"error_code": 404, "message": "HTTP 404 Not Found"});
            with_status(StatusCode::NOT_FOUND, &body)
        })
        .layer(DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .with_state(registry)
}

/// Serves the registry on `listener` under strata-http's default limits
/// and `access` (TLS, a token, loopback) until the task is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    access: strata_http::Access,
    registry: Arc<Registry>,
) {
    strata_http::serve(
        listener,
        router(registry),
        strata_http::Limits::default(),
        access,
    )
    .await;
}

/// A 200 answer.
fn answer(body: Value) -> Response {
    with_status(StatusCode::OK, &body)
}

fn with_status(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        body.to_string(),
    )
        .into_response()
}

impl IntoResponse for RegistryError {
    fn into_response(self) -> Response {
        if let RegistryError::Store(error) = &self {
            tracing::error!("schema registry: {error}");
        }
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({"error_code": self.code(), "message": self.to_string()});
        with_status(status, &body)
    }
}

/// Runs `work` on the blocking pool (the store waits for the disk).
async fn blocking<T: Send + 'static>(
    registry: &Shared,
    work: impl FnOnce(&Registry) -> Result<T, RegistryError> + Send + 'static,
) -> Result<T, RegistryError> {
    let registry = Arc::clone(registry);
    tokio::task::spawn_blocking(move || work(&registry))
        .await
        .map_err(|e| RegistryError::Interrupted(e.to_string()))?
}

/// A query flag: `true` in any case (clients send `True`).
fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query
        .get(name)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// A schema as Confluent's clients send it.
#[derive(Debug, Deserialize)]
struct SchemaBody {
    schema: Option<String>,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
    #[serde(default)]
    references: Option<Vec<SchemaReference>>,
}

/// Reads a JSON body of a type [`BODY_TYPES`] allows.
fn read_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<T, RegistryError> {
    let content_type = (headers.get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    match content_type {
        Some(t) if BODY_TYPES.contains(&t.as_str()) => {}
        other => {
            return Err(RegistryError::UnreadableRequest(format!(
                "a body of type {} is refused: send it as {CONTENT_TYPE} or application/json",
                other.as_deref().unwrap_or("(none)")
            )));
        }
    }
    serde_json::from_slice(body).map_err(|e| {
        RegistryError::UnreadableRequest(format!("the body is not the JSON expected: {e}"))
    })
}

/// The schema a request's body carries (AVRO when it names no type).
fn schema_from(headers: &HeaderMap, body: &Bytes) -> Result<Schema, RegistryError> {
    let body: SchemaBody = read_body(headers, body)?;
    let text = (body.schema)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| RegistryError::InvalidSchema("the request has no schema".into()))?;
    let schema_type = match body.schema_type {
        Some(name) => name.parse()?,
        None => SchemaType::Avro,
    };
    Ok(Schema {
        schema_type,
        text,
        references: body.references.unwrap_or_default(),
    })
}

/// A schema's fields in an answer: `schemaType` left out for Avro, as
/// Confluent does, `references` when there are none.
fn schema_fields(schema: &Schema, text: String, into: &mut serde_json::Map<String, Value>) {
    into.insert("schema".into(), Value::String(text));
    if schema.schema_type != SchemaType::Avro {
        into.insert("schemaType".into(), schema.schema_type.name().into());
    }
    if !schema.references.is_empty() {
        into.insert("references".into(), json!(schema.references));
    }
}

/// A subject's version as answered.
fn registered_json(registered: &Registered, text: String) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("subject".into(), registered.subject.clone().into());
    map.insert("version".into(), registered.version.into());
    map.insert("id".into(), registered.id.into());
    schema_fields(&registered.schema, text, &mut map);
    Value::Object(map)
}
