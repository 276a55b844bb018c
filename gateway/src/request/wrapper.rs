//! A job script's `#PBS` and `#BSUB` lines as sbatch translates them into its own options
//! (Slurm's `src/sbatch/xlate.c`, alike from 22.05 to 25.11): the steps to apply, in order, to
//! the options the script's `#SBATCH` lines gave, which they override (the environment's and
//! the command line's override both, as in sbatch).
//!
//! ## What sbatch reads
//!
//! - The lines that start with `#BSUB`, else those that start with `#PBS` (a script with a
//!   `#BSUB` line has its `#PBS` lines left alone), among the lines before the script's 101st
//!   line not starting with `#`; words split as on `#SBATCH` lines. All of them make one list
//!   of options, read as `getopt` reads a command line: letters (`-N name`, `-Nname`, `-hV`),
//!   an option's value may be the next line's first word.
//! - `#PBS`: `-N` job name, `-q` partition, `-A` account, `-o`/`-e` output and error,
//!   `-a` begin, `-h` hold, `-J`/`-t` array, `-m` mail types (`b`, `e`, `a`: BEGIN, END, FAIL;
//!   `n`: NONE), `-M` mail user, `-p` nice (as written), `-v LIST` added to `--export`,
//!   `-d`/`-w` working folder (from Slurm 23.02; 22.05's sbatch refuses them), `-W depend=…`
//!   and `-W umask=…` (the job's `SLURM_UMASK`, unless the shell sets that variable), and
//!   `-l LIST`: `walltime=`, `cput=`, `pcput=` the time limit, `mem=`
//!   memory per node and `file=` temporary disk (one trailing `b` dropped: `4gb` is `4g`),
//!   `nodes=N[:ppn=M][:gpus=G]` (`-N N`, `-n N×M`, `--gpus-per-node=G`), `select=`, `ncpus=`,
//!   `mpiprocs=` (`-N`, `--mincpus`, `--ntasks-per-node`, and `-c ncpus/mpiprocs` when all
//!   three are given and the CPUs are more), `naccelerators=N` and `accelerator=true` (`--gres
//!   gpu:N`), `nice=`. `-c`, `-C`, `-I`, `-j`, `-k`, `-r`, `-S`, `-u`, `-V`, `-z`, other `-W`
//!   attributes and the `-l` keys `arch`, `host`, `opsys`, `other`, `pmem`, `pvmem`,
//!   `software`, `vmem` change nothing (the last are noted to the user); a `hetjob` word ends
//!   its line.
//! - `#BSUB`: `-J`, `-o`, `-e`, `-q` (partition), `-n [MIN,]MAX` (tasks: the maximum), `-W`
//!   (time limit), `-M` (memory per CPU), `-m "HOSTS"` (node list), `-x` (exclusive), `-cwd`
//!   (working folder).
//!
//! ## Stricter than sbatch
//!
//! Where sbatch would run a job other than the one the line asks for, the script is refused,
//! naming the line and why: an `-l` key sbatch does not read (`procs=16`, `ngpus=1`,
//! `Walltime=`, which it skips without a word: the job would run without it), `proc=` (sbatch
//! then skips the next key), node names or `+` in `nodes=` (sbatch takes node properties for
//! host names, and adds up the counts of `+` parts), an ignored key before a chunk's other
//! keys (`vmem=8gb:mpiprocs=4`: sbatch skips to the next comma), `accelerator=` other than
//! `true`/`false`, `naccelerators=0`, a PBS date-time given as digits to `-a` (sbatch reads
//! `1201` as December 1st, PBS as 12:01), a umask without its leading 0 (sbatch reads `22` as
//! decimal), a bare number of seconds as a PBS time
//! (`walltime=3600`: sbatch reads 3600 *minutes*), a `#BSUB -W H:MM` (sbatch reads minutes and
//! seconds), a `#BSUB -M` without a unit (sbatch reads kilobytes), LSF's `-c` CPU time (sbatch
//! reads a working folder), a `-cwd` sbatch would misread (after `-x`, or after a value
//! attached to its option), `naccelerators=` beside the script's `--gres`, and long options.
//! Where sbatch itself refuses the script (an unknown letter, a missing value, a stray word),
//! so does bursar.

