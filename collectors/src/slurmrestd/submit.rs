//! `POST /slurm/vX/job/submit`, `DELETE /slurm/vX/job/{id}` and `GET /slurm/vX/ping`: bodies
//! per version and their answers.

use serde_json::{json, Map, Value};

use super::error::{
    api_errors, check_ok_errors, excerpt, ApiError, RestError, ESLURM_REST_EMPTY_RESULT,
};
use super::version::ApiVersion;

/// A batch job to forward, in bursar's terms. Every `Option` left `None` is left out of the
/// body, so Slurm's defaults (partition, QOS, memory, …) apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSubmission {
    /// The batch script, `#!` line first.
    pub script: String,
    /// The command line of the script, as sbatch sends it (`argv` in every version): the
    /// script's full path (`Command=` in `scontrol show job`), then its arguments. slurmstepd
    /// puts the path of the script it writes out in place of the first word, so the job sees
    /// the rest as `$1`, `$2`, …. Empty: none sent (Slurm shows no command; no arguments).
    pub argv: Vec<String>,
    pub name: Option<String>,
    pub account: String,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub nodes: Option<u32>,
    pub tasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub tasks_per_node: Option<u32>,
    /// `--ntasks-per-gpu`: tasks sharing each GPU (`ntasks_per_gpu` at v0.0.38, whose parser
    /// takes it though its schema lists it not; `ntasks_per_tres` later), and the job's
    /// `SLURM_NTASKS_PER_GPU`, from which the steps' `srun` binds each task to its GPU.
    /// slurmctld derives the GPUs from `tasks` when none are sent, as for sbatch's job.
    pub ntasks_per_gpu: Option<u32>,
    /// `-c/--cpus-per-task`, when given: also `tres_per_task` `cpu=N` from v0.0.40, and the
    /// job's `SLURM_CPUS_PER_TASK` (and `SLURM_TRES_PER_TASK`), as sbatch sets them.
    pub cpus_per_task: Option<u32>,
    /// Memory per node in megabytes (`--mem`).
    pub memory_per_node_mb: Option<u64>,
    /// Memory per allocated CPU in megabytes (`--mem-per-cpu`).
    pub memory_per_cpu_mb: Option<u64>,
    /// Minutes (`--time`).
    pub time_limit_min: Option<u32>,
    /// GPUs per node, optionally of one type (`--gres=gpu[:type]:N`, `--gpus-per-node`).
    pub gpus_per_node: Option<GpuRequest>,
    /// GPUs for the whole job (`--gpus`).
    pub gpus_per_job: Option<GpuRequest>,
    /// GPUs for each task (`--gpus-per-task`).
    pub gpus_per_task: Option<GpuRequest>,
    /// CPUs for each GPU (`--cpus-per-gpu`; `cpus_per_tres` `gres/gpu:N` from v0.0.40).
    pub cpus_per_gpu: Option<u32>,
    /// Memory per GPU in megabytes (`--mem-per-gpu`; `memory_per_tres` from v0.0.40).
    pub memory_per_gpu_mb: Option<u64>,
    /// Other GRES per node as sbatch's `--gres` takes them (`shard:1`, `nic:mlx:2`), sent
    /// beside the GPUs (`gres` in v0.0.38, `tres_per_node` as `gres/…` from v0.0.40).
    pub other_gres: Vec<String>,
    /// `--mail-type` events as Slurm names them in v0.0.40+ (`BEGIN`, `END`, `FAIL`,
    /// `REQUEUE`, `TIME=100%`, …; see [`mail_events`]).
    pub mail_type: Vec<String>,
    pub mail_user: Option<String>,
    /// Must exist on the compute node and be writable by the user.
    pub current_working_directory: String,
    pub standard_output: Option<String>,
    pub standard_error: Option<String>,
    /// In order. slurmctld refuses a batch job without environment, so `PATH` is added
    /// (`/usr/local/bin:/usr/bin:/bin`) when missing, unless `SLURM_GET_USER_ENV` asks slurmd
    /// for the user's login environment (which has one).
    pub environment: Vec<(String, String)>,
    pub comment: Option<String>,
    /// `-C/--constraint`: node features as sbatch takes them (`a100`, `skylake&ib`, `[a|b]`);
    /// slurmctld checks them.
    pub constraints: Option<String>,
    /// `--hold`: submitted with priority 0 until released (`hold` in every body version).
    pub hold: bool,
    /// The cluster's slurm.conf has `MpiParams=disable_slurm_hydra_bootstrap`: sbatch then sets
    /// no Hydra bootstrap for a user who has none.
    pub disable_slurm_hydra_bootstrap: bool,
    /// `--signal`: a signal sent before the time limit.
    pub warn_signal: Option<KillWarning>,
    /// `--requeue` (`true`) / `--no-requeue` (`false`).
    pub requeue: Option<bool>,
    /// `--open-mode`: `true` append, `false` truncate.
    pub open_append: Option<bool>,
    /// `--nice`.
    pub nice: Option<i32>,
    /// `--reservation`.
    pub reservation: Option<String>,
    /// `--wckey`.
    pub wckey: Option<String>,
    /// `-x/--exclude`: a Slurm node list (`n[1-3],gpu01`).
    pub excluded_nodes: Option<String>,
    /// `-i/--input`.
    pub standard_input: Option<String>,
    /// `-k/--no-kill`: the job goes on when one of its nodes fails.
    pub no_kill: bool,
    /// `-d/--dependency`, as Slurm writes it (`afterok:123`).
    pub dependency: Option<String>,
    /// `--kill-on-invalid-dep=yes|no`.
    pub kill_on_invalid_dependency: Option<bool>,
    /// `-a/--array`: the index list as sbatch passes it to slurmctld (`0-9%2`), untouched:
    /// slurmctld reads the step and the throttle from the text itself. `job.array` in every
    /// version, a string. The answer's `job_id` is then the array's (its `ArrayJobId`); its
    /// tasks' records come as `ID_0`, `ID_1`, … (one of them under the array's own job id).
    pub array: Option<String>,
    /// `--exclusive[=user|mcs|topo]` / `-s/--oversubscribe`: how the job shares its nodes
    /// (sbatch's one `shared` setting, which each of those options writes). At v0.0.38
    /// `exclusive` (`"exclusive"`, `"user"`, `"mcs"`: slurmrestd reads it with sbatch's own
    /// option parser, which refuses the spec's `"true"`, "Invalid exclusive specification",
    /// seen live on 22.05) or `oversubscribe: true`; from v0.0.40 `shared: [flag]` (`none` for
    /// whole nodes). `topo` from v0.0.41 only ([`unsupported_at`]).
    pub shared: Option<Sharing>,
    /// `--wait-all-nodes`: `wait_all_nodes` 0 or 1 at v0.0.38 (read as an integer: a JSON
    /// boolean is refused), a boolean later.
    pub wait_all_nodes: Option<bool>,
    /// `--use-min-nodes`: `minimum_nodes: true` at v0.0.38 (any value sets it, so it is only
    /// ever sent set), the `PREFER_MINIMUM_NODE_COUNT` job flag later.
    pub use_min_nodes: bool,
    /// `--spread-job`: `spread_job: true` at v0.0.38 (as `minimum_nodes`), the `SPREAD_JOB`
    /// job flag later.
    pub spread_job: bool,
    /// `--delay-boot`, seconds: `delay_boot` as Slurm's time text (`D-HH:MM:SS`) at v0.0.38,
    /// which reads it with sbatch's parser (a number there is minutes), seconds later.
    pub delay_boot: Option<u32>,
    /// `--mcs-label` (`mcs_label`, every version).
    pub mcs_label: Option<String>,
    /// `--contiguous` (`contiguous: true`), from v0.0.40: v0.0.38's slurmrestd disables the key
    /// ([`unsupported_at`]).
    pub contiguous: bool,
    /// `--extra` (`extra`), from v0.0.40: v0.0.38 has no such key ([`unsupported_at`]).
    pub extra: Option<String>,
    /// `--priority`, 1 to `NO_VAL - 1` (`TOP`): `priority` in every version, a number at
    /// v0.0.38 (its `arg_set_data_priority` takes 1 to `NO_VAL - 1`), a set number later. Not
    /// sent with `hold`, which wins, as in sbatch.
    pub priority: Option<u32>,
    /// `-b/--begin`, Unix seconds. v0.0.38 reads `begin_time` with sbatch's text parser in
    /// slurmrestd's own time zone, which takes a number for a date (`1764201600` is refused):
    /// it is sent as `uts1764201600`, the parser's Unix-time form. From v0.0.40 a number.
    pub begin_time: Option<i64>,
    /// `--deadline`, Unix seconds; sent as `begin_time` is.
    pub deadline: Option<i64>,
    /// `--time-min`, minutes (`time_minimum`).
    pub time_min: Option<u32>,
    /// `--tmp`, megabytes per node (`temporary_disk_per_node`: v0.0.38 reads the number as
    /// sbatch reads `--tmp=100`, megabytes).
    pub tmp_disk_mb: Option<u32>,
    /// `--prefer`: preferred node features (`prefer`).
    pub prefer: Option<String>,
    /// `-w/--nodelist`: a Slurm host list the job must run on (`nodelist` at v0.0.38,
    /// `required_nodes` from v0.0.40, one entry as `excluded_nodes`).
    pub required_nodes: Option<String>,
    /// `-L/--licenses`: `name:count` entries joined by `,` (`licenses`, every version).
    pub licenses: Option<String>,
    /// `--mincpus`: CPUs each node must give the job (`minimum_cpus_per_node`, every version).
    pub min_cpus_per_node: Option<u32>,
    /// `--threads-per-core`, or 1 for `--hint=nomultithread`, `compute_bound`, `memory_bound`
    /// (`threads_per_core`, every version): sbatch sends the hint's settings, and v0.0.38
    /// would drop a `cpu_binding_hint`.
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core`, or 65535 (any) for `--hint=multithread` (`tasks_per_core`, every
    /// version).
    pub tasks_per_core: Option<u32>,
    /// `--hint` as given: the job's `SLURM_HINT`, as sbatch sets it.
    pub hint: Option<String>,
    /// `--gres-flags`: `enforce-binding` or `disable-binding` (`gres_flags` at v0.0.38, the
    /// `GRES_BINDING_ENFORCED`/`GRES_BINDING_DISABLED` job flag later; the latter is spelled
    /// otherwise at v0.0.40 and v0.0.41 by Slurm 23.11 and 24.05.0 – 24.05.2:
    /// [`gres_disable_misspelt`]).
    pub gres_flags: Option<String>,
    /// `--acctg-freq` as given (`account_gather_frequency`, every version), and the job's
    /// `SLURM_ACCTG_FREQ`, as sbatch sets it (v0.0.38's slurmrestd, and from 24.05.2
    /// slurmctld at launch, set the same value again).
    pub acctg_freq: Option<String>,
    /// `-m/--distribution` as sbatch exports it (`block:cyclic`, `plane`, `cyclic,pack`): the
    /// job's `SLURM_DISTRIBUTION`, and `distribution` from v0.0.41 (v0.0.38 and v0.0.40 drop
    /// the layout; the job's steps still follow the variable).
    pub distribution: Option<String>,
    /// A plane layout's size: `plane=N` in `distribution`, and the job's
    /// `SLURM_DIST_PLANESIZE`.
    pub plane_size: Option<u32>,
    /// `--mem-bind`: only the variables sbatch sets for the job's steps (slurmctld keeps no
    /// memory binding, and slurmrestd sets none of them).
    pub mem_bind: Option<MemBinding>,
    /// `--gpu-bind` (`closest`, `verbose,map_gpu:0,1`): `gpu_binding` at v0.0.38, which sbatch
    /// 22.05 exports as `SLURM_GPU_BIND`; later `tres_bind` `gres/gpu:…`, in place of the
    /// binding `--gpus-per-task` implies, and `SLURM_TRES_BIND`, as sbatch 23.11 and later.
    pub gpu_bind: Option<String>,
    /// `--gpu-freq` (`medium,memory=high`): `gpu_frequency` at v0.0.38, `tres_freq` `gpu:…`
    /// later, and the job's `SLURM_GPU_FREQ` in every version (the steps read it; slurmrestd
    /// sets it in none).
    pub gpu_freq: Option<String>,
    /// `--cpu-freq` in Slurm's own spelling (`2400000`, `High`, `1800000-2400000:OnDemand`):
    /// `cpu_frequency` in every version, and the job's `SLURM_CPU_FREQ_REQ`, as sbatch up to
    /// 24.05 sets it. From 24.05.2 slurmctld sets it again at launch, alike, and sbatch 24.11
    /// no longer sends it: there only the stored submission (`sacct --env-vars`) differs, and
    /// v0.0.40/v0.0.41 do not tell 24.05 from 24.11.
    pub cpu_freq: Option<String>,
    /// `--profile`: the series the job's steps record, as Slurm names them (`Energy`, `Lustre`,
    /// `Network`, `Task`, or `None` alone): Slurm's flags (`ENERGY`, …) in `profile` from
    /// v0.0.40, and the job's `SLURM_PROFILE` in every version, as sbatch up to 24.05 sets it
    /// (slurmctld from 24.05.2 sets it again at launch, alike). At v0.0.38 only the variable:
    /// its slurmrestd writes the variable for a `profile` from a buffer it does not clear.
    pub profile: Option<Vec<String>>,
    /// `--switches`: the most leaf switches (`required_switches`) and the seconds the job may
    /// wait for them (`wait_for_switch`), from v0.0.40; v0.0.38 refuses both keys.
    pub required_switches: Option<u32>,
    pub wait_for_switch: Option<u32>,
    /// `--container` (`container`, every version) and `--container-id` (`container_id`, from
    /// v0.0.40; v0.0.38 has no such key), with the job's `SLURM_CONTAINER` and
    /// `SLURM_CONTAINER_ID`, which sbatch sets unless the shell has them.
    pub container: Option<String>,
    pub container_id: Option<String>,
}

/// The variables sbatch sets for `--mem-bind` (`SLURM_MEM_BIND`, `SLURM_MEM_BIND_VERBOSE`;
/// `sort`, which would add `SLURM_MEM_BIND_SORT`, is refused before: Slurm 25.11 dropped it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemBinding {
    /// `SLURM_MEM_BIND`: `local`, `verbose,map_mem:0,1`.
    pub binding: String,
    /// `SLURM_MEM_BIND_VERBOSE`: `verbose`, else `quiet`.
    pub verbose: bool,
}

/// sbatch's `--signal=[{R|B}:]SIG[@SECONDS]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillWarning {
    /// The signal's number: sent as a number, which every version reads (22.05's and 23.02's
    /// signal names lack some that sbatch takes by number, such as 13 and 17).
    pub number: u16,
    /// Seconds before the time limit.
    pub seconds: u16,
    /// `B`: to the batch shell only, not the job's steps.
    pub batch_only: bool,
    /// `R`: also when the job's reservation ends.
    pub reservation: bool,
}

