//! A `bursar submit` / `bursar quote` command line → the [`JobRequest`] to send: sbatch options
//! and the script's `#SBATCH` lines, or a dstack task file; the job's environment and working
//! folder from the submitting shell, as sbatch takes them.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::{bail, Context};

use crate::request::{
    parse_dstack_task, parse_sbatch_command, parse_sbatch_command_with_env, split_sbatch_args,
    JobRequest, RequestError,
};

/// Never sent to a cluster, whatever `--export` says: the job does not need the user's bursar
/// token, and the cluster's administrators should not see it.
const NEVER_EXPORTED: &[&str] = &["BURSAR_TOKEN"];

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// `-h`, `--help`, `--usage`: print the usage and stop.
    Help,
    Job(Box<Submission>),
}

/// A job to quote or submit, and how the client should behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    pub request: JobRequest,
    pub parsable: bool,
    /// `-W/--wait`: wait for the job to end and exit with its exit code.
    pub wait: bool,
    pub quiet: bool,
    pub test_only: bool,
    /// How the request was read (ranges narrowed, …): shown on standard error.
    pub notes: Vec<String>,
    /// From a dstack task file rather than a batch script.
    pub dstack: bool,
    /// `--propagate[=LIST]` ([`SbatchCommand::propagate`](crate::request::SbatchCommand)).
    pub propagate: Option<Vec<String>>,
    /// `--get-user-env` ([`SbatchCommand::get_user_env`](crate::request::SbatchCommand)).
    pub get_user_env: bool,
    /// `#PBS -W umask=` ([`SbatchCommand::umask`](crate::request::SbatchCommand)).
    pub umask: Option<String>,
}

/// What the submitting shell provides: its environment, folder, host name, umask, resource
/// limits and nice value. Taken from the process by [`Shell::current`]; built by hand in tests.
#[derive(Debug, Clone, Default)]
pub struct Shell {
    pub vars: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub host: Option<String>,
    /// As sbatch writes it into `SLURM_UMASK`: `0022`.
    pub umask: Option<String>,
    /// Soft resource limits by Slurm's name ([`RLIMITS`](crate::request::sbatch::RLIMITS)): the number, `unlimited` as
    /// `18446744073709551615` (as sbatch writes them into `SLURM_RLIMIT_*`).
    pub limits: BTreeMap<String, String>,
    /// The process's nice value (sbatch's `SLURM_PRIO_PROCESS`).
    pub nice: Option<i32>,
}

/// `/proc/self/limits`' names for Slurm's ([`RLIMITS`](crate::request::sbatch::RLIMITS)).
const PROC_LIMITS: [(&str, &str); 10] = [
    ("Max cpu time", "CPU"),
    ("Max file size", "FSIZE"),
    ("Max data size", "DATA"),
    ("Max stack size", "STACK"),
    ("Max core file size", "CORE"),
    ("Max resident set", "RSS"),
    ("Max processes", "NPROC"),
    ("Max open files", "NOFILE"),
    ("Max locked memory", "MEMLOCK"),
    ("Max address space", "AS"),
];

/// The soft limits of `/proc/self/limits` by Slurm's names; a line that cannot be read is left
/// out (slurmd then leaves that limit as it is).
fn soft_limits(text: &str) -> BTreeMap<String, String> {
    let mut limits = BTreeMap::new();
    for line in text.lines() {
        let Some((label, name)) = PROC_LIMITS.iter().find(|(label, _)| {
            line.strip_prefix(label)
                .is_some_and(|rest| rest.starts_with(' '))
        }) else {
            continue;
        };
        let soft = line[label.len()..].split_whitespace().next();
        let value = match soft {
            Some("unlimited") => u64::MAX.to_string(),
            Some(n) if n.parse::<u64>().is_ok() => n.to_string(),
            _ => continue,
        };
        limits.insert(name.to_string(), value);
    }
    limits
}

/// The nice value in `/proc/self/stat` (its 19th field).
fn nice_value(stat: &str) -> Option<i32> {
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(16)?.parse().ok()
}

impl Shell {
    /// This process's environment (variables that are not UTF-8 are skipped), folder, host
    /// name and umask (both read from `/proc`: Linux only, left out elsewhere).
    pub fn current() -> Shell {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .map(|m| m.trim().to_string())
            })
            .filter(|m| m.len() == 4 && m.bytes().all(|b| (b'0'..=b'7').contains(&b)));
        Shell {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            cwd: std::env::current_dir()
                .ok()
                .and_then(|d| d.to_str().map(str::to_string)),
            host,
            umask,
            limits: std::fs::read_to_string("/proc/self/limits")
                .map(|text| soft_limits(&text))
                .unwrap_or_default(),
            nice: std::fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|stat| nice_value(&stat)),
        }
    }
}

