//! `bursar import`: a sacct dump → priced usage → the ledger, with quarantine.
//!
//! Parsing and pricing run on a blocking thread and hand batches to the ledger through a small
//! channel, so the two cores work at once and memory stays flat in the size of the input.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::BufRead;

use anyhow::Context;
use bursar_collectors::sacct::{SacctLine, SacctOptions, SacctReader, SacctTimeZone};
use bursar_ledger::{PostOutcome, QuarantineItem, UsageCharge};
use bursar_pricing::{ClusterPricing, PriceBook, UsageRecord};

use crate::app::App;

/// Records per ledger transaction.
pub const BATCH: usize = 10_000;

/// What an import did.
#[derive(Debug, Default, Clone)]
pub struct ImportSummary {
    pub records: u64,
    pub steps: u64,
    pub quarantined: u64,
    pub charged: u64,
    pub adjusted: u64,
    pub unchanged: u64,
    pub settled_holds: u64,
    pub created_accounts: BTreeSet<String>,
    /// Sum of the records' charges per currency (micros), whether new or already posted.
    pub amounts: HashMap<String, i64>,
}

impl ImportSummary {
    fn add(&mut self, outcome: PostOutcome) {
        self.charged += outcome.charged;
        self.adjusted += outcome.adjusted;
        self.unchanged += outcome.unchanged;
        self.settled_holds += outcome.settled_holds;
        self.created_accounts.extend(outcome.created_accounts);
    }
}

/// Where the records come from and how to read them.
pub struct ImportSource {
    /// Name recorded with quarantined lines (the file name, or `stdin`).
    pub name: String,
    pub cluster: Option<String>,
    pub time_zone: SacctTimeZone,
    pub columns: Option<Vec<String>>,
}

enum Batch {
    Charges(Vec<UsageCharge>, Vec<QuarantineItem>),
}

