//! Instance price tables: where the [`PriceBook`] comes from, and `bursar prices`.
//!
//! The book is the tables bursar ships, then the config's `price_tables` files, then the
//! versions stored in the ledger (`bursar prices import`, `prices refresh --aws`). Every
//! charge and every quote looks an instance up in it at the job's start, so a stored version
//! prices the jobs that start at or after its `effective` and earlier jobs keep their price.
//! [`Prices`] holds the book a process uses and reloads it when the ledger has new versions
//! (`bursar serve` checks on every collection pass and hold-expiry tick).
//!
//! - this file: assembling the book, `prices list | show | import | refresh`;
//! - [`aws`]: fetching from the AWS Price List API.

pub mod aws;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use anyhow::{bail, Context};
use bursar_ledger::{Ledger, NewAudit, NewPriceTable};
use bursar_pricing::aws::single_price;
use bursar_pricing::tables::read_dir_tables;
use bursar_pricing::{Currency, Decimal, InstancePrice, PriceBook, PriceTable};
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::{PricesCommand, PricesRefreshArgs, PricesShowArgs};
use crate::config::Config;
use crate::output::{write_json, Format, Table};
use crate::timefmt::{format_instant, now, parse_instant};

/// The name of the tables `bursar prices refresh --aws` stores.
pub const AWS_TABLE: &str = "aws-ec2";

/// Region fetched when neither `--region` nor `prices.aws.region` says.
pub const DEFAULT_AWS_REGION: &str = "us-east-1";

/// Limit for one Price List API call when `prices.aws.timeout` does not say.
const DEFAULT_AWS_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a table version comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Shipped in the binary (`pricing/tables/`).
    Builtin,
    /// A file named by the config's `price_tables`.
    ConfigFile(PathBuf),
    /// Stored in the ledger by `bursar prices import`.
    Imported,
    /// Stored in the ledger by `bursar prices refresh --aws`.
    Aws,
}

impl Origin {
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Builtin => "builtin",
            Origin::ConfigFile(_) => "config file",
            Origin::Imported => "imported",
            Origin::Aws => "aws",
        }
    }

    fn stored(&self) -> bool {
        matches!(self, Origin::Imported | Origin::Aws)
    }
}

/// One table version with where it comes from.
#[derive(Debug, Clone)]
pub struct Listed {
    pub table: PriceTable,
    pub origin: Origin,
    /// For ledger versions: when and by whom they were stored.
    pub stored: Option<(i64, String)>,
}

/// The tables that do not live in the ledger: shipped ones, then the config's `price_tables`
/// (a relative path is relative to the config file's folder; a folder means its `*.yaml`).
pub fn static_tables(config: &Config) -> anyhow::Result<Vec<Listed>> {
    let mut tables: Vec<Listed> = PriceBook::builtin()
        .tables()
        .iter()
        .map(|table| Listed {
            table: table.clone(),
            origin: Origin::Builtin,
            stored: None,
        })
        .collect();
    for path in &config.price_tables {
        let path = match config.source.as_ref().and_then(|s| s.parent()) {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.clone(),
        };
        let found = if path.is_dir() {
            read_dir_tables(&path).with_context(|| format!("price tables in {}", path.display()))?
        } else {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let table = PriceTable::from_yaml_str(&text, &path.display().to_string())?;
            vec![(path.clone(), table)]
        };
        tables.extend(found.into_iter().map(|(path, table)| Listed {
            table,
            origin: Origin::ConfigFile(path),
            stored: None,
        }));
    }
    Ok(tables)
}

/// The versions stored in the ledger, in the order they were stored.
pub async fn stored_tables(ledger: &Ledger) -> anyhow::Result<Vec<Listed>> {
    let rows = ledger
        .price_tables()
        .await
        .context("cannot read the price tables stored in the ledger")?;
    rows.into_iter()
        .map(|row| {
            let origin = format!("{}@{} (stored in the ledger)", row.name, row.version);
            let table = PriceTable::from_yaml_str(&row.content, &origin)?;
            Ok(Listed {
                table,
                origin: if row.origin == "aws" {
                    Origin::Aws
                } else {
                    Origin::Imported
                },
                stored: Some((row.imported_at, row.imported_by)),
            })
        })
        .collect()
}

