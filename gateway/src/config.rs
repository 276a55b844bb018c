//! bursar's configuration: one YAML file, unknown keys refused with their line.
//!
//! Layers, later wins: built-in defaults → the file (`--config` or `BURSAR_CONFIG`, else
//! `./bursar.yaml` when present) → `BURSAR_DATABASE` → command-line flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use bursar_pricing::{ClusterPricing, Currency, Decimal, EndStatePolicy, PartitionPricing};
use serde::Deserialize;

/// The example printed by `bursar config example`; also shipped as `deploy/examples/bursar.yaml`.
pub const EXAMPLE: &str = include_str!("../../deploy/examples/bursar.yaml");

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `sqlite://PATH` (relative paths are relative to the config file's folder).
    pub database: Option<String>,
    /// Display settings per currency; `su` and `usd` exist without being declared.
    #[serde(default)]
    pub currencies: BTreeMap<String, CurrencyConfig>,
    /// Account name → its parent; a missing parent means the root.
    #[serde(default)]
    pub accounts: BTreeMap<String, AccountConfig>,
    #[serde(default)]
    pub users: BTreeMap<String, UserConfig>,
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Extra price-table folders or files, on top of the tables bursar ships.
    #[serde(default)]
    pub price_tables: Vec<PathBuf>,
    /// Where the file was read from (not a key).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrencyConfig {
    /// Decimal places shown in tables (amounts are stored in micros regardless).
    #[serde(default = "default_decimals")]
    pub decimals: u8,
    #[serde(default)]
    pub description: Option<String>,
}

fn default_decimals() -> u8 {
    2
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    pub parent: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub default_account: String,
    #[serde(default)]
    pub accounts: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterKind {
    Slurm,
    Dstack,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub kind: ClusterKind,
    pub currency: String,
    /// Time zone sacct prints local times in (`UTC`, `Europe/Berlin`, `local`). Default: local.
    #[serde(default)]
    pub timezone: Option<String>,
    /// How each partition is priced: `{weights: "CPU=1.0,Mem=0.25G", max_tres: false}`,
    /// `{instance: c5.xlarge, region: us-east-1}`, or `{}` for Slurm's billing TRES.
    #[serde(default)]
    pub partitions: BTreeMap<String, PartitionPricing>,
    /// How partitions not listed above are priced. Default: Slurm's `billing` TRES, then CPUs.
    #[serde(default)]
    pub default_partition: Option<PartitionPricing>,
    #[serde(default)]
    pub qos: BTreeMap<String, QosConfig>,
    /// Overrides of the end-state policy: `NODE_FAIL: charge`, `TIMEOUT: free`, …
    #[serde(default)]
    pub end_states: EndStatePolicy,
    /// Where and how often `bursar collect` reads this cluster's usage.
    #[serde(default)]
    pub collect: Option<CollectConfig>,
}

/// Live collection from one cluster: exactly one source, and the schedule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectConfig {
    pub slurmrestd: Option<SlurmrestdSource>,
    pub sacct: Option<SacctSource>,
    pub dstack: Option<DstackSource>,
    /// Time between passes of the collection loop (default 5m).
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub interval: Option<Duration>,
    /// How far back each pass re-reads before the cursor, for records that reach the
    /// accounting database late (default 1h). Re-reading is free: posting is idempotent.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub overlap: Option<Duration>,
    /// Longest window asked for in one call, so a backfill is many small answers (default 1d).
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub slice: Option<Duration>,
    /// Limit for one call to the cluster (default 60s).
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub timeout: Option<Duration>,
    /// Attempts per call before the pass gives up until the next one (default 3).
    pub attempts: Option<u32>,
    /// Where the first pass starts when there is no cursor yet (default: 7 days ago).
    pub start: Option<String>,
}

/// slurmrestd's accounting API, with a token bursar mints from the cluster's JWT key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmrestdSource {
    /// `http://127.0.0.1:6820`
    pub url: String,
    /// The `jwt_key=` file of the cluster's `AuthAltParameters` (read by bursar, never sent).
    pub jwt_key_file: PathBuf,
    /// Who bursar acts as when reading accounting (default `slurm`, the SlurmUser).
    #[serde(default)]
    pub user: Option<String>,
    /// `v0.0.38`, `v0.0.40`, `v0.0.41`, `v0.0.42`, or `auto` (default: ask `/openapi/v3`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Zone slurmrestd 22.05 reads query times in (default UTC).
    #[serde(default)]
    pub server_timezone: Option<String>,
}

