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

/// Days from 1970-01-01 to `y-m-d`, proleptic Gregorian (Howard Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let (m, d) = (i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `t` moved by `months` calendar months, keeping the time of day; the day of the month is
/// clamped to the target month's length (Jan 31 + 1 month = Feb 28 or 29).
pub fn add_months(t: i64, months: i64) -> i64 {
    let days = t.div_euclid(SECONDS_PER_DAY);
    let time = t.rem_euclid(SECONDS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let index = y * 12 + i64::from(m) - 1 + months;
    let (year, month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
    // month is in 1..=12 by construction.
    let month = u32::try_from(month).unwrap_or(1);
    let next_first = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    let length = next_first - days_from_civil(year, month, 1);
    let day = i64::from(d).min(length);
    let day = u32::try_from(day).unwrap_or(1);
    days_from_civil(year, month, day) * SECONDS_PER_DAY + time
}

/// `YYYY-Www`, the ISO 8601 week (Monday first; week 1 holds the year's first Thursday) of
/// the day containing `t`, UTC.
pub fn format_iso_week(t: i64) -> String {
    let days = t.div_euclid(SECONDS_PER_DAY);
    // 1970-01-01 was a Thursday: weekday 0 is Monday.
    let weekday = (days + 3).rem_euclid(7);
    let thursday = days - weekday + 3;
    let (year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    format!("{year:04}-W{week:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_added_on_the_calendar() {
        let at = |y, m, d| days_from_civil(y, m, d) * SECONDS_PER_DAY;
        assert_eq!(add_months(at(2026, 11, 1), 1), at(2026, 12, 1));
        assert_eq!(add_months(at(2026, 11, 1), 3), at(2027, 2, 1));
        assert_eq!(add_months(at(2026, 12, 1), 12), at(2027, 12, 1));
        assert_eq!(add_months(at(2027, 1, 31), 1), at(2027, 2, 28));
        assert_eq!(add_months(at(2028, 1, 31), 1), at(2028, 2, 29));
        assert_eq!(add_months(at(2026, 3, 1) + 3600, -2), at(2026, 1, 1) + 3600);
    }

    #[test]
    fn iso_weeks() {
        let at = |y, m, d| days_from_civil(y, m, d) * SECONDS_PER_DAY;
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 2, 29), 951_782_400 / SECONDS_PER_DAY);
        assert_eq!(format_iso_week(at(2026, 11, 22)), "2026-W47");
        assert_eq!(format_iso_week(at(2026, 11, 23)), "2026-W48");
        // 2021-01-03 (Sunday) belongs to 2020's week 53; 2024-12-30 (Monday) to 2025-W01.
        assert_eq!(format_iso_week(at(2021, 1, 3)), "2020-W53");
        assert_eq!(format_iso_week(at(2021, 1, 4)), "2021-W01");
        assert_eq!(format_iso_week(at(2024, 12, 30)), "2025-W01");
        assert_eq!(format_iso_week(at(2026, 1, 1)), "2026-W01");
        assert_eq!(format_iso_week(at(1970, 1, 1)), "1970-W01");
    }

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
