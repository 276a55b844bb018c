//! [`Moment`]: the times `--begin` and `--deadline` take, read as sbatch reads them.
//!
//! sbatch turns the text into a Unix time on the submitting machine, in its local time zone
//! (Slurm's `parse_time`), and sends the number. `bursar submit` does the same with the
//! user's clock and zone ([`Clock`]): the request carries Unix seconds, so the gateway and
//! the cluster, wherever they run, start the job when the user meant.
//!
//! | form | meaning |
//! |---|---|
//! | `HH:MM[:SS]` with an optional `AM`/`PM` | that time today, or tomorrow when it has passed (to the minute) |
//! | `YYYY-MM-DD`, `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]` | that day at midnight; without a year the next such day |
//! | a date and a time, joined by `T`, `-` or blanks | `2026-12-01T18:00`, `12/01-18:00:30` |
//! | `now[+COUNT[UNIT]]`, `now-COUNT[UNIT]` | from now; `UNIT` is `seconds` (the default), `minutes`, `hours`, `days` or `weeks`, singular too |
//! | `today`, `tomorrow` | the day (at midnight without a time) |
//! | `midnight`, `elevenses`, `noon`, `fika`, `teatime` | 00:00, 11:00, 12:00, 15:00, 16:00 |
//! | `uts<SECONDS>` | a Unix time (at least 1000000) |
//!
//! Words are any case (Slurm skips a `T` before reading a word, so it refuses `Today`; bursar
//! takes it); later parts override earlier ones (`tomorrow noon`); a newline ends the text, as
//! in Slurm. Stricter than Slurm, which lets `mktime` carry an impossible day into the next
//! month: `02/30` is refused.
//!
//! Daylight-saving changes are bursar's own rule, since glibc's `mktime`, which Slurm uses,
//! picks by its starting guess: a local time that occurs twice is the earlier instant, one
//! skipped is read in the offset in force the day before (02:30 becomes 03:30 in most zones).
//! `now±COUNT` is counted in seconds from now, never through the wall clock.

use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike,
};

use crate::timefmt::Zone;

/// The submitter's "now" and time zone, which relative and local times are read in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    /// Unix seconds.
    pub now: i64,
    pub zone: Zone,
}

impl Clock {
    /// This machine's clock and local zone (`TZ`, else `/etc/localtime`), as sbatch uses.
    pub fn system() -> Clock {
        Clock {
            now: crate::timefmt::now(),
            zone: Zone::Local,
        }
    }

    /// `epoch` on the zone's wall clock.
    pub fn wall(&self, epoch: i64) -> NaiveDateTime {
        match self.zone {
            Zone::Local => wall_in(&chrono::Local, epoch),
            Zone::Named(tz) => wall_in(&tz, epoch),
        }
    }

    /// The Unix time of a wall-clock time in the zone (see the module docs for the
    /// daylight-saving edges).
    pub fn unix(&self, wall: NaiveDateTime) -> i64 {
        match self.zone {
            Zone::Local => unix_in(&chrono::Local, wall),
            Zone::Named(tz) => unix_in(&tz, wall),
        }
    }

    /// `epoch` for people: `2026-12-01 18:00:00 +01:00`.
    pub fn show(&self, epoch: i64) -> String {
        fn show_in<Z: TimeZone>(zone: &Z, epoch: i64) -> String
        where
            Z::Offset: std::fmt::Display,
        {
            match zone.timestamp_opt(epoch, 0) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                    t.format("%Y-%m-%d %H:%M:%S %:z").to_string()
                }
                LocalResult::None => epoch.to_string(),
            }
        }
        match self.zone {
            Zone::Local => show_in(&chrono::Local, epoch),
            Zone::Named(tz) => show_in(&tz, epoch),
        }
    }
}

fn wall_in<Z: TimeZone>(zone: &Z, epoch: i64) -> NaiveDateTime {
    match zone.timestamp_opt(epoch, 0) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.naive_local(),
        LocalResult::None => DateTime::from_timestamp(epoch, 0)
            .unwrap_or_default()
            .naive_utc(),
    }
}

