//! Verifying bearer tokens: algorithm pinned to key source, then the claims, against `now`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rustc_hash::FxBuildHasher;
use secrecy::{ExposeSecret, SecretSlice};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::keys::{decode_b64url, read_hs256_key, read_jwks, RsaKey};
use super::{from_header, AuthConfig, AuthError, KeyError, Principal, Role, LEEWAY_SECS};

/// Longer bearer values are refused unread (real tokens are well under 4 KiB).
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// Tokens remembered as verified, at most (see [`Verified`]); the memory is bounded by
/// [`MAX_CACHED_TOKEN_LEN`] too.
const CACHED_TOKENS: usize = 1024;

/// Longer tokens are verified every time and never remembered.
const MAX_CACHED_TOKEN_LEN: usize = 4 * 1024;

/// A token whose signature and claims held. A client sends the same token with every request
/// until it expires: the next request with the exact same text skips the base64, the HMAC or
/// RSA check and the claims' JSON (a fifth of a quote's CPU), and only its time claims are
/// checked again, against that call's `now`. The key material never changes in a running
/// verifier, so neither can the outcome of anything else.
#[derive(Clone)]
struct Verified {
    principal: Principal,
    exp: i64,
    nbf: Option<i64>,
}

/// Checks bearer tokens. Built once at start from [`AuthConfig`]; cheap to share behind an
/// `Arc`. `Debug` shows file paths, key ids and settings, never key material.
pub struct TokenVerifier {
    hs256: Option<(SecretSlice<u8>, PathBuf)>,
    rsa: Vec<RsaKey>,
    jwks_file: Option<PathBuf>,
    issuer: String,
    audience: String,
    idp_issuers: Vec<String>,
    idp_audiences: Vec<String>,
    user_claim: String,
    role_claim: String,
    role_map: BTreeMap<String, Role>,
    /// Tokens verified before, by their exact text.
    verified: Mutex<HashMap<Box<str>, Verified, FxBuildHasher>>,
}

impl fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("hs256_key_file", &self.hs256.as_ref().map(|(_, path)| path))
            .field("jwks_file", &self.jwks_file)
            .field("rsa_keys", &self.rsa)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("idp_issuers", &self.idp_issuers)
            .field("idp_audiences", &self.idp_audiences)
            .field("user_claim", &self.user_claim)
            .field("role_claim", &self.role_claim)
            .field("role_map", &self.role_map)
            .finish()
    }
}

/// Where a token's key came from, which decides how its claims are read.
#[derive(Clone, Copy)]
enum Source {
    /// HS256, signed by bursar: `sub` and `role`, bursar's issuer.
    Bursar,
    /// RS256, signed by the identity provider: configured claims, the IdP's issuers.
    Idp,
}

/// The JOSE header members looked at before any key is chosen.
#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// RFC 7515 §4.1.11: extensions the recipient must understand. bursar understands none.
    #[serde(default)]
    crit: Option<Value>,
}

impl TokenVerifier {
    /// Reads the keys `config` names. Fails if it names none, or if a key file is unreadable,
    /// too open, too short or not a usable JWKS.
    pub fn from_config(config: &AuthConfig) -> Result<TokenVerifier, KeyError> {
        if config.hs256_key_file.is_none() && config.jwks_file.is_none() {
            return Err(KeyError::NoKeys);
        }
        let hs256 = match &config.hs256_key_file {
            Some(path) => Some((read_hs256_key(path)?, path.clone())),
            None => None,
        };
        let rsa = match &config.jwks_file {
            Some(path) => read_jwks(path)?,
            None => Vec::new(),
        };
        let or_default = |list: &[String], default: &str| {
            if list.is_empty() {
                vec![default.to_string()]
            } else {
                list.to_vec()
            }
        };
        Ok(TokenVerifier {
            hs256,
            rsa,
            jwks_file: config.jwks_file.clone(),
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            idp_issuers: or_default(&config.idp_issuers, &config.issuer),
            idp_audiences: or_default(&config.idp_audiences, &config.audience),
            user_claim: config.user_claim.clone().unwrap_or_else(|| "sub".into()),
            role_claim: config.role_claim.clone().unwrap_or_else(|| "role".into()),
            role_map: config.role_map.clone(),
            verified: Mutex::new(HashMap::default()),
        })
    }

