//! The real slurmrestd [`Forwarder`] against a mock slurmrestd 22.05 (OpenAPI v0.0.38): the
//! submit body, the per-user token, refusals and outages (hold released), and cancel.

use std::sync::Arc;

use bursar_collectors::slurmrestd::Sharing;
use bursar_gateway::admission::forward::{forwarders_from_config, slurm_submission, ForwardJob};
use bursar_gateway::admission::{Admission, ForwardedRef, Submitted};
use bursar_gateway::app::App;
use bursar_gateway::auth::{Principal, Role};
use bursar_gateway::config::Config;
use bursar_gateway::request::JobRequest;
use bursar_ledger::HoldState;
use bursar_pricing::Currency;
use serde_json::{json, Value};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const SUBMIT: &str = "/slurm/v0.0.38/job/submit";
const KEY: [u8; 32] = [7u8; 32];

struct Fixture {
    _dir: tempfile::TempDir,
    app: Arc<App>,
    admission: Admission,
}

async fn fixture(url: &str) -> Fixture {
    fixture_at(url, "v0.0.38").await
}

/// The fixture with slurmrestd at OpenAPI `version`.
async fn fixture_at(url: &str, version: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("jwt.key");
    std::fs::write(&key, KEY).unwrap();
    let yaml = format!(
        "database: sqlite://{db}\n\
         accounts:\n  physics: {{}}\n\
         users:\n  alice: {{default_account: physics}}\n\
         clusters:\n  onprem:\n    kind: slurm\n    currency: su\n\
         \x20   partitions:\n      batch: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0\"}}\n\
         \x20     whole: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0\"}}\n\
         \x20     smt: {{weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0\"}}\n\
         \x20   submit:\n      slurmrestd: {{url: \"{url}\", jwt_key_file: \"{key}\", api_version: {version}}}\n\
         \x20     timeout: 2s\n      default_partition: batch\n\
         \x20     partitions:\n        batch: {{max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [h100]}}\n\
         \x20       whole: {{max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}}\n\
         \x20       smt: {{max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, node_threads_per_core: 2}}\n",
        db = dir.path().join("ledger.db").display(),
        key = key.display(),
    );
    let config = Config::parse(&yaml).unwrap();
    config.validate().unwrap();
    let app = Arc::new(App::open(config).await.unwrap());
    let t = bursar_gateway::timefmt::now();
    app.ledger
        .set_allocation(
            "physics",
            &Currency::new("su"),
            100_000_000,
            t - 86_400,
            t + 86_400,
        )
        .await
        .unwrap();
    let admission = Admission::from_app(app.clone()).unwrap();
    Fixture {
        _dir: dir,
        app,
        admission,
    }
}

fn alice() -> Principal {
    Principal {
        user: "alice".into(),
        role: Role::User,
        token_id: None,
    }
}

fn request() -> JobRequest {
    serde_json::from_value(json!({
        "ntasks": 4, "job_name": "train", "gpus": {"count": 1, "kind": "h100"},
        "memory": {"per_node_mb": 4096}, "output": "out-%j.txt",
        "script": "#!/bin/bash\nsrun hostname\n",
    }))
    .unwrap()
}

/// The claims of the token slurmrestd received, checked against the cluster's key.
fn token_claims(request: &Request) -> Value {
    let token = request.headers["X-SLURM-USER-TOKEN"].to_str().unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<Value>(
        token,
        &jsonwebtoken::DecodingKey::from_secret(&KEY),
        &validation,
    )
    .unwrap()
    .claims
}

#[tokio::test]
async fn submits_the_v0_0_38_body_as_the_user_and_links_the_hold() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SUBMIT))
        .and(header("X-SLURM-USER-NAME", "alice"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [],
            "job_id": 4242, "step_id": "BATCH", "job_submit_user_msg": null
        })))
        .expect(1)
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let submitted = f.admission.submit(&alice(), request(), None).await.unwrap();
    assert_eq!(submitted.cluster_job_id, "4242");

    let received = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "script": "#!/bin/bash\nsrun hostname\n",
            "job": {
                "name": "train",
                "nodes": 1,
                "account": "physics",
                "partition": "batch",
                "tasks": 4,
                "time_limit": 60,
                "memory_per_node": 4096,
                "gres": "gpu:h100:1",
                "current_working_directory": "/home/alice",
                "standard_output": "out-%j.txt",
                "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin"}
            }
        })
    );
    let claims = token_claims(&received[0]);
    assert_eq!(claims["sun"], "alice", "the job runs as its user");

    // The link is written behind the answer; readers outside the service wait for it.
    f.admission.settled().await;
    let hold = f.app.ledger.holds(true).await.unwrap().pop().unwrap();
    assert_eq!(hold.job_ref.as_deref(), Some("4242"));

    // Cancel: DELETE as alice, then the hold is released.
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.38/job/4242"))
        .and(header("X-SLURM-USER-NAME", "alice"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"errors": []})))
        .expect(1)
        .mount(&server)
        .await;
    let view = f.admission.cancel(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "cancelled");
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 0);
}

