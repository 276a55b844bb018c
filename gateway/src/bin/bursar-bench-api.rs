//! `bursar-bench-api`: throughput and latency of bursar's HTTP API under concurrent clients
//! (docs/benchmarks.md, "HTTP API: quotes and admissions"; `deploy/bench/api.sh` runs it).
//!
//! The server is bursar's own: [`router`] over a [`ServerState`] built the way `bursar serve`
//! builds it (the configuration loaded from a file, the SQLite ledger in a scratch folder, the
//! HS256 verifier, the admission service, the hold-expiry and checkpoint loops), served by `axum::serve` on a
//! `127.0.0.1:0` listener in its own runtime. The clients are tokio tasks in another runtime,
//! each with its own keep-alive connection, so every request crosses real loopback TCP. The
//! load generator's HTTP is [`http1::Http1`] by default: the request built once, one write and
//! a read per request, as `wrk` does, so that the two cores go to what is measured rather than
//! to the clients (`--load-client reqwest` uses `reqwest` and, for the baseline,
//! [`SlurmRestClient`], which cost the clients about as much CPU per request as bursar spends
//! on a quote). Scenarios:
//!
//! - `quotes`: `POST /v1/quotes`, two clusters quoted (su and usd) for one account with
//!   allocations on it and on its parent.
//! - `admit-stub`: `POST /v1/jobs` with a fresh `Idempotency-Key` (as `bursar submit` sends),
//!   forwarded to an in-process stub [`Forwarder`] that answers at once with increasing job
//!   ids: quote, hold, record, link — everything bursar does itself.
//! - `admit-slurm`: `POST /v1/jobs` forwarded to the real slurmrestd of the dev stack
//!   (`deploy/dev/`, cluster `onprem`): a one-minute `true` job per request.
//! - `direct-slurm`: the same jobs sent straight to that slurmrestd by the same load generator,
//!   with the body bursar's forwarder sends (`submit_body` of `slurm_submission` of the same
//!   `ForwardJob`), a token for alice minted from the same key, and the same concurrency: the
//!   baseline bursar's overhead is measured against.
//!
//! Two variations locate bursar's cost rather than measure a target: `--stub-delay-ms N` makes
//! the stub answer after N ms, so that submissions reach the admission writer a few at a time
//! as they do end to end, without the controller's CPU beside them (bursar's CPU per
//! submission is then steadier than end to end); `--bare-proxy` puts a bare HTTP proxy in
//! bursar's place in `admit-slurm` (the same axum server, request parsing and slurmrestd
//! forwarder; no token, quote or ledger): the floor of any gateway with a second HTTP hop.
//!
//! `healthz` (`GET /healthz`: no token, no ledger) measures what HTTP and the load generator
//! alone cost on this machine, the ceiling of every other scenario. The local scenarios run for
//! `--seconds` after `--warmup` seconds. The Slurm ones submit `--slurm-jobs` jobs each after
//! one warm-up submission per client, in `--slurm-blocks` blocks the two take turns with
//! (bursar, direct, bursar, …; the other way round on even runs), so that the controller's
//! drift and stalls and the machine's neighbours weigh on both alike. The Slurm jobs are
//! submitted held (`--hold`, as `bursar submit -H`), so that what slurmctld does after a
//! submission — scheduling, starting and ending the job — stays out of the measurement (and
//! out of the next block's); `--slurm-runnable` submits them ready to run. Every job is
//! cancelled afterwards. One bursar serves each Slurm run, on a ledger primed with 20,000
//! admitted jobs, as a server in service (`prime`). Each scenario runs `--runs` times (`--slurm-runs` for the Slurm pair) and the
//! table shows the median of each column; bursar's overhead is also given as the median over
//! the runs of each run's own comparison.
//! Besides latency, each run reports the CPU time bursar's threads (server runtime, SQLite
//! workers) spent per request and how much of the machine other processes used meanwhile,
//! both from `/proc`. Nothing here asserts a time: this is a measurement, not a test.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use async_trait::async_trait;
use bursar_collectors::slurmrestd::{
    mint_token, submit_body, ApiSelection, ApiVersion, JobSubmission, SlurmAuth, SlurmClaims,
    SlurmRestClient, SlurmRestConfig,
};
use bursar_gateway::admission::forward::{forwarders_from_config, slurm_submission};
use bursar_gateway::admission::{
    Admission, ForwardError, ForwardJob, Forwarded, ForwardedRef, Forwarder,
};
use bursar_gateway::app::App;
use bursar_gateway::auth::{generate_key_file, Role, TokenIssuer, TokenVerifier};
use bursar_gateway::client::http::idempotency_key;
use bursar_gateway::config::Config;
use bursar_gateway::request::JobRequest;
use bursar_gateway::server::{checkpoint_loop, expiry_loop, router, AdmissionApi, ServerState};
use bursar_ledger::{AdmitOutcome, ForwardedJob, NewAdmission, NewApiJob, NewHold};
use bursar_pricing::Currency;
use clap::{Parser, ValueEnum};
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

#[path = "bench_api/http1.rs"]
mod http1;
use http1::Http1;

#[derive(Debug, Parser)]
#[command(
    name = "bursar-bench-api",
    about = "Quotes/s and admissions/s of bursar's HTTP API, with latency percentiles"
)]
struct Args {
    /// Scenarios to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Scenario::ALL)]
    scenarios: Vec<Scenario>,
    /// Concurrent clients (one keep-alive connection each).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Measured seconds of each local scenario (`quotes`, `admit-stub`).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Seconds of unmeasured load before each local scenario.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Measured submissions of each Slurm scenario per run (all cancelled afterwards).
    #[arg(long, default_value_t = 2000)]
    slurm_jobs: u64,
    /// Runs of the Slurm scenarios (default: `--runs`).
    #[arg(long)]
    slurm_runs: Option<usize>,
    /// Blocks each Slurm scenario's jobs are split into. Within a run the two scenarios take
    /// turns block by block (bursar, direct, bursar, … and the other way round on even runs),
    /// so that the controller's drift and the machine's neighbours weigh on both alike. A
    /// block should be several times `--clients`: each starts and drains its clients.
    #[arg(long, default_value_t = 4)]
    slurm_blocks: u64,
    /// Seconds to wait after cancelling a Slurm run's jobs: longer than slurmctld's
    /// `MinJobAge` (30 s on the dev stack), so each run starts on a purged controller.
    #[arg(long, default_value_t = 35)]
    slurm_settle: u64,
    /// Submit the Slurm scenarios' jobs ready to run instead of held: the controller then
    /// also schedules, starts and ends them while the blocks run (the next block meets the
    /// work of the one before).
    #[arg(long)]
    slurm_runnable: bool,
    /// Runs of each scenario; the table shows the median of each column.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The dev stack's Slurm env file (`deploy/dev/slurm.sh` writes it).
    #[arg(long, default_value = "/var/tmp/bursar-dev/slurm/env.sh")]
    slurm_env: PathBuf,
    /// How long the stub forwarder of `admit-stub` takes to answer, in milliseconds (0: at
    /// once). With a delay like slurmrestd's, submissions reach the admission writer as they
    /// do end to end, a few at a time, without the controller's CPU beside them.
    #[arg(long, default_value_t = 0)]
    stub_delay_ms: u64,
    /// Measure a bare proxy instead of bursar in the Slurm scenarios: the same HTTP server
    /// (axum), the same JSON request and the same slurmrestd client (the configured
    /// forwarder), but no token, no quote and no ledger — the floor that any gateway with a
    /// second HTTP hop pays on this machine.
    #[arg(long)]
    bare_proxy: bool,
    /// Worker threads of the server's runtime (default: one per core, as `bursar serve`).
    #[arg(long)]
    server_threads: Option<usize>,
    /// Worker threads of the clients' runtime.
    #[arg(long, default_value_t = 2)]
    client_threads: usize,
    /// The load generator's HTTP client, for every scenario (the baseline included).
    #[arg(long, value_enum, default_value_t = LoadClient::Raw)]
    load_client: LoadClient,
    /// Before each run, wait until other processes use less than this percentage of the
    /// machine (sampled over 2 s), for at most `--idle-wait` seconds. What they used during
    /// each run is reported either way.
    #[arg(long)]
    idle_below: Option<u64>,
    /// The longest wait for `--idle-below`, in seconds.
    #[arg(long, default_value_t = 600)]
    idle_wait: u64,
}

