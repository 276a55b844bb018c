//! Finance reads: an account's statement, the top users or jobs by cost and the FOCUS export.
//! The output is the CLI's (`finance::statement_json`, `finance::top_json`,
//! `finance::FocusExport`).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bursar_pricing::Currency;
use serde::Deserialize;
use serde_json::Value;

use super::accounts::{instant_param, require_account_access};
use super::extract::{ApiPath, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use crate::auth::Needed;
use crate::finance::{parse_top_by, statement_json, top_json, FocusExport};

fn range(from: &str, to: &str) -> Result<(i64, i64), ApiError> {
    let from = instant_param("from", from)?;
    let to = instant_param("to", to)?;
    if to <= from {
        return Err(ApiError::bad_request("to must be after from"));
    }
    Ok((from, to))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StatementQuery {
    currency: String,
    from: String,
    to: String,
}

/// `GET /v1/accounts/{name}/statement?currency=&from=&to=`: finance and admin, or a user
/// associated with the account; as `bursar statement NAME --format json`.
pub(super) async fn statement(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatementQuery>,
) -> Result<Json<Value>, ApiError> {
    let app = &state.app;
    require_account_access(app, &caller, &name).await?;
    let (from, to) = range(&query.from, &query.to)?;
    let currency = Currency::new(&query.currency);
    let st = app.ledger.statement(&name, &currency, from, to).await?;
    Ok(Json(statement_json(app, &st)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TopQuery {
    from: String,
    to: String,
    /// `user` (default) or `job`.
    by: Option<String>,
    limit: Option<usize>,
    currency: Option<String>,
}

/// `GET /v1/reports/top?from=&to=&by=&limit=&currency=`: finance and admin; as `bursar
/// report top --format json`.
pub(super) async fn top(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<TopQuery>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::ReadAll)?;
    let (from, to) = range(&query.from, &query.to)?;
    let by = parse_top_by(query.by.as_deref().unwrap_or("user"))
        .map_err(|e| ApiError::bad_request(format!("by: {e}")))?;
    let currency = query.currency.as_deref().map(Currency::new);
    let rows = state
        .app
        .ledger
        .top(by, from, to, currency.as_ref(), query.limit.unwrap_or(10))
        .await?;
    Ok(Json(top_json(&state.app, by, from, to, &rows)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FocusQuery {
    from: String,
    to: String,
    /// `csv` (default) or `json`.
    format: Option<String>,
}

/// Day pieces in flight between the reading task and the client.
const FOCUS_BUFFERED_DAYS: usize = 2;

/// `GET /v1/exports/focus?from=&to=&format=csv|json`: finance and admin; as `bursar export
/// focus`, streamed: a task reads the period a UTC day at a time and hands each day's rows to
/// the response, waiting while the client is behind, so that an export of a year holds no
/// more than a few days in memory. A failure after the first bytes ends the body early (the
/// client sees a truncated transfer) and is logged.
pub(super) async fn focus(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<FocusQuery>,
) -> Result<Response, ApiError> {
    caller.require(Needed::ReadAll)?;
    let (from, to) = range(&query.from, &query.to)?;
    let json = match query.format.as_deref().unwrap_or("csv") {
        "csv" => false,
        "json" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "format: expected csv or json, not {other:?}"
            )))
        }
    };
    // Which days to read is known before answering: a ledger that fails now is a 5xx.
    let days = state.app.ledger.usage_days(from, to).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(FOCUS_BUFFERED_DAYS);
    let app = state.app.clone();
    tokio::spawn(async move {
        let mut export = FocusExport::new(json);
        if tx.send(Ok(export.start().into())).await.is_err() {
            return;
        }
        for (start, stop) in days {
            let chunk = match app.ledger.usage_entries_of_day(start, stop).await {
                Ok(day) => export.rows(&app, &day),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            if let Err(e) = &chunk {
                tracing::error!(error = %e, "the FOCUS export stopped early");
            }
            let failed = chunk.is_err();
            // A closed channel: the client went away.
            if tx.send(chunk.map(Bytes::from)).await.is_err() || failed {
                return;
            }
        }
        let _ = tx.send(Ok(export.end().into())).await;
    });
    let content_type = if json {
        "application/json"
    } else {
        "text/csv; charset=utf-8"
    };
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
}
