//! Importing is idempotent: the same file twice, or the file cut into overlapping chunks and
//! imported in any order, leaves the ledger exactly as one import does.

use std::io::Cursor;

use bursar_collectors::sacct::SacctTimeZone;
use bursar_collectors::synth::{sacct_text, SynthConfig};
use bursar_gateway::app::App;
use bursar_gateway::config::Config;
use bursar_gateway::import::{import_sacct, ImportSource};
use proptest::prelude::*;

const CONFIG: &str = include_str!("../../deploy/examples/bursar.yaml");
const SAMPLE: &str = include_str!("../../deploy/examples/sacct-narrow.psv");

async fn open(dir: &std::path::Path) -> App {
    let mut config = Config::parse(CONFIG).unwrap();
    config.database = Some(format!("sqlite://{}", dir.join("ledger.db").display()));
    // The synthetic dumps use these partitions too.
    let extra = Config::parse(
        "clusters:\n  onprem:\n    kind: slurm\n    currency: su\n    timezone: UTC\n    partitions:\n      batch: {weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0\"}\n      gpu: {weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:a100=6.0\"}\n    qos:\n      premium: {usage_factor: 2.0}\n",
    )
    .unwrap();
    config
        .clusters
        .insert("onprem".into(), extra.clusters["onprem"].clone());
    App::open(config).await.unwrap()
}

async fn import(app: &App, text: &str) {
    let source = ImportSource {
        name: "test".into(),
        cluster: None,
        time_zone: SacctTimeZone::Utc,
        columns: None,
    };
    import_sacct(
        app,
        Box::new(Cursor::new(text.to_string())),
        source,
        1_800_000_000,
    )
    .await
    .unwrap();
}

/// Everything a user can see of the ledger's money: balances and the usage report.
async fn state(app: &App) -> String {
    let balances = app.ledger.balances(1_795_400_000).await.unwrap();
    let report = app
        .ledger
        .usage_report(0, 4_000_000_000, &[bursar_ledger::GroupKey::User])
        .await
        .unwrap();
    format!("{balances:?}\n{:?}\n{:?}", report.rows, report.totals)
}

/// The header (and the comment line before it) plus lines `from..to` of the body.
fn chunk(text: &str, from: usize, to: usize) -> String {
    let mut lines = text.lines();
    let mut head = Vec::new();
    for line in lines.by_ref() {
        head.push(line);
        if !line.starts_with('#') {
            break;
        }
    }
    let body: Vec<&str> = lines.collect();
    let to = to.min(body.len());
    let from = from.min(to);
    let mut out = head.join("\n");
    out.push('\n');
    for line in &body[from..to] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn synthetic() -> String {
    let cfg = SynthConfig {
        records: 300,
        seed: 7,
        clusters: vec!["onprem".into()],
        ..SynthConfig::default()
    };
    sacct_text(&cfg)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn importing_twice_changes_nothing() {
    runtime().block_on(async {
        for text in [SAMPLE.to_string(), synthetic()] {
            let dir = tempfile::tempdir().unwrap();
            let app = open(dir.path()).await;
            import(&app, &text).await;
            let once = state(&app).await;
            import(&app, &text).await;
            assert_eq!(state(&app).await, once);
        }
    });
}

#[test]
fn a_running_job_that_finishes_is_adjusted_not_charged_twice() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let app = open(dir.path()).await;
        let head = "JobIDRaw|JobID|Cluster|Account|User|Partition|QOS|State|Submit|Start|End|ElapsedRaw|AllocTRES\n";
        let running = "900|900|onprem|physics|alice|batch|normal|RUNNING|2026-11-22T01:00:00|2026-11-22T01:00:00|Unknown|600|billing=1,cpu=1,mem=1G,node=1\n";
        let done = "900|900|onprem|physics|alice|batch|normal|COMPLETED|2026-11-22T01:00:00|2026-11-22T01:00:00|2026-11-22T03:00:00|7200|billing=1,cpu=1,mem=1G,node=1\n";
        import(&app, &format!("{head}{running}")).await;
        let job = app.ledger.job("onprem", "900", 1_795_309_200).await.unwrap().expect("job recorded");
        assert_eq!(job.amount, 0, "a running job is not charged yet");
        import(&app, &format!("{head}{done}")).await;
        let job = app.ledger.job("onprem", "900", 1_795_309_200).await.unwrap().unwrap();
        assert_eq!(job.amount, 2_500_000, "1.25 su/h for 2 h");
        let entries = app
            .ledger
            .journal(&bursar_ledger::JournalQuery { job_id: Some("900".into()), ..Default::default() })
            .await
            .unwrap();
        let kinds: Vec<_> = entries.iter().map(|e| (e.kind.as_str(), e.amount)).collect();
        assert!(kinds.contains(&("adjustment", 2_500_000)), "{kinds:?}");
        assert_eq!(entries.iter().filter(|e| e.kind.as_str() == "charge").count(), 1, "{kinds:?}");
        // The stale RUNNING record arriving late changes nothing.
        import(&app, &format!("{head}{running}")).await;
        assert_eq!(app.ledger.job("onprem", "900", 1_795_309_200).await.unwrap().unwrap().amount, 2_500_000);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    #[test]
    fn any_split_into_overlapping_chunks_gives_identical_balances(
        cuts in proptest::collection::vec((0usize..1200, 0usize..200), 1..6),
        reverse in any::<bool>(),
    ) {
        let text = synthetic();
        runtime().block_on(async {
            let whole_dir = tempfile::tempdir().unwrap();
            let whole = open(whole_dir.path()).await;
            import(&whole, &text).await;
            let expected = state(&whole).await;

            let dir = tempfile::tempdir().unwrap();
            let app = open(dir.path()).await;
            let mut chunks: Vec<String> = cuts.iter().map(|&(start, len)| chunk(&text, start, start + len)).collect();
            // The chunks may not cover everything: the whole file closes the gaps, last.
            if reverse {
                chunks.reverse();
            }
            for c in &chunks {
                import(&app, c).await;
            }
            import(&app, &text).await;
            prop_assert_eq!(state(&app).await, expected);
            Ok(())
        })?;
    }
}
