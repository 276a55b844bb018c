//! `bursar prices import`: a version is stored once; the same content again (however it is
//! written) changes nothing and audits nothing; other content under a stored version, a
//! shipped version's name, or a second table for the same instance from the same moment is
//! refused with the reason.

mod prices_support;

use bursar_ledger::Ledger;
use prices_support::{path_str, Home};

const TABLE: &str = "\
name: site
version: \"2026-12\"
effective: 2026-12-01
currency: usd
source: negotiated rate
prices:
  - provider: aws
    region: us-east-1
    instance: c5.xlarge
    vcpus: 4
    memory_gib: 8
    price_per_hour: \"0.15\"
  - {provider: aws, region: us-east-1, instance: p4d.24xlarge, vcpus: 96, memory_gib: 1152, gpus: 8, gpu_model: A100-40GB, price_per_hour: \"19.5\"}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_are_stored_once_and_conflicts_refused() {
    let home = Home::new();
    let file = home.write("site.yaml", TABLE);
    let run = home.bursar(&["prices", "import", path_str(&file)]).await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "stored price table site@2026-12: 2 prices in usd, effective 2026-12-01T00:00:00Z\n"
    );

    // The same content, written differently: a no-op.
    let same = TABLE
        .replace("effective: 2026-12-01", "effective: 2026-12-01T00:00:00Z")
        .replace("\"0.15\"", "\"0.150\"")
        .replace("name: site\n", "# our rates\nname: site\n");
    let again = home.write("site-again.yaml", &same);
    let run = home.bursar(&["prices", "import", path_str(&again)]).await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "price table site@2026-12 is already stored with the same content; nothing changed\n"
    );

    // Other content under the stored version.
    let changed = home.write("site-changed.yaml", &TABLE.replace("\"0.15\"", "\"0.16\""));
    let run = home.bursar(&["prices", "import", path_str(&changed)]).await;
    assert!(!run.ok);
    assert!(
        run.stderr.starts_with(
            "bursar: price table site@2026-12 is already stored with other content \
             (imported, stored 20"
        ) && run.stderr.contains(
            " by price-admin); a changed price needs a new version (`bursar prices show \
             site@2026-12` shows what is stored)\n"
        ),
        "{}",
        run.stderr
    );

    // The shipped table's name and version.
    let shipped = home.write(
        "shipped.yaml",
        &TABLE.replace(
            "name: site\nversion: \"2026-12\"",
            "name: instances\nversion: \"2026-11\"",
        ),
    );
    let run = home.bursar(&["prices", "import", path_str(&shipped)]).await;
    assert!(!run.ok);
    assert_eq!(
        run.stderr,
        "bursar: price table instances@2026-11 is shipped with bursar; give the new table \
         another name or version\n"
    );

    // Another table for c5.xlarge from the very same moment: which applies would be a guess.
    let clash = home.write(
        "clash.yaml",
        &TABLE.replace("name: site\n", "name: other\n"),
    );
    let run = home.bursar(&["prices", "import", path_str(&clash)]).await;
    assert!(!run.ok);
    assert!(
        run.stderr.contains(
            "aws us-east-1 c5.xlarge is also priced by site@2026-12 from the same effective time"
        ),
        "{}",
        run.stderr
    );

    // A malformed file names the file and the key.
    let typo = home.write("typo.yaml", &TABLE.replace("vcpus: 4", "vcpu: 4"));
    let run = home.bursar(&["prices", "import", path_str(&typo)]).await;
    assert!(!run.ok);
    assert!(
        run.stderr.contains("typo.yaml") && run.stderr.contains("unknown field `vcpu`"),
        "{}",
        run.stderr
    );

    // One version stored, one audit entry.
    let ledger = Ledger::open(&home.database_url()).await.unwrap();
    assert_eq!(ledger.price_tables().await.unwrap().len(), 1);
    let audit = ledger.audit_log(None).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "prices.import");
    assert_eq!(audit[0].target, "site@2026-12");
    let after: serde_json::Value =
        serde_json::from_str(audit[0].after.as_deref().unwrap()).unwrap();
    assert_eq!(after["prices"], 2);
    assert_eq!(after["effective"], "2026-12-01T00:00:00Z");

    // Listed beside the shipped table; shown row by row.
    let run = home.bursar(&["prices", "list", "--format", "csv"]).await;
    assert!(run.ok, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "name,version,effective,currency,prices,source,imported_at"
    );
    assert_eq!(
        lines[1],
        "instances,2026-11,2026-01-01T00:00:00Z,usd,21,builtin,"
    );
    assert!(
        lines[2].starts_with("site,2026-12,2026-12-01T00:00:00Z,usd,2,imported,20"),
        "{}",
        lines[2]
    );
    assert_eq!(lines.len(), 3);
    let run = home
        .bursar(&["prices", "show", "site@2026-12", "--format", "csv"])
        .await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "provider,region,instance,vcpus,memory_gib,gpus,gpu_model,price_per_hour,gpu_memory_gib,source,retrieved,note\n\
         aws,us-east-1,c5.xlarge,4,8,0,,0.15,,,,\n\
         aws,us-east-1,p4d.24xlarge,96,1152,8,A100-40GB,19.5,,,,\n"
    );
    let run = home.bursar(&["prices", "show", "site@1"]).await;
    assert!(!run.ok);
    assert!(
        run.stderr.contains("no price table \"site@1\"") && run.stderr.contains("site@2026-12"),
        "{}",
        run.stderr
    );
}