/// `count` GPUs per node, of `kind` (`h100`) when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRequest {
    pub count: u32,
    pub kind: Option<String>,
}

impl GpuRequest {
    /// `gpu:h100:2` / `gpu:2`, the `--gres` form.
    fn gres(&self) -> String {
        match &self.kind {
            Some(kind) => format!("gpu:{kind}:{}", self.count),
            None => format!("gpu:{}", self.count),
        }
    }

    /// `h100:2` / `2`, the `--gpus` form.
    fn typed_count(&self) -> String {
        match &self.kind {
            Some(kind) => format!("{kind}:{}", self.count),
            None => self.count.to_string(),
        }
    }
}

/// sbatch's `--mail-type` list (`END,FAIL`, `ALL`, `TIME_LIMIT_90`, `NONE`, any case) as the
/// event names of v0.0.40+ (`v0.0.40_job_mail_flags`), in Slurm's order, without repeats; an
/// empty list when it names `NONE` anywhere (words before it are still checked). `Err` names a word sbatch would not take.
pub fn mail_events(list: &str) -> Result<Vec<String>, String> {
    const ORDER: [&str; 11] = [
        "BEGIN",
        "END",
        "FAIL",
        "REQUEUE",
        "TIME=100%",
        "TIME=90%",
        "TIME=80%",
        "TIME=50%",
        "STAGE_OUT",
        "ARRAY_TASKS",
        "INVALID_DEPENDENCY",
    ];
    let mut wanted = [false; ORDER.len()];
    let mut mark = |name: &str| {
        if let Some(i) = ORDER.iter().position(|o| *o == name) {
            wanted[i] = true;
        }
    };
    for word in list.split(',') {
        match word.trim().to_ascii_uppercase().as_str() {
            // As sbatch: NONE means no mail at all, whatever the list says around it.
            "NONE" => return Ok(Vec::new()),
            // sbatch's ALL: BEGIN, END, FAIL, INVALID_DEPEND, REQUEUE and STAGE_OUT.
            "ALL" => [
                "BEGIN",
                "END",
                "FAIL",
                "INVALID_DEPENDENCY",
                "REQUEUE",
                "STAGE_OUT",
            ]
            .into_iter()
            .for_each(&mut mark),
            "BEGIN" => mark("BEGIN"),
            "END" => mark("END"),
            "FAIL" => mark("FAIL"),
            "REQUEUE" => mark("REQUEUE"),
            "TIME_LIMIT" => mark("TIME=100%"),
            "TIME_LIMIT_90" => mark("TIME=90%"),
            "TIME_LIMIT_80" => mark("TIME=80%"),
            "TIME_LIMIT_50" => mark("TIME=50%"),
            "STAGE_OUT" => mark("STAGE_OUT"),
            "ARRAY_TASKS" => mark("ARRAY_TASKS"),
            "INVALID_DEPEND" => mark("INVALID_DEPENDENCY"),
            _ => {
                return Err(format!(
                    "{:?} is not a mail type: use NONE, BEGIN, END, FAIL, REQUEUE, ALL, \
                     INVALID_DEPEND, STAGE_OUT, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, \
                     TIME_LIMIT_50 or ARRAY_TASKS",
                    word.trim()
                ))
            }
        }
    }
    Ok(ORDER
        .iter()
        .zip(wanted)
        .filter(|(_, on)| *on)
        .map(|(name, _)| name.to_string())
        .collect())
}

