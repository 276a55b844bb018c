//! Admission: quote every cluster, route, hold the estimate, forward the job as its user, and
//! report jobs until their usage settles them. The logic behind `POST /v1/quotes` and
//! `/v1/jobs*`; HTTP lives in `server`.
//!
//! - [`Admission`]: the service. [`Admission::quote`], [`Admission::submit`],
//!   [`Admission::jobs`], [`Admission::job`], [`Admission::cancel`].
//! - [`quote`]: one cluster's eligibility (partition, job kind, GPU type, node and time
//!   limits, forwarding), estimate and balances after — pure.
//! - [`route`]: the order clusters are tried in and the explanation of the decision — pure.
//! - [`forward`]: the [`Forwarder`] seam with its slurmrestd and dstack implementations.
//! - `api`: [`Admission`] as the HTTP server's `AdmissionApi` (JSON bodies, `ApiError`s).
//!
//! ## Rules
//!
//! - **Who may charge what.** The caller's own user must be associated with the account
//!   (the request's, else the user's default) — admins and finance too: a job always runs as,
//!   and charges for, the caller. Jobs are listed to their owner; finance and admin see all.
//!   Only the owner or an admin cancels.
//! - **Estimate = charge.** The hold is `ClusterPricing::estimate` of the request's resource
//!   vector ([`JobRequest::alloc_with_defaults`] with the partition's `def_mem_per_cpu_mb`,
//!   `def_mem_per_gpu_mb` and `def_cpu_per_gpu`)
//!   over the time limit the job is forwarded with (the request's, else the partition's
//!   `default_time`, else its `max_time`), from `now`: the code that prices the charge.
//! - **No overspending.** The quote's balances are a preview; the decision is
//!   [`bursar_ledger::Ledger::admit_queued`], which checks the account and every ancestor,
//!   places the hold and records the job in one serialized transaction. Concurrent
//!   submissions are group-committed by the ledger's admission writer: one transaction takes
//!   every submission queued meanwhile and decides them one after the other, as separate
//!   transactions would. A submission that
//!   loses the race for the last of an allocation tries the next cluster of its route, else
//!   gets a 402.
//! - **Nothing left behind.** The hold is placed (with the job's record) before forwarding
//!   and released when forwarding fails; the work runs in its own task, so a client that
//!   hangs up does not cut it short between hold and forwarding.
//! - **Closed accounts.** An account that is closed, or under a closed one, takes no new
//!   jobs: a submission is refused with 409 `account_closed` (the admission writer refuses
//!   it in its transaction, held or not; one refused for other reasons first is refused as
//!   closed from the admission view, which names the nearest closed account of the chain),
//!   and its quote has no eligible cluster, each giving the closure as a reason.
//! - **Idempotency.** A retry with the same `Idempotency-Key` (per user) and the same request
//!   gets the first 201 again; with another request, 409. A key whose first submission failed
//!   is spent (409): nothing was held, submit again with a new key.
//! - **Settlement.** The ledger settles a hold when the collector posts the final record of
//!   the job the hold is linked to (Slurm's job id; dstack's first job submission id). A job's
//!   `state` is read from its hold (active → `held`, settled → `settled`, released →
//!   `cancelled`, expired → `expired`) and its `charge` is the sum of the journal's usage
//!   entries (charge, adjustments, refunds) for that cluster job id.

mod api;
pub mod forward;
pub mod quote;
pub mod route;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bursar_ledger::{
    AdmitOutcome, ApiJob, ApiJobsPage, ForwardedJob, HoldRow, HoldState, JobPart, JobRow,
    LedgerError, NewAdmission, NewApiJob, NewHold, ViewRead, RERUN_STATES, SUBMIT_SKEW_SECS,
};
use bursar_pricing::{format_micros, Currency};
use serde_json::{json, Value};

use crate::app::App;
use crate::auth::{Principal, Role};
use crate::request::{ArraySpec, JobRequest, TimeLimit};
use crate::timefmt::{format_instant, now};

pub use forward::{ClusterStatus, ForwardError, ForwardJob, Forwarded, ForwardedRef, Forwarder};
pub use quote::{ClusterQuote, Funding};
pub use route::{Explanation, OrderSource, Route, RouteOrder};

/// Longest `Idempotency-Key` accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 200;

/// Why admission refused, as the API reports it (`status`, `code`, `message`, `details`).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// 422 `invalid_request`: the request makes no sense, or fits no cluster
    /// (`details.clusters[] = {cluster, reasons}`).
    #[error("{message}")]
    Invalid { message: String, details: Value },
    /// 403 `no_association`.
    #[error("user {user} is not associated with account {account}")]
    NoAssociation { user: String, account: String },
    /// 403 `forbidden`.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// 409 `conflict`.
    #[error("{0}")]
    Conflict(String),
    /// 409 `account_closed`: the account charged, or `closed`, its nearest closed ancestor,
    /// is closed and takes no new jobs (`details = {account, closed}`).
    #[error("account {account} is closed{}: it takes no new jobs", closed_by(.account, .closed))]
    AccountClosed { account: String, closed: String },
    /// 402 `insufficient_allocation`: `details.clusters[] = {cluster, account, currency,
    /// estimate, remaining}`.
    #[error("{message}")]
    InsufficientAllocation { message: String, details: Value },
    /// 502 `upstream_refused`: the cluster refused the job (the hold was released).
    #[error("{0}")]
    UpstreamRefused(String),
    /// 503 `upstream_unavailable`: the cluster could not be reached (the hold was released).
    #[error("{0}")]
    UpstreamUnavailable(String),
    /// 500: the ledger or the server failed; the detail is for the log.
    #[error("internal error: {0}")]
    Internal(String),
}

impl AdmissionError {
    fn invalid(message: impl Into<String>) -> AdmissionError {
        AdmissionError::Invalid {
            message: message.into(),
            details: json!({}),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            AdmissionError::Invalid { .. } => 422,
            AdmissionError::NoAssociation { .. } | AdmissionError::Forbidden(_) => 403,
            AdmissionError::NotFound(_) => 404,
            AdmissionError::Conflict(_) | AdmissionError::AccountClosed { .. } => 409,
            AdmissionError::InsufficientAllocation { .. } => 402,
            AdmissionError::UpstreamRefused(_) => 502,
            AdmissionError::UpstreamUnavailable(_) => 503,
            AdmissionError::Internal(_) => 500,
        }
    }

    /// The stable error code of `docs/api.md`.
    pub fn code(&self) -> &'static str {
        match self {
            AdmissionError::Invalid { .. } => "invalid_request",
            AdmissionError::NoAssociation { .. } => "no_association",
            AdmissionError::Forbidden(_) => "forbidden",
            AdmissionError::NotFound(_) => "not_found",
            AdmissionError::Conflict(_) => "conflict",
            AdmissionError::AccountClosed { .. } => "account_closed",
            AdmissionError::InsufficientAllocation { .. } => "insufficient_allocation",
            AdmissionError::UpstreamRefused(_) => "upstream_refused",
            AdmissionError::UpstreamUnavailable(_) => "upstream_unavailable",
            AdmissionError::Internal(_) => "internal",
        }
    }

    /// The `details` object (`{}` when there is nothing to add).
    pub fn details(&self) -> Value {
        match self {
            AdmissionError::Invalid { details, .. }
            | AdmissionError::InsufficientAllocation { details, .. } => details.clone(),
            AdmissionError::NoAssociation { user, account } => {
                json!({"user": user, "account": account})
            }
            AdmissionError::AccountClosed { account, closed } => {
                json!({"account": account, "closed": closed})
            }
            _ => json!({}),
        }
    }
}

impl From<LedgerError> for AdmissionError {
    fn from(e: LedgerError) -> AdmissionError {
        match e {
            LedgerError::NotFound { .. } => AdmissionError::NotFound(e.to_string()),
            LedgerError::AccountClosed { account, closed_by } => AdmissionError::AccountClosed {
                closed: closed_by.unwrap_or_else(|| account.clone()),
                account,
            },
            other => AdmissionError::Internal(other.to_string()),
        }
    }
}

/// ` (its ancestor org is)` when the closed account is not the one charged.
fn closed_by(account: &str, closed: &str) -> String {
    if account == closed {
        String::new()
    } else {
        format!(" (its ancestor {closed} is)")
    }
}

type Result<T, E = AdmissionError> = std::result::Result<T, E>;

