//! The conformance story: one walk through everything the ledger promises, written against the
//! public API only, so that every backend (SQLite now, PostgreSQL later) runs the same story on
//! an empty database.

use bursar_ledger::{
    EntryKind, GroupKey, HoldState, JournalQuery, Ledger, LedgerError, NewEntry, NewHold,
    QuarantineItem, ReportSource, UsageCharge,
};
use bursar_pricing::Currency;

const T0: i64 = 1_735_689_600; // 2025-01-01T00:00:00Z
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
const U: i64 = 1_000_000;

fn su() -> Currency {
    Currency::new("su")
}

fn rec(job: &str, rev: &str, account: &str, units: i64, at: i64, is_final: bool) -> UsageCharge {
    UsageCharge {
        cluster: "alpha".to_string(),
        job_id: job.to_string(),
        display_id: job.to_string(),
        submit: T0,
        revision: rev.to_string(),
        account: account.to_string(),
        user: "alice".to_string(),
        partition: Some("cpu".to_string()),
        qos: None,
        state: if is_final { "COMPLETED" } else { "RUNNING" }.to_string(),
        is_final,
        currency: su(),
        amount_micros: units * U,
        effective_at: at,
        price_version: Some("v1".to_string()),
        note: None,
    }
}

fn hold(key: &str, account: &str, currency: Currency, units: i64, at: i64) -> NewHold {
    NewHold {
        account: account.to_string(),
        currency,
        amount: units * U,
        cluster: "alpha".to_string(),
        job_ref: None,
        placed_at: at,
        expires_at: at + DAY,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    }
}

/// (allocated, charged, held, remaining, available) of `account` in `currency` at `at`.
async fn bal(
    ledger: &Ledger,
    account: &str,
    currency: &str,
    at: i64,
) -> (Option<i64>, i64, i64, Option<i64>, Option<i64>) {
    let rows = ledger.balance(account, at).await.expect("balance");
    let row = rows
        .into_iter()
        .find(|r| r.currency.as_str() == currency)
        .unwrap_or_else(|| panic!("no {currency} balance for {account}"));
    (
        row.allocated,
        row.charged,
        row.held,
        row.remaining,
        row.available,
    )
}

async fn job_amounts(ledger: &Ledger, job: &str) -> Vec<(EntryKind, String, i64)> {
    let query = JournalQuery {
        job_id: Some(job.to_string()),
        ..JournalQuery::default()
    };
    ledger
        .journal(&query)
        .await
        .expect("journal")
        .into_iter()
        .filter(|e| e.kind.is_usage())
        .map(|e| (e.kind, e.account, e.amount))
        .collect()
}

