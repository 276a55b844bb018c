//! [`ApiError`]: the one error type of the HTTP API and its JSON shape
//! `{"error": code, "message": …, "details": {…}}`.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bursar_ledger::LedgerError;
use bursar_pricing::money::format_micros;
use serde_json::{json, Value};

use crate::auth::AuthError;

/// An error answered to an API client. `code` is stable and machine-readable (see
/// `docs/api.md`); `message` is for people and never carries internal detail (that goes to
/// the log); `details` is a JSON object (`{}` when there is nothing to add).
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Value,
    /// The `WWW-Authenticate` challenge of a 401/403 caused by the token.
    pub www_authenticate: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: json!({}),
            www_authenticate: None,
        }
    }

    /// The same error with `details` (a JSON object).
    pub fn with_details(mut self, details: Value) -> ApiError {
        self.details = details;
        self
    }

    /// 400 `bad_request`: a body that is not JSON, a bad query or path parameter.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 422 `invalid_request`: a request that parses but makes no sense.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 403 `no_association`: a `user` asking about an account it is not associated with.
    pub fn no_association(user: &str, account: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "no_association",
            format!("user {user} is not associated with account {account}"),
        )
        .with_details(json!({ "user": user, "account": account }))
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 503 `not_configured`: the server has no admission service (no cluster takes
    /// submissions).
    pub fn not_configured(what: &str) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_configured",
            format!("{what} is not configured on this server"),
        )
    }

    /// 500 `internal`: the detail is logged, the client learns only that it happened.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %detail, "internal error answering a request");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the details are in the server's log",
        )
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({ "error": self.code, "message": self.message, "details": self.details })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(challenge) = self.www_authenticate {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        let mut error = ApiError::new(status, e.code(), e.to_string());
        error.www_authenticate = Some(e.www_authenticate());
        error
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> ApiError {
        match &e {
            LedgerError::NotFound { what, name } => ApiError::not_found(e.to_string())
                .with_details(json!({ "what": what, "name": name })),
            LedgerError::Conflict(_) => ApiError::conflict(e.to_string()),
            LedgerError::Invalid(_) | LedgerError::Overflow(_) => ApiError::invalid(e.to_string()),
            LedgerError::InsufficientAllocation {
                account,
                currency,
                estimate,
                remaining,
            } => ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "insufficient_allocation",
                e.to_string(),
            )
            .with_details(json!({
                "account": account,
                "currency": currency,
                "estimate": format_micros(*estimate, 0),
                "remaining": format_micros(*remaining, 0),
            })),
            LedgerError::NoAllocation { account, currency } => ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "insufficient_allocation",
                e.to_string(),
            )
            .with_details(json!({
                "account": account,
                "currency": currency,
                "remaining": null,
            })),
            LedgerError::AccountClosed { account, closed_by } => {
                ApiError::new(StatusCode::CONFLICT, "account_closed", e.to_string()).with_details(
                    json!({ "account": account, "closed": closed_by.as_ref().unwrap_or(account) }),
                )
            }
            LedgerError::InsufficientRemaining {
                account,
                currency,
                amount,
                remaining,
            } => ApiError::new(
                StatusCode::CONFLICT,
                "insufficient_remaining",
                e.to_string(),
            )
            .with_details(json!({
                "account": account,
                "currency": currency,
                "amount": format_micros(*amount, 0),
                "remaining": format_micros(*remaining, 0),
            })),
            LedgerError::Unsupported(_) | LedgerError::Storage(_) => ApiError::internal(&e),
        }
    }
}

/// A body that is not the JSON the endpoint reads: `bad_request` when it cannot be read (400
/// for a body that is not JSON, 415 without a JSON `Content-Type`, 413 over the body limit),
/// 422 `invalid_request` when it is JSON of the wrong shape (a missing or unknown field, a
/// number where a string belongs; [`super::extract::ApiJson`] also sends here the shape errors
/// serde_json reports as syntax).
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let message = rejection.body_text();
        match rejection {
            JsonRejection::JsonDataError(_) => ApiError::invalid(message),
            other => {
                let status = other.status();
                let status = if status.is_client_error() {
                    status
                } else {
                    StatusCode::BAD_REQUEST
                };
                ApiError::new(status, "bad_request", message)
            }
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::bad_request(rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::bad_request(rejection.body_text())
    }
}

impl From<crate::admin::AdminError> for ApiError {
    fn from(e: crate::admin::AdminError) -> ApiError {
        use crate::admin::AdminError;
        match e {
            AdminError::Invalid(message) => ApiError::invalid(message),
            AdminError::Declared(message) => ApiError::conflict(message),
            AdminError::Ledger(e) => e.into(),
        }
    }
}
