//! One handler per `bursar` command. Handlers print to standard output; warnings and errors go
//! to standard error; a refusal is an error (non-zero exit).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};
use bursar_collectors::sacct::SacctTimeZone;
use bursar_ledger::{
    AccountRow, AllocationRow, AssociationRow, BalanceRow, GroupKey, LedgerError, UsageReport,
};
use bursar_pricing::money::format_micros;
use bursar_pricing::Currency;
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::*;
use crate::client;
use crate::config::Config;
use crate::import::{import_sacct, ImportSource};
use crate::output::{write_json, Format, Table};
use crate::timefmt::{format_bound, format_instant, now, parse_instant, OPEN_END, OPEN_START};

mod admin;
mod charges;

pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    // The client commands talk to a bursar server: no local configuration is read, so a
    // researcher's login node needs none (and a broken ./bursar.yaml cannot get in the way).
    {
        // Unlocked handles: a lock held across these awaits would block the runtime's other
        // threads the moment one of them logs.
        let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
        let code = match &cli.command {
            Command::Submit(args) => Some(client::submit(&args.args, &mut out, &mut err).await),
            Command::Quote(args) => Some(client::quote(&args.args, &mut out, &mut err).await),
            Command::Jobs(args) => Some(client::jobs(args, &mut out, &mut err).await),
            Command::Cancel(args) => Some(client::cancel(args, &mut out, &mut err).await),
            Command::Balance(args) if client::balance_is_remote(args) => {
                Some(client::balance(args, &mut out, &mut err).await)
            }
            _ => None,
        };
        if let Some(code) = code {
            out.flush()?;
            return code;
        }
    }
    let mut config = Config::load(cli.config.as_deref())?;
    if let Some(url) = cli.database {
        config.database = Some(url);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Config(ConfigCommand::Example) => {
            out.write_all(crate::config::EXAMPLE.as_bytes())?;
        }
        Command::Config(ConfigCommand::Check) => config_check(&config, &mut out)?,
        Command::Import(args) => import(App::open(config).await?, args, &mut out).await?,
        Command::Accounts(AccountsArgs {
            command: Some(command),
            ..
        }) => admin::accounts(&App::open(config).await?, command, &mut out).await?,
        Command::Accounts(args) => {
            accounts(&App::open(config).await?, args.format, &mut out).await?
        }
        Command::Users(UsersArgs {
            command: Some(command),
            ..
        }) => admin::users(&App::open(config).await?, command, &mut out).await?,
        Command::Users(args) => users(&App::open(config).await?, args.format, &mut out).await?,
        Command::Alloc(AllocCommand::Set(args)) => {
            admin::alloc_set(&App::open(config).await?, args, &mut out).await?
        }
        Command::Alloc(AllocCommand::Renew(args)) => {
            admin::alloc_renew(&App::open(config).await?, args, &mut out).await?
        }
        Command::Deposit(args) => admin::deposit(&App::open(config).await?, args, &mut out).await?,
        Command::Transfer(args) => {
            admin::transfer(&App::open(config).await?, args, &mut out).await?
        }
        Command::Refund(args) => admin::refund(&App::open(config).await?, args, &mut out).await?,
        Command::Adjust(args) => admin::adjust(&App::open(config).await?, args, &mut out).await?,
        Command::Audit(args) => admin::audit_log(&App::open(config).await?, args, &mut out).await?,
        Command::Alloc(AllocCommand::List(args)) => {
            alloc_list(&App::open(config).await?, args.format, &mut out).await?
        }
        Command::Balance(args) if !args.local && !client::local_ledger_available(&config) => {
            drop(out);
            let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
            return client::balance(&args, &mut out, &mut err).await;
        }
        Command::Balance(args) => balance(&App::open(config).await?, args, &mut out).await?,
        Command::Token(TokenCommand::Keygen(args)) => {
            client::token::keygen(&config.auth.clone().unwrap_or_default(), args, &mut out)?
        }
        Command::Token(TokenCommand::Issue(args)) => client::token::issue(
            &config.auth.clone().unwrap_or_default(),
            args,
            &mut out,
            &mut std::io::stderr().lock(),
        )?,
        Command::Submit(_) | Command::Quote(_) | Command::Jobs(_) | Command::Cancel(_) => {
            unreachable!("client commands are dispatched before the configuration is read")
        }
        Command::Report(ReportCommand::Usage(args)) => {
            report_usage(&App::open(config).await?, args, &mut out).await?
        }
        Command::Report(ReportCommand::Top(args)) => {
            crate::finance::report_top(&App::open(config).await?, args, &mut out).await?
        }
        Command::Statement(args) => {
            crate::finance::statement(&App::open(config).await?, args, &mut out).await?
        }
        Command::Export(ExportCommand::Focus(args)) => {
            crate::finance::export_focus(&App::open(config).await?, args, &mut out).await?
        }
        Command::Quarantine(QuarantineCommand::List(args)) => {
            quarantine_list(&App::open(config).await?, args.format, &mut out).await?
        }
        Command::Charges(args) => {
            charges::charges(&App::open(config).await?, args, &mut out).await?
        }
        Command::Collect(args) => return collect(App::open(config).await?, args, &mut out).await,
        Command::Reconcile(args) => {
            return crate::reconcile::run(App::open(config).await?, args, &mut out).await
        }
        Command::Enforce(args) => {
            return crate::enforce::command(&App::open(config).await?, args, &mut out).await
        }
        Command::Sync(command) => {
            crate::sync::command(&App::open(config).await?, command, &mut out).await?
        }
        Command::Prices(command) => {
            crate::prices::command(&App::open(config).await?, command, &mut out).await?
        }
        Command::Forecast(args) => {
            crate::forecast::command(&App::open(config).await?, args, &mut out).await?
        }
        Command::Alerts(AlertsCommand::Check(args)) => {
            return crate::alerts::command_check(&App::open(config).await?, args, &mut out).await
        }
        Command::Alerts(AlertsCommand::List(args)) => {
            crate::alerts::command_list(&App::open(config).await?, args, &mut out).await?
        }
        Command::Serve(args) => {
            let listen = args.listen.unwrap_or_else(|| config.listen().to_string());
            crate::server::serve(App::open(config).await?, &listen, &mut out).await?
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn money(app: &App, currency: &Currency, micros: i64) -> String {
    format_micros(micros, app.decimals(currency.as_str()))
}

fn opt_money(app: &App, currency: &Currency, micros: Option<i64>) -> Option<String> {
    micros.map(|m| money(app, currency, m))
}

fn config_check(config: &Config, out: &mut impl Write) -> anyhow::Result<()> {
    let warnings = config.validate()?;
    match &config.source {
        Some(path) => writeln!(out, "config {}: ok", path.display())?,
        None => writeln!(
            out,
            "no config file (BURSAR_CONFIG, --config or ./bursar.yaml): using defaults"
        )?,
    }
    writeln!(out, "database: {}", config.database_url())?;
    writeln!(out, "accounts: {}", config.accounts.len())?;
    writeln!(out, "users: {}", config.users.len())?;
    for (name, cluster) in &config.clusters {
        writeln!(
            out,
            "cluster {name}: {:?}, charged in {}, {} priced partition(s), {} QOS factor(s)",
            cluster.kind,
            cluster.currency,
            cluster.partitions.len(),
            cluster.qos.len()
        )?;
    }
    for warning in warnings {
        writeln!(out, "warning: {warning}")?;
    }
    let problems = check_files(config, out)?;
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        bail!(
            "the configuration names files that cannot be used: {} problem(s), above",
            problems.len()
        );
    }
    Ok(())
}

/// Builds what `bursar serve` and `bursar collect` build from the configuration, calling
/// nothing: the API token keys, each cluster's collection source and forwarder, and the alert
/// webhook. Every key, token and CA file named is read and checked here, as it would be at
/// start. Prints what is ready; returns what is not.
fn check_files(config: &Config, out: &mut impl Write) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    match &config.auth {
        None => writeln!(out, "auth: none (bursar serve needs an auth section)")?,
        Some(auth) => match crate::auth::TokenVerifier::from_config(auth) {
            Ok(_) => writeln!(out, "auth: token keys read")?,
            Err(e) => problems.push(format!("auth: {e}")),
        },
    }
    for (name, cluster) in &config.clusters {
        match crate::collect::Collector::from_config(name, cluster) {
            Ok(Some(_)) => writeln!(out, "cluster {name}: collection source ready")?,
            Ok(None) => {}
            Err(e) => problems.push(in_cluster(name, "collect", &e)),
        }
    }
    // The forwarders fail as one: build them cluster by cluster to report each.
    for (name, cluster) in &config.clusters {
        let mut alone = config.clone();
        alone.clusters = BTreeMap::from([(name.clone(), cluster.clone())]);
        match crate::admission::forward::forwarders_from_config(&alone) {
            Ok(f) if f.is_empty() => {}
            Ok(_) => writeln!(out, "cluster {name}: submission ready")?,
            Err(e) => problems.push(in_cluster(name, "submit", &e)),
        }
    }
    match crate::alerts::Webhook::from_config(config) {
        Ok(Some(_)) => writeln!(out, "alerts webhook: ready")?,
        Ok(None) => {}
        Err(e) => problems.push(format!("{e:#}")),
    }
    Ok(problems)
}

