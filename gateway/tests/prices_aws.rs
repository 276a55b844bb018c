//! `bursar prices refresh --aws` against a local endpoint that speaks the Price List API's
//! protocol: a new table version is stored, jobs that started before its effective time keep
//! their old price and later ones get the new one, to the micro; and every way the fetch can
//! go wrong stores nothing and says why.

mod prices_support;

use bursar_ledger::{JournalQuery, Ledger};
use prices_support::{item, path_str, FakeAws, Home};
use serde_json::Value;

/// Jobs on the instance-priced cloud cluster, around the new version's effective time
/// (2026-06-01T00:00:00Z) and a site table's (2026-09-01):
/// - 101: c5.xlarge, started one second before → the shipped 0.17/h, 1.5 h = 0.255;
/// - 102: c5.xlarge, started exactly at it → AWS's 0.1983/h, 1.5 h = 0.29745;
/// - 103: two p4d.24xlarge nodes for 30 min in July → AWS's 23.456789/h × 2 × 0.5;
/// - 104: c5.xlarge, 1 h after the site table took effect → its 0.25.
const SACCT: &str = "\
JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|AllocTRES|AllocCPUS|ReqTRES|ReqMem|NNodes|NodeList|TimelimitRaw|JobName
101|101|cloud|physics|alice|cpu|normal|COMPLETED|0:0|0:0|2026-05-31T22:00:00|2026-05-31T23:59:59|2026-06-01T01:29:59|5400|billing=4,cpu=4,mem=8G,node=1|4|billing=4,cpu=4,mem=8G,node=1|8G|1|c-n1|120|before
102|102|cloud|physics|alice|cpu|normal|COMPLETED|0:0|0:0|2026-05-31T22:00:00|2026-06-01T00:00:00|2026-06-01T01:30:00|5400|billing=4,cpu=4,mem=8G,node=1|4|billing=4,cpu=4,mem=8G,node=1|8G|1|c-n2|120|at
103|103|cloud|physics|alice|gpu|normal|COMPLETED|0:0|0:0|2026-07-01T09:00:00|2026-07-01T10:00:00|2026-07-01T10:30:00|1800|billing=192,cpu=192,mem=2304G,node=2,gres/gpu=16|192|billing=192,cpu=192,mem=2304G,node=2,gres/gpu=16|2304G|2|g-n[1-2]|60|gpus
104|104|cloud|physics|alice|cpu|normal|COMPLETED|0:0|0:0|2026-09-02T08:00:00|2026-09-02T08:00:00|2026-09-02T09:00:00|3600|billing=4,cpu=4,mem=8G,node=1|4|billing=4,cpu=4,mem=8G,node=1|8G|1|c-n1|120|site
";

const SITE_TABLE: &str = "\
name: site
version: \"1\"
effective: 2026-09-01
currency: usd
source: negotiated rate
prices:
  - provider: aws
    region: us-east-1
    instance: c5.xlarge
    vcpus: 4
    memory_gib: 8
    price_per_hour: \"0.25\"
";

fn catalogue(aws: &FakeAws) {
    // c5.xlarge: an empty first page with a NextToken, the product on the second; a refresh
    // that stops after one page finds no price.
    aws.pages(
        "c5.xlarge",
        vec![
            vec![],
            vec![item(
                "c5.xlarge",
                "SKUC5XL",
                4,
                "8 GiB",
                0,
                &["0.1983000000"],
            )],
        ],
    );
    // p4d.24xlarge: the same product on three pages, one price.
    let p4d = item(
        "p4d.24xlarge",
        "SKUP4D",
        96,
        "1,152 GiB",
        8,
        &["23.4567890000"],
    );
    aws.pages(
        "p4d.24xlarge",
        vec![vec![p4d.clone()], vec![p4d.clone()], vec![p4d]],
    );
    // m5.xlarge: two offers that disagree.
    aws.pages(
        "m5.xlarge",
        vec![vec![
            item("m5.xlarge", "SKUM5A", 4, "16 GiB", 0, &["0.1920000000"]),
            item("m5.xlarge", "SKUM5B", 4, "16 GiB", 0, &["0.2100000000"]),
        ]],
    );
}

async fn refresh(home: &Home, aws: &FakeAws, extra: &[&str]) -> prices_support::Run {
    let mut args = vec![
        "prices",
        "refresh",
        "--aws",
        "--endpoint",
        &aws.url,
        "--instances",
        "c5.xlarge,p4d.24xlarge",
        "--effective",
        "2026-06-01T00:00:00Z",
    ];
    args.extend_from_slice(extra);
    home.bursar(&args).await
}

