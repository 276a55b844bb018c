//! Quotes: eligibility in words, exact estimates (the numbers `ClusterPricing::estimate`
//! gives), balances after, association checks, pinning.

mod admission_support;

use admission_support::*;
use bursar_gateway::admission::{AdmissionError, Funding};
use bursar_gateway::auth::Role;
use serde_json::json;

#[tokio::test]
async fn estimates_are_the_charge_code_and_balances_after_cover_the_chain() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    f.allocate("org", "su", 1_000_000_000).await;
    f.allocate("org", "usd", 50_000_000).await;
    let request = job();
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    assert_eq!(quote.account, "physics");
    assert_eq!(quote.chain, ["physics", "org", "root"]);
    let names: Vec<&str> = quote.clusters.iter().map(|q| q.cluster.as_str()).collect();
    assert_eq!(names, ["onprem", "cloud"], "route order: routing.prefer");

    // onprem: 4 CPUs + 4 × 1000 MB (DefMemPerCPU) for the partition's default hour.
    let onprem = quote.cluster("onprem").unwrap();
    assert!(onprem.eligible(), "{:?}", onprem.reasons);
    assert_eq!(onprem.partition.as_deref(), Some("batch"));
    assert_eq!(onprem.time_limit_min, Some(60));
    let expected = f.estimate("onprem", "batch", &request, Some(1000), 60);
    assert_eq!(onprem.estimate, Some(expected));
    // (4 × 1.0 + 3.90625 GiB × 0.25) × 1 h = 4.9765625 → half to even
    assert_eq!(expected, 4_976_562);
    assert_eq!(
        onprem.remaining_after,
        [
            ("physics".to_string(), 100_000_000 - expected),
            ("org".to_string(), 1_000_000_000 - expected)
        ]
    );

    // cloud: dollars, 2000 MB per CPU, default 2 h.
    let cloud = quote.cluster("cloud").unwrap();
    let expected_usd = f.estimate("cloud", "batch", &request, Some(2000), 120);
    assert_eq!(cloud.estimate, Some(expected_usd));
    assert_eq!(expected_usd, 422_812); // (0.17 + 7.8125 × 0.0053) × 2 = 0.4228125
    assert_eq!(
        cloud.remaining_after,
        [("org".to_string(), 50_000_000 - expected_usd)]
    );

    let body = quote.to_json();
    assert_eq!(
        body[0],
        json!({
            "cluster": "onprem", "currency": "su", "eligible": true, "affordable": true,
            "chosen": true,
            "reasons": [], "partition": "batch", "time_limit_min": 60, "estimate": "4.976562",
            "remaining_after": [
                {"account": "physics", "remaining": "95.023438"},
                {"account": "org", "remaining": "995.023438"}
            ]
        })
    );
    assert_eq!(body[1]["estimate"], "0.422812");
    assert_eq!(body[1]["chosen"], false);
    assert_eq!(quote.preview().cluster.as_deref(), Some("onprem"));
}

#[tokio::test]
async fn qos_factors_and_explicit_limits_price_as_charges_do() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    let request = job_with(json!({"qos": "premium", "time_limit_min": 90,
        "memory": {"per_node_mb": 8192}, "partition": "gpu",
        "gpus": {"count": 2, "kind": "h100"}}));
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert!(onprem.fits(), "{:?}", onprem.reasons);
    let expected = f.estimate("onprem", "gpu", &request, None, 90);
    assert_eq!(onprem.estimate, Some(expected));
    // (4 CPUs + 8 GiB × 0.25 + 2 h100 × 8.0) × 1.5 h × 2 (premium) = 66
    assert_eq!(expected, 66_000_000);
}

