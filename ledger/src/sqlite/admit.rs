//! The admission fast path.
//!
//! - [`view`]: what a quote reads (the account, the user's association with it, its chain and
//!   the chain's allocations in force) in one statement.
//! - [`admit`]: the holds and API jobs of many submissions in one write transaction — group
//!   commit — with the records of jobs forwarded since the last one (cluster job ids noted,
//!   holds linked). Each submission is checked against the chain's allocations as they stand
//!   after the submissions before it in the batch, exactly as if each were its own
//!   transaction. It runs synchronously on the admission writer's own connection and thread
//!   ([`super::admitter`]): a transaction is a handful of calls into SQLite with no thread
//!   between them, where each statement through sqlx was a round trip to the connection's
//!   worker thread, and each result row and statement result a wake-up.

use std::collections::{HashMap, HashSet};

use bursar_pricing::Currency;
use rusqlite::{Connection, OptionalExtension};
use sqlx::SqliteConnection;

use super::holds;
use super::{col, db, json_strings};
use crate::error::{LedgerError, Result};
use crate::materialize::{AllocSpan, Effects, Id};
use crate::model::{
    AdmissionView, AdmitOutcome, ApiJob, BalanceRow, ForwardedJob, HoldRow, HoldState,
    NewAdmission, NewHold,
};
use crate::posting::{hold_entry, OpenHold};
use crate::tree::AccountTree;

/// One statement: a header row (kind 0: the account, whether the user is associated), the
/// chain (kind 1, by depth, with whether each is closed) and the chain's allocations covering
/// `at` (kind 2).
const VIEW_SQL: &str = "with recursive
    target (name) as materialized (
        select coalesce(?1, (select a.name from users u join accounts a
                             on a.id = u.default_account_id where u.name = ?2))
    ),
    chain (id, name, parent_id, depth, closed) as materialized (
        select a.id, a.name, a.parent_id, 0, a.closed_at is not null
        from accounts a join target t on a.name = t.name
        union all
        select p.id, p.name, p.parent_id, c.depth + 1, p.closed_at is not null
        from accounts p join chain c on p.id = c.parent_id
    )
    select 0, 0, t.name,
           exists (select 1 from associations s join chain c on c.id = s.account_id
                   where s.user_name = ?2 and c.depth = 0),
           null, null, null, null, null
    from target t
    union all
    select 1, depth, name, closed, null, null, null, null, null from chain
    union all
    select 2, c.depth, c.name, cur.value, al.amount, al.charged, al.held, al.period_start,
           al.period_end
    from allocations al join chain c on c.id = al.account_id
    join labels cur on cur.id = al.currency_id
    where al.period_start <= ?3 and ?3 < al.period_end";

pub(super) async fn view(
    conn: &mut SqliteConnection,
    user: &str,
    account: Option<&str>,
    at: i64,
) -> Result<AdmissionView> {
    let rows = sqlx::query(VIEW_SQL)
        .bind(account)
        .bind(user)
        .bind(at)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let mut view = AdmissionView {
        account: None,
        associated: false,
        chain: Vec::new(),
        closed: None,
        allocations: Vec::new(),
    };
    let mut chain: Vec<(i64, String, bool)> = Vec::new();
    // (depth, row) of each allocation, for `available`.
    let mut allocations: Vec<(i64, BalanceRow)> = Vec::new();
    for row in &rows {
        let kind: i64 = col(row, 0)?;
        let depth: i64 = col(row, 1)?;
        match kind {
            0 => {
                view.account = col(row, 2)?;
                view.associated = col::<i64>(row, 3)? != 0;
            }
            1 => chain.push((depth, col(row, 2)?, col::<i64>(row, 3)? != 0)),
            _ => {
                let amount: i64 = col(row, 4)?;
                let charged: i64 = col(row, 5)?;
                let held: i64 = col(row, 6)?;
                let remaining = amount
                    .checked_sub(charged)
                    .and_then(|r| r.checked_sub(held))
                    .ok_or_else(|| LedgerError::Overflow("remaining of an allocation".into()))?;
                allocations.push((
                    depth,
                    BalanceRow {
                        account: col(row, 2)?,
                        currency: Currency::new(&col::<String>(row, 3)?),
                        allocated: Some(amount),
                        charged,
                        held,
                        remaining: Some(remaining),
                        available: None,
                        period: Some((col(row, 7)?, col(row, 8)?)),
                    },
                ));
            }
        }
    }
    chain.sort_unstable_by_key(|(depth, _, _)| *depth);
    view.closed = chain
        .iter()
        .find(|(_, _, closed)| *closed)
        .map(|(_, name, _)| name.clone());
    view.chain = chain.into_iter().map(|(_, name, _)| name).collect();
    // An account's ancestors are deeper in the chain: available = the least remaining of the
    // row itself and every allocation above it in the same currency.
    let available: Vec<Option<i64>> = allocations
        .iter()
        .map(|(depth, row)| {
            allocations
                .iter()
                .filter(|(d, r)| d >= depth && r.currency == row.currency)
                .filter_map(|(_, r)| r.remaining)
                .min()
        })
        .collect();
    for ((_, row), available) in allocations.iter_mut().zip(available) {
        row.available = available;
    }
    allocations.sort_unstable_by_key(|(depth, row)| (*depth, row.currency.to_string()));
    view.allocations = allocations.into_iter().map(|(_, row)| row).collect();
    Ok(view)
}

