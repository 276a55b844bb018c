//! bursar's vocabulary and arithmetic. Pure: no I/O beyond reading a price table, no clock,
//! no floating point.
//!
//! - [`money`]: exact amounts in integer micros, currencies, the one rounding rule.
//! - [`decimal`]: exact decimals for rates, weights and factors (`"0.0425"`).
//! - [`tres`]: Slurm TRES strings as resource vectors.
//! - [`record`]: [`UsageRecord`], one billable allocation reported by a cluster.
//! - [`weights`]: Slurm `TRESBillingWeights` (`CPU=1.0,Mem=0.25G,GRES/gpu=4.0`).
//! - [`tables`]: instance price tables versioned by effective date, and the [`PriceBook`].
//! - [`charge`]: [`ClusterPricing`]: what a job costs (rate × time × QOS factor, end-state
//!   policy), exactly, rounded once; `estimate` for holds shares the same path.
//! - [`aws`]: the AWS Price List API's `GetProducts` filters and items, read exactly (the
//!   fetching is the gateway's).
//! - [`error`]: [`PricingError`], the crate's one error type.
#![deny(clippy::float_arithmetic)]

pub mod aws;
pub mod charge;
pub mod decimal;
pub mod error;
pub mod money;
pub mod record;
pub mod tables;
pub mod tres;
pub mod weights;

pub use charge::{
    Charge, ChargeReason, ClusterPricing, EndStateAction, EndStatePolicy, PartitionPricing,
};
pub use decimal::{Decimal, DecimalError};
pub use error::PricingError;
pub use money::{divide_half_even, format_micros, parse_micros, Currency, Money, MoneyError};
pub use record::{JobState, UsageRecord};
pub use tables::{InstancePrice, PriceBook, PriceQuote, PriceTable};
pub use tres::{Tres, TresError};
pub use weights::{BillingWeights, WeightsError};
