//! The admin commands (`bursar accounts create|move|close`, `users …`, `alloc set|renew`,
//! `deposit`, `transfer`, `refund`, `adjust`): [`crate::admin`]'s operations on the local
//! ledger, acting as the Unix user who runs them in the `admin` role.

use std::io::Write;

use bursar_ledger::EntryKind;

use crate::admin::{self, Actor, Done};
use crate::app::App;
use crate::cli::*;
use crate::output::{write_json, Format, Table};
use crate::timefmt::{parse_instant, OPEN_END, OPEN_START};

/// Prints what an operation did: its summary line, or its JSON with `--format json`.
fn print(done: &Done, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    match format {
        Format::Json => write_json(out, &done.body)?,
        _ => writeln!(out, "{}", done.summary)?,
    }
    Ok(())
}

fn instant(text: Option<&str>) -> anyhow::Result<Option<i64>> {
    text.map(parse_instant).transpose()
}

pub async fn accounts(
    app: &App,
    command: AccountsCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let actor = Actor::local();
    let (done, format) = match command {
        AccountsCommand::Create(a) => (
            admin::create_account(app, &actor, &a.name, a.parent.as_deref()).await?,
            a.format,
        ),
        AccountsCommand::Move(a) => (
            admin::move_account(app, &actor, &a.name, &a.parent).await?,
            a.format,
        ),
        AccountsCommand::Close(a) => (
            admin::close_account(app, &actor, &a.name, &a.reason).await?,
            a.format,
        ),
    };
    print(&done, format, out)
}

pub async fn users(app: &App, command: UsersCommand, out: &mut impl Write) -> anyhow::Result<()> {
    let actor = Actor::local();
    let (done, format) = match command {
        UsersCommand::Associate(a) => (
            admin::associate(app, &actor, &a.user, &a.account, a.default).await?,
            a.format,
        ),
        UsersCommand::Dissociate(a) => (
            admin::dissociate(app, &actor, &a.user, &a.account).await?,
            a.format,
        ),
        UsersCommand::SetDefault(a) => (
            admin::set_default(app, &actor, &a.user, &a.account).await?,
            a.format,
        ),
    };
    print(&done, format, out)
}

pub async fn alloc_set(app: &App, args: AllocSetArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let start = instant(args.from.as_deref())?.unwrap_or(OPEN_START);
    let end = instant(args.to.as_deref())?.unwrap_or(OPEN_END);
    if end <= start {
        anyhow::bail!("--to must be after --from");
    }
    let done = admin::set_allocation(
        app,
        &Actor::local(),
        &args.account,
        &args.currency,
        &args.amount,
        start,
        end,
    )
    .await?;
    print(&done, Format::Table, out)
}

pub async fn alloc_renew(
    app: &App,
    args: AllocRenewArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let done = admin::renew_allocation(
        app,
        &Actor::local(),
        &args.account,
        &args.currency,
        args.amount.as_deref(),
        args.period.as_deref(),
        instant(args.at.as_deref())?,
    )
    .await?;
    print(&done, args.format, out)
}

pub async fn deposit(app: &App, args: DepositArgs, out: &mut impl Write) -> anyhow::Result<()> {
    entry(
        app,
        EntryKind::Deposit,
        &args.account,
        &args.amount,
        &args.movement,
        out,
    )
    .await
}

pub async fn adjust(app: &App, args: AdjustArgs, out: &mut impl Write) -> anyhow::Result<()> {
    entry(
        app,
        EntryKind::Adjustment,
        &args.account,
        &args.amount,
        &args.movement,
        out,
    )
    .await
}

async fn entry(
    app: &App,
    kind: EntryKind,
    account: &str,
    amount: &str,
    m: &MovementArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let entry = admin::ManualEntry {
        account,
        currency: &m.currency,
        amount,
        at: instant(m.period_of.as_deref())?,
        reason: &m.reason,
        key: m.key.as_deref(),
    };
    let done = admin::manual_entry(app, &Actor::local(), kind, entry).await?;
    print(&done, m.format, out)
}

pub async fn transfer(app: &App, args: TransferArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let m = &args.movement;
    let done = admin::transfer(
        app,
        &Actor::local(),
        &args.from,
        &args.to,
        &m.currency,
        &args.amount,
        instant(m.period_of.as_deref())?,
        &m.reason,
        m.key.as_deref(),
    )
    .await?;
    print(&done, m.format, out)
}

pub async fn refund(app: &App, args: RefundArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let done = admin::refund(
        app,
        &Actor::local(),
        &args.job,
        args.cluster.as_deref(),
        args.amount.as_deref(),
        &args.reason,
        args.key.as_deref(),
    )
    .await?;
    print(&done, args.format, out)
}

/// `bursar audit`: the newest entries first, as `GET /v1/audit` shows them.
pub async fn audit_log(app: &App, args: AuditArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let page = admin::audit_page(app, args.before, Some(args.limit)).await?;
    if args.format == Format::Json {
        write_json(
            out,
            &serde_json::json!({ "audit": page.entries, "next_before": page.next_before }),
        )?;
        return Ok(());
    }
    let mut table = Table::new(
        &[
            "id", "at", "actor", "role", "action", "target", "before", "after",
        ],
        &["id"],
    );
    let cell = |value: &serde_json::Value| match value {
        serde_json::Value::Null => "-".to_string(),
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    for e in &page.entries {
        table.push(
            [
                "id", "at", "actor", "role", "action", "target", "before", "after",
            ]
            .iter()
            .map(|field| cell(&e[field]))
            .collect(),
        );
    }
    match args.format {
        Format::Csv => table.write_csv(out)?,
        _ => table.write_table(out)?,
    }
    if let Some(id) = page.next_before {
        eprintln!("older entries: add --before {id} to list them");
    }
    Ok(())
}
