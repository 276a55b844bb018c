//! Slurm `TRESBillingWeights`: `CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:h100=8,License/matlab=1.5`.
//!
//! Names are case-insensitive and mapped to TRES names as Slurm prints them (`cpu`, `mem`,
//! `node`, `gres/gpu:h100`, `license/matlab`, `bb/x`, `fs/disk`, …). A K/M/G/T/P suffix on a
//! weight means "per that unit" (powers of 1024): memory-like TRES ([`is_memory_like`]) are
//! counted in megabytes, so `Mem=0.25G` is 0.25 per GiB = 0.25/1024 per MB and `Mem=.25` is 0.25
//! per MB; any other TRES is a plain count, so `Energy=1K` is 1/1024 per joule.
//!
//! A weight on `billing` itself is refused: Slurm silently ignores it, and a weight that looks
//! like it does something but does not is a configuration mistake worth reporting.
//!
//! Every weight is converted once, at parse time, to a numerator over one common denominator
//! `10^scale × 2^shift` for the whole set, so pricing a job is integer multiply-adds only.

use std::fmt;
use std::str::FromStr;

use ethnum::I256;
use serde::{Deserialize, Deserializer};

use crate::decimal::{pow10, Decimal, DecimalError};
use crate::money::checked_mul;
use crate::tres::{is_memory_like, Tres};

/// Errors from parsing billing weights; each names the offending entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
    #[error("billing weights are empty; leave `weights` out to price by Slurm's billing TRES")]
    Empty,
    #[error("billing weight {0:?} is not NAME=VALUE")]
    NotKeyValue(String),
    #[error(
        "billing weight {0:?}: unknown TRES (expected CPU, Mem, Node, Energy, VMem, Pages, \
         GRES/<name>[:<type>], License/<name>, BB/<name>, FS/<name> or IC/<name>)"
    )]
    UnknownTres(String),
    #[error("billing weight {0:?}: Slurm ignores a weight on billing itself; remove it")]
    OnBilling(String),
    #[error("billing weight {entry:?}: {source}")]
    BadValue {
        entry: String,
        #[source]
        source: DecimalError,
    },
    #[error("billing weight {0:?}: unit suffix must be one of K, M, G, T, P")]
    BadUnit(String),
    #[error("billing weight {0:?} is negative")]
    Negative(String),
    #[error("billing weight for {0} appears twice")]
    Duplicate(String),
    #[error("billing weight {0:?} is too large to combine exactly with the other weights")]
    Overflow(String),
}

/// One parsed `NAME=VALUE[unit]` entry.
#[derive(Clone, PartialEq, Eq)]
struct WeightEntry {
    /// Lower-case TRES name as Slurm prints it.
    tres: String,
    weight: Decimal,
    unit: Option<char>,
    /// Weight per base unit (MB or count) as a numerator over the set's common denominator.
    numerator: i128,
}

/// A parsed `TRESBillingWeights` set.
#[derive(Clone, PartialEq, Eq)]
pub struct BillingWeights {
    /// Sorted by `tres`, unique.
    entries: Vec<WeightEntry>,
    /// Common denominator is `10^scale × 2^shift`.
    scale: u32,
    shift: u32,
}

