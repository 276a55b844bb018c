//! `bursar enforce` and `bursar sync` against the real Slurm 22.05 of `deploy/dev/up.sh`.
//!
//! Acceptance: an account is exhausted, bursar blocks it, a direct `sbatch -A` on the cluster
//! is refused by Slurm while an already-running job finishes normally; after a deposit the
//! block is lifted and direct `sbatch` works again. The block is always lifted and the test's
//! jobs cancelled at the end, even on failure (a Drop guard).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bursar_tests::{DevStack, Site};

fn site(dev: &DevStack, declare: &str) -> Site {
    let conf = dev.var("BURSAR_DEV_ONPREM_CONF");
    Site::new(&format!(
        "{declare}clusters:\n\
         \x20 onprem:\n    kind: slurm\n    currency: su\n\
         \x20   enforce: {{sacctmgr: /usr/bin/sacctmgr, slurm_conf: \"{conf}\", slurm_cluster: onprem, enabled: true}}\n"
    ))
}

/// `sbatch -A physics ...` as alice on onprem.
fn sbatch_as_alice(dev: &DevStack, wrap: &str) -> Output {
    dev.sbatch_as(
        "alice",
        "onprem",
        &[
            "-A",
            "physics",
            "-J",
            "bursar-enforce-live",
            "--chdir",
            "/tmp",
            "--wrap",
            wrap,
        ],
    )
}

fn job_state(dev: &DevStack, job: &str) -> String {
    let out = dev.slurm(
        "sacct",
        "onprem",
        &["-n", "-P", "-X", "-j", job, "--format=State"],
    );
    out.lines().next().unwrap_or("").trim().to_string()
}

