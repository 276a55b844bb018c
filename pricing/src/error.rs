//! The crate's error for configuring pricing and pricing a job.

use crate::decimal::DecimalError;
use crate::money::Currency;
use crate::weights::WeightsError;

/// Why a price table could not be loaded or a job could not be priced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Decimal(#[from] DecimalError),
    /// A price table file is malformed or conflicts with one already loaded.
    #[error("price table {origin}: {message}")]
    Table { origin: String, message: String },
    /// The pricing configuration is inconsistent (names the offending key).
    #[error("pricing config: {0}")]
    Config(String),
    /// An instance-priced partition whose instance no loaded table lists at that time.
    #[error(
        "no price for {provider} instance {instance} in {region} at unix time {at}: no loaded \
         table in effect then lists it"
    )]
    NoPrice {
        provider: String,
        region: String,
        instance: String,
        at: i64,
    },
    /// A price table in one currency used by a cluster that bills in another.
    #[error(
        "{instance} is priced in {table} by its price table, but the cluster bills in {cluster}"
    )]
    CurrencyMismatch {
        instance: String,
        table: Currency,
        cluster: Currency,
    },
    /// The record cannot be priced as reported (e.g. `blocks` larger than `total_blocks`).
    #[error("job {job}: {problem}")]
    BadRecord { job: String, problem: String },
    /// The exact charge does not fit: an absurd rate, factor or duration.
    #[error("job {job}: charge overflows the range of money")]
    Overflow { job: String },
}
