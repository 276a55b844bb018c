//! slurmrestd client: accounting jobs as [`UsageRecord`]s, and job submit / cancel / ping, for
//! slurmrestd OpenAPI v0.0.38 (Slurm 22.05) and v0.0.40 to v0.0.45 (Slurm 23.11 and later).
//!
//! ```no_run
//! # async fn run() -> Result<(), bursar_collectors::slurmrestd::RestError> {
//! use std::time::Duration;
//! use bursar_collectors::slurmrestd::{SlurmAuth, SlurmRestClient, SlurmRestConfig, Window};
//!
//! let auth = SlurmAuth::JwtKey {
//!     key_file: "/etc/bursar/onprem.jwt.key".into(),
//!     user: "slurm".into(),
//!     lifetime: Duration::from_secs(300),
//! };
//! let client = SlurmRestClient::new(SlurmRestConfig::new("http://127.0.0.1:6820", "onprem", auth))?;
//! let fetched = client.fetch_jobs(Window::new(1_795_300_000, 1_795_400_000)).await?;
//! for record in &fetched.records { /* price it */ }
//! for bad in &fetched.quarantined { eprintln!("{}", bad.reason); }
//! # Ok(()) }
//! ```
//!
//! # Versions
//!
//! | | v0.0.38 (22.05) | v0.0.40 – v0.0.45 (data_parser) |
//! |---|---|---|
//! | jobs path | `/slurmdb/v0.0.38/jobs` | `/slurmdb/v0.0.4x/jobs/` |
//! | window | `start_time`/`end_time` as `YYYY-MM-DDTHH:MM:SS` in the server's zone (epoch is refused; [`LegacyTimes`]) | v0.0.40/41: `uts<epoch>` (their parsers read a query's time only as text, and a bare epoch is no text `parse_time()` knows: 422, Slurm ticket 21214, fixed for v0.0.42 only); v0.0.42+: epoch seconds (the specs' "UNIX timestamp") |
//! | flags sent | `skip_steps=true` (the server forces DUPLICATES and NO_TRUNC; unknown parameters are a 500) | `skip_steps`, `show_duplicates`, `disable_truncate_usage_time`, `scheduler_unset`, all `true`: passing any flag drops the server's DUPLICATES/NO_TRUNC defaults, so those two must be explicit, and on 23.11 – 24.05.3 also its "any scheduling" default, which leaves only jobs that no scheduler started (no job at all, in practice; Slurm ticket 20639) unless `scheduler_unset` asks for every job |
//! | numbers | plain, `null` for NO_VAL/INFINITE | `{set, infinite, number}` (`time.limit`, `array.task_id`, `het.job_offset`) |
//! | `state.current` | `"COMPLETED"` | `["COMPLETED"]`, `["PENDING","REQUEUED"]`, … |
//! | submit body | `script` top-level, `environment` an object | `job.script`, `environment` a `K=V` list, `time_limit`/`memory_per_node` as `{set,…}` |
//!
//! v0.0.41 has v0.0.40's job object; v0.0.42 adds `time.planned`, `qosreq`, `restart_cnt`,
//! `stdout…`, and answers a cancel with per-job `status[]`. v0.0.43–v0.0.45 keep v0.0.42's
//! shape for every field bursar reads or sends (the job list, the submit body and answer, the
//! cancel answer, errors): v0.0.43 adds `reservation.requested` and `segment_size`, v0.0.44
//! the state flag `EXPEDITING` (transient, like `COMPLETING`), v0.0.45 `sluid` and a ping
//! without `pinged`/`mode`. [`ApiSelection::Auto`] reads
//! `GET /openapi/v3` (which needs a token too) once and takes the highest supported version
//! with a `/slurmdb/vX/jobs` path.
//!
//! # Mapping a job to a [`UsageRecord`]
//!
//! `job_id` is the raw id (array tasks and het components each have their own); `display_id`
//! is `{array.job_id}_{array.task_id}`, `{het.job_id}+{het.job_offset}` or the raw id;
//! `cluster` is the top-level field (22.05's `association.cluster` is wrong); times are epoch
//! seconds with 0/unset meaning "none"; `elapsed_us` is `time.elapsed` seconds × 10⁶; the
//! allocation is `tres.allocated[]` (`type` or `type/name`: `gres/gpu`, `gres/gpu:h100`; `mem`
//! in MB; entries without a count, like 22.05's `energy` (`null`; v0.0.40+ print its
//! NO_VAL64 as `-2`), and zero counts left out, as sacct does); `time.limit` unset/infinite is `None`; `""` is `None` for partition, QOS and name.
//! The state rule is documented on the job reader: flags that end a run (REQUEUED, RESIZING,
//! REVOKED) win as in Slurm's `job_state_string()`, transient flags (COMPLETING, …) yield to
//! the base state. `exit_code` is ignored: ≤ v0.0.39 report `SUCCESS`/0 for every job.
//!
//! A job that cannot be mapped is returned in [`FetchedJobs::quarantined`] with its JSON and a
//! reason naming the field; the other jobs still come through.
//!
//! # Quirks handled
//!
//! - `cluster=` is always sent: with any other parameter slurmrestd returns only its own
//!   cluster, and values are percent-encoded (22.05 answers a raw `:` or `,` with
//!   400 "Unable to parse query.").
//! - Windows longer than `max_window` are fetched as consecutive slices; a job overlapping two
//!   slices is kept once per call (`(cluster, job_id, submit)`, the later copy wins).
//! - 22.05 answers an invalid, expired or wrong-key token with HTTP 500 "slurmctld config is
//!   unable to load" on `/slurm/…` and with HTTP **200**, `jobs: []` and errors[] "Protocol
//!   authentication error" (1007) on `/slurmdb/…`: both are [`RestError::Auth`]. Any errors[]
//!   entry in a 200 jobs answer other than "Nothing found" (9003) is an error, so a failed query
//!   never looks like an empty window.
//! - A job cancelled before it became eligible (`--begin` in the future) never matches a time
//!   window on 22.05 (nor `sacct -S/-E`); it cost nothing.
//! - Redirects are not followed: the token headers must not reach another host.
//! - `GET /openapi/v3` wants a token but does not verify it (a wrong-key token passes on
//!   22.05.8): a successful discovery proves nothing about the key; `ping` does.
//! - A misspelt cluster name is not an error: slurmrestd answers "Nothing found".
//!
//! Checked against a live 22.05.8 pair of clusters (`deploy/dev`): discovery, ping, every
//! record equal field by field to the sacct reader's for the same window, one-minute slices and
//! `uts` times giving the same records, both bad-token answers, a v0.0.38 submit with
//! `nodes: [1, 1]`, `gres` and a QOS, cancel by another user refused (2002), cancel by the owner
//! (also of an already-cancelled job) accepted. v0.0.40–45 are checked against the published
//! schemas only.

