//! The hold of a dstack run submitted through bursar lasts as long as the run:
//!
//! - A run that never gets an instance (dstack 0.22.5 with no fleet:
//!   `failed_to_start_due_to_no_capacity`, no `job_provisioning_data`) settles its hold at 0
//!   once the collector sees it finished — whether the first pass lists it finished or a
//!   later pass re-reads it — and a run still waiting keeps its hold.
//! - A run that dstack retries after its first submission ended (a lost spot instance, a
//!   failure) keeps its hold while it goes on, and settles when it ends.
//! - A hold due to expire is kept while dstack lists its run as active.

use std::sync::Arc;

use bursar_gateway::admission::{Admission, JobQuery};
use bursar_gateway::app::App;
use bursar_gateway::auth::{Principal, Role};
use bursar_gateway::collect::{run_pass, Collector, PassWindow};
use bursar_gateway::config::Config;
use bursar_gateway::request::JobRequest;
use bursar_ledger::{EntryKind, HoldState};
use bursar_pricing::Currency;
use serde_json::{json, Value};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PLAN: &str =
    include_str!("../../collectors/tests/fixtures/dstack/exp_get_plan_with_seeded_fleet.resp.json");
const APPLIED: &str =
    include_str!("../../collectors/tests/fixtures/dstack/runs_apply_nogpu.resp.json");

/// The applied run, submitted now (bursar links a record to a hold only when the job was
/// submitted after the hold was placed: `bursar_ledger::SUBMIT_SKEW_SECS`).
fn applied_run() -> Value {
    let mut run: Value = serde_json::from_str(APPLIED).unwrap();
    let now = json!(bursar_gateway::timefmt::format_instant(
        bursar_gateway::timefmt::now()
    ));
    run["submitted_at"] = now.clone();
    run["latest_job_submission"]["submitted_at"] = now.clone();
    run["jobs"][0]["job_submissions"][0]["submitted_at"] = now;
    run
}

/// The applied run as dstack shows it ~10 s later: failed, its only submission never placed.
fn failed_run() -> Value {
    let mut run = applied_run();
    run["status"] = json!("failed");
    run["termination_reason"] = json!("job_failed");
    let submission = &mut run["jobs"][0]["job_submissions"][0];
    assert!(submission["job_provisioning_data"].is_null());
    submission["status"] = json!("failed");
    submission["termination_reason"] = json!("failed_to_start_due_to_no_capacity");
    submission["finished_at"] = json!(bursar_gateway::timefmt::format_instant(
        bursar_gateway::timefmt::now() + 10
    ));
    run
}

struct Fixture {
    _dir: tempfile::TempDir,
    app: Arc<App>,
    admission: Admission,
    collector: Collector,
}

async fn fixture(server: &MockServer) -> Fixture {
    fixture_priced(server, "CPU=0.05,GRES/gpu=2.0").await
}

/// The fixture with partition `any` priced by `weights`.
async fn fixture_priced(server: &MockServer, weights: &str) -> Fixture {
    fixture_with(server, weights, "").await
}

/// The fixture with partition `any` priced by `weights`, and `submit_extra` (indented lines)
/// in the cluster's `submit` section.
async fn fixture_with(server: &MockServer, weights: &str, submit_extra: &str) -> Fixture {
    accept_runs(server).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("dstack.token");
    std::fs::write(&token, "tok-123\n").unwrap();
    let yaml = format!(
        "database: sqlite://{db}\n\
         accounts:\n  physics: {{}}\n  hpc: {{}}\n\
         users:\n  alice: {{default_account: physics}}\n\
         clusters:\n  lab:\n    kind: dstack\n    currency: usd\n\
         \x20   partitions:\n      any: {{weights: \"{weights}\"}}\n\
         \x20   collect:\n      dstack: {{url: \"{url}\", token_file: \"{token}\", project: hpc}}\n\
         \x20     attempts: 1\n\
         \x20   submit:\n      default_partition: any\n{submit_extra}\
         \x20     partitions:\n        any: {{max_time: 1d, default_time: 2h}}\n",
        db = dir.path().join("ledger.db").display(),
        url = server.uri(),
        token = token.display(),
    );
    let config = Config::parse(&yaml).unwrap();
    config.validate().unwrap();
    let collector = Collector::from_config("lab", &config.clusters["lab"])
        .unwrap()
        .unwrap();
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
    Fixture {
        _dir: dir,
        app,
        admission,
        collector,
    }
}

