//! The conformance story on SQLite, and opening by URL.

mod common;
mod conformance;

use bursar_ledger::{Ledger, LedgerError};

#[tokio::test]
async fn story_on_a_sqlite_file() {
    let (_dir, ledger) = common::temp_ledger().await;
    assert_eq!(ledger.backend(), "sqlite");
    conformance::story(&ledger).await;
}

#[tokio::test]
async fn story_in_memory() {
    let ledger = Ledger::open("sqlite::memory:").await.unwrap();
    conformance::story(&ledger).await;
}

#[tokio::test]
async fn opens_by_url_and_keeps_data_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.db");
    {
        let ledger = Ledger::open(path.to_str().unwrap()).await.unwrap();
        ledger.ensure_account("org", None).await.unwrap();
    }
    let url = format!("sqlite://{}", path.display());
    let ledger = Ledger::open(&url).await.unwrap();
    assert!(!ledger.ensure_account("org", None).await.unwrap());

    assert!(matches!(
        Ledger::open("postgres://bursar@localhost/bursar").await,
        Err(LedgerError::Unsupported(_))
    ));
    assert!(matches!(
        Ledger::open("mysql://localhost/x").await,
        Err(LedgerError::Invalid(_))
    ));
}
