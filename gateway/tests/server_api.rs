//! The API through the router: ledger reads (same JSON as the CLI), audited admin changes,
//! error shapes, OpenAPI coverage, metrics, the job endpoints over a stub admission service,
//! and the hold-expiry loop.

mod server_support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::http::{header, Method};
use bursar_gateway::auth::{Principal, Role};
use bursar_gateway::config::Config;
use bursar_gateway::request::JobRequest;
use bursar_gateway::server::{route_table, AdmissionApi, ApiError, JobsFilter};
use bursar_ledger::{NewApiJob, NewHold};
use bursar_pricing::Currency;
use serde_json::{json, Value};
use server_support::{setup, setup_with, DAY, T0, UNIT};

#[tokio::test]
async fn healthz_answers_without_a_token() {
    let server = setup().await;
    let answer = server.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(*answer.assert_status(200), json!({"status": "ok"}));
}

#[tokio::test]
async fn balances_are_the_clis_json() {
    let server = setup().await;
    server.seed_usage().await;
    let admin = server.token("root", Role::Admin);
    let alice = server.token("alice", Role::User);
    for (account, token) in [("physics", &alice), ("org", &admin), ("chemistry", &admin)] {
        let at = "2025-01-15T00:00:00Z";
        let api = server
            .get(&format!("/v1/accounts/{account}/balance?at={at}"), token)
            .await;
        let cli: Value = serde_json::from_str(
            &server.cli(&["balance", account, "--at", at, "--format", "json"]),
        )
        .unwrap();
        assert_eq!(*api.assert_status(200), cli, "{account}");
    }
    // The numbers themselves: physics has 100 su, alice's jobs took 19.75 of it.
    let api = server
        .get("/v1/accounts/physics/balance?at=2025-01-15", &alice)
        .await;
    let row = &api.json["balances"][0];
    assert_eq!(row["allocated"], "100.00");
    assert_eq!(row["charged"], "19.75");
    assert_eq!(row["remaining"], "80.25");
    server
        .get("/v1/accounts/physics/balance?at=yesterday-ish", &alice)
        .await
        .assert_error(400, "bad_request");
}

#[tokio::test]
async fn usage_reports_are_the_clis_json() {
    let server = setup().await;
    server.seed_usage().await;
    let finance = server.token("carol", Role::Finance);
    for by in ["account", "user,cluster", "day,partition"] {
        let api = server
            .get(
                &format!("/v1/reports/usage?from=2025-01-01&to=2025-02-01&by={by}"),
                &finance,
            )
            .await;
        let cli: Value = serde_json::from_str(&server.cli(&[
            "report",
            "usage",
            "--from",
            "2025-01-01",
            "--to",
            "2025-02-01",
            "--by",
            by,
            "--format",
            "json",
        ]))
        .unwrap();
        assert_eq!(*api.assert_status(200), cli, "by {by}");
    }
    let api = server
        .get("/v1/reports/usage?from=2025-01-01&to=2025-02-01", &finance)
        .await;
    assert_eq!(
        api.json["totals"],
        json!([{"currency": "su", "amount": "22.75"}, {"currency": "usd", "amount": "1.234567"}])
    );
    server
        .get(
            "/v1/reports/usage?from=2025-01-01&to=2025-02-01&by=colour",
            &finance,
        )
        .await
        .assert_error(400, "bad_request");
    server
        .get("/v1/reports/usage?from=2025-01-01", &finance)
        .await
        .assert_error(400, "bad_request");
    server
        .get("/v1/reports/usage?from=2025-02-01&to=2025-01-01", &finance)
        .await
        .assert_error(400, "bad_request");
}

