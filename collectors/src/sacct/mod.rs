//! `sacct --parsable2` / `--parsable` output to [`UsageRecord`]s, streaming.
//!
//! Shared by `bursar import` and the sacct collector. [`SacctReader`] reads the header (or
//! takes the caller's column list), checks that the columns bursar needs are there, then yields
//! one [`SacctLine`] per data line: a billable allocation record, a step (not billed), or a
//! [`Quarantined`] line with its line number and the reason in words. A bad line never stops
//! the rest of the input; only an I/O error does.
//!
//! What is a record (see DESIGN.md, "Pricing semantics"): every allocation line — array tasks
//! and het components each have their own `JobIDRaw`, and each requeued run is its own line
//! under `--duplicates` (same `JobIDRaw`, different `Submit`). Lines whose job id contains a
//! `.` (`1.batch`, `8.0`, `7_0.batch`, `123.extern`) are steps.
//!
//! Decisions a caller should know:
//! - a job that never started (`Start=None`) allocated nothing, even though sacct prints its
//!   requested CPUs under AllocCPUS; `AllocCPUS`/`NNodes` stand in for an absent
//!   AllocTRES only for jobs that started;
//! - without a `User` column the user is `""`; with one, an empty user is quarantined;
//! - local times that occur twice (end of daylight-saving time) are read as the earlier
//!   instant, local times that do not exist are quarantined (see [`SacctTimeZone`]);
//! - a line with surplus fields is accepted only when the format has exactly one free-text
//!   column (JobName, Comment, SubmitLine, WorkDir, …): the surplus can then only be `|`
//!   inside it, and the pieces are joined back;
//! - blank lines, and lines repeating the header (concatenated outputs), are skipped; only
//!   leading `#` lines are comments.
//!
//! Speed (the 1,000,000-record import path): lines are parsed in place in the reader's buffer,
//! split into byte ranges eight bytes at a time, columns are resolved once, times take a
//! hand-written path with one zone lookup per distinct local hour, and recent AllocTRES
//! strings are memoized; the only allocations per record are the record's own.

mod columns;
pub mod runner;
mod time;
mod values;

use std::fmt;
use std::io::{self, BufRead};

use bursar_pricing::tres::TresError;
use bursar_pricing::{JobState, Tres, UsageRecord};

pub use columns::{format_columns, MissingColumns};
pub use time::{SacctTimeZone, UnknownTimeZone};

use columns::{Columns, Elapsed};
use time::{TimeError, TimeParser};

pub(crate) use time::format_iso_utc;

/// How to read one sacct output.
#[derive(Debug, Clone, Default)]
pub struct SacctOptions {
    /// The cluster of lines without a `Cluster` value (`--cluster` on the command line).
    pub default_cluster: Option<String>,
    /// The zone sacct's local times are in (default: this machine's, as sacct uses).
    pub time_zone: SacctTimeZone,
    /// The columns of headerless output (`sacct -n`), in order; `None` reads a header line.
    pub columns: Option<Vec<String>>,
}

impl SacctOptions {
    pub fn new() -> SacctOptions {
        SacctOptions::default()
    }

    /// Lines without a `Cluster` value belong to `cluster`.
    pub fn cluster(mut self, cluster: impl Into<String>) -> SacctOptions {
        self.default_cluster = Some(cluster.into());
        self
    }

    pub fn time_zone(mut self, zone: SacctTimeZone) -> SacctOptions {
        self.time_zone = zone;
        self
    }

    /// The input has no header; these are its columns in order.
    pub fn columns<I, S>(mut self, columns: I) -> SacctOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// The input has no header and was produced with `--format=<format>`.
    pub fn format(self, format: &str) -> SacctOptions {
        self.columns(format_columns(format))
    }
}

