//! The SQLite backend: [`SqliteStorage`].
//!
//! - `mod.rs`: opening (pragmas, pools, migrations), the [`Storage`] impl, shared helpers.
//! - `labels.rs`: interning of repeated strings (currencies, clusters, users, …) as ids.
//! - `tree.rs`: accounts, users, associations, allocations; loading a transaction's context.
//! - `journal.rs`: entries, job postings, materialized writes, `post_usage`, `post_entry`.
//! - `holds.rs`: placing, linking, releasing, expiring holds.
//! - `read.rs`: balance snapshots, usage lines, verification, quarantine, cursors.
//! - `admin.rs`: closing accounts, removing associations, renewals, transfers, refunds.
//! - `gateway.rs`: the audit log and the jobs submitted through the gateway's API.
//! - `admit.rs`: the admission fast path (one-statement quote view, group-committed holds
//!   and jobs); `admitter.rs`: the thread and connection admission transactions run on;
//!   `view_cache.rs`: the quote view's cache and how it learns of changes.
//! - `prices.rs`: the price-table versions kept in the ledger.
//! - `alerts.rs`: alerts fired on allocations and their delivery.
//!
//! Two writers: admission transactions (holds placed with their jobs, forwarded jobs recorded)
//! run on a connection and thread of their own (`admitter.rs`); every other write goes through
//! a pool of exactly one connection. Both open their transactions with `BEGIN IMMEDIATE`, so
//! SQLite serializes them (and a second process), each waiting on the busy timeout instead of
//! failing mid-transaction, and each decides on what its own transaction reads. Reads use a
//! separate small pool; WAL lets them run beside the writers on a consistent snapshot.
//!
//! The import path is shaped by what costs time through sqlx: every bound value (a text costs
//! about four integers), every row handed back from sqlx's worker thread, and every statement
//! text SQLite has to parse. So `post_usage` binds integers (ids from `labels`), inserts in
//! multi-row statements of a few fixed sizes (prepared once, see `chunk_plan`) while the
//! next statement's parameters are bound (`journal::pipelined`), passes lists as one JSON
//! parameter (`json_each`), and gets a batch's lookups back packed into one text.

mod admin;
mod admit;
mod admitter;
mod alerts;
mod arrays;
mod gateway;
mod holds;
mod journal;
mod labels;
mod prices;
mod read;
mod tree;
mod view_cache;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bursar_pricing::Currency;
use rustc_hash::FxHashMap;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use crate::alerts::{AlertRow, NewAlert};
use crate::balances::BalanceSnapshot;
use crate::error::{LedgerError, Result};
use crate::finance::{TopBy, TopRow};
use crate::model::{
    AccountRow, AdmissionView, AdmitBatch, AdmitOutcome, AllocationRow, ApiJob, ApiJobsPage,
    AssociationRow, AuditEntry, ForwardedJob, HoldRow, JobPart, JobRow, JournalEntry, JournalQuery,
    NewAdmission, NewApiJob, NewAudit, NewEntry, NewHold, NewPriceTable, PostOutcome,
    QuarantineItem, QuarantineRow, RefundOutcome, RefundRequest, RenewRequest, Renewal,
    StoredPriceTable, TransferOutcome, TransferRequest, UsageCharge, UserRow,
};
use crate::report::{UsageGrouping, UsageLine};
use crate::storage::{StatementReads, Storage, UsageSource, ViewRead};

/// SQLite allows 32766 bound parameters per statement; multi-row statements stay under this.
const MAX_PARAMS: usize = 32_000;

/// How long a writer waits for another process's write lock before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqliteTarget {
    /// A file, created if missing.
    File(std::path::PathBuf),
    /// A private in-memory database that lives as long as the storage (tests, dry runs).
    Memory,
}

impl SqliteTarget {
    /// `sqlite://path`, `sqlite:path`, `sqlite::memory:` or a bare path.
    pub fn parse(url: &str) -> Result<SqliteTarget> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        if rest == ":memory:" {
            return Ok(SqliteTarget::Memory);
        }
        let path = rest.split('?').next().unwrap_or(rest);
        if path.is_empty() {
            return Err(LedgerError::Invalid(format!(
                "{url:?} names no SQLite database file"
            )));
        }
        Ok(SqliteTarget::File(path.into()))
    }
}

/// Prepared statements the single writer connection keeps: the posting path's multi-row texts
/// come in a chunk size each ([`chunk_plan`]) for many statements (sqlx's default keeps 100).
const WRITER_STATEMENTS: usize = 1024;

/// Frames (pages) in the WAL past which [`Storage::checkpoint`] makes it start over: 64 MiB
/// of 4 KiB pages, as many as `wal_autocheckpoint` lets it hold before a checkpoint at commit.
const WAL_RESTART_FRAMES: i64 = 16_384;

/// `journal_size_limit` (bytes): the WAL file is cut back to this when it starts over. Above
/// what it reaches between two checkpoints under a stream of admissions (100–300 MB at one
/// checkpoint a second), so that it keeps its size from one round to the next: cut back to
/// 64 MiB each time, it grew again every round, and ~75 % of an admission's WAL frames were
/// written to new parts of the file (a page allocated and zeroed, ext4's block reservation)
/// instead of over pages in the page cache, and the cut itself dropped hundreds of MB of them.
pub(super) const WAL_SIZE_LIMIT: &str = "536870912";