/// The `sacct` command on this host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SacctSource {
    /// Path to `sacct` (default: `sacct` on the PATH).
    #[serde(default)]
    pub program: Option<PathBuf>,
    /// `SLURM_CONF` for this cluster, when it is not the host's default.
    #[serde(default)]
    pub slurm_conf: Option<PathBuf>,
    /// The Slurm cluster name for `-M`, when it differs from bursar's name for it.
    #[serde(default)]
    pub slurm_cluster: Option<String>,
}

/// A dstack server project.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DstackSource {
    /// `http://127.0.0.1:3000`
    pub url: String,
    /// A file holding a dstack token of a project member (or admin).
    pub token_file: PathBuf,
    pub project: String,
    /// The bursar account the project's runs are charged to (default: the project's name).
    #[serde(default)]
    pub account: Option<String>,
    /// Per-user overrides: dstack user → bursar account.
    #[serde(default)]
    pub user_accounts: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    /// Multiplies the charge of the QOS's jobs, like Slurm's `UsageFactor`.
    pub usage_factor: Decimal,
}

impl ClusterConfig {
    /// The pricing rules this cluster's records are charged with.
    pub fn pricing(&self) -> ClusterPricing {
        let mut pricing = ClusterPricing::new(Currency::new(&self.currency));
        pricing.partitions = self.partitions.clone();
        pricing.default_partition = self.default_partition.clone().unwrap_or_default();
        pricing.qos_factors = self
            .qos
            .iter()
            .map(|(name, q)| (name.clone(), q.usage_factor))
            .collect();
        pricing.end_states = self.end_states.clone();
        pricing
    }
}

impl Config {
    /// Reads the configuration: `explicit` (from `--config`/`BURSAR_CONFIG`), else `./bursar.yaml`
    /// when it exists, else the defaults.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Config> {
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from("bursar.yaml")).filter(|p| p.exists()),
        };
        let mut config = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read config file {}", p.display()))?;
                let mut c = Config::parse(&text)
                    .with_context(|| format!("invalid config file {}", p.display()))?;
                c.source = Some(p.clone());
                c
            }
            None => Config::default(),
        };
        if let Ok(url) = std::env::var("BURSAR_DATABASE") {
            if !url.is_empty() {
                config.database = Some(url);
            }
        }
        Ok(config)
    }

    /// Parses YAML text; an unknown key is an error naming the key and its line.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = serde_yaml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(config)
    }

    /// The database URL, with a relative SQLite path resolved against the config file's folder.
    pub fn database_url(&self) -> String {
        let raw = self
            .database
            .clone()
            .unwrap_or_else(|| "sqlite://bursar.db".to_string());
        let Some(path) = raw.strip_prefix("sqlite://") else {
            return raw;
        };
        if path.starts_with('/') || path.starts_with(':') {
            return raw;
        }
        match self
            .source
            .as_ref()
            .and_then(|s| s.parent())
            .filter(|d| !d.as_os_str().is_empty())
        {
            Some(dir) => format!("sqlite://{}", dir.join(path).display()),
            None => raw,
        }
    }

    /// Decimal places to show for a currency in tables.
    pub fn decimals(&self, currency: &str) -> u8 {
        self.currencies.get(currency).map_or(2, |c| c.decimals)
    }

    /// Checks what serde can't: references between sections, names, parsable weights.
    /// Returns warnings (things that work but are probably not meant).
    pub fn validate(&self) -> anyhow::Result<Vec<String>> {
        let mut warnings = Vec::new();
        for (name, account) in &self.accounts {
            check_name("account", name)?;
            if let Some(parent) = &account.parent {
                if parent != "root" && !self.accounts.contains_key(parent) {
                    bail!("account {name}: parent {parent:?} is not declared under accounts");
                }
            }
        }
        for name in self.accounts.keys() {
            let mut seen = vec![name.as_str()];
            let mut cursor = self.accounts.get(name).and_then(|a| a.parent.as_deref());
            while let Some(parent) = cursor {
                if seen.contains(&parent) {
                    bail!("accounts form a cycle: {} -> {parent}", seen.join(" -> "));
                }
                seen.push(parent);
                cursor = self.accounts.get(parent).and_then(|a| a.parent.as_deref());
            }
        }
        for (user, u) in &self.users {
            check_name("user", user)?;
            for account in u.accounts.iter().chain(std::iter::once(&u.default_account)) {
                if !self.accounts.contains_key(account) {
                    bail!("user {user}: account {account:?} is not declared under accounts");
                }
            }
        }
        for (name, cluster) in &self.clusters {
            check_name("cluster", name)?;
            check_name("currency", &cluster.currency)?;
            for (qos, q) in &cluster.qos {
                if q.usage_factor.is_negative() {
                    bail!("cluster {name}: qos {qos}: usage_factor must not be negative");
                }
            }
            if let Some(collect) = &cluster.collect {
                let sources = [
                    collect.slurmrestd.is_some(),
                    collect.sacct.is_some(),
                    collect.dstack.is_some(),
                ];
                match sources.iter().filter(|s| **s).count() {
                    1 => {}
                    0 => {
                        bail!("cluster {name}: collect needs a source: slurmrestd, sacct or dstack")
                    }
                    _ => {
                        bail!("cluster {name}: collect has more than one source; give exactly one")
                    }
                }
                if collect.dstack.is_some() != (cluster.kind == ClusterKind::Dstack) {
                    bail!("cluster {name}: a dstack source needs `kind: dstack`, and a dstack cluster a dstack source");
                }
                if let Some(start) = &collect.start {
                    crate::timefmt::parse_instant(start)
                        .with_context(|| format!("cluster {name}: collect.start"))?;
                }
            }
            if let Some(tz) = &cluster.timezone {
                crate::timefmt::parse_zone(tz)
                    .with_context(|| format!("cluster {name}: timezone"))?;
            }
            if cluster.currency != "su"
                && cluster.default_partition.is_none()
                && cluster.kind == ClusterKind::Slurm
            {
                warnings.push(format!(
                    "cluster {name} bills in {} but has no default_partition: jobs in unlisted partitions \
                     are charged Slurm's billing units as if they were {}",
                    cluster.currency, cluster.currency
                ));
            }
        }
        Ok(warnings)
    }
}

fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.len() > 64
        || name
            .chars()
            .any(|c| c.is_whitespace() || c == '|' || c == ',')
    {
        bail!("{what} name {name:?} must be 1-64 characters without spaces, '|' or ','");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_is_valid() {
        let config = Config::parse(EXAMPLE).unwrap();
        config.validate().unwrap();
        assert!(config.clusters.contains_key("onprem"));
    }

    #[test]
    fn unknown_keys_name_the_key_and_line() {
        let err = Config::parse("database: sqlite://x.db\nclusters:\n  a:\n    kind: slurm\n    currency: su\n    partitons: {}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("partitons"), "{err}");
        assert!(err.contains("line 6"), "{err}");
    }

    #[test]
    fn usage_factors_are_read_exactly() {
        let c = Config::parse("clusters:\n  a:\n    kind: slurm\n    currency: su\n    qos:\n      p: {usage_factor: 0.1}\n      q: {usage_factor: \"1.25\"}\n      r: {usage_factor: 2}\n").unwrap();
        let qos = &c.clusters["a"].qos;
        assert_eq!(qos["p"].usage_factor.to_string(), "0.1");
        assert_eq!(qos["q"].usage_factor.to_string(), "1.25");
        assert_eq!(qos["r"].usage_factor.to_string(), "2");
    }

    #[test]
    fn relative_database_paths_follow_the_config_file() {
        let mut c = Config::parse("database: sqlite://data/b.db\n").unwrap();
        c.source = Some(PathBuf::from("/etc/bursar/bursar.yaml"));
        assert_eq!(c.database_url(), "sqlite:///etc/bursar/data/b.db");
        assert_eq!(Config::default().database_url(), "sqlite://bursar.db");
    }

    #[test]
    fn undeclared_parents_and_cycles_are_refused() {
        let c = Config::parse("accounts:\n  a: {parent: b}\n").unwrap();
        assert!(c.validate().is_err());
        let c = Config::parse("accounts:\n  a: {parent: b}\n  b: {parent: a}\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("cycle"));
    }
}