/// The cluster's release is asked (a ping) until known, and decides how `--mincpus` is
/// priced: for nodes × N CPUs until it is known (and on Slurm up to 24.11.0), for the tasks'
/// CPUs on a 24.11.1+ cluster, which only picks nodes by it.
#[tokio::test]
async fn the_release_is_asked_until_known_and_decides_how_mincpus_is_priced() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/ping/"))
        .respond_with(ResponseTemplate::new(503).set_body_string("starting"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/ping/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "pings": [{"hostname": "ctl", "pinged": "UP", "responding": true, "latency": 300,
                "mode": "primary", "primary": true}],
            "meta": {"slurm": {"release": "24.11.5"}}, "errors": [], "warnings": []})))
        .with_priority(2)
        .mount(&server)
        .await;
    let f = fixture_at(&server.uri(), "v0.0.42").await;
    let forwarders = forwarders_from_config(&f.app.config).unwrap();
    let forwarder = forwarders["onprem"].clone();
    let admission = Admission::new(f.app.clone(), forwarders);
    let request: JobRequest = serde_json::from_value(json!({"ntasks": 1,
        "min_cpus_per_node": 4, "script": "#!/bin/sh\ntrue\n"}))
    .unwrap();
    let estimate = |admission: &Admission| {
        let admission = admission.clone();
        let request = request.clone();
        async move {
            let quote = admission.quote(&alice(), &request).await.unwrap();
            quote.cluster("onprem").unwrap().estimate
        }
    };
    // 4 CPUs and their 4000 MB for the default hour, until the release is known
    assert_eq!(forwarder.allocates_min_cpus(), None);
    assert_eq!(estimate(&admission).await, Some(4_976_562));
    tokio::time::timeout(std::time::Duration::from_secs(20), forwarder.prepare())
        .await
        .expect("prepare asks again until it knows");
    let pings = server.received_requests().await.unwrap().len();
    assert_eq!(pings, 2, "one refused, one answered");
    assert_eq!(forwarder.allocates_min_cpus(), Some(false));
    // 24.11.5: the task's one CPU and its 1000 MB
    assert_eq!(estimate(&admission).await, Some(1_244_141));
}

#[tokio::test]
async fn a_refusal_is_a_502_with_slurms_message_and_releases_the_hold() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SUBMIT))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "errors": [{"error_code": 2045, "error": "Invalid account or account/partition combination specified"}]
        })))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let err = f
        .admission
        .submit(&alice(), request(), None)
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (502, "upstream_refused"));
    assert!(err.to_string().contains("Invalid account"), "{err}");
    let holds = f.app.ledger.holds(false).await.unwrap();
    assert_eq!(holds[0].state, HoldState::Released);
    let balance = &f
        .app
        .ledger
        .balance("physics", bursar_gateway::timefmt::now())
        .await
        .unwrap()[0];
    assert_eq!(balance.held, 0);
}

#[tokio::test]
async fn an_unreachable_slurmrestd_is_a_503_and_releases_the_hold() {
    // Bound and never listening, and kept so for the whole test: connecting is refused, and
    // no other test can be given the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let f = fixture(&format!("http://127.0.0.1:{port}")).await;
    let err = f
        .admission
        .submit(&alice(), request(), None)
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (503, "upstream_unavailable"));
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 0);
    assert_eq!(
        f.app.ledger.api_jobs(None, None).await.unwrap()[0].state,
        "failed"
    );
}

#[tokio::test]
async fn a_hanging_slurmrestd_times_out_as_a_503() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SUBMIT))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"errors": [], "job_id": 1}))
                .set_delay(std::time::Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let err = f
        .admission
        .submit(&alice(), request(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "upstream_unavailable", "{err}");
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 0);
}