impl BillingWeights {
    pub fn parse(text: &str) -> Result<BillingWeights, WeightsError> {
        let mut parsed: Vec<(String, Decimal, Option<char>, Fraction)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (tres, weight, unit, per_base) = parse_entry(item)?;
            if parsed.iter().any(|(t, ..)| *t == tres) {
                return Err(WeightsError::Duplicate(tres));
            }
            parsed.push((tres, weight, unit, per_base));
        }
        if parsed.is_empty() {
            return Err(WeightsError::Empty);
        }
        let scale = parsed.iter().map(|p| p.3.scale).max().unwrap_or(0);
        let shift = parsed.iter().map(|p| p.3.shift).max().unwrap_or(0);
        let mut entries = parsed
            .into_iter()
            .map(|(tres, weight, unit, per_base)| {
                let numerator = per_base
                    .numerator_over(scale, shift)
                    .ok_or_else(|| WeightsError::Overflow(tres.clone()))?;
                Ok(WeightEntry {
                    tres,
                    weight,
                    unit,
                    numerator,
                })
            })
            .collect::<Result<Vec<_>, WeightsError>>()?;
        entries.sort_by(|a, b| a.tres.cmp(&b.tres));
        Ok(BillingWeights {
            entries,
            scale,
            shift,
        })
    }

    /// The weights as written (name lower-cased): `(tres, weight, unit suffix)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Decimal, Option<char>)> {
        self.entries
            .iter()
            .map(|e| (e.tres.as_str(), e.weight, e.unit))
    }

    /// The common denominator `10^scale × 2^shift` of every [`Self::numerator`].
    pub(crate) fn denominator(&self) -> I256 {
        I256::from(pow10(self.scale)) << self.shift
    }

    /// The weight per base unit of `tres` over [`Self::denominator`].
    fn numerator(&self, tres: &str) -> Option<i128> {
        self.entries
            .binary_search_by(|e| e.tres.as_str().cmp(tres))
            .ok()
            .map(|i| self.entries[i].numerator)
    }

    /// `Σ weight × allocated` (or, with `max_tres`, the largest node-level term plus the sum of
    /// the global ones) over [`Self::denominator`]. `None` on overflow.
    ///
    /// Each GRES family (`gres/gpu` with its typed breakdown `gres/gpu:<type>`) is one term:
    /// typed entries that have their own weight are priced by it, the untyped weight prices the
    /// rest of the family's total, so no GPU is priced twice. `billing` is never weighted.
    pub(crate) fn rate_numerator(&self, alloc: &Tres, max_tres: bool) -> Option<I256> {
        let mut global_sum = I256::ZERO;
        let mut node_terms = I256::ZERO;
        for (name, count) in alloc.iter() {
            let term = match gres_family(name) {
                Some((untyped, typed)) => {
                    if !leads_family(alloc, untyped, typed) {
                        continue;
                    }
                    self.gres_family_term(alloc, untyped)?
                }
                None => match self.numerator(name) {
                    Some(weight) => checked_mul(I256::from(weight), I256::from(count))?,
                    None => continue,
                },
            };
            if max_tres && is_node_level(name) {
                node_terms = node_terms.max(term);
            } else if is_node_level(name) {
                node_terms = node_terms.checked_add(term)?;
            } else {
                global_sum = global_sum.checked_add(term)?;
            }
        }
        node_terms.checked_add(global_sum)
    }

    /// The priced value of one GRES family, `untyped` being e.g. `gres/gpu`.
    fn gres_family_term(&self, alloc: &Tres, untyped: &str) -> Option<I256> {
        let mut typed_total: u64 = 0;
        let mut typed_priced: u64 = 0;
        let mut term = I256::ZERO;
        for (name, count) in alloc.iter() {
            let is_typed = name
                .strip_prefix(untyped)
                .is_some_and(|rest| rest.starts_with(':'));
            if !is_typed {
                continue;
            }
            typed_total = typed_total.checked_add(count)?;
            if let Some(weight) = self.numerator(name) {
                typed_priced = typed_priced.checked_add(count)?;
                term = term.checked_add(checked_mul(I256::from(weight), I256::from(count))?)?;
            }
        }
        // `gres/gpu=N` is the total and the typed entries a breakdown of it; some sources print
        // only the breakdown, so the total is whichever is larger.
        let total = alloc.count(untyped).max(typed_total);
        let rest = total.saturating_sub(typed_priced);
        if let Some(weight) = self.numerator(untyped) {
            term = term.checked_add(checked_mul(I256::from(weight), I256::from(rest))?)?;
        }
        Some(term)
    }
}

/// `gres/gpu:h100` → `("gres/gpu", Some("h100"))`; `gres/gpu` → `("gres/gpu", None)`.
fn gres_family(name: &str) -> Option<(&str, Option<&str>)> {
    let rest = name.strip_prefix("gres/")?;
    match rest.find(':') {
        Some(colon) => Some((&name[..5 + colon], Some(&rest[colon + 1..]))),
        None => Some((name, None)),
    }
}

