//! How fast `post_usage` posts. Prints rates; asserts only correctness.
//!
//! `cargo test --release -p bursar-ledger --test throughput -- --nocapture`
//! (`BURSAR_BENCH_RECORDS` sets the number of records: default 200000 in release builds,
//! 20000 in debug builds, where the number means nothing.)

mod common;

use std::time::{Duration, Instant};

use bursar_ledger::UsageCharge;
use common::{su, temp_ledger, T0, UNIT};

fn synthetic(i: u64, revision: &str, units_extra: i64) -> UsageCharge {
    let n = i64::try_from(i).unwrap();
    UsageCharge {
        cluster: "alpha".to_string(),
        job_id: (1_000_000 + i).to_string(),
        display_id: (1_000_000 + i).to_string(),
        submit: T0 + n,
        revision: format!("{:016x}{revision}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        account: format!("proj{}", i % 50),
        user: format!("user{}", i % 400),
        partition: Some(if i.is_multiple_of(7) { "gpu" } else { "cpu" }.to_string()),
        qos: Some("normal".to_string()),
        state: "COMPLETED".to_string(),
        is_final: true,
        currency: su(),
        amount_micros: (n * 7_919) % (50 * UNIT) + units_extra * UNIT,
        effective_at: T0 + n * 10,
        price_version: Some("2025-01".to_string()),
        note: None,
    }
}

/// Records per second, in integers (the ledger's crates keep floats out).
fn rate(records: u64, elapsed: Duration) -> u128 {
    u128::from(records) * 1_000_000 / elapsed.as_micros().max(1)
}

async fn post_all(
    ledger: &bursar_ledger::Ledger,
    records: &[UsageCharge],
    batch: usize,
) -> (Duration, u64, u64, u64) {
    let start = Instant::now();
    let (mut charged, mut adjusted, mut unchanged) = (0, 0, 0);
    for chunk in records.chunks(batch) {
        let out = ledger.post_usage(chunk, T0 + 40 * 86_400).await.unwrap();
        charged += out.charged;
        adjusted += out.adjusted;
        unchanged += out.unchanged;
    }
    (start.elapsed(), charged, adjusted, unchanged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_usage_rate() {
    let n: u64 = std::env::var("BURSAR_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            20_000
        } else {
            200_000
        });
    let batch = 10_000;
    let (_dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    for p in 0..50 {
        let name = format!("proj{p}");
        ledger.ensure_account(&name, Some("org")).await.unwrap();
        ledger
            .set_allocation(&name, &su(), 1_000_000 * UNIT, T0, T0 + 365 * 86_400)
            .await
            .unwrap();
    }
    ledger
        .set_allocation("org", &su(), 100_000_000 * UNIT, T0, T0 + 365 * 86_400)
        .await
        .unwrap();

    let fresh: Vec<UsageCharge> = (0..n).map(|i| synthetic(i, "a", 0)).collect();
    let (secs, charged, _, _) = post_all(&ledger, &fresh, batch).await;
    assert_eq!(charged, n);
    println!(
        "post_usage, new records:        {n} in {secs:?} = {} records/s",
        rate(n, secs)
    );
    if std::env::var_os("BURSAR_BENCH_FRESH_ONLY").is_some() {
        return;
    }

    let (secs, _, _, unchanged) = post_all(&ledger, &fresh, batch).await;
    assert_eq!(unchanged, n);
    println!(
        "post_usage, same records again: {n} in {secs:?} = {} records/s",
        rate(n, secs)
    );

    let revised: Vec<UsageCharge> = (0..n).map(|i| synthetic(i, "b", 1)).collect();
    let (secs, _, adjusted, _) = post_all(&ledger, &revised, batch).await;
    assert_eq!(adjusted, n);
    println!(
        "post_usage, new revisions:      {n} in {secs:?} = {} records/s",
        rate(n, secs)
    );

    assert_eq!(ledger.verify().await.unwrap(), Vec::<String>::new());
}
