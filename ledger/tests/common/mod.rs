//! Helpers shared by the ledger's integration tests.
#![allow(dead_code)]

use bursar_ledger::{Ledger, UsageCharge};
use bursar_pricing::Currency;

/// 2025-01-01T00:00:00Z.
pub const T0: i64 = 1_735_689_600;
pub const HOUR: i64 = 3_600;
pub const DAY: i64 = 86_400;
/// One unit of currency, in micros.
pub const UNIT: i64 = 1_000_000;

/// A ledger on a fresh SQLite file; keep the directory alive as long as the ledger.
pub async fn temp_ledger() -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::open(&url).await.expect("open ledger");
    (dir, ledger)
}

pub fn su() -> Currency {
    Currency::new("su")
}

pub fn usd() -> Currency {
    Currency::new("usd")
}

/// A final (COMPLETED) record of `units` su for `account`, effective at `effective_at`.
pub fn record(
    job_id: &str,
    revision: &str,
    account: &str,
    units: i64,
    effective_at: i64,
) -> UsageCharge {
    UsageCharge {
        cluster: "alpha".to_string(),
        job_id: job_id.to_string(),
        display_id: job_id.to_string(),
        submit: T0,
        revision: revision.to_string(),
        account: account.to_string(),
        user: "alice".to_string(),
        partition: Some("cpu".to_string()),
        qos: Some("normal".to_string()),
        state: "COMPLETED".to_string(),
        is_final: true,
        currency: su(),
        amount_micros: units * UNIT,
        effective_at,
        price_version: Some("2025-01".to_string()),
        note: None,
    }
}

/// The same record, still RUNNING (not final).
pub fn running(
    job_id: &str,
    revision: &str,
    account: &str,
    units: i64,
    effective_at: i64,
) -> UsageCharge {
    UsageCharge {
        state: "RUNNING".to_string(),
        is_final: false,
        ..record(job_id, revision, account, units, effective_at)
    }
}

/// `c` as submitted at `submit`: a job's record carries its submit time, which for a job
/// bursar holds for is at or after the hold (see `bursar_ledger::SUBMIT_SKEW_SECS`).
pub fn submitted(submit: i64, c: UsageCharge) -> UsageCharge {
    UsageCharge { submit, ..c }
}