#[test]
fn every_option_reaches_slurm_as_the_user_gave_it() {
    let job = |extra: Value| {
        let mut base = json!({"ntasks": 2, "script": "#!/bin/sh\ntrue\n"});
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        ForwardJob {
            cluster: "onprem".into(),
            user: "alice".into(),
            account: "physics".into(),
            partition: "batch".into(),
            qos: None,
            time_limit_min: 30,
            working_dir: "/tmp".into(),
            request: serde_json::from_value(base).unwrap(),
        }
    };
    // --exclusive[=MODE] and -s: Slurm's one sharing setting, as sbatch asks for them.
    for (request, shared) in [
        (json!({"exclusive": true}), Some(Sharing::Exclusive)),
        (
            json!({"slurm": {"oversubscribe": true}}),
            Some(Sharing::Oversubscribe),
        ),
        (json!({"slurm": {"exclusive": "user"}}), Some(Sharing::User)),
        (json!({"slurm": {"exclusive": "mcs"}}), Some(Sharing::Mcs)),
        (json!({"slurm": {"exclusive": "topo"}}), Some(Sharing::Topo)),
        (json!({}), None),
    ] {
        assert_eq!(
            slurm_submission(&job(request.clone())).unwrap().shared,
            shared,
            "{request}"
        );
    }
    // the options only Slurm takes, with the nodes a spread job is pinned to
    let filled = slurm_submission(&job(json!({"nodes": 2, "ntasks": 4, "slurm": {
        "spread_job": true, "use_min_nodes": true, "wait_all_nodes": true,
        "delay_boot": "1:30", "mcs_label": "physics"}})))
    .unwrap();
    assert!(filled.spread_job && filled.use_min_nodes);
    assert_eq!(filled.wait_all_nodes, Some(true));
    assert_eq!(filled.delay_boot, Some(90), "MM:SS");
    assert_eq!(filled.mcs_label.as_deref(), Some("physics"));
    assert_eq!(filled.nodes, Some(2));
    let options = json!({"contiguous": true, "extra": "rack=a", "priority": "top"});
    let s = slurm_submission(&job(json!({"slurm": options}))).unwrap();
    assert!(s.contiguous);
    assert_eq!(s.extra.as_deref(), Some("rack=a"));
    assert_eq!(s.priority, Some(4_294_967_293));
    // --hold wins, as in sbatch
    let s = slurm_submission(&job(json!({"hold": true, "slurm": options}))).unwrap();
    assert_eq!((s.hold, s.priority), (true, None));
    let err = slurm_submission(&job(json!({"mail_type": "END,SOON"}))).unwrap_err();
    assert!(err.starts_with("--mail-type: \"SOON\""), "{err}");
    // Per-CPU memory, per-job GPUs and tasks per node go as given, not converted: Slurm
    // places them (a per-node conversion turned MinMemoryCPU into MinMemoryNode and
    // TresPerJob into TresPerNode, and dropped --ntasks-per-node).
    let s = slurm_submission(&job(json!({"nodes": 2, "ntasks": 3, "ntasks_per_node": 2,
        "memory": {"per_cpu_mb": 1000}, "gpus": {"count": 3, "per": "job", "kind": "h100"},
        "mail_type": "END,FAIL", "mail_user": "alice@example.org", "other_gres": ["shard:1"],
        "wrap": "hostname", "script": null})))
    .unwrap();
    assert_eq!(
        (s.nodes, s.tasks, s.tasks_per_node),
        (Some(2), Some(3), Some(2))
    );
    assert_eq!(
        (s.memory_per_node_mb, s.memory_per_cpu_mb),
        (None, Some(1000))
    );
    assert_eq!(s.gpus_per_node, None);
    let per_job = s.gpus_per_job.unwrap();
    assert_eq!((per_job.count, per_job.kind.as_deref()), (3, Some("h100")));
    assert_eq!(s.mail_type, ["END", "FAIL"]);
    assert_eq!(s.mail_user.as_deref(), Some("alice@example.org"));
    assert_eq!(s.other_gres, ["shard:1"]);
    assert!(s.script.starts_with("#!/bin/sh"));
    assert_eq!(s.time_limit_min, Some(30));
    let s = slurm_submission(&job(json!({"memory": {"per_node_mb": 4000},
        "gpus": {"count": 1, "per": "node"}})))
    .unwrap();
    // A node count the price depends on (per-node memory, GPUs) is pinned, even one node;
    // a one-node job priced by its CPUs alone is left to Slurm to place, as sbatch leaves a
    // job without -N (one whose tasks need more nodes is spread, not refused).
    assert_eq!(s.nodes, Some(1));
    let cpus_only =
        slurm_submission(&job(json!({"ntasks": 64, "memory": {"per_cpu_mb": 1000}}))).unwrap();
    assert_eq!(cpus_only.nodes, None);
    // ... unless the user asked for its one node (-N 1): then it stays on one node.
    let one_node = slurm_submission(&job(json!({"nodes": 1, "ntasks": 8}))).unwrap();
    assert_eq!(one_node.nodes, Some(1));
    // ... or asked for CPUs per node (--mincpus): on more nodes Slurm would allocate more.
    let per_node = slurm_submission(&job(json!({"ntasks": 2, "min_cpus_per_node": 4,
        "licenses": "matlab:2"})))
    .unwrap();
    assert_eq!(
        (
            per_node.nodes,
            per_node.min_cpus_per_node,
            per_node.licenses.as_deref()
        ),
        (Some(1), Some(4), Some("matlab:2"))
    );
    // ... or named it (-w): Slurm would take the count from the list.
    let named = slurm_submission(&job(json!({"ntasks": 2, "slurm": {"nodelist": "n1"}}))).unwrap();
    assert_eq!(
        (named.nodes, named.required_nodes.as_deref()),
        (Some(1), Some("n1"))
    );
    // GPUs per task and memory, CPUs per GPU go as given; --gpus with --cpus-per-gpu is pinned
    // (Slurm gives each node CPUs for the GPUs it places there), per-task GPUs are not.
    let per_task = slurm_submission(&job(json!({"ntasks": 4,
        "gpus": {"count": 1, "per": "task", "kind": "h100"}, "memory": {"per_gpu_mb": 500}})))
    .unwrap();
    assert_eq!(per_task.gpus_per_task.map(|g| g.count), Some(1));
    assert_eq!(
        (
            per_task.memory_per_gpu_mb,
            per_task.memory_per_node_mb,
            per_task.nodes
        ),
        (Some(500), None, None)
    );
    let per_gpu = slurm_submission(&job(json!({"ntasks": 2,
        "gpus": {"count": 2, "per": "job"}, "cpus_per_gpu": 3})))
    .unwrap();
    assert_eq!((per_gpu.cpus_per_gpu, per_gpu.nodes), (Some(3), Some(1)));
    // -c goes as given, 1 included (sbatch then sets SLURM_CPUS_PER_TASK); without -c, none.
    assert_eq!(one_node.cpus_per_task, None);
    let one_cpu = slurm_submission(&job(json!({"cpus_per_task": 1}))).unwrap();
    assert_eq!(one_cpu.cpus_per_task, Some(1));
    assert_eq!(
        (s.memory_per_node_mb, s.memory_per_cpu_mb),
        (Some(4000), None)
    );
    assert_eq!(s.gpus_per_node.map(|g| g.count), Some(1));
    assert_eq!(s.gpus_per_job, None);
    // Node features go as given: slurmctld reads sbatch's syntax.
    let s = slurm_submission(&job(json!({"constraint": "[skylake|icelake]&ib"}))).unwrap();
    assert_eq!(s.constraints.as_deref(), Some("[skylake|icelake]&ib"));
    assert_eq!(slurm_submission(&job(json!({}))).unwrap().constraints, None);
    // A job array goes as written: slurmctld reads the step and the throttle from the text.
    let s = slurm_submission(&job(json!({"array": "[0-5:2]%2"}))).unwrap();
    assert_eq!(s.array.as_deref(), Some("[0-5:2]%2"));
    assert_eq!(slurm_submission(&job(json!({}))).unwrap().array, None);
    // The script's command line: its path, then its arguments; an API request without a path
    // stands the job's name in for it; --wrap and a path-less, argument-less script send none.
    let s = slurm_submission(&job(json!({"script_path": "/home/alice/job.sh",
        "script_args": ["in.dat", ""]})))
    .unwrap();
    assert_eq!(s.argv, ["/home/alice/job.sh", "in.dat", ""]);
    let s = slurm_submission(&job(json!({"script_path": "/home/alice/job.sh"}))).unwrap();
    assert_eq!(s.argv, ["/home/alice/job.sh"]);
    let s = slurm_submission(&job(json!({"job_name": "train", "script_args": ["x"]}))).unwrap();
    assert_eq!(s.argv, ["train", "x"]);
    assert!(slurm_submission(&job(json!({}))).unwrap().argv.is_empty());
}

