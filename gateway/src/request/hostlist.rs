//! Slurm host lists (`n[1-3,5],gpu01`), as `-w/--nodelist` takes them: bursar counts the
//! nodes a list names, since sbatch runs the job on at least that many.
//!
//! Entries are separated by commas outside brackets; an entry is a name, or a prefix, one
//! bracketed list of numbers and ranges (`[01-10,12]`: a range keeps the width of its first
//! number, as Slurm pads it) and a suffix. A name given twice counts once (Slurm's
//! `hostlist_uniq`). Stricter than Slurm: one bracket group per entry (`rack[1-2]n[1-4]` is
//! refused; write such lists out), at most [`MAX_HOSTS`] names.

/// The most names bursar expands from one list.
pub const MAX_HOSTS: usize = 65_536;

/// The distinct host names `text` names, in their order; the error says what is wrong.
pub fn hosts(text: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for entry in top_level_entries(text)? {
        for name in expand(entry)? {
            if seen.insert(name.clone()) {
                if names.len() == MAX_HOSTS {
                    return Err(format!("names more than {MAX_HOSTS} nodes"));
                }
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Err("names no node".into());
    }
    Ok(names)
}

/// The first `keep` of `names` in Slurm's order (`hostlist_sort`: by the name before its
/// trailing number, then by that number), as sbatch keeps them when it drops names from a
/// list longer than the job's tasks.
pub fn first_sorted(names: &[String], keep: usize) -> Vec<String> {
    let key = |name: &String| {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (stem, number) = name.split_at(name.len() - digits);
        (stem.to_string(), number.parse::<u128>().ok(), name.clone())
    };
    let mut sorted: Vec<String> = names.to_vec();
    sorted.sort_by_key(key);
    sorted.truncate(keep);
    sorted
}

/// The list split at the commas outside brackets.
fn top_level_entries(text: &str) -> Result<Vec<&str>, String> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, c) in text.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err("a bracket inside a bracket".into()),
            ']' if depth == 1 => depth = 0,
            ']' => return Err("a `]` without its `[`".into()),
            ',' if depth == 0 => {
                entries.push(&text[start..at]);
                start = at + 1;
            }
            c if c.is_whitespace() || c.is_control() => {
                return Err("a blank or control character".into())
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a `[` without its `]`".into());
    }
    entries.push(&text[start..]);
    if entries.iter().any(|e| e.is_empty()) {
        return Err("an empty entry".into());
    }
    Ok(entries)
}

/// One entry's names.
fn expand(entry: &str) -> Result<Vec<String>, String> {
    let Some((prefix, rest)) = entry.split_once('[') else {
        return Ok(vec![entry.to_string()]);
    };
    let (inside, suffix) = rest
        .split_once(']')
        .ok_or_else(|| format!("{entry:?}: a `[` without its `]`"))?;
    if suffix.contains('[') {
        return Err(format!(
            "{entry:?}: bursar reads one bracketed range per name; write the names out"
        ));
    }
    let mut names = Vec::new();
    for range in inside.split(',') {
        let (low, high) = range.split_once('-').unwrap_or((range, range));
        let number = |digits: &str| -> Result<u64, String> {
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{entry:?}: {range:?} is not a number or a range"));
            }
            digits
                .parse()
                .map_err(|_| format!("{entry:?}: {digits} is too large"))
        };
        let (from, to) = (number(low)?, number(high)?);
        if to < from {
            return Err(format!(
                "{entry:?}: the range {range} ends before it starts"
            ));
        }
        if to - from >= MAX_HOSTS as u64 {
            return Err(format!("names more than {MAX_HOSTS} nodes"));
        }
        let width = low.len();
        for n in from..=to {
            names.push(format!("{prefix}{n:0width$}{suffix}"));
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_in_slurms_order() {
        let names = hosts("n10,n9,gpu2,n[1-2]").unwrap();
        assert_eq!(first_sorted(&names, 3), ["gpu2", "n1", "n2"]);
        assert_eq!(first_sorted(&names, 9).len(), 5);
    }

    #[test]
    fn names_are_counted_as_slurm_counts_them() {
        let count = |text: &str| hosts(text).map(|h| h.len());
        assert_eq!(hosts("n1").unwrap(), ["n1"]);
        assert_eq!(count("n[1-3,5]"), Ok(4));
        assert_eq!(count("n[1-3],n2,gpu01"), Ok(4), "n2 counts once");
        assert_eq!(
            hosts("op-n[08-10]").unwrap(),
            ["op-n08", "op-n09", "op-n10"],
            "the width of the first number"
        );
        assert_eq!(hosts("r[1-2]-ib").unwrap(), ["r1-ib", "r2-ib"]);
        assert_eq!(count("n[0-65535]"), Ok(65_536));
        for bad in [
            "",
            "n1,",
            ",n1",
            "n[1-3",
            "n1-3]",
            "n[[1]]",
            "n[3-1]",
            "n[a-b]",
            "n[1-]",
            "n[]",
            "r[1-2]n[1-4]",
            "n1 n2",
            "n[0-65536]",
            "n[0-99999999999999999999]",
        ] {
            assert!(hosts(bad).is_err(), "{bad:?}");
        }
    }
}
