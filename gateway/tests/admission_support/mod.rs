//! Shared by the `admission_*` tests: a two-cluster configuration on a temporary SQLite
//! ledger, allocations, principals, and a stub [`Forwarder`] that answers at once.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bursar_gateway::admission::{
    Admission, ForwardError, ForwardJob, Forwarded, ForwardedRef, Forwarder,
};
use bursar_gateway::app::App;
use bursar_gateway::auth::{Principal, Role};
use bursar_gateway::config::Config;
use bursar_gateway::request::JobRequest;
use bursar_ledger::BalanceRow;
use bursar_pricing::Currency;

/// Two clusters: `onprem` bills core-hours (su), `cloud` dollars (usd); onprem preferred.
pub const CONFIG: &str = r#"
accounts:
  org: {}
  physics: {parent: org}
  chemistry: {parent: org}
users:
  alice: {default_account: physics, accounts: [physics]}
  bob: {default_account: chemistry, accounts: [chemistry]}
  carol: {default_account: physics, accounts: [physics, chemistry]}
clusters:
  onprem:
    kind: slurm
    currency: su
    partitions:
      batch: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0"}
      gpu: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:h100=8.0"}
    qos:
      premium: {usage_factor: 2.0}
    submit:
      default_partition: batch
      partitions:
        batch: {max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 2}
        gpu: {max_time: 1d, default_time: 1h, gpu_types: [h100], max_nodes: 2}
        debug: {}
  cloud:
    kind: slurm
    currency: usd
    partitions:
      batch: {weights: "CPU=0.0425,Mem=0.0053G"}
      gpu: {weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu:a100=2.50,GRES/gpu:h100=4.10"}
    submit:
      default_partition: batch
      working_dir: "/scratch/{user}"
      partitions:
        batch: {max_time: 7d, default_time: 2h, def_mem_per_cpu_mb: 2000}
        gpu: {max_time: 2d, default_time: 1h, gpu_types: [a100, h100]}
routing:
  prefer: [onprem, cloud]
  accounts:
    chemistry: [cloud, onprem]
"#;

pub const DAY: i64 = 86_400;

/// A forwarder that answers at once: job ids from 1001 up, or the failure it was told to give.
#[derive(Default)]
pub struct StubForwarder {
    next: AtomicU64,
    pub fail: Mutex<Option<ForwardError>>,
    pub submitted: Mutex<Vec<ForwardJob>>,
    pub cancelled: Mutex<Vec<(String, String)>>,
    /// The settle refs of the jobs that still wait on the cluster ([`Forwarder::still_waiting`]).
    pub waiting: Mutex<Vec<String>>,
    /// What [`Forwarder::allocates_min_cpus`] answers (the cluster's release decides it).
    pub min_cpus: Mutex<Option<bool>>,
}

impl StubForwarder {
    pub fn fail_with(&self, error: Option<ForwardError>) {
        *self.fail.lock().unwrap() = error;
    }

    pub fn submitted(&self) -> Vec<ForwardJob> {
        self.submitted.lock().unwrap().clone()
    }
}

#[async_trait]
impl Forwarder for StubForwarder {
    fn allocates_min_cpus(&self) -> Option<bool> {
        *self.min_cpus.lock().unwrap()
    }

    async fn submit(&self, job: &ForwardJob) -> Result<Forwarded, ForwardError> {
        if let Some(e) = self.fail.lock().unwrap().clone() {
            return Err(e);
        }
        self.submitted.lock().unwrap().push(job.clone());
        let id = (1001 + self.next.fetch_add(1, Ordering::SeqCst)).to_string();
        Ok(Forwarded {
            cluster_job_id: id.clone(),
            settle_ref: id,
            message: None,
        })
    }

    async fn still_waiting(&self, job: ForwardedRef<'_>) -> Result<bool, ForwardError> {
        Ok(self
            .waiting
            .lock()
            .unwrap()
            .iter()
            .any(|w| w == job.settle_ref))
    }

    async fn cancel(&self, user: &str, cluster_job_id: &str) -> Result<(), ForwardError> {
        self.cancelled
            .lock()
            .unwrap()
            .push((user.to_string(), cluster_job_id.to_string()));
        Ok(())
    }
}

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub app: Arc<App>,
    pub admission: Admission,
    pub onprem: Arc<StubForwarder>,
    pub cloud: Arc<StubForwarder>,
}

/// The fixture over [`CONFIG`] with `extra` YAML appended.
pub async fn fixture_with(extra: &str) -> Fixture {
    fixture_over(&format!("{CONFIG}{extra}")).await
}

/// The fixture over the configuration `config` (a variant of [`CONFIG`]).
pub async fn fixture_over(config: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "database: sqlite://{}\n{config}",
        dir.path().join("ledger.db").display()
    );
    let config = Config::parse(&yaml).unwrap();
    config.validate().unwrap();
    let app = Arc::new(App::open(config).await.unwrap());
    let onprem = Arc::new(StubForwarder::default());
    let cloud = Arc::new(StubForwarder::default());
    let mut forwarders: BTreeMap<String, Arc<dyn Forwarder>> = BTreeMap::new();
    forwarders.insert("onprem".into(), onprem.clone());
    forwarders.insert("cloud".into(), cloud.clone());
    let admission = Admission::new(app.clone(), forwarders);
    Fixture {
        _dir: dir,
        app,
        admission,
        onprem,
        cloud,
    }
}

pub async fn fixture() -> Fixture {
    fixture_with("").await
}

pub fn now() -> i64 {
    bursar_gateway::timefmt::now()
}

impl Fixture {
    /// Gives `account` `amount` micros of `currency`, from a day ago for thirty days.
    pub async fn allocate(&self, account: &str, currency: &str, amount: i64) {
        let t = now();
        self.app
            .ledger
            .set_allocation(
                account,
                &Currency::new(currency),
                amount,
                t - DAY,
                t + 30 * DAY,
            )
            .await
            .unwrap();
    }

    pub async fn balance(&self, account: &str, currency: &str) -> BalanceRow {
        self.app
            .ledger
            .balance(account, now())
            .await
            .unwrap()
            .into_iter()
            .find(|b| b.currency.as_str() == currency)
            .unwrap()
    }

    /// What `ClusterPricing::estimate` says for `request` on `cluster`/`partition`.
    pub fn estimate(
        &self,
        cluster: &str,
        partition: &str,
        request: &JobRequest,
        def_mem: Option<u64>,
        minutes: u64,
    ) -> i64 {
        self.app.pricing[cluster]
            .estimate(
                Some(partition),
                request.qos.as_deref(),
                &request.alloc_with_default_mem(def_mem),
                minutes * 60,
                now(),
                &self.app.price_book(),
            )
            .unwrap()
            .micros
    }
}

pub fn principal(user: &str, role: Role) -> Principal {
    Principal {
        user: user.to_string(),
        role,
        token_id: None,
    }
}

pub fn alice() -> Principal {
    principal("alice", Role::User)
}

/// 4 tasks × 1 CPU, a script, no time limit (the partition's default applies).
pub fn job() -> JobRequest {
    serde_json::from_value(serde_json::json!({
        "ntasks": 4,
        "script": "#!/bin/bash\nsrun hostname\n",
    }))
    .unwrap()
}

/// `job()` with more fields from JSON.
pub fn job_with(extra: serde_json::Value) -> JobRequest {
    let mut base = serde_json::json!({"ntasks": 4, "script": "#!/bin/bash\nsrun hostname\n"});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(base).unwrap()
}