/// The hold part of one admitted submission, before its row exists.
struct Placed {
    item: usize,
    id: Id,
    account: Id,
    currency: Id,
    cluster: Id,
}

impl Placed {
    fn hold<'a>(&self, batch: &'a [NewAdmission]) -> &'a NewHold {
        batch[self.item]
            .hold
            .as_ref()
            .expect("placed holds have a hold")
    }
}

/// Everything a batch is decided on, read in one statement (kinded rows):
/// 0 a used job key (key, job id), 1 a used hold key (key), 2 an account (name, id), 3 a
/// label (value, id), 4 the tree above the batch's accounts (name, id, parent, closed), 5 the
/// allocations on it, 6 the largest ids of holds, API jobs and journal entries.
const CONTEXT_SQL: &str = "with recursive
    named (id) as materialized (
        select id from accounts where name in (select value from json_each(?3))
    ),
    chain (id, parent_id, name, closed) as materialized (
        select id, parent_id, name, closed_at is not null from accounts
            where id = 1 or id in (select id from named)
        union
        select a.id, a.parent_id, a.name, a.closed_at is not null from accounts a
            join chain c on a.id = c.parent_id
    )
    select 0, idempotency_key, id, null, null, null, null, null, null, null from api_jobs
        where idempotency_key in (select value from json_each(?1))
    union all
    select 1, idempotency_key, null, null, null, null, null, null, null, null from holds
        where idempotency_key in (select value from json_each(?2))
    union all
    select 2, name, id, null, null, null, null, null, null, null from accounts
        where id in (select id from named)
    union all
    select 3, value, id, null, null, null, null, null, null, null from labels
        where value in (select value from json_each(?4))
    union all
    select 4, name, id, parent_id, closed, null, null, null, null, null from chain
    union all
    select 5, null, id, account_id, currency_id, amount, period_start, period_end,
           charged, held
        from allocations where account_id in (select id from chain)
    union all
    select 6, null, (select coalesce(max(id), 0) from holds),
           (select coalesce(max(id), 0) from api_jobs),
           (select coalesce(max(id), 0) from journal), null, null, null, null, null";

/// What [`CONTEXT_SQL`] (or [`context_by_lookups`]) read.
#[derive(Debug, Default, PartialEq)]
struct Context {
    used_job_keys: HashMap<String, i64>,
    used_hold_keys: HashSet<String>,
    accounts: HashMap<String, Id>,
    labels: HashMap<String, Id>,
    tree: Vec<(Id, Option<Id>)>,
    /// The names of the tree's accounts, by id.
    names: HashMap<Id, String>,
    /// Closed accounts of the tree, by id.
    closed: HashSet<Id>,
    allocs: Vec<AllocSpan>,
    max_ids: (Id, Id, Id),
}

/// A driver error as the ledger's: unique violations are conflicts, the rest storage failures
/// (as [`super::db`] maps sqlx's).
pub(super) fn sql(error: rusqlite::Error) -> LedgerError {
    use rusqlite::ffi::{SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE};
    match &error {
        rusqlite::Error::SqliteFailure(e, message)
            if e.extended_code == SQLITE_CONSTRAINT_UNIQUE
                || e.extended_code == SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            LedgerError::Conflict(message.clone().unwrap_or_else(|| error.to_string()))
        }
        _ => LedgerError::Storage(error.to_string()),
    }
}

