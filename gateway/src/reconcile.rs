//! `bursar reconcile`: bursar's per-account usage beside the cluster's own view, and every
//! difference with its reason — what an admin needs to trust bursar's numbers.
//!
//! **Slurm.** Three views of one window: `sreport` (what admins look at: hourly rollups,
//! integer billing, whole minutes, no QOS UsageFactor), `sacct` (every job record: its integer
//! `billing` TRES and elapsed time) and bursar's ledger (exact TRES priced with the configured
//! weights × QOS factor, refunds by policy). Per account the difference bursar − sreport is
//! split into terms that add up to it exactly (each one computed, none guessed):
//!
//! ```text
//! bursar − sreport =  (bursar − expected)            ledger vs sacct: missing, stale, extra jobs
//!                   + (expected − expected₁)         QOS usage factors (sreport ignores them)
//!                   + (expected₁ − R_charged)        billing TRES truncation (weights vs integer billing)
//!                   + (R_charged − R_final)          refunds by policy (NODE_FAIL, BOOT_FAIL)
//!                   + (R_final − R)                  jobs still running (charged when they end)
//!                   + (R − R_clip)                   jobs crossing the window's edges
//!                   + (R_clip − sreport_seconds)     rollup not current
//!                   + (sreport_seconds − sreport)    sreport's whole-minute rounding
//! ```
//!
//! where `expected` is what bursar's pricing says for sacct's records now, `expected₁` the same
//! with every QOS factor 1, and `R…` are Σ billing × elapsed from sacct (over the charged jobs,
//! the final jobs, every job bursar's window holds, and every job's time inside sreport's
//! window). Slurm's quantities are kept in billing-microseconds (integers) and turned into
//! micros of billing-hours once per partial sum, so the terms add up to the difference exactly.
//!
//! **dstack.** Per run: dstack's `cost` beside bursar's sum over the run's submissions, split
//! into not-yet-collected, shared-instance proration, refunds, unfinished submissions and
//! dstack's rounding to 4 places.
//!
//! Jobs the cluster lists that bursar has not charged (missing), that bursar charged and the
//! cluster doesn't list (extra), and whose posting no longer matches the record (stale) are
//! errors: the command exits with status 2. Money differences a policy explains are not.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use bursar_collectors::dstack::RunSummary;
use bursar_collectors::sacct::runner::SacctCommand;
use bursar_ledger::JournalEntry;
use bursar_pricing::money::format_micros;
use bursar_pricing::{
    ChargeReason, ClusterPricing, Currency, EndStateAction, JobState, PartitionPricing, PriceBook,
    UsageRecord,
};
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::ReconcileArgs;
use crate::collect::{Collector, Source};
use crate::config::{ClusterConfig, ClusterKind};
use crate::output::{csv_cell, write_json, Format, Table};
use crate::timefmt::{format_instant, now, parse_instant};

/// The exit status when jobs are missing, extra or stale (1 is an error running the command).
pub const EXIT_PROBLEMS: u8 = 2;

/// dstack differences up to a cent are rounding, not worth a line.
const CENT_MICROS: i64 = 10_000;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Microseconds per hour: billing-microseconds / this = micros of billing-hours.
const US_PER_HOUR_PER_MICRO: i128 = 3600;

// --- the ledger's side ------------------------------------------------------------------------

/// One job identity as the ledger has it now: the sum of its usage entries, described by its
/// current revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPosting {
    pub cluster: String,
    pub job_id: String,
    pub display_id: String,
    pub submit: i64,
    pub account: String,
    pub user: String,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub state: String,
    pub revision: Option<String>,
    pub currency: Currency,
    pub amount: i64,
    pub effective_at: i64,
    pub note: Option<String>,
}

/// The ledger's postings on `cluster` that reconciling `[from, to)` looks at: every job with
/// usage effective in the window, and every job the cluster lists (`listed`: a record the
/// cluster puts in the window may be posted outside it), each with all of its entries (its
/// amount and latest revision may come from entries outside the window). Never the
/// cluster's whole journal, which grows with every job it ever ran.
pub async fn window_postings<'a>(
    app: &App,
    cluster: &str,
    from: i64,
    to: i64,
    listed: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<Vec<JobPosting>> {
    let mut jobs = window_jobs(app, Some(cluster), from, to).await?;
    jobs.extend(
        listed
            .into_iter()
            .map(|id| (cluster.to_string(), id.to_string())),
    );
    postings_of(app, jobs).await
}

/// The jobs `(cluster, job id)` with usage effective in `[from, to)`, on `cluster` or any:
/// the window read a day at a time through the journal's time index.
pub async fn window_jobs(
    app: &App,
    cluster: Option<&str>,
    from: i64,
    to: i64,
) -> anyhow::Result<BTreeSet<(String, String)>> {
    let mut jobs = BTreeSet::new();
    for (start, stop) in app.ledger.usage_days(from, to).await? {
        for e in app.ledger.usage_entries_of_day(start, stop).await? {
            if let (Some(c), Some(job_id)) = (e.cluster, e.job_id) {
                if cluster.is_none_or(|wanted| wanted == c) {
                    jobs.insert((c, job_id));
                }
            }
        }
    }
    Ok(jobs)
}

/// Most jobs whose entries one statement reads.
const JOBS_PER_READ: usize = 10_000;

/// The postings of `jobs`, each with all of its entries, in order of first appearance in the
/// journal: read through the journal's job indexes ([`bursar_ledger::Ledger::jobs_journal`]).
pub async fn postings_of(
    app: &App,
    jobs: BTreeSet<(String, String)>,
) -> anyhow::Result<Vec<JobPosting>> {
    Ok(job_postings(entries_of(app, jobs).await?))
}

/// The journal entries of `jobs`, in posting order, as the whole journal lists them.
pub async fn entries_of(
    app: &App,
    jobs: BTreeSet<(String, String)>,
) -> anyhow::Result<Vec<JournalEntry>> {
    let jobs: Vec<(String, String)> = jobs.into_iter().collect();
    let mut entries = Vec::new();
    for chunk in jobs.chunks(JOBS_PER_READ) {
        entries.extend(app.ledger.jobs_journal(chunk).await?);
    }
    // A job's entries are all in one read.
    entries.sort_by_key(|e| e.id);
    Ok(entries)
}

/// Aggregates journal entries per job identity `(cluster, job id, submit)`, in order of first
/// appearance: the amount is the sum of every usage entry; the description (account, state,
/// time, revision) is the latest entry that is not a reversal — a reversal carries the *old*
/// revision (its `job_count` is −1), the entry after it the new one.
pub fn job_postings(entries: impl IntoIterator<Item = JournalEntry>) -> Vec<JobPosting> {
    let mut jobs: Vec<JobPosting> = Vec::new();
    let mut index: HashMap<(String, String, i64), usize> = HashMap::new();
    for e in entries.into_iter().filter(|e| e.kind.is_usage()) {
        let (Some(cluster), Some(job_id), Some(submit)) = (&e.cluster, &e.job_id, e.submit) else {
            continue;
        };
        let key = (cluster.clone(), job_id.clone(), submit);
        let describes = e.job_count >= 0;
        match index.get(&key) {
            Some(&i) => {
                let job = &mut jobs[i];
                job.amount = job.amount.saturating_add(e.amount);
                if describes {
                    describe(job, e);
                }
            }
            None => {
                index.insert(key, jobs.len());
                let mut job = JobPosting {
                    cluster: cluster.clone(),
                    job_id: job_id.clone(),
                    display_id: String::new(),
                    submit,
                    account: String::new(),
                    user: String::new(),
                    partition: None,
                    qos: None,
                    state: String::new(),
                    revision: None,
                    currency: e.currency.clone(),
                    amount: e.amount,
                    effective_at: e.effective_at,
                    note: None,
                };
                describe(&mut job, e);
                jobs.push(job);
            }
        }
    }
    jobs
}

fn describe(job: &mut JobPosting, e: JournalEntry) {
    job.display_id = e.display_id.unwrap_or_default();
    job.account = e.account;
    job.user = e.user.unwrap_or_default();
    job.partition = e.partition;
    job.qos = e.qos;
    job.state = e.state.unwrap_or_default();
    job.revision = e.revision;
    job.currency = e.currency;
    job.effective_at = e.effective_at;
    job.note = e.note;
}

// --- sreport --------------------------------------------------------------------------------

/// What `sreport -P [-n] -T billing cluster AccountUtilizationByUser` printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SreportUsage {
    /// `[start, end)` sreport actually reported (its header; it works in whole hours), when
    /// the header was printed.
    pub window: Option<(i64, i64)>,
    /// `TRES Minutes`, `TRES Seconds`, `CPU Minutes`, … when the header was printed.
    pub unit: Option<String>,
    pub rows: Vec<SreportRow>,
}

/// One line: an account's total (no login; parents roll their children up) or one user's
/// usage under an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SreportRow {
    pub cluster: String,
    pub account: String,
    /// `None` on an account's own row.
    pub login: Option<String>,
    /// The TRES (`billing`, `cpu`, …); `None` without `-T` (CPU usage only).
    pub tres: Option<String>,
    pub used: u64,
}

/// Reads sreport's parsable output, with or without its header block (`-n`). Without the
/// column line the columns are taken to be `Cluster|Account|Login|Proper Name|TRES Name|Used`
/// (what `-T` prints).
pub fn parse_sreport(text: &str) -> Result<SreportUsage, String> {
    let mut usage = SreportUsage::default();
    // Column positions: cluster, account, login, tres, used.
    let mut columns: Option<(usize, usize, usize, Option<usize>, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("---") || trimmed.starts_with('#') {
            continue;
        }
        if !line.contains('|') {
            if let Some(rest) = trimmed.strip_prefix("Usage reported in ") {
                usage.unit = Some(rest.trim().to_string());
            } else if let Some(window) = header_window(trimmed) {
                usage.window = Some(window);
            }
            continue;
        }
        let cells: Vec<&str> = line.split('|').collect();
        if cells.first().is_some_and(|c| c.trim() == "Cluster") {
            let find = |name: &str| cells.iter().position(|c| c.trim() == name);
            let (Some(c), Some(a), Some(l), Some(u)) = (
                find("Cluster"),
                find("Account"),
                find("Login"),
                find("Used"),
            ) else {
                return Err(format!(
                    "line {}: not an AccountUtilizationByUser header: {line}",
                    n + 1
                ));
            };
            columns = Some((c, a, l, find("TRES Name"), u));
            continue;
        }
        let (c, a, l, t, u) = columns.unwrap_or((0, 1, 2, Some(4), 5));
        let cell = |i: usize| cells.get(i).map(|s| s.trim());
        let (Some(cluster), Some(account), Some(login), Some(used)) =
            (cell(c), cell(a), cell(l), cell(u))
        else {
            return Err(format!(
                "line {}: {} columns, expected at least {}: {line}",
                n + 1,
                cells.len(),
                c.max(a).max(l).max(u) + 1
            ));
        };
        let used: u64 = used.parse().map_err(|_| {
            format!(
                "line {}: usage {used:?} is not a whole number (use -t minutes or seconds)",
                n + 1
            )
        })?;
        usage.rows.push(SreportRow {
            cluster: cluster.to_string(),
            account: account.to_string(),
            login: Some(login.to_string()).filter(|l| !l.is_empty()),
            tres: t.and_then(cell).map(str::to_string),
            used,
        });
    }
    Ok(usage)
}

