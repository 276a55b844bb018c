//! GPU requests as users write them.
//!
//! - Slurm: `--gres=gpu[:type][:N]` entries, `--gpus=[type:]N`, `--gpus-per-node=[type:]N`
//!   ([`parse_typed_count`], [`parse_gres_list`]).
//! - dstack: the `resources.gpu` spec ([`GpuSpec`]): `A100:80GB:2`, `H100`, `24GB..:2`,
//!   `A10G,A100:1`, `nvidia:2`, `1`, or the mapping form `{name, memory, count, ...}`.

use std::fmt;

use serde_json::Value;

use super::error::RequestError;
use super::units::{CountRange, SizeRange};

/// A GRES type name Slurm accepts in `--gres=gpu:<type>:N` (and the collectors accept when
/// forwarding): letters, digits, `-`, `_`, `.`, starting with a letter or digit.
pub fn is_gres_type_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// `N` or `type:N` (`--gpus`, `--gpus-per-node`): the type, if any, and the count.
pub(crate) fn parse_typed_count(
    option: &str,
    text: &str,
) -> Result<(Option<String>, u32), RequestError> {
    let bad = |reason: &str| RequestError::invalid_value(option, text, reason);
    if text.contains(',') {
        return Err(bad(
            "bursar takes one GPU type per job; a list of types is not supported",
        ));
    }
    let (kind, count) = match text.split(':').collect::<Vec<_>>().as_slice() {
        [count] => (None, *count),
        [kind, count] => (Some(*kind), *count),
        _ => return Err(bad("unknown GPU spec: use N or TYPE:N, e.g. 2 or a100:2")),
    };
    let count = parse_gpu_count(count).map_err(|reason| bad(&reason))?;
    if let Some(kind) = kind {
        if !is_gres_type_name(kind) {
            return Err(bad(&format!("unknown GPU type {kind:?}")));
        }
    }
    Ok((kind.map(str::to_string), count))
}

fn parse_gpu_count(text: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("GPU count {text:?} is not a whole number"));
    }
    text.parse::<u32>()
        .map_err(|_| format!("GPU count {text:?} is too large"))
}

/// One `--gres` value split into its GPU part and everything else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GresList {
    /// `gpu[:type][:N]`: (type, count).
    pub gpu: Option<(Option<String>, u32)>,
    /// Other GRES entries (`shard:1`, `nvme:100`), verbatim: not priced, forwarded as given.
    pub other: Vec<String>,
}

/// `--gres=gpu:a100:2,shard:1`: entries `name`, `name:N`, `name:type`, `name:type:N`.
/// `none` clears the list, as in Slurm.
pub(crate) fn parse_gres_list(option: &str, text: &str) -> Result<GresList, RequestError> {
    let bad = |reason: String| RequestError::invalid_value(option, text, reason);
    let mut list = GresList::default();
    if text.eq_ignore_ascii_case("none") {
        return Ok(list);
    }
    for entry in text.split(',') {
        let parts: Vec<&str> = entry.split(':').collect();
        let (name, kind, count) = match parts.as_slice() {
            [name] => (*name, None, None),
            [name, x] if x.bytes().all(|b| b.is_ascii_digit()) => (*name, None, Some(*x)),
            [name, kind] => (*name, Some(*kind), None),
            [name, kind, count] => (*name, Some(*kind), Some(*count)),
            _ => {
                return Err(bad(format!(
                    "GRES entry {entry:?} is not NAME, NAME:COUNT or NAME:TYPE:COUNT"
                )))
            }
        };
        if !is_gres_type_name(name) {
            return Err(bad(format!("GRES entry {entry:?} has no valid name")));
        }
        if let Some(kind) = kind {
            if !is_gres_type_name(kind) {
                return Err(bad(format!(
                    "GRES entry {entry:?} has an invalid type {kind:?}"
                )));
            }
        }
        let count = count.map(parse_gpu_count).transpose().map_err(bad)?;
        if name == "gpu" {
            if list.gpu.is_some() {
                return Err(bad(
                    "bursar takes one GPU type per job; list gpu only once".to_string()
                ));
            }
            list.gpu = Some((kind.map(str::to_string), count.unwrap_or(1)));
        } else {
            list.other.push(entry.to_string());
        }
    }
    Ok(list)
}