/// v0.0.40+ event names back in sbatch's words, for v0.0.38's `mail_type` string.
fn mail_type_words(events: &[String]) -> String {
    events
        .iter()
        .map(|e| match e.as_str() {
            "TIME=100%" => "TIME_LIMIT",
            "TIME=90%" => "TIME_LIMIT_90",
            "TIME=80%" => "TIME_LIMIT_80",
            "TIME=50%" => "TIME_LIMIT_50",
            "INVALID_DEPENDENCY" => "INVALID_DEPEND",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// What slurmctld said to an accepted submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedJob {
    pub job_id: u64,
    /// The site's job_submit plugin message, often empty.
    pub user_msg: String,
}

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The request body for `version`.
///
/// - v0.0.38: `{"script": …, "job": {…}}` with `environment` an object (22.05 answers 400
///   "environment must be a dictionary" to a list), `time_limit` and `memory_per_node` plain
///   integers, `nodes` a plain integer (22.05 reads the spec's `[min, max]` form but never
///   marks the count as set, so the job got one node), GPUs as `gres` (per node) and `gpus`
///   (per job), `mail_type` sbatch's comma-separated words.
/// - v0.0.40+: `{"job": {"script": …, …}}` (v0.0.40 also the top-level `script`, which
///   23.11.0 – 23.11.4 require; it is deprecated from v0.0.41),
///   `environment` a list of `K=V`, `time_limit`/`memory_per_node` as `{set, infinite,
///   number}`, `nodes` a string, GPUs as `tres_per_node` / `tres_per_job` (`gres/gpu:h100:2`),
///   `mail_type` a list of event names.
pub fn submit_body(version: ApiVersion, job: &JobSubmission) -> Result<Value, RestError> {
    validate(job)?;
    if let Some(reason) = unsupported_at(version, job) {
        return Err(RestError::InvalidRequest(reason));
    }
    let mut env = job.environment.clone();
    sbatch_environment(version, job, &mut env);
    // With SLURM_GET_USER_ENV slurmd loads the user's login environment, PATH included, and
    // merges these variables over it: a PATH here would replace the login one.
    let login_env = env.iter().any(|(k, _)| k == "SLURM_GET_USER_ENV");
    if !login_env && !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }

    let mut props = Map::new();
    let mut put = |key: &str, value: Value| {
        props.insert(key.to_string(), value);
    };
    let no_val = |n: u64| json!({"set": true, "infinite": false, "number": n});
    let modern = version.is_data_parser();

    if modern {
        put("script", json!(job.script));
    }
    if let Some(name) = &job.name {
        put("name", json!(name));
    }
    if !job.argv.is_empty() {
        put("argv", json!(job.argv));
    }
    put("account", json!(job.account));
    if let Some(partition) = &job.partition {
        put("partition", json!(partition));
    }
    if let Some(qos) = &job.qos {
        put("qos", json!(qos));
    }
    if let Some(nodes) = job.nodes {
        put(
            "nodes",
            if modern {
                json!(nodes.to_string())
            } else {
                json!(nodes)
            },
        );
    }
    if let Some(tasks) = job.tasks {
        put("tasks", json!(tasks));
    }
    if let Some(per_node) = job.tasks_per_node {
        put("tasks_per_node", json!(per_node));
    }
    if let Some(per_gpu) = job.ntasks_per_gpu {
        let key = if modern {
            "ntasks_per_tres"
        } else {
            "ntasks_per_gpu"
        };
        put(key, json!(per_gpu));
    }
    if let Some(cpus) = job.cpus_per_task {
        put("cpus_per_task", json!(cpus));
    }
    if modern {
        // sbatch 23.11+ sends -c and --gpus-per-task as TRES per task too (scontrol's
        // TresPerTask, `cpu=2,gres/gpu=1`), and binds each task to its GPUs.
        if let Some(tres) = tres_per_task(job) {
            put("tres_per_task", json!(tres));
        }
        if let Some(binding) = tres_binding(job) {
            put("tres_bind", json!(binding));
        }
    } else if let Some(gpus) = &job.gpus_per_task {
        put("gpus_per_task", json!(gpus.typed_count()));
    }
    if let (false, Some(binding)) = (modern, &job.gpu_bind) {
        put("gpu_binding", json!(binding));
    }
    if let Some(freq) = &job.cpu_freq {
        put("cpu_frequency", json!(freq));
    }
    // v0.0.38 writes the job's SLURM_PROFILE for a `profile` into a buffer it does not clear
    // (seen on 22.05.8: `0Energy,Task`; longer junk could overrun it): there only the
    // variable goes, which the job's steps read.
    if let (true, Some(series)) = (modern, &job.profile) {
        let flags: Vec<String> = series.iter().map(|s| s.to_ascii_uppercase()).collect();
        put("profile", json!(flags));
    }
    if let (true, Some(count)) = (modern, job.required_switches) {
        put("required_switches", no_val(u64::from(count)));
        if let Some(seconds) = job.wait_for_switch {
            put("wait_for_switch", json!(seconds));
        }
    }
    if let Some(container) = &job.container {
        put("container", json!(container));
    }
    if let (true, Some(id)) = (modern, &job.container_id) {
        put("container_id", json!(id));
    }
    if let Some(freq) = &job.gpu_freq {
        if modern {
            put("tres_freq", json!(format!("gpu:{freq}")));
        } else {
            put("gpu_frequency", json!(freq));
        }
    }
    // v0.0.41's parser breaks on a lone `pack`/`nopack` (it appends to the request's own text
    // and frees it; fixed in v0.0.42): the steps still get it in SLURM_DISTRIBUTION.
    let flag_only = |layout: &str| matches!(layout, "pack" | "nopack");
    let layout = job
        .distribution
        .as_ref()
        .filter(|l| version > ApiVersion::V0_0_41 || !flag_only(l));
    if let (true, Some(layout)) = (version >= ApiVersion::V0_0_41, layout) {
        put(
            "distribution",
            json!(match job.plane_size {
                Some(size) => format!("{layout}={size}"),
                None => layout.clone(),
            }),
        );
    }
    if let Some(cpus) = job.cpus_per_gpu {
        put(
            if modern {
                "cpus_per_tres"
            } else {
                "cpus_per_gpu"
            },
            if modern {
                json!(format!("gres/gpu:{cpus}"))
            } else {
                json!(cpus)
            },
        );
    }
    if let Some(mb) = job.memory_per_gpu_mb {
        put(
            if modern {
                "memory_per_tres"
            } else {
                "memory_per_gpu"
            },
            if modern {
                json!(format!("gres/gpu:{mb}"))
            } else {
                json!(mb)
            },
        );
    }
    if let Some(limit) = job.time_limit_min {
        put(
            "time_limit",
            if modern {
                no_val(u64::from(limit))
            } else {
                json!(limit)
            },
        );
    }
    if let Some(mem) = job.memory_per_node_mb {
        put(
            "memory_per_node",
            if modern { no_val(mem) } else { json!(mem) },
        );
    }
    if let Some(mem) = job.memory_per_cpu_mb {
        put(
            "memory_per_cpu",
            if modern { no_val(mem) } else { json!(mem) },
        );
    }
    let mut per_node: Vec<String> = job.gpus_per_node.iter().map(GpuRequest::gres).collect();
    per_node.extend(job.other_gres.iter().cloned());
    if !per_node.is_empty() {
        if modern {
            let tres: Vec<String> = per_node.iter().map(|g| format!("gres/{g}")).collect();
            put("tres_per_node", json!(tres.join(",")));
        } else {
            put("gres", json!(per_node.join(",")));
        }
    }
    if let Some(gpus) = &job.gpus_per_job {
        if modern {
            put("tres_per_job", json!(format!("gres/{}", gpus.gres())));
        } else {
            put("gpus", json!(gpus.typed_count()));
        }
    }
    if !job.mail_type.is_empty() {
        put(
            "mail_type",
            if modern {
                json!(job.mail_type)
            } else {
                json!(mail_type_words(&job.mail_type))
            },
        );
    }
    if let Some(user) = &job.mail_user {
        put("mail_user", json!(user));
    }
    put(
        "current_working_directory",
        json!(job.current_working_directory),
    );
    if let Some(out) = &job.standard_output {
        put("standard_output", json!(out));
    }
    if let Some(err) = &job.standard_error {
        put("standard_error", json!(err));
    }
    if let Some(comment) = &job.comment {
        put("comment", json!(comment));
    }
    if let Some(constraints) = &job.constraints {
        put("constraints", json!(constraints));
    }
    if job.hold {
        put("hold", json!(true));
    }
    if let Some(warning) = &job.warn_signal {
        if modern {
            let mut flags = Vec::new();
            if warning.batch_only {
                flags.push("BATCH_JOB");
            }
            if warning.reservation {
                flags.push("RESERVATION_JOB");
            }
            if !flags.is_empty() {
                put("kill_warning_flags", json!(flags));
            }
            put("kill_warning_signal", json!(warning.number.to_string()));
            put("kill_warning_delay", no_val(u64::from(warning.seconds)));
        } else {
            // sbatch's own form, which 22.05 reads with sbatch's parser (`R:` only: see
            // `unsupported_at`).
            let flag = if warning.reservation { "R:" } else { "" };
            put(
                "signal",
                json!(format!("{flag}{}@{}", warning.number, warning.seconds)),
            );
        }
    }
    match job.requeue {
        Some(true) => put("requeue", json!(true)),
        // v0.0.38 turns requeueing on for any `requeue` value; `no_requeue` turns it off.
        Some(false) if modern => put("requeue", json!(false)),
        Some(false) => put("no_requeue", json!(true)),
        None => {}
    }
    if let Some(append) = job.open_append {
        put(
            "open_mode",
            match (modern, append) {
                (true, true) => json!(["APPEND"]),
                (true, false) => json!(["TRUNCATE"]),
                (false, true) => json!("append"),
                (false, false) => json!("truncate"),
            },
        );
    }
    if let Some(nice) = job.nice {
        put("nice", json!(nice));
    }
    if let Some(reservation) = &job.reservation {
        put("reservation", json!(reservation));
    }
    if let Some(wckey) = &job.wckey {
        put("wckey", json!(wckey));
    }
    // Node lists: (v0.0.38 key, data parser key). From v0.0.40 one entry: slurmctld joins the
    // list with commas, so `n[1,3]` stays whole.
    for (nodes, (old, new)) in [
        (&job.excluded_nodes, ("exclude_nodes", "excluded_nodes")),
        (&job.required_nodes, ("nodelist", "required_nodes")),
    ] {
        if let Some(nodes) = nodes {
            put(
                if modern { new } else { old },
                if modern { json!([nodes]) } else { json!(nodes) },
            );
        }
    }
    if let Some(input) = &job.standard_input {
        put("standard_input", json!(input));
    }
    if let Some(dependency) = &job.dependency {
        put("dependency", json!(dependency));
    }
    if let Some(array) = &job.array {
        put("array", json!(array));
    }
    match job.shared {
        Some(shared) if modern => put("shared", json!([shared.flag()])),
        Some(Sharing::Oversubscribe) => put("oversubscribe", json!(true)),
        Some(shared) => put("exclusive", json!(shared.sbatch_word())),
        None => {}
    }
    if let Some(freq) = &job.acctg_freq {
        put("account_gather_frequency", json!(freq));
    }
    for (key, time) in [("begin_time", job.begin_time), ("deadline", job.deadline)] {
        if let Some(time) = time {
            put(
                key,
                match (modern, key) {
                    (false, _) => json!(format!("uts{time}")),
                    // `deadline` is a plain TIMESTAMP in every data parser.
                    (true, "deadline") => json!(time),
                    (true, _) => no_val(u64::try_from(time).unwrap_or(0)),
                },
            );
        }
    }
    if let Some(mb) = job.tmp_disk_mb {
        put("temporary_disk_per_node", json!(mb));
    }
    if let Some(prefer) = &job.prefer {
        put("prefer", json!(prefer));
    }
    if let Some(licenses) = &job.licenses {
        put("licenses", json!(licenses));
    }
    if let Some(cpus) = job.min_cpus_per_node {
        put("minimum_cpus_per_node", json!(cpus));
    }
    if let Some(threads) = job.threads_per_core {
        put("threads_per_core", json!(threads));
    }
    if let Some(tasks) = job.tasks_per_core {
        put("tasks_per_core", json!(tasks));
    }
    if let Some(minutes) = job.time_min {
        put(
            "time_minimum",
            if modern {
                no_val(u64::from(minutes))
            } else {
                json!(minutes)
            },
        );
    }
    let mut flags = Vec::new();
    if let Some(kill) = job.kill_on_invalid_dependency {
        if modern {
            flags.push(if kill {
                "KILL_INVALID_DEPENDENCY"
            } else {
                "NO_KILL_INVALID_DEPENDENCY"
            });
        } else {
            put("kill_on_invalid_dependency", json!(kill));
        }
    }
    if let Some(binding) = job.gres_flags.as_deref() {
        if modern {
            flags.push(if binding == "disable-binding" {
                "GRES_BINDING_DISABLED"
            } else {
                "GRES_BINDING_ENFORCED"
            });
        } else {
            put("gres_flags", json!(binding));
        }
    }
    for (set, flag, key) in [
        (
            job.use_min_nodes,
            "PREFER_MINIMUM_NODE_COUNT",
            "minimum_nodes",
        ),
        (job.spread_job, "SPREAD_JOB", "spread_job"),
    ] {
        if set && modern {
            flags.push(flag);
        } else if set {
            put(key, json!(true));
        }
    }
    if let Some(seconds) = job.delay_boot {
        put(
            "delay_boot",
            if modern {
                json!(seconds)
            } else {
                json!(slurm_duration(seconds))
            },
        );
    }
    if let Some(label) = &job.mcs_label {
        put("mcs_label", json!(label));
    }
    if job.contiguous {
        put("contiguous", json!(true));
    }
    if let Some(extra) = &job.extra {
        put("extra", json!(extra));
    }
    // `hold` wins, as in sbatch (from v0.0.40 both keys write the one setting).
    if let (Some(priority), false) = (job.priority, job.hold) {
        put(
            "priority",
            if modern {
                no_val(u64::from(priority))
            } else {
                json!(priority)
            },
        );
    }
    if let Some(wait) = job.wait_all_nodes {
        put(
            "wait_all_nodes",
            if modern {
                json!(wait)
            } else {
                json!(u8::from(wait))
            },
        );
    }
    if !flags.is_empty() {
        put("flags", json!(flags));
    }
    if job.no_kill {
        if modern {
            put("kill_on_node_fail", json!(false));
        } else {
            // 22.05 reads `no_kill` as sbatch's `--no-kill=set`, not as a boolean.
            put("no_kill", json!("set"));
        }
    }
    if modern {
        let list: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        put("environment", json!(list));
        if version == ApiVersion::V0_0_40 {
            // Slurm 23.11.0 – 23.11.4 refuse a v0.0.40 submission without the request's own
            // `script` (422 "Populated \"script\" field is required"); later ones copy it over
            // `job.script`, which holds the same text.
            return Ok(json!({ "script": job.script, "job": props }));
        }
        Ok(json!({ "job": props }))
    } else {
        let object: Map<String, Value> = env.into_iter().map(|(k, v)| (k, json!(v))).collect();
        put("environment", Value::Object(object));
        Ok(json!({ "script": job.script, "job": props }))
    }
}

/// v0.0.40+'s `tres_per_task` as sbatch 24.05 and later write it: `cpu=N` for `-c`,
/// `gres/gpu[:TYPE]=N` for `--gpus-per-task`, comma-separated; `None` for neither. (23.11's
/// sbatch writes `cpu:N` and `gres/gpu:N`; its slurmctld reads both.) Not `cpu=N` beside
/// `--ntasks-per-gpu`: 25.05.0's slurmd puts it in the job's `SLURM_TRES_PER_TASK`, beside
/// which 23.11's to 25.05.0's `srun` refuses every step (`cpus_per_task` carries `-c`).
fn tres_per_task(job: &JobSubmission) -> Option<String> {
    let mut tres = Vec::new();
    if let (Some(cpus), None) = (job.cpus_per_task, job.ntasks_per_gpu) {
        tres.push(format!("cpu={cpus}"));
    }
    if let Some(gpus) = &job.gpus_per_task {
        tres.push(match &gpus.kind {
            Some(kind) => format!("gres/gpu:{kind}={}", gpus.count),
            None => format!("gres/gpu={}", gpus.count),
        });
    }
    (!tres.is_empty()).then(|| tres.join(","))
}

/// The job's `tres_bind` as sbatch 23.11+ sends it: `--gpu-bind`'s, else the binding it gives
/// `--gpus-per-task` when the user names none (`_implicitly_bind_tres_per_task`): each task
/// its own GPUs.
fn tres_binding(job: &JobSubmission) -> Option<String> {
    match (&job.gpu_bind, &job.gpus_per_task) {
        (Some(binding), _) => Some(format!("gres/gpu:{binding}")),
        (None, Some(gpus)) => Some(format!("gres/gpu:per_task:{}", gpus.count)),
        (None, None) => None,
    }
}

/// The Hydra launchers (MPICH, Intel MPI): each bootstrap variable with the one carrying its
/// extra arguments.
const HYDRA_BOOTSTRAPS: [(&str, &str); 2] = [
    ("HYDRA_BOOTSTRAP", "HYDRA_LAUNCHER_EXTRA_ARGS"),
    (
        "I_MPI_HYDRA_BOOTSTRAP",
        "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
    ),
];

/// The variables sbatch itself adds to a job's environment from its options (slurmrestd adds
/// almost none: v0.0.38 sets `SLURM_CPU_FREQ_REQ`, v0.0.41 and later `SLURM_DISTRIBUTION`,
/// alike), as Slurm's `set_env_from_opts` and sbatch's option checks do:
/// - `SLURM_CPUS_PER_TASK`, `SLURM_NTASKS_PER_NODE`, `SLURM_CPUS_PER_GPU`,
///   `SLURM_MEM_PER_GPU`, `SLURM_GPUS` and `SLURM_NTASKS_PER_GPU` for `-c`,
///   `--ntasks-per-node`, `--cpus-per-gpu`, `--mem-per-gpu`, `--gpus` and `--ntasks-per-gpu` (not `SLURM_GPUS_PER_NODE`: a request does not tell
///   `--gpus-per-node` from `--gres=gpu:N`, which sets none),
///   replacing the user's (every version); `SLURM_GPUS_PER_TASK` for `--gpus-per-task` (v0.0.38:
///   later sbatch folds it into `SLURM_TRES_PER_TASK`, with `SLURM_TRES_BIND`);
/// - from v0.0.40 (Slurm 23.11 and later): `SLURM_TRES_PER_TASK` for `-c` (not with
///   `--ntasks-per-gpu`, beside which 23.11's to 25.05.0's `srun` refuses it), `SLURM_OPEN_MODE`
///   (`a`, `t`) for `--open-mode`, `SLURM_JOB_DEPENDENCY`, and the settings
///   that make `mpirun` start its daemons with `srun --external-launcher`: Open MPI's and
///   PRRTE's where the user has none, and a Hydra launcher's bootstrap `slurm` with its extra
///   arguments — only where the user set no bootstrap (and the cluster does not disable it)
///   or set `slurm` itself, since Intel MPI passes those arguments to any bootstrap (`ssh`).
fn sbatch_environment(version: ApiVersion, job: &JobSubmission, env: &mut Vec<(String, String)>) {
    fn overwrite(env: &mut Vec<(String, String)>, key: &str, value: String) {
        env.retain(|(k, _)| k != key);
        env.push((key.to_string(), value));
    }
    fn append(env: &mut Vec<(String, String)>, key: &str, value: &str) {
        if !env.iter().any(|(k, _)| k == key) {
            env.push((key.to_string(), value.to_string()));
        }
    }
    if let Some(cpus) = job.cpus_per_task {
        overwrite(env, "SLURM_CPUS_PER_TASK", cpus.to_string());
    }
    if let Some(cpus) = job.cpus_per_gpu {
        overwrite(env, "SLURM_CPUS_PER_GPU", cpus.to_string());
    }
    if let Some(mb) = job.memory_per_gpu_mb {
        overwrite(env, "SLURM_MEM_PER_GPU", mb.to_string());
    }
    if let Some(gpus) = &job.gpus_per_job {
        overwrite(env, "SLURM_GPUS", gpus.typed_count());
    }
    if version.is_data_parser() {
        // (none for -c beside --ntasks-per-gpu: `tres_per_task`)
        if let Some(tres) = tres_per_task(job) {
            overwrite(env, "SLURM_TRES_PER_TASK", tres);
        }
        if let Some(binding) = tres_binding(job) {
            overwrite(env, "SLURM_TRES_BIND", binding);
        }
    } else {
        if let Some(gpus) = &job.gpus_per_task {
            overwrite(env, "SLURM_GPUS_PER_TASK", gpus.typed_count());
        }
        if let Some(binding) = &job.gpu_bind {
            overwrite(env, "SLURM_GPU_BIND", binding.clone());
        }
    }
    if let Some(freq) = &job.gpu_freq {
        overwrite(env, "SLURM_GPU_FREQ", freq.clone());
    }
    if let Some(freq) = &job.cpu_freq {
        overwrite(env, "SLURM_CPU_FREQ_REQ", freq.clone());
    }
    if let Some(series) = &job.profile {
        overwrite(env, "SLURM_PROFILE", series.join(","));
    }
    if let Some(container) = &job.container {
        append(env, "SLURM_CONTAINER", container);
    }
    if let Some(id) = &job.container_id {
        append(env, "SLURM_CONTAINER_ID", id);
    }
    if let Some(layout) = &job.distribution {
        overwrite(env, "SLURM_DISTRIBUTION", layout.clone());
    }
    if let Some(size) = job.plane_size {
        overwrite(env, "SLURM_DIST_PLANESIZE", size.to_string());
    }
    if let Some(mem) = &job.mem_bind {
        overwrite(env, "SLURM_MEM_BIND", mem.binding.clone());
        // As sbatch: the shell's own verbosity, when exported, stays.
        let verbose = if mem.verbose { "verbose" } else { "quiet" };
        append(env, "SLURM_MEM_BIND_VERBOSE", verbose);
    }
    if let Some(per_node) = job.tasks_per_node {
        overwrite(env, "SLURM_NTASKS_PER_NODE", per_node.to_string());
    }
    if let Some(per_gpu) = job.ntasks_per_gpu {
        overwrite(env, "SLURM_NTASKS_PER_GPU", per_gpu.to_string());
    }
    if let Some(hint) = &job.hint {
        overwrite(env, "SLURM_HINT", hint.clone());
    }
    if let Some(threads) = job.threads_per_core {
        overwrite(env, "SLURM_THREADS_PER_CORE", threads.to_string());
    }
    if let Some(tasks) = job.tasks_per_core {
        overwrite(env, "SLURM_NTASKS_PER_CORE", tasks.to_string());
    }
    if let Some(freq) = &job.acctg_freq {
        overwrite(env, "SLURM_ACCTG_FREQ", freq.clone());
    }
    if !version.is_data_parser() {
        return;
    }
    // sbatch's, for the job's steps (v0.0.38 adds them itself, 24.11's slurmctld at launch;
    // 23.11's and 24.05's neither).
    if let Some(appending) = job.open_append {
        let mode = if appending { "a" } else { "t" };
        overwrite(env, "SLURM_OPEN_MODE", mode.into());
    }
    if let Some(dependency) = &job.dependency {
        overwrite(env, "SLURM_JOB_DEPENDENCY", dependency.clone());
    }
    append(env, "OMPI_MCA_plm_slurm_args", "--external-launcher");
    append(env, "PRTE_MCA_plm_slurm_args", "--external-launcher");
    for (bootstrap, extra) in HYDRA_BOOTSTRAPS {
        let current = env
            .iter()
            .find(|(k, _)| k == bootstrap)
            .map(|(_, v)| v.as_str());
        let slurm = match current {
            None => !job.disable_slurm_hydra_bootstrap,
            Some(value) => value == "slurm",
        };
        if slurm {
            append(env, bootstrap, "slurm");
            append(env, extra, "--external-launcher");
        }
    }
}

/// Whether a slurmrestd of `release` (`22.05.8`, from a ping's `meta`) serving `version` breaks
/// on a job's `argv`: the v0.0.38 plugin of 22.05.0 – 22.05.8 and of 23.02.0 – 23.02.1 hands
/// sbatch's option array to the job and frees it beside, so the submission reads freed memory
/// and slurmrestd dies (seen on 22.05.8: SIGSEGV; 22.05.9 and 23.02.2 copy the array). An
/// unknown release counts as one that breaks.
pub fn argv_breaks(version: ApiVersion, release: Option<&str>) -> bool {
    if version.is_data_parser() {
        return false;
    }
    match release.and_then(release_numbers) {
        Some(release) => release < (22, 5, 9) || ((23, 2, 0)..(23, 2, 2)).contains(&release),
        None => true,
    }
}

/// `22.05.8` (or `24.11.0-0rc1`) → `(22, 5, 8)`; `None` for what is not a release.
fn release_numbers(text: &str) -> Option<(u32, u32, u32)> {
    let numbers: Vec<u32> = text
        .split('.')
        .take(3)
        .map_while(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect();
    match numbers[..] {
        [major, minor, micro] => Some((major, minor, micro)),
        _ => None,
    }
}

/// Whether slurmctld of `release`, sent a job through `version`, allocates the job `--mincpus`
/// CPUs on each of its nodes (`nodes × minimum_cpus_per_node` when that is more than its
/// tasks'): up to 24.11.0 its task layout counts the raised CPU total as tasks (22.05.8: `-n 1
/// --mincpus=3` is allocated 3 CPUs); from 24.11.1 (Slurm commit dd07218fbb) it lays out the
/// job's own task count, which bursar always sends, and `--mincpus` only picks nodes (24.11.5:
/// 1 CPU). `None` while the release of a v0.0.40+ slurmrestd is unknown (23.11 to 25.x).
pub fn min_cpus_allocated(version: ApiVersion, release: Option<&str>) -> Option<bool> {
    if !version.is_data_parser() {
        // v0.0.38: Slurm 22.05 and 23.02
        return Some(true);
    }
    release
        .and_then(release_numbers)
        .map(|release| release < (24, 11, 1))
}

/// Why a job with script arguments cannot go to a slurmrestd that [`argv_breaks`] on.
pub fn argv_refusal(release: Option<&str>) -> String {
    format!(
        "script arguments cannot reach this cluster: its slurmrestd (Slurm {}) crashes on a \
         job's arguments (fixed in Slurm 22.05.9 and 23.02.2), so bursar does not send them \
         there; read them from the environment instead (--export=ALL,NAME=value) or use \
         another cluster",
        release.unwrap_or("of an unknown release")
    )
}

/// What `version` cannot carry of `job`, in words for the user; `None` when it carries all.
pub fn unsupported_at(version: ApiVersion, job: &JobSubmission) -> Option<String> {
    if job.shared == Some(Sharing::Topo) && version < ApiVersion::V0_0_41 {
        return Some(format!(
            "--exclusive=topo cannot reach this cluster: slurmrestd's OpenAPI {version} has no \
             such setting (Slurm 24.05 and later offer it from v0.0.41); leave it out, submit \
             at v0.0.41 or later where the cluster offers it (submit.slurmrestd.api_version), \
             or use another cluster"
        ));
    }
    if version.is_data_parser() {
        return None;
    }
    if job.contiguous {
        return Some(
            "--contiguous cannot reach this cluster: slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 \
             and 23.02) disables it; leave it out, or use a cluster on Slurm 23.11 or later"
                .to_string(),
        );
    }
    if job.extra.is_some() {
        return Some(
            "--extra cannot reach this cluster: slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 and \
             23.02) has no such field; leave it out, or use a cluster on Slurm 23.11 or later"
                .to_string(),
        );
    }
    if job.warn_signal.as_ref().is_some_and(|w| w.batch_only) {
        return Some(
            "--signal=B:… (to the batch shell only) cannot reach this cluster: slurmrestd's \
             OpenAPI v0.0.38 (Slurm 22.05 and 23.02) reads the B flag only in sbatch itself; \
             leave B: out to signal every step, or use a cluster on Slurm 23.11 or later"
                .to_string(),
        );
    }
    if job.required_switches.is_some() {
        return Some(
            "--switches cannot reach this cluster: slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 \
             and 23.02) refuses it; leave it out, or use a cluster on Slurm 23.11 or later"
                .to_string(),
        );
    }
    job.container_id.is_some().then(|| {
        "--container-id cannot reach this cluster: slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 \
         and 23.02) has no such field; leave it out (--container alone goes), or use a cluster \
         on Slurm 23.11 or later"
            .to_string()
    })
}

/// Seconds as Slurm's `D-HH:MM:SS`, which its `time_str2secs` reads back exactly.
fn slurm_duration(seconds: u32) -> String {
    format!(
        "{}-{:02}:{:02}:{:02}",
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// How a job shares its nodes: Slurm's `shared` setting (`JOB_SHARED_*`), which sbatch's
/// `--exclusive[=MODE]` and `-s/--oversubscribe` all write, the later winning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// `--exclusive`: whole nodes, shared with no other job.
    Exclusive,
    /// `-s/--oversubscribe` (`--exclusive=oversubscribe`): its CPUs may be shared where the
    /// partition lets them (`OverSubscribe=YES`).
    Oversubscribe,
    /// `--exclusive=user`: nodes shared only with the same user's jobs.
    User,
    /// `--exclusive=mcs`: nodes shared only with jobs of the same MCS label (enforced only
    /// where the cluster has an `MCSPlugin`).
    Mcs,
    /// `--exclusive=topo`: the topology segment shared with no other job (Slurm 24.05 and
    /// later; enforced only with `TopologyPlugin=topology/block`).
    Topo,
}

impl Sharing {
    /// The flag of `shared` from v0.0.40.
    pub fn flag(self) -> &'static str {
        match self {
            Sharing::Exclusive => "none",
            Sharing::Oversubscribe => "oversubscribe",
            Sharing::User => "user",
            Sharing::Mcs => "mcs",
            Sharing::Topo => "topo",
        }
    }

    /// `--exclusive`'s word for it, as sbatch's option parser (v0.0.38's `exclusive`) reads it.
    pub fn sbatch_word(self) -> &'static str {
        match self {
            Sharing::Exclusive => "exclusive",
            other => other.flag(),
        }
    }
}

/// Whether `--gres-flags=disable-binding` cannot be sent at `version` to a slurmrestd of
/// `release`: its v0.0.40 and v0.0.41 parsers spell the flag `GRED_BINDING_DISABLED` in Slurm
/// 23.11 and 24.05.0 – 24.05.2 (fixed in 24.05.3), and would refuse the right name. An
/// unknown release is taken as one of those.
pub fn gres_disable_misspelt(version: ApiVersion, release: Option<&str>) -> bool {
    if !matches!(version, ApiVersion::V0_0_40 | ApiVersion::V0_0_41) {
        return false;
    }
    match release.and_then(release_numbers) {
        Some((major, minor, micro)) => {
            (major, minor) == (23, 11) || ((major, minor) == (24, 5) && micro <= 2)
        }
        None => true,
    }
}

/// Why [`gres_disable_misspelt`] keeps a job from a cluster.
pub fn gres_disable_refusal(version: ApiVersion, release: Option<&str>) -> String {
    format!(
        "--gres-flags=disable-binding cannot reach this cluster: its slurmrestd (Slurm {}) \
         misspells that flag at OpenAPI {version}; leave it out (binding is then the \
         cluster's default), or submit at v0.0.38 where the cluster offers it \
         (submit.slurmrestd.api_version; Slurm 24.05.3 and later spell it right)",
        release.unwrap_or("of an unknown release")
    )
}

fn validate(job: &JobSubmission) -> Result<(), RestError> {
    let bad = |why: String| Err(RestError::InvalidRequest(why));
    if job.script.trim().is_empty() {
        return bad("the job script is empty".into());
    }
    if job.account.trim().is_empty() {
        return bad("the account is empty".into());
    }
    if job.current_working_directory.trim().is_empty() {
        return bad("the working directory is empty".into());
    }
    if job.argv.iter().any(|word| word.contains('\0')) {
        return bad("a script argument contains a NUL character".into());
    }
    for (option, time) in [("--begin", job.begin_time), ("--deadline", job.deadline)] {
        // v0.0.38's `uts` form needs at least 1000000; every version wants it positive.
        if time.is_some_and(|t| t < 1_000_000) {
            return bad(format!("{option} is not a time after 1970-01-12"));
        }
    }
    if let Some(array) = &job.array {
        // slurmctld reads an empty text as no array at all: a job of one task.
        if array.is_empty() || array.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad(format!("{array:?} is not a job array's index list"));
        }
    }
    if job.min_cpus_per_node == Some(0) {
        return bad("--mincpus must be at least 1".into());
    }
    if let Some(binding) = job.gres_flags.as_deref() {
        if !matches!(binding, "enforce-binding" | "disable-binding") {
            return bad(format!("{binding:?} is not a --gres-flags binding"));
        }
    }
    if job.threads_per_core == Some(0) || job.tasks_per_core == Some(0) {
        return bad("--threads-per-core and --ntasks-per-core must be at least 1".into());
    }
    if let Some(licenses) = &job.licenses {
        // slurmctld reads an empty text as no licenses, and refuses the whole list for a blank.
        if licenses.is_empty()
            || licenses
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return bad(format!("{licenses:?} is not a list of licenses"));
        }
    }
    for (i, (key, value)) in job.environment.iter().enumerate() {
        if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
            return bad(format!(
                "environment variable {key:?} has an invalid name or value"
            ));
        }
        if job.environment[..i].iter().any(|(k, _)| k == key) {
            return bad(format!("environment variable {key} is set twice"));
        }
    }
    let memories = [
        job.memory_per_node_mb,
        job.memory_per_cpu_mb,
        job.memory_per_gpu_mb,
    ];
    if memories.iter().flatten().count() > 1 {
        return bad("memory per node, per CPU and per GPU exclude each other".into());
    }
    let gpu_requests = [&job.gpus_per_node, &job.gpus_per_job, &job.gpus_per_task];
    if gpu_requests.iter().filter(|g| g.is_some()).count() > 1 {
        return bad("GPUs per node, per job and per task exclude each other".into());
    }
    if job.cpus_per_gpu.is_some() && job.cpus_per_task.is_some() {
        return bad("CPUs per task and per GPU exclude each other".into());
    }
    for entry in &job.other_gres {
        let name = entry.split(':').next().unwrap_or("");
        if name.is_empty()
            || name.eq_ignore_ascii_case("gpu")
            || entry.contains(',')
            || !entry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return bad(format!("{entry:?} is not one non-GPU GRES such as shard:1"));
        }
    }
    for gpus in gpu_requests.into_iter().flatten() {
        if gpus.count == 0 {
            return bad("a GPU request of 0 GPUs".into());
        }
        if let Some(kind) = &gpus.kind {
            if kind.is_empty()
                || !kind
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return bad(format!("GPU type {kind:?} is not a GRES type name"));
            }
        }
    }
    Ok(())
}

