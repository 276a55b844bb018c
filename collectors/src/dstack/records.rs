//! One dstack run (its JSON from `/api/runs/list` or `runs/get`) → [`UsageRecord`]s, one per job
//! submission that got an instance. Pure: no I/O, the clock is passed in.
//!
//! # How a record matches dstack's own `cost`
//!
//! dstack 0.22.5 computes a run's `cost` on every read (`services/runs/__init__.py`):
//!
//! ```text
//! cost = round(fsum(jpd.price × (finished_at or now − submitted_at).total_seconds() / 3600
//!                   for every job, for every submission with job_provisioning_data), 4)
//! ```
//!
//! where `finished_at` is the submission's `last_processed_at` once it is finished. So a record
//! here has `price_per_hour_micros` = `job_provisioning_data.price` (read from its decimal
//! text), `elapsed_us` = `finished_at − submitted_at` in microseconds (for a submission still
//! going, `now − submitted_at`), and `ClusterPricing::charge` computes price × elapsed exactly
//! and rounds once per record. dstack's float sum rounded to 4 places and bursar's exact sum of
//! per-record micros agree to well under a cent (the tests check every captured run).
//!
//! This counts from **submission**, like dstack: provisioning and image pull are billed, as
//! the cloud bills them. The API has no "running since" time (`jobs.running_at` is not exposed),
//! so `start` is the submission time as well.
//!
//! # Where bursar deliberately differs: shared instances
//!
//! On a fleet split into blocks, dstack gives each job a shared offer that keeps the **whole**
//! instance's price (`generate_shared_offer`), so two jobs holding 2 of 4 blocks each are each
//! charged the full price by dstack's `cost` — the instance is counted twice. bursar records
//! `blocks = (2, 4)` and pricing prorates the price by `blocks / total_blocks`, so a shared job's
//! charge is `blocks / total_blocks` of dstack's number. The tests check that relation instead
//! of equality for such runs.
//!
//! # What is not a record
//!
//! A submission without `job_provisioning_data` never got an instance: dstack counts 0 for it
//! and so does bursar (no record). Every submission that got one is a record, whatever its
//! fate: retries, spot interruptions, failed and stopped jobs, deleted runs. Multi-node runs
//! and service replicas have one job per node/replica, and each submission of each is a record.

use std::collections::BTreeMap;

use bursar_pricing::{JobState, Tres, UsageRecord};
use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use super::number::{json_number_micros, parse_time};
use super::wire::{JobSpecWire, ResourcesWire, RunStatusOnly, RunWire, SubmissionWire};
use super::DstackError;

/// What mapping needs besides the run: the bursar cluster name and "now" (for submissions that
/// are still going, whose elapsed time grows with the clock, as dstack's `cost` does).
#[derive(Debug, Clone, Copy)]
pub struct MapContext<'a> {
    pub cluster: &'a str,
    pub now: DateTime<Utc>,
}

pub use crate::RawQuarantine;

/// A run as bursar sees it, for the caller's bookkeeping (settling holds by run id, the set of
/// runs to poll again, reconciling with dstack's own `cost`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub run_name: String,
    pub project: String,
    /// The dstack user who submitted the run.
    pub user: String,
    /// dstack's run status (`pending`, …, `terminated`, `failed`, `done`).
    pub status: String,
    pub submitted_at: DateTime<Utc>,
    /// Soft-deleted (`dstack delete`, or replaced by a new run of the same name). Still charged.
    pub deleted: bool,
    /// The run and every submission in it are finished: nothing about it will change.
    pub finished: bool,
    /// dstack's own `cost` in micros as reported in this response (see [`dstack_reported_cost`]).
    pub reported_cost_micros: Option<i64>,
    /// Every submission id in the response, billable or not.
    pub submission_ids: Vec<String>,
    /// The submissions that never got an instance: dstack charges nothing for them and they
    /// have no record (not those quarantined for being unreadable).
    pub never_placed: Vec<String>,
    /// How many submissions in the response could not be read at all (quarantined): their
    /// ids are in neither list.
    pub unreadable: usize,
    /// The lowest submission number read for the run's first job: above 0 when dstack deleted
    /// the earlier ones (never placed, superseded by a retry for capacity) or the list cut them.
    pub first_job_lowest: Option<u32>,
}

