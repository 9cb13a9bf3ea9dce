//! The `/metrics` endpoint the broker and apps serve: `GET /metrics`
//! answered with an [`Exposition`], anything else 404 saying what is
//! served.

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::access::Access;
use crate::exposition::{CONTENT_TYPE, Exposition};
use crate::serve::{Limits, serve};

/// The routes: `GET /metrics`, anything else 404.
pub fn router(exposition: Arc<Exposition>) -> Router {
    routes(exposition)
        .fallback(|| async { (StatusCode::NOT_FOUND, "only GET /metrics is served\n") })
}

/// `GET /metrics` alone, to merge into a router of more.
pub fn routes(exposition: Arc<Exposition>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let exposition = Arc::clone(&exposition);
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], exposition.render()) }
        }),
    )
}

/// Serves `GET /metrics` on `listener`, under `access`, until the task is
/// dropped.
pub async fn serve_metrics(listener: TcpListener, exposition: Exposition, access: Access) {
    let router = router(Arc::new(exposition));
    serve(listener, router, Limits::default(), access).await;
}
