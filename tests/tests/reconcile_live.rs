//! `bursar reconcile` against the real servers started by `deploy/dev/up.sh`, after the job mix
//! of `deploy/dev/slurm-jobs.sh` ran on both Slurm clusters.
//!
//! A site that collected the whole window reconciles clean: nothing missing, extra or stale,
//! and the premium QOS factor and the billing TRES truncation it reports are exactly what this
//! file computes on its own from `sacct`. A site that collected only part of the window lists
//! every job it missed and exits 2 — and is clean once it collects what the hint says. dstack
//! runs match their own `cost` to the cent.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

use bursar_tests::{
    expected_micros, micros, round_half_even, DevStack, Site, Weights, CLOUD, ONPREM,
};
use serde_json::Value;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn at(epoch: i64) -> String {
    format!("@{epoch}")
}

/// Billing-seconds as micros of billing-hours, rounded half to even.
fn billing_hours(seconds: u128) -> i64 {
    round_half_even(seconds * 1_000_000, 3600)
}

/// One job record as `sacct --noconvert` prints it (epoch times).
struct Job {
    id: String,
    submit: i64,
    started: bool,
    charged_at: i64,
    state: String,
    qos: String,
    account: String,
    elapsed: u128,
    tres: BTreeMap<String, u128>,
}

impl Job {
    fn is_final(&self) -> bool {
        !["RUNNING", "PENDING", "SUSPENDED"].contains(&self.state.as_str())
    }
    fn refunded(&self) -> bool {
        ["NODE_FAIL", "BOOT_FAIL"].contains(&self.state.as_str())
    }
}

/// The job records sacct lists for `cluster` whose charge belongs to `[from, to)`.
fn sacct_jobs(dev: &DevStack, cluster: &str, from: i64, to: i64) -> Vec<Job> {
    let out = dev.slurm(
        "sacct",
        cluster,
        &[
            "--parsable2",
            "--noheader",
            "--allusers",
            "--duplicates",
            "--allocations",
            "--noconvert",
            &format!("--clusters={cluster}"),
            &format!("--starttime=uts{from}"),
            &format!("--endtime=uts{to}"),
            "--format=JobIDRaw,Submit,Start,End,State,QOS,Account,ElapsedRaw,AllocTRES",
        ],
    );
    let time = |t: &str| t.parse::<i64>().ok().filter(|t| *t > 0);
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            let submit = time(f[1]).expect("submit time");
            let (start, end) = (time(f[2]), time(f[3]));
            let tres: BTreeMap<String, u128> = f[8]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    let v = v.trim_end_matches('M');
                    (k.to_string(), v.parse().unwrap())
                })
                .collect();
            Job {
                id: f[0].to_string(),
                submit,
                // A job cancelled while pending gets Start = End and an empty AllocTRES: it
                // never ran.
                started: start.is_some() && !tres.is_empty(),
                charged_at: end.or(start).unwrap_or(submit),
                state: f[4].split_whitespace().next().unwrap().to_string(),
                qos: f[5].to_string(),
                account: f[6].to_string(),
                elapsed: f[7].parse().unwrap(),
                tres,
            }
        })
        .filter(|j| from <= j.charged_at && j.charged_at < to)
        .collect()
}

/// What this file expects per account: the QOS factor's share and the truncation of billing.
#[derive(Debug, Default)]
struct Expected {
    qos_share: i64,
    at_factor_one: i64,
    billing_seconds_charged: u128,
    billing_seconds_all: u128,
}

fn expectations(jobs: &[Job], weights: &Weights) -> BTreeMap<String, Expected> {
    let mut per_account: BTreeMap<String, Expected> = BTreeMap::new();
    for job in jobs.iter().filter(|j| j.is_final()) {
        let e = per_account.entry(job.account.clone()).or_default();
        let billing = job.tres.get("billing").copied().unwrap_or(0);
        e.billing_seconds_all += billing * job.elapsed;
        if job.refunded() || !job.started {
            continue;
        }
        let one = expected_micros(weights, &job.tres, job.elapsed, 1);
        let factor = if job.qos == "premium" { 2 } else { 1 };
        e.qos_share += expected_micros(weights, &job.tres, job.elapsed, factor) - one;
        e.at_factor_one += one;
        e.billing_seconds_charged += billing * job.elapsed;
    }
    per_account
}

/// onprem collected through slurmrestd, cloud through sacct (`slurm_conf` from the config).
fn site(dev: &DevStack) -> Site {
    Site::new(&format!(
        "accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         clusters:\n\
         \x20 onprem:\n    kind: slurm\n    currency: su\n    partitions:\n      batch: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n\
         \x20     smt: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n    qos:\n      premium: {{usage_factor: 2.0}}\n\
         \x20   collect:\n      slurmrestd: {{url: \"{}\", jwt_key_file: \"{}\", user: slurm}}\n      slice: 6h\n\
         \x20 cloud:\n    kind: slurm\n    currency: usd\n    partitions:\n      gpu: {{weights: \"CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50\"}}\n    qos:\n      premium: {{usage_factor: 2.0}}\n\
         \x20   collect:\n      sacct: {{slurm_conf: \"{}\"}}\n      slice: 6h\n",
        dev.var("BURSAR_DEV_ONPREM_REST"),
        dev.var("BURSAR_DEV_JWT_KEY"),
        dev.var("BURSAR_DEV_CLOUD_CONF"),
    ))
}