mod auth;
mod error;
mod jobs;
mod submit;
mod version;
mod window;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bursar_pricing::UsageRecord;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use secrecy::ExposeSecret;
use serde_json::Value;
use tokio::sync::OnceCell;
use url::Url;

pub use auth::{mint_token, SlurmAuth, SlurmClaims};
pub use error::RestError;
pub use jobs::RawQuarantine;
pub use submit::{
    argv_breaks, argv_refusal, gres_disable_misspelt, mail_events, min_cpus_allocated, submit_body,
    unsupported_at, ControllerPing, GpuRequest, JobSubmission, KillWarning, LiveJob, MemBinding,
    Ping, Sharing, SubmittedJob,
};
pub use version::{ApiSelection, ApiVersion, UnknownApiVersion};
pub use window::{LegacyTimes, ServerTimeZone, UnknownServerZone, Window};

use auth::Credentials;
use error::http_error;

/// How to reach and use one cluster's slurmrestd.
#[derive(Debug, Clone)]
pub struct SlurmRestConfig {
    /// `http://127.0.0.1:6820`, or behind a proxy `https://host/slurm/` (a path prefix is kept).
    pub base_url: String,
    /// The Slurm cluster name, sent as `cluster=` on every accounting query.
    pub cluster: String,
    pub api: ApiSelection,
    pub auth: SlurmAuth,
    /// The whole call: connecting, sending, and reading the full answer.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// The longest window one accounting call covers; longer windows are sliced.
    pub max_window: Duration,
    pub user_agent: String,
    /// How v0.0.38 query times are written (the server's zone; default UTC).
    pub legacy_times: LegacyTimes,
    /// PEM certificates of the authorities an `https` slurmrestd's certificate is checked
    /// against, instead of the public (webpki) roots: a site's own CA. `None`: public roots.
    pub ca_file: Option<PathBuf>,
}

