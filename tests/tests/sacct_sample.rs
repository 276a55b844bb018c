//! The real two-cluster sacct capture in `deploy/examples/sacct-narrow.psv`, imported through
//! the `bursar` binary, charges every job exactly what it costs by hand.
//!
//! Prices (deploy/examples/bursar.yaml):
//! - onprem/batch, su per hour: CPU 1.0, memory 0.25 per GiB (= 0.25/1024 per MB), GPU 4.0;
//! - cloud/gpu, usd per hour: CPU 0.0425, memory 0.0053 per GiB, GPU 2.50;
//! - QOS premium doubles the charge on both clusters.
//!
//! charge = rate × ElapsedRaw / 3600 × factor, rounded half-to-even to micros.

use bursar_tests::{micros, repo_root, Site};
use serde_json::Value;

fn sample() -> String {
    repo_root()
        .join("deploy/examples/sacct-narrow.psv")
        .display()
        .to_string()
}

/// (cluster, JobID as users see it, account, state, micros) — each worked out below.
const EXPECTED: &[(&str, &str, &str, &str, i64)] = &[
    // 1 cpu + 1000M: rate 1 + 0.25×1000/1024 = 637/512 = 1.244140625/h; × 2 s / 3600 = 691.19 µ
    ("onprem", "1", "physics", "COMPLETED", 691),
    // 2 cpu + 1G: 2.25/h × 3 s = 1875 µ exactly
    ("onprem", "2", "chemistry", "COMPLETED", 1_875),
    // premium, 4 cpu + 2G: 4.5/h × 3 s × 2 = 7500 µ
    ("onprem", "3", "physics", "COMPLETED", 7_500),
    // FAILED after 0 s: started, ran no time
    ("onprem", "4", "chemistry", "FAILED", 0),
    // cancelled while running, 2 s: charged like job 1
    ("onprem", "5", "physics", "CANCELLED", 691),
    // cancelled while pending: never started, free
    ("onprem", "6", "chemistry", "CANCELLED", 0),
    // 2 cpu + 1000M: 2.244140625/h × 2 s = 1246.74 µ → 1247 (its steps are not billed)
    ("onprem", "8", "physics", "COMPLETED", 1_247),
    // 1 cpu + 1 GPU + 1000M: 5.244140625/h × 2 s = 2913.41 µ
    ("onprem", "9", "physics", "COMPLETED", 2_913),
    // TIMEOUT after 82 s: 1.244140625/h × 82 s = 28338.98 µ
    ("onprem", "10", "chemistry", "TIMEOUT", 28_339),
    // het components, each its own record; both ran 0 s
    ("onprem", "11+0", "physics", "COMPLETED", 0),
    ("onprem", "11+1", "physics", "COMPLETED", 0),
    // premium, 2 nodes, 4 cpu + 4000M: (4 + 0.25×4000/1024)/h = 4.9765625 × 2 s × 2 = 5529.51 µ
    ("onprem", "13", "chemistry", "COMPLETED", 5_530),
    // 1 cpu + 1G, 12 s: 1.25/h × 12 s = 4166.67 µ
    ("onprem", "14", "chemistry", "COMPLETED", 4_167),
    // srun-only job, 1 s: 1.244140625/h × 1 s = 345.59 µ
    ("onprem", "15", "chemistry", "COMPLETED", 346),
    // array 7: four tasks, each its own record (1, 2, 3, 4 s)
    ("onprem", "7_0", "physics", "COMPLETED", 346),
    ("onprem", "7_1", "physics", "COMPLETED", 691),
    ("onprem", "7_2", "physics", "COMPLETED", 1_037),
    ("onprem", "7_3", "physics", "FAILED", 1_382),
    // premium, 2 cpu + 1G, 20 s: 2.25/h × 20 s × 2 = 25000 µ
    ("onprem", "19", "physics", "COMPLETED", 25_000),
    // premium, cancelled after 1 s: 2.25/h × 1 s × 2 = 1250 µ
    ("onprem", "20", "physics", "CANCELLED", 1_250),
    // 4 cpu + 4G + 2 GPUs (typed h100 breakdown, not extra GPUs):
    // 4×0.0425 + 4×0.0053 + 2×2.50 = 5.1912 $/h × 3 s = 4326 µ$
    ("cloud", "1", "physics", "COMPLETED", 4_326),
    // 1 cpu + 1000M: 0.0425 + 0.0053×1000/1024 = 0.04767578125 $/h × 2 s = 26.49 µ$
    ("cloud", "2", "chemistry", "COMPLETED", 26),
    // premium, 1 cpu + 1 GPU + 1000M: 2.54767578125 $/h × 2 s × 2 = 2830.75 µ$
    ("cloud", "3", "chemistry", "COMPLETED", 2_831),
    // FAILED after 0 s
    ("cloud", "4", "physics", "FAILED", 0),
];

fn find<'a>(charges: &'a [Value], cluster: &str, display_id: &str) -> &'a Value {
    charges
        .iter()
        .find(|c| c["cluster"] == cluster && c["display_id"] == display_id)
        .unwrap_or_else(|| panic!("no charge for {cluster} {display_id}"))
}

