//! Fetching EC2 on-demand prices from the AWS Price List API (`GetProducts`) with
//! `aws-sdk-pricing`. Reading the answers is `bursar_pricing::aws`; this is the network side:
//! the client (credentials from the environment, an optional endpoint, no retries, a timeout),
//! paging through `NextToken`, and errors an admin can act on.
//!
//! The SDK's default HTTPS client would bring aws-lc; bursar gives it hyper + rustls on ring,
//! the stack reqwest already uses.

use std::time::Duration;

use anyhow::{anyhow, bail};
use aws_sdk_pricing::config::retry::RetryConfig;
use aws_sdk_pricing::config::timeout::TimeoutConfig;
use aws_sdk_pricing::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_pricing::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_pricing::operation::get_products::GetProductsError;
use aws_sdk_pricing::types::{Filter, FilterType};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use bursar_pricing::aws::{ec2_on_demand_filters, parse_ec2_product, Ec2Product, EC2_SERVICE_CODE};

/// The region that hosts the Price List API endpoint bursar signs for. The API answers for
/// every region's prices from here (`regionCode` is a filter, not the endpoint).
pub const API_REGION: &str = "us-east-1";

/// The endpoint the SDK uses for [`API_REGION`] when none is configured.
pub const DEFAULT_ENDPOINT: &str = "https://api.pricing.us-east-1.amazonaws.com";

/// Most pages followed for one instance type before giving up (the filters leave one product,
/// so more than a handful means the endpoint is looping).
const MAX_PAGES: u32 = 100;

/// How to reach the API.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    /// `None`: the SDK's endpoint for [`API_REGION`].
    pub endpoint: Option<String>,
    /// Limit for one call, connect included.
    pub timeout: Duration,
}

impl AwsSettings {
    /// The endpoint as shown to people and recorded in the table's `source`.
    pub fn endpoint_shown(&self) -> &str {
        self.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT)
    }
}

/// Static credentials from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and
/// `AWS_SESSION_TOKEN` for temporary ones). bursar does not walk the SDK's default chain
/// (profiles, SSO, instance metadata): that needs `aws-config` and its STS/SSO clients.
pub fn credentials_from_env() -> anyhow::Result<Credentials> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(key), Some(secret)) => Ok(Credentials::new(
            key,
            secret,
            var("AWS_SESSION_TOKEN"),
            None,
            "environment",
        )),
        _ => bail!(
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and \
             AWS_SESSION_TOKEN for temporary ones); the IAM permission pricing:GetProducts is \
             all bursar needs"
        ),
    }
}

/// A Price List API client: signed for [`API_REGION`], one attempt per call (an admin reruns
/// `bursar prices refresh`; waiting out backoffs helps nobody), `settings.timeout` per call.
pub fn client(settings: &AwsSettings, credentials: Credentials) -> aws_sdk_pricing::Client {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(settings.timeout)
        .operation_timeout(settings.timeout)
        .build();
    let mut config = aws_sdk_pricing::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(API_REGION))
        .credentials_provider(credentials)
        .http_client(http)
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts);
    if let Some(endpoint) = &settings.endpoint {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_pricing::Client::from_conf(config.build())
}

/// What `GetProducts` returned for one instance type in one region, every page read.
#[derive(Debug)]
pub struct Fetched {
    pub products: Vec<Ec2Product>,
    pub pages: u32,
}

/// Every product `GetProducts` lists for Linux on-demand `instance` in `region`, following
/// `NextToken` to the last page.
pub async fn fetch_instance(
    client: &aws_sdk_pricing::Client,
    settings: &AwsSettings,
    instance: &str,
    region: &str,
) -> anyhow::Result<Fetched> {
    let filters = ec2_on_demand_filters(instance, region)
        .into_iter()
        .map(|(field, value)| {
            Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("cannot build the GetProducts filters: {e}"))?;
    let mut products = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = client
            .get_products()
            .service_code(EC2_SERVICE_CODE)
            .format_version("aws_v1")
            .set_filters(Some(filters.clone()))
            .max_results(100)
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| describe(e, settings, instance))?;
        pages += 1;
        for item in page.price_list() {
            products.push(
                parse_ec2_product(item)
                    .map_err(|e| anyhow!("GetProducts for {instance} in {region}: {e}"))?,
            );
        }
        match page.next_token().filter(|t| !t.is_empty()) {
            None => break,
            Some(next) if token.as_deref() == Some(next) => {
                bail!("GetProducts for {instance} returned the same NextToken twice ({next:?})")
            }
            Some(next) => token = Some(next.to_string()),
        }
        if pages >= MAX_PAGES {
            bail!("GetProducts for {instance} in {region}: still more pages after {MAX_PAGES}");
        }
    }
    Ok(Fetched { products, pages })
}

/// An SDK error in words an admin can act on.
fn describe(
    error: SdkError<GetProductsError>,
    settings: &AwsSettings,
    instance: &str,
) -> anyhow::Error {
    let endpoint = settings.endpoint_shown();
    match &error {
        SdkError::ServiceError(service) => {
            let e = service.err();
            let code = e.code().unwrap_or("unknown error");
            let message = e.message().unwrap_or("no message");
            let hint = match e {
                GetProductsError::AccessDeniedException(_) => {
                    "; the credentials need the IAM permission pricing:GetProducts \
                     (and must be valid: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                }
                GetProductsError::ThrottlingException(_) => {
                    "; AWS is limiting the request rate: run the refresh again in a minute"
                }
                GetProductsError::InternalErrorException(_) => "; try again later",
                _ => "",
            };
            anyhow!(
                "AWS Price List API at {endpoint} refused GetProducts for {instance}: \
                 {code}: {message}{hint}"
            )
        }
        SdkError::DispatchFailure(failure) => {
            let what = if failure.is_timeout() {
                "timed out connecting"
            } else if failure.is_io() {
                "cannot connect"
            } else {
                "cannot send the request"
            };
            anyhow!(
                "AWS Price List API at {endpoint}: {what} ({}) while asking for {instance}",
                causes(&error)
            )
        }
        SdkError::TimeoutError(_) => anyhow!(
            "AWS Price List API at {endpoint}: no answer for {instance} within {}s",
            settings.timeout.as_secs()
        ),
        SdkError::ResponseError(_) => anyhow!(
            "AWS Price List API at {endpoint}: unreadable answer for {instance} ({})",
            causes(&error)
        ),
        _ => anyhow!(
            "AWS Price List API at {endpoint}: GetProducts for {instance} failed: {}",
            DisplayErrorContext(&error)
        ),
    }
}

/// The messages of `error`'s sources, outermost first, each once: `io error: client error
/// (Connect): tcp connect error: Connection refused (os error 111)`.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = cause.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}
