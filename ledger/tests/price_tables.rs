//! Price-table versions kept in the ledger: stored once with their audit entry, identical
//! re-stores change nothing, a changed table under the same version is refused, and nothing
//! stored can be changed or deleted afterwards.

mod common;

use bursar_ledger::{LedgerError, NewAudit, NewPriceTable};
use common::{temp_ledger, usd, T0};

fn table(version: &str, content: &str) -> NewPriceTable {
    NewPriceTable {
        name: "aws-ec2".to_string(),
        version: version.to_string(),
        effective: T0,
        currency: usd(),
        origin: "aws".to_string(),
        row_count: 1,
        content: content.to_string(),
        imported_at: T0 + 5,
        imported_by: "admin".to_string(),
    }
}

fn audit(target: &str) -> NewAudit {
    NewAudit {
        at: T0 + 5,
        actor: "admin".to_string(),
        role: "admin".to_string(),
        action: "prices.import".to_string(),
        target: target.to_string(),
        before: None,
        after: Some("{}".to_string()),
    }
}

#[tokio::test]
async fn versions_are_stored_once_and_never_changed() {
    let (dir, ledger) = temp_ledger().await;
    assert_eq!(ledger.price_tables_stamp().await.unwrap(), (0, 0));

    let (stored, row) = ledger
        .store_price_table(&table("1", "a: 1\n"), &audit("aws-ec2@1"))
        .await
        .unwrap();
    assert!(stored);
    assert_eq!((row.name.as_str(), row.version.as_str()), ("aws-ec2", "1"));
    assert_eq!(
        (row.effective, row.imported_at, row.row_count),
        (T0, T0 + 5, 1)
    );
    let stamp = ledger.price_tables_stamp().await.unwrap();
    assert_eq!(stamp, (1, row.id));
    assert_eq!(ledger.audit_log(None).await.unwrap().len(), 1);

    // The same content again: nothing written, nothing audited.
    let (stored, again) = ledger
        .store_price_table(&table("1", "a: 1\n"), &audit("aws-ec2@1"))
        .await
        .unwrap();
    assert!(!stored);
    assert_eq!(again, row);
    assert_eq!(ledger.price_tables_stamp().await.unwrap(), stamp);
    assert_eq!(ledger.audit_log(None).await.unwrap().len(), 1);

    // Other content under the same version: refused, nothing written.
    let error = ledger
        .store_price_table(&table("1", "a: 2\n"), &audit("aws-ec2@1"))
        .await
        .unwrap_err();
    let LedgerError::Conflict(message) = &error else {
        panic!("{error:?}");
    };
    assert!(message.contains("aws-ec2@1 is already stored"), "{message}");
    assert_eq!(ledger.price_tables().await.unwrap().len(), 1);
    assert_eq!(ledger.audit_log(None).await.unwrap().len(), 1);

    // A new version is a new row, listed in the order stored.
    let mut second = table("2", "a: 2\n");
    second.origin = "imported".to_string();
    ledger
        .store_price_table(&second, &audit("aws-ec2@2"))
        .await
        .unwrap();
    let all = ledger.price_tables().await.unwrap();
    let versions: Vec<(&str, &str)> = all
        .iter()
        .map(|t| (t.version.as_str(), t.origin.as_str()))
        .collect();
    assert_eq!(versions, [("1", "aws"), ("2", "imported")]);
    assert_ne!(ledger.price_tables_stamp().await.unwrap(), stamp);

    let mut bad = table("3", "x");
    bad.origin = "manual".to_string();
    assert!(matches!(
        ledger.store_price_table(&bad, &audit("x")).await,
        Err(LedgerError::Invalid(_))
    ));

    // Stored versions are append-only, even to someone with the database file.
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    for statement in [
        "update price_tables set content = 'b: 1' where version = '1'",
        "delete from price_tables where version = '1'",
    ] {
        let error = sqlx::query(statement).execute(&pool).await.unwrap_err();
        assert!(error.to_string().contains("append-only"), "{error}");
    }
}
