//! UTC calendar arithmetic on epoch seconds, in integers (no clock, no time zone database).

/// Seconds in a UTC day (bursar ignores leap seconds, as Unix time does).
pub const SECONDS_PER_DAY: i64 = 86_400;

/// The start (00:00 UTC) of the day containing `t`.
pub fn day_start(t: i64) -> i64 {
    t - t.rem_euclid(SECONDS_PER_DAY)
}

/// Whether `t` is 00:00 UTC.
pub fn is_day_start(t: i64) -> bool {
    t.rem_euclid(SECONDS_PER_DAY) == 0
}

/// `YYYY-MM-DD` of the day containing `t`.
pub fn format_day(t: i64) -> String {
    let (y, m, d) = civil_from_days(t.div_euclid(SECONDS_PER_DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM` of the month containing `t`.
pub fn format_month(t: i64) -> String {
    let (y, m, _) = civil_from_days(t.div_euclid(SECONDS_PER_DAY));
    format!("{y:04}-{m:02}")
}

/// Year, month (1–12) and day (1–31) of a day number counted from 1970-01-01, proleptic
/// Gregorian (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = if m <= 2 { y + 1 } else { y };
    // m and d are in small ranges computed above, so the conversions cannot fail.
    (
        year,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_day(0), "1970-01-01");
        assert_eq!(format_day(-1), "1969-12-31");
        assert_eq!(format_day(951_782_400), "2000-02-29");
        assert_eq!(format_day(1_709_251_199), "2024-02-29");
        assert_eq!(format_day(1_709_251_200), "2024-03-01");
        assert_eq!(format_month(1_735_689_599), "2024-12");
        assert_eq!(format_month(1_735_689_600), "2025-01");
    }

    #[test]
    fn day_boundaries() {
        assert_eq!(day_start(86_399), 0);
        assert_eq!(day_start(86_400), 86_400);
        assert_eq!(day_start(-1), -86_400);
        assert!(is_day_start(1_735_689_600));
        assert!(!is_day_start(1_735_689_601));
    }
}
