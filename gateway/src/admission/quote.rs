//! Quoting one cluster: can the job run there, what would it cost, and can the account pay.
//!
//! Pure: everything the decision needs (configuration, pricing, the account's chain and the
//! balances at `now`) is handed in, so a quote is reproducible and cheap to test.

use std::collections::BTreeMap;

use bursar_ledger::BalanceRow;
use bursar_pricing::{format_micros, ClusterPricing, Currency, PriceBook};
use serde_json::{json, Value};

use super::forward::Forwarder;
use crate::config::{ClusterConfig, ClusterKind, Config, SubmitPartition};
use crate::request::{JobRequest, TimeLimit};
use crate::timefmt::format_instant;

/// Whether the account's chain can pay for the job on one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Funding {
    /// No account on the chain holds an allocation in the cluster's currency: no access.
    NoAllocation,
    /// The chain has allocations, but the estimate is unknown (the job does not fit).
    Unknown,
    /// Every allocation on the chain covers the estimate.
    Covered,
    /// `account` (the link with the least left) has only `remaining` micros.
    Short { account: String, remaining: i64 },
}

/// The quote of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterQuote {
    pub cluster: String,
    pub currency: Currency,
    /// The partition the job would run in, when one could be chosen.
    pub partition: Option<String>,
    /// The time limit the job would run with (the request's or the partition's), in minutes.
    pub time_limit_min: Option<u64>,
    /// What the job would be held for, in micros of `currency`.
    pub estimate: Option<i64>,
    /// Why the job cannot run there, money aside; empty when it fits.
    pub reasons: Vec<String>,
    pub funding: Funding,
    /// `(account, remaining − estimate)` for the account and each ancestor with an allocation
    /// in `currency`, nearest first; `remaining` alone while the estimate is unknown.
    pub remaining_after: Vec<(String, i64)>,
    /// Decimal places to print amounts with.
    pub decimals: u8,
    /// The job runs on the node count it was priced for, whether it named one or not
    /// ([`JobRequest::needs_pinned_nodes`]).
    pub pin_nodes: bool,
}

impl ClusterQuote {
    /// The job fits the cluster (partition, GPUs, limits, forwarding), money aside.
    pub fn fits(&self) -> bool {
        self.reasons.is_empty()
    }

    /// `Some(true)` when every allocation on the chain covers the estimate, `None` while the
    /// estimate is unknown.
    pub fn affordable(&self) -> Option<bool> {
        match self.funding {
            Funding::Covered => Some(true),
            Funding::Short { .. } | Funding::NoAllocation => Some(false),
            Funding::Unknown => None,
        }
    }

    /// Fits and can be paid for: the job may be routed here.
    pub fn eligible(&self) -> bool {
        self.fits() && self.affordable() == Some(true)
    }

    /// The job fits and only money stands in the way.
    pub fn blocked_by_money(&self) -> bool {
        self.fits() && self.affordable() == Some(false)
    }

    /// An amount of this cluster's currency as an exact decimal string.
    pub fn amount(&self, micros: i64) -> String {
        format_micros(micros, self.decimals)
    }

    /// `2.00 su`
    pub fn amount_with_unit(&self, micros: i64) -> String {
        format!("{} {}", self.amount(micros), self.currency)
    }

    /// Why money stands in the way, in words, for the account `account` the job charges.
    pub fn money_reason(&self, account: &str) -> Option<String> {
        match &self.funding {
            Funding::NoAllocation => Some(format!(
                "no allocation in {currency} for {account} or its parents: no access to \
                 clusters billed in {currency}",
                currency = self.currency
            )),
            Funding::Short {
                account: short,
                remaining,
            } => Some(format!(
                "{short} has {} left, the job needs {}",
                self.amount_with_unit((*remaining).max(0)),
                self.amount_with_unit(self.estimate.unwrap_or(0)),
            )),
            Funding::Covered | Funding::Unknown => None,
        }
    }

    /// Every reason the job cannot go here, money included.
    pub fn all_reasons(&self, account: &str) -> Vec<String> {
        let mut reasons = self.reasons.clone();
        reasons.extend(self.money_reason(account));
        reasons
    }

    /// The JSON of `POST /v1/quotes` for this cluster (the caller adds `chosen`).
    pub fn to_json(&self, account: &str) -> Value {
        json!({
            "cluster": self.cluster,
            "currency": self.currency.as_str(),
            "eligible": self.eligible(),
            "affordable": self.affordable(),
            "reasons": self.all_reasons(account),
            "partition": self.partition,
            "time_limit_min": self.time_limit_min,
            "estimate": self.estimate.map(|e| self.amount(e)),
            "remaining_after": self
                .remaining_after
                .iter()
                .map(|(account, remaining)| json!({"account": account, "remaining": self.amount(*remaining)}))
                .collect::<Vec<_>>(),
        })
    }
}

