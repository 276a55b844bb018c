//! The server's answers (docs/api.md) as types, and as the lines and tables users read.

use std::io::Write;

use serde::Deserialize;
use serde_json::Value;

use crate::output::{Format, Table};

/// A JSON value as a table cell: strings unquoted, `null` as `-`, lists joined with `, `,
/// `{"account","remaining"}` pairs as `account remaining`.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
        Value::Object(map) => match (map.get("account"), map.get("remaining")) {
            (Some(a), Some(r)) if map.len() == 2 => format!("{} {}", text(a), text(r)),
            _ => value.to_string(),
        },
    }
}

/// `201` of `POST /v1/jobs`.
#[derive(Debug, Clone, Deserialize)]
pub struct Submitted {
    pub id: Value,
    pub cluster: String,
    pub cluster_job_id: Value,
    pub currency: String,
    pub hold: String,
    #[serde(default)]
    pub estimate: Option<String>,
    #[serde(default)]
    pub route: Option<Route>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Route {
    #[serde(default)]
    pub cluster: Option<String>,
    #[serde(default)]
    pub explanation: Vec<String>,
}

impl Submitted {
    /// sbatch's line: `Submitted batch job 1234 on cluster onprem`.
    pub fn sbatch_line(&self) -> String {
        format!(
            "Submitted batch job {} on cluster {}",
            text(&self.cluster_job_id),
            self.cluster
        )
    }

    /// `--parsable`: `1234`, or `1234;onprem` when the user named clusters with `-M`, as
    /// sbatch prints it (so `jid=$(bursar submit --parsable job.sh)` gives a bare id, as it
    /// does with sbatch).
    pub fn parsable_line(&self, clusters_named: bool) -> String {
        if clusters_named {
            format!("{};{}", text(&self.cluster_job_id), self.cluster)
        } else {
            text(&self.cluster_job_id)
        }
    }

    /// `bursar job 17: held 4.00 su (estimate) — onprem: first choice, affordable`.
    pub fn bursar_line(&self) -> String {
        let mut line = format!(
            "bursar job {}: held {} {} (estimate)",
            text(&self.id),
            self.hold,
            self.currency
        );
        if let Some(first) = self
            .route
            .as_ref()
            .and_then(|r| r.explanation.first())
            .and_then(|e| e.lines().next())
            .filter(|e| !e.trim().is_empty())
        {
            line.push_str(" — ");
            line.push_str(first.trim());
        }
        line
    }
}

/// One cluster of `POST /v1/quotes`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterQuote {
    pub cluster: String,
    pub currency: String,
    pub eligible: bool,
    #[serde(default)]
    pub reasons: Vec<String>,
    #[serde(default)]
    pub estimate: Option<String>,
    #[serde(default)]
    pub remaining_after: Vec<RemainingAfter>,
    /// Not in the contract; used when the server sends it, else derived.
    #[serde(default)]
    pub affordable: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RemainingAfter {
    pub account: String,
    #[serde(default)]
    pub remaining: Option<String>,
}

impl ClusterQuote {
    /// Eligible and every account in the chain still at or above 0 after the job; `None` when
    /// it cannot be said (not eligible, or no balances given).
    pub fn affordable(&self) -> Option<bool> {
        if let Some(a) = self.affordable {
            return Some(a);
        }
        if !self.eligible || self.remaining_after.is_empty() {
            return None;
        }
        Some(self.remaining_after.iter().all(|r| {
            r.remaining
                .as_deref()
                .is_some_and(|amount| !amount.trim_start().starts_with('-'))
        }))
    }

    /// Could run here now: eligible and affordable.
    pub fn usable(&self) -> bool {
        self.eligible && self.affordable() == Some(true)
    }
}

/// The quote answer: a list, or an object holding it under `quotes` or `clusters`.
pub fn quote_list(value: &Value) -> Option<&Value> {
    list_in(value, &["quotes", "clusters"])
}

/// A list, or the list under one of `keys` of an object.
pub fn list_in<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    if value.is_array() {
        return Some(value);
    }
    keys.iter()
        .filter_map(|k| value.get(*k))
        .find(|v| v.is_array())
}

pub fn write_quotes(
    quotes: &[ClusterQuote],
    format: Format,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut table = Table::new(
        &[
            "cluster",
            "currency",
            "estimate",
            "eligible",
            "affordable",
            "remaining after",
            "reasons",
        ],
        &["estimate"],
    );
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    for q in quotes {
        let remaining = q
            .remaining_after
            .iter()
            .map(|r| format!("{} {}", r.account, r.remaining.as_deref().unwrap_or("-")))
            .collect::<Vec<_>>()
            .join(", ");
        table.push(vec![
            q.cluster.clone(),
            q.currency.clone(),
            q.estimate.clone().unwrap_or_else(|| "-".into()),
            yes_no(Some(q.eligible)).to_string(),
            yes_no(q.affordable()).to_string(),
            if remaining.is_empty() {
                "-".into()
            } else {
                remaining
            },
            q.reasons.join("; "),
        ]);
    }
    match format {
        Format::Csv => table.write_csv(out),
        _ => table.write_table(out),
    }
}