/// The outcome of reading one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunMapping {
    /// `None` when the run itself could not be read (it is then in `quarantined`).
    pub summary: Option<RunSummary>,
    pub records: Vec<UsageRecord>,
    pub quarantined: Vec<RawQuarantine>,
    /// The run id, when it could be read at all.
    pub run_id: Option<String>,
    /// Poll this run again: it or one of its submissions is not finished (also for a run that
    /// could not be read but whose status says it is still active).
    pub unfinished: bool,
    /// Some job's submissions do not run 0, 1, …, n−1: the list endpoint dropped the oldest
    /// (it keeps the latest 10 per job). Re-read the run with `runs/get`.
    pub truncated: bool,
}

const RUN_FINISHED: [&str; 3] = ["terminated", "failed", "done"];
const JOB_FINISHED: [&str; 4] = ["terminated", "aborted", "failed", "done"];

/// Maps dstack's job status (and termination reason) to bursar's [`JobState`].
///
/// All nine `JobStatus` values of 0.22.5's OpenAPI: `submitted`, `provisioning`, `pulling` →
/// Pending; `running`, `terminating` (the instance is still up and still billed) → Running;
/// `done` → Completed; `failed` → Failed, except `interrupted_by_no_capacity` (a spot
/// interruption) → Preempted; `terminated` → Cancelled, except `max_duration_exceeded` →
/// Timeout; `aborted` → Cancelled. Every final state here is charged by the default end-state
/// policy, as dstack counts them in `cost`. An unknown status is `None` (quarantined).
pub fn job_state(status: &str, termination_reason: Option<&str>) -> Option<JobState> {
    Some(match status {
        "submitted" | "provisioning" | "pulling" => JobState::Pending,
        "running" | "terminating" => JobState::Running,
        "done" => JobState::Completed,
        "failed" if termination_reason == Some("interrupted_by_no_capacity") => JobState::Preempted,
        "failed" => JobState::Failed,
        "terminated" if termination_reason == Some("max_duration_exceeded") => JobState::Timeout,
        "terminated" | "aborted" => JobState::Cancelled,
        _ => return None,
    })
}

/// dstack's own `cost` of a run (USD, rounded by dstack to 4 places), in micros, read from its
/// decimal text. It sums only the submissions present in that response: from `/api/runs/list`
/// it misses submissions beyond the latest 10 per job; `runs/get` has them all.
pub fn dstack_reported_cost(run_json: &str) -> Result<i64, DstackError> {
    #[derive(serde::Deserialize)]
    struct CostOnly {
        cost: Option<Box<RawValue>>,
    }
    let bad = |detail: String| DstackError::BadPayload {
        url: "run JSON".to_string(),
        detail,
    };
    let run: CostOnly = serde_json::from_str(run_json).map_err(|e| bad(e.to_string()))?;
    let cost = run
        .cost
        .ok_or_else(|| bad("the run has no cost".to_string()))?;
    json_number_micros(cost.get())
        .map(|m| m.micros)
        .map_err(|e| bad(format!("cost: {e}")))
}

