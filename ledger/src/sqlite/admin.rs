//! Admin operations that need more than one write to be right: closing an account, removing an
//! association, renewing an allocation, transfers between accounts and refunds for a job
//! (`0005_admin.sql`). Each runs inside the caller's write transaction.

use bursar_pricing::money::format_micros;
use sqlx::SqliteConnection;

use super::journal::{insert_entries, job, write_effects};
use super::labels::{find, intern_one};
use super::tree::{
    allocation, allocation_covering, load_context, require_account, require_open, set_allocation,
};
use super::{col, db};
use crate::calendar::add_months;
use crate::error::{add, sub, LedgerError, Result};
use crate::materialize::{Effects, Id, UsageDims};
use crate::model::{
    RefundOutcome, RefundRequest, RenewPeriod, RenewRequest, Renewal, TransferOutcome,
    TransferRequest,
};
use crate::posting::{Entry, EntryType};

/// Closes `name` at `now`; `false` when it was closed already. Refused while the account or
/// anything under it has an active hold (a job that is running or waiting).
pub(super) async fn close_account(
    conn: &mut SqliteConnection,
    name: &str,
    now: i64,
) -> Result<bool> {
    let id = require_account(conn, name).await?;
    if id == super::tree::ROOT_ID {
        return Err(LedgerError::Invalid("root cannot be closed".to_string()));
    }
    let closed: Option<i64> = sqlx::query_scalar("select closed_at from accounts where id = ?")
        .bind(id)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    if closed.is_some() {
        return Ok(false);
    }
    let row = sqlx::query(
        "with recursive sub (id) as (
             select ?1 union all select a.id from accounts a join sub on a.parent_id = sub.id
         )
         select count(*), group_concat(distinct a.name) from holds h
         join accounts a on a.id = h.account_id
         where h.state = 'active' and h.account_id in (select id from sub)",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    let active: i64 = col(&row, 0)?;
    if active > 0 {
        let on: Option<String> = col(&row, 1)?;
        return Err(LedgerError::Conflict(format!(
            "account {name:?} has {active} active hold(s) in its subtree (on {}): jobs are running or waiting; close it once they have settled, or release the holds",
            on.unwrap_or_default()
        )));
    }
    sqlx::query("update accounts set closed_at = ? where id = ?")
        .bind(now)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(true)
}

/// Removes `user`'s association with `account`; `false` when there was none. The user's
/// default account cannot be removed (set another default first).
pub(super) async fn dissociate(
    conn: &mut SqliteConnection,
    user: &str,
    account: &str,
) -> Result<bool> {
    let default: Option<String> = sqlx::query_scalar(
        "select a.name from users u join accounts a on a.id = u.default_account_id
         where u.name = ?",
    )
    .bind(user)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    let Some(default) = default else {
        return Err(LedgerError::not_found("user", user));
    };
    let id = require_account(conn, account).await?;
    if default == account {
        return Err(LedgerError::Conflict(format!(
            "{account:?} is the default account of user {user:?}: set another default account first"
        )));
    }
    let done = sqlx::query("delete from associations where user_name = ? and account_id = ?")
        .bind(user)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(done.rows_affected() == 1)
}

/// The end of the period after `[start, end)`: `period` calendar months from `end`, or, when
/// none is given, the current period's own length (calendar months when it is one, else
/// seconds).
fn next_end(start: i64, end: i64, period: Option<RenewPeriod>) -> Result<i64> {
    let months = match period {
        Some(p) => Some(p.months()),
        None => [1, 3, 6, 12]
            .into_iter()
            .find(|&m| add_months(start, m) == end),
    };
    match months {
        Some(m) => Ok(add_months(end, m)),
        None => add(end, sub(end, start, "period length")?, "next period end"),
    }
}

