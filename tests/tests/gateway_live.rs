//! `bursar serve` in front of the real dev stack (`deploy/dev/up.sh`): two Slurm 22.05
//! clusters behind slurmrestd and a dstack 0.22.5 server, driven through the real CLI
//! (`bursar submit`, `quote`, `jobs`, `balance --remote`) and the HTTP API.
//!
//! - A batch job submitted as alice runs on the preferred cluster **as alice**, holds exactly
//!   `ClusterPricing::estimate` (recomputed here), and is settled by the server's own
//!   collection loop for exactly what sacct says it used.
//! - When the account chain cannot pay on the first cluster, the job bursts to the next one,
//!   in that cluster's currency; when it can pay nowhere, the CLI exits 1 naming the account,
//!   currencies, estimates and what is left, and the API answers 402 with `details.clusters`.
//! - A dstack task is applied on the dstack server; with no backends there it fails for lack
//!   of capacity, and once the collector sees the failed run its hold settles at 0.
//!
//! - A dstack run that dstack retries for capacity keeps its hold past the hold's lifetime,
//!   while dstack shows it active, and settles at 0 once it is stopped — although dstack has
//!   deleted the submission the hold was linked to.
//! - A running job whose node fails is logged NODE_FAIL and requeued by slurmctld: its hold
//!   stays while the job waits to run again, and settles once it ends.
//!
//! Every job started here is cancelled at the end (also when a test fails), and the server is
//! stopped with SIGTERM. The node-failure test takes a node down, so it runs alone.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bursar_tests::{
    bursar_bin, expected_micros, micros, parse_tres, scontrol_fields, DevStack, Site, Weights,
    CLOUD, NODE_FILLING, ONPREM,
};
use serde_json::{json, Value};

/// How long a submitted Slurm job may take to be listed by sacct and to finish.
const JOB_WAIT: Duration = Duration::from_secs(90);
/// How long the server's collection loop (every 2 s) may take to settle a finished job.
const SETTLE_WAIT: Duration = Duration::from_secs(180);

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

// --- what a job costs, computed independently -------------------------------------------------

/// Σ weight × count × seconds / 3600, in micros, rounded once, half to even.
fn cost_micros(w: &Weights, cpu: u128, mem_mb: u128, gpus: u128, seconds: u128) -> i64 {
    licensed_cost_micros(w, cpu, mem_mb, gpus, 0, seconds)
}

/// [`cost_micros`] of a job that also held `matlab` licenses.
fn licensed_cost_micros(
    w: &Weights,
    cpu: u128,
    mem_mb: u128,
    gpus: u128,
    matlab: u128,
    seconds: u128,
) -> i64 {
    let tres = [
        ("cpu", cpu),
        ("mem", mem_mb),
        ("gres/gpu", gpus),
        ("license/matlab", matlab),
    ]
    .map(|(name, count)| (name.to_string(), count))
    .into();
    expected_micros(w, &tres, seconds, 1)
}

/// Waits for onprem's job `sub` to complete and settle, and checks its charge is what its final
/// sacct record costs at onprem's weights (licenses included): that record's
/// `User|Account|State|ElapsedRaw|AllocTRES`, the cost, and the settled job.
fn settled_at_sacct_cost(gw: &Gateway, sub: &Submission) -> (Vec<String>, i64, Value) {
    let done = gw.sacct("onprem", &sub.cluster_job_id, true);
    assert_eq!(done[2], "COMPLETED", "{done:?}");
    let elapsed: u128 = done[3].parse().unwrap();
    let expected = expected_micros(&ONPREM, &parse_tres(&done[4]), elapsed, 1);
    let settled = gw.wait_settled(sub.id);
    assert_eq!(
        micros(settled["charge"].as_str().unwrap()),
        expected,
        "charge of job {} ({elapsed} s of {}): {settled}",
        sub.cluster_job_id,
        done[4]
    );
    (done, expected, settled)
}

/// [`settled_at_sacct_cost`], with slurmdbd recording each of `allocated` (`cpu=3`) in the
/// job's AllocTRES; prints what it ran with, its estimate and its charge. The final record.
fn settled_recording(gw: &Gateway, sub: &Submission, allocated: &[&str]) -> Vec<String> {
    let (done, _, settled) = settled_at_sacct_cost(gw, sub);
    for kv in allocated {
        assert!(
            done[4].split(',').any(|recorded| recorded == *kv),
            "slurmdbd records {kv} for job {}: {done:?}",
            sub.cluster_job_id
        );
    }
    println!(
        "settled: job {} ran {} s with {}; estimate {} su, charge {} su",
        sub.cluster_job_id, done[3], done[4], settled["estimate"], settled["charge"]
    );
    done
}

/// `cpu=1,mem=1000M,node=1,billing=1` (sacct --noconvert) → (cpus, MB, GPUs).
fn tres_counts(alloc_tres: &str) -> (u128, u128, u128) {
    let mut counts = (0, 0, 0);
    for kv in alloc_tres.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap();
        let v: u128 = v
            .trim_end_matches('M')
            .parse()
            .unwrap_or_else(|_| panic!("--noconvert TRES value {kv}"));
        match k {
            "cpu" => counts.0 = v,
            "mem" => counts.1 = v,
            "gres/gpu" => counts.2 = v,
            _ => {}
        }
    }
    counts
}

// --- the gateway under test ---------------------------------------------------------------------

/// The dev stack's clusters as these tests use them: shared by the tests that only submit
/// jobs, alone for one that takes a node down (it would fail the others' jobs too).
static STACK: RwLock<()> = RwLock::new(());

/// A `bursar serve` child over its own site (config, key, ledger), with alice's and an admin's
/// tokens; on drop, cancels what it started and stops the server.
struct Gateway {
    /// Its use of the stack ([`STACK`]), given up after everything else is dropped.
    _shared: Option<RwLockReadGuard<'static, ()>>,
    _alone: Option<RwLockWriteGuard<'static, ()>>,
    dev: DevStack,
    site: Site,
    child: Option<Child>,
    url: String,
    alice: String,
    admin: String,
    /// Start of every allocation set (the same start replaces an allocation's amount).
    alloc_from: i64,
    /// `(cluster, job id)` of every Slurm job submitted.
    slurm_jobs: RefCell<Vec<(String, String)>>,
    /// Names of every dstack run submitted.
    dstack_runs: RefCell<Vec<String>>,
}

/// What `bursar submit` printed.
struct Submission {
    /// The cluster's job id (Slurm's number, dstack's run name).
    cluster_job_id: String,
    cluster: String,
    /// bursar's job id (`bursar job N: …` on standard error).
    id: i64,
    stderr: String,
}

impl Gateway {
    fn start() -> Gateway {
        Gateway::start_with("")
    }

    /// A gateway (`extra` appended to its configuration) whose org holds 100 su and 100 usd,
    /// and the path of [`job_script`] in its site.
    fn funded(extra: &str) -> (Gateway, String) {
        Gateway::start_with(extra).with_funds()
    }

    fn with_funds(self) -> (Gateway, String) {
        self.set_allocation("org", "su", "100");
        self.set_allocation("org", "usd", "100");
        let script = job_script(self.site.dir.path());
        let script = script.to_str().unwrap().to_string();
        (self, script)
    }

    /// As [`start`](Gateway::start), with `extra` appended to the site's configuration.
    fn start_with(extra: &str) -> Gateway {
        Gateway::start_using(extra, false)
    }

    /// As [`funded`](Gateway::funded), once no other test uses the stack, and keeping it until
    /// dropped.
    fn funded_alone() -> (Gateway, String) {
        Gateway::start_using("", true).with_funds()
    }

