//! Finance reports through the `bursar` binary: statements reconcile to the micro (charges
//! from both clusters, a NODE_FAIL job, manual refunds, adjustments, deposits and transfers —
//! `bursar refund`, `bursar transfer` and `bursar deposit` driven through the binary), top
//! users and jobs, and the FOCUS export, over the real sacct capture in
//! `deploy/examples/sacct-narrow.psv` priced by `deploy/examples/bursar.yaml`.

use bursar_ledger::{EntryKind, Ledger, NewEntry};
use bursar_pricing::Currency;
use bursar_tests::{micros, repo_root, Site};
use proptest::prelude::*;
use serde_json::Value;

/// 2026-11-22T00:00:00Z, the day of the capture.
const DAY0: i64 = 1_795_305_600;

/// A NODE_FAIL job that ran an hour on onprem: the end-state policy charges it 0.
const NODE_FAIL: &str = "90|90|onprem|physics|alice|batch|normal|NODE_FAIL|0:0|0:0|\
2026-11-22T00:20:00|2026-11-22T00:20:01|2026-11-22T01:20:01|3600|billing=1,cpu=1,mem=1000M,node=1|1|\
billing=1,cpu=1,mem=1000M,node=1|1000M|1|op-n1|UNLIMITED|node-fail";

fn sample_with(extra: &[String]) -> String {
    let mut text = std::fs::read_to_string(repo_root().join("deploy/examples/sacct-narrow.psv"))
        .expect("sample");
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    text
}

fn import(site: &Site, text: &str) {
    let path = site.path("jobs.psv");
    std::fs::write(&path, text).expect("write psv");
    site.ok(&["import", "-q", path.to_str().expect("utf-8 path")]);
}

/// Posts manual entries straight into the site's ledger (there is no CLI for them).
fn post(site: &Site, entries: &[NewEntry]) {
    let url = format!("sqlite://{}", site.path("bursar.db").display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let ledger = Ledger::open(&url).await.expect("open ledger");
        for e in entries {
            ledger.post_entry(e).await.expect("post entry");
        }
    });
}

fn entry(
    kind: EntryKind,
    account: &str,
    currency: &str,
    amount: i64,
    at: i64,
    key: &str,
) -> NewEntry {
    NewEntry {
        kind,
        account: account.to_string(),
        currency: Currency::new(currency),
        amount,
        effective_at: at,
        idempotency_key: key.to_string(),
        note: Some(format!("test {key}")),
    }
}

fn m(v: &Value, key: &str) -> i64 {
    micros(
        v[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} missing in {v}")),
    )
}

/// Asserts the statement identity and returns the statement.
fn statement(site: &Site, account: &str, currency: &str, from: &str, to: &str) -> Value {
    let st = site.json(&[
        "statement",
        account,
        "--currency",
        currency,
        "--from",
        from,
        "--to",
        to,
    ]);
    let expected = m(&st, "opening") + m(&st, "deposits") - m(&st, "charges") + m(&st, "refunds")
        - m(&st, "adjustments");
    assert_eq!(expected, m(&st, "closing"), "{st:#}");
    // The movements sum to the totals.
    let lines = st["lines"].as_array().expect("lines");
    let sum = |movement: &str| -> i64 {
        lines
            .iter()
            .filter(|l| l["movement"] == movement)
            .map(|l| m(l, "amount"))
            .sum()
    };
    assert_eq!(sum("deposit"), m(&st, "deposits"));
    assert_eq!(sum("charge"), m(&st, "charges"));
    assert_eq!(-sum("refund"), m(&st, "refunds"));
    assert_eq!(sum("adjustment"), m(&st, "adjustments"));
    assert_eq!(sum("held"), m(&st, "held"));
    st
}

fn remaining(site: &Site, account: &str, currency: &str) -> i64 {
    let allocs = site.json(&["alloc", "list"]);
    let rows = allocs.as_array().cloned().unwrap_or_else(|| {
        allocs["allocations"]
            .as_array()
            .cloned()
            .expect("allocations")
    });
    let row = rows
        .iter()
        .find(|r| r["account"] == account && r["currency"] == currency)
        .expect("allocation");
    m(row, "remaining")
}

