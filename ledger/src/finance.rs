//! Finance reads over the journal: an account's statement for a period (which reconciles to
//! the micro), the journal's usage entries in a period (for exports), and the top users or
//! jobs by cost. The assembly is pure ([`statement`], [`top`]); [`crate::Ledger`] reads the
//! journal, the tree and the allocations and hands them over.
//!
//! **Statement semantics.** For account `A`, currency `C` and period `[from, to)`:
//!
//! - the *window* starts at the earliest start of `A`'s own allocations in `C` that overlap the
//!   period (or at `from` when there is none, or when that is later);
//! - `balance(t)` = Σ deposits to `A` itself in `C` with `effective_at ∈ [window, t)` − Σ usage
//!   (charges, adjustments, refunds) of `A`'s subtree in `C` with `effective_at ∈ [window, t)`;
//! - `opening = balance(from)`, `closing = balance(to)`, both computed from the journal
//!   independently of the movements;
//! - the movements are every entry of the subtree (deposits: `A`'s own) in `C` with
//!   `effective_at ∈ [from, to)`, so `opening + deposits − charges + refunds − adjustments =
//!   closing` exactly (adjustments are signed as usage: a positive adjustment is more usage).
//!   Holds and releases are listed as `held` movements and do not enter the identity.
//!
//! When the period is exactly one allocation's `[start, end)`, `closing` is that allocation's
//! `amount − charged`.

use std::collections::{BTreeMap, HashMap};

use bursar_pricing::Currency;

use crate::calendar::SECONDS_PER_DAY;
use crate::error::{add, sub, LedgerError, Result};
use crate::model::{AllocationRow, EntryKind, JournalEntry, JournalQuery};
use crate::names::{check_account, check_currency};
use crate::tree::AccountTree;
use crate::Ledger;

/// An account's statement in one currency for `[from, to)`; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub account: String,
    pub currency: Currency,
    pub from: i64,
    pub to: i64,
    /// Where the opening balance starts counting.
    pub window_start: i64,
    pub opening: i64,
    /// Σ deposit entries (signed: a deposit may lower an allocation).
    pub deposits: i64,
    /// Σ charge entries.
    pub charges: i64,
    /// Usage given back, positive (−Σ refund entries).
    pub refunds: i64,
    /// Σ adjustment entries, signed as usage.
    pub adjustments: i64,
    /// Σ hold and release entries: the net change of what is held.
    pub held: i64,
    pub closing: i64,
    /// Every movement, in posting order.
    pub lines: Vec<JournalEntry>,
}

impl Statement {
    /// `opening + deposits − charges + refunds − adjustments`, which equals `closing`.
    pub fn expected_closing(&self) -> Result<i64> {
        let x = add(self.opening, self.deposits, "statement")?;
        let x = sub(x, self.charges, "statement")?;
        let x = add(x, self.refunds, "statement")?;
        sub(x, self.adjustments, "statement")
    }
}

/// Where the opening balance of `account`'s statement in `currency` for `[from, to)` starts
/// counting: the earliest start of the account's own allocations in the currency that overlap
/// the period, or `from` when there is none or when that is later.
pub fn window_start(
    allocations: &[AllocationRow],
    account: &str,
    currency: &Currency,
    from: i64,
    to: i64,
) -> i64 {
    allocations
        .iter()
        .filter(|a| a.account == account && a.currency == *currency)
        .filter(|a| a.start < to && from < a.end)
        .map(|a| a.start)
        .min()
        .map_or(from, |s| s.min(from))
}

/// The balance effect of an entry: deposits add, usage subtracts, holds don't count.
fn effect(e: &JournalEntry) -> Result<i64> {
    Ok(match e.kind {
        EntryKind::Deposit => e.amount,
        k if k.is_usage() => e.amount.checked_neg().ok_or_else(overflow)?,
        _ => 0,
    })
}

