//! The ledger's public vocabulary: what goes in ([`UsageCharge`], [`NewEntry`], [`NewHold`], …)
//! and what comes out ([`AccountRow`], [`BalanceRow`], [`UsageReport`], …).
//!
//! Amounts are `i64` micros of the row's currency; times are Unix epoch seconds, UTC.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use bursar_pricing::Currency;

use crate::error::LedgerError;

/// One account of the tree. `parent` is `None` only for `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRow {
    pub name: String,
    pub parent: Option<String>,
    pub created_at: i64,
    /// When the account was closed (`None`: open). Its subtree is closed with it.
    pub closed_at: Option<i64>,
}

/// A user and the account their jobs are charged to when they name none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub name: String,
    pub default_account: String,
    pub created_at: i64,
}

/// A user may charge an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssociationRow {
    pub user: String,
    pub account: String,
    pub created_at: i64,
}

/// An allocation with its materialized usage.
///
/// `charged` and `held` cover the account's whole subtree, for entries whose `effective_at` lies
/// in `[start, end)`; `remaining = amount − charged − held` (negative when overspent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationRow {
    pub id: i64,
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    pub start: i64,
    pub end: i64,
    pub charged: i64,
    pub held: i64,
    pub remaining: i64,
}

/// One priced job record, ready to post.
///
/// Identity is `(cluster, job_id, submit)`; `revision` names the version of the record (a hash
/// of everything that determines its charge). `amount_micros` is what the job costs at this
/// revision, in total (never a delta); it must not be negative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageCharge {
    pub cluster: String,
    pub job_id: String,
    pub display_id: String,
    pub submit: i64,
    pub revision: String,
    pub account: String,
    pub user: String,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub state: String,
    /// The record will not change any more (its run ended). A final revision is never replaced
    /// by a non-final one; see [`UsageCharge::settles_hold`] for which records settle holds.
    pub is_final: bool,
    pub currency: Currency,
    pub amount_micros: i64,
    /// The moment the charge belongs to: the job's end (else start, else submit).
    pub effective_at: i64,
    pub price_version: Option<String>,
    pub note: Option<String>,
}

/// Whether a record in `state` ends its job: a final record, and not one slurmdbd ends while
/// the job goes on in a new record (REQUEUED: the next run; RESIZING: the part after the
/// resize).
fn ends_job(is_final: bool, state: &str) -> bool {
    is_final && !matches!(state, "REQUEUED" | "RESIZING")
}

/// How much earlier than bursar placed a job's hold its cluster may say the job was submitted,
/// for the record still to be that job's (seconds): the cluster's clock and bursar's may
/// differ. A record under the same job id submitted earlier than that is another job's — Slurm
/// hands out ids again after its saved state is lost or `MaxJobId` wraps — and neither settles
/// nor extends the hold, nor counts in the charge of the job submitted through bursar.
pub const SUBMIT_SKEW_SECS: i64 = 600;

/// Final states after which Slurm may run the same job again, in a new record under the same id
/// submitted at the moment of the requeue: a job requeued after a node failure is logged as
/// ended `NODE_FAIL`, one preempted with `PreemptMode=REQUEUE` as ended `PREEMPTED`
/// (slurmctld's `job_mgr.c`: "We want this job to look like it was terminated in the
/// accounting logs"). Whether it will runs only the cluster can tell: such a record settles
/// neither the job's hold nor a job that holds nothing until the gateway has asked
/// ([`crate::Ledger::holds_to_confirm`], [`crate::Ledger::free_jobs_to_confirm`]).
pub const RERUN_STATES: [&str; 2] = ["NODE_FAIL", "PREEMPTED"];

