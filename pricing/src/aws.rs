//! The AWS Price List API's answers, read exactly: what `GetProducts` must be asked for plain
//! Linux on-demand EC2 prices, and how one `PriceList` item becomes an instance price.
//!
//! Pure: the fetching (the SDK, credentials, the network) lives in the gateway
//! (`gateway/src/prices/aws.rs`); this module only reads the JSON text it is handed.
//!
//! An item is one product (`product.attributes`) with its terms; the hourly on-demand price is
//! `terms.OnDemand.*.priceDimensions.*` with `unit: Hrs`, in `pricePerUnit.USD` (a decimal
//! string such as `"0.1700000000"`). The offer and rate codes are not hard-coded.

use serde_json::Value;

use crate::decimal::Decimal;

/// The service code of EC2 in the Price List API.
pub const EC2_SERVICE_CODE: &str = "AmazonEC2";

/// The `TERM_MATCH` filters (field, value) that leave one product per instance type and
/// region: Linux, shared tenancy, no pre-installed software, used capacity (not a capacity
/// reservation), on-demand market, plain `RunInstances` (Windows and the licensed variants
/// are other operations).
pub fn ec2_on_demand_filters(instance: &str, region: &str) -> Vec<(&'static str, String)> {
    vec![
        ("instanceType", instance.to_string()),
        ("regionCode", region.to_string()),
        ("operatingSystem", "Linux".to_string()),
        ("tenancy", "Shared".to_string()),
        ("preInstalledSw", "NA".to_string()),
        ("capacitystatus", "Used".to_string()),
        ("marketoption", "OnDemand".to_string()),
        ("operation", "RunInstances".to_string()),
    ]
}

/// One EC2 product with its hourly on-demand price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Product {
    pub instance: String,
    pub region: String,
    pub sku: String,
    pub vcpus: u32,
    pub memory_gib: Decimal,
    pub gpus: u32,
    /// Per GPU, when the product says (`gpuMemory: "24 GB"`).
    pub gpu_memory_gib: Option<Decimal>,
    /// Every distinct hourly price the product's on-demand terms list (normally one).
    pub hourly_usd: Vec<Decimal>,
    /// The offer's `publicationDate` and `version`, for provenance.
    pub publication_date: Option<String>,
    pub version: Option<String>,
}

/// Reads one `PriceList` element (a JSON document in a string).
pub fn parse_ec2_product(text: &str) -> Result<Ec2Product, String> {
    let item: Value =
        serde_json::from_str(text).map_err(|e| format!("a PriceList item is not JSON: {e}"))?;
    let attributes = item
        .pointer("/product/attributes")
        .and_then(Value::as_object)
        .ok_or("a PriceList item has no product.attributes")?;
    let attribute = |name: &str| attributes.get(name).and_then(Value::as_str);
    let sku = item
        .pointer("/product/sku")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let instance = attribute("instanceType")
        .ok_or_else(|| format!("product {sku} has no instanceType"))?
        .to_string();
    let at = |what: &str| format!("product {sku} ({instance}): {what}");
    let region = attribute("regionCode")
        .ok_or_else(|| at("no regionCode"))?
        .to_string();
    let vcpus = attribute("vcpu")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or_else(|| at(&format!("vcpu {:?} is not a count", attribute("vcpu"))))?;
    let memory_gib = attribute("memory")
        .and_then(|m| quantity(m, "GiB"))
        .ok_or_else(|| at(&format!("memory {:?} is not N GiB", attribute("memory"))))?;
    let gpus = match attribute("gpu") {
        None => 0,
        Some(g) => g
            .trim()
            .parse::<u32>()
            .map_err(|_| at(&format!("gpu {g:?} is not a count")))?,
    };
    // "24 GB" per GPU; "NA" and the like mean the product does not say.
    let gpu_memory_gib = attribute("gpuMemory").and_then(|m| {
        quantity(m, "GB")
            .or_else(|| quantity(m, "GiB"))
            .filter(|_| gpus > 0)
    });

    let mut hourly_usd: Vec<Decimal> = Vec::new();
    let terms = item
        .pointer("/terms/OnDemand")
        .and_then(Value::as_object)
        .ok_or_else(|| at("no terms.OnDemand"))?;
    for term in terms.values() {
        let Some(dimensions) = term.get("priceDimensions").and_then(Value::as_object) else {
            continue;
        };
        for dimension in dimensions.values() {
            if dimension.get("unit").and_then(Value::as_str) != Some("Hrs") {
                continue;
            }
            let usd = dimension
                .pointer("/pricePerUnit/USD")
                .and_then(Value::as_str)
                .ok_or_else(|| at("an hourly price dimension has no pricePerUnit.USD"))?;
            let price: Decimal = usd
                .parse()
                .map_err(|e| at(&format!("pricePerUnit.USD {usd:?}: {e}")))?;
            if price.is_negative() {
                return Err(at(&format!("pricePerUnit.USD {usd:?} is negative")));
            }
            if !hourly_usd.contains(&price) {
                hourly_usd.push(price);
            }
        }
    }
    if hourly_usd.is_empty() {
        return Err(at("no on-demand price per hour (unit Hrs) in USD"));
    }
    hourly_usd.sort();
    let text_field = |pointer: &str| {
        item.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Ec2Product {
        publication_date: text_field("/publicationDate"),
        version: text_field("/version"),
        instance,
        region,
        sku,
        vcpus,
        memory_gib,
        gpus,
        gpu_memory_gib,
        hourly_usd,
    })
}