#[tokio::test]
async fn a_quote_says_why_whole_nodes_cannot_be_priced() {
    let server = MockServer::start().await;
    let f = fixture(&server.uri()).await;
    let mut constrained = request();
    constrained.exclusive = true;
    let quote = f.admission.quote(&alice(), &constrained).await.unwrap();
    assert_eq!(
        quote.cluster("onprem").unwrap().reasons,
        [
            "--exclusive gives the job whole nodes, which Slurm charges whole, and partition \
          batch on onprem does not say how big its nodes are (node_cpus, node_mem_mb in \
          bursar's configuration); ask for the nodes' CPUs and memory with -c and --mem \
          instead"
        ]
    );
    let err = f
        .admission
        .submit(&alice(), constrained, None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn cancelling_a_job_that_already_ended_still_releases_the_hold() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SUBMIT))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"errors": [], "job_id": 77})))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.38/job/77"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "errors": [{"error_code": 2021, "error": "Job/step already completing or completed"}]
        })))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let submitted = f.admission.submit(&alice(), request(), None).await.unwrap();
    let view = f.admission.cancel(&alice(), submitted.id).await.unwrap();
    assert_eq!(view.state, "cancelled");
    assert!(f.app.ledger.holds(true).await.unwrap().is_empty());

    // Any other refusal keeps the hold: the job may still be running.
    let second = f.admission.submit(&alice(), request(), None).await.unwrap();
    server.reset().await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "errors": [{"error_code": 2002, "error": "Access/permission denied"}]
        })))
        .mount(&server)
        .await;
    let err = f.admission.cancel(&alice(), second.id).await.unwrap_err();
    assert_eq!(err.code(), "upstream_refused");
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 1);
    assert_eq!(
        f.admission.job(&alice(), second.id).await.unwrap().state,
        "held"
    );
}

