//! Enforcement on Slurm: new jobs of an exhausted account are refused by Slurm itself.
//!
//! An account is *exhausted* in a currency when it (or an ancestor) has an active allocation in
//! that currency and the smallest remaining over them (`available` of [`Ledger::balances`],
//! holds included) is ≤ 0. An account with no allocation at all in the currency is not blocked:
//! bursar does not manage it there (its admission refuses such jobs anyway).
//!
//! For every Slurm cluster with `enforce: {enabled: true}` billed in that currency, bursar sets
//! `GrpSubmitJobs=0` on the account's association (`sacctmgr -i modify account where name=A
//! cluster=C set GrpSubmitJobs=0`): Slurm refuses `sbatch` at submit
//! (`AssocGrpSubmitJobsLimit`) while running and pending jobs go on. When the account is no
//! longer exhausted (a deposit, a new period) bursar puts back the value it found.
//!
//! bursar remembers what it blocked, and the value to restore, in the ledger's cursor store
//! under `enforce:<cluster>`. It never lifts a limit it did not set: an account an admin set
//! to `GrpSubmitJobs=0` by hand is left alone, and one whose limit an admin changed after
//! bursar blocked it is forgotten without being touched. Every block and lift is audited.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use bursar_ledger::NewAudit;

use crate::app::App;
use crate::config::{ClusterConfig, ClusterKind};

/// Runs `sacctmgr` with arguments; returns standard output, or an error with its stderr.
pub trait Runner: Send + Sync {
    fn run(&self, args: &[String]) -> anyhow::Result<String>;
    /// The command line as a person would type it (for `--dry-run` and the audit log).
    fn display(&self, args: &[String]) -> String;
}

/// The real `sacctmgr` of a cluster.
#[derive(Debug, Clone)]
pub struct Sacctmgr {
    pub program: PathBuf,
    pub slurm_conf: Option<PathBuf>,
}

impl Runner for Sacctmgr {
    fn run(&self, args: &[String]) -> anyhow::Result<String> {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(args);
        if let Some(conf) = &self.slurm_conf {
            cmd.env("SLURM_CONF", conf);
        }
        let out = cmd
            .output()
            .with_context(|| format!("cannot run {}", self.program.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "{} failed ({}): {} {}",
                self.display(args),
                out.status,
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(stdout)
    }

    fn display(&self, args: &[String]) -> String {
        let conf = self
            .slurm_conf
            .as_ref()
            .map(|c| format!("SLURM_CONF={} ", c.display()))
            .unwrap_or_default();
        format!("{conf}{} {}", self.program.display(), args.join(" "))
    }
}

/// One Slurm cluster bursar may act on: bursar's name, Slurm's name, currency and sacctmgr.
pub struct Target {
    pub cluster: String,
    pub slurm_cluster: String,
    pub currency: String,
    pub runner: Arc<dyn Runner>,
}

impl Target {
    /// The cluster's target when it has an `enforce` section (enabled or not).
    pub fn from_config(name: &str, cluster: &ClusterConfig) -> Option<Target> {
        let e = cluster.enforce.as_ref()?;
        if cluster.kind != ClusterKind::Slurm {
            return None;
        }
        Some(Target {
            cluster: name.to_string(),
            slurm_cluster: e.slurm_cluster.clone().unwrap_or_else(|| name.to_string()),
            currency: cluster.currency.clone(),
            runner: Arc::new(Sacctmgr {
                program: e.sacctmgr.clone().unwrap_or_else(|| "sacctmgr".into()),
                slurm_conf: e.slurm_conf.clone(),
            }),
        })
    }
}

/// The clusters with `enforce: {enabled: true}`, by name.
pub fn enabled_targets(app: &App) -> Vec<Target> {
    app.config
        .clusters
        .iter()
        .filter(|(_, c)| c.enforce.as_ref().is_some_and(|e| e.enabled))
        .filter_map(|(n, c)| Target::from_config(n, c))
        .collect()
}

/// The cursor-store key of a cluster's enforcement state.
pub fn state_key(cluster: &str) -> String {
    format!("enforce:{cluster}")
}

/// What bursar blocked on a cluster: account → the `GrpSubmitJobs` value to put back.
pub async fn load_state(app: &App, cluster: &str) -> anyhow::Result<BTreeMap<String, String>> {
    match app.ledger.get_cursor(&state_key(cluster)).await? {
        Some(text) => serde_json::from_str(&text)
            .with_context(|| format!("enforcement state of {cluster} is unreadable: {text}")),
        None => Ok(BTreeMap::new()),
    }
}

async fn save_state(
    app: &App,
    cluster: &str,
    state: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    app.ledger
        .set_cursor(&state_key(cluster), &serde_json::to_string(state)?)
        .await?;
    Ok(())
}

/// `sacctmgr -n -P show assoc format=Account,User,GrpSubmit cluster=C`: account-level
/// associations (no user) → their `GrpSubmit` ("" when unset). `root` is left out.
pub fn parse_grp_submit(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('|').collect();
        if fields.len() < 3 {
            continue;
        }
        let (account, user, grp) = (fields[0].trim(), fields[1].trim(), fields[2].trim());
        if account.is_empty() || account == "root" || !user.is_empty() {
            continue;
        }
        out.insert(account.to_string(), grp.to_string());
    }
    out
}

/// One change to make in Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set `GrpSubmitJobs=0`; `restore` is what to put back when lifting.
    Block { account: String, restore: String },
    /// Put `GrpSubmitJobs` back to `restore` (`-1`: no limit).
    Lift { account: String, restore: String },
}