/// Under a quote table: the account charged and where bursar would send the job, with the
/// reasons (`route.explanation` of the quote answer), when the server gives them.
pub fn write_route(answer: &Value, out: &mut impl Write) -> std::io::Result<()> {
    let lines: Vec<&str> = answer
        .pointer("/route/explanation")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some((first, rest)) = lines.split_first() else {
        return Ok(());
    };
    writeln!(out)?;
    if let Some(account) = answer.get("account").and_then(Value::as_str) {
        writeln!(out, "account: {account}")?;
    }
    writeln!(out, "route: {first}")?;
    for line in rest {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Rows of `GET /v1/jobs` as a table: every row a JSON object, missing fields shown as `-`.
pub fn write_jobs(jobs: &[Value], format: Format, out: &mut impl Write) -> std::io::Result<()> {
    const COLUMNS: [(&str, &str); 11] = [
        ("id", "id"),
        ("cluster", "cluster"),
        ("job", "cluster_job_id"),
        ("account", "account"),
        ("user", "user"),
        ("state", "state"),
        ("estimate", "estimate"),
        ("hold", "hold"),
        ("charge", "charge"),
        ("currency", "currency"),
        ("submitted", "submitted_at"),
    ];
    let headers: Vec<&'static str> = COLUMNS.iter().map(|(h, _)| *h).collect();
    let mut table = Table::new(&headers, &["id", "estimate", "hold", "charge"]);
    for job in jobs {
        table.push(
            COLUMNS
                .iter()
                .map(|(_, key)| job.get(*key).map(text).unwrap_or_else(|| "-".into()))
                .collect(),
        );
    }
    match format {
        Format::Csv => table.write_csv(out),
        _ => table.write_table(out),
    }
}

/// Balance rows (`bursar balance --format json`'s `balances`) as the local command draws them.
pub fn write_balances(rows: &[Value], format: Format, out: &mut impl Write) -> std::io::Result<()> {
    let mut table = Table::new(
        &[
            "account",
            "currency",
            "allocated",
            "charged",
            "held",
            "remaining",
            "available",
            "period",
        ],
        &["allocated", "charged", "held", "remaining", "available"],
    );
    let cell = |row: &Value, key: &str, none: &str| match row.get(key) {
        None | Some(Value::Null) => none.to_string(),
        Some(v) => text(v),
    };
    for row in rows {
        let start = cell(row, "period_start", "");
        let end = cell(row, "period_end", "");
        let period = match (row.get("period_start"), row.get("period_end")) {
            (None, None) => "all time".to_string(),
            _ => format!(
                "{} .. {}",
                if start.is_empty() { "-" } else { &start },
                if end.is_empty() { "-" } else { &end }
            ),
        };
        table.push(vec![
            cell(row, "account", "-"),
            cell(row, "currency", "-"),
            cell(row, "allocated", "-"),
            cell(row, "charged", "-"),
            cell(row, "held", "-"),
            cell(row, "remaining", "-"),
            cell(row, "available", "no allocation"),
            period,
        ]);
    }
    match format {
        Format::Csv => table.write_csv(out),
        _ => table.write_table(out),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn submitted_lines() {
        let s: Submitted = serde_json::from_value(json!({
            "id": 17, "cluster": "onprem", "cluster_job_id": "4242", "currency": "su",
            "hold": "4.00", "estimate": "4.00",
            "route": {"cluster": "onprem", "explanation": ["onprem: first choice\nmore", "x"]}
        }))
        .unwrap();
        assert_eq!(
            s.sbatch_line(),
            "Submitted batch job 4242 on cluster onprem"
        );
        assert_eq!(s.parsable_line(true), "4242;onprem");
        assert_eq!(s.parsable_line(false), "4242");
        assert_eq!(
            s.bursar_line(),
            "bursar job 17: held 4.00 su (estimate) — onprem: first choice"
        );
    }

    #[test]
    fn affordable_is_derived_from_remaining() {
        let q = |eligible, remaining: &[&str]| ClusterQuote {
            cluster: "c".into(),
            currency: "su".into(),
            eligible,
            reasons: vec![],
            estimate: Some("1.00".into()),
            remaining_after: remaining
                .iter()
                .map(|r| RemainingAfter {
                    account: "a".into(),
                    remaining: Some(r.to_string()),
                })
                .collect(),
            affordable: None,
        };
        assert_eq!(q(true, &["1.00", "0.00"]).affordable(), Some(true));
        assert_eq!(q(true, &["1.00", "-0.50"]).affordable(), Some(false));
        assert_eq!(q(false, &["1.00"]).affordable(), None);
        assert!(!q(true, &[]).usable());
    }

    #[test]
    fn cells() {
        assert_eq!(text(&json!(null)), "-");
        assert_eq!(
            text(&json!([{"account": "a", "remaining": "1.00"}])),
            "a 1.00"
        );
    }
}
