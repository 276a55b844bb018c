//! Charges worked out by hand (each expectation's arithmetic is in its comment).

mod common;

use bursar_pricing::{
    ChargeReason, ClusterPricing, Currency, EndStateAction, JobState, PartitionPricing, PriceBook,
    PricingError, Tres,
};
use common::{cluster, micros, record, weights, MARCH_2026};

const HOUR_US: u64 = 3_600_000_000;

#[test]
fn onprem_weighted_partition() {
    let onprem = cluster(
        "su",
        "batch",
        weights("CPU=1.0,Mem=0.25G,GRES/gpu=4.0", false),
    );
    let cpu_job = "billing=1,cpu=1,mem=1000M,node=1";
    let gpu_job = "cpu=1,gres/gpu=1,mem=1000M";
    let cases = [
        // rate 1 + 0.25×1000/1024 = 1.244140625/h; ×2s = 691.189236… micros
        (cpu_job, "normal", 2_000_000, 691),
        // premium ×2: 1382.378472…
        (cpu_job, "premium", 2_000_000, 1382),
        // a QOS not configured has factor 1
        (cpu_job, "nosuchqos", 2_000_000, 691),
        // 1 h: 1_244_140.625 → .625 rounds up
        (cpu_job, "normal", HOUR_US, 1_244_141),
        // GPU job: 1 + 4 + 0.244140625 = 5.244140625/h; ×2s = 2913.411458…
        (gpu_job, "normal", 2_000_000, 2913),
        // 1 h: 5_244_140.625
        (gpu_job, "normal", HOUR_US, 5_244_141),
        // a started job that ran 0 s costs 0
        (cpu_job, "normal", 0, 0),
    ];
    for (alloc, qos, elapsed_us, expected) in cases {
        let job = record("batch", qos, alloc, elapsed_us);
        assert_eq!(
            micros(&onprem, &job),
            expected,
            "{alloc} {qos} {elapsed_us}"
        );
    }
    let charge = onprem
        .charge(
            &record("batch", "normal", cpu_job, 2_000_000),
            &PriceBook::new(),
        )
        .unwrap();
    assert_eq!(charge.amount.currency, Currency::new("su"));
    assert!(charge.is_final && charge.reason.is_none() && charge.price_version.is_none());
}

#[test]
fn typed_gpus_are_a_breakdown_not_extra_gpus() {
    let alloc = "cpu=8,mem=64G,gres/gpu:h100=2,gres/gpu=2,node=1";
    let ninety_minutes = 5_400_000_000;
    // 8×0.5 + 64×0.1 + 2×10 = 30.4/h; ×1.5 h = 45.6 usd
    let untyped = cluster(
        "usd",
        "cloud",
        weights("CPU=0.5,Mem=0.1G,GRES/gpu=10.0", false),
    );
    assert_eq!(
        micros(&untyped, &record("cloud", "normal", alloc, ninety_minutes)),
        45_600_000
    );
    // h100s at 12, none at 10: 4 + 6.4 + 24 = 34.4/h; ×1.5 h = 51.6 usd
    let typed = cluster(
        "usd",
        "cloud",
        weights("CPU=0.5,Mem=0.1G,GRES/gpu=10.0,GRES/gpu:h100=12", false),
    );
    assert_eq!(
        micros(&typed, &record("cloud", "normal", alloc, ninety_minutes)),
        51_600_000
    );
}

#[test]
fn max_tres_prices_the_dominant_node_resource() {
    let text = "CPU=1,Mem=0.25G,GRES/gpu=4,License/matlab=1.5";
    let alloc = "cpu=8,mem=64G,gres/gpu=1,license/matlab=2,node=1";
    // max(8, 16, 4) + 2×1.5 = 19/h
    let max = cluster("su", "p", weights(text, true));
    assert_eq!(
        micros(&max, &record("p", "normal", alloc, HOUR_US)),
        19_000_000
    );
    // sum: 8 + 16 + 4 + 3 = 31/h
    let sum = cluster("su", "p", weights(text, false));
    assert_eq!(
        micros(&sum, &record("p", "normal", alloc, HOUR_US)),
        31_000_000
    );
}

