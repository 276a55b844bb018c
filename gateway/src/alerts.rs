//! Alert checks and delivery: `bursar alerts check|list`, and the checks of `bursar serve`
//! (after every collection pass and every `alerts.interval`).
//!
//! [`check_alerts`] asks the ledger which allocations crossed a threshold (the rules, and why
//! each crossing fires once, are in `bursar_ledger::alerts`), writes one log line per alert
//! fired, and delivers every alert not delivered yet to the webhook: a POST of
//! [`payload`] with a timeout. A delivery that fails (no answer, not 2xx) is counted on the
//! alert and tried again by the next check; a delivered alert is never sent again. Without a
//! webhook, alerts are marked delivered to the log. Each delivery first claims the alert in
//! the ledger for the length of the POST, so two checkers (the server and a cron job) never
//! send it at the same time; a crash between a successful POST and its recording sends it
//! again after the claim lapses (at least once, never lost).

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use bursar_ledger::{AlertKind, AlertRow, Ledger};
use bursar_pricing::money::format_micros;
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::{AlertsCheckArgs, AlertsListArgs};
use crate::config::{Config, WebhookFormat};
use crate::output::{write_json, Format, Table};
use crate::timefmt::{format_bound, format_instant, now, parse_instant};

/// Limit for one webhook POST when the config gives none.
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// How many pending alerts one check delivers at most (the rest wait for the next check).
const DELIVERIES_PER_CHECK: usize = 200;

/// One check at a time in this process: the collection passes of several clusters and the
/// timer may all end at once.
static CHECKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What one check did.
#[derive(Debug, Default)]
pub struct CheckOutcome {
    /// The alerts this check fired.
    pub fired: Vec<AlertRow>,
    pub rearmed: u64,
    /// Deliveries that succeeded (webhook or log) and failed.
    pub delivered: u64,
    pub failed: u64,
    /// Alerts still waiting for delivery after this check.
    pub pending: u64,
}

/// Where and how alerts are POSTed.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub url: String,
    pub format: WebhookFormat,
    pub timeout: Duration,
}

impl Webhook {
    /// The configured webhook, reading `url_file` when given.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Webhook>> {
        let Some(w) = &config.alerts.webhook else {
            return Ok(None);
        };
        let url = match (&w.url, &w.url_file) {
            (Some(url), _) => url.clone(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .with_context(|| format!("alerts.webhook.url_file {}", path.display()))?
                .trim()
                .to_string(),
            (None, None) => anyhow::bail!("alerts.webhook needs url or url_file"),
        };
        crate::config::check_webhook_url(&url)?;
        Ok(Some(Webhook {
            url,
            format: w.format,
            timeout: w.timeout.unwrap_or(DEFAULT_WEBHOOK_TIMEOUT),
        }))
    }

    /// The URL without its path (a Slack webhook's path is its secret), for logs.
    fn host(&self) -> &str {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |x| x.1);
        let end = rest.find('/').unwrap_or(rest.len());
        &rest[..end]
    }
}

/// `committed / allocated` in per cent with one decimal, rounded down: `82.0`.
pub fn committed_percent(alert: &AlertRow) -> String {
    if alert.allocated <= 0 {
        return "-".to_string();
    }
    let permille = i128::from(alert.committed()) * 1000 / i128::from(alert.allocated);
    format!("{}.{}", permille / 10, permille % 10)
}

/// The sentence of an alert, for the log and the webhook's `text`.
pub fn text(config: &Config, alert: &AlertRow) -> String {
    let c = alert.currency.as_str();
    let m = |micros: i64| format!("{} {c}", format_micros(micros, config.decimals(c)));
    let period = format!(
        "{} .. {}",
        format_bound(alert.period.0),
        format_bound(alert.period.1)
    );
    let pace = match alert.exhaustion {
        Some(t) => format!(
            "at {} a day it runs out on {}",
            m(alert.rate_per_day),
            format_instant(t)
        ),
        None if alert.remaining() <= 0 => "it is used up".to_string(),
        None => format!("at {} a day it does not run out", m(alert.rate_per_day)),
    };
    match alert.kind {
        AlertKind::Used(p) => format!(
            "bursar: account {} has committed {}% of its {} allocation for {period} \
             (threshold {p}%): {} charged and held, {} remaining; {pace}",
            alert.account,
            committed_percent(alert),
            m(alert.allocated),
            m(alert.committed()),
            m(alert.remaining()),
        ),
        AlertKind::Projected => format!(
            "bursar: account {} is projected to run out of its {} allocation for {period} \
             before the period ends: {pace}; {} committed, {} remaining",
            alert.account,
            m(alert.allocated),
            m(alert.committed()),
            m(alert.remaining()),
        ),
    }
}

