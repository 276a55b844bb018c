//! `bursar sync import|push --cluster C [--dry-run]`: the account tree and user associations
//! between a Slurm cluster and the ledger, and (push only) bursar's users as members of a dstack
//! cluster's project ([`dstack`]). Only ever adds: nothing is deleted or moved, on either side;
//! every change is audited (`sync.import` / `sync.push`).
//!
//! Slurm is read with `sacctmgr -n -P show assoc format=Account,ParentName,User cluster=C` (an
//! account line has no user and names its parent; a user line has no parent) and `sacctmgr -n
//! -P show user format=User,DefaultAccount`. sacctmgr, `SLURM_CONF` and Slurm's cluster name
//! come from the cluster's `enforce` section, else its `collect.sacct` section.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use anyhow::bail;
use bursar_ledger::NewAudit;

use crate::app::App;
use crate::cli::{SyncArgs, SyncCommand};
use crate::enforce::{Runner, Sacctmgr};

pub mod dstack;

/// The accounts and associations of one Slurm cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmTree {
    /// Account → parent (`root` has none and is left out).
    pub accounts: BTreeMap<String, String>,
    /// (user, account) pairs.
    pub associations: BTreeSet<(String, String)>,
    /// User → default account (users of any cluster).
    pub defaults: BTreeMap<String, String>,
}

/// Parses `show assoc format=Account,ParentName,User` and `show user
/// format=User,DefaultAccount` (both `-n -P`). The `root` account and user are left out.
pub fn parse_tree(assoc: &str, users: &str) -> SlurmTree {
    let mut tree = SlurmTree::default();
    for line in assoc.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        if f.len() < 3 || f[0].is_empty() || f[0] == "root" {
            continue;
        }
        if f[2].is_empty() {
            let parent = if f[1].is_empty() { "root" } else { f[1] };
            tree.accounts.insert(f[0].to_string(), parent.to_string());
        } else if f[2] != "root" {
            tree.associations
                .insert((f[2].to_string(), f[0].to_string()));
        }
    }
    for line in users.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        if f.len() >= 2 && !f[0].is_empty() && f[0] != "root" && !f[1].is_empty() {
            tree.defaults.insert(f[0].to_string(), f[1].to_string());
        }
    }
    tree
}

/// Accounts ordered parents first (by depth under root), given account → parent.
fn parents_first(parents: &BTreeMap<String, String>) -> Vec<String> {
    let depth = |name: &str| {
        let mut d = 0;
        let mut cursor = parents.get(name);
        while let Some(p) = cursor.filter(|p| *p != "root" && d < 64) {
            d += 1;
            cursor = parents.get(p.as_str());
        }
        d
    };
    let mut names: Vec<String> = parents.keys().cloned().collect();
    names.sort_by_key(|n| depth(n));
    names
}

/// One change `sync` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Account {
        name: String,
        parent: String,
    },
    User {
        name: String,
        default_account: String,
    },
    Association {
        user: String,
        account: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Account { name, parent } => write!(f, "account {name} (parent {parent})"),
            Change::User {
                name,
                default_account,
            } => write!(f, "user {name} (default account {default_account})"),
            Change::Association { user, account } => write!(f, "association {user} → {account}"),
        }
    }
}

/// What the ledger lacks of `slurm`, in an order that can be applied (parents first, users
/// before their associations).
pub fn import_changes(
    slurm: &SlurmTree,
    ledger_accounts: &BTreeSet<String>,
    ledger_users: &BTreeSet<String>,
    ledger_assocs: &BTreeSet<(String, String)>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    for name in parents_first(&slurm.accounts) {
        if !ledger_accounts.contains(&name) {
            changes.push(Change::Account {
                parent: slurm.accounts[&name].clone(),
                name,
            });
        }
    }
    let slurm_users: BTreeSet<&String> = slurm.associations.iter().map(|(u, _)| u).collect();
    for user in slurm_users {
        if ledger_users.contains(user) {
            continue;
        }
        let default_account = slurm.defaults.get(user).cloned().unwrap_or_else(|| {
            let first = slurm.associations.iter().find(|(u, _)| u == user);
            first.map(|(_, a)| a.clone()).unwrap_or_default()
        });
        changes.push(Change::User {
            name: user.clone(),
            default_account,
        });
    }
    for (user, account) in &slurm.associations {
        if !ledger_assocs.contains(&(user.clone(), account.clone())) {
            changes.push(Change::Association {
                user: user.clone(),
                account: account.clone(),
            });
        }
    }
    changes
}