/// A GPU vendor as dstack names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuVendor {
    Nvidia,
    Amd,
    /// TPUs (`google`, alias `tpu`).
    Google,
    Intel,
    /// `tenstorrent`, alias `tt`.
    Tenstorrent,
}

impl GpuVendor {
    /// Case-insensitive, with dstack's aliases.
    pub fn parse(text: &str) -> Option<GpuVendor> {
        Some(match text.to_ascii_lowercase().as_str() {
            "nvidia" => GpuVendor::Nvidia,
            "amd" => GpuVendor::Amd,
            "google" | "tpu" => GpuVendor::Google,
            "intel" => GpuVendor::Intel,
            "tenstorrent" | "tt" => GpuVendor::Tenstorrent,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GpuVendor::Nvidia => "nvidia",
            GpuVendor::Amd => "amd",
            GpuVendor::Google => "google",
            GpuVendor::Intel => "intel",
            GpuVendor::Tenstorrent => "tenstorrent",
        }
    }
}

/// dstack's GPU requirement, parsed once and carried validated.
///
/// The string form is `vendor:names:memory:count`, every part optional and in any order, told
/// apart as dstack does (`GPUSpec.parse`): a vendor name is the vendor; a token starting with a
/// letter is a comma-separated list of acceptable GPU names; a token with a unit is the
/// per-GPU memory (a range); anything else is the count (a range). The count defaults to `1..`
/// (dstack's default). `compute_capability` in the mapping form is checked for shape and left
/// to dstack, which receives the task as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GpuSpec {
    pub vendor: Option<GpuVendor>,
    /// Acceptable models (`A10G`, `A100`), as written; empty means any.
    pub names: Vec<String>,
    /// Memory per GPU.
    pub memory: Option<SizeRange>,
    /// Memory over all the GPUs of a node.
    pub total_memory: Option<SizeRange>,
    pub count: CountRange,
}

impl GpuSpec {
    /// Parses the string form (`A100:80GB:2`, `H100`, `24GB..:2`, `A10G,A100:1`, `2`).
    pub fn parse(text: &str) -> Result<GpuSpec, RequestError> {
        let bad = |reason: String| RequestError::GpuSpec {
            spec: text.to_string(),
            reason,
        };
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let mut spec = GpuSpec {
            vendor: None,
            names: Vec::new(),
            memory: None,
            total_memory: None,
            count: CountRange::at_least(1),
        };
        let (mut seen_names, mut seen_memory, mut seen_count) = (false, false, false);
        for token in compact.split(':') {
            if token.is_empty() {
                return Err(bad("it contains an empty part".into()));
            }
            if let Some(vendor) = GpuVendor::parse(token) {
                if spec.vendor.replace(vendor).is_some() {
                    return Err(bad("it names two vendors".into()));
                }
            } else if token.starts_with(|c: char| c.is_alphabetic()) {
                if std::mem::replace(&mut seen_names, true) {
                    return Err(bad("it has two lists of GPU names".into()));
                }
                spec.names = parse_names(token).map_err(bad)?;
            } else if token.chars().any(char::is_alphabetic) {
                if std::mem::replace(&mut seen_memory, true) {
                    return Err(bad("it gives the memory twice".into()));
                }
                spec.memory = Some(SizeRange::parse(token).map_err(bad)?);
            } else {
                if std::mem::replace(&mut seen_count, true) {
                    return Err(bad("it gives the count twice".into()));
                }
                spec.count = CountRange::parse(token).map_err(bad)?;
            }
        }
        Ok(spec)
    }

