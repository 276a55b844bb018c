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
    /// Show the account tree (with users, blocks and closed accounts), or change it: create,
    /// move, close (audited as the Unix user running the command).
    Accounts(AccountsArgs),
    /// Users and their associations: list, associate, dissociate, set-default (audited).
    Users(UsersArgs),
    /// Set, renew and list allocations.
    #[command(subcommand)]
    Alloc(AllocCommand),
    /// Add money to (or, negative, take it from) the allocation covering a moment (audited).
    Deposit(DepositArgs),
    /// Move money between two accounts' allocations, in one transaction (audited); refused when
    /// the source's remaining (allocated − charged − held) would go negative.
    Transfer(TransferArgs),
    /// Give back part or all of a job's charge, capped at what is left of it (audited). The
    /// refund shows on statements against the job.
    Refund(RefundArgs),
    /// A signed manual adjustment of an account's usage: positive charges more (audited).
    Adjust(AdjustArgs),
    /// The audit log, newest first: who changed what, when, before and after.
    Audit(AuditArgs),
    /// Allocated, charged, held and remaining per account and currency.
    ///
    /// Admins on the bursar host read the local ledger (the configuration's database). Users
    /// ask the bursar server instead (GET /v1/accounts and /v1/accounts/NAME/balance, with the
    /// token from BURSAR_TOKEN or ~/.config/bursar/token): that happens with --remote, when
    /// BURSAR_URL is set, or when there is no local configuration or database (no
    /// --config/BURSAR_CONFIG, ./bursar.yaml, --database/BURSAR_DATABASE or ./bursar.db).
    /// --local forces the local ledger.
    Balance(BalanceArgs),
    /// Usage reports.
    #[command(subcommand)]
    Report(ReportCommand),
    /// An account's statement in one currency for a period: opening balance, every deposit,
    /// charge, refund, adjustment and hold movement of its subtree, closing balance.
    Statement(StatementArgs),
    /// Export the journal's usage for finance tools.
    #[command(subcommand)]
    Export(ExportCommand),
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
    /// Submit a batch job through bursar, as with sbatch: `bursar submit -A physics job.sh`.
    ///
    /// Takes sbatch's options and the script's #SBATCH lines (the command line wins), `--wrap`,
    /// or a dstack task file (`type: task`). bursar quotes every cluster, holds the estimate
    /// and forwards the job. `bursar submit --help` lists the options. Installed or linked as
    /// `sbatch`, the bursar binary behaves as `bursar submit`.
    #[command(disable_help_flag = true)]
    Submit(RawArgs),
    /// What a job would cost on every cluster, and whether the account can pay.
    ///
    /// Nothing is held or submitted. Options as `bursar submit`, plus
    /// `--format table|csv|json`; exit 1 when no cluster can take the job now.
    #[command(disable_help_flag = true)]
    Quote(RawArgs),
    /// Jobs submitted through bursar: state, estimate, hold and charge (held ones unless --all).
    Jobs(JobsArgs),
    /// Cancel jobs submitted through bursar (by the id `bursar submit` and `bursar jobs` show);
    /// their holds are released.
    Cancel(CancelArgs),
    /// Make bursar's token signing key and sign tokens (local admin commands, no server).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Run the HTTP API (docs/api.md) with the collection and hold-expiry loops, until SIGINT
    /// or SIGTERM. Needs an `auth:` section in the configuration.
    Serve(ServeArgs),
    /// Block new jobs of exhausted accounts on Slurm clusters with `enforce: {enabled: true}`
    /// (GrpSubmitJobs=0; running jobs go on), and lift the blocks bursar set once the account
    /// has money again. `bursar serve` does this after every collection pass.
    Enforce(EnforceArgs),
    /// Copy accounts and users between a Slurm cluster and the ledger, or make bursar's users
    /// members of a dstack cluster's project (never deletes).
    #[command(subcommand)]
    Sync(SyncCommand),
    /// Instance price tables: the versions in use (shipped, config files, stored in the
    /// ledger), importing new versions, and fetching current AWS EC2 prices.
    #[command(subcommand)]
    Prices(PricesCommand),
    /// Burn rate per allocation over a window (holds of running jobs count as spent) and the
    /// projected exhaustion date; flagged when it falls before the period ends.
    Forecast(ForecastArgs),
    /// Allocation alerts (50/80/100 % committed, projected to run out): check once, or list.
    #[command(subcommand)]
    Alerts(AlertsCommand),
}

