//! Collection faults, injected with a mock slurmrestd: every failure ends with a clear status
//! and a cursor that never moved past data that was not posted.
//!
//! The mock answers with a real Slurm 22.05 `/slurmdb/v0.0.38/jobs` response (the two-cluster
//! job mix) or with the fault under test.

use std::time::Duration;

use bursar_gateway::app::App;
use bursar_gateway::collect::{load_status, run_pass, Collector, PassWindow};
use bursar_gateway::config::Config;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const JOBS: &str = include_str!("fixtures/slurmrestd-22.05-jobs.json");
const DAY1: i64 = 1_795_305_600; // 2026-11-22T00:00:00Z, the day the jobs ran
const DAY: i64 = 86_400;
const JOBS_PATH: &str = "/slurmdb/v0.0.38/jobs";

struct Fixture {
    _dir: tempfile::TempDir,
    app: App,
    collector: Collector,
}

/// A collector for `url` with a timeout to spare: on a busy machine, a big answer built by
/// the mock server must not be taken for a slow slurmrestd.
async fn fixture(url: &str) -> Fixture {
    fixture_timing_out(url, "60s").await
}

/// A collector for `url` that gives up on a call after `timeout`.
async fn fixture_timing_out(url: &str, timeout: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("jwt.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let yaml = format!(
        "database: sqlite://{db}\n\
         accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         clusters:\n  onprem:\n    kind: slurm\n    currency: su\n    partitions:\n      batch: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0\"}}\n\
         \x20   collect:\n      slurmrestd: {{url: \"{url}\", jwt_key_file: \"{key}\", api_version: v0.0.38}}\n\
         \x20     slice: 1d\n      timeout: {timeout}\n      attempts: 2\n",
        db = dir.path().join("ledger.db").display(),
        key = key.display(),
    );
    let config = Config::parse(&yaml).unwrap();
    let collector = Collector::from_config("onprem", &config.clusters["onprem"])
        .unwrap()
        .unwrap();
    let app = App::open(config).await.unwrap();
    Fixture {
        _dir: dir,
        app,
        collector,
    }
}

/// Onprem jobs of the real capture (the response holds both clusters; the collector keeps
/// the cluster it asked for by naming it).
fn day1_jobs() -> String {
    let mut value: serde_json::Value = serde_json::from_str(JOBS).unwrap();
    value["jobs"]
        .as_array_mut()
        .unwrap()
        .retain(|j| j["cluster"] == "onprem");
    value.to_string()
}

/// A 22.05 answer with no jobs in the window.
fn empty_page() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string(r#"{"meta":{},"errors":[],"jobs":[]}"#)
}

/// The `start_time` bursar sends for the slice starting `n` days after DAY1.
fn day(n: i64) -> String {
    format!("2026-11-{:02}T00:00:00", 22 + n)
}

async fn pass(f: &Fixture, days: i64) -> anyhow::Result<bursar_gateway::collect::PassSummary> {
    let window = PassWindow {
        since: Some(DAY1),
        until: Some(DAY1 + days * DAY),
    };
    run_pass(&f.app, &f.collector, window, &|_, _, _| {}).await
}

async fn cursor(f: &Fixture) -> Option<i64> {
    let text = f.app.ledger.get_cursor("onprem").await.unwrap()?;
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["until"].as_i64()
}

async fn charged_jobs(f: &Fixture) -> usize {
    f.app
        .ledger
        .journal(&Default::default())
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind.as_str() == "charge")
        .count()
}

/// slurmrestd answering the real jobs for slices that start on the first day and failing
/// (HTTP 500, slurmdbd's "Unable to query database") for any that starts later; notes the
/// start of each failed call.
struct FailsAfterDay1 {
    failed: std::sync::Mutex<Vec<i64>>,
}

impl wiremock::Respond for FailsAfterDay1 {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let start = query_time(request, "start_time");
        if start < DAY1 + DAY {
            return ResponseTemplate::new(200).set_body_string(day1_jobs());
        }
        self.failed.lock().unwrap().push(start);
        ResponseTemplate::new(500).set_body_string(
            r#"{"errors":[{"error":"Unable to query database","error_number":7000}]}"#,
        )
    }
}

/// A mock slurmrestd answering every jobs call with `cluster`, and a fixture collecting from it
/// in slices of at most an hour.
async fn serving_hours<R: wiremock::Respond + 'static>(
    cluster: std::sync::Arc<R>,
    timeout: &str,
) -> (MockServer, Fixture) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(Shared(cluster))
        .mount(&server)
        .await;
    let mut f = fixture_timing_out(&server.uri(), timeout).await;
    f.collector.slice = Duration::from_secs(3_600);
    (server, f)
}

