//! Submissions: routing preference and burst, `-M` pins, the 402 body, forwarding failures
//! that leave nothing behind, idempotent retries, settlement, listing and cancelling.

mod admission_support;

use admission_support::*;
use bursar_gateway::admission::{AdmissionError, ForwardError, JobQuery};
use bursar_gateway::auth::Role;
use bursar_ledger::{AdmitOutcome, ForwardedJob, HoldState, NewAdmission, NewApiJob, UsageCharge};
use bursar_pricing::Currency;
use serde_json::json;

const ONPREM_ESTIMATE: i64 = 4_976_562; // job() on onprem batch, 1 h
const CLOUD_ESTIMATE: i64 = 422_812; // job() on cloud batch, 2 h

#[tokio::test]
async fn the_preferred_cluster_takes_the_job_and_holds_the_estimate() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(submitted.cluster, "onprem");
    assert_eq!(submitted.cluster_job_id, "1001");
    assert_eq!(submitted.estimate, ONPREM_ESTIMATE);
    let body = submitted.to_json();
    assert_eq!(body["hold"], "4.976562");
    assert_eq!(body["estimate"], "4.976562");
    assert_eq!(body["currency"], "su");
    assert_eq!(body["route"]["cluster"], "onprem");
    assert_eq!(
        body["route"]["explanation"][0],
        "onprem: first choice; estimate 4.976562 su; physics has 95.023438 su left after it"
    );

    let balance = f.balance("physics", "su").await;
    assert_eq!(balance.held, ONPREM_ESTIMATE);
    // The link is written behind the answer; readers outside the service wait for it.
    f.admission.settled().await;
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(Some(hold.id), submitted.hold_id);
    assert_eq!(
        hold.job_ref.as_deref(),
        Some("1001"),
        "linked for settlement"
    );
    assert_eq!(hold.cluster, "onprem");
    // expires after the time limit plus the default grace (1 h)
    assert_eq!(hold.expires_at - hold.placed_at, 3600 + 3600);

    // What went to the cluster: the partition and limit that were priced.
    let sent = f.onprem.submitted().pop().unwrap();
    assert_eq!(sent.user, "alice");
    assert_eq!(sent.account, "physics");
    assert_eq!(sent.partition, "batch");
    assert_eq!(sent.time_limit_min, 60);
    assert_eq!(sent.working_dir, "/home/alice");

    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "held");
    let body = view.to_json();
    assert_eq!(body["hold"], "4.976562");
    assert_eq!(body["charge"], serde_json::Value::Null);
    assert_eq!(body["cluster_job_id"], "1001");
}

#[tokio::test]
async fn an_unaffordable_first_choice_bursts_to_the_next() {
    let f = fixture().await;
    f.allocate("physics", "su", 500_000).await;
    f.allocate("physics", "usd", 10_000_000).await;
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(submitted.cluster, "cloud");
    assert_eq!(submitted.estimate, CLOUD_ESTIMATE);
    assert_eq!(
        submitted.route.explanation,
        [
            "cloud: burst from onprem; estimate 0.422812 usd; physics has 9.577188 usd left after it",
            "order from routing.prefer: onprem, cloud",
            "onprem: physics has 0.50 su left, the job needs 4.976562 su → burst to cloud",
        ]
    );
    assert_eq!(f.cloud.submitted()[0].working_dir, "/scratch/alice");
    assert_eq!(f.balance("physics", "usd").await.held, CLOUD_ESTIMATE);
    assert_eq!(f.balance("physics", "su").await.held, 0);
}

#[tokio::test]
async fn an_account_override_orders_the_clusters() {
    let f = fixture().await;
    f.allocate("chemistry", "su", 100_000_000).await;
    f.allocate("chemistry", "usd", 100_000_000).await;
    let bob = principal("bob", Role::User);
    let submitted = f.admission.submit(&bob, job(), None).await.unwrap();
    assert_eq!(submitted.cluster, "cloud");
    assert_eq!(
        submitted.route.explanation[1],
        "order from routing.accounts.chemistry: cloud, onprem"
    );
}

#[tokio::test]
async fn a_pin_wins_and_never_bursts() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    f.allocate("physics", "usd", 100_000_000).await;
    let pinned = job_with(json!({"clusters": ["cloud"]}));
    let submitted = f.admission.submit(&alice(), pinned, None).await.unwrap();
    assert_eq!(
        submitted.cluster, "cloud",
        "pinned although onprem is preferred"
    );

    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000).await;
    f.allocate("physics", "usd", 100_000_000).await;
    let err = f
        .admission
        .submit(&alice(), job_with(json!({"clusters": ["onprem"]})), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "insufficient_allocation");
    assert!(f.cloud.submitted().is_empty());
}

#[tokio::test]
async fn nothing_affordable_is_a_402_naming_account_currency_estimate_and_remaining() {
    let f = fixture().await;
    f.allocate("physics", "su", 1_250_000).await;
    let err = f.admission.submit(&alice(), job(), None).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (402, "insufficient_allocation"));
    assert_eq!(
        err.details(),
        json!({"clusters": [
            {"cluster": "onprem", "account": "physics", "currency": "su",
             "estimate": "4.976562", "remaining": "1.25",
             "reason": "physics has 1.25 su left, the job needs 4.976562 su"},
            {"cluster": "cloud", "account": "physics", "currency": "usd",
             "estimate": "0.422812", "remaining": "0.00",
             "reason": "no allocation in usd for physics or its parents: no access to clusters billed in usd"}
        ]})
    );
    assert_eq!(
        err.to_string(),
        "no cluster can be paid for: on onprem, physics has 1.25 su left; the job needs an \
         estimated 4.976562 su; on cloud, physics and its parents have no allocation in usd (no \
         access to clusters billed in usd); the job needs an estimated 0.422812 usd"
    );
    assert!(f.app.ledger.holds(false).await.unwrap().is_empty());
    assert!(f.app.ledger.api_jobs(None, None).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_job_that_fits_nowhere_is_a_422_with_every_reason() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let err = f
        .admission
        .submit(&alice(), job_with(json!({"partition": "huge"})), None)
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (422, "invalid_request"));
    assert_eq!(
        err.details()["clusters"][0],
        json!({"cluster": "onprem", "reasons": ["partition huge does not exist on onprem (partitions there: batch, debug, gpu)"]})
    );
    let no_script = serde_json::from_value(json!({"ntasks": 1})).unwrap();
    let err = f
        .admission
        .submit(&alice(), no_script, None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
}

