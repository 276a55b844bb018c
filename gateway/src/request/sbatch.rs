//! sbatch-compatible options and `#SBATCH` lines → [`JobRequest`].
//!
//! ## Syntax (as sbatch's `getopt_long`)
//! `--opt=value`, `--opt value`, `-Xvalue`, `-X value`; flags group (`-Qv`). A value that
//! starts with `-` is still a value when the option needs one (`-J -x` names the job `-x`).
//! Long options must be spelled in full: sbatch accepts unambiguous abbreviations, but bursar
//! knows only part of sbatch's option table and could resolve an abbreviation sbatch finds
//! ambiguous, so `--accou` is refused with a "did you mean --account" hint.
//!
//! ## Options
//!
//! | option | becomes |
//! |---|---|
//! | `-A/--account`, `-p/--partition`, `-q/--qos` | the names |
//! | `-M/--clusters`, `--cluster` | allowed clusters, comma-separated; `all` = any cluster |
//! | `-N/--nodes=N` or `N-M` | nodes; a range is narrowed to its minimum, or with `-n` and `--ntasks-per-node` to the fewest of it that hold the tasks (priced and forwarded so, with a note) |
//! | `-n/--ntasks` | tasks; without it, one task per node (or `--ntasks-per-node` per node), as sbatch; fewer tasks than nodes shrinks the nodes to the tasks, as sbatch does (with a note) |
//! | `--ntasks-per-node` | forwarded; sets the tasks when `-n` is absent |
//! | `-c/--cpus-per-task` | CPUs per task |
//! | `--mem=SIZE` / `--mem-per-cpu=SIZE` / `--mem-per-gpu=SIZE` | memory per node / per CPU / per GPU; SIZE is `4000`, `4000M`, `4G`, `1T`, `512K` (default MB; `4GB` accepted as sbatch does); mutually exclusive |
//! | `--gres=LIST` | `gpu`, `gpu:N`, `gpu:TYPE`, `gpu:TYPE:N` entries → GPUs per node; other GRES (`shard:1`) are kept in `other_gres`, forwarded and not priced (with a note); `none` clears |
//! | `-G/--gpus=[TYPE:]N` | GPUs for the whole job |
//! | `--gpus-per-node=[TYPE:]N` | GPUs per node |
//! | `--gpus-per-task=[TYPE:]N` | GPUs per task (× `ntasks` in the estimate); needs `-n` or `-N`, as sbatch refuses it without (`-w` alone too) |
//! | `--tres-per-task=LIST` | sbatch's other spelling of `-c` (`cpu=N`) and `--gpus-per-task` (`gres/gpu[:TYPE]=N`), 23.02's and 23.11's forms too ([`parse_tres_per_task`]), applied into them as sbatch applies it ([`tres_per_task`]); other entries refused. Also from `SBATCH_TRES_PER_TASK` |
//! | `--mincpus=N` | at least N CPUs on each node: priced for `nodes × N` CPUs when that is more, as slurmctld up to 24.11.0 allocates them (from 24.11.1 it only picks nodes by it: [`PartitionDefaults::min_cpus_only_select`]), and pinned to its node count (on more nodes Slurm would allocate more) |
//! | `--hint=HINT`, `--threads-per-core=N`, `--ntasks-per-core=N` | [`Hint`] and the counts: how the job uses each core's threads, read as sbatch reads them (`nomultithread`, `compute_bound` and `memory_bound` are one thread per core, `multithread` any number of tasks per core; `--hint` with either count is refused, a variable's giving way to an option as in sbatch; `-N N` without `-n` runs a task per thread). Priced for the whole cores Slurm allocates where the partition declares its threads per core ([`super::cores`]), and a Slurm cluster is eligible for them only there; forwarded as `threads_per_core` and `tasks_per_core` |
//! | `--cpus-per-gpu=N` | CPUs per GPU: the job's CPUs are N × its GPUs when that is more than its tasks' (not with `-c`, as in sbatch) |
//! | `-t/--time` | [`TimeLimit`] (all Slurm formats); `UNLIMITED`/`INFINITE`/`0` is [`JobRequest::time_unlimited`]: priced and run at the partition's maximum, refused where there is none |
//! | `-J/--job-name`, `-o/--output`, `-e/--error`, `-D/--chdir` | as given |
//! | `--wrap=CMD` | the command instead of a script (command line only, as in sbatch) |
//! | `--export`, `--comment`, `-C/--constraint`, `--mail-type`, `--mail-user` | recorded as given and forwarded; not priced (`--mail-type` is checked against sbatch's words) |
//! | `--exclusive` | whole nodes, priced for every CPU and GPU of each ([`JobRequest::whole_nodes`]); a Slurm cluster is eligible for it where the partition declares its node size, a dstack cluster never |
//! | `--exclusive=user\|mcs\|topo` | [`SlurmOptions::exclusive`]: the job's nodes shared only with the user's own jobs, or with jobs of its MCS label, or its topology segment with no other job; Slurm allocates and charges what the job asks, so it is priced as without it (with a note). Forwarded to Slurm clusters; `topo` needs OpenAPI v0.0.41 or later (Slurm 24.05), so a cluster submitting at v0.0.38 or v0.0.40 is not eligible for it, naming why. `--exclusive=exclusive` (and 26.05's `--exclusive=allocation`) is `--exclusive`, `--exclusive=oversubscribe` is `-s`, as in sbatch. Slurm enforces `mcs` only with an `MCSPlugin` and `topo` only with `TopologyPlugin=topology/block`; elsewhere the job runs as without them |
//! | `--signal`, `--requeue`/`--no-requeue`, `--open-mode`, `--nice[=N]`, `--reservation`, `--wckey`, `-x/--exclude`, `-i/--input`, `-k/--no-kill[=off]`, `-d/--dependency` (with one cluster named by `-M`: job ids belong to one cluster), `--kill-on-invalid-dep` | [`SlurmOptions`]: checked as sbatch checks them, forwarded to a Slurm cluster, not priced; a dstack cluster is not eligible for a job with any of them |
//! | `-b/--begin=TIME`, `--deadline=TIME` | [`Moment`]: the forms of Slurm's `parse_time` (`now+1hour`, `18:00`, `tomorrow`, `2026-12-01T09:00`, `12/01`, `teatime`, `uts1796144400`), read on the submitting machine's clock and zone as sbatch reads them ([`parse_sbatch_command_at`]; where bursar reads one differently: [`super::when`]); the request carries Unix seconds ([`SlurmOptions::begin`]). The hold's lifetime counts from the begin (at most `holds.max_begin_ahead` ahead); a deadline that has passed, comes before the begin, or leaves less than `--time-min` is refused before anything is held |
//! | `--time-min=TIME` | the `--time` formats; the shortest limit Slurm may cut the job's to (backfill). Priced and held at the full limit; longer than the limit (given, or the partition's default) is refused, as slurmctld refuses it; `0`/`UNLIMITED` too (slurmctld reads them as no limit, above any) |
//! | `-w/--nodelist=NODES` | [`SlurmOptions::nodelist`]: a Slurm host list ([`super::hostlist`]); the job runs on the nodes it names (one task per node without `-n`; a `-N` minimum below their count raised to it, a maximum below it refused: Slurm 22.05 refuses it and later versions pick some of the names), and is priced and pinned for them; a file of names is refused (sbatch reads it on the login node), and `-n` below the count keeps that many names, the first in Slurm's order, as sbatch 22.05 keeps them (with a note; later sbatch leaves Slurm to pick among them, so bursar's pick is one Slurm could make). Node names belong to one cluster |
//! | `--tmp=SIZE`, `--prefer=FEATURES` | [`SlurmOptions::tmp_mb`] (SIZE as `--mem`'s) and [`SlurmOptions::prefer`]: where the job may run, not what it is given; forwarded, not priced |
//! | `-s/--oversubscribe`, `--gres-flags=enforce-binding\|disable-binding`, `--acctg-freq=LIST` | [`SlurmOptions`]: where and how the job shares and samples, not what it is allocated; checked as sbatch checks them (the acctg-freq entries stricter), forwarded, not priced. Of `--exclusive[=MODE]` and `--oversubscribe` (one setting in Slurm) the later in one place wins, and the command line's over the environment's (`SBATCH_EXCLUSIVE`) over the script's, as in sbatch |
//! | `--wait-all-nodes=0\|1`, `--use-min-nodes`, `--spread-job` | [`SlurmOptions`]: when the script starts (once every node is ready, or the first unless Slurm powers nodes up or reboots them for the job), which of a node range Slurm prefers (bursar already prices and sends a range's minimum), and which nodes Slurm picks to spread the job (ignoring `--switches` on a tree topology); forwarded, not priced. `--spread-job` needs `-N` or `-w` (without, Slurm takes up to a node per task, as many as are free, which cannot be priced); an even spread is what bursar prices a job of several nodes for. Also from `SBATCH_WAIT_ALL_NODES`, `SBATCH_USE_MIN_NODES`, `SBATCH_SPREAD_JOB` |
//! | `--delay-boot=TIME`, `--mcs-label=LABEL` | [`SlurmOptions`]: how long Slurm waits before rebooting nodes for the job's features (the `--time` forms, [`super::parse_delay_boot`]; `UNLIMITED` refused), the job's MCS label (which `--exclusive=mcs` shares nodes by; the cluster's `MCSPlugin` refuses labels the user may not give when the job is submitted); forwarded, not priced. `--delay-boot` also from `SBATCH_DELAY_BOOT` |
//! | `--contiguous`, `--extra=TEXT`, `--priority=N\|TOP` | [`SlurmOptions`]: the job's nodes contiguous (node choice only); a text that Slurm filters nodes by where the cluster sets `SchedulerParameters=extra_constraints` (else kept with the job); the job's priority ([`super::parse_priority`]; `TOP` the highest), which slurmctld takes from Slurm operators and administrators and, as for sbatch, ignores from others (`0` asks nothing, and `--hold` wins, as in sbatch); forwarded, not priced. `--contiguous` and `--extra` cannot reach a cluster at OpenAPI v0.0.38 (its slurmrestd disables the one and has no key for the other): such a cluster is not eligible, saying why |
//! | `-m/--distribution=LAYOUT`, `--mem-bind=BINDING`, `--gpu-bind=BINDING` | [`SlurmOptions`]: how tasks are laid out and bound, read as sbatch reads them ([`super::layout`]; `arbitrary` and a plane without its size refused); the job gets the variables sbatch sets for its steps (`SLURM_DISTRIBUTION`, `SLURM_MEM_BIND`, `SLURM_GPU_BIND`/`SLURM_TRES_BIND`), and slurmctld the layout (OpenAPI v0.0.41 and later) and GPU binding. Not priced; on nodes of several threads per core, a plane layout over several nodes can take more whole cores, so such a partition is eligible for it on one node, or with `--ntasks-per-node` and no GRES; with GRES the job needs a node per plane of tasks (Slurm 24.05 and later). `--mem-bind` given again keeps the earlier flags, as in sbatch |
//! | `--gpu-freq=FREQ` | [`SlurmOptions::gpu_freq`]: the GPUs' clocks while the job's steps run, checked as Slurm's `tres_freq_verify_cmdline`; sent as `gpu:FREQ` (`gpu_frequency` at v0.0.38) with the `SLURM_GPU_FREQ` sbatch sets (steps read it); not priced, and refused with shard or mps GRES, as slurmctld refuses it |
//! | `--ntasks-per-gpu=N` | [`JobRequest::ntasks_per_gpu`]: N tasks share each GPU. As slurmctld counts them ([`ntasks_per_gpu_shape`]): with GPUs (`--gpus`, `--gpus-per-node`, `--gres=gpu`) the job runs `GPUs × N` tasks (a `-n` that says otherwise is replaced, as Slurm replaces it, with a note; in JSON it is refused); without, `-n` (or `-N` × N) tasks and a GPU of any type for every N of them, priced and left for Slurm to derive again. Refused with `--ntasks-per-node`, `--gpus-per-task` and a `-N` range, as sbatch refuses them or its man page calls them incompatible. Forwarded (`ntasks_per_gpu`, `ntasks_per_tres` from v0.0.40) with the job's `SLURM_NTASKS_PER_GPU`, which the steps' `srun` reads to bind each task to its GPU |
//! | `--cpu-freq=FREQ` | [`SlurmOptions::cpu_freq`]: the CPUs' frequency or governor for the job's steps, in the forms every release reads alike ([`cpu_freq_request`]: kHz, `low`…`highm1`, a governor, `MIN-MAX:GOVERNOR`); sent in Slurm's spelling as `cpu_frequency`, with the job's `SLURM_CPU_FREQ_REQ`; not priced |
//! | `--profile=LIST`, `--switches=COUNT[@TIME]`, `--container=PATH`, `--container-id=ID` | [`SlurmOptions`]: what the job's steps record ([`super::parse_profile`]: `none`, `all`, `energy`, `task`, `lustre`, `network`), the most leaf switches and the longest wait for them ([`super::parse_switches`]; sent from OpenAPI v0.0.40, which a v0.0.38 cluster cannot carry), the OCI container (`--container-id` not at v0.0.38); forwarded with the variables sbatch sets (`SLURM_PROFILE`, `SLURM_CONTAINER`, `SLURM_CONTAINER_ID`), not priced |
//! | `--ignore-pbs` | the script's `#PBS` and `#BSUB` lines left out, as sbatch leaves them out with it; without it they are read as sbatch translates them ([`super::wrapper`]) and override the script's `#SBATCH` lines. Also from `#SBATCH --ignore-pbs` and `SBATCH_IGNORE_PBS` |
//! | `--get-user-env[=SECONDS[S\|L]]` | [`SbatchCommand::get_user_env`]: the client asks slurmd for the user's login environment (`SLURM_GET_USER_ENV=1`) and sends no resource limits, as sbatch |
//! | `--propagate[=LIST]` | [`SbatchCommand::propagate`]: the client sends those of its shell's resource limits for the job to get whatever the cluster propagates |
//! | `-L/--licenses=NAME[:N],…` | [`Licenses`]: cluster-wide licenses, read as slurmctld reads them (`,`/`;`, `:N`/`=N`, a name twice added up), priced as `license/<name>` TRES and forwarded as `name:N,…`; a cluster whose configuration lists its licenses (`submit.licenses`) is eligible only for those it has, in the counts it has; a dstack cluster never |
//! | `-H/--hold` | the job is submitted held (priority 0) until the user releases it (`scontrol release`); the hold on the allocation stays meanwhile |
//! | `-a/--array=LIST[%MAX]` | [`ArraySpec`]: a job array (`0-9`, `1,3,5-7`, `0-15:4`, `%2` to run at most two tasks at once), checked as slurmctld checks it (indexes up to 4000000: a cluster with a smaller `MaxArraySize` refuses the job at submission) and forwarded as written; a dstack cluster is not eligible for it |
//! | `--parsable`, `-W/--wait`, `-Q/--quiet`, `--test-only` | how the client behaves ([`SbatchCommand`]) |
//! | `-v/--verbose` | accepted and ignored: it only changes sbatch's own chatter |
//! | `-h/--help`, `--usage` | [`RequestError::HelpRequested`]; print [`SBATCH_USAGE`] |
//!
//! Only one GPU source per place: `--gres=gpu…`, `--gpus`, `--gpus-per-node` and `--gpus-per-task` together are
//! refused (bursar keeps one GPU count and type per job), and so is a second GPU type.
//!
//! **Everything else is refused with an error naming the option**, never dropped: slurmrestd
//! does not read `#SBATCH` lines, so an option bursar does not carry would be silently lost
//! between the quote and the cluster. Refusals with their own explanation: heterogeneous jobs
//! (`hetjob` lines), `--gpus-per-socket`, which bursar cannot price yet, and
//! `--ntasks-per-tres`, sbatch's undocumented spelling of `--ntasks-per-gpu`.
//!
//! ## The job script (as sbatch's `_opt_batch_script` and `_get_script_buffer`)
//! - Refused when empty, only whitespace, not starting with `#!` (sbatch's own message), with
//!   a NUL byte, or with DOS line breaks — unless `--wrap` is used, and a script together
//!   with `--wrap` is refused.
//! - `#SBATCH` at the very start of a line is a directive (`#SLURM` too, with a note); every
//!   other line that is blank or starts with `#` after blanks is skipped; the first other line
//!   ends the directives. A directive line is split like a shell line: blanks separate, `'…'`
//!   and `"…"` group, `\` escapes the next character, an unquoted `#` starts a comment, an
//!   empty word ends the line (all as sbatch's `get_argument`). An unmatched quote or a line
//!   starting with `:` is an error.
//! - Each `#SBATCH` line is parsed on its own, so an option's value must be on its line.
//! - **Command-line options win over `#SBATCH` ones**, option by option, and within one place
//!   the last occurrence wins; sbatch's input variables (`SBATCH_ACCOUNT`, …, read by the
//!   client: [`parse_sbatch_command_with_env`]) sit between the two; for memory, as in sbatch,
//!   a variable replaces the script's same option, and the script's `--mem` or `--mem-per-cpu`
//!   then wins over the other one given by a variable (`memory_from_env`). Giving
//!   `--mem` or `--mem-per-cpu` on the command line replaces both from the script (bursar's
//!   own rule: sbatch refuses the mix); bursar treats GPUs the same way (a GPU option on the
//!   command line replaces the script's GPU options), and a command-line `--gres` replaces the
//!   script's `--gres` entirely.

