//! Usage reports: the daily rollup and the journal agree; rows sum to totals.

mod common;

use bursar_ledger::{EntryKind, GroupKey, Ledger, NewEntry, ReportSource, UsageReport};
use common::{record, running, su, temp_ledger, usd, DAY, HOUR, T0, UNIT};

async fn ledger_with_history() -> (tempfile::TempDir, Ledger) {
    let (dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    let mut batch = Vec::new();
    for i in 0..120_i64 {
        let mut r = record(
            &format!("{i}"),
            "r1",
            if i % 3 == 0 { "org" } else { "physics" },
            i % 17,
            T0 + i * 7 * HOUR,
        );
        r.user = format!("u{}", i % 4);
        r.partition = (i % 5 != 0).then(|| format!("p{}", i % 2));
        r.qos = (i % 2 == 0).then(|| "high".to_string());
        if i % 10 == 0 {
            r.currency = usd();
        }
        batch.push(r);
    }
    ledger.post_usage(&batch, T0 + 40 * DAY).await.unwrap();
    // Revisions: a same-day adjustment, an account move, a running job.
    ledger
        .post_usage(
            &[
                record("1", "r2", "physics", 30, T0 + 7 * HOUR + 60),
                record("2", "r2", "org", 2, T0 + 14 * HOUR),
                running("500", "r1", "physics", 3, T0 + 3 * DAY),
            ],
            T0 + 41 * DAY,
        )
        .await
        .unwrap();
    let refund = NewEntry {
        kind: EntryKind::Refund,
        account: "physics".to_string(),
        currency: su(),
        amount: -UNIT,
        effective_at: T0 + 5 * DAY + 1,
        idempotency_key: "refund".to_string(),
        note: None,
    };
    ledger.post_entry(&refund).await.unwrap();
    (dir, ledger)
}

fn check_sums(report: &UsageReport) {
    for (currency, total) in &report.totals {
        let sum: i64 = report
            .rows
            .iter()
            .filter(|r| &r.currency == currency)
            .map(|r| r.amount)
            .sum();
        assert_eq!(sum, *total, "{currency}");
    }
}

#[tokio::test]
async fn rollup_and_journal_agree_for_every_grouping() {
    let (_dir, ledger) = ledger_with_history().await;
    let groupings: [&[GroupKey]; 6] = [
        &[],
        &[GroupKey::Account],
        &[GroupKey::User, GroupKey::Partition],
        &[GroupKey::Month],
        &[GroupKey::Day, GroupKey::Qos, GroupKey::Cluster],
        &[
            GroupKey::User,
            GroupKey::Month,
            GroupKey::Day,
            GroupKey::Partition,
            GroupKey::Qos,
        ],
    ];
    for (from, to) in [
        (T0, T0 + 60 * DAY),
        (T0 + DAY, T0 + 3 * DAY),
        (T0 - DAY, T0),
    ] {
        for keys in groupings {
            let rollup = ledger
                .usage_report_from(ReportSource::Rollup, from, to, keys)
                .await
                .unwrap();
            let journal = ledger
                .usage_report_from(ReportSource::Journal, from, to, keys)
                .await
                .unwrap();
            assert_eq!(rollup, journal, "{keys:?} [{from}, {to})");
            check_sums(&rollup);
        }
    }
    // Totals don't depend on the grouping.
    let plain = ledger.usage_report(T0, T0 + 60 * DAY, &[]).await.unwrap();
    let fine = ledger
        .usage_report(T0, T0 + 60 * DAY, &[GroupKey::User, GroupKey::Day])
        .await
        .unwrap();
    assert_eq!(plain.totals, fine.totals);
    let jobs: u64 = plain.rows.iter().map(|r| r.jobs).sum();
    assert_eq!(jobs, 121);
}

#[tokio::test]
async fn calendar_keys_are_utc_days_and_months() {
    let (_dir, ledger) = ledger_with_history().await;
    let report = ledger
        .usage_report(T0, T0 + 2 * DAY, &[GroupKey::Day, GroupKey::Month])
        .await
        .unwrap();
    let days: Vec<&str> = report
        .rows
        .iter()
        .map(|r| r.keys[&GroupKey::Day].as_str())
        .collect();
    assert!(days.contains(&"2025-01-01") && days.contains(&"2025-01-02"));
    assert!(report
        .rows
        .iter()
        .all(|r| r.keys[&GroupKey::Month] == "2025-01"));
    // An unaligned range is answered from the journal, and includes only what is in it.
    let hour = ledger
        .usage_report(T0 + 7 * HOUR, T0 + 7 * HOUR + 61, &[])
        .await
        .unwrap();
    assert_eq!(hour.totals, [(su(), 30 * UNIT)]);
}
