//! `openapi.json` against the server: valid OpenAPI 3.0.3 as far as the document's own shape
//! goes (no 3.1 `type` arrays, `nullable` only beside a `type`, a unique camelCase
//! `operationId` per operation), and the bodies the real router answers — the real admission
//! service over stub forwarders — checked against the schemas their operations list: the
//! same properties, the types, the nulls, the enums. Also closed accounts through the API.

mod admission_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use admission_support::{fixture_with, Fixture};
use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use bursar_gateway::auth::{generate_key_file, Role, TokenIssuer, TokenVerifier};
use bursar_gateway::request::{JobRequest, MemoryRequest};
use bursar_gateway::server::meta::OPENAPI;
use bursar_gateway::server::{router, ServerState};
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use tower::ServiceExt;

fn doc() -> Value {
    serde_json::from_str(OPENAPI).expect("openapi.json is JSON")
}

/// Every `(JSON pointer, object)` of `value`, depth first.
fn objects<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            out.push((at.clone(), value));
            for (k, v) in map {
                objects(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                objects(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The schema objects of the document: everything under `components/schemas` and every
/// `schema` of a parameter, request or response.
fn schemas(doc: &Value) -> Vec<(String, &Value)> {
    let mut all = Vec::new();
    objects(doc, String::new(), &mut all);
    all.into_iter()
        .filter(|(at, _)| at.starts_with("/components/schemas/") || at.contains("/schema"))
        .collect()
}

#[test]
fn the_document_is_openapi_3_0_3() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.0.3");
    for (at, schema) in schemas(&doc) {
        // A `properties` map names properties; its keys are not keywords.
        if at.ends_with("/properties") {
            continue;
        }
        assert!(
            schema.get("type").is_none_or(Value::is_string),
            "{at}: `type` must be one string in 3.0.3 (a list is 3.1): {schema}"
        );
        // 3.0.3 applies `nullable` only beside `type`: beside `$ref` or `allOf` it allows
        // nothing, so a nullable reference must point at a nullable schema.
        if schema.get("nullable").is_some() {
            assert!(
                schema.get("type").is_some() && schema.get("allOf").is_none(),
                "{at}: `nullable` without `type`, or with `allOf`, does not allow null: {schema}"
            );
        }
        if schema.get("$ref").is_some() {
            assert_eq!(
                schema.as_object().unwrap().len(),
                1,
                "{at}: keywords beside `$ref` are ignored in 3.0.3: {schema}"
            );
        }
    }
}

#[test]
fn every_operation_has_a_unique_camel_case_operation_id() {
    let doc = doc();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let at = format!("{} {path}", method.to_uppercase());
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no operationId"));
            assert!(
                id.starts_with(|c: char| c.is_ascii_lowercase())
                    && id.chars().all(|c| c.is_ascii_alphanumeric()),
                "{at}: operationId {id:?} is not camelCase"
            );
            if let Some(other) = seen.insert(id.to_string(), at.clone()) {
                panic!("operationId {id:?} is used by {other} and {at}");
            }
            assert!(
                operation["responses"].get("default").is_some(),
                "{at}: no default (error) response"
            );
        }
    }
}

