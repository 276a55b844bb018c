//! Faults: a closed port, timeouts, slow and cut bodies, dstack's error answers (real
//! captures), an empty page, bad configuration. Every server here is on 127.0.0.1 and stops
//! by itself.

#[path = "fixtures/dstack/support.rs"]
mod support;

use std::time::Duration;

use bursar_collectors::dstack::{DstackClient, DstackConfig, DstackError, RunCursor};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn quick_client(base_url: &str, timeout: Duration) -> DstackClient {
    let mut config = config(base_url);
    config.timeout = timeout;
    DstackClient::new(config).unwrap().with_clock(now)
}

async fn list_answers(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/runs/list"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_retryable() {
    // Bound and never listening, and kept so for the whole test: connecting is refused, and
    // no other test can be given the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let client = quick_client(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2));
    let err = client.fetch_since(None, 1).await.unwrap_err();
    assert!(matches!(err, DstackError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("unreachable"), "{err}");
}

#[tokio::test]
async fn a_server_that_does_not_answer_in_time_is_a_timeout() {
    let server = list_answers(
        ResponseTemplate::new(200)
            .set_body_string("[]")
            .set_delay(Duration::from_secs(30)),
    )
    .await;
    let client = quick_client(&server.uri(), Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = client.fetch_since(None, 1).await.unwrap_err();
    assert!(matches!(err, DstackError::Timeout { .. }), "{err:?}");
    assert!(err.is_retryable());
    // Long before the server answers (the margin is for a busy machine).
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// Headers at once, then the body one byte every 200 ms: the timeout covers the body too.
#[tokio::test]
async fn a_slow_body_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 64\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        // Bounded: at most 20 bytes over 4 s, then the task ends on its own.
        for _ in 0..20 {
            if socket.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let client = quick_client(&format!("http://{addr}"), Duration::from_millis(700));
    let err = client.fetch_since(None, 1).await.unwrap_err();
    assert!(matches!(err, DstackError::Timeout { .. }), "{err:?}");
    server.abort();
}

/// The connection drops after part of the body: a cut answer, worth retrying.
#[tokio::test]
async fn a_body_cut_by_a_dropped_connection_is_a_bad_payload() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = fixture("runs_list_seeded.resp.json");
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&body.as_bytes()[..1000]).await;
        // Dropping the socket closes the connection mid-body.
    });
    let client = quick_client(&format!("http://{addr}"), Duration::from_secs(2));
    let err = client.fetch_since(None, 1).await.unwrap_err();
    assert!(matches!(err, DstackError::BadPayload { .. }), "{err:?}");
    assert!(err.is_retryable());
    server.await.unwrap();
}

#[tokio::test]
async fn truncated_json_is_a_bad_payload() {
    let full = fixture("runs_list_seeded.resp.json");
    let cut = full[..full.len() / 2].to_string();
    let server =
        list_answers(ResponseTemplate::new(200).set_body_raw(cut, "application/json")).await;
    let cursor = RunCursor {
        submitted_at: time("2026-01-05T08:00:00Z"),
        run_id: "47196fe6-c381-4ec8-81b5-1d1d218e43fc".into(),
    };
    let err = client(&server.uri(), 100)
        .fetch_since(Some(cursor), 1)
        .await
        .unwrap_err();
    let DstackError::BadPayload { detail, url } = &err else {
        panic!("{err:?}")
    };
    assert!(detail.contains("EOF"), "{detail}");
    assert!(url.ends_with("/api/runs/list"));
    assert!(err.is_retryable());
}

