//! Finance commands: `bursar statement`, `bursar export focus` and `bursar report top`, with
//! the JSON the API shares (`statement_json`, `top_json`). Column mapping of the FOCUS export:
//! `docs/finance.md`.

use std::io::Write;

use anyhow::{bail, Context};
use bursar_ledger::calendar::{civil_from_days, day_start, SECONDS_PER_DAY};
use bursar_ledger::finance::{Statement, TopBy, TopRow};
use bursar_ledger::{EntryKind, JournalEntry};
use bursar_pricing::money::format_micros;
use bursar_pricing::Currency;
use serde_json::{json, Value};

use crate::app::App;
use crate::config::ClusterKind;
use crate::output::{write_csv_line, write_json, Format, Table};
use crate::timefmt::{format_instant, parse_instant};

/// `--from`/`--to` as epoch seconds, `to` after `from`.
pub fn period(from: &str, to: &str) -> anyhow::Result<(i64, i64)> {
    let from = parse_instant(from).context("--from")?;
    let to = parse_instant(to).context("--to")?;
    if to <= from {
        bail!("--to must be after --from");
    }
    Ok((from, to))
}

fn money(app: &App, currency: &Currency, micros: i64) -> String {
    format_micros(micros, app.decimals(currency.as_str()))
}

fn movement(e: &JournalEntry) -> &'static str {
    match e.kind {
        EntryKind::Hold | EntryKind::Release => "held",
        k => k.as_str(),
    }
}

fn table_out(table: &Table, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    match format {
        Format::Csv => table.write_csv(out)?,
        _ => table.write_table(out)?,
    }
    Ok(())
}

/// `bursar statement --format json` and `GET /v1/accounts/{name}/statement`.
pub fn statement_json(app: &App, st: &Statement) -> Value {
    let m = |micros: i64| money(app, &st.currency, micros);
    let lines: Vec<Value> = st
        .lines
        .iter()
        .map(|e| {
            json!({
                "id": e.id,
                "movement": movement(e),
                "kind": e.kind.as_str(),
                "effective_at": format_instant(e.effective_at),
                "account": e.account,
                "amount": m(e.amount),
                "cluster": e.cluster,
                "job_id": e.display_id.clone().or(e.job_id.clone()),
                "user": e.user,
                "state": e.state,
                "note": e.note,
            })
        })
        .collect();
    json!({
        "account": st.account,
        "currency": st.currency,
        "from": format_instant(st.from),
        "to": format_instant(st.to),
        "window_start": crate::cmd::bound_json(st.window_start),
        "opening": m(st.opening),
        "deposits": m(st.deposits),
        "charges": m(st.charges),
        "refunds": m(st.refunds),
        "adjustments": m(st.adjustments),
        "held": m(st.held),
        "closing": m(st.closing),
        "lines": lines,
    })
}

pub async fn statement(
    app: &App,
    args: crate::cli::StatementArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (from, to) = period(&args.from, &args.to)?;
    let currency = Currency::new(&args.currency);
    let st = app
        .ledger
        .statement(&args.account, &currency, from, to)
        .await?;
    if args.format == Format::Json {
        return Ok(write_json(out, &statement_json(app, &st))?);
    }
    let m = |micros: i64| money(app, &st.currency, micros);
    let mut table = Table::new(
        &[
            "effective_at",
            "movement",
            "account",
            "cluster",
            "job",
            "user",
            "amount",
            "note",
        ],
        &["amount"],
    );
    let summary = |table: &mut Table, label: &str, amount: i64| {
        table.push(vec![
            String::new(),
            label.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            m(amount),
            String::new(),
        ])
    };
    summary(&mut table, "opening", st.opening);
    for e in &st.lines {
        table.push(vec![
            format_instant(e.effective_at),
            movement(e).to_string(),
            e.account.clone(),
            e.cluster.clone().unwrap_or_default(),
            e.display_id
                .clone()
                .or(e.job_id.clone())
                .unwrap_or_default(),
            e.user.clone().unwrap_or_default(),
            m(e.amount),
            e.note.clone().unwrap_or_default(),
        ]);
    }
    if args.format == Format::Table {
        summary(&mut table, "deposits", st.deposits);
        summary(&mut table, "charges", st.charges);
        summary(&mut table, "refunds", st.refunds);
        summary(&mut table, "adjustments", st.adjustments);
        summary(&mut table, "held (net)", st.held);
    }
    summary(&mut table, "closing", st.closing);
    table_out(&table, args.format, out)
}

