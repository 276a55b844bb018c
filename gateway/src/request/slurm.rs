//! [`SlurmOptions`]: sbatch options that change how Slurm runs a job but not what it costs
//! (`--signal`, `--requeue`, `--open-mode`, `--nice`, `--reservation`, `--wckey`, `--exclude`,
//! `--input`, `--no-kill`, `--dependency`, `--kill-on-invalid-dep`, `--begin`, `--deadline`,
//! `--time-min`, `--tmp`, `--prefer`, `-w/--nodelist`, whose node count is priced,
//! `-s/--oversubscribe`, `--exclusive=user|mcs|topo`, `--gres-flags`, `--acctg-freq`, `-m/--distribution`, `--mem-bind`,
//! `--gpu-bind`: [`super::layout`], `--gpu-freq`, `--cpu-freq`, `--profile`, `--switches`,
//! `--container`, `--container-id`, `--wait-all-nodes`, `--use-min-nodes`, `--spread-job`,
//! `--delay-boot`, `--mcs-label`, `--contiguous`, `--extra`, `--priority`). They are
//! forwarded to a Slurm cluster as given and never priced;
//! a dstack cluster has none of them, so it is not eligible for a request that sets any.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::layout::{parse_distribution, parse_gpu_bind, parse_mem_bind};
use super::time::slurm_seconds;
use super::{RequestError, MAX_TIME_LIMIT_MIN};

/// The range of Unix times bursar sends for `--begin` and `--deadline`: from the least Slurm's
/// `uts` form takes (1970-01-12) to the end of the year 9999 (far below Slurm's reserved
/// `NO_VAL64`, within what every clock library reads).
const MIN_UNIX_TIME: i64 = 1_000_000;
const MAX_UNIX_TIME: i64 = 253_402_300_799;