/// [`RERUN_STATES`] as an SQL list of string literals: `'NODE_FAIL', 'PREEMPTED'`.
pub(crate) fn rerun_states_sql() -> String {
    RERUN_STATES
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl UsageCharge {
    /// The job is over with this record ([`ends_job`]): it ends the job's view.
    pub fn ends_job(&self) -> bool {
        ends_job(self.is_final, &self.state)
    }

    /// This record settles the job's hold: it ends the job, in a state after which Slurm never
    /// runs the job again ([`RERUN_STATES`]). The others keep the hold alive as an unfinished
    /// record does.
    pub fn settles_hold(&self) -> bool {
        self.ends_job() && !RERUN_STATES.contains(&self.state.as_str())
    }
}

/// What [`crate::Ledger::post_usage`] did with a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostOutcome {
    /// Identities seen for the first time: one `charge` entry each.
    pub charged: u64,
    /// Identities whose record changed: an adjustment, or a reversal and a re-post.
    pub adjusted: u64,
    /// Records already posted (same or already-seen revision, or a non-final record for a job
    /// whose final record is posted): nothing written.
    pub unchanged: u64,
    /// Accounts the ledger did not know and created under `root` (sorted). The caller should
    /// warn: these charges landed outside any planned part of the tree.
    pub created_accounts: Vec<String>,
    /// Active holds released because a final record of their job arrived.
    pub settled_holds: u64,
}

/// The kinds of journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// Changes the allocated amount of the account's own allocation (set_allocation writes one
    /// per change; a manual deposit tops an allocation up).
    Deposit,
    /// The first posting of a job identity.
    Charge,
    /// A correction of usage: a job's new revision, a reversal and re-post, or a manual entry.
    Adjustment,
    /// Usage given back; its amount is negative.
    Refund,
    /// A hold placed (positive).
    Hold,
    /// A hold released, settled or expired (negative, at the hold's `placed_at`).
    Release,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Deposit => "deposit",
            EntryKind::Charge => "charge",
            EntryKind::Adjustment => "adjustment",
            EntryKind::Refund => "refund",
            EntryKind::Hold => "hold",
            EntryKind::Release => "release",
        }
    }

    /// Charges, adjustments and refunds: the entries that make up usage.
    pub fn is_usage(self) -> bool {
        matches!(
            self,
            EntryKind::Charge | EntryKind::Adjustment | EntryKind::Refund
        )
    }

    /// Holds and releases: the entries that make up `held`.
    pub fn is_hold(self) -> bool {
        matches!(self, EntryKind::Hold | EntryKind::Release)
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EntryKind {
    type Err = LedgerError;

    fn from_str(text: &str) -> Result<EntryKind, LedgerError> {
        Ok(match text {
            "deposit" => EntryKind::Deposit,
            "charge" => EntryKind::Charge,
            "adjustment" => EntryKind::Adjustment,
            "refund" => EntryKind::Refund,
            "hold" => EntryKind::Hold,
            "release" => EntryKind::Release,
            other => {
                return Err(LedgerError::Invalid(format!(
                    "{other:?} is not a journal entry kind"
                )))
            }
        })
    }
}

/// A manual journal entry: `kind` is [`EntryKind::Deposit`], [`EntryKind::Adjustment`] or
/// [`EntryKind::Refund`].
///
/// `amount` is signed as stored: a refund is negative (it gives usage back), an adjustment
/// either sign, a deposit either sign (it changes the allocated amount of the account's own
/// allocation in `currency` that covers `effective_at`, which must exist and stay ≥ 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    pub kind: EntryKind,
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    pub effective_at: i64,
    pub idempotency_key: String,
    pub note: Option<String>,
}

/// One journal entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub id: i64,
    pub idempotency_key: String,
    pub kind: EntryKind,
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    /// +1 where a job identity's money starts counting in a group, −1 on a reversal, else 0.
    pub job_count: i64,
    pub effective_at: i64,
    pub posted_at: i64,
    pub cluster: Option<String>,
    pub job_id: Option<String>,
    pub display_id: Option<String>,
    pub submit: Option<i64>,
    pub user: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub state: Option<String>,
    pub revision: Option<String>,
    pub price_version: Option<String>,
    pub hold_id: Option<i64>,
    pub note: Option<String>,
}

/// Which journal entries to list: every filter that is `Some` must match; entries come in
/// posting order, starting after `after_id`, at most `limit` of them (all when `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalQuery {
    pub account: Option<String>,
    pub cluster: Option<String>,
    pub job_id: Option<String>,
    pub after_id: i64,
    pub limit: Option<u32>,
}