impl Args {
    /// The scenario's name in the results, saying what `--bare-proxy` and `--stub-delay-ms`
    /// changed.
    fn label(&self, scenario: Scenario) -> String {
        match scenario {
            Scenario::AdmitSlurm if self.bare_proxy => {
                "`POST /v1/jobs` → slurmrestd (bare proxy, not bursar)".to_string()
            }
            Scenario::AdmitStub if self.stub_delay_ms > 0 => format!(
                "`POST /v1/jobs`, stub forwarder answering after {} ms",
                self.stub_delay_ms
            ),
            _ => scenario.label().to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Healthz,
    Quotes,
    AdmitStub,
    AdmitSlurm,
    DirectSlurm,
}

impl Scenario {
    const ALL: [Scenario; 5] = [
        Scenario::Healthz,
        Scenario::Quotes,
        Scenario::AdmitStub,
        Scenario::AdmitSlurm,
        Scenario::DirectSlurm,
    ];

    fn label(self) -> &'static str {
        match self {
            Scenario::Healthz => "`GET /healthz` (HTTP floor: no auth, no ledger)",
            Scenario::Quotes => "`POST /v1/quotes`",
            Scenario::AdmitStub => "`POST /v1/jobs`, stub forwarder",
            Scenario::AdmitSlurm => "`POST /v1/jobs` → slurmrestd (bursar end to end)",
            Scenario::DirectSlurm => "slurmrestd `job/submit` directly (baseline)",
        }
    }

    fn is_slurm(self) -> bool {
        matches!(self, Scenario::AdmitSlurm | Scenario::DirectSlurm)
    }
}

/// mimalloc instead of glibc's allocator: allocations freed on another thread than the one
/// that made them (every request crosses tokio's worker threads) cost glibc a fifth of
/// bursar's CPU on the admission path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    // The same logging as the `bursar` binary (BURSAR_LOG, default `warn`).
    bursar_gateway::telemetry::init();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bursar-bench-api: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    if args.clients == 0 || args.runs == 0 {
        bail!("--clients and --runs must be at least 1");
    }
    let mut server_rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.server_threads {
        server_rt.worker_threads(n);
    }
    let server_rt = server_rt
        .thread_name("server")
        .enable_all()
        .build()
        .context("the server runtime")?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .thread_name("client")
        .enable_all()
        .build()
        .context("the client runtime")?;
    let rts = Runtimes {
        server: server_rt,
        client: client_rt,
    };
    let slurm = if args.scenarios.iter().any(|s| s.is_slurm()) {
        Some(SlurmTarget::from_env_file(&args.slurm_env)?)
    } else {
        None
    };

    let mut results: BTreeMap<usize, (Scenario, Vec<Summary>)> = BTreeMap::new();
    let order: Vec<(usize, Scenario)> = Scenario::ALL
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| args.scenarios.contains(s))
        .collect();
    let slurm_runs = args.slurm_runs.unwrap_or(args.runs);
    for run in 1..=args.runs.max(slurm_runs) {
        let mut record = |i: usize, scenario: Scenario, summary: Summary| {
            eprintln!("  {}: {}", args.label(scenario), summary.line());
            results
                .entry(i)
                .or_insert_with(|| (scenario, Vec::new()))
                .1
                .push(summary);
        };
        if run <= args.runs {
            for &(i, scenario) in order.iter().filter(|(_, s)| !s.is_slurm()) {
                eprintln!("run {run}/{}: {}", args.runs, scenario.label());
                if let Some(percent) = args.idle_below {
                    wait_idle(percent, Duration::from_secs(args.idle_wait));
                }
                let summary = run_local(&rts, args, scenario, run).context(scenario.label())?;
                record(i, scenario, summary);
            }
        }
        let sides: Vec<(usize, Scenario)> = order
            .iter()
            .copied()
            .filter(|(_, s)| s.is_slurm())
            .collect();
        if run <= slurm_runs && !sides.is_empty() {
            eprintln!("run {run}/{slurm_runs}: the Slurm scenarios, block by block");
            if let Some(percent) = args.idle_below {
                wait_idle(percent, Duration::from_secs(args.idle_wait));
            }
            let slurm = slurm.as_ref().context("the Slurm target")?;
            let scenarios: Vec<Scenario> = sides.iter().map(|&(_, s)| s).collect();
            let summaries = run_slurm(&rts, args, &scenarios, run, slurm)?;
            for (&(i, scenario), summary) in sides.iter().zip(summaries) {
                record(i, scenario, summary);
            }
        }
    }
    print!("{}", report(args, &results));
    Ok(())
}

/// Waits until other processes use less than `percent` of the machine over 2 s, or `limit`.
fn wait_idle(percent: u64, limit: Duration) {
    let started = Instant::now();
    loop {
        let Some(before) = CpuSample::now() else {
            return;
        };
        let sampled = Instant::now();
        std::thread::sleep(Duration::from_secs(2));
        let Some(after) = CpuSample::now() else {
            return;
        };
        let others = after
            .since(&before)
            .others_permille(sampled.elapsed().as_nanos())
            .unwrap_or(0);
        if others < percent * 10 || started.elapsed() >= limit {
            if started.elapsed() > Duration::from_secs(3) {
                eprintln!(
                    "  waited {} s for other processes to calm down (now {}.{}%)",
                    started.elapsed().as_secs(),
                    others / 10,
                    others % 10
                );
            }
            return;
        }
        std::thread::sleep(Duration::from_secs(3));
    }
}

struct Runtimes {
    server: Runtime,
    client: Runtime,
}

// --- the site: configuration, ledger, tokens -------------------------------------------------

