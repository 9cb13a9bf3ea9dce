//! The web console: one page, its script and its style, built into the
//! binary (`include_str!`, nothing fetched from elsewhere), served beside
//! `/metrics` by the broker (`strata serve --console ADDR`) and by apps
//! (`<app> run --console ADDR`, `<app> replay --console ADDR`).
//!
//! ```text
//! GET /              the page
//! GET /console.js    its script
//! GET /console.css   its style
//! GET /api/console   what is served, as JSON: {"kind": "broker" | "app", …}
//!                    (an app adds its topology, its stores and the job it runs)
//! GET /metrics       the Prometheus text
//! ```
//!
//! The page reads every figure it shows from `/metrics` (rates are the
//! differences between two scrapes, as Prometheus's `rate()` takes them),
//! so nothing is console-only: what the page shows, a scraper has. What
//! `/api/console` adds is shape, not figures: which processors read and
//! write which topics and keep which stores. An app merges its query
//! routes (`/stores…`) into the same router, which the page's store lookup
//! asks.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::Value;

use crate::exposition::Exposition;
use crate::metrics_endpoint;

/// The page, its script and its style.
const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

/// What the page may load and who may frame it. (Its colour swatches are
/// inline `style` attributes.)
const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'";

/// What `/api/console` answers, asked again on every request (an app's
/// job or a broker's topics may change while it serves).
pub type Describe = Arc<dyn Fn() -> Value + Send + Sync>;

/// The console's routes and `/metrics`; merge others (an app's queries)
/// into it before serving.
pub fn router(exposition: Arc<Exposition>, describe: Describe) -> Router {
    let asset = |content_type: &'static str, body: &'static str| {
        get(move || async move {
            (
                [
                    (header::CONTENT_TYPE, content_type),
                    // A new build's page is fetched, not a stale one kept.
                    (header::CACHE_CONTROL, "no-cache"),
                    // Only this endpoint's own script, style and answers;
                    // never framed by another page.
                    (header::CONTENT_SECURITY_POLICY, CSP),
                ],
                body,
            )
        })
    };
    Router::new()
        .route("/", asset("text/html; charset=utf-8", PAGE))
        .route(
            "/console.js",
            asset("text/javascript; charset=utf-8", SCRIPT),
        )
        .route("/console.css", asset("text/css; charset=utf-8", STYLE))
        .route(
            "/api/console",
            get(move || {
                let describe = Arc::clone(&describe);
                async move { Json(describe()) }
            }),
        )
        .merge(metrics_endpoint::routes(exposition))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not served here: the console is at /, its metrics at /metrics\n",
            )
                .into_response()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_assets_the_binary_serves() {
        // Nothing from a CDN: every address the page names (its script, its
        // style, the link to the metrics) is one of the routes above; the
        // icon is none, so the browser asks for no /favicon.ico.
        for line in PAGE.lines() {
            for attribute in ["src=\"", "href=\""] {
                if let Some(start) = line.find(attribute) {
                    let rest = &line[start + attribute.len()..];
                    let target = &rest[..rest.find('"').unwrap()];
                    assert!(
                        ["/console.js", "/console.css", "/metrics", "data:,"].contains(&target),
                        "the page names {target}"
                    );
                }
            }
        }
        assert!(!SCRIPT.contains("http://") && !SCRIPT.contains("https://"));
    }
}
