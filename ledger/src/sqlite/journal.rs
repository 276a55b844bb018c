//! Journal entries, job postings and the materialized writes that go with them.

use std::sync::Arc;

use bursar_pricing::Currency;
use futures_util::TryStreamExt;
use rustc_hash::{FxHashMap, FxHashSet};
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::labels::{intern, intern_one};
use super::read::JOURNAL_DAYS;
use super::tree::{
    account_ids, allocation_covering, create_under_root, load_context, require_account,
    require_open,
};
use super::{chunk_plan, col, db, json_ints, json_strings, multi_row_sql, value_rows, MAX_PARAMS};
use crate::calendar::{day_start, SECONDS_PER_DAY};
use crate::error::{add, LedgerError, Result};
use crate::materialize::{Effects, Id, UsageDims};
use crate::model::{
    EntryKind, JobRow, JournalEntry, JournalQuery, NewEntry, PostOutcome, UsageCharge,
};
use crate::posting::{plan_usage, release_entries, Entry, EntryType, Incoming, OpenHold, Posting};
use crate::storage::StatementReads;

/// Journal columns as the hot path writes them: `id` is left to SQLite (the next rowid, which
/// the writer predicts and checks).
const ENTRY_COLUMNS: &str = "type, account_id, currency_id, amount, effective_at, posted_at, \
     job, revision, is_final, cluster_id, user_id, partition_id, qos_id, state_id, \
     price_version_id, hold_id, key, note";
const ENTRY_ARITY: usize = 18;
/// Job entries rarely have a hold, key or note: their statement leaves those three out.
const JOB_ENTRY_ARITY: usize = 15;

/// The id the next journal entry gets. Only valid inside the write transaction.
async fn next_entry_id(conn: &mut SqliteConnection) -> Result<Id> {
    let max: Id = sqlx::query_scalar("select coalesce(max(id), 0) from journal")
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    Ok(max + 1)
}

type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

/// Runs `count` statements, building statement `i + 1` (binding its parameters) while
/// statement `i` executes on sqlx's SQLite worker thread: bulk writes keep both cores busy.
async fn pipelined<'q>(
    conn: &mut SqliteConnection,
    count: usize,
    mut build: impl FnMut(usize) -> SqliteQuery<'q>,
) -> Result<()> {
    let mut next = (count > 0).then(|| build(0));
    for i in 0..count {
        let Some(query) = next.take() else { break };
        let more = i + 1 < count;
        let (done, built) = tokio::join!(biased; query.execute(&mut *conn), async {
            more.then(|| build(i + 1))
        });
        done.map_err(db)?;
        next = built;
    }
    Ok(())
}

/// The multi-row statements that append `entries`, with ids from `first` on.
struct EntryStatements<'e, 'a> {
    chunks: Vec<&'e [&'e Entry<'a>]>,
    sql: Vec<Arc<str>>,
    /// Whether chunk `i` uses the short (job entry) column list.
    short: Vec<bool>,
    /// Id of the first entry of chunk `i`.
    first_ids: Vec<Id>,
}

impl<'e, 'a> EntryStatements<'e, 'a> {
    fn new(entries: &'e [&'e Entry<'a>], first: Id) -> EntryStatements<'e, 'a> {
        let mut chunks = Vec::new();
        let mut rest = entries;
        for size in chunk_plan(entries.len()) {
            let (chunk, tail) = rest.split_at(size);
            chunks.push(chunk);
            rest = tail;
        }
        let mut sql = Vec::with_capacity(chunks.len());
        let mut short = Vec::with_capacity(chunks.len());
        let mut first_ids = Vec::with_capacity(chunks.len());
        let mut id = first;
        for chunk in &chunks {
            let is_short = chunk
                .iter()
                .all(|e| e.hold_id.is_none() && e.key.is_none() && e.note.is_none());
            sql.push(if is_short {
                let columns = &ENTRY_COLUMNS[..ENTRY_COLUMNS.rfind(", hold_id").unwrap_or(0)];
                multi_row_sql(
                    "journal-short",
                    &format!("insert into journal ({columns})"),
                    chunk.len(),
                    JOB_ENTRY_ARITY,
                    "",
                )
            } else {
                multi_row_sql(
                    "journal",
                    &format!("insert into journal ({ENTRY_COLUMNS})"),
                    chunk.len(),
                    ENTRY_ARITY,
                    "",
                )
            });
            short.push(is_short);
            first_ids.push(id);
            id += Id::try_from(chunk.len()).unwrap_or(Id::MAX);
        }
        EntryStatements {
            chunks,
            sql,
            short,
            first_ids,
        }
    }

    fn len(&self) -> usize {
        self.chunks.len()
    }

    fn build<'q>(&'q self, i: usize, posted_at: i64) -> SqliteQuery<'q>
    where
        'e: 'q,
        'a: 'q,
    {
        let mut query = sqlx::query(&self.sql[i]);
        for e in self.chunks[i] {
            query = query
                .bind(e.entry_type.code())
                .bind(e.account)
                .bind(e.currency)
                .bind(e.amount)
                .bind(e.effective_at)
                .bind(posted_at)
                .bind(e.job)
                .bind(e.revision)
                .bind(e.is_final)
                .bind(e.cluster)
                .bind(e.user)
                .bind(e.partition)
                .bind(e.qos)
                .bind(e.state)
                .bind(e.price_version);
            if !self.short[i] {
                query = query
                    .bind(e.hold_id)
                    .bind(e.key.as_deref())
                    .bind(e.note.as_deref());
            }
        }
        query
    }

    /// Runs the statements, then checks that the entries got the ids predicted.
    async fn run(&self, conn: &mut SqliteConnection, posted_at: i64) -> Result<()> {
        pipelined(conn, self.len(), |i| self.build(i, posted_at)).await?;
        self.check(conn).await
    }

    async fn check(&self, conn: &mut SqliteConnection) -> Result<()> {
        let (Some(first), Some(last)) = (self.first_ids.first(), self.chunks.last()) else {
            return Ok(());
        };
        let expected = self.first_ids.last().copied().unwrap_or(*first)
            + Id::try_from(last.len()).unwrap_or(Id::MAX)
            - 1;
        check_last_id(conn, "journal", expected).await
    }
}

