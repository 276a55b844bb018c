//! Builders shared by the charge tests.
#![allow(dead_code)]

use bursar_pricing::{
    BillingWeights, ClusterPricing, Currency, JobState, PartitionPricing, PriceBook, Tres,
    UsageRecord,
};

/// 2026-03-01T00:00:00Z: inside the shipped table's validity.
pub const MARCH_2026: i64 = 1_772_323_200;

pub fn record(partition: &str, qos: &str, alloc: &str, elapsed_us: u64) -> UsageRecord {
    UsageRecord {
        cluster: "test".into(),
        job_id: "42".into(),
        display_id: "42".into(),
        submit: MARCH_2026 - 60,
        start: Some(MARCH_2026),
        end: Some(MARCH_2026 + i64::try_from(elapsed_us / 1_000_000).unwrap()),
        account: "acct".into(),
        user: "alice".into(),
        partition: Some(partition.into()),
        qos: Some(qos.into()),
        state: JobState::Completed,
        elapsed_us,
        alloc: Tres::parse(alloc).unwrap(),
        time_limit_min: None,
        job_name: None,
        price_per_hour_micros: None,
        blocks: None,
    }
}

pub fn weights(text: &str, max_tres: bool) -> PartitionPricing {
    PartitionPricing::Weights {
        weights: BillingWeights::parse(text).unwrap(),
        max_tres,
    }
}

/// A cluster with one partition `name` priced by `pricing`, and QOS `premium` at 2.0.
pub fn cluster(currency: &str, name: &str, pricing: PartitionPricing) -> ClusterPricing {
    let mut cluster = ClusterPricing::new(Currency::new(currency));
    cluster.partitions.insert(name.into(), pricing);
    cluster
        .qos_factors
        .insert("premium".into(), "2.0".parse().unwrap());
    cluster
}

pub fn micros(cluster: &ClusterPricing, record: &UsageRecord) -> i64 {
    cluster
        .charge(record, &PriceBook::builtin())
        .unwrap()
        .amount
        .micros
}
