//! slurmrestd credentials (minted JWTs, static tokens) and the submit / cancel / ping calls,
//! against the constructed request fixtures and the real 22.05 answers.

#[path = "fixtures/slurmrestd/common.rs"]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bursar_collectors::slurmrestd::{
    argv_breaks, gres_disable_misspelt, mail_events, min_cpus_allocated, submit_body,
    unsupported_at, ApiSelection, ApiVersion, GpuRequest, JobSubmission, KillWarning, MemBinding,
    RestError, Sharing, SlurmAuth, SlurmClaims, SlurmRestClient, SlurmRestConfig, SubmittedJob,
    Window,
};
use common::*;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use secrecy::SecretString;
use serde_json::{json, Value};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn json_answer(status: u16, body: String) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body, "application/json")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The headers of every request the server saw: (user name, token).
async fn credentials_seen(server: &MockServer) -> Vec<(String, String)> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let get = |name: &str| {
                r.headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            (get("x-slurm-user-name"), get("x-slurm-user-token"))
        })
        .collect()
}

fn verify(token: &str, key: &[u8]) -> SlurmClaims {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_required_spec_claims(&["exp"]);
    decode::<SlurmClaims>(token, &DecodingKey::from_secret(key), &validation)
        .unwrap_or_else(|e| panic!("token does not verify: {e}"))
        .claims
}

/// The v0.0.41+ constructed request, in bursar's terms.
fn fixture_job() -> JobSubmission {
    JobSubmission {
        script: "#!/bin/bash\nsrun hostname\n".into(),
        name: Some("bursar-test".into()),
        account: "physics".into(),
        partition: Some("gpu".into()),
        qos: Some("normal".into()),
        tasks: Some(1),
        cpus_per_task: Some(4),
        time_limit_min: Some(60),
        memory_per_node_mb: Some(16_384),
        gpus_per_node: Some(GpuRequest {
            count: 1,
            kind: None,
        }),
        current_working_directory: "/home/alice".into(),
        standard_output: Some("/home/alice/%j.out".into()),
        environment: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C".into()),
        ],
        comment: Some("bursar:req=abc123".into()),
        ..JobSubmission::default()
    }
}

#[tokio::test]
async fn minted_tokens_verify_with_the_key_and_carry_the_claims_slurm_reads() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurmdb/v0.0.38/jobs"))
        .and(header("x-slurm-user-name", "slurm"))
        .respond_with(json_answer(
            200,
            fixture("real-22.05/dbjobs-q-state-FAILED.json"),
        ))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let before = now();
    let window = Window::new(CAPTURE_START, CAPTURE_END);
    client.fetch_jobs(window).await.unwrap();
    client.fetch_jobs(window).await.unwrap();
    let after = now();

    // two fetches of one slice: two calls each (the window, the jobs cancelled in it)
    let seen = credentials_seen(&server).await;
    assert_eq!(seen.len(), 4);
    let (user, token) = &seen[0];
    assert_eq!(user, "slurm");
    assert!(
        seen.iter().all(|(_, t)| t == token),
        "the token is reused while fresh"
    );

    let header = decode_header(token).unwrap();
    assert_eq!(header.alg, Algorithm::HS256);
    assert_eq!(header.typ.as_deref(), Some("JWT"));
    let claims = verify(token, KEY);
    assert_eq!(claims.sun, "slurm");
    assert!(claims.iat >= before && claims.iat <= after, "{claims:?}");
    assert_eq!(claims.exp - claims.iat, 300, "exp is iat + lifetime");

    // signed over the raw file bytes, trailing newline included
    let trimmed = &KEY[..KEY.len() - 1];
    assert!(decode::<SlurmClaims>(
        token,
        &DecodingKey::from_secret(trimmed),
        &Validation::new(Algorithm::HS256)
    )
    .is_err());
}

