//! Job requests: the one vocabulary behind `bursar submit` (sbatch options and `#SBATCH`
//! lines), dstack task files, `POST /v1/quotes` and `POST /v1/jobs`. Pure: no I/O beyond the
//! text the caller hands in.
//!
//! - [`JobRequest`]: what a user asks for; JSON in the API. [`JobRequest::alloc`] turns it into
//!   the [`Tres`] vector that `ClusterPricing::estimate` prices, so a hold is computed by the
//!   same code as the charge that settles it.
//! - [`parse_sbatch`] / [`parse_sbatch_command`]: sbatch-compatible options plus the script's
//!   `#SBATCH` lines ([`sbatch`] documents every option and rule); [`split_sbatch_args`] finds
//!   the script path in a command line.
//! - [`parse_dstack_task`] / [`DstackTask`]: a dstack `type: task` file ([`dstack`]).
//! - [`TimeLimit`] (Slurm's `--time` formats), [`GpuSpec`] (dstack's `A100:80GB:2`),
//!   [`ArraySpec`] (sbatch's `--array` indexes, [`array`]): parsed once at the edge and carried
//!   validated.
//! - [`RequestError`]: what is wrong, naming the option or field.
//!
//! ## From a request to a resource vector ([`JobRequest::alloc`])
//!
//! | TRES | rule |
//! |---|---|
//! | `node` | `nodes` (a `-N 2-4` range was narrowed when parsed: to its minimum, or the fewest of it that hold `-n` at `--ntasks-per-node`) |
//! | `cpu` | `ntasks × cpus_per_task` (`--ntasks-per-node` × `nodes` tasks when more: slurmctld lays them out), or `--cpus-per-gpu` (without it and `-c`, the partition's `DefCpuPerGPU`) × `gres/gpu` when that is more, and never fewer than `nodes` (Slurm gives every node at least one CPU), nor than `nodes × --mincpus` (in whole tasks of `-c` CPUs; none with `-c` above 1 and `--ntasks-per-node`) where slurmctld allocates them (up to 24.11.0: [`PartitionDefaults::min_cpus_only_select`]) |
//! | `cpu` on nodes of several threads per core | where the partition declares them (`node_threads_per_core`, [`PartitionDefaults::threads_per_core`]): each node's CPUs above, rounded up to the whole cores slurmctld allocates, every thread of each counted, as `--hint`, `--threads-per-core` and `--ntasks-per-core` lay them out ([`cores`]) |
//! | `mem` (MB) | `--mem`: per node × `nodes`; `--mem-per-cpu`: per CPU × `cpu` (on nodes of several threads per core, the job's threads of each core when it asks for fewer); `--mem-per-gpu`: per GPU × `gres/gpu`; none: 0, or through [`JobRequest::alloc_with_defaults`] the partition's `DefMemPerGPU` × `gres/gpu` for a job with GPUs, else its `DefMemPerCPU` × `cpu` |
//! | `gres/gpu` | the job's GPU total: per-node count × `nodes` (`--gres=gpu:N`, `--gpus-per-node`), per-task count × `ntasks` (`--gpus-per-task`), or the per-job count (`--gpus`) |
//! | `gres/gpu:<type>` | the same total again when a type was given, lower-cased as Slurm's TRES names are: a breakdown of `gres/gpu`, never extra GPUs (see DESIGN "Pricing semantics") |
//! | `license/<name>` | each license of `-L/--licenses` ([`Licenses`]) and its count, for the whole job (lower-cased) |
//!
//! Zero counts are left out, as Slurm leaves them out of TRES strings. A job that gets whole
//! nodes (`--exclusive`, or a partition whose nodes are never shared) is priced, as slurmctld
//! allocates it, for every CPU and GPU of its nodes ([`NodeSize`], declared per partition;
//! its memory as asked, per CPU over all the CPUs); `--mem=0` (Slurm: all of each node's
//! memory) for the node's memory — and as 0 MB where the partition's node size is not
//! declared ([`MemoryRequest::is_whole_node`]). Other GRES (`shard`, `nvme`, …) are kept in `other_gres` and forwarded,
//! not priced. No floating point anywhere: counts multiply in `u64`, saturating (and
//! [`JobRequest::validate`] refuses requests whose vector would overflow).
#![deny(clippy::float_arithmetic)]

pub mod array;
pub mod cores;
pub mod dstack;
mod error;
mod gpu;
pub mod hostlist;
pub mod layout;
pub mod licenses;
pub mod sbatch;
mod slurm;
mod time;
mod units;
pub mod when;
mod wrapper;

use std::borrow::Cow;
use std::collections::BTreeMap;

use bursar_pricing::Tres;
use cores::{CoreLayout, CoreShape};
use serde::{Deserialize, Serialize};

pub use array::{ArraySpec, MAX_ARRAY_INDEX};
pub use cores::{Hint, HintEffect, ANY_TASKS_PER_CORE};
pub use dstack::{parse_dstack_task, DstackResources, DstackTask, MaxDuration, SpotPolicy};
pub use error::RequestError;
pub use gpu::{is_gres_type_name, normalize_model, GpuSpec, GpuVendor};
pub use licenses::{Licenses, MAX_LICENSE_COUNT};
pub use sbatch::{
    parse_sbatch, parse_sbatch_command, parse_sbatch_command_at, parse_sbatch_command_with_env,
    split_sbatch_args, SbatchArgs, SbatchCommand, OVERCOMMIT_REFUSED, SBATCH_USAGE,
};
pub use slurm::{
    check_acctg_freq, check_gpu_freq, cpu_freq_request, parse_delay_boot, parse_priority,
    parse_profile, parse_switches, ExclusiveMode, GresFlags, OpenMode, Profile, SlurmOptions,
    Switches, WarnSignal, TOP_PRIORITY,
};
pub use time::{TimeLimit, MAX_TIME_LIMIT_MIN};
pub use units::{
    format_slurm_megabytes, parse_dstack_megabytes, parse_slurm_megabytes, CountRange, SizeRange,
};
pub use when::{Clock, Moment};

/// The most `--mincpus`, `--threads-per-core` or `--ntasks-per-core` slurmctld keeps: a
/// 16-bit count, whose top values mean unset or unlimited.
pub const MAX_COUNT16: u32 = 65_533;

/// What a Slurm partition gives a job that does not ask (its `DefMemPerCPU`, `DefMemPerGPU`,
/// `DefCpuPerGPU`), and what its nodes hold, for pricing as slurmctld will allocate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionDefaults {
    pub mem_per_cpu_mb: Option<u64>,
    pub mem_per_gpu_mb: Option<u64>,
    pub cpus_per_gpu: Option<u32>,
    /// Each node's size, when the site declares it (every node of the partition alike).
    pub node: Option<NodeSize>,
    /// The partition never shares a node (Slurm's `OverSubscribe=EXCLUSIVE`): every job gets
    /// whole nodes, as with `--exclusive`.
    pub exclusive: bool,
    /// The cluster's slurmctld only picks nodes by `--mincpus` and allocates a job its tasks'
    /// CPUs (Slurm 24.11.1 and later); `false` (up to 24.11.0, and while the release is not
    /// known): it allocates `--mincpus` CPUs on each node, and the job is priced for them.
    pub min_cpus_only_select: bool,
    /// Hardware threads per core of the partition's nodes, where slurmctld allocates whole
    /// cores (`node_threads_per_core`): a job's CPUs on each node are rounded up to whole
    /// cores ([`cores`]). `None`: not declared; CPUs are priced as asked, and a job with
    /// `--hint`, `--threads-per-core` or `--ntasks-per-core` cannot be priced.
    pub threads_per_core: Option<u32>,
}

/// What one node of a partition holds, as slurmctld allocates it to a job that gets the whole
/// node: its CPUs (`CPUs`, less any specialized ones: `CPUEffective`), memory (`RealMemory`
/// less `MemSpecLimit`) and GPUs (its `gpu` GRES, every type).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSize {
    pub cpus: u32,
    pub mem_mb: u64,
    pub gpus: u32,
}

/// Memory asked for, in megabytes (MiB).
///
/// JSON: `{"per_node_mb": 4096}`, `{"per_cpu_mb": 2048}` or `{"per_gpu_mb": 16384}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemoryRequest {
    /// `--mem`: on each node. 0 means all of each node's memory, as in Slurm.
    #[serde(rename = "per_node_mb")]
    PerNode(u64),
    /// `--mem-per-cpu`: for each allocated CPU.
    #[serde(rename = "per_cpu_mb")]
    PerCpu(u64),
    /// `--mem-per-gpu`: for each allocated GPU (a job with GPUs only).
    #[serde(rename = "per_gpu_mb")]
    PerGpu(u64),
}

