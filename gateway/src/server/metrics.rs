//! [`Metrics`]: counters kept in memory and the Prometheus text exposition of `/metrics`
//! (format 0.0.4, written by hand: a handful of series does not need a metrics crate).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use crate::app::App;
use crate::collect::load_status;
use crate::timefmt::now;

/// Request and admission counters. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// (method, matched route, status) → requests answered.
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    /// outcome → submissions (`admitted`, or the refusal's error code).
    admissions: Mutex<BTreeMap<String, u64>>,
}

impl Metrics {
    /// Counts one answered request. `route` is the matched route template (`/v1/jobs/{id}`),
    /// never the raw path, so the number of series stays bounded.
    pub fn request(&self, method: &str, route: &str, status: u16) {
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        *requests
            .entry((method.to_string(), route.to_string(), status))
            .or_default() += 1;
    }

    /// Counts one submission by outcome: `admitted`, or why it was not (`insufficient_allocation`,
    /// `upstream_refused`, …). The `POST /v1/jobs` handler calls it for every answer.
    pub fn admission(&self, outcome: &str) {
        let mut admissions = self
            .admissions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *admissions.entry(outcome.to_string()).or_default() += 1;
    }

    /// The exposition: the counters, plus gauges read now from the ledger (active holds) and
    /// from each collecting cluster's status.
    pub async fn render(&self, app: &App) -> anyhow::Result<String> {
        let holds_active = app.ledger.active_holds_count().await?;
        let mut clusters = Vec::new();
        for (name, cluster) in &app.config.clusters {
            if cluster.collect.is_some() {
                clusters.push((name.as_str(), load_status(app, name).await?));
            }
        }
        let now = now();

        let mut out = String::new();
        header(
            &mut out,
            "bursar_http_requests_total",
            "counter",
            "HTTP requests answered, by method, matched route and status.",
        );
        {
            let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            for ((method, route, status), count) in requests.iter() {
                let _ = writeln!(
                    out,
                    "bursar_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {count}",
                    escape(method),
                    escape(route)
                );
            }
        }
        header(
            &mut out,
            "bursar_admissions_total",
            "counter",
            "Job submissions, by outcome (admitted, or the refusal's error code).",
        );
        {
            let admissions = self
                .admissions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for (outcome, count) in admissions.iter() {
                let _ = writeln!(
                    out,
                    "bursar_admissions_total{{outcome=\"{}\"}} {count}",
                    escape(outcome)
                );
            }
        }
        header(
            &mut out,
            "bursar_holds_active",
            "gauge",
            "Holds placed and not yet settled, released or expired.",
        );
        let _ = writeln!(out, "bursar_holds_active {holds_active}");
        header(
            &mut out,
            "bursar_collect_lag_seconds",
            "gauge",
            "Seconds between now and the end of what has been collected from the cluster.",
        );
        for (cluster, status) in &clusters {
            if let Some(until) = status.collected_until {
                let _ = writeln!(
                    out,
                    "bursar_collect_lag_seconds{{cluster=\"{}\"}} {}",
                    escape(cluster),
                    now.saturating_sub(until).max(0)
                );
            }
        }
        header(
            &mut out,
            "bursar_collect_consecutive_failures",
            "gauge",
            "Collection passes of the cluster that failed in a row.",
        );
        for (cluster, status) in &clusters {
            let _ = writeln!(
                out,
                "bursar_collect_consecutive_failures{{cluster=\"{}\"}} {}",
                escape(cluster),
                status.consecutive_failures
            );
        }
        header(
            &mut out,
            "bursar_collect_last_success_timestamp",
            "gauge",
            "Unix time of the cluster's last successful collection pass.",
        );
        for (cluster, status) in &clusters {
            if let Some(at) = status.last_success {
                let _ = writeln!(
                    out,
                    "bursar_collect_last_success_timestamp{{cluster=\"{}\"}} {at}",
                    escape(cluster)
                );
            }
        }
        Ok(out)
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
    }
}