/// What quoting needs besides the cluster: shared by every cluster of one request.
pub struct QuoteContext<'a> {
    pub config: &'a Config,
    pub pricing: &'a std::collections::HashMap<String, ClusterPricing>,
    pub prices: &'a PriceBook,
    pub forwarders: &'a BTreeMap<String, std::sync::Arc<dyn Forwarder>>,
    pub request: &'a JobRequest,
    /// The account charged, then its parent, …, `root`.
    pub chain: &'a [String],
    /// Balances at `now` (every account, every currency).
    pub balances: &'a [BalanceRow],
    pub now: i64,
}

/// `onprem has: batch, gpu`
fn listed<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// Quotes `name` (a configured cluster) for the context's request.
pub fn quote_cluster(ctx: &QuoteContext<'_>, name: &str, cluster: &ClusterConfig) -> ClusterQuote {
    let currency = Currency::new(&cluster.currency);
    let mut quote = ClusterQuote {
        cluster: name.to_string(),
        currency: currency.clone(),
        partition: None,
        time_limit_min: None,
        estimate: None,
        reasons: Vec::new(),
        funding: Funding::Unknown,
        remaining_after: Vec::new(),
        decimals: ctx.config.decimals(&cluster.currency),
        pin_nodes: false,
    };
    // Allocations in this currency on the chain, nearest first.
    let covering: Vec<(String, i64)> = ctx
        .chain
        .iter()
        .filter_map(|a| {
            ctx.balances
                .iter()
                .find(|b| &b.account == a && b.currency == currency)
                .and_then(|b| b.remaining.map(|r| (a.clone(), r)))
        })
        .collect();
    if covering.is_empty() {
        quote.funding = Funding::NoAllocation;
    }

    fit(ctx, name, cluster, &mut quote);

    if let (Some(partition), Some(minutes)) = (quote.partition.clone(), quote.time_limit_min) {
        if quote.reasons.is_empty() {
            price(ctx, name, cluster, &partition, minutes, &mut quote);
        }
    }
    match quote.estimate {
        Some(estimate) if !covering.is_empty() => {
            let mut short: Option<(String, i64)> = None;
            for (a, remaining) in &covering {
                let after = remaining.saturating_sub(estimate);
                quote.remaining_after.push((a.clone(), after));
                if after < 0 && short.as_ref().is_none_or(|(_, r)| remaining < r) {
                    short = Some((a.clone(), *remaining));
                }
            }
            quote.funding = match short {
                Some((account, remaining)) => Funding::Short { account, remaining },
                None => Funding::Covered,
            };
        }
        _ if !covering.is_empty() => quote.remaining_after = covering,
        _ => {}
    }
    quote
}

