//! Slurm host lists (`n[1-3,5],gpu01`), as `-w/--nodelist` takes them: bursar counts the
//! nodes a list names, since sbatch runs the job on at least that many.
//!
//! Entries are separated by commas outside brackets; an entry is a name, or a prefix and one
//! bracketed list of numbers and ranges at its end (`n[01-10,12]`: a range keeps the width of
//! its first number, as Slurm pads it). Stricter than Slurm, so that the count is the one
//! every Slurm version reads: a name given twice is refused (22.05's slurmctld counts it
//! twice, later ones once), and so are text after a bracket (`r[1-2]-ib`: refused by Slurm
//! before 23.11), a second bracket group, 24.11's host list functions (`feature{gpu}`, which
//! name every matching node) and lists of more than [`MAX_HOSTS`] names in all.

/// The most names bursar expands from one list.
pub const MAX_HOSTS: usize = 65_536;

/// The host names `text` names, in their order; the error says what is wrong.
pub fn hosts(text: &str) -> Result<Vec<String>, String> {
    if text.contains(['{', '}']) {
        return Err("host list functions (`feature{…}`) name nodes bursar cannot count".into());
    }
    let mut names: Vec<String> = Vec::new();
    for entry in top_level_entries(text)? {
        expand(entry, &mut names)?;
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = names.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(format!("names {twice} twice"));
    }
    if names.is_empty() {
        return Err("names no node".into());
    }
    Ok(names)
}

/// The first `keep` of `names` in Slurm's order (`hostlist_sort`: the names before their
/// trailing numbers in natural order, `rack9` before `rack10`, then those numbers), as sbatch
/// 22.05 keeps them when it drops names from a list longer than the job's tasks. (Slurm
/// orders names whose zero-padding differs, `n08` and `n9`, by width first; bursar by number.)
pub fn first_sorted(names: &[String], keep: usize) -> Vec<String> {
    /// Digit runs as numbers, the rest as text: a natural-order key.
    fn natural(text: &str) -> Vec<(bool, u128, String)> {
        let mut key = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let take = if digits > 0 {
                digits
            } else {
                rest.find(|c: char| c.is_ascii_digit())
                    .unwrap_or(rest.len())
            };
            let (chunk, tail) = rest.split_at(take);
            key.push(if digits > 0 {
                (false, chunk.parse().unwrap_or(u128::MAX), String::new())
            } else {
                (true, 0, chunk.to_string())
            });
            rest = tail;
        }
        key
    }
    let mut sorted: Vec<String> = names.to_vec();
    sorted.sort_by_cached_key(|name| {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (stem, number) = name.split_at(name.len() - digits);
        (natural(stem), number.parse::<u128>().ok(), name.clone())
    });
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

/// One entry's names, added to `names` (never past [`MAX_HOSTS`] in all).
fn expand(entry: &str, names: &mut Vec<String>) -> Result<(), String> {
    let Some((prefix, rest)) = entry.split_once('[') else {
        return push(names, entry.to_string());
    };
    let (inside, suffix) = rest
        .split_once(']')
        .ok_or_else(|| format!("{entry:?}: a `[` without its `]`"))?;
    if !suffix.is_empty() {
        return Err(format!(
            "{entry:?}: bursar reads one bracketed range at the end of a name (Slurm before \
             23.11 takes no more); write the names out"
        ));
    }
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
        if (to - from) as usize >= MAX_HOSTS - names.len().min(MAX_HOSTS) {
            return Err(format!("names more than {MAX_HOSTS} nodes"));
        }
        let width = low.len();
        for n in from..=to {
            push(names, format!("{prefix}{n:0width$}"))?;
        }
    }
    Ok(())
}

fn push(names: &mut Vec<String>, name: String) -> Result<(), String> {
    if names.len() >= MAX_HOSTS {
        return Err(format!("names more than {MAX_HOSTS} nodes"));
    }
    names.push(name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_in_slurms_order() {
        let names = hosts("n10,n9,gpu2,n[1-2]").unwrap();
        assert_eq!(first_sorted(&names, 3), ["gpu2", "n1", "n2"]);
        assert_eq!(first_sorted(&names, 9).len(), 5);
        let racks = hosts("rack10-n1,rack9-n1").unwrap();
        assert_eq!(
            first_sorted(&racks, 1),
            ["rack9-n1"],
            "stems in natural order"
        );
    }

    #[test]
    fn names_are_counted_as_slurm_counts_them() {
        let count = |text: &str| hosts(text).map(|h| h.len());
        assert_eq!(hosts("n1").unwrap(), ["n1"]);
        assert_eq!(count("n[1-3,5]"), Ok(4));
        assert_eq!(count("n[1-3],gpu01"), Ok(4));
        assert_eq!(
            hosts("op-n[08-10]").unwrap(),
            ["op-n08", "op-n09", "op-n10"],
            "the width of the first number"
        );
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
            "n[1-3],n2",
            "r[1-2]-ib",
            "n[1-3]x",
            "feature{gpu}",
            "n[0-40000],m[0-40000]",
            "n[0-65535,0-65535]",
        ] {
            assert!(hosts(bad).is_err(), "{bad:?}");
        }
    }
}