/// The options, each unset unless asked for (JSON: the `slurm` object of a job request).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    /// `--signal=[{R|B}:]SIG[@SECONDS]`: a signal sent that many seconds before the time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<WarnSignal>,
    /// `--requeue` (`true`) or `--no-requeue` (`false`); unset: the cluster's `JobRequeue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue: Option<bool>,
    /// `--open-mode`: how the output and error files are opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_mode: Option<OpenMode>,
    /// `--nice[=N]` (100 without a value, as in sbatch): the job's scheduling priority lowered
    /// by N (raised for a negative N, which only Slurm administrators may ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// `--reservation`: the reservation(s) to run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    /// `--wckey`: the workload characterization key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wckey: Option<String>,
    /// `-x/--exclude`: nodes the job must not run on, as Slurm writes node lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<String>,
    /// `-i/--input`: the file the batch script reads as standard input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// `-k/--no-kill`: the job is not ended when one of its nodes fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_kill: bool,
    /// `-d/--dependency`, as Slurm writes it (`afterok:123:124`, `singleton`): job ids of one
    /// cluster, so a request with it must name that cluster alone (`-M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// `--kill-on-invalid-dep=yes|no`: whether a job whose dependency can never be met ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_on_invalid_dep: Option<bool>,
    /// `--begin`: the job waits until this Unix time (JSON: seconds, or RFC 3339 text on the
    /// way in). `bursar submit` reads sbatch's forms in the user's time zone
    /// ([`super::when`]).
    #[serde(
        default,
        deserialize_with = "unix_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub begin: Option<i64>,
    /// `--deadline`: Slurm ends the job, unstarted, when it can no longer end by this Unix time
    /// (state DEADLINE); as `begin`.
    #[serde(
        default,
        deserialize_with = "unix_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub deadline: Option<i64>,
    /// `--time-min`: the shortest time limit, in minutes, Slurm may cut the job's to so that it
    /// starts sooner (backfill). The job is still priced and held at its full limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_min: Option<u64>,
    /// `--tmp`: temporary disk space each node must have, in megabytes (node selection only:
    /// Slurm does not allocate or charge it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_mb: Option<u64>,
    /// `--prefer`: node features preferred but not required, as `-C` writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// `-w/--nodelist`: nodes the job must run on, as Slurm writes host lists (`n[1-3]`). The
    /// job gets at least that many nodes ([`super::hostlist`]), and is priced so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    /// `-s/--oversubscribe`: the job may share its CPUs with other jobs where the partition
    /// lets it (`OverSubscribe=YES`). Slurm allocates and charges it the same; not with
    /// `--exclusive`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oversubscribe: bool,
    /// `--exclusive=user|mcs|topo`: the job's nodes shared only with the same user's jobs, or
    /// only with jobs of the same MCS label, or its topology segment with no other job (Slurm
    /// 24.05 and later, OpenAPI v0.0.41 and later). Slurm allocates and charges the job what it
    /// asks, as without it, so it is priced so; not with `exclusive` (whole nodes) or
    /// `oversubscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<ExclusiveMode>,
    /// `--wait-all-nodes=0|1`: the batch script starts once every node of the job is ready
    /// (`true`) or as soon as its first is (`false`, unless Slurm powers up or reboots the
    /// job's nodes: it then waits for all); unset, the cluster's default
    /// (`SchedulerParameters=sbatch_wait_nodes`). Timing only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_all_nodes: Option<bool>,
    /// `--use-min-nodes`: of a node range, Slurm prefers the fewest nodes. bursar prices and
    /// sends a range's minimum, so the job's node count is already that.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_min_nodes: bool,
    /// `--spread-job`: Slurm picks the job's nodes to spread it (and ignores `--switches` on a
    /// tree topology). Without a node count Slurm would take up to a node per task, as many as
    /// are free, which cannot be priced before the job starts, so a request with it gives
    /// `nodes` (`-N`) or `nodelist` (`-w`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spread_job: bool,
    /// `--delay-boot=TIME`: how long after the job may start Slurm waits before rebooting
    /// nodes to give them the features it asks for (`-C`); the `--time` forms, a bare number
    /// minutes ([`parse_delay_boot`]). Unset: the cluster's `delay_boot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_boot: Option<String>,
    /// `--mcs-label=LABEL`: the job's MCS label, which `--exclusive=mcs` and the cluster's
    /// `MCSParameters` share nodes by; the cluster's `MCSPlugin` decides which labels a user
    /// may give (it refuses others when the job is submitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcs_label: Option<String>,
    /// `--contiguous`: the job's nodes must be contiguous (node choice only). OpenAPI v0.0.40
    /// and later (v0.0.38's slurmrestd disables the key).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub contiguous: bool,
    /// `--extra=TEXT`: a text kept with the job, which Slurm filters nodes by where the
    /// cluster sets `SchedulerParameters=extra_constraints` (there it must be a constraint
    /// Slurm reads, or the job is refused when submitted). OpenAPI v0.0.40 and later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
    /// `--priority=N|TOP`: the job's priority, from 1 to [`TOP_PRIORITY`] (JSON: a number or
    /// `"TOP"`). slurmctld takes it from Slurm operators and administrators; for other users
    /// it ignores it, as it does for sbatch. Not sent with `--hold`, which wins, as in sbatch.
    #[serde(
        default,
        deserialize_with = "priority",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<u32>,
    /// `--gres-flags`: whether the job's CPUs must be those bound to its GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres_flags: Option<GresFlags>,
    /// `--acctg-freq`: how often the job's usage is sampled, as sbatch takes it (`30`,
    /// `task=30,energy=60`; [`check_acctg_freq`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acctg_freq: Option<String>,
    /// `-m/--distribution`: how the job's tasks are laid out over nodes, sockets and cores
    /// (`block:cyclic`, `plane=4`; [`parse_distribution`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// `--mem-bind`: how the job's steps bind memory (`local`, `map_mem:0,1`;
    /// [`parse_mem_bind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_bind: Option<String>,
    /// `--gpu-bind`: how the job's steps bind tasks to GPUs (`closest`, `single:1`;
    /// [`parse_gpu_bind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_bind: Option<String>,
    /// `--gpu-freq`: the clocks of the job's GPUs while its steps run (`medium`,
    /// `1410,memory=high,verbose`; [`check_gpu_freq`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_freq: Option<String>,
    /// `--cpu-freq`: the CPUs' frequency or governor for the job's steps (`2400000`, `high`,
    /// `Performance`, `1800000-2400000:OnDemand`; [`cpu_freq_request`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_freq: Option<String>,
    /// `--profile`: what the job's steps record for the cluster's profiling plugin (`task`,
    /// `energy,task`, `all`, `none`; [`parse_profile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// `--switches=COUNT[@MAX_TIME]`: at most COUNT leaf switches, waiting at most MAX_TIME
    /// for them (`2@10:00`; [`parse_switches`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches: Option<String>,
    /// `--container`: the OCI bundle the job runs in, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// `--container-id`: the container's id (Slurm 23.02 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
}

/// `--exclusive=MODE` for a mode that keeps the job's nodes from some jobs only (plain
/// `--exclusive`, whole nodes, is the request's own `exclusive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExclusiveMode {
    /// Nodes shared only with the same user's jobs.
    User,
    /// Nodes shared only with jobs of the same MCS label (the cluster's `MCSPlugin`).
    Mcs,
    /// The job's topology segment shared with no other job (Slurm 24.05 and later).
    Topo,
}

impl ExclusiveMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ExclusiveMode::User => "user",
            ExclusiveMode::Mcs => "mcs",
            ExclusiveMode::Topo => "topo",
        }
    }

    /// The option as a user writes it.
    pub fn option(self) -> &'static str {
        match self {
            ExclusiveMode::User => "--exclusive=user",
            ExclusiveMode::Mcs => "--exclusive=mcs",
            ExclusiveMode::Topo => "--exclusive=topo",
        }
    }
}

