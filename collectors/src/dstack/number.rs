//! Exact reading of the JSON numbers dstack uses for money and the timestamps it uses for time.
//!
//! dstack's prices (`job_provisioning_data.price`, `offer.price`) and its `cost` are Python
//! floats, printed by pydantic as the shortest text that round-trips (`1.006`, `0.1578`,
//! `6.8064`). bursar never lets that text become an `f64`: the JSON is parsed with
//! `serde_json`'s `raw_value` feature, which hands over each number's text untouched, and the
//! text is turned into micros here with integer arithmetic only.
//!
//! Why `RawValue` and not `serde_json/arbitrary_precision`: cargo unifies features across the
//! workspace, and `arbitrary_precision` changes how every crate's `serde_json::Number` behaves
//! (numbers inside `#[serde(flatten)]` and untagged enums stop deserializing). `raw_value` is
//! additive: nothing else changes for the gateway or the ledger.

use chrono::{DateTime, NaiveDateTime, Utc};

/// An amount in micros read from decimal text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Micros {
    pub micros: i64,
    /// False when the text had more than six decimal places and was rounded (half-to-even).
    pub exact: bool,
}

/// Reads a JSON number's text (`0.1578`, `-2`, `1e-05`, `2.5E+3`) as micros, exactly when it
/// has at most six decimal places and rounded half-to-even to the micro otherwise.
///
/// Rounding instead of refusing: a price per hour like `0.26666666666666666` (some clouds
/// compute their prices) is the float dstack itself multiplies by; refusing it would leave a
/// real run uncharged, and 0.5 µ$/h is far below anything an invoice shows. [`Micros::exact`]
/// says whether it happened.
pub fn json_number_micros(text: &str) -> Result<Micros, String> {
    let t = text.trim();
    let invalid = || format!("{text:?} is not a JSON number");
    let (negative, unsigned) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (mantissa_text, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => {
            let exp_text = &unsigned[at + 1..];
            let digits = exp_text.trim_start_matches(['+', '-']);
            if digits.is_empty()
                || exp_text.len() - digits.len() > 1
                || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(invalid());
            }
            // Anything beyond a few hundred is not a price; keep the arithmetic bounded.
            let magnitude: i64 = if digits.len() > 4 {
                return Err(format!("{text:?} has an absurd exponent"));
            } else {
                digits.parse().map_err(|_| invalid())?
            };
            let exp = if exp_text.starts_with('-') {
                -magnitude
            } else {
                magnitude
            };
            (&unsigned[..at], exp)
        }
        None => (unsigned, 0),
    };
    let (int_part, frac_part) = match mantissa_text.split_once('.') {
        Some((i, f)) if !f.is_empty() => (i, f),
        Some(_) => return Err(invalid()),
        None => (mantissa_text, ""),
    };
    if int_part.is_empty()
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(invalid());
    }
    let digits: String = int_part
        .chars()
        .chain(frac_part.chars())
        .skip_while(|c| *c == '0')
        .collect();
    if digits.len() > 36 {
        return Err(format!("{text:?} has more digits than bursar reads"));
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| invalid())?
    };
    // value = mantissa × 10^(exponent − frac digits); micros = value × 10^6.
    let frac_len = i64::try_from(frac_part.len()).map_err(|_| invalid())?;
    let shift = exponent - frac_len + 6;
    let overflow = || format!("{text:?} is out of range for an amount");
    let (magnitude, exact) = if mantissa == 0 {
        (0i128, true)
    } else if shift >= 0 {
        if shift > 30 {
            return Err(overflow());
        }
        let factor = 10i128.pow(u32::try_from(shift).map_err(|_| overflow())?);
        (mantissa.checked_mul(factor).ok_or_else(overflow)?, true)
    } else if -shift > 38 {
        // Smaller than half a micro by a wide margin.
        (0, false)
    } else {
        let divisor = 10i128.pow(u32::try_from(-shift).map_err(|_| overflow())?);
        let quotient = mantissa / divisor;
        let remainder = mantissa % divisor;
        let rounded = match (remainder * 2).cmp(&divisor) {
            std::cmp::Ordering::Less => quotient,
            std::cmp::Ordering::Greater => quotient + 1,
            std::cmp::Ordering::Equal if quotient % 2 == 0 => quotient,
            std::cmp::Ordering::Equal => quotient + 1,
        };
        (rounded, remainder == 0)
    };
    let signed = if negative { -magnitude } else { magnitude };
    let micros = i64::try_from(signed).map_err(|_| overflow())?;
    Ok(Micros { micros, exact })
}

