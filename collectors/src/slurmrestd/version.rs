//! The slurmrestd OpenAPI versions bursar speaks, their paths, and discovery from the spec a
//! server serves at `GET /openapi/v3`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::IgnoredAny;
use serde::Deserialize;

/// A slurmrestd OpenAPI version (the same number for `/slurm/…` and `/slurmdb/…`).
///
/// | version | Slurm | served by |
/// |---|---|---|
/// | v0.0.38 | 22.05 (also 23.02, 23.11) | hand-written `dbv0.0.38` / `v0.0.38` plugins |
/// | v0.0.40 | 23.11 – 25.05 | `data_parser/v0.0.40` |
/// | v0.0.41 | 24.05 – 25.11 | `data_parser/v0.0.41` |
/// | v0.0.42 | 24.11 – 26.05 | `data_parser/v0.0.42` |
/// | v0.0.43 | 25.05 – | `data_parser/v0.0.43` |
/// | v0.0.44 | 25.11 – | `data_parser/v0.0.44` |
/// | v0.0.45 | 26.05 – | `data_parser/v0.0.45` |
///
/// v0.0.43–v0.0.45 carry v0.0.42's job, submit, cancel and error objects for every field
/// bursar reads or sends (v0.0.44 adds the state flag `EXPEDITING`, v0.0.45 drops `pinged` and
/// `mode` from a ping, keeping `responding` and `primary`).
///
/// v0.0.39 (23.02's data_parser debut, gone in 24.11) is not supported: every release that
/// serves it also serves v0.0.38 or v0.0.40.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    V0_0_38,
    V0_0_40,
    V0_0_41,
    V0_0_42,
    V0_0_43,
    V0_0_44,
    V0_0_45,
}

impl ApiVersion {
    /// Every supported version, oldest first.
    pub const ALL: [ApiVersion; 7] = [
        ApiVersion::V0_0_38,
        ApiVersion::V0_0_40,
        ApiVersion::V0_0_41,
        ApiVersion::V0_0_42,
        ApiVersion::V0_0_43,
        ApiVersion::V0_0_44,
        ApiVersion::V0_0_45,
    ];

    /// `v0.0.38`, as it appears in URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0_0_38 => "v0.0.38",
            ApiVersion::V0_0_40 => "v0.0.40",
            ApiVersion::V0_0_41 => "v0.0.41",
            ApiVersion::V0_0_42 => "v0.0.42",
            ApiVersion::V0_0_43 => "v0.0.43",
            ApiVersion::V0_0_44 => "v0.0.44",
            ApiVersion::V0_0_45 => "v0.0.45",
        }
    }

    /// The minor number: 38, 40, 41, 42, 43, 44, 45.
    pub fn minor(self) -> u32 {
        match self {
            ApiVersion::V0_0_38 => 38,
            ApiVersion::V0_0_40 => 40,
            ApiVersion::V0_0_41 => 41,
            ApiVersion::V0_0_42 => 42,
            ApiVersion::V0_0_43 => 43,
            ApiVersion::V0_0_44 => 44,
            ApiVersion::V0_0_45 => 45,
        }
    }

    fn from_minor(minor: u32) -> Option<ApiVersion> {
        ApiVersion::ALL.into_iter().find(|v| v.minor() == minor)
    }

    /// Built on Slurm's data_parser (v0.0.40 and later): numbers as `{set, infinite, number}`,
    /// enums as string lists, `""` for unset strings, epoch times in queries.
    pub fn is_data_parser(self) -> bool {
        self >= ApiVersion::V0_0_40
    }

    /// `GET` accounting jobs. v0.0.38's path is written as the live 22.05 server was called
    /// (it answers with or without the trailing slash); v0.0.40+ as the generated specs list it.
    pub(crate) fn db_jobs_path(self) -> String {
        match self {
            ApiVersion::V0_0_38 => "/slurmdb/v0.0.38/jobs".to_string(),
            v => format!("/slurmdb/{}/jobs/", v.as_str()),
        }
    }

    pub(crate) fn ping_path(self) -> String {
        match self {
            ApiVersion::V0_0_38 => "/slurm/v0.0.38/ping".to_string(),
            v => format!("/slurm/{}/ping/", v.as_str()),
        }
    }

    pub(crate) fn submit_path(self) -> String {
        format!("/slurm/{}/job/submit", self.as_str())
    }

    pub(crate) fn job_path(self, job_id: u64) -> String {
        format!("/slurm/{}/job/{job_id}", self.as_str())
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown slurmrestd API version {0:?} (bursar speaks v0.0.38, v0.0.40 to v0.0.45)")]
pub struct UnknownApiVersion(pub String);

impl FromStr for ApiVersion {
    type Err = UnknownApiVersion;

    /// `v0.0.41`, `0.0.41`, `dbv0.0.38`.
    fn from_str(text: &str) -> Result<ApiVersion, UnknownApiVersion> {
        let trimmed = text.trim();
        let bare = trimmed
            .strip_prefix("dbv")
            .or_else(|| trimmed.strip_prefix('v'))
            .unwrap_or(trimmed);
        bare.strip_prefix("0.0.")
            .and_then(|minor| minor.parse().ok())
            .and_then(ApiVersion::from_minor)
            .ok_or_else(|| UnknownApiVersion(text.to_string()))
    }
}

/// Which version a client uses: a fixed one, or the highest supported one the server lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiSelection {
    /// Ask `GET /openapi/v3` (authenticated) once, on first use.
    #[default]
    Auto,
    Fixed(ApiVersion),
}

