//! bursar's ledger: an append-only journal over a hierarchical account tree that holds
//! per-currency allocations, with balances, holds and usage rollups materialized in the same
//! transaction as the entries that move them.
//!
//! Module map:
//!
//! - [`Ledger`] (this file): the API. Validates input, reads the clock, delegates to a backend.
//! - [`model`]: what goes in and comes out (`UsageCharge`, `BalanceRow`, `UsageReport`, …).
//! - [`error`]: [`LedgerError`], variants a caller can act on; no database types.
//! - [`names`]: account, user, cluster and currency name rules.
//! - Domain rules, pure (no SQL, no I/O), shared by every backend:
//!   - [`posting`]: which entries a batch of job records produces (charge, adjustment,
//!     reversal and re-post), and the entries of holds;
//!   - [`materialize`]: how entries move allocations' `charged`/`held`, account totals and the
//!     daily rollup, accumulated per transaction and written once per row;
//!   - [`balances`]: balance rows from a snapshot of allocations and totals;
//!   - [`report`]: usage report grouping and assembly;
//!   - [`finance`]: account statements (reconciling to the micro) and top users/jobs;
//!   - [`forecast`]: burn rates (holds count as spent) and projected exhaustion dates;
//!   - [`alerts`]: threshold and projection alerts, fired once per crossing;
//!   - [`tree`], [`calendar`]: the account tree in memory; UTC days and months in integers.
//! - [`storage`]: the [`Storage`] trait, one transaction per method.
//! - [`sqlite`]: [`SqliteStorage`], the SQLite backend; the only place with SQL. Its
//!   migrations live in `ledger/migrations/sqlite/` and run at open.
//!
//! Money is `i64` micros with checked arithmetic; times are Unix epoch seconds, UTC. The
//! domain rules work on the storage's integer ids (accounts, and interned labels for
//! currencies, clusters, users, …): the posting path handles hundreds of thousands of records
//! a second, and integers hash, compare and bind far cheaper than strings.
#![deny(clippy::float_arithmetic)]

pub mod alerts;
pub mod balances;
pub mod calendar;
pub mod error;
pub mod finance;
pub mod forecast;
pub mod materialize;
pub mod model;
pub mod names;
pub mod posting;
pub mod report;
pub mod sqlite;
pub mod storage;
pub mod tree;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bursar_pricing::Currency;

pub use crate::alerts::{AlertKind, AlertPolicy, AlertRow, AlertRules};
pub use crate::error::{LedgerError, Result};
pub use crate::forecast::{Exhaustion, Forecast};
pub use crate::model::{
    AccountRow, AdmissionView, AdmitBatch, AdmitOutcome, AllocationRow, ApiJob, ApiJobsPage,
    AssociationRow, AuditEntry, BalanceRow, EntryKind, ForwardedJob, GroupKey, HoldRow, HoldState,
    JobPart, JobRow, JournalEntry, JournalQuery, NewAdmission, NewApiJob, NewAudit, NewEntry,
    NewHold, NewPriceTable, PostOutcome, QuarantineItem, QuarantineRow, RefundOutcome,
    RefundRequest, RenewPeriod, RenewRequest, Renewal, ReportSource, StoredPriceTable,
    TransferOutcome, TransferRequest, UsageCharge, UsageReport, UsageRow, UserRow, RERUN_STATES,
    SUBMIT_SKEW_SECS,
};
pub use crate::names::{AccountName, ROOT};
pub use crate::sqlite::SqliteStorage;
pub use crate::storage::{Storage, ViewRead};

use crate::names::{check_account, check_cluster, check_currency, check_present, check_user};
use crate::report::UsageGrouping;
use crate::storage::UsageSource;

/// The ledger. Cheap to clone; every clone shares the same database.
#[derive(Debug, Clone)]
pub struct Ledger {
    storage: Arc<dyn Storage>,
}