/// `--gres-flags`: the GRES binding sbatch takes on every version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GresFlags {
    /// The job's CPUs are those bound to its GPUs (`GresEnforceBind=Yes`).
    EnforceBinding,
    /// Any CPUs, whatever the GPUs' binding (the cluster may enforce it by default).
    DisableBinding,
}

impl GresFlags {
    /// As sbatch reads it, any case. 23.11.2 and later also take `one-task-per-sharing` and
    /// `multiple-tasks-per-sharing` (in a list), which not every slurmrestd version can send.
    pub fn parse(text: &str) -> Result<GresFlags, String> {
        match text.to_ascii_lowercase().as_str() {
            "enforce-binding" => Ok(GresFlags::EnforceBinding),
            "disable-binding" => Ok(GresFlags::DisableBinding),
            lower if lower.contains("sharing") => Err(
                "bursar takes enforce-binding or disable-binding; the sharing flags of Slurm \
                 23.11 and later cannot be sent to every version (and allow-task-sharing is \
                 srun's)"
                    .into(),
            ),
            _ => Err("use enforce-binding or disable-binding".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GresFlags::EnforceBinding => "enforce-binding",
            GresFlags::DisableBinding => "disable-binding",
        }
    }
}

/// `--acctg-freq` as sbatch's `validate_acctg_freq` checks it, stricter: comma-separated
/// entries, each seconds (the task sampling interval) or `task=`, `energy=`, `network=`,
/// `filesystem=` seconds (names in any case). Slurm finds the names anywhere in an entry
/// (`xtask=5` is task's 5); bursar refuses what is not exactly one of them.
pub fn check_acctg_freq(text: &str) -> Result<(), String> {
    let seconds = |digits: &str| {
        !digits.is_empty() && digits.len() <= 9 && digits.bytes().all(|b| b.is_ascii_digit())
    };
    for entry in text.split(',') {
        let zero = |digits: &str| !digits.is_empty() && digits.bytes().all(|b| b == b'0');
        let task_zero = match entry.split_once('=') {
            None => zero(entry),
            Some((kind, value)) => kind.eq_ignore_ascii_case("task") && zero(value),
        };
        if task_zero {
            return Err(format!(
                "{entry:?}: slurmctld refuses a task interval of 0 for a job with a memory \
                 limit (every job with memory asked or defaulted)"
            ));
        }
        let ok = match entry.split_once('=') {
            None => seconds(entry),
            Some((kind, value)) => {
                ["task", "energy", "network", "filesystem"]
                    .iter()
                    .any(|k| kind.eq_ignore_ascii_case(k))
                    && seconds(value)
            }
        };
        if !ok {
            return Err(format!(
                "{entry:?} is not an interval: use seconds, or task=, energy=, network=, \
                 filesystem= seconds, comma-separated"
            ));
        }
    }
    Ok(())
}

/// `--gpu-freq` as Slurm's `tres_freq_verify_cmdline` checks it (the same from 22.05 to
/// 25.11): comma-separated entries, each a frequency (MHz, or `low`, `medium`, `high`,
/// `highm1`, in lower case), `memory=` one, or `verbose`. Empty entries are refused too.
pub fn check_gpu_freq(text: &str) -> Result<(), String> {
    let value = |v: &str| {
        (!v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit()))
            || matches!(v, "low" | "medium" | "high" | "highm1")
    };
    // slurmctld keeps at most 1024 characters of `gpu:FREQ`.
    if text.len() > 1020 {
        return Err("longer than the 1020 characters Slurm keeps".into());
    }
    for entry in text.split(',') {
        if entry.is_empty() {
            return Err("an empty entry (a stray comma)".into());
        }
        let ok = match entry.split_once('=') {
            None => value(entry) || entry == "verbose",
            Some((kind, v)) => kind == "memory" && value(v),
        };
        if !ok {
            return Err(format!(
                "{entry:?} is not a GPU frequency: use MHz or low, medium, high, highm1 (lower \
                 case), memory= one of those, or verbose, comma-separated"
            ));
        }
    }
    Ok(())
}

