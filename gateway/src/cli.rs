//! The `bursar` command line: argument definitions and dispatch.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;

#[derive(Debug, Parser)]
#[command(
    name = "bursar",
    version,
    about = "Allocations, pricing and a ledger for Slurm and cloud clusters, in core-hours and dollars"
)]
pub struct Cli {
    /// Configuration file (YAML). Default: ./bursar.yaml when it exists.
    #[arg(long, short = 'c', global = true, env = "BURSAR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Ledger database URL, overriding the config file (sqlite://PATH).
    #[arg(long, global = true, env = "BURSAR_DATABASE")]
    pub database: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print an annotated example configuration, or check one.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Import a sacct dump (`sacct --parsable2` with a header line) and charge every job in it.
    Import(ImportArgs),
    /// Show the account tree.
    Accounts(FormatArgs),
    /// Set and list allocations.
    #[command(subcommand)]
    Alloc(AllocCommand),
    /// Allocated, charged, held and remaining per account and currency.
    Balance(BalanceArgs),
    /// Usage reports.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Records that could not be charged, with the reason.
    #[command(subcommand)]
    Quarantine(QuarantineCommand),
    /// What each job costs: one line per job record, with its state and the reason for a 0.
    Charges(ChargesArgs),
    /// Collect usage from the configured clusters (one pass, or `--watch` to keep going).
    Collect(CollectArgs),
    /// Compare bursar's usage per account with the cluster's own view (sreport and sacct, or
    /// dstack's run costs) and explain every difference; exit 2 when jobs are missing, extra
    /// or stale.
    Reconcile(ReconcileArgs),
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The cluster to reconcile.
    #[arg(long, short = 'M')]
    pub cluster: String,
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    /// Don't force Slurm's usage rollup (`sacctmgr -i rollup`) before reading sreport.
    #[arg(long)]
    pub no_rollup: bool,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CollectArgs {
    #[command(subcommand)]
    pub command: Option<CollectCommand>,
    /// Only this cluster (default: every cluster with a `collect` section).
    #[arg(long, short = 'M')]
    pub cluster: Option<String>,
    /// Start of the window (default: the cluster's cursor minus its overlap).
    #[arg(long)]
    pub since: Option<String>,
    /// End of the window (default: now).
    #[arg(long)]
    pub until: Option<String>,
    /// Keep collecting on each cluster's interval until interrupted.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Subcommand)]
pub enum CollectCommand {
    /// Per cluster: last success, lag, last error, quarantined records.
    Status(FormatArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print an annotated example configuration.
    Example,
    /// Check the configuration and print what it declares.
    Check,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The cluster the records belong to; may be omitted when the file has a Cluster column.
    #[arg(long, short = 'M')]
    pub cluster: Option<String>,
    /// Time zone of the file's timestamps (default: the cluster's `timezone`, else local).
    #[arg(long)]
    pub timezone: Option<String>,
    /// Column names for a file without a header line (sacct -n), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// Don't print the summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// The file to import, or - for standard input.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct FormatArgs {
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum AllocCommand {
    /// Give an account an allocation in a currency for a period [from, to).
    Set(AllocSetArgs),
    /// List allocations with what has been charged and held against them.
    List(FormatArgs),
}

#[derive(Debug, Args)]
pub struct AllocSetArgs {
    pub account: String,
    #[arg(long)]
    pub currency: String,
    /// Exact decimal amount in the currency's units (e.g. 10000 core-hours, 2500.50 dollars).
    #[arg(long, allow_hyphen_values = true)]
    pub amount: String,
    /// Start of the period (YYYY-MM-DD, UTC). Default: no start.
    #[arg(long)]
    pub from: Option<String>,
    /// End of the period, exclusive. Default: no end.
    #[arg(long)]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// Only this account (and its row per currency).
    pub account: Option<String>,
    /// The moment to evaluate (default: now).
    #[arg(long)]
    pub at: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Charges in [from, to) grouped by account and currency, and optionally more keys.
    Usage(UsageArgs),
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    /// Group by any of account,user,cluster,partition,qos,month,day (account and currency always).
    #[arg(long, value_delimiter = ',', default_value = "account")]
    pub by: Vec<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// List quarantined lines with file, line number and reason.
    List(FormatArgs),
}

#[derive(Debug, Args)]
pub struct ChargesArgs {
    /// Only jobs charged to this account.
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// Only jobs of this cluster.
    #[arg(long, short = 'M')]
    pub cluster: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}
