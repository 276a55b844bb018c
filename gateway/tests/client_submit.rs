//! `bursar submit` (and the `sbatch` alias), driving the real binary against a wiremock server
//! standing in for bursar: what is sent, what is printed, how refusals and lost connections
//! end.

mod client_support;

use client_support::*;
use serde_json::{json, Value};
use wiremock::matchers::{header, header_exists, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn submitted() -> Value {
    json!({
        "id": 17, "cluster": "onprem", "cluster_job_id": "4242", "currency": "su",
        "hold": "4.00", "estimate": "4.00",
        "route": {"cluster": "onprem", "explanation": [
            "onprem: first in the preference order, and physics can pay 4.00 su",
            "cloud: not needed"
        ]}
    })
}

async fn accepting_server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/jobs"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header_exists("idempotency-key"))
        .respond_with(ResponseTemplate::new(201).set_body_json(submitted()))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn submit_prints_the_sbatch_line_and_sends_the_parsed_request() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(
        &[
            "submit", "-A", "physics", "-t", "60", "-M", "onprem", "job.sh",
        ],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Submitted batch job 4242 on cluster onprem\n");
    assert_eq!(
        run.stderr,
        "bursar job 17: held 4.00 su (estimate) — onprem: first in the preference order, and \
         physics can pay 4.00 su\n"
    );
    let bodies = bodies(&server, "POST", "/v1/jobs").await;
    assert_eq!(bodies.len(), 1);
    let body = &bodies[0];
    assert_eq!(body["account"], "physics");
    assert_eq!(body["clusters"], json!(["onprem"]));
    // The command line wins over `#SBATCH --time=30`; the rest comes from the script.
    assert_eq!(body["time_limit_min"], 60);
    assert_eq!(body["memory"], json!({"per_node_mb": 4096}));
    assert_eq!(body["job_name"], "train");
    // No -N: no node count, which the server derives as the client did (one node).
    assert_eq!(body.get("nodes"), None, "{body}");
    assert_eq!(body["script"], SCRIPT);
    assert_eq!(
        body["working_dir"],
        home.path().canonicalize().unwrap().to_str().unwrap()
    );
    // sbatch's default --export=ALL, without the bursar token.
    assert_eq!(body["environment"]["MY_VAR"], "hello");
    assert!(body["environment"].get("BURSAR_TOKEN").is_none(), "{body}");
    // The body is a valid request for the server's own parser.
    let request: bursar_gateway::request::JobRequest =
        serde_json::from_value(body.clone()).unwrap();
    request.validate().unwrap();
}

#[tokio::test]
async fn each_invocation_sends_a_fresh_idempotency_key() {
    let server = accepting_server().await;
    let home = Home::new();
    for _ in 0..2 {
        let run = bursar(
            &["submit", "--wrap=hostname", "-t", "5"],
            &home,
            &server.uri(),
        )
        .await;
        assert_eq!(run.code, 0, "{run:?}");
    }
    let keys: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["idempotency-key"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1]);
}

