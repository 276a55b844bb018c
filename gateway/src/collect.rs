//! `bursar collect`: live, incremental, exactly-once collection from every configured cluster.
//!
//! Each cluster has a durable cursor in the ledger. A Slurm pass (slurmrestd or sacct) reads
//! from `cursor − overlap` to now in slices of at most `slice`; each slice is priced and posted
//! in one ledger transaction and only then does the cursor move to the slice's end, so a crash
//! at any point re-reads at most one slice, and re-reading posts nothing (the ledger's
//! idempotency keys). A dstack pass follows the runs list by its keyset cursor and re-polls the
//! runs it knows are unfinished until they finish.
//!
//! Failures stay inside their cluster: every call has a timeout, is retried with exponential
//! backoff and jitter, and a pass that still fails records the error in the cluster's status
//! (`bursar collect status`) without moving its cursor past unprocessed data.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use bursar_collectors::dstack::{DstackClient, DstackConfig, RunCursor, RunSummary};
use bursar_collectors::sacct::runner::SacctCommand;
use bursar_collectors::slurmrestd::{
    ApiSelection, LegacyTimes, SlurmAuth, SlurmRestClient, SlurmRestConfig, Window,
};
use bursar_collectors::RawQuarantine;
use bursar_ledger::{ApiJob, JobPart, QuarantineItem, SUBMIT_SKEW_SECS};
use bursar_pricing::{JobState, UsageRecord};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::config::{ClusterConfig, CollectConfig};
use crate::import::{describe, Pricer};
use crate::timefmt::{format_instant, now, parse_instant};

const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
const DEFAULT_OVERLAP: Duration = Duration::from_secs(3600);
const DEFAULT_SLICE: Duration = Duration::from_secs(3_600);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_BACKFILL: i64 = 7 * 86_400;

/// One configured source, ready to call.
pub enum Source {
    Slurmrestd(Box<SlurmRestClient>),
    Sacct(SacctCommand),
    Dstack {
        client: DstackClient,
        account: String,
        user_accounts: HashMap<String, String>,
    },
}

impl Source {
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Slurmrestd(_) => "slurmrestd",
            Source::Sacct(_) => "sacct",
            Source::Dstack { .. } => "dstack",
        }
    }
}

/// What one cluster's collection needs: its source and schedule.
pub struct Collector {
    pub cluster: String,
    pub source: Source,
    pub interval: Duration,
    pub overlap: Duration,
    /// The longest window of one accounting call.
    pub slice: Duration,
    pub attempts: u32,
    pub start: Option<i64>,
}

impl Collector {
    /// Builds the collector for a configured cluster (`None` when it has no `collect`).
    pub fn from_config(name: &str, cluster: &ClusterConfig) -> anyhow::Result<Option<Collector>> {
        let Some(collect) = &cluster.collect else {
            return Ok(None);
        };
        let timeout = collect.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let slice = collect.slice.unwrap_or(DEFAULT_SLICE);
        let source = build_source(name, collect, timeout, slice)?;
        Ok(Some(Collector {
            cluster: name.to_string(),
            source,
            interval: collect.interval.unwrap_or(DEFAULT_INTERVAL),
            overlap: collect.overlap.unwrap_or(DEFAULT_OVERLAP),
            slice,
            attempts: collect.attempts.unwrap_or(3).max(1),
            start: collect.start.as_deref().map(parse_instant).transpose()?,
        }))
    }
}

