//! The real dstack [`Forwarder`] against a mock dstack 0.22.5 answering with captured
//! `runs/get_plan` and `runs/apply` bodies: a task becomes a uniquely named run, the hold is
//! linked to the job submission the collector will report, and cancel stops the run.

use std::sync::Arc;

use bursar_gateway::admission::{Admission, ClusterStatus};
use bursar_gateway::app::App;
use bursar_gateway::auth::{Principal, Role};
use bursar_gateway::config::Config;
use bursar_gateway::request::{JobRequest, WarnSignal};
use bursar_pricing::Currency;
use serde_json::{json, Value};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PLAN: &str =
    include_str!("../../collectors/tests/fixtures/dstack/exp_get_plan_with_seeded_fleet.resp.json");
const APPLIED: &str =
    include_str!("../../collectors/tests/fixtures/dstack/runs_apply_nogpu.resp.json");

async fn admission(url: &str, dir: &tempfile::TempDir) -> (Arc<App>, Admission) {
    let token = dir.path().join("dstack.token");
    std::fs::write(&token, "tok-123\n").unwrap();
    let yaml = format!(
        "database: sqlite://{db}\n\
         accounts:\n  physics: {{}}\n\
         users:\n  alice: {{default_account: physics}}\n\
         clusters:\n  lab:\n    kind: dstack\n    currency: usd\n\
         \x20   partitions:\n      any: {{weights: \"CPU=0.05,GRES/gpu=2.0\"}}\n\
         \x20   submit:\n      dstack: {{url: \"{url}\", token_file: \"{token}\", project: hpc}}\n\
         \x20     default_partition: any\n\
         \x20     partitions:\n        any: {{max_time: 1d, default_time: 2h}}\n",
        db = dir.path().join("ledger.db").display(),
        token = token.display(),
    );
    let config = Config::parse(&yaml).unwrap();
    config.validate().unwrap();
    let app = Arc::new(App::open(config).await.unwrap());
    let t = bursar_gateway::timefmt::now();
    app.ledger
        .set_allocation(
            "physics",
            &Currency::new("usd"),
            10_000_000,
            t - 86_400,
            t + 86_400,
        )
        .await
        .unwrap();
    let admission = Admission::from_app(app.clone()).unwrap();
    (app, admission)
}

fn alice() -> Principal {
    Principal {
        user: "alice".into(),
        role: Role::User,
        token_id: None,
    }
}

/// dstack answering the next `runs/get` with `run`.
async fn answer_run(server: &MockServer, run: &Value) {
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(ResponseTemplate::new(200).set_body_json(run))
        .up_to_n_times(1)
        .mount(server)
        .await;
}

fn task() -> JobRequest {
    serde_json::from_value(json!({"dstack": {
        "type": "task", "name": "train", "commands": ["python train.py"],
        "resources": {"cpu": 4}
    }}))
    .unwrap()
}

