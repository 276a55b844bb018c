//! `bursar sync push` on a dstack cluster against a mock dstack 0.22.5: the exact calls and
//! bodies, dry runs that call nothing that writes, and faults (a refused token, a non-admin
//! token, 5xx answers) that stop the push with nothing recorded as done that was not.
//!
//! The real server is exercised by `tests/tests/sync_dstack_live.rs`.

use bursar_gateway::app::App;
use bursar_gateway::cli::{SyncArgs, SyncCommand};
use bursar_gateway::config::Config;
use serde_json::{json, Value};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

struct Fixture {
    dir: tempfile::TempDir,
    app: App,
}

impl Fixture {
    fn token_file(&self) -> String {
        self.dir.path().join("dstack.token").display().to_string()
    }

    /// `bursar sync push --cluster gpucloud [--dry-run]`: (result, printed text).
    async fn push(&self, dry_run: bool) -> (anyhow::Result<()>, String) {
        let mut out = Vec::new();
        let result = bursar_gateway::sync::command(
            &self.app,
            SyncCommand::Push(SyncArgs {
                cluster: "gpucloud".into(),
                dry_run,
            }),
            &mut out,
        )
        .await;
        (result, String::from_utf8(out).unwrap())
    }

    /// The `sync.push` entries of the audit log, oldest first: (target, after).
    async fn audited(&self) -> Vec<(String, Value)> {
        let mut entries: Vec<(String, Value)> = self
            .app
            .ledger
            .audit_log(None)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.action == "sync.push")
            .map(|e| {
                (
                    e.target,
                    serde_json::from_str(e.after.as_deref().unwrap()).unwrap(),
                )
            })
            .collect();
        entries.reverse();
        entries
    }
}

/// A ledger where alice, carol and dave may charge physics (the project's account) and bob only
/// chemistry; dstack is the mock at `url`.
async fn fixture(url: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("dstack.token");
    std::fs::write(&token, "not-a-real-token\n").unwrap();
    let yaml = format!(
        "database: sqlite://{db}\n\
         accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         clusters:\n  gpucloud:\n    kind: dstack\n    currency: usd\n\
         \x20   collect:\n      dstack: {{url: \"{url}\", token_file: \"{token}\", project: hpc, account: physics}}\n\
         \x20     timeout: 2s\n",
        db = dir.path().join("ledger.db").display(),
        token = token.display(),
    );
    let app = App::open(Config::parse(&yaml).unwrap()).await.unwrap();
    for (user, account) in [
        ("alice", "physics"),
        ("bob", "chemistry"),
        ("carol", "physics"),
        ("dave", "physics"),
    ] {
        app.ledger.upsert_user(user, account).await.unwrap();
        app.ledger.associate(user, account).await.unwrap();
    }
    Fixture { dir, app }
}

fn user(name: &str, role: &str) -> Value {
    json!({
        "id": format!("00000000-0000-4000-8000-{:012x}", name.len()),
        "username": name,
        "created_at": "2026-11-22T01:27:18.341281Z",
        "global_role": role,
        "email": null,
        "active": true,
        "permissions": {"can_create_projects": true},
        "ssh_public_key": null,
    })
}

fn project(members: &[(&str, &str)]) -> Value {
    json!({
        "project_id": "9d22c054-67a0-4d00-a91e-808f2ca4aaa2",
        "project_name": "hpc",
        "owner": user("admin", "admin"),
        "created_at": "2026-11-22T01:27:17.5Z",
        "backends": [],
        "members": members.iter().map(|(name, role)| json!({
            "user": user(name, "user"),
            "project_role": role,
            "permissions": {"can_manage_ssh_fleets": false, "can_manage_secrets": false},
        })).collect::<Vec<_>>(),
        "is_public": false,
        "templates_repo": null,
    })
}

fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

