//! The [`Storage`] trait: one implementation per database, chosen by [`crate::Ledger::open`].
//!
//! Every method is one transaction. Inputs arrive validated by [`crate::Ledger`] (names,
//! signs, periods); a backend checks what needs the database (existence, overlaps, idempotency
//! keys) and applies the domain rules of [`crate::posting`], [`crate::materialize`],
//! [`crate::balances`] and [`crate::report`], which know no SQL.

use async_trait::async_trait;
use bursar_pricing::Currency;

use crate::alerts::{AlertRow, NewAlert};
use crate::balances::BalanceSnapshot;
use crate::error::Result;
use crate::finance::{TopBy, TopRow};
use crate::model::{
    AccountRow, AdmissionView, AdmitBatch, AdmitOutcome, AllocationRow, ApiJob, ApiJobsPage,
    AssociationRow, AuditEntry, ForwardedJob, HoldRow, JobPart, JobRow, JournalEntry, JournalQuery,
    NewAdmission, NewApiJob, NewAudit, NewEntry, NewHold, NewPriceTable, PostOutcome,
    QuarantineItem, QuarantineRow, RefundOutcome, RefundRequest, RenewRequest, Renewal,
    StoredPriceTable, TransferOutcome, TransferRequest, UsageCharge, UserRow,
};
use crate::report::{UsageGrouping, UsageLine};

/// How fresh [`Storage::admission_view`] must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewRead {
    /// Read now.
    Now,
    /// For a preview (a quote): may come from a cache that every write of this storage
    /// empties and that a commit of any other connection empties for the next read.
    Preview,
    /// For admission, which decides in [`Storage::admit`] on the data itself: may also be
    /// older than holds placed and jobs recorded since by this storage (they only lower what
    /// remains), but not than any other write of this storage, nor than one second.
    Admission,
}

/// Where a backend reads usage lines from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// The daily rollup; `from` and `to` are on UTC day boundaries.
    Rollup,
    /// The journal, entry by entry.
    Journal,
    /// Any range: the daily rollup for the whole UTC days inside it, the journal through its
    /// (account, currency, time) index for the partial days at either end. The same lines as
    /// `Journal`, in one snapshot.
    Indexed,
}

/// What a statement reads (see [`crate::finance`]): for `account`'s subtree in one currency,
/// the balance effect of the entries with `effective_at ∈ [window_start, from)` and the
/// movements in `[from, to)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementReads {
    /// Σ deposit entries of the account itself in `[window_start, from)`.
    pub deposits_before: i64,
    /// Σ usage entries (charges, adjustments, refunds) of the subtree in `[window_start, from)`.
    pub usage_before: i64,
    /// The subtree's entries in `[from, to)` (deposits: the account's own), in posting order.
    pub lines: Vec<JournalEntry>,
}

