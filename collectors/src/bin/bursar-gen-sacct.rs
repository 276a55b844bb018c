//! `bursar-gen-sacct --records N --seed S [--clusters onprem,cloud] [--start 2026-01-01]
//! [--days D] [--accounts 200] [--users 1000] > dump.psv`: synthetic `sacct --parsable2` output for
//! benchmarks (see `bursar_collectors::synth`).

use std::io;
use std::process::ExitCode;

use bursar_collectors::synth::{write_sacct, SynthConfig};

const USAGE: &str = "usage: bursar-gen-sacct --records N --seed S [--clusters onprem,cloud] \
[--start YYYY-MM-DD] [--days D] [--accounts 200] [--users 1000]";

fn main() -> ExitCode {
    let config = match parse_args(std::env::args().skip(1)) {
        Ok(Some(config)) => config,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("bursar-gen-sacct: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match write_sacct(&config, io::stdout().lock()) {
        Ok(_) => ExitCode::SUCCESS,
        // a closed pipe (`| head`) is a normal way to stop
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bursar-gen-sacct: writing: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<SynthConfig>, String> {
    let mut config = SynthConfig::default();
    let (mut records, mut seed) = (None, None);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (flag.clone(), None),
        };
        let value = match inline.or_else(|| args.next()) {
            Some(value) => value,
            None => return Err(format!("{name} needs a value")),
        };
        let number = |what: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("{what} must be a whole number, not {value:?}"))
        };
        match name.as_str() {
            "--records" => records = Some(number("--records")?),
            "--seed" => seed = Some(number("--seed")?),
            "--accounts" => config.accounts = positive(number("--accounts")?, "--accounts")?,
            "--users" => config.users = positive(number("--users")?, "--users")?,
            "--clusters" => {
                config.clusters = value
                    .split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect();
                if config.clusters.is_empty() {
                    return Err("--clusters needs at least one name".to_string());
                }
            }
            "--start" => config.start = parse_date(&value)?,
            "--days" => config.days = Some(positive(number("--days")?, "--days")?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    config.records = records.ok_or("--records is required")?;
    config.seed = seed.ok_or("--seed is required")?;
    Ok(Some(config))
}

fn positive(n: u64, what: &str) -> Result<u32, String> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{what} must be between 1 and {}", u32::MAX))
}

/// `YYYY-MM-DD` (midnight UTC) to Unix seconds.
fn parse_date(text: &str) -> Result<i64, String> {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| {
            d.and_hms_opt(0, 0, 0)
                .unwrap_or_default()
                .and_utc()
                .timestamp()
        })
        .map_err(|_| format!("--start must be a date like 2026-01-01, not {text:?}"))
}
