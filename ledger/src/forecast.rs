//! Forecasts: how fast each allocation is being spent, and when it runs out at that pace.
//!
//! For every balance row (account, currency, the allocation in force at `at`):
//!
//! - **spent in the window** = the usage (charges, adjustments, refunds) of the account's
//!   subtree in the currency with `effective_at ∈ [at − window, at)`, plus the holds of the
//!   subtree that are active at `at` (placed at or before `at`, not closed by then): a hold is
//!   money promised to a running job, so it counts as spent. The window is not cut at the
//!   period's start: at the start of a new period, the last period's pace is the best evidence
//!   of the next one's.
//! - **burn rate** = `ceil(max(0, spent) × 86400 / window)` micros per day. Rounded up, so that
//!   any spending gives a rate above zero and the projection is never later than the exact one.
//! - **exhaustion**: with the allocation's own `remaining` (`allocated − charged − held`):
//!   `≤ 0` → already exhausted; rate 0 → never; else at
//!   `at + ceil(remaining × 86400 / rate)` seconds (the first second the projected spending
//!   covers what remains). Flagged when that falls before the period's end.
//!
//! A row without an allocation of its own (the account spends an ancestor's) has a rate but no
//! exhaustion: its pace alone does not say when the ancestor runs out. All arithmetic is in
//! i128 on integer micros and seconds; an overflow is an error.

use std::collections::HashMap;

use bursar_pricing::Currency;

use crate::error::{add, LedgerError, Result};
use crate::model::{AllocationRow, BalanceRow, GroupKey, HoldRow, UsageReport};
use crate::names::{check_account, check_currency};
use crate::tree::AccountTree;
use crate::Ledger;

/// Seconds in a day: the unit of burn rates.
pub const DAY: i64 = 86_400;

/// The default window of a forecast: 14 days.
pub const DEFAULT_WINDOW: i64 = 14 * DAY;

/// When an allocation runs out at its current pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhaustion {
    /// No allocation of the account's own is in force: nothing to run out of.
    NoAllocation,
    /// `remaining ≤ 0` already.
    Exhausted,
    /// The burn rate is zero: it never runs out at this pace.
    Never,
    /// The projected moment (epoch seconds) `remaining` reaches zero.
    At(i64),
}

impl Exhaustion {
    pub fn as_str(self) -> &'static str {
        match self {
            Exhaustion::NoAllocation => "no_allocation",
            Exhaustion::Exhausted => "exhausted",
            Exhaustion::Never => "never",
            Exhaustion::At(_) => "projected",
        }
    }
}

/// The forecast of one balance row at `at`. Amounts in micros of `currency`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forecast {
    pub account: String,
    pub currency: Currency,
    /// The allocation in force at `at` (the account's own), if any.
    pub allocation_id: Option<i64>,
    pub allocated: Option<i64>,
    /// Charged and held against the allocation (the subtree's, within its period).
    pub charged: i64,
    pub held: i64,
    pub remaining: Option<i64>,
    pub period: Option<(i64, i64)>,
    pub at: i64,
    /// The window's length in seconds; it is `[at − window, at)`.
    pub window: i64,
    /// The subtree's net usage with `effective_at` in the window.
    pub window_usage: i64,
    /// The subtree's holds active at `at`.
    pub window_held: i64,
    /// Micros per day, rounded up; see the module documentation.
    pub rate_per_day: i64,
    pub exhaustion: Exhaustion,
    /// Exhausted, or projected to run out before the period's end.
    pub before_period_end: bool,
}

impl Forecast {
    /// What is promised against the allocation: charged + held.
    pub fn committed(&self) -> Result<i64> {
        add(self.charged, self.held, "committed")
    }
}

/// What the forecasts of one moment are computed from.
#[derive(Debug, Clone, Copy)]
pub struct ForecastInput<'a> {
    pub tree: &'a AccountTree<String>,
    /// The balance rows to forecast (see [`crate::balances::compute`]).
    pub balances: &'a [BalanceRow],
    /// Every allocation, to name the one behind a row.
    pub allocations: &'a [AllocationRow],
    /// Net usage per account (not rolled up) and currency in the window.
    pub usage: &'a [(String, Currency, i64)],
    /// Holds (any state; those active at `at` are counted).
    pub holds: &'a [HoldRow],
    pub at: i64,
    pub window: i64,
}