#[tokio::test]
async fn submit_bodies_match_the_fixtures_of_each_generation() {
    // v0.0.38: the constructed request, which has no qos, output, GPUs or comment
    let v38_job = JobSubmission {
        qos: None,
        gpus_per_node: None,
        standard_output: None,
        comment: None,
        environment: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C".into()),
        ],
        ..fixture_job()
    };
    // The fixtures are slurmrestd requests; sbatch adds to a job what its `-c 4` says:
    // SLURM_CPUS_PER_TASK, and from v0.0.40 (23.11) the TRES per task, in the environment and
    // the body, and the MPI launchers' settings.
    let mut expected = fixture_json("constructed/slurm_v0.0.38_job_submit_req.json");
    expected["job"]["environment"]["SLURM_CPUS_PER_TASK"] = json!("4");
    assert_eq!(
        submit_body(ApiVersion::V0_0_38, &v38_job).unwrap(),
        expected
    );
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let mut expected = fixture_json("constructed/slurm_v0.0.41plus_job_submit_req.json");
        if version == ApiVersion::V0_0_40 {
            // v0.0.40 also carries the request's own `script` (23.11.0 – 23.11.4 need it).
            expected["script"] = expected["job"]["script"].clone();
        }
        expected["job"]["tres_per_task"] = json!("cpu=4");
        let env = expected["job"]["environment"].as_array_mut().unwrap();
        env.extend([
            json!("SLURM_CPUS_PER_TASK=4"),
            json!("SLURM_TRES_PER_TASK=cpu=4"),
        ]);
        {
            env.extend(
                [
                    "OMPI_MCA_plm_slurm_args=--external-launcher",
                    "PRTE_MCA_plm_slurm_args=--external-launcher",
                    "HYDRA_BOOTSTRAP=slurm",
                    "HYDRA_LAUNCHER_EXTRA_ARGS=--external-launcher",
                    "I_MPI_HYDRA_BOOTSTRAP=slurm",
                    "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=--external-launcher",
                ]
                .map(|v| json!(v)),
            );
        }
        assert_eq!(
            submit_body(version, &fixture_job()).unwrap(),
            expected,
            "{version}"
        );
    }
    // what 22.05 needs beyond the fixture: nodes as a plain number (22.05 reads the spec's
    // `[min, max]` but never marks the count set: the job got 1 node), GPUs as gres
    let more = JobSubmission {
        nodes: Some(2),
        gpus_per_node: Some(GpuRequest {
            count: 2,
            kind: Some("h100".into()),
        }),
        other_gres: vec!["shard:1".into()],
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &more).unwrap();
    assert_eq!(
        (&v38["job"]["nodes"], &v38["job"]["gres"]),
        (&json!(2), &json!("gpu:h100:2,shard:1"))
    );
    let v42 = submit_body(ApiVersion::V0_0_42, &more).unwrap();
    assert_eq!(
        (&v42["job"]["nodes"], &v42["job"]["tres_per_node"]),
        (&json!("2"), &json!("gres/gpu:h100:2,gres/shard:1"))
    );

    // --ntasks-per-node, --mem-per-cpu, --gpus (per job) and --mail-* as sbatch sends them
    let shaped = JobSubmission {
        nodes: Some(2),
        tasks: Some(4),
        tasks_per_node: Some(2),
        memory_per_node_mb: None,
        memory_per_cpu_mb: Some(1500),
        gpus_per_node: None,
        gpus_per_job: Some(GpuRequest {
            count: 3,
            kind: Some("h100".into()),
        }),
        mail_type: mail_events("end,FAIL,time_limit_90").unwrap(),
        mail_user: Some("alice@example.org".into()),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &shaped).unwrap();
    let job = &v38["job"];
    assert_eq!(job["tasks_per_node"], json!(2));
    assert_eq!(job["memory_per_cpu"], json!(1500));
    assert_eq!(job.get("memory_per_node"), None);
    assert_eq!(job["gpus"], json!("h100:3"));
    assert_eq!(job.get("gres"), None);
    assert_eq!(job["mail_type"], json!("END,FAIL,TIME_LIMIT_90"));
    assert_eq!(job["mail_user"], json!("alice@example.org"));
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let body = submit_body(version, &shaped).unwrap();
        let job = &body["job"];
        assert_eq!(job["tasks_per_node"], json!(2), "{version}");
        assert_eq!(
            job["memory_per_cpu"],
            json!({"set": true, "infinite": false, "number": 1500}),
            "{version}"
        );
        assert_eq!(job["tres_per_job"], json!("gres/gpu:h100:3"), "{version}");
        assert_eq!(job.get("tres_per_node"), None, "{version}");
        assert_eq!(
            job["mail_type"],
            json!(["END", "FAIL", "TIME=90%"]),
            "{version}"
        );
    }
    // the options only Slurm takes: v0.0.38 reads them with sbatch's own option parser
    let options = JobSubmission {
        warn_signal: Some(KillWarning {
            number: 10,
            seconds: 90,
            batch_only: false,
            reservation: true,
        }),
        requeue: Some(false),
        open_append: Some(true),
        nice: Some(-5),
        reservation: Some("maint".into()),
        wckey: Some("proj".into()),
        excluded_nodes: Some("n[1,3],m1".into()),
        standard_input: Some("/dev/null".into()),
        no_kill: true,
        dependency: Some("afterok:12:13".into()),
        kill_on_invalid_dependency: Some(false),
        shared: Some(Sharing::Exclusive),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &options).unwrap();
    let job = &v38["job"];
    for (key, value) in [
        ("signal", json!("R:10@90")),
        ("no_requeue", json!(true)),
        ("open_mode", json!("append")),
        ("nice", json!(-5)),
        ("reservation", json!("maint")),
        ("wckey", json!("proj")),
        ("exclude_nodes", json!("n[1,3],m1")),
        ("standard_input", json!("/dev/null")),
        ("no_kill", json!("set")),
        ("dependency", json!("afterok:12:13")),
        ("kill_on_invalid_dependency", json!(false)),
        ("exclusive", json!("exclusive")),
    ] {
        assert_eq!(job[key], value, "v0.0.38 {key}: {job}");
    }
    assert_eq!(
        job.get("requeue"),
        None,
        "22.05 requeues for any requeue value"
    );
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let body = submit_body(version, &options).unwrap();
        let job = &body["job"];
        for (key, value) in [
            ("kill_warning_flags", json!(["RESERVATION_JOB"])),
            ("kill_warning_signal", json!("10")),
            (
                "kill_warning_delay",
                json!({"set": true, "infinite": false, "number": 90}),
            ),
            ("requeue", json!(false)),
            ("open_mode", json!(["APPEND"])),
            ("nice", json!(-5)),
            ("excluded_nodes", json!(["n[1,3],m1"])),
            ("kill_on_node_fail", json!(false)),
            ("dependency", json!("afterok:12:13")),
            ("flags", json!(["NO_KILL_INVALID_DEPENDENCY"])),
            ("shared", json!(["none"])),
        ] {
            assert_eq!(job[key], value, "{version} {key}: {job}");
        }
    }
    // GPUs per task, memory and CPUs per GPU, as each version's sbatch sends them
    let per_task = JobSubmission {
        tasks: Some(2),
        cpus_per_task: Some(2),
        memory_per_node_mb: None,
        memory_per_gpu_mb: Some(500),
        gpus_per_node: None,
        gpus_per_task: Some(GpuRequest {
            count: 1,
            kind: Some("h100".into()),
        }),
        ..fixture_job()
    };
    let per_gpu = JobSubmission {
        tasks: Some(2),
        cpus_per_task: None,
        cpus_per_gpu: Some(3),
        gpus_per_node: None,
        gpus_per_job: Some(GpuRequest {
            count: 2,
            kind: None,
        }),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &per_task).unwrap();
    let job = &v38["job"];
    assert_eq!(
        (
            &job["gpus_per_task"],
            &job["memory_per_gpu"],
            job.get("memory_per_node")
        ),
        (&json!("h100:1"), &json!(500), None)
    );
    assert_eq!(job["environment"]["SLURM_GPUS_PER_TASK"], json!("h100:1"));
    assert_eq!(job["environment"]["SLURM_MEM_PER_GPU"], json!("500"));
    assert_eq!(
        submit_body(ApiVersion::V0_0_38, &per_gpu).unwrap()["job"]["cpus_per_gpu"],
        json!(3)
    );
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let body = submit_body(version, &per_task).unwrap();
        let job = &body["job"];
        assert_eq!(
            job["tres_per_task"],
            json!("cpu=2,gres/gpu:h100=1"),
            "{version}"
        );
        assert_eq!(job["tres_bind"], json!("gres/gpu:per_task:1"), "{version}");
        assert_eq!(job["memory_per_tres"], json!("gres/gpu:500"), "{version}");
        let env = job["environment"].as_array().unwrap();
        for var in [
            "SLURM_TRES_PER_TASK=cpu=2,gres/gpu:h100=1",
            "SLURM_TRES_BIND=gres/gpu:per_task:1",
            "SLURM_MEM_PER_GPU=500",
        ] {
            assert!(env.contains(&json!(var)), "{version}: {var} in {env:?}");
        }
        let body = submit_body(version, &per_gpu).unwrap();
        assert_eq!(
            body["job"]["cpus_per_tres"],
            json!("gres/gpu:3"),
            "{version}"
        );
        assert!(body["job"]["environment"]
            .as_array()
            .unwrap()
            .contains(&json!("SLURM_GPUS=2")));
        assert_eq!(body["job"].get("tres_per_task"), None, "{version}");
        assert!(body["job"]["environment"]
            .as_array()
            .unwrap()
            .contains(&json!("SLURM_CPUS_PER_GPU=3")));
    }
    for (bad, why) in [
        (
            JobSubmission {
                memory_per_gpu_mb: Some(1),
                ..per_gpu.clone()
            },
            "memory",
        ),
        (
            JobSubmission {
                cpus_per_task: Some(1),
                ..per_gpu.clone()
            },
            "CPUs per task",
        ),
        (
            JobSubmission {
                gpus_per_job: Some(GpuRequest {
                    count: 1,
                    kind: None,
                }),
                ..per_task.clone()
            },
            "GPUs per",
        ),
    ] {
        match submit_body(ApiVersion::V0_0_42, &bad) {
            Err(RestError::InvalidRequest(message)) => assert!(message.contains(why), "{message}"),
            other => panic!("{why}: {other:?}"),
        }
    }

    // --signal=B: is sbatch's own: 22.05's slurmrestd reads the flag only in sbatch
    let batch_only = JobSubmission {
        warn_signal: Some(KillWarning {
            number: 10,
            seconds: 60,
            batch_only: true,
            reservation: false,
        }),
        ..fixture_job()
    };
    match submit_body(ApiVersion::V0_0_38, &batch_only) {
        Err(RestError::InvalidRequest(why)) => assert!(why.contains("B:"), "{why}"),
        other => panic!("{other:?}"),
    }
    let body = submit_body(ApiVersion::V0_0_41, &batch_only).unwrap();
    assert_eq!(body["job"]["kill_warning_flags"], json!(["BATCH_JOB"]));
    let truncate = JobSubmission {
        open_append: Some(false),
        requeue: Some(true),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &truncate).unwrap();
    assert_eq!(
        (&v38["job"]["open_mode"], &v38["job"]["requeue"]),
        (&json!("truncate"), &json!(true))
    );
    let v42 = submit_body(ApiVersion::V0_0_42, &truncate).unwrap();
    assert_eq!(v42["job"]["open_mode"], json!(["TRUNCATE"]));
    // sbatch's SLURM_OPEN_MODE for the steps: v0.0.38 adds it itself, not 23.11's or 24.05's
    let environment = |version: ApiVersion, job: &JobSubmission| {
        let body = submit_body(version, job).unwrap();
        body["job"]["environment"].clone()
    };
    for version in [ApiVersion::V0_0_40, ApiVersion::V0_0_41] {
        let env = environment(version, &options);
        assert!(
            env.as_array()
                .unwrap()
                .contains(&json!("SLURM_OPEN_MODE=a")),
            "{version}: {env}"
        );
        let env = environment(version, &truncate);
        assert!(
            env.as_array()
                .unwrap()
                .contains(&json!("SLURM_OPEN_MODE=t")),
            "{version}: {env}"
        );
    }
    assert_eq!(
        environment(ApiVersion::V0_0_38, &options).get("SLURM_OPEN_MODE"),
        None
    );
    let env = environment(ApiVersion::V0_0_41, &fixture_job());
    assert!(!env.to_string().contains("SLURM_OPEN_MODE"), "{env}");
    // ... and SLURM_JOB_DEPENDENCY
    let env = environment(ApiVersion::V0_0_41, &options);
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!("SLURM_JOB_DEPENDENCY=afterok:12:13")),
        "{env}"
    );
    assert_eq!(
        environment(ApiVersion::V0_0_38, &options).get("SLURM_JOB_DEPENDENCY"),
        None
    );

    // per node and per CPU (or per node and per job) at once is not a job sbatch would send
    let both = JobSubmission {
        memory_per_cpu_mb: Some(1),
        ..fixture_job()
    };
    assert!(submit_body(ApiVersion::V0_0_38, &both).is_err());
    let both = JobSubmission {
        gpus_per_job: Some(GpuRequest {
            count: 1,
            kind: None,
        }),
        ..fixture_job()
    };
    assert!(submit_body(ApiVersion::V0_0_41, &both).is_err());

    // --hold and --constraint: `hold` and `constraints` in the job of every generation, absent
    // unless asked for
    for version in ApiVersion::ALL {
        let held = JobSubmission {
            hold: true,
            constraints: Some("skylake&ib".into()),
            ..fixture_job()
        };
        let body = submit_body(version, &held).unwrap();
        assert_eq!(body["job"]["hold"], json!(true), "{version}");
        assert_eq!(body["job"]["constraints"], json!("skylake&ib"), "{version}");
        let body = submit_body(version, &fixture_job()).unwrap();
        assert_eq!(body["job"].get("hold"), None, "{version}");
        assert_eq!(body["job"].get("constraints"), None, "{version}");
    }

    // --array: `job.array` in every generation, the text as sbatch passes it (slurmctld reads
    // the step and the throttle from it); no variable of its own, as sbatch sets none
    // (slurmctld and slurmd set SLURM_ARRAY_* for each task).
    for version in ApiVersion::ALL {
        let array = JobSubmission {
            array: Some("0-5:2%2".into()),
            ..fixture_job()
        };
        let body = submit_body(version, &array).unwrap();
        assert_eq!(body["job"]["array"], json!("0-5:2%2"), "{version}");
        assert!(
            !body["job"]["environment"]
                .to_string()
                .contains("SLURM_ARRAY"),
            "{version}: {}",
            body["job"]["environment"]
        );
        let plain = submit_body(version, &fixture_job()).unwrap();
        assert_eq!(plain["job"].get("array"), None, "{version}");
        // An empty list would be no array at all to slurmctld: a job of one task.
        for bad in ["", "0-3 %2"] {
            let broken = JobSubmission {
                array: Some(bad.into()),
                ..fixture_job()
            };
            assert!(refused(version, &broken), "{version} {bad:?}");
        }
    }
}

