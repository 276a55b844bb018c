//! Parsing is line-local: any split of an input into chunks, each parsed on its own with the
//! header repeated, yields the same records, steps and quarantined lines as the whole. This
//! is what lets an import resume mid-file or fan out over pieces of a dump.

use bursar_collectors::sacct::{read_all, SacctContents, SacctOptions, SacctTimeZone};
use bursar_collectors::synth::{sacct_text, SynthConfig};
use proptest::prelude::*;

const NARROW: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/examples/sacct-narrow.psv"
));

/// Lines that must be quarantined wherever they land.
const BAD: [&str; 5] = [
    "77|77|onprem|physics|alice",
    "78|78|onprem|physics|alice|batch|normal|EXPLODED|0:0|0:0|2026-01-01T00:00:00|\
     2026-01-01T00:00:01|2026-01-01T00:00:02|1|cpu=1|1|cpu=1|1000M|1|n1|10|x",
    "79|79|onprem|physics|alice|batch|normal|COMPLETED|0:0|0:0|2026-01-01T00:00:00|\
     2026-01-01T00:00:01|2026-01-01T00:00:02|-1|cpu=1|1|cpu=1|1000M|1|n1|10|x",
    "80|80|onprem|physics|alice|batch|normal|COMPLETED|0:0|0:0|2026-01-01T00:00:00|\
     2026-01-01T00:00:01|2026-01-01T00:00:02|1|cpu=one|1|cpu=1|1000M|1|n1|10|x",
    "81|81|onprem|physics|alice|batch|normal|COMPLETED|0:0|0:0|yesterday|\
     2026-01-01T00:00:01|2026-01-01T00:00:02|1|cpu=1|1|cpu=1|1000M|1|n1|10|x",
];

fn zone(index: usize) -> SacctTimeZone {
    [
        SacctTimeZone::Utc,
        SacctTimeZone::Named(chrono_tz::Europe::Berlin),
        SacctTimeZone::Named(chrono_tz::America::New_York),
    ][index]
}

fn parse(header: &str, lines: &[String], zone: SacctTimeZone) -> SacctContents {
    let mut text = format!("{header}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    read_all(text.as_bytes(), SacctOptions::new().time_zone(zone)).unwrap()
}

/// Whole-input and chunked results, compared on everything but line numbers (which are
/// relative to each chunk).
fn check(text: &str, cuts: &[usize], bad: &[(usize, usize)], zone: SacctTimeZone) {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let header = lines.remove(0);
    for &(at, which) in bad {
        let at = at % (lines.len() + 1);
        lines.insert(at, BAD[which].to_string());
    }
    let whole = parse(&header, &lines, zone);

    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (lines.len() + 1)).collect();
    cuts.push(0);
    cuts.push(lines.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut chunked = SacctContents::default();
    for window in cuts.windows(2) {
        let part = parse(&header, &lines[window[0]..window[1]], zone);
        chunked.records.extend(part.records);
        chunked.steps += part.steps;
        chunked.quarantined.extend(part.quarantined);
    }

    assert_eq!(chunked.records, whole.records);
    assert_eq!(chunked.steps, whole.steps);
    let strip = |c: &SacctContents| -> Vec<(String, String)> {
        c.quarantined
            .iter()
            .map(|q| (q.reason.clone(), q.raw.clone()))
            .collect()
    };
    assert_eq!(strip(&chunked), strip(&whole));
    assert!(whole.quarantined.len() >= bad.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_split_of_synthetic_output_gives_the_same_records(
        seed in 0u64..10_000,
        cuts in prop::collection::vec(0usize..100_000, 0..10),
        bad in prop::collection::vec((0usize..100_000, 0usize..BAD.len()), 0..4),
        zone_index in 0usize..3,
    ) {
        let config = SynthConfig { records: 120, seed, ..SynthConfig::default() };
        check(&sacct_text(&config), &cuts, &bad, zone(zone_index));
    }

    #[test]
    fn any_split_of_the_reference_capture_gives_the_same_records(
        cuts in prop::collection::vec(0usize..1000, 0..10),
        bad in prop::collection::vec((0usize..1000, 0usize..BAD.len()), 0..4),
        zone_index in 0usize..3,
    ) {
        check(NARROW, &cuts, &bad, zone(zone_index));
    }
}
