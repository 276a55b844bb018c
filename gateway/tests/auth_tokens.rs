//! bursar_gateway::auth: issuing, verifying and refusing tokens.
//!
//! RS256 tokens are signed with the fixed test keys in `tests/fixtures/auth/` (see its README)
//! and verified through JWKS files; HS256 keys are generated per test in a temporary folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use bursar_gateway::auth::{
    from_header, generate_key_file, AuthConfig, AuthError, KeyError, Needed, Principal, Role,
    TokenIssuer, TokenVerifier, LEEWAY_SECS, MIN_HS256_KEY_LEN,
};
use chrono::{DateTime, TimeZone, Utc};
use jsonwebtoken::{Algorithm, EncodingKey};
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use tempfile::TempDir;

const NOW: i64 = 1_750_000_000;
const IDP: &str = "https://login.example.org/realms/hpc";

fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(NOW, 0).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/auth")
        .join(name)
}

/// A fresh HS256 key file (mode 0600) in its own temporary folder.
fn hs256_key() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwt.key");
    generate_key_file(&path).unwrap();
    (dir, path)
}

fn config(hs256: Option<&Path>, jwks: Option<&str>) -> AuthConfig {
    AuthConfig {
        hs256_key_file: hs256.map(Path::to_path_buf),
        jwks_file: jwks.map(fixture),
        idp_issuers: vec![IDP.to_string()],
        ..AuthConfig::default()
    }
}

fn verifier(config: &AuthConfig) -> TokenVerifier {
    TokenVerifier::from_config(config).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A compact JWT with any header; `sign` gets the signing input and returns the raw signature.
fn token_with(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = sign(input.as_bytes());
    format!("{input}.{}", b64(&signature))
}

fn sign_with(key: &EncodingKey, alg: Algorithm) -> impl Fn(&[u8]) -> Vec<u8> + '_ {
    move |input| {
        let sig = jsonwebtoken::crypto::sign(input, key, alg).unwrap();
        URL_SAFE_NO_PAD.decode(sig).unwrap()
    }
}

fn hmac_key(path: &Path) -> EncodingKey {
    EncodingKey::from_secret(&std::fs::read(path).unwrap())
}

/// The PKCS#1 DER inside a `-----BEGIN RSA PRIVATE KEY-----` fixture.
fn rsa_key(name: &str) -> EncodingKey {
    let pem = std::fs::read_to_string(fixture(name)).unwrap();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    EncodingKey::from_rsa_der(&STANDARD.decode(body).unwrap())
}

fn hs256_token(key_file: &Path, claims: &Value) -> String {
    token_with(
        &json!({"alg": "HS256", "typ": "JWT"}),
        claims,
        sign_with(&hmac_key(key_file), Algorithm::HS256),
    )
}

fn rs256_token(key: &str, kid: Option<&str>, claims: &Value) -> String {
    let header = match kid {
        Some(kid) => json!({"alg": "RS256", "typ": "JWT", "kid": kid}),
        None => json!({"alg": "RS256", "typ": "JWT"}),
    };
    token_with(&header, claims, sign_with(&rsa_key(key), Algorithm::RS256))
}

/// Claims of a valid bursar (HS256) token.
fn bursar_claims() -> Value {
    json!({"sub": "alice", "role": "finance", "iss": "bursar", "aud": "bursar",
           "iat": NOW - 60, "exp": NOW + 3600, "jti": "t-1"})
}

