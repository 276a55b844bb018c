//! Admin operations shared by the command line (`bursar accounts create`, `deposit`,
//! `transfer`, `refund`, …, acting as the Unix user who runs them, role `admin`) and the HTTP
//! API (`POST /v1/deposits`, …, acting as the token's user). Every operation that changes
//! something is written to the audit log with who, when, and the object before and after; an
//! operation that changes nothing (a retry) writes nothing.
//!
//! Retries are safe: money movements carry an idempotency key. Without one given, the key is
//! derived from the operation, its arguments and the UTC day, so the same command repeated on
//! the same day is a retry and changes nothing (give a key, or another reason, to post a second
//! identical movement).
//!
//! The configuration's `accounts:` and `users:` are applied at every start, so a change that
//! contradicts them (moving a declared account elsewhere, removing a declared association,
//! another default account for a declared user) is refused here with a message that says to
//! change the configuration instead.

use bursar_ledger::{
    AllocationRow, EntryKind, LedgerError, NewAudit, NewEntry, RefundRequest, RenewPeriod,
    RenewRequest, TransferRequest, ROOT,
};
use bursar_pricing::money::{format_micros, parse_micros};
use bursar_pricing::Currency;
use serde_json::{json, Value};

use crate::app::App;
use crate::auth::Principal;
use crate::cmd::{allocation_json, bound_json, is_known_currency};
use crate::output::page_limit;
use crate::timefmt::{format_bound, format_instant, now};

/// Who makes a change, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub user: String,
    pub role: String,
}

impl Actor {
    /// The Unix user running this process, in the `admin` role (the local ledger is the
    /// admin's: whoever can write the database file can change it).
    pub fn local() -> Actor {
        Actor {
            user: unix_user(),
            role: "admin".to_string(),
        }
    }

    /// The caller of an API request.
    pub fn of(principal: &Principal) -> Actor {
        Actor {
            user: principal.user.clone(),
            role: principal.role.as_str().to_string(),
        }
    }
}

/// The name of the process's user: from `/etc/passwd`, else `getent passwd` (directory
/// users), else `uid:N`. The uid is the owner of `/proc/self` (no `unsafe` needed for
/// `getuid`).
pub fn unix_user() -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata("/proc/self") else {
            return std::env::var("USER").unwrap_or_else(|_| "unknown".to_string());
        };
        let uid = meta.uid().to_string();
        let find = |text: &str| {
            text.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.len() > 2 && fields[2] == uid).then(|| fields[0].to_string())
            })
        };
        if let Some(name) = std::fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|t| find(&t))
        {
            return name;
        }
        if let Some(name) = std::process::Command::new("getent")
            .args(["passwd", &uid])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|t| find(&t))
        {
            return name;
        }
        format!("uid:{uid}")
    }
    #[cfg(not(unix))]
    {
        std::env::var("USERNAME").unwrap_or_else(|_| "unknown".to_string())
    }
}

/// Why an admin operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request makes no sense (a bad amount, an unknown currency): 422.
    #[error("{0}")]
    Invalid(String),
    /// The change contradicts the configuration, which is applied at every start: 409.
    #[error("{0}")]
    Declared(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

type Result<T, E = AdminError> = std::result::Result<T, E>;

/// What an operation did: `changed` is false for a retry or a no-op (nothing audited);
/// `created` when something new exists (HTTP 201); `summary` is the line the command line
/// prints; `body` the JSON the API answers (and `--format json` prints).
#[derive(Debug, Clone)]
pub struct Done {
    pub changed: bool,
    pub created: bool,
    pub summary: String,
    pub body: Value,
}

fn money(app: &App, currency: &Currency, micros: i64) -> String {
    format_micros(micros, app.decimals(currency.as_str()))
}

fn currency(app: &App, name: &str) -> Result<Currency> {
    if is_known_currency(app, name) {
        Ok(Currency::new(name))
    } else {
        Err(AdminError::Invalid(format!(
            "currency {name:?} is not used by any cluster nor declared under `currencies`"
        )))
    }
}

/// An exact decimal amount; `what` names it in the message.
pub fn amount(text: &str, what: &str) -> Result<i64> {
    parse_micros(text).map_err(|e| AdminError::Invalid(format!("{what} {text:?}: {e}")))
}

fn reason(text: &str) -> Result<String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(AdminError::Invalid(
            "a reason is required: say why, for the statement and the audit log".to_string(),
        ));
    }
    Ok(text.to_string())
}