/// `Cluster/Account/User Utilization 2026-11-22T00:00:00 - 2026-11-22T01:59:59 (7200 secs)`:
/// the start and the end (printed inclusive, returned exclusive). Times are Unix seconds
/// (`SLURM_TIME_FORMAT=%s`) or `YYYY-MM-DDTHH:MM:SS` read as UTC (`TZ=UTC`).
fn header_window(line: &str) -> Option<(i64, i64)> {
    let (_, rest) = line.split_once("Utilization ")?;
    let rest = rest.split(" (").next()?.trim();
    let (start, end) = rest.split_once(" - ")?;
    let read = |t: &str| -> Option<i64> {
        let t = t.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return t.parse().ok();
        }
        chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
            .ok()
            .map(|dt| dt.and_utc().timestamp())
    };
    Some((read(start)?, read(end)?.checked_add(1)?))
}

/// Billing usage per account from sreport rows of one cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SreportAccount {
    /// The account's own row (its jobs and its sub-accounts').
    account_row: Option<u64>,
    /// Σ of its users' rows: the jobs charged to this account itself.
    users: u64,
    user_rows: u32,
}

fn sreport_accounts(usage: &SreportUsage, cluster: &str) -> BTreeMap<String, SreportAccount> {
    let mut accounts: BTreeMap<String, SreportAccount> = BTreeMap::new();
    for row in &usage.rows {
        if row.cluster != cluster || row.tres.as_deref().is_some_and(|t| t != "billing") {
            continue;
        }
        let entry = accounts.entry(row.account.clone()).or_default();
        match row.login {
            None => entry.account_row = Some(entry.account_row.unwrap_or(0) + row.used),
            Some(_) => {
                entry.users += row.used;
                entry.user_rows += 1;
            }
        }
    }
    accounts
}

/// `sacctmgr -i rollup` answered success (its message goes to standard error).
pub fn rollup_succeeded(status_ok: bool, output: &str) -> bool {
    status_ok && !output.to_ascii_lowercase().contains("error")
}

// --- the report -----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    /// The cluster lists a finished job that the ledger has not charged.
    Missing,
    /// The ledger charged a job the cluster does not list.
    Extra,
    /// The ledger's posting no longer matches the cluster's record.
    Stale,
    /// bursar's pricing refuses the record (it sits in quarantine).
    Unpriced,
}

impl Problem {
    fn as_str(self) -> &'static str {
        match self {
            Problem::Missing => "missing",
            Problem::Extra => "extra",
            Problem::Stale => "stale",
            Problem::Unpriced => "unpriced",
        }
    }
}

/// What one side says about a job.
#[derive(Debug, Clone)]
struct JobSide {
    state: String,
    /// The moment its charge belongs to (its end, else start, else submission).
    at: i64,
    elapsed_s: Option<u64>,
    amount: Option<i64>,
    account: String,
}

#[derive(Debug, Clone)]
struct JobProblem {
    problem: Problem,
    job_id: String,
    display_id: String,
    submit: i64,
    account: String,
    cluster_side: Option<JobSide>,
    bursar_side: Option<JobSide>,
    detail: String,
    hint: String,
}

/// One explained part of a difference.
#[derive(Debug, Clone)]
struct Reason {
    kind: &'static str,
    amount: Option<i64>,
    /// The currency, or `billing-hours` for Slurm-only terms of a cluster not billed in them.
    unit: String,
    text: String,
}

#[derive(Debug, Clone, Default)]
struct AccountLine {
    account: String,
    slurm_billing: Option<i64>,
    recomputed_billing: Option<i64>,
    cluster_amount: Option<i64>,
    bursar: i64,
    difference: Option<i64>,
    reasons: Vec<Reason>,
}

#[derive(Debug, Clone)]
struct RunLine {
    run_name: String,
    run_id: String,
    status: String,
    deleted: bool,
    account: String,
    dstack_cost: Option<i64>,
    bursar: i64,
    difference: Option<i64>,
    reasons: Vec<Reason>,
}

struct Report {
    cluster: String,
    kind: &'static str,
    currency: Currency,
    decimals: u8,
    from: i64,
    to: i64,
    notes: Vec<String>,
    warnings: Vec<String>,
    sreport: Option<Value>,
    accounts: Vec<AccountLine>,
    jobs: Vec<JobProblem>,
    runs: Option<Vec<RunLine>>,
}

impl Report {
    fn ok(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// `bursar reconcile`.
pub async fn run(app: App, args: ReconcileArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let from = parse_instant(&args.from).context("--from")?;
    let to = parse_instant(&args.to).context("--to")?;
    if to <= from {
        bail!("--to must be after --from");
    }
    let name = args.cluster.as_str();
    let Some(cluster) = app.config.clusters.get(name) else {
        bail!(
            "cluster {name:?} is not configured (configured: {})",
            app.config
                .clusters
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let pricing = app
        .pricing
        .get(name)
        .with_context(|| format!("no pricing for cluster {name}"))?;
    let prices = app.price_book();
    let report = match cluster.kind {
        ClusterKind::Slurm => {
            let tools = SlurmTools::for_cluster(name, cluster)?;
            let views = tools.read(from, to, !args.no_rollup).await?;
            let listed = views.sacct.iter().map(|r| r.job_id.as_str());
            let postings = window_postings(&app, name, from, to, listed).await?;
            let inputs = SlurmInputs {
                cluster: name,
                pricing,
                book: &prices,
                decimals: app.decimals(&cluster.currency),
                from,
                to,
                postings,
            };
            reconcile_slurm(&inputs, views)
        }
        ClusterKind::Dstack => {
            let collector = Collector::from_config(name, cluster)?.with_context(|| {
                format!("cluster {name} has no `collect.dstack` section: nothing to reconcile with")
            })?;
            let Source::Dstack {
                client,
                account,
                user_accounts,
            } = &collector.source
            else {
                bail!("cluster {name} is a dstack cluster without a dstack source");
            };
            let page = client
                .fetch_since(None, u32::MAX)
                .await
                .with_context(|| format!("dstack runs of cluster {name}"))?;
            let mut warnings: Vec<String> = page
                .quarantined
                .iter()
                .map(|q| format!("dstack data bursar can't read: {}", q.reason))
                .collect();
            let mut records = page.records;
            for r in &mut records {
                r.account = user_accounts
                    .get(&r.user)
                    .cloned()
                    .unwrap_or_else(|| account.clone());
            }
            let run_accounts: HashMap<String, String> = page
                .runs
                .iter()
                .map(|run| {
                    let a = user_accounts
                        .get(&run.user)
                        .cloned()
                        .unwrap_or_else(|| account.clone());
                    (run.run_id.clone(), a)
                })
                .collect();
            // Every run's submissions are looked up, to tell which runs touch the window.
            let listed = records.iter().map(|r| r.job_id.as_str()).chain(
                page.runs
                    .iter()
                    .flat_map(|run| run.submission_ids.iter().map(String::as_str)),
            );
            let postings = window_postings(&app, name, from, to, listed).await?;
            let inputs = DstackInputs {
                cluster: name,
                pricing,
                book: &prices,
                decimals: app.decimals(&cluster.currency),
                from,
                to,
                postings,
                runs: page.runs,
                run_accounts,
                records,
            };
            let mut report = reconcile_dstack(&inputs);
            report.warnings.append(&mut warnings);
            report
        }
    };
    render(&report, args.format, out)?;
    out.flush()?;
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROBLEMS)
    })
}

// --- Slurm: the commands ----------------------------------------------------------------------

/// The Slurm client commands for one cluster, with the environment they need.
struct SlurmTools {
    sacct: SacctCommand,
    sreport: PathBuf,
    sacctmgr: PathBuf,
    /// Slurm's name for the cluster (`-M`, `cluster=`).
    slurm_name: String,
    env: Vec<(String, String)>,
    timeout: Duration,
}

/// What Slurm says about a window.
struct SlurmViews {
    /// `None` when sreport failed (the reason is in `warnings`).
    sreport_minutes: Option<SreportUsage>,
    sreport_seconds: Option<SreportUsage>,
    sacct: Vec<UsageRecord>,
    sacct_window: (i64, i64),
    rollup: &'static str,
    warnings: Vec<String>,
    slurm_name: String,
    /// When sacct was read: the end of a job still running.
    now: i64,
}

impl SlurmTools {
    /// The cluster's `sacct` source when it has one (its program, `SLURM_CONF` and `-M` name);
    /// otherwise (slurmrestd, or no collection) the commands on this host with the process's
    /// own environment (`SLURM_CONF` if set) and bursar's name for the cluster.
    fn for_cluster(name: &str, cluster: &ClusterConfig) -> anyhow::Result<SlurmTools> {
        let collect = cluster.collect.as_ref();
        let timeout = collect
            .and_then(|c| c.timeout)
            .unwrap_or(DEFAULT_TIMEOUT)
            .max(DEFAULT_TIMEOUT);
        let sacct_source = collect.and_then(|c| c.sacct.as_ref());
        let mut sacct = match sacct_source {
            Some(_) => match Collector::from_config(name, cluster)?.map(|c| c.source) {
                Some(Source::Sacct(command)) => command,
                _ => bail!("cluster {name}: its sacct source could not be built"),
            },
            None => SacctCommand::new(name),
        };
        sacct.timeout = timeout;
        let sibling = |tool: &str| -> PathBuf {
            match sacct.program.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir.join(tool),
                _ => PathBuf::from(tool),
            }
        };
        Ok(SlurmTools {
            sreport: sibling("sreport"),
            sacctmgr: sibling("sacctmgr"),
            slurm_name: sacct.cluster.clone(),
            env: sacct.env.clone(),
            sacct,
            timeout,
        })
    }