impl SlurmRestConfig {
    /// Defaults: discover the version, 30 s per call, 5 s to connect, one-day slices, v0.0.38
    /// times in UTC.
    pub fn new(
        base_url: impl Into<String>,
        cluster: impl Into<String>,
        auth: SlurmAuth,
    ) -> SlurmRestConfig {
        SlurmRestConfig {
            base_url: base_url.into(),
            cluster: cluster.into(),
            api: ApiSelection::Auto,
            auth,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_window: Duration::from_secs(86_400),
            user_agent: concat!("bursar/", env!("CARGO_PKG_VERSION")).to_string(),
            legacy_times: LegacyTimes::default(),
            ca_file: None,
        }
    }
}

/// What one `fetch_jobs` call found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchedJobs {
    /// One per `(cluster, job_id, submit)`, in the order first seen.
    pub records: Vec<UsageRecord>,
    pub quarantined: Vec<RawQuarantine>,
}

/// The HTTP client: hyper's pooled client over TCP or rustls (webpki roots, ring). Not
/// `reqwest`: on the submission path its per-request work (the URL parsed twice, its redirect
/// layer, header maps built anew) cost about as much CPU as the rest of the call.
type Http = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for one cluster's slurmrestd. Cheap to share (`&self` everywhere); tokens are
/// minted and cached inside.
#[derive(Debug)]
pub struct SlurmRestClient {
    http: Http,
    user_agent: HeaderValue,
    base: Url,
    cluster: String,
    selection: ApiSelection,
    discovered: OnceCell<ApiVersion>,
    /// The Slurm release a ping named (`22.05.8`), asked once (at `bursar serve`'s start, or
    /// when a submission needs it).
    release: OnceCell<Option<String>>,
    credentials: Credentials,
    timeout: Duration,
    connect_timeout: Duration,
    max_window: Duration,
    legacy_times: LegacyTimes,
}

/// The state asked for in each slice's second accounting call (see
/// [`SlurmRestClient::fetch_jobs`]).
const CANCELLED: &str = "CANCELLED";