impl MemoryRequest {
    /// `--mem=0`: Slurm gives the job all the memory of each node.
    pub fn is_whole_node(&self) -> bool {
        matches!(self, MemoryRequest::PerNode(0))
    }
}

/// What a GPU count is counted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum GpuPer {
    /// `--gres=gpu:N`, `--gpus-per-node=N`, a dstack task's `gpu` (per node).
    #[default]
    #[serde(rename = "node")]
    PerNode,
    /// `--gpus=N`: for the whole job.
    #[serde(rename = "job")]
    PerJob,
    /// `--gpus-per-task=N`: for each task.
    #[serde(rename = "task")]
    PerTask,
}

/// GPUs asked for: a count, what it is counted over, and optionally one type.
///
/// JSON: `{"count": 2, "per": "node", "kind": "a100"}` (`per` defaults to `node`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRequest {
    pub count: u32,
    #[serde(default)]
    pub per: GpuPer,
    /// A Slurm GRES type (`a100`, `h100`), as the user wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A job as a user asks for it, before any cluster is chosen.
///
/// Built by [`parse_sbatch`], [`parse_dstack_task`] or from JSON. In JSON every field is
/// optional: `nodes` and `cpus_per_task` default to 1 and `ntasks` to one task per node
/// (`nodes × ntasks_per_node` when that is given), exactly as sbatch defaults them; a request
/// with `dstack` takes its resources, name and time limit from the task unless they are given
/// (and [`validate`](JobRequest::validate) refuses them if they disagree). Unknown fields are
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "JobRequestWire")]
pub struct JobRequest {
    pub account: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    /// `-M/--clusters`: the clusters the user allows, in their order; empty = any.
    pub clusters: Vec<String>,
    pub nodes: u32,
    /// The user gave the node count (sbatch's `-N N`, `nodes` in JSON): the job runs on exactly
    /// `nodes` nodes. Without it, a one-node job priced by its CPUs alone is left to Slurm to
    /// place, as sbatch leaves a job without `-N`. In JSON, `nodes` is sent only when exact.
    pub nodes_exact: bool,
    pub ntasks: u32,
    /// Recorded for forwarding; when `--ntasks` is absent it already set `ntasks`.
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: u32,
    /// `-c` was given (`cpus_per_task` in JSON): sbatch then sets the job's
    /// `SLURM_CPUS_PER_TASK`, 1 included. In JSON, `cpus_per_task` is sent only when given.
    pub cpus_per_task_given: bool,
    /// `--cpus-per-gpu`: CPUs for each of the job's GPUs (not with `-c`, as in sbatch).
    pub cpus_per_gpu: Option<u32>,
    /// `--mincpus`: at least this many CPUs on each of the job's nodes, as slurmctld allocates
    /// them (JSON: `min_cpus_per_node`). The job is pinned to its node count, as a job with
    /// resources per node is: on more nodes Slurm would allocate (and charge) more.
    pub min_cpus_per_node: Option<u32>,
    /// `--hint` (JSON: `hint`, the text): sbatch's application hints, which set
    /// [`job_threads_per_core`](Self::job_threads_per_core) or
    /// [`job_ntasks_per_core`](Self::job_ntasks_per_core) and the job's `SLURM_HINT`. Not with
    /// `threads_per_core` or `ntasks_per_core`.
    pub hint: Option<Hint>,
    /// `--threads-per-core`: threads of each core the job uses (JSON: `threads_per_core`).
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core`: most tasks on one core (JSON: `ntasks_per_core`).
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-gpu` (JSON: `ntasks_per_gpu`): that many tasks share each GPU. Slurm
    /// derives the other count from the one given ([`ntasks_per_gpu_shape`]): the tasks from
    /// the GPUs, or the GPUs from the tasks; both are already in `ntasks` and `gpus`.
    pub ntasks_per_gpu: Option<u32>,
    /// `gpus` was derived from the tasks (`-n 8 --ntasks-per-gpu=2`: 4 GPUs for the job), as
    /// slurmctld derives it: priced, not sent (Slurm derives it again) nor serialized.
    pub gpus_from_tasks: bool,
    pub memory: Option<MemoryRequest>,
    pub gpus: Option<GpuRequest>,
    /// Non-GPU `--gres` entries (`shard:1`), forwarded as given and not priced.
    pub other_gres: Vec<String>,
    /// `-L/--licenses`: cluster-wide licenses the job takes, priced as `license/<name>` TRES
    /// (JSON: `licenses`, the sbatch text). Slurm clusters only.
    pub licenses: Option<Licenses>,
    /// Whole minutes; `None` = no limit given: the partition's default applies (its
    /// maximum when it has no default), as in Slurm.
    pub time_limit_min: Option<u64>,
    /// `-t UNLIMITED` (`INFINITE`, `0`): no limit asked for. The job is priced and run at the
    /// partition's maximum; a partition without one refuses it (an endless job has no price).
    pub time_unlimited: bool,
    pub job_name: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    /// The batch script, `#!` line first.
    pub script: Option<String>,
    /// Where the script was read from, as sbatch sends it (the CLI: as typed when it starts
    /// with `/` or `.`, else under the current folder): the job's command, `argv[0]`
    /// (`Command=` in `scontrol show job`).
    pub script_path: Option<String>,
    /// The script's own arguments (`bursar submit job.sh in.dat 4`): `$1`, `$2`, … in the job.
    pub script_args: Vec<String>,
    /// `--wrap`: a command to run under `/bin/sh` instead of a script.
    pub wrap: Option<String>,
    /// `-D/--chdir`.
    pub working_dir: Option<String>,
    /// Variables to set in the job (the CLI fills them from the user's environment).
    pub environment: BTreeMap<String, String>,
    /// `--export` as given (`ALL`, `NONE`, `ALL,VAR=value`, …), for the forwarder.
    pub export: Option<String>,
    pub mail_type: Option<String>,
    pub mail_user: Option<String>,
    pub comment: Option<String>,
    /// `-C/--constraint` node features, as given.
    pub constraint: Option<String>,
    /// `--exclusive`: whole nodes (Slurm charges them whole; see the module docs).
    pub exclusive: bool,
    /// `-H/--hold`: submitted held (priority 0) until the user releases it.
    pub hold: bool,
    /// `-a/--array`: a job array, one job of this shape per task index (JSON: `array`, the
    /// sbatch text, left out when `None`). Slurm clusters only.
    pub array: Option<ArraySpec>,
    /// Options only Slurm clusters take (`--signal`, `--requeue`, `--nice`, …): forwarded as
    /// given, not priced (JSON: `slurm`, left out when empty).
    pub slurm: SlurmOptions,
    /// A dstack task; serialized as the task file's own content (JSON).
    pub dstack: Option<DstackTask>,
}

impl Default for JobRequest {
    /// One node, one task, one CPU; nothing else.
    fn default() -> JobRequest {
        JobRequest {
            account: None,
            partition: None,
            qos: None,
            clusters: Vec::new(),
            nodes: 1,
            nodes_exact: false,
            ntasks: 1,
            ntasks_per_node: None,
            cpus_per_task: 1,
            cpus_per_task_given: false,
            cpus_per_gpu: None,
            min_cpus_per_node: None,
            hint: None,
            threads_per_core: None,
            ntasks_per_core: None,
            ntasks_per_gpu: None,
            gpus_from_tasks: false,
            memory: None,
            gpus: None,
            other_gres: Vec::new(),
            licenses: None,
            time_limit_min: None,
            time_unlimited: false,
            job_name: None,
            output: None,
            error: None,
            script: None,
            script_path: None,
            script_args: Vec::new(),
            wrap: None,
            working_dir: None,
            environment: BTreeMap::new(),
            export: None,
            mail_type: None,
            mail_user: None,
            comment: None,
            constraint: None,
            exclusive: false,
            hold: false,
            array: None,
            slurm: SlurmOptions::default(),
            dstack: None,
        }
    }
}