/// Which jobs to list; every filter given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQuery {
    pub user: Option<String>,
    pub account: Option<String>,
    /// `held`, `settled`, `cancelled`, `expired`, `failed`.
    pub state: Option<String>,
    /// Only jobs with a smaller id (the `next_before` of the page before).
    pub before: Option<i64>,
    /// The most jobs listed: the newest that match ([`crate::output::page_limit`]).
    pub limit: Option<u32>,
}

/// A page of listed jobs.
#[derive(Debug, Clone)]
pub struct JobsPage {
    /// Oldest first.
    pub jobs: Vec<JobView>,
    /// When older jobs may match too: the `before` that lists them.
    pub next_before: Option<i64>,
}

/// The quote of every cluster for one request.
#[derive(Debug, Clone)]
pub struct Quote {
    pub user: String,
    pub account: String,
    /// The account, its parent, …, `root`.
    pub chain: Vec<String>,
    /// The nearest closed account on `chain`, if any: the account takes no new jobs.
    pub closed: Option<String>,
    pub order: RouteOrder,
    /// Every cluster quoted, in route order.
    pub clusters: Vec<ClusterQuote>,
}

impl Quote {
    pub fn cluster(&self, name: &str) -> Option<&ClusterQuote> {
        self.clusters.iter().find(|q| q.cluster == name)
    }

    /// Where the job would go now, and why: the first eligible cluster in route order.
    pub fn preview(&self) -> Route {
        let mut explanation = Explanation::new(&self.order);
        for q in &self.clusters {
            if q.eligible() {
                explanation.choose(&q.cluster, chosen_reason(q, &q.remaining_after));
                break;
            }
            explanation.skip(&q.cluster, q.all_reasons(&self.account).join("; "));
        }
        explanation.finish()
    }

    /// The body of `POST /v1/quotes`: one object per cluster in route order (see
    /// [`ClusterQuote::to_json`]), `"chosen": true` on the one a submission would go to now.
    pub fn to_json(&self) -> Value {
        let chosen = self.clusters.iter().position(ClusterQuote::eligible);
        Value::Array(
            self.clusters
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let mut entry = q.to_json(&self.account);
                    entry["chosen"] = Value::Bool(Some(i) == chosen);
                    entry
                })
                .collect(),
        )
    }
}

/// `estimate 2.00 su; physics has 8.00 su left after it`: the account of `remaining_after`
/// (account, what it has left after the job) with the least left, the nearest among equals.
fn chosen_reason(q: &ClusterQuote, remaining_after: &[(String, i64)]) -> String {
    let estimate = q.amount_with_unit(q.estimate.unwrap_or(0));
    match remaining_after.iter().min_by_key(|(_, r)| *r) {
        Some((account, after)) => format!(
            "estimate {estimate}; {account} has {} left after it",
            q.amount_with_unit(*after)
        ),
        None => format!("estimate {estimate}"),
    }
}

/// The 201 answer of `POST /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub id: i64,
    pub cluster: String,
    pub cluster_job_id: String,
    pub currency: String,
    pub estimate: i64,
    pub hold_id: Option<i64>,
    pub route: Route,
    decimals: u8,
}

impl Submitted {
    /// `{id, cluster, cluster_job_id, currency, hold, hold_id, estimate, route}`; `hold` is the
    /// amount held (the estimate).
    pub fn to_json(&self) -> Value {
        let amount = format_micros(self.estimate, self.decimals);
        json!({
            "id": self.id,
            "cluster": self.cluster,
            "cluster_job_id": self.cluster_job_id,
            "currency": self.currency,
            "hold": amount,
            "hold_id": self.hold_id,
            "estimate": amount,
            "route": self.route,
        })
    }
}

/// A job submitted through the API, with its state and charge read from the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub job: ApiJob,
    /// `held`, `settled`, `cancelled`, `expired` or `failed`.
    pub state: String,
    /// Micros still held for it.
    pub held: i64,
    /// When that hold lapses unless more is heard of the job; `None` once nothing is held.
    pub hold_expires_at: Option<i64>,
    /// The sum of its usage entries, when any were posted.
    pub charge: Option<i64>,
    pub settled_at: Option<i64>,
    decimals: u8,
}

impl JobView {
    /// `{id, user, account, cluster, cluster_job_id, state, currency, estimate, hold, hold_id,
    /// hold_expires_at, charge, submitted_at, settled_at}`.
    pub fn to_json(&self) -> Value {
        let amount = |m: i64| format_micros(m, self.decimals);
        json!({
            "id": self.job.id,
            "user": self.job.user,
            "account": self.job.account,
            "cluster": self.job.cluster,
            "cluster_job_id": self.job.cluster_job_id,
            "state": self.state,
            "currency": self.job.currency.as_str(),
            "estimate": amount(self.job.estimate),
            "hold": amount(self.held),
            "hold_id": self.job.hold_id,
            "hold_expires_at": self.hold_expires_at.map(format_instant),
            "charge": self.charge.map(amount),
            "submitted_at": format_instant(self.job.submitted_at),
            "settled_at": self.settled_at.map(format_instant),
        })
    }
}

/// A forwarder's failure as the API answers it: 502 `upstream_refused` with `refused`, 503
/// `upstream_unavailable` with `unreachable`, each followed by the cluster's words.
fn upstream_error(e: ForwardError, refused: String, unreachable: String) -> AdmissionError {
    match e {
        ForwardError::Refused(m) => AdmissionError::UpstreamRefused(format!("{refused}: {m}")),
        ForwardError::Unavailable(m) => {
            AdmissionError::UpstreamUnavailable(format!("{unreachable}: {m}"))
        }
    }
}

/// A job as its cluster reports it now ([`Admission::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    pub id: i64,
    pub cluster: String,
    pub cluster_job_id: String,
    pub status: ClusterStatus,
}

impl JobStatus {
    /// `{id, cluster, cluster_job_id, known, finished, states, exit_code}`.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "cluster": self.cluster,
            "cluster_job_id": self.cluster_job_id,
            "known": !self.status.states.is_empty(),
            "finished": self.status.finished,
            "states": self.status.states,
            "exit_code": self.status.exit_code,
        })
    }
}

