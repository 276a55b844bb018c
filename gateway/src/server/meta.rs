//! The unauthenticated endpoints: `/healthz`, `/metrics`, `/openapi.json`, and the answers
//! for unknown routes and methods.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, ServerState};

/// The API described as OpenAPI 3.0.3, written by hand next to the router. Tests check that
/// every route is in it (`tests/server_api.rs`), that it stays 3.0.3 with an `operationId` per
/// operation, and that what the router answers has exactly the properties, types and nulls
/// its schemas give (`tests/server_openapi.rs`).
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /healthz`.
pub(super) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /metrics`: Prometheus text format 0.0.4.
pub(super) async fn metrics(
    State(state): State<ServerState>,
) -> Result<impl IntoResponse, ApiError> {
    let text = state
        .metrics
        .render(&state.app)
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}

/// `GET /openapi.json`.
pub(super) async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

/// Any path the router does not know.
pub(super) async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see /openapi.json")
}

/// A known path with a method it does not answer.
pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not answer that method; see /openapi.json",
    )
}