/// A scratch folder with bursar's configuration, key and ledger; removed on drop.
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new(tag: &str) -> anyhow::Result<Site> {
        let dir =
            std::env::temp_dir().join(format!("bursar-bench-api-{}-{tag}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("removing a stale {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Site { dir })
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two clusters priced like `deploy/examples/bursar.yaml` (onprem in su, cloud in usd), both
/// taking submissions; `onprem_slurmrestd` adds onprem's real slurmrestd.
fn config_yaml(dir: &Path, onprem_slurmrestd: Option<&SlurmTarget>) -> String {
    let slurmrestd = onprem_slurmrestd.map_or_else(String::new, |s| {
        format!(
            "      slurmrestd: {{url: \"{}\", jwt_key_file: \"{}\", api_version: v0.0.38}}\n",
            s.url,
            s.key_file.display()
        )
    });
    format!(
        r#"database: sqlite://{db}
auth:
  hs256_key_file: {key}
currencies:
  su: {{decimals: 2, description: "service units (core-hours)"}}
  usd: {{decimals: 2, description: "US dollars"}}
accounts:
  org: {{}}
  physics: {{parent: org}}
  chemistry: {{parent: org}}
users:
  alice: {{default_account: physics, accounts: [physics]}}
  bob: {{default_account: chemistry, accounts: [chemistry]}}
  carol: {{default_account: physics, accounts: [physics, chemistry]}}
clusters:
  onprem:
    kind: slurm
    currency: su
    timezone: UTC
    partitions:
      batch: {{weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0"}}
    qos:
      premium: {{usage_factor: 2.0}}
    submit:
{slurmrestd}      default_partition: batch
      partitions:
        batch: {{max_time: 1d, default_time: 1h, def_mem_per_cpu_mb: 1000, max_nodes: 2}}
  cloud:
    kind: slurm
    currency: usd
    timezone: UTC
    partitions:
      gpu: {{weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50"}}
    qos:
      premium: {{usage_factor: 2.0}}
    submit:
      default_partition: gpu
      partitions:
        gpu: {{max_time: 2d, default_time: 1h}}
routing:
  prefer: [onprem, cloud]
"#,
        db = dir.join("ledger.db").display(),
        key = dir.join("jwt.key").display(),
    )
}

/// The job every scenario sends: one CPU for one minute running `true`, charged to physics,
/// its output thrown away. No partition: each cluster quotes its default one. `held`: submitted
/// with `--hold`.
fn job_request(held: bool) -> Value {
    let mut job = json!({
        "account": "physics",
        "ntasks": 1,
        "time_limit_min": 1,
        "job_name": "bursar-bench-api",
        "script": "#!/bin/sh\ntrue\n",
        "working_dir": "/tmp",
        "output": "/dev/null",
    });
    if held {
        job["hold"] = Value::Bool(true);
    }
    job
}

/// A running bursar: its address, the token clients send, and how to stop it.
struct Server {
    url: String,
    bearer: String,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The configured forwarders, renewable ([`Forwarding::Config`]).
    forwarders: Vec<Arc<Renewable>>,
    app: Arc<App>,
    site: Site,
}

/// How the admission service forwards.
enum Forwarding {
    /// Both clusters to a [`StubForwarder`] that answers after the given delay.
    Stub(Duration),
    /// What the configuration says (onprem: the real slurmrestd), each cluster's forwarder
    /// behind a [`Renewable`].
    Config,
}

/// A configured forwarder that the benchmark can swap for a fresh one built from the same
/// configuration ([`Renewable::renew`]): the old one's pooled connections to slurmrestd close
/// once it is dropped, so that a server which lives through a whole run holds no idle
/// connections while the direct clients take their turn. Costs a lock and an `Arc` clone per
/// call.
struct Renewable {
    cluster: String,
    config: Arc<Config>,
    inner: Mutex<Arc<dyn Forwarder>>,
}

impl Renewable {
    fn current(&self) -> Arc<dyn Forwarder> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the forwarder with a fresh one (no connection yet).
    fn renew(&self) -> anyhow::Result<()> {
        let fresh = forwarders_from_config(&self.config)?
            .remove(&self.cluster)
            .with_context(|| format!("no forwarder for {}", self.cluster))?;
        *self.inner.lock().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }
}

#[async_trait]
impl Forwarder for Renewable {
    fn check(&self, request: &JobRequest) -> Result<(), String> {
        self.current().check(request)
    }

    async fn submit(&self, job: &ForwardJob) -> Result<Forwarded, ForwardError> {
        self.current().submit(job).await
    }

    async fn cancel(&self, user: &str, cluster_job_id: &str) -> Result<(), ForwardError> {
        self.current().cancel(user, cluster_job_id).await
    }

    async fn still_waiting(&self, job: ForwardedRef<'_>) -> Result<bool, ForwardError> {
        self.current().still_waiting(job).await
    }
}

/// Starts bursar on `127.0.0.1:0` in `rt`: configuration loaded from a file, ledger opened and
/// migrated, allocations large enough for every run (10⁹ su and usd on physics and on org),
/// a user token for alice.
fn start_server(
    rt: &Runtime,
    tag: &str,
    forwarding: Forwarding,
    slurm: Option<&SlurmTarget>,
    bare: bool,
) -> anyhow::Result<Server> {
    let site = Site::new(tag)?;
    let config_path = site.dir.join("bursar.yaml");
    std::fs::write(&config_path, config_yaml(&site.dir, slurm)).context("writing the config")?;
    generate_key_file(site.dir.join("jwt.key")).context("the HS256 key")?;
    rt.block_on(async {
        let config = Config::load(Some(&config_path))?;
        let auth = config.auth.clone().context("the auth section")?;
        let verifier = TokenVerifier::from_config(&auth)?;
        let issuer = TokenIssuer::from_config(&auth)?.context("an HS256 key")?;
        let app = Arc::new(App::open(config).await?);
        let now = bursar_gateway::timefmt::now();
        for account in ["physics", "org"] {
            for currency in ["su", "usd"] {
                app.ledger
                    .set_allocation(
                        account,
                        &Currency::new(currency),
                        1_000_000_000_000_000,
                        now - 86_400,
                        now + 30 * 86_400,
                    )
                    .await?;
            }
        }
        let mut renewable = Vec::new();
        let forwarders: BTreeMap<String, Arc<dyn Forwarder>> = match forwarding {
            Forwarding::Stub(delay) => ["onprem", "cloud"]
                .into_iter()
                .map(|c| {
                    let stub: Arc<dyn Forwarder> = Arc::new(StubForwarder {
                        next: AtomicU64::new(0),
                        delay,
                    });
                    (c.to_string(), stub)
                })
                .collect(),
            Forwarding::Config => {
                let config = Arc::new(app.config.clone());
                forwarders_from_config(&config)?
                    .into_iter()
                    .map(|(cluster, forwarder)| {
                        let r = Arc::new(Renewable {
                            cluster: cluster.clone(),
                            config: config.clone(),
                            inner: Mutex::new(forwarder),
                        });
                        renewable.push(r.clone());
                        let r: Arc<dyn Forwarder> = r;
                        (cluster, r)
                    })
                    .collect()
            }
        };
        let onprem = forwarders
            .get("onprem")
            .cloned()
            .context("no onprem forwarder")?;
        let admission: Arc<dyn AdmissionApi> = Arc::new(Admission::new(app.clone(), forwarders));
        let state = ServerState::new(app.clone(), Arc::new(verifier), Some(admission.clone()));
        let routes = if bare {
            bare_proxy(onprem)
        } else {
            router(state)
        };
        let server_app = app.clone();
        let bearer = format!(
            "Bearer {}",
            issuer
                .issue(
                    "alice",
                    Role::User,
                    Duration::from_secs(3600),
                    chrono::Utc::now()
                )?
                .expose_secret()
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(async move {
            let (stop_expiry, expiry_stopped) = oneshot::channel::<()>();
            let (stop_checkpoints, checkpoints_stopped) = oneshot::channel::<()>();
            let checkpointing = tokio::spawn(checkpoint_loop(app.clone(), async {
                let _ = checkpoints_stopped.await;
            }));
            let expiring = tokio::spawn(expiry_loop(app, Some(admission), async {
                let _ = expiry_stopped.await;
            }));
            let served = axum::serve(listener, routes)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .context("the HTTP server");
            let _ = stop_expiry.send(());
            let _ = stop_checkpoints.send(());
            let _ = expiring.await;
            let _ = checkpointing.await;
            served
        });
        Ok(Server {
            url,
            bearer,
            stop,
            done,
            forwarders: renewable,
            app: server_app,
            site,
        })
    })
}

/// `POST /v1/jobs` of `--bare-proxy`: the job request parsed as bursar parses it, forwarded
/// to onprem as alice, the cluster's job id answered — nothing checked, priced or recorded.
fn bare_proxy(forwarder: Arc<dyn Forwarder>) -> axum::Router {
    async fn submit(
        axum::extract::State(forwarder): axum::extract::State<Arc<dyn Forwarder>>,
        body: axum::body::Bytes,
    ) -> (axum::http::StatusCode, axum::Json<Value>) {
        use axum::http::StatusCode;
        let request: JobRequest = match serde_json::from_slice(&body) {
            Ok(request) => request,
            Err(e) => {
                let error = json!({"error": e.to_string()});
                return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(error));
            }
        };
        let job = ForwardJob {
            cluster: "onprem".to_string(),
            user: "alice".to_string(),
            account: request.account.clone().unwrap_or_default(),
            partition: "batch".to_string(),
            qos: request.qos.clone(),
            time_limit_min: request.time_limit_min.unwrap_or(1),
            working_dir: request.working_dir.clone().unwrap_or_default(),
            request,
        };
        match forwarder.submit(&job).await {
            Ok(done) => (
                StatusCode::CREATED,
                axum::Json(json!({"cluster": "onprem", "cluster_job_id": done.cluster_job_id})),
            ),
            Err(e) => (
                StatusCode::BAD_GATEWAY,
                axum::Json(json!({"error": e.to_string()})),
            ),
        }
    }
    axum::Router::new()
        .route("/v1/jobs", axum::routing::post(submit))
        .with_state(forwarder)
}

/// Admissions a Slurm run's bursar has recorded before its first block ([`prime`]).
const PRIMED_JOBS: u64 = 20_000;

/// Brings a new server's ledger to where one in service is: [`PRIMED_JOBS`] submissions
/// admitted and linked to a cluster job straight through the ledger (holds on physics in su,
/// as the measured jobs'), then checkpointed. Its write-ahead log has then started over at its
/// working size (past 64 MiB), so the measured submissions write over pages in the page cache
/// as in a server in service, instead of growing a new file: a run's first ~1,000 submissions
/// on a new ledger would otherwise pay for the file's growth (pages allocated and zeroed,
/// ext4's block reservations).
fn prime(rt: &Runtime, server: &Server) -> anyhow::Result<()> {
    const TASKS: u64 = 64;
    let started = Instant::now();
    let app = &server.app;
    let now = bursar_gateway::timefmt::now();
    let request_json = serde_json::to_string(&job_request(true))?;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (app, request_json) = (app.clone(), request_json.clone());
            rt.spawn(async move {
                for n in (task..PRIMED_JOBS).step_by(TASKS as usize) {
                    let admission = NewAdmission {
                        hold: Some(NewHold {
                            account: "physics".to_string(),
                            currency: Currency::new("su"),
                            amount: 1_000_000,
                            cluster: "onprem".to_string(),
                            job_ref: None,
                            placed_at: now,
                            expires_at: now + 86_400,
                            lifetime: None,
                            idempotency_key: format!("bench-prime:{n}"),
                            note: None,
                        }),
                        job: NewApiJob {
                            idempotency_key: Some(format!("alice bench-prime-{n}")),
                            actor: "alice".to_string(),
                            user: "alice".to_string(),
                            account: "physics".to_string(),
                            cluster: "onprem".to_string(),
                            currency: Currency::new("su"),
                            estimate: 1_000_000,
                            hold_id: None,
                            state: "held".to_string(),
                            request_json: request_json.clone(),
                            route_json: "{}".to_string(),
                            at: now,
                            array_tasks: None,
                        },
                    };
                    let AdmitOutcome::Admitted { job, hold, .. } =
                        app.ledger.admit_queued(admission, now).await?
                    else {
                        bail!("priming job {n} was not admitted");
                    };
                    app.ledger.queue_forwarded(ForwardedJob {
                        job: job.id,
                        hold: hold.map(|h| h.id),
                        settle_ref: format!("p{n}"),
                        cluster_job_id: format!("p{n}"),
                        at: now,
                        route_json: None,
                    })?;
                }
                Ok(())
            })
        })
        .collect();
    rt.block_on(async {
        for task in tasks {
            task.await.context("a priming task")??;
        }
        app.ledger.forwarded_settled().await;
        app.ledger.checkpoint().await?;
        Ok::<_, anyhow::Error>(())
    })
    .context("priming the ledger")?;
    let wal = std::fs::metadata(server.site.dir.join("ledger.db-wal")).map_or(0, |m| m.len());
    eprintln!(
        "  bursar's ledger primed with {PRIMED_JOBS} jobs in {:.1} s (write-ahead log {} MB)",
        started.elapsed().as_secs_f64(),
        wal / 1_000_000
    );
    Ok(())
}

impl Server {
    /// Ends a block: swaps every configured forwarder for a fresh one (the connections to the
    /// clusters close) and checkpoints what the block wrote, so that neither is left to the
    /// block after, whose clients may be the direct ones.
    fn end_block(&self, rt: &Runtime) -> anyhow::Result<()> {
        self.forwarders.iter().try_for_each(|f| f.renew())?;
        rt.block_on(self.app.ledger.checkpoint())
            .context("checkpointing after a block")
    }

    fn stop(self, rt: &Runtime) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        rt.block_on(self.done).context("the server task")?
    }
}

/// Answers with job ids from 1 up, at once or after `delay` (`--stub-delay-ms`: a cluster's
/// answer time without its CPU).
struct StubForwarder {
    next: AtomicU64,
    delay: Duration,
}

#[async_trait]
impl Forwarder for StubForwarder {
    async fn submit(&self, _job: &ForwardJob) -> Result<Forwarded, ForwardError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let id = (self.next.fetch_add(1, Ordering::Relaxed) + 1).to_string();
        Ok(Forwarded {
            cluster_job_id: id.clone(),
            settle_ref: id,
            message: None,
        })
    }

    async fn cancel(&self, _user: &str, _cluster_job_id: &str) -> Result<(), ForwardError> {
        Ok(())
    }
}

// --- the load generator ------------------------------------------------------------------------

/// When the clients stop taking new requests.
#[derive(Clone)]
enum Budget {
    Until(Instant),
    Requests(Arc<AtomicU64>),
}

impl Budget {
    fn requests(n: u64) -> Budget {
        Budget::Requests(Arc::new(AtomicU64::new(n)))
    }

    /// Whether one more request may start.
    fn take(&self) -> bool {
        match self {
            Budget::Until(deadline) => Instant::now() < *deadline,
            Budget::Requests(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
}

/// What one call of [`drive`] saw: every successful request's latency, the failures, the
/// wall time and the CPU use.
#[derive(Debug, Default)]
struct Measured {
    latencies: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
    elapsed_ns: u128,
    cpu: Option<CpuSample>,
}

impl Measured {
    /// Several blocks as one: their requests together over their summed wall time.
    fn merge(blocks: Vec<Measured>) -> Measured {
        let mut all = Measured::default();
        for b in blocks {
            all.latencies.extend(b.latencies);
            all.errors += b.errors;
            all.elapsed_ns += b.elapsed_ns;
            if all.first_error.is_none() {
                all.first_error = b.first_error;
            }
            all.cpu = match (all.cpu, b.cpu) {
                (Some(a), Some(b)) => Some(a.plus(&b)),
                (a, b) => a.or(b),
            };
        }
        all
    }

    fn summary(mut self) -> Summary {
        self.latencies.sort_unstable();
        let all = &self.latencies;
        let ok = u64::try_from(all.len()).unwrap_or(u64::MAX);
        let total: u128 = all.iter().map(|&ns| u128::from(ns)).sum();
        let elapsed = self.elapsed_ns.max(1);
        // The machine's share counts in ticks of 10 ms: less than a second (one block of Slurm
        // jobs) says little; the blocks of a run together do.
        let machine = self.cpu.filter(|_| elapsed >= 1_000_000_000);
        Summary {
            server_cpu_ns: self.cpu.and_then(|c| c.server_ns_per(ok)),
            others_permille: machine.and_then(|c| c.others_permille(elapsed)),
            ok,
            errors: self.errors,
            per_second: u64::try_from(u128::from(ok) * 1_000_000_000 / elapsed).unwrap_or(u64::MAX),
            p50_ns: percentile(all, 50),
            p99_ns: percentile(all, 99),
            max_ns: all.last().copied().unwrap_or(0),
            mean_ns: u64::try_from(total / u128::from(ok.max(1))).unwrap_or(u64::MAX),
            first_error: self.first_error,
        }
    }
}

/// One run's measurements.
#[derive(Debug, Clone, Default)]
struct Summary {
    ok: u64,
    errors: u64,
    /// Successful requests per second.
    per_second: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    /// Mean latency: with a fixed number of clients always waiting, the clients divided by
    /// the throughput (Little's law).
    mean_ns: u64,
    /// CPU time of bursar's threads (server runtime, SQLite workers) per successful request.
    server_cpu_ns: Option<u64>,
    /// How much of the machine (‰ of all CPUs) processes other than this one used meanwhile.
    others_permille: Option<u64>,
    first_error: Option<String>,
}

impl Summary {
    fn line(&self) -> String {
        let mut line = format!(
            "{} ok, {} errors, {}/s, p50 {} ms, p99 {} ms, max {} ms, mean {} ms",
            self.ok,
            self.errors,
            self.per_second,
            ms(self.p50_ns),
            ms(self.p99_ns),
            ms(self.max_ns),
            ms(self.mean_ns)
        );
        if let Some(cpu) = self.server_cpu_ns {
            let _ = write!(line, ", bursar CPU {} µs/request", cpu / 1_000);
        }
        if let Some(others) = self.others_permille {
            let _ = write!(
                line,
                ", other processes used {}.{}% of the machine",
                others / 10,
                others % 10
            );
        }
        if let Some(e) = &self.first_error {
            let _ = write!(line, " (first error: {e})");
        }
        line
    }
}

/// Nanoseconds as milliseconds with three decimals.
fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, (ns % 1_000_000) / 1_000)
}

/// The nearest-rank `percent` percentile of sorted values.
fn percentile(sorted: &[u64], percent: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = u64::try_from(sorted.len()).unwrap_or(u64::MAX);
    let rank = (percent.saturating_mul(n).div_ceil(100)).clamp(1, n);
    sorted[usize::try_from(rank - 1).unwrap_or(0)]
}

/// Runs `clients` tasks in `rt`, each calling `request(client, seq)` until `budget` says stop;
/// every call is timed from before sending to the end of the answer.
fn drive<F, Fut>(rt: &Runtime, clients: usize, budget: Budget, request: F) -> Measured
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let request = Arc::new(request);
    rt.block_on(async move {
        let cpu_before = CpuSample::now();
        let started = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|client| {
                let request = request.clone();
                let budget = budget.clone();
                tokio::spawn(async move {
                    let mut latencies: Vec<u64> = Vec::with_capacity(4096);
                    let (mut errors, mut first_error) = (0u64, None);
                    let mut seq = 0u64;
                    while budget.take() {
                        let t0 = Instant::now();
                        let outcome = request(client, seq).await;
                        let took = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        seq += 1;
                        match outcome {
                            Ok(()) => latencies.push(took),
                            Err(e) => {
                                errors += 1;
                                first_error.get_or_insert(e);
                            }
                        }
                    }
                    (latencies, errors, first_error)
                })
            })
            .collect();
        let mut all: Vec<u64> = Vec::new();
        let (mut errors, mut first_error) = (0u64, None);
        for task in tasks {
            match task.await {
                Ok((latencies, e, first)) => {
                    all.extend(latencies);
                    errors += e;
                    if first_error.is_none() {
                        first_error = first;
                    }
                }
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(format!("client task: {e}"));
                }
            }
        }
        let elapsed_ns = u128::max(started.elapsed().as_nanos(), 1);
        let cpu = cpu_before.zip(CpuSample::now()).map(|(a, b)| b.since(&a));
        Measured {
            latencies: all,
            errors,
            first_error,
            elapsed_ns,
            cpu,
        }
    })
}

/// CPU time as Linux's `/proc` counts it: the whole machine's in ticks (`/proc/stat`), and this
/// process's threads in nanoseconds (`/proc/self/task/*/schedstat`) split into the clients'
/// threads and the rest (bursar: the server runtime and the SQLite workers). Per-thread ticks
/// (10 ms) would blur a block of a few hundred submissions by tens of µs each.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    cpus: u64,
    /// All CPUs, busy or not, in ticks.
    total: u64,
    /// All CPUs, busy (everything but idle and iowait), in ticks.
    busy: u64,
    server_ns: u64,
    client_ns: u64,
}

