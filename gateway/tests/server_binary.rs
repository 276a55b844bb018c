//! The real `bursar serve`: binds a free port, says where, answers, stops on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bursar_gateway::auth::{generate_key_file, Role, TokenIssuer};
use secrecy::ExposeSecret;

#[tokio::test]
async fn serve_listens_answers_and_stops_gracefully_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    generate_key_file(dir.path().join("jwt.key")).unwrap();
    let config = dir.path().join("bursar.yaml");
    std::fs::write(
        &config,
        "database: sqlite://ledger.db\nauth:\n  hs256_key_file: jwt.key\naccounts:\n  physics: {}\n",
    )
    .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--worker-threads",
            "1",
            "--config",
        ])
        .arg(&config)
        .env_remove("BURSAR_LISTEN")
        .env_remove("BURSAR_DATABASE")
        .env("BURSAR_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();

    // The first line of standard output names the address.
    let stdout = child.stdout.take().unwrap();
    let (lines, first) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = lines.send(line);
    });
    let line = match first.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            panic!("bursar serve printed no address within 60 s");
        }
    };
    let url = line
        .trim()
        .strip_prefix("bursar listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(!url.ends_with(":0"), "{url}");

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let health = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let body: serde_json::Value = health.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"status": "ok"}));
    let refused = client
        .get(format!("{url}/v1/accounts"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
    // With a token: the ledger and the admission service are wired.
    let issuer =
        TokenIssuer::from_key_file(dir.path().join("jwt.key"), "bursar", "bursar").unwrap();
    let token = issuer
        .issue(
            "alice",
            Role::Admin,
            Duration::from_secs(600),
            chrono::Utc::now(),
        )
        .unwrap();
    for path in ["/v1/accounts", "/v1/jobs"] {
        let answer = client
            .get(format!("{url}{path}"))
            .bearer_auth(token.expose_secret())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
    }

    // `--worker-threads 1`: one runtime worker (`bursar-runtime`; the runtime's blocking
    // threads, which a request may start, are `bursar-blocking`).
    let workers = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "bursar-runtime")
        .count();
    assert_eq!(workers, 1, "runtime worker threads of bursar serve");

    // SIGTERM: a graceful stop with exit status 0.
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("bursar serve did not stop within 30 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status:?}; stderr:\n{stderr}");
    assert!(stderr.contains("SIGTERM received"), "{stderr}");
}

#[test]
fn serve_refuses_zero_worker_threads() {
    let output = Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args(["serve", "--worker-threads", "0"])
        .env_remove("BURSAR_WORKER_THREADS")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--worker-threads"), "{stderr}");
}

#[test]
fn serve_without_auth_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bursar.yaml");
    std::fs::write(&config, "database: sqlite://ledger.db\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_bursar"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("auth"), "{stderr}");
}
