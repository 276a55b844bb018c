//! Alerts: which allocations crossed a threshold, recorded so that each crossing fires once.
//!
//! An alert is `(allocation, kind)`. Kinds:
//!
//! - `used:P` — *committed* (charged + held: holds are money promised to running jobs) reached
//!   `P` % of the allocated amount: `committed × 100 ≥ P × allocated`, exactly, in integers.
//!   Allocations of 0 are skipped (nothing to measure against);
//! - `projected` — the [forecast](crate::forecast) says the allocation runs out before its
//!   period ends (an exhaustion date inside the period; an allocation already exhausted is the
//!   job of `used:100`).
//!
//! **Once per crossing.** A fired alert stays *open* while its condition holds and while it
//! stops holding for any other reason than a refund or a deposit. It *re-arms* (closes, so the
//! next crossing fires again) only when its condition no longer holds **and** the allocation
//! was topped up (its amount is above the amount at firing) or usage was given back (its
//! charged is below the charged at firing). A hold that is released, or settles for less than
//! its estimate, lowers committed without re-arming: otherwise every job's hold near a
//! threshold would fire it again. A `projected` alert stays open while the allocation is
//! exhausted. A new period is a new allocation, with its own alerts.
//!
//! The state lives in the ledger's `alerts` table (one open alert per allocation and kind,
//! enforced by a unique index), so it survives restarts and two checkers racing each other
//! fire an alert once. Delivery (the gateway's webhook) is recorded on the same row:
//! `delivered_at` is set once, after a successful delivery; a failed one is retried.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use bursar_pricing::Currency;

use crate::error::{LedgerError, Result};
use crate::forecast::{Exhaustion, Forecast};
use crate::Ledger;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AlertKind {
    /// Committed reached this percentage of the allocated amount.
    Used(u32),
    /// Projected to run out before the period ends.
    Projected,
}

impl fmt::Display for AlertKind {
    /// `used:80`, `projected` (as stored).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlertKind::Used(p) => write!(f, "used:{p}"),
            AlertKind::Projected => f.write_str("projected"),
        }
    }
}

impl AlertKind {
    /// `80%`, `projected`: as people read it.
    pub fn label(&self) -> String {
        match self {
            AlertKind::Used(p) => format!("{p}%"),
            AlertKind::Projected => "projected".to_string(),
        }
    }
}

impl FromStr for AlertKind {
    type Err = LedgerError;

    fn from_str(text: &str) -> Result<AlertKind> {
        if text == "projected" {
            return Ok(AlertKind::Projected);
        }
        text.strip_prefix("used:")
            .and_then(|p| p.parse().ok())
            .map(AlertKind::Used)
            .ok_or_else(|| LedgerError::Invalid(format!("{text:?} is not an alert kind")))
    }
}

/// Which alerts an account's allocations get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertPolicy {
    /// Percentages of the allocated amount, each in 1..=1000.
    pub thresholds: Vec<u32>,
    /// Alert when projected to run out before the period ends.
    pub projected: bool,
}

impl Default for AlertPolicy {
    /// 50 %, 80 %, 100 % and projected.
    fn default() -> AlertPolicy {
        AlertPolicy {
            thresholds: vec![50, 80, 100],
            projected: true,
        }
    }
}

/// The rules of an alert check: a default policy, per-account overrides (the allocation's own
/// account), and the forecast window in seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRules {
    pub default: AlertPolicy,
    pub accounts: BTreeMap<String, AlertPolicy>,
    pub window: i64,
}

impl Default for AlertRules {
    fn default() -> AlertRules {
        AlertRules {
            default: AlertPolicy::default(),
            accounts: BTreeMap::new(),
            window: crate::forecast::DEFAULT_WINDOW,
        }
    }
}

impl AlertRules {
    fn policy(&self, account: &str) -> &AlertPolicy {
        self.accounts.get(account).unwrap_or(&self.default)
    }

    fn check(&self) -> Result<()> {
        if self.window <= 0 {
            return Err(LedgerError::Invalid(format!(
                "alert window of {} s: it must be positive",
                self.window
            )));
        }
        for (who, policy) in std::iter::once(("default", &self.default))
            .chain(self.accounts.iter().map(|(a, p)| (a.as_str(), p)))
        {
            if let Some(bad) = policy.thresholds.iter().find(|t| !(1..=1000).contains(*t)) {
                return Err(LedgerError::Invalid(format!(
                    "alert threshold {bad} % for {who}: thresholds are 1 to 1000 %"
                )));
            }
        }
        Ok(())
    }
}

/// An alert to record: the allocation, the kind, when, and the numbers at that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    pub allocation_id: i64,
    pub kind: AlertKind,
    pub fired_at: i64,
    pub allocated: i64,
    pub charged: i64,
    pub held: i64,
    pub rate_per_day: i64,
    /// The projected exhaustion, when there is one.
    pub exhaustion: Option<i64>,
}

/// An alert as stored, with its allocation's account, currency and period. Amounts are the
/// ones at firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    pub id: i64,
    pub allocation_id: i64,
    pub account: String,
    pub currency: Currency,
    pub period: (i64, i64),
    pub kind: AlertKind,
    pub fired_at: i64,
    pub allocated: i64,
    pub charged: i64,
    pub held: i64,
    pub rate_per_day: i64,
    pub exhaustion: Option<i64>,
    /// When the alert re-armed (closed); `None` while open.
    pub rearmed_at: Option<i64>,
    /// When it was delivered, and how (`webhook`, `log`).
    pub delivered_at: Option<i64>,
    pub delivered_via: Option<String>,
    /// Failed deliveries so far, and the last failure.
    pub attempts: i64,
    pub last_error: Option<String>,
}