/// The current posting of one job identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub cluster: String,
    pub job_id: String,
    pub submit: i64,
    pub display_id: String,
    pub revision: String,
    pub is_final: bool,
    pub account: String,
    pub currency: Currency,
    /// What the job's journal entries add up to: the amount of its current revision.
    pub amount: i64,
    pub effective_at: i64,
    pub user: String,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub state: String,
    pub price_version: Option<String>,
    pub updated_at: i64,
}

impl JobRow {
    /// The job is over with this posting ([`ends_job`]).
    pub fn ends_job(&self) -> bool {
        ends_job(self.is_final, &self.state)
    }
}

/// A hold to place. `amount` (> 0) counts against the allocations covering `placed_at` on the
/// account and every ancestor until the hold is released, settled or expires at `expires_at`.
/// Placing the same `idempotency_key` twice returns the first hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHold {
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    pub cluster: String,
    /// The cluster's job id, when known; else link it later with `link_hold`.
    pub job_ref: Option<String>,
    pub placed_at: i64,
    pub expires_at: i64,
    /// How long the hold lives past each sighting of its job (the time limit and the grace);
    /// `None`: `expires_at - placed_at`. Given when the first expiry is further off than that
    /// (a job told to begin later).
    pub lifetime: Option<i64>,
    pub idempotency_key: String,
    pub note: Option<String>,
}

/// Where a hold is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldState {
    Active,
    /// Released by a caller (the job was cancelled or never forwarded).
    Released,
    /// Released because the job's final usage was posted.
    Settled,
    /// Released by `expire_holds` after `expires_at`.
    Expired,
}

impl HoldState {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldState::Active => "active",
            HoldState::Released => "released",
            HoldState::Settled => "settled",
            HoldState::Expired => "expired",
        }
    }
}

impl FromStr for HoldState {
    type Err = LedgerError;

    fn from_str(text: &str) -> Result<HoldState, LedgerError> {
        Ok(match text {
            "active" => HoldState::Active,
            "released" => HoldState::Released,
            "settled" => HoldState::Settled,
            "expired" => HoldState::Expired,
            other => {
                return Err(LedgerError::Invalid(format!(
                    "{other:?} is not a hold state"
                )))
            }
        })
    }
}

/// A hold as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRow {
    pub id: i64,
    pub idempotency_key: String,
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    pub cluster: String,
    pub job_ref: Option<String>,
    pub placed_at: i64,
    pub expires_at: i64,
    pub state: HoldState,
    pub closed_at: Option<i64>,
    pub reason: Option<String>,
    pub note: Option<String>,
}

/// The balance of one account in one currency at a moment: listed when the account holds an
/// allocation in the currency active at that moment, or when its subtree's usage or holds in
/// the currency are not zero.
///
/// With an allocation active at that moment: `allocated` is its amount, `charged`/`held` are the
/// subtree's usage and holds within its period, `remaining = allocated − charged − held`, and
/// `period` is its `[start, end)`. Without one: `allocated`, `remaining` and `period` are
/// `None`, and `charged`/`held` are the subtree's all-time totals. `available` is the smallest
/// `remaining` over the account and its ancestors that hold an active allocation in the
/// currency — what a new hold could take — and `None` when none does (no access).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceRow {
    pub account: String,
    pub currency: Currency,
    pub allocated: Option<i64>,
    pub charged: i64,
    pub held: i64,
    pub remaining: Option<i64>,
    pub available: Option<i64>,
    pub period: Option<(i64, i64)>,
}

/// A dimension a usage report can group by. Account and currency always are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKey {
    Account,
    User,
    Cluster,
    Partition,
    Qos,
    /// `YYYY-MM` of `effective_at`, UTC.
    Month,
    /// ISO 8601 week of `effective_at`, UTC: `YYYY-Www` (weeks start on Monday; the year is
    /// the ISO week-numbering year).
    Week,
    /// `YYYY-MM-DD` of `effective_at`, UTC.
    Day,
}

