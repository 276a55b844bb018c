//! Forwarding: handing an admitted job to its cluster, and cancelling it there.
//!
//! [`Forwarder`] is the seam: [`SlurmForwarder`] submits through slurmrestd as the user (a
//! token bursar mints from the cluster's JWT key with `sun` = the user), [`DstackForwarder`]
//! applies a run plan in the cluster's dstack project; tests and benchmarks plug in their own.
//!
//! A forwarder refuses, while the job is being quoted ([`Forwarder::check`]), any option it
//! cannot pass on: a job that silently lost an option would run differently from what was
//! priced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use async_trait::async_trait;
use bursar_collectors::dstack::{
    map_run, DstackClient, DstackConfig, DstackError, MapContext, RunRef,
};
use bursar_collectors::slurmrestd::{
    mail_events, unsupported_at, ApiSelection, GpuRequest as SlurmGpus, JobSubmission, KillWarning,
    MemBinding, RestError, Sharing, SlurmAuth, SlurmRestClient, SlurmRestConfig,
};
use serde_json::Value;

use crate::config::{ClusterKind, Config};
use crate::request::{
    cpu_freq_request, layout, parse_delay_boot, parse_profile, parse_switches, ExclusiveMode,
    GpuPer, GresFlags, JobRequest, MemoryRequest, OpenMode,
};

/// Limit of one submit or cancel call when `submit.timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Forwarder::prepare`] first waits to ask a cluster again; the wait doubles up to
/// five minutes.
const PREPARE_RETRY_FIRST: Duration = Duration::from_secs(1);

/// An admitted job, ready to hand to its cluster: the request plus every choice bursar made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardJob {
    pub cluster: String,
    /// The user the job runs as.
    pub user: String,
    pub account: String,
    pub partition: String,
    pub qos: Option<String>,
    /// The limit the hold was priced with: the request's or the partition's default.
    pub time_limit_min: u64,
    /// The request's, else the cluster's `submit.working_dir`, else `/home/<user>`.
    pub working_dir: String,
    pub request: JobRequest,
}

/// What the cluster answered to an accepted job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// What the user and `cancel` know the job by: Slurm's job id, dstack's run name.
    pub cluster_job_id: String,
    /// The job id the cluster's usage records will carry, which settles the hold: Slurm's job
    /// id, the first dstack job submission's id.
    pub settle_ref: String,
    /// A message from the cluster (Slurm's job_submit plugin), if any.
    pub message: Option<String>,
}

/// Why forwarding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardError {
    /// The cluster answered and refused (HTTP 502 `upstream_refused`).
    #[error("{0}")]
    Refused(String),
    /// The cluster could not be reached or did not answer in time (HTTP 503
    /// `upstream_unavailable`).
    #[error("{0}")]
    Unavailable(String),
}

/// A job bursar forwarded, by the names its cluster knows it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardedRef<'a> {
    /// [`Forwarded::cluster_job_id`] (Slurm's job id, dstack's run name), when bursar
    /// recorded it.
    pub cluster_job_id: Option<&'a str>,
    /// [`Forwarded::settle_ref`]: the id the job's usage records carry.
    pub settle_ref: &'a str,
    /// When bursar submitted it (epoch seconds): to tell the job's dstack run from another of
    /// the same name.
    pub submitted_at: i64,
}

/// What a cluster reports of a job now ([`Forwarder::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The states the cluster gives it (Slurm: one per job array task, and one for the
    /// array's pending rest; dstack: the run's); empty when the cluster no longer knows it.
    pub states: Vec<String>,
    /// Nothing of it waits or runs any more (or the cluster no longer knows it).
    pub finished: bool,
    /// Once finished, its exit code as `sbatch --wait` gives it: the highest of its tasks', each
    /// the script's exit status, or 1 when a signal ended it. `None` while it runs, or when the
    /// cluster no longer knows it.
    pub exit_code: Option<i32>,
}

impl ClusterStatus {
    /// A job its cluster no longer knows.
    pub fn gone() -> ClusterStatus {
        ClusterStatus {
            states: Vec::new(),
            finished: true,
            exit_code: None,
        }
    }
}

