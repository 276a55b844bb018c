//! Accounting job objects (`GET /slurmdb/vX/jobs`) to [`UsageRecord`]s, for every supported
//! version at once: each field is read in all the shapes the versions use (plain integers or
//! `{set, infinite, number}`, `null` or `""`, a state string or a state list), so one reader
//! serves v0.0.38 through v0.0.45 and a server that mixes shapes.
//!
//! A job that cannot be mapped is quarantined with a reason naming the JSON path and value;
//! the rest of the page still comes through.

use bursar_pricing::{JobState, Tres, UsageRecord};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::error::{api_error_list, check_ok_errors, excerpt, RestError};

pub use crate::RawQuarantine;

/// One page of jobs, split into records and quarantined jobs.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub records: Vec<UsageRecord>,
    pub quarantined: Vec<RawQuarantine>,
    pub warnings: Vec<String>,
}

/// Reads a 2xx jobs answer. The envelope must be JSON with a `jobs` array (after `errors[]`
/// were checked); each job is then mapped on its own.
pub(crate) fn parse_page(status: u16, body: &[u8], user: &str) -> Result<Page, RestError> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, default)]
        jobs: Option<Vec<&'a RawValue>>,
        #[serde(default)]
        errors: Option<Value>,
        #[serde(default)]
        warnings: Option<Value>,
    }
    let envelope: Envelope<'_> =
        serde_json::from_slice(body).map_err(|e| RestError::BadPayload {
            problem: format!("jobs answer is not valid JSON: {e}"),
            excerpt: excerpt(body),
        })?;
    let errors = envelope
        .errors
        .as_ref()
        .map(api_error_list)
        .unwrap_or_default();
    check_ok_errors(status, &errors, user)?;
    let jobs = envelope.jobs.ok_or_else(|| RestError::BadPayload {
        problem: "jobs answer has no \"jobs\" array".into(),
        excerpt: excerpt(body),
    })?;
    let warnings = envelope
        .warnings
        .as_ref()
        .map(api_error_list)
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.text)
        .collect();

    let mut page = Page {
        warnings,
        ..Page::default()
    };
    for raw in jobs {
        match map_raw(raw.get()) {
            Ok(record) => page.records.push(record),
            Err(reason) => page.quarantined.push(RawQuarantine {
                reason,
                raw: raw.get().to_string(),
            }),
        }
    }
    Ok(page)
}

/// Whether a warning is the one slurmrestd 23.11 and later add to every empty answer
/// (`slurmdb_jobs_get(0x…) found nothing`): a quiet slice, not worth a warning of bursar's.
pub(crate) fn says_found_nothing(warning: &str) -> bool {
    warning.trim_end().ends_with(") found nothing")
}

/// One job's JSON text to a record, or the quarantine reason.
pub(crate) fn map_raw(raw: &str) -> Result<UsageRecord, String> {
    let job: Value = serde_json::from_str(raw).map_err(|e| format!("job is not JSON: {e}"))?;
    if !job.is_object() {
        return Err(format!("job is {}, not a JSON object", show(&job)));
    }
    map_job(&job).map_err(|reason| match job_label(&job) {
        Some(label) => format!("{label}: {reason}"),
        None => reason,
    })
}

/// `job 7` or `job 7 on onprem`, when those can be read, to prefix reasons with.
fn job_label(job: &Value) -> Option<String> {
    let id = job.get("job_id").and_then(Value::as_u64)?;
    match job.get("cluster").and_then(Value::as_str) {
        Some(cluster) if !cluster.is_empty() => Some(format!("job {id} on {cluster}")),
        _ => Some(format!("job {id}")),
    }
}