/// A book of `tables`; a clash (the same version twice, or two tables pricing one instance from
/// the same moment) is an error naming both.
pub fn assemble<'a>(tables: impl IntoIterator<Item = &'a Listed>) -> anyhow::Result<PriceBook> {
    let mut book = PriceBook::new();
    for listed in tables {
        book.add_table(listed.table.clone()).with_context(|| {
            format!(
                "price table {} ({})",
                listed.table.label(),
                describe_origin(&listed.origin)
            )
        })?;
    }
    Ok(book)
}

fn describe_origin(origin: &Origin) -> String {
    match origin {
        Origin::ConfigFile(path) => format!("config file {}", path.display()),
        Origin::Builtin => "shipped with bursar".to_string(),
        Origin::Imported | Origin::Aws => format!("{} version in the ledger", origin.as_str()),
    }
}

/// The price book a process uses: the static tables plus the ledger's versions, reloaded when
/// the ledger has new ones.
#[derive(Debug)]
pub struct Prices {
    fixed: Vec<Listed>,
    loaded: RwLock<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    book: Arc<PriceBook>,
    /// [`Ledger::price_tables_stamp`] when `book` was assembled.
    stamp: (i64, i64),
}

impl Prices {
    /// Reads the static tables and the ledger's versions.
    pub async fn load(config: &Config, ledger: &Ledger) -> anyhow::Result<Prices> {
        let fixed = static_tables(config)?;
        let stamp = ledger.price_tables_stamp().await?;
        let stored = stored_tables(ledger).await?;
        let book = Arc::new(assemble(fixed.iter().chain(&stored))?);
        Ok(Prices {
            fixed,
            loaded: RwLock::new(Loaded { book, stamp }),
        })
    }

    /// The book in use now. Cheap: callers take one per batch or request.
    pub fn book(&self) -> Arc<PriceBook> {
        self.loaded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .book
            .clone()
    }

    /// The shipped and config-file tables.
    pub fn fixed(&self) -> &[Listed] {
        &self.fixed
    }

    /// Re-assembles the book when the ledger's versions changed since it was built; `true`
    /// when it did. A book that no longer assembles (a new version clashing with a config file
    /// added since) is an error and the old book stays in use.
    pub async fn reload_if_changed(&self, ledger: &Ledger) -> anyhow::Result<bool> {
        let stamp = ledger.price_tables_stamp().await?;
        let current = self
            .loaded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .stamp;
        if stamp == current {
            return Ok(false);
        }
        let stored = stored_tables(ledger).await?;
        let book = Arc::new(assemble(self.fixed.iter().chain(&stored))?);
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        *loaded = Loaded { book, stamp };
        tracing::info!(versions = stamp.0, "price tables reloaded from the ledger");
        Ok(true)
    }
}

/// `bursar prices …`.
pub async fn command(
    app: &App,
    command: PricesCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match command {
        PricesCommand::List(args) => list(app, args.format, out).await,
        PricesCommand::Show(args) => show(app, args, out).await,
        PricesCommand::Import(args) => {
            let text = std::fs::read_to_string(&args.file)
                .with_context(|| format!("cannot read {}", args.file.display()))?;
            let table = PriceTable::from_yaml_str(&text, &args.file.display().to_string())?;
            let label = table.label().clone();
            let (stored, table) = store(app, table, Origin::Imported).await?;
            if stored {
                writeln!(out, "stored price table {}", summary(&table))?;
            } else {
                writeln!(
                    out,
                    "price table {label} is already stored with the same content; nothing changed"
                )?;
            }
            Ok(())
        }
        PricesCommand::Refresh(args) => refresh(app, args, out).await,
    }
}

/// `NAME@VERSION: N prices in CUR, effective T`.
fn summary(table: &PriceTable) -> String {
    format!(
        "{}: {} prices in {}, effective {}",
        table.label(),
        table.prices.len(),
        table.currency,
        format_instant(table.effective)
    )
}

/// Every version, static ones first, then the ledger's in the order stored.
async fn all_tables(app: &App) -> anyhow::Result<Vec<Listed>> {
    let mut all = app.prices.fixed().to_vec();
    all.extend(stored_tables(&app.ledger).await?);
    Ok(all)
}