/// Claims of a valid identity-provider (RS256) token.
fn idp_claims() -> Value {
    json!({"sub": "0d9c-uuid", "preferred_username": "bob", "iss": IDP, "aud": ["bursar", "account"],
           "iat": NOW - 60, "exp": NOW + 300, "groups": ["hpc-users"]})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

#[track_caller]
fn refused(result: Result<Principal, AuthError>, expected: AuthError) {
    let err = result.expect_err("token was accepted");
    assert_eq!(err, expected);
    assert_eq!(err.status(), 401, "{err}");
}

#[test]
fn issued_tokens_round_trip_for_every_role() {
    let (_dir, key) = hs256_key();
    let config = config(Some(&key), None);
    let issuer = TokenIssuer::from_config(&config).unwrap().unwrap();
    let verifier = verifier(&config);
    for role in [Role::User, Role::Finance, Role::Admin] {
        let token = issuer
            .issue("alice", role, Duration::from_secs(3600), now())
            .unwrap();
        let principal = verifier.verify(token.expose_secret(), now()).unwrap();
        assert_eq!(principal.user, "alice");
        assert_eq!(principal.role, role);
        assert_eq!(principal.token_id.as_deref().map(str::len), Some(22));
        let header = format!("Bearer {}", token.expose_secret());
        assert_eq!(
            verifier.verify_header(Some(&header), now()).unwrap(),
            principal
        );
        // Neither the token nor the key shows in Debug.
        assert!(!format!("{token:?}").contains(token.expose_secret()));
    }
    let debug = format!("{issuer:?} {verifier:?}");
    assert!(debug.contains("jwt.key"), "{debug}");
    let key_bytes = std::fs::read(&key).unwrap();
    assert!(
        !debug.contains(&format!("{:?}", &key_bytes[..8])),
        "{debug}"
    );
}

#[test]
fn issued_tokens_carry_the_standard_claims() {
    let (_dir, key) = hs256_key();
    let issuer = TokenIssuer::from_key_file(&key, "bursar-test", "bursar-api").unwrap();
    let token = issuer
        .issue("alice", Role::Admin, Duration::from_secs(600), now())
        .unwrap();
    let token = token.expose_secret();
    let mut parts = token.split('.');
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts.next().unwrap()).unwrap()).unwrap();
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts.next().unwrap()).unwrap()).unwrap();
    assert_eq!(header["alg"], "HS256");
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["role"], "admin");
    assert_eq!(claims["iss"], "bursar-test");
    assert_eq!(claims["aud"], "bursar-api");
    assert_eq!(claims["iat"], NOW);
    assert_eq!(claims["exp"], NOW + 600);
    let other = issuer
        .issue("alice", Role::Admin, Duration::from_secs(600), now())
        .unwrap();
    assert_ne!(
        other.expose_secret(),
        token,
        "jti must make every token unique"
    );

    // The verifier only accepts that issuer/audience pair when configured for it.
    let config = AuthConfig {
        issuer: "bursar-test".into(),
        audience: "bursar-api".into(),
        ..config(Some(&key), None)
    };
    assert_eq!(
        verifier(&config).verify(token, now()).unwrap().role,
        Role::Admin
    );
    refused(
        verifier(&self::config(Some(&key), None)).verify(token, now()),
        AuthError::WrongIssuer,
    );
}

#[test]
fn issuing_refuses_bad_users_and_lifetimes() {
    let (_dir, key) = hs256_key();
    let issuer = TokenIssuer::from_key_file(&key, "bursar", "bursar").unwrap();
    for (user, ttl) in [
        ("", Duration::from_secs(60)),
        ("al ice", Duration::from_secs(60)),
        ("alice", Duration::ZERO),
        ("alice", Duration::from_secs(400 * 86_400)),
    ] {
        let err = issuer.issue(user, Role::User, ttl, now()).unwrap_err();
        assert!(matches!(err, KeyError::Issue(_)), "{err}");
    }
}

#[test]
fn bearer_header_parsing() {
    assert_eq!(from_header(None), Err(AuthError::MissingToken));
    assert_eq!(from_header(Some("")), Err(AuthError::MissingToken));
    assert_eq!(from_header(Some("Bearer")), Err(AuthError::MissingToken));
    assert_eq!(from_header(Some("Bearer   ")), Err(AuthError::MissingToken));
    assert_eq!(
        from_header(Some("Basic YWxpY2U6cHc=")),
        Err(AuthError::NotBearer)
    );
    assert_eq!(from_header(Some("Bearer a.b.c")), Ok("a.b.c"));
    assert_eq!(from_header(Some("bearer  a.b.c ")), Ok("a.b.c"));
    assert_eq!(AuthError::MissingToken.status(), 401);
    assert_eq!(AuthError::NotBearer.status(), 401);

    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), None));
    refused(verifier.verify_header(None, now()), AuthError::MissingToken);
}

