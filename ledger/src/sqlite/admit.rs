//! The admission fast path.
//!
//! - [`view`]: what a quote reads (the account, the user's association with it, its chain and
//!   the chain's allocations in force) in one statement.
//! - [`admit`]: the holds and API jobs of many submissions in one write transaction — group
//!   commit. Each submission is checked against the chain's allocations as they stand after
//!   the submissions before it in the batch, exactly as if each were its own transaction, and
//!   the whole batch costs about as many statements as one submission did alone.
//! - [`record_forwarded`]: the cluster job ids of many forwarded jobs, in two statements.

use std::collections::{HashMap, HashSet};

use bursar_pricing::Currency;
use sqlx::SqliteConnection;

use super::gateway::{api_job_row, API_JOB_SELECT};
use super::journal::{insert_entries, write_effects};
use super::labels::intern;
use super::tree::load_context;
use super::{col, db, json_ints, json_strings, value_rows, MAX_PARAMS};
use crate::error::{LedgerError, Result};
use crate::materialize::{Effects, Id};
use crate::model::{
    AdmissionView, AdmitOutcome, ApiJob, BalanceRow, ForwardedJob, HoldRow, HoldState, NewAdmission,
};
use crate::posting::{hold_entry, OpenHold};

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

pub(super) async fn admit(
    conn: &mut SqliteConnection,
    batch: &[NewAdmission],
    now: i64,
) -> Result<Vec<Result<AdmitOutcome>>> {
    let mut outcomes: Vec<Option<Result<AdmitOutcome>>> = vec![None; batch.len()];

    // Idempotency keys already used by recorded jobs, and hold keys already used.
    let job_keys: Vec<&str> = batch
        .iter()
        .filter_map(|a| a.job.idempotency_key.as_deref())
        .collect();
    let mut existing: HashMap<String, ApiJob> = HashMap::new();
    if !job_keys.is_empty() {
        let sql =
            format!("{API_JOB_SELECT} where idempotency_key in (select value from json_each(?))");
        let rows = sqlx::query(&sql)
            .bind(json_strings(job_keys.iter().copied()))
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
        for row in &rows {
            let job = api_job_row(row)?;
            if let Some(key) = job.idempotency_key.clone() {
                existing.insert(key, job);
            }
        }
    }
    let holds: Vec<(usize, &crate::model::NewHold)> = batch
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.hold.as_ref().map(|h| (i, h)))
        .collect();
    let mut used_hold_keys: HashSet<String> = HashSet::new();
    let mut account_ids: HashMap<String, Id> = HashMap::new();
    if !holds.is_empty() {
        let rows = sqlx::query(
            "select idempotency_key from holds
             where idempotency_key in (select value from json_each(?))",
        )
        .bind(json_strings(
            holds.iter().map(|(_, h)| h.idempotency_key.as_str()),
        ))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        for row in &rows {
            used_hold_keys.insert(col(row, 0)?);
        }
        let rows = sqlx::query(
            "select name, id from accounts where name in (select value from json_each(?))",
        )
        .bind(json_strings(holds.iter().map(|(_, h)| h.account.as_str())))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        for row in &rows {
            account_ids.insert(col(row, 0)?, col(row, 1)?);
        }
    }
    let mut label_values: Vec<&str> = holds
        .iter()
        .flat_map(|(_, h)| [h.currency.as_str(), h.cluster.as_str()])
        .collect();
    label_values.sort_unstable();
    label_values.dedup();
    let labels = intern(conn, &label_values).await?;
    let label = |v: &str| {
        labels
            .get(v)
            .copied()
            .ok_or_else(|| LedgerError::Storage(format!("label {v:?} was not created")))
    };
    let mut ids: Vec<Id> = account_ids.values().copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let (tree, allocs) = load_context(conn, &ids).await?;
    let mut effects = Effects::new(&tree, &allocs);

    let (mut next_hold, mut next_job): (Id, Id) = {
        let row = sqlx::query(
            "select (select coalesce(max(id), 0) from holds),
                    (select coalesce(max(id), 0) from api_jobs)",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        (col::<Id>(&row, 0)? + 1, col::<Id>(&row, 1)? + 1)
    };

    // Decide each submission in order, against the allocations as the earlier ones left them.
    let mut names: Option<HashMap<Id, String>> = None;
    let mut seen_keys: HashSet<&str> = HashSet::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut recorded: Vec<(usize, Id, Option<Id>)> = Vec::new();
    for (i, admission) in batch.iter().enumerate() {
        if let Some(key) = admission.job.idempotency_key.as_deref() {
            if let Some(job) = existing.get(key) {
                outcomes[i] = Some(Ok(AdmitOutcome::Existing(job.clone())));
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
            let Some(&account) = account_ids.get(&hold.account) else {
                outcomes[i] = Some(Err(LedgerError::not_found("account", &hold.account)));
                continue;
            };
            let currency = label(hold.currency.as_str())?;
            let covering = effects.covering_remaining(account, currency, hold.placed_at)?;
            let worst = covering
                .iter()
                .copied()
                .reduce(|w, c| if c.1 < w.1 { c } else { w });
            let refused = match worst {
                None => Some(LedgerError::NoAllocation {
                    account: hold.account.clone(),
                    currency: hold.currency.clone(),
                }),
                Some((alloc, remaining)) if remaining < hold.amount => {
                    if names.is_none() {
                        names = Some(account_names(conn, tree.accounts()).await?);
                    }
                    Some(LedgerError::InsufficientAllocation {
                        account: names
                            .as_ref()
                            .and_then(|n| n.get(&alloc.account))
                            .cloned()
                            .unwrap_or_else(|| alloc.account.to_string()),
                        currency: hold.currency.clone(),
                        estimate: hold.amount,
                        remaining,
                    })
                }
                Some(_) => None,
            };
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

    insert_holds(conn, batch, &placed).await?;
    let open: Vec<OpenHold> = placed
        .iter()
        .map(|p| {
            let hold = batch[p.item]
                .hold
                .as_ref()
                .expect("placed holds have a hold");
            OpenHold {
                id: p.id,
                account: p.account,
                currency: p.currency,
                cluster: p.cluster,
                amount: hold.amount,
                placed_at: hold.placed_at,
            }
        })
        .collect();
    let entries: Vec<_> = open
        .iter()
        .zip(&placed)
        .map(|(o, p)| {
            hold_entry(
                o,
                batch[p.item].hold.as_ref().and_then(|h| h.note.as_deref()),
            )
        })
        .collect();
    if !entries.is_empty() {
        let refs: Vec<_> = entries.iter().collect();
        insert_entries(conn, &refs, now).await?;
        write_effects(conn, &effects, now).await?;
    }
    insert_jobs(conn, batch, &recorded).await?;

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
    outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| LedgerError::Storage("a submission was left undecided".into())))
        .collect()
}

async fn account_names(
    conn: &mut SqliteConnection,
    ids: impl Iterator<Item = &Id>,
) -> Result<HashMap<Id, String>> {
    let rows =
        sqlx::query("select id, name from accounts where id in (select value from json_each(?))")
            .bind(json_ints(ids.copied()))
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
    rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
}

const HOLD_ARITY: usize = 10;

async fn insert_holds(
    conn: &mut SqliteConnection,
    batch: &[NewAdmission],
    placed: &[Placed],
) -> Result<()> {
    for chunk in placed.chunks(MAX_PARAMS / HOLD_ARITY) {
        let sql = format!(
            "insert into holds (id, idempotency_key, account_id, currency_id, amount, cluster_id,
                 job_ref, placed_at, expires_at, note) values {}",
            value_rows(chunk.len(), HOLD_ARITY)
        );
        let mut query = sqlx::query(&sql).persistent(chunk.len() == 1);
        for p in chunk {
            let hold = batch[p.item]
                .hold
                .as_ref()
                .expect("placed holds have a hold");
            query = query
                .bind(p.id)
                .bind(&hold.idempotency_key)
                .bind(p.account)
                .bind(p.currency)
                .bind(hold.amount)
                .bind(p.cluster)
                .bind(hold.job_ref.as_deref())
                .bind(hold.placed_at)
                .bind(hold.expires_at)
                .bind(hold.note.as_deref());
        }
        query.execute(&mut *conn).await.map_err(db)?;
    }
    Ok(())
}

