//! What a job costs: rates, QOS usage factors, the end-state policy, and the exact charge.
//!
//! ```text
//! ClusterPricing { currency, partitions: name → PartitionPricing, default_partition,
//!                  qos_factors: name → Decimal, end_states: EndStatePolicy }
//! ClusterPricing::charge(&UsageRecord, &PriceBook) -> Result<Charge, PricingError>
//! ClusterPricing::estimate(partition, qos, &Tres, seconds, start_at, &PriceBook) -> Result<Money, _>
//! ClusterPricing::explain(&UsageRecord, &PriceBook) -> Result<String, _>   // the human basis
//! ```
//!
//! `charge` and `estimate` (used for holds) go through one private function, `ClusterPricing::price`:
//!
//! - **rate per hour**: a reported dstack price (`price_per_hour × blocks/total_blocks`) when the
//!   record has one; else by the partition's [`PartitionPricing`]: billing weights
//!   ([`BillingWeights`], optionally `MAX_TRES`), an instance price from the [`PriceBook`] table
//!   in effect at the job's start × nodes (at least 1), or Slurm's recorded `billing` TRES
//!   (falling back to the CPU count). Partitions not listed use `default_partition`.
//! - **charge** = rate × elapsed_us / 3.6e9 × QOS usage factor (unknown or absent QOS: 1), as one
//!   exact fraction of micros in 256-bit integers, rounded once, half-to-even
//!   ([`divide_half_even`]). Overflow anywhere is [`PricingError::Overflow`], never a wrap.
//!
//! Before pricing, [`EndStatePolicy`] decides whether the record is charged at all: a state that
//! is not final → 0, not final; a refunded or free state → 0 with that reason; a job that never
//! started → 0, "never started"; otherwise the price. A dstack record's reported price always
//! wins over its partition's pricing (`price: table` re-pricing is not implemented here yet).
//!
//! `charge` allocates nothing beyond the returned [`Charge`]'s reference-counted clones; the
//! human-readable basis is built only on request by `explain`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ethnum::I256;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::decimal::Decimal;
use crate::money::{checked_mul, divide_half_even, format_micros, Currency, Money};
use crate::record::{JobState, UsageRecord};
use crate::tables::PriceBook;
use crate::tres::Tres;
use crate::weights::BillingWeights;
use crate::PricingError;

/// A rate per hour × elapsed µs / (3600 × 10^6 µs per hour) is units, and a unit is 10^6 micros,
/// so the charge in micros is `rate × elapsed_us / 3600`.
const SECONDS_PER_HOUR: i64 = 3600;

/// How one partition's jobs are priced.
///
/// In config: `{ weights: "CPU=1.0,Mem=0.25G", max_tres: false }`, `{ instance: p5.48xlarge,
/// region: us-east-1, provider: aws }` (provider defaults to `aws`), or `{}` for Slurm's
/// billing TRES.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PartitionPricing {
    /// `Σ weight × allocated`, or with `max_tres` Slurm's `PriorityFlags=MAX_TRES`.
    Weights {
        weights: BillingWeights,
        max_tres: bool,
    },
    /// Node-hours × the instance's hourly price in the table in effect at the job's start.
    Instance {
        provider: String,
        region: String,
        instance: String,
    },
    /// The `billing` TRES Slurm recorded, else the CPU count (Slurm's own default).
    #[default]
    BillingTres,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionSpec {
    weights: Option<BillingWeights>,
    max_tres: Option<bool>,
    instance: Option<String>,
    region: Option<String>,
    provider: Option<String>,
}

impl TryFrom<PartitionSpec> for PartitionPricing {
    type Error = String;