/// --begin, --deadline and --time-min: v0.0.38 reads the times with sbatch's text parser in
/// slurmrestd's zone, which takes a bare number for a date and refuses it: the `uts` form.
/// Whether `submit_body` refuses `job` at `version`, before anything is sent.
fn refused(version: ApiVersion, job: &JobSubmission) -> bool {
    matches!(submit_body(version, job), Err(RestError::InvalidRequest(_)))
}

#[test]
fn times_go_as_each_version_reads_them() {
    let timed = JobSubmission {
        begin_time: Some(1_795_726_800),
        deadline: Some(1_796_144_400),
        time_min: Some(30),
        tmp_disk_mb: Some(2048),
        prefer: Some("ib&skylake".into()),
        required_nodes: Some("n[1-2]".into()),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &timed).unwrap();
        assert_eq!(
            body["job"]["temporary_disk_per_node"],
            json!(2048),
            "{version}"
        );
        assert_eq!(body["job"]["prefer"], json!("ib&skylake"), "{version}");
        let (key, nodes) = if version.is_data_parser() {
            ("required_nodes", json!(["n[1-2]"]))
        } else {
            ("nodelist", json!("n[1-2]"))
        };
        assert_eq!(body["job"][key], nodes, "{version}");
    }
    let body = submit_body(ApiVersion::V0_0_38, &timed).unwrap();
    assert_eq!(body["job"]["begin_time"], json!("uts1795726800"));
    assert_eq!(body["job"]["deadline"], json!("uts1796144400"));
    assert_eq!(body["job"]["time_minimum"], json!(30));
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let body = submit_body(version, &timed).unwrap();
        assert_eq!(
            body["job"]["begin_time"],
            json!({"set": true, "infinite": false, "number": 1_795_726_800u64}),
            "{version}"
        );
        assert_eq!(body["job"]["deadline"], json!(1_796_144_400), "{version}");
        assert_eq!(
            body["job"]["time_minimum"],
            json!({"set": true, "infinite": false, "number": 30}),
            "{version}"
        );
    }
    for version in ApiVersion::ALL {
        let plain = submit_body(version, &fixture_job()).unwrap();
        for key in [
            "begin_time",
            "deadline",
            "time_minimum",
            "temporary_disk_per_node",
            "prefer",
        ] {
            assert_eq!(plain["job"].get(key), None, "{version} {key}");
        }
        let ancient = JobSubmission {
            begin_time: Some(999_999),
            ..fixture_job()
        };
        assert!(refused(version, &ancient));
    }
}

/// `-L/--licenses` and `--mincpus`: `licenses` (text) and `minimum_cpus_per_node` (a number)
/// in every version (22.05's slurmrestd reads both with sbatch's own options); neither
/// without; an empty or blank list and 0 CPUs are refused before sending.
#[test]
fn licenses_and_cpus_per_node_go_in_every_version() {
    let licensed = JobSubmission {
        licenses: Some("matlab:2,fluent@flexlm:1".into()),
        min_cpus_per_node: Some(4),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &licensed).unwrap();
        assert_eq!(
            body["job"]["licenses"],
            json!("matlab:2,fluent@flexlm:1"),
            "{version}"
        );
        assert_eq!(body["job"]["minimum_cpus_per_node"], json!(4), "{version}");
        let plain = submit_body(version, &fixture_job()).unwrap();
        assert_eq!(plain["job"].get("licenses"), None, "{version}");
        assert_eq!(plain["job"].get("minimum_cpus_per_node"), None, "{version}");
        let none = JobSubmission {
            min_cpus_per_node: Some(0),
            ..fixture_job()
        };
        assert!(refused(version, &none), "{version}");
        for bad in ["", "matlab:2, ansys"] {
            let broken = JobSubmission {
                licenses: Some(bad.into()),
                ..fixture_job()
            };
            assert!(refused(version, &broken), "{version} {bad:?}");
        }
    }
}

/// `-s`, `--gres-flags`, `--acctg-freq`: `oversubscribe: true` / `gres_flags` at v0.0.38,
/// `shared: ["oversubscribe"]` / the job flag (with the dependency's) later;
/// `account_gather_frequency` and `SLURM_ACCTG_FREQ` in every version; disable-binding refused
/// at v0.0.40 and v0.0.41, whose flag some releases misspell; contradictions refused.
#[test]
fn sharing_binding_and_sampling_go_as_each_version_takes_them() {
    let job = JobSubmission {
        shared: Some(Sharing::Oversubscribe),
        gres_flags: Some("enforce-binding".into()),
        acctg_freq: Some("task=30,energy=60".into()),
        kill_on_invalid_dependency: Some(true),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &job).unwrap();
    assert_eq!(v38["job"]["oversubscribe"], json!(true));
    assert_eq!(v38["job"]["gres_flags"], json!("enforce-binding"));
    assert_eq!(
        v38["job"]["account_gather_frequency"],
        json!("task=30,energy=60")
    );
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let body = submit_body(version, &job).unwrap();
        assert_eq!(body["job"]["shared"], json!(["oversubscribe"]), "{version}");
        assert_eq!(
            body["job"]["flags"],
            json!(["KILL_INVALID_DEPENDENCY", "GRES_BINDING_ENFORCED"]),
            "{version}"
        );
        assert_eq!(body["job"].get("oversubscribe"), None, "{version}");
        assert_eq!(unsupported_at(version, &job), None, "{version}");
    }
    for version in ApiVersion::ALL {
        let body = submit_body(version, &job).unwrap();
        assert_eq!(
            body["job"]["account_gather_frequency"],
            json!("task=30,energy=60"),
            "{version}"
        );
        assert_eq!(
            environment_of(&body)
                .get("SLURM_ACCTG_FREQ")
                .map(String::as_str),
            Some("task=30,energy=60"),
            "{version}"
        );
        let disable = JobSubmission {
            gres_flags: Some("disable-binding".into()),
            ..fixture_job()
        };
        assert_eq!(unsupported_at(version, &disable), None, "{version}");
        if version.is_data_parser() {
            let body = submit_body(version, &disable).unwrap();
            assert_eq!(
                body["job"]["flags"],
                json!(["GRES_BINDING_DISABLED"]),
                "{version}"
            );
        }
        // misspelt by 23.11's and 24.05.0 – 24.05.2's v0.0.40 and v0.0.41 parsers
        let older = matches!(version, ApiVersion::V0_0_40 | ApiVersion::V0_0_41);
        for (release, misspelt) in [
            (Some("23.11.10"), older),
            (Some("24.05.2"), older),
            (Some("24.05.3"), false),
            (Some("24.11.5"), false),
            (None, older),
        ] {
            assert_eq!(
                gres_disable_misspelt(version, release),
                misspelt,
                "{version} {release:?}"
            );
        }
        let bad = JobSubmission {
            gres_flags: Some("enforce".into()),
            ..fixture_job()
        };
        assert!(refused(version, &bad), "{version}");
    }
}

/// `--wait-all-nodes`, `--use-min-nodes`, `--spread-job`, `--delay-boot`, `--mcs-label`:
/// `wait_all_nodes` an integer, `minimum_nodes` and `spread_job` true, `delay_boot` Slurm's
/// time text at v0.0.38; a boolean, the job flags and seconds later; `mcs_label` in every
/// version.
#[test]
fn node_filling_and_start_go_as_each_version_takes_them() {
    let job = JobSubmission {
        wait_all_nodes: Some(false),
        use_min_nodes: true,
        spread_job: true,
        kill_on_invalid_dependency: Some(true),
        delay_boot: Some(93_630),
        mcs_label: Some("physics".into()),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &job).unwrap();
        let job = &body["job"];
        assert_eq!(job["mcs_label"], json!("physics"), "{version}");
        if version.is_data_parser() {
            assert_eq!(job["delay_boot"], json!(93_630), "{version}");
            assert_eq!(job["wait_all_nodes"], json!(false), "{version}");
            assert_eq!(
                job["flags"],
                json!([
                    "KILL_INVALID_DEPENDENCY",
                    "PREFER_MINIMUM_NODE_COUNT",
                    "SPREAD_JOB"
                ]),
                "{version}"
            );
            assert_eq!(job.get("minimum_nodes"), None, "{version}");
            assert_eq!(job.get("spread_job"), None, "{version}");
        } else {
            // sbatch's time text: a number would be read as minutes
            assert_eq!(job["delay_boot"], json!("1-02:00:30"), "{version}");
            assert_eq!(job["wait_all_nodes"], json!(0), "{version}");
            assert_eq!(job["minimum_nodes"], json!(true), "{version}");
            assert_eq!(job["spread_job"], json!(true), "{version}");
            assert_eq!(job.get("flags"), None, "{version}");
        }
    }
    let waits = JobSubmission {
        wait_all_nodes: Some(true),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let wait = &submit_body(version, &waits).unwrap()["job"]["wait_all_nodes"];
        let expected = if version.is_data_parser() {
            json!(true)
        } else {
            json!(1)
        };
        assert_eq!(wait, &expected, "{version}");
    }
    let unset = submit_body(ApiVersion::V0_0_38, &fixture_job()).unwrap();
    for key in [
        "wait_all_nodes",
        "minimum_nodes",
        "spread_job",
        "delay_boot",
        "mcs_label",
    ] {
        assert_eq!(unset["job"].get(key), None, "{key}");
    }
}