/// Builds the statement of `account` in `currency` for `[from, to)` from the whole journal:
/// the reference computation (see the module documentation), which [`Ledger::statement`]
/// answers without reading the whole journal ([`statement_of`]).
pub fn statement(
    tree: &AccountTree<String>,
    allocations: &[AllocationRow],
    journal: &[JournalEntry],
    account: &str,
    currency: &Currency,
    from: i64,
    to: i64,
) -> Result<Statement> {
    let name = account.to_string();
    let window_start = window_start(allocations, account, currency, from, to);
    let mut opening = 0;
    let mut closing = 0;
    let mut lines = Vec::new();
    for e in journal {
        if e.currency != *currency || e.effective_at < window_start || e.effective_at >= to {
            continue;
        }
        let relevant = match e.kind {
            EntryKind::Deposit => e.account == account,
            _ => tree.is_in_subtree(&e.account, &name),
        };
        if !relevant {
            continue;
        }
        let effect = effect(e)?;
        closing = add(closing, effect, "statement closing")?;
        if e.effective_at < from {
            opening = add(opening, effect, "statement opening")?;
        } else {
            lines.push(e.clone());
        }
    }
    let st = statement_of(account, currency, from, to, window_start, opening, lines)?;
    if st.closing != closing {
        return Err(LedgerError::Storage(format!(
            "statement of {account:?} in {currency}: the movements close at {}, the journal at \
             {closing}",
            st.closing
        )));
    }
    Ok(st)
}

/// The statement with this opening balance and these movements (the relevant entries with
/// `effective_at ∈ [from, to)`, in posting order): sums them by kind and closes.
pub fn statement_of(
    account: &str,
    currency: &Currency,
    from: i64,
    to: i64,
    window_start: i64,
    opening: i64,
    lines: Vec<JournalEntry>,
) -> Result<Statement> {
    let mut st = Statement {
        account: account.to_string(),
        currency: currency.clone(),
        from,
        to,
        window_start,
        opening,
        deposits: 0,
        charges: 0,
        refunds: 0,
        adjustments: 0,
        held: 0,
        closing: opening,
        lines: Vec::new(),
    };
    for e in &lines {
        st.closing = add(st.closing, effect(e)?, "statement closing")?;
        match e.kind {
            EntryKind::Deposit => st.deposits = add(st.deposits, e.amount, "deposits")?,
            EntryKind::Charge => st.charges = add(st.charges, e.amount, "charges")?,
            EntryKind::Refund => st.refunds = sub(st.refunds, e.amount, "refunds")?,
            EntryKind::Adjustment => st.adjustments = add(st.adjustments, e.amount, "adjustments")?,
            EntryKind::Hold | EntryKind::Release => st.held = add(st.held, e.amount, "held")?,
        }
    }
    st.lines = lines;
    if st.expected_closing()? != st.closing {
        return Err(LedgerError::Storage(format!(
            "statement of {account:?} in {currency} does not reconcile: expected {}, closing {}",
            st.expected_closing()?,
            st.closing
        )));
    }
    Ok(st)
}

fn overflow() -> LedgerError {
    LedgerError::Invalid("amount overflow".to_string())
}

/// What [`top`] ranks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopBy {
    User,
    /// A job identity: cluster, job id and submit time.
    Job,
}

/// One ranked line: a user (or a job: `cluster`, `job_id`, its display id, user and account)
/// with its net usage in one currency over the period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopRow {
    pub currency: Currency,
    pub user: String,
    pub cluster: Option<String>,
    pub job_id: Option<String>,
    pub display_id: Option<String>,
    pub account: Option<String>,
    pub amount: i64,
    /// Job identities counted (net of reversals).
    pub jobs: i64,
}

