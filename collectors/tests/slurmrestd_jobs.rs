//! slurmrestd accounting jobs → records: the real 22.05 answers cross-checked against the
//! sacct parser on the same run, the v0.0.40/41/42 shapes, and the queries sent.

#[path = "fixtures/slurmrestd/common.rs"]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bursar_collectors::slurmrestd::{ApiVersion, LegacyTimes, RestError, SlurmRestClient, Window};
use bursar_pricing::{JobState, Tres};
use common::*;
use serde_json::{json, Value};
use wiremock::matchers::{method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

const V38_JOBS: &str = "/slurmdb/v0.0.38/jobs";

/// The accounting jobs path of `version`, as the client calls it.
fn jobs_path(version: ApiVersion) -> String {
    match version {
        ApiVersion::V0_0_38 => V38_JOBS.to_string(),
        v => format!("/slurmdb/{v}/jobs/"),
    }
}

fn capture() -> Window {
    Window::new(CAPTURE_START, CAPTURE_END)
}

async fn serve(server: &MockServer, at: &str, body: String) {
    Mock::given(method("GET"))
        .and(path(at))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
        .mount(server)
        .await;
}

#[tokio::test]
async fn real_22_05_jobs_equal_what_sacct_reports_for_the_same_run() {
    let server = MockServer::start().await;
    serve(&server, V38_JOBS, fixture("real-22.05/dbjobs-all.json")).await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let fetched = client.fetch_jobs(capture()).await.unwrap();

    assert_eq!(fetched.quarantined, vec![]);
    assert_eq!(fetched.records.len(), 21);
    let sacct = sacct_records();
    for record in &fetched.records {
        // every field: ids, display ids, times, account, user, partition, QOS, state,
        // elapsed, allocated TRES (typed GPUs, no energy), time limit, name
        assert_eq!(record, find(&sacct, &record.cluster, &record.job_id));
    }
    // sacct also has job 6 (cancelled before it was eligible: no time window finds it over
    // REST) and 19, 20 (submitted through REST after this answer was captured).
    let rest: BTreeSet<_> = fetched
        .records
        .iter()
        .map(|r| (r.cluster.as_str(), r.job_id.as_str()))
        .collect();
    let only_sacct: Vec<_> = sacct
        .iter()
        .map(|r| (r.cluster.as_str(), r.job_id.as_str()))
        .filter(|id| !rest.contains(id))
        .collect();
    assert_eq!(
        only_sacct,
        vec![("onprem", "6"), ("onprem", "19"), ("onprem", "20")]
    );

    let gpu = find(&fetched.records, "cloud", "1");
    assert_eq!(
        gpu.alloc,
        Tres::parse("billing=22,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=4G,node=1").unwrap()
    );
    assert_eq!(find(&fetched.records, "onprem", "7").display_id, "7_3");
    assert_eq!(find(&fetched.records, "onprem", "12").display_id, "11+1");
    assert_eq!(
        find(&fetched.records, "onprem", "10").time_limit_min,
        Some(1)
    );
    // cloud job 2 had billing 0.598 -> 0: no billing entry at all
    assert_eq!(find(&fetched.records, "cloud", "2").alloc.billing(), None);
}

#[tokio::test]
async fn the_never_started_job_from_the_submit_time_query() {
    let server = MockServer::start().await;
    serve(
        &server,
        V38_JOBS,
        fixture("real-22.05/dbjobs-q-submit_time-2026-11-21.json"),
    )
    .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let fetched = client.fetch_jobs(capture()).await.unwrap();
    assert_eq!(fetched.records.len(), 18);
    let sacct = sacct_records();
    for record in &fetched.records {
        assert_eq!(record, find(&sacct, &record.cluster, &record.job_id));
    }
    let never = find(&fetched.records, "onprem", "6");
    assert_eq!(never.start, None, "time.start is null");
    assert!(never.alloc.is_empty());
    assert_eq!(
        (never.state, never.elapsed_us, never.time_limit_min),
        (JobState::Cancelled, 0, None)
    );
}

/// The built v0.0.4x pages: the same real jobs in each version's shapes, plus jobs the 22.05
/// run did not produce.
async fn fetch_built(version: ApiVersion) -> bursar_collectors::slurmrestd::FetchedJobs {
    let server = MockServer::start().await;
    let minor = version.minor();
    serve(
        &server,
        &jobs_path(version),
        fixture(&format!("built/dbjobs_v0.0.{minor}.json")),
    )
    .await;
    let (client, _key) = client(&server, Some(version));
    client
        .fetch_jobs(Window::new(CAPTURE_START, 1_795_320_000))
        .await
        .unwrap()
}

#[tokio::test]
async fn v0_0_40_to_45_shapes_give_the_same_records() {
    let sacct = sacct_records();
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let fetched = fetch_built(version).await;
        assert_eq!(fetched.quarantined, vec![], "{version}");
        // 21 jobs + job 6 + 8 built records (requeue twice), + the expediting job from v0.0.44
        let expediting = version >= ApiVersion::V0_0_44;
        assert_eq!(
            fetched.records.len(),
            29 + usize::from(expediting),
            "{version}"
        );
        let real: Vec<_> = fetched
            .records
            .iter()
            .filter(|r| r.job_id.parse::<u32>().unwrap() < 30)
            .collect();
        assert_eq!(real.len(), 22, "{version}");
        for record in real {
            assert_eq!(
                record,
                find(&sacct, &record.cluster, &record.job_id),
                "{version}"
            );
        }

        let requeued: Vec<_> = fetched
            .records
            .iter()
            .filter(|r| r.job_id == "30")
            .collect();
        assert_eq!(requeued.len(), 2, "both runs of a requeued job");
        assert_eq!(
            (requeued[0].state, requeued[0].elapsed_us),
            (JobState::Requeued, 60_000_000)
        );
        assert_eq!(
            (requeued[1].state, requeued[1].elapsed_us),
            (JobState::Completed, 120_000_000)
        );
        assert_ne!(requeued[0].submit, requeued[1].submit);

        let running = find(&fetched.records, "onprem", "31");
        assert_eq!((running.state, running.end), (JobState::Running, None));
        assert!(!running.state.is_final());
        let completing = find(&fetched.records, "onprem", "32");
        assert_eq!(completing.state, JobState::Running, "COMPLETING is a flag");
        assert_eq!(completing.time_limit_min, None, "infinite");

        let node_fail = find(&fetched.records, "onprem", "33");
        assert_eq!(node_fail.state, JobState::NodeFail);
        assert_eq!(
            node_fail.alloc,
            Tres::parse("billing=27,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=16000M,node=1").unwrap()
        );
        assert_eq!(node_fail.time_limit_min, Some(120));
        assert_eq!(
            find(&fetched.records, "onprem", "34").state,
            JobState::OutOfMemory
        );
        if expediting {
            let job = find(&fetched.records, "onprem", "37");
            assert_eq!(
                (job.state, job.end, job.time_limit_min),
                (JobState::Running, None, Some(60)),
                "{version}: EXPEDITING is a flag"
            );
        }
        let rest_of_array = find(&fetched.records, "onprem", "36");
        assert_eq!(rest_of_array.display_id, "35_[2-5]");
        assert_eq!(
            (rest_of_array.state, rest_of_array.start),
            (JobState::Pending, None)
        );
    }
}