/// `--contiguous` and `--extra` from v0.0.40 only (v0.0.38 disables the one and has no key for
/// the other: such a job cannot reach it, naming why); `--priority` in every version, a number
/// at v0.0.38 and a set number later, and not with `--hold`, which wins.
#[test]
fn contiguous_extra_and_priority_go_as_each_version_takes_them() {
    let job = JobSubmission {
        contiguous: true,
        extra: Some("rack=a".into()),
        priority: Some(4_294_967_293),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        if !version.is_data_parser() {
            let why = unsupported_at(version, &job).expect("refused at v0.0.38");
            assert!(why.starts_with("--contiguous cannot reach"), "{why}");
            let extra_only = JobSubmission {
                contiguous: false,
                ..job.clone()
            };
            let why = unsupported_at(version, &extra_only).expect("refused at v0.0.38");
            assert!(why.starts_with("--extra cannot reach"), "{why}");
            let priority = JobSubmission {
                priority: Some(4_294_967_293),
                ..fixture_job()
            };
            assert_eq!(unsupported_at(version, &priority), None);
            let body = submit_body(version, &priority).unwrap();
            assert_eq!(
                body["job"]["priority"],
                json!(4_294_967_293u32),
                "{version}"
            );
            continue;
        }
        assert_eq!(unsupported_at(version, &job), None, "{version}");
        let body = submit_body(version, &job).unwrap();
        assert_eq!(body["job"]["contiguous"], json!(true), "{version}");
        assert_eq!(body["job"]["extra"], json!("rack=a"), "{version}");
        assert_eq!(
            body["job"]["priority"],
            json!({"set": true, "infinite": false, "number": 4_294_967_293u32}),
            "{version}"
        );
    }
    let held = JobSubmission {
        hold: true,
        priority: Some(5),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &held).unwrap();
        assert_eq!(body["job"]["hold"], json!(true), "{version}");
        assert_eq!(body["job"].get("priority"), None, "{version}");
    }
    let unset = submit_body(ApiVersion::V0_0_42, &fixture_job()).unwrap();
    for key in ["contiguous", "extra", "priority"] {
        assert_eq!(unset["job"].get(key), None, "{key}");
    }
}

/// `--exclusive=user|mcs|topo`: `exclusive` with sbatch's word at v0.0.38, the `shared` flag
/// later; `topo` only from v0.0.41 (Slurm 24.05's parsers), so v0.0.38 and v0.0.40 cannot
/// take it, naming why.
#[test]
fn exclusive_modes_go_as_each_version_takes_them() {
    for (shared, word) in [
        (Sharing::User, "user"),
        (Sharing::Mcs, "mcs"),
        (Sharing::Topo, "topo"),
    ] {
        let job = JobSubmission {
            shared: Some(shared),
            ..fixture_job()
        };
        for version in ApiVersion::ALL {
            if shared == Sharing::Topo && version < ApiVersion::V0_0_41 {
                let why = unsupported_at(version, &job).expect("topo refused");
                assert!(
                    why.contains("--exclusive=topo") && why.contains(version.as_str()),
                    "{why}"
                );
                assert!(refused(version, &job), "{version}");
                continue;
            }
            assert_eq!(unsupported_at(version, &job), None, "{version} {word}");
            let body = submit_body(version, &job).unwrap();
            if version.is_data_parser() {
                assert_eq!(body["job"]["shared"], json!([word]), "{version}");
                assert_eq!(body["job"].get("exclusive"), None, "{version}");
            } else {
                assert_eq!(body["job"]["exclusive"], json!(word), "{version}");
                assert_eq!(body["job"].get("shared"), None, "{version}");
            }
            assert_eq!(body["job"].get("oversubscribe"), None, "{version}");
        }
    }
}

/// `-m`: `distribution` from v0.0.41 (v0.0.38 and v0.0.40 drop it), `SLURM_DISTRIBUTION` and
/// `SLURM_DIST_PLANESIZE` in every version; `--mem-bind` only as the variables sbatch sets;
/// `--gpu-bind` as `gpu_binding` with `SLURM_GPU_BIND` at v0.0.38, as `tres_bind` with
/// `SLURM_TRES_BIND` later, in place of the binding `--gpus-per-task` implies; `--gpu-freq`
/// as `gpu_frequency` at v0.0.38, `tres_freq` `gpu:…` later, and `SLURM_GPU_FREQ` in every
/// version.
#[test]
fn layouts_and_bindings_go_as_each_version_takes_them() {
    let job = JobSubmission {
        distribution: Some("block:cyclic".into()),
        mem_bind: Some(MemBinding {
            binding: "verbose,local".into(),
            verbose: true,
        }),
        gpu_bind: Some("closest".into()),
        gpu_freq: Some("medium,memory=high".into()),
        cpu_freq: Some("High".into()),
        gpus_per_node: None,
        gpus_per_task: Some(GpuRequest {
            count: 1,
            kind: None,
        }),
        ..fixture_job()
    };
    let plane = JobSubmission {
        distribution: Some("plane".into()),
        plane_size: Some(4),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &job).unwrap();
        let env = environment_of(&body);
        let var = |name: &str| env.get(name).map(String::as_str);
        assert_eq!(var("SLURM_DISTRIBUTION"), Some("block:cyclic"), "{version}");
        assert_eq!(var("SLURM_DIST_PLANESIZE"), None, "{version}");
        assert_eq!(var("SLURM_MEM_BIND"), Some("verbose,local"), "{version}");
        assert_eq!(var("SLURM_MEM_BIND_VERBOSE"), Some("verbose"), "{version}");
        assert_eq!(var("SLURM_CPU_FREQ_REQ"), Some("High"), "{version}");
        assert_eq!(body["job"]["cpu_frequency"], json!("High"), "{version}");
        assert_eq!(
            var("SLURM_GPU_FREQ"),
            Some("medium,memory=high"),
            "{version}"
        );
        for field in ["memory_binding", "memory_binding_type"] {
            assert_eq!(
                body["job"].get(field),
                None,
                "{version}: slurmctld keeps none"
            );
        }
        let sent = body["job"].get("distribution").cloned();
        let planed = submit_body(version, &plane).unwrap();
        let plane_env = environment_of(&planed);
        assert_eq!(
            plane_env.get("SLURM_DISTRIBUTION").map(String::as_str),
            Some("plane")
        );
        assert_eq!(
            plane_env.get("SLURM_DIST_PLANESIZE").map(String::as_str),
            Some("4")
        );
        if version >= ApiVersion::V0_0_41 {
            assert_eq!(sent, Some(json!("block:cyclic")), "{version}");
            assert_eq!(planed["job"]["distribution"], json!("plane=4"), "{version}");
        } else {
            assert_eq!(sent, None, "{version}: dropped by slurmrestd");
            assert_eq!(planed["job"].get("distribution"), None, "{version}");
        }
        if version.is_data_parser() {
            assert_eq!(
                body["job"]["tres_bind"],
                json!("gres/gpu:closest"),
                "{version}"
            );
            assert_eq!(
                var("SLURM_TRES_BIND"),
                Some("gres/gpu:closest"),
                "{version}"
            );
            assert_eq!(var("SLURM_GPU_BIND"), None, "{version}");
            assert_eq!(body["job"].get("gpu_binding"), None, "{version}");
            assert_eq!(
                body["job"]["tres_freq"],
                json!("gpu:medium,memory=high"),
                "{version}"
            );
        } else {
            assert_eq!(body["job"]["gpu_binding"], json!("closest"));
            assert_eq!(var("SLURM_GPU_BIND"), Some("closest"));
            assert_eq!(body["job"].get("tres_bind"), None);
            assert_eq!(body["job"]["gpu_frequency"], json!("medium,memory=high"));
        }
    }
    // a lone pack flag breaks v0.0.41's parser: sent from v0.0.42, in the variable everywhere
    let packed = JobSubmission {
        distribution: Some("pack".into()),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &packed).unwrap();
        let sent = body["job"].get("distribution").cloned();
        assert_eq!(sent.is_some(), version >= ApiVersion::V0_0_42, "{version}");
        assert_eq!(
            environment_of(&body)["SLURM_DISTRIBUTION"],
            "pack",
            "{version}"
        );
    }
    // the shell's own verbosity stays, as in sbatch
    let mut shell = fixture_job();
    shell
        .environment
        .push(("SLURM_MEM_BIND_VERBOSE".into(), "verbose".into()));
    let quiet = JobSubmission {
        mem_bind: Some(MemBinding {
            binding: "local".into(),
            verbose: false,
        }),
        ..shell
    };
    let env = environment_of(&submit_body(ApiVersion::V0_0_42, &quiet).unwrap());
    assert_eq!(env["SLURM_MEM_BIND_VERBOSE"], "verbose");
    assert_eq!(env["SLURM_MEM_BIND"], "local");
}

