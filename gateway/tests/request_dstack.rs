//! dstack task files and GPU specs: what is priced, what is kept for forwarding, what is
//! refused.

use bursar_gateway::request::{
    parse_dstack_task, CountRange, DstackTask, GpuPer, GpuRequest, GpuSpec, GpuVendor, JobRequest,
    MaxDuration, MemoryRequest, RequestError, SizeRange, SpotPolicy,
};
use bursar_pricing::Tres;
use serde_json::json;

const TRAIN: &str = "\
type: task
name: train
nodes: 2
resources:
  gpu: A100:80GB:2
  cpu: 16
  memory: 64GB..
  disk: 200GB
  shm_size: 16GB
commands:
  - pip install -r requirements.txt
  - python train.py
max_duration: 2h
image: dstackai/base
spot_policy: auto
env:
  - HF_TOKEN
  - MODE=fast
repos:
  - .:train
retry:
  on_events: [no-capacity]
";

#[test]
fn a_training_task() {
    let request = parse_dstack_task(TRAIN).unwrap();
    assert_eq!(
        (request.nodes, request.ntasks, request.cpus_per_task),
        (2, 2, 16)
    );
    assert_eq!(request.memory, Some(MemoryRequest::PerNode(65_536)));
    assert_eq!(
        request.gpus,
        Some(GpuRequest {
            count: 2,
            per: GpuPer::PerNode,
            kind: Some("a100".into())
        })
    );
    assert_eq!(request.time_limit_min, Some(120));
    assert_eq!(request.job_name.as_deref(), Some("train"));
    assert_eq!(
        request.alloc(),
        Tres::parse("cpu=32,mem=131072M,node=2,gres/gpu=4,gres/gpu:a100=4").unwrap()
    );

    let task = request.dstack.as_ref().unwrap();
    assert_eq!(task.commands.len(), 2);
    assert_eq!(task.image.as_deref(), Some("dstackai/base"));
    assert_eq!(task.spot_policy, Some(SpotPolicy::Auto));
    assert_eq!(task.max_duration, Some(MaxDuration::Seconds(7200)));
    assert_eq!(task.env.get("HF_TOKEN"), Some(&None));
    assert_eq!(task.env.get("MODE"), Some(&Some("fast".to_string())));
    assert_eq!(
        task.resources.disk,
        Some(SizeRange {
            min_mb: Some(204_800),
            max_mb: Some(204_800)
        })
    );
    assert_eq!(task.resources.shm_size_mb, Some(16_384));
    // kept as written, keys bursar does not read included, for runs/get_plan
    let original: serde_json::Value = serde_yaml::from_str(TRAIN).unwrap();
    assert_eq!(task.config(), &original);
    assert_eq!(task.config()["retry"]["on_events"][0], "no-capacity");
}

#[test]
fn dstack_defaults_apply() {
    let request = parse_dstack_task("type: task\ncommands: [echo hi]\n").unwrap();
    assert_eq!(
        (request.nodes, request.ntasks, request.cpus_per_task),
        (1, 1, 2)
    );
    assert_eq!(request.memory, Some(MemoryRequest::PerNode(8192)));
    assert_eq!((request.gpus.clone(), request.time_limit_min), (None, None));
    let task = request.dstack.as_ref().unwrap();
    assert_eq!(task.resources.cpu, CountRange::at_least(2));
    assert_eq!(task.resources.disk, Some(SizeRange::at_least_mb(102_400)));
    assert_eq!(request.alloc(), Tres::parse("cpu=2,mem=8G,node=1").unwrap());
}