/// Hands jobs to one cluster and cancels them there.
#[async_trait]
pub trait Forwarder: Send + Sync {
    /// Why this forwarder cannot pass `request` on faithfully, if it cannot; checked while
    /// quoting, so such a cluster is not eligible.
    fn check(&self, _request: &JobRequest) -> Result<(), String> {
        Ok(())
    }

    /// Whether the cluster allocates a job `--mincpus` CPUs on each node (Slurm up to 24.11.0)
    /// or only picks nodes by it (24.11.1 on), when known; `None` until learnt.
    fn allocates_min_cpus(&self) -> Option<bool> {
        None
    }

    /// Learns ahead what [`Forwarder::check`] and [`Forwarder::allocates_min_cpus`] need to know
    /// of the cluster (`bursar serve` calls it once at start, in the background, and it asks
    /// until it knows; a submission may also learn it first).
    async fn prepare(&self) {}

    /// Submits the job; the answer names it on the cluster.
    async fn submit(&self, job: &ForwardJob) -> Result<Forwarded, ForwardError>;

    /// Cancels the job `cluster_job_id` (as [`Forwarded::cluster_job_id`]) as `user`. A job
    /// that already ended is not an error.
    async fn cancel(&self, user: &str, cluster_job_id: &str) -> Result<(), ForwardError>;

    /// Whether the job is still queued or running on the cluster (or, on dstack, its run still
    /// goes on), asked of the cluster itself. `false` when it cannot tell.
    async fn still_waiting(&self, _job: ForwardedRef<'_>) -> Result<bool, ForwardError> {
        Ok(false)
    }

    /// What the cluster itself reports of the job now, with its exit code once it finished (as
    /// `sbatch --wait` asks slurmctld), asked as the job's `user`.
    async fn status(
        &self,
        _user: &str,
        _job: ForwardedRef<'_>,
    ) -> Result<ClusterStatus, ForwardError> {
        Err(ForwardError::Refused(
            "this cluster cannot report a job's status".into(),
        ))
    }
}