    /// [`from_header`] then [`TokenVerifier::verify`].
    pub fn verify_header(
        &self,
        header_value: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Principal, AuthError> {
        self.verify(from_header(header_value)?, now)
    }

    /// Verifies a bearer token (without the `Bearer ` prefix) as of `now`.
    ///
    /// Order: shape and header; the algorithm picks the key source (HS256 → bursar's key,
    /// RS256 → the JWKS by `kid`; nothing else); the signature; then `exp` (required), `nbf`,
    /// `iss`, `aud`, the user and the role. Claims are only read once the signature holds.
    pub fn verify(&self, bearer: &str, now: DateTime<Utc>) -> Result<Principal, AuthError> {
        if bearer.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed);
        }
        let remembered = self.remembered().get(bearer).cloned();
        if let Some(known) = remembered {
            check_times(known.exp, known.nbf, now.timestamp())?;
            return Ok(known.principal);
        }
        let verified = self.verify_afresh(bearer, now)?;
        if bearer.len() <= MAX_CACHED_TOKEN_LEN {
            let mut cache = self.remembered();
            // Full: start again rather than track use (a site with more live tokens than this
            // pays a full check per token once per round).
            if cache.len() >= CACHED_TOKENS {
                cache.clear();
            }
            cache.insert(bearer.into(), verified.clone());
        }
        Ok(verified.principal)
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Verified, FxBuildHasher>> {
        // A panic while the map was held leaves it usable: at worst an entry is missing.
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything [`TokenVerifier::verify`] checks, without the cache.
    fn verify_afresh(&self, bearer: &str, now: DateTime<Utc>) -> Result<Verified, AuthError> {
        let mut parts = bearer.split('.');
        let (Some(header), Some(_), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed);
        };
        let header: JoseHeader = decode_b64url(header)
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or(AuthError::Malformed)?;
        if header.crit.is_some() {
            return Err(AuthError::Malformed);
        }

        let hs256_key;
        let (alg, key, source): (Algorithm, &DecodingKey, Source) = match header.alg.as_str() {
            alg if alg.eq_ignore_ascii_case("none") => return Err(AuthError::Unsigned),
            "HS256" => {
                let (secret, _) = self.hs256.as_ref().ok_or_else(|| not_accepted("HS256"))?;
                hs256_key = DecodingKey::from_secret(secret.expose_secret());
                (Algorithm::HS256, &hs256_key, Source::Bursar)
            }
            "RS256" => {
                let key = self.rsa_key(header.kid.as_deref())?;
                (Algorithm::RS256, key, Source::Idp)
            }
            other => return Err(not_accepted(other)),
        };

        let claims = check_signature(bearer, key, alg)?;
        self.check_claims(&claims, source, now)
    }

    /// The JWKS key for `kid`; without a `kid`, the only key if there is exactly one.
    fn rsa_key(&self, kid: Option<&str>) -> Result<&DecodingKey, AuthError> {
        if self.rsa.is_empty() {
            return Err(not_accepted("RS256"));
        }
        let key = match kid {
            Some(kid) => self
                .rsa
                .iter()
                .find(|k| k.kid.as_deref() == Some(kid))
                .ok_or(AuthError::UnknownKey)?,
            None => match self.rsa.as_slice() {
                [only] => only,
                _ => return Err(AuthError::KeyIdRequired),
            },
        };
        Ok(&key.key)
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        source: Source,
        now: DateTime<Utc>,
    ) -> Result<Verified, AuthError> {
        let exp = numeric_date(claims, "exp")?.ok_or_else(|| missing("exp"))?;
        let nbf = numeric_date(claims, "nbf")?;
        check_times(exp, nbf, now.timestamp())?;

        let (issuers, audiences) = match source {
            Source::Bursar => (
                std::slice::from_ref(&self.issuer),
                std::slice::from_ref(&self.audience),
            ),
            Source::Idp => (self.idp_issuers.as_slice(), self.idp_audiences.as_slice()),
        };
        let iss = match claims.get("iss") {
            None => return Err(missing("iss")),
            Some(Value::String(iss)) => iss,
            Some(_) => return Err(invalid("iss")),
        };
        if !issuers.contains(iss) {
            return Err(AuthError::WrongIssuer);
        }
        let aud_ok = match claims.get("aud") {
            None => return Err(missing("aud")),
            Some(Value::String(aud)) => audiences.contains(aud),
            Some(Value::Array(auds)) => auds
                .iter()
                .any(|a| a.as_str().is_some_and(|a| audiences.iter().any(|x| x == a))),
            Some(_) => return Err(invalid("aud")),
        };
        if !aud_ok {
            return Err(AuthError::WrongAudience);
        }

        let (user_claim, role) = match source {
            Source::Bursar => {
                let role = match claims.get("role") {
                    None => return Err(missing("role")),
                    Some(Value::String(role)) => role.parse().map_err(|_| invalid("role"))?,
                    Some(_) => return Err(invalid("role")),
                };
                ("sub", role)
            }
            Source::Idp => (self.user_claim.as_str(), self.idp_role(claims)?),
        };
        let user = match claims.get(user_claim) {
            None => return Err(missing(user_claim)),
            Some(Value::String(user)) if is_user_name(user) => user.clone(),
            Some(_) => return Err(invalid(user_claim)),
        };
        let token_id = claims
            .get("jti")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Verified {
            principal: Principal {
                user,
                role,
                token_id,
            },
            exp,
            nbf,
        })
    }

    /// The role of an identity-provider token: the highest role any value of the role claim
    /// maps to, `user` if none does (or the claim is absent).
    fn idp_role(&self, claims: &Map<String, Value>) -> Result<Role, AuthError> {
        let values: Vec<&str> = match claims.get(&self.role_claim) {
            None => Vec::new(),
            Some(Value::String(v)) => vec![v.as_str()],
            Some(Value::Array(vs)) => vs.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(invalid(&self.role_claim)),
        };
        let role_of = |v: &str| -> Option<Role> {
            if self.role_map.is_empty() {
                v.parse().ok()
            } else {
                self.role_map.get(v).copied()
            }
        };
        Ok(values
            .into_iter()
            .filter_map(role_of)
            .max()
            .unwrap_or(Role::User))
    }
}

