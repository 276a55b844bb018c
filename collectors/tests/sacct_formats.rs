//! The output variants sacct can be asked for all read to the same records: `--parsable`
//! (trailing `|`), epoch times (`SLURM_TIME_FORMAT=%s`), `--noconvert` memory, no header
//! (`-n`) with the column list given, columns in another order, local times in a zone with
//! daylight-saving time, and a `|` inside a free-text column.

use bursar_collectors::sacct::{
    read_all, SacctContents, SacctLine, SacctOptions, SacctReader, SacctTimeZone,
};
use bursar_pricing::UsageRecord;
use chrono::NaiveDateTime;

const NARROW: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/examples/sacct-narrow.psv"
));

fn utc() -> SacctOptions {
    SacctOptions::new().time_zone(SacctTimeZone::Utc)
}

fn berlin() -> SacctOptions {
    SacctOptions::new().time_zone(SacctTimeZone::Named(chrono_tz::Europe::Berlin))
}

fn parse(text: &str, options: SacctOptions) -> SacctContents {
    let contents = read_all(text.as_bytes(), options).unwrap();
    assert_eq!(contents.quarantined, vec![]);
    contents
}

fn narrow_records() -> Vec<UsageRecord> {
    parse(NARROW, utc()).records
}

/// Rewrites every `|`-separated field of every data line (not comments or the header).
fn map_fields(text: &str, f: impl Fn(&str) -> String) -> String {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            if i < 2 {
                line.to_string()
            } else {
                line.split('|').map(&f).collect::<Vec<_>>().join("|")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_iso(field: &str) -> bool {
    NaiveDateTime::parse_from_str(field, "%Y-%m-%dT%H:%M:%S").is_ok()
}

fn epoch(field: &str) -> i64 {
    NaiveDateTime::parse_from_str(field, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

#[test]
fn parsable_with_a_trailing_bar() {
    let text: String = NARROW
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                l.to_string()
            } else {
                format!("{l}|")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(parse(&text, utc()).records, narrow_records());
}

#[test]
fn epoch_times_need_no_zone() {
    let text = map_fields(NARROW, |f| {
        if is_iso(f) {
            epoch(f).to_string()
        } else {
            f.to_string()
        }
    });
    assert!(
        text.contains("|1795306391|1795306392|1795306394|"),
        "{text}"
    );
    assert_eq!(parse(&text, utc()).records, narrow_records());
    // a zone does not apply to epoch seconds
    assert_eq!(parse(&text, berlin()).records, narrow_records());
}

#[test]
fn noconvert_memory() {
    let text = NARROW
        .replace("mem=1G", "mem=1024M")
        .replace("mem=2G", "mem=2048M")
        .replace("mem=4G", "mem=4096M");
    assert_ne!(text, NARROW);
    assert_eq!(parse(&text, utc()).records, narrow_records());
}

#[test]
fn headerless_with_the_column_list() {
    let mut lines = NARROW.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().unwrap();
    let body: String = lines.map(|l| format!("{l}\n")).collect();
    let options = utc().columns(header.split('|'));
    assert_eq!(parse(&body, options.clone()).records, narrow_records());

    // the same list as a --format string
    let format = header.replace('|', ",");
    assert_eq!(
        parse(&body, utc().format(&format)).records,
        narrow_records()
    );
    // given a column list, a header that repeats it is recognized and skipped
    assert_eq!(parse(NARROW, options).records, narrow_records());

    // line numbers count from the first line of the input
    let first = SacctReader::new(body.as_bytes(), utc().format(&format))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(matches!(first, SacctLine::Record { line: 1, .. }));
}

#[test]
fn headerless_parsable_with_trailing_bars() {
    let mut lines = NARROW.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().unwrap();
    let body: String = lines.map(|l| format!("{l}|\n")).collect();
    assert_eq!(
        parse(&body, utc().columns(header.split('|'))).records,
        narrow_records()
    );
}

#[test]
fn columns_in_another_order_and_case() {
    let rows: Vec<Vec<&str>> = NARROW
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('|').collect())
        .collect();
    let text: String = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut row: Vec<String> = row.iter().rev().map(|f| f.to_string()).collect();
            if i == 0 {
                row = row.iter().map(|f| f.to_lowercase()).collect();
            }
            row.join("|") + "\n"
        })
        .collect();
    // JobName is now first: still the only free-text column
    assert!(text.starts_with("jobname|timelimitraw|"));
    assert_eq!(parse(&text, utc()).records, narrow_records());
}

#[test]
fn elapsed_timelimit_and_alloccpus_stand_in_for_the_raw_columns() {
    let text = "JobID|Account|User|State|Submit|Start|End|Elapsed|Timelimit|AllocCPUS|NNodes\n\
                42|physics|alice|COMPLETED|2026-11-22T00:00:00|2026-11-22T00:00:10|\
                2026-11-23T01:02:13|1-01:02:03|2-00:00:00|8|2\n\
                43|physics|alice|CANCELLED by 0|2026-11-22T00:00:00|None|\
                2026-11-22T00:05:00|00:00:00|Partition_Limit|8|1\n";
    let records = parse(text, utc().cluster("hpc1")).records;
    assert_eq!(records[0].elapsed_us, 90_123_000_000);
    assert_eq!(records[0].time_limit_min, Some(2880));
    assert_eq!((records[0].alloc.cpu(), records[0].alloc.nodes()), (8, 2));
    assert_eq!(records[0].cluster, "hpc1");
    assert_eq!(
        (records[0].job_id.as_str(), records[0].display_id.as_str()),
        ("42", "42")
    );
    assert!(
        records[1].alloc.is_empty(),
        "never started: nothing allocated"
    );
    assert_eq!(records[1].time_limit_min, None);
}

#[test]
fn berlin_local_times() {
    // November: CET, one hour ahead of UTC
    let utc_records = narrow_records();
    let berlin_records = parse(NARROW, berlin()).records;
    for (u, b) in utc_records.iter().zip(&berlin_records) {
        assert_eq!(b.submit, u.submit - 3600);
        assert_eq!(b.start, u.start.map(|t| t - 3600));
        assert_eq!(b.end, u.end.map(|t| t - 3600));
    }
}

#[test]
fn daylight_saving_changes_in_berlin() {
    let header = "JobIDRaw|Account|User|State|Submit|Start|End|ElapsedRaw|AllocTRES";
    // 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:xx happens twice. The job below started
    // at 02:10 and ended at 02:50, both ambiguous: each is read as the earlier instant (CEST).
    let fall = "1|physics|alice|COMPLETED|2026-10-25T01:55:00|2026-10-25T02:10:00|\
                2026-10-25T02:50:00|2400|cpu=1";
    // ... which can make a job that crossed the change look shorter than its ElapsedRaw
    // (02:50 CEST → 02:10 CET is 80 minutes): the bill uses ElapsedRaw, not End - Start.
    let crossing = "2|physics|alice|COMPLETED|2026-10-25T02:50:00|2026-10-25T02:50:00|\
                    2026-10-25T02:10:00|4800|cpu=1";
    // 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist there.
    let gap = "3|physics|alice|COMPLETED|2026-03-29T01:59:00|2026-03-29T02:30:00|\
               2026-03-29T03:10:00|600|cpu=1";
    let spring = "4|physics|alice|COMPLETED|2026-03-29T01:59:00|2026-03-29T01:59:30|\
                  2026-03-29T03:00:30|60|cpu=1";
    let text = [header, fall, crossing, gap, spring].join("\n");
    let contents = read_all(text.as_bytes(), berlin().cluster("eu")).unwrap();

    let r = &contents.records;
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].start, Some(epoch("2026-10-25T00:10:00")));
    assert_eq!(r[0].end, Some(epoch("2026-10-25T00:50:00")));
    assert_eq!(r[1].start, Some(epoch("2026-03-29T00:59:30")));
    assert_eq!(
        r[1].end,
        Some(epoch("2026-03-29T01:00:30")),
        "one minute across the gap"
    );

    let reasons: Vec<(u64, &str)> = contents
        .quarantined
        .iter()
        .map(|q| (q.line, q.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            // read as 02:50 CEST → 02:10 CEST, End before Start
            (
                3,
                "Start 2026-10-25T02:50:00 is after End 2026-10-25T02:10:00"
            ),
            (
                4,
                "Start time \"2026-03-29T02:30:00\" does not exist in Europe/Berlin (skipped \
                 by a daylight-saving change): is the time zone right?"
            ),
        ]
    );
}