/// The largest net usage per user or job in `[from, to)`, per currency, largest first (ties
/// by name), at most `limit` per currency. Entries without a user (manual ones) are left out.
pub fn top(
    journal: &[JournalEntry],
    by: TopBy,
    from: i64,
    to: i64,
    currency: Option<&Currency>,
    limit: usize,
) -> Result<Vec<TopRow>> {
    type Key = (String, String, Option<(String, String, i64)>);
    let mut groups: BTreeMap<Key, (i64, i64, Option<String>, Option<String>)> = BTreeMap::new();
    for e in journal {
        if !e.kind.is_usage() || e.effective_at < from || e.effective_at >= to {
            continue;
        }
        if currency.is_some_and(|c| *c != e.currency) {
            continue;
        }
        let Some(user) = &e.user else { continue };
        let job = match by {
            TopBy::User => None,
            TopBy::Job => match (&e.cluster, &e.job_id, e.submit) {
                (Some(c), Some(j), Some(s)) => Some((c.clone(), j.clone(), s)),
                _ => continue,
            },
        };
        let g = groups
            .entry((e.currency.as_str().to_string(), user.clone(), job))
            .or_default();
        g.0 = add(g.0, e.amount, "top amount")?;
        g.1 = add(g.1, e.job_count, "top jobs")?;
        if by == TopBy::Job {
            g.2 = e.display_id.clone().or(g.2.take());
            g.3 = Some(e.account.clone());
        }
    }
    let mut per_currency: HashMap<String, Vec<TopRow>> = HashMap::new();
    for ((currency, user, job), (amount, jobs, display, account)) in groups {
        if amount == 0 && jobs == 0 {
            continue;
        }
        let (cluster, job_id) = match job {
            Some((c, j, _)) => (Some(c), Some(j)),
            None => (None, None),
        };
        per_currency
            .entry(currency.clone())
            .or_default()
            .push(TopRow {
                currency: Currency::new(&currency),
                user,
                cluster,
                job_id,
                display_id: display,
                account,
                amount,
                jobs,
            });
    }
    let mut currencies: Vec<String> = per_currency.keys().cloned().collect();
    currencies.sort();
    let mut rows = Vec::new();
    for c in currencies {
        let mut list = per_currency.remove(&c).unwrap_or_default();
        list.sort_by(|a, b| {
            b.amount
                .cmp(&a.amount)
                .then_with(|| a.user.cmp(&b.user))
                .then_with(|| a.cluster.cmp(&b.cluster))
                .then_with(|| a.job_id.cmp(&b.job_id))
        });
        list.truncate(limit);
        rows.extend(list);
    }
    Ok(rows)
}

impl Ledger {
    /// [`Ledger::usage_report`] with every account's rows including its subtree's usage
    /// (see [`crate::report::roll_up`]).
    pub async fn usage_report_rollup(
        &self,
        from: i64,
        to: i64,
        group_by: &[crate::model::GroupKey],
    ) -> Result<crate::model::UsageReport> {
        let report = self.usage_report(from, to, group_by).await?;
        let accounts = self.storage.accounts().await?;
        let tree = AccountTree::from_pairs(accounts.into_iter().map(|a| (a.name, a.parent)));
        crate::report::roll_up(report, &tree)
    }

    /// The statement of `account` in `currency` for `[from, to)`; see [`crate::finance`].
    pub async fn statement(
        &self,
        account: &str,
        currency: &Currency,
        from: i64,
        to: i64,
    ) -> Result<Statement> {
        check_account(account)?;
        check_currency(currency)?;
        if from >= to {
            return Err(LedgerError::Invalid(format!(
                "statement period [{from}, {to}) is empty"
            )));
        }
        let allocations = self.storage.allocations().await?;
        let window_start = window_start(&allocations, account, currency, from, to);
        let reads = self
            .storage
            .statement_reads(account, currency, window_start, from, to)
            .await?
            .ok_or_else(|| LedgerError::not_found("account", account))?;
        let opening = sub(
            reads.deposits_before,
            reads.usage_before,
            "statement opening",
        )?;
        statement_of(
            account,
            currency,
            from,
            to,
            window_start,
            opening,
            reads.lines,
        )
    }

