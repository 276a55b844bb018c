//! `bursar collect` against the real servers started by `deploy/dev/up.sh`, after the job mix
//! of `deploy/dev/slurm-jobs.sh` ran on both Slurm clusters.
//!
//! Every job `sacct --duplicates --allocations` lists is charged exactly what an independent
//! computation in this file says, through slurmrestd and through sacct alike; a second pass
//! posts nothing; a pass killed with SIGKILL halfway and restarted ends with identical
//! balances; dstack runs are charged their own `cost`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bursar_tests::{
    expected_micros, micros, parse_tres, unix_seconds, DevStack, Site, CLOUD, ONPREM,
};
use serde_json::Value;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn iso(epoch: i64) -> String {
    format!("@{epoch}")
}

/// Final jobs sacct lists for `cluster` in `[since, until]` — the jobs eligible or running in
/// it and the jobs cancelled in it (one cancelled before it became eligible is in no plain
/// window) — as (JobIDRaw, Submit) → expected micros.
fn sacct_expectations(
    dev: &DevStack,
    cluster: &str,
    since: i64,
    until: i64,
) -> BTreeMap<(String, i64), i64> {
    let list = |state: Option<&str>| {
        let mut args = vec![
            "--parsable2".to_string(),
            "--noheader".into(),
            "--allusers".into(),
            "--duplicates".into(),
            "--allocations".into(),
            "--noconvert".into(),
            format!("--clusters={cluster}"),
            format!("--starttime=uts{since}"),
            format!("--endtime=uts{until}"),
            "--format=JobIDRaw,Submit,Start,State,QOS,ElapsedRaw,AllocTRES".into(),
        ];
        if let Some(state) = state {
            args.push(format!("--state={state}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        dev.slurm("sacct", cluster, &args)
    };
    let out = list(None) + &list(Some("CANCELLED"));
    let weights = if cluster == "cloud" { &CLOUD } else { &ONPREM };
    let mut expected = BTreeMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('|').collect();
        let (id, submit, start, state, qos, elapsed, tres) =
            (f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
        let state = state.split_whitespace().next().unwrap();
        if ["RUNNING", "PENDING", "SUSPENDED", "REQUEUED"].contains(&state) {
            continue;
        }
        let started = !matches!(start, "None" | "Unknown" | "0" | "");
        let factor = if qos == "premium" { 2 } else { 1 };
        let amount = if !started || state == "NODE_FAIL" || state == "BOOT_FAIL" {
            0
        } else {
            expected_micros(weights, &parse_tres(tres), elapsed.parse().unwrap(), factor)
        };
        expected.insert((id.to_string(), submit.parse().unwrap()), amount);
    }
    expected
}

fn site(dev: &DevStack, source: &str, slice: &str) -> Site {
    let collect = |cluster: &str| -> String {
        let (rest, conf) = if cluster == "cloud" {
            (
                dev.var("BURSAR_DEV_CLOUD_REST"),
                dev.var("BURSAR_DEV_CLOUD_CONF"),
            )
        } else {
            (
                dev.var("BURSAR_DEV_ONPREM_REST"),
                dev.var("BURSAR_DEV_ONPREM_CONF"),
            )
        };
        let src = match source {
            "slurmrestd" => format!(
                "slurmrestd: {{url: \"{rest}\", jwt_key_file: \"{}\", user: slurm}}",
                dev.var("BURSAR_DEV_JWT_KEY")
            ),
            _ => format!("sacct: {{slurm_conf: \"{conf}\"}}"),
        };
        format!("    collect:\n      {src}\n      slice: {slice}\n      overlap: 10m\n")
    };
    Site::new(&format!(
        "accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         clusters:\n\
         \x20 onprem:\n    kind: slurm\n    currency: su\n    partitions:\n      batch: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n\
         \x20     smt: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n    qos:\n      premium: {{usage_factor: 2.0}}\n{}\
         \x20 cloud:\n    kind: slurm\n    currency: usd\n    partitions:\n      gpu: {{weights: \"CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50\"}}\n    qos:\n      premium: {{usage_factor: 2.0}}\n{}",
        collect("onprem"),
        collect("cloud")
    ))
}

/// bursar's charges for `cluster`: (job id, submit) → micros.
fn charged(site: &Site, cluster: &str) -> BTreeMap<(String, i64), i64> {
    let charges = site.json(&["charges", "--cluster", cluster]);
    charges["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let submit = unix_seconds(c["submit"].as_str().unwrap());
            (
                (c["job_id"].as_str().unwrap().to_string(), submit),
                micros(c["amount"].as_str().unwrap()),
            )
        })
        .collect()
}

fn assert_matches_sacct(dev: &DevStack, site: &Site, source: &str, since: i64, until: i64) {
    for cluster in ["onprem", "cloud"] {
        let expected = sacct_expectations(dev, cluster, since, until);
        assert!(
            !expected.is_empty(),
            "sacct lists no finished job on {cluster}: did deploy/dev/slurm-jobs.sh run?"
        );
        let got = charged(site, cluster);
        for (key, amount) in &expected {
            let charged = got.get(key).unwrap_or_else(|| {
                panic!("{source}: {cluster} job {key:?} listed by sacct was not charged")
            });
            assert_eq!(charged, amount, "{cluster} job {key:?}");
        }
        let expected_total: i64 = expected.values().sum();
        let got_total: i64 = got
            .iter()
            .filter(|(k, _)| expected.contains_key(*k))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(got_total, expected_total, "{cluster} total");
        for key in got.keys() {
            assert!(
                expected.contains_key(key) || sacct_lists_unfinished(dev, cluster, &key.0),
                "{cluster} job {key:?} charged by bursar but not listed by sacct"
            );
        }
    }
}

fn sacct_lists_unfinished(dev: &DevStack, cluster: &str, job_id: &str) -> bool {
    let out = dev.slurm(
        "sacct",
        cluster,
        &[
            "--parsable2",
            "--noheader",
            "--allocations",
            &format!("--clusters={cluster}"),
            "-j",
            job_id,
            "--format=State",
        ],
    );
    out.lines()
        .any(|s| s.starts_with("RUNNING") || s.starts_with("PENDING"))
}

#[test]
fn collect_charges_every_job_sacct_lists_through_slurmrestd_and_through_sacct() {
    let dev = DevStack::get();
    let until = now();
    let since = until - 86_400;
    for source in ["slurmrestd", "sacct"] {
        // slurmrestd holds each answer in memory: at most an hour a call on a stack that may
        // hold thousands of benchmark jobs; sacct streams, and reads six hours at a time.
        let slice = if source == "slurmrestd" { "1h" } else { "6h" };
        let site = site(&dev, source, slice);
        let window = ["--since", &iso(since), "--until", &iso(until)];
        let first = site.ok(&[&["collect"], &window[..]].concat());
        assert!(
            first.contains("onprem:") && first.contains("cloud:"),
            "{first}"
        );
        assert_matches_sacct(&dev, &site, source, since, until);

        let balances = site.json(&["balance", "--at", &iso(until)]);
        let second = site.ok(&[&["collect"], &window[..]].concat());
        for line in second.lines() {
            assert!(
                line.contains("(0 charged, 0 adjusted"),
                "{source}: a second pass posted something: {line}"
            );
        }
        assert_eq!(
            site.json(&["balance", "--at", &iso(until)]),
            balances,
            "{source}"
        );

        let status = site.json(&["collect", "status"]);
        for c in status["clusters"].as_array().unwrap() {
            assert_eq!(c["source"], source);
            assert!(c["last_success"].is_string(), "{c}");
            assert_eq!(c["consecutive_failures"], 0, "{c}");
        }
    }
}

#[test]
fn a_collect_killed_halfway_and_restarted_ends_with_identical_balances() {
    let dev = DevStack::get();
    // A two-day window read in one-hour slices that ends now: jobs that start later are
    // outside it, so both passes see the same finished records even if the cluster is busy.
    // Each slurmdbd query takes ~0.1 s here and the clusters are read one after the other
    // (cloud, then onprem), so the kill lands after cloud's charges and before onprem's.
    let until = now();
    let since = until - 2 * 86_400;
    let window = [
        "--since".to_string(),
        iso(since),
        "--until".to_string(),
        iso(until),
    ];
    let args: Vec<&str> = std::iter::once("collect")
        .chain(window.iter().map(String::as_str))
        .collect();

    let reference = site(&dev, "slurmrestd", "1h");
    reference.ok(&args);
    let total = reference.json(&["charges"])["charges"]
        .as_array()
        .unwrap()
        .len();

    let crashed = site(&dev, "slurmrestd", "1h");
    let mut child = crashed.command().args(&args).spawn().unwrap();
    let mut partial = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while partial == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        partial = crashed.json(&["charges"])["charges"]
            .as_array()
            .unwrap()
            .len();
    }
    // SIGKILL: no chance to clean up.
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the pass finished before it could be killed"
    );
    assert!(
        partial > 0 && partial < total,
        "killed after {partial} of {total} charges"
    );
    crashed.ok(&args);

    let at = iso(until);
    assert_eq!(
        crashed.json(&["balance", "--at", &at]),
        reference.json(&["balance", "--at", &at])
    );
    assert_eq!(
        crashed.json(&["charges"])["charges"],
        reference.json(&["charges"])["charges"]
    );
    let report = |s: &Site| {
        s.json(&[
            "report",
            "usage",
            "--from",
            &iso(since),
            "--to",
            &iso(until),
        ])
    };
    assert_eq!(report(&crashed), report(&reference));
}