/// The reads of a push: the token is the admin's; dstack has alice, bob and carol (not dave);
/// hpc has alice (user) and carol (manager).
async fn mount_reads(server: &MockServer) {
    let mut me = user("admin", "admin");
    me["creds"] = json!({"token": "redacted"});
    Mock::given(method("POST"))
        .and(path("/api/users/get_my_user"))
        .respond_with(ok(me))
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/users/list"))
        .respond_with(ok(json!([
            user("carol", "user"),
            user("bob", "user"),
            user("alice", "user"),
            user("admin", "admin"),
        ])))
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/projects/hpc/get"))
        .respond_with(ok(project(&[
            ("alice", "user"),
            ("carol", "manager"),
            ("admin", "admin"),
        ])))
        .mount(server)
        .await;
}

async fn mount_create(server: &MockServer, answer: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path("/api/users/create"))
        .and(body_json(
            json!({"username": "dave", "global_role": "user"}),
        ))
        .respond_with(answer)
        .expect(times)
        .mount(server)
        .await;
}

async fn mount_add(server: &MockServer, answer: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path("/api/projects/hpc/add_members"))
        .and(body_json(
            json!({"members": [{"username": "dave", "project_role": "user"}]}),
        ))
        .respond_with(answer)
        .expect(times)
        .mount(server)
        .await;
}

/// Every call dstack received, as `path body`.
async fn calls(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(
                r.headers.get("authorization").unwrap(),
                "Bearer not-a-real-token"
            );
            format!("{} {}", r.url.path(), String::from_utf8_lossy(&r.body))
        })
        .collect()
}

#[tokio::test]
async fn push_creates_the_missing_user_and_adds_only_non_members_as_user() {
    let server = MockServer::start().await;
    mount_reads(&server).await;
    mount_create(&server, ok(user("dave", "user")), 1).await;
    let after = project(&[
        ("alice", "user"),
        ("carol", "manager"),
        ("admin", "admin"),
        ("dave", "user"),
    ]);
    mount_add(&server, ok(after), 1).await;
    let f = fixture(&server.uri()).await;

    let (result, text) = f.push(true).await;
    result.unwrap();
    assert_eq!(
        text,
        "would create dstack user dave (global role user)\n\
         would add dave to dstack project hpc as user\n"
    );
    assert!(f.audited().await.is_empty());
    let dry_calls = calls(&server).await;
    assert_eq!(
        dry_calls
            .iter()
            .map(|c| c.split(' ').next().unwrap())
            .collect::<Vec<_>>(),
        [
            "/api/users/get_my_user",
            "/api/users/list",
            "/api/projects/hpc/get"
        ],
        "a dry run only reads"
    );

    let (result, text) = f.push(false).await;
    result.unwrap();
    assert_eq!(
        text,
        "created dstack user dave (global role user)\n\
         added dave to dstack project hpc as user\n"
    );
    let audited = f.audited().await;
    assert_eq!(audited.len(), 2, "{audited:?}");
    assert_eq!(audited[0].0, "gpucloud/dstack user dave");
    assert_eq!(audited[0].1["global_role"], "user");
    assert_eq!(audited[1].0, "gpucloud/project hpc member dave");
    assert_eq!(audited[1].1["project_role"], "user");
    // carol (a manager) and alice (a member) were never sent: add_members would set their role.
    let writes: Vec<String> = calls(&server)
        .await
        .into_iter()
        .filter(|c| c.starts_with("/api/users/create") || c.contains("add_members"))
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(writes
        .iter()
        .all(|w| !w.contains("carol") && !w.contains("alice")));
}

#[tokio::test]
async fn a_refused_token_names_its_file_and_changes_nothing() {
    for (status, body) in [
        (401, json!({"detail": "Not authenticated"})),
        (
            403,
            json!({"detail": {"msg": "Invalid token", "code": null}}),
        ),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&server)
            .await;
        let f = fixture(&server.uri()).await;
        let (result, text) = f.push(false).await;
        let message = result.unwrap_err().to_string();
        assert!(
            message.contains(&format!("dstack refused the token in {}", f.token_file()))
                && message.contains(&status.to_string())
                && message.contains("global admin"),
            "{message}"
        );
        assert_eq!(text, "");
        assert!(f.audited().await.is_empty());
        assert_eq!(calls(&server).await.len(), 1, "stops at the first refusal");
    }
}