    fn try_from(spec: PartitionSpec) -> Result<PartitionPricing, String> {
        match spec {
            PartitionSpec {
                weights: Some(_),
                instance: Some(_),
                ..
            } => Err("a partition is priced by `weights` or by `instance`, not both".into()),
            PartitionSpec {
                weights: Some(weights),
                max_tres,
                region: None,
                provider: None,
                ..
            } => Ok(PartitionPricing::Weights {
                weights,
                max_tres: max_tres.unwrap_or(false),
            }),
            PartitionSpec {
                instance: Some(instance),
                region: Some(region),
                provider,
                max_tres: None,
                ..
            } => Ok(PartitionPricing::Instance {
                provider: provider.unwrap_or_else(|| "aws".to_string()),
                region,
                instance,
            }),
            PartitionSpec {
                instance: Some(_),
                region: None,
                ..
            } => Err("`instance` needs a `region`".into()),
            PartitionSpec {
                weights: None,
                instance: None,
                max_tres: None,
                region: None,
                provider: None,
            } => Ok(PartitionPricing::BillingTres),
            PartitionSpec {
                weights: None,
                instance: None,
                max_tres: Some(_),
                ..
            } => Err("`max_tres` applies only with `weights`".into()),
            _ => Err("`region` and `provider` apply only with `instance`".into()),
        }
    }
}

impl<'de> Deserialize<'de> for PartitionPricing {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PartitionPricing, D::Error> {
        PartitionSpec::deserialize(deserializer)?
            .try_into()
            .map_err(de::Error::custom)
    }
}

/// What the end-state policy does with a final record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndStateAction {
    /// Charge the time it ran.
    Charge,
    /// Charge 0, recorded as a refund (the cluster's fault).
    Refund,
    /// Charge 0, recorded as free (not the user's bill, e.g. a revoked federation sibling).
    Free,
}

/// Which final states are charged.
///
/// Defaults: COMPLETED, FAILED, TIMEOUT, CANCELLED (after start), OUT_OF_MEMORY, PREEMPTED,
/// DEADLINE, REQUEUED and RESIZING (the part before a resize) are charged; NODE_FAIL and
/// BOOT_FAIL are refunded; REVOKED is free.
/// PENDING, RUNNING and SUSPENDED are not final and cannot be configured: such a
/// record is never charged (the ledger keeps its hold until the final record arrives).
/// Whatever the state, a job that never started costs 0.
///
/// In config, a map of overrides keyed by state as Slurm prints it: `{ NODE_FAIL: charge }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndStatePolicy {
    /// Indexed by `JobState as usize`; entries for non-final states are unused.
    actions: [EndStateAction; JobState::ALL.len()],
}

impl Default for EndStatePolicy {
    fn default() -> EndStatePolicy {
        let mut actions = [EndStateAction::Charge; JobState::ALL.len()];
        actions[JobState::NodeFail as usize] = EndStateAction::Refund;
        actions[JobState::BootFail as usize] = EndStateAction::Refund;
        actions[JobState::Revoked as usize] = EndStateAction::Free;
        EndStatePolicy { actions }
    }
}

impl EndStatePolicy {
    /// The action for a state; `None` for a state that is not final.
    pub fn action(&self, state: JobState) -> Option<EndStateAction> {
        state.is_final().then(|| self.actions[state as usize])
    }

    /// Overrides one state. Refused for states that are not final.
    pub fn set(&mut self, state: JobState, action: EndStateAction) -> Result<(), PricingError> {
        if !state.is_final() {
            return Err(PricingError::Config(format!(
                "end_states: {state} is not a final state; its record is never charged"
            )));
        }
        self.actions[state as usize] = action;
        Ok(())
    }
}

impl<'de> Deserialize<'de> for EndStatePolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EndStatePolicy, D::Error> {
        deserializer.deserialize_map(EndStatePolicyVisitor)
    }
}

struct EndStatePolicyVisitor;

impl<'de> Visitor<'de> for EndStatePolicyVisitor {
    type Value = EndStatePolicy;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of job state to charge, refund or free, e.g. `NODE_FAIL: charge`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EndStatePolicy, A::Error> {
        let mut policy = EndStatePolicy::default();
        while let Some((name, action)) = map.next_entry::<String, EndStateAction>()? {
            let state: JobState = name.parse().map_err(de::Error::custom)?;
            policy.set(state, action).map_err(de::Error::custom)?;
        }
        Ok(policy)
    }
}