/// Batches of up to this many submissions read their context with point lookups
/// ([`context_by_lookups`]) instead of [`CONTEXT_SQL`]. The one statement costs about the same
/// for one submission as for two hundred: it builds a dozen temporary B-trees (its `in (…)`
/// lists, its materialized and distinct tables), which took about a third of the admission
/// writer's time when submissions came one at a time (end to end, a batch holds one or two).
/// A lookup is an index probe; a few dozen of them are cheaper up to a handful of submissions.
const LOOKUP_BATCH: usize = 4;

/// Everything `batch` is decided on (see [`CONTEXT_SQL`]).
fn context(conn: &Connection, batch: &[NewAdmission]) -> Result<Context> {
    if batch.len() <= LOOKUP_BATCH {
        context_by_lookups(conn, batch)
    } else {
        context_in_one(conn, batch)
    }
}

/// What [`CONTEXT_SQL`] reads, read by index lookups: each key, account and label by itself,
/// the tree from each account up to the root (and the root), the allocations of each account
/// on it, and the largest ids.
fn context_by_lookups(conn: &Connection, batch: &[NewAdmission]) -> Result<Context> {
    let mut ctx = Context::default();
    let holds = || batch.iter().filter_map(|a| a.hold.as_ref());
    let job_keys = batch
        .iter()
        .filter_map(|a| a.job.idempotency_key.as_deref());
    let used_job = "select id from api_jobs where idempotency_key = ?1";
    ids_of(conn, used_job, job_keys, &mut ctx.used_job_keys)?;
    let mut hold = conn
        .prepare_cached("select 1 from holds where idempotency_key = ?1")
        .map_err(sql)?;
    for h in holds() {
        if hold.exists([&h.idempotency_key]).map_err(sql)? {
            ctx.used_hold_keys.insert(h.idempotency_key.clone());
        }
    }
    // Every job's account, held or not: a closed one takes no job at all.
    let accounts = batch.iter().map(|a| a.job.account.as_str());
    let accounts = accounts.chain(holds().map(|h| h.account.as_str()));
    ids_of(
        conn,
        "select id from accounts where name = ?1",
        accounts,
        &mut ctx.accounts,
    )?;
    let labels = holds().flat_map(|h| [h.currency.as_str(), h.cluster.as_str()]);
    ids_of(
        conn,
        "select id from labels where value = ?1",
        labels,
        &mut ctx.labels,
    )?;
    // The tree: the root and each named account, then each one's parents up to the root.
    let mut node = conn
        .prepare_cached("select parent_id, name, closed_at is not null from accounts where id = ?1")
        .map_err(sql)?;
    let mut starts: Vec<Id> = vec![1];
    starts.extend(ctx.accounts.values().copied());
    for start in starts {
        let mut at = Some(start);
        while let Some(id) = at.filter(|id| !ctx.names.contains_key(id)) {
            let Some((parent, name, closed)) = node
                .query_row([id], |row| {
                    Ok((
                        row.get::<_, Option<Id>>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, bool>(2)?,
                    ))
                })
                .optional()
                .map_err(sql)?
            else {
                break;
            };
            ctx.tree.push((id, parent));
            ctx.names.insert(id, name);
            if closed {
                ctx.closed.insert(id);
            }
            at = parent;
        }
    }
    let mut allocations = conn
        .prepare_cached(
            "select id, account_id, currency_id, amount, period_start, period_end, charged, held
             from allocations where account_id = ?1",
        )
        .map_err(sql)?;
    for &(account, _) in &ctx.tree {
        let mut rows = allocations.query([account]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            ctx.allocs.push(alloc_span(row, 0)?);
        }
    }
    ctx.allocs.sort_unstable_by_key(|a| a.id);
    ctx.max_ids = conn
        .prepare_cached(
            "select (select coalesce(max(id), 0) from holds),
                    (select coalesce(max(id), 0) from api_jobs),
                    (select coalesce(max(id), 0) from journal)",
        )
        .and_then(|mut max| max.query_row([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))))
        .map_err(sql)?;
    Ok(ctx)
}

/// Adds to `found` the id that `query` (one parameter, `?1`) finds for each of `keys` not in
/// it yet; keys it finds nothing for are left out.
fn ids_of<'k>(
    conn: &Connection,
    query: &str,
    keys: impl Iterator<Item = &'k str>,
    found: &mut HashMap<String, Id>,
) -> Result<()> {
    let mut statement = conn.prepare_cached(query).map_err(sql)?;
    for key in keys {
        if found.contains_key(key) {
            continue;
        }
        let id = statement
            .query_row([key], |row| row.get(0))
            .optional()
            .map_err(sql)?;
        if let Some(id) = id {
            found.insert(key.to_string(), id);
        }
    }
    Ok(())
}