/// Maps one job object. See the module documentation of `slurmrestd` for the rules.
pub(crate) fn map_job(job: &Value) -> Result<UsageRecord, String> {
    let job_id = positive(job, "job_id")?;
    let cluster = required_text(job, "cluster")?;
    let account = required_text(job, "account")?;
    let user = required_text(job, "user")?;
    let state = job_state(job)?;

    let submit = positive(job, "time.submission")?;
    let start = optional_epoch(job, "time.start")?;
    let end = optional_epoch(job, "time.end")?;
    let elapsed = match number(job, "time.elapsed")? {
        Num::Value(n) if n >= 0 => n.unsigned_abs(),
        Num::Absent => return Err("time.elapsed is missing".into()),
        _ => {
            return Err(format!(
                "time.elapsed is {}, not a number of seconds",
                show_at(job, "time.elapsed")
            ))
        }
    };
    let elapsed_us = elapsed
        .checked_mul(1_000_000)
        .ok_or_else(|| format!("time.elapsed {elapsed} is too large"))?;

    Ok(UsageRecord {
        cluster: cluster.to_string(),
        job_id: job_id.to_string(),
        display_id: display_id(job, job_id)?,
        submit,
        start,
        end,
        account: account.to_string(),
        user: user.to_string(),
        partition: optional_text(job, "partition")?.map(str::to_string),
        qos: optional_text(job, "qos")?.map(str::to_string),
        state,
        elapsed_us,
        alloc: allocated(job)?,
        time_limit_min: time_limit(job)?,
        job_name: optional_text(job, "name")?.map(str::to_string),
        price_per_hour_micros: None,
        blocks: None,
    })
}

/// `7_3` for an array task, `11+1` for a het component, else the raw id. An array record
/// without a task id (the pending remainder of an array) shows its task expression: `7_[4-9]`.
fn display_id(job: &Value, job_id: i64) -> Result<String, String> {
    let array_job = match number(job, "array.job_id")? {
        Num::Value(n) if n > 0 => Some(n),
        _ => None,
    };
    if let Some(array_job) = array_job {
        if let Num::Value(task) = number(job, "array.task_id")? {
            return Ok(format!("{array_job}_{task}"));
        }
        if let Some(tasks) = optional_text(job, "array.task")? {
            return Ok(format!("{array_job}_[{tasks}]"));
        }
    }
    if let Num::Value(het_job) = number(job, "het.job_id")? {
        if het_job > 0 {
            if let Num::Value(offset) = number(job, "het.job_offset")? {
                return Ok(format!("{het_job}+{offset}"));
            }
        }
    }
    Ok(job_id.to_string())
}

