//! How a job's tasks are laid out and bound: `-m/--distribution`, `--mem-bind` and
//! `--gpu-bind`, read as sbatch reads them (Slurm's `verify_dist_type`,
//! `slurm_verify_mem_bind` and `tres_bind_verify_cmdline`, the same from 22.05 to 25.11).
//!
//! None of them changes what Slurm allocates a job on nodes of one thread per core, so none is
//! priced. They act mostly on the job's steps: `srun` inside the job reads the variables
//! sbatch sets (`SLURM_DISTRIBUTION`, `SLURM_MEM_BIND`, `SLURM_GPU_BIND` or
//! `SLURM_TRES_BIND`), which bursar sets as sbatch does. slurmctld also lays out the job's own
//! CPUs by the distribution (which cores of which sockets), where slurmrestd passes it on
//! (OpenAPI v0.0.41 and later; v0.0.38 and v0.0.40 drop it), keeps the GPU binding for
//! display, and never keeps the memory binding.

/// `-m/--distribution`, checked: the text sbatch exports as `SLURM_DISTRIBUTION`
/// (`block:cyclic`, `plane`, `cyclic,pack`) and the plane size (`SLURM_DIST_PLANESIZE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distribution {
    pub text: String,
    pub plane_size: Option<u32>,
}

const DISTRIBUTIONS: &str = "block, cyclic or plane=N for the nodes, then block, cyclic or \
                             fcyclic for sockets and for cores (block:cyclic), then ,pack or \
                             ,nopack";

/// Reads `-m/--distribution` as sbatch's `verify_dist_type`: the nodes' layout (`block`,
/// `cyclic`, `*` for block), then optionally the sockets' and the cores' (`block`, `cyclic`,
/// `fcyclic`; `*` is cyclic for sockets and the sockets' for cores), then `,pack` or
/// `,nopack`; or `plane=N` alone. Any case. `arbitrary` (a task per name in a host file) and
/// a `plane` without its size (sbatch takes it from `SLURM_DIST_PLANESIZE`) are refused.
pub fn parse_distribution(arg: &str) -> Result<Distribution, String> {
    if arg
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("plane"))
    {
        return parse_plane(arg);
    }
    if arg.is_empty() || arg.starts_with(',') {
        return Err(format!("give a layout: {DISTRIBUTIONS}"));
    }
    let (base, flag) = match arg.split_once(',') {
        Some((base, flag)) => (base, Some(flag)),
        None => (arg, None),
    };
    let mut flags: Vec<&str> = Vec::new();
    let mut read_flag = |word: &str| -> Result<(), String> {
        let flag = match word.to_ascii_lowercase().as_str() {
            "pack" => "pack",
            "nopack" => "nopack",
            _ => return Err(format!("{word:?} is not a layout ({DISTRIBUTIONS})")),
        };
        if !flags.is_empty() {
            return Err("give one of pack and nopack".into());
        }
        flags.push(flag);
        Ok(())
    };
    // As strtok: empty levels are skipped (`block::cyclic` is `block:cyclic`).
    let levels: Vec<String> = base
        .split(':')
        .filter(|level| !level.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let base = match resolve_levels(&levels) {
        Some(base) => base,
        None if levels.len() == 1 && matches!(levels[0].as_str(), "arbitrary" | "hostfile") => {
            return Err(
                "the arbitrary layout takes its tasks from a host file, which bursar does not \
                 send; name the nodes with -w and use block or cyclic"
                    .into(),
            );
        }
        // sbatch reads a lone `pack` or `nopack` as the flag.
        None => {
            read_flag(base)?;
            String::new()
        }
    };
    if let Some(flag) = flag.filter(|f| !f.is_empty()) {
        read_flag(flag)?;
    }
    let text = match (base.is_empty(), flags.first()) {
        (false, Some(flag)) => format!("{base},{flag}"),
        (false, None) => base,
        (true, Some(flag)) => (*flag).to_string(),
        (true, None) => return Err(format!("give a layout: {DISTRIBUTIONS}")),
    };
    Ok(Distribution {
        text,
        plane_size: None,
    })
}

/// The levels with `*` resolved, when they form a layout sbatch takes.
fn resolve_levels(levels: &[String]) -> Option<String> {
    if levels.is_empty() || levels.len() > 3 {
        return None;
    }
    let mut resolved: Vec<&str> = Vec::new();
    for (i, level) in levels.iter().enumerate() {
        let word = match (i, level.as_str()) {
            (0, "*") => "block",
            (1, "*") => "cyclic",
            (2, "*") => resolved[1],
            (0, word @ ("block" | "cyclic")) => word,
            (1 | 2, word @ ("block" | "cyclic" | "fcyclic")) => word,
            _ => return None,
        };
        resolved.push(word);
    }
    Some(resolved.join(":"))
}

