//! What can go wrong talking to dstack, in terms a collection loop can act on.

use std::time::Duration;

/// An error from the dstack client.
///
/// dstack's error bodies come in several shapes (REPORT §2): `{"detail":"Not authenticated"}`
/// (401), `{"detail":{"msg","code"}}` (403/404), `{"detail":[{"msg","code"}]}` (400),
/// FastAPI's `{"detail":[{"type","loc","msg",…}]}` (422), and plain text for a 500. All of them
/// end up as a `message` (and a `code` when dstack gave one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DstackError {
    /// No connection could be made (refused, DNS, TLS, reset before an answer).
    #[error("dstack is unreachable at {url}: {detail}")]
    Unreachable { url: String, detail: String },
    /// No complete answer within the configured timeout (headers or body).
    #[error("dstack did not answer {url} within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// 401 (no token) or 403 (invalid token, inactive user, not a member of the project).
    #[error("dstack refused the token with {status} at {url}: {message}")]
    Auth {
        url: String,
        status: u16,
        message: String,
    },
    /// Any other non-2xx answer: 400 (`resource_not_exists`, "Resource has been changed"),
    /// 404 (no such project), 422 (validation), 5xx.
    #[error("dstack answered {status} at {url}: {message}")]
    Server {
        url: String,
        status: u16,
        /// dstack's error code, e.g. `resource_not_exists`, when it sent one.
        code: Option<String>,
        message: String,
    },
    /// A 2xx answer whose body is not what dstack sends (cut short, not JSON, wrong shape).
    #[error("dstack sent an unreadable answer at {url}: {detail}")]
    BadPayload { url: String, detail: String },
    /// `apply` refused to touch a run that already has the plan's name (see
    /// [`DstackClient::apply`](super::DstackClient::apply)).
    #[error("a run named {run_name:?} already exists in dstack project {project}; submit without a run name or with a new one")]
    NameTaken { project: String, run_name: String },
    /// The client could not be built from its configuration.
    #[error("dstack client configuration: {0}")]
    Config(String),
}

impl DstackError {
    /// Worth trying again later without changing anything: the network, a timeout, a 5xx,
    /// 408/429, or a body cut short (almost always a dropped connection).
    pub fn is_retryable(&self) -> bool {
        match self {
            DstackError::Unreachable { .. }
            | DstackError::Timeout { .. }
            | DstackError::BadPayload { .. } => true,
            DstackError::Server { status, .. } => *status >= 500 || matches!(status, 408 | 429),
            DstackError::Auth { .. } | DstackError::NameTaken { .. } | DstackError::Config(_) => {
                false
            }
        }
    }

    /// dstack says the run (or project) does not exist: 400 `resource_not_exists` or 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, DstackError::Server { status: 404, .. })
            || matches!(
                self,
                DstackError::Server { status: 400, code: Some(code), .. } if code == "resource_not_exists"
            )
    }

    /// The whole pass should stop: the server cannot be reached or refuses us. Errors about
    /// one run (a 400, a 500 for one row, an unreadable run) are not of this kind.
    pub(crate) fn stops_the_pass(&self) -> bool {
        matches!(
            self,
            DstackError::Unreachable { .. }
                | DstackError::Timeout { .. }
                | DstackError::Auth { .. }
                | DstackError::Config(_)
        )
    }
}

/// Pulls `(code, message)` out of any of dstack's error bodies.
pub(crate) fn error_detail(body: &str) -> (Option<String>, String) {
    let text = body.trim();
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return (None, shorten(text));
    };
    let detail = value.get("detail").unwrap_or(&value);
    let from_item = |item: &serde_json::Value| -> (Option<String>, String) {
        let code = item
            .get("code")
            .and_then(|c| c.as_str())
            .map(str::to_string);
        let msg = item
            .get("msg")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| shorten(&item.to_string()));
        let msg = match item.get("loc").and_then(|l| l.as_array()) {
            Some(loc) => {
                let path: Vec<String> = loc
                    .iter()
                    .map(|p| match p {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                format!("{}: {msg}", path.join("."))
            }
            None => msg,
        };
        let code = code.or_else(|| {
            item.get("type")
                .and_then(|t| t.as_str())
                .map(str::to_string)
        });
        (code, msg)
    };
    match detail {
        serde_json::Value::String(s) => (None, s.clone()),
        serde_json::Value::Array(items) if !items.is_empty() => {
            let (code, _) = from_item(&items[0]);
            let messages: Vec<String> = items.iter().map(|i| from_item(i).1).collect();
            (code, messages.join("; "))
        }
        serde_json::Value::Object(_) => from_item(detail),
        other => (None, shorten(&other.to_string())),
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_error_shape() {
        assert_eq!(
            error_detail(r#"{"detail":"Not authenticated"}"#),
            (None, "Not authenticated".into())
        );
        assert_eq!(
            error_detail(r#"{"detail":{"msg":"Invalid token","code":null}}"#),
            (None, "Invalid token".into())
        );
        assert_eq!(
            error_detail(r#"{"detail":[{"msg":"Run not found","code":"resource_not_exists"}]}"#),
            (Some("resource_not_exists".into()), "Run not found".into())
        );
        let (code, msg) = error_detail(
            r#"{"detail":[{"type":"less_than_equal","loc":["body","limit"],"msg":"Input should be less than or equal to 100","input":1000}]}"#,
        );
        assert_eq!(code.as_deref(), Some("less_than_equal"));
        assert_eq!(msg, "body.limit: Input should be less than or equal to 100");
        assert_eq!(
            error_detail("Internal Server Error"),
            (None, "Internal Server Error".into())
        );
    }
}