/// The one hourly price of `instance` in `region` among the products `GetProducts` returned
/// for it: an error when there is none, when a product is for another instance or region, or
/// when the products disagree (more than one distinct price: the filters did not narrow the
/// answer to one offer, and picking one would be a guess).
pub fn single_price<'a>(
    instance: &str,
    region: &str,
    products: &'a [Ec2Product],
) -> Result<(&'a Ec2Product, Decimal), String> {
    if let Some(other) = products
        .iter()
        .find(|p| p.instance != instance || p.region != region)
    {
        return Err(format!(
            "asked for {instance} in {region}, the Price List API answered with product {} ({} in {})",
            other.sku, other.instance, other.region
        ));
    }
    let Some(first) = products.first() else {
        return Err(format!(
            "the Price List API has no Linux on-demand price for {instance} in {region}"
        ));
    };
    let mut prices: Vec<Decimal> = products
        .iter()
        .flat_map(|p| p.hourly_usd.iter().copied())
        .collect();
    prices.sort();
    prices.dedup();
    if let [price] = prices[..] {
        return Ok((first, price));
    }
    let listed: Vec<String> = prices.iter().map(|p| format!("{p}/h")).collect();
    let skus: Vec<&str> = products.iter().map(|p| p.sku.as_str()).collect();
    Err(format!(
        "ambiguous price for {instance} in {region}: {} (products {})",
        listed.join(", "),
        skus.join(", ")
    ))
}