/// Slurm keeps the plane size in 16 bits, the top two values reserved.
const MAX_PLANE_SIZE: u32 = 65_533;

fn parse_plane(arg: &str) -> Result<Distribution, String> {
    let Some((word, size)) = arg.split_once('=') else {
        return Err(
            "give the plane's size, plane=N (sbatch would take it from SLURM_DIST_PLANESIZE, \
             which bursar does not read)"
                .into(),
        );
    };
    if !word.eq_ignore_ascii_case("plane") {
        return Err(format!("{arg:?} is not a layout ({DISTRIBUTIONS})"));
    }
    let digits = size.bytes().all(|b| b.is_ascii_digit());
    let size: u32 = match size.parse() {
        Ok(n) if digits && (1..=MAX_PLANE_SIZE).contains(&n) => n,
        _ => {
            return Err(format!(
                "the plane size must be a number of tasks from 1 to {MAX_PLANE_SIZE}, not \
                 {size:?} (plane takes no other levels or flags)"
            ))
        }
    };
    Ok(Distribution {
        text: "plane".into(),
        plane_size: Some(size),
    })
}

/// sbatch's own check of a plane layout against the job's tasks and nodes ("Too few
/// processes for the requested {plane,node} distribution"), on the nodes the job runs on
/// (bursar's count, which may be more than the `-N` sbatch checks): each node but the last
/// must be able to get a whole plane.
pub fn check_plane(plane_size: u32, ntasks: u32, min_nodes: u32) -> Result<(), String> {
    let few_planes = min_nodes == 0 || ntasks / plane_size < min_nodes;
    if few_planes
        && u64::from(min_nodes.saturating_sub(1)) * u64::from(plane_size) >= u64::from(ntasks)
    {
        return Err(format!(
            "planes of {plane_size} tasks leave a node of the {min_nodes} without tasks ({ntasks} \
             tasks); use a smaller plane, more tasks or fewer nodes"
        ));
    }
    Ok(())
}

/// `--mem-bind`, checked: the variables sbatch sets in the job's environment for it, which
/// are all it does (slurmctld keeps no memory binding; `srun` reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemBinding {
    /// `SLURM_MEM_BIND`: the flags and the binding (`verbose,local`, `map_mem:0,1`); `None`
    /// when the option sets nothing (`quiet`), and then no variable is set.
    pub binding: Option<String>,
    /// `SLURM_MEM_BIND_VERBOSE`: `verbose` or `quiet`.
    pub verbose: bool,
}

const MEM_BINDINGS: &str = "none, rank, local, map_mem:LIST or mask_mem:LIST, with verbose, \
                            quiet or prefer";

/// Reads `--mem-bind` as Slurm's `slurm_verify_mem_bind`: comma-separated words, any case
/// (`v`/`verbose`, `q`/`quiet`, `p`/`prefer`, and the last of `no`/`none`, `rank`, `local`,
/// `map_mem:LIST`, `mask_mem:LIST`), lists of decimal (map) or hexadecimal (mask, `0x`
/// dropped) numbers, `N*K` for K of them. `help` is refused, and so are `sort` and `nosort`:
/// Slurm 25.11 dropped them, and its `srun` would refuse every step of a job given them.
/// Several `--mem-bind` options are one text joined by commas ([`then_mem_bind`]).
pub fn parse_mem_bind(arg: &str) -> Result<MemBinding, String> {
    let (mut verbose, mut prefer) = (false, false);
    let mut binding: Option<String> = None;
    for token in mem_bind_tokens(arg) {
        let lower = token.to_ascii_lowercase();
        match lower.as_str() {
            "help" => return Err(format!("the memory bindings are {MEM_BINDINGS}")),
            "p" | "prefer" => prefer = true,
            "sort" | "nosort" => {
                return Err(
                    "sort and nosort are gone from Slurm 25.11, whose srun would refuse the \
                     job's steps; leave them out"
                        .into(),
                )
            }
            "q" | "quiet" => verbose = false,
            "v" | "verbose" => verbose = true,
            "no" | "none" => binding = Some("none".into()),
            "rank" => binding = Some("rank".into()),
            "local" => binding = Some("local".into()),
            _ if lower.starts_with("map_mem") || lower.starts_with("mapmem") => {
                binding = Some(format!("map_mem:{}", expand_list(&token, false)?));
            }
            _ if lower.starts_with("mask_mem") || lower.starts_with("maskmem") => {
                binding = Some(format!("mask_mem:{}", expand_list(&token, true)?));
            }
            _ => {
                return Err(format!(
                    "{token:?} is not a memory binding (use {MEM_BINDINGS})"
                ))
            }
        }
    }
    let words: Vec<&str> = [(verbose, "verbose"), (prefer, "prefer")]
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, word)| *word)
        .chain(binding.as_deref())
        .collect();
    Ok(MemBinding {
        binding: (!words.is_empty()).then(|| words.join(",")),
        verbose,
    })
}

