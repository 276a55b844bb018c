//! Synthetic `sacct --parsable2` output for benchmarks and tests: realistic, deterministic for
//! a seed, streamed in constant memory.
//!
//! The columns are those of the reference capture `sacct-narrow.psv` ([`HEADER`]). Each of the
//! `records` allocation lines is followed by its steps, as sacct prints them. The mix follows
//! what a real cluster shows (DESIGN.md's end-state policy needs every state): mostly
//! COMPLETED, some FAILED, TIMEOUT, `CANCELLED by <uid>`, OUT_OF_MEMORY, NODE_FAIL, requeued
//! runs (a REQUEUED record then the rerun, same `JobIDRaw`, later `Submit`) and jobs cancelled
//! before they started; array tasks (`123_4`, the master id going to the last task, as Slurm
//! does), het components (`11+0`, `11+1`), GPU jobs on a `gpu` partition, several QOS, memory
//! printed as sacct converts it (`1000M`, `4G`, `2.50G`). Times are printed in UTC (as sacct
//! run with `TZ=UTC`) and submissions never go back in time.

use std::io::{self, BufWriter, Write};

use crate::sacct::format_iso_utc;

/// The header line (without its newline): the columns of `sacct-narrow.psv`.
pub const HEADER: &str = "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|ExitCode|\
DerivedExitCode|Submit|Start|End|ElapsedRaw|AllocTRES|AllocCPUS|ReqTRES|ReqMem|NNodes|NodeList|\
TimelimitRaw|JobName";

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Allocation records (steps come in addition).
    pub records: u64,
    pub seed: u64,
    pub clusters: Vec<String>,
    /// Unix seconds of the first submission.
    pub start: i64,
    /// When set, the submissions are spread evenly over this many days from `start` (the last
    /// one near `start + days`), whatever `records`; when unset, they come a few seconds apart
    /// (0–29 s, about 4 months per million records).
    pub days: Option<u32>,
    pub accounts: u32,
    pub users: u32,
}

impl Default for SynthConfig {
    fn default() -> SynthConfig {
        SynthConfig {
            records: 1000,
            seed: 1,
            clusters: vec!["onprem".to_string(), "cloud".to_string()],
            start: 1_767_225_600, // 2026-01-01T00:00:00Z
            days: None,
            accounts: 200,
            users: 1000,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynthStats {
    pub records: u64,
    pub steps: u64,
}

/// A tiny deterministic PRNG (SplitMix64): good enough for test data, no dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Writes `config.records` allocation records (and their steps) with a header to `out`.
pub fn write_sacct<W: Write>(config: &SynthConfig, out: W) -> io::Result<SynthStats> {
    if config.clusters.is_empty() || config.accounts == 0 || config.users == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "need at least one cluster, account and user",
        ));
    }
    let mut out = BufWriter::with_capacity(1 << 16, out);
    out.write_all(HEADER.as_bytes())?;
    out.write_all(b"\n")?;
    let mut generator = Generator::new(config);
    let mut line = Vec::with_capacity(512);
    while generator.stats.records < config.records {
        generator.submission(config.records - generator.stats.records, &mut line);
        out.write_all(&line)?;
        line.clear();
    }
    out.flush()?;
    Ok(generator.stats)
}

/// The whole output in memory (tests and small benchmarks).
pub fn sacct_text(config: &SynthConfig) -> String {
    let mut out = Vec::new();
    write_sacct(config, &mut out).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("the generator writes ASCII")
}

const NODES_PER_CLUSTER: u32 = 64;
const JOB_NAMES: [&str; 10] = [
    "train",
    "sim",
    "md-run",
    "align",
    "preprocess",
    "eval",
    "bash",
    "render",
    "assemble",
    "fit",
];
const STEP_NAMES: [&str; 4] = ["srun", "hostname", "python", "mpirun"];
const GPU_TYPES: [&str; 2] = ["a100", "h100"];
const MEM_PER_CPU_MB: [u64; 6] = [500, 1000, 1024, 2000, 2560, 4096];
const LIMITS_MIN: [u32; 8] = [10, 30, 60, 120, 240, 720, 1440, 2880];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Completed,
    Failed(u8),
    Timeout,
    Cancelled,
    OutOfMemory,
    NodeFail,
    Requeued,
    NeverStarted,
}