/// Reads a 2xx submit answer: `job_id` (top level; v0.0.40/41 also repeat it in `result`) and
/// `job_submit_user_msg` (`null` in some 22.05 answers).
pub(crate) fn parse_submitted(
    status: u16,
    body: &[u8],
    user: &str,
) -> Result<SubmittedJob, RestError> {
    let json = json_body(body, "submit answer")?;
    let errors = api_errors(&json);
    let job_id = job_id_in(&json);
    // A job id means slurmctld created the job, whatever errors[] says beside it: 22.05 answers
    // a held job (`"hold": true`, or priority 0 from a job_submit plugin) with the job id and
    // errors[] 2042 "Job is in held state, pending scheduler release". Calling that a refusal
    // would release the hold of a job that exists on the cluster.
    let Some(job_id) = job_id else {
        check_ok_errors(status, &errors, user)?;
        return Err(RestError::BadPayload {
            problem: "submit answer has no job_id".into(),
            excerpt: excerpt(body),
        });
    };
    let mut notes: Vec<String> = json
        .get("job_submit_user_msg")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    notes.extend(
        errors
            .iter()
            .filter(|e| e.number != Some(ESLURM_REST_EMPTY_RESULT))
            .map(|e| e.text.clone()),
    );
    Ok(SubmittedJob {
        job_id,
        user_msg: notes.join("; "),
    })
}