/// `--mem-bind` given again after `earlier`: as sbatch reads the script's, then the command
/// line's, the flags (`verbose`, `quiet`, `prefer`) carry over and the binding is the later
/// one (`v,local` then `rank` is `verbose,rank`), which is reading both texts as one.
pub fn then_mem_bind(earlier: &str, later: &str) -> String {
    format!("{earlier},{later}")
}

/// `slurm_verify_mem_bind`'s split: at each `;`, and at each comma not followed by a number
/// (the lists' commas stay with their list).
fn mem_bind_tokens(arg: &str) -> Vec<String> {
    let bytes = arg.as_bytes();
    let mut tokens = vec![String::new()];
    for (i, c) in arg.char_indices() {
        if c == ';' || (c == ',' && !is_value(&bytes[i + 1..])) {
            tokens.push(String::new());
        } else if let Some(token) = tokens.last_mut() {
            token.push(c);
        }
    }
    tokens
}

/// Slurm's `_isvalue`: a digit, or hexadecimal digits up to a comma or the end.
fn is_value(rest: &[u8]) -> bool {
    if rest.first().is_some_and(u8::is_ascii_digit) {
        return true;
    }
    let hex = rest.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    matches!(rest.get(hex), None | Some(b','))
}

/// A `map_mem`/`mask_mem` token's list, as Slurm's `_expand_mult` writes it out: `N*K` as K
/// copies of N, masks without their `0x`.
fn expand_list(token: &str, mask: bool) -> Result<String, String> {
    let kind = if mask { "mask_mem" } else { "map_mem" };
    let list = token
        .split_once([':', '='])
        .map(|(_, list)| list)
        .filter(|list| !list.is_empty())
        .ok_or_else(|| format!("give the list: --mem-bind={kind}:<list>"))?;
    let mut out: Vec<&str> = Vec::new();
    for item in list.split(',').filter(|item| !item.is_empty()) {
        let item = if mask {
            item.strip_prefix("0x").unwrap_or(item)
        } else {
            item
        };
        let (number, count) = match item.split_once('*') {
            Some((number, count)) => {
                let count: usize = count
                    .parse()
                    .ok()
                    .filter(|c| {
                        (1..=MAX_REPEAT).contains(c) && count.bytes().all(|b| b.is_ascii_digit())
                    })
                    .ok_or_else(|| {
                        format!("{item:?}: the count after * must be 1 to {MAX_REPEAT}")
                    })?;
                (number, count)
            }
            None => (item, 1),
        };
        let digits_ok = |b: u8| {
            if mask {
                b.is_ascii_hexdigit()
            } else {
                b.is_ascii_digit()
            }
        };
        if number.is_empty() || !number.bytes().all(digits_ok) {
            let what = if mask {
                "hexadecimal masks"
            } else {
                "decimal NUMA node numbers"
            };
            return Err(format!("{item:?} in {kind}: the list takes {what}"));
        }
        out.extend(std::iter::repeat_n(number, count));
        if out.len() > MAX_REPEAT {
            return Err(format!("{kind}'s list is longer than {MAX_REPEAT} entries"));
        }
    }
    if out.is_empty() {
        return Err(format!("give the list: --mem-bind={kind}:<list>"));
    }
    Ok(out.join(","))
}

/// The most entries a binding list expands to (a task each; far above any node's).
const MAX_REPEAT: usize = 4096;

const GPU_BINDINGS: &str = "closest, none, map_gpu:LIST, mask_gpu:LIST, per_task:N or \
                            single:N, optionally after verbose,";