use super::RequestError;

/// A step of the translation, applied to the script's options in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The job script line it comes from (from 1).
    pub line: usize,
    /// The directive as the user wrote it (`#PBS -l walltime=1:00:00`), for messages.
    pub shown: String,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// sbatch's long option and its value (`time`, `1:00:00`); `None` for a flag.
    Set {
        option: &'static str,
        value: Option<String>,
    },
    /// `#PBS -v LIST`: `--export` becomes the one it replaces, a comma, and LIST.
    ExportAppend(String),
    /// `naccelerators=N`/`accelerator=true`: `--gres=gpu:N` (sbatch adds it to a `--gres`
    /// already given; bursar refuses that).
    GresGpus(u32),
    /// `-W umask=MASK`: the job's umask, in octal ([`umask`]).
    Umask(u32),
}

/// What a script's `#PBS` or `#BSUB` lines stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Translation {
    pub steps: Vec<Step>,
    /// What sbatch leaves out and the user may not expect (`#PBS -l pmem=2gb`).
    pub notes: Vec<String>,
}

/// The `#BSUB` (else `#PBS`) lines sbatch reads, translated; `None` when there are none.
pub(crate) fn translate(
    text: &str,
    split: impl Fn(&str) -> Result<Vec<String>, RequestError>,
) -> Result<Option<Translation>, RequestError> {
    let Some((word, lines)) = directive_lines(text) else {
        return Ok(None);
    };
    let mut tokens = Vec::new();
    let mut notes = Vec::new();
    for (line, rest) in lines {
        let mut words = split(rest).map_err(|e| e.at_line(line))?;
        // sbatch's get_argument blanks a `hetjob` (`packjob`) word, which ends the line.
        let het =
            |w: &String| w.eq_ignore_ascii_case("hetjob") || w.eq_ignore_ascii_case("packjob");
        if let Some(at) = words.iter().position(het) {
            notes.push(format!(
                "job script line {line}: sbatch reads this {word} line only up to `{}`",
                words[at]
            ));
            words.truncate(at);
        }
        tokens.extend(words.into_iter().map(|text| Token { line, text }));
    }
    let mut t = Translation {
        steps: Vec::new(),
        notes,
    };
    if word == "#BSUB" {
        bsub(&tokens, &mut t)?;
    } else {
        pbs(&tokens, &mut t)?;
    }
    Ok(Some(t))
}

/// The lines sbatch would translate, with their numbers and the text after the word: of the
/// lines before the script's 101st line not starting with `#` (blank ones count), those that
/// start with `#BSUB`, else those that start with `#PBS`.
fn directive_lines(text: &str) -> Option<(&'static str, Vec<(usize, &str)>)> {
    let mut non_comments = 0;
    let window: Vec<(usize, &str)> = text
        .split('\n')
        .enumerate()
        .take_while(|(_, line)| {
            non_comments += usize::from(!line.starts_with('#'));
            non_comments <= 100
        })
        .map(|(index, line)| (index + 1, line))
        .collect();
    ["#BSUB", "#PBS"].into_iter().find_map(|word| {
        let lines: Vec<(usize, &str)> = window
            .iter()
            .filter_map(|&(n, line)| line.strip_prefix(word).map(|rest| (n, rest)))
            .collect();
        (!lines.is_empty()).then_some((word, lines))
    })
}

#[derive(Debug, Clone)]
struct Token {
    line: usize,
    text: String,
}

/// One option as `getopt` reads it: the letter, its value, the line and the text shown.
struct Parsed {
    letter: char,
    value: Option<String>,
    line: usize,
    shown: String,
}