#[test]
fn unweighted_partition_uses_billing_then_cpus() {
    let plain = ClusterPricing::new(Currency::new("su"));
    let half_hour = HOUR_US / 2;
    // billing=22 for 0.5 h = 11 su
    let billed = record("any", "normal", "billing=22,cpu=4,node=1", half_hour);
    assert_eq!(micros(&plain, &billed), 11_000_000);
    // no billing: 4 CPUs for 0.5 h = 2 su
    let unbilled = record("any", "normal", "cpu=4,node=1", half_hour);
    assert_eq!(micros(&plain, &unbilled), 2_000_000);
    // no partition at all: the default pricing
    let mut no_partition = billed.clone();
    no_partition.partition = None;
    assert_eq!(micros(&plain, &no_partition), 11_000_000);
}

fn two_versions() -> PriceBook {
    let table = |version: &str, effective: &str, price: &str| {
        format!(
            "name: cloud\nversion: \"{version}\"\neffective: {effective}\ncurrency: usd\n\
             source: test\nprices:\n  - {{provider: aws, region: us-east-1, instance: c5.xlarge, \
             vcpus: 4, memory_gib: 8, price_per_hour: \"{price}\"}}\n"
        )
    };
    let mut book = PriceBook::new();
    book.add_yaml_str(&table("1", "2026-01-01", "0.17"), "v1")
        .unwrap();
    book.add_yaml_str(&table("2", "2026-06-01", "0.15"), "v2")
        .unwrap();
    book
}

#[test]
fn instance_partition_uses_the_table_in_effect_at_start() {
    let book = two_versions();
    let june = 1_780_272_000; // 2026-06-01T00:00:00Z
    let pricing = cluster(
        "usd",
        "cloud",
        PartitionPricing::Instance {
            provider: "aws".into(),
            region: "us-east-1".into(),
            instance: "c5.xlarge".into(),
        },
    );
    let job_at = |start: i64, alloc: &str| {
        let mut job = record("cloud", "normal", alloc, HOUR_US / 2);
        job.start = Some(start);
        job
    };
    let price = |start: i64, alloc: &str| {
        let charge = pricing.charge(&job_at(start, alloc), &book).unwrap();
        (
            charge.amount.micros,
            charge.price_version.unwrap().to_string(),
        )
    };
    // 2 nodes × 0.5 h × 0.17 = 0.17 usd, old table
    assert_eq!(price(june - 1, "cpu=8,node=2"), (170_000, "cloud@1".into()));
    // 2 nodes × 0.5 h × 0.15 = 0.15 usd, new table
    assert_eq!(price(june, "cpu=8,node=2"), (150_000, "cloud@2".into()));
    // no `node` TRES: one node
    assert_eq!(price(june, "cpu=4"), (75_000, "cloud@2".into()));
    // before any table
    let error = pricing.charge(&job_at(0, "node=1"), &book).unwrap_err();
    assert!(matches!(error, PricingError::NoPrice { .. }), "{error}");
    // a su cluster cannot use a usd price table
    let mut su = pricing.clone();
    su.currency = Currency::new("su");
    let error = su.charge(&job_at(june, "node=1"), &book).unwrap_err();
    assert!(
        matches!(error, PricingError::CurrencyMismatch { .. }),
        "{error}"
    );
}

#[test]
fn instance_partition_with_the_shipped_table() {
    let pricing = cluster(
        "usd",
        "gpu",
        PartitionPricing::Instance {
            provider: "aws".into(),
            region: "us-east-1".into(),
            instance: "p5.48xlarge".into(),
        },
    );
    // 1 node × 1 h × 55.04
    let charge = pricing
        .charge(
            &record("gpu", "normal", "cpu=192,node=1,gres/gpu=8", HOUR_US),
            &PriceBook::builtin(),
        )
        .unwrap();
    assert_eq!(charge.amount.micros, 55_040_000);
    assert_eq!(charge.price_version.as_deref(), Some("instances@2026-11"));
}

