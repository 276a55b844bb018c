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
    pub fn get() -> DevStack {
        let dir = std::env::var("BURSAR_DEV_DIR").unwrap_or_else(|_| "/var/tmp/bursar-dev".into());
        let mut vars = std::collections::BTreeMap::new();
        for file in ["slurm/env.sh", "dstack/env.sh"] {
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
