//! Instance price tables: YAML files versioned by effective date, and the [`PriceBook`] that
//! answers "what did this instance cost per hour at that moment, and by which table version".
//!
//! One file is one table version (format in `pricing/tables/README.md`):
//!
//! ```yaml
//! name: instances
//! version: "2026-11"
//! effective: 2026-01-01            # or 2026-01-01T00:00:00Z
//! currency: usd
//! source: "skypilot-catalog snapshots, cross-checked"
//! prices:
//!   - { provider: aws, region: us-east-1, instance: c5.xlarge, vcpus: 4, memory_gib: 8,
//!       price_per_hour: "0.17", source: "...", retrieved: 2026-11-21 }
//! ```
//!
//! A job is priced with the latest table whose `effective <= start` that lists its instance; the
//! table's `name@version` is recorded with the charge so finance can reproduce it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::decimal::Decimal;
use crate::money::Currency;
use crate::PricingError;

/// The tables shipped with bursar, embedded at build time.
const BUILTIN_TABLES: [(&str, &str); 1] = [(
    "tables/instances-2026-11.yaml",
    include_str!("../tables/instances-2026-11.yaml"),
)];

/// One instance's on-demand price in a table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InstancePrice {
    pub provider: String,
    pub region: String,
    pub instance: String,
    pub vcpus: u32,
    pub memory_gib: Decimal,
    #[serde(default)]
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gib: Option<Decimal>,
    /// Per instance-hour, in the table's currency.
    pub price_per_hour: Decimal,
    /// Where this row came from; the table's `source` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the price was read from its source (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The file form of a table, before validation (and, written back, its canonical form).
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    name: String,
    version: String,
    effective: String,
    currency: Currency,
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    prices: Vec<InstancePrice>,
}

/// One validated table version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceTable {
    pub name: String,
    pub version: String,
    /// Unix seconds (UTC) from which the table applies.
    pub effective: i64,
    pub currency: Currency,
    pub source: String,
    pub note: Option<String>,
    pub prices: Vec<InstancePrice>,
    /// `name@version`, shared by every charge priced from this table.
    label: Arc<str>,
}

impl PriceTable {
    /// Parses and validates one table; `origin` (a file name) goes into error messages.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<PriceTable, PricingError> {
        let error = |message: String| PricingError::Table {
            origin: origin.to_string(),
            message,
        };
        let file: TableFile = serde_yaml::from_str(text).map_err(|e| error(e.to_string()))?;
        let effective =
            parse_timestamp(&file.effective).map_err(|m| error(format!("effective: {m}")))?;
        if file.name.trim().is_empty() || file.version.trim().is_empty() {
            return Err(error("name and version must not be empty".to_string()));
        }
        validate_rows(&file.prices).map_err(error)?;
        let label = Arc::from(format!("{}@{}", file.name, file.version));
        Ok(PriceTable {
            name: file.name,
            version: file.version,
            effective,
            currency: file.currency,
            source: file.source,
            note: file.note,
            prices: file.prices,
            label,
        })
    }

    /// A table from its parts, validated as a file would be.
    pub fn new(
        name: String,
        version: String,
        effective: i64,
        currency: Currency,
        source: String,
        note: Option<String>,
        prices: Vec<InstancePrice>,
    ) -> Result<PriceTable, PricingError> {
        let label: Arc<str> = Arc::from(format!("{name}@{version}"));
        let error = |message: String| PricingError::Table {
            origin: label.to_string(),
            message,
        };
        if name.trim().is_empty() || version.trim().is_empty() {
            return Err(error("name and version must not be empty".to_string()));
        }
        validate_rows(&prices).map_err(error)?;
        Ok(PriceTable {
            name,
            version,
            effective,
            currency,
            source,
            note,
            prices,
            label,
        })
    }

    /// `name@version`, as recorded with each charge.
    pub fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// The table in the file format, canonically: `effective` as `YYYY-MM-DDTHH:MM:SSZ`,
    /// decimals as quoted exact strings, optional fields left out when absent. Two tables with
    /// the same content give the same text, and the text parses back to an equal table.
    pub fn to_yaml(&self) -> String {
        let file = TableFile {
            name: self.name.clone(),
            version: self.version.clone(),
            effective: format_timestamp(self.effective),
            currency: self.currency.clone(),
            source: self.source.clone(),
            note: self.note.clone(),
            prices: self.prices.clone(),
        };
        // Strings, integers, decimals (as strings) and lists of them: nothing serde_yaml can
        // refuse.
        serde_yaml::to_string(&file).expect("a price table serializes to YAML")
    }
}