/// The `--cpu-freq` forms every Slurm release from 22.05 reads alike (23.11 changed what a
/// range without a governor and a frequency with one mean), in the text Slurm writes them
/// (`cpu_freq_to_cmdline`: the job's `SLURM_CPU_FREQ_REQ`, and what bursar sends):
/// - a frequency in kHz (`2400000`), or `low`, `medium`, `high`, `highm1`;
/// - a governor: `Conservative`, `OnDemand`, `Performance`, `PowerSave`, `UserSpace`,
///   `SchedUtil` (the cluster's `CpuFreqGovernors` decide which it takes);
/// - `MIN-MAX:GOVERNOR` in kHz, `MIN` ≤ `MAX`, with a governor other than `UserSpace`.
///
/// Words in any case. A range without a governor (22.05 takes it, 23.11 only with a
/// `CpuFreqDef`) and a frequency with one (23.11 only) are refused.
pub fn cpu_freq_request(text: &str) -> Result<String, String> {
    const FORMS: &str = "use kHz (2400000), low, medium, high, highm1, a governor \
                         (Conservative, OnDemand, Performance, PowerSave, UserSpace, SchedUtil) \
                         or MIN-MAX:GOVERNOR in kHz";
    let khz = |v: &str| -> Option<u32> {
        v.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| v.parse::<u32>().ok())
            .flatten()
            .filter(|n| (1..0x8000_0000).contains(n))
    };
    let level = |v: &str| match v.to_ascii_lowercase().as_str() {
        "low" => Some("Low"),
        "medium" => Some("Medium"),
        "high" => Some("High"),
        "highm1" => Some("Highm1"),
        _ => None,
    };
    let governor = |v: &str| match v.to_ascii_lowercase().as_str() {
        "conservative" => Some("Conservative"),
        "ondemand" => Some("OnDemand"),
        "performance" => Some("Performance"),
        "powersave" => Some("PowerSave"),
        "userspace" => Some("UserSpace"),
        "schedutil" => Some("SchedUtil"),
        _ => None,
    };
    if let Some((range, gov)) = text.split_once(':') {
        let (min, max) = range.split_once('-').ok_or_else(|| {
            "a governor after a frequency means one thing to Slurm 22.05 and another to 23.11; \
             give the governor alone, or MIN-MAX:GOVERNOR"
                .to_string()
        })?;
        let gov = governor(gov).ok_or_else(|| format!("{gov:?} is not a governor ({FORMS})"))?;
        if gov == "UserSpace" {
            return Err("the UserSpace governor takes one frequency, not a range".into());
        }
        return match (khz(min), khz(max)) {
            (Some(lo), Some(hi)) if lo <= hi => Ok(format!("{lo}-{hi}:{gov}")),
            (Some(_), Some(_)) => Err("the range's minimum is above its maximum".into()),
            _ => Err(format!(
                "{range:?}: a range is two frequencies in kHz ({FORMS})"
            )),
        };
    }
    if text.contains('-') {
        return Err(
            "a range needs a governor (MIN-MAX:GOVERNOR): Slurm 23.11 and later refuse one \
             without, unless the cluster sets a default"
                .into(),
        );
    }
    khz(text)
        .map(|n| n.to_string())
        .or_else(|| level(text).or_else(|| governor(text)).map(str::to_string))
        .ok_or_else(|| format!("{text:?} is not a CPU frequency ({FORMS})"))
}

/// `--profile`: what the job's steps record (the profiling plugin's series), as Slurm's
/// `acct_gather_profile_from_string` reads it, stricter: comma-separated words in any case,
/// `none` alone, `all`, or `energy`, `task`, `lustre`, `network` (Slurm matches them anywhere
/// in the text, so that `install` is `all`: refused here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// `Energy`, `Lustre`, `Network`, `Task`, in that order (Slurm's); none of them: `None`.
    series: [bool; 4],
}

impl Profile {
    const NAMES: [&'static str; 4] = ["Energy", "Lustre", "Network", "Task"];

    /// Slurm's own text (`acct_gather_profile_to_string`): `None`, or the series joined by
    /// `,` (`all`: `Energy,Lustre,Network,Task`); the job's `SLURM_PROFILE`.
    pub fn as_slurm(&self) -> String {
        self.names().join(",")
    }

    /// The series by name (`["None"]` for none).
    pub fn names(&self) -> Vec<&'static str> {
        let names: Vec<&'static str> = Self::NAMES
            .iter()
            .zip(self.series)
            .filter_map(|(name, on)| on.then_some(*name))
            .collect();
        if names.is_empty() {
            vec!["None"]
        } else {
            names
        }
    }
}

/// See [`Profile`].
pub fn parse_profile(text: &str) -> Result<Profile, String> {
    const WORDS: &str = "use none, all, or energy, task, lustre, network, comma-separated";
    let mut series = [false; 4];
    let mut none = false;
    for word in text.split(',') {
        match word.to_ascii_lowercase().as_str() {
            "none" => none = true,
            "all" => series = [true; 4],
            "energy" => series[0] = true,
            "lustre" => series[1] = true,
            "network" => series[2] = true,
            "task" => series[3] = true,
            "" => return Err(format!("an empty entry ({WORDS})")),
            _ => return Err(format!("{word:?} is not a profile ({WORDS})")),
        }
    }
    if none && series.iter().any(|on| *on) {
        return Err("none with other profiles: Slurm records none; give one or the others".into());
    }
    Ok(Profile { series })
}

/// `--switches=COUNT[@MAX_TIME]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switches {
    /// Most leaf switches the job's nodes may hang from (at least 1).
    pub count: u32,
    /// Seconds the job may wait for them; `None`: the cluster's `max_switch_wait` (300 s by
    /// default), which also caps any wait given.
    pub wait_seconds: Option<u32>,
}

