//! Reading the ledger: the account tree, balances and usage reports. The JSON is the CLI's
//! (`cmd::accounts_json`, `cmd::balance_json`, `cmd::usage_report_json`).

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::extract::{ApiPath, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use crate::app::App;
use crate::auth::{Needed, Principal};
use crate::cmd::{accounts_json, balance_json, parse_group_keys, usage_report_json};
use crate::timefmt::{now, parse_instant};

/// The accounts `user` is associated with.
pub(super) async fn associated_accounts(
    app: &App,
    user: &str,
) -> Result<BTreeSet<String>, ApiError> {
    Ok(app
        .ledger
        .associations()
        .await?
        .into_iter()
        .filter(|a| a.user == user)
        .map(|a| a.account)
        .collect())
}

/// Finance and admin read every account; a `user` only those it is associated with
/// (403 `no_association` otherwise, whether or not the account exists).
pub(super) async fn require_account_access(
    app: &App,
    caller: &Principal,
    account: &str,
) -> Result<(), ApiError> {
    if caller.require(Needed::ReadAll).is_ok() {
        return Ok(());
    }
    if associated_accounts(app, &caller.user)
        .await?
        .contains(account)
    {
        Ok(())
    } else {
        Err(ApiError::no_association(&caller.user, account))
    }
}

/// Reads a moment from a query parameter: 400 naming the parameter when it does not parse.
pub(super) fn instant_param(name: &str, text: &str) -> Result<i64, ApiError> {
    parse_instant(text).map_err(|e| ApiError::bad_request(format!("{name}: {e}")))
}

/// `GET /v1/accounts`: the tree; a `user` sees its accounts and their ancestors.
pub(super) async fn list(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
) -> Result<Json<Value>, ApiError> {
    let app = &state.app;
    let mut accounts = app.ledger.accounts().await?;
    let mut associations = app.ledger.associations().await?;
    if caller.require(Needed::ReadAll).is_err() {
        let parents: BTreeMap<&str, Option<&str>> = accounts
            .iter()
            .map(|a| (a.name.as_str(), a.parent.as_deref()))
            .collect();
        let mut visible: BTreeSet<String> = BTreeSet::new();
        for a in associations.iter().filter(|a| a.user == caller.user) {
            let mut cursor = Some(a.account.as_str());
            while let Some(name) = cursor {
                if !visible.insert(name.to_string()) {
                    break;
                }
                cursor = parents.get(name).copied().flatten();
            }
        }
        accounts.retain(|a| visible.contains(&a.name));
        associations.retain(|a| visible.contains(&a.account));
    }
    let blocked = crate::enforce::blocked_by_account(app)
        .await
        .map_err(|e| ApiError::internal(format_args!("{e:#}")))?;
    Ok(Json(accounts_json(&accounts, &associations, &blocked)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BalanceQuery {
    at: Option<String>,
}

/// `GET /v1/accounts/{name}/balance?at=`: one row per currency, as `bursar balance NAME
/// --format json`.
pub(super) async fn balance(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<BalanceQuery>,
) -> Result<Json<Value>, ApiError> {
    let app = &state.app;
    require_account_access(app, &caller, &name).await?;
    let at = match &query.at {
        Some(text) => instant_param("at", text)?,
        None => now(),
    };
    let rows = app.ledger.balance(&name, at).await?;
    let window = crate::forecast::window(app, None)
        .map_err(|e| ApiError::internal(format_args!("{e:#}")))?;
    let forecasts = app.ledger.forecasts_of(&rows, at, window).await?;
    Ok(Json(balance_json(app, &rows, &forecasts, at)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageQuery {
    from: String,
    to: String,
    /// Comma-separated grouping keys; default `account`.
    by: Option<String>,
    /// Each account's rows include its subtree's usage.
    #[serde(default)]
    rollup: bool,
}

/// `GET /v1/reports/usage?from=&to=&by=`: finance and admin; as `bursar report usage
/// --format json`.
pub(super) async fn usage_report(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::ReadAll)?;
    let from = instant_param("from", &query.from)?;
    let to = instant_param("to", &query.to)?;
    if to <= from {
        return Err(ApiError::bad_request("to must be after from"));
    }
    let by = query.by.as_deref().unwrap_or("account");
    let keys = parse_group_keys(&[by]).map_err(|e| ApiError::bad_request(format!("by: {e}")))?;
    let report = if query.rollup {
        state
            .app
            .ledger
            .usage_report_rollup(from, to, &keys)
            .await?
    } else {
        state.app.ledger.usage_report(from, to, &keys).await?
    };
    Ok(Json(usage_report_json(&state.app, &report, &keys)))
}