#[test]
fn every_job_in_the_real_capture_is_charged_what_it_costs() {
    let site = Site::example();
    site.ok(&["import", &sample()]);

    let charges = site.json(&["charges"]);
    let charges = charges["charges"].as_array().expect("charges array");
    assert_eq!(
        charges.len(),
        EXPECTED.len(),
        "one charge per job allocation, none for steps"
    );
    for &(cluster, id, account, state, expected) in EXPECTED {
        let c = find(charges, cluster, id);
        assert_eq!(c["account"], account, "{cluster} {id}");
        assert_eq!(c["state"], state, "{cluster} {id}");
        assert_eq!(
            micros(c["amount"].as_str().unwrap()),
            expected,
            "{cluster} {id}: {c}"
        );
        let currency = if cluster == "onprem" { "su" } else { "usd" };
        assert_eq!(c["currency"], currency);
    }
    let never_started = find(charges, "onprem", "6");
    assert_eq!(never_started["reason"], "never started");

    // The report's totals are the sums of the hand-worked charges, per currency.
    let report = site.json(&[
        "report",
        "usage",
        "--from",
        "2026-11-01",
        "--to",
        "2026-12-01",
        "--by",
        "account,cluster",
    ]);
    let total = |currency: &str| -> i64 {
        let totals = report["totals"].as_array().unwrap();
        let t = totals
            .iter()
            .find(|t| t["currency"] == currency)
            .expect("total per currency");
        micros(t["amount"].as_str().unwrap())
    };
    let expected_total = |cluster: &str| -> i64 {
        EXPECTED
            .iter()
            .filter(|e| e.0 == cluster)
            .map(|e| e.4)
            .sum()
    };
    assert_eq!(total("su"), expected_total("onprem"));
    assert_eq!(total("usd"), expected_total("cloud"));
    assert_eq!(total("su"), 83_005);
    assert_eq!(total("usd"), 7_183);

    // Rows carry the contract's keys and sum to the totals.
    let rows = report["rows"].as_array().unwrap();
    for row in rows {
        for key in ["account", "currency", "amount", "jobs", "cluster"] {
            assert!(row.get(key).is_some(), "row without {key}: {row}");
        }
    }
    let physics_su: i64 = EXPECTED
        .iter()
        .filter(|e| e.0 == "onprem" && e.2 == "physics")
        .map(|e| e.4)
        .sum();
    let row = rows
        .iter()
        .find(|r| r["account"] == "physics" && r["currency"] == "su")
        .unwrap();
    assert_eq!(micros(row["amount"].as_str().unwrap()), physics_su);
    assert_eq!(row["jobs"], 13);
}

#[test]
fn importing_the_same_file_again_changes_nothing() {
    let site = Site::example();
    site.ok(&["import", &sample()]);
    let before = site.json(&["balance", "--at", "2026-11-22T12:00:00"]);
    let again = site.ok(&["import", &sample()]);
    assert!(
        again.contains("0 charged"),
        "second import should charge nothing:\n{again}"
    );
    assert_eq!(
        site.json(&["balance", "--at", "2026-11-22T12:00:00"]),
        before
    );
}

#[test]
fn allocations_in_both_currencies_roll_up_the_tree() {
    let site = Site::example();
    site.ok(&["import", &sample()]);
    site.ok(&[
        "alloc",
        "set",
        "org",
        "--currency",
        "su",
        "--amount",
        "1",
        "--from",
        "2026-11-01",
        "--to",
        "2026-12-01",
    ]);
    site.ok(&[
        "alloc",
        "set",
        "org",
        "--currency",
        "usd",
        "--amount",
        "250.00",
        "--from",
        "2026-11-01",
        "--to",
        "2026-12-01",
    ]);
    let balance = site.json(&["balance", "--at", "2026-11-22T12:00:00"]);
    let rows = balance["balances"].as_array().expect("balances array");
    let row = |account: &str, currency: &str| -> &Value {
        rows.iter()
            .find(|r| r["account"] == account && r["currency"] == currency)
            .unwrap_or_else(|| panic!("no balance row for {account} {currency}: {balance}"))
    };
    // org's su allocation carries every on-prem charge of physics and chemistry.
    let org_su = row("org", "su");
    assert_eq!(micros(org_su["allocated"].as_str().unwrap()), 1_000_000);
    assert_eq!(micros(org_su["charged"].as_str().unwrap()), 83_005);
    assert_eq!(micros(org_su["held"].as_str().unwrap()), 0);
    assert_eq!(
        micros(org_su["remaining"].as_str().unwrap()),
        1_000_000 - 83_005
    );
    let org_usd = row("org", "usd");
    assert_eq!(
        micros(org_usd["remaining"].as_str().unwrap()),
        250_000_000 - 7_183
    );
    // physics has no allocation of its own: it spends org's.
    let physics_usd = row("physics", "usd");
    assert!(physics_usd["allocated"].is_null());
    assert_eq!(micros(physics_usd["charged"].as_str().unwrap()), 4_326);
    assert_eq!(
        micros(physics_usd["available"].as_str().unwrap()),
        250_000_000 - 7_183
    );
}

#[test]
fn an_unknown_account_is_created_under_the_root_with_a_warning() {
    let site = Site::example();
    let dump = site.path("dump.psv");
    std::fs::write(
        &dump,
        "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|Submit|Start|End|ElapsedRaw|AllocTRES\n\
         77|77|onprem|biology|dave|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|billing=1,cpu=1,mem=1G,node=1\n",
    )
    .unwrap();
    let out = site
        .command()
        .args(["import", dump.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("biology"),
        "warning names the account: {stderr}"
    );
    let accounts = site.json(&["accounts"]);
    let biology = accounts["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "biology")
        .unwrap()
        .clone();
    assert_eq!(biology["parent"], "root");
    // 1 cpu + 1G for one hour = 1.25 su
    let charges = site.json(&["charges"]);
    assert_eq!(charges["charges"][0]["amount"], "1.25");
}
