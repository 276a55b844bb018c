//! Admin operations: closing accounts, moving them, associations, renewals, transfers and
//! refunds — caps, cycles, idempotency, and what a closed account refuses.

mod common;

use bursar_ledger::calendar::{days_from_civil, SECONDS_PER_DAY};
use bursar_ledger::{
    EntryKind, JournalEntry, JournalQuery, Ledger, LedgerError, NewEntry, NewHold, RefundRequest,
    RenewPeriod, RenewRequest, TransferRequest,
};
use common::{record, su, temp_ledger, usd, DAY, HOUR, T0, UNIT};

fn hold(key: &str, account: &str, units: i64) -> NewHold {
    NewHold {
        account: account.to_string(),
        currency: su(),
        amount: units * UNIT,
        cluster: "alpha".to_string(),
        job_ref: None,
        placed_at: T0 + HOUR,
        expires_at: T0 + DAY,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    }
}

/// org → physics → theory, and org → chemistry; 100 su for physics and chemistry in January.
async fn setup() -> (tempfile::TempDir, Ledger) {
    let (dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    ledger
        .ensure_account("theory", Some("physics"))
        .await
        .unwrap();
    ledger
        .ensure_account("chemistry", Some("org"))
        .await
        .unwrap();
    for account in ["physics", "chemistry"] {
        ledger
            .set_allocation(account, &su(), 100 * UNIT, T0, T0 + 31 * DAY)
            .await
            .unwrap();
    }
    (dir, ledger)
}

fn alloc_of<'a>(
    rows: &'a [bursar_ledger::AllocationRow],
    account: &str,
    start: i64,
) -> &'a bursar_ledger::AllocationRow {
    rows.iter()
        .find(|a| a.account == account && a.start == start)
        .unwrap_or_else(|| panic!("no allocation of {account} at {start}"))
}

#[tokio::test]
async fn moving_refuses_cycles_and_closed_parents() {
    let (_dir, ledger) = setup().await;
    let err = ledger
        .set_parent("physics", Some("theory"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Conflict(ref m) if m.contains("cycle")),
        "{err}"
    );
    let err = ledger
        .set_parent("physics", Some("physics"))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Conflict(_)), "{err}");
    ledger
        .set_parent("theory", Some("chemistry"))
        .await
        .unwrap();
    let ancestors = ledger.ancestors_or_self("theory").await.unwrap();
    assert_eq!(ancestors, ["theory", "chemistry", "org", "root"]);

    ledger.close_account("physics", T0).await.unwrap();
    let err = ledger
        .set_parent("theory", Some("physics"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LedgerError::AccountClosed {
            account: "physics".to_string(),
            closed_by: None
        }
    );
    let err = ledger
        .ensure_account("optics", Some("physics"))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
}

