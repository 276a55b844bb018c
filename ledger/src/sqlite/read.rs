//! Reads (balance snapshots, usage lines), verification, quarantine and cursors.

use std::collections::BTreeMap;

use bursar_pricing::Currency;
use rustc_hash::FxHashMap;
use sqlx::SqliteConnection;

use super::tree::{accounts, allocation_usage_from_journal, allocations};

use super::{col, db};
use crate::balances::{AccountTotal, BalanceSnapshot};
use crate::calendar::{self, SECONDS_PER_DAY};
use crate::error::{add, LedgerError, Result};
use crate::finance::{TopBy, TopRow};
use crate::model::{QuarantineItem, QuarantineRow};
use crate::report::{Bucket, UsageGrouping, UsageLine};
use crate::storage::UsageSource;

pub(super) async fn balance_snapshot(conn: &mut SqliteConnection) -> Result<BalanceSnapshot> {
    let accounts = accounts(conn).await?;
    let allocations = allocations(conn).await?;
    let rows = sqlx::query(
        "select a.name, c.value, t.charged, t.held from account_totals t
         join accounts a on a.id = t.account_id join labels c on c.id = t.currency_id
         order by a.name, c.value",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let totals = rows
        .iter()
        .map(|r| {
            Ok(AccountTotal {
                account: col(r, 0)?,
                currency: Currency::new(&col::<String>(r, 1)?),
                charged: col(r, 2)?,
                held: col(r, 3)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(BalanceSnapshot {
        accounts,
        allocations,
        totals,
    })
}

/// The start of the UTC day of `effective_at`, in SQL (`%` truncates toward zero).
const JOURNAL_DAY: &str = "(effective_at - ((effective_at % 86400) + 86400) % 86400)";

/// The CTE `days(d)`: every value of `effective_at / 86400` (SQLite's truncating division, as
/// in the `journal_by_day` index) of the times in `[?1, ?2)`, `?1 < ?2`. Joined with
/// `j.effective_at / 86400 = days.d`, it makes SQLite read a time range through the index.
pub(super) const JOURNAL_DAYS: &str =
    "days (d) as (select ?1 / 86400 union all select d + 1 from days where d < (?2 - 1) / 86400)";

/// One usage line by ids: account, currency, day, user, cluster, partition, QOS (the
/// ungrouped ones `None`).
type IdKey = (i64, i64, Option<i64>, [Option<i64>; 4]);

pub(super) async fn usage_lines(
    conn: &mut SqliteConnection,
    source: UsageSource,
    from: i64,
    to: i64,
    g: UsageGrouping,
) -> Result<Vec<UsageLine>> {
    let mut sums: FxHashMap<IdKey, (i64, i64)> = FxHashMap::default();
    match source {
        UsageSource::Journal => {
            journal_usage(conn, false, from, to, g, &mut sums).await?;
        }
        UsageSource::Rollup => rollup_usage(conn, from, to, g, &mut sums).await?,
        UsageSource::Indexed => {
            // Whole days from the rollup, the partial days at either end from the journal.
            let first_day = calendar::day_start(from);
            let first_day = if first_day < from {
                first_day + SECONDS_PER_DAY
            } else {
                first_day
            };
            let last_day = calendar::day_start(to);
            if first_day < last_day {
                if from < first_day {
                    journal_usage(conn, true, from, first_day, g, &mut sums).await?;
                }
                rollup_usage(conn, first_day, last_day, g, &mut sums).await?;
                if last_day < to {
                    journal_usage(conn, true, last_day, to, g, &mut sums).await?;
                }
            } else if from < to {
                journal_usage(conn, true, from, to, g, &mut sums).await?;
            }
        }
    }
    name_lines(conn, sums).await
}

/// `select account_id, currency_id, [period,] [user_id, cluster_id, partition_id, qos_id,]
/// sum(amount), sum(job_count)` over `table`, only the columns `g` groups by (what sqlx
/// copies per value dominates a large report), `day_expr` computing the UTC day and
/// [`period_sql`] merging days into `g.bucket` for `[from, to)`.
fn grouped_sql(
    g: UsageGrouping,
    table: &str,
    day_expr: &str,
    filter: &str,
    from: i64,
    to: i64,
) -> String {
    let period = period_sql(g.bucket, day_expr, from, to);
    let dims = [
        (g.day, period.as_str()),
        (g.user, "user_id"),
        (g.cluster, "cluster_id"),
        (g.partition, "partition_id"),
        (g.qos, "qos_id"),
    ];
    let mut select = vec!["account_id", "currency_id"];
    select.extend(dims.iter().filter(|(wanted, _)| *wanted).map(|(_, e)| *e));
    // A constant (a range inside one month) is no grouping, and SQLite would read an integer
    // in `group by` as a column number.
    let group: Vec<&str> = select
        .iter()
        .copied()
        .filter(|e| e.parse::<i64>().is_err())
        .collect();
    format!(
        "select {}, sum(amount), sum(job_count) from {table} where {filter} group by {}",
        select.join(", "),
        group.join(", ")
    )
}

/// SQL for the first day of the `bucket` period holding the day `day_expr` (epoch seconds
/// of 00:00 UTC), for days in `[from, to)`: the day itself, its ISO week's Monday, or its
/// month's first day (a `case` over the month starts of the range, computed here).
fn period_sql(bucket: Bucket, day_expr: &str, from: i64, to: i64) -> String {
    match bucket {
        Bucket::None | Bucket::Day => day_expr.to_string(),
        // Day number d = day / 86400 (exact); 1970-01-01 was a Thursday: Monday is
        // weekday 0 = (d + 3) mod 7, taken non-negative.
        Bucket::Week => format!("({day_expr} - ((({day_expr} / 86400 + 3) % 7 + 7) % 7) * 86400)"),
        Bucket::Month => {
            let mut starts = vec![Bucket::Month.start(from)];
            loop {
                let last = *starts.last().unwrap_or(&from);
                let next = calendar::add_months(last, 1);
                if next >= to || next <= last {
                    break;
                }
                starts.push(next);
            }
            if starts.len() == 1 {
                return starts[0].to_string();
            }
            let mut sql = String::from("(case");
            for pair in starts.windows(2) {
                sql.push_str(&format!(" when {day_expr} < {} then {}", pair[1], pair[0]));
            }
            sql.push_str(&format!(" else {} end)", starts[starts.len() - 1]));
            sql
        }
    }
}

/// Usage entries with `effective_at ∈ [from, to)`: a scan of the whole journal, or (`indexed`)
/// the range through the `journal_by_day` index, which reads only the entries in it.
async fn journal_usage(
    conn: &mut SqliteConnection,
    indexed: bool,
    from: i64,
    to: i64,
    g: UsageGrouping,
    sums: &mut FxHashMap<IdKey, (i64, i64)>,
) -> Result<()> {
    let filter = "type between 2 and 7 and effective_at >= ?1 and effective_at < ?2";
    let sql = if indexed {
        let inner = grouped_sql(
            g,
            "days cross join journal j indexed by journal_by_day",
            JOURNAL_DAY,
            "j.effective_at / 86400 = days.d and j.effective_at >= ?1 and j.effective_at < ?2
             and j.type between 2 and 7",
            from,
            to,
        );
        format!("with recursive {JOURNAL_DAYS} {inner}")
    } else {
        grouped_sql(g, "journal", JOURNAL_DAY, filter, from, to)
    };
    add_lines(conn, &sql, from, to, g, sums).await
}

/// Usage from the daily rollup for the days in `[from, to)` (`from` and `to` 00:00 UTC): the
/// per-account table when no user, cluster, partition or QOS is asked for.
async fn rollup_usage(
    conn: &mut SqliteConnection,
    from: i64,
    to: i64,
    g: UsageGrouping,
    sums: &mut FxHashMap<IdKey, (i64, i64)>,
) -> Result<()> {
    let table = if g.user || g.cluster || g.partition || g.qos {
        "usage_daily"
    } else {
        "usage_daily_accounts"
    };
    let sql = grouped_sql(g, table, "day", "day >= ?1 and day < ?2", from, to);
    add_lines(conn, &sql, from, to, g, sums).await
}

/// Runs a [`grouped_sql`] query and adds its lines to `sums` (days already merged into
/// `g.bucket`).
async fn add_lines(
    conn: &mut SqliteConnection,
    sql: &str,
    from: i64,
    to: i64,
    g: UsageGrouping,
    sums: &mut FxHashMap<IdKey, (i64, i64)>,
) -> Result<()> {
    let rows = sqlx::query(sql)
        .bind(from)
        .bind(to)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    for r in &rows {
        let mut i = 2;
        let mut next = |wanted: bool| -> Result<Option<i64>> {
            if !wanted {
                return Ok(None);
            }
            i += 1;
            col(r, i - 1).map(Some)
        };
        let day = next(g.day)?;
        let dims = [
            next(g.user)?,
            next(g.cluster)?,
            next(g.partition)?,
            next(g.qos)?,
        ];
        let key: IdKey = (col(r, 0)?, col(r, 1)?, day, dims);
        let sum = sums.entry(key).or_default();
        sum.0 = add(sum.0, col(r, i)?, "report amount")?;
        sum.1 = add(sum.1, col(r, i + 1)?, "report job count")?;
    }
    Ok(())
}

/// Names the lines' accounts and labels.
async fn name_lines(
    conn: &mut SqliteConnection,
    sums: FxHashMap<IdKey, (i64, i64)>,
) -> Result<Vec<UsageLine>> {
    if sums.is_empty() {
        return Ok(Vec::new());
    }
    let accounts: FxHashMap<i64, String> = sqlx::query_as("select id, name from accounts")
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?
        .into_iter()
        .collect();
    let labels: FxHashMap<i64, String> = sqlx::query_as("select id, value from labels")
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?
        .into_iter()
        .collect();
    let account = |id: i64| {
        accounts
            .get(&id)
            .cloned()
            .ok_or_else(|| LedgerError::Storage(format!("usage of unknown account id {id}")))
    };
    let label = |id: Option<i64>| -> Result<Option<String>> {
        id.map(|id| {
            labels
                .get(&id)
                .cloned()
                .ok_or_else(|| LedgerError::Storage(format!("usage with unknown label id {id}")))
        })
        .transpose()
    };
    sums.into_iter()
        .map(|((a, c, day, [u, cl, p, q]), (amount, job_count))| {
            Ok(UsageLine {
                account: account(a)?,
                currency: label(Some(c))?.unwrap_or_default(),
                day,
                user: label(u)?,
                cluster: label(cl)?,
                partition: label(p)?,
                qos: label(q)?,
                amount,
                job_count,
            })
        })
        .collect()
}

/// Compares two keyed sums, ignoring all-zero rows, and describes the differences.
fn compare<K: Ord + std::fmt::Debug, V: PartialEq + Default + std::fmt::Debug>(
    what: &str,
    stored: BTreeMap<K, V>,
    computed: BTreeMap<K, V>,
    problems: &mut Vec<String>,
) {
    let zero = V::default();
    for (key, value) in &stored {
        let expected = computed.get(key).unwrap_or(&zero);
        if value != expected {
            problems.push(format!(
                "{what} {key:?}: stored {value:?}, journal says {expected:?}"
            ));
        }
    }
    for (key, value) in &computed {
        if !stored.contains_key(key) && *value != zero {
            problems.push(format!("{what} {key:?}: missing, journal says {value:?}"));
        }
    }
}

async fn pairs(conn: &mut SqliteConnection, sql: &str) -> Result<BTreeMap<Vec<i64>, (i64, i64)>> {
    let rows = sqlx::query(sql).fetch_all(&mut *conn).await.map_err(db)?;
    let mut map = BTreeMap::new();
    for r in &rows {
        let width = sqlx::Row::len(r);
        let mut key = Vec::with_capacity(width - 2);
        for i in 0..width - 2 {
            key.push(col::<i64>(r, i)?);
        }
        let value = (col(r, width - 2)?, col(r, width - 1)?);
        if value != (0, 0) {
            map.insert(key, value);
        }
    }
    Ok(map)
}

/// id, account, currency, start, end, amount, charged, held.
type AllocationNumbers = (i64, i64, i64, i64, i64, i64, i64, i64);

pub(super) async fn verify(conn: &mut SqliteConnection) -> Result<Vec<String>> {
    let mut problems = Vec::new();

    let allocs: Vec<AllocationNumbers> = sqlx::query_as(
        "select id, account_id, currency_id, period_start, period_end, amount, charged, held
         from allocations order by id",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    for (id, account, currency, start, end, amount, charged, held) in allocs {
        let computed = allocation_usage_from_journal(conn, id).await?;
        if computed != (charged, held) {
            problems.push(format!(
                "allocation {id}: stored charged {charged} held {held}, journal says {computed:?}"
            ));
        }
        let deposits: i64 = sqlx::query_scalar(
            "select coalesce(sum(amount), 0) from journal
             where type = 1 and account_id = ? and currency_id = ?
               and effective_at >= ? and effective_at < ?",
        )
        .bind(account)
        .bind(currency)
        .bind(start)
        .bind(end)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        if deposits != amount {
            problems.push(format!(
                "allocation {id}: amount {amount} but deposits sum to {deposits}"
            ));
        }
    }

    let stored = pairs(
        conn,
        "select account_id, currency_id, charged, held from account_totals",
    )
    .await?;
    let computed = pairs(
        conn,
        "select account_id, currency_id,
             coalesce(sum(case when type between 2 and 7 then amount end), 0),
             coalesce(sum(case when type in (8, 9) then amount end), 0)
         from journal where type > 1 group by account_id, currency_id",
    )
    .await?;
    compare("account total", stored, computed, &mut problems);

    let stored = pairs(
        conn,
        "select day, account_id, currency_id, user_id, cluster_id, partition_id, qos_id,
             amount, job_count
         from usage_daily",
    )
    .await?;
    let computed = pairs(
        conn,
        &format!(
            "select {JOURNAL_DAY} as d, account_id, currency_id, user_id, cluster_id,
                 partition_id, qos_id, sum(amount), sum(job_count)
             from journal where type between 2 and 7
             group by d, account_id, currency_id, user_id, cluster_id, partition_id, qos_id"
        ),
    )
    .await?;
    compare("daily usage", stored, computed, &mut problems);

    let stored = pairs(
        conn,
        "select day, account_id, currency_id, amount, job_count from usage_daily_accounts",
    )
    .await?;
    let computed = pairs(
        conn,
        &format!(
            "select {JOURNAL_DAY} as d, account_id, currency_id, sum(amount), sum(job_count)
             from journal where type between 2 and 7 group by d, account_id, currency_id"
        ),
    )
    .await?;
    compare("daily account usage", stored, computed, &mut problems);

    let stored = pairs(conn, "select id, amount, 1 from jobs").await?;
    let computed = pairs(
        conn,
        "select job, sum(amount), 1 from journal where job is not null group by job",
    )
    .await?;
    compare("job", stored, computed, &mut problems);
    let misplaced: Vec<i64> = sqlx::query_scalar(
        "select jb.id from jobs jb where jb.entry_id <>
             (select max(e.id) from journal e where e.job = jb.id)",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    for job in misplaced {
        problems.push(format!(
            "job {job}: entry_id is not its latest journal entry"
        ));
    }

    let stored = pairs(
        conn,
        "select account_id, currency_id, sum(amount), 0 from holds where state = 'active'
         group by account_id, currency_id",
    )
    .await?;
    let computed = pairs(
        conn,
        "select account_id, currency_id, sum(amount), 0 from journal
         where type in (8, 9) group by account_id, currency_id",
    )
    .await?;
    compare("active holds", stored, computed, &mut problems);

    Ok(problems)
}

pub(super) async fn quarantine_add(
    conn: &mut SqliteConnection,
    items: &[QuarantineItem],
    now: i64,
) -> Result<u64> {
    let mut added = 0;
    for item in items {
        let line = item.line.map(i64::try_from).transpose().map_err(|_| {
            LedgerError::Invalid(format!("line number {:?} is too large", item.line))
        })?;
        let done = sqlx::query(
            "insert into quarantine (source, line, reason, raw, first_seen) values (?, ?, ?, ?, ?)
             on conflict do nothing",
        )
        .bind(&item.source)
        .bind(line)
        .bind(&item.reason)
        .bind(&item.raw)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        added += done.rows_affected();
    }
    Ok(added)
}

pub(super) async fn quarantine_list(conn: &mut SqliteConnection) -> Result<Vec<QuarantineRow>> {
    let rows =
        sqlx::query("select id, source, line, reason, raw, first_seen from quarantine order by id")
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(QuarantineRow {
                id: col(r, 0)?,
                source: col(r, 1)?,
                line: col::<Option<i64>>(r, 2)?.and_then(|l| u64::try_from(l).ok()),
                reason: col(r, 3)?,
                raw: col(r, 4)?,
                first_seen: col(r, 5)?,
            })
        })
        .collect()
}

pub(super) async fn get_cursor(
    conn: &mut SqliteConnection,
    cluster: &str,
) -> Result<Option<String>> {
    sqlx::query_scalar("select value from cursors where cluster = ?")
        .bind(cluster)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}

pub(super) async fn set_cursor(
    conn: &mut SqliteConnection,
    cluster: &str,
    value: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "insert into cursors (cluster, value, updated_at) values (?, ?, ?)
         on conflict (cluster) do update set value = excluded.value, updated_at = excluded.updated_at",
    )
    .bind(cluster)
    .bind(value)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// The ranking of [`crate::finance::top`] in SQL: the period's usage entries through the
/// `journal_by_day` index summed per currency and user (and job), ranked per currency by
/// amount, then user, cluster and job id; only the first `limit` of each leave the database.
pub(super) async fn top(
    conn: &mut SqliteConnection,
    by: TopBy,
    from: i64,
    to: i64,
    currency: Option<&Currency>,
    limit: usize,
) -> Result<Vec<TopRow>> {
    if from >= to || limit == 0 {
        return Ok(Vec::new());
    }
    // The index has no user or job: each entry it finds costs a lookup in the table. Over
    // much of the journal's time a plain scan of the table is cheaper.
    let (first_day, last_day): (Option<i64>, Option<i64>) = sqlx::query_as(
        "select (select min(effective_at / 86400) from journal indexed by journal_by_day),
                (select max(effective_at / 86400) from journal indexed by journal_by_day)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    let (Some(first_day), Some(last_day)) = (first_day, last_day) else {
        return Ok(Vec::new());
    };
    let journal_days = last_day - first_day + 1;
    let range_days =
        (to / SECONDS_PER_DAY).min(last_day + 1) - (from / SECONDS_PER_DAY).max(first_day);
    let range = if range_days.saturating_mul(4) > journal_days {
        "from journal j where j.effective_at >= ?1 and j.effective_at < ?2
           and j.type between 2 and 7"
    } else {
        "from days cross join journal j indexed by journal_by_day
         where j.effective_at / 86400 = days.d and j.effective_at >= ?1
           and j.effective_at < ?2 and j.type between 2 and 7"
    };
    // A job's account is that of its latest entry (a repost moves it): SQLite takes a bare
    // column from the row of the query's only max().
    let sql = match by {
        TopBy::User => format!(
            "with recursive {JOURNAL_DAYS},
             sums (currency_id, user_id, amount, jobs) as (
                 select j.currency_id, j.user_id, sum(j.amount), sum(j.job_count) {range}
                 group by j.currency_id, j.user_id
             ),
             ranked as (
                 select s.*, rank() over (partition by s.currency_id order by s.amount desc)
                     as r
                 from sums s
                 where s.user_id <> 0 and not (s.amount = 0 and s.jobs = 0)
                   and (?3 is null or s.currency_id = (select id from labels where value = ?3))
             )
             select cur.value, u.value, null, null, null, null, s.amount, s.jobs
             from ranked s join labels cur on cur.id = s.currency_id
             join labels u on u.id = s.user_id
             where s.r <= ?4"
        ),
        TopBy::Job => format!(
            "with recursive {JOURNAL_DAYS},
             sums (currency_id, user_id, job, amount, jobs, last_id, account_id) as (
                 select j.currency_id, j.user_id, j.job, sum(j.amount), sum(j.job_count),
                        max(j.id), j.account_id {range} and j.job is not null
                 group by j.currency_id, j.user_id, j.job
             ),
             ranked as (
                 select s.*, rank() over (partition by s.currency_id order by s.amount desc)
                     as r
                 from sums s
                 where s.user_id <> 0 and not (s.amount = 0 and s.jobs = 0)
                   and (?3 is null or s.currency_id = (select id from labels where value = ?3))
             )
             select cur.value, u.value, cl.value, jb.job_id,
                    coalesce(jb.display_id, jb.job_id), a.name, s.amount, s.jobs
             from ranked s join labels cur on cur.id = s.currency_id
             join labels u on u.id = s.user_id
             join jobs jb on jb.id = s.job
             join labels cl on cl.id = jb.cluster_id
             join accounts a on a.id = s.account_id
             where s.r <= ?4"
        ),
    };
    let rows = sqlx::query(&sql)
        .bind(from)
        .bind(to)
        .bind(currency.map(Currency::as_str))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    // `rank()` keeps every row tied at the limit; the names break the ties.
    let mut ranked = rows
        .iter()
        .map(|row| {
            Ok(TopRow {
                currency: Currency::new(&col::<String>(row, 0)?),
                user: col(row, 1)?,
                cluster: col(row, 2)?,
                job_id: col(row, 3)?,
                display_id: col(row, 4)?,
                account: col(row, 5)?,
                amount: col(row, 6)?,
                jobs: col(row, 7)?,
            })
        })
        .collect::<Result<Vec<TopRow>>>()?;
    ranked.sort_by(|a, b| {
        a.currency
            .as_str()
            .cmp(b.currency.as_str())
            .then_with(|| b.amount.cmp(&a.amount))
            .then_with(|| a.user.cmp(&b.user))
            .then_with(|| a.cluster.cmp(&b.cluster))
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    let mut per_currency: BTreeMap<String, usize> = BTreeMap::new();
    ranked.retain(|r| {
        let n = per_currency
            .entry(r.currency.as_str().to_string())
            .or_default();
        *n += 1;
        *n <= limit
    });
    Ok(ranked)
}