#[tokio::test]
async fn a_non_admin_token_is_refused_before_anything_is_planned() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/users/get_my_user"))
        .respond_with(ok(user("carol", "user")))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let (result, text) = f.push(true).await;
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("belongs to dstack user carol, whose global role is user")
            && message.contains(&f.token_file()),
        "{message}"
    );
    assert_eq!(text, "");
    assert_eq!(calls(&server).await.len(), 1);
}

#[tokio::test]
async fn a_5xx_on_create_stops_the_push_with_nothing_recorded() {
    let server = MockServer::start().await;
    mount_reads(&server).await;
    mount_create(
        &server,
        ResponseTemplate::new(500).set_body_string("Internal Server Error"),
        1,
    )
    .await;
    mount_add(&server, ok(project(&[])), 0).await;
    let f = fixture(&server.uri()).await;
    let (result, text) = f.push(false).await;
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("dstack answered 500")
            && message.contains("/api/users/create")
            && message.contains("Internal Server Error"),
        "{message}"
    );
    assert_eq!(text, "");
    assert!(f.audited().await.is_empty());
}

#[tokio::test]
async fn a_5xx_on_add_members_keeps_only_the_user_created_before_it() {
    let server = MockServer::start().await;
    mount_reads(&server).await;
    mount_create(&server, ok(user("dave", "user")), 1).await;
    mount_add(
        &server,
        ResponseTemplate::new(503).set_body_string("Service Unavailable"),
        1,
    )
    .await;
    let f = fixture(&server.uri()).await;
    let (result, text) = f.push(false).await;
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("dstack answered 503") && message.contains("add_members"),
        "{message}"
    );
    assert_eq!(text, "created dstack user dave (global role user)\n");
    let audited = f.audited().await;
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].0, "gpucloud/dstack user dave");
}

#[tokio::test]
async fn an_add_members_answer_without_the_user_is_an_error_not_a_success() {
    let server = MockServer::start().await;
    mount_reads(&server).await;
    mount_create(&server, ok(user("dave", "user")), 1).await;
    mount_add(&server, ok(project(&[("alice", "user")])), 1).await;
    let f = fixture(&server.uri()).await;
    let (result, _) = f.push(false).await;
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("project it returned has dave as no member"),
        "{message}"
    );
    let audited = f.audited().await;
    assert_eq!(audited.len(), 1, "only the create: {audited:?}");
}

#[tokio::test]
async fn users_are_listed_page_by_page() {
    // 2000 users fill a page; the next page starts after the last one (dstack's keyset).
    let server = MockServer::start().await;
    let first: Vec<Value> = (0..2000)
        .map(|i| {
            let mut u = user(&format!("u{i}"), "user");
            u["id"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
            u["created_at"] = json!(format!("2026-11-22T01:{:02}:{:02}Z", i / 60 % 60, i % 60));
            u
        })
        .collect();
    let last_id = first[1999]["id"].as_str().unwrap().to_string();
    let last_at = first[1999]["created_at"].as_str().unwrap().to_string();
    Mock::given(method("POST"))
        .and(path("/api/users/list"))
        .and(body_json(json!({"limit": 2000})))
        .respond_with(ok(Value::Array(first)))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/users/list"))
        .and(body_json(
            json!({"limit": 2000, "prev_created_at": last_at, "prev_id": last_id}),
        ))
        .respond_with(ok(json!([user("zoe", "user")])))
        .expect(1)
        .mount(&server)
        .await;
    let client =
        bursar_collectors::dstack::DstackClient::new(bursar_collectors::dstack::DstackConfig {
            base_url: server.uri(),
            token: "t".to_string().into(),
            project: "hpc".into(),
            cluster: "gpucloud".into(),
            timeout: std::time::Duration::from_secs(2),
            page_size: 100,
            ca_file: None,
        })
        .unwrap();
    let users = client.list_users().await.unwrap();
    assert_eq!(users.len(), 2001);
    assert_eq!(users[2000].username, "zoe");
}