/// The id of the job a submit answer says slurmctld created, if any.
fn job_id_in(json: &Value) -> Option<u64> {
    json.get("job_id")
        .and_then(Value::as_u64)
        .or_else(|| json.pointer("/result/job_id").and_then(Value::as_u64))
        .filter(|id| *id > 0)
}

/// Whether a submit answer, whatever its status, names a job slurmctld created. 23.11.0
/// answers a job created with a non-zero return code (partition down, a QOS or association
/// limit: the job waits) with HTTP 500 and the job's id; 23.11.1 and later with 200 and a
/// warning.
pub(crate) fn names_created_job(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|json| job_id_in(&json).is_some())
}

/// Checks a 2xx cancel answer: `errors[]`, and v0.0.42+'s per-job `status[].error.code`.
pub(crate) fn check_cancelled(status: u16, body: &[u8], user: &str) -> Result<(), RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let json = json_body(body, "cancel answer")?;
    check_ok_errors(status, &api_errors(&json), user)?;
    for entry in json
        .get("status")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let code = entry
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if code != 0 {
            let message = ["/error/message", "/error/string"]
                .iter()
                .filter_map(|p| entry.pointer(p).and_then(Value::as_str))
                .find(|s| !s.is_empty())
                .unwrap_or("cancel failed")
                .to_string();
            return Err(RestError::Server {
                status,
                error_number: Some(code),
                message,
            });
        }
    }
    Ok(())
}