#[tokio::test]
async fn the_constructed_fixtures_of_both_generations() {
    for (version, name) in [
        (
            ApiVersion::V0_0_38,
            "constructed/slurmdb_v0.0.38_jobs_resp.json",
        ),
        (
            ApiVersion::V0_0_42,
            "constructed/slurmdb_v0.0.42_jobs_resp.json",
        ),
    ] {
        let server = MockServer::start().await;
        serve(&server, &jobs_path(version), fixture(name)).await;
        let (client, _key) = client(&server, Some(version));
        let fetched = client
            .fetch_jobs(Window::new(1_735_689_000, 1_735_700_000))
            .await
            .unwrap();
        assert_eq!(fetched.quarantined, vec![], "{name}");
        let [job] = &fetched.records[..] else {
            panic!("{name}: {fetched:?}")
        };
        assert_eq!(
            (
                job.cluster.as_str(),
                job.job_id.as_str(),
                job.display_id.as_str()
            ),
            ("hpc1", "1234", "1234")
        );
        assert_eq!(
            (job.submit, job.start, job.end, job.elapsed_us),
            (
                1_735_689_000,
                Some(1_735_689_600),
                Some(1_735_693_200),
                3_600_000_000
            )
        );
        assert_eq!(
            job.alloc,
            Tres::parse("billing=4,cpu=4,gres/gpu=1,mem=16G,node=1").unwrap()
        );
        assert_eq!(
            (job.time_limit_min, job.state),
            (Some(120), JobState::Completed)
        );
        assert_eq!(job.partition.as_deref(), Some("gpu"));
        assert_eq!(job.job_name.as_deref(), Some("train"));
    }
}