/// Reads `argv` (the words after `submit`): options, then the script (or a dstack task file, or
/// standard input when there is neither a script nor `--wrap`). `for_submit` fills the job's
/// environment and working folder as sbatch does; a quote does not need them.
pub fn read_command_line(
    argv: &[String],
    shell: &Shell,
    for_submit: bool,
) -> anyhow::Result<Parsed> {
    let split = match split_sbatch_args(argv) {
        Ok(split) => split,
        Err(RequestError::HelpRequested) => return Ok(Parsed::Help),
        Err(e) => return Err(e.into()),
    };
    if split.script.is_some()
        && parse_sbatch_command(&split.options, None).is_ok_and(|c| c.request.wrap.is_some())
    {
        // sbatch's words: the first word after the options is a script argument then.
        bail!("Script arguments not permitted with --wrap option");
    }
    let parsed = match &split.script {
        Some(path) => {
            let text = read_script(Path::new(path))?;
            if is_dstack_task(Path::new(path), &text) {
                dstack_submission(&split.options, &text)
                    .with_context(|| format!("{path}: dstack task file"))?
            } else {
                sbatch_submission(&split.options, &shell.vars, Some(&text))?
            }
        }
        None => match sbatch_submission(&split.options, &shell.vars, None) {
            // No script and no --wrap: sbatch reads the script from standard input.
            Err(e) if is_no_script(&e) && !std::io::stdin().is_terminal() => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("cannot read the job script from standard input")?;
                if text.is_empty() {
                    return Err(e);
                }
                sbatch_submission(&split.options, &shell.vars, Some(&text))?
            }
            other => other?,
        },
    };
    let Parsed::Job(mut job) = parsed else {
        return Ok(parsed);
    };
    if let (false, Some(path)) = (job.dstack, &split.script) {
        // sbatch's command line for the job: the script's full path, then its arguments.
        job.request.script_path = Some(script_command(path, shell.cwd.as_deref()));
        job.request.script_args = split.script_args.clone();
    } else if !split.script_args.is_empty() {
        bail!(
            "a dstack task file takes no arguments ({}): put them in its commands or env",
            split.script_args.join(" ")
        );
    }
    if !job.dstack && job.request.job_name.is_none() {
        // sbatch's default name: the script's file name, `wrap`, or `sbatch` for a script
        // read from standard input.
        job.request.job_name = Some(match (&job.request.wrap, &split.script) {
            (Some(_), _) => "wrap".to_string(),
            (None, Some(path)) => Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("sbatch")
                .to_string(),
            (None, None) => "sbatch".to_string(),
        });
    }
    if for_submit && !job.dstack {
        if let Some(missing) = job
            .propagate
            .iter()
            .filter(|_| !job.get_user_env)
            .flatten()
            .find(|name| !shell.limits.contains_key(*name))
        {
            bail!(
                "--propagate: this shell's {missing} limit cannot be read (/proc/self/limits), \
                 so bursar cannot pass it on"
            );
        }
        job.request.environment = job_environment(job.request.export.as_deref(), &shell.vars);
        submit_variables(
            &mut job.request.environment,
            job.request.export.as_deref(),
            job.propagate.as_deref(),
            shell,
        );
        if let Some(umask) = &job.umask {
            // The script's umask over the shell's, but not over a SLURM_UMASK the shell sets
            // (sbatch's _set_umask_env).
            if !shell.vars.contains_key("SLURM_UMASK") {
                let env = &mut job.request.environment;
                env.insert("SLURM_UMASK".into(), umask.clone());
            }
        }
        if job.get_user_env {
            // The login environment under the job's, and none of the shell's limits (the job
            // gets the node's), as sbatch's --get-user-env (none of SLURM_RLIMIT_*,
            // --propagate's included).
            let env = &mut job.request.environment;
            env.insert("SLURM_GET_USER_ENV".into(), "1".into());
            env.retain(|k, _| !k.starts_with("SLURM_RLIMIT_"));
        }
        job.request.working_dir = working_dir(job.request.working_dir.take(), shell.cwd.as_deref());
    }
    Ok(Parsed::Job(job))
}

/// The script's path as sbatch sends it (the job's `Command=`, from `search_path`): as typed
/// when it starts with `/` or `.` (`./job.sh`), else under the current folder (`job.sh`,
/// `sub/job.sh` → `/home/alice/sub/job.sh`); as typed when the current folder is unknown.
fn script_command(path: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(dir) if !path.starts_with(['/', '.']) => {
            format!("{}/{path}", dir.trim_end_matches('/'))
        }
        _ => path.to_string(),
    }
}

