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
    /// Extra price-table folders or files, on top of the tables bursar ships (and the versions
    /// stored in the ledger by `bursar prices import` and `prices refresh`).
    #[serde(default)]
    pub price_tables: Vec<PathBuf>,
    /// `bursar prices refresh`: where and what to fetch. See [`PricesConfig`].
    #[serde(default)]
    pub prices: PricesConfig,
    /// Where a job that does not pin a cluster (`-M`) goes: see [`RoutingConfig`].
    #[serde(default)]
    pub routing: RoutingConfig,
    /// Address `bursar serve` listens on (`--listen` overrides). Default `127.0.0.1:8640`.
    #[serde(default)]
    pub listen: Option<String>,
    /// How API callers authenticate (`bursar serve` needs it); relative key paths are relative
    /// to the config file's folder.
    #[serde(default)]
    pub auth: Option<crate::auth::AuthConfig>,
    /// Holds placed at admission: `holds: {grace: 1h}`.
    #[serde(default)]
    pub holds: HoldsConfig,
    /// Allocation alerts and forecasts: see [`AlertsConfig`].
    #[serde(default)]
    pub alerts: AlertsConfig,
    /// Where the file was read from (not a key).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// `prices: {aws: {...}}`: defaults for `bursar prices refresh`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricesConfig {
    #[serde(default)]
    pub aws: AwsPricesConfig,
}

/// `prices.aws`: the AWS Price List API (`bursar prices refresh --aws`); flags win.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsPricesConfig {
    /// Endpoint URL instead of the SDK's (`https://api.pricing.us-east-1.amazonaws.com`): a
    /// VPC endpoint, a proxy, or a local test server (`--endpoint`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Region whose prices are fetched (`--region`). Default `us-east-1`.
    #[serde(default)]
    pub region: Option<String>,
    /// Instance types to fetch (`--instances`). Default: the aws instance types the price
    /// tables already list for the region.
    #[serde(default)]
    pub instances: Vec<String>,
    /// Limit for one API call (default 30s).
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub timeout: Option<Duration>,
}

/// The address `bursar serve` listens on when neither `listen` nor `--listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8640";

/// How holds behave: `holds: {grace: 1h}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldsConfig {
    /// A hold expires `time limit + grace` after it is placed when no final usage of its job
    /// arrives (the job never started, or its record never reached bursar). Default 1h.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub grace: Option<Duration>,
    /// How far ahead a job's `--begin` may be: its hold counts against the allocation from
    /// admission until the job has run. Default 30d.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub max_begin_ahead: Option<Duration>,
}

impl HoldsConfig {
    /// [`HoldsConfig::grace`] or its default, one hour.
    pub fn grace(&self) -> Duration {
        self.grace.unwrap_or(Duration::from_secs(3600))
    }

    /// [`HoldsConfig::max_begin_ahead`] or its default, 30 days.
    pub fn max_begin_ahead(&self) -> Duration {
        self.max_begin_ahead
            .unwrap_or(Duration::from_secs(30 * 86_400))
    }
}

/// Alerts on allocations, and the forecast window:
/// `alerts: {thresholds: [50, 80, 100], projected: true, window: 14d, interval: 5m,
/// webhook: {url: …, format: json|slack, timeout: 10s}, accounts: {physics: {thresholds: [90]}}}`.
/// Every key is optional; without the section alerts go to the log with the defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    /// `false` turns alert checks off (`bursar serve` and `bursar alerts check`). Default on.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Percentages of an allocation committed (charged + held) that fire an alert, 1 to 1000.
    /// Default `[50, 80, 100]`.
    #[serde(default)]
    pub thresholds: Option<Vec<u32>>,
    /// Alert when the forecast runs out before the period ends. Default `true`.
    #[serde(default)]
    pub projected: Option<bool>,
    /// The forecast window (burn rate over the last `window`), for alerts, balances and
    /// `bursar forecast`. Default 14d; at least 1h.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub window: Option<Duration>,
    /// How often `bursar serve` checks, besides after every collection pass. Default 5m.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub interval: Option<Duration>,
    /// Where alerts are POSTed, besides the log.
    #[serde(default)]
    pub webhook: Option<WebhookConfig>,
    /// Per-account policies (the allocation's own account); keys left out take the defaults.
    #[serde(default)]
    pub accounts: BTreeMap<String, AccountAlertsConfig>,
}

