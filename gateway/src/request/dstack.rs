//! dstack task files (`type: task`, dstack 0.22) → [`DstackTask`] → [`JobRequest`].
//!
//! The task is read for what bursar prices and shows — `name`, `nodes`, `resources` (`cpu`,
//! `memory`, `gpu`, `disk`, `shm_size`), `commands`, `max_duration`, `image`, `env`,
//! `spot_policy` — and **kept as written** (as JSON) for forwarding, so every other key
//! (`repos`, `python`, `ports`, `retry`, `fleets`, `backends`, …) reaches dstack untouched and
//! dstack remains the judge of them. Inside `resources` bursar is strict: an unknown key there
//! (a typo such as `gpus:`) is an error, because a resource bursar does not see is a resource
//! it does not price.
//!
//! Defaults are dstack's own (`resources.py`): `cpu: 2..`, `memory: 8GB..`, `disk: 100GB..`,
//! a GPU count of `1..` when a GPU spec names no count, one node. Forms accepted:
//!
//! - `cpu`: `4`, `"4..8"`, `"x86:4"`, `"arm:4.."`, `{min, max}`, `{arch, count}`.
//! - `memory`, `disk`: `16` (GB), `"16GB.."`, `"512MB"`, `"0.5GB"`, `{min, max}`; `disk` also
//!   `{size: …}`.
//! - `gpu`: see [`GpuSpec`].
//! - `max_duration`: seconds as a number or string, `"<n>s|m|h|d|w"` (one unit, as dstack's
//!   `Duration`), `off` or `false` for none.
//! - `env`: a list of `NAME=value` / `NAME` (taken from the submitter's environment), or a
//!   mapping.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::error::RequestError;
use super::gpu::{count_from_value, size_from_value, GpuSpec};
use super::units::{parse_dstack_megabytes, CountRange, SizeRange};
use super::JobRequest;

/// `resources` of a task, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DstackResources {
    /// CPU cores per node.
    pub cpu: CountRange,
    /// `x86` or `arm`, when given.
    pub cpu_arch: Option<String>,
    /// RAM per node.
    pub memory: SizeRange,
    pub gpu: Option<GpuSpec>,
    pub disk: Option<SizeRange>,
    pub shm_size_mb: Option<u64>,
}

/// `max_duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MaxDuration {
    Seconds(u64),
    /// `off`/`false`: no limit.
    Off,
}

/// `spot_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpotPolicy {
    Spot,
    OnDemand,
    Auto,
}

/// A dstack task, parsed once and carried validated, with the original for forwarding.
///
/// Serializes as the task file's content (JSON) and deserializes from it, so a [`JobRequest`]
/// carries the task unchanged through `POST /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DstackTask {
    pub name: Option<String>,
    pub nodes: u32,
    pub resources: DstackResources,
    pub commands: Vec<String>,
    pub max_duration: Option<MaxDuration>,
    pub image: Option<String>,
    /// `NAME → Some(value)`, or `None` for a bare `NAME` that dstack takes from the
    /// submitter's environment.
    pub env: BTreeMap<String, Option<String>>,
    pub spot_policy: Option<SpotPolicy>,
    config: Value,
}

/// Reads a dstack task file (YAML) into a validated request.
pub fn parse_dstack_task(yaml: &str) -> Result<JobRequest, RequestError> {
    let request = JobRequest::from_dstack(DstackTask::parse_yaml(yaml)?);
    request.validate()?;
    Ok(request)
}

fn err(message: impl Into<String>) -> RequestError {
    RequestError::Dstack(message.into())
}

impl DstackTask {
    /// Parses the YAML of a task file.
    pub fn parse_yaml(yaml: &str) -> Result<DstackTask, RequestError> {
        let config: Value =
            serde_yaml::from_str(yaml).map_err(|e| err(format!("not valid YAML: {e}")))?;
        DstackTask::from_config(config)
    }

