//! Property tests: charges agree with an independent exact computation written here with plain
//! u128 fractions; rounding each job never drifts a total by more than rounding can explain;
//! holds (`estimate`) and charges agree.

mod common;

use bursar_pricing::{ClusterPricing, Currency, PartitionPricing, PriceBook, PricingError, Tres};
use common::{cluster, record, weights, MARCH_2026};
use proptest::prelude::*;

/// A decimal `mantissa / 10^scale` written out by hand (not with the crate's `Decimal`).
#[derive(Debug, Clone, Copy)]
struct Dec {
    mantissa: u128,
    scale: u32,
}

impl Dec {
    fn text(self) -> String {
        let unit = 10u128.pow(self.scale);
        if self.scale == 0 {
            format!("{}", self.mantissa)
        } else {
            let width = self.scale as usize;
            format!("{}.{:0width$}", self.mantissa / unit, self.mantissa % unit)
        }
    }
}

fn dec(max_mantissa: u128, max_scale: u32) -> impl Strategy<Value = Dec> {
    (0..=max_mantissa, 0..=max_scale).prop_map(|(mantissa, scale)| Dec { mantissa, scale })
}

/// Memory weight suffixes and what they do to a per-MB weight: `(suffix, ×, ÷)`.
const MEM_UNITS: [(&str, u128, u128); 4] =
    [("", 1, 1), ("K", 1024, 1), ("M", 1, 1), ("G", 1, 1024)];

#[derive(Debug, Clone)]
struct Weights {
    cpu: Dec,
    mem: Dec,
    mem_unit: usize,
    node: Dec,
    gpu: Option<Dec>,
    h100: Option<Dec>,
    license: Option<Dec>,
    max_tres: bool,
}

impl Weights {
    fn text(&self) -> String {
        let mut parts = vec![
            format!("CPU={}", self.cpu.text()),
            format!("Mem={}{}", self.mem.text(), MEM_UNITS[self.mem_unit].0),
            format!("Node={}", self.node.text()),
        ];
        if let Some(w) = self.gpu {
            parts.push(format!("GRES/gpu={}", w.text()));
        }
        if let Some(w) = self.h100 {
            parts.push(format!("GRES/gpu:h100={}", w.text()));
        }
        if let Some(w) = self.license {
            parts.push(format!("License/matlab={}", w.text()));
        }
        parts.join(",")
    }
}

fn weights_strategy() -> impl Strategy<Value = Weights> {
    (
        dec(100_000, 4),
        dec(100_000, 4),
        0..MEM_UNITS.len(),
        dec(100_000, 4),
        proptest::option::of(dec(100_000, 4)),
        proptest::option::of(dec(100_000, 4)),
        proptest::option::of(dec(100_000, 4)),
        any::<bool>(),
    )
        .prop_map(
            |(cpu, mem, mem_unit, node, gpu, h100, license, max_tres)| Weights {
                cpu,
                mem,
                mem_unit,
                node,
                gpu,
                h100,
                license,
                max_tres,
            },
        )
}

#[derive(Debug, Clone)]
struct Alloc {
    cpu: u64,
    mem_mb: u64,
    nodes: u64,
    gpus: u64,
    h100: u64,
    /// Whether the untyped total `gres/gpu=N` is printed, or only the breakdown.
    untyped_printed: bool,
    licenses: u64,
}

impl Alloc {
    fn text(&self) -> String {
        let mut parts = vec![
            format!("cpu={}", self.cpu),
            format!("mem={}M", self.mem_mb),
            format!("node={}", self.nodes),
            format!("gres/gpu:h100={}", self.h100),
            format!("license/matlab={}", self.licenses),
        ];
        if self.untyped_printed {
            parts.push(format!("gres/gpu={}", self.gpus));
        } else {
            parts.push(format!("gres/gpu:a100={}", self.gpus - self.h100));
        }
        parts.join(",")
    }
}