#[derive(Debug, Subcommand)]
pub enum PricesCommand {
    /// Every price-table version: name, version, effective, currency, prices, where it comes
    /// from (builtin, config file, imported, aws) and when it was stored.
    List(FormatArgs),
    /// One version's prices: `bursar prices show aws-ec2@20261122T101500Z`.
    Show(PricesShowArgs),
    /// Store a table version (the YAML format of pricing/tables/README.md) in the ledger.
    /// Jobs that start at or after its `effective` are priced by it; earlier ones keep their
    /// price. Importing the same version with the same content again changes nothing; the
    /// same version with other content is refused.
    Import(PricesImportArgs),
    /// Fetch current EC2 Linux on-demand prices from the AWS Price List API and store them as
    /// a new version (`aws-ec2@<fetch time>`). Credentials: AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY (pricing:GetProducts).
    Refresh(PricesRefreshArgs),
}

#[derive(Debug, Args)]
pub struct PricesShowArgs {
    /// NAME@VERSION, as `bursar prices list` and every instance-priced charge show it.
    pub table: String,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct PricesImportArgs {
    /// The table file (YAML).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct PricesRefreshArgs {
    /// Fetch from the AWS Price List API (the one source so far).
    #[arg(long, required = true)]
    pub aws: bool,
    /// Region whose prices to fetch (default: prices.aws.region, else us-east-1).
    #[arg(long)]
    pub region: Option<String>,
    /// Instance types, comma-separated (default: prices.aws.instances, else the aws instance
    /// types the price tables list for the region).
    #[arg(long, value_delimiter = ',')]
    pub instances: Option<Vec<String>>,
    /// When the new prices take effect: YYYY-MM-DD or a UTC time (default: now). Jobs that
    /// started before keep the prices they had.
    #[arg(long)]
    pub effective: Option<String>,
    /// Price List API endpoint URL (default: prices.aws.endpoint, else AWS's).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Print what would change without storing anything.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ForecastArgs {
    /// Only this account (one row per currency).
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// The window the burn rate is measured over: 14d, 7d, 36h, … (default: alerts.window,
    /// else 14d).
    #[arg(long)]
    pub window: Option<String>,
    /// The moment to forecast from (default: now): YYYY-MM-DD, a UTC time or @unix-seconds.
    #[arg(long)]
    pub at: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Evaluate the alert rules once, record and log what fired, and deliver pending alerts
    /// to the webhook (for cron; `bursar serve` checks on its own). Exit 1 when a delivery
    /// failed (it is retried by the next check).
    Check(AlertsCheckArgs),
    /// Alerts fired: the open ones of allocations whose period has not ended (every one,
    /// re-armed and past included, with --all).
    List(AlertsListArgs),
}

#[derive(Debug, Args)]
pub struct AlertsCheckArgs {
    /// Evaluate as of this moment instead of now.
    #[arg(long)]
    pub at: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct AlertsListArgs {
    /// Every alert ever fired, re-armed ones and past periods included.
    #[arg(long, short = 'a')]
    pub all: bool,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct EnforceArgs {
    /// Print the sacctmgr commands without running them.
    #[arg(long)]
    pub dry_run: bool,
    /// Only this cluster (default: every cluster with enforcement enabled).
    #[arg(long, short = 'M')]
    pub cluster: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Create in the ledger the accounts, users and associations the Slurm cluster has.
    Import(SyncArgs),
    /// Create in Slurm the accounts and associations the ledger has and Slurm lacks; for a
    /// dstack cluster, create its users and add them to its project as `user`.
    Push(SyncArgs),
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The cluster (Slurm: its `enforce` section gives sacctmgr, SLURM_CONF and Slurm's name;
    /// dstack: its `collect.dstack` section gives URL, token and project).
    #[arg(long, short = 'M')]
    pub cluster: String,
    /// Print the changes without making them.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on, overriding the config's `listen` (default 127.0.0.1:8640);
    /// port 0 picks a free one (the address is printed).
    #[arg(long, env = "BURSAR_LISTEN")]
    pub listen: Option<String>,
    /// Threads of the server's async runtime (default: one per core). On a node shared with
    /// slurmctld, 1 spends about a tenth less CPU per end-to-end submission (fewer wake-ups
    /// between threads) at the price of peak quote and admission throughput.
    #[arg(long, env = "BURSAR_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
}

/// Words passed on unparsed (`bursar submit` and `quote` read sbatch's options themselves).
#[derive(Debug, Args)]
pub struct RawArgs {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SBATCH ARGS"
    )]
    pub args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Every job, whatever its state (default: the held ones, still running or waiting).
    #[arg(long, short = 'a', conflicts_with = "state")]
    pub all: bool,
    /// Only jobs in this state: held, settled, cancelled, expired, failed.
    #[arg(long)]
    pub state: Option<String>,
    /// Only this user's jobs (finance and admin see everyone's).
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Only jobs charged to this account.
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// The most jobs listed: the newest that match (the server's default is 1,000, its most
    /// 10,000).
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: Option<u32>,
    /// Only jobs older than this bursar job id (to page back: the id a listing names).
    #[arg(long)]
    pub before: Option<i64>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// bursar job ids (the number after "bursar job" when submitting).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Write a new random HS256 signing key (mode 0600); never overwrites a file.
    Keygen(TokenKeygenArgs),
    /// Sign a token for a user and print it (alone, on standard output).
    Issue(TokenIssueArgs),
}

#[derive(Debug, Args)]
pub struct TokenKeygenArgs {
    /// Where to write the key (default: auth.hs256_key_file from the configuration).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TokenIssueArgs {
    /// The user the token speaks for: the name the clusters know (the `sub` claim).
    #[arg(long)]
    pub user: String,
    /// user (submit, quote, own accounts), finance (read everything) or admin.
    #[arg(long, default_value = "user")]
    pub role: crate::auth::Role,
    /// Lifetime: 12h, 30d, 1w, … (at most 366 days; there is no revocation yet).
    #[arg(long, default_value = "30d")]
    pub ttl: String,
    /// The HS256 key (default: auth.hs256_key_file from the configuration).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
}

impl Cli {
    /// Parses a whole argument vector, `argv[0]` included.
    ///
    /// - Invoked as `sbatch` (the file name of `argv[0]`), the binary is `bursar submit`.
    /// - `submit` and `quote` take the rest of the line unparsed: sbatch's `-c` is
    ///   `--cpus-per-task`, not bursar's `--config`, and `-h` prints sbatch's usage. Global
    ///   options go before the subcommand (`bursar -c bursar.yaml quote job.sh`).
    ///
    /// Exits with clap's message on a usage error, as [`Parser::parse`] does.
    pub fn from_args(args: Vec<std::ffi::OsString>) -> Cli {
        let mut args = args;
        let invoked_as_sbatch = args
            .first()
            .and_then(|a| std::path::Path::new(a).file_name())
            .is_some_and(|name| name == "sbatch");
        if invoked_as_sbatch {
            args.splice(0..1, ["bursar".into(), "submit".into()]);
        }
        let mut i = 1;
        while let Some(word) = args.get(i).and_then(|w| w.to_str()) {
            match word {
                "-c" | "--config" | "--database" => i += 2,
                w if w.starts_with("--config=")
                    || w.starts_with("--database=")
                    || (w.starts_with("-c") && w.len() > 2) =>
                {
                    i += 1
                }
                _ => break,
            }
        }
        let raw = matches!(
            args.get(i).and_then(|w| w.to_str()),
            Some("submit" | "quote")
        );
        if !raw {
            return Cli::parse_from(args);
        }
        let rest: Vec<String> = args
            .split_off(i + 1)
            .into_iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        let mut cli = Cli::parse_from(args);
        if let Command::Submit(raw) | Command::Quote(raw) = &mut cli.command {
            raw.args = rest;
        }
        cli
    }
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
    /// Start of the window (default: the cluster's cursor minus its overlap). For a dstack
    /// cluster: read again every run submitted since then.
    #[arg(long, conflicts_with = "watch")]
    pub since: Option<String>,
    /// End of the window (default: now). Slurm clusters only: a dstack pass reads to the end
    /// of the runs list.
    #[arg(long, conflicts_with = "watch")]
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

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AccountsArgs {
    #[command(subcommand)]
    pub command: Option<AccountsCommand>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Create an account (under root unless --parent).
    Create(AccountCreateArgs),
    /// Move an account under another parent (a cycle is refused).
    Move(AccountMoveArgs),
    /// Close an account and its subtree for new jobs, allocations, deposits in and
    /// associations; refused while jobs hold money in it. Usage that still arrives is charged.
    Close(AccountCloseArgs),
}

#[derive(Debug, Args)]
pub struct AccountCreateArgs {
    pub name: String,
    #[arg(long)]
    pub parent: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct AccountMoveArgs {
    pub name: String,
    /// The new parent (`root` for the top level).
    #[arg(long)]
    pub parent: String,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct AccountCloseArgs {
    pub name: String,
    /// Why, for the audit log.
    #[arg(long)]
    pub reason: String,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct UsersArgs {
    #[command(subcommand)]
    pub command: Option<UsersCommand>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Let a user charge an account (a new user gets it as default account).
    Associate(AssociateArgs),
    /// Stop a user charging an account (not their default account).
    Dissociate(UserAccountArgs),
    /// Make an account a user's default account (associating them).
    SetDefault(UserAccountArgs),
}

#[derive(Debug, Args)]
pub struct AssociateArgs {
    pub user: String,
    pub account: String,
    /// Make it the user's default account too.
    #[arg(long)]
    pub default: bool,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct UserAccountArgs {
    pub user: String,
    pub account: String,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// What every money movement takes besides its amounts.
#[derive(Debug, Args)]
pub struct MovementArgs {
    #[arg(long)]
    pub currency: String,
    /// Why: shown on statements and in the audit log.
    #[arg(long)]
    pub reason: String,
    /// The moment whose allocation it goes to (YYYY-MM-DD or a UTC time). Default: now.
    #[arg(long, value_name = "DATE")]
    pub period_of: Option<String>,
    /// Idempotency key. Default: derived from the arguments and today's date (UTC), so the
    /// same command repeated the same day is a retry and changes nothing.
    #[arg(long)]
    pub key: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct DepositArgs {
    pub account: String,
    /// Exact decimal, in the currency's units; negative takes money back.
    #[arg(allow_hyphen_values = true)]
    pub amount: String,
    #[command(flatten)]
    pub movement: MovementArgs,
}

#[derive(Debug, Args)]
pub struct AdjustArgs {
    pub account: String,
    /// Exact signed decimal: positive charges more, negative gives back.
    #[arg(allow_hyphen_values = true)]
    pub amount: String,
    #[command(flatten)]
    pub movement: MovementArgs,
}

#[derive(Debug, Args)]
pub struct TransferArgs {
    pub from: String,
    pub to: String,
    /// Exact positive decimal, in the currency's units.
    pub amount: String,
    #[command(flatten)]
    pub movement: MovementArgs,
}

#[derive(Debug, Args)]
pub struct RefundArgs {
    /// The cluster's job id (as sacct shows it, array tasks as 123_4), or CLUSTER:JOB.
    pub job: String,
    /// Why: shown on statements and in the audit log.
    #[arg(long)]
    pub reason: String,
    /// How much, exactly (default: all that is left of the job's charge).
    #[arg(long)]
    pub amount: Option<String>,
    /// The job's cluster, when its id is on several.
    #[arg(long, short = 'M')]
    pub cluster: Option<String>,
    /// Idempotency key (default: derived from the arguments and today's date, UTC).
    #[arg(long)]
    pub key: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum AllocCommand {
    /// Give an account an allocation in a currency for a period [from, to).
    Set(AllocSetArgs),
    /// Create the next period's allocation after the current one (same amount and length
    /// unless given); running it again changes nothing.
    Renew(AllocRenewArgs),
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
pub struct AuditArgs {
    /// At most this many entries (1 to 10000).
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    /// Only entries with a smaller id: the id the listing before named, to page back.
    #[arg(long)]
    pub before: Option<i64>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct AllocRenewArgs {
    pub account: String,
    #[arg(long)]
    pub currency: String,
    /// The next period's amount (default: the current one's).
    #[arg(long)]
    pub amount: Option<String>,
    /// month, quarter or year (default: the current period's length).
    #[arg(long)]
    pub period: Option<String>,
    /// The allocation covering this moment is the current one (default: now).
    #[arg(long)]
    pub at: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// Only this account (and its row per currency).
    pub account: Option<String>,
    /// The moment to evaluate (default: now; local ledger only).
    #[arg(long)]
    pub at: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Ask the bursar server (BURSAR_URL, default http://127.0.0.1:8640), not the local ledger.
    #[arg(long, conflicts_with = "local")]
    pub remote: bool,
    /// Read the local ledger even when BURSAR_URL is set.
    #[arg(long)]
    pub local: bool,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Charges in [from, to) grouped by account and currency, and optionally more keys.
    Usage(UsageArgs),
    /// The users or jobs that cost the most in [from, to), per currency.
    Top(TopArgs),
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// user or job.
    #[arg(long, default_value = "user")]
    pub by: String,
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    /// At most this many rows per currency.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Only this currency.
    #[arg(long)]
    pub currency: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct StatementArgs {
    pub account: String,
    #[arg(long)]
    pub currency: String,
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// FinOps FOCUS 1.0 rows, one per usage entry of the journal (docs/finance.md).
    Focus(FocusArgs),
}

#[derive(Debug, Args)]
pub struct FocusArgs {
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    /// csv (default) or json.
    #[arg(long, short, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Start (inclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub from: String,
    /// End (exclusive): YYYY-MM-DD or a UTC time.
    #[arg(long)]
    pub to: String,
    /// Group by any of account,user,cluster,partition,qos,month,week,day (account and currency
    /// always; week is the ISO 8601 week, UTC).
    #[arg(long, value_delimiter = ',', default_value = "account")]
    pub by: Vec<String>,
    /// Each account's rows include its subtree's usage (totals still count each charge once).
    #[arg(long)]
    pub rollup: bool,
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
    /// Only jobs charged (whose charge is effective, at their end) at or after this time:
    /// YYYY-MM-DD or a UTC time. With --to, only the window is read, not the whole journal.
    #[arg(long, requires = "to")]
    pub from: Option<String>,
    /// Only jobs charged before this time (exclusive); needs --from.
    #[arg(long, requires = "from")]
    pub to: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}
