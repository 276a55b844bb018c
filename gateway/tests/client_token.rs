//! `bursar token keygen` and `bursar token issue`, driving the real binary; the tokens it
//! prints must pass the server's `TokenVerifier`.

mod client_support;

use bursar_gateway::auth::{AuthConfig, Role, TokenVerifier};
use chrono::Utc;
use client_support::*;

async fn bursar_local(args: &[&str], home: &Home) -> Run {
    run_program(&bursar_exe(), args, home, &[]).await
}

#[tokio::test]
async fn keygen_then_issue_makes_a_token_the_server_accepts() {
    let home = Home::new();
    let key = home.path().join("jwt.key");
    let key_arg = key.to_str().unwrap();
    let run = bursar_local(&["token", "keygen", "--key-file", key_arg], &home).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("wrote a new HS256 key"), "{run:?}");
    // Never overwrites a key.
    let again = bursar_local(&["token", "keygen", "--key-file", key_arg], &home).await;
    assert_eq!(again.code, 1, "{again:?}");

    let run = bursar_local(
        &[
            "token",
            "issue",
            "--user",
            "alice",
            "--role",
            "finance",
            "--ttl",
            "30d",
            "--key-file",
            key_arg,
        ],
        &home,
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "the token alone: {run:?}");
    assert!(
        run.stderr
            .contains("token for alice (finance), valid until"),
        "{run:?}"
    );
    let verifier = TokenVerifier::from_config(&AuthConfig {
        hs256_key_file: Some(key.clone()),
        ..AuthConfig::default()
    })
    .unwrap();
    let principal = verifier.verify(run.stdout.trim(), Utc::now()).unwrap();
    assert_eq!(principal.user, "alice");
    assert_eq!(principal.role, Role::Finance);
    // 30 days from now: still valid in 29 days, expired in 31.
    let day = chrono::Duration::days(1);
    assert!(verifier
        .verify(run.stdout.trim(), Utc::now() + day * 29)
        .is_ok());
    assert!(verifier
        .verify(run.stdout.trim(), Utc::now() + day * 31)
        .is_err());
}

#[tokio::test]
async fn issue_takes_key_issuer_and_audience_from_the_configuration() {
    let home = Home::new();
    let key = home.path().join("jwt.key");
    bursar_gateway::auth::generate_key_file(&key).unwrap();
    home.write(
        "bursar.yaml",
        "auth:\n  hs256_key_file: jwt.key\n  issuer: hpc-bursar\n  audience: hpc\n",
    );
    let run = bursar_local(&["token", "issue", "--user", "bob"], &home).await;
    assert_eq!(run.code, 0, "{run:?}");
    let config = AuthConfig {
        hs256_key_file: Some(key),
        issuer: "hpc-bursar".into(),
        audience: "hpc".into(),
        ..AuthConfig::default()
    };
    let principal = TokenVerifier::from_config(&config)
        .unwrap()
        .verify(run.stdout.trim(), Utc::now())
        .unwrap();
    assert_eq!(
        (principal.user.as_str(), principal.role),
        ("bob", Role::User)
    );
}

#[tokio::test]
async fn issue_refusals_are_clear() {
    let home = Home::new();
    let run = bursar_local(&["token", "issue", "--user", "alice"], &home).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "bursar: no key file: give --key-file PATH or set auth.hs256_key_file in the configuration\n"
    );
    let key = home.path().join("jwt.key");
    bursar_gateway::auth::generate_key_file(&key).unwrap();
    let key_arg = key.to_str().unwrap();
    let run = bursar_local(
        &[
            "token",
            "issue",
            "--user",
            "alice",
            "--role",
            "root",
            "--key-file",
            key_arg,
        ],
        &home,
    )
    .await;
    assert_eq!(run.code, 2, "clap's usage error: {run:?}");
    assert!(run.stderr.contains("unknown role `root`"), "{run:?}");
    let run = bursar_local(
        &[
            "token",
            "issue",
            "--user",
            "alice",
            "--ttl",
            "2y",
            "--key-file",
            key_arg,
        ],
        &home,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--ttl"), "{run:?}");
    let run = bursar_local(
        &[
            "token",
            "issue",
            "--user",
            "alice",
            "--ttl",
            "400d",
            "--key-file",
            key_arg,
        ],
        &home,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("outside 1 s to 366 days"), "{run:?}");
}