#[test]
fn unsigned_tokens_are_refused() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    for alg in ["none", "None", "NONE"] {
        let token = token_with(&json!({"alg": alg}), &bursar_claims(), |_| Vec::new());
        refused(verifier.verify(&token, now()), AuthError::Unsigned);
        // Even with a signature attached.
        let token = token_with(&json!({"alg": alg}), &bursar_claims(), |_| vec![1; 32]);
        refused(verifier.verify(&token, now()), AuthError::Unsigned);
    }
}

#[test]
fn algorithms_without_a_configured_key_are_refused() {
    let (_dir, key) = hs256_key();
    // HS256 where only the IdP's JWKS is configured.
    let jwks_only = verifier(&config(None, Some("jwks.json")));
    refused(
        jwks_only.verify(&hs256_token(&key, &bursar_claims()), now()),
        AuthError::AlgorithmNotAccepted {
            alg: "HS256".into(),
        },
    );
    // RS256 where only bursar's key is configured.
    let hs256_only = verifier(&config(Some(&key), None));
    refused(
        hs256_only.verify(
            &rs256_token("rsa-1.key.pem", Some("test-1"), &idp_claims()),
            now(),
        ),
        AuthError::AlgorithmNotAccepted {
            alg: "RS256".into(),
        },
    );
    // Algorithms bursar never accepts, even with a valid signature of their own kind.
    let both = verifier(&config(Some(&key), Some("jwks.json")));
    for alg in [Algorithm::HS384, Algorithm::HS512] {
        let token = token_with(
            &json!({"alg": format!("{alg:?}")}),
            &bursar_claims(),
            sign_with(&hmac_key(&key), alg),
        );
        refused(
            both.verify(&token, now()),
            AuthError::AlgorithmNotAccepted {
                alg: format!("{alg:?}"),
            },
        );
    }
    let token = token_with(
        &json!({"alg": "PS256", "kid": "test-1"}),
        &idp_claims(),
        sign_with(&rsa_key("rsa-1.key.pem"), Algorithm::PS256),
    );
    refused(
        both.verify(&token, now()),
        AuthError::AlgorithmNotAccepted {
            alg: "PS256".into(),
        },
    );
    // Lower-case names are not the registered ones; hostile names are sanitised.
    let token = token_with(
        &json!({"alg": "hs256"}),
        &bursar_claims(),
        sign_with(&hmac_key(&key), Algorithm::HS256),
    );
    refused(
        both.verify(&token, now()),
        AuthError::AlgorithmNotAccepted {
            alg: "hs256".into(),
        },
    );
    let token = token_with(&json!({"alg": "<script>x"}), &bursar_claims(), |_| {
        vec![0; 8]
    });
    refused(
        both.verify(&token, now()),
        AuthError::AlgorithmNotAccepted {
            alg: "scriptx".into(),
        },
    );
}

#[test]
fn key_confusion_attack_is_refused() {
    // The attacker knows the IdP's public key and HMACs a token with it, hoping the server
    // feeds that same key to HS256.
    let public_pem = std::fs::read(fixture("rsa-1.pub.pem")).unwrap();
    let attacker_key = EncodingKey::from_secret(&public_pem);
    let claims = with(idp_claims(), "groups", json!(["bursar-admins"]));
    for header in [
        json!({"alg": "HS256", "kid": "test-1"}),
        json!({"alg": "HS256"}),
    ] {
        let token = token_with(&header, &claims, sign_with(&attacker_key, Algorithm::HS256));
        // Only the JWKS is configured: HS256 has no key at all.
        refused(
            verifier(&config(None, Some("jwks.json"))).verify(&token, now()),
            AuthError::AlgorithmNotAccepted {
                alg: "HS256".into(),
            },
        );
        // Both are configured: HS256 is checked against bursar's own key, never the RSA key.
        let (_dir, key) = hs256_key();
        refused(
            verifier(&config(Some(&key), Some("jwks.json"))).verify(&token, now()),
            AuthError::BadSignature,
        );
    }
    // The reverse: an "RS256" token whose signature is an HMAC with bursar's key.
    let (_dir, key) = hs256_key();
    let token = token_with(
        &json!({"alg": "RS256", "kid": "test-1"}),
        &bursar_claims(),
        sign_with(&hmac_key(&key), Algorithm::HS256),
    );
    refused(
        verifier(&config(Some(&key), Some("jwks.json"))).verify(&token, now()),
        AuthError::BadSignature,
    );
}