/// The tokens read as `getopt` with `+SPEC` reads them: letters grouped, a value attached or
/// in the next token; a stray word (options stop there, and sbatch refuses what is left) and
/// long options refused. `cwd` marks the token indexes sbatch reads as `-c` (`#BSUB -cwd`).
fn getopt(
    word: &str,
    tokens: &[Token],
    spec: &str,
    cwd: &[usize],
) -> Result<Vec<Parsed>, RequestError> {
    let takes_value = |c: char| -> Option<bool> {
        let at = spec.find(c).filter(|_| c != ':')?;
        Some(spec[at + c.len_utf8()..].starts_with(':'))
    };
    let mut out = Vec::new();
    let text_at = |k: usize| -> &str {
        if cwd.contains(&k) {
            "-c"
        } else {
            &tokens[k].text
        }
    };
    let mut k = 0;
    while k < tokens.len() {
        let token = &tokens[k];
        let is_cwd = cwd.contains(&k);
        let text = text_at(k);
        if word == "#BSUB" && text == "-cwd" {
            return Err(refused(
                token.line,
                "#BSUB -cwd".into(),
                "sbatch looks for -cwd only at every other word of these lines, which -x or a \
                 value attached to its option (-Jname) shifts; here it reads -c wd (working \
                 folder `wd`) and refuses what follows: put #BSUB -cwd first",
            ));
        }
        if text == "--" {
            if let Some(rest) = tokens.get(k + 1) {
                return Err(stray(word, rest));
            }
            break;
        }
        if text.starts_with("--") {
            return Err(refused(
                token.line,
                format!("{word} {text}"),
                "bursar reads the one-letter options of these lines only",
            ));
        }
        let Some(letters) = text.strip_prefix('-').filter(|l| !l.is_empty()) else {
            return Err(stray(word, token));
        };
        for (at, c) in letters.char_indices() {
            let Some(needs) = takes_value(c) else {
                return Err(refused(
                    token.line,
                    format!("{word} -{c}"),
                    format!(
                        "sbatch does not know this option of {word} lines, and refuses the script"
                    ),
                ));
            };
            if !needs {
                out.push(Parsed {
                    letter: c,
                    value: None,
                    line: token.line,
                    shown: format!("{word} -{c}"),
                });
                continue;
            }
            let attached = &letters[at + c.len_utf8()..];
            let value = if !attached.is_empty() {
                attached.to_string()
            } else {
                k += 1;
                match tokens.get(k) {
                    Some(_) => text_at(k).to_string(),
                    None => {
                        return Err(refused(
                            token.line,
                            format!("{word} -{c}"),
                            "needs a value (sbatch refuses the script)",
                        ))
                    }
                }
            };
            let shown = if is_cwd {
                format!("{word} -cwd {value}")
            } else {
                format!("{word} -{c} {value}")
            };
            out.push(Parsed {
                letter: c,
                value: Some(value),
                line: token.line,
                shown,
            });
            break;
        }
        k += 1;
    }
    Ok(out)
}

fn stray(word: &str, token: &Token) -> RequestError {
    refused(
        token.line,
        format!("{word} {}", token.text),
        "not an option: sbatch stops reading these lines there and refuses the script",
    )
}

fn refused(line: usize, shown: String, reason: impl std::fmt::Display) -> RequestError {
    RequestError::Script(format!("{shown}: {reason}")).at_line(line)
}

fn set(t: &mut Translation, p: &Parsed, option: &'static str, value: Option<String>) {
    t.steps.push(Step {
        line: p.line,
        shown: p.shown.clone(),
        action: Action::Set { option, value },
    });
}

// --- #PBS ---------------------------------------------------------------------------------------

/// `_set_pbs_options`' letters (23.02's, with `-d` and `-w`).
const PBS_SPEC: &str = "a:A:c:C:d:e:hIj:J:k:l:m:M:N:o:p:q:r:S:t:u:v:VW:w:z";