/// How one cluster prices its jobs. Deserializes from config with unknown keys refused:
///
/// ```yaml
/// currency: su
/// partitions:
///   batch: { weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0" }
///   cloud: { instance: c5.xlarge, region: us-east-1 }
/// default_partition: {}          # Slurm's billing TRES (the default)
/// qos_factors: { premium: "2.0" }
/// end_states: { NODE_FAIL: charge }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterPricing {
    pub currency: Currency,
    #[serde(default)]
    pub partitions: BTreeMap<String, PartitionPricing>,
    /// For partitions not listed (and records without a partition).
    #[serde(default)]
    pub default_partition: PartitionPricing,
    /// QOS usage factors; a QOS not listed (or no QOS) has factor 1. Never negative.
    #[serde(default, deserialize_with = "non_negative_factors")]
    pub qos_factors: BTreeMap<String, Decimal>,
    #[serde(default)]
    pub end_states: EndStatePolicy,
}

fn non_negative_factors<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, Decimal>, D::Error> {
    let factors = BTreeMap::<String, Decimal>::deserialize(deserializer)?;
    match factors.iter().find(|(_, factor)| factor.is_negative()) {
        Some((qos, factor)) => Err(de::Error::custom(format!(
            "qos_factors: {qos} has a negative usage factor {factor}"
        ))),
        None => Ok(factors),
    }
}

/// Why a charge is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeReason {
    /// The record is not final (RUNNING, PENDING, …): nothing is charged yet.
    NotFinal(JobState),
    /// The job never started (no start time, or no time and no allocation).
    NeverStarted,
    /// The end-state policy refunds this state.
    Refunded(JobState),
    /// The end-state policy makes this state free.
    Free(JobState),
}

impl fmt::Display for ChargeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChargeReason::NotFinal(state) => {
                write!(f, "{state}: not final, waiting for the final record")
            }
            ChargeReason::NeverStarted => f.write_str("never started"),
            ChargeReason::Refunded(state) => write!(f, "{state}: refunded by policy"),
            ChargeReason::Free(state) => write!(f, "{state}: free by policy"),
        }
    }
}

/// The price of one usage record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub amount: Money,
    /// False while the job can still run: the ledger keeps its hold.
    pub is_final: bool,
    /// Why the amount is 0 when a policy made it so; `None` for a priced job.
    pub reason: Option<ChargeReason>,
    /// `name@version` of the price table used, for instance-priced jobs.
    pub price_version: Option<Arc<str>>,
}

/// A rate per hour as an exact fraction `numerator / denominator` (denominator > 0).
#[derive(Debug, Clone, Copy)]
struct Rate {
    numerator: I256,
    denominator: I256,
}

impl Rate {
    fn whole(units: u64) -> Rate {
        Rate {
            numerator: I256::from(units),
            denominator: I256::ONE,
        }
    }
}

/// Where a rate came from, for [`ClusterPricing::explain`].
#[derive(Debug, Clone, Copy)]
enum RateSource {
    Weights { max_tres: bool },
    Billing,
    CpuCount,
    Instance { nodes: u64, per_node: Decimal },
    Reported { blocks: u32, total_blocks: u32 },
}

/// The inputs `charge` and `estimate` share.
struct Usage<'a> {
    job: JobLabel<'a>,
    partition: Option<&'a str>,
    qos: Option<&'a str>,
    alloc: &'a Tres,
    elapsed_us: u64,
    start: i64,
    /// dstack's own price: `(micros per hour, blocks, total_blocks)`.
    reported: Option<(i64, u32, u32)>,
}

/// Names the job in errors only, so the hot path never formats it.
#[derive(Clone, Copy)]
enum JobLabel<'a> {
    Record(&'a UsageRecord),
    Estimate,
}

impl fmt::Display for JobLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobLabel::Record(r) => write!(f, "{}/{}", r.cluster, r.job_id),
            JobLabel::Estimate => f.write_str("estimate"),
        }
    }
}

/// An exact price, with what went into it.
struct Priced<'b> {
    micros: i64,
    rate: Rate,
    source: RateSource,
    qos_factor: Decimal,
    version: Option<&'b Arc<str>>,
}

impl ClusterPricing {
    /// Prices every partition by `billing` TRES, every QOS at 1, default end-state policy.
    pub fn new(currency: Currency) -> ClusterPricing {
        ClusterPricing {
            currency,
            partitions: BTreeMap::new(),
            default_partition: PartitionPricing::BillingTres,
            qos_factors: BTreeMap::new(),
            end_states: EndStatePolicy::default(),
        }
    }

