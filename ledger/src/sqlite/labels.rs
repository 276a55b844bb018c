//! Interned strings: every repeated string of the hot tables (currency, cluster, user,
//! partition, qos, state, price version) is stored once in `labels` and referenced by id.
//! Label 0 is `''`, meaning "none". Labels are never changed or deleted.

use rustc_hash::FxHashMap;
use sqlx::SqliteConnection;

use super::{col, db, placeholders, value_rows, MAX_PARAMS};
use crate::error::{LedgerError, Result};
use crate::materialize::Id;

/// The ids of `values` (distinct), creating the labels that don't exist yet.
pub(super) async fn intern<'a>(
    conn: &mut SqliteConnection,
    values: &[&'a str],
) -> Result<FxHashMap<&'a str, Id>> {
    let mut ids: FxHashMap<&'a str, Id> = FxHashMap::default();
    ids.reserve(values.len());
    for chunk in values.chunks(MAX_PARAMS) {
        let sql = format!(
            "select value, id from labels where value in ({})",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for v in chunk {
            query = query.bind(*v);
        }
        let rows = query.fetch_all(&mut *conn).await.map_err(db)?;
        let found: FxHashMap<String, Id> = rows
            .iter()
            .map(|r| Ok((col::<String>(r, 0)?, col::<Id>(r, 1)?)))
            .collect::<Result<_>>()?;
        for v in chunk {
            if let Some(&id) = found.get(*v) {
                ids.insert(v, id);
            }
        }
    }
    let missing: Vec<&'a str> = values
        .iter()
        .copied()
        .filter(|v| !ids.contains_key(v))
        .collect();
    for chunk in missing.chunks(MAX_PARAMS) {
        let sql = format!(
            "insert into labels (value) values {} returning value, id",
            value_rows(chunk.len(), 1)
        );
        let mut query = sqlx::query(&sql).persistent(false);
        for v in chunk {
            query = query.bind(*v);
        }
        let rows = query.fetch_all(&mut *conn).await.map_err(db)?;
        let created: FxHashMap<String, Id> = rows
            .iter()
            .map(|r| Ok((col::<String>(r, 0)?, col::<Id>(r, 1)?)))
            .collect::<Result<_>>()?;
        for v in chunk {
            let id = created
                .get(*v)
                .copied()
                .ok_or_else(|| LedgerError::Storage(format!("label {v:?} was not created")))?;
            ids.insert(v, id);
        }
    }
    Ok(ids)
}

/// The id of one label, creating it if needed.
pub(super) async fn intern_one(conn: &mut SqliteConnection, value: &str) -> Result<Id> {
    let ids = intern(conn, &[value]).await?;
    ids.get(value)
        .copied()
        .ok_or_else(|| LedgerError::Storage(format!("label {value:?} was not created")))
}

/// The id of a label if it exists.
pub(super) async fn find(conn: &mut SqliteConnection, value: &str) -> Result<Option<Id>> {
    sqlx::query_scalar("select id from labels where value = ?")
        .bind(value)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)
}
