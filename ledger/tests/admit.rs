//! The admission fast path: a batch of submissions admitted in one transaction decides each
//! exactly as one transaction per submission would, records job and hold together, and the
//! quote's one-statement view agrees with the balances.

mod common;

use bursar_ledger::{
    AdmitOutcome, ForwardedJob, HoldState, Ledger, LedgerError, NewAdmission, NewApiJob, NewHold,
    ViewRead,
};
use common::{record, su, submitted, temp_ledger, DAY, HOUR, T0, UNIT};

fn admission(n: usize, account: &str, units: i64, key: Option<&str>) -> NewAdmission {
    NewAdmission {
        hold: (units > 0).then(|| NewHold {
            account: account.to_string(),
            currency: su(),
            amount: units * UNIT,
            cluster: "alpha".to_string(),
            job_ref: None,
            placed_at: T0 + HOUR,
            expires_at: T0 + DAY,
            lifetime: None,
            idempotency_key: format!("api:{n}"),
            note: Some(format!("submission {n}")),
        }),
        job: NewApiJob {
            idempotency_key: key.map(str::to_string),
            actor: "alice".to_string(),
            user: "alice".to_string(),
            account: account.to_string(),
            cluster: "alpha".to_string(),
            currency: su(),
            estimate: units * UNIT,
            hold_id: None,
            state: "held".to_string(),
            request_json: format!("{{\"n\":{n}}}"),
            route_json: "{}".to_string(),
            at: T0 + HOUR,
            array_tasks: None,
        },
    }
}

