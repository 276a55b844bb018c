//! slurmrestd faults: unreachable, timeouts, slow and cut-off bodies, every error answer
//! 22.05 was seen to give, and how each is classified for the caller's retry loop.

#[path = "fixtures/slurmrestd/common.rs"]
mod common;

use std::time::{Duration, Instant};

use bursar_collectors::slurmrestd::{ApiVersion, RestError, SlurmRestClient, Window};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const V38_JOBS: &str = "/slurmdb/v0.0.38/jobs";

fn capture() -> Window {
    Window::new(CAPTURE_START, CAPTURE_END)
}

/// Fetches from a mock that answers every jobs call with `response`.
async fn fetch_answering(response: ResponseTemplate) -> Result<usize, RestError> {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(V38_JOBS))
        .respond_with(response)
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    client
        .fetch_jobs(capture())
        .await
        .map(|fetched| fetched.records.len())
}

fn json_answer(status: u16, body: String) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body, "application/json")
}

#[tokio::test]
async fn connection_refused_is_unreachable_and_retryable() {
    // Bound and never listening, and kept so for the whole test: connecting is refused, and
    // no other test can be given the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let key = key_file();
    let uri = format!("http://127.0.0.1:{port}");
    let client = SlurmRestClient::new(config(&uri, &key, Some(ApiVersion::V0_0_38))).unwrap();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    assert!(matches!(err, RestError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// A listener whose accept queue is full answers no new connection: the connect times out,
/// and that is a timeout naming the connect timeout, not the whole call's.
#[tokio::test]
async fn a_connect_that_hangs_is_a_timeout_of_the_connect_timeout() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    // Fill the queue (never accepted); the kernel then drops further connection attempts.
    let mut queued = Vec::new();
    for _ in 0..8 {
        if let Ok(Ok(stream)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            queued.push(stream);
        }
    }
    let key = key_file();
    let mut config = config(&format!("http://{addr}"), &key, Some(ApiVersion::V0_0_38));
    config.connect_timeout = Duration::from_millis(300);
    config.timeout = Duration::from_secs(20);
    let client = SlurmRestClient::new(config).unwrap();
    let started = Instant::now();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    let RestError::Timeout { timeout, .. } = &err else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(*timeout, Duration::from_millis(300));
    assert!(err.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop((listener, queued));
}

/// An `https` base URL is spoken TLS to: the server's first bytes are a TLS handshake record
/// (its ClientHello), and a server that answers in plain HTTP is a handshake failure, reported
/// as unreachable with rustls's reason rather than as a broken or garbled answer.
#[tokio::test]
async fn an_https_url_speaks_tls_and_a_failed_handshake_says_why() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut first = [0u8; 3];
        stream.read_exact(&mut first).await.unwrap();
        let answer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let _ = stream.write_all(answer.as_bytes()).await;
        first
    });
    let key = key_file();
    let client = SlurmRestClient::new(config(
        &format!("https://{addr}"),
        &key,
        Some(ApiVersion::V0_0_38),
    ))
    .unwrap();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    let first = server.await.unwrap();
    // 0x16: a handshake record; 0x03: TLS's major version.
    assert_eq!(first[..2], [0x16, 0x03], "{first:?}");
    let RestError::Unreachable { url, message } = &err else {
        panic!("expected unreachable, got {err:?}");
    };
    assert!(url.starts_with(&format!("https://{addr}/")), "{url}");
    assert!(
        message.contains("corrupt message") || message.contains("InvalidContentType"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_slower_than_the_timeout_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            json_answer(200, fixture("real-22.05/dbjobs-all.json"))
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let key = key_file();
    let mut config = config(&server.uri(), &key, Some(ApiVersion::V0_0_38));
    config.timeout = Duration::from_millis(300);
    let client = SlurmRestClient::new(config).unwrap();
    let started = Instant::now();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    // Long before the server answers (the margin is for a busy machine).
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "gave up in time"
    );
    let RestError::Timeout { timeout, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*timeout, Duration::from_millis(300));
    assert!(err.is_retryable());
}

/// A one-connection HTTP server on 127.0.0.1 that sends the status line and headers at once,
/// then `body` in `chunks` pieces `pause` apart, then closes (even if `declared` promised
/// more). Ends by itself.
async fn dribbling_server(
    body: &'static [u8],
    declared: usize,
    chunks: usize,
    pause: Duration,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let Ok(Ok((mut socket, _))) =
            tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
        else {
            return;
        };
        let mut request = vec![0u8; 8192];
        let _ = socket.read(&mut request).await;
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
        );
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for piece in body.chunks(body.len().div_ceil(chunks)) {
            tokio::time::sleep(pause).await;
            if socket.write_all(piece).await.is_err() || socket.flush().await.is_err() {
                return;
            }
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_slow_body_hits_the_total_timeout() {
    let body: &'static [u8] = br#"{"meta": {}, "errors": [], "jobs": []}"#;
    // A byte every 800 ms: the whole body would take 31 s.
    let uri = dribbling_server(body, body.len(), body.len(), Duration::from_millis(800)).await;
    let key = key_file();
    let mut config = config(&uri, &key, Some(ApiVersion::V0_0_38));
    config.timeout = Duration::from_millis(700);
    let client = SlurmRestClient::new(config).unwrap();
    let started = Instant::now();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    assert!(matches!(err, RestError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn a_connection_cut_mid_body_is_a_retryable_transport_error() {
    let body: &'static [u8] = br#"{"meta": {}, "errors": [], "jobs": [{"job_id": 1"#;
    let uri = dribbling_server(body, 4096, 1, Duration::from_millis(10)).await;
    let key = key_file();
    let client = SlurmRestClient::new(config(&uri, &key, Some(ApiVersion::V0_0_38))).unwrap();
    let err = client.fetch_jobs(capture()).await.unwrap_err();
    assert!(matches!(err, RestError::Transport { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn truncated_json_is_a_bad_payload_with_an_excerpt() {
    let full = fixture("real-22.05/dbjobs-all.json");
    let cut = full[..full.len() / 2].to_string();
    let err = fetch_answering(json_answer(200, cut)).await.unwrap_err();
    let RestError::BadPayload { problem, excerpt } = &err else {
        panic!("{err:?}")
    };
    assert!(problem.contains("not valid JSON"), "{problem}");
    assert!(
        excerpt.starts_with(r#"{ "meta": { "plugin": { "type": "openapi\/dbv0.0.38""#),
        "{excerpt}"
    );
    assert!(excerpt.len() < 300, "{excerpt}");
    assert!(err.is_retryable());

    let html = ResponseTemplate::new(200).set_body_raw("<html>proxy error</html>", "text/html");
    let err = fetch_answering(html).await.unwrap_err();
    assert!(matches!(err, RestError::BadPayload { .. }), "{err:?}");
}

#[tokio::test]
async fn the_22_05_bad_token_answer_on_slurm_paths_is_an_auth_error() {
    // HTTP 500 "slurmctld config is unable to load": bad signature, expired, wrong user
    let err = fetch_answering(json_answer(500, fixture("real-22.05/tok-badkey.json")))
        .await
        .unwrap_err();
    let RestError::Auth { user, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(user, "slurm");
    assert!(
        message.contains("slurmctld config is unable to load"),
        "{message}"
    );
    assert!(message.contains("expired or wrong-key token"), "{message}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn the_22_05_bad_token_answer_on_slurmdb_paths_is_an_auth_error_not_an_empty_page() {
    // HTTP 200 with jobs: [] and errors[] 1007: must not read as "no jobs in this window"
    let err = fetch_answering(json_answer(
        200,
        fixture("real-22.05/dbjobs-badtoken-observed.json"),
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, RestError::Auth { .. }), "{err:?}");
    assert!(
        err.to_string().contains("Protocol authentication error"),
        "{err}"
    );
}

#[tokio::test]
async fn other_errors_inside_a_200_page_fail_the_call() {
    let body = r#"{"errors": [{"description": "Unable to connect to database",
        "error_number": 7000, "error": "Unable to connect to database"}], "jobs": []}"#;
    let err = fetch_answering(json_answer(200, body.into()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RestError::Server {
                status: 200,
                error_number: Some(7000),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn http_401_is_an_auth_error() {
    let answer =
        ResponseTemplate::new(401).set_body_raw(fixture("real-22.05/no-token.txt"), "text/plain");
    let err = fetch_answering(answer).await.unwrap_err();
    assert!(matches!(err, RestError::Auth { .. }), "{err:?}");
    assert!(err.to_string().contains("Authentication failure"), "{err}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn server_errors_carry_slurms_message_and_are_classed() {
    // 22.05: an unknown query parameter (there is no user filter)
    let err = fetch_answering(json_answer(
        500,
        fixture("real-22.05/dbjobs-q-users-alice.json"),
    ))
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "slurmrestd answered HTTP 500: Unknown Query field (Query empty or not RFC7320 compliant)"
    );
    assert_eq!(err.slurm_error_number(), Some(9000));
    assert!(!err.is_retryable(), "a bad query stays bad");

    // slurmctld down behind slurmrestd: retry later
    let down = r#"{"errors": [{"description": "Unable to contact slurm controller",
        "error_number": 1001, "error": "Unable to contact slurm controller (connect failure)"}]}"#;
    let err = fetch_answering(json_answer(500, down.into()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RestError::Server { status: 500, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());

    let err = fetch_answering(ResponseTemplate::new(502))
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");

    let unparsable =
        ResponseTemplate::new(400).set_body_raw("Unable to parse query.", "text/plain");
    let err = fetch_answering(unparsable).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "slurmrestd answered HTTP 400: Unable to parse query."
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn redirects_are_not_followed_so_tokens_stay_home() {
    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&elsewhere)
        .await;
    let answer = ResponseTemplate::new(302)
        .insert_header("Location", format!("{}/steal", elsewhere.uri()).as_str());
    let err = fetch_answering(answer).await.unwrap_err();
    assert!(
        matches!(err, RestError::Server { status: 302, .. }),
        "{err:?}"
    );
    elsewhere.verify().await;
}

#[tokio::test]
async fn a_failing_slice_fails_the_whole_window() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(V38_JOBS))
        .and(wiremock::matchers::query_param(
            "start_time",
            "2026-11-22T00:00:00",
        ))
        .respond_with(json_answer(200, fixture("real-22.05/dbjobs-all.json")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(V38_JOBS))
        .and(wiremock::matchers::query_param(
            "start_time",
            "2026-11-23T00:00:00",
        ))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let t0 = 1_795_305_600; // 2026-11-22T00:00:00Z
    let err = client
        .fetch_jobs(Window::new(t0, t0 + 2 * 86_400))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RestError::Server { status: 503, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn bad_configurations_are_refused_up_front() {
    let key = key_file();
    let base = config("http://127.0.0.1:1", &key, None);
    let cases = [
        ("base URL", {
            let mut c = base.clone();
            c.base_url = "not a url".into();
            c
        }),
        ("not an http(s) URL", {
            let mut c = base.clone();
            c.base_url = "ftp://127.0.0.1/".into();
            c
        }),
        ("cluster name", {
            let mut c = base.clone();
            c.cluster = "onprem,cloud".into();
            c
        }),
        ("below a minute", {
            let mut c = base.clone();
            c.max_window = Duration::from_secs(1);
            c
        }),
        ("timeouts", {
            let mut c = base.clone();
            c.timeout = Duration::ZERO;
            c
        }),
    ];
    for (words, config) in cases {
        let err = SlurmRestClient::new(config).unwrap_err();
        assert!(matches!(err, RestError::Config(_)), "{err:?}");
        assert!(err.to_string().contains(words), "{err}");
        assert!(!err.is_retryable());
    }
}
