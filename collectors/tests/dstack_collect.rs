//! Collection against a mock dstack (wiremock on 127.0.0.1) serving the real captures:
//! keyset pagination, runs with cut submission lists, the unfinished set, deleted runs, events.

#[path = "fixtures/dstack/support.rs"]
mod support;

use std::collections::HashSet;
use std::sync::Arc;

use bursar_collectors::dstack::{DstackError, EventCursor, RunCursor, RunRef};
use serde_json::Value;
use support::*;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Serves `runs` at `/api/runs/list` the way dstack 0.22.5 does.
async fn serve_list(server: &MockServer, runs: Arc<RunsList>) {
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(SharedResponder(runs))
        .mount(server)
        .await;
}

struct SharedResponder(Arc<RunsList>);

impl Respond for SharedResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

fn ok_json(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/json")
}

async fn serve_get(server: &MockServer, request: Value, body: String) {
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .and(body_json(request))
        .respond_with(ok_json(body))
        .mount(server)
        .await;
}

/// The seeded list with four runs moved onto one `submitted_at`, so pages of 3 cut through a
/// tie that dstack orders by id, descending.
fn runs_with_a_tie() -> Vec<Value> {
    let mut runs: Vec<Value> =
        serde_json::from_str(&fixture("runs_list_seeded.resp.json")).unwrap();
    for run in &mut runs {
        let name = run["run_spec"]["run_name"].as_str().unwrap();
        if [
            "seed-failed-cpu",
            "seed-stopped",
            "seed-onprem-ssh",
            "seed-spot-retry",
        ]
        .contains(&name)
        {
            run["submitted_at"] = "2026-01-05T12:00:00Z".into();
        }
    }
    runs
}

#[tokio::test]
async fn pages_through_ties_without_duplicates_or_gaps() {
    let server = MockServer::start().await;
    let list = Arc::new(RunsList::new(runs_with_a_tie()));
    serve_list(&server, list.clone()).await;
    let client = client(&server.uri(), 3);

    // One page per call, the cursor persisted (as JSON) between calls, as the gateway does.
    let mut stored: Option<String> = None;
    let mut order: Vec<String> = Vec::new();
    let mut records = 0;
    for _ in 0..10 {
        let cursor: Option<RunCursor> = stored.as_deref().map(|s| serde_json::from_str(s).unwrap());
        let page = client.fetch_since(cursor.clone(), 1).await.unwrap();
        records += page.records.len();
        order.extend(page.runs.iter().map(|r| r.run_id.clone()));
        if page.runs.is_empty() {
            assert_eq!(page.next_cursor, cursor, "nothing new: the cursor stays");
            assert!(!page.more);
            break;
        }
        stored = Some(serde_json::to_string(&page.next_cursor.unwrap()).unwrap());
    }
    assert_eq!(order, list.ids(), "every run once, in dstack's order");
    assert_eq!(order.iter().collect::<HashSet<_>>().len(), 10);
    assert_eq!(records, 9);

    // The tie group came back in descending id order, across a page boundary.
    let bodies = list.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 5, "4 pages of ≤3 and one empty");
    assert!(bodies[0].get("prev_submitted_at").is_none());
    // Pages 1 and 2 both end inside the four-way tie at 12:00: the id breaks it.
    assert_eq!(bodies[1]["prev_submitted_at"], "2026-01-05T12:00:00Z");
    assert_eq!(bodies[2]["prev_submitted_at"], "2026-01-05T12:00:00Z");
    assert_ne!(bodies[1]["prev_run_id"], bodies[2]["prev_run_id"]);
    for body in &bodies {
        assert_eq!(body["project_name"], "hpc");
        assert_eq!(body["limit"], 3);
        assert_eq!(body["ascending"], true);
        assert_eq!(body["only_active"], false);
        assert_eq!(body["include_jobs"], true);
        assert_eq!(body["job_submissions_limit"], 10);
    }
}