/// The request schema lists exactly the fields of [`JobRequest`]: a request with every field
/// set serializes to the schema's properties (a new field fails to compile here: add it to
/// `JobRequest` in openapi.json too), and a body of every property is accepted.
#[test]
fn the_job_request_schema_lists_every_field() {
    let doc = doc();
    let schema = &doc["components"]["schemas"]["JobRequest"];
    let listed: BTreeSet<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let dstack: JobRequest = serde_json::from_value(json!({"dstack": {
        "type": "task", "name": "train", "commands": ["python train.py"]
    }}))
    .unwrap();
    let every = JobRequest {
        account: Some("physics".into()),
        partition: Some("batch".into()),
        qos: Some("normal".into()),
        clusters: vec!["onprem".into()],
        nodes: 2,
        nodes_exact: true,
        ntasks: 2,
        ntasks_per_node: Some(1),
        cpus_per_task: 1,
        cpus_per_task_given: true,
        cpus_per_gpu: Some(4),
        min_cpus_per_node: Some(2),
        hint: Some(bursar_gateway::request::Hint::parse("nomultithread").unwrap()),
        threads_per_core: Some(1),
        ntasks_per_core: Some(1),
        ntasks_per_gpu: Some(2),
        gpus_from_tasks: false,
        memory: Some(MemoryRequest::PerCpu(1024)),
        gpus: Some(serde_json::from_value(json!({"count": 1})).unwrap()),
        other_gres: vec!["shard:1".into()],
        licenses: Some(bursar_gateway::request::Licenses::parse("matlab:2,ansys").unwrap()),
        time_limit_min: Some(60),
        time_unlimited: true,
        job_name: Some("train".into()),
        output: Some("out".into()),
        error: Some("err".into()),
        script: Some("#!/bin/bash\n".into()),
        script_path: Some("/home/alice/job.sh".into()),
        script_args: vec!["in.dat".into()],
        wrap: Some("hostname".into()),
        working_dir: Some("/home/alice".into()),
        environment: [("A".to_string(), "1".to_string())].into(),
        export: Some("ALL".into()),
        mail_type: Some("END".into()),
        mail_user: Some("alice".into()),
        comment: Some("c".into()),
        constraint: Some("a100".into()),
        exclusive: true,
        hold: true,
        array: Some(bursar_gateway::request::ArraySpec::parse("0-9:3%2").unwrap()),
        slurm: serde_json::from_value(json!({
            "signal": "B:USR1@90", "requeue": false, "open_mode": "append", "nice": 10,
            "reservation": "maint", "wckey": "w", "exclude": "n[1-2]", "input": "/dev/null",
            "no_kill": true, "dependency": "afterok:1", "kill_on_invalid_dep": false,
            "begin": 1_796_144_400, "deadline": "2026-12-02T18:00:00+01:00", "time_min": 30,
            "tmp_mb": 2048, "prefer": "skylake", "nodelist": "op-n[1-2]",
            "oversubscribe": true, "gres_flags": "enforce-binding", "acctg_freq": "30",
            "distribution": "block:cyclic", "mem_bind": "local", "gpu_bind": "closest",
            "gpu_freq": "medium,memory=high", "cpu_freq": "2400000", "profile": "task",
            "switches": "2@10", "container": "/srv/oci/py", "container_id": "py-1",
            "exclusive": "user", "wait_all_nodes": true, "use_min_nodes": true,
            "spread_job": true, "delay_boot": "10", "mcs_label": "physics",
            "contiguous": true, "extra": "rack=a", "priority": "TOP"
        }))
        .unwrap(),
        dstack: dstack.dstack,
    };
    let sent = serde_json::to_value(&every).unwrap();
    assert_eq!(keys(&sent), listed, "JobRequest fields vs openapi.json");
    let mut errors = Vec::new();
    check(&doc, schema, &sent, "request", &mut errors);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let parsed: JobRequest = serde_json::from_value(sent.clone()).expect("the server reads it");
    assert_eq!(parsed.memory, every.memory);
    assert_eq!(parsed.slurm, every.slurm);
    assert_eq!(parsed.array, every.array);
    assert_eq!(parsed.licenses, every.licenses);
    assert_eq!(parsed.min_cpus_per_node, every.min_cpus_per_node);
    assert_eq!(parsed.hint, every.hint);
    assert_eq!(
        (parsed.threads_per_core, parsed.ntasks_per_core),
        (every.threads_per_core, every.ntasks_per_core)
    );
    assert_eq!(parsed.ntasks_per_gpu, every.ntasks_per_gpu);
    // the GPU-relative branches (memory per GPU, GPUs per task), in a request that validates
    let gpu_relative: JobRequest = serde_json::from_value(json!({"ntasks": 2,
        "gpus": {"count": 1, "per": "task"}, "memory": {"per_gpu_mb": 500}, "cpus_per_gpu": 2}))
    .unwrap();
    gpu_relative.validate().unwrap();
    let mut errors = Vec::new();
    let sent_gpu = serde_json::to_value(&gpu_relative).unwrap();
    check(&doc, schema, &sent_gpu, "gpu request", &mut errors);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let slurm_listed: BTreeSet<String> = schema["properties"]["slurm"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys(&sent["slurm"]),
        slurm_listed,
        "SlurmOptions vs openapi.json"
    );
}