#[tokio::test]
async fn forwarding_failures_release_the_hold() {
    for (failure, status, code) in [
        (
            ForwardError::Refused("slurmrestd answered HTTP 500: Invalid account".into()),
            502,
            "upstream_refused",
        ),
        (
            ForwardError::Unavailable("slurmrestd did not answer within 30s".into()),
            503,
            "upstream_unavailable",
        ),
    ] {
        let f = fixture().await;
        f.allocate("physics", "su", 100_000_000).await;
        let before = f.balance("physics", "su").await;
        f.onprem.fail_with(Some(failure));
        let err = f.admission.submit(&alice(), job(), None).await.unwrap_err();
        assert_eq!((err.status(), err.code()), (status, code));
        assert!(err.to_string().starts_with("onprem "), "{err}");
        assert_eq!(
            f.balance("physics", "su").await,
            before,
            "balance as before"
        );
        let holds = f.app.ledger.holds(false).await.unwrap();
        assert_eq!(holds.len(), 1);
        assert_eq!(holds[0].state, HoldState::Released);
        assert!(holds[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("forwarding failed: "));
        let jobs = f.app.ledger.api_jobs(None, None).await.unwrap();
        assert_eq!(jobs[0].state, "failed");
        assert_eq!(
            f.admission.job(&alice(), jobs[0].id).await.unwrap().state,
            "failed"
        );
        assert!(f.app.ledger.verify().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_first_answer() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let key = Some("retry-1".to_string());
    let first = f
        .admission
        .submit(&alice(), job(), key.clone())
        .await
        .unwrap();
    let again = f
        .admission
        .submit(&alice(), job(), key.clone())
        .await
        .unwrap();
    assert_eq!(first.to_json(), again.to_json());
    assert_eq!(f.onprem.submitted().len(), 1, "forwarded once");
    assert_eq!(f.balance("physics", "su").await.held, ONPREM_ESTIMATE);

    let err = f
        .admission
        .submit(&alice(), job_with(json!({"ntasks": 8})), key.clone())
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (409, "conflict"));

    // Keys are per user.
    f.allocate("chemistry", "usd", 100_000_000).await;
    let bob = principal("bob", Role::User);
    let other = f.admission.submit(&bob, job(), key.clone()).await.unwrap();
    assert_ne!(other.id, first.id);

    // A key whose submission failed is spent.
    f.onprem.fail_with(Some(ForwardError::Refused("no".into())));
    let key = Some("retry-2".to_string());
    assert!(f
        .admission
        .submit(&alice(), job(), key.clone())
        .await
        .is_err());
    f.onprem.fail_with(None);
    let err = f.admission.submit(&alice(), job(), key).await.unwrap_err();
    assert_eq!(err.code(), "conflict");
    assert!(err.to_string().contains("failed"), "{err}");
}

#[tokio::test]
async fn each_answer_says_what_its_own_hold_left() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    // Submitted one after the other within the admission view's life, then 8 at once: each
    // answer names what was left once its own hold was placed, never an earlier view's.
    // The micros of `physics has 95.023438 su left after it`.
    let left = |s: &bursar_gateway::admission::Submitted| -> i64 {
        let text = &s.route.explanation[0];
        let figure = text
            .split_once("physics has ")
            .and_then(|(_, rest)| rest.strip_suffix(" su left after it"))
            .expect(text);
        let (units, fraction) = figure.split_once('.').expect(figure);
        let fraction = format!("{fraction:0<6}");
        units.parse::<i64>().unwrap() * 1_000_000 + fraction.parse::<i64>().unwrap()
    };
    let mut seen = Vec::new();
    for n in 0..3 {
        let key = Some(format!("left-{n}"));
        let submitted = f.admission.submit(&alice(), job(), key).await.unwrap();
        seen.push(left(&submitted));
    }
    let after = |k: i64| 100_000_000 - k * ONPREM_ESTIMATE;
    assert_eq!(seen, [after(1), after(2), after(3)]);
    let mut tasks = Vec::new();
    for n in 0..8 {
        let admission = f.admission.clone();
        let key = Some(format!("burst-{n}"));
        tasks.push(tokio::spawn(async move {
            admission.submit(&alice(), job(), key).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        let submitted = t.await.unwrap().unwrap();
        seen.push(left(&submitted));
        answers.push(submitted);
    }
    seen[3..].sort_by(|a, b| b.cmp(a));
    let expected: Vec<i64> = (1..=11).map(after).collect();
    assert_eq!(
        seen, expected,
        "one figure per hold, each as its hold left it"
    );

    // A retry is answered with the figures of the first answer, as recorded with the job.
    for (n, first) in answers.iter().enumerate() {
        let key = Some(format!("burst-{n}"));
        let again = f.admission.submit(&alice(), job(), key).await.unwrap();
        assert_eq!(again.to_json(), first.to_json());
    }
}

#[tokio::test]
async fn concurrent_retries_with_one_key_forward_once() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let admission = f.admission.clone();
        tasks.push(tokio::spawn(async move {
            admission
                .submit(&alice(), job(), Some("same".to_string()))
                .await
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(s) => ids.push(s.id),
            Err(e) => assert_eq!(e.code(), "conflict", "{e}"),
        }
    }
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|id| *id == ids[0]));
    assert_eq!(f.onprem.submitted().len(), 1);
    assert_eq!(f.balance("physics", "su").await.held, ONPREM_ESTIMATE);
    assert!(f.app.ledger.verify().await.unwrap().is_empty());
}

/// onprem's final (COMPLETED) record of `job_id` for physics and alice, revision `final`.
fn completed(job_id: &str, submit: i64, amount_micros: i64, effective_at: i64) -> UsageCharge {
    UsageCharge {
        cluster: "onprem".into(),
        job_id: job_id.into(),
        display_id: job_id.into(),
        submit,
        revision: "final".into(),
        account: "physics".into(),
        user: "alice".into(),
        partition: Some("batch".into()),
        qos: None,
        state: "COMPLETED".into(),
        is_final: true,
        currency: Currency::new("su"),
        amount_micros,
        effective_at,
        price_version: None,
        note: None,
    }
}

#[tokio::test]
async fn final_usage_settles_the_job_and_reports_its_charge() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    // The job's record is written behind the answer; the collection loop waits for it
    // before each pass, as this does before posting the job's usage.
    f.admission.settled().await;
    let t = now();
    let record = completed(&submitted.cluster_job_id, t - 100, 1_234_567, t);
    let outcome = f
        .app
        .ledger
        .post_usage(std::slice::from_ref(&record), t)
        .await
        .unwrap();
    assert_eq!(outcome.settled_holds, 1);
    let view = f.admission.job(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "settled");
    assert_eq!(view.charge, Some(1_234_567));
    let body = view.to_json();
    assert_eq!(body["charge"], "1.234567");
    assert_eq!(body["hold"], "0.00");
    assert!(body["settled_at"].is_string());
    let balance = f.balance("physics", "su").await;
    assert_eq!((balance.held, balance.charged), (0, 1_234_567));
    // The new state was written back: listing by state finds it.
    let settled = f
        .admission
        .jobs(
            &alice(),
            &JobQuery {
                state: Some("settled".into()),
                ..JobQuery::default()
            },
        )
        .await
        .unwrap()
        .jobs;
    assert_eq!(settled.len(), 1);
    // Listed beside others, each job shows its own charge and state: a second one settled
    // for another amount, a third still held.
    let second = f.admission.submit(&alice(), job(), None).await.unwrap();
    let third = f.admission.submit(&alice(), job(), None).await.unwrap();
    f.admission.settled().await;
    let second_record = UsageCharge {
        job_id: second.cluster_job_id.clone(),
        display_id: second.cluster_job_id.clone(),
        amount_micros: 2_000_000,
        ..record
    };
    f.app.ledger.post_usage(&[second_record], t).await.unwrap();
    let listed: Vec<(i64, String, Option<i64>, i64)> = f
        .admission
        .jobs(&alice(), &JobQuery::default())
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|v| (v.job.id, v.state, v.charge, v.held))
        .collect();
    assert_eq!(
        listed,
        [
            (submitted.id, "settled".to_string(), Some(1_234_567), 0),
            (second.id, "settled".to_string(), Some(2_000_000), 0),
            (third.id, "held".to_string(), None, ONPREM_ESTIMATE),
        ]
    );
    // A settled job cannot be cancelled.
    let err = f
        .admission
        .cancel(&alice(), submitted.id)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
}