/// Runs the story on an empty ledger. Panics at the first broken promise.
pub async fn story(ledger: &Ledger) {
    let t1 = T0 + DAY + 2 * HOUR;
    let end = T0 + 30 * DAY;

    // The tree: root is implicit; names are checked; cycles are refused.
    assert!(ledger.ensure_account("org", None).await.unwrap());
    assert!(!ledger.ensure_account("org", None).await.unwrap());
    assert!(ledger.ensure_account("physics", Some("org")).await.unwrap());
    assert!(ledger.ensure_account("chem", Some("org")).await.unwrap());
    assert_eq!(
        ledger.ancestors_or_self("physics").await.unwrap(),
        ["physics", "org", "root"]
    );
    assert!(matches!(
        ledger.ensure_account("two words", None).await,
        Err(LedgerError::Invalid(_))
    ));
    assert!(matches!(
        ledger.ensure_account("orphan", Some("nowhere")).await,
        Err(LedgerError::NotFound {
            what: "account",
            ..
        })
    ));
    assert!(matches!(
        ledger.set_parent("org", Some("physics")).await,
        Err(LedgerError::Conflict(_))
    ));
    let accounts = ledger.accounts().await.unwrap();
    assert_eq!(
        accounts.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["chem", "org", "physics", "root"]
    );

    // Users: the default account is an association.
    assert!(ledger.upsert_user("alice", "physics").await.unwrap());
    assert!(!ledger.upsert_user("alice", "physics").await.unwrap());
    assert!(ledger.associate("alice", "chem").await.unwrap());
    assert!(!ledger.associate("alice", "chem").await.unwrap());
    assert!(matches!(
        ledger.associate("bob", "chem").await,
        Err(LedgerError::NotFound { what: "user", .. })
    ));
    let assoc: Vec<(String, String)> = ledger
        .associations()
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.user, a.account))
        .collect();
    assert_eq!(
        assoc,
        [
            ("alice".to_string(), "chem".to_string()),
            ("alice".to_string(), "physics".to_string())
        ]
    );
    assert_eq!(ledger.users().await.unwrap()[0].default_account, "physics");

    // Allocations: exact period replaces, partial overlap conflicts.
    ledger
        .set_allocation("org", &su(), 900 * U, T0, end)
        .await
        .unwrap();
    let org = ledger
        .set_allocation("org", &su(), 1000 * U, T0, end)
        .await
        .unwrap();
    assert_eq!(org.amount, 1000 * U);
    assert!(matches!(
        ledger
            .set_allocation("org", &su(), U, T0 + DAY, end + DAY)
            .await,
        Err(LedgerError::Conflict(_))
    ));
    ledger
        .set_allocation("physics", &su(), 400 * U, T0, end)
        .await
        .unwrap();
    ledger
        .set_allocation("org", &Currency::new("usd"), 50 * U, T0, end)
        .await
        .unwrap();
    assert_eq!(ledger.allocations().await.unwrap().len(), 3);

    // Posting: new identities are charged once; posting again changes nothing.
    let batch = vec![
        rec("j1", "r1", "physics", 10, t1, false),
        rec("j2", "r1", "chem", 20, t1, true),
    ];
    let out = ledger.post_usage(&batch, t1).await.unwrap();
    assert_eq!((out.charged, out.adjusted, out.unchanged), (2, 0, 0));
    let out = ledger.post_usage(&batch, t1).await.unwrap();
    assert_eq!((out.charged, out.adjusted, out.unchanged), (0, 0, 2));

    // RUNNING → COMPLETED the same day: one adjustment of the difference.
    let done = rec("j1", "r2", "physics", 30, t1 + HOUR, true);
    let out = ledger
        .post_usage(std::slice::from_ref(&done), t1 + HOUR)
        .await
        .unwrap();
    assert_eq!((out.charged, out.adjusted), (0, 1));
    assert_eq!(
        job_amounts(ledger, "j1").await,
        [
            (EntryKind::Charge, "physics".to_string(), 10 * U),
            (EntryKind::Adjustment, "physics".to_string(), 20 * U)
        ]
    );
    // An old revision, or a RUNNING record after the final one, changes nothing.
    let stale = vec![
        rec("j1", "r1", "physics", 10, t1, false),
        rec("j1", "r3", "physics", 12, t1, false),
    ];
    let out = ledger.post_usage(&stale, t1 + HOUR).await.unwrap();
    assert_eq!((out.adjusted, out.unchanged), (0, 2));
    let j1 = ledger.job("alpha", "j1", T0).await.unwrap().unwrap();
    assert_eq!(
        (j1.revision.as_str(), j1.amount, j1.is_final),
        ("r2", 30 * U, true)
    );

    // Roll-up: physics draws on org too; chem (no allocation) on org only.
    assert_eq!(
        bal(ledger, "physics", "su", t1).await,
        (Some(400 * U), 30 * U, 0, Some(370 * U), Some(370 * U))
    );
    assert_eq!(
        bal(ledger, "org", "su", t1).await,
        (Some(1000 * U), 50 * U, 0, Some(950 * U), Some(950 * U))
    );
    assert_eq!(
        bal(ledger, "chem", "su", t1).await,
        (None, 20 * U, 0, None, Some(950 * U))
    );
    assert_eq!(
        bal(ledger, "root", "su", t1).await,
        (None, 50 * U, 0, None, None)
    );

    // A changed account: the old posting is reversed where it was and re-posted.
    let moved = rec("j2", "r2", "physics", 20, t1, true);
    let out = ledger.post_usage(&[moved], t1 + HOUR).await.unwrap();
    assert_eq!((out.charged, out.adjusted), (0, 1));
    assert_eq!(
        job_amounts(ledger, "j2").await,
        [
            (EntryKind::Charge, "chem".to_string(), 20 * U),
            (EntryKind::Adjustment, "chem".to_string(), -20 * U),
            (EntryKind::Adjustment, "physics".to_string(), 20 * U)
        ]
    );
    // chem's subtree nets to zero in su and it holds no allocation: no su row.
    assert!(ledger
        .balance("chem", t1)
        .await
        .unwrap()
        .iter()
        .all(|b| b.currency.as_str() != "su"));
    assert_eq!(bal(ledger, "physics", "su", t1).await.1, 50 * U);
    assert_eq!(bal(ledger, "org", "su", t1).await.1, 50 * U);

    // An unknown account is created under root; the charge is kept.
    let out = ledger
        .post_usage(&[rec("j4", "r1", "newproj", 5, t1, true)], t1)
        .await
        .unwrap();
    assert_eq!(out.created_accounts, ["newproj"]);
    assert_eq!(
        ledger.ancestors_or_self("newproj").await.unwrap(),
        ["newproj", "root"]
    );
    assert_eq!(bal(ledger, "root", "su", t1).await.1, 55 * U);
    // An allocation created afterwards is backfilled from the journal.
    let np = ledger
        .set_allocation("newproj", &su(), 10 * U, T0, end)
        .await
        .unwrap();
    assert_eq!((np.charged, np.remaining), (5 * U, 5 * U));

    // Holds: checked against every link of the chain, with the numbers.
    match ledger
        .try_place_hold(&hold("h0", "physics", su(), 360, t1))
        .await
    {
        Err(LedgerError::InsufficientAllocation {
            account,
            estimate,
            remaining,
            ..
        }) => assert_eq!(
            (account.as_str(), estimate, remaining),
            ("physics", 360 * U, 350 * U)
        ),
        other => panic!("expected insufficient allocation, got {other:?}"),
    }
    ledger
        .set_allocation("org", &su(), 300 * U, T0, end)
        .await
        .unwrap();
    match ledger
        .try_place_hold(&hold("h0", "physics", su(), 260, t1))
        .await
    {
        Err(LedgerError::InsufficientAllocation {
            account, remaining, ..
        }) => assert_eq!((account.as_str(), remaining), ("org", 250 * U)),
        other => panic!("expected insufficient allocation at org, got {other:?}"),
    }
    assert!(matches!(
        ledger
            .try_place_hold(&hold("h0", "physics", Currency::new("eur"), 1, t1))
            .await,
        Err(LedgerError::NoAllocation { .. })
    ));
    let h1 = ledger
        .try_place_hold(&hold("h1", "physics", su(), 100, t1))
        .await
        .unwrap();
    assert_eq!(
        ledger
            .try_place_hold(&hold("h1", "physics", su(), 100, t1))
            .await
            .unwrap()
            .id,
        h1.id
    );
    assert_eq!(
        bal(ledger, "physics", "su", t1).await,
        (Some(400 * U), 50 * U, 100 * U, Some(250 * U), Some(150 * U))
    );
    assert_eq!(bal(ledger, "org", "su", t1).await.3, Some(150 * U));

    // The job's final record settles its hold in the same transaction.
    ledger.link_hold(h1.id, "j5").await.unwrap();
    assert!(matches!(
        ledger.link_hold(h1.id, "j6").await,
        Err(LedgerError::Conflict(_))
    ));
    let out = ledger
        .post_usage(
            &[UsageCharge {
                submit: t1,
                ..rec("j5", "r1", "physics", 80, t1, true)
            }],
            t1 + 2 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.settled_holds), (1, 1));
    assert_eq!(
        bal(ledger, "physics", "su", t1).await,
        (Some(400 * U), 130 * U, 0, Some(270 * U), Some(170 * U))
    );
    let holds = ledger.holds(false).await.unwrap();
    assert_eq!(holds[0].state, HoldState::Settled);

    // Release and expiry.
    let h2 = ledger
        .place_hold(&hold("h2", "chem", su(), 10, t1))
        .await
        .unwrap();
    let h3 = ledger
        .place_hold(&hold("h3", "chem", su(), 5, t1))
        .await
        .unwrap();
    assert_eq!(bal(ledger, "org", "su", t1).await.2, 15 * U);
    assert!(ledger
        .release_hold(h3.id, "cancelled", t1 + HOUR)
        .await
        .unwrap());
    assert!(!ledger
        .release_hold(h3.id, "cancelled", t1 + HOUR)
        .await
        .unwrap());
    assert_eq!(ledger.expire_holds(t1 + 2 * DAY).await.unwrap(), 1);
    assert!(ledger.holds(true).await.unwrap().is_empty());
    let states: Vec<HoldState> = ledger
        .holds(false)
        .await
        .unwrap()
        .into_iter()
        .filter(|h| h.id == h2.id || h.id == h3.id)
        .map(|h| h.state)
        .collect();
    assert_eq!(states, [HoldState::Expired, HoldState::Released]);
    assert_eq!(bal(ledger, "org", "su", t1).await.2, 0);

    // Manual entries: idempotent by key, signs checked, deposits top up the allocation.
    let refund = NewEntry {
        kind: EntryKind::Refund,
        account: "physics".to_string(),
        currency: su(),
        amount: -5 * U,
        effective_at: t1,
        idempotency_key: "refund-1".to_string(),
        note: Some("node failure".to_string()),
    };
    assert!(ledger.post_entry(&refund).await.unwrap());
    assert!(!ledger.post_entry(&refund).await.unwrap());
    let clash = NewEntry {
        amount: -6 * U,
        ..refund.clone()
    };
    assert!(matches!(
        ledger.post_entry(&clash).await,
        Err(LedgerError::Conflict(_))
    ));
    let positive = NewEntry {
        amount: 5 * U,
        idempotency_key: "refund-2".to_string(),
        ..refund.clone()
    };
    assert!(matches!(
        ledger.post_entry(&positive).await,
        Err(LedgerError::Invalid(_))
    ));
    let deposit = NewEntry {
        kind: EntryKind::Deposit,
        amount: 100 * U,
        idempotency_key: "deposit-1".to_string(),
        ..refund.clone()
    };
    assert!(ledger.post_entry(&deposit).await.unwrap());
    assert_eq!(
        bal(ledger, "physics", "su", t1).await,
        (Some(500 * U), 125 * U, 0, Some(375 * U), Some(175 * U))
    );

    // Reports: rows sum to totals; the rollup and the journal agree.
    let keys = [GroupKey::User, GroupKey::Month, GroupKey::Partition];
    let rollup = ledger
        .usage_report_from(ReportSource::Rollup, T0, end, &keys)
        .await
        .unwrap();
    let journal = ledger
        .usage_report_from(ReportSource::Journal, T0, end, &keys)
        .await
        .unwrap();
    assert_eq!(rollup, journal);
    assert_eq!(rollup.totals, [(su(), 130 * U)]);
    let by_account = ledger
        .usage_report(T0, end, &[GroupKey::Account])
        .await
        .unwrap();
    let lines: Vec<(&str, i64, u64)> = by_account
        .rows
        .iter()
        .map(|r| (r.account.as_str(), r.amount, r.jobs))
        .collect();
    assert_eq!(lines, [("newproj", 5 * U, 1), ("physics", 125 * U, 3)]);
    let unaligned = ledger.usage_report(T0 + 1, end, &[]).await.unwrap();
    assert_eq!(unaligned.totals, rollup.totals);
    assert!(matches!(
        ledger
            .usage_report_from(ReportSource::Rollup, T0 + 1, end, &[])
            .await,
        Err(LedgerError::Invalid(_))
    ));

    // Quarantine keeps a line once.
    let item = QuarantineItem {
        source: "sacct:alpha".to_string(),
        line: Some(7),
        reason: "unknown state".to_string(),
        raw: "7|x|EXPLODED".to_string(),
    };
    let other = QuarantineItem {
        line: None,
        ..item.clone()
    };
    assert_eq!(
        ledger
            .quarantine_add(&[item.clone(), other.clone(), item.clone()])
            .await
            .unwrap(),
        2
    );
    assert_eq!(ledger.quarantine_add(&[item, other]).await.unwrap(), 0);
    assert_eq!(ledger.quarantine_list().await.unwrap().len(), 2);

    // Cursors.
    assert_eq!(ledger.get_cursor("alpha").await.unwrap(), None);
    ledger.set_cursor("alpha", "1735689600").await.unwrap();
    ledger.set_cursor("alpha", "1735776000").await.unwrap();
    assert_eq!(
        ledger.get_cursor("alpha").await.unwrap().as_deref(),
        Some("1735776000")
    );

    // Every materialized number agrees with the journal.
    assert_eq!(ledger.verify().await.unwrap(), Vec::<String>::new());
}