/// Fails (and so rolls back) unless the table's largest id is `expected`: entries are written
/// with the ids the writer predicted (SQLite's next rowid is the largest plus one).
async fn check_last_id(conn: &mut SqliteConnection, table: &str, expected: Id) -> Result<()> {
    let max: Id = sqlx::query_scalar(&format!("select coalesce(max(id), 0) from {table}"))
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    if max == expected {
        Ok(())
    } else {
        Err(LedgerError::Storage(format!(
            "{table} ids: expected the last to be {expected}, found {max}"
        )))
    }
}

/// Appends entries to the journal; returns the id of the first. Entry `i` gets id
/// `first + i`.
pub(super) async fn insert_entries(
    conn: &mut SqliteConnection,
    entries: &[&Entry<'_>],
    posted_at: i64,
) -> Result<Id> {
    let first = next_entry_id(conn).await?;
    EntryStatements::new(entries, first)
        .run(conn, posted_at)
        .await?;
    Ok(first)
}

/// A row of `jobs` to write: new identities are inserted, known ones get a new latest entry
/// and amount.
struct JobWrite<'a> {
    id: Id,
    cluster: Id,
    job_id: &'a str,
    submit: i64,
    display_id: Option<&'a str>,
    entry: Id,
    amount: i64,
}

/// New jobs are inserted in job-number order without an id (SQLite gives the next rowid,
/// which is the number the batch reserved); known jobs get their new latest entry and amount.
fn jobs_sql(new: bool, rows: usize) -> Arc<str> {
    if new {
        multi_row_sql(
            "jobs-new",
            "insert into jobs (cluster_id, job_id, submit, display_id, entry_id, amount)",
            rows,
            6,
            "",
        )
    } else {
        multi_row_sql(
            "jobs-update",
            "insert into jobs (id, cluster_id, job_id, submit, display_id, entry_id, amount)",
            rows,
            7,
            "on conflict (id) do update set entry_id = excluded.entry_id, amount = excluded.amount",
        )
    }
}

fn build_jobs<'q>(sql: &'q str, new: bool, chunk: &'q [JobWrite<'q>]) -> SqliteQuery<'q> {
    let mut query = sqlx::query(sql);
    for j in chunk {
        if !new {
            query = query.bind(j.id);
        }
        query = query
            .bind(j.cluster)
            .bind(j.job_id)
            .bind(j.submit)
            .bind(j.display_id)
            .bind(j.entry)
            .bind(j.amount);
    }
    query
}