/// Whether this entry is the one a GRES family is priced at, so each family is priced once:
/// the untyped total when present (it sorts first), else the first typed entry.
fn leads_family(alloc: &Tres, untyped: &str, typed: Option<&str>) -> bool {
    let Some(this_type) = typed else {
        return true;
    };
    if alloc.get(untyped).is_some() {
        return false;
    }
    let first_typed = alloc.iter().find_map(|(name, _)| {
        name.strip_prefix(untyped)
            .and_then(|rest| rest.strip_prefix(':'))
    });
    first_typed == Some(this_type)
}

/// Node-level TRES (cpu, mem, node, gres/…) take part in `MAX_TRES`; everything else
/// (licenses, burst buffers, file systems, interconnect, energy, vmem, pages) is always summed,
/// as slurmctld's `assoc_mgr_tres_weighted` sums it.
fn is_node_level(name: &str) -> bool {
    matches!(name, "cpu" | "mem" | "node") || name.starts_with("gres/")
}

/// `mantissa / (10^scale × 2^shift)`: a weight per base unit before finding the common
/// denominator. Division by a power of 1024 is a power of 2, kept apart to stay exact.
#[derive(Clone, Copy)]
struct Fraction {
    mantissa: i128,
    scale: u32,
    shift: u32,
}

impl Fraction {
    fn numerator_over(self, scale: u32, shift: u32) -> Option<i128> {
        let by_ten = pow10(scale - self.scale);
        let by_two = 1i128.checked_shl(shift - self.shift)?;
        self.mantissa.checked_mul(by_ten)?.checked_mul(by_two)
    }
}

fn parse_entry(item: &str) -> Result<(String, Decimal, Option<char>, Fraction), WeightsError> {
    let (name, value) = item
        .split_once('=')
        .ok_or_else(|| WeightsError::NotKeyValue(item.to_string()))?;
    let tres = canonical_tres(name.trim()).ok_or_else(|| {
        if name.trim().eq_ignore_ascii_case("billing") {
            WeightsError::OnBilling(item.to_string())
        } else {
            WeightsError::UnknownTres(item.to_string())
        }
    })?;
    let value = value.trim();
    let (number, unit) = split_unit(value);
    let power = match unit {
        None => None,
        Some(u) => Some(unit_power(u).ok_or_else(|| WeightsError::BadUnit(item.to_string()))?),
    };
    let weight: Decimal = number.parse().map_err(|source| WeightsError::BadValue {
        entry: item.to_string(),
        source,
    })?;
    if weight.is_negative() {
        return Err(WeightsError::Negative(item.to_string()));
    }
    let per_base = per_base_unit(&tres, weight, power)
        .ok_or_else(|| WeightsError::Overflow(item.to_string()))?;
    Ok((tres, weight, unit, per_base))
}

/// Converts "weight per `1024^power`" into "weight per base unit": the base is MB (`1024^2`) for
/// memory-like TRES and 1 (`1024^0`) for everything else.
fn per_base_unit(tres: &str, weight: Decimal, power: Option<u32>) -> Option<Fraction> {
    let base: i64 = if is_memory_like(tres) { 2 } else { 0 };
    let exponent = power.map_or(0, |p| i64::from(p) - base);
    let mut fraction = Fraction {
        mantissa: weight.mantissa(),
        scale: weight.scale(),
        shift: 0,
    };
    if exponent >= 0 {
        fraction.shift = u32::try_from(exponent * 10).ok()?;
    } else {
        let factor = 1i128.checked_shl(u32::try_from(-exponent * 10).ok()?)?;
        fraction.mantissa = fraction.mantissa.checked_mul(factor)?;
    }
    Some(fraction)
}

fn split_unit(value: &str) -> (&str, Option<char>) {
    match value.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => (&value[..value.len() - 1], Some(c)),
        _ => (value, None),
    }
}

fn unit_power(unit: char) -> Option<u32> {
    match unit.to_ascii_uppercase() {
        'K' => Some(1),
        'M' => Some(2),
        'G' => Some(3),
        'T' => Some(4),
        'P' => Some(5),
        _ => None,
    }
}

/// `GRES/gpu:H100` → `gres/gpu:h100`; `None` for what is not a TRES a weight can apply to.
fn canonical_tres(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    let plain = ["cpu", "mem", "node", "energy", "vmem", "pages"];
    if plain.contains(&lower.as_str()) {
        return Some(lower);
    }
    let (kind, rest) = lower.split_once('/')?;
    if !["gres", "license", "bb", "fs", "ic"].contains(&kind) || rest.is_empty() {
        return None;
    }
    if kind == "gres" {
        if let Some((family, typ)) = rest.split_once(':') {
            if family.is_empty() || typ.is_empty() || typ.contains(':') {
                return None;
            }
        }
    } else if rest.contains(':') {
        return None;
    }
    Some(lower)
}