    /// The `resources.gpu` value of a task file: a number (the count), a string, or a mapping
    /// with `vendor`, `name` (string or list), `count`, `memory`, `total_memory`,
    /// `compute_capability`.
    pub fn from_value(value: &Value) -> Result<GpuSpec, RequestError> {
        let text = value.to_string();
        let bad = |reason: String| RequestError::GpuSpec {
            spec: text.clone(),
            reason,
        };
        match value {
            Value::Number(n) => GpuSpec::parse(&n.to_string()),
            Value::String(s) => GpuSpec::parse(s),
            Value::Object(map) => {
                let mut spec = GpuSpec {
                    vendor: None,
                    names: Vec::new(),
                    memory: None,
                    total_memory: None,
                    count: CountRange::at_least(1),
                };
                for (key, v) in map {
                    match key.as_str() {
                        "vendor" => {
                            let name = v
                                .as_str()
                                .ok_or_else(|| bad("vendor is not a name".into()))?;
                            spec.vendor = Some(
                                GpuVendor::parse(name)
                                    .ok_or_else(|| bad(format!("unknown vendor {name:?}")))?,
                            );
                        }
                        "name" => {
                            spec.names = match v {
                                Value::String(s) => parse_names(s).map_err(bad)?,
                                Value::Array(items) => {
                                    let names = items
                                        .iter()
                                        .map(|i| i.as_str().map(str::to_string))
                                        .collect::<Option<Vec<_>>>()
                                        .ok_or_else(|| bad("name is not a list of names".into()))?;
                                    if names.iter().any(|n| n.trim().is_empty()) {
                                        return Err(bad("a GPU name is empty".into()));
                                    }
                                    names
                                }
                                _ => return Err(bad("name is not a name or a list".into())),
                            }
                        }
                        "count" => spec.count = count_from_value(v).map_err(bad)?,
                        "memory" => spec.memory = Some(size_from_value(v).map_err(bad)?),
                        "total_memory" => {
                            spec.total_memory = Some(size_from_value(v).map_err(bad)?)
                        }
                        "compute_capability" => {
                            let cc = match v {
                                Value::String(s) => s.clone(),
                                Value::Number(n) => n.to_string(),
                                _ => String::new(),
                            };
                            let ok = cc.split_once('.').is_some_and(|(a, b)| {
                                [a, b]
                                    .iter()
                                    .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
                            });
                            if !ok {
                                return Err(bad(format!(
                                    "compute_capability {v} is not MAJOR.MINOR, e.g. 8.0"
                                )));
                            }
                        }
                        other => return Err(bad(format!("unknown field {other:?}"))),
                    }
                }
                Ok(spec)
            }
            _ => Err(bad(
                "expected a count, a string such as A100:2, or a mapping".into(),
            )),
        }
    }

    /// The GPU type to price and route by: the single acceptable name, normalized the way the
    /// dstack collector names `gres/gpu:<model>` (lower case, other characters → `_`). `None`
    /// when any of several models (or any model) will do.
    pub fn single_kind(&self) -> Option<String> {
        match self.names.as_slice() {
            [name] => Some(normalize_model(name)),
            _ => None,
        }
    }
}

/// `A100` → `a100`, `RTX 4090` → `rtx_4090`: the collector's `gres/gpu:<model>` naming.
pub fn normalize_model(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn parse_names(token: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = token.split(',').map(str::to_string).collect();
    if names.iter().any(String::is_empty) {
        return Err("a GPU name is empty".into());
    }
    Ok(names)
}

/// A count or range from a YAML/JSON value: `2`, `"2.."`, `{min: 2, max: 4}`.
pub(crate) fn count_from_value(value: &Value) -> Result<CountRange, String> {
    let text = value.to_string();
    match value {
        Value::Number(n) => CountRange::parse(&n.to_string()),
        Value::String(s) => CountRange::parse(s),
        Value::Object(map) => {
            let end = |key: &str| -> Result<Option<u32>, String> {
                match map.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => {
                        let r = count_from_value(v)?;
                        match (r.min, r.max) {
                            (Some(a), Some(b)) if a == b => Ok(Some(a)),
                            _ => Err(format!("{key} of {text} is not a number")),
                        }
                    }
                }
            };
            if let Some(key) = map.keys().find(|k| *k != "min" && *k != "max") {
                return Err(format!("unknown field {key:?} in range {text}"));
            }
            CountRange {
                min: end("min")?,
                max: end("max")?,
            }
            .checked(&text)
        }
        _ => Err(format!("{text} is not a count or a range")),
    }
}