    /// [`Ledger::statement`] computed the reference way, from the whole journal: for tests
    /// and checks, slow on a large ledger.
    pub async fn statement_from_journal(
        &self,
        account: &str,
        currency: &Currency,
        from: i64,
        to: i64,
    ) -> Result<Statement> {
        check_account(account)?;
        check_currency(currency)?;
        let accounts = self.storage.accounts().await?;
        if !accounts.iter().any(|a| a.name == account) {
            return Err(LedgerError::not_found("account", account));
        }
        let tree = AccountTree::from_pairs(accounts.into_iter().map(|a| (a.name, a.parent)));
        let allocations = self.storage.allocations().await?;
        let journal = self.storage.journal(&JournalQuery::default()).await?;
        statement(&tree, &allocations, &journal, account, currency, from, to)
    }

    /// `[from, to)` cut at UTC midnights, from the first to the last entry the journal has in
    /// it (none when it has none): the pieces [`Ledger::usage_entries_of_day`] reads, so that an
    /// export of any period holds no more than its busiest day.
    pub async fn usage_days(&self, from: i64, to: i64) -> Result<Vec<(i64, i64)>> {
        let Some((first, last)) = self.storage.journal_span(from, to).await? else {
            return Ok(Vec::new());
        };
        let mut days = Vec::new();
        let mut start = first.max(from);
        let end = last.saturating_add(1).min(to);
        while start < end {
            let next_day = start
                .div_euclid(SECONDS_PER_DAY)
                .saturating_add(1)
                .saturating_mul(SECONDS_PER_DAY);
            let stop = next_day.min(end);
            days.push((start, stop));
            start = stop;
        }
        Ok(days)
    }

    /// The usage entries of one piece of [`Ledger::usage_days`] (any range works; a day
    /// keeps it small), by `effective_at` then posting order.
    pub async fn usage_entries_of_day(&self, start: i64, stop: i64) -> Result<Vec<JournalEntry>> {
        self.storage.usage_entries(start, stop).await
    }