fn wait_for(dev: &DevStack, job: &str, states: &[&str], limit: Duration) -> String {
    let started = Instant::now();
    loop {
        let state = job_state(dev, job);
        if states.iter().any(|s| state.starts_with(s)) || started.elapsed() > limit {
            return state;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// physics's `GrpSubmitJobs` as slurmctld holds it (`N` for none), which follows `sacctmgr`
/// only once slurmdbd has passed the change on.
fn submit_limit_in_force(dev: &DevStack) -> String {
    let out = dev.slurm(
        "scontrol",
        "onprem",
        &["show", "assoc_mgr", "accounts=physics", "flags=assoc"],
    );
    let mut account_record = false;
    for line in out.lines() {
        if line.starts_with("ClusterName=") {
            account_record = line.contains(" Account=physics UserName= ");
        }
        if !account_record {
            continue;
        }
        if let Some((_, rest)) = line.split_once("GrpSubmitJobs=") {
            return rest.split('(').next().unwrap_or("").to_string();
        }
    }
    panic!("no GrpSubmitJobs for physics in:\n{out}")
}

/// Waits (up to a minute) until slurmctld enforces `limit` for physics.
fn wait_for_limit(dev: &DevStack, limit: &str) {
    let started = Instant::now();
    loop {
        let now = submit_limit_in_force(dev);
        if now == limit {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "slurmctld still has GrpSubmitJobs={now} for physics, not {limit}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Lifts the block and cancels the test's jobs however the test ends.
struct Cleanup<'a> {
    dev: &'a DevStack,
    jobs: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let conf = self.dev.var("BURSAR_DEV_ONPREM_CONF");
        let _ = Command::new("sacctmgr")
            .args([
                "-i",
                "modify",
                "account",
                "where",
                "name=physics",
                "cluster=onprem",
                "set",
                "GrpSubmitJobs=-1",
            ])
            .env("SLURM_CONF", conf)
            .output();
        for job in &self.jobs {
            let _ = Command::new("scancel")
                .arg(job)
                .env("SLURM_CONF", conf)
                .output();
        }
    }
}

#[test]
fn an_exhausted_account_is_blocked_in_slurm_without_killing_running_jobs_and_lifted_after_a_deposit(
) {
    let dev = DevStack::get();
    let mut cleanup = Cleanup {
        dev: &dev,
        jobs: Vec::new(),
    };
    let site = site(
        &dev,
        "accounts:\n  org: {}\n  physics: {parent: org}\n  chemistry: {parent: org}\n",
    );

    // A job already running before the block.
    let out = sbatch_as_alice(&dev, "sleep 15");
    assert!(out.status.success(), "sbatch: {out:?}");
    let running = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    cleanup.jobs.push(running.clone());
    let state = wait_for(&dev, &running, &["RUNNING"], Duration::from_secs(90));
    assert_eq!(state, "RUNNING", "job {running} should be running");

    // physics is exhausted: an allocation of 0 su.
    site.ok(&[
        "alloc",
        "set",
        "physics",
        "--currency",
        "su",
        "--amount",
        "0",
    ]);
    let dry = site.ok(&["enforce", "--dry-run"]);
    assert!(
        dry.contains(
            "/usr/bin/sacctmgr -i modify account where name=physics cluster=onprem set GrpSubmitJobs=0"
        ),
        "{dry}"
    );
    assert!(!dry.contains("chemistry"), "{dry}");
    let accounts = site.json(&["accounts"]);
    assert!(
        accounts.to_string().contains("\"blocked\":[]"),
        "{accounts}"
    );

    let done = site.ok(&["enforce"]);
    assert!(done.contains("set GrpSubmitJobs=0"), "{done}");
    let again = site.ok(&["enforce"]);
    assert!(again.contains("onprem: nothing to change"), "{again}");
    let table = site.ok(&["accounts"]);
    let physics_line = table.lines().find(|l| l.contains("physics")).unwrap();
    assert!(physics_line.contains("onprem"), "{table}");

    // Slurm itself refuses a direct sbatch, once slurmdbd has told slurmctld.
    wait_for_limit(&dev, "0");
    let refused = sbatch_as_alice(&dev, "true");
    assert!(
        !refused.status.success(),
        "sbatch should be refused: {refused:?}"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("AssocGrpSubmitJobsLimit"), "{err}");

    // The running job finishes normally.
    let state = wait_for(
        &dev,
        &running,
        &["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"],
        Duration::from_secs(60),
    );
    assert_eq!(state, "COMPLETED");

    // A deposit, and the block is lifted.
    site.ok(&[
        "alloc",
        "set",
        "physics",
        "--currency",
        "su",
        "--amount",
        "100",
    ]);
    let lifted = site.ok(&["enforce"]);
    assert!(
        lifted.contains("name=physics cluster=onprem set GrpSubmitJobs=-1"),
        "{lifted}"
    );
    let grp = dev.slurm(
        "sacctmgr",
        "onprem",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "format=Account,User,GrpSubmit",
            "cluster=onprem",
            "account=physics",
        ],
    );
    assert!(grp.lines().any(|l| l == "physics||"), "{grp}");
    wait_for_limit(&dev, "N");
    let ok = sbatch_as_alice(&dev, "true");
    assert!(ok.status.success(), "sbatch after the deposit: {ok:?}");
    cleanup
        .jobs
        .push(String::from_utf8_lossy(&ok.stdout).trim().to_string());
    let table = site.ok(&["accounts"]);
    let physics_line = table.lines().find(|l| l.contains("physics")).unwrap();
    assert!(!physics_line.contains("onprem"), "{table}");
}

#[test]
fn sync_import_creates_the_slurm_tree_and_push_dry_run_prints_what_slurm_lacks() {
    let dev = DevStack::get();
    let site = site(&dev, "");
    let dry = site.ok(&["sync", "import", "--cluster", "onprem", "--dry-run"]);
    assert!(
        dry.contains("would add account physics (parent org)"),
        "{dry}"
    );
    let before = site.json(&["accounts"]);
    assert!(!before.to_string().contains("physics"), "{before}");

    let out = site.ok(&["sync", "import", "--cluster", "onprem"]);
    assert!(out.contains("added account org (parent root)"), "{out}");
    let accounts = site.json(&["accounts"]);
    let find = |name: &str| {
        accounts["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {accounts}"))
            .clone()
    };
    assert_eq!(find("physics")["parent"], "org");
    assert_eq!(find("chemistry")["parent"], "org");
    assert_eq!(find("org")["parent"], "root");
    let users = |name: &str| find(name)["users"].to_string();
    assert!(users("physics").contains("alice") && users("physics").contains("carol"));
    assert!(users("chemistry").contains("bob") && users("chemistry").contains("carol"));
    let again = site.ok(&["sync", "import", "--cluster", "onprem"]);
    assert!(again.contains("the ledger has every account"), "{again}");

    // A ledger-only account: push --dry-run prints the sacctmgr command, Slurm is untouched.
    let site2 = site_with_biology(&dev);
    let push = site2.ok(&["sync", "push", "--cluster", "onprem", "--dry-run"]);
    assert!(
        push.contains("/usr/bin/sacctmgr -i add account biology cluster=onprem parent=org"),
        "{push}"
    );
    assert!(
        push.contains("-i add user alice account=biology cluster=onprem"),
        "{push}"
    );
    assert!(!push.contains("physics"), "{push}");
    let slurm = dev.slurm(
        "sacctmgr",
        "onprem",
        &["-n", "-P", "show", "account", "format=Account"],
    );
    assert!(!slurm.contains("biology"), "{slurm}");
}

fn site_with_biology(dev: &DevStack) -> Site {
    site(
        dev,
        "accounts:\n  org: {}\n  physics: {parent: org}\n  chemistry: {parent: org}\n  biology: {parent: org}\n\
         users:\n  alice: {default_account: physics, accounts: [biology]}\n  bob: {default_account: chemistry}\n  carol: {default_account: physics, accounts: [chemistry]}\n",
    )
}