/// The sacctmgr arguments that create in Slurm what it lacks of the ledger's tree.
pub fn push_commands(
    slurm: &SlurmTree,
    slurm_cluster: &str,
    ledger_parents: &BTreeMap<String, String>,
    ledger_assocs: &BTreeSet<(String, String)>,
    ledger_defaults: &BTreeMap<String, String>,
) -> Vec<(Change, Vec<String>)> {
    let mut out = Vec::new();
    for name in parents_first(ledger_parents) {
        if name == "root" || slurm.accounts.contains_key(&name) {
            continue;
        }
        let parent = ledger_parents[&name].clone();
        let args = vec![
            "-i".to_string(),
            "add".into(),
            "account".into(),
            name.clone(),
            format!("cluster={slurm_cluster}"),
            format!("parent={parent}"),
        ];
        out.push((Change::Account { name, parent }, args));
    }
    let known_users: BTreeSet<&String> = slurm
        .associations
        .iter()
        .map(|(u, _)| u)
        .chain(slurm.defaults.keys())
        .collect();
    for (user, account) in ledger_assocs {
        if slurm
            .associations
            .contains(&(user.clone(), account.clone()))
        {
            continue;
        }
        let mut args = vec![
            "-i".to_string(),
            "add".into(),
            "user".into(),
            user.clone(),
            format!("account={account}"),
            format!("cluster={slurm_cluster}"),
        ];
        if !known_users.contains(user) {
            if let Some(default) = ledger_defaults.get(user) {
                args.push(format!("defaultaccount={default}"));
            }
        }
        out.push((
            Change::Association {
                user: user.clone(),
                account: account.clone(),
            },
            args,
        ));
    }
    out
}

/// sacctmgr and Slurm's cluster name for `cluster`.
fn runner_for(app: &App, cluster: &str) -> anyhow::Result<(Arc<dyn Runner>, String)> {
    let Some(c) = app.config.clusters.get(cluster) else {
        bail!("cluster {cluster} is not configured");
    };
    if c.kind != crate::config::ClusterKind::Slurm {
        bail!(
            "sync import reads a Slurm cluster's tree; cluster {cluster} is a dstack cluster \
             (sync push adds bursar's users to its project)"
        );
    }
    if let Some(t) = crate::enforce::Target::from_config(cluster, c) {
        return Ok((t.runner, t.slurm_cluster));
    }
    let sacct = c.collect.as_ref().and_then(|k| k.sacct.as_ref());
    Ok((
        Arc::new(Sacctmgr {
            program: "sacctmgr".into(),
            slurm_conf: sacct.and_then(|s| s.slurm_conf.clone()),
        }),
        sacct
            .and_then(|s| s.slurm_cluster.clone())
            .unwrap_or_else(|| cluster.to_string()),
    ))
}

async fn read_slurm(runner: &Arc<dyn Runner>, slurm_cluster: &str) -> anyhow::Result<SlurmTree> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut assoc_args = words(&[
        "-n",
        "-P",
        "show",
        "assoc",
        "format=Account,ParentName,User",
    ]);
    assoc_args.push(format!("cluster={slurm_cluster}"));
    let user_args = words(&["-n", "-P", "show", "user", "format=User,DefaultAccount"]);
    let r = runner.clone();
    let (assoc, users) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        Ok((r.run(&assoc_args)?, r.run(&user_args)?))
    })
    .await??;
    Ok(parse_tree(&assoc, &users))
}