#[test]
fn statement_reconciles_with_both_clusters_node_fail_refund_and_deposit() {
    let site = Site::example();
    for (currency, amount) in [("su", "100"), ("usd", "50")] {
        site.ok(&[
            "alloc",
            "set",
            "physics",
            "--currency",
            currency,
            "--amount",
            amount,
            "--from",
            "2026-11-01",
            "--to",
            "2026-12-01",
        ]);
    }
    import(&site, &sample_with(&[NODE_FAIL.to_string()]));
    post(
        &site,
        &[
            // The NODE_FAIL job was posted at 0; finance refunds a charge by hand as well.
            entry(
                EntryKind::Refund,
                "physics",
                "su",
                -500_000,
                DAY0 + 1800,
                "refund-1",
            ),
            entry(
                EntryKind::Deposit,
                "physics",
                "su",
                5_000_000,
                DAY0 + 2400,
                "deposit-1",
            ),
            entry(
                EntryKind::Adjustment,
                "physics",
                "usd",
                1_250,
                DAY0 + 2400,
                "adjust-1",
            ),
            entry(
                EntryKind::Refund,
                "physics",
                "usd",
                -1_000,
                DAY0 + 3000,
                "refund-2",
            ),
        ],
    );

    let su = statement(&site, "physics", "su", "2026-11-22", "2026-11-23");
    assert_eq!(
        m(&su, "opening"),
        100_000_000,
        "the allocation's deposit is before the period"
    );
    assert_eq!(m(&su, "deposits"), 5_000_000);
    assert_eq!(m(&su, "refunds"), 500_000);
    let lines = su["lines"].as_array().expect("lines");
    let node_fail = lines
        .iter()
        .find(|l| l["state"] == "NODE_FAIL")
        .expect("the NODE_FAIL job is on the statement");
    assert_eq!(m(node_fail, "amount"), 0);
    assert_eq!(node_fail["cluster"], "onprem");
    // Over the whole allocation, closing is what the allocation has left.
    let whole = statement(&site, "physics", "su", "2026-11-01", "2026-12-01");
    assert_eq!(m(&whole, "closing"), remaining(&site, "physics", "su"));
    assert_eq!(m(&whole, "closing"), m(&su, "closing"));

    let usd = statement(&site, "physics", "usd", "2026-11-01", "2026-12-01");
    assert!(usd["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .any(|l| l["cluster"] == "cloud"));
    assert_eq!(m(&usd, "closing"), remaining(&site, "physics", "usd"));
    assert_eq!(m(&usd, "adjustments"), 1_250);
    assert_eq!(m(&usd, "refunds"), 1_000);

    // A later period: opening is the earlier period's closing.
    let later = statement(&site, "physics", "su", "2026-11-23", "2026-11-30");
    assert_eq!(m(&later, "opening"), m(&su, "closing"));
    assert_eq!(m(&later, "closing"), m(&su, "closing"));

    // Table and CSV render the same statement.
    let table = site.ok(&[
        "statement",
        "physics",
        "--currency",
        "su",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    assert!(table.contains("opening") && table.contains("closing"));
    let csv = site.ok(&[
        "statement",
        "physics",
        "--currency",
        "su",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
        "--format",
        "csv",
    ]);
    assert!(csv.starts_with("effective_at,movement,"));
}

/// The statement line of a job's refund.
fn refund_line<'a>(st: &'a Value, cluster: &str, job: &str) -> &'a Value {
    st["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .find(|l| l["movement"] == "refund" && l["cluster"] == cluster && l["job_id"] == job)
        .unwrap_or_else(|| panic!("no refund of {cluster}:{job} in {st:#}"))
}

/// The done-when of the finance issue, literally: deposits, charges from both clusters, a
/// NODE_FAIL refund, a manual refund and a transfer, in both currencies, reconciled to the
/// cent (to the micro, in fact) — with the refund and the transfer made by the binary.
#[test]
fn statement_with_deposits_both_clusters_node_fail_manual_refund_and_transfer_reconciles() {
    let site = Site::example();
    for (account, currency, amount) in [
        ("physics", "su", "100"),
        ("physics", "usd", "50"),
        ("chemistry", "su", "20"),
        ("chemistry", "usd", "10"),
    ] {
        site.ok(&[
            "alloc",
            "set",
            account,
            "--currency",
            currency,
            "--amount",
            amount,
            "--from",
            "2026-11-01",
            "--to",
            "2026-12-01",
        ]);
    }
    import(&site, &sample_with(&[NODE_FAIL.to_string()]));
    let movement = |args: &[&str]| site.ok(args);
    movement(&[
        "deposit",
        "physics",
        "5",
        "--currency",
        "su",
        "--period-of",
        "2026-11-22T00:40:00",
        "--reason",
        "grant supplement",
    ]);
    movement(&[
        "deposit",
        "physics",
        "2.5",
        "--currency",
        "usd",
        "--period-of",
        "2026-11-22T00:40:00",
        "--reason",
        "grant supplement",
    ]);
    // Job 1 is on both clusters: a bare id is refused, naming both.
    let ambiguous = site.run(&["refund", "1", "--reason", "node trouble"]);
    assert!(!ambiguous.status.success());
    let message = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(
        message.contains("cloud:1") && message.contains("onprem:1"),
        "{message}"
    );
    // Manual refunds: part of onprem job 19 (0.025 su), all of cloud job 1 (0.004326 usd).
    let first = movement(&[
        "refund",
        "onprem:19",
        "--amount",
        "0.01",
        "--reason",
        "slow node",
    ]);
    assert!(
        first.contains("refund of 0.01 su for job onprem:19"),
        "{first}"
    );
    let over = site.run(&[
        "refund",
        "onprem:19",
        "--amount",
        "0.02",
        "--reason",
        "more",
    ]);
    assert!(!over.status.success());
    let message = String::from_utf8_lossy(&over.stderr);
    assert!(
        message.contains("charged 0.025 su")
            && message.contains("0.01 su has been refunded")
            && message.contains("at most 0.015 su"),
        "{message}"
    );
    movement(&["refund", "1", "-M", "cloud", "--reason", "bad image"]);
    // A retry of the same command changes nothing.
    let again = movement(&["refund", "1", "-M", "cloud", "--reason", "bad image"]);
    assert!(again.contains("nothing changed"), "{again}");
    // Transfers to chemistry, in both currencies; one too large is refused.
    for (currency, amount) in [("su", "10"), ("usd", "7.25")] {
        movement(&[
            "transfer",
            "physics",
            "chemistry",
            amount,
            "--currency",
            currency,
            "--period-of",
            "2026-11-22T00:50:00",
            "--reason",
            "shared project",
        ]);
    }
    let retry = movement(&[
        "transfer",
        "physics",
        "chemistry",
        "10",
        "--currency",
        "su",
        "--period-of",
        "2026-11-22T00:50:00",
        "--reason",
        "shared project",
    ]);
    assert!(retry.contains("nothing changed"), "{retry}");
    let refused = site.run(&[
        "transfer",
        "chemistry",
        "physics",
        "31",
        "--currency",
        "su",
        "--reason",
        "too much",
        "--period-of",
        "2026-11-22T00:50:00",
    ]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("\"chemistry\"")
            && message.contains("su remaining")
            && message.contains("31 su"),
        "{message}"
    );

    // su: the day of the capture. Every movement kind is there and the identity holds.
    let su = statement(&site, "physics", "su", "2026-11-22", "2026-11-23");
    assert_eq!(m(&su, "opening"), 100_000_000);
    assert_eq!(
        m(&su, "deposits"),
        5_000_000 - 10_000_000,
        "deposit in, transfer out"
    );
    assert_eq!(m(&su, "refunds"), 10_000);
    let lines = su["lines"].as_array().expect("lines");
    let node_fail = lines
        .iter()
        .find(|l| l["state"] == "NODE_FAIL")
        .expect("the NODE_FAIL job is on the statement");
    assert_eq!(
        (m(node_fail, "amount"), &node_fail["cluster"]),
        (0, &json_str("onprem"))
    );
    let refund = refund_line(&su, "onprem", "19");
    assert_eq!(m(refund, "amount"), -10_000);
    assert_eq!(refund["note"], "slow node");
    assert_eq!(refund["user"], "alice");
    let transfer = lines
        .iter()
        .find(|l| l["movement"] == "deposit" && m(l, "amount") == -10_000_000)
        .expect("the transfer out is a negative deposit");
    assert_eq!(transfer["note"], "transfer to chemistry: shared project");
    // Over the whole allocation, closing is what the allocation has left, to the micro.
    let whole = statement(&site, "physics", "su", "2026-11-01", "2026-12-01");
    assert_eq!(m(&whole, "closing"), remaining(&site, "physics", "su"));
    assert_eq!(
        m(&whole, "closing"),
        100_000_000 + 5_000_000 - 10_000_000 - m(&su, "charges") + 10_000
    );

    // usd: charges from the cloud cluster, the cloud refund, the transfer.
    let usd = statement(&site, "physics", "usd", "2026-11-01", "2026-12-01");
    assert!(m(&usd, "charges") > 0);
    assert_eq!(m(&usd, "deposits"), 50_000_000 + 2_500_000 - 7_250_000);
    assert_eq!(m(&usd, "refunds"), 4_326, "all of cloud job 1");
    assert_eq!(m(refund_line(&usd, "cloud", "1"), "amount"), -4_326);
    assert_eq!(m(&usd, "closing"), remaining(&site, "physics", "usd"));
    assert_eq!(
        m(&usd, "closing"),
        50_000_000 + 2_500_000 - 7_250_000 - m(&usd, "charges") + 4_326
    );

    // The receiving side: chemistry got both transfers.
    for (currency, allocated, moved) in [
        ("su", 20_000_000, 10_000_000),
        ("usd", 10_000_000, 7_250_000),
    ] {
        let st = statement(&site, "chemistry", currency, "2026-11-01", "2026-12-01");
        assert_eq!(m(&st, "deposits"), allocated + moved);
        assert_eq!(m(&st, "closing"), remaining(&site, "chemistry", currency));
    }

    // Every change is in the audit log, as the Unix user running the commands.
    let audit = site.json(&["audit", "--limit", "100"]);
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .map(|e| e["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        actions,
        [
            "transfer",
            "transfer",
            "refund",
            "refund",
            "deposit",
            "deposit",
            "allocation.set",
            "allocation.set",
            "allocation.set",
            "allocation.set"
        ]
    );
    assert!(audit["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .all(|e| e["role"] == "admin" && e["actor"].as_str().is_some_and(|a| !a.is_empty())));
    assert_eq!(audit["next_before"], Value::Null, "all ten fit in one page");

    // Paged back four at a time, the same ten, each once.
    let mut paged = Vec::new();
    let mut before: Option<i64> = None;
    loop {
        let mut args = vec!["audit", "--limit", "4"];
        let cursor = before.map(|id| id.to_string());
        if let Some(id) = &cursor {
            args.extend(["--before", id]);
        }
        let page = site.json(&args);
        paged.extend(page["audit"].as_array().expect("audit").iter().cloned());
        match page["next_before"].as_i64() {
            Some(id) => before = Some(id),
            None => break,
        }
    }
    assert_eq!(paged, *audit["audit"].as_array().unwrap());
    // The table says how to page back.
    let table = site.run(&["audit", "--limit", "3"]);
    let third = audit["audit"][2]["id"].as_i64().unwrap();
    assert!(
        String::from_utf8_lossy(&table.stderr)
            .contains(&format!("older entries: add --before {third} to list them")),
        "{table:?}"
    );
    let refused = site.run(&["audit", "--limit", "0"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("limit must be 1 to 10000, not 0"),
        "{refused:?}"
    );
}

fn json_str(s: &str) -> Value {
    Value::String(s.to_string())
}

#[test]
fn top_users_and_jobs_by_cost() {
    let site = Site::example();
    import(&site, &sample_with(&[]));
    let top = site.json(&[
        "report",
        "top",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    let rows = top["rows"].as_array().expect("rows");
    let su: Vec<&Value> = rows.iter().filter(|r| r["currency"] == "su").collect();
    assert_eq!(su[0]["user"], "alice");
    assert_eq!(m(su[0], "amount"), 41_501);
    assert!(su
        .windows(2)
        .all(|w| m(w[0], "amount") >= m(w[1], "amount")));

    let jobs = site.json(&[
        "report",
        "top",
        "--by",
        "job",
        "--limit",
        "2",
        "--currency",
        "su",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    let rows = jobs["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["job_id"], "10");
    assert_eq!(m(&rows[0], "amount"), 28_339);
    assert_eq!(rows[1]["job_id"], "19");
}

#[test]
fn focus_export_has_one_row_per_usage_entry_and_sums_to_the_usage_report() {
    let site = Site::example();
    import(&site, &sample_with(&[]));
    let rows = site.json(&[
        "export",
        "focus",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 24);
    let report = site.json(&[
        "report",
        "usage",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    for total in report["totals"].as_array().expect("totals") {
        let currency = total["currency"].as_str().expect("currency");
        let sum: i64 = rows
            .iter()
            .filter(|r| r["BillingCurrency"] == currency)
            .map(|r| m(r, "BilledCost"))
            .sum();
        assert_eq!(sum, m(total, "amount"), "{currency}");
    }
    // Rows come by the time each charge took effect (a job's end), then posting order.
    let first = rows
        .iter()
        .find(|r| r["ResourceId"] == "onprem/1")
        .expect("job 1's row");
    assert_eq!(first["ChargeCategory"], "Usage");
    assert_eq!(first["ProviderName"], "bursar");
    assert_eq!(first["ServiceName"], "Slurm onprem");
    assert_eq!(first["ResourceId"], "onprem/1");
    assert_eq!(first["SubAccountId"], "physics");
    assert_eq!(first["ConsumedUnit"], "core-hours");
    assert_eq!(first["Tags"]["user"], "alice");
    assert_eq!(first["BillingPeriodStart"], "2026-11-01T00:00:00Z");
    let csv = site.ok(&[
        "export",
        "focus",
        "--from",
        "2026-11-22",
        "--to",
        "2026-11-23",
    ]);
    assert!(csv.starts_with("BilledCost,EffectiveCost,ListCost,BillingCurrency,"));
    assert_eq!(csv.lines().count(), 25);

    // A period without usage: an empty array, a header alone.
    let none = [
        "export",
        "focus",
        "--from",
        "2025-01-01",
        "--to",
        "2025-02-01",
    ];
    assert_eq!(site.json(&none), serde_json::json!([]));
    let csv = site.ok(&none);
    assert_eq!(csv.lines().count(), 1, "{csv}");
}

#[derive(Debug, Clone)]
enum Op {
    Charge { seconds: i64, at: i64 },
    Deposit { amount: i64, at: i64 },
    Refund { amount: i64, at: i64 },
    Adjust { amount: i64, at: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    let at = 0..20 * 86_400i64;
    prop_oneof![
        (1..7_200i64, at.clone()).prop_map(|(seconds, at)| Op::Charge { seconds, at }),
        (1..9_000_000i64, at.clone()).prop_map(|(amount, at)| Op::Deposit { amount, at }),
        (1..900_000i64, at.clone()).prop_map(|(amount, at)| Op::Refund { amount, at }),
        (1..900_000i64, any::<bool>(), at).prop_map(|(amount, neg, at)| Op::Adjust {
            amount: if neg { -amount } else { amount },
            at
        }),
    ]
}

/// `YYYY-MM-DDTHH:MM:SS` of November 2026 from seconds after 2026-11-01.
fn nov(seconds: i64) -> String {
    let (d, rest) = (seconds / 86_400, seconds % 86_400);
    format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}",
        d + 1,
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn statement_identity_holds_for_random_histories(
        ops in prop::collection::vec(op(), 1..12),
        from_day in 1..20u32,
        days in 1..10u32,
    ) {
        let site = Site::example();
        site.ok(&["alloc", "set", "chemistry", "--currency", "su", "--amount", "50",
            "--from", "2026-11-01", "--to", "2026-12-01"]);
        let nov1 = DAY0 - 21 * 86_400;
        let mut lines = Vec::new();
        let mut entries = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let key = format!("op-{i}");
            match *op {
                Op::Charge { seconds, at } => lines.push(format!(
                    "{id}|{id}|onprem|chemistry|bob|batch|normal|COMPLETED|0:0|0:0|{s}|{s}|{e}|{seconds}|\
                     billing=1,cpu=1,mem=1G,node=1|1|billing=1,cpu=1,mem=1G,node=1|1G|1|op-n1|UNLIMITED|p",
                    id = 1000 + i, s = nov(at), e = nov(at + seconds))),
                Op::Deposit { amount, at } => entries.push(entry(EntryKind::Deposit, "chemistry", "su", amount, nov1 + at, &key)),
                Op::Refund { amount, at } => entries.push(entry(EntryKind::Refund, "chemistry", "su", -amount, nov1 + at, &key)),
                Op::Adjust { amount, at } => entries.push(entry(EntryKind::Adjustment, "chemistry", "su", amount, nov1 + at, &key)),
            }
        }
        if !lines.is_empty() {
            let header = "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|AllocTRES|AllocCPUS|ReqTRES|ReqMem|NNodes|NodeList|TimelimitRaw|JobName";
            import(&site, &format!("{header}\n{}\n", lines.join("\n")));
        }
        post(&site, &entries);
        let from = format!("2026-11-{:02}", from_day);
        let to = format!("2026-11-{:02}", from_day + days);
        statement(&site, "chemistry", "su", &from, &to);
        let whole = statement(&site, "chemistry", "su", "2026-11-01", "2026-12-01");
        prop_assert_eq!(m(&whole, "closing"), remaining(&site, "chemistry", "su"));
    }
}