    /// The pricing that applies to a partition.
    pub fn partition(&self, name: Option<&str>) -> &PartitionPricing {
        name.and_then(|n| self.partitions.get(n))
            .unwrap_or(&self.default_partition)
    }

    /// The charge for one usage record: policy first, then the exact price.
    pub fn charge(&self, record: &UsageRecord, book: &PriceBook) -> Result<Charge, PricingError> {
        if let Some(reason) = self.zero_reason(record) {
            return Ok(Charge {
                amount: Money::zero(self.currency.clone()),
                is_final: record.state.is_final(),
                reason: Some(reason),
                price_version: None,
            });
        }
        let priced = self.price(&usage_of(record), book)?;
        Ok(Charge {
            amount: Money::new(priced.micros, self.currency.clone()),
            is_final: true,
            reason: None,
            price_version: priced.version.cloned(),
        })
    }

    /// What a job with `alloc` running `seconds` from `start_at` would cost: the amount a hold
    /// is placed for. Same code path as [`Self::charge`].
    pub fn estimate(
        &self,
        partition: Option<&str>,
        qos: Option<&str>,
        alloc: &Tres,
        seconds: u64,
        start_at: i64,
        book: &PriceBook,
    ) -> Result<Money, PricingError> {
        let overflow = || PricingError::Overflow {
            job: JobLabel::Estimate.to_string(),
        };
        let usage = Usage {
            job: JobLabel::Estimate,
            partition,
            qos,
            alloc,
            elapsed_us: seconds.checked_mul(1_000_000).ok_or_else(overflow)?,
            start: start_at,
            reported: None,
        };
        let priced = self.price(&usage, book)?;
        Ok(Money::new(priced.micros, self.currency.clone()))
    }

    /// A short human explanation of a record's charge, e.g.
    /// `weights(batch) 1.244140625/h × 2s × qos normal 1 = 0.000691 su`. Not on the hot path.
    pub fn explain(&self, record: &UsageRecord, book: &PriceBook) -> Result<String, PricingError> {
        if let Some(reason) = self.zero_reason(record) {
            return Ok(format!("0 {}: {reason}", self.currency));
        }
        let priced = self.price(&usage_of(record), book)?;
        let partition = record.partition.as_deref().unwrap_or("-");
        let how = match priced.source {
            RateSource::Weights { max_tres: false } => format!("weights({partition})"),
            RateSource::Weights { max_tres: true } => format!("weights max_tres({partition})"),
            RateSource::Billing => format!("billing tres({partition})"),
            RateSource::CpuCount => format!("cpu count({partition})"),
            RateSource::Instance { nodes, per_node } => format!(
                "instance({partition}) {nodes} node × {per_node}/h ({})",
                priced.version.map_or("-", |v| v)
            ),
            RateSource::Reported {
                blocks,
                total_blocks,
            } => format!("reported price × {blocks}/{total_blocks} blocks"),
        };
        Ok(format!(
            "{how} {}/h × {}s × qos {} {} = {} {}",
            format_fraction(priced.rate.numerator, priced.rate.denominator),
            format_micros(i64::try_from(record.elapsed_us).unwrap_or(i64::MAX), 0),
            record.qos.as_deref().unwrap_or("-"),
            priced.qos_factor,
            format_micros(priced.micros, 0),
            self.currency,
        ))
    }

    /// Why a record costs 0 before any pricing, if it does.
    fn zero_reason(&self, record: &UsageRecord) -> Option<ChargeReason> {
        let state = record.state;
        match self.end_states.action(state) {
            None => Some(ChargeReason::NotFinal(state)),
            Some(EndStateAction::Refund) => Some(ChargeReason::Refunded(state)),
            Some(EndStateAction::Free) => Some(ChargeReason::Free(state)),
            Some(EndStateAction::Charge) if never_started(record) => {
                Some(ChargeReason::NeverStarted)
            }
            Some(EndStateAction::Charge) => None,
        }
    }