/// Reads one run's JSON into records. Never fails: what cannot be read is quarantined, and a
/// bad submission does not cost the run its other submissions.
pub fn map_run(raw: &str, ctx: &MapContext<'_>) -> RunMapping {
    let run: RunWire = match serde_json::from_str(raw) {
        Ok(run) => run,
        Err(e) => return unreadable_run(raw, &e.to_string()),
    };
    let submitted_at = match parse_time(&run.submitted_at) {
        Ok(t) => t,
        Err(e) => return unreadable_run(raw, &format!("submitted_at: {e}")),
    };
    let run_name = run
        .run_spec
        .as_ref()
        .and_then(|s| s.run_name.clone())
        .unwrap_or_default();
    let reported_cost_micros = run
        .cost
        .as_ref()
        .and_then(|c| json_number_micros(c.get()).ok())
        .map(|m| m.micros);
    let mut mapping = RunMapping {
        run_id: Some(run.id.clone()),
        unfinished: !RUN_FINISHED.contains(&run.status.as_str()),
        ..RunMapping::default()
    };
    let mut submission_ids = Vec::new();
    let mut never_placed = Vec::new();
    let mut unreadable = 0;
    let mut first_job_lowest: Option<u32> = None;
    for (job_index, job) in run.jobs.iter().enumerate() {
        let mut expected_num = 0u32;
        for raw_submission in &job.job_submissions {
            let submission: SubmissionWire = match serde_json::from_str(raw_submission.get()) {
                Ok(s) => s,
                Err(e) => {
                    mapping.quarantined.push(RawQuarantine {
                        reason: format!(
                            "run {} ({run_name}) job {}: unreadable submission: {e}",
                            run.id, job.job_spec.job_num
                        ),
                        raw: raw_submission.get().to_string(),
                    });
                    expected_num += 1;
                    unreadable += 1;
                    continue;
                }
            };
            if submission.submission_num != expected_num {
                mapping.truncated = true;
            }
            expected_num = submission.submission_num.saturating_add(1);
            if job_index == 0 {
                first_job_lowest = Some(first_job_lowest.map_or(submission.submission_num, |n| {
                    n.min(submission.submission_num)
                }));
            }
            submission_ids.push(submission.id.clone());
            if !JOB_FINISHED.contains(&submission.status.as_str()) {
                mapping.unfinished = true;
            }
            match submission_record(&run, &run_name, &job.job_spec, &submission, ctx) {
                Ok(Some(record)) => mapping.records.push(record),
                Ok(None) => never_placed.push(submission.id.clone()),
                Err(reason) => mapping.quarantined.push(RawQuarantine {
                    reason: format!(
                        "run {} ({run_name}) submission {}: {reason}",
                        run.id, submission.id
                    ),
                    raw: raw_submission.get().to_string(),
                }),
            }
        }
    }
    mapping.summary = Some(RunSummary {
        run_id: run.id.clone(),
        run_name,
        project: run.project_name.clone(),
        user: run.user.clone(),
        status: run.status.clone(),
        submitted_at,
        deleted: run.deleted.unwrap_or(false),
        finished: !mapping.unfinished,
        reported_cost_micros,
        submission_ids,
        never_placed,
        unreadable,
        first_job_lowest,
    });
    mapping
}

/// A run that does not read as a dstack `Run`: quarantined whole. If its id and an active
/// status can still be made out, it is marked for polling again, so a run that is still
/// going is not dropped because of one bad read.
fn unreadable_run(raw: &str, problem: &str) -> RunMapping {
    let lenient: Option<RunStatusOnly> = serde_json::from_str(raw).ok();
    let run_id = lenient.as_ref().and_then(|r| r.id.clone());
    let active = lenient
        .as_ref()
        .and_then(|r| r.status.as_deref())
        .is_some_and(|s| !RUN_FINISHED.contains(&s));
    RunMapping {
        quarantined: vec![RawQuarantine {
            reason: format!(
                "run {}: not a readable dstack run: {problem}",
                run_id.as_deref().unwrap_or("(no id)")
            ),
            raw: raw.to_string(),
        }],
        unfinished: active && run_id.is_some(),
        run_id,
        ..RunMapping::default()
    }
}