/// The fixture with a QOS whose usage factor is 0 (`scavenger`: its jobs cost nothing), and
/// physics holding 100 su.
async fn fixture_with_a_free_qos() -> Fixture {
    let f = fixture_over(&CONFIG.replace(
        "premium: {usage_factor: 2.0}",
        "premium: {usage_factor: 2.0}\n      scavenger: {usage_factor: 0}",
    ))
    .await;
    f.allocate("physics", "su", 100_000_000).await;
    f
}

/// Slurm hands out job ids again after its saved state is lost (or `MaxJobId` wraps): an
/// older job's record under the id of a job submitted through bursar is neither that job's
/// charge nor its end, whether it holds money or nothing.
#[tokio::test]
async fn an_older_job_under_the_same_id_is_neither_the_jobs_charge_nor_its_end() {
    let f = fixture_with_a_free_qos().await;
    let held = f.admission.submit(&alice(), job(), None).await.unwrap();
    let free = f
        .admission
        .submit(&alice(), job_with(json!({"qos": "scavenger"})), None)
        .await
        .unwrap();
    f.admission.settled().await;
    let t = now();
    let old = |job_id: &str| UsageCharge {
        revision: "old".into(),
        ..completed(job_id, t - 7_200, 5_000_000, t - 3_600)
    };
    let outcome = f
        .app
        .ledger
        .post_usage(&[old(&held.cluster_job_id), old(&free.cluster_job_id)], t)
        .await
        .unwrap();
    assert_eq!((outcome.charged, outcome.settled_holds), (2, 0));
    let user = alice();
    let view = |id| f.admission.job(&user, id);
    let v = view(held.id).await.unwrap();
    assert_eq!(
        (v.state.as_str(), v.held, v.charge),
        ("held", ONPREM_ESTIMATE, None)
    );
    let v = view(free.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.held, v.charge), ("held", 0, None));

    // The jobs' own records, submitted after bursar forwarded them.
    let own = |job_id: &str, amount_micros| UsageCharge {
        revision: "own".into(),
        ..completed(job_id, t, amount_micros, t + 60)
    };
    let outcome = f
        .app
        .ledger
        .post_usage(
            &[
                own(&held.cluster_job_id, 1_000_000),
                own(&free.cluster_job_id, 0),
            ],
            t + 60,
        )
        .await
        .unwrap();
    assert_eq!((outcome.charged, outcome.settled_holds), (2, 1));
    let v = view(held.id).await.unwrap();
    assert_eq!(
        (v.state.as_str(), v.held, v.charge),
        ("settled", 0, Some(1_000_000))
    );
    let v = view(free.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.charge), ("settled", Some(0)));
}