/// `alerts.webhook`: `{url: https://…, format: json, timeout: 10s}` or `{url_file: PATH}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The URL to POST to.
    #[serde(default)]
    pub url: Option<String>,
    /// A file holding the URL (a Slack webhook URL is a secret); relative to the config file.
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    /// `json` (every field and a Slack-compatible `text`) or `slack` (`{"text"}` only).
    #[serde(default)]
    pub format: WebhookFormat,
    /// Limit for one POST. Default 10s.
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    #[default]
    Json,
    Slack,
}

/// `alerts.accounts.<name>`: `{thresholds: [90], projected: false}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountAlertsConfig {
    #[serde(default)]
    pub thresholds: Option<Vec<u32>>,
    #[serde(default)]
    pub projected: Option<bool>,
}

impl AlertsConfig {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// The forecast window, default 14 days.
    pub fn window(&self) -> Duration {
        self.window.unwrap_or(Duration::from_secs(14 * 86_400))
    }

    /// Time between checks of `bursar serve`, default 5 minutes.
    pub fn interval(&self) -> Duration {
        self.interval.unwrap_or(Duration::from_secs(300))
    }

    /// The ledger's rules for this section.
    pub fn rules(&self) -> bursar_ledger::AlertRules {
        let default = bursar_ledger::AlertPolicy {
            thresholds: self.thresholds.clone().unwrap_or_else(|| vec![50, 80, 100]),
            projected: self.projected.unwrap_or(true),
        };
        let accounts = self
            .accounts
            .iter()
            .map(|(name, a)| {
                let policy = bursar_ledger::AlertPolicy {
                    thresholds: a
                        .thresholds
                        .clone()
                        .unwrap_or_else(|| default.thresholds.clone()),
                    projected: a.projected.unwrap_or(default.projected),
                };
                (name.clone(), policy)
            })
            .collect();
        bursar_ledger::AlertRules {
            default,
            accounts,
            window: i64::try_from(self.window().as_secs()).unwrap_or(i64::MAX),
        }
    }

    fn validate(
        &self,
        warnings: &mut Vec<String>,
        declared: &BTreeMap<String, AccountConfig>,
    ) -> anyhow::Result<()> {
        let lists = std::iter::once(("alerts.thresholds".to_string(), &self.thresholds)).chain(
            self.accounts
                .iter()
                .map(|(a, c)| (format!("alerts.accounts.{a}.thresholds"), &c.thresholds)),
        );
        for (what, list) in lists {
            for t in list.iter().flatten() {
                if !(1..=1000).contains(t) {
                    bail!("{what}: {t} is not a percentage from 1 to 1000");
                }
            }
        }
        if self.window().as_secs() < 3600 {
            bail!("alerts.window: the forecast window must be at least 1h");
        }
        if self.interval().as_secs() == 0 {
            bail!("alerts.interval must not be zero");
        }
        if let Some(w) = &self.webhook {
            match (&w.url, &w.url_file) {
                (Some(url), None) => check_webhook_url(url)?,
                (None, Some(_)) => {}
                _ => bail!("alerts.webhook needs exactly one of url and url_file"),
            }
            if w.timeout.is_some_and(|t| t.is_zero()) {
                bail!("alerts.webhook.timeout must not be zero");
            }
        }
        for account in self.accounts.keys() {
            check_name("account", account)?;
            if !declared.contains_key(account) {
                warnings.push(format!(
                    "alerts.accounts.{account}: account {account} is not declared under accounts"
                ));
            }
        }
        Ok(())
    }
}

/// A webhook URL must be http(s).
pub fn check_webhook_url(url: &str) -> anyhow::Result<()> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("alerts.webhook.url must start with http:// or https://");
    }
    Ok(())
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
    /// How jobs submitted through bursar reach this cluster, and what its partitions accept.
    /// A cluster without it is quoted as not taking submissions.
    #[serde(default)]
    pub submit: Option<SubmitConfig>,
    /// Blocking new jobs of exhausted accounts in Slurm (`bursar enforce`, and after every
    /// collection pass of `bursar serve`): see [`EnforceConfig`]. Slurm clusters only.
    #[serde(default)]
    pub enforce: Option<EnforceConfig>,
}

