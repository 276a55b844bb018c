//! Finding the columns bursar needs in whatever `--format` sacct was run with.

use std::fmt;

/// Columns whose values are free text a user chose, so they may contain the `|` sacct does not
/// escape.
/// `Extra` (23.02+) uses `|` as its OR; `StdOut`, `StdErr` and `StdIn` (24.05+) are paths.
const FREE_TEXT: [&str; 13] = [
    "jobname",
    "comment",
    "admincomment",
    "systemcomment",
    "submitline",
    "workdir",
    "constraints",
    "container",
    "wckey",
    "extra",
    "stdout",
    "stderr",
    "stdin",
];

/// Where each column bursar reads sits in a line, resolved once from the header.
#[derive(Debug, Clone)]
pub(crate) struct Columns {
    /// The column names as given (header text or the caller's list).
    pub names: Vec<String>,
    /// The record's identity: JobIDRaw, else JobID.
    pub id: usize,
    /// What users see: JobID, else JobIDRaw.
    pub display: usize,
    pub cluster: Option<usize>,
    pub account: usize,
    pub user: Option<usize>,
    pub partition: Option<usize>,
    pub qos: Option<usize>,
    pub state: usize,
    pub submit: usize,
    pub start: Option<usize>,
    pub end: Option<usize>,
    pub elapsed: Elapsed,
    pub alloc_tres: Option<usize>,
    pub alloc_cpus: Option<usize>,
    pub nnodes: Option<usize>,
    pub timelimit_raw: Option<usize>,
    pub timelimit: Option<usize>,
    pub job_name: Option<usize>,
    /// The one free-text column, when the format has exactly one: a line with too many fields
    /// can only have been split inside it, so its pieces are joined back.
    pub free_text: Option<usize>,
}

/// Where a record's run time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elapsed {
    /// `ElapsedRaw`: whole seconds.
    Raw(usize),
    /// `Elapsed`: `[D-]HH:MM:SS`.
    Clock(usize),
}

/// Required columns the format lacks, in words a user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingColumns {
    /// `"Submit"`, `"ElapsedRaw or Elapsed"`, …
    pub missing: Vec<&'static str>,
    /// The columns the input does have.
    pub found: Vec<String>,
    /// The input was read as having a header line (no column list was given).
    pub from_header: bool,
}

impl fmt::Display for MissingColumns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.missing.len() == 1 { "" } else { "s" };
        write!(
            f,
            "sacct output lacks the required column{plural} {}; its columns are {}",
            self.missing.join(", "),
            if self.found.is_empty() {
                "(none)".to_string()
            } else {
                self.found.join("|")
            }
        )?;
        if self.from_header {
            f.write_str(" (if the input has no header line, pass its column list)")?;
        }
        Ok(())
    }
}

impl std::error::Error for MissingColumns {}

