//! Helpers for bursar's end-to-end tests: find the real `bursar` binary, give each test its own
//! folder and config, run commands and read their JSON.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `bursar` binary built for this profile (`cargo build --bins` puts it next to the test
/// executables' parent folder). `BURSAR_BIN` overrides.
pub fn bursar_bin() -> PathBuf {
    if let Ok(path) = std::env::var("BURSAR_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join(format!("bursar{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --bins` before the end-to-end tests (deploy/test.sh does)",
        bin.display()
    );
    bin
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// A scratch folder with a config file, and a way to run `bursar` against it.
pub struct Site {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Site {
    /// A site whose config is `yaml` (its `database` defaults to a file in the scratch folder).
    pub fn new(yaml: &str) -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("bursar.yaml");
        std::fs::write(&config, yaml).expect("write config");
        Site { dir, config }
    }

    /// The example configuration shipped in `deploy/examples/bursar.yaml`.
    pub fn example() -> Site {
        let yaml = std::fs::read_to_string(repo_root().join("deploy/examples/bursar.yaml"))
            .expect("example config");
        Site::new(&yaml)
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(bursar_bin());
        cmd.env("BURSAR_CONFIG", &self.config)
            .env_remove("BURSAR_DATABASE")
            .env("NO_COLOR", "1");
        cmd
    }

    /// Runs `bursar ARGS`, returns the output whatever the exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run bursar")
    }

    /// Runs `bursar ARGS` and insists it succeeds; returns standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "bursar {args:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Runs `bursar ARGS --format json` and parses the result.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--format", "json"]);
        let text = self.ok(&all);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("bursar {all:?} printed invalid JSON ({e}):\n{text}"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The real dev stack started by `deploy/dev/up.sh`: the variables of its env files.
///
/// Tests that need it fail (never skip) with the command to run when it is not up.
pub struct DevStack {
    vars: std::collections::BTreeMap<String, String>,
}

impl DevStack {
    /// The two Slurm 22.05 clusters (onprem, cloud) and the dstack server.
    pub fn get() -> DevStack {
        DevStack::from_files(&["slurm/env.sh", "dstack/env.sh"])
    }

    /// The Slurm 24.11 cluster `next` of `deploy/dev/slurm-next.sh` (a Debian 13 chroot).
    pub fn next() -> DevStack {
        DevStack::from_files(&["slurm-next/env.sh"])
    }

    fn from_files(files: &[&str]) -> DevStack {
        let dir = std::env::var("BURSAR_DEV_DIR").unwrap_or_else(|_| "/var/tmp/bursar-dev".into());
        let mut vars = std::collections::BTreeMap::new();
        for file in files {
            let path = Path::new(&dir).join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{} is missing ({e}): start the real Slurm and dstack servers with \
                     `deploy/dev/up.sh && deploy/dev/slurm-jobs.sh --quick` (deploy/test.sh does)",
                    path.display()
                )
            });
            for line in text.lines() {
                let Some(rest) = line.trim().strip_prefix("export ") else {
                    continue;
                };
                let Some((key, value)) = rest.split_once('=') else {
                    continue;
                };
                let value = value.split("   #").next().unwrap_or(value).trim();
                vars.insert(
                    key.to_string(),
                    value.trim_matches('"').trim_matches('\'').to_string(),
                );
            }
        }
        DevStack { vars }
    }

    pub fn var(&self, key: &str) -> &str {
        self.vars
            .get(key)
            .unwrap_or_else(|| panic!("{key} is not in the dev stack's env files"))
    }

    /// `runuser -u USER -- sbatch --parsable ARGS` on one of the dev stack's 22.05 clusters
    /// (`onprem`, `cloud`), as a user on a login node submits; the output, whatever the outcome.
    pub fn sbatch_as(&self, user: &str, cluster: &str, args: &[&str]) -> std::process::Output {
        let conf = if cluster == "cloud" {
            self.var("BURSAR_DEV_CLOUD_CONF")
        } else {
            self.var("BURSAR_DEV_ONPREM_CONF")
        };
        Command::new("runuser")
            .args(["-u", user, "--", "sbatch", "--parsable"])
            .args(args)
            .env("SLURM_CONF", conf)
            .output()
            .expect("run sbatch")
    }

    /// Runs a Slurm client command (`sacct`, `sacctmgr`, …) against the dev stack.
    pub fn slurm(&self, program: &str, cluster: &str, args: &[&str]) -> String {
        let conf = if cluster == "cloud" {
            self.var("BURSAR_DEV_CLOUD_CONF")
        } else {
            self.var("BURSAR_DEV_ONPREM_CONF")
        };
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", conf)
            .env("TZ", "UTC")
            .env("SLURM_TIME_FORMAT", "%s")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }
}

/// Parses an exact decimal amount string (`"12.5"`, `"-0.000001"`) into micros.
pub fn micros(text: &str) -> i64 {
    let (units, frac) = text.split_once('.').unwrap_or((text, ""));
    let negative = units.starts_with('-');
    let units: i64 = units.trim_start_matches('-').parse().expect("integer part");
    assert!(frac.len() <= 6, "{text} has more than 6 decimals");
    let frac: i64 = format!("{frac:0<6}").parse().expect("fraction");
    let m = units * 1_000_000 + frac;
    if negative {
        -m
    } else {
        m
    }
}

/// TRES weights per hour as exact fractions `(numerator, denominator)`: what a test expects a
/// job to cost, computed without bursar's code.
pub struct Weights {
    pub cpu: (u128, u128),
    pub mem_per_gib: (u128, u128),
    pub gpu: (u128, u128),
    /// A `matlab` license (`License/matlab`), per hour.
    pub matlab: (u128, u128),
}

/// sbatch options that fill two nodes with four tasks and say when the script starts, none
/// of them priced: what the live tests submit both ways (through bursar and sbatch).
pub const NODE_FILLING: [&str; 7] = [
    "--spread-job",
    "--wait-all-nodes=1",
    "--use-min-nodes",
    "-N",
    "2",
    "-n",
    "4",
];

/// `CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0` (su): the dev stack's onprem (and next)
/// `TRESBillingWeights`.
pub const ONPREM: Weights = Weights {
    cpu: (1, 1),
    mem_per_gib: (1, 4),
    gpu: (4, 1),
    matlab: (2, 1),
};
/// `CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50` (usd): the price the tests give cloud's partition.
pub const CLOUD: Weights = Weights {
    cpu: (425, 10_000),
    mem_per_gib: (53, 10_000),
    gpu: (25, 10),
    matlab: (0, 1),
};

/// Σ weight × count × elapsed / 3600 × factor for `sacct --noconvert` TRES counts (`cpu`,
/// `mem` in MB, `gres/gpu`), in micros, rounded half to even.
pub fn expected_micros(
    w: &Weights,
    tres: &std::collections::BTreeMap<String, u128>,
    elapsed: u128,
    factor: u128,
) -> i64 {
    // Common denominator: 10_000 (weights) × 1024 (MB per GiB) × 3600 (s per h).
    let den: u128 = 10_000 * 1024 * 3600;
    let scale = |(n, d): (u128, u128)| n * 10_000 / d;
    let cpu = tres.get("cpu").copied().unwrap_or(0);
    let mem_mb = tres.get("mem").copied().unwrap_or(0);
    let gpus = tres.get("gres/gpu").copied().unwrap_or(0);
    let matlab = tres.get("license/matlab").copied().unwrap_or(0);
    let rate_num = scale(w.cpu) * cpu * 1024
        + scale(w.mem_per_gib) * mem_mb
        + scale(w.gpu) * gpus * 1024
        + scale(w.matlab) * matlab * 1024;
    round_half_even(rate_num * elapsed * factor * 1_000_000, den)
}

/// `num / den` rounded to the nearest integer, ties to even: bursar's one rounding per job.
pub fn round_half_even(num: u128, den: u128) -> i64 {
    let (q, r) = (num / den, num % den);
    let q = match (2 * r).cmp(&den) {
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal if q % 2 == 1 => q + 1,
        _ => q,
    };
    q as i64
}

/// `sacct --noconvert` TRES (`billing=1,cpu=1,mem=1000M,node=1`) as name → count.
pub fn parse_tres(text: &str) -> std::collections::BTreeMap<String, u128> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            let v = v.trim_end_matches('M');
            (
                k.to_string(),
                v.parse()
                    .unwrap_or_else(|_| panic!("--noconvert TRES value {kv}")),
            )
        })
        .collect()
}

/// `2026-11-22T01:27:22Z` → Unix seconds (UTC, no leap seconds), without a date library.
pub fn unix_seconds(text: &str) -> i64 {
    let b = text.as_bytes();
    let n = |r: std::ops::Range<usize>| -> i64 { text[r].parse().unwrap() };
    assert_eq!(b[10], b'T', "{text}");
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

/// `scontrol show job -o` (one line of `Key=Value` words) as key → value.
pub fn scontrol_fields(line: &str) -> std::collections::BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