/// `bursar reconcile … --format json`; for a cluster collected through slurmrestd the Slurm
/// commands find the cluster through `SLURM_CONF` in the environment.
fn reconcile(dev: &DevStack, site: &Site, cluster: &str, from: i64, to: i64) -> (Output, Value) {
    let out = site
        .command()
        .env("SLURM_CONF", dev.var("BURSAR_DEV_ONPREM_CONF"))
        .args([
            "reconcile",
            "-M",
            cluster,
            "--from",
            &at(from),
            "--to",
            &at(to),
            "--format",
            "json",
        ])
        .output()
        .expect("run bursar reconcile");
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "bursar reconcile -M {cluster} printed no JSON ({e}), status {}:\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, value)
}

fn reason(account: &Value, kind: &str) -> Option<i64> {
    account["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .map(|r| micros(r["amount"].as_str().unwrap()))
}

fn account<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["account"] == name)
        .unwrap_or_else(|| panic!("no account {name} in {report:#}"))
}

/// Yesterday 00:00 to tomorrow 00:00 (UTC): every job the dev stack ran today.
fn window() -> (i64, i64) {
    let day = now() - now().rem_euclid(86_400);
    (day - 86_400, day + 86_400)
}

#[test]
fn a_fully_collected_day_reconciles_and_every_difference_is_explained() {
    let dev = DevStack::get();
    let (from, to) = window();
    let site = site(&dev);
    site.ok(&["collect", "--since", &at(from), "--until", &at(now())]);

    for (cluster, weights) in [("onprem", &ONPREM), ("cloud", &CLOUD)] {
        let jobs = sacct_jobs(&dev, cluster, from, to);
        assert!(
            jobs.iter().any(|j| j.qos == "premium" && j.started),
            "no premium job on {cluster}: did deploy/dev/slurm-jobs.sh run today?"
        );
        let (out, report) = reconcile(&dev, &site, cluster, from, to);
        assert!(
            out.status.success(),
            "{cluster}: {report:#}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report["ok"], true, "{report:#}");
        assert_eq!(report["jobs"], Value::Array(Vec::new()));
        assert_eq!(report["sreport"]["rollup"], "forced", "{report:#}");

        for (name, e) in expectations(&jobs, weights) {
            if e.at_factor_one == 0 && e.billing_seconds_all == 0 {
                continue; // nothing to see: the account is left out of the report
            }
            let line = account(&report, &name);
            // The ledger holds exactly what sacct's records price to.
            assert_eq!(
                reason(line, "collection"),
                None,
                "{cluster}/{name}: {line:#}"
            );
            let qos = reason(line, "qos_usage_factor").unwrap_or(0);
            assert_eq!(qos, e.qos_share, "{cluster}/{name} QOS share: {line:#}");
            assert_eq!(
                micros(line["recomputed_billing_hours"].as_str().unwrap()),
                billing_hours(e.billing_seconds_all),
                "{cluster}/{name}: Σ billing × elapsed"
            );
            if cluster == "onprem" {
                // Billed in su, bursar and Slurm count the same units.
                let truncation = e.at_factor_one - billing_hours(e.billing_seconds_charged);
                assert_eq!(
                    reason(line, "billing_truncation").unwrap_or(0),
                    truncation,
                    "{cluster}/{name} truncation: {line:#}"
                );
                let bursar = micros(line["bursar_amount"].as_str().unwrap());
                assert_eq!(bursar, e.at_factor_one + e.qos_share, "{cluster}/{name}");
                // The terms add up to the difference exactly.
                let explained: i64 = line["reasons"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| micros(r["amount"].as_str().unwrap()))
                    .sum();
                let difference = micros(line["difference"].as_str().unwrap());
                assert_eq!(explained, difference, "{cluster}/{name}: {line:#}");
                let sreport = micros(line["slurm_billing_hours"].as_str().unwrap());
                assert_eq!(bursar - sreport, difference);
            } else {
                // Dollars against billing units: no difference, no truncation.
                assert!(line["difference"].is_null(), "{line:#}");
                assert_eq!(reason(line, "billing_truncation"), None);
            }
        }
        let premium_accounts = expectations(&jobs, weights)
            .values()
            .filter(|e| e.qos_share > 0)
            .count();
        assert!(premium_accounts > 0, "{cluster}: no QOS share to check");
    }

    // The table says the same in words.
    let table = site
        .command()
        .env("SLURM_CONF", dev.var("BURSAR_DEV_ONPREM_CONF"))
        .args([
            "reconcile",
            "-M",
            "onprem",
            "--from",
            &at(from),
            "--to",
            &at(to),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success(), "{text}");
    assert!(text.contains("QOS premium"), "{text}");
    assert!(text.contains("billing TRES truncation"), "{text}");
    assert!(
        text.contains("ok: no job missing, extra or stale"),
        "{text}"
    );
}

#[test]
fn a_site_that_collected_only_part_of_the_window_lists_the_jobs_it_missed() {
    let dev = DevStack::get();
    let (from, to) = window();
    let jobs = sacct_jobs(&dev, "onprem", from, to);
    let first_submit = jobs
        .iter()
        .map(|j| j.submit)
        .min()
        .expect("no onprem job today: did deploy/dev/slurm-jobs.sh run?");
    // Collected from the window's start up to just before the jobs were submitted.
    let site = site(&dev);
    site.ok(&[
        "collect",
        "-M",
        "onprem",
        "--since",
        &at(from),
        "--until",
        &at(first_submit - 1),
    ]);

    let (out, report) = reconcile(&dev, &site, "onprem", from, to);
    assert_eq!(out.status.code(), Some(2), "{report:#}");
    assert_eq!(report["ok"], false);
    let missing: BTreeSet<String> = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            assert_eq!(j["problem"], "missing", "{j:#}");
            assert!(
                j["hint"]
                    .as_str()
                    .unwrap()
                    .starts_with("bursar collect -M onprem --since "),
                "{j:#}"
            );
            assert!(j["bursar"].is_null() && j["cluster_record"]["state"].is_string());
            j["job_id"].as_str().unwrap().to_string()
        })
        .collect();
    // Every finished job that ran is missed; one that never started costs 0 and is only noted.
    let expected: BTreeSet<String> = jobs
        .iter()
        .filter(|j| j.is_final() && j.started)
        .map(|j| j.id.clone())
        .collect();
    assert_eq!(missing, expected);
    // The money the missing jobs stand for is the collection term of each account.
    for (name, e) in expectations(&jobs, &ONPREM) {
        let line = account(&report, &name);
        assert_eq!(
            reason(line, "collection"),
            Some(-(e.at_factor_one + e.qos_share)),
            "{name}: {line:#}"
        );
    }

    // Following the hint makes it clean.
    let hint = report["jobs"][0]["hint"].as_str().unwrap().to_string();
    let since = hint
        .split_whitespace()
        .skip_while(|w| *w != "--since")
        .nth(1)
        .unwrap()
        .to_string();
    site.ok(&[
        "collect",
        "-M",
        "onprem",
        "--since",
        &since,
        "--until",
        &at(now()),
    ]);
    let (out, report) = reconcile(&dev, &site, "onprem", from, to);
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["ok"], true);
}

