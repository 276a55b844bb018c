//! Sizes, counts and ranges as users type them: Slurm's `--mem` sizes, dstack's memory sizes
//! (`80GB`, `0.5GB`, `512MB`), and dstack's ranges (`2`, `2..`, `..8`, `24GB..80GB`).
//!
//! Everything is integer arithmetic; memory is kept in megabytes (MiB), Slurm's base unit and
//! the unit of the `mem` TRES.

use std::fmt;

/// Slurm's `--mem`/`--mem-per-cpu` size (`str_to_mbytes` in `proc_args.c`): a whole number
/// with an optional unit `K`, `M`, `G` or `T` (any case; default `M`), where `K` rounds up to
/// whole megabytes. Slurm only looks at the first character after the number, so `4GB` is
/// accepted as `4G`; bursar accepts exactly that trailing `B` and nothing else. No decimals
/// (Slurm refuses `1.5G` too) and no signs.
pub fn parse_slurm_megabytes(text: &str) -> Result<u64, String> {
    const FORMS: &str = "use a whole number with an optional unit K, M, G or T (default M)";
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(FORMS.into());
    }
    let value: u64 = number
        .parse()
        .map_err(|_| "the size is too large".to_string())?;
    let unit = unit
        .strip_suffix(['B', 'b'])
        .filter(|u| !u.is_empty())
        .unwrap_or(unit);
    let too_large = || "the size is too large".to_string();
    match unit {
        "" | "M" | "m" => Ok(value),
        "K" | "k" => Ok(value.div_ceil(1024)),
        "G" | "g" => value.checked_mul(1024).ok_or_else(too_large),
        "T" | "t" => value.checked_mul(1024 * 1024).ok_or_else(too_large),
        _ => Err(FORMS.into()),
    }
}

/// Renders megabytes the way [`parse_slurm_megabytes`] reads them back: `4G` when a whole
/// number of gigabytes, else `4000M`.
pub fn format_slurm_megabytes(mb: u64) -> String {
    if mb > 0 && mb.is_multiple_of(1024) {
        format!("{}G", mb / 1024)
    } else {
        format!("{mb}M")
    }
}

/// dstack's memory size (`Memory.parse`): a decimal number with an optional unit `MB`, `GB` or
/// `TB` (any case, spaces ignored; default GB). Fractions of a megabyte round **up**, so a
/// minimum is never under-asked (`1.3GB` is 1332 MB).
pub fn parse_dstack_megabytes(text: &str) -> Result<u64, String> {
    let compact: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    let (number, per_unit_mb) = if let Some(n) = compact.strip_suffix("tb") {
        (n, 1024 * 1024)
    } else if let Some(n) = compact.strip_suffix("gb") {
        (n, 1024)
    } else if let Some(n) = compact.strip_suffix("mb") {
        (n, 1)
    } else {
        (compact.as_str(), 1024)
    };
    let bad = || format!("{text:?} is not a size such as 512MB, 16GB, 0.5GB or 1TB");
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
        || frac_part.len() > 12
    {
        return Err(bad());
    }
    let too_large = || format!("{text:?} is too large");
    let mantissa: u128 = format!("{int_part}{frac_part}")
        .parse()
        .map_err(|_| too_large())?;
    let scale = 10u128.pow(frac_part.len() as u32);
    let mb = mantissa
        .checked_mul(per_unit_mb)
        .ok_or_else(too_large)?
        .div_ceil(scale);
    u64::try_from(mb).map_err(|_| too_large())
}

/// dstack's `min..max` syntax split into its ends: `"2"` → (2, 2), `"2.."` → (2, none),
/// `"..8"` → (none, 8). `None` when there are more than two ends.
fn split_range(text: &str) -> Option<(Option<&str>, Option<&str>)> {
    match text.split_once("..") {
        None => Some((Some(text), Some(text))),
        Some((min, max)) if !max.contains("..") => Some((
            (!min.is_empty()).then_some(min),
            (!max.is_empty()).then_some(max),
        )),
        Some(_) => None,
    }
}

/// A dstack count range (`cpu: 4..8`, `count: 2`), bounds inclusive, either end open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CountRange {
    pub min: Option<u32>,
    pub max: Option<u32>,
}

impl CountRange {
    pub fn exactly(n: u32) -> CountRange {
        CountRange {
            min: Some(n),
            max: Some(n),
        }
    }

    pub fn at_least(n: u32) -> CountRange {
        CountRange {
            min: Some(n),
            max: None,
        }
    }

    /// `4`, `4..`, `..8`, `4..8` (spaces ignored).
    pub fn parse(text: &str) -> Result<CountRange, String> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = || format!("{text:?} is not a count or a range such as 2, 2.., ..8 or 2..8");
        let (min, max) = split_range(&compact).ok_or_else(bad)?;
        let number = |s: Option<&str>| -> Result<Option<u32>, String> {
            s.map(|s| {
                if s.bytes().all(|b| b.is_ascii_digit()) {
                    s.parse::<u32>()
                        .map_err(|_| format!("{text:?} is too large"))
                } else {
                    Err(bad())
                }
            })
            .transpose()
        };
        CountRange {
            min: number(min)?,
            max: number(max)?,
        }
        .checked(text)
    }

    pub(crate) fn checked(self, text: &str) -> Result<CountRange, String> {
        match (self.min, self.max) {
            (None, None) => Err(format!("{text:?} is an empty range")),
            (Some(min), Some(max)) if min > max => Err(format!(
                "{text:?}: the range's minimum is above its maximum"
            )),
            _ => Ok(self),
        }
    }

    /// The lower bound, 0 when open: what a quote prices.
    pub fn min_or_zero(&self) -> u32 {
        self.min.unwrap_or(0)
    }
}

