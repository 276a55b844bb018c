//! Balances from materialized numbers: each account's allocation in force, its subtree's usage,
//! and what is available down the chain. Pure; backends hand over a [`BalanceSnapshot`].

use std::collections::{BTreeSet, HashMap};

use bursar_pricing::Currency;

use crate::error::{add, Result};
use crate::model::{AccountRow, AllocationRow, BalanceRow};
use crate::tree::AccountTree;

/// An account's own usage and holds in one currency, all time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountTotal {
    pub account: String,
    pub currency: Currency,
    pub charged: i64,
    pub held: i64,
}

/// Everything balances are computed from, read in one consistent snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BalanceSnapshot {
    pub accounts: Vec<AccountRow>,
    pub allocations: Vec<AllocationRow>,
    pub totals: Vec<AccountTotal>,
}

/// The balances at `at` of every account (or only of `only`), sorted by account and currency.
/// See [`BalanceRow`] for what each field means.
pub fn compute(snapshot: &BalanceSnapshot, at: i64, only: Option<&str>) -> Result<Vec<BalanceRow>> {
    let tree = AccountTree::from_pairs(
        snapshot
            .accounts
            .iter()
            .map(|a| (a.name.clone(), a.parent.clone())),
    );
    let mut active: HashMap<(&str, &str), &AllocationRow> = HashMap::new();
    for a in &snapshot.allocations {
        if a.start <= at && at < a.end {
            active.insert((a.account.as_str(), a.currency.as_str()), a);
        }
    }
    let mut subtree: HashMap<(&str, &str), (i64, i64)> = HashMap::new();
    for t in &snapshot.totals {
        for ancestor in tree.ancestors_or_self(&t.account) {
            let sum = subtree
                .entry((ancestor.as_str(), t.currency.as_str()))
                .or_default();
            sum.0 = add(sum.0, t.charged, "subtree charged")?;
            sum.1 = add(sum.1, t.held, "subtree held")?;
        }
    }
    // A subtree whose usage and holds net to zero is left out: whether such a row exists would
    // otherwise depend on history (a job posted to an account and moved away again).
    let keys: BTreeSet<(&str, &str)> = active
        .keys()
        .chain(
            subtree
                .iter()
                .filter(|(_, &(charged, held))| charged != 0 || held != 0)
                .map(|(k, _)| k),
        )
        .copied()
        .filter(|(account, _)| only.is_none_or(|o| o == *account))
        .collect();

    let mut rows = Vec::with_capacity(keys.len());
    for (account, currency) in keys {
        let name = account.to_string();
        let available = tree
            .ancestors_or_self(&name)
            .into_iter()
            .filter_map(|a| active.get(&(a.as_str(), currency)))
            .map(|a| a.remaining)
            .min();
        let row = match active.get(&(account, currency)) {
            Some(a) => BalanceRow {
                account: account.to_string(),
                currency: a.currency.clone(),
                allocated: Some(a.amount),
                charged: a.charged,
                held: a.held,
                remaining: Some(a.remaining),
                available,
                period: Some((a.start, a.end)),
            },
            None => {
                let (charged, held) = subtree
                    .get(&(account, currency))
                    .copied()
                    .unwrap_or_default();
                BalanceRow {
                    account: account.to_string(),
                    currency: Currency::new(currency),
                    allocated: None,
                    charged,
                    held,
                    remaining: None,
                    available,
                    period: None,
                }
            }
        };
        rows.push(row);
    }
    Ok(rows)
}