/// dstack plans and applies a run (the captured answers, whatever the task).
async fn accept_runs(server: &MockServer) {
    for (route, body) in [("runs/get_plan", PLAN), ("runs/apply", APPLIED)] {
        Mock::given(method("POST"))
            .and(path(format!("/api/project/hpc/{route}")))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
            .mount(server)
            .await;
    }
}

fn alice() -> Principal {
    Principal {
        user: "alice".into(),
        role: Role::User,
        token_id: None,
    }
}

fn task() -> JobRequest {
    serde_json::from_value(json!({"dstack": {
        "type": "task", "name": "hello", "commands": ["echo hi"], "resources": {"cpu": 2}
    }}))
    .unwrap()
}

/// `runs/list` answers `runs` once, then nothing new (as dstack does past the cursor).
async fn list_answers(server: &MockServer, runs: Value) {
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .respond_with(ResponseTemplate::new(200).set_body_json(runs))
        .up_to_n_times(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(server)
        .await;
}

/// One collection pass as `bursar serve` runs it: after the jobs admission answered are
/// recorded.
async fn pass(f: &Fixture) {
    f.admission.settled().await;
    run_pass(&f.app, &f.collector, PassWindow::default(), &|_, _, _| {})
        .await
        .unwrap();
}

#[tokio::test]
async fn a_run_listed_failed_without_an_instance_settles_its_hold_at_zero() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 1);

    list_answers(&server, json!([failed_run()])).await;
    pass(&f).await;

    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "settled");
    assert_eq!((view.held, view.charge), (0, Some(0)));
    let hold = f.app.ledger.holds(false).await.unwrap().pop().unwrap();
    assert_eq!(hold.state, HoldState::Settled);
    // The zero record is charged to the hold's account, not the project's.
    let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
    let usage: Vec<_> = entries.iter().filter(|e| e.kind.is_usage()).collect();
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!((usage[0].account.as_str(), usage[0].amount), ("physics", 0));

    // Reading it again posts nothing new.
    pass(&f).await;
    let again = f.app.ledger.journal(&Default::default()).await.unwrap();
    assert_eq!(again.len(), entries.len());
}

#[tokio::test]
async fn a_waiting_run_keeps_its_hold_until_a_later_pass_sees_it_fail() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();

    // The pass lists the run, then re-reads the unfinished ones: still waiting both times.
    let waiting = applied_run();
    list_answers(&server, json!([waiting])).await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&waiting))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    pass(&f).await;
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(
        (view.state.as_str(), view.held),
        ("held", submitted.estimate)
    );

    // Next pass: nothing new in the list; the re-read of the unfinished run finds it failed.
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(ResponseTemplate::new(200).set_body_json(failed_run()))
        .mount(&server)
        .await;
    pass(&f).await;
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "settled");
    assert_eq!((view.held, view.charge), (0, Some(0)));
}

/// A run that holds nothing (an estimate of 0) is charged under its job submission's id, not
/// its run name (the `cluster_job_id` bursar shows): it is settled, at 0, once the collector
/// sees it finished.
#[tokio::test]
async fn a_run_that_holds_nothing_settles_once_listed_finished() {
    let server = MockServer::start().await;
    let f = fixture_priced(&server, "CPU=0,GRES/gpu=0").await;
    let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();
    assert_eq!((submitted.estimate, submitted.hold_id), (0, None));
    f.admission.settled().await;
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!((view.state.as_str(), view.charge), ("held", None));
    assert_ne!(
        view.job.settle_ref.as_deref(),
        view.job.cluster_job_id.as_deref()
    );

    list_answers(&server, json!([failed_run()])).await;
    pass(&f).await;
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!((view.state.as_str(), view.charge), ("settled", Some(0)));
    assert!(view.settled_at.is_some());
}