fn build_source(
    name: &str,
    collect: &CollectConfig,
    timeout: Duration,
    slice: Duration,
) -> anyhow::Result<Source> {
    if let Some(rest) = &collect.slurmrestd {
        let auth = SlurmAuth::JwtKey {
            key_file: rest.jwt_key_file.clone(),
            user: rest.user.clone().unwrap_or_else(|| "slurm".to_string()),
            lifetime: Duration::from_secs(300),
        };
        let mut config = SlurmRestConfig::new(rest.url.clone(), name.to_string(), auth);
        config.timeout = timeout;
        config.max_window = slice;
        config.ca_file = rest.ca_file.clone();
        config.api = match rest.api_version.as_deref() {
            None | Some("auto") => ApiSelection::Auto,
            Some(v) => ApiSelection::Fixed(
                v.parse()
                    .map_err(|e| anyhow!("cluster {name}: api_version: {e}"))?,
            ),
        };
        if let Some(zone) = &rest.server_timezone {
            config.legacy_times = LegacyTimes::Local(
                zone.parse()
                    .map_err(|e| anyhow!("cluster {name}: server_timezone: {e}"))?,
            );
        }
        return Ok(Source::Slurmrestd(Box::new(
            SlurmRestClient::new(config).with_context(|| format!("cluster {name}"))?,
        )));
    }
    if let Some(sacct) = &collect.sacct {
        let mut command = SacctCommand::new(
            sacct
                .slurm_cluster
                .clone()
                .unwrap_or_else(|| name.to_string()),
        );
        if let Some(program) = &sacct.program {
            command.program = program.clone();
        }
        if let Some(conf) = &sacct.slurm_conf {
            command
                .env
                .push(("SLURM_CONF".into(), conf.display().to_string()));
        }
        command.timeout = timeout;
        return Ok(Source::Sacct(command));
    }
    if let Some(d) = &collect.dstack {
        let token = std::fs::read_to_string(&d.token_file).with_context(|| {
            format!(
                "cluster {name}: cannot read the dstack token file {}",
                d.token_file.display()
            )
        })?;
        let config = DstackConfig {
            base_url: d.url.clone(),
            token: token.trim().to_string().into(),
            project: d.project.clone(),
            cluster: name.to_string(),
            timeout,
            page_size: 100,
            ca_file: d.ca_file.clone(),
        };
        let client = DstackClient::new(config).with_context(|| format!("cluster {name}"))?;
        return Ok(Source::Dstack {
            client,
            account: d.account.clone().unwrap_or_else(|| d.project.clone()),
            user_accounts: d.user_accounts.clone().into_iter().collect(),
        });
    }
    Err(anyhow!("cluster {name}: collect needs a source"))
}

/// A Slurm cluster's cursor: every record that ended before `until − overlap` is posted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SlurmCursor {
    until: i64,
    /// The slice length (seconds) the next pass starts with: what the last one ended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slice: Option<i64>,
}

/// A dstack cluster's cursor: the runs list position and the runs still to re-poll.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct DstackCursor {
    runs: Option<RunCursor>,
    unfinished: BTreeSet<String>,
}

/// The last pass of one cluster, kept in the ledger for `bursar collect status` and `/metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CollectStatus {
    pub source: String,
    pub last_attempt: Option<i64>,
    pub last_success: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_at: Option<i64>,
    /// Everything before this moment has been collected (Slurm sources).
    pub collected_until: Option<i64>,
    pub consecutive_failures: u32,
    pub records_last_pass: u64,
}

fn cursor_key(cluster: &str) -> String {
    cluster.to_string()
}

fn status_key(cluster: &str) -> String {
    format!("status/{cluster}")
}

pub async fn load_status(app: &App, cluster: &str) -> anyhow::Result<CollectStatus> {
    Ok(match app.ledger.get_cursor(&status_key(cluster)).await? {
        Some(text) => serde_json::from_str(&text).unwrap_or_default(),
        None => CollectStatus::default(),
    })
}

async fn save_status(app: &App, cluster: &str, status: &CollectStatus) -> anyhow::Result<()> {
    app.ledger
        .set_cursor(&status_key(cluster), &serde_json::to_string(status)?)
        .await?;
    Ok(())
}

/// What one pass did.
#[derive(Debug, Default, Clone)]
pub struct PassSummary {
    pub cluster: String,
    pub records: u64,
    pub charged: u64,
    pub adjusted: u64,
    pub unchanged: u64,
    pub quarantined: u64,
    pub settled_holds: u64,
    pub created_accounts: BTreeSet<String>,
    pub windows: u64,
}