/// A job that holds nothing, recorded as submitted through bursar at `at` and forwarded to
/// onprem as `cluster_job_id`.
async fn forwarded_at(f: &Fixture, at: i64, cluster_job_id: &str) -> bursar_ledger::ApiJob {
    let admitted = f
        .app
        .ledger
        .admit(
            &[NewAdmission {
                hold: None,
                job: NewApiJob {
                    idempotency_key: None,
                    actor: "alice".into(),
                    user: "alice".into(),
                    account: "physics".into(),
                    cluster: "onprem".into(),
                    currency: Currency::new("su"),
                    estimate: 0,
                    hold_id: None,
                    state: "held".into(),
                    request_json: "{}".into(),
                    route_json: "{}".into(),
                    at,
                    array_tasks: None,
                },
            }],
            at,
        )
        .await
        .unwrap();
    let Ok(AdmitOutcome::Admitted { job, .. }) = &admitted[0] else {
        panic!("{admitted:?}");
    };
    f.app
        .ledger
        .admit_recording(
            &[],
            &[ForwardedJob {
                job: job.id,
                hold: None,
                settle_ref: cluster_job_id.into(),
                cluster_job_id: cluster_job_id.into(),
                at,
                route_json: None,
            }],
            at,
        )
        .await
        .unwrap();
    job.clone()
}

/// Slurm's state lost and restarted within minutes: two jobs bursar submitted 5 minutes apart
/// get the same id, and each keeps its own record.
#[tokio::test]
async fn jobs_minutes_apart_under_the_same_id_keep_their_own_charges() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let t = now();
    let older = forwarded_at(&f, t - 300, "1001").await;
    let newer = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(newer.cluster_job_id, "1001");
    f.admission.settled().await;
    let records = [
        completed("1001", t - 300, 3_000_000, t - 250),
        completed("1001", t, 1_000_000, t + 60),
    ];
    f.app.ledger.post_usage(&records, t + 60).await.unwrap();
    let user = alice();
    let v = f.admission.job(&user, older.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.charge), ("settled", Some(3_000_000)));
    let v = f.admission.job(&user, newer.id).await.unwrap();
    assert_eq!(v.charge, Some(1_000_000));
}

/// The other way round: once Slurm has handed job id 1001 out again, the older job bursar
/// submitted under it keeps its own charge, not its own plus the newer jobs'.
#[tokio::test]
async fn an_older_job_keeps_its_own_charge_when_its_id_is_handed_out_again() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let t = now();
    // Job 1001, submitted through bursar a day ago (it held nothing), and its usage.
    let older = forwarded_at(&f, t - DAY, "1001").await;
    let older_usage = completed("1001", t - DAY, 3_000_000, t - DAY + 600);
    f.app.ledger.post_usage(&[older_usage], t).await.unwrap();

    // Slurm's state is lost: the next job through bursar is 1001 again.
    let newer = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(newer.cluster_job_id, "1001");
    f.admission.settled().await;
    let newer_usage = completed("1001", t, 1_000_000, t + 60);
    let outcome = f
        .app
        .ledger
        .post_usage(&[newer_usage], t + 60)
        .await
        .unwrap();
    assert_eq!((outcome.charged, outcome.settled_holds), (1, 1));

    let user = alice();
    let v = f.admission.job(&user, older.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.charge), ("settled", Some(3_000_000)));
    let v = f.admission.job(&user, newer.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.charge), ("settled", Some(1_000_000)));

    // Once the newer job has ended, a job submitted to Slurm directly gets 1001 too (its state
    // lost once more): it is not the newer job's either, nor the older one's.
    let stranger = UsageCharge {
        user: "bob".into(),
        revision: "stranger".into(),
        ..completed("1001", t + 3_600, 7_000_000, t + 3_700)
    };
    f.app
        .ledger
        .post_usage(&[stranger], t + 3_700)
        .await
        .unwrap();
    let v = f.admission.job(&user, newer.id).await.unwrap();
    assert_eq!(v.charge, Some(1_000_000));
    let v = f.admission.job(&user, older.id).await.unwrap();
    assert_eq!(v.charge, Some(3_000_000));
}

/// Slurm requeues a batch job whose node failed, and logs the run that failed as a final
/// `NODE_FAIL` record; the next run is a new record, submitted at the requeue. Both are the
/// job's; a job under the same id much later is not.
#[tokio::test]
async fn a_run_requeued_after_a_node_failure_is_still_the_jobs() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let job = f.admission.submit(&alice(), job(), None).await.unwrap();
    f.admission.settled().await;
    let t = now();
    let id = job.cluster_job_id.as_str();
    let failed = UsageCharge {
        state: "NODE_FAIL".into(),
        ..completed(id, t, 2_000_000, t + 100)
    };
    let rerun = completed(id, t + 103, 1_500_000, t + 400);
    let stranger = UsageCharge {
        user: "bob".into(),
        ..completed(id, t + 7_200, 9_000_000, t + 7_300)
    };
    for (record, at) in [(failed, t + 100), (rerun, t + 400), (stranger, t + 7_300)] {
        f.app.ledger.post_usage(&[record], at).await.unwrap();
    }
    let v = f.admission.job(&alice(), job.id).await.unwrap();
    assert_eq!((v.state.as_str(), v.charge), ("settled", Some(3_500_000)));
}