#[tokio::test]
async fn parsable_prints_the_job_id_and_the_cluster_only_when_named() {
    let server = accepting_server().await;
    let home = Home::new();
    let run = bursar(
        &[
            "submit",
            "--parsable",
            "--wrap=hostname",
            "-t",
            "5",
            "--export=NONE",
        ],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    // As sbatch: `jid=$(sbatch --parsable job.sh)` is a bare id unless -M named clusters.
    assert_eq!(run.stdout, "4242\n");
    assert_eq!(run.stderr, "");
    let named = bursar(
        &[
            "submit",
            "--parsable",
            "-M",
            "onprem",
            "--wrap=hostname",
            "-t",
            "5",
        ],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(named.stdout, "4242;onprem\n", "{named:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[0];
    assert_eq!(body["wrap"], "hostname");
    assert_eq!(body["job_name"], "wrap", "sbatch's name for a --wrap job");
    assert_eq!(body["export"], "NONE");
    // --export=NONE: none of the shell's variables, but what sbatch always adds, and the
    // request that slurmd load the user's login environment.
    let env = body["environment"].as_object().unwrap();
    assert!(
        env.get("MY_VAR").is_none() && env.get("HOME").is_none(),
        "{body}"
    );
    assert_eq!(env["SLURM_GET_USER_ENV"], "1");
    assert_eq!(env["SLURM_EXPORT_ENV"], "NONE", "for the job's steps");
    assert_eq!(
        env["SLURM_SUBMIT_DIR"],
        home.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert!(env.contains_key("SLURM_SUBMIT_HOST"), "{body}");
    assert!(
        env["SLURM_UMASK"].as_str().unwrap().len() == 4,
        "{}",
        env["SLURM_UMASK"]
    );
}

#[tokio::test]
async fn sbatch_input_variables_sit_between_the_script_and_the_command_line() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let url = server.uri();
    let run = run_program(
        &bursar_exe(),
        &["submit", "-A", "physics", "job.sh"],
        &home,
        &[
            ("BURSAR_URL", url.as_str()),
            ("SBATCH_ACCOUNT", "chemistry"),
            ("SBATCH_TIMELIMIT", "20"),
            ("SBATCH_QOS", "premium"),
            ("SBATCH_PARTITION", ""),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[0];
    assert_eq!(body["account"], "physics", "the command line wins");
    assert_eq!(body["time_limit_min"], 20, "over #SBATCH --time=30");
    assert_eq!(body["qos"], "premium");
    assert!(
        body.get("partition").is_none(),
        "an empty variable is unset"
    );
    assert_eq!(body["job_name"], "train", "the script's -J");
    assert_eq!(
        body["environment"]["SBATCH_QOS"], "premium",
        "still exported"
    );

    // Without -J anywhere, sbatch names the job after the script file.
    home.write("plain.sh", "#!/bin/sh\nhostname\n");
    let run = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "plain.sh"],
        &home,
        &[("BURSAR_URL", url.as_str()), ("SBATCH_JOB_NAME", "")],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        bodies(&server, "POST", "/v1/jobs").await[1]["job_name"],
        "plain.sh"
    );

    // Memory from the script wins over memory from a variable, as in sbatch; output files and
    // SLURM_CLUSTERS (over SBATCH_CLUSTERS) are read too.
    let run = run_program(
        &bursar_exe(),
        &["submit", "job.sh"],
        &home,
        &[
            ("BURSAR_URL", url.as_str()),
            ("SBATCH_MEM_PER_CPU", "2G"),
            ("SBATCH_OUTPUT", "out-%j.log"),
            ("SBATCH_CLUSTERS", "cloud"),
            ("SLURM_CLUSTERS", "onprem"),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[2];
    assert_eq!(
        body["memory"],
        json!({"per_node_mb": 4096}),
        "#SBATCH --mem=4G"
    );
    assert_eq!(body["output"], "out-%j.log");
    assert_eq!(body["clusters"], json!(["onprem"]));

    // sbatch's variables for the options only Slurm takes, on/off ones set even when empty,
    // and SBATCH_ARRAY_INX for --array.
    let run = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "plain.sh"],
        &home,
        &[
            ("BURSAR_URL", url.as_str()),
            ("SBATCH_RESERVATION", "maint"),
            ("SBATCH_SIGNAL", "B:USR1@30"),
            ("SBATCH_NO_REQUEUE", ""),
            ("SBATCH_NO_KILL", "off"),
            ("SBATCH_ARRAY_INX", "0-3%2"),
            ("SBATCH_DISTRIBUTION", "cyclic:block"),
            ("SBATCH_GPU_BIND", "closest"),
            ("SBATCH_GPU_FREQ", "high"),
            ("SBATCH_CPU_FREQ_REQ", "Performance"),
            ("SBATCH_PROFILE", "task"),
            ("SBATCH_CONTAINER", "/srv/oci/py"),
            ("SBATCH_CONTAINER_ID", "py-1"),
            ("SBATCH_EXCLUSIVE", "user"),
            // sbatch reads it empty as 0
            ("SBATCH_WAIT_ALL_NODES", ""),
            ("SBATCH_USE_MIN_NODES", ""),
            ("SBATCH_DELAY_BOOT", "5"),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[3];
    assert_eq!(
        body["slurm"],
        json!({"reservation": "maint", "signal": "B:USR1@30", "requeue": false,
            "distribution": "cyclic:block", "gpu_bind": "closest", "gpu_freq": "high",
            "cpu_freq": "Performance", "profile": "task", "container": "/srv/oci/py",
            "container_id": "py-1", "exclusive": "user", "wait_all_nodes": false,
            "use_min_nodes": true, "delay_boot": "5"})
    );
    assert_eq!(body["array"], "0-3%2");
    // SBATCH_EXCLUSIVE empty is --exclusive, over the script's -s (sbatch reads the variables
    // after the script)
    home.write("shared.sh", "#!/bin/sh\n#SBATCH -s\nhostname\n");
    let run = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "shared.sh"],
        &home,
        &[("BURSAR_URL", url.as_str()), ("SBATCH_EXCLUSIVE", "")],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[4];
    assert_eq!(body["exclusive"], true, "{body}");
    assert_eq!(body.get("slurm"), None, "{body}");

    // A variable bursar cannot carry is refused, not ignored (even empty: sbatch turns an
    // on/off option on for an empty one); a bad value names its variable.
    for (var, value, says) in [
        (
            "SBATCH_MEM_BIND",
            "local",
            "SBATCH_MEM_BIND is set in the environment, and sbatch then leaves the job's steps \
             without the binding",
        ),
        (
            "SBATCH_OVERCOMMIT",
            "",
            "SBATCH_OVERCOMMIT is set in the environment (sbatch's -O): bursar cannot price it \
             alike on every cluster",
        ),
        // read, and refused as --spread-job without -N is
        ("SBATCH_SPREAD_JOB", "", "--spread-job without a node count"),
        (
            "SBATCH_REQ_SWITCH",
            "2",
            "SBATCH_REQ_SWITCH is set in the environment; bursar takes the switches from \
             --switches=COUNT[@TIME] only",
        ),
        (
            "SBATCH_TIMELIMIT",
            "soon",
            "SBATCH_TIMELIMIT in the environment",
        ),
        (
            "SBATCH_ARRAY_INX",
            "0-3%0",
            "SBATCH_ARRAY_INX in the environment: invalid --array value",
        ),
        // sbatch exits on it too: the on/off words are not --exclusive's
        (
            "SBATCH_EXCLUSIVE",
            "yes",
            "SBATCH_EXCLUSIVE in the environment: invalid --exclusive value",
        ),
        // sbatch would run the job on the file's nodes, laid out as it lists them
        (
            "SLURM_HOSTFILE",
            "/home/alice/hosts",
            "SLURM_HOSTFILE is set in the environment",
        ),
    ] {
        let run = run_program(
            &bursar_exe(),
            &["submit", "-t", "5", "plain.sh"],
            &home,
            &[("BURSAR_URL", url.as_str()), (var, value)],
        )
        .await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stderr.contains(says), "{}", run.stderr);
    }
    assert_eq!(bodies(&server, "POST", "/v1/jobs").await.len(), 5);
    // SBATCH_OVERCOMMIT off (sbatch's no, 0) asks nothing
    for value in ["no", "0"] {
        let run = run_program(
            &bursar_exe(),
            &["submit", "-t", "5", "plain.sh"],
            &home,
            &[("BURSAR_URL", url.as_str()), ("SBATCH_OVERCOMMIT", value)],
        )
        .await;
        assert_eq!(run.code, 0, "{value}: {run:?}");
    }
    // with -w, sbatch leaves SLURM_HOSTFILE alone, and so does bursar
    let run = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "-w", "op-n1", "plain.sh"],
        &home,
        &[
            ("BURSAR_URL", url.as_str()),
            ("SLURM_HOSTFILE", "/home/alice/hosts"),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    // SBATCH_IGNORE_PBS as sbatch reads an on/off variable: an off value leaves the script's
    // #PBS lines to be read (this one refused: sbatch would drop it), an on one has them
    // left out
    home.write("pbs.sh", "#!/bin/sh\n#PBS -l procs=4\nhostname\n");
    for (value, accepted) in [("no", false), ("0", false), ("yes", true), ("", true)] {
        let run = run_program(
            &bursar_exe(),
            &["submit", "-t", "5", "pbs.sh"],
            &home,
            &[("BURSAR_URL", url.as_str()), ("SBATCH_IGNORE_PBS", value)],
        )
        .await;
        assert_eq!(run.code == 0, accepted, "{value:?}: {run:?}");
        if !accepted {
            assert!(
                run.stderr.contains("job script line 2: #PBS -l procs=4"),
                "{}",
                run.stderr
            );
        }
    }
    assert_eq!(bodies(&server, "POST", "/v1/jobs").await.len(), 10);
    // #PBS -W umask= is the job's SLURM_UMASK, unless the shell sets that variable itself
    // (sbatch's _set_umask_env)
    home.write("umask.sh", "#!/bin/sh\n#PBS -W umask=027\nhostname\n");
    for (shell_mask, sent) in [(None, "0027"), (Some("0002"), "0002")] {
        let mut env = vec![("BURSAR_URL", url.as_str())];
        env.extend(shell_mask.map(|m| ("SLURM_UMASK", m)));
        let run = run_program(
            &bursar_exe(),
            &["submit", "-t", "5", "umask.sh"],
            &home,
            &env,
        )
        .await;
        assert_eq!(run.code, 0, "{run:?}");
        let body = bodies(&server, "POST", "/v1/jobs").await.pop().unwrap();
        assert_eq!(body["environment"]["SLURM_UMASK"], sent, "{shell_mask:?}");
    }
    // an off value resets the option, the script's setting too
    home.write("requeue.sh", "#!/bin/sh\n#SBATCH --no-requeue\nhostname\n");
    let run = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "requeue.sh"],
        &home,
        &[("BURSAR_URL", url.as_str()), ("SBATCH_NO_REQUEUE", "no")],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let sent = bodies(&server, "POST", "/v1/jobs").await;
    assert_eq!(sent.last().unwrap().get("slurm"), None, "{:?}", sent.last());
    // SBATCH_HINT over SLURM_HINT, as sbatch reads them; a variable's hint gives way to
    // --threads-per-core on the command line, as sbatch's validate_hint_option resets it.
    let hints = [
        ("SLURM_HINT", "multithread"),
        ("SBATCH_HINT", "nomultithread"),
    ];
    for (args, hint, threads) in [
        (
            &["submit", "-t", "5", "plain.sh"][..],
            json!("nomultithread"),
            json!(null),
        ),
        (
            &["submit", "-t", "5", "--threads-per-core=2", "plain.sh"][..],
            json!(null),
            json!(2),
        ),
    ] {
        let mut env = vec![("BURSAR_URL", url.as_str())];
        env.extend(hints);
        let run = run_program(&bursar_exe(), args, &home, &env).await;
        assert_eq!(run.code, 0, "{run:?}");
        let sent = bodies(&server, "POST", "/v1/jobs").await;
        let body = sent.last().unwrap();
        assert_eq!(
            (&body["hint"], &body["threads_per_core"]),
            (&hint, &threads),
            "{body}"
        );
    }
    // --help still prints the usage.
    let run = run_program(
        &bursar_exe(),
        &["submit", "--help"],
        &home,
        &[
            ("BURSAR_URL", url.as_str()),
            ("SBATCH_HINT", "nomultithread"),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("Usage: bursar submit"), "{run:?}");
}

#[tokio::test]
async fn a_retry_after_a_dropped_connection_reuses_the_idempotency_key() {
    let server = accepting_server().await;
    let (proxy, dropped) = dropping_proxy(*server.address());
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(&["submit", "-A", "physics", "job.sh"], &home, &proxy).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Submitted batch job 4242 on cluster onprem\n");
    let first = dropped
        .lock()
        .unwrap()
        .clone()
        .expect("the first attempt reached the proxy");
    let first_key = client_support::header(&first, "idempotency-key").unwrap();
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1, "one retry, which reached bursar");
    assert_eq!(
        received[0].headers["idempotency-key"].to_str().unwrap(),
        first_key
    );
    // The retry sends the same body.
    let (_, first_body) = first.split_once("\r\n\r\n").unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(first_body).unwrap(),
        serde_json::from_slice::<Value>(&received[0].body).unwrap()
    );
}

#[tokio::test]
async fn insufficient_allocation_exits_1_with_every_cluster() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/jobs"))
        .respond_with(ResponseTemplate::new(402).set_body_json(json!({
            "error": "insufficient_allocation",
            "message": "physics has 1.25 su left in su; the job needs an estimated 4.00 su",
            "details": {"clusters": [
                {"cluster": "onprem", "account": "physics", "currency": "su", "estimate": "4.00", "remaining": "1.25"},
                {"cluster": "cloud", "account": "physics", "currency": "usd", "estimate": "12.50", "remaining": "0.00"}
            ]}
        })))
        .mount(&server)
        .await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(&["submit", "-A", "physics", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        "bursar: physics has 1.25 su left in su; the job needs an estimated 4.00 su\n\
         \x20 CLUSTER  ACCOUNT  CURRENCY  ESTIMATE  REMAINING\n\
         \x20 onprem   physics  su            4.00       1.25\n\
         \x20 cloud    physics  usd          12.50       0.00\n"
    );
}

#[tokio::test]
async fn refusals_show_the_servers_message() {
    let cases = [
        (
            403,
            "no_association",
            "user alice is not associated with account physics",
            None,
        ),
        (
            422,
            "invalid_request",
            "no cluster can run this job: no time limit given and partition batch on onprem \
             has no maximum; pass -t",
            None,
        ),
        (
            503,
            "upstream_unavailable",
            "onprem could not be reached (nothing is held): connection refused",
            None,
        ),
        (
            401,
            "unauthorized",
            "the token has expired",
            Some("the token from BURSAR_TOKEN was refused"),
        ),
    ];
    let home = Home::new();
    for (status, code, message, hint) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/jobs"))
            .respond_with(ResponseTemplate::new(status).set_body_json(json!({
                "error": code, "message": message,
                "details": if status == 403 { json!({"user": "alice", "account": "physics"}) } else { json!({}) }
            })))
            .mount(&server)
            .await;
        let run = bursar(&["submit", "--wrap=true", "-t", "1"], &home, &server.uri()).await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr.starts_with(&format!("bursar: {message}")),
            "{run:?}"
        );
        match hint {
            Some(hint) => assert!(run.stderr.contains(hint), "{run:?}"),
            // Details the message already names are not repeated.
            None => assert_eq!(run.stderr, format!("bursar: {message}\n")),
        }
    }
}