#[derive(Debug, Clone, Copy)]
enum Display {
    Plain,
    ArrayTask { array: u64, task: u32 },
    Het { leader: u64, offset: u32 },
}

/// One allocation record to print.
#[derive(Debug, Clone)]
struct Job {
    raw: u64,
    display: Display,
    cluster: usize,
    account: usize,
    user: usize,
    gpu_partition: bool,
    qos: &'static str,
    outcome: Outcome,
    /// uid that cancelled the job (the owner, sometimes root).
    canceller: u32,
    submit: i64,
    start: i64,
    elapsed: i64,
    cpus: u64,
    mem_mb: u64,
    gpus: u64,
    gpu_type: &'static str,
    nodes: u32,
    first_node: u32,
    limit_min: Option<u32>,
    name: &'static str,
    /// srun-only: a `.0` step and no batch step.
    interactive: bool,
}

struct Generator<'a> {
    config: &'a SynthConfig,
    rng: SplitMix64,
    /// Next free job id per cluster.
    next_id: Vec<u64>,
    node_prefix: Vec<String>,
    users: Vec<String>,
    accounts: Vec<String>,
    now: i64,
    stats: SynthStats,
}

impl<'a> Generator<'a> {
    fn new(config: &'a SynthConfig) -> Generator<'a> {
        let width = |n: u32| n.saturating_sub(1).max(1).to_string().len().max(3);
        let (uw, aw) = (width(config.users), width(config.accounts));
        Generator {
            config,
            rng: SplitMix64::new(config.seed),
            next_id: vec![1000; config.clusters.len()],
            node_prefix: config
                .clusters
                .iter()
                .map(|c| c.chars().take(2).collect())
                .collect(),
            users: (0..config.users).map(|u| format!("user{u:0uw$}")).collect(),
            accounts: (0..config.accounts)
                .map(|a| format!("proj{a:0aw$}"))
                .collect(),
            now: config.start,
            stats: SynthStats::default(),
        }
    }

    /// One submission (a job, an array, a het job or a requeued job), at most `budget` records.
    fn submission(&mut self, budget: u64, out: &mut Vec<u8>) {
        // Drawn either way, so that `days` changes the times and nothing else.
        let gap = self.rng.below(30) as i64;
        self.now = match self.config.days {
            None => self.now + gap,
            Some(days) => {
                let span = i128::from(days) * 86_400;
                let done = i128::from(self.stats.records);
                let total = i128::from(self.config.records.max(1));
                let at = self.config.start + (span * done / total) as i64;
                self.now.max(at + gap)
            }
        };
        let base = self.base_job();
        let roll = self.rng.below(100);
        if roll < 8 && budget >= 2 {
            self.array(base, budget, out);
        } else if roll < 11 && budget >= 2 {
            self.het(base, out);
        } else if roll < 13 && budget >= 2 {
            self.requeued(base, out);
        } else {
            let mut job = base;
            job.raw = self.take_ids(job.cluster, 1);
            self.emit(&job, out);
        }
    }

    fn take_ids(&mut self, cluster: usize, n: u64) -> u64 {
        let first = self.next_id[cluster];
        self.next_id[cluster] += n;
        first
    }

    /// A job with everything decided except its id.
    fn base_job(&mut self) -> Job {
        let rng = &mut self.rng;
        let cluster = rng.below(self.config.clusters.len() as u64) as usize;
        // A few users submit most jobs: the smaller of two draws skews towards low numbers.
        let users = u64::from(self.config.users);
        let user = rng.below(users).min(rng.below(users)) as usize;
        let accounts = u64::from(self.config.accounts);
        let primary = (user as u64).wrapping_mul(7919) % accounts;
        let account = if rng.chance(15) {
            (primary + 1 + user as u64 % 3) % accounts
        } else {
            primary
        } as usize;
        let gpu_partition = rng.chance(20);
        let qos = match rng.below(100) {
            0..=79 => "normal",
            80..=91 => "premium",
            _ => "standard",
        };
        let cpus = *rng.pick(&[1u64, 1, 1, 2, 2, 4, 4, 8, 16, 32, 64]);
        let nodes = if cpus >= 16 && rng.chance(30) {
            2 + rng.below(3) as u32
        } else {
            1
        };
        let mem_mb = if rng.chance(10) {
            7800
        } else {
            cpus * *rng.pick(&MEM_PER_CPU_MB)
        };
        let (gpus, gpu_type) = if gpu_partition {
            (*rng.pick(&[1u64, 1, 2, 2, 4, 8]), *rng.pick(&GPU_TYPES))
        } else {
            (0, "")
        };
        let limit_min = if rng.chance(10) {
            None
        } else {
            Some(*rng.pick(&LIMITS_MIN))
        };
        let outcome = match rng.below(1000) {
            0..=779 => Outcome::Completed,
            780..=849 => Outcome::Failed(1 + rng.below(3) as u8),
            850..=879 if limit_min.is_some() => Outcome::Timeout,
            850..=919 => Outcome::Cancelled,
            920..=949 => Outcome::NeverStarted,
            950..=974 => Outcome::OutOfMemory,
            _ => Outcome::NodeFail,
        };
        let submit = self.now;
        let wait = if rng.chance(10) {
            rng.below(3 * 3600)
        } else {
            rng.below(600)
        } as i64;
        let limit_s = i64::from(limit_min.unwrap_or(4320)) * 60;
        let elapsed = match outcome {
            Outcome::NeverStarted => 0,
            Outcome::Timeout => limit_s + rng.below(90) as i64,
            Outcome::Failed(_) | Outcome::OutOfMemory => rng.below(limit_s.min(1800) as u64) as i64,
            _ => 1 + rng.below(limit_s.min(6 * 3600) as u64) as i64,
        };
        let name = *rng.pick(&JOB_NAMES);
        let interactive = !gpu_partition && rng.chance(5);
        let first_node = rng.below(u64::from(NODES_PER_CLUSTER - nodes + 1)) as u32 + 1;
        let canceller = if rng.chance(10) {
            0
        } else {
            10_000 + user as u32
        };
        Job {
            raw: 0,
            display: Display::Plain,
            cluster,
            account,
            user,
            gpu_partition,
            qos,
            outcome,
            canceller,
            submit,
            start: submit + wait,
            elapsed,
            cpus,
            mem_mb,
            gpus,
            gpu_type,
            nodes,
            first_node,
            limit_min,
            name,
            interactive,
        }
    }

    /// Array tasks `A_0 … A_{k-1}`: raw ids `A+1 …` for all but the last, which gets `A`.
    fn array(&mut self, base: Job, budget: u64, out: &mut Vec<u8>) {
        let tasks = (2 + self.rng.below(7)).min(budget);
        let array = self.take_ids(base.cluster, tasks);
        for task in 0..tasks {
            let mut job = base.clone();
            job.raw = if task + 1 == tasks {
                array
            } else {
                array + 1 + task
            };
            job.display = Display::ArrayTask {
                array,
                task: task as u32,
            };
            job.start = base.start + self.rng.below(120) as i64;
            job.elapsed = match job.outcome {
                Outcome::NeverStarted | Outcome::Timeout => job.elapsed,
                _ => 1 + self.rng.below(job.elapsed.max(1) as u64) as i64,
            };
            job.interactive = false;
            self.emit(&job, out);
        }
    }

    /// Two het components sharing submit, start and end: `H+0` (raw `H`) and `H+1` (`H+1`).
    fn het(&mut self, base: Job, out: &mut Vec<u8>) {
        let leader = self.take_ids(base.cluster, 2);
        for offset in 0..2u32 {
            let mut job = base.clone();
            job.raw = leader + u64::from(offset);
            job.display = Display::Het { leader, offset };
            job.interactive = false;
            if offset == 1 {
                job.cpus = (job.cpus / 2).max(1);
                job.mem_mb = job.cpus * 1000;
                job.first_node = (job.first_node % NODES_PER_CLUSTER) + 1;
                job.nodes = 1;
            }
            self.emit(&job, out);
        }
    }

    /// A run that was requeued (state REQUEUED) and its rerun: same raw id, later Submit.
    fn requeued(&mut self, base: Job, out: &mut Vec<u8>) {
        let raw = self.take_ids(base.cluster, 1);
        let mut first = base.clone();
        first.raw = raw;
        first.outcome = Outcome::Requeued;
        first.elapsed = 1 + self.rng.below(3600) as i64;
        self.emit(&first, out);
        let mut rerun = base;
        rerun.raw = raw;
        rerun.submit = first.start + first.elapsed + 1;
        rerun.start = rerun.submit + 1 + self.rng.below(300) as i64;
        if rerun.outcome == Outcome::NeverStarted {
            rerun.outcome = Outcome::Completed;
            rerun.elapsed = 1 + self.rng.below(3600) as i64;
        }
        self.emit(&rerun, out);
    }

    fn emit(&mut self, job: &Job, out: &mut Vec<u8>) {
        self.job_line(job, out);
        self.stats.records += 1;
        if job.outcome == Outcome::NeverStarted {
            return;
        }
        let end = job.start + job.elapsed;
        let (step_state, step_exit) = step_outcome(job.outcome);
        if job.interactive {
            self.step_line(
                job,
                "0",
                STEP_NAMES[0],
                job.start,
                end,
                step_state,
                step_exit,
                out,
            );
            return;
        }
        self.step_line(
            job, "batch", "batch", job.start, end, step_state, step_exit, out,
        );
        let extra = self.rng.below(3);
        let mut at = job.start;
        for step in 0..extra {
            let len = self.rng.below((end - at).max(0) as u64 + 1) as i64;
            let name = *self.rng.pick(&STEP_NAMES);
            let index = ["0", "1", "2"][step as usize];
            self.step_line(job, index, name, at, at + len, b"COMPLETED", "0:0", out);
            at += len;
        }
    }

    fn job_line(&self, job: &Job, out: &mut Vec<u8>) {
        let started = job.outcome != Outcome::NeverStarted;
        let end = job.start + job.elapsed;
        push_num(out, job.raw);
        out.push(b'|');
        push_display(out, job, None);
        out.push(b'|');
        self.owner_fields(job, out);
        out.extend_from_slice(self.users[job.user].as_bytes());
        out.push(b'|');
        out.extend_from_slice(if job.gpu_partition {
            b"gpu|"
        } else {
            b"batch|"
        });
        out.extend_from_slice(job.qos.as_bytes());
        out.push(b'|');
        let (exit, derived): (&[u8], &[u8]) = match job.outcome {
            Outcome::Completed | Outcome::Timeout | Outcome::NodeFail | Outcome::Requeued => {
                (b"0:0", b"0:0")
            }
            Outcome::Cancelled | Outcome::NeverStarted => (b"0:0", b"0:0"),
            Outcome::Failed(code) => match code {
                1 => (b"1:0", b"1:0"),
                2 => (b"2:0", b"2:0"),
                _ => (b"3:0", b"3:0"),
            },
            Outcome::OutOfMemory => (b"0:125", b"0:125"),
        };
        match job.outcome {
            Outcome::Cancelled | Outcome::NeverStarted => {
                out.extend_from_slice(b"CANCELLED by ");
                push_num(out, u64::from(job.canceller));
            }
            other => out.extend_from_slice(job_state(other)),
        }
        out.push(b'|');
        out.extend_from_slice(exit);
        out.push(b'|');
        out.extend_from_slice(derived);
        out.push(b'|');
        push_time(out, job.submit);
        out.push(b'|');
        if started {
            push_time(out, job.start);
        } else {
            out.extend_from_slice(b"None");
        }
        out.push(b'|');
        // a job cancelled while pending ends when it is cancelled
        push_time(out, if started { end } else { job.start });
        out.push(b'|');
        push_num(out, job.elapsed as u64);
        out.push(b'|');
        if started {
            self.tres(job, true, true, out);
        }
        out.push(b'|');
        push_num(out, job.cpus);
        out.push(b'|');
        self.tres(job, true, false, out);
        out.push(b'|');
        push_mem(out, job.mem_mb);
        out.push(b'|');
        push_num(out, u64::from(job.nodes));
        out.push(b'|');
        if started {
            self.node_list(job, out);
        } else {
            out.extend_from_slice(b"None assigned");
        }
        out.push(b'|');
        match (started, job.limit_min) {
            (false, _) => out.extend_from_slice(b"Partition_Limit"),
            (true, Some(limit)) => push_num(out, u64::from(limit)),
            (true, None) => out.extend_from_slice(b"UNLIMITED"),
        }
        out.push(b'|');
        if let Display::ArrayTask { .. } = job.display {
            out.extend_from_slice(b"array-");
        }
        out.extend_from_slice(job.name.as_bytes());
        out.push(b'\n');
    }

    #[allow(clippy::too_many_arguments)]
    fn step_line(
        &mut self,
        job: &Job,
        step: &str,
        name: &str,
        start: i64,
        end: i64,
        state: &[u8],
        exit: &str,
        out: &mut Vec<u8>,
    ) {
        push_num(out, job.raw);
        out.push(b'.');
        out.extend_from_slice(step.as_bytes());
        out.push(b'|');
        push_display(out, job, Some(step));
        out.push(b'|');
        self.owner_fields(job, out);
        out.extend_from_slice(b"|||");
        out.extend_from_slice(state);
        out.push(b'|');
        out.extend_from_slice(exit.as_bytes());
        out.extend_from_slice(b"||");
        push_time(out, start);
        out.push(b'|');
        push_time(out, start);
        out.push(b'|');
        push_time(out, end);
        out.push(b'|');
        push_num(out, (end - start) as u64);
        out.push(b'|');
        self.tres(job, false, true, out);
        out.push(b'|');
        push_num(out, job.cpus);
        out.extend_from_slice(b"|||");
        push_num(out, u64::from(job.nodes));
        out.push(b'|');
        self.node_list(job, out);
        out.extend_from_slice(b"||");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
        self.stats.steps += 1;
    }

    /// `Cluster|Account|`
    fn owner_fields(&self, job: &Job, out: &mut Vec<u8>) {
        out.extend_from_slice(self.config.clusters[job.cluster].as_bytes());
        out.push(b'|');
        out.extend_from_slice(self.accounts[job.account].as_bytes());
        out.push(b'|');
    }

    /// A TRES string sorted as sacct prints it; `billing` only on job lines, the typed GPU
    /// entry only on allocations.
    fn tres(&self, job: &Job, billing: bool, typed: bool, out: &mut Vec<u8>) {
        if billing {
            // The first cluster bills like the reference onprem (CPU=1,Mem=0.25G,GRES/gpu=4),
            // the others like cloud (CPU=0.5,Mem=0.1G,GRES/gpu=10); Slurm floors the result
            // and omits a zero.
            let billing = if job.cluster == 0 {
                (job.cpus * 4096 + job.mem_mb + job.gpus * 16_384) / 4096
            } else {
                (job.cpus * 5120 + job.mem_mb + job.gpus * 102_400) / 10_240
            };
            if billing > 0 {
                out.extend_from_slice(b"billing=");
                push_num(out, billing);
                out.push(b',');
            }
        }
        out.extend_from_slice(b"cpu=");
        push_num(out, job.cpus);
        if job.gpus > 0 {
            if typed {
                out.extend_from_slice(b",gres/gpu:");
                out.extend_from_slice(job.gpu_type.as_bytes());
                out.push(b'=');
                push_num(out, job.gpus);
            }
            out.extend_from_slice(b",gres/gpu=");
            push_num(out, job.gpus);
        }
        out.extend_from_slice(b",mem=");
        push_mem(out, job.mem_mb);
        out.extend_from_slice(b",node=");
        push_num(out, u64::from(job.nodes));
    }

    /// `op-n3` or `op-n[3-4]`.
    fn node_list(&self, job: &Job, out: &mut Vec<u8>) {
        out.extend_from_slice(self.node_prefix[job.cluster].as_bytes());
        out.extend_from_slice(b"-n");
        if job.nodes == 1 {
            push_num(out, u64::from(job.first_node));
        } else {
            out.push(b'[');
            push_num(out, u64::from(job.first_node));
            out.push(b'-');
            push_num(out, u64::from(job.first_node + job.nodes - 1));
            out.push(b']');
        }
    }
}

fn job_state(outcome: Outcome) -> &'static [u8] {
    match outcome {
        Outcome::Completed => b"COMPLETED",
        Outcome::Failed(_) => b"FAILED",
        Outcome::Timeout => b"TIMEOUT",
        Outcome::Cancelled | Outcome::NeverStarted => b"CANCELLED",
        Outcome::OutOfMemory => b"OUT_OF_MEMORY",
        Outcome::NodeFail => b"NODE_FAIL",
        Outcome::Requeued => b"REQUEUED",
    }
}