/// A job that costs nothing (a QOS with a usage factor of 0) holds nothing; it is settled,
/// at a charge of 0, once its cluster reports it finished, not left `held` for ever.
#[tokio::test]
async fn a_free_job_holds_nothing_and_settles_when_its_cluster_reports_it_finished() {
    let f = fixture_with_a_free_qos().await;
    let free = f
        .admission
        .submit(&alice(), job_with(json!({"qos": "scavenger"})), None)
        .await
        .unwrap();
    assert_eq!(
        (free.cluster.as_str(), free.estimate, free.hold_id),
        ("onprem", 0, None)
    );
    f.admission.settled().await;
    let view = f.admission.job(&alice(), free.id).await.unwrap();
    assert_eq!(
        (view.state.as_str(), view.held, view.charge),
        ("held", 0, None)
    );

    let t = now();
    let mut record = UsageCharge {
        cluster: "onprem".into(),
        job_id: free.cluster_job_id.clone(),
        display_id: free.cluster_job_id.clone(),
        submit: t - 100,
        revision: "running".into(),
        account: "physics".into(),
        user: "alice".into(),
        partition: Some("batch".into()),
        qos: Some("scavenger".into()),
        state: "RUNNING".into(),
        is_final: false,
        currency: Currency::new("su"),
        amount_micros: 0,
        effective_at: t,
        price_version: None,
        note: None,
    };
    // Running: still in progress.
    f.app
        .ledger
        .post_usage(std::slice::from_ref(&record), t)
        .await
        .unwrap();
    let view = f.admission.job(&alice(), free.id).await.unwrap();
    assert_eq!((view.state.as_str(), view.charge), ("held", Some(0)));
    // Requeued: that run's record is final, but the job goes on in a new record.
    record.revision = "requeued".into();
    record.state = "REQUEUED".into();
    record.is_final = true;
    f.app
        .ledger
        .post_usage(std::slice::from_ref(&record), t + 30)
        .await
        .unwrap();
    let view = f.admission.job(&alice(), free.id).await.unwrap();
    assert_eq!((view.state.as_str(), view.charge), ("held", Some(0)));
    // Finished (the next run, a new submit time): settled, and no longer listed among the
    // held ones.
    record.submit += 30;
    record.revision = "final".into();
    record.state = "COMPLETED".into();
    f.app.ledger.post_usage(&[record], t + 60).await.unwrap();
    let view = f.admission.job(&alice(), free.id).await.unwrap();
    assert_eq!(
        (view.state.as_str(), view.charge, view.settled_at),
        ("settled", Some(0), Some(t + 60))
    );
    let held = f
        .admission
        .jobs(
            &alice(),
            &JobQuery {
                state: Some("held".into()),
                ..JobQuery::default()
            },
        )
        .await
        .unwrap()
        .jobs;
    assert!(held.is_empty(), "{held:?}");
    let err = f.admission.cancel(&alice(), free.id).await.unwrap_err();
    assert_eq!(err.code(), "conflict");
}

/// A job that holds nothing and whose run ends NODE_FAIL may be run again by Slurm under its
/// id: it stays `held` while its cluster says it waits, and is settled (at that run's charge)
/// once the cluster says it is gone. One whose next run's record comes is settled by it; one
/// whose id a later job takes is settled by its own record.
#[tokio::test]
async fn a_free_job_ended_by_a_node_failure_settles_once_its_cluster_will_not_run_it_again() {
    let f = fixture_with_a_free_qos().await;
    let mut free = Vec::new();
    for _ in 0..3 {
        let job = f
            .admission
            .submit(&alice(), job_with(json!({"qos": "scavenger"})), None)
            .await
            .unwrap();
        free.push(job);
    }
    f.admission.settled().await;
    let t = now();
    let node_fail = |job_id: &str| UsageCharge {
        revision: "nf".into(),
        state: "NODE_FAIL".into(),
        qos: Some("scavenger".into()),
        ..completed(job_id, t, 0, t + 60)
    };
    let ids: Vec<&str> = free.iter().map(|j| j.cluster_job_id.as_str()).collect();
    f.app
        .ledger
        .post_usage(
            &[node_fail(ids[0]), node_fail(ids[1]), node_fail(ids[2])],
            t + 60,
        )
        .await
        .unwrap();
    let admission = &f.admission;
    let state = |id| async move {
        let v = admission.job(&alice(), id).await.unwrap();
        (v.state, v.charge, v.settled_at)
    };
    assert_eq!(state(free[0].id).await, ("held".into(), Some(0), None));
    assert_eq!(state(free[1].id).await, ("held".into(), Some(0), None));

    // All wait to run again; then the first's next run ends, and the second is gone.
    *f.onprem.waiting.lock().unwrap() = ids.iter().map(|id| id.to_string()).collect();
    assert_eq!(f.admission.settle_not_rerun(None, t + 90).await, 0);
    assert_eq!(state(free[1].id).await.0, "held");
    let rerun = UsageCharge {
        revision: "rerun".into(),
        qos: Some("scavenger".into()),
        ..completed(ids[0], t + 60, 0, t + 120)
    };
    f.app.ledger.post_usage(&[rerun], t + 120).await.unwrap();
    f.onprem.waiting.lock().unwrap().retain(|id| id == ids[2]);
    assert_eq!(
        f.admission.settle_not_rerun(Some("cloud"), t + 150).await,
        0
    );
    assert_eq!(f.admission.settle_not_rerun(None, t + 150).await, 1);
    assert_eq!(
        state(free[1].id).await,
        ("settled".into(), Some(0), Some(t + 150))
    );
    let (first, charge, _) = state(free[0].id).await;
    assert_eq!((first.as_str(), charge), ("settled", Some(0)));
    assert_eq!(f.admission.settle_not_rerun(None, t + 180).await, 0);

    // The third's id comes back two hours later with another job, still running (the cluster
    // lost its state): the third did not run again, and its view says so without asking.
    assert_eq!(state(free[2].id).await.0, "held");
    let stranger = UsageCharge {
        revision: "stranger".into(),
        state: "RUNNING".into(),
        is_final: false,
        ..completed(ids[2], t + 7_200, 5_000_000, t + 7_300)
    };
    f.app
        .ledger
        .post_usage(&[stranger], t + 7_300)
        .await
        .unwrap();
    assert_eq!(
        state(free[2].id).await,
        ("settled".into(), Some(0), Some(t + 60))
    );
}

