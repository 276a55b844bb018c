//! Who is calling, and what they may do: JWT bearer tokens and the three roles.
//!
//! - [`TokenIssuer`] signs bursar's own tokens (HS256, a key file made by [`generate_key_file`]).
//! - [`TokenVerifier`] checks a bearer token and yields a [`Principal`]. Algorithms are pinned
//!   to key sources: an HS256 token is checked only against bursar's HS256 key, an RS256 token
//!   only against the identity provider's keys from a JWKS file. Nothing else is accepted
//!   (`alg: none`, other algorithms, and the RS256→HS256 key-confusion attack are refused
//!   before any key is touched).
//! - [`Principal::require`] is the coarse role check; account associations are the caller's.
//! - [`AuthConfig`] is the `auth:` section of the configuration.
//!
//! Every refusal is an [`AuthError`] whose `Display` is safe to send to the client (it never
//! contains the token or key material); [`AuthError::status`] is 401 or 403. Problems with the
//! keys themselves (unreadable, too short, too open, bad JWKS) are a [`KeyError`], meant for
//! the operator.
//!
//! Time is always passed in (`now`), so tests and the server agree on the clock; `exp` and
//! `nbf` get [`LEEWAY_SECS`] of slack for clock skew between hosts.

mod config;
mod error;
mod issue;
mod keys;
mod verify;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use config::AuthConfig;
pub use error::{AuthError, KeyError};
pub use issue::{generate_key_file, TokenIssuer, MAX_TTL};
pub use keys::MIN_HS256_KEY_LEN;
pub use verify::TokenVerifier;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: i64 = 30;

/// What a caller may do. Ordered by privilege: `User < Finance < Admin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Submits and quotes jobs, reads the balances and jobs of the accounts it is associated
    /// with.
    User,
    /// Reads every report, balance and job, exports; changes nothing.
    Finance,
    /// Changes accounts, associations, allocations and price tables, runs sync; reads all.
    Admin,
}

impl Role {
    /// The lowercase name used in tokens and config.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Finance => "finance",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not `user`, `finance` or `admin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role `{0}` (expected user, finance or admin)")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    /// Exact lowercase names only, as in tokens: `Admin` is not `admin`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "user" => Ok(Role::User),
            "finance" => Ok(Role::Finance),
            "admin" => Ok(Role::Admin),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

/// The verified caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user name bursar (and the clusters) know the caller by.
    pub user: String,
    pub role: Role,
    /// The token's `jti`, when it has one: for the audit log and for revocation later.
    pub token_id: Option<String>,
}

/// The privilege an operation needs, checked by [`Principal::require`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// Act on or read the caller's *own* accounts: submit, quote, see balances and jobs.
    /// Every role has it; the handler must still check that the caller is associated with
    /// the account in question (admins and finance may skip that check for reading, since
    /// they hold [`Needed::ReadAll`]).
    Read,
    /// Read any account, report or export, associated or not: finance and admin.
    ReadAll,
    /// Change shared state (accounts, associations, allocations, price tables, sync): admin.
    Change,
}

impl Needed {
    /// The lowest role that holds this privilege.
    pub fn min_role(self) -> Role {
        match self {
            Needed::Read => Role::User,
            Needed::ReadAll => Role::Finance,
            Needed::Change => Role::Admin,
        }
    }
}

impl fmt::Display for Needed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Needed::Read => "read its own accounts",
            Needed::ReadAll => "read accounts it is not associated with (finance or admin only)",
            Needed::Change => "change accounts, allocations or prices (admin only)",
        })
    }
}

impl Principal {
    /// `Ok` if the caller's role holds `needed`, else [`AuthError::Forbidden`] (HTTP 403).
    pub fn require(&self, needed: Needed) -> Result<(), AuthError> {
        if self.role >= needed.min_role() {
            Ok(())
        } else {
            Err(AuthError::Forbidden {
                role: self.role,
                needed,
            })
        }
    }
}

/// The token in an `Authorization` header value: `Bearer <jwt>` (scheme case-insensitive,
/// RFC 7235). No header, or an empty token, is [`AuthError::MissingToken`]; another scheme
/// (`Basic …`) is [`AuthError::NotBearer`].
pub fn from_header(header_value: Option<&str>) -> Result<&str, AuthError> {
    let value = header_value.map(str::trim).unwrap_or_default();
    if value.is_empty() {
        return Err(AuthError::MissingToken);
    }
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::NotBearer);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(AuthError::MissingToken);
    }
    Ok(token)
}
