//! What a cluster reports about one billable allocation, normalized across sources.

use std::fmt;
use std::str::FromStr;

use crate::tres::Tres;

/// The state a job record is in, as Slurm names it (dstack states map onto these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Requeued,
    Resizing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
    BootFail,
    Preempted,
    OutOfMemory,
    Deadline,
    Revoked,
}

impl JobState {
    pub const ALL: [JobState; 15] = [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Requeued,
        JobState::Resizing,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::BootFail,
        JobState::Preempted,
        JobState::OutOfMemory,
        JobState::Deadline,
        JobState::Revoked,
    ];

    /// Slurm's long name, `COMPLETED`, `NODE_FAIL`, …
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Requeued => "REQUEUED",
            JobState::Resizing => "RESIZING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Deadline => "DEADLINE",
            JobState::Revoked => "REVOKED",
        }
    }

    /// A job in this state will not run any more: its usage is final.
    /// REQUEUED and RESIZING are final for the record they are on: slurmdbd ends a requeued
    /// run's record, and a resized job's record at the resize (its state RESIZING, its end the
    /// resize time), and the job goes on in a new record (a new submit time).
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    /// Accepts long and short names in any case, and sacct's `CANCELLED by 1001`.
    fn from_str(text: &str) -> Result<JobState, UnknownState> {
        let word = text.split_whitespace().next().unwrap_or("");
        let word = word.trim_end_matches('+');
        let state = match word.to_ascii_uppercase().as_str() {
            "PENDING" | "PD" => JobState::Pending,
            "RUNNING" | "R" => JobState::Running,
            "SUSPENDED" | "S" => JobState::Suspended,
            "REQUEUED" | "RQ" | "REQUEUE_FED" | "REQUEUE_HOLD" => JobState::Requeued,
            "RESIZING" | "RS" => JobState::Resizing,
            "COMPLETED" | "CD" => JobState::Completed,
            "FAILED" | "F" => JobState::Failed,
            "CANCELLED" | "CA" => JobState::Cancelled,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "BOOT_FAIL" | "BF" => JobState::BootFail,
            "PREEMPTED" | "PR" => JobState::Preempted,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "DEADLINE" | "DL" => JobState::Deadline,
            "REVOKED" | "RV" => JobState::Revoked,
            _ => return Err(UnknownState(text.to_string())),
        };
        Ok(state)
    }
}

/// One billable allocation reported by a cluster: a Slurm job record (an array task and a het
/// component each count; steps do not; every requeued run is its own record) or one dstack
/// job submission.
///
/// Times are Unix seconds (UTC). The identity of a record is `(cluster, job_id, submit)`:
/// Slurm job ids repeat across clusters and after a requeue, the submit time does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub cluster: String,
    /// The cluster's unique id for the record: Slurm's `JobIDRaw`, a dstack submission id.
    pub job_id: String,
    /// What users see: `7_3`, `11+1`, a dstack run name.
    pub display_id: String,
    pub submit: i64,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub account: String,
    pub user: String,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub state: JobState,
    /// Wall-clock time the allocation ran, in microseconds (Slurm reports whole seconds;
    /// dstack reports sub-second timestamps and prices by them).
    pub elapsed_us: u64,
    /// What was allocated (empty for a job that never started).
    pub alloc: Tres,
    /// The time limit in minutes, when the cluster reported one.
    pub time_limit_min: Option<u64>,
    pub job_name: Option<String>,
    /// dstack: what the instance cost per hour, in micros of the cluster's currency.
    pub price_per_hour_micros: Option<i64>,
    /// dstack: the share of a shared instance this job held, as `(blocks, total_blocks)`.
    pub blocks: Option<(u32, u32)>,
}

impl UsageRecord {
    /// The job started (was allocated resources) at some point.
    pub fn started(&self) -> bool {
        self.start.is_some()
    }

    /// The moment the record's charge belongs to: its end, else its start, else its submission.
    pub fn effective_at(&self) -> i64 {
        self.end.or(self.start).unwrap_or(self.submit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_states_as_sacct_prints_them() {
        assert_eq!("CANCELLED by 1001".parse(), Ok(JobState::Cancelled));
        assert_eq!("CANCELLED+".parse(), Ok(JobState::Cancelled));
        assert_eq!("oom".parse(), Ok(JobState::OutOfMemory));
        assert_eq!("NODE_FAIL".parse(), Ok(JobState::NodeFail));
        assert!("EXPLODED".parse::<JobState>().is_err());
        assert!("".parse::<JobState>().is_err());
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse(), Ok(state));
        }
    }

    #[test]
    fn only_terminal_states_are_final() {
        assert!(!JobState::Running.is_final());
        assert!(!JobState::Pending.is_final());
        assert!(JobState::Requeued.is_final());
        assert!(JobState::Timeout.is_final());
    }
}
