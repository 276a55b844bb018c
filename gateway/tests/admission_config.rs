//! The `submit` and `routing` configuration: time limits, inheritance from `collect`, and the
//! mistakes `bursar config check` refuses.

use bursar_gateway::config::{parse_partition_time, Config};

fn parse(yaml: &str) -> anyhow::Result<Config> {
    let config = Config::parse(yaml)?;
    config.validate()?;
    Ok(config)
}

const SLURM: &str = "clusters:\n  onprem:\n    kind: slurm\n    currency: su\n";

#[test]
fn partition_time_limits() {
    assert_eq!(parse_partition_time("2d"), Ok(2880));
    assert_eq!(parse_partition_time("90m"), Ok(90));
    assert_eq!(parse_partition_time("36h"), Ok(2160));
    assert_eq!(
        parse_partition_time("90s"),
        Ok(2),
        "rounded up to whole minutes"
    );
    assert_eq!(parse_partition_time("2-00:00:00"), Ok(2880));
    assert_eq!(parse_partition_time("01:30:00"), Ok(90));
    assert!(parse_partition_time("90").unwrap_err().contains("no unit"));
    assert!(parse_partition_time("UNLIMITED").is_err());
    assert!(parse_partition_time("0m").is_err());
    assert!(parse_partition_time("soon").is_err());

    let c = parse(&format!(
        "{SLURM}    submit:\n      partitions:\n        batch: {{max_time: 2d, default_time: \"01:00:00\"}}\n"
    ))
    .unwrap();
    let batch = &c.clusters["onprem"].submit.as_ref().unwrap().partitions["batch"];
    assert_eq!((batch.max_time, batch.default_time), (Some(2880), Some(60)));
    let err = Config::parse(&format!(
        "{SLURM}    submit:\n      partitions:\n        batch: {{max_time: 90}}\n"
    ))
    .unwrap_err();
    assert!(err.to_string().contains("no unit"), "{err}");
}

#[test]
fn the_submit_endpoints_take_the_collect_ca_file_unless_they_name_their_own() {
    let collect = "    collect:\n      slurmrestd: {url: \"https://a:6820\", jwt_key_file: /k, ca_file: /site-ca.pem}\n";
    let dstack = "clusters:\n  lab:\n    kind: dstack\n    currency: usd\n    collect:\n      dstack: {url: \"https://d:3000\", token_file: /t, project: hpc, ca_file: /site-ca.pem}\n";
    // (configuration, the submit endpoint's URL and CA file)
    let slurm_cases = [
        (format!("{SLURM}{collect}    submit:\n      slurmrestd: {{url: \"https://b:6820\"}}\n"), "https://b:6820", Some("/site-ca.pem")),
        (format!("{SLURM}{collect}    submit:\n      slurmrestd: {{ca_file: /other.pem}}\n"), "https://a:6820", Some("/other.pem")),
        (format!("{SLURM}    collect:\n      slurmrestd: {{url: \"http://a:6820\", jwt_key_file: /k}}\n"), "http://a:6820", None),
        // Plain http does not inherit the https collect source's CA file (it would refuse it).
        (format!("{SLURM}{collect}    submit:\n      slurmrestd: {{url: \"http://127.0.0.1:6820\"}}\n"), "http://127.0.0.1:6820", None),
    ];
    for (yaml, url, ca_file) in slurm_cases {
        let rest = parse(&yaml).unwrap().clusters["onprem"]
            .submit_slurmrestd()
            .unwrap()
            .unwrap();
        assert_eq!(
            (rest.url.as_str(), rest.ca_file.as_deref()),
            (url, ca_file.map(std::path::Path::new)),
            "{yaml}"
        );
    }
    let dstack_cases = [
        (
            format!("{dstack}    submit:\n      dstack: {{project: other}}\n"),
            "https://d:3000",
            Some("/site-ca.pem"),
        ),
        (
            format!("{dstack}    submit:\n      dstack: {{ca_file: /other.pem}}\n"),
            "https://d:3000",
            Some("/other.pem"),
        ),
        (
            format!("{dstack}    submit:\n      dstack: {{url: \"http://127.0.0.1:3000\"}}\n"),
            "http://127.0.0.1:3000",
            None,
        ),
    ];
    for (yaml, url, ca_file) in dstack_cases {
        let d = parse(&yaml).unwrap().clusters["lab"]
            .submit_dstack()
            .unwrap()
            .unwrap();
        assert_eq!(
            (d.url.as_str(), d.ca_file.as_deref()),
            (url, ca_file.map(std::path::Path::new)),
            "{yaml}"
        );
    }
}