/// `clusters.<name>.enforce`: `{sacctmgr: /usr/bin/sacctmgr, slurm_conf: PATH, slurm_cluster:
/// NAME, enabled: true}`. bursar sets `GrpSubmitJobs=0` on the Slurm account of an account
/// whose allocation in the cluster's currency is used up, and lifts it when it is not any more.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnforceConfig {
    /// Path to `sacctmgr` (default: `sacctmgr` on the PATH).
    #[serde(default)]
    pub sacctmgr: Option<PathBuf>,
    /// `SLURM_CONF` for this cluster, when it is not the host's default.
    #[serde(default)]
    pub slurm_conf: Option<PathBuf>,
    /// The Slurm cluster name, when it differs from bursar's name for it.
    #[serde(default)]
    pub slurm_cluster: Option<String>,
    /// Off unless `true`: `bursar sync` still uses the section's `sacctmgr` and `slurm_conf`.
    #[serde(default)]
    pub enabled: bool,
}

/// Routing policy: `routing: {prefer: [onprem, cloud], accounts: {physics: [cloud, onprem]}}`.
///
/// A job that pins clusters (`-M`) is tried on those, in its order. Otherwise the first list
/// that applies gives the order: the account's own (or its nearest ancestor's) entry in
/// `accounts`, else `prefer`, else every cluster by name. Clusters a list leaves out are tried
/// after it, by name, so a list orders clusters and never hides one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    #[serde(default)]
    pub prefer: Vec<String>,
    #[serde(default)]
    pub accounts: BTreeMap<String, Vec<String>>,
}

/// `clusters.<name>.submit`: where to forward jobs and what each partition accepts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitConfig {
    /// slurmrestd to submit through; fields left out are taken from `collect.slurmrestd`.
    #[serde(default)]
    pub slurmrestd: Option<SubmitSlurmrestd>,
    /// dstack project to apply runs in; fields left out are taken from `collect.dstack`.
    #[serde(default)]
    pub dstack: Option<SubmitDstack>,
    /// The partitions jobs may ask for, with their limits. Jobs naming another are refused.
    #[serde(default)]
    pub partitions: BTreeMap<String, SubmitPartition>,
    /// The partition of jobs that name none.
    #[serde(default)]
    pub default_partition: Option<String>,
    /// The licenses a Slurm cluster has (its `Licenses=`, and sacctmgr resources as
    /// `name@server`), with how many: `{matlab: 4, fluent@flexlm: 10}`. A job asking for
    /// another license, or for more than there are, is not eligible here. Absent: any (the
    /// cluster decides, refusing at submission a license it does not have); `{}`: none.
    #[serde(default)]
    pub licenses: Option<BTreeMap<String, u32>>,
    /// Slurm clusters whose slurm.conf has `MpiParams=disable_slurm_hydra_bootstrap`: as sbatch
    /// there, bursar then gives a job no Hydra bootstrap the user did not set.
    #[serde(default)]
    pub disable_slurm_hydra_bootstrap: bool,
    /// Working directory of jobs that give none; `{user}` is replaced (default `/home/{user}`).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Limit for one submit or cancel call to the cluster (default 30s).
    #[serde(default, deserialize_with = "crate::timefmt::de_duration")]
    pub timeout: Option<Duration>,
}

/// slurmrestd for submissions; every field defaults to `collect.slurmrestd`'s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitSlurmrestd {
    #[serde(default)]
    pub url: Option<String>,
    /// The cluster's `jwt_key=` file: bursar mints a token per submitting user (claim `sun`).
    #[serde(default)]
    pub jwt_key_file: Option<PathBuf>,
    /// `v0.0.38`, `v0.0.40` to `v0.0.45`, or `auto`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// PEM certificates of the CA(s) an `https` slurmrestd's certificate is checked against.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// A dstack project for submissions; every field defaults to `collect.dstack`'s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitDstack {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub project: Option<String>,
    /// PEM certificates of the CA(s) an `https` dstack server's certificate is checked against.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// What one partition accepts: `{max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000,
