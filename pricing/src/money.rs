//! Exact money: integer millionths of a currency unit.
//!
//! Every amount bursar stores or prints is a [`Money`]: an `i64` count of micros and the
//! [`Currency`] it is in. Decimal text is parsed and printed exactly; arithmetic is checked.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use ethnum::I256;
use serde::{Deserialize, Serialize};

/// Micros per currency unit.
pub const MICROS_PER_UNIT: i64 = 1_000_000;

/// Errors from parsing or combining money.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("{0:?} is not a decimal amount")]
    Invalid(String),
    #[error("{0:?} has more than 6 decimal places (bursar keeps micros)")]
    TooPrecise(String),
    #[error("amount {0:?} is out of range")]
    Overflow(String),
    #[error("cannot combine {left} with {right}")]
    CurrencyMismatch { left: Currency, right: Currency },
}

/// A currency code such as `su` (service units / core-hours) or `usd`.
///
/// Cheap to clone; compared by name. Display precision is configured per currency where
/// amounts are printed ([`format_micros`]); the stored value is always micros.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Currency(Arc<str>);

impl Currency {
    pub fn new(code: &str) -> Currency {
        Currency(Arc::from(code))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// An exact amount of one currency.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Money {
    pub micros: i64,
    pub currency: Currency,
}

impl Money {
    pub fn new(micros: i64, currency: Currency) -> Money {
        Money { micros, currency }
    }

    pub fn zero(currency: Currency) -> Money {
        Money {
            micros: 0,
            currency,
        }
    }

    /// Parses `"12.5"`, `"-0.000001"`, `"1e3"` is refused: only plain decimals are money.
    pub fn parse(text: &str, currency: Currency) -> Result<Money, MoneyError> {
        Ok(Money {
            micros: parse_micros(text)?,
            currency,
        })
    }

    pub fn checked_add(&self, other: &Money) -> Result<Money, MoneyError> {
        self.same_currency(other)?;
        self.micros
            .checked_add(other.micros)
            .map(|micros| Money {
                micros,
                currency: self.currency.clone(),
            })
            .ok_or_else(|| MoneyError::Overflow(format!("{} + {}", self.micros, other.micros)))
    }

    pub fn checked_sub(&self, other: &Money) -> Result<Money, MoneyError> {
        self.same_currency(other)?;
        self.micros
            .checked_sub(other.micros)
            .map(|micros| Money {
                micros,
                currency: self.currency.clone(),
            })
            .ok_or_else(|| MoneyError::Overflow(format!("{} - {}", self.micros, other.micros)))
    }

    fn same_currency(&self, other: &Money) -> Result<(), MoneyError> {
        if self.currency == other.currency {
            Ok(())
        } else {
            Err(MoneyError::CurrencyMismatch {
                left: self.currency.clone(),
                right: other.currency.clone(),
            })
        }
    }
}

impl fmt::Display for Money {
    /// `12.500000 usd` is printed as `12.5 usd`: exact, trailing zeros dropped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", format_micros(self.micros, 0), self.currency)
    }
}

/// Parses a plain decimal (`"-12.345"`, `"+3"`, `".5"`, `"7."`) into micros, exactly.
///
/// Underscores and exponents are refused; more than six decimal places is an error rather than
/// a silent rounding, because an amount typed by an admin must mean exactly what it says.
pub fn parse_micros(text: &str) -> Result<i64, MoneyError> {
    let t = text.trim();
    let invalid = || MoneyError::Invalid(text.to_string());
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        Some(_) => (false, t),
        None => return Err(invalid()),
    };
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((i, f)) => (i, f),
        None => (digits, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(invalid());
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(invalid());
    }
    let frac_trimmed = frac_part.trim_end_matches('0');
    if frac_trimmed.len() > 6 {
        return Err(MoneyError::TooPrecise(text.to_string()));
    }
    let overflow = || MoneyError::Overflow(text.to_string());
    let mut units: i128 = 0;
    for b in int_part.bytes() {
        units = units
            .checked_mul(10)
            .and_then(|u| u.checked_add(i128::from(b - b'0')))
            .ok_or_else(overflow)?;
        if units > i128::from(i64::MAX) {
            return Err(overflow());
        }
    }
    let mut frac: i128 = 0;
    for i in 0..6 {
        let digit = frac_trimmed.as_bytes().get(i).map_or(0, |b| b - b'0');
        frac = frac * 10 + i128::from(digit);
    }
    let magnitude = units * i128::from(MICROS_PER_UNIT) + frac;
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| overflow())
}

