//! Time windows: slicing a long window into bounded calls, and writing `start_time` /
//! `end_time` the way each API version reads them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::error::RestError;
use super::version::ApiVersion;

/// A half-open window `[start, end)` in Unix seconds.
///
/// slurmrestd returns every job that was eligible or running at some moment of the window
/// (`time_eligible < end AND (time_end >= start OR time_end = 0)`, the semantics of
/// `sacct -S/-E`), so one job can belong to several consecutive windows; `fetch_jobs` keeps
/// each `(cluster, job_id, submit)` once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub start: i64,
    pub end: i64,
}

impl Window {
    pub fn new(start: i64, end: i64) -> Window {
        Window { start, end }
    }

    /// Consecutive windows of at most `max` covering this one (none if it is empty).
    pub fn slices(self, max: Duration) -> Vec<Window> {
        let step = i64::try_from(max.as_secs()).unwrap_or(i64::MAX).max(1);
        let mut out = Vec::new();
        let mut start = self.start;
        while start < self.end {
            let end = start.saturating_add(step).min(self.end);
            out.push(Window { start, end });
            start = end;
        }
        out
    }
}

/// The zone slurmrestd's host runs in: v0.0.38 reads `YYYY-MM-DDTHH:MM:SS` query times in
/// that zone (Slurm's `parse_time()` uses `mktime`), with no way to send an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerTimeZone {
    #[default]
    Utc,
    Named(Tz),
}

impl fmt::Display for ServerTimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerTimeZone::Utc => f.write_str("UTC"),
            ServerTimeZone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {0:?} (expected \"UTC\" or an IANA name like \"Europe/Berlin\")")]
pub struct UnknownServerZone(pub String);

impl FromStr for ServerTimeZone {
    type Err = UnknownServerZone;

    fn from_str(text: &str) -> Result<ServerTimeZone, UnknownServerZone> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("utc") || text.eq_ignore_ascii_case("z") {
            return Ok(ServerTimeZone::Utc);
        }
        text.parse::<Tz>()
            .map(ServerTimeZone::Named)
            .map_err(|_| UnknownServerZone(text.to_string()))
    }
}

/// How v0.0.38 query times are written. Its `parse_time()` refuses plain epoch seconds
/// ("Unable to parse time format", seen on 22.05.8). v0.0.40+ get epoch seconds, which their
/// specs document ("Usage start (UNIX timestamp)") — as `uts<epoch>` for v0.0.40 and v0.0.41,
/// whose parsers read them as text — so no zone is involved there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyTimes {
    /// `YYYY-MM-DDTHH:MM:SS` in the server's zone (documented `parse_time` form; default UTC).
    /// A local time that occurs twice (end of daylight-saving time) is widened by an hour
    /// outwards, so the window is never narrower than asked.
    Local(ServerTimeZone),
    /// `uts<epoch>`: exact and zone-free, accepted by 22.05.8's `parse_time()` (on the dev
    /// stack it returned the same records as the UTC ISO form) but undocumented.
    Uts,
}

impl Default for LegacyTimes {
    fn default() -> LegacyTimes {
        LegacyTimes::Local(ServerTimeZone::Utc)
    }
}

#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

/// `start_time` and `end_time` for `window`, unencoded.
pub(crate) fn time_params(
    version: ApiVersion,
    legacy: LegacyTimes,
    window: Window,
) -> Result<(String, String), RestError> {
    if version.is_data_parser() {
        // v0.0.40 and v0.0.41 parse a query's time as text only (`parse_time()`), which
        // reads `uts<epoch>` but not a bare epoch; v0.0.42 and later take either.
        if version <= ApiVersion::V0_0_41 {
            return Ok(uts(window));
        }
        return Ok((window.start.to_string(), window.end.to_string()));
    }
    match legacy {
        LegacyTimes::Uts => Ok(uts(window)),
        LegacyTimes::Local(zone) => Ok((
            local_iso(window.start, zone, Edge::Start)?,
            local_iso(window.end, zone, Edge::End)?,
        )),
    }
}

/// `uts<epoch>` of both ends. `parse_time()` refuses a `uts` below 1,000,000 (1970-01-12),
/// when no job can have run: the window starts there at the earliest.
fn uts(window: Window) -> (String, String) {
    let at = |t: i64| format!("uts{}", t.max(1_000_000));
    (at(window.start), at(window.end))
}

