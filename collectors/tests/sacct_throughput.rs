//! Parse rate of the sacct reader on synthetic output. Prints lines/s and records/s; asserts
//! only correctness (timing depends on the machine). For a real measurement:
//!
//! ```sh
//! BURSAR_SACCT_BENCH_RECORDS=1000000 cargo test --release -p bursar-collectors \
//!     --test sacct_throughput -- --nocapture
//! ```

use std::time::Instant;

use bursar_collectors::sacct::{SacctLine, SacctOptions, SacctReader, SacctTimeZone};
use bursar_collectors::synth::{sacct_text, SynthConfig};

fn records_wanted() -> u64 {
    std::env::var("BURSAR_SACCT_BENCH_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

fn measure(zone: SacctTimeZone) {
    let config = SynthConfig {
        records: records_wanted(),
        seed: 42,
        ..SynthConfig::default()
    };
    let text = sacct_text(&config);
    let started = Instant::now();
    let (mut records, mut steps, mut quarantined, mut lines) = (0u64, 0u64, 0u64, 0u64);
    for item in SacctReader::new(text.as_bytes(), SacctOptions::new().time_zone(zone)).unwrap() {
        lines += 1;
        match item.unwrap() {
            SacctLine::Record { .. } => records += 1,
            SacctLine::Step { .. } => steps += 1,
            SacctLine::Quarantined(q) => {
                // The generator prints UTC; read as Berlin time, the hour skipped in spring
                // does not exist. Nothing else may be refused.
                assert!(
                    zone != SacctTimeZone::Utc && q.reason.contains("does not exist in"),
                    "{q}: {}",
                    q.raw
                );
                quarantined += 1;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "sacct parse ({zone}): {lines} lines ({records} records, {steps} steps, {quarantined} \
         quarantined, {} MB) in {seconds:.3} s = {:.0} lines/s, {:.0} records/s",
        text.len() / 1_000_000,
        lines as f64 / seconds,
        records as f64 / seconds,
    );
    assert_eq!(records + quarantined, config.records);
}

#[test]
fn parse_rate_utc() {
    measure(SacctTimeZone::Utc);
}

#[test]
fn parse_rate_berlin() {
    measure(SacctTimeZone::Named(chrono_tz::Europe::Berlin));
}