#[tokio::test]
async fn cancel_releases_the_hold_and_stops_the_job_as_its_user() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let before = f.balance("physics", "su").await;
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(f.balance("physics", "su").await.held, ONPREM_ESTIMATE);

    let bob = principal("bob", Role::User);
    let err = f.admission.cancel(&bob, submitted.id).await.unwrap_err();
    assert_eq!(err.code(), "not_found", "another user's job is not visible");
    let finance = principal("fin", Role::Finance);
    let err = f
        .admission
        .cancel(&finance, submitted.id)
        .await
        .unwrap_err();
    assert!(matches!(err, AdmissionError::Forbidden(_)), "{err}");

    let view = f.admission.cancel(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "cancelled");
    assert_eq!(
        f.onprem.cancelled.lock().unwrap().clone(),
        [("alice".to_string(), "1001".to_string())]
    );
    assert_eq!(f.balance("physics", "su").await, before);
    let hold = &f.app.ledger.holds(false).await.unwrap()[0];
    assert_eq!(hold.reason.as_deref(), Some("cancelled by user"));
    let err = f
        .admission
        .cancel(&alice(), submitted.id)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "conflict");

    // An admin may cancel anyone's job.
    let second = f.admission.submit(&alice(), job(), None).await.unwrap();
    let admin = principal("ops", Role::Admin);
    assert_eq!(
        f.admission.cancel(&admin, second.id).await.unwrap().state,
        "cancelled"
    );
    assert!(f.app.ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn users_list_their_own_jobs_and_finance_lists_all() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    f.allocate("chemistry", "usd", 100_000_000).await;
    let bob = principal("bob", Role::User);
    let a = f.admission.submit(&alice(), job(), None).await.unwrap();
    let b = f.admission.submit(&bob, job(), None).await.unwrap();

    let mine = f
        .admission
        .jobs(&alice(), &JobQuery::default())
        .await
        .unwrap()
        .jobs;
    assert_eq!(mine.iter().map(|j| j.job.id).collect::<Vec<_>>(), [a.id]);
    let err = f
        .admission
        .jobs(
            &alice(),
            &JobQuery {
                user: Some("bob".into()),
                ..JobQuery::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    assert_eq!(
        f.admission.job(&alice(), b.id).await.unwrap_err().code(),
        "not_found"
    );

    let finance = principal("fin", Role::Finance);
    let all = f
        .admission
        .jobs(&finance, &JobQuery::default())
        .await
        .unwrap()
        .jobs;
    assert_eq!(all.len(), 2);
    let chemistry = f
        .admission
        .jobs(
            &finance,
            &JobQuery {
                account: Some("chemistry".into()),
                ..JobQuery::default()
            },
        )
        .await
        .unwrap()
        .jobs;
    assert_eq!(chemistry.len(), 1);
    assert_eq!(chemistry[0].job.user, "bob");
    assert_eq!(
        f.admission.job(&finance, a.id).await.unwrap().job.user,
        "alice"
    );
}

#[tokio::test]
async fn jobs_are_listed_in_pages_of_the_newest_with_a_cursor_to_the_older() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(f.admission.submit(&alice(), job(), None).await.unwrap().id);
    }
    // The third is cancelled: its recorded state moves on.
    f.admission.cancel(&alice(), ids[2]).await.unwrap();
    let list = |state: Option<&str>, before: Option<i64>, limit: Option<u32>| {
        let query = JobQuery {
            state: state.map(str::to_string),
            before,
            limit,
            ..JobQuery::default()
        };
        let admission = &f.admission;
        async move {
            let page = admission.jobs(&alice(), &query).await.unwrap();
            let listed: Vec<i64> = page.jobs.iter().map(|j| j.job.id).collect();
            (listed, page.next_before)
        }
    };
    assert_eq!(list(None, None, None).await, (ids.clone(), None));
    assert_eq!(
        list(None, None, Some(2)).await,
        (vec![ids[3], ids[4]], Some(ids[3]))
    );
    assert_eq!(
        list(None, Some(ids[3]), Some(2)).await,
        (vec![ids[1], ids[2]], Some(ids[1]))
    );
    assert_eq!(
        list(None, Some(ids[1]), Some(2)).await,
        (vec![ids[0]], None)
    );
    assert_eq!(list(None, None, Some(5)).await, (ids.clone(), None));
    // A state reads past jobs that do not match to fill the page.
    assert_eq!(
        list(Some("held"), None, Some(3)).await,
        (vec![ids[1], ids[3], ids[4]], Some(ids[1]))
    );
    assert_eq!(
        list(Some("cancelled"), None, Some(1)).await,
        (vec![ids[2]], Some(ids[2]))
    );
    assert_eq!(
        list(Some("cancelled"), Some(ids[2]), None).await,
        (vec![], None)
    );
    for limit in [0, 10_001] {
        let err = f
            .admission
            .jobs(
                &alice(),
                &JobQuery {
                    limit: Some(limit),
                    ..JobQuery::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.status(), 422, "{err}");
    }
}

#[tokio::test]
async fn a_job_read_right_after_its_answer_shows_its_cluster_job_id() {
    // The forwarded job's record is written behind the answer: every read of jobs waits
    // for it, so a client never sees its job without the id the answer gave it.
    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000_000).await;
    for n in 0..30 {
        let key = format!("read-after-{n}");
        let submitted = f
            .admission
            .submit(&alice(), job(), Some(key.clone()))
            .await
            .unwrap();
        let read = match n % 3 {
            0 => f.admission.job(&alice(), submitted.id).await.unwrap().job,
            1 => {
                f.admission
                    .jobs(&alice(), &JobQuery::default())
                    .await
                    .unwrap()
                    .jobs
                    .into_iter()
                    .find(|j| j.job.id == submitted.id)
                    .unwrap()
                    .job
            }
            _ => {
                // A retry of the same submission is answered as the first was.
                let again = f
                    .admission
                    .submit(&alice(), job(), Some(key))
                    .await
                    .unwrap();
                assert_eq!(again.to_json(), submitted.to_json());
                continue;
            }
        };
        assert_eq!(
            read.cluster_job_id.as_deref(),
            Some(submitted.cluster_job_id.as_str()),
            "submission {n}"
        );
    }
    assert_eq!(f.onprem.submitted().len(), 30);
}