impl AlertRow {
    pub fn committed(&self) -> i64 {
        self.charged.saturating_add(self.held)
    }

    pub fn remaining(&self) -> i64 {
        self.allocated.saturating_sub(self.committed())
    }
}

/// What one evaluation decided: alerts to fire, open alerts (ids) to re-arm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertDecisions {
    pub fire: Vec<NewAlert>,
    pub rearm: Vec<i64>,
}

/// Whether a condition holds, and whether its alert may re-arm when it doesn't.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Holds,
    /// Does not hold, but the alert stays open (projected: the allocation is exhausted).
    Keep,
    Clear,
}

/// Decides, from the forecasts at `now` and the open alerts, which alerts fire and which
/// re-arm; see the module documentation. Pure.
pub fn evaluate(
    forecasts: &[Forecast],
    open: &[AlertRow],
    rules: &AlertRules,
    now: i64,
) -> Result<AlertDecisions> {
    let open: HashMap<(i64, AlertKind), &AlertRow> = open
        .iter()
        .filter(|a| a.rearmed_at.is_none())
        .map(|a| ((a.allocation_id, a.kind), a))
        .collect();
    let mut decisions = AlertDecisions::default();
    for f in forecasts {
        let (Some(id), Some(allocated), Some((_, end))) = (f.allocation_id, f.allocated, f.period)
        else {
            continue;
        };
        if allocated <= 0 || now >= end {
            continue;
        }
        let committed = f.committed()?;
        let policy = rules.policy(&f.account);
        let mut kinds: Vec<(AlertKind, Condition)> = policy
            .thresholds
            .iter()
            .map(|&p| {
                let reached = i128::from(committed) * 100 >= i128::from(p) * i128::from(allocated);
                let c = if reached {
                    Condition::Holds
                } else {
                    Condition::Clear
                };
                (AlertKind::Used(p), c)
            })
            .collect();
        if policy.projected {
            let c = match f.exhaustion {
                Exhaustion::At(when) if when < end => Condition::Holds,
                Exhaustion::Exhausted => Condition::Keep,
                _ => Condition::Clear,
            };
            kinds.push((AlertKind::Projected, c));
        }
        kinds.sort_by_key(|(k, _)| *k);
        kinds.dedup_by_key(|(k, _)| *k);
        for (kind, condition) in kinds {
            match (condition, open.get(&(id, kind))) {
                (Condition::Holds, None) => decisions.fire.push(NewAlert {
                    allocation_id: id,
                    kind,
                    fired_at: now,
                    allocated,
                    charged: f.charged,
                    held: f.held,
                    rate_per_day: f.rate_per_day,
                    exhaustion: match f.exhaustion {
                        Exhaustion::At(t) => Some(t),
                        _ => None,
                    },
                }),
                (Condition::Clear, Some(alert))
                    if allocated > alert.allocated || f.charged < alert.charged =>
                {
                    decisions.rearm.push(alert.id)
                }
                _ => {}
            }
        }
    }
    Ok(decisions)
}

/// What [`Ledger::record_alerts`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertPass {
    /// The alerts fired by this pass, as stored.
    pub fired: Vec<AlertRow>,
    /// How many open alerts re-armed.
    pub rearmed: u64,
}

impl Ledger {
    /// Evaluates the alert rules at `now` and records what fires and what re-arms, in one
    /// transaction. Running it again at the same moment fires nothing.
    pub async fn record_alerts(&self, rules: &AlertRules, now: i64) -> Result<AlertPass> {
        rules.check()?;
        let forecasts = self.forecasts(now, rules.window, None).await?;
        let alerts = self.storage.alerts().await?;
        let decisions = evaluate(&forecasts, &alerts, rules, now)?;
        if decisions.fire.is_empty() && decisions.rearm.is_empty() {
            return Ok(AlertPass::default());
        }
        let fired_ids = self
            .storage
            .record_alerts(&decisions.fire, &decisions.rearm, now)
            .await?;
        let fired = if fired_ids.is_empty() {
            Vec::new()
        } else {
            self.storage
                .alerts()
                .await?
                .into_iter()
                .filter(|a| fired_ids.contains(&a.id))
                .collect()
        };
        Ok(AlertPass {
            fired,
            rearmed: decisions.rearm.len() as u64,
        })
    }

    /// Every alert ever fired, by id.
    pub async fn alerts(&self) -> Result<Vec<AlertRow>> {
        self.storage.alerts().await
    }

    /// Takes alert `id` for delivery until `until`: `false` when it is delivered already or
    /// another delivery holds it (so two checkers never send it twice at once).
    pub async fn claim_alert(&self, id: i64, now: i64, until: i64) -> Result<bool> {
        self.storage.claim_alert(id, now, until).await
    }

    /// Records the end of a delivery of alert `id` at `at`: `Ok(via)` delivered (`webhook`,
    /// `log`), `Err(message)` failed (it stays pending and counts an attempt).
    pub async fn finish_alert(
        &self,
        id: i64,
        outcome: std::result::Result<&str, &str>,
        at: i64,
    ) -> Result<()> {
        self.storage.finish_alert(id, outcome, at).await
    }
}
