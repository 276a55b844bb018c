//! bursar collectors: everything that talks to a cluster and turns what it reports into
//! [`bursar_pricing::UsageRecord`]s. Never touches the database (DESIGN.md, "Workspace").
//!
//! - [`sacct`]: streaming parser for `sacct --parsable2` / `--parsable` output (any column
//!   set and order, local or epoch times, steps skipped, bad lines quarantined), shared by
//!   `bursar import` and the sacct collector.
//! - [`synth`]: deterministic synthetic sacct output for benchmarks and tests; the
//!   `bursar-gen-sacct` binary writes it to stdout.
#![deny(clippy::float_arithmetic)]

pub mod sacct;
pub mod synth;
