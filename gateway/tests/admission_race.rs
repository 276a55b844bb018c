//! Racing submissions cannot overspend: an allocation that covers exactly 37 estimates admits
//! exactly 37 of 500 concurrent submissions, and `available` is never negative — not at the
//! end and not while they run.

mod admission_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use admission_support::*;

const SUBMISSIONS: usize = 500;
const COVERED: i64 = 37;
const ESTIMATE: i64 = 4_976_562; // job() on onprem batch, 1 h

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn five_hundred_racing_submissions_admit_exactly_what_the_allocation_covers() {
    let f = fixture().await;
    assert_eq!(
        f.estimate("onprem", "batch", &job(), Some(1000), 60),
        ESTIMATE
    );
    let allocation = COVERED * ESTIMATE;
    f.allocate("physics", "su", allocation).await;

    // Watch the balance while the submissions run: they start once it has looked once.
    let done = Arc::new(AtomicBool::new(false));
    let (looked, first_look) = tokio::sync::oneshot::channel();
    let watcher = {
        let ledger = f.app.ledger.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut lowest = i64::MAX;
            let mut looks = 0u32;
            let mut looked = Some(looked);
            while !done.load(Ordering::Relaxed) {
                for row in ledger.balances(now()).await.unwrap() {
                    if row.currency.as_str() == "su" {
                        if let Some(available) = row.available {
                            lowest = lowest.min(available);
                        }
                    }
                }
                looks += 1;
                if let Some(looked) = looked.take() {
                    let _ = looked.send(());
                }
                tokio::task::yield_now().await;
            }
            (lowest, looks)
        })
    };

    first_look.await.unwrap();
    let start = Arc::new(tokio::sync::Barrier::new(SUBMISSIONS));
    let tasks: Vec<_> = (0..SUBMISSIONS)
        .map(|_| {
            let admission = f.admission.clone();
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                admission.submit(&alice(), job(), None).await
            })
        })
        .collect();
    let mut admitted = Vec::new();
    let mut refused = 0;
    let mut lost_at_the_hold = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(submitted) => admitted.push(submitted),
            Err(e) => {
                assert_eq!(
                    (e.status(), e.code()),
                    (402, "insufficient_allocation"),
                    "{e}"
                );
                let reason = e.details()["clusters"][0]["reason"].to_string();
                if reason.contains("another submission took the allocation first") {
                    lost_at_the_hold += 1;
                }
                refused += 1;
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let (lowest, looks) = watcher.await.unwrap();

    assert_eq!(admitted.len(), COVERED as usize);
    assert_eq!(refused, SUBMISSIONS - COVERED as usize);
    assert!(admitted
        .iter()
        .all(|s| s.cluster == "onprem" && s.estimate == ESTIMATE));
    // How many quoted an affordable job and were then stopped by the ledger's serialized
    // check depends on how the tasks interleave (none at all on a busy machine with two
    // cores); the next test makes that interleaving happen.
    eprintln!("{lost_at_the_hold} of {refused} refusals came from the hold, not the quote");
    eprintln!("the balance was looked at {looks} times while they ran");
    assert!(lowest >= 0, "available went negative: {lowest}");

    let balance = f.balance("physics", "su").await;
    assert_eq!(balance.held, COVERED * ESTIMATE);
    assert!(balance.held <= allocation);
    assert_eq!(balance.remaining, Some(0));
    assert_eq!(balance.available, Some(0));
    assert_eq!(
        f.app.ledger.holds(true).await.unwrap().len(),
        COVERED as usize
    );
    assert_eq!(f.onprem.submitted().len(), COVERED as usize);
    assert_eq!(
        f.app.ledger.api_jobs(None, None).await.unwrap().len(),
        COVERED as usize
    );
    assert!(f.app.ledger.verify().await.unwrap().is_empty());
}

/// The quote is a preview and the hold is the decision: a submission whose balances were read
/// before another submission's hold (admission reads them through a cache that its own holds do
/// not empty, for up to the same second) is refused by the ledger's serialized check, with a
/// reason that says so. The race above may or may not produce this interleaving; this test
/// produces it every time.
#[tokio::test]
async fn a_submission_that_read_its_balance_before_another_hold_is_refused_at_the_hold() {
    // The second submission meets the first one's cached view only within the same second;
    // a run that straddles a second is tried again with a fresh ledger.
    for _ in 0..10 {
        let f = fixture().await;
        f.allocate("physics", "su", ESTIMATE).await;
        // Pinned: a cluster that cannot be paid for at all would send the second quote back to
        // the ledger before it tries.
        let onprem = || job_with(serde_json::json!({"clusters": ["onprem"]}));
        let started = now();
        let first = f.admission.submit(&alice(), onprem(), None).await.unwrap();
        let second = f.admission.submit(&alice(), onprem(), None).await;
        if now() != started {
            continue;
        }
        assert_eq!(first.cluster, "onprem");
        let e = second.unwrap_err();
        assert_eq!((e.status(), e.code()), (402, "insufficient_allocation"));
        let refused = &e.details()["clusters"][0];
        assert_eq!(refused["cluster"], "onprem");
        assert_eq!(refused["remaining"], "0.00");
        assert_eq!(
            refused["reason"],
            "another submission took the allocation first: physics has 0.00 su left, the job \
             needs 4.976562 su"
        );
        assert_eq!(f.balance("physics", "su").await.held, ESTIMATE);
        assert_eq!(f.onprem.submitted().len(), 1);
        assert_eq!(f.app.ledger.api_jobs(None, None).await.unwrap().len(), 1);
        return;
    }
    panic!("ten tries each straddled a second");
}
