//! [`ClientError`]: why a client command got no useful answer, and [`ApiError`]: the server's
//! refusal, rendered so a user can act on it.

use std::fmt;

use serde_json::Value;

use super::render::text;

/// Why a call to the bursar server did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Neither `BURSAR_TOKEN` nor the token file.
    #[error(
        "no token: ask your admin for one (`bursar token issue`) and put it in {path} or \
         BURSAR_TOKEN"
    )]
    NoToken { path: String },
    /// A bad `BURSAR_*` variable or an unreadable token file.
    #[error("{0}")]
    Config(String),
    /// No connection, or the connection was lost before an answer (after one retry).
    #[error("cannot reach bursar at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("bursar at {url} did not answer within {seconds} s (BURSAR_TIMEOUT sets the limit)")]
    Timeout { url: String, seconds: u64 },
    /// The server refused, with its JSON error.
    #[error("{0}")]
    Api(ApiError),
    /// An answer that is not what the API promises (a proxy's HTML page, say).
    #[error("unexpected answer from bursar at {url} (HTTP {status}): {reason}")]
    Unexpected {
        url: String,
        status: u16,
        reason: String,
    },
}

/// The server's error body (`{"error", "message", "details"}`, see docs/api.md) and what the
/// user can do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    /// `insufficient_allocation`, `forbidden`, …
    pub code: String,
    pub message: String,
    pub details: Value,
    /// A line of advice from the client (which token was refused, that nothing is held, …).
    pub hint: Option<String>,
}

impl fmt::Display for ApiError {
    /// The message, then the details (402: one row per cluster), then the hint; every line
    /// after the first indented by two spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for line in detail_lines(&self.details, &self.message) {
            write!(f, "\n  {line}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  {hint}")?;
        }
        Ok(())
    }
}

/// Details as lines: arrays of objects (402's `clusters`) as a table, other values as
/// `key: value` unless the message already says them (403's user and account).
fn detail_lines(details: &Value, message: &str) -> Vec<String> {
    let Some(map) = details.as_object() else {
        return match details {
            Value::Null => Vec::new(),
            other => vec![text(other)],
        };
    };
    let mut lines = Vec::new();
    for (key, value) in map {
        match value {
            Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
                lines.extend(object_table(items));
            }
            Value::Array(items) => lines.push(format!(
                "{key}: {}",
                items.iter().map(text).collect::<Vec<_>>().join(", ")
            )),
            Value::Null => {}
            other if message.contains(&text(other)) => {}
            other => lines.push(format!("{key}: {}", text(other))),
        }
    }
    lines
}

/// Rows of objects as a table: the columns a 402 has first (cluster, account, currency,
/// estimate, remaining), then any other keys in the order first seen.
fn object_table(items: &[Value]) -> Vec<String> {
    const FIRST: [&str; 5] = ["cluster", "account", "currency", "estimate", "remaining"];
    let mut columns: Vec<String> = FIRST
        .iter()
        .filter(|c| items.iter().any(|i| i.get(**c).is_some()))
        .map(|c| c.to_string())
        .collect();
    for item in items {
        for key in item.as_object().into_iter().flat_map(|m| m.keys()) {
            if !columns.contains(key) {
                columns.push(key.clone());
            }
        }
    }
    let numeric: Vec<bool> = columns
        .iter()
        .map(|c| matches!(c.as_str(), "estimate" | "remaining" | "allocated" | "held"))
        .collect();
    let mut rows = vec![columns.iter().map(|c| c.to_uppercase()).collect::<Vec<_>>()];
    for item in items {
        rows.push(
            columns
                .iter()
                .map(|c| item.get(c).map(text).unwrap_or_else(|| "-".into()))
                .collect(),
        );
    }
    aligned(&rows, &numeric)
}

/// Rows of cells as aligned lines, as [`crate::output::Table`] draws them (numbers to the
/// right), for headers only known at run time.
fn aligned(rows: &[Vec<String>], numeric: &[bool]) -> Vec<String> {
    let mut widths = vec![0; numeric.len()];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let pad = " ".repeat(widths[i] - cell.chars().count());
                    if numeric[i] {
                        format!("{pad}{cell}")
                    } else {
                        format!("{cell}{pad}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn insufficient_allocation_lists_every_cluster() {
        let e = ApiError {
            status: 402,
            code: "insufficient_allocation".into(),
            message: "physics has 1.25 su left in su; the job needs an estimated 4.00 su".into(),
            details: json!({"clusters": [
                {"cluster": "onprem", "account": "physics", "currency": "su", "estimate": "4.00", "remaining": "1.25"},
                {"cluster": "cloud", "account": "physics", "currency": "usd", "estimate": "12.50", "remaining": "0.00"}
            ]}),
            hint: None,
        };
        assert_eq!(
            e.to_string(),
            "physics has 1.25 su left in su; the job needs an estimated 4.00 su\n  \
             CLUSTER  ACCOUNT  CURRENCY  ESTIMATE  REMAINING\n  \
             onprem   physics  su            4.00       1.25\n  \
             cloud    physics  usd          12.50       0.00"
        );
    }

    #[test]
    fn other_details_are_key_value_lines() {
        let e = ApiError {
            status: 422,
            code: "invalid_request".into(),
            message: "no time limit".into(),
            details: json!({"field": "time_limit_min", "allowed": ["a", "b"]}),
            hint: Some("try --time".into()),
        };
        assert_eq!(
            e.to_string(),
            "no time limit\n  allowed: a, b\n  field: time_limit_min\n  try --time"
        );
    }
}