/// An allocation read from `row`'s columns `first..first + 8`: id, account, currency, amount,
/// period start and end, charged, held (as both context reads select them).
fn alloc_span(row: &rusqlite::Row<'_>, first: usize) -> Result<AllocSpan> {
    let int = |i: usize| row.get::<_, i64>(first + i).map_err(sql);
    Ok(AllocSpan {
        id: int(0)?,
        account: int(1)?,
        currency: int(2)?,
        amount: int(3)?,
        start: int(4)?,
        end: int(5)?,
        charged: int(6)?,
        held: int(7)?,
    })
}

/// [`CONTEXT_SQL`]: everything in one statement, whatever the batch's size.
fn context_in_one(conn: &Connection, batch: &[NewAdmission]) -> Result<Context> {
    let job_keys = json_strings(
        batch
            .iter()
            .filter_map(|a| a.job.idempotency_key.as_deref()),
    );
    let holds = || batch.iter().filter_map(|a| a.hold.as_ref());
    let hold_keys = json_strings(holds().map(|h| h.idempotency_key.as_str()));
    let accounts = json_strings(
        batch
            .iter()
            .map(|a| a.job.account.as_str())
            .chain(holds().map(|h| h.account.as_str())),
    );
    let labels = json_strings(holds().flat_map(|h| [h.currency.as_str(), h.cluster.as_str()]));
    let mut statement = conn.prepare_cached(CONTEXT_SQL).map_err(sql)?;
    let mut rows = statement
        .query((job_keys, hold_keys, accounts, labels))
        .map_err(sql)?;
    let mut ctx = Context::default();
    while let Some(row) = rows.next().map_err(sql)? {
        let int = |i: usize| row.get::<_, i64>(i).map_err(sql);
        let text = |i: usize| row.get::<_, String>(i).map_err(sql);
        match int(0)? {
            0 => {
                ctx.used_job_keys.insert(text(1)?, int(2)?);
            }
            1 => {
                ctx.used_hold_keys.insert(text(1)?);
            }
            2 => {
                ctx.accounts.insert(text(1)?, int(2)?);
            }
            3 => {
                ctx.labels.insert(text(1)?, int(2)?);
            }
            4 => {
                let id: Id = int(2)?;
                ctx.tree
                    .push((id, row.get::<_, Option<Id>>(3).map_err(sql)?));
                if int(4)? != 0 {
                    ctx.closed.insert(id);
                }
                ctx.names.insert(id, text(1)?);
            }
            5 => {
                ctx.allocs.push(alloc_span(row, 2)?);
            }
            _ => ctx.max_ids = (int(2)?, int(3)?, int(4)?),
        }
    }
    ctx.allocs.sort_unstable_by_key(|a| a.id);
    Ok(ctx)
}

/// Labels seen for the first time (a new cluster or currency): created, and their ids.
fn intern(conn: &Connection, values: &[&str]) -> Result<Vec<(String, Id)>> {
    let mut insert = conn
        .prepare_cached("insert into labels (value) values (?) on conflict (value) do nothing")
        .map_err(sql)?;
    let mut select = conn
        .prepare_cached("select id from labels where value = ?")
        .map_err(sql)?;
    values
        .iter()
        .map(|v| {
            insert.execute([v]).map_err(sql)?;
            let id = select
                .query_row([v], |row| row.get(0))
                .optional()
                .map_err(sql)?
                .ok_or_else(|| LedgerError::Storage(format!("label {v:?} was not created")))?;
            Ok((v.to_string(), id))
        })
        .collect()
}

/// A submission of the batch whose job key was used before: the job recorded with it, read
/// once the transaction is over (as the transaction left it).
pub(super) type Earlier = (usize, i64);

/// What [`admit`] decided and wrote: an outcome per submission but those of [`Earlier`] jobs,
/// the holds linked and the forwarded jobs not found.
pub(super) struct Admitted {
    pub outcomes: Vec<Option<Result<AdmitOutcome>>>,
    pub earlier: Vec<Earlier>,
    pub linked: u64,
    pub unrecorded: Vec<Id>,
}

