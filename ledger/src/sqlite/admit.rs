//! The admission fast path.
//!
//! - [`view`]: what a quote reads (the account, the user's association with it, its chain and
//!   the chain's allocations in force) in one statement.
//! - [`admit`]: the holds and API jobs of many submissions in one write transaction — group
//!   commit — with the records of jobs forwarded since the last one (cluster job ids noted,
//!   holds linked). Each submission is
//!   checked against the chain's allocations as they stand after the submissions before it in
//!   the batch, exactly as if each were its own transaction, and the whole batch is two round
//!   trips to the database: `BEGIN` with the one read, the one multi-statement write with
//!   `COMMIT`.

use std::collections::{HashMap, HashSet};

use bursar_pricing::Currency;
use sqlx::SqliteConnection;

use super::holds;
use super::labels::intern;
use super::{col, db, json_strings, value_rows, MAX_PARAMS};
use crate::error::{LedgerError, Result};
use crate::materialize::{AllocSpan, Effects, Id};
use crate::model::{
    AdmissionView, AdmitBatch, AdmitOutcome, ApiJob, BalanceRow, ForwardedJob, HoldRow, HoldState,
    NewAdmission, NewHold,
};
use crate::posting::{hold_entry, OpenHold};
use crate::tree::AccountTree;

/// One statement: a header row (kind 0: the account, whether the user is associated), the
/// chain (kind 1, by depth) and the chain's allocations covering `at` (kind 2).
const VIEW_SQL: &str = "with recursive
    target (name) as materialized (
        select coalesce(?1, (select a.name from users u join accounts a
                             on a.id = u.default_account_id where u.name = ?2))
    ),
    chain (id, name, parent_id, depth) as materialized (
        select a.id, a.name, a.parent_id, 0 from accounts a join target t on a.name = t.name
        union all
        select p.id, p.name, p.parent_id, c.depth + 1 from accounts p join chain c
            on p.id = c.parent_id
    )
    select 0, 0, t.name,
           exists (select 1 from associations s join chain c on c.id = s.account_id
                   where s.user_name = ?2 and c.depth = 0),
           null, null, null, null, null
    from target t
    union all
    select 1, depth, name, null, null, null, null, null, null from chain
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
        allocations: Vec::new(),
    };
    let mut chain: Vec<(i64, String)> = Vec::new();
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
            1 => chain.push((depth, col(row, 2)?)),
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
    chain.sort_unstable_by_key(|(depth, _)| *depth);
    view.chain = chain.into_iter().map(|(_, name)| name).collect();
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
/// 0 a used job key (key), 1 a used hold key (key), 2 an account (name, id), 3 a label
/// (value, id), 4 the tree above the batch's accounts (name, id, parent, closed), 5 the
/// allocations on it,
/// 6 the largest ids of holds, API jobs and journal entries. It begins the write transaction
/// too: one round trip for both.
const CONTEXT_SQL: &str = "begin immediate;
    with recursive
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

/// What [`CONTEXT_SQL`] read.
#[derive(Default)]
struct Context {
    used_job_keys: HashMap<String, i64>,
    used_hold_keys: HashSet<String>,
    accounts: HashMap<String, Id>,
    labels: HashMap<String, Id>,
    tree: Vec<(Id, Option<Id>)>,
    /// Closed accounts of the tree, by id.
    closed: HashMap<Id, String>,
    allocs: Vec<AllocSpan>,
    max_ids: (Id, Id, Id),
}