/// The batch step's state and exit code for a job outcome (a killed batch step shows
/// `CANCELLED` with signal 15, as in the reference capture).
fn step_outcome(outcome: Outcome) -> (&'static [u8], &'static str) {
    match outcome {
        Outcome::Completed => (b"COMPLETED", "0:0"),
        Outcome::Failed(1) => (b"FAILED", "1:0"),
        Outcome::Failed(2) => (b"FAILED", "2:0"),
        Outcome::Failed(_) => (b"FAILED", "3:0"),
        Outcome::OutOfMemory => (b"OUT_OF_MEMORY", "0:125"),
        Outcome::NodeFail => (b"NODE_FAIL", "0:0"),
        Outcome::Timeout | Outcome::Cancelled | Outcome::Requeued | Outcome::NeverStarted => {
            (b"CANCELLED", "0:15")
        }
    }
}

/// `1234`, `7_3`, `11+1`, with an optional `.step`.
fn push_display(out: &mut Vec<u8>, job: &Job, step: Option<&str>) {
    match job.display {
        Display::Plain => push_num(out, job.raw),
        Display::ArrayTask { array, task } => {
            push_num(out, array);
            out.push(b'_');
            push_num(out, u64::from(task));
        }
        Display::Het { leader, offset } => {
            push_num(out, leader);
            out.push(b'+');
            push_num(out, u64::from(offset));
        }
    }
    if let Some(step) = step {
        out.push(b'.');
        out.extend_from_slice(step.as_bytes());
    }
}

