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
//!   `release` entry; the task that ends the last of them settles the hold. A job that holds
//!   nothing (an estimate of 0) is recorded `settled` then.
//! - The pending rest's record ending (the array cancelled on its cluster) counts the tasks it
//!   names as never running (`api_jobs.array_never_ran`, migration 0016): their shares are
//!   released at once, and the tasks that ran settle the hold as they end. slurmdbd may still
//!   name a task in the rest that started as the array was cancelled: a task seen with a
//!   record of its own (`api_job_tasks_seen`, migration 0018) is not counted, and the count is
//!   made again (from the rest's display id, `api_jobs.array_rest`) whenever another task
//!   record of the array comes. An array cancelled
//!   before any task started is logged as a plain job under its id: the gateway confirms with
//!   the cluster that nothing of it waits ([`super::holds::to_confirm_sql`]).
//! - Any record of the array (a task, or its pending rest) moves the hold's expiry a lifetime
//!   on, as a single job's record does ([`super::holds::extend`]).

use std::collections::{BTreeMap, BTreeSet};

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
const TASK_ENDED_REASON: &str = "released: tasks of the job array ended, or will never run";

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
     submitted_at, state, array_rest from api_jobs indexed by api_jobs_arrays \
     where array_tasks is not null and cluster = ?1 and cluster_job_id = ?2 \
     order by submitted_at desc, id desc";

#[derive(Clone)]
struct ArrayJob {
    id: i64,
    hold_id: Option<i64>,
    estimate: i64,
    tasks: i64,
    submitted_at: i64,
    held: bool,
    /// The display id of its pending rest, once that record ended (migration 0018).
    rest: Option<String>,
}

/// What the tasks of `batch` (already posted in this transaction) do to their arrays' jobs
/// and holds; see the module docs. Returns how many holds were settled.
pub(super) async fn post_tasks(
    conn: &mut SqliteConnection,
    batch: &[UsageCharge],
    at: i64,
) -> Result<u64> {
    // Records by (cluster, array), each with its task (`None`: the pending rest).
    type Records<'b> = Vec<(&'b UsageCharge, Option<&'b str>)>;
    let mut by_array: BTreeMap<(&str, &str), Records<'_>> = BTreeMap::new();
    for c in batch {
        if let Some((array, task)) = array_of(&c.display_id) {
            by_array
                .entry((c.cluster.as_str(), array))
                .or_default()
                .push((c, task));
        }
    }
    if by_array.is_empty() || !any_arrays(conn).await? {
        return Ok(0);
    }
    // Jobs whose tasks ended (or will never run) in this batch, and holds sighted.
    let mut changed: BTreeMap<i64, ArrayJob> = BTreeMap::new();
    let mut sighted: BTreeSet<i64> = BTreeSet::new();
    for ((cluster, array), records) in by_array {
        let jobs = array_jobs(conn, cluster, array).await?;
        if jobs.is_empty() {
            continue;
        }
        for (c, task) in records {
            let Some(job) = jobs
                .iter()
                .find(|j| j.submitted_at <= c.submit.saturating_add(SUBMIT_SKEW_SECS))
            else {
                continue;
            };
            match task {
                Some(task) => {
                    add_part(conn, job.id, &c.job_id, c.submit).await?;
                    see_task(conn, job.id, task).await?;
                    let ended =
                        job.held && c.settles_hold() && end_task(conn, job.id, task, at).await?;
                    // A task the ended rest may name: the tasks that never ran are counted again.
                    if ended || job.held && job.rest.is_some() {
                        changed.entry(job.id).or_insert_with(|| job.clone());
                    }
                }
                // The pending rest ended: the tasks it names never run, but for those with a
                // record of their own (counted below, once every record of the batch is a part).
                None if job.held && c.ends_job() => {
                    set_rest(conn, job.id, &c.display_id).await?;
                    let mut with_rest = job.clone();
                    with_rest.rest = Some(c.display_id.clone());
                    changed.insert(job.id, with_rest);
                }
                None => {}
            }
            if let (true, Some(hold)) = (job.held, job.hold_id) {
                sighted.insert(hold);
            }
        }
    }
    let mut settled = 0;
    for array in changed.values() {
        if let Some(rest) = &array.rest {
            count_never_ran(conn, array.id, rest).await?;
        }
        if release_tasks(conn, array, at).await? {
            settled += 1;
            if let Some(hold) = array.hold_id {
                sighted.remove(&hold);
            }
        }
    }
    for hold in sighted {
        super::holds::extend(conn, hold, at).await?;
    }
    Ok(settled)
}