#[tokio::test]
async fn closing_refuses_active_holds_then_refuses_holds_and_allocations_but_charges_usage() {
    let (_dir, ledger) = setup().await;
    let h = ledger
        .try_place_hold(&hold("h1", "theory", 10))
        .await
        .unwrap();
    let err = ledger
        .close_account("physics", T0 + 2 * HOUR)
        .await
        .unwrap_err();
    match &err {
        LedgerError::Conflict(m) => {
            assert!(m.contains("1 active hold") && m.contains("theory"), "{m}")
        }
        other => panic!("{other}"),
    }
    ledger
        .release_hold(h.id, "cancelled", T0 + 2 * HOUR)
        .await
        .unwrap();
    assert!(ledger
        .close_account("physics", T0 + 3 * HOUR)
        .await
        .unwrap());
    assert!(
        !ledger
            .close_account("physics", T0 + 4 * HOUR)
            .await
            .unwrap(),
        "idempotent"
    );
    let accounts = ledger.accounts().await.unwrap();
    let physics = accounts.iter().find(|a| a.name == "physics").unwrap();
    assert_eq!(physics.closed_at, Some(T0 + 3 * HOUR));

    // Holds on the account and its subtree are refused, checked or not.
    let err = ledger
        .try_place_hold(&hold("h2", "theory", 1))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LedgerError::AccountClosed {
            account: "theory".to_string(),
            closed_by: Some("physics".to_string())
        }
    );
    let err = ledger
        .place_hold(&hold("h3", "physics", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
    // No new allocation nor a larger one; a smaller one is fine (money taken back).
    let err = ledger
        .set_allocation("physics", &su(), 100 * UNIT, T0 + 31 * DAY, T0 + 59 * DAY)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
    let err = ledger
        .set_allocation("physics", &su(), 120 * UNIT, T0, T0 + 31 * DAY)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
    ledger
        .set_allocation("physics", &su(), 90 * UNIT, T0, T0 + 31 * DAY)
        .await
        .unwrap();
    // No deposit in, no new association.
    let deposit = NewEntry {
        kind: EntryKind::Deposit,
        account: "physics".to_string(),
        currency: su(),
        amount: UNIT,
        effective_at: T0 + DAY,
        idempotency_key: "dep-1".to_string(),
        note: None,
    };
    let err = ledger.post_entry(&deposit).await.unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
    ledger.upsert_user("bob", "chemistry").await.unwrap();
    let err = ledger.associate("bob", "theory").await.unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");

    // Usage that still arrives is charged, never lost.
    let out = ledger
        .post_usage(
            &[record("7", "r1", "theory", 12, T0 + 5 * HOUR)],
            T0 + 6 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(out.charged, 1);
    let allocs = ledger.allocations().await.unwrap();
    let p = alloc_of(&allocs, "physics", T0);
    assert_eq!(
        (p.amount, p.charged, p.remaining),
        (90 * UNIT, 12 * UNIT, 78 * UNIT)
    );
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn associations_are_removed_but_not_the_default() {
    let (_dir, ledger) = setup().await;
    ledger.upsert_user("alice", "physics").await.unwrap();
    assert!(ledger.associate("alice", "chemistry").await.unwrap());
    let err = ledger.dissociate("alice", "physics").await.unwrap_err();
    assert!(
        matches!(err, LedgerError::Conflict(ref m) if m.contains("default")),
        "{err}"
    );
    assert!(ledger.dissociate("alice", "chemistry").await.unwrap());
    assert!(
        !ledger.dissociate("alice", "chemistry").await.unwrap(),
        "idempotent"
    );
    // A new default, then the old one can go.
    ledger.upsert_user("alice", "chemistry").await.unwrap();
    assert!(ledger.dissociate("alice", "physics").await.unwrap());
    let assoc: Vec<_> = ledger
        .associations()
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.user, a.account))
        .collect();
    assert_eq!(assoc, [("alice".to_string(), "chemistry".to_string())]);
    let err = ledger.dissociate("nobody", "physics").await.unwrap_err();
    assert!(
        matches!(err, LedgerError::NotFound { what: "user", .. }),
        "{err}"
    );
}

#[tokio::test]
async fn renewals_follow_the_calendar_and_are_idempotent() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let day = |y, m, d| days_from_civil(y, m, d) * SECONDS_PER_DAY;
    ledger
        .set_allocation(
            "physics",
            &usd(),
            5_000 * UNIT,
            day(2026, 1, 1),
            day(2026, 2, 1),
        )
        .await
        .unwrap();
    let req = RenewRequest {
        account: "physics".to_string(),
        currency: usd(),
        at: day(2026, 1, 15),
        amount: None,
        period: None,
    };
    let r = ledger.renew_allocation(&req).await.unwrap();
    assert!(r.created);
    assert_eq!(
        (r.next.start, r.next.end),
        (day(2026, 2, 1), day(2026, 3, 1))
    );
    assert_eq!(r.next.amount, 5_000 * UNIT);
    // Again: nothing changes.
    let again = ledger.renew_allocation(&req).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.next.id, r.next.id);
    assert_eq!(ledger.allocations().await.unwrap().len(), 2);
    // A different amount for an existing renewal is a conflict.
    let err = ledger
        .renew_allocation(&RenewRequest {
            amount: Some(1),
            ..req.clone()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Conflict(ref m) if m.contains("renewed already")),
        "{err}"
    );
    // From February, a quarter with another amount.
    let q = ledger
        .renew_allocation(&RenewRequest {
            at: day(2026, 2, 10),
            amount: Some(12_000 * UNIT),
            period: Some(RenewPeriod::Quarter),
            ..req.clone()
        })
        .await
        .unwrap();
    assert_eq!(
        (q.next.start, q.next.end),
        (day(2026, 3, 1), day(2026, 6, 1))
    );
    assert_eq!(q.next.amount, 12_000 * UNIT);
    // The quarter renews as a quarter.
    let q2 = ledger
        .renew_allocation(&RenewRequest {
            at: day(2026, 4, 1),
            ..req.clone()
        })
        .await
        .unwrap();
    assert_eq!(
        (q2.next.start, q2.next.end),
        (day(2026, 6, 1), day(2026, 9, 1))
    );
    assert_eq!(q2.next.amount, 12_000 * UNIT);
    // Nothing covers December 2025.
    let err = ledger
        .renew_allocation(&RenewRequest {
            at: day(2025, 12, 1),
            ..req
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::NotFound {
                what: "allocation",
                ..
            }
        ),
        "{err}"
    );
}