/// slurmrestd answering the submissions with `ids`, in order, and asked about jobs with
/// slurmctld's real answers (22.05.8) as the default user: job 3119 held (`PENDING`), job 4242
/// unknown (HTTP 500, errno 2017).
async fn mount_submits_and_states(server: &MockServer, ids: &[u64]) {
    for id in ids {
        Mock::given(method("POST"))
            .and(path(SUBMIT))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"errors": [], "job_id": id})),
            )
            .up_to_n_times(1)
            .mount(server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/3119"))
        .and(header("x-slurm-user-name", "slurm"))
        .respond_with(ResponseTemplate::new(200).set_body_string(include_str!(
            "../../collectors/tests/fixtures/slurmrestd/real-22.05/job-held.json"
        )))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/4242"))
        .respond_with(ResponseTemplate::new(500).set_body_string(include_str!(
            "../../collectors/tests/fixtures/slurmrestd/real-22.05/job-unknown.json"
        )))
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_hold_whose_job_still_waits_on_the_cluster_is_kept_the_others_expire() {
    let server = MockServer::start().await;
    mount_submits_and_states(&server, &[3119, 4242]).await;
    let f = fixture(&server.uri()).await;
    let mut held = request();
    held.hold = true;
    let first = f
        .admission
        .submit(&alice(), held.clone(), None)
        .await
        .unwrap();
    let second = f.admission.submit(&alice(), held, None).await.unwrap();
    assert_eq!(
        (
            first.cluster_job_id.as_str(),
            second.cluster_job_id.as_str()
        ),
        ("3119", "4242")
    );
    f.admission.settled().await;
    let holds = f.app.ledger.holds(true).await.unwrap();
    let lifetime = holds[0].expires_at - holds[0].placed_at;

    // Past both holds' expiry: job 3119 still waits (held), job 4242 is gone.
    let later = holds.iter().map(|h| h.expires_at).max().unwrap() + 60;
    assert_eq!(f.admission.keep_waiting(later).await, 1);
    assert_eq!(f.app.ledger.expire_holds(later).await.unwrap(), 1);
    let active = f.app.ledger.holds(true).await.unwrap();
    assert_eq!(active.len(), 1, "{active:?}");
    assert_eq!(active[0].job_ref.as_deref(), Some("3119"));
    assert_eq!(active[0].expires_at, later + lifetime);
    // Asked again before its new expiry, nothing is due.
    assert_eq!(f.admission.keep_waiting(later + 60).await, 0);
}

/// `GET /v1/jobs/{id}/status`: what slurmctld reports now, with sbatch --wait's exit code.
#[tokio::test]
async fn a_job_s_status_is_what_slurmctld_reports_with_sbatch_s_exit_code() {
    let server = MockServer::start().await;
    mount_submits_and_states(&server, &[3119, 4242, 6000]).await;
    let mut ended: Value = serde_json::from_str(include_str!(
        "../../collectors/tests/fixtures/slurmrestd/real-22.05/job-held.json"
    ))
    .unwrap();
    ended["jobs"][0]["job_state"] = json!("FAILED");
    ended["jobs"][0]["exit_code"] = json!(3 << 8);
    // Asked as the job's user, as sbatch --wait asks (PrivateData=jobs hides it from others).
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/6000"))
        .and(header("x-slurm-user-name", "alice"))
        .respond_with(ResponseTemplate::new(200).set_body_json(ended))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/3119"))
        .and(header("x-slurm-user-name", "alice"))
        .respond_with(ResponseTemplate::new(200).set_body_string(include_str!(
            "../../collectors/tests/fixtures/slurmrestd/real-22.05/job-held.json"
        )))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            f.admission
                .submit(&alice(), request(), None)
                .await
                .unwrap()
                .id,
        );
    }
    f.admission.settled().await;
    let status = |i: usize| {
        let admission = f.admission.clone();
        let id = ids[i];
        async move { admission.status(&alice(), id).await.unwrap().to_json() }
    };
    let waiting = status(0).await;
    assert_eq!(
        (
            &waiting["cluster_job_id"],
            &waiting["states"],
            &waiting["finished"],
            &waiting["exit_code"]
        ),
        (
            &json!("3119"),
            &json!(["PENDING"]),
            &json!(false),
            &Value::Null
        ),
        "{waiting}"
    );
    let gone = status(1).await;
    assert_eq!(
        (&gone["known"], &gone["finished"], &gone["exit_code"]),
        (&json!(false), &json!(true), &Value::Null),
        "{gone}"
    );
    let failed = status(2).await;
    assert_eq!(
        (
            &failed["known"],
            &failed["states"],
            &failed["finished"],
            &failed["exit_code"]
        ),
        (&json!(true), &json!(["FAILED"]), &json!(true), &json!(3)),
        "{failed}"
    );
    // Another user does not see it.
    let bob = Principal {
        user: "bob".into(),
        role: Role::User,
        token_id: None,
    };
    let err = f.admission.status(&bob, ids[2]).await.unwrap_err();
    assert_eq!(err.code(), "not_found", "{err}");
}

/// The states alice's view gives `jobs`.
async fn states(f: &Fixture, jobs: &[Submitted]) -> Vec<String> {
    let mut states = Vec::new();
    for job in jobs {
        states.push(f.admission.job(&alice(), job.id).await.unwrap().state);
    }
    states
}