impl CpuSample {
    /// `None` where `/proc` cannot be read.
    fn now() -> Option<CpuSample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let mut lines = stat.lines();
        let all: Vec<u64> = lines
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let cpus = u64::try_from(lines.filter(|l| l.starts_with("cpu")).count()).ok()?;
        let total: u64 = all.iter().sum();
        // user nice system idle iowait irq softirq steal …
        let idle = all.get(3).copied().unwrap_or(0) + all.get(4).copied().unwrap_or(0);
        let (mut server_ns, mut client_ns) = (0, 0);
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let (Ok(comm), Ok(sched)) = (
                std::fs::read_to_string(task.path().join("comm")),
                std::fs::read_to_string(task.path().join("schedstat")),
            ) else {
                continue; // the thread just ended
            };
            // Time on a CPU in ns, time waiting to run, timeslices.
            let Some(ns) = sched
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
            else {
                continue;
            };
            if comm.trim_end() == "client" {
                client_ns += ns;
            } else {
                server_ns += ns;
            }
        }
        Some(CpuSample {
            cpus: cpus.max(1),
            total,
            busy: total.saturating_sub(idle),
            server_ns,
            client_ns,
        })
    }

    /// The CPU time between `earlier` and this sample. (Threads that ended in between are
    /// lost: the measured phases start and end none.)
    fn since(&self, earlier: &CpuSample) -> CpuSample {
        CpuSample {
            cpus: self.cpus,
            total: self.total.saturating_sub(earlier.total),
            busy: self.busy.saturating_sub(earlier.busy),
            server_ns: self.server_ns.saturating_sub(earlier.server_ns),
            client_ns: self.client_ns.saturating_sub(earlier.client_ns),
        }
    }

    /// The CPU time of two intervals together.
    fn plus(&self, other: &CpuSample) -> CpuSample {
        CpuSample {
            cpus: self.cpus,
            total: self.total + other.total,
            busy: self.busy + other.busy,
            server_ns: self.server_ns + other.server_ns,
            client_ns: self.client_ns + other.client_ns,
        }
    }

    /// bursar's CPU time per request.
    fn server_ns_per(&self, requests: u64) -> Option<u64> {
        (requests > 0).then(|| self.server_ns / requests)
    }

    /// ‰ of the machine used by other processes over an interval of `elapsed_ns` (the machine's
    /// ticks over it are `cpus × elapsed`, which sets the length of a tick).
    fn others_permille(&self, elapsed_ns: u128) -> Option<u64> {
        if self.total == 0 || elapsed_ns == 0 {
            return None;
        }
        let ours_ticks = u128::from(self.server_ns + self.client_ns) * u128::from(self.total)
            / (elapsed_ns * u128::from(self.cpus));
        let others = u128::from(self.busy).saturating_sub(ours_ticks);
        u64::try_from(others * 1000 / u128::from(self.total)).ok()
    }
}