/// gpu_types: [h100], max_nodes: 2}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitPartition {
    /// Longest time limit (Slurm's `MaxTime`): `2d`, `36h`, `90m` or Slurm's `2-00:00:00`.
    #[serde(default, deserialize_with = "de_minutes")]
    pub max_time: Option<u64>,
    /// Time limit of jobs that give none (Slurm's `DefaultTime`); else `max_time` applies.
    #[serde(default, deserialize_with = "de_minutes")]
    pub default_time: Option<u64>,
    /// Memory per CPU of jobs that ask for none (Slurm's `DefMemPerCPU`), priced as Slurm
    /// allocates it.
    #[serde(default)]
    pub def_mem_per_cpu_mb: Option<u64>,
    /// Memory per GPU of GPU jobs that ask for no memory (Slurm's `DefMemPerGPU`): for them it
    /// replaces `def_mem_per_cpu_mb`.
    #[serde(default)]
    pub def_mem_per_gpu_mb: Option<u64>,
    /// CPUs per GPU of GPU jobs that give neither `-c` nor `--cpus-per-gpu` (Slurm's
    /// `DefCpuPerGPU`).
    #[serde(default)]
    pub def_cpu_per_gpu: Option<u32>,
    /// GPU types the partition has. Absent: any (Slurm decides); `[]`: no GPUs at all.
    #[serde(default)]
    pub gpu_types: Option<Vec<String>>,
    /// Most nodes one job may use (Slurm's `MaxNodes`).
    #[serde(default)]
    pub max_nodes: Option<u32>,
    /// CPUs of each node (Slurm's `CPUs`, less specialized ones: `CPUEffective`): with
    /// `node_mem_mb`, what a job that gets whole nodes (`--exclusive`, `exclusive`) is priced
    /// for. Without them a Slurm cluster is not eligible for `--exclusive`.
    #[serde(default)]
    pub node_cpus: Option<u32>,
    /// Memory of each node in MB (`RealMemory` less `MemSpecLimit`): what `--mem=0` gets.
    #[serde(default)]
    pub node_mem_mb: Option<u64>,
    /// GPUs of each node (its `gpu` GRES, every type); 0 when left out.
    #[serde(default)]
    pub node_gpus: Option<u32>,
    /// Hardware threads per core of each node (`ThreadsPerCore`), where slurmctld allocates
    /// whole cores (`SelectTypeParameters=CR_Core…`): jobs are priced for whole cores, and
    /// `--hint`, `--threads-per-core` and `--ntasks-per-core` by them. Without it a Slurm
    /// cluster is not eligible for those three options.
    #[serde(default)]
    pub node_threads_per_core: Option<u32>,
    /// The partition never shares a node (Slurm's `OverSubscribe=EXCLUSIVE`): every job is
    /// priced for whole nodes. Needs `node_cpus` and `node_mem_mb`.
    #[serde(default)]
    pub exclusive: bool,
}

impl SubmitPartition {
    /// What the partition gives a job that does not ask, and its nodes, for pricing.
    pub fn defaults(&self) -> crate::request::PartitionDefaults {
        crate::request::PartitionDefaults {
            mem_per_cpu_mb: self.def_mem_per_cpu_mb,
            mem_per_gpu_mb: self.def_mem_per_gpu_mb,
            cpus_per_gpu: self.def_cpu_per_gpu,
            node: self.node_size(),
            exclusive: self.exclusive,
            min_cpus_only_select: false,
            threads_per_core: self.node_threads_per_core,
        }
    }

    /// Each node's size, when `node_cpus` and `node_mem_mb` declare it.
    pub fn node_size(&self) -> Option<crate::request::NodeSize> {
        Some(crate::request::NodeSize {
            cpus: self.node_cpus?,
            mem_mb: self.node_mem_mb?,
            gpus: self.node_gpus.unwrap_or(0),
        })
    }
}

/// Reads a partition time limit into whole minutes (rounded up): `90m`, `2h`, `2d`, `1w`,
/// `90s`, or Slurm's `MM:SS`, `HH:MM:SS`, `D-HH[:MM[:SS]]`. A bare number is refused, because
/// Slurm reads it as minutes and bursar's other durations as seconds.
fn de_minutes<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    let text = match Option::<Raw>::deserialize(de)? {
        None => return Ok(None),
        Some(Raw::Number(n)) => {
            return Err(D::Error::custom(format!(
                "time limit {n} has no unit: write {n}m for minutes (or 2h, 2d, 2-00:00:00)"
            )))
        }
        Some(Raw::Text(t)) => t,
    };
    parse_partition_time(&text)
        .map(Some)
        .map_err(D::Error::custom)
}