/// The exact decimal amounts of the API: `^-?[0-9]+(\.[0-9]{1,6})?$`.
const AMOUNT_PATTERN: &str = "^-?[0-9]+(\\.[0-9]{1,6})?$";
const TOP_PATTERN: &str = "^[Tt][Oo][Pp]$";

fn is_amount(text: &str) -> bool {
    let digits = |s: &str, most: usize| {
        !s.is_empty() && s.len() <= most && s.bytes().all(|b| b.is_ascii_digit())
    };
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    match unsigned.split_once('.') {
        None => digits(unsigned, usize::MAX),
        Some((whole, fraction)) => digits(whole, usize::MAX) && digits(fraction, 6),
    }
}

/// `schema` with its `$ref`s followed.
fn resolve<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
    while let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        let pointer = target.strip_prefix('#').expect("a local $ref");
        schema = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("dangling $ref {target}"));
    }
    schema
}

/// Checks `value` against `schema` (the subset of OpenAPI 3.0.3 the document uses): `type`,
/// `nullable`, `enum`, the amount `pattern`, `format: date-time`, `allOf`, `oneOf`, `items`,
/// `required`, and `properties` — an object has no property its schema does not list
/// (unless `additionalProperties` allows it) and every one it requires. Errors go to `errors`
/// with the path in the body.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if value.is_null() {
        let nullable = schema["nullable"] == true;
        let all_nullable = schema["allOf"].as_array().is_some_and(|parts| {
            parts.iter().all(|p| {
                let mut inner = Vec::new();
                check(doc, p, value, at, &mut inner);
                inner.is_empty()
            })
        });
        if !nullable && !all_nullable {
            errors.push(format!("{at}: null, but the schema does not allow it"));
        }
        return;
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        check(doc, part, value, at, errors);
    }
    if let Some(choices) = schema["oneOf"].as_array() {
        let matching = choices
            .iter()
            .filter(|c| {
                let mut inner = Vec::new();
                check(doc, c, value, at, &mut inner);
                inner.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{at}: {matching} of oneOf match {value}"));
        }
    }
    if let Some(kind) = schema["type"].as_str() {
        let ok = match kind {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            other => panic!("{at}: unknown type {other}"),
        };
        if !ok {
            errors.push(format!("{at}: {value} is not of type {kind}"));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        let text = value.as_str();
        let (ok, what) = match pattern {
            AMOUNT_PATTERN => (text.is_some_and(is_amount), "an exact decimal amount"),
            // `slurm.priority`'s word
            TOP_PATTERN => (text.is_some_and(|v| v.eq_ignore_ascii_case("top")), "TOP"),
            _ => panic!("{at}: a pattern this test cannot check: {pattern}"),
        };
        if !ok {
            errors.push(format!("{at}: {value} is not {what}"));
        }
    }
    if schema["format"] == "date-time" {
        let text = value.as_str().unwrap_or_default();
        if chrono::DateTime::parse_from_rfc3339(text).is_err() || !text.ends_with('Z') {
            errors.push(format!("{at}: {value} is not an RFC 3339 UTC time"));
        }
    }
    if let (Some(items), Some(values)) = (schema.get("items"), value.as_array()) {
        for (i, item) in values.iter().enumerate() {
            check(doc, items, item, &format!("{at}[{i}]"), errors);
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema["properties"].as_object();
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap();
            if !object.contains_key(name) {
                errors.push(format!("{at}: required property {name} is missing"));
            }
        }
        let open = match &schema["additionalProperties"] {
            Value::Bool(open) => *open,
            Value::Object(_) => true,
            // Not said: an object whose schema lists properties has those only.
            _ => properties.is_none(),
        };
        for (name, v) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(property) => check(doc, property, v, &format!("{at}.{name}"), errors),
                None if open => {}
                None => errors.push(format!("{at}: property {name} is not in the schema")),
            }
        }
    }
}