/// Which HTTP client the load generator uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LoadClient {
    /// [`http1::Http1`]: the request built once, one write and a read per request (as `wrk`).
    Raw,
    /// `reqwest` (for bursar's API) and [`SlurmRestClient`] (for slurmrestd directly): what a
    /// Rust program would use, at several times the CPU per request.
    Reqwest,
}

/// A client of one HTTP endpoint: one keep-alive connection and a fixed request (method, path,
/// headers, body); each call may add headers.
#[derive(Clone)]
enum HttpClient {
    Raw(Arc<tokio::sync::Mutex<Http1>>),
    Reqwest {
        http: reqwest::Client,
        url: String,
        headers: Arc<Vec<(String, String)>>,
        body: Option<Arc<str>>,
    },
}

impl HttpClient {
    /// `POST` with `body`, or `GET` without one.
    fn new(
        load: LoadClient,
        base: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> anyhow::Result<HttpClient> {
        let method = if body.is_some() { "POST" } else { "GET" };
        let mut headers = headers.to_vec();
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        Ok(match load {
            LoadClient::Raw => HttpClient::Raw(Arc::new(tokio::sync::Mutex::new(Http1::new(
                base,
                method,
                path,
                &headers,
                body.map(str::as_bytes),
            )?))),
            LoadClient::Reqwest => HttpClient::Reqwest {
                http: reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .context("the HTTP client")?,
                url: format!("{base}{path}"),
                headers: Arc::new(
                    headers
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                        .collect(),
                ),
                body: body.map(Into::into),
            },
        })
    }

    /// Sends the request with `extra` headers; the answer's body when its status is
    /// `expected`, else an error naming status and body. `parse` turns the body into what the
    /// caller needs (nothing, for most scenarios: the status says it all).
    async fn call<T>(
        &self,
        extra: &[(&str, &str)],
        expected: u16,
        parse: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, String> {
        let check = |status: u16, body: &[u8]| {
            if status == expected {
                parse(body)
            } else {
                Err(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                ))
            }
        };
        match self {
            HttpClient::Raw(client) => {
                let mut client = client.lock().await;
                let answer = client.send(extra).await.map_err(|e| e.to_string())?;
                check(answer.status, answer.body)
            }
            HttpClient::Reqwest {
                http,
                url,
                headers,
                body,
            } => {
                let mut request = match body {
                    Some(body) => http.post(url).body(body.to_string()),
                    None => http.get(url),
                };
                for (name, value) in headers.iter() {
                    request = request.header(name, value);
                }
                for (name, value) in extra {
                    request = request.header(*name, *value);
                }
                let response = request.send().await.map_err(|e| e.to_string())?;
                let status = response.status().as_u16();
                let bytes = response.bytes().await.map_err(|e| e.to_string())?;
                check(status, &bytes)
            }
        }
    }
}

/// One client of bursar's API per task, all against `server` with alice's token.
fn api_clients(
    load: LoadClient,
    server: &Server,
    path: &str,
    body: Option<&Value>,
    n: usize,
) -> anyhow::Result<Arc<Vec<HttpClient>>> {
    let body = body.map(Value::to_string);
    (0..n)
        .map(|_| {
            HttpClient::new(
                load,
                &server.url,
                path,
                &[("Authorization", &server.bearer)],
                body.as_deref(),
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(Arc::new)
}

/// Any body at all.
fn ignore(_: &[u8]) -> Result<(), String> {
    Ok(())
}

// --- local scenarios -----------------------------------------------------------------------------

fn run_local(
    rts: &Runtimes,
    args: &Args,
    scenario: Scenario,
    run: usize,
) -> anyhow::Result<Summary> {
    let server = start_server(
        &rts.server,
        &format!("{scenario:?}-{run}"),
        Forwarding::Stub(Duration::from_millis(args.stub_delay_ms)),
        None,
        false,
    )?;
    let job = job_request(false);
    let (path, body, expected) = match scenario {
        Scenario::Healthz => ("/healthz", None, 200),
        Scenario::Quotes => ("/v1/quotes", Some(&job), 200),
        _ => ("/v1/jobs", Some(&job), 201),
    };
    let clients = api_clients(args.load_client, &server, path, body, args.clients)?;
    let submit = scenario == Scenario::AdmitStub;
    let load = |seconds: u64| {
        let clients = clients.clone();
        drive(
            &rts.client,
            args.clients,
            Budget::Until(Instant::now() + Duration::from_secs(seconds)),
            move |client, _| {
                let c = clients[client].clone();
                async move {
                    match submit {
                        true => {
                            let key = idempotency_key().expect("an idempotency key");
                            c.call(&[("Idempotency-Key", &key)], expected, ignore).await
                        }
                        false => c.call(&[], expected, ignore).await,
                    }
                }
            },
        )
    };
    let warm = load(args.warmup).summary();
    if warm.ok == 0 && args.warmup > 0 {
        bail!("no request succeeded while warming up: {}", warm.line());
    }
    let summary = load(args.seconds).summary();
    server.stop(&rts.server)?;
    Ok(summary)
}

// --- Slurm scenarios -----------------------------------------------------------------------------

/// The dev stack's onprem slurmrestd and its JWT key.
struct SlurmTarget {
    url: String,
    key_file: PathBuf,
}

impl SlurmTarget {
    /// Reads `BURSAR_DEV_ONPREM_REST` and `BURSAR_DEV_JWT_KEY` from the env file.
    fn from_env_file(path: &Path) -> anyhow::Result<SlurmTarget> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read {} (start the dev stack: sudo deploy/dev/up.sh)",
                path.display()
            )
        })?;
        let mut vars = BTreeMap::new();
        for line in text.lines() {
            let Some((key, value)) = line
                .trim()
                .strip_prefix("export ")
                .and_then(|r| r.split_once('='))
            else {
                continue;
            };
            let value = value.split('#').next().unwrap_or(value).trim();
            vars.insert(key.to_string(), value.trim_matches('"').to_string());
        }
        let var = |key: &str| {
            vars.get(key)
                .cloned()
                .ok_or_else(|| anyhow!("{key} is not in {}", path.display()))
        };
        Ok(SlurmTarget {
            url: var("BURSAR_DEV_ONPREM_REST")?,
            key_file: var("BURSAR_DEV_JWT_KEY")?.into(),
        })
    }