/// The JSON an alert is POSTed as (`format: json`); `format: slack` sends `{"text"}` only.
pub fn payload(config: &Config, alert: &AlertRow) -> Value {
    let c = alert.currency.as_str();
    let m = |micros: i64| format_micros(micros, config.decimals(c));
    json!({
        "text": text(config, alert),
        "alert_id": alert.id,
        "account": alert.account,
        "currency": alert.currency,
        "threshold": alert.kind.label(),
        "kind": alert.kind.to_string(),
        "allocated": m(alert.allocated),
        "charged": m(alert.charged),
        "held": m(alert.held),
        "committed": m(alert.committed()),
        "committed_percent": committed_percent(alert),
        "remaining": m(alert.remaining()),
        "burn_rate_per_day": m(alert.rate_per_day),
        "projected_exhaustion": alert.exhaustion.map(format_instant),
        "period_start": crate::cmd::bound_json(alert.period.0),
        "period_end": crate::cmd::bound_json(alert.period.1),
        "fired_at": format_instant(alert.fired_at),
    })
}

/// One alert check at `now`: record the crossings, log them, deliver what is pending.
pub async fn check_alerts(
    ledger: &Ledger,
    config: &Config,
    now: i64,
) -> anyhow::Result<CheckOutcome> {
    let _one_at_a_time = CHECKING.lock().await;
    let webhook = Webhook::from_config(config)?;
    let pass = ledger
        .record_alerts(&config.alerts.rules(), now)
        .await
        .context("evaluating alerts")?;
    for alert in &pass.fired {
        tracing::warn!(
            alert = alert.id,
            account = %alert.account,
            currency = %alert.currency,
            threshold = %alert.kind.label(),
            "{}",
            text(config, alert)
        );
    }
    let mut outcome = CheckOutcome {
        rearmed: pass.rearmed,
        ..CheckOutcome::default()
    };
    let pending: Vec<AlertRow> = ledger
        .alerts()
        .await?
        .into_iter()
        .filter(|a| a.delivered_at.is_none())
        .collect();
    let client = match &webhook {
        Some(w) => Some(
            reqwest::Client::builder()
                .timeout(w.timeout)
                .build()
                .context("the webhook client")?,
        ),
        None => None,
    };
    for alert in pending.iter().take(DELIVERIES_PER_CHECK) {
        let (Some(w), Some(client)) = (&webhook, &client) else {
            ledger.finish_alert(alert.id, Ok("log"), now).await?;
            outcome.delivered += 1;
            continue;
        };
        // Hold the alert for the POST's length and a margin; a crash frees it by then.
        let lease = i64::try_from(w.timeout.as_secs()).unwrap_or(i64::MAX / 4) + 30;
        if !ledger.claim_alert(alert.id, now, now + lease).await? {
            continue;
        }
        let body = match w.format {
            WebhookFormat::Json => payload(config, alert),
            WebhookFormat::Slack => json!({ "text": text(config, alert) }),
        };
        match post(client, &w.url, &body).await {
            Ok(()) => {
                ledger.finish_alert(alert.id, Ok("webhook"), now).await?;
                outcome.delivered += 1;
                tracing::info!(alert = alert.id, webhook = w.host(), "alert delivered");
            }
            Err(e) => {
                let message = format!("{e:#}");
                tracing::warn!(
                    alert = alert.id,
                    webhook = w.host(),
                    "alert delivery failed, retried on the next check: {message}"
                );
                ledger.finish_alert(alert.id, Err(&message), now).await?;
                outcome.failed += 1;
            }
        }
    }
    outcome.pending = u64::try_from(pending.len())
        .unwrap_or(u64::MAX)
        .saturating_sub(outcome.delivered);
    outcome.fired = pass.fired;
    Ok(outcome)
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> anyhow::Result<()> {
    let response = client.post(url).json(body).send().await.map_err(|e| {
        // reqwest's message names the URL; keep its secret path out of the ledger and logs.
        anyhow::anyhow!("{}", e.without_url())
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let snippet: String = text.trim().chars().take(200).collect();
    if snippet.is_empty() {
        anyhow::bail!("HTTP {status}")
    }
    anyhow::bail!("HTTP {status}: {snippet}")
}

/// After a collection pass of `bursar serve`: one check, errors logged.
pub async fn after_collection(app: &App) {
    if !app.config.alerts.enabled() {
        return;
    }
    if let Err(e) = check_alerts(&app.ledger, &app.config, now()).await {
        tracing::error!("alert check failed: {e:#}");
    }
}

/// Every `alerts.interval`, one check, until `shutdown` resolves.
pub async fn alerts_loop(
    app: std::sync::Arc<App>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    if !app.config.alerts.enabled() {
        return;
    }
    let mut ticks = tokio::time::interval(app.config.alerts.interval());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        after_collection(&app).await;
    }
}

/// `bursar alerts check`: one check (for cron), printing what fired and what was delivered.
pub async fn command_check(
    app: &App,
    args: AlertsCheckArgs,
    out: &mut impl Write,
) -> anyhow::Result<std::process::ExitCode> {
    if !app.config.alerts.enabled() {
        writeln!(out, "alerts are disabled (alerts.enabled: false)")?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let at = args
        .at
        .as_deref()
        .map(parse_instant)
        .transpose()?
        .unwrap_or_else(now);
    let outcome = check_alerts(&app.ledger, &app.config, at).await?;
    if args.format == Format::Json {
        let fired: Vec<Value> = outcome
            .fired
            .iter()
            .map(|a| payload(&app.config, a))
            .collect();
        write_json(
            out,
            &json!({
                "at": format_instant(at),
                "fired": fired,
                "rearmed": outcome.rearmed,
                "delivered": outcome.delivered,
                "failed": outcome.failed,
                "pending": outcome.pending,
            }),
        )?;
    } else {
        for alert in &outcome.fired {
            writeln!(out, "{}", text(&app.config, alert))?;
        }
        writeln!(
            out,
            "{} alert(s) fired, {} re-armed, {} delivered, {} failed, {} pending",
            outcome.fired.len(),
            outcome.rearmed,
            outcome.delivered,
            outcome.failed,
            outcome.pending
        )?;
    }
    // A failed delivery is an error for cron (it is retried on the next check anyway).
    Ok(if outcome.failed > 0 {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// `bursar alerts list`: the open alerts of allocations whose period has not ended, or every
/// alert with `--all`.
pub async fn command_list(
    app: &App,
    args: AlertsListArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let at = now();
    let mut alerts = app.ledger.alerts().await?;
    if !args.all {
        alerts.retain(|a| a.rearmed_at.is_none() && at < a.period.1);
    }
    if args.format == Format::Json {
        let rows: Vec<Value> = alerts
            .iter()
            .map(|a| {
                let mut v = payload(&app.config, a);
                v["rearmed_at"] = json!(a.rearmed_at.map(format_instant));
                v["delivered_at"] = json!(a.delivered_at.map(format_instant));
                v["delivered_via"] = json!(a.delivered_via);
                v["attempts"] = json!(a.attempts);
                v["last_error"] = json!(a.last_error);
                v
            })
            .collect();
        return Ok(write_json(out, &json!({ "alerts": rows }))?);
    }
    let mut table = Table::new(
        &[
            "id",
            "fired",
            "account",
            "currency",
            "threshold",
            "committed",
            "allocated",
            "exhaustion",
            "delivered",
            "re-armed",
        ],
        &["id", "committed", "allocated"],
    );
    for a in &alerts {
        let c = a.currency.as_str();
        let delivered = match (&a.delivered_via, a.attempts, &a.last_error) {
            (Some(via), _, _) => via.clone(),
            (None, 0, _) => "pending".to_string(),
            (None, n, e) => format!("no ({n} failed: {})", e.as_deref().unwrap_or("")),
        };
        table.push(vec![
            a.id.to_string(),
            format_instant(a.fired_at),
            a.account.clone(),
            c.to_string(),
            a.kind.label(),
            format!("{}%", committed_percent(a)),
            format_micros(a.allocated, app.decimals(c)),
            a.exhaustion
                .map(format_instant)
                .unwrap_or_else(|| "-".to_string()),
            delivered,
            a.rearmed_at
                .map(format_instant)
                .unwrap_or_else(|| "-".to_string()),
        ]);
    }
    match args.format {
        Format::Csv => table.write_csv(out)?,
        _ => table.write_table(out)?,
    }
    Ok(())
}