/// Prints micros as an exact decimal with at least `min_decimals` places and no more than the
/// amount needs: `format_micros(12_500_000, 2)` is `"12.50"`, `format_micros(1, 2)` is `"0.000001"`.
pub fn format_micros(micros: i64, min_decimals: u8) -> String {
    let negative = micros < 0;
    let magnitude = micros.unsigned_abs();
    let units = magnitude / MICROS_PER_UNIT as u64;
    let frac = magnitude % MICROS_PER_UNIT as u64;
    let mut frac_digits = format!("{frac:06}");
    let keep = usize::from(min_decimals.min(6));
    while frac_digits.len() > keep && frac_digits.ends_with('0') {
        frac_digits.pop();
    }
    let sign = if negative { "-" } else { "" };
    if frac_digits.is_empty() {
        format!("{sign}{units}")
    } else {
        format!("{sign}{units}.{frac_digits}")
    }
}

/// `a × b`, `None` on overflow. ethnum's own `checked_mul` detects overflow with a 256-bit
/// division, which dominated pricing; when the operands' magnitudes have at most 254 bits
/// between them the product cannot overflow and a plain multiplication is exact.
pub(crate) fn checked_mul(a: I256, b: I256) -> Option<I256> {
    let bits = |x: I256| 256 - x.unsigned_abs().leading_zeros();
    if bits(a) + bits(b) <= 254 {
        Some(a.wrapping_mul(b))
    } else {
        a.checked_mul(b)
    }
}

/// `numerator / denominator` rounded half-to-even: the one rounding rule of bursar.
///
/// A charge is computed exactly as a fraction of micros and rounded once, here. Half-to-even
/// (banker's rounding) keeps the rounding errors of many charges from drifting one way.
/// `None` when `denominator` is 0 or the result does not fit.
pub fn divide_half_even(numerator: I256, denominator: I256) -> Option<I256> {
    // Almost every charge fits 128 bits, where division is several times cheaper.
    if let (Ok(n), Ok(d)) = (i128::try_from(numerator), i128::try_from(denominator)) {
        if d > 0 && n != i128::MIN {
            return Some(I256::from(divide_half_even_i128(n, d)));
        }
    }
    if denominator == I256::ZERO {
        return None;
    }
    let (numerator, denominator) = if denominator < 0 {
        (numerator.checked_neg()?, denominator.checked_neg()?)
    } else {
        (numerator, denominator)
    };
    // Truncates toward zero; the remainder has the sign of the numerator.
    let quotient = numerator / denominator;
    let remainder = (numerator % denominator).abs();
    let away = if numerator < 0 { -I256::ONE } else { I256::ONE };
    // Compare remainder with half the denominator without doubling (which could overflow).
    match remainder.cmp(&(denominator - remainder)) {
        Ordering::Less => Some(quotient),
        Ordering::Greater => quotient.checked_add(away),
        Ordering::Equal if quotient % 2 == 0 => Some(quotient),
        Ordering::Equal => quotient.checked_add(away),
    }
}