#[tokio::test]
async fn no_time_limit_takes_the_default_and_unlimited_the_maximum() {
    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000_000).await;
    let minutes = |request| {
        let f = &f;
        async move {
            let quote = f.admission.quote(&alice(), &request).await.unwrap();
            let onprem = quote.cluster("onprem").unwrap();
            assert!(onprem.fits(), "{:?}", onprem.reasons);
            (onprem.time_limit_min, onprem.estimate)
        }
    };
    // batch on onprem: default_time 1h, max_time 2d, as Slurm's DefaultTime and MaxTime.
    let (default, at_default) = minutes(job_with(json!({"clusters": ["onprem"]}))).await;
    assert_eq!(default, Some(60));
    let unlimited = job_with(json!({"clusters": ["onprem"], "time_unlimited": true}));
    let (max, at_max) = minutes(unlimited.clone()).await;
    assert_eq!(
        max,
        Some(2 * 24 * 60),
        "-t UNLIMITED runs as long as the partition allows"
    );
    assert_eq!(
        at_max,
        Some(f.estimate("onprem", "batch", &unlimited, Some(1000), 2 * 24 * 60))
    );
    // 48 hours, rounded once (not 48 rounded hours)
    assert_eq!(at_default, Some(4_976_562), "4.9765625 half to even");
    assert_eq!(at_max, Some(238_875_000));
    // Both at once is not a request.
    let both: bursar_gateway::request::JobRequest =
        serde_json::from_value(json!({"time_unlimited": true, "time_limit_min": 5})).unwrap();
    assert!(both.validate().is_err());
}

#[tokio::test]
async fn every_rejection_is_explained() {
    let f = fixture().await;
    f.allocate("physics", "su", 1_000_000).await;
    let quote = |request| {
        let f = &f;
        async move { f.admission.quote(&alice(), &request).await.unwrap() }
    };

    // No such partition.
    let q = quote(job_with(json!({"partition": "huge"}))).await;
    let onprem = q.cluster("onprem").unwrap();
    assert!(!onprem.eligible());
    assert_eq!(
        onprem.reasons,
        ["partition huge does not exist on onprem (partitions there: batch, debug, gpu)"]
    );
    assert_eq!(onprem.estimate, None);

    // GPU type not there; no GPUs at all.
    let q = quote(job_with(
        json!({"partition": "gpu", "gpus": {"count": 1, "kind": "a100"}}),
    ))
    .await;
    assert_eq!(
        q.cluster("onprem").unwrap().reasons,
        ["GPU type a100 is not available in partition gpu on onprem (it has: h100)"]
    );
    assert!(q.cluster("cloud").unwrap().fits(), "cloud has a100s");
    let q = quote(job_with(json!({"gpus": {"count": 1}}))).await;
    assert_eq!(
        q.cluster("onprem").unwrap().reasons,
        ["partition batch on onprem has no GPUs"]
    );

    // No time limit anywhere.
    let q = quote(job_with(
        json!({"partition": "debug", "clusters": ["onprem"]}),
    ))
    .await;
    assert_eq!(
        q.cluster("onprem").unwrap().reasons,
        ["no time limit given and partition debug on onprem has no maximum; pass -t"]
    );
    // An explicit UNLIMITED has no price where the partition has no maximum.
    let q = quote(job_with(
        json!({"partition": "debug", "clusters": ["onprem"], "time_unlimited": true}),
    ))
    .await;
    assert_eq!(
        q.cluster("onprem").unwrap().reasons,
        [
            "the job asks for no time limit (UNLIMITED) and partition debug on onprem has no \
          maximum, so it has no price; pass -t"
        ]
    );

    // Limits.
    let q = quote(job_with(
        json!({"nodes": 3, "ntasks": 3, "time_limit_min": 4320}),
    ))
    .await;
    assert_eq!(
        q.cluster("onprem").unwrap().reasons,
        [
            "the job asks for 3 nodes; partition batch on onprem allows at most 2",
            "the time limit 3-00:00:00 is longer than the 2-00:00:00 partition batch on onprem allows"
        ]
    );

    // Money: no usd anywhere on the chain; too few su.
    let q = quote(job()).await;
    let cloud = q.cluster("cloud").unwrap();
    assert!(cloud.fits());
    assert_eq!(cloud.funding, Funding::NoAllocation);
    assert_eq!(cloud.affordable(), Some(false));
    assert_eq!(
        cloud.all_reasons("physics"),
        ["no allocation in usd for physics or its parents: no access to clusters billed in usd"]
    );
    let onprem = q.cluster("onprem").unwrap();
    assert!(onprem.fits() && !onprem.eligible());
    assert_eq!(onprem.affordable(), Some(false));
    assert_eq!(
        onprem.all_reasons("physics"),
        ["physics has 1.00 su left, the job needs 4.976562 su"]
    );
    let body = q.to_json();
    assert_eq!(body[0]["affordable"], false);
    assert_eq!(
        body[0]["reasons"],
        json!(["physics has 1.00 su left, the job needs 4.976562 su"])
    );
    assert_eq!(body[0]["remaining_after"][0]["remaining"], "-3.976562");
    assert!(body
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["chosen"] == false));
    assert_eq!(q.preview().cluster, None);
}

