//! `bursar jobs`, `bursar cancel` and the remote `bursar balance`, against a wiremock server
//! standing in for bursar.

mod client_support;

use client_support::*;
use serde_json::json;
use wiremock::matchers::{method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn job(id: u64, state: &str, charge: Option<&str>) -> serde_json::Value {
    json!({
        "id": id, "user": "alice", "account": "physics", "cluster": "onprem",
        "cluster_job_id": format!("{}", 4000 + id), "state": state, "currency": "su",
        "estimate": "4.00", "hold": if state == "held" { "4.00" } else { "0.00" },
        "charge": charge, "submitted_at": "2026-05-01T10:00:00Z", "settled_at": null
    })
}

#[tokio::test]
async fn jobs_shows_held_jobs_unless_all() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/jobs"))
        .and(query_param("state", "held"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"jobs": [job(17, "held", None)]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/jobs"))
        .and(query_param_is_missing("state"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            job(17, "held", None),
            job(16, "settled", Some("3.10"))
        ])))
        .mount(&server)
        .await;
    let home = Home::new();
    let run = bursar(&["jobs"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "\
ID  CLUSTER  JOB   ACCOUNT  USER   STATE  ESTIMATE  HOLD  CHARGE  CURRENCY  SUBMITTED
17  onprem   4017  physics  alice  held       4.00  4.00       -  su        2026-05-01T10:00:00Z
"
    );
    let run = bursar(&["jobs", "--all", "--format", "json"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    let shown: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(shown["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(shown["jobs"][1]["charge"], "3.10");
}

#[tokio::test]
async fn jobs_pages_back_with_limit_and_before() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/jobs"))
        .and(query_param_is_missing("state"))
        .and(query_param("limit", "2"))
        .and(query_param("before", "17"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "jobs": [job(15, "settled", Some("3.10")), job(16, "held", None)],
            "next_before": 15
        })))
        .mount(&server)
        .await;
    let home = Home::new();
    let args = ["jobs", "--all", "-n", "2", "--before", "17"];
    let run = bursar(&args, &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 3, "{run:?}");
    assert_eq!(
        run.stderr,
        "older jobs may match too: add --before 15 to list them\n"
    );
    let run = bursar(
        &["jobs", "--all", "-n", "2", "--before", "17", "-f", "json"],
        &home,
        &server.uri(),
    )
    .await;
    let shown: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(shown["next_before"], 15);
    let run = bursar(&["jobs", "--limit", "0"], &home, &server.uri()).await;
    assert_eq!(run.code, 2, "{run:?}");
}

#[tokio::test]
async fn cancel_deletes_and_reports_each_job() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/v1/jobs/17"))
        .respond_with(ResponseTemplate::new(200).set_body_json(job(17, "cancelled", None)))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v1/jobs/99"))
        .respond_with(
            ResponseTemplate::new(404).set_body_json(
                json!({"error": "not_found", "message": "no job 99", "details": null}),
            ),
        )
        .mount(&server)
        .await;
    let home = Home::new();
    let run = bursar(&["cancel", "17"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "cancelled bursar job 17 (job 4017 on cluster onprem); its hold is released\n"
    );
    let run = bursar(&["cancel", "99", "17"], &home, &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stderr, "bursar: job 99: no job 99\n");
    assert!(run.stdout.contains("cancelled bursar job 17"));
}

#[tokio::test]
async fn balance_goes_through_the_api_when_bursar_url_is_set() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/accounts"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"accounts": [
                {"name": "science", "parent": null, "users": []},
                {"name": "physics", "parent": "science", "users": ["alice"]}
            ]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/accounts/science/balance"))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({
            "error": "no_association", "message": "alice is not associated with science", "details": null
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/accounts/physics/balance"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "at": "2026-05-01T12:00:00Z",
            "balances": [{"account": "physics", "currency": "su", "allocated": "100.00",
                          "charged": "10.00", "held": "4.00", "remaining": "90.00",
                          "available": "86.00", "period_start": "2026-01-01T00:00:00Z", "period_end": null}]
        })))
        .mount(&server)
        .await;
    let home = Home::new();
    let run = bursar(&["balance"], &home, &server.uri()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "\
ACCOUNT  CURRENCY  ALLOCATED  CHARGED  HELD  REMAINING  AVAILABLE  PERIOD
physics  su           100.00    10.00  4.00      90.00      86.00  2026-01-01T00:00:00Z .. -
"
    );
    // The one account named: a refusal is an error, not skipped.
    let run = bursar(&["balance", "science"], &home, &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stderr, "bursar: alice is not associated with science\n");
    // Without BURSAR_URL, and with no local configuration or database, the default server is
    // asked (whether or not something listens there), and no ledger is created.
    let run = run_program(&bursar_exe(), &["balance"], &home, &[]).await;
    assert!(
        run.stderr
            .contains("cannot reach bursar at http://127.0.0.1:8640: ")
            || run
                .stderr
                .contains("the token from BURSAR_TOKEN was refused"),
        "{run:?}"
    );
    assert!(!home.path().join("bursar.db").exists());
    // --local keeps the admin's behaviour.
    let run = bursar(
        &["balance", "--local", "--at", "2026-05-01"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("physics"), "{run:?}");
}
