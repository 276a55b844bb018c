//! What the gateway keeps in the ledger: the audit log and the jobs submitted through its API.

mod common;

use bursar_ledger::{ApiJobsPage, JobPart, LedgerError, NewApiJob, NewAudit, NewHold};
use common::{su, temp_ledger, DAY, HOUR, T0, UNIT};

fn audit(at: i64, action: &str) -> NewAudit {
    NewAudit {
        at,
        actor: "root-admin".to_string(),
        role: "admin".to_string(),
        action: action.to_string(),
        target: "physics".to_string(),
        before: None,
        after: Some(r#"{"name":"physics"}"#.to_string()),
    }
}

fn job(key: Option<&str>, user: &str, account: &str, hold_id: Option<i64>) -> NewApiJob {
    NewApiJob {
        idempotency_key: key.map(str::to_string),
        actor: user.to_string(),
        user: user.to_string(),
        account: account.to_string(),
        cluster: "alpha".to_string(),
        currency: su(),
        estimate: 4 * UNIT,
        hold_id,
        state: "held".to_string(),
        request_json: "{}".to_string(),
        route_json: r#"{"cluster":"alpha"}"#.to_string(),
        at: T0,
        array_tasks: None,
    }
}

/// A ledger whose account physics has 100 su for 30 days from `T0`.
async fn funded_physics() -> (tempfile::TempDir, bursar_ledger::Ledger) {
    let (dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    ledger
        .set_allocation("physics", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    (dir, ledger)
}

/// A hold of `amount` su on physics at alpha, placed at `T0` for a day, linked to `job_ref`.
fn physics_hold(key: &str, job_ref: Option<&str>, amount: i64) -> NewHold {
    NewHold {
        account: "physics".to_string(),
        currency: su(),
        amount,
        cluster: "alpha".to_string(),
        job_ref: job_ref.map(str::to_string),
        placed_at: T0,
        expires_at: T0 + DAY,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    }
}

#[tokio::test]
async fn the_audit_log_lists_newest_first_and_limits() {
    let (_dir, ledger) = temp_ledger().await;
    let first = ledger.audit(&audit(T0, "account.create")).await.unwrap();
    let second = ledger
        .audit(&audit(T0 + 1, "allocation.set"))
        .await
        .unwrap();
    assert!(second > first);
    let all = ledger.audit_log(None).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].action, "allocation.set");
    assert_eq!(all[1].before, None);
    assert_eq!(all[1].after.as_deref(), Some(r#"{"name":"physics"}"#));
    let last = ledger.audit_log(Some(1)).await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].id, second);
    // Paged: below an id, newest first.
    let older = ledger.audit_page(Some(second), 5).await.unwrap();
    assert_eq!(older.iter().map(|e| e.id).collect::<Vec<_>>(), [first]);
    assert!(ledger.audit_page(Some(first), 5).await.unwrap().is_empty());
    assert_eq!(ledger.audit_page(None, 1).await.unwrap()[0].id, second);
    let mut empty = audit(T0, "x");
    empty.actor = String::new();
    assert!(matches!(
        ledger.audit(&empty).await,
        Err(LedgerError::Invalid(_))
    ));
}

#[tokio::test]
async fn api_jobs_are_recorded_found_updated_and_filtered() {
    let (_dir, ledger) = temp_ledger().await;
    let a = ledger
        .create_api_job(&job(Some("k1"), "alice", "physics", None))
        .await
        .unwrap();
    assert_eq!(
        (a.state.as_str(), a.cluster_job_id.as_deref()),
        ("held", None)
    );
    assert_eq!((a.submitted_at, a.updated_at), (T0, T0));
    let again = ledger
        .create_api_job(&job(Some("k1"), "alice", "physics", None))
        .await;
    assert!(matches!(again, Err(LedgerError::Conflict(_))), "{again:?}");
    let b = ledger
        .create_api_job(&job(None, "bob", "chemistry", None))
        .await
        .unwrap();
    let c = ledger
        .create_api_job(&job(None, "bob", "physics", None))
        .await
        .unwrap();

    assert_eq!(ledger.api_job(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(ledger.api_job_by_key("k1").await.unwrap(), Some(a.clone()));
    assert_eq!(ledger.api_job_by_key("k2").await.unwrap(), None);
    assert_eq!(ledger.api_job(9999).await.unwrap(), None);

    ledger
        .update_api_job(a.id, "held", Some("1234"), T0 + 5)
        .await
        .unwrap();
    ledger
        .update_api_job(a.id, "cancelled", None, T0 + 9)
        .await
        .unwrap();
    let a2 = ledger.api_job(a.id).await.unwrap().unwrap();
    assert_eq!(a2.cluster_job_id.as_deref(), Some("1234"));
    assert_eq!((a2.state.as_str(), a2.updated_at), ("cancelled", T0 + 9));
    assert!(matches!(
        ledger.update_api_job(9999, "failed", None, T0).await,
        Err(LedgerError::NotFound { .. })
    ));

    let ids = |jobs: Vec<bursar_ledger::ApiJob>| jobs.iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(
        ids(ledger.api_jobs(None, None).await.unwrap()),
        [a.id, b.id, c.id]
    );
    assert_eq!(
        ids(ledger.api_jobs(Some("bob"), None).await.unwrap()),
        [b.id, c.id]
    );
    assert_eq!(
        ids(ledger.api_jobs(None, Some("physics")).await.unwrap()),
        [a.id, c.id]
    );
    assert_eq!(
        ids(ledger.api_jobs(Some("bob"), Some("physics")).await.unwrap()),
        [c.id]
    );
}

#[tokio::test]
async fn api_jobs_come_in_pages_newest_first() {
    let (_dir, ledger) = temp_ledger().await;
    let mut ids = Vec::new();
    // alice: physics held, chemistry settled, physics cancelled, ... in turn; bob's between.
    for n in 0..12 {
        let (user, account, state) = match n % 4 {
            0 => ("alice", "physics", "held"),
            1 => ("alice", "chemistry", "settled"),
            2 => ("bob", "physics", "held"),
            _ => ("alice", "physics", "cancelled"),
        };
        let created = ledger
            .create_api_job(&job(None, user, account, None))
            .await
            .unwrap();
        if state != "held" {
            ledger
                .update_api_job(created.id, state, None, T0 + 1)
                .await
                .unwrap();
        }
        ids.push(created.id);
    }
    let page = |user: Option<&str>, account: Option<&str>, state: Option<&str>, before, limit| {
        let query = ApiJobsPage {
            user: user.map(str::to_string),
            account: account.map(str::to_string),
            state: state.map(str::to_string),
            before,
            limit,
        };
        let ledger = &ledger;
        async move {
            let jobs = ledger.api_jobs_page(&query).await.unwrap();
            jobs.iter().map(|j| j.id).collect::<Vec<_>>()
        }
    };
    let at = |ns: &[usize]| ns.iter().map(|&n| ids[n]).collect::<Vec<_>>();
    assert_eq!(page(None, None, None, None, 3).await, at(&[11, 10, 9]));
    assert_eq!(
        page(None, None, None, Some(ids[9]), 3).await,
        at(&[8, 7, 6])
    );
    assert_eq!(page(None, None, None, Some(ids[1]), 3).await, at(&[0]));
    assert_eq!(page(None, None, None, Some(ids[0]), 3).await, at(&[]));
    assert_eq!(
        page(Some("alice"), None, None, None, 4).await,
        at(&[11, 9, 8, 7])
    );
    assert_eq!(
        page(Some("alice"), Some("physics"), None, Some(ids[8]), 10).await,
        at(&[7, 4, 3, 0])
    );
    assert_eq!(
        page(None, Some("physics"), None, None, 2).await,
        at(&[11, 10])
    );
    // A state asked for brings the jobs recorded in it and those still recorded held.
    assert_eq!(
        page(Some("alice"), None, Some("settled"), None, 10).await,
        at(&[9, 8, 5, 4, 1, 0])
    );
    assert_eq!(
        page(None, None, Some("held"), Some(ids[6]), 10).await,
        at(&[4, 2, 0])
    );
}

#[tokio::test]
async fn api_jobs_are_found_by_their_cluster_job_ids_on_their_cluster_only() {
    let (_dir, ledger) = temp_ledger().await;
    let mut made = Vec::new();
    for (cluster, cluster_job_id) in [
        ("alpha", Some("run-a")),
        ("alpha", Some("run-b")),
        ("alpha", None),
        ("beta", Some("run-a")),
        ("alpha", Some("run-c")),
    ] {
        let mut new = job(None, "alice", "physics", None);
        new.cluster = cluster.to_string();
        let created = ledger.create_api_job(&new).await.unwrap();
        if let Some(id) = cluster_job_id {
            ledger
                .update_api_job(created.id, "held", Some(id), T0 + 1)
                .await
                .unwrap();
        }
        made.push(created.id);
    }
    let on = |cluster: &'static str, ids: &'static [&'static str]| {
        let ledger = &ledger;
        async move {
            let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            let found = ledger.api_jobs_on(cluster, &ids).await.unwrap();
            found
                .iter()
                .map(|j| (j.id, j.cluster_job_id.clone().unwrap_or_default()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        on("alpha", &["run-c", "run-a", "run-x"]).await,
        [
            (made[0], "run-a".to_string()),
            (made[4], "run-c".to_string())
        ]
    );
    assert_eq!(
        on("beta", &["run-a", "run-b"]).await,
        [(made[3], "run-a".to_string())]
    );
    assert_eq!(on("alpha", &[]).await, []);
    assert_eq!(on("gamma", &["run-a"]).await, []);
    // An id that is no JSON-safe string still reads as itself.
    assert_eq!(
        on("alpha", &["run-\"b\"", "run-b"]).await,
        [(made[1], "run-b".to_string())]
    );
}

#[tokio::test]
async fn an_unknown_hold_is_refused_and_expiring_a_hold_expires_its_job() {
    let (_dir, ledger) = temp_ledger().await;
    assert!(matches!(
        ledger
            .create_api_job(&job(None, "alice", "physics", Some(42)))
            .await,
        Err(LedgerError::NotFound { .. })
    ));
    ledger.ensure_account("physics", None).await.unwrap();
    ledger
        .set_allocation("physics", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    let hold = |key: &str| NewHold {
        account: "physics".to_string(),
        currency: su(),
        amount: 4 * UNIT,
        cluster: "alpha".to_string(),
        job_ref: None,
        placed_at: T0,
        expires_at: T0 + HOUR,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    };
    let h1 = ledger.try_place_hold(&hold("h1")).await.unwrap();
    let h2 = ledger.try_place_hold(&hold("h2")).await.unwrap();
    let waiting = ledger
        .create_api_job(&job(None, "alice", "physics", Some(h1.id)))
        .await
        .unwrap();
    let cancelled = ledger
        .create_api_job(&job(None, "alice", "physics", Some(h2.id)))
        .await
        .unwrap();
    ledger
        .update_api_job(cancelled.id, "cancelled", None, T0 + 1)
        .await
        .unwrap();
    assert_eq!(ledger.expire_holds(T0 + HOUR).await.unwrap(), 2);
    let waiting = ledger.api_job(waiting.id).await.unwrap().unwrap();
    assert_eq!(
        (waiting.state.as_str(), waiting.updated_at),
        ("expired", T0 + HOUR)
    );
    let cancelled = ledger.api_job(cancelled.id).await.unwrap().unwrap();
    assert_eq!(cancelled.state, "cancelled");
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// Closing a hold records what became of the API job waiting on it, in the same transaction:
/// final usage settles it, a release cancels it, expiry expires it. A job already past `held`
/// keeps its state.
#[tokio::test]
async fn closing_a_hold_records_its_jobs_state() {
    let (_dir, ledger) = funded_physics().await;
    let hold = |key: &str, job_ref: Option<&str>| physics_hold(key, job_ref, 4 * UNIT);
    let mut jobs = Vec::new();
    for (key, job_ref) in [
        ("settles", Some("41")),
        ("released", None),
        ("failed", None),
        ("expires", None),
    ] {
        let h = ledger.try_place_hold(&hold(key, job_ref)).await.unwrap();
        let j = ledger
            .create_api_job(&job(None, "alice", "physics", Some(h.id)))
            .await
            .unwrap();
        jobs.push((h.id, j.id));
    }
    ledger
        .update_api_job(jobs[2].1, "failed", None, T0 + 1)
        .await
        .unwrap();
    let mut usage = common::record("41", "r1", "physics", 3, T0 + HOUR);
    usage.submit = T0;
    let posted = ledger.post_usage(&[usage], T0 + 2 * HOUR).await.unwrap();
    assert_eq!(posted.settled_holds, 1);
    assert!(ledger
        .release_hold(jobs[1].0, "cancelled by admin", T0 + 3 * HOUR)
        .await
        .unwrap());
    assert!(ledger
        .release_hold(jobs[2].0, "forwarding failed", T0 + 3 * HOUR)
        .await
        .unwrap());
    assert_eq!(ledger.expire_holds(T0 + DAY).await.unwrap(), 1);

    let mut states = Vec::new();
    for &(_, id) in &jobs {
        let j = ledger.api_job(id).await.unwrap().unwrap();
        states.push((j.state, j.updated_at));
    }
    let want = [
        ("settled", T0 + 2 * HOUR),
        ("cancelled", T0 + 3 * HOUR),
        ("failed", T0 + 1),
        ("expired", T0 + DAY),
    ];
    let got: Vec<(&str, i64)> = states.iter().map(|(s, t)| (s.as_str(), *t)).collect();
    assert_eq!(got, want);
    // Listing by state finds them by what is recorded.
    let settled = ledger
        .api_jobs_page(&ApiJobsPage {
            user: None,
            account: None,
            state: Some("settled".to_string()),
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(settled
        .iter()
        .any(|j| j.id == jobs[0].1 && j.state == "settled"));
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_job_s_parts_are_recorded_once_and_read_by_job() {
    let (_dir, ledger) = temp_ledger().await;
    let a = ledger
        .create_api_job(&job(None, "alice", "physics", None))
        .await
        .unwrap();
    let b = ledger
        .create_api_job(&job(None, "bob", "physics", None))
        .await
        .unwrap();
    let part = |api_job_id: i64, job_id: &str, submit: i64| JobPart {
        api_job_id,
        job_id: job_id.to_string(),
        submit,
    };
    let first = [
        part(a.id, "sub-1", T0),
        part(a.id, "sub-0", T0),
        part(b.id, "sub-9", T0),
    ];
    assert_eq!(ledger.record_job_parts(&first).await.unwrap(), 3);
    // Read again with a new one (a retry of a's run): only that is new.
    let again = [part(a.id, "sub-0", T0), part(a.id, "sub-2", T0 + HOUR)];
    assert_eq!(ledger.record_job_parts(&again).await.unwrap(), 1);
    assert_eq!(ledger.record_job_parts(&[]).await.unwrap(), 0);

    assert_eq!(
        ledger.job_parts(&[a.id]).await.unwrap(),
        [
            part(a.id, "sub-0", T0),
            part(a.id, "sub-1", T0),
            part(a.id, "sub-2", T0 + HOUR)
        ]
    );
    assert_eq!(ledger.job_parts(&[b.id, a.id]).await.unwrap().len(), 4);
    assert!(ledger.job_parts(&[]).await.unwrap().is_empty());
    assert!(ledger.job_parts(&[b.id + 1]).await.unwrap().is_empty());

    // A record is a part of one job: listed for b, it is no longer a's.
    assert_eq!(
        ledger
            .record_job_parts(&[part(b.id, "sub-1", T0)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        ledger.job_parts(&[a.id]).await.unwrap(),
        [part(a.id, "sub-0", T0), part(a.id, "sub-2", T0 + HOUR)]
    );
    assert_eq!(
        ledger.job_parts(&[b.id]).await.unwrap(),
        [part(b.id, "sub-1", T0), part(b.id, "sub-9", T0)]
    );
}

/// A job array holds its tasks' estimates under the array's id: each task that ends releases
/// its share (once, however often its record is posted), a task requeued after a node failure
/// releases nothing until its next run ends, the pending rest and running tasks keep the hold
/// alive, and the task that ends the last of them settles the hold and the job. Every task's
/// record is a part of the job; another cluster's array under the same id, and a single job,
/// are left alone.
#[tokio::test]
async fn a_job_array_releases_its_hold_task_by_task_and_settles_with_the_last() {
    let (_dir, ledger) = funded_physics().await;
    let hold = ledger
        .try_place_hold(&NewHold {
            expires_at: T0 + HOUR,
            lifetime: None,
            ..physics_hold("array", Some("63"), 12 * UNIT)
        })
        .await
        .unwrap();
    let job = ledger
        .create_api_job(&NewApiJob {
            estimate: 12 * UNIT,
            array_tasks: Some(3),
            ..job(None, "alice", "physics", Some(hold.id))
        })
        .await
        .unwrap();
    assert_eq!(job.array_tasks, Some(3));
    ledger
        .update_api_job(job.id, "held", Some("63"), T0)
        .await
        .unwrap();
    let held = |ledger: &bursar_ledger::Ledger| {
        let ledger = ledger.clone();
        async move {
            let h = ledger.holds_by_id(&[hold.id]).await.unwrap().remove(0);
            let held = ledger.balance("physics", T0 + HOUR).await.unwrap()[0].held;
            assert_eq!(
                held,
                if h.state == bursar_ledger::HoldState::Active {
                    h.amount
                } else {
                    0
                }
            );
            (h.state, h.amount, h.expires_at)
        }
    };
    let task = |raw: &str, display: &str, state: &str, units: i64| bursar_ledger::UsageCharge {
        display_id: display.to_string(),
        state: state.to_string(),
        is_final: state != "RUNNING" && state != "PENDING",
        ..common::record(raw, state, "physics", units, T0 + HOUR)
    };

    // Task 0 ends, task 1 runs, the rest waits: one share released, the expiry moved.
    let posted = ledger
        .post_usage(
            &[
                task("64", "63_0", "COMPLETED", 2),
                task("65", "63_1", "RUNNING", 1),
                task("63", "63_[2]", "PENDING", 0),
            ],
            T0 + 2 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(posted.settled_holds, 0);
    let active = bursar_ledger::HoldState::Active;
    assert_eq!(held(&ledger).await, (active, 8 * UNIT, T0 + 3 * HOUR));
    // The same record again, and another cluster's array under the same id: nothing.
    let other = bursar_ledger::UsageCharge {
        cluster: "beta".to_string(),
        ..task("66", "63_1", "COMPLETED", 1)
    };
    ledger
        .post_usage(&[task("64", "63_0", "COMPLETED", 2), other], T0 + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(held(&ledger).await.1, 8 * UNIT);
    // Task 1 fails on a node (Slurm may run it again): nothing released; it ends: a share.
    ledger
        .post_usage(&[task("65", "63_1", "NODE_FAIL", 1)], T0 + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(held(&ledger).await.1, 8 * UNIT);
    let rerun = bursar_ledger::UsageCharge {
        submit: T0 + 60,
        ..task("65", "63_1", "COMPLETED", 1)
    };
    ledger.post_usage(&[rerun], T0 + 2 * HOUR).await.unwrap();
    assert_eq!(held(&ledger).await.1, 4 * UNIT);
    // The last task — under the array's own id, which is not the hold's job — settles it.
    let posted = ledger
        .post_usage(&[task("63", "63_2", "COMPLETED", 3)], T0 + 3 * HOUR)
        .await
        .unwrap();
    assert_eq!(posted.settled_holds, 1);
    let (state, ..) = held(&ledger).await;
    assert_eq!(state, bursar_ledger::HoldState::Settled);
    assert_eq!(
        ledger.api_job(job.id).await.unwrap().unwrap().state,
        "settled"
    );
    let mut parts: Vec<(String, i64)> = ledger
        .job_parts(&[job.id])
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.job_id, p.submit))
        .collect();
    parts.sort();
    let want: Vec<(String, i64)> = [("63", T0), ("64", T0), ("65", T0), ("65", T0 + 60)]
        .into_iter()
        .map(|(j, s)| (j.to_string(), s))
        .collect();
    assert_eq!(parts, want);
    // Charged: 2 + 1 (the node failure) + 1 + 3 of the tasks and beta's 1; nothing held.
    let balance = ledger
        .balance("physics", T0 + HOUR)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((balance.charged, balance.held), (8 * UNIT, 0));
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// A job array that holds nothing (an estimate of 0) is settled when its last task ends, not
/// when the task under the array's own id does.
#[tokio::test]
async fn a_free_job_array_is_settled_by_its_last_task() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let job = ledger
        .create_api_job(&NewApiJob {
            estimate: 0,
            array_tasks: Some(2),
            ..job(None, "alice", "physics", None)
        })
        .await
        .unwrap();
    ledger
        .update_api_job(job.id, "held", Some("70"), T0)
        .await
        .unwrap();
    let task = |raw: &str, display: &str| bursar_ledger::UsageCharge {
        display_id: display.to_string(),
        ..common::record(raw, "r", "physics", 0, T0 + HOUR)
    };
    ledger
        .post_usage(&[task("70", "70_1")], T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(ledger.api_job(job.id).await.unwrap().unwrap().state, "held");
    ledger
        .post_usage(&[task("71", "70_0")], T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(
        ledger.api_job(job.id).await.unwrap().unwrap().state,
        "settled"
    );
}

/// Job arrays of 4 tasks under these array ids, each holding 12 units: (hold, API job) each.
async fn held_arrays(ledger: &bursar_ledger::Ledger, ids: &[&str]) -> Vec<(i64, i64)> {
    let mut jobs = Vec::new();
    for n in ids {
        let hold = ledger
            .try_place_hold(&physics_hold(&format!("job {n}"), Some(n), 12 * UNIT))
            .await
            .unwrap();
        let job = ledger
            .create_api_job(&NewApiJob {
                estimate: 12 * UNIT,
                array_tasks: Some(4),
                ..job(None, "alice", "physics", Some(hold.id))
            })
            .await
            .unwrap();
        ledger
            .update_api_job(job.id, "held", Some(n), T0)
            .await
            .unwrap();
        jobs.push((hold.id, job.id));
    }
    jobs
}

/// A record of an array's task (`63_1`) or pending rest (`63_[2-3%2]`) in `state`.
fn array_record(raw: &str, display: &str, state: &str) -> bursar_ledger::UsageCharge {
    bursar_ledger::UsageCharge {
        display_id: display.to_string(),
        state: state.to_string(),
        is_final: !matches!(state, "PENDING" | "RUNNING"),
        ..common::record(raw, state, "physics", 0, T0 + HOUR)
    }
}

/// An array cancelled on its cluster: the pending rest's record names the tasks that never
/// run, whose shares are released at once; the task still running settles the hold when it
/// ends, with no question to the cluster. An array cancelled before any task started is
/// logged as a plain job under its id: only then is its hold listed for the gateway to ask
/// whether anything of it waits.
#[tokio::test]
async fn a_cancelled_job_array_releases_the_tasks_that_never_run_and_settles_with_the_last() {
    let (_dir, ledger) = funded_physics().await;
    let jobs = held_arrays(&ledger, &["63", "80"]).await;
    let amount = |hold: i64| {
        let ledger = ledger.clone();
        async move { ledger.holds_by_id(&[hold]).await.unwrap()[0].amount }
    };
    // Task 0 ended, task 1 runs, 2 and 3 wait: then `scancel 63`.
    ledger
        .post_usage(
            &[
                array_record("64", "63_0", "COMPLETED"),
                array_record("65", "63_1", "RUNNING"),
                array_record("63", "63_[2-3%2]", "PENDING"),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    assert_eq!(amount(jobs[0].0).await, 9 * UNIT);
    ledger
        .post_usage(&[array_record("63", "63_[2-3%2]", "CANCELLED")], T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(amount(jobs[0].0).await, 3 * UNIT, "tasks 2 and 3 never run");
    assert!(ledger.holds_to_confirm().await.unwrap().is_empty());
    let posted = ledger
        .post_usage(&[array_record("65", "63_1", "CANCELLED")], T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(posted.settled_holds, 1);
    assert_eq!(
        ledger.api_job(jobs[0].1).await.unwrap().unwrap().state,
        "settled"
    );
    // Cancelled before any task started: a plain record under the array's id.
    ledger
        .post_usage(&[array_record("80", "80", "CANCELLED")], T0 + HOUR)
        .await
        .unwrap();
    let listed: Vec<i64> = ledger
        .holds_to_confirm()
        .await
        .unwrap()
        .iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(listed, [jobs[1].0]);
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// slurmdbd may log the pending rest of an array cancelled on its cluster still naming a task
/// that had just started (`63_[1-3%1]` beside `63_1`, seen live on 22.05): that task ran, and
/// its share stays held until its own record ends it, in whichever order the records come.
#[tokio::test]
async fn a_task_the_pending_rest_still_names_keeps_its_share_until_it_ends() {
    let (_dir, ledger) = funded_physics().await;
    let jobs = held_arrays(&ledger, &["63", "90", "95"]).await;
    let amount = |hold: i64| {
        let ledger = ledger.clone();
        async move { ledger.holds_by_id(&[hold]).await.unwrap()[0].amount }
    };
    let post = |records: &[bursar_ledger::UsageCharge]| {
        let (ledger, records) = (ledger.clone(), records.to_vec());
        async move { ledger.post_usage(&records, T0 + HOUR).await.unwrap() }
    };
    let state = |job: i64| {
        let ledger = ledger.clone();
        async move { ledger.api_job(job).await.unwrap().unwrap().state }
    };
    // One pass: task 0 done, task 1 just started, the rest cancelled still naming task 1.
    post(&[
        array_record("63", "63_[1-3%1]", "CANCELLED"),
        array_record("64", "63_0", "COMPLETED"),
        array_record("65", "63_1", "RUNNING"),
    ])
    .await;
    assert_eq!(amount(jobs[0].0).await, 3 * UNIT, "tasks 2 and 3 never ran");
    assert_eq!(state(jobs[0].1).await, "held", "task 1 still runs");
    let posted = post(&[array_record("65", "63_1", "CANCELLED")]).await;
    assert_eq!(posted.settled_holds, 1);
    assert_eq!(state(jobs[0].1).await, "settled");

    // The started task's record first, the rest's in a later pass.
    post(&[
        array_record("91", "90_0", "COMPLETED"),
        array_record("92", "90_1", "RUNNING"),
    ])
    .await;
    post(&[array_record("90", "90_[1-3%1]", "CANCELLED")]).await;
    assert_eq!(amount(jobs[1].0).await, 3 * UNIT);
    assert_eq!(state(jobs[1].1).await, "held");
    post(&[array_record("92", "90_1", "CANCELLED")]).await;
    assert_eq!(state(jobs[1].1).await, "settled");

    // The rest alone first, while task 0 runs; the started task's record in a later pass: its
    // share was released, and the job waits for it all the same (no early settle when task 0
    // ends, no second release).
    post(&[
        array_record("96", "95_0", "RUNNING"),
        array_record("95", "95_[1-3%2]", "CANCELLED"),
    ])
    .await;
    assert_eq!(amount(jobs[2].0).await, 3 * UNIT, "task 0's share");
    post(&[array_record("97", "95_1", "RUNNING")]).await;
    let posted = post(&[array_record("96", "95_0", "CANCELLED")]).await;
    assert_eq!(posted.settled_holds, 0);
    assert_eq!(state(jobs[2].1).await, "held", "task 1 still runs");
    assert_eq!(amount(jobs[2].0).await, 3 * UNIT);
    let posted = post(&[array_record("97", "95_1", "CANCELLED")]).await;
    assert_eq!(posted.settled_holds, 1);
    assert_eq!(state(jobs[2].1).await, "settled");
    let balance = ledger
        .balance("physics", T0 + HOUR)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(balance.held, 0);
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// Parts are records of their job's cluster: two clusters' records under the same raw id and
/// submit second (Slurm hands ids out per cluster) are parts of their own jobs, each listed
/// again moving nothing; within a cluster, a record listed for another job moves to it.
#[tokio::test]
async fn parts_of_jobs_on_two_clusters_under_the_same_id_stay_apart() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let alpha = ledger
        .create_api_job(&job(None, "alice", "physics", None))
        .await
        .unwrap();
    let beta = ledger
        .create_api_job(&NewApiJob {
            cluster: "beta".to_string(),
            ..job(None, "alice", "physics", None)
        })
        .await
        .unwrap();
    let part = |api_job_id: i64| JobPart {
        api_job_id,
        job_id: "64".to_string(),
        submit: T0,
    };
    for _ in 0..2 {
        ledger
            .record_job_parts(&[part(alpha.id), part(beta.id)])
            .await
            .unwrap();
    }
    assert_eq!(
        ledger.job_parts(&[alpha.id]).await.unwrap(),
        [part(alpha.id)]
    );
    assert_eq!(ledger.job_parts(&[beta.id]).await.unwrap(), [part(beta.id)]);
    let other = ledger
        .create_api_job(&job(None, "alice", "physics", None))
        .await
        .unwrap();
    assert_eq!(ledger.record_job_parts(&[part(other.id)]).await.unwrap(), 1);
    assert!(ledger.job_parts(&[alpha.id]).await.unwrap().is_empty());
    assert_eq!(ledger.job_parts(&[beta.id]).await.unwrap(), [part(beta.id)]);
}