/// A movement's idempotency key: the given one, or `{op}-{hash}` of the arguments and today.
fn key(given: Option<&str>, op: &str, parts: &[&str]) -> String {
    if let Some(k) = given {
        return k.to_string();
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(op.as_bytes());
    for part in parts {
        hasher.update(b"\0");
        hasher.update(part.as_bytes());
    }
    hasher.update(b"\0");
    hasher.update(bursar_ledger::calendar::format_day(now()).as_bytes());
    let hex = hasher.finalize().to_hex();
    format!("{op}-{}", &hex[..20])
}

/// Records a change; `before == after` records nothing.
pub async fn audit(
    app: &App,
    actor: &Actor,
    action: &str,
    target: &str,
    before: &Value,
    after: &Value,
) -> Result<()> {
    if before == after {
        return Ok(());
    }
    let json = |v: &Value| (!v.is_null()).then(|| v.to_string());
    let entry = NewAudit {
        at: now(),
        actor: actor.user.clone(),
        role: actor.role.clone(),
        action: action.to_string(),
        target: target.to_string(),
        before: json(before),
        after: json(after),
    };
    let id = app.ledger.audit(&entry).await?;
    tracing::info!(audit_id = id, action, target, actor = %actor.user, "admin change recorded");
    Ok(())
}

/// A page of the audit log, as `GET /v1/audit` and `bursar audit` show it.
#[derive(Debug, Clone)]
pub struct AuditPage {
    /// Newest first: `{"id", "at", "actor", "role", "action", "target", "before", "after"}`.
    pub entries: Vec<Value>,
    /// When older entries exist: the `before` that lists them.
    pub next_before: Option<i64>,
}

/// The newest `limit` entries (see [`page_limit`]) with an id below `before`.
pub async fn audit_page(app: &App, before: Option<i64>, limit: Option<u32>) -> Result<AuditPage> {
    let limit = page_limit(limit).map_err(AdminError::Invalid)?;
    // One entry past the limit tells whether older ones follow.
    let mut entries = app.ledger.audit_page(before, limit + 1).await?;
    let wanted = usize::try_from(limit).unwrap_or(usize::MAX);
    let next_before = (entries.len() > wanted).then(|| {
        entries.truncate(wanted);
        entries.last().map_or(0, |e| e.id)
    });
    // Before and after are stored as JSON text; anything else is shown as the text it is.
    let parse = |text: &Option<String>| match text {
        None => Value::Null,
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone())),
    };
    let entries = entries
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
    Ok(AuditPage {
        entries,
        next_before,
    })
}

// --- accounts -----------------------------------------------------------------------------

/// An account as audited and answered: `{"name", "parent", "closed_at"}`.
pub async fn account_state(app: &App, name: &str) -> Result<Value> {
    Ok(app
        .ledger
        .accounts()
        .await?
        .into_iter()
        .find(|a| a.name == name)
        .map_or(Value::Null, |a| {
            json!({ "name": a.name, "parent": a.parent,
                    "closed_at": a.closed_at.map(format_instant) })
        }))
}

/// The parent the configuration declares for `name`, if it declares the account.
fn declared_parent(app: &App, name: &str) -> Option<String> {
    app.config
        .accounts
        .get(name)
        .map(|a| a.parent.clone().unwrap_or_else(|| ROOT.to_string()))
}