/// `--switches` as sbatch reads it (`parse_int`, then `time_str2secs`: a bare number is
/// minutes), stricter: a time that is not one of Slurm's forms is refused (sbatch drops it
/// without a word); `UNLIMITED` means the cluster's maximum wait.
pub fn parse_switches(text: &str) -> Result<Switches, String> {
    let (count, wait) = match text.split_once('@') {
        Some((count, wait)) => (count, Some(wait)),
        None => (text, None),
    };
    let count = (!count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()))
        .then(|| count.parse::<u32>().ok())
        .flatten()
        .filter(|n| (1..=0x7fff_ffff).contains(n))
        .ok_or_else(|| format!("{count:?} is not a switch count: a whole number from 1"))?;
    let wait_seconds = match wait {
        None => None,
        Some(wait) => match slurm_seconds(wait) {
            Ok(None) => None,
            Ok(Some(seconds)) => Some(
                u32::try_from(seconds)
                    .ok()
                    .filter(|s| *s < u32::MAX - 1)
                    .ok_or("the wait is longer than Slurm can count")?,
            ),
            Err(why) => return Err(format!("the wait {wait:?}: {why}")),
        },
    };
    Ok(Switches {
        count,
        wait_seconds,
    })
}

/// `--delay-boot` as sbatch reads it (`time_str2secs`: the `--time` forms, a bare number
/// minutes), in seconds; stricter: `UNLIMITED` (never reboot) is refused, since not every
/// OpenAPI version can carry it.
pub fn parse_delay_boot(text: &str) -> Result<u32, String> {
    match slurm_seconds(text)? {
        None => Err("give a time: UNLIMITED cannot be sent to every Slurm version".into()),
        Some(seconds) => u32::try_from(seconds)
            .ok()
            .filter(|s| *s < u32::MAX - 1)
            .ok_or_else(|| "longer than Slurm can count".to_string()),
    }
}

/// `--priority=TOP`: the highest priority Slurm sets (`NO_VAL - 1`), as sbatch sends it.
pub const TOP_PRIORITY: u32 = 0xffff_fffd;

/// `--priority` as sbatch reads it (`arg_set_priority`): `TOP` (any case) or a number below
/// Slurm's `NO_VAL`; stricter: digits only (sbatch reads `10x` as 10). `0` is read (sbatch
/// takes it and sends no priority).
pub fn parse_priority(text: &str) -> Result<u32, String> {
    if text.eq_ignore_ascii_case("top") {
        return Ok(TOP_PRIORITY);
    }
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n <= TOP_PRIORITY)
        .ok_or_else(|| format!("use TOP or a whole number from 0 to {TOP_PRIORITY}"))
}

/// `priority` in JSON: a number from 1 to [`TOP_PRIORITY`], or `"TOP"`.
fn priority<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
        // anything else (a negative or fractional number, an object): refused below
        Other(serde::de::IgnoredAny),
    }
    let bad = || {
        serde::de::Error::custom(format!(
            "a priority is a whole number from 1 to {TOP_PRIORITY}, or \"TOP\" (leave it out \
             for Slurm's own; hold for 0)"
        ))
    };
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Number(n)) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=TOP_PRIORITY).contains(n))
            .map(Some)
            .ok_or_else(bad),
        Some(Raw::Text(text)) if text.eq_ignore_ascii_case("top") => Ok(Some(TOP_PRIORITY)),
        Some(Raw::Text(_) | Raw::Other(_)) => Err(bad()),
    }
}

/// A Unix time in JSON: whole seconds, or RFC 3339 text (`2026-12-01T18:00:00+01:00`).
fn unix_time<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(i64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Seconds(s)) => Ok(Some(s)),
        Some(Raw::Text(text)) => chrono::DateTime::parse_from_rfc3339(&text)
            .map(|t| Some(t.timestamp()))
            .map_err(|_| {
                serde::de::Error::custom(format!(
                    "{text:?} is not a time: use Unix seconds or RFC 3339 \
                     (2026-12-01T18:00:00+01:00)"
                ))
            }),
    }
}

impl SlurmOptions {
    /// Nothing set.
    pub fn is_empty(&self) -> bool {
        self == &SlurmOptions::default()
    }

