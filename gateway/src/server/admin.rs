//! Changing the ledger (admin) and reading what changed (`/v1/audit`). The operations are
//! [`crate::admin`]'s, shared with the command line: every change is written to the audit log
//! with the caller, its role, and the object before and after as JSON; a request that changes
//! nothing is answered without an audit entry.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::accounts::instant_param;
use super::extract::{ApiJson, ApiPath, ApiQuery, Authenticated};
use super::{ApiError, ServerState};
use bursar_ledger::EntryKind;

use crate::admin::{self, Actor, Done};
use crate::auth::Needed;
use crate::auth::Principal;
use crate::timefmt::{OPEN_END, OPEN_START};

fn status(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

fn answer(done: Done) -> (StatusCode, Json<Value>) {
    (status(done.created), Json(done.body))
}

/// An optional time field: `YYYY-MM-DD` or RFC 3339.
fn optional_instant(name: &str, text: &Option<String>) -> Result<Option<i64>, ApiError> {
    text.as_deref()
        .map(|t| instant_param(name, t).map_err(|e| ApiError::invalid(e.message)))
        .transpose()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AccountBody {
    name: String,
    /// The parent; `root` or absent for a new top-level account. Absent for an existing
    /// account: 200 and nothing changes when it is a top-level account, else 409 (a move
    /// names the parent).
    #[serde(default)]
    parent: Option<String>,
}

/// `POST /v1/accounts {"name", "parent"}`: create, or move under another parent. 201 when
/// created. Without `parent`, an existing account is created again under `root`
/// ([`admin::create_account`]): a no-op for a top-level account, a 409 `conflict` for one
/// under another parent.
pub(super) async fn upsert_account(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AccountBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let app = &state.app;
    let actor = Actor::of(&caller);
    let exists = !admin::account_state(app, &body.name).await?.is_null();
    let done = match (exists, body.parent.as_deref()) {
        (false, parent) => admin::create_account(app, &actor, &body.name, parent).await?,
        (true, Some(parent)) => admin::move_account(app, &actor, &body.name, parent).await?,
        (true, None) => admin::create_account(app, &actor, &body.name, None).await?,
    };
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CloseBody {
    reason: String,
}

/// `POST /v1/accounts/{name}/close {"reason"}`.
pub(super) async fn close_account(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<CloseBody>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::Change)?;
    let done = admin::close_account(&state.app, &Actor::of(&caller), &name, &body.reason).await?;
    Ok(Json(done.body))
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

/// `POST /v1/associations {"user", "account", "default"}`: lets a user charge an account
/// (creating the user if needed). 201 when the association is new.
pub(super) async fn associate(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AssociationBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let done = admin::associate(
        &state.app,
        &Actor::of(&caller),
        &body.user,
        &body.account,
        body.default,
    )
    .await?;
    Ok(answer(done))
}

/// `DELETE /v1/associations/{user}/{account}`.
pub(super) async fn dissociate(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath((user, account)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::Change)?;
    let done = admin::dissociate(&state.app, &Actor::of(&caller), &user, &account).await?;
    Ok(Json(done.body))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DefaultAccountBody {
    account: String,
}

/// `POST /v1/users/{name}/default-account {"account"}`.
pub(super) async fn set_default_account(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiPath(user): ApiPath<String>,
    ApiJson(body): ApiJson<DefaultAccountBody>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::Change)?;
    let done = admin::set_default(&state.app, &Actor::of(&caller), &user, &body.account).await?;
    Ok(Json(done.body))
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
    let start = optional_instant("from", &body.from)?.unwrap_or(OPEN_START);
    let end = optional_instant("to", &body.to)?.unwrap_or(OPEN_END);
    let done = admin::set_allocation(
        &state.app,
        &Actor::of(&caller),
        &body.account,
        &body.currency,
        &body.amount,
        start,
        end,
    )
    .await?;
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RenewBody {
    account: String,
    currency: String,
    /// Default: the current allocation's amount.
    #[serde(default)]
    amount: Option<String>,
    /// `month`, `quarter` or `year`; default: the current period's length.
    #[serde(default)]
    period: Option<String>,
    /// The allocation covering this moment is the current one; default: now.
    #[serde(default)]
    at: Option<String>,
}

/// `POST /v1/allocations/renew`: 201 when the next allocation was created, 200 when it
/// existed.
pub(super) async fn renew_allocation(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RenewBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let at = optional_instant("at", &body.at)?;
    let done = admin::renew_allocation(
        &state.app,
        &Actor::of(&caller),
        &body.account,
        &body.currency,
        body.amount.as_deref(),
        body.period.as_deref(),
        at,
    )
    .await?;
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EntryBody {
    account: String,
    currency: String,
    /// Signed exact decimal string.
    amount: String,
    reason: String,
    /// The moment whose allocation it goes to (deposits) or counts in (adjustments);
    /// default: now.
    #[serde(default)]
    period_of: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// `POST /v1/deposits`: 201 when posted, 200 when the key was used before.
pub(super) async fn deposit(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<EntryBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    manual_entry(&state, &caller, EntryKind::Deposit, &body).await
}

/// `POST /v1/adjustments`: 201 when posted, 200 when the key was used before.
pub(super) async fn adjust(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<EntryBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    manual_entry(&state, &caller, EntryKind::Adjustment, &body).await
}

async fn manual_entry(
    state: &ServerState,
    caller: &Principal,
    kind: EntryKind,
    body: &EntryBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let entry = admin::ManualEntry {
        account: &body.account,
        currency: &body.currency,
        amount: &body.amount,
        at: optional_instant("period_of", &body.period_of)?,
        reason: &body.reason,
        key: body.idempotency_key.as_deref(),
    };
    let done = admin::manual_entry(&state.app, &Actor::of(caller), kind, entry).await?;
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TransferBody {
    from: String,
    to: String,
    currency: String,
    amount: String,
    reason: String,
    #[serde(default)]
    period_of: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// `POST /v1/transfers`: 201 when posted, 200 when the key was used before.
pub(super) async fn transfer(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<TransferBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let at = optional_instant("period_of", &body.period_of)?;
    let done = admin::transfer(
        &state.app,
        &Actor::of(&caller),
        &body.from,
        &body.to,
        &body.currency,
        &body.amount,
        at,
        &body.reason,
        body.idempotency_key.as_deref(),
    )
    .await?;
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RefundBody {
    /// The cluster's job id, or `cluster:job_id`.
    job: String,
    #[serde(default)]
    cluster: Option<String>,
    /// Default: all that is left of the job's charge.
    #[serde(default)]
    amount: Option<String>,
    reason: String,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// `POST /v1/refunds`: 201 when posted, 200 when the key was used before.
pub(super) async fn refund(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RefundBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require(Needed::Change)?;
    let done = admin::refund(
        &state.app,
        &Actor::of(&caller),
        &body.job,
        body.cluster.as_deref(),
        body.amount.as_deref(),
        &body.reason,
        body.idempotency_key.as_deref(),
    )
    .await?;
    Ok(answer(done))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    limit: Option<u32>,
    before: Option<i64>,
}

/// `GET /v1/audit?limit=&before=`: finance and admin; a page of the newest entries.
pub(super) async fn audit_log(
    State(state): State<ServerState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    caller.require(Needed::ReadAll)?;
    // A limit out of range is a bad query parameter (400), as one that does not parse is.
    crate::output::page_limit(query.limit).map_err(ApiError::bad_request)?;
    let page = admin::audit_page(&state.app, query.before, query.limit).await?;
    Ok(Json(
        json!({ "audit": page.entries, "next_before": page.next_before }),
    ))
}