fn alloc_strategy() -> impl Strategy<Value = Alloc> {
    (
        0..10_000u64,
        0..1_000_000u64,
        1..64u64,
        0..16u64,
        any::<bool>(),
        0..10u64,
    )
        .prop_flat_map(|(cpu, mem_mb, nodes, gpus, untyped_printed, licenses)| {
            (0..=gpus).prop_map(move |h100| Alloc {
                cpu,
                mem_mb,
                nodes,
                gpus,
                h100,
                untyped_printed,
                licenses,
            })
        })
}

/// Every weight as a numerator over `SCALE × 1024`, per MB for memory.
const MAX_SCALE: u32 = 4;
const COMMON: u128 = 10u128.pow(MAX_SCALE) * 1024;

fn per_unit(weight: Dec) -> u128 {
    weight.mantissa * 10u128.pow(MAX_SCALE - weight.scale) * 1024
}

/// The rate per hour as a numerator over [`COMMON`], by the rules in DESIGN.md.
fn oracle_rate(w: &Weights, a: &Alloc) -> u128 {
    let (_, times, divide) = MEM_UNITS[w.mem_unit];
    let cpu = per_unit(w.cpu) * u128::from(a.cpu);
    let mem = per_unit(w.mem) * times / divide * u128::from(a.mem_mb);
    let node = per_unit(w.node) * u128::from(a.nodes);
    // h100s priced by their own weight if there is one; every other GPU by the untyped weight
    let (typed_priced, typed_term) = match w.h100 {
        Some(h100) => (a.h100, per_unit(h100) * u128::from(a.h100)),
        None => (0, 0),
    };
    let untyped_term = w
        .gpu
        .map_or(0, |g| per_unit(g) * u128::from(a.gpus - typed_priced));
    let gpu = typed_term + untyped_term;
    let license = w
        .license
        .map_or(0, |l| per_unit(l) * u128::from(a.licenses));
    let node_level = if w.max_tres {
        cpu.max(mem).max(node).max(gpu)
    } else {
        cpu + mem + node + gpu
    };
    node_level + license
}

/// Exact charge in micros as `(numerator, denominator)`.
fn oracle_charge(rate: u128, elapsed_us: u64, qos: Dec) -> (u128, u128) {
    (
        rate * u128::from(elapsed_us) * qos.mantissa,
        COMMON * 3600 * 10u128.pow(qos.scale),
    )
}

fn round_half_even(numerator: u128, denominator: u128) -> u128 {
    let (quotient, remainder) = (numerator / denominator, numerator % denominator);
    match (2 * remainder).cmp(&denominator) {
        std::cmp::Ordering::Less => quotient,
        std::cmp::Ordering::Greater => quotient + 1,
        std::cmp::Ordering::Equal => quotient + quotient % 2,
    }
}

fn priced_cluster(w: &Weights, qos: Dec) -> ClusterPricing {
    let mut pricing = cluster("su", "p", weights(&w.text(), w.max_tres));
    pricing
        .qos_factors
        .insert("q".into(), qos.text().parse().unwrap());
    pricing
}