    /// The sbatch options set, as the user would write them (for messages).
    pub fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let mut note = |set: bool, option: &'static str| {
            if set {
                given.push(option);
            }
        };
        note(self.signal.is_some(), "--signal");
        note(self.requeue == Some(true), "--requeue");
        note(self.requeue == Some(false), "--no-requeue");
        note(self.open_mode.is_some(), "--open-mode");
        note(self.nice.is_some(), "--nice");
        note(self.reservation.is_some(), "--reservation");
        note(self.wckey.is_some(), "--wckey");
        note(self.exclude.is_some(), "--exclude");
        note(self.input.is_some(), "--input");
        note(self.no_kill, "--no-kill");
        note(self.dependency.is_some(), "--dependency");
        note(self.kill_on_invalid_dep.is_some(), "--kill-on-invalid-dep");
        note(self.begin.is_some(), "--begin");
        note(self.deadline.is_some(), "--deadline");
        note(self.time_min.is_some(), "--time-min");
        note(self.tmp_mb.is_some(), "--tmp");
        note(self.prefer.is_some(), "--prefer");
        note(self.nodelist.is_some(), "--nodelist");
        note(self.oversubscribe, "--oversubscribe");
        note(self.gres_flags.is_some(), "--gres-flags");
        note(self.acctg_freq.is_some(), "--acctg-freq");
        note(self.distribution.is_some(), "--distribution");
        note(self.mem_bind.is_some(), "--mem-bind");
        note(self.gpu_bind.is_some(), "--gpu-bind");
        note(self.gpu_freq.is_some(), "--gpu-freq");
        note(self.cpu_freq.is_some(), "--cpu-freq");
        note(self.profile.is_some(), "--profile");
        note(self.switches.is_some(), "--switches");
        note(self.container.is_some(), "--container");
        note(self.container_id.is_some(), "--container-id");
        note(self.wait_all_nodes.is_some(), "--wait-all-nodes");
        note(self.use_min_nodes, "--use-min-nodes");
        note(self.spread_job, "--spread-job");
        note(self.delay_boot.is_some(), "--delay-boot");
        note(self.mcs_label.is_some(), "--mcs-label");
        note(self.contiguous, "--contiguous");
        note(self.extra.is_some(), "--extra");
        note(self.priority.is_some(), "--priority");
        given.extend(self.exclusive.map(ExclusiveMode::option));
        given
    }

    /// Text values: not empty, one line (the request's own check); `nice` within Slurm's range.
    pub(crate) fn validate(&self) -> Result<(), RequestError> {
        for (option, value, max) in [
            ("--reservation", &self.reservation, super::SLURM_TEXT_MAX),
            ("--wckey", &self.wckey, super::SLURM_TEXT_MAX),
            ("--exclude", &self.exclude, usize::MAX),
            ("--input", &self.input, super::SLURM_PATH_MAX),
            ("--dependency", &self.dependency, 128 * 1024),
            ("--prefer", &self.prefer, super::SLURM_TEXT_MAX),
            ("--nodelist", &self.nodelist, usize::MAX),
            ("--container", &self.container, usize::MAX),
            ("--container-id", &self.container_id, usize::MAX),
            ("--mcs-label", &self.mcs_label, super::SLURM_TEXT_MAX),
            ("--extra", &self.extra, super::SLURM_TEXT_MAX),
        ] {
            if let Some(value) = value {
                super::check_text_within(option, value, max)?;
            }
        }
        if let Some(nice) = self.nice {
            check_nice(i64::from(nice)).map_err(RequestError::Invalid)?;
        }
        // Each text option as its parser reads it.
        type Check = fn(&str) -> Result<(), String>;
        let checks: [(&str, &Option<String>, Check); 9] = [
            ("--delay-boot", &self.delay_boot, |t| {
                parse_delay_boot(t).map(drop)
            }),
            ("--acctg-freq", &self.acctg_freq, check_acctg_freq),
            ("--distribution", &self.distribution, |t| {
                parse_distribution(t).map(drop)
            }),
            ("--mem-bind", &self.mem_bind, |t| {
                parse_mem_bind(t).map(drop)
            }),
            ("--gpu-bind", &self.gpu_bind, |t| {
                parse_gpu_bind(t).map(drop)
            }),
            ("--gpu-freq", &self.gpu_freq, check_gpu_freq),
            ("--cpu-freq", &self.cpu_freq, |t| {
                cpu_freq_request(t).map(drop)
            }),
            ("--profile", &self.profile, |t| parse_profile(t).map(drop)),
            ("--switches", &self.switches, |t| {
                parse_switches(t).map(drop)
            }),
        ];
        for (option, value, check) in checks {
            if let Some(text) = value {
                check(text).map_err(|why| RequestError::invalid_value(option, text, why))?;
            }
        }
        // slurmctld keeps it in 32 bits, the top two values reserved.
        if self.tmp_mb.is_some_and(|mb| mb >= u64::from(u32::MAX - 1)) {
            return Err(RequestError::Invalid(
                "--tmp is more disk than Slurm can count (4 PB)".into(),
            ));
        }
        if let Some(minutes) = self.time_min {
            if !(1..=MAX_TIME_LIMIT_MIN).contains(&minutes) {
                return Err(RequestError::Invalid(format!(
                    "--time-min must be 1 to {MAX_TIME_LIMIT_MIN} minutes, not {minutes}"
                )));
            }
        }
        for (option, time) in [("--begin", self.begin), ("--deadline", self.deadline)] {
            // Slurm keeps times as 64-bit seconds and reserves the top values.
            if time.is_some_and(|t| !(MIN_UNIX_TIME..=MAX_UNIX_TIME).contains(&t)) {
                return Err(RequestError::Invalid(format!(
                    "{option} is not a time Slurm takes (Unix seconds from {MIN_UNIX_TIME} to \
                     {MAX_UNIX_TIME})"
                )));
            }
        }
        if let (Some(begin), Some(deadline)) = (self.begin, self.deadline) {
            if deadline <= begin {
                return Err(RequestError::Invalid(format!(
                    "--deadline ({}) is not after --begin ({}): the job could never start",
                    crate::timefmt::format_instant(deadline),
                    crate::timefmt::format_instant(begin)
                )));
            }
        }
        Ok(())
    }
}

