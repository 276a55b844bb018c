//! Exact decimals for rates, weights and factors: `"0.0425"`, `"2.0"`, `"-1"`.
//!
//! A [`Decimal`] is `mantissa / 10^scale` with at most [`MAX_SCALE`] fractional digits, kept
//! normalized (no trailing zeros in the fraction) so that equal values compare equal. It is
//! parsed from text, never from binary floating point; see [`Decimal`]'s `Deserialize` for the
//! one place where a YAML number that serde already turned into an `f64` is read back as text.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use ethnum::I256;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most fractional digits a [`Decimal`] keeps. Twelve covers every price and weight seen in
/// practice (cloud catalogues use at most 8) and keeps products of a few decimals within i128.
pub const MAX_SCALE: u32 = 12;

/// Errors from parsing a decimal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("{0:?} is not a plain decimal number")]
    Invalid(String),
    #[error("{0:?} has more than 12 decimal places")]
    TooPrecise(String),
    #[error("{0:?} is out of range")]
    Overflow(String),
}

/// An exact decimal `mantissa / 10^scale`, `scale <= 12`, normalized.
///
/// Deserializes from a string (preferred: `"0.0425"`), an integer, or a YAML/JSON float. A float
/// has already been through `f64` by the time serde hands it over; it is read back with Rust's
/// shortest round-trip formatting, which gives exactly the digits written for any number of up
/// to 15 significant digits. Anything longer is refused with a request to quote it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    mantissa: i128,
    scale: u32,
}

impl Decimal {
    pub const ZERO: Decimal = Decimal {
        mantissa: 0,
        scale: 0,
    };
    pub const ONE: Decimal = Decimal {
        mantissa: 1,
        scale: 0,
    };

    /// `mantissa / 10^scale`, normalized. `None` when `scale > 12`.
    pub fn new(mantissa: i128, scale: u32) -> Option<Decimal> {
        (scale <= MAX_SCALE).then(|| normalize(mantissa, scale))
    }

    pub fn from_int(value: i64) -> Decimal {
        Decimal {
            mantissa: i128::from(value),
            scale: 0,
        }
    }

    /// The integer `m` such that the value is `m / 10^scale()`.
    pub fn mantissa(self) -> i128 {
        self.mantissa
    }

    /// The number of fractional digits (after normalization, so `2.50` has scale 1).
    pub fn scale(self) -> u32 {
        self.scale
    }

    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    pub fn is_negative(self) -> bool {
        self.mantissa < 0
    }

    /// `10^scale()` as an i128 (at most 10^12).
    pub fn denominator(self) -> i128 {
        pow10(self.scale)
    }
}

/// `10^exp` for the small exponents decimals use. Panics only past 10^38, which no caller
/// reaches: scales are capped at [`MAX_SCALE`].
pub(crate) fn pow10(exp: u32) -> i128 {
    10i128.pow(exp)
}

fn normalize(mut mantissa: i128, mut scale: u32) -> Decimal {
    if mantissa == 0 {
        return Decimal::ZERO;
    }
    while scale > 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        scale -= 1;
    }
    Decimal { mantissa, scale }
}

impl FromStr for Decimal {
    type Err = DecimalError;

    /// Plain decimals only: optional sign, digits, optional `.` and digits (`".5"` and `"7."`
    /// are accepted). Exponents, underscores and more than 12 significant fractional digits are
    /// refused rather than rounded: a rate must mean exactly what was written.
    fn from_str(text: &str) -> Result<Decimal, DecimalError> {
        let t = text.trim();
        let invalid = || DecimalError::Invalid(text.to_string());
        let (negative, digits) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            Some(_) => (false, t),
            None => return Err(invalid()),
        };
        let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (int_part.is_empty() && frac_part.is_empty())
            || !all_digits(int_part)
            || !all_digits(frac_part)
        {
            return Err(invalid());
        }
        let frac_part = frac_part.trim_end_matches('0');
        if frac_part.len() > MAX_SCALE as usize {
            return Err(DecimalError::TooPrecise(text.to_string()));
        }
        let overflow = || DecimalError::Overflow(text.to_string());
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(b - b'0')))
                .ok_or_else(overflow)?;
        }
        let signed = if negative { -mantissa } else { mantissa };
        Ok(normalize(signed, frac_part.len() as u32))
    }
}

impl fmt::Display for Decimal {
    /// Exact, shortest: `0.0425`, `2`, `-1.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let magnitude = self.mantissa.unsigned_abs();
        if self.scale == 0 {
            return write!(f, "{sign}{magnitude}");
        }
        let denominator = pow10(self.scale).unsigned_abs();
        let width = self.scale as usize;
        write!(
            f,
            "{sign}{}.{:0width$}",
            magnitude / denominator,
            magnitude % denominator
        )
    }
}

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Decimal({self})")
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        // Cross-multiplying by at most 10^12 cannot overflow 256 bits.
        let left = I256::from(self.mantissa) * I256::from(other.denominator());
        let right = I256::from(other.mantissa) * I256::from(self.denominator());
        left.cmp(&right)
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Decimal {
    /// Always a string, so that no reader turns it into a float.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Decimal, D::Error> {
        deserializer.deserialize_any(DecimalVisitor)
    }
}