    /// A client configured as bursar's forwarder configures it (`forwarders_from_config`):
    /// tokens minted per user from the key, five-minute lifetime, v0.0.38, 30 s per call.
    fn client(&self) -> anyhow::Result<SlurmRestClient> {
        let mut config = SlurmRestConfig::new(
            self.url.clone(),
            "onprem",
            SlurmAuth::JwtKey {
                key_file: self.key_file.clone(),
                user: "slurm".to_string(),
                lifetime: Duration::from_secs(300),
            },
        );
        config.api = ApiSelection::Fixed(ApiVersion::V0_0_38);
        SlurmRestClient::new(config).context("the slurmrestd client")
    }
}

impl SlurmTarget {
    /// `n` load clients that submit `submission` as alice straight to slurmrestd, as
    /// [`SlurmRestClient::submit_job`] would send it (v0.0.38 body, a token minted from the
    /// cluster's key for alice, five minutes).
    fn raw_clients(
        &self,
        submission: &JobSubmission,
        n: usize,
    ) -> anyhow::Result<Arc<Vec<HttpClient>>> {
        let version = ApiVersion::V0_0_38;
        let body = submit_body(version, submission)
            .map_err(|e| anyhow!("{e}"))?
            .to_string();
        let key = std::fs::read(&self.key_file)
            .with_context(|| format!("reading {}", self.key_file.display()))?;
        let now = chrono::Utc::now().timestamp();
        let token = mint_token(
            &key,
            &SlurmClaims {
                sun: "alice".to_string(),
                iat: now,
                exp: now + 300,
            },
        )
        .map_err(|e| anyhow!("{e}"))?;
        let path = format!("/slurm/{}/job/submit", version.as_str());
        (0..n)
            .map(|_| {
                HttpClient::new(
                    LoadClient::Raw,
                    &self.url,
                    &path,
                    &[
                        ("X-SLURM-USER-NAME", "alice"),
                        ("X-SLURM-USER-TOKEN", token.expose_secret()),
                        ("Accept", "application/json"),
                    ],
                    Some(&body),
                )
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Arc::new)
    }
}

/// The submission bursar forwards for [`job_request`] (onprem, batch, one minute, as alice).
fn direct_submission(held: bool) -> anyhow::Result<JobSubmission> {
    let request: JobRequest = serde_json::from_value(job_request(held))?;
    let job = ForwardJob {
        cluster: "onprem".to_string(),
        user: "alice".to_string(),
        account: "physics".to_string(),
        partition: "batch".to_string(),
        qos: None,
        time_limit_min: 1,
        working_dir: "/tmp".to_string(),
        request,
    };
    slurm_submission(&job).map_err(|e| anyhow!("{e}"))
}

/// How the baseline reaches slurmrestd.
enum Direct {
    /// One [`Http1`] per client, each with alice's token and the submission's body.
    Raw(Arc<Vec<HttpClient>>),
    /// bursar's own slurmrestd client, shared by the clients as the forwarder shares it.
    Client(Arc<SlurmRestClient>),
}

/// The job id in slurmrestd's answer to a submission. 22.05 lists a held job's state as an
/// error beside its id (`Job is in held state, pending scheduler release`, 2042): an answer
/// with a `job_id` is a submission.
fn slurm_job_id(body: &[u8]) -> Result<u64, String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    answer["job_id"]
        .as_u64()
        .ok_or_else(|| format!("no job id in {answer}"))
}

