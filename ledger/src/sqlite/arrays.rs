//! Job arrays submitted through the API (migration 0015): one API job and one hold for the
//! whole array, settled task by task as the tasks' records are posted.
//!
//! A task's record carries the task's raw id and its display id `ARRAY_TASK` (`63_4`); the
//! array's pending rest is one record `63_[5-9%2]` under the array's id, which is also the
//! raw id of the task that starts last. The array's job is found by its cluster and the
//! array's id (`cluster_job_id`), submitted no later than [`SUBMIT_SKEW_SECS`] after the
//! record's job: an older array under a reused id is not its.
//!
//! - Every task record becomes a part of the job (`api_job_parts`): the job's charge is what
//!   its tasks cost, whatever becomes of its hold.
//! - A task that ends in a state after which Slurm does not run it again
//!   ([`crate::UsageCharge::settles_hold`]) is listed in `api_job_tasks_ended` once, and
//!   releases one task's share of the hold (the job's estimate over its task count) with a
//!   `release` entry of its own; the task that ends the last of them settles the hold. A job
//!   that holds nothing (an estimate of 0) is recorded `settled` then.
//! - Any record of the array (a task, or its pending rest) moves the hold's expiry a lifetime
//!   on, as a single job's record does ([`super::holds::extend`]).

use std::collections::BTreeMap;

use sqlx::SqliteConnection;

use super::db;
use super::journal::{insert_entries, open_hold, write_effects, OPEN_HOLD_SELECT};
use super::tree::load_context;
use crate::error::{LedgerError, Result};
use crate::materialize::Effects;
use crate::model::{UsageCharge, SUBMIT_SKEW_SECS};
use crate::posting::release_entries;

/// Why an array's hold is settled, and why each of its tasks released a share of it.
pub(super) const ARRAY_SETTLED_REASON: &str = "settled: every task of the job array ended";
const TASK_ENDED_REASON: &str = "released: one task of the job array ended";

/// The array a record belongs to, from its display id: `("63", Some("63_4"))` for a task,
/// `("63", None)` for the array's pending rest (`63_[5-9%2]`), `None` for any other job.
pub(super) fn array_of(display_id: &str) -> Option<(&str, Option<&str>)> {
    let (array, task) = display_id.split_once('_')?;
    if array.is_empty() || !array.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !task.is_empty() && task.bytes().all(|b| b.is_ascii_digit()) {
        Some((array, Some(display_id)))
    } else if task.starts_with('[') && task.ends_with(']') {
        Some((array, None))
    } else {
        None
    }
}

/// Whether any array was ever submitted through the API (through `api_jobs_arrays`): most
/// ledgers never had one, and most batches need no lookup.
async fn any_arrays(conn: &mut SqliteConnection) -> Result<bool> {
    sqlx::query_scalar(
        "select exists (select 1 from api_jobs indexed by api_jobs_arrays
             where array_tasks is not null)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db)
}

/// The array jobs of a cluster (`?1`) known there by the id `?2`, newest first.
pub(super) const ARRAY_JOBS_SQL: &str = "select id, hold_id, estimate, array_tasks, \
     submitted_at, state from api_jobs indexed by api_jobs_arrays \
     where array_tasks is not null and cluster = ?1 and cluster_job_id = ?2 \
     order by submitted_at desc, id desc";

struct ArrayJob {
    id: i64,
    hold_id: Option<i64>,
    estimate: i64,
    tasks: i64,
    submitted_at: i64,
    held: bool,
}

/// What the tasks of `batch` (already posted in this transaction) do to their arrays' jobs
/// and holds; see the module docs. Returns how many holds were settled.
pub(super) async fn post_tasks(
    conn: &mut SqliteConnection,
    batch: &[UsageCharge],
    at: i64,
) -> Result<u64> {
    let mut by_array: BTreeMap<(&str, &str), Vec<&UsageCharge>> = BTreeMap::new();
    for c in batch {
        if let Some((array, _)) = array_of(&c.display_id) {
            by_array
                .entry((c.cluster.as_str(), array))
                .or_default()
                .push(c);
        }
    }
    if by_array.is_empty() || !any_arrays(conn).await? {
        return Ok(0);
    }
    // Tasks newly ended and holds sighted, by job.
    let mut ended: BTreeMap<i64, (ArrayJobRef, Vec<String>)> = BTreeMap::new();
    let mut sighted: BTreeMap<i64, i64> = BTreeMap::new();
    for ((cluster, array), records) in by_array {
        let jobs = array_jobs(conn, cluster, array).await?;
        if jobs.is_empty() {
            continue;
        }
        for c in records {
            let Some(job) = jobs
                .iter()
                .find(|j| j.submitted_at <= c.submit.saturating_add(SUBMIT_SKEW_SECS))
            else {
                continue;
            };
            let task = array_of(&c.display_id).and_then(|(_, task)| task);
            if let Some(task) = task {
                add_part(conn, job.id, &c.job_id, c.submit).await?;
                if job.held && c.settles_hold() && end_task(conn, job.id, task, at).await? {
                    ended
                        .entry(job.id)
                        .or_insert_with(|| (ArrayJobRef::of(job), Vec::new()))
                        .1
                        .push(task.to_string());
                }
            }
            if let (true, Some(hold)) = (job.held, job.hold_id) {
                sighted.insert(hold, job.id);
            }
        }
    }
    let mut settled = 0;
    for (job, (array, tasks)) in ended {
        if release_tasks(conn, job, &array, &tasks, at).await? {
            settled += 1;
            if let Some(hold) = array.hold_id {
                sighted.remove(&hold);
            }
        }
    }
    for hold in sighted.keys() {
        super::holds::extend(conn, *hold, at).await?;
    }
    Ok(settled)
}