/// `cluster NAME (PART): what went wrong`, once (the builders name the cluster too).
fn in_cluster(name: &str, part: &str, error: &anyhow::Error) -> String {
    let message = format!("{error:#}");
    let prefix = format!("cluster {name}: ");
    let message = message.strip_prefix(&prefix).unwrap_or(&message);
    format!("cluster {name} ({part}): {message}")
}

async fn import(app: App, args: ImportArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let zone_text = args
        .timezone
        .clone()
        .or_else(|| {
            args.cluster
                .as_ref()
                .and_then(|c| app.config.clusters.get(c))
                .and_then(|c| c.timezone.clone())
        })
        .or_else(|| shared_zone(&app.config));
    let time_zone = match zone_text {
        Some(text) => text
            .parse::<SacctTimeZone>()
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        None => SacctTimeZone::Local,
    };
    let (name, input): (String, Box<dyn BufRead + Send>) = if args.file.as_os_str() == "-" {
        (
            "stdin".to_string(),
            Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())),
        )
    } else {
        let file = std::fs::File::open(&args.file)
            .with_context(|| format!("cannot open {}", args.file.display()))?;
        (
            args.file.display().to_string(),
            Box::new(BufReader::with_capacity(1 << 20, file)),
        )
    };
    let source = ImportSource {
        name: name.clone(),
        cluster: args.cluster.clone(),
        time_zone,
        columns: args.columns,
    };
    let summary = import_sacct(&app, input, source, now()).await?;
    for account in &summary.created_accounts {
        eprintln!("warning: account {account} was not known; created under root and charged");
    }
    if !args.quiet {
        writeln!(
            out,
            "{name}: {} job records ({} charged, {} adjusted, {} unchanged), {} steps skipped, {} quarantined",
            summary.records, summary.charged, summary.adjusted, summary.unchanged, summary.steps, summary.quarantined
        )?;
        let mut currencies: Vec<_> = summary.amounts.iter().collect();
        currencies.sort();
        for (currency, micros) in currencies {
            writeln!(
                out,
                "  {currency}: {} for the records in this file",
                format_micros(*micros, app.decimals(currency))
            )?;
        }
        if summary.settled_holds > 0 {
            writeln!(out, "  {} holds settled", summary.settled_holds)?;
        }
        if summary.quarantined > 0 {
            writeln!(
                out,
                "  see `bursar quarantine list` for the lines that could not be charged"
            )?;
        }
    }
    Ok(())
}