/// sbatch's input environment variables that `bursar submit` reads, and the option each one
/// stands for. As in sbatch, they override `#SBATCH` lines and the command line overrides
/// them.
const SBATCH_ENV: &[(&str, &str)] = &[
    ("SBATCH_ACCOUNT", "--account"),
    ("SBATCH_PARTITION", "--partition"),
    ("SBATCH_QOS", "--qos"),
    ("SBATCH_CLUSTERS", "--clusters"),
    ("SLURM_CLUSTERS", "--clusters"),
    ("SBATCH_TIMELIMIT", "--time"),
    ("SBATCH_JOB_NAME", "--job-name"),
    ("SBATCH_OUTPUT", "--output"),
    ("SBATCH_ERROR", "--error"),
    ("SBATCH_MEM_PER_NODE", "--mem"),
    ("SBATCH_MEM_PER_CPU", "--mem-per-cpu"),
    ("SBATCH_GRES", "--gres"),
    ("SBATCH_GPUS", "--gpus"),
    ("SBATCH_GPUS_PER_NODE", "--gpus-per-node"),
    ("SBATCH_GPUS_PER_TASK", "--gpus-per-task"),
    ("SBATCH_TRES_PER_TASK", "--tres-per-task"),
    ("SBATCH_CPUS_PER_GPU", "--cpus-per-gpu"),
    ("SLURM_HINT", "--hint"),
    ("SBATCH_HINT", "--hint"),
    ("SBATCH_THREADS_PER_CORE", "--threads-per-core"),
    ("SBATCH_GRES_FLAGS", "--gres-flags"),
    ("SBATCH_ACCTG_FREQ", "--acctg-freq"),
    ("SBATCH_DISTRIBUTION", "--distribution"),
    ("SBATCH_GPU_BIND", "--gpu-bind"),
    ("SBATCH_GPU_FREQ", "--gpu-freq"),
    ("SBATCH_CPU_FREQ_REQ", "--cpu-freq"),
    ("SBATCH_PROFILE", "--profile"),
    ("SBATCH_CONTAINER", "--container"),
    ("SBATCH_CONTAINER_ID", "--container-id"),
    ("SBATCH_CONSTRAINT", "--constraint"),
    ("SBATCH_EXPORT", "--export"),
    ("SBATCH_SIGNAL", "--signal"),
    ("SBATCH_OPEN_MODE", "--open-mode"),
    ("SBATCH_RESERVATION", "--reservation"),
    ("SBATCH_WCKEY", "--wckey"),
    ("SBATCH_INPUT", "--input"),
    ("SBATCH_WAIT_ALL_NODES", "--wait-all-nodes"),
    ("SBATCH_DELAY_BOOT", "--delay-boot"),
    ("SBATCH_ARRAY_INX", "--array"),
];

/// sbatch's input variables for on/off options, in sbatch's order (a later one wins). As
/// sbatch's `slurm_process_option` reads them, one stands for its option when it is empty,
/// `yes` or a number other than 0, and otherwise resets it (`!--option`: the script's setting
/// is cleared too, as sbatch reads the variables after the script); `SBATCH_NO_KILL`'s and
/// `SBATCH_EXCLUSIVE`'s value, when they have one, is their option's (`set`, `off`; `user`,
/// `mcs`, `topo`), and empty they stand for the option alone (`--exclusive`: whole nodes). `SBATCH_GET_USER_ENV` turns `--get-user-env` on
/// when empty, `yes` or a number other than 0, as every sbatch reads it; any other value is
/// refused: sbatch before 25.05 turns the option on for it (`0`, `10L`: its timeout and mode),
/// 25.05 and later off.
const SBATCH_ENV_FLAGS: &[(&str, &str)] = &[
    ("SBATCH_EXCLUSIVE", "--exclusive"),
    ("SBATCH_GET_USER_ENV", "--get-user-env"),
    ("SBATCH_IGNORE_PBS", "--ignore-pbs"),
    ("SBATCH_NO_KILL", "--no-kill"),
    ("SBATCH_NO_REQUEUE", "--no-requeue"),
    ("SBATCH_REQUEUE", "--requeue"),
    ("SBATCH_SPREAD_JOB", "--spread-job"),
    ("SBATCH_USE_MIN_NODES", "--use-min-nodes"),
    ("SBATCH_WAIT", "--wait"),
];

/// An on/off input variable whose value is its option's (see [`SBATCH_ENV_FLAGS`]).
fn valued(name: &str) -> bool {
    matches!(name, "SBATCH_EXCLUSIVE" | "SBATCH_NO_KILL")
}