const SEEDED: &str =
    include_str!("../../collectors/tests/fixtures/dstack/final_runs_list_all.resp.json");

#[tokio::test]
async fn a_run_submitted_through_bursar_is_charged_to_the_account_that_holds_its_money() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    f.admission.submit(&alice(), task(), None).await.unwrap();

    // dstack ran it under the project token's user (admin) and it got an instance: the real
    // seeded `seed-deleted` run (0.0192 usd), renamed to the run bursar submitted.
    let applied: Value = serde_json::from_str(APPLIED).unwrap();
    let seeded: Vec<Value> = serde_json::from_str(SEEDED).unwrap();
    let mut run = seeded
        .into_iter()
        .find(|r| r["run_spec"]["run_name"] == "seed-deleted")
        .unwrap();
    assert_eq!(run["user"], "admin");
    run["run_spec"]["run_name"] = applied["run_spec"]["run_name"].clone();
    run["id"] = applied["id"].clone();
    run["jobs"][0]["job_submissions"][0]["id"] =
        applied["jobs"][0]["job_submissions"][0]["id"].clone();
    run["deleted"] = json!(false);
    list_answers(&server, json!([run])).await;
    pass(&f).await;

    let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
    let usage: Vec<_> = entries.iter().filter(|e| e.kind.is_usage()).collect();
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(
        usage[0].account, "physics",
        "the holder's account, not the project's"
    );
    assert_eq!(usage[0].user.as_deref(), Some("alice"));
    assert_eq!(usage[0].amount, 19_200);
}

const SEEDED_RETRY: &str = "seed-spot-retry";

/// The real seeded `seed-spot-retry` run (a g4dn.xlarge spot instance lost after 24 min at
/// 0.1578 usd/h, then a second submission done after 44 min at 0.1621 usd/h), as the run
/// bursar submitted: its id, name and first submission's id, and its times moved to now. With
/// `first` the first submission's `(status, termination_reason)`; while `going_on`, the run
/// and its second submission are still running.
fn retried_run(first: (&str, &str), going_on: bool) -> Value {
    retried_run_at(first, going_on, bursar_gateway::timefmt::now())
}

/// [`retried_run`] submitted at `t`: the same run read twice must carry the same times (a
/// record's identity is its submission's id and submit time), whatever the clock did between
/// the two reads.
fn retried_run_at(first: (&str, &str), going_on: bool, t: i64) -> Value {
    let applied: Value = serde_json::from_str(APPLIED).unwrap();
    let seeded: Vec<Value> = serde_json::from_str(SEEDED).unwrap();
    let mut run = seeded
        .into_iter()
        .find(|r| r["run_spec"]["run_name"] == SEEDED_RETRY)
        .unwrap();
    let at = |offset: i64| json!(bursar_gateway::timefmt::format_instant(t + offset));
    run["id"] = applied["id"].clone();
    run["project_name"] = applied["project_name"].clone();
    run["run_spec"]["run_name"] = applied["run_spec"]["run_name"].clone();
    run["deleted"] = json!(false);
    run["submitted_at"] = at(0);
    run["last_processed_at"] = at(4_140);
    let submissions = run["jobs"][0]["job_submissions"].as_array_mut().unwrap();
    assert_eq!(submissions.len(), 2);
    let lost = &mut submissions[0];
    lost["id"] = applied["jobs"][0]["job_submissions"][0]["id"].clone();
    lost["submitted_at"] = at(0);
    lost["last_processed_at"] = at(1_440);
    lost["finished_at"] = at(1_440);
    lost["status"] = json!(first.0);
    lost["termination_reason"] = json!(first.1);
    let retry = &mut submissions[1];
    retry["submitted_at"] = at(1_500);
    retry["last_processed_at"] = at(4_140);
    retry["finished_at"] = at(4_140);
    if going_on {
        retry["status"] = json!("running");
        retry["termination_reason"] = Value::Null;
        retry["finished_at"] = Value::Null;
    }
    let latest = retry.clone();
    run["latest_job_submission"] = latest;
    if going_on {
        run["status"] = json!("running");
        run["termination_reason"] = Value::Null;
    }
    run
}