/// The forwarders of every configured cluster that has somewhere to submit to
/// (`submit.slurmrestd`/`submit.dstack`, else the `collect` source of the same kind). Reads key
/// and token files; makes no call.
pub fn forwarders_from_config(
    config: &Config,
) -> anyhow::Result<BTreeMap<String, Arc<dyn Forwarder>>> {
    let mut forwarders: BTreeMap<String, Arc<dyn Forwarder>> = BTreeMap::new();
    for (name, cluster) in &config.clusters {
        let timeout = cluster
            .submit
            .as_ref()
            .and_then(|s| s.timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        match cluster.kind {
            ClusterKind::Slurm => {
                let Some(rest) = cluster
                    .submit_slurmrestd()
                    .map_err(|e| anyhow!("cluster {name}: {e}"))?
                else {
                    continue;
                };
                let auth = SlurmAuth::JwtKey {
                    key_file: rest.jwt_key_file.clone(),
                    user: rest.user.clone().unwrap_or_else(|| "slurm".to_string()),
                    lifetime: Duration::from_secs(300),
                };
                let mut c = SlurmRestConfig::new(rest.url.clone(), name.clone(), auth);
                c.timeout = timeout;
                c.ca_file = rest.ca_file.clone();
                c.api = match rest.api_version.as_deref() {
                    None | Some("auto") => ApiSelection::Auto,
                    Some(v) => ApiSelection::Fixed(
                        v.parse()
                            .map_err(|e| anyhow!("cluster {name}: api_version: {e}"))?,
                    ),
                };
                let client = SlurmRestClient::new(c).with_context(|| format!("cluster {name}"))?;
                let mut forwarder = SlurmForwarder::new(client);
                forwarder.disable_slurm_hydra_bootstrap = cluster
                    .submit
                    .as_ref()
                    .is_some_and(|s| s.disable_slurm_hydra_bootstrap);
                forwarders.insert(name.clone(), Arc::new(forwarder));
            }
            ClusterKind::Dstack => {
                let Some(d) = cluster
                    .submit_dstack()
                    .map_err(|e| anyhow!("cluster {name}: {e}"))?
                else {
                    continue;
                };
                let token = std::fs::read_to_string(&d.token_file).with_context(|| {
                    format!(
                        "cluster {name}: cannot read the dstack token file {}",
                        d.token_file.display()
                    )
                })?;
                let client = DstackClient::new(DstackConfig {
                    base_url: d.url.clone(),
                    token: token.trim().to_string().into(),
                    project: d.project.clone(),
                    cluster: name.clone(),
                    timeout,
                    page_size: 100,
                    ca_file: d.ca_file.clone(),
                })
                .with_context(|| format!("cluster {name}"))?;
                forwarders.insert(name.clone(), Arc::new(DstackForwarder::new(client)));
            }
        }
    }
    Ok(forwarders)
}

// --- Slurm ------------------------------------------------------------------------------------

/// Submits through slurmrestd `job/submit` as the job's user.
pub struct SlurmForwarder {
    client: SlurmRestClient,
    /// The cluster's `MpiParams=disable_slurm_hydra_bootstrap` (`submit.disable_slurm_hydra_bootstrap`).
    pub disable_slurm_hydra_bootstrap: bool,
}

impl SlurmForwarder {
    pub fn new(client: SlurmRestClient) -> SlurmForwarder {
        SlurmForwarder {
            client,
            disable_slurm_hydra_bootstrap: false,
        }
    }
}

/// The node count to send Slurm. A job of one node that did not ask for it (no `-N`) and whose
/// price does not depend on its nodes (no `--exclusive`, no per-node memory, GPUs or other GRES, no
/// `--ntasks-per-node`, no `--gpus` with `--cpus-per-gpu`) is left to Slurm to place, as sbatch leaves a job without `-N`: one
/// whose tasks need more nodes gets them rather than a refusal, at the same price. Any other
/// count is sent, and pins the job to it: as sbatch's `-N` does, and because more nodes would
/// multiply what was priced per node.
fn pinned_nodes(r: &JobRequest) -> Option<u32> {
    // Whole nodes are priced per node too.
    let per_node = r.exclusive
        || matches!(r.memory, Some(MemoryRequest::PerNode(_)))
        || r.gpus.as_ref().is_some_and(|g| g.per == GpuPer::PerNode)
        || !r.other_gres.is_empty()
        || r.ntasks_per_node.is_some()
        || r.min_cpus_per_node.is_some()
        // Slurm gives each node CPUs for the GPUs it places there: spread over more nodes,
        // a job's GPUs could bring more CPUs than priced.
        || (r.cpus_per_gpu.is_some() && r.gpus.as_ref().is_some_and(|g| g.per == GpuPer::PerJob));
    // Named nodes: Slurm would otherwise take its count from the list.
    let named = r.slurm.nodelist.is_some();
    (r.nodes > 1 || r.nodes_exact || per_node || named).then_some(r.nodes)
}

/// A text option checked when the request was read, parsed again.
fn read<T>(
    text: &Option<String>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    text.as_deref().map(parse).transpose()
}

/// How the job shares its nodes, as Slurm's one setting: the request validated that at most
/// one of `--exclusive`, `--exclusive=MODE` and `--oversubscribe` is set.
fn sharing(r: &JobRequest) -> Option<Sharing> {
    if r.exclusive {
        return Some(Sharing::Exclusive);
    }
    if r.slurm.oversubscribe {
        return Some(Sharing::Oversubscribe);
    }
    r.slurm.exclusive.map(|mode| match mode {
        ExclusiveMode::User => Sharing::User,
        ExclusiveMode::Mcs => Sharing::Mcs,
        ExclusiveMode::Topo => Sharing::Topo,
    })
}

/// `--signal` as the slurmrestd client takes it.
fn kill_warning(r: &JobRequest) -> Option<KillWarning> {
    r.slurm.signal.as_ref().map(|s| KillWarning {
        number: s.number(),
        seconds: s.seconds,
        batch_only: s.batch_only,
        reservation: s.reservation,
    })
}

/// The slurmrestd submission of `job`: every resource the hold was priced for, as the user
/// asked for it (per node or per CPU, per node or per job), the resolved partition and time
/// limit, the script, and the environment.
pub fn slurm_submission(job: &ForwardJob) -> Result<JobSubmission, String> {
    let r = &job.request;
    let script = r
        .batch_script()
        .ok_or("a job needs a batch script or --wrap")?
        .into_owned();
    let (memory_per_node_mb, memory_per_cpu_mb, memory_per_gpu_mb) = match r.memory {
        Some(MemoryRequest::PerNode(mb)) => (Some(mb), None, None),
        Some(MemoryRequest::PerCpu(mb)) => (None, Some(mb), None),
        Some(MemoryRequest::PerGpu(mb)) => (None, None, Some(mb)),
        None => (None, None, None),
    };
    // GPUs derived from the tasks (--ntasks-per-gpu) are left for slurmctld to derive again,
    // as for sbatch's job.
    let gpus = |per: GpuPer| {
        let sent = r.gpus.as_ref().filter(|_| !r.gpus_from_tasks);
        sent.filter(|g| g.per == per).map(|g| SlurmGpus {
            count: g.count,
            kind: g.kind.clone(),
        })
    };
    // `submit_body` adds a PATH when the job has none and does not load the login environment.
    let environment: Vec<(String, String)> = r
        .environment
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mail_type = match &r.mail_type {
        Some(types) => mail_events(types).map_err(|why| format!("--mail-type: {why}"))?,
        None => Vec::new(),
    };
    let distribution = read(&r.slurm.distribution, layout::parse_distribution)?;
    let mem_bind = read(&r.slurm.mem_bind, layout::parse_mem_bind)?;
    let gpu_bind = read(&r.slurm.gpu_bind, layout::parse_gpu_bind)?;
    let switches = read(&r.slurm.switches, parse_switches)?;
    Ok(JobSubmission {
        script,
        argv: script_argv(r),
        name: r.job_name.clone(),
        account: job.account.clone(),
        partition: Some(job.partition.clone()),
        qos: job.qos.clone(),
        nodes: pinned_nodes(r),
        tasks: Some(r.ntasks),
        tasks_per_node: r.ntasks_per_node,
        ntasks_per_gpu: r.ntasks_per_gpu,
        // Only a count asked for: sbatch without -c sends none (nor SLURM_CPUS_PER_TASK).
        cpus_per_task: (r.cpus_per_task_given || r.cpus_per_task > 1).then_some(r.cpus_per_task),
        memory_per_node_mb,
        memory_per_cpu_mb,
        time_limit_min: Some(
            u32::try_from(job.time_limit_min).map_err(|_| "the time limit is too large")?,
        ),
        gpus_per_node: gpus(GpuPer::PerNode),
        gpus_per_job: gpus(GpuPer::PerJob),
        gpus_per_task: gpus(GpuPer::PerTask),
        cpus_per_gpu: r.cpus_per_gpu,
        min_cpus_per_node: r.min_cpus_per_node,
        threads_per_core: r.job_threads_per_core(),
        tasks_per_core: r.job_ntasks_per_core(),
        hint: r.hint.as_ref().map(|h| h.as_str().to_string()),
        gres_flags: r.slurm.gres_flags.map(|f| f.as_str().to_string()),
        acctg_freq: r.slurm.acctg_freq.clone(),
        distribution: distribution.as_ref().map(|d| d.text.clone()),
        plane_size: distribution.and_then(|d| d.plane_size),
        mem_bind: mem_bind.and_then(|m| {
            m.binding.map(|binding| MemBinding {
                binding,
                verbose: m.verbose,
            })
        }),
        gpu_bind,
        gpu_freq: r.slurm.gpu_freq.clone(),
        cpu_freq: read(&r.slurm.cpu_freq, cpu_freq_request)?,
        profile: read(&r.slurm.profile, parse_profile)?
            .map(|p| p.names().into_iter().map(String::from).collect()),
        required_switches: switches.map(|s| s.count),
        wait_for_switch: switches.and_then(|s| s.wait_seconds),
        container: r.slurm.container.clone(),
        container_id: r.slurm.container_id.clone(),
        memory_per_gpu_mb,
        other_gres: r.other_gres.clone(),
        mail_type,
        mail_user: r.mail_user.clone(),
        current_working_directory: job.working_dir.clone(),
        standard_output: r.output.clone(),
        standard_error: r.error.clone(),
        environment,
        comment: r.comment.clone(),
        constraints: r.constraint.clone(),
        hold: r.hold,
        // the cluster's setting, which the forwarder knows
        disable_slurm_hydra_bootstrap: false,
        warn_signal: kill_warning(r),
        requeue: r.slurm.requeue,
        open_append: r.slurm.open_mode.map(|m| m == OpenMode::Append),
        nice: r.slurm.nice,
        reservation: r.slurm.reservation.clone(),
        wckey: r.slurm.wckey.clone(),
        excluded_nodes: r.slurm.exclude.clone(),
        standard_input: r.slurm.input.clone(),
        no_kill: r.slurm.no_kill,
        dependency: r.slurm.dependency.clone(),
        kill_on_invalid_dependency: r.slurm.kill_on_invalid_dep,
        array: r.array.as_ref().map(|a| a.as_slurm().to_string()),
        shared: sharing(r),
        wait_all_nodes: r.slurm.wait_all_nodes,
        use_min_nodes: r.slurm.use_min_nodes,
        spread_job: r.slurm.spread_job,
        delay_boot: read(&r.slurm.delay_boot, parse_delay_boot)?,
        mcs_label: r.slurm.mcs_label.clone(),
        contiguous: r.slurm.contiguous,
        extra: r.slurm.extra.clone(),
        // As sbatch: `--hold` wins over `--priority` (priority 0 until released).
        priority: r.slurm.priority.filter(|_| !r.hold),
        begin_time: r.slurm.begin,
        deadline: r.slurm.deadline,
        time_min: r
            .slurm
            .time_min
            .map(|m| u32::try_from(m).map_err(|_| "--time-min is too large"))
            .transpose()?,
        tmp_disk_mb: r
            .slurm
            .tmp_mb
            .map(|mb| u32::try_from(mb).map_err(|_| "--tmp is too large"))
            .transpose()?,
        prefer: r.slurm.prefer.clone(),
        required_nodes: r.slurm.nodelist.clone(),
        licenses: r.licenses.as_ref().map(|l| l.as_slurm()),
    })
}

/// The script's command line as sbatch sends it: its path (else, for a request without one,
/// the job's name) and its arguments. None for `--wrap` or a script without path or arguments,
/// as sbatch sends none for a script read from standard input.
fn script_argv(r: &JobRequest) -> Vec<String> {
    if r.script.is_none() || (r.script_path.is_none() && r.script_args.is_empty()) {
        return Vec::new();
    }
    let command = r
        .script_path
        .clone()
        .or_else(|| r.job_name.clone())
        .unwrap_or_else(|| "sbatch".to_string());
    std::iter::once(command)
        .chain(r.script_args.iter().cloned())
        .collect()
}

/// Job states slurmctld reports for a job that has not ended (held jobs are `PENDING`). v0.0.38
/// names a job by its first state flag when it has one (Slurm's `job_state_string()`), so a
/// queued, held or running job may also read `REQUEUE_HOLD`, `SPECIAL_EXIT`, `RESV_DEL_HOLD`,
/// `STOPPED`, `SIGNALING`, `STAGE_OUT` or `REQUEUE_FED`; v0.0.40+ list the base state first.
/// `REVOKED` (a federation sibling withdrawn) is not waiting.
const SLURM_WAITING: [&str; 14] = [
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "REQUEUED",
    "CONFIGURING",
    "COMPLETING",
    "RESIZING",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SPECIAL_EXIT",
    "RESV_DEL_HOLD",
    "STOPPED",
    "SIGNALING",
    "STAGE_OUT",
];

/// A finished dstack run's exit code: the highest `exit_status` of its jobs' last submissions
/// (a multi-node run has a job per node), else 0 for a `done` run; a run that failed or was
/// stopped is never 0 (1 when its jobs say 0 or nothing).
fn dstack_exit_code(raw: &str, status: &str) -> i32 {
    let run: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let statuses = run
        .get("jobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|job| {
            let last = job.get("job_submissions")?.as_array()?.last()?;
            last.get("exit_status")?.as_i64()
        })
        .filter_map(|code| i32::try_from(code).ok());
    let done = status == "done";
    match statuses.max() {
        // An exit status no shell gives (negative) is a failure too.
        Some(code) if code < 0 => 1,
        Some(code) if code != 0 || done => code,
        _ if done => 0,
        _ => 1,
    }
}