    /// Reads a task configuration already in JSON form (as received in an API request).
    pub fn from_config(config: Value) -> Result<DstackTask, RequestError> {
        let map = config.as_object().ok_or_else(|| {
            err("a task file is a mapping of keys such as type, commands, resources")
        })?;
        match map.get("type").and_then(Value::as_str) {
            Some("task") => {}
            Some(other) => {
                return Err(err(format!(
                    "only `type: task` configurations can be submitted through bursar, not {other}"
                )))
            }
            None => return Err(err("`type: task` is missing")),
        }
        let string = |key: &str| -> Result<Option<String>, RequestError> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(v) => Err(err(format!("{key}: expected a non-empty string, got {v}"))),
            }
        };
        let nodes = match map.get("nodes") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    err(format!(
                        "nodes: expected a whole number of at least 1, got {v}"
                    ))
                })?,
        };
        let commands = match map.get("commands") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| err("commands: expected a list of strings"))?,
            Some(v) => {
                return Err(err(format!(
                    "commands: expected a list of strings, got {v}"
                )))
            }
        };
        let spot_policy = match string("spot_policy")?.as_deref() {
            None => None,
            Some("spot") => Some(SpotPolicy::Spot),
            Some("on-demand") => Some(SpotPolicy::OnDemand),
            Some("auto") => Some(SpotPolicy::Auto),
            Some(other) => {
                return Err(err(format!(
                    "spot_policy: expected spot, on-demand or auto, got {other:?}"
                )))
            }
        };
        Ok(DstackTask {
            name: string("name")?,
            nodes,
            resources: parse_resources(map.get("resources"))?,
            commands,
            max_duration: map
                .get("max_duration")
                .map(parse_max_duration)
                .transpose()?
                .flatten(),
            image: string("image")?,
            env: parse_env(map.get("env"))?,
            spot_policy,
            config,
        })
    }

    /// The task as written, for `runs/get_plan` (`run_spec.configuration`).
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// `max_duration` in whole minutes, rounded up; `None` when absent or `off`.
    pub fn time_limit_min(&self) -> Option<u64> {
        match self.max_duration {
            Some(MaxDuration::Seconds(s)) if s > 0 => Some(s.div_ceil(60)),
            _ => None,
        }
    }
}

fn parse_resources(value: Option<&Value>) -> Result<DstackResources, RequestError> {
    let mut resources = DstackResources {
        cpu: CountRange::at_least(2),
        cpu_arch: None,
        memory: SizeRange::at_least_mb(8 * 1024),
        gpu: None,
        disk: Some(SizeRange::at_least_mb(100 * 1024)),
        shm_size_mb: None,
    };
    let map = match value {
        None | Some(Value::Null) => return Ok(resources),
        Some(Value::Object(map)) => map,
        Some(v) => return Err(err(format!("resources: expected a mapping, got {v}"))),
    };
    for (key, v) in map {
        let at = |e: String| err(format!("resources.{key}: {e}"));
        match key.as_str() {
            "cpu" => {
                let (arch, count) = parse_cpu(v).map_err(at)?;
                resources.cpu_arch = arch;
                resources.cpu = count;
            }
            "memory" => resources.memory = size_from_value(v).map_err(at)?,
            "gpu" => {
                resources.gpu = match v {
                    Value::Null => None,
                    v => Some(GpuSpec::from_value(v)?),
                }
            }
            "disk" => {
                resources.disk = match v {
                    Value::Null => None,
                    Value::Object(d) if d.contains_key("size") => {
                        if let Some(other) = d.keys().find(|k| *k != "size") {
                            return Err(at(format!("unknown field {other:?}")));
                        }
                        Some(size_from_value(&d["size"]).map_err(at)?)
                    }
                    v => Some(size_from_value(v).map_err(at)?),
                }
            }
            "shm_size" => {
                resources.shm_size_mb = match v {
                    Value::Null => None,
                    Value::Number(n) => Some(parse_dstack_megabytes(&n.to_string()).map_err(at)?),
                    Value::String(s) => Some(parse_dstack_megabytes(s).map_err(at)?),
                    v => return Err(at(format!("expected a size, got {v}"))),
                }
            }
            other => {
                return Err(err(format!(
                    "resources: unknown key {other:?} (expected cpu, memory, gpu, disk or shm_size)"
                )))
            }
        }
    }
    Ok(resources)
}

/// `4`, `"4..8"`, `"x86:4"`, `{min, max}`, `{arch, count}` → (arch, count).
fn parse_cpu(value: &Value) -> Result<(Option<String>, CountRange), String> {
    let arch_name = |s: &str| -> Result<String, String> {
        match s.to_ascii_lowercase().as_str() {
            a @ ("x86" | "arm") => Ok(a.to_string()),
            _ => Err(format!(
                "unknown CPU architecture {s:?} (expected x86 or arm)"
            )),
        }
    };
    match value {
        Value::Number(_) => Ok((None, count_from_value(value)?)),
        Value::String(s) => {
            let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let (mut arch, mut count) = (None, None);
            for token in compact.split(':') {
                if token.is_empty() {
                    return Err(format!("{s:?} has an empty part"));
                }
                if token.contains("..") || token.bytes().all(|b| b.is_ascii_digit()) {
                    if count.replace(CountRange::parse(token)?).is_some() {
                        return Err(format!("{s:?} gives the count twice"));
                    }
                } else if arch.replace(arch_name(token)?).is_some() {
                    return Err(format!("{s:?} gives the architecture twice"));
                }
            }
            Ok((arch, count.unwrap_or(CountRange::at_least(2))))
        }
        Value::Object(map) if map.keys().all(|k| k == "min" || k == "max") => {
            Ok((None, count_from_value(value)?))
        }
        Value::Object(map) => {
            let mut arch = None;
            let mut count = CountRange::at_least(2);
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("arch", Value::String(a)) => arch = Some(arch_name(a)?),
                    ("arch", Value::Null) => {}
                    ("count", v) => count = count_from_value(v)?,
                    (other, _) => return Err(format!("unknown field {other:?}")),
                }
            }
            Ok((arch, count))
        }
        v => Err(format!("expected a count, a range or a mapping, got {v}")),
    }
}