#[tokio::test]
async fn a_short_ancestor_makes_the_job_unaffordable() {
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    f.allocate("org", "su", 2_000_000).await;
    let q = f.admission.quote(&alice(), &job()).await.unwrap();
    let onprem = q.cluster("onprem").unwrap();
    assert_eq!(
        onprem.funding,
        Funding::Short {
            account: "org".into(),
            remaining: 2_000_000
        }
    );
    assert_eq!(
        onprem.all_reasons("physics"),
        ["org has 2.00 su left, the job needs 4.976562 su"]
    );
}

#[tokio::test]
async fn associations_are_checked_for_everyone() {
    let f = fixture().await;
    let err = f
        .admission
        .quote(&alice(), &job_with(json!({"account": "chemistry"})))
        .await
        .unwrap_err();
    assert!(matches!(err, AdmissionError::NoAssociation { .. }), "{err}");
    assert_eq!((err.status(), err.code()), (403, "no_association"));
    // Admins act as themselves: no association, no quote.
    let err = f
        .admission
        .quote(
            &principal("root-admin", Role::Admin),
            &job_with(json!({"account": "physics"})),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "no_association");
    // A user without a default account must name one.
    let err = f
        .admission
        .quote(&principal("mallory", Role::User), &job())
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    // carol charges either of hers.
    let q = f
        .admission
        .quote(
            &principal("carol", Role::User),
            &job_with(json!({"account": "chemistry"})),
        )
        .await
        .unwrap();
    assert_eq!(q.account, "chemistry");
    assert_eq!(q.clusters[0].cluster, "cloud", "routing.accounts.chemistry");
}

#[tokio::test]
async fn pinned_quotes_cover_only_the_pinned_clusters() {
    let f = fixture().await;
    let q = f
        .admission
        .quote(&alice(), &job_with(json!({"clusters": ["cloud"]})))
        .await
        .unwrap();
    assert_eq!(q.clusters.len(), 1);
    assert_eq!(q.clusters[0].cluster, "cloud");
    let err = f
        .admission
        .quote(&alice(), &job_with(json!({"clusters": ["mars"]})))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    assert!(err.to_string().contains("unknown cluster mars"), "{err}");
}

#[tokio::test]
async fn malformed_requests_are_422() {
    let f = fixture().await;
    let err = f
        .admission
        .quote(&alice(), &job_with(json!({"ntasks": 1, "nodes": 2})))
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (422, "invalid_request"));
}

/// `-L/--licenses`: a cluster whose configuration lists its licenses is eligible only for
/// those, in the counts it has; one that lists none lets Slurm decide. The estimate charges
/// the licenses as the partition's weights do, and the job goes to the cluster with them.
#[tokio::test]
async fn licenses_route_to_the_clusters_that_have_them() {
    let config = CONFIG
        .replacen(
            r#"batch: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0"}"#,
            r#"batch: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.5"}"#,
            1,
        )
        .replacen(
            "    submit:\n      default_partition: batch\n",
            "    submit:\n      licenses: {matlab: 4, fluent@flexlm: 2}\n      default_partition: batch\n",
            1,
        );
    assert_ne!(config, CONFIG);
    let f = fixture_over(&config).await;
    f.allocate("physics", "su", 100_000_000).await;
    f.allocate("org", "usd", 100_000_000).await;
    let licensed = |licenses: &str| job_with(json!({"licenses": licenses}));

    let request = licensed("matlab:2");
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert!(onprem.eligible(), "{:?}", onprem.reasons);
    let expected = f.estimate("onprem", "batch", &request, Some(1000), 60);
    assert_eq!(onprem.estimate, Some(expected));
    // 4.9765625 su for the CPUs and memory, + 2 matlab × 2.5 for the hour
    assert_eq!(expected, 9_976_562);
    // cloud's weights do not charge for licenses: its estimate is the job's without them
    assert_eq!(
        quote.cluster("cloud").unwrap().estimate,
        Some(f.estimate("cloud", "batch", &job(), Some(2000), 120))
    );

    for (licenses, reason) in [
        (
            "matlab:5",
            "the job asks for 5 matlab licenses; onprem has 4",
        ),
        (
            "ansys",
            "license ansys does not exist on onprem (licenses there: fluent@flexlm, matlab)",
        ),
        // names are Slurm's, case and all
        ("MATLAB", "license MATLAB does not exist on onprem"),
    ] {
        let quote = f
            .admission
            .quote(&alice(), &licensed(licenses))
            .await
            .unwrap();
        let onprem = quote.cluster("onprem").unwrap();
        assert!(!onprem.eligible(), "{licenses}");
        assert!(
            onprem.reasons.iter().any(|r| r.starts_with(reason)),
            "{licenses}: {:?}",
            onprem.reasons
        );
        assert!(quote.cluster("cloud").unwrap().eligible(), "{licenses}");
    }

    // The job goes where its licenses are: onprem for 4, cloud (which lists none) for 5.
    let fits = f
        .admission
        .submit(&alice(), licensed("matlab:4,fluent@flexlm"), None)
        .await
        .unwrap();
    assert_eq!(fits.cluster, "onprem");
    let sent = f.onprem.submitted().pop().unwrap();
    assert_eq!(
        sent.request
            .licenses
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("matlab:4,fluent@flexlm:1")
    );
    let bursts = f
        .admission
        .submit(&alice(), licensed("matlab:5"), None)
        .await
        .unwrap();
    assert_eq!(bursts.cluster, "cloud");
}