fn push_num(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

fn push_time(out: &mut Vec<u8>, at: i64) {
    let mut text = [0u8; 19];
    format_iso_utc(at, &mut text);
    out.extend_from_slice(&text);
}

/// Memory as sacct prints it without `--noconvert`: in G when that is exact to two decimals
/// (`4G`, `2.50G`), else in M (`1000M`, `7800M`).
fn push_mem(out: &mut Vec<u8>, mb: u64) {
    if mb >= 1024 && (mb * 100).is_multiple_of(1024) {
        let hundredths = mb * 100 / 1024;
        push_num(out, hundredths / 100);
        if !hundredths.is_multiple_of(100) {
            out.push(b'.');
            let frac = hundredths % 100;
            if frac < 10 {
                out.push(b'0');
            }
            push_num(out, frac);
        }
        out.push(b'G');
    } else {
        push_num(out, mb);
        out.push(b'M');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_printed_as_sacct_converts_it() {
        let show = |mb| {
            let mut out = Vec::new();
            push_mem(&mut out, mb);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(show(1000), "1000M");
        assert_eq!(show(1024), "1G");
        assert_eq!(show(2560), "2.50G");
        assert_eq!(show(7800), "7800M");
        assert_eq!(show(16_384), "16G");
        assert_eq!(show(1126), "1126M");
    }

    #[test]
    fn same_seed_same_output() {
        let config = SynthConfig {
            records: 300,
            ..SynthConfig::default()
        };
        assert_eq!(sacct_text(&config), sacct_text(&config));
        let other = SynthConfig {
            seed: 2,
            ..config.clone()
        };
        assert_ne!(sacct_text(&config), sacct_text(&other));
    }

    #[test]
    fn days_spread_the_submissions_and_change_nothing_else() {
        let config = SynthConfig {
            records: 2000,
            ..SynthConfig::default()
        };
        let spread = SynthConfig {
            days: Some(90),
            ..config.clone()
        };
        let submits = |text: &str| -> Vec<String> {
            text.lines()
                .skip(1)
                .map(|line| line.split('|').nth(10).unwrap().to_string())
                .collect()
        };
        let (plain, wide) = (sacct_text(&config), sacct_text(&spread));
        let (plain_submits, wide_submits) = (submits(&plain), submits(&wide));
        assert_eq!(plain_submits.len(), wide_submits.len());
        // Without `days` 2000 records take well under a day; with 90 they reach late March.
        assert!(plain_submits.last().unwrap().starts_with("2026-01-01"));
        let last = wide_submits.last().unwrap();
        assert!(
            last.as_str() > "2026-03-30" && last.as_str() < "2026-04-01",
            "{last}"
        );
        assert!(wide_submits[0].starts_with("2026-01-01"));
        // The job ids, accounts and states are those of the default run.
        let ids = |text: &str| -> Vec<String> {
            text.lines()
                .map(|line| {
                    let f: Vec<&str> = line.split('|').collect();
                    format!("{}|{}|{}|{}", f[0], f[3], f[7], f[13])
                })
                .collect()
        };
        assert_eq!(ids(&plain), ids(&wide));
    }

    #[test]
    fn numbers() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 12_345, u64::MAX] {
            push_num(&mut out, n);
            out.push(b' ');
        }
        assert_eq!(out, b"0 7 10 12345 18446744073709551615 ");
    }
}
