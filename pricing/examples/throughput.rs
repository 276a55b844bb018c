//! Prices a million usage records and reports the rate: `cargo run --release -p bursar-pricing
//! --example throughput`. The charge path should stay well under a second for a million.

use std::time::Instant;

use bursar_pricing::{
    BillingWeights, ClusterPricing, Currency, JobState, PartitionPricing, PriceBook, Tres,
    UsageRecord,
};

fn main() {
    let mut pricing = ClusterPricing::new(Currency::new("su"));
    let weights = |text: &str, max_tres| PartitionPricing::Weights {
        weights: BillingWeights::parse(text).expect("valid weights"),
        max_tres,
    };
    pricing.partitions.insert(
        "batch".into(),
        weights("CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:h100=8", false),
    );
    pricing
        .partitions
        .insert("fat".into(), weights("CPU=1,Mem=0.25G", true));
    pricing
        .qos_factors
        .insert("premium".into(), "2.0".parse().expect("decimal"));
    let book = PriceBook::builtin();

    let allocs = [
        "billing=1,cpu=1,mem=1000M,node=1",
        "cpu=64,gres/gpu:h100=4,gres/gpu=8,mem=512G,node=2",
        "billing=22,cpu=4,mem=4G,node=1",
    ]
    .map(|t| Tres::parse(t).expect("valid tres"));
    let partitions = ["batch", "fat", "debug"];
    let records: Vec<UsageRecord> = (0..1_000_000u64)
        .map(|i| {
            let k = (i % 3) as usize;
            UsageRecord {
                cluster: "c".into(),
                job_id: i.to_string(),
                display_id: i.to_string(),
                submit: 1_772_323_200,
                start: Some(1_772_323_200),
                end: Some(1_772_326_800),
                account: "a".into(),
                user: "u".into(),
                partition: Some(partitions[k].into()),
                qos: Some(if i % 2 == 0 { "normal" } else { "premium" }.into()),
                state: JobState::Completed,
                elapsed_us: (i % 86_400 + 1) * 1_000_000,
                alloc: allocs[k].clone(),
                time_limit_min: None,
                job_name: None,
                price_per_hour_micros: None,
                blocks: None,
            }
        })
        .collect();

    let started = Instant::now();
    let mut total: i128 = 0;
    for record in &records {
        let charge = pricing.charge(record, &book).expect("priced");
        total += i128::from(charge.amount.micros);
    }
    let elapsed = started.elapsed();
    println!(
        "priced {} records in {elapsed:?} ({:?} each); total {total} micros",
        records.len(),
        elapsed / u32::try_from(records.len()).unwrap_or(u32::MAX)
    );
}