#[tokio::test]
async fn users_see_their_accounts_and_ancestors_only() {
    let server = setup().await;
    let names = |v: &Value| -> BTreeSet<String> {
        v["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    let alice = server.token("alice", Role::User);
    let answer = server.get("/v1/accounts", &alice).await;
    assert_eq!(
        names(answer.assert_status(200)),
        ["org", "physics", "root"].map(String::from).into()
    );
    let finance = server.token("carol", Role::Finance);
    let all = server.get("/v1/accounts", &finance).await;
    let cli: Value = serde_json::from_str(&server.cli(&["accounts", "--format", "json"])).unwrap();
    assert_eq!(*all.assert_status(200), cli);
    // A user the ledger does not know sees nothing (and is not refused).
    let stranger = server.token("mallory", Role::User);
    let answer = server.get("/v1/accounts", &stranger).await;
    assert_eq!(answer.assert_status(200)["accounts"], json!([]));
}

#[tokio::test]
async fn admin_changes_are_audited_with_before_and_after() {
    let server = setup().await;
    let admin = server.token("root-admin", Role::Admin);

    // An allocation: created, then its amount changed, then set again unchanged.
    let body = json!({"account": "physics", "currency": "su", "amount": "1000",
                      "from": "2025-01-01", "to": "2026-01-01"});
    let created = server.post("/v1/allocations", &admin, &body).await;
    assert_eq!(created.assert_status(201)["amount"], "1000.00");
    let mut body2 = body.clone();
    body2["amount"] = json!("1500.5");
    let changed = server.post("/v1/allocations", &admin, &body2).await;
    assert_eq!(changed.assert_status(200)["amount"], "1500.50");
    server
        .post("/v1/allocations", &admin, &body2)
        .await
        .assert_status(200);

    // An account, created then moved; an association with a new default.
    server
        .post("/v1/accounts", &admin, &json!({"name": "astro"}))
        .await
        .assert_status(201);
    let moved = server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "astro", "parent": "physics"}),
        )
        .await;
    assert_eq!(
        *moved.assert_status(200),
        json!({"name": "astro", "parent": "physics", "closed_at": null})
    );
    // (erin, unlike alice, is not declared in the configuration, which would win.)
    server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "erin", "account": "physics"}),
        )
        .await
        .assert_status(201);
    let assoc = server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "erin", "account": "astro", "default": true}),
        )
        .await;
    assert_eq!(
        *assoc.assert_status(201),
        json!({"user": "erin", "default_account": "astro", "accounts": ["astro", "physics"]})
    );

    let finance = server.token("carol", Role::Finance);
    let audit = server.get("/v1/audit", &finance).await;
    let entries = audit.assert_status(200)["audit"]
        .as_array()
        .unwrap()
        .clone();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    // Newest first; the unchanged allocation is not there.
    assert_eq!(
        actions,
        [
            "association.set",
            "association.set",
            "account.move",
            "account.create",
            "allocation.set",
            "allocation.set"
        ]
    );
    for e in &entries {
        assert_eq!(e["actor"], "root-admin");
        assert_eq!(e["role"], "admin");
        assert!(e["at"].as_str().unwrap().ends_with('Z'));
    }
    let first_allocation = &entries[5];
    assert_eq!(first_allocation["target"], "physics");
    assert_eq!(first_allocation["before"], Value::Null);
    assert_eq!(first_allocation["after"]["amount"], "1000.00");
    assert_eq!(first_allocation["after"]["start"], "2025-01-01T00:00:00Z");
    let change = &entries[4];
    assert_eq!(change["before"]["amount"], "1000.00");
    assert_eq!(change["after"]["amount"], "1500.50");
    assert_eq!(
        entries[2]["before"],
        json!({"name": "astro", "parent": "root", "closed_at": null})
    );
    assert_eq!(
        entries[0]["before"],
        json!({"user": "erin", "default_account": "physics", "accounts": ["physics"]})
    );
    assert_eq!(audit.json["next_before"], Value::Null);
    // Pages of two, newest first, each naming where the next starts.
    let mut paged = Vec::new();
    let mut path = "/v1/audit?limit=2".to_string();
    loop {
        let page = server.get(&path, &finance).await;
        let rows = page.assert_status(200)["audit"].as_array().unwrap().clone();
        assert!(rows.len() <= 2);
        paged.extend(rows);
        match page.json["next_before"].as_i64() {
            Some(id) => {
                assert_eq!(paged.last().unwrap()["id"], id);
                path = format!("/v1/audit?limit=2&before={id}");
            }
            None => break,
        }
    }
    assert_eq!(paged, entries);
    // A limit out of range is a bad query parameter, as one that does not parse is.
    for limit in ["0", "10001"] {
        server
            .get(&format!("/v1/audit?limit={limit}"), &finance)
            .await
            .assert_error(400, "bad_request");
    }
}

