//! Dates and times on the command line and in output: UTC, ISO 8601.

use anyhow::{anyhow, bail};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde::Deserialize;

/// A time zone for reading a cluster's local timestamps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    /// The machine's own zone (what sacct uses when TZ is unset).
    Local,
    Named(chrono_tz::Tz),
}

pub fn parse_zone(text: &str) -> anyhow::Result<Zone> {
    if text.eq_ignore_ascii_case("local") {
        return Ok(Zone::Local);
    }
    if text.eq_ignore_ascii_case("utc") || text == "Z" {
        return Ok(Zone::Named(chrono_tz::UTC));
    }
    text.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
        anyhow!(
            "unknown time zone {text:?} (use an IANA name such as UTC or Europe/Berlin, or local)"
        )
    })
}

/// Parses a moment given on the command line: `2026-11-01` (midnight UTC),
/// `2026-11-01T12:00:00` (UTC), RFC 3339 with an offset, or `@1700000000` (Unix seconds).
pub fn parse_instant(text: &str) -> anyhow::Result<i64> {
    let t = text.trim();
    if let Some(epoch) = t.strip_prefix('@') {
        return epoch
            .parse::<i64>()
            .map_err(|_| anyhow!("{text:?} is not @<unix seconds>"));
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .expect("midnight exists")
            .and_utc()
            .timestamp());
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp());
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, format) {
            return Ok(dt.and_utc().timestamp());
        }
    }
    bail!("{text:?} is not a date (use YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS in UTC, RFC 3339, or @unix-seconds)")
}

/// `2026-11-22T00:13:14Z`.
pub fn format_instant(epoch: i64) -> String {
    match Utc.timestamp_opt(epoch, 0).single() {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => epoch.to_string(),
    }
}

/// Bounds of "forever" used for allocations without a period, printed as `-` in tables.
pub const OPEN_START: i64 = i64::MIN / 2;
pub const OPEN_END: i64 = i64::MAX / 2;

pub fn format_bound(epoch: i64) -> String {
    if epoch <= OPEN_START || epoch >= OPEN_END {
        "-".to_string()
    } else {
        format_instant(epoch)
    }
}

pub fn now() -> i64 {
    Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_people_type() {
        assert_eq!(parse_instant("2026-11-22").unwrap(), 1_795_305_600);
        assert_eq!(
            parse_instant("2026-11-22T00:13:14").unwrap(),
            1_795_305_600 + 13 * 60 + 14
        );
        assert_eq!(
            parse_instant("2026-11-22T01:13:14+01:00").unwrap(),
            1_795_305_600 + 13 * 60 + 14
        );
        assert_eq!(parse_instant("@42").unwrap(), 42);
        assert!(parse_instant("yesterday").is_err());
        assert_eq!(format_instant(1_795_305_600), "2026-11-22T00:00:00Z");
    }

    #[test]
    fn zones() {
        assert_eq!(parse_zone("UTC").unwrap(), Zone::Named(chrono_tz::UTC));
        assert!(matches!(
            parse_zone("Europe/Berlin").unwrap(),
            Zone::Named(_)
        ));
        assert!(parse_zone("Mars/Olympus").is_err());
    }
}

/// A duration as people write it in config: `90s`, `5m`, `1h`, `2d`, `1w`, or bare seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<std::time::Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| anyhow!("{text:?} is not a duration (e.g. 30s, 5m, 1h, 1d)"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => bail!("{text:?} is not a duration (units: s, m, h, d, w)"),
    };
    n.checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| anyhow!("{text:?} is too long"))
}

/// A duration as [`parse_duration`] reads it, in its largest whole unit: `30d`, `36h`, `90s`.
pub fn format_duration(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    [(86_400, "d"), (3_600, "h"), (60, "m")]
        .into_iter()
        .find(|(unit, _)| seconds >= *unit && seconds.is_multiple_of(*unit))
        .map_or_else(
            || format!("{seconds}s"),
            |(unit, name)| format!("{}{name}", seconds / unit),
        )
}

/// Deserializes a duration written as text (`5m`) or bare seconds.
pub fn de_duration<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Seconds(s)) => Ok(Some(std::time::Duration::from_secs(s))),
        Some(Raw::Text(t)) => parse_duration(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn durations_are_written_in_their_largest_whole_unit() {
        for text in ["30d", "36h", "90m", "45s", "0s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_duration(parse_duration("2w").unwrap()), "14d");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("1d").unwrap().as_secs(), 86_400);
        assert_eq!(parse_duration("42").unwrap().as_secs(), 42);
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}

/// `3d4h`, `5m12s`, `40s`: an age as people read it.
pub fn format_age(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}
