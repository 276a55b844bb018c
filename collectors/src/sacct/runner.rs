//! The sacct collector: runs `sacct` for a bounded window and reads its output with the same
//! parser as `bursar import`.
//!
//! The command is always explicit about what bursar relies on: `--parsable2` with a header,
//! `--allusers`, `--duplicates` (every requeued run is its own record), `--allocations` (steps
//! are not billed), `--noconvert` (memory in MB), `-M <cluster>`, a closed `-S`/`-E` window, and
//! an explicit `--format`. Times are printed as Unix seconds (`SLURM_TIME_FORMAT=%s`) and the
//! window is given in UTC (`TZ=UTC`), so nothing depends on the host's zone.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::{SacctLine, SacctOptions, SacctReader, SacctTimeZone};
use crate::sacct::Quarantined;
use bursar_pricing::UsageRecord;

/// The columns bursar asks sacct for.
pub const FORMAT: &str = "JobIDRaw,JobID,Cluster,Account,User,Partition,QOS,State,Submit,Start,End,ElapsedRaw,AllocTRES,AllocCPUS,NNodes,TimelimitRaw,JobName";

/// How to run sacct for one cluster.
#[derive(Debug, Clone)]
pub struct SacctCommand {
    /// The `sacct` program (default: `sacct` on the PATH).
    pub program: PathBuf,
    /// The Slurm cluster name (`-M`).
    pub cluster: String,
    /// Extra environment, e.g. `SLURM_CONF` for a cluster whose config is not the default.
    pub env: Vec<(String, String)>,
    /// How long one run may take before it is killed.
    pub timeout: Duration,
}

/// What one sacct run returned.
#[derive(Debug, Default)]
pub struct SacctFetch {
    pub records: Vec<UsageRecord>,
    pub steps: u64,
    pub quarantined: Vec<Quarantined>,
}

#[derive(Debug, thiserror::Error)]
pub enum SacctRunError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("sacct did not finish within {0:?}")]
    Timeout(Duration),
    #[error("sacct exited with {status}: {stderr}")]
    Failed { status: String, stderr: String },
    #[error("sacct printed output bursar can't read: {0}")]
    BadOutput(String),
}

impl SacctRunError {
    /// Worth trying again later (slurmdbd busy or down, a slow query), as opposed to a
    /// configuration problem.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            SacctRunError::Timeout(_) | SacctRunError::Failed { .. }
        )
    }
}

impl SacctCommand {
    pub fn new(cluster: impl Into<String>) -> SacctCommand {
        SacctCommand {
            program: PathBuf::from("sacct"),
            cluster: cluster.into(),
            env: Vec::new(),
            timeout: Duration::from_secs(120),
        }
    }

    /// The arguments for the window `[start, end)` (Unix seconds).
    pub fn args(&self, start: i64, end: i64) -> Vec<String> {
        self.args_in_state(start, end, None)
    }