#[test]
fn submit_endpoints_default_to_the_collect_source() {
    let c = parse(&format!(
        "{SLURM}    collect:\n      slurmrestd: {{url: \"http://a:6820\", jwt_key_file: /k, user: slurm, api_version: v0.0.40}}\n\
         \x20   submit:\n      slurmrestd: {{api_version: v0.0.38}}\n"
    ))
    .unwrap();
    let rest = c.clusters["onprem"].submit_slurmrestd().unwrap().unwrap();
    assert_eq!(rest.url, "http://a:6820");
    assert_eq!(rest.jwt_key_file.to_str(), Some("/k"));
    assert_eq!(rest.api_version.as_deref(), Some("v0.0.38"));

    let c = parse(&format!(
        "{SLURM}    collect:\n      slurmrestd: {{url: \"http://a:6820\", jwt_key_file: /k}}\n    submit: {{}}\n"
    ))
    .unwrap();
    assert_eq!(
        c.clusters["onprem"]
            .submit_slurmrestd()
            .unwrap()
            .unwrap()
            .url,
        "http://a:6820"
    );

    let c = parse(
        "clusters:\n  lab:\n    kind: dstack\n    currency: usd\n    collect:\n      dstack: {url: \"http://d:3000\", token_file: /t, project: hpc}\n    submit:\n      dstack: {project: other}\n",
    )
    .unwrap();
    let d = c.clusters["lab"].submit_dstack().unwrap().unwrap();
    assert_eq!(
        (d.url.as_str(), d.project.as_str()),
        ("http://d:3000", "other")
    );
}