#[test]
fn dstack_reported_price_prorated_by_blocks() {
    let pricing = ClusterPricing::new(Currency::new("usd"));
    let mut job = record("", "normal", "cpu=4,gres/gpu=1", HOUR_US);
    job.partition = None;
    job.qos = None;
    job.price_per_hour_micros = Some(2_500_000);
    // 2.5/h × 1 h, whole instance
    assert_eq!(micros(&pricing, &job), 2_500_000);
    // 2.5/h × 1 h × 2/8 = 0.625
    job.blocks = Some((2, 8));
    assert_eq!(micros(&pricing, &job), 625_000);
    // sub-second elapsed: 2.5 × 1234.56789 s / 3600 × 2/8 = 214334.703… micros
    job.elapsed_us = 1_234_567_890;
    assert_eq!(micros(&pricing, &job), 214_335);
    for bad in [(1, 0), (9, 8)] {
        job.blocks = Some(bad);
        let error = pricing.charge(&job, &PriceBook::new()).unwrap_err();
        assert!(matches!(error, PricingError::BadRecord { .. }), "{error}");
    }
}

#[test]
fn end_state_policy() {
    let pricing = cluster("su", "batch", weights("CPU=1", false));
    let book = PriceBook::new();
    let ran = record("batch", "normal", "cpu=2,node=1", HOUR_US);
    let with_state = |state: JobState| {
        let mut job = ran.clone();
        job.state = state;
        job
    };
    let charge_of = |pricing: &ClusterPricing, job| pricing.charge(&job, &book).unwrap();

    for state in [
        JobState::Completed,
        JobState::Failed,
        JobState::Timeout,
        JobState::Cancelled,
        JobState::OutOfMemory,
        JobState::Preempted,
        JobState::Deadline,
        JobState::Requeued,
    ] {
        let charge = charge_of(&pricing, with_state(state));
        assert_eq!(charge.amount.micros, 2_000_000, "{state}");
        assert!(charge.is_final && charge.reason.is_none(), "{state}");
    }

    let node_fail = charge_of(&pricing, with_state(JobState::NodeFail));
    assert_eq!(node_fail.amount.micros, 0);
    assert_eq!(
        node_fail.reason,
        Some(ChargeReason::Refunded(JobState::NodeFail))
    );
    assert_eq!(
        node_fail.reason.unwrap().to_string(),
        "NODE_FAIL: refunded by policy"
    );
    assert!(node_fail.is_final);
    let boot_fail = charge_of(&pricing, with_state(JobState::BootFail));
    assert_eq!(
        boot_fail.reason,
        Some(ChargeReason::Refunded(JobState::BootFail))
    );
    let revoked = charge_of(&pricing, with_state(JobState::Revoked));
    assert_eq!(revoked.reason, Some(ChargeReason::Free(JobState::Revoked)));
    assert_eq!(revoked.amount.micros, 0);

    // cancelled while pending: no start
    let mut cancelled = with_state(JobState::Cancelled);
    cancelled.start = None;
    cancelled.elapsed_us = 0;
    cancelled.alloc = Tres::new();
    let charge = charge_of(&pricing, cancelled.clone());
    assert_eq!(
        (charge.amount.micros, charge.reason, charge.is_final),
        (0, Some(ChargeReason::NeverStarted), true)
    );
    assert_eq!(charge.reason.unwrap().to_string(), "never started");
    // a start time but no time and no allocation (what sacct prints for some cancellations)
    cancelled.start = Some(MARCH_2026);
    assert_eq!(
        charge_of(&pricing, cancelled).reason,
        Some(ChargeReason::NeverStarted)
    );

    // The record slurmdbd ends at a resize is final: the time before it is charged.
    let resized = charge_of(&pricing, with_state(JobState::Resizing));
    assert!(resized.is_final);
    assert_eq!(resized.amount.micros, 2_000_000);
    for state in [JobState::Running, JobState::Pending, JobState::Suspended] {
        let charge = charge_of(&pricing, with_state(state));
        assert_eq!(charge.amount.micros, 0, "{state}");
        assert!(!charge.is_final, "{state}");
        assert_eq!(charge.reason, Some(ChargeReason::NotFinal(state)));
    }

    let mut strict = pricing.clone();
    strict
        .end_states
        .set(JobState::NodeFail, EndStateAction::Charge)
        .unwrap();
    strict
        .end_states
        .set(JobState::Preempted, EndStateAction::Free)
        .unwrap();
    assert_eq!(
        charge_of(&strict, with_state(JobState::NodeFail))
            .amount
            .micros,
        2_000_000
    );
    assert_eq!(
        charge_of(&strict, with_state(JobState::Preempted)).reason,
        Some(ChargeReason::Free(JobState::Preempted))
    );
    assert!(strict
        .end_states
        .set(JobState::Running, EndStateAction::Charge)
        .is_err());
}