/// The bound on `--nice` every path takes: sbatch allows `NICE_OFFSET - 3` either way,
/// slurmrestd's v0.0.38 one less.
const NICE_LIMIT: i64 = 2_147_483_644;

fn check_nice(nice: i64) -> Result<i32, String> {
    if nice.abs() > NICE_LIMIT {
        return Err(format!(
            "--nice={nice} is out of range (at most {NICE_LIMIT} either way)"
        ));
    }
    i32::try_from(nice).map_err(|_| format!("--nice={nice} is out of range"))
}

/// `--nice`'s value: a whole number, signed; none means 100 and an empty one 0, as in sbatch.
pub(crate) fn parse_nice(value: Option<&str>) -> Result<i32, String> {
    let Some(text) = value else {
        return Ok(100);
    };
    if text.is_empty() {
        return Ok(0);
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a whole number".into());
    }
    let nice: i64 = text
        .parse()
        .map_err(|_| format!("{text} is out of range (at most {NICE_LIMIT} either way)"))?;
    check_nice(nice)
}

/// `--open-mode`: output and error files appended to or truncated first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenMode {
    Append,
    Truncate,
}

impl OpenMode {
    /// As sbatch reads it: a word starting with `a` (append) or `t` (truncate), any case.
    pub fn parse(text: &str) -> Result<OpenMode, String> {
        match text.bytes().next().map(|b| b.to_ascii_lowercase()) {
            Some(b'a') => Ok(OpenMode::Append),
            Some(b't') => Ok(OpenMode::Truncate),
            _ => Err("use append or truncate".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OpenMode::Append => "append",
            OpenMode::Truncate => "truncate",
        }
    }
}

/// The signal names Slurm knows (`sig_name2num`), each with its Linux number.
const SIGNALS: [(&str, u16); 18] = [
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
];

/// `--signal=[{R|B}:]SIG[@SECONDS]`: send `signal` `seconds` before the job's time limit (60
/// by default), only to the batch shell (`B`), and also when its reservation ends (`R`).
///
/// JSON: the sbatch form, `"B:USR1@90"`; it is written back as `B:USR1@90` (flags, a colon when
/// there are any, the signal's name or number, the seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarnSignal {
    /// The name without `SIG` (`USR1`), or a number for a signal Slurm has no name for.
    pub signal: String,
    pub seconds: u16,
    pub batch_only: bool,
    pub reservation: bool,
}

impl WarnSignal {
    /// Reads sbatch's form: optional flags `R` and `B` (either order, any case) and a colon,
    /// a signal by name (`USR1`, `SIGUSR1`, any case) or number (1–64), and optionally `@`
    /// and the seconds (0–65535; none, as in `USR1@`, is 0, as in sbatch).
    pub fn parse(text: &str) -> Result<WarnSignal, String> {
        let (flags, rest) = match text.split_once(':') {
            Some((flags, rest)) => (flags, rest),
            None => ("", text),
        };
        let mut batch_only = false;
        let mut reservation = false;
        for flag in flags.chars() {
            let seen = match flag.to_ascii_uppercase() {
                'B' => std::mem::replace(&mut batch_only, true),
                'R' => std::mem::replace(&mut reservation, true),
                _ => return Err(format!("{flags:?} is not B, R or both before the colon")),
            };
            if seen {
                return Err(format!("{flag} is given twice before the colon"));
            }
        }
        let (name, seconds) = match rest.split_once('@') {
            Some((name, "")) => (name, 0),
            Some((name, seconds)) => {
                if !seconds.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("{seconds:?} is not a number of seconds"));
                }
                let seconds: u16 = seconds
                    .parse()
                    .map_err(|_| format!("{seconds} seconds is more than 65535"))?;
                (name, seconds)
            }
            None => (rest, 60),
        };
        Ok(WarnSignal {
            signal: signal_name(name)?,
            seconds,
            batch_only,
            reservation,
        })
    }

    /// The signal's number (Linux).
    pub fn number(&self) -> u16 {
        SIGNALS
            .iter()
            .find(|(name, _)| *name == self.signal)
            .map(|(_, n)| *n)
            .or_else(|| self.signal.parse().ok())
            .unwrap_or(0)
    }
}