    /// The one pricing path: rate × elapsed × QOS factor, exact, rounded once.
    fn price<'b>(
        &'b self,
        usage: &Usage<'_>,
        book: &'b PriceBook,
    ) -> Result<Priced<'b>, PricingError> {
        let overflow = || PricingError::Overflow {
            job: usage.job.to_string(),
        };
        let (rate, source, version) = self.rate(usage, book)?;
        let qos_factor = self.qos_factor(usage.qos)?;
        let numerator = checked_mul(rate.numerator, I256::from(usage.elapsed_us))
            .and_then(|n| checked_mul(n, I256::from(qos_factor.mantissa())))
            .ok_or_else(overflow)?;
        let denominator = checked_mul(rate.denominator, I256::from(SECONDS_PER_HOUR))
            .and_then(|d| checked_mul(d, I256::from(qos_factor.denominator())))
            .ok_or_else(overflow)?;
        let micros = divide_half_even(numerator, denominator)
            .and_then(|m| i64::try_from(m).ok())
            .ok_or_else(overflow)?;
        Ok(Priced {
            micros,
            rate,
            source,
            qos_factor,
            version,
        })
    }

    fn qos_factor(&self, qos: Option<&str>) -> Result<Decimal, PricingError> {
        let factor = qos
            .and_then(|q| self.qos_factors.get(q))
            .copied()
            .unwrap_or(Decimal::ONE);
        if factor.is_negative() {
            return Err(PricingError::Config(format!(
                "qos_factors: {} has a negative usage factor {factor}",
                qos.unwrap_or_default()
            )));
        }
        Ok(factor)
    }

    /// The rate per hour, where it came from, and the price table version if one was used.
    fn rate<'b>(
        &'b self,
        usage: &Usage<'_>,
        book: &'b PriceBook,
    ) -> Result<(Rate, RateSource, Option<&'b Arc<str>>), PricingError> {
        if let Some((per_hour_micros, blocks, total_blocks)) = usage.reported {
            return reported_rate(usage, per_hour_micros, blocks, total_blocks);
        }
        let alloc = usage.alloc;
        match self.partition(usage.partition) {
            PartitionPricing::Weights { weights, max_tres } => {
                let numerator = weights.rate_numerator(alloc, *max_tres).ok_or_else(|| {
                    PricingError::Overflow {
                        job: usage.job.to_string(),
                    }
                })?;
                let rate = Rate {
                    numerator,
                    denominator: weights.denominator(),
                };
                let source = RateSource::Weights {
                    max_tres: *max_tres,
                };
                Ok((rate, source, None))
            }
            PartitionPricing::BillingTres => Ok(match alloc.billing() {
                Some(billing) => (Rate::whole(billing), RateSource::Billing, None),
                None => (Rate::whole(alloc.cpu()), RateSource::CpuCount, None),
            }),
            PartitionPricing::Instance {
                provider,
                region,
                instance,
            } => {
                let quote = book
                    .lookup(provider, region, instance, usage.start)
                    .ok_or_else(|| PricingError::NoPrice {
                        provider: provider.clone(),
                        region: region.clone(),
                        instance: instance.clone(),
                        at: usage.start,
                    })?;
                if *quote.currency != self.currency {
                    return Err(PricingError::CurrencyMismatch {
                        instance: instance.clone(),
                        table: quote.currency.clone(),
                        cluster: self.currency.clone(),
                    });
                }
                // A started job holds at least one node even when the record omits `node`.
                let nodes = alloc.nodes().max(1);
                let per_node = quote.price_per_hour;
                let rate = Rate {
                    numerator: I256::from(per_node.mantissa()) * I256::from(nodes),
                    denominator: I256::from(per_node.denominator()),
                };
                Ok((
                    rate,
                    RateSource::Instance { nodes, per_node },
                    Some(quote.version),
                ))
            }
        }
    }
}

/// dstack's reported price prorated by blocks: `micros/h × blocks / (10^6 × total_blocks)`.
fn reported_rate<'b>(
    usage: &Usage<'_>,
    per_hour_micros: i64,
    blocks: u32,
    total_blocks: u32,
) -> Result<(Rate, RateSource, Option<&'b Arc<str>>), PricingError> {
    let bad = |problem: String| PricingError::BadRecord {
        job: usage.job.to_string(),
        problem,
    };
    if total_blocks == 0 || blocks > total_blocks {
        return Err(bad(format!(
            "holds {blocks} of {total_blocks} blocks of its instance"
        )));
    }
    if per_hour_micros < 0 {
        return Err(bad(format!(
            "reported a negative price per hour {}",
            format_micros(per_hour_micros, 0)
        )));
    }
    let rate = Rate {
        numerator: I256::from(per_hour_micros) * I256::from(blocks),
        denominator: I256::from(1_000_000u32) * I256::from(total_blocks),
    };
    let source = RateSource::Reported {
        blocks,
        total_blocks,
    };
    Ok((rate, source, None))
}