async fn list(app: &App, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let all = all_tables(app).await?;
    if format == Format::Json {
        let rows: Vec<Value> = all
            .iter()
            .map(|l| {
                json!({
                    "name": l.table.name,
                    "version": l.table.version,
                    "effective": format_instant(l.table.effective),
                    "currency": l.table.currency,
                    "prices": l.table.prices.len(),
                    "origin": l.origin.as_str(),
                    "file": match &l.origin {
                        Origin::ConfigFile(path) => Some(path.display().to_string()),
                        _ => None,
                    },
                    "imported_at": l.stored.as_ref().map(|(at, _)| format_instant(*at)),
                    "imported_by": l.stored.as_ref().map(|(_, by)| by),
                    "source": l.table.source,
                })
            })
            .collect();
        return Ok(write_json(out, &json!({ "price_tables": rows }))?);
    }
    let mut table = Table::new(
        &[
            "name",
            "version",
            "effective",
            "currency",
            "prices",
            "source",
            "imported_at",
        ],
        &["prices"],
    );
    for l in &all {
        table.push(vec![
            l.table.name.clone(),
            l.table.version.clone(),
            format_instant(l.table.effective),
            l.table.currency.to_string(),
            l.table.prices.len().to_string(),
            l.origin.as_str().to_string(),
            l.stored
                .as_ref()
                .map(|(at, _)| format_instant(*at))
                .unwrap_or_default(),
        ]);
    }
    write(&table, format, out)
}

fn write(table: &Table, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    match format {
        Format::Csv => table.write_csv(out)?,
        _ => table.write_table(out)?,
    }
    Ok(())
}

async fn show(app: &App, args: PricesShowArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let all = all_tables(app).await?;
    let Some(listed) = all.iter().find(|l| l.table.label().as_ref() == args.table) else {
        let known: Vec<String> = all.iter().map(|l| l.table.label().to_string()).collect();
        bail!(
            "no price table {:?}: give NAME@VERSION, one of {}",
            args.table,
            known.join(", ")
        );
    };
    let t = &listed.table;
    if args.format == Format::Json {
        let rows: Vec<Value> = t
            .prices
            .iter()
            .map(|p| {
                json!({
                    "provider": p.provider,
                    "region": p.region,
                    "instance": p.instance,
                    "vcpus": p.vcpus,
                    "memory_gib": p.memory_gib,
                    "gpus": p.gpus,
                    "gpu_model": p.gpu_model,
                    "gpu_memory_gib": p.gpu_memory_gib,
                    "price_per_hour": p.price_per_hour,
                    "source": p.source,
                    "retrieved": p.retrieved,
                    "note": p.note,
                })
            })
            .collect();
        let value = json!({
            "name": t.name,
            "version": t.version,
            "effective": format_instant(t.effective),
            "currency": t.currency,
            "origin": listed.origin.as_str(),
            "imported_at": listed.stored.as_ref().map(|(at, _)| format_instant(*at)),
            "imported_by": listed.stored.as_ref().map(|(_, by)| by),
            "source": t.source,
            "note": t.note,
            "prices": rows,
        });
        return Ok(write_json(out, &value)?);
    }
    let csv = args.format == Format::Csv;
    let mut headers = vec![
        "provider",
        "region",
        "instance",
        "vcpus",
        "memory_gib",
        "gpus",
        "gpu_model",
        "price_per_hour",
    ];
    if csv {
        headers.extend(["gpu_memory_gib", "source", "retrieved", "note"]);
    }
    let mut table = Table::new(&headers, &["vcpus", "memory_gib", "gpus", "price_per_hour"]);
    for p in &t.prices {
        let mut row = vec![
            p.provider.clone(),
            p.region.clone(),
            p.instance.clone(),
            p.vcpus.to_string(),
            p.memory_gib.to_string(),
            p.gpus.to_string(),
            p.gpu_model.clone().unwrap_or_default(),
            p.price_per_hour.to_string(),
        ];
        if csv {
            row.extend([
                p.gpu_memory_gib.map(|d| d.to_string()).unwrap_or_default(),
                p.source.clone().unwrap_or_default(),
                p.retrieved.clone().unwrap_or_default(),
                p.note.clone().unwrap_or_default(),
            ]);
        }
        table.push(row);
    }
    if !csv {
        writeln!(out, "{}", summary(t))?;
        let stored = match &listed.stored {
            Some((at, by)) => format!(", stored {} by {by}", format_instant(*at)),
            None => String::new(),
        };
        writeln!(out, "origin: {}{stored}", describe_origin(&listed.origin))?;
        writeln!(out, "source: {}", t.source)?;
        if let Some(note) = &t.note {
            writeln!(out, "note: {note}")?;
        }
        writeln!(out)?;
    }
    write(&table, args.format, out)
}