#[tokio::test]
async fn admin_refusals_have_the_error_shape() {
    let server = setup().await;
    let admin = server.token("root-admin", Role::Admin);
    let post = |body: Value| {
        let server = &server;
        let admin = admin.clone();
        async move { server.post("/v1/allocations", &admin, &body).await }
    };
    // Amounts are decimal strings, never JSON numbers: wrong shape, 422.
    post(json!({"account": "physics", "currency": "su", "amount": 100}))
        .await
        .assert_error(422, "invalid_request");
    post(json!({"account": "physics", "currency": "su", "amount": "1.0000001"}))
        .await
        .assert_error(422, "invalid_request");
    post(json!({"account": "physics", "currency": "su", "amount": "-5"}))
        .await
        .assert_error(422, "invalid_request");
    post(json!({"account": "physics", "currency": "gold", "amount": "5"}))
        .await
        .assert_error(422, "invalid_request");
    post(json!({"account": "physics", "currency": "su", "amount": "5", "colour": "red"}))
        .await
        .assert_error(422, "invalid_request");
    post(json!({"account": "nowhere", "currency": "su", "amount": "5"}))
        .await
        .assert_error(404, "not_found");
    post(
        json!({"account": "physics", "currency": "su", "amount": "5",
                "from": "2025-01-01", "to": "2025-03-01"}),
    )
    .await
    .assert_status(201);
    post(
        json!({"account": "physics", "currency": "su", "amount": "5",
                "from": "2025-02-01", "to": "2025-04-01"}),
    )
    .await
    .assert_error(409, "conflict");
    server
        .post("/v1/accounts", &admin, &json!({"name": "two words"}))
        .await
        .assert_error(422, "invalid_request");
    server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "alice", "account": "nowhere"}),
        )
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn unreadable_json_is_400_in_the_error_shape() {
    let server = setup().await;
    let admin = server.token("root-admin", Role::Admin);
    for body in [
        "{not json",
        "",
        "{\"account\": \"physics\"",
        "{\"account\": \"physics\",}",
    ] {
        let answer = server
            .raw(
                Method::POST,
                "/v1/allocations",
                Some(&admin),
                Some(body),
                &[],
            )
            .await;
        answer.assert_error(400, "bad_request");
    }
    // Not JSON at all (another content type): 415, in the same shape.
    server
        .raw(
            Method::POST,
            "/v1/accounts",
            Some(&admin),
            None,
            &[(header::CONTENT_TYPE.as_str(), "text/plain")],
        )
        .await
        .assert_error(415, "bad_request");
    // Unknown routes, methods and path parameters answer in the same shape.
    server
        .call(Method::GET, "/v2/nothing", None, None)
        .await
        .assert_error(404, "not_found");
    server
        .call(Method::PUT, "/healthz", None, None)
        .await
        .assert_error(405, "method_not_allowed");
    server
        .get("/v1/audit?limit=lots", &admin)
        .await
        .assert_error(400, "bad_request");
}