/// `--mincpus`: priced for that many CPUs on each node (their DefMemPerCPU with them) where the
/// cluster allocates them (Slurm up to 24.11.0, and while its release is not known), for the
/// tasks' alone where it only picks nodes by it (24.11.1 on); not eligible where the
/// partition's nodes have fewer.
#[tokio::test]
async fn cpus_per_node_are_priced_and_checked_against_the_nodes() {
    let config = CONFIG.replacen(
        "batch: {max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 2}",
        "batch: {max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 2, node_cpus: 8, node_mem_mb: 16000}",
        1,
    );
    assert_ne!(config, CONFIG);
    let f = fixture_over(&config).await;
    f.allocate("physics", "su", 100_000_000).await;
    let request = job_with(json!({"ntasks": 1, "min_cpus_per_node": 6, "clusters": ["onprem"]}));
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    let onprem = quote.cluster("onprem").unwrap();
    assert!(onprem.eligible(), "{:?}", onprem.reasons);
    // 6 CPUs + 6 × 1000 MB for the hour: 6 + 5.859375 × 0.25 = 7.46484375 → half to even
    assert_eq!(onprem.estimate, Some(7_464_844));
    assert_eq!(
        onprem.estimate,
        Some(f.estimate("onprem", "batch", &request, Some(1000), 60))
    );
    // A cluster that only picks nodes by it: the tasks' CPUs, as without it.
    *f.onprem.min_cpus.lock().unwrap() = Some(false);
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    let plain = job_with(json!({"ntasks": 1, "clusters": ["onprem"]}));
    assert_eq!(
        quote.cluster("onprem").unwrap().estimate,
        Some(f.estimate("onprem", "batch", &plain, Some(1000), 60))
    );
    assert_eq!(quote.cluster("onprem").unwrap().estimate, Some(1_244_141));
    *f.onprem.min_cpus.lock().unwrap() = Some(true);
    let quote = f.admission.quote(&alice(), &request).await.unwrap();
    assert_eq!(quote.cluster("onprem").unwrap().estimate, Some(7_464_844));
    let too_many = job_with(json!({"min_cpus_per_node": 9, "clusters": ["onprem"]}));
    let quote = f.admission.quote(&alice(), &too_many).await.unwrap();
    assert_eq!(
        quote.cluster("onprem").unwrap().reasons,
        ["--mincpus asks for 9 CPUs on each node; the nodes of partition batch on onprem have 8"]
    );
}