#[test]
fn rs256_tokens_verify_through_the_jwks() {
    let verifier = verifier(&config(None, Some("jwks.json")));
    let principal = verifier
        .verify(
            &rs256_token("rsa-1.key.pem", Some("test-1"), &idp_claims()),
            now(),
        )
        .unwrap();
    // Defaults: user from `sub`, role from `role` (absent → user).
    assert_eq!(principal.user, "0d9c-uuid");
    assert_eq!(principal.role, Role::User);
    assert_eq!(principal.token_id, None);
    // A single-key JWKS also takes tokens without kid.
    let principal = verifier
        .verify(&rs256_token("rsa-1.key.pem", None, &idp_claims()), now())
        .unwrap();
    assert_eq!(principal.user, "0d9c-uuid");

    refused(
        verifier.verify(
            &rs256_token("rsa-1.key.pem", Some("test-9"), &idp_claims()),
            now(),
        ),
        AuthError::UnknownKey,
    );
    // Signed by another key than the kid names.
    refused(
        verifier.verify(
            &rs256_token("rsa-2.key.pem", Some("test-1"), &idp_claims()),
            now(),
        ),
        AuthError::BadSignature,
    );
    refused(
        verifier.verify(&rs256_token("rsa-2.key.pem", None, &idp_claims()), now()),
        AuthError::BadSignature,
    );
}

#[test]
fn rotating_jwks_selects_by_kid() {
    let verifier = verifier(&config(None, Some("jwks-rotating.json")));
    for (key, kid) in [("rsa-1.key.pem", "test-1"), ("rsa-2.key.pem", "test-2")] {
        let principal = verifier
            .verify(&rs256_token(key, Some(kid), &idp_claims()), now())
            .unwrap();
        assert_eq!(principal.user, "0d9c-uuid");
    }
    refused(
        verifier.verify(&rs256_token("rsa-1.key.pem", None, &idp_claims()), now()),
        AuthError::KeyIdRequired,
    );
    // The encryption key and the EC key are not signing keys for RS256.
    refused(
        verifier.verify(
            &rs256_token("rsa-2.key.pem", Some("enc-2"), &idp_claims()),
            now(),
        ),
        AuthError::UnknownKey,
    );
    refused(
        verifier.verify(
            &rs256_token("rsa-1.key.pem", Some("ec-1"), &idp_claims()),
            now(),
        ),
        AuthError::UnknownKey,
    );
}

#[test]
fn idp_claims_map_to_user_and_role() {
    let mut config = config(None, Some("jwks.json"));
    config.user_claim = Some("preferred_username".into());
    config.role_claim = Some("groups".into());
    config.role_map = [
        ("bursar-admins".to_string(), Role::Admin),
        ("bursar-finance".to_string(), Role::Finance),
    ]
    .into();
    let verifier = verifier(&config);
    let verify = |claims: Value| {
        verifier.verify(
            &rs256_token("rsa-1.key.pem", Some("test-1"), &claims),
            now(),
        )
    };

    let cases = [
        (json!(["hpc-users"]), Role::User),
        (json!(["bursar-finance", "hpc-users"]), Role::Finance),
        (json!(["bursar-finance", "bursar-admins"]), Role::Admin),
        (json!("bursar-admins"), Role::Admin),
        // Mapped names only: a group literally called "admin" grants nothing.
        (json!(["admin"]), Role::User),
    ];
    for (groups, role) in cases {
        let principal = verify(with(idp_claims(), "groups", groups.clone())).unwrap();
        assert_eq!(principal.user, "bob");
        assert_eq!(principal.role, role, "groups {groups}");
    }
    assert_eq!(
        verify(without(idp_claims(), "groups")).unwrap().role,
        Role::User
    );
    refused(
        verify(with(idp_claims(), "groups", json!(7))),
        AuthError::InvalidClaim("groups".into()),
    );
    refused(
        verify(without(idp_claims(), "preferred_username")),
        AuthError::MissingClaim("preferred_username".into()),
    );
    refused(
        verify(with(idp_claims(), "preferred_username", json!(""))),
        AuthError::InvalidClaim("preferred_username".into()),
    );

    // Without a map, the role claim's values are role names.
    let plain = self::verifier(&self::config(None, Some("jwks.json")));
    let token = rs256_token(
        "rsa-1.key.pem",
        Some("test-1"),
        &with(idp_claims(), "role", json!("finance")),
    );
    assert_eq!(plain.verify(&token, now()).unwrap().role, Role::Finance);
}