proptest! {
    #[test]
    fn charge_equals_an_independent_exact_computation(
        w in weights_strategy(),
        a in alloc_strategy(),
        elapsed_us in 0..10_000_000_000u64,
        qos in dec(1000, 2),
    ) {
        let pricing = priced_cluster(&w, qos);
        let job = record("p", "q", &a.text(), elapsed_us);
        let charge = pricing.charge(&job, &PriceBook::new());
        let (numerator, denominator) = oracle_charge(oracle_rate(&w, &a), elapsed_us, qos);
        let expected = round_half_even(numerator, denominator);
        // What does not fit i64 micros must be an error, never a wrapped amount.
        match i64::try_from(expected) {
            Ok(expected) => prop_assert_eq!(
                charge.unwrap().amount.micros, expected, "{} / {}", w.text(), a.text()
            ),
            Err(_) => {
                let overflowed = matches!(charge, Err(PricingError::Overflow { .. }));
                prop_assert!(overflowed, "expected overflow, got {:?}", charge);
            }
        }
    }

    #[test]
    fn rounding_each_job_stays_within_half_a_micro_per_job(
        w in weights_strategy(),
        qos in dec(1000, 2),
        jobs in proptest::collection::vec((alloc_strategy(), 0..100_000_000u64), 1..20),
    ) {
        let pricing = priced_cluster(&w, qos);
        let mut n: u128 = 0;
        let mut sum_of_rounded: u128 = 0;
        let mut exact_numerator: u128 = 0;
        let mut denominator = 1;
        for (a, elapsed_us) in &jobs {
            let (numerator, d) = oracle_charge(oracle_rate(&w, a), *elapsed_us, qos);
            denominator = d;
            if round_half_even(numerator, d) > u128::from(u64::MAX >> 8) {
                continue; // too large to add up safely here; covered by the test above
            }
            let job = record("p", "q", &a.text(), *elapsed_us);
            let charge = pricing.charge(&job, &PriceBook::new()).unwrap();
            sum_of_rounded += u128::try_from(charge.amount.micros).unwrap();
            exact_numerator += numerator;
            n += 1;
        }
        // |Σ round(cᵢ) − Σ cᵢ| ≤ n/2, i.e. 2·|Σ round·d − Σ num| ≤ n·d
        let scaled = sum_of_rounded * denominator;
        prop_assert!(2 * scaled.abs_diff(exact_numerator) <= n * denominator);
        // and against the rounded total, one more half: |Σ round(cᵢ) − round(Σ cᵢ)| ≤ (n+1)/2
        let rounded_total = round_half_even(exact_numerator, denominator);
        prop_assert!(2 * sum_of_rounded.abs_diff(rounded_total) <= n + 1);
    }

    #[test]
    fn estimate_equals_charge(
        w in weights_strategy(),
        a in alloc_strategy(),
        seconds in 0..10_000_000u64,
        qos in dec(1000, 2),
        kind in 0..3usize,
        row in 0..21usize,
        start_offset in 0..30_000_000i64,
    ) {
        let book = PriceBook::builtin();
        let price = &book.tables()[0].prices[row];
        let partition = match kind {
            0 => weights(&w.text(), w.max_tres),
            1 => PartitionPricing::BillingTres,
            _ => PartitionPricing::Instance {
                provider: price.provider.clone(),
                region: price.region.clone(),
                instance: price.instance.clone(),
            },
        };
        let mut pricing = cluster("usd", "p", partition);
        pricing.qos_factors.insert("q".into(), qos.text().parse().unwrap());
        let mut job = record("p", "q", &a.text(), seconds * 1_000_000);
        job.start = Some(MARCH_2026 + start_offset);
        let charged = pricing.charge(&job, &book).map(|c| c.amount);
        let alloc = Tres::parse(&a.text()).unwrap();
        let estimated =
            pricing.estimate(Some("p"), Some("q"), &alloc, seconds, MARCH_2026 + start_offset, &book);
        match (charged, estimated) {
            (Ok(charged), Ok(estimated)) => prop_assert_eq!(charged, estimated),
            (Err(PricingError::Overflow { .. }), Err(PricingError::Overflow { .. })) => {}
            other => prop_assert!(false, "charge and estimate disagree: {:?}", other),
        }
    }
}

/// Why the bound against the rounded total is (n+1)/2 and not n/2: three jobs of exactly half a
/// micro each round to 0 (even) while their 1.5 micro total rounds to 2.
#[test]
fn three_half_micros_round_apart_by_two() {
    let pricing = ClusterPricing::new(Currency::new("su"));
    let half_micro = record("p", "q", "billing=1", 1_800); // 1/h × 1800 us = 0.5 micro
    let one = pricing.charge(&half_micro, &PriceBook::new()).unwrap();
    assert_eq!(one.amount.micros, 0);
    let mut together = half_micro.clone();
    together.elapsed_us = 3 * 1_800;
    let total = pricing.charge(&together, &PriceBook::new()).unwrap();
    assert_eq!(total.amount.micros, 2);
}