/// An explicit window for a pass (`--since`/`--until`); `None` parts come from the cursor and
/// the clock. A dstack pass reads `since` only: the runs submitted from then on.
#[derive(Debug, Default, Clone, Copy)]
pub struct PassWindow {
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// Called after each slice with (seconds of the window done, seconds in all, the slice's end).
pub type Progress<'a> = &'a (dyn Fn(u64, u64, i64) + Sync);

/// Runs one pass for one cluster and records its outcome in the cluster's status.
pub async fn run_pass(
    app: &App,
    collector: &Collector,
    window: PassWindow,
    progress: Progress<'_>,
) -> anyhow::Result<PassSummary> {
    // Versions stored since the last pass (`bursar prices import`/`refresh`) price this one.
    if let Err(e) = app.prices.reload_if_changed(&app.ledger).await {
        tracing::warn!("price tables: {e:#}; the ones loaded before stay in use");
    }
    let mut status = load_status(app, &collector.cluster).await?;
    status.source = collector.source.kind().to_string();
    status.last_attempt = Some(now());
    let result = match &collector.source {
        Source::Dstack {
            client,
            account,
            user_accounts,
        } => dstack_pass(app, collector, client, account, user_accounts, window.since).await,
        _ => slurm_pass(app, collector, window, progress, &mut status).await,
    };
    match &result {
        Ok(summary) => {
            status.last_success = Some(now());
            status.consecutive_failures = 0;
            status.records_last_pass = summary.records;
        }
        Err(e) => {
            status.last_error = Some(format!("{e:#}"));
            status.last_error_at = Some(now());
            status.consecutive_failures += 1;
        }
    }
    save_status(app, &collector.cluster, &status).await?;
    result
}

async fn slurm_pass(
    app: &App,
    collector: &Collector,
    window: PassWindow,
    progress: Progress<'_>,
    status: &mut CollectStatus,
) -> anyhow::Result<PassSummary> {
    let key = cursor_key(&collector.cluster);
    let cursor: Option<SlurmCursor> = match app.ledger.get_cursor(&key).await? {
        Some(text) => Some(
            serde_json::from_str(&text)
                .with_context(|| format!("cursor of {}", collector.cluster))?,
        ),
        None => None,
    };
    let overlap = i64::try_from(collector.overlap.as_secs()).unwrap_or(i64::MAX);
    let end = window.until.unwrap_or_else(now);
    let start = window.since.unwrap_or_else(|| match &cursor {
        Some(c) => c.until.saturating_sub(overlap),
        None => collector.start.unwrap_or_else(|| end - DEFAULT_BACKFILL),
    });
    status.collected_until = cursor.as_ref().map(|c| c.until);
    let mut summary = PassSummary {
        cluster: collector.cluster.clone(),
        ..PassSummary::default()
    };
    if end <= start {
        return Ok(summary);
    }
    let max_slice = i64::try_from(collector.slice.as_secs())
        .unwrap_or(i64::MAX)
        .max(1);
    let mut len = cursor
        .as_ref()
        .and_then(|c| c.slice)
        .unwrap_or(FIRST_SLICE_SECS)
        .clamp(1, max_slice);
    let mut at = start;
    // The records of the slice before: a job pending or running across slices comes back in
    // each, and only the others tell how dense the jobs are.
    let mut seen: HashSet<(String, i64)> = HashSet::new();
    let mut until = cursor.as_ref().map(|c| c.until);
    while at < end {
        let planned = Window::new(at, at.saturating_add(len).min(end));
        // A retry asks for a quarter of the window the failed call asked for: an answer too
        // big to build in time is not asked for again whole.
        let (slice, records, quarantined) = match &collector.source {
            Source::Slurmrestd(client) => {
                let (slice, fetched) = with_retries(
                    collector,
                    "slurmrestd",
                    |attempt| {
                        let slice = narrowed(planned, attempt);
                        async move { client.fetch_jobs(slice).await.map(|f| (slice, f)) }
                    },
                    |e| e.is_retryable(),
                )
                .await?;
                (slice, fetched.records, fetched.quarantined)
            }
            Source::Sacct(command) => {
                let (slice, fetched) = with_retries(
                    collector,
                    "sacct",
                    |attempt| {
                        let slice = narrowed(planned, attempt);
                        async move {
                            command
                                .fetch(slice.start, slice.end)
                                .await
                                .map(|f| (slice, f))
                        }
                    },
                    |e| e.is_retryable(),
                )
                .await?;
                let quarantined = fetched
                    .quarantined
                    .into_iter()
                    .map(|q| RawQuarantine {
                        reason: format!("line {}: {}", q.line, q.reason),
                        raw: q.raw,
                    })
                    .collect();
                (slice, fetched.records, quarantined)
            }
            Source::Dstack { .. } => unreachable!("dstack passes are not windowed"),
        };
        let keys: HashSet<(String, i64)> = records
            .iter()
            .map(|r| (r.job_id.clone(), r.submit))
            .collect();
        let fresh = keys.difference(&seen).count();
        seen = keys;
        let source = format!("{}:{}", collector.source.kind(), collector.cluster);
        post(
            app,
            &collector.cluster,
            &source,
            records,
            HashSet::new(),
            quarantined,
            &mut summary,
        )
        .await?;
        if slice != planned {
            len = slice.end - slice.start;
        }
        len = next_slice(len, slice.end - slice.start, fresh, max_slice);
        // Only a window that joins the collected range extends it; an explicit backfill of an
        // older range never moves the cursor back, and a gap never moves it forward.
        if until.is_none_or(|u| slice.start <= u) {
            let next = until.map_or(slice.end, |u| u.max(slice.end));
            let cursor = SlurmCursor {
                until: next,
                slice: Some(len),
            };
            app.ledger
                .set_cursor(&key, &serde_json::to_string(&cursor)?)
                .await?;
            until = Some(next);
            status.collected_until = until;
        }
        summary.windows += 1;
        progress(
            u64::try_from(slice.end - start).unwrap_or(0),
            u64::try_from(end - start).unwrap_or(0),
            slice.end,
        );
        at = slice.end;
    }
    Ok(summary)
}

/// The most records one accounting call should bring. slurmrestd 22.05 builds its whole
/// answer in memory, about 170 KB a job: one call for a day of 131,241 jobs grew it to 22.7 GB
/// before the kernel killed it. So a pass's slices shrink where jobs are dense and grow back
/// where they are sparse.
const RECORDS_PER_CALL: usize = 1_000;

/// `window` as attempt `attempt` (from 1) reads it: whole at first, then a quarter as long at
/// each retry (at least a second).
fn narrowed(window: Window, attempt: u32) -> Window {
    let len = (window.end - window.start)
        .checked_shr(2 * attempt.saturating_sub(1))
        .unwrap_or(0)
        .max(1);
    Window::new(
        window.start,
        window.start.saturating_add(len).min(window.end),
    )
}

/// The first slice of a cluster's first pass: a minute, from which it doubles while the jobs
/// are sparse — the first call must not be the one that brings a busy day at once.
const FIRST_SLICE_SECS: i64 = 60;

/// The length of the next slice after one planned at `planned` seconds, `actual` seconds long
/// (the last of a window is cut short), brought `fresh` records that the slice before it did
/// not: shrunk to hold [`RECORDS_PER_CALL`] at the density seen when above it, doubled when
/// below a quarter of it, else kept; within one second and `max`.
fn next_slice(planned: i64, actual: i64, fresh: usize, max: i64) -> i64 {
    let target = RECORDS_PER_CALL as i64;
    let fresh = i64::try_from(fresh).unwrap_or(i64::MAX);
    let next = if fresh > target {
        actual.max(1).saturating_mul(target) / fresh
    } else if fresh < target / 4 {
        planned.saturating_mul(2)
    } else {
        planned
    };
    next.clamp(1, max.max(1))
}

/// `since` (`bursar collect --since`) re-reads the runs submitted from then on (posting is
/// idempotent: what was charged stays charged once), or from the cursor when `since` is past
/// it; the cursor only ever moves forward, over runs read.
async fn dstack_pass(
    app: &App,
    collector: &Collector,
    client: &DstackClient,
    account: &str,
    user_accounts: &HashMap<String, String>,
    since: Option<i64>,
) -> anyhow::Result<PassSummary> {
    let key = cursor_key(&collector.cluster);
    let mut cursor: DstackCursor = match app.ledger.get_cursor(&key).await? {
        Some(text) => serde_json::from_str(&text)
            .with_context(|| format!("cursor of {}", collector.cluster))?,
        None => DstackCursor::default(),
    };
    let mut summary = PassSummary {
        cluster: collector.cluster.clone(),
        ..PassSummary::default()
    };
    let payer = Payer {
        cluster: &collector.cluster,
        source: format!("dstack:{}", collector.cluster),
        account,
        user_accounts,
    };
    // From `since`, or from the cursor when that is earlier: the cursor only ever moves over
    // runs read, so a `since` past it starts where it stands.
    let mut position = match since {
        Some(at) => {
            let from = RunCursor::before(
                DateTime::<Utc>::from_timestamp(at, 0)
                    .ok_or_else(|| anyhow!("--since {at} is out of range"))?,
            );
            match &cursor.runs {
                Some(stored) if from.is_past(stored) => Some(stored.clone()),
                _ => Some(from),
            }
        }
        None => cursor.runs.clone(),
    };
    // New runs, page by page; the cursor moves after each page is posted.
    loop {
        let runs = position.clone();
        let page = with_retries(
            collector,
            "dstack",
            |_| client.fetch_since(runs.clone(), 1),
            |e| e.is_retryable(),
        )
        .await?;
        post_runs(
            app,
            &payer,
            page.records,
            page.quarantined,
            &page.runs,
            &mut summary,
        )
        .await?;
        cursor.unfinished.extend(page.unfinished_run_ids);
        position = page.next_cursor;
        let ahead = match (&position, &cursor.runs) {
            (Some(p), Some(stored)) => p.is_past(stored),
            (p, None) => p.is_some(),
            (None, Some(_)) => false,
        };
        if ahead {
            cursor.runs = position.clone();
        }
        app.ledger
            .set_cursor(&key, &serde_json::to_string(&cursor)?)
            .await?;
        summary.windows += 1;
        if !page.more {
            break;
        }
    }
    // Runs known to be unfinished: re-read until they finish, however long ago they started.
    if !cursor.unfinished.is_empty() {
        let ids: Vec<String> = cursor.unfinished.iter().cloned().collect();
        let refreshed = with_retries(
            collector,
            "dstack",
            |_| client.refresh_runs(&ids),
            |e| e.is_retryable(),
        )
        .await?;
        let (records, quarantined) = (refreshed.records, refreshed.quarantined);
        post_runs(
            app,
            &payer,
            records,
            quarantined,
            &refreshed.runs,
            &mut summary,
        )
        .await?;
        cursor.unfinished = refreshed.still_unfinished.into_iter().collect();
        app.ledger
            .set_cursor(&key, &serde_json::to_string(&cursor)?)
            .await?;
    }
    Ok(summary)
}

/// Who pays for a dstack cluster's runs (see [`charge_to`]), and where its records come from.
struct Payer<'a> {
    cluster: &'a str,
    source: String,
    account: &'a str,
    user_accounts: &'a HashMap<String, String>,
}

