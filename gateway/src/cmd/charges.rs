//! `bursar charges`: what each job costs, one line per job record. A window (`--from/--to`)
//! reads its days and those jobs' entries; without one, every job the cluster (or the ledger)
//! ever charged is read a page of jobs at a time and CSV and JSON are written as they come,
//! so memory stays bounded by the page however long the ledger's history.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::app::App;
use crate::cli::ChargesArgs;
use crate::output::{write_csv_line, Format, Table};
use crate::reconcile::{job_postings, JobPosting};
use crate::timefmt::{format_instant, parse_instant};
use bursar_ledger::JournalEntry;

use super::money;

/// Job identities one read of the whole listing brings.
const JOBS_PER_PAGE: u32 = 10_000;

const HEADERS: [&str; 11] = [
    "cluster",
    "job",
    "account",
    "user",
    "partition",
    "qos",
    "state",
    "amount",
    "currency",
    "ended",
    "note",
];

pub(super) async fn charges(
    app: &App,
    args: ChargesArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let window = match (&args.from, &args.to) {
        (Some(from), Some(to)) => {
            let from = parse_instant(from).context("--from")?;
            let to = parse_instant(to).context("--to")?;
            if to <= from {
                bail!("--to must be after --from");
            }
            Some((from, to))
        }
        _ => None,
    };
    // With `-A`, what each job charged that account: its entries there (a job moved to
    // another account by a new revision shows 0 on the first, and a refund given on the
    // first stays there), as the account's balance counts them.
    let on_account = |e: &JournalEntry| args.account.as_ref().is_none_or(|a| a == &e.account);
    let mut rows = Rows::start(app, args.format, out)?;
    match window {
        Some((from, to)) => {
            // The jobs charged in the window, each whole; then those whose posting is in it.
            let jobs = crate::reconcile::window_jobs(app, args.cluster.as_deref(), from, to);
            let entries = crate::reconcile::entries_of(app, jobs.await?).await?;
            for job in job_postings(entries.into_iter().filter(on_account)) {
                if (from..to).contains(&job.effective_at) {
                    rows.push(&job)?;
                }
            }
        }
        None => {
            let mut after = 0;
            loop {
                let (entries, last) = app
                    .ledger
                    .jobs_journal_page(args.cluster.as_deref(), after, JOBS_PER_PAGE)
                    .await?;
                let Some(last) = last else { break };
                after = last;
                for job in job_postings(entries.into_iter().filter(on_account)) {
                    rows.push(&job)?;
                }
            }
        }
    }
    rows.finish()
}

/// The listing's rows as they come: CSV lines and JSON objects written at once, a table's
/// kept until all are in (its columns are as wide as their widest cell).
struct Rows<'a, W: Write> {
    app: &'a App,
    format: Format,
    out: &'a mut W,
    table: Table,
    written: usize,
}

impl<'a, W: Write> Rows<'a, W> {
    fn start(app: &'a App, format: Format, out: &'a mut W) -> anyhow::Result<Rows<'a, W>> {
        match format {
            Format::Csv => write_csv_line(out, &HEADERS)?,
            // As `write_json` prints `{"charges": [...]}`, a row at a time.
            Format::Json => write!(out, "{{\n  \"charges\": [")?,
            Format::Table => {}
        }
        Ok(Rows {
            app,
            format,
            out,
            table: Table::new(&HEADERS, &["amount"]),
            written: 0,
        })
    }

    fn push(&mut self, j: &JobPosting) -> anyhow::Result<()> {
        if self.format == Format::Json {
            let row = self.json(j);
            let text = serde_json::to_string_pretty(&row)?;
            let sep = if self.written == 0 { "" } else { "," };
            write!(self.out, "{sep}\n    {}", text.replace('\n', "\n    "))?;
        } else {
            let cells = self.cells(j);
            if self.format == Format::Csv {
                write_csv_line(self.out, &cells)?;
            } else {
                self.table.push(cells);
            }
        }
        self.written += 1;
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        match self.format {
            Format::Json if self.written == 0 => writeln!(self.out, "]\n}}")?,
            Format::Json => writeln!(self.out, "\n  ]\n}}")?,
            Format::Csv => {}
            Format::Table => self.table.write_table(self.out)?,
        }
        Ok(())
    }

    fn json(&self, j: &JobPosting) -> Value {
        json!({
            "cluster": j.cluster,
            "job_id": j.job_id,
            "display_id": j.display_id,
            "submit": format_instant(j.submit),
            "account": j.account,
            "user": j.user,
            "partition": j.partition,
            "qos": j.qos,
            "state": j.state,
            "currency": j.currency,
            "amount": money(self.app, &j.currency, j.amount),
            "effective_at": format_instant(j.effective_at),
            "reason": j.note,
        })
    }

    fn cells(&self, j: &JobPosting) -> Vec<String> {
        vec![
            j.cluster.clone(),
            j.display_id.clone(),
            j.account.clone(),
            j.user.clone(),
            j.partition.clone().unwrap_or_default(),
            j.qos.clone().unwrap_or_default(),
            j.state.clone(),
            money(self.app, &j.currency, j.amount),
            j.currency.to_string(),
            format_instant(j.effective_at),
            j.note.clone().unwrap_or_default(),
        ]
    }
}