fn pbs(tokens: &[Token], t: &mut Translation) -> Result<(), RequestError> {
    for p in getopt("#PBS", tokens, PBS_SPEC, &[])? {
        let value = p.value.clone();
        match p.letter {
            'a' => {
                let when = value.clone().unwrap_or_default();
                if !when.is_empty() && when.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                    return Err(refused(
                        p.line,
                        p.shown,
                        format!(
                            "PBS reads -a as [[[[CC]YY]MM]DD]hhmm[.SS], sbatch as its --begin \
                             (a bare 4 digits is MMDD to it: {when} would be a date, not a time \
                             of day): write the time as sbatch reads it (HH:MM, or \
                             YYYY-MM-DDTHH:MM)"
                        ),
                    ));
                }
                set(t, &p, "begin", value)
            }
            'A' => set(t, &p, "account", value),
            'e' => set(t, &p, "error", value),
            'o' => set(t, &p, "output", value),
            'd' | 'w' => set(t, &p, "chdir", value),
            'h' => set(t, &p, "hold", None),
            'J' | 't' => set(t, &p, "array", value),
            'l' => resource_list(&p, t)?,
            'm' => {
                let letters = value.unwrap_or_default();
                let Some(types) = pbs_mail_type(&letters) else {
                    return Err(refused(
                        p.line,
                        p.shown,
                        "sbatch reads b, e, a and n here (BEGIN, END, FAIL, NONE), and refuses \
                         the script without one",
                    ));
                };
                set(t, &p, "mail-type", Some(types));
            }
            'M' => set(t, &p, "mail-user", value),
            'N' => set(t, &p, "job-name", value),
            'p' => set(t, &p, "nice", value),
            'q' => set(t, &p, "partition", value),
            'v' => t.steps.push(Step {
                line: p.line,
                shown: p.shown.clone(),
                action: Action::ExportAppend(value.unwrap_or_default()),
            }),
            'W' => {
                let attribute = value.unwrap_or_default();
                let lower = attribute.to_ascii_lowercase();
                if lower.starts_with("umask=") {
                    let mask = umask(&attribute[6..])
                        .map_err(|reason| refused(p.line, p.shown.clone(), reason))?;
                    t.steps.push(Step {
                        line: p.line,
                        shown: p.shown.clone(),
                        action: Action::Umask(mask),
                    });
                } else if lower.starts_with("depend=") {
                    set(t, &p, "dependency", Some(attribute[7..].to_string()));
                } else {
                    t.notes.push(format!(
                        "job script line {}: {} is ignored, as sbatch ignores it",
                        p.line, p.shown
                    ));
                }
            }
            // Checkpoints, keeping output, rerunning, the shell, the user, the environment
            // (sbatch exports it anyway), joining output: nothing to sbatch.
            _ => {}
        }
    }
    Ok(())
}

/// `-W umask=MASK`: an octal mask up to 0777 with its leading 0 (`022`), as PBS reads it.
/// sbatch reads the number as C's `strtol` with base 0 does: `22` is decimal (octal 026), so
/// a mask without its leading 0 (or in hex) is refused, as is one above 0777 (which sbatch
/// refuses).
fn umask(text: &str) -> Result<u32, String> {
    let octal = text
        .strip_prefix('0')
        .filter(|rest| rest.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        .map(|rest| u32::from_str_radix(if rest.is_empty() { "0" } else { rest }, 8));
    match octal {
        Some(Ok(mask)) if mask <= 0o777 => Ok(mask),
        Some(_) => Err("sbatch takes a umask up to 0777, and refuses the script".into()),
        None if !text.starts_with('0') => match text.parse::<u16>() {
            // sbatch's strtol with base 0 reads it in decimal.
            Ok(decimal) => {
                let suggestion = if text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                    format!(" (umask=0{text})")
                } else {
                    String::new()
                };
                Err(format!(
                    "sbatch reads {text} as a decimal number (octal {decimal:o}): write the \
                     mask in octal with its leading 0{suggestion}"
                ))
            }
            Err(_) => Err("write the mask in octal with its leading 0 (umask=022)".into()),
        },
        None => Err("write the mask in octal with its leading 0 (umask=022)".into()),
    }
}