/// slurmctld logs a job it requeues after a node failure as ended NODE_FAIL and runs it again
/// under the same id: that record does not settle the hold. Asked after the record is posted,
/// the cluster says job 3119 waits to run again (its hold stays) and job 4242 is gone (its
/// hold settles, and its job shows settled); a cluster that cannot be asked leaves the hold
/// for next time.
#[tokio::test]
async fn a_hold_settles_on_a_node_failure_only_once_its_cluster_will_not_run_the_job_again() {
    let server = MockServer::start().await;
    // Job 3119 waits (the pending job stands for one queued to run again), 4242 is gone, and
    // slurmrestd cannot say about 5353.
    mount_submits_and_states(&server, &[3119, 4242, 5353]).await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/5353"))
        .respond_with(ResponseTemplate::new(502).set_body_string("Bad Gateway"))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(f.admission.submit(&alice(), request(), None).await.unwrap());
    }
    f.admission.settled().await;
    let t = bursar_gateway::timefmt::now();
    let node_fail = |job: &str| bursar_ledger::UsageCharge {
        cluster: "onprem".into(),
        job_id: job.into(),
        display_id: job.into(),
        submit: t,
        revision: "nf".into(),
        account: "physics".into(),
        user: "alice".into(),
        partition: Some("batch".into()),
        qos: None,
        state: "NODE_FAIL".into(),
        is_final: true,
        currency: Currency::new("su"),
        amount_micros: 0,
        effective_at: t,
        price_version: None,
        note: None,
    };
    let out = f
        .app
        .ledger
        .post_usage(
            &[node_fail("3119"), node_fail("4242"), node_fail("5353")],
            t,
        )
        .await
        .unwrap();
    assert_eq!((out.charged, out.settled_holds), (3, 0));
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 3);

    assert_eq!(f.admission.settle_not_rerun(None, t + 30).await, 1);
    let active = f.app.ledger.holds(true).await.unwrap();
    let refs: Vec<_> = active.iter().filter_map(|h| h.job_ref.as_deref()).collect();
    assert_eq!(refs, ["3119", "5353"]);
    assert_eq!(states(&f, &jobs).await, ["held", "settled", "held"]);
    let settled = f.app.ledger.holds(false).await.unwrap();
    let gone = settled
        .iter()
        .find(|h| h.job_ref.as_deref() == Some("4242"))
        .unwrap();
    assert_eq!(gone.state, HoldState::Settled);
    assert_eq!(gone.closed_at, Some(t + 30));

    // Asked again: nothing new to settle; the waiting job and the unreachable one keep theirs.
    assert_eq!(f.admission.settle_not_rerun(None, t + 60).await, 0);
    assert_eq!(f.app.ledger.holds(true).await.unwrap().len(), 2);
    // Once their lifetime has run out, the one that cannot be asked is settled (its final
    // usage is posted) rather than expired; the waiting one is kept.
    let due = active.iter().map(|h| h.expires_at).max().unwrap();
    assert_eq!(f.admission.settle_not_rerun(None, due).await, 1);
    let active = f.app.ledger.holds(true).await.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].job_ref.as_deref(), Some("3119"));
    assert_eq!(states(&f, &jobs).await, ["held", "settled", "settled"]);
}