use super::error::RequestError;
use super::gpu::{parse_gres_list, parse_typed_count, GresList};
use super::hostlist;
use super::layout::{parse_distribution, parse_gpu_bind, parse_mem_bind, then_mem_bind};
use super::slurm::{
    check_acctg_freq, check_gpu_freq, cpu_freq_request, parse_delay_boot, parse_nice,
    parse_priority, parse_profile, parse_switches, ExclusiveMode, GresFlags,
};
use super::units::parse_slurm_megabytes;
use super::when::{Clock, Moment};
use super::wrapper::{self, Action};
use super::{
    nodes_for_tasks, ntasks_per_gpu_shape, ArraySpec, GpuPer, GpuRequest, Hint, JobRequest,
    Licenses, MemoryRequest, OpenMode, SlurmOptions, TimeLimit, WarnSignal,
};

/// The options `bursar submit` understands, for `--help`.
pub const SBATCH_USAGE: &str = "\
Usage: bursar submit [OPTIONS] SCRIPT [ARGS...]
       bursar submit [OPTIONS] --wrap=COMMAND

Options (as sbatch; #SBATCH lines in SCRIPT are read too, the command line wins):
  -A, --account=NAME            account to charge
  -p, --partition=NAME          partition
  -q, --qos=NAME                quality of service
  -M, --clusters=A,B            clusters to consider (default: any)
  -N, --nodes=N[-M]             nodes (a range is priced and run at its minimum)
  -n, --ntasks=N                tasks (default: one per node)
      --ntasks-per-node=N       tasks per node
  -c, --cpus-per-task=N         CPUs per task
      --mem=SIZE                memory per node (4000, 4000M, 4G, 1T)
      --mem-per-cpu=SIZE        memory per CPU
      --mem-per-gpu=SIZE        memory per GPU
      --gres=gpu[:TYPE][:N],... generic resources (GPUs per node)
  -G, --gpus=[TYPE:]N           GPUs for the whole job
      --gpus-per-node=[TYPE:]N  GPUs per node
      --gpus-per-task=[TYPE:]N  GPUs per task (with -n or -N)
      --tres-per-task=LIST      cpu=N, gres/gpu[:TYPE]=N: as -c, --gpus-per-task
      --cpus-per-gpu=N          CPUs per GPU (not with -c)
      --mincpus=N               at least N CPUs on each node
      --hint=HINT               nomultithread (one thread per core), multithread,
                                compute_bound, memory_bound
      --threads-per-core=N      threads of each core the job uses
      --ntasks-per-core=N       most tasks on one core
      --ntasks-per-gpu=N        N tasks share each GPU: the tasks from the GPUs
                                (--gpus=2: 2N tasks), or the GPUs from -n or -N
  -L, --licenses=NAME[:N],...   licenses the job takes (matlab:2,ansys), priced
                                where the cluster's weights charge for them
  -t, --time=TIME               time limit: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED
  -J, --job-name=NAME           job name
  -o, --output=FILE             standard output file
  -e, --error=FILE              standard error file
  -D, --chdir=DIR               working directory
      --wrap=COMMAND            run COMMAND under /bin/sh instead of a script
      --export=VARS             environment to export (ALL, NONE, VAR=value,...)
      --mail-type=TYPES         mail events
      --mail-user=ADDRESS       mail recipient
      --comment=TEXT            job comment
  -C, --constraint=FEATURES     node features
      --exclusive               whole nodes, priced whole (Slurm clusters whose
                                partitions declare their node size)
      --exclusive=user|mcs|topo  nodes shared only with your jobs, or your MCS
                                label's; the topology segment (Slurm 24.05+):
                                priced as asked
      --signal=[{R|B}:]SIG[@S]  send SIG S seconds (60) before the time limit
      --requeue, --no-requeue   whether Slurm may requeue the job
      --open-mode=append|truncate  how the output and error files are opened
      --nice[=N]                lower the job's priority by N (100)
      --reservation=NAME        run in a reservation
      --wckey=KEY               workload characterization key
  -x, --exclude=NODES           nodes not to run on
  -i, --input=FILE              the script's standard input
  -k, --no-kill                 keep the job when one of its nodes fails
  -d, --dependency=LIST         start after these jobs (afterok:ID:ID, singleton, ...);
                                the jobs' cluster must be named alone with -M
      --kill-on-invalid-dep=yes|no  end the job if its dependency can never be met
  -b, --begin=TIME              start no earlier than TIME: now+1hour, 18:00,
                                tomorrow, 2026-12-01T09:00, ... (this machine's zone);
                                the allocation stays held until the job has run
      --deadline=TIME           Slurm ends the job unstarted if it cannot end by TIME
      --time-min=TIME           the shortest time limit Slurm may cut the job's to,
                                to start it sooner (priced at the full --time)
      --tmp=SIZE                temporary disk each node must have (4000, 4G)
      --prefer=FEATURES         node features preferred but not required
  -w, --nodelist=NODES          run on these nodes (n[1-3],gpu01), and so on at
                                least that many (priced so)
      --propagate[=LIMITS]      give the job these limits of this shell (ALL, NONE,
                                STACK,NOFILE,...)
      --profile=LIST            what the job's steps record: none, all, or energy,
                                task, lustre, network
      --switches=N[@TIME]       at most N leaf switches, waiting at most TIME
      --container=PATH          run in this OCI container bundle
      --container-id=ID         the container's id
      --get-user-env            load the login environment under the job's
      --ignore-pbs              leave the script's #PBS and #BSUB lines out
  -s, --oversubscribe           let the job share CPUs where the partition allows
      --wait-all-nodes=0|1      start the script once all nodes are ready (1)
      --use-min-nodes           prefer a range's fewest nodes (bursar runs its
                                minimum)
      --spread-job              spread the job over the nodes Slurm picks
                                (with -N or -w)
      --delay-boot=TIME         wait TIME before rebooting nodes for features
      --mcs-label=LABEL         the job's MCS label
      --contiguous              contiguous nodes (Slurm 23.11 and later)
      --extra=TEXT              the job's extra text, for node filtering where the
                                cluster enables it (Slurm 23.11 and later)
      --priority=N|TOP          the job's priority, if you are a Slurm operator
      --gres-flags=enforce-binding|disable-binding  CPUs bound to the job's GPUs or not
      --acctg-freq=LIST         usage sampling intervals (30, task=30,energy=60)
  -m, --distribution=LAYOUT     how tasks are laid out (block, cyclic:cyclic, plane=4)
      --mem-bind=BINDING        how steps bind memory (local, map_mem:0,1)
      --gpu-bind=BINDING        how steps bind GPUs (closest, single:1, map_gpu:0,1)
      --gpu-freq=FREQ           GPU clocks for the steps (medium, 1410,memory=high)
      --cpu-freq=FREQ           CPU frequency or governor for the steps (2400000, high,
                                Performance, 1800000-2400000:OnDemand)
  -H, --hold                    submit the job held (release it with scontrol release)
  -a, --array=LIST[%MAX]        a job array: indexes N, N-M, N-M:STEP, comma-separated;
                                %MAX runs at most MAX tasks at once (Slurm clusters)
      --parsable                print only the job id
  -W, --wait                    wait until the job ends; exit with its exit code
  -Q, --quiet                   print nothing but errors
      --test-only               quote the job, do not submit it
  -v, --verbose                 accepted and ignored
  -h, --help, --usage           this help

SBATCH_ACCOUNT, SBATCH_PARTITION, SBATCH_QOS, SBATCH_TIMELIMIT, SBATCH_JOB_NAME and
sbatch's other input variables for these options are read as sbatch reads them (the
command line wins over them, they win over #SBATCH lines).

Other sbatch options are refused rather than dropped: bursar would not be able to
forward them, and the job would not run as quoted.
";

/// Everything a `bursar submit` command line says: the job, and how the client behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbatchCommand {
    pub request: JobRequest,
    /// `--parsable`: print `jobid[;cluster]` only.
    pub parsable: bool,
    /// `-Q/--quiet`.
    pub quiet: bool,
    /// `--test-only`: quote, do not submit.
    pub test_only: bool,
    /// `-W/--wait`: return once the job has ended, with its exit code.
    pub wait: bool,
    /// What the user should know about how the request was read (ranges narrowed, GRES not
    /// priced, deprecated `#SLURM` lines, …); print them before the quote.
    pub notes: Vec<String>,
    /// `--propagate[=LIST]`: the resource limits of the submitting shell the job must get
    /// whatever the cluster's `PropagateResourceLimits` says, as Slurm names them (`STACK`,
    /// `NOFILE`, …; `ALL` or `NONE`), upper-case, in order; `None` when not given. The client
    /// sends them in the job's environment ([`RLIMITS`]).
    pub propagate: Option<Vec<String>>,
    /// `--get-user-env[=SECONDS[S|L]]`: slurmd loads the user's login environment under the
    /// job's (the client sends `SLURM_GET_USER_ENV=1`), and, as sbatch, none of the shell's
    /// resource limits: the job gets the node's. The timeout and mode (gone in Slurm 25.05)
    /// are checked and, as in Slurm, not used.
    pub get_user_env: bool,
    /// `#PBS -W umask=MASK`: the job's `SLURM_UMASK`, as sbatch writes it (`0022`), in place of
    /// the submitting shell's umask (a `SLURM_UMASK` the shell sets still wins, as in sbatch);
    /// `None` without one.
    pub umask: Option<String>,
}

