//! Posting job records: idempotency, adjustments, reversals, unknown accounts.

mod common;

use bursar_ledger::{EntryKind, JournalQuery, Ledger, LedgerError};
use common::{record, running, temp_ledger, DAY, HOUR, T0, UNIT};

async fn entries(ledger: &Ledger, job: &str) -> Vec<(EntryKind, String, i64, i64)> {
    let query = JournalQuery {
        job_id: Some(job.to_string()),
        ..JournalQuery::default()
    };
    ledger
        .journal(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.account, e.amount, e.job_count))
        .collect()
}

#[tokio::test]
async fn posting_twice_changes_nothing() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let batch: Vec<_> = (0..50)
        .map(|i| record(&format!("{i}"), "r1", "physics", i, T0 + HOUR))
        .collect();
    let first = ledger.post_usage(&batch, T0 + DAY).await.unwrap();
    assert_eq!(first.charged, 50);
    let journal_len = ledger
        .journal(&JournalQuery::default())
        .await
        .unwrap()
        .len();
    let balances = ledger.balances(T0).await.unwrap();
    let again = ledger.post_usage(&batch, T0 + 2 * DAY).await.unwrap();
    assert_eq!((again.charged, again.adjusted, again.unchanged), (0, 0, 50));
    assert_eq!(
        ledger
            .journal(&JournalQuery::default())
            .await
            .unwrap()
            .len(),
        journal_len
    );
    assert_eq!(ledger.balances(T0).await.unwrap(), balances);
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn running_then_completed_posts_one_adjustment_of_the_difference() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let start = T0 + 2 * HOUR;
    ledger
        .post_usage(&[running("7", "r1", "physics", 4, start)], start + HOUR)
        .await
        .unwrap();
    let out = ledger
        .post_usage(&[running("7", "r2", "physics", 9, start)], start + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(out.adjusted, 1);
    let out = ledger
        .post_usage(
            &[record("7", "r3", "physics", 12, start + 3 * HOUR)],
            start + 4 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.adjusted), (0, 1));
    assert_eq!(
        entries(&ledger, "7").await,
        [
            (EntryKind::Charge, "physics".to_string(), 4 * UNIT, 1),
            (EntryKind::Adjustment, "physics".to_string(), 5 * UNIT, 0),
            (EntryKind::Adjustment, "physics".to_string(), 3 * UNIT, 0)
        ]
    );
    let job = ledger.job("alpha", "7", T0).await.unwrap().unwrap();
    assert_eq!(
        (job.revision.as_str(), job.amount, job.is_final),
        ("r3", 12 * UNIT, true)
    );
    assert_eq!(job.state, "COMPLETED");
    assert_eq!(job.effective_at, start + 3 * HOUR);

    // Any earlier revision, in any order, is ignored now.
    let out = ledger
        .post_usage(
            &[
                running("7", "r2", "physics", 9, start),
                running("7", "r1", "physics", 4, start),
                record("7", "r3", "physics", 12, start + 3 * HOUR),
            ],
            start + 5 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!((out.adjusted, out.unchanged), (0, 3));
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_account_change_reverses_and_reposts() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    ledger.ensure_account("chem", None).await.unwrap();
    ledger
        .post_usage(&[record("8", "r1", "physics", 10, T0 + HOUR)], T0 + DAY)
        .await
        .unwrap();
    ledger
        .post_usage(&[record("8", "r2", "chem", 11, T0 + HOUR)], T0 + DAY)
        .await
        .unwrap();
    assert_eq!(
        entries(&ledger, "8").await,
        [
            (EntryKind::Charge, "physics".to_string(), 10 * UNIT, 1),
            (EntryKind::Adjustment, "physics".to_string(), -10 * UNIT, -1),
            (EntryKind::Adjustment, "chem".to_string(), 11 * UNIT, 1)
        ]
    );
    // physics nets to zero: no row left.
    assert!(ledger.balance("physics", T0).await.unwrap().is_empty());
    let chem = ledger.balance("chem", T0).await.unwrap();
    assert_eq!(chem[0].charged, 11 * UNIT);
    // Jobs follow the money in reports.
    let report = ledger
        .usage_report(T0, T0 + DAY, &[bursar_ledger::GroupKey::Account])
        .await
        .unwrap();
    let rows: Vec<(&str, i64, u64)> = report
        .rows
        .iter()
        .map(|r| (r.account.as_str(), r.amount, r.jobs))
        .collect();
    assert_eq!(rows, [("chem", 11 * UNIT, 1)]);
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_change_of_day_reverses_so_that_the_job_lands_on_its_end_day() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("physics", None).await.unwrap();
    let start = T0 + 20 * HOUR;
    ledger
        .post_usage(&[running("9", "r1", "physics", 3, start)], start)
        .await
        .unwrap();
    ledger
        .post_usage(
            &[record("9", "r2", "physics", 8, start + 6 * HOUR)],
            start + 6 * HOUR,
        )
        .await
        .unwrap();
    let kinds: Vec<i64> = entries(&ledger, "9").await.iter().map(|e| e.2).collect();
    assert_eq!(kinds, [3 * UNIT, -3 * UNIT, 8 * UNIT]);
    let day1 = ledger.usage_report(T0, T0 + DAY, &[]).await.unwrap();
    let day2 = ledger
        .usage_report(T0 + DAY, T0 + 2 * DAY, &[])
        .await
        .unwrap();
    assert!(day1.rows.is_empty());
    assert_eq!((day2.rows[0].amount, day2.rows[0].jobs), (8 * UNIT, 1));
}