/// Reads a dstack timestamp: RFC 3339 (`2026-11-21T23:53:30.887797Z`, `…+00:00`), or a naive
/// ISO time, which dstack means as UTC.
pub fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .map(|t| t.and_utc())
        .map_err(|_| format!("{text:?} is not a timestamp"))
}

/// The text dstack accepts back for a timestamp, with exactly the precision it has
/// (`2026-01-05T16:20:00Z`, `2026-11-21T23:53:30.887797Z`).
pub fn format_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(text: &str) -> i64 {
        json_number_micros(text).unwrap().micros
    }

    #[test]
    fn reads_prices_exactly() {
        assert_eq!(micros("1.006"), 1_006_000);
        assert_eq!(micros("0.1578"), 157_800);
        assert_eq!(micros("5.672"), 5_672_000);
        assert_eq!(micros("0.0"), 0);
        assert_eq!(micros("-0.0"), 0);
        assert_eq!(micros("0"), 0);
        assert_eq!(micros("12"), 12_000_000);
        assert_eq!(micros("-2.5"), -2_500_000);
        assert_eq!(micros("0.000001"), 1);
        assert!(json_number_micros("0.000001").unwrap().exact);
    }

    #[test]
    fn reads_exponents() {
        assert_eq!(micros("1e-05"), 10);
        assert_eq!(micros("2.5E+3"), 2_500_000_000);
        assert_eq!(micros("1E2"), 100_000_000);
        assert_eq!(micros("0.0001e0"), 100);
    }

    #[test]
    fn rounds_beyond_micros_half_to_even() {
        let m = json_number_micros("0.26666666666666666").unwrap();
        assert_eq!(
            m,
            Micros {
                micros: 266_667,
                exact: false
            }
        );
        assert_eq!(micros("0.0000005"), 0);
        assert_eq!(micros("0.0000015"), 2);
        assert_eq!(micros("0.0000025"), 2);
        assert_eq!(micros("-0.0000015"), -2);
        assert_eq!(micros("1e-300"), 0);
    }

    #[test]
    fn refuses_what_is_not_a_number() {
        for bad in [
            "", "-", "abc", "1.", ".5", "1..2", "1e", "1e+", "1e--3", "0x10", "1,5", "null",
            "\"1.0\"", "1e99999",
        ] {
            assert!(json_number_micros(bad).is_err(), "{bad:?}");
        }
        assert!(json_number_micros("1e40").is_err());
        assert!(json_number_micros("9223372036854.775808").is_err());
    }

    #[test]
    fn times_round_trip_at_their_precision() {
        for text in [
            "2026-01-05T16:20:00Z",
            "2026-11-21T23:53:30.887797Z",
            "2026-11-21T23:53:30.800Z",
        ] {
            assert_eq!(format_time(&parse_time(text).unwrap()), text);
        }
        assert_eq!(
            parse_time("2026-01-05T16:20:00+00:00").unwrap(),
            parse_time("2026-01-05T16:20:00Z").unwrap()
        );
        assert_eq!(
            parse_time("2026-01-05T16:20:00.5").unwrap(),
            parse_time("2026-01-05T16:20:00.500Z").unwrap()
        );
        assert!(parse_time("yesterday").is_err());
    }
}