/// Before restarting the WAL, [`Storage::checkpoint`] repeats its passive checkpoint (up to
/// [`CATCH_UP_PASSES`] times) while more than this many frames came in during the one before:
/// the restart holds writers back while it copies and syncs what the passive ones left.
const CATCH_UP_FRAMES: i64 = 1_024;
const CATCH_UP_PASSES: usize = 4;

/// The ledger on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStorage {
    write: SqlitePool,
    read: SqlitePool,
    /// Where admission transactions run.
    admitter: Arc<admitter::Admitter>,
    views: Arc<view_cache::ViewCache>,
    /// The connection [`Storage::checkpoint`] runs on, once asked (file databases only).
    checkpointer: Arc<tokio::sync::OnceCell<Option<SqlitePool>>>,
    target: SqliteTarget,
    options: SqliteConnectOptions,
}

impl SqliteStorage {
    /// Opens (creating if missing) the database and applies pending migrations.
    pub async fn open(target: &SqliteTarget) -> Result<SqliteStorage> {
        // An in-memory database is one of the `memdb` VFS under a name of its own, so that
        // the admission writer's connection reaches it too; it lives while one is open.
        static MEMORY: AtomicU64 = AtomicU64::new(0);
        let database = match target {
            SqliteTarget::Memory => admitter::Database::Memory(format!(
                "/bursar-memory-{}-{}",
                std::process::id(),
                MEMORY.fetch_add(1, Ordering::Relaxed)
            )),
            SqliteTarget::File(path) => admitter::Database::File(path.clone()),
        };
        let base = match &database {
            admitter::Database::Memory(name) => SqliteConnectOptions::new()
                .filename(name)
                .vfs("memdb")
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Memory),
            admitter::Database::File(path) => SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal),
        }
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT)
        // 64 MiB of page cache per connection and in-memory temp tables: imports touch a lot
        // of index pages per batch.
        .pragma("cache_size", "-65536")
        .pragma("temp_store", "memory")
        .pragma("wal_autocheckpoint", "16384")
        .pragma("journal_size_limit", WAL_SIZE_LIMIT);

        // No ping before each acquire (sqlx's default): an embedded connection cannot have
        // hung up, and the ping is one more round trip to the connection's worker thread on
        // every read and every write transaction — the single writer included.
        let write = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(base.clone().statement_cache_capacity(WRITER_STATEMENTS))
            .await
            .map_err(db)?;
        let base_checkpoint = base.clone();
        sqlx::migrate!("./migrations/sqlite")
            .run(&write)
            .await
            .map_err(|e| LedgerError::Storage(format!("migrating the ledger database: {e}")))?;
        let admitter = Arc::new(admitter::Admitter::start(&database)?);
        let read = match target {
            // Without a WAL, readers would hold writers back: one connection does both.
            SqliteTarget::Memory => write.clone(),
            SqliteTarget::File(_) => SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(4)
                .connect_with(base)
                .await
                .map_err(db)?,
        };
        Ok(SqliteStorage {
            write,
            read,
            admitter,
            views: Arc::new(view_cache::ViewCache::new()),
            checkpointer: Arc::new(tokio::sync::OnceCell::new()),
            target: target.clone(),
            options: base_checkpoint,
        })
    }

    /// A write transaction: serialized with every other writer.
    async fn begin(&self) -> Result<Transaction<'static, Sqlite>> {
        self.write.begin_with("BEGIN IMMEDIATE").await.map_err(db)
    }

    /// Commits a write transaction and tells the quote view cache that the data changed.
    async fn commit(&self, tx: Transaction<'static, Sqlite>) -> Result<()> {
        let done = tx.commit().await.map_err(db);
        self.views.changed();
        done
    }

    /// A read transaction: one consistent snapshot.
    async fn begin_read(&self) -> Result<Transaction<'static, Sqlite>> {
        self.read.begin().await.map_err(db)
    }
}

/// Maps a driver error to the ledger's: unique violations become conflicts, the rest storage
/// failures. The only place sqlx errors are looked at.
pub(crate) fn db(error: sqlx::Error) -> LedgerError {
    match &error {
        sqlx::Error::Database(e) if e.is_unique_violation() => {
            LedgerError::Conflict(e.message().to_string())
        }
        sqlx::Error::RowNotFound => LedgerError::Storage("expected row not found".to_string()),
        _ => LedgerError::Storage(error.to_string()),
    }
}

/// Column `i` of a row.
pub(crate) fn col<'r, T>(row: &'r SqliteRow, i: usize) -> Result<T>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(i).map_err(db)
}

/// `?, ?, ?` with `n` placeholders.
pub(crate) fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// A JSON array of strings, for `in (select value from json_each(?))`: one bound parameter
/// instead of one per value.
pub(crate) fn json_strings<'s>(values: impl IntoIterator<Item = &'s str>) -> String {
    let mut out = String::from("[");
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, v);
    }
    out.push(']');
    out
}

/// `v` as a JSON string literal, quotes included. Runs of plain text are copied whole; the
/// bytes escaped are all ASCII, so every cut is on a character boundary.
pub(super) fn push_json_string(out: &mut String, v: &str) {
    use std::fmt::Write;
    out.push('"');
    let mut plain = 0;
    for (i, b) in v.bytes().enumerate() {
        if b != b'"' && b != b'\\' && b >= 0x20 {
            continue;
        }
        out.push_str(&v[plain..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            control => {
                let _ = write!(out, "\\u{control:04x}");
            }
        }
        plain = i + 1;
    }
    out.push_str(&v[plain..]);
    out.push('"');
}

/// A JSON array of integers.
pub(crate) fn json_ints(values: impl IntoIterator<Item = i64>) -> String {
    let mut out = String::from("[");
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&v.to_string());
    }
    out.push(']');
    out
}

