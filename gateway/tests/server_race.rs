//! Racing submissions through the HTTP API cannot overspend: 500 concurrent `POST /v1/jobs`
//! over loopback TCP against an allocation that covers exactly 37 estimates admit exactly 37
//! (201) and refuse the rest (402), and the account's balance never goes negative.

mod admission_support;

use std::sync::Arc;
use std::time::Duration;

use admission_support::*;
use bursar_gateway::auth::{generate_key_file, AuthConfig, Role, TokenIssuer, TokenVerifier};
use bursar_gateway::server::{router, ServerState};
use secrecy::ExposeSecret;

const SUBMISSIONS: usize = 500;
const COVERED: i64 = 37;
const ESTIMATE: i64 = 4_976_562; // job() on onprem batch for 1 h: 4 cpu + 4000 MB

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_concurrent_http_submissions_admit_exactly_what_the_allocation_covers() {
    let f = fixture().await;
    assert_eq!(
        f.estimate("onprem", "batch", &job(), Some(1000), 60),
        ESTIMATE
    );
    f.allocate("physics", "su", COVERED * ESTIMATE).await;

    let key = f._dir.path().join("token.key");
    generate_key_file(&key).unwrap();
    let auth: AuthConfig =
        serde_yaml::from_str(&format!("hs256_key_file: {}", key.display())).unwrap();
    let verifier = TokenVerifier::from_config(&auth).unwrap();
    let token = TokenIssuer::from_config(&auth)
        .unwrap()
        .unwrap()
        .issue(
            "alice",
            Role::User,
            Duration::from_secs(600),
            chrono::Utc::now(),
        )
        .unwrap()
        .expose_secret()
        .to_string();

    let admission = Arc::new(f.admission.clone());
    let state = ServerState::new(f.app.clone(), Arc::new(verifier), Some(admission));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/jobs", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router(state)).await });

    let client = reqwest::Client::new();
    let body = serde_json::to_value(job()).unwrap();
    let start = Arc::new(tokio::sync::Barrier::new(SUBMISSIONS));
    let tasks: Vec<_> = (0..SUBMISSIONS)
        .map(|i| {
            let (client, url, token, body, start) = (
                client.clone(),
                url.clone(),
                token.clone(),
                body.clone(),
                start.clone(),
            );
            tokio::spawn(async move {
                start.wait().await;
                let response = client
                    .post(&url)
                    .bearer_auth(&token)
                    .header("Idempotency-Key", format!("race-{i}"))
                    .json(&body)
                    .send()
                    .await
                    .expect("the server answers");
                let status = response.status().as_u16();
                let json: serde_json::Value = response.json().await.expect("a JSON answer");
                (status, json)
            })
        })
        .collect();

    let mut admitted = 0;
    let mut refused = 0;
    for task in tasks {
        let (status, json) = task.await.unwrap();
        match status {
            201 => {
                admitted += 1;
                assert_eq!(json["cluster"], "onprem", "{json}");
            }
            402 => {
                refused += 1;
                assert_eq!(json["error"], "insufficient_allocation", "{json}");
                let message = json["message"].as_str().unwrap();
                assert!(
                    message.contains("physics") || message.contains("su"),
                    "{message}"
                );
            }
            other => panic!("unexpected {other}: {json}"),
        }
    }
    server.abort();

    assert_eq!(admitted, COVERED);
    assert_eq!(refused, SUBMISSIONS as i64 - COVERED);
    let balance = f.balance("physics", "su").await;
    assert_eq!(balance.held, COVERED * ESTIMATE);
    assert_eq!(balance.remaining, Some(0));
    assert!(balance.available.unwrap() >= 0);
    assert_eq!(
        f.onprem.submitted().len(),
        COVERED as usize,
        "only admitted jobs were forwarded"
    );
}