/// Splits `rows` by [`chunk_plan`].
fn planned_chunks<T>(rows: &[T]) -> Vec<&[T]> {
    let mut chunks = Vec::new();
    let mut rest = rows;
    for size in chunk_plan(rows.len()) {
        let (chunk, tail) = rest.split_at(size);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// A row of `usage_daily_accounts`: account, currency, day.
type AccountDay = (Id, Id, i64);

/// Writes what `effects` accumulated: each touched allocation, account total and daily rollup
/// row once. STRICT integer columns refuse the real an overflowing `+` would produce.
pub(super) async fn write_effects(
    conn: &mut SqliteConnection,
    effects: &Effects<'_>,
    now: i64,
) -> Result<()> {
    for (id, charged, held) in effects.allocation_updates()? {
        sqlx::query("update allocations set charged = ?, held = ?, updated_at = ? where id = ?")
            .bind(charged)
            .bind(held)
            .bind(now)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }

    let totals = effects.total_deltas();
    for chunk in totals.chunks(MAX_PARAMS / 4) {
        let sql = format!(
            "insert into account_totals (account_id, currency_id, charged, held) values {}
             on conflict (account_id, currency_id) do update set
                 charged = charged + excluded.charged, held = held + excluded.held",
            value_rows(chunk.len(), 4)
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for ((account, currency), (charged, held)) in chunk {
            query = query
                .bind(*account)
                .bind(*currency)
                .bind(*charged)
                .bind(*held);
        }
        query.execute(&mut *conn).await.map_err(db)?;
    }

    let daily = effects.daily_deltas();

    // The same deltas summed over users, clusters, partitions and QOS (usage_daily_accounts).
    let mut sums: FxHashMap<AccountDay, (i64, i64)> = FxHashMap::default();
    for (k, (amount, jobs)) in &daily {
        let sum = sums.entry((k.account, k.currency, k.day)).or_default();
        sum.0 = add(sum.0, *amount, "daily account usage")?;
        sum.1 = add(sum.1, *jobs, "daily account jobs")?;
    }
    let mut per_account: Vec<_> = sums.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
    per_account.sort_unstable();
    for chunk in per_account.chunks(MAX_PARAMS / 5) {
        let sql = format!(
            "insert into usage_daily_accounts (account_id, currency_id, day, amount, job_count)
             values {}
             on conflict (account_id, currency_id, day) do update set
                 amount = amount + excluded.amount, job_count = job_count + excluded.job_count",
            value_rows(chunk.len(), 5)
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for ((account, currency, day), (amount, jobs)) in chunk {
            query = query
                .bind(*account)
                .bind(*currency)
                .bind(*day)
                .bind(*amount)
                .bind(*jobs);
        }
        query.execute(&mut *conn).await.map_err(db)?;
    }

    let chunks = planned_chunks(&daily);
    let sql: Vec<Arc<str>> = chunks
        .iter()
        .map(|c| {
            multi_row_sql(
                "usage_daily",
                "insert into usage_daily
                     (day, account_id, currency_id, user_id, cluster_id, partition_id, qos_id,
                      amount, job_count)",
                c.len(),
                9,
                "on conflict (day, account_id, currency_id, user_id, cluster_id, partition_id,
                     qos_id)
                 do update set
                     amount = amount + excluded.amount, job_count = job_count + excluded.job_count",
            )
        })
        .collect();
    pipelined(conn, chunks.len(), |i| {
        let mut query = sqlx::query(&sql[i]);
        for (k, (amount, jobs)) in chunks[i] {
            query = query
                .bind(k.day)
                .bind(k.account)
                .bind(k.currency)
                .bind(k.user)
                .bind(k.cluster)
                .bind(k.partition)
                .bind(k.qos)
                .bind(*amount)
                .bind(*jobs);
        }
        query
    })
    .await
}

/// A known job's current posting, as stored.
struct StoredJob {
    amount: i64,
    revision: String,
    is_final: bool,
    account: Id,
    currency: Id,
    user: Id,
    partition: Id,
    qos: Id,
    state: Id,
    price_version: Id,
    effective_at: i64,
}

impl StoredJob {
    fn posting(&self, cluster: Id) -> Posting<'_> {
        Posting {
            revision: &self.revision,
            is_final: self.is_final,
            account: self.account,
            currency: self.currency,
            cluster,
            user: self.user,
            partition: self.partition,
            qos: self.qos,
            state: self.state,
            price_version: self.price_version,
            amount: self.amount,
            effective_at: self.effective_at,
        }
    }
}

/// What the database knows about one record of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// The identity is stored with this very revision as its current one: nothing to do.
    Current,
    /// The identity is stored (job number) with another current revision.
    Stored(Id),
}

/// Looks up the identities of a cluster's records (`indexes` into `batch`) in one statement.
/// (`cross join` keeps the batch as the outer loop: the planner can't know how small it is.)
///
/// Matches come back as one `group_concat` text rather than one row each: sqlx hands rows over
/// one by one from its worker thread, which costs more than SQLite's whole lookup, and a
/// re-collected window is all matches. Per match: `index,job,s` when the stored revision is the
/// record's, else `index,job,amount,is_final,account,currency,user,partition,qos,state,
/// price_version,effective_at,posted,hex(revision)` where `posted` says whether the record's
/// revision was charged, adjusted or re-posted before.
async fn classify(
    conn: &mut SqliteConnection,
    cluster: Id,
    batch: &[UsageCharge],
    indexes: &[usize],
    known: &mut [Option<Known>],
    stored: &mut FxHashMap<Id, StoredJob>,
    posted: &mut FxHashSet<usize>,
) -> Result<()> {
    // Fresh records (an import's common case) are told apart by a cheaper probe first.
    let any_known: bool = sqlx::query_scalar(
        "select exists (select 1 from jobs
                        where cluster_id = ? and job_id in (select value from json_each(?)))",
    )
    .bind(cluster)
    .bind(json_strings(
        indexes.iter().map(|&i| batch[i].job_id.as_str()),
    ))
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    if !any_known {
        return Ok(());
    }
    let mut json = String::with_capacity(indexes.len() * 48);
    json.push('[');
    for (n, &i) in indexes.iter().enumerate() {
        let c = &batch[i];
        if n > 0 {
            json.push(',');
        }
        json.push('[');
        json.push_str(&i.to_string());
        json.push(',');
        json.push_str(json_strings([c.job_id.as_str()]).trim_matches(['[', ']']));
        json.push(',');
        json.push_str(&c.submit.to_string());
        json.push(',');
        json.push_str(json_strings([c.revision.as_str()]).trim_matches(['[', ']']));
        json.push(']');
    }
    json.push(']');
    let packed: Option<String> = sqlx::query_scalar(
        "select group_concat(
             (b.value ->> 0) || ',' || jb.id || ',' ||
             case when e.revision = (b.value ->> 3) then 's' else
                 jb.amount || ',' || coalesce(e.is_final, 0) || ',' || e.account_id || ',' ||
                 e.currency_id || ',' || e.user_id || ',' || e.partition_id || ',' ||
                 e.qos_id || ',' || e.state_id || ',' || e.price_version_id || ',' ||
                 e.effective_at || ',' ||
                 exists (select 1 from journal p where p.job = jb.id
                         and p.revision = (b.value ->> 3) and p.type in (2, 3, 5)) || ',' ||
                 hex(coalesce(e.revision, ''))
             end, ';')
         from json_each(?2) b
         cross join jobs jb on jb.cluster_id = ?1 and jb.job_id = (b.value ->> 1)
             and jb.submit = (b.value ->> 2)
         join journal e on e.id = jb.entry_id",
    )
    .bind(cluster)
    .bind(json)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    let Some(packed) = packed else {
        return Ok(());
    };
    let bad = || LedgerError::Storage("malformed job lookup result".to_string());
    for item in packed.split(';') {
        let mut fields = item.split(',');
        let mut int =
            || -> Result<i64> { fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad) };
        let index = usize::try_from(int()?).map_err(|_| bad())?;
        let job = int()?;
        let slot = known.get_mut(index).ok_or_else(bad)?;
        if item.ends_with(",s") {
            *slot = Some(Known::Current);
            continue;
        }
        *slot = Some(Known::Stored(job));
        let amount = int()?;
        let is_final = int()? != 0;
        let (account, currency, user, partition, qos, state, price_version) =
            (int()?, int()?, int()?, int()?, int()?, int()?, int()?);
        let effective_at = int()?;
        if int()? != 0 {
            posted.insert(index);
        }
        let revision = item.rsplit(',').next().map(unhex).ok_or_else(bad)??;
        stored.entry(job).or_insert(StoredJob {
            amount,
            revision,
            is_final,
            account,
            currency,
            user,
            partition,
            qos,
            state,
            price_version,
            effective_at,
        });
    }
    Ok(())
}

/// Decodes SQLite's `hex()` of a text.
fn unhex(hex: &str) -> Result<String> {
    let bad = || LedgerError::Storage(format!("malformed hex {hex:?}"));
    let bytes = hex
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<u8>>>()?;
    String::from_utf8(bytes).map_err(|_| bad())
}

pub(super) const OPEN_HOLD_SELECT: &str =
    "select id, account_id, currency_id, cluster_id, amount, placed_at from holds";

pub(super) fn open_hold(row: &SqliteRow) -> Result<OpenHold> {
    Ok(OpenHold {
        id: col(row, 0)?,
        account: col(row, 1)?,
        currency: col(row, 2)?,
        cluster: col(row, 3)?,
        amount: col(row, 4)?,
        placed_at: col(row, 5)?,
    })
}