/// The JSON body as received: everything optional, defaults applied in `From`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobRequestWire {
    #[serde(default)]
    account: Option<String>,
    #[serde(default)]
    partition: Option<String>,
    #[serde(default)]
    qos: Option<String>,
    #[serde(default)]
    clusters: Vec<String>,
    #[serde(default)]
    nodes: Option<u32>,
    /// Whether `nodes` is sbatch's `-N` (default: whether `nodes` is given). Read, never
    /// sent: clients that sent it still work, and a request states it by sending `nodes` or not.
    #[serde(default)]
    nodes_exact: Option<bool>,
    #[serde(default)]
    ntasks: Option<u32>,
    #[serde(default)]
    ntasks_per_node: Option<u32>,
    #[serde(default)]
    cpus_per_task: Option<u32>,
    #[serde(default)]
    cpus_per_gpu: Option<u32>,
    #[serde(default)]
    min_cpus_per_node: Option<u32>,
    #[serde(default)]
    hint: Option<Hint>,
    #[serde(default)]
    threads_per_core: Option<u32>,
    #[serde(default)]
    ntasks_per_core: Option<u32>,
    #[serde(default)]
    ntasks_per_gpu: Option<u32>,
    #[serde(default)]
    memory: Option<MemoryRequest>,
    #[serde(default)]
    gpus: Option<GpuRequest>,
    #[serde(default)]
    other_gres: Vec<String>,
    #[serde(default)]
    licenses: Option<Licenses>,
    #[serde(default)]
    time_limit_min: Option<u64>,
    #[serde(default)]
    time_unlimited: bool,
    #[serde(default)]
    job_name: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    script_path: Option<String>,
    #[serde(default)]
    script_args: Vec<String>,
    #[serde(default)]
    wrap: Option<String>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    export: Option<String>,
    #[serde(default)]
    mail_type: Option<String>,
    #[serde(default)]
    mail_user: Option<String>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    constraint: Option<String>,
    #[serde(default)]
    exclusive: bool,
    #[serde(default)]
    hold: bool,
    #[serde(default)]
    array: Option<ArraySpec>,
    #[serde(default)]
    slurm: SlurmOptions,
    #[serde(default)]
    dstack: Option<DstackTask>,
}

/// A request is sent with what was asked for, so that the server derives the rest as the
/// client did: `nodes` only when exact (sbatch's `-N`), `cpus_per_task` only when given (either
/// also when a request built in code holds a count the server could not derive again); empty
/// fields are left out. Written by hand, field by field, so that admission serializes the
/// request it stores without copying it first.
impl Serialize for JobRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let derived_nodes = self
            .ntasks_per_node
            .and_then(|per_node| nodes_for_tasks(self.ntasks, per_node))
            .unwrap_or(1);
        let plain = self.dstack.is_none();
        let nodes =
            (self.nodes_exact || plain && self.nodes != derived_nodes).then_some(self.nodes);
        let cpus = (self.cpus_per_task_given || plain && self.cpus_per_task != 1)
            .then_some(self.cpus_per_task);
        let mut map = serializer.serialize_map(None)?;
        macro_rules! put {
            ($key:literal, $value:expr) => {
                map.serialize_entry($key, $value)?
            };
        }
        macro_rules! some {
            ($key:literal, $value:expr) => {
                if let Some(value) = $value {
                    map.serialize_entry($key, value)?;
                }
            };
        }
        some!("account", &self.account);
        some!("partition", &self.partition);
        some!("qos", &self.qos);
        if !self.clusters.is_empty() {
            put!("clusters", &self.clusters);
        }
        some!("nodes", &nodes);
        put!("ntasks", &self.ntasks);
        some!("ntasks_per_node", &self.ntasks_per_node);
        some!("cpus_per_task", &cpus);
        some!("cpus_per_gpu", &self.cpus_per_gpu);
        some!("min_cpus_per_node", &self.min_cpus_per_node);
        some!("hint", &self.hint);
        some!("threads_per_core", &self.threads_per_core);
        some!("ntasks_per_core", &self.ntasks_per_core);
        some!("ntasks_per_gpu", &self.ntasks_per_gpu);
        some!("memory", &self.memory);
        if !self.gpus_from_tasks {
            some!("gpus", &self.gpus);
        }
        if !self.other_gres.is_empty() {
            put!("other_gres", &self.other_gres);
        }
        some!("licenses", &self.licenses);
        some!("time_limit_min", &self.time_limit_min);
        if self.time_unlimited {
            put!("time_unlimited", &true);
        }
        some!("job_name", &self.job_name);
        some!("output", &self.output);
        some!("error", &self.error);
        some!("script", &self.script);
        some!("script_path", &self.script_path);
        if !self.script_args.is_empty() {
            put!("script_args", &self.script_args);
        }
        some!("wrap", &self.wrap);
        some!("working_dir", &self.working_dir);
        if !self.environment.is_empty() {
            put!("environment", &self.environment);
        }
        some!("export", &self.export);
        some!("mail_type", &self.mail_type);
        some!("mail_user", &self.mail_user);
        some!("comment", &self.comment);
        some!("constraint", &self.constraint);
        if self.exclusive {
            put!("exclusive", &true);
        }
        if self.hold {
            put!("hold", &true);
        }
        some!("array", &self.array);
        if !self.slurm.is_empty() {
            put!("slurm", &self.slurm);
        }
        some!("dstack", &self.dstack);
        map.end()
    }
}

impl From<JobRequestWire> for JobRequest {
    fn from(w: JobRequestWire) -> JobRequest {
        let base = match &w.dstack {
            Some(task) => JobRequest::from_dstack(task.clone()),
            None => JobRequest::default(),
        };
        // Without nodes, Slurm gives the job the nodes its tasks need at ntasks_per_node each.
        let nodes = w
            .nodes
            .or_else(|| nodes_for_tasks(w.ntasks?, w.ntasks_per_node?))
            .unwrap_or(base.nodes);
        // sbatch: without -n, one task per node (or --ntasks-per-node per node; with -N and
        // no --ntasks-per-node, one per thread --threads-per-core or the hint asks for).
        let threads = w
            .threads_per_core
            .or_else(|| w.hint.as_ref()?.effect().threads_per_core);
        let per_node = match (w.ntasks_per_node, w.nodes, threads) {
            (Some(per_node), _, _) => per_node,
            (None, Some(_), Some(threads)) => threads,
            _ => 1,
        };
        let gpus = w.gpus.or(base.gpus);
        let (ntasks, gpus, gpus_from_tasks) = match w.ntasks_per_gpu {
            Some(per_gpu) => ntasks_per_gpu_shape(per_gpu, w.ntasks, w.nodes, gpus),
            None => (w.ntasks, gpus, false),
        };
        let ntasks = ntasks.unwrap_or_else(|| nodes.saturating_mul(per_node));
        JobRequest {
            account: w.account,
            partition: w.partition,
            qos: w.qos,
            clusters: w.clusters,
            nodes,
            nodes_exact: w.nodes_exact.unwrap_or(w.nodes.is_some()),
            ntasks,
            ntasks_per_node: w.ntasks_per_node,
            cpus_per_task: w.cpus_per_task.unwrap_or(base.cpus_per_task),
            cpus_per_task_given: w.cpus_per_task.is_some(),
            cpus_per_gpu: w.cpus_per_gpu,
            min_cpus_per_node: w.min_cpus_per_node,
            hint: w.hint,
            threads_per_core: w.threads_per_core,
            ntasks_per_core: w.ntasks_per_core,
            ntasks_per_gpu: w.ntasks_per_gpu,
            gpus_from_tasks,
            memory: w.memory.or(base.memory),
            gpus,
            other_gres: w.other_gres,
            licenses: w.licenses,
            time_limit_min: w.time_limit_min.or(base.time_limit_min),
            time_unlimited: w.time_unlimited,
            job_name: w.job_name.or(base.job_name),
            output: w.output,
            error: w.error,
            script: w.script,
            script_path: w.script_path,
            script_args: w.script_args,
            wrap: w.wrap,
            working_dir: w.working_dir,
            environment: w.environment,
            export: w.export,
            mail_type: w.mail_type,
            mail_user: w.mail_user,
            comment: w.comment,
            constraint: w.constraint,
            exclusive: w.exclusive,
            hold: w.hold,
            array: w.array,
            slurm: w.slurm,
            dstack: w.dstack,
        }
    }
}

impl JobRequest {
    /// CPUs the job is allocated: `ntasks × cpus_per_task`, or `cpus_per_gpu` × its GPUs when
    /// that is more, and at least one (`--mincpus`: that many) per node.
    pub fn cpus(&self) -> u64 {
        self.cpus_with(&PartitionDefaults::default())
    }

    /// The CPUs per GPU the job gets: its `--cpus-per-gpu`, else, for a job with GPUs and no
    /// `-c`, the partition's `DefCpuPerGPU` (cons_tres's `_set_gpu_defaults`) — not with
    /// `--ntasks-per-gpu`, whose GPUs each take their tasks' CPUs ahead of the default.
    pub fn cpus_per_gpu_with(&self, defaults: &PartitionDefaults) -> Option<u32> {
        self.cpus_per_gpu.or_else(|| {
            (self.gpus.is_some() && !self.cpus_per_task_given && self.ntasks_per_gpu.is_none())
                .then_some(defaults.cpus_per_gpu)
                .flatten()
        })
    }

    /// [`cpus`](Self::cpus) on a partition with these defaults: every CPU of its nodes when
    /// the job gets them whole ([`whole_nodes`](Self::whole_nodes)).
    pub fn cpus_with(&self, defaults: &PartitionDefaults) -> u64 {
        self.cpu_counts(defaults).0
    }