/// Checks the signature with `key` under exactly `alg` and returns the payload. jsonwebtoken's
/// own time, issuer and audience checks are off: they read the system clock, and bursar checks
/// those claims itself against the `now` it is given.
fn check_signature(
    token: &str,
    key: &DecodingKey,
    alg: Algorithm,
) -> Result<Map<String, Value>, AuthError> {
    let mut validation = Validation::new(alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.leeway = 0;
    match jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation) {
        Ok(data) => Ok(data.claims),
        Err(e) => Err(match e.kind() {
            ErrorKind::InvalidSignature => AuthError::BadSignature,
            ErrorKind::InvalidToken
            | ErrorKind::Base64(_)
            | ErrorKind::Json(_)
            | ErrorKind::Utf8(_) => AuthError::Malformed,
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
                not_accepted(&format!("{alg:?}"))
            }
            _ => {
                // e.g. a JWKS key ring rejects; the detail is for the operator, not the client.
                tracing::debug!(error = %e, "token signature check failed");
                AuthError::BadSignature
            }
        }),
    }
}

/// `exp` and `nbf` against `now`, with [`LEEWAY_SECS`] of slack.
fn check_times(exp: i64, nbf: Option<i64>, now: i64) -> Result<(), AuthError> {
    if now >= exp.saturating_add(LEEWAY_SECS) {
        return Err(AuthError::Expired);
    }
    if nbf.is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_SECS)) {
        return Err(AuthError::NotYetValid);
    }
    Ok(())
}

/// A NumericDate claim (RFC 7519 §2: seconds, possibly fractional), `None` if absent.
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, AuthError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(secs) = n.as_i64() {
                return Ok(Some(secs));
            }
            match n.as_f64() {
                // Whole seconds suffice; `as` saturates, so absurd values stay absurd, not UB.
                Some(secs) if secs.is_finite() => Ok(Some(secs.floor() as i64)),
                _ => Err(invalid(name)),
            }
        }
        Some(_) => Err(invalid(name)),
    }
}

fn is_user_name(user: &str) -> bool {
    !user.is_empty() && user.len() <= 256 && !user.chars().any(|c| c.is_control())
}

fn missing(claim: &str) -> AuthError {
    AuthError::MissingClaim(claim.to_string())
}

fn invalid(claim: &str) -> AuthError {
    AuthError::InvalidClaim(claim.to_string())
}

/// `alg` as shown to the client: at most 16 ASCII alphanumerics, so a hostile header cannot
/// put arbitrary text into the response.
fn not_accepted(alg: &str) -> AuthError {
    let alg: String = alg
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    AuthError::AlgorithmNotAccepted {
        alg: if alg.is_empty() { "?".into() } else { alg },
    }
}
