//! The sacct reader on real Slurm 22.05 output, captured from two clusters sharing one
//! slurmdbd and kept under `tests/fixtures/sacct-22.05/` exactly as sacct printed it.
//! `sacct-narrow.psv` is also the example in `deploy/examples/`; one test keeps the two equal.

use std::collections::BTreeSet;

use bursar_collectors::sacct::{read_all, SacctContents, SacctError, SacctOptions, SacctTimeZone};
use bursar_pricing::{JobState, Tres, UsageRecord};
use chrono::NaiveDateTime;

const NARROW: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/examples/sacct-narrow.psv"
));

fn reference(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/sacct-22.05/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn utc() -> SacctOptions {
    // The capture machine ran in UTC; the times carry no offset.
    SacctOptions::new().time_zone(SacctTimeZone::Utc)
}

fn parse(text: &str) -> SacctContents {
    read_all(text.as_bytes(), utc()).unwrap()
}

fn at(text: &str) -> i64 {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

fn find<'a>(records: &'a [UsageRecord], cluster: &str, job_id: &str) -> &'a UsageRecord {
    let mut found = records
        .iter()
        .filter(|r| r.cluster == cluster && r.job_id == job_id);
    let record = found
        .next()
        .unwrap_or_else(|| panic!("no record {cluster}/{job_id}"));
    assert!(found.next().is_none(), "{cluster}/{job_id} twice");
    record
}

#[test]
fn the_repository_copy_is_the_capture() {
    assert_eq!(NARROW, reference("sacct-narrow.psv"));
}

#[test]
fn narrow_capture_yields_exactly_the_allocation_lines() {
    let contents = parse(NARROW);
    assert_eq!(contents.quarantined, vec![]);
    let onprem = contents
        .records
        .iter()
        .filter(|r| r.cluster == "onprem")
        .count();
    let cloud = contents
        .records
        .iter()
        .filter(|r| r.cluster == "cloud")
        .count();
    // onprem jobs 1-6, 8-20 (7 is the array's last task, 7_3) and cloud jobs 1-4
    assert_eq!((onprem, cloud), (20, 4));
    // a comment, the header and 52 data lines: the other 28 are steps
    assert_eq!(NARROW.lines().count(), 54);
    assert_eq!(contents.steps, 28);

    let identities: BTreeSet<_> = contents
        .records
        .iter()
        .map(|r| (r.cluster.as_str(), r.job_id.as_str(), r.submit))
        .collect();
    assert_eq!(
        identities.len(),
        24,
        "(cluster, JobIDRaw, Submit) is unique"
    );
    for record in &contents.records {
        assert!(!record.job_id.contains('.'), "{record:?}");
        assert!(!record.user.is_empty());
    }
}

#[test]
fn array_and_het_ids() {
    let records = parse(NARROW).records;
    for (raw, display) in [("16", "7_0"), ("17", "7_1"), ("18", "7_2"), ("7", "7_3")] {
        let task = find(&records, "onprem", raw);
        assert_eq!(task.display_id, display);
        assert_eq!(task.job_name.as_deref(), Some("array"));
    }
    assert_eq!(find(&records, "onprem", "7").state, JobState::Failed);

    let leader = find(&records, "onprem", "11");
    let second = find(&records, "onprem", "12");
    assert_eq!(
        (leader.display_id.as_str(), second.display_id.as_str()),
        ("11+0", "11+1")
    );
    assert_eq!(
        leader.alloc,
        Tres::parse("billing=1,cpu=1,mem=500M,node=1").unwrap()
    );
    assert_eq!(
        second.alloc,
        Tres::parse("billing=2,cpu=2,mem=1G,node=1").unwrap()
    );
}

#[test]
fn never_started_timeout_and_cancelled_jobs() {
    let records = parse(NARROW).records;

    let never = find(&records, "onprem", "6");
    assert_eq!(never.start, None);
    assert!(!never.started());
    assert!(never.alloc.is_empty(), "{:?}", never.alloc);
    assert_eq!(never.elapsed_us, 0);
    assert_eq!(never.state, JobState::Cancelled);
    assert_eq!(never.end, Some(at("2026-11-22T00:13:14")));
    assert_eq!(never.time_limit_min, None, "Partition_Limit");
    assert_eq!(never.user, "carol");

    let timeout = find(&records, "onprem", "10");
    assert_eq!(timeout.state, JobState::Timeout);
    assert_eq!(timeout.elapsed_us, 82_000_000);
    assert_eq!(timeout.time_limit_min, Some(1));
    assert_eq!(timeout.start, Some(at("2026-11-22T00:13:12")));
    assert_eq!(timeout.end, Some(at("2026-11-22T00:14:34")));

    let cancelled = find(&records, "onprem", "5");
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert_eq!(cancelled.elapsed_us, 2_000_000);
}