/// The zone every configured cluster agrees on, if they do.
fn shared_zone(config: &Config) -> Option<String> {
    let mut zones = config.clusters.values().map(|c| c.timezone.clone());
    let first = zones.next()??;
    zones
        .all(|z| z.as_deref() == Some(first.as_str()))
        .then_some(first)
}

async fn accounts(app: &App, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let accounts = app.ledger.accounts().await?;
    let associations = app.ledger.associations().await?;
    let blocked = crate::enforce::blocked_by_account(app).await?;
    match format {
        Format::Json => {
            write_json(out, &accounts_json(&accounts, &associations, &blocked))?;
        }
        Format::Csv | Format::Table => {
            let mut users: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for a in &associations {
                users
                    .entry(a.account.as_str())
                    .or_default()
                    .push(a.user.as_str());
            }
            let mut children: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
            for a in &accounts {
                children
                    .entry(a.parent.as_deref())
                    .or_default()
                    .push(a.name.as_str());
            }
            let closed = closed_by_account(&accounts);
            let mut table = Table::new(&["account", "parent", "users", "blocked", "closed"], &[]);
            let mut stack: Vec<(&str, usize)> = children
                .get(&None)
                .into_iter()
                .flatten()
                .rev()
                .map(|n| (*n, 0))
                .collect();
            while let Some((name, depth)) = stack.pop() {
                let parent = accounts
                    .iter()
                    .find(|a| a.name == name)
                    .and_then(|a| a.parent.clone())
                    .unwrap_or_default();
                let label = if format == Format::Table {
                    format!("{}{name}", "  ".repeat(depth))
                } else {
                    name.to_string()
                };
                table.push(vec![
                    label,
                    parent,
                    users.get(name).map(|u| u.join(" ")).unwrap_or_default(),
                    blocked.get(name).map(|c| c.join(" ")).unwrap_or_default(),
                    closed.get(name).cloned().unwrap_or_default(),
                ]);
                for child in children.get(&Some(name)).into_iter().flatten().rev() {
                    stack.push((child, depth + 1));
                }
            }
            if format == Format::Table {
                table.write_table(out)?;
            } else {
                table.write_csv(out)?;
            }
        }
    }
    Ok(())
}

