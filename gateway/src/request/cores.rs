//! Cores and hardware threads: `--hint`, `--threads-per-core`, `--ntasks-per-core`, and the
//! whole cores slurmctld allocates on nodes with more than one thread per core.
//!
//! Where a partition's nodes run several threads per core (`ThreadsPerCore=2`) and slurmctld
//! allocates whole cores (`SelectTypeParameters=CR_Core_Memory`, `CR_Core`, the default), a
//! job's CPUs on each node are rounded up to whole cores, and counted as every thread of
//! them: `-n 1` is allocated, and charged, 2 CPUs. Both 22.05.8 and 24.11.5 do this alike
//! (checked live on a node of 4 cores × 2 threads):
//!
//! | job | CPUs | memory (`--mem-per-cpu=1000`) |
//! |---|---|---|
//! | `-n 1`, `-n 3`, `-n 1 -c 3`, `-n 2 -c 3` | 2, 4, 4, 6 | 1000 per CPU allocated |
//! | `--hint=nomultithread` (`compute_bound`, `memory_bound`, `--threads-per-core=1`): `-n 1`, `-n 3`, `-n 1 -c 3` | 2, 6, 6 | 1000 per CPU asked for |
//! | `--ntasks-per-core=1`: `-n 3`, `-n 1 -c 2`, `-n 1 -c 3`, `-n 2 -c 3` | 6, 2, 4, 8 | per CPU allocated |
//! | `--ntasks-per-core=2` or `3`, `--threads-per-core=2`, `--hint=multithread` | as without | as without |
//!
//! slurmctld's rule (cons_tres `_cyclic_sync_core_bitmap`, `job_resources_get_node_cpu_cnt`):
//! each core gives a job `vpus` of its threads, the fewest of the node's threads per core, the
//! job's `--threads-per-core` and `--ntasks-per-core` × `-c`; a node's CPUs take
//! `ceil(cpus / vpus)` cores (with `--ntasks-per-core=1` each task takes its own
//! `ceil(c / vpus)`, and with `--ntasks-per-core=K` a core runs at most K tasks), counted as
//! every thread of each core; memory per CPU counts the job's threads of each core when it
//! asked for fewer than the node has, else every thread.
//!
//! Over several nodes slurmctld packs tasks onto whole cores (22.05 `dist_tasks_compute_c_b`:
//! `-N 2 -n 6` gets 4 + 2 tasks, 6 CPUs); bursar spreads the tasks evenly (3 + 3: 8 CPUs), an
//! upper bound that is exact on one node and for one thread per core.

use serde::Deserialize;

/// `--ntasks-per-core` that sbatch sends for `--hint=multithread`: Slurm's `INFINITE16`, any
/// number of tasks on a core.
pub const ANY_TASKS_PER_CORE: u32 = 65_535;

/// What `--hint` asks of the allocation: sbatch turns it into these before submitting
/// (`verify_hint`), and sets `SLURM_HINT` to the text as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HintEffect {
    /// `compute_bound`, `memory_bound`, `nomultithread`: one thread per core.
    pub threads_per_core: Option<u32>,
    /// `multithread`: any number of tasks per core ([`ANY_TASKS_PER_CORE`]).
    pub ntasks_per_core: Option<u32>,
}

/// The hints sbatch knows, for messages.
const HINTS: &str = "compute_bound, memory_bound, multithread, nomultithread";

/// Reads `--hint` as sbatch's `verify_hint` does: words separated by `,` or `;`, any case,
/// each setting what it implies in order (`nomultithread,multithread` ends with any thread).
pub fn parse_hint(text: &str) -> Result<HintEffect, String> {
    let mut effect = HintEffect::default();
    for word in text.split([',', ';']) {
        match word.to_ascii_lowercase().as_str() {
            "compute_bound" | "memory_bound" | "nomultithread" => {
                effect.threads_per_core = Some(1);
            }
            "multithread" => {
                effect.threads_per_core = None;
                effect.ntasks_per_core = Some(ANY_TASKS_PER_CORE);
            }
            "help" => return Err(format!("the hints are {HINTS}")),
            "" => return Err(format!("an empty hint (the hints are {HINTS})")),
            other => return Err(format!("unknown hint {other:?} (the hints are {HINTS})")),
        }
    }
    Ok(effect)
}

/// A checked `--hint` text, kept as given (the job's `SLURM_HINT`). JSON: the text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Hint {
    text: String,
    #[serde(skip)]
    effect: HintEffect,
}

