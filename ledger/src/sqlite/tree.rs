//! Accounts, users, associations and allocations; loading the part of the tree a write needs.

use bursar_pricing::Currency;
use rustc_hash::{FxHashMap, FxHashSet};
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::labels::{find, intern_one};
use super::{col, db, json_ints, json_strings, value_rows, MAX_PARAMS};
use crate::error::{sub, LedgerError, Result};
use crate::materialize::{AllocSpan, Id};
use crate::model::{AccountRow, AllocationRow, AssociationRow, UserRow};
use crate::posting::{Entry, EntryType};
use crate::tree::AccountTree;

/// The id of `root`, created by the first migration.
pub(super) const ROOT_ID: Id = 1;

pub(super) async fn account_id(conn: &mut SqliteConnection, name: &str) -> Result<Option<Id>> {
    sqlx::query_scalar("select id from accounts where name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}

pub(super) async fn require_account(conn: &mut SqliteConnection, name: &str) -> Result<Id> {
    account_id(conn, name)
        .await?
        .ok_or_else(|| LedgerError::not_found("account", name))
}

/// The nearest closed account on `id`'s chain (itself first), as (name, closed_at).
pub(super) async fn closed_on_chain(
    conn: &mut SqliteConnection,
    id: Id,
) -> Result<Option<(String, i64)>> {
    let row = sqlx::query(
        "with recursive chain (id, parent_id, depth) as (
             select id, parent_id, 0 from accounts where id = ?
             union all
             select a.id, a.parent_id, c.depth + 1 from accounts a join chain c on a.id = c.parent_id
         )
         select a.name, a.closed_at from chain c join accounts a on a.id = c.id
         where a.closed_at is not null order by c.depth limit 1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
}

/// Refuses when `name` (id `id`) or an ancestor is closed.
pub(super) async fn require_open(conn: &mut SqliteConnection, id: Id, name: &str) -> Result<()> {
    match closed_on_chain(conn, id).await? {
        None => Ok(()),
        Some((closed, _)) => Err(LedgerError::AccountClosed {
            account: name.to_string(),
            closed_by: (closed != name).then_some(closed),
        }),
    }
}

/// Ids of the accounts in `names` that exist.
pub(super) async fn account_ids<'a>(
    conn: &mut SqliteConnection,
    names: &[&'a str],
) -> Result<FxHashMap<&'a str, Id>> {
    let rows =
        sqlx::query("select name, id from accounts where name in (select value from json_each(?))")
            .bind(json_strings(names.iter().copied()))
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
    let found: FxHashMap<String, Id> = rows
        .iter()
        .map(|r| Ok((col::<String>(r, 0)?, col::<Id>(r, 1)?)))
        .collect::<Result<_>>()?;
    Ok(names
        .iter()
        .filter_map(|n| found.get(*n).map(|&id| (*n, id)))
        .collect())
}

/// Creates `names` under root; returns their ids.
pub(super) async fn create_under_root<'a>(
    conn: &mut SqliteConnection,
    names: &[&'a str],
    now: i64,
) -> Result<FxHashMap<&'a str, Id>> {
    let mut ids = FxHashMap::default();
    for chunk in names.chunks(MAX_PARAMS / 3) {
        let sql = format!(
            "insert into accounts (name, parent_id, created_at) values {} returning name, id",
            value_rows(chunk.len(), 3)
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for name in chunk {
            query = query.bind(*name).bind(ROOT_ID).bind(now);
        }
        let rows = query.fetch_all(&mut *conn).await.map_err(db)?;
        let created: FxHashMap<String, Id> = rows
            .iter()
            .map(|r| Ok((col::<String>(r, 0)?, col::<Id>(r, 1)?)))
            .collect::<Result<_>>()?;
        for name in chunk {
            if let Some(&id) = created.get(*name) {
                ids.insert(*name, id);
            }
        }
    }
    Ok(ids)
}

pub(super) async fn ensure_account(
    conn: &mut SqliteConnection,
    name: &str,
    parent: &str,
    now: i64,
) -> Result<bool> {
    if account_id(conn, name).await?.is_some() {
        return Ok(false);
    }
    let parent_id = require_account(conn, parent).await?;
    require_open(conn, parent_id, parent).await?;
    sqlx::query("insert into accounts (name, parent_id, created_at) values (?, ?, ?)")
        .bind(name)
        .bind(parent_id)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(true)
}

async fn load_id_tree(conn: &mut SqliteConnection) -> Result<AccountTree<Id>> {
    let rows = sqlx::query("select id, parent_id from accounts")
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| Ok((col::<Id>(r, 0)?, col::<Option<Id>>(r, 1)?)))
        .collect::<Result<Vec<_>>>()
        .map(AccountTree::from_pairs)
}