impl FromStr for BillingWeights {
    type Err = WeightsError;
    fn from_str(text: &str) -> Result<BillingWeights, WeightsError> {
        BillingWeights::parse(text)
    }
}

impl fmt::Display for BillingWeights {
    /// Slurm's syntax, names lower-cased: `cpu=1,gres/gpu=4,mem=0.25G`. Parses back to itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (tres, weight, unit)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{tres}={weight}")?;
            if let Some(unit) = unit {
                write!(f, "{}", unit.to_ascii_uppercase())?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for BillingWeights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BillingWeights({self})")
    }
}

impl<'de> Deserialize<'de> for BillingWeights {
    /// From the Slurm string form only.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BillingWeights, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(text: &str) -> BillingWeights {
        BillingWeights::parse(text).unwrap()
    }

    /// The rate as `numerator / denominator`, reduced, for readable expectations.
    fn rate(weights: &str, alloc: &str, max_tres: bool) -> (I256, I256) {
        let weights = w(weights);
        let num = weights
            .rate_numerator(&Tres::parse(alloc).unwrap(), max_tres)
            .unwrap();
        let den = weights.denominator();
        let g = gcd(num, den);
        (num / g, den / g)
    }

    fn gcd(mut a: I256, mut b: I256) -> I256 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a.abs().max(I256::ONE)
    }

    /// `num / den`, reduced like [`rate`]'s result.
    fn ratio(num: i64, den: i64) -> (I256, I256) {
        let (num, den) = (I256::from(num), I256::from(den));
        let g = gcd(num, den);
        (num / g, den / g)
    }

    #[test]
    fn maps_slurm_names_case_insensitively() {
        let weights =
            w("CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:H100=8,Node=2,License/matlab=1.5,BB/x=1,FS/disk=0,IC/ofed=1");
        let names: Vec<&str> = weights.iter().map(|(t, ..)| t).collect();
        assert_eq!(
            names,
            [
                "bb/x",
                "cpu",
                "fs/disk",
                "gres/gpu",
                "gres/gpu:h100",
                "ic/ofed",
                "license/matlab",
                "mem",
                "node"
            ]
        );
        assert_eq!(
            w("CPU=1.0, Mem=0.25G").to_string(),
            "cpu=1,mem=0.25G",
            "display is canonical"
        );
        let again = w(&weights.to_string());
        assert_eq!(again, weights);
    }

    #[test]
    fn unit_suffix_means_per_that_unit() {
        // 1000 MB at 0.25/GiB = 250/1024
        assert_eq!(rate("Mem=0.25G", "mem=1000M", false), ratio(250, 1024));
        // no suffix on memory = per MB
        assert_eq!(rate("Mem=.25", "mem=1000M", false), ratio(250, 1));
        // K on memory = per KB: 1 MB is 1024 KB
        assert_eq!(rate("Mem=1K", "mem=2M", false), ratio(2048, 1));
        assert_eq!(rate("Mem=1T", "mem=1T", false), ratio(1, 1));
        assert_eq!(rate("Mem=2P", "mem=1T", false), ratio(2, 1024));
        // non-memory TRES: base power 0, so K divides by 1024
        assert_eq!(rate("Energy=1K", "energy=2048", false), ratio(2, 1));
        assert_eq!(rate("CPU=3M", "cpu=1", false), ratio(3, 1024 * 1024));
        assert_eq!(rate("CPU=1P", "cpu=1", false).1, I256::ONE << 50u32);
        // burst buffers are memory-like (MB)
        assert_eq!(rate("BB/x=1G", "bb/x=2G", false), ratio(2, 1));
    }

    #[test]
    fn typed_gres_is_a_breakdown_never_priced_twice() {
        let alloc = "cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=0M";
        assert_eq!(rate("CPU=0.5,GRES/gpu=10.0", alloc, false), ratio(22, 1));
        assert_eq!(
            rate("CPU=0.5,GRES/gpu=10.0,GRES/gpu:h100=12", alloc, false),
            ratio(26, 1)
        );
        // mixed types: a100 has no typed weight, so the untyped weight prices it
        let mixed = "gres/gpu=3,gres/gpu:a100=1,gres/gpu:h100=2";
        assert_eq!(
            rate("GRES/gpu=10,GRES/gpu:h100=12", mixed, false),
            ratio(34, 1)
        );
        // only the breakdown printed
        assert_eq!(
            rate(
                "GRES/gpu=10,GRES/gpu:h100=12",
                "gres/gpu:a100=1,gres/gpu:h100=2",
                false
            ),
            ratio(34, 1)
        );
        // typed weight alone: untyped GPUs are free
        assert_eq!(rate("GRES/gpu:h100=12", "gres/gpu=4", false), ratio(0, 1));
        // a GRES whose name extends another's is its own family
        assert_eq!(
            rate(
                "GRES/gpu=1,GRES/gpumem=1G",
                "gres/gpu=1,gres/gpumem=2G",
                false
            ),
            ratio(3, 1)
        );
    }

    #[test]
    fn max_tres_takes_the_largest_node_term_plus_global_terms() {
        let weights = "CPU=1,Mem=0.25G,GRES/gpu=4,License/matlab=1.5";
        let alloc = "cpu=8,mem=64G,gres/gpu=1,license/matlab=2";
        // sum: 8 + 16 + 4 + 3
        assert_eq!(rate(weights, alloc, false), ratio(31, 1));
        // max(8, 16, 4) + 3
        assert_eq!(rate(weights, alloc, true), ratio(19, 1));
        // only cpu, mem, node and GRES are node terms: energy, vmem, pages and ic are summed
        assert_eq!(
            rate(
                "CPU=1,Node=2,Energy=1,VMem=1,Pages=1,IC/ofed=1",
                "cpu=8,node=1,energy=3,vmem=5,pages=7,ic/ofed=11",
                true
            ),
            ratio(8 + 3 + 5 + 7 + 11, 1)
        );
        // a GRES family is one term: 2 h100 at 12 + 1 a100 at 4 = 28 > cpu 8
        assert_eq!(
            rate(
                "CPU=1,GRES/gpu=4,GRES/gpu:h100=12",
                "cpu=8,gres/gpu=3,gres/gpu:h100=2,gres/gpu:a100=1",
                true
            ),
            ratio(28, 1)
        );
    }

    #[test]
    fn billing_and_unweighted_tres_are_not_priced() {
        assert_eq!(rate("CPU=1", "billing=99,cpu=2,node=1", false), ratio(2, 1));
    }

    #[test]
    fn errors_name_the_bad_entry() {
        let cases = [
            ("CPU=1,Mem", "\"Mem\" is not NAME=VALUE"),
            ("CPU=1,CPUS=2", "\"CPUS=2\": unknown TRES"),
            ("CPU=1,GRES/=2", "\"GRES/=2\": unknown TRES"),
            ("CPU=1,GRES/gpu:=2", "unknown TRES"),
            ("Billing=2", "ignores a weight on billing"),
            ("CPU=abc", "\"CPU=abc\""),
            ("Mem=0.25X", "\"Mem=0.25X\": unit suffix"),
            ("CPU=-1", "\"CPU=-1\" is negative"),
            ("CPU=1,cpu=2", "cpu appears twice"),
            ("CPU=0.0000000000001", "more than 12 decimal places"),
            ("", "empty"),
            (" , ", "empty"),
        ];
        for (text, expected) in cases {
            let message = BillingWeights::parse(text).unwrap_err().to_string();
            assert!(message.contains(expected), "{text}: {message}");
        }
        let huge = format!("CPU={},Energy=1P", "9".repeat(26));
        assert!(matches!(
            BillingWeights::parse(&huge),
            Err(WeightsError::Overflow(_))
        ));
    }

    #[test]
    fn deserializes_from_a_yaml_string() {
        let weights: BillingWeights = serde_yaml::from_str("\"CPU=1.0,Mem=0.25G\"").unwrap();
        assert_eq!(weights, w("cpu=1,mem=0.25G"));
        assert!(serde_yaml::from_str::<BillingWeights>("\"CPU=x\"").is_err());
    }
}