/// `bursar sync import|push`.
pub async fn command(app: &App, command: SyncCommand, out: &mut impl Write) -> anyhow::Result<()> {
    let (push, args): (bool, SyncArgs) = match command {
        SyncCommand::Import(a) => (false, a),
        SyncCommand::Push(a) => (true, a),
    };
    if push {
        if let Some(c) = app.config.clusters.get(&args.cluster) {
            if c.kind == crate::config::ClusterKind::Dstack {
                return dstack::push(app, &args.cluster, c, args.dry_run, out).await;
            }
        }
    }
    let (runner, slurm_cluster) = runner_for(app, &args.cluster)?;
    let slurm = read_slurm(&runner, &slurm_cluster).await?;
    let accounts = app.ledger.accounts().await?;
    let users = app.ledger.users().await?;
    let assocs: BTreeSet<(String, String)> = app
        .ledger
        .associations()
        .await?
        .into_iter()
        .map(|a| (a.user, a.account))
        .collect();
    let audit = |action: &str, target: String, after: String| NewAudit {
        at: crate::timefmt::now(),
        actor: "bursar".into(),
        role: "admin".into(),
        action: action.into(),
        target,
        before: None,
        after: Some(after),
    };
    let prefix = if args.dry_run { "would add" } else { "added" };
    if push {
        let parents: BTreeMap<String, String> = accounts
            .iter()
            .map(|a| {
                (
                    a.name.clone(),
                    a.parent.clone().unwrap_or_else(|| "root".into()),
                )
            })
            .collect();
        let defaults = users
            .iter()
            .map(|u| (u.name.clone(), u.default_account.clone()))
            .collect();
        let commands = push_commands(&slurm, &slurm_cluster, &parents, &assocs, &defaults);
        if commands.is_empty() {
            writeln!(
                out,
                "{}: Slurm has every account and association of the ledger",
                args.cluster
            )?;
        }
        for (change, cmd) in commands {
            let line = runner.display(&cmd);
            if args.dry_run {
                writeln!(out, "{line}")?;
                continue;
            }
            let r = runner.clone();
            tokio::task::spawn_blocking(move || r.run(&cmd)).await??;
            writeln!(out, "{line}")?;
            app.ledger
                .audit(&audit(
                    "sync.push",
                    format!("{}/{change}", args.cluster),
                    line,
                ))
                .await?;
        }
        return Ok(());
    }
    let ledger_accounts = accounts.iter().map(|a| a.name.clone()).collect();
    let ledger_users = users.iter().map(|u| u.name.clone()).collect();
    let changes = import_changes(&slurm, &ledger_accounts, &ledger_users, &assocs);
    if changes.is_empty() {
        writeln!(
            out,
            "{}: the ledger has every account and association of Slurm",
            args.cluster
        )?;
    }
    for change in changes {
        writeln!(out, "{prefix} {change}")?;
        if args.dry_run {
            continue;
        }
        match &change {
            Change::Account { name, parent } => {
                let parent = Some(parent.as_str()).filter(|p| *p != "root");
                app.ledger.ensure_account(name, parent).await?;
            }
            Change::User {
                name,
                default_account,
            } => {
                app.ledger.upsert_user(name, default_account).await?;
            }
            Change::Association { user, account } => {
                app.ledger.associate(user, account).await?;
            }
        }
        app.ledger
            .audit(&audit(
                "sync.import",
                format!("{}/{change}", args.cluster),
                change.to_string(),
            ))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> SlurmTree {
        parse_tree(
            include_str!("../tests/fixtures/sacctmgr-show-assoc-tree-onprem.psv"),
            include_str!("../tests/fixtures/sacctmgr-show-user-onprem.psv"),
        )
    }

    fn pair(u: &str, a: &str) -> (String, String) {
        (u.to_string(), a.to_string())
    }

    #[test]
    fn parses_the_captured_tree() {
        let t = tree();
        assert_eq!(
            t.accounts
                .iter()
                .map(|(a, p)| format!("{a}<{p}"))
                .collect::<Vec<_>>(),
            ["chemistry<org", "org<root", "physics<org"]
        );
        assert_eq!(
            t.associations,
            [
                pair("alice", "physics"),
                pair("bob", "chemistry"),
                pair("carol", "chemistry"),
                pair("carol", "physics")
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(t.defaults["carol"], "physics");
        assert!(!t.defaults.contains_key("root"));
    }

    #[test]
    fn import_adds_what_the_ledger_lacks_parents_first() {
        let t = tree();
        let changes = import_changes(
            &t,
            &["root".to_string(), "chemistry".into()]
                .into_iter()
                .collect(),
            &["bob".to_string()].into_iter().collect(),
            &[pair("bob", "chemistry")].into_iter().collect(),
        );
        let text: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            text,
            [
                "account org (parent root)",
                "account physics (parent org)",
                "user alice (default account physics)",
                "user carol (default account physics)",
                "association alice → physics",
                "association carol → chemistry",
                "association carol → physics",
            ]
        );
    }

    #[test]
    fn push_adds_accounts_and_users_slurm_lacks_and_never_deletes() {
        let t = tree();
        let parents: BTreeMap<String, String> = [
            ("org", "root"),
            ("physics", "org"),
            ("bio", "org"),
            ("genomics", "bio"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let assocs = [
            pair("alice", "physics"),
            pair("alice", "bio"),
            pair("dave", "genomics"),
        ]
        .into_iter()
        .collect();
        let defaults = [("dave".to_string(), "genomics".to_string())].into();
        let cmds: Vec<String> = push_commands(&t, "onprem", &parents, &assocs, &defaults)
            .into_iter()
            .map(|(_, a)| a.join(" "))
            .collect();
        assert_eq!(
            cmds,
            [
                "-i add account bio cluster=onprem parent=org",
                "-i add account genomics cluster=onprem parent=bio",
                "-i add user alice account=bio cluster=onprem",
                "-i add user dave account=genomics cluster=onprem defaultaccount=genomics",
            ]
        );
    }
}