    /// The CPUs the job is allocated, and the CPUs memory per CPU is counted for: on nodes
    /// of several threads per core, whole cores ([`cores`]); every CPU of each node when the
    /// job gets them whole.
    fn cpu_counts(&self, defaults: &PartitionDefaults) -> (u64, u64) {
        let asked = self.asked_cpus(defaults);
        let (cpus, mem_cpus) = match self.core_layout(asked, defaults) {
            Some(layout) => (layout.cpus, layout.mem_cpus),
            None => (asked, asked),
        };
        let whole = self.whole_nodes(defaults).map_or(0, |node| {
            u64::from(node.cpus).saturating_mul(u64::from(self.nodes))
        });
        if whole == 0 {
            return (cpus, mem_cpus);
        }
        // Whole nodes: memory per CPU for the job's threads of each core, as for its cores.
        let whole = whole.max(cpus);
        let mem_whole = match (
            defaults.threads_per_core.filter(|t| *t > 1),
            self.job_threads_per_core(),
        ) {
            (Some(threads), Some(used)) if used < threads => {
                whole / u64::from(threads) * u64::from(used)
            }
            _ => whole,
        };
        (whole, mem_whole)
    }

    /// `--threads-per-core`, or the one `--hint` sets.
    pub fn job_threads_per_core(&self) -> Option<u32> {
        self.threads_per_core
            .or_else(|| self.hint.as_ref()?.effect().threads_per_core)
    }

    /// `--ntasks-per-core`, or the one `--hint` sets.
    pub fn job_ntasks_per_core(&self) -> Option<u32> {
        self.ntasks_per_core
            .or_else(|| self.hint.as_ref()?.effect().ntasks_per_core)
    }

    /// The job says how it uses a core's threads (`--hint`, `--threads-per-core`,
    /// `--ntasks-per-core`): it is priced by the partition's threads per core.
    pub fn uses_core_threads(&self) -> bool {
        self.hint.is_some() || self.threads_per_core.is_some() || self.ntasks_per_core.is_some()
    }

    /// Whole cores of the partition's threads, for `asked` CPUs; `None` where a core has one
    /// thread or the partition does not say.
    fn core_layout(&self, asked: u64, defaults: &PartitionDefaults) -> Option<CoreLayout> {
        let threads = defaults.threads_per_core.filter(|t| *t > 1)?;
        Some(self.core_shape(asked).layout(threads))
    }

    /// The job's shape for [`cores`], with `asked` CPUs: the tasks slurmctld lays out are its
    /// own, `--ntasks-per-node` × nodes, or (up to 24.11.0, `--mincpus`) the CPUs it allocates
    /// in whole tasks, whichever is most.
    fn core_shape(&self, asked: u64) -> CoreShape {
        let per_node_tasks = self
            .ntasks_per_node
            .map_or(0, |n| u64::from(n).saturating_mul(u64::from(self.nodes)));
        CoreShape {
            nodes: self.nodes,
            tasks: u64::from(self.ntasks)
                .max(per_node_tasks)
                .max(asked / u64::from(self.cpus_per_task.max(1))),
            cpus_per_task: self.cpus_per_task,
            cpus: asked,
            threads_per_core: self.job_threads_per_core(),
            ntasks_per_core: self.job_ntasks_per_core(),
        }
    }

    /// The job must run on the node count it was priced for, on nodes of several threads per
    /// core: tasks of `-c` CPUs that do not fill whole cores round up on each node they land
    /// on, so spread over more nodes (as Slurm may spread a job without `-N`) they cost more;
    /// so do planes of tasks ([`plane_may_cost_more`](Self::plane_may_cost_more)).
    pub fn needs_pinned_nodes(&self, defaults: &PartitionDefaults) -> bool {
        let Some(threads) = defaults.threads_per_core.filter(|t| *t > 1) else {
            return false;
        };
        let used = self.core_shape(0).threads_used(threads);
        (self.ntasks > 1 && self.cpus_per_task > 1 && u64::from(self.cpus_per_task) % used != 0)
            || self.plane_size().is_some()
    }

    /// The plane size of a `-m plane=N` layout.
    pub fn plane_size(&self) -> Option<u32> {
        let text = self.slurm.distribution.as_deref()?;
        layout::parse_distribution(text).ok()?.plane_size
    }

    /// Whether slurmctld's plane layout could take more whole cores than bursar prices on
    /// nodes of several threads per core: each plane is rounded up to whole cores on its node,
    /// where bursar spreads the tasks evenly. On one node, or with `--ntasks-per-node` fixing
    /// each node's tasks (and no GRES, for which slurmctld does not cap a node's tasks by it),
    /// the layout cannot change a node's count.
    pub fn plane_may_cost_more(&self, defaults: &PartitionDefaults) -> bool {
        defaults.threads_per_core.is_some_and(|t| t > 1)
            && self.plane_size().is_some()
            && self.nodes > 1
            && (self.ntasks_per_node.is_none() || self.has_gres())
    }

    /// GPUs or other GRES.
    pub fn has_gres(&self) -> bool {
        self.total_gpus() > 0 || !self.other_gres.is_empty()
    }

    /// The CPUs of a node of `cpus` CPUs the job can use: on nodes of several threads per
    /// core, only the threads of each core it uses.
    pub fn usable_node_cpus(&self, cpus: u32, defaults: &PartitionDefaults) -> u64 {
        match defaults.threads_per_core.filter(|t| *t > 1) {
            Some(threads) => u64::from(cpus / threads) * self.core_shape(0).threads_used(threads),
            None => u64::from(cpus),
        }
    }

    /// The CPUs the job asks for, before whole cores or whole nodes.
    fn asked_cpus(&self, defaults: &PartitionDefaults) -> u64 {
        let per_gpu = self
            .cpus_per_gpu_with(defaults)
            .map_or(0, |c| u64::from(c).saturating_mul(self.total_gpus()));
        // slurmctld (up to 24.11.0, and again from 25.11) lays out `--ntasks-per-node` × nodes
        // tasks when that is more than `-n` (22.05.8: `-N 2 -n 2 --ntasks-per-node=2` is
        // allocated 4 CPUs), so such a job is priced for them.
        let per_node_tasks = self.ntasks_per_node.map_or(0, |per_node| {
            u64::from(per_node)
                .saturating_mul(u64::from(self.nodes))
                .saturating_mul(u64::from(self.cpus_per_task))
        });
        (u64::from(self.ntasks) * u64::from(self.cpus_per_task))
            .max(per_node_tasks)
            .max(per_gpu)
            .max(u64::from(self.nodes))
            .max(self.min_cpus_raise(defaults))
    }

    /// The CPUs `--mincpus` brings a job where slurmctld allocates them (up to 24.11.0): its
    /// task layout takes `MAX(ncpus, nhosts × pn_min_cpus)` CPUs as the task count, divided
    /// by `-c` when that is above 1 (whole tasks of `-c` CPUs each), or `--ntasks-per-node` ×
    /// nodes tasks when both are given (`--mincpus` then adds nothing).
    fn min_cpus_raise(&self, defaults: &PartitionDefaults) -> u64 {
        let Some(min) = self.min_cpus_per_node else {
            return 0;
        };
        if defaults.min_cpus_only_select {
            return 0;
        }
        let cpus = u64::from(self.nodes).saturating_mul(u64::from(min));
        match (self.cpus_per_task, self.ntasks_per_node) {
            (0 | 1, _) => cpus,
            (_, Some(_)) => 0,
            (per_task, None) => cpus / u64::from(per_task) * u64::from(per_task),
        }
    }

    /// When the job may start at the soonest, submitted at `now`: its `--begin`, if later.
    pub fn earliest_start(&self, now: i64) -> i64 {
        self.slurm.begin.map_or(now, |begin| begin.max(now))
    }

