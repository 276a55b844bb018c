//! The `bursar` binary's library: everything between the command line and the crates that do
//! the work.
//!
//! - [`cli`] defines the arguments; [`cmd`] has one handler per command.
//! - [`config`] reads the YAML configuration; [`app`] opens config, ledger and pricing once.
//! - [`import`] is the sacct import pipeline (parse, price, post; quarantine on the side).
//! - [`collect`] runs collection passes and the collection loop, with cursors and status.
//! - [`auth`] issues and verifies JWTs and knows the roles.
//! - [`output`] renders tables, CSV and JSON; [`timefmt`] reads dates and durations.
//! - [`telemetry`] sets up logging.

pub mod app;
pub mod auth;
pub mod cli;
pub mod cmd;
pub mod collect;
pub mod config;
pub mod import;
pub mod output;
pub mod reconcile;
pub mod request;
pub mod telemetry;
pub mod timefmt;

use std::process::ExitCode;

/// Runs one command line to completion.
pub async fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    cmd::dispatch(cli).await
}
