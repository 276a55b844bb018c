//! Shared by the `server_*` tests: a configured [`App`] on a temporary SQLite ledger with a
//! small account tree, an HS256 key, tokens, and one-shot requests against the router.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use bursar_gateway::app::App;
use bursar_gateway::auth::{generate_key_file, Role, TokenIssuer, TokenVerifier};
use bursar_gateway::config::Config;
use bursar_gateway::server::{router, AdmissionApi, ServerState};
use bursar_ledger::UsageCharge;
use bursar_pricing::Currency;
use chrono::Utc;
use secrecy::ExposeSecret;
use serde_json::Value;
use tempfile::TempDir;
use tower::ServiceExt;

/// 2025-01-01T00:00:00Z.
pub const T0: i64 = 1_735_689_600;
pub const HOUR: i64 = 3_600;
pub const DAY: i64 = 86_400;
pub const UNIT: i64 = 1_000_000;

/// The tree: org → physics, org → chemistry; alice in physics, bob in chemistry.
pub const CONFIG: &str = "\
database: sqlite://ledger.db
auth:
  hs256_key_file: jwt.key
accounts:
  org: {}
  physics: {parent: org}
  chemistry: {parent: org}
users:
  alice: {default_account: physics}
  bob: {default_account: chemistry}
clusters:
  onprem:
    kind: slurm
    currency: su
    collect:
      sacct: {program: /nonexistent/sacct}
";

pub struct TestServer {
    pub dir: TempDir,
    pub config_path: PathBuf,
    pub key_path: PathBuf,
    pub app: Arc<App>,
    pub state: ServerState,
    pub router: Router,
    pub issuer: TokenIssuer,
}

/// Writes the config and a key into a fresh folder and opens the app the way `bursar serve`
/// does (relative paths follow the config file).
pub async fn setup() -> TestServer {
    setup_with(None).await
}

pub async fn setup_with(admission: Option<Arc<dyn AdmissionApi>>) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("bursar.yaml");
    std::fs::write(&config_path, CONFIG).unwrap();
    let key_path = dir.path().join("jwt.key");
    generate_key_file(&key_path).unwrap();
    let config = Config::load(Some(&config_path)).unwrap();
    let auth = config.auth.clone().unwrap();
    let verifier = TokenVerifier::from_config(&auth).unwrap();
    let issuer = TokenIssuer::from_config(&auth).unwrap().unwrap();
    let app = Arc::new(App::open(config).await.unwrap());
    let state = ServerState::new(app.clone(), Arc::new(verifier), admission);
    let router = router(state.clone());
    TestServer {
        dir,
        config_path,
        key_path,
        app,
        state,
        router,
        issuer,
    }
}

impl TestServer {
    /// A valid token for `user` in `role`, for an hour.
    pub fn token(&self, user: &str, role: Role) -> String {
        self.issuer
            .issue(user, role, Duration::from_secs(3600), Utc::now())
            .unwrap()
            .expose_secret()
            .to_string()
    }

    /// One request through the router; the body as JSON (`Value::String` when it is not).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Answer {
        let body = body.map(|b| b.to_string());
        self.raw(method, uri, token, body.as_deref(), &[]).await
    }

    pub async fn get(&self, uri: &str, token: &str) -> Answer {
        self.call(Method::GET, uri, Some(token), None).await
    }

    pub async fn post(&self, uri: &str, token: &str, body: &Value) -> Answer {
        self.call(Method::POST, uri, Some(token), Some(body)).await
    }

    /// A request with a raw body (sent as `application/json`) and extra headers.
    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer {
            status,
            headers,
            json,
        }
    }

    /// Allocations and a few charged jobs: physics 100 su and org 500 su for January 2025,
    /// chemistry 50 usd; jobs by alice and bob on two days.
    pub async fn seed_usage(&self) {
        let ledger = &self.app.ledger;
        let su = Currency::new("su");
        ledger
            .set_allocation("org", &su, 500 * UNIT, T0, T0 + 31 * DAY)
            .await
            .unwrap();
        ledger
            .set_allocation("physics", &su, 100 * UNIT, T0, T0 + 31 * DAY)
            .await
            .unwrap();
        ledger
            .set_allocation(
                "chemistry",
                &Currency::new("usd"),
                50 * UNIT,
                T0,
                T0 + 31 * DAY,
            )
            .await
            .unwrap();
        let batch = [
            charge("1", "physics", "alice", "su", 12_500_000, T0 + 2 * HOUR),
            charge("2", "physics", "alice", "su", 7_250_000, T0 + DAY + HOUR),
            charge("3", "chemistry", "bob", "su", 3_000_000, T0 + 3 * HOUR),
            charge("4", "chemistry", "bob", "usd", 1_234_567, T0 + 4 * HOUR),
        ];
        ledger.post_usage(&batch, T0 + 2 * DAY).await.unwrap();
    }

    /// Runs the real binary with this test's config; its standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_bursar"))
            .arg("--config")
            .arg(&self.config_path)
            .args(args)
            .env_remove("BURSAR_URL")
            .env_remove("BURSAR_DATABASE")
            .env_remove("BURSAR_CONFIG")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "bursar {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }
}

fn charge(
    job: &str,
    account: &str,
    user: &str,
    currency: &str,
    micros: i64,
    at: i64,
) -> UsageCharge {
    UsageCharge {
        cluster: "onprem".to_string(),
        job_id: job.to_string(),
        display_id: job.to_string(),
        submit: at - HOUR,
        revision: "r1".to_string(),
        account: account.to_string(),
        user: user.to_string(),
        partition: Some("batch".to_string()),
        qos: None,
        state: "COMPLETED".to_string(),
        is_final: true,
        currency: Currency::new(currency),
        amount_micros: micros,
        effective_at: at,
        price_version: None,
        note: None,
    }
}

/// A response: status, headers, body as JSON.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub json: Value,
}

impl Answer {
    /// Asserts the status and the error shape `{"error", "message", "details"}` with `code`.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{self:#?}");
        let object = self.json.as_object().expect("a JSON object");
        assert_eq!(
            object.len(),
            3,
            "exactly error, message, details: {self:#?}"
        );
        assert_eq!(self.json["error"], code, "{self:#?}");
        assert!(
            self.json["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{self:#?}"
        );
        assert!(self.json["details"].is_object(), "{self:#?}");
    }

    pub fn assert_status(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "{self:#?}");
        &self.json
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/auth")
        .join(name)
}