/// Seconds since the epoch, by the system clock.
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Ledger {
    /// Opens the ledger at `url` and applies pending migrations.
    ///
    /// - `sqlite://path/to/ledger.db`, `sqlite:ledger.db` or a bare path: SQLite, the file is
    ///   created if missing;
    /// - `sqlite::memory:`: a private in-memory SQLite database (tests);
    /// - `postgres://…`: not supported yet ([`LedgerError::Unsupported`]).
    pub async fn open(url: &str) -> Result<Ledger> {
        let scheme = url.split_once("://").map(|(s, _)| s);
        match scheme {
            Some("postgres" | "postgresql") => Err(LedgerError::Unsupported(
                "the PostgreSQL ledger backend is not supported yet; use sqlite://path".to_string(),
            )),
            Some("sqlite") | None => {
                let target = sqlite::SqliteTarget::parse(url)?;
                let storage = SqliteStorage::open(&target).await?;
                Ok(Ledger::with_storage(Arc::new(storage)))
            }
            Some(other) => Err(LedgerError::Invalid(format!(
                "unknown ledger URL scheme {other:?}: expected sqlite:// (or postgres:// later)"
            ))),
        }
    }

    /// A ledger over an already opened backend.
    pub fn with_storage(storage: Arc<dyn Storage>) -> Ledger {
        Ledger { storage }
    }

    /// `"sqlite"`, `"postgres"`: the backend in use.
    pub fn backend(&self) -> &'static str {
        self.storage.backend()
    }

    // --- accounts -------------------------------------------------------------------------

    /// Creates `name` under `parent` (`None` = root) unless it exists; `true` when created.
    /// An existing account is left where it is (see [`Ledger::set_parent`] to move it).
    pub async fn ensure_account(&self, name: &str, parent: Option<&str>) -> Result<bool> {
        check_account(name)?;
        let parent = parent.unwrap_or(ROOT);
        check_account(parent)?;
        if name == parent {
            return Err(LedgerError::Invalid(format!(
                "account {name:?} cannot be its own parent"
            )));
        }
        self.storage.ensure_account(name, parent, now()).await
    }

    /// Moves `name` under `parent` (`None` = root). Refuses to move `root` or to make a cycle
    /// ([`LedgerError::Conflict`]). Allocations of the old and new ancestors are recomputed.
    pub async fn set_parent(&self, name: &str, parent: Option<&str>) -> Result<()> {
        check_account(name)?;
        let parent = parent.unwrap_or(ROOT);
        check_account(parent)?;
        self.storage.set_parent(name, parent).await
    }

    /// Closes `name` at `at`: it and its subtree take no new holds (admission refuses them),
    /// allocations, increases of an allocation, deposits in or associations
    /// ([`LedgerError::AccountClosed`]); usage that still arrives for them is charged as
    /// always, and refunds and transfers out still work. Refused ([`LedgerError::Conflict`])
    /// while the subtree has active holds. `false` when it was closed already.
    pub async fn close_account(&self, name: &str, at: i64) -> Result<bool> {
        check_account(name)?;
        self.storage.close_account(name, at).await
    }

    /// Every account, sorted by name.
    pub async fn accounts(&self) -> Result<Vec<AccountRow>> {
        self.storage.accounts().await
    }

    /// `name`, its parent, …, `root`.
    pub async fn ancestors_or_self(&self, name: &str) -> Result<Vec<String>> {
        check_account(name)?;
        let accounts = self.storage.accounts().await?;
        let tree = tree::AccountTree::from_pairs(accounts.into_iter().map(|a| (a.name, a.parent)));
        let name = name.to_string();
        if !tree.contains(&name) {
            return Err(LedgerError::not_found("account", name));
        }
        Ok(tree.ancestors_or_self(&name).into_iter().cloned().collect())
    }

    // --- users ----------------------------------------------------------------------------

    /// Creates or updates a user; the default account becomes one of their associations.
    /// `true` when the user is new.
    pub async fn upsert_user(&self, name: &str, default_account: &str) -> Result<bool> {
        check_user(name)?;
        check_account(default_account)?;
        self.storage.upsert_user(name, default_account, now()).await
    }

    /// Lets `user` charge `account`; `true` when the association is new.
    pub async fn associate(&self, user: &str, account: &str) -> Result<bool> {
        check_user(user)?;
        check_account(account)?;
        self.storage.associate(user, account, now()).await
    }

    /// Removes `user`'s association with `account`; `false` when there was none. The user's
    /// default account is refused ([`LedgerError::Conflict`]): set another default first.
    pub async fn dissociate(&self, user: &str, account: &str) -> Result<bool> {
        check_user(user)?;
        check_account(account)?;
        self.storage.dissociate(user, account).await
    }

    pub async fn users(&self) -> Result<Vec<UserRow>> {
        self.storage.users().await
    }

    pub async fn associations(&self) -> Result<Vec<AssociationRow>> {
        self.storage.associations().await
    }

    // --- allocations ----------------------------------------------------------------------

    /// Allocates `amount` micros of `currency` to `account` for `[start, end)`.
    ///
    /// An allocation with exactly this period has its amount replaced; one that overlaps it
    /// otherwise is a [`LedgerError::Conflict`]. A new allocation's `charged`/`held` are
    /// backfilled from the journal in the same transaction. Each change of amount is recorded
    /// as a `deposit` entry.
    pub async fn set_allocation(
        &self,
        account: &str,
        currency: &Currency,
        amount: i64,
        start: i64,
        end: i64,
    ) -> Result<AllocationRow> {
        check_account(account)?;
        check_currency(currency)?;
        if amount < 0 {
            return Err(LedgerError::Invalid(format!(
                "allocation amount {amount} is negative"
            )));
        }
        if start >= end {
            return Err(LedgerError::Invalid(format!(
                "allocation period [{start}, {end}) is empty"
            )));
        }
        self.storage
            .set_allocation(account, currency, amount, start, end, now())
            .await
    }

    /// Every allocation with its materialized usage, by account, currency and start.
    pub async fn allocations(&self) -> Result<Vec<AllocationRow>> {
        self.storage.allocations().await
    }

    /// Creates the allocation of the period that follows the one covering `req.at` (the same
    /// amount unless `req.amount`; the same length unless `req.period`). Idempotent: when the
    /// next period's allocation exists, nothing changes ([`Renewal::created`] is false); asking
    /// for a different amount or period then is a [`LedgerError::Conflict`].
    pub async fn renew_allocation(&self, req: &RenewRequest) -> Result<Renewal> {
        check_account(&req.account)?;
        check_currency(&req.currency)?;
        if req.amount.is_some_and(|a| a < 0) {
            return Err(LedgerError::Invalid(
                "a renewal's amount must not be negative".to_string(),
            ));
        }
        self.storage.renew_allocation(req, now()).await
    }

    /// Moves money from one account's allocation to another's (both covering `req.at`) in
    /// one transaction: a negative deposit on `from`, a positive one on `to`. Refused with
    /// [`LedgerError::InsufficientRemaining`] when `from`'s remaining (allocated − charged −
    /// held) is less than the amount, and [`LedgerError::AccountClosed`] when `to` is closed.
    /// Idempotent by key ([`TransferOutcome::posted`] is false on a replay).
    pub async fn transfer(&self, req: &TransferRequest) -> Result<TransferOutcome> {
        check_account(&req.from)?;
        check_account(&req.to)?;
        check_currency(&req.currency)?;
        check_key(&req.idempotency_key)?;
        if req.from == req.to {
            return Err(LedgerError::Invalid(format!(
                "a transfer needs two accounts, not {:?} twice",
                req.from
            )));
        }
        if req.amount <= 0 {
            return Err(LedgerError::Invalid(
                "a transfer's amount must be positive".to_string(),
            ));
        }
        self.storage.transfer(req, now()).await
    }

    /// Refunds part or all of a job's charge to the account it was charged to, at the job's
    /// `effective_at` (the period that was charged). Capped inside the transaction at the
    /// job's current charge minus the refunds already given for it ([`LedgerError::Conflict`]
    /// above the cap). The entry names the job, so statements and the journal show it
    /// against the job. Idempotent by key.
    pub async fn refund_job(&self, req: &RefundRequest) -> Result<RefundOutcome> {
        check_present("job id", &req.job_id)?;
        if let Some(cluster) = &req.cluster {
            check_cluster(cluster)?;
        }
        check_key(&req.idempotency_key)?;
        self.storage.refund_job(req, now()).await
    }

    /// The entry posted under a caller's idempotency key, if any.
    pub async fn entry_by_key(&self, key: &str) -> Result<Option<JournalEntry>> {
        self.storage.entry_by_key(key).await
    }

    // --- journal --------------------------------------------------------------------------

    /// Posts a batch of priced job records in one transaction; see [`posting`] for the rules.
    ///
    /// Idempotent: posting a record again (or any revision of it already posted) changes
    /// nothing. Records for accounts the ledger doesn't know create those accounts under
    /// `root` ([`PostOutcome::created_accounts`]). A final record settles the active holds of
    /// its `(cluster, job_id)`.
    pub async fn post_usage(&self, batch: &[UsageCharge], posted_at: i64) -> Result<PostOutcome> {
        for (i, c) in batch.iter().enumerate() {
            let at = |e: LedgerError| {
                LedgerError::Invalid(format!(
                    "record {i} ({}:{}:{}): {e}",
                    c.cluster, c.job_id, c.submit
                ))
            };
            check_cluster(&c.cluster).map_err(at)?;
            check_present("job id", &c.job_id).map_err(at)?;
            check_present("revision", &c.revision).map_err(at)?;
            check_account(&c.account).map_err(at)?;
            check_currency(&c.currency).map_err(at)?;
            if c.amount_micros < 0 {
                return Err(at(LedgerError::Invalid(format!(
                    "amount {} is negative",
                    c.amount_micros
                ))));
            }
        }
        if batch.is_empty() {
            return Ok(PostOutcome::default());
        }
        self.storage.post_usage(batch, posted_at).await
    }

    /// Posts a manual deposit, adjustment or refund (see [`NewEntry`] for signs). Idempotent
    /// by key: `false` when the same entry was posted before; a different entry under the same
    /// key is a [`LedgerError::Conflict`].
    pub async fn post_entry(&self, entry: &NewEntry) -> Result<bool> {
        check_account(&entry.account)?;
        check_currency(&entry.currency)?;
        check_key(&entry.idempotency_key)?;
        match entry.kind {
            EntryKind::Deposit | EntryKind::Adjustment if entry.amount == 0 => {
                return Err(LedgerError::Invalid(format!("{} of 0", entry.kind)));
            }
            EntryKind::Deposit | EntryKind::Adjustment => {}
            EntryKind::Refund if entry.amount >= 0 => {
                return Err(LedgerError::Invalid(
                    "a refund gives usage back: its amount must be negative".to_string(),
                ));
            }
            EntryKind::Refund => {}
            EntryKind::Charge | EntryKind::Hold | EntryKind::Release => {
                return Err(LedgerError::Invalid(format!(
                    "{} entries are posted by post_usage and the hold methods, not by hand",
                    entry.kind
                )));
            }
        }
        self.storage.post_entry(entry, now()).await
    }

    /// Journal entries in posting order; see [`JournalQuery`].
    pub async fn journal(&self, query: &JournalQuery) -> Result<Vec<JournalEntry>> {
        self.storage.journal(query).await
    }

    /// The current posting of a job identity, if any.
    pub async fn job(&self, cluster: &str, job_id: &str, submit: i64) -> Result<Option<JobRow>> {
        self.storage.job(cluster, job_id, submit).await
    }

    /// The journal entries of the jobs `(cluster, job id)`: for each, what [`Ledger::journal`]
    /// lists for that cluster and job id (every submission's postings and the refunds given
    /// for them); each entry once, in posting order. One read however many jobs are asked
    /// for, each through the journal's job indexes: a job view's charges, a reconciliation's
    /// jobs, without reading the rest of the journal.
    pub async fn jobs_journal(&self, jobs: &[(String, String)]) -> Result<Vec<JournalEntry>> {
        self.storage.jobs_journal(jobs).await
    }

    /// Every job a cluster (or the ledger) ever charged, a page at a time: the journal entries
    /// of the next `limit` job identities after the one numbered `after` (0 for the first
    /// page), of `cluster` when given — each with all its postings and the refunds given for
    /// it, in posting order — and the number to ask after next; `None` when no job is left.
    /// Identities are numbered as they were first posted, so pages follow the journal's order
    /// of first appearance, and memory is bounded by the page, not the ledger.
    pub async fn jobs_journal_page(
        &self,
        cluster: Option<&str>,
        after: i64,
        limit: u32,
    ) -> Result<(Vec<JournalEntry>, Option<i64>)> {
        if limit == 0 {
            return Err(LedgerError::Invalid("a page of 0 jobs".to_string()));
        }
        self.storage.jobs_journal_page(cluster, after, limit).await
    }

    // --- holds ----------------------------------------------------------------------------

    /// Places a hold without checking balances (an admin override). Idempotent by key.
    pub async fn place_hold(&self, hold: &NewHold) -> Result<HoldRow> {
        check_hold(hold)?;
        self.storage.place_hold(hold, false).await
    }

    /// Places a hold only if every ancestor-or-self with an allocation in the hold's currency
    /// covering `placed_at` has `remaining ≥ amount`, in the same transaction (admission).
    ///
    /// Refuses with [`LedgerError::InsufficientAllocation`] naming the link with the least
    /// remaining, or [`LedgerError::NoAllocation`] when no link has an allocation. Placing an
    /// existing key again returns the first hold without checking.
    pub async fn try_place_hold(&self, hold: &NewHold) -> Result<HoldRow> {
        check_hold(hold)?;
        self.storage.place_hold(hold, true).await
    }

    /// Admits a batch of submissions in one write transaction (group commit): for each, in
    /// order, the hold is placed only if every allocation on the chain covering its
    /// `placed_at` can take it after the submissions before it in the batch (as
    /// [`Ledger::try_place_hold`] checks), and the API job is recorded with it. A submission
    /// whose job idempotency key was used before gets [`AdmitOutcome::Existing`]; a refused
    /// one [`LedgerError::InsufficientAllocation`] or [`LedgerError::NoAllocation`]; one
    /// repeating the key of an earlier submission of the same batch a
    /// [`LedgerError::Conflict`]. One outcome per submission, in order; an `Err` of the whole
    /// call means nothing was written.
    pub async fn admit(
        &self,
        batch: &[NewAdmission],
        now: i64,
    ) -> Result<Vec<Result<AdmitOutcome>>> {
        Ok(self.admit_recording(batch, &[], now).await?.outcomes)
    }

    /// [`Ledger::admit`], and the records of jobs their clusters accepted, in one
    /// transaction: each hold is linked to the cluster's job (unless linked already) and each
    /// API job gets its cluster job id. The jobs forwarded since the last batch ride in the
    /// next one, which costs them no transaction of their own; `batch` may be empty. A
    /// forwarded job whose API job is not found is reported in [`AdmitBatch::unrecorded`]
    /// (the rest is written); an `Err` of the whole call means nothing was written.
    pub async fn admit_recording(
        &self,
        batch: &[NewAdmission],
        forwarded: &[ForwardedJob],
        now: i64,
    ) -> Result<AdmitBatch> {
        for admission in batch {
            check_admission(admission)?;
        }
        check_forwarded(forwarded)?;
        self.storage.admit(batch, forwarded, now).await
    }

    /// Admits one submission (its hold and job), group-committed: the submissions queued
    /// meanwhile by any task share one transaction, decided in order exactly as separate
    /// transactions would decide them, with the records of the jobs forwarded since
    /// ([`Ledger::queue_forwarded`]). At one submission at a time nothing waits; under load
    /// the transaction's cost is shared. A used job key gives [`AdmitOutcome::Existing`].
    pub async fn admit_queued(&self, admission: NewAdmission, now: i64) -> Result<AdmitOutcome> {
        check_admission(&admission)?;
        self.storage.admit_queued(admission, now).await
    }

    /// Queues the record of a job its cluster accepted (see [`ForwardedJob`]) without waiting
    /// for it: it rides in the next admission's transaction, or is written alone within a few
    /// milliseconds. Readers that must see it call [`Ledger::forwarded_settled`] first. A
    /// record that cannot be written is logged; its hold then expires instead of settling.
    pub fn queue_forwarded(&self, job: ForwardedJob) -> Result<()> {
        check_forwarded(std::slice::from_ref(&job))?;
        self.storage.queue_forwarded(job)
    }

    /// Waits until every forwarded job queued before this call is written (or has failed and
    /// been logged).
    pub async fn forwarded_settled(&self) {
        self.storage.forwarded_settled().await;
    }

    /// Moves committed data from the write-ahead log into the database, beside the writer
    /// instead of in its way. After the first call, writes no longer do this at commit (which
    /// stalls every queued write for as long as the copy and sync take), so a long-running
    /// process that calls it must keep calling it, e.g. every second (`bursar serve` does).
    /// Short-lived processes need not call it at all.
    pub async fn checkpoint(&self) -> Result<()> {
        self.storage.checkpoint().await
    }

    /// The account a submission of `user` is charged to (`account`, else the user's
    /// default), whether the user is associated with it, its chain and the chain's
    /// allocations in force at `at`: everything a quote reads, in one snapshot.
    pub async fn admission_view(
        &self,
        user: &str,
        account: Option<&str>,
        at: i64,
    ) -> Result<AdmissionView> {
        self.storage
            .admission_view(user, account, at, ViewRead::Now)
            .await
    }

    /// [`Ledger::admission_view`] as fresh as `read` asks ([`ViewRead`]): `Preview` (quotes)
    /// and `Admission` may come from a cache that every write through this ledger empties at
    /// once and a write by another process empties for the next read (see
    /// `sqlite::view_cache`); `Admission` may also predate holds placed and jobs recorded by
    /// [`Ledger::admit`] since (they only lower what remains; the decision is `admit`'s, on
    /// the data). A caller about to refuse for money reads `ViewRead::Now` first.
    pub async fn admission_view_as(
        &self,
        user: &str,
        account: Option<&str>,
        at: i64,
        read: ViewRead,
    ) -> Result<AdmissionView> {
        self.storage.admission_view(user, account, at, read).await
    }

    /// Records the cluster's job id of a hold placed before the job was forwarded.
    pub async fn link_hold(&self, hold_id: i64, cluster_job_id: &str) -> Result<()> {
        check_present("job id", cluster_job_id)?;
        self.storage.link_hold(hold_id, cluster_job_id).await
    }

    /// Releases an active hold at `at`; `false` when it was already closed.
    pub async fn release_hold(&self, hold_id: i64, reason: &str, at: i64) -> Result<bool> {
        self.storage.release_hold(hold_id, reason, at).await
    }

    /// Settles an active hold at `at` whose job's final usage is already posted (a record
    /// [`Ledger::holds_to_confirm`] lists, once its cluster says the job will not run again);
    /// `false` when it was already closed.
    pub async fn settle_hold(&self, hold_id: i64, reason: &str, at: i64) -> Result<bool> {
        self.storage.settle_hold(hold_id, reason, at).await
    }

    /// Keeps the active hold `id` a whole lifetime (the time limit + grace it was placed with)
    /// past `at`, for a job the cluster says still waits; `false` when it is not active or
    /// already lives that long.
    pub async fn extend_hold(&self, hold_id: i64, at: i64) -> Result<bool> {
        self.storage.extend_hold(hold_id, at).await
    }

    /// Expires every active hold with `expires_at ≤ now`; returns how many. The API jobs of
    /// those holds that have not ended yet are marked `expired` in the same transaction.
    pub async fn expire_holds(&self, now: i64) -> Result<u64> {
        self.storage.expire_holds(now).await
    }

    /// Every hold, by id; only the active ones with `active_only`. Without it this reads the
    /// ledger's whole history: [`Ledger::holds_by_id`] and [`Ledger::holds_at`] read only what
    /// they name.
    pub async fn holds(&self, active_only: bool) -> Result<Vec<HoldRow>> {
        self.storage.holds(active_only).await
    }

    /// How many holds are active: a count through the active holds' index, without reading
    /// them.
    pub async fn active_holds_count(&self) -> Result<u64> {
        self.storage.active_holds_count().await
    }

    /// The holds with one of `ids`, by id; ids of no hold are left out. Reads by primary key,
    /// however many holds the ledger has.
    pub async fn holds_by_id(&self, ids: &[i64]) -> Result<Vec<HoldRow>> {
        self.storage.holds_by_id(ids).await
    }

    /// The holds that were open at `at`: placed at or before it, and active or closed after
    /// it; by id. Reads the active holds and those closed after `at` through their indexes,
    /// not the holds closed before (at `at` = now, none of the closed ones).
    pub async fn holds_at(&self, at: i64) -> Result<Vec<HoldRow>> {
        self.storage.holds_at(at).await
    }

    /// The active holds [`expire_holds`](Ledger::expire_holds) would close at `now`, by id.
    pub async fn holds_due(&self, now: i64) -> Result<Vec<HoldRow>> {
        self.storage.holds_due(now).await
    }

    /// The active holds whose job's latest record ended it in a state after which Slurm may
    /// run it again under the same id ([`RERUN_STATES`]: a requeue after a node failure or a
    /// preemption). Such a record does not settle the hold: the gateway asks the cluster
    /// whether the job waits to run again, and settles the hold
    /// ([`Ledger::settle_hold`]) if not. By id.
    pub async fn holds_to_confirm(&self) -> Result<Vec<HoldRow>> {
        self.storage.holds_to_confirm().await
    }

    /// The API jobs that hold nothing (an estimate of 0), still `held`, whose latest record
    /// ended them in a state after which Slurm may run them again ([`RERUN_STATES`]), by id:
    /// the gateway asks their cluster, and records them `settled` if the job will not run
    /// again ([`Ledger::settle_free_job`]).
    pub async fn free_jobs_to_confirm(&self) -> Result<Vec<ApiJob>> {
        self.storage.free_jobs_to_confirm().await
    }

    /// Records the API job `id`, which holds nothing, `settled` at `at` if it is still `held`;
    /// `false` when it is not (settled, cancelled or failed meanwhile, or it has a hold).
    /// The final record that ends such a job settles it as it is posted; this is for the
    /// others ([`Ledger::free_jobs_to_confirm`], and older jobs a view finds ended).
    pub async fn settle_free_job(&self, id: i64, at: i64) -> Result<bool> {
        self.storage.settle_free_job(id, at).await
    }

    // --- balances and reports -------------------------------------------------------------

    /// Balances at `at` of every account, for every currency it has an allocation active at
    /// `at` or any usage or holds in (its subtree's); see [`BalanceRow`].
    pub async fn balances(&self, at: i64) -> Result<Vec<BalanceRow>> {
        let snapshot = self.storage.balance_snapshot().await?;
        balances::compute(&snapshot, at, None)
    }

    /// The balances of one account at `at`, one row per currency.
    pub async fn balance(&self, account: &str, at: i64) -> Result<Vec<BalanceRow>> {
        check_account(account)?;
        let snapshot = self.storage.balance_snapshot().await?;
        if !snapshot.accounts.iter().any(|a| a.name == account) {
            return Err(LedgerError::not_found("account", account));
        }
        balances::compute(&snapshot, at, Some(account))
    }

    /// Usage with `effective_at ∈ [from, to)` grouped by account, currency and `group_by`;
    /// from the daily rollup when `from` and `to` are on UTC day boundaries, else from the
    /// journal. Rows of a currency sum exactly to its total.
    pub async fn usage_report(
        &self,
        from: i64,
        to: i64,
        group_by: &[GroupKey],
    ) -> Result<UsageReport> {
        self.usage_report_from(ReportSource::Auto, from, to, group_by)
            .await
    }

    /// [`Ledger::usage_report`] from an explicit source. [`ReportSource::Rollup`] needs
    /// `from` and `to` on UTC day boundaries.
    pub async fn usage_report_from(
        &self,
        source: ReportSource,
        from: i64,
        to: i64,
        group_by: &[GroupKey],
    ) -> Result<UsageReport> {
        if from > to {
            return Err(LedgerError::Invalid(format!(
                "report range [{from}, {to}) ends before it starts"
            )));
        }
        let aligned = calendar::is_day_start(from) && calendar::is_day_start(to);
        let source = match source {
            ReportSource::Auto => UsageSource::Indexed,
            ReportSource::Journal => UsageSource::Journal,
            ReportSource::Rollup if aligned => UsageSource::Rollup,
            ReportSource::Rollup => {
                return Err(LedgerError::Invalid(format!(
                    "the daily rollup only answers ranges on UTC day boundaries, not [{from}, {to})"
                )))
            }
        };
        let lines = self
            .storage
            .usage_lines(source, from, to, UsageGrouping::of(group_by))
            .await?;
        report::assemble(from, to, group_by, lines)
    }

    // --- quarantine, cursors, verification -------------------------------------------------

    /// Keeps lines bursar could not use; the same (source, line, raw) is kept once. Returns
    /// how many were new.
    pub async fn quarantine_add(&self, items: &[QuarantineItem]) -> Result<u64> {
        self.storage.quarantine_add(items, now()).await
    }

    pub async fn quarantine_list(&self) -> Result<Vec<QuarantineRow>> {
        self.storage.quarantine_list().await
    }

    /// A collector's saved position for `cluster`.
    pub async fn get_cursor(&self, cluster: &str) -> Result<Option<String>> {
        self.storage.get_cursor(cluster).await
    }

    pub async fn set_cursor(&self, cluster: &str, value: &str) -> Result<()> {
        check_cluster(cluster)?;
        self.storage.set_cursor(cluster, value, now()).await
    }

    /// Recomputes every materialized number (allocations, totals, daily rollup, job postings,
    /// active holds) from the journal; returns the differences, empty when consistent.
    pub async fn verify(&self) -> Result<Vec<String>> {
        self.storage.verify().await
    }

    // --- audit log ------------------------------------------------------------------------

    /// Appends an entry to the audit log (append-only); returns its id. The caller (the
    /// gateway) records every administrative change with the object before and after.
    pub async fn audit(&self, entry: &NewAudit) -> Result<i64> {
        check_present("audit actor", &entry.actor)?;
        check_present("audit role", &entry.role)?;
        check_present("audit action", &entry.action)?;
        check_present("audit target", &entry.target)?;
        self.storage.audit(entry).await
    }

    /// The audit log, newest first, at most `limit` entries (all when `None`).
    pub async fn audit_log(&self, limit: Option<u32>) -> Result<Vec<AuditEntry>> {
        self.storage.audit_log(None, limit).await
    }

    /// A page of the audit log: the newest `limit` entries with an id below `before` (any id
    /// when `None`), newest first. Read through the primary key, whatever the log's length.
    pub async fn audit_page(&self, before: Option<i64>, limit: u32) -> Result<Vec<AuditEntry>> {
        self.storage.audit_log(before, Some(limit)).await
    }

    // --- price tables ---------------------------------------------------------------------

    /// Keeps a price-table version, with its audit entry in the same transaction. `Ok(true)`
    /// when stored; `Ok(false)` when the same (name, version) with the same content was
    /// stored already (nothing written, nothing audited); [`LedgerError::Conflict`] when that
    /// version is stored with other content. The caller parses and validates the table.
    pub async fn store_price_table(
        &self,
        table: &NewPriceTable,
        audit: &NewAudit,
    ) -> Result<(bool, StoredPriceTable)> {
        check_present("price table name", &table.name)?;
        check_present("price table version", &table.version)?;
        check_currency(&table.currency)?;
        if !matches!(table.origin.as_str(), "imported" | "aws") {
            return Err(LedgerError::Invalid(format!(
                "price table origin {:?} is neither imported nor aws",
                table.origin
            )));
        }
        check_present("audit actor", &audit.actor)?;
        check_present("audit action", &audit.action)?;
        self.storage.store_price_table(table, audit).await
    }

    /// Every stored price-table version, in the order they were stored.
    pub async fn price_tables(&self) -> Result<Vec<StoredPriceTable>> {
        self.storage.price_tables().await
    }

    /// Changes whenever a price-table version is stored: lets a long-running process reload
    /// its prices only when there is something new.
    pub async fn price_tables_stamp(&self) -> Result<(i64, i64)> {
        self.storage.price_tables_stamp().await
    }

    // --- jobs submitted through the API ---------------------------------------------------

    /// Records a job submitted through the gateway's API. A used idempotency key is a
    /// [`LedgerError::Conflict`] (look it up first with [`Ledger::api_job_by_key`]); an
    /// unknown `hold_id` is [`LedgerError::NotFound`].
    pub async fn create_api_job(&self, job: &NewApiJob) -> Result<ApiJob> {
        if let Some(key) = &job.idempotency_key {
            check_present("idempotency key", key)?;
        }
        check_present("actor", &job.actor)?;
        check_user(&job.user)?;
        check_account(&job.account)?;
        check_cluster(&job.cluster)?;
        check_currency(&job.currency)?;
        check_present("job state", &job.state)?;
        if job.estimate < 0 {
            return Err(LedgerError::Invalid(format!(
                "estimate {} is negative",
                job.estimate
            )));
        }
        self.storage.create_api_job(job).await
    }

    pub async fn api_job(&self, id: i64) -> Result<Option<ApiJob>> {
        self.storage.api_job(id).await
    }

    pub async fn api_job_by_key(&self, key: &str) -> Result<Option<ApiJob>> {
        self.storage.api_job_by_key(key).await
    }

    /// Sets an API job's state at `at`, and its cluster job id when given (kept otherwise).
    /// [`LedgerError::NotFound`] for an unknown id.
    pub async fn update_api_job(
        &self,
        id: i64,
        state: &str,
        cluster_job_id: Option<&str>,
        at: i64,
    ) -> Result<()> {
        check_present("job state", state)?;
        if let Some(job_id) = cluster_job_id {
            check_present("cluster job id", job_id)?;
        }
        self.storage
            .update_api_job(id, state, cluster_job_id, at)
            .await
    }

    /// API jobs by id, only `user`'s and/or `account`'s when given.
    pub async fn api_jobs(&self, user: Option<&str>, account: Option<&str>) -> Result<Vec<ApiJob>> {
        self.storage.api_jobs(user, account).await
    }

    /// A page of API jobs, newest first: at most `page.limit` of those matching its filters
    /// with an id below `page.before` (see [`ApiJobsPage`] for `state`). A user's jobs are
    /// read through their index, so a page costs the same however many jobs there are.
    pub async fn api_jobs_page(&self, page: &ApiJobsPage) -> Result<Vec<ApiJob>> {
        self.storage.api_jobs_page(page).await
    }

    /// The API jobs on `cluster` that the cluster knows by one of `cluster_job_ids` (Slurm job
    /// ids, dstack run names), by id; ids of no such job are left out. Reads through an index,
    /// however many jobs the ledger holds. Jobs forwarded a moment ago are found once their
    /// records are written ([`Ledger::forwarded_settled`]).
    pub async fn api_jobs_on(
        &self,
        cluster: &str,
        cluster_job_ids: &[String],
    ) -> Result<Vec<ApiJob>> {
        self.storage.api_jobs_on(cluster, cluster_job_ids).await
    }

    /// The API jobs whose hold is one of `hold_ids`, by id: what the cluster knows each hold's
    /// job by ([`ApiJob::cluster_job_id`]). Reads through an index. Jobs forwarded a moment ago
    /// are found once their records are written ([`Ledger::forwarded_settled`]).
    pub async fn api_jobs_holding(&self, hold_ids: &[i64]) -> Result<Vec<ApiJob>> {
        self.storage.api_jobs_holding(hold_ids).await
    }

    /// Records usage records of API jobs that have several (a dstack run's job submissions,
    /// [`JobPart`]) so that a job's charge sums them all. A record is a part of one job: one
    /// recorded before for another job moves to this one. Returns how many were new or moved.
    pub async fn record_job_parts(&self, parts: &[JobPart]) -> Result<u64> {
        if parts.is_empty() {
            return Ok(0);
        }
        self.storage.record_job_parts(parts).await
    }

    /// The parts recorded for the API jobs `api_job_ids` ([`Ledger::record_job_parts`]), by
    /// job, job id and submit. Reads through the table's key.
    pub async fn job_parts(&self, api_job_ids: &[i64]) -> Result<Vec<JobPart>> {
        if api_job_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.storage.job_parts(api_job_ids).await
    }
}