/// Lets a test keep a handle on a responder that wiremock owns.
struct Shared<R>(std::sync::Arc<R>);

impl<R: wiremock::Respond> wiremock::Respond for Shared<R> {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

#[tokio::test]
async fn a_failing_slice_keeps_the_ones_before_and_stops_the_cursor_there() {
    let server = MockServer::start().await;
    let cluster = std::sync::Arc::new(FailsAfterDay1 {
        failed: Default::default(),
    });
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(Shared(cluster.clone()))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;

    let err = pass(&f, 2).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("500")
            || format!("{err:#}").to_lowercase().contains("database"),
        "{err:#}"
    );
    // Each failed call was tried `attempts` (2) times, at the same start: where the cursor
    // stopped, after the last posted slice.
    let failed = cluster.failed.lock().unwrap().clone();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0] >= DAY1 + DAY && failed[0] == failed[1],
        "{failed:?}"
    );
    assert_eq!(
        cursor(&f).await,
        Some(failed[0]),
        "the cursor stops after the posted slices"
    );
    assert!(
        charged_jobs(&f).await >= 16,
        "the first day's jobs are charged"
    );
    let status = load_status(&f.app, "onprem").await.unwrap();
    assert_eq!(status.consecutive_failures, 1);
    assert!(status.last_error.is_some() && status.last_success.is_none());

    // The cluster recovers: the next pass finishes the window and posts nothing twice.
    server.reset().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(empty_page())
        .mount(&server)
        .await;
    let before = charged_jobs(&f).await;
    pass(&f, 2).await.unwrap();
    assert_eq!(cursor(&f).await, Some(DAY1 + 2 * DAY));
    assert_eq!(charged_jobs(&f).await, before);
    let status = load_status(&f.app, "onprem").await.unwrap();
    assert_eq!(status.consecutive_failures, 0);
    assert!(status.last_success.is_some());
}

/// Each fault ends the pass with an error naming it, and leaves no cursor.
async fn assert_fault(f: &Fixture, needle: &str) {
    let err = format!("{:#}", pass(f, 1).await.unwrap_err()).to_lowercase();
    assert!(
        err.contains(needle),
        "error should mention {needle:?}: {err}"
    );
    assert_eq!(
        cursor(f).await,
        None,
        "no cursor after a failed first slice"
    );
    assert_eq!(charged_jobs(f).await, 0);
    let status = load_status(&f.app, "onprem").await.unwrap();
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or("")
            .to_lowercase()
            .contains(needle),
        "{status:?}"
    );
}

#[tokio::test]
async fn connection_refused() {
    // Bound and never listening, and kept so for the whole test: connecting is refused, and
    // no other test can be given the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let f = fixture(&format!("http://127.0.0.1:{port}")).await;
    assert_fault(&f, "127.0.0.1").await;
}

#[tokio::test]
async fn a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(day1_jobs())
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let f = fixture_timing_out(&server.uri(), "2s").await;
    assert_fault(&f, "time").await;
}

#[tokio::test]
async fn the_22_05_bad_token_answer_is_reported_as_authentication() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).and(path(JOBS_PATH))
        .respond_with(ResponseTemplate::new(500).set_body_string(
            r#"{"errors":[{"description":"slurmctld config is unable to load","error_number":-1,"error":"Unspecified error","source":"slurm_load_ctl_conf"}]}"#,
        ))
        .mount(&server).await;
    let f = fixture(&server.uri()).await;
    assert_fault(&f, "credentials").await;
}

#[tokio::test]
async fn a_401() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(ResponseTemplate::new(401).set_body_string("Authentication failure"))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    assert_fault(&f, "credentials").await;
}

#[tokio::test]
async fn truncated_json() {
    let server = MockServer::start().await;
    let body = day1_jobs();
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(
            ResponseTemplate::new(200).set_body_string(body[..body.len() / 2].to_string()),
        )
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    assert_fault(&f, "json").await;
}