fn unix_in<Z: TimeZone>(zone: &Z, wall: NaiveDateTime) -> i64 {
    match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) => t.timestamp(),
        LocalResult::Ambiguous(earlier, _) => earlier.timestamp(),
        // Skipped by a change of offset: read in the offset in force a day before.
        LocalResult::None => {
            let day_before = wall.and_utc().timestamp() - 86_400;
            let offset = match zone.timestamp_opt(day_before, 0) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                    t.naive_local().and_utc().timestamp() - day_before
                }
                LocalResult::None => 0,
            };
            wall.and_utc().timestamp() - offset
        }
    }
}

/// One part of a moment's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Today,
    Tomorrow,
    /// `now`, moved by this many seconds.
    Now(i64),
    /// Hour, minute, second.
    Time(u32, u32, u32),
    /// Year (none: the next such day), month, day.
    Date(Option<i32>, u32, u32),
}

/// A `--begin` or `--deadline` value, checked but not yet placed in time: [`Moment::at`]
/// reads it on a [`Clock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    text: String,
    form: Form,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    Unix(i64),
    Parts(Vec<Part>),
}

/// The forms, for error messages.
pub const MOMENT_FORMS: &str = "use HH:MM[:SS] [AM|PM], YYYY-MM-DD[THH:MM[:SS]], \
     MMDD[YY], MM/DD[/YY], MM.DD[.YY], now[+COUNT[seconds|minutes|hours|days|weeks]], today, \
     tomorrow, midnight, elevenses, noon, fika, teatime, or uts<unix seconds>";

const NAMED_TIMES: [(&str, u32); 5] = [
    ("midnight", 0),
    ("elevenses", 11),
    ("noon", 12),
    ("fika", 15),
    ("teatime", 16),
];

const UNITS: [(&str, i64); 10] = [
    ("seconds", 1),
    ("second", 1),
    ("minutes", 60),
    ("minute", 60),
    ("hours", 3_600),
    ("hour", 3_600),
    ("days", 86_400),
    ("day", 86_400),
    ("weeks", 604_800),
    ("week", 604_800),
];

/// The smallest `uts` Slurm takes.
const MIN_UTS: i64 = 1_000_000;

impl Moment {
    /// Reads the text (see the module docs); the error says what is wrong, without the option.
    pub fn parse(text: &str) -> Result<Moment, String> {
        let form = if text.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("uts")) {
            // As `strtol` reads it: blanks, then an optional `+`.
            let rest = text[3..].trim_start_matches([' ', '\t']);
            let digits = rest.strip_prefix('+').unwrap_or(rest);
            let seconds = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse::<i64>().ok())
                .flatten()
                .filter(|s| *s >= MIN_UTS)
                .ok_or_else(|| format!("uts needs a Unix time of at least {MIN_UTS} seconds"))?;
            Form::Unix(seconds)
        } else {
            let parts = Reader::new(text).parts()?;
            if parts.is_empty() {
                return Err(format!("no time given: {MOMENT_FORMS}"));
            }
            Form::Parts(parts)
        };
        Ok(Moment {
            text: text.to_string(),
            form,
        })
    }

    /// The text as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The Unix time the text names on `clock`.
    pub fn at(&self, clock: &Clock) -> Result<i64, String> {
        let parts = match &self.form {
            Form::Unix(seconds) => return Ok(*seconds),
            Form::Parts(parts) => parts,
        };
        let now = clock.wall(clock.now);
        let day_after = clock.wall(clock.now.saturating_add(86_400)).date();
        let mut date: Option<(Option<i32>, u32, u32)> = None;
        let mut time: Option<(u32, u32, u32)> = None;
        // `now±COUNT` as the last part: that instant, not its wall-clock reading (which a
        // repeated hour makes ambiguous).
        let mut exact = None;
        for part in parts {
            exact = None;
            match *part {
                Part::Today => date = Some((Some(now.year()), now.month(), now.day())),
                Part::Tomorrow => {
                    date = Some((Some(day_after.year()), day_after.month(), day_after.day()))
                }
                Part::Now(delta) => {
                    let instant = clock
                        .now
                        .checked_add(delta)
                        .ok_or("the offset from now is too large")?;
                    exact = Some(instant);
                    let then = clock.wall(instant);
                    date = Some((Some(then.year()), then.month(), then.day()));
                    time = Some((then.hour(), then.minute(), then.second()));
                }
                Part::Time(h, m, s) => time = Some((h, m, s)),
                // A date without a year keeps one named before (`today`), as Slurm does.
                Part::Date(year, month, day) => {
                    let year = year.or(date.and_then(|(y, _, _)| y));
                    date = Some((year, month, day));
                }
            }
        }
        if let Some(instant) = exact {
            return Ok(instant);
        }
        let (hour, minute, second) = time.unwrap_or((0, 0, 0));
        let (year, month, day) = match date {
            Some(date) => date,
            // A time alone: today, unless it has passed (to the minute), then tomorrow.
            None if (hour, minute) > (now.hour(), now.minute()) => {
                (Some(now.year()), now.month(), now.day())
            }
            None => (Some(day_after.year()), day_after.month(), day_after.day()),
        };
        // A day without a year: this year's, unless it has passed (to the minute).
        let year = year.unwrap_or_else(|| {
            if (month, day, hour, minute) > (now.month(), now.day(), now.hour(), now.minute()) {
                now.year()
            } else {
                now.year() + 1
            }
        });
        let date = NaiveDate::from_ymd_opt(year, month, day)
            .ok_or_else(|| format!("{year:04}-{month:02}-{day:02} is not a day of the calendar"))?;
        let time = NaiveTime::from_hms_opt(hour, minute, second).ok_or("not a time of day")?;
        Ok(clock.unix(date.and_time(time)))
    }
}