#[test]
fn bursar_tokens_need_a_known_role_and_a_subject() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), None));
    let verify = |claims: Value| verifier.verify(&hs256_token(&key, &claims), now());
    assert_eq!(verify(bursar_claims()).unwrap().role, Role::Finance);
    refused(
        verify(without(bursar_claims(), "role")),
        AuthError::MissingClaim("role".into()),
    );
    refused(
        verify(with(bursar_claims(), "role", json!("root"))),
        AuthError::InvalidClaim("role".into()),
    );
    refused(
        verify(with(bursar_claims(), "role", json!("Admin"))),
        AuthError::InvalidClaim("role".into()),
    );
    refused(
        verify(without(bursar_claims(), "sub")),
        AuthError::MissingClaim("sub".into()),
    );
    refused(
        verify(with(bursar_claims(), "sub", json!(42))),
        AuthError::InvalidClaim("sub".into()),
    );
}

#[test]
fn wrong_signatures_are_refused() {
    let (_dir, key) = hs256_key();
    let (_other_dir, other_key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    refused(
        verifier.verify(&hs256_token(&other_key, &bursar_claims()), now()),
        AuthError::BadSignature,
    );
    // A valid token whose payload was edited afterwards.
    let token = hs256_token(&key, &bursar_claims());
    let parts: Vec<&str> = token.split('.').collect();
    let forged = with(bursar_claims(), "role", json!("admin"));
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64(forged.to_string().as_bytes()),
        parts[2]
    );
    refused(verifier.verify(&tampered, now()), AuthError::BadSignature);
    // No signature at all.
    refused(
        verifier.verify(&format!("{}.{}.", parts[0], parts[1]), now()),
        AuthError::BadSignature,
    );
}

#[test]
fn malformed_tokens_are_refused() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    let valid = hs256_token(&key, &bursar_claims());
    let parts: Vec<&str> = valid.split('.').collect();
    let not_json = format!("{}.{}.{}", b64(b"{alg"), parts[1], parts[2]);
    let crit = token_with(
        &json!({"alg": "HS256", "crit": ["exp-ext"], "exp-ext": true}),
        &bursar_claims(),
        sign_with(&hmac_key(&key), Algorithm::HS256),
    );
    let payload_not_object = token_with(
        &json!({"alg": "HS256"}),
        &json!(["a"]),
        sign_with(&hmac_key(&key), Algorithm::HS256),
    );
    let huge = format!("{valid}{}", "A".repeat(20_000));
    for token in [
        "".to_string(),
        "abc".to_string(),
        "a.b".to_string(),
        format!("{valid}.extra"),
        format!("!!.{}.{}", parts[1], parts[2]),
        not_json,
        crit,
        payload_not_object,
        huge,
    ] {
        refused(verifier.verify(&token, now()), AuthError::Malformed);
    }
}