    /// The top `limit` users or jobs by net usage in `[from, to)`, per currency (only
    /// `currency` when given); see [`top`], which this equals, summed and ranked by the
    /// database over the period alone.
    pub async fn top(
        &self,
        by: TopBy,
        from: i64,
        to: i64,
        currency: Option<&Currency>,
        limit: usize,
    ) -> Result<Vec<TopRow>> {
        self.storage.top(by, from, to, currency, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewEntry, NewHold, UsageCharge};
    use proptest::prelude::*;

    const DAY: i64 = 86_400;

    fn charge(
        cluster: &str,
        job: &str,
        account: &str,
        user: &str,
        amount: i64,
        at: i64,
    ) -> UsageCharge {
        UsageCharge {
            cluster: cluster.to_string(),
            job_id: job.to_string(),
            display_id: job.to_string(),
            submit: at - 3600,
            revision: format!("r{amount}"),
            account: account.to_string(),
            user: user.to_string(),
            partition: Some("batch".to_string()),
            qos: None,
            state: "COMPLETED".to_string(),
            is_final: true,
            currency: Currency::new("su"),
            amount_micros: amount,
            effective_at: at,
            price_version: None,
            note: None,
        }
    }

    fn manual(kind: EntryKind, account: &str, amount: i64, at: i64, key: &str) -> NewEntry {
        NewEntry {
            kind,
            account: account.to_string(),
            currency: Currency::new("su"),
            amount,
            effective_at: at,
            idempotency_key: key.to_string(),
            note: None,
        }
    }

    async fn ledger() -> Ledger {
        let l = Ledger::open("sqlite::memory:").await.unwrap();
        l.ensure_account("org", None).await.unwrap();
        l.ensure_account("physics", Some("org")).await.unwrap();
        l.ensure_account("chem", Some("org")).await.unwrap();
        l
    }

    #[tokio::test]
    async fn statement_reconciles_and_matches_the_allocation() {
        let l = ledger().await;
        let su = Currency::new("su");
        l.set_allocation("org", &su, 1_000_000_000, 0, 30 * DAY)
            .await
            .unwrap();
        l.post_usage(
            &[
                charge("onprem", "1", "physics", "alice", 5_000_000, DAY),
                charge("cloud", "2", "chem", "bob", 7_250_000, 5 * DAY),
                charge("onprem", "3", "physics", "alice", 1_500_000, 12 * DAY),
            ],
            100,
        )
        .await
        .unwrap();
        l.post_entry(&manual(
            EntryKind::Refund,
            "physics",
            -1_500_000,
            12 * DAY,
            "r1",
        ))
        .await
        .unwrap();
        l.post_entry(&manual(
            EntryKind::Deposit,
            "org",
            2_000_000,
            10 * DAY,
            "d1",
        ))
        .await
        .unwrap();
        l.post_entry(&manual(
            EntryKind::Adjustment,
            "chem",
            250_000,
            11 * DAY,
            "a1",
        ))
        .await
        .unwrap();
        l.place_hold(&NewHold {
            account: "physics".to_string(),
            currency: su.clone(),
            amount: 3_000_000,
            cluster: "onprem".to_string(),
            job_ref: None,
            placed_at: 11 * DAY,
            expires_at: 13 * DAY,
            lifetime: None,
            idempotency_key: "h1".to_string(),
            note: None,
        })
        .await
        .unwrap();

        let st = l.statement("org", &su, 7 * DAY, 14 * DAY).await.unwrap();
        assert_eq!(st.window_start, 0);
        assert_eq!(st.opening, 1_000_000_000 - 5_000_000 - 7_250_000);
        assert_eq!(st.deposits, 2_000_000);
        assert_eq!(st.charges, 1_500_000);
        assert_eq!(st.refunds, 1_500_000);
        assert_eq!(st.adjustments, 250_000);
        assert_eq!(st.held, 3_000_000);
        assert_eq!(st.expected_closing().unwrap(), st.closing);
        assert_eq!(st.lines.len(), 5);

        let whole = l.statement("org", &su, 0, 30 * DAY).await.unwrap();
        let alloc = l.allocations().await.unwrap();
        let org = alloc.iter().find(|a| a.account == "org").unwrap();
        assert_eq!(whole.opening, 0);
        assert_eq!(whole.closing, org.amount - org.charged);

        // A child without its own allocation: opening 0, usage of its own subtree only.
        let physics = l.statement("physics", &su, 0, 30 * DAY).await.unwrap();
        assert_eq!(physics.deposits, 0);
        assert_eq!(physics.closing, -5_000_000);

        let top = l.top(TopBy::User, 0, 30 * DAY, None, 10).await.unwrap();
        assert_eq!(top[0].user, "bob");
        assert_eq!(top[0].amount, 7_250_000);
        assert_eq!(top[1].user, "alice");
        // The manual refund has no user: it is not in the ranking.
        assert_eq!(top[1].amount, 6_500_000);
        let jobs = l.top(TopBy::Job, 0, 30 * DAY, Some(&su), 1).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].job_id.as_deref(), Some("2"));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Deposit(i64, i64),
        Charge(i64, i64, bool),
        Refund(i64, i64),
        Adjust(i64, i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let at = 0..40 * DAY;
        prop_oneof![
            (1..5_000_000i64, at.clone()).prop_map(|(a, t)| Op::Deposit(a, t)),
            (0..9_000_000i64, at.clone(), any::<bool>()).prop_map(|(a, t, p)| Op::Charge(a, t, p)),
            (1..2_000_000i64, at.clone()).prop_map(|(a, t)| Op::Refund(-a, t)),
            (-3_000_000..3_000_000i64, at)
                .prop_map(|(a, t)| Op::Adjust(if a == 0 { 1 } else { a }, t)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn statement_identity_holds(ops in prop::collection::vec(op(), 1..25), from in 0..20 * DAY, len in 1..25 * DAY) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let l = ledger().await;
                let su = Currency::new("su");
                l.set_allocation("org", &su, 100_000_000, 0, 50 * DAY).await.unwrap();
                let mut batch = Vec::new();
                for (i, op) in ops.iter().enumerate() {
                    let key = format!("k{i}");
                    match *op {
                        Op::Deposit(a, t) => { l.post_entry(&manual(EntryKind::Deposit, "org", a, t, &key)).await.unwrap(); }
                        Op::Charge(a, t, p) => batch.push(charge("onprem", &key, if p { "physics" } else { "chem" }, &format!("u{}", i % 3), a, t)),
                        Op::Refund(a, t) => { l.post_entry(&manual(EntryKind::Refund, "physics", a, t, &key)).await.unwrap(); }
                        Op::Adjust(a, t) => { l.post_entry(&manual(EntryKind::Adjustment, "chem", a, t, &key)).await.unwrap(); }
                    }
                }
                l.post_usage(&batch, 1).await.unwrap();
                for account in ["org", "physics", "chem"] {
                    let st = l.statement(account, &su, from, from + len).await.unwrap();
                    assert_eq!(st.expected_closing().unwrap(), st.closing);
                    // The indexed reads give what the whole journal gives.
                    let reference = l.statement_from_journal(account, &su, from, from + len).await.unwrap();
                    assert_eq!(st, reference);
                    let late = l.statement(account, &su, from + len, 50 * DAY).await.unwrap();
                    assert_eq!(late, l.statement_from_journal(account, &su, from + len, 50 * DAY).await.unwrap());
                }
                // The usage of a period read a day at a time through the index is the
                // journal's, filtered: same entries, by time then posting order, and the
                // ranking over it the same as over the whole journal.
                let (a, b) = (from - 1_000, from + len);
                let mut expected = l.journal(&JournalQuery::default()).await.unwrap();
                expected.retain(|e| e.kind.is_usage() && e.effective_at >= a && e.effective_at < b);
                expected.sort_by_key(|e| (e.effective_at, e.id));
                let mut days = Vec::new();
                for (start, stop) in l.usage_days(a, b).await.unwrap() {
                    assert!(start < stop && stop - start <= DAY, "{start}..{stop}");
                    let day = l.usage_entries_of_day(start, stop).await.unwrap();
                    if !day.is_empty() {
                        days.push(day);
                    }
                }
                for day in &days {
                    let first = day[0].effective_at.div_euclid(DAY);
                    assert!(day.iter().all(|e| e.effective_at.div_euclid(DAY) == first), "one day each");
                }
                assert_eq!(days.concat(), expected);
                // Both ways the database ranks: a scan for much of the journal's time, the
                // time index for a short range (a day of up to 40).
                let whole = l.journal(&JournalQuery::default()).await.unwrap();
                for by in [TopBy::User, TopBy::Job] {
                    for (a, b) in [(a, b), (from, from + DAY), (from + len / 2, from + len / 2 + 3 * DAY)] {
                        assert_eq!(
                            l.top(by, a, b, None, 2).await.unwrap(),
                            top(&whole, by, a, b, None, 2).unwrap()
                        );
                        assert_eq!(
                            l.top(by, a, b, Some(&su), 1).await.unwrap(),
                            top(&whole, by, a, b, Some(&su), 1).unwrap()
                        );
                    }
                }
                // With an allocation, the window starts at the allocation whatever `from` is.
                let split = l.statement("org", &su, from, 50 * DAY).await.unwrap();
                let org = l.allocations().await.unwrap().into_iter().find(|a| a.account == "org").unwrap();
                let whole = l.statement("org", &su, 0, 50 * DAY).await.unwrap();
                assert_eq!(whole.closing, org.amount - org.charged);
                assert_eq!(split.closing, whole.closing);
            });
        }
    }
}