/// v0.0.38 names a job by its first state flag (Slurm's `job_state_string()`): a held,
/// requeued-and-held, stopped or signalled job is still on the cluster, and its hold is kept;
/// one that ended or was revoked is not.
#[tokio::test]
async fn jobs_named_by_a_state_flag_still_wait() {
    use bursar_collectors::slurmrestd::{
        ApiSelection, ApiVersion, SlurmAuth, SlurmRestClient, SlurmRestConfig,
    };
    use bursar_gateway::admission::forward::SlurmForwarder;
    use bursar_gateway::admission::Forwarder;

    let states = [
        ("PENDING", true),
        ("REQUEUE_HOLD", true),
        ("SPECIAL_EXIT", true),
        ("RESV_DEL_HOLD", true),
        ("REQUEUE_FED", true),
        ("STOPPED", true),
        ("SIGNALING", true),
        ("STAGE_OUT", true),
        ("COMPLETING", true),
        ("COMPLETED", false),
        ("CANCELLED", false),
        ("REVOKED", false),
    ];
    let server = MockServer::start().await;
    for (id, (state, _)) in states.iter().enumerate() {
        Mock::given(method("GET"))
            .and(path(format!("/slurm/v0.0.38/job/{}", id + 1)))
            .respond_with(ResponseTemplate::new(200).set_body_json(
                json!({"errors": [], "jobs": [{"job_id": id + 1, "job_state": state}]}),
            ))
            .mount(&server)
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("jwt.key");
    std::fs::write(&key, KEY).unwrap();
    let auth = SlurmAuth::JwtKey {
        key_file: key,
        user: "slurm".into(),
        lifetime: std::time::Duration::from_secs(300),
    };
    let mut config = SlurmRestConfig::new(server.uri(), "onprem", auth);
    config.api = ApiSelection::Fixed(ApiVersion::V0_0_38);
    let forwarder = SlurmForwarder::new(SlurmRestClient::new(config).unwrap());
    for (id, (state, waiting)) in states.iter().enumerate() {
        assert_eq!(
            forwarder
                .still_waiting(ForwardedRef {
                    cluster_job_id: None,
                    settle_ref: &(id + 1).to_string(),
                    submitted_at: 0,
                })
                .await
                .unwrap(),
            *waiting,
            "{state}"
        );
    }
}

/// A job that gets whole nodes is priced as slurmctld allocates them: every CPU and GPU of each
/// node, memory per CPU over all of them; `--mem=0` is each node's memory. The same as asking
/// for all of it explicitly.
#[tokio::test]
async fn whole_nodes_are_priced_for_every_cpu_and_gpu_of_the_partition_s_nodes() {
    let server = MockServer::start().await;
    let f = fixture(&server.uri()).await;
    let estimate = |request: Value| {
        let admission = &f.admission;
        async move {
            let mut request: JobRequest = serde_json::from_value(request).unwrap();
            request.partition = Some("whole".into());
            let quote = admission.quote(&alice(), &request).await.unwrap();
            let q = quote.cluster("onprem").unwrap().clone();
            assert!(q.reasons.is_empty(), "{:?}", q.reasons);
            q.estimate.unwrap()
        }
    };
    let script = "#!/bin/bash\ntrue\n";
    let exclusive = estimate(json!({"nodes": 2, "exclusive": true, "script": script})).await;
    let explicit = estimate(
        json!({"nodes": 2, "ntasks": 16, "memory": {"per_cpu_mb": 1000},
        "gpus": {"count": 2, "per": "node"}, "script": script}),
    )
    .await;
    assert_eq!(exclusive, explicit);
    let one_cpu = estimate(json!({"nodes": 2, "script": script})).await;
    assert!(exclusive > 8 * one_cpu, "{exclusive} against {one_cpu}");
    // Memory asked for per node stays as asked; --mem=0 is the node's 16000 MB.
    let per_node = estimate(json!({"nodes": 2, "exclusive": true,
        "memory": {"per_node_mb": 4000}, "script": script}))
    .await;
    let explicit = estimate(
        json!({"nodes": 2, "ntasks": 16, "memory": {"per_node_mb": 4000},
        "gpus": {"count": 2, "per": "node"}, "script": script}),
    )
    .await;
    assert_eq!(per_node, explicit);
    let all_memory = estimate(json!({"memory": {"per_node_mb": 0}, "script": script})).await;
    let explicit = estimate(json!({"memory": {"per_node_mb": 16000}, "script": script})).await;
    assert_eq!(all_memory, explicit);

    // More tasks or GPUs than the given nodes hold: Slurm would take (and charge) more whole
    // nodes, so the job must say how many.
    let reasons = |request: Value, partition: &str| {
        let admission = &f.admission;
        let partition = partition.to_string();
        async move {
            let mut request: JobRequest = serde_json::from_value(request).unwrap();
            request.partition = Some(partition);
            let quote = admission.quote(&alice(), &request).await.unwrap();
            quote.cluster("onprem").unwrap().reasons.clone()
        }
    };
    for (request, needed) in [
        (
            json!({"ntasks": 16, "exclusive": true, "script": script}),
            2,
        ),
        (
            json!({"ntasks": 3, "cpus_per_task": 3, "exclusive": true, "script": script}),
            2,
        ),
        (
            json!({"gpus": {"count": 5, "per": "job"}, "exclusive": true, "script": script}),
            3,
        ),
    ] {
        let why = reasons(request.clone(), "whole").await;
        assert_eq!(why.len(), 1, "{request}: {why:?}");
        assert!(
            why[0].starts_with("--exclusive gives the job whole nodes")
                && why[0].ends_with(&format!("pass -N {needed}")),
            "{request}: {why:?}"
        );
    }
    let fits = reasons(
        json!({"nodes": 2, "ntasks": 16, "exclusive": true, "script": script}),
        "whole",
    )
    .await;
    assert!(fits.is_empty(), "{fits:?}");
    let too_big = reasons(
        json!({"cpus_per_task": 9, "exclusive": true, "script": script}),
        "whole",
    )
    .await;
    assert_eq!(
        too_big,
        ["the job does not fit on a node of partition whole on onprem (8 CPUs, 2 GPUs)"]
    );
    // --mem=0 where the node size is unknown has no price.
    let why = reasons(
        json!({"memory": {"per_node_mb": 0}, "script": script}),
        "batch",
    )
    .await;
    assert!(
        why.len() == 1 && why[0].starts_with("--mem=0 gives the job all of each node's memory"),
        "{why:?}"
    );
}

/// On nodes of two threads per core, tasks of `-c 3` round up to whole cores on each node they
/// land on: such a job is sent with the node count it was priced for (as if it gave `-N`),
/// where `-c 2` (whole cores) or the hint (a core per CPU) cost the same however they spread.
#[tokio::test]
async fn tasks_that_do_not_fill_whole_cores_are_pinned_to_their_nodes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SUBMIT))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [],
            "job_id": 4242, "step_id": "BATCH", "job_submit_user_msg": null
        })))
        .mount(&server)
        .await;
    let f = fixture(&server.uri()).await;
    let script = "#!/bin/sh\ntrue\n";
    for (shape, pinned) in [
        (json!({"ntasks": 2, "cpus_per_task": 3}), true),
        (json!({"ntasks": 2, "cpus_per_task": 2}), false),
        (
            json!({"ntasks": 2, "cpus_per_task": 3, "hint": "nomultithread"}),
            false,
        ),
        (json!({"ntasks": 1, "cpus_per_task": 3}), false),
    ] {
        let mut request = shape.clone();
        request["partition"] = json!("smt");
        request["script"] = json!(script);
        let request: JobRequest = serde_json::from_value(request).unwrap();
        f.admission.submit(&alice(), request, None).await.unwrap();
        let received = server.received_requests().await.unwrap();
        let body: Value = serde_json::from_slice(&received.last().unwrap().body).unwrap();
        let nodes = body["job"].get("nodes");
        assert_eq!(nodes.is_some(), pinned, "{shape}: {body}");
        if pinned {
            assert_eq!(nodes, Some(&json!(1)), "{shape}");
        }
        // the same job elsewhere (no threads per core declared) is not pinned
        let mut plain = shape.clone();
        plain["script"] = json!(script);
        let plain: JobRequest = serde_json::from_value(plain).unwrap();
        if plain.hint.is_none() {
            f.admission.submit(&alice(), plain, None).await.unwrap();
            let received = server.received_requests().await.unwrap();
            let body: Value = serde_json::from_slice(&received.last().unwrap().body).unwrap();
            assert_eq!(body["job"].get("nodes"), None, "{shape} on batch: {body}");
        }
    }
}

