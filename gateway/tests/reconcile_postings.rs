//! What `bursar reconcile` and `bursar charges --from --to` read of the ledger: the postings
//! of the jobs with usage in the window (and of the jobs the cluster lists), each whole — the
//! same postings a read of the whole journal gives for them, without reading the rest. And
//! `bursar charges` without a window: every job, read a page of jobs at a time.

mod admission_support;

use std::collections::BTreeSet;

use admission_support::{fixture, Fixture, CONFIG};
use bursar_gateway::reconcile::{job_postings, window_postings};
use bursar_ledger::{JournalQuery, UsageCharge};
use bursar_pricing::Currency;
use serde_json::Value;

const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;
/// 2026-03-02T00:00:00Z.
const FROM: i64 = 1_772_409_600;
const TO: i64 = FROM + 2 * DAY;

fn record(
    cluster: &str,
    job_id: &str,
    revision: &str,
    units: i64,
    effective_at: i64,
) -> UsageCharge {
    UsageCharge {
        cluster: cluster.to_string(),
        job_id: job_id.to_string(),
        display_id: job_id.to_string(),
        submit: effective_at - HOUR,
        revision: revision.to_string(),
        account: "physics".to_string(),
        user: "alice".to_string(),
        partition: Some("batch".to_string()),
        qos: None,
        state: "COMPLETED".to_string(),
        is_final: true,
        currency: Currency::new(if cluster == "cloud" { "usd" } else { "su" }),
        amount_micros: units * 1_000_000,
        effective_at,
        price_version: None,
        note: None,
    }
}

/// Jobs before, after and inside `[FROM, TO)` on both clusters, two of them revised.
async fn post_jobs(f: &Fixture) {
    let ledger = &f.app.ledger;
    let posted_at = TO + DAY;
    // "10" long before the window, "11" after it, "12" and "13" inside it (over two days),
    // "14" inside it on the other cluster, "15" posted inside and revised to after it (its
    // reversal stays inside), "12" again on cloud outside the window.
    let mut records = vec![
        record("onprem", "10", "r1", 3, FROM - 10 * DAY),
        record("onprem", "11", "r1", 4, TO + HOUR),
        record("onprem", "12", "r1", 5, FROM + HOUR),
        record("onprem", "13", "r1", 6, FROM + DAY + HOUR),
        record("cloud", "14", "r1", 7, FROM + 2 * HOUR),
        record("onprem", "15", "r1", 8, FROM + 3 * HOUR),
        record("cloud", "12", "r1", 9, FROM - 3 * DAY),
    ];
    ledger.post_usage(&records, posted_at).await.unwrap();
    // A new revision of "13" (another amount, same time) and of "15" (after the window).
    records = vec![
        record("onprem", "13", "r2", 16, FROM + DAY + HOUR),
        UsageCharge {
            submit: FROM + 2 * HOUR,
            ..record("onprem", "15", "r2", 18, TO + 2 * HOUR)
        },
    ];
    ledger.post_usage(&records, posted_at + HOUR).await.unwrap();
}

#[tokio::test]
async fn a_reconciliation_reads_the_windows_jobs_and_the_listed_ones_each_whole() {
    let f = fixture().await;
    post_jobs(&f).await;
    let ledger = &f.app.ledger;

    // The cluster lists "10" (its record now falls in the window, bursar's does not) and "99"
    // (bursar never charged it).
    let got = window_postings(&f.app, "onprem", FROM, TO, ["10", "99"])
        .await
        .unwrap();

    // The reference: every posting of the cluster's whole journal, kept if listed or with
    // usage effective in the window.
    let whole = ledger
        .journal(&JournalQuery {
            cluster: Some("onprem".to_string()),
            ..JournalQuery::default()
        })
        .await
        .unwrap();
    let in_window: BTreeSet<String> = whole
        .iter()
        .filter(|e| e.kind.is_usage() && (FROM..TO).contains(&e.effective_at))
        .filter_map(|e| e.job_id.clone())
        .collect();
    let expected: Vec<_> = job_postings(whole)
        .into_iter()
        .filter(|p| p.job_id == "10" || in_window.contains(&p.job_id))
        .collect();
    assert_eq!(got, expected);

    let seen: Vec<(&str, i64)> = got.iter().map(|p| (p.job_id.as_str(), p.amount)).collect();
    assert_eq!(
        seen,
        [
            ("10", 3_000_000),
            ("12", 5_000_000),
            ("13", 16_000_000),
            ("15", 18_000_000),
        ]
    );
    assert!(got.iter().all(|p| p.cluster == "onprem"));
    // "15" is now posted after the window: reconciling sees where it went.
    let moved = got.iter().find(|p| p.job_id == "15").unwrap();
    assert_eq!(moved.effective_at, TO + 2 * HOUR);
}

