//! Signing bursar's own tokens (HS256) and making the key they are signed with.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, ExposeSecretMut, SecretSlice, SecretString};
use serde::Serialize;

use super::keys::{random_bytes, read_hs256_key};
use super::{AuthConfig, KeyError, Role};

/// The longest lifetime [`TokenIssuer::issue`] signs: 366 days. There is no revocation yet, so
/// a leaked token is good until it expires.
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// Bytes of randomness in a key made by [`generate_key_file`] (the HMAC-SHA256 block size).
const GENERATED_KEY_LEN: usize = 64;

/// Signs HS256 tokens with bursar's key. `Debug` shows the key file's path, never the key.
pub struct TokenIssuer {
    key: SecretSlice<u8>,
    key_file: PathBuf,
    issuer: String,
    audience: String,
}

impl fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("key_file", &self.key_file)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// The claims of a bursar token.
#[derive(Serialize)]
struct IssuedClaims<'a> {
    sub: &'a str,
    role: Role,
    iss: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
    jti: String,
}

impl TokenIssuer {
    /// Reads the key file (see [`AuthConfig::hs256_key_file`]): refused if shorter than
    /// [`super::MIN_HS256_KEY_LEN`] bytes or readable/writable by group or others.
    pub fn from_key_file(
        path: impl AsRef<Path>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<TokenIssuer, KeyError> {
        let path = path.as_ref();
        Ok(TokenIssuer {
            key: read_hs256_key(path)?,
            key_file: path.to_path_buf(),
            issuer: issuer.into(),
            audience: audience.into(),
        })
    }

    /// The issuer for `config`, or `None` when it has no `hs256_key_file`.
    pub fn from_config(config: &AuthConfig) -> Result<Option<TokenIssuer>, KeyError> {
        config
            .hs256_key_file
            .as_ref()
            .map(|path| TokenIssuer::from_key_file(path, &config.issuer, &config.audience))
            .transpose()
    }

    /// Signs a token for `user` with `role`, valid from `now` for `ttl` (1 s to [`MAX_TTL`]).
    /// Claims: `sub`, `role`, `iss`, `aud`, `iat`, `exp` and a random `jti`.
    pub fn issue(
        &self,
        user: &str,
        role: Role,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<SecretString, KeyError> {
        if user.is_empty() || user.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(KeyError::Issue(format!(
                "user name {user:?} is empty or contains spaces or control characters"
            )));
        }
        if ttl < Duration::from_secs(1) || ttl > MAX_TTL {
            return Err(KeyError::Issue(format!(
                "lifetime {ttl:?} is outside 1 s to {} days",
                MAX_TTL.as_secs() / 86_400
            )));
        }
        let iat = now.timestamp();
        // ttl ≤ MAX_TTL, so this neither truncates nor overflows for any sane clock.
        let exp = iat.saturating_add(ttl.as_secs() as i64);
        let mut jti = [0u8; 16];
        random_bytes(&mut jti)?;
        let claims = IssuedClaims {
            sub: user,
            role,
            iss: &self.issuer,
            aud: &self.audience,
            iat,
            exp,
            jti: URL_SAFE_NO_PAD.encode(jti),
        };
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(self.key.expose_secret()),
        )
        .map(SecretString::from)
        .map_err(|e| KeyError::Issue(e.to_string()))
    }
}

/// Writes a new HS256 key (64 random bytes from the operating system) to `path`, created with
/// mode 0600. Refuses to overwrite an existing file, so a running gateway's key is never
/// replaced by accident (`bursar token keygen`).
pub fn generate_key_file(path: impl AsRef<Path>) -> Result<(), KeyError> {
    let path = path.as_ref();
    let io = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            KeyError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    let mut key = SecretSlice::from(vec![0u8; GENERATED_KEY_LEN]);
    random_bytes(key.expose_secret_mut())?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io)?;
    let written = file
        .write_all(key.expose_secret())
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        // Leave no truncated key behind.
        let _ = std::fs::remove_file(path);
        return Err(io(e));
    }
    Ok(())
}