/// Moves `name` under `parent`, refusing cycles, and recomputes the allocations of every
/// ancestor it left or joined (their subtrees changed).
pub(super) async fn set_parent(
    conn: &mut SqliteConnection,
    name: &str,
    parent: &str,
) -> Result<()> {
    let id = require_account(conn, name).await?;
    if id == ROOT_ID {
        return Err(LedgerError::Invalid("root has no parent".to_string()));
    }
    let parent_id = require_account(conn, parent).await?;
    let mut tree = load_id_tree(conn).await?;
    if tree.is_in_subtree(&parent_id, &id) {
        return Err(LedgerError::Conflict(format!(
            "moving {name:?} under {parent:?} would make a cycle: {parent:?} is in {name:?}'s subtree"
        )));
    }
    if tree.parent(&id) == Some(&parent_id) {
        return Ok(());
    }
    require_open(conn, parent_id, parent).await?;
    let mut affected: FxHashSet<Id> = tree
        .ancestors_or_self(&id)
        .into_iter()
        .skip(1)
        .copied()
        .collect();
    sqlx::query("update accounts set parent_id = ? where id = ?")
        .bind(parent_id)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    tree.insert(id, Some(parent_id));
    affected.extend(tree.ancestors_or_self(&id).into_iter().skip(1).copied());
    let allocs: Vec<Id> = sqlx::query_scalar(
        "select id from allocations where account_id in (select value from json_each(?))",
    )
    .bind(json_ints(affected))
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    for alloc in allocs {
        recompute_allocation(conn, alloc).await?;
    }
    Ok(())
}

pub(super) async fn accounts(conn: &mut SqliteConnection) -> Result<Vec<AccountRow>> {
    let rows = sqlx::query(
        "select a.name, p.name, a.created_at, a.closed_at from accounts a
         left join accounts p on p.id = a.parent_id order by a.name",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(AccountRow {
                name: col(r, 0)?,
                parent: col(r, 1)?,
                created_at: col(r, 2)?,
                closed_at: col(r, 3)?,
            })
        })
        .collect()
}

/// The chains (ancestors-or-self) of `accounts` and root, and every allocation on them.
pub(super) async fn load_context(
    conn: &mut SqliteConnection,
    accounts: &[Id],
) -> Result<(AccountTree<Id>, Vec<AllocSpan>)> {
    let rows = sqlx::query(
        "with recursive chain (id, parent_id) as (
             select id, parent_id from accounts
             where id = 1 or id in (select value from json_each(?1))
             union
             select a.id, a.parent_id from accounts a join chain c on a.id = c.parent_id
         )
         select id, parent_id from chain",
    )
    .bind(json_ints(accounts.iter().copied()))
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let mut tree = AccountTree::new();
    for row in &rows {
        tree.insert(col::<Id>(row, 0)?, col::<Option<Id>>(row, 1)?);
    }
    let sql = format!(
        "select {ALLOCATION_SPAN} from allocations
         where account_id in (select value from json_each(?)) order by id"
    );
    let rows = sqlx::query(&sql)
        .bind(json_ints(tree.accounts().copied()))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let allocs = rows.iter().map(alloc_span).collect::<Result<_>>()?;
    Ok((tree, allocs))
}

const ALLOCATION_SPAN: &str =
    "id, account_id, currency_id, amount, period_start, period_end, charged, held";

fn alloc_span(row: &SqliteRow) -> Result<AllocSpan> {
    Ok(AllocSpan {
        id: col(row, 0)?,
        account: col(row, 1)?,
        currency: col(row, 2)?,
        amount: col(row, 3)?,
        start: col(row, 4)?,
        end: col(row, 5)?,
        charged: col(row, 6)?,
        held: col(row, 7)?,
    })
}

