//! [`Client`]: JSON over HTTP to the bursar server, with the bearer token, timeouts, one retry
//! after a connection error, and the server's errors turned into [`ApiError`].

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::config::{ClientConfig, TokenSource, CONNECT_TIMEOUT};
use super::{ApiError, ClientError};

/// Pause before the one retry after a connection error: long enough for a restarting server
/// or a flapping link, short enough not to annoy.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Talks to one bursar server as one user.
pub struct Client {
    http: reqwest::Client,
    url: String,
    token: SecretString,
    token_source: TokenSource,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("token_source", &self.token_source)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(config: &ClientConfig) -> Result<Client, ClientError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("bursar/", env!("CARGO_PKG_VERSION")))
            .timeout(config.timeout)
            .connect_timeout(CONNECT_TIMEOUT.min(config.timeout))
            // A redirect would resend the bearer token somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Config(format!("cannot set up HTTP: {e}")))?;
        Ok(Client {
            http,
            url: config.url.clone(),
            token: config.token.clone(),
            token_source: config.token_source.clone(),
            timeout: config.timeout,
        })
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `GET path` (with its query string), the answer as JSON.
    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, path, None::<&()>, None).await
    }

    /// `POST path` with a JSON body and, when given, an `Idempotency-Key`.
    pub async fn post(
        &self,
        path: &str,
        body: &impl Serialize,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.call(Method::POST, path, Some(body), idempotency_key)
            .await
    }

    /// `DELETE path`; an empty answer is `null`.
    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::DELETE, path, None::<&()>, None).await
    }

    /// Decodes an answer into `T`, or says what was wrong with it.
    pub fn decode<T: DeserializeOwned>(&self, what: &str, value: Value) -> Result<T, ClientError> {
        serde_json::from_value(value).map_err(|e| ClientError::Unexpected {
            url: self.url.clone(),
            status: 200,
            reason: format!("{what}: {e}"),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        let build = || {
            let mut request: RequestBuilder = self
                .http
                .request(method.clone(), format!("{}{path}", self.url))
                .bearer_auth(self.token.expose_secret())
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some(key) = idempotency_key {
                request = request.header("Idempotency-Key", key);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            request
        };
        // One retry after a connection error, with the same Idempotency-Key: if the first
        // attempt did reach the server, it answers the retry with the first answer.
        let response = match build().send().await {
            Err(e) if retryable(&e) => {
                tracing::debug!("{method} {path}: {e}; retrying once");
                tokio::time::sleep(RETRY_PAUSE).await;
                build().send().await
            }
            other => other,
        }
        .map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e))?;
        let value: Option<Value> = if bytes.iter().all(u8::is_ascii_whitespace) {
            Some(Value::Null)
        } else {
            serde_json::from_slice(&bytes).ok()
        };
        if status.is_success() {
            return value.ok_or_else(|| ClientError::Unexpected {
                url: self.url.clone(),
                status: status.as_u16(),
                reason: format!("not JSON: {}", snippet(&bytes)),
            });
        }
        Err(self.refusal(status, value, &bytes))
    }

    /// A non-2xx answer: the API's error body when there is one.
    fn refusal(&self, status: StatusCode, value: Option<Value>, bytes: &[u8]) -> ClientError {
        let field = |name: &str| {
            value
                .as_ref()
                .and_then(|v| v.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (Some(code), Some(message)) = (field("error"), field("message")) else {
            return ClientError::Unexpected {
                url: self.url.clone(),
                status: status.as_u16(),
                reason: format!(
                    "{}{}",
                    status.canonical_reason().unwrap_or("error"),
                    match snippet(bytes) {
                        s if s.is_empty() => String::new(),
                        s => format!(": {s}"),
                    }
                ),
            };
        };
        let details = value
            .as_ref()
            .and_then(|v| v.get("details"))
            .cloned()
            .unwrap_or(Value::Null);
        // The server's messages say what happened to the hold (502, 503), so only a refused
        // token needs a word from the client: where the token came from.
        let hint = (status == StatusCode::UNAUTHORIZED).then(|| {
            format!(
                "the token from {} was refused: ask your admin for a new one \
                 (`bursar token issue`)",
                self.token_source
            )
        });
        ClientError::Api(ApiError {
            status: status.as_u16(),
            code,
            message,
            details,
            hint,
        })
    }

    fn transport_error(&self, e: &reqwest::Error) -> ClientError {
        if e.is_timeout() {
            return ClientError::Timeout {
                url: self.url.clone(),
                seconds: self.timeout.as_secs(),
            };
        }
        ClientError::Unreachable {
            url: self.url.clone(),
            reason: root_cause(e),
        }
    }
}

/// Connection refused, reset or closed before an answer; not a timeout (waiting again would
/// double an already long wait).
fn retryable(e: &reqwest::Error) -> bool {
    !e.is_timeout() && (e.is_connect() || e.is_request())
}

/// The innermost error's text ("Connection refused (os error 111)"), which says more than
/// reqwest's "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// At most 200 characters of a body, on one line.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

/// A fresh `Idempotency-Key`, one per command invocation: a version 7 UUID (RFC 9562), the
/// current Unix time in milliseconds followed by 74 random bits. Keys made one after another
/// sort one after another, so the server's unique index on them grows at its end, as a log
/// does, instead of at a random page of the index for every submission.
pub fn idempotency_key() -> Result<String, ClientError> {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    Ok(uuid_v7(millis, random_bits()?))
}

fn random_bits() -> Result<[u8; 10], ClientError> {
    let mut b = [0u8; 10];
    getrandom::getrandom(&mut b)
        .map_err(|e| ClientError::Config(format!("no randomness for the idempotency key: {e}")))?;
    Ok(b)
}

/// The UUID of version 7 for `millis` (its low 48 bits) and `random`.
fn uuid_v7(millis: u128, random: [u8; 10]) -> String {
    let mut b = [0u8; 16];
    b[..6].copy_from_slice(&(millis as u64 & 0xffff_ffff_ffff).to_be_bytes()[2..]);
    b[6..].copy_from_slice(&random);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Percent-encodes one path segment (a job id or account name).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_v7_uuids_that_differ_and_sort_by_time() {
        let a = idempotency_key().unwrap();
        let b = idempotency_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!("89ab".contains(&a[19..20]), "{a}");
        let earlier = uuid_v7(1_700_000_000_000, [0xff; 10]);
        let later = uuid_v7(1_700_000_000_001, [0; 10]);
        assert!(earlier < later, "{earlier} {later}");
        // RFC 9562's example: 2022-02-22 19:22:22 UTC.
        let example = uuid_v7(
            0x017f_22e2_79b0,
            [0xcc, 0xc3, 0x18, 0xc4, 0xdc, 0xc, 0xc, 0x7, 0x39, 0x8f],
        );
        assert_eq!(example, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(segment("physics"), "physics");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn snippets_are_short() {
        assert_eq!(
            snippet(b"<html>\n <b>bad</b>\n</html>"),
            "<html> <b>bad</b> </html>"
        );
        assert_eq!(snippet(&[b'x'; 300]).chars().count(), 201);
    }
}
