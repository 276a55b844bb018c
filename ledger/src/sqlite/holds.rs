//! Holds: placing (optionally checked against every allocation on the chain), linking to a
//! cluster job, and closing (released, settled, expired) with a `release` entry.

use std::collections::HashMap;

use bursar_pricing::Currency;
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::journal::{insert_entries, open_hold, write_effects, OPEN_HOLD_SELECT};
use super::labels::intern;
use super::tree::{load_context, require_account, require_open};
use super::{col, db, json_ints};
use crate::error::{LedgerError, Result};
use crate::materialize::{Effects, Id};
use crate::model::{HoldRow, NewHold};
use crate::posting::{hold_entry, release_entries, OpenHold};

const HOLD_SELECT: &str = "select h.id, h.idempotency_key, a.name, cur.value, h.amount, \
     cl.value, h.job_ref, h.placed_at, h.expires_at, h.state, h.closed_at, h.reason, h.note \
     from holds h join accounts a on a.id = h.account_id \
     join labels cur on cur.id = h.currency_id join labels cl on cl.id = h.cluster_id";

fn hold_row(row: &SqliteRow) -> Result<HoldRow> {
    Ok(HoldRow {
        id: col(row, 0)?,
        idempotency_key: col(row, 1)?,
        account: col(row, 2)?,
        currency: Currency::new(&col::<String>(row, 3)?),
        amount: col(row, 4)?,
        cluster: col(row, 5)?,
        job_ref: col(row, 6)?,
        placed_at: col(row, 7)?,
        expires_at: col(row, 8)?,
        state: col::<String>(row, 9)?.parse()?,
        closed_at: col(row, 10)?,
        reason: col(row, 11)?,
        note: col(row, 12)?,
    })
}

async fn hold_by_key(conn: &mut SqliteConnection, key: &str) -> Result<Option<HoldRow>> {
    let sql = format!("{HOLD_SELECT} where h.idempotency_key = ?");
    let row = sqlx::query(&sql)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(hold_row).transpose()
}

async fn hold_by_id(conn: &mut SqliteConnection, id: Id) -> Result<Option<HoldRow>> {
    let sql = format!("{HOLD_SELECT} where h.id = ?");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(hold_row).transpose()
}

/// Why a hold is refused: no allocation covers it, or the link of the chain with the least
/// remaining (the nearest one among equals) cannot take it.
pub(super) enum Uncovered {
    NoAllocation,
    Short { account: Id, remaining: i64 },
}

/// Whether every allocation on the chain of `account` (ids) in `currency` covering `hold`'s
/// `placed_at` can take it, counting what `effects` holds already. Shared by single holds and
/// admission batches, which name the short account each their own way.
pub(super) fn cover(
    effects: &mut Effects<'_>,
    account: Id,
    currency: Id,
    hold: &NewHold,
) -> Result<std::result::Result<(), Uncovered>> {
    let tightest = effects
        .covering_remaining(account, currency, hold.placed_at)?
        .into_iter()
        .reduce(|w, c| if c.1 < w.1 { c } else { w });
    Ok(match tightest {
        None => Err(Uncovered::NoAllocation),
        Some((a, remaining)) if remaining < hold.amount => Err(Uncovered::Short {
            account: a.account,
            remaining,
        }),
        Some(_) => Ok(()),
    })
}

impl Uncovered {
    /// The refusal, naming the short account `name` (its id when unknown).
    pub(super) fn refusal(
        self,
        hold: &NewHold,
        name: impl FnOnce(Id) -> Option<String>,
    ) -> LedgerError {
        match self {
            Uncovered::NoAllocation => LedgerError::NoAllocation {
                account: hold.account.clone(),
                currency: hold.currency.clone(),
            },
            Uncovered::Short { account, remaining } => LedgerError::InsufficientAllocation {
                account: name(account).unwrap_or_else(|| account.to_string()),
                currency: hold.currency.clone(),
                estimate: hold.amount,
                remaining,
            },
        }
    }
}

/// [`cover`], the short account named from the database.
async fn check_cover(
    conn: &mut SqliteConnection,
    effects: &mut Effects<'_>,
    account: Id,
    currency: Id,
    hold: &NewHold,
) -> Result<()> {
    let short = match cover(effects, account, currency, hold)? {
        Ok(()) => return Ok(()),
        Err(short) => short,
    };
    let name = match &short {
        Uncovered::Short { account, .. } => {
            sqlx::query_scalar::<_, String>("select name from accounts where id = ?")
                .bind(account)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db)?
        }
        Uncovered::NoAllocation => None,
    };
    Err(short.refusal(hold, |_| name))
}

