//! [`Licenses`]: sbatch's `-L/--licenses=NAME[:COUNT][,NAME[:COUNT]…]`, the cluster-wide
//! resources (software licenses, or any count a site shares out) a job takes while it runs.
//!
//! Read as slurmctld reads them (`_build_license_list` in 22.05–24.11): entries separated by
//! `,` (or `;`), each a name and an optional count after `:` (or `=`, which slurmctld takes
//! from 23.11: bursar sends `:`, which every version takes), 1 when none is given; a name given
//! twice is one entry with the counts added. `matlab@flexlm` names a license a site tracks in
//! slurmdbd (sacctmgr resources); that is its name here, and in the TRES `license/matlab@flexlm`.
//!
//! Stricter than slurmctld where it would read a typo as something else: an empty entry
//! (`a,,b`, a trailing comma; slurmctld skips it), an empty or 0 count (`matlab:`,
//! `matlab:0`: slurmctld asks for no license), a sign, and blanks are refused naming the
//! problem. Refused as bursar cannot price them: Slurm 25.05's alternatives (`a|b`, any one
//! of them). Refused too: `(`/`)` (Slurm's `name(nodes)` is for reservations), two names
//! that differ only in case (one TRES to Slurm's accounting), and a list longer than the 1024
//! characters slurmctld takes, as bursar sends it.
//!
//! A job's licenses are priced as the TRES `license/<name>` (lower-cased, as every TRES name
//! is): a cluster whose weights charge for a license (`License/matlab=2.0`) charges the job for
//! the licenses it held, as slurmctld's billing TRES does.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::RequestError;

/// The most of one license one job may ask for: slurmctld reads a count into 32 signed bits.
pub const MAX_LICENSE_COUNT: u32 = i32::MAX as u32;

/// The longest list slurmctld takes (`_test_strlen(job_desc->licenses, "licenses", 1024)`), as
/// bursar sends it (`name:count`).
const MAX_TEXT: usize = 1024;

/// A job's licenses, parsed once at the edge ([`Licenses::parse`]) and carried validated: each
/// name once, in the order first given, with its count.
///
/// JSON: the sbatch text as slurmctld is sent it, `"matlab:2,ansys:1"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Licenses {
    entries: Vec<(String, u32)>,
}

impl Licenses {
    /// Reads sbatch's `--licenses` text; an error names `--licenses` and the problem.
    pub fn parse(text: &str) -> Result<Licenses, RequestError> {
        Licenses::parse_option("--licenses", text)
    }

    /// [`parse`](Self::parse), naming the option as the user wrote it (`-L`).
    pub(crate) fn parse_option(option: &str, text: &str) -> Result<Licenses, RequestError> {
        parse(text).map_err(|reason| RequestError::invalid_value(option, text, reason))
    }

    /// Each license and how many of it the job takes.
    pub fn entries(&self) -> impl Iterator<Item = (&str, u32)> {
        self.entries
            .iter()
            .map(|(name, count)| (name.as_str(), *count))
    }

    /// The TRES each license is priced as: `license/<name>`, lower-cased.
    pub fn tres(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.entries().map(|(name, count)| {
            (
                format!("license/{}", name.to_ascii_lowercase()),
                u64::from(count),
            )
        })
    }

    /// The text to send slurmctld (`licenses`): `name:count` entries joined by `,`.
    pub fn as_slurm(&self) -> String {
        self.to_string()
    }
}

fn parse(text: &str) -> Result<Licenses, String> {
    if text.is_empty() {
        return Err("no license named".into());
    }
    if text.contains('|') {
        return Err(
            "alternatives (a|b: any one of them, Slurm 25.05) are not supported by \
                    bursar, which prices the licenses a job takes: name the one it needs"
                .into(),
        );
    }
    if let Some(c) = text.chars().find(|c| matches!(c, '(' | ')')) {
        return Err(format!(
            "{c:?} is in no license name (Slurm's name(nodes) form is for reservations, not jobs)"
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_whitespace()) {
        return Err(format!(
            "{} in the list: write entries as name:count, separated by commas alone",
            if c == ' ' { "a blank" } else { "white space" }
        ));
    }
    let mut entries: Vec<(String, u32)> = Vec::new();
    for entry in text.split([',', ';']) {
        if entry.is_empty() {
            return Err("an empty entry (two commas, or one at either end)".into());
        }
        let (name, count) = match entry.find([':', '=']) {
            Some(at) => (&entry[..at], Some((&entry[at..at + 1], &entry[at + 1..]))),
            None => (entry, None),
        };
        check_name(name, entry)?;
        let count = match count {
            None => 1,
            Some((separator, digits)) => parse_count(name, separator, digits)?,
        };
        // slurmctld keeps `MATLAB` and `matlab` apart, but accounts (and bills) both as the one
        // TRES `license/matlab`, and which count it records depends on its version.
        if let Some((other, _)) = entries
            .iter()
            .find(|(n, _)| n != name && n.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "{other} and {name} are one license to Slurm's accounting (license/{}): give \
                 one of them",
                name.to_ascii_lowercase()
            ));
        }
        match entries.iter_mut().find(|(n, _)| n == name) {
            // As slurmctld: a name given twice is one entry with both counts.
            Some((_, total)) => {
                *total = total
                    .checked_add(count)
                    .filter(|t| *t <= MAX_LICENSE_COUNT)
                    .ok_or_else(|| format!("{name}: more than {MAX_LICENSE_COUNT} licenses"))?;
            }
            None => entries.push((name.to_string(), count)),
        }
    }
    let licenses = Licenses { entries };
    let length = licenses.to_string().len();
    if length > MAX_TEXT {
        return Err(format!(
            "the list is {length} characters as bursar sends it (name:count), more than the \
             {MAX_TEXT} Slurm takes"
        ));
    }
    Ok(licenses)
}

