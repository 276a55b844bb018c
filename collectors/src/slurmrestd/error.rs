//! What can go wrong talking to slurmrestd, and how its answers are classified.

use std::time::Duration;

use serde_json::Value;

/// An error from a slurmrestd call. [`RestError::is_retryable`] tells the caller's retry loop
/// whether the same request may succeed later.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestError {
    /// No connection could be made: refused, DNS failure, no route, TLS handshake failure.
    #[error("slurmrestd at {url} is unreachable: {message}")]
    Unreachable { url: String, message: String },

    /// No complete answer within the configured connect or total timeout.
    #[error("slurmrestd at {url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },

    /// The connection broke after it was made (reset while sending or reading the body).
    #[error("the connection to slurmrestd at {url} broke: {message}")]
    Transport { url: String, message: String },

    /// The server refused the credentials: HTTP 401/403, slurmrestd 22.05's HTTP 500
    /// "slurmctld config is unable to load", or an accounting answer carrying Slurm's
    /// "Protocol authentication error". Not retryable: a fixed key, user or clock is needed.
    #[error("slurmrestd refused the credentials of user {user:?}: {message}")]
    Auth { user: String, message: String },

    /// Any other error answer. `error_number` is Slurm's errno from `errors[]`, when given.
    #[error("slurmrestd answered HTTP {status}: {message}")]
    Server {
        status: u16,
        error_number: Option<i64>,
        message: String,
    },

    /// The answer could not be read: not JSON, truncated, or missing what every answer has.
    #[error("slurmrestd sent an unreadable answer ({problem}): {excerpt}")]
    BadPayload { problem: String, excerpt: String },

    /// The server lists no slurmdb API version bursar speaks.
    #[error(
        "slurmrestd offers no slurmdb API version bursar speaks (it lists {offered:?}; bursar \
         speaks v0.0.38, v0.0.40 to v0.0.45)"
    )]
    UnsupportedVersion { offered: Vec<String> },

    /// The client's configuration is unusable (bad URL, unreadable key file, …).
    #[error("slurmrestd client configuration: {0}")]
    Config(String),

    /// The request itself is invalid before anything is sent (empty window, bad user name, …).
    #[error("invalid slurmrestd request: {0}")]
    InvalidRequest(String),
}

/// Slurm errnos that no retry will fix, even when slurmrestd wraps them in an HTTP 500 (22.05
/// answers every failure with 500).
const PERMANENT_SLURM_ERRORS: [i64; 8] = [
    2001, // ESLURM_INVALID_PARTITION_NAME
    2002, // ESLURM_ACCESS_DENIED
    2017, // ESLURM_INVALID_JOB_ID
    2021, // ESLURM_ALREADY_DONE
    2045, // ESLURM_INVALID_ACCOUNT
    2127, // ESLURM_ENVIRONMENT_MISSING
    9000, // ESLURM_REST_INVALID_QUERY
    9001, // ESLURM_REST_FAIL_PARSING
];

/// SLURM_PROTOCOL_AUTHENTICATION_ERROR: what slurmdbd says about a bad token.
pub(crate) const SLURM_PROTOCOL_AUTHENTICATION_ERROR: i64 = 1007;
/// ESLURM_REST_EMPTY_RESULT: 22.05's "Nothing found", sent with `jobs: []` and HTTP 200.
pub(crate) const ESLURM_REST_EMPTY_RESULT: i64 = 9003;

impl RestError {
    /// Whether the same request may succeed if tried again later: transport trouble,
    /// timeouts, unreadable (e.g. cut-off) answers, 408/429 and 5xx answers — except 5xx
    /// answers that carry a Slurm errno known to be permanent (invalid account, access denied,
    /// unparsable query, …).
    ///
    /// A `submit_job` that failed with `Timeout` or `Transport` may still have created the job:
    /// look for it before submitting again.
    pub fn is_retryable(&self) -> bool {
        match self {
            RestError::Unreachable { .. }
            | RestError::Timeout { .. }
            | RestError::Transport { .. }
            | RestError::BadPayload { .. } => true,
            RestError::Server {
                status,
                error_number,
                ..
            } => match status {
                408 | 429 => true,
                500..=599 => !error_number.is_some_and(|n| PERMANENT_SLURM_ERRORS.contains(&n)),
                // errors[] in a 2xx answer: the query ran and failed inside Slurm
                200..=299 => !error_number.is_some_and(|n| PERMANENT_SLURM_ERRORS.contains(&n)),
                _ => false,
            },
            RestError::Auth { .. }
            | RestError::UnsupportedVersion { .. }
            | RestError::Config(_)
            | RestError::InvalidRequest(_) => false,
        }
    }

    /// Slurm's errno, for `Server` errors that carry one.
    pub fn slurm_error_number(&self) -> Option<i64> {
        match self {
            RestError::Server { error_number, .. } => *error_number,
            _ => None,
        }
    }
}