/// A ledger database. See the methods of [`crate::Ledger`] for the semantics; `now` arguments
/// are the caller's clock, in epoch seconds.
#[async_trait]
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// A short name for logs: `"sqlite"`, `"postgres"`.
    fn backend(&self) -> &'static str;

    async fn ensure_account(&self, name: &str, parent: &str, now: i64) -> Result<bool>;
    async fn set_parent(&self, name: &str, parent: &str) -> Result<()>;
    async fn accounts(&self) -> Result<Vec<AccountRow>>;
    async fn close_account(&self, name: &str, now: i64) -> Result<bool>;

    async fn upsert_user(&self, name: &str, default_account: &str, now: i64) -> Result<bool>;
    async fn associate(&self, user: &str, account: &str, now: i64) -> Result<bool>;
    async fn dissociate(&self, user: &str, account: &str) -> Result<bool>;
    async fn users(&self) -> Result<Vec<UserRow>>;
    async fn associations(&self) -> Result<Vec<AssociationRow>>;

    async fn set_allocation(
        &self,
        account: &str,
        currency: &Currency,
        amount: i64,
        start: i64,
        end: i64,
        now: i64,
    ) -> Result<AllocationRow>;
    async fn allocations(&self) -> Result<Vec<AllocationRow>>;
    async fn renew_allocation(&self, req: &RenewRequest, now: i64) -> Result<Renewal>;
    async fn transfer(&self, req: &TransferRequest, now: i64) -> Result<TransferOutcome>;
    async fn refund_job(&self, req: &RefundRequest, now: i64) -> Result<RefundOutcome>;
    async fn entry_by_key(&self, key: &str) -> Result<Option<JournalEntry>>;

    async fn post_usage(&self, batch: &[UsageCharge], posted_at: i64) -> Result<PostOutcome>;
    async fn post_entry(&self, entry: &NewEntry, posted_at: i64) -> Result<bool>;
    async fn journal(&self, query: &JournalQuery) -> Result<Vec<JournalEntry>>;
    /// Usage entries (charges, adjustments, reversals, reposts, refunds) with `effective_at`
    /// in `[from, to)`, by `effective_at` then id, read through the time index (none of the
    /// rest of the journal).
    async fn usage_entries(&self, from: i64, to: i64) -> Result<Vec<JournalEntry>>;
    /// The ranking of [`crate::finance::top`] over the usage in `[from, to)`, summed and
    /// ranked by the database (the period read through the time index).
    async fn top(
        &self,
        by: TopBy,
        from: i64,
        to: i64,
        currency: Option<&Currency>,
        limit: usize,
    ) -> Result<Vec<TopRow>>;
    /// The earliest and latest `effective_at` of any journal entry in `[from, to)`, `None`
    /// when there is none: where [`Storage::usage_entries`] is worth asking.
    async fn journal_span(&self, from: i64, to: i64) -> Result<Option<(i64, i64)>>;
    async fn job(&self, cluster: &str, job_id: &str, submit: i64) -> Result<Option<JobRow>>;
    /// The journal entries of the `(cluster, job id)` pairs (see
    /// [`crate::Ledger::jobs_journal`]).
    async fn jobs_journal(&self, jobs: &[(String, String)]) -> Result<Vec<JournalEntry>>;
    /// The journal entries of the next `limit` job identities after number `after` (see
    /// [`crate::Ledger::jobs_journal_page`]).
    async fn jobs_journal_page(
        &self,
        cluster: Option<&str>,
        after: i64,
        limit: u32,
    ) -> Result<(Vec<JournalEntry>, Option<i64>)>;

    /// Places a hold; with `check`, refuses it unless every allocation on the chain covering
    /// `placed_at` has `remaining ≥ amount` (and at least one exists).
    async fn place_hold(&self, hold: &NewHold, check: bool) -> Result<HoldRow>;
    async fn link_hold(&self, id: i64, job_ref: &str) -> Result<()>;
    async fn release_hold(&self, id: i64, reason: &str, at: i64) -> Result<bool>;
    async fn settle_hold(&self, id: i64, reason: &str, at: i64) -> Result<bool>;
    async fn expire_holds(&self, now: i64) -> Result<u64>;
    async fn extend_hold(&self, id: i64, at: i64) -> Result<bool>;
    async fn holds(&self, active_only: bool) -> Result<Vec<HoldRow>>;
    async fn holds_due(&self, now: i64) -> Result<Vec<HoldRow>>;
    /// The holds waiting to learn whether their job runs again (see
    /// [`crate::Ledger::holds_to_confirm`]).
    async fn holds_to_confirm(&self) -> Result<Vec<HoldRow>>;
    /// The API jobs without a hold waiting to learn the same (see
    /// [`crate::Ledger::free_jobs_to_confirm`]).
    async fn free_jobs_to_confirm(&self) -> Result<Vec<ApiJob>>;
    /// Records a job that holds nothing `settled` if it is still `held`.
    async fn settle_free_job(&self, id: i64, at: i64) -> Result<bool>;
    /// How many holds are active.
    async fn active_holds_count(&self) -> Result<u64>;
    /// The holds with one of `ids`, by id (see [`crate::Ledger::holds_by_id`]).
    async fn holds_by_id(&self, ids: &[i64]) -> Result<Vec<HoldRow>>;
    /// The holds placed at or before `at` and not closed by then (see
    /// [`crate::Ledger::holds_at`]).
    async fn holds_at(&self, at: i64) -> Result<Vec<HoldRow>>;

    async fn balance_snapshot(&self) -> Result<BalanceSnapshot>;
    async fn usage_lines(
        &self,
        source: UsageSource,
        from: i64,
        to: i64,
        grouping: UsageGrouping,
    ) -> Result<Vec<UsageLine>>;

    /// The reads of a statement, in one snapshot; `Ok(None)` when the account does not
    /// exist. A currency the ledger has never seen has no entries.
    async fn statement_reads(
        &self,
        account: &str,
        currency: &Currency,
        window_start: i64,
        from: i64,
        to: i64,
    ) -> Result<Option<StatementReads>>;

    async fn quarantine_add(&self, items: &[QuarantineItem], now: i64) -> Result<u64>;
    async fn quarantine_list(&self) -> Result<Vec<QuarantineRow>>;

    async fn get_cursor(&self, cluster: &str) -> Result<Option<String>>;
    async fn set_cursor(&self, cluster: &str, value: &str, now: i64) -> Result<()>;

    /// Recomputes every materialized number from the journal and lists the differences
    /// (empty when the ledger is consistent).
    async fn verify(&self) -> Result<Vec<String>>;

    /// Appends to the audit log; returns the entry's id.
    async fn audit(&self, entry: &NewAudit) -> Result<i64>;
    /// The newest audit entries first, at most `limit`; with `before`, only entries with a
    /// smaller id.
    async fn audit_log(&self, before: Option<i64>, limit: Option<u32>) -> Result<Vec<AuditEntry>>;

    /// Records an API job; a used idempotency key is a [`crate::LedgerError::Conflict`].
    async fn create_api_job(&self, job: &NewApiJob) -> Result<ApiJob>;
    async fn api_job(&self, id: i64) -> Result<Option<ApiJob>>;
    async fn api_job_by_key(&self, key: &str) -> Result<Option<ApiJob>>;
    async fn update_api_job(
        &self,
        id: i64,
        state: &str,
        cluster_job_id: Option<&str>,
        at: i64,
    ) -> Result<()>;
    async fn api_jobs(&self, user: Option<&str>, account: Option<&str>) -> Result<Vec<ApiJob>>;
    /// A page of API jobs, newest first (see [`crate::Ledger::api_jobs_page`]).
    async fn api_jobs_page(&self, page: &ApiJobsPage) -> Result<Vec<ApiJob>>;
    /// The API jobs on `cluster` known there by one of `cluster_job_ids` (see
    /// [`crate::Ledger::api_jobs_on`]).
    async fn api_jobs_on(&self, cluster: &str, cluster_job_ids: &[String]) -> Result<Vec<ApiJob>>;
    /// The API jobs whose hold is one of `hold_ids` (see [`crate::Ledger::api_jobs_holding`]).
    async fn api_jobs_holding(&self, hold_ids: &[i64]) -> Result<Vec<ApiJob>>;
    /// Records the parts, each as the part of its job only, in one transaction; returns how
    /// many were new or moved.
    async fn record_job_parts(&self, parts: &[JobPart]) -> Result<u64>;
    /// The parts of the API jobs `api_job_ids`, by job, job id and submit.
    async fn job_parts(&self, api_job_ids: &[i64]) -> Result<Vec<JobPart>>;

    /// What a quote reads about `user` and `account` (else the user's default) at `at`, in
    /// one snapshot; how fresh, `read` says.
    async fn admission_view(
        &self,
        user: &str,
        account: Option<&str>,
        at: i64,
        read: ViewRead,
    ) -> Result<AdmissionView>;
    /// Admits a batch of submissions and records forwarded jobs in one transaction (see
    /// [`crate::Ledger::admit_recording`]).
    async fn admit(
        &self,
        batch: &[NewAdmission],
        forwarded: &[ForwardedJob],
        now: i64,
    ) -> Result<AdmitBatch>;
    /// Admits one submission, group-committed with the others queued meanwhile and the
    /// forwarded jobs queued before (see [`crate::Ledger::admit_queued`]).
    async fn admit_queued(&self, admission: NewAdmission, now: i64) -> Result<AdmitOutcome>;
    /// Queues the record of a forwarded job, written with the next admission or soon alone.
    fn queue_forwarded(&self, job: ForwardedJob) -> Result<()>;
    /// Waits until every forwarded job queued before is written (or failed and was logged).
    async fn forwarded_settled(&self);
    /// Moves committed data from the write-ahead log into the database without blocking
    /// writers. The first call also stops writers from doing it themselves at commit time,
    /// so a long-running server calls it periodically (see [`crate::Ledger::checkpoint`]).
    async fn checkpoint(&self) -> Result<()>;
    /// Stores a price-table version and its audit entry in one transaction: `(true, row)`
    /// when stored, `(false, row)` when the same version with the same content was there
    /// already (nothing written), [`crate::LedgerError::Conflict`] when it is there with other
    /// content.
    async fn store_price_table(
        &self,
        table: &NewPriceTable,
        audit: &NewAudit,
    ) -> Result<(bool, StoredPriceTable)>;
    /// Every stored price-table version, in the order they were stored.
    async fn price_tables(&self) -> Result<Vec<StoredPriceTable>>;
    /// `(count, highest id)` of the stored versions: cheap, and different after every store.
    async fn price_tables_stamp(&self) -> Result<(i64, i64)>;
    /// Every alert, by id.
    async fn alerts(&self) -> Result<Vec<AlertRow>>;
    /// Re-arms the open alerts `rearm` and records `fire` (each unless an alert of its
    /// allocation and kind is open), in one transaction; returns the ids recorded.
    async fn record_alerts(&self, fire: &[NewAlert], rearm: &[i64], now: i64) -> Result<Vec<i64>>;
    /// Takes a pending alert for delivery until `until`; `false` if delivered or taken.
    async fn claim_alert(&self, id: i64, now: i64, until: i64) -> Result<bool>;
    /// Records a delivery: `Ok(via)` delivered, `Err(message)` failed.
    async fn finish_alert(
        &self,
        id: i64,
        outcome: std::result::Result<&str, &str>,
        at: i64,
    ) -> Result<()>;
}
