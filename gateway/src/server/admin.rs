//! Changing the ledger (admin) and reading what changed (`/v1/audit`). Every change is written
//! to the audit log with the caller, its role, and the object before and after as JSON; a
//! request that changes nothing is answered without an audit entry.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use bursar_ledger::NewAudit;
use bursar_pricing::money::parse_micros;
use bursar_pricing::Currency;
use serde::Deserialize;
use serde_json::{json, Value};

use super::accounts::instant_param;
use super::extract::{ApiJson, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use crate::app::App;
use crate::auth::{Needed, Principal};
use crate::cmd::{allocation_json, is_known_currency};
use crate::timefmt::{format_instant, now, OPEN_END, OPEN_START};

/// Records a change; `before == after` records nothing.
async fn audit(
    app: &App,
    caller: &Principal,
    action: &str,
    target: &str,
    before: &Value,
    after: &Value,
) -> Result<(), ApiError> {
    if before == after {
        return Ok(());
    }
    let json = |v: &Value| (!v.is_null()).then(|| v.to_string());
    let entry = NewAudit {
        at: now(),
        actor: caller.user.clone(),
        role: caller.role.as_str().to_string(),
        action: action.to_string(),
        target: target.to_string(),
        before: json(before),
        after: json(after),
    };
    let id = app.ledger.audit(&entry).await?;
    tracing::info!(audit_id = id, action, target, "admin change recorded");
    Ok(())
}

fn status(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AccountBody {
    name: String,
    /// The parent; `root` or absent for a new top-level account. Absent for an existing
    /// account: it stays where it is.
    #[serde(default)]
    parent: Option<String>,
}

/// An account as audited and answered: `{"name", "parent"}` (`parent` null for root).
async fn account_state(app: &App, name: &str) -> Result<Value, ApiError> {
    Ok(app
        .ledger
        .accounts()
        .await?
        .into_iter()
        .find(|a| a.name == name)
        .map_or(
            Value::Null,
            |a| json!({ "name": a.name, "parent": a.parent }),
        ))
}

/// `POST /v1/accounts {"name", "parent"}`: create, or move under another parent. 201 when
/// created.
pub(super) async fn upsert_account(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AccountBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let app = &state.app;
    let before = account_state(app, &body.name).await?;
    let parent = body.parent.as_deref().filter(|p| *p != bursar_ledger::ROOT);
    let created = app.ledger.ensure_account(&body.name, parent).await?;
    if !created && body.parent.is_some() {
        app.ledger.set_parent(&body.name, parent).await?;
    }
    let after = account_state(app, &body.name).await?;
    let action = if created {
        "account.create"
    } else {
        "account.move"
    };
    audit(app, &caller, action, &body.name, &before, &after).await?;
    Ok((status(created), Json(after)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AssociationBody {
    user: String,
    account: String,
    /// Make `account` the user's default account. A user bursar does not know yet is created
    /// with `account` as its default either way.
    #[serde(default)]
    default: bool,
}

/// A user as audited and answered: `{"user", "default_account", "accounts"}`.
async fn user_state(app: &App, user: &str) -> Result<Value, ApiError> {
    let Some(row) = app
        .ledger
        .users()
        .await?
        .into_iter()
        .find(|u| u.name == user)
    else {
        return Ok(Value::Null);
    };
    let accounts: Vec<String> = app
        .ledger
        .associations()
        .await?
        .into_iter()
        .filter(|a| a.user == user)
        .map(|a| a.account)
        .collect();
    Ok(json!({ "user": row.name, "default_account": row.default_account, "accounts": accounts }))
}

/// `POST /v1/associations {"user", "account", "default"}`: lets a user charge an account
/// (creating the user if needed). 201 when the association is new.
pub(super) async fn associate(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AssociationBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let app = &state.app;
    let before = user_state(app, &body.user).await?;
    let was_associated = before["accounts"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(body.account.as_str())));
    if before.is_null() || body.default {
        app.ledger.upsert_user(&body.user, &body.account).await?;
    }
    app.ledger.associate(&body.user, &body.account).await?;
    let after = user_state(app, &body.user).await?;
    let target = format!("{}:{}", body.user, body.account);
    audit(app, &caller, "association.set", &target, &before, &after).await?;
    Ok((status(!was_associated), Json(after)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AllocationBody {
    account: String,
    currency: String,
    /// Exact decimal string (`"10000"`, `"2500.50"`), never a JSON number.
    amount: String,
    /// Start, inclusive (`YYYY-MM-DD` or RFC 3339); absent or null: no start.
    #[serde(default)]
    from: Option<String>,
    /// End, exclusive; absent or null: no end.
    #[serde(default)]
    to: Option<String>,
}

/// `POST /v1/allocations {"account", "currency", "amount", "from", "to"}`: sets the amount of
/// the account's allocation for exactly that period (creating it). 201 when created.
pub(super) async fn set_allocation(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AllocationBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let app = &state.app;
    if !is_known_currency(app, &body.currency) {
        return Err(ApiError::invalid(format!(
            "currency {:?} is not used by any cluster nor declared under `currencies`",
            body.currency
        )));
    }
    let amount = parse_micros(&body.amount)
        .map_err(|e| ApiError::invalid(format!("amount {:?}: {e}", body.amount)))?;
    if amount < 0 {
        return Err(ApiError::invalid("amount must not be negative"));
    }
    let bound = |name: &str, text: &Option<String>, open: i64| match text {
        Some(t) => instant_param(name, t).map_err(|e| ApiError::invalid(e.message)),
        None => Ok(open),
    };
    let start = bound("from", &body.from, OPEN_START)?;
    let end = bound("to", &body.to, OPEN_END)?;
    if end <= start {
        return Err(ApiError::invalid("to must be after from"));
    }
    let currency = Currency::new(&body.currency);
    let before = app
        .ledger
        .allocations()
        .await?
        .into_iter()
        .find(|a| a.account == body.account && a.currency == currency && a.start == start)
        .map_or(Value::Null, |a| allocation_json(app, &a));
    let row = app
        .ledger
        .set_allocation(&body.account, &currency, amount, start, end)
        .await?;
    let after = allocation_json(app, &row);
    // Audit what the change is about (the amount and period), not the usage that happened to
    // be charged against the allocation when it was read.
    let audited = |v: &Value| {
        if v.is_null() {
            Value::Null
        } else {
            json!({ "id": v["id"], "account": v["account"], "currency": v["currency"],
                    "amount": v["amount"], "start": v["start"], "end": v["end"] })
        }
    };
    audit(
        app,
        &caller,
        "allocation.set",
        &body.account,
        &audited(&before),
        &audited(&after),
    )
    .await?;
    Ok((status(before.is_null()), Json(after)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    limit: Option<u32>,
}

/// `GET /v1/audit?limit=`: finance and admin; newest first.
pub(super) async fn audit_log(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::ReadAll)?;
    let entries = state.app.ledger.audit_log(query.limit).await?;
    let parse = |text: &Option<String>| match text {
        None => Value::Null,
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone())),
    };
    let rows: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "id": e.id,
                "at": format_instant(e.at),
                "actor": e.actor,
                "role": e.role,
                "action": e.action,
                "target": e.target,
                "before": parse(&e.before),
                "after": parse(&e.after),
            })
        })
        .collect();
    Ok(Json(json!({ "audit": rows })))
}