/// What one enforcement pass does on one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Accounts to drop from bursar's state without touching Slurm.
    pub forget: Vec<String>,
    /// Why something was left alone.
    pub notes: Vec<String>,
}

/// Decides which accounts to block and lift. `exhausted`: accounts out of money in the
/// cluster's currency; `slurm`: the cluster's accounts with their `GrpSubmit`; `ours`: what
/// bursar blocked before (account → value to restore).
pub fn plan(
    exhausted: &BTreeSet<String>,
    slurm: &BTreeMap<String, String>,
    ours: &BTreeMap<String, String>,
) -> Plan {
    let mut plan = Plan::default();
    for (account, grp) in slurm {
        let blocked_now = grp == "0";
        match (exhausted.contains(account), ours.get(account)) {
            (true, None) if blocked_now => plan.notes.push(format!(
                "{account}: already GrpSubmitJobs=0 (set by hand; bursar leaves it)"
            )),
            (true, None) => plan.actions.push(Action::Block {
                account: account.clone(),
                restore: if grp.is_empty() {
                    "-1".into()
                } else {
                    grp.clone()
                },
            }),
            (true, Some(restore)) if !blocked_now => {
                plan.notes.push(format!(
                    "{account}: GrpSubmitJobs was changed to {grp:?} by hand while exhausted; blocking again"
                ));
                plan.actions.push(Action::Block {
                    account: account.clone(),
                    restore: restore.clone(),
                });
            }
            (true, Some(_)) => {}
            (false, Some(restore)) if blocked_now => plan.actions.push(Action::Lift {
                account: account.clone(),
                restore: restore.clone(),
            }),
            (false, Some(_)) => {
                plan.notes.push(format!(
                    "{account}: GrpSubmitJobs was changed to {grp:?} by hand; bursar forgets its block"
                ));
                plan.forget.push(account.clone());
            }
            (false, None) => {}
        }
    }
    for account in ours.keys() {
        if !slurm.contains_key(account) {
            plan.notes.push(format!(
                "{account}: no longer in Slurm; bursar forgets its block"
            ));
            plan.forget.push(account.clone());
        }
    }
    plan
}

/// The sacctmgr arguments of an action on `slurm_cluster`.
pub fn action_args(action: &Action, slurm_cluster: &str) -> Vec<String> {
    let (account, value) = match action {
        Action::Block { account, .. } => (account, "0"),
        Action::Lift { account, restore } => (account, restore.as_str()),
    };
    [
        "-i".to_string(),
        "modify".into(),
        "account".into(),
        "where".into(),
        format!("name={account}"),
        format!("cluster={slurm_cluster}"),
        "set".into(),
        format!("GrpSubmitJobs={value}"),
    ]
    .into()
}

/// Accounts whose `available` in `currency` at `now` is ≤ 0.
pub async fn exhausted(app: &App, currency: &str, now: i64) -> anyhow::Result<BTreeSet<String>> {
    Ok(app
        .ledger
        .balances(now)
        .await?
        .into_iter()
        .filter(|b| b.currency.as_str() == currency && b.available.is_some_and(|a| a <= 0))
        .map(|b| b.account)
        .collect())
}

/// What a pass did on one cluster.
#[derive(Debug, Default)]
pub struct Outcome {
    pub blocked: Vec<String>,
    pub lifted: Vec<String>,
    pub errors: Vec<String>,
}