/// Creates `name` under `parent` (root when `None`). An account that exists under that
/// parent already is a no-op; under another parent, a conflict (move it instead).
pub async fn create_account(
    app: &App,
    actor: &Actor,
    name: &str,
    parent: Option<&str>,
) -> Result<Done> {
    let parent = parent.unwrap_or(ROOT);
    let before = account_state(app, name).await?;
    if !before.is_null() {
        let current = before["parent"].as_str().unwrap_or(ROOT).to_string();
        if current != parent {
            return Err(LedgerError::Conflict(format!(
                "account {name:?} exists under {current:?}; move it with `bursar accounts move` (POST /v1/accounts with a parent)"
            ))
            .into());
        }
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!("account {name} exists under {parent}: nothing changed"),
            body: before,
        });
    }
    let under = (parent != ROOT).then_some(parent);
    app.ledger.ensure_account(name, under).await?;
    let after = account_state(app, name).await?;
    audit(app, actor, "account.create", name, &before, &after).await?;
    Ok(Done {
        changed: true,
        created: true,
        summary: format!("account {name} created under {parent}"),
        body: after,
    })
}

/// Moves `name` under `parent`; cycles and closed parents are refused by the ledger.
pub async fn move_account(app: &App, actor: &Actor, name: &str, parent: &str) -> Result<Done> {
    if let Some(declared) = declared_parent(app, name).filter(|d| d != parent) {
        return Err(AdminError::Declared(format!(
            "account {name:?} is declared in the configuration under {declared:?}; change its parent there (the configuration is applied at every start)"
        )));
    }
    let before = account_state(app, name).await?;
    let under = (parent != ROOT).then_some(parent);
    app.ledger.set_parent(name, under).await?;
    let after = account_state(app, name).await?;
    let changed = before != after;
    audit(app, actor, "account.move", name, &before, &after).await?;
    let from = before["parent"].as_str().unwrap_or(ROOT);
    Ok(Done {
        changed,
        created: false,
        summary: if changed {
            format!("account {name} moved from {from} to {parent}")
        } else {
            format!("account {name} is under {parent} already: nothing changed")
        },
        body: after,
    })
}

/// Closes `name` (and so its subtree) for new holds, allocations, deposits in and
/// associations; refused while jobs hold money in the subtree.
pub async fn close_account(
    app: &App,
    actor: &Actor,
    name: &str,
    reason_text: &str,
) -> Result<Done> {
    let why = reason(reason_text)?;
    let before = account_state(app, name).await?;
    let closed = app.ledger.close_account(name, now()).await?;
    let mut after = account_state(app, name).await?;
    if !closed {
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!(
                "account {name} was closed already (at {}): nothing changed",
                after["closed_at"].as_str().unwrap_or("?")
            ),
            body: after,
        });
    }
    after["reason"] = json!(why);
    audit(app, actor, "account.close", name, &before, &after).await?;
    Ok(Done {
        changed: true,
        created: false,
        summary: format!(
            "account {name} closed at {}: no new jobs, allocations or deposits for it and its subtree; usage that still arrives is charged",
            after["closed_at"].as_str().unwrap_or("?")
        ),
        body: after,
    })
}

// --- users and associations -----------------------------------------------------------------

/// A user as audited and answered: `{"user", "default_account", "accounts"}`.
pub async fn user_state(app: &App, user: &str) -> Result<Value> {
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

/// Lets `user` charge `account` (creating the user, with `account` as default, when new);
/// with `default`, `account` becomes the user's default account.
pub async fn associate(
    app: &App,
    actor: &Actor,
    user: &str,
    account: &str,
    default: bool,
) -> Result<Done> {
    let before = user_state(app, user).await?;
    if default && !before.is_null() {
        check_default(app, user, account)?;
    }
    let was_associated = before["accounts"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(account)));
    if before.is_null() || default {
        app.ledger.upsert_user(user, account).await?;
    }
    app.ledger.associate(user, account).await?;
    let after = user_state(app, user).await?;
    let target = format!("{user}:{account}");
    audit(app, actor, "association.set", &target, &before, &after).await?;
    Ok(Done {
        changed: before != after,
        created: !was_associated,
        summary: if before == after {
            format!("user {user} is associated with {account} already: nothing changed")
        } else {
            format!(
                "user {user} may charge {account}; default account {}",
                after["default_account"].as_str().unwrap_or("?")
            )
        },
        body: after,
    })
}