async fn context(conn: &mut SqliteConnection, batch: &[NewAdmission]) -> Result<Context> {
    let job_keys = json_strings(
        batch
            .iter()
            .filter_map(|a| a.job.idempotency_key.as_deref()),
    );
    let holds = || batch.iter().filter_map(|a| a.hold.as_ref());
    let hold_keys = json_strings(holds().map(|h| h.idempotency_key.as_str()));
    let accounts = json_strings(holds().map(|h| h.account.as_str()));
    let labels = json_strings(holds().flat_map(|h| [h.currency.as_str(), h.cluster.as_str()]));
    let rows = sqlx::query(CONTEXT_SQL)
        .bind(job_keys)
        .bind(hold_keys)
        .bind(accounts)
        .bind(labels)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let mut ctx = Context::default();
    for row in &rows {
        match col::<i64>(row, 0)? {
            0 => {
                ctx.used_job_keys.insert(col(row, 1)?, col(row, 2)?);
            }
            1 => {
                ctx.used_hold_keys.insert(col(row, 1)?);
            }
            2 => {
                ctx.accounts.insert(col(row, 1)?, col(row, 2)?);
            }
            3 => {
                ctx.labels.insert(col(row, 1)?, col(row, 2)?);
            }
            4 => {
                let id: Id = col(row, 2)?;
                ctx.tree.push((id, col(row, 3)?));
                if col::<i64>(row, 4)? != 0 {
                    ctx.closed.insert(id, col(row, 1)?);
                }
            }
            5 => {
                ctx.allocs.push(AllocSpan {
                    id: col(row, 2)?,
                    account: col(row, 3)?,
                    currency: col(row, 4)?,
                    amount: col(row, 5)?,
                    start: col(row, 6)?,
                    end: col(row, 7)?,
                    charged: col(row, 8)?,
                    held: col(row, 9)?,
                });
            }
            _ => ctx.max_ids = (col(row, 2)?, col(row, 3)?, col(row, 4)?),
        }
    }
    ctx.allocs.sort_unstable_by_key(|a| a.id);
    Ok(ctx)
}