/// `--ntasks-per-gpu`: the key each version's parser reads (v0.0.38's `ntasks_per_gpu`, in its
/// option table though not in its spec; `ntasks_per_tres` later), and the job's
/// `SLURM_NTASKS_PER_GPU` in every version; the GPUs only as given (none when slurmctld is to
/// derive them from the tasks).
#[test]
fn tasks_per_gpu_go_as_each_version_reads_them_with_sbatch_s_variable() {
    let derived = JobSubmission {
        tasks: Some(8),
        ntasks_per_gpu: Some(2),
        gpus_per_node: None,
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &derived).unwrap();
        let job = &body["job"];
        let (key, other) = if version.is_data_parser() {
            ("ntasks_per_tres", "ntasks_per_gpu")
        } else {
            ("ntasks_per_gpu", "ntasks_per_tres")
        };
        assert_eq!(job[key], json!(2), "{version}");
        assert_eq!(job.get(other), None, "{version}");
        assert_eq!(job["tasks"], json!(8), "{version}");
        for gpus in ["gpus", "tres_per_job", "gres"] {
            assert_eq!(job.get(gpus), None, "{version}: {gpus}");
        }
        let env = environment_of(&body);
        assert_eq!(env["SLURM_NTASKS_PER_GPU"], "2", "{version}");
        assert!(!env.contains_key("SLURM_GPUS"), "{version}: {env:?}");
        // -c's SLURM_TRES_PER_TASK would make 23.11's to 25.05.0's srun refuse every step
        let with_c = JobSubmission {
            cpus_per_task: Some(2),
            ..derived.clone()
        };
        let body = submit_body(version, &with_c).unwrap();
        let env = environment_of(&body);
        assert_eq!(env["SLURM_CPUS_PER_TASK"], "2", "{version}");
        assert!(
            !env.contains_key("SLURM_TRES_PER_TASK"),
            "{version}: {env:?}"
        );
        // nor in tres_per_task, which 25.05.0's slurmd puts in the job's environment
        assert_eq!(body["job"].get("tres_per_task"), None, "{version}");
        assert_eq!(body["job"]["cpus_per_task"], json!(2), "{version}");
        let plain = submit_body(version, &fixture_job()).unwrap();
        assert!(!environment_of(&plain).contains_key("SLURM_NTASKS_PER_GPU"));
        assert_eq!(plain["job"].get(key), None, "{version}");
    }
}

/// `--profile`, `--switches`, `--container[-id]` as each version takes them, with the variables
/// sbatch sets; what v0.0.38 cannot carry is refused, naming it.
#[test]
fn profiles_switches_and_containers_go_as_each_version_takes_them() {
    let job = JobSubmission {
        profile: Some(vec!["Energy".into(), "Task".into()]),
        container: Some("/srv/oci/py".into()),
        ..fixture_job()
    };
    let v38 = submit_body(ApiVersion::V0_0_38, &job).unwrap();
    // only the variable: v0.0.38 would write it again from a buffer it does not clear
    assert_eq!(v38["job"].get("profile"), None);
    assert_eq!(v38["job"]["container"], json!("/srv/oci/py"));
    let env = environment_of(&v38);
    assert_eq!(env["SLURM_PROFILE"], "Energy,Task");
    assert_eq!(env["SLURM_CONTAINER"], "/srv/oci/py");
    for (field, says) in [
        (
            JobSubmission {
                required_switches: Some(2),
                ..fixture_job()
            },
            "--switches cannot reach this cluster",
        ),
        (
            JobSubmission {
                container_id: Some("py-1".into()),
                ..fixture_job()
            },
            "--container-id cannot reach this cluster",
        ),
    ] {
        let why = unsupported_at(ApiVersion::V0_0_38, &field).unwrap();
        assert!(why.contains(says), "{why}");
        assert!(refused(ApiVersion::V0_0_38, &field));
    }
    let all = JobSubmission {
        required_switches: Some(2),
        wait_for_switch: Some(600),
        container_id: Some("py-1".into()),
        environment: vec![("SLURM_CONTAINER".into(), "/shell/own".into())],
        ..job
    };
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        assert_eq!(unsupported_at(version, &all), None, "{version}");
        let body = submit_body(version, &all).unwrap();
        let sent = &body["job"];
        assert_eq!(sent["profile"], json!(["ENERGY", "TASK"]), "{version}");
        assert_eq!(
            sent["required_switches"],
            json!({"set": true, "infinite": false, "number": 2}),
            "{version}"
        );
        assert_eq!(sent["wait_for_switch"], json!(600), "{version}");
        assert_eq!(sent["container"], json!("/srv/oci/py"), "{version}");
        assert_eq!(sent["container_id"], json!("py-1"), "{version}");
        let env = environment_of(&body);
        assert_eq!(env["SLURM_PROFILE"], "Energy,Task", "{version}");
        // the shell's own, as sbatch keeps it
        assert_eq!(env["SLURM_CONTAINER"], "/shell/own", "{version}");
        assert_eq!(env["SLURM_CONTAINER_ID"], "py-1", "{version}");
    }
    let none = JobSubmission {
        profile: Some(vec!["None".into()]),
        ..fixture_job()
    };
    let body = submit_body(ApiVersion::V0_0_42, &none).unwrap();
    assert_eq!(body["job"]["profile"], json!(["NONE"]));
    assert_eq!(environment_of(&body)["SLURM_PROFILE"], "None");
}