/// The FOCUS 1.0 columns bursar fills, in export order.
pub const FOCUS_COLUMNS: [&str; 22] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ResourceId",
    "ResourceName",
    "ServiceName",
    "ServiceCategory",
    "SubAccountId",
    "SubAccountName",
    "ProviderName",
    "Region",
    "Tags",
];

/// `YYYY-MM-01T00:00:00Z` of the month containing `t` and of the next month.
fn month_bounds(t: i64) -> (String, String) {
    let (y, m, _) = civil_from_days(t.div_euclid(SECONDS_PER_DAY));
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (
        format!("{y:04}-{m:02}-01T00:00:00Z"),
        format!("{ny:04}-{nm:02}-01T00:00:00Z"),
    )
}

/// One FOCUS row per usage entry, as (column, value) pairs in [`FOCUS_COLUMNS`] order; `None`
/// is a null.
pub fn focus_row(app: &App, e: &JournalEntry) -> Vec<Option<String>> {
    let amount = money(app, &e.currency, e.amount);
    let (billing_start, billing_end) = month_bounds(e.effective_at);
    let day = day_start(e.effective_at);
    let category = match e.kind {
        EntryKind::Charge => "Usage",
        EntryKind::Refund => "Credit",
        _ => "Adjustment",
    };
    let class = (e.kind != EntryKind::Charge).then(|| "Correction".to_string());
    let cluster = e.cluster.clone();
    let service = cluster
        .as_deref()
        .map(|c| match app.config.clusters.get(c).map(|c| &c.kind) {
            Some(ClusterKind::Dstack) => "dstack".to_string(),
            _ => format!("Slurm {c}"),
        });
    let job = e.display_id.clone().or(e.job_id.clone());
    let resource_id = match (&cluster, &job) {
        (Some(c), Some(j)) => Some(format!("{c}/{j}")),
        _ => None,
    };
    let description = match (&job, &e.state) {
        (Some(j), Some(s)) => format!("{} of job {j} ({s})", e.kind),
        (Some(j), None) => format!("{} of job {j}", e.kind),
        _ => e
            .note
            .clone()
            .unwrap_or_else(|| format!("manual {}", e.kind)),
    };
    let su = e.currency.as_str() == "su";
    let mut tags = serde_json::Map::new();
    for (k, v) in [
        ("user", &e.user),
        ("partition", &e.partition),
        ("qos", &e.qos),
    ] {
        if let Some(v) = v {
            tags.insert(k.into(), json!(v));
        }
    }
    vec![
        Some(amount.clone()),
        Some(amount.clone()),
        Some(amount.clone()),
        Some(e.currency.to_string()),
        Some(billing_start),
        Some(billing_end),
        Some(format_instant(day)),
        Some(format_instant(day + SECONDS_PER_DAY)),
        Some(category.to_string()),
        class,
        Some(description),
        su.then(|| amount.clone()),
        su.then(|| "core-hours".to_string()),
        resource_id,
        job,
        service,
        Some("Compute".to_string()),
        Some(e.account.clone()),
        Some(e.account.clone()),
        Some("bursar".to_string()),
        None,
        Some(Value::Object(tags).to_string()),
    ]
}

/// `bursar export focus`: the FOCUS rows of the period, written a day at a time (an export of
/// a year holds no more than its busiest day in memory). CSV for `table` too: an export is
/// for tools.
pub async fn export_focus(
    app: &App,
    args: crate::cli::FocusArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (from, to) = period(&args.from, &args.to)?;
    let mut export = FocusExport::new(matches!(args.format, Format::Json));
    out.write_all(&export.start())?;
    for (start, stop) in app.ledger.usage_days(from, to).await? {
        let day = app.ledger.usage_entries_of_day(start, stop).await?;
        out.write_all(&export.rows(app, &day)?)?;
    }
    out.write_all(&export.end())?;
    Ok(())
}

/// The FOCUS export as text, piece by piece, for the CLI and `GET /v1/exports/focus`: CSV,
/// or a JSON array pretty-printed as the other JSON outputs.
#[derive(Debug)]
pub struct FocusExport {
    json: bool,
    rows: u64,
}