async fn stored_versions(home: &Home) -> Vec<Value> {
    let run = home.bursar(&["prices", "list", "--format", "json"]).await;
    assert!(run.ok, "{}", run.stderr);
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    list["price_tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["origin"] != "builtin")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refreshed_version_prices_jobs_from_its_effective_time_on() {
    let aws = FakeAws::start().await;
    catalogue(&aws);
    let home = Home::new();

    // A dry run shows the change and stores nothing.
    let dry = refresh(&home, &aws, &["--dry-run"]).await;
    assert!(dry.ok, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("dry run: nothing stored"),
        "{}",
        dry.stdout
    );
    assert!(stored_versions(&home).await.is_empty());

    let run = refresh(&home, &aws, &[]).await;
    assert!(run.ok, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "AWS Price List API at {}: 2 instance types in us-east-1 (5 pages)",
            aws.url
        )
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["INSTANCE", "CURRENT", "FROM", "NEW", "CHANGE"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        [
            "c5.xlarge",
            "0.17",
            "instances@2026-11",
            "0.1983",
            "+0.0283"
        ]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        [
            "p4d.24xlarge",
            "21.957642",
            "instances@2026-11",
            "23.456789",
            "+1.499147"
        ]
    );
    assert!(
        lines[4].starts_with("stored price table aws-ec2@")
            && lines[4].ends_with(": 2 prices in usd, effective 2026-06-01T00:00:00Z"),
        "{}",
        lines[4]
    );

    // What the endpoint was asked: the documented filters, every page.
    let requests = aws.requests();
    let c5: Vec<&Value> = requests
        .iter()
        .filter(|r| r["Filters"][0]["Value"] == "c5.xlarge")
        .collect();
    assert_eq!(c5.len(), 2 * 2, "two pages, dry run and real run");
    assert_eq!(c5[0].get("NextToken"), None);
    assert_eq!(c5[1]["NextToken"], "page-1");
    let filters: Vec<(String, String)> = c5[0]["Filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["Type"], "TERM_MATCH");
            (
                f["Field"].as_str().unwrap().to_string(),
                f["Value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("instanceType", "c5.xlarge"),
        ("regionCode", "us-east-1"),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
        ("marketoption", "OnDemand"),
        ("operation", "RunInstances"),
    ]
    .map(|(f, v)| (f.to_string(), v.to_string()));
    assert_eq!(filters, expected);
    assert_eq!(c5[0]["ServiceCode"], "AmazonEC2");
    assert_eq!(c5[0]["FormatVersion"], "aws_v1");
    assert_eq!(c5[0]["MaxResults"], 100);

    // The stored version, listed and shown.
    let versions = stored_versions(&home).await;
    assert_eq!(versions.len(), 1);
    let version = &versions[0];
    assert_eq!(version["name"], "aws-ec2");
    assert_eq!(version["origin"], "aws");
    assert_eq!(version["prices"], 2);
    assert_eq!(version["effective"], "2026-06-01T00:00:00Z");
    assert_eq!(version["imported_by"], "price-admin");
    let label = format!("aws-ec2@{}", version["version"].as_str().unwrap());
    let show = home
        .bursar(&["prices", "show", &label, "--format", "json"])
        .await;
    assert!(show.ok, "{}", show.stderr);
    let shown: Value = serde_json::from_str(&show.stdout).unwrap();
    let p4d = &shown["prices"][1];
    assert_eq!(p4d["instance"], "p4d.24xlarge");
    assert_eq!(p4d["price_per_hour"], "23.456789");
    assert_eq!(
        (p4d["vcpus"].as_u64(), p4d["gpus"].as_u64()),
        (Some(96), Some(8))
    );
    assert_eq!(p4d["memory_gib"], "1152");
    assert_eq!(p4d["gpu_memory_gib"], "40");
    assert_eq!(p4d["gpu_model"], "A100-40GB", "kept from the shipped table");
    assert!(
        p4d["source"].as_str().unwrap().contains("sku SKUP4D"),
        "{}",
        p4d["source"]
    );
    assert!(shown["source"].as_str().unwrap().contains(&aws.url));

    // A site table on top, from a file.
    let site = home.write("site.yaml", SITE_TABLE);
    let import = home.bursar(&["prices", "import", path_str(&site)]).await;
    assert!(import.ok, "{}", import.stderr);
    assert_eq!(
        import.stdout,
        "stored price table site@1: 1 prices in usd, effective 2026-09-01T00:00:00Z\n"
    );

    // The jobs, imported through the real binary, priced by the version in effect at start.
    let sacct = home.write("cloud.psv", SACCT);
    let run = home
        .bursar(&["import", "--cluster", "cloud", path_str(&sacct)])
        .await;
    assert!(run.ok, "{}", run.stderr);
    let ledger = Ledger::open(&home.database_url()).await.unwrap();
    let entries = ledger
        .journal(&JournalQuery {
            cluster: Some("cloud".to_string()),
            ..JournalQuery::default()
        })
        .await
        .unwrap();
    let charged: Vec<(String, i64, String)> = entries
        .iter()
        .map(|e| {
            (
                e.job_id.clone().unwrap(),
                e.amount,
                e.price_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    let expected: Vec<(String, i64, String)> = vec![
        ("101".into(), 255_000, "instances@2026-11".into()),
        ("102".into(), 297_450, label.clone()),
        ("103".into(), 23_456_789, label.clone()),
        ("104".into(), 250_000, "site@1".into()),
    ];
    assert_eq!(charged, expected);

    // The changes are in the audit log, by the login that made them.
    let audit = ledger.audit_log(None).await.unwrap();
    let actions: Vec<(&str, &str, &str)> = audit
        .iter()
        .map(|a| (a.action.as_str(), a.target.as_str(), a.actor.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("prices.import", "site@1", "price-admin"),
            ("prices.refresh", label.as_str(), "price-admin"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_process_picks_up_new_versions() {
    let aws = FakeAws::start().await;
    catalogue(&aws);
    let home = Home::new();
    let mut config = bursar_gateway::config::Config::load(Some(&home.config())).unwrap();
    config.database = Some(home.database_url());
    let app = bursar_gateway::app::App::open(config).await.unwrap();
    let june = 1_780_272_000; // 2026-06-01T00:00:00Z
    let price = |app: &bursar_gateway::app::App| {
        app.price_book()
            .lookup("aws", "us-east-1", "c5.xlarge", june)
            .map(|q| (q.price_per_hour.to_string(), q.version.to_string()))
            .unwrap()
    };
    assert_eq!(price(&app).0, "0.17");
    assert!(!app.prices.reload_if_changed(&app.ledger).await.unwrap());

    let run = refresh(&home, &aws, &[]).await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(price(&app).0, "0.17", "not reloaded yet");
    assert!(app.prices.reload_if_changed(&app.ledger).await.unwrap());
    let (new, version) = price(&app);
    assert_eq!(new, "0.1983");
    assert!(version.starts_with("aws-ec2@"), "{version}");
    assert_eq!(
        app.price_book()
            .lookup("aws", "us-east-1", "c5.xlarge", june - 1)
            .unwrap()
            .version
            .as_ref(),
        "instances@2026-11"
    );
    assert!(!app.prices.reload_if_changed(&app.ledger).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_name_the_cause_and_store_nothing() {
    let aws = FakeAws::start().await;
    catalogue(&aws);
    let home = Home::new();

    let run = home
        .bursar(&[
            "prices",
            "refresh",
            "--aws",
            "--endpoint",
            &aws.url,
            "--instances",
            "c5.xlarge,m5.xlarge",
        ])
        .await;
    assert!(!run.ok);
    assert_eq!(
        run.stderr,
        "bursar: ambiguous price for m5.xlarge in us-east-1: 0.192/h, 0.21/h \
         (products SKUM5A, SKUM5B); nothing stored\n"
    );

    let run = home
        .bursar(&[
            "prices",
            "refresh",
            "--aws",
            "--endpoint",
            &aws.url,
            "--instances",
            "t3.nano",
        ])
        .await;
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("the Price List API has no Linux on-demand price for t3.nano in us-east-1"),
        "{}",
        run.stderr
    );

    aws.fail_with(Some((
        400,
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/bursar is not authorized to perform: pricing:GetProducts",
    )));
    let run = refresh(&home, &aws, &[]).await;
    assert!(!run.ok);
    assert_eq!(
        run.stderr,
        format!(
            "bursar: AWS Price List API at {} refused GetProducts for c5.xlarge: \
             AccessDeniedException: User: arn:aws:iam::123456789012:user/bursar is not \
             authorized to perform: pricing:GetProducts; the credentials need the IAM \
             permission pricing:GetProducts (and must be valid: check AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY)\n",
            aws.url
        )
    );

    aws.fail_with(Some((400, "ThrottlingException", "Rate exceeded")));
    let before = aws.requests().len();
    let run = refresh(&home, &aws, &[]).await;
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("ThrottlingException: Rate exceeded; AWS is limiting the request rate"),
        "{}",
        run.stderr
    );
    assert_eq!(aws.requests().len(), before + 1, "no retries");
    aws.fail_with(None);

    // Nothing listens on this port: bound, never listening, kept for the test.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    let run = home
        .bursar(&["prices", "refresh", "--aws", "--endpoint", &url])
        .await;
    assert!(!run.ok);
    assert!(
        run.stderr.starts_with(&format!(
            "bursar: AWS Price List API at {url}: cannot connect ("
        )) && run.stderr.contains("onnection refused"),
        "{}",
        run.stderr
    );

    let run = home
        .bursar_env(
            &["prices", "refresh", "--aws", "--endpoint", &aws.url],
            &[("AWS_ACCESS_KEY_ID", None)],
        )
        .await;
    assert!(!run.ok);
    assert!(
        run.stderr
            .starts_with("bursar: no AWS credentials: set AWS_ACCESS_KEY_ID"),
        "{}",
        run.stderr
    );

    assert!(stored_versions(&home).await.is_empty());
    let ledger = Ledger::open(&home.database_url()).await.unwrap();
    assert!(ledger.audit_log(None).await.unwrap().is_empty());
}