/// A body's environment as a map: an object at v0.0.38, `K=V` strings later.
fn environment_of(body: &Value) -> std::collections::BTreeMap<String, String> {
    match &body["job"]["environment"] {
        Value::Object(vars) => vars
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect(),
        Value::Array(list) => list
            .iter()
            .map(|entry| {
                let (k, v) = entry.as_str().unwrap().split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect(),
        other => panic!("environment: {other}"),
    }
}

/// `--threads-per-core`, `--ntasks-per-core` (and the hint's settings): `threads_per_core` and
/// `tasks_per_core` in every version, with the variables sbatch sets for them
/// (`SLURM_THREADS_PER_CORE`, `SLURM_NTASKS_PER_CORE`, `SLURM_HINT` as given); neither without,
/// and 0 is refused before sending.
#[test]
fn threads_and_tasks_per_core_go_in_every_version() {
    let hinted = JobSubmission {
        threads_per_core: Some(1),
        tasks_per_core: Some(65_535),
        hint: Some("nomultithread,multithread".into()),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &hinted).unwrap();
        assert_eq!(body["job"]["threads_per_core"], json!(1), "{version}");
        assert_eq!(body["job"]["tasks_per_core"], json!(65_535), "{version}");
        let env = environment_of(&body);
        for (name, value) in [
            ("SLURM_THREADS_PER_CORE", "1"),
            ("SLURM_NTASKS_PER_CORE", "65535"),
            ("SLURM_HINT", "nomultithread,multithread"),
        ] {
            assert_eq!(
                env.get(name).map(String::as_str),
                Some(value),
                "{version} {name}"
            );
        }
        let plain = submit_body(version, &fixture_job()).unwrap();
        assert_eq!(plain["job"].get("threads_per_core"), None, "{version}");
        assert_eq!(plain["job"].get("tasks_per_core"), None, "{version}");
        assert_eq!(environment_of(&plain).get("SLURM_HINT"), None, "{version}");
        for zero in [
            JobSubmission {
                threads_per_core: Some(0),
                ..fixture_job()
            },
            JobSubmission {
                tasks_per_core: Some(0),
                ..fixture_job()
            },
        ] {
            assert!(refused(version, &zero), "{version}");
        }
    }
}

/// The script's command line is `argv` in every version, as given (22.05's slurmrestd reads
/// it into sbatch's own `script_argv`); none is sent without one, and NUL is refused.
#[test]
fn the_script_s_command_line_is_argv_in_every_version() {
    let argv: Vec<String> = ["/home/alice/job.sh", "in.dat", "two words", "", "-n"]
        .map(String::from)
        .to_vec();
    let with_args = JobSubmission {
        argv: argv.clone(),
        ..fixture_job()
    };
    for version in ApiVersion::ALL {
        let body = submit_body(version, &with_args).unwrap();
        assert_eq!(body["job"]["argv"], json!(argv), "{version}");
        let plain = submit_body(version, &fixture_job()).unwrap();
        assert_eq!(plain["job"].get("argv"), None, "{version}");
        let nul = JobSubmission {
            argv: vec!["/home/alice/job.sh".into(), "a\0b".into()],
            ..fixture_job()
        };
        assert!(refused(version, &nul));
    }
}

/// Every field bursar sends in `job` is one the version's published submit schema has, with
/// the schema's JSON type (v0.0.40–v0.0.45; the fields come from the specs through
/// `build_submit_fields.py`).
#[test]
fn every_field_sent_is_in_the_versions_submit_schema_with_its_type() {
    let schema = fixture_json("constructed/job_submit_fields_v0.0.4x.json");
    let everything = JobSubmission {
        nodes: Some(2),
        gpus_per_node: Some(GpuRequest {
            count: 2,
            kind: Some("h100".into()),
        }),
        standard_error: Some("/home/alice/%j.err".into()),
        constraints: Some("skylake&ib".into()),
        hold: true,
        tasks_per_node: Some(1),
        mail_type: mail_events("ALL").unwrap(),
        mail_user: Some("alice@example.org".into()),
        warn_signal: Some(KillWarning {
            number: 10,
            seconds: 90,
            batch_only: true,
            reservation: false,
        }),
        requeue: Some(false),
        open_append: Some(true),
        nice: Some(10),
        reservation: Some("maint".into()),
        wckey: Some("proj".into()),
        excluded_nodes: Some("n[1,3]".into()),
        standard_input: Some("/dev/null".into()),
        no_kill: true,
        dependency: Some("afterok:12".into()),
        kill_on_invalid_dependency: Some(true),
        array: Some("0-9:3%2".into()),
        begin_time: Some(1_795_726_800),
        deadline: Some(1_796_144_400),
        time_min: Some(30),
        tmp_disk_mb: Some(2048),
        prefer: Some("skylake".into()),
        required_nodes: Some("n[1-2]".into()),
        argv: vec!["/home/alice/job.sh".into(), "in.dat".into()],
        licenses: Some("matlab:2,fluent@flexlm:1".into()),
        min_cpus_per_node: Some(4),
        threads_per_core: Some(1),
        tasks_per_core: Some(1),
        hint: Some("nomultithread".into()),
        gres_flags: Some("enforce-binding".into()),
        acctg_freq: Some("30".into()),
        distribution: Some("plane".into()),
        plane_size: Some(4),
        gpu_bind: Some("closest".into()),
        gpu_freq: Some("medium".into()),
        cpu_freq: Some("1800000-2400000:OnDemand".into()),
        profile: Some(vec!["Energy".into(), "Task".into()]),
        required_switches: Some(2),
        wait_for_switch: Some(600),
        container: Some("/srv/oci/py".into()),
        container_id: Some("py-1".into()),
        shared: Some(Sharing::User),
        wait_all_nodes: Some(true),
        use_min_nodes: true,
        spread_job: true,
        delay_boot: Some(600),
        mcs_label: Some("physics".into()),
        contiguous: true,
        extra: Some("rack=a".into()),
        ..fixture_job()
    };
    // the fields that exclude those above, in a second body (`priority`: not with `hold`)
    let others = JobSubmission {
        memory_per_node_mb: None,
        memory_per_cpu_mb: Some(1000),
        gpus_per_node: None,
        gpus_per_job: Some(GpuRequest {
            count: 2,
            kind: None,
        }),
        ntasks_per_gpu: Some(2),
        priority: Some(500),
        ..fixture_job()
    };
    // and the GPU-relative ones, in a third
    let gpu_relative = JobSubmission {
        cpus_per_task: None,
        cpus_per_gpu: Some(3),
        memory_per_node_mb: None,
        memory_per_gpu_mb: Some(500),
        gpus_per_node: None,
        gpus_per_task: Some(GpuRequest {
            count: 1,
            kind: None,
        }),
        ..fixture_job()
    };
    let json_type = |value: &Value| match value {
        Value::String(_) => "string",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    let mut checked = 0;
    for version in ApiVersion::ALL.into_iter().filter(|v| v.is_data_parser()) {
        let fields = &schema["versions"][version.as_str()];
        assert!(fields.is_object(), "{version} is in the fixture");
        let body = submit_body(version, &everything).unwrap();
        let job = body["job"].as_object().unwrap();
        // `distribution` from v0.0.41
        let layout = usize::from(version >= ApiVersion::V0_0_41);
        assert_eq!(job.len(), 62 + layout, "{version}: {job:?}");
        let second = submit_body(version, &others).unwrap();
        let third = submit_body(version, &gpu_relative).unwrap();
        let extra: Vec<(&String, &Value)> = [&second, &third]
            .into_iter()
            .flat_map(|body| body["job"].as_object().unwrap().iter())
            .filter(|(k, _)| !job.contains_key(*k))
            .collect();
        assert_eq!(extra.len(), 6, "{version}: {extra:?}");
        for (key, value) in job.iter().chain(extra) {
            assert_eq!(
                fields[key].as_str(),
                Some(json_type(value)),
                "{version}: job.{key} = {value}"
            );
            checked += 1;
        }
        // the limits bursar prices with are sent as set numbers
        for key in ["time_limit", "memory_per_node"] {
            assert_eq!(job[key]["set"], json!(true), "{version}: {key}");
        }
        if version == ApiVersion::V0_0_40 {
            // v0.0.40's request has its own `script` (its spec's `v0.0.40_job_submit_req`),
            // which 23.11.0 – 23.11.4 require: the same text as `job.script`.
            assert_eq!(
                body.as_object().unwrap().len(),
                2,
                "{version}: `job`, `script`"
            );
            assert_eq!(body["script"], job["script"], "{version}");
        } else {
            assert_eq!(body.as_object().unwrap().len(), 1, "{version}: only `job`");
        }
    }
    assert_eq!(checked, 68 * 6 + 5);
}

#[tokio::test]
async fn submit_as_a_user_sends_their_minted_token_and_the_versions_body() {
    for (version, answer) in [
        (ApiVersion::V0_0_38, fixture("real-22.05/submit-alice.json")),
        (
            ApiVersion::V0_0_41,
            fixture("constructed/slurm_v0.0.41plus_job_submit_resp.json"),
        ),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("/slurm/{version}/job/submit")))
            .and(header("x-slurm-user-name", "alice"))
            .respond_with(json_answer(200, answer))
            .expect(1)
            .mount(&server)
            .await;
        let (client, _key) = client(&server, Some(version));
        let submitted = client.submit_job("alice", &fixture_job()).await.unwrap();
        let expected_id = if version == ApiVersion::V0_0_38 {
            19
        } else {
            1235
        };
        assert_eq!(
            submitted,
            SubmittedJob {
                job_id: expected_id,
                user_msg: String::new()
            }
        );

        let requests = server.received_requests().await.unwrap();
        let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
        assert_eq!(body, submit_body(version, &fixture_job()).unwrap());
        let (_, token) = &credentials_seen(&server).await[0];
        assert_eq!(
            verify(token, KEY).sun,
            "alice",
            "minted for the user acted as"
        );
    }
}

/// 22.05.0 – 22.05.8's slurmrestd dies on a job's `argv`: the release is asked once (a
/// ping), and there a job with arguments is refused before anything is sent, the script's
/// path alone is left out; from 22.05.9 (and at every data_parser version) `argv` goes.
#[tokio::test]
async fn argv_goes_only_to_a_slurmrestd_that_survives_it() {
    for (release, sent) in [
        ("22.05.8", false),
        ("22.05.9", true),
        ("23.02.1", false),
        ("23.02.2", true),
    ] {
        let server = MockServer::start().await;
        let ping = fixture("real-22.05/ping.json").replace("22.05.8", release);
        Mock::given(method("GET"))
            .and(path("/slurm/v0.0.38/ping"))
            .respond_with(json_answer(200, ping))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/slurm/v0.0.38/job/submit"))
            .respond_with(json_answer(200, fixture("real-22.05/submit-alice.json")))
            .mount(&server)
            .await;
        let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
        assert_eq!(client.known_argv_refusal(), None, "unknown before asking");
        let with_args = JobSubmission {
            argv: vec!["/home/alice/job.sh".into(), "in.dat".into()],
            ..fixture_job()
        };
        let path_only = JobSubmission {
            argv: vec!["/home/alice/job.sh".into()],
            ..fixture_job()
        };
        let answer = client.submit_job("alice", &with_args).await;
        if sent {
            answer.unwrap();
        } else {
            let err = answer.unwrap_err();
            assert!(matches!(err, RestError::InvalidRequest(_)), "{err:?}");
            assert!(
                err.to_string().contains(&format!("Slurm {release}")),
                "{err}"
            );
            let known = client.known_argv_refusal().expect("known once asked");
            assert!(err.to_string().contains(&known), "{err} / {known}");
        }
        client.submit_job("alice", &path_only).await.unwrap();
        let bodies: Vec<Value> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.method.as_str() == "POST")
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        let argvs: Vec<Value> = bodies.iter().map(|b| b["job"]["argv"].clone()).collect();
        if sent {
            assert_eq!(
                argvs,
                [
                    json!(["/home/alice/job.sh", "in.dat"]),
                    json!(["/home/alice/job.sh"])
                ],
                "{release}"
            );
        } else {
            assert_eq!(
                argvs,
                [Value::Null],
                "{release}: nothing with arguments was sent"
            );
        }
    }
    // No ping at data_parser versions: argv always goes.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_answer(
            200,
            fixture("constructed/slurm_v0.0.41plus_job_submit_resp.json"),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_41));
    let job = JobSubmission {
        argv: vec!["/home/alice/job.sh".into(), "x".into()],
        ..fixture_job()
    };
    client.submit_job("alice", &job).await.unwrap();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[test]