/// Posts the records (and quarantined ones) read with `runs`, a page of the runs list or the
/// unfinished runs read again: charged to who pays, with the zero records of submissions
/// that never ran, each a part of its job.
async fn post_runs(
    app: &App,
    payer: &Payer<'_>,
    records: Vec<UsageRecord>,
    quarantined: Vec<RawQuarantine>,
    runs: &[RunSummary],
    summary: &mut PassSummary,
) -> anyhow::Result<()> {
    let jobs = bursar_jobs(app, payer.cluster, runs).await?;
    let (mut records, parts) = charge_to(records, runs, &jobs, payer.account, payer.user_accounts);
    records.extend(never_provisioned(app, payer.cluster, runs, &jobs, &records).await?);
    // Before posting: a part without its charge yet adds nothing to a job's view.
    app.ledger.record_job_parts(&parts).await?;
    let going = going_on(runs);
    post(
        app,
        payer.cluster,
        &payer.source,
        records,
        going,
        quarantined,
        summary,
    )
    .await
}

/// The submissions of the runs that are not finished. A submission that ended while its run
/// goes on (dstack retries after a lost spot instance or a failure, under a new submission)
/// does not end the job: its record is posted as not final, so it keeps the run's hold (or
/// its job that holds nothing) rather than settling it, and the run's records settle it when
/// the run ends, re-read then as final.
fn going_on(runs: &[RunSummary]) -> HashSet<String> {
    runs.iter()
        .filter(|run| !run.finished)
        .flat_map(|run| run.submission_ids.iter().cloned())
        .collect()
}

