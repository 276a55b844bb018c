//! sacct timestamps: local `YYYY-MM-DDTHH:MM:SS` without an offset, or epoch seconds under
//! `SLURM_TIME_FORMAT=%s`, turned into Unix seconds.
//!
//! This runs three times per record on the import hot path, so the common form is parsed by
//! hand (fixed byte positions, civil-date arithmetic) and a non-UTC zone is consulted once per
//! distinct local hour, not once per value: the UTC offset of every instant of an hour is the
//! same except in the rare hours that contain a zone transition, and those hours fall back to
//! chrono's full resolution for each value.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, TimeZone};
use chrono_tz::Tz;

/// The zone sacct's local times are read in. sacct prints the local time of the machine it ran
/// on, with no offset; `SLURM_TIME_FORMAT=%s` output (epoch seconds) needs no zone at all.
///
/// Local times that occur twice (the hour repeated when daylight-saving time ends) are read as
/// the **earlier** instant: sacct gives no way to tell them apart, and the earlier reading
/// never makes a record end before it really did. Local times that do not exist (the hour
/// skipped when daylight-saving time starts) are refused: sacct never prints them, so they mean
/// the input was produced in another zone than the one configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SacctTimeZone {
    /// The machine's own zone (`TZ`, else `/etc/localtime`), as sacct itself uses.
    #[default]
    Local,
    Utc,
    Named(Tz),
}

impl fmt::Display for SacctTimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SacctTimeZone::Local => f.write_str("the local time zone"),
            SacctTimeZone::Utc => f.write_str("UTC"),
            SacctTimeZone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown time zone {0:?} (expected \"local\", \"UTC\" or an IANA name like \"Europe/Berlin\")"
)]
pub struct UnknownTimeZone(pub String);

impl FromStr for SacctTimeZone {
    type Err = UnknownTimeZone;

    /// `local`, `UTC`, or an IANA zone name.
    fn from_str(text: &str) -> Result<SacctTimeZone, UnknownTimeZone> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("local") {
            Ok(SacctTimeZone::Local)
        } else if text.eq_ignore_ascii_case("utc") || text.eq_ignore_ascii_case("z") {
            Ok(SacctTimeZone::Utc)
        } else {
            text.parse::<Tz>()
                .map(SacctTimeZone::Named)
                .map_err(|_| UnknownTimeZone(text.to_string()))
        }
    }
}

/// Why a timestamp could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeError {
    /// Neither a local ISO time nor epoch seconds.
    Unparsable,
    /// A well-formed local time that the zone skips (daylight-saving gap).
    Nonexistent,
}

/// How local times of one hour map to UTC.
#[derive(Debug, Clone, Copy)]
enum HourOffset {
    /// Every local time of the hour is `offset` seconds ahead of UTC (earlier instant when
    /// ambiguous).
    Uniform(i64),
    /// The hour contains a transition: resolve each value on its own.
    Irregular,
}

const CACHE_SLOTS: usize = 64;

/// Parses sacct timestamps in one zone, remembering the offset of recently seen hours.
#[derive(Debug, Clone)]
pub(crate) struct TimeParser {
    zone: SacctTimeZone,
    /// Direct-mapped by local hour number: input is mostly in time order, so a handful of
    /// slots hit almost always.
    cache: Vec<(i64, HourOffset)>,
}

impl TimeParser {
    pub(crate) fn new(zone: SacctTimeZone) -> TimeParser {
        TimeParser {
            zone,
            cache: vec![(i64::MIN, HourOffset::Irregular); CACHE_SLOTS],
        }
    }

    pub(crate) fn zone(&self) -> SacctTimeZone {
        self.zone
    }

    /// `Unknown`, `None` and the empty string are "no time" (a running job's End, a job that
    /// never started); so is epoch 0, which is what sacct prints as `Unknown`.
    pub(crate) fn parse(&mut self, text: &str) -> Result<Option<i64>, TimeError> {
        let bytes = text.as_bytes();
        if let Some(local) = parse_iso_local(bytes) {
            return self.local_to_utc(local?).map(Some);
        }
        if !bytes.is_empty() && bytes.len() <= 12 && bytes.iter().all(u8::is_ascii_digit) {
            let epoch = bytes
                .iter()
                .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
            return Ok((epoch != 0).then_some(epoch));
        }
        match text {
            "" | "Unknown" | "None" => Ok(None),
            _ => Err(TimeError::Unparsable),
        }
    }