/// `--exclusive=topo`: not eligible at v0.0.40 (its parsers have no such setting), naming why;
/// eligible from v0.0.41, priced as `--exclusive=user` and as without either.
#[tokio::test]
async fn exclusive_topo_is_kept_from_a_version_without_it() {
    for (version, eligible) in [("v0.0.40", false), ("v0.0.41", true)] {
        let server = MockServer::start().await;
        let f = fixture_at(&server.uri(), version).await;
        let admission = Admission::new(
            f.app.clone(),
            forwarders_from_config(&f.app.config).unwrap(),
        );
        let quote = |slurm: Value| {
            let admission = admission.clone();
            let request: JobRequest = serde_json::from_value(
                json!({"script": "#!/bin/sh\ntrue\n", "ntasks": 2, "slurm": slurm}),
            )
            .unwrap();
            async move {
                let quote = admission.quote(&alice(), &request).await.unwrap();
                quote.cluster("onprem").unwrap().clone()
            }
        };
        let topo = quote(json!({"exclusive": "topo"})).await;
        let user = quote(json!({"exclusive": "user"})).await;
        let plain = quote(json!({})).await;
        assert!(
            plain.estimate.is_some() && user.reasons.is_empty(),
            "{version}: {user:?}"
        );
        assert_eq!(user.estimate, plain.estimate, "{version}: priced as asked");
        if eligible {
            assert!(topo.reasons.is_empty(), "{version}: {:?}", topo.reasons);
            assert_eq!(topo.estimate, plain.estimate, "{version}");
        } else {
            assert!(
                topo.reasons
                    .iter()
                    .any(|r| r.contains("--exclusive=topo cannot reach this cluster")
                        && r.contains(version)),
                "{version}: {:?}",
                topo.reasons
            );
        }
    }
}

/// `--gres-flags=disable-binding` at v0.0.40: not eligible where slurmrestd misspells that flag
/// (Slurm 23.11, 24.05.0 – 24.05.2) or its release is not known yet; eligible from 24.05.3.
#[tokio::test]
async fn disable_binding_is_kept_from_a_slurmrestd_that_misspells_it() {
    for (release, eligible) in [("24.05.2", false), ("24.05.3", true), ("23.11.10", false)] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/slurm/v0.0.40/ping/"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "pings": [{"hostname": "ctl", "pinged": "UP", "responding": true,
                    "latency": 300, "mode": "primary", "primary": true}],
                "meta": {"slurm": {"release": release}}, "errors": [], "warnings": []})))
            .mount(&server)
            .await;
        let f = fixture_at(&server.uri(), "v0.0.40").await;
        let forwarders = forwarders_from_config(&f.app.config).unwrap();
        let forwarder = forwarders["onprem"].clone();
        let admission = Admission::new(f.app.clone(), forwarders);
        let request: JobRequest = serde_json::from_value(json!({"script": "#!/bin/sh\ntrue\n",
            "slurm": {"gres_flags": "disable-binding"}}))
        .unwrap();
        let reasons = |admission: &Admission| {
            let (admission, request) = (admission.clone(), request.clone());
            async move {
                let quote = admission.quote(&alice(), &request).await.unwrap();
                quote.cluster("onprem").unwrap().reasons.clone()
            }
        };
        // the version is known from the configuration, the release only once asked
        let unknown = reasons(&admission).await;
        assert!(
            unknown.iter().any(|r| r.contains("of an unknown release")),
            "{unknown:?}"
        );
        forwarder.prepare().await;
        let known = reasons(&admission).await;
        assert_eq!(known.is_empty(), eligible, "{release}: {known:?}");
        if !eligible {
            assert!(
                known[0].contains(&format!("Slurm {release}")) && known[0].contains("misspells"),
                "{known:?}"
            );
        }
    }
}
