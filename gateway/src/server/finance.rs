//! Finance reads: an account's statement and the top users or jobs by cost. The JSON is the
//! CLI's (`finance::statement_json`, `finance::top_json`).

use axum::extract::State;
use axum::Json;
use bursar_pricing::Currency;
use serde::Deserialize;
use serde_json::Value;

use super::accounts::{instant_param, require_account_access};
use super::extract::{ApiPath, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use crate::auth::Needed;
use crate::finance::{parse_top_by, statement_json, top_json};

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
