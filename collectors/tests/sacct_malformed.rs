//! Bad lines are quarantined with their line number and a reason naming the column and the
//! value; the good lines around them still come out.

use bursar_collectors::sacct::{
    read_all, Quarantined, SacctError, SacctLine, SacctOptions, SacctReader, SacctTimeZone,
};
use bursar_pricing::JobState;

fn utc() -> SacctOptions {
    SacctOptions::new().time_zone(SacctTimeZone::Utc)
}

/// The same columns as the reference capture, minus the free-text JobName (so that a surplus
/// `|` cannot be explained and is quarantined).
const HEADER: &str = "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|ExitCode|\
DerivedExitCode|Submit|Start|End|ElapsedRaw|AllocTRES|AllocCPUS|ReqTRES|ReqMem|NNodes|NodeList|\
TimelimitRaw";

fn good(job: u32) -> String {
    format!(
        "{job}|{job}|onprem|physics|alice|batch|normal|COMPLETED|0:0|0:0|2026-11-22T00:13:11|\
         2026-11-22T00:13:12|2026-11-22T00:13:14|2|billing=1,cpu=1,mem=1000M,node=1|1|\
         billing=1,cpu=1,mem=1000M,node=1|1000M|1|op-n1|UNLIMITED"
    )
}

/// `good(job)` with field `column` replaced.
fn with(job: u32, column: usize, value: &str) -> String {
    let line = good(job);
    let mut fields: Vec<&str> = line.split('|').collect();
    fields[column] = value;
    fields.join("|")
}