/// What went wrong with the input as a whole (a bad line is [`Quarantined`] instead).
#[derive(Debug, thiserror::Error)]
pub enum SacctError {
    #[error("reading sacct output: {0}")]
    Io(#[from] io::Error),
    #[error("sacct output is empty: no header line (pass the column list for headerless output)")]
    NoHeader,
    #[error("{0}")]
    MissingColumns(#[from] MissingColumns),
}

/// A line that could not be turned into a record, kept for the operator to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// 1-based line number in the input, counting comment and header lines.
    pub line: u64,
    /// What is wrong, naming the column and value: `negative ElapsedRaw -5`.
    pub reason: String,
    /// The line as read, without its line ending.
    pub raw: String,
}

impl fmt::Display for Quarantined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// One data line of sacct output.
// A record is the common case by far: boxing it would cost an allocation per record to save
// stack space in a value that is moved once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SacctLine {
    /// A billable allocation.
    Record {
        line: u64,
        record: UsageRecord,
    },
    /// A job step (`1.batch`, `8.0`): its usage is inside its job's record.
    Step {
        line: u64,
    },
    Quarantined(Quarantined),
}

impl SacctLine {
    /// The 1-based line number the item came from.
    pub fn line(&self) -> u64 {
        match self {
            SacctLine::Record { line, .. } | SacctLine::Step { line } => *line,
            SacctLine::Quarantined(q) => q.line,
        }
    }
}

/// Streams [`SacctLine`]s out of sacct output, in constant memory.
///
/// ```
/// use bursar_collectors::sacct::{SacctLine, SacctOptions, SacctReader, SacctTimeZone};
///
/// let text = "JobIDRaw|JobID|Cluster|Account|User|State|Submit|Start|End|ElapsedRaw|AllocTRES\n\
///             16|7_0|onprem|physics|alice|COMPLETED|2026-11-22T00:13:11|2026-11-22T00:13:12|\
///             2026-11-22T00:13:13|1|billing=1,cpu=1,mem=1000M,node=1\n\
///             16.batch|7_0.batch|onprem|physics||COMPLETED|2026-11-22T00:13:12|\
///             2026-11-22T00:13:12|2026-11-22T00:13:13|1|cpu=1,mem=1000M,node=1\n";
/// let options = SacctOptions::new().time_zone(SacctTimeZone::Utc);
/// let lines: Vec<SacctLine> = SacctReader::new(text.as_bytes(), options)?
///     .collect::<Result<_, _>>()?;
/// let SacctLine::Record { record, .. } = &lines[0] else { panic!() };
/// assert_eq!((record.job_id.as_str(), record.display_id.as_str()), ("16", "7_0"));
/// assert_eq!(lines[1], SacctLine::Step { line: 3 });
/// # Ok::<(), bursar_collectors::sacct::SacctError>(())
/// ```
pub struct SacctReader<R> {
    input: R,
    parser: LineParser,
    /// The header line as read, to skip it where concatenated outputs repeat it.
    header: Option<Vec<u8>>,
    buf: Vec<u8>,
    line: u64,
    /// `buf` holds a data line read while looking for a header.
    pending: bool,
    done: bool,
}

impl<R: BufRead> SacctReader<R> {
    /// Reads leading `#` comments and the header (unless `options.columns` is given) and checks
    /// that every required column is there, before any data line is read.
    pub fn new(mut input: R, options: SacctOptions) -> Result<SacctReader<R>, SacctError> {
        let mut buf = Vec::with_capacity(1024);
        let mut line = 0;
        let found = loop {
            if !read_line(&mut input, &mut buf)? {
                break false;
            }
            line += 1;
            if !is_blank(&buf) && buf[0] != b'#' {
                break true;
            }
        };

        let (columns, trailing, header, pending) = match options.columns {
            Some(names) => {
                // Headerless, but tolerate a header that repeats the given columns.
                let is_header = found && {
                    let (fields, _) = header_fields(&buf);
                    fields.len() == names.len()
                        && fields
                            .iter()
                            .zip(&names)
                            .all(|(a, b)| a.trim().eq_ignore_ascii_case(b.trim()))
                };
                let columns = Columns::resolve(names, false)?;
                if is_header {
                    let (_, trailing) = header_fields(&buf);
                    (columns, Some(trailing), Some(buf.clone()), false)
                } else {
                    (columns, None, None, found)
                }
            }
            None => {
                if !found {
                    return Err(SacctError::NoHeader);
                }
                let (names, trailing) = header_fields(&buf);
                (
                    Columns::resolve(names, true)?,
                    Some(trailing),
                    Some(buf.clone()),
                    false,
                )
            }
        };
        Ok(SacctReader {
            input,
            parser: LineParser {
                columns,
                trailing,
                count_word: if header.is_some() {
                    "header"
                } else {
                    "column list"
                },
                default_cluster: options.default_cluster,
                times: TimeParser::new(options.time_zone),
                tres: TresCache::new(),
                fields: Vec::with_capacity(32),
            },
            header,
            buf,
            line,
            pending,
            done: false,
        })
    }