/// The resource limits Slurm propagates from the submitting shell (`slurm_rlimits_info.c`),
/// by its names.
pub const RLIMITS: [&str; 10] = [
    "CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS",
];

/// `--propagate`'s list as sbatch's `parse_rlimits` reads it: names with or without
/// `RLIMIT_`, comma-separated; `ALL` and `NONE` alone (bursar also takes lower case, where
/// sbatch wants Slurm's upper-case names).
fn parse_propagate(option: &str, value: Option<&str>) -> Result<Vec<String>, RequestError> {
    let Some(list) = value else {
        return Ok(RLIMITS.iter().map(|r| r.to_string()).collect());
    };
    let mut names: Vec<String> = Vec::new();
    for word in list.split(',') {
        let upper = word.trim().to_ascii_uppercase();
        let name = upper.strip_prefix("RLIMIT_").unwrap_or(&upper);
        match name {
            "ALL" | "NONE" if list.contains(',') => {
                return Err(RequestError::invalid_value(
                    option,
                    list,
                    format!("{name} cannot be combined with other limits"),
                ))
            }
            "ALL" => return Ok(RLIMITS.iter().map(|r| r.to_string()).collect()),
            "NONE" => return Ok(Vec::new()),
            _ if RLIMITS.contains(&name) => {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
            _ => {
                return Err(RequestError::invalid_value(
                    option,
                    list,
                    format!(
                        "{:?} is not a resource limit Slurm propagates: use ALL, NONE or {}",
                        word.trim(),
                        RLIMITS.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(names)
}

/// A `bursar submit` argument vector split as sbatch splits it: options up to the first word
/// that is not an option (or `--`), then the script path and the script's own arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbatchArgs {
    pub options: Vec<String>,
    /// `None` with `--wrap` (or when reading the script from standard input).
    pub script: Option<String>,
    pub script_args: Vec<String>,
}

/// Splits `argv` (without the program name) into options, script path and script arguments.
/// Needs the option table to know which options take the next word as their value
/// (`-A physics job.sh`). Unknown options are refused here already, with the same errors as
/// [`parse_sbatch`].
pub fn split_sbatch_args(argv: &[String]) -> Result<SbatchArgs, RequestError> {
    let mut i = 0;
    while i < argv.len() {
        let word = argv[i].as_str();
        if word == "--" {
            let rest = &argv[i + 1..];
            return Ok(SbatchArgs {
                options: argv[..i].to_vec(),
                script: rest.first().cloned(),
                script_args: rest.iter().skip(1).cloned().collect(),
            });
        }
        let Some(consumed) = option_words(argv, i)? else {
            return Ok(SbatchArgs {
                options: argv[..i].to_vec(),
                script: Some(word.to_string()),
                script_args: argv[i + 1..].to_vec(),
            });
        };
        i += consumed;
    }
    Ok(SbatchArgs {
        options: argv.to_vec(),
        script: None,
        script_args: Vec::new(),
    })
}

/// How many words the option at `argv[i]` takes (1 or 2), or `None` when `argv[i]` is not an
/// option.
fn option_words(argv: &[String], i: usize) -> Result<Option<usize>, RequestError> {
    let word = argv[i].as_str();
    if let Some(long) = word.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let spec = lookup_long(name)?;
        let takes_next = matches!(spec.arg, Arg::Required) && inline.is_none();
        return Ok(Some(if takes_next { 2 } else { 1 }));
    }
    let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    for (at, c) in shorts.char_indices() {
        let spec = lookup_short(c)?;
        match spec.arg {
            Arg::Required => {
                let attached = at + c.len_utf8() < shorts.len();
                return Ok(Some(if attached { 1 } else { 2 }));
            }
            // The rest of the word, if any, is its value (`-koff`), as getopt's `k::`.
            Arg::Optional => return Ok(Some(1)),
            Arg::Flag => {}
        }
    }
    Ok(Some(1))
}

/// Parses sbatch options (`args`: the words before the script path) and the job script's
/// `#SBATCH` lines into a validated [`JobRequest`]. `script` is the file's text (the caller
/// reads it); `None` requires `--wrap`. See the module documentation for every rule.
pub fn parse_sbatch(args: &[String], script: Option<&str>) -> Result<JobRequest, RequestError> {
    parse_sbatch_command(args, script).map(|command| command.request)
}

/// [`parse_sbatch`], keeping the client flags (`--parsable`, `--quiet`, `--test-only`) and the
/// notes to show the user.
pub fn parse_sbatch_command(
    args: &[String],
    script: Option<&str>,
) -> Result<SbatchCommand, RequestError> {
    parse_sbatch_command_with_env(args, &[], script)
}

/// [`parse_sbatch_command`] with sbatch's input environment variables: `(variable,
/// "--option=value")` pairs, which override the script's `#SBATCH` lines and yield to the
/// command line, as in sbatch, or `(variable, "!--option")` for an on/off option a variable's
/// off value resets (the script's setting too). An error in one names its variable.
pub fn parse_sbatch_command_with_env(
    args: &[String],
    env: &[(String, String)],
    script: Option<&str>,
) -> Result<SbatchCommand, RequestError> {
    parse_sbatch_command_at(args, env, script, &Clock::system())
}

/// [`parse_sbatch_command_with_env`] with `--begin` and `--deadline` read on `clock` (sbatch
/// reads them on the submitting machine's clock, in its time zone).
pub fn parse_sbatch_command_at(
    args: &[String],
    env: &[(String, String)],
    script: Option<&str>,
    clock: &Clock,
) -> Result<SbatchCommand, RequestError> {
    let mut from_env = Directives::default();
    for (name, word) in env {
        if let Some(option) = word.strip_prefix('!') {
            from_env
                .reset(option)
                .map_err(|e| RequestError::Invalid(format!("{name} in the environment: {e}")))?;
            continue;
        }
        parse_words([word.as_str()], &mut from_env, Place::Script)
            .map_err(|e| RequestError::Invalid(format!("{name} in the environment: {e}")))?;
    }
    let mut cli = Directives::default();
    parse_words(
        args.iter().map(String::as_str),
        &mut cli,
        Place::CommandLine,
    )?;
    if cli.help {
        return Err(RequestError::HelpRequested);
    }
    cli.check_exclusive()?;
    let mut from_script = Directives::default();
    match (script, &cli.wrap) {
        (Some(_), Some(_)) => {
            return Err(RequestError::Invalid(
                "--wrap cannot be used together with a job script".into(),
            ))
        }
        (None, None) => {
            return Err(RequestError::Script(
                "no job script: give the path of a batch script, or --wrap=COMMAND".into(),
            ))
        }
        (Some(text), None) => {
            check_script(text)?;
            read_directives(text, &mut from_script)?;
            if !(cli.ignore_pbs || from_env.ignore_pbs || from_script.ignore_pbs) {
                read_wrapper_lines(text, &mut from_script)?;
            }
            if from_script.help {
                return Err(RequestError::HelpRequested);
            }
            from_script.check_exclusive()?;
        }
        (None, Some(_)) => {}
    }
    tres_per_task(&mut from_env, &mut from_script, &mut cli)?;
    memory_from_env(&mut from_env, &mut from_script, &cli)?;
    // A -c given on the command line or in the script drops SBATCH_CPUS_PER_GPU, as in sbatch.
    if cli.cpus_per_task.is_some() || from_script.cpus_per_task.is_some() {
        from_env.cpus_per_gpu = None;
    }
    // GPUs on the command line replace the variables' GPUs, conflicting or not.
    if !cli.gpu_sources().is_empty() {
        from_env.gpus = None;
        from_env.gpus_per_node = None;
        from_env.gpus_per_task = None;
        if let Some(gres) = &mut from_env.gres {
            gres.gpu = None;
        }
    }
    // A variable's --hint gives way to --threads-per-core or --ntasks-per-core given as an
    // option, and theirs to a --hint option, as sbatch's validate_hint_option resets them.
    // Both from variables: the hint is dropped too.
    let per_core = |d: &Directives| d.threads_per_core.is_some() || d.ntasks_per_core.is_some();
    if per_core(&cli) || per_core(&from_script) || per_core(&from_env) {
        from_env.hint = None;
    }
    if cli.hint.is_some() || from_script.hint.is_some() {
        from_env.threads_per_core = None;
        from_env.ntasks_per_core = None;
    }
    from_env
        .check_exclusive()
        .map_err(|e| RequestError::Invalid(format!("in the environment: {e}")))?;
    let merged = Directives::merge(cli, Directives::merge(from_env, from_script));
    let mut command = merged.resolve(clock)?;
    command.request.script = script.map(str::to_string);
    command.request.validate()?;
    Ok(command)
}

/// `--tres-per-task`'s entries bursar reads: sbatch's other spelling of `-c` and
/// `--gpus-per-task`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TresPerTask {
    cpus: Option<u32>,
    gpus: Option<(Option<String>, u32)>,
}

/// `--tres-per-task=LIST` as sbatch 23.11 to 25.11 read it, stricter: comma-separated `cpu=N`
/// (or 23.02's `cpu:N`; `cpu` in lower case, as 25.05 reads it) and `gres/gpu=N`,
/// `gres/gpu:TYPE=N` (or 23.11's `gres/gpu:N`, `gres/gpu:TYPE:N`, and `gres:` for `gres/`),
/// each once, counts whole numbers from 1. Licenses and other GRES per task are refused.
fn parse_tres_per_task(option: &str, text: &str) -> Result<TresPerTask, RequestError> {
    let bad = |reason: String| RequestError::invalid_value(option, text, reason);
    let twice = |entry: &str| bad(format!("{entry:?}: given twice in the list"));
    let mut tres = TresPerTask::default();
    for entry in text.split(',') {
        if let Some(n) = entry
            .strip_prefix("cpu=")
            .or_else(|| entry.strip_prefix("cpu:"))
        {
            let cpus = count(option, n)?;
            if cpus == 0 {
                return Err(bad(format!("{entry:?}: a task needs at least one CPU")));
            }
            if tres.cpus.replace(cpus).is_some() {
                return Err(twice(entry));
            }
            continue;
        }
        if let Some(rest) = entry
            .strip_prefix("gres/gpu")
            .or_else(|| entry.strip_prefix("gres:gpu"))
        {
            // as --gpus-per-task writes it: N or TYPE:N
            let spec = match (rest.strip_prefix('='), rest.strip_prefix(':')) {
                (Some(n), _) => n.to_string(),
                (None, Some(typed)) => match typed.split_once('=') {
                    Some((kind, n)) => format!("{kind}:{n}"),
                    None => typed.to_string(),
                },
                (None, None) => {
                    return Err(bad(format!(
                        "{entry:?}: write gres/gpu=N or gres/gpu:TYPE=N"
                    )))
                }
            };
            if tres
                .gpus
                .replace(parse_typed_count(option, &spec)?)
                .is_some()
            {
                return Err(twice(entry));
            }
            continue;
        }
        let why = if entry.starts_with("license") {
            "bursar takes licenses with -L/--licenses, as the job's total (per task × tasks)"
        } else if entry.starts_with("gres") {
            "bursar reads GPUs per task here; give other GRES with --gres, per node"
        } else {
            "use cpu=N, gres/gpu=N or gres/gpu:TYPE=N, comma-separated"
        };
        return Err(bad(format!("{entry:?}: {why}")));
    }
    Ok(tres)
}

/// `--tres-per-task` applied as sbatch applies it, into `-c` and `--gpus-per-task` of the place
/// its list comes from: the command line's list replaces the variable's
/// (`SBATCH_TRES_PER_TASK`), which replaces the script's. Given as an option (command line or
/// `#SBATCH`), its `cpu` beside `-c` (or `--cpus-per-gpu`), its GPUs beside
/// `--gpus-per-task`, or any list beside `--ntasks-per-gpu`, are refused, as sbatch refuses
/// them; from the variable, an option's `-c`, `--cpus-per-gpu` or `--gpus-per-task` wins over
/// its entry, as in sbatch 23.11 and later.
fn tres_per_task(
    env: &mut Directives,
    script: &mut Directives,
    cli: &mut Directives,
) -> Result<(), RequestError> {
    let refused = |what: &str| {
        Err(RequestError::Invalid(format!(
            "--tres-per-task {what}: give one or the other (sbatch refuses both)"
        )))
    };
    let options = [&*cli, &*script];
    let cpus_given = options.iter().any(|d| d.cpus_per_task.is_some());
    let cpus_per_gpu_given = options.iter().any(|d| d.cpus_per_gpu.is_some());
    let gpus_given = options.iter().any(|d| d.gpus_per_task.is_some());
    let per_gpu = [&*cli, &*script, &*env]
        .iter()
        .any(|d| d.ntasks_per_gpu.is_some());
    // An empty SBATCH_TRES_PER_TASK is an empty list, which replaces the script's.
    if env.resets.contains(&Opt::TresPerTask) {
        script.tres_per_task = None;
    }
    let (tres, place, from_env) = match (
        cli.tres_per_task.take(),
        env.tres_per_task.take(),
        script.tres_per_task.take(),
    ) {
        (Some(tres), _, _) => (tres, &mut *cli, false),
        (None, Some(tres), _) => (tres, &mut *env, true),
        (None, None, Some(tres)) => (tres, &mut *script, false),
        (None, None, None) => return Ok(()),
    };
    if per_gpu {
        return refused("with --ntasks-per-gpu");
    }
    let TresPerTask { mut cpus, mut gpus } = tres;
    if from_env {
        if cpus_given || cpus_per_gpu_given {
            cpus = None;
        }
        if gpus_given {
            gpus = None;
        }
    } else {
        if cpus.is_some() && cpus_given {
            return refused("with cpu= and -c/--cpus-per-task");
        }
        if cpus.is_some() && cpus_per_gpu_given {
            return refused("with cpu= and --cpus-per-gpu");
        }
        if gpus.is_some() && gpus_given {
            return refused("with gres/gpu and --gpus-per-task");
        }
    }
    // One way of asking for GPUs in one place, as for the other GPU options (sbatch would
    // send both and derive the tasks from the pair, or refuse them).
    if let (Some(_), Some(other)) = (&gpus, place.gpu_sources().first()) {
        return Err(RequestError::Conflict {
            first: (*other).into(),
            second: "--tres-per-task=gres/gpu".into(),
        });
    }
    if cpus.is_some() {
        place.cpus_per_task = cpus;
    }
    if gpus.is_some() {
        place.gpus_per_task = gpus;
    }
    Ok(())
}

/// The script's `#BSUB` or `#PBS` lines applied to its `#SBATCH` options as sbatch applies
/// them after those ([`wrapper::translate`]): each translated option replaces the script's
/// own, and the environment and the command line still win. An option the translation gives
/// that bursar refuses is refused naming the line it comes from.
fn read_wrapper_lines(text: &str, into: &mut Directives) -> Result<(), RequestError> {
    let Some(translation) = wrapper::translate(text, split_directive)? else {
        return Ok(());
    };
    into.notes.extend(translation.notes);
    for step in translation.steps {
        let word = match step.action {
            Action::Set {
                option,
                value: Some(value),
            } => format!("--{option}={value}"),
            Action::Set {
                option,
                value: None,
            } => format!("--{option}"),
            Action::ExportAppend(list) => match &into.export {
                Some(export) => format!("--export={export},{list}"),
                None => format!("--export={list}"),
            },
            Action::Umask(mask) => {
                into.umask = Some(mask);
                continue;
            }
            Action::GresGpus(n) => {
                if into.gres.is_some() {
                    return Err(RequestError::Script(format!(
                        "{}: sbatch adds gpu:{n} to the script's --gres; give the GPUs in \
                         --gres alone",
                        step.shown
                    ))
                    .at_line(step.line));
                }
                format!("--gres=gpu:{n}")
            }
        };
        parse_words([word.as_str()], into, Place::Script).map_err(|e| {
            let e = match e {
                RequestError::ScriptLine { error, .. } => *error,
                e => e,
            };
            RequestError::Script(format!("{} (sbatch's {word}): {e}", step.shown))
                .at_line(step.line)
        })?;
    }
    Ok(())
}

/// sbatch's memory rules for its input variables, moved into `script` (the command line's own
/// rule applies after): a variable's option replaces the script's same option, and then a
/// memory option the script gives (`--mem` or `--mem-per-cpu`) clears the other one when a
/// variable gave it, as Slurm's `_validate_memory_options` lets an option not set by the
/// environment win; both from variables is refused. Memory on the command line replaces all
/// of it, so none of this matters then.
fn memory_from_env(
    env: &mut Directives,
    script: &mut Directives,
    cli: &Directives,
) -> Result<(), RequestError> {
    let (mem_env, cpu_env) = (env.mem.take(), env.mem_per_cpu.take());
    if !cli.memory_sources().is_empty() {
        return Ok(());
    }
    // The script's --mem-per-gpu wins over the variables' memory, as in sbatch.
    if script.mem_per_gpu.is_some() {
        return Ok(());
    }
    let mem = mem_env.or(script.mem);
    let cpu = cpu_env.or(script.mem_per_cpu);
    let (mem, cpu) = match (mem, cpu) {
        (Some(_), Some(_)) if mem_env.is_some() && cpu_env.is_some() => {
            return Err(RequestError::Invalid(
                "in the environment: SBATCH_MEM_PER_NODE and SBATCH_MEM_PER_CPU exclude each \
                 other"
                    .into(),
            ))
        }
        // The script's --mem-per-cpu over a variable's --mem, and the other way round.
        (Some(_), Some(_)) if mem_env.is_some() => (None, cpu),
        (Some(_), Some(_)) => (mem, None),
        other => other,
    };
    script.mem = mem;
    script.mem_per_cpu = cpu;
    Ok(())
}

/// sbatch's checks on a batch script (`_get_script_buffer`), same order.
pub(crate) fn check_script(text: &str) -> Result<(), RequestError> {
    let refuse = |message: &str| Err(RequestError::Script(message.to_string()));
    if text.is_empty() {
        return refuse("the batch script is empty");
    }
    if text.chars().all(is_c_space) {
        return refuse("the batch script contains only whitespace");
    }
    if !text.starts_with("#!") {
        // sbatch's exact words, which users search for (hence not our usual lower-case style).
        return refuse(
            "This does not look like a batch script.  The first line must start with #! \
             followed by the path to an interpreter.  For instance: #!/bin/sh",
        );
    }
    if text.contains('\0') {
        return refuse("the batch script contains a NUL character, which Slurm does not allow");
    }
    if text.contains("\r\n") {
        return refuse(
            "the batch script contains DOS line breaks (\\r\\n) instead of UNIX line breaks \
             (\\n); convert it with dos2unix",
        );
    }
    Ok(())
}

/// C's `isspace`, which sbatch uses: space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// Reads the `#SBATCH` (and `#SLURM`) lines at the top of a script into `into`.
fn read_directives(text: &str, into: &mut Directives) -> Result<(), RequestError> {
    let mut warned_slurm = false;
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        let rest = if let Some(rest) = line.strip_prefix("#SBATCH") {
            rest
        } else if let Some(rest) = line.strip_prefix("#SLURM") {
            if !std::mem::replace(&mut warned_slurm, true) {
                into.notes.push(format!(
                    "job script line {number}: #SLURM lines are deprecated, use #SBATCH"
                ));
            }
            rest
        } else {
            match line.chars().find(|c| !is_c_space(*c)) {
                None | Some('#') => continue,
                Some(_) => break,
            }
        };
        let words = split_directive(rest).map_err(|e| e.at_line(number))?;
        if let Some(word) = words
            .iter()
            .find(|w| w.eq_ignore_ascii_case("hetjob") || w.eq_ignore_ascii_case("packjob"))
        {
            return Err(RequestError::UnsupportedOption {
                option: word.clone(),
                reason: "heterogeneous jobs are not supported by bursar; submit the components \
                         as separate jobs"
                    .into(),
            }
            .at_line(number));
        }
        parse_words(words.iter().map(String::as_str), into, Place::Script)
            .map_err(|e| e.at_line(number))?;
    }
    Ok(())
}

/// Splits the rest of a `#SBATCH` line into words, as sbatch's `get_argument` does.
fn split_directive(line: &str) -> Result<Vec<String>, RequestError> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| is_c_space(*c)) {
            chars.next();
        }
        match chars.peek() {
            None => break,
            Some(':') => {
                return Err(RequestError::Script(
                    "unexpected `:` (heterogeneous job components are not supported)".into(),
                ))
            }
            Some(_) => {}
        }
        let mut word = String::new();
        let mut any = false;
        let mut quote: Option<char> = None;
        let mut escaped = false;
        let mut comment = false;
        while let Some(&c) = chars.peek() {
            // As in sbatch, a backslash does not protect a blank: only quotes do.
            if quote.is_none() && is_c_space(c) {
                break;
            }
            chars.next();
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
                continue;
            } else if let Some(q) = quote {
                if c == q {
                    quote = None;
                    continue;
                }
            } else if c == '"' || c == '\'' {
                quote = Some(c);
                continue;
            } else if c == '#' {
                comment = true;
                break;
            }
            word.push(c);
            any = true;
        }
        if let Some(q) = quote {
            return Err(RequestError::Script(format!("unmatched `{q}`")));
        }
        // sbatch stops at a word with no characters (`""`, or a comment).
        if !any {
            break;
        }
        words.push(word);
        if comment {
            break;
        }
    }
    Ok(words)
}