/// A signal as Slurm names it: `USR1` for `usr1`, `SIGUSR1` or `10`; a number it has no name
/// for stays a number.
fn signal_name(text: &str) -> Result<String, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let number: u16 = text
            .parse()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| format!("signal {text} is not between 1 and 64"))?;
        return Ok(SIGNALS
            .iter()
            .find(|(_, n)| *n == number)
            .map_or_else(|| number.to_string(), |(name, _)| name.to_string()));
    }
    let upper = text.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS
        .iter()
        .find(|(name, _)| *name == bare)
        .map(|(name, _)| name.to_string())
        .ok_or_else(|| {
            format!(
                "{text:?} is not a signal Slurm knows: use a number or one of {}",
                SIGNALS.map(|(name, _)| name).join(", ")
            )
        })
}

impl fmt::Display for WarnSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reservation {
            f.write_str("R")?;
        }
        if self.batch_only {
            f.write_str("B")?;
        }
        if self.reservation || self.batch_only {
            f.write_str(":")?;
        }
        write!(f, "{}@{}", self.signal, self.seconds)
    }
}

impl Serialize for WarnSignal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WarnSignal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        WarnSignal::parse(&text)
            .map_err(|why| serde::de::Error::custom(format!("signal {text:?}: {why}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(text: &str) -> WarnSignal {
        WarnSignal::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn signals_read_as_sbatch_reads_them() {
        let s = signal("B:USR1@90");
        assert_eq!(
            (s.signal.as_str(), s.seconds, s.batch_only, s.reservation),
            ("USR1", 90, true, false)
        );
        assert_eq!(s.number(), 10);
        assert_eq!(signal("sigterm").to_string(), "TERM@60");
        assert_eq!(signal("10@0").to_string(), "USR1@0");
        assert_eq!(signal("rb:2@5").to_string(), "RB:INT@5");
        assert_eq!(signal("R:HUP").to_string(), "R:HUP@60");
        assert_eq!(
            signal(":HUP").to_string(),
            "HUP@60",
            "sbatch skips a lone colon"
        );
        assert_eq!(
            signal("USR1@").to_string(),
            "USR1@0",
            "sbatch reads no seconds as 0"
        );
        assert_eq!(signal("13").number(), 13);
        assert_eq!(signal("chld").number(), 17);
        assert_eq!(signal("35@10").to_string(), "35@10");
        assert_eq!(signal("35@10").number(), 35);
        for bad in [
            "",
            "USR3",
            "B:",
            "X:USR1",
            "BB:USR1",
            "USR1@x",
            "USR1@-1",
            "USR1@65536",
            "0",
            "65",
            "USR1@1s",
        ] {
            assert!(WarnSignal::parse(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn a_signal_round_trips_through_its_text() {
        for text in ["B:USR1@90", "TERM@60", "RB:35@0", "R:XCPU@65535"] {
            let s = signal(text);
            assert_eq!(s.to_string(), text);
            assert_eq!(signal(&s.to_string()), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<WarnSignal>(&json).unwrap(), s);
        }
        assert!(serde_json::from_str::<WarnSignal>("\"USR9\"").is_err());
    }

    #[test]
    fn nice_and_open_mode_follow_sbatch() {
        assert_eq!(parse_nice(None), Ok(100));
        assert_eq!(parse_nice(Some("-5")), Ok(-5));
        assert_eq!(parse_nice(Some("+7")), Ok(7));
        assert_eq!(parse_nice(Some("2147483644")), Ok(2_147_483_644));
        assert_eq!(parse_nice(Some("")), Ok(0), "sbatch's strtoll of nothing");
        for bad in [
            "x",
            "1.5",
            "2147483645",
            "-2147483645",
            "99999999999999999999",
        ] {
            assert!(parse_nice(Some(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(OpenMode::parse("APPEND"), Ok(OpenMode::Append));
        assert_eq!(OpenMode::parse("t"), Ok(OpenMode::Truncate));
        assert!(OpenMode::parse("x").is_err());
        assert!(OpenMode::parse("").is_err());
    }

    #[test]
    fn options_say_which_are_given_and_check_their_text() {
        let options = SlurmOptions {
            requeue: Some(false),
            no_kill: true,
            exclude: Some("n[1-2]".into()),
            ..SlurmOptions::default()
        };
        assert_eq!(options.given(), ["--no-requeue", "--exclude", "--no-kill"]);
        assert!(options.validate().is_ok());
        assert!(SlurmOptions::default().is_empty());
        let bad = SlurmOptions {
            wckey: Some("a\nb".into()),
            ..SlurmOptions::default()
        };
        assert!(bad.validate().is_err());
        let json: SlurmOptions =
            serde_json::from_str(r#"{"signal": "B:USR1@90", "open_mode": "append"}"#).unwrap();
        assert_eq!(json.open_mode, Some(OpenMode::Append));
        assert_eq!(
            serde_json::to_value(&json).unwrap(),
            serde_json::json!({"signal": "B:USR1@90", "open_mode": "append"})
        );
        assert!(serde_json::from_str::<SlurmOptions>(r#"{"begin": "now"}"#).is_err());
    }
}
