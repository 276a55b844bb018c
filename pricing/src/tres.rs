//! Trackable resources (TRES) as Slurm prints them.
//!
//! `billing=22,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=4G,node=1` in any order, memory with a
//! K/M/G/T/P suffix (the `--noconvert` form always uses `M`), zero-valued entries omitted,
//! the empty string for "nothing allocated". Memory-like TRES (`mem`, `vmem`, `gres/gpumem`,
//! `bb/*`) are kept in megabytes, Slurm's own base unit; everything else is a plain count.

use std::fmt;

/// Errors from parsing a TRES string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TresError {
    #[error("TRES entry {0:?} is not name=value")]
    NotKeyValue(String),
    #[error("TRES {name} has an invalid value {value:?}")]
    BadValue { name: String, value: String },
    #[error("TRES {name}={value} is not a whole number of megabytes")]
    FractionalMegabytes { name: String, value: String },
    #[error("TRES {0} appears twice")]
    Duplicate(String),
}

/// A resource vector: name → count. Names are lower-case as Slurm prints them
/// (`cpu`, `mem`, `node`, `billing`, `gres/gpu`, `gres/gpu:h100`, `license/x`, …).
///
/// Kept as a small sorted vector: jobs carry a handful of entries and this is on the import
/// hot path, where a map per record would cost more than it saves.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tres {
    entries: Vec<(String, u64)>,
}

/// Whether a TRES name is measured in megabytes (and so takes a size suffix).
pub fn is_memory_like(name: &str) -> bool {
    name == "mem" || name == "vmem" || name == "gres/gpumem" || name.starts_with("bb/")
}

impl Tres {
    pub fn new() -> Tres {
        Tres::default()
    }

    /// Parses a Slurm TRES string. Whitespace around entries is tolerated; an empty string
    /// (or only whitespace) is an empty vector.
    pub fn parse(text: &str) -> Result<Tres, TresError> {
        let mut tres = Tres::new();
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| TresError::NotKeyValue(item.to_string()))?;
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim();
            if name.is_empty() {
                return Err(TresError::NotKeyValue(item.to_string()));
            }
            let count = if is_memory_like(&name) {
                parse_megabytes(&name, value)?
            } else {
                parse_count(&name, value)?
            };
            if tres.get(&name).is_some() {
                return Err(TresError::Duplicate(name));
            }
            tres.set(&name, count);
        }
        Ok(tres)
    }

    /// The count for `name`, if present.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// The count for `name`, or 0.
    pub fn count(&self, name: &str) -> u64 {
        self.get(name).unwrap_or(0)
    }

    pub fn set(&mut self, name: &str, count: u64) {
        match self.entries.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) => self.entries[i].1 = count,
            Err(i) => self.entries.insert(i, (name.to_string(), count)),
        }
    }

    pub fn cpu(&self) -> u64 {
        self.count("cpu")
    }
    /// Memory in megabytes.
    pub fn mem_mb(&self) -> u64 {
        self.count("mem")
    }
    pub fn nodes(&self) -> u64 {
        self.count("node")
    }
    /// Slurm's integer billing TRES, when it recorded one.
    pub fn billing(&self) -> Option<u64> {
        self.get("billing")
    }

    /// Total GPUs: `gres/gpu`, or the sum of the typed `gres/gpu:<type>` entries when the
    /// untyped total is absent (some sources print only the breakdown).
    pub fn gpus(&self) -> u64 {
        let typed: u64 = self.typed_gres("gpu").map(|(_, n)| n).sum();
        self.get("gres/gpu").unwrap_or(0).max(typed)
    }

    /// The typed breakdown of a GRES: `gres/gpu:h100=2` yields `("h100", 2)`.
    pub fn typed_gres<'a>(&'a self, gres: &'a str) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        self.entries.iter().filter_map(move |(name, count)| {
            let rest = name
                .strip_prefix("gres/")?
                .strip_prefix(gres)?
                .strip_prefix(':')?;
            Some((rest, *count))
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.entries.iter().map(|(n, c)| (n.as_str(), *c))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Display for Tres {
    /// Slurm's `--noconvert` form: sorted by name, memory in `M`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, count)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if is_memory_like(name) {
                write!(f, "{name}={count}M")?;
            } else {
                write!(f, "{name}={count}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Tres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tres({self})")
    }
}

