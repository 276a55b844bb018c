//! The `bursar` binary's library: everything between the command line and the crates that do
//! the work.
//!
//! - [`admin`]: the audited admin operations (accounts, associations, allocations, deposits,
//!   transfers, refunds, adjustments) shared by the command line and the API.
//! - [`cli`] defines the arguments; [`cmd`] has one handler per command.
//! - [`config`] reads the YAML configuration; [`app`] opens config, ledger and pricing once.
//! - [`import`] is the sacct import pipeline (parse, price, post; quarantine on the side).
//! - [`collect`] runs collection passes and the collection loop, with cursors and status.
//! - [`auth`] issues and verifies JWTs and knows the roles.
//! - [`admission`] quotes, routes, holds and forwards submitted jobs, and reports them.
//! - [`server`] is `bursar serve`: the HTTP API (axum), its auth, metrics and background loops.
//! - [`client`] is the user's side of the HTTP API: `submit` (and the `sbatch` alias), `quote`,
//!   `jobs`, `cancel`, remote `balance`; and `bursar token`.
//! - [`output`] renders tables, CSV and JSON; [`timefmt`] reads dates and durations.
//! - [`telemetry`] sets up logging.
//! - [`finance`]: `bursar statement`, `export focus` and `report top`.
//! - [`prices`]: where the price book comes from (shipped, config files, versions stored in
//!   the ledger) and `bursar prices` (list, show, import, refresh from AWS).
//! - [`forecast`]: `bursar forecast` and the forecast of the balance API; [`alerts`]: alert
//!   checks, webhook delivery, `bursar alerts check|list`.
//! - [`enforce`] blocks new jobs of exhausted accounts in Slurm; [`sync`] copies the account
//!   tree between Slurm and the ledger, and makes bursar's users members of dstack projects.

pub mod admin;
pub mod admission;
pub mod alerts;
pub mod app;
pub mod auth;
pub mod cli;
pub mod client;
pub mod cmd;
pub mod collect;
pub mod config;
pub mod enforce;
pub mod finance;
pub mod forecast;
pub mod import;
pub mod output;
pub mod prices;
pub mod reconcile;
pub mod request;
pub mod server;
pub mod sync;
pub mod telemetry;
pub mod timefmt;

use std::process::ExitCode;

/// Runs one command line to completion.
pub async fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    cmd::dispatch(cli).await
}