pub(super) async fn place(
    conn: &mut SqliteConnection,
    hold: &NewHold,
    check: bool,
) -> Result<HoldRow> {
    if let Some(existing) = hold_by_key(conn, &hold.idempotency_key).await? {
        let same = existing.account == hold.account
            && existing.currency == hold.currency
            && existing.amount == hold.amount
            && existing.cluster == hold.cluster;
        return if same {
            Ok(existing)
        } else {
            Err(LedgerError::Conflict(format!(
                "hold key {:?} was already used for a different hold",
                hold.idempotency_key
            )))
        };
    }
    let account = require_account(conn, &hold.account).await?;
    require_open(conn, account, &hold.account).await?;
    let labels = intern(conn, &[hold.currency.as_str(), hold.cluster.as_str()]).await?;
    let label = |v: &str| {
        labels
            .get(v)
            .copied()
            .ok_or_else(|| LedgerError::Storage(format!("label {v:?} was not created")))
    };
    let currency = label(hold.currency.as_str())?;
    let cluster = label(hold.cluster.as_str())?;
    let (tree, allocs) = load_context(conn, &[account]).await?;
    if check {
        let mut probe = Effects::new(&tree, &allocs);
        check_cover(conn, &mut probe, account, currency, hold).await?;
    }
    let id: Id = sqlx::query_scalar(
        "insert into holds
             (idempotency_key, account_id, currency_id, amount, cluster_id, job_ref, placed_at,
              expires_at, lifetime, note)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         returning id",
    )
    .bind(&hold.idempotency_key)
    .bind(account)
    .bind(currency)
    .bind(hold.amount)
    .bind(cluster)
    .bind(hold.job_ref.as_deref())
    .bind(hold.placed_at)
    .bind(hold.expires_at)
    .bind(hold.lifetime)
    .bind(hold.note.as_deref())
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    let open = OpenHold {
        id,
        account,
        currency,
        cluster,
        amount: hold.amount,
        placed_at: hold.placed_at,
    };
    let mut effects = Effects::new(&tree, &allocs);
    effects.hold(account, currency, hold.placed_at, hold.amount)?;
    let entry = hold_entry(&open, hold.note.as_deref());
    insert_entries(conn, &[&entry], hold.placed_at).await?;
    write_effects(conn, &effects, hold.placed_at).await?;
    hold_by_id(conn, id)
        .await?
        .ok_or_else(|| LedgerError::Storage(format!("hold {id} vanished")))
}

