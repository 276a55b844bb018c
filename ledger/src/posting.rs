//! Posting rules: which journal entries a batch of priced job records produces.
//!
//! Pure: backends resolve the batch to ids (labels, accounts, the ledger's job numbers), load
//! the current posting of each known identity and which of its revisions were ever posted, call
//! [`plan_usage`], and write the plan. The rules, per record, in batch order:
//!
//! - unknown identity → one `charge`;
//! - known identity, revision already posted (now or ever) → nothing;
//! - known identity whose posting is final, record not final → nothing (a stale record);
//! - otherwise, when everything a balance or a report groups by is unchanged (account,
//!   currency, user, partition, qos, UTC day of `effective_at`, and the allocations covering
//!   `effective_at`) → one adjustment of the difference, written even when the difference is
//!   0 so that the journal records every revision;
//! - otherwise → a reversal of the old posting where it was (−old, at the old account, time and
//!   dimensions, job count −1) and a re-post of the new one (job count +1). Never a second
//!   `charge`.

use std::borrow::Cow;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::calendar::day_start;
use crate::error::{sub, Result};
use crate::materialize::{Effects, Id, UsageDims};
use crate::model::EntryKind;

/// What a journal row is; `code` is what storage keeps, [`EntryType::kind`] what the API shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryType {
    Deposit,
    /// The first posting of a job identity.
    Charge,
    /// A job's new revision in the same groups: the difference.
    Adjust,
    /// A job's old posting taken back where it was.
    Reverse,
    /// A job's new revision posted where it belongs, after a reversal.
    Repost,
    /// An adjustment by hand.
    Manual,
    Refund,
    Hold,
    Release,
}

impl EntryType {
    pub const ALL: [EntryType; 9] = [
        EntryType::Deposit,
        EntryType::Charge,
        EntryType::Adjust,
        EntryType::Reverse,
        EntryType::Repost,
        EntryType::Manual,
        EntryType::Refund,
        EntryType::Hold,
        EntryType::Release,
    ];

    pub fn code(self) -> i64 {
        match self {
            EntryType::Deposit => 1,
            EntryType::Charge => 2,
            EntryType::Adjust => 3,
            EntryType::Reverse => 4,
            EntryType::Repost => 5,
            EntryType::Manual => 6,
            EntryType::Refund => 7,
            EntryType::Hold => 8,
            EntryType::Release => 9,
        }
    }

    pub fn from_code(code: i64) -> Option<EntryType> {
        EntryType::ALL.into_iter().find(|t| t.code() == code)
    }

    pub fn kind(self) -> EntryKind {
        match self {
            EntryType::Deposit => EntryKind::Deposit,
            EntryType::Charge => EntryKind::Charge,
            EntryType::Adjust | EntryType::Reverse | EntryType::Repost | EntryType::Manual => {
                EntryKind::Adjustment
            }
            EntryType::Refund => EntryKind::Refund,
            EntryType::Hold => EntryKind::Hold,
            EntryType::Release => EntryKind::Release,
        }
    }

    /// +1 where a job's money starts counting in a group, −1 where it stops.
    pub fn job_count(self) -> i64 {
        match self {
            EntryType::Charge | EntryType::Repost => 1,
            EntryType::Reverse => -1,
            _ => 0,
        }
    }
}

/// The postable content of a job record (or of a job's current posting), in ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting<'a> {
    pub revision: &'a str,
    pub is_final: bool,
    pub account: Id,
    pub currency: Id,
    pub cluster: Id,
    pub user: Id,
    pub partition: Id,
    pub qos: Id,
    pub state: Id,
    pub price_version: Id,
    /// The record's cost; for a current posting, what the job's entries add up to.
    pub amount: i64,
    pub effective_at: i64,
}

impl Posting<'_> {
    pub fn dims(&self) -> UsageDims {
        UsageDims {
            user: self.user,
            cluster: self.cluster,
            partition: self.partition,
            qos: self.qos,
        }
    }
}

/// One record of a batch, resolved: `job` is the ledger's number for its identity (an existing
/// one, or a fresh one the backend reserved).
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub job: Id,
    pub posting: Posting<'a>,
    pub note: Option<&'a str>,
}

/// A journal row to insert; `id` and `posted_at` are added by the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    pub entry_type: EntryType,
    pub account: Id,
    pub currency: Id,
    pub amount: i64,
    pub effective_at: i64,
    pub job: Option<Id>,
    pub revision: Option<&'a str>,
    pub is_final: Option<bool>,
    pub cluster: Id,
    pub user: Id,
    pub partition: Id,
    pub qos: Id,
    pub state: Id,
    pub price_version: Id,
    pub hold_id: Option<Id>,
    /// The idempotency key of a non-job entry.
    pub key: Option<String>,
    pub note: Option<Cow<'a, str>>,
}