/// The accounting state of the record.
///
/// v0.0.38 sends one word (`"COMPLETED"`); v0.0.40+ send the base state and its flags as a
/// list (`["PENDING","REQUEUED"]`, `["RUNNING","COMPLETING"]`). The list is read the way
/// Slurm's own `job_state_string()` (what sacct and v0.0.38 print) reads the bits: the flags
/// that end the run a record describes win over the base — RESIZING, then REQUEUED /
/// REQUEUE_FED / REQUEUE_HOLD / SPECIAL_EXIT (all [`JobState::Requeued`]), then REVOKED —
/// and every other flag (COMPLETING, CONFIGURING, SIGNALING, STAGE_OUT, LAUNCH_FAILED, …,
/// and names newer servers add) is transient and ignored in favour of the base state. So an
/// earlier run of a requeued job, stored as `["PENDING","REQUEUED"]`, is a final `REQUEUED`
/// record exactly as sacct shows it.
fn job_state(job: &Value) -> Result<JobState, String> {
    let words: Vec<&str> = match get(job, "state.current") {
        None => return Err("state.current is missing".into()),
        Some(Value::String(word)) => vec![word.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().ok_or_else(|| {
                    format!(
                        "state.current {} holds a non-string",
                        show_at(job, "state.current")
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(format!(
                "state.current is {}, not a state name or list",
                show_at(job, "state.current")
            ))
        }
    };
    let upper: Vec<String> = words
        .iter()
        .map(|w| w.trim().to_ascii_uppercase())
        .collect();
    let has = |name: &str| upper.iter().any(|w| w == name);
    if has("RESIZING") {
        return Ok(JobState::Resizing);
    }
    if ["REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"]
        .iter()
        .any(|w| has(w))
    {
        return Ok(JobState::Requeued);
    }
    if has("REVOKED") {
        return Ok(JobState::Revoked);
    }
    let mut base = None;
    for word in &upper {
        let Some(state) = base_state(word) else {
            continue;
        };
        match base {
            Some(seen) if seen != state => {
                return Err(format!(
                    "state.current {} names two base states",
                    show_at(job, "state.current")
                ))
            }
            _ => base = Some(state),
        }
    }
    base.ok_or_else(|| {
        format!(
            "state.current {} has no job state bursar knows",
            show_at(job, "state.current")
        )
    })
}

/// Slurm's base job states (`JOB_STATE_BASE`), by their long names.
fn base_state(word: &str) -> Option<JobState> {
    Some(match word {
        "PENDING" => JobState::Pending,
        "RUNNING" => JobState::Running,
        "SUSPENDED" => JobState::Suspended,
        "COMPLETED" | "COMPLETE" => JobState::Completed,
        "CANCELLED" => JobState::Cancelled,
        "FAILED" => JobState::Failed,
        "TIMEOUT" => JobState::Timeout,
        "NODE_FAIL" => JobState::NodeFail,
        "PREEMPTED" => JobState::Preempted,
        "BOOT_FAIL" => JobState::BootFail,
        "DEADLINE" => JobState::Deadline,
        "OUT_OF_MEMORY" => JobState::OutOfMemory,
        _ => return None,
    })
}

/// `tres.allocated[]` as a TRES vector: `{type, name, count}` becomes `type` or `type/name`
/// (`cpu`, `mem` in MB, `node`, `billing`, `gres/gpu`, `gres/gpu:h100`, `license/x`, …).
/// Entries without a count and zero counts are left out, as sacct leaves them out of AllocTRES:
/// slurmctld stores energy as NO_VAL64, which 22.05's v0.0.38 prints as `"count": null` and
/// the v0.0.40+ parsers print as a signed 64-bit number, `"count": -2` (INFINITE64: `-1`).
fn allocated(job: &Value) -> Result<Tres, String> {
    let items = match get(job, "tres.allocated") {
        None => return Err("tres.allocated is missing".into()),
        Some(Value::Null) => return Ok(Tres::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("tres.allocated is {}, not a list", show(other))),
    };
    let mut tres = Tres::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("tres.allocated[{i}]");
        if !item.is_object() {
            return Err(format!("{path} is {}, not an object", show(item)));
        }
        let kind = match item.get("type") {
            Some(Value::String(kind)) if !kind.trim().is_empty() => kind.trim(),
            Some(other) => return Err(format!("{path}.type is {}", show(other))),
            None => return Err(format!("{path}.type is missing")),
        };
        let name = match item.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) if name.trim().is_empty() => None,
            Some(Value::String(name)) => Some(name.trim()),
            Some(other) => return Err(format!("{path}.name is {}, not a string", show(other))),
        };
        let count = match number(item, "count").map_err(|e| format!("{path}.{e}"))? {
            Num::Value(NO_VAL64_SIGNED | INFINITE64_SIGNED)
                if MEASURED.iter().any(|m| kind.eq_ignore_ascii_case(m)) =>
            {
                continue
            }
            Num::Value(n) if n < 0 => {
                return Err(format!("{path}.count is {n}, a negative count"));
            }
            Num::Value(0) | Num::Absent | Num::Unset | Num::Infinite => continue,
            Num::Value(n) => n.unsigned_abs(),
        };
        let key = match name {
            Some(name) => format!("{kind}/{name}"),
            None => kind.to_string(),
        }
        .to_ascii_lowercase();
        if tres.get(&key).is_some() {
            return Err(format!("{path}: TRES {key} appears twice"));
        }
        tres.set(&key, count);
    }
    Ok(tres)
}

/// TRES slurmctld measures rather than allocates, left unset (NO_VAL64) when nothing measured
/// them. An unset count of anything else (cpu, mem, billing, a GPU) would price the job wrong,
/// so it still quarantines the job.
const MEASURED: [&str; 4] = ["energy", "fs", "vmem", "pages"];

/// NO_VAL64 and INFINITE64 as the v0.0.40+ parsers print a 64-bit count: signed.
const NO_VAL64_SIGNED: i64 = -2;
const INFINITE64_SIGNED: i64 = -1;