/// dstack's finished run statuses (0.22.5 `RunStatus`): a run in any other (`pending`,
/// `submitted`, `provisioning`, `running`, `terminating`) goes on.
const DSTACK_RUN_FINISHED: [&str; 3] = ["terminated", "failed", "done"];

/// Slurm errnos that mean "the job is already gone": cancelling it is done.
const SLURM_ALREADY_GONE: [i64; 2] = [
    2017, // ESLURM_INVALID_JOB_ID (ended and purged)
    2021, // ESLURM_ALREADY_DONE
];

fn slurm_error(e: RestError) -> ForwardError {
    match e {
        RestError::Unreachable { .. } | RestError::Timeout { .. } | RestError::Transport { .. } => {
            ForwardError::Unavailable(e.to_string())
        }
        other => ForwardError::Refused(other.to_string()),
    }
}

#[async_trait]
impl Forwarder for SlurmForwarder {
    fn check(&self, request: &JobRequest) -> Result<(), String> {
        // What this cluster's API version cannot carry, once the version is known (with
        // `api_version: auto`, from the first call: until then only the submission itself
        // refuses it, with the same reason).
        if let Some(version) = self.client.known_api_version() {
            let probe = JobSubmission {
                warn_signal: kill_warning(request),
                // only whether it is given matters here
                required_switches: request.slurm.switches.as_ref().map(|_| 1),
                container_id: request.slurm.container_id.clone(),
                shared: sharing(request),
                ..JobSubmission::default()
            };
            if let Some(reason) = unsupported_at(version, &probe) {
                return Err(reason);
            }
        }
        if !request.script_args.is_empty() {
            if let Some(reason) = self.client.known_argv_refusal() {
                return Err(reason);
            }
        }
        if request.slurm.gres_flags == Some(GresFlags::DisableBinding) {
            if let Some(reason) = self.client.known_gres_disable_refusal() {
                return Err(reason);
            }
        }
        Ok(())
    }