#[tokio::test]
async fn a_task_becomes_a_new_run_and_its_hold_waits_for_its_submission() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .and(header("authorization", "Bearer tok-123"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(PLAN, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/apply"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(APPLIED, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (app, admission) = admission(&server.uri(), &dir).await;

    let quote = admission.quote(&alice(), &task()).await.unwrap();
    let lab = quote.cluster("lab").unwrap();
    assert!(lab.eligible(), "{:?}", lab.reasons);
    assert_eq!(
        lab.estimate,
        Some(400_000),
        "4 CPUs × 0.05 × the default 2 h"
    );

    let submitted = admission.submit(&alice(), task(), None).await.unwrap();
    assert_eq!(
        submitted.cluster_job_id, "hello-1",
        "the run name dstack answered"
    );

    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    let spec = &sent["run_spec"];
    let name = spec["run_name"].as_str().unwrap();
    assert!(
        name.starts_with("train-") && name.len() == "train-".len() + 8,
        "{name}"
    );
    assert_eq!(
        spec["configuration"],
        json!({"type": "task", "commands": ["python train.py"], "resources": {"cpu": 4},
               "max_duration": 7200}),
        "the task as written, its name moved to a unique run name, the priced limit enforced"
    );

    // The link is written behind the answer; readers outside the service wait for it.
    admission.settled().await;
    let hold = app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(
        hold.job_ref.as_deref(),
        Some("7ce8d6b0-1710-41b2-bbde-8f972724d9c2"),
        "the job submission id the collector reports"
    );

    // Its status is the run's, as dstack reports it: going on, then failed with the job's
    // exit status.
    let mut run: Value = serde_json::from_str(APPLIED).unwrap();
    // (A run dstack answers 404 for is gone.)
    let gone = admission.status(&alice(), submitted.id).await.unwrap();
    assert_eq!(gone.status, ClusterStatus::gone());
    answer_run(&server, &run).await;
    let going = admission.status(&alice(), submitted.id).await.unwrap();
    assert_eq!(
        (going.status.finished, going.status.exit_code),
        (false, None)
    );
    assert_eq!(going.status.states, ["submitted"]);
    run["status"] = json!("failed");
    run["jobs"][0]["job_submissions"][0]["exit_status"] = json!(3);
    answer_run(&server, &run).await;
    let failed = admission.status(&alice(), submitted.id).await.unwrap();
    assert_eq!(
        (failed.status.finished, failed.status.exit_code),
        (true, Some(3)),
        "{failed:?}"
    );
    // A stopped run whose job says 0 is still no success.
    run["status"] = json!("terminated");
    run["jobs"][0]["job_submissions"][0]["exit_status"] = json!(0);
    answer_run(&server, &run).await;
    let stopped = admission.status(&alice(), submitted.id).await.unwrap();
    assert_eq!(stopped.status.exit_code, Some(1), "{stopped:?}");

    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/stop"))
        .and(body_json(
            json!({"runs_names": ["hello-1"], "abort": false}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw("null", "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let view = admission.cancel(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "cancelled");
    assert!(app.ledger.holds(true).await.unwrap().is_empty());
}

#[tokio::test]
async fn batch_scripts_are_not_for_dstack_and_dstack_errors_release_the_hold() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"detail": {"msg": "Access denied", "code": null}})),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (app, admission) = admission(&server.uri(), &dir).await;

    let script: JobRequest =
        serde_json::from_value(json!({"script": "#!/bin/sh\ntrue\n", "time_limit_min": 10}))
            .unwrap();
    let quote = admission.quote(&alice(), &script).await.unwrap();
    assert_eq!(
        quote.cluster("lab").unwrap().reasons,
        ["lab is a dstack cluster: it runs dstack tasks, not batch scripts"]
    );
    let mut held = task();
    held.hold = true;
    let quote = admission.quote(&alice(), &held).await.unwrap();
    assert_eq!(
        quote.cluster("lab").unwrap().reasons,
        ["lab: dstack has no held runs: --hold applies to Slurm clusters"]
    );
    let mut per_gpu: JobRequest = serde_json::from_value(json!({"dstack": {
        "type": "task", "name": "train", "commands": ["python train.py"],
        "resources": {"cpu": 4, "gpu": 1}
    }}))
    .unwrap();
    per_gpu.cpus_per_gpu = Some(2);
    let quote = admission.quote(&alice(), &per_gpu).await.unwrap();
    assert!(
        quote.cluster("lab").unwrap().reasons[0].contains("--cpus-per-gpu"),
        "{:?}",
        quote.cluster("lab").unwrap().reasons
    );
    let mut signalled = task();
    signalled.slurm.signal = Some(WarnSignal::parse("USR1@30").unwrap());
    signalled.slurm.requeue = Some(false);
    let quote = admission.quote(&alice(), &signalled).await.unwrap();
    assert_eq!(
        quote.cluster("lab").unwrap().reasons,
        ["lab: --signal, --no-requeue only Slurm clusters take"]
    );

    let err = admission.submit(&alice(), task(), None).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (502, "upstream_refused"));
    assert!(err.to_string().contains("Access denied"), "{err}");
    assert!(app.ledger.holds(true).await.unwrap().is_empty());
}