/// Random bytes as lowercase hex (`2 × bytes` characters).
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if getrandom::getrandom(&mut buf).is_err() {
        // No OS randomness: fall back to the clock and a counter, unique within this process.
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let seed = format!(
            "{:?}{}",
            std::time::SystemTime::now(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let hash = blake3::hash(seed.as_bytes());
        buf.iter_mut()
            .zip(hash.as_bytes().iter().cycle())
            .for_each(|(b, h)| *b = *h);
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A unique key whose text sorts by creation time: `api:`, the clock in microseconds since
/// the epoch (16 hex digits), then 8 random bytes. Keys of a burst of submissions land next
/// to each other at the end of the holds' key index instead of on as many random pages of it
/// (a random key dirtied one index page per submission, written again to the WAL by every
/// commit).
pub(crate) fn time_ordered_key() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!(
        "api:{:016x}{}",
        micros & u128::from(u64::MAX),
        random_hex(8)
    )
}

/// The admission service. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    app: Arc<App>,
    forwarders: BTreeMap<String, Arc<dyn Forwarder>>,
    grace: Duration,
}

impl Admission {
    /// Keeps a lifetime longer each hold due to expire at `now` whose job its cluster says
    /// still waits: slurmdbd reports no held job, so the collector cannot keep its hold alive.
    /// A cluster that cannot be asked leaves the hold to expire; one that is down or too slow
    /// is not asked again in this call. Returns how many were kept.
    pub async fn keep_waiting(&self, now: i64) -> u64 {
        let holds = match self.inner.app.ledger.holds_due(now).await {
            Ok(holds) => holds,
            Err(e) => {
                tracing::error!("listing holds to expire: {e}");
                return 0;
            }
        };
        let names = self.cluster_job_ids(&holds).await;
        let mut unreachable = BTreeSet::new();
        let mut kept = 0;
        for hold in &holds {
            let (Some(job), Some(forwarder)) = (
                hold.job_ref.as_deref(),
                self.inner.forwarders.get(&hold.cluster),
            ) else {
                continue;
            };
            if unreachable.contains(&hold.cluster) {
                continue;
            }
            let asked = ForwardedRef {
                cluster_job_id: names.get(&hold.id).map(String::as_str),
                settle_ref: job,
                submitted_at: hold.placed_at,
            };
            match forwarder.still_waiting(asked).await {
                Ok(true) => match self.inner.app.ledger.extend_hold(hold.id, now).await {
                    Ok(true) => {
                        kept += 1;
                        tracing::info!(hold = hold.id, cluster = %hold.cluster, job,
                            "hold kept: its job still waits on the cluster");
                    }
                    Ok(false) => {}
                    Err(e) => tracing::error!(hold = hold.id, "keeping a hold: {e}"),
                },
                Ok(false) => {}
                Err(e) => {
                    if matches!(e, ForwardError::Unavailable(_)) {
                        unreachable.insert(hold.cluster.clone());
                    }
                    tracing::warn!(hold = hold.id, cluster = %hold.cluster, job,
                        "cannot ask whether the job still waits; its hold expires: {e}");
                }
            }
        }
        kept
    }

    /// What each hold's cluster knows its job by ([`Forwarded::cluster_job_id`]: a dstack
    /// run's name), by hold id. Without it a dstack run cannot be asked about; a failed read
    /// is logged and leaves the holds without.
    async fn cluster_job_ids(&self, holds: &[HoldRow]) -> HashMap<i64, String> {
        let ids: Vec<i64> = holds.iter().map(|h| h.id).collect();
        match self.inner.app.ledger.api_jobs_holding(&ids).await {
            Ok(jobs) => jobs
                .into_iter()
                .filter_map(|j| Some((j.hold_id?, j.cluster_job_id?)))
                .collect(),
            Err(e) => {
                tracing::error!("reading the jobs of holds: {e}");
                HashMap::new()
            }
        }
    }
}

/// slurmctld's checks of `--deadline` at submission (`_part_access_check` in 24.11's
/// `job_mgr.c`), made at `now` so that the user hears them before anything is held; the time
/// limit's, which depends on the cluster, is the quote's.
fn check_deadline(request: &JobRequest, now: i64) -> Result<()> {
    let Some(deadline) = request.slurm.deadline else {
        return Ok(());
    };
    if deadline < now {
        return Err(AdmissionError::invalid(format!(
            "--deadline {} has passed",
            format_instant(deadline)
        )));
    }
    if let Some(min) = request.slurm.time_min {
        let earliest_end = request
            .earliest_start(now)
            .saturating_add(i64::try_from(min.saturating_mul(60)).unwrap_or(i64::MAX));
        if deadline < earliest_end {
            return Err(AdmissionError::invalid(format!(
                "--deadline {} comes before even --time-min {} could end",
                format_instant(deadline),
                TimeLimit::Minutes(min)
            )));
        }
    }
    Ok(())
}

/// Why a hold is settled once its job's cluster says a job it logged as ended `NODE_FAIL` or
/// `PREEMPTED` will not run again.
const NOT_RERUN_REASON: &str = "settled: the job's final usage was posted and its cluster \
     will not run it again";

impl Admission {
    /// Settles what waits on a job its cluster logged as ended in a state after which Slurm
    /// may run it again under the same id ([`bursar_ledger::RERUN_STATES`]: requeued after a
    /// node failure or a preemption) — its hold, or a job that holds nothing — when the
    /// cluster says the job no longer waits to run: it ended for good, and its usage is
    /// posted. A job that waits keeps its hold: its next run is the job's, and its records
    /// settle or extend the hold as usual. Only `cluster`'s, when given (a collection pass).
    ///
    /// A cluster that is down or too slow is not asked again in this call, and asked next time;
    /// a hold whose lifetime has run out by `now` meanwhile is settled rather than left to
    /// expire (its final usage is posted), and a cluster bursar no longer forwards to cannot be
    /// asked: the record settles. Returns how many holds and jobs were settled.
    pub async fn settle_not_rerun(&self, cluster: Option<&str>, now: i64) -> u64 {
        let ledger = &self.inner.app.ledger;
        let ours = |c: &str| cluster.is_none_or(|wanted| wanted == c);
        let (holds, free) = match (
            ledger.holds_to_confirm().await,
            ledger.free_jobs_to_confirm().await,
        ) {
            (Ok(holds), Ok(free)) => (holds, free),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!("listing jobs that may run again: {e}");
                return 0;
            }
        };
        let holds: Vec<HoldRow> = holds.into_iter().filter(|h| ours(&h.cluster)).collect();
        let names = self.cluster_job_ids(&holds).await;
        let mut unreachable = BTreeSet::new();
        let mut settled = 0;
        for hold in &holds {
            let Some(job) = hold.job_ref.as_deref() else {
                continue;
            };
            let due = hold.expires_at <= now;
            let asked = ForwardedRef {
                cluster_job_id: names.get(&hold.id).map(String::as_str),
                settle_ref: job,
                submitted_at: hold.placed_at,
            };
            match self
                .runs_again(&hold.cluster, asked, &mut unreachable)
                .await
            {
                Some(false) => {}
                None if due => {}
                Some(true) | None => continue,
            }
            match ledger.settle_hold(hold.id, NOT_RERUN_REASON, now).await {
                Ok(true) => {
                    settled += 1;
                    tracing::info!(hold = hold.id, cluster = %hold.cluster, job,
                        "hold settled: its job ended and will not run again");
                }
                Ok(false) => {}
                Err(e) => tracing::error!(hold = hold.id, "settling a hold: {e}"),
            }
        }
        for job in free.iter().filter(|j| ours(&j.cluster)) {
            let Some(id) = job.settle_ref.as_deref().or(job.cluster_job_id.as_deref()) else {
                continue;
            };
            let asked = ForwardedRef {
                cluster_job_id: job.cluster_job_id.as_deref(),
                settle_ref: id,
                submitted_at: job.submitted_at,
            };
            if self.runs_again(&job.cluster, asked, &mut unreachable).await != Some(false) {
                continue;
            }
            match ledger.settle_free_job(job.id, now).await {
                Ok(true) => {
                    settled += 1;
                    tracing::info!(job = job.id, cluster = %job.cluster, cluster_job = id,
                        "job settled: it ended and will not run again");
                }
                Ok(false) => {}
                Err(e) => tracing::error!(job = job.id, "settling a job: {e}"),
            }
        }
        settled
    }

    /// Whether the cluster will run `job` again: `Some(true)` while it waits
    /// there, `Some(false)` when it is gone or ended (or no forwarder can ask: the record is
    /// all there is), `None` when it cannot tell now: the cluster is down or too slow (noted
    /// in `unreachable`, and not asked again) or refused the question.
    async fn runs_again(
        &self,
        cluster: &str,
        job: ForwardedRef<'_>,
        unreachable: &mut BTreeSet<String>,
    ) -> Option<bool> {
        if unreachable.contains(cluster) {
            return None;
        }
        let Some(forwarder) = self.inner.forwarders.get(cluster) else {
            return Some(false);
        };
        match forwarder.still_waiting(job).await {
            Ok(waiting) => {
                if waiting {
                    tracing::debug!(
                        cluster,
                        job = job.settle_ref,
                        "its job waits to run again: kept"
                    );
                }
                Some(waiting)
            }
            Err(e) => {
                // Down or slow: not asked again this time. Refused: only this job's answer.
                if matches!(e, ForwardError::Unavailable(_)) {
                    unreachable.insert(cluster.to_string());
                }
                tracing::warn!(cluster, job = job.settle_ref,
                    "cannot ask whether a job that ended NODE_FAIL or PREEMPTED runs again; asking next time: {e}");
                None
            }
        }
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field(
                "forwarders",
                &self.inner.forwarders.keys().collect::<Vec<_>>(),
            )
            .field("grace", &self.inner.grace)
            .finish()
    }
}

/// A job that passed admission: its quote, the cluster chosen, its record (state `held`,
/// with the hold placed for it; none for an estimate of 0) and the route taken.
struct Admitted {
    quote: Quote,
    chosen: ClusterQuote,
    job: ApiJob,
    route: Route,
    /// The route to record in place of the one written at admission, when the ledger left
    /// other balances than the quote saw.
    route_json: Option<String>,
}

/// How admission ended when it did not refuse.
enum Admit {
    Admitted(Box<Admitted>),
    /// The `Idempotency-Key` was used before: that submission's answer.
    Replay(Box<ApiJob>),
}

impl Admission {
    /// The service over `app`, forwarding through `forwarders` (cluster name → forwarder;
    /// clusters without one are quoted as not eligible). Holds expire `time limit +
    /// holds.grace` after they are placed.
    pub fn new(app: Arc<App>, forwarders: BTreeMap<String, Arc<dyn Forwarder>>) -> Admission {
        let grace = app.config.holds.grace();
        Admission {
            inner: Arc::new(Inner {
                app,
                forwarders,
                grace,
            }),
        }
    }