#[test]
fn dstack_runs_are_charged_their_own_cost_to_the_cent() {
    let dev = DevStack::get();
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")).unwrap();
    let site = Site::new(&format!(
        "accounts:\n  physics: {{}}\nclusters:\n  gpucloud:\n    kind: dstack\n    currency: usd\n    collect:\n      dstack: {{url: \"{}\", token_file: \"{}\", project: \"{}\", account: physics}}\n",
        dev.var("BURSAR_DEV_DSTACK_URL"),
        token_file.path().display(),
        dev.var("BURSAR_DEV_DSTACK_PROJECT"),
    ));
    site.ok(&["collect"]);

    // dstack's own view, straight from its API.
    let out = std::process::Command::new("curl")
        .args([
            "-sf",
            "-X",
            "POST",
            "-H",
            &format!(
                "Authorization: Bearer {}",
                dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")
            ),
            "-H",
            "Content-Type: application/json",
            "-d",
            &format!(
                "{{\"project_name\":\"{}\",\"limit\":100}}",
                dev.var("BURSAR_DEV_DSTACK_PROJECT")
            ),
            &format!("{}/api/runs/list", dev.var("BURSAR_DEV_DSTACK_URL")),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "dstack runs/list failed");
    let runs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(runs.len() >= 7, "the seeded runs are there");

    let charges = site.json(&["charges"]);
    let mut per_run: BTreeMap<String, i64> = BTreeMap::new();
    for c in charges["charges"].as_array().unwrap() {
        let run = c["display_id"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        *per_run.entry(run).or_default() += micros(c["amount"].as_str().unwrap());
    }
    for run in &runs {
        let name = run["run_spec"]["run_name"]
            .as_str()
            .or(run["run_name"].as_str())
            .unwrap();
        let cost = micros(&run["cost"].to_string());
        let ours = per_run.get(name).copied().unwrap_or(0);
        // dstack rounds its float sum to 4 places; bursar rounds each submission to micros.
        assert!(
            (ours - cost).abs() < 5_000,
            "run {name}: bursar {ours} µ$, dstack {cost} µ$"
        );
    }
    // Deleted and retried runs are charged too.
    assert!(per_run.contains_key("seed-deleted"), "{per_run:?}");
    assert!(per_run["seed-spot-retry"] > 0);
}
