//! [`TimeLimit`]: Slurm's `-t/--time` formats, parsed exactly as `sbatch` does.
//!
//! Slurm's reading (`src/common/parse_time.c`, `time_str2secs` then `time_str2mins`, and
//! `arg_set_time_limit` in `slurm_opt.c`):
//!
//! | form | meaning |
//! |---|---|
//! | `M` | minutes |
//! | `M:S` | minutes and seconds |
//! | `H:M:S` | hours, minutes, seconds |
//! | `D-H` | days and hours |
//! | `D-H:M` | days, hours, minutes |
//! | `D-H:M:S` | days, hours, minutes, seconds |
//! | `UNLIMITED`, `INFINITE`, `-1` (any case) | no limit |
//!
//! - Fields are not range-checked: `90` is 90 minutes, `1:75:00` is 2 h 15 min, as in Slurm.
//! - Seconds are rounded **up** to whole minutes (`0:30` is 1 minute, `1:01` is 2).
//! - A total of 0 (`0`, `00:00:00`) means no limit, as `sbatch --time=0` does.
//! - Stricter than Slurm, which `sscanf`s leniently: every field needs at least one digit, so
//!   `1-` (Slurm: 1 day) and `-5` (Slurm: a negative number) are refused, as is anything with
//!   spaces, signs or other characters. Slurm keeps the limit in a 32-bit count of minutes with
//!   the top two values reserved, so larger limits are refused too.

use std::fmt;
use std::str::FromStr;

use super::error::RequestError;

/// The largest limit Slurm can hold: `NO_VAL` (0xfffffffe) and `INFINITE` (0xffffffff) are
/// reserved in its 32-bit minute count.
pub const MAX_TIME_LIMIT_MIN: u64 = 0xffff_fffd;

/// A job's wall-time limit, in whole minutes, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeLimit {
    /// At least 1 minute, at most [`MAX_TIME_LIMIT_MIN`].
    Minutes(u64),
    /// `UNLIMITED`/`INFINITE`/`0`: the partition's maximum applies.
    Unlimited,
}

impl TimeLimit {
    /// Parses one `--time` value (see the module documentation).
    pub fn parse(text: &str) -> Result<TimeLimit, RequestError> {
        let bad = |reason: &str| RequestError::invalid_value("--time", text, reason);
        let Some(seconds) = slurm_seconds(text).map_err(bad)? else {
            return Ok(TimeLimit::Unlimited);
        };
        let minutes = seconds.div_ceil(60);
        match minutes {
            0 => Ok(TimeLimit::Unlimited),
            m if m > MAX_TIME_LIMIT_MIN => Err(bad(TOO_LARGE)),
            m => Ok(TimeLimit::Minutes(m)),
        }
    }

    /// `None` → unlimited; `Some(0)` is also unlimited, as Slurm reads a limit of 0.
    pub fn from_minutes(minutes: Option<u64>) -> TimeLimit {
        match minutes {
            None | Some(0) => TimeLimit::Unlimited,
            Some(m) => TimeLimit::Minutes(m),
        }
    }

    /// Whole minutes, or `None` when unlimited.
    pub fn minutes(self) -> Option<u64> {
        match self {
            TimeLimit::Minutes(m) => Some(m),
            TimeLimit::Unlimited => None,
        }
    }

    /// Seconds (minutes × 60, saturating), or `None` when unlimited: what
    /// `ClusterPricing::estimate` takes.
    pub fn seconds(self) -> Option<u64> {
        self.minutes().map(|m| m.saturating_mul(60))
    }
}

const TOO_LARGE: &str = "the time limit is too large";

/// Seconds in one of Slurm's time forms (the module documentation's table; Slurm's
/// `time_str2secs`), `None` for `UNLIMITED`, `INFINITE` or `-1`; the error says why not.
pub(crate) fn slurm_seconds(text: &str) -> Result<Option<u64>, &'static str> {
    const FORMS: &str = "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED";
    if ["UNLIMITED", "INFINITE", "-1"]
        .iter()
        .any(|word| text.eq_ignore_ascii_case(word))
    {
        return Ok(None);
    }
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b':')
    {
        return Err(FORMS);
    }
    let field = |part: &str| -> Result<u64, &'static str> {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FORMS);
        }
        part.parse::<u64>().map_err(|_| "the number is too large")
    };
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (Some(field(days)?), clock),
        None => (None, text),
    };
    let numbers = clock
        .split(':')
        .map(field)
        .collect::<Result<Vec<u64>, _>>()?;
    // (days, hours, minutes, seconds)
    let (d, h, m, s) = match (days, numbers.as_slice()) {
        (None, [m]) => (0, 0, *m, 0),
        (None, [m, s]) => (0, 0, *m, *s),
        (None, [h, m, s]) => (0, *h, *m, *s),
        (Some(d), [h]) => (d, *h, 0, 0),
        (Some(d), [h, m]) => (d, *h, *m, 0),
        (Some(d), [h, m, s]) => (d, *h, *m, *s),
        _ => return Err(FORMS),
    };
    d.checked_mul(86_400)
        .and_then(|x| x.checked_add(h.checked_mul(3_600)?))
        .and_then(|x| x.checked_add(m.checked_mul(60)?))
        .and_then(|x| x.checked_add(s))
        .map(Some)
        .ok_or(TOO_LARGE)
}

impl FromStr for TimeLimit {
    type Err = RequestError;
    fn from_str(text: &str) -> Result<TimeLimit, RequestError> {
        TimeLimit::parse(text)
    }
}

impl fmt::Display for TimeLimit {
    /// Slurm's own form (`mins2time_str`): `HH:MM:SS`, `D-HH:MM:SS` from one day, `UNLIMITED`.
    /// Parsing the output gives the same limit back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TimeLimit::Unlimited => f.write_str("UNLIMITED"),
            TimeLimit::Minutes(total) => {
                let (days, hours, minutes) = (total / 1440, total / 60 % 24, total % 60);
                if days > 0 {
                    write!(f, "{days}-{hours:02}:{minutes:02}:00")
                } else {
                    write!(f, "{hours:02}:{minutes:02}:00")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_parses_back() {
        for m in [1, 59, 60, 61, 1439, 1440, 1441, 10_000, MAX_TIME_LIMIT_MIN] {
            let t = TimeLimit::Minutes(m);
            assert_eq!(TimeLimit::parse(&t.to_string()).unwrap(), t, "{t}");
        }
        assert_eq!(TimeLimit::Minutes(1563).to_string(), "1-02:03:00");
        assert_eq!(TimeLimit::Minutes(5).to_string(), "00:05:00");
    }
}