impl<'a> Entry<'a> {
    /// An entry that is not a job's: a deposit, manual adjustment or refund, hold or release.
    pub fn keyed(
        entry_type: EntryType,
        key: String,
        account: Id,
        currency: Id,
        amount: i64,
        effective_at: i64,
    ) -> Entry<'a> {
        Entry {
            entry_type,
            account,
            currency,
            amount,
            effective_at,
            job: None,
            revision: None,
            is_final: None,
            cluster: 0,
            user: 0,
            partition: 0,
            qos: 0,
            state: 0,
            price_version: 0,
            hold_id: None,
            key: Some(key),
            note: None,
        }
    }

    fn job(
        entry_type: EntryType,
        job: Id,
        p: &Posting<'a>,
        amount: i64,
        note: Option<Cow<'a, str>>,
    ) -> Entry<'a> {
        Entry {
            entry_type,
            account: p.account,
            currency: p.currency,
            amount,
            effective_at: p.effective_at,
            job: Some(job),
            revision: Some(p.revision),
            is_final: Some(p.is_final),
            cluster: p.cluster,
            user: p.user,
            partition: p.partition,
            qos: p.qos,
            state: p.state,
            price_version: p.price_version,
            hold_id: None,
            key: None,
            note,
        }
    }
}

/// The new current posting of a job: its latest entry and its net amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUpdate {
    pub job: Id,
    /// Index into [`PostPlan::entries`].
    pub entry: usize,
    pub amount: i64,
}

/// What a batch writes.
#[derive(Debug, Default)]
pub struct PostPlan<'a> {
    pub entries: Vec<Entry<'a>>,
    /// One per job the batch changed, in first-touched order.
    pub jobs: Vec<JobUpdate>,
    pub charged: u64,
    pub adjusted: u64,
    pub unchanged: u64,
}

/// Plans a batch. `current` holds the current posting of every known job of the batch;
/// `posted` the `(job, revision)` pairs of those jobs that were charged, adjusted or re-posted
/// before (their other revisions are new). Every entry is also fed to `effects`.
pub fn plan_usage<'a>(
    batch: &[Incoming<'a>],
    current: &FxHashMap<Id, Posting<'a>>,
    posted: &FxHashSet<(Id, &str)>,
    effects: &mut Effects<'_>,
) -> Result<PostPlan<'a>> {
    // Changes made by this batch, on top of `current`: job → (posting, latest entry index).
    let mut changed: FxHashMap<Id, (Posting<'a>, usize)> = FxHashMap::default();
    let mut seen_here: FxHashSet<(Id, &'a str)> = FxHashSet::default();
    let mut order: Vec<Id> = Vec::new();
    let mut plan = PostPlan {
        entries: Vec::with_capacity(batch.len()),
        ..PostPlan::default()
    };

    for record in batch {
        let job = record.job;
        let new = record.posting;
        let note = record.note.map(Cow::Borrowed);
        let old = match changed.get(&job) {
            Some((p, _)) => Some(*p),
            None => current.get(&job).copied(),
        };
        let Some(old) = old else {
            effects.usage(
                new.account,
                new.currency,
                new.effective_at,
                new.amount,
                1,
                new.dims(),
            )?;
            plan.entries
                .push(Entry::job(EntryType::Charge, job, &new, new.amount, note));
            changed.insert(job, (new, plan.entries.len() - 1));
            seen_here.insert((job, new.revision));
            order.push(job);
            plan.charged += 1;
            continue;
        };

        let posted_before = old.revision == new.revision
            || seen_here.contains(&(job, new.revision))
            || posted.contains(&(job, new.revision));
        if posted_before || (old.is_final && !new.is_final) {
            plan.unchanged += 1;
            continue;
        }

        if same_groups(&old, &new, effects) {
            let diff = sub(new.amount, old.amount, "job adjustment")?;
            effects.usage(
                new.account,
                new.currency,
                new.effective_at,
                diff,
                0,
                new.dims(),
            )?;
            plan.entries
                .push(Entry::job(EntryType::Adjust, job, &new, diff, note));
        } else {
            let reversal = sub(0, old.amount, "job reversal")?;
            effects.usage(
                old.account,
                old.currency,
                old.effective_at,
                reversal,
                -1,
                old.dims(),
            )?;
            plan.entries.push(Entry::job(
                EntryType::Reverse,
                job,
                &old,
                reversal,
                Some(Cow::Owned(format!(
                    "reversed for revision {}",
                    new.revision
                ))),
            ));
            effects.usage(
                new.account,
                new.currency,
                new.effective_at,
                new.amount,
                1,
                new.dims(),
            )?;
            plan.entries
                .push(Entry::job(EntryType::Repost, job, &new, new.amount, note));
        }
        if changed.insert(job, (new, plan.entries.len() - 1)).is_none() {
            order.push(job);
        }
        seen_here.insert((job, new.revision));
        plan.adjusted += 1;
    }

    plan.jobs = order
        .into_iter()
        .map(|job| {
            let (posting, entry) = changed[&job];
            JobUpdate {
                job,
                entry,
                amount: posting.amount,
            }
        })
        .collect();
    Ok(plan)
}

/// Whether a new revision can be posted as an adjustment at its own `effective_at`: the
/// difference then lands in the same balance and report groups as the old posting.
fn same_groups(old: &Posting<'_>, new: &Posting<'_>, effects: &mut Effects<'_>) -> bool {
    old.account == new.account
        && old.currency == new.currency
        && old.user == new.user
        && old.partition == new.partition
        && old.qos == new.qos
        && day_start(old.effective_at) == day_start(new.effective_at)
        && effects.same_cover(
            old.currency,
            old.account,
            old.effective_at,
            new.account,
            new.effective_at,
        )
}

/// An active hold about to be placed or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenHold {
    pub id: Id,
    pub account: Id,
    pub currency: Id,
    pub cluster: Id,
    pub amount: i64,
    pub placed_at: i64,
}

