//! `bursar quote` and `bursar submit --test-only` against a wiremock server standing in for
//! bursar.

mod client_support;

use client_support::*;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn quotes() -> Value {
    json!([
        {"cluster": "onprem", "currency": "su", "eligible": true, "reasons": [],
         "estimate": "4.00",
         "remaining_after": [{"account": "physics", "remaining": "96.00"}, {"account": "science", "remaining": "996.00"}]},
        {"cluster": "cloud", "currency": "usd", "eligible": true, "reasons": ["physics would go below 0 usd"],
         "estimate": "12.50",
         "remaining_after": [{"account": "physics", "remaining": "-2.50"}]},
        {"cluster": "gpu", "currency": "su", "eligible": false,
         "reasons": ["partition batch does not exist on gpu"], "estimate": null, "remaining_after": []}
    ])
}

async fn quoting_server(answer: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/quotes"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&server)
        .await;
    server
}

const TABLE: &str = "\
CLUSTER  CURRENCY  ESTIMATE  ELIGIBLE  AFFORDABLE  REMAINING AFTER                REASONS
onprem   su            4.00  yes       yes         physics 96.00, science 996.00
cloud    usd          12.50  yes       no          physics -2.50                  physics would go below 0 usd
gpu      su               -  no        -           -                              partition batch does not exist on gpu
";

#[tokio::test]
async fn quote_prints_a_table_of_every_cluster() {
    let server = quoting_server(quotes()).await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(
        &["quote", "-A", "physics", "-p", "batch", "job.sh"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, TABLE);
    let body = &bodies(&server, "POST", "/v1/quotes").await[0];
    assert_eq!(body["account"], "physics");
    assert_eq!(body["partition"], "batch");
    assert_eq!(body["time_limit_min"], 30);
    // A quote needs neither the environment nor the working folder.
    assert!(body.get("environment").is_none() && body.get("working_dir").is_none());
    // No Idempotency-Key: a quote changes nothing.
    let received = server.received_requests().await.unwrap();
    assert!(!received[0].headers.contains_key("idempotency-key"));
}

#[tokio::test]
async fn quote_json_is_the_servers_answer() {
    // The server's shape: the clusters, the account charged and the route it would take.
    let answer = json!({
        "user": "alice", "account": "physics", "clusters": quotes(),
        "route": {"cluster": "onprem", "explanation": [
            "onprem: first choice; estimate 4.00 su; physics has 96.00 su left after it",
            "order: the site's preference (onprem, cloud, gpu)"
        ]}
    });
    let server = quoting_server(answer.clone()).await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(&["quote", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!(
            "{TABLE}\naccount: physics\nroute: onprem: first choice; estimate 4.00 su; physics \
             has 96.00 su left after it\n  order: the site's preference (onprem, cloud, gpu)\n"
        )
    );
    let run = bursar(
        &["quote", "--format", "json", "job.sh"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(serde_json::from_str::<Value>(&run.stdout).unwrap(), answer);
    let run = bursar(&["quote", "--format=csv", "job.sh"], &home, &server.uri()).await;
    assert!(
        run.stdout.starts_with(
            "cluster,currency,estimate,eligible,affordable,remaining after,reasons\n\
             onprem,su,4.00,yes,yes,\"physics 96.00, science 996.00\",\n"
        ),
        "{run:?}"
    );
}

#[tokio::test]
async fn quote_exits_1_when_no_cluster_can_take_the_job() {
    let mut answer = quotes();
    answer.as_array_mut().unwrap().remove(0);
    let server = quoting_server(answer).await;
    let run = bursar(&["quote", "--wrap=true"], &Home::new(), &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("cloud "), "{run:?}");
}

#[tokio::test]
async fn test_only_quotes_instead_of_submitting() {
    let server = quoting_server(quotes()).await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(&["submit", "--test-only", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, TABLE);
    assert!(bodies(&server, "POST", "/v1/jobs").await.is_empty());
}