    async fn read(&self, from: i64, to: i64, rollup: bool) -> anyhow::Result<SlurmViews> {
        let mut warnings = Vec::new();
        let (start, end) = (iso_utc(from), iso_utc(to));
        let rollup = if rollup {
            let args = ["-i", "rollup", start.as_str(), end.as_str()];
            match run_tool(&self.sacctmgr, &args, &self.env, self.timeout).await {
                Ok(o) if rollup_succeeded(true, &o.text()) => "forced",
                Ok(o) => {
                    warnings.push(format!(
                        "sacctmgr rollup: {}; sreport may lag behind",
                        o.text().trim()
                    ));
                    "failed"
                }
                Err(e) => {
                    warnings.push(format!(
                        "{e:#}; sreport may lag behind (its hourly rollup is empty until the hour ends)"
                    ));
                    "failed"
                }
            }
        } else {
            "skipped"
        };
        let sreport = |unit: &str| {
            let args: Vec<String> = [
                "-P",
                "-t",
                unit,
                "-T",
                "billing",
                "cluster",
                "AccountUtilizationByUser",
            ]
            .into_iter()
            .map(str::to_string)
            .chain([
                format!("cluster={}", self.slurm_name),
                format!("start={start}"),
                format!("end={end}"),
            ])
            .collect();
            let program = self.sreport.clone();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = run_tool(&program, &args, &self.env, self.timeout).await?;
                parse_sreport(&o.stdout).map_err(|e| anyhow::anyhow!("sreport output: {e}"))
            }
        };
        let minutes = sreport("minutes").await;
        let seconds = sreport("seconds").await;
        let (sreport_minutes, sreport_seconds) = match (minutes, seconds) {
            (Ok(m), Ok(s)) => (Some(m), Some(s)),
            (Err(e), _) | (_, Err(e)) => {
                warnings.push(format!("{e:#}; the sreport columns are left empty"));
                (None, None)
            }
        };
        // sacct over bursar's window and sreport's (whole hours), whichever is wider.
        let sreport_window = sreport_seconds.as_ref().and_then(|s| s.window);
        let sacct_window = match sreport_window {
            Some((s, e)) => (from.min(s), to.max(e)),
            None => (from, to),
        };
        let fetched = self
            .sacct
            .fetch(sacct_window.0, sacct_window.1)
            .await
            .with_context(|| {
                let conf = self
                    .env
                    .iter()
                    .find(|(k, _)| k == "SLURM_CONF")
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var("SLURM_CONF").ok());
                match conf {
                    Some(conf) => format!("sacct for cluster {} (SLURM_CONF={conf})", self.slurm_name),
                    None => format!(
                        "sacct for cluster {} (SLURM_CONF is not set: set it, or give the cluster `collect.sacct.slurm_conf`)",
                        self.slurm_name
                    ),
                }
            })?;
        for q in &fetched.quarantined {
            warnings.push(format!(
                "sacct line {} can't be read: {} ({})",
                q.line, q.reason, q.raw
            ));
        }
        Ok(SlurmViews {
            sreport_minutes,
            sreport_seconds,
            sacct: fetched.records,
            sacct_window,
            rollup,
            warnings,
            slurm_name: self.slurm_name.clone(),
            now: now(),
        })
    }
}

struct ToolOutput {
    stdout: String,
    stderr: String,
}

