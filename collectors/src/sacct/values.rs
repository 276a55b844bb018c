//! sacct's non-time values: counts, durations, time limits. Errors are the user-facing reasons
//! a line is quarantined for, naming the column and the value.

/// A non-empty run of ASCII digits (no sign, no spaces), without overflow.
pub(crate) fn digits_u64(text: &str) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.bytes().try_fold(0u64, |acc, b| {
        let d = b.wrapping_sub(b'0');
        if d < 10 {
            acc.checked_mul(10)?.checked_add(u64::from(d))
        } else {
            None
        }
    })
}

/// `ElapsedRaw`: whole seconds.
pub(crate) fn elapsed_raw(column: &str, text: &str) -> Result<u64, String> {
    if let Some(seconds) = digits_u64(text) {
        return Ok(seconds);
    }
    if text.is_empty() {
        return Err(format!("no elapsed time: {column} is empty"));
    }
    if text.strip_prefix('-').and_then(digits_u64).is_some() {
        return Err(format!("negative {column} {text}"));
    }
    Err(format!(
        "{column} {text:?} is not a whole number of seconds"
    ))
}

/// `Elapsed`: `[D-]HH:MM:SS` (days unpadded), as `secs2time_str` prints it.
pub(crate) fn elapsed_clock(column: &str, text: &str) -> Result<u64, String> {
    clock_seconds(text)
        .ok_or_else(|| format!("{column} {text:?} is not a duration like [D-]HH:MM:SS"))
}

fn clock_seconds(text: &str) -> Option<u64> {
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (digits_u64(days)?, clock),
        None => (0, text),
    };
    let mut parts = clock.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || m.len() != 2 || s.len() != 2 {
        return None;
    }
    let (h, m, s) = (digits_u64(h)?, digits_u64(m)?, digits_u64(s)?);
    if m > 59 || s > 59 {
        return None;
    }
    days.checked_mul(86_400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(m * 60 + s)
}

/// The words sacct prints for "no limit of the job's own".
fn unlimited(text: &str) -> bool {
    text.is_empty()
        || text.eq_ignore_ascii_case("UNLIMITED")
        || text.eq_ignore_ascii_case("Partition_Limit")
}

/// `TimelimitRaw`: minutes, or `UNLIMITED` / `Partition_Limit` (no limit of its own: `None`).
pub(crate) fn time_limit_raw(column: &str, text: &str) -> Result<Option<u64>, String> {
    if unlimited(text) {
        return Ok(None);
    }
    digits_u64(text)
        .map(Some)
        .ok_or_else(|| format!("{column} {text:?} is neither minutes nor UNLIMITED"))
}

/// `Timelimit`: `[D-]HH:MM:SS` or the same words as `TimelimitRaw`. Slurm limits are whole
/// minutes; stray seconds round up, so a hold built from the limit never falls short.
pub(crate) fn time_limit_clock(column: &str, text: &str) -> Result<Option<u64>, String> {
    if unlimited(text) {
        return Ok(None);
    }
    clock_seconds(text)
        .map(|s| Some(s.div_ceil(60)))
        .ok_or_else(|| format!("{column} {text:?} is neither [D-]HH:MM:SS nor UNLIMITED"))
}

/// A count such as `AllocCPUS` or `NNodes`; empty is 0.
pub(crate) fn count(column: &str, text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Ok(0);
    }
    digits_u64(text).ok_or_else(|| format!("{column} {text:?} is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_forms() {
        assert_eq!(elapsed_raw("ElapsedRaw", "82"), Ok(82));
        assert_eq!(elapsed_raw("ElapsedRaw", "0"), Ok(0));
        assert_eq!(
            elapsed_raw("ElapsedRaw", "-5"),
            Err("negative ElapsedRaw -5".to_string())
        );
        assert_eq!(
            elapsed_raw("ElapsedRaw", "1.5"),
            Err("ElapsedRaw \"1.5\" is not a whole number of seconds".to_string())
        );
        assert!(elapsed_raw("ElapsedRaw", "+5").is_err());
        assert!(elapsed_raw("ElapsedRaw", "99999999999999999999999").is_err());
        assert_eq!(elapsed_clock("Elapsed", "00:01:22"), Ok(82));
        assert_eq!(elapsed_clock("Elapsed", "1-02:03:04"), Ok(93_784));
        assert_eq!(elapsed_clock("Elapsed", "123:00:00"), Ok(442_800));
        for bad in [
            "",
            "01:22",
            "00:61:00",
            "1-2-03:04:05",
            "a-00:00:00",
            "00:00:00:00",
        ] {
            assert!(elapsed_clock("Elapsed", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_limits() {
        assert_eq!(time_limit_raw("TimelimitRaw", "10"), Ok(Some(10)));
        assert_eq!(time_limit_raw("TimelimitRaw", "UNLIMITED"), Ok(None));
        assert_eq!(time_limit_raw("TimelimitRaw", "Partition_Limit"), Ok(None));
        assert_eq!(time_limit_raw("TimelimitRaw", ""), Ok(None));
        assert!(time_limit_raw("TimelimitRaw", "ten").is_err());
        assert_eq!(time_limit_clock("Timelimit", "00:10:00"), Ok(Some(10)));
        assert_eq!(time_limit_clock("Timelimit", "1-00:00:00"), Ok(Some(1440)));
        assert_eq!(time_limit_clock("Timelimit", "00:00:30"), Ok(Some(1)));
        assert_eq!(time_limit_clock("Timelimit", "UNLIMITED"), Ok(None));
        assert!(time_limit_clock("Timelimit", "soon").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(count("AllocCPUS", "4"), Ok(4));
        assert_eq!(count("AllocCPUS", ""), Ok(0));
        assert!(count("AllocCPUS", "four").is_err());
    }
}