/// `-m LETTERS` as sbatch's `_xlate_pbs_mail_type`: `b`, `e`, `a` (any case) for BEGIN, END,
/// FAIL; any `n` makes it NONE; `None` when there is none of them.
fn pbs_mail_type(letters: &str) -> Option<String> {
    let has = |c: char| letters.contains(c) || letters.contains(c.to_ascii_uppercase());
    if has('n') {
        return Some("NONE".into());
    }
    let types: Vec<&str> = [('b', "BEGIN"), ('e', "END"), ('a', "FAIL")]
        .into_iter()
        .filter(|(c, _)| has(*c))
        .map(|(_, name)| name)
        .collect();
    (!types.is_empty()).then(|| types.join(","))
}

/// The `-l` keys sbatch reads, in the order it tries them, whether in any case, and what
/// ends the value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Accelerator,
    Skip,
    Time,
    File,
    Mem,
    Mpiprocs,
    Naccelerators,
    Ncpus,
    Nice,
    Nodes,
    Proc,
    Select,
}

const KEYS: &[(&str, bool, Key)] = &[
    ("accelerator=", true, Key::Accelerator),
    ("arch=", false, Key::Skip),
    ("cput=", false, Key::Time),
    ("file=", false, Key::File),
    ("host=", false, Key::Skip),
    ("mem=", false, Key::Mem),
    ("mpiprocs=", true, Key::Mpiprocs),
    ("naccelerators=", true, Key::Naccelerators),
    ("ncpus=", true, Key::Ncpus),
    ("nice=", false, Key::Nice),
    ("nodes=", false, Key::Nodes),
    ("opsys=", false, Key::Skip),
    ("other=", false, Key::Skip),
    ("pcput=", false, Key::Time),
    ("pmem=", false, Key::Skip),
    ("proc=", false, Key::Proc),
    ("pvmem=", false, Key::Skip),
    ("select=", true, Key::Select),
    ("software=", false, Key::Skip),
    ("vmem=", false, Key::Skip),
    ("walltime=", false, Key::Time),
];

/// The value at `i` up to `sep` (or the end), and where the scan goes on: past `sep`.
fn value_until(rl: &str, i: usize, sep: u8) -> (&str, usize) {
    let end = rl.as_bytes()[i..]
        .iter()
        .position(|&b| b == sep)
        .map_or(rl.len(), |p| i + p);
    (&rl[i..end], (end + 1).min(rl.len()))
}