#[test]
fn exp_is_required_and_checked_with_leeway() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    let hs = |claims: Value| verifier.verify(&hs256_token(&key, &claims), now());
    let rs = |claims: Value| {
        verifier.verify(
            &rs256_token("rsa-1.key.pem", Some("test-1"), &claims),
            now(),
        )
    };

    refused(
        hs(without(bursar_claims(), "exp")),
        AuthError::MissingClaim("exp".into()),
    );
    refused(
        rs(without(idp_claims(), "exp")),
        AuthError::MissingClaim("exp".into()),
    );
    refused(
        hs(with(bursar_claims(), "exp", json!("tomorrow"))),
        AuthError::InvalidClaim("exp".into()),
    );
    refused(
        hs(with(bursar_claims(), "exp", Value::Null)),
        AuthError::InvalidClaim("exp".into()),
    );

    // Skew within the leeway is tolerated, beyond it is not.
    assert!(hs(with(bursar_claims(), "exp", json!(NOW - LEEWAY_SECS + 1))).is_ok());
    refused(
        hs(with(bursar_claims(), "exp", json!(NOW - LEEWAY_SECS - 1))),
        AuthError::Expired,
    );
    refused(
        hs(with(bursar_claims(), "exp", json!(NOW - 86_400))),
        AuthError::Expired,
    );
    refused(
        rs(with(idp_claims(), "exp", json!(NOW - LEEWAY_SECS - 1))),
        AuthError::Expired,
    );
    // Fractional NumericDates are allowed.
    assert!(rs(with(idp_claims(), "exp", json!(NOW as f64 + 0.5))).is_ok());

    // The same token, seen from a clock that has moved on.
    let (_dir2, key2) = hs256_key();
    let issuer = TokenIssuer::from_key_file(&key2, "bursar", "bursar").unwrap();
    let token = issuer
        .issue("alice", Role::User, Duration::from_secs(60), now())
        .unwrap();
    let v2 = self::verifier(&config(Some(&key2), None));
    let later = |secs: i64| Utc.timestamp_opt(NOW + secs, 0).unwrap();
    assert!(v2
        .verify(token.expose_secret(), later(60 + LEEWAY_SECS - 1))
        .is_ok());
    refused(
        v2.verify(token.expose_secret(), later(60 + LEEWAY_SECS)),
        AuthError::Expired,
    );
}

#[test]
fn a_remembered_token_still_has_its_times_and_signature_checked() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), None));
    let at = |secs: i64| Utc.timestamp_opt(NOW + secs, 0).unwrap();
    let claims = with(
        with(bursar_claims(), "nbf", json!(NOW)),
        "exp",
        json!(NOW + 600),
    );
    let token = hs256_token(&key, &claims);
    // Verified once, then answered from memory: the same principal every time...
    let first = verifier.verify(&token, at(0)).unwrap();
    for _ in 0..3 {
        assert_eq!(verifier.verify(&token, at(1)).unwrap(), first);
    }
    // ...but its time claims are checked against each call's clock.
    refused(
        verifier.verify(&token, at(-LEEWAY_SECS - 1)),
        AuthError::NotYetValid,
    );
    refused(
        verifier.verify(&token, at(600 + LEEWAY_SECS)),
        AuthError::Expired,
    );
    assert!(verifier.verify(&token, at(600 + LEEWAY_SECS - 1)).is_ok());
    // The remembered token's header and payload with another signature are not it.
    let parts: Vec<&str> = token.split('.').collect();
    let (_other_dir, other_key) = hs256_key();
    let other_signature = hs256_token(&other_key, &claims);
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        other_signature.rsplit('.').next().unwrap()
    );
    refused(verifier.verify(&forged, at(1)), AuthError::BadSignature);
    refused(
        verifier.verify(&format!("{}.{}.", parts[0], parts[1]), at(1)),
        AuthError::BadSignature,
    );
    // More distinct tokens than it remembers: every one still verifies, and is its own user.
    for i in 0..1100 {
        let user = format!("user{i}");
        let token = hs256_token(&key, &with(claims.clone(), "sub", json!(user)));
        assert_eq!(verifier.verify(&token, at(1)).unwrap().user, user);
    }
    assert_eq!(verifier.verify(&token, at(1)).unwrap(), first);
}

#[test]
fn nbf_is_honoured_with_leeway() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), None));
    let hs = |claims: Value| verifier.verify(&hs256_token(&key, &claims), now());
    assert!(hs(with(bursar_claims(), "nbf", json!(NOW + LEEWAY_SECS - 1))).is_ok());
    refused(
        hs(with(bursar_claims(), "nbf", json!(NOW + LEEWAY_SECS + 1))),
        AuthError::NotYetValid,
    );
    refused(
        hs(with(bursar_claims(), "nbf", json!("soon"))),
        AuthError::InvalidClaim("nbf".into()),
    );
}