/// See [`de_minutes`]; `Ok(minutes)`, at least 1.
pub fn parse_partition_time(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let minutes = if t.contains(':') || t.contains('-') {
        match crate::request::TimeLimit::parse(t) {
            Ok(crate::request::TimeLimit::Minutes(m)) => m,
            Ok(crate::request::TimeLimit::Unlimited) => {
                return Err(format!(
                    "time limit {text:?} means unlimited: leave the key out instead"
                ))
            }
            Err(e) => return Err(format!("time limit {text:?}: {e}")),
        }
    } else if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "time limit {text:?} has no unit: write {t}m for minutes (or 2h, 2d, 2-00:00:00)"
        ));
    } else {
        let d = crate::timefmt::parse_duration(t).map_err(|e| format!("time limit: {e}"))?;
        d.as_secs().div_ceil(60)
    };
    if minutes == 0 {
        return Err(format!("time limit {text:?} is zero"));
    }
    if minutes > crate::request::MAX_TIME_LIMIT_MIN {
        return Err(format!("time limit {text:?} is too large for Slurm"));
    }
    Ok(minutes)
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
    /// `v0.0.38`, `v0.0.40` to `v0.0.45`, or `auto` (default: ask `/openapi/v3`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// Zone slurmrestd 22.05 reads query times in (default UTC).
    #[serde(default)]
    pub server_timezone: Option<String>,
    /// For an `https` URL: PEM certificates of the certificate authorities (a site's own)
    /// slurmrestd's certificate is checked against, instead of the public roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
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
    /// A file holding a dstack token of a project member (or admin). `bursar sync push`
    /// needs a dstack global admin's token.
    pub token_file: PathBuf,
    pub project: String,
    /// The bursar account the project's runs are charged to (default: the project's name).
    #[serde(default)]
    pub account: Option<String>,
    /// Per-user overrides: dstack user → bursar account.
    #[serde(default)]
    pub user_accounts: BTreeMap<String, String>,
    /// For an `https` URL: PEM certificates of the certificate authorities (a site's own)
    /// the server's certificate is checked against, instead of the public roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    /// Multiplies the charge of the QOS's jobs, like Slurm's `UsageFactor`.
    pub usage_factor: Decimal,
}