impl ToolOutput {
    fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs a Slurm client command with `TZ=UTC` and epoch times, within `timeout`.
async fn run_tool(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    timeout: Duration,
) -> anyhow::Result<ToolOutput> {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("TZ", "UTC")
        .env("SLURM_TIME_FORMAT", "%s")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(timeout, command.output())
        .await
        .map_err(|_| anyhow::anyhow!("{shown}: no answer within {timeout:?}"))?
        .with_context(|| format!("cannot run {}", program.display()))?;
    let result = ToolOutput {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    if !output.status.success() {
        bail!(
            "{shown} exited with {}: {}",
            output.status,
            result.stderr.trim()
        );
    }
    Ok(result)
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC, what Slurm's commands read with `TZ=UTC`.
fn iso_utc(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_else(|| at.to_string())
}

// --- Slurm: the comparison --------------------------------------------------------------------

struct SlurmInputs<'a> {
    cluster: &'a str,
    pricing: &'a ClusterPricing,
    book: &'a PriceBook,
    decimals: u8,
    from: i64,
    to: i64,
    postings: Vec<JobPosting>,
}

/// Per-account sums. Money in micros of the cluster's currency; Slurm usage in
/// billing-microseconds (billing × µs).
#[derive(Debug, Default)]
struct SlurmSums {
    bursar: i64,
    expected: i64,
    expected_no_qos: i64,
    /// Per QOS with a factor ≠ 1: (jobs, expected − expected without QOS).
    qos: BTreeMap<String, (u32, i64)>,
    /// What the refunded/free jobs would cost were they charged (for currencies other than su).
    refunded_value: i64,
    refunded_states: BTreeMap<&'static str, u32>,
    charged_jobs: u32,
    running_jobs: u32,
    r_charged: i128,
    r_refunded: i128,
    r_running: i128,
    r_clip: i128,
    edge_jobs: u32,
    weighted_partitions: BTreeSet<String>,
}

fn reconcile_slurm(inputs: &SlurmInputs<'_>, views: SlurmViews) -> Report {
    let SlurmInputs {
        cluster,
        pricing,
        book,
        decimals,
        from,
        to,
        ..
    } = *inputs;
    let currency = pricing.currency.clone();
    let in_window = |t: i64| from <= t && t < to;
    let mut no_qos = pricing.clone();
    no_qos.qos_factors.clear();
    let all_charged = charge_every_final_state(pricing);

    let mut sums: BTreeMap<String, SlurmSums> = BTreeMap::new();
    let mut problems: Vec<JobProblem> = Vec::new();
    let mut warnings = views.warnings;
    let mut unfinished_missing = 0u32;
    let mut never_started_missing = 0u32;
    let mut notes_early: Vec<String> = Vec::new();

    let ledger: HashMap<(&str, i64), &JobPosting> = inputs
        .postings
        .iter()
        .map(|p| ((p.job_id.as_str(), p.submit), p))
        .collect();
    let sacct_ids: HashMap<(&str, i64), &UsageRecord> = views
        .sacct
        .iter()
        .map(|r| ((r.job_id.as_str(), r.submit), r))
        .collect();
    let sreport_window = views.sreport_seconds.as_ref().and_then(|s| s.window);
    let mut compared: BTreeSet<(String, i64)> = BTreeSet::new();
    let now = views.now;

    for record in &views.sacct {
        let billing = i128::from(record.alloc.billing().unwrap_or(0));
        // The job's time inside sreport's window, as the rollup counts it.
        if let Some((ws, we)) = sreport_window {
            let start = record.start.unwrap_or(record.submit);
            let end = record.end.unwrap_or(now);
            let inside = (end.min(we) - start.max(ws)).max(0);
            let inside_us = i128::from(inside) * 1_000_000;
            let used = inside_us.min(i128::from(record.elapsed_us));
            let entry = sums.entry(record.account.clone()).or_default();
            entry.r_clip += billing * used;
            if used < i128::from(record.elapsed_us) && in_window(record.effective_at()) {
                entry.edge_jobs += 1;
            }
        }
        if !in_window(record.effective_at()) {
            continue;
        }
        let usage = billing * i128::from(record.elapsed_us);
        let entry = sums.entry(record.account.clone()).or_default();
        let charge = match pricing.charge(record, book) {
            Ok(c) => c,
            Err(e) => {
                problems.push(JobProblem {
                    problem: Problem::Unpriced,
                    job_id: record.job_id.clone(),
                    display_id: record.display_id.clone(),
                    submit: record.submit,
                    account: record.account.clone(),
                    cluster_side: Some(slurm_side(record, None)),
                    bursar_side: ledger
                        .get(&(record.job_id.as_str(), record.submit))
                        .map(|p| posting_side(p)),
                    detail: format!("bursar can't price it: {e}"),
                    hint: "fix the cluster's pricing in the config, then `bursar collect` again (see `bursar quarantine list`)".into(),
                });
                compared.insert((record.job_id.clone(), record.submit));
                continue;
            }
        };
        let expected = charge.amount.micros;
        let expected_one = no_qos
            .charge(record, book)
            .map(|c| c.amount.micros)
            .unwrap_or(expected);
        entry.expected += expected;
        entry.expected_no_qos += expected_one;
        if expected != expected_one {
            let qos = record.qos.clone().unwrap_or_default();
            let q = entry.qos.entry(qos).or_default();
            q.0 += 1;
            q.1 += expected - expected_one;
        }
        match charge.reason {
            None | Some(ChargeReason::NeverStarted) => {
                entry.r_charged += usage;
                entry.charged_jobs += 1;
                if let PartitionPricing::Weights { .. } =
                    pricing.partition(record.partition.as_deref())
                {
                    entry
                        .weighted_partitions
                        .insert(record.partition.clone().unwrap_or_default());
                }
            }
            Some(ChargeReason::Refunded(state) | ChargeReason::Free(state)) => {
                entry.r_refunded += usage;
                *entry.refunded_states.entry(state.as_str()).or_default() += 1;
                entry.refunded_value += all_charged
                    .charge(record, book)
                    .map(|c| c.amount.micros)
                    .unwrap_or(0);
            }
            Some(ChargeReason::NotFinal(_)) => {
                entry.r_running += usage;
                entry.running_jobs += 1;
            }
        }
        compared.insert((record.job_id.clone(), record.submit));
        let cluster_side = slurm_side(record, Some(expected));
        match ledger.get(&(record.job_id.as_str(), record.submit)) {
            None if !record.state.is_final() => unfinished_missing += 1,
            // Costs 0 whatever happens. Slurm lists a job cancelled before it became
            // eligible only in its cancelled-jobs query (which collectors read since this
            // release), so a ledger collected before may not have it.
            None if charge.reason == Some(ChargeReason::NeverStarted) => never_started_missing += 1,
            None => problems.push(JobProblem {
                problem: Problem::Missing,
                job_id: record.job_id.clone(),
                display_id: record.display_id.clone(),
                submit: record.submit,
                account: record.account.clone(),
                cluster_side: Some(cluster_side),
                bursar_side: None,
                detail: format!(
                    "sacct lists it ({}, ended {}), bursar has not charged it (it costs {} {})",
                    record.state,
                    record.end.map(format_instant).unwrap_or_else(|| "-".into()),
                    format_micros(expected, decimals),
                    currency
                ),
                hint: String::new(),
            }),
            Some(p) => {
                if let Some(detail) = mismatch(p, record, expected) {
                    problems.push(JobProblem {
                        problem: Problem::Stale,
                        job_id: record.job_id.clone(),
                        display_id: record.display_id.clone(),
                        submit: record.submit,
                        account: record.account.clone(),
                        cluster_side: Some(cluster_side),
                        bursar_side: Some(posting_side(p)),
                        detail,
                        hint: String::new(),
                    });
                }
            }
        }
    }

    // The ledger's jobs in the window: counted per account, and checked against sacct.
    for p in &inputs.postings {
        if !in_window(p.effective_at) {
            continue;
        }
        let entry = sums.entry(p.account.clone()).or_default();
        entry.bursar = entry.bursar.saturating_add(p.amount);
        if compared.contains(&(p.job_id.clone(), p.submit)) {
            continue;
        }
        match sacct_ids.get(&(p.job_id.as_str(), p.submit)) {
            // sacct lists it, but its record now belongs outside the window.
            Some(record) => {
                let expected = pricing.charge(record, book).ok().map(|c| c.amount.micros);
                problems.push(JobProblem {
                    problem: Problem::Stale,
                    job_id: p.job_id.clone(),
                    display_id: p.display_id.clone(),
                    submit: p.submit,
                    account: p.account.clone(),
                    cluster_side: Some(slurm_side(record, expected)),
                    bursar_side: Some(posting_side(p)),
                    detail: format!(
                        "bursar dates it {}, sacct now {} ({})",
                        format_instant(p.effective_at),
                        format_instant(record.effective_at()),
                        record.state
                    ),
                    hint: String::new(),
                });
            }
            None => problems.push(JobProblem {
                problem: Problem::Extra,
                job_id: p.job_id.clone(),
                display_id: p.display_id.clone(),
                submit: p.submit,
                account: p.account.clone(),
                cluster_side: None,
                bursar_side: Some(posting_side(p)),
                detail: format!(
                    "bursar charged it ({}, {}), sacct -M {} doesn't list it between {} and {}",
                    p.state,
                    format_instant(p.effective_at),
                    views.slurm_name,
                    format_instant(views.sacct_window.0),
                    format_instant(views.sacct_window.1)
                ),
                hint: "charged from another source (a `bursar import` of another cluster's file?) or purged from slurmdbd; check `bursar charges -M CLUSTER`".replace("CLUSTER", cluster),
            }),
        }
    }
    add_hints(&mut problems, cluster);
    if unfinished_missing > 0 {
        warnings.push(format!(
            "{unfinished_missing} pending or running job(s) are not in the ledger yet; they are charged when they end"
        ));
    }
    if never_started_missing > 0 {
        notes_early.push(format!(
            "{never_started_missing} job(s) that never started are not in the ledger; they cost 0"
        ));
    }

    let sreport_empty = views
        .sreport_seconds
        .as_ref()
        .is_some_and(|s| !s.rows.iter().any(|r| r.cluster == views.slurm_name));
    if sreport_empty && views.sacct.iter().any(|r| r.elapsed_us > 0) {
        warnings.push(format!(
            "sreport lists nothing for cluster {}: is that Slurm's name for it (`collect.sacct.slurm_cluster`), and is the rollup current?",
            views.slurm_name
        ));
    }

    // sreport per account.
    let minutes = views
        .sreport_minutes
        .as_ref()
        .map(|s| sreport_accounts(s, &views.slurm_name));
    let seconds = views
        .sreport_seconds
        .as_ref()
        .map(|s| sreport_accounts(s, &views.slurm_name));
    let mut notes = notes_early;
    let comparable = currency.as_str() == "su";
    if let Some(seconds) = &seconds {
        for (account, s) in seconds {
            if s.users == 0 {
                continue;
            }
            sums.entry(account.clone()).or_default();
            if s.account_row.is_some_and(|r| r != s.users) {
                notes.push(format!(
                    "sreport's row for {account} includes its sub-accounts; compared the rows of its users (the jobs charged to {account} itself)"
                ));
            }
        }
    }

    let mut accounts = Vec::new();
    for (account, s) in &sums {
        let sr = match (&minutes, &seconds) {
            (Some(m), Some(sec)) => Some(sreport_for(
                m.get(account).copied().unwrap_or_default(),
                sec.get(account).copied().unwrap_or_default(),
            )),
            _ => None,
        };
        let line = slurm_account_line(
            account,
            s,
            sr,
            sreport_window.is_some(),
            &currency,
            decimals,
            comparable,
        );
        let nothing = line.bursar == 0
            && line.slurm_billing.unwrap_or(0) == 0
            && line.recomputed_billing.unwrap_or(0) == 0
            && line.reasons.is_empty()
            && !problems.iter().any(|p| &p.account == account);
        if !nothing {
            accounts.push(line);
        }
    }

    let sacct_in_window = views
        .sacct
        .iter()
        .filter(|r| in_window(r.effective_at()))
        .count();
    let ledger_in_window = inputs
        .postings
        .iter()
        .filter(|p| in_window(p.effective_at))
        .count();
    notes.insert(
        0,
        format!(
            "sacct lists {sacct_in_window} job record(s) with their charge time in the window; bursar's ledger holds {ledger_in_window}"
        ),
    );
    if let Some((ws, we)) = sreport_window {
        let mut note = format!(
            "sreport covered {} .. {} (it reports whole hours)",
            format_instant(ws),
            format_instant(we)
        );
        if ws > from || we < to.min(now) {
            note.push_str("; the time of jobs outside it shows as window edges");
        }
        notes.push(note);
    }
    if !comparable {
        notes.push(format!(
            "bursar charges {currency} with its own rates; Slurm counts billing units: the difference is not computed, jobs and Slurm's own numbers are still compared"
        ));
    }
    let sreport = json!({
        "window": sreport_window.map(|(s, e)| json!({"from": format_instant(s), "to": format_instant(e)})),
        "rollup": views.rollup,
        "slurm_cluster": views.slurm_name,
    });
    sort_problems(&mut problems);
    Report {
        cluster: cluster.to_string(),
        kind: "slurm",
        currency,
        decimals,
        from,
        to,
        notes,
        warnings,
        sreport: Some(sreport),
        accounts,
        jobs: problems,
        runs: None,
    }
}

/// sreport's numbers for one account, in billing-microseconds: (shown in minutes, exact
/// seconds, rows involved, minutes shown, seconds).
#[derive(Debug, Clone, Copy)]
struct SreportFigures {
    minutes_us: i128,
    seconds_us: i128,
    rows: u32,
    minutes: u64,
    seconds: u64,
}

/// A leaf account's own row when it holds nothing but its users' usage (what an admin reads in
/// sreport); else the sum of its users' rows (the row would include sub-accounts).
fn sreport_for(minutes: SreportAccount, seconds: SreportAccount) -> SreportFigures {
    let leaf = seconds.account_row.is_none_or(|r| r == seconds.users);
    let (m, s, rows) = if leaf && minutes.account_row.is_some() {
        (
            minutes.account_row.unwrap_or(0),
            seconds.account_row.unwrap_or(0),
            1,
        )
    } else {
        (minutes.users, seconds.users, minutes.user_rows.max(1))
    };
    SreportFigures {
        minutes_us: i128::from(m) * 60_000_000,
        seconds_us: i128::from(s) * 1_000_000,
        rows,
        minutes: m,
        seconds: s,
    }
}

fn slurm_account_line(
    account: &str,
    s: &SlurmSums,
    sreport: Option<SreportFigures>,
    clipped: bool,
    currency: &Currency,
    decimals: u8,
    comparable: bool,
) -> AccountLine {
    let unit = currency.to_string();
    let billing_unit = if comparable {
        unit.clone()
    } else {
        "billing-hours".to_string()
    };
    let fmt = |m: i64| signed(m, decimals);
    // Cumulative Slurm figures in micros of billing-hours (one rounding each).
    let c0 = hours_micros(s.r_charged);
    let c1 = hours_micros(s.r_charged + s.r_refunded);
    let c2 = hours_micros(s.r_charged + s.r_refunded + s.r_running);
    let c3 = if clipped { hours_micros(s.r_clip) } else { c2 };
    let (c4, c5) = match sreport {
        Some(f) => (hours_micros(f.seconds_us), hours_micros(f.minutes_us)),
        None => (c3, c3),
    };
    let mut reasons = Vec::new();
    let mut push = |kind: &'static str, amount: i64, unit: &str, text: String| {
        if amount != 0 {
            reasons.push(Reason {
                kind,
                amount: Some(amount),
                unit: unit.to_string(),
                text,
            });
        }
    };
    let collection = s.bursar - s.expected;
    push(
        "collection",
        collection,
        &unit,
        format!(
            "the ledger differs from sacct's records by {} {unit}: see the jobs listed below",
            fmt(collection)
        ),
    );
    for (qos, (jobs, amount)) in &s.qos {
        push(
            "qos_usage_factor",
            *amount,
            &unit,
            format!(
                "QOS {qos}: its usage factor on {jobs} job(s) adds {} {unit}; bursar applies it, sreport ignores UsageFactor",
                fmt(*amount)
            ),
        );
    }
    if comparable {
        let truncation = s.expected_no_qos - c0;
        let basis = if s.weighted_partitions.is_empty() {
            "bursar charges Slurm's billing (the CPU count where Slurm recorded none)".to_string()
        } else {
            format!(
                "bursar prices the exact TRES with the weights of partition {}",
                s.weighted_partitions
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        push(
            "billing_truncation",
            truncation,
            &unit,
            format!(
                "billing TRES truncation: {basis}; Slurm floors billing to an integer per job ({} job(s): bursar {} vs Σ billing × elapsed {}): {} {unit}",
                s.charged_jobs,
                format_micros(s.expected_no_qos, decimals),
                format_micros(c0, decimals),
                fmt(truncation)
            ),
        );
        push(
            "refund_policy",
            c0 - c1,
            &unit,
            format!(
                "refunded or free by policy: {}; Slurm counts {} billing-hours for them, bursar 0",
                describe_states(&s.refunded_states),
                format_micros(c1 - c0, decimals)
            ),
        );
    } else {
        push(
            "refund_policy",
            -s.refunded_value,
            &unit,
            format!(
                "refunded or free by policy: {}; charged they would cost {} {unit}",
                describe_states(&s.refunded_states),
                format_micros(s.refunded_value, decimals)
            ),
        );
    }
    push(
        "unfinished",
        c1 - c2,
        &billing_unit,
        format!(
            "{} job(s) still pending or running: Slurm counts {} billing-hours so far, bursar charges them when they end",
            s.running_jobs,
            format_micros(c2 - c1, decimals)
        ),
    );
    push(
        "window_edges",
        c2 - c3,
        &billing_unit,
        format!(
            "jobs crossing the window's edges ({} here): sreport counts their time inside its window, bursar charges a job whole at its end: {} billing-hours",
            s.edge_jobs,
            fmt(c2 - c3)
        ),
    );
    if let Some(f) = sreport {
        push(
            "rollup_gap",
            c3 - c4,
            &billing_unit,
            format!(
                "sreport's rollup differs from sacct by {} billing-hours: it is not current (rerun without --no-rollup, or wait for the hourly rollup)",
                fmt(c4 - c3)
            ),
        );
        push(
            "sreport_rounding",
            c4 - c5,
            &billing_unit,
            format!(
                "sreport rounds to whole minutes per row: {} min shown for {} billing-seconds ({} row(s)): {} billing-hours",
                f.minutes,
                f.seconds,
                f.rows,
                fmt(c4 - c5)
            ),
        );
    }
    AccountLine {
        account: account.to_string(),
        slurm_billing: sreport.map(|_| c5),
        recomputed_billing: Some(c2),
        cluster_amount: None,
        bursar: s.bursar,
        difference: (comparable && sreport.is_some()).then_some(s.bursar - c5),
        reasons,
    }
}

fn describe_states(states: &BTreeMap<&'static str, u32>) -> String {
    states
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The same pricing with every refunded or free final state charged: what a refund gave back.
fn charge_every_final_state(pricing: &ClusterPricing) -> ClusterPricing {
    let mut all = pricing.clone();
    for state in JobState::ALL {
        if state.is_final() && all.end_states.action(state) != Some(EndStateAction::Charge) {
            let _ = all.end_states.set(state, EndStateAction::Charge);
        }
    }
    all
}

fn slurm_side(record: &UsageRecord, amount: Option<i64>) -> JobSide {
    JobSide {
        state: record.state.as_str().to_string(),
        at: record.effective_at(),
        elapsed_s: Some(record.elapsed_us / 1_000_000),
        amount,
        account: record.account.clone(),
    }
}

fn posting_side(p: &JobPosting) -> JobSide {
    JobSide {
        state: p.state.clone(),
        at: p.effective_at,
        elapsed_s: None,
        amount: Some(p.amount),
        account: p.account.clone(),
    }
}

/// How a posting differs from the record it should reflect, if it does.
fn mismatch(p: &JobPosting, record: &UsageRecord, expected: i64) -> Option<String> {
    let mut what = Vec::new();
    if p.state != record.state.as_str() {
        what.push(format!("state {} → {}", p.state, record.state));
    }
    if p.effective_at != record.effective_at() {
        what.push(format!(
            "end {} → {}",
            format_instant(p.effective_at),
            format_instant(record.effective_at())
        ));
    }
    if p.account != record.account {
        what.push(format!("account {} → {}", p.account, record.account));
    }
    if p.amount != expected {
        what.push(format!(
            "amount {} → {}",
            format_micros(p.amount, 2),
            format_micros(expected, 2)
        ));
    }
    (!what.is_empty()).then(|| format!("bursar's posting is out of date: {}", what.join(", ")))
}

/// By problem, account, submission and job id (`9` before `10`).
fn sort_problems(problems: &mut [JobProblem]) {
    problems.sort_by(|a, b| {
        (a.problem, &a.account, a.submit, a.job_id.len(), &a.job_id).cmp(&(
            b.problem,
            &b.account,
            b.submit,
            b.job_id.len(),
            &b.job_id,
        ))
    });
}

/// One `bursar collect --since` that picks up every missing and stale job.
fn add_hints(problems: &mut [JobProblem], cluster: &str) {
    let since = problems
        .iter()
        .filter(|p| matches!(p.problem, Problem::Missing | Problem::Stale))
        .map(|p| p.submit)
        .min();
    if let Some(since) = since {
        let since = since - since.rem_euclid(3600);
        for p in problems
            .iter_mut()
            .filter(|p| matches!(p.problem, Problem::Missing | Problem::Stale))
        {
            p.hint = format!(
                "bursar collect -M {cluster} --since {} (or check `bursar quarantine list`)",
                format_instant(since)
            );
        }
    }
}

// --- dstack ---------------------------------------------------------------------------------

struct DstackInputs<'a> {
    cluster: &'a str,
    pricing: &'a ClusterPricing,
    book: &'a PriceBook,
    decimals: u8,
    from: i64,
    to: i64,
    postings: Vec<JobPosting>,
    runs: Vec<RunSummary>,
    /// Run id → bursar account (the collector's mapping).
    run_accounts: HashMap<String, String>,
    records: Vec<UsageRecord>,
}

#[derive(Debug, Default, Clone, Copy)]
struct DstackTerms {
    bursar: i64,
    expected: i64,
    dstack: i64,
    /// Σ price × elapsed over the final charged submissions (no proration).
    whole_charged: i64,
    whole_refunded: i64,
    whole_unfinished: i64,
    shared: u32,
    refunded: u32,
    unfinished: u32,
}

impl DstackTerms {
    fn add(&mut self, o: &DstackTerms) {
        self.bursar += o.bursar;
        self.expected += o.expected;
        self.dstack += o.dstack;
        self.whole_charged += o.whole_charged;
        self.whole_refunded += o.whole_refunded;
        self.whole_unfinished += o.whole_unfinished;
        self.shared += o.shared;
        self.refunded += o.refunded;
        self.unfinished += o.unfinished;
    }

    /// bursar − dstack, term by term (they add up to it exactly).
    fn reasons(&self, unit: &str, decimals: u8) -> Vec<Reason> {
        let fmt = |m: i64| signed(m, decimals);
        let whole = self.whole_charged + self.whole_refunded + self.whole_unfinished;
        let terms = [
            (
                "not_collected",
                self.bursar - self.expected,
                format!(
                    "bursar's ledger is behind dstack's runs by {} {unit}: submissions not collected yet or collected while running (see the jobs below)",
                    fmt(self.bursar - self.expected)
                ),
            ),
            (
                "shared_instance",
                self.expected - self.whole_charged,
                format!(
                    "{} submission(s) on shared instances: dstack charges each job the whole instance, bursar its blocks / total_blocks: {} {unit}",
                    self.shared,
                    fmt(self.expected - self.whole_charged)
                ),
            ),
            (
                "refund_policy",
                -self.whole_refunded,
                format!(
                    "{} submission(s) refunded or free by policy: {} {unit}",
                    self.refunded,
                    fmt(-self.whole_refunded)
                ),
            ),
            (
                "unfinished",
                -self.whole_unfinished,
                format!(
                    "{} submission(s) still going: dstack counts them up to now, bursar charges them when they finish: {} {unit}",
                    self.unfinished,
                    fmt(-self.whole_unfinished)
                ),
            ),
            (
                "dstack_rounding",
                whole - self.dstack,
                format!(
                    "dstack sums floats and rounds the run's cost to 4 decimals; bursar rounds each submission once to micros: {} {unit}",
                    fmt(whole - self.dstack)
                ),
            ),
        ];
        terms
            .into_iter()
            .filter(|(_, amount, _)| *amount != 0)
            .map(|(kind, amount, text)| Reason {
                kind,
                amount: Some(amount),
                unit: unit.to_string(),
                text,
            })
            .collect()
    }
}

fn reconcile_dstack(inputs: &DstackInputs<'_>) -> Report {
    let DstackInputs {
        cluster,
        pricing,
        book,
        decimals,
        from,
        to,
        ..
    } = *inputs;
    let currency = pricing.currency.clone();
    let unit = currency.to_string();
    let comparable = currency.as_str() == "usd";
    let in_window = |t: i64| from <= t && t < to;
    let ledger: HashMap<&str, &JobPosting> = inputs
        .postings
        .iter()
        .map(|p| (p.job_id.as_str(), p))
        .collect();
    let records: HashMap<&str, &UsageRecord> = inputs
        .records
        .iter()
        .map(|r| (r.job_id.as_str(), r))
        .collect();
    let mut run_of: HashMap<&str, &RunSummary> = HashMap::new();
    for run in &inputs.runs {
        for id in &run.submission_ids {
            run_of.insert(id.as_str(), run);
        }
    }
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let mut runs = Vec::new();
    let mut per_account: BTreeMap<String, DstackTerms> = BTreeMap::new();
    let mut unfinished_missing = 0u32;

    for run in &inputs.runs {
        let billable: Vec<&UsageRecord> = run
            .submission_ids
            .iter()
            .filter_map(|id| records.get(id.as_str()).copied())
            .collect();
        let touches_window = in_window(run.submitted_at.timestamp())
            || billable.iter().any(|r| in_window(r.effective_at()))
            || run.submission_ids.iter().any(|id| {
                ledger
                    .get(id.as_str())
                    .is_some_and(|p| in_window(p.effective_at))
            });
        if !touches_window {
            continue;
        }
        let account = inputs
            .run_accounts
            .get(&run.run_id)
            .cloned()
            .unwrap_or_else(|| run.project.clone());
        let mut t = DstackTerms {
            dstack: run.reported_cost_micros.unwrap_or(0),
            ..DstackTerms::default()
        };
        if run.reported_cost_micros.is_none() {
            warnings.push(format!("run {} has no readable cost", run.run_name));
        }
        for id in &run.submission_ids {
            if let Some(p) = ledger.get(id.as_str()) {
                t.bursar += p.amount;
            }
        }
        for record in &billable {
            let whole = whole_instance_micros(record);
            let charge = match pricing.charge(record, book) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(JobProblem {
                        problem: Problem::Unpriced,
                        job_id: record.job_id.clone(),
                        display_id: record.display_id.clone(),
                        submit: record.submit,
                        account: record.account.clone(),
                        cluster_side: Some(dstack_side(record, None)),
                        bursar_side: ledger.get(record.job_id.as_str()).map(|p| posting_side(p)),
                        detail: format!("bursar can't price it: {e}"),
                        hint: "see `bursar quarantine list`".into(),
                    });
                    continue;
                }
            };
            let expected = charge.amount.micros;
            t.expected += expected;
            match charge.reason {
                None | Some(ChargeReason::NeverStarted) => {
                    t.whole_charged += whole;
                    if record.blocks.is_some_and(|(b, n)| b != n) {
                        t.shared += 1;
                    }
                }
                Some(ChargeReason::Refunded(_) | ChargeReason::Free(_)) => {
                    t.whole_refunded += whole;
                    t.refunded += 1;
                }
                Some(ChargeReason::NotFinal(_)) => {
                    t.whole_unfinished += whole;
                    t.unfinished += 1;
                }
            }
            match ledger.get(record.job_id.as_str()) {
                None if !record.state.is_final() => unfinished_missing += 1,
                None => problems.push(JobProblem {
                    problem: Problem::Missing,
                    job_id: record.job_id.clone(),
                    display_id: record.display_id.clone(),
                    submit: record.submit,
                    account: record.account.clone(),
                    cluster_side: Some(dstack_side(record, Some(expected))),
                    bursar_side: None,
                    detail: format!(
                        "dstack lists submission {} of run {} ({}), bursar has not charged it",
                        record.display_id, run.run_name, record.state
                    ),
                    hint: format!("bursar collect -M {cluster}"),
                }),
                Some(p) => {
                    if let Some(detail) = mismatch(p, record, expected) {
                        problems.push(JobProblem {
                            problem: Problem::Stale,
                            job_id: record.job_id.clone(),
                            display_id: record.display_id.clone(),
                            submit: record.submit,
                            account: record.account.clone(),
                            cluster_side: Some(dstack_side(record, Some(expected))),
                            bursar_side: Some(posting_side(p)),
                            detail,
                            hint: format!("bursar collect -M {cluster}"),
                        });
                    }
                }
            }
        }
        let difference = t.bursar - t.dstack;
        let listed = difference.abs() > CENT_MICROS
            || problems
                .iter()
                .any(|p| run.submission_ids.contains(&p.job_id));
        runs.push(RunLine {
            run_name: run.run_name.clone(),
            run_id: run.run_id.clone(),
            status: run.status.clone(),
            deleted: run.deleted,
            account: account.clone(),
            dstack_cost: run.reported_cost_micros,
            bursar: t.bursar,
            difference: comparable.then_some(difference),
            reasons: if listed && comparable {
                t.reasons(&unit, decimals)
            } else {
                Vec::new()
            },
        });
        per_account.entry(account).or_default().add(&t);
    }
    // Charged submissions of no run dstack lists — but for the zero record bursar posts for the
    // submission a hold was linked to when dstack deleted it (never provisioned, superseded by
    // a retry for capacity), shown under its run's name.
    let run_names: HashSet<&str> = inputs.runs.iter().map(|r| r.run_name.as_str()).collect();
    for p in &inputs.postings {
        let deleted_unplaced = p.amount == 0 && run_names.contains(p.display_id.as_str());
        if in_window(p.effective_at) && !run_of.contains_key(p.job_id.as_str()) && !deleted_unplaced
        {
            problems.push(JobProblem {
                problem: Problem::Extra,
                job_id: p.job_id.clone(),
                display_id: p.display_id.clone(),
                submit: p.submit,
                account: p.account.clone(),
                cluster_side: None,
                bursar_side: Some(posting_side(p)),
                detail: format!(
                    "bursar charged submission {} ({}), dstack's runs (deleted ones included) don't have it",
                    p.display_id, p.state
                ),
                hint: "the run was removed from dstack's database, or the charge came from another project".into(),
            });
            per_account.entry(p.account.clone()).or_default().bursar += p.amount;
        }
    }
    if unfinished_missing > 0 {
        warnings.push(format!(
            "{unfinished_missing} submission(s) still going are not in the ledger yet; they are charged when they finish"
        ));
    }
    let accounts = per_account
        .iter()
        .map(|(account, t)| {
            let difference = t.bursar - t.dstack;
            AccountLine {
                account: account.clone(),
                slurm_billing: None,
                recomputed_billing: None,
                cluster_amount: Some(t.dstack),
                bursar: t.bursar,
                difference: comparable.then_some(difference),
                reasons: if comparable && difference.abs() > CENT_MICROS {
                    t.reasons(&unit, decimals)
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    let mut notes = vec![format!(
        "{} run(s) of project {} touch the window (deleted runs included); differences up to a cent are rounding",
        runs.len(),
        inputs
            .runs
            .first()
            .map(|r| r.project.as_str())
            .unwrap_or("-")
    )];
    if !comparable {
        notes.push(format!(
            "bursar charges {currency}; dstack's cost is in usd: only the submissions are compared"
        ));
    }
    sort_problems(&mut problems);
    Report {
        cluster: cluster.to_string(),
        kind: "dstack",
        currency,
        decimals,
        from,
        to,
        notes,
        warnings,
        sreport: None,
        accounts,
        jobs: problems,
        runs: Some(runs),
    }
}

/// dstack's own figure for one submission: the instance's price × elapsed, the whole instance
/// even when the job held only some of its blocks, rounded once to micros.
fn whole_instance_micros(record: &UsageRecord) -> i64 {
    let price = i128::from(record.price_per_hour_micros.unwrap_or(0));
    clamp(div_half_even(
        price * i128::from(record.elapsed_us),
        3_600_000_000,
    ))
}

fn dstack_side(record: &UsageRecord, amount: Option<i64>) -> JobSide {
    JobSide {
        state: record.state.as_str().to_string(),
        at: record.effective_at(),
        elapsed_s: Some(record.elapsed_us / 1_000_000),
        amount,
        account: record.account.clone(),
    }
}

// --- arithmetic -----------------------------------------------------------------------------

/// `n / d` rounded half to even (`d > 0`).
fn div_half_even(n: i128, d: i128) -> i128 {
    let (q, r) = (n.div_euclid(d), n.rem_euclid(d));
    match (2 * r).cmp(&d) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal if q % 2 == 0 => q,
        std::cmp::Ordering::Equal => q + 1,
    }
}

/// Billing-microseconds → micros of billing-hours, rounded half to even.
fn hours_micros(billing_us: i128) -> i64 {
    clamp(div_half_even(billing_us, US_PER_HOUR_PER_MICRO))
}

fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// `+1.25`, `-0.000694`, `0.00`.
fn signed(micros: i64, decimals: u8) -> String {
    let text = format_micros(micros, decimals);
    if micros > 0 {
        format!("+{text}")
    } else {
        text
    }
}

// --- output ---------------------------------------------------------------------------------

fn render(report: &Report, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    match format {
        Format::Json => write_json(out, &report_json(report))?,
        Format::Csv => render_csv(report, out)?,
        Format::Table => render_table(report, out)?,
    }
    Ok(())
}

fn opt(micros: Option<i64>, decimals: u8) -> Value {
    micros.map_or(Value::Null, |m| Value::String(format_micros(m, decimals)))
}

fn reasons_json(reasons: &[Reason], decimals: u8) -> Value {
    reasons
        .iter()
        .map(|r| {
            json!({
                "kind": r.kind,
                "amount": opt(r.amount, decimals),
                "unit": r.unit,
                "text": r.text,
            })
        })
        .collect()
}

fn side_json(side: &Option<JobSide>, decimals: u8) -> Value {
    side.as_ref().map_or(Value::Null, |s| {
        json!({
            "state": s.state,
            "at": format_instant(s.at),
            "elapsed_seconds": s.elapsed_s,
            "amount": opt(s.amount, decimals),
            "account": s.account,
        })
    })
}

fn totals(report: &Report) -> AccountLine {
    let sum = |f: &dyn Fn(&AccountLine) -> Option<i64>| -> Option<i64> {
        let values: Vec<i64> = report.accounts.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    AccountLine {
        account: "TOTAL".into(),
        slurm_billing: sum(&|a| a.slurm_billing),
        recomputed_billing: sum(&|a| a.recomputed_billing),
        cluster_amount: sum(&|a| a.cluster_amount),
        bursar: report.accounts.iter().map(|a| a.bursar).sum(),
        difference: sum(&|a| a.difference),
        reasons: Vec::new(),
    }
}

fn report_json(report: &Report) -> Value {
    let d = report.decimals;
    let account = |a: &AccountLine| {
        let mut row = json!({
            "account": a.account,
            "slurm_billing_hours": opt(a.slurm_billing, d),
            "recomputed_billing_hours": opt(a.recomputed_billing, d),
            "bursar_amount": format_micros(a.bursar, d),
            "difference": opt(a.difference, d),
            "reasons": reasons_json(&a.reasons, d),
        });
        if report.kind == "dstack" {
            row["dstack_cost"] = opt(a.cluster_amount, d);
        }
        row
    };
    let mut value = json!({
        "cluster": report.cluster,
        "kind": report.kind,
        "from": format_instant(report.from),
        "to": format_instant(report.to),
        "currency": report.currency,
        "accounts": report.accounts.iter().map(account).collect::<Vec<_>>(),
        "total": account(&totals(report)),
        "jobs": report.jobs.iter().map(|j| json!({
            "job_id": j.job_id,
            "display_id": j.display_id,
            "submit": format_instant(j.submit),
            "account": j.account,
            "problem": j.problem.as_str(),
            "detail": j.detail,
            "cluster_record": side_json(&j.cluster_side, d),
            "bursar": side_json(&j.bursar_side, d),
            "hint": j.hint,
        })).collect::<Vec<_>>(),
        "notes": report.notes,
        "warnings": report.warnings,
        "ok": report.ok(),
    });
    if let Some(sreport) = &report.sreport {
        value["sreport"] = sreport.clone();
    }
    if let Some(runs) = &report.runs {
        value["runs"] = runs
            .iter()
            .map(|r| {
                json!({
                    "run_name": r.run_name,
                    "run_id": r.run_id,
                    "status": r.status,
                    "deleted": r.deleted,
                    "account": r.account,
                    "dstack_cost": opt(r.dstack_cost, d),
                    "bursar_amount": format_micros(r.bursar, d),
                    "difference": opt(r.difference, d),
                    "reasons": reasons_json(&r.reasons, d),
                })
            })
            .collect();
    }
    value
}

fn account_headers(report: &Report) -> Vec<&'static str> {
    if report.kind == "dstack" {
        vec!["account", "dstack cost", "bursar", "difference"]
    } else {
        vec![
            "account",
            "sreport billing-h",
            "sacct billing-h",
            "bursar",
            "difference",
        ]
    }
}

fn account_cells(report: &Report, a: &AccountLine) -> Vec<String> {
    let d = report.decimals;
    let show = |m: Option<i64>| m.map_or_else(|| "-".to_string(), |m| format_micros(m, d));
    let mut cells = vec![a.account.clone()];
    if report.kind == "dstack" {
        cells.push(show(a.cluster_amount));
    } else {
        cells.push(show(a.slurm_billing));
        cells.push(show(a.recomputed_billing));
    }
    cells.push(format_micros(a.bursar, d));
    cells.push(
        a.difference
            .map_or_else(|| "-".to_string(), |m| signed(m, d)),
    );
    cells
}

fn render_table(report: &Report, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "reconcile {} ({}, {}): {} .. {}",
        report.cluster,
        report.kind,
        report.currency,
        format_instant(report.from),
        format_instant(report.to)
    )?;
    if let Some(rollup) = report.sreport.as_ref().and_then(|s| s["rollup"].as_str()) {
        writeln!(out, "  sreport rollup: {rollup}")?;
    }
    for note in &report.notes {
        writeln!(out, "  {note}")?;
    }
    for warning in &report.warnings {
        writeln!(out, "  warning: {warning}")?;
    }
    writeln!(out)?;
    let headers = account_headers(report);
    let numeric: Vec<&'static str> = headers[1..].to_vec();
    let mut table = Table::new(&headers, &numeric);
    for a in &report.accounts {
        table.push(account_cells(report, a));
    }
    if report.accounts.len() > 1 {
        table.push(account_cells(report, &totals(report)));
    }
    if report.accounts.is_empty() {
        writeln!(out, "no usage in the window on either side")?;
    } else {
        table.write_table(out)?;
    }
    for a in report.accounts.iter().filter(|a| !a.reasons.is_empty()) {
        writeln!(out)?;
        match a.difference {
            Some(d) => writeln!(
                out,
                "{}: bursar − {} = {} {}",
                a.account,
                if report.kind == "dstack" {
                    "dstack"
                } else {
                    "sreport"
                },
                signed(d, report.decimals),
                report.currency
            )?,
            None => writeln!(out, "{}:", a.account)?,
        }
        for r in &a.reasons {
            writeln!(out, "  - {}", r.text)?;
        }
    }
    if let Some(runs) = &report.runs {
        writeln!(out)?;
        let mut table = Table::new(
            &[
                "run",
                "status",
                "account",
                "dstack cost",
                "bursar",
                "difference",
            ],
            &["dstack cost", "bursar", "difference"],
        );
        let d = report.decimals;
        for r in runs {
            table.push(vec![
                if r.deleted {
                    format!("{} (deleted)", r.run_name)
                } else {
                    r.run_name.clone()
                },
                r.status.clone(),
                r.account.clone(),
                r.dstack_cost
                    .map_or_else(|| "-".into(), |m| format_micros(m, d)),
                format_micros(r.bursar, d),
                r.difference.map_or_else(|| "-".into(), |m| signed(m, d)),
            ]);
        }
        table.write_table(out)?;
        for r in runs.iter().filter(|r| !r.reasons.is_empty()) {
            writeln!(out, "{}:", r.run_name)?;
            for reason in &r.reasons {
                writeln!(out, "  - {}", reason.text)?;
            }
        }
    }
    writeln!(out)?;
    if report.jobs.is_empty() {
        writeln!(
            out,
            "ok: no job missing, extra or stale; the differences above are explained by policy"
        )?;
        return Ok(());
    }
    let mut table = Table::new(&["problem", "job", "account", "detail", "hint"], &[]);
    for j in &report.jobs {
        table.push(vec![
            j.problem.as_str().to_string(),
            if j.display_id.is_empty() || j.display_id == j.job_id {
                j.job_id.clone()
            } else {
                format!("{} ({})", j.display_id, j.job_id)
            },
            j.account.clone(),
            j.detail.clone(),
            j.hint.clone(),
        ]);
    }
    table.write_table(out)?;
    let count = |p: Problem| report.jobs.iter().filter(|j| j.problem == p).count();
    writeln!(
        out,
        "NOT OK: {} missing, {} extra, {} stale, {} unpriced",
        count(Problem::Missing),
        count(Problem::Extra),
        count(Problem::Stale),
        count(Problem::Unpriced)
    )?;
    Ok(())
}

/// The accounts (with their reasons joined by `; `), then — after an empty line — the jobs
/// with a problem, if any.
fn render_csv(report: &Report, out: &mut impl Write) -> anyhow::Result<()> {
    let mut headers = account_headers(report);
    headers.push("reasons");
    let line = |cells: &[String], out: &mut dyn Write| -> std::io::Result<()> {
        let cells: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
        writeln!(out, "{}", cells.join(","))
    };
    let header: Vec<String> = headers.iter().map(|h| h.replace(' ', "_")).collect();
    line(&header, out)?;
    for a in &report.accounts {
        let mut cells = account_cells(report, a);
        cells.push(
            a.reasons
                .iter()
                .map(|r| r.text.clone())
                .collect::<Vec<_>>()
                .join("; "),
        );
        line(&cells, out)?;
    }
    if !report.jobs.is_empty() {
        writeln!(out)?;
        line(
            &[
                "problem",
                "job_id",
                "display_id",
                "account",
                "detail",
                "hint",
            ]
            .map(String::from),
            out,
        )?;
        for j in &report.jobs {
            line(
                &[
                    j.problem.as_str().to_string(),
                    j.job_id.clone(),
                    j.display_id.clone(),
                    j.account.clone(),
                    j.detail.clone(),
                    j.hint.clone(),
                ],
                out,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRES_MINUTES: &str =
        include_str!("../tests/fixtures/sreport-cluster-AccountUtilizationByUser-tres.psv");
    const CPU_MINUTES: &str =
        include_str!("../tests/fixtures/sreport-cluster-AccountUtilizationByUser.psv");
    const BILLING_SECONDS: &str =
        include_str!("../tests/fixtures/sreport-billing-seconds-epoch.psv");
    const ROLLUP: &str = include_str!("../tests/fixtures/sacctmgr-rollup.txt");

    /// 2026-11-22T00:00:00Z.
    const T: i64 = 1_795_305_600;

    fn pricing() -> ClusterPricing {
        let config = crate::config::Config::parse(
            "clusters:\n  onprem:\n    kind: slurm\n    currency: su\n    partitions:\n      batch: {weights: \"CPU=1.0,Mem=0.25G\"}\n    qos:\n      premium: {usage_factor: 2}\n",
        )
        .unwrap();
        config.clusters["onprem"].pricing()
    }

    fn sacct(lines: &[String]) -> Vec<UsageRecord> {
        let header = bursar_collectors::sacct::runner::FORMAT.replace(',', "|");
        let text = format!("{header}\n{}\n", lines.join("\n"));
        let fetched =
            bursar_collectors::sacct::runner::parse_output(text.as_bytes(), "onprem").unwrap();
        assert!(fetched.quarantined.is_empty(), "{:?}", fetched.quarantined);
        fetched.records
    }

    fn posting(
        job: &str,
        submit: i64,
        account: &str,
        state: &str,
        amount: i64,
        at: i64,
    ) -> JobPosting {
        JobPosting {
            cluster: "onprem".into(),
            job_id: job.into(),
            display_id: job.into(),
            submit,
            account: account.into(),
            user: "alice".into(),
            partition: Some("batch".into()),
            qos: None,
            state: state.into(),
            revision: None,
            currency: Currency::new("su"),
            amount,
            effective_at: at,
            note: None,
        }
    }

    #[test]
    fn every_difference_is_explained_and_the_terms_add_up_exactly() {
        let job = |id: u32,
                   account: &str,
                   qos: &str,
                   state: &str,
                   submit: i64,
                   end: &str,
                   elapsed: u64,
                   tres: &str| {
            format!("{id}|{id}|onprem|{account}|u|batch|{qos}|{state}|{submit}|{submit}|{end}|{elapsed}|{tres}|1|1|60|j{id}")
        };
        let one = "billing=1,cpu=1,mem=1000M,node=1";
        let records = sacct(&[
            // physics: premium (×2), a refunded NODE_FAIL, one the ledger has as still running.
            job(
                1,
                "physics",
                "premium",
                "COMPLETED",
                T + 100,
                &(T + 3700).to_string(),
                3600,
                one,
            ),
            job(
                2,
                "physics",
                "normal",
                "NODE_FAIL",
                T + 100,
                &(T + 1900).to_string(),
                1800,
                "billing=2,cpu=2,mem=1000M,node=1",
            ),
            job(
                6,
                "physics",
                "normal",
                "COMPLETED",
                T + 400,
                &(T + 460).to_string(),
                60,
                one,
            ),
            // chemistry: running, crossing the window's start, missing from the ledger.
            job(
                3,
                "chemistry",
                "normal",
                "RUNNING",
                T + 200,
                "Unknown",
                600,
                one,
            ),
            job(
                4,
                "chemistry",
                "normal",
                "COMPLETED",
                T - 1000,
                &(T + 800).to_string(),
                1800,
                one,
            ),
            job(
                5,
                "chemistry",
                "normal",
                "COMPLETED",
                T + 300,
                &(T + 360).to_string(),
                60,
                "billing=1,cpu=1,mem=1024M,node=1",
            ),
        ]);
        let pricing = pricing();
        let book = PriceBook::builtin();
        let price = |id: &str| {
            let r = records.iter().find(|r| r.job_id == id).unwrap();
            pricing.charge(r, &book).unwrap().amount.micros
        };
        let postings = vec![
            posting("1", T + 100, "physics", "COMPLETED", price("1"), T + 3700),
            posting("2", T + 100, "physics", "NODE_FAIL", 0, T + 1900),
            posting("6", T + 400, "physics", "RUNNING", 0, T + 400),
            posting("99", T + 500, "physics", "COMPLETED", 1_000_000, T + 500),
            posting("3", T + 200, "chemistry", "RUNNING", 0, T + 200),
            posting("4", T - 1000, "chemistry", "COMPLETED", price("4"), T + 800),
        ];
        // sreport: physics has everything (7260 s = 121 min); chemistry's rollup lacks job 5
        // (1460 − 60 = 1400 s, shown as 23 min).
        let sreport = |unit: &str, physics: u64, chemistry: u64| {
            parse_sreport(&format!(
                "Cluster/Account/User Utilization {T} - {} (7200 secs)\nUsage reported in TRES {unit}\n\
                 Cluster|Account|Login|Proper Name|TRES Name|Used\n\
                 onprem|root|||billing|{}\nonprem|physics|||billing|{physics}\nonprem|physics|alice||billing|{physics}\n\
                 onprem|chemistry|||billing|{chemistry}\nonprem|chemistry|bob||billing|{chemistry}\n",
                T + 7199,
                physics + chemistry
            ))
            .unwrap()
        };
        let views = SlurmViews {
            sreport_minutes: Some(sreport("Minutes", 121, 23)),
            sreport_seconds: Some(sreport("Seconds", 7260, 1400)),
            sacct: records.clone(),
            sacct_window: (T - 3600, T + 86_400),
            rollup: "skipped",
            warnings: Vec::new(),
            slurm_name: "onprem".into(),
            now: T + 800,
        };
        let inputs = SlurmInputs {
            cluster: "onprem",
            pricing: &pricing,
            book: &book,
            decimals: 2,
            from: T,
            to: T + 86_400,
            postings,
        };
        let report = reconcile_slurm(&inputs, views);
        assert!(!report.ok());
        let problems: Vec<(&str, &str)> = report
            .jobs
            .iter()
            .map(|j| (j.problem.as_str(), j.job_id.as_str()))
            .collect();
        assert_eq!(
            problems,
            [("missing", "5"), ("extra", "99"), ("stale", "6")]
        );
        assert!(report.jobs[0]
            .hint
            .starts_with("bursar collect -M onprem --since 2026-11-22T00:00:00Z"));

        let line = |name: &str| report.accounts.iter().find(|a| a.account == name).unwrap();
        let amount = |a: &AccountLine, kind: &str| {
            a.reasons
                .iter()
                .find(|r| r.kind == kind)
                .and_then(|r| r.amount)
        };
        for a in &report.accounts {
            let explained: i64 = a.reasons.iter().filter_map(|r| r.amount).sum();
            assert_eq!(
                Some(explained),
                a.difference,
                "{}: {:?}",
                a.account,
                a.reasons
            );
        }
        let physics = line("physics");
        // Job 1: 1.244140625 su/h for an hour: 2.488281 at ×2 (premium), 1.244141 at ×1.
        assert_eq!(
            amount(physics, "qos_usage_factor"),
            Some(2_488_281 - 1_244_141)
        );
        // Jobs 1 and 6 at factor 1 (1.244141 + 0.020736) vs billing 1 × 3660 s (1.016667).
        assert_eq!(
            amount(physics, "billing_truncation"),
            Some(1_244_141 + 20_736 - 1_016_667)
        );
        // Job 2: billing 2 for half an hour, refunded.
        assert_eq!(amount(physics, "refund_policy"), Some(-1_000_000));
        // Job 6 is stale (bursar 0, priced 0.020736) and job 99 extra (+1).
        assert_eq!(amount(physics, "collection"), Some(1_000_000 - 20_736));
        assert_eq!(physics.slurm_billing, Some(2_016_667));
        assert_eq!(physics.recomputed_billing, Some(2_016_667));

        let chemistry = line("chemistry");
        // Each term is a difference of running totals, each rounded once: jobs 4 + 5 charged
        // (1860 billing-s), + job 3 running (600 s so far), their time inside sreport's
        // window (job 4 had 1000 of its 1800 s before it), sreport's 1400 s and 23 min.
        let hours = |seconds: i128| hours_micros(seconds * 1_000_000);
        assert_eq!(
            amount(chemistry, "unfinished"),
            Some(hours(1860) - hours(2460))
        );
        assert_eq!(
            amount(chemistry, "window_edges"),
            Some(hours(2460) - hours(1460))
        );
        assert_eq!(
            amount(chemistry, "rollup_gap"),
            Some(hours(1460) - hours(1400))
        );
        assert_eq!(
            amount(chemistry, "sreport_rounding"),
            Some(hours(1400) - hours(23 * 60))
        );
        assert_eq!(chemistry.recomputed_billing, Some(hours(2460)));
        assert_eq!(amount(chemistry, "collection"), Some(-price("5")));
        assert!(amount(chemistry, "qos_usage_factor").is_none());
    }

    #[test]
    fn dstack_differences_are_split_into_proration_unfinished_and_rounding() {
        let submission =
            |id: &str, state: JobState, price: i64, seconds: u64, blocks| UsageRecord {
                cluster: "gpucloud".into(),
                job_id: id.into(),
                display_id: format!("run/0/{id}"),
                submit: T,
                start: Some(T),
                end: state.is_final().then_some(T + seconds as i64),
                account: "physics".into(),
                user: "alice".into(),
                partition: Some("aws".into()),
                qos: None,
                state,
                elapsed_us: seconds * 1_000_000,
                alloc: bursar_pricing::Tres::new(),
                time_limit_min: None,
                job_name: None,
                price_per_hour_micros: Some(price),
                blocks,
            };
        let run = |id: &str, submissions: &[&str], cost: i64| RunSummary {
            run_id: id.into(),
            run_name: id.into(),
            project: "hpc".into(),
            user: "alice".into(),
            status: "done".into(),
            submitted_at: chrono::DateTime::from_timestamp(T, 0).unwrap(),
            deleted: false,
            finished: true,
            reported_cost_micros: Some(cost),
            submission_ids: submissions.iter().map(|s| s.to_string()).collect(),
            never_placed: Vec::new(),
            unreadable: 0,
            first_job_lowest: Some(0),
        };
        let records = vec![
            // 1 of 4 blocks of a 2 $/h instance for an hour, and a submission still going.
            submission("s1", JobState::Completed, 2_000_000, 3600, Some((1, 4))),
            submission("s2", JobState::Running, 1_000_000, 1800, None),
            // Not collected.
            submission("s3", JobState::Completed, 1_000_000, 3600, None),
        ];
        let ledger = |id: &str, state: &str, amount: i64, at: i64| {
            let mut p = posting(id, T, "physics", state, amount, at);
            p.cluster = "gpucloud".into();
            p.currency = Currency::new("usd");
            p
        };
        // bursar's zero record for a submission of run b that dstack deleted (never placed,
        // superseded by a retry for capacity): shown under its run's name, and not extra.
        let mut deleted = ledger("gone", "CANCELLED", 0, T);
        deleted.display_id = "b".into();
        let postings = vec![
            ledger("s1", "COMPLETED", 500_000, T + 3600),
            ledger("s2", "RUNNING", 0, T),
            ledger("zz", "COMPLETED", 100_000, T + 60),
            deleted,
        ];
        let pricing = ClusterPricing::new(Currency::new("usd"));
        let book = PriceBook::builtin();
        let inputs = DstackInputs {
            cluster: "gpucloud",
            pricing: &pricing,
            book: &book,
            decimals: 2,
            from: T,
            to: T + 86_400,
            postings,
            // dstack: 2 + 0.5 whole-instance, its float sum rounded to 2.500012.
            runs: vec![
                run("a", &["s1", "s2", "s0"], 2_500_012),
                run("b", &["s3"], 1_000_000),
            ],
            run_accounts: [("a", "physics"), ("b", "physics")]
                .map(|(r, a)| (r.to_string(), a.to_string()))
                .into(),
            records,
        };
        let report = reconcile_dstack(&inputs);
        let problems: Vec<(&str, &str)> = report
            .jobs
            .iter()
            .map(|j| (j.problem.as_str(), j.job_id.as_str()))
            .collect();
        assert_eq!(problems, [("missing", "s3"), ("extra", "zz")]);
        let runs = report.runs.as_ref().unwrap();
        let kinds = |r: &RunLine| -> Vec<(&str, i64)> {
            r.reasons
                .iter()
                .map(|x| (x.kind, x.amount.unwrap()))
                .collect()
        };
        assert_eq!(runs[0].difference, Some(500_000 - 2_500_012));
        assert_eq!(
            kinds(&runs[0]),
            [
                ("shared_instance", -1_500_000),
                ("unfinished", -500_000),
                ("dstack_rounding", -12)
            ]
        );
        assert_eq!(kinds(&runs[1]), [("not_collected", -1_000_000)]);
        assert_eq!(report.accounts.len(), 1);
        let physics = &report.accounts[0];
        let explained: i64 = physics.reasons.iter().filter_map(|r| r.amount).sum();
        assert_eq!(physics.difference, Some(explained));
        assert_eq!(physics.bursar, 600_000);
        assert_eq!(physics.cluster_amount, Some(3_500_012));
    }

    #[test]
    fn reads_the_captured_tres_report() {
        let usage = parse_sreport(TRES_MINUTES).unwrap();
        assert_eq!(usage.unit.as_deref(), Some("TRES Minutes"));
        // 2026-11-22T00:00:00 - 2026-11-22T00:59:59: one whole hour, end exclusive.
        assert_eq!(usage.window, Some((1_795_305_600, 1_795_305_600 + 3600)));
        assert_eq!(usage.rows.len(), 60);
        let onprem = sreport_accounts(&usage, "onprem");
        // Parents roll their children up; the users' rows are the account's own jobs.
        assert_eq!(onprem["root"].account_row, Some(3));
        assert_eq!(onprem["root"].users, 0);
        assert_eq!(onprem["chemistry"].account_row, Some(2));
        assert_eq!(onprem["chemistry"].users, 2);
        assert_eq!(onprem["chemistry"].user_rows, 2);
        assert_eq!(onprem["physics"].users, 1);
        let cloud = sreport_accounts(&usage, "cloud");
        assert_eq!(cloud["physics"].account_row, Some(1));
        assert_eq!(cloud["chemistry"].account_row, Some(0));
        // Only the billing TRES counts.
        assert!(usage
            .rows
            .iter()
            .any(|r| r.tres.as_deref() == Some("mem") && r.used == 2533));
    }

    #[test]
    fn reads_the_cpu_minutes_layout_without_a_tres_column() {
        let usage = parse_sreport(CPU_MINUTES).unwrap();
        assert_eq!(usage.unit.as_deref(), Some("CPU Minutes"));
        assert_eq!(usage.rows.len(), 15);
        let bob = usage
            .rows
            .iter()
            .find(|r| r.cluster == "onprem" && r.login.as_deref() == Some("bob"))
            .unwrap();
        assert_eq!(
            (bob.account.as_str(), bob.tres.as_deref(), bob.used),
            ("chemistry", None, 2)
        );
    }

    #[test]
    fn reads_epoch_headers_and_seconds() {
        let usage = parse_sreport(BILLING_SECONDS).unwrap();
        assert_eq!(usage.unit.as_deref(), Some("TRES Seconds"));
        assert_eq!(usage.window, Some((1_795_305_600, 1_795_312_800)));
        let onprem = sreport_accounts(&usage, "onprem");
        // Leaf accounts: the row is the sum of the users' rows, to the second.
        assert_eq!(onprem["chemistry"].account_row, Some(31));
        assert_eq!(onprem["chemistry"].users, 19 + 12);
        assert_eq!(onprem["physics"].users, 37 + 4);
        assert_eq!(onprem["org"].account_row, Some(72));
    }

    #[test]
    fn reads_headerless_output() {
        let text = "onprem|root|||billing|3\nonprem|physics|alice||billing|1\n";
        let usage = parse_sreport(text).unwrap();
        assert_eq!(usage.window, None);
        assert_eq!(usage.rows.len(), 2);
        assert_eq!(usage.rows[1].login.as_deref(), Some("alice"));
        assert_eq!(usage.rows[1].tres.as_deref(), Some("billing"));
        assert!(parse_sreport("onprem|root|||billing|1.5%\n").is_err());
        assert!(parse_sreport("onprem|root\n").is_err());
        assert_eq!(parse_sreport("").unwrap(), SreportUsage::default());
    }

    #[test]
    fn leaf_rows_are_compared_whole_and_parents_by_their_users() {
        let minutes = SreportAccount {
            account_row: Some(1),
            users: 0,
            user_rows: 2,
        };
        let seconds = SreportAccount {
            account_row: Some(31),
            users: 31,
            user_rows: 2,
        };
        let f = sreport_for(minutes, seconds);
        assert_eq!((f.minutes, f.seconds, f.rows), (1, 31, 1));
        // An account with sub-accounts: only its users' rows.
        let seconds = SreportAccount {
            account_row: Some(72),
            users: 10,
            user_rows: 1,
        };
        let minutes = SreportAccount {
            account_row: Some(1),
            users: 0,
            user_rows: 1,
        };
        let f = sreport_for(minutes, seconds);
        assert_eq!((f.minutes, f.seconds), (0, 10));
    }

    #[test]
    fn the_captured_rollup_succeeded() {
        assert!(rollup_succeeded(true, ROLLUP));
        assert!(!rollup_succeeded(false, ROLLUP));
        assert!(!rollup_succeeded(
            true,
            "sacctmgr: error: Only admins can run rollup"
        ));
    }

    #[test]
    fn billing_hours_round_half_even() {
        // 1 billing-second = 277.7… micros of a billing-hour.
        assert_eq!(hours_micros(1_000_000), 278);
        // 0.5 micro: to even.
        assert_eq!(div_half_even(1, 2), 0);
        assert_eq!(div_half_even(3, 2), 2);
        assert_eq!(div_half_even(-3, 2), -2);
        assert_eq!(hours_micros(3600 * 1_000_000), 1_000_000);
        assert_eq!(signed(1_500_000, 2), "+1.50");
        assert_eq!(signed(-694, 2), "-0.000694");
    }

    fn entry(
        id: i64,
        kind: bursar_ledger::EntryKind,
        amount: i64,
        job_count: i64,
        state: &str,
        rev: &str,
    ) -> JournalEntry {
        JournalEntry {
            id,
            idempotency_key: format!("k{id}"),
            kind,
            account: "physics".into(),
            currency: Currency::new("su"),
            amount,
            job_count,
            effective_at: 100 + id,
            posted_at: 100 + id,
            cluster: Some("onprem".into()),
            job_id: Some("7".into()),
            display_id: Some("7_3".into()),
            submit: Some(50),
            user: Some("alice".into()),
            partition: Some("batch".into()),
            qos: Some("normal".into()),
            state: Some(state.into()),
            revision: Some(rev.into()),
            price_version: None,
            hold_id: None,
            note: None,
        }
    }

    #[test]
    fn postings_sum_entries_and_take_the_latest_revision_past_reversals() {
        use bursar_ledger::EntryKind::{Adjustment, Charge, Deposit};
        let entries = vec![
            entry(1, Charge, 0, 1, "RUNNING", "r1"),
            entry(2, Adjustment, 500, 0, "COMPLETED", "r2"),
            // A reversal carries the old revision; the re-post after it the new one.
            entry(3, Adjustment, -500, -1, "COMPLETED", "r2"),
            entry(4, Adjustment, 400, 1, "FAILED", "r3"),
            entry(5, Adjustment, -100, 0, "FAILED", "r4"),
            entry(6, Deposit, 99, 0, "", ""),
        ];
        let jobs = job_postings(entries);
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.amount, 300);
        assert_eq!(j.state, "FAILED");
        assert_eq!(j.revision.as_deref(), Some("r4"));
        assert_eq!(j.effective_at, 105);
        assert_eq!(j.display_id, "7_3");
    }
}