/// Reads `--gpu-bind` as Slurm's `tres_bind_verify_cmdline`: `verbose,` then one of
/// `closest`, `none`, `map_gpu:LIST` (GPU indexes, `N*K`), `mask_gpu:LIST` (hexadecimal,
/// `0x` allowed), `per_task:N`, `single:N`; keywords in any case. Returns it with keywords in
/// lower case (what is sent: 22.05 also takes any word starting with `c` or `n`, later releases
/// do not). The `map:`/`mask:` spellings of 23.11 are refused: 23.11 to 25.11 check the wrong
/// part of them.
pub fn parse_gpu_bind(arg: &str) -> Result<String, String> {
    let lower = arg.to_ascii_lowercase();
    let (verbose, rest, rest_lower) = match lower.strip_prefix("verbose,") {
        Some(rest_lower) => (true, &arg[8..], rest_lower),
        None => (false, arg, lower.as_str()),
    };
    let refuse = || format!("{arg:?} is not a GPU binding (use {GPU_BINDINGS})");
    let number_list = |list: &str, hex: bool| {
        !list.is_empty()
            && list.split(',').all(|item| {
                let item = if hex {
                    item.strip_prefix("0x").unwrap_or(item)
                } else {
                    item
                };
                let (number, count) = item.split_once('*').unwrap_or((item, "1"));
                let digit = |b: u8| {
                    if hex {
                        b.is_ascii_hexdigit()
                    } else {
                        b.is_ascii_digit()
                    }
                };
                // Slurm refuses what overflows a signed 64-bit number.
                !number.is_empty()
                    && number.len() <= 15
                    && number.bytes().all(digit)
                    && !count.is_empty()
                    && count.len() <= 9
                    && count.bytes().all(|b| b.is_ascii_digit())
            })
    };
    let count = |n: &str| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit());
    let binding = match rest_lower {
        "closest" | "none" => rest_lower.to_string(),
        _ => {
            let (word, value) = rest.split_once(':').ok_or_else(refuse)?;
            let word = word.to_ascii_lowercase();
            let ok = match word.as_str() {
                "map_gpu" => number_list(value, false),
                "mask_gpu" => number_list(value, true),
                "per_task" | "single" => count(value),
                _ => false,
            };
            if !ok {
                return Err(refuse());
            }
            format!("{word}:{value}")
        }
    };
    Ok(if verbose {
        format!("verbose,{binding}")
    } else {
        binding
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sbatch's `SLURM_DISTRIBUTION` for each layout (Slurm's `set_distribution`, the same
    /// from 22.05 to 25.11).
    #[test]
    fn layouts_read_as_sbatch_exports_them() {
        for (arg, text) in [
            ("block", "block"),
            ("cyclic", "cyclic"),
            ("block:block", "block:block"),
            ("cyclic:cyclic", "cyclic:cyclic"),
            ("block:cyclic:fcyclic", "block:cyclic:fcyclic"),
            ("*:block", "block:block"),
            ("*", "block"),
            ("block:*", "block:cyclic"),
            ("*:*:*", "block:cyclic:cyclic"),
            ("cyclic:block:*", "cyclic:block:block"),
            ("block,Pack", "block,pack"),
            ("cyclic:*:block,NoPack", "cyclic:cyclic:block,nopack"),
            ("pack", "pack"),
            ("NOPACK", "nopack"),
            ("Block:CYCLIC", "block:cyclic"),
            ("block::cyclic", "block:cyclic"),
            ("cyclic,", "cyclic"),
        ] {
            let d = parse_distribution(arg).unwrap_or_else(|e| panic!("{arg}: {e}"));
            assert_eq!(d.text, text, "{arg}");
            assert_eq!(d.plane_size, None, "{arg}");
        }
        for (arg, size) in [("plane=4", 4), ("PLANE=16", 16), ("plane=65533", 65_533)] {
            let d = parse_distribution(arg).unwrap();
            assert_eq!(
                (d.text.as_str(), d.plane_size),
                ("plane", Some(size)),
                "{arg}"
            );
        }
    }

    #[test]
    fn layouts_sbatch_refuses_and_those_bursar_cannot_send_are_refused() {
        for arg in [
            "",
            ",pack",
            "fcyclic",
            "fcyclic:block",
            "block:block:block:block",
            "block:plane",
            "blocky",
            "pack,nopack",
            "block,pack,nopack",
            "block,packed",
            "plane",
            "plane=0",
            "plane=-1",
            "plane=+4",
            "plane=4,pack",
            "plane=4:block",
            "plane=65534",
            "planefoo=4",
        ] {
            assert!(parse_distribution(arg).is_err(), "{arg:?} is refused");
        }
        let arbitrary = parse_distribution("arbitrary").unwrap_err();
        assert!(arbitrary.contains("host file"), "{arbitrary}");
        assert!(parse_distribution("hostfile").is_err());
        assert!(parse_distribution("plane").unwrap_err().contains("plane=N"));
    }

    /// sbatch's "Too few processes for the requested {plane,node} distribution".
    #[test]
    fn a_plane_too_large_for_the_tasks_over_the_nodes_is_refused_as_sbatch_refuses_it() {
        assert!(check_plane(2, 4, 2).is_ok());
        assert!(check_plane(4, 6, 2).is_ok(), "a plane and a part");
        assert!(check_plane(4, 4, 2).is_err(), "one plane for two nodes");
        assert!(check_plane(3, 3, 2).is_err());
        assert!(check_plane(8, 1, 1).is_ok(), "one node takes any plane");
        assert!(check_plane(2, 5, 3).is_ok());
        assert!(check_plane(2, 4, 3).is_err());
    }

    /// sbatch's `SLURM_MEM_BIND` and `SLURM_MEM_BIND_VERBOSE` (`slurm_xstr_mem_bind_type`
    /// and `_expand_mult`).
    #[test]
    fn memory_bindings_give_the_variables_sbatch_sets() {
        let binding = |arg: &str| parse_mem_bind(arg).unwrap_or_else(|e| panic!("{arg}: {e}"));
        for (arg, text, verbose) in [
            ("local", "local", false),
            ("verbose,map_mem:0,1", "verbose,map_mem:0,1", true),
            ("none", "none", false),
            ("no", "none", false),
            ("v,local", "verbose,local", true),
            ("prefer,mask_mem:0x1", "prefer,mask_mem:1", false),
            ("rank,v,p", "verbose,prefer,rank", true),
            ("LOCAL,Verbose", "verbose,local", true),
            ("map_mem:0*2,1", "map_mem:0,0,1", false),
            ("mapmem=3", "map_mem:3", false),
            ("mask_mem:0x3,0xf*2", "mask_mem:3,f,f", false),
            ("mask_mem:3,f", "mask_mem:3,f", false),
            ("map_mem:0,1,local", "local", false),
            ("local;verbose", "verbose,local", true),
            ("v", "verbose", true),
        ] {
            let m = binding(arg);
            assert_eq!(m.binding.as_deref(), Some(text), "{arg}");
            assert_eq!(m.verbose, verbose, "{arg}");
        }
        for arg in ["q", "v,quiet"] {
            assert_eq!(binding(arg).binding, None, "{arg}: sbatch sets nothing");
        }
        // given twice: the flags carry over, the binding is the later one
        let twice = binding(&then_mem_bind("v,local", "rank"));
        assert_eq!(twice.binding.as_deref(), Some("verbose,rank"));
        assert!(twice.verbose);
        let twice = binding(&then_mem_bind("map_mem:0,1", "q"));
        assert_eq!(twice.binding.as_deref(), Some("map_mem:0,1"));
        for arg in [
            "help",
            "",
            "local,",
            "bind",
            "map_mem",
            "map_mem:",
            "map_mem:a",
            "mask_mem:0xg",
            "map_mem:1*0",
            "map_mem:1*x",
            "map_mem:1*5000",
            "local,,verbose",
            "sort",
            "nosort,local",
            // a comma before a word is a new word for Slurm too
            "mask_mem:0x3,f*2",
        ] {
            assert!(parse_mem_bind(arg).is_err(), "{arg:?} is refused");
        }
    }

    #[test]
    fn gpu_bindings_read_as_slurm_checks_them_keywords_in_lower_case() {
        for (arg, sent) in [
            ("closest", "closest"),
            ("CLOSEST", "closest"),
            ("none", "none"),
            ("verbose,closest", "verbose,closest"),
            ("Verbose,map_gpu:0,1", "verbose,map_gpu:0,1"),
            ("map_gpu:0*2,1", "map_gpu:0*2,1"),
            ("mask_gpu:0x3,0xC", "mask_gpu:0x3,0xC"),
            ("mask_gpu:0xfffffffffffffff", "mask_gpu:0xfffffffffffffff"),
            ("per_task:2", "per_task:2"),
            ("single:1", "single:1"),
        ] {
            assert_eq!(parse_gpu_bind(arg).as_deref(), Ok(sent), "{arg}");
        }
        for arg in [
            "",
            "verbose",
            "help",
            "c",
            "closer",
            "nonesuch",
            "map:0,1",
            "mask:0x3",
            "map_gpu:",
            "map_gpu:a",
            "mask_gpu:0xg",
            "per_task:",
            "per_task:-1",
            "single:x",
            "verbose,verbose,closest",
            "mask_gpu:7fffffffffffffff",
        ] {
            assert!(parse_gpu_bind(arg).is_err(), "{arg:?} is refused");
        }
    }
}