/// `collect`'s CA file for a `submit` endpoint that names none: only when that endpoint is
/// `https` (a submit endpoint over plain http beside an https collect source needs none).
fn inherited_ca_file(url: &str, collect: Option<&PathBuf>) -> Option<PathBuf> {
    let https = url
        .trim_start()
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    collect.filter(|_| https).cloned()
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

impl ClusterConfig {
    /// The slurmrestd jobs are submitted through: `submit.slurmrestd`, each field left out
    /// taken from `collect.slurmrestd`. `Ok(None)` when neither names one.
    pub fn submit_slurmrestd(&self) -> Result<Option<SlurmrestdSource>, String> {
        let collect = self.collect.as_ref().and_then(|c| c.slurmrestd.as_ref());
        let submit = self.submit.as_ref().and_then(|s| s.slurmrestd.as_ref());
        match (submit, collect) {
            (None, None) => Ok(None),
            (None, Some(c)) => Ok(Some(c.clone())),
            (Some(s), c) => {
                let url = s.url.clone().or_else(|| c.map(|c| c.url.clone()));
                let key = s
                    .jwt_key_file
                    .clone()
                    .or_else(|| c.map(|c| c.jwt_key_file.clone()));
                let (Some(url), Some(jwt_key_file)) = (url, key) else {
                    return Err("submit.slurmrestd needs url and jwt_key_file \
                                (or a collect.slurmrestd to take them from)"
                        .to_string());
                };
                let ca_file = s
                    .ca_file
                    .clone()
                    .or_else(|| inherited_ca_file(&url, c.and_then(|c| c.ca_file.as_ref())));
                Ok(Some(SlurmrestdSource {
                    url,
                    jwt_key_file,
                    user: c.and_then(|c| c.user.clone()),
                    api_version: s
                        .api_version
                        .clone()
                        .or_else(|| c.and_then(|c| c.api_version.clone())),
                    server_timezone: c.and_then(|c| c.server_timezone.clone()),
                    ca_file,
                }))
            }
        }
    }

    /// The dstack project runs are applied in: `submit.dstack`, each field left out taken from
    /// `collect.dstack`. `Ok(None)` when neither names one.
    pub fn submit_dstack(&self) -> Result<Option<DstackSource>, String> {
        let collect = self.collect.as_ref().and_then(|c| c.dstack.as_ref());
        let submit = self.submit.as_ref().and_then(|s| s.dstack.as_ref());
        match (submit, collect) {
            (None, None) => Ok(None),
            (None, Some(c)) => Ok(Some(c.clone())),
            (Some(s), c) => {
                let url = s.url.clone().or_else(|| c.map(|c| c.url.clone()));
                let token = s
                    .token_file
                    .clone()
                    .or_else(|| c.map(|c| c.token_file.clone()));
                let project = s.project.clone().or_else(|| c.map(|c| c.project.clone()));
                let (Some(url), Some(token_file), Some(project)) = (url, token, project) else {
                    return Err("submit.dstack needs url, token_file and project \
                                (or a collect.dstack to take them from)"
                        .to_string());
                };
                let ca_file = s
                    .ca_file
                    .clone()
                    .or_else(|| inherited_ca_file(&url, c.and_then(|c| c.ca_file.as_ref())));
                Ok(Some(DstackSource {
                    url,
                    token_file,
                    project,
                    account: c.and_then(|c| c.account.clone()),
                    user_accounts: c.map(|c| c.user_accounts.clone()).unwrap_or_default(),
                    ca_file,
                }))
            }
        }
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
                c.resolve_paths();
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

    /// Makes the relative key paths of `auth` relative to the config file's folder.
    fn resolve_paths(&mut self) {
        let Some(dir) = self
            .source
            .as_ref()
            .and_then(|s| s.parent())
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
        else {
            return;
        };
        if let Some(path) = self
            .alerts
            .webhook
            .as_mut()
            .and_then(|w| w.url_file.as_mut())
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        if let Some(auth) = &mut self.auth {
            for path in [&mut auth.hs256_key_file, &mut auth.jwks_file]
                .into_iter()
                .flatten()
            {
                if path.is_relative() {
                    *path = dir.join(&*path);
                }
            }
        }
    }

    /// The address `bursar serve` listens on: `listen`, else [`DEFAULT_LISTEN`].
    pub fn listen(&self) -> &str {
        self.listen.as_deref().unwrap_or(DEFAULT_LISTEN)
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
            if let Some(submit) = &cluster.submit {
                validate_submit(name, cluster, submit)?;
            }
            if cluster.enforce.is_some() && cluster.kind != ClusterKind::Slurm {
                bail!("cluster {name}: enforce is for Slurm clusters (a dstack cluster is gated by bursar's admission)");
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
        for (what, list) in std::iter::once(("routing.prefer".to_string(), &self.routing.prefer))
            .chain(
                self.routing
                    .accounts
                    .iter()
                    .map(|(account, list)| (format!("routing.accounts.{account}"), list)),
            )
        {
            for (i, cluster) in list.iter().enumerate() {
                if !self.clusters.contains_key(cluster) {
                    bail!("{what}: cluster {cluster:?} is not declared under clusters");
                }
                if list[..i].contains(cluster) {
                    bail!("{what}: cluster {cluster} is listed twice");
                }
            }
        }
        self.alerts.validate(&mut warnings, &self.accounts)?;
        for account in self.routing.accounts.keys() {
            if !self.accounts.contains_key(account) {
                warnings.push(format!(
                    "routing.accounts.{account}: account {account} is not declared under accounts"
                ));
            }
        }
        Ok(warnings)
    }
}

fn validate_submit(
    name: &str,
    cluster: &ClusterConfig,
    submit: &SubmitConfig,
) -> anyhow::Result<()> {
    for (partition, p) in &submit.partitions {
        check_name("partition", partition)?;
        if let (Some(default), Some(max)) = (p.default_time, p.max_time) {
            if default > max {
                bail!("cluster {name}: submit.partitions.{partition}: default_time is longer than max_time");
            }
        }
        if p.max_nodes == Some(0) {
            bail!("cluster {name}: submit.partitions.{partition}: max_nodes must be at least 1");
        }
        match (p.node_cpus, p.node_mem_mb, p.node_gpus) {
            (Some(0), _, _) | (_, Some(0), _) => bail!(
                "cluster {name}: submit.partitions.{partition}: node_cpus and node_mem_mb must be at least 1"
            ),
            (Some(_), Some(_), _) => {}
            (None, None, None) if !p.exclusive => {}
            _ => bail!(
                "cluster {name}: submit.partitions.{partition}: {}give node_cpus and node_mem_mb \
                 together (node_gpus with them), as each node of the partition has them",
                if p.exclusive { "exclusive: every job gets whole nodes, so " } else { "" }
            ),
        }
        match (p.node_threads_per_core, p.node_cpus) {
            (Some(0), _) => bail!(
                "cluster {name}: submit.partitions.{partition}: node_threads_per_core must be at least 1"
            ),
            (Some(threads), Some(cpus)) if cpus % threads != 0 => bail!(
                "cluster {name}: submit.partitions.{partition}: node_cpus ({cpus}) is not a \
                 whole number of cores of node_threads_per_core ({threads}) threads"
            ),
            _ => {}
        }
        for kind in p.gpu_types.iter().flatten() {
            if !crate::request::is_gres_type_name(kind) {
                bail!("cluster {name}: submit.partitions.{partition}: {kind:?} is not a GPU type name");
            }
        }
    }
    if let Some(licenses) = &submit.licenses {
        if cluster.kind == ClusterKind::Dstack {
            bail!("cluster {name}: submit.licenses: a dstack cluster has no licenses (Slurm's -L)");
        }
        for license in licenses.keys() {
            if !crate::request::licenses::is_license_name(license) {
                bail!("cluster {name}: submit.licenses: {license:?} is not a license name");
            }
        }
    }
    if let Some(default) = &submit.default_partition {
        if !submit.partitions.contains_key(default) {
            bail!("cluster {name}: submit.default_partition {default:?} is not listed under submit.partitions");
        }
    }
    match cluster.kind {
        ClusterKind::Slurm => {
            if submit.dstack.is_some() {
                bail!("cluster {name}: submit.dstack needs `kind: dstack`");
            }
            cluster
                .submit_slurmrestd()
                .map_err(|e| anyhow::anyhow!("cluster {name}: {e}"))?;
        }
        ClusterKind::Dstack => {
            if submit.slurmrestd.is_some() {
                bail!("cluster {name}: submit.slurmrestd needs `kind: slurm`");
            }
            cluster
                .submit_dstack()
                .map_err(|e| anyhow::anyhow!("cluster {name}: {e}"))?;
        }
    }
    Ok(())
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
    fn alerts_sections_are_read_and_checked() {
        let c = Config::parse(
            "alerts:\n  thresholds: [75, 100]\n  window: 7d\n  webhook: {url: http://127.0.0.1:9/h, format: slack, timeout: 2s}\n  accounts:\n    physics: {projected: false}\n",
        )
        .unwrap();
        c.validate().unwrap();
        let rules = c.alerts.rules();
        assert_eq!(rules.default.thresholds, [75, 100]);
        assert!(rules.default.projected);
        assert_eq!(rules.window, 7 * 86_400);
        assert_eq!(rules.accounts["physics"].thresholds, [75, 100]);
        assert!(!rules.accounts["physics"].projected);
        let webhook = c.alerts.webhook.as_ref().unwrap();
        assert_eq!(webhook.format, WebhookFormat::Slack);
        assert_eq!(webhook.timeout, Some(Duration::from_secs(2)));

        let defaults = Config::default().alerts.rules();
        assert_eq!(defaults.default.thresholds, [50, 80, 100]);
        assert_eq!(defaults.window, 14 * 86_400);

        let err = Config::parse("alerts:\n  treshold: [50]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("treshold"), "{err}");
        for bad in [
            "alerts: {thresholds: [0]}",
            "alerts: {window: 30m}",
            "alerts: {webhook: {url: ftp://x}}",
            "alerts: {webhook: {format: json}}",
        ] {
            assert!(Config::parse(bad).unwrap().validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn undeclared_parents_and_cycles_are_refused() {
        let c = Config::parse("accounts:\n  a: {parent: b}\n").unwrap();
        assert!(c.validate().is_err());
        let c = Config::parse("accounts:\n  a: {parent: b}\n  b: {parent: a}\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("cycle"));
    }
}