/// dstack from now on: `runs/list` answers `listed` once (then nothing new), `runs/get` answers
/// `run`, whatever was mounted before.
async fn answers(server: &MockServer, listed: Value, run: &Value) {
    server.reset().await;
    accept_runs(server).await;
    list_answers(server, listed).await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(ResponseTemplate::new(200).set_body_json(run))
        .mount(server)
        .await;
}

/// A pass as `bursar serve` runs it, with the questions it asks after one: whether the jobs
/// it saw end `NODE_FAIL` or `PREEMPTED` run again.
async fn serve_pass(f: &Fixture) {
    pass(f).await;
    f.admission
        .settle_not_rerun(Some("lab"), bursar_gateway::timefmt::now())
        .await;
}

#[tokio::test]
async fn a_run_dstack_retries_keeps_its_hold_until_the_run_ends() {
    // A lost spot instance (`interrupted_by_no_capacity`, retried on `interruption`) and a
    // failed one (retried on `error`).
    for first in [
        ("failed", "interrupted_by_no_capacity"),
        ("failed", "container_exited_with_error"),
    ] {
        let server = MockServer::start().await;
        let f = fixture(&server).await;
        let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();
        assert!(submitted.estimate > 0);

        // Its first submission ended and dstack runs the job again under a second one.
        let t = bursar_gateway::timefmt::now();
        let going_on = retried_run_at(first, true, t);
        answers(&server, json!([going_on]), &going_on).await;
        serve_pass(&f).await;
        let view = f.admission.job(&alice(), submitted.id).await.unwrap();
        assert_eq!(
            (view.state.as_str(), view.held),
            ("held", submitted.estimate),
            "{first:?}: {view:?}"
        );
        let hold = f.app.ledger.holds(false).await.unwrap().pop().unwrap();
        assert_eq!(hold.state, HoldState::Active, "{first:?}");
        // The ended submission is charged meanwhile: 0.1578 usd/h × 24 min.
        let charged: i64 = usage(&f).await.iter().map(|(_, amount)| amount).sum();
        assert_eq!(charged, 63_120, "{first:?}");
        assert_eq!(view.charge, Some(63_120), "{first:?}");

        // The run ends: its records, final now, settle the hold.
        answers(&server, json!([]), &retried_run_at(first, false, t)).await;
        serve_pass(&f).await;
        // A lost spot instance's record (`PREEMPTED`) waits for the question after the pass:
        // dstack is asked about the run, by its name, which has ended.
        let asked: usize = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.body_json::<Value>().unwrap()["run_name"] == "hello-1")
            .count();
        let preempted = first.1 == "interrupted_by_no_capacity";
        assert_eq!(asked, usize::from(preempted), "{first:?}");
        let view = f.admission.job(&alice(), submitted.id).await.unwrap();
        assert_eq!(
            (view.state.as_str(), view.held),
            ("settled", 0),
            "{first:?}"
        );
        let hold = f.app.ledger.holds(false).await.unwrap().pop().unwrap();
        assert_eq!(hold.state, HoldState::Settled, "{first:?}");
        // Both submissions charged, each rounded once: + 0.1621 usd/h × 44 min; the job's
        // charge is the run's, both of them.
        let charged: i64 = usage(&f).await.iter().map(|(_, amount)| amount).sum();
        assert_eq!(charged, 63_120 + 118_873, "{first:?}");
        assert_eq!(view.charge, Some(charged), "{first:?}");
        let listed = f
            .admission
            .jobs(&alice(), &JobQuery::default())
            .await
            .unwrap();
        assert_eq!(listed.jobs[0].charge, Some(charged), "{first:?}");
        assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 0);
        // The first submission's record became final: a zero adjustment, no second charge.
        let settle_ref = view.job.settle_ref.clone().unwrap();
        let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
        let first_entries: Vec<(EntryKind, i64)> = entries
            .iter()
            .filter(|e| e.job_id.as_deref() == Some(settle_ref.as_str()))
            .map(|e| (e.kind, e.amount))
            .collect();
        assert_eq!(
            first_entries,
            [(EntryKind::Charge, 63_120), (EntryKind::Adjustment, 0)],
            "{first:?}"
        );
    }
}

