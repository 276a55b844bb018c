//! [`ArraySpec`]: sbatch's `-a/--array` index list, read as slurmctld reads it (its
//! `_valid_array_inx` and the token parser it calls, in 22.05 and 24.11 alike).
//!
//! ## Syntax
//! A comma-separated list of entries, each `N`, `N-M` (`N` to `M`) or `N-M:STEP` (every STEPth
//! index from `N` up to `M`), optionally in one pair of brackets (`[0-3,7]`, as `squeue` writes
//! arrays), then optionally `%MAX`: at most MAX tasks run at once. Indexes are whole numbers
//! from 0; one named twice, by two entries or overlapping ranges, is one task (slurmctld keeps
//! them in a bitmap). sbatch passes the text on untouched, and so does bursar
//! ([`ArraySpec::as_slurm`]): slurmctld also reads the step of the first `:` and the throttle
//! from it (`SLURM_ARRAY_TASK_STEP`, `ArrayTaskThrottle`).
//!
//! ## Limits
//! An index must be below the cluster's `MaxArraySize` (1001 unless the site sets it; at most
//! 4000001), a step too, and the text at most 4096 bytes long. bursar cannot know a cluster's
//! `MaxArraySize` (nor its `max_array_tasks`), so it takes indexes and steps up to 4000000: a
//! cluster with a smaller limit refuses the job when it is submitted, and nothing is held.
//!
//! ## Stricter than slurmctld
//! slurmctld reads each number with `strtol` and looks only at the character after it, so it
//! also takes text that is a typo more often than an intention; bursar refuses it, naming the
//! problem: blanks and signs (` 3`, `+3`, `-0`), an entry without digits (`-`, `%5` alone:
//! index 0 for slurmctld), empty entries (`1,,2`, a trailing comma), a `%` that is not the
//! list's end (`1%2,3`) or not followed by digits only (`0-9%x`, which slurmctld reads as no
//! limit), `%0` (no limit to slurmctld too: leave `%` out), a throttle above 2147483647
//! (slurmctld's `atoi` would wrap it), unbalanced or inner brackets (`[0-3`, `1]-3`), a list
//! that names no index at all (`,`: slurmctld then submits an ordinary job), and more than
//! 16000004 indexes named over all entries, overlaps included (a bound on the work of
//! counting them; no cluster runs an array that large).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::RequestError;

/// The largest index bursar takes: below the largest `MaxArraySize` Slurm allows (4000001).
pub const MAX_ARRAY_INDEX: u32 = 4_000_000;

/// Why [`MAX_ARRAY_INDEX`], in messages.
const SLURM_LIMIT: &str =
    ", the largest any Slurm cluster takes (indexes and steps stay below MaxArraySize, at most \
     4000001)";

/// slurmctld's limit on the text (`_test_job_desc_fields`: longer is `ESLURM_PATHNAME_TOO_LONG`).
const MAX_TEXT_BYTES: usize = 4096;

/// The largest `%MAX` slurmctld reads as written (`atoi` into an `int`).
const MAX_THROTTLE: u32 = 2_147_483_647;

/// The most indexes the entries may name together, overlaps included.
const MAX_NAMED: u64 = 4 * (MAX_ARRAY_INDEX as u64 + 1);

/// One entry of the list: `first`, `first-last` or `first-last:step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexRange {
    first: u32,
    last: u32,
    step: u32,
}

impl IndexRange {
    /// How many indexes the entry names.
    fn count(&self) -> u64 {
        u64::from((self.last - self.first) / self.step) + 1
    }
}

/// A job array as sbatch's `--array` asks for it: the task indexes and how many may run at
/// once. Parsed once at the edge ([`ArraySpec::parse`]) and carried validated; the module docs
/// give the syntax and what bursar refuses.
///
/// JSON: the sbatch text, `"0-9%2"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    /// As given, for slurmctld.
    text: String,
    entries: Vec<IndexRange>,
    tasks: u32,
    max_running: Option<u32>,
}

impl ArraySpec {
    /// Reads sbatch's `--array` text; an error names `--array` and the problem.
    pub fn parse(text: &str) -> Result<ArraySpec, RequestError> {
        ArraySpec::parse_option("--array", text)
    }

    /// [`parse`](Self::parse), naming the option as the user wrote it (`-a`).
    pub(crate) fn parse_option(option: &str, text: &str) -> Result<ArraySpec, RequestError> {
        parse(text).map_err(|reason| RequestError::invalid_value(option, text, reason))
    }

