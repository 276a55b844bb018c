//! Forecasts (exact burn rates and exhaustion dates, holds included) and alerts driven by a
//! fake clock through an allocation period: every threshold fires once, at the right step,
//! also across a restart of the ledger.

mod common;

use bursar_ledger::alerts::AlertPass;
use bursar_ledger::{
    AlertKind, AlertPolicy, AlertRules, EntryKind, Exhaustion, Ledger, NewEntry, NewHold,
};
use common::{record, su, temp_ledger, DAY, HOUR, T0, UNIT};

fn hold(key: &str, account: &str, units: i64, placed_at: i64) -> NewHold {
    NewHold {
        account: account.to_string(),
        currency: su(),
        amount: units * UNIT,
        cluster: "alpha".to_string(),
        job_ref: Some(key.to_string()),
        placed_at,
        expires_at: placed_at + 30 * DAY,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    }
}

async fn setup() -> (tempfile::TempDir, Ledger) {
    let (dir, l) = temp_ledger().await;
    l.ensure_account("org", None).await.unwrap();
    l.ensure_account("physics", Some("org")).await.unwrap();
    l.ensure_account("chem", Some("org")).await.unwrap();
    l.set_allocation("physics", &su(), 1000 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    (dir, l)
}

#[tokio::test]
async fn burn_rate_and_exhaustion_are_exact_and_count_holds() {
    let (_dir, l) = setup().await;
    l.set_allocation("chem", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    l.post_usage(
        &[
            record("1", "r1", "physics", 70, T0 + 2 * DAY),
            record("2", "r1", "physics", 140, T0 + 5 * DAY),
        ],
        T0 + 6 * DAY,
    )
    .await
    .unwrap();
    let h = l
        .place_hold(&hold("h1", "physics", 28, T0 + 9 * DAY))
        .await
        .unwrap();
    // A hold placed after the moment forecast does not count.
    l.place_hold(&hold("later", "physics", 500, T0 + 11 * DAY))
        .await
        .unwrap();
    let at = T0 + 10 * DAY;

    // 14 days: [T0-4d, T0+10d) holds both jobs; 210 + 28 held = 238 su = 17 su a day.
    let f = l
        .forecast("physics", &su(), at, 14 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.window_usage, 210 * UNIT);
    assert_eq!(f.window_held, 28 * UNIT);
    assert_eq!(f.rate_per_day, 17 * UNIT);
    // The balance at `at` counts the hold placed later too (balances are not historical for
    // holds): remaining 1000 - 210 - 28 - 500 = 262.
    assert_eq!(f.remaining, Some(262 * UNIT));
    // 262 / 17 days = 1331576.47… s, rounded up.
    assert_eq!(f.exhaustion, Exhaustion::At(at + 1_331_577));
    assert!(f.before_period_end);

    // 7 days: [T0+3d, T0+10d) holds job 2 only; 140 + 28 = 168 su = 24 su a day.
    let f = l
        .forecast("physics", &su(), at, 7 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.window_usage, 140 * UNIT);
    assert_eq!(f.rate_per_day, 24 * UNIT);
    // 262 / 24 days = 943200 s exactly.
    assert_eq!(f.exhaustion, Exhaustion::At(at + 943_200));

    // The parent has no allocation: its subtree's rate, no exhaustion.
    let org = l
        .forecast("org", &su(), at, 14 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(org.rate_per_day, 17 * UNIT);
    assert_eq!(org.exhaustion, Exhaustion::NoAllocation);
    assert_eq!(org.allocation_id, None);

    // Without the hold: 210 su over 14 days = 15 su a day.
    l.release_hold(h.id, "cancelled", at - HOUR).await.unwrap();
    l.release_hold(l.holds(true).await.unwrap()[0].id, "cancelled", at + DAY)
        .await
        .unwrap();
    let f = l
        .forecast("physics", &su(), at, 14 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.window_held, 0);
    assert_eq!(f.rate_per_day, 15 * UNIT);
    // 790 su at 15 a day: 52.66… days, after the period's end.
    assert_eq!(f.remaining, Some(790 * UNIT));
    assert_eq!(f.exhaustion, Exhaustion::At(at + 4_550_400));
    assert!(!f.before_period_end);

    // No spending: rate 0, never runs out.
    let chem = l
        .forecast("chem", &su(), at, 14 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(chem.rate_per_day, 0);
    assert_eq!(chem.exhaustion, Exhaustion::Never);
    assert!(!chem.before_period_end);

    // Spent beyond the allocation: already exhausted.
    l.post_usage(&[record("3", "r1", "chem", 100, T0 + 9 * DAY)], at)
        .await
        .unwrap();
    let chem = l
        .forecast("chem", &su(), at, 14 * DAY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(chem.remaining, Some(0));
    assert_eq!(chem.exhaustion, Exhaustion::Exhausted);
    assert!(chem.before_period_end);
    // ceil(100 su / 14 days) = 7.142858 su a day.
    assert_eq!(chem.rate_per_day, 7_142_858);
}

fn kinds(pass: &AlertPass) -> Vec<String> {
    pass.fired.iter().map(|a| a.kind.to_string()).collect()
}

#[tokio::test]
async fn each_threshold_fires_once_per_crossing_across_restarts() {
    let (dir, l) = setup().await;
    let rules = AlertRules::default();
    let end = T0 + 30 * DAY;

    // Day 1: 10 %.
    l.post_usage(&[record("a", "r1", "physics", 100, T0)], T0 + DAY)
        .await
        .unwrap();
    assert!(kinds(&l.record_alerts(&rules, T0 + DAY).await.unwrap()).is_empty());

    // Day 15: 52 %, all of it before the window: 50 % fires, nothing is projected.
    l.post_usage(
        &[record("b", "r1", "physics", 420, T0 + 12 * HOUR)],
        T0 + 15 * DAY,
    )
    .await
    .unwrap();
    let pass = l.record_alerts(&rules, T0 + 15 * DAY).await.unwrap();
    assert_eq!(kinds(&pass), ["used:50"]);
    let fired = &pass.fired[0];
    assert_eq!(fired.account, "physics");
    assert_eq!(fired.allocated, 1000 * UNIT);
    assert_eq!(fired.committed(), 520 * UNIT);
    assert_eq!(fired.rate_per_day, 0);
    assert_eq!(fired.period, (T0, end));
    // Checking again fires nothing.
    assert!(kinds(&l.record_alerts(&rules, T0 + 15 * DAY).await.unwrap()).is_empty());

    // Day 16: 77 %, 250 su in the window: 17.857143 su a day, 230 left → 12.88 days: projected
    // to run out before the end.
    l.post_usage(
        &[record("c", "r1", "physics", 250, T0 + 15 * DAY + 12 * HOUR)],
        T0 + 16 * DAY,
    )
    .await
    .unwrap();
    let pass = l.record_alerts(&rules, T0 + 16 * DAY).await.unwrap();
    assert_eq!(kinds(&pass), ["projected"]);
    assert_eq!(pass.fired[0].rate_per_day, 17_857_143);
    assert_eq!(pass.fired[0].exhaustion, Some(T0 + 16 * DAY + 1_112_832));
    assert!(kinds(&l.record_alerts(&rules, T0 + 16 * DAY).await.unwrap()).is_empty());

    // Day 17: a running job's hold takes committed to 82 %: 80 % fires.
    let h = l
        .place_hold(&hold("h", "physics", 50, T0 + 17 * DAY))
        .await
        .unwrap();
    let pass = l.record_alerts(&rules, T0 + 17 * DAY).await.unwrap();
    assert_eq!(kinds(&pass), ["used:80"]);
    assert_eq!(pass.fired[0].held, 50 * UNIT);

    // Restart: a new ledger on the same file fires nothing.
    drop(l);
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let l = Ledger::open(&url).await.unwrap();
    assert!(kinds(&l.record_alerts(&rules, T0 + 17 * DAY).await.unwrap()).is_empty());
    assert!(kinds(&l.record_alerts(&rules, T0 + 18 * DAY).await.unwrap()).is_empty());

    // Day 18: the job is cancelled (77 %) and another one held (83 %): a hold going away does
    // not re-arm, so 80 % does not fire again.
    l.release_hold(h.id, "cancelled", T0 + 18 * DAY)
        .await
        .unwrap();
    assert!(kinds(&l.record_alerts(&rules, T0 + 18 * DAY).await.unwrap()).is_empty());
    l.place_hold(&hold("h2", "physics", 60, T0 + 18 * DAY + HOUR))
        .await
        .unwrap();
    let pass = l.record_alerts(&rules, T0 + 18 * DAY + HOUR).await.unwrap();
    assert!(kinds(&pass).is_empty());
    assert_eq!(pass.rearmed, 0);

    // Day 19: 107 %: 100 % fires; the projection is moot (exhausted) and stays quiet.
    l.post_usage(
        &[record("d", "r1", "physics", 240, T0 + 19 * DAY)],
        T0 + 19 * DAY,
    )
    .await
    .unwrap();
    assert_eq!(
        kinds(&l.record_alerts(&rules, T0 + 19 * DAY + HOUR).await.unwrap()),
        ["used:100"]
    );

    // Each kind fired exactly once so far.
    let all = l.alerts().await.unwrap();
    let mut fired: Vec<String> = all.iter().map(|a| a.kind.to_string()).collect();
    fired.sort();
    assert_eq!(fired, ["projected", "used:100", "used:50", "used:80"]);

    // Day 20: a top-up to 2000 (53.5 %): 80 %, 100 % and projected re-arm; 50 % stays open.
    l.set_allocation("physics", &su(), 2000 * UNIT, T0, end)
        .await
        .unwrap();
    let pass = l.record_alerts(&rules, T0 + 20 * DAY).await.unwrap();
    assert!(kinds(&pass).is_empty());
    assert_eq!(pass.rearmed, 3);
    assert!(kinds(&l.record_alerts(&rules, T0 + 20 * DAY).await.unwrap()).is_empty());

    // Day 21: 600 su more (83.5 %): the second crossing of 80 % fires, and the new pace runs
    // out before the end again.
    l.post_usage(
        &[record("e", "r1", "physics", 600, T0 + 20 * DAY + HOUR)],
        T0 + 21 * DAY,
    )
    .await
    .unwrap();
    let pass = l.record_alerts(&rules, T0 + 21 * DAY).await.unwrap();
    assert_eq!(kinds(&pass), ["used:80", "projected"]);

    // Day 22: a refund takes it to 73.5 % (charged below the charged at firing): 80 %
    // re-arms; the next crossing fires it a third time.
    let refund = NewEntry {
        kind: EntryKind::Refund,
        account: "physics".to_string(),
        currency: su(),
        amount: -200 * UNIT,
        effective_at: T0 + 20 * DAY + HOUR,
        idempotency_key: "refund-e".to_string(),
        note: None,
    };
    l.post_entry(&refund).await.unwrap();
    let pass = l.record_alerts(&rules, T0 + 22 * DAY).await.unwrap();
    assert!(kinds(&pass).is_empty());
    assert_eq!(pass.rearmed, 1);
    l.post_usage(
        &[record("f", "r1", "physics", 200, T0 + 22 * DAY)],
        T0 + 22 * DAY,
    )
    .await
    .unwrap();
    assert_eq!(
        kinds(&l.record_alerts(&rules, T0 + 22 * DAY + HOUR).await.unwrap()),
        ["used:80"]
    );
    let all = l.alerts().await.unwrap();
    let count = |k: AlertKind| all.iter().filter(|a| a.kind == k).count();
    assert_eq!(count(AlertKind::Used(50)), 1);
    assert_eq!(count(AlertKind::Used(80)), 3);
    assert_eq!(count(AlertKind::Used(100)), 1);
    assert_eq!(count(AlertKind::Projected), 2);
    // Open: 50 %, the latest 80 %, 100 % was re-armed by the top-up, projected (second).
    let open: Vec<String> = all
        .iter()
        .filter(|a| a.rearmed_at.is_none())
        .map(|a| a.kind.to_string())
        .collect();
    assert_eq!(open, ["used:50", "projected", "used:80"]);

    // A new period is a new allocation with its own alerts. Its pace is still the last two
    // weeks' (the window is not cut at the period's start): 100 su won't last a day.
    l.set_allocation("physics", &su(), 100 * UNIT, end, end + 30 * DAY)
        .await
        .unwrap();
    l.post_usage(&[record("g", "r1", "physics", 60, end + DAY)], end + DAY)
        .await
        .unwrap();
    let pass = l.record_alerts(&rules, end + DAY + HOUR).await.unwrap();
    assert_eq!(kinds(&pass), ["used:50", "projected"]);
    assert_eq!(pass.fired[0].period, (end, end + 30 * DAY));
}

#[tokio::test]
async fn per_account_policies_and_delivery_bookkeeping() {
    let (_dir, l) = setup().await;
    let mut rules = AlertRules::default();
    rules.accounts.insert(
        "physics".to_string(),
        AlertPolicy {
            thresholds: vec![90],
            projected: false,
        },
    );
    l.post_usage(&[record("a", "r1", "physics", 950, T0 + DAY)], T0 + DAY)
        .await
        .unwrap();
    let pass = l.record_alerts(&rules, T0 + DAY).await.unwrap();
    assert_eq!(kinds(&pass), ["used:90"]);
    let id = pass.fired[0].id;

    // A claim keeps a second deliverer out until it expires; a failure is counted and frees
    // it; a success is recorded once.
    assert!(l.claim_alert(id, T0 + DAY, T0 + DAY + 60).await.unwrap());
    assert!(!l
        .claim_alert(id, T0 + DAY + 1, T0 + DAY + 61)
        .await
        .unwrap());
    l.finish_alert(id, Err("HTTP 500"), T0 + DAY + 2)
        .await
        .unwrap();
    assert!(l
        .claim_alert(id, T0 + DAY + 3, T0 + DAY + 63)
        .await
        .unwrap());
    l.finish_alert(id, Ok("webhook"), T0 + DAY + 4)
        .await
        .unwrap();
    l.finish_alert(id, Ok("log"), T0 + DAY + 5).await.unwrap();
    assert!(!l
        .claim_alert(id, T0 + DAY + 100, T0 + DAY + 160)
        .await
        .unwrap());
    let row = &l.alerts().await.unwrap()[0];
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_error.as_deref(), Some("HTTP 500"));
    assert_eq!(row.delivered_at, Some(T0 + DAY + 4));
    assert_eq!(row.delivered_via.as_deref(), Some("webhook"));

    let bad = AlertRules {
        default: AlertPolicy {
            thresholds: vec![0],
            projected: true,
        },
        ..AlertRules::default()
    };
    assert!(l.record_alerts(&bad, T0).await.is_err());
}
