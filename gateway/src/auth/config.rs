//! The `auth:` section of the configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::Role;

/// How bursar authenticates API callers. At least one of `hs256_key_file` and `jwks_file` must
/// be set. Only paths live here: the keys are read by [`super::TokenVerifier::from_config`] and
/// [`super::TokenIssuer::from_config`], so `Debug` of this type shows no key material.
///
/// ```yaml
/// auth:
///   hs256_key_file: /etc/bursar/jwt.key     # bursar token keygen /etc/bursar/jwt.key
///   jwks_file: /etc/bursar/idp-jwks.json
///   idp_issuers: [https://login.example.org/realms/hpc]
///   user_claim: preferred_username
///   role_claim: groups
///   role_map: { bursar-admins: admin, bursar-finance: finance }
/// ```
///
/// Relative paths are resolved by the caller (the config loader), not here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// bursar's own signing key: raw bytes, at least 32, mode 0600 (`bursar token keygen`
    /// writes one). Verifies the HS256 tokens `bursar token issue` signs. Unset: bursar neither
    /// issues nor accepts HS256 tokens.
    #[serde(default)]
    pub hs256_key_file: Option<PathBuf>,
    /// The identity provider's public keys, a JWKS document (`{"keys":[{"kty":"RSA","kid":…,
    /// "n":…,"e":…}]}`, as served at the IdP's `jwks_uri`). Verifies RS256 tokens; the token's
    /// `kid` picks the key. Keys that are not RSA signing keys are skipped; RSA keys must have
    /// at least 2048 bits. Read once at start: a rotated IdP key needs a restart. Unset: no
    /// RS256 tokens are accepted.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// `iss` of the tokens bursar issues, and the only issuer accepted on HS256 tokens.
    #[serde(default = "default_name")]
    pub issuer: String,
    /// `aud` of the tokens bursar issues; every accepted token (HS256 or RS256) must name it in
    /// `aud` unless `idp_audiences` is set.
    #[serde(default = "default_name")]
    pub audience: String,
    /// Issuers accepted on RS256 (identity provider) tokens, e.g. a Keycloak realm URL. Empty:
    /// `issuer`.
    #[serde(default)]
    pub idp_issuers: Vec<String>,
    /// Audiences accepted on RS256 tokens (any one suffices), e.g. the IdP client id. Empty:
    /// `audience`.
    #[serde(default)]
    pub idp_audiences: Vec<String>,
    /// The claim of an RS256 token that holds the user name bursar and the clusters know
    /// (`preferred_username`, `uid`, …). Unset: `sub`. bursar's own tokens always use `sub`.
    #[serde(default)]
    pub user_claim: Option<String>,
    /// The claim of an RS256 token that carries the role: a string or a list of strings
    /// (`groups`, `roles`, …). Unset: `role`. bursar's own tokens always use `role`.
    #[serde(default)]
    pub role_claim: Option<String>,
    /// Values of `role_claim` → role, e.g. `bursar-admins: admin`. The highest role any value
    /// maps to wins; a token with no mapped value is a `user`. Empty: the claim's values are
    /// read as role names (`user`, `finance`, `admin`) — set a map whenever users can influence
    /// that claim at the IdP.
    #[serde(default)]
    pub role_map: BTreeMap<String, Role>,
}

fn default_name() -> String {
    "bursar".to_string()
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            hs256_key_file: None,
            jwks_file: None,
            issuer: default_name(),
            audience: default_name(),
            idp_issuers: Vec::new(),
            idp_audiences: Vec::new(),
            user_claim: None,
            role_claim: None,
            role_map: BTreeMap::new(),
        }
    }
}