#[tokio::test]
async fn one_call_reads_many_pages_and_says_when_there_is_more() {
    let server = MockServer::start().await;
    let list = Arc::new(RunsList::new(runs_with_a_tie()));
    serve_list(&server, list.clone()).await;
    let client = client(&server.uri(), 3);

    let first = client.fetch_since(None, 2).await.unwrap();
    assert_eq!(first.runs.len(), 6);
    assert!(first.more);
    let rest = client
        .fetch_since(first.next_cursor.clone(), 10)
        .await
        .unwrap();
    assert_eq!(rest.runs.len(), 4);
    assert!(!rest.more);
    let all: Vec<String> = first
        .runs
        .iter()
        .chain(&rest.runs)
        .map(|r| r.run_id.clone())
        .collect();
    assert_eq!(all, list.ids());
    let last = list.ids().last().cloned().unwrap();
    assert_eq!(rest.next_cursor.unwrap().run_id, last);

    // The same from the start in one go, page size 100: the real list, every record once.
    let server = MockServer::start().await;
    serve_list(
        &server,
        Arc::new(RunsList::from_fixture("runs_list_seeded.resp.json")),
    )
    .await;
    let page = support::client(&server.uri(), 100)
        .fetch_since(None, 5)
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 10);
    assert_eq!(page.records.len(), 9);
    assert!(page.unfinished_run_ids.is_empty());
    assert!(page.quarantined.is_empty());
    // 2.6445 + 6.8064 + 0.182 + 0.0156 + 0.138 + 0 + 0.0192 = 9.8057 by dstack.
    assert_eq!(charge_micros(&page.records), 9_805_726);
    assert_eq!(cents(9_805_726), cents(9_805_700));
}

/// A run with 12 submissions: the list keeps the latest 10, so the client reads it whole with
/// `runs/get {id}` and charges all 12, each once.
#[tokio::test]
async fn more_than_ten_submissions_are_read_whole() {
    let server = MockServer::start().await;
    // dstack's cost of all 12: 12 × 0.1621 × 10/60 = 0.3242.
    let run = many_submissions_run(12, "0.3242");
    let id = run["id"].as_str().unwrap().to_string();
    serve_list(&server, Arc::new(RunsList::new(vec![run.clone()]))).await;
    serve_get(&server, serde_json::json!({ "id": id }), run.to_string()).await;

    let page = client(&server.uri(), 100)
        .fetch_since(None, 1)
        .await
        .unwrap();
    assert_eq!(page.records.len(), 12);
    let ids: HashSet<&str> = page.records.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids.len(), 12);
    assert_eq!(page.records[0].display_id, "seed-many-retries/0/0");
    assert_eq!(page.records[11].display_id, "seed-many-retries/0/11");
    // 12 × round(0.1621 × 600 s / 3600 s) = 12 × 27,017 µ$; dstack: 0.3242.
    assert_eq!(charge_micros(&page.records), 324_204);
    assert_eq!(cents(charge_micros(&page.records)), cents(324_200));
    let gets: Vec<Request> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/api/project/hpc/runs/get")
        .collect();
    assert_eq!(gets.len(), 1);
}