fn validate_rows(rows: &[InstancePrice]) -> Result<(), String> {
    for (i, row) in rows.iter().enumerate() {
        let at = || {
            format!(
                "prices[{i}] ({} {} {})",
                row.provider, row.region, row.instance
            )
        };
        if row.provider.is_empty() || row.region.is_empty() || row.instance.is_empty() {
            return Err(format!(
                "{}: provider, region and instance are required",
                at()
            ));
        }
        if row.price_per_hour.is_negative() {
            return Err(format!("{}: price_per_hour is negative", at()));
        }
        if let Some(date) = &row.retrieved {
            parse_date(date).map_err(|m| format!("{}: retrieved: {m}", at()))?;
        }
        let duplicate = rows[..i].iter().any(|r| {
            (&r.provider, &r.region, &r.instance) == (&row.provider, &row.region, &row.instance)
        });
        if duplicate {
            return Err(format!("{}: listed twice", at()));
        }
    }
    Ok(())
}

/// What [`PriceBook::lookup`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceQuote<'a> {
    pub price_per_hour: Decimal,
    pub currency: &'a Currency,
    /// `name@version` of the table the price came from.
    pub version: &'a Arc<str>,
    pub row: &'a InstancePrice,
}

/// Every loaded table version, indexed for lookup by instance and time.
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    tables: Vec<PriceTable>,
    /// `(table, row)` positions sorted by (provider, region, instance, effective).
    index: Vec<(usize, usize)>,
}

impl PriceBook {
    /// An empty book.
    pub fn new() -> PriceBook {
        PriceBook::default()
    }

    /// The tables shipped in `pricing/tables/`.
    pub fn builtin() -> PriceBook {
        let mut book = PriceBook::new();
        for (origin, text) in BUILTIN_TABLES {
            // The shipped tables are parsed by this crate's tests; a failure here is a build
            // that skipped them, not a runtime condition.
            book.add_yaml_str(text, origin)
                .expect("shipped price tables are valid");
        }
        book
    }

    /// A book holding the one table in `text`.
    pub fn from_yaml_str(text: &str) -> Result<PriceBook, PricingError> {
        let mut book = PriceBook::new();
        book.add_yaml_str(text, "<string>")?;
        Ok(book)
    }

    /// A book holding every `*.yaml` / `*.yml` table in `dir` (not recursive).
    pub fn load_dir(dir: &Path) -> Result<PriceBook, PricingError> {
        let mut book = PriceBook::new();
        book.add_dir(dir)?;
        Ok(book)
    }

    pub fn add_yaml_str(&mut self, text: &str, origin: &str) -> Result<(), PricingError> {
        self.add_table(PriceTable::from_yaml_str(text, origin)?)
    }