/// The Slurm scenarios of one run (`scenarios`: one or both), block by block: each submits
/// `--slurm-jobs` jobs in `--slurm-blocks` blocks, the scenarios taking turns (on even runs
/// the other one first), after one warm-up job per client each. Then every job is cancelled.
fn run_slurm(
    rts: &Runtimes,
    args: &Args,
    scenarios: &[Scenario],
    run: usize,
    slurm: &SlurmTarget,
) -> anyhow::Result<Vec<Summary>> {
    let submitted: Arc<Mutex<Vec<u64>>> = Arc::default();
    let note = {
        let submitted = submitted.clone();
        move |id: u64| {
            submitted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id);
        }
    };
    // One bursar serves the whole run, as a server in service does: its ledger, caches and
    // threads carry over from block to block (a server started afresh for each block would
    // spend part of every block growing a new database and write-ahead log). Each block
    // starts its own clients and ends them, and bursar's connections to slurmrestd are
    // renewed at the end of each of its blocks: slurmrestd serves a limited number of
    // connections, and one side's idle keep-alive connections must not take them from the
    // other. Its ledger is primed first ([`prime`]): a server in service writes over a
    // write-ahead log at its working size, not into a new one. One warm-up job per client
    // first: every connection (client → bursar → slurmrestd, or client → slurmrestd) open
    // and alice's token minted before the measured jobs.
    let warmup_jobs = u64::try_from(args.clients).unwrap_or(u64::MAX);
    let held = !args.slurm_runnable;
    let submission = Arc::new(direct_submission(held)?);
    let server = if scenarios.contains(&Scenario::AdmitSlurm) {
        let server = start_server(
            &rts.server,
            &format!("slurm-{run}"),
            Forwarding::Config,
            Some(slurm),
            args.bare_proxy,
        )?;
        prime(&rts.server, &server)?;
        Some(server)
    } else {
        None
    };
    let block = |scenario: Scenario, n: u64| -> anyhow::Result<Measured> {
        let server = match scenario {
            Scenario::AdmitSlurm => server.as_ref(),
            _ => None,
        };
        let bursar = match server {
            Some(server) => Some(api_clients(
                args.load_client,
                server,
                "/v1/jobs",
                Some(&job_request(held)),
                args.clients,
            )?),
            None => None,
        };
        let direct = match args.load_client {
            LoadClient::Raw => Direct::Raw(slurm.raw_clients(&submission, args.clients)?),
            LoadClient::Reqwest => Direct::Client(Arc::new(slurm.client()?)),
        };
        let load = |n: u64| -> Measured {
            let note = note.clone();
            match (&bursar, &direct) {
                (Some(clients), _) => {
                    let clients = clients.clone();
                    drive(
                        &rts.client,
                        args.clients,
                        Budget::requests(n),
                        move |client, _| {
                            let c = clients[client].clone();
                            let note = note.clone();
                            let key = idempotency_key().expect("an idempotency key");
                            async move {
                                let id = c
                                    .call(&[("Idempotency-Key", &key)], 201, |body| {
                                        let answer: Value = serde_json::from_slice(body)
                                            .map_err(|e| format!("the answer is not JSON: {e}"))?;
                                        answer["cluster_job_id"]
                                            .as_str()
                                            .and_then(|id| id.parse().ok())
                                            .ok_or_else(|| format!("no Slurm job id in {answer}"))
                                    })
                                    .await?;
                                note(id);
                                Ok(())
                            }
                        },
                    )
                }
                (None, Direct::Raw(clients)) => {
                    let clients = clients.clone();
                    drive(
                        &rts.client,
                        args.clients,
                        Budget::requests(n),
                        move |client, _| {
                            let c = clients[client].clone();
                            let note = note.clone();
                            async move {
                                let id = c.call(&[], 200, slurm_job_id).await?;
                                note(id);
                                Ok(())
                            }
                        },
                    )
                }
                (None, Direct::Client(client)) => {
                    let client = client.clone();
                    let submission = submission.clone();
                    drive(
                        &rts.client,
                        args.clients,
                        Budget::requests(n),
                        move |_, _| {
                            let client = client.clone();
                            let submission = submission.clone();
                            let note = note.clone();
                            async move {
                                let job = client
                                    .submit_job("alice", &submission)
                                    .await
                                    .map_err(|e| e.to_string())?;
                                note(job.job_id);
                                Ok(())
                            }
                        },
                    )
                }
            }
        };
        let warm = load(warmup_jobs).summary();
        if warm.ok == 0 {
            bail!(
                "{}: no warm-up job was accepted: {}",
                scenario.label(),
                warm.line()
            );
        }
        let measured = load(n);
        drop(bursar);
        if let Some(server) = server {
            server.end_block(&rts.server)?;
        }
        Ok(measured)
    };
    let mut turn: Vec<Scenario> = scenarios.to_vec();
    if run.is_multiple_of(2) {
        turn.reverse();
    }
    let blocks = args.slurm_blocks.max(1);
    let mut measured: Vec<Vec<Measured>> = scenarios.iter().map(|_| Vec::new()).collect();
    for b in 0..blocks {
        // The jobs of a scenario, spread over its blocks as evenly as integers allow.
        let n = args.slurm_jobs * (b + 1) / blocks - args.slurm_jobs * b / blocks;
        for &scenario in &turn {
            let m = block(scenario, n).context(scenario.label())?;
            let i = scenarios.iter().position(|&s| s == scenario).unwrap_or(0);
            measured[i].push(m);
        }
    }
    if let Some(server) = server {
        server.stop(&rts.server)?;
    }
    let ids = std::mem::take(&mut *submitted.lock().unwrap_or_else(PoisonError::into_inner));
    cancel_all(rts, slurm, &ids, Duration::from_secs(args.slurm_settle))?;
    Ok(measured
        .into_iter()
        .map(|blocks| Measured::merge(blocks).summary())
        .collect())
}

/// Cancels every job the run submitted (a job that already ended is fine), then waits
/// `settle` so that slurmctld has purged them (it keeps ended jobs for `MinJobAge`) and the
/// next run meets the same, empty controller.
fn cancel_all(
    rts: &Runtimes,
    slurm: &SlurmTarget,
    ids: &[u64],
    settle: Duration,
) -> anyhow::Result<()> {
    let client = Arc::new(slurm.client()?);
    let failures = rts.client.block_on(async {
        let mut failures = Vec::new();
        for chunk in ids.chunks(16) {
            let calls: Vec<_> = chunk
                .iter()
                .map(|&id| {
                    let client = client.clone();
                    tokio::spawn(async move { (id, client.cancel_job("alice", id).await) })
                })
                .collect();
            for call in calls {
                match call.await {
                    Ok((_, Ok(()))) => {}
                    // Gone already: ended and purged, or done.
                    Ok((_, Err(e)))
                        if e.slurm_error_number()
                            .is_some_and(|n| n == 2017 || n == 2021) => {}
                    Ok((id, Err(e))) => failures.push(format!("job {id}: {e}")),
                    Err(e) => failures.push(format!("a cancel task: {e}")),
                }
            }
        }
        tokio::time::sleep(settle).await;
        failures
    });
    eprintln!("  cancelled {} jobs", ids.len() - failures.len());
    if let Some(first) = failures.first() {
        bail!(
            "{} jobs could not be cancelled, e.g. {first}",
            failures.len()
        );
    }
    Ok(())
}