pub(super) async fn upsert_user(
    conn: &mut SqliteConnection,
    name: &str,
    default_account: &str,
    now: i64,
) -> Result<bool> {
    let account = require_account(conn, default_account).await?;
    let existing: Option<String> = sqlx::query_scalar("select name from users where name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    sqlx::query(
        "insert into users (name, default_account_id, created_at) values (?, ?, ?)
         on conflict (name) do update set default_account_id = excluded.default_account_id",
    )
    .bind(name)
    .bind(account)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    associate(conn, name, default_account, now).await?;
    Ok(existing.is_none())
}

pub(super) async fn associate(
    conn: &mut SqliteConnection,
    user: &str,
    account: &str,
    now: i64,
) -> Result<bool> {
    let user_exists: Option<i64> = sqlx::query_scalar("select 1 from users where name = ?")
        .bind(user)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    if user_exists.is_none() {
        return Err(LedgerError::not_found("user", user));
    }
    let name = account;
    let account = require_account(conn, account).await?;
    let known: Option<i64> =
        sqlx::query_scalar("select 1 from associations where user_name = ? and account_id = ?")
            .bind(user)
            .bind(account)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
    if known.is_some() {
        return Ok(false);
    }
    require_open(conn, account, name).await?;
    let done = sqlx::query(
        "insert into associations (user_name, account_id, created_at) values (?, ?, ?)
         on conflict do nothing",
    )
    .bind(user)
    .bind(account)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn users(conn: &mut SqliteConnection) -> Result<Vec<UserRow>> {
    let rows = sqlx::query(
        "select u.name, a.name, u.created_at from users u
         join accounts a on a.id = u.default_account_id order by u.name",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(UserRow {
                name: col(r, 0)?,
                default_account: col(r, 1)?,
                created_at: col(r, 2)?,
            })
        })
        .collect()
}

pub(super) async fn associations(conn: &mut SqliteConnection) -> Result<Vec<AssociationRow>> {
    let rows = sqlx::query(
        "select s.user_name, a.name, s.created_at from associations s
         join accounts a on a.id = s.account_id order by s.user_name, a.name",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(AssociationRow {
                user: col(r, 0)?,
                account: col(r, 1)?,
                created_at: col(r, 2)?,
            })
        })
        .collect()
}

const ALLOCATION_ROW: &str = "select al.id, a.name, c.value, al.amount, al.period_start, \
     al.period_end, al.charged, al.held from allocations al \
     join accounts a on a.id = al.account_id join labels c on c.id = al.currency_id";

fn allocation_row(row: &SqliteRow) -> Result<AllocationRow> {
    let id: Id = col(row, 0)?;
    let amount: i64 = col(row, 3)?;
    let charged: i64 = col(row, 6)?;
    let held: i64 = col(row, 7)?;
    let remaining = amount
        .checked_sub(charged)
        .and_then(|r| r.checked_sub(held))
        .ok_or_else(|| LedgerError::Overflow(format!("remaining of allocation {id}")))?;
    Ok(AllocationRow {
        id,
        account: col(row, 1)?,
        currency: Currency::new(&col::<String>(row, 2)?),
        amount,
        start: col(row, 4)?,
        end: col(row, 5)?,
        charged,
        held,
        remaining,
    })
}

pub(super) async fn allocations(conn: &mut SqliteConnection) -> Result<Vec<AllocationRow>> {
    let sql = format!("{ALLOCATION_ROW} order by a.name, c.value, al.period_start");
    let rows = sqlx::query(&sql).fetch_all(&mut *conn).await.map_err(db)?;
    rows.iter().map(allocation_row).collect()
}

pub(super) async fn allocation(conn: &mut SqliteConnection, id: Id) -> Result<AllocationRow> {
    let sql = format!("{ALLOCATION_ROW} where al.id = ?");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    allocation_row(&row)
}

/// Usage and holds of an allocation's subtree within its period, summed from the journal.
pub(super) async fn allocation_usage_from_journal(
    conn: &mut SqliteConnection,
    id: Id,
) -> Result<(i64, i64)> {
    let row = sqlx::query(
        "with recursive sub (id) as (
             select account_id from allocations where id = ?1
             union all
             select a.id from accounts a join sub on a.parent_id = sub.id
         )
         select
             coalesce(sum(case when j.type between 2 and 7 then j.amount end), 0),
             coalesce(sum(case when j.type in (8, 9) then j.amount end), 0)
         from journal j join allocations al on al.id = ?1
         where j.currency_id = al.currency_id
           and j.effective_at >= al.period_start and j.effective_at < al.period_end
           and j.type > 1
           and j.account_id in (select id from sub)",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    Ok((col(&row, 0)?, col(&row, 1)?))
}