/// What discovery found in a served spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Discovered {
    /// The highest supported version with a `/slurmdb/vX/jobs` path.
    pub chosen: Option<ApiVersion>,
    /// Every `v0.0.N` that has a slurmdb jobs path, supported or not.
    pub offered: Vec<String>,
}

/// Picks the version from a served OpenAPI document: the highest supported one whose
/// `/slurmdb/vX/jobs` path is listed. Only `paths` keys are read (the values are skipped
/// unparsed: a 25.x spec is megabytes).
pub(crate) fn discover(spec: &[u8]) -> Result<Discovered, serde_json::Error> {
    #[derive(Deserialize)]
    struct Spec {
        #[serde(default)]
        paths: BTreeMap<String, IgnoredAny>,
    }
    let spec: Spec = serde_json::from_slice(spec)?;
    let mut offered = Vec::new();
    let mut chosen = None;
    for path in spec.paths.keys() {
        let Some(rest) = path.strip_prefix("/slurmdb/v0.0.") else {
            continue;
        };
        let Some((minor, tail)) = rest.split_once('/') else {
            continue;
        };
        if tail.trim_end_matches('/') != "jobs" {
            continue;
        }
        let Ok(minor) = minor.parse::<u32>() else {
            continue;
        };
        offered.push(format!("v0.0.{minor}"));
        if let Some(version) = ApiVersion::from_minor(minor) {
            chosen = chosen.max(Some(version));
        }
    }
    offered.sort();
    offered.dedup();
    Ok(Discovered { chosen, offered })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        assert_eq!("v0.0.38".parse(), Ok(ApiVersion::V0_0_38));
        assert_eq!("dbv0.0.38".parse(), Ok(ApiVersion::V0_0_38));
        assert_eq!("0.0.42".parse(), Ok(ApiVersion::V0_0_42));
        assert!("v0.0.39".parse::<ApiVersion>().is_err());
        assert_eq!("v0.0.45".parse(), Ok(ApiVersion::V0_0_45));
        assert!("v0.0.46".parse::<ApiVersion>().is_err());
        for v in ApiVersion::ALL {
            assert_eq!(v.as_str().parse(), Ok(v));
        }
    }

    #[test]
    fn discovery_picks_the_highest_supported() {
        let spec = br#"{"paths": {
            "/slurmdb/v0.0.41/jobs/": {"get": {}},
            "/slurmdb/v0.0.42/jobs/": {},
            "/slurmdb/v0.0.43/jobs/": {},
            "/slurmdb/v0.0.42/job/{job_id}": {},
            "/slurm/v0.0.44/jobs/": {}
        }}"#;
        let found = discover(spec).unwrap();
        assert_eq!(found.chosen, Some(ApiVersion::V0_0_43));
        assert_eq!(found.offered, vec!["v0.0.41", "v0.0.42", "v0.0.43"]);

        // 25.11 loads v0.0.41 to v0.0.44; a site may load only the newest plugin; a later
        // Slurm may offer versions bursar does not know yet
        let slurm_25_11 = br#"{"paths": {
            "/slurmdb/v0.0.41/jobs/": {}, "/slurmdb/v0.0.42/jobs/": {},
            "/slurmdb/v0.0.43/jobs/": {}, "/slurmdb/v0.0.44/jobs/": {}
        }}"#;
        assert_eq!(
            discover(slurm_25_11).unwrap().chosen,
            Some(ApiVersion::V0_0_44)
        );
        let only_45 = br#"{"paths": {"/slurmdb/v0.0.45/jobs/": {}}}"#;
        assert_eq!(discover(only_45).unwrap().chosen, Some(ApiVersion::V0_0_45));
        let newer = br#"{"paths": {"/slurmdb/v0.0.45/jobs/": {}, "/slurmdb/v0.0.46/jobs/": {}}}"#;
        let found = discover(newer).unwrap();
        assert_eq!(found.chosen, Some(ApiVersion::V0_0_45));
        assert_eq!(found.offered, vec!["v0.0.45", "v0.0.46"]);

        let only_39 = br#"{"paths": {"/slurmdb/v0.0.39/jobs": {}}}"#;
        assert_eq!(discover(only_39).unwrap().chosen, None);
        assert!(discover(b"{\"paths\": 3}").is_err());
    }
}
