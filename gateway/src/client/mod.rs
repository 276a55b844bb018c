//! The user-facing client: `bursar submit` (and the `sbatch` alias), `quote`, `jobs`, `cancel`
//! and the remote `balance`, talking to a bursar server over its HTTP API (docs/api.md); and
//! `bursar token`, the local admin commands that make the tokens the client sends.
//!
//! - [`config`]: `BURSAR_URL`, the token (`BURSAR_TOKEN` or `~/.config/bursar/token`),
//!   `BURSAR_TIMEOUT`.
//! - [`http`]: [`Client`], JSON calls with the bearer token, timeouts, one retry after a
//!   connection error (same `Idempotency-Key`), the server's errors as [`ApiError`].
//! - [`build`]: the command line → a [`JobRequest`](crate::request::JobRequest), through the
//!   same sbatch and dstack parsers the server validates with.
//! - [`render`]: the answers as types, sbatch's output lines and tables.
//! - [`token`]: `bursar token keygen` and `bursar token issue` (no HTTP).
//!
//! Every handler writes its answer to `out` and notes, warnings and refusal details to `err`;
//! a refusal is an `Err` (exit 1, as sbatch), with the server's message first.

pub mod build;
pub mod config;
mod error;
pub mod http;
pub mod render;
pub mod token;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use serde_json::{json, Value};

use crate::cli::{BalanceArgs, CancelArgs, JobsArgs};
use crate::config::Config;
use crate::output::{write_json, Format};
use crate::request::SBATCH_USAGE;

pub use build::{Parsed, Shell, Submission};
pub use config::ClientConfig;
pub use error::{ApiError, ClientError};
pub use http::Client;
use render::{list_in, quote_list, text, ClusterQuote, Submitted};

/// Reads the client configuration and says what the user should fix (on `err`).
fn connect(err: &mut impl Write) -> anyhow::Result<Client> {
    let config = ClientConfig::from_env()?;
    for warning in &config.warnings {
        writeln!(err, "bursar: warning: {warning}")?;
    }
    Ok(Client::new(&config)?)
}

/// `bursar submit [sbatch options] SCRIPT` (or `--wrap`, or a dstack task file): admit, route,
/// hold and forward through the server; print what sbatch prints.
pub async fn submit(
    argv: &[String],
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let job = match build::read_command_line(argv, &Shell::current(), true)? {
        Parsed::Help => {
            out.write_all(SBATCH_USAGE.as_bytes())?;
            return Ok(ExitCode::SUCCESS);
        }
        Parsed::Job(job) => job,
    };
    if !job.quiet {
        for note in &job.notes {
            writeln!(err, "bursar: note: {note}")?;
        }
    }
    let client = connect(err)?;
    if job.test_only {
        let answer = client.post("/v1/quotes", &job.request, None).await?;
        let quotes = decode_quotes(&client, &answer)?;
        render::write_quotes(&quotes, Format::Table, out)?;
        render::write_route(&answer, out)?;
        return Ok(quote_exit(&quotes));
    }
    // One key per invocation: the retry after a connection error reuses it, so a job the
    // server already took is answered, not submitted twice.
    let key = http::idempotency_key()?;
    let answer = client.post("/v1/jobs", &job.request, Some(&key)).await?;
    let submitted: Submitted = client.decode("the submitted job", answer)?;
    if job.parsable {
        let named = !job.request.clusters.is_empty();
        writeln!(out, "{}", submitted.parsable_line(named))?;
    } else if !job.quiet {
        writeln!(out, "{}", submitted.sbatch_line())?;
        // On standard error, so scripts reading sbatch's one line from standard output
        // (`sbatch job.sh | awk '{print $4}'`) keep working.
        writeln!(err, "{}", submitted.bursar_line())?;
    }
    if job.wait {
        out.flush()?;
        let code = wait_for_end(&client, &submitted, err).await?;
        return Ok(ExitCode::from(code));
    }
    Ok(ExitCode::SUCCESS)
}