#[tokio::test]
async fn a_forwarded_job_is_recorded_though_nothing_follows_it() {
    // No later submission for the record to ride with and no reader waiting for it: it is
    // written alone after a few milliseconds.
    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000_000).await;
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    let hold = submitted.hold_id.expect("a hold");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stored = f.app.ledger.api_job(submitted.id).await.unwrap().unwrap();
        if stored.cluster_job_id.is_some() {
            assert_eq!(
                stored.cluster_job_id.as_deref(),
                Some(submitted.cluster_job_id.as_str())
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the record was never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let linked = f.app.ledger.holds(true).await.unwrap();
    let linked = linked.iter().find(|h| h.id == hold).unwrap();
    assert_eq!(
        linked.job_ref.as_deref(),
        Some(submitted.cluster_job_id.as_str())
    );
}

#[tokio::test]
async fn holds_expire_after_the_time_limit_plus_the_configured_grace() {
    let f = fixture_with("holds: {grace: 10m}\n").await;
    f.allocate("physics", "su", 100_000_000).await;
    let submitted = f
        .admission
        .submit(&alice(), job_with(json!({"time_limit_min": 30})), None)
        .await
        .unwrap();
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(hold.expires_at - hold.placed_at, 30 * 60 + 600);
    f.app.ledger.expire_holds(hold.expires_at).await.unwrap();
    assert_eq!(
        f.admission.job(&alice(), submitted.id).await.unwrap().state,
        "expired"
    );
}

#[tokio::test]
async fn refusals_reach_the_api_in_its_error_shape() {
    use bursar_gateway::server::{AdmissionApi, ApiError, JobsFilter};
    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000).await;
    let api: &dyn AdmissionApi = &f.admission;
    let err: ApiError = api.submit(&alice(), job(), None).await.unwrap_err();
    assert_eq!(err.status.as_u16(), 402);
    let body = err.body();
    assert_eq!(body["error"], "insufficient_allocation");
    assert_eq!(body["details"]["clusters"][0]["remaining"], "1.00");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("physics has 1.00 su left"));

    f.allocate("physics", "usd", 100_000_000).await;
    let created = api.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(created["cluster"], "cloud");
    let listed = api.jobs(&alice(), JobsFilter::default()).await.unwrap();
    assert_eq!(listed["jobs"][0]["id"], created["id"]);
    assert_eq!(listed["next_before"], serde_json::Value::Null);
    let quoted = api.quote(&alice(), job()).await.unwrap();
    assert_eq!(quoted[1]["cluster"], "cloud");
    assert_eq!(quoted[1]["chosen"], true, "onprem cannot be paid for");
    let err = api
        .quote(&alice(), job_with(json!({"account": "chemistry"})))
        .await
        .unwrap_err();
    assert_eq!(err.status.as_u16(), 403);
    assert_eq!(err.body()["error"], "no_association");
}

/// Admission reads balances through the ledger's view cache, which another process's writes
/// do not empty at once: money that process deposited must still be seen before a refusal.
#[tokio::test]
async fn a_deposit_by_another_process_is_seen_before_refusing() {
    let f = fixture().await;
    f.allocate("physics", "su", 1_250_000).await;
    let err = f.admission.submit(&alice(), job(), None).await.unwrap_err();
    assert_eq!(err.status(), 402);
    // Another bursar on the same database tops physics up (the same period, more money).
    let url = format!("sqlite://{}", f._dir.path().join("ledger.db").display());
    let other = bursar_ledger::Ledger::open(&url).await.unwrap();
    let at = bursar_gateway::timefmt::now();
    let period = f.balance("physics", "su").await.period.unwrap();
    assert!(period.0 <= at && at < period.1);
    other
        .set_allocation(
            "physics",
            &Currency::new("su"),
            100_000_000,
            period.0,
            period.1,
        )
        .await
        .unwrap();
    let submitted = f.admission.submit(&alice(), job(), None).await.unwrap();
    assert_eq!(submitted.cluster, "onprem");
    assert_eq!(f.balance("physics", "su").await.held, ONPREM_ESTIMATE);
}