/// Whether `name` can name one license (in bursar's configuration, `submit.licenses`).
pub fn is_license_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(license_name_char)
}

fn license_name_char(c: char) -> bool {
    c.is_ascii_graphic()
        && !matches!(
            c,
            '"' | '\'' | '\\' | '#' | ',' | ';' | ':' | '=' | '|' | '(' | ')'
        )
}

fn check_name(name: &str, entry: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{entry:?} names no license"));
    }
    match name.chars().find(|c| !license_name_char(*c)) {
        Some(c) => Err(format!(
            "license name {name:?} has {c:?}, which no Slurm license name has"
        )),
        None => Ok(()),
    }
}

fn parse_count(name: &str, separator: &str, digits: &str) -> Result<u32, String> {
    if digits.is_empty() {
        return Err(format!(
            "{name}: no count after the `{separator}` (leave both out for one license)"
        ));
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{name}: the count {digits:?} is not a whole number"
        ));
    }
    match digits.parse::<u32>() {
        Ok(0) => Err(format!(
            "{name}: a count of 0 asks for no license; leave the license out"
        )),
        Ok(count) if count <= MAX_LICENSE_COUNT => Ok(count),
        _ => Err(format!(
            "{name}: the count {digits} is more than Slurm counts ({MAX_LICENSE_COUNT})"
        )),
    }
}

impl fmt::Display for Licenses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, count)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}:{count}")?;
        }
        Ok(())
    }
}

impl Serialize for Licenses {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Licenses {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Licenses::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Licenses {
        Licenses::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn refused(text: &str, has: &str) {
        let error = Licenses::parse(text).unwrap_err().to_string();
        assert!(error.contains(has), "{text:?}: {error}");
        assert!(error.contains("--licenses"), "{error}");
    }

    #[test]
    fn reads_entries_as_slurmctld_does() {
        assert_eq!(ok("matlab").to_string(), "matlab:1");
        assert_eq!(ok("matlab:2,ansys").to_string(), "matlab:2,ansys:1");
        assert_eq!(ok("matlab=2;ansys:3").to_string(), "matlab:2,ansys:3");
        // A name twice is one entry, the counts added, where it was first named.
        assert_eq!(
            ok("matlab:1,ansys,matlab:2").to_string(),
            "matlab:3,ansys:1"
        );
        assert_eq!(ok("fluent@flexlm:4").to_string(), "fluent@flexlm:4");
        // Names keep their case for slurmctld; the TRES name is lower-cased.
        let mixed = ok("MATLAB:2,Fluent@FlexLM,MATLAB");
        assert_eq!(mixed.as_slurm(), "MATLAB:3,Fluent@FlexLM:1");
        assert_eq!(
            mixed.tres().collect::<Vec<_>>(),
            [
                ("license/matlab".to_string(), 3),
                ("license/fluent@flexlm".to_string(), 1)
            ]
        );
        assert_eq!(
            ok(&format!("a:{MAX_LICENSE_COUNT}")).entries().next(),
            Some(("a", MAX_LICENSE_COUNT))
        );
    }

    #[test]
    fn refuses_what_slurmctld_would_misread_or_bursar_cannot_price() {
        refused("", "no license");
        refused("a,,b", "empty entry");
        refused("a,", "empty entry");
        refused(",a", "empty entry");
        refused("a:", "no count after the `:`");
        refused("a=", "no count after the `=`");
        refused("a:0", "count of 0");
        refused("a:-1", "not a whole number");
        refused("a:+1", "not a whole number");
        refused("a:1x", "not a whole number");
        refused("a:2147483648", "more than Slurm counts");
        refused("a:99999999999999999999", "more than Slurm counts");
        refused("a:2147483647,a:1", "more than");
        refused("a: 1", "a blank");
        refused("a:1,\tb", "white space");
        refused(":2", "names no license");
        refused("a|b", "alternatives");
        refused("a(n[1-2]):1", "for reservations");
        refused("MATLAB:1,matlab:2", "MATLAB and matlab are one license");
        // slurmctld's limit on the text it is sent, which adds `:1` to a bare name
        let names = |n: usize| -> String {
            (0..n)
                .map(|i| format!("lic{i:03}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(names(100).len(), 699);
        assert_eq!(ok(&names(100)).as_slurm().len(), 899);
        assert_eq!(names(130).len(), 909);
        refused(&names(130), "1169 characters as bursar sends it");
        refused("ma\"tlab", "which no Slurm license name has");
        refused("mätlab", "which no Slurm license name has");
    }

    #[test]
    fn json_is_the_sbatch_text() {
        let licenses = ok("matlab:2,ansys");
        assert_eq!(
            serde_json::to_value(&licenses).unwrap(),
            serde_json::json!("matlab:2,ansys:1")
        );
        let back: Licenses = serde_json::from_str("\"matlab=2,ansys\"").unwrap();
        assert_eq!(back, licenses);
        let error = serde_json::from_str::<Licenses>("\"a:0\"").unwrap_err();
        assert!(error.to_string().contains("count of 0"), "{error}");
        assert!(serde_json::from_str::<Licenses>("2").is_err());
    }
}