    /// The number of distinct task indexes: the jobs Slurm makes of the array.
    pub fn tasks(&self) -> u32 {
        self.tasks
    }

    /// `%MAX`: at most this many tasks run at once (`None`: as many as the cluster lets run).
    pub fn max_running(&self) -> Option<u32> {
        self.max_running
    }

    /// The text to send slurmctld (`job.array`): exactly as given, as sbatch sends it.
    pub fn as_slurm(&self) -> &str {
        &self.text
    }

    /// The distinct task indexes, ascending.
    pub fn indexes(&self) -> impl Iterator<Item = u32> {
        let words = bitmap(&self.entries);
        words.into_iter().enumerate().flat_map(|(at, word)| {
            let base = u32::try_from(at * 64).unwrap_or(u32::MAX);
            SetBits(word).map(move |bit| base + bit)
        })
    }
}

/// The positions of the bits set in a word, lowest first.
struct SetBits(u64);

impl Iterator for SetBits {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.0 == 0 {
            return None;
        }
        let bit = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(bit)
    }
}

/// The entries' indexes as a bitmap (64 per word), as long as the highest needs.
fn bitmap(entries: &[IndexRange]) -> Vec<u64> {
    let top = entries.iter().map(|e| e.last).max().unwrap_or(0);
    let mut words = vec![0u64; top as usize / 64 + 1];
    for entry in entries {
        if entry.step == 1 {
            set_run(&mut words, entry.first, entry.last);
        } else {
            let mut index = entry.first;
            while index <= entry.last {
                words[index as usize / 64] |= 1 << (index % 64);
                match index.checked_add(entry.step) {
                    Some(next) => index = next,
                    None => break,
                }
            }
        }
    }
    words
}

/// Sets bits `first..=last`, a word at a time.
fn set_run(words: &mut [u64], first: u32, last: u32) {
    let (first, last) = (first as usize, last as usize);
    let (first_word, last_word) = (first / 64, last / 64);
    let low = u64::MAX << (first % 64);
    let high = u64::MAX >> (63 - last % 64);
    if first_word == last_word {
        words[first_word] |= low & high;
        return;
    }
    words[first_word] |= low;
    for word in &mut words[first_word + 1..last_word] {
        *word = u64::MAX;
    }
    words[last_word] |= high;
}

/// A number of ASCII digits only, at most `max`; `what` names it in messages, `limit` says
/// where `max` comes from.
fn number(text: &str, what: &str, max: u32, limit: &str) -> Result<u32, String> {
    if text.is_empty() {
        return Err(format!("{what} is missing"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{what} {text:?} is not a whole number (digits only)"
        ));
    }
    let digits = text.trim_start_matches('0');
    match digits.parse::<u32>() {
        Ok(n) if n <= max => Ok(n),
        _ if digits.is_empty() => Ok(0),
        _ => Err(format!("{what} {text} is above {max}{limit}")),
    }
}

fn parse(text: &str) -> Result<ArraySpec, String> {
    if text.is_empty() {
        return Err("no task indexes: give them as N, N-M or N-M:STEP, comma-separated".into());
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!(
            "the list is {} bytes long; Slurm takes at most {MAX_TEXT_BYTES}",
            text.len()
        ));
    }
    let (list, throttle) = match text.split_once('%') {
        Some((list, throttle)) => (list, Some(throttle)),
        None => (text, None),
    };
    let max_running = throttle.map(parse_throttle).transpose()?;
    let inner = match (list.strip_prefix('['), list.strip_suffix(']')) {
        (Some(_), Some(_)) if list.len() >= 2 => &list[1..list.len() - 1],
        (None, None) => list,
        _ => {
            return Err(
                "unbalanced brackets: write [LIST] around the whole list, or none at all".into(),
            )
        }
    };
    if inner.contains(['[', ']']) {
        return Err("brackets may only enclose the whole list ([0-3,7])".into());
    }
    if inner.is_empty() {
        return Err("no task indexes: give them as N, N-M or N-M:STEP, comma-separated".into());
    }
    let mut entries = Vec::new();
    let mut named: u64 = 0;
    let several = inner.contains(',');
    for entry in inner.split(',') {
        if entry.is_empty() {
            return Err(
                "an entry of the list is empty (two commas in a row, or one at an end)".into(),
            );
        }
        let range = parse_entry(entry).map_err(|problem| {
            if several {
                format!("entry {entry}: {problem}")
            } else {
                problem
            }
        })?;
        named += range.count();
        if named > MAX_NAMED {
            return Err(format!(
                "the entries name more than {MAX_NAMED} indexes, counting overlaps: no Slurm \
                 cluster runs an array that large"
            ));
        }
        entries.push(range);
    }
    let tasks = bitmap(&entries)
        .iter()
        .map(|word| word.count_ones())
        .sum::<u32>();
    Ok(ArraySpec {
        text: text.to_string(),
        entries,
        tasks,
        max_running,
    })
}