impl FocusExport {
    pub fn new(json: bool) -> FocusExport {
        FocusExport { json, rows: 0 }
    }

    /// What comes before the rows: the CSV header (nothing for JSON, whose `[` opens with
    /// the first row).
    pub fn start(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.json {
            // Writing to a Vec cannot fail.
            let _ = write_csv_line(&mut out, &FOCUS_COLUMNS);
        }
        out
    }

    /// The rows of `entries`.
    pub fn rows(&mut self, app: &App, entries: &[JournalEntry]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        for e in entries {
            if self.json {
                self.json_row(&mut out, app, e)?;
            } else {
                let cells: Vec<String> = focus_row(app, e)
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect();
                write_csv_line(&mut out, &cells)?;
            }
            self.rows += 1;
        }
        Ok(out)
    }

    /// What closes the export.
    pub fn end(&self) -> Vec<u8> {
        match (self.json, self.rows) {
            (false, _) => Vec::new(),
            (true, 0) => b"[]\n".to_vec(),
            (true, _) => b"\n]\n".to_vec(),
        }
    }

    /// One row as an element of a pretty-printed JSON array (`[` before the first).
    fn json_row(&self, out: &mut Vec<u8>, app: &App, e: &JournalEntry) -> std::io::Result<()> {
        let row: serde_json::Map<String, Value> = FOCUS_COLUMNS
            .iter()
            .zip(focus_row(app, e))
            .map(|(k, v)| {
                let v = match (*k, v) {
                    ("Tags", Some(t)) => serde_json::from_str(&t).unwrap_or(Value::Null),
                    (_, v) => v.map_or(Value::Null, Value::String),
                };
                (k.to_string(), v)
            })
            .collect();
        let text = serde_json::to_string_pretty(&Value::Object(row))?;
        out.extend_from_slice(if self.rows == 0 { b"[\n  " } else { b",\n  " });
        out.extend_from_slice(text.replace('\n', "\n  ").as_bytes());
        Ok(())
    }
}

/// `bursar report top --format json` and `GET /v1/reports/top`.
pub fn top_json(app: &App, by: TopBy, from: i64, to: i64, rows: &[TopRow]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut row = json!({
                "currency": r.currency,
                "user": r.user,
                "amount": money(app, &r.currency, r.amount),
                "jobs": r.jobs,
            });
            if by == TopBy::Job {
                row["cluster"] = json!(r.cluster);
                row["job_id"] = json!(r.display_id.clone().or(r.job_id.clone()));
                row["account"] = json!(r.account);
            }
            row
        })
        .collect();
    json!({
        "by": match by { TopBy::User => "user", TopBy::Job => "job" },
        "from": format_instant(from),
        "to": format_instant(to),
        "rows": rows,
    })
}

pub fn parse_top_by(by: &str) -> anyhow::Result<TopBy> {
    match by {
        "user" => Ok(TopBy::User),
        "job" => Ok(TopBy::Job),
        other => bail!("--by {other:?}: expected user or job"),
    }
}

pub async fn report_top(
    app: &App,
    args: crate::cli::TopArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (from, to) = period(&args.from, &args.to)?;
    let by = parse_top_by(&args.by)?;
    let currency = args.currency.as_deref().map(Currency::new);
    let rows = app
        .ledger
        .top(by, from, to, currency.as_ref(), args.limit)
        .await?;
    if args.format == Format::Json {
        return Ok(write_json(out, &top_json(app, by, from, to, &rows))?);
    }
    let mut table = match by {
        TopBy::User => Table::new(&["currency", "user", "amount", "jobs"], &["amount", "jobs"]),
        TopBy::Job => Table::new(
            &["currency", "cluster", "job", "user", "account", "amount"],
            &["amount"],
        ),
    };
    for r in &rows {
        let amount = money(app, &r.currency, r.amount);
        table.push(match by {
            TopBy::User => vec![
                r.currency.to_string(),
                r.user.clone(),
                amount,
                r.jobs.to_string(),
            ],
            TopBy::Job => vec![
                r.currency.to_string(),
                r.cluster.clone().unwrap_or_default(),
                r.display_id
                    .clone()
                    .or(r.job_id.clone())
                    .unwrap_or_default(),
                r.user.clone(),
                r.account.clone().unwrap_or_default(),
                amount,
            ],
        });
    }
    table_out(&table, args.format, out)
}