/// An amount as `bursar charges` prints it (`-0.40`, `2.00`) in micros.
fn micros(text: &str) -> i64 {
    let (units, decimals) = text.split_once('.').unwrap_or((text, ""));
    let digits: i64 = format!("{units}{decimals}").parse().unwrap();
    digits * 10_i64.pow(6 - decimals.len() as u32)
}

/// A configuration file for the `bursar` binary over the fixture's ledger.
fn write_config(f: &Fixture) -> std::path::PathBuf {
    let config = f._dir.path().join("bursar.yaml");
    std::fs::write(
        &config,
        format!(
            "database: sqlite://{}\n{CONFIG}",
            f._dir.path().join("ledger.db").display()
        ),
    )
    .unwrap();
    config
}

/// What `bursar charges ARGS` prints over `config`'s ledger.
fn charges(config: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args(["--config", &config.display().to_string(), "charges"])
        .args(args)
        .env_remove("BURSAR_DATABASE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `bursar charges --from --to` lists the jobs charged in the window — of the whole listing,
/// those whose charge is effective in it — and keeps the cluster and account filters.
#[tokio::test]
async fn charges_in_a_window_are_the_whole_listings_jobs_ended_in_it() {
    let f = fixture().await;
    post_jobs(&f).await;
    let config = write_config(&f);
    let charges = |args: &[&str]| -> Vec<Value> {
        let mut args = args.to_vec();
        args.extend(["--format", "json"]);
        let listed: Value = serde_json::from_str(&charges(&config, &args)).unwrap();
        listed["charges"].as_array().unwrap().clone()
    };
    let (from, to) = ("2026-03-02T00:00:00Z", "2026-03-04T00:00:00Z");
    let whole = charges(&[]);
    let ended_in = |c: &Value| {
        let ended = c["effective_at"].as_str().unwrap();
        from <= ended && ended < to
    };
    let window = charges(&["--from", from, "--to", to]);
    let expected: Vec<Value> = whole.iter().filter(|c| ended_in(c)).cloned().collect();
    assert_eq!(window, expected);
    let ids: Vec<(&str, &str)> = window
        .iter()
        .map(|c| {
            (
                c["cluster"].as_str().unwrap(),
                c["job_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids, [("onprem", "12"), ("onprem", "13"), ("cloud", "14")]);
    let onprem = charges(&["--from", from, "--to", to, "-M", "onprem", "-A", "physics"]);
    assert_eq!(
        onprem,
        expected
            .iter()
            .filter(|c| c["cluster"] == "onprem")
            .cloned()
            .collect::<Vec<_>>()
    );
    assert!(charges(&["--from", from, "--to", to, "-A", "chemistry"]).is_empty());
    // A window needs both ends, in order.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args([
            "--config",
            &config.display().to_string(),
            "charges",
            "--from",
            to,
            "--to",
            from,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--to must be after --from"));
}

/// `bursar charges` without a window reads the ledger 10,000 jobs at a time and writes CSV and
/// JSON as it reads: over more jobs than a page, in every format and with `-M` or `-A`, it
/// prints byte for byte what a window around all time prints (read by days), and its jobs
/// are the postings of the whole journal, in order.
#[tokio::test]
async fn the_whole_listing_read_a_page_of_jobs_at_a_time_is_the_journals() {
    let f = fixture().await;
    post_jobs(&f).await;
    let many: Vec<UsageCharge> = (0..10_050)
        .map(|i| {
            let cluster = if i % 3 == 0 { "cloud" } else { "onprem" };
            record(
                cluster,
                &format!("{}", 1_000 + i),
                "r1",
                1 + i % 7,
                FROM - DAY + i,
            )
        })
        .collect();
    f.app.ledger.post_usage(&many, TO + DAY).await.unwrap();
    // Job 1000 gets a refund on physics, then a new revision moves it to chemistry.
    let ledger = &f.app.ledger;
    ledger
        .refund_job(&bursar_ledger::RefundRequest {
            cluster: Some("cloud".into()),
            job_id: "1000".into(),
            amount: Some(400_000),
            idempotency_key: "rf-1000".into(),
            note: None,
        })
        .await
        .unwrap();
    let moved = UsageCharge {
        account: "chemistry".into(),
        ..record("cloud", "1000", "r2", 2, FROM - DAY)
    };
    ledger.post_usage(&[moved], TO + 2 * DAY).await.unwrap();
    let config = write_config(&f);
    let charges = |args: &[&str]| charges(&config, args);
    let all_time = ["--from", "2000-01-01", "--to", "2100-01-01"];
    for format in ["csv", "json", "table"] {
        for only in [
            &[][..],
            &["-M", "cloud"],
            &["-A", "physics"],
            &["-A", "chemistry"],
        ] {
            let mut args = vec!["--format", format];
            args.extend_from_slice(only);
            let whole = charges(&args);
            args.extend_from_slice(&all_time);
            assert!(
                whole == charges(&args),
                "charges --format {format} {only:?}: the whole listing differs from all time's"
            );
        }
    }
    let listed: Value = serde_json::from_str(&charges(&["--format", "json"])).unwrap();
    let listed: Vec<(String, String, String)> = listed["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap().to_string();
            (text("cluster"), text("job_id"), text("amount"))
        })
        .collect();
    let journal = f
        .app
        .ledger
        .journal(&JournalQuery::default())
        .await
        .unwrap();
    let expected: Vec<(String, String, String)> = job_postings(journal)
        .into_iter()
        .map(|p| {
            let decimals = f.app.decimals(p.currency.as_str());
            let amount = bursar_pricing::money::format_micros(p.amount, decimals);
            (p.cluster, p.job_id, amount)
        })
        .collect();
    assert!(listed.len() > 10_050, "{}", listed.len());
    assert!(
        listed == expected,
        "the postings of the whole journal, in order"
    );
    // With -A, what each job charged that account, as its balance counts: the moved job at
    // -0.40 (its refund) on physics and 2.00 on chemistry.
    for account in ["physics", "chemistry"] {
        let listed: Value =
            serde_json::from_str(&charges(&["-A", account, "--format", "json"])).unwrap();
        let mut sums = std::collections::BTreeMap::new();
        for c in listed["charges"].as_array().unwrap() {
            let amount = micros(c["amount"].as_str().unwrap());
            *sums
                .entry(c["currency"].as_str().unwrap().to_string())
                .or_insert(0) += amount;
            if c["job_id"] == "1000" {
                let expected = if account == "physics" {
                    "-0.40"
                } else {
                    "2.00"
                };
                assert_eq!(c["amount"], expected, "{account}: {c}");
            }
        }
        let journal = ledger
            .journal(&JournalQuery {
                account: Some(account.to_string()),
                ..JournalQuery::default()
            })
            .await
            .unwrap();
        let mut expected = std::collections::BTreeMap::new();
        for e in journal.iter().filter(|e| e.kind.is_usage()) {
            *expected.entry(e.currency.to_string()).or_insert(0) += e.amount;
        }
        assert_eq!(sums, expected, "{account}");
    }
    let empty = charges(&["-A", "biology", "--format", "json"]);
    assert_eq!(empty, "{\n  \"charges\": []\n}\n");
    // A window in the wrong order prints nothing but the error.
    let config = write_config(&f);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args(["--config", &config.display().to_string(), "charges"])
        .args([
            "--format",
            "csv",
            "--from",
            "2026-03-04",
            "--to",
            "2026-03-02",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
