//! Extractors whose refusals are [`ApiError`]s: the caller ([`Authenticated`]) and JSON
//! bodies, query strings and path parameters ([`ApiJson`], [`ApiQuery`], [`ApiPath`]).

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::Json;
use serde::de::DeserializeOwned;

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

/// A JSON body; see `impl From<JsonRejection> for ApiError` for the refusals.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(request, state).await?;
        Ok(ApiJson(value))
    }
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
