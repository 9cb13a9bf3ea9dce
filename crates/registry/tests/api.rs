//! The REST API through the router, without a socket: bodies, content
//! types, answers and numbered errors as Confluent's clients expect them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use strata_log::{LogConfig, LogManager};
use strata_registry::{Registry, router};
use tower::ServiceExt;

const JSON_TYPE: &str = "application/vnd.schemaregistry.v1+json";

struct Api {
    _dir: tempfile::TempDir,
    _log: LogManager,
    router: axum::Router,
}

impl Api {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let registry = Registry::open(&log, Arc::default()).unwrap();
        Self {
            _dir: dir,
            _log: log,
            router: router(Arc::new(registry)),
        }
    }

    /// Sends one request; answers its status and JSON body.
    async fn send(
        &self,
        method: &str,
        uri: &str,
        body: Option<Value>,
        content_type: &str,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        let body = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, content_type);
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(response.headers()[header::CONTENT_TYPE], JSON_TYPE);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, value)
    }

    async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.send("GET", uri, None, JSON_TYPE).await
    }

    async fn post(&self, uri: &str, body: Value) -> (StatusCode, Value) {
        self.send("POST", uri, Some(body), JSON_TYPE).await
    }
}

const USER: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;

#[tokio::test]
async fn a_registered_avro_schema_is_served_by_id_without_a_schema_type() {
    let api = Api::new();
    let (status, body) = api
        .post("/subjects/users-value/versions", json!({"schema": USER}))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 1})));
    let (_, body) = api.get("/schemas/ids/1").await;
    assert_eq!(body, json!({"schema": USER}));
    let (_, body) = api.get("/subjects/users-value/versions/latest").await;
    assert_eq!(
        body,
        json!({"subject": "users-value", "version": 1, "id": 1, "schema": USER})
    );
    let (_, body) = api.get("/subjects/users-value/versions/1/schema").await;
    assert_eq!(body, serde_json::from_str::<Value>(USER).unwrap());
    let (_, body) = api.get("/schemas/ids/1/versions").await;
    assert_eq!(body, json!([{"subject": "users-value", "version": 1}]));
}

#[tokio::test]
async fn other_formats_are_answered_with_their_schema_type() {
    let api = Api::new();
    let schema = json!({"schema": "{\"type\":\"string\"}", "schemaType": "JSON"});
    api.post("/subjects/s/versions", schema).await;
    let (_, body) = api.get("/schemas/ids/1").await;
    assert_eq!(body["schemaType"], "JSON");
}

#[tokio::test]
async fn errors_carry_confluent_codes_under_their_status() {
    let api = Api::new();
    let (status, body) = api.get("/subjects/nobody/versions").await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::NOT_FOUND, json!(40401))
    );
    let (status, body) = api.get("/subjects/nobody/versions/zero").await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!(42202))
    );
    let (status, body) = api
        .post("/subjects/s/versions", json!({"schema": "{nope"}))
        .await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!(42201))
    );
    let (status, body) = api.get("/schemas/ids/abc").await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::NOT_FOUND, json!(40403))
    );
    let (status, body) = api.get("/no/such/route").await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::NOT_FOUND, json!(404))
    );
}

#[tokio::test]
async fn an_incompatible_schema_is_409_and_verbose_tests_say_why() {
    let api = Api::new();
    api.post("/subjects/s/versions", json!({"schema": USER}))
        .await;
    let broken = USER.replace("string", "int");
    let (status, body) = api
        .post("/subjects/s/versions", json!({"schema": broken}))
        .await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::CONFLICT, json!(409))
    );
    assert!(body["message"].as_str().unwrap().contains("name"), "{body}");
    let (_, body) = api
        .post(
            "/compatibility/subjects/s/versions/latest?verbose=True",
            json!({"schema": broken}),
        )
        .await;
    assert_eq!(body["is_compatible"], false);
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    let (_, body) = api
        .post(
            "/compatibility/subjects/new/versions",
            json!({"schema": broken}),
        )
        .await;
    assert_eq!(body, json!({"is_compatible": true}));
}

#[tokio::test]
async fn a_body_that_does_not_say_it_is_json_is_refused() {
    let api = Api::new();
    let (status, _) = api
        .send(
            "POST",
            "/subjects/s/versions",
            Some(json!({"schema": USER})),
            "text/plain",
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = api
        .send(
            "POST",
            "/subjects/s/versions",
            Some(json!({"schema": USER})),
            "application/json; charset=utf-8",
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn levels_are_set_read_and_removed() {
    let api = Api::new();
    let (_, body) = api.get("/config").await;
    assert_eq!(body, json!({"compatibilityLevel": "BACKWARD"}));
    let (status, body) = api.get("/config/s").await;
    assert_eq!(
        (status, body["error_code"].clone()),
        (StatusCode::NOT_FOUND, json!(40408))
    );
    let (_, body) = api.get("/config/s?defaultToGlobal=true").await;
    assert_eq!(body, json!({"compatibilityLevel": "BACKWARD"}));
    let level = Some(json!({"compatibility": "full_transitive"}));
    let (_, body) = api.send("PUT", "/config/s", level, JSON_TYPE).await;
    assert_eq!(body, json!({"compatibility": "FULL_TRANSITIVE"}));
    let (_, body) = api.send("DELETE", "/config/s", None, JSON_TYPE).await;
    assert_eq!(body, json!({"compatibilityLevel": "FULL_TRANSITIVE"}));
    let bad = Some(json!({"compatibility": "SIDEWAYS"}));
    let (_, body) = api.send("PUT", "/config", bad, JSON_TYPE).await;
    assert_eq!(body["error_code"], 42203);
}

#[tokio::test]
async fn deletes_are_soft_then_permanent() {
    let api = Api::new();
    api.post("/subjects/s/versions", json!({"schema": USER}))
        .await;
    let (_, body) = api
        .send("DELETE", "/subjects/s?permanent=true", None, JSON_TYPE)
        .await;
    assert_eq!(body["error_code"], 40405);
    let (_, body) = api.send("DELETE", "/subjects/s", None, JSON_TYPE).await;
    assert_eq!(body, json!([1]));
    let (_, body) = api.get("/subjects").await;
    assert_eq!(body, json!([]));
    let (_, body) = api.get("/subjects?deleted=true").await;
    assert_eq!(body, json!(["s"]));
    let (_, body) = api
        .send("DELETE", "/subjects/s?permanent=true", None, JSON_TYPE)
        .await;
    assert_eq!(body, json!([1]));
    let (_, body) = api.get("/schemas/ids/1").await;
    assert_eq!(body["error_code"], 40403);
}