/// `-l LIST` as sbatch's `_parse_pbs_resource_list` scans it: at each character the keys it
/// knows, else on to the next character. What it would skip unread (an unknown key, or a key
/// in another case) is refused.
fn resource_list(p: &Parsed, t: &mut Translation) -> Result<(), RequestError> {
    let rl = p.value.as_deref().unwrap_or_default();
    let bytes = rl.as_bytes();
    let shown = |item: &str| format!("#PBS -l {item}");
    let refuse = |item: &str, reason: String| refused(p.line, shown(item), reason);
    let step = |t: &mut Translation, item: &str, action: Action| {
        t.steps.push(Step {
            line: p.line,
            shown: shown(item),
            action,
        })
    };
    let (mut i, mut skipped_from) = (0, None::<usize>);
    let mut gpus: u32 = 0;
    let (mut select, mut ncpus, mut mpiprocs) = (None::<String>, None::<String>, None::<String>);
    while i < bytes.len() {
        let found = KEYS.iter().find(|(key, any_case, _)| {
            let k = key.as_bytes();
            bytes.len() - i >= k.len()
                && if *any_case {
                    bytes[i..i + k.len()].eq_ignore_ascii_case(k)
                } else {
                    &bytes[i..i + k.len()] == k
                }
        });
        let Some(&(key, _, kind)) = found else {
            skipped_from.get_or_insert(i);
            i += 1;
            continue;
        };
        if let Some(from) = skipped_from.take() {
            unread(rl, from, i, &refuse)?;
        }
        let start = i;
        i += key.len();
        let name = &key[..key.len() - 1];
        match kind {
            Key::Accelerator => {
                // sbatch reads `true` and goes on scanning from there.
                let (value, _) = value_until(rl, i, b',');
                let value = value.split(':').next().unwrap_or_default();
                if value.eq_ignore_ascii_case("true") {
                    gpus = gpus.max(1);
                } else if !value.eq_ignore_ascii_case("false") {
                    return Err(refuse(
                        &rl[start..i + value.len()],
                        "sbatch reads accelerator=true (a GPU) and nothing else here".into(),
                    ));
                }
                i += value.len();
            }
            Key::Skip => {
                let (value, next) = value_until(rl, i, b',');
                let item = rl[start..next].trim_end_matches(',');
                // sbatch skips to the next comma: a key after a `:` (a chunk's) goes with it.
                if let Some((_, rest)) = value.split_once(':').filter(|(_, r)| r.contains('=')) {
                    return Err(refuse(
                        item,
                        format!(
                            "sbatch skips {name}= up to the next comma, and {rest} with it: \
                             put {name}= last, or leave it out (sbatch ignores it)"
                        ),
                    ));
                }
                t.notes.push(format!(
                    "job script line {}: #PBS -l {item} is ignored, as sbatch ignores {name}=",
                    p.line
                ));
                i = next;
            }
            Key::Time | Key::File | Key::Mem | Key::Nice | Key::Nodes | Key::Naccelerators => {
                let (value, next) = value_until(rl, i, b',');
                let item = &rl[start..i + value.len()];
                i = next;
                if value.is_empty() && kind == Key::Nice {
                    // An empty nice= is --nice without a value to sbatch: 100 (seen on 22.05.8).
                    step(
                        t,
                        item,
                        Action::Set {
                            option: "nice",
                            value: None,
                        },
                    );
                    continue;
                }
                if value.is_empty() {
                    return Err(refuse(item, "needs a value".into()));
                }
                match kind {
                    Key::Time => {
                        if value.bytes().all(|b| b.is_ascii_digit()) {
                            return Err(refuse(
                                item,
                                format!(
                                    "sbatch reads a bare number as minutes ({value} minutes), \
                                     where PBS reads seconds: write it as HH:MM:SS"
                                ),
                            ));
                        }
                        let action = Action::Set {
                            option: "time",
                            value: Some(value.into()),
                        };
                        step(t, item, action);
                    }
                    Key::File | Key::Mem => {
                        // Torque's `gb`/`mb`: sbatch drops the `b`.
                        let size = match value.as_bytes()[value.len() - 1] {
                            b'b' | b'B' => &value[..value.len() - 1],
                            _ => value,
                        };
                        let option = if kind == Key::Mem { "mem" } else { "tmp" };
                        let action = Action::Set {
                            option,
                            value: Some(size.into()),
                        };
                        step(t, item, action);
                    }
                    Key::Nice => {
                        let action = Action::Set {
                            option: "nice",
                            value: Some(value.into()),
                        };
                        step(t, item, action);
                    }
                    Key::Nodes => {
                        for action in nodes(value).map_err(|reason| refuse(item, reason))? {
                            step(t, item, action);
                        }
                    }
                    _ => {
                        // sbatch's parse_int: a whole number from 1 to INT_MAX.
                        gpus = value
                            .parse::<u32>()
                            .ok()
                            .filter(|n| (1..=i32::MAX as u32).contains(n))
                            .ok_or_else(|| {
                                refuse(item, "sbatch takes a whole number of GPUs from 1".into())
                            })?;
                    }
                }
            }
            Key::Proc => {
                return Err(refuse(
                    rl[start..value_until(rl, i, b',').1].trim_end_matches(','),
                    "sbatch reads proc= as a node feature (-C) and then skips the key after \
                     it: give the feature with #SBATCH -C"
                        .into(),
                ))
            }
            Key::Select | Key::Ncpus | Key::Mpiprocs => {
                let (value, next) = value_until(rl, i, b':');
                let item = &rl[start..i + value.len()];
                i = next;
                if value.contains(',') {
                    return Err(refuse(
                        item,
                        format!(
                            "sbatch reads {name}= up to the next `:`, so its value is {value:?} \
                             and it refuses the script: put what follows the comma on an -l of \
                             its own, or after a `:`"
                        ),
                    ));
                }
                let (option, held) = match kind {
                    Key::Select => ("nodes", &mut select),
                    Key::Ncpus => ("mincpus", &mut ncpus),
                    _ => ("ntasks-per-node", &mut mpiprocs),
                };
                *held = Some(value.to_string());
                let action = Action::Set {
                    option,
                    value: Some(value.into()),
                };
                step(t, item, action);
            }
        }
    }
    if let Some(from) = skipped_from {
        unread(rl, from, bytes.len(), &refuse)?;
    }
    // PBS Pro's chunks: CPUs per task from CPUs and tasks per node, as sbatch divides them.
    if let (Some(_), Some(cpus), Some(tasks)) = (&select, &ncpus, &mpiprocs) {
        if let (Ok(cpus), Ok(tasks)) = (cpus.parse::<u32>(), tasks.parse::<u32>()) {
            if tasks > 0 && cpus > tasks {
                let item = format!("ncpus={cpus}:mpiprocs={tasks}");
                let action = Action::Set {
                    option: "cpus-per-task",
                    value: Some((cpus / tasks).to_string()),
                };
                step(t, &item, action);
            }
        }
    }
    if gpus > 0 {
        step(t, &format!("naccelerators={gpus}"), Action::GresGpus(gpus));
    }
    Ok(())
}

