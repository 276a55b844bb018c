//! `bursar forecast` and the `forecast` object of balances (`bursar balance --format json`,
//! `GET /v1/accounts/{name}/balance`). The arithmetic is the ledger's
//! (`bursar_ledger::forecast`): burn rate in micros per day rounded up, holds of running jobs
//! counted as spent, exhaustion at the first second the projection covers what remains.

use std::io::Write;

use anyhow::bail;
use bursar_ledger::{Exhaustion, Forecast};
use bursar_pricing::money::format_micros;
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::ForecastArgs;
use crate::output::{write_json, Format, Table};
use crate::timefmt::{format_bound, format_instant, now, parse_duration, parse_instant};

/// The forecast window in seconds: `--window` when given, else `alerts.window` (14 days).
pub fn window(app: &App, flag: Option<&str>) -> anyhow::Result<i64> {
    let duration = match flag {
        Some(text) => parse_duration(text)?,
        None => app.config.alerts.window(),
    };
    if duration.as_secs() < 3600 {
        bail!(
            "--window {}: the window must be at least 1h",
            flag.unwrap_or("")
        );
    }
    Ok(i64::try_from(duration.as_secs())?)
}

/// `14d`, `36h`, `5400s`: a window as people write it.
pub fn format_window(seconds: i64) -> String {
    if seconds % 86_400 == 0 {
        format!("{}d", seconds / 86_400)
    } else if seconds % 3600 == 0 {
        format!("{}h", seconds / 3600)
    } else {
        format!("{seconds}s")
    }
}

fn money(app: &App, f: &Forecast, micros: i64) -> String {
    format_micros(micros, app.decimals(f.currency.as_str()))
}

/// The `forecast` object of a balance row.
pub fn forecast_json(app: &App, f: &Forecast) -> Value {
    json!({
        "window": format_window(f.window),
        "window_start": format_instant(f.at - f.window),
        "usage_in_window": money(app, f, f.window_usage),
        "held": money(app, f, f.window_held),
        "burn_rate_per_day": money(app, f, f.rate_per_day),
        "status": f.exhaustion.as_str(),
        "exhaustion": match f.exhaustion {
            Exhaustion::At(t) => Some(format_instant(t)),
            _ => None,
        },
        "before_period_end": f.before_period_end,
    })
}

/// `bursar forecast`.
pub async fn command(app: &App, args: ForecastArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let window = window(app, args.window.as_deref())?;
    let at = args
        .at
        .as_deref()
        .map(parse_instant)
        .transpose()?
        .unwrap_or_else(now);
    let forecasts = app
        .ledger
        .forecasts(at, window, args.account.as_deref())
        .await?;
    if args.format == Format::Json {
        let rows: Vec<Value> = forecasts
            .iter()
            .map(|f| {
                let mut v = forecast_json(app, f);
                v["account"] = json!(f.account);
                v["currency"] = json!(f.currency);
                v["allocated"] = json!(f.allocated.map(|m| money(app, f, m)));
                v["committed"] = json!(f.committed().ok().map(|m| money(app, f, m)));
                v["remaining"] = json!(f.remaining.map(|m| money(app, f, m)));
                v["period_end"] = json!(f.period.map(|p| crate::cmd::bound_json(p.1)));
                v
            })
            .collect();
        return Ok(write_json(
            out,
            &json!({
                "at": format_instant(at),
                "window": format_window(window),
                "forecasts": rows,
            }),
        )?);
    }
    let mut table = Table::new(
        &[
            "account",
            "currency",
            "allocated",
            "committed",
            "remaining",
            "used in window",
            "held",
            "rate/day",
            "runs out",
            "period end",
            "flag",
        ],
        &[
            "allocated",
            "committed",
            "remaining",
            "used in window",
            "held",
            "rate/day",
        ],
    );
    let dash = || "-".to_string();
    for f in &forecasts {
        let runs_out = match f.exhaustion {
            Exhaustion::At(t) => format_instant(t),
            Exhaustion::Exhausted => "exhausted".to_string(),
            Exhaustion::Never => "never".to_string(),
            Exhaustion::NoAllocation => dash(),
        };
        let flag = match f.exhaustion {
            Exhaustion::Exhausted => "EXHAUSTED",
            Exhaustion::At(_) if f.before_period_end => "BEFORE END",
            _ => "",
        };
        table.push(vec![
            f.account.clone(),
            f.currency.to_string(),
            f.allocated.map(|m| money(app, f, m)).unwrap_or_else(dash),
            f.committed()
                .map(|m| money(app, f, m))
                .unwrap_or_else(|_| dash()),
            f.remaining.map(|m| money(app, f, m)).unwrap_or_else(dash),
            money(app, f, f.window_usage),
            money(app, f, f.window_held),
            money(app, f, f.rate_per_day),
            runs_out,
            f.period.map(|p| format_bound(p.1)).unwrap_or_else(dash),
            flag.to_string(),
        ]);
    }
    match args.format {
        Format::Csv => table.write_csv(out)?,
        _ => {
            table.write_table(out)?;
            writeln!(
                out,
                "burn rate over [{}, {}) ({}), holds of running jobs counted as spent",
                format_instant(at - window),
                format_instant(at),
                format_window(window)
            )?;
        }
    }
    Ok(())
}
