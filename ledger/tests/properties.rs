//! Properties: reports add up, and the order and overlap of batches never matters.

mod common;

use bursar_ledger::{BalanceRow, GroupKey, Ledger, ReportSource, UsageCharge, UsageReport};
use common::{su, usd, DAY, HOUR, T0, UNIT};
use proptest::prelude::*;

/// One job: optionally a RUNNING revision first (maybe on another account), then its final one.
#[derive(Debug, Clone)]
struct Job {
    account: usize,
    user: usize,
    dollars: bool,
    start_hours: i64,
    hours: i64,
    units: i64,
    running: Option<(usize, i64)>,
}

const ACCOUNTS: [&str; 5] = ["org", "a", "b", "c", "stray"];

fn job() -> impl Strategy<Value = Job> {
    (
        0..ACCOUNTS.len(),
        0..3usize,
        any::<bool>(),
        0..24 * 70i64,
        1..72i64,
        0..500i64,
        proptest::option::of((0..ACCOUNTS.len(), 0..500i64)),
    )
        .prop_map(
            |(account, user, dollars, start_hours, hours, units, running)| Job {
                account,
                user,
                dollars,
                start_hours,
                hours,
                units,
                running,
            },
        )
}

fn records(jobs: &[Job]) -> Vec<UsageCharge> {
    let mut out = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let start = T0 + j.start_hours * HOUR;
        let base = UsageCharge {
            cluster: "alpha".to_string(),
            job_id: format!("{i}"),
            display_id: format!("{i}"),
            submit: start - 60,
            revision: "final".to_string(),
            account: ACCOUNTS[j.account].to_string(),
            user: format!("u{}", j.user),
            partition: Some("cpu".to_string()),
            qos: None,
            state: "COMPLETED".to_string(),
            is_final: true,
            currency: if j.dollars { usd() } else { su() },
            amount_micros: j.units * UNIT + 1,
            effective_at: start + j.hours * HOUR,
            price_version: None,
            note: None,
        };
        if let Some((account, units)) = j.running {
            out.push(UsageCharge {
                revision: "running".to_string(),
                account: ACCOUNTS[account].to_string(),
                state: "RUNNING".to_string(),
                is_final: false,
                amount_micros: units * UNIT,
                effective_at: start,
                ..base.clone()
            });
        }
        out.push(base);
    }
    out
}

async fn fresh_ledger(dir: &tempfile::TempDir, name: &str) -> Ledger {
    let ledger = Ledger::open(&format!("sqlite://{}", dir.path().join(name).display()))
        .await
        .unwrap();
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("a", Some("org")).await.unwrap();
    ledger.ensure_account("b", Some("a")).await.unwrap();
    ledger.ensure_account("c", None).await.unwrap();
    for (account, start, end) in [
        ("org", T0, T0 + 30 * DAY),
        ("org", T0 + 30 * DAY, T0 + 90 * DAY),
        ("a", T0 + 10 * DAY, T0 + 40 * DAY),
        ("b", T0, T0 + 90 * DAY),
    ] {
        ledger
            .set_allocation(account, &su(), 10_000 * UNIT, start, end)
            .await
            .unwrap();
    }
    ledger
        .set_allocation("org", &usd(), 10_000 * UNIT, T0, T0 + 90 * DAY)
        .await
        .unwrap();
    ledger
}