    fn allocates_min_cpus(&self) -> Option<bool> {
        self.client.known_min_cpus_allocated()
    }

    async fn prepare(&self) {
        // The release: what `check` and `allocates_min_cpus` answer by. Asked again until
        // known (after 1 s, doubling to 5 minutes), said once: until then a job with script
        // arguments is refused by a v0.0.38 cluster and --mincpus priced the higher way.
        let mut wait = PREPARE_RETRY_FIRST;
        let mut said = false;
        while let Err(e) = self.client.release().await {
            if !said {
                tracing::warn!(cluster = %self.client.cluster(),
                    "cannot learn the cluster's Slurm release yet, retrying: {e}");
                said = true;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(300));
        }
        if said {
            tracing::info!(cluster = %self.client.cluster(), "learnt the cluster's Slurm release");
        }
    }

    async fn submit(&self, job: &ForwardJob) -> Result<Forwarded, ForwardError> {
        let mut submission = slurm_submission(job).map_err(ForwardError::Refused)?;
        submission.disable_slurm_hydra_bootstrap = self.disable_slurm_hydra_bootstrap;
        let submitted = self
            .client
            .submit_job(&job.user, &submission)
            .await
            .map_err(slurm_error)?;
        let id = submitted.job_id.to_string();
        Ok(Forwarded {
            cluster_job_id: id.clone(),
            settle_ref: id,
            message: Some(submitted.user_msg).filter(|m| !m.is_empty()),
        })
    }