async fn setup() -> (tempfile::TempDir, Ledger) {
    let (dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    ledger
        .ensure_account("chemistry", Some("org"))
        .await
        .unwrap();
    ledger.upsert_user("alice", "physics").await.unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    ledger
        .set_allocation("physics", &su(), 80 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    (dir, ledger)
}

fn admitted(outcome: &Result<AdmitOutcome, LedgerError>) -> (i64, Option<i64>) {
    match outcome {
        Ok(AdmitOutcome::Admitted { job, hold, .. }) => (job.id, hold.as_ref().map(|h| h.id)),
        other => panic!("expected an admission, got {other:?}"),
    }
}

#[tokio::test]
async fn a_batch_admits_in_order_until_the_tightest_link_is_spent() {
    let (_dir, ledger) = setup().await;
    // physics 80 under org 100: 30 + 30 fit, the third 30 does not (physics 20 left), the
    // chemistry 30 does (org 40 left), the next chemistry 15 does not (org 10 left).
    let batch = vec![
        admission(1, "physics", 30, None),
        admission(2, "physics", 30, None),
        admission(3, "physics", 30, None),
        admission(4, "chemistry", 30, None),
        admission(5, "chemistry", 15, None),
        admission(6, "physics", 0, None),
    ];
    let out = ledger.admit(&batch, T0 + HOUR).await.unwrap();
    assert_eq!(out.len(), 6);
    let (j1, h1) = admitted(&out[0]);
    let (j2, h2) = admitted(&out[1]);
    match &out[2] {
        Err(LedgerError::InsufficientAllocation {
            account,
            estimate,
            remaining,
            ..
        }) => assert_eq!(
            (account.as_str(), *estimate, *remaining),
            ("physics", 30 * UNIT, 20 * UNIT)
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let (j4, _) = admitted(&out[3]);
    match &out[4] {
        Err(LedgerError::InsufficientAllocation {
            account, remaining, ..
        }) => assert_eq!((account.as_str(), *remaining), ("org", 10 * UNIT)),
        other => panic!("expected a refusal naming org, got {other:?}"),
    }
    // A free job is recorded without a hold.
    let (j6, h6) = admitted(&out[5]);
    assert_eq!(h6, None);
    assert_eq!((j2, j4, j6), (j1 + 1, j1 + 2, j1 + 3));
    assert_eq!(h2, h1.map(|h| h + 1));

    // Each admission tells what its hold left on each link of the chain, nearest first.
    let left = |outcome: &Result<AdmitOutcome, LedgerError>| match outcome {
        Ok(AdmitOutcome::Admitted {
            remaining_after, ..
        }) => remaining_after.clone(),
        other => panic!("expected an admission, got {other:?}"),
    };
    let pair = |a: &str, units: i64, b: &str, units_b: i64| {
        vec![
            (a.to_string(), units * UNIT),
            (b.to_string(), units_b * UNIT),
        ]
    };
    assert_eq!(left(&out[0]), pair("physics", 50, "org", 70));
    assert_eq!(left(&out[1]), pair("physics", 20, "org", 40));
    assert_eq!(left(&out[3]), [("org".to_string(), 10 * UNIT)]);
    assert_eq!(left(&out[5]), [], "a free job holds nothing");

    let org = &ledger.balance("org", T0 + HOUR).await.unwrap()[0];
    assert_eq!((org.held, org.remaining), (90 * UNIT, Some(10 * UNIT)));
    let stored = ledger.api_job(j2).await.unwrap().unwrap();
    assert_eq!((stored.hold_id, stored.state.as_str()), (h2, "held"));
    assert_eq!(stored.estimate, 30 * UNIT);
    let holds = ledger.holds(true).await.unwrap();
    assert_eq!(holds.len(), 3);
    assert_eq!(holds[0].note.as_deref(), Some("submission 1"));
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_idempotency_key_admits_once_across_and_within_batches() {
    let (_dir, ledger) = setup().await;
    let first = ledger
        .admit(&[admission(1, "physics", 10, Some("k1"))], T0 + HOUR)
        .await
        .unwrap();
    let (job, _) = admitted(&first[0]);
    let again = ledger
        .admit(
            &[
                admission(2, "physics", 10, Some("k1")),
                admission(3, "physics", 10, Some("k2")),
                admission(4, "physics", 10, Some("k2")),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    match &again[0] {
        Ok(AdmitOutcome::Existing(existing)) => assert_eq!(existing.id, job),
        other => panic!("expected the existing job, got {other:?}"),
    }
    admitted(&again[1]);
    assert!(matches!(again[2], Err(LedgerError::Conflict(_))));
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 20 * UNIT);
}

#[tokio::test]
async fn unknown_accounts_and_missing_allocations_are_refused_alone() {
    let (_dir, ledger) = setup().await;
    ledger.ensure_account("astro", None).await.unwrap();
    let out = ledger
        .admit(
            &[
                admission(1, "nobody", 1, None),
                admission(2, "astro", 1, None),
                admission(3, "physics", 1, None),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    assert!(matches!(out[0], Err(LedgerError::NotFound { .. })));
    assert!(matches!(out[1], Err(LedgerError::NoAllocation { .. })));
    admitted(&out[2]);
    assert_eq!(ledger.holds(true).await.unwrap().len(), 1);
}

#[tokio::test]
async fn forwarded_jobs_link_their_holds_and_final_usage_settles_them() {
    let (_dir, ledger) = setup().await;
    let out = ledger
        .admit(
            &[
                admission(1, "physics", 30, None),
                admission(2, "physics", 0, None),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    let (j1, h1) = admitted(&out[0]);
    let (j2, _) = admitted(&out[1]);
    let done = ledger
        .admit_recording(
            &[],
            &[
                ForwardedJob {
                    job: j1,
                    hold: h1,
                    settle_ref: "5".to_string(),
                    cluster_job_id: "5".to_string(),
                    at: T0 + HOUR,
                    route_json: None,
                },
                ForwardedJob {
                    job: j2,
                    hold: None,
                    settle_ref: "submission-6".to_string(),
                    cluster_job_id: "6".to_string(),
                    at: T0 + HOUR,
                    route_json: None,
                },
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    assert_eq!((done.linked, done.unrecorded.len()), (1, 0));
    // The id the usage will carry is kept with the job when it is not the cluster's job id
    // (a dstack run's submission beside its run name).
    let ids = |job: bursar_ledger::ApiJob| (job.cluster_job_id, job.settle_ref);
    assert_eq!(
        ids(ledger.api_job(j1).await.unwrap().unwrap()),
        (Some("5".to_string()), None)
    );
    assert_eq!(
        ids(ledger.api_job(j2).await.unwrap().unwrap()),
        (Some("6".to_string()), Some("submission-6".to_string()))
    );
    ledger
        .post_usage(
            &[submitted(
                T0 + HOUR,
                record("5", "r1", "physics", 12, T0 + 2 * HOUR),
            )],
            T0 + 2 * HOUR,
        )
        .await
        .unwrap();
    let hold = &ledger.holds(false).await.unwrap()[0];
    assert_eq!(hold.state, HoldState::Settled);
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!((b.charged, b.held), (12 * UNIT, 0));
    // A job that is not there is reported; the others of the call are recorded.
    let missing = ledger
        .admit_recording(
            &[],
            &[
                ForwardedJob {
                    job: 999,
                    hold: None,
                    settle_ref: "7".to_string(),
                    cluster_job_id: "7".to_string(),
                    at: T0 + HOUR,
                    route_json: None,
                },
                ForwardedJob {
                    job: j2,
                    hold: None,
                    settle_ref: "8".to_string(),
                    cluster_job_id: "8".to_string(),
                    at: T0 + 2 * HOUR,
                    route_json: None,
                },
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    assert_eq!((missing.linked, missing.unrecorded), (0, vec![999]));
    let j2_row = ledger.api_job(j2).await.unwrap().unwrap();
    assert_eq!(j2_row.cluster_job_id.as_deref(), Some("8"));
    assert_eq!(j2_row.updated_at, T0 + 2 * HOUR);
}

/// A job that holds nothing (an estimate of 0) is settled by the posting of the record that
/// ends it, in the same transaction, as a hold is: found by the id its usage carries (a
/// dstack submission's beside the run name), not by an older job's record under that id, not
/// by a requeue nor by a node failure after which Slurm may run it again.
#[tokio::test]
async fn the_record_that_ends_a_free_job_settles_it_as_it_is_posted() {
    let (_dir, ledger) = setup().await;
    let out = ledger
        .admit(
            &(1..=4)
                .map(|n| admission(n, "physics", 0, None))
                .collect::<Vec<_>>(),
            T0 + HOUR,
        )
        .await
        .unwrap();
    let jobs: Vec<i64> = out.iter().map(|o| admitted(o).0).collect();
    let forwarded = |job: i64, settle_ref: &str, cluster_job_id: &str| ForwardedJob {
        job,
        hold: None,
        settle_ref: settle_ref.to_string(),
        cluster_job_id: cluster_job_id.to_string(),
        at: T0 + HOUR,
        route_json: None,
    };
    ledger
        .admit_recording(
            &[],
            &[
                forwarded(jobs[0], "6", "6"),
                forwarded(jobs[1], "submission-7", "run-7"),
                forwarded(jobs[2], "8", "8"),
                forwarded(jobs[3], "9", "9"),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    let ended = |job_id: &str, state: &str| bursar_ledger::UsageCharge {
        state: state.to_string(),
        amount_micros: 0,
        ..submitted(T0 + HOUR, record(job_id, "r1", "physics", 0, T0 + 2 * HOUR))
    };
    ledger
        .post_usage(
            &[
                ended("6", "COMPLETED"),
                ended("submission-7", "FAILED"),
                ended("8", "NODE_FAIL"),
                // Job 9's record is an older job's, submitted a day before.
                submitted(T0 - DAY, ended("9", "COMPLETED")),
            ],
            T0 + 3 * HOUR,
        )
        .await
        .unwrap();
    let state = |id: i64| {
        let ledger = &ledger;
        async move {
            let job = ledger.api_job(id).await.unwrap().unwrap();
            (job.state, job.updated_at)
        }
    };
    assert_eq!(state(jobs[0]).await, ("settled".into(), T0 + 3 * HOUR));
    assert_eq!(state(jobs[1]).await, ("settled".into(), T0 + 3 * HOUR));
    assert_eq!(state(jobs[2]).await.0, "held");
    assert_eq!(state(jobs[3]).await.0, "held");
    let confirm: Vec<i64> = ledger
        .free_jobs_to_confirm()
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(confirm, [jobs[2]]);
    // Job 8 will not run again: settled, once.
    assert!(ledger
        .settle_free_job(jobs[2], T0 + 4 * HOUR)
        .await
        .unwrap());
    assert!(!ledger
        .settle_free_job(jobs[2], T0 + 5 * HOUR)
        .await
        .unwrap());
    assert_eq!(state(jobs[2]).await, ("settled".into(), T0 + 4 * HOUR));
    assert!(ledger.free_jobs_to_confirm().await.unwrap().is_empty());
    // Job 9's own record settles it.
    ledger
        .post_usage(&[ended("9", "COMPLETED")], T0 + 6 * HOUR)
        .await
        .unwrap();
    assert_eq!(state(jobs[3]).await, ("settled".into(), T0 + 6 * HOUR));
}

#[tokio::test]
async fn forwarded_jobs_ride_in_the_next_batch() {
    let (_dir, ledger) = setup().await;
    let first = ledger
        .admit(&[admission(1, "physics", 30, Some("k1"))], T0 + HOUR)
        .await
        .unwrap();
    let (j1, h1) = admitted(&first[0]);
    // The next batch records j1 as forwarded, admits a new job, and answers a retry of j1's
    // key with j1 as that same transaction leaves it.
    let done = ledger
        .admit_recording(
            &[
                admission(2, "physics", 20, None),
                admission(3, "physics", 10, Some("k1")),
            ],
            &[ForwardedJob {
                job: j1,
                hold: h1,
                settle_ref: "41".to_string(),
                cluster_job_id: "41".to_string(),
                at: T0 + HOUR + 1,
                route_json: None,
            }],
            T0 + HOUR + 1,
        )
        .await
        .unwrap();
    assert_eq!((done.linked, done.unrecorded.len()), (1, 0));
    let (j2, h2) = admitted(&done.outcomes[0]);
    assert_ne!(j2, j1);
    assert!(h2.is_some());
    match &done.outcomes[1] {
        Ok(AdmitOutcome::Existing(job)) => {
            assert_eq!(job.id, j1);
            assert_eq!(job.cluster_job_id.as_deref(), Some("41"));
        }
        other => panic!("expected the existing job, got {other:?}"),
    }
    // What the transaction wrote: j1's hold linked and its cluster job id noted, j2 held.
    let j1_row = ledger.api_job(j1).await.unwrap().unwrap();
    assert_eq!(j1_row.cluster_job_id.as_deref(), Some("41"));
    let holds = ledger.holds(true).await.unwrap();
    let linked: Vec<_> = holds.iter().map(|h| (h.id, h.job_ref.clone())).collect();
    assert!(
        linked.contains(&(h1.unwrap(), Some("41".to_string()))),
        "{linked:?}"
    );
    assert!(linked.contains(&(h2.unwrap(), None)), "{linked:?}");
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 50 * UNIT);
}

#[tokio::test]
async fn the_admission_view_reads_what_the_balances_say() {
    let (_dir, ledger) = setup().await;
    ledger
        .admit(&[admission(1, "physics", 30, None)], T0 + HOUR)
        .await
        .unwrap();
    // Default account, association, chain and allocations of physics.
    let view = ledger
        .admission_view("alice", None, T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(view.account.as_deref(), Some("physics"));
    assert!(view.associated);
    assert_eq!(view.chain, ["physics", "org", "root"]);
    let balances = ledger.balances(T0 + HOUR).await.unwrap();
    for row in &view.allocations {
        let same = balances
            .iter()
            .find(|b| b.account == row.account && b.currency == row.currency)
            .unwrap();
        assert_eq!(row, same);
    }
    assert_eq!(view.allocations.len(), 2);
    assert_eq!(view.allocations[0].available, Some(50 * UNIT));
    // Another account: not associated; an unknown one: no chain; outside the period: none.
    let other = ledger
        .admission_view("alice", Some("chemistry"), T0 + HOUR)
        .await
        .unwrap();
    assert!(!other.associated);
    assert_eq!(other.chain, ["chemistry", "org", "root"]);
    assert_eq!(other.allocations.len(), 1);
    let unknown = ledger
        .admission_view("bob", Some("nope"), T0)
        .await
        .unwrap();
    assert_eq!(unknown.account.as_deref(), Some("nope"));
    assert!(!unknown.associated && unknown.chain.is_empty());
    let nobody = ledger.admission_view("bob", None, T0).await.unwrap();
    assert_eq!(nobody.account, None);
    let later = ledger
        .admission_view("alice", None, T0 + 31 * DAY)
        .await
        .unwrap();
    assert!(later.allocations.is_empty());
}

#[tokio::test]
async fn the_cached_view_follows_writes_here_and_in_other_processes() {
    let (dir, ledger) = setup().await;
    let remaining = |view: &bursar_ledger::AdmissionView| {
        view.allocations
            .iter()
            .map(|b| (b.account.clone(), b.remaining.unwrap()))
            .collect::<Vec<_>>()
    };
    let first = ledger
        .admission_view_as("alice", None, T0 + HOUR, ViewRead::Preview)
        .await
        .unwrap();
    assert_eq!(
        remaining(&first),
        [
            ("physics".to_string(), 80 * UNIT),
            ("org".to_string(), 100 * UNIT)
        ]
    );
    // A write through this ledger is seen by the next read.
    ledger
        .admit(&[admission(1, "physics", 30, None)], T0 + HOUR)
        .await
        .unwrap();
    let after = ledger
        .admission_view_as("alice", None, T0 + HOUR, ViewRead::Preview)
        .await
        .unwrap();
    assert_eq!(after.allocations[0].remaining, Some(50 * UNIT));

    // Another process on the same file: seen by the next read.
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let other = Ledger::open(&url).await.unwrap();
    other
        .set_allocation("physics", &su(), 200 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    let seen = ledger
        .admission_view_as("alice", None, T0 + HOUR, ViewRead::Preview)
        .await
        .unwrap();
    assert_eq!(seen.allocations[0].remaining, Some(170 * UNIT));
    // The uncached read always agrees.
    assert_eq!(
        ledger
            .admission_view("alice", None, T0 + HOUR)
            .await
            .unwrap(),
        seen
    );
}

#[tokio::test]
async fn a_checkpoint_moves_committed_data_into_the_database_file() {
    let (dir, ledger) = setup().await;
    ledger
        .admit(&[admission(1, "physics", 30, None)], T0 + HOUR)
        .await
        .unwrap();
    ledger.checkpoint().await.unwrap();
    // Writes go on after the writer stopped checkpointing by itself, and are moved too.
    ledger
        .admit(&[admission(2, "physics", 10, None)], T0 + HOUR)
        .await
        .unwrap();
    ledger.checkpoint().await.unwrap();
    // The database file alone (no write-ahead log beside it) has both holds.
    let copy = dir.path().join("copy.db");
    std::fs::copy(dir.path().join("ledger.db"), &copy).unwrap();
    let alone = Ledger::open(&format!("sqlite://{}", copy.display()))
        .await
        .unwrap();
    let b = &alone.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 40 * UNIT);
    assert!(alone.verify().await.unwrap().is_empty());
}

/// After a checkpoint the next write starts the WAL over from its beginning, keeping the file
/// (up to `journal_size_limit`, 512 MiB): the next round writes over it instead of growing a
/// new one.
#[tokio::test]
async fn a_checkpoint_after_a_large_write_lets_the_wal_start_over() {
    use sqlx::{Connection, Executor};
    let (dir, ledger) = setup().await;
    // The checkpointer from now on: the writer stops checkpointing at commit.
    ledger.checkpoint().await.unwrap();
    let wal = dir.path().join("ledger.db-wal");
    // Another connection writes 18,000 pages (about 72 MiB) of WAL without checkpointing.
    let url = format!(
        "sqlite://{}?mode=rw",
        dir.path().join("ledger.db").display()
    );
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    other
        .execute(
            "pragma wal_autocheckpoint = 0;
             create table pad (b blob);
             with recursive n (i) as (select 1 union all select i + 1 from n where i < 18000)
             insert into pad select zeroblob(4000) from n;",
        )
        .await
        .unwrap();
    other.close().await.unwrap();
    let grown = std::fs::metadata(&wal).unwrap().len();
    assert!(grown > 64 << 20, "the WAL holds {grown} bytes");

    ledger.checkpoint().await.unwrap();
    // The next write starts the WAL over: its frames are the only ones in it, in a file of
    // the same size.
    ledger
        .admit(&[admission(1, "physics", 30, None)], T0 + HOUR)
        .await
        .unwrap();
    let after = std::fs::metadata(&wal).unwrap().len();
    assert_eq!(after, grown, "the WAL file keeps its size");
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let (_busy, frames, _copied): (i64, i64, i64) =
        sqlx::query_as("pragma wal_checkpoint(passive)")
            .fetch_one(&mut other)
            .await
            .unwrap();
    assert!(
        (1..100).contains(&frames),
        "the WAL holds {frames} frames: it did not start over"
    );
    other.close().await.unwrap();
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 30 * UNIT);
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn closed_accounts_and_accounts_under_them_are_refused() {
    let (_dir, ledger) = setup().await;
    ledger
        .ensure_account("theory", Some("physics"))
        .await
        .unwrap();
    ledger.close_account("physics", T0).await.unwrap();
    let out = ledger
        .admit(
            &[
                admission(1, "physics", 1, None),
                admission(2, "theory", 1, None),
                admission(3, "chemistry", 1, None),
                // a job that holds nothing (an estimate of 0) is refused all the same
                admission(4, "theory", 0, None),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    match &out[3] {
        Err(LedgerError::AccountClosed { account, closed_by }) => assert_eq!(
            (account.as_str(), closed_by.as_deref()),
            ("theory", Some("physics"))
        ),
        other => panic!("expected the free job refused, got {other:?}"),
    }
    match &out[0] {
        Err(LedgerError::AccountClosed { account, closed_by }) => {
            assert_eq!((account.as_str(), closed_by), ("physics", &None))
        }
        other => panic!("expected physics closed, got {other:?}"),
    }
    match &out[1] {
        Err(LedgerError::AccountClosed { account, closed_by }) => assert_eq!(
            (account.as_str(), closed_by.as_deref()),
            ("theory", Some("physics"))
        ),
        other => panic!("expected theory closed by physics, got {other:?}"),
    }
    admitted(&out[2]);
    assert_eq!(ledger.holds(true).await.unwrap().len(), 1);
}

/// Admissions run on a connection of their own beside the storage's other writer and other
/// processes: one that finds the database locked waits for it, then decides on what the other
/// writer left.
#[tokio::test]
async fn an_admission_waits_for_another_writer_and_decides_on_what_it_left() {
    use sqlx::{Connection, Executor};
    let (dir, ledger) = setup().await;
    let url = format!(
        "sqlite://{}?mode=rw",
        dir.path().join("ledger.db").display()
    );
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    other.execute("begin immediate").await.unwrap();
    // physics's 80 su become 35 while the admission waits.
    other
        .execute(
            "update allocations set amount = 35000000
             where account_id = (select id from accounts where name = 'physics')",
        )
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let admitting = tokio::spawn({
        let ledger = ledger.clone();
        async move {
            ledger
                .admit(
                    &[
                        admission(1, "physics", 30, None),
                        admission(2, "physics", 30, None),
                    ],
                    T0 + HOUR,
                )
                .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!admitting.is_finished(), "the admission did not wait");
    other.execute("commit").await.unwrap();
    let out = admitting.await.unwrap().unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    admitted(&out[0]);
    match &out[1] {
        Err(LedgerError::InsufficientAllocation {
            account, remaining, ..
        }) => {
            assert_eq!(account, "physics");
            assert_eq!(*remaining, 5 * UNIT);
        }
        other => panic!("expected a refusal for money, got {other:?}"),
    }
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 30 * UNIT);
}

/// An in-memory ledger admits too (its admission writer reaches the same database), and two
/// of them are two databases.
#[tokio::test]
async fn in_memory_ledgers_admit_each_on_its_own_database() {
    let ledger = Ledger::open("sqlite::memory:").await.unwrap();
    ledger.ensure_account("physics", None).await.unwrap();
    ledger.upsert_user("alice", "physics").await.unwrap();
    ledger
        .set_allocation("physics", &su(), 40 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    let out = ledger
        .admit(
            &[
                admission(1, "physics", 30, Some("k1")),
                admission(2, "physics", 30, None),
            ],
            T0 + HOUR,
        )
        .await
        .unwrap();
    let (job, _) = admitted(&out[0]);
    assert!(matches!(
        out[1],
        Err(LedgerError::InsufficientAllocation { .. })
    ));
    // The same key again: the job recorded with it.
    let again = ledger
        .admit(&[admission(3, "physics", 30, Some("k1"))], T0 + HOUR)
        .await
        .unwrap();
    match &again[0] {
        Ok(AdmitOutcome::Existing(existing)) => assert_eq!(existing.id, job),
        other => panic!("expected the earlier job, got {other:?}"),
    }
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 30 * UNIT);
    assert!(ledger.verify().await.unwrap().is_empty());

    let second = Ledger::open("sqlite::memory:").await.unwrap();
    let out = second
        .admit(&[admission(1, "physics", 30, None)], T0 + HOUR)
        .await
        .unwrap();
    assert!(
        matches!(out[0], Err(LedgerError::NotFound { .. })),
        "{out:?}"
    );
}

/// Submissions queued one by one from many tasks are group-committed without overspending,
/// and forwarded jobs queued behind them are written before `forwarded_settled` returns.
#[tokio::test]
async fn queued_submissions_from_many_tasks_admit_exactly_what_the_allocation_covers() {
    let (_dir, ledger) = setup().await;
    // physics has 80 su under org's 100: 8 holds of 10 fit.
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let ledger = ledger.clone();
            tokio::spawn(async move {
                ledger
                    .admit_queued(
                        admission(n, "physics", 10, Some(&format!("q{n}"))),
                        T0 + HOUR,
                    )
                    .await
            })
        })
        .collect();
    let mut admitted_jobs = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(AdmitOutcome::Admitted { job, hold, .. }) => admitted_jobs.push((job.id, hold)),
            Err(LedgerError::InsufficientAllocation { remaining, .. }) => {
                assert!(remaining < 10 * UNIT)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(admitted_jobs.len(), 8);
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 80 * UNIT);
    for (i, (job, hold)) in admitted_jobs.iter().enumerate() {
        ledger
            .queue_forwarded(ForwardedJob {
                job: *job,
                hold: hold.as_ref().map(|h| h.id),
                settle_ref: format!("{}", 500 + i),
                cluster_job_id: format!("{}", 500 + i),
                at: T0 + HOUR,
                route_json: None,
            })
            .unwrap();
    }
    ledger.forwarded_settled().await;
    for (i, (job, _)) in admitted_jobs.iter().enumerate() {
        let row = ledger.api_job(*job).await.unwrap().unwrap();
        assert_eq!(row.cluster_job_id, Some(format!("{}", 500 + i)));
    }
    // A key used before gives its job back.
    let (first, _) = &admitted_jobs[0];
    let key = ledger
        .api_job(*first)
        .await
        .unwrap()
        .unwrap()
        .idempotency_key;
    let n: usize = key.as_deref().unwrap()[1..].parse().unwrap();
    match ledger
        .admit_queued(admission(n, "physics", 10, key.as_deref()), T0 + HOUR)
        .await
        .unwrap()
    {
        AdmitOutcome::Existing(job) => assert_eq!(job.id, *first),
        other => panic!("expected the earlier job, got {other:?}"),
    }
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// A forwarded job's record is written on its own, without any reader asking for it
/// (`forwarded_settled`) or a submission to ride with: handed over while the admission writer
/// sleeps, writes, or lingers, from one task and from many at once. A lost wake-up would leave
/// a record unwritten and this waiting for it.
#[tokio::test]
async fn forwarded_jobs_are_written_unasked_whenever_they_are_handed_over() {
    let (_dir, ledger) = setup().await;
    // Jobs without holds (estimate 0), so that any number fits.
    let mut jobs = Vec::new();
    for n in 0..240 {
        match ledger
            .admit_queued(admission(n, "physics", 0, None), T0 + HOUR)
            .await
            .unwrap()
        {
            AdmitOutcome::Admitted { job, .. } => jobs.push(job.id),
            other => panic!("unexpected {other:?}"),
        }
    }
    let record = |job: i64| ForwardedJob {
        job,
        hold: None,
        settle_ref: format!("c{job}"),
        cluster_job_id: format!("c{job}"),
        at: T0 + HOUR,
        route_json: None,
    };
    // Written within a few milliseconds; the deadline only bounds a hang on a busy machine.
    let written = |ledger: Ledger, job: i64| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let row = ledger.api_job(job).await.unwrap().unwrap();
            if row.cluster_job_id.is_some() {
                return row.cluster_job_id;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        None
    };
    // One at a time, each handed over at a different point of the writer's linger.
    for (i, &job) in jobs[..40].iter().enumerate() {
        ledger.queue_forwarded(record(job)).unwrap();
        if i % 3 == 0 {
            tokio::time::sleep(std::time::Duration::from_micros(700 * (i as u64 % 9))).await;
        }
        if i % 2 == 0 {
            assert_eq!(
                written(ledger.clone(), job).await,
                Some(format!("c{job}")),
                "job {job} (the {i}th) was not written"
            );
        }
    }
    // Eight tasks at once.
    let tasks: Vec<_> = jobs[40..]
        .chunks(25)
        .map(|chunk| {
            let (ledger, chunk) = (ledger.clone(), chunk.to_vec());
            tokio::spawn(async move {
                for (i, job) in chunk.into_iter().enumerate() {
                    ledger.queue_forwarded(record(job)).unwrap();
                    if i % 4 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for &job in &jobs {
        assert_eq!(
            written(ledger.clone(), job).await,
            Some(format!("c{job}")),
            "job {job} was not written"
        );
    }
}