    /// The column names, from the header or as given.
    pub fn columns(&self) -> &[String] {
        &self.parser.columns.names
    }

    /// The number of the last line read (1-based).
    pub fn line_number(&self) -> u64 {
        self.line
    }
}

impl<R: BufRead> Iterator for SacctReader<R> {
    type Item = Result<SacctLine, SacctError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.pending {
            self.pending = false;
            return Some(Ok(self.parser.line(self.line, &self.buf)));
        }
        loop {
            // A line wholly inside the reader's buffer is parsed where it lies; only a line
            // that straddles a refill is copied out.
            let available = match self.input.fill_buf() {
                Ok(available) => available,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    self.done = true;
                    return Some(Err(err.into()));
                }
            };
            if available.is_empty() {
                self.done = true;
                return None;
            }
            if let Some(newline) = memchr::memchr(b'\n', available) {
                self.line += 1;
                let line = trim_cr(&available[..newline]);
                let item = (!skipped(line, self.header.as_deref()))
                    .then(|| self.parser.line(self.line, line));
                self.input.consume(newline + 1);
                match item {
                    Some(item) => return Some(Ok(item)),
                    None => continue,
                }
            }
            match read_line(&mut self.input, &mut self.buf) {
                Ok(true) => self.line += 1,
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(err) => {
                    self.done = true;
                    return Some(Err(err.into()));
                }
            }
            if !skipped(&self.buf, self.header.as_deref()) {
                return Some(Ok(self.parser.line(self.line, &self.buf)));
            }
        }
    }
}