/// Reads sacct text from `input`, prices every record and posts it. Re-running it on the same
/// (or an overlapping) input changes nothing; a changed record posts an adjustment.
pub async fn import_sacct(
    app: &App,
    input: Box<dyn BufRead + Send>,
    source: ImportSource,
    posted_at: i64,
) -> anyhow::Result<ImportSummary> {
    let mut options = SacctOptions::new().time_zone(source.time_zone);
    if let Some(cluster) = &source.cluster {
        anyhow::ensure!(
            app.pricing.contains_key(cluster),
            "cluster {cluster:?} is not configured (configured: {})",
            app.pricing.keys().cloned().collect::<Vec<_>>().join(", ")
        );
        options = options.cluster(cluster.clone());
    }
    if let Some(columns) = &source.columns {
        options = options.columns(columns.iter().cloned());
    }
    let reader = SacctReader::new(input, options).context("cannot read the sacct header")?;

    let (tx, mut rx) = tokio::sync::mpsc::channel::<anyhow::Result<Batch>>(2);
    let pricing = app.pricing.clone();
    let prices = app.price_book();
    let source_name = source.name.clone();
    let producer = tokio::task::spawn_blocking(
        move || -> anyhow::Result<(u64, u64, HashMap<String, i64>)> {
            let mut pricer = Pricer {
                pricing: &pricing,
                prices: &prices,
                amounts: HashMap::new(),
                going_on: HashSet::new(),
            };
            let mut steps = 0;
            let mut records = 0;
            let mut charges = Vec::with_capacity(BATCH);
            let mut quarantine = Vec::new();
            for line in reader {
                let line = match line {
                    Ok(line) => line,
                    Err(e) => {
                        let _ = tx.blocking_send(Err(
                            anyhow::Error::new(e).context("reading the sacct input")
                        ));
                        break;
                    }
                };
                match line {
                    SacctLine::Step { .. } => steps += 1,
                    SacctLine::Quarantined(q) => quarantine.push(QuarantineItem {
                        source: source_name.clone(),
                        line: Some(q.line),
                        reason: q.reason,
                        raw: q.raw,
                    }),
                    SacctLine::Record { line, record } => match pricer.price(&record) {
                        Ok(charge) => {
                            records += 1;
                            charges.push(charge);
                        }
                        Err(reason) => quarantine.push(QuarantineItem {
                            source: source_name.clone(),
                            line: Some(line),
                            reason,
                            raw: describe(&record),
                        }),
                    },
                }
                if charges.len() >= BATCH {
                    let full = std::mem::replace(&mut charges, Vec::with_capacity(BATCH));
                    if tx
                        .blocking_send(Ok(Batch::Charges(full, std::mem::take(&mut quarantine))))
                        .is_err()
                    {
                        return Ok((records, steps, pricer.amounts));
                    }
                }
            }
            if !charges.is_empty() || !quarantine.is_empty() {
                let _ = tx.blocking_send(Ok(Batch::Charges(charges, quarantine)));
            }
            Ok((records, steps, pricer.amounts))
        },
    );

    let mut summary = ImportSummary::default();
    let mut failure = None;
    while let Some(batch) = rx.recv().await {
        match batch {
            Ok(Batch::Charges(charges, quarantine)) => {
                if !quarantine.is_empty() {
                    summary.quarantined += quarantine.len() as u64;
                    app.ledger
                        .quarantine_add(&quarantine)
                        .await
                        .context("recording quarantined lines")?;
                }
                if !charges.is_empty() {
                    let outcome = app
                        .ledger
                        .post_usage(&charges, posted_at)
                        .await
                        .context("posting charges")?;
                    summary.add(outcome);
                }
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    drop(rx);
    let (records, steps, amounts) = producer.await.context("the import thread panicked")??;
    if let Some(e) = failure {
        return Err(e);
    }
    summary.records = records;
    summary.steps = steps;
    summary.amounts = amounts;
    Ok(summary)
}

pub(crate) struct Pricer<'a> {
    pub pricing: &'a HashMap<String, ClusterPricing>,
    pub prices: &'a PriceBook,
    /// Sum of the priced records' charges per currency (micros).
    pub amounts: HashMap<String, i64>,
    /// Jobs whose records are not final whatever their state: the submissions of a dstack run
    /// that goes on (a retry follows a lost spot instance or a failure), which end the job
    /// only with the run.
    pub going_on: HashSet<String>,
}

impl Pricer<'_> {
    /// Prices one record; an error is the reason it goes to quarantine.
    pub fn price(&mut self, record: &UsageRecord) -> Result<UsageCharge, String> {
        let Some(pricing) = self.pricing.get(&record.cluster) else {
            return Err(format!("cluster {:?} is not configured", record.cluster));
        };
        // The ledger refuses a whole batch for one bad name: check here, quarantine the record.
        bursar_ledger::names::check_account(&record.account).map_err(|e| e.to_string())?;
        if !record.user.is_empty() {
            bursar_ledger::names::check_user(&record.user).map_err(|e| e.to_string())?;
        }
        let mut charge = pricing
            .charge(record, self.prices)
            .map_err(|e| e.to_string())?;
        if self.going_on.contains(&record.job_id) {
            charge.is_final = false;
        }
        if charge.amount.micros < 0 {
            return Err(format!(
                "the charge is negative ({} micros): negative billing weights are not supported",
                charge.amount.micros
            ));
        }
        let currency = charge.amount.currency.clone();
        let total = self
            .amounts
            .entry(currency.as_str().to_string())
            .or_insert(0);
        *total = total.saturating_add(charge.amount.micros);
        Ok(usage_charge(record, charge))
    }
}

/// The ledger's view of a priced record. The revision is a hash of everything that decides the
/// charge, so the same record imported again is recognised and a changed one is adjusted.
pub fn usage_charge(record: &UsageRecord, charge: bursar_pricing::Charge) -> UsageCharge {
    let note = charge.reason.map(|r| r.to_string());
    let price_version = charge.price_version.as_deref().map(str::to_string);
    let revision = revision(
        record,
        charge.amount.micros,
        charge.is_final,
        price_version.as_deref(),
    );
    UsageCharge {
        cluster: record.cluster.clone(),
        job_id: record.job_id.clone(),
        display_id: record.display_id.clone(),
        submit: record.submit,
        revision,
        account: record.account.clone(),
        user: record.user.clone(),
        partition: record.partition.clone(),
        qos: record.qos.clone(),
        state: record.state.as_str().to_string(),
        is_final: charge.is_final,
        currency: charge.amount.currency,
        amount_micros: charge.amount.micros,
        effective_at: record.effective_at(),
        price_version,
        note,
    }
}

fn revision(
    record: &UsageRecord,
    micros: i64,
    is_final: bool,
    price_version: Option<&str>,
) -> String {
    use std::fmt::Write;
    let mut canonical = String::with_capacity(160);
    let _ = write!(
        canonical,
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
        record.state.as_str(),
        record.start.unwrap_or(0),
        record.end.unwrap_or(0),
        record.elapsed_us,
        record.alloc,
        record.account,
        record.user,
        record.partition.as_deref().unwrap_or(""),
        record.qos.as_deref().unwrap_or(""),
        micros,
        is_final,
        price_version.unwrap_or(""),
        record.price_per_hour_micros.unwrap_or(0),
    );
    let hash = blake3::hash(canonical.as_bytes());
    hash.to_hex()[..16].to_string()
}

/// A record as text, for the quarantine when the line itself is no longer at hand.
pub(crate) fn describe(record: &UsageRecord) -> String {
    format!(
        "cluster={} job={} ({}) account={} user={} partition={} qos={} state={} elapsed_us={} alloc={}",
        record.cluster,
        record.job_id,
        record.display_id,
        record.account,
        record.user,
        record.partition.as_deref().unwrap_or(""),
        record.qos.as_deref().unwrap_or(""),
        record.state,
        record.elapsed_us,
        record.alloc
    )
}
