//! What the gateway keeps beside the ledger: the audit log and the jobs submitted through its
//! API (`0002_gateway.sql`).

use bursar_pricing::Currency;
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::{col, db};
use crate::error::{LedgerError, Result};
use crate::model::{ApiJob, ApiJobsPage, AuditEntry, JobPart, NewApiJob, NewAudit};

pub(super) async fn audit(conn: &mut SqliteConnection, entry: &NewAudit) -> Result<i64> {
    sqlx::query_scalar(
        "insert into audit_log (at, actor, role, action, target, before_json, after_json)
         values (?, ?, ?, ?, ?, ?, ?) returning id",
    )
    .bind(entry.at)
    .bind(&entry.actor)
    .bind(&entry.role)
    .bind(&entry.action)
    .bind(&entry.target)
    .bind(&entry.before)
    .bind(&entry.after)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)
}

/// The newest entries first (below `before` when given), at most `limit` of them.
pub(super) async fn audit_log(
    conn: &mut SqliteConnection,
    before: Option<i64>,
    limit: Option<u32>,
) -> Result<Vec<AuditEntry>> {
    // SQLite: a negative limit means none.
    let limit = limit.map_or(-1, i64::from);
    let rows = sqlx::query(
        "select id, at, actor, role, action, target, before_json, after_json
         from audit_log where id < ?1 order by id desc limit ?2",
    )
    .bind(before.unwrap_or(i64::MAX))
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(AuditEntry {
                id: col(r, 0)?,
                at: col(r, 1)?,
                actor: col(r, 2)?,
                role: col(r, 3)?,
                action: col(r, 4)?,
                target: col(r, 5)?,
                before: col(r, 6)?,
                after: col(r, 7)?,
            })
        })
        .collect()
}

pub(super) const API_JOB_SELECT: &str =
    "select id, idempotency_key, actor, user_name, account, cluster, \
     cluster_job_id, currency, estimate, hold_id, state, request_json, route_json, \
     submitted_at, updated_at, settle_ref, array_tasks from api_jobs";

pub(super) fn api_job_row(row: &SqliteRow) -> Result<ApiJob> {
    Ok(ApiJob {
        id: col(row, 0)?,
        idempotency_key: col(row, 1)?,
        actor: col(row, 2)?,
        user: col(row, 3)?,
        account: col(row, 4)?,
        cluster: col(row, 5)?,
        cluster_job_id: col(row, 6)?,
        settle_ref: col(row, 15)?,
        currency: Currency::new(&col::<String>(row, 7)?),
        estimate: col(row, 8)?,
        hold_id: col(row, 9)?,
        state: col(row, 10)?,
        request_json: col(row, 11)?,
        route_json: col(row, 12)?,
        submitted_at: col(row, 13)?,
        updated_at: col(row, 14)?,
        array_tasks: col(row, 16)?,
    })
}

pub(super) async fn create_api_job(conn: &mut SqliteConnection, job: &NewApiJob) -> Result<ApiJob> {
    if let Some(key) = &job.idempotency_key {
        if let Some(existing) = api_job_by_key(conn, key).await? {
            return Err(LedgerError::Conflict(format!(
                "idempotency key {key:?} was already used by job {}",
                existing.id
            )));
        }
    }
    if let Some(hold) = job.hold_id {
        let found: Option<i64> = sqlx::query_scalar("select id from holds where id = ?")
            .bind(hold)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
        if found.is_none() {
            return Err(LedgerError::not_found("hold", hold.to_string()));
        }
    }
    let id: i64 = sqlx::query_scalar(
        "insert into api_jobs (idempotency_key, actor, user_name, account, cluster, currency,
             estimate, hold_id, state, request_json, route_json, submitted_at, updated_at,
             array_tasks)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning id",
    )
    .bind(&job.idempotency_key)
    .bind(&job.actor)
    .bind(&job.user)
    .bind(&job.account)
    .bind(&job.cluster)
    .bind(job.currency.as_str())
    .bind(job.estimate)
    .bind(job.hold_id)
    .bind(&job.state)
    .bind(&job.request_json)
    .bind(&job.route_json)
    .bind(job.at)
    .bind(job.at)
    .bind(job.array_tasks)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    api_job(conn, id)
        .await?
        .ok_or_else(|| LedgerError::Storage(format!("api job {id} vanished after insert")))
}

pub(super) async fn api_job(conn: &mut SqliteConnection, id: i64) -> Result<Option<ApiJob>> {
    let sql = format!("{API_JOB_SELECT} where id = ?");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(api_job_row).transpose()
}

pub(super) async fn api_job_by_key(
    conn: &mut SqliteConnection,
    key: &str,
) -> Result<Option<ApiJob>> {
    let sql = format!("{API_JOB_SELECT} where idempotency_key = ?");
    let row = sqlx::query(&sql)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    row.as_ref().map(api_job_row).transpose()
}

