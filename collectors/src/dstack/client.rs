//! The HTTP client and the collection calls: listing runs with a keyset cursor, re-polling
//! unfinished runs, reading one run.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bursar_pricing::UsageRecord;
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::error_detail;
use super::number::{format_time, parse_time};
use super::records::{map_run, MapContext, RawQuarantine, RunMapping, RunSummary};
use super::submit::DstackRun;
use super::wire::RunKey;
use super::DstackError;

/// `/api/runs/list` returns at most this many submissions per job (and this is its default):
/// older ones are dropped, so a run with more is re-read with `runs/get`.
pub const LIST_SUBMISSIONS_LIMIT: u32 = 10;
/// The server refuses `limit` above 100 with a 422.
pub const MAX_PAGE_SIZE: u32 = 100;

/// How to reach one dstack project.
#[derive(Clone)]
pub struct DstackConfig {
    /// `http://127.0.0.1:3000` (no trailing `/api`).
    pub base_url: String,
    /// A dstack user token (`Authorization: Bearer`). The user must be a member of `project`
    /// (a global admin sees every project).
    pub token: SecretString,
    /// The dstack project to collect and submit to.
    pub project: String,
    /// The bursar cluster name its records carry.
    pub cluster: String,
    /// For each request, connection and whole answer (headers and body) included.
    pub timeout: Duration,
    /// Runs per `/api/runs/list` page, 1..=100.
    pub page_size: u32,
    /// PEM certificates of the certificate authorities (a site's own) an `https` server's
    /// certificate is checked against, instead of the public roots. `None`: public roots.
    pub ca_file: Option<PathBuf>,
}

impl fmt::Debug for DstackConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DstackConfig")
            .field("base_url", &self.base_url)
            .field("token", &"[redacted]")
            .field("project", &self.project)
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .field("page_size", &self.page_size)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// Where the last collection stopped in `/api/runs/list`, in its ascending order
/// `(submitted_at ASC, id DESC)`: the last run seen. Persist it; pass it back to
/// [`DstackClient::fetch_since`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunCursor {
    pub submitted_at: DateTime<Utc>,
    pub run_id: String,
}

impl RunCursor {
    /// The position just before every run submitted at or after `at`: within one
    /// `submitted_at` the list runs by descending id, so the greatest UUID comes first.
    pub fn before(at: DateTime<Utc>) -> RunCursor {
        RunCursor {
            submitted_at: at,
            run_id: "ffffffff-ffff-ffff-ffff-ffffffffffff".into(),
        }
    }

    /// Whether `self` is further down the list than `other`.
    pub fn is_past(&self, other: &RunCursor) -> bool {
        self.submitted_at > other.submitted_at
            || (self.submitted_at == other.submitted_at && self.run_id < other.run_id)
    }
}

/// Which run `runs/get` should return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRef {
    /// By id: also finds deleted runs. What the collector uses.
    Id(String),
    /// By name: only the current, non-deleted run of that name (names are reused).
    Name(String),
}

/// One collection pass over new runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DstackPage {
    /// One per job submission that got an instance, each exactly once in this page.
    pub records: Vec<UsageRecord>,
    pub quarantined: Vec<RawQuarantine>,
    /// Every run read, in list order.
    pub runs: Vec<RunSummary>,
    /// Where to continue next time (the input cursor when nothing new was listed).
    pub next_cursor: Option<RunCursor>,
    /// Runs seen in this page that are not finished: add them to the set passed to
    /// [`DstackClient::refresh_runs`] until it reports them finished.
    pub unfinished_run_ids: Vec<String>,
    /// `limit_pages` stopped the pass while the last page was full: call again.
    pub more: bool,
}

/// The result of re-polling runs by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshOutcome {
    /// Every billable submission of each run read (all of them, finished or not).
    pub records: Vec<UsageRecord>,
    pub quarantined: Vec<RawQuarantine>,
    pub runs: Vec<RunSummary>,
    /// Poll these again next time: not finished yet, or dstack could not serve them this
    /// time (a 500, an unreadable answer). Runs dstack says do not exist are dropped.
    pub still_unfinished: Vec<String>,
}

type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// A client for one dstack 0.22.5 project. Cheap to clone.
#[derive(Clone)]
pub struct DstackClient {
    http: reqwest::Client,
    base_url: String,
    token: SecretString,
    project: String,
    cluster: String,
    timeout: Duration,
    page_size: u32,
    clock: Clock,
}