/// Recomputes an allocation's materialized `charged` and `held` from the journal (backfill).
async fn recompute_allocation(conn: &mut SqliteConnection, id: Id) -> Result<()> {
    let (charged, held) = allocation_usage_from_journal(conn, id).await?;
    sqlx::query("update allocations set charged = ?, held = ? where id = ?")
        .bind(charged)
        .bind(held)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(())
}

/// The id of the account's own allocation in `currency` whose period contains `t`.
pub(super) async fn allocation_covering(
    conn: &mut SqliteConnection,
    account: Id,
    currency: &str,
    t: i64,
) -> Result<Option<(Id, i64)>> {
    let Some(currency) = find(conn, currency).await? else {
        return Ok(None);
    };
    let row = sqlx::query(
        "select id, amount from allocations
         where account_id = ? and currency_id = ? and period_start <= ? and period_end > ?",
    )
    .bind(account)
    .bind(currency)
    .bind(t)
    .bind(t)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    row.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
}

/// Creates an allocation (backfilled from the journal) or replaces the amount of the one with
/// exactly this period. Every change of amount is a `deposit` entry at the period's start.
pub(super) async fn set_allocation(
    conn: &mut SqliteConnection,
    account: &str,
    currency: &Currency,
    amount: i64,
    start: i64,
    end: i64,
    now: i64,
) -> Result<AllocationRow> {
    let account_id = require_account(conn, account).await?;
    let closed = closed_on_chain(conn, account_id).await?;
    let currency_id = intern_one(conn, currency.as_str()).await?;
    let overlapping = sqlx::query(
        "select id, amount, period_start, period_end, revision from allocations
         where account_id = ? and currency_id = ? and period_start < ? and period_end > ?",
    )
    .bind(account_id)
    .bind(currency_id)
    .bind(end)
    .bind(start)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;

    let refuse_closed = || match &closed {
        Some((by, _)) => Err(LedgerError::AccountClosed {
            account: account.to_string(),
            closed_by: (by != account).then(|| by.clone()),
        }),
        None => Ok(()),
    };
    let (id, delta, revision) = match overlapping.as_slice() {
        [] => {
            refuse_closed()?;
            let id: Id = sqlx::query_scalar(
                "insert into allocations
                     (account_id, currency_id, amount, period_start, period_end, revision,
                      created_at, updated_at)
                 values (?, ?, ?, ?, ?, 1, ?, ?)
                 returning id",
            )
            .bind(account_id)
            .bind(currency_id)
            .bind(amount)
            .bind(start)
            .bind(end)
            .bind(now)
            .bind(now)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
            recompute_allocation(conn, id).await?;
            (id, amount, 1)
        }
        [one] if col::<i64>(one, 2)? == start && col::<i64>(one, 3)? == end => {
            let id: Id = col(one, 0)?;
            let old: i64 = col(one, 1)?;
            let revision = col::<i64>(one, 4)? + 1;
            if old == amount {
                return allocation(conn, id).await;
            }
            if amount > old {
                refuse_closed()?;
            }
            sqlx::query(
                "update allocations set amount = ?, revision = ?, updated_at = ? where id = ?",
            )
            .bind(amount)
            .bind(revision)
            .bind(now)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
            (id, sub(amount, old, "allocation change")?, revision)
        }
        others => {
            let periods: Vec<String> = others
                .iter()
                .map(|r| Ok(format!("[{}, {})", col::<i64>(r, 2)?, col::<i64>(r, 3)?)))
                .collect::<Result<_>>()?;
            return Err(LedgerError::Conflict(format!(
                "allocation of {account:?} in {currency} for [{start}, {end}) overlaps {}",
                periods.join(", ")
            )));
        }
    };
    if delta != 0 {
        let mut entry = Entry::keyed(
            EntryType::Deposit,
            format!("allocation:{id}:{revision}"),
            account_id,
            currency_id,
            delta,
            start,
        );
        entry.note = Some(format!("allocation {id} set to {amount}").into());
        super::journal::insert_entries(conn, &[&entry], now).await?;
    }
    allocation(conn, id).await
}