/// The jobs bursar submitted under the names of `runs` (one read for a page of runs), once
/// every job admission has answered is recorded.
async fn bursar_jobs(app: &App, cluster: &str, runs: &[RunSummary]) -> anyhow::Result<Vec<ApiJob>> {
    let names: BTreeSet<String> = runs.iter().map(|run| run.run_name.clone()).collect();
    let names: Vec<String> = names.into_iter().collect();
    app.ledger.forwarded_settled().await;
    Ok(app.ledger.api_jobs_on(cluster, &names).await?)
}

/// Sets who pays for each dstack record: runs submitted through bursar (`jobs`, by
/// [`run_owner`]) are charged to the account (and user) that holds their money, whoever's
/// token dstack ran them under; other runs to their user's account in the configured mapping,
/// else `account`. `runs` are the runs the records were read with. Returns the records and,
/// for runs submitted through bursar, which of their jobs each record is a part of (every
/// submission of the run: [`JobPart`]).
fn charge_to(
    mut records: Vec<UsageRecord>,
    runs: &[RunSummary],
    jobs: &[ApiJob],
    account: &str,
    user_accounts: &HashMap<String, String>,
) -> (Vec<UsageRecord>, Vec<JobPart>) {
    let run_of: HashMap<&str, &RunSummary> = runs
        .iter()
        .flat_map(|run| run.submission_ids.iter().map(move |id| (id.as_str(), run)))
        .collect();
    let namesakes = by_run_name(jobs);
    let mut parts = Vec::new();
    for r in &mut records {
        let owner = run_of
            .get(r.job_id.as_str())
            .and_then(|run| run_owner(run, namesakes.get(run.run_name.as_str())?));
        if let Some(job) = owner {
            r.account = job.account.clone();
            r.user = job.user.clone();
            parts.push(JobPart {
                api_job_id: job.id,
                job_id: r.job_id.clone(),
                submit: r.submit,
            });
        } else {
            r.account = user_accounts
                .get(&r.user)
                .cloned()
                .unwrap_or_else(|| account.to_string());
        }
    }
    (records, parts)
}