/// Walks the text part by part.
struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Reader<'a> {
        Reader {
            text,
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.at + ahead).copied()
    }

    fn digit(&self, ahead: usize) -> Option<u32> {
        self.peek(ahead)
            .filter(u8::is_ascii_digit)
            .map(|b| u32::from(b - b'0'))
    }

    /// The word at the cursor, any case, consumed when it is there.
    fn word(&mut self, word: &str) -> bool {
        let there = self
            .text
            .get(self.at..self.at + word.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(word));
        if there {
            self.at += word.len();
        }
        there
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    fn bad(&self, why: &str) -> String {
        let rest = self.text.get(self.at..).unwrap_or("");
        format!("{why} at {rest:?}: {MOMENT_FORMS}")
    }

    fn parts(mut self) -> Result<Vec<Part>, String> {
        let mut parts = Vec::new();
        while let Some(b) = self.peek(0).filter(|b| *b != b'\n') {
            // Words first: Slurm skips a `T` before it reads them, so it refuses `Today`.
            if self.word("today") {
                parts.push(Part::Today);
            } else if self.word("tomorrow") {
                parts.push(Part::Tomorrow);
            } else if self.word("now") {
                parts.push(Part::Now(self.offset()?));
            } else if let Some(&(_, hour)) = NAMED_TIMES.iter().find(|(w, _)| self.word(w)) {
                parts.push(Part::Time(hour, 0, 0));
            } else if matches!(b, b' ' | b'\t' | b'-' | b'T') {
                self.at += 1;
            } else if !b.is_ascii_digit() {
                return Err(self.bad("not a time"));
            } else if self.peek(1) == Some(b':') || self.peek(2) == Some(b':') {
                parts.push(self.time()?);
            } else {
                parts.push(self.date()?);
            }
        }
        Ok(parts)
    }

    /// After `now`: nothing, or `+`/`-`, a count and an optional unit (blanks allowed).
    fn offset(&mut self) -> Result<i64, String> {
        self.skip_blanks();
        let sign = match self.peek(0) {
            None => return Ok(0),
            Some(b'+') => 1,
            Some(b'-') => -1,
            Some(_) => return Err(self.bad("now takes +COUNT or -COUNT")),
        };
        self.at += 1;
        let mut count: i64 = 0;
        let mut digits = 0;
        let mut unit = 1;
        loop {
            self.skip_blanks();
            match self.peek(0) {
                Some(b) if b.is_ascii_digit() => {
                    count = count
                        .checked_mul(10)
                        .and_then(|c| c.checked_add(i64::from(b - b'0')))
                        .ok_or_else(|| self.bad("the count is too large"))?;
                    digits += 1;
                    self.at += 1;
                }
                Some(_) if digits > 0 => {
                    match UNITS.iter().find(|(w, _)| self.word(w)) {
                        Some(&(_, seconds)) => unit = seconds,
                        None => {
                            return Err(
                                self.bad("not a unit (seconds, minutes, hours, days, weeks)")
                            )
                        }
                    }
                    break;
                }
                _ => break,
            }
        }
        if digits == 0 {
            return Err(self.bad("now+ and now- need a count"));
        }
        count
            .checked_mul(unit)
            .map(|c| sign * c)
            .ok_or_else(|| self.bad("the offset is too large"))
    }

    /// `H:MM[:SS]` or `HH:MM[:SS]`, then blanks and `AM`/`PM` if given.
    fn time(&mut self) -> Result<Part, String> {
        let two = |this: &mut Self, what: &str, max: u32| -> Result<u32, String> {
            match (this.digit(0), this.digit(1)) {
                (Some(a), Some(b)) if a * 10 + b <= max => {
                    this.at += 2;
                    Ok(a * 10 + b)
                }
                (Some(_), Some(_)) => Err(this.bad(&format!("the {what} is above {max}"))),
                _ => Err(this.bad(&format!("the {what} needs two digits"))),
            }
        };
        let mut hour = self.digit(0).unwrap_or(0);
        self.at += 1;
        if let Some(d) = self.digit(0) {
            hour = hour * 10 + d;
            self.at += 1;
        }
        if hour > 23 {
            return Err(self.bad("the hour is above 23"));
        }
        if self.peek(0) != Some(b':') {
            return Err(self.bad("the hour is not followed by a colon"));
        }
        self.at += 1;
        let minute = two(self, "minute", 59)?;
        let second = if self.peek(0) == Some(b':') {
            self.at += 1;
            two(self, "second", 59)?
        } else {
            0
        };
        let mark = self.at;
        self.skip_blanks();
        if self.word("pm") {
            hour = match hour {
                12 => 12,
                h if h < 12 => h + 12,
                _ => return Err(self.bad("PM needs an hour from 1 to 12")),
            };
        } else if self.word("am") {
            hour = match hour {
                12 => 0,
                h if h < 12 => h,
                _ => return Err(self.bad("AM needs an hour from 1 to 12")),
            };
        } else {
            self.at = mark;
        }
        Ok(Part::Time(hour, minute, second))
    }

    /// `YYYY-MM-DD`, or `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]` (one-digit months and days too).
    fn date(&mut self) -> Result<Part, String> {
        let number = |this: &mut Self, max_digits: usize| -> Option<u32> {
            let mut n = None;
            for _ in 0..max_digits {
                let Some(d) = this.digit(0) else { break };
                n = Some(n.unwrap_or(0) * 10 + d);
                this.at += 1;
            }
            n
        };
        let month_day = |this: &mut Self, month: Option<u32>, day: Option<u32>| {
            let month = month.filter(|m| (1..=12).contains(m));
            let month = month.ok_or_else(|| this.bad("the month is not 1 to 12"))?;
            let day = day.filter(|d| (1..=31).contains(d));
            let day = day.ok_or_else(|| this.bad("the day is not 1 to 31"))?;
            Ok::<_, String>((month, day))
        };
        if self.peek(4) == Some(b'-') && self.peek(7) == Some(b'-') {
            let year = number(self, 4).filter(|_| self.peek(0) == Some(b'-'));
            let year = year.ok_or_else(|| self.bad("the year needs four digits"))?;
            self.at += 1;
            let month = number(self, 2).filter(|_| self.peek(0) == Some(b'-'));
            if month.is_some() {
                self.at += 1;
            }
            let day = number(self, 2);
            let (month, day) = month_day(self, month, day)?;
            return Ok(Part::Date(
                Some(i32::try_from(year).unwrap_or(0)),
                month,
                day,
            ));
        }
        let month = number(self, 2);
        if matches!(self.peek(0), Some(b'.' | b'/')) {
            self.at += 1;
        }
        let day = number(self, 2);
        let (month, day) = month_day(self, month, day)?;
        if matches!(self.peek(0), Some(b'.' | b'/')) {
            self.at += 1;
        }
        let year = match (self.digit(0), self.digit(1)) {
            (None, _) => None,
            // `00` is no year to Slurm: the next such day.
            (Some(0), Some(0)) => {
                self.at += 2;
                None
            }
            (Some(a), Some(b)) => {
                self.at += 2;
                Some(2000 + i32::try_from(a * 10 + b).unwrap_or(0))
            }
            (Some(_), None) => return Err(self.bad("the year needs two digits")),
        };
        Ok(Part::Date(year, month, day))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-26 20:55:10 in Berlin (19:55:10 UTC), a Thursday in winter time.
    fn berlin() -> Clock {
        Clock {
            now: utc("2026-11-26T19:55:10"),
            zone: Zone::Named(chrono_tz::Europe::Berlin),
        }
    }

    fn utc(text: &str) -> i64 {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
            .unwrap()
            .and_utc()
            .timestamp()
    }

    fn at(text: &str) -> i64 {
        Moment::parse(text)
            .and_then(|m| m.at(&berlin()))
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn relative_times_count_from_now() {
        let now = berlin().now;
        assert_eq!(at("now"), now);
        assert_eq!(at("now+90"), now + 90);
        assert_eq!(at("now+1hour"), now + 3_600);
        assert_eq!(at("NOW + 2 days"), now + 2 * 86_400);
        assert_eq!(at("now-30minutes"), now - 1_800);
        assert_eq!(at("now+1week"), now + 604_800);
        assert_eq!(at("now+5seconds"), now + 5);
        assert_eq!(at("uts1764201600"), 1_764_201_600);
        assert_eq!(at("uts +1764201600"), 1_764_201_600, "as strtol reads it");
        assert_eq!(
            at("10:00\nanything"),
            at("10:00"),
            "a newline ends the text"
        );
    }

    #[test]
    fn a_time_alone_is_the_next_one() {
        // 20:55 local now: later today, or tomorrow once the minute has come.
        assert_eq!(at("22:00"), utc("2026-11-26T21:00:00"));
        assert_eq!(at("9:30pm"), utc("2026-11-26T20:30:00"));
        assert_eq!(at("9:30 PM"), utc("2026-11-26T20:30:00"));
        assert_eq!(
            at("20:55"),
            utc("2026-11-27T19:55:00"),
            "this minute has come"
        );
        assert_eq!(at("20:55:59"), utc("2026-11-27T19:55:59"));
        assert_eq!(at("20:56"), utc("2026-11-26T19:56:00"));
        assert_eq!(at("12:00am"), utc("2026-11-26T23:00:00"));
        assert_eq!(
            at("0:30am"),
            utc("2026-11-26T23:30:00"),
            "Slurm leaves 0 AM as 0"
        );
        assert_eq!(at("12:30pm"), utc("2026-11-27T11:30:00"));
        assert_eq!(at("midnight"), utc("2026-11-26T23:00:00"));
        assert_eq!(at("teatime"), utc("2026-11-27T15:00:00"));
        assert_eq!(at("elevenses"), utc("2026-11-27T10:00:00"));
    }

    #[test]
    fn dates_in_every_form() {
        let december_first = utc("2026-11-30T23:00:00");
        for text in [
            "2026-12-01",
            "12/01",
            "1201",
            "12.01",
            "12/1",
            "12/01/26",
            "120126",
        ] {
            assert_eq!(at(text), december_first, "{text}");
        }
        assert_eq!(at("2026-12-01T18:00"), utc("2026-12-01T17:00:00"));
        assert_eq!(at("2026-12-01 18:00:30"), utc("2026-12-01T17:00:30"));
        assert_eq!(at("12/01-18:00"), utc("2026-12-01T17:00:00"));
        assert_eq!(at("12.01.27"), utc("2027-11-30T23:00:00"));
        assert_eq!(at("12/01/00"), december_first, "00 is no year, as in Slurm");
        // Today's midnight has passed: the next 26 November.
        assert_eq!(at("11/26"), utc("2027-11-25T23:00:00"));
        assert_eq!(at("11/26 21:00"), utc("2026-11-26T20:00:00"));
        assert_eq!(at("tomorrow"), utc("2026-11-26T23:00:00"));
        assert_eq!(at("Tomorrow teatime"), utc("2026-11-27T15:00:00"));
        assert_eq!(
            at("today noon"),
            utc("2026-11-26T11:00:00"),
            "past: starts now"
        );
        assert_eq!(at("Today 23:00"), utc("2026-11-26T22:00:00"));
        assert_eq!(at("2026-12-01T18:00 tomorrow"), utc("2026-11-27T17:00:00"));
    }

    #[test]
    fn daylight_saving_edges_read_as_mktime_reads_them() {
        // 2027-03-28: 02:00 → 03:00 in Berlin; 2027-10-31: 03:00 → 02:00.
        assert_eq!(at("2027-03-28T02:30"), utc("2027-03-28T01:30:00"));
        assert_eq!(at("2027-03-28T03:30"), utc("2027-03-28T01:30:00"));
        assert_eq!(
            at("2027-10-31T02:30"),
            utc("2027-10-31T00:30:00"),
            "the earlier of the two"
        );
        // A count from now is an instant, also across a repeated hour.
        let fold = Clock {
            now: utc("2027-10-31T00:30:00"),
            ..berlin()
        };
        let hour_later = Moment::parse("now+1hour").unwrap().at(&fold);
        assert_eq!(hour_later, Ok(utc("2027-10-31T01:30:00")));
        assert_eq!(at("2027-07-01"), utc("2027-06-30T22:00:00"));
    }

    #[test]
    fn the_zone_is_the_clocks() {
        let utc_clock = Clock {
            zone: Zone::Named(chrono_tz::UTC),
            ..berlin()
        };
        let noon = Moment::parse("2026-12-01T12:00").unwrap();
        assert_eq!(noon.at(&utc_clock), Ok(utc("2026-12-01T12:00:00")));
        assert_eq!(noon.at(&berlin()), Ok(utc("2026-12-01T11:00:00")));
        assert_eq!(
            berlin().show(utc("2026-12-01T11:00:00")),
            "2026-12-01 12:00:00 +01:00"
        );
    }

    proptest::proptest! {
        /// Any text is read or refused, never a crash: multi-byte characters anywhere, and
        /// the pieces of the forms in any order.
        #[test]
        fn any_text_is_read_or_refused(
            text in "(\\PC|[0-9:/.T -]|now|uts|am|pm|[+-][0-9]{1,3}(hours|day)?){0,12}",
            now in 0i64..4_000_000_000,
        ) {
            let clock = Clock { now, ..berlin() };
            if let Ok(moment) = Moment::parse(&text) {
                let _ = moment.at(&clock);
            }
        }
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for bad in [
            "",
            "   ",
            "10pm",
            "25:00",
            "10:60",
            "10:5",
            "10:00:61",
            "13:00pm",
            "1x:30",
            "13/01",
            "00/10",
            "12/00",
            "12/32",
            "12/01/2",
            "2026-13-01",
            "2026-12-01t10:00",
            "now+",
            "now+5min",
            "now+x",
            "nowx",
            "now tomorrow",
            "now+99999999999999999999",
            "uts",
            "uts12",
            "utsx",
            "uts-1764201600",
            "yesterday",
            "next friday",
            "2026-é-01",
            "2026-12-é",
            "é",
            "12/é",
        ] {
            let read = Moment::parse(bad).and_then(|m| m.at(&berlin()));
            assert!(read.is_err(), "{bad:?} read as {read:?}");
        }
        // Parsed, but no such day.
        let feb30 = Moment::parse("02/30").unwrap().at(&berlin()).unwrap_err();
        assert!(feb30.contains("2027-02-30 is not a day"), "{feb30}");
        let four_digit_year = Moment::parse("12/01/2026").unwrap_err();
        assert!(four_digit_year.contains("month"), "{four_digit_year}");
    }
}