/// A caller's idempotency key: present, and not in the ledger's own namespace.
fn check_key(key: &str) -> Result<()> {
    check_present("idempotency key", key)?;
    if let Some(prefix) = posting::RESERVED_KEY_PREFIXES
        .iter()
        .find(|p| key.starts_with(**p))
    {
        return Err(LedgerError::Invalid(format!(
            "idempotency key {key:?}: keys starting with {prefix:?} are the ledger's own"
        )));
    }
    Ok(())
}

/// A submission's hold is valid and names the job's account, currency and cluster.
fn check_admission(admission: &NewAdmission) -> Result<()> {
    if let Some(hold) = &admission.hold {
        check_hold(hold)?;
        if hold.account != admission.job.account
            || hold.currency != admission.job.currency
            || hold.cluster != admission.job.cluster
        {
            return Err(LedgerError::Invalid(
                "a submission's hold and job name different accounts, currencies or clusters"
                    .to_string(),
            ));
        }
    }
    Ok(())
}

fn check_forwarded(jobs: &[ForwardedJob]) -> Result<()> {
    for job in jobs {
        check_present("job id", &job.settle_ref)?;
        check_present("job id", &job.cluster_job_id)?;
    }
    Ok(())
}

fn check_hold(hold: &NewHold) -> Result<()> {
    check_account(&hold.account)?;
    check_currency(&hold.currency)?;
    check_cluster(&hold.cluster)?;
    check_present("idempotency key", &hold.idempotency_key)?;
    if hold.amount <= 0 {
        return Err(LedgerError::Invalid(format!(
            "hold amount {} must be positive",
            hold.amount
        )));
    }
    if hold.expires_at <= hold.placed_at {
        return Err(LedgerError::Invalid(format!(
            "hold expires at {} but is placed at {}",
            hold.expires_at, hold.placed_at
        )));
    }
    Ok(())
}