#[tokio::test]
async fn openapi_lists_every_route() {
    let server = setup().await;
    let answer = server.call(Method::GET, "/openapi.json", None, None).await;
    let doc = answer.assert_status(200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    let mut documented: BTreeSet<(String, String)> = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let routed: BTreeSet<(String, String)> = route_table()
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, routed);
    // Every route answers something other than the 404/405 fallbacks.
    let admin = server.token("root-admin", Role::Admin);
    for (method, path) in route_table() {
        let path = path
            .replace("{id}", "1")
            .replace("{name}", "physics")
            .replace("{user}", "alice")
            .replace("{account}", "physics");
        let answer = server
            .raw(method.clone(), &path, Some(&admin), None, &[])
            .await;
        let fallback = answer.json["error"] == "method_not_allowed"
            || (answer.status == 404
                && answer.json["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("no such endpoint")));
        assert!(!fallback, "{method} {path}: {answer:#?}");
    }
    // And every `$ref` resolves.
    let text = doc.to_string();
    for piece in text.split("\"$ref\":\"#/components/").skip(1) {
        let target = piece.split('"').next().unwrap();
        let mut node = &doc["components"];
        for part in target.split('/') {
            node = &node[part];
        }
        assert!(!node.is_null(), "dangling $ref {target}");
    }
}

/// One sample: metric name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Checks the Prometheus text exposition format line by line: comments are `# HELP name text`
/// or `# TYPE name counter|gauge`, every sample `name{label="value",…} number` of a declared
/// metric. Returns the samples.
fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut typed: BTreeSet<String> = BTreeSet::new();
    let mut samples = Vec::new();
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (kind, name, tail) = (words.next(), words.next(), words.next());
            let name = name.unwrap_or_default();
            assert!(is_name(name), "bad comment {line:?}");
            match kind {
                Some("HELP") => assert!(tail.is_some_and(|t| !t.is_empty()), "{line:?}"),
                Some("TYPE") => {
                    assert!(
                        matches!(tail, Some("counter" | "gauge")),
                        "bad type {line:?}"
                    );
                    assert!(typed.insert(name.to_string()), "TYPE twice {line:?}");
                }
                _ => panic!("unknown comment {line:?}"),
            }
            continue;
        }
        assert!(!line.is_empty(), "empty line");
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value {line:?}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let mut labels = Vec::new();
                let mut rest = body;
                while !rest.is_empty() {
                    let (key, after) = rest.split_once("=\"").expect("label=\"");
                    assert!(is_name(key), "label name {key:?}");
                    let mut value = String::new();
                    let mut chars = after.char_indices();
                    let mut end = None;
                    while let Some((i, c)) = chars.next() {
                        match c {
                            '\\' => {
                                let (_, e) = chars.next().expect("escape");
                                value.push(match e {
                                    'n' => '\n',
                                    other => other,
                                });
                            }
                            '"' => {
                                end = Some(i);
                                break;
                            }
                            c => value.push(c),
                        }
                    }
                    let end = end.expect("closing quote");
                    labels.push((key.to_string(), value));
                    rest = &after[end + 1..];
                    rest = rest.strip_prefix(',').unwrap_or(rest);
                }
                (name, labels)
            }
        };
        assert!(is_name(name), "metric name {name:?}");
        assert!(typed.contains(name), "sample before its TYPE: {line:?}");
        samples.push((name.to_string(), labels, value));
    }
    samples
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text() {
    let server = setup().await;
    server.seed_usage().await;
    // Collection status of the cluster, as a pass leaves it.
    let now = chrono::Utc::now().timestamp();
    let status = json!({"source": "sacct", "last_success": now - 60, "collected_until": now - 120,
                        "consecutive_failures": 2, "records_last_pass": 5});
    server
        .app
        .ledger
        .set_cursor("status/onprem", &status.to_string())
        .await
        .unwrap();
    server
        .app
        .ledger
        .place_hold(&NewHold {
            account: "physics".into(),
            currency: Currency::new("su"),
            amount: UNIT,
            cluster: "onprem".into(),
            job_ref: None,
            placed_at: T0 + DAY,
            expires_at: now + DAY,
            lifetime: None,
            idempotency_key: "h1".into(),
            note: None,
        })
        .await
        .unwrap();
    let alice = server.token("alice", Role::User);
    server
        .get("/v1/accounts/physics/balance", &alice)
        .await
        .assert_status(200);
    server
        .get("/v1/accounts/chemistry/balance", &alice)
        .await
        .assert_status(403);
    server.call(Method::GET, "/nowhere", None, None).await;

    let answer = server.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = answer.json.as_str().expect("text");
    let samples = parse_prometheus(text);
    let find = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| s.2)
    };
    let route = "/v1/accounts/{name}/balance";
    assert_eq!(
        find(
            "bursar_http_requests_total",
            &[("method", "GET"), ("route", route), ("status", "200")]
        ),
        Some(1.0)
    );
    assert_eq!(
        find(
            "bursar_http_requests_total",
            &[("route", route), ("status", "403")]
        ),
        Some(1.0)
    );
    assert_eq!(
        find(
            "bursar_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ),
        Some(1.0)
    );
    assert_eq!(find("bursar_holds_active", &[]), Some(1.0));
    let lag = find("bursar_collect_lag_seconds", &[("cluster", "onprem")]).unwrap();
    assert!((120.0..200.0).contains(&lag), "{lag}");
    assert_eq!(
        find(
            "bursar_collect_consecutive_failures",
            &[("cluster", "onprem")]
        ),
        Some(2.0)
    );
    assert_eq!(
        find(
            "bursar_collect_last_success_timestamp",
            &[("cluster", "onprem")]
        ),
        Some((now - 60) as f64)
    );
    assert!(text.contains("# TYPE bursar_admissions_total counter"));
}