/// Who changed the prices, for the audit log: the login running the command.
fn actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "bursar".to_string())
}

/// Stores `table` in the ledger, audited, after checking it fits with every table in use:
/// `(true, table)` when stored, `(false, table)` when that version was stored already with the
/// same content. A version that clashes with a static table, or that prices an instance
/// another table prices from the very same moment, is refused.
pub async fn store(
    app: &App,
    table: PriceTable,
    origin: Origin,
) -> anyhow::Result<(bool, PriceTable)> {
    debug_assert!(origin.stored());
    let label = table.label().clone();
    if let Some(fixed) = app
        .prices
        .fixed()
        .iter()
        .find(|l| l.table.label() == &label)
    {
        bail!(
            "price table {label} is {}; give the new table another name or version",
            describe_origin(&fixed.origin)
        );
    }
    let stored = stored_tables(&app.ledger).await?;
    // Checked here for clear messages; the ledger's unique key and content check are the guard.
    match stored.iter().find(|l| l.table.label() == &label) {
        Some(existing) if existing.table.to_yaml() != table.to_yaml() => {
            let (at, by) = existing.stored.clone().unwrap_or_default();
            bail!(
                "price table {label} is already stored with other content ({}, stored {} by \
                 {by}); a changed price needs a new version (`bursar prices show {label}` \
                 shows what is stored)",
                existing.origin.as_str(),
                format_instant(at)
            );
        }
        Some(_) => {}
        None => {
            let mut book = assemble(app.prices.fixed().iter().chain(&stored))?;
            book.add_table(table.clone())?;
        }
    }
    let at = now();
    let after = json!({
        "name": table.name,
        "version": table.version,
        "effective": format_instant(table.effective),
        "currency": table.currency,
        "origin": origin.as_str(),
        "prices": table.prices.len(),
        "source": table.source,
    });
    let row = NewPriceTable {
        name: table.name.clone(),
        version: table.version.clone(),
        effective: table.effective,
        currency: table.currency.clone(),
        origin: origin.as_str().to_string(),
        row_count: i64::try_from(table.prices.len()).unwrap_or(i64::MAX),
        content: table.to_yaml(),
        imported_at: at,
        imported_by: actor(),
    };
    let audit = NewAudit {
        at,
        actor: actor(),
        role: "admin".to_string(),
        action: if origin == Origin::Aws {
            "prices.refresh"
        } else {
            "prices.import"
        }
        .to_string(),
        target: label.to_string(),
        before: None,
        after: Some(after.to_string()),
    };
    let (stored, _) = app.ledger.store_price_table(&row, &audit).await?;
    if stored {
        tracing::info!(table = %label, "price table stored");
    }
    Ok((stored, table))
}