    /// Adds every `*.yaml` / `*.yml` file in `dir`, in file-name order.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), PricingError> {
        for (_, table) in read_dir_tables(dir)? {
            self.add_table(table)?;
        }
        Ok(())
    }

    /// Adds a table version. Refused: a `(name, version)` already present, or a table that
    /// prices an instance another table also prices from the very same moment (which of the
    /// two applies would be arbitrary).
    pub fn add_table(&mut self, table: PriceTable) -> Result<(), PricingError> {
        let conflict = |message: String| PricingError::Table {
            origin: table.label.to_string(),
            message,
        };
        if let Some(other) = self
            .tables
            .iter()
            .find(|t| t.name == table.name && t.version == table.version)
        {
            return Err(conflict(format!(
                "table {}@{} is already loaded",
                other.name, other.version
            )));
        }
        for other in self
            .tables
            .iter()
            .filter(|t| t.effective == table.effective)
        {
            if let Some(row) = table.prices.iter().find(|row| {
                other.prices.iter().any(|o| {
                    (&o.provider, &o.region, &o.instance)
                        == (&row.provider, &row.region, &row.instance)
                })
            }) {
                return Err(conflict(format!(
                    "{} {} {} is also priced by {} from the same effective time",
                    row.provider, row.region, row.instance, other.label
                )));
            }
        }
        self.tables.push(table);
        self.rebuild_index();
        Ok(())
    }

    fn rebuild_index(&mut self) {
        let tables = &self.tables;
        let mut index: Vec<(usize, usize)> = tables
            .iter()
            .enumerate()
            .flat_map(|(t, table)| (0..table.prices.len()).map(move |r| (t, r)))
            .collect();
        index.sort_by(|&a, &b| {
            let key = |(t, r): (usize, usize)| {
                let row = &tables[t].prices[r];
                (
                    row.provider.as_str(),
                    row.region.as_str(),
                    row.instance.as_str(),
                    tables[t].effective,
                )
            };
            key(a).cmp(&key(b))
        });
        self.index = index;
    }

    pub fn tables(&self) -> &[PriceTable] {
        &self.tables
    }

    /// The price of `instance` in `region` at Unix time `at`: from the latest table whose
    /// effective time is not after `at` and that lists the instance. No allocation.
    pub fn lookup(
        &self,
        provider: &str,
        region: &str,
        instance: &str,
        at: i64,
    ) -> Option<PriceQuote<'_>> {
        let wanted = (provider, region, instance);
        let key = |&(t, r): &(usize, usize)| {
            let row = &self.tables[t].prices[r];
            (
                row.provider.as_str(),
                row.region.as_str(),
                row.instance.as_str(),
            )
        };
        let first = self.index.partition_point(|p| key(p) < wanted);
        let past = self.index.partition_point(|p| key(p) <= wanted);
        self.index[first..past]
            .iter()
            .rev()
            .find(|&&(t, _)| self.tables[t].effective <= at)
            .map(|&(t, r)| {
                let table = &self.tables[t];
                let row = &table.prices[r];
                PriceQuote {
                    price_per_hour: row.price_per_hour,
                    currency: &table.currency,
                    version: &table.label,
                    row,
                }
            })
    }
}

/// Every `*.yaml` / `*.yml` table in `dir` (not recursive), in file-name order, with its path.
pub fn read_dir_tables(dir: &Path) -> Result<Vec<(PathBuf, PriceTable)>, PricingError> {
    let io_error = |path: &Path, e: std::io::Error| PricingError::Table {
        origin: path.display().to_string(),
        message: e.to_string(),
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let path = entry.map_err(|e| io_error(dir, e))?.path();
        let is_yaml = path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml");
        if is_yaml && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut tables = Vec::with_capacity(paths.len());
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
        let table = PriceTable::from_yaml_str(&text, &path.display().to_string())?;
        tables.push((path, table));
    }
    Ok(tables)
}

/// Unix seconds to `YYYY-MM-DDTHH:MM:SSZ` (the inverse of [`parse_timestamp`]).
pub fn format_timestamp(at: i64) -> String {
    let days = at.div_euclid(86_400);
    let seconds = at.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (the inverse of
/// [`days_from_civil`], after Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD` (midnight UTC) or `YYYY-MM-DDTHH:MM:SSZ` to Unix seconds.
pub fn parse_timestamp(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let days = parse_date(date)?;
    let seconds = match time {
        None => 0,
        Some(time) => parse_time_utc(time)
            .ok_or_else(|| format!("{text:?} is not YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)"))?,
    };
    Ok(days * 86_400 + seconds)
}

/// `YYYY-MM-DD` to days since 1970-01-01.
fn parse_date(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a date YYYY-MM-DD");
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return Err(bad());
    }
    let year = fixed_digits(&text[0..4]).ok_or_else(bad)?;
    let month = fixed_digits(&text[5..7]).ok_or_else(bad)?;
    let day = fixed_digits(&text[8..10]).ok_or_else(bad)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(format!("{text:?} is not a calendar date"));
    }
    Ok(days_from_civil(year, month, day))
}

/// `HH:MM:SSZ` to seconds since midnight.
fn parse_time_utc(text: &str) -> Option<i64> {
    let time = text.strip_suffix('Z')?;
    let bytes = time.as_bytes();
    if bytes.len() != 8 || bytes[2] != b':' || bytes[5] != b':' {
        return None;
    }
    let hour = fixed_digits(&time[0..2])?;
    let minute = fixed_digits(&time[3..5])?;
    let second = fixed_digits(&time[6..8])?;
    (hour < 24 && minute < 60 && second < 60).then_some(hour * 3600 + minute * 60 + second)
}