impl GroupKey {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKey::Account => "account",
            GroupKey::User => "user",
            GroupKey::Cluster => "cluster",
            GroupKey::Partition => "partition",
            GroupKey::Qos => "qos",
            GroupKey::Month => "month",
            GroupKey::Week => "week",
            GroupKey::Day => "day",
        }
    }
}

impl FromStr for GroupKey {
    type Err = LedgerError;

    fn from_str(text: &str) -> Result<GroupKey, LedgerError> {
        Ok(match text.to_ascii_lowercase().as_str() {
            "account" => GroupKey::Account,
            "user" => GroupKey::User,
            "cluster" => GroupKey::Cluster,
            "partition" => GroupKey::Partition,
            "qos" => GroupKey::Qos,
            "month" => GroupKey::Month,
            "week" => GroupKey::Week,
            "day" => GroupKey::Day,
            other => {
                return Err(LedgerError::Invalid(format!(
                    "{other:?} is not a report grouping (account, user, cluster, partition, qos, month, week, day)"
                )))
            }
        })
    }
}

/// One line of a usage report.
///
/// `keys` holds the value of every requested [`GroupKey`] (`""` where an entry has none, e.g. a
/// manual adjustment has no user). `jobs` counts the job identities whose money is in the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub account: String,
    pub currency: Currency,
    pub amount: i64,
    pub jobs: u64,
    pub keys: BTreeMap<GroupKey, String>,
}

/// Usage (charges, adjustments, refunds) with `effective_at ∈ [from, to)`. The rows of each
/// currency sum exactly to its total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport {
    pub from: i64,
    pub to: i64,
    pub rows: Vec<UsageRow>,
    pub totals: Vec<(Currency, i64)>,
}

/// Where a usage report is computed from. All give the same answer; the rollup is faster and
/// only answers ranges on UTC day boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportSource {
    /// The daily rollup for the whole UTC days of the range, the journal (through its
    /// account and time index) for the partial days at either end.
    Auto,
    Rollup,
    /// Every usage entry of the journal: the reference, and slow on a large ledger.
    Journal,
}

/// A line bursar could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineItem {
    /// Where it came from: a file name, `sacct:cluster`, `dstack:project`, …
    pub source: String,
    pub line: Option<u64>,
    pub reason: String,
    pub raw: String,
}

/// A quarantined line as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineRow {
    pub id: i64,
    pub source: String,
    pub line: Option<u64>,
    pub reason: String,
    pub raw: String,
    pub first_seen: i64,
}

/// An administrative change to record in the audit log: who (`actor`, in `role`) did what
/// (`action`, e.g. `allocation.set`) to which object (`target`), with the object as JSON
/// before (`None`: it did not exist) and after (`None`: it was removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAudit {
    pub at: i64,
    pub actor: String,
    pub role: String,
    pub action: String,
    pub target: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// One audit log entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub role: String,
    pub action: String,
    pub target: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// A job submitted through the gateway's API, to record: `estimate` is in micros of
/// `currency`, `hold_id` the hold placed for it (if any), `state` where it is (`held`,
/// `settled`, `cancelled`, `expired`, `failed`, …), `request_json` the request as received
/// and `route_json` the routing decision. `at` is the submission time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiJob {
    pub idempotency_key: Option<String>,
    pub actor: String,
    pub user: String,
    pub account: String,
    pub cluster: String,
    pub currency: Currency,
    pub estimate: i64,
    pub hold_id: Option<i64>,
    pub state: String,
    pub request_json: String,
    pub route_json: String,
    pub at: i64,
    /// A job array's task count (`sbatch --array`): its hold is that many tasks' estimates,
    /// and settles task by task (migration 0015). `None` for every other job.
    pub array_tasks: Option<u32>,
}