/// dstack's `Duration`: a number of seconds, or `<n><s|m|h|d|w>` (spaces allowed before the
/// unit); `off`/`false` → none (`Some(Off)`); `true`/null → dstack's default (`None`).
fn parse_max_duration(value: &Value) -> Result<Option<MaxDuration>, RequestError> {
    let bad = || {
        err(format!(
            "max_duration: {value} is not a duration such as 3600, 90m, 2h, 1d or off"
        ))
    };
    let seconds = match value {
        Value::Null | Value::Bool(true) => return Ok(None),
        Value::Bool(false) => return Ok(Some(MaxDuration::Off)),
        Value::Number(n) => n.as_u64().ok_or_else(bad)?,
        Value::String(s) if s == "off" => return Ok(Some(MaxDuration::Off)),
        Value::String(s) => {
            if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
                s.parse::<u64>().map_err(|_| bad())?
            } else {
                let unit = s.chars().last().ok_or_else(bad)?;
                let amount = s[..s.len() - unit.len_utf8()].trim_end();
                let per_unit: u64 = match unit {
                    's' => 1,
                    'm' => 60,
                    'h' => 3_600,
                    'd' => 86_400,
                    'w' => 604_800,
                    _ => return Err(bad()),
                };
                if amount.is_empty() || !amount.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                amount
                    .parse::<u64>()
                    .ok()
                    .and_then(|a| a.checked_mul(per_unit))
                    .ok_or_else(bad)?
            }
        }
        _ => return Err(bad()),
    };
    Ok(Some(MaxDuration::Seconds(seconds)))
}

fn parse_env(value: Option<&Value>) -> Result<BTreeMap<String, Option<String>>, RequestError> {
    let mut env = BTreeMap::new();
    let name_ok = |name: &str| {
        !name.is_empty() && !name.contains(char::is_whitespace) && !name.contains('\0')
    };
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let text = item
                    .as_str()
                    .ok_or_else(|| err(format!("env: expected NAME=value strings, got {item}")))?;
                let (name, value) = match text.split_once('=') {
                    Some((name, value)) => (name, Some(value.to_string())),
                    None => (text, None),
                };
                if !name_ok(name) {
                    return Err(err(format!("env: {text:?} has no valid variable name")));
                }
                env.insert(name.to_string(), value);
            }
        }
        Some(Value::Object(map)) => {
            for (name, v) in map {
                if !name_ok(name) {
                    return Err(err(format!("env: {name:?} is not a variable name")));
                }
                let value = match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    Value::Bool(b) => Some(b.to_string()),
                    Value::Null => None,
                    v => return Err(err(format!("env.{name}: expected a value, got {v}"))),
                };
                env.insert(name.clone(), value);
            }
        }
        Some(v) => return Err(err(format!("env: expected a list or a mapping, got {v}"))),
    }
    Ok(env)
}

impl Serialize for DstackTask {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.config.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DstackTask {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DstackTask, D::Error> {
        let config = Value::deserialize(deserializer)?;
        DstackTask::from_config(config).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations() {
        let d = |v: Value| parse_max_duration(&v).unwrap();
        assert_eq!(d(json!("2h")), Some(MaxDuration::Seconds(7200)));
        assert_eq!(d(json!("90m")), Some(MaxDuration::Seconds(5400)));
        assert_eq!(d(json!("1d")), Some(MaxDuration::Seconds(86_400)));
        assert_eq!(d(json!("1 w")), Some(MaxDuration::Seconds(604_800)));
        assert_eq!(d(json!("3600")), Some(MaxDuration::Seconds(3600)));
        assert_eq!(d(json!(3600)), Some(MaxDuration::Seconds(3600)));
        assert_eq!(d(json!("off")), Some(MaxDuration::Off));
        assert_eq!(d(json!(false)), Some(MaxDuration::Off));
        assert_eq!(d(json!(true)), None);
        for bad in [
            json!("2x"),
            json!("h"),
            json!("1h30m"),
            json!(-5),
            json!(1.5),
            json!([]),
        ] {
            assert!(parse_max_duration(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_forms() {
        let c = |v: Value| parse_cpu(&v).unwrap();
        assert_eq!(c(json!(4)), (None, CountRange::exactly(4)));
        assert_eq!(c(json!("4..8")).1.min, Some(4));
        assert_eq!(
            c(json!("x86:4")),
            (Some("x86".into()), CountRange::exactly(4))
        );
        assert_eq!(
            c(json!("arm")),
            (Some("arm".into()), CountRange::at_least(2))
        );
        assert_eq!(c(json!({"min": 2, "max": 4})).1.max, Some(4));
        assert_eq!(
            c(json!({"arch": "arm", "count": "8.."})).1,
            CountRange::at_least(8)
        );
        assert!(parse_cpu(&json!("sparc:4")).is_err());
        assert!(parse_cpu(&json!("4:8")).is_err());
    }
}
