//! A local stand-in for the AWS Price List API: awsJson1_1 over HTTP on 127.0.0.1, answering
//! `AWSPriceListService.GetProducts` from a catalogue of pages per instance type, recording
//! every request body, and failing on demand the way AWS does (HTTP 400 with `__type`).
//! Also: the bursar configuration and sacct records the price tests use, and a way to run
//! the real `bursar` binary.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

pub const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// An error to answer every request with: (HTTP status, `__type`, message).
pub type Failure = (u16, &'static str, &'static str);

#[derive(Default)]
struct Inner {
    /// instance type → pages of PriceList items (JSON text each).
    catalogue: HashMap<String, Vec<Vec<String>>>,
    failure: Option<Failure>,
    requests: Vec<Value>,
}

#[derive(Clone)]
pub struct FakeAws {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeAws {
    pub async fn start() -> FakeAws {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/", post(get_products))
            .with_state(inner.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeAws { url, inner }
    }

    /// `instance` answers with these pages (the last one without a NextToken).
    pub fn pages(&self, instance: &str, pages: Vec<Vec<String>>) {
        self.inner
            .lock()
            .unwrap()
            .catalogue
            .insert(instance.to_string(), pages);
    }

    pub fn fail_with(&self, failure: Option<Failure>) {
        self.inner.lock().unwrap().failure = failure;
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().requests.clone()
    }
}

fn aws_error(status: u16, code: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", CONTENT_TYPE)],
        json!({ "__type": code, "Message": message }).to_string(),
    )
        .into_response()
}

async fn get_products(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-amz-target") != Some("AWSPriceListService.GetProducts") {
        return aws_error(400, "UnknownOperationException", "expected GetProducts");
    }
    if header("content-type") != Some(CONTENT_TYPE) {
        return aws_error(400, "SerializationException", "expected x-amz-json-1.1");
    }
    if !header("authorization")
        .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/"))
    {
        return aws_error(403, "AccessDeniedException", "unsigned request");
    }
    let Ok(request) = serde_json::from_str::<Value>(&body) else {
        return aws_error(400, "SerializationException", "body is not JSON");
    };
    let mut inner = inner.lock().unwrap();
    inner.requests.push(request.clone());
    if let Some((status, code, message)) = inner.failure {
        return aws_error(status, code, message);
    }
    if request["ServiceCode"] != "AmazonEC2" || request["FormatVersion"] != "aws_v1" {
        return aws_error(
            400,
            "InvalidParameterException",
            "ServiceCode/FormatVersion",
        );
    }
    let filters = request["Filters"].as_array().cloned().unwrap_or_default();
    if filters.iter().any(|f| f["Type"] != "TERM_MATCH") {
        return aws_error(400, "InvalidParameterException", "only TERM_MATCH here");
    }
    let instance = filters
        .iter()
        .find(|f| f["Field"] == "instanceType")
        .and_then(|f| f["Value"].as_str())
        .unwrap_or_default()
        .to_string();
    let page: usize = match request["NextToken"].as_str() {
        None => 0,
        Some(token) => match token.strip_prefix("page-").and_then(|n| n.parse().ok()) {
            Some(n) => n,
            None => return aws_error(400, "InvalidNextTokenException", "bad token"),
        },
    };
    let pages = inner.catalogue.get(&instance).cloned().unwrap_or_default();
    let items = pages.get(page).cloned().unwrap_or_default();
    let mut answer = json!({ "FormatVersion": "aws_v1", "PriceList": items });
    if page + 1 < pages.len() {
        answer["NextToken"] = json!(format!("page-{}", page + 1));
    }
    (
        StatusCode::OK,
        [("content-type", CONTENT_TYPE)],
        answer.to_string(),
    )
        .into_response()
}

/// One PriceList item, shaped as AWS sends it (`constructed-fixtures` in the reference):
/// `prices` are the hourly on-demand prices its terms list (normally one).
pub fn item(
    instance: &str,
    sku: &str,
    vcpu: u32,
    memory: &str,
    gpu: u32,
    prices: &[&str],
) -> String {
    let mut dimensions = serde_json::Map::new();
    for (i, price) in prices.iter().enumerate() {
        dimensions.insert(
            format!("{sku}.JRTCKXETXF.6YS6EN2C{i:02}"),
            json!({
                "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                "description": format!("${price} per On Demand Linux {instance} Instance Hour"),
                "rateCode": format!("{sku}.JRTCKXETXF.6YS6EN2C{i:02}"),
                "pricePerUnit": { "USD": price }
            }),
        );
    }
    let mut attributes = json!({
        "instanceType": instance, "vcpu": vcpu.to_string(), "memory": memory,
        "operatingSystem": "Linux", "licenseModel": "No License required", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used", "marketoption": "OnDemand",
        "operation": "RunInstances", "usagetype": format!("BoxUsage:{instance}"),
        "regionCode": "us-east-1", "location": "US East (N. Virginia)",
    });
    if gpu > 0 {
        attributes["gpu"] = json!(gpu.to_string());
        attributes["gpuMemory"] = json!("40 GB");
    }
    json!({
        "product": { "productFamily": "Compute Instance", "attributes": attributes, "sku": sku },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                format!("{sku}.JRTCKXETXF"): {
                    "priceDimensions": dimensions, "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {}
                }
            },
            "Reserved": {
                format!("{sku}.4NA7Y494T4"): {
                    "priceDimensions": { format!("{sku}.4NA7Y494T4.2TG2D8R56U"): {
                        "unit": "Quantity", "pricePerUnit": { "USD": "1000" },
                        "description": "Upfront Fee" } },
                    "termAttributes": { "LeaseContractLength": "1yr" }
                }
            }
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z"
    })
    .to_string()
}

/// A cloud Slurm cluster whose partitions are priced by instance (node-hours × the hourly
/// price in effect at the job's start); amounts shown to the micro.
pub const CONFIG: &str = "\
database: sqlite://ledger.db
currencies:
  usd: {decimals: 6}
accounts:
  physics: {}
users:
  alice: {default_account: physics, accounts: [physics]}
clusters:
  cloud:
    kind: slurm
    currency: usd
    timezone: UTC
    partitions:
      cpu: {instance: c5.xlarge, region: us-east-1}
      gpu: {instance: p4d.24xlarge, region: us-east-1}
    default_partition: {instance: c5.xlarge, region: us-east-1}
";

/// A temporary bursar home: `bursar.yaml` ([`CONFIG`]) and the ledger beside it.
pub struct Home {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bursar.yaml"), CONFIG).unwrap();
        Home { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn config(&self) -> PathBuf {
        self.path("bursar.yaml")
    }

    pub fn database_url(&self) -> String {
        format!("sqlite://{}", self.path("ledger.db").display())
    }

    /// Runs the real `bursar` with this home's config and test AWS credentials.
    pub async fn bursar(&self, args: &[&str]) -> Run {
        self.bursar_env(args, &[]).await
    }

    pub async fn bursar_env(&self, args: &[&str], env: &[(&str, Option<&str>)]) -> Run {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_bursar"));
        command
            .arg("--config")
            .arg(self.config())
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("BURSAR_CONFIG")
            .env_remove("BURSAR_DATABASE")
            .env_remove("AWS_SESSION_TOKEN")
            .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .env("AWS_SECRET_ACCESS_KEY", "SECRETTEST")
            .env("USER", "price-admin");
        for (name, value) in env {
            match value {
                Some(v) => command.env(name, v),
                None => command.env_remove(name),
            };
        }
        let output = command.output().await.unwrap();
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}