/// Records the display id of the job's ended pending rest (written only when it changes: the
/// rest's record comes again with every pass that lists it).
async fn set_rest(conn: &mut SqliteConnection, job: i64, display_id: &str) -> Result<()> {
    sqlx::query("update api_jobs set array_rest = ?2 where id = ?1 and array_rest is not ?2")
        .bind(job)
        .bind(display_id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(())
}

/// Lists `task` (its display id) as seen with a record of its own.
async fn see_task(conn: &mut SqliteConnection, job: i64, task: &str) -> Result<()> {
    sqlx::query(
        "insert into api_job_tasks_seen (api_job_id, task) values (?1, ?2) on conflict do nothing",
    )
    .bind(job)
    .bind(task)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Counts the tasks the job's ended pending rest (`rest`) names that never ran: those it
/// names, less those seen with a record of their own (`api_job_tasks_seen`).
async fn count_never_ran(conn: &mut SqliteConnection, job: i64, rest: &str) -> Result<()> {
    let (Some(named), Some(names)) = (rest_count(rest), RestNames::parse(rest)) else {
        return Ok(());
    };
    let seen: Vec<String> =
        sqlx::query_scalar("select task from api_job_tasks_seen where api_job_id = ?1")
            .bind(job)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
    let ran: BTreeSet<u32> = seen
        .iter()
        .filter_map(|display| display.split_once('_')?.1.parse().ok())
        .filter(|index| names.contains(*index))
        .collect();
    let never_ran = named.saturating_sub(u32::try_from(ran.len()).unwrap_or(u32::MAX));
    set_never_ran(conn, job, never_ran).await?;
    Ok(())
}

/// The task index list of a pending rest's display id (`63_[5-9%2]` → `5-9`), without its
/// throttle; `None` when it is not one.
fn rest_list(display_id: &str) -> Option<&str> {
    let (_, rest) = display_id.split_once('_')?;
    let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.split_once('%').map_or(inner, |(list, _)| list))
}

/// The task indexes a pending rest names (see [`rest_count`]), read once.
pub(super) enum RestNames {
    /// 22.05's hex mask, one value per hex digit, task 0's first.
    Mask(Vec<u8>),
    /// `first-last:step` entries.
    Ranges(Vec<(u32, u32, u32)>),
}

impl RestNames {
    /// `None` when the display id is no pending rest that can be read.
    pub(super) fn parse(display_id: &str) -> Option<RestNames> {
        let inner = rest_list(display_id)?;
        if let Some(hex) = inner
            .strip_prefix("0x")
            .or_else(|| inner.strip_prefix("0X"))
        {
            // The mask's lowest bit is task 0, at the end of the text.
            let digits: Option<Vec<u8>> = hex
                .chars()
                .rev()
                .map(|c| c.to_digit(16).and_then(|d| u8::try_from(d).ok()))
                .collect();
            return digits.map(RestNames::Mask);
        }
        let mut ranges = Vec::new();
        for entry in inner.split(',') {
            let (range, step) = entry.split_once(':').unwrap_or((entry, "1"));
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            let (first, last, step) = (first.parse().ok()?, last.parse().ok()?, step.parse().ok()?);
            if step == 0 || last < first {
                return None;
            }
            ranges.push((first, last, step));
        }
        Some(RestNames::Ranges(ranges))
    }

    pub(super) fn contains(&self, index: u32) -> bool {
        match self {
            RestNames::Mask(digits) => usize::try_from(index / 4)
                .ok()
                .and_then(|at| digits.get(at))
                .is_some_and(|digit| digit & (1 << (index % 4)) != 0),
            RestNames::Ranges(ranges) => ranges.iter().any(|&(first, last, step)| {
                (first..=last).contains(&index) && (index - first).is_multiple_of(step)
            }),
        }
    }
}

/// How many task indexes the pending rest of a display id names: `63_[5-9%2]` (sacct,
/// slurmrestd 23.11+: ranges, steps, a throttle) or `63_[0x3E0]` (slurmrestd 22.05: a hex
/// mask); `None` when it cannot tell.
pub(super) fn rest_count(display_id: &str) -> Option<u32> {
    let inner = rest_list(display_id)?;
    if let Some(hex) = inner
        .strip_prefix("0x")
        .or_else(|| inner.strip_prefix("0X"))
    {
        let mut count = 0u32;
        for digit in hex.chars() {
            count = count.checked_add(digit.to_digit(16)?.count_ones())?;
        }
        return Some(count);
    }
    let mut count = 0u32;
    for entry in inner.split(',') {
        let (range, step) = entry.split_once(':').unwrap_or((entry, "1"));
        let step: u32 = step.parse().ok().filter(|s| *s > 0)?;
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
        if last < first {
            return None;
        }
        count = count.checked_add((last - first) / step + 1)?;
    }
    Some(count)
}

async fn array_jobs(
    conn: &mut SqliteConnection,
    cluster: &str,
    array: &str,
) -> Result<Vec<ArrayJob>> {
    type Row = (i64, Option<i64>, i64, i64, i64, String, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(ARRAY_JOBS_SQL)
        .bind(cluster)
        .bind(array)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    Ok(rows
        .into_iter()
        .map(
            |(id, hold_id, estimate, tasks, submitted_at, state, rest)| ArrayJob {
                id,
                hold_id,
                estimate,
                tasks,
                submitted_at,
                held: state == "held",
                rest,
            },
        )
        .collect())
}

/// Lists the record as a part of the job (moving it from another job that listed it).
async fn add_part(conn: &mut SqliteConnection, job: i64, job_id: &str, submit: i64) -> Result<()> {
    sqlx::query(super::gateway::PART_SQL)
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

/// Records that `count` of the job's tasks never run (migration 0016); `false` when it was
/// recorded so already.
async fn set_never_ran(conn: &mut SqliteConnection, job: i64, count: u32) -> Result<bool> {
    let done = sqlx::query(
        "update api_jobs set array_never_ran = ?2 where id = ?1 and array_never_ran <> ?2",
    )
    .bind(job)
    .bind(count)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected() > 0)
}

/// Brings the job's hold down to the shares of its tasks still to end (one task's share is
/// the job's estimate over its task count): the tasks that ended and those that never run
/// hold nothing. When none is left to end, settles the hold — or records a job that holds
/// nothing `settled`. Returns whether the job was settled.
async fn release_tasks(conn: &mut SqliteConnection, array: &ArrayJob, at: i64) -> Result<bool> {
    let job = array.id;
    let (ended, never_ran): (i64, i64) = sqlx::query_as(
        "select (select count(*) from api_job_tasks_ended where api_job_id = ?1),
                (select array_never_ran from api_jobs where id = ?1)",
    )
    .bind(job)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    let done = ended.saturating_add(never_ran).min(array.tasks);
    let all_done = done >= array.tasks;
    let Some(hold_id) = array.hold_id else {
        if all_done {
            super::gateway::settle_free_job(conn, job, at).await?;
        }
        return Ok(all_done);
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
    let keep = share
        .checked_mul(array.tasks - done)
        .ok_or_else(|| LedgerError::Overflow("an array's held shares".to_string()))?;
    if all_done || keep <= 0 {
        super::holds::close(conn, &[hold], "settled", ARRAY_SETTLED_REASON, at).await?;
        return Ok(true);
    }
    if hold.amount <= keep {
        return Ok(false);
    }
    let releasing = hold.amount - keep;
    let (tree, allocs) = load_context(conn, &[hold.account]).await?;
    let mut effects = Effects::new(&tree, &allocs);
    let part = crate::posting::OpenHold {
        amount: releasing,
        ..hold.clone()
    };
    let mut entries = release_entries(&[part], TASK_ENDED_REASON, &mut effects)?;
    for entry in &mut entries {
        // Unique per hold: the shares it keeps only ever shrink.
        entry.key = Some(format!("release:{}:{done}", hold.id));
    }
    let refs: Vec<_> = entries.iter().collect();
    insert_entries(conn, &refs, at).await?;
    write_effects(conn, &effects, at).await?;
    sqlx::query("update holds set amount = ? where id = ? and state = 'active'")
        .bind(keep)
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

    /// The pending rest names its tasks as sacct and slurmrestd 23.11+ write them, or as
    /// 22.05's slurmrestd dumps the bitmap (`0x3E0`: tasks 5 to 9).
    #[test]
    fn a_pending_rest_counts_the_tasks_it_names() {
        for (display, count) in [
            ("63_[2-3%1]", Some(2)),
            ("63_[5-9]", Some(5)),
            ("63_[0,2,4]", Some(3)),
            ("63_[0-10:5]", Some(3)),
            ("63_[7]", Some(1)),
            ("63_[0x3E0]", Some(5)),
            ("63_[0x3E0%2]", Some(5)),
            ("63_[9-5]", None),
            ("63_[a]", None),
            ("63_4", None),
            ("63", None),
        ] {
            assert_eq!(super::rest_count(display), count, "{display}");
        }
    }

    /// Which tasks a pending rest names, in every form [`rest_count`] reads; each form's
    /// named tasks are as many as it counts.
    #[test]
    fn a_pending_rest_names_its_tasks() {
        for (display, named) in [
            ("63_[1-3%1]", &[1, 2, 3][..]),
            ("63_[0,2,4]", &[0, 2, 4]),
            ("63_[0-10:5]", &[0, 5, 10]),
            ("63_[0x3E0]", &[5, 6, 7, 8, 9]),
            ("63_[0x3E0%2]", &[5, 6, 7, 8, 9]),
            ("63_[0x1]", &[0]),
            ("63_[4-2]", &[]),
            ("63_[a]", &[]),
            ("63_4", &[]),
        ] {
            let names = super::RestNames::parse(display);
            let found: Vec<u32> = (0..40)
                .filter(|i| names.as_ref().is_some_and(|n| n.contains(*i)))
                .collect();
            assert_eq!(found, named, "{display}");
            if let Some(count) = super::rest_count(display) {
                assert_eq!(usize::try_from(count).unwrap(), named.len(), "{display}");
            }
        }
    }
}
