//! bursar collectors: everything that talks to a cluster and turns what it reports into
//! [`bursar_pricing::UsageRecord`]s. Never touches the database (DESIGN.md, "Workspace").
//!
//! - [`dstack`]: dstack REST client: runs → records per job submission (keyset cursor,
//!   re-poll of unfinished runs, exact prices), cost cross-check, plan/apply/stop.
//! - [`sacct`]: streaming parser for `sacct --parsable2` / `--parsable` output (any column
//!   set and order, local or epoch times, steps skipped, bad lines quarantined), shared by
//!   `bursar import` and the sacct collector.
//! - [`slurmrestd`]: slurmrestd client (v0.0.38, v0.0.40–45, JWT minting): accounting jobs →
//!   records in bounded windows, job submit/cancel/ping, errors classed for retries.
//! - [`synth`]: deterministic synthetic sacct output for benchmarks and tests; the
//!   `bursar-gen-sacct` binary writes it to stdout.
#![deny(clippy::float_arithmetic)]

pub mod dstack;
pub mod sacct;
pub mod slurmrestd;
pub mod synth;

/// Something a cluster sent that could not be turned into a record, kept whole for a person:
/// the reason in words (naming the job and what is wrong) and the payload exactly as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQuarantine {
    pub reason: String,
    pub raw: String,
}