/// The usage entries: (account, amount).
async fn usage(f: &Fixture) -> Vec<(String, i64)> {
    let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
    entries
        .into_iter()
        .filter(|e| e.kind.is_usage())
        .map(|e| (e.account, e.amount))
        .collect()
}

#[tokio::test]
async fn a_hold_due_to_expire_is_kept_while_its_run_goes_on() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();
    f.admission.settled().await;
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    let due = hold.expires_at;
    let asked = || {
        Mock::given(method("POST"))
            .and(path("/api/project/hpc/runs/get"))
            .and(body_partial_json(json!({"run_name": "hello-1"})))
    };

    // Still waiting for capacity: dstack shows the run by its name, submitted.
    let waiting = asked()
        .respond_with(ResponseTemplate::new(200).set_body_json(applied_run()))
        .expect(1)
        .mount_as_scoped(&server)
        .await;
    assert_eq!(f.admission.keep_waiting(due).await, 1);
    drop(waiting);
    let kept = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert!(kept.expires_at > due, "{kept:?}");

    // Finished, gone (dstack 0.22.5: 400 `resource_not_exists`), or another run under the
    // name (its own first submission): left to expire.
    let mut namesake = applied_run();
    namesake["jobs"][0]["job_submissions"][0]["id"] = json!("5e0c0b1e-0000-4000-8000-00000000000d");
    for answer in [
        ResponseTemplate::new(200).set_body_json(failed_run()),
        ResponseTemplate::new(200).set_body_json(namesake),
        ResponseTemplate::new(400).set_body_raw(
            r#"{"detail":[{"msg":"Run not found","code":"resource_not_exists"}]}"#,
            "application/json",
        ),
    ] {
        let finished = asked()
            .respond_with(answer)
            .expect(1)
            .mount_as_scoped(&server)
            .await;
        assert_eq!(f.admission.keep_waiting(kept.expires_at).await, 0);
        drop(finished);
    }
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(
        (view.state.as_str(), view.held),
        ("held", submitted.estimate)
    );
}

/// dstack 0.22.5 deletes the submissions of a run retrying for capacity that never got an
/// instance, all but the latest two: the one bursar's hold was linked to is gone by the time
/// the run ends.
#[tokio::test]
async fn a_run_whose_first_submission_dstack_deleted_settles_its_hold_at_zero_when_it_ends() {
    let mut stopped = failed_run();
    stopped["status"] = json!("terminated");
    stopped["termination_reason"] = json!("stopped_by_user");
    let submission = &mut stopped["jobs"][0]["job_submissions"][0];
    submission["id"] = json!("4f1c0a8e-5d2b-4c3e-9f00-1a2b3c4d5e6f");
    submission["submission_num"] = json!(7);
    // The same run with another submission that cannot be read: the missing one may be that.
    let mut unreadable = stopped.clone();
    let mut bad = unreadable["jobs"][0]["job_submissions"][0].clone();
    bad["id"] = json!("0dd0a8e1-0000-4000-8000-000000000006");
    bad["submission_num"] = json!("six");
    unreadable["jobs"][0]["job_submissions"]
        .as_array_mut()
        .unwrap()
        .insert(0, bad);

    for (run, settles) in [(stopped, true), (unreadable, false)] {
        let server = MockServer::start().await;
        let f = fixture(&server).await;
        let submitted = f.admission.submit(&alice(), task(), None).await.unwrap();
        f.admission.settled().await;
        let first = f.admission.job(&alice(), submitted.id).await.unwrap();
        assert_ne!(
            run["jobs"][0]["job_submissions"][0]["id"],
            json!(first.job.settle_ref)
        );
        // The list's numbering has a gap, so the collector reads the run whole: the same.
        answers(&server, json!([run]), &run).await;
        pass(&f).await;

        let view = f.admission.job(&alice(), submitted.id).await.unwrap();
        let hold = f.app.ledger.holds(false).await.unwrap().pop().unwrap();
        let quarantined = f.app.ledger.quarantine_list().await.unwrap().len();
        if settles {
            assert_eq!((view.state.as_str(), view.held), ("settled", 0), "{view:?}");
            assert_eq!(view.charge, Some(0));
            assert_eq!(hold.state, HoldState::Settled);
            // Charged to the job's account and user, not the token dstack ran it under.
            let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
            let usage: Vec<_> = entries.iter().filter(|e| e.kind.is_usage()).collect();
            assert_eq!(usage.len(), 1, "{usage:?}");
            assert_eq!(
                (
                    usage[0].account.as_str(),
                    usage[0].user.as_deref(),
                    usage[0].amount
                ),
                ("physics", Some("alice"), 0)
            );
            assert_eq!(quarantined, 0);
        } else {
            assert_eq!(
                (view.state.as_str(), view.held),
                ("held", submitted.estimate)
            );
            assert_eq!(hold.state, HoldState::Active);
            assert_eq!(quarantined, 1);
        }
    }
}