#[test]
fn issuer_and_audience_are_checked_per_key_source() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    let hs = |claims: Value| verifier.verify(&hs256_token(&key, &claims), now());
    let rs = |claims: Value| {
        verifier.verify(
            &rs256_token("rsa-1.key.pem", Some("test-1"), &claims),
            now(),
        )
    };

    refused(
        hs(with(bursar_claims(), "iss", json!("someone-else"))),
        AuthError::WrongIssuer,
    );
    // bursar's key never vouches for the IdP's issuer, nor the IdP's keys for bursar's.
    refused(
        hs(with(bursar_claims(), "iss", json!(IDP))),
        AuthError::WrongIssuer,
    );
    refused(
        rs(with(idp_claims(), "iss", json!("bursar"))),
        AuthError::WrongIssuer,
    );
    refused(
        hs(without(bursar_claims(), "iss")),
        AuthError::MissingClaim("iss".into()),
    );
    refused(
        rs(with(idp_claims(), "iss", json!(["bursar"]))),
        AuthError::InvalidClaim("iss".into()),
    );

    refused(
        hs(with(bursar_claims(), "aud", json!("other-api"))),
        AuthError::WrongAudience,
    );
    refused(
        rs(with(idp_claims(), "aud", json!(["account", "other-api"]))),
        AuthError::WrongAudience,
    );
    refused(
        hs(without(bursar_claims(), "aud")),
        AuthError::MissingClaim("aud".into()),
    );
    refused(
        hs(with(bursar_claims(), "aud", json!(5))),
        AuthError::InvalidClaim("aud".into()),
    );
    assert!(hs(with(bursar_claims(), "aud", json!(["x", "bursar"]))).is_ok());

    // Configured IdP audiences replace the default.
    let mut config = config(None, Some("jwks.json"));
    config.idp_audiences = vec!["hpc-portal".into()];
    let idp = self::verifier(&config);
    let token = |aud: Value| {
        rs256_token(
            "rsa-1.key.pem",
            Some("test-1"),
            &with(idp_claims(), "aud", aud),
        )
    };
    assert!(idp.verify(&token(json!("hpc-portal")), now()).is_ok());
    refused(
        idp.verify(&token(json!("bursar")), now()),
        AuthError::WrongAudience,
    );
}

#[test]
fn roles_grant_privileges() {
    let principal = |role| Principal {
        user: "alice".into(),
        role,
        token_id: None,
    };
    let table = [
        (Role::User, Needed::Read, true),
        (Role::User, Needed::ReadAll, false),
        (Role::User, Needed::Change, false),
        (Role::Finance, Needed::Read, true),
        (Role::Finance, Needed::ReadAll, true),
        (Role::Finance, Needed::Change, false),
        (Role::Admin, Needed::Read, true),
        (Role::Admin, Needed::ReadAll, true),
        (Role::Admin, Needed::Change, true),
    ];
    for (role, needed, allowed) in table {
        match principal(role).require(needed) {
            Ok(()) => assert!(allowed, "{role} was allowed {needed:?}"),
            Err(err) => {
                assert!(!allowed, "{role} was refused {needed:?}");
                assert_eq!(err, AuthError::Forbidden { role, needed });
                assert_eq!(err.status(), 403);
                assert_eq!(err.code(), "forbidden");
                assert!(err.www_authenticate().contains("insufficient_scope"));
            }
        }
    }
    assert_eq!(
        principal(Role::Finance)
            .require(Needed::Change)
            .unwrap_err()
            .to_string(),
        "a finance token may not change accounts, allocations or prices (admin only)"
    );
    assert_eq!("admin".parse::<Role>(), Ok(Role::Admin));
    assert!("root".parse::<Role>().is_err());
}

#[test]
fn error_messages_name_no_secrets() {
    let (_dir, key) = hs256_key();
    let verifier = verifier(&config(Some(&key), Some("jwks.json")));
    let token = hs256_token(&key, &with(bursar_claims(), "exp", json!(NOW - 3600)));
    let err = verifier.verify(&token, now()).unwrap_err();
    assert_eq!(err, AuthError::Expired);
    assert_eq!(err.code(), "token_expired");
    assert!(err.www_authenticate().contains("invalid_token"));
    let shown = format!("{err} {err:?}");
    for part in token.split('.') {
        assert!(!shown.contains(part), "{shown}");
    }
}