#[tokio::test]
async fn a_job_that_cannot_be_mapped_is_quarantined_and_the_rest_come_through() {
    let mut page = fixture_json("real-22.05/dbjobs-all.json");
    let jobs = page["jobs"].as_array_mut().unwrap();
    jobs[4]["time"]
        .as_object_mut()
        .unwrap()
        .remove("submission"); // onprem 1
    jobs[5]["time"]["elapsed"] = json!("three"); // onprem 2
    jobs[6]["state"]["current"] = json!("EXPLODED"); // onprem 3
    let server = MockServer::start().await;
    serve(&server, V38_JOBS, page.to_string()).await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let fetched = client.fetch_jobs(capture()).await.unwrap();

    assert_eq!(fetched.records.len(), 18);
    let reasons: Vec<_> = fetched
        .quarantined
        .iter()
        .map(|q| q.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        vec![
            "job 1 on onprem: time.submission is missing",
            "job 2 on onprem: time.elapsed is \"three\", not a whole number",
            "job 3 on onprem: state.current \"EXPLODED\" has no job state bursar knows",
        ]
    );
    // the raw JSON is the job as sent
    let raw: Value = serde_json::from_str(&fetched.quarantined[1].raw).unwrap();
    assert_eq!(raw, page["jobs"][5]);
}

#[tokio::test]
async fn empty_pages() {
    let empty = json!({"meta": {}, "errors": [], "warnings": [], "jobs": []}).to_string();
    let nothing_found = fixture("real-22.05/dbjobs-q-state-FAILED.json");
    for (version, body) in [
        (ApiVersion::V0_0_41, empty),
        (ApiVersion::V0_0_38, nothing_found),
    ] {
        let server = MockServer::start().await;
        serve(&server, &jobs_path(version), body).await;
        let (client, _key) = client(&server, Some(version));
        let fetched = client.fetch_jobs(capture()).await.unwrap();
        assert!(fetched.records.is_empty() && fetched.quarantined.is_empty());
    }
}

/// The raw query strings the server received, in order.
async fn queries(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.query().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn v0_0_38_query_is_percent_encoded_local_iso_with_cluster_and_skip_steps() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(V38_JOBS))
        .and(query_param("cluster", "onprem"))
        .and(query_param("start_time", "2026-11-22T00:06:40"))
        .and(query_param("end_time", "2026-11-22T01:46:40"))
        .and(query_param("skip_steps", "true"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture("real-22.05/dbjobs-all.json"), "application/json"),
        )
        .expect(2)
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    client.fetch_jobs(capture()).await.unwrap();
    // The window, then the jobs cancelled in it (a job cancelled before it became eligible is
    // in no plain window).
    assert_eq!(
        queries(&server).await,
        vec![
            "cluster=onprem&start_time=2026-11-22T00%3A06%3A40&end_time=2026-11-22T01%3A46%3A40\
             &skip_steps=true",
            "cluster=onprem&start_time=2026-11-22T00%3A06%3A40&end_time=2026-11-22T01%3A46%3A40\
             &skip_steps=true&state=CANCELLED"
        ]
    );
}