/// Sets the state (and the cluster's job id, when given; it is kept otherwise).
pub(super) async fn update_api_job(
    conn: &mut SqliteConnection,
    id: i64,
    state: &str,
    cluster_job_id: Option<&str>,
    at: i64,
) -> Result<()> {
    let done = sqlx::query(
        "update api_jobs set state = ?, cluster_job_id = coalesce(?, cluster_job_id),
             updated_at = ?
         where id = ?",
    )
    .bind(state)
    .bind(cluster_job_id)
    .bind(at)
    .bind(id)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(LedgerError::not_found("job", id.to_string()));
    }
    Ok(())
}

/// The jobs of a user (`?1`, through `api_jobs_by_user`) or, for `None`, of everyone,
/// filtered by account (`?2`) when it is not null. (`?1 is null or user_name = ?1` in one
/// statement would read every job for each user's list.)
pub(super) fn api_jobs_sql(by_user: bool) -> String {
    let user = if by_user { "user_name = ?1 and " } else { "" };
    format!("{API_JOB_SELECT} where {user}(?2 is null or account = ?2) order by id")
}

/// Jobs by id, filtered by user and account when given.
pub(super) async fn api_jobs(
    conn: &mut SqliteConnection,
    user: Option<&str>,
    account: Option<&str>,
) -> Result<Vec<ApiJob>> {
    let sql = api_jobs_sql(user.is_some());
    let rows = sqlx::query(&sql)
        .bind(user)
        .bind(account)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(api_job_row).collect()
}

/// A page of jobs, newest first: a user's (`?1`, through `api_jobs_by_user`, walked backwards)
/// or everyone's, with the account (`?2`), the recorded state or `held` (`?3`) and an id below
/// `?4`, each when not null; at most `?5`.
pub(super) fn api_jobs_page_sql(by_user: bool) -> String {
    let user = if by_user { "user_name = ?1 and " } else { "" };
    format!(
        "{API_JOB_SELECT} where {user}(?2 is null or account = ?2)
           and (?3 is null or state = ?3 or state = 'held') and (?4 is null or id < ?4)
         order by id desc limit ?5"
    )
}

/// See [`api_jobs_page_sql`].
pub(super) async fn api_jobs_page(
    conn: &mut SqliteConnection,
    page: &ApiJobsPage,
) -> Result<Vec<ApiJob>> {
    let sql = api_jobs_page_sql(page.user.is_some());
    let rows = sqlx::query(&sql)
        .bind(page.user.as_deref())
        .bind(page.account.as_deref())
        .bind(page.state.as_deref())
        .bind(page.before)
        .bind(i64::from(page.limit))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(api_job_row).collect()
}

/// The jobs on a cluster (`?1`) with one of the cluster job ids in the JSON array `?2`,
/// through `api_jobs_by_cluster_job`.
pub(super) fn api_jobs_on_sql() -> String {
    format!(
        "{API_JOB_SELECT} where cluster = ?1
           and cluster_job_id in (select value from json_each(?2)) order by id"
    )
}

/// The jobs whose hold is one of the ids in the JSON array `?1`, through `api_jobs_by_hold`.
pub(super) fn api_jobs_holding_sql() -> String {
    format!(
        "{API_JOB_SELECT} where hold_id in (select value from json_each(?1))
           and hold_id is not null order by id"
    )
}

pub(super) async fn api_jobs_holding(
    conn: &mut SqliteConnection,
    hold_ids: &[i64],
) -> Result<Vec<ApiJob>> {
    if hold_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = super::json_ints(hold_ids.iter().copied());
    let rows = sqlx::query(&api_jobs_holding_sql())
        .bind(ids)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(api_job_row).collect()
}

/// Lists the record `(?2, ?3)` of the job `?1`'s cluster as a part of that job, moving it
/// from another job that listed it (migration 0017: parts are keyed by their cluster).
pub(super) const PART_SQL: &str = "insert into api_job_parts (cluster, api_job_id, job_id, submit)
     values ((select cluster from api_jobs where id = ?1), ?1, ?2, ?3)
     on conflict (cluster, job_id, submit) do update set api_job_id = ?1
     where api_job_id <> ?1";

pub(super) async fn record_job_parts(
    conn: &mut SqliteConnection,
    parts: &[JobPart],
) -> Result<u64> {
    let mut added = 0;
    for part in parts {
        added += sqlx::query(PART_SQL)
            .bind(part.api_job_id)
            .bind(&part.job_id)
            .bind(part.submit)
            .execute(&mut *conn)
            .await
            .map_err(db)?
            .rows_affected();
    }
    Ok(added)
}

/// The parts of the jobs in the JSON array `?1`, through `api_job_parts_by_job`.
pub(super) fn job_parts_sql() -> &'static str {
    "select api_job_id, job_id, submit from api_job_parts
     where api_job_id in (select value from json_each(?1))
     order by api_job_id, job_id, submit"
}