/// How long `--wait` sleeps before each question: sbatch's 2 s, then 4 times longer each
/// time, but at most 10 s (sbatch goes up to 32 s; bursar answers sooner for the same load).
fn wait_pause(asked: u32) -> std::time::Duration {
    std::time::Duration::from_secs(2u64.saturating_mul(4u64.saturating_pow(asked)).min(10))
}

/// `-W/--wait`: asks the server what the job's cluster reports (`GET /v1/jobs/{id}/status`)
/// until the job has ended, as sbatch asks slurmctld; its exit code (the highest of an
/// array's tasks; 1 when a signal ended it) becomes `bursar submit`'s. A server or cluster
/// that cannot be reached is asked again; a job its cluster no longer knows is exit code 1,
/// with sbatch's message (sbatch itself exits 0 then).
async fn wait_for_end(
    client: &Client,
    submitted: &Submitted,
    err: &mut impl Write,
) -> anyhow::Result<u8> {
    let path = format!("/v1/jobs/{}/status", text(&submitted.id));
    let job = text(&submitted.cluster_job_id);
    let mut asked = 0u32;
    let mut last_problem = String::new();
    loop {
        tokio::time::sleep(wait_pause(asked)).await;
        asked = asked.saturating_add(1);
        let answer = match client.get(&path).await {
            Ok(answer) => answer,
            Err(e) if retry_while_waiting(&e) => {
                // Said once, not at every question while it lasts.
                let problem = e.to_string();
                if problem != last_problem {
                    writeln!(
                        err,
                        "bursar: cannot ask about job {job} now, retrying: {problem}"
                    )?;
                    last_problem = problem;
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        last_problem.clear();
        if answer["finished"] != Value::Bool(true) {
            continue;
        }
        return Ok(match answer["exit_code"].as_i64() {
            // A status outside 0–255 is no exit status: a failure, never success.
            Some(code) => u8::try_from(code).unwrap_or(1),
            // Still listed, but without an exit code (an answer lacking the field).
            None if answer["known"] == Value::Bool(true) => {
                writeln!(
                    err,
                    "bursar: job {job} ended, but its cluster gave no exit code"
                )?;
                1
            }
            None => {
                writeln!(
                    err,
                    "bursar: Job {job} no longer found and exit code not found"
                )?;
                1
            }
        });
    }
}

/// A failure `--wait` outlasts, as sbatch outlasts any but an unknown job: no answer from the
/// server, or a server error (5xx: the job's cluster refusing or unavailable, a proxy in front
/// of a restarting server). A refusal of the caller (4xx: token, job not theirs) ends the wait.
fn retry_while_waiting(e: &ClientError) -> bool {
    match e {
        ClientError::Unreachable { .. } | ClientError::Timeout { .. } => true,
        ClientError::Api(api) => api.status >= 500,
        ClientError::Unexpected { status, .. } => *status >= 500,
        _ => false,
    }
}

/// `bursar quote [sbatch options] SCRIPT [--format F]`: every cluster, its estimate and whether
/// the account (and its ancestors) can pay. Exit 1 when no cluster can take the job now.
pub async fn quote(
    argv: &[String],
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let (format, argv) = take_format(argv)?;
    let job = match build::read_command_line(&argv, &Shell::current(), false)? {
        Parsed::Help => {
            let usage = SBATCH_USAGE.replace("bursar submit", "bursar quote");
            out.write_all(usage.as_bytes())?;
            writeln!(out, "\nAlso: --format table|csv|json (default table).")?;
            return Ok(ExitCode::SUCCESS);
        }
        Parsed::Job(job) => job,
    };
    for note in &job.notes {
        writeln!(err, "bursar: note: {note}")?;
    }
    let client = connect(err)?;
    let answer = client.post("/v1/quotes", &job.request, None).await?;
    let quotes = decode_quotes(&client, &answer)?;
    match format {
        Format::Json => write_json(out, &answer)?,
        Format::Csv => render::write_quotes(&quotes, format, out)?,
        Format::Table => {
            render::write_quotes(&quotes, format, out)?;
            render::write_route(&answer, out)?;
        }
    }
    Ok(quote_exit(&quotes))
}

fn decode_quotes(client: &Client, answer: &Value) -> Result<Vec<ClusterQuote>, ClientError> {
    let list = quote_list(answer).cloned().unwrap_or(Value::Null);
    client.decode("the quote", list)
}

fn quote_exit(quotes: &[ClusterQuote]) -> ExitCode {
    if quotes.iter().any(ClusterQuote::usable) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Pulls `--format F` / `--format=F` out of a quote's options (sbatch has no `--format`), up
/// to a `--`.
fn take_format(argv: &[String]) -> anyhow::Result<(Format, Vec<String>)> {
    use clap::ValueEnum;
    let mut format = Format::Table;
    let mut rest = Vec::with_capacity(argv.len());
    let mut words = argv.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            rest.push(word.clone());
            rest.extend(words.by_ref().cloned());
            break;
        }
        let value = if word == "--format" {
            match words.next() {
                Some(v) => v.clone(),
                None => bail!("--format needs a value: table, csv or json"),
            }
        } else if let Some(v) = word.strip_prefix("--format=") {
            v.to_string()
        } else {
            rest.push(word.clone());
            continue;
        };
        format = Format::from_str(&value, true)
            .map_err(|_| anyhow::anyhow!("--format {value:?}: expected table, csv or json"))?;
    }
    Ok((format, rest))
}

/// `bursar jobs`: the caller's jobs (finance and admin: everyone's), held ones unless `--all`.
pub async fn jobs(
    args: &JobsArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let client = connect(err)?;
    let mut query = Vec::new();
    let state = match (&args.state, args.all) {
        (Some(state), _) => Some(state.as_str()),
        (None, false) => Some("held"),
        (None, true) => None,
    };
    let (limit, before) = (
        args.limit.map(|n| n.to_string()),
        args.before.map(|id| id.to_string()),
    );
    for (key, value) in [
        ("state", state),
        ("user", args.user.as_deref()),
        ("account", args.account.as_deref()),
        ("limit", limit.as_deref()),
        ("before", before.as_deref()),
    ] {
        if let Some(value) = value {
            query.push(format!("{key}={}", http::segment(value)));
        }
    }
    let path = match query.is_empty() {
        true => "/v1/jobs".to_string(),
        false => format!("/v1/jobs?{}", query.join("&")),
    };
    let answer = client.get(&path).await?;
    let Some(Value::Array(rows)) = list_in(&answer, &["jobs"]) else {
        bail!(
            "unexpected answer from bursar at {}: GET /v1/jobs is not a list of jobs",
            client.url()
        );
    };
    // The server filters; this keeps the promise if it does not know `state`.
    let rows: Vec<Value> = rows
        .iter()
        .filter(|job| match state {
            Some(state) => job
                .get("state")
                .and_then(Value::as_str)
                .is_none_or(|s| s == state),
            None => true,
        })
        .cloned()
        .collect();
    let older = answer.get("next_before").and_then(Value::as_i64);
    match args.format {
        Format::Json => write_json(out, &json!({ "jobs": rows, "next_before": older }))?,
        format => {
            if rows.is_empty() && format == Format::Table {
                writeln!(
                    out,
                    "{}",
                    if args.all || args.state.is_some() {
                        "no jobs"
                    } else {
                        "no held jobs (--all shows finished ones too)"
                    }
                )?;
            } else {
                render::write_jobs(&rows, format, out)?;
            }
            if let Some(id) = older {
                writeln!(
                    err,
                    "older jobs may match too: add --before {id} to list them"
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `bursar cancel ID...`: cancel on the cluster, release the hold. Every id is tried; exit 1
/// if any was refused.
pub async fn cancel(
    args: &CancelArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let client = connect(err)?;
    let mut failed = 0;
    for id in &args.ids {
        match client
            .delete(&format!("/v1/jobs/{}", http::segment(id)))
            .await
        {
            Ok(answer) => {
                let field = |name: &str| answer.get(name).filter(|v| !v.is_null()).map(text);
                let mut line = format!("cancelled bursar job {id}");
                if let (Some(job), Some(cluster)) = (field("cluster_job_id"), field("cluster")) {
                    line.push_str(&format!(" (job {job} on cluster {cluster})"));
                }
                line.push_str("; its hold is released");
                writeln!(out, "{line}")?;
            }
            Err(e @ (ClientError::Api(_) | ClientError::Unexpected { .. }))
                if args.ids.len() > 1 =>
            {
                failed += 1;
                writeln!(err, "bursar: job {id}: {e}")?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Whether `bursar balance` asks the server, decided before any configuration is read:
/// `--remote`, or `BURSAR_URL` without `--local`.
pub fn balance_is_remote(args: &BalanceArgs) -> bool {
    args.remote || (!args.local && std::env::var_os("BURSAR_URL").is_some_and(|u| !u.is_empty()))
}

/// A ledger this host can read: a configuration file, a database named by `--database` or
/// `BURSAR_DATABASE`, or the default `./bursar.db`. Without any, `bursar balance` asks the
/// server (unless `--local`).
pub fn local_ledger_available(config: &Config) -> bool {
    config.source.is_some() || config.database.is_some() || Path::new("bursar.db").exists()
}

/// `bursar balance` through the API: the accounts the token can see (or the one named), each
/// account's rows from `GET /v1/accounts/{name}/balance`.
pub async fn balance(
    args: &BalanceArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let client = connect(err)?;
    let names: Vec<String> = match &args.account {
        Some(account) => vec![account.clone()],
        None => {
            let answer = client.get("/v1/accounts").await?;
            let Some(Value::Array(accounts)) = list_in(&answer, &["accounts"]) else {
                bail!(
                    "unexpected answer from bursar at {}: GET /v1/accounts is not a list of accounts",
                    client.url()
                );
            };
            accounts
                .iter()
                .filter_map(|a| match a {
                    Value::String(name) => Some(name.clone()),
                    other => other
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect()
        }
    };
    let query = match &args.at {
        Some(at) => format!("?at={}", http::segment(at)),
        None => String::new(),
    };
    let mut at = None;
    let mut rows: Vec<Value> = Vec::new();
    let mut seen = BTreeSet::new();
    for name in &names {
        let path = format!("/v1/accounts/{}/balance{query}", http::segment(name));
        let answer = match client.get(&path).await {
            Ok(answer) => answer,
            // An ancestor the caller is not associated with: listed in the tree, its balance
            // is not the caller's to read.
            Err(ClientError::Api(e)) if args.account.is_none() && matches!(e.status, 403 | 404) => {
                continue
            }
            Err(e) => return Err(e.into()),
        };
        if at.is_none() {
            at = answer.get("at").cloned();
        }
        for row in list_in(&answer, &["balances", "rows"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = (text(&row["account"]), text(&row["currency"]));
            if seen.insert(key) {
                rows.push(row.clone());
            }
        }
    }
    match args.format {
        Format::Json => write_json(
            out,
            &json!({ "at": at.unwrap_or(Value::Null), "balances": rows }),
        )?,
        format => {
            if rows.is_empty() && format == Format::Table {
                writeln!(out, "no balances this token may see")?;
            } else {
                render::write_balances(&rows, format, out)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn format_is_taken_out_of_quote_options() {
        let (f, rest) = take_format(&words(&["-A", "x", "--format", "json", "job.sh"])).unwrap();
        assert_eq!(f, Format::Json);
        assert_eq!(rest, words(&["-A", "x", "job.sh"]));
        let (f, rest) = take_format(&words(&["--format=csv", "--", "--format"])).unwrap();
        assert_eq!(f, Format::Csv);
        assert_eq!(rest, words(&["--", "--format"]));
        assert!(take_format(&words(&["--format", "xml"])).is_err());
    }
}
