//! Reads (balance snapshots, usage lines), verification, quarantine and cursors.

use std::collections::BTreeMap;

use bursar_pricing::Currency;
use sqlx::SqliteConnection;

use super::tree::{accounts, allocation_usage_from_journal, allocations};

use super::{col, db};
use crate::balances::{AccountTotal, BalanceSnapshot};
use crate::error::{LedgerError, Result};
use crate::model::{QuarantineItem, QuarantineRow};
use crate::report::{UsageGrouping, UsageLine};
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

pub(super) async fn usage_lines(
    conn: &mut SqliteConnection,
    source: UsageSource,
    from: i64,
    to: i64,
    g: UsageGrouping,
) -> Result<Vec<UsageLine>> {
    let (table, filter, day) = match source {
        UsageSource::Journal => (
            "journal",
            "type between 2 and 7 and effective_at >= ?1 and effective_at < ?2",
            JOURNAL_DAY,
        ),
        UsageSource::Rollup => ("usage_daily", "day >= ?1 and day < ?2", "day"),
    };
    // Group by ids, then name the groups.
    let dims = [
        (g.day, day, "day"),
        (g.user, "user_id", "user_id"),
        (g.cluster, "cluster_id", "cluster_id"),
        (g.partition, "partition_id", "partition_id"),
        (g.qos, "qos_id", "qos_id"),
    ];
    let mut select = vec!["account_id".to_string(), "currency_id".to_string()];
    let mut group = select.clone();
    for (wanted, expr, alias) in dims {
        if wanted {
            select.push(format!("{expr} as {alias}"));
            group.push(expr.to_string());
        } else {
            select.push(format!("null as {alias}"));
        }
    }
    let sql = format!(
        "select a.name, c.value, g.day, u.value, cl.value, p.value, q.value, g.amount, g.jobs
         from (
             select {}, sum(amount) as amount, sum(job_count) as jobs
             from {table} where {filter} group by {}
         ) g
         join accounts a on a.id = g.account_id
         join labels c on c.id = g.currency_id
         left join labels u on u.id = g.user_id
         left join labels cl on cl.id = g.cluster_id
         left join labels p on p.id = g.partition_id
         left join labels q on q.id = g.qos_id",
        select.join(", "),
        group.join(", ")
    );
    let rows = sqlx::query(&sql)
        .bind(from)
        .bind(to)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| {
            Ok(UsageLine {
                account: col(r, 0)?,
                currency: col(r, 1)?,
                day: col(r, 2)?,
                user: col(r, 3)?,
                cluster: col(r, 4)?,
                partition: col(r, 5)?,
                qos: col(r, 6)?,
                amount: col(r, 7)?,
                job_count: col(r, 8)?,
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
