//! Usage reports: the grouping a backend must do, and the assembly of its lines into a report
//! (calendar keys, re-aggregation, totals). Pure.

use std::collections::BTreeMap;

use bursar_pricing::Currency;

use crate::calendar::{
    civil_from_days, days_from_civil, format_day, format_iso_week, format_month, SECONDS_PER_DAY,
};
use crate::error::{add, LedgerError, Result};
use crate::model::{GroupKey, UsageReport, UsageRow};

/// Which columns, besides account and currency, a backend must group usage by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageGrouping {
    pub user: bool,
    pub cluster: bool,
    pub partition: bool,
    pub qos: bool,
    /// The UTC day of `effective_at` (for `Day`, `Week` and `Month`).
    pub day: bool,
    /// The calendar period the report keys days by: a backend may merge the days of one
    /// period into a line dated the period's first day (see [`Bucket::start`]), which gives
    /// the same report with fewer lines.
    pub bucket: Bucket,
}

/// The coarsest calendar period a report's keys allow merging days into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Bucket {
    /// No calendar key: days are not reported.
    #[default]
    None,
    Day,
    /// ISO 8601 weeks (Monday first), UTC.
    Week,
    Month,
}

impl Bucket {
    /// The first day (00:00 UTC) of the period holding `day`.
    pub fn start(self, day: i64) -> i64 {
        let days = day.div_euclid(SECONDS_PER_DAY);
        let first = match self {
            Bucket::None | Bucket::Day => days,
            // 1970-01-01 was a Thursday: weekday 0 is Monday.
            Bucket::Week => days - (days + 3).rem_euclid(7),
            Bucket::Month => {
                let (y, m, _) = civil_from_days(days);
                days_from_civil(y, m, 1)
            }
        };
        first * SECONDS_PER_DAY
    }
}

impl UsageGrouping {
    pub fn of(keys: &[GroupKey]) -> UsageGrouping {
        let has = |k: GroupKey| keys.contains(&k);
        UsageGrouping {
            user: has(GroupKey::User),
            cluster: has(GroupKey::Cluster),
            partition: has(GroupKey::Partition),
            qos: has(GroupKey::Qos),
            day: has(GroupKey::Day) || has(GroupKey::Week) || has(GroupKey::Month),
            // Weeks straddle months: with both (or with days), only days can be merged.
            bucket: match (
                has(GroupKey::Day),
                has(GroupKey::Week),
                has(GroupKey::Month),
            ) {
                (false, false, false) => Bucket::None,
                (false, true, false) => Bucket::Week,
                (false, false, true) => Bucket::Month,
                _ => Bucket::Day,
            },
        }
    }
}

/// One group of usage as a backend returns it: the grouped columns are `Some` (`""` for an
/// absent dimension), the others `None`. `day` is the epoch second of 00:00 UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLine {
    pub account: String,
    pub currency: String,
    pub day: Option<i64>,
    pub user: Option<String>,
    pub cluster: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub amount: i64,
    pub job_count: i64,
}

/// A report group: account, currency and the requested keys.
type Group = (String, String, BTreeMap<GroupKey, String>);

/// Turns backend lines into a report: computes calendar keys, merges lines that fall into the
/// same group (days of a month), sorts, and totals per currency from the rows themselves so
/// that rows always sum to totals.
pub fn assemble(
    from: i64,
    to: i64,
    group_by: &[GroupKey],
    lines: Vec<UsageLine>,
) -> Result<UsageReport> {
    let mut groups: BTreeMap<Group, (i64, i64)> = BTreeMap::new();
    for line in lines {
        let mut keys = BTreeMap::new();
        for &key in group_by {
            let value = match key {
                GroupKey::Account => line.account.clone(),
                GroupKey::User => line.user.clone().unwrap_or_default(),
                GroupKey::Cluster => line.cluster.clone().unwrap_or_default(),
                GroupKey::Partition => line.partition.clone().unwrap_or_default(),
                GroupKey::Qos => line.qos.clone().unwrap_or_default(),
                GroupKey::Month => line.day.map(format_month).unwrap_or_default(),
                GroupKey::Week => line.day.map(format_iso_week).unwrap_or_default(),
                GroupKey::Day => line.day.map(format_day).unwrap_or_default(),
            };
            keys.insert(key, value);
        }
        let sum = groups
            .entry((line.account, line.currency, keys))
            .or_default();
        sum.0 = add(sum.0, line.amount, "report amount")?;
        sum.1 = add(sum.1, line.job_count, "report job count")?;
    }

    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    let mut rows = Vec::with_capacity(groups.len());
    for ((account, currency, keys), (amount, job_count)) in groups {
        if amount == 0 && job_count == 0 {
            // A posting and its reversal in the same group: nothing to report.
            continue;
        }
        let jobs = u64::try_from(job_count).map_err(|_| {
            LedgerError::Storage(format!(
                "negative job count {job_count} for account {account:?} in {currency}"
            ))
        })?;
        let total = totals.entry(currency.clone()).or_default();
        *total = add(*total, amount, "report total")?;
        rows.push(UsageRow {
            account,
            currency: Currency::new(&currency),
            amount,
            jobs,
            keys,
        });
    }
    Ok(UsageReport {
        from,
        to,
        rows,
        totals: totals
            .into_iter()
            .map(|(c, amount)| (Currency::new(&c), amount))
            .collect(),
    })
}