/// `"8 GiB"`, `"1,952 GiB"` → 8, 1952 (exact; `unit` must follow the number).
fn quantity(text: &str, unit: &str) -> Option<Decimal> {
    let number = text.trim().strip_suffix(unit)?.trim().replace(',', "");
    number.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/aws_getproducts_c5.xlarge_item.json");

    fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    #[test]
    fn reads_the_documented_item() {
        let p = parse_ec2_product(FIXTURE).unwrap();
        assert_eq!(p.instance, "c5.xlarge");
        assert_eq!(p.region, "us-east-1");
        assert_eq!(p.sku, "EXAMPLESKU000001");
        assert_eq!((p.vcpus, p.memory_gib, p.gpus), (4, d("8"), 0));
        assert_eq!(p.gpu_memory_gib, None);
        assert_eq!(p.hourly_usd, vec![d("0.17")]);
        assert_eq!(p.publication_date.as_deref(), Some("2025-01-01T00:00:00Z"));
        assert_eq!(p.version.as_deref(), Some("20250101000000"));
    }

    #[test]
    fn reads_gpus_large_memory_and_ignores_other_units() {
        let mut item: Value = serde_json::from_str(FIXTURE).unwrap();
        let attributes = item.pointer_mut("/product/attributes").unwrap();
        attributes["instanceType"] = "p4d.24xlarge".into();
        attributes["vcpu"] = "96".into();
        attributes["memory"] = "1,152 GiB".into();
        attributes["gpu"] = "8".into();
        attributes["gpuMemory"] = "40 GB".into();
        let term = item
            .pointer_mut("/terms/OnDemand/EXAMPLESKU000001.JRTCKXETXF/priceDimensions")
            .unwrap();
        let dimension = term["EXAMPLESKU000001.JRTCKXETXF.6YS6EN2CT7"].clone();
        term["EXAMPLESKU000001.JRTCKXETXF.6YS6EN2CT7"]["pricePerUnit"]["USD"] =
            "21.9576420000".into();
        let mut upfront = dimension;
        upfront["unit"] = "Quantity".into();
        upfront["pricePerUnit"]["USD"] = "1000".into();
        term["X.Y.Z"] = upfront;
        let p = parse_ec2_product(&item.to_string()).unwrap();
        assert_eq!((p.vcpus, p.memory_gib, p.gpus), (96, d("1152"), 8));
        assert_eq!(p.gpu_memory_gib, Some(d("40")));
        assert_eq!(p.hourly_usd, vec![d("21.957642")]);
    }

    #[test]
    fn refuses_what_it_cannot_read_exactly() {
        let cases = [
            ("\"0.1700000000\"", "\"0.1x\"", "pricePerUnit.USD"),
            ("\"0.1700000000\"", "\"-0.17\"", "negative"),
            ("\"Hrs\"", "\"Quantity\"", "no on-demand price per hour"),
            ("\"8 GiB\"", "\"8 MiB\"", "memory"),
            ("\"vcpu\": \"4\"", "\"vcpu\": \"four\"", "vcpu"),
            (
                "\"0.1700000000\"",
                "\"0.1700000000000001\"",
                "pricePerUnit.USD",
            ),
        ];
        for (from, to, expected) in cases {
            let text = FIXTURE.replacen(from, to, 1);
            assert_ne!(text, FIXTURE, "{from} is in the fixture");
            let error = parse_ec2_product(&text).unwrap_err();
            assert!(error.contains(expected), "{from} -> {to}: {error}");
            assert!(
                error.contains("c5.xlarge") || error.contains("not JSON"),
                "{error}"
            );
        }
        assert!(parse_ec2_product("{").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn one_price_or_an_error_naming_the_instance() {
        let p = parse_ec2_product(FIXTURE).unwrap();
        let same = vec![p.clone(), p.clone()];
        let (_, price) = single_price("c5.xlarge", "us-east-1", &same).unwrap();
        assert_eq!(price, d("0.17"));

        let mut dearer = p.clone();
        dearer.sku = "SKU2".into();
        dearer.hourly_usd = vec![d("0.2")];
        let error = single_price("c5.xlarge", "us-east-1", &[p.clone(), dearer]).unwrap_err();
        assert_eq!(
            error,
            "ambiguous price for c5.xlarge in us-east-1: 0.17/h, 0.2/h \
             (products EXAMPLESKU000001, SKU2)"
        );
        let error = single_price("c5.xlarge", "us-east-2", &same).unwrap_err();
        assert!(error.contains("answered with product"), "{error}");
        let error = single_price("c5.xlarge", "us-east-1", &[]).unwrap_err();
        assert!(
            error.contains("no Linux on-demand price for c5.xlarge"),
            "{error}"
        );
    }

    #[test]
    fn filters_are_the_documented_ones() {
        let filters = ec2_on_demand_filters("c5.xlarge", "us-east-1");
        let fields: Vec<&str> = filters.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            fields,
            [
                "instanceType",
                "regionCode",
                "operatingSystem",
                "tenancy",
                "preInstalledSw",
                "capacitystatus",
                "marketoption",
                "operation"
            ]
        );
        assert_eq!(filters[0].1, "c5.xlarge");
        assert_eq!(filters[7].1, "RunInstances");
    }
}