/// Creates the allocation of the period after the one covering `at` (same amount unless
/// given). Idempotent: when the next period's allocation exists already, nothing changes
/// (a different `amount` asked for it is a conflict: `alloc set` changes amounts).
pub(super) async fn renew_allocation(
    conn: &mut SqliteConnection,
    req: &RenewRequest,
    now: i64,
) -> Result<Renewal> {
    let account = require_account(conn, &req.account).await?;
    let Some((current_id, _)) =
        allocation_covering(conn, account, req.currency.as_str(), req.at).await?
    else {
        return Err(LedgerError::not_found(
            "allocation",
            format!(
                "{} in {} covering {}",
                req.account,
                req.currency,
                crate::calendar::format_day(req.at)
            ),
        ));
    };
    let current = allocation(conn, current_id).await?;
    // Open-ended allocations (`alloc set` without --to) end at the far future.
    if current.end >= OPEN_END_GUARD || current.start <= -OPEN_END_GUARD {
        return Err(LedgerError::Invalid(format!(
            "allocation {} of {} in {} is open-ended: there is no next period to renew into",
            current.id, current.account, current.currency
        )));
    }
    let start = current.end;
    let end = next_end(current.start, current.end, req.period)?;
    let amount = req.amount.unwrap_or(current.amount);
    let currency = find(conn, req.currency.as_str()).await?;
    let existing: Option<(Id, i64, i64)> = match currency {
        None => None,
        Some(c) => sqlx::query_as(
            "select id, period_end, amount from allocations
             where account_id = ? and currency_id = ? and period_start = ?",
        )
        .bind(account)
        .bind(c)
        .bind(start)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?,
    };
    if let Some((id, existing_end, existing_amount)) = existing {
        let asked_other_amount = req.amount.is_some_and(|a| a != existing_amount);
        if existing_end != end || asked_other_amount {
            return Err(LedgerError::Conflict(format!(
                "{} in {} was renewed already: allocation {id} for [{start}, {existing_end}) of {} {}; change it with `bursar alloc set`",
                req.account,
                req.currency,
                format_micros(existing_amount, 0),
                req.currency
            )));
        }
        let next = allocation(conn, id).await?;
        return Ok(Renewal {
            current,
            next,
            created: false,
        });
    }
    let next = set_allocation(conn, &req.account, &req.currency, amount, start, end, now).await?;
    Ok(Renewal {
        current,
        next,
        created: true,
    })
}

/// Allocation ends at or after this are "no end" (the gateway's open end is year 9999).
const OPEN_END_GUARD: i64 = 200_000_000_000;

/// Whether `key` names a journal entry; its (id, account id, amount) when it does.
async fn keyed_entry(conn: &mut SqliteConnection, key: &str) -> Result<Option<(Id, Id, i64)>> {
    sqlx::query_as("select id, account_id, amount from journal where key = ?")
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}