/// The report with every account's rows including its subtree's usage: each row is added to
/// the matching row (same currency and keys) of every ancestor. Totals stay the usage itself
/// (each entry once), so the rows of a rolled-up report overlap and do not sum to the totals.
pub fn roll_up(
    report: UsageReport,
    tree: &crate::tree::AccountTree<String>,
) -> Result<UsageReport> {
    let mut groups: BTreeMap<Group, (i64, u64)> = BTreeMap::new();
    let with_account = report
        .rows
        .iter()
        .any(|r| r.keys.contains_key(&GroupKey::Account));
    for row in &report.rows {
        let mut chain: Vec<&String> = tree.ancestors_or_self(&row.account);
        if chain.is_empty() {
            chain.push(&row.account);
        }
        // The account is the group's own; the other keys must match.
        let mut keys = row.keys.clone();
        keys.remove(&GroupKey::Account);
        for account in chain {
            let sum = groups
                .entry((
                    account.clone(),
                    row.currency.as_str().to_string(),
                    keys.clone(),
                ))
                .or_default();
            sum.0 = add(sum.0, row.amount, "rolled-up amount")?;
            sum.1 = sum
                .1
                .checked_add(row.jobs)
                .ok_or_else(|| LedgerError::Invalid("rolled-up job count overflows".to_string()))?;
        }
    }
    let rows = groups
        .into_iter()
        .map(|((account, currency, mut keys), (amount, jobs))| {
            if with_account {
                keys.insert(GroupKey::Account, account.clone());
            }
            UsageRow {
                account,
                currency: Currency::new(&currency),
                amount,
                jobs,
                keys,
            }
        })
        .collect();
    Ok(UsageReport { rows, ..report })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_start_on_the_period_s_first_day() {
        let at = |y, m, d| days_from_civil(y, m, d) * SECONDS_PER_DAY;
        // 2026-02-18 is a Wednesday.
        let day = at(2026, 2, 18);
        assert_eq!(Bucket::Day.start(day), day);
        assert_eq!(Bucket::Week.start(day), at(2026, 2, 16));
        assert_eq!(Bucket::Month.start(day), at(2026, 2, 1));
        // Keys formatted from a bucket's start are those of its days.
        for d in 0..400 {
            let day = at(2025, 12, 1) + d * SECONDS_PER_DAY;
            assert_eq!(
                format_iso_week(Bucket::Week.start(day)),
                format_iso_week(day)
            );
            assert_eq!(format_month(Bucket::Month.start(day)), format_month(day));
        }
        // Before 1970 too.
        assert_eq!(Bucket::Month.start(at(1969, 12, 31)), at(1969, 12, 1));
        assert_eq!(Bucket::Week.start(at(1970, 1, 1)), at(1969, 12, 29));
    }

    #[test]
    fn the_bucket_follows_the_calendar_keys() {
        let of = |keys: &[GroupKey]| UsageGrouping::of(keys).bucket;
        assert_eq!(of(&[GroupKey::Account]), Bucket::None);
        assert_eq!(of(&[GroupKey::Month]), Bucket::Month);
        assert_eq!(of(&[GroupKey::Week, GroupKey::User]), Bucket::Week);
        assert_eq!(of(&[GroupKey::Week, GroupKey::Month]), Bucket::Day);
        assert_eq!(of(&[GroupKey::Day, GroupKey::Month]), Bucket::Day);
    }
}