fn transfer(key: &str, from: &str, to: &str, units: i64) -> TransferRequest {
    TransferRequest {
        from: from.to_string(),
        to: to.to_string(),
        currency: su(),
        amount: units * UNIT,
        at: T0 + DAY,
        idempotency_key: key.to_string(),
        note: Some("rebalance".to_string()),
    }
}

#[tokio::test]
async fn transfers_move_money_once_and_never_below_remaining() {
    let (_dir, ledger) = setup().await;
    ledger
        .post_usage(&[record("1", "r1", "physics", 30, T0 + HOUR)], T0 + HOUR)
        .await
        .unwrap();
    ledger
        .try_place_hold(&hold("h1", "physics", 20))
        .await
        .unwrap();
    // physics: 100 allocated − 30 charged − 20 held = 50 remaining.
    let err = ledger
        .transfer(&transfer("t-big", "physics", "chemistry", 51))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LedgerError::InsufficientRemaining {
            account: "physics".to_string(),
            currency: su(),
            amount: 51 * UNIT,
            remaining: 50 * UNIT
        }
    );
    assert!(err.to_string().contains("has 50 su remaining"), "{err}");
    let out = ledger
        .transfer(&transfer("t-1", "physics", "chemistry", 50))
        .await
        .unwrap();
    assert!(out.posted);
    assert_eq!((out.from.amount, out.from.remaining), (50 * UNIT, 0));
    assert_eq!((out.to.amount, out.to.remaining), (150 * UNIT, 150 * UNIT));
    // A retry is a no-op.
    let again = ledger
        .transfer(&transfer("t-1", "physics", "chemistry", 50))
        .await
        .unwrap();
    assert!(!again.posted);
    assert_eq!(again.from.amount, 50 * UNIT);
    let err = ledger
        .transfer(&transfer("t-1", "physics", "chemistry", 5))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Conflict(_)), "{err}");
    // Both entries are deposits in the journal, keyed.
    let entries = ledger.journal(&JournalQuery::default()).await.unwrap();
    let t: Vec<_> = entries
        .iter()
        .filter(|e| e.idempotency_key.starts_with("t-1:"))
        .map(|e| (e.kind, e.account.as_str(), e.amount))
        .collect();
    assert_eq!(
        t,
        [
            (EntryKind::Deposit, "physics", -50 * UNIT),
            (EntryKind::Deposit, "chemistry", 50 * UNIT)
        ]
    );
    // Into a closed account: refused; out of it: fine.
    ledger
        .close_account("chemistry", T0 + 2 * DAY)
        .await
        .unwrap();
    let err = ledger
        .transfer(&transfer("t-2", "physics", "chemistry", 0).clone())
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Invalid(_)), "{err}");
    let err = ledger
        .transfer(&transfer("t-3", "org", "chemistry", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::NotFound {
                what: "allocation",
                ..
            }
        ),
        "{err}"
    );
    ledger
        .set_allocation("physics", &su(), 50 * UNIT, T0, T0 + 31 * DAY)
        .await
        .unwrap();
    let back = ledger
        .transfer(&transfer("t-4", "chemistry", "physics", 10))
        .await
        .unwrap();
    assert_eq!(back.to.amount, 60 * UNIT);
    let err = ledger
        .transfer(&transfer("t-5", "physics", "chemistry", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::AccountClosed { .. }), "{err}");
    assert!(ledger.verify().await.unwrap().is_empty());
}