fn usage_of(record: &UsageRecord) -> Usage<'_> {
    Usage {
        job: JobLabel::Record(record),
        partition: record.partition.as_deref(),
        qos: record.qos.as_deref(),
        alloc: &record.alloc,
        elapsed_us: record.elapsed_us,
        // Only called for started records (see `never_started`).
        start: record.start.unwrap_or(record.submit),
        reported: record.price_per_hour_micros.map(|price| {
            let (blocks, total) = record.blocks.unwrap_or((1, 1));
            (price, blocks, total)
        }),
    }
}

/// No start time, or no time and nothing allocated (what sacct shows for a job cancelled while
/// pending).
fn never_started(record: &UsageRecord) -> bool {
    record.start.is_none() || (record.elapsed_us == 0 && record.alloc.is_empty())
}

/// An exact fraction as a decimal when it has one (`1.244140625`), else `numerator/denominator`
/// reduced.
fn format_fraction(numerator: I256, denominator: I256) -> String {
    let divisor = gcd(numerator, denominator);
    let (numerator, denominator) = (numerator / divisor, denominator / divisor);
    let mut rest = denominator;
    let mut digits = 0u32;
    while rest % 10 == 0 || rest % 2 == 0 || rest % 5 == 0 {
        if rest % 10 == 0 {
            rest /= 10;
        } else if rest % 2 == 0 {
            rest /= 2;
        } else {
            rest /= 5;
        }
        digits += 1;
    }
    if rest != 1 || digits > 60 {
        return format!("{numerator}/{denominator}");
    }
    // denominator divides 10^digits, so the fraction is exactly scaled / 10^digits.
    let scaled = numerator * (I256::from(10u8).pow(digits) / denominator);
    let sign = if scaled < 0 { "-" } else { "" };
    let magnitude = scaled.abs().to_string();
    let width = digits as usize + 1;
    let padded = format!("{magnitude:0>width$}");
    let (int_part, frac_part) = padded.split_at(padded.len() - digits as usize);
    let frac_part = frac_part.trim_end_matches('0');
    if frac_part.is_empty() {
        format!("{sign}{int_part}")
    } else {
        format!("{sign}{int_part}.{frac_part}")
    }
}

fn gcd(mut a: I256, mut b: I256) -> I256 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs().max(I256::ONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_indexes_states_by_discriminant() {
        for (i, state) in JobState::ALL.into_iter().enumerate() {
            assert_eq!(state as usize, i, "{state}");
        }
        let policy = EndStatePolicy::default();
        let charged: Vec<&str> = JobState::ALL
            .into_iter()
            .filter(|s| policy.action(*s) == Some(EndStateAction::Charge))
            .map(JobState::as_str)
            .collect();
        assert_eq!(
            charged,
            [
                "REQUEUED",
                "RESIZING",
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "PREEMPTED",
                "OUT_OF_MEMORY",
                "DEADLINE"
            ]
        );
    }

    #[test]
    fn fractions_print_exactly_when_they_can() {
        let f = |n: i64, d: i64| format_fraction(I256::from(n), I256::from(d));
        assert_eq!(f(1274, 1024), "1.244140625");
        assert_eq!(f(304, 10), "30.4");
        assert_eq!(f(6, 3), "2");
        assert_eq!(f(1, 3), "1/3");
        assert_eq!(f(2, 6), "1/3");
        assert_eq!(f(0, 7), "0");
        assert_eq!(f(-5, 4), "-1.25");
        assert_eq!(f(1, 1_000_000), "0.000001");
        let tiny = format_fraction(I256::ONE, I256::ONE << 50u32);
        assert!(
            tiny.starts_with("0.00000000000000088817841970012523"),
            "{tiny}"
        );
    }
}