/// `(?, ?), (?, ?)` for `rows` rows of `arity` columns.
pub(crate) fn value_rows(rows: usize, arity: usize) -> String {
    let one = format!("({})", placeholders(arity));
    let mut s = String::with_capacity(rows * (one.len() + 2));
    for i in 0..rows {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&one);
    }
    s
}

/// Row counts of the hot multi-row statements. Splitting a batch into these sizes (largest
/// first) keeps the set of statement texts small: each is formatted once per process and
/// prepared once per connection, instead of a fresh (and slow to parse) text for every
/// batch's remainder.
const CHUNK_SIZES: [usize; 6] = [1024, 256, 64, 16, 4, 1];

/// Splits `n` rows into chunks of [`CHUNK_SIZES`].
pub(crate) fn chunk_plan(n: usize) -> Vec<usize> {
    let mut plan = Vec::new();
    let mut left = n;
    for size in CHUNK_SIZES {
        while left >= size {
            plan.push(size);
            left -= size;
        }
    }
    plan
}

/// The text of a multi-row statement: `head` + `rows` tuples of `arity` plain `?` parameters
/// + `tail`, built once per process for each (statement, rows).
///
/// (Numbered `?NNN` parameters, which would let a batch-wide value be bound once, are not
/// used: sqlx looks up every parameter's name, and SQLite finds a numbered name by a linear
/// scan, which makes a statement with thousands of them quadratic.)
pub(crate) fn multi_row_sql(
    name: &'static str,
    head: &str,
    rows: usize,
    arity: usize,
    tail: &str,
) -> Arc<str> {
    type Texts = FxHashMap<(&'static str, usize), Arc<str>>;
    static CACHE: OnceLock<Mutex<Texts>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    cache
        .entry((name, rows))
        .or_insert_with(|| Arc::from(format!("{head} values {} {tail}", value_rows(rows, arity))))
        .clone()
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    #[tracing::instrument(skip_all)]
    async fn ensure_account(&self, name: &str, parent: &str, now: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let created = tree::ensure_account(&mut tx, name, parent, now).await?;
        self.commit(tx).await?;
        Ok(created)
    }

    #[tracing::instrument(skip_all)]
    async fn set_parent(&self, name: &str, parent: &str) -> Result<()> {
        let mut tx = self.begin().await?;
        tree::set_parent(&mut tx, name, parent).await?;
        self.commit(tx).await
    }

    async fn accounts(&self) -> Result<Vec<AccountRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        tree::accounts(&mut conn).await
    }

    #[tracing::instrument(skip_all)]
    async fn close_account(&self, name: &str, now: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let closed = admin::close_account(&mut tx, name, now).await?;
        self.commit(tx).await?;
        Ok(closed)
    }

    #[tracing::instrument(skip_all)]
    async fn dissociate(&self, user: &str, account: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        let removed = admin::dissociate(&mut tx, user, account).await?;
        self.commit(tx).await?;
        Ok(removed)
    }

    #[tracing::instrument(skip_all)]
    async fn renew_allocation(&self, req: &RenewRequest, now: i64) -> Result<Renewal> {
        let mut tx = self.begin().await?;
        let renewal = admin::renew_allocation(&mut tx, req, now).await?;
        self.commit(tx).await?;
        Ok(renewal)
    }

    #[tracing::instrument(skip_all)]
    async fn transfer(&self, req: &TransferRequest, now: i64) -> Result<TransferOutcome> {
        let mut tx = self.begin().await?;
        let outcome = admin::transfer(&mut tx, req, now).await?;
        self.commit(tx).await?;
        Ok(outcome)
    }

    #[tracing::instrument(skip_all)]
    async fn refund_job(&self, req: &RefundRequest, now: i64) -> Result<RefundOutcome> {
        let mut tx = self.begin().await?;
        let outcome = admin::refund_job(&mut tx, req, now).await?;
        self.commit(tx).await?;
        Ok(outcome)
    }

    async fn entry_by_key(&self, key: &str) -> Result<Option<JournalEntry>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::by_key(&mut conn, key).await
    }

    #[tracing::instrument(skip_all)]
    async fn upsert_user(&self, name: &str, default_account: &str, now: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let created = tree::upsert_user(&mut tx, name, default_account, now).await?;
        self.commit(tx).await?;
        Ok(created)
    }

    #[tracing::instrument(skip_all)]
    async fn associate(&self, user: &str, account: &str, now: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let created = tree::associate(&mut tx, user, account, now).await?;
        self.commit(tx).await?;
        Ok(created)
    }

    async fn users(&self) -> Result<Vec<UserRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        tree::users(&mut conn).await
    }

    async fn associations(&self) -> Result<Vec<AssociationRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        tree::associations(&mut conn).await
    }

    #[tracing::instrument(skip_all)]
    async fn set_allocation(
        &self,
        account: &str,
        currency: &Currency,
        amount: i64,
        start: i64,
        end: i64,
        now: i64,
    ) -> Result<AllocationRow> {
        let mut tx = self.begin().await?;
        let row = tree::set_allocation(&mut tx, account, currency, amount, start, end, now).await?;
        self.commit(tx).await?;
        Ok(row)
    }

    async fn allocations(&self) -> Result<Vec<AllocationRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        tree::allocations(&mut conn).await
    }

    #[tracing::instrument(skip_all, fields(records = batch.len()))]
    async fn post_usage(&self, batch: &[UsageCharge], posted_at: i64) -> Result<PostOutcome> {
        let mut tx = self.begin().await?;
        let outcome = journal::post_usage(&mut tx, batch, posted_at).await?;
        self.commit(tx).await?;
        Ok(outcome)
    }

    #[tracing::instrument(skip_all)]
    async fn post_entry(&self, entry: &NewEntry, posted_at: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let posted = journal::post_entry(&mut tx, entry, posted_at).await?;
        self.commit(tx).await?;
        Ok(posted)
    }

    async fn journal(&self, query: &JournalQuery) -> Result<Vec<JournalEntry>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::list(&mut conn, query).await
    }

    async fn usage_entries(&self, from: i64, to: i64) -> Result<Vec<JournalEntry>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::usage_entries(&mut conn, from, to).await
    }

    async fn top(
        &self,
        by: TopBy,
        from: i64,
        to: i64,
        currency: Option<&Currency>,
        limit: usize,
    ) -> Result<Vec<TopRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        read::top(&mut conn, by, from, to, currency, limit).await
    }

    async fn journal_span(&self, from: i64, to: i64) -> Result<Option<(i64, i64)>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::span(&mut conn, from, to).await
    }

    async fn job(&self, cluster: &str, job_id: &str, submit: i64) -> Result<Option<JobRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::job(&mut conn, cluster, job_id, submit).await
    }

    async fn jobs_journal(&self, jobs: &[(String, String)]) -> Result<Vec<JournalEntry>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::jobs_journal(&mut conn, jobs).await
    }

    async fn jobs_journal_page(
        &self,
        cluster: Option<&str>,
        after: i64,
        limit: u32,
    ) -> Result<(Vec<JournalEntry>, Option<i64>)> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        journal::jobs_journal_page(&mut conn, cluster, after, limit).await
    }

    #[tracing::instrument(skip_all)]
    async fn place_hold(&self, hold: &NewHold, check: bool) -> Result<HoldRow> {
        let mut tx = self.begin().await?;
        let row = holds::place(&mut tx, hold, check).await?;
        self.commit(tx).await?;
        Ok(row)
    }

    #[tracing::instrument(skip_all)]
    async fn link_hold(&self, id: i64, job_ref: &str) -> Result<()> {
        let mut tx = self.begin().await?;
        holds::link(&mut tx, id, job_ref).await?;
        self.commit(tx).await
    }

    #[tracing::instrument(skip_all)]
    async fn release_hold(&self, id: i64, reason: &str, at: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let released = holds::close_one(&mut tx, id, "released", reason, at).await?;
        self.commit(tx).await?;
        Ok(released)
    }

    #[tracing::instrument(skip_all)]
    async fn settle_hold(&self, id: i64, reason: &str, at: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let settled = holds::close_one(&mut tx, id, "settled", reason, at).await?;
        self.commit(tx).await?;
        Ok(settled)
    }

    async fn extend_hold(&self, id: i64, at: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let moved = holds::extend(&mut tx, id, at).await?;
        self.commit(tx).await?;
        Ok(moved)
    }

    #[tracing::instrument(skip_all)]
    async fn expire_holds(&self, now: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let expired = holds::expire(&mut tx, now).await?;
        self.commit(tx).await?;
        Ok(expired)
    }

    async fn holds(&self, active_only: bool) -> Result<Vec<HoldRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::list(&mut conn, active_only).await
    }

    async fn holds_due(&self, now: i64) -> Result<Vec<HoldRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::due(&mut conn, now).await
    }

    async fn holds_to_confirm(&self) -> Result<Vec<HoldRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::to_confirm(&mut conn).await
    }

    async fn settle_free_job(&self, id: i64, at: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let settled = gateway::settle_free_job(&mut tx, id, at).await?;
        self.commit(tx).await?;
        Ok(settled)
    }

    async fn free_jobs_to_confirm(&self) -> Result<Vec<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::free_jobs_to_confirm(&mut conn).await
    }

    async fn active_holds_count(&self) -> Result<u64> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::active_count(&mut conn).await
    }

    async fn holds_by_id(&self, ids: &[i64]) -> Result<Vec<HoldRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::by_id(&mut conn, ids).await
    }

    async fn holds_at(&self, at: i64) -> Result<Vec<HoldRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        holds::open_at(&mut conn, at).await
    }

    async fn balance_snapshot(&self) -> Result<BalanceSnapshot> {
        let mut tx = self.begin_read().await?;
        let snapshot = read::balance_snapshot(&mut tx).await?;
        tx.commit().await.map_err(db)?;
        Ok(snapshot)
    }

    async fn usage_lines(
        &self,
        source: UsageSource,
        from: i64,
        to: i64,
        grouping: UsageGrouping,
    ) -> Result<Vec<UsageLine>> {
        // One snapshot: the indexed source reads the rollup and the journal.
        let mut tx = self.begin_read().await?;
        let lines = read::usage_lines(&mut tx, source, from, to, grouping).await?;
        tx.commit().await.map_err(db)?;
        Ok(lines)
    }

    async fn statement_reads(
        &self,
        account: &str,
        currency: &Currency,
        window_start: i64,
        from: i64,
        to: i64,
    ) -> Result<Option<StatementReads>> {
        let mut tx = self.begin_read().await?;
        let reads =
            journal::statement_reads(&mut tx, account, currency, window_start, from, to).await?;
        // A read: nothing for the view cache to forget.
        tx.commit().await.map_err(db)?;
        Ok(reads)
    }

    async fn quarantine_add(&self, items: &[QuarantineItem], now: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let added = read::quarantine_add(&mut tx, items, now).await?;
        self.commit(tx).await?;
        Ok(added)
    }

    async fn quarantine_list(&self) -> Result<Vec<QuarantineRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        read::quarantine_list(&mut conn).await
    }

    async fn get_cursor(&self, cluster: &str) -> Result<Option<String>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        read::get_cursor(&mut conn, cluster).await
    }

    async fn set_cursor(&self, cluster: &str, value: &str, now: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        read::set_cursor(&mut tx, cluster, value, now).await?;
        self.commit(tx).await
    }

    async fn verify(&self) -> Result<Vec<String>> {
        let mut tx = self.begin_read().await?;
        let problems = read::verify(&mut tx).await?;
        tx.commit().await.map_err(db)?;
        Ok(problems)
    }

    #[tracing::instrument(skip_all)]
    async fn audit(&self, entry: &NewAudit) -> Result<i64> {
        let mut tx = self.begin().await?;
        let id = gateway::audit(&mut tx, entry).await?;
        self.commit(tx).await?;
        Ok(id)
    }

    async fn audit_log(&self, before: Option<i64>, limit: Option<u32>) -> Result<Vec<AuditEntry>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::audit_log(&mut conn, before, limit).await
    }

    #[tracing::instrument(skip_all)]
    async fn store_price_table(
        &self,
        table: &NewPriceTable,
        audit: &NewAudit,
    ) -> Result<(bool, StoredPriceTable)> {
        let mut tx = self.begin().await?;
        let outcome = prices::store(&mut tx, table, audit).await?;
        self.commit(tx).await?;
        Ok(outcome)
    }

    async fn price_tables(&self) -> Result<Vec<StoredPriceTable>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        prices::list(&mut conn).await
    }

    async fn price_tables_stamp(&self) -> Result<(i64, i64)> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        prices::stamp(&mut conn).await
    }

    #[tracing::instrument(skip_all)]
    async fn create_api_job(&self, job: &NewApiJob) -> Result<ApiJob> {
        let mut tx = self.begin().await?;
        let row = gateway::create_api_job(&mut tx, job).await?;
        self.commit(tx).await?;
        Ok(row)
    }

    async fn api_job(&self, id: i64) -> Result<Option<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_job(&mut conn, id).await
    }

    async fn api_job_by_key(&self, key: &str) -> Result<Option<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_job_by_key(&mut conn, key).await
    }

    #[tracing::instrument(skip_all)]
    async fn update_api_job(
        &self,
        id: i64,
        state: &str,
        cluster_job_id: Option<&str>,
        at: i64,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        gateway::update_api_job(&mut tx, id, state, cluster_job_id, at).await?;
        self.commit(tx).await
    }

    async fn api_jobs(&self, user: Option<&str>, account: Option<&str>) -> Result<Vec<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_jobs(&mut conn, user, account).await
    }

    async fn api_jobs_page(&self, page: &ApiJobsPage) -> Result<Vec<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_jobs_page(&mut conn, page).await
    }

    async fn api_jobs_on(&self, cluster: &str, cluster_job_ids: &[String]) -> Result<Vec<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_jobs_on(&mut conn, cluster, cluster_job_ids).await
    }

    async fn api_jobs_holding(&self, hold_ids: &[i64]) -> Result<Vec<ApiJob>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::api_jobs_holding(&mut conn, hold_ids).await
    }

    async fn record_job_parts(&self, parts: &[JobPart]) -> Result<u64> {
        let mut tx = self.begin().await?;
        let added = gateway::record_job_parts(&mut tx, parts).await?;
        self.commit(tx).await?;
        Ok(added)
    }

    async fn job_parts(&self, api_job_ids: &[i64]) -> Result<Vec<JobPart>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        gateway::job_parts(&mut conn, api_job_ids).await
    }

    async fn admission_view(
        &self,
        user: &str,
        account: Option<&str>,
        at: i64,
        read: ViewRead,
    ) -> Result<AdmissionView> {
        // Read the structure generation first: a write between the two reads leaves the
        // entry tagged older than it is, never newer.
        let structure = self.views.structure();
        // No other connection reaches an in-memory database.
        let watch = match self.target {
            SqliteTarget::Memory => None,
            SqliteTarget::File(_) => Some(&*self.admitter),
        };
        let generation = self
            .views
            .generation(read != ViewRead::Preview, watch)
            .await?;
        let cached = match read {
            ViewRead::Now => None,
            ViewRead::Preview => self.views.get(generation, None, user, account, at),
            ViewRead::Admission => self
                .views
                .get(generation, Some(structure), user, account, at),
        };
        if let Some(view) = cached {
            return Ok(view);
        }
        let mut conn = self.read.acquire().await.map_err(db)?;
        let view = admit::view(&mut conn, user, account, at).await?;
        self.views
            .put((generation, structure), user, account, at, &view);
        Ok(view)
    }

    async fn admit(
        &self,
        batch: &[NewAdmission],
        forwarded: &[ForwardedJob],
        now: i64,
    ) -> Result<AdmitBatch> {
        let done = self
            .admitter
            .admit(batch.to_vec(), forwarded.to_vec(), now)
            .await;
        self.views.holds_changed();
        let done = done?;
        let mut outcomes = done.outcomes;
        if !done.earlier.is_empty() {
            // A retried key: the job recorded with it, as the transaction left it.
            let mut conn = self.read.acquire().await.map_err(db)?;
            for (i, id) in done.earlier {
                let job = gateway::api_job(&mut conn, id)
                    .await?
                    .ok_or_else(|| LedgerError::Storage(format!("api job {id} vanished")))?;
                outcomes[i] = Some(Ok(AdmitOutcome::Existing(job)));
            }
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| {
                o.ok_or_else(|| LedgerError::Storage("a submission was left undecided".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AdmitBatch {
            outcomes,
            linked: done.linked,
            unrecorded: done.unrecorded,
        })
    }

    async fn admit_queued(&self, admission: NewAdmission, now: i64) -> Result<AdmitOutcome> {
        let queued = self.admitter.admit_one(admission, now).await;
        self.views.holds_changed();
        match queued? {
            admitter::Queued::Decided(outcome) => outcome,
            admitter::Queued::Earlier(id) => {
                // A retried key: the job recorded with it, as the transaction left it.
                let mut conn = self.read.acquire().await.map_err(db)?;
                gateway::api_job(&mut conn, id)
                    .await?
                    .map(AdmitOutcome::Existing)
                    .ok_or_else(|| LedgerError::Storage(format!("api job {id} vanished")))
            }
        }
    }

    fn queue_forwarded(&self, job: ForwardedJob) -> Result<()> {
        self.admitter.forwarded(job)
    }

    async fn forwarded_settled(&self) {
        self.admitter.settled().await;
    }

    async fn checkpoint(&self) -> Result<()> {
        let pool = self
            .checkpointer
            .get_or_try_init(|| async {
                if self.target == SqliteTarget::Memory {
                    return Ok(None);
                }
                // From now on the writers never checkpoint at commit: a checkpoint copies and
                // syncs the database file, which can take tens of milliseconds that every
                // queued write would wait for. (The pragma is per connection; the writer pool
                // is that one connection, kept for the storage's life, and the admission
                // writer has its own.)
                sqlx::query("pragma wal_autocheckpoint = 0")
                    .execute(&self.write)
                    .await
                    .map_err(db)?;
                self.admitter.stop_checkpointing().await?;
                let pool = SqlitePoolOptions::new()
                    .test_before_acquire(false)
                    .max_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .connect_with(self.options.clone())
                    .await
                    .map_err(db)?;
                Ok::<_, LedgerError>(Some(pool))
            })
            .await?;
        if let Some(pool) = pool {
            // PASSIVE: copies what no reader still needs, waits for nobody.
            let passive = || async {
                let (_busy, log, _copied): (i64, i64, i64) =
                    sqlx::query_as("pragma wal_checkpoint(passive)")
                        .fetch_one(pool)
                        .await
                        .map_err(db)?;
                Ok::<_, LedgerError>(log)
            };
            let mut log = passive().await?;
            // Under sustained writes a passive checkpoint never catches up with the writer,
            // and the WAL only starts over once one has: it grew by ~100 MB a second under a
            // stream of admissions. Past the limit, RESTART copies what the passive ones left,
            // holding new write transactions back meanwhile (they wait on the busy timeout),
            // so that the next one writes the WAL from its start (and `journal_size_limit`
            // cuts the file back). First the passive checkpoint runs again while the writer
            // added many frames during the one before, so that RESTART has little left to
            // copy and sync: under a stream of admissions the RESTART call took 14–67 ms
            // without that and 3–26 ms with it (either including its wait for the lock).
            if log > WAL_RESTART_FRAMES {
                let started = std::time::Instant::now();
                let mut passes = 1;
                while passes < CATCH_UP_PASSES {
                    let before = log;
                    log = passive().await?;
                    passes += 1;
                    if log - before <= CATCH_UP_FRAMES {
                        break;
                    }
                }
                let restarting = std::time::Instant::now();
                let (busy, log, copied): (i64, i64, i64) =
                    sqlx::query_as("pragma wal_checkpoint(restart)")
                        .fetch_one(pool)
                        .await
                        .map_err(db)?;
                tracing::debug!(
                    busy,
                    log,
                    copied,
                    passes,
                    catching_up_ms = (restarting - started).as_millis() as u64,
                    restart_ms = restarting.elapsed().as_millis() as u64,
                    "restarted the WAL"
                );
            }
        }
        Ok(())
    }

    async fn alerts(&self) -> Result<Vec<AlertRow>> {
        let mut conn = self.read.acquire().await.map_err(db)?;
        alerts::list(&mut conn).await
    }

    #[tracing::instrument(skip_all)]
    async fn record_alerts(&self, fire: &[NewAlert], rearm: &[i64], now: i64) -> Result<Vec<i64>> {
        let mut tx = self.begin().await?;
        let ids = alerts::record(&mut tx, fire, rearm, now).await?;
        self.commit(tx).await?;
        Ok(ids)
    }

    async fn claim_alert(&self, id: i64, now: i64, until: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let claimed = alerts::claim(&mut tx, id, now, until).await?;
        self.commit(tx).await?;
        Ok(claimed)
    }

    async fn finish_alert(
        &self,
        id: i64,
        outcome: std::result::Result<&str, &str>,
        at: i64,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        alerts::finish(&mut tx, id, outcome, at).await?;
        self.commit(tx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sqlite_targets() {
        assert_eq!(
            SqliteTarget::parse("sqlite::memory:"),
            Ok(SqliteTarget::Memory)
        );
        assert_eq!(
            SqliteTarget::parse("sqlite:///var/lib/bursar/ledger.db"),
            Ok(SqliteTarget::File("/var/lib/bursar/ledger.db".into()))
        );
        assert_eq!(
            SqliteTarget::parse("sqlite://ledger.db?mode=rwc"),
            Ok(SqliteTarget::File("ledger.db".into()))
        );
        assert_eq!(
            SqliteTarget::parse("ledger.db"),
            Ok(SqliteTarget::File("ledger.db".into()))
        );
        assert!(SqliteTarget::parse("sqlite://").is_err());
        assert_eq!(placeholders(3), "?, ?, ?");
        assert_eq!(value_rows(2, 2), "(?, ?), (?, ?)");
        assert_eq!(chunk_plan(10_000).iter().sum::<usize>(), 10_000);
        assert_eq!(chunk_plan(1_300), [1024, 256, 16, 4]);
        assert_eq!(
            &*multi_row_sql("test", "insert into t (a, b)", 2, 2, ""),
            "insert into t (a, b) values (?, ?), (?, ?) "
        );
        assert_eq!(json_strings(["a\"b", "c\\d\n"]), r#"["a\"b","c\\d\u000a"]"#);
        assert_eq!(json_ints([1, -2]), "[1,-2]");
    }

    /// The lookups of holds by their cluster's job id use `holds_active_by_job`, which leaves
    /// out the holds not linked to a job yet (migration 0008): settling and extending must not
    /// scan every hold. A user's list of API jobs reads that user's jobs only.
    #[tokio::test]
    async fn lookups_by_job_id_by_user_and_by_cluster_job_go_through_their_index() {
        let (_dir, conn) = migrated().await;
        let lookups = [
            (
                journal::holds_to_settle_sql(),
                "holds_active_by_job",
                "job_ref=?",
            ),
            (
                holds::extend_sighted_sql(),
                "holds_active_by_job",
                "job_ref=?",
            ),
            (
                gateway::api_jobs_sql(true),
                "api_jobs_by_user",
                "user_name=?",
            ),
            (
                gateway::api_jobs_page_sql(true),
                "api_jobs_by_user",
                "user_name=?",
            ),
            (
                gateway::api_jobs_on_sql(),
                "api_jobs_by_cluster_job",
                "cluster=? AND cluster_job_id=?",
            ),
            (
                gateway::api_jobs_holding_sql(),
                "api_jobs_by_hold",
                "hold_id=?",
            ),
            (
                gateway::job_parts_sql().to_string(),
                "api_job_parts_by_job",
                "api_job_id=?",
            ),
            (
                arrays::ARRAY_JOBS_SQL.to_string(),
                "api_jobs_arrays",
                "cluster=? AND cluster_job_id=?",
            ),
        ];
        for (sql, index, key) in lookups {
            let steps = plan(&conn, &sql);
            assert!(
                steps
                    .iter()
                    .any(|s| s.contains(&format!("INDEX {index}")) && s.contains(key)),
                "{sql}\n{steps:#?}"
            );
        }
    }

    /// A connection to a new ledger file with every migration applied (the folder lives as
    /// long as the first half).
    async fn migrated() -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let storage = SqliteStorage::open(&SqliteTarget::File(path.clone()))
            .await
            .unwrap();
        drop(storage);
        let conn = rusqlite::Connection::open(&path).unwrap();
        (dir, conn)
    }

    /// The steps of SQLite's plan for `sql`, its parameters unbound.
    fn plan(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
        let mut plan = conn.prepare(&format!("explain query plan {sql}")).unwrap();
        let unbound = vec![rusqlite::types::Null; plan.parameter_count()];
        plan.query_map(rusqlite::params_from_iter(unbound), |row| {
            row.get::<_, String>(3)
        })
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap()
    }

    /// What a job view and a forecast read grows with what they name, not with the ledger's
    /// history: the active holds and the jobs that hold nothing whose job may run again
    /// (through the active linked holds' index, and the free held jobs' of migration 0013),
    /// the free jobs a posting settles, a page of jobs by their numbers and its entries, holds by id and the holds open at an instant (the active ones and those closed
    /// after it, migration 0009) never scan the holds table; a job's usage goes from the jobs
    /// to the journal through indexes only.
    #[tokio::test]
    async fn job_views_and_forecasts_read_holds_and_usage_through_indexes() {
        let (_dir, conn) = migrated().await;
        let cases: [(String, &[&str]); 8] = [
            (
                gateway::SETTLE_FREE_SQL.to_string(),
                &["SEARCH api_jobs USING INDEX api_jobs_free_held (cluster=? AND <expr>=?)"],
            ),
            (
                gateway::free_jobs_to_confirm_sql(),
                &[
                    "SCAN a USING INDEX api_jobs_free_held",
                    "SEARCH j USING INDEX sqlite_autoindex_jobs_1 (cluster_id=? AND job_id=? AND submit>?)",
                ],
            ),
            (
                journal::JOBS_PAGE_SQL.to_string(),
                &["SEARCH jobs USING INTEGER PRIMARY KEY (rowid>?)"],
            ),
            (
                journal::postings_journal_sql(),
                &[
                    "SEARCH jb USING INTEGER PRIMARY KEY (rowid=?)",
                    "SEARCH j USING INDEX journal_job_entries (job=?)",
                    "SEARCH j USING INDEX journal_refunds_by_job (job_ref=?)",
                ],
            ),
            (
                holds::to_confirm_sql(),
                &[
                    "SCAN h USING INDEX holds_active_by_job",
                    "SEARCH j USING INDEX sqlite_autoindex_jobs_1 (cluster_id=? AND job_id=? AND submit>?)",
                    "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)",
                ],
            ),
            (
                holds::by_id_sql(),
                &["SEARCH h USING INTEGER PRIMARY KEY (rowid=?)"],
            ),
            (
                holds::open_at_sql(),
                &[
                    "SEARCH h USING INTEGER PRIMARY KEY (rowid=?)",
                    "SCAN holds USING INDEX holds_active_by_expiry",
                    "SEARCH holds USING INDEX holds_closed_by_time (closed_at>?)",
                ],
            ),
            (
                journal::jobs_journal_sql(),
                &[
                    "USING COVERING INDEX sqlite_autoindex_jobs_1 (cluster_id=? AND job_id=?)",
                    "SEARCH j USING INDEX journal_job_entries (job=?)",
                    "SEARCH j USING INDEX journal_refunds_by_job (job_ref=?)",
                ],
            ),
        ];
        for (sql, wanted) in cases {
            let steps = plan(&conn, &sql);
            for step in wanted {
                assert!(
                    steps.iter().any(|s| s.contains(step)),
                    "{step} in\n{sql}\n{steps:#?}"
                );
            }
            // A scan is of the small tables or of what the query names, never a whole table
            // that grows with history.
            for s in &steps {
                let whole = ["SCAN holds", "SCAN h", "SCAN j", "SCAN journal", "SCAN jb"]
                    .iter()
                    .any(|t| s == t || s.starts_with(&format!("{t} ")) && !s.contains("INDEX"));
                assert!(!whole, "{s} in\n{sql}\n{steps:#?}");
            }
        }
    }

    /// Migration 0010 gives the API jobs still recorded `held` on a hold that had closed the
    /// state a job view gives them, as of the hold's closing; the others keep theirs.
    #[tokio::test]
    async fn migration_0010_records_the_states_of_jobs_whose_holds_had_closed() {
        use crate::model::{NewApiJob, NewHold};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let url = format!("sqlite://{}", path.display());
        let ledger = crate::Ledger::open(&url).await.unwrap();
        let su = Currency::new("su");
        ledger.ensure_account("physics", None).await.unwrap();
        ledger
            .set_allocation("physics", &su, 1_000_000_000, 0, i64::MAX / 2)
            .await
            .unwrap();
        let mut jobs = Vec::new();
        for (key, state) in [
            ("settled", "held"),
            ("released", "held"),
            ("expired", "held"),
            ("active", "held"),
            ("released-failed", "failed"),
        ] {
            let hold = ledger
                .place_hold(&NewHold {
                    account: "physics".into(),
                    currency: su.clone(),
                    amount: 1_000_000,
                    cluster: "alpha".into(),
                    job_ref: None,
                    placed_at: 100,
                    expires_at: 10_000,
                    lifetime: None,
                    idempotency_key: key.into(),
                    note: None,
                })
                .await
                .unwrap();
            let job = ledger
                .create_api_job(&NewApiJob {
                    idempotency_key: None,
                    actor: "alice".into(),
                    user: "alice".into(),
                    account: "physics".into(),
                    cluster: "alpha".into(),
                    currency: su.clone(),
                    estimate: 1_000_000,
                    hold_id: Some(hold.id),
                    state: state.into(),
                    request_json: "{}".into(),
                    route_json: "{}".into(),
                    at: 100,
                    array_tasks: None,
                })
                .await
                .unwrap();
            jobs.push((hold.id, job.id));
        }
        drop(ledger);
        // The holds as bursar closed them before: the jobs left as they were.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "update holds set state = 'settled', closed_at = 200 where id = {};
             update holds set state = 'released', closed_at = 300 where id in ({}, {});
             update holds set state = 'expired', closed_at = 400 where id = {};",
            jobs[0].0, jobs[1].0, jobs[4].0, jobs[2].0
        ))
        .unwrap();
        conn.execute_batch(include_str!(
            "../../migrations/sqlite/0010_api_job_states.sql"
        ))
        .unwrap();
        let mut read = conn
            .prepare("select state, updated_at from api_jobs order by id")
            .unwrap();
        let got: Vec<(String, i64)> = read
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        let want = [
            ("settled", 200),
            ("cancelled", 300),
            ("expired", 400),
            ("held", 100),
            ("failed", 100),
        ];
        let got: Vec<(&str, i64)> = got.iter().map(|(s, t)| (s.as_str(), *t)).collect();
        assert_eq!(got, want);
    }
}