#[test]
fn a_whole_record_field_by_field() {
    let records = parse(NARROW).records;
    assert_eq!(
        *find(&records, "cloud", "1"),
        UsageRecord {
            cluster: "cloud".into(),
            job_id: "1".into(),
            display_id: "1".into(),
            submit: at("2026-11-22T00:13:12"),
            start: Some(at("2026-11-22T00:13:13")),
            end: Some(at("2026-11-22T00:13:16")),
            account: "physics".into(),
            user: "alice".into(),
            partition: Some("gpu".into()),
            qos: Some("normal".into()),
            state: JobState::Completed,
            elapsed_us: 3_000_000,
            alloc: Tres::parse("billing=22,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=4G,node=1")
                .unwrap(),
            time_limit_min: None,
            job_name: Some("cloud-gpu2".into()),
            price_per_hour_micros: None,
            blocks: None,
        }
    );
    let premium = find(&records, "onprem", "19");
    assert_eq!(premium.qos.as_deref(), Some("premium"));
    assert_eq!(premium.time_limit_min, Some(10));
    // jobs 1-4 exist on both clusters
    assert_ne!(find(&records, "onprem", "1"), find(&records, "cloud", "1"));
}

#[test]
fn every_capture_with_the_needed_columns_parses_cleanly_and_they_agree() {
    let narrow = parse(NARROW).records;
    for name in [
        "sacct-narrow-allocations.psv",
        "sacct-all-format-ALL.psv",
        "sacct-narrow-default-window.psv",
        "sacct-states-CA-F-TO.psv",
    ] {
        let contents = parse(&reference(name));
        assert_eq!(contents.quarantined, vec![], "{name}");
        assert!(!contents.records.is_empty(), "{name}");
        for record in &contents.records {
            let same = find(&narrow, &record.cluster, &record.job_id);
            assert_eq!(record, same, "{name}");
        }
        if name != "sacct-narrow-default-window.psv" {
            // the default window (from midnight) misses nothing here either, but only the
            // explicit windows are guaranteed to hold every job
            assert_eq!(contents.records.len(), narrow.len(), "{name}");
        }
    }
    let all = reference("sacct-all-format-ALL.psv");
    let header = all.lines().find(|l| !l.starts_with('#')).unwrap();
    assert_eq!(header.split('|').count(), 109);
    let allocations = parse(&reference("sacct-narrow-allocations.psv"));
    assert_eq!((allocations.records, allocations.steps), (narrow, 0));
}

#[test]
fn the_onprem_only_capture_lacks_columns_a_record_needs_but_agrees_on_identity() {
    let text = reference("sacct-onprem-only.psv");
    let err = read_all(text.as_bytes(), utc()).unwrap_err();
    let SacctError::MissingColumns(missing) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        missing.missing,
        vec!["Submit", "ElapsedRaw or Elapsed", "AllocTRES or AllocCPUS"]
    );
    let message = err.to_string();
    assert!(
        message.contains("lacks the required columns Submit"),
        "{message}"
    );

    // What it does have matches the full capture's onprem records.
    let narrow = parse(NARROW).records;
    let mut rows = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split('|').collect();
        let record = find(&narrow, f[2], f[0]);
        assert_eq!(
            (
                record.display_id.as_str(),
                record.account.as_str(),
                record.user.as_str()
            ),
            (f[1], f[3], f[4])
        );
        assert_eq!(record.state, f[5].parse().unwrap());
        rows += 1;
    }
    assert_eq!(rows, 20);
}

#[test]
fn captures_without_the_needed_columns_are_refused_before_any_line() {
    let err = read_all(reference("sacct-usage.psv").as_bytes(), utc()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sacct output lacks the required columns Account, Submit, ElapsedRaw or Elapsed, \
         AllocTRES or AllocCPUS; its columns are JobID|Cluster|State|TotalCPU|UserCPU|SystemCPU|\
         CPUTimeRAW|MaxRSS|AveRSS|MaxVMSize|TRESUsageInTot|TRESUsageInMax|TRESUsageOutTot|\
         ConsumedEnergyRaw (if the input has no header line, pass its column list)"
    );
}

#[test]
fn the_constructed_headerless_example() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sacct-22.05/sacct_parsable2_example.txt"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let options = utc().format(
        "JobID,JobIDRaw,Cluster,Account,User,Partition,QOS,State,ExitCode,Submit,Start,End,\
         ElapsedRaw,TimelimitRaw,AllocCPUS,AllocTRES,CPUTimeRAW",
    );
    let contents = read_all(text.as_bytes(), options).unwrap();
    assert_eq!(contents.quarantined, vec![]);
    let ids: Vec<_> = contents
        .records
        .iter()
        .map(|r| (r.job_id.as_str(), r.display_id.as_str(), r.time_limit_min))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("1234", "1234", Some(120)),
            ("1243", "1240_3", Some(60)),
            ("1250", "1250+0", None),
            ("1251", "1250+1", None),
        ]
    );
    assert_eq!(contents.records[0].alloc.mem_mb(), 16_384);
    assert_eq!(contents.records[2].state, JobState::Cancelled);
}