    /// The size of the partition's nodes when the job gets them whole: it asks for
    /// `--exclusive`, or the partition never shares a node. `None` otherwise, and when the
    /// partition's node size is not declared (a Slurm cluster is then not eligible for such a
    /// job: [`crate::admission`]'s quote says why).
    pub fn whole_nodes<'d>(&self, defaults: &'d PartitionDefaults) -> Option<&'d NodeSize> {
        if self.exclusive || defaults.exclusive {
            defaults.node.as_ref()
        } else {
            None
        }
    }

    /// The fewest whole nodes of `node`'s size that hold the job's tasks (each with its
    /// `-c` CPUs on one node) and GPUs; `None` when no node can hold one task, or the job asks
    /// for GPUs and the nodes have none. A job that gets whole nodes is priced for
    /// `nodes` of them, so it must not need more: Slurm would give it (and charge) the more.
    pub fn whole_nodes_needed(&self, node: &NodeSize, defaults: &PartitionDefaults) -> Option<u64> {
        let tasks_per_node =
            self.usable_node_cpus(node.cpus, defaults) / u64::from(self.cpus_per_task.max(1));
        if tasks_per_node == 0 {
            return None;
        }
        let for_tasks = u64::from(self.ntasks).div_ceil(tasks_per_node);
        let gpus = self.total_gpus();
        let for_gpus = match (gpus, node.gpus) {
            (0, _) => 0,
            (_, 0) => return None,
            (gpus, per_node) => gpus.div_ceil(u64::from(per_node)),
        };
        Some(for_tasks.max(for_gpus).max(1))
    }

    /// [`total_gpus`](Self::total_gpus) on a partition with these defaults: every GPU of its
    /// nodes when the job gets them whole (slurmctld then gives the job all of each node's
    /// GRES, asked for or not).
    pub fn gpus_with(&self, defaults: &PartitionDefaults) -> u64 {
        let whole = self.whole_nodes(defaults).map_or(0, |node| {
            u64::from(node.gpus).saturating_mul(u64::from(self.nodes))
        });
        self.total_gpus().max(whole)
    }

    /// GPUs over the whole job: per-node counts × `nodes`, per-task counts × `ntasks`, per-job
    /// counts as given.
    pub fn total_gpus(&self) -> u64 {
        match &self.gpus {
            None => 0,
            Some(g) => match g.per {
                GpuPer::PerNode => u64::from(g.count) * u64::from(self.nodes),
                GpuPer::PerTask => u64::from(g.count) * u64::from(self.ntasks),
                GpuPer::PerJob => u64::from(g.count),
            },
        }
    }

    /// Memory over the whole job in MB; `None` when it would overflow.
    fn checked_memory_mb(&self, defaults: &PartitionDefaults) -> Option<u64> {
        let (_, cpus) = self.cpu_counts(defaults);
        let gpus = self.gpus_with(defaults);
        match self.memory {
            // `--mem=0`: all of each node's memory, when the partition says how much.
            Some(MemoryRequest::PerNode(0)) => defaults.node.map_or(Some(0), |node| {
                node.mem_mb.checked_mul(u64::from(self.nodes))
            }),
            Some(MemoryRequest::PerNode(mb)) => mb.checked_mul(u64::from(self.nodes)),
            Some(MemoryRequest::PerCpu(mb)) => mb.checked_mul(cpus),
            Some(MemoryRequest::PerGpu(mb)) => mb.checked_mul(gpus),
            // A job with GPUs gets DefMemPerGPU where the partition has it, else DefMemPerCPU;
            // with neither, slurmctld gives it all of each node's memory.
            None => match (defaults.mem_per_gpu_mb, self.gpus.is_some()) {
                (Some(mb), true) => mb.checked_mul(gpus),
                _ => match (defaults.mem_per_cpu_mb, defaults.node) {
                    (Some(mb), _) => mb.checked_mul(cpus),
                    (None, Some(node)) => node.mem_mb.checked_mul(u64::from(self.nodes)),
                    (None, None) => Some(0),
                },
            },
        }
    }

    /// The resource vector to price, as Slurm would allocate it (rules in the module docs).
    /// Memory is 0 when none was asked for; see [`alloc_with_defaults`](Self::alloc_with_defaults).
    pub fn alloc(&self) -> Tres {
        self.alloc_with_defaults(&PartitionDefaults::default())
    }

    /// [`alloc`](Self::alloc), with a request that names no memory given the partition's
    /// `DefMemPerCPU` (MB per CPU), as slurmctld would. A request that names memory ignores it.
    pub fn alloc_with_default_mem(&self, def_mem_per_cpu_mb: Option<u64>) -> Tres {
        self.alloc_with_defaults(&PartitionDefaults {
            mem_per_cpu_mb: def_mem_per_cpu_mb,
            ..PartitionDefaults::default()
        })
    }

    /// [`alloc`](Self::alloc) on a partition with these defaults, applied as slurmctld applies
    /// them: CPUs per GPU to a job with GPUs and no `-c` or `--cpus-per-gpu`, memory per GPU
    /// (else per CPU) to a job that names no memory.
    pub fn alloc_with_defaults(&self, defaults: &PartitionDefaults) -> Tres {
        let mut tres = Tres::new();
        let mut put = |name: &str, count: u64| {
            if count > 0 {
                tres.set(name, count);
            }
        };
        put("node", u64::from(self.nodes));
        put("cpu", self.cpus_with(defaults));
        put("mem", self.checked_memory_mb(defaults).unwrap_or(u64::MAX));
        let gpus = self.gpus_with(defaults);
        put("gres/gpu", gpus);
        if let Some(kind) = self.gpus.as_ref().and_then(|g| g.kind.as_deref()) {
            put(&format!("gres/gpu:{}", kind.to_ascii_lowercase()), gpus);
        }
        for (name, count) in self.licenses.iter().flat_map(Licenses::tres) {
            put(&name, count);
        }
        tres
    }

    /// The time limit as a [`TimeLimit`] (`None` minutes → the partition's; see
    /// [`JobRequest::time_unlimited`] for an explicit `UNLIMITED`).
    pub fn time_limit(&self) -> TimeLimit {
        TimeLimit::from_minutes(self.time_limit_min)
    }

    /// The script to submit: the given one, or sbatch's `--wrap` script around the command.
    pub fn batch_script(&self) -> Option<Cow<'_, str>> {
        match (&self.script, &self.wrap) {
            (Some(script), _) => Some(Cow::Borrowed(script)),
            (None, Some(command)) => Some(Cow::Owned(format!(
                "#!/bin/sh\n# This script was created by bursar submit --wrap.\n\n{command}\n"
            ))),
            (None, None) => None,
        }
    }

    /// Builds the request a dstack task asks for. Ranges are priced at their minimum:
    /// `nodes` from `nodes`, one task per node with `cpu`'s minimum CPUs (at least 1),
    /// `memory`'s minimum per node, `gpu`'s minimum count per node (typed when the spec names
    /// exactly one model), `max_duration` rounded up to whole minutes, `name` as the job name.
    pub fn from_dstack(task: DstackTask) -> JobRequest {
        let r = &task.resources;
        let gpus = r.gpu.as_ref().and_then(|spec| {
            let count = spec.count.min_or_zero();
            (count > 0).then(|| GpuRequest {
                count,
                per: GpuPer::PerNode,
                kind: spec.single_kind(),
            })
        });
        JobRequest {
            nodes: task.nodes,
            ntasks: task.nodes,
            cpus_per_task: r.cpu.min_or_zero().max(1),
            memory: r
                .memory
                .min_mb
                .filter(|mb| *mb > 0)
                .map(MemoryRequest::PerNode),
            gpus,
            time_limit_min: task.time_limit_min(),
            job_name: task.name.clone(),
            dstack: Some(task),
            ..JobRequest::default()
        }
    }

    /// Checks what parsing cannot: counts of at least 1, no more tasks than nodes can take,
    /// GPU types and GRES names Slurm accepts, names without spaces or control characters,
    /// one of script/`--wrap`/dstack at most, a script that sbatch would accept, a dstack
    /// request whose resources match its task, and a resource vector that fits in 64 bits.
    pub fn validate(&self) -> Result<(), RequestError> {
        let invalid = |message: String| Err(RequestError::Invalid(message));
        if self.nodes == 0 {
            return invalid("--nodes must be at least 1".into());
        }
        if self.ntasks == 0 {
            return invalid("--ntasks must be at least 1".into());
        }
        if self.cpus_per_task == 0 {
            return invalid("--cpus-per-task must be at least 1".into());
        }
        if self.ntasks_per_node == Some(0) {
            return invalid("--ntasks-per-node must be at least 1".into());
        }
        match self.min_cpus_per_node {
            Some(0) => return invalid("--mincpus must be at least 1".into()),
            // slurmctld keeps it in 16 bits, 0xfffe and up meaning unset
            Some(n) if n > MAX_COUNT16 => {
                return invalid(format!(
                    "--mincpus must be at most {MAX_COUNT16}, as in Slurm"
                ))
            }
            _ => {}
        }
        for (value, option) in [
            (self.threads_per_core, "--threads-per-core"),
            (self.ntasks_per_core, "--ntasks-per-core"),
        ] {
            match value {
                Some(0) => return invalid(format!("{option} must be at least 1")),
                Some(n) if n > MAX_COUNT16 => {
                    return invalid(format!(
                        "{option} must be at most {MAX_COUNT16}, as in Slurm"
                    ))
                }
                _ => {}
            }
        }
        if self.hint.is_some()
            && (self.threads_per_core.is_some() || self.ntasks_per_core.is_some())
        {
            return invalid(
                "--hint cannot be combined with --threads-per-core or --ntasks-per-core (sbatch \
                 then ignores the hint); give one or the other"
                    .into(),
            );
        }
        if let (Some(tasks), Some(threads)) =
            (self.job_ntasks_per_core(), self.job_threads_per_core())
        {
            if tasks > threads {
                return invalid(format!(
                    "--ntasks-per-core ({tasks}) is more than --threads-per-core ({threads}), \
                     which sbatch refuses (from Slurm 23.02)"
                ));
            }
        }
        if let Some(per_gpu) = self.ntasks_per_gpu {
            self.check_ntasks_per_gpu(per_gpu)?;
        }
        if self.exclusive && self.slurm.oversubscribe {
            return invalid(
                "--exclusive and --oversubscribe ask for opposite things; give one".into(),
            );
        }
        if self.slurm.spread_job && !self.nodes_exact && self.slurm.nodelist.is_none() {
            return invalid(
                "--spread-job without a node count lets Slurm spread the job over up to a node \
                 per task, as many as are free, which cannot be priced before it starts; give \
                 the nodes to spread it over with -N (or -w)"
                    .into(),
            );
        }
        if let Some(mode) = self.slurm.exclusive {
            let other = if self.exclusive {
                Some("--exclusive (whole nodes)")
            } else {
                self.slurm.oversubscribe.then_some("--oversubscribe")
            };
            if let Some(other) = other {
                return invalid(format!(
                    "{} and {other} both say how the job shares its nodes; give one",
                    mode.option()
                ));
            }
        }
        if self.uses_core_threads() && self.dstack.is_some() {
            return invalid(
                "hint, threads_per_core and ntasks_per_core do not apply to a dstack task".into(),
            );
        }
        if self.min_cpus_per_node.is_some() && self.dstack.is_some() {
            return invalid(
                "min_cpus_per_node does not apply to a dstack task: its resources name the CPUs"
                    .into(),
            );
        }
        if self.ntasks < self.nodes {
            return invalid(format!(
                "--ntasks ({}) is less than --nodes ({}): every node runs at least one task",
                self.ntasks, self.nodes
            ));
        }
        if self.memory == Some(MemoryRequest::PerCpu(0)) {
            return invalid("--mem-per-cpu must be at least 1 MB".into());
        }
        if self.memory == Some(MemoryRequest::PerGpu(0)) {
            return invalid("--mem-per-gpu must be at least 1 MB".into());
        }
        if matches!(self.memory, Some(MemoryRequest::PerGpu(_))) && self.gpus.is_none() {
            return invalid("--mem-per-gpu needs GPUs (--gpus, --gpus-per-node, …)".into());
        }
        match self.cpus_per_gpu {
            Some(0) => return invalid("--cpus-per-gpu must be at least 1".into()),
            Some(_) if self.gpus.is_none() => {
                return invalid("--cpus-per-gpu needs GPUs (--gpus, --gpus-per-node, …)".into())
            }
            Some(_) if self.cpus_per_task_given => {
                return invalid(
                    "--cpus-per-task and --cpus-per-gpu are mutually exclusive, as in sbatch"
                        .into(),
                )
            }
            Some(_)
                if self.nodes > 1
                    && self.gpus.as_ref().is_some_and(|g| g.per == GpuPer::PerJob) =>
            {
                return invalid(
                    "--gpus with --cpus-per-gpu on more than one node: Slurm gives each node \
                     CPUs for the GPUs it places there, which cannot be priced in advance; ask \
                     for the GPUs with --gpus-per-node or --gpus-per-task"
                        .into(),
                )
            }
            _ => {}
        }
        if let Some(gpus) = &self.gpus {
            if gpus.count == 0 {
                return invalid("a GPU request of 0 GPUs: leave the GPUs out instead".into());
            }
            if let Some(kind) = &gpus.kind {
                if !is_gres_type_name(kind) {
                    return invalid(format!(
                        "unknown GPU spec: {kind:?} is not a GPU type name (letters, digits, - _ .)"
                    ));
                }
            }
        }
        for entry in &self.other_gres {
            let list = gpu::parse_gres_list("other_gres", entry)?;
            if list.gpu.is_some() || list.other.len() != 1 {
                return invalid(format!(
                    "other_gres entry {entry:?} must be one non-GPU GRES such as shard:1"
                ));
            }
        }
        if let Some(per_node) = self.ntasks_per_node.filter(|n| *n > 0) {
            if u64::from(self.ntasks) > u64::from(self.nodes) * u64::from(per_node) {
                return invalid(format!(
                    "--ntasks={} does not fit on {} node(s) at --ntasks-per-node={per_node}",
                    self.ntasks, self.nodes
                ));
            }
        }
        if self.time_unlimited && self.dstack.is_some() {
            return invalid(
                "time_unlimited does not apply to a dstack task: its max_duration is the limit"
                    .into(),
            );
        }
        if self.array.is_some() && self.dstack.is_some() {
            return invalid(
                "array does not apply to a dstack task: dstack has no job arrays (submit one \
                 task per index)"
                    .into(),
            );
        }
        if self.licenses.is_some() && self.dstack.is_some() {
            return invalid(
                "licenses does not apply to a dstack task: dstack has no licenses (Slurm's -L)"
                    .into(),
            );
        }
        if self.time_unlimited && self.time_limit_min.is_some() {
            return invalid(
                "time_unlimited and time_limit_min exclude each other: give one or the other"
                    .into(),
            );
        }
        if let Some(types) = &self.mail_type {
            bursar_collectors::slurmrestd::mail_events(types)
                .map_err(|why| RequestError::invalid_value("--mail-type", types, &why))?;
        }
        self.slurm.validate()?;
        // slurmctld refuses a GPU frequency for a job that shares GPUs (GRES names are
        // case-sensitive).
        let shared = |g: &String| matches!(g.split(':').next(), Some("shard" | "mps"));
        if self.slurm.gpu_freq.is_some() && self.other_gres.iter().any(shared) {
            return invalid(
                "--gpu-freq cannot set the clocks of GPUs a job shares (shard or mps GRES): \
                 Slurm refuses the job; leave one out"
                    .into(),
            );
        }
        if let Some(plane) = self.plane_size() {
            layout::check_plane(plane, self.ntasks, self.nodes)
                .map_err(|why| RequestError::invalid_value("--distribution", "plane", why))?;
            // From 24.05 slurmctld offers a GRES job no more of a node's GRES than a plane of
            // tasks uses, so a node takes at most a plane of them.
            let needed = self.ntasks.div_ceil(plane);
            if self.has_gres() && needed > self.nodes {
                return Err(RequestError::invalid_value(
                    "--distribution",
                    &format!("plane={plane}"),
                    format!(
                        "with GPUs or other GRES, Slurm 24.05 and later put at most a plane of \
                         tasks on each node: {} tasks need {needed} nodes; pass -N {needed}, \
                         or a larger plane",
                        self.ntasks
                    ),
                ));
            }
        }
        if self.slurm.dependency.is_some() && self.clusters.len() != 1 {
            return invalid(
                "--dependency names jobs of one cluster, and bursar may send this job to \
                 another: name that cluster alone with -M CLUSTER (the cluster bursar submit \
                 printed with the jobs' ids)"
                    .into(),
            );
        }
        match self.time_limit_min {
            Some(0) => {
                return invalid(
                    "the time limit must be at least 1 minute (leave it out for the partition's)"
                        .into(),
                )
            }
            Some(m) if m > MAX_TIME_LIMIT_MIN => {
                return invalid(format!("the time limit of {m} minutes is too large"))
            }
            _ => {}
        }
        // sbatch runs the job on every node -w names (and more when -N asks for more).
        if let Some(list) = &self.slurm.nodelist {
            let named = hostlist::hosts(list)
                .map_err(|why| RequestError::invalid_value("--nodelist", list, why))?
                .len();
            if u64::from(self.nodes) < named as u64 {
                return invalid(format!(
                    "--nodelist names {named} nodes and the job asks for {}: give -N {named} \
                     (nodes: {named}), as sbatch would run it on all of them",
                    self.nodes
                ));
            }
        }
        // slurmctld's ESLURM_INVALID_TIME_MIN_LIMIT; against a partition's default limit the
        // quote checks it.
        if let (Some(min), Some(limit)) = (self.slurm.time_min, self.time_limit_min) {
            if min > limit {
                return invalid(format!(
                    "--time-min {} is longer than the time limit {}",
                    TimeLimit::Minutes(min),
                    TimeLimit::Minutes(limit)
                ));
            }
        }
        for (field, value) in [
            ("account", &self.account),
            ("partition", &self.partition),
            ("qos", &self.qos),
        ] {
            if let Some(v) = value {
                check_name(field, v)?;
            }
        }
        for (i, cluster) in self.clusters.iter().enumerate() {
            check_name("cluster", cluster)?;
            if self.clusters[..i].contains(cluster) {
                return invalid(format!("cluster {cluster} is listed twice"));
            }
        }
        for (field, value, max) in [
            ("job name", &self.job_name, SLURM_TEXT_MAX),
            ("output", &self.output, SLURM_PATH_MAX),
            ("error", &self.error, SLURM_PATH_MAX),
            ("working directory", &self.working_dir, SLURM_PATH_MAX),
            ("export", &self.export, usize::MAX),
            ("mail type", &self.mail_type, usize::MAX),
            ("mail user", &self.mail_user, SLURM_TEXT_MAX),
            ("comment", &self.comment, SLURM_TEXT_MAX),
            ("constraint", &self.constraint, SLURM_TEXT_MAX),
        ] {
            if let Some(v) = value {
                check_text_within(field, v, max)?;
            }
        }
        for (key, value) in &self.environment {
            if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
                return invalid(format!(
                    "environment variable {key:?} has an invalid name or value"
                ));
            }
        }
        let bodies = [
            self.script.is_some(),
            self.wrap.is_some(),
            self.dstack.is_some(),
        ];
        if bodies.iter().filter(|b| **b).count() > 1 {
            return invalid("give at most one of a script, --wrap and a dstack task".into());
        }
        if let Some(script) = &self.script {
            sbatch::check_script(script)?;
        }
        if self.script.is_none() && (self.script_path.is_some() || !self.script_args.is_empty()) {
            // sbatch's own words for the --wrap case.
            return invalid(if self.wrap.is_some() {
                "Script arguments not permitted with --wrap option".into()
            } else {
                "script_path and script_args belong to a batch script".into()
            });
        }
        // Any file name (with a blank or a line break too), any argument; but no NUL, which
        // ends a C string.
        if self
            .script_path
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.contains('\0'))
        {
            return invalid("script_path must be a file's path, without NUL".into());
        }
        if self.script_args.iter().any(|a| a.contains('\0')) {
            return invalid("a script argument cannot contain a NUL character".into());
        }
        if let Some(command) = &self.wrap {
            if command.trim().is_empty() || command.contains('\0') {
                return invalid("--wrap needs a command".into());
            }
        }
        if let Some(task) = &self.dstack {
            let derived = JobRequest::from_dstack(task.clone());
            let shape = |r: &JobRequest| {
                (
                    r.nodes,
                    r.ntasks,
                    r.cpus_per_task,
                    r.memory,
                    r.gpus.clone(),
                    r.time_limit_min,
                )
            };
            if shape(self) != shape(&derived)
                || self.ntasks_per_node.is_some()
                || !self.other_gres.is_empty()
            {
                return invalid(
                    "a dstack request takes its nodes, CPUs, memory, GPUs and time limit from the \
                     task: leave them out of the request or make them match"
                        .into(),
                );
            }
        }
        if self
            .checked_memory_mb(&PartitionDefaults::default())
            .is_none()
            || u64::from(self.nodes)
                .checked_mul(u64::from(self.gpus.as_ref().map_or(0, |g| g.count)))
                .is_none()
        {
            return invalid("the request is too large to price".into());
        }
        Ok(())
    }

    /// `--ntasks-per-gpu` against the rest of the request, as sbatch and slurmctld check it, and
    /// a `-n` that Slurm would silently replace.
    fn check_ntasks_per_gpu(&self, per_gpu: u32) -> Result<(), RequestError> {
        let invalid = |message: String| Err(RequestError::Invalid(message));
        if per_gpu == 0 {
            return invalid("--ntasks-per-gpu must be at least 1".into());
        }
        if per_gpu > MAX_COUNT16 {
            return invalid(format!(
                "--ntasks-per-gpu must be at most {MAX_COUNT16}, as in Slurm"
            ));
        }
        if self.dstack.is_some() {
            return invalid(
                "ntasks_per_gpu does not apply to a dstack task: its resources name the GPUs"
                    .into(),
            );
        }
        if self.ntasks_per_node.is_some() {
            return invalid(
                "--ntasks-per-gpu and --ntasks-per-node are mutually exclusive, as in sbatch"
                    .into(),
            );
        }
        let Some(gpus) = &self.gpus else {
            return invalid(
                "--ntasks-per-gpu needs GPUs (--gpus, --gpus-per-node, --gres=gpu:N) or a task \
                 count (-n, or -N without a range), as in Slurm"
                    .into(),
            );
        };
        if gpus.per == GpuPer::PerTask {
            return invalid(
                "--gpus-per-task and --ntasks-per-gpu are mutually exclusive, as in sbatch".into(),
            );
        }
        // On the nodes it is sent (pinned above one), Slurm 23.02.3 and later put the same
        // tasks on each node, a GPU for every `per_gpu` of them; earlier ones split the tasks
        // evenly without that rounding, and run some jobs refused here.
        let per_node = per_gpu.saturating_mul(self.nodes);
        if self.nodes > 1 && !self.ntasks.is_multiple_of(per_node) {
            return invalid(format!(
                "{} tasks at --ntasks-per-gpu={per_gpu} over -N {}: Slurm puts the same number \
                 of tasks on each node, a multiple of {per_gpu}, so the tasks must be a multiple \
                 of {per_node}; change -N or the GPUs",
                self.ntasks, self.nodes
            ));
        }
        if self.gpus_from_tasks {
            if !self.ntasks.is_multiple_of(per_gpu) {
                return invalid(format!(
                    "-n/--ntasks ({}) has to be a multiple of --ntasks-per-gpu ({per_gpu}), as \
                     Slurm requires: the job gets a GPU for every {per_gpu} tasks",
                    self.ntasks
                ));
            }
            return Ok(());
        }
        let total = self.total_gpus();
        let tasks = total.saturating_mul(u64::from(per_gpu));
        if u64::from(self.ntasks) != tasks {
            return invalid(format!(
                "--ntasks-per-gpu={per_gpu} with {total} GPU(s) makes {tasks} tasks, and -n asks \
                 for {}: Slurm would run {tasks}; leave -n out, or give it without the GPUs for \
                 Slurm to derive them",
                self.ntasks
            ));
        }
        Ok(())
    }

    /// The request as `#SBATCH` lines that [`parse_sbatch`] reads back into the same request
    /// (everything but the script, `--wrap`, the environment and a dstack task, which are not
    /// sbatch options). Values that need it are double-quoted with `\` escapes, as sbatch's
    /// `#SBATCH` tokenizer expects.
    pub fn to_sbatch_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut put = |option: &str, value: Option<String>| {
            if let Some(value) = value {
                lines.push(format!("#SBATCH --{option}={}", quote_directive(&value)));
            }
        };
        put("account", self.account.clone());
        put("partition", self.partition.clone());
        put("qos", self.qos.clone());
        put(
            "clusters",
            (!self.clusters.is_empty()).then(|| self.clusters.join(",")),
        );
        // Nodes not asked for are derived again from the tasks when the lines are read.
        put("nodes", self.nodes_exact.then(|| self.nodes.to_string()));
        put("ntasks", Some(self.ntasks.to_string()));
        put(
            "ntasks-per-node",
            self.ntasks_per_node.map(|n| n.to_string()),
        );
        put(
            "cpus-per-task",
            (self.cpus_per_task_given || self.cpus_per_task != 1)
                .then(|| self.cpus_per_task.to_string()),
        );
        match self.memory {
            Some(MemoryRequest::PerNode(mb)) => put("mem", Some(format_slurm_megabytes(mb))),
            Some(MemoryRequest::PerCpu(mb)) => put("mem-per-cpu", Some(format_slurm_megabytes(mb))),
            Some(MemoryRequest::PerGpu(mb)) => put("mem-per-gpu", Some(format_slurm_megabytes(mb))),
            None => {}
        }
        put("cpus-per-gpu", self.cpus_per_gpu.map(|c| c.to_string()));
        put("mincpus", self.min_cpus_per_node.map(|c| c.to_string()));
        put("hint", self.hint.as_ref().map(|h| h.as_str().to_string()));
        put(
            "threads-per-core",
            self.threads_per_core.map(|n| n.to_string()),
        );
        put(
            "ntasks-per-core",
            self.ntasks_per_core.map(|n| n.to_string()),
        );
        put("ntasks-per-gpu", self.ntasks_per_gpu.map(|n| n.to_string()));
        if let Some(g) = self.gpus.as_ref().filter(|_| !self.gpus_from_tasks) {
            let value = match &g.kind {
                Some(kind) => format!("{kind}:{}", g.count),
                None => g.count.to_string(),
            };
            let option = match g.per {
                GpuPer::PerNode => "gpus-per-node",
                GpuPer::PerTask => "gpus-per-task",
                GpuPer::PerJob => "gpus",
            };
            put(option, Some(value));
        }
        put(
            "gres",
            (!self.other_gres.is_empty()).then(|| self.other_gres.join(",")),
        );
        put("licenses", self.licenses.as_ref().map(Licenses::as_slurm));
        put(
            "time",
            match (self.time_limit_min, self.time_unlimited) {
                (Some(m), _) => Some(TimeLimit::Minutes(m).to_string()),
                (None, true) => Some(TimeLimit::Unlimited.to_string()),
                (None, false) => None,
            },
        );
        put("job-name", self.job_name.clone());
        put("output", self.output.clone());
        put("error", self.error.clone());
        put("chdir", self.working_dir.clone());
        put("export", self.export.clone());
        put("mail-type", self.mail_type.clone());
        put("mail-user", self.mail_user.clone());
        put("comment", self.comment.clone());
        put("constraint", self.constraint.clone());
        put(
            "array",
            self.array.as_ref().map(|a| a.as_slurm().to_string()),
        );
        let slurm = &self.slurm;
        put("signal", slurm.signal.as_ref().map(ToString::to_string));
        put("open-mode", slurm.open_mode.map(|m| m.as_str().to_string()));
        put("nice", slurm.nice.map(|n| n.to_string()));
        put("reservation", slurm.reservation.clone());
        put("wckey", slurm.wckey.clone());
        put("exclude", slurm.exclude.clone());
        put("input", slurm.input.clone());
        put("dependency", slurm.dependency.clone());
        // `uts`: the same instant whatever zone the lines are read in.
        put("begin", slurm.begin.map(|t| format!("uts{t}")));
        put("deadline", slurm.deadline.map(|t| format!("uts{t}")));
        put(
            "time-min",
            slurm.time_min.map(|m| TimeLimit::Minutes(m).to_string()),
        );
        put("tmp", slurm.tmp_mb.map(format_slurm_megabytes));
        put("prefer", slurm.prefer.clone());
        put("nodelist", slurm.nodelist.clone());
        put(
            "gres-flags",
            slurm.gres_flags.map(|f| f.as_str().to_string()),
        );
        put("acctg-freq", slurm.acctg_freq.clone());
        put("distribution", slurm.distribution.clone());
        put("mem-bind", slurm.mem_bind.clone());
        put("gpu-bind", slurm.gpu_bind.clone());
        put("gpu-freq", slurm.gpu_freq.clone());
        put("cpu-freq", slurm.cpu_freq.clone());
        put("profile", slurm.profile.clone());
        put("switches", slurm.switches.clone());
        put("container", slurm.container.clone());
        put("container-id", slurm.container_id.clone());
        put("exclusive", slurm.exclusive.map(|m| m.as_str().to_string()));
        put("delay-boot", slurm.delay_boot.clone());
        put("mcs-label", slurm.mcs_label.clone());
        put("extra", slurm.extra.clone());
        put(
            "priority",
            slurm.priority.map(|p| match p {
                TOP_PRIORITY => "TOP".to_string(),
                p => p.to_string(),
            }),
        );
        put(
            "wait-all-nodes",
            slurm.wait_all_nodes.map(|w| u8::from(w).to_string()),
        );
        put(
            "kill-on-invalid-dep",
            slurm
                .kill_on_invalid_dep
                .map(|kill| if kill { "yes" } else { "no" }.to_string()),
        );
        for (set, flag) in [
            (self.exclusive, "--exclusive"),
            (self.hold, "--hold"),
            (slurm.requeue == Some(true), "--requeue"),
            (slurm.requeue == Some(false), "--no-requeue"),
            (slurm.no_kill, "--no-kill"),
            (slurm.oversubscribe, "--oversubscribe"),
            (slurm.use_min_nodes, "--use-min-nodes"),
            (slurm.spread_job, "--spread-job"),
            (slurm.contiguous, "--contiguous"),
        ] {
            if set {
                lines.push(format!("#SBATCH {flag}"));
            }
        }
        lines
    }
}

