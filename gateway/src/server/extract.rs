//! Extractors whose refusals are [`ApiError`]s: the caller ([`Authenticated`]) and JSON
//! bodies, query strings and path parameters ([`ApiJson`], [`ApiQuery`], [`ApiPath`]).

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, MissingJsonContentType};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::Json;
use serde::de::{DeserializeOwned, IgnoredAny};

use super::{ApiError, ServerState};
use crate::auth::{AuthError, Principal};

/// The verified caller, from `Authorization: Bearer <jwt>`. Refusals are 401 with a
/// `WWW-Authenticate` challenge.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

impl FromRequestParts<ServerState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &ServerState,
    ) -> Result<Self, Self::Rejection> {
        let header = match parts.headers.get(AUTHORIZATION) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| AuthError::Malformed)?),
        };
        let principal = state.verifier.verify_header(header, chrono::Utc::now())?;
        let span = tracing::Span::current();
        span.record("user", principal.user.as_str());
        span.record("role", principal.role.as_str());
        Ok(Authenticated(principal))
    }
}

/// A JSON body. Refusals: 415 without a JSON `Content-Type`, 413 over the body limit
/// (axum's default, 2 MiB), 400 `bad_request` for a body that is not JSON, and 422
/// `invalid_request` for JSON of the wrong shape (see `impl From<JsonRejection> for
/// ApiError`).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !json_content_type(request.headers()) {
            return Err(JsonRejection::from(MissingJsonContentType::default()).into());
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(JsonRejection::from)?;
        match Json::<T>::from_bytes(&bytes) {
            Ok(Json(value)) => Ok(ApiJson(value)),
            // serde_json calls some shape errors syntax errors (an enum object with no key or
            // two, as `"memory": {}`): JSON that parses is of the wrong shape, 422 like the
            // others.
            Err(JsonRejection::JsonSyntaxError(e))
                if serde_json::from_slice::<IgnoredAny>(&bytes).is_ok() =>
            {
                Err(ApiError::invalid(e.body_text()))
            }
            Err(rejection) => Err(rejection.into()),
        }
    }
}

/// `application/json`, or another `application/…+json` type, as axum's `Json` accepts.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype
                .rsplit_once('+')
                .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json")))
}

/// A query string; a missing, unknown or malformed parameter is 400 `bad_request`.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(value) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

/// Path parameters; one that does not parse (`/v1/jobs/abc`) is 400 `bad_request`.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}
