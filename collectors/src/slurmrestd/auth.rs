//! Credentials for slurmrestd: HS256 tokens minted from the cluster's JWT key, or a static
//! token. Tokens are [`SecretString`]s end to end and never logged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use serde::{Deserialize, Serialize};

use super::error::RestError;

/// How the client authenticates. `Debug` shows no secret: the key file's path is printed, its
/// bytes are never held here, and a static token prints as `[REDACTED]`.
#[derive(Debug, Clone)]
pub enum SlurmAuth {
    /// Mint HS256 tokens with the key file that slurmctld and slurmdbd use
    /// (`AuthAltParameters=jwt_key=…`): its raw bytes, the trailing newline included if any.
    /// Accounting and discovery run as `user` (SlurmUser, `slurm`, sees every user's jobs);
    /// `submit_job`/`cancel_job` mint a token for the user they act as. Tokens live `lifetime`
    /// (10 s to 24 h; a few minutes is right) and are re-minted before they expire.
    JwtKey {
        key_file: PathBuf,
        user: String,
        lifetime: Duration,
    },
    /// A token minted elsewhere (`scontrol token`). To act as other users it must belong to
    /// SlurmUser or root, which slurmrestd lets set any `X-SLURM-USER-NAME`.
    Token { user: String, token: SecretString },
}

impl SlurmAuth {
    /// The user the client acts as by default.
    pub fn user(&self) -> &str {
        match self {
            SlurmAuth::JwtKey { user, .. } | SlurmAuth::Token { user, .. } => user,
        }
    }
}

/// The claims Slurm reads (`auth_jwt.c`): `sun` (the user name), `exp` (checked, no leeway),
/// `iat` (not checked, sent anyway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmClaims {
    pub sun: String,
    pub iat: i64,
    pub exp: i64,
}

/// Signs a Slurm token: header `{"alg":"HS256","typ":"JWT"}`, HMAC-SHA256 over `key`.
pub fn mint_token(key: &[u8], claims: &SlurmClaims) -> Result<SecretString, RestError> {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(key),
    )
    .map(SecretString::from)
    .map_err(|e| RestError::Config(format!("cannot sign a token: {e}")))
}

const MIN_LIFETIME: Duration = Duration::from_secs(10);
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Loaded credentials: the key's bytes (zeroized on drop) or the static token, and the
/// minted tokens per user.
pub(crate) struct Credentials {
    source: Source,
    default_user: String,
    cache: Mutex<HashMap<String, Cached>>,
}

enum Source {
    Key {
        key: SecretSlice<u8>,
        lifetime_secs: i64,
    },
    Static(SecretString),
}

struct Cached {
    token: SecretString,
    /// Epoch second from which a new token is minted instead.
    renew_at: i64,
}

/// Caches at most this many users' tokens; expired ones are dropped first.
const CACHE_USERS: usize = 1024;