/// `ceil(a / b)` for `b > 0`, in i128.
fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 {
        q + 1
    } else {
        q
    }
}

/// The burn rate in micros per day of `spent` micros over `window` seconds (rounded up; zero
/// when `spent ≤ 0`).
pub fn burn_rate(spent: i64, window: i64) -> Result<i64> {
    if window <= 0 {
        return Err(LedgerError::Invalid(format!(
            "forecast window of {window} s: it must be positive"
        )));
    }
    if spent <= 0 {
        return Ok(0);
    }
    let rate = div_ceil(i128::from(spent) * i128::from(DAY), i128::from(window));
    i64::try_from(rate)
        .map_err(|_| LedgerError::Overflow(format!("burn rate of {spent} over {window} s")))
}

/// When `remaining` micros run out at `rate` micros per day, from `at`.
pub fn exhaustion(remaining: i64, rate: i64, at: i64) -> Result<Exhaustion> {
    if remaining <= 0 {
        return Ok(Exhaustion::Exhausted);
    }
    if rate <= 0 {
        return Ok(Exhaustion::Never);
    }
    let seconds = div_ceil(i128::from(remaining) * i128::from(DAY), i128::from(rate));
    let when = i128::from(at) + seconds;
    i64::try_from(when)
        .map(Exhaustion::At)
        .map_err(|_| LedgerError::Overflow(format!("exhaustion of {remaining} at {rate}/day")))
}

/// The forecast of every balance row, in the rows' order.
pub fn compute(input: ForecastInput<'_>) -> Result<Vec<Forecast>> {
    let ForecastInput {
        tree,
        balances,
        allocations,
        usage,
        holds,
        at,
        window,
    } = input;
    // Roll usage and active holds up to every ancestor-or-self (an account the tree doesn't
    // know rolls up to itself only).
    let mut spent: HashMap<(String, Currency), (i64, i64)> = HashMap::new();
    let active_holds = holds
        .iter()
        .filter(|h| h.placed_at <= at && h.closed_at.is_none_or(|c| c > at))
        .map(|h| (&h.account, &h.currency, 0, h.amount));
    let usage_lines = usage.iter().map(|(a, c, amount)| (a, c, *amount, 0));
    for (account, currency, used, held) in usage_lines.chain(active_holds) {
        let mut chain = tree.ancestors_or_self(account);
        if chain.is_empty() {
            chain.push(account);
        }
        for a in chain {
            let sum = spent.entry((a.clone(), currency.clone())).or_default();
            sum.0 = add(sum.0, used, "window usage")?;
            sum.1 = add(sum.1, held, "window holds")?;
        }
    }

    let mut out = Vec::with_capacity(balances.len());
    for row in balances {
        let (window_usage, window_held) = spent
            .get(&(row.account.clone(), row.currency.clone()))
            .copied()
            .unwrap_or_default();
        let rate = burn_rate(add(window_usage, window_held, "spent in window")?, window)?;
        let allocation_id = row.period.and_then(|(start, _)| {
            allocations
                .iter()
                .find(|a| {
                    a.account == row.account && a.currency == row.currency && a.start == start
                })
                .map(|a| a.id)
        });
        let exhausts = match row.remaining {
            Some(remaining) => exhaustion(remaining, rate, at)?,
            None => Exhaustion::NoAllocation,
        };
        let before_period_end = match (exhausts, row.period) {
            (Exhaustion::Exhausted, Some(_)) => true,
            (Exhaustion::At(when), Some((_, end))) => when < end,
            _ => false,
        };
        out.push(Forecast {
            account: row.account.clone(),
            currency: row.currency.clone(),
            allocation_id,
            allocated: row.allocated,
            charged: row.charged,
            held: row.held,
            remaining: row.remaining,
            period: row.period,
            at,
            window,
            window_usage,
            window_held,
            rate_per_day: rate,
            exhaustion: exhausts,
            before_period_end,
        });
    }
    Ok(out)
}