/// What `ping` learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    /// `22.05.8`, `24.11.6`: from the answer's `meta`.
    pub release: Option<String>,
    pub controllers: Vec<ControllerPing>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerPing {
    pub hostname: String,
    /// `primary`, `backup1`, …
    pub mode: String,
    pub up: bool,
}

impl Ping {
    /// Some controller answered.
    pub fn any_up(&self) -> bool {
        self.controllers.iter().any(|c| c.up)
    }
}

/// v0.0.38 `pings[] {hostname, ping: "UP", status, mode}`; v0.0.40+ `pings[] {hostname,
/// pinged: "UP", latency, mode}` (+ `responding`, `primary` from v0.0.42); v0.0.45 `pings[]
/// {hostname, responding, primary, latency, status}`, without `pinged` and `mode` (the mode
/// is then `primary` or `backup`, from `primary`).
pub(crate) fn parse_ping(status: u16, body: &[u8], user: &str) -> Result<Ping, RestError> {
    let json = json_body(body, "ping answer")?;
    check_ok_errors(status, &api_errors(&json), user)?;
    let release = ["/meta/slurm/release", "/meta/Slurm/release"]
        .iter()
        .find_map(|p| json.pointer(p).and_then(Value::as_str))
        .map(str::to_string);
    let controllers = json
        .get("pings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let text = |key: &str| p.get(key).and_then(Value::as_str).unwrap_or("").to_string();
            let word = p
                .get("pinged")
                .or_else(|| p.get("ping"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let up = match p.get("responding").and_then(Value::as_bool) {
                Some(responding) => responding,
                None => word.eq_ignore_ascii_case("UP"),
            };
            let mode = match (text("mode"), p.get("primary").and_then(Value::as_bool)) {
                (mode, _) if !mode.is_empty() => mode,
                (_, Some(true)) => "primary".to_string(),
                (_, Some(false)) => "backup".to_string(),
                (_, None) => String::new(),
            };
            ControllerPing {
                hostname: text("hostname"),
                mode,
                up,
            }
        })
        .collect();
    Ok(Ping {
        release,
        controllers,
    })
}

fn json_body(body: &[u8], what: &str) -> Result<Value, RestError> {
    serde_json::from_slice(body).map_err(|e| RestError::BadPayload {
        problem: format!("{what} is not valid JSON: {e}"),
        excerpt: excerpt(body),
    })
}

/// One job (or job array task) as slurmctld reports it now (`GET /slurm/vX/job/{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveJob {
    /// `job_state`: a string up to v0.0.39 (v0.0.38 names a job by its first state flag when
    /// it has one), a list of flags since, whose first is the base state.
    pub state: String,
    /// The job's exit code as `sbatch --wait` reads it: the batch script's exit status when it
    /// exited, 1 when anything else ended it (a signal; Slurm's raw code `NO_VAL` while it has
    /// none). `None` when the answer has no exit code.
    pub exit_code: Option<i32>,
}