static PASS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One enforcement pass over `targets`. With `dry_run`, prints the sacctmgr commands it would
/// run and changes nothing; otherwise runs them, audits them and prints them to `out`.
pub async fn pass<W: Write>(
    app: &App,
    targets: &[Target],
    dry_run: bool,
    out: &mut W,
) -> anyhow::Result<Vec<Outcome>> {
    let _one_at_a_time = PASS.lock().await;
    let now = crate::timefmt::now();
    let mut outcomes = Vec::new();
    for t in targets {
        let mut outcome = Outcome::default();
        let exhausted = exhausted(app, &t.currency, now).await?;
        let show: Vec<String> = ["-n", "-P", "show", "assoc", "format=Account,User,GrpSubmit"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("cluster={}", t.slurm_cluster)])
            .collect();
        let runner = t.runner.clone();
        let listed = tokio::task::spawn_blocking(move || runner.run(&show)).await??;
        let slurm = parse_grp_submit(&listed);
        let mut ours = load_state(app, &t.cluster).await?;
        let plan = plan(&exhausted, &slurm, &ours);
        for note in &plan.notes {
            writeln!(out, "{}: {note}", t.cluster)?;
        }
        if plan.actions.is_empty() {
            writeln!(out, "{}: nothing to change", t.cluster)?;
        }
        for action in &plan.actions {
            let args = action_args(action, &t.slurm_cluster);
            let line = t.runner.display(&args);
            if dry_run {
                writeln!(out, "{line}")?;
                continue;
            }
            let runner = t.runner.clone();
            let run_args = args.clone();
            match tokio::task::spawn_blocking(move || runner.run(&run_args)).await? {
                Err(e) => {
                    tracing::error!(cluster = %t.cluster, "{e:#}");
                    writeln!(out, "{line}  # FAILED: {e:#}")?;
                    outcome.errors.push(format!("{e:#}"));
                    continue;
                }
                Ok(_) => writeln!(out, "{line}")?,
            }
            let (verb, account, before, after) = match action {
                Action::Block { account, restore } => {
                    ours.insert(account.clone(), restore.clone());
                    outcome.blocked.push(account.clone());
                    ("enforce.block", account, restore.as_str(), "0")
                }
                Action::Lift { account, restore } => {
                    ours.remove(account);
                    outcome.lifted.push(account.clone());
                    ("enforce.lift", account, "0", restore.as_str())
                }
            };
            save_state(app, &t.cluster, &ours).await?;
            app.ledger
                .audit(&NewAudit {
                    at: now,
                    actor: "bursar".into(),
                    role: "system".into(),
                    action: verb.into(),
                    target: format!("{}/{account}", t.cluster),
                    before: Some(format!("GrpSubmitJobs={before}")),
                    after: Some(format!("GrpSubmitJobs={after}; {line}")),
                })
                .await?;
            tracing::info!(cluster = %t.cluster, %account, action = verb, "enforcement");
        }
        if !dry_run && !plan.forget.is_empty() {
            for account in &plan.forget {
                ours.remove(account);
            }
            save_state(app, &t.cluster, &ours).await?;
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// `bursar enforce [--dry-run] [-M CLUSTER]`: exit 1 when a sacctmgr command failed.
pub async fn command(
    app: &App,
    args: crate::cli::EnforceArgs,
    out: &mut impl Write,
) -> anyhow::Result<std::process::ExitCode> {
    let targets: Vec<Target> = match &args.cluster {
        Some(name) => {
            let Some(cluster) = app.config.clusters.get(name) else {
                bail!("cluster {name} is not configured");
            };
            match Target::from_config(name, cluster) {
                Some(t) if cluster.enforce.as_ref().is_some_and(|e| e.enabled) => vec![t],
                _ => bail!("cluster {name} has no `enforce: {{enabled: true}}` section"),
            }
        }
        None => enabled_targets(app),
    };
    if targets.is_empty() {
        writeln!(
            out,
            "no cluster has `enforce: {{enabled: true}}`: nothing to do"
        )?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let outcomes = pass(app, &targets, args.dry_run, out).await?;
    let failed = outcomes.iter().any(|o| !o.errors.is_empty());
    Ok(if failed {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// Per account, the clusters where bursar has blocked it (for `bursar accounts`).
pub async fn blocked_by_account(app: &App) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, cluster) in &app.config.clusters {
        if cluster.enforce.is_none() {
            continue;
        }
        for account in load_state(app, name).await?.into_keys() {
            out.entry(account).or_default().push(name.clone());
        }
    }
    Ok(out)
}

/// The enforcement pass of the serve loop, after a collection pass: every enabled cluster.
pub async fn after_collection(app: &App) {
    let targets = enabled_targets(app);
    if targets.is_empty() {
        return;
    }
    let mut sink = std::io::sink();
    if let Err(e) = pass(app, &targets, false, &mut sink).await {
        tracing::error!("enforcement pass failed: {e:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn parses_the_captured_assoc_listing() {
        let text = include_str!("../tests/fixtures/sacctmgr-show-assoc-grpsubmit.psv");
        let got = parse_grp_submit(text);
        assert_eq!(
            got,
            map(&[("chemistry", ""), ("org", ""), ("physics", "0")])
        );
    }

    #[test]
    fn blocks_exhausted_accounts_and_lifts_only_its_own_blocks() {
        let slurm = map(&[
            ("org", ""),
            ("physics", ""),
            ("chemistry", "0"),
            ("bio", "5"),
            ("math", "0"),
        ]);
        // physics exhausted, unblocked → block; chemistry exhausted but blocked by hand →
        // note; bio exhausted with an admin limit 5 → block, restore 5 later; math: ours,
        // topped up → lift.
        let ours = map(&[("math", "-1"), ("gone", "-1")]);
        let p = plan(&set(&["physics", "chemistry", "bio"]), &slurm, &ours);
        assert_eq!(
            p.actions,
            vec![
                Action::Block {
                    account: "bio".into(),
                    restore: "5".into()
                },
                Action::Lift {
                    account: "math".into(),
                    restore: "-1".into()
                },
                Action::Block {
                    account: "physics".into(),
                    restore: "-1".into()
                },
            ]
        );
        assert_eq!(p.forget, vec!["gone".to_string()]);
        assert!(p.notes.iter().any(|n| n.starts_with("chemistry")));
        // A limit an admin set by hand (chemistry) is never lifted.
        let p = plan(&set(&[]), &slurm, &map(&[]));
        assert!(p.actions.is_empty());
        // Idempotent: once blocked, nothing more to do.
        let p = plan(
            &set(&["physics"]),
            &map(&[("physics", "0")]),
            &map(&[("physics", "-1")]),
        );
        assert_eq!(p, Plan::default());
        // Changed by hand after bursar blocked it, then topped up: forgotten, untouched.
        let p = plan(
            &set(&[]),
            &map(&[("physics", "10")]),
            &map(&[("physics", "-1")]),
        );
        assert!(p.actions.is_empty());
        assert_eq!(p.forget, vec!["physics".to_string()]);
    }

    struct Fake {
        listing: String,
        calls: std::sync::Mutex<Vec<String>>,
    }

    impl Runner for Fake {
        fn run(&self, args: &[String]) -> anyhow::Result<String> {
            self.calls.lock().unwrap().push(args.join(" "));
            Ok(self.listing.clone())
        }
        fn display(&self, args: &[String]) -> String {
            format!("sacctmgr {}", args.join(" "))
        }
    }

    #[tokio::test]
    async fn a_pass_blocks_audits_remembers_and_lifts_after_a_deposit() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "database: sqlite://{}/b.db\naccounts:\n  org: {{}}\n  physics: {{parent: org}}\n\
             clusters:\n  onprem: {{kind: slurm, currency: su}}\n",
            dir.path().display()
        );
        let app = App::open(crate::config::Config::parse(&yaml).unwrap())
            .await
            .unwrap();
        let now = crate::timefmt::now();
        app.ledger
            .set_allocation(
                "physics",
                &bursar_pricing::Currency::new("su"),
                0,
                now - 10,
                now + 3600,
            )
            .await
            .unwrap();
        let fake = Arc::new(Fake {
            listing: "org||\nphysics||\nphysics|alice|\n".into(),
            calls: Default::default(),
        });
        let targets = [Target {
            cluster: "onprem".into(),
            slurm_cluster: "onprem".into(),
            currency: "su".into(),
            runner: fake.clone(),
        }];
        let mut out = Vec::new();
        pass(&app, &targets, true, &mut out).await.unwrap();
        assert!(load_state(&app, "onprem").await.unwrap().is_empty());
        pass(&app, &targets, false, &mut out).await.unwrap();
        assert_eq!(
            load_state(&app, "onprem").await.unwrap(),
            map(&[("physics", "-1")])
        );
        let calls = fake.calls.lock().unwrap().clone();
        assert_eq!(
            calls.last().unwrap(),
            "-i modify account where name=physics cluster=onprem set GrpSubmitJobs=0"
        );
        let audit = app.ledger.audit_log(Some(1)).await.unwrap();
        assert_eq!(audit[0].action, "enforce.block");
        assert_eq!(audit[0].target, "onprem/physics");
        // Deposit: lift on the next pass (Slurm now shows the block).
        app.ledger
            .set_allocation(
                "physics",
                &bursar_pricing::Currency::new("su"),
                5_000_000,
                now - 10,
                now + 3600,
            )
            .await
            .unwrap();
        let fake2 = Arc::new(Fake {
            listing: "org||\nphysics||0\n".into(),
            calls: Default::default(),
        });
        let targets = [Target {
            runner: fake2.clone(),
            ..targets.into_iter().next().unwrap()
        }];
        pass(&app, &targets, false, &mut out).await.unwrap();
        assert!(load_state(&app, "onprem").await.unwrap().is_empty());
        assert_eq!(
            fake2.calls.lock().unwrap().last().unwrap(),
            "-i modify account where name=physics cluster=onprem set GrpSubmitJobs=-1"
        );
        assert_eq!(
            app.ledger.audit_log(Some(1)).await.unwrap()[0].action,
            "enforce.lift"
        );
    }
}
