//! The admission writer's thread ends with its ledger (its own test binary: it counts the
//! process's threads).

mod common;

use std::time::{Duration, Instant};

use common::temp_ledger;

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
    assert_eq!(admission_threads(), before + 6);
    // Clones share one writer.
    let clone = ledgers[0].1.clone();
    assert_eq!(admission_threads(), before + 6);
    drop(clone);
    drop(ledgers);
    let deadline = Instant::now() + Duration::from_secs(10);
    while admission_threads() > before {
        assert!(
            Instant::now() < deadline,
            "{} admission writers outlived their ledgers",
            admission_threads() - before
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