#[tokio::test]
async fn a_job_with_a_missing_field_is_quarantined_and_the_rest_charged() {
    let server = MockServer::start().await;
    let mut value: serde_json::Value = serde_json::from_str(&day1_jobs()).unwrap();
    let jobs = value["jobs"].as_array_mut().unwrap();
    let total = jobs.len();
    jobs[0].as_object_mut().unwrap().remove("time");
    // The jobs come in the first slice; the later ones of the day are empty.
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .and(query_param("start_time", day(0)))
        .respond_with(ResponseTemplate::new(200).set_body_string(value.to_string()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(empty_page())
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let summary = pass(&f, 1).await.unwrap();
    assert_eq!(summary.quarantined, 1);
    assert_eq!(summary.records as usize, total - 1);
    let quarantine = f.app.ledger.quarantine_list().await.unwrap();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0].source, "slurmrestd:onprem");
    assert!(
        quarantine[0].reason.contains("time"),
        "{}",
        quarantine[0].reason
    );
    assert!(
        quarantine[0].raw.contains("job_id"),
        "the job's JSON is kept"
    );
    assert_eq!(cursor(&f).await, Some(DAY1 + DAY));
}

#[tokio::test]
async fn an_empty_page_is_a_success_that_moves_the_cursor() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(empty_page())
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let summary = pass(&f, 1).await.unwrap();
    assert_eq!(summary.records, 0);
    assert_eq!(cursor(&f).await, Some(DAY1 + DAY));
}

#[tokio::test]
async fn a_slow_body_within_the_timeout_is_read_whole() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(JOBS_PATH))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(day1_jobs())
                .set_delay(Duration::from_millis(800)),
        )
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let summary = pass(&f, 1).await.unwrap();
    assert!(summary.records >= 16);
}

/// A slurmrestd whose cluster ran `jobs` one-second jobs, evenly from `from` over `span`
/// seconds: each call answers the jobs eligible or running in its window (as slurmdbd does),
/// and the size of every answer is noted.
struct DenseCluster {
    template: serde_json::Value,
    from: i64,
    span: i64,
    jobs: i64,
    answered: std::sync::Mutex<Vec<(i64, i64, usize)>>,
}