/// An on/off input variable's value that turns its option on (see [`SBATCH_ENV_FLAGS`]).
fn turns_on(value: &str) -> bool {
    value.is_empty()
        || value.eq_ignore_ascii_case("yes")
        || value.parse::<i64>().is_ok_and(|n| n != 0)
}

/// sbatch's input environment variables bursar does not carry (22.05's and later ones): set,
/// even empty (sbatch turns an on/off option on for an empty one), they would change the job
/// sbatch submits, so `bursar submit` refuses rather than ignore them.
const SBATCH_ENV_REFUSED: &[&str] = &[
    "SBATCH_BATCH",
    "SBATCH_BURST_BUFFER",
    "SBATCH_CLUSTER_CONSTRAINT",
    "SBATCH_CORE_SPEC",
    "SBATCH_GPUS_PER_SOCKET",
    "SBATCH_MEM_BIND",
    "SBATCH_MEM_PER_GPU",
    "SBATCH_NETWORK",
    "SBATCH_OVERCOMMIT",
    "SBATCH_POWER",
    "SBATCH_REQ_SWITCH",
    "SBATCH_CONSOLIDATE_SEGMENTS",
    "SBATCH_RUNTIME",
    "SBATCH_SEGMENT_SIZE",
    "SBATCH_SPREAD_SEGMENTS",
    "SBATCH_THREAD_SPEC",
    "SBATCH_TRES_BIND",
    "SBATCH_WAIT4SWITCH",
];