fn check_default(app: &App, user: &str, account: &str) -> Result<()> {
    match app.config.users.get(user) {
        Some(u) if u.default_account != account => Err(AdminError::Declared(format!(
            "user {user:?} is declared in the configuration with default account {:?}; change it there (the configuration is applied at every start)",
            u.default_account
        ))),
        _ => Ok(()),
    }
}

/// Makes `account` the default account of an existing user (associating them if needed).
pub async fn set_default(app: &App, actor: &Actor, user: &str, account: &str) -> Result<Done> {
    if user_state(app, user).await?.is_null() {
        return Err(LedgerError::NotFound {
            what: "user",
            name: user.to_string(),
        }
        .into());
    }
    let mut done = associate(app, actor, user, account, true).await?;
    if done.changed {
        done.summary = format!("user {user}: default account {account}");
    }
    Ok(done)
}

/// Removes `user`'s association with `account` (not their default account).
pub async fn dissociate(app: &App, actor: &Actor, user: &str, account: &str) -> Result<Done> {
    if let Some(u) = app.config.users.get(user) {
        if u.default_account == account || u.accounts.iter().any(|a| a == account) {
            return Err(AdminError::Declared(format!(
                "the association of user {user:?} with {account:?} is declared in the configuration; remove it there (the configuration is applied at every start)"
            )));
        }
    }
    let before = user_state(app, user).await?;
    let removed = app.ledger.dissociate(user, account).await?;
    let after = user_state(app, user).await?;
    let target = format!("{user}:{account}");
    audit(app, actor, "association.remove", &target, &before, &after).await?;
    Ok(Done {
        changed: removed,
        created: false,
        summary: if removed {
            format!("user {user} may no longer charge {account}")
        } else {
            format!("user {user} was not associated with {account}: nothing changed")
        },
        body: after,
    })
}

// --- allocations --------------------------------------------------------------------------

/// An allocation as audited: what the change is about (amount and period), not the usage
/// that happened to be charged against it when it was read.
fn audited_allocation(app: &App, a: &AllocationRow) -> Value {
    json!({ "id": a.id, "account": a.account, "currency": a.currency,
            "amount": money(app, &a.currency, a.amount),
            "start": bound_json(a.start), "end": bound_json(a.end) })
}

/// Sets the amount of `account`'s allocation for exactly `[start, end)` (creating it).
pub async fn set_allocation(
    app: &App,
    actor: &Actor,
    account: &str,
    currency_name: &str,
    amount_text: &str,
    start: i64,
    end: i64,
) -> Result<Done> {
    let currency = currency(app, currency_name)?;
    let amount = amount(amount_text, "amount")?;
    if amount < 0 {
        return Err(AdminError::Invalid(
            "amount must not be negative".to_string(),
        ));
    }
    if end <= start {
        return Err(AdminError::Invalid(
            "the end must be after the start".to_string(),
        ));
    }
    let before = app
        .ledger
        .allocations()
        .await?
        .into_iter()
        .find(|a| a.account == account && a.currency == currency && a.start == start);
    let row = app
        .ledger
        .set_allocation(account, &currency, amount, start, end)
        .await?;
    let before_json = before
        .as_ref()
        .map_or(Value::Null, |a| audited_allocation(app, a));
    let after_json = audited_allocation(app, &row);
    audit(
        app,
        actor,
        "allocation.set",
        account,
        &before_json,
        &after_json,
    )
    .await?;
    Ok(Done {
        changed: before_json != after_json,
        created: before.is_none(),
        summary: format!(
            "allocation {}: {} {} {} for [{}, {}) — charged {}, held {}, remaining {}",
            row.id,
            row.account,
            money(app, &row.currency, row.amount),
            row.currency,
            format_bound(row.start),
            format_bound(row.end),
            money(app, &row.currency, row.charged),
            money(app, &row.currency, row.held),
            money(app, &row.currency, row.remaining),
        ),
        body: allocation_json(app, &row),
    })
}