fn refund(key: &str, job: &str, units: Option<i64>) -> RefundRequest {
    RefundRequest {
        cluster: None,
        job_id: job.to_string(),
        amount: units.map(|u| u * UNIT),
        idempotency_key: key.to_string(),
        note: Some("node trouble".to_string()),
    }
}

#[tokio::test]
async fn refunds_are_capped_at_the_charge_and_name_the_job() {
    let (_dir, ledger) = setup().await;
    ledger
        .post_usage(
            &[
                record("41", "r1", "theory", 30, T0 + HOUR),
                record("42", "r1", "physics", 5, T0 + HOUR),
            ],
            T0 + 2 * HOUR,
        )
        .await
        .unwrap();
    let first = ledger
        .refund_job(&refund("rf-1", "41", Some(10)))
        .await
        .unwrap();
    assert!(first.posted);
    assert_eq!(
        (first.amount, first.charged, first.refunded),
        (10 * UNIT, 30 * UNIT, 10 * UNIT)
    );
    assert_eq!(first.job.account, "theory");
    // Above what is left: refused, with the figures.
    let err = ledger
        .refund_job(&refund("rf-2", "41", Some(21)))
        .await
        .unwrap_err();
    match &err {
        LedgerError::Conflict(m) => assert!(
            m.contains("charged 30 su")
                && m.contains("10 su has been refunded")
                && m.contains("at most 20 su")
                && m.contains("not 21 su"),
            "{m}"
        ),
        other => panic!("{other}"),
    }
    // A retry of the first is a no-op.
    let again = ledger
        .refund_job(&refund("rf-1", "41", Some(10)))
        .await
        .unwrap();
    assert!(!again.posted);
    assert_eq!(again.entry_id, first.entry_id);
    // The default refunds what is left; then nothing is left.
    let rest = ledger
        .refund_job(&RefundRequest {
            cluster: Some("alpha".to_string()),
            ..refund("rf-3", "41", None)
        })
        .await
        .unwrap();
    assert_eq!((rest.amount, rest.refunded), (20 * UNIT, 30 * UNIT));
    let err = ledger
        .refund_job(&refund("rf-4", "41", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Conflict(ref m) if m.contains("nothing is left")),
        "{err}"
    );
    let err = ledger
        .refund_job(&RefundRequest {
            cluster: Some("beta".to_string()),
            ..refund("rf-5", "42", None)
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::NotFound { what: "job", .. }),
        "{err}"
    );

    // The refunds are listed with the job, in the job's period, with its user and cluster.
    let entries = ledger
        .journal(&JournalQuery {
            job_id: Some("41".to_string()),
            ..JournalQuery::default()
        })
        .await
        .unwrap();
    let kinds: Vec<_> = entries.iter().map(|e| (e.kind, e.amount)).collect();
    assert_eq!(
        kinds,
        [
            (EntryKind::Charge, 30 * UNIT),
            (EntryKind::Refund, -10 * UNIT),
            (EntryKind::Refund, -20 * UNIT)
        ]
    );
    let r = &entries[1];
    assert_eq!(
        (r.job_id.as_deref(), r.cluster.as_deref(), r.user.as_deref()),
        (Some("41"), Some("alpha"), Some("alice"))
    );
    assert_eq!(r.effective_at, T0 + HOUR);
    assert_eq!(r.note.as_deref(), Some("node trouble"));
    // The allocation of physics (theory's parent) got the 30 back.
    let allocs = ledger.allocations().await.unwrap();
    let p = alloc_of(&allocs, "physics", T0);
    assert_eq!((p.charged, p.remaining), (5 * UNIT, 95 * UNIT));
    // Rollup and journal agree.
    let day = ledger
        .usage_report(T0, T0 + DAY, &[bursar_ledger::GroupKey::User])
        .await
        .unwrap();
    assert_eq!(day.totals, [(su(), 5 * UNIT)]);
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// Jobs 41 and 42 on alpha and 41 on beta; then a new revision of alpha's 41, a refund for it,
/// and a hold (not a job's entry).
async fn post_job_history(ledger: &Ledger) {
    let on = |cluster: &str, mut r: bursar_ledger::UsageCharge| {
        r.cluster = cluster.to_string();
        r
    };
    ledger
        .post_usage(
            &[
                record("41", "r1", "theory", 30, T0 + HOUR),
                record("42", "r1", "physics", 5, T0 + HOUR),
                on("beta", record("41", "r1", "chemistry", 7, T0 + HOUR)),
            ],
            T0 + 2 * HOUR,
        )
        .await
        .unwrap();
    ledger
        .post_usage(
            &[record("41", "r2", "theory", 36, T0 + HOUR)],
            T0 + 3 * HOUR,
        )
        .await
        .unwrap();
    ledger
        .refund_job(&RefundRequest {
            cluster: Some("alpha".to_string()),
            ..refund("rf-1", "41", Some(6))
        })
        .await
        .unwrap();
    ledger
        .try_place_hold(&hold("h-42", "physics", 2))
        .await
        .unwrap();
}

/// `jobs_journal` reads, for many jobs at once, what the journal lists for each of them: its
/// charge, the adjustments of its new revisions and the refunds given for it, on its own
/// cluster only, each entry once.
#[tokio::test]
async fn the_journal_of_many_jobs_is_read_at_once_as_each_jobs_listing_has_it() {
    let (_dir, ledger) = setup().await;
    post_job_history(&ledger).await;

    let pair = |c: &str, j: &str| (c.to_string(), j.to_string());
    let asked = [
        pair("alpha", "41"),
        pair("alpha", "42"),
        pair("beta", "41"),
        pair("alpha", "43"),
        pair("gamma", "41"),
        pair("alpha", "41"),
    ];
    let read = ledger.jobs_journal(&asked).await.unwrap();
    let ids: Vec<i64> = read.iter().map(|e| e.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(ids, sorted, "each entry once, in posting order");
    let mut expected = Vec::new();
    for (cluster, job) in [("alpha", "41"), ("alpha", "42"), ("beta", "41")] {
        let listed = ledger
            .journal(&JournalQuery {
                cluster: Some(cluster.to_string()),
                job_id: Some(job.to_string()),
                ..JournalQuery::default()
            })
            .await
            .unwrap();
        assert!(!listed.is_empty(), "{cluster} {job}");
        expected.extend(listed);
    }
    expected.sort_by_key(|e| e.id);
    assert_eq!(read, expected);
    let usage = |cluster: &str, job: &str| -> i64 {
        read.iter()
            .filter(|e| e.cluster.as_deref() == Some(cluster) && e.job_id.as_deref() == Some(job))
            .filter(|e| e.kind.is_usage())
            .map(|e| e.amount)
            .sum()
    };
    assert_eq!(
        (
            usage("alpha", "41"),
            usage("alpha", "42"),
            usage("beta", "41")
        ),
        (30 * UNIT, 5 * UNIT, 7 * UNIT)
    );
    assert!(read
        .iter()
        .any(|e| e.kind == EntryKind::Refund && e.job_id.as_deref() == Some("41")));
    assert!(ledger.jobs_journal(&[]).await.unwrap().is_empty());
}

/// `jobs_journal_page` reads every job a cluster (or the ledger) charged, a few jobs at a time:
/// together the pages hold exactly the entries the journal lists for jobs (charges, new
/// revisions, refunds), each once, each job's on one page, the jobs in the order they were
/// first posted.
#[tokio::test]
async fn the_journal_of_every_job_is_read_a_page_of_jobs_at_a_time() {
    let (_dir, ledger) = setup().await;
    post_job_history(&ledger).await;
    // Job 43, first posted after 41's new revision, and 44 on beta.
    let mut beta = record("44", "r1", "chemistry", 2, T0 + HOUR);
    beta.cluster = "beta".to_string();
    ledger
        .post_usage(
            &[record("43", "r1", "physics", 1, T0 + HOUR), beta],
            T0 + 4 * HOUR,
        )
        .await
        .unwrap();

    // The jobs (cluster, job id) in the order their entries first appear.
    let jobs_of = |entries: &[JournalEntry]| {
        let mut jobs: Vec<(String, String)> = Vec::new();
        for e in entries {
            let job = (e.cluster.clone().unwrap(), e.job_id.clone().unwrap());
            if !jobs.contains(&job) {
                jobs.push(job);
            }
        }
        jobs
    };
    for (cluster, limit) in [
        (None, 1),
        (None, 2),
        (None, 10),
        (Some("alpha"), 2),
        (Some("beta"), 5),
        (Some("gamma"), 3),
    ] {
        let mut pages = Vec::new();
        let mut after = 0;
        loop {
            let (entries, last) = ledger
                .jobs_journal_page(cluster, after, limit)
                .await
                .unwrap();
            let Some(last) = last else {
                assert!(entries.is_empty());
                break;
            };
            assert!(last > after);
            after = last;
            pages.push(entries);
        }
        let mut expected = ledger
            .journal(&JournalQuery {
                cluster: cluster.map(str::to_string),
                ..JournalQuery::default()
            })
            .await
            .unwrap();
        expected.retain(|e| e.job_id.is_some());
        let read: Vec<JournalEntry> = pages.concat();
        let mut by_id = read.clone();
        by_id.sort_by_key(|e| e.id);
        assert_eq!(by_id, expected, "{cluster:?} by {limit}");
        assert_eq!(jobs_of(&read), jobs_of(&expected), "{cluster:?} by {limit}");
        let per_page: Vec<_> = pages.iter().map(|p| jobs_of(p)).collect();
        assert_eq!(
            per_page.concat(),
            jobs_of(&expected),
            "{cluster:?} by {limit}: each job on one page"
        );
        assert!(per_page.iter().all(|jobs| jobs.len() <= limit as usize));
    }
    assert!(ledger.jobs_journal_page(None, 0, 0).await.is_err());
}

#[tokio::test]
async fn an_ambiguous_job_id_needs_its_cluster() {
    let (_dir, ledger) = setup().await;
    let mut other = record("9", "r1", "physics", 4, T0 + HOUR);
    other.cluster = "beta".to_string();
    ledger
        .post_usage(
            &[record("9", "r1", "physics", 3, T0 + HOUR), other],
            T0 + HOUR,
        )
        .await
        .unwrap();
    let err = ledger
        .refund_job(&refund("a-1", "9", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Conflict(ref m) if m.contains("ambiguous") && m.contains("alpha:9") && m.contains("beta:9")),
        "{err}"
    );
    let out = ledger
        .refund_job(&RefundRequest {
            cluster: Some("beta".to_string()),
            ..refund("a-1", "9", None)
        })
        .await
        .unwrap();
    assert_eq!(out.amount, 4 * UNIT);
}