/// Everything observable that must not depend on how records were batched.
async fn state(ledger: &Ledger) -> (Vec<Vec<BalanceRow>>, Vec<UsageReport>) {
    let mut balances = Vec::new();
    for at in [
        T0 - 1,
        T0 + 5 * DAY,
        T0 + 35 * DAY,
        T0 + 89 * DAY,
        T0 + 200 * DAY,
    ] {
        balances.push(ledger.balances(at).await.unwrap());
    }
    let mut reports = Vec::new();
    for keys in [
        &[GroupKey::Account, GroupKey::User, GroupKey::Day][..],
        &[GroupKey::Month, GroupKey::Partition][..],
    ] {
        reports.push(
            ledger
                .usage_report(T0 - DAY, T0 + 100 * DAY, keys)
                .await
                .unwrap(),
        );
    }
    (balances, reports)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Overlapping windows over `records`: each starts `overlap` records before the previous end.
fn windows(records: &[UsageCharge], step: usize, overlap: usize) -> Vec<Vec<UsageCharge>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < records.len() {
        let end = (start + step).min(records.len());
        out.push(records[start.saturating_sub(overlap)..end].to_vec());
        start = end;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn report_rows_sum_to_totals_and_sources_agree(
        jobs in proptest::collection::vec(job(), 1..60),
        from_day in -2i64..40,
        days in 1i64..60,
        keys in proptest::sample::subsequence(
            vec![GroupKey::Account, GroupKey::User, GroupKey::Cluster, GroupKey::Partition,
                 GroupKey::Qos, GroupKey::Month, GroupKey::Day],
            0..4,
        ),
    ) {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let ledger = fresh_ledger(&dir, "l.db").await;
            let recs = records(&jobs);
            for window in windows(&recs, 7, 2) {
                ledger.post_usage(&window, T0).await.unwrap();
            }
            let (from, to) = (T0 + from_day * DAY, T0 + (from_day + days) * DAY);
            let rollup = ledger.usage_report_from(ReportSource::Rollup, from, to, &keys).await.unwrap();
            let journal = ledger.usage_report_from(ReportSource::Journal, from, to, &keys).await.unwrap();
            prop_assert_eq!(&rollup, &journal);
            for (currency, total) in &rollup.totals {
                let sum: i64 = rollup.rows.iter().filter(|r| &r.currency == currency).map(|r| r.amount).sum();
                prop_assert_eq!(sum, *total);
            }
            // Unaligned ranges: whole days from the rollup, the edges from the journal's
            // index; the same as the whole journal, and they add up too.
            let odd = ledger.usage_report(from + 1, to - 1, &keys).await.unwrap();
            let odd_journal = ledger
                .usage_report_from(ReportSource::Journal, from + 1, to - 1, &keys)
                .await
                .unwrap();
            prop_assert_eq!(&odd, &odd_journal);
            let (a, b) = (from + 3 * 3600 + 17, from + 3 * 3600 + 17 + days * 40_000);
            prop_assert_eq!(
                ledger.usage_report(a, b, &keys).await.unwrap(),
                ledger.usage_report_from(ReportSource::Journal, a, b, &keys).await.unwrap()
            );
            for (currency, total) in &odd.totals {
                let sum: i64 = odd.rows.iter().filter(|r| &r.currency == currency).map(|r| r.amount).sum();
                prop_assert_eq!(sum, *total);
            }
            prop_assert_eq!(ledger.verify().await.unwrap(), Vec::<String>::new());
            Ok(())
        })?;
    }

    #[test]
    fn batching_order_and_overlap_do_not_matter(
        (jobs, order, again) in proptest::collection::vec(job(), 1..60).prop_flat_map(|jobs| {
            let n = records(&jobs).len();
            let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            let again = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            (Just(jobs), order, again)
        }),
        step in 1usize..12,
        overlap in 0usize..6,
    ) {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let recs = records(&jobs);

            // Reference: every record once, in order, one batch.
            let reference = fresh_ledger(&dir, "reference.db").await;
            reference.post_usage(&recs, T0).await.unwrap();

            // The same records shuffled, in overlapping batches, then all again reshuffled.
            let shuffled_ledger = fresh_ledger(&dir, "shuffled.db").await;
            let shuffled: Vec<UsageCharge> = order.iter().map(|&i| recs[i].clone()).collect();
            for window in windows(&shuffled, step, overlap) {
                shuffled_ledger.post_usage(&window, T0).await.unwrap();
            }
            let expected = state(&reference).await;
            prop_assert_eq!(&state(&shuffled_ledger).await, &expected);

            let replay: Vec<UsageCharge> = again.iter().map(|&i| recs[i].clone()).collect();
            let mut changed = 0;
            for window in windows(&replay, step + 3, overlap) {
                let out = shuffled_ledger.post_usage(&window, T0).await.unwrap();
                changed += out.charged + out.adjusted;
            }
            prop_assert_eq!(changed, 0);
            prop_assert_eq!(&state(&shuffled_ledger).await, &expected);
            prop_assert_eq!(shuffled_ledger.verify().await.unwrap(), Vec::<String>::new());
            prop_assert_eq!(reference.verify().await.unwrap(), Vec::<String>::new());
            Ok(())
        })?;
    }
}
