//! Reading keys: bursar's HS256 key file and the identity provider's JWKS file.

use std::fmt;
use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::DecodingKey;
use secrecy::SecretSlice;
use serde::Deserialize;

use super::KeyError;

/// The shortest HS256 key accepted, in bytes (RFC 7518 §3.2: at least the hash size).
pub const MIN_HS256_KEY_LEN: usize = 32;

/// RSA moduli outside this range (bits) are refused when the JWKS is loaded, rather than
/// failing every verification later.
const MIN_RSA_BITS: usize = 2048;
const MAX_RSA_BITS: usize = 8192;

/// Reads an HS256 key file: raw bytes (a trailing newline, if any, is part of the key),
/// at least [`MIN_HS256_KEY_LEN`] of them, not readable or writable by group or others.
pub(crate) fn read_hs256_key(path: &Path) -> Result<SecretSlice<u8>, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    check_private(path, &meta)?;
    let bytes = std::fs::read(path).map_err(io)?;
    let len = bytes.len();
    // Wrap before any early return so the bytes are zeroized on every path.
    let key = SecretSlice::from(bytes);
    if len < MIN_HS256_KEY_LEN {
        return Err(KeyError::TooShort {
            path: path.to_path_buf(),
            len,
            min: MIN_HS256_KEY_LEN,
        });
    }
    Ok(key)
}

#[cfg(unix)]
fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o066 != 0 {
        return Err(KeyError::TooOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), KeyError> {
    Ok(())
}

/// Fills `buf` from the operating system's CSPRNG.
pub(crate) fn random_bytes(buf: &mut [u8]) -> Result<(), KeyError> {
    getrandom::getrandom(buf).map_err(|e| KeyError::Random(e.to_string()))
}

/// One RSA verification key from the JWKS.
#[derive(Clone)]
pub(crate) struct RsaKey {
    pub(crate) kid: Option<String>,
    pub(crate) key: DecodingKey,
    bits: usize,
}

impl fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RsaKey")
            .field("kid", &self.kid)
            .field("bits", &self.bits)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct JwkSet {
    keys: Vec<Jwk>,
}

/// The members of a JWK that matter here; others (`x5c`, `x5t`, `key_ops`, …) are ignored.
#[derive(Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
}

/// Reads a JWKS file and keeps its RSA signing keys usable with RS256. Keys of other types,
/// for encryption (`use: enc`) or for another algorithm are skipped; an RSA signing key that
/// is malformed or too small, a repeated `kid`, or no usable key at all is an error.
pub(crate) fn read_jwks(path: &Path) -> Result<Vec<RsaKey>, KeyError> {
    let bad = |reason: String| KeyError::Jwks {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let set: JwkSet = serde_json::from_slice(&text).map_err(|e| bad(format!("not a JWKS: {e}")))?;
    let mut keys: Vec<RsaKey> = Vec::new();
    for (i, jwk) in set.keys.into_iter().enumerate() {
        let usable = jwk.kty == "RSA"
            && jwk.use_.as_deref().is_none_or(|u| u == "sig")
            && jwk.alg.as_deref().is_none_or(|a| a == "RS256");
        if !usable {
            continue;
        }
        let name = match &jwk.kid {
            Some(kid) => format!("key `{kid}`"),
            None => format!("key #{i}"),
        };
        let (Some(n), Some(e)) = (&jwk.n, &jwk.e) else {
            return Err(bad(format!("{name} lacks `n` or `e`")));
        };
        let n = decode_b64url(n).ok_or_else(|| bad(format!("{name}: `n` is not base64url")))?;
        let e = decode_b64url(e).ok_or_else(|| bad(format!("{name}: `e` is not base64url")))?;
        let bits = bit_len(&n);
        if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
            return Err(bad(format!(
                "{name} has {bits} bits; RSA keys of {MIN_RSA_BITS} to {MAX_RSA_BITS} bits are accepted"
            )));
        }
        if bit_len(&e) == 0 {
            return Err(bad(format!("{name}: `e` is zero")));
        }
        if jwk.kid.is_some() && keys.iter().any(|k| k.kid == jwk.kid) {
            return Err(bad(format!("{name} appears twice")));
        }
        keys.push(RsaKey {
            kid: jwk.kid,
            key: DecodingKey::from_rsa_raw_components(&n, &e),
            bits,
        });
    }
    if keys.is_empty() {
        return Err(bad(
            "no RSA signing key (kty RSA, use sig, alg RS256)".to_string()
        ));
    }
    Ok(keys)
}

/// base64url, padded or not.
pub(crate) fn decode_b64url(s: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}

/// The number of significant bits of a big-endian unsigned integer.
fn bit_len(be: &[u8]) -> usize {
    match be.iter().position(|&b| b != 0) {
        Some(i) => (be.len() - i - 1) * 8 + (8 - be[i].leading_zeros() as usize),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::bit_len;

    #[test]
    fn bit_length_ignores_leading_zeros() {
        assert_eq!(bit_len(&[]), 0);
        assert_eq!(bit_len(&[0, 0]), 0);
        assert_eq!(bit_len(&[1]), 1);
        assert_eq!(bit_len(&[0, 0x80, 0]), 16);
        assert_eq!(bit_len(&[0x01, 0, 1]), 17);
    }
}