    /// Local wall-clock seconds (as if the local time were UTC) to Unix seconds.
    fn local_to_utc(&mut self, local: i64) -> Result<i64, TimeError> {
        let zone = match self.zone {
            SacctTimeZone::Utc => return Ok(local),
            zone => zone,
        };
        let hour = local.div_euclid(3600);
        let slot = hour.rem_euclid(CACHE_SLOTS as i64) as usize;
        if self.cache[slot].0 != hour {
            self.cache[slot] = (hour, hour_offset(zone, hour));
        }
        match self.cache[slot].1 {
            HourOffset::Uniform(offset) => Ok(local - offset),
            HourOffset::Irregular => resolve_earliest(zone, local).ok_or(TimeError::Nonexistent),
        }
    }
}

/// The offset shared by every local time of `hour`, when there is one.
fn hour_offset(zone: SacctTimeZone, hour: i64) -> HourOffset {
    let first = hour * 3600;
    let last = first + 3599;
    match (resolve_earliest(zone, first), resolve_earliest(zone, last)) {
        (Some(a), Some(b)) if first - a == last - b => HourOffset::Uniform(first - a),
        _ => HourOffset::Irregular,
    }
}

/// The earliest instant whose local time in `zone` is `local` (wall-clock seconds), or `None`
/// when the zone skips that local time.
fn resolve_earliest(zone: SacctTimeZone, local: i64) -> Option<i64> {
    let naive = DateTime::from_timestamp(local, 0)?.naive_utc();
    match zone {
        SacctTimeZone::Utc => Some(local),
        SacctTimeZone::Local => earliest(chrono::Local.from_local_datetime(&naive)),
        SacctTimeZone::Named(tz) => earliest(tz.from_local_datetime(&naive)),
    }
}

fn earliest<Z: TimeZone>(result: LocalResult<DateTime<Z>>) -> Option<i64> {
    match result {
        LocalResult::Single(at) => Some(at.timestamp()),
        LocalResult::Ambiguous(a, b) => Some(a.timestamp().min(b.timestamp())),
        LocalResult::None => None,
    }
}