#[test]
fn a_bar_inside_the_last_job_name_is_rejoined() {
    let line = NARROW
        .lines()
        .find(|l| l.starts_with("3|3|onprem"))
        .unwrap()
        .replace("|premium-4cpu", "|a|b||c");
    let text = format!("{}\n{line}\n", NARROW.lines().nth(1).unwrap());
    let record = &parse(&text, utc()).records[0];
    assert_eq!(record.job_name.as_deref(), Some("a|b||c"));
    assert_eq!(record.state, bursar_pricing::JobState::Completed);

    // and with --parsable's trailing bar
    let text = format!("{}|\n{line}|\n", NARROW.lines().nth(1).unwrap());
    assert_eq!(
        parse(&text, utc()).records[0].job_name.as_deref(),
        Some("a|b||c")
    );
}

#[test]
fn a_bar_is_not_guessed_at_when_several_free_text_columns_could_hold_it() {
    let text = "JobIDRaw|Account|User|State|Submit|ElapsedRaw|AllocTRES|JobName|WorkDir\n\
                1|physics|alice|COMPLETED|2026-11-22T00:00:00|5|cpu=1|a|b|/home/alice\n";
    let contents = read_all(text.as_bytes(), utc().cluster("c")).unwrap();
    assert_eq!(contents.records, vec![]);
    assert_eq!(
        contents.quarantined[0].reason,
        "10 fields, header has 9 (a '|' inside a field?)"
    );
}

#[test]
fn local_zone_by_default() {
    // sacct prints the local time of the machine it ran on; that is the default reading
    assert_eq!(SacctOptions::new().time_zone, SacctTimeZone::Local);
    assert_eq!(
        "Europe/Berlin".parse(),
        Ok(SacctTimeZone::Named(chrono_tz::Europe::Berlin))
    );
}
