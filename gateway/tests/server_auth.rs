//! Every auth refusal of docs/api.md, through the router: status, `WWW-Authenticate`, and the
//! error shape `{"error", "message", "details"}`.

mod server_support;

use std::time::Duration;

use axum::http::{header, Method};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use bursar_gateway::auth::{generate_key_file, Role, TokenIssuer};
use chrono::Utc;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use server_support::{fixture, setup, Answer, TestServer};

const BALANCE: &str = "/v1/accounts/physics/balance";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Valid claims for bursar's own tokens.
fn claims(user: &str, role: &str) -> Value {
    let now = Utc::now().timestamp();
    json!({"sub": user, "role": role, "iss": "bursar", "aud": "bursar", "iat": now, "exp": now + 3600})
}

fn assert_unauthorized(answer: &Answer, code: &str) {
    answer.assert_error(401, code);
    let challenge = answer
        .headers
        .get(header::WWW_AUTHENTICATE)
        .expect("a WWW-Authenticate header")
        .to_str()
        .unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"bursar\""),
        "{challenge}"
    );
}

async fn with_header(server: &TestServer, value: &str) -> Answer {
    server
        .raw(
            Method::GET,
            BALANCE,
            None,
            None,
            &[(header::AUTHORIZATION.as_str(), value)],
        )
        .await
}

#[tokio::test]
async fn no_token_is_401_missing_token() {
    let server = setup().await;
    let answer = server.call(Method::GET, BALANCE, None, None).await;
    assert_unauthorized(&answer, "missing_token");
    assert_eq!(
        answer.headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"bursar\""
    );
    // Another scheme is the same refusal; so is `Bearer` with nothing after it.
    assert_unauthorized(
        &with_header(&server, "Basic YWxpY2U6cHc=").await,
        "missing_token",
    );
    assert_unauthorized(&with_header(&server, "Bearer ").await, "missing_token");
    // Every /v1 route needs a token.
    for (method, path) in [
        (Method::GET, "/v1/accounts"),
        (
            Method::GET,
            "/v1/reports/usage?from=2025-01-01&to=2025-02-01",
        ),
        (Method::POST, "/v1/allocations"),
        (Method::GET, "/v1/audit"),
        (Method::GET, "/v1/jobs"),
        (Method::POST, "/v1/quotes"),
    ] {
        let answer = server.call(method, path, None, None).await;
        assert_unauthorized(&answer, "missing_token");
    }
}

#[tokio::test]
async fn an_expired_token_is_401_token_expired() {
    let server = setup().await;
    let yesterday = Utc::now() - chrono::Duration::days(1);
    let token = server
        .issuer
        .issue("alice", Role::User, Duration::from_secs(3600), yesterday)
        .unwrap();
    let answer = server.get(BALANCE, token.expose_secret()).await;
    assert_unauthorized(&answer, "token_expired");
    assert!(answer.headers[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .contains("invalid_token"));
}

#[tokio::test]
async fn a_token_signed_with_another_key_is_401_invalid_token() {
    let server = setup().await;
    let other = server.dir.path().join("other.key");
    generate_key_file(&other).unwrap();
    let forger = TokenIssuer::from_key_file(&other, "bursar", "bursar").unwrap();
    let token = forger
        .issue("alice", Role::Admin, Duration::from_secs(3600), Utc::now())
        .unwrap();
    let answer = server.get(BALANCE, token.expose_secret()).await;
    assert_unauthorized(&answer, "invalid_token");
    assert!(answer.json["message"]
        .as_str()
        .unwrap()
        .contains("signature"));
}

#[tokio::test]
async fn an_unsigned_alg_none_token_is_401() {
    let server = setup().await;
    for alg in ["none", "None", "NONE"] {
        let token = format!(
            "{}.{}.",
            b64(json!({"alg": alg, "typ": "JWT"}).to_string().as_bytes()),
            b64(claims("alice", "admin").to_string().as_bytes())
        );
        let answer = server.get(BALANCE, &token).await;
        assert_unauthorized(&answer, "invalid_token");
        assert!(answer.json["message"]
            .as_str()
            .unwrap()
            .contains("unsigned"));
    }
}

#[tokio::test]
async fn an_rs256_token_against_the_hs256_key_is_401() {
    let server = setup().await;
    // A genuinely RS256-signed token: this server has no JWKS, so RS256 is not accepted at
    // all, and the HS256 key is never tried on it.
    let pem = std::fs::read_to_string(fixture("rsa-1.key.pem")).unwrap();
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let key = EncodingKey::from_rsa_der(&STANDARD.decode(der).unwrap());
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::RS256),
        &claims("alice", "admin"),
        &key,
    )
    .unwrap();
    let answer = server.get(BALANCE, &token).await;
    assert_unauthorized(&answer, "invalid_token");
    assert!(answer.json["message"].as_str().unwrap().contains("RS256"));

    // The key-confusion attack: an "RS256" header over an HMAC made with the HS256 key.
    let hs_key = EncodingKey::from_secret(&std::fs::read(&server.key_path).unwrap());
    let input = format!(
        "{}.{}",
        b64(json!({"alg": "RS256", "typ": "JWT"}).to_string().as_bytes()),
        b64(claims("alice", "admin").to_string().as_bytes())
    );
    let signature =
        jsonwebtoken::crypto::sign(input.as_bytes(), &hs_key, Algorithm::HS256).unwrap();
    let answer = server.get(BALANCE, &format!("{input}.{signature}")).await;
    assert_unauthorized(&answer, "invalid_token");
}