/// The active holds of a cluster (`?1`) linked to any of the job ids of a JSON array of
/// `[job id, submit time]` pairs (`?2`), through `holds_active_by_job`, and placed no later
/// than `?3` seconds after the latest of their job id's submit times
/// ([`crate::model::SUBMIT_SKEW_SECS`]): a record of an older job under a reused id is not
/// theirs. A job array's hold is not one of them, though its id is its last task's raw id:
/// its tasks settle it one by one ([`super::arrays`]).
pub(super) fn holds_to_settle_sql() -> String {
    format!(
        "{OPEN_HOLD_SELECT} where state = 'active' and cluster_id = ?1
         and job_ref in (select json_extract(value, '$[0]') from json_each(?2))
         and placed_at <= ?3 + (select max(json_extract(value, '$[1]')) from json_each(?2)
                                where json_extract(value, '$[0]') = holds.job_ref)
         and not exists (select 1 from api_jobs j where j.hold_id = holds.id
                         and j.array_tasks is not null)
         order by id"
    )
}

/// `query` with its next two parameters bound: the JSON array of the `[job id, submit time]`
/// pairs of `jobs`, then [`crate::model::SUBMIT_SKEW_SECS`] — what every lookup of the holds
/// (and the jobs that hold nothing) a batch of records settles or extends takes
/// ([`holds_to_settle_sql`], [`super::holds::extend_sighted_sql`],
/// [`super::gateway::SETTLE_FREE_SQL`]).
pub(super) fn bind_job_submits<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    jobs: &[(&str, i64)],
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    query
        .bind(json_job_submits(jobs.iter().copied()))
        .bind(crate::model::SUBMIT_SKEW_SECS)
}

/// A JSON array of `[job id, submit time]` pairs.
fn json_job_submits<'s>(jobs: impl IntoIterator<Item = (&'s str, i64)>) -> String {
    let mut out = String::from("[");
    for (i, (job_id, submit)) in jobs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        super::push_json_string(&mut out, job_id);
        out.push(',');
        out.push_str(&submit.to_string());
        out.push(']');
    }
    out.push(']');
    out
}

/// Active holds whose (cluster, job_ref) is the (cluster, job_id) of a record that ends its
/// job, placed since that job was submitted ([`crate::model::SUBMIT_SKEW_SECS`]).
async fn holds_to_settle(
    conn: &mut SqliteConnection,
    finals: &FxHashMap<Id, Vec<(&str, i64)>>,
) -> Result<Vec<OpenHold>> {
    let mut holds = Vec::new();
    let sql = holds_to_settle_sql();
    for (cluster, jobs) in finals {
        let rows = bind_job_submits(sqlx::query(&sql).bind(cluster), jobs)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
        for row in &rows {
            holds.push(open_hold(row)?);
        }
    }
    holds.sort_by_key(|h| h.id);
    Ok(holds)
}

const SETTLED_REASON: &str = "settled: the job's final usage was posted";