/// Text sbatch's scan passes over unread, from `from` to `to`: separators alone are nothing;
/// anything else is refused, named with the rest of its item.
fn unread(
    rl: &str,
    from: usize,
    to: usize,
    refuse: &dyn Fn(&str, String) -> RequestError,
) -> Result<(), RequestError> {
    let text = rl[from..to].trim_matches(|c: char| c == ',' || c == ':' || c.is_ascii_whitespace());
    if text.is_empty() {
        return Ok(());
    }
    let start = from + rl[from..to].find(text).unwrap_or(0);
    let end = rl[start..]
        .find(',')
        .map_or(rl.len(), |p| start + p)
        .max(to.min(rl.len()));
    let item = rl[start..end].trim_end_matches(',');
    Err(refuse(
        item,
        "sbatch does not read this and would run the job without it (it reads walltime, \
         cput, pcput, mem, file, nodes, select, ncpus, mpiprocs, naccelerators, accelerator \
         and nice, in lower case): write it as #SBATCH options"
            .into(),
    ))
}

/// `nodes=N[:ppn=M][:gpus=G]` as sbatch's `_parse_pbs_nodes_opts`: `--gpus-per-node=G`, then
/// `-N N` and `-n N×M`. Node names (sbatch takes Torque's node properties for them too) and
/// `+` parts (whose counts sbatch adds up) are refused.
fn nodes(value: &str) -> Result<Vec<Action>, String> {
    let mut actions = Vec::new();
    let (mut count, mut ppn) = (0u32, 0u32);
    for part in value.split(':').filter(|part| !part.is_empty()) {
        if part.contains('+') {
            return Err(
                "sbatch adds up the counts of `+` parts (nodes=1:ppn=4+1:ppn=2 is 2 \
                        nodes and 12 tasks to it): write the job as #SBATCH -N and -n"
                    .into(),
            );
        }
        let number = |text: &str| {
            text.parse::<u32>()
                .map_err(|_| format!("{text:?} is not a whole number"))
        };
        if let Some(n) = part.strip_prefix("ppn=") {
            ppn = ppn.saturating_add(number(n)?);
        } else if let Some(g) = part.strip_prefix("gpus=") {
            actions.push(Action::Set {
                option: "gpus-per-node",
                value: Some(g.into()),
            });
        } else if part.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
            count = count.saturating_add(number(part)?);
        } else if part.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) {
            return Err(format!(
                "sbatch reads {part:?} as a node name (-w {part}), node properties too: name \
                 nodes with #SBATCH -w, features with #SBATCH -C"
            ));
        } else {
            return Err(format!("sbatch does not read {part:?} here"));
        }
    }
    if count > 0 {
        actions.push(Action::Set {
            option: "nodes",
            value: Some(count.to_string()),
        });
    }
    if ppn > 0 {
        actions.push(Action::Set {
            option: "ntasks",
            value: Some((u64::from(ppn) * u64::from(count.max(1))).to_string()),
        });
    }
    Ok(actions)
}