fn fixed_digits(text: &str) -> Option<i64> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`:
/// count from 0000-03-01 so that the leap day ends each 4/100/400-year cycle).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, version: &str, effective: &str, price: &str) -> String {
        format!(
            "name: {name}\nversion: \"{version}\"\neffective: {effective}\ncurrency: usd\n\
             source: test\nprices:\n  - provider: aws\n    region: us-east-1\n    \
             instance: c5.xlarge\n    vcpus: 4\n    memory_gib: 8\n    \
             price_per_hour: \"{price}\"\n"
        )
    }

    #[test]
    fn converts_civil_dates_to_unix_time() {
        let cases = [
            ("1970-01-01", 0),
            ("2026-01-01", 1_767_225_600),
            ("2000-02-29", 951_782_400),
            ("2026-11-21T12:30:05Z", 1_795_264_205),
            ("1969-12-31T23:59:59Z", -1),
            ("2024-03-01", 1_709_251_200),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_timestamp(text), Ok(expected), "{text}");
        }
        for text in [
            "2026-13-01",
            "2026-02-29",
            "2026-1-01",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+01:00",
            "tomorrow",
        ] {
            assert!(parse_timestamp(text).is_err(), "{text}");
        }
    }

    #[test]
    fn the_shipped_table_has_every_reference_row() {
        let book = PriceBook::builtin();
        assert_eq!(book.tables().len(), 1);
        let table = &book.tables()[0];
        assert_eq!(table.label().as_ref(), "instances@2026-11");
        assert_eq!(table.effective, parse_timestamp("2026-01-01").unwrap());
        let reference = include_str!("../tables/sources/prices.csv");
        let rows: Vec<Vec<&str>> = reference
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("provider,"))
            .map(|l| l.splitn(11, ',').collect())
            .collect();
        assert_eq!(rows.len(), table.prices.len());
        let at = table.effective;
        for row in rows {
            let quote = book
                .lookup(row[0], row[1], row[2], at)
                .unwrap_or_else(|| panic!("{row:?} missing"));
            let p = quote.row;
            assert_eq!(p.price_per_hour, row[8].parse().unwrap(), "{row:?}");
            assert_eq!(p.vcpus.to_string(), row[3]);
            assert_eq!(p.memory_gib, row[4].parse().unwrap());
            assert_eq!(p.gpus.to_string(), row[5]);
            assert_eq!(p.gpu_model.as_deref().unwrap_or(""), row[6]);
            assert_eq!(p.note.as_deref().unwrap_or(""), row[10]);
            assert_eq!(p.retrieved.as_deref(), Some("2026-11-21"));
            let source = p.source.as_deref().unwrap();
            assert!(source.starts_with(row[9]), "{source}");
            assert!(source.contains(" @ "), "{source} names its commit");
        }
        assert!(book
            .lookup("aws", "us-east-1", "c5.xlarge", at - 1)
            .is_none());
    }

    #[test]
    fn formats_timestamps_back() {
        for text in [
            "1970-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "1969-12-31T23:59:59Z",
            "2400-03-01T12:00:00Z",
            "1900-02-28T01:02:03Z",
        ] {
            assert_eq!(format_timestamp(parse_timestamp(text).unwrap()), text);
        }
        for day in (-719_000..2_900_000i64).step_by(7) {
            let at = day * 86_400 + 3_723;
            assert_eq!(parse_timestamp(&format_timestamp(at)), Ok(at));
        }
    }

    #[test]
    fn canonical_yaml_parses_back_to_the_same_table() {
        let book = PriceBook::builtin();
        let shipped = &book.tables()[0];
        let text = shipped.to_yaml();
        let back = PriceTable::from_yaml_str(&text, "canonical").unwrap();
        assert_eq!(&back, shipped);
        assert_eq!(back.to_yaml(), text);
        // Decimals are written as strings, so no reader takes them for floats, and a long
        // one survives.
        let long = table("t", "1", "2026-01-01", "1234567.123456789012");
        let t = PriceTable::from_yaml_str(&long, "long").unwrap();
        let text = t.to_yaml();
        assert!(text.contains("'1234567.123456789012'"), "{text}");
        assert!(text.contains("effective: 2026-01-01T00:00:00Z"), "{text}");
        assert_eq!(PriceTable::from_yaml_str(&text, "again").unwrap(), t);
        // Comments and key order do not change the content.
        let reordered = format!("# a comment\n{}", long.replace("source: test\n", ""))
            .replace("name: t\n", "name: t\nsource: test\n");
        assert_eq!(
            PriceTable::from_yaml_str(&reordered, "r")
                .unwrap()
                .to_yaml(),
            text
        );
    }

    #[test]
    fn builds_tables_from_parts() {
        let row = PriceTable::from_yaml_str(&table("t", "1", "2026-01-01", "2"), "a")
            .unwrap()
            .prices;
        let t = PriceTable::new(
            "aws-ec2".into(),
            "20260301T000000Z".into(),
            1_772_323_200,
            Currency::new("usd"),
            "test".into(),
            None,
            row.clone(),
        )
        .unwrap();
        assert_eq!(t.label().as_ref(), "aws-ec2@20260301T000000Z");
        let twice = [row.clone(), row].concat();
        let error = PriceTable::new(
            "x".into(),
            "1".into(),
            0,
            Currency::new("usd"),
            "s".into(),
            None,
            twice,
        )
        .unwrap_err();
        assert!(error.to_string().contains("listed twice"), "{error}");
    }

    #[test]
    fn picks_the_latest_table_in_effect() {
        let mut book = PriceBook::new();
        book.add_yaml_str(&table("t", "1", "2026-01-01", "0.17"), "a")
            .unwrap();
        book.add_yaml_str(&table("t", "2", "2026-06-01T00:00:00Z", "0.15"), "b")
            .unwrap();
        let june = parse_timestamp("2026-06-01").unwrap();
        let at = |t: i64| {
            book.lookup("aws", "us-east-1", "c5.xlarge", t)
                .map(|q| (q.price_per_hour.to_string(), q.version.to_string()))
        };
        assert_eq!(at(june - 1), Some(("0.17".into(), "t@1".into())));
        assert_eq!(at(june), Some(("0.15".into(), "t@2".into())));
        assert_eq!(at(0), None);
        assert!(book.lookup("aws", "us-east-2", "c5.xlarge", june).is_none());
        assert!(book.lookup("gcp", "us-east-1", "c5.xlarge", june).is_none());
    }

    #[test]
    fn refuses_duplicates_and_unknown_keys() {
        let mut book = PriceBook::new();
        book.add_yaml_str(&table("t", "1", "2026-01-01", "1"), "a")
            .unwrap();
        let again = book
            .add_yaml_str(&table("t", "1", "2026-02-01", "1"), "b")
            .unwrap_err();
        assert!(again.to_string().contains("already loaded"), "{again}");
        let same_time = book
            .add_yaml_str(&table("u", "1", "2026-01-01", "2"), "c")
            .unwrap_err();
        assert!(
            same_time.to_string().contains("same effective"),
            "{same_time}"
        );

        let typo = table("t", "9", "2026-01-01", "1").replace("vcpus", "vcpu");
        let error = PriceTable::from_yaml_str(&typo, "typo.yaml").unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("typo.yaml") && message.contains("unknown field `vcpu`"),
            "{message}"
        );
        let negative = table("t", "9", "2026-01-01", "-1");
        assert!(PriceTable::from_yaml_str(&negative, "n").is_err());
        let bad_date = table("t", "9", "2026-02-30", "1");
        assert!(PriceTable::from_yaml_str(&bad_date, "d").is_err());
        let precise = table("t", "9", "2026-01-01", "0.0000000000001");
        assert!(PriceTable::from_yaml_str(&precise, "p").is_err());
        let twice = format!(
            "{}{}",
            table("t", "9", "2026-01-01", "1"),
            "  - {provider: aws, region: us-east-1, instance: c5.xlarge, vcpus: 4, memory_gib: 8, \
             price_per_hour: \"2\"}\n"
        );
        let error = PriceTable::from_yaml_str(&twice, "t").unwrap_err();
        assert!(error.to_string().contains("listed twice"), "{error}");
    }

    #[test]
    fn loads_a_directory_of_tables() {
        let dir = std::env::temp_dir().join(format!("bursar-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), table("t", "1", "2026-01-01", "1")).unwrap();
        std::fs::write(dir.join("b.yml"), table("t", "2", "2026-03-01", "2")).unwrap();
        std::fs::write(dir.join("README.md"), "not a table").unwrap();
        let book = PriceBook::load_dir(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(book.unwrap().tables().len(), 2);
        assert!(PriceBook::load_dir(Path::new("/nonexistent/bursar")).is_err());
    }
}