/// What follows `%`: digits only, at least 1.
fn parse_throttle(text: &str) -> Result<u32, String> {
    if text.contains(['%', ',', '-', ':', '[', ']']) {
        return Err(format!(
            "`%{text}`: `%MAX` comes once, at the very end, after the indexes"
        ));
    }
    let what = "the number of tasks to run at once (%MAX)";
    match number(text, what, MAX_THROTTLE, ", the most Slurm reads")? {
        0 => Err(
            "%0 sets no limit (Slurm runs the tasks as if it were left out): leave it out, or \
             give at least 1"
                .into(),
        ),
        n => Ok(n),
    }
}

/// `N`, `N-M` or `N-M:STEP`.
fn parse_entry(entry: &str) -> Result<IndexRange, String> {
    let index = |text: &str| number(text, "index", MAX_ARRAY_INDEX, SLURM_LIMIT);
    let (range, step) = match entry.split_once(':') {
        Some((range, step)) => (range, Some(step)),
        None => (entry, None),
    };
    let Some((first, last)) = range.split_once('-') else {
        if step.is_some() {
            return Err("a step needs a range: N-M:STEP".into());
        }
        let n = index(range)?;
        return Ok(IndexRange {
            first: n,
            last: n,
            step: 1,
        });
    };
    let (first, last) = (index(first)?, index(last)?);
    if last < first {
        return Err(format!(
            "the range ends ({last}) before it starts ({first})"
        ));
    }
    let step = match step {
        None => 1,
        Some(step) => match number(step, "the step", MAX_ARRAY_INDEX, SLURM_LIMIT)? {
            0 => return Err("the step must be at least 1".into()),
            n => n,
        },
    };
    // The last index the step reaches: the bitmap need not be longer.
    let last = first + (last - first) / step * step;
    Ok(IndexRange { first, last, step })
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for ArraySpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for ArraySpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ArraySpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ArraySpec {
        ArraySpec::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn indexes(text: &str) -> Vec<u32> {
        spec(text).indexes().collect()
    }

    #[test]
    fn lists_ranges_steps_and_throttles_read_as_slurmctld_reads_them() {
        let s = spec("0-9%2");
        assert_eq!(
            (s.tasks(), s.max_running(), s.as_slurm()),
            (10, Some(2), "0-9%2")
        );
        assert_eq!(indexes("0-9%2"), (0..=9).collect::<Vec<_>>());
        assert_eq!(indexes("1,3,5-7"), [1, 3, 5, 6, 7]);
        assert_eq!(
            indexes("0-15:4"),
            [0, 4, 8, 12],
            "sbatch's man page example"
        );
        assert_eq!(indexes("0-10:3"), [0, 3, 6, 9], "the step stops short of M");
        assert_eq!(indexes("0-3:10"), [0], "a step past the range");
        assert_eq!(indexes("0-5:2%2"), [0, 2, 4]);
        assert_eq!(spec("0-5:2%2").max_running(), Some(2));
        assert_eq!(indexes("5-5"), [5]);
        assert_eq!(
            indexes("007,010"),
            [7, 10],
            "decimal, leading zeros and all"
        );
        assert_eq!(indexes("[0-3,7]%2"), [0, 1, 2, 3, 7], "squeue's brackets");
        assert_eq!(spec("[0-3,7]%2").as_slurm(), "[0-3,7]%2", "sent as given");
        assert_eq!(spec("7").max_running(), None);
        // Named twice, or by overlapping ranges: one task (slurmctld's bitmap).
        assert_eq!(spec("1-5,3-8").tasks(), 8);
        assert_eq!(spec("2,2,2").tasks(), 1);
        assert_eq!(
            spec("0-8:2,0-8:3").indexes().collect::<Vec<_>>(),
            [0, 2, 3, 4, 6, 8]
        );
        // Unordered entries come out ascending.
        assert_eq!(indexes("9,1-2,5"), [1, 2, 5, 9]);
        // Word boundaries of the bitmap.
        assert_eq!(indexes("63-65"), [63, 64, 65]);
        assert_eq!(spec("0-63").tasks(), 64);
        assert_eq!(spec("0-127").tasks(), 128);
        assert_eq!(spec("64").indexes().collect::<Vec<_>>(), [64]);
        assert_eq!(spec("1-200").tasks(), 200);
        assert_eq!(spec("3%1").max_running(), Some(1));
    }

    #[test]
    fn the_largest_arrays_any_cluster_takes() {
        let s = spec("4000000");
        assert_eq!(
            (s.tasks(), s.indexes().collect::<Vec<_>>()),
            (1, vec![4_000_000])
        );
        assert_eq!(spec("0-4000000").tasks(), 4_000_001);
        assert_eq!(spec("0-4000000:2,1-4000000:2").tasks(), 4_000_001);
        assert_eq!(spec("0-4000000:4000000").tasks(), 2);
        assert_eq!(
            spec("0-4000000%2147483647").max_running(),
            Some(2_147_483_647)
        );
        let last = spec("3999990-4000000").indexes().last();
        assert_eq!(last, Some(4_000_000));
        // Four full ranges are the most counted, overlaps included.
        assert_eq!(spec(&["0-4000000"; 4].join(",")).tasks(), 4_000_001);
        let error = ArraySpec::parse(&["0-4000000"; 5].join(",")).unwrap_err();
        assert!(error.to_string().contains("more than 16000004"), "{error}");
    }

    #[test]
    fn refuses_what_slurmctld_refuses_and_what_it_takes_by_accident() {
        let refused = |text: &str, has: &str| {
            let error = ArraySpec::parse(text).expect_err(text);
            let message = error.to_string();
            assert!(
                message.starts_with(&format!("invalid --array value {text:?}: ")),
                "{text:?}: {message}"
            );
            assert!(message.contains(has), "{text:?}: {message}");
            assert_eq!(error.code(), "invalid_option_value");
        };
        // What slurmctld refuses (ESLURM_INVALID_ARRAY, or a text too long).
        refused("", "no task indexes");
        refused("x", "not a whole number");
        refused("1-x", "not a whole number");
        refused("1.5", "not a whole number");
        refused("-5", "index is missing");
        refused("5-2", "the range ends (2) before it starts (5)");
        refused("1,5-2", "entry 5-2: the range ends");
        refused("0-9:0", "the step must be at least 1");
        refused("0-9:-1", "not a whole number");
        refused("3:2", "a step needs a range");
        refused("1-", "index is missing");
        refused("1-3-5", "not a whole number");
        refused("4000001", "index 4000001 is above 4000000");
        refused("0-4000001", "MaxArraySize");
        refused("0-9:4000001", "the step 4000001 is above 4000000");
        refused("99999999999999999999", "is above 4000000");
        refused(&"1,".repeat(2049), "Slurm takes at most 4096");
        // What slurmctld takes but reads differently than written: a typo more often than not.
        refused(" 3", "not a whole number");
        refused("+3", "not a whole number");
        refused("-0", "index is missing");
        refused("-", "index is missing");
        refused("%5", "no task indexes");
        refused(",", "entry of the list is empty");
        refused("1,,2", "entry of the list is empty");
        refused("1,2,", "entry of the list is empty");
        refused("0-3 ", "not a whole number");
        refused("0-9%0", "%0 sets no limit");
        refused("0-9%", "(%MAX) is missing");
        refused("0-9%x", "not a whole number");
        refused("0-9% 2", "not a whole number");
        refused("0-9%2%3", "comes once, at the very end");
        refused("1%2,3", "comes once, at the very end");
        refused("0-9%2147483648", "above 2147483647");
        refused("[0-3", "unbalanced brackets");
        refused("0-3]", "unbalanced brackets");
        refused("1]-3", "only enclose the whole list");
        refused("[1,[2]]", "only enclose the whole list");
        refused("[0-3%2]", "comes once, at the very end");
        refused("[]", "no task indexes");
    }

    #[test]
    fn json_is_the_sbatch_text() {
        let s = spec("1-7:3%1");
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!("1-7:3%1")
        );
        let back: ArraySpec = serde_json::from_str("\"1-7:3%1\"").unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_string(), "1-7:3%1");
        let error = serde_json::from_str::<ArraySpec>("\"3-1\"").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("invalid --array value \"3-1\": the range ends"),
            "{error}"
        );
        assert!(serde_json::from_str::<ArraySpec>("5").is_err());
    }
}
