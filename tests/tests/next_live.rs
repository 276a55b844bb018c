//! bursar against Slurm 24.11: the cluster `next` that `deploy/dev/slurm-next.sh` runs in a
//! Debian 13 chroot, whose slurmrestd speaks OpenAPI v0.0.40, v0.0.41 and v0.0.42 — the
//! versions of Slurm 23.11 and later, beside the 22.05 clusters (v0.0.38) of the other tests.
//!
//! - A job mix submitted with the cluster's own `sbatch` is charged exactly what its `sacct`
//!   says, by slurmrestd at each of the three versions and by the sacct source alike, and a
//!   second pass posts nothing.
//! - A job submitted through `bursar submit` at each version reaches Slurm as the cluster's own
//!   `sbatch` shapes the same options, runs as its user and settles at its sacct cost.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bursar_tests::{
    bursar_bin, expected_micros, micros, parse_tres, scontrol_fields, unix_seconds, DevStack, Site,
    NODE_FILLING, ONPREM,
};
use serde_json::Value;

/// One test at a time on `next`: each waits for its own jobs, and the shape comparisons need
/// both nodes free.
static CLUSTER: Mutex<()> = Mutex::new(());

const VERSIONS: [&str; 3] = ["v0.0.40", "v0.0.41", "v0.0.42"];
const WAIT: Duration = Duration::from_secs(180);
const UNFINISHED: [&str; 6] = [
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "RESIZING",
    "SUSPENDED",
    "COMPLETING",
];

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The soft open-files limit of the login shell sbatch and `bursar submit` run in (slurmd's
/// own is higher): the jobs get it as the shell's, as sbatch passes it on.
const LOGIN_NOFILE: &str = "1000";

/// `program` run by a shell with the login limits ([`LOGIN_NOFILE`]).
fn in_login_shell(program: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        &format!("ulimit -S -n {LOGIN_NOFILE} && exec \"$0\" \"$@\""),
        program,
    ]);
    cmd
}

/// A Slurm command in the chroot (`next-slurm`), as `user` or root, `stdin` fed to it, from a
/// login shell ([`in_login_shell`]).
fn next_slurm(dev: &DevStack, user: Option<&str>, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = in_login_shell(dev.var("BURSAR_NEXT_BIN"));
    if let Some(user) = user {
        cmd.args(["-u", user]);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run next-slurm");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or("").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "next-slurm {user:?} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The job id in `bursar submit`'s sbatch line (`Submitted batch job 12 on cluster next`).
fn submitted_job(stdout: &str) -> String {
    stdout
        .trim()
        .strip_prefix("Submitted batch job ")
        .and_then(|r| r.strip_suffix(" on cluster next"))
        .unwrap_or_else(|| panic!("not sbatch's line: {stdout:?}"))
        .to_string()
}

/// `sbatch --parsable ARGS` as `user` on next: the job id.
fn sbatch(dev: &DevStack, user: &str, args: &[&str], script: Option<&str>) -> String {
    let mut all = vec!["sbatch", "--parsable", "-o", "/dev/null"];
    all.extend_from_slice(args);
    let out = next_slurm(dev, Some(user), &all, script);
    let id = out.trim().split(';').next().unwrap().to_string();
    assert!(id.parse::<u64>().is_ok(), "sbatch {args:?} printed {out:?}");
    id
}

/// The final records `sacct -j IDS` lists (array tasks and het components each on their own
/// line), as (JobIDRaw, Submit) → what they should cost; waits until none is unfinished.
fn sacct_final(dev: &DevStack, ids: &[String]) -> BTreeMap<(String, i64), i64> {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = Command::new(dev.var("BURSAR_NEXT_SACCT"))
            .args([
                "--parsable2",
                "--noheader",
                "--allusers",
                "--duplicates",
                "--allocations",
                "--noconvert",
                "-j",
                &ids.join(","),
                "--format=JobIDRaw,Submit,Start,State,QOS,ElapsedRaw,AllocTRES,JobID",
            ])
            .env("TZ", "UTC")
            .env("SLURM_TIME_FORMAT", "%s")
            .output()
            .expect("run next's sacct");
        assert!(out.status.success(), "{:?}", out);
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split('|').collect())
            .collect();
        let open = rows
            .iter()
            .any(|f| UNFINISHED.contains(&f[3].split_whitespace().next().unwrap_or("")));
        // Every job listed, in this very answer: by its id, or as array tasks or het
        // components (`7_1`, `11+0`, whose JobIDRaw differ).
        let listed = |id: &String| {
            rows.iter().any(|f| {
                f[0] == id
                    || f[7] == id
                    || f[7]
                        .strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.starts_with('_') || rest.starts_with('+'))
            })
        };
        if !open && ids.iter().all(listed) {
            return rows
                .iter()
                .map(|f| {
                    let started = !matches!(f[2], "None" | "Unknown" | "0" | "");
                    let factor = if f[4] == "premium" { 2 } else { 1 };
                    let amount = if started {
                        expected_micros(&ONPREM, &parse_tres(f[6]), f[5].parse().unwrap(), factor)
                    } else {
                        0
                    };
                    ((f[0].to_string(), f[1].parse().unwrap()), amount)
                })
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "next's jobs {ids:?} did not all finish within {WAIT:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A bursar site with the cluster `next` (`collect` and `submit` sections given) and the usual
/// accounts and users.
fn next_site(collect: &str, submit: &str, extra: &str) -> Site {
    Site::new(&format!(
        "accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         users:\n  alice: {{default_account: physics, accounts: [physics]}}\n\
         \x20 bob: {{default_account: chemistry, accounts: [chemistry]}}\n\
         \x20 carol: {{default_account: physics, accounts: [physics, chemistry]}}\n\
         clusters:\n  next:\n    kind: slurm\n    currency: su\n    partitions:\n\
         \x20     batch: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n\
         \x20     smt: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0\"}}\n    qos:\n\
         \x20     premium: {{usage_factor: 2.0}}\n    collect:\n      {collect}\n{submit}{extra}"
    ))
}

fn slurmrestd_source(dev: &DevStack, version: &str) -> String {
    format!(
        "slurmrestd: {{url: \"{}\", jwt_key_file: \"{}\", user: slurm, api_version: {version}}}",
        dev.var("BURSAR_NEXT_RESTD_URL"),
        dev.var("BURSAR_NEXT_JWT_KEY")
    )
}

/// bursar's charges on next: (job id, submit) → micros.
fn charged(site: &Site) -> BTreeMap<(String, i64), i64> {
    let charges = site.json(&["charges", "--cluster", "next"]);
    charges["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                (
                    c["job_id"].as_str().unwrap().to_string(),
                    unix_seconds(c["submit"].as_str().unwrap()),
                ),
                micros(c["amount"].as_str().unwrap()),
            )
        })
        .collect()
}