struct DecimalVisitor;

impl Visitor<'_> for DecimalVisitor {
    type Value = Decimal;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an exact decimal such as \"0.0425\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Decimal, E> {
        text.parse().map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Decimal, E> {
        Ok(Decimal::from_int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Decimal, E> {
        Ok(Decimal {
            mantissa: i128::from(value),
            scale: 0,
        })
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Decimal, E> {
        Ok(Decimal {
            mantissa: value,
            scale: 0,
        })
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Decimal, E> {
        decimal_from_parsed_float(value).map_err(E::custom)
    }
}

/// Recovers the decimal a user typed from the `f64` a YAML/JSON parser made of it.
///
/// This is the crate's only contact with floating point, and it does no arithmetic: Rust's `{}`
/// for `f64` prints the shortest digit string that parses back to the same `f64` (never an
/// exponent). For a literal of at most 15 significant digits that string is exactly the literal
/// (every such decimal survives the round trip through `f64`), so `2.0` gives `"2"` and `0.0425`
/// gives `"0.0425"`. Sixteen or more digits may not be what was typed, so they are refused.
fn decimal_from_parsed_float(value: f64) -> Result<Decimal, String> {
    if !value.is_finite() {
        return Err(format!("{value} is not a decimal number"));
    }
    let text = format!("{value}");
    let significant = text
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&b| b == b'0')
        .count();
    if significant > 15 {
        return Err(format!(
            "{text} has too many digits to be read exactly from a YAML number; write it as a \
             quoted string"
        ));
    }
    text.parse().map_err(|e: DecimalError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    #[test]
    fn parses_exactly_and_normalizes() {
        let cases = [
            ("0.0425", 425, 4),
            ("2.0", 2, 0),
            ("-1", -1, 0),
            (".25", 25, 2),
            ("7.", 7, 0),
            ("+3.50", 35, 1),
            ("0.000000000001", 1, 12),
            ("1.0000000000000000", 1, 0),
            ("0", 0, 0),
            ("-0.0", 0, 0),
        ];
        for (text, mantissa, scale) in cases {
            let value = d(text);
            assert_eq!(
                (value.mantissa(), value.scale()),
                (mantissa, scale),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_inexact_or_malformed_text() {
        assert!(matches!(
            "0.0000000000001".parse::<Decimal>(),
            Err(DecimalError::TooPrecise(_))
        ));
        for text in [
            "", "-", ".", "1e3", "1_0", "abc", "1.2.3", "NaN", "inf", "- 1",
        ] {
            assert!(
                matches!(text.parse::<Decimal>(), Err(DecimalError::Invalid(_))),
                "{text}"
            );
        }
        assert!(matches!(
            "1".repeat(40).parse::<Decimal>(),
            Err(DecimalError::Overflow(_))
        ));
        let message = "0.1234567890123"
            .parse::<Decimal>()
            .unwrap_err()
            .to_string();
        assert!(message.contains("more than 12 decimal places"), "{message}");
    }

    #[test]
    fn prints_exactly() {
        for text in ["0.0425", "2", "-1.5", "0.000000000001", "123456789.5", "0"] {
            assert_eq!(d(text).to_string(), text);
        }
        assert_eq!(d("-0.05").to_string(), "-0.05");
    }

    #[test]
    fn orders_by_value() {
        assert!(d("0.25") < d("0.3"));
        assert!(d("-1") < d("0.000000000001"));
        assert_eq!(d("2.50").cmp(&d("2.5")), Ordering::Equal);
    }

    #[test]
    fn reads_yaml_strings_integers_and_floats() {
        let from_yaml = |text: &str| serde_yaml::from_str::<Decimal>(text);
        assert_eq!(from_yaml("\"0.0425\"").unwrap(), d("0.0425"));
        assert_eq!(from_yaml("0.0425").unwrap(), d("0.0425"));
        assert_eq!(from_yaml("2.0").unwrap(), d("2"));
        assert_eq!(from_yaml("3").unwrap(), d("3"));
        assert_eq!(from_yaml("-1").unwrap(), d("-1"));
        assert_eq!(from_yaml(".25").unwrap(), d("0.25"));
        assert_eq!(from_yaml("21.957642").unwrap(), d("21.957642"));
        assert_eq!(from_yaml("0.1").unwrap(), d("0.1"));
        assert!(from_yaml("0.12345678901234567").is_err());
        assert!(from_yaml(".nan").is_err());
        assert!(from_yaml("\"1e3\"").is_err());
        assert_eq!(
            serde_json::from_str::<Decimal>("13.3504").unwrap(),
            d("13.3504")
        );
        assert_eq!(serde_json::to_string(&d("0.25")).unwrap(), "\"0.25\"");
    }

    proptest::proptest! {
        #[test]
        fn display_then_parse_round_trips(mantissa in -10i128.pow(30)..10i128.pow(30), scale in 0u32..=12) {
            let value = Decimal::new(mantissa, scale).unwrap();
            proptest::prop_assert_eq!(value.to_string().parse::<Decimal>(), Ok(value));
        }
    }
}