/// `run` as another run of the same name: its id and its submissions' ids replaced.
fn another_run(mut run: Value, id: &str, submissions: [&str; 2]) -> Value {
    run["id"] = json!(id);
    for (n, sub) in submissions.iter().enumerate() {
        run["jobs"][0]["job_submissions"][n]["id"] = json!(sub);
    }
    run["latest_job_submission"]["id"] = json!(submissions[1]);
    run
}

/// dstack lets a new run take a finished run's name (and bursar's suffix is short): two jobs
/// bursar submitted under one name each get their own run's charges, found by the run's
/// first submission.
#[tokio::test]
async fn two_jobs_under_one_run_name_are_each_charged_their_own_run() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    let first = f.admission.submit(&alice(), task(), None).await.unwrap();
    // The second apply names its run the same, with its own ids.
    let mut applied: Value = serde_json::from_str(APPLIED).unwrap();
    let second_ids = [
        "5e0c0b1e-0000-4000-8000-00000000000b",
        "5e0c0b1e-0000-4000-8000-00000000000c",
    ];
    applied["id"] = json!("5e0c0b1e-0000-4000-8000-00000000000a");
    applied["jobs"][0]["job_submissions"][0]["id"] = json!(second_ids[0]);
    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get_plan"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(PLAN, "application/json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/apply"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&applied))
        .mount(&server)
        .await;
    let second = f.admission.submit(&alice(), task(), None).await.unwrap();
    f.admission.settled().await;
    let (a, b) = (
        f.admission.job(&alice(), first.id).await.unwrap(),
        f.admission.job(&alice(), second.id).await.unwrap(),
    );
    assert_eq!(a.job.cluster_job_id, b.job.cluster_job_id);
    assert_ne!(a.job.settle_ref, b.job.settle_ref);

    // The first job's run ended (both submissions charged); the second's goes on, its first
    // submission lost after 24 min and the second running.
    let ended = retried_run(("failed", "interrupted_by_no_capacity"), false);
    let going = another_run(
        retried_run(("failed", "interrupted_by_no_capacity"), true),
        "5e0c0b1e-0000-4000-8000-00000000000a",
        second_ids,
    );
    // And a run someone applied under the name on dstack itself, with a submission 0 of its
    // own: no job's, whenever it was submitted.
    let stranger_ids = [
        "5e0c0b1e-0000-4000-8000-0000000000e1",
        "5e0c0b1e-0000-4000-8000-0000000000e2",
    ];
    let stranger = another_run(
        retried_run(("failed", "interrupted_by_no_capacity"), false),
        "5e0c0b1e-0000-4000-8000-0000000000e0",
        stranger_ids,
    );
    answers(&server, json!([ended, going, stranger]), &going).await;
    // As `bursar serve` runs it: the first job's lost spot instance makes it ask dstack about
    // the run by name, and dstack shows the second job's run.
    serve_pass(&f).await;

    let (a, b) = (
        f.admission.job(&alice(), first.id).await.unwrap(),
        f.admission.job(&alice(), second.id).await.unwrap(),
    );
    assert_eq!(
        (a.state.as_str(), a.charge),
        ("settled", Some(63_120 + 118_873))
    );
    assert_eq!((b.state.as_str(), b.charge), ("held", Some(63_120)));
    let entries = f.app.ledger.journal(&Default::default()).await.unwrap();
    let strangers: Vec<(&str, i64)> = entries
        .iter()
        .filter(|e| stranger_ids.contains(&e.job_id.as_deref().unwrap_or_default()))
        .map(|e| (e.account.as_str(), e.amount))
        .collect();
    assert_eq!(strangers, [("hpc", 63_120), ("hpc", 118_873)]);
}