fn usage_of_report(report: &UsageReport) -> Vec<(String, Currency, i64)> {
    report
        .rows
        .iter()
        .map(|r| (r.account.clone(), r.currency.clone(), r.amount))
        .collect()
}

impl Ledger {
    /// The forecasts at `at` over a window of `window` seconds of every balance row (or only
    /// `account`'s, one per currency); see [`crate::forecast`].
    pub async fn forecasts(
        &self,
        at: i64,
        window: i64,
        account: Option<&str>,
    ) -> Result<Vec<Forecast>> {
        if window <= 0 {
            return Err(LedgerError::Invalid(format!(
                "forecast window of {window} s: it must be positive"
            )));
        }
        let balances = match account {
            Some(a) => self.balance(a, at).await?,
            None => self.balances(at).await?,
        };
        self.forecasts_of(&balances, at, window).await
    }

    /// The forecasts of balance rows already read at `at` (the balance API reads them first).
    pub async fn forecasts_of(
        &self,
        balances: &[BalanceRow],
        at: i64,
        window: i64,
    ) -> Result<Vec<Forecast>> {
        let from = at.checked_sub(window).ok_or_else(|| {
            LedgerError::Overflow(format!("forecast window of {window} s before {at}"))
        })?;
        let accounts = self.storage.accounts().await?;
        let tree = AccountTree::from_pairs(accounts.into_iter().map(|a| (a.name, a.parent)));
        let allocations = self.storage.allocations().await?;
        let report = self.usage_report(from, at, &[GroupKey::Account]).await?;
        let usage = usage_of_report(&report);
        // The holds open at `at` only: every hold ever placed would grow with history.
        let holds = self.storage.holds_at(at).await?;
        compute(ForecastInput {
            tree: &tree,
            balances,
            allocations: &allocations,
            usage: &usage,
            holds: &holds,
            at,
            window,
        })
    }

    /// The forecast of `account` in `currency` at `at`, if it has a balance row there.
    pub async fn forecast(
        &self,
        account: &str,
        currency: &Currency,
        at: i64,
        window: i64,
    ) -> Result<Option<Forecast>> {
        check_account(account)?;
        check_currency(currency)?;
        Ok(self
            .forecasts(at, window, Some(account))
            .await?
            .into_iter()
            .find(|f| f.currency == *currency))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_round_up_and_exhaustion_is_the_first_covered_second() {
        // 10 micros over 3 days: 3.33… per day, rounded up to 4.
        assert_eq!(burn_rate(10, 3 * DAY).unwrap(), 4);
        assert_eq!(burn_rate(0, DAY).unwrap(), 0);
        assert_eq!(burn_rate(-5, DAY).unwrap(), 0);
        assert_eq!(burn_rate(1, 14 * DAY).unwrap(), 1);
        assert!(burn_rate(1, 0).is_err());
        // 8 micros at 4 a day: 2 days exactly.
        assert_eq!(
            exhaustion(8, 4, 100).unwrap(),
            Exhaustion::At(100 + 2 * DAY)
        );
        // 1 micro at 4 a day: a quarter day.
        assert_eq!(exhaustion(1, 4, 0).unwrap(), Exhaustion::At(DAY / 4));
        // 1 micro at 7 a day: 12342.857… s, rounded up.
        assert_eq!(exhaustion(1, 7, 0).unwrap(), Exhaustion::At(12_343));
        assert_eq!(exhaustion(0, 7, 0).unwrap(), Exhaustion::Exhausted);
        assert_eq!(exhaustion(-3, 0, 0).unwrap(), Exhaustion::Exhausted);
        assert_eq!(exhaustion(5, 0, 0).unwrap(), Exhaustion::Never);
        assert!(exhaustion(i64::MAX, 1, i64::MAX - 10).is_err());
    }
}