/// Posts a batch of priced job records; see [`crate::posting`] for the rules.
pub(super) async fn post_usage(
    conn: &mut SqliteConnection,
    batch: &[UsageCharge],
    posted_at: i64,
) -> Result<PostOutcome> {
    // Labels: each record's strings as slots into the batch's distinct values, so that the
    // ids are found by indexing rather than by hashing every string twice.
    const CLUSTER: usize = 0;
    const CURRENCY: usize = 1;
    const USER: usize = 2;
    const PARTITION: usize = 3;
    const QOS: usize = 4;
    const STATE: usize = 5;
    const PRICE_VERSION: usize = 6;
    let mut slot_of: FxHashMap<&str, usize> = FxHashMap::default();
    let mut distinct: Vec<&str> = Vec::new();
    let mut slots: Vec<[usize; 7]> = Vec::with_capacity(batch.len());
    for c in batch {
        let values = [
            c.cluster.as_str(),
            c.currency.as_str(),
            c.user.as_str(),
            c.partition.as_deref().unwrap_or(""),
            c.qos.as_deref().unwrap_or(""),
            c.state.as_str(),
            c.price_version.as_deref().unwrap_or(""),
        ];
        slots.push(values.map(|v| {
            *slot_of.entry(v).or_insert_with(|| {
                distinct.push(v);
                distinct.len() - 1
            })
        }));
    }
    let label = intern(conn, &distinct).await?;
    let label_ids: Vec<Id> = distinct
        .iter()
        .map(|v| label.get(v).copied().unwrap_or(0))
        .collect();
    let lid = |record: usize, field: usize| label_ids[slots[record][field]];

    // Accounts, creating unknown ones under root.
    let mut names: Vec<&str> = batch.iter().map(|c| c.account.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut account = account_ids(conn, &names).await?;
    let mut created: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !account.contains_key(n))
        .collect();
    if !created.is_empty() {
        account.extend(create_under_root(conn, &created, posted_at).await?);
        created.sort_unstable();
        tracing::warn!(accounts = ?created, "usage for unknown accounts: created them under root");
    }

    // Known identities, per cluster.
    let mut by_cluster: FxHashMap<Id, Vec<usize>> = FxHashMap::default();
    let mut finals: FxHashMap<Id, Vec<(&str, i64)>> = FxHashMap::default();
    let mut unfinished: FxHashMap<Id, Vec<(&str, i64)>> = FxHashMap::default();
    for (i, c) in batch.iter().enumerate() {
        let cluster = lid(i, CLUSTER);
        by_cluster.entry(cluster).or_default().push(i);
        let job = (c.job_id.as_str(), c.submit);
        if c.settles_hold() {
            finals.entry(cluster).or_default().push(job);
        } else {
            unfinished.entry(cluster).or_default().push(job);
        }
    }
    let mut known: Vec<Option<Known>> = vec![None; batch.len()];
    let mut stored: FxHashMap<Id, StoredJob> = FxHashMap::default();
    let mut posted_index: FxHashSet<usize> = FxHashSet::default();
    for (cluster, indexes) in &by_cluster {
        classify(
            conn,
            *cluster,
            batch,
            indexes,
            &mut known,
            &mut stored,
            &mut posted_index,
        )
        .await?;
    }

    // Resolve every record to a job number: a stored one or a fresh one.
    let mut next_job: Id = sqlx::query_scalar("select coalesce(max(id), 0) + 1 from jobs")
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    let first_new_job = next_job;
    let mut fresh: FxHashMap<(Id, &str, i64), Id> = FxHashMap::default();
    let mut first_record: FxHashMap<Id, &UsageCharge> = FxHashMap::default();
    let mut posted: FxHashSet<(Id, &str)> = FxHashSet::default();
    let mut unchanged_up_front = 0;
    let mut incoming = Vec::with_capacity(batch.len());
    let mut first_index: FxHashMap<Id, usize> = FxHashMap::default();
    for (i, c) in batch.iter().enumerate() {
        let cluster = lid(i, CLUSTER);
        let job = match known[i] {
            Some(Known::Current) => {
                unchanged_up_front += 1;
                continue;
            }
            Some(Known::Stored(job)) => {
                if posted_index.contains(&i) {
                    posted.insert((job, c.revision.as_str()));
                }
                job
            }
            None => *fresh
                .entry((cluster, c.job_id.as_str(), c.submit))
                .or_insert_with(|| {
                    let id = next_job;
                    next_job += 1;
                    id
                }),
        };
        first_record.entry(job).or_insert(c);
        first_index.entry(job).or_insert(i);
        incoming.push(Incoming {
            job,
            posting: Posting {
                revision: &c.revision,
                is_final: c.is_final,
                account: account.get(c.account.as_str()).copied().ok_or_else(|| {
                    LedgerError::Storage(format!("account {:?} was not resolved", c.account))
                })?,
                currency: lid(i, CURRENCY),
                cluster,
                user: lid(i, USER),
                partition: lid(i, PARTITION),
                qos: lid(i, QOS),
                state: lid(i, STATE),
                price_version: lid(i, PRICE_VERSION),
                amount: c.amount_micros,
                effective_at: c.effective_at,
            },
            note: c.note.as_deref(),
        });
    }
    let current: FxHashMap<Id, Posting<'_>> = stored
        .iter()
        .map(|(&job, j)| (job, j.posting(lid(first_index[&job], CLUSTER))))
        .collect();

    // Most batches (every import, a cluster nobody submits to through bursar) touch no hold:
    // one look saves settling and extending them.
    let any_active = (!finals.is_empty() || !unfinished.is_empty())
        && sqlx::query_scalar("select exists (select 1 from holds where state = 'active')")
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
    let settling = if any_active {
        holds_to_settle(conn, &finals).await?
    } else {
        Vec::new()
    };

    let mut context_accounts: Vec<Id> = account.values().copied().collect();
    context_accounts.extend(stored.values().map(|j| j.account));
    context_accounts.extend(settling.iter().map(|h| h.account));
    context_accounts.sort_unstable();
    context_accounts.dedup();
    let (tree, allocs) = load_context(conn, &context_accounts).await?;

    let mut effects = Effects::new(&tree, &allocs);
    let plan = plan_usage(&incoming, &current, &posted, &mut effects)?;
    let releases = release_entries(&settling, SETTLED_REASON, &mut effects)?;

    let entries: Vec<&Entry<'_>> = plan.entries.iter().chain(releases.iter()).collect();
    let first_entry = next_entry_id(conn).await?;
    let mut writes = Vec::with_capacity(plan.jobs.len());
    for update in &plan.jobs {
        let entry = first_entry
            + Id::try_from(update.entry)
                .map_err(|_| LedgerError::Overflow("journal entry index".to_string()))?;
        let c = first_record.get(&update.job).ok_or_else(|| {
            LedgerError::Storage(format!("job {} has no record in the batch", update.job))
        })?;
        writes.push(JobWrite {
            id: update.job,
            cluster: lid(first_index[&update.job], CLUSTER),
            job_id: &c.job_id,
            submit: c.submit,
            display_id: (c.display_id != c.job_id).then_some(c.display_id.as_str()),
            entry,
            amount: update.amount,
        });
    }
    // New jobs in number order (they were numbered in batch order, as the plan lists them).
    let (new_jobs, known_jobs): (Vec<JobWrite<'_>>, Vec<JobWrite<'_>>) =
        writes.into_iter().partition(|w| w.id >= first_new_job);
    if new_jobs
        .iter()
        .enumerate()
        .any(|(k, w)| Id::try_from(k).map_or(true, |k| w.id != first_new_job + k))
    {
        return Err(LedgerError::Storage(
            "new job numbers are not contiguous".to_string(),
        ));
    }

    // Journal rows, then job rows, as one pipelined sequence of multi-row statements.
    let entry_statements = EntryStatements::new(&entries, first_entry);
    let mut job_chunks: Vec<(bool, &[JobWrite<'_>])> = Vec::new();
    job_chunks.extend(planned_chunks(&new_jobs).into_iter().map(|c| (true, c)));
    job_chunks.extend(planned_chunks(&known_jobs).into_iter().map(|c| (false, c)));
    let job_sql: Vec<Arc<str>> = job_chunks
        .iter()
        .map(|(new, c)| jobs_sql(*new, c.len()))
        .collect();
    let n_entries = entry_statements.len();
    pipelined(conn, n_entries + job_chunks.len(), |i| {
        if i < n_entries {
            entry_statements.build(i, posted_at)
        } else {
            let (new, chunk) = job_chunks[i - n_entries];
            build_jobs(&job_sql[i - n_entries], new, chunk)
        }
    })
    .await?;
    entry_statements.check(conn).await?;
    if !new_jobs.is_empty() {
        check_last_id(conn, "jobs", next_job - 1).await?;
    }
    write_effects(conn, &effects, posted_at).await?;
    let settled_ids: Vec<Id> = settling.iter().map(|h| h.id).collect();
    super::holds::mark_closed(conn, &settled_ids, "settled", SETTLED_REASON, posted_at).await?;
    if any_active {
        super::holds::extend_sighted(conn, &unfinished, posted_at).await?;
    }
    // Job arrays settle task by task (one look first: most batches have no array task, most
    // ledgers no array submitted through bursar).
    let array_settled = super::arrays::post_tasks(conn, batch, posted_at).await?;
    // The jobs that hold nothing end with the same records (one look first: most batches
    // find none waiting). `api_jobs` names its clusters.
    if !finals.is_empty() && super::gateway::free_jobs_waiting(conn).await? {
        let mut names: FxHashMap<Id, &str> = FxHashMap::default();
        for (i, c) in batch.iter().enumerate() {
            names.entry(lid(i, CLUSTER)).or_insert(c.cluster.as_str());
        }
        for (cluster, jobs) in &finals {
            if let Some(name) = names.get(cluster) {
                super::gateway::settle_free(conn, name, jobs, posted_at).await?;
            }
        }
    }

    Ok(PostOutcome {
        charged: plan.charged,
        adjusted: plan.adjusted,
        unchanged: plan.unchanged + unchanged_up_front,
        created_accounts: created.into_iter().map(str::to_string).collect(),
        settled_holds: u64::try_from(settled_ids.len())
            .unwrap_or(u64::MAX)
            .saturating_add(array_settled),
    })
}

/// Posts a manual deposit, adjustment or refund; `false` when the key was posted before with
/// the same content.
pub(super) async fn post_entry(
    conn: &mut SqliteConnection,
    entry: &NewEntry,
    posted_at: i64,
) -> Result<bool> {
    let previous = sqlx::query(
        "select j.kind, a.name, c.value, j.amount, j.effective_at from journal j
         join accounts a on a.id = j.account_id join labels c on c.id = j.currency_id
         where j.key = ?",
    )
    .bind(&entry.idempotency_key)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    if let Some(row) = previous {
        let same = col::<String>(&row, 0)? == entry.kind.as_str()
            && col::<String>(&row, 1)? == entry.account
            && col::<String>(&row, 2)? == entry.currency.as_str()
            && col::<i64>(&row, 3)? == entry.amount
            && col::<i64>(&row, 4)? == entry.effective_at;
        return if same {
            Ok(false)
        } else {
            Err(LedgerError::Conflict(format!(
                "idempotency key {:?} was already used for a different entry",
                entry.idempotency_key
            )))
        };
    }
    let account = require_account(conn, &entry.account).await?;
    let entry_type = match entry.kind {
        EntryKind::Deposit => EntryType::Deposit,
        EntryKind::Adjustment => EntryType::Manual,
        EntryKind::Refund => EntryType::Refund,
        other => {
            return Err(LedgerError::Invalid(format!(
                "{other} entries are not posted by hand"
            )))
        }
    };

    if entry_type == EntryType::Deposit && entry.amount > 0 {
        require_open(conn, account, &entry.account).await?;
    }
    if entry_type == EntryType::Deposit {
        let Some((id, amount)) =
            allocation_covering(conn, account, entry.currency.as_str(), entry.effective_at).await?
        else {
            return Err(LedgerError::not_found(
                "allocation",
                format!(
                    "{} in {} covering {}",
                    entry.account, entry.currency, entry.effective_at
                ),
            ));
        };
        let amount = add(amount, entry.amount, "allocation amount")?;
        if amount < 0 {
            return Err(LedgerError::Invalid(format!(
                "the deposit would leave allocation {id} with a negative amount"
            )));
        }
        sqlx::query("update allocations set amount = ?, updated_at = ? where id = ?")
            .bind(amount)
            .bind(posted_at)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    let currency = intern_one(conn, entry.currency.as_str()).await?;
    let mut row = Entry::keyed(
        entry_type,
        entry.idempotency_key.clone(),
        account,
        currency,
        entry.amount,
        entry.effective_at,
    );
    row.note = entry.note.as_deref().map(Into::into);
    insert_entries(conn, &[&row], posted_at).await?;
    if entry_type != EntryType::Deposit {
        let (tree, allocs) = load_context(conn, &[account]).await?;
        let mut effects = Effects::new(&tree, &allocs);
        effects.usage(
            account,
            currency,
            entry.effective_at,
            entry.amount,
            0,
            UsageDims::default(),
        )?;
        write_effects(conn, &effects, posted_at).await?;
    }
    Ok(true)
}

const ENTRY_SELECT: &str = "select id, idempotency_key, kind, account, currency, amount, \
     job_count, effective_at, posted_at, cluster, job_id, display_id, submit, user_name, \
     partition_name, qos, state, revision, price_version, hold_id, note from journal_view";

fn journal_entry(row: &SqliteRow) -> Result<JournalEntry> {
    Ok(JournalEntry {
        id: col(row, 0)?,
        idempotency_key: col(row, 1)?,
        kind: col::<String>(row, 2)?.parse()?,
        account: col(row, 3)?,
        currency: Currency::new(&col::<String>(row, 4)?),
        amount: col(row, 5)?,
        job_count: col(row, 6)?,
        effective_at: col(row, 7)?,
        posted_at: col(row, 8)?,
        cluster: col(row, 9)?,
        job_id: col(row, 10)?,
        display_id: col(row, 11)?,
        submit: col(row, 12)?,
        user: col(row, 13)?,
        partition: col(row, 14)?,
        qos: col(row, 15)?,
        state: col(row, 16)?,
        revision: col(row, 17)?,
        price_version: col(row, 18)?,
        hold_id: col(row, 19)?,
        note: col(row, 20)?,
    })
}

pub(super) async fn list(
    conn: &mut SqliteConnection,
    q: &JournalQuery,
) -> Result<Vec<JournalEntry>> {
    // Filter on the journal's ids and indexes, then name the entries through the view. Only
    // the filters given are in the SQL, so that SQLite can use the job index.
    let mut filters = vec!["j.id > ?1".to_string()];
    if q.account.is_some() {
        filters.push("j.account_id = (select id from accounts where name = ?2)".to_string());
    }
    if q.cluster.is_some() {
        filters.push("j.cluster_id = (select id from labels where value = ?3)".to_string());
    }
    if q.job_id.is_some() {
        // A job's own entries, and the manual refunds given for it.
        filters.push(
            "(j.job in (select jb.id from jobs jb where jb.job_id = ?4
                  and (?3 is null or jb.cluster_id = (select id from labels where value = ?3)))
              or j.job_ref in (select jb.id from jobs jb where jb.job_id = ?4
                  and (?3 is null or jb.cluster_id = (select id from labels where value = ?3))))"
                .to_string(),
        );
    }
    let sql = format!(
        "{ENTRY_SELECT} where id in (
             select j.id from journal j where {} order by j.id limit ?5
         )
         order by id",
        filters.join(" and ")
    );
    // Row by row: a listing of a whole cluster's journal is hundreds of thousands of rows,
    // and sqlx's rows weigh several times the entries made of them.
    let mut rows = sqlx::query(&sql)
        .bind(q.after_id)
        .bind(q.account.as_deref())
        .bind(q.cluster.as_deref())
        .bind(q.job_id.as_deref())
        .bind(q.limit.map_or(-1, i64::from))
        .fetch(&mut *conn);
    let mut entries = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(db)? {
        entries.push(journal_entry(&row)?);
    }
    Ok(entries)
}