#[tokio::test]
async fn v0_0_38_times_in_the_configured_server_zone_or_as_uts() {
    let key = key_file();
    let server = MockServer::start().await;
    serve(
        &server,
        V38_JOBS,
        fixture("real-22.05/dbjobs-q-state-FAILED.json"),
    )
    .await;
    for legacy in [
        LegacyTimes::Local("America/New_York".parse().unwrap()),
        LegacyTimes::Uts,
    ] {
        let mut config = config(&server.uri(), &key, Some(ApiVersion::V0_0_38));
        config.legacy_times = legacy;
        let client = SlurmRestClient::new(config).unwrap();
        client.fetch_jobs(capture()).await.unwrap();
    }
    assert_eq!(
        queries(&server).await,
        vec![
            // 00:06:40Z is 19:06:40 the day before in New York (EST, UTC-5)
            "cluster=onprem&start_time=2026-11-21T19%3A06%3A40&end_time=2026-11-21T20%3A46%3A40\
             &skip_steps=true",
            "cluster=onprem&start_time=2026-11-21T19%3A06%3A40&end_time=2026-11-21T20%3A46%3A40\
             &skip_steps=true&state=CANCELLED",
            "cluster=onprem&start_time=uts1795306000&end_time=uts1795312000&skip_steps=true",
            "cluster=onprem&start_time=uts1795306000&end_time=uts1795312000&skip_steps=true\
             &state=CANCELLED",
        ]
    );
}

#[tokio::test]
async fn v0_0_4x_query_has_epoch_times_and_explicit_duplicate_truncation_and_scheduler_flags() {
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        // v0.0.40/41 read a query's time as text only: `uts<epoch>` (Slurm ticket 21214).
        let (start, end) = if version <= ApiVersion::V0_0_41 {
            ("uts1795306000", "uts1795312000")
        } else {
            ("1795306000", "1795312000")
        };
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path(format!("/slurmdb/{version}/jobs/")))
            .and(query_param("cluster", "onprem"))
            .and(query_param("show_duplicates", "true"))
            .and(query_param("disable_truncate_usage_time", "true"))
            .and(query_param("skip_steps", "true"))
            .and(query_param("scheduler_unset", "true"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_raw(r#"{"jobs": [], "errors": []}"#, "application/json"),
            )
            .expect(2)
            .mount(&server)
            .await;
        let (client, _key) = client(&server, Some(version));
        client.fetch_jobs(capture()).await.unwrap();
        assert_eq!(
            queries(&server).await,
            vec![
                format!(
                    "cluster=onprem&start_time={start}&end_time={end}&skip_steps=true\
                     &show_duplicates=true&disable_truncate_usage_time=true&scheduler_unset=true"
                ),
                format!(
                    "cluster=onprem&start_time={start}&end_time={end}&skip_steps=true\
                     &show_duplicates=true&disable_truncate_usage_time=true&scheduler_unset=true\
                     &state=CANCELLED"
                )
            ],
            "{version}"
        );
    }
}