fn releases_whose_slurmrestd_breaks_on_argv() {
    for (release, breaks) in [
        (Some("22.05.8"), true),
        (Some("22.05.0"), true),
        (Some("21.08.8-2"), true),
        (Some("22.05.9"), false),
        (Some("22.05.11"), false),
        (Some("23.02.0-0rc1"), true),
        (Some("23.02.1"), true),
        (Some("23.02.2"), false),
        (Some("23.02.7"), false),
        (Some("23.11.10"), false),
        (Some("garbage"), true),
        (Some("22.05"), true),
        (None, true),
    ] {
        assert_eq!(
            argv_breaks(ApiVersion::V0_0_38, release),
            breaks,
            "{release:?}"
        );
        assert!(!argv_breaks(ApiVersion::V0_0_40, release));
    }
}

#[tokio::test]
async fn an_error_answer_that_names_a_created_job_is_a_submission() {
    // 23.11.0: a job created with a non-zero return code (here: its partition is down) is
    // answered with HTTP 500, the error, and the job's id. The job waits on the cluster.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_answer(
            500,
            r#"{"job_id": 4711, "step_id": "batch", "job_submit_user_msg": "",
                "errors": [{"description": "Batch job submission failed",
                  "error_number": 2031, "error": "Required partition not available (inactive or drain)",
                  "source": "slurm_submit_batch_job()"}],
                "warnings": []}"#
                .into(),
        ))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_40));
    let submitted = client.submit_job("alice", &fixture_job()).await.unwrap();
    assert_eq!(submitted.job_id, 4711);
    assert!(
        submitted
            .user_msg
            .contains("Required partition not available"),
        "{submitted:?}"
    );
}

#[tokio::test]
async fn submit_failures_from_22_05() {
    let cases = [
        // bad account: HTTP 500 with a permanent Slurm errno
        (
            500,
            "real-22.05/submit-wrong-account.json",
            Some(2045),
            "Invalid account",
        ),
        // an environment list instead of an object
        (
            400,
            "real-22.05/submit-env-as-array.json",
            None,
            "environment must be a dictionary",
        ),
    ];
    for (status, name, errno, words) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(json_answer(status, fixture(name)))
            .mount(&server)
            .await;
        let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
        let err = client
            .submit_job("alice", &fixture_job())
            .await
            .unwrap_err();
        assert!(
            matches!(err, RestError::Server { status: s, .. } if s == status),
            "{err:?}"
        );
        if errno.is_some() {
            assert_eq!(err.slurm_error_number(), errno);
        }
        assert!(err.to_string().contains(words), "{err}");
        assert!(!err.is_retryable());
    }

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_answer(
            200,
            r#"{"errors": [], "job_submit_user_msg": ""}"#.into(),
        ))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let err = client
        .submit_job("alice", &fixture_job())
        .await
        .unwrap_err();
    assert!(matches!(err, RestError::BadPayload { .. }), "{err:?}");
}

#[tokio::test]
async fn a_held_job_is_submitted_though_22_05_lists_an_error_beside_its_id() {
    // 22.05.8's real answer to `"hold": true`: HTTP 200, the job id, and errors[] 2042.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/slurm/v0.0.38/job/submit"))
        .respond_with(json_answer(200, fixture("real-22.05/submit-held.json")))
        .expect(1)
        .mount(&server)
        .await;
    let (rest, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let held = JobSubmission {
        hold: true,
        ..fixture_job()
    };
    let submitted = rest.submit_job("alice", &held).await.unwrap();
    assert_eq!(submitted.job_id, 9149);
    assert_eq!(
        submitted.user_msg,
        "Job is in held state, pending scheduler release"
    );

    // The same errors[] without a job id is a refusal.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_answer(
            200,
            fixture("real-22.05/submit-held.json").replace(r#""job_id": 9149,"#, ""),
        ))
        .mount(&server)
        .await;
    let (rest, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let err = rest.submit_job("alice", &held).await.unwrap_err();
    assert_eq!(err.slurm_error_number(), Some(2042), "{err:?}");
}

#[tokio::test]
async fn cancel_and_ping() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.38/job/20"))
        .and(header("x-slurm-user-name", "alice"))
        .respond_with(json_answer(200, fixture("real-22.05/cancel-as-alice.json")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.38/job/20"))
        .and(header("x-slurm-user-name", "bob"))
        .respond_with(json_answer(500, fixture("real-22.05/cancel-as-bob.json")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/ping"))
        .respond_with(json_answer(200, fixture("real-22.05/ping.json")))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_38));

    client.cancel_job("alice", 20).await.unwrap();
    let err = client.cancel_job("bob", 20).await.unwrap_err();
    assert_eq!(err.slurm_error_number(), Some(2002));
    assert!(
        err.to_string().contains("Access/permission denied"),
        "{err}"
    );
    assert!(!err.is_retryable());

    let ping = client.ping().await.unwrap();
    assert_eq!(ping.release.as_deref(), Some("22.05.8"));
    assert!(ping.any_up());
    assert_eq!(ping.controllers[0].hostname, "vm");
    server.verify().await;
}

#[tokio::test]
async fn v0_0_42_ping_and_cancel_shapes() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/ping/"))
        .respond_with(json_answer(
            200,
            json!({"pings": [
                {"hostname": "ctl1", "pinged": "DOWN", "responding": false, "latency": 0,
                 "mode": "primary", "primary": true},
                {"hostname": "ctl2", "pinged": "UP", "responding": true, "latency": 310,
                 "mode": "backup1", "primary": false}],
                "meta": {"slurm": {"release": "24.11.6"}}, "errors": [], "warnings": []})
            .to_string(),
        ))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.42/job/77"))
        .respond_with(json_answer(
            200,
            json!({"status": [{"error": {"string": "No error", "code": 0, "message": ""},
                "step_id": "", "job_id": {"set": true, "infinite": false, "number": 77}}],
                "errors": [], "warnings": []})
            .to_string(),
        ))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_42));
    let ping = client.ping().await.unwrap();
    assert_eq!(ping.release.as_deref(), Some("24.11.6"));
    let up: Vec<_> = ping
        .controllers
        .iter()
        .map(|c| (c.mode.as_str(), c.up))
        .collect();
    assert_eq!(up, vec![("primary", false), ("backup1", true)]);
    client.cancel_job("alice", 77).await.unwrap();
}