impl Credentials {
    /// Reads the key file (once: a rotated key needs a new client) and checks the settings.
    pub(crate) fn load(auth: &SlurmAuth) -> Result<Credentials, RestError> {
        check_user(auth.user()).map_err(RestError::Config)?;
        let source = match auth {
            SlurmAuth::JwtKey {
                key_file, lifetime, ..
            } => {
                if *lifetime < MIN_LIFETIME || *lifetime > MAX_LIFETIME {
                    return Err(RestError::Config(format!(
                        "token lifetime {lifetime:?} is outside 10 s to 24 h"
                    )));
                }
                let bytes = std::fs::read(key_file).map_err(|e| {
                    RestError::Config(format!("reading JWT key file {}: {e}", key_file.display()))
                })?;
                if bytes.is_empty() {
                    return Err(RestError::Config(format!(
                        "JWT key file {} is empty",
                        key_file.display()
                    )));
                }
                Source::Key {
                    key: SecretSlice::from(bytes),
                    lifetime_secs: i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX),
                }
            }
            SlurmAuth::Token { token, .. } => {
                if token.expose_secret().trim().is_empty() {
                    return Err(RestError::Config("the static token is empty".into()));
                }
                Source::Static(token.clone())
            }
        };
        Ok(Credentials {
            source,
            default_user: auth.user().to_string(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn default_user(&self) -> &str {
        &self.default_user
    }

    /// The token to send for `user`, minted (or reused) now.
    pub(crate) fn token_for(&self, user: &str) -> Result<SecretString, RestError> {
        self.token_at(user, now_epoch())
    }

    pub(crate) fn token_at(&self, user: &str, now: i64) -> Result<SecretString, RestError> {
        check_user(user).map_err(RestError::InvalidRequest)?;
        let (key, lifetime) = match &self.source {
            Source::Static(token) => return Ok(token.clone()),
            Source::Key { key, lifetime_secs } => (key, *lifetime_secs),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = cache.get(user) {
            if now < cached.renew_at {
                return Ok(cached.token.clone());
            }
        }
        let exp = now.saturating_add(lifetime);
        let claims = SlurmClaims {
            sun: user.to_string(),
            iat: now,
            exp,
        };
        let token = mint_token(key.expose_secret(), &claims)?;
        // Renew a fifth of the lifetime early (at most a minute, at least a second), so a token
        // never expires between being handed out and reaching slurmctld.
        let margin = (lifetime / 5).clamp(1, 60);
        if cache.len() >= CACHE_USERS {
            cache.retain(|_, c| now < c.renew_at);
            if cache.len() >= CACHE_USERS {
                cache.clear();
            }
        }
        cache.insert(
            user.to_string(),
            Cached {
                token: token.clone(),
                renew_at: exp - margin,
            },
        );
        Ok(token)
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.source {
            Source::Key { lifetime_secs, .. } => format!("jwt key, tokens live {lifetime_secs} s"),
            Source::Static(_) => "static token".to_string(),
        };
        f.debug_struct("Credentials")
            .field("user", &self.default_user)
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

/// A user name fit for `X-SLURM-USER-NAME` and `sun`: non-empty visible ASCII.
pub(crate) fn check_user(user: &str) -> Result<(), String> {
    if user.is_empty() {
        return Err("the user name is empty".into());
    }
    if !user.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "user name {user:?} has characters that cannot go in an HTTP header"
        ));
    }
    Ok(())
}

fn now_epoch() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{decode, DecodingKey, Validation};

    fn key_file(bytes: &[u8]) -> (tempfile::NamedTempFile, PathBuf) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        let path = file.path().to_path_buf();
        (file, path)
    }

    fn claims_of(token: &SecretString, key: &[u8]) -> SlurmClaims {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        decode::<SlurmClaims>(
            token.expose_secret(),
            &DecodingKey::from_secret(key),
            &validation,
        )
        .unwrap()
        .claims
    }

    #[test]
    fn mints_caches_and_renews_per_user() {
        let key = b"0123456789abcdef0123456789abcdef\n";
        let (_guard, path) = key_file(key);
        let auth = SlurmAuth::JwtKey {
            key_file: path,
            user: "slurm".into(),
            lifetime: Duration::from_secs(300),
        };
        let creds = Credentials::load(&auth).unwrap();
        let t0 = 1_800_000_000;
        let first = creds.token_at("slurm", t0).unwrap();
        assert_eq!(
            claims_of(&first, key),
            SlurmClaims {
                sun: "slurm".into(),
                iat: t0,
                exp: t0 + 300
            }
        );
        // reused until a minute before expiry, then re-minted
        let again = creds.token_at("slurm", t0 + 239).unwrap();
        assert_eq!(again.expose_secret(), first.expose_secret());
        let renewed = creds.token_at("slurm", t0 + 240).unwrap();
        assert_eq!(claims_of(&renewed, key).iat, t0 + 240);
        // another user gets their own token
        let alice = creds.token_at("alice", t0 + 1).unwrap();
        assert_eq!(claims_of(&alice, key).sun, "alice");

        assert!(creds.token_at("", t0).is_err());
        assert!(creds.token_at("al ice", t0).is_err());
        let debug = format!("{creds:?}");
        assert!(!debug.contains(first.expose_secret()), "{debug}");
    }

    #[test]
    fn refuses_bad_settings() {
        let missing = SlurmAuth::JwtKey {
            key_file: "/nonexistent/jwt.key".into(),
            user: "slurm".into(),
            lifetime: Duration::from_secs(300),
        };
        let err = Credentials::load(&missing).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/jwt.key"), "{err}");

        let (_guard, path) = key_file(b"k");
        let short = SlurmAuth::JwtKey {
            key_file: path,
            user: "slurm".into(),
            lifetime: Duration::from_secs(1),
        };
        assert!(Credentials::load(&short).is_err());

        let token = SlurmAuth::Token {
            user: "slurm".into(),
            token: SecretString::from("s3cr3t-token"),
        };
        assert!(!format!("{token:?}").contains("s3cr3t"));
        let creds = Credentials::load(&token).unwrap();
        assert_eq!(
            creds.token_for("alice").unwrap().expose_secret(),
            "s3cr3t-token"
        );
    }
}