    /// The arguments for the jobs in `state` during `[start, end)` when given (sacct then
    /// reads the window as the time the jobs were in that state), else for the window.
    pub fn args_in_state(&self, start: i64, end: i64, state: Option<&str>) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--parsable2".into(),
            "--allusers".into(),
            "--duplicates".into(),
            "--allocations".into(),
            "--noconvert".into(),
            format!("--clusters={}", self.cluster),
            format!("--starttime={}", iso_utc(start)),
            format!("--endtime={}", iso_utc(end)),
        ];
        if let Some(state) = state {
            args.push(format!("--state={state}"));
        }
        args.push(format!("--format={FORMAT}"));
        args
    }

    /// Every job record sacct has for `[start, end)`: the jobs eligible or running in it, and
    /// the jobs cancelled in it. Two runs, because slurmdbd's window takes a job whose eligible
    /// time is before the window's end and whose end is after its start: a job cancelled before
    /// it became eligible (held, or `--begin` in the future) is in no window shorter than the
    /// stretch from its end to its eligible time — a held one in none. With `--state`, the
    /// window is the time the job was cancelled. Each job once (by cluster, job id and submit
    /// time).
    pub async fn fetch(&self, start: i64, end: i64) -> Result<SacctFetch, SacctRunError> {
        let mut fetched = self.run(self.args(start, end)).await?;
        let cancelled = self
            .run(self.args_in_state(start, end, Some("CANCELLED")))
            .await?;
        let mut seen: std::collections::HashSet<(String, String, i64)> = fetched
            .records
            .iter()
            .map(|r| (r.cluster.clone(), r.job_id.clone(), r.submit))
            .collect();
        for record in cancelled.records {
            if seen.insert((record.cluster.clone(), record.job_id.clone(), record.submit)) {
                fetched.records.push(record);
            }
        }
        let known: std::collections::HashSet<String> =
            fetched.quarantined.iter().map(|q| q.raw.clone()).collect();
        fetched.quarantined.extend(
            cancelled
                .quarantined
                .into_iter()
                .filter(|q| !known.contains(&q.raw)),
        );
        Ok(fetched)
    }

    /// Runs sacct with `args` and parses what it prints.
    async fn run(&self, args: Vec<String>) -> Result<SacctFetch, SacctRunError> {
        let program = self.program.display().to_string();
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(args)
            .env("TZ", "UTC")
            .env("SLURM_TIME_FORMAT", "%s")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let mut child = command.spawn().map_err(|source| SacctRunError::Spawn {
            program: program.clone(),
            source,
        })?;
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let run = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            a.and(b).map_err(|source| SacctRunError::Spawn {
                program: program.clone(),
                source,
            })?;
            let status = child.wait().await.map_err(|source| SacctRunError::Spawn {
                program: program.clone(),
                source,
            })?;
            Ok::<_, SacctRunError>((status, out, err))
        };
        let (status, out, err) = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| SacctRunError::Timeout(self.timeout))??;
        let stderr = || String::from_utf8_lossy(&err).trim().to_string();
        if !status.success() {
            return Err(SacctRunError::Failed {
                status: status.to_string(),
                stderr: stderr(),
            });
        }
        let fetch = parse_output(&out, &self.cluster)?;
        if failed_quietly(&fetch, &err) {
            return Err(SacctRunError::Failed {
                status: format!("{status}, but an error and no jobs"),
                stderr: stderr(),
            });
        }
        Ok(fetch)
    }
}