/// Creates the next period's allocation after the one covering `at` (default: now).
pub async fn renew_allocation(
    app: &App,
    actor: &Actor,
    account: &str,
    currency_name: &str,
    amount_text: Option<&str>,
    period: Option<&str>,
    at: Option<i64>,
) -> Result<Done> {
    let currency = currency(app, currency_name)?;
    let amount = amount_text.map(|t| amount(t, "amount")).transpose()?;
    let period = period
        .map(|p| p.parse::<RenewPeriod>())
        .transpose()
        .map_err(|e| AdminError::Invalid(e.to_string()))?;
    let renewal = app
        .ledger
        .renew_allocation(&RenewRequest {
            account: account.to_string(),
            currency: currency.clone(),
            at: at.unwrap_or_else(now),
            amount,
            period,
        })
        .await?;
    let next = &renewal.next;
    let body = json!({
        "created": renewal.created,
        "current": allocation_json(app, &renewal.current),
        "next": allocation_json(app, next),
    });
    let line = format!(
        "{} {} {} for [{}, {}) (allocation {}, after allocation {})",
        next.account,
        money(app, &currency, next.amount),
        currency,
        format_bound(next.start),
        format_bound(next.end),
        next.id,
        renewal.current.id
    );
    if !renewal.created {
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!("renewed already: {line}: nothing changed"),
            body,
        });
    }
    let mut after = audited_allocation(app, next);
    after["renews"] = json!(renewal.current.id);
    audit(
        app,
        actor,
        "allocation.renew",
        account,
        &Value::Null,
        &after,
    )
    .await?;
    Ok(Done {
        changed: true,
        created: true,
        summary: format!("renewed: {line}"),
        body,
    })
}

/// `account`'s own allocation in `currency` covering `at`, if any.
async fn covering(
    app: &App,
    account: &str,
    currency: &Currency,
    at: i64,
) -> Result<Option<AllocationRow>> {
    Ok(app
        .ledger
        .allocations()
        .await?
        .into_iter()
        .find(|a| a.account == account && a.currency == *currency && a.start <= at && at < a.end))
}

fn allocation_state(app: &App, a: &Option<AllocationRow>) -> Value {
    a.as_ref().map_or(Value::Null, |a| allocation_json(app, a))
}

// --- money movements ----------------------------------------------------------------------

/// A deposit or adjustment as asked for: `amount` is a signed exact decimal, `at` the moment
/// whose allocation it goes to or counts in (default: now), `key` the idempotency key
/// (default: derived from the rest and the UTC day).
#[derive(Debug, Clone, Copy)]
pub struct ManualEntry<'a> {
    pub account: &'a str,
    pub currency: &'a str,
    pub amount: &'a str,
    pub at: Option<i64>,
    pub reason: &'a str,
    pub key: Option<&'a str>,
}