fn local_iso(at: i64, zone: ServerTimeZone, edge: Edge) -> Result<String, RestError> {
    let utc = instant(at)?;
    let naive = match zone {
        ServerTimeZone::Utc => utc.naive_utc(),
        ServerTimeZone::Named(tz) => {
            let naive = utc.with_timezone(&tz).naive_local();
            match tz.from_local_datetime(&naive) {
                LocalResult::Ambiguous(..) => {
                    // The server may read either instant: step an hour outwards, whose
                    // readings all lie outside the window's edge.
                    let shifted = match edge {
                        Edge::Start => at.saturating_sub(3600),
                        Edge::End => at.saturating_add(3600),
                    };
                    instant(shifted)?.with_timezone(&tz).naive_local()
                }
                _ => naive,
            }
        }
    };
    Ok(format_naive(naive))
}

fn instant(at: i64) -> Result<DateTime<Utc>, RestError> {
    DateTime::from_timestamp(at, 0)
        .ok_or_else(|| RestError::InvalidRequest(format!("time {at} is out of range")))
}

fn format_naive(naive: NaiveDateTime) -> String {
    naive.format("%Y-%m-%dT%H:%M:%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing() {
        let day = Duration::from_secs(86_400);
        let w = Window::new(0, 3 * 86_400);
        assert_eq!(
            w.slices(day),
            vec![
                Window::new(0, 86_400),
                Window::new(86_400, 172_800),
                Window::new(172_800, 259_200)
            ]
        );
        assert_eq!(
            Window::new(10, 100).slices(Duration::from_secs(60)),
            vec![Window::new(10, 70), Window::new(70, 100)]
        );
        assert_eq!(Window::new(5, 5).slices(day), vec![]);
        assert_eq!(Window::new(9, 5).slices(day), vec![]);
    }

    #[test]
    fn each_version_gets_its_form() {
        // 2026-11-22T00:13:11Z
        let w = Window::new(1_795_306_391, 1_795_306_451);
        let v38 = ApiVersion::V0_0_38;
        assert_eq!(
            time_params(v38, LegacyTimes::default(), w).unwrap(),
            (
                "2026-11-22T00:13:11".to_string(),
                "2026-11-22T00:14:11".to_string()
            )
        );
        let berlin = LegacyTimes::Local("Europe/Berlin".parse().unwrap());
        assert_eq!(
            time_params(v38, berlin, w).unwrap().0,
            "2026-11-22T01:13:11"
        );
        assert_eq!(
            time_params(v38, LegacyTimes::Uts, w).unwrap(),
            ("uts1795306391".to_string(), "uts1795306451".to_string())
        );
        for version in [ApiVersion::V0_0_40, ApiVersion::V0_0_41] {
            assert_eq!(
                time_params(version, berlin, w).unwrap(),
                ("uts1795306391".to_string(), "uts1795306451".to_string())
            );
            assert_eq!(
                time_params(version, berlin, Window::new(0, 1_795_306_451)).unwrap(),
                ("uts1000000".to_string(), "uts1795306451".to_string())
            );
        }
        for version in [ApiVersion::V0_0_42, ApiVersion::V0_0_45] {
            assert_eq!(
                time_params(version, berlin, w).unwrap(),
                ("1795306391".to_string(), "1795306451".to_string())
            );
        }
    }

    #[test]
    fn ambiguous_local_times_widen_the_window() {
        // Europe/Berlin falls back at 2026-10-25 03:00 CEST -> 02:00 CET; 00:30Z is 02:30 CEST,
        // a local time that happens twice.
        let zone = LegacyTimes::Local("Europe/Berlin".parse().unwrap());
        let first_0230 = 1_792_888_200; // 2026-10-25T00:30:00Z
        let (start, end) = time_params(
            ApiVersion::V0_0_38,
            zone,
            Window::new(first_0230, first_0230),
        )
        .unwrap();
        assert_eq!(start, "2026-10-25T01:30:00");
        assert_eq!(end, "2026-10-25T02:30:00");
        assert_eq!("utc".parse(), Ok(ServerTimeZone::Utc));
        assert!("Mars/Base".parse::<ServerTimeZone>().is_err());
    }
}