/// Decides `batch` and records `forwarded` in one transaction that it begins and, when it
/// returns `Ok`, has committed. On `Err` it has rolled back.
pub(super) fn admit(
    conn: &Connection,
    batch: &[NewAdmission],
    forwarded: &[ForwardedJob],
    now: i64,
) -> Result<Admitted> {
    conn.prepare_cached("begin immediate")
        .and_then(|mut begin| begin.execute([]))
        .map_err(sql)?;
    let done = decide_and_write(conn, batch, forwarded, now);
    let ended = match done {
        Ok(_) => conn
            .prepare_cached("commit")
            .and_then(|mut commit| commit.execute([])),
        Err(_) => conn
            .prepare_cached("rollback")
            .and_then(|mut rollback| rollback.execute([])),
    };
    match (done, ended) {
        (Ok(done), Ok(_)) => Ok(done),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => {
            // A commit that failed leaves the transaction open: end it.
            let _ = conn.execute_batch("rollback");
            Err(sql(e))
        }
    }
}

fn decide_and_write(
    conn: &Connection,
    batch: &[NewAdmission],
    forwarded: &[ForwardedJob],
    now: i64,
) -> Result<Admitted> {
    let mut outcomes: Vec<Option<Result<AdmitOutcome>>> = vec![None; batch.len()];
    if batch.is_empty() {
        let (linked, unrecorded) = write(conn, None, forwarded, now)?;
        return Ok(Admitted {
            outcomes,
            earlier: Vec::new(),
            linked,
            unrecorded,
        });
    }
    let mut ctx = context(conn, batch)?;
    let mut missing: Vec<&str> = batch
        .iter()
        .filter_map(|a| a.hold.as_ref())
        .flat_map(|h| [h.currency.as_str(), h.cluster.as_str()])
        .filter(|v| !ctx.labels.contains_key(*v))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    ctx.labels.extend(intern(conn, &missing)?);
    let label = |v: &str| {
        ctx.labels
            .get(v)
            .copied()
            .ok_or_else(|| LedgerError::Storage(format!("label {v:?} was not created")))
    };
    let mut tree = AccountTree::new();
    for &(id, parent) in &ctx.tree {
        tree.insert(id, parent);
    }
    let mut effects = Effects::new(&tree, &ctx.allocs);
    let (max_hold, max_job, max_entry) = ctx.max_ids;
    let (mut next_hold, mut next_job) = (max_hold + 1, max_job + 1);

    // Decide each submission in order, against the allocations as the earlier ones left them.
    let mut seen_keys: HashSet<&str> = HashSet::new();
    let mut used_hold_keys = ctx.used_hold_keys.clone();
    let mut earlier: Vec<Earlier> = Vec::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut recorded: Vec<(usize, Id, Option<Id>)> = Vec::new();
    let mut remaining_after: Vec<Vec<(String, i64)>> = vec![Vec::new(); batch.len()];
    for (i, admission) in batch.iter().enumerate() {
        if let Some(key) = admission.job.idempotency_key.as_deref() {
            if let Some(&job) = ctx.used_job_keys.get(key) {
                earlier.push((i, job));
                continue;
            }
            if !seen_keys.insert(key) {
                outcomes[i] = Some(Err(LedgerError::Conflict(format!(
                    "idempotency key {key:?} is used by another submission of the same batch"
                ))));
                continue;
            }
        }
        let mut hold_id = None;
        if admission.hold.is_none() {
            // A job that holds nothing is refused on a closed account too (a held one is
            // refused below, by its hold's account).
            let closed = ctx
                .accounts
                .get(&admission.job.account)
                .and_then(|account| {
                    tree.ancestors_or_self(account)
                        .into_iter()
                        .find(|a| ctx.closed.contains(a))
                });
            if let Some(closed) = closed {
                let name = ctx.names.get(closed).cloned().unwrap_or_default();
                outcomes[i] = Some(Err(LedgerError::AccountClosed {
                    account: admission.job.account.clone(),
                    closed_by: (name != admission.job.account).then_some(name),
                }));
                continue;
            }
        }
        if let Some(hold) = &admission.hold {
            if used_hold_keys.contains(&hold.idempotency_key) {
                outcomes[i] = Some(Err(LedgerError::Conflict(format!(
                    "hold key {:?} was already used",
                    hold.idempotency_key
                ))));
                continue;
            }
            let Some(&account) = ctx.accounts.get(&hold.account) else {
                outcomes[i] = Some(Err(LedgerError::not_found("account", &hold.account)));
                continue;
            };
            // A closed account, or one under a closed account, takes no new holds.
            let closed = tree
                .ancestors_or_self(&account)
                .into_iter()
                .find(|a| ctx.closed.contains(a));
            if let Some(closed) = closed {
                let name = ctx.names.get(closed).cloned().unwrap_or_default();
                outcomes[i] = Some(Err(LedgerError::AccountClosed {
                    account: hold.account.clone(),
                    closed_by: (name != hold.account).then_some(name),
                }));
                continue;
            }
            let currency = label(hold.currency.as_str())?;
            if let Err(short) = holds::cover(&mut effects, account, currency, hold)? {
                let names = &ctx.names;
                outcomes[i] = Some(Err(short.refusal(hold, |id| names.get(&id).cloned())));
                continue;
            }
            effects.hold(account, currency, hold.placed_at, hold.amount)?;
            remaining_after[i] = effects
                .covering_remaining(account, currency, hold.placed_at)?
                .into_iter()
                .map(|(a, r)| {
                    let name = ctx.names.get(&a.account).cloned();
                    (name.unwrap_or_else(|| a.account.to_string()), r)
                })
                .collect();
            used_hold_keys.insert(hold.idempotency_key.clone());
            placed.push(Placed {
                item: i,
                id: next_hold,
                account,
                currency,
                cluster: label(hold.cluster.as_str())?,
            });
            hold_id = Some(next_hold);
            next_hold += 1;
        }
        recorded.push((i, next_job, hold_id));
        next_job += 1;
    }
    for &(i, id, hold_id) in &recorded {
        let job = &batch[i].job;
        let hold = batch[i].hold.as_ref().zip(hold_id).map(|(h, id)| {
            Box::new(HoldRow {
                id,
                idempotency_key: h.idempotency_key.clone(),
                account: h.account.clone(),
                currency: h.currency.clone(),
                amount: h.amount,
                cluster: h.cluster.clone(),
                job_ref: h.job_ref.clone(),
                placed_at: h.placed_at,
                expires_at: h.expires_at,
                state: HoldState::Active,
                closed_at: None,
                reason: None,
                note: h.note.clone(),
            })
        });
        outcomes[i] = Some(Ok(AdmitOutcome::Admitted {
            job: ApiJob {
                id,
                idempotency_key: job.idempotency_key.clone(),
                actor: job.actor.clone(),
                user: job.user.clone(),
                account: job.account.clone(),
                cluster: job.cluster.clone(),
                cluster_job_id: None,
                settle_ref: None,
                currency: job.currency.clone(),
                estimate: job.estimate,
                hold_id,
                state: job.state.clone(),
                request_json: job.request_json.clone(),
                route_json: job.route_json.clone(),
                submitted_at: job.at,
                updated_at: job.at,
                array_tasks: job.array_tasks,
            },
            hold,
            remaining_after: std::mem::take(&mut remaining_after[i]),
        }));
    }
    let decided = Decided {
        batch,
        placed: &placed,
        recorded: &recorded,
        effects: &effects,
        max_entry,
    };
    let (linked, unrecorded) = write(conn, Some(decided), forwarded, now)?;
    Ok(Admitted {
        outcomes,
        earlier,
        linked,
        unrecorded,
    })
}