const JOB_ARITY: usize = 14;

async fn insert_jobs(
    conn: &mut SqliteConnection,
    batch: &[NewAdmission],
    recorded: &[(usize, Id, Option<Id>)],
) -> Result<()> {
    for chunk in recorded.chunks(MAX_PARAMS / JOB_ARITY) {
        let sql = format!(
            "insert into api_jobs (id, idempotency_key, actor, user_name, account, cluster,
                 currency, estimate, hold_id, state, request_json, route_json, submitted_at,
                 updated_at) values {}",
            value_rows(chunk.len(), JOB_ARITY)
        );
        let mut query = sqlx::query(&sql).persistent(chunk.len() == 1);
        for &(i, id, hold_id) in chunk {
            let job = &batch[i].job;
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
        query.execute(&mut *conn).await.map_err(db)?;
    }
    Ok(())
}

/// Links each forwarded job's hold (unless it is linked already) and records its cluster job
/// id; returns how many holds were linked.
pub(super) async fn record_forwarded(
    conn: &mut SqliteConnection,
    jobs: &[ForwardedJob],
) -> Result<u64> {
    let mut linked = 0;
    for chunk in jobs.chunks(MAX_PARAMS / 3) {
        let with_hold: Vec<&ForwardedJob> = chunk.iter().filter(|j| j.hold.is_some()).collect();
        if !with_hold.is_empty() {
            let sql = format!(
                "with v (id, job_ref) as (values {})
                 update holds set job_ref = v.job_ref from v
                 where holds.id = v.id and holds.job_ref is null",
                value_rows(with_hold.len(), 2)
            );
            let mut query = sqlx::query(&sql).persistent(with_hold.len() == 1);
            for j in &with_hold {
                query = query.bind(j.hold).bind(&j.settle_ref);
            }
            linked += query.execute(&mut *conn).await.map_err(db)?.rows_affected();
        }
        let sql = format!(
            "with v (id, cluster_job_id, at) as (values {})
             update api_jobs set cluster_job_id = v.cluster_job_id, updated_at = v.at from v
             where api_jobs.id = v.id",
            value_rows(chunk.len(), 3)
        );
        let mut query = sqlx::query(&sql).persistent(chunk.len() == 1);
        for j in chunk {
            query = query.bind(j.job).bind(&j.cluster_job_id).bind(j.at);
        }
        let done = query.execute(&mut *conn).await.map_err(db)?;
        if done.rows_affected() != chunk.len() as u64 {
            return Err(LedgerError::Storage(format!(
                "{} of {} forwarded jobs are not recorded",
                chunk.len() as u64 - done.rows_affected(),
                chunk.len()
            )));
        }
    }
    Ok(linked)
}