/// A job submitted through the gateway's API, as stored. `cluster_job_id` is set once the
/// cluster accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiJob {
    pub id: i64,
    pub idempotency_key: Option<String>,
    pub actor: String,
    pub user: String,
    pub account: String,
    pub cluster: String,
    pub cluster_job_id: Option<String>,
    /// The id the cluster's usage records carry for the job, when it is not `cluster_job_id`
    /// (a dstack run's first job submission); `None` for jobs recorded before bursar kept it
    /// here (their hold's `job_ref` has it).
    pub settle_ref: Option<String>,
    pub currency: Currency,
    pub estimate: i64,
    pub hold_id: Option<i64>,
    pub state: String,
    pub request_json: String,
    pub route_json: String,
    pub submitted_at: i64,
    pub updated_at: i64,
    /// A job array's task count ([`NewApiJob::array_tasks`]).
    pub array_tasks: Option<u32>,
}

/// One usage record of an API job that has several (a dstack run's job submissions, a job
/// array's tasks): the record `(job's cluster, job_id, submit)`
/// ([`crate::Ledger::record_job_parts`]), of the job's own cluster: a record is a part of one
/// job (listed for another job of its cluster, it moves), and two clusters' records under the
/// same id are two parts (migration 0017).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobPart {
    pub api_job_id: i64,
    pub job_id: String,
    pub submit: i64,
}

/// One submission for [`crate::Ledger::admit`]: the hold to place for it (checked against
/// every allocation on the account's chain, as [`crate::Ledger::try_place_hold`] does; none
/// when the estimate is 0) and the API job to record with it, in the same transaction.
/// `job.hold_id` is ignored: the placed hold's id is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAdmission {
    pub hold: Option<NewHold>,
    pub job: NewApiJob,
}

/// One page of API jobs, newest first ([`crate::Ledger::api_jobs_page`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiJobsPage {
    /// Only this user's jobs.
    pub user: Option<String>,
    /// Only jobs charged to this account.
    pub account: Option<String>,
    /// Only jobs recorded in this state *or still recorded `held`*: the recorded state of a
    /// held job catches up with its hold (settled, released, expired) only when the job is
    /// next read, so a caller filtering by state decides on held ones itself.
    pub state: Option<String>,
    /// Only jobs with a smaller id.
    pub before: Option<i64>,
    /// The most jobs in the page.
    pub limit: u32,
}

/// What [`crate::Ledger::admit`] did with one submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitOutcome {
    /// The hold is placed and the job recorded.
    Admitted {
        job: ApiJob,
        hold: Option<Box<HoldRow>>,
        /// What each allocation the hold draws on (the account's and its ancestors' in the
        /// hold's currency, nearest first) has left once it is placed, by account name, as
        /// the transaction that placed it left them: later holds are not counted. Empty
        /// without a hold.
        remaining_after: Vec<(String, i64)>,
    },
    /// The job's idempotency key was already used: the job recorded with it, nothing done.
    Existing(ApiJob),
}

/// What [`crate::Ledger::admit_recording`] did in its one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitBatch {
    /// One per submission, in order (as [`crate::Ledger::admit`] returns them).
    pub outcomes: Vec<crate::Result<AdmitOutcome>>,
    /// Holds of the forwarded jobs linked (a hold linked before stays as it was).
    pub linked: u64,
    /// Forwarded jobs whose API job was not found, so not recorded.
    pub unrecorded: Vec<i64>,
}

/// A job its cluster accepted, for [`crate::Ledger::admit_recording`]: link the hold to the
/// cluster's job (`settle_ref`, what the collector will report it as) and note the cluster's
/// job id on the API job, whose state becomes `held`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedJob {
    pub job: i64,
    pub hold: Option<i64>,
    pub settle_ref: String,
    pub cluster_job_id: String,
    pub at: i64,
    /// The route to keep for the job instead of the one recorded at admission (whose text
    /// was written before the ledger decided), when given.
    pub route_json: Option<String>,
}

/// What admission needs to know about a user and an account at a moment, read in one
/// snapshot by [`crate::Ledger::admission_view`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionView {
    /// The account asked for, else the user's default account; `None` when neither exists.
    pub account: Option<String>,
    /// Whether the user is associated with `account`.
    pub associated: bool,
    /// `account`, its parent, …, `root` (empty when the account does not exist).
    pub chain: Vec<String>,
    /// The nearest closed account on `chain` (the account itself or an ancestor), if any: a
    /// closed account takes no new holds.
    pub closed: Option<String>,
    /// The allocations on the chain active at the moment, as balance rows (`allocated`,
    /// `charged`, `held`, `remaining` and `period` set; `available` is the least remaining
    /// of the row's own chain in its currency).
    pub allocations: Vec<BalanceRow>,
}