#[tokio::test]
async fn a_proxy_error_page_is_reported_with_its_status() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502).set_body_string("<html>Bad Gateway</html>"))
        .mount(&server)
        .await;
    let run = bursar(&["submit", "--wrap=true"], &Home::new(), &server.uri()).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!(
            "bursar: unexpected answer from bursar at {} (HTTP 502): Bad Gateway: <html>Bad \
             Gateway</html>\n",
            server.uri()
        )
    );
}

#[tokio::test]
async fn a_dstack_task_file_is_submitted_as_a_task() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write(
        "train.dstack.yml",
        "type: task\nname: train\ncommands:\n  - python train.py\nresources:\n  gpu: A100:80GB:2\nmax_duration: 2h\n",
    );
    let run = bursar(
        &["submit", "-A", "physics", "-M", "cloud", "train.dstack.yml"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = &bodies(&server, "POST", "/v1/jobs").await[0];
    assert_eq!(body["account"], "physics");
    assert_eq!(body["clusters"], json!(["cloud"]));
    assert_eq!(body["dstack"]["type"], "task");
    assert_eq!(body["dstack"]["commands"], json!(["python train.py"]));
    assert_eq!(body["gpus"]["count"], 2);
    assert_eq!(body["time_limit_min"], 120);
    assert!(body.get("script").is_none() && body.get("environment").is_none());
    let request: bursar_gateway::request::JobRequest =
        serde_json::from_value(body.clone()).unwrap();
    request.validate().unwrap();

    let run = bursar(
        &["submit", "-n", "4", "train.dstack.yml"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("only -A, -p, -q, -M"), "{run:?}");
}

#[tokio::test]
async fn bad_options_are_refused_before_any_call() {
    let server = MockServer::start().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    home.write("notascript", "srun hostname\n");
    home.write(
        "train.dstack.yml",
        "type: task\ncommands: [python train.py]\nresources: {cpu: 2}\nmax_duration: 1h\n",
    );
    for (args, expected) in [
        (
            &["submit", "--array=5-2", "job.sh"][..],
            "invalid --array value \"5-2\"",
        ),
        (
            &["submit", "notascript"][..],
            "This does not look like a batch script",
        ),
        (
            &["submit", "missing.sh"][..],
            "cannot read the job script missing.sh",
        ),
        (
            &["submit", "--wrap=true", "job.sh"][..],
            "Script arguments not permitted with --wrap option",
        ),
        (
            &["submit", "train.dstack.yml", "arg1"][..],
            "a dstack task file takes no arguments (arg1)",
        ),
        (&["submit"][..], "no job script"),
    ] {
        let run = bursar(args, &home, &server.uri()).await;
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert!(run.stderr.contains(expected), "{args:?}: {run:?}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_script_s_arguments_and_full_path_are_sent_as_sbatch_sends_them() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    std::fs::create_dir(home.path().join("sub")).unwrap();
    home.write("sub/run.sh", SCRIPT);
    let cwd = home.path().canonicalize().unwrap();
    let cwd = cwd.to_str().unwrap();
    // Options after the script are its arguments, as in sbatch; so is an empty word.
    let runs: [(&[&str], String, Value); 3] = [
        (
            &[
                "submit",
                "-A",
                "physics",
                "job.sh",
                "in.dat",
                "two words",
                "",
                "-n",
                "4",
            ],
            format!("{cwd}/job.sh"),
            json!(["in.dat", "two words", "", "-n", "4"]),
        ),
        (
            &["submit", "-A", "physics", "./sub/run.sh", "--", "x"],
            "./sub/run.sh".to_string(),
            json!(["--", "x"]),
        ),
        (
            &["submit", "-A", "physics", "--", "sub/run.sh"],
            format!("{cwd}/sub/run.sh"),
            Value::Null,
        ),
    ];
    for (args, _, _) in &runs {
        let run = bursar(args, &home, &server.uri()).await;
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
    }
    let sent = bodies(&server, "POST", "/v1/jobs").await;
    assert_eq!(sent.len(), runs.len());
    for ((args, path, script_args), body) in runs.iter().zip(&sent) {
        assert_eq!(body["script_path"], path.as_str(), "{args:?}: {body}");
        assert_eq!(
            body.get("script_args").cloned().unwrap_or(Value::Null),
            *script_args
        );
        // The 4 tasks of the first were the script's argument, not -n.
        assert_eq!(body["ntasks"], 1, "{args:?}");
        let request: bursar_gateway::request::JobRequest =
            serde_json::from_value(body.clone()).unwrap();
        request.validate().unwrap();
    }
    // An absolute path is sent as given.
    let absolute = format!("{cwd}/job.sh");
    let run = bursar(
        &["submit", "-A", "physics", &absolute],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = bodies(&server, "POST", "/v1/jobs").await;
    assert_eq!(bodies.last().unwrap()["script_path"], absolute.as_str());
}

/// `-W/--wait`: the job's status is asked until it ends; its exit code is bursar submit's. A
/// cluster that cannot be reached is asked again; a job its cluster forgot is exit code 1.
#[tokio::test]
async fn wait_returns_the_job_s_exit_code_once_its_cluster_says_it_ended() {
    let server = accepting_server().await;
    let status = "/v1/jobs/17/status";
    Mock::given(method("GET"))
        .and(path(status))
        .respond_with(ResponseTemplate::new(503).set_body_json(json!({
            "error": "upstream_unavailable", "message": "onprem could not be reached"
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(status))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": 17, "cluster": "onprem", "cluster_job_id": "4242", "known": true,
            "finished": true, "states": ["FAILED"], "exit_code": 3
        })))
        .mount(&server)
        .await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let run = bursar(&["submit", "-W", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.stdout, "Submitted batch job 4242 on cluster onprem\n");
    assert!(
        run.stderr
            .contains("cannot ask about job 4242 now, retrying: onprem could not be reached"),
        "{run:?}"
    );
    let asked = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == status)
        .count();
    assert_eq!(asked, 2);

    // Forgotten by its cluster: sbatch's words, and 1 (sbatch would exit 0).
    let server = accepting_server().await;
    Mock::given(method("GET"))
        .and(path(status))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": 17, "cluster": "onprem", "cluster_job_id": "4242", "known": false,
            "finished": true, "states": [], "exit_code": null
        })))
        .mount(&server)
        .await;
    let run = bursar(
        &["submit", "--wait", "--parsable", "job.sh"],
        &home,
        &server.uri(),
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "4242\n");
    assert!(
        run.stderr
            .contains("Job 4242 no longer found and exit code not found"),
        "{run:?}"
    );
    // Listed as ended, without an exit code: said so, and 1.
    let server = accepting_server().await;
    Mock::given(method("GET"))
        .and(path(status))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": 17, "cluster": "onprem", "cluster_job_id": "4242", "known": true,
            "finished": true, "states": ["COMPLETED"], "exit_code": null
        })))
        .mount(&server)
        .await;
    let run = bursar(&["submit", "-W", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("job 4242 ended, but its cluster gave no exit code"),
        "{run:?}"
    );
    // A refusal that is not the cluster's ends the wait at once (exit 1).
    let server = accepting_server().await;
    Mock::given(method("GET"))
        .and(path(status))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": "token_expired", "message": "the token has expired"
        })))
        .mount(&server)
        .await;
    let run = bursar(&["submit", "-W", "job.sh"], &home, &server.uri()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("the token has expired"), "{run:?}");
}