/// A decided batch, for [`write`].
struct Decided<'a, 'e> {
    batch: &'a [NewAdmission],
    placed: &'a [Placed],
    recorded: &'a [(usize, Id, Option<Id>)],
    effects: &'a Effects<'e>,
    /// Journal ids continue from here.
    max_entry: Id,
}

const LINK_HOLD_SQL: &str = "update holds set job_ref = ?2 where id = ?1 and job_ref is null";

const NOTE_JOB_SQL: &str = "update api_jobs set cluster_job_id = ?2, updated_at = ?3,
     settle_ref = nullif(?4, ?2), route_json = coalesce(?5, route_json) where id = ?1";

const INSERT_HOLD_SQL: &str = "insert into holds (id, idempotency_key, account_id, currency_id,
        amount, cluster_id, job_ref, placed_at, expires_at, note, lifetime)
    values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

const INSERT_ENTRY_SQL: &str = "insert into journal (id, type, account_id, currency_id, amount,
        effective_at, posted_at, cluster_id, hold_id, key, note)
    values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

const UPDATE_ALLOCATION_SQL: &str =
    "update allocations set charged = ?2, held = ?3, updated_at = ?4 where id = ?1";

const ADD_TOTALS_SQL: &str = "insert into account_totals (account_id, currency_id, charged, held)
    values (?1, ?2, ?3, ?4)
    on conflict (account_id, currency_id) do update set
        charged = charged + excluded.charged, held = held + excluded.held";