/// A deposit (`kind` deposit: changes the allocated amount of the allocation covering `at`)
/// or a manual adjustment (`kind` adjustment: signed usage, positive charges more).
pub async fn manual_entry(
    app: &App,
    actor: &Actor,
    kind: EntryKind,
    entry: ManualEntry<'_>,
) -> Result<Done> {
    let ManualEntry {
        account,
        currency: currency_name,
        amount: amount_text,
        at,
        reason: reason_text,
        key: given_key,
    } = entry;
    let currency = currency(app, currency_name)?;
    let micros = amount(amount_text, "amount")?;
    let why = reason(reason_text)?;
    if micros == 0 {
        return Err(AdminError::Invalid(format!(
            "a {kind} of 0 changes nothing"
        )));
    }
    let op = match kind {
        EntryKind::Deposit => "deposit",
        _ => "adjustment",
    };
    let at_text = at.map_or_else(|| "now".to_string(), |t| t.to_string());
    let key = key(
        given_key,
        op,
        &[
            account,
            currency.as_str(),
            &micros.to_string(),
            &at_text,
            &why,
        ],
    );
    let shown = format!(
        "{op} of {} {currency} to {account}",
        money(app, &currency, micros)
    );
    if let Some(existing) = app.ledger.entry_by_key(&key).await? {
        if existing.account != account || existing.amount != micros || existing.kind != kind {
            return Err(LedgerError::Conflict(format!(
                "idempotency key {key:?} was already used for a different entry"
            ))
            .into());
        }
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!(
                "{shown}: already posted as entry {} (key {key}): nothing changed",
                existing.id
            ),
            body: json!({ "posted": false, "key": key, "entry": existing.id }),
        });
    }
    let at = at.unwrap_or_else(now);
    let before = covering(app, account, &currency, at).await?;
    app.ledger
        .post_entry(&NewEntry {
            kind,
            account: account.to_string(),
            currency: currency.clone(),
            amount: micros,
            effective_at: at,
            idempotency_key: key.clone(),
            note: Some(why.clone()),
        })
        .await?;
    let after = covering(app, account, &currency, at).await?;
    let movement = json!({ "kind": kind.as_str(), "account": account, "currency": currency,
        "amount": money(app, &currency, micros), "effective_at": format_instant(at),
        "key": key, "reason": why });
    audit(
        app,
        actor,
        op,
        account,
        &json!({ "allocation": allocation_state(app, &before) }),
        &json!({ "allocation": allocation_state(app, &after), op: movement }),
    )
    .await?;
    let tail = after.as_ref().map_or_else(
        || " (no allocation covers it)".to_string(),
        |a| {
            format!(
                "; allocation {} now {} {currency}, remaining {}",
                a.id,
                money(app, &currency, a.amount),
                money(app, &currency, a.remaining)
            )
        },
    );
    Ok(Done {
        changed: true,
        created: true,
        summary: format!("{shown} at {} posted (key {key}){tail}", format_instant(at)),
        body: json!({ "posted": true, "key": key, op: movement,
                      "allocation": allocation_state(app, &after) }),
    })
}

/// Moves `amount` from `from`'s allocation covering `at` to `to`'s, in one transaction.
#[allow(clippy::too_many_arguments)]
pub async fn transfer(
    app: &App,
    actor: &Actor,
    from: &str,
    to: &str,
    currency_name: &str,
    amount_text: &str,
    at: Option<i64>,
    reason_text: &str,
    given_key: Option<&str>,
) -> Result<Done> {
    let currency = currency(app, currency_name)?;
    let micros = amount(amount_text, "amount")?;
    let why = reason(reason_text)?;
    if micros <= 0 {
        return Err(AdminError::Invalid(format!(
            "a transfer moves a positive amount, not {amount_text}"
        )));
    }
    let at_text = at.map_or_else(|| "now".to_string(), |t| t.to_string());
    let key = key(
        given_key,
        "transfer",
        &[
            from,
            to,
            currency.as_str(),
            &micros.to_string(),
            &at_text,
            &why,
        ],
    );
    let at = at.unwrap_or_else(now);
    let before_from = covering(app, from, &currency, at).await?;
    let before_to = covering(app, to, &currency, at).await?;
    let out = app
        .ledger
        .transfer(&TransferRequest {
            from: from.to_string(),
            to: to.to_string(),
            currency: currency.clone(),
            amount: micros,
            at,
            idempotency_key: key.clone(),
            note: Some(why.clone()),
        })
        .await?;
    let shown = format!(
        "transfer of {} {currency} from {from} to {to}",
        money(app, &currency, micros)
    );
    let body = json!({ "posted": out.posted, "key": key,
        "amount": money(app, &currency, micros), "currency": currency, "reason": why,
        "from": allocation_json(app, &out.from), "to": allocation_json(app, &out.to) });
    if !out.posted {
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!("{shown}: already posted (key {key}): nothing changed"),
            body,
        });
    }
    audit(
        app,
        actor,
        "transfer",
        &format!("{from}->{to}"),
        &json!({ "from": allocation_state(app, &before_from),
                 "to": allocation_state(app, &before_to) }),
        &json!({ "from": allocation_json(app, &out.from), "to": allocation_json(app, &out.to),
                 "amount": money(app, &currency, micros), "key": key, "reason": why }),
    )
    .await?;
    Ok(Done {
        changed: true,
        created: true,
        summary: format!(
            "{shown} posted (key {key}); {from} now {} {currency} (remaining {}), {to} now {} {currency} (remaining {})",
            money(app, &currency, out.from.amount),
            money(app, &currency, out.from.remaining),
            money(app, &currency, out.to.amount),
            money(app, &currency, out.to.remaining),
        ),
        body,
    })
}