impl fmt::Display for CountRange {
    /// dstack's syntax, which [`CountRange::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => write!(f, "{a}"),
            (a, b) => {
                if let Some(a) = a {
                    write!(f, "{a}")?;
                }
                f.write_str("..")?;
                if let Some(b) = b {
                    write!(f, "{b}")?;
                }
                Ok(())
            }
        }
    }
}

/// A dstack memory/disk range in megabytes (`8GB..`, `24GB..80GB`, `512MB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SizeRange {
    pub min_mb: Option<u64>,
    pub max_mb: Option<u64>,
}

impl SizeRange {
    pub fn at_least_mb(mb: u64) -> SizeRange {
        SizeRange {
            min_mb: Some(mb),
            max_mb: None,
        }
    }

    /// `80GB`, `24GB..`, `..1TB`, `16GB..32GB`; a bare number is gigabytes.
    pub fn parse(text: &str) -> Result<SizeRange, String> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let (min, max) = split_range(&compact)
            .ok_or_else(|| format!("{text:?} is not a size or a range such as 24GB.."))?;
        SizeRange {
            min_mb: min.map(parse_dstack_megabytes).transpose()?,
            max_mb: max.map(parse_dstack_megabytes).transpose()?,
        }
        .checked(text)
    }

    pub(crate) fn checked(self, text: &str) -> Result<SizeRange, String> {
        match (self.min_mb, self.max_mb) {
            (None, None) => Err(format!("{text:?} is an empty range")),
            (Some(min), Some(max)) if min > max => Err(format!(
                "{text:?}: the range's minimum is above its maximum"
            )),
            _ => Ok(self),
        }
    }
}

impl fmt::Display for SizeRange {
    /// dstack's syntax in `GB` when whole gigabytes, else `MB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |mb: u64| {
            if mb.is_multiple_of(1024) {
                format!("{}GB", mb / 1024)
            } else {
                format!("{mb}MB")
            }
        };
        match (self.min_mb, self.max_mb) {
            (Some(a), Some(b)) if a == b => f.write_str(&size(a)),
            (a, b) => write!(
                f,
                "{}..{}",
                a.map(size).unwrap_or_default(),
                b.map(size).unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_sizes() {
        for (text, mb) in [
            ("4000", 4000),
            ("4000M", 4000),
            ("4000m", 4000),
            ("4G", 4096),
            ("4g", 4096),
            ("4GB", 4096),
            ("1T", 1024 * 1024),
            ("1024K", 1),
            ("1K", 1),
            ("1025K", 2),
            ("0", 0),
        ] {
            assert_eq!(parse_slurm_megabytes(text), Ok(mb), "{text}");
        }
        for text in ["", "G", "1.5G", "-1", "+4", "4X", "4GBB", "4 G", "4P"] {
            assert!(parse_slurm_megabytes(text).is_err(), "{text}");
        }
        for mb in [0, 1, 1023, 1024, 4096, 5000] {
            assert_eq!(parse_slurm_megabytes(&format_slurm_megabytes(mb)), Ok(mb));
        }
    }

    #[test]
    fn dstack_sizes_and_ranges() {
        assert_eq!(parse_dstack_megabytes("80GB"), Ok(81_920));
        assert_eq!(parse_dstack_megabytes("0.5GB"), Ok(512));
        assert_eq!(parse_dstack_megabytes("512MB"), Ok(512));
        assert_eq!(parse_dstack_megabytes("1TB"), Ok(1_048_576));
        assert_eq!(parse_dstack_megabytes("16"), Ok(16_384));
        assert_eq!(parse_dstack_megabytes("1.3GB"), Ok(1332));
        assert_eq!(parse_dstack_megabytes("8 gb"), Ok(8192));
        assert!(parse_dstack_megabytes("GB").is_err());
        assert!(parse_dstack_megabytes("1e3GB").is_err());

        let r = SizeRange::parse("24GB..").unwrap();
        assert_eq!((r.min_mb, r.max_mb), (Some(24_576), None));
        assert_eq!(r.to_string(), "24GB..");
        assert_eq!(
            SizeRange::parse("16GB..32GB").unwrap().to_string(),
            "16GB..32GB"
        );
        assert!(SizeRange::parse("..").is_err());
        assert!(SizeRange::parse("32GB..16GB").is_err());

        assert_eq!(CountRange::parse("2").unwrap(), CountRange::exactly(2));
        assert_eq!(CountRange::parse("2..").unwrap(), CountRange::at_least(2));
        assert_eq!(CountRange::parse("..8").unwrap().to_string(), "..8");
        assert!(CountRange::parse("8..2").is_err());
        assert!(CountRange::parse("1..2..3").is_err());
        assert!(CountRange::parse("x").is_err());
    }
}