/// The schema of the `status` answer of `method path`.
fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let operation = &doc["paths"][path][method.to_lowercase()];
    let response = resolve(doc, &operation["responses"][status.to_string()]);
    let schema = &response["content"]["application/json"]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path}: no JSON schema for {status}"
    );
    schema
}

/// The real admission service behind the real router, with tokens.
struct Api {
    f: Fixture,
    router: Router,
    issuer: TokenIssuer,
    doc: Value,
    _keys: tempfile::TempDir,
}

/// An answer: status and JSON body.
#[derive(Debug)]
struct Answer {
    status: u16,
    json: Value,
}

async fn api() -> Api {
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("jwt.key");
    generate_key_file(&key).unwrap();
    let f = fixture_with(&format!("auth:\n  hs256_key_file: {}\n", key.display())).await;
    let auth = f.app.config.auth.clone().unwrap();
    let verifier = TokenVerifier::from_config(&auth).unwrap();
    let issuer = TokenIssuer::from_config(&auth).unwrap().unwrap();
    let state = ServerState::new(
        f.app.clone(),
        Arc::new(verifier),
        Some(Arc::new(f.admission.clone())),
    );
    Api {
        router: router(state),
        f,
        issuer,
        doc: doc(),
        _keys: keys,
    }
}

impl Api {
    fn token(&self, user: &str, role: Role) -> String {
        self.issuer
            .issue(user, role, Duration::from_secs(3600), chrono::Utc::now())
            .unwrap()
            .expose_secret()
            .to_string()
    }

    /// One request; a body is sent as `application/json`.
    async fn call(&self, method: Method, uri: &str, token: &str, body: Option<&Value>) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"));
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    /// `method uri` (its path template `path`) answering `status`, its body checked against
    /// the schema the document gives that answer.
    async fn checked(
        &self,
        method: Method,
        uri: &str,
        path: &str,
        token: &str,
        body: Option<&Value>,
        status: u16,
    ) -> Value {
        let answer = self.call(method.clone(), uri, token, body).await;
        assert_eq!(answer.status, status, "{method} {uri}: {answer:#?}");
        let schema = response_schema(&self.doc, method.as_str(), path, status);
        let mut errors = Vec::new();
        check(&self.doc, schema, &answer.json, "body", &mut errors);
        assert!(
            errors.is_empty(),
            "{method} {uri} ({status}) does not match openapi.json:\n{}\n{:#}",
            errors.join("\n"),
            answer.json
        );
        answer.json
    }

    /// `POST /v1/quotes` with `body`, checked as [`checked`](Api::checked) does.
    async fn quote(&self, token: &str, body: &Value, status: u16) -> Value {
        self.checked(
            Method::POST,
            "/v1/quotes",
            "/v1/quotes",
            token,
            Some(body),
            status,
        )
        .await
    }

    /// Gives `account` `amount` micros of `currency`, from a day ago for thirty days.
    async fn allocate(&self, account: &str, currency: &str, amount: i64) {
        self.f.allocate(account, currency, amount).await;
    }
}