#[test]
fn mistakes_are_refused_with_the_key() {
    for (yaml, expected) in [
        (
            format!("{SLURM}    submit:\n      slurmrestd: {{api_version: v0.0.38}}\n"),
            "submit.slurmrestd needs url and jwt_key_file",
        ),
        (
            format!("{SLURM}    submit:\n      default_partition: gpu\n      partitions:\n        batch: {{}}\n"),
            "submit.default_partition \"gpu\" is not listed",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{max_time: 1h, default_time: 2h}}\n"),
            "default_time is longer than max_time",
        ),
        (
            format!("{SLURM}    submit:\n      dstack: {{url: \"http://d\", token_file: /t, project: p}}\n"),
            "submit.dstack needs `kind: dstack`",
        ),
        (
            format!("{SLURM}routing:\n  prefer: [onprem, mars]\n"),
            "routing.prefer: cluster \"mars\" is not declared",
        ),
        (
            format!("{SLURM}routing:\n  accounts:\n    physics: [onprem, onprem]\n"),
            "routing.accounts.physics: cluster onprem is listed twice",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        gpu: {{gpu_types: [\"h100,a100\"]}}\n"),
            "is not a GPU type name",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{node_cpus: 8}}\n"),
            "give node_cpus and node_mem_mb together",
        ),
        (
            format!("{SLURM}    submit:\n      licenses: {{\"matlab:2\": 4}}\n"),
            "submit.licenses: \"matlab:2\" is not a license name",
        ),
        (
            "clusters:\n  lab:\n    kind: dstack\n    currency: usd\n    submit:\n      dstack: {url: \"http://d\", token_file: /t, project: p}\n      licenses: {matlab: 1}\n".to_string(),
            "submit.licenses: a dstack cluster has no licenses",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{exclusive: true}}\n"),
            "exclusive: every job gets whole nodes, so give node_cpus and node_mem_mb",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{node_cpus: 0, node_mem_mb: 1}}\n"),
            "node_cpus and node_mem_mb must be at least 1",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{node_threads_per_core: 0}}\n"),
            "node_threads_per_core must be at least 1",
        ),
        (
            format!("{SLURM}    submit:\n      partitions:\n        batch: {{node_cpus: 9, node_mem_mb: 1, node_threads_per_core: 2}}\n"),
            "node_cpus (9) is not a whole number of cores of node_threads_per_core (2) threads",
        ),
    ] {
        let err = parse(&yaml).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}\n--- for ---\n{yaml}");
    }
    let err = Config::parse(&format!("{SLURM}    submit:\n      partitons: {{}}\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("partitons") && err.contains("line 6"), "{err}");
}

/// The forwarder and the collector are built with the configured `ca_file`: one that cannot
/// be read stops both, naming the file.
#[test]
fn the_ca_file_reaches_the_forwarder_and_the_collector() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("jwt.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let ca = dir.path().join("missing-ca.pem");
    let c = parse(&format!(
        "{SLURM}    collect:\n      slurmrestd: {{url: \"https://127.0.0.1:6820\", jwt_key_file: {}, ca_file: {}}}\n",
        key.display(),
        ca.display()
    ))
    .unwrap();
    let err = bursar_gateway::admission::forward::forwarders_from_config(&c)
        .err()
        .expect("the forwarder reads the CA file");
    let message = format!("{err:#}");
    assert!(
        message.contains("reading ca_file") && message.contains(&ca.display().to_string()),
        "{message}"
    );
    let err = bursar_gateway::collect::Collector::from_config("onprem", &c.clusters["onprem"])
        .err()
        .expect("the collector reads the CA file");
    let message = format!("{err:#}");
    assert!(message.contains("reading ca_file"), "{message}");
}

/// `bursar config check` reads every key, token and CA file as `bursar serve` would: each one
/// that cannot be used is an error naming it (and the cluster and part), and the exit is 1;
/// with the files in place the same configuration checks clean.
#[test]
fn config_check_reads_the_files_the_configuration_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let config = dir.path().join("bursar.yaml");
    std::fs::write(
        &config,
        format!(
            "auth: {{hs256_key_file: {api_key}}}\n\
             alerts:\n  webhook: {{url_file: {hook}}}\n\
             clusters:\n  onprem:\n    kind: slurm\n    currency: su\n    collect:\n      \
             slurmrestd: {{url: \"https://127.0.0.1:6820\", jwt_key_file: {slurm_key}, ca_file: {ca}}}\n  \
             lab:\n    kind: dstack\n    currency: usd\n    collect:\n      \
             dstack: {{url: \"http://127.0.0.1:3000\", token_file: {token}, project: main}}\n",
            api_key = path("api.key"),
            hook = path("hook.url"),
            slurm_key = path("slurm.key"),
            ca = path("ca.pem"),
            token = path("dstack.token"),
        ),
    )
    .unwrap();
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_bursar"))
            .args(["--config", &config.display().to_string(), "config", "check"])
            .env_remove("BURSAR_DATABASE")
            .output()
            .unwrap()
    };

    let refused = check();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    for expected in [
        "error: auth: ".to_string(),
        "error: cluster onprem (collect): ".to_string(),
        "error: cluster onprem (submit): ".to_string(),
        "error: cluster lab (collect): ".to_string(),
        "error: cluster lab (submit): ".to_string(),
        format!("error: alerts.webhook.url_file {}", path("hook.url")),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in:\n{stderr}");
    }
    for file in ["api.key", "slurm.key", "dstack.token"] {
        assert!(stderr.contains(&path(file)), "{file} named in:\n{stderr}");
    }
    assert!(stderr.contains("6 problem(s)"), "{stderr}");

    // The files in place, but the CA file holds no certificate.
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path("api.key"), [3u8; 32]).unwrap();
    std::fs::set_permissions(path("api.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(path("slurm.key"), [7u8; 32]).unwrap();
    std::fs::write(path("dstack.token"), "token\n").unwrap();
    std::fs::write(path("hook.url"), "https://hooks.example.org/T000/B000\n").unwrap();
    std::fs::write(path("ca.pem"), "not a certificate\n").unwrap();
    let refused = check();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: cluster onprem (collect): ") && stderr.contains(&path("ca.pem")),
        "{stderr}"
    );
    assert!(stderr.contains("2 problem(s)"), "{stderr}");

    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../collectors/tests/fixtures/tls/ca.pem"
        ),
        path("ca.pem"),
    )
    .unwrap();
    let ok = check();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for line in [
        "auth: token keys read",
        "cluster onprem: collection source ready",
        "cluster onprem: submission ready",
        "cluster lab: collection source ready",
        "cluster lab: submission ready",
        "alerts webhook: ready",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
}