/// A size or range from a YAML/JSON value: `16` (GB), `"16GB.."`, `{min: 16GB, max: 32GB}`.
pub(crate) fn size_from_value(value: &Value) -> Result<SizeRange, String> {
    let text = value.to_string();
    match value {
        Value::Number(n) => SizeRange::parse(&n.to_string()),
        Value::String(s) => SizeRange::parse(s),
        Value::Object(map) => {
            let end = |key: &str| -> Result<Option<u64>, String> {
                match map.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => {
                        let r = size_from_value(v)?;
                        match (r.min_mb, r.max_mb) {
                            (Some(a), Some(b)) if a == b => Ok(Some(a)),
                            _ => Err(format!("{key} of {text} is not a size")),
                        }
                    }
                }
            };
            if let Some(key) = map.keys().find(|k| *k != "min" && *k != "max") {
                return Err(format!("unknown field {key:?} in range {text}"));
            }
            SizeRange {
                min_mb: end("min")?,
                max_mb: end("max")?,
            }
            .checked(&text)
        }
        _ => Err(format!("{text} is not a size or a range")),
    }
}

impl fmt::Display for GpuSpec {
    /// The string form, every part present: `nvidia:A100:80GB:2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(vendor) = self.vendor {
            parts.push(vendor.as_str().to_string());
        }
        if !self.names.is_empty() {
            parts.push(self.names.join(","));
        }
        if let Some(memory) = self.memory {
            parts.push(memory.to_string());
        }
        parts.push(self.count.to_string());
        f.write_str(&parts.join(":"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_entries() {
        let g = parse_gres_list("--gres", "gpu:a100:2,shard:1").unwrap();
        assert_eq!(g.gpu, Some((Some("a100".into()), 2)));
        assert_eq!(g.other, vec!["shard:1".to_string()]);
        assert_eq!(
            parse_gres_list("--gres", "gpu").unwrap().gpu,
            Some((None, 1))
        );
        assert_eq!(
            parse_gres_list("--gres", "gpu:4").unwrap().gpu,
            Some((None, 4))
        );
        assert_eq!(
            parse_gres_list("--gres", "gpu:h100").unwrap().gpu,
            Some((Some("h100".into()), 1))
        );
        assert_eq!(
            parse_gres_list("--gres", "none").unwrap(),
            GresList::default()
        );
        for bad in [
            "gpu:a:b:c",
            "gpu:a100:x",
            ":2",
            "gpu:1,gpu:2",
            "gpu:a100:",
            "",
        ] {
            assert!(parse_gres_list("--gres", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn typed_counts() {
        assert_eq!(parse_typed_count("--gpus", "2").unwrap(), (None, 2));
        assert_eq!(
            parse_typed_count("--gpus", "a100:2").unwrap(),
            (Some("a100".into()), 2)
        );
        for bad in ["", "a100", "a100:2:3", "a100:2,v100:1", "-1", "x y:1"] {
            assert!(parse_typed_count("--gpus", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trips_its_display() {
        for text in [
            "A100:80GB:2",
            "H100",
            "24GB..:2",
            "A10G,A100:1",
            "nvidia:2",
            "2..8",
        ] {
            let spec = GpuSpec::parse(text).unwrap();
            assert_eq!(GpuSpec::parse(&spec.to_string()).unwrap(), spec, "{text}");
        }
    }
}