/// [`divide_half_even`] on 128 bits for `denominator > 0` and `numerator > i128::MIN`, where
/// nothing can overflow (|quotient| + 1 ≤ |numerator| whenever it rounds away). The same rule,
/// written twice only for speed.
fn divide_half_even_i128(numerator: i128, denominator: i128) -> i128 {
    let quotient = numerator / denominator;
    let remainder = (numerator % denominator).abs();
    let away = if numerator < 0 { -1 } else { 1 };
    match remainder.cmp(&(denominator - remainder)) {
        Ordering::Less => quotient,
        Ordering::Equal if quotient % 2 == 0 => quotient,
        _ => quotient + away,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_decimals() {
        let cases = [
            ("0.25", 250_000),
            ("12", 12_000_000),
            ("-0.000001", -1),
            ("+3.5", 3_500_000),
            (".5", 500_000),
            ("7.", 7_000_000),
            ("1.2500000", 1_250_000),
            ("9223372036854.775807", i64::MAX),
            ("-9223372036854.775808", i64::MIN),
        ];
        for (text, micros) in cases {
            assert_eq!(parse_micros(text), Ok(micros), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_exact_money() {
        for text in [
            "",
            "-",
            ".",
            "1e3",
            "1_000",
            "0.0000001",
            "abc",
            "1.2.3",
            "9223372036854.775808",
            "NaN",
        ] {
            assert!(parse_micros(text).is_err(), "{text} should be refused");
        }
    }

    #[test]
    fn prints_exactly() {
        assert_eq!(format_micros(12_500_000, 2), "12.50");
        assert_eq!(format_micros(12_500_000, 0), "12.5");
        assert_eq!(format_micros(1, 2), "0.000001");
        assert_eq!(format_micros(-1_000_000, 2), "-1.00");
        assert_eq!(format_micros(0, 0), "0");
        assert_eq!(format_micros(i64::MIN, 0), "-9223372036854.775808");
    }

    #[test]
    fn checked_arithmetic_refuses_mixed_currencies_and_overflow() {
        let su = Currency::new("su");
        let usd = Currency::new("usd");
        let a = Money::new(5, su.clone());
        assert!(a.checked_add(&Money::new(1, usd)).is_err());
        assert!(Money::new(i64::MAX, su.clone())
            .checked_add(&Money::new(1, su.clone()))
            .is_err());
        assert_eq!(
            a.checked_sub(&Money::new(7, su.clone())).unwrap().micros,
            -2
        );
    }

    #[test]
    fn rounds_half_to_even() {
        let round =
            |n: i64, d: i64| divide_half_even(I256::from(n), I256::from(d)).map(|q| q.as_i64());
        let cases = [
            ((5, 2), 2),
            ((7, 2), 4),
            ((-5, 2), -2),
            ((-7, 2), -4),
            ((1, 3), 0),
            ((2, 3), 1),
            ((-2, 3), -1),
            ((10, 5), 2),
            ((0, 7), 0),
            ((5, -2), -2),
            ((1_000_001, 2), 500_000),
            ((1_000_003, 2), 500_002),
        ];
        for ((n, d), expected) in cases {
            assert_eq!(round(n, d), Some(expected), "{n}/{d}");
        }
        assert_eq!(round(1, 0), None);
        assert_eq!(divide_half_even(I256::MIN, -I256::ONE), None);
        assert_eq!(divide_half_even(I256::MAX, I256::MAX), Some(I256::ONE));
        let min = I256::from(i128::MIN);
        assert_eq!(divide_half_even(min, -I256::ONE), Some(-min));
        assert_eq!(divide_half_even(min, I256::from(2)), Some(min / 2));
        assert_eq!(checked_mul(I256::MAX, I256::from(2)), None);
        assert_eq!(checked_mul(I256::MIN, -I256::ONE), None);
        assert_eq!(checked_mul(I256::MIN, I256::ONE), Some(I256::MIN));
        let half = I256::ONE << 127u32;
        assert_eq!(checked_mul(half, half), Some(I256::ONE << 254u32));
        assert_eq!(checked_mul(half << 1u32, half), None);
    }

    proptest::proptest! {
        #[test]
        fn rounding_is_within_half_and_ties_go_even(n in -10_000i64..10_000, d in 1i64..200) {
            let q = divide_half_even(I256::from(n), I256::from(d)).unwrap().as_i64();
            // |n - q·d| ≤ d/2, i.e. 2|n - q·d| ≤ d, with ties only on even q.
            let twice_error = 2 * (n - q * d).abs();
            proptest::prop_assert!(twice_error <= d);
            if twice_error == d {
                proptest::prop_assert_eq!(q % 2, 0);
            }
        }

        #[test]
        fn fast_multiplication_agrees_with_checked(
            a in proptest::num::i128::ANY, b in proptest::num::i128::ANY,
            sa in 0u32..128, sb in 0u32..128,
        ) {
            let (a, b) = (I256::from(a) << sa, I256::from(b) << sb);
            proptest::prop_assert_eq!(checked_mul(a, b), a.checked_mul(b));
        }

        #[test]
        fn both_widths_round_alike(n in proptest::num::i128::ANY, d in proptest::num::i128::ANY) {
            // Forces the 256-bit path by scaling both sides, which leaves the quotient unchanged.
            let wide = divide_half_even(I256::from(n) << 100u32, I256::from(d) << 100u32);
            let narrow = divide_half_even(I256::from(n), I256::from(d));
            proptest::prop_assert_eq!(wide, narrow);
        }

        #[test]
        fn print_then_parse_round_trips(micros in proptest::num::i64::ANY, min in 0u8..7) {
            proptest::prop_assert_eq!(parse_micros(&format_micros(micros, min)), Ok(micros));
        }
    }
}
