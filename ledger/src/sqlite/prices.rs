//! Price-table versions kept in the ledger (`0003_price_tables.sql`).

use bursar_pricing::Currency;
use sqlx::sqlite::SqliteRow;
use sqlx::SqliteConnection;

use super::{col, db, gateway};
use crate::error::{LedgerError, Result};
use crate::model::{NewAudit, NewPriceTable, StoredPriceTable};

const COLUMNS: &str =
    "id, name, version, effective, currency, origin, row_count, content, imported_at, imported_by";

fn row(r: &SqliteRow) -> Result<StoredPriceTable> {
    Ok(StoredPriceTable {
        id: col(r, 0)?,
        name: col(r, 1)?,
        version: col(r, 2)?,
        effective: col(r, 3)?,
        currency: Currency::new(&col::<String>(r, 4)?),
        origin: col(r, 5)?,
        row_count: col(r, 6)?,
        content: col(r, 7)?,
        imported_at: col(r, 8)?,
        imported_by: col(r, 9)?,
    })
}

/// Stores `table` and writes `audit`, in the caller's transaction. The same (name, version)
/// with the same content is left alone (`Ok((false, stored))`, nothing audited); with other
/// content it is a conflict.
pub(super) async fn store(
    conn: &mut SqliteConnection,
    table: &NewPriceTable,
    audit: &NewAudit,
) -> Result<(bool, StoredPriceTable)> {
    let existing = sqlx::query(&format!(
        "select {COLUMNS} from price_tables where name = ? and version = ?"
    ))
    .bind(&table.name)
    .bind(&table.version)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    if let Some(existing) = existing {
        let existing = row(&existing)?;
        if existing.content == table.content {
            return Ok((false, existing));
        }
        return Err(LedgerError::Conflict(format!(
            "price table {}@{} is already stored with other content ({} by {}); \
             a changed price needs a new version",
            existing.name, existing.version, existing.origin, existing.imported_by
        )));
    }
    let stored = sqlx::query(&format!(
        "insert into price_tables (name, version, effective, currency, origin, row_count, \
         content, imported_at, imported_by) values (?, ?, ?, ?, ?, ?, ?, ?, ?) \
         returning {COLUMNS}"
    ))
    .bind(&table.name)
    .bind(&table.version)
    .bind(table.effective)
    .bind(table.currency.as_str())
    .bind(&table.origin)
    .bind(table.row_count)
    .bind(&table.content)
    .bind(table.imported_at)
    .bind(&table.imported_by)
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    gateway::audit(conn, audit).await?;
    Ok((true, row(&stored)?))
}

/// Every stored version, oldest first.
pub(super) async fn list(conn: &mut SqliteConnection) -> Result<Vec<StoredPriceTable>> {
    let rows = sqlx::query(&format!("select {COLUMNS} from price_tables order by id"))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    rows.iter().map(row).collect()
}

/// `(count, highest id)`: changes whenever a version is stored (the table is append-only).
pub(super) async fn stamp(conn: &mut SqliteConnection) -> Result<(i64, i64)> {
    let r = sqlx::query("select count(*), coalesce(max(id), 0) from price_tables")
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    Ok((col(&r, 0)?, col(&r, 1)?))
}