fn parse_count(name: &str, value: &str) -> Result<u64, TresError> {
    value.parse::<u64>().map_err(|_| TresError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
    })
}

/// `1000M`, `1G`, `2.50G`, `16384` (no suffix = megabytes), `512K` only when a whole MB.
fn parse_megabytes(name: &str, value: &str) -> Result<u64, TresError> {
    let bad = || TresError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
    };
    let (number, power): (&str, i32) = match value.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&value[..value.len() - 1], -1),
        Some(b'M') => (&value[..value.len() - 1], 0),
        Some(b'G') => (&value[..value.len() - 1], 1),
        Some(b'T') => (&value[..value.len() - 1], 2),
        Some(b'P') => (&value[..value.len() - 1], 3),
        Some(b'0'..=b'9') => (value, 0),
        _ => return Err(bad()),
    };
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad());
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    if frac_part.len() > 12 {
        return Err(bad());
    }
    // value = mantissa / 10^scale (in the suffix unit); megabytes = value * 1024^power.
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    let scale = 10u128.pow(frac_part.len() as u32);
    let (numerator, denominator) = if power >= 0 {
        (
            mantissa
                .checked_mul(1024u128.pow(power as u32))
                .ok_or_else(bad)?,
            scale,
        )
    } else {
        (mantissa, scale * 1024)
    };
    if numerator % denominator != 0 {
        return Err(TresError::FractionalMegabytes {
            name: name.to_string(),
            value: value.to_string(),
        });
    }
    u64::try_from(numerator / denominator).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_slurm_prints() {
        let t = Tres::parse("billing=22,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=4G,node=1").unwrap();
        assert_eq!(
            (t.billing(), t.cpu(), t.mem_mb(), t.nodes(), t.gpus()),
            (Some(22), 4, 4096, 1, 2)
        );
        assert_eq!(t.typed_gres("gpu").collect::<Vec<_>>(), vec![("h100", 2)]);

        // slurmctld's id order and --noconvert memory
        let live = Tres::parse("cpu=2,mem=1024M,node=1,billing=2").unwrap();
        assert_eq!(live, Tres::parse("billing=2,cpu=2,mem=1G,node=1").unwrap());

        assert_eq!(Tres::parse("mem=2.50G").unwrap().mem_mb(), 2560);
        assert_eq!(Tres::parse("mem=7800M").unwrap().mem_mb(), 7800);
        assert_eq!(Tres::parse("mem=1T").unwrap().mem_mb(), 1024 * 1024);
        assert_eq!(Tres::parse("mem=2048K").unwrap().mem_mb(), 2);
        assert_eq!(Tres::parse("mem=16384").unwrap().mem_mb(), 16384);
        assert!(Tres::parse("").unwrap().is_empty());
        assert!(Tres::parse("  ").unwrap().is_empty());
        assert_eq!(Tres::parse("CPU=3").unwrap().cpu(), 3);
    }

    #[test]
    fn only_typed_gpus_still_count() {
        let t = Tres::parse("cpu=1,gres/gpu:a100=1,gres/gpu:h100=2").unwrap();
        assert_eq!(t.gpus(), 3);
    }

    #[test]
    fn refuses_garbage() {
        for text in [
            "cpu",
            "cpu=x",
            "mem=1Q",
            "mem=512K",
            "cpu=-1",
            "=3",
            "cpu=1,cpu=2",
            "mem=G",
        ] {
            assert!(Tres::parse(text).is_err(), "{text} should be refused");
        }
    }

    #[test]
    fn display_is_the_noconvert_form() {
        let t = Tres::parse("node=1,mem=1G,cpu=2").unwrap();
        assert_eq!(t.to_string(), "cpu=2,mem=1024M,node=1");
        assert_eq!(Tres::parse(&t.to_string()).unwrap(), t);
    }
}