/// Moves money between two accounts' allocations covering `at`, in this transaction.
pub(super) async fn transfer(
    conn: &mut SqliteConnection,
    req: &TransferRequest,
    now: i64,
) -> Result<TransferOutcome> {
    let from = require_account(conn, &req.from).await?;
    let to = require_account(conn, &req.to).await?;
    let from_key = format!("{}:from", req.idempotency_key);
    let to_key = format!("{}:to", req.idempotency_key);
    let covering = |who: &str, found: Option<(Id, i64)>| {
        found.map(|(id, _)| id).ok_or_else(|| {
            LedgerError::not_found(
                "allocation",
                format!(
                    "{who} in {} covering {}",
                    req.currency,
                    crate::calendar::format_day(req.at)
                ),
            )
        })
    };
    let from_alloc = covering(
        &req.from,
        allocation_covering(conn, from, req.currency.as_str(), req.at).await?,
    )?;
    let to_alloc = covering(
        &req.to,
        allocation_covering(conn, to, req.currency.as_str(), req.at).await?,
    )?;
    match (
        keyed_entry(conn, &from_key).await?,
        keyed_entry(conn, &to_key).await?,
    ) {
        (Some((_, a, x)), Some((_, b, y))) => {
            if a != from || b != to || x != -req.amount || y != req.amount {
                return Err(LedgerError::Conflict(format!(
                    "idempotency key {:?} was already used for a different transfer",
                    req.idempotency_key
                )));
            }
            return Ok(TransferOutcome {
                posted: false,
                from: allocation(conn, from_alloc).await?,
                to: allocation(conn, to_alloc).await?,
            });
        }
        (None, None) => {}
        _ => {
            return Err(LedgerError::Conflict(format!(
                "idempotency key {:?} was already used for another entry",
                req.idempotency_key
            )))
        }
    }
    require_open(conn, to, &req.to).await?;
    let source = allocation(conn, from_alloc).await?;
    if source.remaining < req.amount {
        return Err(LedgerError::InsufficientRemaining {
            account: req.from.clone(),
            currency: req.currency.clone(),
            amount: req.amount,
            remaining: source.remaining,
        });
    }
    let target = allocation(conn, to_alloc).await?;
    let target_amount = add(target.amount, req.amount, "allocation amount")?;
    for (id, amount) in [
        (
            from_alloc,
            sub(source.amount, req.amount, "allocation amount")?,
        ),
        (to_alloc, target_amount),
    ] {
        sqlx::query("update allocations set amount = ?, updated_at = ? where id = ?")
            .bind(amount)
            .bind(now)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    let currency = intern_one(conn, req.currency.as_str()).await?;
    let note = |direction: String| {
        Some(match &req.note {
            Some(n) => format!("{direction}: {n}").into(),
            None => direction.into(),
        })
    };
    let mut out = Entry::keyed(
        EntryType::Deposit,
        from_key,
        from,
        currency,
        -req.amount,
        req.at,
    );
    out.note = note(format!("transfer to {}", req.to));
    let mut into = Entry::keyed(EntryType::Deposit, to_key, to, currency, req.amount, req.at);
    into.note = note(format!("transfer from {}", req.from));
    insert_entries(conn, &[&out, &into], now).await?;
    Ok(TransferOutcome {
        posted: true,
        from: allocation(conn, from_alloc).await?,
        to: allocation(conn, to_alloc).await?,
    })
}

/// One job identity matched by a refund request, with its current posting.
struct Candidate {
    id: Id,
    cluster: String,
    job_id: String,
    submit: i64,
    amount: i64,
    account: Id,
    currency: Id,
    effective_at: i64,
    dims: UsageDims,
}

/// What has been refunded by hand for a job so far (positive).
async fn refunded_for(conn: &mut SqliteConnection, c: &Candidate) -> Result<i64> {
    let given: i64 = sqlx::query_scalar(
        "select coalesce(sum(amount), 0) from journal where job_ref = ? and type = 7",
    )
    .bind(c.id)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    given
        .checked_neg()
        .ok_or_else(|| LedgerError::Overflow(format!("refunds of job {}:{}", c.cluster, c.job_id)))
}

/// Gives back part or all of a job's charge, capped at the charge minus the refunds given
/// already; checked and written in this transaction.
pub(super) async fn refund_job(
    conn: &mut SqliteConnection,
    req: &RefundRequest,
    now: i64,
) -> Result<RefundOutcome> {
    let rows = sqlx::query(
        "select jb.id, cl.value, jb.job_id, jb.submit, jb.amount, e.account_id, e.currency_id,
                e.effective_at, e.user_id, e.cluster_id, e.partition_id, e.qos_id
         from jobs jb
         join labels cl on cl.id = jb.cluster_id
         join journal e on e.id = jb.entry_id
         where (jb.job_id = ?1 or jb.display_id = ?1) and (?2 is null or cl.value = ?2)
         order by cl.value, jb.submit",
    )
    .bind(&req.job_id)
    .bind(req.cluster.as_deref())
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let mut candidates = Vec::with_capacity(rows.len());
    for r in &rows {
        candidates.push(Candidate {
            id: col(r, 0)?,
            cluster: col(r, 1)?,
            job_id: col(r, 2)?,
            submit: col(r, 3)?,
            amount: col(r, 4)?,
            account: col(r, 5)?,
            currency: col(r, 6)?,
            effective_at: col(r, 7)?,
            dims: UsageDims {
                user: col(r, 8)?,
                cluster: col(r, 9)?,
                partition: col(r, 10)?,
                qos: col(r, 11)?,
            },
        });
    }
    let job_name = match &req.cluster {
        Some(c) => format!("{c}:{}", req.job_id),
        None => req.job_id.clone(),
    };
    let c = match candidates.as_slice() {
        [] => return Err(LedgerError::not_found("job", job_name)),
        [one] => one,
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|c| format!("{}:{} (submitted {})", c.cluster, c.job_id, c.submit))
                .collect();
            return Err(LedgerError::Conflict(format!(
                "job {job_name} is ambiguous: {}; name the cluster (CLUSTER:JOB or --cluster)",
                names.join(", ")
            )));
        }
    };
    let row = job(conn, &c.cluster, &c.job_id, c.submit)
        .await?
        .ok_or_else(|| LedgerError::Storage(format!("job {} vanished", c.id)))?;
    if let Some((entry_id, account, amount)) = keyed_entry(conn, &req.idempotency_key).await? {
        let same = account == c.account && req.amount.is_none_or(|a| a == -amount);
        if !same {
            return Err(LedgerError::Conflict(format!(
                "idempotency key {:?} was already used for a different entry",
                req.idempotency_key
            )));
        }
        let refunded = refunded_for(conn, c).await?;
        return Ok(RefundOutcome {
            posted: false,
            job: row,
            amount: -amount,
            charged: c.amount,
            refunded,
            entry_id,
        });
    }
    let refunded = refunded_for(conn, c).await?;
    let refundable = sub(c.amount, refunded, "refundable")?;
    let currency = row.currency.clone();
    let money = |m: i64| format!("{} {currency}", format_micros(m, 0));
    let name = format!("{}:{}", c.cluster, row.display_id);
    if refundable <= 0 {
        return Err(LedgerError::Conflict(format!(
            "job {name} was charged {} and {} has been refunded already: nothing is left to refund",
            money(c.amount),
            money(refunded)
        )));
    }
    let amount = req.amount.unwrap_or(refundable);
    if amount <= 0 {
        return Err(LedgerError::Invalid(format!(
            "a refund must be positive, not {}",
            money(amount)
        )));
    }
    if amount > refundable {
        return Err(LedgerError::Conflict(format!(
            "job {name} was charged {} and {} has been refunded already: at most {} can be refunded, not {}",
            money(c.amount),
            money(refunded),
            money(refundable),
            money(amount)
        )));
    }
    let mut entry = Entry::keyed(
        EntryType::Refund,
        req.idempotency_key.clone(),
        c.account,
        c.currency,
        -amount,
        c.effective_at,
    );
    entry.user = c.dims.user;
    entry.cluster = c.dims.cluster;
    entry.partition = c.dims.partition;
    entry.qos = c.dims.qos;
    entry.note = req.note.as_deref().map(Into::into);
    let entry_id = insert_entries(conn, &[&entry], now).await?;
    sqlx::query("update journal set job_ref = ? where id = ?")
        .bind(c.id)
        .bind(entry_id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let (tree, allocs) = load_context(conn, &[c.account]).await?;
    let mut effects = Effects::new(&tree, &allocs);
    effects.usage(c.account, c.currency, c.effective_at, -amount, 0, c.dims)?;
    write_effects(conn, &effects, now).await?;
    Ok(RefundOutcome {
        posted: true,
        job: row,
        amount,
        charged: c.amount,
        refunded: add(refunded, amount, "refunded")?,
        entry_id,
    })
}