impl Hint {
    pub fn parse(text: &str) -> Result<Hint, String> {
        Ok(Hint {
            effect: parse_hint(text)?,
            text: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn effect(&self) -> HintEffect {
        self.effect
    }
}

impl<'de> Deserialize<'de> for Hint {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Hint, D::Error> {
        let text = String::deserialize(de)?;
        Hint::parse(&text).map_err(|why| serde::de::Error::custom(format!("hint: {why}")))
    }
}

/// One job's shape, as the core layout needs it.
#[derive(Debug, Clone, Copy)]
pub struct CoreShape {
    pub nodes: u32,
    /// Tasks laid out (at least one per node).
    pub tasks: u64,
    pub cpus_per_task: u32,
    /// The job's CPUs before rounding (its tasks', or more: `--mincpus`, CPUs per GPU).
    pub cpus: u64,
    /// `--threads-per-core` (or the hint's).
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core` (or the hint's).
    pub ntasks_per_core: Option<u32>,
}

/// What slurmctld allocates on nodes of `threads` threads per core: the CPUs (every thread of
/// each core taken), and the CPUs `--mem-per-cpu` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLayout {
    pub cpus: u64,
    pub mem_cpus: u64,
}

impl CoreShape {
    /// The threads of each core the job uses on nodes of `threads` threads per core
    /// (slurmctld's `vpus`): the fewest of those, `--threads-per-core` and
    /// `--ntasks-per-core` × `-c`.
    pub fn threads_used(&self, threads: u32) -> u64 {
        let threads = u64::from(threads.max(1));
        let c = u64::from(self.cpus_per_task.max(1));
        threads
            .min(self.threads_per_core.map_or(threads, u64::from))
            .min(
                self.ntasks_per_core
                    .map_or(threads, |k| u64::from(k).saturating_mul(c)),
            )
            .max(1)
    }

    /// The layout on nodes of `threads` threads per core (rules in the module docs).
    pub fn layout(&self, threads: u32) -> CoreLayout {
        let vpus = self.threads_used(threads);
        let threads = u64::from(threads.max(1));
        let c = u64::from(self.cpus_per_task.max(1));
        let job_threads = self.threads_per_core.map(u64::from);
        let per_core_tasks = self.ntasks_per_core.map(u64::from);
        let nodes = u64::from(self.nodes.max(1));
        let mem_threads = job_threads.filter(|t| *t < threads).unwrap_or(threads);
        let mut layout = CoreLayout {
            cpus: 0,
            mem_cpus: 0,
        };
        for node in 0..nodes {
            // Tasks and CPUs spread evenly, the first nodes taking what does not divide.
            let share = |total: u64| total / nodes + u64::from(node < total % nodes);
            let tasks = share(self.tasks);
            let cpus = share(self.cpus).max(tasks.saturating_mul(c));
            let mut cores = cpus.div_ceil(vpus);
            match per_core_tasks {
                Some(1) => cores = cores.max(tasks.saturating_mul(c.div_ceil(vpus))),
                Some(k) => cores = cores.max(tasks.div_ceil(k)),
                None => {}
            }
            layout.cpus = layout.cpus.saturating_add(cores.saturating_mul(threads));
            layout.mem_cpus = layout
                .mem_cpus
                .saturating_add(cores.saturating_mul(mem_threads));
        }
        layout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(tasks: u64, c: u32) -> CoreShape {
        CoreShape {
            nodes: 1,
            tasks,
            cpus_per_task: c,
            cpus: tasks * u64::from(c),
            threads_per_core: None,
            ntasks_per_core: None,
        }
    }

    /// The live figures in the module docs, on 4 cores × 2 threads (22.05.8 and 24.11.5).
    #[test]
    fn layouts_match_what_slurmctld_allocated() {
        let cases: [(CoreShape, u64, u64); 16] = [
            (shape(1, 1), 2, 2),
            (shape(3, 1), 4, 4),
            (shape(1, 3), 4, 4),
            (shape(2, 3), 6, 6),
            (shape(8, 1), 8, 8),
            (
                CoreShape {
                    threads_per_core: Some(1),
                    ..shape(1, 1)
                },
                2,
                1,
            ),
            (
                CoreShape {
                    threads_per_core: Some(1),
                    ..shape(3, 1)
                },
                6,
                3,
            ),
            (
                CoreShape {
                    threads_per_core: Some(1),
                    ..shape(1, 3)
                },
                6,
                3,
            ),
            (
                CoreShape {
                    threads_per_core: Some(1),
                    ..shape(4, 1)
                },
                8,
                4,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(1),
                    ..shape(3, 1)
                },
                6,
                6,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(1),
                    ..shape(1, 2)
                },
                2,
                2,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(1),
                    ..shape(1, 3)
                },
                4,
                4,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(1),
                    ..shape(2, 3)
                },
                8,
                8,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(2),
                    ..shape(2, 3)
                },
                6,
                6,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(3),
                    ..shape(3, 1)
                },
                4,
                4,
            ),
            (
                CoreShape {
                    ntasks_per_core: Some(1),
                    threads_per_core: Some(1),
                    ..shape(1, 3)
                },
                6,
                3,
            ),
        ];
        for (shape, cpus, mem_cpus) in cases {
            let layout = shape.layout(2);
            assert_eq!(
                (layout.cpus, layout.mem_cpus),
                (cpus, mem_cpus),
                "{shape:?}"
            );
        }
        // --mincpus=3 on 22.05 (the CPUs raised above the task's): 2 cores.
        let raised = CoreShape {
            cpus: 3,
            ..shape(1, 1)
        };
        assert_eq!(raised.layout(2).cpus, 4);
        // Multithread's "any tasks per core" is the default layout.
        let any = CoreShape {
            ntasks_per_core: Some(ANY_TASKS_PER_CORE),
            ..shape(2, 3)
        };
        assert_eq!(any.layout(2).cpus, 6);
    }

    #[test]
    fn one_thread_per_core_changes_nothing() {
        for (tasks, c) in [(1, 1), (3, 1), (2, 3), (7, 2)] {
            let plain = shape(tasks, c);
            let layout = plain.layout(1);
            assert_eq!(layout.cpus, plain.cpus);
            assert_eq!(layout.mem_cpus, plain.cpus);
            let hinted = CoreShape {
                threads_per_core: Some(1),
                ntasks_per_core: Some(1),
                ..plain
            };
            assert_eq!(hinted.layout(1).cpus, plain.cpus);
        }
    }

    #[test]
    fn tasks_spread_over_nodes_evenly() {
        // -N 2 -n 3: 2 + 1 tasks, a core each (Slurm: 1 + 2, the same 4 CPUs).
        let three = CoreShape {
            nodes: 2,
            ..shape(3, 1)
        };
        assert_eq!(
            three.layout(2),
            CoreLayout {
                cpus: 4,
                mem_cpus: 4
            }
        );
        // -N 2 -n 3 --hint=nomultithread: 4 + 2 (exact).
        let hinted = CoreShape {
            threads_per_core: Some(1),
            ..three
        };
        assert_eq!(
            hinted.layout(2),
            CoreLayout {
                cpus: 6,
                mem_cpus: 3
            }
        );
        // -N 2 -n 6: 3 + 3 → 8, above Slurm's packed 4 + 2 → 6 (the hold is higher).
        assert_eq!(
            CoreShape {
                nodes: 2,
                ..shape(6, 1)
            }
            .layout(2)
            .cpus,
            8
        );
    }

    #[test]
    fn hints_read_as_sbatch_reads_them() {
        assert_eq!(
            parse_hint("nomultithread").unwrap().threads_per_core,
            Some(1)
        );
        assert_eq!(
            parse_hint("Compute_Bound").unwrap().threads_per_core,
            Some(1)
        );
        assert_eq!(
            parse_hint("memory_bound;multithread").unwrap(),
            HintEffect {
                threads_per_core: None,
                ntasks_per_core: Some(ANY_TASKS_PER_CORE),
            }
        );
        assert_eq!(
            parse_hint("multithread,nomultithread").unwrap(),
            HintEffect {
                threads_per_core: Some(1),
                ntasks_per_core: Some(ANY_TASKS_PER_CORE)
            }
        );
        for bad in [
            "",
            "nomultithread,",
            "nomultithread,2",
            "smt",
            "help",
            " nomultithread",
        ] {
            assert!(parse_hint(bad).is_err(), "{bad:?}");
        }
        let hint: Hint = serde_json::from_str("\"nomultithread\"").unwrap();
        assert_eq!(serde_json::to_string(&hint).unwrap(), "\"nomultithread\"");
        assert!(serde_json::from_str::<Hint>("\"fast\"").is_err());
    }
}