/// How each closed account shows in `bursar accounts`: the date it was closed, or, below a
/// closed account, `under NAME` (the nearest closed ancestor). Open accounts are absent.
fn closed_by_account(accounts: &[AccountRow]) -> BTreeMap<String, String> {
    let by_name: BTreeMap<&str, &AccountRow> =
        accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut closed = BTreeMap::new();
    for a in accounts {
        if let Some(at) = a.closed_at {
            closed.insert(a.name.clone(), format_instant(at));
            continue;
        }
        let mut cursor = a.parent.as_deref();
        // The tree is acyclic; the bound only guards against a corrupt database.
        for _ in 0..accounts.len() {
            let Some(parent) = cursor.and_then(|p| by_name.get(p)) else {
                break;
            };
            if parent.closed_at.is_some() {
                closed.insert(a.name.clone(), format!("under {}", parent.name));
                break;
            }
            cursor = parent.parent.as_deref();
        }
    }
    closed
}

/// `{"accounts": [{name, parent, users, blocked, created_at, closed_at}]}`: `bursar accounts
/// --format json` and `GET /v1/accounts`; `blocked` lists the clusters where bursar blocks the
/// account; `closed_at` is when it was closed (null: open; an account under a closed one is
/// closed with it).
pub fn accounts_json(
    accounts: &[AccountRow],
    associations: &[AssociationRow],
    blocked: &BTreeMap<String, Vec<String>>,
) -> Value {
    let mut users: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for a in associations {
        users
            .entry(a.account.as_str())
            .or_default()
            .push(a.user.as_str());
    }
    let rows: Vec<Value> = accounts
        .iter()
        .map(|a| {
            json!({
                "name": a.name,
                "parent": a.parent,
                "users": users.get(a.name.as_str()).cloned().unwrap_or_default(),
                "blocked": blocked.get(&a.name).cloned().unwrap_or_default(),
                "created_at": format_instant(a.created_at),
                "closed_at": a.closed_at.map(format_instant),
            })
        })
        .collect();
    json!({ "accounts": rows })
}