    async fn still_waiting(&self, job: ForwardedRef<'_>) -> Result<bool, ForwardError> {
        let Ok(id) = job.settle_ref.parse::<u64>() else {
            return Ok(false);
        };
        // A job array waits while any of its tasks does.
        let states = self.client.job_states(id).await.map_err(slurm_error)?;
        Ok(states.iter().any(|s| SLURM_WAITING.contains(&s.as_str())))
    }

    async fn status(
        &self,
        user: &str,
        job: ForwardedRef<'_>,
    ) -> Result<ClusterStatus, ForwardError> {
        let id: u64 = job.settle_ref.parse().map_err(|_| {
            ForwardError::Refused(format!("{:?} is not a Slurm job id", job.settle_ref))
        })?;
        let live = self.client.live_jobs(user, id).await.map_err(slurm_error)?;
        if live.is_empty() {
            return Ok(ClusterStatus::gone());
        }
        let finished = !live
            .iter()
            .any(|j| SLURM_WAITING.contains(&j.state.as_str()));
        // sbatch --wait: the highest exit code of the array's tasks.
        let exit_code = finished
            .then(|| live.iter().map(|j| j.exit_code).collect::<Option<Vec<_>>>())
            .flatten()
            .and_then(|codes| codes.into_iter().max());
        Ok(ClusterStatus {
            states: live.into_iter().map(|j| j.state).collect(),
            finished,
            exit_code,
        })
    }