/// The jobs bursar submitted, by the run name dstack knows each by.
fn by_run_name(jobs: &[ApiJob]) -> HashMap<&str, Vec<&ApiJob>> {
    let mut by_name: HashMap<&str, Vec<&ApiJob>> = HashMap::new();
    for job in jobs {
        if let Some(name) = job.cluster_job_id.as_deref() {
            by_name.entry(name).or_default().push(job);
        }
    }
    by_name
}

/// How a job bursar submitted under a dstack run's name matches that run. dstack lets a new
/// run take a finished run's name, so the name alone does not tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RunMatch {
    /// The run lists the job's first submission (`settle_ref`).
    Listed,
    /// The run was submitted this many seconds from the job, within [`SUBMIT_SKEW_SECS`], and
    /// cannot list the job's first submission: dstack deleted the run's first submissions
    /// (never placed, superseded by a retry for capacity), or the job was recorded before
    /// bursar kept its first submission.
    Near(i64),
}

/// How the job whose first submission is `first`, submitted at `submitted_at`, matches `run`;
/// `None`: the run is not the job's.
pub(crate) fn run_match(
    run: &RunSummary,
    first: Option<&str>,
    submitted_at: i64,
) -> Option<RunMatch> {
    if first.is_some_and(|first| run.submission_ids.iter().any(|id| id == first)) {
        return Some(RunMatch::Listed);
    }
    let lost_its_first = run.first_job_lowest.is_some_and(|n| n > 0);
    let apart = (submitted_at - run.submitted_at.timestamp()).abs();
    ((lost_its_first || first.is_none()) && apart <= SUBMIT_SKEW_SECS)
        .then_some(RunMatch::Near(apart))
}

/// The job bursar submitted as `run`, among the jobs it knows by the run's name: the best
/// [`run_match`], a listed first submission before the closest submit time.
fn run_owner<'j>(run: &RunSummary, namesakes: &[&'j ApiJob]) -> Option<&'j ApiJob> {
    namesakes
        .iter()
        .filter_map(|job| {
            Some((
                run_match(run, job.settle_ref.as_deref(), job.submitted_at)?,
                *job,
            ))
        })
        .min_by_key(|(matched, _)| *matched)
        .map(|(_, job)| job)
}