async fn users(app: &App, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let users = app.ledger.users().await?;
    let associations = app.ledger.associations().await?;
    let accounts_of = |user: &str| -> Vec<String> {
        associations
            .iter()
            .filter(|a| a.user == user)
            .map(|a| a.account.clone())
            .collect()
    };
    if format == Format::Json {
        let rows: Vec<Value> = users
            .iter()
            .map(|u| {
                json!({ "user": u.name, "default_account": u.default_account,
                        "accounts": accounts_of(&u.name) })
            })
            .collect();
        return Ok(write_json(out, &json!({ "users": rows }))?);
    }
    let mut table = Table::new(&["user", "default account", "accounts"], &[]);
    for u in &users {
        table.push(vec![
            u.name.clone(),
            u.default_account.clone(),
            accounts_of(&u.name).join(" "),
        ]);
    }
    write_table(&table, format, out)
}

/// Whether `currency` is one bursar knows: used by a cluster, declared, `su` or `usd`.
pub fn is_known_currency(app: &App, currency: &str) -> bool {
    app.config.clusters.values().any(|c| c.currency == currency)
        || app.config.currencies.contains_key(currency)
        || currency == "su"
        || currency == "usd"
}

async fn alloc_list(app: &App, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let rows = app.ledger.allocations().await?;
    if format == Format::Json {
        let rows: Vec<Value> = rows.iter().map(|r| allocation_json(app, r)).collect();
        return Ok(write_json(out, &json!({ "allocations": rows }))?);
    }
    let mut table = Table::new(
        &[
            "id",
            "account",
            "currency",
            "amount",
            "from",
            "to",
            "charged",
            "held",
            "remaining",
        ],
        &["id", "amount", "charged", "held", "remaining"],
    );
    for r in &rows {
        table.push(vec![
            r.id.to_string(),
            r.account.clone(),
            r.currency.to_string(),
            money(app, &r.currency, r.amount),
            format_bound(r.start),
            format_bound(r.end),
            money(app, &r.currency, r.charged),
            money(app, &r.currency, r.held),
            money(app, &r.currency, r.remaining),
        ]);
    }
    write_table(&table, format, out)
}

/// One allocation as `bursar alloc list --format json` prints it (and `POST /v1/allocations`
/// answers).
pub fn allocation_json(app: &App, r: &AllocationRow) -> Value {
    json!({
        "id": r.id,
        "account": r.account,
        "currency": r.currency,
        "amount": money(app, &r.currency, r.amount),
        "start": bound_json(r.start),
        "end": bound_json(r.end),
        "charged": money(app, &r.currency, r.charged),
        "held": money(app, &r.currency, r.held),
        "remaining": money(app, &r.currency, r.remaining),
    })
}

/// An allocation bound as JSON: RFC 3339, or `null` for an open end.
pub fn bound_json(epoch: i64) -> Value {
    if epoch <= OPEN_START || epoch >= OPEN_END {
        Value::Null
    } else {
        Value::String(format_instant(epoch))
    }
}

fn write_table(table: &Table, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    match format {
        Format::Csv => table.write_csv(out)?,
        _ => table.write_table(out)?,
    }
    Ok(())
}

