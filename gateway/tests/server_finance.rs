//! Finance endpoints through the router: statements (same JSON as the CLI, access by role or
//! association), top users and jobs, and rolled-up usage reports.

mod server_support;

use bursar_gateway::auth::Role;
use serde_json::Value;
use server_support::setup;

fn cli_json(server: &server_support::TestServer, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    serde_json::from_str(&server.cli(&all)).unwrap()
}

#[tokio::test]
async fn statements_are_the_clis_json_and_follow_associations() {
    let server = setup().await;
    server.seed_usage().await;
    let alice = server.token("alice", Role::User);
    let finance = server.token("carol", Role::Finance);
    let uri = "/v1/accounts/physics/statement?currency=su&from=2025-01-02&to=2025-02-01";
    let api = server.get(uri, &alice).await;
    let cli = cli_json(
        &server,
        &[
            "statement",
            "physics",
            "--currency",
            "su",
            "--from",
            "2025-01-02",
            "--to",
            "2025-02-01",
        ],
    );
    assert_eq!(*api.assert_status(200), cli);
    assert_eq!(api.json["opening"], "87.50");
    assert_eq!(api.json["charges"], "7.25");
    assert_eq!(api.json["closing"], "80.25");
    server.get(uri, &finance).await.assert_status(200);
    server
        .get(
            "/v1/accounts/chemistry/statement?currency=su&from=2025-01-01&to=2025-02-01",
            &alice,
        )
        .await
        .assert_error(403, "no_association");
    server
        .get(
            "/v1/accounts/physics/statement?currency=su&from=2025-01-01",
            &alice,
        )
        .await
        .assert_error(400, "bad_request");
}

#[tokio::test]
async fn top_and_rollup_reports() {
    let server = setup().await;
    server.seed_usage().await;
    let finance = server.token("carol", Role::Finance);
    let alice = server.token("alice", Role::User);
    let api = server
        .get(
            "/v1/reports/top?from=2025-01-01&to=2025-02-01&currency=su",
            &finance,
        )
        .await;
    let cli = cli_json(
        &server,
        &[
            "report",
            "top",
            "--from",
            "2025-01-01",
            "--to",
            "2025-02-01",
            "--currency",
            "su",
        ],
    );
    assert_eq!(*api.assert_status(200), cli);
    assert_eq!(api.json["rows"][0]["user"], "alice");
    assert_eq!(api.json["rows"][0]["amount"], "19.75");
    let jobs = server
        .get(
            "/v1/reports/top?from=2025-01-01&to=2025-02-01&by=job&limit=1",
            &finance,
        )
        .await;
    assert_eq!(jobs.assert_status(200)["rows"][0]["job_id"], "1");
    server
        .get("/v1/reports/top?from=2025-01-01&to=2025-02-01", &alice)
        .await
        .assert_error(403, "forbidden");

    let rolled = server
        .get(
            "/v1/reports/usage?from=2025-01-01&to=2025-02-01&rollup=true",
            &finance,
        )
        .await;
    let rows = rolled.assert_status(200)["rows"]
        .as_array()
        .unwrap()
        .clone();
    let org_su = rows
        .iter()
        .find(|r| r["account"] == "org" && r["currency"] == "su")
        .expect("org rolls up its subtree");
    assert_eq!(org_su["amount"], "22.75");
    let cli = cli_json(
        &server,
        &[
            "report",
            "usage",
            "--from",
            "2025-01-01",
            "--to",
            "2025-02-01",
            "--rollup",
        ],
    );
    assert_eq!(rolled.json, cli);
    let weekly = cli_json(
        &server,
        &[
            "report",
            "usage",
            "--from",
            "2025-01-01",
            "--to",
            "2025-02-01",
            "--by",
            "week",
        ],
    );
    assert_eq!(weekly["rows"][0]["week"], "2025-W01");
}

#[tokio::test]
async fn the_focus_export_streams_what_the_cli_prints() {
    let server = setup().await;
    server.seed_usage().await;
    let finance = server.token("carol", Role::Finance);
    let range = ["--from", "2025-01-01", "--to", "2025-02-01"];
    let mut cli = vec!["export", "focus"];
    cli.extend(range);

    // CSV (the default), byte for byte the CLI's, with its content type.
    let csv = server
        .get("/v1/exports/focus?from=2025-01-01&to=2025-02-01", &finance)
        .await;
    csv.assert_status(200);
    assert_eq!(
        csv.headers[axum::http::header::CONTENT_TYPE],
        "text/csv; charset=utf-8"
    );
    let text = csv.json.as_str().expect("CSV text").to_string();
    assert_eq!(text, server.cli(&cli));
    assert!(text.starts_with("BilledCost,EffectiveCost,ListCost,BillingCurrency,"));
    // The seeded jobs span two days: both are in it, a row each.
    assert!(text.lines().count() > 2, "{text}");

    // JSON: the CLI's array.
    let json = server
        .get(
            "/v1/exports/focus?from=2025-01-01&to=2025-02-01&format=json",
            &finance,
        )
        .await;
    assert_eq!(*json.assert_status(200), cli_json(&server, &cli));
    assert_eq!(
        json.json.as_array().unwrap().len(),
        text.lines().count() - 1
    );

    // Nothing in the period: an empty array, a header alone.
    let empty = server
        .get(
            "/v1/exports/focus?from=2024-01-01&to=2024-02-01&format=json",
            &finance,
        )
        .await;
    assert_eq!(*empty.assert_status(200), serde_json::json!([]));

    let alice = server.token("alice", Role::User);
    server
        .get("/v1/exports/focus?from=2025-01-01&to=2025-02-01", &alice)
        .await
        .assert_error(403, "forbidden");
    server
        .get(
            "/v1/exports/focus?from=2025-01-01&to=2025-02-01&format=xml",
            &finance,
        )
        .await
        .assert_error(400, "bad_request");
    server
        .get("/v1/exports/focus?from=2025-02-01&to=2025-01-01", &finance)
        .await
        .assert_error(400, "bad_request");
}