#[tokio::test]
async fn help_prints_the_sbatch_usage() {
    let run = bursar(&["submit", "--help"], &Home::new(), "http://127.0.0.1:1").await;
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, bursar_gateway::request::SBATCH_USAGE);
}

#[tokio::test]
async fn an_unreachable_server_is_named() {
    // Bound and never listening, and kept so for the whole test: connecting is refused, and
    // no other test can be given the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let run = bursar(&["submit", "--wrap=true"], &Home::new(), &url).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with(&format!("bursar: cannot reach bursar at {url}: ")),
        "{run:?}"
    );
    assert!(run.stderr.to_lowercase().contains("refused"), "{run:?}");
}

#[tokio::test]
async fn without_a_token_the_user_is_told_where_to_put_one() {
    let home = Home::new();
    let run = run_program(
        &bursar_exe(),
        &["submit", "--wrap=true"],
        &home,
        &[("BURSAR_TOKEN", ""), ("BURSAR_URL", "http://127.0.0.1:1")],
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "bursar: no token: ask your admin for one (`bursar token issue`) and put it in \
         ~/.config/bursar/token or BURSAR_TOKEN\n"
    );

    // The token file is read when BURSAR_TOKEN is not set.
    let server = accepting_server().await;
    std::fs::create_dir_all(home.path().join(".config/bursar")).unwrap();
    let file = home.write(".config/bursar/token", &format!("{TOKEN}\n"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let run = run_program(
        &bursar_exe(),
        &["submit", "--wrap=true"],
        &home,
        &[("BURSAR_TOKEN", ""), ("BURSAR_URL", &server.uri())],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn invoked_as_sbatch_the_binary_submits() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::os::unix::fs::symlink(bursar_exe(), &sbatch).unwrap();
    // `-c` is sbatch's --cpus-per-task here, not bursar's --config.
    let run = run_program(
        &sbatch,
        &["-A", "physics", "-c", "4", "job.sh"],
        &home,
        &[("BURSAR_URL", &server.uri())],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Submitted batch job 4242 on cluster onprem\n");
    let body = &bodies(&server, "POST", "/v1/jobs").await[0];
    assert_eq!(body["cpus_per_task"], 4);
    assert_eq!(body["account"], "physics");

    let run = run_program(
        &sbatch,
        &["--parsable", "job.sh"],
        &home,
        &[("BURSAR_URL", &server.uri())],
    )
    .await;
    assert_eq!(
        run.stdout, "4242\n",
        "jid=$(sbatch --parsable job.sh) stays a job id"
    );
}

/// `--get-user-env` (and `SBATCH_GET_USER_ENV=1`): slurmd loads the login environment
/// (`SLURM_GET_USER_ENV=1`), and none of the shell's limits are sent, as sbatch. A value that
/// sbatch versions read differently (`0`: on before 25.05, off after) is refused.
#[tokio::test]
async fn get_user_env_asks_for_the_login_environment_and_sends_no_limits() {
    let server = accepting_server().await;
    let home = Home::new();
    home.write("job.sh", SCRIPT);
    let url = server.uri();
    let plain = bursar(&["submit", "-t", "5", "job.sh"], &home, &url).await;
    assert_eq!(plain.code, 0, "{plain:?}");
    let loaded = bursar(
        &["submit", "-t", "5", "--get-user-env", "job.sh"],
        &home,
        &url,
    )
    .await;
    assert_eq!(loaded.code, 0, "{loaded:?}");
    let from_env = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "job.sh"],
        &home,
        &[("BURSAR_URL", url.as_str()), ("SBATCH_GET_USER_ENV", "1")],
    )
    .await;
    assert_eq!(from_env.code, 0, "{from_env:?}");
    let unclear = run_program(
        &bursar_exe(),
        &["submit", "-t", "5", "job.sh"],
        &home,
        &[("BURSAR_URL", url.as_str()), ("SBATCH_GET_USER_ENV", "0")],
    )
    .await;
    assert_eq!(unclear.code, 1, "{unclear:?}");
    assert!(
        unclear.stderr.contains("SBATCH_GET_USER_ENV=\"0\""),
        "{unclear:?}"
    );
    let sent = bodies(&server, "POST", "/v1/jobs").await;
    let limits = |body: &Value| {
        body["environment"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("SLURM_RLIMIT_"))
            .count()
    };
    assert!(limits(&sent[0]) > 0, "the shell's limits: {}", sent[0]);
    assert_eq!(sent[0]["environment"].get("SLURM_GET_USER_ENV"), None);
    for body in &sent[1..] {
        assert_eq!(body["environment"]["SLURM_GET_USER_ENV"], "1", "{body}");
        assert_eq!(limits(body), 0, "{body}");
    }
}