/// `time.limit` in minutes: `null` (v0.0.38's NO_VAL/INFINITE), `{infinite: true}` and
/// `{set: false}` (no limit of the job's own) are `None`.
fn time_limit(job: &Value) -> Result<Option<u64>, String> {
    match number(job, "time.limit")? {
        Num::Value(n) if n < 0 => Err(format!("time.limit is {n}, a negative limit")),
        // NO_VAL and INFINITE leaking through as plain 32-bit numbers
        Num::Value(n) if n >= 0xffff_fffe => Ok(None),
        Num::Value(n) => Ok(Some(n.unsigned_abs())),
        Num::Absent | Num::Unset | Num::Infinite => Ok(None),
    }
}

/// A number in any of the versions' shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// The field is not there.
    Absent,
    /// `null`, or `{"set": false, …}`.
    Unset,
    /// `{"infinite": true, …}`.
    Infinite,
    Value(i64),
}

fn number(job: &Value, path: &str) -> Result<Num, String> {
    let Some(value) = get(job, path) else {
        return Ok(Num::Absent);
    };
    let not_a_number = || format!("{path} is {}, not a whole number", show(value));
    match value {
        Value::Null => Ok(Num::Unset),
        Value::Number(n) => n.as_i64().map(Num::Value).ok_or_else(not_a_number),
        Value::Object(fields) => {
            let flag = |name: &str, default: bool| match fields.get(name) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(not_a_number()),
            };
            if flag("infinite", false)? {
                return Ok(Num::Infinite);
            }
            if !flag("set", true)? {
                return Ok(Num::Unset);
            }
            match fields.get("number") {
                Some(Value::Number(n)) => n.as_i64().map(Num::Value).ok_or_else(not_a_number),
                _ => Err(not_a_number()),
            }
        }
        _ => Err(not_a_number()),
    }
}

/// A positive number that must be there: an id or a submit time.
fn positive(job: &Value, path: &str) -> Result<i64, String> {
    match number(job, path)? {
        Num::Value(n) if n > 0 => Ok(n),
        Num::Absent => Err(format!("{path} is missing")),
        _ => Err(format!(
            "{path} is {}, not a positive number",
            show_at(job, path)
        )),
    }
}

/// An epoch time where 0 and unset mean "not (yet)": a start or end.
fn optional_epoch(job: &Value, path: &str) -> Result<Option<i64>, String> {
    match number(job, path)? {
        Num::Value(n) if n > 0 => Ok(Some(n)),
        Num::Value(0) | Num::Absent | Num::Unset => Ok(None),
        _ => Err(format!("{path} is {}, not a time", show_at(job, path))),
    }
}

fn required_text<'a>(job: &'a Value, path: &str) -> Result<&'a str, String> {
    match get(job, path) {
        None => Err(format!("{path} is missing")),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.trim()),
        Some(Value::String(_)) => Err(format!("{path} is empty")),
        Some(other) => Err(format!("{path} is {}, not a string", show(other))),
    }
}

/// Missing, `null` and `""` (what v0.0.40+ send for "none") are all `None`.
fn optional_text<'a>(job: &'a Value, path: &str) -> Result<Option<&'a str>, String> {
    match get(job, path) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim()).filter(|t| !t.is_empty())),
        Some(other) => Err(format!("{path} is {}, not a string", show(other))),
    }
}

/// The value at a dotted path; `None` when any step is missing or not an object.
fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

fn show_at(job: &Value, path: &str) -> String {
    get(job, path).map_or_else(|| "missing".to_string(), show)
}