/// Where words come from: some options are only allowed on the command line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    CommandLine,
    Script,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Opt {
    Account,
    Partition,
    Qos,
    Clusters,
    Nodes,
    Ntasks,
    NtasksPerNode,
    CpusPerTask,
    Mem,
    MemPerCpu,
    MemPerGpu,
    CpusPerGpu,
    Mincpus,
    Hint,
    ThreadsPerCore,
    NtasksPerCore,
    NtasksPerGpu,
    GpusPerTask,
    Gres,
    Gpus,
    GpusPerNode,
    Time,
    JobName,
    Output,
    Error,
    Wrap,
    Chdir,
    Export,
    MailType,
    MailUser,
    Comment,
    Constraint,
    Exclusive,
    Signal,
    Requeue,
    NoRequeue,
    OpenMode,
    Nice,
    Reservation,
    Wckey,
    Exclude,
    Input,
    NoKill,
    Dependency,
    KillOnInvalidDep,
    Begin,
    Deadline,
    TimeMin,
    Tmp,
    Prefer,
    Nodelist,
    Propagate,
    Oversubscribe,
    WaitAllNodes,
    UseMinNodes,
    SpreadJob,
    DelayBoot,
    McsLabel,
    Contiguous,
    Extra,
    Priority,
    TresPerTask,
    GresFlags,
    AcctgFreq,
    Distribution,
    MemBind,
    GpuBind,
    GpuFreq,
    CpuFreq,
    Profile,
    Switches,
    Container,
    ContainerId,
    GetUserEnv,
    IgnorePbs,
    Hold,
    Array,
    Licenses,
    Parsable,
    Wait,
    Quiet,
    TestOnly,
    Verbose,
    Help,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    Required,
    Flag,
    /// Only as `--opt=value`.
    Optional,
}

struct Spec {
    long: &'static str,
    short: Option<char>,
    opt: Opt,
    arg: Arg,
}

const fn spec(long: &'static str, short: Option<char>, opt: Opt, arg: Arg) -> Spec {
    Spec {
        long,
        short,
        opt,
        arg,
    }
}