/// `--mincpus`: slurmctld up to 24.11.0 allocates that many CPUs on each node, from 24.11.1
/// it only picks nodes by it. v0.0.38 is 22.05 or 23.02; at data_parser versions the release
/// decides, asked once (a ping) and unknown until then.
#[tokio::test]
async fn the_release_says_whether_mincpus_cpus_are_allocated() {
    assert_eq!(min_cpus_allocated(ApiVersion::V0_0_38, None), Some(true));
    for (release, allocated) in [
        (None, None),
        (Some("23.11.10"), Some(true)),
        (Some("24.05.8"), Some(true)),
        (Some("24.11.0"), Some(true)),
        (Some("24.11.0-0rc1"), Some(true)),
        (Some("24.11.1"), Some(false)),
        (Some("24.11.5"), Some(false)),
        (Some("25.05.0"), Some(false)),
        (Some("unknown"), None),
    ] {
        assert_eq!(
            min_cpus_allocated(ApiVersion::V0_0_41, release),
            allocated,
            "{release:?}"
        );
    }
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.42/ping/"))
        .respond_with(json_answer(
            200,
            json!({"pings": [{"hostname": "ctl1", "pinged": "UP", "responding": true,
                "latency": 310, "mode": "primary", "primary": true}],
                "meta": {"slurm": {"release": "24.11.5"}}, "errors": [], "warnings": []})
            .to_string(),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let (next, _key) = client(&server, Some(ApiVersion::V0_0_42));
    assert_eq!(
        next.known_min_cpus_allocated(),
        None,
        "unknown before asking"
    );
    assert_eq!(next.release().await.unwrap().as_deref(), Some("24.11.5"));
    assert_eq!(next.release().await.unwrap().as_deref(), Some("24.11.5"));
    assert_eq!(next.known_min_cpus_allocated(), Some(false));
    let (old, _key) = client(&server, Some(ApiVersion::V0_0_38));
    assert_eq!(old.known_min_cpus_allocated(), Some(true), "no ping needed");
}

/// v0.0.45's ping has no `pinged` and no `mode`: `responding` says up, `primary` the role.
/// Its cancel answer is v0.0.42's.
#[tokio::test]
async fn v0_0_45_ping_and_cancel_shapes() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.45/ping/"))
        .respond_with(json_answer(
            200,
            json!({"pings": [
                {"hostname": "ctl1", "responding": true, "latency": 250, "primary": true,
                 "status": "OK"},
                {"hostname": "ctl2", "responding": false, "latency": 0, "primary": false,
                 "status": "ERROR"}],
                "meta": {"slurm": {"release": "26.05.0"}}, "errors": [], "warnings": []})
            .to_string(),
        ))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/slurm/v0.0.45/job/78"))
        .respond_with(json_answer(
            200,
            json!({"status": [{"error": {"string": "Invalid job id specified", "code": 2017,
                "message": "Invalid job id specified"}, "step_id": "",
                "job_id": {"set": true, "infinite": false, "number": 78}}],
                "errors": [], "warnings": []})
            .to_string(),
        ))
        .mount(&server)
        .await;
    let (client, _key) = client(&server, Some(ApiVersion::V0_0_45));
    let ping = client.ping().await.unwrap();
    assert_eq!(ping.release.as_deref(), Some("26.05.0"));
    let seen: Vec<_> = ping
        .controllers
        .iter()
        .map(|c| (c.hostname.as_str(), c.mode.as_str(), c.up))
        .collect();
    assert_eq!(
        seen,
        vec![("ctl1", "primary", true), ("ctl2", "backup", false)]
    );
    let refused = client.cancel_job("alice", 78).await.unwrap_err();
    assert!(refused.to_string().contains("Invalid job id"), "{refused}");
}

#[tokio::test]
async fn a_static_token_acts_as_other_users_through_the_user_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/slurm/v0.0.38/job/submit"))
        .respond_with(json_answer(200, fixture("real-22.05/submit-alice.json")))
        .mount(&server)
        .await;
    let mut config = SlurmRestConfig::new(
        server.uri(),
        "onprem",
        SlurmAuth::Token {
            user: "slurm".into(),
            token: SecretString::from("static.slurmuser.token"),
        },
    );
    config.api = ApiSelection::Fixed(ApiVersion::V0_0_38);
    let debug = format!("{config:?}");
    assert!(!debug.contains("static.slurmuser.token"), "{debug}");
    let client = SlurmRestClient::new(config).unwrap();
    assert!(!format!("{client:?}").contains("static.slurmuser.token"));

    client.submit_job("carol", &fixture_job()).await.unwrap();
    assert_eq!(
        credentials_seen(&server).await,
        vec![("carol".to_string(), "static.slurmuser.token".to_string())]
    );
}

#[tokio::test]
async fn secrets_never_show_in_debug_output() {
    let key = key_file();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(json_answer(
            200,
            fixture("real-22.05/dbjobs-q-state-FAILED.json"),
        ))
        .mount(&server)
        .await;
    let client =
        SlurmRestClient::new(config(&server.uri(), &key, Some(ApiVersion::V0_0_38))).unwrap();
    client
        .fetch_jobs(Window::new(CAPTURE_START, CAPTURE_END))
        .await
        .unwrap();
    let (_, token) = &credentials_seen(&server).await[0];
    let debug = format!("{client:?}");
    let key_text = String::from_utf8_lossy(KEY);
    assert!(!debug.contains(token.as_str()), "{debug}");
    assert!(!debug.contains(key_text.trim()), "{debug}");
    assert!(debug.contains("jwt key"), "{debug}");

    let lifetime_too_long = SlurmAuth::JwtKey {
        key_file: key.path().to_path_buf(),
        user: "slurm".into(),
        lifetime: Duration::from_secs(7 * 86_400),
    };
    let err = SlurmRestClient::new(SlurmRestConfig::new(
        server.uri(),
        "onprem",
        lifetime_too_long,
    ))
    .unwrap_err();
    assert!(matches!(err, RestError::Config(_)), "{err:?}");
}

#[tokio::test]
async fn job_states_read_both_generations_and_an_unknown_job_has_none() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/3119"))
        .respond_with(json_answer(200, fixture("real-22.05/job-held.json")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.38/job/99999999"))
        .respond_with(json_answer(500, fixture("real-22.05/job-unknown.json")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.41/job/7"))
        .respond_with(json_answer(
            200,
            r#"{"jobs": [{"job_id": 7, "job_state": ["PENDING", "REQUEUED"]}], "errors": []}"#
                .into(),
        ))
        .mount(&server)
        .await;
    let (v38, _key) = client(&server, Some(ApiVersion::V0_0_38));
    assert_eq!(v38.job_states(3119).await.unwrap(), ["PENDING"]);
    assert!(v38.job_states(99999999).await.unwrap().is_empty());
    // 23.11 and later answer an unknown job with HTTP 404 (and errno 2017).
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.41/job/8"))
        .respond_with(json_answer(
            404,
            r#"{"jobs": [], "errors": [{"description": "Unable to find JobId=8",
                "error_number": 2017, "error": "Invalid job id specified",
                "source": "_handle_job_get"}]}"#
                .into(),
        ))
        .mount(&server)
        .await;
    // A job array's id lists its tasks and its pending rest.
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.41/job/10"))
        .respond_with(json_answer(
            200,
            r#"{"jobs": [{"job_id": 11, "job_state": ["COMPLETED"]},
                         {"job_id": 12, "job_state": ["RUNNING"]},
                         {"job_id": 10, "job_state": ["PENDING"]}], "errors": []}"#
                .into(),
        ))
        .mount(&server)
        .await;
    let (v41, _key) = client(&server, Some(ApiVersion::V0_0_41));
    assert_eq!(v41.job_states(7).await.unwrap(), ["PENDING"]);
    assert!(v41.job_states(8).await.unwrap().is_empty());
    assert_eq!(
        v41.job_states(10).await.unwrap(),
        ["COMPLETED", "RUNNING", "PENDING"]
    );
    // Any other 404 (no such path: a wrong URL prefix) is an error.
    let err = v41.job_states(9).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
}

/// Exit codes as `sbatch --wait` reads them: the script's exit status when it exited, 1 when a
/// signal ended it; v0.0.38's raw wait status, v0.0.40+'s decoded one.
#[tokio::test]
async fn live_jobs_carry_the_exit_code_sbatch_wait_reads() {
    let server = MockServer::start().await;
    // 22.05: `exit_code` is the raw wait status (3 << 8: exit 3; 9, 15: killed by a signal).
    let raw = |code: u64| {
        let mut job: Value = serde_json::from_str(&fixture("real-22.05/job-held.json")).unwrap();
        job["jobs"][0]["job_state"] = json!("COMPLETED");
        job["jobs"][0]["exit_code"] = json!(code);
        job.to_string()
    };
    for (id, code) in [
        (1u64, 0u64),
        (2, 3 << 8),
        (3, 9),
        (4, 15),
        (5, 1 << 8 | 0x80),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("/slurm/v0.0.38/job/{id}")))
            .respond_with(json_answer(200, raw(code)))
            .mount(&server)
            .await;
    }
    let (v38, _key) = client(&server, Some(ApiVersion::V0_0_38));
    let mut codes = Vec::new();
    for id in 1..=5 {
        let jobs = v38.live_jobs("alice", id).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].state, "COMPLETED");
        codes.push(jobs[0].exit_code);
    }
    assert_eq!(codes, [Some(0), Some(3), Some(1), Some(1), Some(1)]);
    // 24.11 (v0.0.40+): decoded, as in the real answers (`status` a list of flags).
    let verbose = |status: &str, number: Value| {
        json!({"status": [status], "return_code": number,
               "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}})
    };
    let set = |n: u64| json!({"set": true, "infinite": false, "number": n});
    let unset = json!({"set": false, "infinite": false, "number": 0});
    let jobs = json!({"jobs": [
        {"job_id": 21, "job_state": ["COMPLETED"], "exit_code": verbose("SUCCESS", set(0))},
        {"job_id": 22, "job_state": ["FAILED"], "exit_code": verbose("ERROR", set(3))},
        {"job_id": 23, "job_state": ["CANCELLED"], "exit_code": verbose("SIGNALED", unset.clone())},
        {"job_id": 24, "job_state": ["TIMEOUT"], "exit_code": verbose("CORE_DUMPED", unset.clone())},
        {"job_id": 25, "job_state": ["PENDING"], "exit_code": verbose("PENDING", unset)},
        {"job_id": 26, "job_state": ["FAILED"], "exit_code": {"status": "ERROR", "return_code": 2}},
        {"job_id": 27, "job_state": ["RUNNING"]}
    ], "errors": []});
    Mock::given(method("GET"))
        .and(path("/slurm/v0.0.41/job/21"))
        .respond_with(json_answer(200, jobs.to_string()))
        .mount(&server)
        .await;
    let (v41, _key) = client(&server, Some(ApiVersion::V0_0_41));
    let live = v41.live_jobs("alice", 21).await.unwrap();
    let codes: Vec<Option<i32>> = live.iter().map(|j| j.exit_code).collect();
    assert_eq!(
        codes,
        [Some(0), Some(3), Some(1), Some(1), Some(1), Some(2), None]
    );
    assert_eq!(live[1].state, "FAILED");
}