/// Nodes of two threads per core (`node_threads_per_core`): a job is priced for the whole cores
/// slurmctld allocates (`-n 3`: 4 CPUs), `--hint=nomultithread` for a core per CPU asked for
/// (6 CPUs, memory per CPU for the 3 asked); a partition that does not say is not eligible for
/// the hint, nor one whose cores have fewer threads than the job asks for.
#[tokio::test]
async fn threads_per_core_price_whole_cores_and_decide_eligibility() {
    let config = CONFIG.replacen(
        "batch: {max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 2}",
        "batch: {max_time: 2d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 2, node_threads_per_core: 2}",
        1,
    );
    assert_ne!(config, CONFIG);
    let f = fixture_over(&config).await;
    f.allocate("physics", "su", 100_000_000).await;
    let estimate = |quote: &bursar_gateway::admission::Quote| {
        let onprem = quote.cluster("onprem").unwrap();
        assert!(onprem.eligible(), "{:?}", onprem.reasons);
        onprem.estimate.unwrap()
    };
    // 3 tasks: 2 cores, 4 CPUs and 4 × 1000 MB: 4 + 3.90625 × 0.25 = 4.9765625 → half to even
    let plain = job_with(json!({"ntasks": 3, "clusters": ["onprem"]}));
    assert_eq!(
        estimate(&f.admission.quote(&alice(), &plain).await.unwrap()),
        4_976_562
    );
    // a core per task: 6 CPUs, 3 × 1000 MB: 6 + 2.9296875 × 0.25 = 6.732421875
    let hinted = job_with(json!({"ntasks": 3, "hint": "nomultithread", "clusters": ["onprem"]}));
    assert_eq!(
        estimate(&f.admission.quote(&alice(), &hinted).await.unwrap()),
        6_732_422
    );
    // a core per task, memory for every thread: 6 + 5.859375 × 0.25 = 7.46484375
    let one_task = job_with(json!({"ntasks": 3, "ntasks_per_core": 1, "clusters": ["onprem"]}));
    assert_eq!(
        estimate(&f.admission.quote(&alice(), &one_task).await.unwrap()),
        7_464_844
    );
    let four = job_with(json!({"threads_per_core": 4, "clusters": ["onprem"]}));
    let quote = f.admission.quote(&alice(), &four).await.unwrap();
    assert_eq!(
        quote.cluster("onprem").unwrap().reasons,
        ["the job asks for 4 threads per core; the nodes of partition batch on onprem have 2"]
    );
    // A plane layout: priced as any layout, and run on the one node priced; over two nodes
    // its planes could round up to more cores than priced, unless each node's tasks are set.
    let plane = |extra: serde_json::Value| {
        let mut job = json!({"ntasks": 4, "slurm": {"distribution": "plane=3"},
            "clusters": ["onprem"]});
        job.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        job_with(job)
    };
    let one_node = f
        .admission
        .quote(&alice(), &plane(json!({})))
        .await
        .unwrap();
    let onprem = one_node.cluster("onprem").unwrap();
    assert!(onprem.eligible() && onprem.pin_nodes, "{onprem:?}");
    let plain_four = job_with(json!({"ntasks": 4, "clusters": ["onprem"]}));
    let unlaid = f.admission.quote(&alice(), &plain_four).await.unwrap();
    assert_eq!(onprem.estimate, unlaid.cluster("onprem").unwrap().estimate);
    assert!(!unlaid.cluster("onprem").unwrap().pin_nodes);
    let two_nodes = f
        .admission
        .quote(&alice(), &plane(json!({"nodes": 2})))
        .await
        .unwrap();
    let reasons = &two_nodes.cluster("onprem").unwrap().reasons;
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("-m plane lays tasks out"),
        "{reasons:?}"
    );
    let per_node = plane(json!({"nodes": 2, "ntasks_per_node": 2}));
    assert!(f
        .admission
        .quote(&alice(), &per_node)
        .await
        .unwrap()
        .cluster("onprem")
        .unwrap()
        .eligible());
    // with GRES slurmctld does not cap a node's tasks by --ntasks-per-node
    let gres = plane(json!({"nodes": 2, "ntasks_per_node": 2, "other_gres": ["shard:1"]}));
    let quote = f.admission.quote(&alice(), &gres).await.unwrap();
    let reasons = &quote.cluster("onprem").unwrap().reasons;
    assert!(
        reasons.iter().any(|r| r.ends_with("; pass -N 1")),
        "{reasons:?}"
    );

    // Not declared: CPUs as asked (3 + 2.9296875 × 0.25), and the hint has no price.
    let f = fixture().await;
    f.allocate("physics", "su", 100_000_000).await;
    assert_eq!(
        estimate(&f.admission.quote(&alice(), &plain).await.unwrap()),
        3_732_422
    );
    let quote = f.admission.quote(&alice(), &hinted).await.unwrap();
    assert_eq!(
        quote.cluster("onprem").unwrap().reasons,
        [
            "--hint=nomultithread changes how many CPUs Slurm allocates by the threads of each \
          core, and partition batch on onprem does not say how many its nodes have \
          (node_threads_per_core in bursar's configuration)"
        ]
    );
}