    async fn cancel(&self, user: &str, cluster_job_id: &str) -> Result<(), ForwardError> {
        let id: u64 = cluster_job_id.parse().map_err(|_| {
            ForwardError::Refused(format!("{cluster_job_id:?} is not a Slurm job id"))
        })?;
        match self.client.cancel_job(user, id).await {
            Ok(()) => Ok(()),
            Err(e)
                if e.slurm_error_number()
                    .is_some_and(|n| SLURM_ALREADY_GONE.contains(&n)) =>
            {
                Ok(())
            }
            Err(e) => Err(slurm_error(e)),
        }
    }
}

// --- dstack -----------------------------------------------------------------------------------

/// Applies runs in one dstack project (`runs/get_plan` then `runs/apply`, create only).
pub struct DstackForwarder {
    client: DstackClient,
}

impl DstackForwarder {
    pub fn new(client: DstackClient) -> DstackForwarder {
        DstackForwarder { client }
    }
}

/// The dstack `RunSpec` for `job`: the task as written, its `name` turned into a run name with
/// a unique `suffix` (dstack would replace a finished run of the same name), and the time limit
/// the hold was priced with as `max_duration` when the task has none.
pub fn dstack_run_spec(job: &ForwardJob, suffix: &str) -> Result<Value, String> {
    let task = job
        .request
        .dstack
        .as_ref()
        .ok_or("a dstack cluster runs dstack tasks; this request has none")?;
    let mut configuration = task.config().clone();
    let map = configuration
        .as_object_mut()
        .ok_or("the dstack task is not a mapping")?;
    let name = map.remove("name");
    if task.time_limit_min().is_none() {
        map.insert(
            "max_duration".to_string(),
            Value::from(job.time_limit_min.saturating_mul(60)),
        );
    }
    let mut spec = serde_json::Map::new();
    spec.insert("configuration".to_string(), configuration);
    if let Some(Value::String(name)) = name {
        spec.insert(
            "run_name".to_string(),
            Value::String(format!("{name}-{suffix}")),
        );
    }
    Ok(Value::Object(spec))
}

fn dstack_error(e: DstackError) -> ForwardError {
    match e {
        DstackError::Unreachable { .. } | DstackError::Timeout { .. } => {
            ForwardError::Unavailable(e.to_string())
        }
        other => ForwardError::Refused(other.to_string()),
    }
}