#[cfg(unix)]
#[test]
fn key_files_are_checked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let set_mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };

    // keygen: 0600, enough bytes, never overwrites.
    let path = dir.path().join("jwt.key");
    generate_key_file(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(meta.len() as usize >= MIN_HS256_KEY_LEN);
    let before = std::fs::read(&path).unwrap();
    assert!(matches!(
        generate_key_file(&path),
        Err(KeyError::Exists { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // Group- or world-readable (or writable) keys are refused with the fix in the message.
    for mode in [0o644, 0o640, 0o604, 0o620] {
        set_mode(&path, mode);
        let err = TokenIssuer::from_key_file(&path, "bursar", "bursar").unwrap_err();
        assert!(matches!(err, KeyError::TooOpen { .. }), "{err}");
        assert!(err.to_string().contains("chmod 600"), "{err}");
        let err = TokenVerifier::from_config(&config(Some(&path), None)).unwrap_err();
        assert!(matches!(err, KeyError::TooOpen { .. }), "{err}");
    }
    set_mode(&path, 0o400);
    assert!(TokenIssuer::from_key_file(&path, "bursar", "bursar").is_ok());

    // Short keys are refused.
    let short = dir.path().join("short.key");
    std::fs::write(&short, [7u8; MIN_HS256_KEY_LEN - 1]).unwrap();
    set_mode(&short, 0o600);
    let err = TokenIssuer::from_key_file(&short, "bursar", "bursar").unwrap_err();
    assert!(matches!(err, KeyError::TooShort { len: 31, .. }), "{err}");
    assert!(err.to_string().contains("bursar token keygen"), "{err}");

    let missing = TokenIssuer::from_key_file(dir.path().join("nope"), "bursar", "bursar");
    assert!(matches!(missing, Err(KeyError::Io { .. })));
}

#[test]
fn bad_jwks_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, value: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let jwks = |path: PathBuf| AuthConfig {
        jwks_file: Some(path),
        ..AuthConfig::default()
    };
    let small = write(
        "small.json",
        &json!({"keys": [{"kty": "RSA", "kid": "k", "n": b64(&[0xc5; 128]), "e": "AQAB"}]}),
    );
    let ec_only = write(
        "ec.json",
        &json!({"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]}),
    );
    let no_n = write(
        "no-n.json",
        &json!({"keys": [{"kty": "RSA", "kid": "k", "e": "AQAB"}]}),
    );
    let one = std::fs::read_to_string(fixture("jwks.json")).unwrap();
    let one: Value = serde_json::from_str(&one).unwrap();
    let twice = write(
        "twice.json",
        &json!({"keys": [one["keys"][0].clone(), one["keys"][0].clone()]}),
    );
    let not_json = dir.path().join("garbage.json");
    std::fs::write(&not_json, "<html>").unwrap();
    for path in [small, ec_only, no_n, twice, not_json] {
        let err = TokenVerifier::from_config(&jwks(path.clone())).unwrap_err();
        assert!(
            matches!(err, KeyError::Jwks { .. }),
            "{}: {err}",
            path.display()
        );
    }
    assert!(matches!(
        TokenVerifier::from_config(&AuthConfig::default()),
        Err(KeyError::NoKeys)
    ));
}

#[test]
fn config_has_defaults_and_refuses_unknown_keys() {
    let config: AuthConfig = serde_yaml::from_str("{}").unwrap();
    assert_eq!(config, AuthConfig::default());
    assert_eq!(config.issuer, "bursar");
    assert_eq!(config.audience, "bursar");

    let config: AuthConfig = serde_yaml::from_str(
        "hs256_key_file: /etc/bursar/jwt.key\n\
         jwks_file: /etc/bursar/jwks.json\n\
         idp_issuers: [https://login.example.org/realms/hpc]\n\
         user_claim: preferred_username\n\
         role_claim: groups\n\
         role_map: { bursar-admins: admin, bursar-finance: finance }\n",
    )
    .unwrap();
    assert_eq!(config.role_map["bursar-admins"], Role::Admin);
    assert_eq!(config.user_claim.as_deref(), Some("preferred_username"));

    let err = serde_yaml::from_str::<AuthConfig>("hs256_key: /x\n").unwrap_err();
    assert!(err.to_string().contains("hs256_key"), "{err}");
    assert!(serde_yaml::from_str::<AuthConfig>("role_map: { g: root }\n").is_err());
}