/// One entry of an answer's `errors[]`, in any version's shape: v0.0.38 has
/// `{description, error_number, error, source}` or `{error_code, error}`; v0.0.40+ has
/// `{description, error_number, error, source}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub number: Option<i64>,
    pub text: String,
}

/// The `errors[]` of a JSON answer (empty when there are none or the body is not JSON).
pub(crate) fn api_errors(body: &Value) -> Vec<ApiError> {
    body.get("errors").map(api_error_list).unwrap_or_default()
}

/// The entries of an `errors` value (anything but an array has none).
pub(crate) fn api_error_list(errors: &Value) -> Vec<ApiError> {
    let Some(errors) = errors.as_array() else {
        return Vec::new();
    };
    errors
        .iter()
        .map(|entry| {
            let text_of = |key: &str| {
                entry
                    .get(key)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
            };
            let number = entry
                .get("error_number")
                .or_else(|| entry.get("error_code"))
                .and_then(Value::as_i64);
            let text = match (text_of("description"), text_of("error")) {
                (Some(d), Some(e)) if d != e => format!("{d} ({e})"),
                (Some(d), _) => d.to_string(),
                (None, Some(e)) => e.to_string(),
                (None, None) => entry.to_string(),
            };
            ApiError { number, text }
        })
        .collect()
}

fn joined(errors: &[ApiError]) -> String {
    errors
        .iter()
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The text slurmrestd 22.05 answers an invalid, expired or wrong-key token with.
const CTL_CONF_QUIRK: &str = "slurmctld config is unable to load";
/// ESLURM_DB_CONNECTION: slurmrestd could not open its connection to slurmdbd.
const ESLURM_DB_CONNECTION: i64 = 7000;
/// What slurmrestd 24.11+ adds to ESLURM_DB_CONNECTION's description when slurmdbd refused the
/// token rather than being out of reach.
const DB_CONN_AUTH_FAILURE: &str = "slurmdbd connection, authentication error";

/// Turns a non-2xx answer into an error.
pub(crate) fn http_error(status: u16, body: &[u8], user: &str) -> RestError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let errors = json.as_ref().map(api_errors).unwrap_or_default();
    let message = if errors.is_empty() {
        let text = excerpt(body);
        if text.is_empty() {
            "(empty body)".to_string()
        } else {
            text
        }
    } else {
        joined(&errors)
    };

    if status == 401 || status == 403 {
        return RestError::Auth {
            user: user.to_string(),
            message: format!("HTTP {status}: {message} (missing or rejected token or user name)"),
        };
    }
    // 22.05: a bad token on /slurm/... fails inside slurm_load_ctl_conf(), whose errno is lost
    // (-1, "Unspecified error"); slurmctld's log says "jwt_decode failure" or "token expired".
    // A real controller outage keeps its errno (1001 …) and stays a retryable server error.
    if errors
        .iter()
        .any(|e| e.text.contains(CTL_CONF_QUIRK) && matches!(e.number, None | Some(-1)))
    {
        return RestError::Auth {
            user: user.to_string(),
            message: format!(
                "HTTP {status} \"{CTL_CONF_QUIRK}\": slurmrestd 22.05 answers this to an invalid, \
                 expired or wrong-key token, or to a token for another user than \
                 X-SLURM-USER-NAME that is not SlurmUser's; slurmctld's log has the real reason"
            ),
        };
    }
    // 24.11+: a token slurmdbd rejects fails the accounting connection itself, HTTP 502 with
    // ESLURM_DB_CONNECTION and this description; an outage says only "Failed to open slurmdbd
    // connection" and stays a retryable server error.
    if errors
        .iter()
        .any(|e| e.number == Some(ESLURM_DB_CONNECTION) && e.text.contains(DB_CONN_AUTH_FAILURE))
    {
        return RestError::Auth {
            user: user.to_string(),
            message: format!(
                "HTTP {status}: {message}: slurmdbd rejected the token (invalid, expired or signed \
                 with another key than slurmdbd's jwt_key)"
            ),
        };
    }
    if let Some(e) = errors
        .iter()
        .find(|e| e.number == Some(SLURM_PROTOCOL_AUTHENTICATION_ERROR))
    {
        return RestError::Auth {
            user: user.to_string(),
            message: format!("HTTP {status}: {}", e.text),
        };
    }
    RestError::Server {
        status,
        error_number: errors.iter().find_map(|e| e.number.filter(|n| *n > 0)),
        message,
    }
}