/// Decides `batch` and records `forwarded` in one transaction that it begins and, when it
/// returns `Ok`, has committed. On `Err` a transaction may be open: the caller rolls back.
pub(super) async fn admit(
    conn: &mut SqliteConnection,
    batch: &[NewAdmission],
    forwarded: &[ForwardedJob],
    now: i64,
) -> Result<AdmitBatch> {
    if batch.is_empty() {
        let (linked, unrecorded) = write(conn, "begin immediate;\n", None, forwarded, now).await?;
        return Ok(AdmitBatch {
            outcomes: Vec::new(),
            linked,
            unrecorded,
        });
    }
    let mut outcomes: Vec<Option<Result<AdmitOutcome>>> = vec![None; batch.len()];
    let mut ctx = context(conn, batch).await?;

    // Labels seen for the first time (a new cluster or currency) are created the slow way.
    let mut missing: Vec<&str> = batch
        .iter()
        .filter_map(|a| a.hold.as_ref())
        .flat_map(|h| [h.currency.as_str(), h.cluster.as_str()])
        .filter(|v| !ctx.labels.contains_key(*v))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        for (value, id) in intern(conn, &missing).await? {
            ctx.labels.insert(value.to_string(), id);
        }
    }
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
    let mut existing: Vec<(usize, i64)> = Vec::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut recorded: Vec<(usize, Id, Option<Id>)> = Vec::new();
    for (i, admission) in batch.iter().enumerate() {
        if let Some(key) = admission.job.idempotency_key.as_deref() {
            if let Some(&job) = ctx.used_job_keys.get(key) {
                existing.push((i, job));
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
                .find_map(|a| ctx.closed.get(a));
            if let Some(closed) = closed {
                outcomes[i] = Some(Err(LedgerError::AccountClosed {
                    account: hold.account.clone(),
                    closed_by: (*closed != hold.account).then(|| closed.clone()),
                }));
                continue;
            }
            let currency = label(hold.currency.as_str())?;
            let refused = holds::check_cover(conn, &mut effects, account, currency, hold)
                .await
                .err();
            if let Some(e) = refused {
                outcomes[i] = Some(Err(e));
                continue;
            }
            effects.hold(account, currency, hold.placed_at, hold.amount)?;
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

    // Jobs recorded before (their keys used) are read inside the transaction, before its
    // write: as that write will leave them when it records one of them as forwarded.
    for (i, id) in existing {
        let mut job = super::gateway::api_job(conn, id)
            .await?
            .ok_or_else(|| LedgerError::Storage(format!("api job {id} vanished")))?;
        if let Some(f) = forwarded.iter().rev().find(|f| f.job == id) {
            job.cluster_job_id = Some(f.cluster_job_id.clone());
            job.updated_at = f.at;
        }
        outcomes[i] = Some(Ok(AdmitOutcome::Existing(job)));
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
                currency: job.currency.clone(),
                estimate: job.estimate,
                hold_id,
                state: job.state.clone(),
                request_json: job.request_json.clone(),
                route_json: job.route_json.clone(),
                submitted_at: job.at,
                updated_at: job.at,
            },
            hold,
        }));
    }
    let outcomes = outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| LedgerError::Storage("a submission was left undecided".into())))
        .collect::<Result<Vec<_>>>()?;
    let decided = Decided {
        batch,
        placed: &placed,
        recorded: &recorded,
        effects: &effects,
        max_entry,
    };
    let (linked, unrecorded) = write(conn, "", Some(decided), forwarded, now).await?;
    Ok(AdmitBatch {
        outcomes,
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

const HOLD_COLUMNS: &str = "id, idempotency_key, account_id, currency_id, amount, cluster_id, \
     job_ref, placed_at, expires_at, note";
const HOLD_ARITY: usize = 10;
const HOLD_ENTRY_COLUMNS: &str = "id, type, account_id, currency_id, amount, effective_at, \
     posted_at, cluster_id, hold_id, key, note";
const HOLD_ENTRY_ARITY: usize = 11;
const JOB_COLUMNS: &str = "id, idempotency_key, actor, user_name, account, cluster, currency, \
     estimate, hold_id, state, request_json, route_json, submitted_at, updated_at";
const JOB_ARITY: usize = 14;

/// The largest batch whose write statements stay prepared (see [`write`]); the writer's
/// statement cache ([`super::WRITER_STATEMENTS`]) holds every shape up to it.
pub(super) const PREPARED_BATCH: usize = 16;

/// Rows per multi-row insert, under SQLite's limit on bound parameters.
const ROWS: usize = MAX_PARAMS / 20;

/// Writes, in one round trip to the database, the records of `forwarded` jobs (holds linked
/// unless linked already, cluster job ids noted) and a decided batch: the holds, their `hold`
/// journal entries (ids from `max_entry + 1`, as the journal's own writer gives them), the
/// held amounts of the allocations and totals they touch, and the jobs. Starts with `begin`
/// (the transaction's `BEGIN`, unless it is open already) and ends with `COMMIT`. Returns how
/// many holds were linked and the forwarded jobs that were not found.
async fn write(
    conn: &mut SqliteConnection,
    begin: &str,
    decided: Option<Decided<'_, '_>>,
    forwarded: &[ForwardedJob],
    now: i64,
) -> Result<(u64, Vec<Id>)> {
    let mut sql = begin.to_string();
    // Each forwarded statement returns a row per change: 1 and the hold linked, 2 and the
    // job recorded.
    for chunk in forwarded.chunks(MAX_PARAMS / 3) {
        let holds = chunk.iter().filter(|j| j.hold.is_some()).count();
        if holds > 0 {
            sql.push_str(&format!(
                "with v (id, job_ref) as (values {})
                 update holds set job_ref = v.job_ref from v
                 where holds.id = v.id and holds.job_ref is null returning 1, holds.id;\n",
                value_rows(holds, 2)
            ));
        }
        sql.push_str(&format!(
            "with v (id, cluster_job_id, at) as (values {})
             update api_jobs set cluster_job_id = v.cluster_job_id, updated_at = v.at from v
             where api_jobs.id = v.id returning 2, api_jobs.id;\n",
            value_rows(chunk.len(), 3)
        ));
    }
    let decided = decided.filter(|d| !d.recorded.is_empty());
    let mut updates = Vec::new();
    let mut totals = Vec::new();
    let mut entries = Vec::new();
    if let Some(d) = &decided {
        updates = d.effects.allocation_updates()?;
        totals = d.effects.total_deltas();
        for chunk in d.placed.chunks(ROWS) {
            sql.push_str(&format!(
                "insert into holds ({HOLD_COLUMNS}) values {};\n",
                value_rows(chunk.len(), HOLD_ARITY)
            ));
        }
        for chunk in d.placed.chunks(ROWS) {
            sql.push_str(&format!(
                "insert into journal ({HOLD_ENTRY_COLUMNS}) values {};\n",
                value_rows(chunk.len(), HOLD_ENTRY_ARITY)
            ));
        }
        for _ in &updates {
            sql.push_str(
                "update allocations set charged = ?, held = ?, updated_at = ? where id = ?;\n",
            );
        }
        for chunk in totals.chunks(ROWS) {
            sql.push_str(&format!(
                "insert into account_totals (account_id, currency_id, charged, held) values {}
                 on conflict (account_id, currency_id) do update set
                     charged = charged + excluded.charged, held = held + excluded.held;\n",
                value_rows(chunk.len(), 4)
            ));
        }
        for chunk in d.recorded.chunks(ROWS) {
            sql.push_str(&format!(
                "insert into api_jobs ({JOB_COLUMNS}) values {};\n",
                value_rows(chunk.len(), JOB_ARITY)
            ));
        }
        entries = d
            .placed
            .iter()
            .map(|p| {
                let h = p.hold(d.batch);
                let open = OpenHold {
                    id: p.id,
                    account: p.account,
                    currency: p.currency,
                    cluster: p.cluster,
                    amount: h.amount,
                    placed_at: h.placed_at,
                };
                hold_entry(&open, h.note.as_deref())
            })
            .collect();
    }
    sql.push_str("commit;");

    // The statements' parameters, in the order of the text above. The text's shape is set by
    // how many jobs were forwarded and admitted and how many allocations and totals they
    // touch; batches of up to [`PREPARED_BATCH`] of each (every batch at the rates a
    // cluster's controller accepts) keep theirs prepared in the writer's statement cache
    // (parsing them afresh was a tenth of bursar's CPU per submission); larger ones are parsed
    // each time.
    let small = forwarded.len() <= PREPARED_BATCH
        && decided.as_ref().is_none_or(|d| {
            d.placed.len() <= PREPARED_BATCH
                && d.recorded.len() <= PREPARED_BATCH
                && updates.len() <= PREPARED_BATCH / 2
                && totals.len() <= PREPARED_BATCH / 2
        });
    let mut query = sqlx::query(&sql).persistent(small);
    for chunk in forwarded.chunks(MAX_PARAMS / 3) {
        for j in chunk {
            if let Some(hold) = j.hold {
                query = query.bind(hold).bind(&j.settle_ref);
            }
        }
        for j in chunk {
            query = query.bind(j.job).bind(&j.cluster_job_id).bind(j.at);
        }
    }
    if let Some(d) = &decided {
        for p in d.placed {
            let h = p.hold(d.batch);
            query = query
                .bind(p.id)
                .bind(&h.idempotency_key)
                .bind(p.account)
                .bind(p.currency)
                .bind(h.amount)
                .bind(p.cluster)
                .bind(h.job_ref.as_deref())
                .bind(h.placed_at)
                .bind(h.expires_at)
                .bind(h.note.as_deref());
        }
        for (n, e) in (1..).zip(&entries) {
            query = query
                .bind(d.max_entry + n)
                .bind(e.entry_type.code())
                .bind(e.account)
                .bind(e.currency)
                .bind(e.amount)
                .bind(e.effective_at)
                .bind(now)
                .bind(e.cluster)
                .bind(e.hold_id)
                .bind(e.key.as_deref())
                .bind(e.note.as_deref());
        }
        for &(id, charged, held) in &updates {
            query = query.bind(charged).bind(held).bind(now).bind(id);
        }
        for &((account, currency), (charged, held)) in &totals {
            query = query.bind(account).bind(currency).bind(charged).bind(held);
        }
        for &(i, id, hold_id) in d.recorded {
            let job = &d.batch[i].job;
            query = query
                .bind(id)
                .bind(job.idempotency_key.as_deref())
                .bind(&job.actor)
                .bind(&job.user)
                .bind(&job.account)
                .bind(&job.cluster)
                .bind(job.currency.as_str())
                .bind(job.estimate)
                .bind(hold_id)
                .bind(&job.state)
                .bind(&job.request_json)
                .bind(&job.route_json)
                .bind(job.at)
                .bind(job.at);
        }
    }
    let rows = query.fetch_all(&mut *conn).await.map_err(db)?;
    let mut linked = 0;
    let mut found = HashSet::new();
    for row in &rows {
        match col::<i64>(row, 0)? {
            1 => linked += 1,
            _ => {
                found.insert(col::<Id>(row, 1)?);
            }
        }
    }
    let unrecorded = forwarded
        .iter()
        .map(|j| j.job)
        .filter(|id| !found.contains(id))
        .collect();
    Ok((linked, unrecorded))
}