// --- #BSUB --------------------------------------------------------------------------------------

const BSUB_SPEC: &str = "c:e:J:m:M:n:o:q:W:x";

fn bsub(tokens: &[Token], t: &mut Translation) -> Result<(), RequestError> {
    // sbatch turns `-cwd` into `-c` where an option is expected if every option took a value:
    // at the list's 1st, 3rd, 5th, … word.
    let cwd: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(k, token)| k % 2 == 0 && token.text == "-cwd")
        .map(|(k, _)| k)
        .collect();
    let parsed = getopt("#BSUB", tokens, BSUB_SPEC, &cwd)?;
    for p in parsed {
        let value = p.value.clone().unwrap_or_default();
        match p.letter {
            'c' if p.shown.starts_with("#BSUB -cwd") => set(t, &p, "chdir", Some(value)),
            'c' => {
                return Err(refused(
                    p.line,
                    p.shown,
                    "LSF's -c is a CPU time limit, and sbatch reads it as the working folder: \
                     give the time limit with -W or #SBATCH -t",
                ))
            }
            'e' => set(t, &p, "error", Some(value)),
            'J' => set(t, &p, "job-name", Some(value)),
            'o' => set(t, &p, "output", Some(value)),
            'q' => set(t, &p, "partition", Some(value)),
            'x' => set(t, &p, "exclusive", None),
            'm' => set(t, &p, "nodelist", Some(value.replace(' ', ","))),
            'M' => {
                if value.bytes().last().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(refused(
                        p.line,
                        p.shown,
                        format!(
                            "sbatch reads a number without a unit as kilobytes per CPU \
                             ({value}K), LSF's default: give the unit (-M {value}M)"
                        ),
                    ));
                }
                set(t, &p, "mem-per-cpu", Some(value));
            }
            'n' => {
                let tasks = match value.split_once(',') {
                    Some((_, "")) => {
                        return Err(refused(
                            p.line,
                            p.shown,
                            "sbatch refuses a task range without its maximum",
                        ))
                    }
                    Some((_, max)) => max.to_string(),
                    None => value,
                };
                set(t, &p, "ntasks", Some(tasks));
            }
            'W' => {
                if value.contains(':') {
                    return Err(refused(
                        p.line,
                        p.shown,
                        format!(
                            "sbatch reads {value} as minutes:seconds, where LSF reads \
                             hours:minutes: give minutes (-W 90) or #SBATCH -t HH:MM:00"
                        ),
                    ));
                }
                set(t, &p, "time", Some(value));
            }
            _ => unreachable!("getopt returns only BSUB_SPEC's letters"),
        }
    }
    Ok(())
}