/// Usage entries (types 2 to 7) with `effective_at ∈ [from, to)`, through the
/// `journal_by_day` index, ordered by `effective_at` then id.
pub(super) async fn usage_entries(
    conn: &mut SqliteConnection,
    from: i64,
    to: i64,
) -> Result<Vec<JournalEntry>> {
    if from >= to {
        return Ok(Vec::new());
    }
    let sql = format!(
        "with recursive {JOURNAL_DAYS}
         {ENTRY_SELECT} where id in (
             select j.id from days cross join journal j indexed by journal_by_day
             where j.effective_at / 86400 = days.d and j.effective_at >= ?1
               and j.effective_at < ?2 and j.type between 2 and 7
         )
         order by effective_at, id"
    );
    let rows = sqlx::query(&sql)
        .bind(from)
        .bind(to)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(journal_entry).collect()
}

/// The earliest and latest `effective_at` in `[from, to)`: two seeks of `journal_by_day`
/// for the first and last day, then those days' entries.
pub(super) async fn span(
    conn: &mut SqliteConnection,
    from: i64,
    to: i64,
) -> Result<Option<(i64, i64)>> {
    if from >= to {
        return Ok(None);
    }
    // One min() or max() each, so that SQLite answers them from the index's ends.
    let (first, last): (Option<i64>, Option<i64>) = sqlx::query_as(
        "select
           (select min(effective_at) from journal indexed by journal_by_day
            where effective_at / 86400 = (select min(effective_at / 86400) from journal
                indexed by journal_by_day
                where effective_at / 86400 between ?1 / 86400 and (?2 - 1) / 86400
                and effective_at >= ?1 and effective_at < ?2)
              and effective_at >= ?1 and effective_at < ?2),
           (select max(effective_at) from journal indexed by journal_by_day
            where effective_at / 86400 = (select max(effective_at / 86400) from journal
                indexed by journal_by_day
                where effective_at / 86400 between ?1 / 86400 and (?2 - 1) / 86400
                and effective_at >= ?1 and effective_at < ?2)
              and effective_at >= ?1 and effective_at < ?2)",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    Ok(first.zip(last))
}

/// What a statement of `account` in `currency` reads (see [`StatementReads`]): the subtree's
/// accounts from the tree, then per day and account one range of `journal_by_day` for the
/// movements, the deposits and the partial days before `from`, and the whole days before
/// `from` from `usage_daily_accounts`. Nothing reads the rest of the journal.
pub(super) async fn statement_reads(
    conn: &mut SqliteConnection,
    account: &str,
    currency: &Currency,
    window_start: i64,
    from: i64,
    to: i64,
) -> Result<Option<StatementReads>> {
    let subtree: Vec<Id> = sqlx::query_scalar(
        "with recursive subtree (id) as (
             select id from accounts where name = ?1
             union all
             select a.id from accounts a join subtree s on a.parent_id = s.id
         )
         select id from subtree",
    )
    .bind(account)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let Some(&own) = subtree.first() else {
        return Ok(None);
    };
    let currency_id: Option<Id> = sqlx::query_scalar("select id from labels where value = ?")
        .bind(currency.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    let Some(currency_id) = currency_id else {
        return Ok(Some(StatementReads {
            deposits_before: 0,
            usage_before: 0,
            lines: Vec::new(),
        }));
    };
    let ids = json_ints(subtree.iter().copied());

    let deposits_before: i64 = if window_start < from {
        sqlx::query_scalar(&format!(
            "with recursive {JOURNAL_DAYS}
             select coalesce(sum(j.amount), 0)
             from days cross join journal j indexed by journal_by_day
             where j.effective_at / 86400 = days.d and j.account_id = ?3 and j.currency_id = ?4
               and j.effective_at >= ?1 and j.effective_at < ?2 and j.type = 1"
        ))
        .bind(window_start)
        .bind(from)
        .bind(own)
        .bind(currency_id)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?
    } else {
        0
    };

    // Usage before `from`: whole days from the rollup, partial days from the journal.
    let usage_sql = format!(
        "with recursive {JOURNAL_DAYS}
         select coalesce(sum(j.amount), 0)
         from days cross join journal j indexed by journal_by_day
         where j.effective_at / 86400 = days.d
           and j.account_id in (select value from json_each(?3)) and j.currency_id = ?4
           and j.effective_at >= ?1 and j.effective_at < ?2 and j.type between 2 and 7"
    );
    let journal_usage = |start: i64, end: i64| {
        sqlx::query_scalar::<_, i64>(&usage_sql)
            .bind(start)
            .bind(end)
            .bind(ids.as_str())
            .bind(currency_id)
    };
    let first_day = day_start(window_start);
    let first_day = if first_day < window_start {
        first_day + SECONDS_PER_DAY
    } else {
        first_day
    };
    let last_day = day_start(from);
    let mut usage_before = 0;
    if first_day < last_day {
        for (start, end) in [(window_start, first_day), (last_day, from)] {
            if start < end {
                let part = journal_usage(start, end)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db)?;
                usage_before = add(usage_before, part, "statement opening")?;
            }
        }
        let days: i64 = sqlx::query_scalar(
            "select coalesce(sum(amount), 0) from usage_daily_accounts
             where account_id in (select value from json_each(?1)) and currency_id = ?2
               and day >= ?3 and day < ?4",
        )
        .bind(ids.as_str())
        .bind(currency_id)
        .bind(first_day)
        .bind(last_day)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        usage_before = add(usage_before, days, "statement opening")?;
    } else if window_start < from {
        usage_before = journal_usage(window_start, from)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
    }

    let sql = format!(
        "with recursive {JOURNAL_DAYS}
         {ENTRY_SELECT} where id in (
             select j.id from days cross join journal j indexed by journal_by_day
             where j.effective_at / 86400 = days.d
               and j.account_id in (select value from json_each(?3)) and j.currency_id = ?4
               and j.effective_at >= ?1 and j.effective_at < ?2
               and (j.type <> 1 or j.account_id = ?5)
         )
         order by id"
    );
    let rows = sqlx::query(&sql)
        .bind(from)
        .bind(to)
        .bind(ids.as_str())
        .bind(currency_id)
        .bind(own)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let lines = rows.iter().map(journal_entry).collect::<Result<_>>()?;
    Ok(Some(StatementReads {
        deposits_before,
        usage_before,
        lines,
    }))
}