async fn balance(app: &App, args: BalanceArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let at = args
        .at
        .as_deref()
        .map(parse_instant)
        .transpose()?
        .unwrap_or_else(now);
    let rows: Vec<BalanceRow> = match &args.account {
        Some(account) => app.ledger.balance(account, at).await?,
        None => app.ledger.balances(at).await?,
    };
    if args.format == Format::Json {
        let window = crate::forecast::window(app, None)?;
        let forecasts = app.ledger.forecasts_of(&rows, at, window).await?;
        return Ok(write_json(out, &balance_json(app, &rows, &forecasts, at))?);
    }
    let mut table = Table::new(
        &[
            "account",
            "currency",
            "allocated",
            "charged",
            "held",
            "remaining",
            "available",
            "period",
        ],
        &["allocated", "charged", "held", "remaining", "available"],
    );
    let dash = || "-".to_string();
    for r in &rows {
        table.push(vec![
            r.account.clone(),
            r.currency.to_string(),
            opt_money(app, &r.currency, r.allocated).unwrap_or_else(dash),
            money(app, &r.currency, r.charged),
            money(app, &r.currency, r.held),
            opt_money(app, &r.currency, r.remaining).unwrap_or_else(dash),
            opt_money(app, &r.currency, r.available).unwrap_or_else(|| "no allocation".to_string()),
            r.period
                .map(|(s, e)| format!("{} .. {}", format_bound(s), format_bound(e)))
                .unwrap_or_else(|| "all time".to_string()),
        ]);
    }
    write_table(&table, args.format, out)
}

/// `{"at", "balances": [...]}`: `bursar balance --format json` and
/// `GET /v1/accounts/{name}/balance`. Each row has a `forecast` object when `forecasts` has
/// one for it (the ledger's `forecasts_of(rows)`, in the rows' order).
pub fn balance_json(
    app: &App,
    rows: &[BalanceRow],
    forecasts: &[bursar_ledger::Forecast],
    at: i64,
) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let forecast = forecasts
                .iter()
                .find(|f| f.account == r.account && f.currency == r.currency)
                .map(|f| crate::forecast::forecast_json(app, f));
            json!({
                "account": r.account,
                "currency": r.currency,
                "allocated": opt_money(app, &r.currency, r.allocated),
                "charged": money(app, &r.currency, r.charged),
                "held": money(app, &r.currency, r.held),
                "remaining": opt_money(app, &r.currency, r.remaining),
                "available": opt_money(app, &r.currency, r.available),
                "period_start": r.period.map(|p| bound_json(p.0)),
                "period_end": r.period.map(|p| bound_json(p.1)),
                "forecast": forecast,
            })
        })
        .collect();
    json!({ "at": format_instant(at), "balances": rows })
}