#[tokio::test]
async fn unknown_accounts_are_created_under_root_and_nothing_is_lost() {
    let (_dir, ledger) = temp_ledger().await;
    let out = ledger
        .post_usage(
            &[
                record("1", "r", "zeta", 1, T0),
                record("2", "r", "alpha", 2, T0),
                record("3", "r", "zeta", 3, T0),
            ],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(out.created_accounts, ["alpha", "zeta"]);
    assert_eq!(out.charged, 3);
    let accounts = ledger.accounts().await.unwrap();
    assert!(accounts
        .iter()
        .filter(|a| a.name != "root")
        .all(|a| a.parent.as_deref() == Some("root")));
    assert_eq!(
        ledger.balance("root", T0).await.unwrap()[0].charged,
        6 * UNIT
    );
}

#[tokio::test]
async fn duplicates_inside_one_batch_are_posted_once() {
    let (_dir, ledger) = temp_ledger().await;
    let out = ledger
        .post_usage(
            &[
                record("1", "r1", "a", 1, T0),
                record("1", "r1", "a", 1, T0),
                record("1", "r2", "a", 2, T0),
                record("1", "r1", "a", 1, T0),
            ],
            T0,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.adjusted, out.unchanged), (1, 1, 2));
    assert_eq!(
        ledger.job("alpha", "1", T0).await.unwrap().unwrap().amount,
        2 * UNIT
    );
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn separators_in_ids_and_other_clusters_are_distinct_identities() {
    let (_dir, ledger) = temp_ledger().await;
    let mut a = record("1:2", "r", "a", 1, T0);
    a.cluster = "x".to_string();
    let mut b = record("1:2", "r", "a", 1, T0);
    b.cluster = "y".to_string();
    let mut c = record("1:2", "r", "a", 1, T0);
    c.submit += 1;
    let out = ledger.post_usage(&[a, b, c], T0).await.unwrap();
    assert_eq!(out.charged, 3);
}

#[tokio::test]
async fn malformed_records_are_refused_whole() {
    let (_dir, ledger) = temp_ledger().await;
    let mut bad = record("1", "r", "a", 1, T0);
    bad.amount_micros = -1;
    let good = record("2", "r", "a", 1, T0);
    assert!(matches!(
        ledger.post_usage(&[good.clone(), bad], T0).await,
        Err(LedgerError::Invalid(_))
    ));
    let mut spaced = good.clone();
    spaced.account = "two words".to_string();
    assert!(matches!(
        ledger.post_usage(&[spaced], T0).await,
        Err(LedgerError::Invalid(_))
    ));
    assert!(ledger
        .journal(&JournalQuery::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn journal_entries_carry_readable_idempotency_keys() {
    let (_dir, ledger) = temp_ledger().await;
    ledger
        .post_usage(&[record("7:1", "r1", "a", 1, T0)], T0)
        .await
        .unwrap();
    ledger
        .post_usage(&[record("7:1", "r2", "a", 2, T0)], T0)
        .await
        .unwrap();
    let keys: Vec<String> = ledger
        .journal(&JournalQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.idempotency_key)
        .collect();
    assert_eq!(
        keys,
        [
            format!("charge:alpha:7%3A1:{T0}:r1"),
            format!("adjust:alpha:7%3A1:{T0}:r2")
        ]
    );
}