const INSERT_JOB_SQL: &str = "insert into api_jobs (id, idempotency_key, actor, user_name,
        account, cluster, currency, estimate, hold_id, state, request_json, route_json,
        submitted_at, updated_at, array_tasks)
    values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?14)";

/// Writes the records of `forwarded` jobs (holds linked unless linked already, cluster job
/// ids noted) and a decided batch: the holds, their `hold` journal entries (ids from
/// `max_entry + 1`, as the journal's own writer gives them), the held amounts of the
/// allocations and totals they touch, and the jobs. One single-row statement per row: on this
/// connection a statement is a call into SQLite, not a round trip to another thread, and each
/// text is prepared once for the connection's life. Returns how many holds were linked and the
/// forwarded jobs that were not found.
fn write(
    conn: &Connection,
    decided: Option<Decided<'_, '_>>,
    forwarded: &[ForwardedJob],
    now: i64,
) -> Result<(u64, Vec<Id>)> {
    let statement = |text: &'static str| conn.prepare_cached(text).map_err(sql);
    let mut linked: u64 = 0;
    let mut unrecorded = Vec::new();
    if !forwarded.is_empty() {
        let mut link = statement(LINK_HOLD_SQL)?;
        let mut note = statement(NOTE_JOB_SQL)?;
        for j in forwarded {
            if let Some(hold) = j.hold {
                linked += link.execute((hold, &j.settle_ref)).map_err(sql)? as u64;
            }
            if note
                .execute((j.job, &j.cluster_job_id, j.at, &j.settle_ref, &j.route_json))
                .map_err(sql)?
                == 0
            {
                unrecorded.push(j.job);
            }
        }
    }
    let Some(d) = decided.filter(|d| !d.recorded.is_empty()) else {
        return Ok((linked, unrecorded));
    };
    let mut insert_hold = statement(INSERT_HOLD_SQL)?;
    let mut insert_entry = statement(INSERT_ENTRY_SQL)?;
    for (n, p) in (1..).zip(d.placed) {
        let h = p.hold(d.batch);
        insert_hold
            .execute((
                p.id,
                &h.idempotency_key,
                p.account,
                p.currency,
                h.amount,
                p.cluster,
                h.job_ref.as_deref(),
                h.placed_at,
                h.expires_at,
                h.note.as_deref(),
                h.lifetime,
            ))
            .map_err(sql)?;
        let open = OpenHold {
            id: p.id,
            account: p.account,
            currency: p.currency,
            cluster: p.cluster,
            amount: h.amount,
            placed_at: h.placed_at,
        };
        let e = hold_entry(&open, h.note.as_deref());
        insert_entry
            .execute((
                d.max_entry + n,
                e.entry_type.code(),
                e.account,
                e.currency,
                e.amount,
                e.effective_at,
                now,
                e.cluster,
                e.hold_id,
                e.key.as_deref(),
                e.note.as_deref(),
            ))
            .map_err(sql)?;
    }
    let mut allocation = statement(UPDATE_ALLOCATION_SQL)?;
    for (id, charged, held) in d.effects.allocation_updates()? {
        allocation.execute((id, charged, held, now)).map_err(sql)?;
    }
    let mut totals = statement(ADD_TOTALS_SQL)?;
    for ((account, currency), (charged, held)) in d.effects.total_deltas() {
        totals
            .execute((account, currency, charged, held))
            .map_err(sql)?;
    }
    let mut insert_job = statement(INSERT_JOB_SQL)?;
    for &(i, id, hold_id) in d.recorded {
        let job = &d.batch[i].job;
        insert_job
            .execute(rusqlite::params![
                id,
                job.idempotency_key.as_deref(),
                &job.actor,
                &job.user,
                &job.account,
                &job.cluster,
                job.currency.as_str(),
                job.estimate,
                hold_id,
                &job.state,
                &job.request_json,
                &job.route_json,
                job.at,
                job.array_tasks,
            ])
            .map_err(sql)?;
    }
    Ok((linked, unrecorded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NewApiJob;
    use crate::Ledger;

    const T0: i64 = 1_767_225_600; // 2026-01-01
    const UNIT: i64 = 1_000_000;

    fn admission(
        n: usize,
        account: &str,
        currency: &str,
        cluster: &str,
        key: Option<&str>,
    ) -> NewAdmission {
        NewAdmission {
            hold: Some(NewHold {
                account: account.to_string(),
                currency: Currency::new(currency),
                amount: UNIT,
                cluster: cluster.to_string(),
                job_ref: None,
                placed_at: T0 + 3600,
                expires_at: T0 + 86_400,
                lifetime: None,
                idempotency_key: format!("api:{n}"),
                note: None,
            }),
            job: NewApiJob {
                idempotency_key: key.map(str::to_string),
                actor: "alice".to_string(),
                user: "alice".to_string(),
                account: account.to_string(),
                cluster: cluster.to_string(),
                currency: Currency::new(currency),
                estimate: UNIT,
                hold_id: None,
                state: "held".to_string(),
                request_json: "{}".to_string(),
                route_json: "{}".to_string(),
                at: T0 + 3600,
                array_tasks: None,
            },
        }
    }

    /// The point lookups read exactly what the one statement reads: keys used before and
    /// not, accounts sharing ancestors, under a closed one or unknown, labels known and new,
    /// allocations on several levels and periods, a submission without a hold.
    #[tokio::test]
    async fn the_lookups_read_what_the_one_statement_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let ledger = Ledger::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        for (name, parent) in [
            ("org", None),
            ("physics", Some("org")),
            ("chemistry", Some("org")),
            ("theory", Some("physics")),
            ("old", Some("org")),
            ("old-lab", Some("old")),
        ] {
            ledger.ensure_account(name, parent).await.unwrap();
        }
        for (account, currency, start) in [
            ("org", "su", T0),
            ("org", "usd", T0),
            ("physics", "su", T0),
            ("physics", "su", T0 + 30 * 86_400),
            ("theory", "usd", T0),
            ("chemistry", "su", T0),
        ] {
            ledger
                .set_allocation(
                    account,
                    &Currency::new(currency),
                    1_000 * UNIT,
                    start,
                    start + 30 * 86_400,
                )
                .await
                .unwrap();
        }
        for (n, account) in ["physics", "theory"].into_iter().enumerate() {
            ledger
                .admit_queued(
                    admission(n, account, "su", "alpha", Some(&format!("k{n}"))),
                    T0 + 3600,
                )
                .await
                .unwrap();
        }
        ledger.close_account("old", T0 + 7200).await.unwrap();
        drop(ledger);

        let mut no_hold = admission(9, "physics", "su", "alpha", Some("k9"));
        no_hold.hold = None;
        let batches = [
            vec![admission(5, "theory", "usd", "alpha", Some("new"))],
            vec![admission(0, "physics", "su", "alpha", Some("k0"))],
            vec![
                admission(6, "physics", "su", "beta", None),
                admission(7, "chemistry", "eur", "gamma", Some("k1")),
                admission(1, "old-lab", "su", "alpha", None),
            ],
            vec![admission(8, "nobody", "su", "alpha", None), no_hold],
            vec![],
        ];
        let conn = Connection::open(&path).unwrap();
        for batch in &batches {
            let mut lookups = context_by_lookups(&conn, batch).unwrap();
            let mut one = context_in_one(&conn, batch).unwrap();
            lookups.tree.sort_unstable();
            one.tree.sort_unstable();
            assert_eq!(lookups, one, "{batch:?}");
        }
        // The cases are what they claim to be.
        let third = context_by_lookups(&conn, &batches[2]).unwrap();
        assert_eq!(third.used_job_keys.len(), 1);
        assert_eq!(third.closed.len(), 1);
        assert!(!third.labels.contains_key("eur"));
        assert!(third.allocs.len() >= 4);
        let second = context_by_lookups(&conn, &batches[1]).unwrap();
        assert!(second.used_hold_keys.contains("api:0"));
        let fourth = context_by_lookups(&conn, &batches[3]).unwrap();
        assert!(!fourth.accounts.contains_key("nobody"));
        assert_eq!(
            fourth.accounts.keys().collect::<Vec<_>>(),
            ["physics"],
            "a submission without a hold names its account too (a closed one takes no job)"
        );
    }
}