/// `bursar prices refresh --aws`.
async fn refresh(app: &App, args: PricesRefreshArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let conf = &app.config.prices.aws;
    let region = args
        .region
        .clone()
        .or_else(|| conf.region.clone())
        .unwrap_or_else(|| DEFAULT_AWS_REGION.to_string());
    let fetched_at = now();
    let effective = match &args.effective {
        Some(text) => parse_instant(text).context("--effective")?,
        None => fetched_at,
    };
    let book = app.prices.book();
    let instances = match args.instances.clone() {
        Some(list) => list,
        None if !conf.instances.is_empty() => conf.instances.clone(),
        None => {
            let mut listed: Vec<String> = book
                .tables()
                .iter()
                .flat_map(|t| &t.prices)
                .filter(|p| p.provider == "aws" && p.region == region)
                .map(|p| p.instance.clone())
                .collect();
            listed.sort();
            listed.dedup();
            listed
        }
    };
    let instances: Vec<String> = instances
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect();
    if instances.is_empty() {
        bail!(
            "no instance types to fetch: the price tables list no aws instance in {region}; \
             name them with --instances c5.xlarge,p4d.24xlarge"
        );
    }
    let settings = aws::AwsSettings {
        endpoint: args.endpoint.clone().or_else(|| conf.endpoint.clone()),
        timeout: conf.timeout.unwrap_or(DEFAULT_AWS_TIMEOUT),
    };
    let client = aws::client(&settings, aws::credentials_from_env()?);
    let retrieved = format_instant(fetched_at)[..10].to_string();
    let mut rows = Vec::with_capacity(instances.len());
    let mut pages = 0;
    let mut publications: Vec<String> = Vec::new();
    for instance in &instances {
        let fetched = aws::fetch_instance(&client, &settings, instance, &region).await?;
        pages += fetched.pages;
        let (product, price) = single_price(instance, &region, &fetched.products)
            .map_err(|e| anyhow::anyhow!("{e}; nothing stored"))?;
        let current = book.lookup("aws", &region, instance, effective);
        let published = product.publication_date.clone().unwrap_or_default();
        if !published.is_empty() && !publications.contains(&published) {
            publications.push(published.clone());
        }
        rows.push(InstancePrice {
            provider: "aws".to_string(),
            region: region.clone(),
            instance: instance.clone(),
            vcpus: product.vcpus,
            memory_gib: product.memory_gib,
            gpus: product.gpus,
            // The Price List does not name GPU models; keep the one the tables already give.
            gpu_model: current
                .filter(|q| q.row.gpus == product.gpus)
                .and_then(|q| q.row.gpu_model.clone()),
            gpu_memory_gib: product
                .gpu_memory_gib
                .or_else(|| current.and_then(|q| q.row.gpu_memory_gib)),
            price_per_hour: price,
            source: Some(format!(
                "AWS Price List GetProducts, sku {}, offer version {}, published {}",
                product.sku,
                product.version.as_deref().unwrap_or("?"),
                if published.is_empty() {
                    "?"
                } else {
                    &published
                }
            )),
            retrieved: Some(retrieved.clone()),
            note: None,
        });
    }
    let version = chrono::DateTime::from_timestamp(fetched_at, 0)
        .map(|t| t.format("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_else(|| fetched_at.to_string());
    let table = PriceTable::new(
        AWS_TABLE.to_string(),
        version,
        effective,
        Currency::new("usd"),
        format!(
            "AWS Price List API GetProducts at {} (AmazonEC2, Linux, shared tenancy, on-demand, \
             {region}); offer published {}; fetched {}",
            settings.endpoint_shown(),
            if publications.is_empty() {
                "?".to_string()
            } else {
                publications.join(", ")
            },
            format_instant(fetched_at)
        ),
        None,
        rows,
    )?;

    writeln!(
        out,
        "AWS Price List API at {}: {} instance types in {region} ({pages} pages)",
        settings.endpoint_shown(),
        instances.len()
    )?;
    let mut diff = Table::new(
        &["instance", "current", "from", "new", "change"],
        &["current", "new", "change"],
    );
    for row in &table.prices {
        let current = book.lookup("aws", &region, &row.instance, effective);
        diff.push(vec![
            row.instance.clone(),
            current
                .map(|q| q.price_per_hour.to_string())
                .unwrap_or_else(|| "-".to_string()),
            current.map(|q| q.version.to_string()).unwrap_or_default(),
            row.price_per_hour.to_string(),
            match current {
                None => "new".to_string(),
                Some(q) => change(q.price_per_hour, row.price_per_hour),
            },
        ]);
    }
    diff.write_table(out)?;
    if effective < fetched_at {
        eprintln!(
            "warning: --effective {} is in the past: jobs that started since then are priced \
             anew when their records are imported or collected again",
            format_instant(effective)
        );
    }
    if args.dry_run {
        writeln!(
            out,
            "dry run: nothing stored (would store {})",
            summary(&table)
        )?;
        return Ok(());
    }
    let (stored, table) = store(app, table, Origin::Aws).await?;
    if stored {
        writeln!(out, "stored price table {}", summary(&table))?;
    } else {
        writeln!(
            out,
            "price table {} is already stored with the same content; nothing changed",
            table.label()
        )?;
    }
    Ok(())
}

/// `new - old`, exactly, with a sign: `+0.005`, `-1.5`, `0`.
fn change(old: Decimal, new: Decimal) -> String {
    let scale = old.scale().max(new.scale());
    let widen = |d: Decimal| d.mantissa() * 10i128.pow(scale - d.scale());
    let delta = widen(new) - widen(old);
    match Decimal::new(delta, scale) {
        Some(d) if delta > 0 => format!("+{d}"),
        Some(d) => d.to_string(),
        None => "?".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_exact_and_signed() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(change(d("0.17"), d("0.175")), "+0.005");
        assert_eq!(change(d("32.7726"), d("21.957642")), "-10.814958");
        assert_eq!(change(d("1"), d("1.000")), "0");
    }
}