#[tokio::test]
async fn garbage_and_wrong_audience_tokens_are_401() {
    let server = setup().await;
    assert_unauthorized(&server.get(BALANCE, "not-a-jwt").await, "invalid_token");
    let hs_key = EncodingKey::from_secret(&std::fs::read(&server.key_path).unwrap());
    let mut wrong_aud = claims("alice", "user");
    wrong_aud["aud"] = json!("someone-else");
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &wrong_aud, &hs_key).unwrap();
    assert_unauthorized(&server.get(BALANCE, &token).await, "invalid_token");
}

#[tokio::test]
async fn a_user_reading_an_account_it_is_not_associated_with_is_403() {
    let server = setup().await;
    let bob = server.token("bob", Role::User);
    let answer = server.get(BALANCE, &bob).await;
    answer.assert_error(403, "no_association");
    assert_eq!(answer.json["details"]["account"], "physics");
    // Not even the parent of its own account, nor one that does not exist (no probing).
    server
        .get("/v1/accounts/org/balance", &bob)
        .await
        .assert_error(403, "no_association");
    server
        .get("/v1/accounts/nowhere/balance", &bob)
        .await
        .assert_error(403, "no_association");
    // Its own account is fine; finance reads any.
    server
        .get("/v1/accounts/chemistry/balance", &bob)
        .await
        .assert_status(200);
    let finance = server.token("carol", Role::Finance);
    server.get(BALANCE, &finance).await.assert_status(200);
    server
        .get("/v1/accounts/nowhere/balance", &finance)
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn a_finance_token_changing_an_allocation_is_403() {
    let server = setup().await;
    let finance = server.token("carol", Role::Finance);
    let body = json!({"account": "physics", "currency": "su", "amount": "100"});
    let answer = server.post("/v1/allocations", &finance, &body).await;
    answer.assert_error(403, "forbidden");
    assert!(answer.headers[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .contains("insufficient_scope"));
    assert!(server.app.ledger.allocations().await.unwrap().is_empty());
    // Nor accounts or associations; and a user may not read reports or the audit log.
    server
        .post("/v1/accounts", &finance, &json!({"name": "x"}))
        .await
        .assert_error(403, "forbidden");
    server
        .post(
            "/v1/associations",
            &finance,
            &json!({"user": "bob", "account": "physics"}),
        )
        .await
        .assert_error(403, "forbidden");
    let alice = server.token("alice", Role::User);
    server
        .get("/v1/reports/usage?from=2025-01-01&to=2025-02-01", &alice)
        .await
        .assert_error(403, "forbidden");
    server
        .get("/v1/audit", &alice)
        .await
        .assert_error(403, "forbidden");
    assert!(server.app.ledger.audit_log(None).await.unwrap().is_empty());
}