/// `YYYY-MM-DDTHH:MM:SS` (or with a space for `T`) as wall-clock seconds since the epoch.
/// `None`: not this shape at all; `Some(Err)`: this shape with an impossible date or time.
fn parse_iso_local(b: &[u8]) -> Option<Result<i64, TimeError>> {
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || (b[10] != b'T' && b[10] != b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    Some(iso_fields(b).ok_or(TimeError::Unparsable))
}

fn iso_fields(b: &[u8]) -> Option<i64> {
    let year = i64::from(digits(&b[0..4])?);
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + i64::from(hour * 3600 + minute * 60 + second))
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, &c| {
        let d = c.wrapping_sub(b'0');
        (d < 10).then(|| acc * 10 + u32::from(d))
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01: `(year, month, day)`.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Writes Unix seconds as sacct's `YYYY-MM-DDTHH:MM:SS` in UTC into `out` (19 bytes).
pub(crate) fn format_iso_utc(at: i64, out: &mut [u8; 19]) {
    let (year, month, day) = civil_from_days(at.div_euclid(86_400));
    let secs = at.rem_euclid(86_400);
    let put = |out: &mut [u8; 19], at: usize, value: i64, width: usize| {
        let mut v = value;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(out, 0, year, 4);
    out[4] = b'-';
    put(out, 5, i64::from(month), 2);
    out[7] = b'-';
    put(out, 8, i64::from(day), 2);
    out[10] = b'T';
    put(out, 11, secs / 3600, 2);
    out[13] = b':';
    put(out, 14, secs / 60 % 60, 2);
    out[16] = b':';
    put(out, 17, secs % 60, 2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate, NaiveDateTime};

    fn utc(text: &str) -> i64 {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
            .unwrap()
            .and_utc()
            .timestamp()
    }

    #[test]
    fn civil_arithmetic_matches_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in (-800_000..800_000).step_by(997).chain(-5..5) {
            let date = epoch + chrono::TimeDelta::days(days);
            let (y, m, d) = civil_from_days(days);
            assert_eq!(
                (y, m, d),
                (i64::from(date.year()), date.month(), date.day())
            );
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn reads_utc_epoch_and_the_no_time_words() {
        let mut p = TimeParser::new(SacctTimeZone::Utc);
        assert_eq!(
            p.parse("2026-11-22T00:13:11"),
            Ok(Some(utc("2026-11-22T00:13:11")))
        );
        assert_eq!(
            p.parse("2024-02-29 23:59:59"),
            Ok(Some(utc("2024-02-29T23:59:59")))
        );
        assert_eq!(p.parse("1795392791"), Ok(Some(1_795_392_791)));
        for none in ["", "Unknown", "None", "0"] {
            assert_eq!(p.parse(none), Ok(None), "{none}");
        }
        for bad in [
            "2026-02-29T00:00:00",
            "2026-13-01T00:00:00",
            "2026-11-22T24:00:00",
            "2026-11-22T00:60:00",
            "2026-11-2XT00:00:00",
            "2026-11-22",
            "yesterday",
            "-5",
            "1234567890123",
        ] {
            assert_eq!(p.parse(bad), Err(TimeError::Unparsable), "{bad}");
        }
    }

    #[test]
    fn berlin_daylight_saving_changes() {
        let mut p = TimeParser::new(SacctTimeZone::Named(chrono_tz::Europe::Berlin));
        // winter: UTC+1, summer: UTC+2
        assert_eq!(
            p.parse("2026-01-15T12:00:00"),
            Ok(Some(utc("2026-01-15T11:00:00")))
        );
        assert_eq!(
            p.parse("2026-07-15T12:00:00"),
            Ok(Some(utc("2026-07-15T10:00:00")))
        );
        // 2026-03-29 02:00 → 03:00 does not exist
        assert_eq!(
            p.parse("2026-03-29T01:59:59"),
            Ok(Some(utc("2026-03-29T00:59:59")))
        );
        assert_eq!(p.parse("2026-03-29T02:30:00"), Err(TimeError::Nonexistent));
        assert_eq!(
            p.parse("2026-03-29T03:00:00"),
            Ok(Some(utc("2026-03-29T01:00:00")))
        );
        // 2026-10-25 03:00 CEST → 02:00 CET: 02:xx happens twice; the earlier (CEST) is taken
        assert_eq!(
            p.parse("2026-10-25T02:30:00"),
            Ok(Some(utc("2026-10-25T00:30:00")))
        );
        assert_eq!(
            p.parse("2026-10-25T03:00:00"),
            Ok(Some(utc("2026-10-25T02:00:00")))
        );
    }

    #[test]
    fn half_hour_transitions_are_resolved_per_value() {
        // Lord Howe Island moves by 30 minutes: 2026-10-04 02:00 → 02:30 (+10:30 → +11:00).
        let mut p = TimeParser::new(SacctTimeZone::Named(chrono_tz::Australia::Lord_Howe));
        assert_eq!(p.parse("2026-10-04T02:15:00"), Err(TimeError::Nonexistent));
        assert_eq!(
            p.parse("2026-10-04T02:45:00"),
            Ok(Some(utc("2026-10-03T15:45:00")))
        );
        assert_eq!(
            p.parse("2026-10-04T01:45:00"),
            Ok(Some(utc("2026-10-03T15:15:00")))
        );
    }

    #[test]
    fn cached_offsets_match_chrono_everywhere() {
        let tz = chrono_tz::America::New_York;
        let mut p = TimeParser::new(SacctTimeZone::Named(tz));
        let start = utc("2025-01-01T00:00:00");
        for step in 0..(2 * 365 * 24 * 4) {
            let local = start + step * 900 + 7;
            let naive = DateTime::from_timestamp(local, 0).unwrap().naive_utc();
            let expected = earliest(tz.from_local_datetime(&naive));
            let mut text = [0u8; 19];
            format_iso_utc(local, &mut text);
            let text = std::str::from_utf8(&text).unwrap();
            match expected {
                Some(at) => assert_eq!(p.parse(text), Ok(Some(at)), "{text}"),
                None => assert_eq!(p.parse(text), Err(TimeError::Nonexistent), "{text}"),
            }
        }
    }

    #[test]
    fn zone_names() {
        assert_eq!("UTC".parse(), Ok(SacctTimeZone::Utc));
        assert_eq!("local".parse(), Ok(SacctTimeZone::Local));
        assert_eq!(
            "Europe/Berlin".parse(),
            Ok(SacctTimeZone::Named(chrono_tz::Europe::Berlin))
        );
        assert!("Mars/Olympus".parse::<SacctTimeZone>().is_err());
    }
}