const OPTIONS: &[Spec] = &[
    spec("account", Some('A'), Opt::Account, Arg::Required),
    spec("partition", Some('p'), Opt::Partition, Arg::Required),
    spec("qos", Some('q'), Opt::Qos, Arg::Required),
    spec("clusters", Some('M'), Opt::Clusters, Arg::Required),
    spec("cluster", None, Opt::Clusters, Arg::Required),
    spec("nodes", Some('N'), Opt::Nodes, Arg::Required),
    spec("ntasks", Some('n'), Opt::Ntasks, Arg::Required),
    spec("ntasks-per-node", None, Opt::NtasksPerNode, Arg::Required),
    spec("cpus-per-task", Some('c'), Opt::CpusPerTask, Arg::Required),
    spec("mem", None, Opt::Mem, Arg::Required),
    spec("mem-per-cpu", None, Opt::MemPerCpu, Arg::Required),
    spec("mem-per-gpu", None, Opt::MemPerGpu, Arg::Required),
    spec("cpus-per-gpu", None, Opt::CpusPerGpu, Arg::Required),
    spec("mincpus", None, Opt::Mincpus, Arg::Required),
    spec("hint", None, Opt::Hint, Arg::Required),
    spec("threads-per-core", None, Opt::ThreadsPerCore, Arg::Required),
    spec("ntasks-per-core", None, Opt::NtasksPerCore, Arg::Required),
    spec("ntasks-per-gpu", None, Opt::NtasksPerGpu, Arg::Required),
    spec("gpus-per-task", None, Opt::GpusPerTask, Arg::Required),
    spec("tres-per-task", None, Opt::TresPerTask, Arg::Required),
    spec("gres", None, Opt::Gres, Arg::Required),
    spec("gpus", Some('G'), Opt::Gpus, Arg::Required),
    spec("gpus-per-node", None, Opt::GpusPerNode, Arg::Required),
    spec("time", Some('t'), Opt::Time, Arg::Required),
    spec("job-name", Some('J'), Opt::JobName, Arg::Required),
    spec("output", Some('o'), Opt::Output, Arg::Required),
    spec("error", Some('e'), Opt::Error, Arg::Required),
    spec("wrap", None, Opt::Wrap, Arg::Required),
    spec("chdir", Some('D'), Opt::Chdir, Arg::Required),
    spec("export", None, Opt::Export, Arg::Required),
    spec("mail-type", None, Opt::MailType, Arg::Required),
    spec("mail-user", None, Opt::MailUser, Arg::Required),
    spec("comment", None, Opt::Comment, Arg::Required),
    spec("constraint", Some('C'), Opt::Constraint, Arg::Required),
    spec("exclusive", None, Opt::Exclusive, Arg::Optional),
    spec("signal", None, Opt::Signal, Arg::Required),
    spec("requeue", None, Opt::Requeue, Arg::Flag),
    spec("no-requeue", None, Opt::NoRequeue, Arg::Flag),
    spec("open-mode", None, Opt::OpenMode, Arg::Required),
    spec("nice", None, Opt::Nice, Arg::Optional),
    spec("reservation", None, Opt::Reservation, Arg::Required),
    spec("wckey", None, Opt::Wckey, Arg::Required),
    spec("exclude", Some('x'), Opt::Exclude, Arg::Required),
    spec("input", Some('i'), Opt::Input, Arg::Required),
    spec("no-kill", Some('k'), Opt::NoKill, Arg::Optional),
    spec("dependency", Some('d'), Opt::Dependency, Arg::Required),
    spec(
        "kill-on-invalid-dep",
        None,
        Opt::KillOnInvalidDep,
        Arg::Required,
    ),
    spec("begin", Some('b'), Opt::Begin, Arg::Required),
    spec("deadline", None, Opt::Deadline, Arg::Required),
    spec("time-min", None, Opt::TimeMin, Arg::Required),
    spec("tmp", None, Opt::Tmp, Arg::Required),
    spec("prefer", None, Opt::Prefer, Arg::Required),
    spec("nodelist", Some('w'), Opt::Nodelist, Arg::Required),
    spec("propagate", None, Opt::Propagate, Arg::Optional),
    spec("oversubscribe", Some('s'), Opt::Oversubscribe, Arg::Flag),
    spec("wait-all-nodes", None, Opt::WaitAllNodes, Arg::Required),
    spec("use-min-nodes", None, Opt::UseMinNodes, Arg::Flag),
    spec("spread-job", None, Opt::SpreadJob, Arg::Flag),
    spec("delay-boot", None, Opt::DelayBoot, Arg::Required),
    spec("mcs-label", None, Opt::McsLabel, Arg::Required),
    spec("contiguous", None, Opt::Contiguous, Arg::Flag),
    spec("extra", None, Opt::Extra, Arg::Required),
    spec("priority", None, Opt::Priority, Arg::Required),
    spec("gres-flags", None, Opt::GresFlags, Arg::Required),
    spec("acctg-freq", None, Opt::AcctgFreq, Arg::Required),
    spec("distribution", Some('m'), Opt::Distribution, Arg::Required),
    spec("mem-bind", None, Opt::MemBind, Arg::Required),
    spec("gpu-bind", None, Opt::GpuBind, Arg::Required),
    spec("gpu-freq", None, Opt::GpuFreq, Arg::Required),
    spec("cpu-freq", None, Opt::CpuFreq, Arg::Required),
    spec("profile", None, Opt::Profile, Arg::Required),
    spec("switches", None, Opt::Switches, Arg::Required),
    spec("container", None, Opt::Container, Arg::Required),
    spec("container-id", None, Opt::ContainerId, Arg::Required),
    spec("get-user-env", None, Opt::GetUserEnv, Arg::Optional),
    spec("ignore-pbs", None, Opt::IgnorePbs, Arg::Flag),
    spec("hold", Some('H'), Opt::Hold, Arg::Flag),
    spec("array", Some('a'), Opt::Array, Arg::Required),
    spec("licenses", Some('L'), Opt::Licenses, Arg::Required),
    spec("parsable", None, Opt::Parsable, Arg::Flag),
    spec("wait", Some('W'), Opt::Wait, Arg::Flag),
    spec("quiet", Some('Q'), Opt::Quiet, Arg::Flag),
    spec("test-only", None, Opt::TestOnly, Arg::Flag),
    spec("verbose", Some('v'), Opt::Verbose, Arg::Flag),
    spec("help", Some('h'), Opt::Help, Arg::Flag),
    spec("usage", None, Opt::Help, Arg::Flag),
];

/// sbatch options bursar knows and refuses, with the reason it gives.
fn refusal(long: &str) -> Option<&'static str> {
    Some(match long {
        "het-group" | "hetjob" | "packjob" => {
            "heterogeneous jobs are not supported by bursar; submit the components as separate \
             jobs"
        }
        "ntasks-per-tres" => "an undocumented spelling of --ntasks-per-gpu: use --ntasks-per-gpu",
        "overcommit" => OVERCOMMIT_REFUSED,
        "reboot" => {
            "Slurm lets only its administrators reboot nodes for a job (it refuses others: \
             \"rebooting of nodes is only allowed for admins\"), and slurmrestd's OpenAPI \
             v0.0.38 (Slurm 22.05 and 23.02) refuses it; administrators submit such jobs with \
             sbatch"
        }
        "gpus-per-socket" => {
            "bursar cannot price this GPU-relative request yet; use --gpus-per-task, \
             --gpus-per-node or --gpus, with --cpus-per-gpu or --cpus-per-task"
        }
        _ => return None,
    })
}

/// Why `-O/--overcommit` (and `SBATCH_OVERCOMMIT`) is refused.
pub const OVERCOMMIT_REFUSED: &str = "bursar cannot price it alike on every cluster: Slurm \
     then allocates CPUs per node rather than per task, in ways that differ by release and by \
     how the job is sent (seen on Slurm 24.11.5: sbatch's -n 4 -c 2 -O job waits on idle \
     nodes), and slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 and 23.02) refuses it; leave it \
     out (each task then has its CPUs)";

const NOT_SUPPORTED: &str = "not supported by bursar, which refuses options it cannot price \
                             and forward rather than drop them; remove it (see bursar submit \
                             --help)";

fn lookup_long(name: &str) -> Result<&'static Spec, RequestError> {
    if let Some(spec) = OPTIONS.iter().find(|s| s.long == name) {
        return Ok(spec);
    }
    let option = format!("--{name}");
    if let Some(reason) = refusal(name) {
        return Err(RequestError::UnsupportedOption {
            option,
            reason: reason.into(),
        });
    }
    let candidates: Vec<&Spec> = if name.is_empty() {
        Vec::new()
    } else {
        OPTIONS
            .iter()
            .filter(|s| s.long.starts_with(name))
            .collect()
    };
    let reason = match candidates.as_slice() {
        [one] => format!(
            "bursar needs long options spelled out in full: did you mean --{}?",
            one.long
        ),
        _ => NOT_SUPPORTED.to_string(),
    };
    Err(RequestError::UnsupportedOption { option, reason })
}

fn lookup_short(c: char) -> Result<&'static Spec, RequestError> {
    if let Some(spec) = OPTIONS.iter().find(|s| s.short == Some(c)) {
        return Ok(spec);
    }
    // sbatch's short forms of options refused with a reason of their own.
    let long = match c {
        'O' => Some("overcommit"),
        _ => None,
    };
    Err(RequestError::UnsupportedOption {
        option: format!("-{c}"),
        reason: long
            .and_then(refusal)
            .map_or_else(|| NOT_SUPPORTED.to_string(), str::to_string),
    })
}

/// How the job shares its nodes: sbatch's one `shared` setting, which `--exclusive[=MODE]` and
/// `-s/--oversubscribe` each write, the later winning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeSharing {
    /// `--exclusive`, `--exclusive=exclusive`, `--exclusive=allocation` (Slurm 26.05's word
    /// for it in sbatch).
    WholeNodes,
    /// `-s/--oversubscribe`, `--exclusive=oversubscribe`.
    Oversubscribe,
    /// `--exclusive=user|mcs|topo`.
    Mode(ExclusiveMode),
}

impl NodeSharing {
    /// `--exclusive`'s value as sbatch's `arg_set_exclusive` reads it, any case.
    fn parse(value: Option<&str>) -> Result<NodeSharing, &'static str> {
        let Some(value) = value else {
            return Ok(NodeSharing::WholeNodes);
        };
        Ok(match value.to_ascii_lowercase().as_str() {
            "exclusive" | "allocation" => NodeSharing::WholeNodes,
            "oversubscribe" => NodeSharing::Oversubscribe,
            "user" => NodeSharing::Mode(ExclusiveMode::User),
            "mcs" => NodeSharing::Mode(ExclusiveMode::Mcs),
            "topo" => NodeSharing::Mode(ExclusiveMode::Topo),
            _ => return Err("use user, mcs or topo, or no value for whole nodes"),
        })
    }
}

/// One place's options (the command line, or the script's `#SBATCH` lines).
#[derive(Debug, Default)]
struct Directives {
    account: Option<String>,
    partition: Option<String>,
    qos: Option<String>,
    clusters: Option<Vec<String>>,
    /// (min, max); equal when not a range.
    nodes: Option<(u32, u32)>,
    ntasks: Option<u32>,
    ntasks_per_node: Option<u32>,
    cpus_per_task: Option<u32>,
    mem: Option<u64>,
    mem_per_cpu: Option<u64>,
    mem_per_gpu: Option<u64>,
    cpus_per_gpu: Option<u32>,
    mincpus: Option<u32>,
    /// `--hint` as given: checked once the places are merged, as sbatch checks only the hint
    /// that is left (a variable's bad hint under an option's is no error).
    hint: Option<String>,
    threads_per_core: Option<u32>,
    ntasks_per_core: Option<u32>,
    ntasks_per_gpu: Option<u32>,
    gpus_per_task: Option<(Option<String>, u32)>,
    gres: Option<GresList>,
    gpus: Option<(Option<String>, u32)>,
    gpus_per_node: Option<(Option<String>, u32)>,
    time: Option<TimeLimit>,
    job_name: Option<String>,
    output: Option<String>,
    error: Option<String>,
    wrap: Option<String>,
    chdir: Option<String>,
    export: Option<String>,
    mail_type: Option<String>,
    mail_user: Option<String>,
    comment: Option<String>,
    constraint: Option<String>,
    /// `--exclusive[=MODE]` and `-s/--oversubscribe`, the later in one place.
    sharing: Option<NodeSharing>,
    signal: Option<WarnSignal>,
    requeue: Option<bool>,
    open_mode: Option<OpenMode>,
    nice: Option<i32>,
    reservation: Option<String>,
    wckey: Option<String>,
    exclude: Option<String>,
    input: Option<String>,
    no_kill: Option<bool>,
    dependency: Option<String>,
    kill_on_invalid_dep: Option<bool>,
    begin: Option<Moment>,
    deadline: Option<Moment>,
    time_min: Option<TimeLimit>,
    tmp: Option<u64>,
    prefer: Option<String>,
    nodelist: Option<String>,
    propagate: Option<Vec<String>>,
    wait_all_nodes: Option<bool>,
    use_min_nodes: bool,
    spread_job: bool,
    delay_boot: Option<String>,
    mcs_label: Option<String>,
    contiguous: bool,
    extra: Option<String>,
    /// `--tres-per-task`: applied into `cpus_per_task` and `gpus_per_task` before the places
    /// are merged ([`tres_per_task`]).
    tres_per_task: Option<TresPerTask>,
    /// `--priority`: 0 kept here, so that the command line's `--priority=0` wins over a
    /// script's value, and dropped once merged (sbatch then sends none).
    priority: Option<u32>,
    gres_flags: Option<GresFlags>,
    acctg_freq: Option<String>,
    distribution: Option<String>,
    mem_bind: Option<String>,
    gpu_bind: Option<String>,
    gpu_freq: Option<String>,
    cpu_freq: Option<String>,
    profile: Option<String>,
    switches: Option<String>,
    container: Option<String>,
    container_id: Option<String>,
    get_user_env: bool,
    /// `#PBS -W umask=` ([`SbatchCommand::umask`]).
    umask: Option<u32>,
    /// `--ignore-pbs`: the script's `#PBS`/`#BSUB` lines left out, as sbatch leaves them.
    ignore_pbs: bool,
    hold: bool,
    array: Option<ArraySpec>,
    licenses: Option<Licenses>,
    parsable: bool,
    wait: bool,
    quiet: bool,
    test_only: bool,
    help: bool,
    notes: Vec<String>,
    /// On/off options an input variable reset (its value neither empty, `yes` nor a number
    /// other than 0): sbatch then clears the option, the script's setting too.
    resets: Vec<Opt>,
}