/// The record for one submission: `Ok(None)` when it never got an instance.
fn submission_record(
    run: &RunWire,
    run_name: &str,
    job_spec: &JobSpecWire,
    submission: &SubmissionWire,
    ctx: &MapContext<'_>,
) -> Result<Option<UsageRecord>, String> {
    let Some(provisioning) = &submission.job_provisioning_data else {
        return Ok(None);
    };
    let state = job_state(&submission.status, submission.termination_reason.as_deref())
        .ok_or_else(|| format!("unknown job status {:?}", submission.status))?;
    let price = json_number_micros(provisioning.price.get()).map_err(|e| format!("price: {e}"))?;
    if price.micros < 0 {
        return Err(format!(
            "negative price per hour {}",
            provisioning.price.get()
        ));
    }
    let submitted_at =
        parse_time(&submission.submitted_at).map_err(|e| format!("submitted_at: {e}"))?;
    let finished_at = match &submission.finished_at {
        Some(text) => Some(parse_time(text).map_err(|e| format!("finished_at: {e}"))?),
        None => None,
    };
    if state.is_final() && finished_at.is_none() {
        return Err(format!(
            "status {:?} is finished but finished_at is null",
            submission.status
        ));
    }
    // dstack: duration = (finished_at or now) − submitted_at.
    let elapsed = match finished_at {
        Some(end) => {
            let us = (end - submitted_at)
                .num_microseconds()
                .ok_or("finished_at − submitted_at is out of range")?;
            u64::try_from(us).map_err(|_| {
                format!(
                    "finished_at {} is before submitted_at {}",
                    submission.finished_at.as_deref().unwrap_or_default(),
                    submission.submitted_at
                )
            })?
        }
        // Still going: as dstack does, up to now. A clock behind dstack's counts 0, not less.
        None => (ctx.now - submitted_at)
            .num_microseconds()
            .and_then(|us| u64::try_from(us).ok())
            .unwrap_or(0),
    };
    let offer = submission
        .job_runtime_data
        .as_ref()
        .and_then(|r| r.offer.as_ref());
    let blocks = match offer {
        Some(o) if o.total_blocks == 0 || o.blocks == 0 || o.blocks > o.total_blocks => {
            return Err(format!(
                "holds {} of {} blocks of its instance",
                o.blocks, o.total_blocks
            ));
        }
        Some(o) if o.total_blocks > 1 => Some((o.blocks, o.total_blocks)),
        _ => None,
    };
    // The job's share of a shared instance is the offer's instance; else the whole instance.
    let resources = offer
        .and_then(|o| o.instance.as_ref())
        .and_then(|i| i.resources.as_ref())
        .or(provisioning.instance_type.resources.as_ref());
    let submit = submitted_at.timestamp();
    let display_id = if job_spec.replica_num == 0 {
        format!(
            "{run_name}/{}/{}",
            job_spec.job_num, submission.submission_num
        )
    } else {
        format!(
            "{run_name}/r{}/{}/{}",
            job_spec.replica_num, job_spec.job_num, submission.submission_num
        )
    };
    Ok(Some(UsageRecord {
        cluster: ctx.cluster.to_string(),
        job_id: submission.id.clone(),
        display_id,
        submit,
        // No "running since" in the API; dstack bills from submission, and so does bursar.
        start: Some(submit),
        end: finished_at.map(|t| t.timestamp()),
        account: run.project_name.clone(),
        user: run.user.clone(),
        partition: Some(provisioning.backend.clone()),
        qos: None,
        state,
        elapsed_us: elapsed,
        alloc: alloc_of(resources),
        time_limit_min: job_spec.max_duration.map(|s| s.div_ceil(60)),
        job_name: Some(run_name.to_string()),
        price_per_hour_micros: Some(price.micros),
        blocks,
    }))
}

/// What the job held, as TRES: one node, its CPUs, memory (MiB, Slurm's `M`), and GPUs by
/// model (`gres/gpu=2,gres/gpu:a100=2`), for core-hour reports and price-0 backends.
fn alloc_of(resources: Option<&ResourcesWire>) -> Tres {
    let mut alloc = Tres::new();
    alloc.set("node", 1);
    let Some(r) = resources else {
        return alloc;
    };
    if r.cpus > 0 {
        alloc.set("cpu", r.cpus);
    }
    if r.memory_mib > 0 {
        alloc.set("mem", r.memory_mib);
    }
    if !r.gpus.is_empty() {
        alloc.set("gres/gpu", r.gpus.len() as u64);
        let mut by_model: BTreeMap<String, u64> = BTreeMap::new();
        for gpu in &r.gpus {
            let model: String = gpu
                .name
                .trim()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            if !model.is_empty() {
                *by_model.entry(model).or_default() += 1;
            }
        }
        for (model, count) in by_model {
            alloc.set(&format!("gres/gpu:{model}"), count);
        }
    }
    alloc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_openapi_job_status_has_a_state() {
        let statuses = [
            "submitted",
            "provisioning",
            "pulling",
            "running",
            "terminating",
            "terminated",
            "aborted",
            "failed",
            "done",
        ];
        for status in statuses {
            assert!(job_state(status, None).is_some(), "{status}");
        }
        assert_eq!(job_state("exploded", None), None);
        assert_eq!(
            job_state("failed", Some("interrupted_by_no_capacity")),
            Some(JobState::Preempted)
        );
        assert_eq!(
            job_state("terminated", Some("max_duration_exceeded")),
            Some(JobState::Timeout)
        );
        assert_eq!(
            job_state("terminated", Some("terminated_by_user")),
            Some(JobState::Cancelled)
        );
        assert_eq!(
            job_state("failed", Some("container_exited_with_error")),
            Some(JobState::Failed)
        );
    }
}