/// Partition, job kind, GPUs, limits and forwarding: fills `reasons`, `partition` and
/// `time_limit_min`.
fn fit(ctx: &QuoteContext<'_>, name: &str, cluster: &ClusterConfig, quote: &mut ClusterQuote) {
    let request = ctx.request;
    let Some(submit) = &cluster.submit else {
        quote.reasons.push(format!(
            "{name} does not take jobs through bursar (its configuration has no submit section)"
        ));
        return;
    };
    let kind_fits = match (cluster.kind, request.dstack.is_some()) {
        (ClusterKind::Slurm, true) => {
            quote.reasons.push(format!(
                "{name} is a Slurm cluster and this is a dstack task: submit a batch script to run here"
            ));
            false
        }
        (ClusterKind::Dstack, false) => {
            quote.reasons.push(format!(
                "{name} is a dstack cluster: it runs dstack tasks, not batch scripts"
            ));
            false
        }
        _ => true,
    };
    if let (Some(licenses), Some(has)) = (&request.licenses, &submit.licenses) {
        for (license, count) in licenses.entries() {
            match has.get(license) {
                None => quote.reasons.push(format!(
                    "license {license} does not exist on {name} (licenses there: {})",
                    listed(has.keys())
                )),
                Some(total) if count > *total => quote.reasons.push(format!(
                    "the job asks for {count} {license} licenses; {name} has {total}"
                )),
                Some(_) => {}
            }
        }
    }
    let partition = match request
        .partition
        .as_ref()
        .or(submit.default_partition.as_ref())
    {
        Some(p) => p,
        None => {
            quote.reasons.push(format!(
                "no partition given and {name} has no default partition; pass -p (partitions \
                 on {name}: {})",
                listed(submit.partitions.keys())
            ));
            return;
        }
    };
    let Some(limits) = submit.partitions.get(partition) else {
        quote.reasons.push(format!(
            "partition {partition} does not exist on {name} (partitions there: {})",
            listed(submit.partitions.keys())
        ));
        return;
    };
    quote.partition = Some(partition.clone());

    if let Some(gpus) = &request.gpus {
        match (&limits.gpu_types, &gpus.kind) {
            (Some(types), _) if types.is_empty() => quote.reasons.push(format!(
                "partition {partition} on {name} has no GPUs"
            )),
            (Some(types), Some(kind)) if !types.iter().any(|t| t.eq_ignore_ascii_case(kind)) => {
                quote.reasons.push(format!(
                    "GPU type {kind} is not available in partition {partition} on {name} (it has: {})",
                    types.join(", ")
                ))
            }
            _ => {}
        }
    }
    let defaults = limits.defaults();
    match defaults.node {
        None if request.exclusive => quote.reasons.push(format!(
            "--exclusive gives the job whole nodes, which Slurm charges whole, and partition \
             {partition} on {name} does not say how big its nodes are (node_cpus, node_mem_mb \
             in bursar's configuration); ask for the nodes' CPUs and memory with -c and --mem \
             instead"
        )),
        None if request.memory.is_some_and(|m| m.is_whole_node()) => quote.reasons.push(format!(
            "--mem=0 gives the job all of each node's memory, and partition {partition} on \
             {name} does not say how much that is (node_mem_mb in bursar's configuration); ask \
             for it with --mem instead"
        )),
        // Whole nodes (`--exclusive`, or a partition that never shares one): no more of
        // them than the job names, or Slurm takes and charges more than priced.
        Some(_) => {
            if let Some(node) = request.whole_nodes(&defaults) {
                let whole = if request.exclusive {
                    "--exclusive".to_string()
                } else {
                    format!("partition {partition}, which never shares a node,")
                };
                match request.whole_nodes_needed(node, &defaults) {
                    None => quote.reasons.push(format!(
                        "the job does not fit on a node of partition {partition} on {name} ({} \
                         CPUs, {} GPUs)",
                        node.cpus, node.gpus
                    )),
                    Some(needed) if needed > u64::from(request.nodes) => {
                        quote.reasons.push(format!(
                            "{whole} gives the job whole nodes, and its tasks and GPUs need \
                             {needed} of partition {partition}'s on {name} ({} CPUs, {} GPUs \
                             each), which Slurm charges whole; pass -N {needed}",
                            node.cpus, node.gpus
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        _ => {}
    }
    if let (Some(min), Some(node)) = (request.min_cpus_per_node, &defaults.node) {
        if min > node.cpus {
            quote.reasons.push(format!(
                "--mincpus asks for {min} CPUs on each node; the nodes of partition {partition} \
                 on {name} have {}",
                node.cpus
            ));
        }
    }
    if request.uses_core_threads() {
        match (defaults.threads_per_core, request.job_threads_per_core()) {
            (None, _) => quote.reasons.push(format!(
                "{} changes how many CPUs Slurm allocates by the threads of each core, and \
                 partition {partition} on {name} does not say how many its nodes have \
                 (node_threads_per_core in bursar's configuration)",
                core_options(request)
            )),
            (Some(has), Some(wants)) if wants > has => quote.reasons.push(format!(
                "the job asks for {wants} threads per core; the nodes of partition {partition} \
                 on {name} have {has}"
            )),
            _ => {}
        }
    }
    if request.plane_may_cost_more(&defaults) {
        let instead = if request.has_gres() {
            "pass -N 1"
        } else {
            "pass -N 1, or --ntasks-per-node"
        };
        quote.reasons.push(format!(
            "-m plane lays tasks out over the nodes of partition {partition} on {name} a plane \
             at a time, rounding each node up to whole cores of its threads, which can take more \
             CPUs than bursar prices for more than one node; {instead}"
        ));
    }
    if let Some(max) = limits.max_nodes {
        if request.nodes > max {
            quote.reasons.push(format!(
                "the job asks for {} nodes; partition {partition} on {name} allows at most {max}",
                request.nodes
            ));
        }
    }
    let minutes = match request.time_limit() {
        TimeLimit::Minutes(m) => match limits.max_time.filter(|max| m > *max) {
            // With --time-min slurmctld takes the job and, when it starts, lowers its limit to
            // the partition's default, else its maximum: priced, held and sent at that.
            Some(max) if request.slurm.time_min.is_some() => {
                Some(limits.default_time.unwrap_or(max).min(max))
            }
            Some(max) => {
                quote.reasons.push(format!(
                    "the time limit {} is longer than the {} partition {partition} on {name} allows",
                    TimeLimit::Minutes(m),
                    TimeLimit::Minutes(max)
                ));
                Some(m)
            }
            None => Some(m),
        },
        // An explicit UNLIMITED runs as long as the partition lets it: its maximum.
        TimeLimit::Unlimited if request.time_unlimited => limits.max_time,
        TimeLimit::Unlimited => limits.default_time.or(limits.max_time),
    };
    if let (Some(min), Some(m)) = (request.slurm.time_min, minutes) {
        if min > m {
            quote.reasons.push(format!(
                "--time-min {} is longer than the time limit {} the job gets in partition \
                 {partition} on {name}",
                TimeLimit::Minutes(min),
                TimeLimit::Minutes(m)
            ));
        }
    }
    // Without --time-min, Slurm ends a job unstarted once its whole limit no longer fits
    // before its deadline: 24.11's slurmctld refuses it at once, 22.05's at its first chance.
    if let (Some(deadline), None, Some(m)) =
        (request.slurm.deadline, request.slurm.time_min, minutes)
    {
        let end = request
            .earliest_start(ctx.now)
            .saturating_add(i64::try_from(m.saturating_mul(60)).unwrap_or(i64::MAX));
        if deadline < end {
            quote.reasons.push(format!(
                "the time limit {} the job gets in partition {partition} on {name} would end \
                 after --deadline {}, so Slurm would never start it; shorten -t, or let Slurm \
                 cut it with --time-min",
                TimeLimit::Minutes(m),
                format_instant(deadline)
            ));
        }
    }
    match minutes {
        Some(m) => quote.time_limit_min = Some(m),
        None if request.time_unlimited => quote.reasons.push(format!(
            "the job asks for no time limit (UNLIMITED) and partition {partition} on {name} has \
             no maximum, so it has no price; pass -t"
        )),
        None => quote.reasons.push(format!(
            "no time limit given and partition {partition} on {name} has no maximum; pass -t"
        )),
    }
    match ctx.forwarders.get(name) {
        None => quote.reasons.push(format!(
            "{name} has no {} to submit through (configure submit.{} or collect.{})",
            kind_endpoint(cluster.kind),
            kind_endpoint(cluster.kind),
            kind_endpoint(cluster.kind),
        )),
        Some(forwarder) if kind_fits => {
            if let Err(why) = forwarder.check(request) {
                quote.reasons.push(format!("{name}: {why}"));
            }
        }
        Some(_) => {}
    }
}

/// The options a request uses a core's threads by, as the user gave them.
fn core_options(request: &JobRequest) -> String {
    let mut given = Vec::new();
    if let Some(hint) = &request.hint {
        given.push(format!("--hint={}", hint.as_str()));
    }
    if let Some(n) = request.threads_per_core {
        given.push(format!("--threads-per-core={n}"));
    }
    if let Some(n) = request.ntasks_per_core {
        given.push(format!("--ntasks-per-core={n}"));
    }
    given.join(" ")
}

fn kind_endpoint(kind: ClusterKind) -> &'static str {
    match kind {
        ClusterKind::Slurm => "slurmrestd",
        ClusterKind::Dstack => "dstack",
    }
}

/// The estimate: `ClusterPricing::estimate`, the code that prices the job's charge.
fn price(
    ctx: &QuoteContext<'_>,
    name: &str,
    cluster: &ClusterConfig,
    partition: &str,
    minutes: u64,
    quote: &mut ClusterQuote,
) {
    let mut defaults = cluster
        .submit
        .as_ref()
        .and_then(|s| s.partitions.get(partition))
        .map(SubmitPartition::defaults)
        .unwrap_or_default();
    // Priced for --mincpus CPUs on each node unless the cluster is known to only pick nodes
    // by it (Slurm 24.11.1 and later).
    defaults.min_cpus_only_select = ctx.request.min_cpus_per_node.is_some()
        && ctx
            .forwarders
            .get(name)
            .and_then(|f| f.allocates_min_cpus())
            == Some(false);
    let Some(pricing) = ctx.pricing.get(name) else {
        quote
            .reasons
            .push(format!("{name} has no pricing rules loaded"));
        return;
    };
    quote.pin_nodes = ctx.request.needs_pinned_nodes(&defaults);
    let alloc = ctx.request.alloc_with_defaults(&defaults);
    let seconds = TimeLimit::Minutes(minutes).seconds().unwrap_or(u64::MAX);
    match pricing.estimate(
        Some(partition),
        ctx.request.qos.as_deref(),
        &alloc,
        seconds,
        ctx.now,
        ctx.prices,
    ) {
        // A job array: each task is a job of this shape, priced (and rounded) on its own.
        Ok(money) => match money.micros.checked_mul(i64::from(
            ctx.request.array.as_ref().map_or(1, |a| a.tasks()),
        )) {
            Some(micros) => quote.estimate = Some(micros),
            None => quote.reasons.push(format!(
                "the job array's estimate on {name} is beyond what bursar can count"
            )),
        },
        Err(e) => quote
            .reasons
            .push(format!("the job cannot be priced on {name}: {e}")),
    }
}