/// getopt over `words`: options only; the first non-option word is an error here (the
/// caller split the script path off already, and sbatch refuses stray words in `#SBATCH`).
fn parse_words<'a>(
    words: impl IntoIterator<Item = &'a str>,
    into: &mut Directives,
    place: Place,
) -> Result<(), RequestError> {
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if let Some(long) = word.strip_prefix("--") {
            if long.is_empty() {
                return Err(RequestError::UnexpectedArgument(word.to_string()));
            }
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let spec = lookup_long(name)?;
            let typed = format!("--{name}");
            let value = match (spec.arg, inline) {
                (Arg::Required, Some(v)) => Some(v),
                (Arg::Required, None) => {
                    Some(words.next().ok_or_else(|| RequestError::MissingValue {
                        option: typed.clone(),
                    })?)
                }
                (Arg::Flag, Some(v)) => {
                    return Err(RequestError::UnexpectedValue {
                        option: typed,
                        value: v.to_string(),
                    })
                }
                (Arg::Flag, None) => None,
                (Arg::Optional, v) => v,
            };
            into.apply(spec.opt, &typed, value, place)?;
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (at, c) in shorts.char_indices() {
                let spec = lookup_short(c)?;
                let typed = format!("-{c}");
                if spec.arg == Arg::Required {
                    let attached = &shorts[at + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        words.next().ok_or_else(|| RequestError::MissingValue {
                            option: typed.clone(),
                        })?
                    } else {
                        attached
                    };
                    into.apply(spec.opt, &typed, Some(value), place)?;
                    break;
                }
                if spec.arg == Arg::Optional {
                    // getopt's `k::`: the rest of the word, if any, is the value (`-koff`).
                    let attached = &shorts[at + c.len_utf8()..];
                    into.apply(
                        spec.opt,
                        &typed,
                        (!attached.is_empty()).then_some(attached),
                        place,
                    )?;
                    break;
                }
                into.apply(spec.opt, &typed, None, place)?;
            }
        } else {
            return Err(match place {
                Place::CommandLine => RequestError::UnexpectedArgument(word.to_string()),
                Place::Script => RequestError::UnsupportedOption {
                    option: word.to_string(),
                    reason: "not an option: #SBATCH lines may only hold sbatch options".into(),
                },
            });
        }
    }
    Ok(())
}

/// A non-empty value.
fn text(option: &str, value: &str) -> Result<String, RequestError> {
    if value.is_empty() {
        return Err(RequestError::invalid_value(
            option,
            value,
            "must not be empty",
        ));
    }
    Ok(value.to_string())
}

/// A file for standard input, output or error: `none` (any case) is `/dev/null`, as sbatch's
/// `arg_set_ifname` and its kin have it.
fn file_name(option: &str, value: &str) -> Result<String, RequestError> {
    if value.eq_ignore_ascii_case("none") {
        return Ok("/dev/null".to_string());
    }
    text(option, value)
}

/// A whole number (0 is let through so [`JobRequest::validate`] can say "at least 1").
fn count(option: &str, value: &str) -> Result<u32, RequestError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RequestError::invalid_value(
            option,
            value,
            "not a whole number",
        ));
    }
    value
        .parse()
        .map_err(|_| RequestError::invalid_value(option, value, "the number is too large"))
}

/// Node names as Slurm writes them (`-x`, `-w`); a path is a file sbatch would read.
fn node_names(option: &str, value: &str) -> Result<String, RequestError> {
    if value.contains('/') {
        return Err(RequestError::invalid_value(
            option,
            value,
            "a file of node names is read by sbatch on the login node, which bursar does not \
             do: write the names (n[1-3],gpu01)",
        ));
    }
    text(option, value)
}

/// A `--time`-style length, the error naming the option typed.
fn time_limit(option: &str, value: &str) -> Result<TimeLimit, RequestError> {
    TimeLimit::parse(value).map_err(|e| match e {
        RequestError::InvalidValue { value, reason, .. } => RequestError::InvalidValue {
            option: option.to_string(),
            value,
            reason,
        },
        other => other,
    })
}

/// A `--begin`-style time ([`Moment`]), placed in time when the request is resolved.
fn moment(option: &str, value: &str) -> Result<Moment, RequestError> {
    Moment::parse(value).map_err(|reason| RequestError::invalid_value(option, value, reason))
}

/// `N` or `MIN-MAX`.
fn node_range(option: &str, value: &str) -> Result<(u32, u32), RequestError> {
    let (min, max) = match value.split_once('-') {
        Some((min, max)) => (count(option, min)?, count(option, max)?),
        None => {
            let n = count(option, value)?;
            (n, n)
        }
    };
    if max < min {
        return Err(RequestError::invalid_value(
            option,
            value,
            "the minimum is above the maximum",
        ));
    }
    Ok((min, max))
}