/// What [`release_tasks`] needs of an array's job.
struct ArrayJobRef {
    hold_id: Option<i64>,
    estimate: i64,
    tasks: i64,
}

impl ArrayJobRef {
    fn of(job: &ArrayJob) -> Self {
        Self {
            hold_id: job.hold_id,
            estimate: job.estimate,
            tasks: job.tasks,
        }
    }
}

async fn array_jobs(
    conn: &mut SqliteConnection,
    cluster: &str,
    array: &str,
) -> Result<Vec<ArrayJob>> {
    let rows: Vec<(i64, Option<i64>, i64, i64, i64, String)> = sqlx::query_as(ARRAY_JOBS_SQL)
        .bind(cluster)
        .bind(array)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    Ok(rows
        .into_iter()
        .map(
            |(id, hold_id, estimate, tasks, submitted_at, state)| ArrayJob {
                id,
                hold_id,
                estimate,
                tasks,
                submitted_at,
                held: state == "held",
            },
        )
        .collect())
}

/// Lists the record as a part of the job (moving it from another job that listed it).
async fn add_part(conn: &mut SqliteConnection, job: i64, job_id: &str, submit: i64) -> Result<()> {
    sqlx::query(
        "insert into api_job_parts (api_job_id, job_id, submit) values (?1, ?2, ?3)
         on conflict (job_id, submit) do update set api_job_id = ?1 where api_job_id <> ?1",
    )
    .bind(job)
    .bind(job_id)
    .bind(submit)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Lists `task` of the job as ended; `false` when it was already.
async fn end_task(conn: &mut SqliteConnection, job: i64, task: &str, at: i64) -> Result<bool> {
    let done = sqlx::query(
        "insert into api_job_tasks_ended (api_job_id, task, ended_at) values (?1, ?2, ?3)
         on conflict do nothing",
    )
    .bind(job)
    .bind(task)
    .bind(at)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected() > 0)
}

/// Releases one task's share of the job's hold for each of `tasks` (just ended), or settles
/// the hold — or records a job that holds nothing `settled` — when every task has ended.
/// Returns whether the job was settled.
async fn release_tasks(
    conn: &mut SqliteConnection,
    job: i64,
    array: &ArrayJobRef,
    tasks: &[String],
    at: i64,
) -> Result<bool> {
    let ended: i64 =
        sqlx::query_scalar("select count(*) from api_job_tasks_ended where api_job_id = ?")
            .bind(job)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
    let all_ended = ended >= array.tasks;
    let Some(hold_id) = array.hold_id else {
        if all_ended {
            super::gateway::settle_free_job(conn, job, at).await?;
        }
        return Ok(all_ended);
    };
    let sql = format!("{OPEN_HOLD_SELECT} where id = ? and state = 'active'");
    let row = sqlx::query(&sql)
        .bind(hold_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    let Some(hold) = row.as_ref().map(open_hold).transpose()? else {
        return Ok(false);
    };
    let share = array.estimate / array.tasks.max(1);
    let releasing = share
        .checked_mul(i64::try_from(tasks.len()).unwrap_or(i64::MAX))
        .ok_or_else(|| LedgerError::Overflow("an array's released share".to_string()))?;
    if all_ended || releasing >= hold.amount {
        super::holds::close(conn, &[hold], "settled", ARRAY_SETTLED_REASON, at).await?;
        return Ok(true);
    }
    if share == 0 {
        return Ok(false);
    }
    let (tree, allocs) = load_context(conn, &[hold.account]).await?;
    let mut effects = Effects::new(&tree, &allocs);
    let mut entries = Vec::with_capacity(tasks.len());
    for task in tasks {
        let part = crate::posting::OpenHold {
            amount: share,
            ..hold.clone()
        };
        let mut released = release_entries(&[part], TASK_ENDED_REASON, &mut effects)?;
        for entry in &mut released {
            entry.key = Some(format!("release:{}:{task}", hold.id));
        }
        entries.extend(released);
    }
    let refs: Vec<_> = entries.iter().collect();
    insert_entries(conn, &refs, at).await?;
    write_effects(conn, &effects, at).await?;
    sqlx::query("update holds set amount = amount - ? where id = ? and state = 'active'")
        .bind(releasing)
        .bind(hold.id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::array_of;

    #[test]
    fn tasks_and_pending_rests_name_their_array() {
        assert_eq!(array_of("63_4"), Some(("63", Some("63_4"))));
        assert_eq!(array_of("63_[5-9%2]"), Some(("63", None)));
        assert_eq!(array_of("63_[5,7]"), Some(("63", None)));
        for other in ["63", "63+1", "_4", "a_4", "63_", "63_x", "63_4_5", "63_[5"] {
            assert_eq!(array_of(other), None, "{other}");
        }
    }
}