/// The options the shell's `SBATCH_*` variables stand for (see [`SBATCH_ENV`]): each
/// variable's name and its `--option=value` word; an error names a variable bursar cannot
/// honour. An empty variable of [`SBATCH_ENV`] counts as unset (sbatch would refuse the empty
/// value), but for `SBATCH_WAIT_ALL_NODES`, which sbatch reads as 0, and
/// `SBATCH_TRES_PER_TASK`, an empty list replacing the script's; one of
/// [`SBATCH_ENV_REFUSED`] counts as set.
pub fn sbatch_env_options(
    vars: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<(String, String)>> {
    // An off value of an on/off variable asks nothing bursar would not do anyway.
    let asks = |name: &str| match name {
        "SBATCH_OVERCOMMIT" => vars.get(name).is_some_and(|value| turns_on(value)),
        _ => vars.contains_key(name),
    };
    if let Some(name) = SBATCH_ENV_REFUSED.iter().find(|name| asks(name)) {
        if *name == "SBATCH_MEM_BIND" {
            bail!(
                "SBATCH_MEM_BIND is set in the environment, and sbatch then leaves the job's \
                 steps without the binding (it sets no SLURM_MEM_BIND); unset it and pass \
                 --mem-bind instead"
            );
        }
        if *name == "SBATCH_OVERCOMMIT" {
            bail!(
                "SBATCH_OVERCOMMIT is set in the environment (sbatch's -O): {}; unset it to \
                 submit through bursar",
                crate::request::OVERCOMMIT_REFUSED
            );
        }
        if matches!(*name, "SBATCH_REQ_SWITCH" | "SBATCH_WAIT4SWITCH") {
            bail!(
                "{name} is set in the environment; bursar takes the switches from \
                 --switches=COUNT[@TIME] only: unset it and pass --switches"
            );
        }
        bail!(
            "{name} is set in the environment, and bursar does not carry what it asks for; \
             unset it to submit through bursar"
        );
    }
    let mut words = Vec::new();
    for (name, option) in SBATCH_ENV {
        // sbatch reads SBATCH_CLUSTERS, then SLURM_CLUSTERS over it.
        let slurm_clusters = vars.get("SLURM_CLUSTERS").is_some_and(|v| !v.is_empty());
        if *name == "SBATCH_CLUSTERS" && slurm_clusters {
            continue;
        }
        match vars.get(*name).map(String::as_str) {
            // sbatch's parse_int reads an empty value as 0: an explicit "do not wait".
            Some("") if *name == "SBATCH_WAIT_ALL_NODES" => {
                words.push((name.to_string(), format!("{option}=0")))
            }
            // sbatch keeps an empty list, which replaces the script's.
            Some("") if *name == "SBATCH_TRES_PER_TASK" => {
                words.push((name.to_string(), format!("!{option}")))
            }
            Some(value) if !value.is_empty() => {
                words.push((name.to_string(), format!("{option}={value}")))
            }
            _ => {}
        }
    }
    for (name, option) in SBATCH_ENV_FLAGS {
        match vars.get(*name) {
            Some(value) if valued(name) && !value.is_empty() => {
                words.push((name.to_string(), format!("{option}={value}")))
            }
            Some(value) if valued(name) || turns_on(value) => {
                words.push((name.to_string(), option.to_string()))
            }
            Some(value) if *name == "SBATCH_GET_USER_ENV" => bail!(
                "SBATCH_GET_USER_ENV={value:?}: sbatch before 25.05 reads it as --get-user-env's \
                 timeout (on), 25.05 and later as off; set it to 1, or unset it"
            ),
            // an off value resets the option, the script's setting too, as in sbatch
            Some(_) => words.push((name.to_string(), format!("!{option}"))),
            None => {}
        }
    }
    Ok(words)
}

/// What sbatch adds to every job's environment, whatever `--export` says: the submitting
/// folder and host, the umask; for an `--export` list without `ALL` the shell's `SLURM_*`
/// variables; for any `--export` but `ALL`, `SLURM_EXPORT_ENV` (for the steps) and, but for
/// `NIL`, `SLURM_GET_USER_ENV=1`, which makes slurmd load the user's login environment; the
/// shell's nice value (`SLURM_PRIO_PROCESS`, which slurmd applies under
/// `PropagatePrioProcess`) and soft resource limits (`SLURM_RLIMIT_*`, which slurmd applies as
/// the cluster's `PropagateResourceLimits` says, and removes from the job's environment).
/// With `--propagate`, only the limits it names, marked `U` so that slurmd applies them
/// whatever the cluster says (sbatch's `_set_rlimit_env`).
fn submit_variables(
    env: &mut BTreeMap<String, String>,
    export: Option<&str>,
    propagate: Option<&[String]>,
    shell: &Shell,
) {
    let given = export.map(str::trim).unwrap_or("ALL");
    let all = given
        .split(',')
        .any(|e| e.trim().eq_ignore_ascii_case("ALL"));
    if !all {
        for (k, v) in shell.vars.iter().filter(|(k, _)| k.starts_with("SLURM_")) {
            env.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if !given.eq_ignore_ascii_case("ALL") {
        // For the job's steps (srun reads it), as sbatch passes it on.
        env.insert("SLURM_EXPORT_ENV".into(), given.to_string());
        // Every --export but plain ALL (and NIL: no login environment either) has slurmd load
        // the user's login environment under the variables sent, as sbatch asks it to.
        if !given.eq_ignore_ascii_case("NIL") {
            env.insert("SLURM_GET_USER_ENV".into(), "1".into());
        }
    }
    if let Some(cwd) = &shell.cwd {
        env.insert("SLURM_SUBMIT_DIR".into(), cwd.clone());
    }
    if let Some(host) = &shell.host {
        env.insert("SLURM_SUBMIT_HOST".into(), host.clone());
    }
    if let Some(umask) = &shell.umask {
        env.entry("SLURM_UMASK".into())
            .or_insert_with(|| umask.clone());
    }
    if let Some(nice) = shell.nice {
        env.insert("SLURM_PRIO_PROCESS".into(), nice.to_string());
    }
    for (name, value) in &shell.limits {
        let value = match propagate {
            None => value.clone(),
            Some(names) if names.contains(name) => format!("U{value}"),
            Some(_) => continue,
        };
        env.insert(format!("SLURM_RLIMIT_{name}"), value);
    }
}

fn is_no_script(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<RequestError>(),
        Some(RequestError::Script(_))
    )
}

fn read_script(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the job script {}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the job script {} is not UTF-8 text", path.display()))
}

fn sbatch_submission(
    options: &[String],
    vars: &BTreeMap<String, String>,
    script: Option<&str>,
) -> anyhow::Result<Parsed> {
    // --help wins over anything the environment says, as in sbatch.
    if matches!(
        parse_sbatch_command(options, None),
        Err(RequestError::HelpRequested)
    ) {
        return Ok(Parsed::Help);
    }
    let from_env = sbatch_env_options(vars)?;
    match parse_sbatch_command_with_env(options, &from_env, script) {
        // sbatch reads a job without -w (or -F) from this file's node names, laid out in its
        // order (an arbitrary distribution): a job bursar cannot carry.
        Ok(command)
            if command.request.slurm.nodelist.is_none() && vars.contains_key("SLURM_HOSTFILE") =>
        {
            bail!(
                "SLURM_HOSTFILE is set in the environment, and sbatch would then run the job on \
                 the nodes that file lists, its tasks laid out in the file's order; bursar reads \
                 no node files: unset it, or name the nodes with -w/--nodelist"
            )
        }
        Ok(command) => Ok(Parsed::Job(Box::new(Submission {
            request: command.request,
            parsable: command.parsable,
            wait: command.wait,
            quiet: command.quiet,
            test_only: command.test_only,
            notes: command.notes,
            dstack: false,
            propagate: command.propagate,
            get_user_env: command.get_user_env,
            umask: command.umask,
        }))),
        Err(RequestError::HelpRequested) => Ok(Parsed::Help),
        Err(e) => Err(e.into()),
    }
}

/// A dstack task file: a `.yml`/`.yaml` file that is not a `#!` script, or any file whose text
/// is a YAML mapping with a `type` key (`type: task`; other types are refused by the parser
/// with their own message).
pub fn is_dstack_task(path: &Path, text: &str) -> bool {
    if text.starts_with("#!") {
        return false;
    }
    let yaml_name = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yml") || e.eq_ignore_ascii_case("yaml"));
    yaml_name
        || serde_yaml::from_str::<serde_yaml::Value>(text)
            .ok()
            .as_ref()
            .and_then(serde_yaml::Value::as_mapping)
            .is_some_and(|m| m.contains_key("type"))
}

/// The options that make sense with a dstack task: who pays and where it may run. Resources,
/// time limit and everything else come from the task file.
const DSTACK_OPTIONS: &str =
    "-A, -p, -q, -M, -J, --comment, --parsable, --wait, --quiet and --test-only";

fn dstack_submission(options: &[String], yaml: &str) -> anyhow::Result<Parsed> {
    // The options are read by the sbatch parser with a stand-in --wrap, then compared with
    // what the stand-in alone gives: any difference but the allowed fields is an option that
    // would be dropped.
    const PROBE: &str = "--wrap=true";
    match parse_sbatch_command(options, None) {
        Err(RequestError::HelpRequested) => return Ok(Parsed::Help),
        Err(RequestError::Script(_)) => {}
        Err(e) => return Err(e.into()),
        Ok(_) => bail!("--wrap cannot be used together with a dstack task file"),
    }
    let mut probed = options.to_vec();
    probed.push(PROBE.to_string());
    let command = parse_sbatch_command(&probed, None)?;
    if command.propagate.is_some() {
        bail!("--propagate applies to Slurm jobs: a dstack task gets the limits of its backend");
    }
    if command.get_user_env {
        bail!("--get-user-env applies to Slurm jobs: a dstack task has its image's environment");
    }
    let baseline = parse_sbatch_command(&[PROBE.to_string()], None)?.request;
    let given = command.request;
    let mut rest = given.clone();
    rest.account = None;
    rest.partition = None;
    rest.qos = None;
    rest.clusters = Vec::new();
    rest.job_name = None;
    rest.comment = None;
    if rest != baseline {
        bail!(
            "with a dstack task file only {DSTACK_OPTIONS} may be given: the resources and the \
             time limit come from the file"
        );
    }
    let mut request = parse_dstack_task(yaml)?;
    request.account = given.account;
    request.partition = given.partition;
    request.qos = given.qos;
    request.clusters = given.clusters;
    request.comment = given.comment;
    if given.job_name.is_some() {
        request.job_name = given.job_name;
    }
    request.validate()?;
    Ok(Parsed::Job(Box::new(Submission {
        request,
        parsable: command.parsable,
        wait: command.wait,
        quiet: command.quiet,
        test_only: command.test_only,
        notes: command.notes,
        dstack: true,
        propagate: None,
        get_user_env: false,
        umask: None,
    })))
}

/// The variables the job gets, as sbatch's `--export` decides (default `ALL`):
///
/// - `ALL`: the whole environment; `NONE` or `NIL`: none of it;
/// - a list: `ALL` or `NONE` plus `NAME=value` (set) and `NAME` (taken from the environment)
///   entries; a list without `ALL` exports only its entries.
///
/// [`NEVER_EXPORTED`] variables are left out in every case.
pub fn job_environment(
    export: Option<&str>,
    vars: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let entries: Vec<&str> = export
        .unwrap_or("ALL")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.iter().any(|e| e.eq_ignore_ascii_case("ALL")) {
        env.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for entry in entries {
        if ["ALL", "NONE", "NIL"]
            .iter()
            .any(|w| entry.eq_ignore_ascii_case(w))
        {
            continue;
        }
        match entry.split_once('=') {
            Some((name, value)) => {
                env.insert(name.to_string(), value.to_string());
            }
            None => {
                if let Some(value) = vars.get(entry) {
                    env.insert(entry.to_string(), value.clone());
                }
            }
        }
    }
    for name in NEVER_EXPORTED {
        env.remove(*name);
    }
    env
}

/// `-D` made absolute against the submitting folder, or the submitting folder itself (sbatch's
/// default working directory).
fn working_dir(given: Option<String>, cwd: Option<&str>) -> Option<String> {
    match (given, cwd) {
        (Some(dir), Some(cwd)) if !dir.starts_with('/') => {
            Some(Path::new(cwd).join(dir).to_string_lossy().into_owned())
        }
        (Some(dir), _) => Some(dir),
        (None, cwd) => cwd.map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [
            ("HOME", "/home/alice"),
            ("PATH", "/bin"),
            ("BURSAR_TOKEN", "secret"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn export_rules() {
        let all = job_environment(None, &vars());
        assert_eq!(all.len(), 2);
        assert!(!all.contains_key("BURSAR_TOKEN"));
        assert!(job_environment(Some("NONE"), &vars()).is_empty());
        let some = job_environment(Some("HOME,X=1,BURSAR_TOKEN,MISSING"), &vars());
        assert_eq!(
            some.into_iter().collect::<Vec<_>>(),
            vec![
                ("HOME".to_string(), "/home/alice".to_string()),
                ("X".to_string(), "1".to_string())
            ]
        );
        let plus = job_environment(Some("ALL,X=1"), &vars());
        assert_eq!(plus.len(), 3);
    }

    #[test]
    fn the_shells_limits_and_nice_value_go_as_sbatch_sends_them() {
        let limits =
            "Limit                     Soft Limit           Hard Limit           Units     \n\
            Max cpu time              unlimited            unlimited            seconds   \n\
            Max stack size            8388608              unlimited            bytes     \n\
            Max core file size        0                    unlimited            bytes     \n\
            Max open files            1024                 524288               files     \n\
            Max file locks            unlimited            unlimited            locks     \n\
            Max locked memory         garbage              8388608              bytes     \n";
        let limits = soft_limits(limits);
        assert_eq!(
            limits
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            [
                "CORE=0",
                "CPU=18446744073709551615",
                "NOFILE=1024",
                "STACK=8388608"
            ]
        );
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 5 1 0 99 \
                    1000 10 18446744073709551615";
        assert_eq!(nice_value(stat), Some(5));
        assert_eq!(nice_value("garbage"), None);

        let shell = Shell {
            limits,
            nice: Some(5),
            ..Shell::default()
        };
        let sent = |export: Option<&str>, propagate: Option<&[String]>| {
            let mut env = job_environment(export, &shell.vars);
            submit_variables(&mut env, export, propagate, &shell);
            env.into_iter()
                .filter(|(k, _)| k.starts_with("SLURM_RLIMIT_") || k == "SLURM_PRIO_PROCESS")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        let every = [
            "SLURM_PRIO_PROCESS=5",
            "SLURM_RLIMIT_CORE=0",
            "SLURM_RLIMIT_CPU=18446744073709551615",
            "SLURM_RLIMIT_NOFILE=1024",
            "SLURM_RLIMIT_STACK=8388608",
        ];
        assert_eq!(sent(None, None), every);
        assert_eq!(sent(Some("NONE"), None), every, "whatever --export says");
        let named = ["STACK".to_string(), "NOFILE".to_string()];
        assert_eq!(
            sent(None, Some(&named)),
            [
                "SLURM_PRIO_PROCESS=5",
                "SLURM_RLIMIT_NOFILE=U1024",
                "SLURM_RLIMIT_STACK=U8388608"
            ]
        );
        assert_eq!(sent(None, Some(&[])), ["SLURM_PRIO_PROCESS=5"]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_has_every_limit_slurm_propagates() {
        let shell = Shell::current();
        assert_eq!(
            shell.limits.keys().map(String::as_str).collect::<Vec<_>>(),
            {
                let mut names = crate::request::sbatch::RLIMITS.to_vec();
                names.sort_unstable();
                names
            }
        );
        assert!(shell.nice.is_some());
    }

    #[test]
    fn on_off_variables_follow_sbatch() {
        let words = |pairs: &[(&str, &str)]| {
            let vars = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            sbatch_env_options(&vars)
                .unwrap()
                .into_iter()
                .map(|(_, word)| word)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&[("SBATCH_REQUEUE", "")]), ["--requeue"]);
        assert_eq!(words(&[("SBATCH_REQUEUE", "yes")]), ["--requeue"]);
        assert_eq!(words(&[("SBATCH_REQUEUE", "2")]), ["--requeue"]);
        // an off value resets the option (the script's setting too)
        assert_eq!(words(&[("SBATCH_REQUEUE", "0")]), ["!--requeue"]);
        assert_eq!(words(&[("SBATCH_NO_REQUEUE", "no")]), ["!--no-requeue"]);
        // Both: sbatch reads SBATCH_REQUEUE last, so it wins.
        assert_eq!(
            words(&[("SBATCH_REQUEUE", "1"), ("SBATCH_NO_REQUEUE", "1")]),
            ["--no-requeue", "--requeue"]
        );
        assert_eq!(words(&[("SBATCH_NO_KILL", "")]), ["--no-kill"]);
        assert_eq!(words(&[("SBATCH_NO_KILL", "off")]), ["--no-kill=off"]);
    }

    #[test]
    fn sbatch_adds_its_variables_as_export_says() {
        let shell = Shell {
            vars: [("SLURM_CONF", "/etc/slurm.conf"), ("HOME", "/home/alice")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cwd: Some("/work".into()),
            host: Some("login1".into()),
            umask: Some("0027".into()),
            ..Shell::default()
        };
        let added = |export: Option<&str>| {
            let mut env = job_environment(export, &shell.vars);
            submit_variables(&mut env, export, None, &shell);
            env
        };
        let get = |env: &BTreeMap<String, String>, k: &str| env.get(k).cloned();
        let all = added(None);
        assert_eq!(get(&all, "SLURM_SUBMIT_DIR").as_deref(), Some("/work"));
        assert_eq!(get(&all, "SLURM_SUBMIT_HOST").as_deref(), Some("login1"));
        assert_eq!(get(&all, "SLURM_UMASK").as_deref(), Some("0027"));
        assert_eq!(get(&all, "SLURM_GET_USER_ENV"), None);
        assert_eq!(get(&all, "SLURM_EXPORT_ENV"), None);
        // sbatch asks for the login environment for every --export but plain ALL and NIL.
        for export in ["NONE", "HOME", "ALL,X=1"] {
            let env = added(Some(export));
            assert_eq!(
                get(&env, "SLURM_GET_USER_ENV").as_deref(),
                Some("1"),
                "{export}"
            );
            assert_eq!(get(&env, "SLURM_EXPORT_ENV").as_deref(), Some(export));
        }
        let nil = added(Some("NIL"));
        assert_eq!(get(&nil, "SLURM_GET_USER_ENV"), None);
        // A list without ALL still carries the shell's SLURM_* variables.
        let none = added(Some("NONE"));
        assert_eq!(get(&none, "SLURM_CONF").as_deref(), Some("/etc/slurm.conf"));
        assert_eq!(get(&none, "HOME"), None);
    }

    #[test]
    fn working_dir_defaults_to_cwd() {
        assert_eq!(working_dir(None, Some("/w")), Some("/w".into()));
        assert_eq!(
            working_dir(Some("run".into()), Some("/w")),
            Some("/w/run".into())
        );
        assert_eq!(
            working_dir(Some("/abs".into()), Some("/w")),
            Some("/abs".into())
        );
    }

    #[test]
    fn dstack_files_are_recognised() {
        let task = "type: task\ncommands: [python train.py]\n";
        assert!(is_dstack_task(Path::new("train.dstack.yml"), task));
        assert!(is_dstack_task(Path::new("train"), task));
        assert!(!is_dstack_task(
            Path::new("job.sh"),
            "#!/bin/bash\nsrun x\n"
        ));
        assert!(!is_dstack_task(Path::new("job.yml"), "#!/bin/bash\n"));
        assert!(!is_dstack_task(Path::new("job"), "srun hostname\n"));
    }

    #[test]
    fn dstack_options_are_limited() {
        let task =
            "type: task\nname: train\ncommands: [python train.py]\nresources:\n  gpu: A100:2\n";
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let Parsed::Job(job) =
            dstack_submission(&args(&["-A", "physics", "-M", "cloud", "--parsable"]), task)
                .unwrap()
        else {
            panic!("help")
        };
        assert_eq!(job.request.account.as_deref(), Some("physics"));
        assert_eq!(job.request.clusters, vec!["cloud".to_string()]);
        assert_eq!(job.request.job_name.as_deref(), Some("train"));
        assert!(job.parsable && job.dstack);
        assert!(job.request.dstack.is_some());
        let e = dstack_submission(&args(&["-n", "4"]), task).unwrap_err();
        assert!(e.to_string().contains("only -A"), "{e}");
        let e = dstack_submission(&args(&["--wrap=hostname"]), task).unwrap_err();
        assert!(e.to_string().contains("--wrap"), "{e}");
        let e = dstack_submission(&args(&["--propagate=STACK"]), task).unwrap_err();
        assert!(e.to_string().contains("--propagate"), "{e}");
        let e = dstack_submission(&args(&["--requeue"]), task).unwrap_err();
        assert!(e.to_string().contains("only -A"), "{e}");
        assert_eq!(
            dstack_submission(&args(&["--help"]), task).unwrap(),
            Parsed::Help
        );
    }
}