/// An admission service that records what it was given and answers canned JSON.
#[derive(Default)]
struct StubAdmission {
    seen: Mutex<Vec<String>>,
}

#[async_trait]
impl AdmissionApi for StubAdmission {
    async fn quote(&self, caller: &Principal, request: JobRequest) -> Result<Value, ApiError> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("quote {} {:?}", caller.user, request.account));
        Ok(json!([{"cluster": "onprem", "currency": "su", "eligible": true}]))
    }

    async fn submit(
        &self,
        caller: &Principal,
        request: JobRequest,
        key: Option<String>,
    ) -> Result<Value, ApiError> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("submit {} {key:?}", caller.user));
        if request.account.as_deref() == Some("broke") {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYMENT_REQUIRED,
                "insufficient_allocation",
                "broke has 0 su left",
            )
            .with_details(json!({"clusters": []})));
        }
        Ok(json!({"id": 7, "cluster": "onprem"}))
    }

    async fn jobs(&self, caller: &Principal, filter: JobsFilter) -> Result<Value, ApiError> {
        Ok(json!({"user": caller.user, "filter": {
            "user": filter.user, "state": filter.state, "limit": filter.limit, "before": filter.before
        }}))
    }

    async fn job(&self, _caller: &Principal, id: i64) -> Result<Value, ApiError> {
        if id == 404 {
            return Err(ApiError::not_found("job 404 not found"));
        }
        Ok(json!({"id": id}))
    }

    async fn cancel(&self, caller: &Principal, id: i64) -> Result<Value, ApiError> {
        Ok(json!({"id": id, "cancelled_by": caller.user, "role": caller.role}))
    }

    async fn status(&self, caller: &Principal, id: i64) -> Result<Value, ApiError> {
        Ok(json!({"id": id, "asked_by": caller.user, "finished": false}))
    }
}