/// `--ntasks-per-gpu=N` with the task count, node count (`-N`, when exact) and GPUs given, as
/// slurmctld's `gres_job_state_validate` completes them: with GPUs, `GPUs × N` tasks (a given
/// count is kept, for [`JobRequest::validate`] to hold against it); without, the tasks given
/// (or `nodes × N`) and a GPU for every N of them, for the whole job and of no type. Returns
/// the tasks (`None`: neither given), the GPUs, and whether they were derived.
pub(crate) fn ntasks_per_gpu_shape(
    per_gpu: u32,
    ntasks: Option<u32>,
    nodes: Option<u32>,
    gpus: Option<GpuRequest>,
) -> (Option<u32>, Option<GpuRequest>, bool) {
    if per_gpu == 0 {
        // refused as such (validate)
        return (ntasks, gpus, false);
    }
    match gpus {
        Some(g) => {
            let total = match g.per {
                GpuPer::PerJob => Some(g.count),
                GpuPer::PerNode => g.count.checked_mul(nodes.unwrap_or(1)),
                // refused beside --ntasks-per-gpu (validate)
                GpuPer::PerTask => None,
            };
            let derived = total.map(|t| t.saturating_mul(per_gpu));
            (ntasks.or(derived), Some(g), false)
        }
        None => {
            let tasks = ntasks.or_else(|| nodes.map(|n| n.saturating_mul(per_gpu)));
            // (fewer tasks than N: no GPU, which validate refuses as not a multiple)
            let gpus = tasks.map(|t| t / per_gpu).map(|count| GpuRequest {
                count,
                per: GpuPer::PerJob,
                kind: None,
            });
            let derived = gpus.is_some();
            (tasks, gpus, derived)
        }
    }
}

