//! The submit side against the captured `runs/get_plan`, `runs/apply` and `runs/stop` answers.

#[path = "fixtures/dstack/support.rs"]
mod support;

use bursar_collectors::dstack::{DstackError, PLAN_MAX_OFFERS};
use serde_json::{json, Value};
use support::*;
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn ok_json(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/json")
}

async fn plan_answers(server: &MockServer, fixture_name: &str) {
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .respond_with(ok_json(fixture(fixture_name)))
        .mount(server)
        .await;
}

#[tokio::test]
async fn plans_then_applies_a_new_run() {
    let server = MockServer::start().await;
    plan_answers(&server, "exp_get_plan_with_seeded_fleet.resp.json").await;
    let plan_resp = json("exp_get_plan_with_seeded_fleet.resp.json");
    // apply must send back the spec the server echoed, no current resource, force false.
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/apply"))
        .and(body_json(json!({
            "plan": { "run_spec": plan_resp["run_spec"], "current_resource": null },
            "force": false
        })))
        .respond_with(ok_json(fixture("runs_apply_nogpu.resp.json")))
        .expect(1)
        .mount(&server)
        .await;

    let client = client(&server.uri(), 100);
    let spec: Value = json("exp_get_plan_with_seeded_fleet.req.json")["run_spec"].clone();
    let plan = client.get_plan(&spec).await.unwrap();
    assert_eq!(plan.action, "create");
    assert_eq!(plan.user, "admin");
    assert_eq!(plan.run_name.as_deref(), Some("router-probe"));
    assert_eq!(plan.current_run_id, None);
    assert_eq!(plan.job_plans.len(), 1);
    assert_eq!(
        plan.job_plans[0].total_offers, 0,
        "no fleet on the capture server"
    );
    assert_eq!(plan.job_plans[0].cheapest_price_micros, None);

    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(
        sent,
        json!({ "run_spec": spec, "max_offers": PLAN_MAX_OFFERS })
    );

    // The captured apply answer is hello-1's (the capture server never applied router-probe).
    let run = client.apply(&plan).await.unwrap();
    assert_eq!(run.id, "df790e28-0aea-4a96-830d-ec8596db1039");
    assert_eq!(run.run_name, "hello-1");
    assert_eq!(run.status, "submitted");
    assert_eq!(run.project, "hpc");
    assert_eq!(run.submitted_at, time("2026-11-21T23:53:27.072220Z"));
    assert!(!run.deleted);
}

/// A plan for a name that exists (here a finished run, which apply would soft-delete and
/// replace) is not applied: nothing is sent.
#[tokio::test]
async fn apply_never_touches_an_existing_run() {
    let server = MockServer::start().await;
    plan_answers(&server, "runs_get_plan_existing.resp.json").await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/apply"))
        .respond_with(ok_json(fixture("runs_apply_nogpu.resp.json")))
        .expect(0)
        .mount(&server)
        .await;
    let client = client(&server.uri(), 100);
    let spec = json("runs_get_plan_existing.resp.json")["run_spec"].clone();
    let plan = client.get_plan(&spec).await.unwrap();
    assert_eq!(
        plan.action, "create",
        "dstack would replace the finished run"
    );
    assert_eq!(
        plan.current_run_id.as_deref(),
        Some("df790e28-0aea-4a96-830d-ec8596db1039")
    );
    let err = client.apply(&plan).await.unwrap_err();
    assert_eq!(
        err,
        DstackError::NameTaken {
            project: "hpc".into(),
            run_name: "hello-1".into()
        }
    );
    assert!(!err.is_retryable());
}

/// If a run of that name appears between plan and apply, dstack refuses (force is false).
#[tokio::test]
async fn a_name_taken_after_planning_is_refused_by_dstack() {
    let server = MockServer::start().await;
    plan_answers(&server, "exp_get_plan_with_seeded_fleet.resp.json").await;
    let refusal = fixture("apply_active_same_name_noforce.resp.txt");
    let body = refusal.split(" HTTP").next().unwrap().to_string();
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/apply"))
        .respond_with(ResponseTemplate::new(400).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    let client = client(&server.uri(), 100);
    let plan = client
        .get_plan(&json!({"configuration": {"type": "task"}}))
        .await
        .unwrap();
    let err = client.apply(&plan).await.unwrap_err();
    assert!(
        matches!(&err, DstackError::Server { status: 400, code: Some(c), message, .. }
            if c == "error" && message.starts_with("Failed to apply plan. Resource has been changed")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn a_non_member_cannot_submit() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_raw(fixture("nonmember_apply_bob.resp.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let err = client(&server.uri(), 100)
        .get_plan(&json!({"configuration": {"type": "task"}}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DstackError::Auth { status: 403, message, .. } if message == "Access denied"),
        "{err:?}"
    );
}

#[tokio::test]
async fn stops_runs_by_name() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/stop"))
        .and(body_json(json("runs_stop_alice.req.json")))
        .respond_with(ok_json(fixture("runs_stop_alice.resp.json")))
        .expect(1)
        .mount(&server)
        .await;
    client(&server.uri(), 100)
        .stop_run(&["hello-gpu-alice".to_string()], false)
        .await
        .unwrap();
}

/// Offer prices are read from their text. The capture server had no fleet (0 offers), so the
/// offers are the real shared offers of `seed-spot-retry` put into the captured plan.
#[tokio::test]
async fn plans_quote_the_cheapest_offer_exactly() {
    let mut plan = json("exp_get_plan_with_seeded_fleet.resp.json");
    let run = json("runs_get_spot_retry.resp.json");
    let first = run["jobs"][0]["job_submissions"][0]["job_runtime_data"]["offer"].clone();
    let mut second = run["jobs"][0]["job_submissions"][1]["job_runtime_data"]["offer"].clone();
    second["price"] = number("0.1621");
    plan["job_plans"][0]["offers"] = json!([second, first]);
    plan["job_plans"][0]["total_offers"] = 2.into();
    plan["job_plans"][0]["max_price"] = number("2.5");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .respond_with(ok_json(plan.to_string()))
        .mount(&server)
        .await;
    let plan = client(&server.uri(), 100)
        .get_plan(&json!({"configuration": {"type": "task"}}))
        .await
        .unwrap();
    assert_eq!(plan.job_plans[0].total_offers, 2);
    assert_eq!(plan.job_plans[0].cheapest_price_micros, Some(157_800));
    assert_eq!(plan.job_plans[0].max_price_micros, Some(2_500_000));
}