/// The first job submission's id in a run's JSON: what the collector's record of it carries.
fn first_submission_id(raw: &str) -> Option<String> {
    let run: Value = serde_json::from_str(raw).ok()?;
    run.pointer("/jobs/0/job_submissions/0/id")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether the run dstack shows under a job's run name (`raw`) is the job's own
/// ([`crate::collect::run_match`], the rule the collector charges runs to jobs by): dstack
/// lets a new run take a finished run's name.
fn is_run_of(raw: &str, cluster: &str, job: ForwardedRef<'_>) -> bool {
    let context = MapContext {
        cluster,
        now: chrono::Utc::now(),
    };
    map_run(raw, &context).summary.is_some_and(|run| {
        crate::collect::run_match(&run, Some(job.settle_ref), job.submitted_at).is_some()
    })
}

#[async_trait]
impl Forwarder for DstackForwarder {
    fn check(&self, request: &JobRequest) -> Result<(), String> {
        if request.dstack.is_none() {
            return Err("a dstack cluster runs dstack tasks, not batch scripts".to_string());
        }
        if !request.environment.is_empty() {
            return Err(
                "environment variables of a dstack task go in the task's env, not the request"
                    .to_string(),
            );
        }
        if request.hold {
            return Err("dstack has no held runs: --hold applies to Slurm clusters".to_string());
        }
        if request.array.is_some() {
            return Err("dstack has no job arrays: --array applies to Slurm clusters".to_string());
        }
        if request.exclusive {
            return Err(
                "dstack gives each run its own instances: --exclusive applies to Slurm clusters"
                    .to_string(),
            );
        }
        if request.cpus_per_gpu.is_some()
            || matches!(request.memory, Some(MemoryRequest::PerGpu(_)))
            || request
                .gpus
                .as_ref()
                .is_some_and(|g| g.per == GpuPer::PerTask)
        {
            return Err(
                "a dstack task asks for its resources per node: --gpus-per-task, \
                 --cpus-per-gpu and --mem-per-gpu apply to Slurm clusters"
                    .to_string(),
            );
        }
        if !request.slurm.is_empty() {
            return Err(format!(
                "{} only Slurm clusters take",
                request.slurm.given().join(", ")
            ));
        }
        Ok(())
    }

    async fn submit(&self, job: &ForwardJob) -> Result<Forwarded, ForwardError> {
        let spec = dstack_run_spec(job, &super::random_hex(4)).map_err(ForwardError::Refused)?;
        let plan = self.client.get_plan(&spec).await.map_err(dstack_error)?;
        let run = self.client.apply(&plan).await.map_err(dstack_error)?;
        let settle_ref = first_submission_id(&run.raw).unwrap_or_else(|| run.id.clone());
        Ok(Forwarded {
            cluster_job_id: run.run_name,
            settle_ref,
            message: None,
        })
    }

    /// Whether the job's run (`runs/get` by its name) is not finished: a run that dstack
    /// retries — for capacity, after a lost spot instance or a failure — goes on under new
    /// submissions, and dstack deletes the earlier ones that never got an instance, so the run
    /// is asked about, not the submission its hold was linked to. A run dstack no longer finds
    /// (deleted), or another run under the name ([`is_run_of`]), does not wait.
    async fn still_waiting(&self, job: ForwardedRef<'_>) -> Result<bool, ForwardError> {
        let Some(run_name) = job.cluster_job_id else {
            return Ok(false);
        };
        match self
            .client
            .get_run(&RunRef::Name(run_name.to_string()))
            .await
        {
            Ok(run) => Ok(!DSTACK_RUN_FINISHED.contains(&run.status.as_str())
                && is_run_of(&run.raw, self.client.cluster(), job)),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(dstack_error(e)),
        }
    }

    async fn status(
        &self,
        _user: &str,
        job: ForwardedRef<'_>,
    ) -> Result<ClusterStatus, ForwardError> {
        let Some(run_name) = job.cluster_job_id else {
            return Ok(ClusterStatus::gone());
        };
        match self
            .client
            .get_run(&RunRef::Name(run_name.to_string()))
            .await
        {
            Ok(run) if is_run_of(&run.raw, self.client.cluster(), job) => {
                let finished = DSTACK_RUN_FINISHED.contains(&run.status.as_str());
                Ok(ClusterStatus {
                    exit_code: finished.then(|| dstack_exit_code(&run.raw, &run.status)),
                    states: vec![run.status],
                    finished,
                })
            }
            Ok(_) => Ok(ClusterStatus::gone()),
            Err(e) if e.is_not_found() => Ok(ClusterStatus::gone()),
            Err(e) => Err(dstack_error(e)),
        }
    }

    async fn cancel(&self, _user: &str, cluster_job_id: &str) -> Result<(), ForwardError> {
        self.client
            .stop_run(&[cluster_job_id.to_string()], false)
            .await
            .map_err(dstack_error)
    }
}