#[tokio::test]
async fn job_endpoints_go_through_the_admission_service() {
    let stub = Arc::new(StubAdmission::default());
    let server = setup_with(Some(stub.clone())).await;
    let alice = server.token("alice", Role::User);
    let request = json!({"account": "physics", "ntasks": 4, "time_limit_min": 60});

    let quote = server.post("/v1/quotes", &alice, &request).await;
    assert_eq!(quote.assert_status(200)[0]["eligible"], true);
    let submitted = server
        .raw(
            Method::POST,
            "/v1/jobs",
            Some(&alice),
            Some(&request.to_string()),
            &[("Idempotency-Key", "k-123")],
        )
        .await;
    assert_eq!(submitted.assert_status(201)["id"], 7);
    server
        .post("/v1/jobs", &alice, &json!({"account": "broke"}))
        .await
        .assert_error(402, "insufficient_allocation");
    server
        .post(
            "/v1/jobs",
            &alice,
            &json!({"account": "physics", "gpus": "lots"}),
        )
        .await
        .assert_error(422, "invalid_request");
    assert_eq!(
        *stub.seen.lock().unwrap(),
        [
            "quote alice Some(\"physics\")",
            "submit alice Some(\"k-123\")",
            "submit alice None"
        ]
    );

    let list = server.get("/v1/jobs?user=bob&state=held", &alice).await;
    assert_eq!(
        *list.assert_status(200),
        json!({"user": "alice", "filter": {"user": "bob", "state": "held", "limit": null, "before": null}})
    );
    let page = server.get("/v1/jobs?limit=50&before=1234", &alice).await;
    assert_eq!(
        *page.assert_status(200),
        json!({"user": "alice", "filter": {"user": null, "state": null, "limit": 50, "before": 1234}})
    );
    server
        .get("/v1/jobs?limit=many", &alice)
        .await
        .assert_error(400, "bad_request");
    server
        .get("/v1/jobs?colour=red", &alice)
        .await
        .assert_error(400, "bad_request");
    // A state no job can be in, a limit out of range: refused before the service is asked.
    for query in ["state=running", "limit=0", "limit=10001"] {
        server
            .get(&format!("/v1/jobs?{query}"), &alice)
            .await
            .assert_error(400, "bad_request");
    }
    assert_eq!(
        server.get("/v1/jobs/5", &alice).await.json,
        json!({"id": 5})
    );
    assert_eq!(
        *server
            .get("/v1/jobs/5/status", &alice)
            .await
            .assert_status(200),
        json!({"id": 5, "asked_by": "alice", "finished": false})
    );
    server
        .get("/v1/jobs/404", &alice)
        .await
        .assert_error(404, "not_found");
    server
        .get("/v1/jobs/abc", &alice)
        .await
        .assert_error(400, "bad_request");
    let cancelled = server
        .call(Method::DELETE, "/v1/jobs/5", Some(&alice), None)
        .await;
    assert_eq!(
        *cancelled.assert_status(200),
        json!({"id": 5, "cancelled_by": "alice", "role": "user"})
    );

    let metrics = server.call(Method::GET, "/metrics", None, None).await;
    let text = metrics.json.as_str().unwrap();
    assert!(
        text.contains("bursar_admissions_total{outcome=\"admitted\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("bursar_admissions_total{outcome=\"insufficient_allocation\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn job_endpoints_without_admission_are_503() {
    let server = setup().await;
    let alice = server.token("alice", Role::User);
    server
        .post("/v1/quotes", &alice, &json!({"account": "physics"}))
        .await
        .assert_error(503, "not_configured");
    server
        .get("/v1/jobs", &alice)
        .await
        .assert_error(503, "not_configured");
    server
        .call(Method::DELETE, "/v1/jobs/1", Some(&alice), None)
        .await
        .assert_error(503, "not_configured");
}

#[tokio::test]
async fn the_expiry_loop_expires_holds_and_their_api_jobs() {
    let server = setup().await;
    let ledger = &server.app.ledger;
    let su = Currency::new("su");
    let now = chrono::Utc::now().timestamp();
    ledger
        .set_allocation("physics", &su, 100 * UNIT, now - DAY, now + DAY)
        .await
        .unwrap();
    let hold = ledger
        .try_place_hold(&NewHold {
            account: "physics".into(),
            currency: su.clone(),
            amount: 5 * UNIT,
            cluster: "onprem".into(),
            job_ref: Some("42".into()),
            placed_at: now - 2 * 3600,
            expires_at: now - 60,
            lifetime: None,
            idempotency_key: "api:1".into(),
            note: None,
        })
        .await
        .unwrap();
    let job = ledger
        .create_api_job(&NewApiJob {
            idempotency_key: None,
            actor: "alice".into(),
            user: "alice".into(),
            account: "physics".into(),
            cluster: "onprem".into(),
            currency: su,
            estimate: 5 * UNIT,
            hold_id: Some(hold.id),
            state: "held".into(),
            request_json: "{}".into(),
            route_json: "{}".into(),
            at: now - 2 * 3600,
            array_tasks: None,
        })
        .await
        .unwrap();
    // The first tick is immediate; stop once nothing is held any more (or, should the loop
    // never expire the hold, after half a minute, for the assertions below to say so).
    let watching = ledger.clone();
    let expired = async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline
            && !watching.holds(true).await.unwrap().is_empty()
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    bursar_gateway::server::expiry_loop(server.app.clone(), None, expired).await;
    assert!(ledger.holds(true).await.unwrap().is_empty());
    let job = ledger.api_job(job.id).await.unwrap().unwrap();
    assert_eq!(job.state, "expired");
}

#[test]
fn serve_settings_are_read_from_the_config() {
    let config = Config::parse(
        "listen: 0.0.0.0:9000\nauth:\n  hs256_key_file: /etc/bursar/jwt.key\nholds:\n  grace: 2h\n",
    )
    .unwrap();
    assert_eq!(config.listen(), "0.0.0.0:9000");
    assert_eq!(
        config.auth.unwrap().hs256_key_file.unwrap(),
        std::path::Path::new("/etc/bursar/jwt.key")
    );
    assert_eq!(config.holds.grace(), std::time::Duration::from_secs(7200));
    let defaults = Config::parse("").unwrap();
    assert_eq!(defaults.listen(), "127.0.0.1:8640");
    assert_eq!(defaults.holds.grace(), std::time::Duration::from_secs(3600));
    let typo = Config::parse("holds:\n  grase: 1h\n")
        .unwrap_err()
        .to_string();
    assert!(typo.contains("grase"), "{typo}");
}