pub(super) async fn link(conn: &mut SqliteConnection, id: Id, job_ref: &str) -> Result<()> {
    let current: Option<Option<String>> =
        sqlx::query_scalar("select job_ref from holds where id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
    match current {
        None => Err(LedgerError::not_found("hold", id.to_string())),
        Some(Some(existing)) if existing != job_ref => Err(LedgerError::Conflict(format!(
            "hold {id} is linked to job {existing:?}, not {job_ref:?}"
        ))),
        Some(_) => {
            sqlx::query("update holds set job_ref = ? where id = ?")
                .bind(job_ref)
                .bind(id)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
            Ok(())
        }
    }
}

/// Marks holds closed; their `release` entries are written by the caller.
pub(super) async fn mark_closed(
    conn: &mut SqliteConnection,
    ids: &[Id],
    state: &str,
    reason: &str,
    at: i64,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "update holds set state = ?, closed_at = ?, reason = ?
         where state = 'active' and id in (select value from json_each(?))",
    )
    .bind(state)
    .bind(at)
    .bind(reason)
    .bind(json_ints(ids.iter().copied()))
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    // The API jobs still recorded `held` on these holds take the state a job view gives them
    // (settled, cancelled, expired), in the same transaction: listings by state read recorded
    // states, and must not find every job settled since it was last looked at still `held`.
    let job_state = match state {
        "settled" => "settled",
        "released" => "cancelled",
        "expired" => "expired",
        other => {
            return Err(LedgerError::Storage(format!(
                "a hold cannot be closed as {other:?}"
            )))
        }
    };
    sqlx::query(
        "update api_jobs set state = ?, updated_at = ?
         where state = 'held' and hold_id in (select value from json_each(?))",
    )
    .bind(job_state)
    .bind(at)
    .bind(json_ints(ids.iter().copied()))
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// The expiry of the active hold `id` when its job is known to be waiting at `at`: a lifetime
/// after `at` (see [`extend_sighted`]). `false` when the hold is not active or already lives
/// that long.
pub(super) async fn extend(conn: &mut SqliteConnection, id: Id, at: i64) -> Result<bool> {
    let done = sqlx::query(&format!("{EXTEND} and id = ?2"))
        .bind(at)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(done.rows_affected() > 0)
}

/// Moves an active hold's expiry to a lifetime after `?1` (every right-hand side reads the row
/// as it was: the first move takes the lifetime from the original expiry); callers add which
/// holds.
const EXTEND: &str = "update holds set
         lifetime = coalesce(lifetime, expires_at - placed_at),
         expires_at = ?1 + coalesce(lifetime, expires_at - placed_at)
     where state = 'active' and expires_at < ?1 + coalesce(lifetime, expires_at - placed_at)";

/// [`EXTEND`] for the holds of a cluster (`?2`) linked to any of the job ids of a JSON array of
/// `[job id, submit time]` pairs (`?3`), through `holds_active_by_job`, placed no later than
/// `?4` seconds after the latest of their job id's submit times (as
/// [`super::journal::holds_to_settle_sql`]).
pub(super) fn extend_sighted_sql() -> String {
    format!(
        "{EXTEND} and cluster_id = ?2
         and job_ref in (select json_extract(value, '$[0]') from json_each(?3))
         and placed_at <= ?4 + (select max(json_extract(value, '$[1]')) from json_each(?3)
                                where json_extract(value, '$[0]') = holds.job_ref)"
    )
}

/// Moves the expiry of the active holds of jobs the cluster reports unfinished at `at`
/// (`jobs`: job ids and submit times by cluster label) to a whole lifetime after `at`: a hold
/// expires only a lifetime after its job was last seen pending or running, never while it is
/// queued longer than its time limit. (slurmdbd reports no held job: the gateway asks
/// slurmctld about those, [`extend`].) The lifetime is the one the hold was placed with, kept
/// in `lifetime` from the first sighting on (migration 0007). A record of a job submitted long
/// before the hold was placed is another job's under a reused id and moves nothing
/// ([`crate::model::SUBMIT_SKEW_SECS`]). Returns how many holds moved.
pub(super) async fn extend_sighted(
    conn: &mut SqliteConnection,
    jobs: &HashMap<Id, Vec<(&str, i64)>, impl std::hash::BuildHasher>,
    at: i64,
) -> Result<u64> {
    let mut moved = 0;
    let sql = extend_sighted_sql();
    for (cluster, job_ids) in jobs {
        let query = sqlx::query(&sql).bind(at).bind(cluster);
        let done = super::journal::bind_job_submits(query, job_ids)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        moved += done.rows_affected();
    }
    Ok(moved)
}

/// Closes active holds: `release` entries, materialized numbers, state.
pub(super) async fn close(
    conn: &mut SqliteConnection,
    holds: &[OpenHold],
    state: &str,
    reason: &str,
    at: i64,
) -> Result<()> {
    if holds.is_empty() {
        return Ok(());
    }
    let mut accounts: Vec<Id> = holds.iter().map(|h| h.account).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let (tree, allocs) = load_context(conn, &accounts).await?;
    let mut effects = Effects::new(&tree, &allocs);
    let entries = release_entries(holds, reason, &mut effects)?;
    let refs: Vec<_> = entries.iter().collect();
    insert_entries(conn, &refs, at).await?;
    write_effects(conn, &effects, at).await?;
    let ids: Vec<Id> = holds.iter().map(|h| h.id).collect();
    mark_closed(conn, &ids, state, reason, at).await
}

/// Closes the active hold `id` as `state` (`released` or `settled`); `false` when it was
/// already closed.
pub(super) async fn close_one(
    conn: &mut SqliteConnection,
    id: Id,
    state: &str,
    reason: &str,
    at: i64,
) -> Result<bool> {
    let sql = format!("{OPEN_HOLD_SELECT} where id = ? and state = 'active'");
    let open = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    let Some(open) = open else {
        return match hold_by_id(conn, id).await? {
            Some(_) => Ok(false),
            None => Err(LedgerError::not_found("hold", id.to_string())),
        };
    };
    close(conn, &[open_hold(&open)?], state, reason, at).await?;
    Ok(true)
}

/// The active holds whose job's latest record (of those submitted since the hold was placed,
/// [`crate::model::SUBMIT_SKEW_SECS`]) ended it in a state after which Slurm may run it again
/// ([`crate::model::RERUN_STATES`]), through `holds_active_by_job` (named: the planner would
/// rather scan every hold, active or not, in id order) and the jobs' unique key. And a job
/// array's hold once a record under the array's id that is neither a task nor a pending rest
/// (`63`: the array cancelled before any task started, as slurmdbd logs it) ended it in any
/// state: no task of it runs, and no task record will settle it.
pub(super) fn to_confirm_sql() -> String {
    let states = crate::model::rerun_states_sql();
    let select = HOLD_SELECT.replacen(
        "from holds h",
        "from holds h indexed by holds_active_by_job",
        1,
    );
    format!(
        "{select} where h.state = 'active' and h.job_ref is not null
         and (select e.is_final = 1
                     and (st.value in ({states})
                          or (j.display_id is null
                              and exists (select 1 from api_jobs a where a.hold_id = h.id
                                          and a.array_tasks is not null)))
              from jobs j join journal e on e.id = j.entry_id join labels st on st.id = e.state_id
              where j.cluster_id = h.cluster_id and j.job_id = h.job_ref
                and j.submit >= h.placed_at - ?1
              order by j.submit desc limit 1)
         order by h.id"
    )
}

pub(super) async fn to_confirm(conn: &mut SqliteConnection) -> Result<Vec<HoldRow>> {
    let rows = sqlx::query(&to_confirm_sql())
        .bind(crate::model::SUBMIT_SKEW_SECS)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(hold_row).collect()
}

pub(super) async fn expire(conn: &mut SqliteConnection, now: i64) -> Result<u64> {
    let sql = format!("{OPEN_HOLD_SELECT} where state = 'active' and expires_at <= ? order by id");
    let rows = sqlx::query(&sql)
        .bind(now)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let holds: Vec<OpenHold> = rows.iter().map(open_hold).collect::<Result<_>>()?;
    close(
        conn,
        &holds,
        "expired",
        "expired: no final usage arrived in time",
        now,
    )
    .await?;
    // The API jobs waiting on these holds expired with them ([`mark_closed`]).
    Ok(u64::try_from(holds.len()).unwrap_or(u64::MAX))
}

pub(super) async fn list(conn: &mut SqliteConnection, active_only: bool) -> Result<Vec<HoldRow>> {
    let sql = if active_only {
        format!("{HOLD_SELECT} where h.state = 'active' order by h.id")
    } else {
        format!("{HOLD_SELECT} order by h.id")
    };
    let rows = sqlx::query(&sql).fetch_all(&mut *conn).await.map_err(db)?;
    rows.iter().map(hold_row).collect()
}

pub(super) async fn active_count(conn: &mut SqliteConnection) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("select count(*) from holds where state = 'active'")
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The holds with an id in the JSON array `?1`, by id: primary key lookups.
pub(super) fn by_id_sql() -> String {
    format!("{HOLD_SELECT} where h.id in (select value from json_each(?1)) order by h.id")
}

pub(super) async fn by_id(conn: &mut SqliteConnection, ids: &[Id]) -> Result<Vec<HoldRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(&by_id_sql())
        .bind(json_ints(ids.iter().copied()))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(hold_row).collect()
}

/// The holds open at `?1`: the active ones placed by then (`state = 'active'` is
/// `closed_at is null`: a hold is closed once, state and time together) through
/// `holds_active_by_expiry`, and those closed after `?1` through `holds_closed_by_time`.
pub(super) fn open_at_sql() -> String {
    format!(
        "{HOLD_SELECT} where h.id in (
             select id from holds where state = 'active' and placed_at <= ?1
             union all
             select id from holds where closed_at > ?1 and placed_at <= ?1
         ) order by h.id"
    )
}

pub(super) async fn open_at(conn: &mut SqliteConnection, at: i64) -> Result<Vec<HoldRow>> {
    let rows = sqlx::query(&open_at_sql())
        .bind(at)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(hold_row).collect()
}

/// The active holds with `expires_at ≤ now`, by id: those the next expiry would close.
pub(super) async fn due(conn: &mut SqliteConnection, now: i64) -> Result<Vec<HoldRow>> {
    let sql = format!("{HOLD_SELECT} where h.state = 'active' and h.expires_at <= ? order by h.id");
    let rows = sqlx::query(&sql)
        .bind(now)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(hold_row).collect()
}