/// The jobs slurmctld reports for one id (`GET /slurm/vX/job/{id}`): one for a job; a job
/// array's id lists its tasks, running and done, and its pending rest. Empty when the job is
/// not in slurmctld's memory (ended more than `MinJobAge` ago, or never existed).
pub(crate) fn parse_live_jobs(
    status: u16,
    body: &[u8],
    user: &str,
) -> Result<Vec<LiveJob>, RestError> {
    let json = json_body(body, "job answer")?;
    let errors = api_errors(&json);
    if unknown_job(&errors) {
        return Ok(Vec::new());
    }
    check_ok_errors(status, &errors, user)?;
    let jobs = json.get("jobs").and_then(Value::as_array);
    Ok(jobs
        .into_iter()
        .flatten()
        .filter_map(|job| {
            let state = match job.get("job_state") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(flags)) => flags.first().and_then(Value::as_str)?.to_string(),
                _ => return None,
            };
            Some(LiveJob {
                state,
                exit_code: job.get("exit_code").and_then(sbatch_exit_code),
            })
        })
        .collect())
}

/// A job's `exit_code` as sbatch's `--wait` reads the raw wait status: `WEXITSTATUS` when the
/// script exited, else 1. v0.0.38 gives the raw status (a number); v0.0.40+ give it decoded
/// (`{"status": ["SUCCESS"|"ERROR"|"SIGNALED"|"CORE_DUMPED"|"PENDING"|"INVALID"],
/// "return_code": {"set", "number"}, "signal": {…}}`), where only `SUCCESS` and `ERROR` are an
/// exit.
fn sbatch_exit_code(value: &Value) -> Option<i32> {
    if let Some(raw) = value.as_u64() {
        let exited = raw & 0x7f == 0;
        return Some(if exited {
            i32::try_from((raw >> 8) & 0xff).unwrap_or(1)
        } else {
            1
        });
    }
    let status: Vec<&str> = match value.get("status")? {
        Value::String(s) => vec![s.as_str()],
        Value::Array(flags) => flags.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let exited = status.iter().any(|s| *s == "SUCCESS" || *s == "ERROR");
    if !exited {
        return Some(1);
    }
    let code = value.get("return_code")?;
    let number = match code {
        Value::Number(n) => n.as_u64(),
        Value::Object(_) if code.get("set").and_then(Value::as_bool) == Some(true) => {
            code.get("number").and_then(Value::as_u64)
        }
        _ => None,
    };
    Some(number.map_or(1, |n| i32::try_from(n & 0xff).unwrap_or(1)))
}

/// Whether an answer's errors[] say slurmctld does not know the job.
pub(crate) fn names_unknown_job(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|json| unknown_job(&api_errors(&json)))
}

