//! A malformed sacct file imports its good lines and lists every bad one, with its line number
//! and reason, in `bursar quarantine list`.

use bursar_tests::Site;

const HEADER: &str =
    "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|Submit|Start|End|ElapsedRaw|AllocTRES";

#[test]
fn bad_lines_are_quarantined_and_good_lines_charged() {
    let site = Site::example();
    let lines = [
        HEADER,
        // 2: good, 1 cpu + 1G for an hour = 1.25 su
        "101|101|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|billing=1,cpu=1,mem=1G,node=1",
        // 3: truncated
        "102|102|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00",
        // 4: one column too many
        "103|103|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|cpu=1|extra|more",
        // 5: garbage TRES
        "104|104|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|cpu=lots",
        // 6: negative elapsed
        "105|105|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|-42|cpu=1",
        // 7: unknown state
        "106|106|onprem|physics|alice|batch|normal|EXPLODED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|cpu=1",
        // 8: a cluster bursar is not configured for
        "107|107|mars|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T02:00:00|3600|cpu=1",
        // 9: good, 2 cpu for half an hour on cloud (no billing weights for 'batch' there: CPU count, 1 usd/cpu-hour)
        "108|108|cloud|chemistry|bob|gpu|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T01:30:00|1800|cpu=2,mem=2G,node=1",
    ];
    let dump = site.path("bad.psv");
    std::fs::write(&dump, lines.join("\n") + "\n").unwrap();
    let out = site.ok(&["import", dump.to_str().unwrap()]);
    assert!(out.contains("2 job records"), "{out}");
    assert!(out.contains("6 quarantined"), "{out}");

    let q = site.json(&["quarantine", "list"]);
    let items = q["quarantine"].as_array().unwrap();
    let reason_at = |line: u64| -> String {
        items
            .iter()
            .find(|i| i["line"] == line)
            .unwrap_or_else(|| panic!("line {line} not quarantined: {q}"))["reason"]
            .as_str()
            .unwrap()
            .to_lowercase()
    };
    assert!(reason_at(3).contains("truncated"), "{}", reason_at(3));
    assert!(reason_at(4).contains("fields"), "{}", reason_at(4));
    assert!(reason_at(5).contains("lots"), "{}", reason_at(5));
    assert!(reason_at(6).contains("-42"), "{}", reason_at(6));
    assert!(reason_at(7).contains("exploded"), "{}", reason_at(7));
    assert!(reason_at(8).contains("mars"), "{}", reason_at(8));
    assert_eq!(items.len(), 6);
    for item in items {
        assert!(item["source"].as_str().unwrap().ends_with("bad.psv"));
        assert!(!item["raw"].as_str().unwrap().is_empty());
    }

    let charges = site.json(&["charges"]);
    let amounts: Vec<(&str, &str)> = charges["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["job_id"].as_str().unwrap(), c["amount"].as_str().unwrap()))
        .collect();
    // cloud/gpu weights: 2 × 0.0425 + 2 × 0.0053 = 0.0956 $/h for half an hour = 0.0478
    assert_eq!(amounts, vec![("101", "1.25"), ("108", "0.0478")]);

    // Importing the same file again neither charges twice nor duplicates the quarantine.
    site.ok(&["import", dump.to_str().unwrap()]);
    let again = site.json(&["quarantine", "list"]);
    assert_eq!(again["quarantine"].as_array().unwrap().len(), 6);
}

#[test]
fn a_file_without_the_columns_bursar_needs_is_refused_before_anything_is_charged() {
    let site = Site::example();
    let dump = site.path("narrow.psv");
    std::fs::write(&dump, "JobID|Account|State\n1|physics|COMPLETED\n").unwrap();
    let out = site.run(&["import", dump.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Submit"),
        "names the missing column: {stderr}"
    );
    let charges = site.json(&["charges"]);
    assert!(charges["charges"].as_array().unwrap().is_empty());
}

#[test]
fn unknown_config_keys_are_refused_with_their_line() {
    let site =
        Site::new("clusters:\n  onprem:\n    kind: slurm\n    currency: su\n    partitons: {}\n");
    let out = site.run(&["config", "check"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("partitons") && stderr.contains("line 5"),
        "{stderr}"
    );
}