#[tokio::test]
async fn a_500_is_a_retryable_server_error() {
    let server = list_answers(
        ResponseTemplate::new(500).set_body_string(fixture("bug500_uuid5_runs_get.resp.txt")),
    )
    .await;
    let err = client(&server.uri(), 100)
        .fetch_since(None, 1)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        DstackError::Server {
            url: format!("{}/api/runs/list", server.uri()),
            status: 500,
            code: None,
            message: "Internal Server Error".into(),
        }
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn a_missing_or_bad_token_is_an_auth_error() {
    // 401 without a token (captures/notoken.txt), 403 with a wrong one (badtoken).
    let notoken = fixture("notoken.txt");
    let notoken_body = notoken.split(" HTTP").next().unwrap().to_string();
    for (status, body, message) in [
        (401, notoken_body, "Not authenticated"),
        (403, fixture("badtoken.resp.json"), "Invalid token"),
    ] {
        let server =
            list_answers(ResponseTemplate::new(status).set_body_raw(body, "application/json"))
                .await;
        let err = client(&server.uri(), 100)
            .fetch_since(None, 1)
            .await
            .unwrap_err();
        let DstackError::Auth {
            status: got,
            message: msg,
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(*got, status);
        assert_eq!(msg, message);
        assert!(!err.is_retryable());
    }
}

#[tokio::test]
async fn validation_and_missing_project_answers_are_not_retried() {
    let server = list_answers(
        ResponseTemplate::new(422)
            .set_body_raw(fixture("validation_error.resp.json"), "application/json"),
    )
    .await;
    let err = client(&server.uri(), 100)
        .fetch_since(None, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DstackError::Server { status: 422, message, .. } if message == "body.limit: Input should be less than or equal to 100"),
        "{err:?}"
    );
    assert!(!err.is_retryable());

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_raw(fixture("missing_project.resp.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let err = client(&server.uri(), 100)
        .get_run(&bursar_collectors::dstack::RunRef::Name("x".into()))
        .await
        .unwrap_err();
    assert!(err.is_not_found());
    assert!(err.to_string().contains("Not found"), "{err}");
}

#[tokio::test]
async fn errors_stop_refresh_only_when_the_server_is_out_of_reach() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/project/hpc/runs/get"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_raw(fixture("badtoken.resp.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let err = client(&server.uri(), 100)
        .refresh_runs(&["ba76e733-df65-489a-93c0-d52b621ae7d3".to_string()])
        .await
        .unwrap_err();
    assert!(
        matches!(err, DstackError::Auth { status: 403, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_empty_page_changes_nothing() {
    let server =
        list_answers(ResponseTemplate::new(200).set_body_raw("[]", "application/json")).await;
    let cursor = RunCursor {
        submitted_at: time("2026-11-21T23:53:30.887797Z"),
        run_id: "cb1827ff-7892-4c71-bc49-4bea7fc54155".into(),
    };
    let page = client(&server.uri(), 100)
        .fetch_since(Some(cursor.clone()), 3)
        .await
        .unwrap();
    assert!(page.records.is_empty() && page.runs.is_empty() && page.quarantined.is_empty());
    assert_eq!(page.next_cursor, Some(cursor));
    assert!(!page.more);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1, "a short page ends the pass");
    let body: serde_json::Value = requests[0].body_json().unwrap();
    assert_eq!(
        body["prev_submitted_at"], "2026-11-21T23:53:30.887797Z",
        "µs kept"
    );
    assert_eq!(body["prev_run_id"], "cb1827ff-7892-4c71-bc49-4bea7fc54155");
}

#[tokio::test]
async fn a_page_that_is_not_a_list_of_runs_is_refused() {
    for body in ["{\"detail\":\"odd\"}", "[{\"name\":\"no id\"}]"] {
        let server =
            list_answers(ResponseTemplate::new(200).set_body_raw(body, "application/json")).await;
        let err = client(&server.uri(), 100)
            .fetch_since(None, 1)
            .await
            .unwrap_err();
        assert!(
            matches!(err, DstackError::BadPayload { .. }),
            "{body}: {err:?}"
        );
    }
}

#[tokio::test]
async fn the_token_is_sent_as_bearer_and_never_printed() {
    let server =
        list_answers(ResponseTemplate::new(200).set_body_raw("[]", "application/json")).await;
    let client = client(&server.uri(), 100);
    client.fetch_since(None, 1).await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].headers.get("authorization").unwrap(),
        &format!("Bearer {TOKEN}")
    );
    assert_eq!(requests[0].method.as_str(), "POST");
    let shown = format!("{client:?} {:?}", config(&server.uri()));
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("[redacted]"));
}

#[test]
fn bad_configuration_is_refused() {
    type Change = fn(&mut DstackConfig);
    let cases: [(&str, Change); 5] = [
        ("page_size", |c| c.page_size = 0),
        ("page_size", |c| c.page_size = 101),
        ("project", |c| c.project = "hpc/../admin".into()),
        ("base_url", |c| c.base_url = "ftp://127.0.0.1".into()),
        ("timeout", |c| c.timeout = Duration::ZERO),
    ];
    for (what, change) in cases {
        let mut config = config("http://127.0.0.1:3000");
        change(&mut config);
        let err = DstackClient::new(config).unwrap_err();
        assert!(
            matches!(&err, DstackError::Config(m) if m.contains(what)),
            "{what}: {err:?}"
        );
        assert!(!err.is_retryable());
    }
    // A trailing slash is fine.
    DstackClient::new(config("http://127.0.0.1:3000/")).unwrap();
}