#[test]
fn every_record_of_slurm_24_11_is_charged_as_sacct_says_through_each_api_version_and_sacct() {
    let _next = lock();
    let dev = DevStack::next();
    let since = now() - 60;

    // The mix: users, accounts, a QOS with a usage factor, GPUs, two nodes, an array, a
    // heterogeneous job, a failure, and cancellations while running and before eligible.
    let mut ids = vec![
        sbatch(&dev, "alice", &["-A", "physics", "--wrap", "sleep 2"], None),
        sbatch(
            &dev,
            "bob",
            &[
                "-A",
                "chemistry",
                "-c",
                "2",
                "--mem=1G",
                "--wrap",
                "sleep 3",
            ],
            None,
        ),
        sbatch(
            &dev,
            "alice",
            &[
                "-A",
                "physics",
                "--qos=premium",
                "-c",
                "4",
                "--mem=2G",
                "--wrap",
                "sleep 2",
            ],
            None,
        ),
        sbatch(
            &dev,
            "bob",
            &["-A", "chemistry", "--wrap", "echo failing; exit 1"],
            None,
        ),
        sbatch(
            &dev,
            "alice",
            &["-A", "physics", "--gres=gpu:1", "--wrap", "sleep 2"],
            None,
        ),
        sbatch(
            &dev,
            "carol",
            &[
                "-A",
                "chemistry",
                "-N",
                "2",
                "--ntasks-per-node=2",
                "--wrap",
                "srun hostname; sleep 1",
            ],
            None,
        ),
        sbatch(
            &dev,
            "alice",
            &["-A", "physics", "--array=0-2", "--wrap", "sleep 1"],
            None,
        ),
        sbatch(
            &dev,
            "alice",
            &["-A", "physics"],
            Some(
                "#!/bin/sh\n#SBATCH -n 1 -c 1 --mem=500M\n#SBATCH hetjob\n#SBATCH -n 1 -c 2 \
                 --mem=1G\nsrun --het-group=0,1 hostname\n",
            ),
        ),
    ];
    let pending = sbatch(
        &dev,
        "carol",
        &["-A", "chemistry", "--begin=now+1hour", "--wrap", "sleep 1"],
        None,
    );
    next_slurm(&dev, Some("carol"), &["scancel", &pending], None);
    ids.push(pending);
    let running = sbatch(
        &dev,
        "alice",
        &["-A", "physics", "--wrap", "sleep 120"],
        None,
    );
    let deadline = Instant::now() + WAIT;
    while next_slurm(
        &dev,
        None,
        &["squeue", "-h", "-j", &running, "-o", "%T"],
        None,
    )
    .trim()
        != "RUNNING"
    {
        assert!(Instant::now() < deadline, "job {running} never started");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    next_slurm(&dev, Some("alice"), &["scancel", &running], None);
    ids.push(running);

    let expected = sacct_final(&dev, &ids);
    // Array tasks and het components are records of their own.
    assert!(expected.len() >= ids.len() + 3, "{expected:?}");
    assert!(
        expected.values().any(|&v| v == 0) && expected.values().filter(|&&v| v > 0).count() > 6,
        "{expected:?}"
    );
    let until = now() + 5;
    let window = [
        "--since".to_string(),
        format!("@{since}"),
        "--until".to_string(),
        format!("@{until}"),
    ];

    let mut sources: Vec<(String, String)> = VERSIONS
        .iter()
        .map(|v| (format!("slurmrestd {v}"), slurmrestd_source(&dev, v)))
        .collect();
    sources.push(("slurmrestd auto".into(), slurmrestd_source(&dev, "auto")));
    sources.push((
        "sacct".into(),
        format!("sacct: {{program: \"{}\"}}", dev.var("BURSAR_NEXT_SACCT")),
    ));
    for (name, source) in &sources {
        let site = next_site(source, "", "");
        let args: Vec<&str> = std::iter::once("collect")
            .chain(window.iter().map(|s| s.as_str()))
            .collect();
        let first = site.ok(&args);
        println!("{name}: {}", first.trim());
        let got = charged(&site);
        for (key, amount) in &expected {
            let charge = got.get(key).unwrap_or_else(|| {
                panic!("{name}: job {key:?} listed by sacct was not charged: {got:?}")
            });
            assert_eq!(charge, amount, "{name}: job {key:?}");
        }
        let quarantined = site.ok(&["quarantine", "list"]);
        assert!(
            quarantined.contains("nothing in quarantine"),
            "{name}: {quarantined}"
        );
        let second = site.ok(&args);
        assert!(
            second.contains("(0 charged, 0 adjusted"),
            "{name}: a second pass posted something: {second}"
        );
        let status = site.json(&["collect", "status"]);
        let row = &status["clusters"][0];
        assert_eq!(row["consecutive_failures"], 0, "{name}: {row}");
    }
    let ours: BTreeSet<&String> = expected.keys().map(|(id, _)| id).collect();
    println!(
        "{} records of {} jobs charged alike by {} sources",
        ours.len(),
        ids.len(),
        sources.len()
    );
}

// --- submission through bursar --------------------------------------------------------------

/// A `bursar serve` child whose one cluster is next, submitting at `version`.
struct Gateway {
    site: Site,
    child: Child,
    url: String,
    alice: String,
    dev: DevStack,
    jobs: Vec<String>,
}

impl Gateway {
    fn start(dev: DevStack, version: &str) -> Gateway {
        let submit = format!(
            "    submit:\n      slurmrestd: {{api_version: {version}}}\n      default_partition: batch\n\
             \x20     partitions:\n        batch: {{max_time: 1d, def_mem_per_cpu_mb: 1000, max_nodes: 2, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}}\n\
             \x20       smt: {{max_time: 1d, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 1, node_cpus: 8, node_mem_mb: 16000, node_threads_per_core: 2}}\n"
        );
        let collect = slurmrestd_source(&dev, "auto");
        let site = next_site(
            &collect,
            &format!(
                "      interval: 2s\n      overlap: 10m\n      start: \"@{}\"\n{submit}",
                now() - 60
            ),
            "auth: {hs256_key_file: jwt.key}\n",
        );
        let key = site.path("jwt.key");
        site.ok(&["token", "keygen", "--key-file", key.to_str().unwrap()]);
        site.ok(&["config", "check"]);
        site.ok(&["alloc", "set", "org", "--currency", "su", "--amount", "100"]);
        let child = site
            .command()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("BURSAR_LOG", "info")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(site.path("serve.out")).unwrap())
            .stderr(std::fs::File::create(site.path("serve.log")).unwrap())
            .spawn()
            .expect("start bursar serve");
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            let out = std::fs::read_to_string(site.path("serve.out")).unwrap_or_default();
            if let Some(url) = out
                .lines()
                .find_map(|l| l.strip_prefix("bursar listening on "))
            {
                break url.trim().to_string();
            }
            assert!(Instant::now() < deadline, "bursar serve did not start");
            std::thread::sleep(Duration::from_millis(100));
        };
        let alice = site
            .ok(&[
                "token", "issue", "--user", "alice", "--role", "user", "--ttl", "1h",
            ])
            .trim()
            .to_string();
        Gateway {
            site,
            child,
            url,
            alice,
            dev,
            jobs: Vec::new(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.site.path("serve.log")).unwrap_or_default()
    }

    /// `bursar ARGS` as alice on a login node; insists it succeeds.
    fn client(&self, args: &[&str]) -> (String, String) {
        let out = self.run_client(args);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            out.status.success(),
            "bursar {args:?}: {stdout}{stderr}\nserver log:\n{}",
            self.log()
        );
        (stdout, stderr)
    }

    /// `bursar ARGS` as alice, however it ends.
    fn run_client(&self, args: &[&str]) -> std::process::Output {
        self.run_client_as(&self.alice, args)
    }

    /// [`run_client`](Gateway::run_client) as the user of `token`.
    fn run_client_as(&self, token: &str, args: &[&str]) -> std::process::Output {
        // A clean login environment, as `next-slurm -u alice` gives sbatch: the test runner's
        // own variables (an MPI launcher's, say) would be exported with the job.
        in_login_shell(bursar_bin().to_str().unwrap())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/tmp")
            .env("BURSAR_URL", &self.url)
            .env("BURSAR_TOKEN", token)
            .env("NO_COLOR", "1")
            // The zone sbatch reads --begin in: the chroot's.
            .env("TZ", "UTC")
            .current_dir("/tmp")
            .output()
            .expect("run bursar")
    }

    /// `bursar submit ARGS`: (Slurm's job id, bursar's job id).
    fn submit(&mut self, args: &[&str]) -> (String, i64) {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        let (stdout, stderr) = self.client(&all);
        let job = submitted_job(&stdout);
        let id = stderr
            .lines()
            .find_map(|l| l.strip_prefix("bursar job "))
            .and_then(|l| l.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `bursar job N:` on stderr: {stderr}"));
        self.jobs.push(job.clone());
        (job, id)
    }

    /// Job `id` once it is settled (the server collects every 2 s).
    fn settled(&self, id: i64, version: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let row = self.job(id);
            if row["state"] == "settled" {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "{version}: bursar job {id} not settled: {row}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn job(&self, id: i64) -> Value {
        let (stdout, _) = self.client(&["jobs", "--all", "--format", "json"]);
        let jobs: Value = serde_json::from_str(&stdout).unwrap();
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no job {id} in {jobs}"))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        for job in &self.jobs {
            let _ = Command::new(self.dev.var("BURSAR_NEXT_BIN"))
                .args(["scancel", job])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fields of `scontrol show job` that the submitted options decide.
const SHAPE: [&str; 48] = [
    "UserId",
    "Account",
    "QOS",
    "Partition",
    "TimeLimit",
    "NumNodes",
    "NumCPUs",
    "NumTasks",
    "CPUs/Task",
    "ReqTRES",
    "NtasksPerN:B:S:C",
    "MinMemoryCPU",
    "MinMemoryNode",
    "TresPerNode",
    "TresPerTask",
    "Nice",
    "Requeue",
    "ExcNodeList",
    "StdIn",
    "TresPerJob",
    "TresBind",
    // --gpu-freq: `TresFreq=gpu:medium,memory=high`; --cpu-freq's range.
    "TresFreq",
    "CPU_min_freq",
    "CPU_max_freq",
    "MemPerTres",
    "CpusPerTres",
    "MinMemoryTRES",
    // A held job array waits as one record: `ArrayTaskId=0,2,4%2 ArrayTaskThrottle=2`.
    "ArrayTaskId",
    "ArrayTaskThrottle",
    // --exclusive: `OverSubscribe=NO`.
    "OverSubscribe",
    // --deadline and --time-min (`N/A` without); a held job's EligibleTime is --begin's, and
    // is compared where the job has one.
    "Deadline",
    "TimeMin",
    // --tmp and --prefer.
    "MinTmpDiskNode",
    "Prefer",
    // --delay-boot, --mcs-label.
    "DelayBoot",
    "MCS_label",
    // -w: `ReqNodeList=nx-n[1-2]`.
    "ReqNodeList",
    // -L: `Licenses=matlab:2` (the dev stack's next has `Licenses=matlab:4`).
    "Licenses",
    // --mincpus: `MinCPUsNode=3`.
    "MinCPUsNode",
    // --hint=nomultithread, --threads-per-core: `ReqB:S:C:T=0:0:*:1`; --ntasks-per-core in
    // `NtasksPerN:B:S:C`.
    "ReqB:S:C:T",
    // --gres-flags=enforce-binding: `GresEnforceBind=Yes` (-s is `OverSubscribe=YES`).
    "GresEnforceBind",
    // --ntasks-per-gpu: `NtasksPerTRES=2`.
    "NtasksPerTRES",
    // --switches: `Switches=2@00:05:00` (the cluster's max_switch_wait caps the wait);
    // --container, --container-id.
    "Switches",
    "Container",
    "ContainerID",
    // --contiguous: `Contiguous=1`; --extra; --priority (0 for a held job, as sbatch's).
    "Contiguous",
    "Extra",
    "Priority",
];

fn scontrol_shape(dev: &DevStack, job: &str) -> BTreeMap<String, String> {
    let line = next_slurm(dev, None, &["scontrol", "show", "job", "-o", job], None);
    let mut fields = scontrol_fields(&line);
    fields.retain(|k, _| SHAPE.contains(&k.as_str()) || k == "MailType" || k == "JobState");
    fields
}

/// Scripts with `#PBS` and `#BSUB` lines (Torque's nodes and walltime over the script's own
/// `#SBATCH -t`, PBS Pro's chunk and accelerators with an array, LSF's task range, limit and
/// memory), held through bursar and through the cluster's own sbatch, which reads the lines
/// itself: the same shape and name, and each held at the price of what Slurm will allocate.
#[test]
fn pbs_and_bsub_scripts_are_shaped_as_sbatch_shapes_them() {
    let _next = lock();
    let dir = tempfile::tempdir().unwrap();
    let head = "#!/bin/sh\n#SBATCH -A physics\n#SBATCH -o /dev/null\n";
    // (the lines, the seconds of the time limit, the array's tasks)
    let scripts = [
        (
            "#SBATCH -t 30\n#PBS -N pbsjob\n#PBS -l nodes=2:ppn=2,walltime=00:20:00,mem=1000mb\n\
             #PBS -m abe\n#PBS -j oe\n#PBS -V\n",
            1200,
            1,
        ),
        (
            "#PBS -N chunk\n#PBS -l select=1:ncpus=4:mpiprocs=2\n\
             #PBS -l walltime=0:10:00,naccelerators=1\n#PBS -J 0-3%2\n",
            600,
            4,
        ),
        (
            "#BSUB -J lsfjob\n#BSUB -n 1,3\n#BSUB -W 15\n#BSUB -M 500M\n#PBS -q other\n",
            900,
            1,
        ),
    ];
    let mut gw = Gateway::start(DevStack::next(), "v0.0.42");
    for (n, (lines, seconds, tasks)) in scripts.into_iter().enumerate() {
        let text = format!("{head}{lines}id -un\n");
        let path = dir.path().join(format!("job{n}.sh"));
        std::fs::write(&path, &text).unwrap();
        let (job, id) = gw.submit(&["-H", path.to_str().unwrap()]);
        let direct = sbatch(&gw.dev, "alice", &["-H"], Some(&text));
        gw.jobs.push(direct.clone());
        let shape = |job: &str| {
            let line = next_slurm(&gw.dev, None, &["scontrol", "show", "job", "-o", job], None);
            let name = scontrol_fields(&line).get("JobName").cloned();
            (scontrol_shape(&gw.dev, job), name)
        };
        let (ours, our_name) = shape(&job);
        let (theirs, their_name) = shape(&direct);
        assert_eq!(
            ours, theirs,
            "{lines}: bursar's job {job} against sbatch's {direct}"
        );
        assert_eq!(our_name, their_name, "{lines}");
        let tres = parse_tres(&ours["ReqTRES"]);
        // An array holds its tasks × one task's estimate.
        let expected = expected_micros(&ONPREM, &tres, seconds, 1) * tasks;
        let held = micros(gw.job(id)["estimate"].as_str().unwrap());
        assert_eq!(held, expected, "{lines}: {tres:?}");
        println!("{lines:?}: {ours:?} {our_name:?}");
        next_slurm(&gw.dev, None, &["scancel", &job, &direct], None);
    }
}

#[test]
fn a_job_submitted_at_each_api_version_is_shaped_as_sbatch_shapes_it_and_settles_at_its_cost() {
    let _next = lock();
    let script_dir = tempfile::tempdir().unwrap();
    let script = script_dir.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n#SBATCH -A physics\n#SBATCH -o /dev/null\nid -un; sleep 2\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    // Ten days ahead at 10:00 UTC, the chroot's zone (and the client's, TZ=UTC).
    let day = |days: u32| {
        let out = Command::new("date")
            .env("TZ", "UTC")
            .args(["-d", &format!("+{days} days"), "+%Y-%m-%d"])
            .output()
            .expect("run date");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let (begin_day, deadline_day) = (day(10), day(11));
    let begin = format!("--begin={begin_day}T10:00");
    let deadline = format!("--deadline={deadline_day}T10:00");
    // when the script starts and how nodes are filled: not priced
    let node_filling: Vec<&str> = NODE_FILLING.iter().copied().chain(["-t", "5"]).collect();
    let cases: [&[&str]; 28] = [
        &["-t", "5"],
        &[
            "-N",
            "2",
            "-n",
            "4",
            "--ntasks-per-node=2",
            "--mem-per-cpu=500",
            "-t",
            "10",
        ],
        &[
            "-c",
            "2",
            "--mem=1G",
            "--gres=gpu:1",
            "-t",
            "1:00:00",
            "--qos=premium",
        ],
        &["-t", "UNLIMITED", "--mail-type=END,FAIL"],
        &["-N", "1", "-n", "2", "-t", "10"],
        &[
            "-t",
            "5",
            "--signal=B:USR1@90",
            "--no-requeue",
            "--open-mode=append",
            "--nice=5",
            "-x",
            "nx-n2",
            "-i",
            "/dev/null",
            "-k",
        ],
        &[
            "-n",
            "2",
            "-c",
            "2",
            "--gpus-per-task=1",
            "--mem-per-gpu=500",
            "-t",
            "5",
        ],
        &["-n", "2", "--gpus=2", "--cpus-per-gpu=3", "-t", "5"],
        &["--array=0-5:2%2", "-n", "2", "-t", "5"],
        &["--exclusive", "-N", "2", "-t", "5"],
        &[
            begin.as_str(),
            deadline.as_str(),
            "--time-min=2",
            "--tmp=2G",
            "--prefer=ib",
            "-t",
            "5",
        ],
        &["-w", "nx-n[1-2]", "-t", "5"],
        &["-L", "matlab:2", "--mincpus=3", "-t", "5"],
        &["-p", "smt", "-n", "3", "--hint=nomultithread", "-t", "5"],
        &[
            "-p",
            "smt",
            "-N",
            "1",
            "--threads-per-core=2",
            "--ntasks-per-core=1",
            "-t",
            "5",
        ],
        // the dev stack's JobAcctGatherFrequency is task=5: a longer task interval is refused
        &[
            "-s",
            "--gres=gpu:1",
            "--gres-flags=enforce-binding",
            "--acctg-freq=2",
            "-t",
            "5",
        ],
        // the layout goes at v0.0.41 and later (not seen in scontrol), the GPU binding in
        // every version: `TresBind=gres/gpu:closest`
        &[
            "-m",
            "block:cyclic",
            "--mem-bind=v,local",
            "--gpu-bind=closest",
            "--gpu-freq=medium,memory=high",
            "--cpu-freq=1800000-2400000:OnDemand",
            "--gres=gpu:1",
            "-t",
            "5",
        ],
        // the tasks from the GPUs, the GPUs from the tasks (in ReqTRES only, as sbatch's)
        &["--gpus=2", "--ntasks-per-gpu=2", "-t", "5"],
        &["-n", "4", "--ntasks-per-gpu=2", "-t", "5"],
        &[
            "-N",
            "1",
            "--gpus-per-node=2",
            "--ntasks-per-gpu=1",
            "-t",
            "5",
        ],
        // not priced: what the steps record, the leaf switches, the container
        &[
            "--profile=task",
            "--switches=2@10",
            "--container=/tmp",
            "--container-id=c1",
            "-t",
            "5",
        ],
        // whose jobs may share the nodes: `OverSubscribe=USER`, `MCS`, `TOPO`, priced as
        // asked (topo from v0.0.41)
        &["--exclusive=user", "-n", "2", "-t", "5"],
        &["--exclusive=mcs", "-n", "2", "-t", "5"],
        &["--exclusive=topo", "-n", "2", "-t", "5"],
        &node_filling,
        &["--delay-boot=90", "--mcs-label=physics", "-t", "5"],
        &[
            "--contiguous",
            "--extra=rack=a",
            "--priority=TOP",
            "-t",
            "5",
        ],
        &["-n", "2", "--tres-per-task=cpu=2,gres/gpu=1", "-t", "5"],
    ];
    for version in VERSIONS {
        let mut gw = Gateway::start(DevStack::next(), version);
        for case in cases {
            if version == "v0.0.40" && case.contains(&"--exclusive=topo") {
                let mut args = vec!["submit", "-H"];
                args.extend_from_slice(case);
                args.push(script);
                let out = gw.run_client(&args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !out.status.success()
                        && stderr.contains("--exclusive=topo cannot reach this cluster"),
                    "{version}: {out:?}"
                );
                continue;
            }
            // Held, through bursar and through the cluster's own sbatch: the same shape.
            let mut args = vec!["-H"];
            args.extend_from_slice(case);
            args.push(script);
            let (job, id) = gw.submit(&args);
            let through_bursar = scontrol_shape(&gw.dev, &job);
            let mut sbatch_args = vec!["-H", "-A", "physics"];
            sbatch_args.extend(case.iter().map(|a| {
                // sbatch has no partition maximum to run an unlimited job at: bursar runs
                // it at the one its configuration gives (1 day).
                if *a == "UNLIMITED" {
                    "1-00:00:00"
                } else {
                    a
                }
            }));
            sbatch_args.extend(["--wrap", "id -un; sleep 2"]);
            let direct = sbatch(&gw.dev, "alice", &sbatch_args, None);
            gw.jobs.push(direct.clone());
            let mut through_sbatch = scontrol_shape(&gw.dev, &direct);
            if case
                .iter()
                .any(|a| a.starts_with("--gres") || a.starts_with("--mincpus") || *a == "-w")
            {
                // A job with resources per node (or nodes named with -w) runs on the nodes
                // it is priced for, and no more: bursar pins sbatch's minimum (its default of
                // one node, or the names' count) as a maximum too.
                // (24.11's sbatch pins -w's count itself: `2-2`.)
                let nodes = through_sbatch.get("NumNodes").cloned().unwrap_or_default();
                let min = nodes.split('-').next().unwrap_or_default().to_string();
                let expected = if case.contains(&"-w") { "2" } else { "1" };
                assert_eq!(
                    min, expected,
                    "{version} {case:?}: sbatch's NumNodes {nodes}"
                );
                through_sbatch.insert("NumNodes".into(), format!("{min}-{min}"));
            }
            assert_eq!(
                through_bursar, through_sbatch,
                "{version} {case:?}: bursar's job {job} against sbatch's {direct}"
            );
            if case.iter().any(|a| a.starts_with("--begin")) {
                let eligible = |job: &str| {
                    let line =
                        next_slurm(&gw.dev, None, &["scontrol", "show", "job", "-o", job], None);
                    scontrol_fields(&line).get("EligibleTime").cloned()
                };
                let expected = format!("{begin_day}T10:00:00");
                assert_eq!(
                    eligible(&job).as_deref(),
                    Some(expected.as_str()),
                    "{version}"
                );
                assert_eq!(eligible(&job), eligible(&direct), "{version}");
                assert_eq!(
                    through_bursar["Deadline"],
                    format!("{deadline_day}T10:00:00")
                );
                assert_eq!(through_bursar["TimeMin"], "00:02:00");
                assert_eq!(through_bursar["MinTmpDiskNode"], "2G");
                assert_eq!(through_bursar["Prefer"], "ib");
            }
            if case
                .iter()
                .any(|a| a.contains("-per-gpu") || *a == "-w" || a.starts_with("--exclusive="))
            {
                // The hold is the price of what Slurm will allocate: its ReqTRES for the
                // time limit (5 minutes), as sacct's AllocTRES prices a finished job.
                let tres = parse_tres(&through_bursar["ReqTRES"]);
                let expected = expected_micros(&ONPREM, &tres, 300, 1);
                let held = micros(gw.job(id)["estimate"].as_str().unwrap());
                assert_eq!(held, expected, "{version} {case:?}: {tres:?}");
            }
            if case.contains(&"--exclusive") {
                // Whole nodes, as sacct shows such a job allocated here (8 CPUs and 2 GPUs a
                // node, DefMemPerCPU over all the CPUs), for the 5-minute limit.
                let tres = parse_tres("cpu=16,mem=16000M,node=2,gres/gpu=4");
                let expected = expected_micros(&ONPREM, &tres, 300, 1);
                let held = micros(gw.job(id)["estimate"].as_str().unwrap());
                assert_eq!(held, expected, "{version} {case:?}");
            }
            if case.contains(&"-L") {
                assert_eq!(through_bursar["Licenses"], "matlab:2", "{version}");
                assert_eq!(through_bursar["MinCPUsNode"], "3", "{version}");
                // 24.11.5 only picks nodes by --mincpus (from 24.11.1; 22.05 allocates them):
                // the hold is for the task's one CPU, as its ReqTRES, and the licenses.
                let tres = parse_tres(&through_bursar["ReqTRES"]);
                assert_eq!(tres.get("cpu"), Some(&1), "{version}");
                let expected = expected_micros(&ONPREM, &tres, 300, 1);
                let held = micros(gw.job(id)["estimate"].as_str().unwrap());
                assert_eq!(held, expected, "{version} {case:?}");
            }
            if case.contains(&"smt") {
                // Whole cores of nx-t1's two threads: a core per task with the hint (6 CPUs,
                // memory for the 3 asked for); with --ntasks-per-core=1, sbatch's two tasks
                // (-N 1, two threads per core) on a core each (4 CPUs and their memory).
                let tres = if case.contains(&"--hint=nomultithread") {
                    assert_eq!(through_bursar["ReqB:S:C:T"], "0:0:*:1", "{version}");
                    parse_tres("cpu=6,mem=3000M,node=1")
                } else {
                    assert_eq!(through_bursar["NumTasks"], "2", "{version}");
                    parse_tres("cpu=4,mem=4000M,node=1")
                };
                let expected = expected_micros(&ONPREM, &tres, 300, 1);
                let held = micros(gw.job(id)["estimate"].as_str().unwrap());
                assert_eq!(held, expected, "{version} {case:?}");
            }
            println!("{version} {case:?}: {through_bursar:?}");
            next_slurm(&gw.dev, None, &["scancel", &job, &direct], None);
        }

        {
            // A dependency on a job of this cluster (named with -M), as sbatch's.
            let (first, _) = gw.submit(&["-H", "-t", "5", script]);
            let dependency = format!("--dependency=afterok:{first}");
            let options = [dependency.as_str(), "--kill-on-invalid-dep=yes", "-t", "5"];
            let mut args = vec!["-H", "-M", "next"];
            args.extend(options);
            args.push(script);
            let (ours, _) = gw.submit(&args);
            let mut sbatch_args = vec!["-H", "-A", "physics"];
            sbatch_args.extend(options);
            sbatch_args.extend(["--wrap", "true"]);
            let theirs = sbatch(&gw.dev, "alice", &sbatch_args, None);
            gw.jobs.push(theirs.clone());
            let field = |job: &str| {
                let line = next_slurm(&gw.dev, None, &["scontrol", "show", "job", "-o", job], None);
                scontrol_fields(&line).get("Dependency").cloned()
            };
            let expected = format!("afterok:{first}(unfulfilled)");
            assert_eq!(
                field(&ours).as_deref(),
                Some(expected.as_str()),
                "{version}"
            );
            assert_eq!(
                field(&ours),
                field(&theirs),
                "{version}: {ours} against {theirs}"
            );
            next_slurm(&gw.dev, None, &["scancel", &first, &ours, &theirs], None);
        }

        {
            // The variables sbatch 24.11 sets from its options, in the job's environment.
            let env_script = script_dir.path().join("env.sh");
            let env_text = "#!/bin/sh\nenv | sort\necho NOFILE=$(ulimit -S -n)\n";
            std::fs::write(&env_script, env_text).unwrap();
            // The CPU options, then the GPU ones (their variables, as sbatch sets them), then
            // the ones about cores' threads.
            let option_sets: [(&[&str], usize); 8] = [
                (&["-c", "2", "--ntasks-per-node=1", "-t", "5"], 10),
                (&["--acctg-freq=2", "-t", "5"], 8),
                (
                    &["-p", "smt", "-n", "2", "--hint=nomultithread", "-t", "5"],
                    9,
                ),
                (
                    &[
                        "-p",
                        "smt",
                        "--threads-per-core=1",
                        "--ntasks-per-core=1",
                        "-t",
                        "5",
                    ],
                    9,
                ),
                (
                    &[
                        "--gpus=1",
                        "--cpus-per-gpu=2",
                        "--mem-per-gpu=100",
                        "--open-mode=append",
                        "-t",
                        "5",
                    ],
                    11,
                ),
                // the layout's and bindings' variables, for the job's steps
                (
                    &[
                        "-n",
                        "2",
                        "-m",
                        "plane=2",
                        "--mem-bind=v,local",
                        "--gpu-bind=closest",
                        "--gpu-freq=high",
                        "--cpu-freq=2400000",
                        "-t",
                        "5",
                    ],
                    14,
                ),
                // the steps' srun binds each task to its GPU by SLURM_NTASKS_PER_GPU
                (&["--gpus=1", "--ntasks-per-gpu=2", "-t", "5"], 9),
                // SLURM_PROFILE (slurmctld's at launch, from 24.05.2), SLURM_CONTAINER[_ID]
                // (sbatch's); without oci.conf the job runs as any other
                (
                    &[
                        "--profile=energy,task",
                        "--container=/tmp",
                        "--container-id=c1",
                        "-t",
                        "5",
                    ],
                    10,
                ),
            ];
            let root = gw.dev.var("BURSAR_NEXT_ROOT").to_string();
            // Output files of this run alone: a wiped cluster hands job ids out again, and
            // --open-mode=append would add to an earlier run's file of the same id.
            let output = format!(
                "/tmp/bursar-next-env-{}-{}-%j.txt",
                std::process::id(),
                now()
            );
            for (options, count) in option_sets {
                let mut args = vec!["-o", output.as_str()];
                args.extend(options);
                args.push(env_script.to_str().unwrap());
                let (through_bursar, _) = gw.submit(&args);
                let mut sbatch_args = vec!["-A", "physics", "-o", output.as_str()];
                sbatch_args.extend(options);
                let direct = sbatch(&gw.dev, "alice", &sbatch_args, Some(env_text));
                sacct_final(&gw.dev, &[through_bursar.clone(), direct.clone()]);
                let set_by_options = |job: &str| -> Vec<String> {
                    let path = format!("{root}{}", output.replace("%j", job));
                    let text =
                        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                    let _ = std::fs::remove_file(&path);
                    text.lines()
                        .filter(|l| {
                            [
                                "SLURM_CPUS_PER_TASK=",
                                "SLURM_TRES_PER_TASK=",
                                "SLURM_NTASKS_PER_NODE=",
                                "SLURM_GPUS=",
                                "SLURM_CPUS_PER_GPU=",
                                "SLURM_MEM_PER_GPU=",
                                "SLURM_OPEN_MODE=",
                                "SLURM_TRES_BIND=",
                                "SLURM_HINT=",
                                "SLURM_THREADS_PER_CORE=",
                                "SLURM_NTASKS_PER_CORE=",
                                "SLURM_NTASKS_PER_GPU=",
                                "SLURM_ACCTG_FREQ=",
                                "SLURM_DISTRIBUTION=",
                                "SLURM_DIST_PLANESIZE=",
                                "SLURM_MEM_BIND=",
                                "SLURM_MEM_BIND_VERBOSE=",
                                "SLURM_MEM_BIND_SORT=",
                                "SLURM_GPU_BIND=",
                                "SLURM_GPU_FREQ=",
                                "SLURM_CPU_FREQ_REQ=",
                                "SLURM_PROFILE=",
                                "SLURM_CONTAINER=",
                                "SLURM_CONTAINER_ID=",
                                "HYDRA_BOOTSTRAP=",
                                "HYDRA_LAUNCHER_EXTRA_ARGS=",
                                "I_MPI_HYDRA_BOOTSTRAP=",
                                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=",
                                "OMPI_MCA_plm_slurm_args=",
                                "PRTE_MCA_plm_slurm_args=",
                                "NOFILE=",
                            ]
                            .iter()
                            .any(|p| l.starts_with(p))
                        })
                        .map(str::to_string)
                        .collect()
                };
                let (ours, theirs) = (set_by_options(&through_bursar), set_by_options(&direct));
                assert_eq!(
                    ours, theirs,
                    "{version} {options:?}: jobs {through_bursar} and {direct}"
                );
                assert_eq!(ours.len(), count, "{ours:?}");
                assert!(
                    ours.contains(&format!("NOFILE={LOGIN_NOFILE}")),
                    "the shell's limit: {ours:?}"
                );
            }
            // -c with --ntasks-per-gpu: the steps run (sbatch 24.11's job also has
            // SLURM_TRES_PER_TASK, beside which its srun refuses every step).
            let (job, _) = gw.submit(&[
                "-o",
                output.as_str(),
                "-c",
                "2",
                "-n",
                "4",
                "--ntasks-per-gpu=2",
                "-t",
                "5",
                "--wrap",
                "srun true; echo srun=$?",
            ]);
            sacct_final(&gw.dev, std::slice::from_ref(&job));
            let path = format!("{root}{}", output.replace("%j", &job));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let _ = std::fs::remove_file(&path);
            assert_eq!(text.trim(), "srun=0", "{version}: job {job}");
        }

        {
            // The script's arguments reach it as sbatch's do (`argv`), and its command is its
            // path. The script lies in the chroot, where sbatch reads it by its path there.
            let root = gw.dev.var("BURSAR_NEXT_ROOT").to_string();
            let tag = format!("bursar-next-args-{}-{}", std::process::id(), now());
            let inside = format!("/tmp/{tag}.sh");
            let host = format!("{root}{inside}");
            std::fs::write(&host, "#!/bin/sh\nprintf '[%s]' \"$@\"\n").unwrap();
            let output = format!("/tmp/{tag}-%j.out");
            let words = ["in.dat", "two words", "", "-n"];
            let mut args = vec!["-H", "-o", output.as_str(), "-t", "5", host.as_str()];
            args.extend(words);
            let (ours, _) = gw.submit(&args);
            let mut sbatch_args = vec!["-H", "-A", "physics", "-o", output.as_str(), "-t", "5"];
            sbatch_args.push(inside.as_str());
            sbatch_args.extend(words);
            let theirs = sbatch(&gw.dev, "alice", &sbatch_args, None);
            gw.jobs.push(theirs.clone());
            let command = |job: &str| {
                let line = next_slurm(&gw.dev, None, &["scontrol", "show", "job", "-o", job], None);
                scontrol_fields(&line).get("Command").cloned()
            };
            assert_eq!(command(&ours).as_deref(), Some(host.as_str()), "{version}");
            assert_eq!(
                command(&theirs).as_deref(),
                Some(inside.as_str()),
                "{version}"
            );
            next_slurm(
                &gw.dev,
                None,
                &["scontrol", "release", &ours, &theirs],
                None,
            );
            sacct_final(&gw.dev, &[ours.clone(), theirs.clone()]);
            let printed = |job: &str| {
                let path = format!("{root}{}", output.replace("%j", job));
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                let _ = std::fs::remove_file(&path);
                text
            };
            let (mine, sbatch_s) = (printed(&ours), printed(&theirs));
            assert_eq!(mine, "[in.dat][two words][][-n]", "{version}: job {ours}");
            assert_eq!(mine, sbatch_s, "{version}: jobs {ours} and {theirs}");
            let _ = std::fs::remove_file(&host);
        }

        {
            // --wait: bursar submit exits with the job's exit code, read from slurmctld's
            // decoded `exit_code` at this version, as sbatch --wait reads it.
            let out = gw.run_client(&[
                "submit",
                "--wait",
                "-o",
                "/dev/null",
                "-t",
                "5",
                "--wrap",
                "exit 3",
            ]);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{version}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            gw.jobs
                .push(submitted_job(&String::from_utf8_lossy(&out.stdout)));
        }

        // --priority from a Slurm operator (carol, on the dev stack) is the job's, sent as a
        // set number; from alice (above, and here) slurmctld ignores it, as it does sbatch's.
        let carol = gw
            .site
            .ok(&[
                "token", "issue", "--user", "carol", "--role", "user", "--ttl", "1h",
            ])
            .trim()
            .to_string();
        for (token, option, expected) in [
            (&carol, "--priority=TOP", Some("4294967293")),
            (&carol, "--priority=12345", Some("12345")),
            (&gw.alice, "--priority=12345", None),
        ] {
            let out = gw.run_client_as(
                token,
                &["submit", "--begin=now+1hour", option, "-t", "5", script],
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{version} {option}: {out:?}");
            let job = submitted_job(&stdout);
            gw.jobs.push(job.clone());
            let priority = scontrol_shape(&gw.dev, &job)["Priority"].clone();
            match expected {
                Some(expected) => assert_eq!(priority, expected, "{version} {option}"),
                None => assert_ne!(priority, "12345", "{version} {option}: ignored"),
            }
        }

        // One that runs: as alice, on a node with the CPUs it asks for (--mincpus: allocated
        // its tasks' two on 24.11.5) and the license, held for them and settled at its sacct
        // cost.
        // With them, one on nx-t1's whole cores (--hint=nomultithread: a core per task, 6
        // CPUs, memory for the 3 asked for).
        let runs = [
            (
                &["-n", "2", "--mincpus=3", "-L", "matlab", "-t", "5", script][..],
                "cpu=2,mem=2000M,node=1,license/matlab=1",
            ),
            (
                &[
                    "-p",
                    "smt",
                    "-n",
                    "3",
                    "--hint=nomultithread",
                    "-t",
                    "5",
                    script,
                ],
                "cpu=6,mem=3000M,node=1",
            ),
            // two tasks of two CPUs for the GPU (sbatch's own job here is refused, or pends
            // for ever: 24.11's sbatch sends a minimum of one task's CPUs; fixed in 25.05.1)
            (
                &[
                    "-c",
                    "2",
                    "--gpus=1",
                    "--ntasks-per-gpu=2",
                    "-t",
                    "5",
                    script,
                ],
                "cpu=4,mem=4000M,node=1,gres/gpu=1",
            ),
        ];
        let submitted: Vec<(String, i64)> = runs
            .iter()
            .map(|(options, allocated)| {
                let (job, id) = gw.submit(options);
                assert_eq!(
                    micros(gw.job(id)["estimate"].as_str().unwrap()),
                    expected_micros(&ONPREM, &parse_tres(allocated), 300, 1),
                    "{version} {options:?}"
                );
                (job, id)
            })
            .collect();
        for ((job, id), (_, allocated)) in submitted.iter().zip(runs) {
            let final_records = sacct_final(&gw.dev, std::slice::from_ref(job));
            let expected: i64 = final_records.values().sum();
            assert!(expected > 0, "{final_records:?}");
            let ran = next_slurm(
                &gw.dev,
                None,
                &[
                    "sacct",
                    "-n",
                    "-P",
                    "-X",
                    "--noconvert",
                    "-j",
                    job,
                    "-o",
                    "User,AllocTRES",
                ],
                None,
            );
            let (user, alloc) = ran.trim().split_once('|').unwrap();
            assert_eq!(user, "alice", "job {job} ran as {user}");
            let alloc = parse_tres(alloc);
            for (name, count) in parse_tres(allocated) {
                assert_eq!(alloc.get(&name), Some(&count), "{version} job {job}: {ran}");
            }
            let settled = gw.settled(*id, version);
            assert_eq!(
                micros(settled["charge"].as_str().unwrap()),
                expected,
                "{version}: {settled}"
            );
            assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
            println!(
                "{version}: job {job} ran as alice with {}, settled at {} su",
                ran.trim(),
                settled["charge"]
            );
        }

        // A job array that runs: its tasks settle it, at what they cost together.
        let (array, id) = gw.submit(&["--array=0-2%2", "-t", "5", script]);
        let tasks = sacct_final(&gw.dev, std::slice::from_ref(&array));
        assert_eq!(tasks.len(), 3, "{version}: {tasks:?}");
        let expected: i64 = tasks.values().sum();
        let settled = gw.settled(id, version);
        assert_eq!(
            micros(settled["charge"].as_str().unwrap()),
            expected,
            "{version}: {settled}\n{tasks:?}"
        );
        assert_eq!(micros(settled["hold"].as_str().unwrap()), 0, "{settled}");
        println!(
            "{version}: array {array} ran 3 tasks, settled at {} su",
            settled["charge"]
        );
    }
}
