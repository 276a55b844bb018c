//! How journal entries move the materialized numbers, computed in memory once per transaction.
//!
//! Backends load the part of the tree and the allocations a transaction touches, feed every
//! new entry through [`Effects`], and then write each affected allocation, total and daily
//! rollup row once. This module holds the rules; it knows no SQL. Accounts, currencies and
//! dimensions are the storage's integer ids ([`Id`]).
//!
//! - Usage (charge, adjustment, refund) of account A in currency C at time t adds to
//!   `charged` of every allocation in C on A's ancestors-or-self whose period contains t, to
//!   A's own total, and to the daily rollup row of (day(t), A, C, user, cluster, partition,
//!   qos).
//! - A hold (or its release, negative) does the same to `held`, at the hold's `placed_at`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::calendar::day_start;
use crate::error::{add, LedgerError, Result};
use crate::tree::AccountTree;

/// A storage id: of an account, or of an interned label (currency, cluster, user, …).
/// Label 0 means "none".
pub type Id = i64;

/// An allocation as the materializer needs it, with its stored `charged` and `held`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocSpan {
    pub id: Id,
    pub account: Id,
    pub currency: Id,
    pub amount: i64,
    pub start: i64,
    pub end: i64,
    pub charged: i64,
    pub held: i64,
}

impl AllocSpan {
    pub fn covers(&self, t: i64) -> bool {
        self.start <= t && t < self.end
    }

    /// `amount − charged − held`.
    pub fn remaining(&self) -> Result<i64> {
        self.amount
            .checked_sub(self.charged)
            .and_then(|r| r.checked_sub(self.held))
            .ok_or_else(|| LedgerError::Overflow(format!("remaining of allocation {}", self.id)))
    }
}

/// The report dimensions of a usage entry (label ids, 0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UsageDims {
    pub user: Id,
    pub cluster: Id,
    pub partition: Id,
    pub qos: Id,
}

/// One row of the daily rollup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DailyKey {
    pub day: i64,
    pub account: Id,
    pub currency: Id,
    pub user: Id,
    pub cluster: Id,
    pub partition: Id,
    pub qos: Id,
}

/// Accumulated effects of a transaction's entries on the materialized tables.
pub struct Effects<'t> {
    tree: &'t AccountTree<Id>,
    allocs: &'t [AllocSpan],
    by_account: FxHashMap<Id, Vec<usize>>,
    /// (account, currency) → indexes of the allocations in that currency on its chain.
    chains: FxHashMap<(Id, Id), Vec<usize>>,
    /// Allocation index → (charged, held) deltas.
    alloc_deltas: BTreeMap<usize, (i64, i64)>,
    /// (account, currency) → (charged, held) deltas of the account's own totals.
    totals: FxHashMap<(Id, Id), (i64, i64)>,
    /// Daily rollup row → (amount, job_count) deltas.
    daily: FxHashMap<DailyKey, (i64, i64)>,
}

