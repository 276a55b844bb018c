//! The synthetic generator writes what the sacct reader accepts without a single quarantined
//! line, with every kind of record a real cluster produces, deterministically.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use bursar_collectors::sacct::{read_all, SacctOptions, SacctTimeZone};
use bursar_collectors::synth::{sacct_text, write_sacct, SynthConfig, HEADER};
use bursar_pricing::JobState;

const NARROW: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/examples/sacct-narrow.psv"
));

fn config(records: u64, seed: u64) -> SynthConfig {
    SynthConfig {
        records,
        seed,
        ..SynthConfig::default()
    }
}

#[test]
fn has_the_reference_capture_columns() {
    assert_eq!(Some(HEADER), NARROW.lines().nth(1));
}

#[test]
fn parses_cleanly_with_every_kind_of_record() {
    let text = sacct_text(&config(5000, 11));
    let contents = read_all(
        text.as_bytes(),
        SacctOptions::new().time_zone(SacctTimeZone::Utc),
    )
    .unwrap();
    assert_eq!(contents.quarantined, vec![]);
    let records = &contents.records;
    assert_eq!(records.len(), 5000);

    let states: BTreeSet<JobState> = records.iter().map(|r| r.state).collect();
    for state in [
        JobState::Completed,
        JobState::Failed,
        JobState::Timeout,
        JobState::Cancelled,
        JobState::OutOfMemory,
        JobState::NodeFail,
        JobState::Requeued,
    ] {
        assert!(states.contains(&state), "no {state}");
    }
    let completed = records
        .iter()
        .filter(|r| r.state == JobState::Completed)
        .count();
    assert!(completed > records.len() / 2, "mostly COMPLETED");

    // never started: cancelled while pending, nothing allocated
    let never: Vec<_> = records.iter().filter(|r| r.start.is_none()).collect();
    assert!(!never.is_empty());
    assert!(never
        .iter()
        .all(|r| r.state == JobState::Cancelled && r.alloc.is_empty() && r.elapsed_us == 0));

    // 1-3 steps per started job
    let started = records.iter().filter(|r| r.started()).count() as u64;
    assert!(contents.steps >= started && contents.steps <= 3 * started);

    // array tasks and het components have their own raw ids
    let arrays = records
        .iter()
        .filter(|r| r.display_id.contains('_'))
        .count();
    let hets = records
        .iter()
        .filter(|r| r.display_id.contains('+'))
        .count();
    assert!(
        arrays > 100 && hets > 50,
        "{arrays} array tasks, {hets} het components"
    );
    assert!(records.iter().any(
        |r| r.display_id.contains('_') && !r.display_id.starts_with(&format!("{}_", r.job_id))
    ));

    // GPU jobs on the gpu partition, with a typed breakdown
    let gpu: Vec<_> = records.iter().filter(|r| r.alloc.gpus() > 0).collect();
    assert!(!gpu.is_empty());
    assert!(gpu.iter().all(|r| r.partition.as_deref() == Some("gpu")));
    assert!(gpu.iter().all(|r| r.alloc.typed_gres("gpu").count() == 1));
    let partitions: BTreeSet<_> = records.iter().filter_map(|r| r.partition.clone()).collect();
    assert_eq!(
        partitions,
        BTreeSet::from(["batch".to_string(), "gpu".to_string()])
    );
    let qos: BTreeSet<_> = records.iter().filter_map(|r| r.qos.clone()).collect();
    assert!(qos.contains("normal") && qos.contains("premium"));
    assert!(text.contains(",mem=1000M,") && text.contains(",mem=4G,") && text.contains("G,"));
    let clusters: BTreeSet<_> = records.iter().map(|r| r.cluster.as_str()).collect();
    assert_eq!(clusters, BTreeSet::from(["cloud", "onprem"]));

    // identity is unique; every requeued run is followed by a rerun with a later Submit
    let mut runs: BTreeMap<(&str, &str), Vec<(i64, JobState)>> = BTreeMap::new();
    for r in records {
        runs.entry((&r.cluster, &r.job_id))
            .or_default()
            .push((r.submit, r.state));
    }
    let identities: BTreeSet<_> = records
        .iter()
        .map(|r| (&r.cluster, &r.job_id, r.submit))
        .collect();
    assert_eq!(identities.len(), records.len());
    for ((cluster, job), list) in &runs {
        if list.iter().any(|(_, s)| *s == JobState::Requeued) {
            assert_eq!(list.len(), 2, "{cluster}/{job}");
            assert!(list[1].0 > list[0].0 && list[1].1 != JobState::Requeued);
        } else {
            assert_eq!(list.len(), 1, "{cluster}/{job}");
        }
    }
}