#[test]
fn overflow_is_an_error_never_a_wrap() {
    let book = PriceBook::new();
    // fits 256 bits but not i64 micros
    let pricing = cluster("su", "p", weights("CPU=1000000000000", false));
    let mut job = record("p", "normal", "cpu=18446744073709551615", u64::MAX);
    let error = pricing.charge(&job, &book).unwrap_err();
    assert!(matches!(error, PricingError::Overflow { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "job test/42: charge overflows the range of money"
    );
    // overflows 256 bits on the way
    let mut huge = cluster("su", "p", weights("CPU=100000000000000000000000000", false));
    huge.qos_factors
        .insert("big".into(), "99999999999999999999999999".parse().unwrap());
    job.qos = Some("big".into());
    let error = huge.charge(&job, &book).unwrap_err();
    assert!(matches!(error, PricingError::Overflow { .. }), "{error}");
    // just inside: i64::MAX micros is reachable exactly
    let exact = ClusterPricing::new(Currency::new("su"));
    let max_job = record("p", "normal", "billing=3600", i64::MAX as u64);
    assert_eq!(micros(&exact, &max_job), i64::MAX);
    let error = exact
        .estimate(None, None, &Tres::new(), u64::MAX, 0, &book)
        .unwrap_err();
    assert!(matches!(error, PricingError::Overflow { .. }), "{error}");
}

#[test]
fn rounds_half_to_even_at_exactly_half_a_micro() {
    // billing=1 (1 su/h): elapsed_us / 3600 micros
    let pricing = ClusterPricing::new(Currency::new("su"));
    let cases = [
        (1_800, 0),  // 0.5 → 0
        (5_400, 2),  // 1.5 → 2
        (9_000, 2),  // 2.5 → 2
        (12_600, 4), // 3.5 → 4
        (1_801, 1),  // just above half
        (5_399, 1),  // just below 1.5
    ];
    for (elapsed_us, expected) in cases {
        let job = record("p", "normal", "billing=1,cpu=1", elapsed_us);
        assert_eq!(micros(&pricing, &job), expected, "{elapsed_us} us");
    }
}

#[test]
fn estimate_shares_the_charge_path() {
    let onprem = cluster(
        "su",
        "batch",
        weights("CPU=1.0,Mem=0.25G,GRES/gpu=4.0", false),
    );
    let alloc = Tres::parse("cpu=1,gres/gpu=1,mem=1000M").unwrap();
    let book = PriceBook::builtin();
    let estimate = onprem
        .estimate(
            Some("batch"),
            Some("premium"),
            &alloc,
            3600,
            MARCH_2026,
            &book,
        )
        .unwrap();
    // 5.244140625 × 1 h × 2
    assert_eq!(estimate.micros, 10_488_281);
    assert_eq!(estimate.currency, Currency::new("su"));
}

#[test]
fn explain_tells_how_a_charge_was_made() {
    let onprem = cluster(
        "su",
        "batch",
        weights("CPU=1.0,Mem=0.25G,GRES/gpu=4.0", false),
    );
    let book = PriceBook::builtin();
    let job = record(
        "batch",
        "normal",
        "billing=1,cpu=1,mem=1000M,node=1",
        2_000_000,
    );
    assert_eq!(
        onprem.explain(&job, &book).unwrap(),
        "weights(batch) 1.244140625/h × 2s × qos normal 1 = 0.000691 su"
    );
    let mut dstack = job.clone();
    dstack.price_per_hour_micros = Some(1_000_000);
    dstack.blocks = Some((1, 3));
    assert_eq!(
        onprem.explain(&dstack, &book).unwrap(),
        "reported price × 1/3 blocks 1/3/h × 2s × qos normal 1 = 0.000185 su"
    );
    let mut failed = job.clone();
    failed.state = JobState::NodeFail;
    assert_eq!(
        onprem.explain(&failed, &book).unwrap(),
        "0 su: NODE_FAIL: refunded by policy"
    );
}

#[test]
fn cluster_pricing_from_config() {
    let yaml = r#"
currency: usd
partitions:
  batch: { weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0" }
  fat: { weights: "CPU=1,Mem=0.25G", max_tres: true }
  cloud: { instance: c5.xlarge, region: us-east-1 }
  debug: {}
qos_factors: { premium: "2.0", low: 0.5, free: 0 }
end_states: { NODE_FAIL: charge, PREEMPTED: free }
"#;
    let pricing: ClusterPricing = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(pricing.currency, Currency::new("usd"));
    assert_eq!(
        pricing.partition(Some("batch")),
        &weights("CPU=1,Mem=0.25G,GRES/gpu=4", false)
    );
    assert_eq!(
        pricing.partition(Some("fat")),
        &weights("CPU=1,Mem=0.25G", true)
    );
    assert_eq!(
        pricing.partition(Some("cloud")),
        &PartitionPricing::Instance {
            provider: "aws".into(),
            region: "us-east-1".into(),
            instance: "c5.xlarge".into()
        }
    );
    assert_eq!(
        pricing.partition(Some("debug")),
        &PartitionPricing::BillingTres
    );
    assert_eq!(
        pricing.partition(Some("unlisted")),
        &PartitionPricing::BillingTres
    );
    assert_eq!(pricing.qos_factors["low"], "0.5".parse().unwrap());
    assert_eq!(
        pricing.end_states.action(JobState::NodeFail),
        Some(EndStateAction::Charge)
    );
    assert_eq!(
        pricing.end_states.action(JobState::BootFail),
        Some(EndStateAction::Refund)
    );
    assert_eq!(pricing.end_states.action(JobState::Running), None);

    let refused = [
        ("currency: su\ncolour: red\n", "unknown field `colour`"),
        (
            "currency: su\npartitions: { p: { weights: \"CPU=1\", instance: x } }\n",
            "not both",
        ),
        (
            "currency: su\npartitions: { p: { instance: x } }\n",
            "needs a `region`",
        ),
        (
            "currency: su\npartitions: { p: { max_tres: true } }\n",
            "only with `weights`",
        ),
        (
            "currency: su\npartitions: { p: { weights: \"CPU=1\", region: x } }\n",
            "only with `instance`",
        ),
        (
            "currency: su\npartitions: { p: { weights: \"CPUS=1\" } }\n",
            "\"CPUS=1\": unknown TRES",
        ),
        (
            "currency: su\nend_states: { RUNNING: charge }\n",
            "not a final state",
        ),
        (
            "currency: su\nend_states: { EXPLODED: charge }\n",
            "unknown job state",
        ),
        (
            "currency: su\nend_states: { NODE_FAIL: maybe }\n",
            "unknown variant",
        ),
        (
            "currency: su\nqos_factors: { x: \"1e3\" }\n",
            "not a plain decimal",
        ),
        (
            "currency: su\nqos_factors: { x: -1 }\n",
            "negative usage factor",
        ),
    ];
    for (yaml, expected) in refused {
        let message = serde_yaml::from_str::<ClusterPricing>(yaml)
            .unwrap_err()
            .to_string();
        assert!(message.contains(expected), "{yaml}: {message}");
    }
}

#[test]
fn negative_qos_factor_is_refused() {
    let mut pricing = cluster("su", "p", weights("CPU=1", false));
    pricing
        .qos_factors
        .insert("weird".into(), "-1".parse().unwrap());
    let error = pricing
        .charge(&record("p", "weird", "cpu=1", HOUR_US), &PriceBook::new())
        .unwrap_err();
    assert!(
        error.to_string().contains("negative usage factor"),
        "{error}"
    );
}