impl<'t> Effects<'t> {
    /// `tree` must contain the chains of every account that entries will name; `allocs` every
    /// allocation on those chains.
    pub fn new(tree: &'t AccountTree<Id>, allocs: &'t [AllocSpan]) -> Effects<'t> {
        let mut by_account: FxHashMap<Id, Vec<usize>> = FxHashMap::default();
        for (i, a) in allocs.iter().enumerate() {
            by_account.entry(a.account).or_default().push(i);
        }
        Effects {
            tree,
            allocs,
            by_account,
            chains: FxHashMap::default(),
            alloc_deltas: BTreeMap::new(),
            totals: FxHashMap::default(),
            daily: FxHashMap::default(),
        }
    }

    fn chain(&mut self, account: Id, currency: Id) -> &[usize] {
        let tree = self.tree;
        let allocs = self.allocs;
        let by_account = &self.by_account;
        self.chains.entry((account, currency)).or_insert_with(|| {
            tree.ancestors_or_self(&account)
                .into_iter()
                .filter_map(|a| by_account.get(a))
                .flatten()
                .copied()
                .filter(|&i| allocs[i].currency == currency)
                .collect()
        })
    }

    /// The allocations an entry of `account` in `currency` at `t` draws on, nearest first.
    pub fn covering(&mut self, account: Id, currency: Id, t: i64) -> Vec<&'t AllocSpan> {
        let allocs = self.allocs;
        self.chain(account, currency)
            .iter()
            .map(|&i| &allocs[i])
            .filter(|a| a.covers(t))
            .collect()
    }

    /// [`Effects::covering`] with what each allocation has left once the entries fed so far
    /// are counted: `amount − charged − held`, deltas included.
    pub fn covering_remaining(
        &mut self,
        account: Id,
        currency: Id,
        t: i64,
    ) -> Result<Vec<(&'t AllocSpan, i64)>> {
        let allocs = self.allocs;
        let indexes: Vec<usize> = self
            .chain(account, currency)
            .iter()
            .copied()
            .filter(|&i| allocs[i].covers(t))
            .collect();
        indexes
            .into_iter()
            .map(|i| {
                let (charged, held) = self.alloc_deltas.get(&i).copied().unwrap_or_default();
                let remaining = allocs[i]
                    .remaining()?
                    .checked_sub(charged)
                    .and_then(|r| r.checked_sub(held))
                    .ok_or_else(|| {
                        LedgerError::Overflow(format!("remaining of allocation {}", allocs[i].id))
                    })?;
                Ok((&allocs[i], remaining))
            })
            .collect()
    }

    /// Whether entries at (`a`, `t_a`) and (`b`, `t_b`) in `currency` draw on the same
    /// allocations.
    pub fn same_cover(&mut self, currency: Id, a: Id, t_a: i64, b: Id, t_b: i64) -> bool {
        let allocs = self.allocs;
        let first: Vec<usize> = self
            .chain(a, currency)
            .iter()
            .copied()
            .filter(|&i| allocs[i].covers(t_a))
            .collect();
        let second = self
            .chain(b, currency)
            .iter()
            .copied()
            .filter(|&i| allocs[i].covers(t_b));
        first.into_iter().eq(second)
    }

    /// A usage entry (charge, adjustment, refund).
    pub fn usage(
        &mut self,
        account: Id,
        currency: Id,
        at: i64,
        amount: i64,
        job_count: i64,
        dims: UsageDims,
    ) -> Result<()> {
        self.touch_allocations(account, currency, at, amount, 0)?;
        let total = self.totals.entry((account, currency)).or_default();
        total.0 = add(total.0, amount, "account total")?;
        let key = DailyKey {
            day: day_start(at),
            account,
            currency,
            user: dims.user,
            cluster: dims.cluster,
            partition: dims.partition,
            qos: dims.qos,
        };
        let row = self.daily.entry(key).or_default();
        row.0 = add(row.0, amount, "daily usage")?;
        row.1 = add(row.1, job_count, "daily job count")?;
        Ok(())
    }

    /// A hold placed (`amount > 0`) or closed (`amount < 0`), at the hold's `placed_at`.
    pub fn hold(&mut self, account: Id, currency: Id, placed_at: i64, amount: i64) -> Result<()> {
        self.touch_allocations(account, currency, placed_at, 0, amount)?;
        let total = self.totals.entry((account, currency)).or_default();
        total.1 = add(total.1, amount, "account held")?;
        Ok(())
    }

    fn touch_allocations(
        &mut self,
        account: Id,
        currency: Id,
        at: i64,
        charged: i64,
        held: i64,
    ) -> Result<()> {
        let allocs = self.allocs;
        let chain = self.chain(account, currency);
        // Chains are short (one allocation per ancestor and currency at a time), so a small
        // stack copy beats borrowing gymnastics.
        let mut hit = [0usize; 16];
        let mut n = 0;
        for &i in chain {
            if allocs[i].covers(at) {
                if n == hit.len() {
                    return Err(LedgerError::Storage(format!(
                        "account {account} has more than {} covering allocations",
                        hit.len()
                    )));
                }
                hit[n] = i;
                n += 1;
            }
        }
        for &i in &hit[..n] {
            let delta = self.alloc_deltas.entry(i).or_default();
            delta.0 = add(delta.0, charged, "allocation charged")?;
            delta.1 = add(delta.1, held, "allocation held")?;
        }
        Ok(())
    }

    /// The new `(id, charged, held)` of every allocation an entry touched.
    pub fn allocation_updates(&self) -> Result<Vec<(Id, i64, i64)>> {
        self.alloc_deltas
            .iter()
            .map(|(&i, &(charged, held))| {
                let a = &self.allocs[i];
                Ok((
                    a.id,
                    add(a.charged, charged, "allocation charged")?,
                    add(a.held, held, "allocation held")?,
                ))
            })
            .collect()
    }

    /// Non-zero `((account, currency), (charged, held))` deltas of account totals, sorted.
    pub fn total_deltas(&self) -> Vec<((Id, Id), (i64, i64))> {
        let mut rows: Vec<_> = self
            .totals
            .iter()
            .filter(|(_, &(c, h))| c != 0 || h != 0)
            .map(|(&k, &v)| (k, v))
            .collect();
        rows.sort_unstable();
        rows
    }

    /// Non-zero `(row, (amount, job_count))` deltas of the daily rollup, sorted.
    pub fn daily_deltas(&self) -> Vec<(DailyKey, (i64, i64))> {
        let mut rows: Vec<_> = self
            .daily
            .iter()
            .filter(|(_, &(a, j))| a != 0 || j != 0)
            .map(|(&k, &v)| (k, v))
            .collect();
        rows.sort_unstable();
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: Id, account: Id, currency: Id, start: i64, end: i64) -> AllocSpan {
        AllocSpan {
            id,
            account,
            currency,
            amount: 1000,
            start,
            end,
            charged: 10,
            held: 0,
        }
    }

    #[test]
    fn usage_rolls_up_to_covering_allocations_only() {
        // root 1 → org 2 → physics 3; currencies su 10, usd 11.
        let tree = AccountTree::from_pairs([(1, None), (2, Some(1)), (3, Some(2))]);
        let allocs = vec![
            span(1, 2, 10, 0, 100),
            span(2, 2, 10, 100, 200),
            span(3, 3, 10, 0, 200),
            span(4, 2, 11, 0, 200),
        ];
        let mut fx = Effects::new(&tree, &allocs);
        fx.usage(3, 10, 50, 7, 1, UsageDims::default()).unwrap();
        fx.hold(3, 10, 150, 5).unwrap();
        let ids: Vec<Id> = fx.covering(3, 10, 150).iter().map(|a| a.id).collect();
        assert_eq!(ids, [3, 2]);
        assert!(fx.same_cover(10, 3, 10, 3, 90));
        assert!(!fx.same_cover(10, 3, 90, 3, 110));
        let updates = fx.allocation_updates().unwrap();
        assert_eq!(updates, [(1, 17, 0), (2, 10, 5), (3, 17, 5)]);
        assert_eq!(fx.total_deltas(), [((3, 10), (7, 5))]);
        assert_eq!(fx.daily_deltas().len(), 1);
    }
}