pub(super) async fn job_parts(
    conn: &mut SqliteConnection,
    api_job_ids: &[i64],
) -> Result<Vec<JobPart>> {
    let rows = sqlx::query(job_parts_sql())
        .bind(super::json_ints(api_job_ids.iter().copied()))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(JobPart {
                api_job_id: col(r, 0)?,
                job_id: col(r, 1)?,
                submit: col(r, 2)?,
            })
        })
        .collect()
}

/// The API jobs still `held` without a hold (an estimate of 0) whose latest record under the
/// id they are charged under (of those submitted since `?1` seconds before the job,
/// [`crate::model::SUBMIT_SKEW_SECS`]) ended them in a state after which Slurm may run them
/// again ([`crate::model::RERUN_STATES`]), or, for a job array cancelled before any task
/// started, in any state (as [`super::holds::to_confirm_sql`]); through `api_jobs_free_held` (migrations 0012, 0013) and
/// the jobs' unique key.
pub(super) fn free_jobs_to_confirm_sql() -> String {
    let select = API_JOB_SELECT.replacen(
        "from api_jobs",
        "from api_jobs a indexed by api_jobs_free_held",
        1,
    );
    format!(
        "{select} where a.state = 'held' and a.hold_id is null and a.cluster_job_id is not null
         and (select e.is_final = 1
                     and (st.value in ({states})
                          or (a.array_tasks is not null and j.display_id is null))
              from labels cl join jobs j on j.cluster_id = cl.id
              join journal e on e.id = j.entry_id join labels st on st.id = e.state_id
              where cl.value = a.cluster
                and j.job_id = coalesce(a.settle_ref, a.cluster_job_id)
                and j.submit >= a.submitted_at - ?1
              order by j.submit desc limit 1)
         order by a.id",
        states = crate::model::rerun_states_sql()
    )
}

/// Settles, at `?1`, the API jobs of a cluster (`?2`) that hold nothing and are still `held`,
/// whose usage is charged under one of the job ids of a JSON array of `[job id, submit time]`
/// pairs (`?3`: records that end their job, [`crate::UsageCharge::settles_hold`]), submitted
/// through bursar no later than `?4` seconds after the latest of their id's submit times
/// ([`crate::model::SUBMIT_SKEW_SECS`]: an older job under a reused id is not theirs);
/// through `api_jobs_free_held` (migration 0013), as holds are settled.
pub(super) const SETTLE_FREE_SQL: &str = "update api_jobs indexed by api_jobs_free_held
     set state = 'settled', updated_at = ?1
     where state = 'held' and hold_id is null and cluster_job_id is not null and cluster = ?2
       and array_tasks is null
       and coalesce(settle_ref, cluster_job_id) in
           (select json_extract(value, '$[0]') from json_each(?3))
       and submitted_at <= ?4 + (select max(json_extract(value, '$[1]')) from json_each(?3)
           where json_extract(value, '$[0]') = coalesce(api_jobs.settle_ref, api_jobs.cluster_job_id))";

/// Whether any job that holds nothing waits for its end (through `api_jobs_free_held`).
pub(super) async fn free_jobs_waiting(conn: &mut SqliteConnection) -> Result<bool> {
    sqlx::query_scalar(
        "select exists (select 1 from api_jobs indexed by api_jobs_free_held
             where state = 'held' and hold_id is null and cluster_job_id is not null)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db)
}

/// Settles the free jobs of `cluster` that `jobs` (`(job id, submit)` of records that end
/// their job) end ([`SETTLE_FREE_SQL`]); returns how many.
pub(super) async fn settle_free(
    conn: &mut SqliteConnection,
    cluster: &str,
    jobs: &[(&str, i64)],
    at: i64,
) -> Result<u64> {
    let query = sqlx::query(SETTLE_FREE_SQL).bind(at).bind(cluster);
    let done = super::journal::bind_job_submits(query, jobs)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(done.rows_affected())
}

/// Records a job that holds nothing `settled` at `at`, if it is still `held`.
pub(super) async fn settle_free_job(conn: &mut SqliteConnection, id: i64, at: i64) -> Result<bool> {
    let done = sqlx::query(
        "update api_jobs set state = 'settled', updated_at = ?
         where id = ? and state = 'held' and hold_id is null",
    )
    .bind(at)
    .bind(id)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn free_jobs_to_confirm(conn: &mut SqliteConnection) -> Result<Vec<ApiJob>> {
    let rows = sqlx::query(&free_jobs_to_confirm_sql())
        .bind(crate::model::SUBMIT_SKEW_SECS)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(api_job_row).collect()
}

/// The jobs on `cluster` known there by one of `cluster_job_ids`.
pub(super) async fn api_jobs_on(
    conn: &mut SqliteConnection,
    cluster: &str,
    cluster_job_ids: &[String],
) -> Result<Vec<ApiJob>> {
    if cluster_job_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = super::json_strings(cluster_job_ids.iter().map(String::as_str));
    let rows = sqlx::query(&api_jobs_on_sql())
        .bind(cluster)
        .bind(ids)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(api_job_row).collect()
}