#[test]
fn resource_forms() {
    let alloc = |resources: &str| {
        parse_dstack_task(&format!(
            "type: task\ncommands: [x]\nresources:\n{resources}"
        ))
        .unwrap_or_else(|e| panic!("{resources}: {e}"))
        .alloc()
    };
    let cases: &[(&str, &str)] = &[
        (
            "  gpu: H100:8\n",
            "cpu=2,mem=8G,node=1,gres/gpu=8,gres/gpu:h100=8",
        ),
        (
            "  gpu: H100\n",
            "cpu=2,mem=8G,node=1,gres/gpu=1,gres/gpu:h100=1",
        ),
        ("  gpu: 24GB..:2\n", "cpu=2,mem=8G,node=1,gres/gpu=2"),
        ("  gpu: A10G,A100:1\n", "cpu=2,mem=8G,node=1,gres/gpu=1"),
        ("  gpu: 2\n", "cpu=2,mem=8G,node=1,gres/gpu=2"),
        ("  gpu: nvidia:4..8\n", "cpu=2,mem=8G,node=1,gres/gpu=4"),
        (
            "  gpu: RTX4090:1\n",
            "cpu=2,mem=8G,node=1,gres/gpu=1,gres/gpu:rtx4090=1",
        ),
        (
            "  gpu: {name: [H100], memory: 80GB, count: 2}\n",
            "cpu=2,mem=8G,node=1,gres/gpu=2,gres/gpu:h100=2",
        ),
        (
            "  gpu: {count: {min: 1, max: 2}}\n",
            "cpu=2,mem=8G,node=1,gres/gpu=1",
        ),
        (
            "  cpu: 4..8\n  memory: 16GB..32GB\n",
            "cpu=4,mem=16G,node=1",
        ),
        ("  cpu: x86:8\n  memory: 0.5GB\n", "cpu=8,mem=512M,node=1"),
        (
            "  cpu: {arch: arm, count: 4}\n  memory: 512MB\n",
            "cpu=4,mem=512M,node=1",
        ),
        (
            "  cpu: {min: 3}\n  memory: {min: 1GB, max: 2GB}\n",
            "cpu=3,mem=1G,node=1",
        ),
        ("  memory: ..64GB\n", "cpu=2,node=1"),
        ("  memory: 16\n", "cpu=2,mem=16G,node=1"),
        ("  disk: {size: 1TB}\n", "cpu=2,mem=8G,node=1"),
        ("  gpu: 0\n", "cpu=2,mem=8G,node=1"),
    ];
    for (resources, tres) in cases {
        assert_eq!(alloc(resources), Tres::parse(tres).unwrap(), "{resources}");
    }
}

#[test]
fn max_duration_is_the_time_limit() {
    let minutes = |value: &str| {
        parse_dstack_task(&format!(
            "type: task\ncommands: [x]\nmax_duration: {value}\n"
        ))
        .unwrap()
        .time_limit_min
    };
    assert_eq!(minutes("2h"), Some(120));
    assert_eq!(minutes("90s"), Some(2));
    assert_eq!(minutes("1d"), Some(1440));
    assert_eq!(minutes("3600"), Some(60));
    assert_eq!(minutes("\"3600\""), Some(60));
    assert_eq!(minutes("off"), None);
    assert_eq!(minutes("false"), None);
}

#[test]
fn gpu_specs() {
    let spec = GpuSpec::parse("A100:80GB:2").unwrap();
    assert_eq!(spec.names, vec!["A100".to_string()]);
    assert_eq!(
        spec.memory,
        Some(SizeRange {
            min_mb: Some(81_920),
            max_mb: Some(81_920)
        })
    );
    assert_eq!(spec.count, CountRange::exactly(2));
    assert_eq!(spec.single_kind().as_deref(), Some("a100"));

    let spec = GpuSpec::parse("H100").unwrap();
    assert_eq!((spec.names.len(), spec.count), (1, CountRange::at_least(1)));

    let spec = GpuSpec::parse("24GB..:2").unwrap();
    assert!(spec.names.is_empty());
    assert_eq!(spec.memory, Some(SizeRange::at_least_mb(24_576)));
    assert_eq!(spec.count, CountRange::exactly(2));

    let spec = GpuSpec::parse("A10G,A100:1").unwrap();
    assert_eq!(spec.names, vec!["A10G".to_string(), "A100".to_string()]);
    assert_eq!(spec.single_kind(), None);

    let spec = GpuSpec::parse("amd:MI300X:192GB:4").unwrap();
    assert_eq!(spec.vendor, Some(GpuVendor::Amd));
    assert_eq!(spec.to_string(), "amd:MI300X:192GB:4");
    assert_eq!(
        GpuSpec::parse("tpu:v5litepod").unwrap().vendor,
        Some(GpuVendor::Google)
    );
    assert_eq!(
        GpuSpec::parse("A100:40GB..80GB:1..2").unwrap().count,
        CountRange {
            min: Some(1),
            max: Some(2)
        }
    );
    assert_eq!(
        GpuSpec::parse(" A100 : 2 ").unwrap().count,
        CountRange::exactly(2)
    );

    for bad in [
        "",
        "A100::2",
        "A100:H100",
        "80GB:40GB",
        "1:2",
        "nvidia:amd",
        "A100,:1",
        "80XB",
        "2..1",
        "A100:1..2..3",
    ] {
        let error = GpuSpec::parse(bad).unwrap_err();
        assert!(
            matches!(&error, RequestError::GpuSpec { spec, .. } if spec == bad),
            "{bad:?}: {error:?}"
        );
    }
    for bad in [
        json!({"name": "A100", "colour": "green"}),
        json!({"count": "many"}),
        json!({"vendor": "acme"}),
        json!({"compute_capability": "eight"}),
        json!([1, 2]),
    ] {
        assert!(GpuSpec::from_value(&bad).is_err(), "{bad}");
    }
    assert!(GpuSpec::from_value(&json!({"compute_capability": 8.0})).is_ok());
}