    /// The service with the forwarders the configuration describes
    /// ([`forward::forwarders_from_config`]).
    pub fn from_app(app: Arc<App>) -> anyhow::Result<Admission> {
        let forwarders = forward::forwarders_from_config(&app.config)?;
        Ok(Admission::new(app, forwarders))
    }

    pub fn app(&self) -> &App {
        &self.inner.app
    }

    /// Waits until every forwarded job answered so far is recorded in the ledger (`bursar
    /// serve` calls it before it exits).
    pub async fn settled(&self) {
        self.inner.app.ledger.forwarded_settled().await;
    }

    /// Has every forwarder learn what it checks requests against ([`Forwarder::prepare`]), in
    /// background tasks.
    pub fn prepare_forwarders(&self) {
        for forwarder in self.inner.forwarders.values() {
            let forwarder = forwarder.clone();
            tokio::spawn(async move { forwarder.prepare().await });
        }
    }

    /// Clusters that can take submissions (have a forwarder).
    pub fn forwarding_clusters(&self) -> Vec<String> {
        self.inner.forwarders.keys().cloned().collect()
    }

    // --- quote --------------------------------------------------------------------------------

    /// Quotes every configured cluster (only the pinned ones when the request pins some).
    /// When the account or an ancestor is closed no cluster is eligible, each saying why.
    pub async fn quote(&self, principal: &Principal, request: &JobRequest) -> Result<Quote> {
        let mut quote = self
            .quote_at(principal, request, now(), ViewRead::Preview)
            .await?;
        if let Some(closed) = quote.closed.clone() {
            let why = AdmissionError::AccountClosed {
                account: quote.account.clone(),
                closed,
            }
            .to_string();
            for q in &mut quote.clusters {
                q.reasons.push(why.clone());
            }
        }
        Ok(quote)
    }

    /// A `--begin` no further ahead than `holds.max_begin_ahead`: the hold counts against the
    /// allocation from now until the job has run.
    fn check_begin(&self, request: &JobRequest, at: i64) -> Result<()> {
        let Some(begin) = request.slurm.begin else {
            return Ok(());
        };
        let ahead = self.inner.app.config.holds.max_begin_ahead();
        let latest = at.saturating_add(i64::try_from(ahead.as_secs()).unwrap_or(i64::MAX));
        if begin > latest {
            return Err(AdmissionError::invalid(format!(
                "--begin {} is more than {} ahead, the most this site holds an allocation \
                 for a job that waits (holds.max_begin_ahead): submit it nearer the time",
                format_instant(begin),
                crate::timefmt::format_duration(ahead)
            )));
        }
        Ok(())
    }