/// `hold_expires_at` of job `id`'s view.
async fn hold_expiry(f: &Fixture, id: i64) -> serde_json::Value {
    let view = f.admission.job(&alice(), id).await.unwrap().to_json();
    view["hold_expires_at"].clone()
}

#[tokio::test]
async fn a_job_told_to_wait_is_held_from_its_begin_and_deadlines_are_checked_first() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let now = bursar_gateway::timefmt::now();
    let begin = now + 86_400;
    let submitted = f
        .admission
        .submit(
            &alice(),
            job_with(json!({"slurm": {"begin": begin, "deadline": begin + 7_200, "time_min": 30}})),
            None,
        )
        .await
        .unwrap();
    // Priced and held at the full limit, for the limit and the grace after the begin.
    assert_eq!(submitted.estimate, ONPREM_ESTIMATE);
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(hold.expires_at, begin + 3600 + 3600);
    assert_eq!(
        hold_expiry(&f, submitted.id).await,
        bursar_gateway::timefmt::format_instant(begin + 3600 + 3600)
    );
    // Seen waiting after its begin: one lifetime on from there, the wait not included.
    assert!(f
        .app
        .ledger
        .extend_hold(hold.id, begin + 3_000)
        .await
        .unwrap());
    let moved = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(moved.expires_at, begin + 3_000 + 3600 + 3600);
    let sent = f.onprem.submitted().pop().unwrap();
    let body = bursar_gateway::admission::forward::slurm_submission(&sent).unwrap();
    assert_eq!(
        (body.begin_time, body.deadline, body.time_min),
        (Some(begin), Some(begin + 7_200), Some(30))
    );

    // A begin already passed starts the hold's lifetime now.
    f.admission
        .submit(
            &alice(),
            job_with(json!({"slurm": {"begin": now - 600}})),
            None,
        )
        .await
        .unwrap();
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(hold.expires_at - hold.placed_at, 3600 + 3600);

    // slurmctld's refusals, said before anything is held.
    let held_before = f.balance("physics", "su").await.held;
    for (slurm, has) in [
        (json!({"deadline": now - 10}), "has passed"),
        (
            json!({"deadline": now + 600, "time_min": 30}),
            "before even --time-min 00:30:00 could end",
        ),
    ] {
        let err = f
            .admission
            .submit(&alice(), job_with(json!({ "slurm": slurm })), None)
            .await
            .unwrap_err();
        assert_eq!(err.status(), 422, "{slurm}");
        assert!(err.to_string().contains(has), "{slurm}: {err}");
    }
    assert_eq!(f.balance("physics", "su").await.held, held_before);
    // Cancelled: nothing held, no expiry.
    f.admission.cancel(&alice(), submitted.id).await.unwrap();
    assert_eq!(hold_expiry(&f, submitted.id).await, serde_json::Value::Null);

    // A shortest limit above the partition's default: that cluster is not eligible.
    let quote = f
        .admission
        .quote(&alice(), &job_with(json!({"slurm": {"time_min": 90}})))
        .await
        .unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert_eq!(
        onprem.reasons,
        ["--time-min 01:30:00 is longer than the time limit 01:00:00 the job gets in partition batch on onprem"]
    );
    // A whole limit that cannot end by the deadline: Slurm would never start the job; with a
    // --time-min that fits, Slurm may cut it.
    let deadline = now + 1_800;
    let doomed = job_with(json!({"slurm": {"deadline": deadline}}));
    let quote = f.admission.quote(&alice(), &doomed).await.unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert_eq!(onprem.reasons.len(), 1, "{:?}", onprem.reasons);
    assert!(
        onprem.reasons[0].starts_with(
            "the time limit 01:00:00 the job gets in partition batch on onprem would end after \
             --deadline"
        ),
        "{:?}",
        onprem.reasons
    );
    let cut = job_with(json!({"slurm": {"deadline": deadline, "time_min": 20}}));
    let quote = f.admission.quote(&alice(), &cut).await.unwrap();
    assert!(quote.cluster("onprem").unwrap().eligible());

    // A limit above the partition's maximum: refused, unless --time-min lets slurmctld lower
    // it to the partition's default when the job starts (priced at that).
    let long =
        |slurm: serde_json::Value| job_with(json!({"time_limit_min": 4_000, "slurm": slurm}));
    let quote = f.admission.quote(&alice(), &long(json!({}))).await.unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert!(
        onprem.reasons[0].contains("longer than the 2-00:00:00"),
        "{:?}",
        onprem.reasons
    );
    let quote = f
        .admission
        .quote(&alice(), &long(json!({"time_min": 30})))
        .await
        .unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert!(onprem.eligible(), "{:?}", onprem.reasons);
    assert_eq!(onprem.time_limit_min, Some(60));
    assert_eq!(onprem.estimate, Some(ONPREM_ESTIMATE));

    // A begin further ahead than holds.max_begin_ahead (30 days by default).
    let err = f
        .admission
        .submit(
            &alice(),
            job_with(json!({"slurm": {"begin": now + 31 * 86_400}})),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 422);
    assert!(err.to_string().contains("more than 30d ahead"), "{err}");
}