/// The `hold` entry of a newly placed hold.
pub fn hold_entry<'a>(hold: &OpenHold, note: Option<&'a str>) -> Entry<'a> {
    let mut entry = Entry::keyed(
        EntryType::Hold,
        format!("hold:{}", hold.id),
        hold.account,
        hold.currency,
        hold.amount,
        hold.placed_at,
    );
    entry.cluster = hold.cluster;
    entry.hold_id = Some(hold.id);
    entry.note = note.map(Cow::Borrowed);
    entry
}

/// The `release` entries closing `holds` (at each hold's `placed_at`, so that hold and release
/// cancel in every period), fed to `effects`.
pub fn release_entries<'a>(
    holds: &[OpenHold],
    reason: &'a str,
    effects: &mut Effects<'_>,
) -> Result<Vec<Entry<'a>>> {
    let mut entries = Vec::with_capacity(holds.len());
    for hold in holds {
        let amount = sub(0, hold.amount, "hold release")?;
        effects.hold(hold.account, hold.currency, hold.placed_at, amount)?;
        let mut entry = hold_entry(hold, Some(reason));
        entry.entry_type = EntryType::Release;
        entry.key = Some(format!("release:{}", hold.id));
        entry.amount = amount;
        entries.push(entry);
    }
    Ok(entries)
}

/// Key prefixes the ledger writes itself; a caller's key may not start with one.
pub const RESERVED_KEY_PREFIXES: [&str; 7] = [
    "charge:",
    "adjust:",
    "reverse:",
    "repost:",
    "hold:",
    "release:",
    "allocation:",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::materialize::AllocSpan;
    use crate::tree::AccountTree;

    fn posting(revision: &str, amount: i64, at: i64, is_final: bool) -> Posting<'_> {
        Posting {
            revision,
            is_final,
            account: 2,
            currency: 10,
            cluster: 20,
            user: 30,
            partition: 0,
            qos: 0,
            state: 40,
            price_version: 0,
            amount,
            effective_at: at,
        }
    }

    #[test]
    fn charges_adjusts_reverses_and_ignores_what_was_seen() {
        let tree = AccountTree::from_pairs([(1, None), (2, Some(1)), (3, Some(1))]);
        let allocs: Vec<AllocSpan> = Vec::new();
        let mut fx = Effects::new(&tree, &allocs);
        let mut moved = posting("r3", 9, 100, true);
        moved.account = 3;
        let batch = [
            Incoming {
                job: 7,
                posting: posting("r1", 5, 100, false),
                note: None,
            },
            Incoming {
                job: 7,
                posting: posting("r1", 5, 100, false),
                note: None,
            },
            Incoming {
                job: 7,
                posting: posting("r2", 8, 200, true),
                note: None,
            },
            Incoming {
                job: 7,
                posting: posting("r9", 1, 200, false),
                note: None,
            },
            Incoming {
                job: 7,
                posting: moved,
                note: None,
            },
            Incoming {
                job: 7,
                posting: posting("r1", 5, 100, false),
                note: None,
            },
        ];
        let plan = plan_usage(
            &batch,
            &FxHashMap::default(),
            &FxHashSet::default(),
            &mut fx,
        )
        .unwrap();
        let got: Vec<(EntryType, Id, i64)> = plan
            .entries
            .iter()
            .map(|e| (e.entry_type, e.account, e.amount))
            .collect();
        assert_eq!(
            got,
            [
                (EntryType::Charge, 2, 5),
                (EntryType::Adjust, 2, 3),
                (EntryType::Reverse, 2, -8),
                (EntryType::Repost, 3, 9)
            ]
        );
        assert_eq!((plan.charged, plan.adjusted, plan.unchanged), (1, 2, 3));
        assert_eq!(
            plan.jobs,
            [JobUpdate {
                job: 7,
                entry: 3,
                amount: 9
            }]
        );
    }
}
