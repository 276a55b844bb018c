//! The two error types: [`AuthError`] for callers, [`KeyError`] for the operator.

use std::path::PathBuf;

use super::{Needed, Role};

/// Why a request was refused. `Display` is written for the client: it names what is wrong with
/// the token, never the token itself or any key. Every variant but [`AuthError::Forbidden`] is
/// HTTP 401; `Forbidden` is 403.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header, or `Bearer` with nothing after it.
    #[error("no bearer token: send `Authorization: Bearer <token>`")]
    MissingToken,
    /// An `Authorization` header with another scheme (`Basic …`).
    #[error("the authorization header is not of the form `Bearer <token>`")]
    NotBearer,
    /// Not three base64url parts, a header or payload that is not a JSON object, an oversized
    /// token, or a `crit` header parameter (no extensions are understood).
    #[error("the token is not a well-formed JWT")]
    Malformed,
    /// `alg: none` (any case).
    #[error("the token is unsigned (alg none)")]
    Unsigned,
    /// An algorithm for which no key is configured (e.g. HS256 when only a JWKS is set up, or
    /// RS256 when only the HS256 key is), or one bursar never accepts. `alg` is sanitised.
    #[error("tokens signed with {alg} are not accepted here")]
    AlgorithmNotAccepted { alg: String },
    /// An RS256 token whose `kid` is not in the JWKS.
    #[error("the token's signing key (kid) is not trusted")]
    UnknownKey,
    /// An RS256 token without `kid` while the JWKS holds several keys.
    #[error("the token names no signing key (kid) and several are trusted")]
    KeyIdRequired,
    /// The signature does not verify with the key the header selects.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// A required claim is absent (`exp`, `iss`, `aud`, `sub` or the configured user claim,
    /// `role` in bursar's own tokens).
    #[error("the token has no `{0}` claim")]
    MissingClaim(String),
    /// A claim of the wrong type or with a value bursar does not know (`role: "root"`).
    #[error("the token's `{0}` claim is not valid")]
    InvalidClaim(String),
    /// `exp` is more than the leeway in the past.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is more than the leeway in the future.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is not a trusted issuer for this kind of token.
    #[error("the token's issuer is not trusted")]
    WrongIssuer,
    /// `aud` does not name this service.
    #[error("the token is not meant for this service (audience)")]
    WrongAudience,
    /// A valid token whose role lacks the privilege (HTTP 403).
    #[error("a {role} token may not {needed}")]
    Forbidden { role: Role, needed: Needed },
}

impl AuthError {
    /// The HTTP status: 403 for [`AuthError::Forbidden`], 401 for everything else.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::Forbidden { .. } => 403,
            _ => 401,
        }
    }

    /// A stable machine-readable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingToken | AuthError::NotBearer => "missing_token",
            AuthError::Expired => "token_expired",
            AuthError::Forbidden { .. } => "forbidden",
            _ => "invalid_token",
        }
    }

    /// The `WWW-Authenticate` header value for the response (RFC 6750 §3).
    pub fn www_authenticate(&self) -> &'static str {
        match self {
            AuthError::MissingToken | AuthError::NotBearer => r#"Bearer realm="bursar""#,
            AuthError::Forbidden { .. } => r#"Bearer realm="bursar", error="insufficient_scope""#,
            _ => r#"Bearer realm="bursar", error="invalid_token""#,
        }
    }
}

/// A problem with bursar's token keys, for the operator (paths, never key bytes).
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "HS256 key file {} holds {len} bytes; at least {min} are needed \
         (make one with `bursar token keygen`)",
        path.display()
    )]
    TooShort {
        path: PathBuf,
        len: usize,
        min: usize,
    },
    #[error(
        "HS256 key file {} is readable or writable by others (mode {mode:03o}); \
         run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("{} already exists; refusing to overwrite a key", path.display())]
    Exists { path: PathBuf },
    #[error("JWKS file {}: {reason}", path.display())]
    Jwks { path: PathBuf, reason: String },
    #[error("auth: neither hs256_key_file nor jwks_file is set, so no token could be verified")]
    NoKeys,
    #[error("no random bytes from the operating system: {0}")]
    Random(String),
    #[error("cannot issue a token: {0}")]
    Issue(String),
}
