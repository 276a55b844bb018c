//! Holds: counted like charges, settled by final usage, released, expired, and checked.

mod common;

use bursar_ledger::{HoldState, Ledger, LedgerError, NewHold, UsageCharge};
use common::{record, running, su, submitted, temp_ledger, DAY, HOUR, T0, UNIT};

fn hold(key: &str, account: &str, units: i64, job: Option<&str>) -> NewHold {
    NewHold {
        account: account.to_string(),
        currency: su(),
        amount: units * UNIT,
        cluster: "alpha".to_string(),
        job_ref: job.map(str::to_string),
        placed_at: T0 + HOUR,
        expires_at: T0 + DAY,
        lifetime: None,
        idempotency_key: key.to_string(),
        note: None,
    }
}

async fn setup() -> (tempfile::TempDir, Ledger) {
    let (dir, ledger) = temp_ledger().await;
    ledger.ensure_account("org", None).await.unwrap();
    ledger.ensure_account("physics", Some("org")).await.unwrap();
    ledger
        .set_allocation("org", &su(), 100 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    ledger
        .set_allocation("physics", &su(), 80 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    (dir, ledger)
}

#[tokio::test]
async fn a_hold_counts_like_a_charge_and_final_usage_settles_it() {
    let (_dir, ledger) = setup().await;
    let h = ledger
        .try_place_hold(&hold("h1", "physics", 30, Some("5")))
        .await
        .unwrap();
    let b = &ledger.balance("org", T0 + HOUR).await.unwrap()[0];
    assert_eq!((b.held, b.remaining), (30 * UNIT, Some(70 * UNIT)));
    // A running record does not settle.
    let out = ledger
        .post_usage(
            &[submitted(
                T0 + HOUR,
                running("5", "r1", "physics", 10, T0 + 2 * HOUR),
            )],
            T0 + 2 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(out.settled_holds, 0);
    let out = ledger
        .post_usage(
            &[submitted(
                T0 + HOUR,
                record("5", "r2", "physics", 25, T0 + 3 * HOUR),
            )],
            T0 + 3 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(out.settled_holds, 1);
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(
        (b.charged, b.held, b.remaining),
        (25 * UNIT, 0, Some(55 * UNIT))
    );
    let settled = &ledger.holds(false).await.unwrap()[0];
    assert_eq!((settled.id, settled.state), (h.id, HoldState::Settled));
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// slurmdbd ends a requeued run's record (REQUEUED) and a resized job's record at the resize
/// (RESIZING) while the job goes on in a new record with a later submit time: those records
/// are charged, but the hold stays (and lives on) until a record that ends the job.
#[tokio::test]
async fn a_requeued_or_resized_record_is_charged_and_keeps_the_hold() {
    for state in ["REQUEUED", "RESIZING"] {
        let (_dir, ledger) = setup().await;
        let h = ledger
            .try_place_hold(&hold("h1", "physics", 30, Some("5")))
            .await
            .unwrap();
        let first_run = UsageCharge {
            state: state.to_string(),
            ..submitted(T0 + HOUR, record("5", "r1", "physics", 10, T0 + 2 * HOUR))
        };
        let out = ledger
            .post_usage(&[first_run], T0 + 2 * HOUR)
            .await
            .unwrap();
        assert_eq!((out.charged, out.settled_holds), (1, 0), "{state}");
        let active = ledger.holds(true).await.unwrap();
        assert_eq!(active.len(), 1, "{state}");
        assert_eq!(active[0].id, h.id);
        assert!(
            active[0].expires_at > T0 + DAY,
            "{state}: extended like a running record"
        );
        let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
        assert_eq!((b.charged, b.held), (10 * UNIT, 30 * UNIT), "{state}");

        // The job's next record ends it: charged on its own, and the hold settles.
        let next_run = UsageCharge {
            submit: T0 + 2 * HOUR,
            ..record("5", "r2", "physics", 15, T0 + 4 * HOUR)
        };
        let out = ledger.post_usage(&[next_run], T0 + 4 * HOUR).await.unwrap();
        assert_eq!((out.charged, out.settled_holds), (1, 1), "{state}");
        let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
        assert_eq!((b.charged, b.held), (25 * UNIT, 0), "{state}");
        assert!(ledger.verify().await.unwrap().is_empty());
    }
}

/// slurmctld logs a job it requeues after a node failure (or a preemption) as ended NODE_FAIL
/// (PREEMPTED), and runs it again in a new record under the same id, submitted at the
/// requeue. Such a record is charged, but leaves the hold active (extended like a sighting)
/// and listed among the holds whose cluster must say whether the job runs again. The next
/// run's record takes the hold off that list, and its final record settles it; a job that
/// will not run again has its hold settled by `settle_hold`. A record of an older job under
/// the id lists nothing.
#[tokio::test]
async fn a_node_failed_or_preempted_record_leaves_the_hold_for_its_cluster_to_confirm() {
    for state in bursar_ledger::RERUN_STATES {
        let (_dir, ledger) = setup().await;
        let placed = T0 + HOUR;
        let mut ids = Vec::new();
        for job in ["5", "6", "7"] {
            let h = ledger
                .try_place_hold(&hold(&format!("h{job}"), "physics", 10, Some(job)))
                .await
                .unwrap();
            ids.push(h.id);
        }
        let ended = |job: &str, submit: i64, units: i64| UsageCharge {
            state: state.to_string(),
            ..submitted(submit, record(job, "r1", "physics", units, T0 + 2 * HOUR))
        };
        let out = ledger
            .post_usage(
                &[
                    ended("5", placed, 2),
                    ended("6", placed, 3),
                    // job 7's record is an older job's: submitted an hour before the hold.
                    ended("7", T0, 1),
                ],
                T0 + 2 * HOUR,
            )
            .await
            .unwrap();
        assert_eq!((out.charged, out.settled_holds), (3, 0), "{state}");
        let confirm: Vec<i64> = ledger
            .holds_to_confirm()
            .await
            .unwrap()
            .iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(confirm, [ids[0], ids[1]], "{state}");
        let active = ledger.holds(true).await.unwrap();
        assert_eq!(active.len(), 3, "{state}");
        assert!(
            active[..2].iter().all(|h| h.expires_at > T0 + DAY),
            "{state}: extended like a sighting"
        );

        // Job 5 runs again: its next record takes its hold off the list.
        let rerun = submitted(
            T0 + 2 * HOUR,
            running("5", "r2", "physics", 1, T0 + 3 * HOUR),
        );
        ledger.post_usage(&[rerun], T0 + 3 * HOUR).await.unwrap();
        let confirm = ledger.holds_to_confirm().await.unwrap();
        assert_eq!(
            confirm.iter().map(|h| h.id).collect::<Vec<_>>(),
            [ids[1]],
            "{state}"
        );

        // Job 6 will not run again: its hold is settled, once.
        assert!(ledger
            .settle_hold(ids[1], "ended", T0 + 3 * HOUR)
            .await
            .unwrap());
        assert!(!ledger
            .settle_hold(ids[1], "ended", T0 + 3 * HOUR)
            .await
            .unwrap());
        let six = &ledger.holds_by_id(&[ids[1]]).await.unwrap()[0];
        assert_eq!(
            (six.state, six.reason.as_deref()),
            (HoldState::Settled, Some("ended"))
        );
        assert!(ledger.holds_to_confirm().await.unwrap().is_empty());
        let b = &ledger.balance("physics", placed).await.unwrap()[0];
        assert_eq!((b.charged, b.held), (7 * UNIT, 20 * UNIT), "{state}");

        // Job 5's second run ends: its record settles the hold as usual.
        let done = submitted(
            T0 + 2 * HOUR,
            record("5", "r3", "physics", 4, T0 + 4 * HOUR),
        );
        let out = ledger.post_usage(&[done], T0 + 4 * HOUR).await.unwrap();
        assert_eq!(out.settled_holds, 1, "{state}");
        let active = ledger.holds(true).await.unwrap();
        assert_eq!(
            active.iter().map(|h| h.id).collect::<Vec<_>>(),
            [ids[2]],
            "{state}: only the hold of job 7, whose own record has not come"
        );
        let b = &ledger.balance("physics", placed).await.unwrap()[0];
        assert_eq!((b.charged, b.held), (10 * UNIT, 10 * UNIT), "{state}");
        assert!(ledger.verify().await.unwrap().is_empty());
    }
}

/// Slurm hands out job ids again after its saved state is lost (or `MaxJobId` wraps): a
/// collection that re-reads an older job's records under the id of a held job must neither
/// settle nor extend that hold. A record submitted a little before the hold (the cluster's
/// clock behind bursar's) is still the held job's.
#[tokio::test]
async fn an_older_job_under_a_reused_id_neither_settles_nor_extends_the_hold() {
    let (_dir, ledger) = setup().await;
    let placed = T0 + HOUR;
    let h = ledger
        .try_place_hold(&hold("h1", "physics", 30, Some("5")))
        .await
        .unwrap();
    // The old job 5: submitted an hour before the hold, seen running, then its final record.
    let old_running = running("5", "old-r", "physics", 2, T0 + 20 * HOUR);
    let out = ledger
        .post_usage(&[submitted(T0, old_running)], T0 + 20 * HOUR)
        .await
        .unwrap();
    assert_eq!(out.settled_holds, 0);
    let active = ledger.holds(true).await.unwrap();
    assert_eq!(
        (active[0].id, active[0].expires_at),
        (h.id, T0 + DAY),
        "not extended by the old job's sighting"
    );
    let out = ledger
        .post_usage(
            &[submitted(
                T0,
                record("5", "old", "physics", 7, T0 + 20 * HOUR),
            )],
            T0 + 20 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.settled_holds), (0, 0));
    assert_eq!(out.adjusted, 1, "the old job's usage is charged as usual");
    let b = &ledger.balance("physics", placed).await.unwrap()[0];
    assert_eq!((b.charged, b.held), (7 * UNIT, 30 * UNIT));
    assert_eq!(ledger.holds(true).await.unwrap()[0].id, h.id);

    // The held job itself, its submit time 5 minutes before the hold by the cluster's clock.
    let out = ledger
        .post_usage(
            &[submitted(
                placed - 300,
                record("5", "new", "physics", 12, T0 + 21 * HOUR),
            )],
            T0 + 21 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.settled_holds), (1, 1));
    let b = &ledger.balance("physics", placed).await.unwrap()[0];
    assert_eq!((b.charged, b.held), (19 * UNIT, 0));
    assert!(ledger.holds(true).await.unwrap().is_empty());
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn try_place_hold_refuses_with_the_numbers_of_the_link_that_cannot_cover() {
    let (_dir, ledger) = setup().await;
    ledger
        .post_usage(&[record("1", "r", "org", 60, T0 + HOUR)], T0 + HOUR)
        .await
        .unwrap();
    // physics has 80 left, org only 40.
    match ledger.try_place_hold(&hold("h", "physics", 50, None)).await {
        Err(LedgerError::InsufficientAllocation {
            account,
            currency,
            estimate,
            remaining,
        }) => {
            assert_eq!(account, "org");
            assert_eq!(currency, su());
            assert_eq!((estimate, remaining), (50 * UNIT, 40 * UNIT));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(ledger.holds(false).await.unwrap().is_empty());
    ledger
        .try_place_hold(&hold("h", "physics", 40, None))
        .await
        .unwrap();
    // Nothing left at org now, even for a unit.
    assert!(matches!(
        ledger.try_place_hold(&hold("h2", "physics", 1, None)).await,
        Err(LedgerError::InsufficientAllocation { .. })
    ));
    // place_hold is the unchecked override.
    ledger
        .place_hold(&hold("h3", "physics", 1, None))
        .await
        .unwrap();
}

#[tokio::test]
async fn release_and_expiry_give_the_amount_back() {
    let (_dir, ledger) = setup().await;
    let a = ledger
        .place_hold(&hold("a", "physics", 10, None))
        .await
        .unwrap();
    let b = ledger
        .place_hold(&hold("b", "physics", 20, Some("9")))
        .await
        .unwrap();
    assert!(ledger
        .release_hold(a.id, "cancelled", T0 + 2 * HOUR)
        .await
        .unwrap());
    assert!(!ledger
        .release_hold(a.id, "cancelled", T0 + 2 * HOUR)
        .await
        .unwrap());
    assert!(matches!(
        ledger.release_hold(999, "x", T0).await,
        Err(LedgerError::NotFound { what: "hold", .. })
    ));
    assert_eq!(ledger.expire_holds(T0 + DAY - 1).await.unwrap(), 0);
    assert_eq!(ledger.expire_holds(T0 + DAY).await.unwrap(), 1);
    let holds = ledger.holds(false).await.unwrap();
    assert_eq!(holds[0].state, HoldState::Released);
    assert_eq!(holds[0].reason.as_deref(), Some("cancelled"));
    assert_eq!(holds[1].state, HoldState::Expired);
    assert_eq!(holds[1].id, b.id);
    let physics = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(physics.held, 0);
    // An expired hold is not settled again by its job's usage.
    let out = ledger
        .post_usage(
            &[submitted(
                T0 + HOUR,
                record("9", "r", "physics", 1, T0 + 2 * DAY),
            )],
            T0 + 2 * DAY,
        )
        .await
        .unwrap();
    assert_eq!(out.settled_holds, 0);
    assert!(ledger.verify().await.unwrap().is_empty());
}

#[tokio::test]
async fn holds_are_idempotent_by_key_and_validated() {
    let (_dir, ledger) = setup().await;
    let first = ledger
        .place_hold(&hold("k", "physics", 10, None))
        .await
        .unwrap();
    let again = ledger
        .place_hold(&hold("k", "physics", 10, None))
        .await
        .unwrap();
    assert_eq!(first, again);
    assert!(matches!(
        ledger.place_hold(&hold("k", "physics", 11, None)).await,
        Err(LedgerError::Conflict(_))
    ));
    assert!(matches!(
        ledger.place_hold(&hold("z", "physics", 0, None)).await,
        Err(LedgerError::Invalid(_))
    ));
    assert!(matches!(
        ledger.place_hold(&hold("z", "nobody", 1, None)).await,
        Err(LedgerError::NotFound { .. })
    ));
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 10 * UNIT);
}

#[tokio::test]
async fn a_hold_lives_a_lifetime_past_the_last_sighting_of_its_unfinished_job() {
    let (_dir, ledger) = setup().await;
    // Placed at T0 + 1 h, expiring at T0 + 1 day: a lifetime of 23 h.
    let h = ledger
        .place_hold(&hold("queued", "physics", 10, Some("7")))
        .await
        .unwrap();
    let lifetime = DAY - HOUR;
    let expiry = |ledger: &Ledger| {
        let ledger = ledger.clone();
        async move {
            let holds = ledger.holds(true).await.unwrap();
            holds.iter().find(|x| x.id == h.id).map(|x| x.expires_at)
        }
    };
    // Seen pending: it now expires a lifetime after the sighting.
    let pending = |at: i64| UsageCharge {
        state: "PENDING".to_string(),
        ..submitted(T0 + HOUR, running("7", &format!("p{at}"), "physics", 0, at))
    };
    ledger
        .post_usage(&[pending(T0 + 2 * HOUR)], T0 + 2 * HOUR)
        .await
        .unwrap();
    assert_eq!(expiry(&ledger).await, Some(T0 + 2 * HOUR + lifetime));
    // Still queued past its first expiry: seen again, it moves a whole lifetime on from there,
    // the original lifetime each time (not growing).
    let later = T0 + DAY + 5 * HOUR;
    assert_eq!(ledger.expire_holds(T0 + DAY).await.unwrap(), 0);
    ledger.post_usage(&[pending(later)], later).await.unwrap();
    assert_eq!(expiry(&ledger).await, Some(later + lifetime));
    ledger
        .post_usage(&[pending(later + HOUR)], later + HOUR)
        .await
        .unwrap();
    assert_eq!(expiry(&ledger).await, Some(later + HOUR + lifetime));
    // A job of another cluster with the same id moves nothing.
    let other = UsageCharge {
        cluster: "beta".to_string(),
        ..pending(later + 2 * HOUR)
    };
    ledger.post_usage(&[other], later + 2 * HOUR).await.unwrap();
    assert_eq!(expiry(&ledger).await, Some(later + HOUR + lifetime));
    // Held on the allocation all along; its final record settles it.
    let b = &ledger.balance("physics", T0 + HOUR).await.unwrap()[0];
    assert_eq!(b.held, 10 * UNIT);
    let out = ledger
        .post_usage(
            &[submitted(
                T0 + HOUR,
                record("7", "done", "physics", 4, later + 3 * HOUR),
            )],
            later + 3 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(out.settled_holds, 1);
    assert_eq!(expiry(&ledger).await, None);
    // Not seen again: a hold expires a lifetime after its last sighting.
    let h2 = ledger
        .place_hold(&hold("gone", "physics", 5, Some("8")))
        .await
        .unwrap();
    ledger
        .post_usage(
            &[UsageCharge {
                job_id: "8".into(),
                display_id: "8".into(),
                ..pending(T0 + 3 * HOUR)
            }],
            T0 + 3 * HOUR,
        )
        .await
        .unwrap();
    assert_eq!(
        ledger
            .expire_holds(T0 + 3 * HOUR + lifetime - 1)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        ledger.expire_holds(T0 + 3 * HOUR + lifetime).await.unwrap(),
        1
    );
    let gone = ledger.holds(false).await.unwrap();
    assert_eq!(
        gone.iter().find(|x| x.id == h2.id).map(|x| x.state),
        Some(HoldState::Expired)
    );
    assert!(ledger.verify().await.unwrap().is_empty());
}

/// `holds_by_id` reads the holds named, `holds_at` the holds open at an instant: placed by
/// then, and active or closed after it — as a forecast counts them, whatever `at` is.
#[tokio::test]
async fn holds_are_read_by_id_and_as_they_stood_at_an_instant() {
    let (_dir, ledger) = setup().await;
    let place = |key: &'static str, placed_at: i64| {
        let ledger = ledger.clone();
        async move {
            ledger
                .try_place_hold(&NewHold {
                    placed_at,
                    ..hold(key, "physics", 1, None)
                })
                .await
                .unwrap()
                .id
        }
    };
    let early = place("early", T0 + HOUR).await;
    let closed_soon = place("closed-soon", T0 + HOUR).await;
    let closed_late = place("closed-late", T0 + HOUR).await;
    let late = place("late", T0 + 5 * HOUR).await;
    assert!(ledger
        .release_hold(closed_soon, "cancelled", T0 + 2 * HOUR)
        .await
        .unwrap());
    assert!(ledger
        .release_hold(closed_late, "cancelled", T0 + 4 * HOUR)
        .await
        .unwrap());

    let ids = |holds: Vec<bursar_ledger::HoldRow>| holds.iter().map(|h| h.id).collect::<Vec<_>>();
    let named = ledger
        .holds_by_id(&[late, closed_soon, 9_999, early])
        .await
        .unwrap();
    assert_eq!(ids(named.clone()), [early, closed_soon, late]);
    let soon = &named[1];
    assert_eq!(
        (soon.state, soon.closed_at, soon.account.as_str()),
        (HoldState::Released, Some(T0 + 2 * HOUR), "physics")
    );
    assert!(ledger.holds_by_id(&[]).await.unwrap().is_empty());
    assert_eq!(ledger.active_holds_count().await.unwrap(), 2);

    // Before any was placed; while all of the first three were open; after one closed; at
    // its closing second (closed by then); after both closed, before and after the last one.
    let cases = [
        (T0, vec![]),
        (T0 + HOUR, vec![early, closed_soon, closed_late]),
        (T0 + 2 * HOUR - 1, vec![early, closed_soon, closed_late]),
        (T0 + 2 * HOUR, vec![early, closed_late]),
        (T0 + 4 * HOUR, vec![early]),
        (T0 + 5 * HOUR, vec![early, late]),
    ];
    for (at, open) in cases {
        let got = ids(ledger.holds_at(at).await.unwrap());
        assert_eq!(got, open, "at T0 + {} s", at - T0);
        // The same as filtering every hold, as forecasts did.
        let every = ledger.holds(false).await.unwrap();
        let filtered: Vec<_> = every
            .into_iter()
            .filter(|h| h.placed_at <= at && h.closed_at.is_none_or(|c| c > at))
            .map(|h| h.id)
            .collect();
        assert_eq!(got, filtered, "at T0 + {} s", at - T0);
    }
}
