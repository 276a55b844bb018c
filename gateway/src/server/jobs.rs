//! `/v1/quotes` and `/v1/jobs…`: authenticated here, decided by the [`AdmissionApi`].

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::Value;

use super::admission::{AdmissionApi, JobsFilter};
use super::extract::{ApiJson, ApiPath, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use crate::request::JobRequest;

/// The header a client sends to make `POST /v1/jobs` safe to retry.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Longest `Idempotency-Key` accepted.
const MAX_KEY_LEN: usize = 200;

fn admission(state: &ServerState) -> Result<&Arc<dyn AdmissionApi>, ApiError> {
    state
        .admission
        .as_ref()
        .ok_or_else(|| ApiError::not_configured("job admission"))
}

/// `POST /v1/quotes`.
pub(super) async fn quote(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(request): ApiJson<JobRequest>,
) -> Result<Json<Value>, ApiError> {
    let answer = admission(&state)?.quote(&caller, request).await?;
    Ok(Json(answer))
}

/// `POST /v1/jobs` → 201. Every answer is counted in `bursar_admissions_total` by outcome.
pub(super) async fn submit(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    headers: HeaderMap,
    ApiJson(request): ApiJson<JobRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let service = admission(&state)?;
    let key = match headers.get(IDEMPOTENCY_KEY) {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
                    ))
                })?;
            Some(key.to_string())
        }
    };
    let answer = service.submit(&caller, request, key).await;
    state.metrics.admission(match &answer {
        Ok(_) => "admitted",
        Err(e) => e.code,
    });
    Ok((StatusCode::CREATED, Json(answer?)))
}

/// The states a job can be in, as `GET /v1/jobs?state=` takes them.
pub const JOB_STATES: [&str; 5] = ["held", "settled", "cancelled", "expired", "failed"];

/// `GET /v1/jobs?user=&account=&state=&limit=&before=`: a page of the newest jobs that match.
/// A `state` no job can be in and a `limit` out of range are bad query parameters (400), as
/// one that does not parse is.
pub(super) async fn list(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(filter): ApiQuery<JobsFilter>,
) -> Result<Json<Value>, ApiError> {
    if let Some(wanted) = filter.state.as_deref() {
        if !JOB_STATES.contains(&wanted) {
            return Err(ApiError::bad_request(format!(
                "state must be one of {}, not {wanted:?}",
                JOB_STATES.join(", ")
            )));
        }
    }
    crate::output::page_limit(filter.limit).map_err(ApiError::bad_request)?;
    Ok(Json(admission(&state)?.jobs(&caller, filter).await?))
}

/// `GET /v1/jobs/{id}`.
pub(super) async fn get(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(admission(&state)?.job(&caller, id).await?))
}

/// `GET /v1/jobs/{id}/status`.
pub(super) async fn status(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(admission(&state)?.status(&caller, id).await?))
}

/// `DELETE /v1/jobs/{id}`.
pub(super) async fn cancel(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(admission(&state)?.cancel(&caller, id).await?))
}