    /// A gateway that shares the stack with the other tests, or uses it `alone`. (A test that
    /// failed holding the lock leaves it poisoned; the stack is still usable.)
    fn start_using(extra: &str, alone: bool) -> Gateway {
        let (shared, alone) = if alone {
            (None, Some(STACK.write().unwrap_or_else(|e| e.into_inner())))
        } else {
            (Some(STACK.read().unwrap_or_else(|e| e.into_inner())), None)
        };
        let dev = DevStack::get();
        let site = Site::new("");
        let token_file = site.path("dstack.token");
        std::fs::write(&token_file, dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")).unwrap();
        std::fs::write(&site.config, site_config(&dev, &token_file) + extra).unwrap();
        let key = site.path("jwt.key");
        site.ok(&["token", "keygen", "--key-file", key.to_str().unwrap()]);
        site.ok(&["config", "check"]);

        let stdout = std::fs::File::create(site.path("serve.out")).unwrap();
        let stderr = std::fs::File::create(site.path("serve.log")).unwrap();
        let child = site
            .command()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("BURSAR_LOG", "info")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("start bursar serve");
        let mut gateway = Gateway {
            _shared: shared,
            _alone: alone,
            dev,
            site,
            child: Some(child),
            url: String::new(),
            alice: String::new(),
            admin: String::new(),
            alloc_from: now() - 3600,
            slurm_jobs: RefCell::new(Vec::new()),
            dstack_runs: RefCell::new(Vec::new()),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = std::fs::read_to_string(gateway.site.path("serve.out")).unwrap_or_default();
            if let Some(url) = out
                .lines()
                .find_map(|l| l.strip_prefix("bursar listening on "))
            {
                gateway.url = url.trim().to_string();
                break;
            }
            if let Some(status) = gateway.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "bursar serve exited with {status} before listening:\n{}",
                    gateway.server_log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "bursar serve did not print its address within 30 s:\n{}",
                gateway.server_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        gateway.alice = gateway.issue("alice", "user");
        gateway.admin = gateway.issue("admin", "admin");
        println!("bursar serve listening on {}", gateway.url);
        gateway
    }

    fn issue(&self, user: &str, role: &str) -> String {
        self.site
            .ok(&[
                "token", "issue", "--user", user, "--role", role, "--ttl", "2h",
            ])
            .trim()
            .to_string()
    }

    fn server_log(&self) -> String {
        let log = std::fs::read_to_string(self.site.path("serve.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// `bursar ARGS` as a user on a login node: no local config, the server's URL and a token.
    /// Runs in /tmp, which the job's user can enter (a job's working folder is the submitter's).
    fn client(&self, token: &str, args: &[&str]) -> Output {
        Command::new(bursar_bin())
            .args(args)
            .env_remove("BURSAR_CONFIG")
            .env_remove("BURSAR_DATABASE")
            .env("BURSAR_URL", &self.url)
            .env("BURSAR_TOKEN", token)
            .env("NO_COLOR", "1")
            .current_dir("/tmp")
            .output()
            .expect("run bursar")
    }

    fn client_ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.client(token, args);
        assert!(
            out.status.success(),
            "bursar {args:?} failed with {}\nstdout:\n{}\nstderr:\n{}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.server_log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn client_json(&self, token: &str, args: &[&str]) -> Value {
        let text = self.client_ok(token, args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("bursar {args:?} printed invalid JSON ({e}):\n{text}"))
    }

    /// `bursar submit ARGS` as alice; insists on sbatch's line and records the job for cleanup.
    /// `bursar submit ARGS` as alice, which must fail: its standard error.
    fn refused(&self, args: &[&str]) -> String {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        let out = self.client(&self.alice, &all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "bursar {all:?} succeeded: {stderr}");
        stderr
    }

    fn submit(&self, args: &[&str]) -> Submission {
        self.submit_as(&self.alice, args)
    }

    /// [`submit`](Gateway::submit) as the user of `token`.
    fn submit_as(&self, token: &str, args: &[&str]) -> Submission {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        let out = self.client(token, &all);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "bursar {all:?} failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver log:\n{}",
            out.status,
            self.server_log()
        );
        let line = stdout.trim_end();
        let rest = line
            .strip_prefix("Submitted batch job ")
            .unwrap_or_else(|| panic!("not sbatch's line: {line:?}"));
        let (job, cluster) = rest
            .split_once(" on cluster ")
            .unwrap_or_else(|| panic!("no cluster in {line:?}"));
        assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout:?}");
        let id = stderr
            .lines()
            .find_map(|l| l.strip_prefix("bursar job "))
            .and_then(|l| l.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `bursar job N:` line on stderr: {stderr}"));
        if ["onprem", "cloud"].contains(&cluster) {
            self.slurm_jobs
                .borrow_mut()
                .push((cluster.to_string(), job.to_string()));
        } else {
            self.dstack_runs.borrow_mut().push(job.to_string());
        }
        println!("{line}\n{}", stderr.trim_end());
        Submission {
            cluster_job_id: job.to_string(),
            cluster: cluster.to_string(),
            id,
            stderr,
        }
    }

    /// An HTTP call with curl: (status, JSON body).
    fn api(&self, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
        curl(&self.url, method, path, token, body)
    }

    fn set_allocation(&self, account: &str, currency: &str, amount: &str) {
        let from = format!("@{}", self.alloc_from);
        let (status, answer) = self.api(
            "POST",
            "/v1/allocations",
            &self.admin,
            Some(
                &json!({"account": account, "currency": currency, "amount": amount, "from": from}),
            ),
        );
        assert!(
            status == 200 || status == 201,
            "POST /v1/allocations {account} {currency} {amount}: {status} {answer}"
        );
    }

    /// alice's view of her bursar job `id`.
    fn job(&self, id: i64) -> Value {
        let (status, job) = self.api("GET", &format!("/v1/jobs/{id}"), &self.alice, None);
        assert_eq!(status, 200, "GET /v1/jobs/{id}: {job}");
        job
    }

    /// Polls the job until `state` is `settled`.
    fn wait_settled(&self, id: i64) -> Value {
        let deadline = Instant::now() + SETTLE_WAIT;
        loop {
            let job = self.job(id);
            if job["state"] == "settled" {
                return job;
            }
            assert!(
                job["state"] == "held",
                "bursar job {id} is {} instead of held/settled: {job}",
                job["state"]
            );
            assert!(
                Instant::now() < deadline,
                "bursar job {id} was not settled within {SETTLE_WAIT:?} (the server collects \
                 every 2 s): {job}\nserver log:\n{}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Bursar job `id`'s estimate (what its hold was priced at), in micros.
    fn estimate(&self, id: i64) -> i64 {
        micros(self.job(id)["estimate"].as_str().unwrap())
    }

    /// Bursar job `id`, checked to be still `held` for `estimate` past its hold's lifetime,
    /// kept by the expiry loop because its cluster says the job still waits.
    fn kept(&self, id: i64, estimate: i64) -> Value {
        let job = self.job(id);
        assert_eq!(
            job["state"],
            "held",
            "{job}\nserver log:\n{}",
            self.server_log()
        );
        assert_eq!(micros(job["hold"].as_str().unwrap()), estimate, "{job}");
        assert!(
            self.server_log()
                .contains("hold kept: its job still waits on the cluster"),
            "{}",
            self.server_log()
        );
        job
    }

    /// `bursar balance --remote --format json` as alice: the row of `account` in `currency`.
    fn alice_balance(&self, account: &str, currency: &str) -> Value {
        let balances = self.client_json(&self.alice, &["balance", "--remote", "--format", "json"]);
        balances["balances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["account"] == account && r["currency"] == currency)
            .cloned()
            .unwrap_or_else(|| panic!("no {account} {currency} row in {balances}"))
    }

    /// What alice's `balance --remote` shows held on `account` in `currency`: 0 when the row is
    /// gone (an account without an allocation in a currency and with nothing charged or held
    /// in it has no row).
    fn alice_held(&self, account: &str, currency: &str) -> i64 {
        let balances = self.client_json(&self.alice, &["balance", "--remote", "--format", "json"]);
        balances["balances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["account"] == account && r["currency"] == currency)
            .map_or(0, |row| micros(row["held"].as_str().unwrap()))
    }

    /// sacct's `User|Account|State|ElapsedRaw|AllocTRES` of one job, once it is listed and
    /// (with `final_only`) finished.
    fn sacct(&self, cluster: &str, job: &str, final_only: bool) -> Vec<String> {
        let deadline = Instant::now() + JOB_WAIT;
        loop {
            let out = self.dev.slurm(
                "sacct",
                cluster,
                &[
                    "-M",
                    cluster,
                    "-j",
                    job,
                    "-X",
                    "-n",
                    "-P",
                    "--noconvert",
                    "--format=User,Account,State,ElapsedRaw,AllocTRES",
                ],
            );
            if let Some(line) = out.lines().find(|l| !l.trim().is_empty()) {
                let fields: Vec<String> = line.split('|').map(str::to_string).collect();
                let state = fields[2]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let done = !["PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "COMPLETING"]
                    .contains(&state.as_str());
                if !final_only || done {
                    return fields;
                }
            }
            assert!(
                Instant::now() < deadline,
                "sacct -M {cluster} -j {job} did not show it{} within {JOB_WAIT:?}: {out:?}",
                if final_only { " finished" } else { "" }
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// A dstack run by name, with the admin token: (status, run).
    fn dstack_run(&self, run_name: &str) -> (u16, Value) {
        curl(
            self.dev.var("BURSAR_DEV_DSTACK_URL"),
            "POST",
            &format!(
                "/api/project/{}/runs/get",
                self.dev.var("BURSAR_DEV_DSTACK_PROJECT")
            ),
            self.dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN"),
            Some(&json!({ "run_name": run_name })),
        )
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // Cancel whatever may still be queued or running, so later tests see quiet clusters.
        for (cluster, job) in self.slurm_jobs.borrow().iter() {
            let conf = if cluster == "cloud" {
                self.dev.var("BURSAR_DEV_CLOUD_CONF")
            } else {
                self.dev.var("BURSAR_DEV_ONPREM_CONF")
            };
            let _ = Command::new("scancel")
                .args(["-M", cluster, job])
                .env("SLURM_CONF", conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let runs = self.dstack_runs.borrow().clone();
        if !runs.is_empty() {
            let _ = curl(
                self.dev.var("BURSAR_DEV_DSTACK_URL"),
                "POST",
                &format!(
                    "/api/project/{}/runs/stop",
                    self.dev.var("BURSAR_DEV_DSTACK_PROJECT")
                ),
                self.dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN"),
                Some(&json!({ "runs_names": runs, "abort": true })),
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A JSON call with curl: (HTTP status, parsed body or `null`).
fn curl(base: &str, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
        "--max-time",
        "60",
    ])
    .arg("-H")
    .arg(format!("Authorization: Bearer {token}"));
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "-d"])
            .arg(body.to_string());
    }
    let out = cmd.arg(format!("{base}{path}")).output().expect("run curl");
    assert!(
        out.status.success(),
        "curl {method} {base}{path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status: u16 = status.trim().parse().expect("HTTP status");
    let value = serde_json::from_str(body).unwrap_or(Value::Null);
    (status, value)
}

/// Both Slurm clusters and the dstack server, each collected every 2 s and taking submissions.
fn site_config(dev: &DevStack, dstack_token: &Path) -> String {
    let start = format!("\"@{}\"", now() - 300);
    let jwt = dev.var("BURSAR_DEV_JWT_KEY");
    format!(
        r#"database: sqlite://bursar.db
auth: {{hs256_key_file: jwt.key}}
accounts:
  org: {{}}
  physics: {{parent: org}}
  chemistry: {{parent: org}}
  hpc: {{description: "dstack project runs not submitted through bursar"}}
users:
  alice: {{default_account: physics}}
  bob: {{default_account: chemistry}}
  carol: {{default_account: physics, accounts: [chemistry]}}
routing: {{prefer: [onprem, cloud]}}
clusters:
  onprem:
    kind: slurm
    currency: su
    partitions:
      batch: {{weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0"}}
      smt: {{weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0"}}
    qos:
      premium: {{usage_factor: 2.0}}
    collect:
      slurmrestd: {{url: "{onprem}", jwt_key_file: "{jwt}", user: slurm}}
      interval: 2s
      overlap: 10m
      slice: 1h
      start: {start}
    submit:
      slurmrestd: {{url: "{onprem}", jwt_key_file: "{jwt}", api_version: v0.0.38}}
      default_partition: batch
      licenses: {{matlab: 4}}
      partitions:
        batch: {{max_time: 1d, def_mem_per_cpu_mb: 1000, max_nodes: 2, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}}
        smt: {{max_time: 1d, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 1, node_cpus: 8, node_mem_mb: 16000, node_threads_per_core: 2}}
  cloud:
    kind: slurm
    currency: usd
    partitions:
      gpu: {{weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50"}}
    default_partition: {{weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50"}}
    qos:
      premium: {{usage_factor: 2.0}}
    collect:
      slurmrestd: {{url: "{cloud}", jwt_key_file: "{jwt}", user: slurm}}
      interval: 2s
      overlap: 10m
      slice: 1h
      start: {start}
    submit:
      slurmrestd: {{url: "{cloud}", jwt_key_file: "{jwt}", api_version: v0.0.38}}
      default_partition: gpu
      licenses: {{}}
      partitions:
        gpu: {{max_time: 1d, def_mem_per_cpu_mb: 1000, gpu_types: [h100], max_nodes: 1, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}}
  gpucloud:
    kind: dstack
    currency: usd
    partitions:
      any: {{weights: "CPU=0.05,GRES/gpu=2.0"}}
    collect:
      dstack: {{url: "{dstack}", token_file: "{token}", project: {project}, account: hpc}}
      interval: 2s
    submit:
      default_partition: any
      partitions:
        any: {{max_time: 1d}}
"#,
        onprem = dev.var("BURSAR_DEV_ONPREM_REST"),
        cloud = dev.var("BURSAR_DEV_CLOUD_REST"),
        dstack = dev.var("BURSAR_DEV_DSTACK_URL"),
        project = dev.var("BURSAR_DEV_DSTACK_PROJECT"),
        token = dstack_token.display(),
    )
}

/// A one-minute, one-task batch job for physics, as a user writes it.
fn job_script(dir: &Path) -> PathBuf {
    let path = dir.join("job.sh");
    std::fs::write(
        &path,
        "#!/bin/bash\n#SBATCH -A physics\n#SBATCH -t 1\n#SBATCH -n 1\n#SBATCH -J bursar-live\n\
         #SBATCH -o /dev/null\nsleep 10\n",
    )
    .unwrap();
    path
}

// --- the tests ----------------------------------------------------------------------------------

#[test]
fn a_job_runs_as_its_user_holds_its_estimate_and_settles_at_its_sacct_cost() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    // 1 CPU + DefMemPerCPU 1000 MB for the 1-minute limit: 1.244140625 su/h / 60.
    let estimate = cost_micros(&ONPREM, 1, 1000, 0, 60);
    assert_eq!(estimate, 20_736);

    let quote = gw.client_json(&gw.alice, &["quote", "--format", "json", script]);
    let onprem = cluster_quote(&quote, "onprem");
    assert_eq!(
        micros(onprem["estimate"].as_str().unwrap()),
        estimate,
        "{onprem}"
    );
    assert_eq!(onprem["chosen"], true, "{quote}");
    println!("quote: onprem estimate {} su", onprem["estimate"]);

    let sub = gw.submit(&[script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);

    // The hold is the estimate, in su, on physics (alice's own view).
    let job = gw.job(sub.id);
    assert_eq!(job["cluster"], "onprem");
    assert_eq!(job["cluster_job_id"], sub.cluster_job_id.as_str());
    assert_eq!(job["currency"], "su");
    assert_eq!(micros(job["estimate"].as_str().unwrap()), estimate, "{job}");
    // Checked at once: the job sleeps 10 s, and only its final sacct record settles it.
    assert_eq!(job["state"], "held", "{job}");
    assert_eq!(micros(job["hold"].as_str().unwrap()), estimate, "{job}");
    let row = gw.alice_balance("physics", "su");
    assert_eq!(micros(row["held"].as_str().unwrap()), estimate, "{row}");
    println!(
        "held: {} su (balance --remote: physics held {})",
        job["hold"], row["held"]
    );
    let held_jobs = gw.client_json(&gw.alice, &["jobs", "--format", "json"]);
    assert!(
        held_jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == sub.id && j["state"] == "held"),
        "bursar jobs lists job {} as held: {held_jobs}",
        sub.id
    );

    // On the cluster, as alice, charging physics.
    let listed = gw.sacct("onprem", &sub.cluster_job_id, false);
    assert_eq!(
        listed[0], "alice",
        "sacct User of job {}",
        sub.cluster_job_id
    );
    assert_eq!(
        listed[1], "physics",
        "sacct Account of job {}",
        sub.cluster_job_id
    );

    // It ends; the server's collection loop settles the hold at the real cost.
    let (done, expected, settled) = settled_at_sacct_cost(&gw, &sub);
    let elapsed = &done[3];
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    let row = gw.alice_balance("physics", "su");
    assert_eq!(micros(row["held"].as_str().unwrap()), 0, "{row}");
    assert!(
        micros(row["charged"].as_str().unwrap()) >= expected,
        "{row}"
    );
    println!(
        "settled: job {} ran {elapsed} s with {}; charge {} su (expected {expected} µsu), hold {}",
        sub.cluster_job_id, done[4], settled["charge"], settled["hold"]
    );
}

#[test]
fn a_held_job_waits_on_its_cluster_and_cancelling_it_releases_its_hold() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    let estimate = cost_micros(&ONPREM, 1, 1000, 0, 60);

    // slurmrestd 22.05 answers a held job with its id *and* errors[] 2042: submitted all the same.
    let sub = gw.submit(&["-H", script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let queued = gw.dev.slurm(
        "squeue",
        "onprem",
        &["-h", "-j", &sub.cluster_job_id, "-o", "%T|%r|%u|%a"],
    );
    assert_eq!(
        queued.trim(),
        "PENDING|JobHeldUser|alice|physics",
        "squeue of job {}",
        sub.cluster_job_id
    );
    let job = gw.job(sub.id);
    assert_eq!(job["state"], "held", "{job}");
    assert_eq!(micros(job["hold"].as_str().unwrap()), estimate, "{job}");
    assert_eq!(
        micros(gw.alice_balance("physics", "su")["held"].as_str().unwrap()),
        estimate
    );
    println!(
        "held on the cluster: job {} {}; {} su held",
        sub.cluster_job_id,
        queued.trim(),
        job["hold"]
    );

    let id = sub.id.to_string();
    let out = gw.client_ok(&gw.alice, &["cancel", &id]);
    assert!(out.contains("its hold is released"), "{out}");
    let job = gw.job(sub.id);
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(micros(job["hold"].as_str().unwrap()), 0, "{job}");
    assert_eq!(gw.alice_held("physics", "su"), 0);
    // Cancelled on the cluster as alice herself.
    let uid = Command::new("id").args(["-u", "alice"]).output().unwrap();
    let uid = String::from_utf8(uid.stdout).unwrap();
    let done = gw.sacct("onprem", &sub.cluster_job_id, true);
    assert_eq!(done[2], format!("CANCELLED by {}", uid.trim()), "{done:?}");
    println!("cancelled: {}; sacct {}", out.trim(), done.join("|"));
}

#[test]
fn a_held_job_keeps_its_hold_past_its_lifetime_while_slurmctld_still_lists_it() {
    // A hold lives the time limit (1 min) + grace (1 s); slurmdbd never reports a held job, so
    // only slurmctld can say it still waits. The expiry loop runs every 30 s.
    let (gw, script) = Gateway::funded("holds: {grace: 1s}\n");
    let script = script.as_str();
    let estimate = cost_micros(&ONPREM, 1, 1000, 0, 60);
    let sub = gw.submit(&["-H", script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let placed = now();
    // Past the lifetime and two expiry ticks after it.
    while now() < placed + 61 + 62 {
        std::thread::sleep(Duration::from_secs(2));
    }
    let job = gw.kept(sub.id, estimate);
    println!("still held after {} s: {} su", now() - placed, job["hold"]);
    let id = sub.id.to_string();
    gw.client_ok(&gw.alice, &["cancel", &id]);
    assert_eq!(gw.alice_held("physics", "su"), 0);
}

#[test]
fn node_features_reach_the_cluster_and_one_it_lacks_is_refused_with_nothing_held() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    // The dev stack's onprem nodes have the features skylake and ib; held, so it waits.
    let sub = gw.submit(&["-H", "-C", "skylake&ib", script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let queued = gw.dev.slurm(
        "squeue",
        "onprem",
        &["-h", "-j", &sub.cluster_job_id, "-o", "%f|%u"],
    );
    assert_eq!(
        queued.trim(),
        "skylake&ib|alice",
        "squeue of job {}",
        sub.cluster_job_id
    );
    println!(
        "features on the cluster: job {} {}",
        sub.cluster_job_id,
        queued.trim()
    );

    // A feature no node has: slurmctld refuses the job, bursar says so and keeps nothing held.
    let stderr = gw.refused(&["-M", "onprem", "-C", "gpu_a100", script]);
    assert!(stderr.contains("Invalid feature specification"), "{stderr}");
    assert_eq!(
        gw.alice_held("physics", "su"),
        cost_micros(&ONPREM, 1, 1000, 0, 60)
    );
    println!("refused: {}", stderr.trim());
}

/// `-L` and `--mincpus`: they reach slurmctld as sbatch's do, are held for and charged as
/// Slurm allocates and bills them (the dev stack's onprem: `Licenses=matlab:4`,
/// `License/matlab=2.0`), and more licenses than the cluster has are refused before anything is
/// held.
#[test]
fn licenses_and_cpus_per_node_reach_slurm_as_sbatch_s_and_are_held_and_charged_as_allocated() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    let options = ["-L", "matlab:2", "--mincpus=3"];
    let keys = ["Licenses", "MinCPUsNode", "NumCPUs", "TRES", "MinMemoryCPU"];
    let (held, ours) = same_as_sbatch(&gw, &options, script, &keys);
    assert_eq!(field(&ours, "Licenses"), "matlab:2", "{ours:?}");
    assert_eq!(field(&ours, "MinCPUsNode"), "3", "{ours:?}");
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);

    // More than onprem has: not eligible there, with the reason; pinned, refused, nothing held.
    let out = gw.client(
        &gw.alice,
        &[
            "quote", "--format", "json", "-M", "onprem", "-L", "matlab:5", script,
        ],
    );
    assert!(
        !out.status.success(),
        "no cluster can run it: bursar quote exits 1"
    );
    let quote: Value = serde_json::from_slice(&out.stdout).unwrap();
    let onprem = cluster_quote(&quote, "onprem");
    assert_eq!(onprem["eligible"], false, "{onprem}");
    assert!(
        onprem["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "the job asks for 5 matlab licenses; onprem has 4"),
        "{onprem}"
    );
    let stderr = gw.refused(&["-M", "onprem", "-L", "matlab:5", script]);
    assert!(stderr.contains("onprem has 4"), "{stderr}");
    println!("refused: {}", stderr.lines().next().unwrap_or(""));

    // Two licenses and three CPUs for the minute: held at 3 CPUs, 3000 MB (DefMemPerCPU) and
    // 2 × 2.0 su/h, then charged at what slurmdbd recorded the job holding.
    let estimate = licensed_cost_micros(&ONPREM, 3, 3000, 0, 2, 60);
    assert_eq!(
        estimate, 128_874,
        "(3 + 3000/1024 × 0.25 + 2 × 2.0) su/h × 60 s"
    );
    let sub = gw.submit(&["-L", "matlab:2", "--mincpus=3", script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    assert_eq!(gw.estimate(sub.id), estimate);
    settled_recording(&gw, &sub, &["license/matlab=2", "cpu=3", "mem=3000M"]);

    // Fewer tasks than --ntasks-per-node × nodes: 22.05 lays out (and charges) the latter.
    let sub = gw.submit(&["-N", "2", "-n", "2", "--ntasks-per-node=2", script]);
    let estimate = cost_micros(&ONPREM, 4, 4000, 0, 60);
    assert_eq!(gw.estimate(sub.id), estimate);
    settled_recording(&gw, &sub, &["cpu=4"]);
}

/// Nodes of two threads per core (the dev stack's `smt` partition: op-t1, 4 cores × 2 threads,
/// `CR_Core_Memory`): `--hint=nomultithread` reaches slurmctld as sbatch's does, and jobs are
/// held and charged for the whole cores Slurm allocates (`-n 1`: 2 CPUs; `-n 3` with the
/// hint: 6 CPUs, memory for the 3 asked for). A partition that does not say how many threads
/// its cores have is not eligible for the hint.
#[test]
fn whole_cores_are_held_and_charged_as_slurm_allocates_them_on_hyperthreaded_nodes() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    let options = ["-p", "smt", "-n", "3", "--hint=nomultithread"];
    let keys = [
        "ReqB:S:C:T",
        "NtasksPerN:B:S:C",
        "NumCPUs",
        "NumTasks",
        "TRES",
        "MinMemoryCPU",
    ];
    let (held, ours) = same_as_sbatch(&gw, &options, script, &keys);
    assert_eq!(field(&ours, "ReqB:S:C:T"), "0:0:*:1", "{ours:?}");
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);

    // Tasks of -c 3 on cores of 2 threads: priced for 3 whole cores on one node, and sent
    // pinned to it (split over two nodes, each task would round up to 2 cores).
    let sub = gw.submit(&["-H", "-p", "smt", "-n", "2", "-c", "3", "-t", "10", script]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(field(&job, "NumNodes"), "1-1", "{job:?}");
    assert_eq!(gw.estimate(sub.id), cost_micros(&ONPREM, 6, 6000, 0, 600));
    gw.client(&gw.alice, &["cancel", &sub.id.to_string()]);

    // cloud's partition does not say how many threads its cores have
    let out = gw.client(
        &gw.alice,
        &["quote", "--format", "json", "--hint=nomultithread", script],
    );
    let quote: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cloud = cluster_quote(&quote, "cloud");
    assert_eq!(cloud["eligible"], false, "{cloud}");
    assert!(
        cloud["reasons"]
            .to_string()
            .contains("node_threads_per_core"),
        "{cloud}"
    );

    // Held for 3 cores (6 CPUs) and 3 × 1000 MB, and for 1 core (2 CPUs, 2 × 1000 MB); both
    // fit op-t1's 4 cores at once. Charged at what slurmdbd recorded.
    // The hinted one prints its environment: the variables sbatch sets for the hint.
    let output = format!("/tmp/bursar-live-smt-{}-%j.out", std::process::id());
    let hinted = gw.submit(&[
        "-p",
        "smt",
        "-n",
        "3",
        "--hint=nomultithread",
        "-t",
        "1",
        "-o",
        &output,
        "--wrap",
        "env; sleep 10",
    ]);
    let plain = gw.submit(&["-p", "smt", "-n", "1", script]);
    for (sub, cpus, mem) in [(&hinted, 6, 3000), (&plain, 2, 2000)] {
        assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
        let estimate = cost_micros(&ONPREM, cpus, mem, 0, 60);
        assert_eq!(gw.estimate(sub.id), estimate, "{cpus} CPUs, {mem} MB");
        settled_recording(&gw, sub, &[&format!("cpu={cpus}"), &format!("mem={mem}M")]);
    }
    let path = output.replace("%j", &hinted.cluster_job_id);
    let env = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let _ = std::fs::remove_file(&path);
    for var in ["SLURM_HINT=nomultithread", "SLURM_THREADS_PER_CORE=1"] {
        assert!(env.lines().any(|l| l == var), "{var} in {env}");
    }
}

/// `-s`, `--gres-flags`, `--acctg-freq` reach slurmctld as sbatch's do, unpriced; with
/// `--get-user-env` slurmd loads alice's login environment under the job's.
#[test]
fn sharing_binding_sampling_and_the_login_environment_reach_slurm_as_sbatch_s() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    // the dev stack's JobAcctGatherFrequency is task=5: a longer task interval is refused
    let options = [
        "-s",
        "--gres=gpu:1",
        "--gres-flags=enforce-binding",
        "--acctg-freq=2",
    ];
    let keys = ["OverSubscribe", "GresEnforceBind", "TRES", "MinMemoryCPU"];
    let (held, ours) = same_as_sbatch(&gw, &options, script, &keys);
    assert_eq!(field(&ours, "OverSubscribe"), "YES", "{ours:?}");
    assert_eq!(field(&ours, "GresEnforceBind"), "Yes", "{ours:?}");
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);

    let output = format!("/tmp/bursar-live-login-{}-%j.out", std::process::id());
    let sub = gw.submit(&[
        "--get-user-env",
        "--acctg-freq=2",
        "-t",
        "1",
        "-o",
        &output,
        "--wrap",
        "env",
    ]);
    assert_eq!(
        gw.estimate(sub.id),
        cost_micros(&ONPREM, 1, 1000, 0, 60),
        "priced as without them"
    );
    settled_recording(&gw, &sub, &["cpu=1", "mem=1000M"]);
    let path = output.replace("%j", &sub.cluster_job_id);
    let env = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let _ = std::fs::remove_file(&path);
    for var in ["SLURM_GET_USER_ENV=1", "SLURM_ACCTG_FREQ=2"] {
        assert!(env.lines().any(|l| l == var), "{var} in {env}");
    }
}

/// `-m`, `--mem-bind`, `--gpu-bind` reach the job as sbatch's do, unpriced: slurmctld keeps
/// sbatch's GPU binding (22.05's slurmrestd drops the layout, as documented), and the job's
/// steps get the variables sbatch sets for all three.
#[test]
fn layouts_and_bindings_reach_the_job_and_its_steps_as_sbatch_s() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    let options = [
        "-m",
        "block:cyclic",
        "--mem-bind=v,local",
        "--gpu-bind=closest",
        "--gpu-freq=medium,memory=high",
        "--cpu-freq=1800000-2400000:ondemand",
        "--gres=gpu:1",
    ];
    let keys = [
        "TresBind",
        "TresFreq",
        "CPU_min_freq",
        "CPU_max_freq",
        "TRES",
        "MinMemoryCPU",
    ];
    let (held, ours) = same_as_sbatch(&gw, &options, script, &keys);
    assert_eq!(field(&ours, "TresBind"), "gpu:closest", "{ours:?}");
    assert_eq!(
        field(&ours, "TresFreq"),
        "gpu:medium,memory=high",
        "{ours:?}"
    );
    assert_eq!(field(&ours, "CPU_max_freq"), "2400000", "{ours:?}");
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);

    // Both ways, printing their environments.
    let layout = [
        "-m",
        "Cyclic:*",
        "--mem-bind=v,local",
        "--gpu-bind=closest",
        "--gpu-freq=high",
        "--cpu-freq=Performance",
    ];
    let (sub, direct, ours, theirs) =
        environments_both_ways(&gw, "layout", &layout, &["cpu=1", "mem=1000M"]);
    assert_eq!(
        gw.estimate(sub.id),
        cost_micros(&ONPREM, 1, 1000, 0, 60),
        "priced as without them"
    );
    for (var, value) in [
        ("SLURM_DISTRIBUTION", "cyclic:cyclic"),
        ("SLURM_MEM_BIND", "verbose,local"),
        ("SLURM_MEM_BIND_VERBOSE", "verbose"),
        ("SLURM_GPU_BIND", "closest"),
        ("SLURM_GPU_FREQ", "high"),
        ("SLURM_CPU_FREQ_REQ", "Performance"),
    ] {
        assert_eq!(ours.get(var).map(String::as_str), Some(value), "{var}");
        assert_eq!(
            ours.get(var),
            theirs.get(var),
            "{var}: bursar's against sbatch's"
        );
    }
    println!(
        "job {} and sbatch's {direct}: SLURM_DISTRIBUTION, SLURM_MEM_BIND, \
         SLURM_MEM_BIND_VERBOSE, SLURM_GPU_BIND, SLURM_GPU_FREQ, SLURM_CPU_FREQ_REQ the same",
        sub.cluster_job_id
    );
}

/// `--ntasks-per-gpu` shapes the job as sbatch's: the tasks from the GPUs, or the GPUs from
/// the tasks, priced so; the job's steps get `SLURM_NTASKS_PER_GPU` as sbatch's. With `-c`,
/// 22.05's sbatch job gets a CPU per task (its `min_cpus` counts one task), bursar's the CPUs
/// of every task it was priced for.
#[test]
fn tasks_per_gpu_shape_the_job_as_sbatch_s() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    // The GPUs asked for as each way keeps them; those derived from the tasks, nowhere.
    for (options, tasks, gpus, kept) in [
        (
            &["--gpus=2", "--ntasks-per-gpu=2"][..],
            4,
            2,
            Some("TresPerJob"),
        ),
        (&["-n", "4", "--ntasks-per-gpu=2"][..], 4, 2, None),
        (
            &["-N", "1", "--gpus-per-node=2", "--ntasks-per-gpu=1"][..],
            2,
            2,
            Some("TresPerNode"),
        ),
    ] {
        let mut keys = vec!["NumNodes", "NumTasks", "NumCPUs", "TRES", "NtasksPerTRES"];
        keys.extend(kept);
        let (held, ours) = same_as_sbatch(&gw, options, script, &keys);
        assert_eq!(field(&ours, "NumTasks"), tasks.to_string(), "{ours:?}");
        if kept.is_none() {
            assert!(!ours.contains_key("TresPerJob"), "{ours:?}");
        }
        assert!(
            field(&ours, "TRES").contains(&format!("gres/gpu={gpus}")),
            "{ours:?}"
        );
        assert_eq!(
            gw.estimate(held.id),
            cost_micros(&ONPREM, tasks, tasks * 1000, gpus, 600),
            "{options:?}: a CPU per task and the GPUs, for 10 minutes"
        );
        gw.client(&gw.alice, &["cancel", &held.id.to_string()]);
    }

    let (_, _, ours, theirs) = environments_both_ways(
        &gw,
        "tasks-per-gpu",
        &["--gpus=1", "--ntasks-per-gpu=2"],
        &["cpu=2", "mem=2000M", "gres/gpu=1"],
    );
    for (var, value) in [
        ("SLURM_NTASKS_PER_GPU", "2"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_GPUS", "1"),
    ] {
        assert_eq!(ours.get(var).map(String::as_str), Some(value), "{var}");
        assert_eq!(
            ours.get(var),
            theirs.get(var),
            "{var}: bursar's against sbatch's"
        );
    }

    // -c 2: two tasks of two CPUs, as priced.
    let sub = gw.submit(&[
        "-c",
        "2",
        "--gpus=1",
        "--ntasks-per-gpu=2",
        "-t",
        "1",
        "--wrap",
        "true",
    ]);
    assert_eq!(gw.estimate(sub.id), cost_micros(&ONPREM, 4, 4000, 1, 60),);
    settled_recording(&gw, &sub, &["cpu=4", "mem=4000M", "gres/gpu=1"]);
}

/// `--profile` and `--container` reach the job as sbatch's (22.05 shows the container; the
/// steps get `SLURM_PROFILE` and `SLURM_CONTAINER`; without `oci.conf` the job runs as any
/// other), unpriced; `--switches` and `--container-id` cannot reach 22.05's slurmrestd:
/// refused, naming why, nothing held.
#[test]
fn profiles_and_containers_reach_the_job_as_sbatch_s() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    let options = ["--profile=energy,task", "--container=/tmp"];
    let (held, ours) = same_as_sbatch(&gw, &options, script, &["Container", "TRES"]);
    assert_eq!(field(&ours, "Container"), "/tmp", "{ours:?}");
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);

    let (sub, _, ours, theirs) =
        environments_both_ways(&gw, "profile", &options, &["cpu=1", "mem=1000M"]);
    assert_eq!(
        gw.estimate(sub.id),
        cost_micros(&ONPREM, 1, 1000, 0, 60),
        "priced as without them"
    );
    assert_eq!(
        ours.get("SLURM_CONTAINER").map(String::as_str),
        Some("/tmp")
    );
    assert_eq!(ours.get("SLURM_CONTAINER"), theirs.get("SLURM_CONTAINER"));
    // (v0.0.38 is sent the variable alone: its slurmrestd, sent a `profile`, writes the
    // variable again from a buffer it does not clear, `0Energy,Task`.)
    assert_eq!(
        ours.get("SLURM_PROFILE").map(String::as_str),
        Some("Energy,Task")
    );
    assert_eq!(ours.get("SLURM_PROFILE"), theirs.get("SLURM_PROFILE"));

    for (option, says) in [
        ("--switches=2@10", "--switches cannot reach this cluster"),
        (
            "--container-id=c1",
            "--container-id cannot reach this cluster",
        ),
    ] {
        let stderr = gw.refused(&["-M", "onprem", option, "-t", "10", script]);
        assert!(stderr.contains(says), "{option}: {stderr}");
    }
}

/// `--exclusive=user` and `--exclusive=mcs` reach the job as sbatch's (`OverSubscribe=USER`,
/// `MCS`), held for what the job asks (Slurm allocates it no more), and a job that ran is
/// settled at its sacct cost with those CPUs; `--exclusive=topo` cannot reach 22.05's
/// slurmrestd (nor its sbatch): refused, naming why.
#[test]
fn exclusive_modes_share_nodes_as_sbatch_s_and_are_priced_as_asked() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    for mode in ["user", "mcs"] {
        let option = format!("--exclusive={mode}");
        let options = [option.as_str(), "-n", "2"];
        let (held, ours) =
            same_as_sbatch(&gw, &options, script, &["OverSubscribe", "NumCPUs", "TRES"]);
        assert_eq!(field(&ours, "OverSubscribe"), mode.to_uppercase());
        assert_eq!(
            gw.estimate(held.id),
            cost_micros(&ONPREM, 2, 2000, 0, 600),
            "{mode}: held for 2 CPUs and their memory for 10 minutes"
        );
        gw.client(&gw.alice, &["cancel", &held.id.to_string()]);
    }
    let sub = gw.submit(&[
        "-M",
        "onprem",
        "--exclusive=user",
        "-n",
        "2",
        "-t",
        "1",
        script,
    ]);
    settled_recording(&gw, &sub, &["cpu=2", "mem=2000M"]);
    let stderr = gw.refused(&["-M", "onprem", "--exclusive=topo", "-t", "10", script]);
    assert!(
        stderr.contains("--exclusive=topo cannot reach this cluster"),
        "{stderr}"
    );
}

/// `--spread-job`, `--wait-all-nodes`, `--use-min-nodes` reach the job as sbatch's (the same
/// nodes, tasks and TRES), held and settled as without them; `--spread-job` without `-N` is
/// refused, since Slurm would take as many nodes as are free.
#[test]
fn node_filling_options_shape_the_job_as_sbatch_s_and_are_not_priced() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    let options = NODE_FILLING;
    let (held, _) = same_as_sbatch(
        &gw,
        &options,
        script,
        &["NumNodes", "NumTasks", "NumCPUs", "TRES"],
    );
    assert_eq!(
        gw.estimate(held.id),
        cost_micros(&ONPREM, 4, 4000, 0, 600),
        "held for 4 CPUs and their memory for 10 minutes"
    );
    gw.client(&gw.alice, &["cancel", &held.id.to_string()]);
    let mut args = vec!["-M", "onprem", "-t", "1"];
    args.extend(options);
    args.push(script);
    let sub = gw.submit(&args);
    settled_recording(&gw, &sub, &["cpu=4", "mem=4000M", "node=2"]);
    let stderr = gw.refused(&[
        "-M",
        "onprem",
        "--spread-job",
        "-n",
        "4",
        "-t",
        "10",
        script,
    ]);
    assert!(
        stderr.contains("--spread-job without a node count"),
        "{stderr}"
    );
}

/// `--delay-boot` and `--mcs-label` reach the job as sbatch's (`DelayBoot`, `MCS_label`),
/// held as without them.
#[test]
fn reboot_delay_and_mcs_label_reach_the_job_as_sbatch_s() {
    let (gw, script) = Gateway::funded("");
    let (held, ours) = same_as_sbatch(
        &gw,
        &["--delay-boot=90", "--mcs-label=physics"],
        &script,
        &["DelayBoot", "MCS_label", "TRES"],
    );
    assert_eq!(field(&ours, "DelayBoot"), "01:30:00", "{ours:?}");
    assert_eq!(
        gw.estimate(held.id),
        cost_micros(&ONPREM, 1, 1000, 0, 600),
        "priced as without them"
    );
}

/// `--contiguous` and `--extra` cannot reach Slurm 22.05 (OpenAPI v0.0.38), naming why, and
/// nothing is held; `--priority` reaches the job of a Slurm operator (carol) as sbatch's, is
/// ignored for other users as for sbatch. (That `--hold` wins, as in sbatch, is checked on
/// 24.11, where a priority sent with it would undo the hold.)
#[test]
fn contiguous_extra_and_priority_as_slurm_22_05_takes_them() {
    let (gw, script) = Gateway::funded("");
    for (option, name) in [
        ("--contiguous", "--contiguous"),
        ("--extra=rack=a", "--extra"),
    ] {
        let stderr = gw.refused(&["-M", "onprem", option, "-t", "10", &script]);
        assert!(
            stderr.contains(&format!("{name} cannot reach this cluster"))
                && stderr.contains("v0.0.38"),
            "{stderr}"
        );
    }
    // waiting for its begin: an operator's priority is the job's, another user's is not
    let waiting = ["-M", "onprem", "--begin=now+1hour", "-t", "10"];
    let carol = gw.issue("carol", "user");
    for (token, priority, applied) in [
        (&carol, "TOP", true),
        (&carol, "12345", true),
        (&gw.alice, "12345", false),
    ] {
        let option = format!("--priority={priority}");
        let mut args = waiting.to_vec();
        args.extend([option.as_str(), script.as_str()]);
        let job = gw.submit_as(token, &args);
        let shown = field(
            &scontrol_job(&gw, "onprem", &job.cluster_job_id),
            "Priority",
        );
        let expected = if priority == "TOP" {
            "4294967293"
        } else {
            priority
        };
        assert_eq!(shown == expected, applied, "{option}: Priority={shown}");
        // (the admin's view: alice may not see carol's job)
        let (status, row) = gw.api("GET", &format!("/v1/jobs/{}", job.id), &gw.admin, None);
        assert_eq!(status, 200, "{row}");
        assert_eq!(
            micros(row["estimate"].as_str().unwrap()),
            cost_micros(&ONPREM, 1, 1000, 0, 600),
            "priced as without it"
        );
    }
}

/// `--tres-per-task`, which 22.05's sbatch lacks, reaches the job there as sbatch's `-c` and
/// `--gpus-per-task` do, and is held at their price.
#[test]
fn tres_per_task_reaches_slurm_22_05_as_cpus_and_gpus_per_task() {
    let (gw, script) = Gateway::funded("");
    let (held, ours, direct, theirs) = held_both_ways_as(
        &gw,
        "onprem",
        &["-n", "2", "--tres-per-task=cpu=2,gres/gpu=1"],
        &["-n", "2", "-c", "2", "--gpus-per-task=1"],
        &script,
    );
    for key in ["NumTasks", "NumCPUs", "CPUs/Task", "TRES", "TresPerTask"] {
        assert_eq!(
            ours.get(key),
            theirs.get(key),
            "{key}: bursar's job {} against sbatch's {direct}",
            held.cluster_job_id
        );
    }
    assert_eq!(field(&ours, "CPUs/Task"), "2", "{ours:?}");
    assert_eq!(
        gw.estimate(held.id),
        cost_micros(&ONPREM, 4, 4000, 2, 600),
        "4 CPUs, 4000 MB and 2 GPUs for 10 minutes"
    );
    println!(
        "on the cluster: bursar's job {} TRES={} TresPerTask={}, sbatch's {direct} the same",
        held.cluster_job_id,
        field(&ours, "TRES"),
        field(&ours, "TresPerTask")
    );
}

/// A script with `#PBS` lines, which 22.05's sbatch turns into options (its `#PBS -l walltime`
/// over the script's own `#SBATCH -t`, `-N` the job's name, nodes and tasks from `nodes=`, mail
/// types from `-m`), is held as sbatch's job with them; with `--ignore-pbs`, as sbatch's
/// without them.
#[test]
fn pbs_lines_are_read_as_sbatch_reads_them_unless_ignored() {
    let (gw, _) = Gateway::funded("");
    let path = format!("/tmp/bursar-live-pbs-{}.sh", std::process::id());
    std::fs::write(
        &path,
        "#!/bin/sh\n#SBATCH -A physics\n#SBATCH -t 10\n#PBS -N pbsname\n\
         #PBS -l nodes=1:ppn=2,walltime=00:20:00,mem=1500mb\n#PBS -m ae\n#PBS -j oe -V\n\
         #SBATCH -o /dev/null\nhostname\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let shape = |out: std::process::Output| {
        assert!(out.status.success(), "{out:?}");
        let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let fields = scontrol_job(&gw, "onprem", &job);
        gw.dev.slurm("scancel", "onprem", &[&job]);
        fields
    };
    let translated = gw.submit(&["-M", "onprem", "-H", &path]);
    let ignored = gw.submit(&["-M", "onprem", "-H", "--ignore-pbs", &path]);
    let ours = scontrol_job(&gw, "onprem", &translated.cluster_job_id);
    let ours_ignored = scontrol_job(&gw, "onprem", &ignored.cluster_job_id);
    let theirs = shape(gw.dev.sbatch_as("alice", "onprem", &["-H", &path]));
    let theirs_ignored = shape(
        gw.dev
            .sbatch_as("alice", "onprem", &["-H", "--ignore-pbs", &path]),
    );
    let _ = std::fs::remove_file(&path);
    for key in [
        "JobName",
        "TimeLimit",
        "TRES",
        "NumNodes",
        "NumTasks",
        "NumCPUs",
        "MinMemoryNode",
        "MailType",
    ] {
        assert_eq!(ours.get(key), theirs.get(key), "{key}");
        assert_eq!(ours_ignored.get(key), theirs_ignored.get(key), "{key}");
    }
    assert_eq!(field(&ours, "TimeLimit"), "00:20:00");
    assert_eq!(field(&ours, "JobName"), "pbsname");
    assert_eq!(field(&ours, "NumTasks"), "2");
    assert_eq!(field(&ours_ignored, "TimeLimit"), "00:10:00");
    // held at the price of what Slurm will allocate: 2 CPUs and 1500 MB for 20 minutes
    let tres = parse_tres(&field(&ours, "TRES"));
    assert_eq!(
        (tres.get("cpu"), tres.get("mem")),
        (Some(&2), Some(&1500)),
        "{tres:?}"
    );
    let expected = expected_micros(&ONPREM, &tres, 1200, 1);
    assert_eq!(gw.estimate(translated.id), expected);
    for held in [&translated, &ignored] {
        gw.client(&gw.alice, &["cancel", &held.id.to_string()]);
    }
}

/// `#PBS -W umask=027` through bursar and through sbatch: each job's batch script runs with
/// umask 0027 (bursar sends it as the `SLURM_UMASK` slurmd applies, as sbatch does).
#[test]
fn a_pbs_umask_reaches_the_job_as_under_sbatch() {
    let (gw, _) = Gateway::funded("");
    let pid = std::process::id();
    let path = format!("/tmp/bursar-live-umask-{pid}.sh");
    let out = format!("/tmp/bursar-live-umask-{pid}-%j.out");
    std::fs::write(
        &path,
        format!("#!/bin/sh\n#SBATCH -A physics -t 1 -o {out}\n#PBS -W umask=027\numask\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let ours = gw.submit(&["-M", "onprem", &path]);
    let direct = gw.dev.sbatch_as("alice", "onprem", &[&path]);
    assert!(direct.status.success(), "{direct:?}");
    let direct = String::from_utf8_lossy(&direct.stdout).trim().to_string();
    let _ = std::fs::remove_file(&path);
    let printed = |job: &str| {
        let file = out.replace("%j", job);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                if !text.is_empty() {
                    let _ = std::fs::remove_file(&file);
                    return text.trim().to_string();
                }
            }
            assert!(Instant::now() < deadline, "{file} was not written");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    assert_eq!(printed(&ours.cluster_job_id), "0027");
    assert_eq!(printed(&direct), "0027");
}

/// `options` on onprem through bursar and through sbatch, each job printing `env` under a
/// minute's limit: bursar's job settled at its sacct cost with `allocated` recorded, and
/// (bursar's submission, sbatch's job id, bursar's job's environment, sbatch's).
fn environments_both_ways(
    gw: &Gateway,
    tag: &str,
    options: &[&str],
    allocated: &[&str],
) -> (
    Submission,
    String,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
) {
    let pid = std::process::id();
    let ours = format!("/tmp/bursar-live-{tag}-{pid}-%j.out");
    let theirs = format!("/tmp/bursar-live-{tag}-sbatch-{pid}-%j.out");
    let mut args = options.to_vec();
    args.extend(["-t", "1", "-o", &ours, "--wrap", "env"]);
    let sub = gw.submit(&args);
    let mut args = vec!["-A", "physics", "-t", "1", "--chdir", "/tmp", "-o", &theirs];
    args.extend(options);
    args.extend(["--wrap", "env"]);
    let out = gw.dev.sbatch_as("alice", "onprem", &args);
    assert!(out.status.success(), "{out:?}");
    let direct = String::from_utf8_lossy(&out.stdout).trim().to_string();
    settled_recording(gw, &sub, allocated);
    gw.sacct("onprem", &direct, true);
    let ours = job_environment(&ours, &sub.cluster_job_id);
    let theirs = job_environment(&theirs, &direct);
    (sub, direct, ours, theirs)
}

/// The job's environment as `env` printed it to `pattern` (`%j`: `job`); the file is removed.
fn job_environment(pattern: &str, job: &str) -> BTreeMap<String, String> {
    let path = pattern.replace("%j", job);
    let env = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let _ = std::fs::remove_file(&path);
    env.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The quote of `cluster` in `bursar quote --format json`'s answer.
fn cluster_quote<'q>(quote: &'q Value, cluster: &str) -> &'q Value {
    quote
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["cluster"] == cluster)
        .unwrap_or_else(|| panic!("{cluster} is not quoted: {quote}"))
}

/// 10:00 local time `days` from today, as `YYYY-MM-DDT10:00` (sbatch's form; within
/// `holds.max_begin_ahead`).
fn days_ahead(days: u32) -> String {
    let out = Command::new("date")
        .args(["-d", &format!("+{days} days"), "+%Y-%m-%dT10:00"])
        .output()
        .expect("run date");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// One field of a job's `scontrol` fields; the test fails when it is missing.
fn field(job: &BTreeMap<String, String>, key: &str) -> String {
    job.get(key)
        .cloned()
        .unwrap_or_else(|| panic!("no {key} in {job:?}"))
}

/// `scontrol show job -o ID` as `field → value`.
fn scontrol_job(gw: &Gateway, cluster: &str, id: &str) -> BTreeMap<String, String> {
    let line = gw
        .dev
        .slurm("scontrol", cluster, &["show", "job", "-o", id]);
    scontrol_fields(&line)
}

/// [`held_both_ways`] on onprem, with `keys` of both jobs' `scontrol` fields the same: bursar's
/// submission and its job's fields.
fn same_as_sbatch(
    gw: &Gateway,
    options: &[&str],
    script: &str,
    keys: &[&str],
) -> (Submission, BTreeMap<String, String>) {
    let (held, ours, direct, theirs) = held_both_ways(gw, "onprem", options, script);
    for key in keys {
        assert_eq!(
            ours.get(*key),
            theirs.get(*key),
            "{key}: bursar's job {} against sbatch's {direct}",
            held.cluster_job_id
        );
    }
    let shown: Vec<String> = keys
        .iter()
        .map(|key| format!("{key}={}", field(&ours, key)))
        .collect();
    println!(
        "on the cluster: bursar's job {} {}, sbatch's job {direct} the same",
        held.cluster_job_id,
        shown.join(" ")
    );
    (held, ours)
}

/// The same options held on `cluster` through `bursar submit SCRIPT` and through the cluster's
/// own sbatch (which is cancelled): bursar's submission, its job's `scontrol` fields, sbatch's
/// job id and its fields.
fn held_both_ways(gw: &Gateway, cluster: &str, options: &[&str], script: &str) -> HeldBothWays {
    held_both_ways_as(gw, cluster, options, options, script)
}

/// What [`held_both_ways`] gives: bursar's submission, its job's `scontrol` fields, sbatch's
/// job id and its fields.
type HeldBothWays = (
    Submission,
    BTreeMap<String, String>,
    String,
    BTreeMap<String, String>,
);

/// [`held_both_ways`], bursar given `ours` and sbatch `theirs`.
fn held_both_ways_as(
    gw: &Gateway,
    cluster: &str,
    ours: &[&str],
    theirs: &[&str],
    script: &str,
) -> HeldBothWays {
    let options = theirs;
    let mut args = vec!["-H", "-M", cluster, "-t", "10"];
    args.extend(ours);
    args.push(script);
    let sub = gw.submit(&args);
    let ours = scontrol_job(gw, cluster, &sub.cluster_job_id);
    let mut sbatch_args = vec!["-H", "-A", "physics", "-t", "10", "--chdir", "/tmp"];
    sbatch_args.extend(["-o", "/dev/null"]);
    sbatch_args.extend(options);
    sbatch_args.extend(["--wrap", "true"]);
    let out = gw.dev.sbatch_as("alice", cluster, &sbatch_args);
    assert!(out.status.success(), "sbatch {options:?}: {out:?}");
    let direct = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let theirs = scontrol_job(gw, cluster, &direct);
    gw.dev.slurm("scancel", cluster, &[&direct]);
    (sub, ours, direct, theirs)
}

#[test]
fn a_job_reaches_slurm_shaped_as_sbatch_would_shape_it() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    // Nodes, tasks per node and memory per CPU as given (22.05 ignored a `[min, max]` node
    // list: such a job was created with one node; --mem-per-cpu was sent per node, and
    // --ntasks-per-node dropped).
    let sub = gw.submit(&[
        "-H",
        "-M",
        "onprem",
        "-N",
        "2",
        "-n",
        "4",
        "--ntasks-per-node=2",
        "--mem-per-cpu=500",
        "-t",
        "10",
        script,
    ]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    println!("onprem job {}: {job:?}", sub.cluster_job_id);
    assert_eq!(field(&job, "NumNodes"), "2-2", "as sbatch -N 2: {job:?}");
    assert!(field(&job, "TRES").contains("node=2"), "{job:?}");
    assert_eq!(field(&job, "NumTasks"), "4");
    assert!(field(&job, "NtasksPerN:B:S:C").starts_with("2:"), "{job:?}");
    assert_eq!(field(&job, "MinMemoryCPU"), "500M");
    assert_eq!(field(&job, "TimeLimit"), "00:10:00");
    assert_eq!(field(&job, "JobName"), "bursar-live", "the script's -J");

    // -N 1 keeps the tasks on one node, as sbatch's -N 1 does; without -N a job priced by its
    // CPUs alone is left to Slurm to place (sbatch: NumNodes=1, no maximum).
    let sub = gw.submit(&[
        "-H", "-M", "onprem", "-N", "1", "-n", "2", "-t", "10", script,
    ]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(field(&job, "NumNodes"), "1-1", "as sbatch -N 1: {job:?}");
    let sub = gw.submit(&["-H", "-M", "onprem", "-n", "2", "-t", "10", script]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(
        field(&job, "NumNodes"),
        "1",
        "as sbatch without -N: {job:?}"
    );

    // -t UNLIMITED runs at the partition's maximum (1 day here), not its default; without -J
    // the job is named after its script, as sbatch names it.
    let plain = gw.site.dir.path().join("plain.sh");
    std::fs::write(&plain, "#!/bin/sh\n#SBATCH -o /dev/null\nsleep 10\n").unwrap();
    let sub = gw.submit(&[
        "-H",
        "-M",
        "onprem",
        "-t",
        "UNLIMITED",
        plain.to_str().unwrap(),
    ]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(field(&job, "TimeLimit"), "1-00:00:00", "{job:?}");
    assert_eq!(field(&job, "JobName"), "plain.sh");
    let held = sub.cluster_job_id.clone();

    // The options only Slurm takes, as sbatch's same options leave the job (22.05 reads them
    // with sbatch's own parser: `no_kill` as "set", `no_requeue` for --no-requeue).
    let dependency = format!("--dependency=afterok:{held}");
    let options = [
        dependency.as_str(),
        "--kill-on-invalid-dep=yes",
        "--signal=R:USR1@90",
        "--no-requeue",
        "--open-mode=append",
        "--nice=5",
        "-x",
        "op-n2",
        "-i",
        "/dev/null",
        "-k",
    ];
    let (sub, ours, direct, theirs) = held_both_ways(&gw, "onprem", &options, script);
    for key in [
        "Nice",
        "Requeue",
        "ExcNodeList",
        "StdIn",
        "NumNodes",
        "Dependency",
    ] {
        assert_eq!(
            ours.get(key),
            theirs.get(key),
            "{key}: bursar's job {} against sbatch's {direct}",
            sub.cluster_job_id
        );
    }
    assert_eq!(field(&ours, "Nice"), "5");
    assert_eq!(field(&ours, "Requeue"), "0");
    assert_eq!(field(&ours, "ExcNodeList"), "op-n2");
    assert_eq!(
        field(&ours, "Dependency"),
        format!("afterok:{held}(unfulfilled)")
    );
    // A job array, as sbatch's: the same indexes and throttle (held, its tasks wait as one
    // record; 22.05 lists the indexes with the throttle: `ArrayJobId=M ArrayTaskId=0,2,4%2
    // ArrayTaskThrottle=2`), each task of one shape.
    let (sub, ours, direct, theirs) = held_both_ways(&gw, "onprem", &["--array=0-5:2%2"], script);
    println!("onprem array {}: {ours:?}", sub.cluster_job_id);
    for key in [
        "ArrayTaskId",
        "ArrayTaskThrottle",
        "NumNodes",
        "NumCPUs",
        "NumTasks",
        "TimeLimit",
        "MinMemoryCPU",
        "MinMemoryNode",
    ] {
        assert_eq!(
            ours.get(key),
            theirs.get(key),
            "{key}: bursar's array {} against sbatch's {direct}",
            sub.cluster_job_id
        );
    }
    assert_eq!(field(&ours, "ArrayJobId"), sub.cluster_job_id);
    assert_eq!(field(&ours, "ArrayTaskId"), "0,2,4%2");
    assert_eq!(field(&ours, "ArrayTaskThrottle"), "2");

    // --signal=B: (the batch shell only) cannot reach 22.05: refused, nothing held.
    let stderr = gw.refused(&["-M", "onprem", "--signal=B:USR1", "-t", "10", script]);
    assert!(
        stderr.contains("B:") && stderr.contains("v0.0.38"),
        "{stderr}"
    );

    // --gpus is GPUs for the job, not per node.
    let sub = gw.submit(&["-H", "-M", "cloud", "--gpus=h100:1", "-t", "10", script]);
    let job = scontrol_job(&gw, "cloud", &sub.cluster_job_id);
    println!("cloud job {}: {job:?}", sub.cluster_job_id);
    assert_eq!(field(&job, "TresPerJob"), "gres:gpu:h100:1", "{job:?}");
    assert!(!job.contains_key("TresPerNode"), "{job:?}");

    // GPUs per task, memory and CPUs per GPU, as 22.05's sbatch sends them.
    let gpu_relative: [&[&str]; 2] = [
        &[
            "-n",
            "2",
            "-c",
            "2",
            "--gpus-per-task=h100:1",
            "--mem-per-gpu=500",
        ],
        &["-n", "2", "--gpus=2", "--cpus-per-gpu=3"],
    ];
    for options in gpu_relative {
        let (sub, ours, direct, theirs) = held_both_ways(&gw, "cloud", options, script);
        for key in [
            "NumCPUs",
            "NumTasks",
            "CPUs/Task",
            "TresPerTask",
            "TresPerJob",
            "MemPerTres",
            "CpusPerTres",
            "MinMemoryCPU",
        ] {
            assert_eq!(
                ours.get(key),
                theirs.get(key),
                "{options:?} {key}: bursar's job {} against sbatch's {direct}",
                sub.cluster_job_id
            );
        }
    }
}

#[test]
fn a_job_bursts_to_the_next_cluster_and_is_refused_when_no_currency_covers_it() {
    let gw = Gateway::start();
    let script = job_script(gw.site.dir.path());
    let script = script.to_str().unwrap();
    let su_estimate = cost_micros(&ONPREM, 1, 1000, 0, 60);
    let usd_estimate = cost_micros(&CLOUD, 1, 1000, 0, 60);
    assert_eq!((su_estimate, usd_estimate), (20_736, 795));

    // org can't cover one onprem estimate (0.01 < 0.020736 su), but has dollars.
    gw.set_allocation("org", "su", "0.01");
    gw.set_allocation("org", "usd", "100");
    let sub = gw.submit(&[script]);
    assert_eq!(sub.cluster, "cloud", "{}", sub.stderr);
    assert!(sub.stderr.contains("burst from onprem"), "{}", sub.stderr);
    let job = gw.job(sub.id);
    assert_eq!(job["cluster"], "cloud");
    assert_eq!(job["currency"], "usd");
    assert_eq!(
        micros(job["estimate"].as_str().unwrap()),
        usd_estimate,
        "{job}"
    );
    assert_eq!(job["state"], "held", "{job}");
    assert_eq!(micros(job["hold"].as_str().unwrap()), usd_estimate, "{job}");
    let listed = gw.sacct("cloud", &sub.cluster_job_id, false);
    assert_eq!(
        listed[0], "alice",
        "sacct -M cloud User of job {}",
        sub.cluster_job_id
    );
    println!(
        "burst: job {} on cloud as alice, {} usd held (estimate {} usd)",
        sub.cluster_job_id, job["hold"], job["estimate"]
    );

    // Neither currency covers it now: 0.0005 < 0.000795 usd.
    gw.set_allocation("org", "usd", "0.0005");
    let jobs_before = gw.client_json(&gw.alice, &["jobs", "--all", "--format", "json"]);
    let out = gw.client(&gw.alice, &["submit", script]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
    for needle in [
        "no cluster can be paid for",
        "org",
        " su",
        " usd",
        "0.020736",
        "0.000795",
    ] {
        assert!(
            stderr.contains(needle),
            "{needle:?} missing from:\n{stderr}"
        );
    }
    println!("refused (exit 1):\n{}", stderr.trim_end());

    let request = json!({"account": "physics", "ntasks": 1, "time_limit_min": 1,
                         "script": "#!/bin/bash\nsleep 3\n", "working_dir": "/tmp"});
    let (status, answer) = gw.api("POST", "/v1/jobs", &gw.alice, Some(&request));
    assert_eq!(status, 402, "{answer}");
    assert_eq!(answer["error"], "insufficient_allocation", "{answer}");
    let clusters = answer["details"]["clusters"].as_array().unwrap();
    for (cluster, currency, estimate) in [
        ("onprem", "su", su_estimate),
        ("cloud", "usd", usd_estimate),
    ] {
        let entry = clusters
            .iter()
            .find(|c| c["cluster"] == cluster)
            .unwrap_or_else(|| panic!("{cluster} missing from details.clusters: {answer}"));
        assert_eq!(entry["account"], "org", "{entry}");
        assert_eq!(entry["currency"], currency, "{entry}");
        assert_eq!(
            micros(entry["estimate"].as_str().unwrap()),
            estimate,
            "{entry}"
        );
        let remaining = entry["remaining"].as_str().unwrap();
        assert!(micros(remaining) < estimate, "{entry}");
        // The CLI's table says the same of its own refusal a moment before. (Not the same
        // figure: this server also collects the jobs the other live tests run as alice in
        // physics, and charges them to org meanwhile.)
        let row: Vec<&str> = stderr
            .lines()
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<&str>>)
            .find(|fields| fields.first() == Some(&cluster))
            .unwrap_or_else(|| panic!("no {cluster} row in the CLI's table:\n{stderr}"));
        assert_eq!(row[1..3], ["org", currency], "{stderr}");
        assert_eq!(micros(row[3]), estimate, "{stderr}");
        assert!(micros(row[4]) < estimate, "{cluster}: {stderr}");
    }
    println!("POST /v1/jobs → 402 {}", answer["details"]);
    // Nothing was held or recorded for the refusals.
    let jobs_after = gw.client_json(&gw.alice, &["jobs", "--all", "--format", "json"]);
    assert_eq!(
        jobs_after["jobs"].as_array().unwrap().len(),
        jobs_before["jobs"].as_array().unwrap().len()
    );
}

#[test]
fn a_dstack_task_is_applied_fails_for_lack_of_capacity_and_settles_at_zero() {
    let gw = Gateway::start();
    gw.set_allocation("org", "usd", "100");
    let task = gw.site.path("task.dstack.yml");
    std::fs::write(
        &task,
        "type: task\nname: bursar-live\ncommands:\n  - echo hi\nresources:\n  cpu: 2\nmax_duration: 10m\n",
    )
    .unwrap();
    let task = task.to_str().unwrap();
    // 2 CPUs × 0.05 usd/h × 10 min.
    let estimate = 16_667;

    let quote = gw.client_json(
        &gw.alice,
        &["quote", "-M", "gpucloud", "--format", "json", task],
    );
    assert_eq!(
        micros(quote[0]["estimate"].as_str().unwrap()),
        estimate,
        "{quote}"
    );

    let sub = gw.submit(&["-A", "physics", "-M", "gpucloud", task]);
    assert_eq!(sub.cluster, "gpucloud");
    assert!(
        sub.cluster_job_id.starts_with("bursar-live-"),
        "{}",
        sub.cluster_job_id
    );
    let job = gw.job(sub.id);
    assert_eq!(job["currency"], "usd");
    assert_eq!(micros(job["estimate"].as_str().unwrap()), estimate, "{job}");

    // The run exists on the dstack server.
    let (status, run) = gw.dstack_run(&sub.cluster_job_id);
    assert_eq!(status, 200, "runs/get {}: {run}", sub.cluster_job_id);
    println!(
        "dstack run {} exists: status {}, user {}",
        sub.cluster_job_id, run["status"], run["user"]
    );

    // No backend can take it: it fails, and the collector settles the hold at 0.
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(micros(settled["charge"].as_str().unwrap()), 0, "{settled}");
    let (_, run) = gw.dstack_run(&sub.cluster_job_id);
    assert!(
        ["failed", "terminated"].contains(&run["status"].as_str().unwrap_or("")),
        "{}",
        run["status"]
    );
    let submission = &run["jobs"][0]["job_submissions"][0];
    assert!(
        submission["job_provisioning_data"].is_null(),
        "{submission}"
    );
    // Nothing held any more.
    assert_eq!(gw.alice_held("physics", "usd"), 0);
    println!(
        "dstack run {}: {} ({}); bursar job {} settled, charge {} usd, hold {}",
        sub.cluster_job_id,
        run["status"],
        submission["termination_reason"],
        sub.id,
        settled["charge"],
        settled["hold"]
    );
}

#[test]
fn a_dstack_run_retried_for_capacity_keeps_its_hold_past_its_lifetime_until_it_stops() {
    // The hold lives the time limit (max_duration 1 min) + grace (1 s). With no backend, dstack
    // retries the run for capacity under a new submission about every 30 s, lists it as active
    // meanwhile, and deletes all but the latest two of those submissions — the first, which
    // the hold is linked to, included. The expiry loop runs every 30 s.
    let gw = Gateway::start_with("holds: {grace: 1s}\n");
    gw.set_allocation("org", "usd", "100");
    let task = gw.site.path("retry.dstack.yml");
    std::fs::write(
        &task,
        "type: task\nname: bursar-retry\ncommands:\n  - echo hi\nresources:\n  cpu: 2\n\
         max_duration: 1m\nretry:\n  on_events: [no-capacity]\n  duration: 1h\n",
    )
    .unwrap();
    let sub = gw.submit(&["-A", "physics", "-M", "gpucloud", task.to_str().unwrap()]);
    assert_eq!(sub.cluster, "gpucloud");
    let placed = now();
    // 2 CPUs × 0.05 usd/h × 1 min.
    let estimate = 1_667;
    let job = gw.job(sub.id);
    assert_eq!(micros(job["estimate"].as_str().unwrap()), estimate, "{job}");

    // Past the lifetime and two expiry ticks after it.
    while now() < placed + 61 + 62 {
        std::thread::sleep(Duration::from_secs(2));
    }
    let (_, run) = gw.dstack_run(&sub.cluster_job_id);
    let submissions = run["jobs"][0]["job_submissions"].as_array().unwrap();
    let first_left = submissions[0]["submission_num"].as_u64().unwrap();
    assert!(
        ["pending", "submitted"].contains(&run["status"].as_str().unwrap_or("")),
        "the run is still retried: {}",
        run["status"]
    );
    assert!(first_left > 0, "dstack deleted the first submission: {run}");
    let job = gw.kept(sub.id, estimate);
    assert_eq!(gw.alice_held("physics", "usd"), estimate);
    println!(
        "dstack run {} {}, submissions {first_left}..{} left; still held after {} s: {} usd",
        sub.cluster_job_id,
        run["status"],
        submissions.len() as u64 + first_left - 1,
        now() - placed,
        job["hold"]
    );

    // Stopped on dstack itself: once the collector sees the run end, the hold settles at 0.
    let (status, body) = curl(
        gw.dev.var("BURSAR_DEV_DSTACK_URL"),
        "POST",
        &format!(
            "/api/project/{}/runs/stop",
            gw.dev.var("BURSAR_DEV_DSTACK_PROJECT")
        ),
        gw.dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN"),
        Some(&json!({ "runs_names": [sub.cluster_job_id], "abort": false })),
    );
    assert_eq!(status, 200, "runs/stop: {body}");
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(micros(settled["charge"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(gw.alice_held("physics", "usd"), 0);
    let (_, run) = gw.dstack_run(&sub.cluster_job_id);
    println!(
        "stopped: run {} ({}); bursar job {} settled, charge {} usd",
        run["status"], run["termination_reason"], sub.id, settled["charge"]
    );
}

/// Polls `probe` every half second until it returns something, for at most `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A node of a cluster taken down, as slurmctld does with a node that stops answering; resumed
/// when dropped (also when the test fails).
struct DownNode {
    conf: String,
    node: String,
}

impl DownNode {
    fn take(dev: &DevStack, cluster: &str, node: &str) -> DownNode {
        dev.slurm(
            "scontrol",
            cluster,
            &[
                "update",
                &format!("nodename={node}"),
                "state=down",
                "reason=bursar test: node failure",
            ],
        );
        let conf = if cluster == "cloud" {
            dev.var("BURSAR_DEV_CLOUD_CONF")
        } else {
            dev.var("BURSAR_DEV_ONPREM_CONF")
        };
        DownNode {
            conf: conf.to_string(),
            node: node.to_string(),
        }
    }
}

impl Drop for DownNode {
    fn drop(&mut self) {
        // With ReturnToService=2 the node may be back already, when slurmctld refuses to
        // resume it ("Invalid node state specified").
        let _ = Command::new("scontrol")
            .args(["update", &format!("nodename={}", self.node), "state=resume"])
            .env("SLURM_CONF", &self.conf)
            .stderr(Stdio::null())
            .status();
        let state = Command::new("sinfo")
            .args(["-h", "-n", &self.node, "-o", "%T"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if state.starts_with("down") || state.starts_with("drain") {
            eprintln!(
                "node {} is still {state}: scontrol update nodename={} state=resume",
                self.node, self.node
            );
        }
    }
}

#[test]
fn a_job_requeued_after_its_node_fails_keeps_its_hold_until_it_ends() {
    let (gw, _) = Gateway::funded_alone();
    let script = gw.site.path("long.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\n#SBATCH -A physics\n#SBATCH -t 5\n#SBATCH -n 1\n#SBATCH -J bursar-node-fail\n\
         #SBATCH -o /dev/null\nsleep 600\n",
    )
    .unwrap();
    let estimate = cost_micros(&ONPREM, 1, 1000, 0, 300);
    let sub = gw.submit(&[script.to_str().unwrap()]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let job = sub.cluster_job_id.as_str();
    let squeue = || {
        gw.dev
            .slurm("squeue", "onprem", &["-h", "-j", job, "-o", "%T %N"])
            .trim()
            .to_string()
    };
    let node = wait_for("the job running", JOB_WAIT, || {
        let line = squeue();
        let (state, node) = line.split_once(' ')?;
        (state == "RUNNING").then(|| node.to_string())
    });

    // Its node fails: slurmctld logs the run ended NODE_FAIL and queues the job to run again
    // under the same id (from two minutes on, as slurmctld does after a requeue).
    let down = DownNode::take(&gw.dev, "onprem", &node);
    let records = wait_for("sacct listing the NODE_FAIL run", JOB_WAIT, || {
        let out = gw.dev.slurm(
            "sacct",
            "onprem",
            &[
                "-M",
                "onprem",
                "-j",
                job,
                "-D",
                "-X",
                "-n",
                "-P",
                "--format=State,Submit",
            ],
        );
        out.lines()
            .any(|l| l.starts_with("NODE_FAIL"))
            .then(|| out.trim().replace('\n', "; "))
    });
    println!("job {job} on {node}: node down; sacct -D: {records}");

    // The server collects the NODE_FAIL record (refunded by default)…
    let posted = wait_for("bursar posting the NODE_FAIL record", SETTLE_WAIT, || {
        let charges = gw.site.json(&["charges", "-M", "onprem"]);
        charges["charges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["job_id"] == job && c["state"] == "NODE_FAIL")
            .cloned()
    });
    assert_eq!(micros(posted["amount"].as_str().unwrap()), 0, "{posted}");
    // …and the hold stays while the job waits to run again, through several collection passes
    // (every 2 s), each of which asks slurmctld.
    std::thread::sleep(Duration::from_secs(8));
    let waiting = squeue();
    assert!(waiting.starts_with("PENDING"), "squeue: {waiting:?}");
    let view = gw.job(sub.id);
    assert_eq!(
        view["state"],
        "held",
        "{view}\nserver log:\n{}",
        gw.server_log()
    );
    assert_eq!(micros(view["hold"].as_str().unwrap()), estimate, "{view}");
    assert_eq!(gw.alice_held("physics", "su"), estimate);
    println!(
        "after the NODE_FAIL record: job {job} {waiting}, bursar job {} held {} su",
        sub.id, view["hold"]
    );

    // It is cancelled before it runs again: it has ended, and the hold settles.
    gw.dev.slurm("scancel", "onprem", &["-M", "onprem", job]);
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(micros(settled["charge"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(gw.alice_held("physics", "su"), 0);
    println!("cancelled while queued again: {settled}");
    drop(down);
}

/// A one-minute job array script for alice on physics (`--array=ARRAY`), each task sleeping
/// `seconds`.
fn array_script(gw: &Gateway, array: &str, seconds: u32) -> String {
    let script = gw.site.dir.path().join("array.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH -A physics\n#SBATCH -t 1\n#SBATCH --array={array}\n\
             #SBATCH -o /dev/null\nsleep {seconds}\n"
        ),
    )
    .unwrap();
    script.to_str().unwrap().to_string()
}

/// The `sacct -X` lines of job array `array` on `cluster`: `JobID`, `State`, `ElapsedRaw`,
/// `AllocTRES` of each task (and of its pending rest, while it has one).
fn array_sacct(gw: &Gateway, cluster: &str, array: &str) -> Vec<Vec<String>> {
    let out = gw.dev.slurm(
        "sacct",
        cluster,
        &[
            "-M",
            cluster,
            "-j",
            array,
            "-X",
            "-n",
            "-P",
            "--noconvert",
            "--format=JobID,State,ElapsedRaw,AllocTRES",
        ],
    );
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

/// What `tasks` (lines of [`array_sacct`]) cost on onprem.
fn onprem_cost(tasks: &[Vec<String>]) -> i64 {
    tasks
        .iter()
        .map(|t| {
            let (cpu, mem, gpus) = tres_counts(&t[3]);
            cost_micros(&ONPREM, cpu, mem, gpus, t[2].parse().unwrap())
        })
        .sum()
}

/// [`array_sacct`] once `tasks` tasks of the array have ended.
fn array_tasks_done(gw: &Gateway, cluster: &str, array: &str, tasks: usize) -> Vec<Vec<String>> {
    wait_for(
        &format!("the {tasks} tasks of array {array} on {cluster} to end"),
        JOB_WAIT,
        || {
            let lines = array_sacct(gw, cluster, array);
            let ended = lines
                .iter()
                .filter(|f| {
                    !["PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "COMPLETING"]
                        .contains(&f[1].split_whitespace().next().unwrap_or(""))
                })
                .count();
            (ended == tasks && lines.len() == tasks).then_some(lines)
        },
    )
}

#[test]
fn a_job_array_holds_every_task_releases_each_as_it_ends_and_settles_at_their_sacct_cost() {
    let (gw, _) = Gateway::funded("");
    // Three tasks, one at a time (`%1`), each 6 s: the collection (every 2 s) sees each end.
    let script = array_script(&gw, "0-4:2%1", 6);
    let script = script.as_str();
    let task = cost_micros(&ONPREM, 1, 1000, 0, 60);
    let estimate = 3 * task;

    let quote = gw.client_json(&gw.alice, &["quote", "--format", "json", script]);
    let onprem = cluster_quote(&quote, "onprem");
    assert_eq!(
        micros(onprem["estimate"].as_str().unwrap()),
        estimate,
        "{onprem}"
    );
    let sub = gw.submit(&[script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let job = gw.job(sub.id);
    assert_eq!(micros(job["estimate"].as_str().unwrap()), estimate, "{job}");
    assert_eq!(micros(job["hold"].as_str().unwrap()), estimate, "{job}");
    assert_eq!(gw.alice_held("physics", "su"), estimate);
    // On the cluster: one array of tasks 0, 2 and 4, as alice.
    let shown = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(shown["ArrayJobId"], sub.cluster_job_id, "{shown:?}");
    assert_eq!(
        shown["UserId"].split('(').next(),
        Some("alice"),
        "{shown:?}"
    );
    println!(
        "held: array {} ({:?}), {} su for 3 tasks",
        sub.cluster_job_id, shown["ArrayTaskId"], job["hold"]
    );

    // A task ends while others wait: the hold shrinks by one task's share, still held.
    let partial = wait_for("a task's share released", JOB_WAIT, || {
        let job = gw.job(sub.id);
        let hold = micros(job["hold"].as_str().unwrap());
        (job["state"] == "held" && hold < estimate).then_some(hold)
    });
    assert!(
        partial == 2 * task || partial == task,
        "hold {partial} of {estimate}"
    );
    assert_eq!(gw.alice_held("physics", "su"), partial);
    println!("one task ended: {partial} µsu still held");

    // All end: settled at what sacct says the three tasks used.
    let tasks = array_tasks_done(&gw, "onprem", &sub.cluster_job_id, 3);
    let mut ids: Vec<&str> = tasks.iter().map(|t| t[0].as_str()).collect();
    ids.sort_unstable();
    let want: Vec<String> = [0, 2, 4]
        .iter()
        .map(|i| format!("{}_{i}", sub.cluster_job_id))
        .collect();
    assert_eq!(ids, want, "{tasks:?}");
    let expected = onprem_cost(&tasks);
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(
        micros(settled["charge"].as_str().unwrap()),
        expected,
        "{settled}\n{tasks:?}"
    );
    assert_eq!(gw.alice_held("physics", "su"), 0);
    println!("settled: {tasks:?}; charge {} su", settled["charge"]);
}

#[test]
fn cancelling_a_job_array_cancels_every_task_and_releases_its_hold() {
    let (gw, script) = Gateway::funded("");
    let sub = gw.submit(&["--array=1-3", "-H", &script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let estimate = 3 * cost_micros(&ONPREM, 1, 1000, 0, 60);
    assert_eq!(gw.alice_held("physics", "su"), estimate);
    let out = gw.client_ok(&gw.alice, &["cancel", &sub.id.to_string()]);
    assert!(out.contains("its hold is released"), "{out}");
    assert_eq!(gw.alice_held("physics", "su"), 0);
    let tasks = array_tasks_done(&gw, "onprem", &sub.cluster_job_id, 1);
    assert!(tasks[0][1].starts_with("CANCELLED"), "{tasks:?}");
    let left = gw.dev.slurm(
        "squeue",
        "onprem",
        &["-h", "-j", &sub.cluster_job_id, "-o", "%i|%T"],
    );
    assert_eq!(left.trim(), "", "still queued: {left}");
    println!("cancelled: {}; sacct {tasks:?}", out.trim());
}

#[test]
fn a_job_array_cancelled_on_its_cluster_settles_at_what_its_tasks_ran() {
    let (gw, _) = Gateway::funded("");
    // Four tasks one at a time, each 8 s: cancelled with `scancel` after the first ends, the
    // second runs and two never do.
    let script = array_script(&gw, "0-3%1", 8);
    let sub = gw.submit(&[&script]);
    assert_eq!(sub.cluster, "onprem", "{}", sub.stderr);
    let task = cost_micros(&ONPREM, 1, 1000, 0, 60);
    wait_for("a task's share released", JOB_WAIT, || {
        let hold = micros(gw.job(sub.id)["hold"].as_str().unwrap());
        (hold < 4 * task).then_some(hold)
    });
    let out = Command::new("runuser")
        .args(["-u", "alice", "--", "scancel", &sub.cluster_job_id])
        .env("SLURM_CONF", gw.dev.var("BURSAR_DEV_ONPREM_CONF"))
        .output()
        .unwrap();
    assert!(out.status.success(), "scancel: {out:?}");
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(gw.alice_held("physics", "su"), 0);
    let tasks = array_sacct(&gw, "onprem", &sub.cluster_job_id);
    let expected = onprem_cost(&tasks);
    assert!(expected > 0, "{tasks:?}");
    // The charge is every task's that ran. When slurmdbd first logs the pending rest naming
    // the task that had just started (`22_[1-3%1]`, renamed `22_[2-3%1]` once that task's
    // own record is written) and bursar reads the rest before that task's record, the job
    // settles a pass before that task's charge is collected: wait for it (the known limit of
    // reading never-run tasks from the rest's name; a task record read first, or with the
    // rest, keeps the job held until it ends).
    let charged = wait_for("the tasks' charge", JOB_WAIT, || {
        let job = gw.job(sub.id);
        let charge = micros(job["charge"].as_str().unwrap_or("0"));
        (charge == expected).then_some(job)
    });
    assert_eq!(micros(charged["hold"].as_str().unwrap()), 0, "{charged}");
    println!(
        "cancelled on the cluster: {tasks:?}; settled, charged {} su (at settling {} su)",
        charged["charge"], settled["charge"]
    );
}

#[test]
fn an_exclusive_job_is_shaped_as_sbatch_s_and_held_for_the_whole_nodes_slurm_gives_it() {
    let (gw, script) = Gateway::funded("");
    // Held, through bursar and through sbatch: the same request for whole nodes.
    for (cluster, options) in [
        ("onprem", &["--exclusive", "-N", "2", "-n", "2"][..]),
        ("cloud", &["--exclusive", "--mem=0"][..]),
    ] {
        let (sub, ours, direct, mut theirs) = held_both_ways(&gw, cluster, options, &script);
        if options.contains(&"--mem=0") {
            // Memory per node: the job runs on the one node it is priced for, which bursar
            // pins as a maximum too (sbatch leaves it open: `1`).
            assert_eq!(theirs.get("NumNodes").map(String::as_str), Some("1"));
            theirs.insert("NumNodes".into(), "1-1".into());
        }
        for field in [
            "OverSubscribe",
            "NumNodes",
            "MinMemoryNode",
            "MinMemoryCPU",
            "ReqTRES",
        ] {
            assert_eq!(
                ours.get(field),
                theirs.get(field),
                "{cluster} {options:?} {field}: job {} against sbatch's {direct}\n{ours:?}\n{theirs:?}",
                sub.cluster_job_id
            );
        }
        gw.dev.slurm("scancel", cluster, &[&sub.cluster_job_id]);
        println!("{cluster} {options:?}: {ours:?}");
    }

    // One that runs: held at the price of what Slurm allocates it for the whole time limit,
    // charged what it used of that.
    let sub = gw.submit(&["--exclusive", "-M", "onprem", &script]);
    let estimate = gw.estimate(sub.id);
    let done = gw.sacct("onprem", &sub.cluster_job_id, true);
    let (cpu, mem, gpus) = tres_counts(&done[4]);
    assert_eq!(
        (cpu, gpus),
        (8, 2),
        "every CPU and GPU of the node: {done:?}"
    );
    assert_eq!(
        estimate,
        cost_micros(&ONPREM, cpu, mem, gpus, 60),
        "the hold is Slurm's allocation ({}) for the 1-minute limit",
        done[4]
    );
    let settled = gw.wait_settled(sub.id);
    let elapsed: u128 = done[3].parse().unwrap();
    assert_eq!(
        micros(settled["charge"].as_str().unwrap()),
        cost_micros(&ONPREM, cpu, mem, gpus, elapsed),
        "{settled}"
    );
    println!(
        "exclusive: {} held {} su, ran {elapsed} s, settled at {} su",
        done[4],
        gw.job(sub.id)["estimate"],
        settled["charge"]
    );
}

#[test]
fn script_arguments_are_refused_where_slurmrestd_would_crash_on_them() {
    // Slurm 22.05.0 – 22.05.8's slurmrestd reads freed memory when a job has `argv` and dies
    // (22.05.9 fixed it): bursar must never send it there. Debian 12's is 22.05.8.
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();
    let stderr = gw.refused(&["-M", "onprem", script, "in.dat", "two words"]);
    println!("refused: {stderr}");
    assert!(
        stderr.contains("script arguments cannot reach this cluster")
            && stderr.contains("Slurm 22.05.8"),
        "{stderr}"
    );
    // Nothing held: no job was recorded.
    let jobs = gw.client_json(&gw.alice, &["jobs", "--format", "json"]);
    assert_eq!(jobs["jobs"], json!([]), "{jobs}");
    // The script's path alone is left out there, and the cluster's slurmrestd still serves:
    // the same script without arguments runs and settles.
    let sub = gw.submit(&["-M", "onprem", script]);
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    gw.refused(&["-M", "onprem", script, "x"]);
}

#[test]
fn wait_returns_the_job_s_exit_code_as_sbatch_wait_does() {
    let (gw, _) = Gateway::funded("");
    let script = gw.site.dir.path().join("exits.sh");
    let command = "sleep 1; exit ${SLURM_ARRAY_TASK_ID:-3}";
    std::fs::write(
        &script,
        format!("#!/bin/sh\n#SBATCH -A physics\n#SBATCH -t 1\n#SBATCH -o /dev/null\n{command}\n"),
    )
    .unwrap();
    let script = script.to_str().unwrap();
    // A job that exits 3, and an array whose tasks exit 0, 1 and 2 (sbatch: the highest).
    for array in [None, Some("--array=0-2")] {
        let mut args = vec!["submit", "-M", "onprem", "--wait"];
        args.extend(array);
        args.push(script);
        let started = Instant::now();
        let ours = gw.client(&gw.alice, &args);
        let ours_took = started.elapsed();
        let mut sbatch_args = vec!["--wait", "-A", "physics", "-t", "1", "-o", "/dev/null"];
        sbatch_args.extend(array);
        sbatch_args.extend(["--wrap", command]);
        let started = Instant::now();
        let theirs = gw.dev.sbatch_as("alice", "onprem", &sbatch_args);
        let theirs_took = started.elapsed();
        println!(
            "{array:?}: bursar submit --wait exited {:?} after {ours_took:?}; sbatch --wait {:?} after {theirs_took:?}",
            ours.status.code(),
            theirs.status.code()
        );
        let expected = if array.is_some() { 2 } else { 3 };
        assert_eq!(
            ours.status.code(),
            Some(expected),
            "{}",
            String::from_utf8_lossy(&ours.stderr)
        );
        assert_eq!(ours.status.code(), theirs.status.code(), "{theirs:?}");
        let stdout = String::from_utf8_lossy(&ours.stdout);
        assert!(stdout.starts_with("Submitted batch job "), "{stdout}");
    }
}

#[test]
fn a_job_told_when_to_begin_runs_then_and_one_past_its_deadline_settles_at_nothing() {
    let (gw, script) = Gateway::funded("");
    let script = script.as_str();

    // As sbatch's: both read the times on this machine's clock and zone. 22.05's slurmrestd
    // would read a bare number as a date: bursar sends `uts<seconds>`. With --tmp and
    // --prefer, which only choose the nodes.
    let (begin, deadline) = (days_ahead(10), days_ahead(11));
    let (begin, deadline) = (format!("--begin={begin}"), format!("--deadline={deadline}"));
    let options = [
        begin.as_str(),
        deadline.as_str(),
        "--time-min=5",
        "--tmp=2G",
        "--prefer=ib",
        "-w",
        "op-n[1-2]",
        "-n",
        "2",
    ];
    let (sub, ours, direct, theirs) = held_both_ways(&gw, "onprem", &options, script);
    for key in [
        "EligibleTime",
        "Deadline",
        "TimeMin",
        "TimeLimit",
        "MinTmpDiskNode",
        "Prefer",
        "ReqNodeList",
        "NumCPUs",
        "NumTasks",
    ] {
        assert_eq!(
            ours.get(key),
            theirs.get(key),
            "{key}: bursar's job {} against sbatch's {direct}",
            sub.cluster_job_id
        );
    }
    // scontrol prints Unix seconds here (SLURM_TIME_FORMAT=%s): a day apart, in any zone.
    let seconds = |key: &str| -> i64 {
        let value = field(&ours, key);
        value
            .parse()
            .unwrap_or_else(|_| panic!("{key}={value}: {ours:?}"))
    };
    assert!(seconds("EligibleTime") > now() + 9 * 86_400, "{ours:?}");
    assert_eq!(seconds("Deadline") - seconds("EligibleTime"), 86_400);
    assert_eq!(field(&ours, "TimeMin"), "00:05:00");
    assert_eq!(field(&ours, "MinTmpDiskNode"), "2G");
    assert_eq!(field(&ours, "Prefer"), "ib");
    // -w names two nodes: the job runs on both, one task each, and is priced so (a CPU and
    // DefMemPerCPU on each, for the 10-minute limit). sbatch asks for at least two nodes
    // (`NumNodes=2`); bursar pins the count it priced.
    assert_eq!(field(&ours, "ReqNodeList"), "op-n[1-2]");
    assert_eq!(field(&ours, "NumNodes"), "2-2");
    let held = gw.estimate(sub.id);
    assert_eq!(held, cost_micros(&ONPREM, 2, 2000, 0, 600));
    // Fewer tasks than names: sbatch keeps as many names as tasks, and so does bursar.
    let (trimmed, ours_1, direct_1, theirs_1) =
        held_both_ways(&gw, "onprem", &["-n", "1", "-w", "op-n[1-2]"], script);
    for key in ["ReqNodeList", "NumCPUs"] {
        assert_eq!(
            ours_1.get(key),
            theirs_1.get(key),
            "{key}: bursar's job {} against sbatch's {direct_1}",
            trimmed.cluster_job_id
        );
    }
    assert_eq!(field(&ours_1, "ReqNodeList"), "op-n1");
    gw.client_ok(&gw.alice, &["cancel", &trimmed.id.to_string()]);
    // Its hold lasts from the begin: the job view says until when.
    let expires = gw.job(sub.id)["hold_expires_at"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let out = Command::new("date")
        .args(["-u", "-d", "+9 days", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    let in_nine_days = String::from_utf8(out.stdout).unwrap();
    assert!(
        expires.as_str() > in_nine_days.trim(),
        "hold_expires_at {expires:?}, not after {in_nine_days}"
    );
    let id = sub.id.to_string();
    gw.client_ok(&gw.alice, &["cancel", &id]);
    assert_eq!(gw.alice_held("physics", "su"), 0);

    // One that begins 20 s from now: it waits for its begin time, then runs and settles at
    // its sacct cost.
    let sub = gw.submit(&["--begin=now+20seconds", script]);
    let job = scontrol_job(&gw, "onprem", &sub.cluster_job_id);
    assert_eq!(field(&job, "JobState"), "PENDING", "{job:?}");
    assert_eq!(field(&job, "Reason"), "BeginTime", "{job:?}");
    let done = gw.sacct("onprem", &sub.cluster_job_id, true);
    assert_eq!(done[2], "COMPLETED", "{done:?}");
    // Unix seconds (SLURM_TIME_FORMAT=%s).
    let times = gw.dev.slurm(
        "sacct",
        "onprem",
        &[
            "-M",
            "onprem",
            "-j",
            &sub.cluster_job_id,
            "-X",
            "-n",
            "-P",
            "-o",
            "Submit,Eligible,Start",
        ],
    );
    let times: Vec<i64> = times
        .trim()
        .split('|')
        .map(|t| t.parse().unwrap_or_else(|_| panic!("sacct time {t:?}")))
        .collect();
    let (submit, eligible, started) = (times[0], times[1], times[2]);
    assert!(
        (19..=21).contains(&(eligible - submit)),
        "eligible 20 s after its submission: {times:?}"
    );
    assert!(started >= eligible, "{times:?}");
    let elapsed: u128 = done[3].parse().unwrap();
    let (cpu, mem, gpus) = tres_counts(&done[4]);
    let expected = cost_micros(&ONPREM, cpu, mem, gpus, elapsed);
    let settled = gw.wait_settled(sub.id);
    assert_eq!(
        micros(settled["charge"].as_str().unwrap()),
        expected,
        "{settled}"
    );
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    println!(
        "job {} began {} s after its submission; settled at {} su",
        sub.cluster_job_id,
        started - submit,
        settled["charge"]
    );

    // A deadline bursar refuses before holding anything: the 1-minute limit cannot end by it.
    let stderr = gw.refused(&["-M", "onprem", "--deadline=now+30seconds", script]);
    assert!(stderr.contains("would end after --deadline"), "{stderr}");
    assert_eq!(gw.alice_held("physics", "su"), 0);

    // A held job released too late to end by its deadline: Slurm ends it unstarted
    // (DEADLINE), and its hold settles at nothing.
    let sub = gw.submit(&["-H", "--deadline=now+75seconds", script]);
    let estimate = cost_micros(&ONPREM, 1, 1000, 0, 60);
    assert_eq!(gw.alice_held("physics", "su"), estimate);
    let too_late = now() + 20;
    while now() < too_late {
        std::thread::sleep(Duration::from_secs(1));
    }
    gw.dev
        .slurm("scontrol", "onprem", &["release", &sub.cluster_job_id]);
    let done = gw.sacct("onprem", &sub.cluster_job_id, true);
    assert_eq!(done[2], "DEADLINE", "{done:?}");
    let settled = gw.wait_settled(sub.id);
    assert_eq!(micros(settled["charge"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
    assert_eq!(gw.alice_held("physics", "su"), 0);
    println!(
        "job {}: sacct {}; settled at {} su",
        sub.cluster_job_id,
        done.join("|"),
        settled["charge"]
    );
}
