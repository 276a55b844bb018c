//! bursar's vocabulary and arithmetic. Pure: no I/O beyond reading a price table, no clock.
//!
//! - [`money`]: exact amounts in integer micros, currencies.
//! - [`tres`]: Slurm TRES strings as resource vectors.
//! - [`record`]: [`UsageRecord`], one billable allocation reported by a cluster.
#![deny(clippy::float_arithmetic)]

pub mod money;
pub mod record;
pub mod tres;

pub use money::{Currency, Money, MoneyError};
pub use record::{JobState, UsageRecord};
pub use tres::Tres;