// --- the report ------------------------------------------------------------------------------------

/// The middle value (the lower middle of an even count).
fn median<T: Ord + Copy + Default>(mut values: Vec<T>) -> T {
    values.sort_unstable();
    values
        .get(values.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}

/// Markdown: one row per scenario (medians over the runs), then bursar's overhead on a
/// slurmrestd submission when both Slurm scenarios ran.
fn report(args: &Args, results: &BTreeMap<usize, (Scenario, Vec<Summary>)>) -> String {
    let mut out = String::new();
    let mut setup = vec![format!("{} clients, median of each column", args.clients)];
    if args.scenarios.iter().any(|s| !s.is_slurm()) {
        setup.push(format!(
            "local scenarios: {} runs of {} s after {} s of warm-up",
            args.runs, args.seconds, args.warmup
        ));
    }
    if args.scenarios.iter().any(|s| s.is_slurm()) {
        setup.push(format!(
            "Slurm scenarios: {} runs of {} {} jobs each in {} alternating blocks, after {} \
             warm-up jobs a block",
            args.slurm_runs.unwrap_or(args.runs),
            args.slurm_jobs,
            if args.slurm_runnable {
                "runnable"
            } else {
                "held"
            },
            args.slurm_blocks,
            args.clients
        ));
    }
    let _ = writeln!(out, "\n{}.\n", setup.join("; "));
    let _ = writeln!(
        out,
        "| scenario | requests/s | p50 ms | p99 ms | max ms | bursar CPU µs/request | \
         other processes' CPU | ok | errors |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut medians: Vec<(Scenario, Summary)> = Vec::new();
    for (scenario, runs) in results.values() {
        let col = |f: fn(&Summary) -> u64| median(runs.iter().map(f).collect());
        let opt = |f: fn(&Summary) -> Option<u64>| {
            let values: Vec<u64> = runs.iter().filter_map(f).collect();
            (!values.is_empty()).then(|| median(values))
        };
        let m = Summary {
            ok: col(|s| s.ok),
            errors: col(|s| s.errors),
            per_second: col(|s| s.per_second),
            p50_ns: col(|s| s.p50_ns),
            p99_ns: col(|s| s.p99_ns),
            max_ns: col(|s| s.max_ns),
            mean_ns: col(|s| s.mean_ns),
            server_cpu_ns: opt(|s| s.server_cpu_ns),
            others_permille: opt(|s| s.others_permille),
            first_error: runs.iter().find_map(|s| s.first_error.clone()),
        };
        // The baseline runs no bursar: its "bursar CPU" is the idle server runtime.
        let cpu = match (scenario, m.server_cpu_ns) {
            (Scenario::DirectSlurm, _) | (_, None) => "–".to_string(),
            (_, Some(ns)) => (ns / 1_000).to_string(),
        };
        let others = m
            .others_permille
            .map_or_else(|| "–".to_string(), |p| format!("{}.{}%", p / 10, p % 10));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {cpu} | {others} | {} | {} |",
            args.label(*scenario),
            m.per_second,
            ms(m.p50_ns),
            ms(m.p99_ns),
            ms(m.max_ns),
            m.ok,
            m.errors
        );
        medians.push((*scenario, m));
    }
    let median_of = |s: Scenario| medians.iter().find(|(x, _)| *x == s).map(|(_, m)| m);
    let mut targets = Vec::new();
    if let Some(q) = median_of(Scenario::Quotes) {
        targets.push(format!(
            "≥ 20,000 quotes/s: {}/s, {}",
            q.per_second,
            verdict(q.per_second >= 20_000 && q.errors == 0)
        ));
    }
    if let Some(a) = median_of(Scenario::AdmitStub).filter(|_| args.stub_delay_ms == 0) {
        targets.push(format!(
            "≥ 5,000 admissions/s with p99 < 10 ms (stub forwarder): {}/s, p99 {} ms, {}",
            a.per_second,
            ms(a.p99_ns),
            verdict(a.per_second >= 5_000 && a.p99_ns < 10_000_000 && a.errors == 0)
        ));
    }
    let runs_of = |s: Scenario| results.values().find(|(x, _)| *x == s).map(|(_, r)| r);
    if let (Some(bursar), Some(direct)) = (
        runs_of(Scenario::AdmitSlurm),
        runs_of(Scenario::DirectSlurm),
    ) {
        // Each run through bursar against the direct one it alternated with, then the median
        // of those changes: the controller's drift between runs, much larger than bursar's
        // share, cancels out of each pair.
        let _ = writeln!(
            out,
            "\nbursar against the direct submissions of the same run:\n\n\
             | run | through bursar | directly | throughput | p50 | mean |\n\
             |---|---|---|---:|---:|---:|"
        );
        let (mut tput, mut p50, mut mean) = (Vec::new(), Vec::new(), Vec::new());
        for (n, (b, d)) in bursar.iter().zip(direct).enumerate() {
            let _ = writeln!(
                out,
                "| {} | {}/s, p50 {} ms, mean {} ms | {}/s, p50 {} ms, mean {} ms | {} | {} | {} |",
                n + 1,
                b.per_second,
                ms(b.p50_ns),
                ms(b.mean_ns),
                d.per_second,
                ms(d.p50_ns),
                ms(d.mean_ns),
                change(b.per_second, d.per_second),
                change(b.p50_ns, d.p50_ns),
                change(b.mean_ns, d.mean_ns)
            );
            tput.push(permille(b.per_second, d.per_second));
            p50.push(permille(b.p50_ns, d.p50_ns));
            mean.push(permille(b.mean_ns, d.mean_ns));
        }
        let (tput, p50, mean) = (median(tput), median(p50), median(mean));
        let errors: u64 = bursar.iter().map(|s| s.errors).sum();
        let _ = writeln!(
            out,
            "\nMedian over the runs: throughput {}, p50 {}, mean latency {}.",
            tenths(tput),
            tenths(p50),
            tenths(mean)
        );
        // "Adds < 10%": to the latency of a submission, and as much throughput taken away.
        if args.bare_proxy {
            targets.push(format!(
                "a bare proxy (--bare-proxy: not bursar, no verdict) adds (median of {} runs): \
                 p50 {}, mean {}, throughput {}",
                bursar.len().min(direct.len()),
                tenths(p50),
                tenths(mean),
                tenths(tput),
            ));
        } else {
            targets.push(format!(
                "bursar adds < 10% to an end-to-end slurmrestd submission (median of {} runs): \
             p50 {}, mean {}, throughput {}, {}",
                bursar.len().min(direct.len()),
                tenths(p50),
                tenths(mean),
                tenths(tput),
                verdict(p50 < 100 && mean < 100 && tput > -100 && errors == 0)
            ));
        }
    }
    if !targets.is_empty() {
        let _ = writeln!(out);
        for t in targets {
            let _ = writeln!(out, "- {t}");
        }
    }
    for (scenario, m) in &medians {
        if let Some(e) = &m.first_error {
            let _ = writeln!(out, "\n{}: first error: {e}", scenario.label());
        }
    }
    out
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// `+4.2%` / `-1.0%`: `value` against `base`, to a tenth of a percent.
fn change(value: u64, base: u64) -> String {
    if base == 0 {
        return "n/a".to_string();
    }
    tenths(permille(value, base))
}

/// `value` against `base` in tenths of a percent (‰), rounded toward zero.
fn permille(value: u64, base: u64) -> i64 {
    if base == 0 {
        return 0;
    }
    let (v, b) = (i128::from(value), i128::from(base));
    i64::try_from((v - b) * 1000 / b).unwrap_or(i64::MAX)
}

/// ‰ as `+4.2%` / `-1.0%`.
fn tenths(permille: i64) -> String {
    let sign = if permille < 0 { "-" } else { "+" };
    format!("{sign}{}.{}%", permille.abs() / 10, permille.abs() % 10)
}