/// Whether a run that exited 0 failed all the same: up to 23.11.3 sacct exits with whatever
/// `errno` holds when its query fails — often 0 — after printing the header, so an error on
/// stderr with no job at all is a failed query, not an empty window (whose cursor would move
/// past jobs never read).
/// Only errors about reaching slurmdbd count: sacct also prints harmless complaints about
/// slurm.conf through `error()` ("Ignoring obsolete FastSchedule=1 option"), and a quiet
/// cluster's empty window must not fail for ever because of one.
fn failed_quietly(fetch: &SacctFetch, stderr: &[u8]) -> bool {
    const QUERY_FAILED: [&str; 7] = [
        "slurmdbd",
        "dbd_",
        "database",
        "persist",
        "connection refused",
        "timed out",
        "zero bytes were transmitted",
    ];
    fetch.records.is_empty()
        && fetch.quarantined.is_empty()
        && fetch.steps == 0
        && String::from_utf8_lossy(stderr).lines().any(|line| {
            let line = line.to_ascii_lowercase();
            line.contains("error:") && QUERY_FAILED.iter().any(|m| line.contains(m))
        })
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC, the form sacct's `-S`/`-E` read (with `TZ=UTC`).
fn iso_utc(at: i64) -> String {
    let mut buf = [0u8; 19];
    super::format_iso_utc(at, &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Parses what a [`SacctCommand`] printed.
pub fn parse_output(out: &[u8], cluster: &str) -> Result<SacctFetch, SacctRunError> {
    let mut fetch = SacctFetch::default();
    if out.iter().all(u8::is_ascii_whitespace) {
        // sacct prints nothing at all (not even a header) for some empty results.
        return Ok(fetch);
    }
    let options = SacctOptions::new()
        .cluster(cluster)
        .time_zone(SacctTimeZone::Utc);
    let reader =
        SacctReader::new(out, options).map_err(|e| SacctRunError::BadOutput(e.to_string()))?;
    for line in reader {
        match line.map_err(|e| SacctRunError::BadOutput(e.to_string()))? {
            SacctLine::Record { record, .. } => fetch.records.push(record),
            SacctLine::Step { .. } => fetch.steps += 1,
            SacctLine::Quarantined(q) => fetch.quarantined.push(q),
        }
    }
    Ok(fetch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_asks_for_everything_bursar_relies_on() {
        let args = SacctCommand::new("onprem").args(1_795_305_600, 1_795_392_000);
        for flag in [
            "--parsable2",
            "--allusers",
            "--duplicates",
            "--allocations",
            "--noconvert",
            "--clusters=onprem",
        ] {
            assert!(
                args.iter().any(|a| a == flag),
                "{flag} missing from {args:?}"
            );
        }
        assert!(
            args.contains(&"--starttime=2026-11-22T00:00:00".to_string()),
            "{args:?}"
        );
        assert!(
            args.contains(&"--endtime=2026-11-23T00:00:00".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn epoch_output_parses() {
        let out = format!(
            "{}\n1|1|onprem|physics|alice|batch|normal|COMPLETED|1795306391|1795306392|1795306394|2|billing=1,cpu=1,mem=1000M,node=1|1|1|UNLIMITED|ok\n",
            FORMAT.replace(',', "|")
        );
        let fetch = parse_output(out.as_bytes(), "onprem").unwrap();
        assert_eq!(fetch.records.len(), 1);
        assert_eq!(fetch.records[0].submit, 1_795_306_391);
        assert_eq!(fetch.records[0].elapsed_us, 2_000_000);
        assert!(parse_output(b"", "onprem").unwrap().records.is_empty());
    }

    #[tokio::test]
    async fn a_missing_program_is_a_clear_error() {
        let mut cmd = SacctCommand::new("onprem");
        cmd.program = PathBuf::from("/nonexistent/sacct");
        let err = cmd.fetch(0, 1).await.unwrap_err();
        assert!(err.to_string().contains("/nonexistent/sacct"), "{err}");
        assert!(!err.is_retryable());
    }

    /// A stand-in sacct named `name`: prints the header, then `rows`, to stdout and `stderr`
    /// to stderr, and exits 0 (as sacct up to 23.11.3 may after a failed query).
    fn fake_sacct(dir: &std::path::Path, name: &str, rows: &str, stderr: &str) -> SacctCommand {
        let header = FORMAT.replace(',', "|");
        let text = dir.join(format!("{name}.sh"));
        std::fs::write(
            &text,
            format!("#!/bin/sh\nprintf '%s\\n' '{header}'\nprintf '{rows}'\nprintf '{stderr}' >&2\nexit 0\n"),
        )
        .unwrap();
        // Made executable by a child process, so that no descriptor of this process open for
        // writing it can leak into another test's child (exec would fail with ETXTBSY).
        let path = dir.join(name);
        let made = std::process::Command::new("install")
            .args(["-m", "755"])
            .arg(&text)
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let mut cmd = SacctCommand::new("onprem");
        cmd.program = path;
        cmd
    }

    #[tokio::test]
    async fn an_error_with_no_jobs_is_a_failure_though_sacct_exits_0() {
        let dir = tempfile::tempdir().unwrap();
        let error =
            "sacct: error: slurmdbd: Getting response to message type: DBD_GET_JOBS_COND\\n";
        let err = fake_sacct(dir.path(), "failing", "", error)
            .fetch(0, 1)
            .await
            .unwrap_err();
        assert!(matches!(err, SacctRunError::Failed { .. }), "{err}");
        assert!(err.is_retryable());
        assert!(err.to_string().contains("DBD_GET_JOBS_COND"), "{err}");

        // An empty window is empty, also beside a complaint about slurm.conf; jobs beside an
        // error line are jobs.
        let empty = fake_sacct(dir.path(), "quiet", "", "")
            .fetch(0, 1)
            .await
            .unwrap();
        assert!(empty.records.is_empty());
        let config = "sacct: error: Ignoring obsolete FastSchedule=1 option. Please remove it from your configuration.\\n";
        let empty = fake_sacct(dir.path(), "old_conf", "", config)
            .fetch(0, 1)
            .await
            .unwrap();
        assert!(empty.records.is_empty());
        let row = "1|1|onprem|physics|alice|batch|normal|COMPLETED|1795306391|1795306392|\
                   1795306394|2|billing=1,cpu=1,mem=1000M,node=1|1|1|UNLIMITED|ok\\n";
        let jobs = fake_sacct(dir.path(), "busy", row, error)
            .fetch(0, 1)
            .await
            .unwrap();
        assert_eq!(jobs.records.len(), 1);
    }

    #[tokio::test]
    async fn a_failing_sacct_reports_its_stderr() {
        let mut cmd = SacctCommand::new("onprem");
        cmd.program = PathBuf::from("sh");
        // `sh --parsable2 …` fails with a message on stderr: stands in for a broken slurmdbd.
        let err = cmd.fetch(0, 1).await.unwrap_err();
        assert!(matches!(err, SacctRunError::Failed { .. }), "{err}");
        assert!(err.is_retryable());
    }
}