fn unknown_job(errors: &[ApiError]) -> bool {
    errors
        .iter()
        .any(|e| e.number == Some(ESLURM_INVALID_JOB_ID))
}

/// ESLURM_INVALID_JOB_ID: slurmctld does not know the job.
const ESLURM_INVALID_JOB_ID: i64 = 2017;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_added_unless_the_job_loads_the_login_environment() {
        let path = |env: Vec<(String, String)>| {
            let body = submit_body(
                ApiVersion::V0_0_38,
                &JobSubmission {
                    environment: env,
                    ..job()
                },
            )
            .unwrap();
            body["job"]["environment"]["PATH"].clone()
        };
        assert_eq!(path(vec![]), serde_json::json!(DEFAULT_PATH));
        let own = vec![("PATH".to_string(), "/opt/bin".to_string())];
        assert_eq!(path(own), serde_json::json!("/opt/bin"));
        // --export=NONE: slurmd loads the login environment, its PATH included, under these.
        let login = vec![("SLURM_GET_USER_ENV".to_string(), "1".to_string())];
        assert!(path(login).is_null());
    }

    #[test]
    fn mail_types_read_as_sbatch_reads_them() {
        let events = |list: &str| mail_events(list).unwrap();
        assert_eq!(
            events("all"),
            [
                "BEGIN",
                "END",
                "FAIL",
                "REQUEUE",
                "STAGE_OUT",
                "INVALID_DEPENDENCY"
            ]
        );
        assert_eq!(events("FAIL,end,END"), ["END", "FAIL"]);
        assert_eq!(
            events("TIME_LIMIT,TIME_LIMIT_50,ARRAY_TASKS"),
            ["TIME=100%", "TIME=50%", "ARRAY_TASKS"]
        );
        assert!(events("NONE").is_empty());
        assert!(
            events("END,NONE").is_empty(),
            "as sbatch: NONE clears the list"
        );
        let e = mail_events("END,SOMETIMES").unwrap_err();
        assert!(e.contains("\"SOMETIMES\" is not a mail type"), "{e}");
        assert_eq!(
            mail_type_words(&events("ALL")),
            "BEGIN,END,FAIL,REQUEUE,STAGE_OUT,INVALID_DEPEND"
        );
    }

    fn job() -> JobSubmission {
        JobSubmission {
            script: "#!/bin/bash\ntrue\n".into(),
            account: "physics".into(),
            current_working_directory: "/home/alice".into(),
            ..JobSubmission::default()
        }
    }

    #[test]
    fn path_is_always_sent() {
        let body = submit_body(ApiVersion::V0_0_38, &job()).unwrap();
        assert_eq!(
            body["job"]["environment"],
            json!({"PATH": "/usr/local/bin:/usr/bin:/bin"})
        );
        let body = submit_body(ApiVersion::V0_0_41, &job()).unwrap();
        let env = body["job"]["environment"].as_array().unwrap();
        assert!(
            env.contains(&json!("PATH=/usr/local/bin:/usr/bin:/bin")),
            "{env:?}"
        );
        assert_eq!(body.get("script"), None);
    }

    #[test]
    fn the_job_gets_the_variables_sbatch_sets_from_its_options() {
        let env_of = |version: ApiVersion, job: &JobSubmission| -> Vec<String> {
            let body = submit_body(version, job).unwrap();
            match &body["job"]["environment"] {
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                    .collect(),
                Value::Array(list) => list
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect(),
                other => panic!("{other}"),
            }
        };
        let shaped = JobSubmission {
            cpus_per_task: Some(4),
            tasks_per_node: Some(2),
            environment: vec![
                ("SLURM_CPUS_PER_TASK".into(), "1".into()),
                ("OMPI_MCA_plm_slurm_args".into(), "--mine".into()),
            ],
            ..job()
        };
        // 22.05: -c and --ntasks-per-node, replacing what the login shell had.
        let old = env_of(ApiVersion::V0_0_38, &shaped);
        assert!(
            old.contains(&"SLURM_CPUS_PER_TASK=4".to_string()),
            "{old:?}"
        );
        assert!(
            !old.contains(&"SLURM_CPUS_PER_TASK=1".to_string()),
            "{old:?}"
        );
        assert!(
            old.contains(&"SLURM_NTASKS_PER_NODE=2".to_string()),
            "{old:?}"
        );
        assert!(!old.iter().any(|v| v.starts_with("SLURM_TRES_PER_TASK=")));
        assert!(!old.iter().any(|v| v.starts_with("HYDRA_BOOTSTRAP=")));
        // 23.11+: -c as a TRES per task too, in the body and the environment, and the MPI
        // launchers' settings, the user's own kept.
        let body = submit_body(ApiVersion::V0_0_40, &shaped).unwrap();
        assert_eq!(body["job"]["tres_per_task"], json!("cpu=4"));
        let v40 = env_of(ApiVersion::V0_0_40, &shaped);
        for wanted in [
            "SLURM_TRES_PER_TASK=cpu=4",
            "HYDRA_BOOTSTRAP=slurm",
            "HYDRA_LAUNCHER_EXTRA_ARGS=--external-launcher",
            "I_MPI_HYDRA_BOOTSTRAP=slurm",
            "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=--external-launcher",
            "PRTE_MCA_plm_slurm_args=--external-launcher",
            "OMPI_MCA_plm_slurm_args=--mine",
        ] {
            assert!(v40.contains(&wanted.to_string()), "{wanted}: {v40:?}");
        }
        assert!(!v40.contains(&"OMPI_MCA_plm_slurm_args=--external-launcher".to_string()));
        // A Hydra bootstrap of the user's own gets no --external-launcher (Intel MPI would pass
        // it to ssh); `slurm` gets it; a cluster that disables the default sets none.
        let with = |pairs: &[(&str, &str)], disabled: bool| JobSubmission {
            environment: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            disable_slurm_hydra_bootstrap: disabled,
            ..job()
        };
        let own = env_of(
            ApiVersion::V0_0_42,
            &with(
                &[
                    ("I_MPI_HYDRA_BOOTSTRAP", "ssh"),
                    ("HYDRA_BOOTSTRAP", "slurm"),
                ],
                false,
            ),
        );
        assert!(
            own.contains(&"I_MPI_HYDRA_BOOTSTRAP=ssh".to_string()),
            "{own:?}"
        );
        assert!(!own
            .iter()
            .any(|v| v.starts_with("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=")));
        assert!(own.contains(&"HYDRA_LAUNCHER_EXTRA_ARGS=--external-launcher".to_string()));
        let disabled = env_of(ApiVersion::V0_0_42, &with(&[], true));
        assert!(
            !disabled.iter().any(|v| v.contains("HYDRA")),
            "{disabled:?}"
        );
        assert!(disabled.contains(&"OMPI_MCA_plm_slurm_args=--external-launcher".to_string()));
        // Without -c: nothing of it (sbatch sends no count).
        let plain = env_of(ApiVersion::V0_0_42, &job());
        assert!(!plain.iter().any(|v| v.starts_with("SLURM_CPUS_PER_TASK=")));
        assert_eq!(
            submit_body(ApiVersion::V0_0_42, &job()).unwrap()["job"].get("tres_per_task"),
            None
        );
    }

    #[test]
    fn refuses_bad_jobs() {
        for broken in [
            JobSubmission {
                script: " ".into(),
                ..job()
            },
            JobSubmission {
                environment: vec![("A=B".into(), "1".into())],
                ..job()
            },
            JobSubmission {
                environment: vec![("A".into(), "1".into()), ("A".into(), "2".into())],
                ..job()
            },
            JobSubmission {
                gpus_per_node: Some(GpuRequest {
                    count: 1,
                    kind: Some("h100,gpu:a100".into()),
                }),
                ..job()
            },
        ] {
            assert!(matches!(
                submit_body(ApiVersion::V0_0_41, &broken),
                Err(RestError::InvalidRequest(_))
            ));
        }
    }

    #[test]
    fn answers() {
        let ok = br#"{"errors":[],"job_id":19,"step_id":"BATCH","job_submit_user_msg":null}"#;
        assert_eq!(
            parse_submitted(200, ok, "alice").unwrap(),
            SubmittedJob {
                job_id: 19,
                user_msg: String::new()
            }
        );
        let failed = br#"{"status":[{"error":{"string":"Job/step already completing or completed",
            "code":2021,"message":"Job/step already completing or completed"},"step_id":"",
            "job_id":{"set":true,"infinite":false,"number":5}}],"errors":[]}"#;
        let err = check_cancelled(200, failed, "alice").unwrap_err();
        assert_eq!(err.slurm_error_number(), Some(2021));
        assert!(!err.is_retryable());
        assert!(check_cancelled(200, b"{\"errors\":[]}", "alice").is_ok());
    }
}