#[tokio::test]
async fn a_three_day_window_is_three_slices_and_a_job_seen_twice_is_kept_once() {
    let day = 86_400;
    let t0 = 1_795_305_600; // 2026-11-22T00:00:00Z
    let page = |jobs: Vec<Value>| json!({"jobs": jobs, "errors": []}).to_string();
    let all = fixture_json("built/dbjobs_v0.0.41.json");
    let job = |id: u64| {
        all["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == json!(id) && j["cluster"] == json!("onprem"))
            .unwrap()
            .clone()
    };
    // job 31 runs across the first two slices: RUNNING in the first answer, finished in the
    // second (same cluster, id and submit time)
    let mut finished = job(31);
    finished["state"]["current"] = json!(["COMPLETED"]);
    finished["time"]["end"] = json!(1_795_400_000);
    let answers = [
        page(vec![job(1), job(31)]),
        page(vec![finished, job(2)]),
        page(vec![]),
    ];

    let server = MockServer::start().await;
    for (i, body) in answers.into_iter().enumerate() {
        let start = t0 + day * i as i64;
        Mock::given(method("GET"))
            .and(path("/slurmdb/v0.0.41/jobs/"))
            .and(query_param("start_time", format!("uts{start}")))
            .and(query_param("end_time", format!("uts{}", start + day)))
            .and(query_param("cluster", "onprem"))
            .and(query_param_is_missing("state"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
            .expect(1)
            .mount(&server)
            .await;
    }
    // The jobs cancelled in each slice: on the second day, job 3, cancelled while held (in no
    // plain window: it never became eligible).
    let mut held = job(3);
    held["state"]["current"] = json!(["CANCELLED"]);
    for (i, body) in [page(vec![]), page(vec![held]), page(vec![])]
        .into_iter()
        .enumerate()
    {
        let start = t0 + day * i as i64;
        Mock::given(method("GET"))
            .and(path("/slurmdb/v0.0.41/jobs/"))
            .and(query_param("start_time", format!("uts{start}")))
            .and(query_param("state", "CANCELLED"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
            .expect(1)
            .mount(&server)
            .await;
    }
    let key = key_file();
    let mut config = config(&server.uri(), &key, Some(ApiVersion::V0_0_41));
    config.max_window = Duration::from_secs(day as u64);
    let client = SlurmRestClient::new(config).unwrap();
    let fetched = client
        .fetch_jobs(Window::new(t0, t0 + 3 * day))
        .await
        .unwrap();

    let ids: Vec<_> = fetched.records.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids, vec!["1", "31", "2", "3"]);
    assert_eq!(
        find(&fetched.records, "onprem", "3").state,
        JobState::Cancelled
    );
    let job31 = find(&fetched.records, "onprem", "31");
    assert_eq!(
        (job31.state, job31.end),
        (JobState::Completed, Some(1_795_400_000)),
        "the later answer wins"
    );
    server.verify().await;
}

#[tokio::test]
async fn a_base_url_path_prefix_is_kept_and_windows_are_checked() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/proxy/slurm-onprem/slurmdb/v0.0.38/jobs",
        fixture("real-22.05/dbjobs-all.json"),
    )
    .await;
    let key = key_file();
    let uri = format!("{}/proxy/slurm-onprem/", server.uri());
    let client = SlurmRestClient::new(config(&uri, &key, Some(ApiVersion::V0_0_38))).unwrap();
    assert_eq!(
        client.fetch_jobs(capture()).await.unwrap().records.len(),
        21
    );

    let empty = client.fetch_jobs(Window::new(5, 5)).await.unwrap();
    assert!(empty.records.is_empty());
    assert!(matches!(
        client.fetch_jobs(Window::new(9, 5)).await,
        Err(RestError::InvalidRequest(_))
    ));
    // one slice: the window and the jobs cancelled in it
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn discovery_reads_the_served_spec_once() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/openapi/v3"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            fixture("real-22.05/openapi-v3.paths.json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    serve(&server, V38_JOBS, fixture("real-22.05/dbjobs-all.json")).await;
    let (client, _key) = client(&server, None);
    assert_eq!(client.api_version().await.unwrap(), ApiVersion::V0_0_38);
    assert_eq!(
        client.fetch_jobs(capture()).await.unwrap().records.len(),
        21
    );
    assert_eq!(
        client.fetch_jobs(capture()).await.unwrap().records.len(),
        21
    );
    server.verify().await;
}

#[tokio::test]
async fn discovery_takes_the_highest_version_bursar_speaks() {
    let spec = |paths: &[&str]| {
        let paths: serde_json::Map<String, Value> = paths
            .iter()
            .map(|p| (p.to_string(), json!({"get": {}})))
            .collect();
        json!({"openapi": "3.0.3", "info": {"version": "Slurm-25.05.0"}, "paths": paths})
            .to_string()
    };
    let cases = [
        (
            spec(&[
                "/slurmdb/v0.0.40/jobs/",
                "/slurmdb/v0.0.41/jobs/",
                "/slurmdb/v0.0.42/jobs/",
                "/slurmdb/v0.0.43/jobs/",
                "/slurm/v0.0.43/jobs/",
            ]),
            Ok(ApiVersion::V0_0_43),
        ),
        (
            // a site that loads only the newest data_parser, on a Slurm newer than bursar
            spec(&["/slurmdb/v0.0.45/jobs/", "/slurmdb/v0.0.46/jobs/"]),
            Ok(ApiVersion::V0_0_45),
        ),
        (
            // 23.11
            spec(&[
                "/slurmdb/v0.0.38/jobs",
                "/slurmdb/v0.0.39/jobs",
                "/slurmdb/v0.0.40/jobs/",
            ]),
            Ok(ApiVersion::V0_0_40),
        ),
        (
            spec(&["/slurmdb/v0.0.39/jobs", "/slurmdb/v0.0.46/jobs/"]),
            Err(vec!["v0.0.39".to_string(), "v0.0.46".to_string()]),
        ),
    ];
    for (body, expected) in cases {
        let server = MockServer::start().await;
        serve(&server, "/openapi/v3", body).await;
        let (client, _key) = client(&server, None);
        match (client.api_version().await, expected) {
            (Ok(found), Ok(expected)) => assert_eq!(found, expected),
            (Err(RestError::UnsupportedVersion { offered }), Err(expected)) => {
                assert_eq!(offered, expected)
            }
            (other, expected) => panic!("{other:?} vs {expected:?}"),
        }
    }
}

/// A live Slurm 24.11.5 (`deploy/dev/slurm-next.sh`, cluster `next`), 2026-11-26: nine jobs of
/// alice submitted 11:05:02–11:05:03Z (three through job/submit at v0.0.42, v0.0.41 and
/// v0.0.40, a failure, a cancellation, a timeout, a two-task array, one submitted with its
/// environment as an object), each version's `/slurmdb/v0.0.4x/jobs?users=alice` and sacct's
/// narrow columns captured right after they ended.
const NEXT_START: i64 = 1_795_690_800;
const NEXT_END: i64 = 1_795_691_400;

fn next_sacct_records() -> Vec<bursar_pricing::UsageRecord> {
    let text = fixture("real-24.11/sacct-narrow.psv");
    let options = bursar_collectors::sacct::SacctOptions::new()
        .time_zone(bursar_collectors::sacct::SacctTimeZone::Utc);
    let contents = bursar_collectors::sacct::read_all(text.as_bytes(), options).unwrap();
    assert!(contents.quarantined.is_empty());
    contents.records
}

#[tokio::test]
async fn real_24_11_jobs_equal_what_sacct_reports_for_the_same_run_in_every_version() {
    let sacct = next_sacct_records();
    assert_eq!(sacct.len(), 9);
    for version in [
        ApiVersion::V0_0_40,
        ApiVersion::V0_0_41,
        ApiVersion::V0_0_42,
    ] {
        let server = MockServer::start().await;
        serve(
            &server,
            &jobs_path(version),
            fixture(&format!("real-24.11/dbjobs-{version}-users-alice.json")),
        )
        .await;
        let (client, _key) = client(&server, Some(version));
        let fetched = client
            .fetch_jobs(Window::new(NEXT_START, NEXT_END))
            .await
            .unwrap();
        assert_eq!(fetched.quarantined, vec![], "{version}");
        assert_eq!(fetched.records.len(), 9, "{version}");
        for record in &fetched.records {
            // every field: ids (the array's tasks 7_0 and 7_1 are raw ids 9 and 7), times,
            // account, user, partition, QOS, state, elapsed, TRES (24.11's -2 energy left
            // out), time limit, name
            assert_eq!(
                record,
                find(&sacct, &record.cluster, &record.job_id),
                "{version}"
            );
        }
        assert_eq!(find(&fetched.records, "next", "9").display_id, "7_0");
        assert_eq!(find(&fetched.records, "next", "6").state, JobState::Timeout);
    }
}

#[tokio::test]
async fn a_token_24_11_rejects_is_an_auth_error_on_both_apis() {
    // /slurmdb: HTTP 502, errno 7000 "Failed to open slurmdbd connection, authentication error"
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(jobs_path(ApiVersion::V0_0_42)))
        .respond_with(ResponseTemplate::new(502).set_body_raw(
            fixture("real-24.11/dbjobs-v0.0.42-badtoken.json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let (accounting, _key) = client(&server, Some(ApiVersion::V0_0_42));
    let err = accounting
        .fetch_jobs(Window::new(NEXT_START, NEXT_END))
        .await
        .unwrap_err();
    assert!(matches!(err, RestError::Auth { .. }), "{err:?}");
    assert!(
        err.to_string().contains("slurmdbd rejected the token"),
        "{err}"
    );
    assert!(!err.is_retryable());

    // /slurm: HTTP 511, errno 1007 "Protocol authentication error"
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/job/7"))
        .respond_with(ResponseTemplate::new(511).set_body_raw(
            fixture("real-24.11/jobs-v0.0.42-badtoken.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let (controller, _key) = client(&server, Some(ApiVersion::V0_0_42));
    let err = controller.job_states(7).await.unwrap_err();
    assert!(matches!(err, RestError::Auth { .. }), "{err:?}");
    assert!(!err.is_retryable());
}