impl DenseCluster {
    fn new(from: i64, span: i64, jobs: i64) -> DenseCluster {
        let value: serde_json::Value = serde_json::from_str(JOBS).unwrap();
        let template = value["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["cluster"] == "onprem" && j["state"]["current"] == "COMPLETED")
            .unwrap()
            .clone();
        DenseCluster {
            template,
            from,
            span,
            jobs,
            answered: Default::default(),
        }
    }

    /// When job `n` (from 1) was submitted, started and ended.
    fn times(&self, n: i64) -> (i64, i64) {
        let at = self.from + (n - 1) * self.span / self.jobs;
        (at, at + 1)
    }
}

fn query_time(request: &wiremock::Request, name: &str) -> i64 {
    let (_, value) = request
        .url
        .query_pairs()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {}", request.url));
    chrono::NaiveDateTime::parse_from_str(&value, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

/// Whether `request` is a slice's second call, for the jobs cancelled in it.
fn asks_for_cancelled(request: &wiremock::Request) -> bool {
    request
        .url
        .query_pairs()
        .any(|(k, v)| k == "state" && v == "CANCELLED")
}

impl wiremock::Respond for DenseCluster {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        if asks_for_cancelled(request) {
            return empty_page(); // none of these jobs was cancelled
        }
        let (start, end) = (
            query_time(request, "start_time"),
            query_time(request, "end_time"),
        );
        let jobs: Vec<serde_json::Value> = (1..=self.jobs)
            .filter_map(|n| {
                let (at, ended) = self.times(n);
                (at < end && ended >= start).then(|| {
                    let mut job = self.template.clone();
                    job["job_id"] = n.into();
                    let time = &mut job["time"];
                    for field in ["submission", "eligible", "start"] {
                        time[field] = at.into();
                    }
                    time["end"] = ended.into();
                    time["elapsed"] = 1.into();
                    job
                })
            })
            .collect();
        self.answered.lock().unwrap().push((start, end, jobs.len()));
        let mut body: serde_json::Value = serde_json::from_str(JOBS).unwrap();
        body["jobs"] = jobs.into();
        ResponseTemplate::new(200).set_body_string(body.to_string())
    }
}

#[tokio::test]
async fn dense_windows_are_read_in_calls_of_about_a_thousand_jobs() {
    // 12,000 jobs in ten minutes, then two idle hours, read with `slice: 1h`. slurmrestd 22.05
    // holds a whole answer in memory, so bursar starts with a one-minute slice (1,200 jobs
    // here), shortens the next ones to about a thousand jobs a call, lengthens them again
    // where the cluster was idle, and starts its next pass from where this one ended.
    let cluster = std::sync::Arc::new(DenseCluster::new(DAY1, 600, 12_000));
    let (_server, f) = serving_hours(cluster.clone(), "60s").await;
    let end = DAY1 + 2 * 3_600 + 600;
    let window = PassWindow {
        since: Some(DAY1),
        until: Some(end),
    };
    let summary = run_pass(&f.app, &f.collector, window, &|_, _, _| {})
        .await
        .unwrap();

    let answered = cluster.answered.lock().unwrap().clone();
    assert_eq!(answered[0], (DAY1, DAY1 + 60, 1_200), "{answered:?}");
    // After the first minute, every call in the burst brings about a thousand jobs (and the
    // twenty of the second before, still running at the slice's start).
    let burst: Vec<_> = answered[1..]
        .iter()
        .filter(|(start, _, _)| *start < DAY1 + 600)
        .collect();
    for (start, end, jobs) in &burst {
        assert!(
            (900..=1_020).contains(jobs) || *end >= DAY1 + 600,
            "{jobs} jobs in [{start}, {end})"
        );
    }
    assert!((10..=12).contains(&burst.len()), "{answered:?}");
    // Idle: the slices double (the last is cut at the window's end).
    let lengths: Vec<i64> = answered.iter().map(|(s, e, _)| e - s).collect();
    assert_eq!(
        lengths[burst.len() + 1..],
        [50, 100, 200, 400, 800, 1_600, 3_200, 840],
        "{lengths:?}"
    );
    assert_eq!(answered.last().unwrap().1, end);
    // Every job charged once; the cursor at the window's end, with the length to go on with.
    assert_eq!(charged_jobs(&f).await, 12_000);
    assert_eq!(summary.windows as usize, answered.len());
    let text = f.app.ledger.get_cursor("onprem").await.unwrap().unwrap();
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(stored["until"], end);
    assert_eq!(stored["slice"], 3_600);

    // The next pass starts with the hour the last one ended with.
    let calls = answered.len();
    let next = PassWindow {
        since: Some(end),
        until: Some(end + 2 * 3_600),
    };
    run_pass(&f.app, &f.collector, next, &|_, _, _| {})
        .await
        .unwrap();
    let answered = cluster.answered.lock().unwrap().clone();
    assert_eq!(
        &answered[calls..],
        [(end, end + 3_600, 0), (end + 3_600, end + 7_200, 0)]
    );
}

/// slurmrestd that takes longer than bursar's timeout (2 s here) to answer any window longer
/// than 20 minutes, as a big answer does, and answers shorter ones at once (no jobs); notes
/// every window asked for (but the second call of each slice, for its cancelled jobs).
#[derive(Default)]
struct SlowOnLongWindows {
    asked: std::sync::Mutex<Vec<(i64, i64)>>,
}

impl wiremock::Respond for SlowOnLongWindows {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let (start, end) = (
            query_time(request, "start_time"),
            query_time(request, "end_time"),
        );
        if !asks_for_cancelled(request) {
            self.asked.lock().unwrap().push((start, end));
        }
        let answer = empty_page();
        if end - start > 1_200 {
            answer.set_delay(Duration::from_secs(30))
        } else {
            answer
        }
    }
}

#[tokio::test]
async fn a_slice_that_times_out_is_retried_a_quarter_as_long() {
    let cluster = std::sync::Arc::new(SlowOnLongWindows::default());
    let (_server, f) = serving_hours(cluster.clone(), "2s").await;
    let end = DAY1 + 3_600;
    let window = PassWindow {
        since: Some(DAY1),
        until: Some(end),
    };
    run_pass(&f.app, &f.collector, window, &|_, _, _| {})
        .await
        .unwrap();
    let asked = cluster.asked.lock().unwrap().clone();
    // 1, 2, 4, 8, 16 minutes, then the last 29 (cut at the window's end) time out and the
    // retry reads a quarter of them; the slices go on from there.
    let t = |m: i64| DAY1 + 60 * m;
    assert_eq!(
        asked[..7],
        [
            (t(0), t(1)),
            (t(1), t(3)),
            (t(3), t(7)),
            (t(7), t(15)),
            (t(15), t(31)),
            (t(31), t(60)),
            (t(31), t(31) + 29 * 60 / 4),
        ],
        "{asked:?}"
    );
    assert_eq!(asked.last().unwrap().1, end);
    assert_eq!(cursor(&f).await, Some(end));
}