impl Columns {
    /// Resolves the columns by name, case-insensitively; the first of duplicate names wins.
    /// Fails, naming every missing column, when a required one is absent.
    pub(crate) fn resolve(
        names: Vec<String>,
        from_header: bool,
    ) -> Result<Columns, MissingColumns> {
        let lower: Vec<String> = names
            .iter()
            .map(|n| n.trim().to_ascii_lowercase())
            .collect();
        let find = |name: &str| lower.iter().position(|n| n == name);
        let mut missing = Vec::new();
        fn require(
            missing: &mut Vec<&'static str>,
            index: Option<usize>,
            what: &'static str,
        ) -> usize {
            if index.is_none() {
                missing.push(what);
            }
            index.unwrap_or(usize::MAX)
        }

        let job_id_raw = find("jobidraw");
        let job_id = find("jobid");
        let id = require(&mut missing, job_id_raw.or(job_id), "JobIDRaw or JobID");
        let account = require(&mut missing, find("account"), "Account");
        let state = require(&mut missing, find("state"), "State");
        let submit = require(&mut missing, find("submit"), "Submit");
        let elapsed = match (find("elapsedraw"), find("elapsed")) {
            (Some(i), _) => Elapsed::Raw(i),
            (None, Some(i)) => Elapsed::Clock(i),
            (None, None) => {
                missing.push("ElapsedRaw or Elapsed");
                Elapsed::Raw(usize::MAX)
            }
        };
        let alloc_tres = find("alloctres");
        let alloc_cpus = find("alloccpus");
        require(
            &mut missing,
            alloc_tres.or(alloc_cpus),
            "AllocTRES or AllocCPUS",
        );
        if !missing.is_empty() {
            return Err(MissingColumns {
                missing,
                found: names,
                from_header,
            });
        }

        let free: Vec<usize> = (0..lower.len())
            .filter(|&i| FREE_TEXT.contains(&lower[i].as_str()))
            .collect();
        Ok(Columns {
            id,
            display: job_id.unwrap_or(id),
            cluster: find("cluster"),
            account,
            user: find("user"),
            partition: find("partition"),
            qos: find("qos"),
            state,
            submit,
            start: find("start"),
            end: find("end"),
            elapsed,
            alloc_tres,
            alloc_cpus,
            nnodes: find("nnodes"),
            timelimit_raw: find("timelimitraw"),
            timelimit: find("timelimit"),
            job_name: find("jobname"),
            free_text: match free.as_slice() {
                [only] => Some(*only),
                _ => None,
            },
            names,
        })
    }

    pub(crate) fn count(&self) -> usize {
        self.names.len()
    }
}

/// Column names from a `--format` list: `JobID,JobIDRaw%20,Elapsed` → the names, widths dropped.
pub fn format_columns(format: &str) -> Vec<String> {
    format
        .split(',')
        .map(|item| item.split('%').next().unwrap_or("").trim().to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        text.split('|').map(str::to_string).collect()
    }

    #[test]
    fn finds_columns_in_any_order_and_case() {
        let c = Columns::resolve(
            names("state|ELAPSED|Submit|account|jobid|AllocCPUS|JobName|cluster"),
            true,
        )
        .unwrap();
        assert_eq!((c.id, c.display, c.state, c.submit), (4, 4, 0, 2));
        assert_eq!(
            (c.elapsed, c.alloc_tres, c.alloc_cpus),
            (Elapsed::Clock(1), None, Some(5))
        );
        assert_eq!((c.cluster, c.free_text), (Some(7), Some(6)));
    }

    #[test]
    fn names_every_missing_column() {
        let err =
            Columns::resolve(names("JobIDRaw|JobID|Cluster|Account|User|State"), true).unwrap_err();
        assert_eq!(
            err.missing,
            vec!["Submit", "ElapsedRaw or Elapsed", "AllocTRES or AllocCPUS"]
        );
        let text = err.to_string();
        assert!(
            text.contains("Submit, ElapsedRaw or Elapsed, AllocTRES or AllocCPUS"),
            "{text}"
        );
        assert!(
            text.contains("JobIDRaw|JobID|Cluster|Account|User|State"),
            "{text}"
        );
    }

    #[test]
    fn several_free_text_columns_cannot_be_rejoined() {
        let c = Columns::resolve(
            names("JobID|Account|State|Submit|ElapsedRaw|AllocTRES|JobName|SubmitLine|WorkDir"),
            true,
        )
        .unwrap();
        assert_eq!(c.free_text, None);
        // Newer sacct's `Extra` (23.02+, `|` is its OR) and `StdOut` (24.05+) are free text too.
        for extra in ["Extra", "StdOut"] {
            let header = format!("JobID|Account|State|Submit|ElapsedRaw|AllocTRES|{extra}");
            let alone = Columns::resolve(names(&header), true).unwrap();
            assert_eq!(alone.free_text, Some(6), "{extra}");
            let with_name = Columns::resolve(names(&format!("{header}|JobName")), true).unwrap();
            assert_eq!(with_name.free_text, None, "{extra}");
        }
    }

    #[test]
    fn format_lists() {
        assert_eq!(
            format_columns("JobID,JobIDRaw%20, Elapsed ,"),
            vec!["JobID", "JobIDRaw", "Elapsed"]
        );
    }
}