/// `JOB` as `cluster:job_id` or a bare job id, with `--cluster`.
fn job_reference(job: &str, cluster: Option<&str>) -> Result<(Option<String>, String)> {
    match (job.split_once(':'), cluster) {
        (Some((c, j)), None) => Ok((Some(c.to_string()), j.to_string())),
        (Some((c, j)), Some(given)) if c == given => Ok((Some(c.to_string()), j.to_string())),
        (Some((c, _)), Some(given)) => Err(AdminError::Invalid(format!(
            "job {job:?} names cluster {c:?} but --cluster says {given:?}"
        ))),
        (None, c) => Ok((c.map(str::to_string), job.to_string())),
    }
}

/// Refunds part (`amount`) or all that is left of a job's charge.
pub async fn refund(
    app: &App,
    actor: &Actor,
    job: &str,
    cluster: Option<&str>,
    amount_text: Option<&str>,
    reason_text: &str,
    given_key: Option<&str>,
) -> Result<Done> {
    let (cluster, job_id) = job_reference(job, cluster)?;
    let micros = amount_text.map(|t| amount(t, "amount")).transpose()?;
    if micros.is_some_and(|m| m <= 0) {
        return Err(AdminError::Invalid(
            "a refund gives back a positive amount".to_string(),
        ));
    }
    let why = reason(reason_text)?;
    let key = key(
        given_key,
        "refund",
        &[
            cluster.as_deref().unwrap_or(""),
            &job_id,
            &micros.map_or_else(|| "all".to_string(), |m| m.to_string()),
            &why,
        ],
    );
    let out = app
        .ledger
        .refund_job(&RefundRequest {
            cluster: cluster.clone(),
            job_id: job_id.clone(),
            amount: micros,
            idempotency_key: key.clone(),
            note: Some(why.clone()),
        })
        .await?;
    let c = &out.job.currency;
    let name = format!("{}:{}", out.job.cluster, out.job.display_id);
    let state = |refunded: i64| {
        json!({ "job": name, "account": out.job.account, "currency": c,
                "charged": money(app, c, out.charged), "refunded": money(app, c, refunded) })
    };
    let mut body = state(out.refunded);
    body["posted"] = json!(out.posted);
    body["amount"] = json!(money(app, c, out.amount));
    body["key"] = json!(key);
    body["entry"] = json!(out.entry_id);
    body["reason"] = json!(why);
    let shown = format!(
        "refund of {} {c} for job {name} (account {})",
        money(app, c, out.amount),
        out.job.account
    );
    if !out.posted {
        return Ok(Done {
            changed: false,
            created: false,
            summary: format!("{shown}: already posted (key {key}): nothing changed"),
            body,
        });
    }
    let before_refunded = out.refunded.saturating_sub(out.amount);
    let mut after = state(out.refunded);
    after["refund"] = json!(money(app, c, out.amount));
    after["key"] = json!(key);
    after["reason"] = json!(why);
    audit(app, actor, "refund", &name, &state(before_refunded), &after).await?;
    Ok(Done {
        changed: true,
        created: true,
        summary: format!(
            "{shown} posted (key {key}); charged {}, refunded {} in all, {} left to refund",
            money(app, c, out.charged),
            money(app, c, out.refunded),
            money(app, c, out.charged.saturating_sub(out.refunded))
        ),
        body,
    })
}