#[test]
fn refuses_what_it_cannot_price() {
    let cases: &[(&str, &str)] = &[
        ("type: service\nport: 80\n", "only `type: task`"),
        ("commands: [x]\n", "`type: task` is missing"),
        ("- type: task\n", "a mapping"),
        ("type: task\nresources: {gpus: 2}\n", "unknown key \"gpus\""),
        ("type: task\nresources: {cpu: sparc:4}\n", "resources.cpu"),
        (
            "type: task\nresources: {memory: lots}\n",
            "resources.memory",
        ),
        (
            "type: task\nresources: {gpu: \"A100::2\"}\n",
            "invalid GPU spec",
        ),
        ("type: task\nnodes: 0\n", "nodes"),
        ("type: task\nnodes: two\n", "nodes"),
        ("type: task\nmax_duration: 1h30m\n", "max_duration"),
        ("type: task\nspot_policy: sometimes\n", "spot_policy"),
        ("type: task\ncommands: echo\n", "commands"),
        ("type: task\nenv: [\"=x\"]\n", "env"),
        ("type: task\n  bad: indentation\n: x", "not valid YAML"),
    ];
    for (yaml, has) in cases {
        let error = parse_dstack_task(yaml).unwrap_err();
        assert!(error.to_string().contains(has), "{yaml:?}: {error}");
    }
}

#[test]
fn travels_as_json_and_keeps_its_resources() {
    let request = parse_dstack_task(TRAIN).unwrap();
    let json = serde_json::to_value(&request).unwrap();
    // the task travels as the file's own content
    assert_eq!(json["dstack"]["resources"]["gpu"], "A100:80GB:2");
    let back: JobRequest = serde_json::from_value(json).unwrap();
    assert_eq!(back, request);
    back.validate().unwrap();

    // an API client may send only the task: the resources come from it
    let body = json!({
        "account": "ml",
        "dstack": {"type": "task", "commands": ["x"], "resources": {"gpu": "H100:4"}},
    });
    let request: JobRequest = serde_json::from_value(body).unwrap();
    request.validate().unwrap();
    assert_eq!(request.account.as_deref(), Some("ml"));
    assert_eq!(request.total_gpus(), 4);

    // and may not contradict it
    let body = json!({
        "nodes": 3,
        "dstack": {"type": "task", "commands": ["x"]},
    });
    let request: JobRequest = serde_json::from_value(body).unwrap();
    let error = request.validate().unwrap_err();
    assert!(error.to_string().contains("from the task"), "{error}");

    // a task that is not one is refused while reading the body
    let body = json!({"dstack": {"type": "service"}});
    assert!(serde_json::from_value::<JobRequest>(body).is_err());

    // a dstack request carries no script
    let mut request = parse_dstack_task(TRAIN).unwrap();
    request.script = Some("#!/bin/sh\n".into());
    assert!(request.validate().is_err());

    let task = DstackTask::parse_yaml(TRAIN).unwrap();
    assert_eq!(JobRequest::from_dstack(task).nodes, 2);
}