#[test]
fn steps_follow_their_job() {
    let text = sacct_text(&config(2000, 5));
    let mut job = "";
    for line in text.lines().skip(1) {
        let raw = line.split('|').next().unwrap();
        match raw.split_once('.') {
            Some((id, _)) => assert_eq!(id, job, "{line}"),
            None => job = raw,
        }
    }
}

#[test]
fn submissions_never_go_back_in_time_except_for_reruns() {
    let text = sacct_text(&config(3000, 9));
    let contents = read_all(
        text.as_bytes(),
        SacctOptions::new().time_zone(SacctTimeZone::Utc),
    )
    .unwrap();
    let mut latest = i64::MIN;
    let mut requeued = BTreeSet::new();
    for r in &contents.records {
        if requeued.contains(&(&r.cluster, &r.job_id)) {
            continue; // a rerun is submitted when its first run ends
        }
        assert!(r.submit >= latest, "{r:?}");
        latest = r.submit;
        if r.state == JobState::Requeued {
            requeued.insert((&r.cluster, &r.job_id));
        }
    }
}

#[test]
fn deterministic_for_a_seed() {
    assert_eq!(sacct_text(&config(500, 3)), sacct_text(&config(500, 3)));
    assert_ne!(sacct_text(&config(500, 3)), sacct_text(&config(500, 4)));
    let mut out = Vec::new();
    let stats = write_sacct(&config(500, 3), &mut out).unwrap();
    assert_eq!(stats.records, 500);
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count() as u64,
        1 + 500 + stats.steps
    );
}

#[test]
fn the_binary_writes_the_same_as_the_library() {
    let output = Command::new(env!("CARGO_BIN_EXE_bursar-gen-sacct"))
        .args([
            "--records",
            "300",
            "--seed",
            "8",
            "--clusters",
            "a,b,c",
            "--start",
        ])
        .arg("2026-03-01")
        .args(["--accounts=20", "--users", "50"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = sacct_text(&SynthConfig {
        records: 300,
        seed: 8,
        clusters: vec!["a".into(), "b".into(), "c".into()],
        start: 1_772_323_200, // 2026-03-01T00:00:00Z
        days: None,
        accounts: 20,
        users: 50,
    });
    assert_eq!(String::from_utf8(output.stdout).unwrap(), expected);
    assert!(expected.lines().nth(1).unwrap().contains("|2026-03-01T"));
}

#[test]
fn the_binary_explains_bad_arguments() {
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_bursar-gen-sacct"))
            .args(args)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&["--seed", "1"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--records is required"), "{stderr}");
    let (_, stderr) = run(&["--records", "ten", "--seed", "1"]);
    assert!(
        stderr.contains("--records must be a whole number, not \"ten\""),
        "{stderr}"
    );
    let (_, stderr) = run(&["--records", "1", "--seed", "1", "--start", "tomorrow"]);
    assert!(stderr.contains("--start must be a date"), "{stderr}");
    let (_, stderr) = run(&["--records", "1", "--seed", "1", "--users", "0"]);
    assert!(stderr.contains("--users must be between 1"), "{stderr}");
    let (code, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
}
