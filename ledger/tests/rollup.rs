//! Usage rolls up the tree into every covering allocation; allocations backfill.

mod common;

use bursar_ledger::{BalanceRow, EntryKind, Ledger, NewEntry};
use common::{record, su, temp_ledger, usd, DAY, HOUR, T0, UNIT};

async fn su_balance(ledger: &Ledger, account: &str, at: i64) -> BalanceRow {
    ledger
        .balance(account, at)
        .await
        .unwrap()
        .into_iter()
        .find(|b| b.currency == su())
        .unwrap()
}

#[tokio::test]
async fn a_charge_to_a_child_draws_on_its_parent_too() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    ledger
        .post_usage(&[record("1", "r", "physics", 30, T0 + DAY)], T0 + DAY)
        .await
        .unwrap();
    let org = su_balance(&ledger, "org", T0 + DAY).await;
    assert_eq!((org.charged, org.remaining), (30 * UNIT, Some(70 * UNIT)));
    let physics = su_balance(&ledger, "physics", T0 + DAY).await;
    assert_eq!(physics.allocated, None);
    assert_eq!(physics.charged, 30 * UNIT);
    assert_eq!(physics.available, Some(70 * UNIT));
    // No allocation in usd anywhere: no access.
    let mut dollars = record("2", "r", "physics", 1, T0 + DAY);
    dollars.currency = usd();
    ledger.post_usage(&[dollars], T0 + DAY).await.unwrap();
    let usd_row = ledger
        .balance("physics", T0 + DAY)
        .await
        .unwrap()
        .into_iter()
        .find(|b| b.currency == usd())
        .unwrap();
    assert_eq!(usd_row.available, None);
}

#[tokio::test]
async fn an_allocation_created_after_charges_is_backfilled() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    ledger
        .post_usage(
            &[
                record("1", "r", "physics", 5, T0 + HOUR),
                record("2", "r", "org", 7, T0 + 2 * DAY),
                record("3", "r", "physics", 11, T0 + 40 * DAY),
            ],
            T0 + 41 * DAY,
        )
        .await
        .unwrap();
    let org = ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    assert_eq!((org.charged, org.remaining), (12 * UNIT, 88 * UNIT));
    let physics = ledger
        .set_allocation("physics", &su(), 50 * UNIT, T0 + 30 * DAY, T0 + 60 * DAY)
        .await
        .unwrap();
    assert_eq!(physics.charged, 11 * UNIT);
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_charge_outside_a_period_does_not_count_in_it() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + DAY)
        .await
        .unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0 + DAY, T0 + 2 * DAY)
        .await
        .unwrap();
    ledger
        .post_usage(
            &[
                record("1", "r", "org", 3, T0 + DAY - 1),
                record("2", "r", "org", 4, T0 + DAY),
                record("3", "r", "org", 5, T0 + 3 * DAY),
            ],
            T0 + 3 * DAY,
        )
        .await
        .unwrap();
    let allocations = ledger.allocations().await.unwrap();
    let charged: Vec<i64> = allocations.iter().map(|a| a.charged).collect();
    assert_eq!(charged, [3 * UNIT, 4 * UNIT]);
    // Outside every period: the all-time subtree total, no allocation.
    let later = su_balance(&ledger, "org", T0 + 3 * DAY).await;
    assert_eq!((later.allocated, later.charged), (None, 12 * UNIT));
}

#[tokio::test]
async fn moving_an_account_moves_its_usage_between_ancestors() {
    let (_dir, ledger) = temp_ledger().await;
    for (name, parent) in [("a", None), ("b", None), ("p", Some("a"))] {
        ledger.ensure_account(name, parent).await.unwrap();
    }
    for name in ["a", "b"] {
        ledger
            .set_allocation(name, &su(), 100 * UNIT, T0, T0 + DAY)
            .await
            .unwrap();
    }
    ledger
        .post_usage(&[record("1", "r", "p", 9, T0 + HOUR)], T0 + HOUR)
        .await
        .unwrap();
    assert_eq!(su_balance(&ledger, "a", T0).await.charged, 9 * UNIT);
    ledger.set_parent("p", Some("b")).await.unwrap();
    assert_eq!(su_balance(&ledger, "a", T0).await.charged, 0);
    assert_eq!(su_balance(&ledger, "b", T0).await.charged, 9 * UNIT);
    assert!(ledger.set_parent("b", Some("p")).await.is_err());
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn deposits_and_manual_entries_move_the_right_numbers() {
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("p", Some("org")).await.unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + DAY)
        .await
        .unwrap();
    let entry = |kind, amount, key: &str| NewEntry {
        kind,
        account: "p".to_string(),
        currency: su(),
        amount,
        effective_at: T0 + HOUR,
        idempotency_key: key.to_string(),
        note: None,
    };
    ledger
        .post_entry(&entry(EntryKind::Adjustment, 6 * UNIT, "a1"))
        .await
        .unwrap();
    ledger
        .post_entry(&entry(EntryKind::Refund, -2 * UNIT, "r1"))
        .await
        .unwrap();
    // p has no allocation of its own to deposit into.
    assert!(ledger
        .post_entry(&entry(EntryKind::Deposit, UNIT, "d1"))
        .await
        .is_err());
    let deposit = NewEntry {
        account: "org".to_string(),
        ..entry(EntryKind::Deposit, 50 * UNIT, "d2")
    };
    ledger.post_entry(&deposit).await.unwrap();
    // The ledger's own key space is refused.
    assert!(ledger
        .post_entry(&entry(EntryKind::Adjustment, 1, "charge:x"))
        .await
        .is_err());
    let org = su_balance(&ledger, "org", T0).await;
    assert_eq!((org.allocated, org.charged), (Some(150 * UNIT), 4 * UNIT));
    let report = ledger.usage_report(T0, T0 + DAY, &[]).await.unwrap();
    assert_eq!(report.totals, [(su(), 4 * UNIT)]);
    assert!(ledger.verify().await.unwrap().is_empty());
}