#[test]
fn dstack_runs_reconcile_with_their_own_cost_to_the_cent() {
    let dev = DevStack::get();
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")).unwrap();
    let site = Site::new(&format!(
        "accounts:\n  physics: {{}}\nclusters:\n  gpucloud:\n    kind: dstack\n    currency: usd\n    collect:\n      dstack: {{url: \"{}\", token_file: \"{}\", project: \"{}\", account: physics}}\n",
        dev.var("BURSAR_DEV_DSTACK_URL"),
        token_file.path().display(),
        dev.var("BURSAR_DEV_DSTACK_PROJECT"),
    ));
    // The seeded runs are from 2026-01-05.
    let (from, to) = ("2026-01-01", at(now() + 86_400));
    let args = [
        "reconcile",
        "-M",
        "gpucloud",
        "--from",
        from,
        "--to",
        &to,
        "--format",
        "json",
    ];

    // Nothing collected yet: every billable submission is missing.
    let before = site.run(&args);
    assert_eq!(before.status.code(), Some(2));
    let report: Value = serde_json::from_slice(&before.stdout).unwrap();
    let missing = report["jobs"].as_array().unwrap();
    assert!(missing.len() >= 9, "{report:#}");
    assert!(missing.iter().all(|j| j["problem"] == "missing"));
    assert!(missing.iter().any(|j| j["display_id"]
        .as_str()
        .unwrap()
        .starts_with("seed-deleted/")));

    site.ok(&["collect"]);
    let report = site.json(&args[..args.len() - 2]);
    assert_eq!(report["ok"], true, "{report:#}");
    let runs = report["runs"].as_array().unwrap();
    assert!(runs.len() >= 7, "{report:#}");
    assert!(runs
        .iter()
        .any(|r| r["run_name"] == "seed-deleted" && r["deleted"] == true));
    for run in runs {
        let difference = micros(run["difference"].as_str().unwrap());
        assert!(difference.abs() <= 10_000, "{run:#}");
        assert_eq!(
            micros(run["bursar_amount"].as_str().unwrap())
                - micros(run["dstack_cost"].as_str().unwrap()),
            difference
        );
    }
    let physics = account(&report, "physics");
    assert!(micros(physics["difference"].as_str().unwrap()).abs() <= 10_000);
    assert_eq!(reason(physics, "not_collected"), None);
}