/// The entry posted under a caller's idempotency key, if any.
pub(super) async fn by_key(conn: &mut SqliteConnection, key: &str) -> Result<Option<JournalEntry>> {
    let sql = format!("{ENTRY_SELECT} where id = (select id from journal where key = ?)");
    let row = sqlx::query(&sql)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(journal_entry).transpose()
}

/// The journal entries of the jobs named by the JSON array `?1` of `[cluster, job id]`
/// pairs, each pair's as [`list`] finds a job's (`JournalQuery { cluster, job_id }`): the
/// entries of every posting of that job id on that cluster, and the refunds given for them;
/// each entry once, in posting order. Through the jobs' unique index, then
/// `journal_job_entries` and `journal_refunds_by_job`.
pub(super) fn jobs_journal_sql() -> String {
    format!(
        "with wanted as (
             select distinct json_extract(value, '$[0]') as cluster,
                    json_extract(value, '$[1]') as job_id
             from json_each(?1)
         ), postings as (
             select l.id as cluster_id, jb.id as posting
             from wanted w join labels l on l.value = w.cluster
             join jobs jb on jb.cluster_id = l.id and jb.job_id = w.job_id
         )
         {}",
        postings_entries()
    )
}

/// The entries of the job identities of a `postings (cluster_id, posting)` table defined
/// before it, and the refunds given for them; each once, in posting order.
fn postings_entries() -> String {
    format!(
        "{ENTRY_SELECT} where id in (
             select j.id from postings p
             join journal j on (j.job = p.posting or j.job_ref = p.posting)
             where j.cluster_id = p.cluster_id
         )
         order by id"
    )
}

