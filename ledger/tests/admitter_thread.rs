//! The admission writer's thread ends with its ledger (its own test binary: it counts the
//! process's threads).

mod common;

use std::time::{Duration, Instant};

use common::temp_ledger;

/// Waits (up to 10 s) until `ok` holds of the count of admission writers; a new thread names
/// itself once it runs, an ending one leaves the list once it has ended.
async fn wait_for(ok: impl Fn(usize) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok(admission_threads()) {
        assert!(
            Instant::now() < deadline,
            "{what}: {} admission writers",
            admission_threads()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn admission_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "bursar-admit")
        .count()
}

#[tokio::test]
async fn each_ledger_has_an_admission_writer_that_ends_with_it() {
    let before = admission_threads();
    let mut ledgers = Vec::new();
    for _ in 0..5 {
        ledgers.push(temp_ledger().await);
    }
    ledgers.push((
        tempfile::tempdir().unwrap(),
        bursar_ledger::Ledger::open("sqlite::memory:")
            .await
            .unwrap(),
    ));
    wait_for(|n| n == before + 6, "one writer per ledger").await;
    // Clones share one writer.
    let clone = ledgers[0].1.clone();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(admission_threads(), before + 6);
    drop(clone);
    drop(ledgers);
    wait_for(|n| n == before, "writers outlived their ledgers").await;
}
