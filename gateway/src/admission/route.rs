//! Routing: the order clusters are tried in, and the explanation of the decision.
//!
//! Pure. The order comes from the first rule that applies: the clusters the job pins (`-M`,
//! in its order, nothing else); the `routing.accounts` entry of the account or its nearest
//! ancestor that has one; `routing.prefer`; every cluster by name. Clusters a configured list
//! leaves out follow it by name, so a list orders the clusters and never hides one.

use serde::{Deserialize, Serialize};

use crate::config::Config;

/// Where the order came from, for the explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderSource {
    /// `-M`/`clusters` in the request.
    Pinned,
    /// `routing.accounts.<account>`.
    Account(String),
    /// `routing.prefer`.
    Prefer,
    /// No rule: every cluster by name.
    ByName,
}

/// The clusters to try, best first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOrder {
    pub clusters: Vec<String>,
    pub source: OrderSource,
}

impl RouteOrder {
    /// `order from routing.prefer: onprem, cloud`
    pub fn describe(&self) -> String {
        let list = self.clusters.join(", ");
        match &self.source {
            OrderSource::Pinned => format!("pinned by the request (-M): {list}"),
            OrderSource::Account(account) => {
                format!("order from routing.accounts.{account}: {list}")
            }
            OrderSource::Prefer => format!("order from routing.prefer: {list}"),
            OrderSource::ByName => format!("no routing preference: clusters by name: {list}"),
        }
    }
}

/// The order for a job pinning `pinned` (empty: none) and charging `chain[0]`, whose
/// ancestors follow in `chain`.
pub fn route_order(config: &Config, pinned: &[String], chain: &[String]) -> RouteOrder {
    if !pinned.is_empty() {
        return RouteOrder {
            clusters: pinned.to_vec(),
            source: OrderSource::Pinned,
        };
    }
    let (list, source) = match chain
        .iter()
        .find_map(|a| config.routing.accounts.get(a).map(|list| (a, list)))
    {
        Some((account, list)) => (list.clone(), OrderSource::Account(account.clone())),
        None if !config.routing.prefer.is_empty() => {
            (config.routing.prefer.clone(), OrderSource::Prefer)
        }
        None => (Vec::new(), OrderSource::ByName),
    };
    let mut clusters: Vec<String> = list
        .into_iter()
        .filter(|c| config.clusters.contains_key(c))
        .collect();
    for name in config.clusters.keys() {
        if !clusters.contains(name) {
            clusters.push(name.clone());
        }
    }
    RouteOrder { clusters, source }
}

/// The decision as returned to the client and stored with the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The cluster chosen; `None` when none could take the job.
    pub cluster: Option<String>,
    pub explanation: Vec<String>,
}

/// Collects the clusters passed over and the one chosen, then writes the explanation.
#[derive(Debug, Clone, Default)]
pub struct Explanation {
    order: Option<String>,
    skipped: Vec<(String, String)>,
    chosen: Option<(String, String)>,
}

impl Explanation {
    pub fn new(order: &RouteOrder) -> Explanation {
        Explanation {
            order: Some(order.describe()),
            ..Explanation::default()
        }
    }

    /// `cluster` was passed over because `why`.
    pub fn skip(&mut self, cluster: &str, why: impl Into<String>) {
        self.skipped.push((cluster.to_string(), why.into()));
    }

    /// `cluster` takes the job; `why` says what it costs and what is left.
    pub fn choose(&mut self, cluster: &str, why: impl Into<String>) {
        self.chosen = Some((cluster.to_string(), why.into()));
    }

    /// The decision first (`cloud: burst from onprem; estimate 1.00 usd; …`), then the order
    /// and one line per cluster passed over (`onprem: physics has 0.50 su left, the job needs
    /// 2.00 su → burst to cloud`).
    pub fn finish(self) -> Route {
        let chosen = self.chosen.as_ref().map(|(c, _)| c.as_str());
        let skipped: Vec<&str> = self.skipped.iter().map(|(c, _)| c.as_str()).collect();
        let summary = match (&self.chosen, skipped.is_empty()) {
            (Some((cluster, why)), true) => format!("{cluster}: first choice; {why}"),
            (Some((cluster, why)), false) => {
                format!("{cluster}: burst from {}; {why}", skipped.join(", "))
            }
            (None, _) => "no cluster can take the job".to_string(),
        };
        let mut lines = vec![summary];
        lines.extend(self.order);
        for (i, (cluster, why)) in self.skipped.iter().enumerate() {
            let line = match (skipped.get(i + 1), chosen) {
                (Some(next), _) => format!("{cluster}: {why} → next: {next}"),
                (None, Some(chosen)) => format!("{cluster}: {why} → burst to {chosen}"),
                (None, None) => format!("{cluster}: {why}"),
            };
            lines.push(line);
        }
        Route {
            cluster: self.chosen.map(|(c, _)| c),
            explanation: lines,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        Config::parse(yaml).unwrap()
    }

    const CLUSTERS: &str = "clusters:\n  onprem: {kind: slurm, currency: su}\n  cloud: {kind: slurm, currency: usd}\n  zeta: {kind: slurm, currency: su}\n";

    #[test]
    fn orders() {
        let c = config(&format!(
            "{CLUSTERS}routing:\n  prefer: [onprem, cloud]\n  accounts:\n    org: [cloud]\n"
        ));
        let chain = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = route_order(&c, &[], &chain(&["physics", "org", "root"]));
        assert_eq!(o.clusters, ["cloud", "onprem", "zeta"]);
        assert_eq!(o.source, OrderSource::Account("org".into()));
        let o = route_order(&c, &[], &chain(&["chem", "root"]));
        assert_eq!(o.clusters, ["onprem", "cloud", "zeta"]);
        let o = route_order(&c, &chain(&["zeta"]), &chain(&["chem", "root"]));
        assert_eq!(o.clusters, ["zeta"]);
        let o = route_order(&config(CLUSTERS), &[], &chain(&["chem"]));
        assert_eq!(o.clusters, ["cloud", "onprem", "zeta"]);
        assert_eq!(o.source, OrderSource::ByName);
    }

    #[test]
    fn explanations() {
        let order = RouteOrder {
            clusters: vec!["onprem".into(), "cloud".into()],
            source: OrderSource::Prefer,
        };
        let mut e = Explanation::new(&order);
        e.skip("onprem", "physics has 0.50 su left, the job needs 2.00 su");
        e.choose("cloud", "estimate 1.00 usd");
        let route = e.finish();
        assert_eq!(route.cluster.as_deref(), Some("cloud"));
        assert_eq!(
            route.explanation,
            [
                "cloud: burst from onprem; estimate 1.00 usd",
                "order from routing.prefer: onprem, cloud",
                "onprem: physics has 0.50 su left, the job needs 2.00 su → burst to cloud",
            ]
        );
    }
}