/// The nodes `ntasks` tasks need at `per_node` each (at least one); `None` for `per_node` 0.
pub(crate) fn nodes_for_tasks(ntasks: u32, per_node: u32) -> Option<u32> {
    (per_node > 0).then(|| ntasks.div_ceil(per_node).max(1))
}

/// Account, partition, QOS and cluster names: Slurm names, no spaces, commas or controls.
fn check_name(field: &str, value: &str) -> Result<(), RequestError> {
    check_length(field, value, SLURM_TEXT_MAX)?;
    if field == "partition" && value.contains(',') {
        return Err(RequestError::Invalid(format!(
            "partition {value:?} is a list: bursar prices and submits a job to one partition; \
             name one (bursar quote shows each cluster's)"
        )));
    }
    if value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == ',')
    {
        return Err(RequestError::Invalid(format!(
            "{field} {value:?} is not a valid name (no spaces, commas or control characters)"
        )));
    }
    Ok(())
}

/// The most bytes slurmctld keeps of a job's names and texts (its `_test_strlen` checks when
/// a job is submitted: the name, account, partition, QOS, comment, features, mail user,
/// reservation, wckey, MCS label, `--prefer`, `--extra`), and of its paths (`PATH_MAX`: the
/// output, error and input files, the working folder). Longer is refused before anything is
/// held, where slurmctld would refuse the job when bursar submits it.
const SLURM_TEXT_MAX: usize = 1024;
const SLURM_PATH_MAX: usize = 4096;