#[test]
fn each_bad_line_is_quarantined_and_the_rest_still_parses() {
    let truncated = good(3).split('|').take(10).collect::<Vec<_>>().join("|");
    let lines = [
        "# sacct --parsable2 ... (a comment)".to_string(),
        HEADER.to_string(),
        good(1),                             // 3
        truncated.clone(),                   // 4
        format!("{}|extra", good(4)),        // 5
        with(5, 14, "cpu=lots,mem=1G"),      // 6
        with(6, 13, "-42"),                  // 7
        with(7, 7, "EXPLODED"),              // 8
        with(8, 11, "2026-11-31T00:00:00"),  // 9
        with(9, 10, "Unknown"),              // 10
        with(10, 12, "2026-11-22T00:00:00"), // 11
        with(11, 13, "two"),                 // 12
        with(12, 3, ""),                     // 13
        with(13, 4, ""),                     // 14
        "14.batch|14.batch|onprem|physics||||COMPLETED|0:0||2026-11-22T00:13:12|\
         2026-11-22T00:13:12|2026-11-22T00:13:14|2|cpu=1,mem=1000M,node=1|1|||1|op-n1|"
            .to_string(), // 15: a step: empty user, no billing, no limit
        good(2),                             // 16
    ];
    let text = lines.join("\n") + "\n";
    let items: Vec<SacctLine> = SacctReader::new(text.as_bytes(), utc())
        .unwrap()
        .map(Result::unwrap)
        .collect();

    let records: Vec<(u64, &str)> = items
        .iter()
        .filter_map(|i| match i {
            SacctLine::Record { line, record } => Some((*line, record.job_id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(records, vec![(3, "1"), (16, "2")]);
    assert!(items.contains(&SacctLine::Step { line: 15 }));

    let quarantined: Vec<(u64, &str)> = items
        .iter()
        .filter_map(|i| match i {
            SacctLine::Quarantined(q) => Some((q.line, q.reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        quarantined,
        vec![
            (4, "truncated line: 10 of 21 fields"),
            (5, "22 fields, header has 21 (a '|' inside a field?)"),
            (
                6,
                "bad AllocTRES \"cpu=lots,mem=1G\": TRES cpu has an invalid value \"lots\""
            ),
            (7, "negative ElapsedRaw -42"),
            (8, "unknown job state \"EXPLODED\""),
            (9, "unparsable Start time \"2026-11-31T00:00:00\""),
            (10, "no submit time: Submit is \"Unknown\""),
            (
                11,
                "Start 2026-11-22T00:13:12 is after End 2026-11-22T00:00:00"
            ),
            (12, "ElapsedRaw \"two\" is not a whole number of seconds"),
            (13, "no account: Account is empty"),
            (14, "no user: User is empty"),
        ]
    );
    // the raw line is kept as read, for the operator
    let SacctLine::Quarantined(q) = &items[1] else {
        panic!()
    };
    assert_eq!(q.raw, truncated);
    assert_eq!(q.to_string(), "line 4: truncated line: 10 of 21 fields");
}

#[test]
fn missing_required_columns_fail_before_any_line() {
    for (drop, named) in [
        ("Account", "Account"),
        ("State", "State"),
        ("Submit", "Submit"),
        ("ElapsedRaw", "ElapsedRaw or Elapsed"),
        ("AllocTRES", "AllocTRES or AllocCPUS"),
    ] {
        let mut header: Vec<&str> = HEADER.split('|').collect();
        header.retain(|c| *c != drop && !(drop == "AllocTRES" && *c == "AllocCPUS"));
        if drop == "Account" {
            // the rest of the input is never looked at
            header.push("JobName");
        }
        let text = format!("{}\nthis line is not even sacct output\n", header.join("|"));
        let err = read_all(text.as_bytes(), utc()).unwrap_err();
        let SacctError::MissingColumns(missing) = &err else {
            panic!("{err}")
        };
        assert_eq!(missing.missing, vec![named], "{err}");
    }
    let err = read_all("JobName|Comment\n".as_bytes(), utc()).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "sacct output lacks the required columns JobIDRaw or JobID, Account, State, Submit"
        ),
        "{err}"
    );
}

#[test]
fn cluster_comes_from_the_column_or_the_default() {
    let header = HEADER.replace("|Cluster", "");
    let line = good(1).replace("|onprem", "");
    let text = format!("{header}\n{line}\n");
    let contents = read_all(text.as_bytes(), utc().cluster("hpc1")).unwrap();
    assert_eq!(contents.records[0].cluster, "hpc1");

    let contents = read_all(text.as_bytes(), utc()).unwrap();
    assert_eq!(
        contents.quarantined,
        vec![Quarantined {
            line: 2,
            reason: "no Cluster column and no --cluster given".to_string(),
            raw: line,
        }]
    );

    // a Cluster value wins over the default
    let text = format!("{HEADER}\n{}\n", good(1));
    let contents = read_all(text.as_bytes(), utc().cluster("hpc1")).unwrap();
    assert_eq!(contents.records[0].cluster, "onprem");
}

#[test]
fn an_io_error_ends_the_stream_after_the_lines_before_it() {
    struct Failing(std::io::Cursor<Vec<u8>>);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(std::io::Error::other("disk on fire")),
                n => Ok(n),
            }
        }
    }
    let text = format!("{HEADER}\n{}\n{}", good(1), good(2));
    let reader = std::io::BufReader::new(Failing(std::io::Cursor::new(text.into_bytes())));
    let items: Vec<_> = SacctReader::new(reader, utc()).unwrap().collect();
    assert_eq!(items.len(), 2);
    assert!(matches!(items[0], Ok(SacctLine::Record { .. })));
    assert_eq!(
        items[1].as_ref().unwrap_err().to_string(),
        "reading sacct output: disk on fire"
    );
}

#[test]
fn running_pending_and_requeued_records() {
    let running = with(1, 12, "Unknown").replace("COMPLETED", "RUNNING");
    let pending_array = "123|123_[1-5%2]|onprem|physics|alice|batch|normal|PENDING|0:0|0:0|\
                         2026-11-22T00:13:11|Unknown|Unknown|0||1|billing=1,cpu=1,mem=1000M,node=1|\
                         1000M|1|None assigned|60"
        .to_string();
    // --duplicates: the first run was requeued, the rerun has the same JobIDRaw and a later Submit
    let requeued = with(3, 7, "REQUEUED");
    let rerun = with(3, 10, "2026-11-22T00:13:15").replace(
        "2026-11-22T00:13:12|2026-11-22T00:13:14",
        "2026-11-22T00:13:16|2026-11-22T00:13:18",
    );
    let text = [HEADER.to_string(), running, pending_array, requeued, rerun].join("\n");
    let contents = read_all(text.as_bytes(), utc()).unwrap();
    assert_eq!(contents.quarantined, vec![]);
    let r = &contents.records;

    assert_eq!((r[0].state, r[0].end), (JobState::Running, None));
    assert!(r[0].start.is_some() && !r[0].state.is_final());

    assert_eq!(
        (r[1].job_id.as_str(), r[1].display_id.as_str()),
        ("123", "123_[1-5%2]")
    );
    assert_eq!(
        (r[1].state, r[1].start, r[1].end),
        (JobState::Pending, None, None)
    );
    assert!(r[1].alloc.is_empty(), "a pending job has allocated nothing");

    assert_eq!(
        (r[2].job_id.as_str(), r[2].state),
        ("3", JobState::Requeued)
    );
    assert_eq!(
        (r[3].job_id.as_str(), r[3].state),
        ("3", JobState::Completed)
    );
    assert!(r[3].submit > r[2].submit);
}