/// Blank lines, and the header where concatenated outputs repeat it.
fn skipped(line: &[u8], header: Option<&[u8]>) -> bool {
    is_blank(line) || header == Some(line)
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Everything in one input, for callers that want it all at once (tests, small imports).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SacctContents {
    pub records: Vec<UsageRecord>,
    pub steps: u64,
    pub quarantined: Vec<Quarantined>,
}

/// Reads a whole input into [`SacctContents`].
pub fn read_all<R: BufRead>(input: R, options: SacctOptions) -> Result<SacctContents, SacctError> {
    let mut contents = SacctContents::default();
    for item in SacctReader::new(input, options)? {
        match item? {
            SacctLine::Record { record, .. } => contents.records.push(record),
            SacctLine::Step { .. } => contents.steps += 1,
            SacctLine::Quarantined(q) => contents.quarantined.push(q),
        }
    }
    Ok(contents)
}

/// Reads one line into `buf` without its `\n` / `\r\n`; `false` at the end of input.
fn read_line<R: BufRead>(input: &mut R, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    if input.read_until(b'\n', buf)? == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    }
    let len = trim_cr(buf).len();
    buf.truncate(len);
    Ok(true)
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// A header line's column names, and whether it ends in `|` (`--parsable`).
fn header_fields(line: &[u8]) -> (Vec<String>, bool) {
    let text = String::from_utf8_lossy(line);
    let (body, trailing) = match text.strip_suffix('|') {
        Some(body) => (body, true),
        None => (&text[..], false),
    };
    (
        body.split('|').map(|s| s.trim().to_string()).collect(),
        trailing,
    )
}

/// Turns one data line into a record; the I/O-free half of the reader.
struct LineParser {
    columns: Columns,
    /// Lines end with `|` (`--parsable`): `Some(true)`; never: `Some(false)`; not known
    /// because there was no header: `None`, and a single empty extra field is dropped.
    trailing: Option<bool>,
    /// What the expected field count came from, for messages.
    count_word: &'static str,
    default_cluster: Option<String>,
    times: TimeParser,
    tres: TresCache,
    /// Byte ranges of the current line's fields, reused across lines.
    fields: Vec<(usize, usize)>,
}

/// Recently parsed TRES strings. A cluster's allocations repeat a few shapes (`cpu=1,mem=1000M,
/// node=1` …) and cloning a parsed vector costs half of parsing it again.
struct TresCache {
    slots: Vec<Option<(Box<str>, Tres)>>,
}

impl TresCache {
    const SLOTS: usize = 256;

    fn new() -> TresCache {
        TresCache {
            slots: vec![None; TresCache::SLOTS],
        }
    }

    fn parse(&mut self, text: &str) -> Result<Tres, TresError> {
        let slot = &mut self.slots[quick_hash(text.as_bytes()) % TresCache::SLOTS];
        if let Some((key, tres)) = slot {
            if **key == *text {
                return Ok(tres.clone());
            }
        }
        let tres = Tres::parse(text)?;
        *slot = Some((text.into(), tres.clone()));
        Ok(tres)
    }
}

/// A fast non-cryptographic hash (FxHash's mixing, eight bytes at a time).
fn quick_hash(bytes: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut chunks = bytes.chunks_exact(8);
    let mut hash = bytes.len() as u64;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
    for &byte in chunks.remainder() {
        hash = (hash.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
    }
    (hash >> 32) as usize
}

impl LineParser {
    /// One data line (without its line ending) as a [`SacctLine`].
    fn line(&mut self, line: u64, bytes: &[u8]) -> SacctLine {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => {
                return SacctLine::Quarantined(Quarantined {
                    line,
                    reason: "line is not valid UTF-8".to_string(),
                    raw: String::from_utf8_lossy(bytes).into_owned(),
                })
            }
        };
        match self.parse(text) {
            Ok(Some(record)) => SacctLine::Record { line, record },
            Ok(None) => SacctLine::Step { line },
            Err(reason) => SacctLine::Quarantined(Quarantined {
                line,
                reason,
                raw: text.to_string(),
            }),
        }
    }

    /// `Ok(Some)`: a record; `Ok(None)`: a step; `Err`: why the line is quarantined.
    fn parse(&mut self, text: &str) -> Result<Option<UsageRecord>, String> {
        self.split(text)?;
        let fields = &self.fields;
        let field = |i: usize| {
            let (a, b) = fields[i];
            &text[a..b]
        };
        let c = &self.columns;

        let job_id = field(c.id);
        if job_id.is_empty() {
            return Err(format!("no job id: {} is empty", c.names[c.id]));
        }
        if memchr::memchr(b'.', job_id.as_bytes()).is_some() {
            return Ok(None);
        }
        let display_id = match field(c.display) {
            "" => job_id,
            display => display,
        };

        let cluster = match c.cluster.map(field) {
            Some(cluster) if !cluster.is_empty() => cluster,
            found => match &self.default_cluster {
                Some(cluster) => cluster.as_str(),
                None if found.is_none() => {
                    return Err("no Cluster column and no --cluster given".to_string())
                }
                None => return Err("no cluster: Cluster is empty and no --cluster given".into()),
            },
        };
        let account = field(c.account);
        if account.is_empty() {
            return Err("no account: Account is empty".to_string());
        }
        // No User column at all is allowed (the charge still lands on the account); an empty
        // value in one is not: an allocation always has an owner.
        let user = match c.user.map(field) {
            Some("") => return Err("no user: User is empty".to_string()),
            Some(user) => user,
            None => "",
        };
        let state_text = field(c.state);
        let state: JobState = state_text.parse().map_err(|e| format!("{e}"))?;

        let zone = self.times.zone();
        let mut time = |column: usize| -> Result<Option<i64>, String> {
            let value = field(column);
            self.times.parse(value).map_err(|e| match e {
                TimeError::Unparsable => format!("unparsable {} time {value:?}", c.names[column]),
                TimeError::Nonexistent => format!(
                    "{} time {value:?} does not exist in {zone} (skipped by a daylight-saving \
                     change): is the time zone right?",
                    c.names[column]
                ),
            })
        };
        let submit = time(c.submit)?.ok_or_else(|| {
            format!(
                "no submit time: {} is {:?}",
                c.names[c.submit],
                field(c.submit)
            )
        })?;
        let start = match c.start {
            Some(i) => time(i)?,
            None => None,
        };
        let end = match c.end {
            Some(i) => time(i)?,
            None => None,
        };
        if let (Some(s), Some(e), Some(si), Some(ei)) = (start, end, c.start, c.end) {
            if s > e {
                return Err(format!(
                    "{} {} is after {} {}",
                    c.names[si],
                    field(si),
                    c.names[ei],
                    field(ei)
                ));
            }
        }

        let elapsed_s = match c.elapsed {
            Elapsed::Raw(i) => values::elapsed_raw(&c.names[i], field(i))?,
            Elapsed::Clock(i) => values::elapsed_clock(&c.names[i], field(i))?,
        };
        let elapsed_us = elapsed_s
            .checked_mul(1_000_000)
            .ok_or_else(|| format!("elapsed time {elapsed_s} s is too large"))?;

        let mut alloc = match c.alloc_tres.map(field) {
            None | Some("") => Tres::new(),
            Some(text) => self
                .tres
                .parse(text)
                .map_err(|e| format!("bad {} {text:?}: {e}", c.names[c.alloc_tres.unwrap_or(0)]))?,
        };
        // Older or trimmed formats carry only AllocCPUS. A job that never started allocated
        // nothing, whatever AllocCPUS says (up to 23.02.4 sacct prints the request there, 0
        // from 23.02.5); nor did one whose
        // AllocTRES is printed empty (22.05 gives a job cancelled while pending a Start equal
        // to its End, with the request under AllocCPUS).
        if c.alloc_tres.is_none() && start.is_some() {
            if let Some(i) = c.alloc_cpus {
                let cpus = values::count(&c.names[i], field(i))?;
                if cpus > 0 {
                    alloc.set("cpu", cpus);
                    if let Some(n) = c.nnodes {
                        let nodes = values::count(&c.names[n], field(n))?;
                        if nodes > 0 {
                            alloc.set("node", nodes);
                        }
                    }
                }
            }
        }

        let time_limit_min = match (c.timelimit_raw, c.timelimit) {
            (Some(i), _) => values::time_limit_raw(&c.names[i], field(i))?,
            (None, Some(i)) => values::time_limit_clock(&c.names[i], field(i))?,
            (None, None) => None,
        };
        let optional = |column: Option<usize>| {
            column
                .map(field)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };

        Ok(Some(UsageRecord {
            cluster: cluster.to_string(),
            job_id: job_id.to_string(),
            display_id: display_id.to_string(),
            submit,
            start,
            end,
            account: account.to_string(),
            user: user.to_string(),
            partition: optional(c.partition),
            qos: optional(c.qos),
            state,
            elapsed_us,
            alloc,
            time_limit_min,
            job_name: optional(c.job_name),
            price_per_hour_micros: None,
            blocks: None,
        }))
    }

    /// Splits `text` into `self.fields`, checking the count against the columns; a surplus
    /// that can only come from `|` inside the one free-text column is joined back into it.
    fn split(&mut self, text: &str) -> Result<(), String> {
        let expected = self.columns.count();
        let body = match self.trailing {
            Some(true) => text.strip_suffix('|').unwrap_or(text),
            _ => text,
        };
        split_fields(body.as_bytes(), &mut self.fields);
        if self.trailing.is_none() && self.fields.len() == expected + 1 && body.ends_with('|') {
            self.fields.pop();
        }

        let found = self.fields.len();
        if found < expected {
            return Err(format!("truncated line: {found} of {expected} fields"));
        }
        if found > expected {
            let Some(column) = self.columns.free_text else {
                return Err(format!(
                    "{found} fields, {} has {expected} (a '|' inside a field?)",
                    self.count_word
                ));
            };
            let extra = found - expected;
            self.fields[column].1 = self.fields[column + extra].1;
            self.fields.drain(column + 1..=column + extra);
        }
        Ok(())
    }
}

/// Byte ranges of the `|`-separated fields of `line`, into `fields` (cleared first).
///
/// Fields average under ten bytes, so a SIMD search restarted for each one spends its time
/// starting up; this finds every `|` of eight bytes at once (SWAR) and walks the bit mask.
fn split_fields(line: &[u8], fields: &mut Vec<(usize, usize)>) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const BARS: u64 = 0x7c7c_7c7c_7c7c_7c7c; // b'|' in every byte
    fields.clear();
    let mut start = 0;
    let mut chunks = line.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])) ^ BARS;
        // 0x80 in exactly the bytes of `word` that are zero, i.e. where the line has a '|'
        let mut found = !(((word & LOW7).wrapping_add(LOW7)) | word | LOW7);
        while found != 0 {
            let bar = at + (found.trailing_zeros() / 8) as usize;
            fields.push((start, bar));
            start = bar + 1;
            found &= found - 1;
        }
        at += 8;
    }
    for (offset, &byte) in chunks.remainder().iter().enumerate() {
        if byte == b'|' {
            fields.push((start, at + offset));
            start = at + offset + 1;
        }
    }
    fields.push((start, line.len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_str_split() {
        let mut fields = Vec::new();
        for line in [
            "",
            "|",
            "a",
            "||||||||||||||||||",
            "1|1|onprem|physics|alice|batch|normal|COMPLETED|0:0",
            "abcdefgh|ijklmnop|",
            "\u{7c}\u{fc}|\u{1F600}|x\u{ff}|",
        ] {
            split_fields(line.as_bytes(), &mut fields);
            let got: Vec<&str> = fields.iter().map(|&(a, b)| &line[a..b]).collect();
            assert_eq!(got, line.split('|').collect::<Vec<_>>(), "{line:?}");
        }
    }

    const HEADER: &str = "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|Submit|Start|End|ElapsedRaw|AllocTRES|AllocCPUS|NNodes|TimelimitRaw|JobName";

    fn parse(text: &str) -> Vec<SacctLine> {
        SacctReader::new(
            text.as_bytes(),
            SacctOptions::new().time_zone(SacctTimeZone::Utc),
        )
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }

    fn one(line: &str) -> SacctLine {
        let mut lines = parse(&format!("{HEADER}\n{line}\n"));
        assert_eq!(lines.len(), 1);
        lines.remove(0)
    }

    fn reason(line: &str) -> String {
        match one(line) {
            SacctLine::Quarantined(q) => q.reason,
            other => panic!("{line} was not quarantined: {other:?}"),
        }
    }

    const GOOD: &str = "5|5|onprem|physics|alice|batch|normal|CANCELLED by 1001|2026-11-22T00:13:11|2026-11-22T00:13:12|2026-11-22T00:13:14|2|billing=1,cpu=1,mem=1000M,node=1|1|1|UNLIMITED|cancel-running";

    #[test]
    fn a_plain_record() {
        let SacctLine::Record { line, record } = one(GOOD) else {
            panic!()
        };
        assert_eq!(line, 2);
        assert_eq!(record.state, JobState::Cancelled);
        assert_eq!(record.elapsed_us, 2_000_000);
        assert_eq!(record.end.unwrap() - record.start.unwrap(), 2);
        assert_eq!(record.alloc.mem_mb(), 1000);
        assert_eq!(record.time_limit_min, None);
        assert_eq!(record.job_name.as_deref(), Some("cancel-running"));
    }

    #[test]
    fn reasons_name_the_column_and_value() {
        let with = |column: usize, value: &str| {
            let mut fields: Vec<&str> = GOOD.split('|').collect();
            fields[column] = value;
            fields.join("|")
        };
        assert_eq!(reason(&with(3, "")), "no account: Account is empty");
        assert_eq!(reason(&with(4, "")), "no user: User is empty");
        assert_eq!(
            reason(&with(7, "EXPLODED")),
            "unknown job state \"EXPLODED\""
        );
        assert_eq!(
            reason(&with(8, "Unknown")),
            "no submit time: Submit is \"Unknown\""
        );
        assert_eq!(
            reason(&with(9, "2026-11-22T25:00:00")),
            "unparsable Start time \"2026-11-22T25:00:00\""
        );
        assert_eq!(
            reason(&with(9, "2026-11-22T00:13:15")),
            "Start 2026-11-22T00:13:15 is after End 2026-11-22T00:13:14"
        );
        assert_eq!(reason(&with(11, "-3")), "negative ElapsedRaw -3");
        assert_eq!(
            reason(&with(12, "cpu=x")),
            "bad AllocTRES \"cpu=x\": TRES cpu has an invalid value \"x\""
        );
        assert_eq!(
            reason(&with(15, "soon")),
            "TimelimitRaw \"soon\" is neither minutes nor UNLIMITED"
        );
        assert_eq!(reason(&with(0, "")), "no job id: JobIDRaw is empty");
        assert_eq!(
            reason(&with(2, "")),
            "no cluster: Cluster is empty and no --cluster given"
        );
        assert_eq!(reason("5|5|onprem"), "truncated line: 3 of 17 fields");
    }

    #[test]
    fn an_empty_alloc_tres_means_nothing_was_allocated() {
        // 22.05 prints a job cancelled while pending with Start = End and its request under
        // AllocCPUS, but AllocTRES empty: it allocated nothing.
        let SacctLine::Record { record, .. } =
            one(&GOOD.replace("billing=1,cpu=1,mem=1000M,node=1", ""))
        else {
            panic!()
        };
        assert!(record.alloc.is_empty());
    }

    #[test]
    fn alloc_cpus_stands_in_when_there_is_no_alloc_tres_column() {
        let format = "JobIDRaw,Account,User,State,Submit,Start,End,ElapsedRaw,AllocCPUS,NNodes";
        let text = "7|physics|alice|COMPLETED|2026-11-22T00:13:11|2026-11-22T00:13:12|2026-11-22T00:13:14|2|4|1\n";
        let options = SacctOptions::new()
            .cluster("onprem")
            .time_zone(SacctTimeZone::Utc)
            .format(format);
        let contents = read_all(text.as_bytes(), options).unwrap();
        assert_eq!(
            contents.records[0].alloc,
            Tres::parse("cpu=4,node=1").unwrap()
        );
        let never = text.replace("2026-11-22T00:13:12", "None");
        let options = SacctOptions::new()
            .cluster("onprem")
            .time_zone(SacctTimeZone::Utc)
            .format(format);
        let contents = read_all(never.as_bytes(), options).unwrap();
        assert!(contents.records[0].alloc.is_empty());
    }

    #[test]
    fn steps_are_recognized_before_anything_else_is_checked() {
        assert_eq!(
            one("8.0|8.0|onprem|physics||||COMPLETED|2026-11-22T00:13:12|2026-11-22T00:13:12|2026-11-22T00:13:12|0|cpu=2|2|1||hostname"),
            SacctLine::Step { line: 2 }
        );
    }

    #[test]
    fn crlf_blank_lines_and_repeated_headers() {
        let text = format!("# comment\r\n\r\n{HEADER}\r\n{GOOD}\r\n\r\n{HEADER}\r\n{GOOD}\r\n");
        let lines = parse(&text);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines.iter().map(SacctLine::line).collect::<Vec<_>>(),
            vec![4, 7]
        );
        assert!(matches!(lines[1], SacctLine::Record { .. }));
    }

    #[test]
    fn invalid_utf8_is_quarantined() {
        let mut text = format!("{HEADER}\n").into_bytes();
        text.extend_from_slice(&GOOD.as_bytes()[..GOOD.len() - 3]);
        text.extend_from_slice(b"\xff\xfe\n");
        let lines: Vec<_> = SacctReader::new(&text[..], SacctOptions::new())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let SacctLine::Quarantined(q) = &lines[0] else {
            panic!()
        };
        assert_eq!(q.reason, "line is not valid UTF-8");
        assert!(q.raw.ends_with("cancel-runn\u{fffd}\u{fffd}"));
    }

    #[test]
    fn empty_input_has_no_header() {
        assert!(matches!(
            SacctReader::new(&b"# only a comment\n"[..], SacctOptions::new()),
            Err(SacctError::NoHeader)
        ));
        let headerless = SacctOptions::new().format("JobID,Account,State,Submit,Elapsed,AllocCPUS");
        assert_eq!(SacctReader::new(&b""[..], headerless).unwrap().count(), 0);
    }
}