/// The real capture of a list that dropped a submission (`job_submissions_limit: 1`):
/// seed-spot-retry shows only its second attempt there; runs/get has both.
#[tokio::test]
async fn a_real_cut_list_is_completed_with_runs_get() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .respond_with(ok_json(fixture("runs_list_subs_limit1.resp.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    serve_get(
        &server,
        serde_json::json!({ "id": "ba76e733-df65-489a-93c0-d52b621ae7d3" }),
        fixture("runs_get_spot_retry.resp.json"),
    )
    .await;
    let page = client(&server.uri(), 100)
        .fetch_since(None, 1)
        .await
        .unwrap();
    let spot: Vec<_> = page
        .records
        .iter()
        .filter(|r| r.display_id.starts_with("seed-spot-retry/"))
        .collect();
    assert_eq!(spot.len(), 2, "both attempts, not just the listed one");
    assert_eq!(page.records.len(), 9);
}

#[tokio::test]
async fn a_cut_run_that_runs_get_cannot_serve_is_polled_later_not_half_recorded() {
    let server = MockServer::start().await;
    let run = many_submissions_run(11, "0.2972");
    let id = run["id"].as_str().unwrap().to_string();
    serve_list(&server, Arc::new(RunsList::new(vec![run]))).await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(
            ResponseTemplate::new(500).set_body_string(fixture("bug500_uuid5_runs_get.resp.txt")),
        )
        .mount(&server)
        .await;
    let page = client(&server.uri(), 100)
        .fetch_since(None, 1)
        .await
        .unwrap();
    assert!(page.records.is_empty());
    assert_eq!(page.unfinished_run_ids, std::slice::from_ref(&id));
    assert_eq!(page.quarantined.len(), 1);
    assert!(page.quarantined[0].reason.contains("Internal Server Error"));
    assert_eq!(
        page.next_cursor.unwrap().run_id,
        id,
        "the cursor still moves on"
    );
}

/// A run listed while pending is re-polled by id until dstack reports it finished.
#[tokio::test]
async fn unfinished_runs_are_refreshed_until_finished() {
    let server = MockServer::start().await;
    serve_list(
        &server,
        Arc::new(RunsList::from_fixture("runs_list_poll.resp.json")),
    )
    .await;
    let client = client(&server.uri(), 100);
    let page = client.fetch_since(None, 1).await.unwrap();
    assert_eq!(
        page.unfinished_run_ids,
        ["cb1827ff-7892-4c71-bc49-4bea7fc54155"]
    );
    assert!(page.records.is_empty(), "no submission got an instance");

    // Later runs/get {id} shows it stopped (terminated); carol's run is still terminating.
    serve_get(
        &server,
        serde_json::json!({ "id": "cb1827ff-7892-4c71-bc49-4bea7fc54155" }),
        fixture("runs_get_alice.resp.json"),
    )
    .await;
    serve_get(
        &server,
        serde_json::json!({ "id": "1eea60d1-61e3-46f4-8672-1717ca17a886" }),
        fixture("runs_get_carol_pending.resp.json"),
    )
    .await;
    let ids = [
        "cb1827ff-7892-4c71-bc49-4bea7fc54155".to_string(),
        "1eea60d1-61e3-46f4-8672-1717ca17a886".to_string(),
        "cb1827ff-7892-4c71-bc49-4bea7fc54155".to_string(),
    ];
    let outcome = client.refresh_runs(&ids).await.unwrap();
    assert_eq!(
        outcome.still_unfinished,
        ["1eea60d1-61e3-46f4-8672-1717ca17a886"]
    );
    assert_eq!(outcome.runs.len(), 2, "a repeated id is read once");
    assert_eq!(outcome.runs[0].status, "terminated");
    assert!(outcome.records.is_empty());
    assert!(outcome.quarantined.is_empty());
}

#[tokio::test]
async fn refresh_reads_finished_runs_whole_and_survives_one_bad_run() {
    let server = MockServer::start().await;
    serve_get(
        &server,
        serde_json::json!({ "id": "ba76e733-df65-489a-93c0-d52b621ae7d3" }),
        fixture("runs_get_spot_retry.resp.json"),
    )
    .await;
    // dstack 0.22.5 answers 500 for a run row its own model rejects (REPORT §7).
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .and(body_json(
            serde_json::json!({ "id": "47196fe6-c381-4ec8-81b5-1d1d218e43fc" }),
        ))
        .respond_with(
            ResponseTemplate::new(500).set_body_string(fixture("bug500_uuid5_runs_get.resp.txt")),
        )
        .mount(&server)
        .await;
    // A run that is gone: 400 resource_not_exists.
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .and(body_json(
            serde_json::json!({ "id": "00000000-0000-4000-8000-000000000000" }),
        ))
        .respond_with(ResponseTemplate::new(400).set_body_raw(
            fixture("member_runs_get_missing.resp.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let ids = [
        "47196fe6-c381-4ec8-81b5-1d1d218e43fc".to_string(),
        "ba76e733-df65-489a-93c0-d52b621ae7d3".to_string(),
        "00000000-0000-4000-8000-000000000000".to_string(),
    ];
    let outcome = client(&server.uri(), 100).refresh_runs(&ids).await.unwrap();
    assert_eq!(outcome.records.len(), 2);
    assert_eq!(charge_micros(&outcome.records), 181_993);
    assert_eq!(
        outcome.still_unfinished,
        ["47196fe6-c381-4ec8-81b5-1d1d218e43fc"],
        "the 500 is polled again; the missing run is dropped"
    );
    assert_eq!(outcome.quarantined.len(), 2);
    assert!(outcome.quarantined[0].reason.contains("500"));
    assert!(outcome.quarantined[0].raw.contains("Internal Server Error"));
    assert!(outcome.quarantined[1].reason.contains("Run not found"));
    assert!(outcome.quarantined[1].reason.contains("no longer polled"));
}

#[tokio::test]
async fn deleted_runs_are_listed_charged_and_found_by_id_only() {
    let server = MockServer::start().await;
    serve_list(
        &server,
        Arc::new(RunsList::from_fixture("final_runs_list_all.resp.json")),
    )
    .await;
    serve_get(
        &server,
        serde_json::json!({ "id": "3b671bd9-c20d-4320-970e-fe0e9f1637e3" }),
        fixture("runs_get_deleted_byid.resp.json"),
    )
    .await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .and(body_json(serde_json::json!({ "run_name": "seed-deleted" })))
        .respond_with(ResponseTemplate::new(400).set_body_raw(
            fixture("runs_get_deleted_byname.resp.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let client = client(&server.uri(), 100);
    let page = client.fetch_since(None, 1).await.unwrap();
    let deleted = page
        .runs
        .iter()
        .find(|r| r.run_name == "seed-deleted")
        .unwrap();
    assert!(deleted.deleted);
    let record = page
        .records
        .iter()
        .find(|r| r.display_id == "seed-deleted/0/0")
        .unwrap();
    assert_eq!(charge_micros(std::slice::from_ref(record)), 19_200);

    let by_id = client
        .get_run(&RunRef::Id("3b671bd9-c20d-4320-970e-fe0e9f1637e3".into()))
        .await
        .unwrap();
    assert!(by_id.deleted);
    assert_eq!(by_id.run_name, "seed-deleted");
    let by_name = client
        .get_run(&RunRef::Name("seed-deleted".into()))
        .await
        .unwrap_err();
    assert!(by_name.is_not_found(), "{by_name:?}");
    assert!(!by_name.is_retryable());
    assert!(matches!(
        by_name,
        DstackError::Server { status: 400, ref code, .. } if code.as_deref() == Some("resource_not_exists")
    ));
}

#[tokio::test]
async fn get_run_by_name_for_a_multinode_run() {
    let server = MockServer::start().await;
    serve_get(
        &server,
        serde_json::json!({ "run_name": "seed-multinode" }),
        fixture("final_alice_runs_get.resp.json"),
    )
    .await;
    let run = client(&server.uri(), 100)
        .get_run(&RunRef::Name("seed-multinode".into()))
        .await
        .unwrap();
    assert_eq!(run.id, "8eaa23d4-2c1b-4b26-8e28-fb072a4a1d8a");
    assert_eq!(run.status, "done");
    assert_eq!(run.user, "admin");
    assert_eq!(run.submitted_at, time("2026-01-05T09:00:00Z"));
}

#[tokio::test]
async fn a_run_with_a_missing_field_is_quarantined_and_the_others_kept() {
    let server = MockServer::start().await;
    let mut runs: Vec<Value> =
        serde_json::from_str(&fixture("final_runs_list_all.resp.json")).unwrap();
    for run in &mut runs {
        if run["run_spec"]["run_name"] == "seed-stopped" {
            run.as_object_mut().unwrap().remove("jobs");
        }
    }
    serve_list(&server, Arc::new(RunsList::new(runs))).await;
    let page = client(&server.uri(), 3).fetch_since(None, 5).await.unwrap();
    assert_eq!(page.records.len(), 8, "9 minus seed-stopped's one");
    assert_eq!(page.runs.len(), 6);
    let [q] = &page.quarantined[..] else {
        panic!("{:?}", page.quarantined)
    };
    assert!(q.reason.contains("0b467828-3795-4614-96d3-958aef0c6314"));
    assert!(q.reason.contains("jobs"));
    assert!(q.raw.contains("seed-stopped"));
    assert_eq!(
        page.next_cursor.unwrap().run_id,
        "3b671bd9-c20d-4320-970e-fe0e9f1637e3",
        "seed-deleted, the newest"
    );
}

#[tokio::test]
async fn the_events_feed_names_the_runs_that_changed() {
    let server = MockServer::start().await;
    let events: Vec<Value> = serde_json::from_str(&fixture("events_list_asc.resp.json")).unwrap();
    let last = events.last().unwrap().clone();
    Mock::given(method("POST"))
        .and(path("/api/events/list"))
        .and(body_json(serde_json::json!({
            "include_target_types": ["run"], "limit": 100, "ascending": true
        })))
        .respond_with(ok_json(fixture("events_list_asc.resp.json")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/events/list"))
        .and(body_json(serde_json::json!({
            "include_target_types": ["run"], "limit": 100, "ascending": true,
            "prev_recorded_at": last["recorded_at"], "prev_id": last["id"],
        })))
        .respond_with(ok_json("[]".into()))
        .mount(&server)
        .await;
    let client = client(&server.uri(), 100);
    let changed = client.run_events_since(None, 3).await.unwrap();
    assert_eq!(
        changed.run_ids,
        [
            "df790e28-0aea-4a96-830d-ec8596db1039",
            "c2e125ca-4ab2-4329-975e-dd346a6255db",
            "cb1827ff-7892-4c71-bc49-4bea7fc54155",
        ]
    );
    let cursor = changed.next_cursor.clone().unwrap();
    assert_eq!(cursor.event_id.as_deref(), last["id"].as_str());
    assert_eq!(cursor.recorded_at, time("2026-11-21T23:54:38.776453Z"));
    assert!(!changed.more);

    let again = client
        .run_events_since(Some(cursor.clone()), 3)
        .await
        .unwrap();
    assert!(again.run_ids.is_empty());
    assert_eq!(again.next_cursor, Some(cursor.clone()));

    let rewound: EventCursor = cursor.rewound(chrono::Duration::minutes(5));
    assert_eq!(rewound.event_id, None);
    assert_eq!(rewound.recorded_at, time("2026-11-21T23:49:38.776453Z"));
}
