//! Alerts fired on allocations and their delivery (`0004_alerts.sql`).

use bursar_pricing::Currency;
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::{col, db};
use crate::alerts::{AlertRow, NewAlert};
use crate::error::Result;

fn alert_row(row: &SqliteRow) -> Result<AlertRow> {
    let kind: String = col(row, 6)?;
    Ok(AlertRow {
        id: col(row, 0)?,
        allocation_id: col(row, 1)?,
        account: col(row, 2)?,
        currency: Currency::new(&col::<String>(row, 3)?),
        period: (col(row, 4)?, col(row, 5)?),
        kind: kind.parse()?,
        fired_at: col(row, 7)?,
        allocated: col(row, 8)?,
        charged: col(row, 9)?,
        held: col(row, 10)?,
        rate_per_day: col(row, 11)?,
        exhaustion: col(row, 12)?,
        rearmed_at: col(row, 13)?,
        delivered_at: col(row, 14)?,
        delivered_via: col(row, 15)?,
        attempts: col(row, 16)?,
        last_error: col(row, 17)?,
    })
}

/// Every alert, by id.
pub(super) async fn list(conn: &mut SqliteConnection) -> Result<Vec<AlertRow>> {
    let rows = sqlx::query(
        "select al.id, al.allocation_id, a.name, c.value, x.period_start, x.period_end, al.kind,
                al.fired_at, al.allocated, al.charged, al.held, al.rate_per_day, al.exhaustion,
                al.rearmed_at, al.delivered_at, al.delivered_via, al.attempts, al.last_error
         from alerts al
         join allocations x on x.id = al.allocation_id
         join accounts a on a.id = x.account_id
         join labels c on c.id = x.currency_id
         order by al.id",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    rows.iter().map(alert_row).collect()
}

/// Re-arms `rearm` (those still open) and inserts `fire` unless an alert of the same
/// allocation and kind is open; returns the ids inserted.
pub(super) async fn record(
    conn: &mut SqliteConnection,
    fire: &[NewAlert],
    rearm: &[i64],
    now: i64,
) -> Result<Vec<i64>> {
    for id in rearm {
        sqlx::query("update alerts set rearmed_at = ? where id = ? and rearmed_at is null")
            .bind(now)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    let mut ids = Vec::with_capacity(fire.len());
    for a in fire {
        let id: Option<i64> = sqlx::query_scalar(
            "insert into alerts (allocation_id, kind, fired_at, allocated, charged, held,
                 rate_per_day, exhaustion)
             values (?, ?, ?, ?, ?, ?, ?, ?)
             on conflict do nothing returning id",
        )
        .bind(a.allocation_id)
        .bind(a.kind.to_string())
        .bind(a.fired_at)
        .bind(a.allocated)
        .bind(a.charged)
        .bind(a.held)
        .bind(a.rate_per_day)
        .bind(a.exhaustion)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
        ids.extend(id);
    }
    Ok(ids)
}

/// Takes a pending alert for delivery until `until`; `false` when delivered or taken.
pub(super) async fn claim(
    conn: &mut SqliteConnection,
    id: i64,
    now: i64,
    until: i64,
) -> Result<bool> {
    let done = sqlx::query(
        "update alerts set claimed_until = ?
         where id = ? and delivered_at is null and (claimed_until is null or claimed_until <= ?)",
    )
    .bind(until)
    .bind(id)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(done.rows_affected() == 1)
}

/// Records a delivery's outcome. A success is recorded once (a later one changes nothing).
pub(super) async fn finish(
    conn: &mut SqliteConnection,
    id: i64,
    outcome: std::result::Result<&str, &str>,
    at: i64,
) -> Result<()> {
    match outcome {
        Ok(via) => sqlx::query(
            "update alerts set delivered_at = ?, delivered_via = ?, claimed_until = null
             where id = ? and delivered_at is null",
        )
        .bind(at)
        .bind(via)
        .bind(id),
        Err(message) => sqlx::query(
            "update alerts set attempts = attempts + 1, last_error = ?, claimed_until = null
             where id = ? and delivered_at is null",
        )
        .bind(message)
        .bind(id),
    }
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}