/// Checks the `errors[]` of a 2xx answer. 22.05's accounting endpoints answer HTTP 200 even
/// when they fail: "Nothing found" (9003) is an empty result, a bad token is
/// "Protocol authentication error" (1007), and anything else is an error — an empty page that
/// really was a failure must never look like "no jobs".
pub(crate) fn check_ok_errors(
    status: u16,
    errors: &[ApiError],
    user: &str,
) -> Result<(), RestError> {
    let real: Vec<ApiError> = errors
        .iter()
        .filter(|e| e.number != Some(ESLURM_REST_EMPTY_RESULT))
        .cloned()
        .collect();
    if real.is_empty() {
        return Ok(());
    }
    if real
        .iter()
        .any(|e| e.number == Some(SLURM_PROTOCOL_AUTHENTICATION_ERROR))
    {
        return Err(RestError::Auth {
            user: user.to_string(),
            message: format!(
                "HTTP {status} with errors[] \"{}\": slurmdbd rejected the token (invalid, expired \
                 or signed with another key)",
                joined(&real)
            ),
        });
    }
    Err(RestError::Server {
        status,
        error_number: real.iter().find_map(|e| e.number.filter(|n| *n > 0)),
        message: joined(&real),
    })
}

/// The start of a body for messages: at most 200 characters, on a character boundary, with
/// runs of whitespace and control characters shown as one space.
pub(crate) fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(body);
    let mut out = String::new();
    let mut taken = 0;
    let mut space = false;
    let mut cut = false;
    for c in text.trim().chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
            continue;
        }
        if taken + usize::from(space) + 1 > MAX {
            cut = true;
            break;
        }
        if space {
            out.push(' ');
            taken += 1;
            space = false;
        }
        out.push(c);
        taken += 1;
    }
    if cut {
        out.push_str(&format!("... ({} bytes in all)", body.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_from_every_error_shape() {
        let body: Value = serde_json::from_str(
            r#"{"errors":[{"description":"Unknown Query field","error_number":9000,
                "error":"Query empty or not RFC7320 compliant"},
               {"error_code":2045,"error":"Invalid account"}]}"#,
        )
        .unwrap();
        let errors = api_errors(&body);
        assert_eq!(
            errors,
            vec![
                ApiError {
                    number: Some(9000),
                    text: "Unknown Query field (Query empty or not RFC7320 compliant)".into()
                },
                ApiError {
                    number: Some(2045),
                    text: "Invalid account".into()
                }
            ]
        );
    }

    #[test]
    fn classification() {
        let quirk = br#"{"errors":[{"description":"slurmctld config is unable to load",
            "error_number":-1,"error":"Unspecified error","source":"slurm_load_ctl_conf"}]}"#;
        assert!(matches!(
            http_error(500, quirk, "alice"),
            RestError::Auth { .. }
        ));
        let outage = br#"{"errors":[{"description":"slurmctld config is unable to load",
            "error_number":1001,"error":"Unable to contact slurm controller"}]}"#;
        let err = http_error(500, outage, "alice");
        assert!(
            matches!(err, RestError::Server { status: 500, .. }),
            "{err}"
        );
        assert!(err.is_retryable());

        // Slurm 24.11's /slurmdb with a rejected token, and with slurmdbd down.
        let rejected = br#"{"errors":[{"description":"Failed to open slurmdbd connection, authentication error",
            "error_number":7000,"error":"Unable to connect to database","source":"openapi_get_db_conn"}]}"#;
        let err = http_error(502, rejected, "slurm");
        assert!(matches!(err, RestError::Auth { .. }), "{err}");
        assert!(!err.is_retryable());
        let down = br#"{"errors":[{"description":"Failed to open slurmdbd connection",
            "error_number":7000,"error":"Unable to connect to database","source":"openapi_get_db_conn"}]}"#;
        let err = http_error(502, down, "slurm");
        assert!(
            matches!(err, RestError::Server { status: 502, .. }),
            "{err}"
        );
        assert!(err.is_retryable());

        let err = http_error(401, b"Authentication failure", "alice");
        assert!(matches!(err, RestError::Auth { .. }));
        assert!(!err.is_retryable());

        let bad_account = br#"{"errors":[{"error_code":2045,"error":"Invalid account"}]}"#;
        let err = http_error(500, bad_account, "alice");
        assert_eq!(err.slurm_error_number(), Some(2045));
        assert!(!err.is_retryable());

        let err = http_error(400, b"Unable to parse query.", "alice");
        assert_eq!(
            err.to_string(),
            "slurmrestd answered HTTP 400: Unable to parse query."
        );
        assert!(!err.is_retryable());
        assert!(http_error(503, b"", "alice").is_retryable());
    }

    #[test]
    fn excerpts_are_short_and_clean() {
        assert_eq!(excerpt(b"  a\n\t  b  "), "a b");
        let long = vec![b'x'; 1000];
        let text = excerpt(&long);
        assert!(text.starts_with(&"x".repeat(200)));
        assert!(text.ends_with("(1000 bytes in all)"));
        assert_eq!(
            excerpt("é".repeat(300).as_bytes()).chars().next(),
            Some('é')
        );
    }
}