pub(super) async fn jobs_journal(
    conn: &mut SqliteConnection,
    jobs: &[(String, String)],
) -> Result<Vec<JournalEntry>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let mut pairs = String::from("[");
    for (i, (cluster, job_id)) in jobs.iter().enumerate() {
        if i > 0 {
            pairs.push(',');
        }
        pairs.push_str(&json_strings([cluster.as_str(), job_id.as_str()]));
    }
    pairs.push(']');
    let rows = sqlx::query(&jobs_journal_sql())
        .bind(pairs)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(journal_entry).collect()
}

/// The numbers of the next `?3` job identities after number `?1`, of the cluster labelled
/// `?2` when it is not null, by number: the order they were first posted.
pub(super) const JOBS_PAGE_SQL: &str = "select id from jobs
     where id > ?1 and (?2 is null or cluster_id = (select id from labels where value = ?2))
     order by id limit ?3";

/// The journal entries of the job identities numbered in the JSON array `?1`, and the refunds
/// given for them; each entry once, in posting order. Through the jobs' primary key, then
/// `journal_job_entries` and `journal_refunds_by_job`.
pub(super) fn postings_journal_sql() -> String {
    format!(
        "with postings as (
             select jb.id as posting, jb.cluster_id from json_each(?1) w
             join jobs jb on jb.id = w.value
         )
         {}",
        postings_entries()
    )
}

/// The entries of the next `limit` job identities after number `after` (of `cluster`), and
/// the number of the last of them; `None` when none is left.
pub(super) async fn jobs_journal_page(
    conn: &mut SqliteConnection,
    cluster: Option<&str>,
    after: i64,
    limit: u32,
) -> Result<(Vec<JournalEntry>, Option<i64>)> {
    let ids: Vec<i64> = sqlx::query_scalar(JOBS_PAGE_SQL)
        .bind(after)
        .bind(cluster)
        .bind(i64::from(limit))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let Some(&last) = ids.last() else {
        return Ok((Vec::new(), None));
    };
    let rows = sqlx::query(&postings_journal_sql())
        .bind(json_ints(ids))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let entries = rows.iter().map(journal_entry).collect::<Result<_>>()?;
    Ok((entries, Some(last)))
}

pub(super) async fn job(
    conn: &mut SqliteConnection,
    cluster: &str,
    job_id: &str,
    submit: i64,
) -> Result<Option<JobRow>> {
    let row = sqlx::query(
        "select cluster, job_id, submit, display_id, revision, is_final, account, currency,
                amount, effective_at, user_name, partition_name, qos, state, price_version,
                updated_at
         from jobs_view where cluster = ? and job_id = ? and submit = ?",
    )
    .bind(cluster)
    .bind(job_id)
    .bind(submit)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.map(|r| {
        Ok(JobRow {
            cluster: col(&r, 0)?,
            job_id: col(&r, 1)?,
            submit: col(&r, 2)?,
            display_id: col(&r, 3)?,
            revision: col(&r, 4)?,
            is_final: col(&r, 5)?,
            account: col(&r, 6)?,
            currency: Currency::new(&col::<String>(&r, 7)?),
            amount: col(&r, 8)?,
            effective_at: col(&r, 9)?,
            user: col(&r, 10)?,
            partition: col(&r, 11)?,
            qos: col(&r, 12)?,
            state: col(&r, 13)?,
            price_version: col(&r, 14)?,
            updated_at: col(&r, 15)?,
        })
    })
    .transpose()
}