/// dstack too slow to answer: `keep_waiting` asks about one due hold, then leaves that
/// cluster's other due holds to expire without asking again in that tick.
#[tokio::test]
async fn a_cluster_too_slow_to_answer_is_asked_once_per_tick() {
    let server = MockServer::start().await;
    let f = fixture_with(&server, "CPU=0.05,GRES/gpu=2.0", "      timeout: 1s\n").await;
    for _ in 0..3 {
        f.admission.submit(&alice(), task(), None).await.unwrap();
    }
    f.admission.settled().await;
    let holds = f.app.ledger.holds(true).await.unwrap();
    assert_eq!(holds.len(), 3);
    let due = holds.iter().map(|h| h.expires_at).max().unwrap();
    let slow = Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(applied_run())
                .set_delay(std::time::Duration::from_secs(3)),
        )
        .expect(1)
        .named("runs/get, slower than the 1 s timeout")
        .mount_as_scoped(&server)
        .await;
    assert_eq!(f.admission.keep_waiting(due).await, 0);
    drop(slow);
}

/// The `runs/list` request bodies the server received, in order.
async fn list_requests(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/api/runs/list")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn collect_since_reads_dstack_runs_again_and_never_moves_the_cursor_back() {
    let server = MockServer::start().await;
    let f = fixture(&server).await;
    f.admission.submit(&alice(), task(), None).await.unwrap();
    let run = failed_run();
    let run_id = run["id"].as_str().unwrap().to_string();
    list_answers(&server, json!([run])).await;
    pass(&f).await;
    let charged = usage(&f).await;
    assert_eq!(charged.len(), 1, "{charged:?}");

    // --since an hour ago: the list is read from then, before every run submitted since
    // (within one submitted_at dstack lists ids descending, so the greatest UUID first).
    let since = bursar_gateway::timefmt::now() - 3600;
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .and(body_partial_json(json!({
            "prev_submitted_at": bursar_gateway::timefmt::format_instant(since),
            "prev_run_id": "ffffffff-ffff-ffff-ffff-ffffffffffff",
        })))
        // (nothing listed from there, as if the run were gone: the pass ends where it started)
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    let window = PassWindow {
        since: Some(since),
        until: None,
    };
    run_pass(&f.app, &f.collector, window, &|_, _, _| {})
        .await
        .unwrap();
    server.verify().await; // the list was read from `since`
    assert_eq!(usage(&f).await, charged, "nothing charged twice");

    // The next pass goes on from the run, not from an hour ago: a backfill that ends
    // before the cursor leaves it where it was.
    pass(&f).await;
    let bodies = list_requests(&server).await;
    let last = bodies.last().unwrap();
    assert_eq!(last["prev_run_id"], json!(run_id), "{bodies:#?}");
    assert_eq!(bodies.len(), 3, "{bodies:#?}");

    // A `since` past the cursor starts at the cursor: the runs between them are read, not
    // jumped over.
    let window = PassWindow {
        since: Some(bursar_gateway::timefmt::now() + 86_400),
        until: None,
    };
    run_pass(&f.app, &f.collector, window, &|_, _, _| {})
        .await
        .unwrap();
    let bodies = list_requests(&server).await;
    assert_eq!(
        bodies.last().unwrap()["prev_run_id"],
        json!(run_id),
        "{bodies:#?}"
    );
}