impl SlurmRestClient {
    /// Checks the configuration and reads the key file; makes no call.
    pub fn new(config: SlurmRestConfig) -> Result<SlurmRestClient, RestError> {
        let base = Url::parse(config.base_url.trim())
            .map_err(|e| RestError::Config(format!("base URL {:?}: {e}", config.base_url)))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(RestError::Config(format!(
                "base URL {:?} is not an http(s) URL",
                config.base_url
            )));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(RestError::Config(format!(
                "base URL {:?} has a query or fragment",
                config.base_url
            )));
        }
        let cluster = config.cluster.trim();
        if cluster.is_empty() || cluster.contains(',') {
            return Err(RestError::Config(format!(
                "cluster name {:?} is empty or a list",
                config.cluster
            )));
        }
        if config.timeout.is_zero() || config.connect_timeout.is_zero() {
            return Err(RestError::Config("timeouts must be above zero".into()));
        }
        if config.max_window < Duration::from_secs(60) {
            return Err(RestError::Config(format!(
                "max_window {:?} is below a minute",
                config.max_window
            )));
        }
        let credentials = Credentials::load(&config.auth)?;
        let user_agent = HeaderValue::from_str(&config.user_agent).map_err(|_| {
            RestError::Config(format!("user agent {:?} is not valid", config.user_agent))
        })?;
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(config.connect_timeout));
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = hyper_rustls::HttpsConnectorBuilder::new();
        let tls = match &config.ca_file {
            None => tls
                .with_provider_and_webpki_roots(provider)
                .map_err(|e| RestError::Config(format!("setting up TLS: {e}")))?,
            Some(file) => {
                if base.scheme() != "https" {
                    return Err(RestError::Config(format!(
                        "ca_file {} is set but base URL {:?} is not https",
                        file.display(),
                        config.base_url
                    )));
                }
                tls.with_tls_config(tls_with_ca_file(provider, file)?)
            }
        };
        let connector = tls.https_or_http().enable_http1().wrap_connector(tcp);
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(SlurmRestClient {
            http,
            user_agent,
            base,
            cluster: cluster.to_string(),
            selection: config.api,
            discovered: OnceCell::new(),
            release: OnceCell::new(),
            credentials,
            timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            max_window: config.max_window,
            legacy_times: config.legacy_times,
        })
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The version in use: the configured one, or the one discovered (once) from
    /// `GET /openapi/v3`.
    pub async fn api_version(&self) -> Result<ApiVersion, RestError> {
        match self.selection {
            ApiSelection::Fixed(version) => Ok(version),
            ApiSelection::Auto => self
                .discovered
                .get_or_try_init(|| self.discover())
                .await
                .copied(),
        }
    }

    /// The version in use when it is known without asking: the configured one, or the one
    /// already discovered.
    pub fn known_api_version(&self) -> Option<ApiVersion> {
        match self.selection {
            ApiSelection::Fixed(version) => Some(version),
            ApiSelection::Auto => self.discovered.get().copied(),
        }
    }

    async fn discover(&self) -> Result<ApiVersion, RestError> {
        let user = self.credentials.default_user();
        let (status, body) = self
            .call(Method::GET, self.url("/openapi/v3"), user, None)
            .await?;
        if !(200..300).contains(&status) {
            return Err(http_error(status, &body, user));
        }
        let found = version::discover(&body).map_err(|e| RestError::BadPayload {
            problem: format!("/openapi/v3 is not an OpenAPI document: {e}"),
            excerpt: error::excerpt(&body),
        })?;
        match found.chosen {
            Some(version) => {
                tracing::info!(cluster = %self.cluster, %version, offered = ?found.offered,
                    "slurmrestd API version discovered");
                Ok(version)
            }
            None => Err(RestError::UnsupportedVersion {
                offered: found.offered,
            }),
        }
    }

    /// The URL of one accounting call for `window` (exposed for diagnostics and tests).
    pub fn jobs_url(&self, version: ApiVersion, window: Window) -> Result<Url, RestError> {
        self.jobs_url_in_state(version, window, None)
    }

    /// The URL of one accounting call for `window`, of the jobs in `state` during it when
    /// given (slurmdbd then reads the window as the time the jobs were in that state).
    pub fn jobs_url_in_state(
        &self,
        version: ApiVersion,
        window: Window,
        state: Option<&str>,
    ) -> Result<Url, RestError> {
        let (start, end) = window::time_params(version, self.legacy_times, window)?;
        let mut url = self.url(&version.db_jobs_path());
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("cluster", &self.cluster)
                .append_pair("start_time", &start)
                .append_pair("end_time", &end)
                .append_pair("skip_steps", "true");
            if version.is_data_parser() {
                query
                    .append_pair("show_duplicates", "true")
                    .append_pair("disable_truncate_usage_time", "true")
                    .append_pair("scheduler_unset", "true");
            }
            if let Some(state) = state {
                query.append_pair("state", state);
            }
        }
        Ok(url)
    }

    /// Every job record of the cluster that was eligible or running during `window`, or was
    /// cancelled during it, in slices of at most `max_window`, each job once. Running and
    /// pending jobs are included (their state says so); a failed slice fails the call, since a
    /// partial window must not advance a cursor.
    ///
    /// Each slice is two calls. slurmdbd's window takes a job whose eligible time is before
    /// the window's end and whose end is after its start, so a job cancelled before it became
    /// eligible — held (`--hold`, eligible never), or `--begin` in the future — is in no
    /// window shorter than the stretch from its end to its eligible time, and a held one in
    /// none at all. Asked for `state=CANCELLED`, slurmdbd reads the window as the time the
    /// job was cancelled instead: the second call brings those.
    #[tracing::instrument(level = "debug", skip(self), fields(cluster = %self.cluster))]
    pub async fn fetch_jobs(&self, window: Window) -> Result<FetchedJobs, RestError> {
        if window.end < window.start {
            return Err(RestError::InvalidRequest(format!(
                "window ends ({}) before it starts ({})",
                window.end, window.start
            )));
        }
        let version = self.api_version().await?;
        let user = self.credentials.default_user();
        let mut fetched = FetchedJobs::default();
        let mut index: HashMap<(String, String, i64), usize> = HashMap::new();
        let mut quarantined: HashSet<String> = HashSet::new();
        let calls = window
            .slices(self.max_window)
            .into_iter()
            .flat_map(|slice| [(slice, None), (slice, Some(CANCELLED))]);
        for (slice, state) in calls {
            let url = self.jobs_url_in_state(version, slice, state)?;
            let (status, body) = self.call(Method::GET, url, user, None).await?;
            if !(200..300).contains(&status) {
                return Err(http_error(status, &body, user));
            }
            let page = jobs::parse_page(status, &body, user)?;
            let empty = page.records.is_empty() && page.quarantined.is_empty();
            for warning in &page.warnings {
                if empty && jobs::says_found_nothing(warning) {
                    tracing::debug!(cluster = %self.cluster, warning, "slurmrestd: no job in the slice");
                } else {
                    tracing::warn!(cluster = %self.cluster, warning, "slurmrestd warning");
                }
            }
            for record in page.records {
                let key = (record.cluster.clone(), record.job_id.clone(), record.submit);
                match index.get(&key) {
                    Some(&i) => fetched.records[i] = record,
                    None => {
                        index.insert(key, fetched.records.len());
                        fetched.records.push(record);
                    }
                }
            }
            for bad in page.quarantined {
                if quarantined.insert(bad.raw.clone()) {
                    tracing::warn!(cluster = %self.cluster, reason = %bad.reason,
                        "slurmrestd job quarantined");
                    fetched.quarantined.push(bad);
                }
            }
        }
        Ok(fetched)
    }

    /// Submits a batch job as `as_user`: with key auth, a token is minted with `sun = as_user`;
    /// with a static token, that token (SlurmUser's) is sent with `X-SLURM-USER-NAME: as_user`.
    ///
    /// Not idempotent: after `Timeout` or `Transport` the job may exist.
    #[tracing::instrument(level = "debug", skip(self, job), fields(cluster = %self.cluster))]
    pub async fn submit_job(
        &self,
        as_user: &str,
        job: &JobSubmission,
    ) -> Result<SubmittedJob, RestError> {
        let version = self.api_version().await?;
        let trimmed;
        let refusal = if job.argv.is_empty() {
            None
        } else {
            self.argv_refusal().await?
        };
        let job = match refusal {
            Some(reason) if job.argv.len() > 1 => return Err(RestError::InvalidRequest(reason)),
            // The script's path alone only names the job's command: left out, as for a script
            // sbatch reads from standard input.
            Some(_) => {
                trimmed = JobSubmission {
                    argv: Vec::new(),
                    ..job.clone()
                };
                &trimmed
            }
            None => job,
        };
        let body = submit_body(version, job)?;
        let url = self.url(&version.submit_path());
        let (status, answer) = self.call(Method::POST, url, as_user, Some(&body)).await?;
        // A job id means the job exists, even in an error answer (see `names_created_job`):
        // calling it refused would release the hold of a job that runs.
        if !(200..300).contains(&status) && !submit::names_created_job(&answer) {
            return Err(http_error(status, &answer, as_user));
        }
        let submitted = submit::parse_submitted(status, &answer, as_user)?;
        tracing::info!(cluster = %self.cluster, job_id = submitted.job_id, user = as_user,
            "job submitted through slurmrestd");
        Ok(submitted)
    }

    /// Why this slurmrestd must not be sent a job's `argv` (see [`submit::argv_breaks`]), if
    /// so: at v0.0.38 the Slurm release is asked once (a ping) and remembered.
    pub async fn argv_refusal(&self) -> Result<Option<String>, RestError> {
        let version = self.api_version().await?;
        if version.is_data_parser() {
            return Ok(None);
        }
        let release = self.release().await?;
        Ok(submit::argv_breaks(version, release.as_deref())
            .then(|| submit::argv_refusal(release.as_deref())))
    }

    /// The Slurm release a ping's `meta` names (`22.05.8`; `None` when the answer names none),
    /// asked once and remembered. It is slurmrestd's own, taken for slurmctld's: a site
    /// upgrades slurmrestd no earlier than slurmctld.
    pub async fn release(&self) -> Result<Option<String>, RestError> {
        self.release
            .get_or_try_init(|| async { Ok::<_, RestError>(self.ping().await?.release) })
            .await
            .cloned()
    }

    /// Whether slurmctld allocates a job its `--mincpus` on each node
    /// ([`submit::min_cpus_allocated`]), when known without asking.
    pub fn known_min_cpus_allocated(&self) -> Option<bool> {
        let version = self.known_api_version()?;
        let release = self.release.get().and_then(Option::as_deref);
        submit::min_cpus_allocated(version, release)
    }

    /// [`SlurmRestClient::argv_refusal`] when known without asking; `None` until then.
    /// Why `--gres-flags=disable-binding` cannot be sent here
    /// ([`submit::gres_disable_misspelt`]), once the version is known; while the release is
    /// not, as if it were one that misspells the flag.
    pub fn known_gres_disable_refusal(&self) -> Option<String> {
        let version = self.known_api_version()?;
        let release = self.release.get().cloned().flatten();
        submit::gres_disable_misspelt(version, release.as_deref())
            .then(|| submit::gres_disable_refusal(version, release.as_deref()))
    }

    pub fn known_argv_refusal(&self) -> Option<String> {
        let version = self.known_api_version()?;
        let release = self.release.get()?;
        submit::argv_breaks(version, release.as_deref())
            .then(|| submit::argv_refusal(release.as_deref()))
    }

    /// Cancels a job as `as_user` (`DELETE /slurm/vX/job/{id}`, SIGKILL).
    #[tracing::instrument(level = "debug", skip(self), fields(cluster = %self.cluster))]
    pub async fn cancel_job(&self, as_user: &str, job_id: u64) -> Result<(), RestError> {
        let version = self.api_version().await?;
        let url = self.url(&version.job_path(job_id));
        let (status, answer) = self.call(Method::DELETE, url, as_user, None).await?;
        if !(200..300).contains(&status) {
            return Err(http_error(status, &answer, as_user));
        }
        submit::check_cancelled(status, &answer, as_user)
    }

    /// The states slurmctld gives job `job_id` now (`PENDING`, `RUNNING`, …), asked as the
    /// configured user: one for a job, one per task for a job array (and one for its pending
    /// rest); empty when slurmctld no longer (or never) knew it. Unlike the accounting
    /// database, slurmctld reports held jobs.
    pub async fn job_states(&self, job_id: u64) -> Result<Vec<String>, RestError> {
        Ok(self
            .live_jobs(self.credentials.default_user(), job_id)
            .await?
            .into_iter()
            .map(|job| job.state)
            .collect())
    }

    /// The jobs slurmctld reports now under `job_id`, with their exit codes (see
    /// [`SlurmRestClient::job_states`]), asked as `as_user`: what `sbatch --wait` asks
    /// slurmctld, as the job's owner (with `PrivateData=jobs`, slurmctld shows a user's job to
    /// that user and its operators only).
    pub async fn live_jobs(&self, as_user: &str, job_id: u64) -> Result<Vec<LiveJob>, RestError> {
        let version = self.api_version().await?;
        let user = as_user;
        let url = self.url(&version.job_path(job_id));
        let (status, answer) = self.call(Method::GET, url, user, None).await?;
        // An unknown job is errno 2017, with HTTP 500 (22.05) or 404 (23.11 and later): not a
        // failure here.
        if !(200..300).contains(&status) {
            if submit::names_unknown_job(&answer) {
                return Ok(Vec::new());
            }
            return Err(http_error(status, &answer, user));
        }
        submit::parse_live_jobs(status, &answer, user)
    }

    /// `GET /slurm/vX/ping`: whether slurmrestd, the token and slurmctld all work.
    pub async fn ping(&self) -> Result<Ping, RestError> {
        let version = self.api_version().await?;
        let user = self.credentials.default_user();
        let (status, answer) = self
            .call(Method::GET, self.url(&version.ping_path()), user, None)
            .await?;
        if !(200..300).contains(&status) {
            return Err(http_error(status, &answer, user));
        }
        submit::parse_ping(status, &answer, user)
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let prefix = self.base.path().trim_end_matches('/');
        url.set_path(&format!("{prefix}{path}"));
        url
    }

    /// One authenticated call; the status and the whole body, within the timeouts. Redirects
    /// are not followed (slurmrestd sends none).
    async fn call(
        &self,
        method: Method,
        url: Url,
        user: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>), RestError> {
        let token = self.credentials.token_for(user)?;
        let mut token_header = HeaderValue::from_str(token.expose_secret())
            .map_err(|_| RestError::Config("the token is not a valid header value".into()))?;
        token_header.set_sensitive(true);
        let user_header = HeaderValue::from_str(user)
            .map_err(|_| RestError::InvalidRequest(format!("user name {user:?} is not valid")))?;
        let uri: Uri = url
            .as_str()
            .parse()
            .map_err(|e| RestError::Config(format!("URL {url}: {e}")))?;
        let mut request = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(USER_AGENT, self.user_agent.clone())
            .header("X-SLURM-USER-NAME", user_header)
            .header("X-SLURM-USER-TOKEN", token_header)
            .header(ACCEPT, "application/json");
        let body = match body {
            Some(body) => {
                request = request.header(CONTENT_TYPE, "application/json");
                let bytes = serde_json::to_vec(body)
                    .map_err(|e| RestError::InvalidRequest(format!("the request body: {e}")))?;
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request
            .body(body)
            .map_err(|e| RestError::InvalidRequest(format!("the request: {e}")))?;

        let started = Instant::now();
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| self.transport_error(&url, &e))?;
            let status = response.status().as_u16();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| RestError::Transport {
                    url: url.to_string(),
                    message: format!("reading the answer: {}", error_chain(&e)),
                })?
                .to_bytes();
            Ok::<_, RestError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_elapsed| RestError::Timeout {
                url: url.to_string(),
                timeout: self.timeout,
            })??;
        tracing::debug!(cluster = %self.cluster, %method, url = %url, status,
            bytes = bytes.len(), elapsed_ms = started.elapsed().as_millis() as u64,
            "slurmrestd call");
        Ok((status, bytes.to_vec()))
    }

    fn transport_error(&self, url: &Url, err: &hyper_util::client::legacy::Error) -> RestError {
        let url = url.to_string();
        let message = error_chain(err);
        if err.is_connect() {
            // The connector's own timeout surfaces as a connect error of kind `TimedOut`.
            if timed_out(err) {
                return RestError::Timeout {
                    url,
                    timeout: self.connect_timeout,
                };
            }
            RestError::Unreachable { url, message }
        } else {
            RestError::Transport { url, message }
        }
    }
}

/// Whether an I/O error of kind `TimedOut` is among `err`'s sources.
fn timed_out(err: &dyn std::error::Error) -> bool {
    let mut source = err.source();
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// An error and its sources, `: `-joined (the client's own message alone says little).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A TLS client configuration that trusts the certificates of the PEM file `file` (a site's
/// own certificate authorities) and nothing else.
fn tls_with_ca_file(
    provider: std::sync::Arc<rustls::crypto::CryptoProvider>,
    file: &Path,
) -> Result<rustls::ClientConfig, RestError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let shown = file.display();
    let pem = std::fs::read(file)
        .map_err(|e| RestError::Config(format!("reading ca_file {shown}: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| RestError::Config(format!("ca_file {shown}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| RestError::Config(format!("ca_file {shown}: a certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(RestError::Config(format!(
            "ca_file {shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RestError::Config(format!("setting up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
