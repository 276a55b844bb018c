//! The parts of dstack 0.22.5's JSON that bursar reads (`Run`, `Job`, `JobSubmission`,
//! `JobProvisioningData`, `JobRuntimeData.offer`, `Event`, `RunPlan`). Everything else in the
//! payload is ignored, so new dstack fields do not break collection.
//!
//! Money fields are [`RawValue`]s: their decimal text is read by
//! [`json_number_micros`](super::number::json_number_micros), never as `f64`. Submissions are kept
//! raw until they are read one by one, so one bad submission is quarantined alone.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The fields of a run needed to page through `/api/runs/list`, read before anything else so
/// the cursor can move past a run even when the rest of it cannot be read.
#[derive(Deserialize)]
pub(crate) struct RunKey {
    pub id: String,
    pub submitted_at: String,
}

/// A lenient look at a run that failed to read: enough to know whether to poll it again.
#[derive(Deserialize)]
pub(crate) struct RunStatusOnly {
    pub id: Option<String>,
    pub status: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct RunWire {
    pub id: String,
    pub project_name: String,
    pub user: String,
    pub submitted_at: String,
    pub status: String,
    #[serde(default)]
    pub run_spec: Option<RunSpecWire>,
    pub jobs: Vec<JobWire>,
    #[serde(default)]
    pub cost: Option<Box<RawValue>>,
    #[serde(default)]
    pub deleted: Option<bool>,
}

#[derive(Deserialize)]
pub(crate) struct RunSpecWire {
    #[serde(default)]
    pub run_name: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct JobWire {
    pub job_spec: JobSpecWire,
    pub job_submissions: Vec<Box<RawValue>>,
}

#[derive(Deserialize)]
pub(crate) struct JobSpecWire {
    /// Absent in jobs submitted before replicas existed; dstack defaults it to 0 too.
    #[serde(default)]
    pub replica_num: u32,
    pub job_num: u32,
    #[serde(default)]
    pub max_duration: Option<u64>,
}

#[derive(Deserialize)]
pub(crate) struct SubmissionWire {
    pub id: String,
    pub submission_num: u32,
    pub submitted_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub status: String,
    #[serde(default)]
    pub termination_reason: Option<String>,
    #[serde(default)]
    pub job_provisioning_data: Option<ProvisioningWire>,
    #[serde(default)]
    pub job_runtime_data: Option<RuntimeWire>,
}

#[derive(Deserialize)]
pub(crate) struct ProvisioningWire {
    pub backend: String,
    pub instance_type: InstanceTypeWire,
    /// USD per hour for the whole instance.
    pub price: Box<RawValue>,
}

#[derive(Deserialize)]
pub(crate) struct InstanceTypeWire {
    #[serde(default)]
    pub resources: Option<ResourcesWire>,
}

#[derive(Deserialize)]
pub(crate) struct ResourcesWire {
    #[serde(default)]
    pub cpus: u64,
    #[serde(default)]
    pub memory_mib: u64,
    #[serde(default)]
    pub gpus: Vec<GpuWire>,
}

#[derive(Deserialize)]
pub(crate) struct GpuWire {
    pub name: String,
}

#[derive(Deserialize)]
pub(crate) struct RuntimeWire {
    #[serde(default)]
    pub offer: Option<OfferWire>,
}

/// The (possibly shared) offer the job runs on: `blocks` of `total_blocks` of the instance.
#[derive(Deserialize)]
pub(crate) struct OfferWire {
    #[serde(default)]
    pub instance: Option<InstanceTypeWire>,
    #[serde(default = "one")]
    pub blocks: u32,
    #[serde(default = "one")]
    pub total_blocks: u32,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
pub(crate) struct EventWire {
    pub id: String,
    pub recorded_at: String,
    #[serde(default)]
    pub targets: Vec<EventTargetWire>,
}

#[derive(Deserialize)]
pub(crate) struct EventTargetWire {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub project_name: Option<String>,
    pub id: String,
}