/// A value as compact JSON, cut at 80 characters.
fn show(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "job_id": 42, "cluster": "onprem", "account": "physics", "user": "alice",
            "partition": "batch", "qos": "normal", "name": "train",
            "state": {"current": "COMPLETED", "reason": "None"},
            "array": {"job_id": 0, "task_id": null, "task": null},
            "het": {"job_id": 0, "job_offset": null},
            "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60, "limit": 5},
            "tres": {"allocated": [
                {"type": "cpu", "name": null, "id": 1, "count": 2},
                {"type": "energy", "name": null, "id": 3, "count": null}
            ]}
        })
    }

    /// The empty answer's warning as `_db_query_list_funcname` prints it (23.11+), against the
    /// others.
    #[test]
    fn the_empty_answers_warning_is_told_from_the_others() {
        assert!(says_found_nothing(
            "slurmdb_jobs_get(0x55d0c1a2b3c0) found nothing"
        ));
        assert!(!says_found_nothing(
            "slurmdb_jobs_get(0x55d0c1a2b3c0) reports nothing changed"
        ));
        assert!(!says_found_nothing("Unable to query jobs"));
    }

    fn with(mut job: Value, path: &str, value: Value) -> Value {
        let mut target = &mut job;
        let keys: Vec<&str> = path.split('.').collect();
        for key in &keys[..keys.len() - 1] {
            target = target.get_mut(*key).unwrap();
        }
        target[keys[keys.len() - 1]] = value;
        job
    }

    fn without(mut job: Value, path: &str) -> Value {
        let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
        let target = if parent.is_empty() {
            &mut job
        } else {
            parent
                .split('.')
                .fold(&mut job, |v, k| v.get_mut(k).unwrap())
        };
        target.as_object_mut().unwrap().remove(key);
        job
    }

    #[test]
    fn a_plain_job() {
        let r = map_job(&base()).unwrap();
        assert_eq!(
            (
                r.job_id.as_str(),
                r.display_id.as_str(),
                r.submit,
                r.start,
                r.end
            ),
            ("42", "42", 100, Some(110), Some(170))
        );
        assert_eq!((r.elapsed_us, r.time_limit_min), (60_000_000, Some(5)));
        assert_eq!(r.alloc, Tres::parse("cpu=2").unwrap());
        assert_eq!(r.state, JobState::Completed);
    }

    #[test]
    fn numbers_in_every_shape() {
        let job = with(
            base(),
            "time.limit",
            json!({"set": true, "infinite": false, "number": 60}),
        );
        assert_eq!(map_job(&job).unwrap().time_limit_min, Some(60));
        for unlimited in [
            json!(null),
            json!({"set": false, "infinite": false, "number": 0}),
            json!({"set": true, "infinite": true, "number": 0}),
            json!(4_294_967_295u64),
        ] {
            let job = with(base(), "time.limit", unlimited);
            assert_eq!(map_job(&job).unwrap().time_limit_min, None);
        }
        let job = with(base(), "time.start", json!(0));
        assert_eq!(map_job(&job).unwrap().start, None);
        let job = with(base(), "time.end", json!({"set": false, "number": 0}));
        assert_eq!(map_job(&job).unwrap().end, None);
    }

    #[test]
    fn states() {
        for (current, state) in [
            (json!("CANCELLED"), JobState::Cancelled),
            (json!(["COMPLETED"]), JobState::Completed),
            (json!(["RUNNING", "COMPLETING"]), JobState::Running),
            (json!(["PENDING", "REQUEUED"]), JobState::Requeued),
            (json!(["PENDING", "REQUEUE_HOLD"]), JobState::Requeued),
            (json!(["FAILED", "LAUNCH_FAILED"]), JobState::Failed),
            (json!(["CANCELLED", "SOMETHING_NEW"]), JobState::Cancelled),
            (json!(["PENDING", "REVOKED"]), JobState::Revoked),
            (json!(["OUT_OF_MEMORY"]), JobState::OutOfMemory),
        ] {
            let job = with(base(), "state.current", current.clone());
            assert_eq!(map_job(&job).unwrap().state, state, "{current}");
        }
        for bad in [
            json!([]),
            json!(["COMPLETING"]),
            json!(["COMPLETED", "FAILED"]),
            json!(7),
            json!([7]),
        ] {
            let job = with(base(), "state.current", bad.clone());
            assert!(map_job(&job).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_for_arrays_and_het_jobs() {
        let task = with(
            with(base(), "array.job_id", json!(7)),
            "array.task_id",
            json!({"set": true, "infinite": false, "number": 3}),
        );
        assert_eq!(map_job(&task).unwrap().display_id, "7_3");
        let rest = with(
            with(base(), "array.job_id", json!(7)),
            "array.task",
            json!("4-9"),
        );
        assert_eq!(map_job(&rest).unwrap().display_id, "7_[4-9]");
        let het = with(
            with(base(), "het.job_id", json!(11)),
            "het.job_offset",
            json!(1),
        );
        assert_eq!(map_job(&het).unwrap().display_id, "11+1");
    }

    #[test]
    fn tres_names() {
        let job = with(
            base(),
            "tres.allocated",
            json!([
                {"type": "cpu", "name": "", "count": 4},
                {"type": "mem", "name": "", "count": {"set": true, "infinite": false, "number": 4096}},
                {"type": "gres", "name": "gpu", "count": 2},
                {"type": "gres", "name": "gpu:h100", "count": 2},
                {"type": "billing", "count": 22},
                {"type": "fs", "name": "disk", "count": 0}
            ]),
        );
        assert_eq!(
            map_job(&job).unwrap().alloc,
            Tres::parse("billing=22,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=4G").unwrap()
        );
        // v0.0.40+: energy not measured is NO_VAL64 printed signed (Slurm 23.11 and later).
        let unset = with(
            base(),
            "tres.allocated",
            json!([
                {"type": "cpu", "name": "", "id": 1, "count": 2},
                {"type": "mem", "name": "", "id": 2, "count": 2000},
                {"type": "energy", "name": "", "id": 3, "count": -2},
                {"type": "node", "name": "", "id": 4, "count": 1},
                {"type": "billing", "name": "", "id": 5, "count": 2},
                {"type": "fs", "name": "disk", "id": 6, "count": -1}
            ]),
        );
        assert_eq!(
            map_job(&unset).unwrap().alloc,
            Tres::parse("billing=2,cpu=2,mem=2000M,node=1").unwrap()
        );
        // Unset where it prices the job: quarantined, not priced as nothing.
        let billing = with(
            base(),
            "tres.allocated",
            json!([{"type": "cpu", "count": 2}, {"type": "billing", "count": -2}]),
        );
        assert_eq!(
            map_job(&billing).unwrap_err(),
            "tres.allocated[1].count is -2, a negative count"
        );
        let twice = with(
            base(),
            "tres.allocated",
            json!([{"type": "cpu", "count": 1}, {"type": "CPU", "count": 1}]),
        );
        assert_eq!(
            map_job(&twice).unwrap_err(),
            "tres.allocated[1]: TRES cpu appears twice"
        );
    }

    #[test]
    fn precise_reasons() {
        let cases = [
            (
                without(base(), "time.submission"),
                "time.submission is missing",
            ),
            (
                with(base(), "time.elapsed", json!("60")),
                "time.elapsed is \"60\", not a whole number",
            ),
            (with(base(), "account", json!("")), "account is empty"),
            (
                with(base(), "user", json!(null)),
                "user is null, not a string",
            ),
            (without(base(), "tres"), "tres.allocated is missing"),
            (
                with(base(), "time.start", json!(-5)),
                "time.start is -5, not a time",
            ),
            (
                with(
                    base(),
                    "tres.allocated",
                    json!([{"type": "cpu", "count": -3}]),
                ),
                "tres.allocated[0].count is -3, a negative count",
            ),
            (
                with(
                    base(),
                    "tres.allocated",
                    json!([{"type": "cpu", "count": 1.5}]),
                ),
                "tres.allocated[0].count is 1.5, not a whole number",
            ),
        ];
        for (job, reason) in cases {
            assert_eq!(map_job(&job).unwrap_err(), reason);
        }
        assert_eq!(
            map_raw(&without(base(), "time.submission").to_string()).unwrap_err(),
            "job 42 on onprem: time.submission is missing"
        );
        assert_eq!(map_raw("[1]").unwrap_err(), "job is [1], not a JSON object");
    }

    #[test]
    fn pages() {
        let body = br#"{"meta": {}, "errors": [{"description": "Nothing found",
            "error_number": 9003}], "jobs": []}"#;
        let page = parse_page(200, body, "slurm").unwrap();
        assert!(page.records.is_empty() && page.quarantined.is_empty());

        let auth = br#"{"errors": [{"error_number": 1007, "error": "Protocol authentication error",
            "source": "slurmdb_jobs_get"}], "jobs": []}"#;
        assert!(matches!(
            parse_page(200, auth, "slurm"),
            Err(RestError::Auth { .. })
        ));
        let truncated = br#"{"jobs": [{"job_id": 1, "clus"#;
        assert!(matches!(
            parse_page(200, truncated, "slurm"),
            Err(RestError::BadPayload { .. })
        ));
        assert!(matches!(
            parse_page(200, b"{\"errors\": []}", "slurm"),
            Err(RestError::BadPayload { .. })
        ));
    }
}