/// The grouping of a usage report from `--by` / `?by=` values (each may hold several,
/// comma-separated), without repeats, in the order given.
pub fn parse_group_keys<S: AsRef<str>>(by: &[S]) -> Result<Vec<GroupKey>, LedgerError> {
    let mut keys: Vec<GroupKey> = Vec::new();
    for key in by.iter().flat_map(|b| b.as_ref().split(',')) {
        let key: GroupKey = key.trim().parse()?;
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// `{"from", "to", "rows", "totals"}`: `bursar report usage --format json` and
/// `GET /v1/reports/usage`. `keys` is the grouping the report was made with.
pub fn usage_report_json(app: &App, report: &UsageReport, keys: &[GroupKey]) -> Value {
    let extra: Vec<GroupKey> = keys
        .iter()
        .copied()
        .filter(|k| *k != GroupKey::Account)
        .collect();
    let rows: Vec<Value> = report
        .rows
        .iter()
        .map(|r| {
            let mut row = serde_json::Map::new();
            row.insert("account".into(), json!(r.account));
            for key in &extra {
                row.insert(
                    key.as_str().into(),
                    json!(r.keys.get(key).cloned().unwrap_or_default()),
                );
            }
            row.insert("currency".into(), json!(r.currency));
            row.insert("amount".into(), json!(money(app, &r.currency, r.amount)));
            row.insert("jobs".into(), json!(r.jobs));
            Value::Object(row)
        })
        .collect();
    let totals: Vec<Value> = report
        .totals
        .iter()
        .map(|(c, m)| json!({ "currency": c, "amount": money(app, c, *m) }))
        .collect();
    json!({
        "from": format_instant(report.from),
        "to": format_instant(report.to),
        "rows": rows,
        "totals": totals,
    })
}

async fn report_usage(app: &App, args: UsageArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let from = parse_instant(&args.from).context("--from")?;
    let to = parse_instant(&args.to).context("--to")?;
    if to <= from {
        bail!("--to must be after --from");
    }
    let keys = parse_group_keys(&args.by)?;
    let report = if args.rollup {
        app.ledger.usage_report_rollup(from, to, &keys).await?
    } else {
        app.ledger.usage_report(from, to, &keys).await?
    };
    let extra: Vec<GroupKey> = keys
        .iter()
        .copied()
        .filter(|k| *k != GroupKey::Account)
        .collect();
    if args.format == Format::Json {
        return Ok(write_json(out, &usage_report_json(app, &report, &keys))?);
    }
    let mut headers: Vec<&'static str> = vec!["account"];
    headers.extend(extra.iter().map(|k| k.as_str()));
    headers.extend(["currency", "amount", "jobs"]);
    let mut table = Table::new(&headers, &["amount", "jobs"]);
    for r in &report.rows {
        let mut row = vec![r.account.clone()];
        row.extend(
            extra
                .iter()
                .map(|k| r.keys.get(k).cloned().unwrap_or_default()),
        );
        row.extend([
            r.currency.to_string(),
            money(app, &r.currency, r.amount),
            r.jobs.to_string(),
        ]);
        table.push(row);
    }
    if args.format == Format::Table {
        for (currency, micros) in &report.totals {
            let mut row = vec!["TOTAL".to_string()];
            row.extend(extra.iter().map(|_| String::new()));
            row.extend([
                currency.to_string(),
                money(app, currency, *micros),
                String::new(),
            ]);
            table.push(row);
        }
    }
    write_table(&table, args.format, out)
}

async fn quarantine_list(app: &App, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let rows = app.ledger.quarantine_list().await?;
    if format == Format::Json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|q| {
                json!({
                    "id": q.id,
                    "source": q.source,
                    "line": q.line,
                    "reason": q.reason,
                    "raw": q.raw,
                    "first_seen": format_instant(q.first_seen),
                })
            })
            .collect();
        return Ok(write_json(out, &json!({ "quarantine": rows }))?);
    }
    if rows.is_empty() && format == Format::Table {
        writeln!(out, "nothing in quarantine")?;
        return Ok(());
    }
    let mut table = Table::new(&["id", "source", "line", "reason", "raw"], &["id", "line"]);
    for q in &rows {
        let raw = if format == Format::Table && q.raw.chars().count() > 60 {
            format!("{}…", q.raw.chars().take(59).collect::<String>())
        } else {
            q.raw.clone()
        };
        table.push(vec![
            q.id.to_string(),
            q.source.clone(),
            q.line.map(|l| l.to_string()).unwrap_or_default(),
            q.reason.clone(),
            raw,
        ]);
    }
    write_table(&table, format, out)
}