/// A price-table version to keep in the ledger (`0003_price_tables.sql`): `content` is the
/// table's canonical YAML, the other fields what listings show without parsing it. `origin` is
/// `imported` or `aws`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPriceTable {
    pub name: String,
    pub version: String,
    /// Unix seconds from which the table applies.
    pub effective: i64,
    pub currency: Currency,
    pub origin: String,
    pub row_count: i64,
    pub content: String,
    pub imported_at: i64,
    pub imported_by: String,
}

/// A price-table version as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPriceTable {
    pub id: i64,
    pub name: String,
    pub version: String,
    pub effective: i64,
    pub currency: Currency,
    pub origin: String,
    pub row_count: i64,
    pub content: String,
    pub imported_at: i64,
    pub imported_by: String,
}

/// The length of an allocation period, on the UTC calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewPeriod {
    Month,
    Quarter,
    Year,
}

impl RenewPeriod {
    pub fn months(self) -> i64 {
        match self {
            RenewPeriod::Month => 1,
            RenewPeriod::Quarter => 3,
            RenewPeriod::Year => 12,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RenewPeriod::Month => "month",
            RenewPeriod::Quarter => "quarter",
            RenewPeriod::Year => "year",
        }
    }
}

impl FromStr for RenewPeriod {
    type Err = LedgerError;

    fn from_str(text: &str) -> Result<RenewPeriod, LedgerError> {
        Ok(match text {
            "month" => RenewPeriod::Month,
            "quarter" => RenewPeriod::Quarter,
            "year" => RenewPeriod::Year,
            other => {
                return Err(LedgerError::Invalid(format!(
                    "{other:?} is not a period (month, quarter, year)"
                )))
            }
        })
    }
}

/// A renewal: the next period's allocation after `current`. `period` `None` repeats the
/// current period's length (a calendar month, quarter or year when it is one, else the same
/// number of seconds); `amount` `None` repeats the current amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewRequest {
    pub account: String,
    pub currency: Currency,
    /// The allocation covering this moment is the current one.
    pub at: i64,
    pub amount: Option<i64>,
    pub period: Option<RenewPeriod>,
}

/// What a renewal did: `created` is false when the next allocation existed already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    pub current: AllocationRow,
    pub next: AllocationRow,
    pub created: bool,
}

/// Moves `amount` (> 0) of `currency` from `from`'s allocation covering `at` to `to`'s: a
/// negative deposit on one and a positive one on the other, in one transaction, keyed
/// `{key}:from` and `{key}:to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub from: String,
    pub to: String,
    pub currency: Currency,
    pub amount: i64,
    pub at: i64,
    pub idempotency_key: String,
    pub note: Option<String>,
}

/// What a transfer did: `posted` is false when the key was used before (nothing changed);
/// the allocations as they are after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferOutcome {
    pub posted: bool,
    pub from: AllocationRow,
    pub to: AllocationRow,
}

/// A manual refund for a job: `job_id` is the cluster's job id (or its display id, such as
/// `123_4` for an array task); `cluster` narrows it when the id is on several clusters.
/// `amount` `None` refunds all that is left of the job's charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    pub cluster: Option<String>,
    pub job_id: String,
    pub amount: Option<i64>,
    pub idempotency_key: String,
    pub note: Option<String>,
}

/// What a refund did. `charged` is the job's current charge; `refunded` what has been given
/// back for it in all (this refund included); `amount` this refund (positive). `posted` is
/// false when the key was used before (nothing changed; `amount` is the earlier refund's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundOutcome {
    pub posted: bool,
    pub job: JobRow,
    pub amount: i64,
    pub charged: i64,
    pub refunded: i64,
    pub entry_id: i64,
}