/// Free text (names, paths, addresses): not empty, one line.
fn check_text(field: &str, value: &str) -> Result<(), RequestError> {
    if value.is_empty() || value.chars().any(char::is_control) {
        return Err(RequestError::Invalid(format!(
            "{field} {value:?} must be one line of text"
        )));
    }
    Ok(())
}

/// [`check_text`], and at most `max` bytes ([`SLURM_TEXT_MAX`], [`SLURM_PATH_MAX`]).
fn check_text_within(field: &str, value: &str, max: usize) -> Result<(), RequestError> {
    check_text(field, value)?;
    check_length(field, value, max)
}

/// At most `max` bytes, as slurmctld's `strlen` counts them.
fn check_length(field: &str, value: &str, max: usize) -> Result<(), RequestError> {
    if value.len() > max {
        return Err(RequestError::Invalid(format!(
            "{field} is {} bytes long: Slurm refuses more than {max}",
            value.len()
        )));
    }
    Ok(())
}

/// Quotes a `#SBATCH` value for sbatch's tokenizer (`get_argument`): as is when it has no
/// blank, quote, backslash or `#`; else in double quotes with `"` and `\` escaped.
fn quote_directive(value: &str) -> Cow<'_, str> {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_ascii_whitespace() || "\"'\\#".contains(c));
    if plain {
        return Cow::Borrowed(value);
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Cow::Owned(quoted)
}