/// One row per job identity: what it costs now (the sum of its journal entries).
async fn collect(app: App, args: CollectArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    use crate::collect::{
        collect_loop, describe_lag, load_status, run_pass, Collector, PassWindow, Source,
    };

    let mut collectors = Vec::new();
    for (name, cluster) in &app.config.clusters {
        if args.cluster.as_ref().is_some_and(|c| c != name) {
            continue;
        }
        if let Some(collector) = Collector::from_config(name, cluster)? {
            collectors.push(collector);
        }
    }
    if let Some(wanted) = &args.cluster {
        if !app.config.clusters.contains_key(wanted) {
            bail!("cluster {wanted:?} is not configured");
        }
    }
    if let Some(CollectCommand::Status(f)) = args.command {
        let quarantine = app.ledger.quarantine_list().await?;
        let mut table = Table::new(
            &[
                "cluster",
                "source",
                "last success",
                "collected until",
                "lag",
                "failures",
                "last error",
                "quarantined",
            ],
            &["failures", "quarantined"],
        );
        let mut rows = Vec::new();
        for c in &collectors {
            let status = load_status(&app, &c.cluster).await?;
            let prefix = format!("{}:{}", c.source.kind(), c.cluster);
            let quarantined = quarantine.iter().filter(|q| q.source == prefix).count();
            let (until, lag) = describe_lag(status.collected_until);
            rows.push(json!({
                "cluster": c.cluster,
                "source": c.source.kind(),
                "last_attempt": status.last_attempt.map(format_instant),
                "last_success": status.last_success.map(format_instant),
                "collected_until": status.collected_until.map(format_instant),
                "lag_seconds": status.collected_until.map(|u| now() - u),
                "consecutive_failures": status.consecutive_failures,
                "last_error": status.last_error,
                "last_error_at": status.last_error_at.map(format_instant),
                "quarantined": quarantined,
            }));
            table.push(vec![
                c.cluster.clone(),
                c.source.kind().to_string(),
                status
                    .last_success
                    .map(format_instant)
                    .unwrap_or_else(|| "never".into()),
                until,
                lag,
                status.consecutive_failures.to_string(),
                status
                    .last_error
                    .clone()
                    .filter(|_| status.consecutive_failures > 0)
                    .unwrap_or_default(),
                quarantined.to_string(),
            ]);
        }
        if f.format == Format::Json {
            write_json(out, &json!({ "clusters": rows }))?;
        } else {
            write_table(&table, f.format, out)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if collectors.is_empty() {
        bail!("no cluster has a `collect` section in the configuration (see docs/collectors.md)");
    }
    let window = PassWindow {
        since: args
            .since
            .as_deref()
            .map(parse_instant)
            .transpose()
            .context("--since")?,
        until: args
            .until
            .as_deref()
            .map(parse_instant)
            .transpose()
            .context("--until")?,
    };
    if args.watch {
        let app = std::sync::Arc::new(app);
        collect_loop(app, collectors, None, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut failed = 0;
    for collector in &collectors {
        let name = collector.cluster.clone();
        if window.until.is_some() && matches!(collector.source, Source::Dstack { .. }) {
            eprintln!(
                "note: {name}: --until applies to Slurm clusters; a dstack pass reads to the end \
                 of the runs list"
            );
        }
        let progress = move |done: u64, total: u64, until: i64| {
            if interactive && done < total {
                let width = 30;
                let filled = (done * width / total.max(1)) as usize;
                eprint!(
                    "\r{name}: [{}{}] {:>3} %, up to {}",
                    "#".repeat(filled),
                    " ".repeat(width as usize - filled),
                    done * 100 / total.max(1),
                    format_instant(until)
                );
            } else if interactive && total > 0 {
                eprint!("\r\x1b[2K");
            }
        };
        match run_pass(&app, collector, window, &progress).await {
            Ok(s) => {
                for account in &s.created_accounts {
                    eprintln!(
                        "warning: account {account} was not known; created under root and charged"
                    );
                }
                writeln!(
                    out,
                    "{}: {} records ({} charged, {} adjusted, {} unchanged), {} quarantined, {} settled holds",
                    s.cluster, s.records, s.charged, s.adjusted, s.unchanged, s.quarantined, s.settled_holds
                )?;
            }
            Err(e) => {
                failed += 1;
                eprintln!("bursar: {}: {e:#}", collector.cluster);
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