    /// The quote at `at`, from balances as fresh as `read` asks (see [`ViewRead`]).
    async fn quote_at(
        &self,
        principal: &Principal,
        request: &JobRequest,
        at: i64,
        read: ViewRead,
    ) -> Result<Quote> {
        request
            .validate()
            .map_err(|e| AdmissionError::invalid(e.to_string()))?;
        check_deadline(request, at)?;
        self.check_begin(request, at)?;
        let app = &*self.inner.app;
        let config = &app.config;
        for cluster in &request.clusters {
            if !config.clusters.contains_key(cluster) {
                return Err(AdmissionError::invalid(format!(
                    "unknown cluster {cluster} (clusters: {})",
                    config
                        .clusters
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let (user, account) = (&principal.user, request.account.as_deref());
        let view = app
            .ledger
            .admission_view_as(user, account, at, read)
            .await?;
        let Some(account) = view.account else {
            return Err(AdmissionError::Forbidden(format!(
                "user {user} has no default account and the request names none; \
                 ask an admin to associate {user} with an account"
            )));
        };
        if !view.associated {
            return Err(AdmissionError::NoAssociation {
                user: user.clone(),
                account,
            });
        }
        let chain = view.chain;
        let balances = view.allocations;
        let order = route::route_order(config, &request.clusters, &chain);
        let prices = app.price_book();
        let ctx = quote::QuoteContext {
            config,
            pricing: &app.pricing,
            prices: &prices,
            forwarders: &self.inner.forwarders,
            request,
            chain: &chain,
            balances: &balances,
            now: at,
        };
        let clusters = order
            .clusters
            .iter()
            .filter_map(|name| {
                let cluster = config.clusters.get(name)?;
                Some(quote::quote_cluster(&ctx, name, cluster))
            })
            .collect();
        Ok(Quote {
            user: principal.user.clone(),
            account,
            chain,
            closed: view.closed,
            order,
            clusters,
        })
    }

    // --- submit -------------------------------------------------------------------------------

    /// Admits, routes, holds and forwards a job (see the module documentation). Runs in its
    /// own task: a caller that stops waiting does not stop it halfway.
    pub async fn submit(
        &self,
        principal: &Principal,
        request: JobRequest,
        idempotency_key: Option<String>,
    ) -> Result<Submitted> {
        let this = self.clone();
        let principal = principal.clone();
        tokio::spawn(async move {
            this.submit_inner(&principal, request, idempotency_key)
                .await
        })
        .await
        .map_err(|e| AdmissionError::Internal(format!("the submission task failed: {e}")))?
    }

    async fn submit_inner(
        &self,
        principal: &Principal,
        request: JobRequest,
        idempotency_key: Option<String>,
    ) -> Result<Submitted> {
        let at = now();
        request
            .validate()
            .map_err(|e| AdmissionError::invalid(e.to_string()))?;
        if request.batch_script().is_none() && request.dstack.is_none() {
            return Err(AdmissionError::invalid(
                "a job needs a script, a --wrap command or a dstack task",
            ));
        }
        let request_json = serde_json::to_string(&request)
            .map_err(|e| AdmissionError::Internal(format!("serializing the request: {e}")))?;
        let stored_key = match &idempotency_key {
            None => None,
            Some(k) if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_LEN => {
                return Err(AdmissionError::invalid(format!(
                    "the Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
                )))
            }
            // Keys are per user: user names have no spaces, so this cannot collide.
            Some(k) => Some(format!("{} {k}", principal.user)),
        };
        match self
            .admit(principal, &request, &request_json, stored_key, at)
            .await?
        {
            Admit::Admitted(admitted) => self.forward(principal, *admitted, request).await,
            Admit::Replay(job) => self.replay(&job, &request_json),
        }
    }

    /// Quotes, then holds the estimate and records the job on the first cluster in route
    /// order that fits and that the ledger lets it pay for; else the refusal (402 or 422).
    /// A used `Idempotency-Key` gives the submission it was used for instead.
    async fn admit(
        &self,
        principal: &Principal,
        request: &JobRequest,
        request_json: &str,
        stored_key: Option<String>,
        at: i64,
    ) -> Result<Admit> {
        // The admission view may predate holds placed since, which only lower what remains:
        // the ledger decides below. But a cluster passed over for money, or a caller refused
        // for want of an association, is looked at again with what the ledger says now, so
        // nothing is refused on an old view.
        let mut quote = self
            .quote_at(principal, request, at, ViewRead::Admission)
            .await;
        let stale = match &quote {
            Ok(q) => q.clusters.iter().any(ClusterQuote::blocked_by_money),
            Err(AdmissionError::NoAssociation { .. } | AdmissionError::Forbidden(_)) => true,
            Err(_) => false,
        };
        if stale {
            quote = self.quote_at(principal, request, at, ViewRead::Now).await;
        }
        let quote = match quote {
            Ok(quote) => quote,
            // A retry is answered as the first attempt was, whatever changed since.
            Err(e) => return self.earlier(stored_key.as_deref()).await?.ok_or(e),
        };
        let mut explanation = Explanation::new(&quote.order);
        let mut lost: Vec<Value> = Vec::new();
        let mut tried = false;
        for q in &quote.clusters {
            if !q.eligible() {
                explanation.skip(&q.cluster, q.all_reasons(&quote.account).join("; "));
                continue;
            }
            tried = true;
            // The route to q, saying what the job leaves (account, remaining after it).
            let route_leaving = |left: &[(String, i64)]| {
                let mut chosen = explanation.clone();
                chosen.choose(&q.cluster, chosen_reason(q, left));
                chosen.finish()
            };
            let route = route_leaving(&q.remaining_after);
            let admission =
                self.admission(&quote, q, request, request_json, &stored_key, &route, at)?;
            // A twin with the same key in the same batch: once it is written, ask again.
            let ledger = &self.inner.app.ledger;
            let mut outcome = ledger.admit_queued(admission.clone(), now()).await;
            for _ in 0..3 {
                if !matches!(outcome, Err(LedgerError::Conflict(_))) {
                    break;
                }
                outcome = ledger.admit_queued(admission.clone(), now()).await;
            }
            match outcome {
                Ok(AdmitOutcome::Admitted {
                    job,
                    remaining_after,
                    ..
                }) => {
                    // The quote's balances may predate holds placed since: what is left is
                    // what the ledger left when it placed this one.
                    let mut route = route;
                    let mut route_json = None;
                    if !remaining_after.is_empty() && remaining_after != q.remaining_after {
                        route = route_leaving(&remaining_after);
                        route_json = Some(serde_json::to_string(&route).map_err(|e| {
                            AdmissionError::Internal(format!("serializing the route: {e}"))
                        })?);
                    }
                    return Ok(Admit::Admitted(Box::new(Admitted {
                        chosen: q.clone(),
                        quote,
                        job,
                        route,
                        route_json,
                    })));
                }
                Ok(AdmitOutcome::Existing(job)) => {
                    return Ok(Admit::Replay(Box::new(self.recorded(job).await?)))
                }
                Err(LedgerError::InsufficientAllocation {
                    account, remaining, ..
                }) => {
                    let why = format!(
                        "another submission took the allocation first: {account} has {} \
                         left, the job needs {}",
                        q.amount_with_unit(remaining.max(0)),
                        q.amount_with_unit(q.estimate.unwrap_or(0))
                    );
                    lost.push(lost_race(q, &account, remaining, &why));
                    explanation.skip(&q.cluster, why);
                }
                Err(LedgerError::NoAllocation { account, .. }) => {
                    let why = format!(
                        "{account} and its parents no longer have an allocation in {}",
                        q.currency
                    );
                    lost.push(lost_race(q, &account, 0, &why));
                    explanation.skip(&q.cluster, why);
                }
                Err(e @ LedgerError::AccountClosed { .. }) => return Err(e.into()),
                Err(e) => {
                    return Err(AdmissionError::Internal(format!(
                        "placing the hold and recording the job: {e}"
                    )))
                }
            }
        }
        if !tried {
            if let Some(earlier) = self.earlier(stored_key.as_deref()).await? {
                return Ok(earlier);
            }
        }
        // A closed account is refused as closed, whatever else stood in the way.
        if let Some(closed) = quote.closed.clone() {
            return Err(AdmissionError::AccountClosed {
                account: quote.account.clone(),
                closed,
            });
        }
        Err(refusal(&quote, lost))
    }

    /// `job` as it stands once its forwarding is recorded: a retry that overtakes the
    /// record of the first attempt is answered as that attempt was.
    async fn recorded(&self, job: ApiJob) -> Result<ApiJob> {
        if job.state != "held" || job.cluster_job_id.is_some() {
            return Ok(job);
        }
        self.inner.app.ledger.forwarded_settled().await;
        Ok(self.inner.app.ledger.api_job(job.id).await?.unwrap_or(job))
    }

    /// The submission recorded under `key`, if any.
    async fn earlier(&self, key: Option<&str>) -> Result<Option<Admit>> {
        let Some(key) = key else { return Ok(None) };
        self.inner.app.ledger.forwarded_settled().await;
        let job = self.inner.app.ledger.api_job_by_key(key).await?;
        Ok(job.map(|job| Admit::Replay(Box::new(job))))
    }

    /// The hold (none for an estimate of 0) and the record of a job admitted on `q`. The hold
    /// lives the job's time limit and the grace; a job array's, as many time limits as it
    /// runs waves of tasks under its `%` throttle (one without), counted from its `--begin`
    /// when that is later. Every record the collector sees of the job (a task, or the array's
    /// pending rest) moves the expiry on again.
    #[allow(clippy::too_many_arguments)]
    fn admission(
        &self,
        quote: &Quote,
        q: &ClusterQuote,
        request: &JobRequest,
        request_json: &str,
        stored_key: &Option<String>,
        route: &Route,
        at: i64,
    ) -> Result<NewAdmission> {
        let estimate = q.estimate.unwrap_or(0);
        let minutes = q.time_limit_min.unwrap_or(0);
        let waves = request.array.as_ref().map_or(1, |a| {
            a.max_running().map_or(1, |max| {
                u64::from(a.tasks()).div_ceil(u64::from(max.max(1)))
            })
        });
        let lifetime = i64::try_from(minutes.saturating_mul(60).saturating_mul(waves))
            .unwrap_or(i64::MAX)
            .saturating_add(i64::try_from(self.inner.grace.as_secs()).unwrap_or(i64::MAX));
        let start = request.earliest_start(at);
        let route_json = serde_json::to_string(route)
            .map_err(|e| AdmissionError::Internal(format!("serializing the route: {e}")))?;
        Ok(NewAdmission {
            hold: (estimate > 0).then(|| NewHold {
                account: quote.account.clone(),
                currency: q.currency.clone(),
                amount: estimate,
                cluster: q.cluster.clone(),
                job_ref: None,
                placed_at: at,
                expires_at: start.saturating_add(lifetime),
                // Every sighting of the job moves the expiry this far on, the wait for its
                // --begin not included.
                lifetime: Some(lifetime),
                idempotency_key: time_ordered_key(),
                note: Some(format!("api submission by {}", quote.user)),
            }),
            job: NewApiJob {
                idempotency_key: stored_key.clone(),
                actor: quote.user.clone(),
                user: quote.user.clone(),
                account: quote.account.clone(),
                cluster: q.cluster.clone(),
                currency: q.currency.clone(),
                estimate,
                hold_id: None,
                state: "held".to_string(),
                request_json: request_json.to_string(),
                route_json,
                at,
                array_tasks: request.array.as_ref().map(ArraySpec::tasks),
            },
        })
    }

    /// Hands the recorded job to its cluster: on success links the hold to the cluster's job
    /// id and answers 201; on failure releases the hold and marks the job `failed`.
    async fn forward(
        &self,
        principal: &Principal,
        admitted: Admitted,
        request: JobRequest,
    ) -> Result<Submitted> {
        let ledger = &self.inner.app.ledger;
        let Admitted {
            quote,
            chosen: q,
            job,
            route,
            route_json,
        } = admitted;
        let hold_id = job.hold_id;
        let mut request = request;
        // Priced on its node count: sent so, as a job that names one (-N) is.
        request.nodes_exact |= q.pin_nodes;
        let forward_job = ForwardJob {
            cluster: q.cluster.clone(),
            user: principal.user.clone(),
            account: quote.account.clone(),
            partition: q.partition.clone().unwrap_or_default(),
            qos: request.qos.clone(),
            time_limit_min: q.time_limit_min.unwrap_or(1),
            working_dir: self.working_dir(&q.cluster, &principal.user, &request),
            request,
        };
        let outcome = match self.inner.forwarders.get(&q.cluster) {
            Some(forwarder) => forwarder.submit(&forward_job).await,
            None => Err(ForwardError::Refused(format!(
                "no forwarder is configured for {}",
                q.cluster
            ))),
        };
        let forwarded = match outcome {
            Ok(forwarded) => forwarded,
            Err(e) => {
                // Failed first: releasing the hold of a job still recorded held would record it
                // cancelled, for a moment, before this.
                if let Err(err) = ledger.update_api_job(job.id, "failed", None, now()).await {
                    tracing::error!(job = job.id, error = %err, "could not mark the job failed");
                }
                if let Some(h) = hold_id {
                    self.release(h, &format!("forwarding failed: {e}")).await;
                }
                tracing::warn!(job = job.id, cluster = %q.cluster, error = %e,
                    "forwarding failed; hold released");
                return Err(upstream_error(
                    e,
                    format!("{} refused the job (nothing is held)", q.cluster),
                    format!("{} could not be reached (nothing is held)", q.cluster),
                ));
            }
        };
        // The job runs now: its record is written behind the answer (readers of jobs wait
        // for it), and failing to write it must not turn into an error the client would
        // retry (that would run the job twice). The hold then expires instead of settling.
        let record = ForwardedJob {
            job: job.id,
            hold: hold_id,
            settle_ref: forwarded.settle_ref.clone(),
            cluster_job_id: forwarded.cluster_job_id.clone(),
            at: now(),
            route_json,
        };
        if let Err(e) = ledger.queue_forwarded(record) {
            tracing::error!(job = job.id, cluster_job_id = %forwarded.cluster_job_id, error = %e,
                "the job was forwarded but could not be linked to its hold; the hold will \
                 expire instead of settling");
        }
        let estimate = q.estimate.unwrap_or(0);
        tracing::info!(job = job.id, cluster = %q.cluster, cluster_job_id = %forwarded.cluster_job_id,
            user = %principal.user, account = %quote.account, estimate, "job admitted and forwarded");
        Ok(Submitted {
            id: job.id,
            cluster: q.cluster.clone(),
            cluster_job_id: forwarded.cluster_job_id,
            currency: q.currency.to_string(),
            estimate,
            hold_id,
            route,
            decimals: q.decimals,
        })
    }

    /// Releases a hold, logging (not failing) when the ledger cannot.
    async fn release(&self, hold_id: i64, reason: &str) {
        if let Err(e) = self
            .inner
            .app
            .ledger
            .release_hold(hold_id, reason, now())
            .await
        {
            tracing::error!(hold = hold_id, error = %e, "could not release a hold; it will expire");
        }
    }

    /// The answer to a retry with a key already used.
    fn replay(&self, job: &ApiJob, request_json: &str) -> Result<Submitted> {
        if job.request_json != request_json {
            return Err(AdmissionError::Conflict(format!(
                "this Idempotency-Key was used for a different request (job {})",
                job.id
            )));
        }
        if job.state == "failed" {
            return Err(AdmissionError::Conflict(format!(
                "the submission with this Idempotency-Key failed (job {}); nothing is held — \
                 submit again with a new key",
                job.id
            )));
        }
        let Some(cluster_job_id) = job.cluster_job_id.clone() else {
            return Err(AdmissionError::Conflict(format!(
                "the submission with this Idempotency-Key (job {}) is still being forwarded; \
                 retry in a moment",
                job.id
            )));
        };
        let route: Route = serde_json::from_str(&job.route_json).unwrap_or(Route {
            cluster: Some(job.cluster.clone()),
            explanation: Vec::new(),
        });
        Ok(Submitted {
            id: job.id,
            cluster: job.cluster.clone(),
            cluster_job_id,
            currency: job.currency.to_string(),
            estimate: job.estimate,
            hold_id: job.hold_id,
            route,
            decimals: self.inner.app.decimals(job.currency.as_str()),
        })
    }

    /// The request's working directory, else the cluster's `submit.working_dir` (`{user}`
    /// replaced), else `/home/<user>`.
    fn working_dir(&self, cluster: &str, user: &str, request: &JobRequest) -> String {
        if let Some(dir) = &request.working_dir {
            return dir.clone();
        }
        self.inner
            .app
            .config
            .clusters
            .get(cluster)
            .and_then(|c| c.submit.as_ref())
            .and_then(|s| s.working_dir.as_deref())
            .map(|template| template.replace("{user}", user))
            .unwrap_or_else(|| format!("/home/{user}"))
    }

    // --- jobs ---------------------------------------------------------------------------------

    /// Jobs submitted through the API: the caller's own (finance and admin: everyone's),
    /// filtered by `query`; the newest `query.limit` of them, oldest first.
    pub async fn jobs(&self, principal: &Principal, query: &JobQuery) -> Result<JobsPage> {
        let user = if principal.role >= Role::Finance {
            query.user.clone()
        } else {
            if query.user.as_ref().is_some_and(|u| u != &principal.user) {
                return Err(AdmissionError::Forbidden(format!(
                    "user {} may only list its own jobs",
                    principal.user
                )));
            }
            Some(principal.user.clone())
        };
        let limit = crate::output::page_limit(query.limit).map_err(AdmissionError::invalid)?;
        self.inner.app.ledger.forwarded_settled().await;
        // One row past the limit tells whether older jobs follow.
        let wanted = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut page = ApiJobsPage {
            user,
            account: query.account.clone(),
            state: query.state.clone(),
            before: query.before,
            limit: limit.saturating_add(1),
        };
        let mut views = Vec::new();
        let mut next_before = None;
        // The ledger pre-selects by recorded state, which lags for held jobs: read on until
        // `limit` jobs match or none is left.
        'pages: loop {
            let jobs = self.inner.app.ledger.api_jobs_page(&page).await?;
            let (read, exhausted) = (jobs.len(), jobs.len() <= wanted);
            for (n, view) in self.views(jobs).await?.into_iter().enumerate() {
                let id = view.job.id;
                page.before = Some(id);
                if query.state.as_ref().is_none_or(|s| s == &view.state) {
                    views.push(view);
                    if views.len() == wanted {
                        if n + 1 < read || !exhausted {
                            next_before = Some(id);
                        }
                        break 'pages;
                    }
                }
            }
            if exhausted {
                break;
            }
        }
        views.reverse();
        Ok(JobsPage {
            jobs: views,
            next_before,
        })
    }

    /// One job: its owner's, or anyone's for finance and admin.
    pub async fn job(&self, principal: &Principal, id: i64) -> Result<JobView> {
        let job = self.visible_job(principal, id).await?;
        self.view(job).await
    }

    /// What the job's cluster reports of it now (`GET /v1/jobs/{id}/status`), for whoever may
    /// see the job: asked of the cluster itself, as `sbatch --wait` asks slurmctld.
    pub async fn status(&self, principal: &Principal, id: i64) -> Result<JobStatus> {
        let job = self.visible_job(principal, id).await?;
        let Some(cluster_job_id) = job.cluster_job_id.as_deref() else {
            return Err(AdmissionError::Conflict(format!(
                "job {id} is still being forwarded; ask again in a moment"
            )));
        };
        let forwarder = self.inner.forwarders.get(&job.cluster).ok_or_else(|| {
            AdmissionError::Conflict(format!(
                "job {id}'s cluster {} takes no submissions here any more, so bursar cannot ask it",
                job.cluster
            ))
        })?;
        let job_ref = ForwardedRef {
            cluster_job_id: Some(cluster_job_id),
            settle_ref: job.settle_ref.as_deref().unwrap_or(cluster_job_id),
            submitted_at: job.submitted_at,
        };
        let status = forwarder.status(&job.user, job_ref).await.map_err(|e| {
            upstream_error(
                e,
                format!("{} cannot say how job {cluster_job_id} is", job.cluster),
                format!(
                    "{} could not be reached to ask about job {cluster_job_id}",
                    job.cluster
                ),
            )
        })?;
        Ok(JobStatus {
            id,
            cluster: job.cluster.clone(),
            cluster_job_id: cluster_job_id.to_string(),
            status,
        })
    }

    /// Cancels a held job on its cluster (as its user) and releases its hold. The owner or an
    /// admin may.
    pub async fn cancel(&self, principal: &Principal, id: i64) -> Result<JobView> {
        let job = self.visible_job(principal, id).await?;
        if job.user != principal.user && principal.role < Role::Admin {
            return Err(AdmissionError::Forbidden(format!(
                "only {} or an admin may cancel job {id}",
                job.user
            )));
        }
        let view = self.view(job).await?;
        if view.state != "held" {
            return Err(AdmissionError::Conflict(format!(
                "job {id} is {}: there is nothing to cancel",
                view.state
            )));
        }
        let job = view.job;
        let Some(cluster_job_id) = job.cluster_job_id.clone() else {
            return Err(AdmissionError::Conflict(format!(
                "job {id} is still being forwarded; cancel it in a moment"
            )));
        };
        let forwarder = self
            .inner
            .forwarders
            .get(&job.cluster)
            .cloned()
            .ok_or_else(|| {
                AdmissionError::Internal(format!("no forwarder for cluster {}", job.cluster))
            })?;
        forwarder
            .cancel(&job.user, &cluster_job_id)
            .await
            .map_err(|e| {
                upstream_error(
                    e,
                    format!(
                        "{} refused to cancel job {cluster_job_id} (the hold stays)",
                        job.cluster
                    ),
                    format!(
                        "{} could not be reached to cancel job {cluster_job_id} (the hold stays)",
                        job.cluster
                    ),
                )
            })?;
        let ledger = &self.inner.app.ledger;
        let at = now();
        if let Some(h) = job.hold_id {
            ledger.release_hold(h, "cancelled by user", at).await?;
        }
        ledger.update_api_job(job.id, "cancelled", None, at).await?;
        tracing::info!(job = job.id, cluster = %job.cluster, %cluster_job_id, by = %principal.user, "job cancelled");
        self.job(principal, id).await
    }

    /// The job if the caller may see it; someone else's job is "not found" to a user.
    async fn visible_job(&self, principal: &Principal, id: i64) -> Result<ApiJob> {
        self.inner.app.ledger.forwarded_settled().await;
        let job = self.inner.app.ledger.api_job(id).await?;
        match job {
            Some(job) if job.user == principal.user || principal.role >= Role::Finance => Ok(job),
            _ => Err(AdmissionError::NotFound(format!("job {id} not found"))),
        }
    }

    /// When the cluster reported `job` finished (its posting under `job_id`, the id it is
    /// charged under, and `latest_submit`, the last of its own records
    /// ([`Admission::own_submits`]), is final and ends the job: not a requeue or a resize, nor
    /// a node failure or preemption the job may be run again after unless a later record under
    /// the id, `superseded`, is another job's), if it did.
    async fn finished(
        &self,
        job: &ApiJob,
        job_id: Option<&str>,
        latest_submit: Option<i64>,
        superseded: bool,
    ) -> Result<Option<i64>> {
        let (Some(job_id), Some(submit)) = (job_id, latest_submit) else {
            return Ok(None);
        };
        // A record after which Slurm may run the job again settles it only once its cluster
        // says it will not ([`Admission::settle_not_rerun`]), or a later record under its id
        // is another job's (`superseded`).
        let ending = self.ending(&job.cluster, job_id, submit).await?;
        Ok(ending
            .filter(|p| superseded || !RERUN_STATES.contains(&p.state.as_str()))
            .map(|p| p.updated_at))
    }

    /// The posting of the record (`cluster`, `job_id`, `submit`), if that record ends its job.
    async fn ending(&self, cluster: &str, job_id: &str, submit: i64) -> Result<Option<JobRow>> {
        let posting = self.inner.app.ledger.job(cluster, job_id, submit).await?;
        Ok(posting.filter(JobRow::ends_job))
    }

    /// The window of submit times that are each of `jobs`' own, for those whose cluster
    /// reported more than one submission under its id (a requeue, or an id Slurm handed out
    /// again) and that share that id with other jobs bursar submitted: it starts and ends
    /// between their submissions ([`namesake_boundary`]). The others' windows are the default
    /// ([`Window::of`]). Reads only those ids, through their index.
    async fn namesake_windows(
        &self,
        jobs: &[ApiJob],
        usage: &HashMap<(String, String), Vec<UsageEntry>>,
    ) -> Result<HashMap<i64, Window>> {
        let mut ids: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for job in jobs {
            let Some(id) = job.cluster_job_id.as_deref() else {
                continue;
            };
            let submits = usage
                .get(&(job.cluster.clone(), id.to_string()))
                .map(|entries| entries.iter().map(|e| e.submit));
            if submits.is_some_and(|mut s| s.next().is_some_and(|first| s.any(|x| x != first))) {
                ids.entry(job.cluster.as_str())
                    .or_default()
                    .push(id.to_string());
            }
        }
        let mut windows = HashMap::new();
        for (cluster, ids) in ids {
            let namesakes = self.inner.app.ledger.api_jobs_on(cluster, &ids).await?;
            for job in jobs.iter().filter(|j| j.cluster == cluster) {
                let same = || {
                    namesakes
                        .iter()
                        .filter(|n| n.id != job.id && n.cluster_job_id == job.cluster_job_id)
                };
                let before = same()
                    .filter(|n| n.id < job.id)
                    .map(|n| n.submitted_at)
                    .max();
                let after = same()
                    .filter(|n| n.id > job.id)
                    .map(|n| n.submitted_at)
                    .min();
                let mut window = Window::of(job);
                if let Some(before) = before {
                    window.from = namesake_boundary(before, job.submitted_at);
                }
                window.until = after.map(|after| namesake_boundary(job.submitted_at, after));
                windows.insert(job.id, window);
            }
        }
        Ok(windows)
    }

    /// The submit times of `job`'s own records among those posted under `job_id`, the id it is
    /// charged under (`entries`): those in its `window` (an older job under an id Slurm handed
    /// out again is another job, and so is a later one bursar submitted), from the first
    /// through the one that ends it. A requeued or resized job goes on in a record of a later
    /// submit time; so does one requeued after a node failure, which Slurm logs as a final
    /// `NODE_FAIL` record and whose next run it stamps with the time of the requeue: a record
    /// submitted within [`SUBMIT_SKEW_SECS`] of the end of one that ended the job goes on with
    /// it. Past that, the id is another job's. Reads the records' postings only when there are
    /// several.
    async fn own_submits(
        &self,
        job: &ApiJob,
        job_id: &str,
        window: Window,
        entries: &[UsageEntry],
    ) -> Result<BTreeSet<i64>> {
        let submits: BTreeSet<i64> = entries
            .iter()
            .map(|e| e.submit)
            .filter(|&s| window.contains(s))
            .collect();
        if submits.len() < 2 {
            return Ok(submits);
        }
        let mut own = BTreeSet::new();
        let mut ended: Option<i64> = None;
        for submit in submits {
            if ended.is_some_and(|end| submit > end.saturating_add(SUBMIT_SKEW_SECS)) {
                break;
            }
            own.insert(submit);
            let ending = self.ending(&job.cluster, job_id, submit).await?;
            ended = ending.map(|p| p.effective_at);
        }
        Ok(own)
    }

    /// One job's view (see [`Admission::views`]).
    async fn view(&self, job: ApiJob) -> Result<JobView> {
        let mut views = self.views(vec![job]).await?;
        views
            .pop()
            .ok_or_else(|| AdmissionError::Internal("a job's view went missing".to_string()))
    }

    /// The jobs' views, in their order: each state as recorded (a job that holds nothing is
    /// settled here once its cluster reports it finished, and that is written back so that
    /// listing by state finds it), what its hold still holds, its charge from the journal;
    /// read for all of them at once (their holds by id, their usage by cluster and job id),
    /// then, only for ids with several submissions, the other jobs bursar submitted under them
    /// and the postings that tell which records are whose.
    async fn views(&self, jobs: Vec<ApiJob>) -> Result<Vec<JobView>> {
        let ledger = &self.inner.app.ledger;
        let hold_ids: Vec<i64> = jobs.iter().filter_map(|j| j.hold_id).collect();
        let holds: HashMap<i64, HoldRow> = ledger
            .holds_by_id(&hold_ids)
            .await?
            .into_iter()
            .map(|h| (h.id, h))
            .collect();
        // The job id its usage is charged under (a dstack run's submission id): recorded with
        // the job, or for jobs recorded before it was, the one its hold settles by; else the
        // cluster's job id.
        let settle_ref = |job: &ApiJob| -> Option<String> {
            job.settle_ref
                .clone()
                .or_else(|| {
                    job.hold_id
                        .and_then(|h| holds.get(&h))
                        .and_then(|h| h.job_ref.clone())
                })
                .or_else(|| job.cluster_job_id.clone())
        };
        // The other records of jobs that have several (a dstack run's every submission).
        let job_ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        let mut parts: HashMap<i64, Vec<JobPart>> = HashMap::new();
        for part in ledger.job_parts(&job_ids).await? {
            parts.entry(part.api_job_id).or_default().push(part);
        }
        let mut pairs: Vec<(String, String)> = jobs
            .iter()
            .filter_map(|job| Some((job.cluster.clone(), settle_ref(job)?)))
            .collect();
        for job in &jobs {
            for part in parts.get(&job.id).into_iter().flatten() {
                pairs.push((job.cluster.clone(), part.job_id.clone()));
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        // The usage posted under each (cluster, job id).
        let mut usage: HashMap<(String, String), Vec<UsageEntry>> = HashMap::new();
        for e in ledger.jobs_journal(&pairs).await? {
            let (Some(cluster), Some(job_id), Some(submit), true) =
                (e.cluster, e.job_id, e.submit, e.kind.is_usage())
            else {
                continue;
            };
            usage
                .entry((cluster, job_id))
                .or_default()
                .push(UsageEntry {
                    submit,
                    currency: e.currency,
                    amount: e.amount,
                });
        }
        let windows = self.namesake_windows(&jobs, &usage).await?;
        let mut views = Vec::with_capacity(jobs.len());
        for job in jobs {
            let hold = job.hold_id.and_then(|h| holds.get(&h));
            // The recorded state is the job's: closing a hold records its job's in the same
            // transaction (settled, cancelled, expired).
            let mut state = job.state.as_str();
            let active = hold.filter(|h| state == "held" && h.state == HoldState::Active);
            let held = active.map_or(0, |h| h.amount);
            let hold_expires_at = active.map(|h| h.expires_at);
            // A job that holds nothing was settled when its state was recorded so.
            let mut settled_at = match hold {
                Some(h) => Some(h)
                    .filter(|h| h.state == HoldState::Settled)
                    .and_then(|h| h.closed_at),
                None => (job.state == "settled").then_some(job.updated_at),
            };
            // Its charge: the usage entries in its currency of its own records (none: no
            // charge yet), and the latest of them.
            let charged_as = settle_ref(&job);
            let entries = charged_as
                .as_ref()
                .and_then(|id| usage.get(&(job.cluster.clone(), id.clone())))
                .map_or(&[][..], Vec::as_slice);
            let own = match &charged_as {
                Some(id) => {
                    let window = windows.get(&job.id).copied();
                    self.own_submits(
                        &job,
                        id,
                        window.unwrap_or_else(|| Window::of(&job)),
                        entries,
                    )
                    .await?
                }
                None => BTreeSet::new(),
            };
            // With the job's other parts: each record (job id, submit) it is a part of, once.
            let others = parts
                .get(&job.id)
                .into_iter()
                .flatten()
                .filter(|p| {
                    !(charged_as.as_deref() == Some(p.job_id.as_str()) && own.contains(&p.submit))
                })
                .flat_map(|p| {
                    usage
                        .get(&(job.cluster.clone(), p.job_id.clone()))
                        .into_iter()
                        .flatten()
                        .filter(move |e| e.submit == p.submit)
                });
            let charge = entries
                .iter()
                .filter(|e| own.contains(&e.submit))
                .chain(others)
                .filter(|e| e.currency == job.currency)
                .fold(None, |sum: Option<i64>, e| {
                    Some(sum.unwrap_or(0).saturating_add(e.amount))
                });
            let latest_submit = own.last().copied();
            // A job that holds nothing (an estimate of 0: a free partition or QOS) has no hold
            // to settle: it is settled once its cluster reports it finished (the posting of
            // that record records it so; this is for the jobs whose record came before, or
            // under an id shared with another job bursar submitted). A later record under its
            // id that is not its own means it did not run again after a node failure.
            // A job array's tasks settle it as they are posted: the record under its id is
            // only its last task's.
            if job.state == "held" && job.hold_id.is_none() && job.array_tasks.is_none() {
                let superseded =
                    latest_submit.is_some_and(|last| entries.iter().any(|e| e.submit > last));
                if let Some(done) = self
                    .finished(&job, charged_as.as_deref(), latest_submit, superseded)
                    .await?
                {
                    (state, settled_at) = ("settled", Some(done));
                    if let Err(e) = ledger.settle_free_job(job.id, done).await {
                        tracing::warn!(job = job.id, error = %e, "could not record the job settled");
                    }
                }
            }
            let state = state.to_string();
            let decimals = self.inner.app.decimals(job.currency.as_str());
            views.push(JobView {
                job,
                state,
                held,
                hold_expires_at,
                charge,
                settled_at,
                decimals,
            });
        }
        Ok(views)
    }
}

/// The submit times a job's own records can have ([`Admission::own_submits`]): `from`
/// inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    from: i64,
    until: Option<i64>,
}

impl Window {
    /// A job's window when no other job bursar submitted shares its id: from
    /// [`SUBMIT_SKEW_SECS`] before bursar submitted it (the cluster's clock may be behind).
    fn of(job: &ApiJob) -> Window {
        Window {
            from: job.submitted_at.saturating_sub(SUBMIT_SKEW_SECS),
            until: None,
        }
    }

    fn contains(self, submit: i64) -> bool {
        submit >= self.from && self.until.is_none_or(|until| submit < until)
    }
}

/// Where the records of a job bursar submitted at `earlier` end and those of the next one it
/// submitted under the same cluster job id, at `later`, begin: [`SUBMIT_SKEW_SECS`] before the
/// later one (the cluster's clock may be behind bursar's), or halfway between them when they
/// are closer than twice that.
fn namesake_boundary(earlier: i64, later: i64) -> i64 {
    let halfway = earlier + (later.saturating_sub(earlier) + 1) / 2;
    later.saturating_sub(SUBMIT_SKEW_SECS).max(halfway)
}

/// One usage entry of a job's view: the submit time of the record it posts, its currency and
/// amount.
struct UsageEntry {
    submit: i64,
    currency: Currency,
    amount: i64,
}

/// The error when no cluster took the job: 402 when some fit and only money stood in the way
/// (the quote's verdict, or the ledger's when another submission took the money first), else
/// 422 with every cluster's reasons.
/// One cluster lost to a concurrent submission, for the 402's `details.clusters[]`.
fn lost_race(q: &ClusterQuote, account: &str, remaining: i64, why: &str) -> Value {
    json!({
        "cluster": q.cluster,
        "account": account,
        "currency": q.currency.as_str(),
        "estimate": q.amount(q.estimate.unwrap_or(0)),
        "remaining": q.amount(remaining),
        "reason": why,
    })
}

fn refusal(quote: &Quote, lost: Vec<Value>) -> AdmissionError {
    let mut clusters = lost;
    let mut lines: Vec<String> = Vec::new();
    for entry in &clusters {
        lines.push(format!(
            "on {}, {} has {} {currency} left; the job needs an estimated {} {currency}",
            entry["cluster"].as_str().unwrap_or_default(),
            entry["account"].as_str().unwrap_or_default(),
            entry["remaining"].as_str().unwrap_or_default(),
            entry["estimate"].as_str().unwrap_or_default(),
            currency = entry["currency"].as_str().unwrap_or_default(),
        ));
    }
    for q in quote.clusters.iter().filter(|q| q.blocked_by_money()) {
        let estimate = q.amount(q.estimate.unwrap_or(0));
        let (account, remaining, line) = match &q.funding {
            Funding::Short { account, remaining } => (
                account.clone(),
                q.amount(*remaining),
                format!(
                    "on {}, {account} has {} {currency} left; the job needs an estimated {estimate} {currency}",
                    q.cluster,
                    q.amount((*remaining).max(0)),
                    currency = q.currency
                ),
            ),
            _ => (
                quote.account.clone(),
                q.amount(0),
                format!(
                    "on {}, {} and its parents have no allocation in {currency} (no access to \
                     clusters billed in {currency}); the job needs an estimated {estimate} {currency}",
                    q.cluster,
                    quote.account,
                    currency = q.currency
                ),
            ),
        };
        lines.push(line);
        clusters.push(json!({
            "cluster": q.cluster,
            "account": account,
            "currency": q.currency.as_str(),
            "estimate": estimate,
            "remaining": remaining,
            "reason": q.money_reason(&quote.account),
        }));
    }
    if !clusters.is_empty() {
        return AdmissionError::InsufficientAllocation {
            message: format!("no cluster can be paid for: {}", lines.join("; ")),
            details: json!({"clusters": clusters}),
        };
    }
    let reasons: Vec<Value> = quote
        .clusters
        .iter()
        .map(|q| json!({"cluster": q.cluster, "reasons": q.all_reasons(&quote.account)}))
        .collect();
    let message = if quote.clusters.is_empty() {
        "no cluster is configured to take jobs".to_string()
    } else {
        format!(
            "no cluster can run this job: {}",
            quote
                .clusters
                .iter()
                .map(|q| q.all_reasons(&quote.account).join("; "))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    AdmissionError::Invalid {
        message,
        details: json!({"clusters": reasons}),
    }
}

#[cfg(test)]
mod tests {
    use super::time_ordered_key;

    #[test]
    fn hold_keys_are_unique_and_sort_in_the_order_they_were_made() {
        let mut keys = Vec::new();
        for _ in 0..50 {
            keys.push(time_ordered_key());
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, keys);
        // `api:`, 16 hex digits of clock, 16 random ones.
        assert!(
            keys.iter().all(|k| k.len() == 36
                && k.starts_with("api:")
                && k[4..].bytes().all(|b| b.is_ascii_hexdigit())),
            "{keys:?}"
        );
        // Made within the same microsecond, they still differ.
        let (a, b) = (time_ordered_key(), time_ordered_key());
        assert_ne!(a, b);
    }
}