impl fmt::Debug for DstackClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DstackClient")
            .field("base_url", &self.base_url)
            .field("token", &"[redacted]")
            .field("project", &self.project)
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .field("page_size", &self.page_size)
            .finish()
    }
}

/// The certificates of the PEM file `file` (a site's own certificate authorities).
fn site_certificates(file: &Path) -> Result<Vec<reqwest::Certificate>, DstackError> {
    let shown = file.display();
    let pem = std::fs::read(file)
        .map_err(|e| DstackError::Config(format!("reading ca_file {shown}: {e}")))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| DstackError::Config(format!("ca_file {shown}: {e}")))?;
    if certs.is_empty() {
        return Err(DstackError::Config(format!(
            "ca_file {shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(certs)
}

impl DstackClient {
    pub fn new(config: DstackConfig) -> Result<DstackClient, DstackError> {
        let base_url = config.base_url.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base_url)
            .map_err(|e| DstackError::Config(format!("base_url {base_url:?}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(DstackError::Config(format!(
                "base_url {base_url:?} is not http or https"
            )));
        }
        // The project goes into URL paths; dstack names are letters, digits, `-` and `_`.
        if config.project.is_empty()
            || !config
                .project
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(DstackError::Config(format!(
                "project {:?} is not a dstack project name",
                config.project
            )));
        }
        if config.timeout.is_zero() {
            return Err(DstackError::Config("timeout must be more than 0".into()));
        }
        if !(1..=MAX_PAGE_SIZE).contains(&config.page_size) {
            return Err(DstackError::Config(format!(
                "page_size {} is not within 1..={MAX_PAGE_SIZE}",
                config.page_size
            )));
        }
        let mut http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent(concat!("bursar/", env!("CARGO_PKG_VERSION")));
        if let Some(file) = &config.ca_file {
            if parsed.scheme() != "https" {
                return Err(DstackError::Config(format!(
                    "ca_file {} is set but base_url {base_url:?} is not https",
                    file.display()
                )));
            }
            http = http.tls_built_in_root_certs(false);
            for cert in site_certificates(file)? {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http
            .build()
            .map_err(|e| DstackError::Config(format!("http client: {e}")))?;
        Ok(DstackClient {
            http,
            base_url,
            token: config.token,
            project: config.project,
            cluster: config.cluster,
            timeout: config.timeout,
            page_size: config.page_size,
            clock: Arc::new(Utc::now),
        })
    }

    /// Replaces the clock used for submissions that are still going (tests).
    pub fn with_clock(mut self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// Lists the project's runs submitted after `cursor` (from the first run when `None`),
    /// oldest first, at most `limit_pages` pages of `page_size`, and turns them into records.
    ///
    /// Keyset pagination on `(submitted_at, id)`, exactly as dstack orders an ascending list:
    /// runs with the same `submitted_at` come in descending id order and dstack's
    /// `prev_submitted_at`/`prev_run_id` filter continues after the last one, so ties are
    /// neither skipped nor repeated. Deleted runs are listed too (`deleted: true`) and charged.
    ///
    /// A run whose list entry is missing submissions (the list keeps the latest 10 per job)
    /// is read again whole with `runs/get {id}`; if that fails for that run only, the run
    /// goes to `unfinished_run_ids` (nothing of it is recorded now) so that
    /// [`refresh_runs`](Self::refresh_runs) gets it whole later.
    ///
    /// The list has no "changed since": runs that are not finished are returned in
    /// `unfinished_run_ids` for [`refresh_runs`](Self::refresh_runs). Their records here carry
    /// their state so far (`end: None`, elapsed up to now).
    ///
    /// Errors that stop the pass (unreachable, timeout, auth, an unreadable page) return
    /// `Err` and nothing is lost: call again with the same cursor.
    #[tracing::instrument(level = "debug", skip(self), fields(project = %self.project))]
    pub async fn fetch_since(
        &self,
        cursor: Option<RunCursor>,
        limit_pages: u32,
    ) -> Result<DstackPage, DstackError> {
        let mut page = DstackPage {
            next_cursor: cursor,
            ..DstackPage::default()
        };
        let mut seen: HashSet<String> = HashSet::new();
        for _ in 0..limit_pages {
            let before = page.next_cursor.clone();
            let runs = self.list_page(page.next_cursor.as_ref()).await?;
            let full = runs.len() >= self.page_size as usize;
            tracing::debug!(runs = runs.len(), "dstack runs/list page");
            for raw in &runs {
                let raw = raw.get();
                if let Ok(key) = serde_json::from_str::<RunKey>(raw) {
                    if let Ok(submitted_at) = parse_time(&key.submitted_at) {
                        page.next_cursor = Some(RunCursor {
                            submitted_at,
                            run_id: key.id.clone(),
                        });
                    }
                    if !seen.insert(key.id) {
                        continue;
                    }
                }
                let mapping = self.read_listed_run(raw).await?;
                absorb(&mut page, mapping);
            }
            if !runs.is_empty() && page.next_cursor == before {
                // Not one run with a readable id and time: the cursor cannot move past this
                // page, and dstack validates both fields, so this is not a dstack answer.
                return Err(DstackError::BadPayload {
                    url: self.url("/api/runs/list"),
                    detail: "no run in the page has a readable id and submitted_at".into(),
                });
            }
            page.more = full;
            if !full {
                break;
            }
        }
        Ok(page)
    }

    /// Re-reads runs by id (`runs/get {id}`, which also finds deleted runs) and returns all
    /// their records, finished or not. Runs that are still going, or that dstack could not
    /// serve this time, are in `still_unfinished`.
    ///
    /// A run dstack cannot serve at all is quarantined with dstack's answer: 400/404 "not
    /// found" (dropped from the set) or 500 — dstack 0.22.5 answers 500 for a run row that
    /// fails its own validation (REPORT §7: a non-version-4 UUID), and its list silently
    /// leaves such a run out; it is kept in the set, so it shows up in every pass until
    /// someone looks. Unreachable, timeout and auth errors stop the whole call.
    #[tracing::instrument(level = "debug", skip_all, fields(project = %self.project, runs = run_ids.len()))]
    pub async fn refresh_runs(&self, run_ids: &[String]) -> Result<RefreshOutcome, DstackError> {
        let mut outcome = RefreshOutcome::default();
        let mut seen: HashSet<&str> = HashSet::new();
        for id in run_ids {
            if !seen.insert(id.as_str()) {
                continue;
            }
            match self.get_run_raw(&RunRef::Id(id.clone())).await {
                Ok(raw) => {
                    let mapping = map_run(&raw, &self.context());
                    if mapping.unfinished {
                        outcome.still_unfinished.push(id.clone());
                    }
                    outcome.records.extend(mapping.records);
                    outcome.quarantined.extend(mapping.quarantined);
                    outcome.runs.extend(mapping.summary);
                }
                Err(e) if e.stops_the_pass() => return Err(e),
                Err(e) => {
                    let keep =
                        !e.is_not_found() && !matches!(e, DstackError::Server { status: 422, .. });
                    tracing::warn!(run_id = %id, error = %e, keep, "dstack run could not be read");
                    outcome.quarantined.push(RawQuarantine {
                        reason: format!(
                            "run {id}: {e}{}",
                            if keep {
                                "; polled again next time"
                            } else {
                                "; no longer polled"
                            }
                        ),
                        raw: error_raw(&e),
                    });
                    if keep {
                        outcome.still_unfinished.push(id.clone());
                    }
                }
            }
        }
        Ok(outcome)
    }

    /// One run, whole (every submission of every job), via `runs/get`.
    pub async fn get_run(&self, run: &RunRef) -> Result<DstackRun, DstackError> {
        let raw = self.get_run_raw(run).await?;
        DstackRun::from_json(&raw, &self.url(&self.project_path("runs/get")))
    }

    /// Maps a run as listed; re-reads it whole when the list cut its submissions.
    async fn read_listed_run(&self, raw: &str) -> Result<RunMapping, DstackError> {
        let mapping = map_run(raw, &self.context());
        if !mapping.truncated {
            return Ok(mapping);
        }
        let Some(id) = mapping.run_id.clone() else {
            return Ok(mapping);
        };
        tracing::debug!(run_id = %id, "more than {LIST_SUBMISSIONS_LIMIT} submissions listed; reading the run whole");
        match self.get_run_raw(&RunRef::Id(id.clone())).await {
            Ok(full) => {
                let mut whole = map_run(&full, &self.context());
                // runs/get returns every submission; a gap now is dstack's own numbering.
                whole.truncated = false;
                Ok(whole)
            }
            Err(e) if e.stops_the_pass() => Err(e),
            Err(e) => Ok(RunMapping {
                quarantined: vec![RawQuarantine {
                    reason: format!(
                        "run {id}: the list showed only its latest {LIST_SUBMISSIONS_LIMIT} submissions per job and runs/get failed: {e}; polled again, nothing recorded yet"
                    ),
                    raw: error_raw(&e),
                }],
                run_id: Some(id),
                unfinished: true,
                ..RunMapping::default()
            }),
        }
    }

    async fn list_page(
        &self,
        after: Option<&RunCursor>,
    ) -> Result<Vec<Box<RawValue>>, DstackError> {
        #[derive(Serialize)]
        struct ListRuns<'a> {
            project_name: &'a str,
            only_active: bool,
            include_jobs: bool,
            job_submissions_limit: u32,
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_submitted_at: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_run_id: Option<&'a str>,
            limit: u32,
            ascending: bool,
        }
        let body = ListRuns {
            project_name: &self.project,
            only_active: false,
            include_jobs: true,
            job_submissions_limit: LIST_SUBMISSIONS_LIMIT,
            prev_submitted_at: after.map(|c| format_time(&c.submitted_at)),
            prev_run_id: after.map(|c| c.run_id.as_str()),
            limit: self.page_size,
            ascending: true,
        };
        let path = "/api/runs/list";
        let text = self.post(path, &body).await?;
        serde_json::from_str(&text).map_err(|e| DstackError::BadPayload {
            url: self.url(path),
            detail: format!("not a list of runs: {e}"),
        })
    }

    pub(crate) async fn get_run_raw(&self, run: &RunRef) -> Result<String, DstackError> {
        let body = match run {
            RunRef::Id(id) => serde_json::json!({ "id": id }),
            RunRef::Name(name) => serde_json::json!({ "run_name": name }),
        };
        let path = self.project_path("runs/get");
        let text = self.post(&path, &body).await?;
        // Check it is one JSON value before handing it on.
        serde_json::from_str::<&RawValue>(&text).map_err(|e| DstackError::BadPayload {
            url: self.url(&path),
            detail: format!("not a run: {e}"),
        })?;
        Ok(text)
    }

    fn context(&self) -> MapContext<'_> {
        MapContext {
            cluster: &self.cluster,
            now: (self.clock)(),
        }
    }

    pub(crate) fn project_path(&self, call: &str) -> String {
        format!("/api/project/{}/{call}", self.project)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// POSTs JSON and returns the body of a 2xx answer; everything else is a [`DstackError`].
    pub(crate) async fn post<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<String, DstackError> {
        let url = self.url(path);
        let response = self
            .http
            .post(&url)
            .bearer_auth(self.token.expose_secret())
            .json(body)
            .send()
            .await
            .map_err(|e| self.transport_error(&url, e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| self.transport_error(&url, e))?;
        if status.is_success() {
            return Ok(text);
        }
        let (code, message) = error_detail(&text);
        Err(match status.as_u16() {
            401 | 403 => DstackError::Auth {
                url,
                status: status.as_u16(),
                message,
            },
            other => DstackError::Server {
                url,
                status: other,
                code,
                message,
            },
        })
    }

    fn transport_error(&self, url: &str, error: reqwest::Error) -> DstackError {
        if error.is_timeout() {
            DstackError::Timeout {
                url: url.to_string(),
                timeout: self.timeout,
            }
        } else if error.is_body() || error.is_decode() {
            DstackError::BadPayload {
                url: url.to_string(),
                detail: format!("answer cut short: {}", error_chain(&error)),
            }
        } else {
            DstackError::Unreachable {
                url: url.to_string(),
                detail: error_chain(&error),
            }
        }
    }
}

/// Adds one run's mapping to a page.
fn absorb(page: &mut DstackPage, mapping: RunMapping) {
    if mapping.unfinished {
        if let Some(id) = &mapping.run_id {
            page.unfinished_run_ids.push(id.clone());
        }
    }
    for q in &mapping.quarantined {
        tracing::warn!(reason = %q.reason, "dstack data quarantined");
    }
    page.records.extend(mapping.records);
    page.quarantined.extend(mapping.quarantined);
    page.runs.extend(mapping.summary);
}

/// What dstack answered, for a quarantine entry.
fn error_raw(error: &DstackError) -> String {
    match error {
        DstackError::Server {
            status,
            code,
            message,
            ..
        } => serde_json::json!({ "status": status, "code": code, "message": message }).to_string(),
        other => serde_json::json!({ "error": other.to_string() }).to_string(),
    }
}

/// `error: cause: cause` — reqwest's own message alone rarely says what happened.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
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