impl Directives {
    fn apply(
        &mut self,
        opt: Opt,
        typed: &str,
        value: Option<&str>,
        place: Place,
    ) -> Result<(), RequestError> {
        let v = value.unwrap_or("");
        match opt {
            Opt::Account => self.account = Some(text(typed, v)?),
            Opt::Partition => self.partition = Some(text(typed, v)?),
            Opt::Qos => self.qos = Some(text(typed, v)?),
            Opt::Clusters => {
                let mut names: Vec<String> = Vec::new();
                for name in v.split(',') {
                    let name = text(typed, name).map_err(|_| {
                        RequestError::invalid_value(typed, v, "a cluster name is empty")
                    })?;
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                if names.iter().any(|n| n.eq_ignore_ascii_case("all")) {
                    if names.len() > 1 {
                        return Err(RequestError::invalid_value(
                            typed,
                            v,
                            "`all` cannot be combined with cluster names",
                        ));
                    }
                    self.notes.push(format!(
                        "{typed}=all: any cluster bursar manages may run the job"
                    ));
                    names.clear();
                }
                self.clusters = Some(names);
            }
            Opt::Nodes => self.nodes = Some(node_range(typed, v)?),
            Opt::Ntasks => self.ntasks = Some(count(typed, v)?),
            Opt::NtasksPerNode => self.ntasks_per_node = Some(count(typed, v)?),
            Opt::CpusPerTask => self.cpus_per_task = Some(count(typed, v)?),
            Opt::Mem => {
                self.mem = Some(
                    parse_slurm_megabytes(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::MemPerCpu => {
                self.mem_per_cpu = Some(
                    parse_slurm_megabytes(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::MemPerGpu => {
                self.mem_per_gpu = Some(
                    parse_slurm_megabytes(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::CpusPerGpu => self.cpus_per_gpu = Some(count(typed, v)?),
            Opt::Mincpus => self.mincpus = Some(count(typed, v)?),
            Opt::Hint => self.hint = Some(v.to_string()),
            Opt::ThreadsPerCore => self.threads_per_core = Some(count(typed, v)?),
            Opt::NtasksPerCore => self.ntasks_per_core = Some(count(typed, v)?),
            Opt::NtasksPerGpu => self.ntasks_per_gpu = Some(count(typed, v)?),
            Opt::GpusPerTask => self.gpus_per_task = Some(parse_typed_count(typed, v)?),
            // As sbatch: a later list replaces the whole of an earlier one.
            Opt::TresPerTask => self.tres_per_task = Some(parse_tres_per_task(typed, v)?),
            Opt::Gres => self.gres = Some(parse_gres_list(typed, v)?),
            Opt::Gpus => self.gpus = Some(parse_typed_count(typed, v)?),
            Opt::GpusPerNode => self.gpus_per_node = Some(parse_typed_count(typed, v)?),
            Opt::Time => self.time = Some(time_limit(typed, v)?),
            Opt::TimeMin => {
                self.time_min = match time_limit(typed, v)? {
                    TimeLimit::Unlimited => {
                        return Err(RequestError::invalid_value(
                            typed,
                            v,
                            "the shortest time limit needs a length (0 and UNLIMITED are none)",
                        ))
                    }
                    minutes => Some(minutes),
                }
            }
            Opt::Tmp => {
                self.tmp = Some(
                    parse_slurm_megabytes(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::Prefer => self.prefer = Some(text(typed, v)?),
            Opt::Nodelist => {
                let names = node_names(typed, v)?;
                hostlist::hosts(&names)
                    .map_err(|why| RequestError::invalid_value(typed, v, why))?;
                self.nodelist = Some(names);
            }
            Opt::Begin => self.begin = Some(moment(typed, v)?),
            Opt::Deadline => self.deadline = Some(moment(typed, v)?),
            Opt::JobName => self.job_name = Some(text(typed, v)?),
            Opt::Output => self.output = Some(file_name(typed, v)?),
            Opt::Error => self.error = Some(file_name(typed, v)?),
            Opt::Wrap => {
                if place == Place::Script {
                    return Err(RequestError::UnsupportedOption {
                        option: typed.to_string(),
                        reason: "--wrap belongs on the command line, not in a job script".into(),
                    });
                }
                self.wrap = Some(text(typed, v)?)
            }
            Opt::Chdir => self.chdir = Some(text(typed, v)?),
            Opt::Export => self.export = Some(text(typed, v)?),
            Opt::MailType => self.mail_type = Some(text(typed, v)?),
            Opt::MailUser => self.mail_user = Some(text(typed, v)?),
            Opt::Comment => self.comment = Some(text(typed, v)?),
            Opt::Constraint => self.constraint = Some(text(typed, v)?),
            Opt::Exclusive => {
                self.sharing = Some(
                    NodeSharing::parse(value)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::Signal => {
                self.signal = Some(
                    WarnSignal::parse(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::Requeue => self.requeue = Some(true),
            Opt::NoRequeue => self.requeue = Some(false),
            Opt::OpenMode => {
                self.open_mode = Some(
                    OpenMode::parse(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::Nice => {
                self.nice = Some(
                    parse_nice(value)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::Reservation => self.reservation = Some(text(typed, v)?),
            Opt::Wckey => self.wckey = Some(text(typed, v)?),
            Opt::Exclude => self.exclude = Some(node_names(typed, v)?),
            Opt::Input => self.input = Some(file_name(typed, v)?),
            Opt::NoKill => {
                // As sbatch: no value or `set` turns it on, `off` or `no` off.
                self.no_kill = Some(match value.map(str::to_ascii_lowercase).as_deref() {
                    None | Some("set") => true,
                    Some("off" | "no") => false,
                    Some(_) => {
                        return Err(RequestError::invalid_value(typed, v, "use set, off or no"))
                    }
                })
            }
            Opt::Dependency => self.dependency = Some(text(typed, v)?),
            Opt::KillOnInvalidDep => {
                self.kill_on_invalid_dep = Some(match v.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(RequestError::invalid_value(typed, v, "use yes or no")),
                })
            }
            Opt::Propagate => self.propagate = Some(parse_propagate(typed, value)?),
            // As sbatch: both set how the job shares its nodes, the later one winning.
            Opt::Oversubscribe => self.sharing = Some(NodeSharing::Oversubscribe),
            // As sbatch: 0 or 1 (stricter: no sign, space or empty value).
            Opt::WaitAllNodes => {
                self.wait_all_nodes = Some(match v {
                    "0" => false,
                    "1" => true,
                    _ => {
                        return Err(RequestError::invalid_value(
                            typed,
                            v,
                            "use 1 (start once every node is ready) or 0 (once the first is)",
                        ))
                    }
                })
            }
            Opt::UseMinNodes => self.use_min_nodes = true,
            Opt::SpreadJob => self.spread_job = true,
            Opt::DelayBoot => {
                parse_delay_boot(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.delay_boot = Some(v.to_string());
            }
            Opt::McsLabel => self.mcs_label = Some(text(typed, v)?),
            Opt::Contiguous => self.contiguous = true,
            Opt::Extra => self.extra = Some(text(typed, v)?),
            Opt::Priority => {
                self.priority = Some(
                    parse_priority(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::GresFlags => {
                self.gres_flags = Some(
                    GresFlags::parse(v)
                        .map_err(|reason| RequestError::invalid_value(typed, v, reason))?,
                )
            }
            Opt::AcctgFreq => {
                check_acctg_freq(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.acctg_freq = Some(v.to_string());
            }
            Opt::Distribution => {
                parse_distribution(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.distribution = Some(v.to_string());
            }
            Opt::MemBind => {
                parse_mem_bind(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.mem_bind = Some(match self.mem_bind.take() {
                    Some(earlier) => then_mem_bind(&earlier, v),
                    None => v.to_string(),
                });
            }
            Opt::GpuBind => {
                parse_gpu_bind(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.gpu_bind = Some(v.to_string());
            }
            Opt::GpuFreq => {
                check_gpu_freq(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.gpu_freq = Some(v.to_string());
            }
            Opt::CpuFreq => {
                cpu_freq_request(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.cpu_freq = Some(v.to_string());
            }
            Opt::Profile => {
                parse_profile(v).map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.profile = Some(v.to_string());
            }
            Opt::Switches => {
                parse_switches(v)
                    .map_err(|reason| RequestError::invalid_value(typed, v, reason))?;
                self.switches = Some(v.to_string());
            }
            Opt::Container => self.container = Some(text(typed, v)?),
            Opt::ContainerId => self.container_id = Some(text(typed, v)?),
            Opt::IgnorePbs => self.ignore_pbs = true,
            Opt::GetUserEnv => {
                // sbatch's strtol: seconds, then S or L (the login shell's mode); slurmd
                // ignores both and loads the environment its own way.
                if let Some(text) = value {
                    let mode = text.trim_start_matches(|c: char| c.is_ascii_digit());
                    if !matches!(mode, "" | "S" | "s" | "L" | "l") {
                        return Err(RequestError::invalid_value(
                            typed,
                            text,
                            "use seconds, optionally followed by S or L",
                        ));
                    }
                }
                self.get_user_env = true;
            }
            Opt::Hold => self.hold = true,
            Opt::Array => self.array = Some(ArraySpec::parse_option(typed, v)?),
            Opt::Licenses => self.licenses = Some(Licenses::parse_option(typed, v)?),
            Opt::Parsable => self.parsable = true,
            Opt::Wait => self.wait = true,
            Opt::Quiet => self.quiet = true,
            Opt::TestOnly => self.test_only = true,
            Opt::Verbose => {}
            Opt::Help => self.help = true,
        }
        Ok(())
    }

    /// The GPU options given in this place, by name.
    fn gpu_sources(&self) -> Vec<&'static str> {
        let mut sources = Vec::new();
        if self.gres.as_ref().is_some_and(|g| g.gpu.is_some()) {
            sources.push("--gres=gpu");
        }
        if self.gpus.is_some() {
            sources.push("--gpus");
        }
        if self.gpus_per_node.is_some() {
            sources.push("--gpus-per-node");
        }
        if self.gpus_per_task.is_some() {
            sources.push("--gpus-per-task");
        }
        sources
    }

    /// The memory options given in this place, by name.
    fn memory_sources(&self) -> Vec<&'static str> {
        [
            (self.mem.is_some(), "--mem"),
            (self.mem_per_cpu.is_some(), "--mem-per-cpu"),
            (self.mem_per_gpu.is_some(), "--mem-per-gpu"),
        ]
        .into_iter()
        .filter_map(|(given, name)| given.then_some(name))
        .collect()
    }

    /// Options that exclude each other within one place.
    fn check_exclusive(&self) -> Result<(), RequestError> {
        for sources in [self.memory_sources(), self.gpu_sources()] {
            if let [first, second, ..] = sources.as_slice() {
                return Err(RequestError::Conflict {
                    first: (*first).into(),
                    second: (*second).into(),
                });
            }
        }
        Ok(())
    }

    /// `--threads-per-core`, or the one `--hint` sets.
    fn job_threads_per_core(&self) -> Option<u32> {
        self.threads_per_core.or_else(|| {
            Hint::parse(self.hint.as_ref()?)
                .ok()?
                .effect()
                .threads_per_core
        })
    }

    /// `--option` reset by an input variable's off value, as sbatch resets it: cleared here,
    /// and in the script when merged. Only the on/off options bursar reads from variables.
    fn reset(&mut self, option: &str) -> Result<(), RequestError> {
        let opt = match option {
            "--requeue" => Opt::Requeue,
            "--no-requeue" => Opt::NoRequeue,
            "--wait" => Opt::Wait,
            "--spread-job" => Opt::SpreadJob,
            "--use-min-nodes" => Opt::UseMinNodes,
            // an empty list (SBATCH_TRES_PER_TASK=)
            "--tres-per-task" => Opt::TresPerTask,
            // sbatch reads SBATCH_IGNORE_PBS before the script, whose own setting stands
            "--ignore-pbs" => return Ok(()),
            _ => {
                return Err(RequestError::Invalid(format!(
                    "{option} cannot be reset by a variable"
                )))
            }
        };
        self.clear(opt);
        self.resets.push(opt);
        Ok(())
    }

    /// The on/off option `opt` unset.
    fn clear(&mut self, opt: Opt) {
        match opt {
            // both write one setting
            Opt::Requeue | Opt::NoRequeue => self.requeue = None,
            Opt::Wait => self.wait = false,
            Opt::SpreadJob => self.spread_job = false,
            Opt::UseMinNodes => self.use_min_nodes = false,
            Opt::TresPerTask => self.tres_per_task = None,
            _ => {}
        }
    }

    /// The command line over the script, option by option (see the module docs for the
    /// memory and GPU groups).
    fn merge(cli: Directives, mut script: Directives) -> Directives {
        for opt in &cli.resets {
            script.clear(*opt);
        }
        if !cli.memory_sources().is_empty() {
            script.mem = None;
            script.mem_per_cpu = None;
            script.mem_per_gpu = None;
        }
        if cli.gres.is_some() {
            script.gres = None;
        }
        if !cli.gpu_sources().is_empty() {
            script.gpus = None;
            script.gpus_per_node = None;
            script.gpus_per_task = None;
            if let Some(gres) = &mut script.gres {
                gres.gpu = None;
            }
        }
        let mut notes = script.notes;
        notes.extend(cli.notes);
        Directives {
            account: cli.account.or(script.account),
            partition: cli.partition.or(script.partition),
            qos: cli.qos.or(script.qos),
            clusters: cli.clusters.or(script.clusters),
            nodes: cli.nodes.or(script.nodes),
            ntasks: cli.ntasks.or(script.ntasks),
            ntasks_per_node: cli.ntasks_per_node.or(script.ntasks_per_node),
            cpus_per_task: cli.cpus_per_task.or(script.cpus_per_task),
            mem: cli.mem.or(script.mem),
            mem_per_cpu: cli.mem_per_cpu.or(script.mem_per_cpu),
            mem_per_gpu: cli.mem_per_gpu.or(script.mem_per_gpu),
            cpus_per_gpu: cli.cpus_per_gpu.or(script.cpus_per_gpu),
            mincpus: cli.mincpus.or(script.mincpus),
            hint: cli.hint.or(script.hint),
            threads_per_core: cli.threads_per_core.or(script.threads_per_core),
            ntasks_per_core: cli.ntasks_per_core.or(script.ntasks_per_core),
            ntasks_per_gpu: cli.ntasks_per_gpu.or(script.ntasks_per_gpu),
            gpus_per_task: cli.gpus_per_task.or(script.gpus_per_task),
            gres: cli.gres.or(script.gres),
            gpus: cli.gpus.or(script.gpus),
            gpus_per_node: cli.gpus_per_node.or(script.gpus_per_node),
            time: cli.time.or(script.time),
            job_name: cli.job_name.or(script.job_name),
            output: cli.output.or(script.output),
            error: cli.error.or(script.error),
            wrap: cli.wrap.or(script.wrap),
            chdir: cli.chdir.or(script.chdir),
            export: cli.export.or(script.export),
            mail_type: cli.mail_type.or(script.mail_type),
            mail_user: cli.mail_user.or(script.mail_user),
            comment: cli.comment.or(script.comment),
            constraint: cli.constraint.or(script.constraint),
            // --exclusive[=MODE] and --oversubscribe: one setting, the command line's
            sharing: cli.sharing.or(script.sharing),
            gres_flags: cli.gres_flags.or(script.gres_flags),
            acctg_freq: cli.acctg_freq.or(script.acctg_freq),
            distribution: cli.distribution.or(script.distribution),
            mem_bind: match (script.mem_bind, cli.mem_bind) {
                (Some(script), Some(cli)) => Some(then_mem_bind(&script, &cli)),
                (script, cli) => cli.or(script),
            },
            gpu_bind: cli.gpu_bind.or(script.gpu_bind),
            gpu_freq: cli.gpu_freq.or(script.gpu_freq),
            cpu_freq: cli.cpu_freq.or(script.cpu_freq),
            profile: cli.profile.or(script.profile),
            switches: cli.switches.or(script.switches),
            container: cli.container.or(script.container),
            container_id: cli.container_id.or(script.container_id),
            get_user_env: cli.get_user_env || script.get_user_env,
            umask: cli.umask.or(script.umask),
            ignore_pbs: cli.ignore_pbs || script.ignore_pbs,
            wait_all_nodes: cli.wait_all_nodes.or(script.wait_all_nodes),
            use_min_nodes: cli.use_min_nodes || script.use_min_nodes,
            spread_job: cli.spread_job || script.spread_job,
            delay_boot: cli.delay_boot.or(script.delay_boot),
            mcs_label: cli.mcs_label.or(script.mcs_label),
            // taken and applied into -c and --gpus-per-task before the merge (tres_per_task)
            tres_per_task: None,
            contiguous: cli.contiguous || script.contiguous,
            extra: cli.extra.or(script.extra),
            priority: cli.priority.or(script.priority),
            signal: cli.signal.or(script.signal),
            requeue: cli.requeue.or(script.requeue),
            open_mode: cli.open_mode.or(script.open_mode),
            nice: cli.nice.or(script.nice),
            reservation: cli.reservation.or(script.reservation),
            wckey: cli.wckey.or(script.wckey),
            exclude: cli.exclude.or(script.exclude),
            input: cli.input.or(script.input),
            no_kill: cli.no_kill.or(script.no_kill),
            dependency: cli.dependency.or(script.dependency),
            kill_on_invalid_dep: cli.kill_on_invalid_dep.or(script.kill_on_invalid_dep),
            begin: cli.begin.or(script.begin),
            deadline: cli.deadline.or(script.deadline),
            time_min: cli.time_min.or(script.time_min),
            tmp: cli.tmp.or(script.tmp),
            prefer: cli.prefer.or(script.prefer),
            nodelist: cli.nodelist.or(script.nodelist),
            propagate: cli.propagate.or(script.propagate),
            hold: cli.hold || script.hold,
            array: cli.array.or(script.array),
            licenses: cli.licenses.or(script.licenses),
            parsable: cli.parsable || script.parsable,
            wait: cli.wait || script.wait,
            quiet: cli.quiet || script.quiet,
            test_only: cli.test_only || script.test_only,
            help: cli.help || script.help,
            notes,
            // applied to the script above; a merged request has none left to apply
            resets: Vec::new(),
        }
    }

    /// sbatch's defaults and adjustments (`_opt_verify`), then the request; times are read
    /// on `clock`.
    fn resolve(mut self, clock: &Clock) -> Result<SbatchCommand, RequestError> {
        let threads_per_core = self.job_threads_per_core();
        let hint = match self.hint.take() {
            Some(text) => Some(
                Hint::parse(&text)
                    .map_err(|reason| RequestError::invalid_value("--hint", &text, reason))?,
            ),
            None => None,
        };
        // -N itself (-w below sets a node count too)
        let nodes_given = self.nodes.is_some();
        // -w: at least the nodes it names (sbatch's `_opt_verify`), so priced and pinned;
        // fewer tasks than names keep as many names as tasks, as sbatch keeps them.
        if let Some(list) = &self.nodelist {
            let names = hostlist::hosts(list)
                .map_err(|why| RequestError::invalid_value("--nodelist", list, why))?;
            let mut named = u32::try_from(names.len()).unwrap_or(u32::MAX);
            if let Some(tasks) = self.ntasks.filter(|n| (1..named).contains(n)) {
                let kept = hostlist::first_sorted(&names, tasks as usize).join(",");
                self.notes.push(format!(
                    "can't run {tasks} task(s) on the {named} nodes --nodelist={list} names: \
                     the job runs on {kept}, as sbatch keeps them"
                ));
                self.nodelist = Some(kept);
                named = tasks;
            }
            self.nodes = Some(match self.nodes {
                // sbatch 22.05 refuses this, later ones run the job on some of the names:
                // which, and so what it costs, bursar cannot tell.
                Some((_, max)) if max < named => {
                    return Err(RequestError::Invalid(format!(
                        "--nodelist names {named} nodes and --nodes allows at most {max}: name \
                         only the nodes the job should run on"
                    )))
                }
                Some((min, max)) => (min.max(named), max),
                None => (named, named),
            });
        }
        let mut notes = self.notes;
        let mut place = |option: &str, moment: Option<Moment>, what: &str| {
            let Some(moment) = moment else {
                return Ok(None);
            };
            let at = moment
                .at(clock)
                .map_err(|why| RequestError::invalid_value(option, moment.text(), why))?;
            notes.push(format!(
                "{option}={}: {what} {}",
                moment.text(),
                clock.show(at)
            ));
            Ok::<_, RequestError>(Some(at))
        };
        let begin = place("--begin", self.begin, "the job waits until")?;
        let deadline = place(
            "--deadline",
            self.deadline,
            "Slurm ends the job unstarted if it cannot end by",
        )?;
        let (mut nodes, max_nodes) = self.nodes.unwrap_or((1, 1));
        // The nodes the tasks need at --ntasks-per-node each: without -N, what Slurm gives the
        // job; with a range, the fewest of it that hold them.
        let needed = (self.ntasks)
            .zip(self.ntasks_per_node)
            .and_then(|(ntasks, per_node)| nodes_for_tasks(ntasks, per_node));
        match (self.nodes, needed) {
            (None, Some(needed)) => nodes = needed,
            (Some((min, max)), Some(needed)) if max > min => nodes = needed.clamp(min, max),
            _ => {}
        }
        if max_nodes > nodes {
            let min = self.nodes.map_or(nodes, |(min, _)| min);
            notes.push(if nodes == min {
                format!(
                    "--nodes={min}-{max_nodes}: bursar prices and runs the job on the minimum, \
                     {nodes} node(s)"
                )
            } else {
                format!(
                    "--nodes={min}-{max_nodes}: bursar prices and runs the job on {nodes} \
                     node(s), the fewest of the range that hold its tasks"
                )
            });
        }
        let ntasks = match (self.ntasks, self.ntasks_per_node) {
            (Some(n), _) => {
                if self.nodes.is_some() && n >= 1 && n < nodes {
                    notes.push(format!(
                        "can't run {n} task(s) on {nodes} nodes: the job gets {n} node(s), as \
                         sbatch does"
                    ));
                    nodes = n;
                }
                n
            }
            (None, Some(per_node)) => nodes.checked_mul(per_node).ok_or_else(|| {
                RequestError::Invalid("--nodes × --ntasks-per-node is too large".into())
            })?,
            // sbatch's _opt_verify: with -N N and no -n, a task per thread the job asks for
            // on each node.
            (None, None) => match (self.nodes, threads_per_core) {
                (Some((min, max)), Some(threads)) if min == max => {
                    nodes.checked_mul(threads).ok_or_else(|| {
                        RequestError::Invalid("--nodes × --threads-per-core is too large".into())
                    })?
                }
                _ => nodes,
            },
        };
        let memory = match (self.mem, self.mem_per_cpu, self.mem_per_gpu) {
            (Some(mb), _, _) => Some(MemoryRequest::PerNode(mb)),
            (None, Some(mb), _) => Some(MemoryRequest::PerCpu(mb)),
            (None, None, Some(mb)) => Some(MemoryRequest::PerGpu(mb)),
            (None, None, None) => None,
        };
        let (gres_gpu, other_gres) = match self.gres {
            Some(list) => (list.gpu, list.other),
            None => (None, Vec::new()),
        };
        for entry in &other_gres {
            notes.push(format!(
                "--gres {entry}: forwarded as given, not priced (bursar prices GPUs only)"
            ));
        }
        let gpu = gres_gpu
            .map(|g| (g, GpuPer::PerNode))
            .or(self.gpus.map(|g| (g, GpuPer::PerJob)))
            .or(self.gpus_per_node.map(|g| (g, GpuPer::PerNode)))
            .or(self.gpus_per_task.map(|g| (g, GpuPer::PerTask)));
        // sbatch refuses GPUs per task without a task count or node count ("Invalid generic
        // resource (gres) specification", seen on 22.05.8 and 24.11.5, with -w too); with -N
        // it runs a task per node.
        if matches!(gpu, Some((_, GpuPer::PerTask))) && self.ntasks.is_none() && !nodes_given {
            return Err(RequestError::Invalid(
                "GPUs per task (--gpus-per-task, or --tres-per-task's gres/gpu) need a task \
                 count: give -n (or -N), as sbatch refuses them without (\"Invalid generic \
                 resource (gres) specification\")"
                    .into(),
            ));
        }
        let gpus = gpu
            .filter(|((_, count), _)| *count > 0)
            .map(|((kind, count), per)| GpuRequest { count, per, kind });
        // Slurm derives the tasks from the GPUs, or the GPUs from the tasks.
        let (ntasks, gpus, gpus_from_tasks) = match self.ntasks_per_gpu {
            Some(per_gpu) => {
                let exact = match self.nodes {
                    // as lowered to -n above
                    Some((min, max)) if min == max => Some(nodes),
                    Some((min, max)) => {
                        return Err(RequestError::Invalid(format!(
                            "--ntasks-per-gpu with --nodes={min}-{max}: Slurm counts the tasks \
                             and GPUs on a node count it knows; give -N without a range"
                        )))
                    }
                    None => None,
                };
                // As Slurm: with GPUs, their count × N tasks, whatever -n says.
                let given = self.ntasks.filter(|_| gpus.is_none());
                let (tasks, gpus, derived) = ntasks_per_gpu_shape(per_gpu, given, exact, gpus);
                if let (Some(asked), Some(tasks)) = (self.ntasks, tasks) {
                    if asked != tasks && !derived {
                        notes.push(format!(
                            "--ntasks={asked}: --ntasks-per-gpu={per_gpu} with the job's GPUs \
                             makes {tasks} tasks, which Slurm runs in its place; bursar prices \
                             and sends {tasks}"
                        ));
                    }
                }
                (tasks.unwrap_or(ntasks), gpus, derived)
            }
            None => (ntasks, gpus, false),
        };
        match self.sharing {
            Some(NodeSharing::WholeNodes) => notes.push(
                "--exclusive: the job gets whole nodes and is priced for every CPU and GPU of \
                 each, as Slurm charges them"
                    .into(),
            ),
            Some(NodeSharing::Mode(mode)) => notes.push(format!(
                "{}: Slurm keeps {} but allocates and charges the job only what it asks for, \
                 so it is priced so",
                mode.option(),
                match mode {
                    ExclusiveMode::User => "other users' jobs off its nodes",
                    ExclusiveMode::Mcs =>
                        "jobs of other MCS labels off its nodes (where the cluster has an \
                         MCSPlugin)",
                    ExclusiveMode::Topo =>
                        "other jobs off its topology segment (where the cluster has \
                         TopologyPlugin=topology/block)",
                }
            )),
            Some(NodeSharing::Oversubscribe) | None => {}
        }
        if self.time == Some(TimeLimit::Unlimited) {
            notes.push(
                "--time=UNLIMITED: the job is priced and run at the partition's maximum time \
                 (refused where the partition has none)"
                    .into(),
            );
        }
        if memory.is_some_and(|m| m.is_whole_node()) {
            notes.push(
                "--mem=0 asks for all the memory of each node: priced at the partition's node \
                 memory where bursar's configuration gives it (node_mem_mb), else not at all"
                    .into(),
            );
        }
        let request = JobRequest {
            account: self.account,
            partition: self.partition,
            qos: self.qos,
            clusters: self.clusters.unwrap_or_default(),
            nodes,
            // Any -N, a range included: the job runs on the count it was priced for (a range
            // sent as such would let Slurm place more nodes than were priced, or a CPU-only
            // job beyond the range's maximum).
            nodes_exact: self.nodes.is_some(),
            ntasks,
            ntasks_per_node: self.ntasks_per_node,
            cpus_per_task: self.cpus_per_task.unwrap_or(1),
            cpus_per_task_given: self.cpus_per_task.is_some(),
            cpus_per_gpu: self.cpus_per_gpu,
            min_cpus_per_node: self.mincpus,
            hint,
            threads_per_core: self.threads_per_core,
            ntasks_per_core: self.ntasks_per_core,
            ntasks_per_gpu: self.ntasks_per_gpu,
            gpus_from_tasks,
            memory,
            gpus,
            other_gres,
            licenses: self.licenses,
            time_limit_min: self.time.and_then(TimeLimit::minutes),
            time_unlimited: self.time == Some(TimeLimit::Unlimited),
            job_name: self.job_name,
            output: self.output,
            error: self.error,
            script: None,
            wrap: self.wrap,
            working_dir: self.chdir,
            export: self.export,
            mail_type: self.mail_type,
            mail_user: self.mail_user,
            comment: self.comment,
            constraint: self.constraint,
            exclusive: self.sharing == Some(NodeSharing::WholeNodes),
            hold: self.hold,
            array: self.array,
            slurm: SlurmOptions {
                signal: self.signal,
                requeue: self.requeue,
                open_mode: self.open_mode,
                nice: self.nice,
                reservation: self.reservation,
                wckey: self.wckey,
                exclude: self.exclude,
                input: self.input,
                no_kill: self.no_kill == Some(true),
                dependency: self.dependency,
                kill_on_invalid_dep: self.kill_on_invalid_dep,
                begin,
                deadline,
                time_min: self.time_min.and_then(TimeLimit::minutes),
                tmp_mb: self.tmp,
                prefer: self.prefer,
                nodelist: self.nodelist,
                oversubscribe: self.sharing == Some(NodeSharing::Oversubscribe),
                exclusive: match self.sharing {
                    Some(NodeSharing::Mode(mode)) => Some(mode),
                    _ => None,
                },
                gres_flags: self.gres_flags,
                acctg_freq: self.acctg_freq,
                distribution: self.distribution,
                mem_bind: self.mem_bind,
                gpu_bind: self.gpu_bind,
                gpu_freq: self.gpu_freq,
                cpu_freq: self.cpu_freq,
                profile: self.profile,
                switches: self.switches,
                container: self.container,
                container_id: self.container_id,
                wait_all_nodes: self.wait_all_nodes,
                use_min_nodes: self.use_min_nodes,
                spread_job: self.spread_job,
                delay_boot: self.delay_boot,
                mcs_label: self.mcs_label,
                contiguous: self.contiguous,
                extra: self.extra,
                // As sbatch: `--priority=0` asks nothing.
                priority: self.priority.filter(|p| *p != 0),
            },
            ..JobRequest::default()
        };
        Ok(SbatchCommand {
            request,
            parsable: self.parsable,
            wait: self.wait,
            quiet: self.quiet,
            test_only: self.test_only,
            notes,
            propagate: self.propagate,
            get_user_env: self.get_user_env,
            umask: self.umask.map(|mask| format!("{mask:04o}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directive_words_follow_get_argument() {
        let w = |line: &str| split_directive(line).unwrap();
        assert_eq!(w(" --time=5 -J x"), vec!["--time=5", "-J", "x"]);
        assert_eq!(w(" --job-name=\"a b\""), vec!["--job-name=a b"]);
        assert_eq!(w(" --job-name='a \"b'"), vec!["--job-name=a \"b"]);
        assert_eq!(w(" --job-name=a\\ b"), vec!["--job-name=a", "b"]);
        assert_eq!(w(" -J x # a comment -p y"), vec!["-J", "x"]);
        assert_eq!(w(" -J x#y -p z"), vec!["-J", "x"]);
        assert_eq!(w(" -J \"x#y\""), vec!["-J", "x#y"]);
        assert_eq!(w(" -J \\#x"), vec!["-J", "#x"]);
        assert_eq!(w(" -J \"\" -p z"), vec!["-J"]);
        assert_eq!(w("--time=5"), vec!["--time=5"]);
        assert!(w("").is_empty());
        assert!(split_directive(" -J \"x").is_err());
        assert!(split_directive(" : -N 2").is_err());
    }
}