/// The properties of the schema `name` in `components/schemas`.
fn properties(doc: &Value, name: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn job_and_balance_answers_match_their_schemas() {
    let api = api().await;
    let alice = api.token("alice", Role::User);
    let admin = api.token("root", Role::Admin);
    api.allocate("physics", "su", 100_000_000).await;
    api.allocate("org", "su", 500_000_000).await;
    let job = json!({"ntasks": 4, "script": "#!/bin/bash\nsrun hostname\n"});

    // Quotes: onprem fits and is paid for, cloud fits but physics has no dollars; a GPU type
    // onprem's batch partition lacks leaves it unpriced (estimate and affordable null).
    let quote = api.quote(&alice, &job, 200).await;
    let quotes = quote.as_array().unwrap();
    assert_eq!(quotes.len(), 2);
    for q in quotes {
        assert_eq!(keys(q), properties(&api.doc, "Quote"), "{q}");
    }
    assert_eq!(quotes[0]["chosen"], true);
    assert_eq!(quotes[1]["affordable"], false);
    let unpriced = json!({"ntasks": 1, "partition": "batch", "gpus": {"count": 1, "kind": "a100"},
                          "script": "#!/bin/bash\n"});
    let quote = api.quote(&alice, &unpriced, 200).await;
    assert_eq!(quote[0]["estimate"], Value::Null, "{quote:#}");
    assert_eq!(quote[0]["affordable"], Value::Null, "{quote:#}");
    let nowhere = json!({"partition": "nowhere", "script": "#!/bin/bash\n"});
    let quote = api.quote(&alice, &nowhere, 200).await;
    assert_eq!(quote[0]["partition"], Value::Null, "{quote:#}");
    assert_eq!(quote[0]["time_limit_min"], Value::Null, "{quote:#}");

    // A submission, the list, the job, its cancellation.
    let submitted = api
        .checked(
            Method::POST,
            "/v1/jobs",
            "/v1/jobs",
            &alice,
            Some(&job),
            201,
        )
        .await;
    assert_eq!(keys(&submitted), properties(&api.doc, "SubmittedJob"));
    assert!(submitted["hold_id"].is_i64(), "{submitted:#}");
    let id = submitted["id"].as_i64().unwrap();
    let list = api
        .checked(Method::GET, "/v1/jobs", "/v1/jobs", &alice, None, 200)
        .await;
    assert_eq!(keys(&list), properties(&api.doc, "Jobs"));
    assert_eq!(list["jobs"][0]["id"], id);
    let uri = format!("/v1/jobs/{id}");
    let shown = api
        .checked(Method::GET, &uri, "/v1/jobs/{id}", &alice, None, 200)
        .await;
    assert_eq!(keys(&shown), properties(&api.doc, "Job"));
    assert_eq!(shown["charge"], Value::Null);
    assert_eq!(shown["hold"], submitted["hold"]);
    let cancelled = api
        .checked(Method::DELETE, &uri, "/v1/jobs/{id}", &alice, None, 200)
        .await;
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(
        cancelled["hold"], "0.00",
        "a job view's hold is an amount, never null"
    );
    let again = api.call(Method::DELETE, &uri, &alice, None).await;
    assert_eq!(
        (again.status, &again.json["error"]),
        (409, &json!("conflict"))
    );

    // Balances: physics has its own allocation; root has none (nulls), org one in su only.
    for account in ["physics", "org", "root"] {
        let uri = format!("/v1/accounts/{account}/balance");
        let balance = api
            .checked(
                Method::GET,
                &uri,
                "/v1/accounts/{name}/balance",
                &admin,
                None,
                200,
            )
            .await;
        let row_schema = &api.doc["components"]["schemas"]["Balances"]["properties"]["balances"]
            ["items"]["properties"];
        let listed: BTreeSet<String> = row_schema.as_object().unwrap().keys().cloned().collect();
        for row in balance["balances"].as_array().unwrap() {
            assert_eq!(keys(row), listed, "{account}: {row}");
        }
    }
}

#[tokio::test]
async fn account_and_money_answers_match_their_schemas() {
    let api = api().await;
    let admin = api.token("root", Role::Admin);
    let accounts = api
        .checked(
            Method::GET,
            "/v1/accounts",
            "/v1/accounts",
            &admin,
            None,
            200,
        )
        .await;
    assert!(accounts["accounts"].as_array().unwrap().len() > 3);
    api.checked(
        Method::POST,
        "/v1/accounts",
        "/v1/accounts",
        &admin,
        Some(&json!({"name": "astro", "parent": "physics"})),
        201,
    )
    .await;
    // An existing account posted without its parent: a creation under root, which it is not.
    let refused = api
        .call(
            Method::POST,
            "/v1/accounts",
            &admin,
            Some(&json!({"name": "astro"})),
        )
        .await;
    assert_eq!(refused.status, 409, "{refused:#?}");
    let allocation = json!({"account": "astro", "currency": "su", "amount": "10",
                            "from": "2025-01-01", "to": "2099-01-01"});
    api.checked(
        Method::POST,
        "/v1/allocations",
        "/v1/allocations",
        &admin,
        Some(&allocation),
        201,
    )
    .await;
    let deposit = json!({"account": "astro", "currency": "su", "amount": "5",
                         "reason": "top-up", "idempotency_key": "d-1"});
    api.checked(
        Method::POST,
        "/v1/deposits",
        "/v1/deposits",
        &admin,
        Some(&deposit),
        201,
    )
    .await;
    let retry = api
        .checked(
            Method::POST,
            "/v1/deposits",
            "/v1/deposits",
            &admin,
            Some(&deposit),
            200,
        )
        .await;
    assert_eq!(retry["posted"], false);
    // An adjustment where no allocation covers the moment: `allocation` is null.
    let adjustment = json!({"account": "chemistry", "currency": "su", "amount": "1.5",
                            "reason": "fix", "idempotency_key": "a-1"});
    let adjusted = api
        .checked(
            Method::POST,
            "/v1/adjustments",
            "/v1/adjustments",
            &admin,
            Some(&adjustment),
            201,
        )
        .await;
    assert_eq!(adjusted["allocation"], Value::Null);
    api.checked(
        Method::POST,
        "/v1/adjustments",
        "/v1/adjustments",
        &admin,
        Some(&adjustment),
        200,
    )
    .await;
    let closed = api
        .checked(
            Method::POST,
            "/v1/accounts/astro/close",
            "/v1/accounts/{name}/close",
            &admin,
            Some(&json!({"reason": "project over"})),
            200,
        )
        .await;
    assert_eq!(closed["reason"], "project over");
    let closed_again = api
        .checked(
            Method::POST,
            "/v1/accounts/astro/close",
            "/v1/accounts/{name}/close",
            &admin,
            Some(&json!({"reason": "twice"})),
            200,
        )
        .await;
    assert!(closed_again.get("reason").is_none(), "{closed_again:#}");
    let audit = api
        .call(Method::GET, "/v1/audit?limit=0", &admin, None)
        .await;
    assert_eq!(audit.status, 400, "{audit:#?}");
}

#[tokio::test]
async fn a_closed_account_takes_no_jobs_and_its_quote_says_so() {
    let api = api().await;
    let admin = api.token("root", Role::Admin);
    let carol = api.token("carol", Role::User);
    // lab, under chemistry, has money; chemistry itself has none.
    api.checked(
        Method::POST,
        "/v1/accounts",
        "/v1/accounts",
        &admin,
        Some(&json!({"name": "lab", "parent": "chemistry"})),
        201,
    )
    .await;
    api.call(
        Method::POST,
        "/v1/associations",
        &admin,
        Some(&json!({"user": "carol", "account": "lab"})),
    )
    .await;
    api.allocate("lab", "su", 100_000_000).await;
    api.allocate("lab", "usd", 100_000_000).await;
    let job = |account: &str| json!({"account": account, "ntasks": 1, "script": "#!/bin/bash\n"});
    let open = api
        .call(Method::POST, "/v1/quotes", &carol, Some(&job("lab")))
        .await;
    assert_eq!(open.json[0]["eligible"], true, "{open:#?}");

    api.checked(
        Method::POST,
        "/v1/accounts/chemistry/close",
        "/v1/accounts/{name}/close",
        &admin,
        Some(&json!({"reason": "merged into physics"})),
        200,
    )
    .await;
    for (account, closed) in [("lab", "chemistry"), ("chemistry", "chemistry")] {
        // The quote: no cluster is eligible, none chosen, each says why.
        let quote = api.quote(&carol, &job(account), 200).await;
        for q in quote.as_array().unwrap() {
            assert_eq!(q["eligible"], false, "{q}");
            assert_eq!(q["chosen"], false, "{q}");
            assert!(
                q["reasons"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r.as_str().unwrap().contains("is closed")),
                "{q}"
            );
        }
        // The submission: 409 account_closed naming the account and the closed one, whether
        // the ledger refused the hold (lab has money) or nothing could pay (chemistry).
        let refused = api
            .call(Method::POST, "/v1/jobs", &carol, Some(&job(account)))
            .await;
        assert_eq!(refused.status, 409, "{refused:#?}");
        assert_eq!(refused.json["error"], "account_closed", "{refused:#?}");
        assert_eq!(
            refused.json["details"],
            json!({"account": account, "closed": closed})
        );
    }
    // Nothing was held for them.
    assert_eq!(api.f.balance("lab", "su").await.held, 0);
}

#[tokio::test]
async fn bad_job_queries_and_bodies_are_refused_by_kind() {
    let api = api().await;
    let alice = api.token("alice", Role::User);
    for query in [
        "state=running",
        "limit=0",
        "limit=10001",
        "limit=many",
        "colour=red",
    ] {
        let answer = api
            .call(Method::GET, &format!("/v1/jobs?{query}"), &alice, None)
            .await;
        assert_eq!(answer.status, 400, "{query}: {answer:#?}");
        assert_eq!(answer.json["error"], "bad_request", "{query}");
    }
    // JSON of the wrong shape is 422, whatever serde_json calls the error: memory takes
    // exactly one key.
    for memory in [
        json!({}),
        json!({"per_node_mb": 1, "per_cpu_mb": 2}),
        json!(4096),
    ] {
        let body = json!({"ntasks": 1, "memory": memory, "script": "#!/bin/bash\n"});
        let answer = api
            .call(Method::POST, "/v1/quotes", &alice, Some(&body))
            .await;
        assert_eq!(answer.status, 422, "{memory}: {answer:#?}");
        assert_eq!(answer.json["error"], "invalid_request", "{memory}");
    }
    let one = json!({"ntasks": 1, "memory": {"per_cpu_mb": 2048}, "script": "#!/bin/bash\n"});
    let answer = api
        .call(Method::POST, "/v1/quotes", &alice, Some(&one))
        .await;
    assert_eq!(answer.status, 200, "{answer:#?}");
    // Not JSON: 400; no JSON content type: 415; too large: 413; all in the error shape.
    let raw = |content_type: Option<&'static str>, body: String| {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri("/v1/quotes")
            .header(header::AUTHORIZATION, format!("Bearer {alice}"));
        if let Some(t) = content_type {
            request = request.header(header::CONTENT_TYPE, t);
        }
        let request = request.body(Body::from(body)).unwrap();
        let router = api.router.clone();
        async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            let json: Value = serde_json::from_slice(&bytes).unwrap();
            (
                status,
                json["error"].as_str().unwrap_or_default().to_string(),
            )
        }
    };
    let bad = "bad_request".to_string();
    assert_eq!(
        raw(Some("application/json"), "{\"ntasks\": ".into()).await,
        (400, bad.clone())
    );
    assert_eq!(
        raw(Some("text/plain"), "{}".into()).await,
        (415, bad.clone())
    );
    assert_eq!(raw(None, "{}".into()).await, (415, bad.clone()));
    assert_eq!(
        raw(Some("application/merge-patch+json"), "{}".into())
            .await
            .0,
        200
    );
    let huge = format!("{{\"comment\": \"{}\"}}", "x".repeat(3 << 20));
    assert_eq!(raw(Some("application/json"), huge).await, (413, bad));
}