/// Final records, costing 0, for the submissions of finished runs that never got an instance
/// and that an active hold waits for (a run submitted through bursar that dstack could not
/// place, e.g. "no matching fleet"). dstack charges nothing for such a submission and the
/// collector makes no record of it, so without this its hold would never settle and would
/// stay held until it expires. The record is charged to the hold's account, as "never
/// started" (0), and posting it settles the hold like any final record. A run submitted
/// through bursar that holds nothing (an estimate of 0) gets one too, charged to its job's
/// account, so that its job settles rather than stays `held`. A submission quarantined as
/// unreadable gets none: it may have run.
///
/// The same goes for the submission a job's hold was linked to (the run's first) when it is no
/// longer in the finished run: dstack 0.22.5 deletes the submissions of a run retrying for
/// capacity that never got an instance, all but the latest two
/// (`delete_superseded_no_capacity_job_submissions`); the job is the run's by
/// [`run_owner`]. Not when some submission of the run could not be read: the missing one may
/// be it. The records are charged to the job's account
/// and user, as `charge_to` charges the run's others.
async fn never_provisioned(
    app: &App,
    cluster: &str,
    runs: &[RunSummary],
    jobs: &[ApiJob],
    records: &[UsageRecord],
) -> anyhow::Result<Vec<UsageRecord>> {
    let finished: Vec<&RunSummary> = runs.iter().filter(|run| run.finished).collect();
    if finished.is_empty() {
        return Ok(Vec::new());
    }
    let recorded: BTreeSet<&str> = records.iter().map(|r| r.job_id.as_str()).collect();
    let mut candidates: Vec<(&RunSummary, &String)> = finished
        .iter()
        .flat_map(|run| run.never_placed.iter().map(move |id| (*run, id)))
        .filter(|(_, id)| !recorded.contains(id.as_str()))
        .collect();
    let namesakes = by_run_name(jobs);
    for run in finished.iter().filter(|run| run.unreadable == 0) {
        // The job bursar submitted as this run, if still waiting for it.
        let Some(job) = namesakes
            .get(run.run_name.as_str())
            .and_then(|jobs| run_owner(run, jobs))
            .filter(|job| job.state == "held")
        else {
            continue;
        };
        let Some(settle_ref) = &job.settle_ref else {
            continue;
        };
        if !run.submission_ids.contains(settle_ref) && !recorded.contains(settle_ref.as_str()) {
            candidates.push((*run, settle_ref));
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Who pays: the job still waiting under that submission; for jobs recorded before bursar
    // kept their settle id, the active hold linked to it.
    let mut payers: HashMap<String, (String, Option<String>)> = jobs
        .iter()
        .filter(|j| j.state == "held")
        .filter_map(|j| {
            Some((
                j.settle_ref.clone()?,
                (j.account.clone(), Some(j.user.clone())),
            ))
        })
        .collect();
    if candidates.iter().any(|(_, id)| !payers.contains_key(*id)) {
        for hold in app.ledger.holds(true).await? {
            if let (true, Some(job_ref)) = (hold.cluster == cluster, hold.job_ref) {
                payers.entry(job_ref).or_insert((hold.account, None));
            }
        }
    }
    let mut synthetic = Vec::new();
    for (run, submission_id) in candidates {
        let Some((account, user)) = payers.get(submission_id) else {
            continue;
        };
        let state = match run.status.as_str() {
            "done" => JobState::Completed,
            "terminated" => JobState::Cancelled,
            _ => JobState::Failed,
        };
        synthetic.push(UsageRecord {
            cluster: cluster.to_string(),
            job_id: submission_id.clone(),
            display_id: run.run_name.clone(),
            submit: run.submitted_at.timestamp(),
            start: None,
            end: None,
            account: account.clone(),
            user: user.clone().unwrap_or_else(|| run.user.clone()),
            partition: None,
            qos: None,
            state,
            elapsed_us: 0,
            alloc: Default::default(),
            time_limit_min: None,
            job_name: Some(run.run_name.clone()),
            price_per_hour_micros: None,
            blocks: None,
        });
    }
    Ok(synthetic)
}

/// Prices and posts one fetched batch, the records of `going_on` as not final ([`Pricer`]);
/// what can't be priced joins the quarantine.
async fn post(
    app: &App,
    cluster: &str,
    source: &str,
    records: Vec<UsageRecord>,
    going_on: HashSet<String>,
    quarantined: Vec<RawQuarantine>,
    summary: &mut PassSummary,
) -> anyhow::Result<()> {
    let prices = app.price_book();
    let mut pricer = Pricer {
        pricing: &app.pricing,
        prices: &prices,
        amounts: HashMap::new(),
        going_on,
    };
    let mut items: Vec<QuarantineItem> = quarantined
        .into_iter()
        .map(|q| QuarantineItem {
            source: source.to_string(),
            line: None,
            reason: q.reason,
            raw: q.raw,
        })
        .collect();
    let mut charges = Vec::with_capacity(records.len());
    for mut record in records {
        // The cluster is bursar's name for it, whatever the source printed.
        record.cluster = cluster.to_string();
        match pricer.price(&record) {
            Ok(charge) => charges.push(charge),
            Err(reason) => items.push(QuarantineItem {
                source: source.to_string(),
                line: None,
                reason,
                raw: describe(&record),
            }),
        }
    }
    summary.records += charges.len() as u64;
    if !items.is_empty() {
        // Counted once: a record read again (the overlap, a job in several slices) is already
        // in quarantine.
        summary.quarantined += app
            .ledger
            .quarantine_add(&items)
            .await
            .context("recording quarantined records")?;
    }
    for chunk in charges.chunks(crate::import::BATCH) {
        let outcome = app
            .ledger
            .post_usage(chunk, now())
            .await
            .context("posting charges")?;
        summary.charged += outcome.charged;
        summary.adjusted += outcome.adjusted;
        summary.unchanged += outcome.unchanged;
        summary.settled_holds += outcome.settled_holds;
        summary.created_accounts.extend(outcome.created_accounts);
    }
    Ok(())
}

/// Calls `call` up to `collector.attempts` times, waiting 1 s, 2 s, 4 s… (±50 % jitter)
/// between retryable failures.
async fn with_retries<T, E, F, Fut>(
    collector: &Collector,
    what: &str,
    mut call: F,
    retryable: impl Fn(&E) -> bool,
) -> anyhow::Result<T>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut attempt = 1;
    loop {
        match call(attempt).await {
            Ok(value) => return Ok(value),
            Err(e) if attempt < collector.attempts && retryable(&e) => {
                let delay = backoff(attempt);
                tracing::warn!(cluster = %collector.cluster, "{what} failed (attempt {attempt}): {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("{what} for cluster {}", collector.cluster)));
            }
        }
    }
}

/// Exponential backoff with ±50 % jitter, capped at a minute.
pub fn backoff(attempt: u32) -> Duration {
    let base_ms = 1000u64
        .saturating_mul(1 << attempt.saturating_sub(1).min(6))
        .min(60_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = u64::from(nanos) % base_ms; // 0..base
    Duration::from_millis(base_ms / 2 + jitter)
}

/// Runs the collection loop for every collecting cluster until `shutdown` resolves: each cluster
/// on its own task and schedule, so one failing or slow cluster never stalls the others.
/// With `admission` (`bursar serve`), each pass first waits until every job admission has
/// answered is recorded with its cluster job id, so that the final usage of a job finds
/// the hold it settles.
pub async fn collect_loop(
    app: Arc<App>,
    collectors: Vec<Collector>,
    admission: Option<Arc<dyn crate::server::AdmissionApi>>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for collector in collectors {
        let app = app.clone();
        let admission = admission.clone();
        tasks.spawn(async move {
            loop {
                let started = std::time::Instant::now();
                if let Some(admission) = &admission {
                    admission.settled().await;
                }
                match run_pass(&app, &collector, PassWindow::default(), &|_, _, _| {}).await {
                    Ok(s) => {
                        tracing::info!(
                            cluster = %s.cluster,
                            records = s.records,
                            charged = s.charged,
                            adjusted = s.adjusted,
                            quarantined = s.quarantined,
                            "collection pass done in {:?}",
                            started.elapsed()
                        );
                        crate::enforce::after_collection(&app).await;
                        crate::alerts::after_collection(&app).await;
                        // A job the pass saw end NODE_FAIL or PREEMPTED may run again: its
                        // hold settles only once its cluster says it will not.
                        if let (Some(admission), true) = (&admission, s.records > 0) {
                            admission
                                .settle_not_rerun(Some(&collector.cluster), now())
                                .await;
                        }
                    }
                    Err(e) => tracing::error!(cluster = %collector.cluster, "collection pass failed: {e:#}"),
                }
                let jitter = backoff(1).as_millis() as u64 % 5_000;
                tokio::time::sleep(collector.interval + Duration::from_millis(jitter)).await;
            }
        });
    }
    shutdown.await;
    tasks.abort_all();
    Ok(())
}

/// `collected until` as a person reads it, and the lag behind now.
pub fn describe_lag(until: Option<i64>) -> (String, String) {
    match until {
        Some(u) => (format_instant(u), crate::timefmt::format_age(now() - u)),
        None => ("-".into(), "-".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::{narrowed, next_slice, Window, RECORDS_PER_CALL};

    const HOUR: i64 = 3_600;

    #[test]
    fn dense_slices_shrink_to_the_records_a_call_should_bring() {
        // 10,000 new jobs in an hour: a tenth of an hour holds a call's worth.
        assert_eq!(
            next_slice(HOUR, HOUR, 10 * RECORDS_PER_CALL, HOUR),
            HOUR / 10
        );
        // A burst in a short cut-off slice is judged by that slice's own length.
        assert_eq!(next_slice(HOUR, 60, 4 * RECORDS_PER_CALL, HOUR), 15);
        // Never below a second, whatever the density.
        assert_eq!(next_slice(1, 1, 1_000_000, HOUR), 1);
    }

    #[test]
    fn retries_ask_for_a_quarter_of_the_window_each_time() {
        let w = Window::new(1_000, 1_000 + HOUR);
        assert_eq!(narrowed(w, 1), w);
        assert_eq!(narrowed(w, 2), Window::new(1_000, 1_900));
        assert_eq!(narrowed(w, 3), Window::new(1_000, 1_225));
        assert_eq!(narrowed(Window::new(5, 7), 9), Window::new(5, 6));
        assert_eq!(narrowed(w, 40), Window::new(1_000, 1_001));
    }

    #[test]
    fn sparse_slices_grow_back_up_to_the_configured_slice() {
        assert_eq!(next_slice(60, 60, 10, HOUR), 120);
        assert_eq!(next_slice(2_000, 2_000, 0, HOUR), HOUR);
        // The short last slice of a window does not shorten what was planned.
        assert_eq!(next_slice(HOUR, 300, 3, HOUR), HOUR);
        // Between a quarter and all of a call's worth: kept.
        assert_eq!(next_slice(600, 600, RECORDS_PER_CALL / 2, HOUR), 600);
    }
}
